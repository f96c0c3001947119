"""`dhir-alloc-sizes`: host `memref.alloc` and `memref.alloca` of sizes known only at run
time stop the rank, naming the op, when a size is negative or their bytes pass the largest
signed 64-bit number, as the interpreter stops; a host `memref.alloc` that malloc cannot
satisfy (it returns NULL) stops the rank too, naming the op and its bytes.

MLIR 22's lowering multiplies the sizes and the element's bytes in 64 bits without a
check: `memref.alloc(%n) : memref<?x2xf64>` with n = 2**60 + 1 asked malloc for 16 bytes,
and stores past them exited 0. Each dynamic size is checked as it is multiplied in, with
`arith.mului_extended` (its high word must be 0 and its low word non-negative), once per
allocation. Nor does the lowering look at malloc's result: `memref.alloc(%n)` of 800 TB
stored through a null pointer and the rank died of SIGSEGV, naming nothing. An `alloca`
takes the stack, which has no null to compare. Device code is left alone: it cannot call
the runtime.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, i1, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dhir.dialects import arith, func, memref, scf
from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import loc_of
from dhir.ir.layout import stored_bytes
from dhir.ir.walk import find_ops
from dhir.transforms.building import declare, insert_before, put

TOO_LARGE = "dhir_rt_alloc_too_large"
FAILED = "dhir_rt_alloc_failed"


@dataclass(frozen=True)
class AllocSizesPass(ModulePass):
    """Stop the rank at a host allocation whose run-time sizes are negative or overflow."""

    name = "dhir-alloc-sizes"
    needs: ClassVar[tuple[type[Operation], ...]] = (memref.AllocOp, memref.AllocaOp)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        guarded = checked = False
        for alloc in find_ops(op, (memref.AllocOp, memref.AllocaOp)):
            if in_device_code(alloc):
                continue
            total = _guard(alloc) if alloc.dynamic_sizes else _static_bytes(alloc)
            guarded |= isinstance(total, SSAValue)
            if isinstance(alloc, memref.AllocOp) and total:
                _check_null(alloc, total)
                checked = True
        if guarded:
            declare(op, TOO_LARGE, [i64, i64], [], owner="dhir's runtime")
        if checked:
            declare(op, FAILED, [i64, i64, i64], [], owner="dhir's runtime")


def _static_bytes(alloc: memref.AllocOp | memref.AllocaOp) -> int | None:
    """The bytes of an allocation of static shape; None where its element's are not known."""
    kind = alloc.memref.type
    assert isinstance(kind, MemRefType)
    element = stored_bytes(kind.element_type)
    if element is None:
        return None
    for size in kind.get_shape():
        element *= size
    return element


def _guard(alloc: memref.AllocOp | memref.AllocaOp) -> SSAValue | None:
    """Before `alloc`: multiply its static bytes by each dynamic size, and call the runtime
    with its line and column if a size is negative or a product passes 2**63 - 1. The
    bytes, as an i64 (valid where the call did not stop the rank); None where the
    element's bytes are not known (the op is then left as it is)."""
    kind = alloc.memref.type
    assert isinstance(kind, MemRefType)
    element = stored_bytes(kind.element_type)
    if element is None:
        return None
    static = element
    for size in kind.get_shape():
        static *= max(size, 1)
    ops = Block()
    zero = put(ops, arith.ConstantOp.from_int_and_width(0, 64)).result
    total = put(ops, arith.ConstantOp.from_int_and_width(static, 64)).result
    bad = put(ops, arith.ConstantOp(IntegerAttr(0, i1), i1)).result
    for index in alloc.dynamic_sizes:
        size = put(ops, arith.IndexCastOp(index, i64)).result
        product = put(ops, arith.MulUIExtendedOp(total, size))
        total = product.low
        for wrong in (
            arith.CmpiOp(size, zero, "slt"),
            arith.CmpiOp(product.high, zero, "ne"),
            arith.CmpiOp(total, zero, "slt"),
        ):
            bad = put(ops, arith.OrIOp(bad, put(ops, wrong).result)).result
    put(ops, scf.IfOp(bad, [], Region(_report(alloc, TOO_LARGE))))
    insert_before(ops, alloc)
    return total


def _check_null(alloc: memref.AllocOp, total: SSAValue | int) -> None:
    """After `alloc`: where its bytes are not 0 and malloc gave no memory (the aligned
    pointer is 0 then, as the lowering rounds 0 up to 0), call the runtime with its line,
    column and bytes."""
    ops = Block()
    zero = put(ops, arith.ConstantOp.from_int_and_width(0, 64)).result
    if isinstance(total, int):  # bytes past 2**63 - 1 fail as those do
        total = put(ops, arith.ConstantOp.from_int_and_width(min(total, 2**63 - 1), 64)).result
    pointer = put(ops, memref.ExtractAlignedPointerAsIndexOp(alloc.memref)).results[0]
    address = put(ops, arith.IndexCastOp(pointer, i64)).result
    null = put(ops, arith.CmpiOp(address, zero, "eq")).result
    some = put(ops, arith.CmpiOp(total, zero, "ne")).result
    failed = put(ops, arith.AndIOp(null, some)).result
    put(ops, scf.IfOp(failed, [], Region(_report(alloc, FAILED, total))))
    block = alloc.parent_block()
    assert block is not None
    made = list(ops.ops)
    for new in made:
        new.detach()
    block.insert_ops_after(made, alloc)


def _report(alloc: Operation, callee: str, *more: SSAValue) -> Block:
    where = loc_of(alloc)
    line, column = (where.line, where.col) if where is not None else (0, 0)
    body = Block()
    place: list[SSAValue] = [
        put(body, arith.ConstantOp.from_int_and_width(value, 64)).result for value in (line, column)
    ]
    put(body, func.CallOp(callee, [*place, *more], []))
    put(body, scf.YieldOp())
    return body
