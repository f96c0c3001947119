"""`dhir-loop-steps`: host loops whose step is known only when they run stop the rank when
that step is 0 or less, naming the loop, as the interpreter does.

MLIR 22 leaves such a loop undefined, and native code does not stop: an `scf.for` stepping
down from above its upper bound ran zero times (exit 0, the loop's writes missing), one
from below it wrote until memory faulted, one of step 0 ran forever. The verifier refuses
constant steps of 0 or less (dhir.dialects.scf); this guards the others with a compare
and a call to the runtime's `dhir_rt_bad_step` on entry, once per run of the loop, not
per iteration. Device code is left alone: it cannot call the runtime.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dhir.dialects import arith, func, scf
from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import loc_of
from dhir.ir.walk import find_ops
from dhir.transforms.building import declare, insert_before, put

BAD_STEP = "dhir_rt_bad_step"


@dataclass(frozen=True)
class LoopStepsPass(ModulePass):
    """Host loops whose run-time step is 0 or less stop the rank, naming the loop."""

    name = "dhir-loop-steps"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        guarded = False
        for loop in find_ops(op, (scf.ForOp, scf.ParallelOp, scf.ForallOp)):
            if in_device_code(loop):
                continue
            for step in _run_time_steps(loop):
                _guard(loop, step)
                guarded = True
        if guarded:
            declare(op, BAD_STEP, [i64, i64, i64], [], owner="dhir's runtime")


def _run_time_steps(loop: Operation) -> list[SSAValue]:
    if isinstance(loop, scf.ForOp):
        steps = [loop.step]
    elif isinstance(loop, scf.ParallelOp):
        steps = list(loop.step)
    else:
        assert isinstance(loop, scf.ForallOp)
        steps = [step for step in loop.bounds()[2] if isinstance(step, SSAValue)]
    return [step for step in steps if not isinstance(step.owner, arith.ConstantOp)]


def _guard(loop: Operation, step: SSAValue) -> None:
    """Before `loop`: if `step` <= 0, call the runtime with it and the loop's line and
    column (0 where the loop has no location)."""
    kind = step.type
    assert isinstance(kind, IntegerType | IndexType)
    ops = Block()
    zero = put(ops, arith.ConstantOp(IntegerAttr(0, kind), kind))
    bad = put(ops, arith.CmpiOp(step, zero.result, "sle"))
    where = loc_of(loop)
    line, column = (where.line, where.col) if where is not None else (0, 0)
    body = Block()
    arguments = [_as_i64(body, step)]
    for value in (line, column):
        arguments.append(put(body, arith.ConstantOp.from_int_and_width(value, 64)).result)
    put(body, func.CallOp(BAD_STEP, arguments, []))
    put(body, scf.YieldOp())
    put(ops, scf.IfOp(bad.result, [], Region(body)))
    insert_before(ops, loop)


def _as_i64(block: Block, value: SSAValue) -> SSAValue:
    kind = value.type
    if isinstance(kind, IndexType):
        return put(block, arith.IndexCastOp(value, i64)).result
    assert isinstance(kind, IntegerType)
    width = kind.width.data
    if width == 64:
        return value
    if width < 64:
        return put(block, arith.ExtSIOp(value, i64)).result
    return put(block, arith.TruncIOp(value, i64)).result
