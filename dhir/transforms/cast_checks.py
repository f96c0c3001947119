"""`dhir-cast-checks`: under `--runtime-checks`, a `memref.reinterpret_cast` of host code
stops the run at its op when its view reaches outside the buffer it views.

MLIR 22's `--generate-runtime-verification` makes no check for `reinterpret_cast`, and
the accesses through the view are checked only against the view's own sizes: a view
past its buffer read and wrote outside it and exited 0, where the interpreter stops at
the cast. The offset is counted from the start of the buffer (MLIR's base pointer), so
the check needs the buffer's size, which a memref does not carry: the cast's source is
followed back through views (`subview`, `cast`, `reinterpret_cast`, `expand_shape`,
`collapse_shape`, `transpose`, `assume_alignment`, `memory_space_cast`,
`extract_strided_metadata`) to the `memref.alloc`, `alloca` or `get_global` of an
identity layout that made it, or to a function's argument of an identity layout that
is all of its buffer (dhir.analysis.sharing: no call passes it a view; the entry's, as
the harness passes them, the whole arrays, also where a rank holds only its rows, whose
descriptor keeps the global sizes and subscripts). The view's lowest and highest
elements must then lie in it (a view of no element may start anywhere up to its end).
Casts of other memrefs (an argument some call passes a view, a call's results) are not
checked, nor device code.

MLIR 22 checks no `memref.view` either: its bytes, from its shift on, must lie in its
source (a 1-D memref of i8 of the identity layout, whose size its descriptor has), as
the interpreter requires.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, MemRefType, ModuleOp
from xdsl.ir import BlockArgument, OpResult, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.sharing import CastReach
from dhir.dialects import arith, func, memref
from dhir.dialects.gpu import in_device_code
from dhir.dialects.layouts import is_identity_layout
from dhir.dialects.memref import TransposeOp
from dhir.ir.walk import find_ops
from dhir.transforms.vector_checks import CheckBuilder

# What a failed check prints (MLIR's later versions check the cast with these words).
OUTSIDE_ITS_BUFFER = "result of reinterpret_cast is out-of-bounds of the base memref"
VIEW_OUTSIDE = "result of view is out-of-bounds of the source memref"

# Ops whose result views the buffer of their first operand.
_VIEWS = (
    memref.SubviewOp,
    memref.CastOp,
    memref.ReinterpretCastOp,
    memref.ExpandShapeOp,
    memref.CollapseShapeOp,
    TransposeOp,
    memref.AssumeAlignmentOp,
    memref.MemorySpaceCastOp,
    memref.ExtractStridedMetaDataOp,
)
_BUFFERS = (memref.AllocOp, memref.AllocaOp, memref.GetGlobalOp)


@dataclass(frozen=True)
class CastChecksPass(ModulePass):
    """Host reinterpret_casts and memref.views check that they stay in their buffer.

    A reinterpret_cast is checked where its buffer is an allocation or a whole argument
    (its size known at run time); a memref.view, against its source."""

    name = "dhir-cast-checks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        reach = CastReach(op)
        for cast in list(find_ops(op, memref.ReinterpretCastOp)):
            if in_device_code(cast):
                continue
            buffer = _buffer(cast.source, reach)
            if buffer is not None:
                _check(cast, buffer)
        for view in list(find_ops(op, memref.ViewOp)):
            if not in_device_code(view):
                _check_view(view)


def _buffer(value: SSAValue, reach: CastReach) -> SSAValue | None:
    """The allocation or whole argument of identity layout `value` views, where it can
    be followed."""
    while isinstance(value, OpResult):
        made = value.op
        if isinstance(made, _BUFFERS):
            return value if _identity(value) else None
        if not isinstance(made, _VIEWS):
            return None
        value = made.operands[0]
    if not isinstance(value, BlockArgument) or not _identity(value):
        return None
    return (
        value if isinstance(value.owner.parent_op(), func.FuncOp) and reach.whole(value) else None
    )


def _identity(value: SSAValue) -> bool:
    kind = value.type
    return isinstance(kind, MemRefType) and is_identity_layout(kind)


def _check(cast: memref.ReinterpretCastOp, buffer: SSAValue) -> None:
    check = CheckBuilder(cast, OUTSIDE_ITS_BUFFER)
    kind = buffer.type
    assert isinstance(kind, MemRefType)
    total = check.index(1)
    for dim in range(kind.get_num_dims()):
        total = check.add(arith.MuliOp(total, check.size(buffer, dim)))
    (offset,) = _values(check, cast.static_offsets.get_values(), cast.offsets)
    sizes = _values(check, cast.static_sizes.get_values(), cast.sizes)
    strides = _values(check, cast.static_strides.get_values(), cast.strides)
    zero, one = check.index(0), check.index(1)
    low, high = offset, offset
    empty: list[SSAValue] = []
    for size, stride in zip(sizes, strides, strict=True):
        empty.append(check.cmp(size, zero, "sle"))
        last = check.add(arith.MaxSIOp(check.add(arith.SubiOp(size, one)), zero))
        step = check.add(arith.MuliOp(last, stride))
        low = check.add(arith.AddiOp(low, check.add(arith.MinSIOp(step, zero))))
        high = check.add(arith.AddiOp(high, check.add(arith.MaxSIOp(step, zero))))
    inside = check.all([check.cmp(low, zero, "sge"), check.cmp(high, total, "slt")])
    nothing = check.all([check.any(empty), check.cmp(offset, zero, "sge")])
    nothing = check.all([nothing, check.cmp(offset, total, "sle")])
    check.assert_(check.any([inside, nothing]))


def _check_view(view: memref.ViewOp) -> None:
    """The view's bytes, from its shift on, lie in its source; for elements of 1, 2, 4 or
    8 bytes (the interpreter runs no view of others)."""
    kind = view.result.type
    assert isinstance(kind, MemRefType)
    element = kind.element_type
    width = 64 if isinstance(element, IndexType) else getattr(element, "bitwidth", None)
    if not isinstance(width, int) or width < 8 or width & (width - 1):
        return
    check = CheckBuilder(view, VIEW_OUTSIDE)
    zero = check.index(0)
    sizes = _values(check, kind.get_shape(), view.sizes)
    ok = [check.cmp(view.byte_shift, zero, "sge")]
    end = check.index(width // 8)
    for size in sizes:
        ok.append(check.cmp(size, zero, "sge"))
        end = check.add(arith.MuliOp(end, size))
    end = check.add(arith.AddiOp(view.byte_shift, end))
    ok.append(check.cmp(end, check.size(view.source, 0), "sle"))
    check.assert_(check.all(ok))


def _values(
    check: CheckBuilder, static: Sequence[int], dynamic: Sequence[SSAValue]
) -> list[SSAValue]:
    given = iter(dynamic)
    return [next(given) if value == DYNAMIC_INDEX else check.index(value) for value in static]
