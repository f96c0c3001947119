"""`dhir-gpu-row-copies`: copies between views of rows, which MLIR 22 cannot lower, become
calls of dhir's GPU runtime.

A GPU piece of a split loop (dhir-split-devices) copies only its rows in and out:
`gpu.memcpy` between `memref.subview`s of whole rows, which are contiguous but have an
offset. MLIR 22's `gpu-to-llvm` lowers `gpu.memcpy` of memrefs without a layout only and
leaves these in place (the build then fails). Each one becomes

    dhir_rt_gpu_copy(destination address, source address, bytes)

with each address the view's aligned pointer plus its static offset. The runtime copies
on a stream of its own and waits for it; `gpu-async-region` already makes the host wait
for earlier GPU work before any call, so the copy is ordered as the `gpu.memcpy` was.
Views that are not one contiguous block, or have a dynamic offset, are refused.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StridedLayoutAttr,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dhir.dialects import arith, func
from dhir.dialects.gpu import MemcpyOp
from dhir.dialects.layouts import is_contiguous_layout
from dhir.ir.layout import element_bytes
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.walk import find_ops
from dhir.transforms.building import first_address

COPY_HOOK = "dhir_rt_gpu_copy"


@dataclass(frozen=True)
class GpuRowCopiesPass(ModulePass):
    """`gpu.memcpy` between contiguous views with an offset becomes a runtime call."""

    name = "dhir-gpu-row-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        copies = [c for c in find_ops(op, MemcpyOp) if _has_layout(c)]
        for copy in copies:
            _rewrite(copy)
        if copies:
            op.body.block.add_op(func.FuncOp.external(COPY_HOOK, [i64, i64, i64], []))


def _has_layout(copy: MemcpyOp) -> bool:
    return any(
        isinstance(v.type, MemRefType) and not isinstance(v.type.layout, NoneAttr)
        for v in (copy.dst, copy.src)
    )


def _rewrite(copy: MemcpyOp) -> None:
    if copy.asyncDependencies or copy.asyncToken is not None:
        raise PassFailedAt(copy, "an asynchronous copy of a view cannot be lowered")
    widths = [_element_bytes(copy, v) for v in (copy.dst, copy.src)]
    ops: list[Operation] = []
    addresses = [first_address(ops, v) for v in (copy.dst, copy.src)]
    type_ = copy.src.type
    assert isinstance(type_, MemRefType)
    count = 1
    for extent in type_.get_shape():
        count *= extent
    size = arith.ConstantOp(IntegerAttr(count * widths[1], i64))
    call = func.CallOp(COPY_HOOK, [*addresses, size.result], [])
    block = copy.parent_block()
    assert block is not None
    block.insert_ops_before([*ops, size, call], copy)
    copy.detach()
    copy.erase()


def _element_bytes(copy: MemcpyOp, value: SSAValue) -> int:
    """The bytes of an element of `value`, a memref of static shape whose elements are one
    row-major block at a static offset, as LLVM lays them out (i24 takes 4, i1 1); any
    other memref is an error at `copy`."""
    type_ = value.type
    assert isinstance(type_, MemRefType)
    if any(e < 0 for e in type_.get_shape()):
        raise PassFailedAt(copy, f"cannot copy {type_}: only views of a static shape are copied")
    layout = type_.layout
    dynamic = isinstance(layout, StridedLayoutAttr) and layout.get_offset() is None
    if not is_contiguous_layout(type_) or dynamic:
        raise PassFailedAt(
            copy, f"cannot copy {type_}: the view is not one contiguous block with a static offset"
        )
    width = element_bytes(type_.element_type)
    if width is None:
        raise PassFailedAt(copy, f"cannot copy elements of type {type_.element_type}")
    return width
