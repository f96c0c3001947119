"""`dhir-loop-steps`: host loops whose step is known only when they run stop the rank when
that step is 0 or less, and host `scf.for` loops (and `scf.parallel` dimensions) whose
counter may step past its type's largest value stop it when it would, naming the loop, as
the interpreter does.

MLIR 22 leaves such a loop undefined, and native code does not stop: an `scf.for` stepping
down from above its upper bound ran zero times (exit 0, the loop's writes missing), one
from below it wrote until memory faulted, one of step 0 ran forever. The verifier refuses
constant steps of 0 or less (dhir.dialects.scf); this guards the others with a compare
and a call to the runtime's `dhir_rt_bad_step` on entry, once per run of the loop, not
per iteration. Device code is left alone: it cannot call the runtime.

An `scf.for` from 4611686018427387904 to 2**63 - 1 step 2**62 (bounds given at run time)
wraps its counter to -2**63 after its first iteration, which is still below the upper
bound: native code ran on until it faulted (SIGSEGV) or forever. Before such a loop, when
it runs at all, its last value, `lb + ((ub - 1 - lb) udiv step) * step` (exact in the
loop's type, as `ub - lb` fits unsigned), is compared with `top - step`.
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
COUNTER_OVERFLOW = "dhir_rt_counter_overflow"


@dataclass(frozen=True)
class LoopStepsPass(ModulePass):
    """Host loops whose run-time step is 0 or less stop the rank, naming the loop."""

    name = "dhir-loop-steps"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        guarded = counted = False
        for loop in find_ops(op, (scf.ForOp, scf.ParallelOp, scf.ForallOp)):
            if in_device_code(loop):
                continue
            for step in _run_time_steps(loop):
                _guard(loop, step)
                guarded = True
            for bounds, outer in _counters(loop):
                if _may_overflow(*bounds):
                    _guard_counter(loop, bounds, outer)
                    counted = True
        if guarded:
            declare(op, BAD_STEP, [i64, i64, i64], [], owner="dhir's runtime")
        if counted:
            declare(op, COUNTER_OVERFLOW, [i64, i64, i64, i64], [], owner="dhir's runtime")


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


_Bounds = tuple[SSAValue, SSAValue, SSAValue]


def _counters(loop: Operation) -> list[tuple[_Bounds, list[_Bounds]]]:
    """The counters of `loop`, each with those of the dimensions outside it. An
    scf.parallel left parallel (OpenMP) is checked as the nest of scf.for that
    dhir-serial-loops makes of the others, outermost first: a dimension when those outside
    it run at all, as the interpreter does."""
    if isinstance(loop, scf.ForOp):
        return [((loop.lb, loop.ub, loop.step), [])]
    if not isinstance(loop, scf.ParallelOp):
        return []
    dims = list(zip(loop.lowerBound, loop.upperBound, loop.step))
    return [(dim, dims[:k]) for k, dim in enumerate(dims)]


def _may_overflow(lower: SSAValue, upper: SSAValue, stride: SSAValue) -> bool:
    """Whether a counter may step past its type's largest value, `top`: never with
    step 1 (the last value is below the upper bound); with constant bounds `lb` <= 0 and
    `ub`, never where `2 * (ub - 1) - lb <= top` (a step up to `ub - 1 - lb` ends at most
    there, a larger one at `lb + step`); with constants throughout, exactly."""
    width = _width(stride.type)
    if width is None or width > 64:
        return False  # no i64 to report it in; the interpreter checks it
    top = (1 << (width - 1)) - 1
    lb, ub, step = (_constant(v) for v in (lower, upper, stride))
    if step == 1:
        return False
    if lb is None or ub is None:
        return True
    if lb >= ub:
        return False
    if step is not None:
        return step > 0 and lb + (ub - 1 - lb) // step * step + step > top
    return lb > 0 or 2 * (ub - 1) - lb > top


def _guard_counter(loop: Operation, bounds: _Bounds, outer: list[_Bounds]) -> None:
    """Before `loop`: when the counter `bounds` runs (and those `outer` it) and its step is
    positive (else the step's own guard stops the rank), if its last value plus its step
    passes its type's largest value, call the runtime with them and the loop's line and
    column."""
    lb, ub, step = bounds
    kind = step.type
    assert isinstance(kind, IntegerType | IndexType)
    width = _width(kind)
    assert width is not None
    ops = Block()

    def number(value: int) -> SSAValue:
        return put(ops, arith.ConstantOp(IntegerAttr(value, kind), kind)).result

    runs = put(ops, arith.CmpiOp(lb, ub, "slt")).result
    for low, high, _ in outer:
        outer_runs = put(ops, arith.CmpiOp(low, high, "slt")).result
        runs = put(ops, arith.AndIOp(runs, outer_runs)).result
    rising = put(ops, arith.CmpiOp(step, number(0), "sgt")).result
    body = Block()
    span = put(body, arith.SubiOp(ub, lb)).result
    room = put(
        body, arith.SubiOp(span, put(body, arith.ConstantOp(IntegerAttr(1, kind), kind)).result)
    ).result
    steps = put(body, arith.DivUIOp(room, step)).result
    last = put(body, arith.AddiOp(lb, put(body, arith.MuliOp(steps, step)).result)).result
    top = put(body, arith.ConstantOp(IntegerAttr((1 << (width - 1)) - 1, kind), kind)).result
    limit = put(body, arith.SubiOp(top, step)).result
    over = put(body, arith.CmpiOp(last, limit, "sgt")).result
    where = loc_of(loop)
    line, column = (where.line, where.col) if where is not None else (0, 0)
    report = Block()
    arguments = [_as_i64(report, last), _as_i64(report, step)]
    for value in (line, column):
        arguments.append(put(report, arith.ConstantOp.from_int_and_width(value, 64)).result)
    put(report, func.CallOp(COUNTER_OVERFLOW, arguments, []))
    put(report, scf.YieldOp())
    put(body, scf.IfOp(over, [], Region(report)))
    put(body, scf.YieldOp())
    both = put(ops, arith.AndIOp(runs, rising)).result
    put(ops, scf.IfOp(both, [], Region(body)))
    insert_before(ops, loop)


def _width(kind: object) -> int | None:
    if isinstance(kind, IndexType):
        return 64
    return kind.width.data if isinstance(kind, IntegerType) else None


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None
