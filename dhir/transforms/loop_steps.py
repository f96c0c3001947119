"""`dhir-loop-steps`: host loops whose step is known only when they run stop the rank when
that step is 0 or less, and host `scf.for` and `affine.for` loops (and the dimensions of
`scf.parallel`, `scf.forall` and `affine.parallel`) whose counter may step past its type's
largest value stop it when it would, naming the loop, as the interpreter does.

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
loop's type, as `ub - lb` fits unsigned), is compared with `top - step`. The same held
for `scf.forall` (which ran on forever) and the affine loops that dhir-optimize-bodies
leaves (their bounds are computed before the loop as --lower-affine computes them).

A bound that only numbers make (the optimizer's block ends, `0 + ((16 - 0) max 0) divui
64 * 64`) is read as the number native code computes, so that a loop of such bounds is
judged exactly, as one written with constants is: no guard where its counter cannot pass
the top.
"""

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass

from dhir.analysis.wrap_checks import native_division
from dhir.dialects import affine, arith, func, scf
from dhir.dialects.arith import INDEX_WIDTH, scalar_int_width
from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import loc_of
from dhir.ir.walk import find_ops
from dhir.transforms.building import (
    affine_bound,
    declare,
    insert_before,
    int_constant,
    last_value,
    put,
)

_Pick = Callable[..., int]

BAD_STEP = "dhir_rt_bad_step"
COUNTER_OVERFLOW = "dhir_rt_counter_overflow"


_LOOPS = (scf.ForOp, scf.ParallelOp, scf.ForallOp, affine.ForOp, affine.ParallelOp)


@dataclass(frozen=True)
class LoopStepsPass(ModulePass):
    """Host loops whose run-time step is 0 or less stop the rank, naming the loop."""

    name = "dhir-loop-steps"
    needs: ClassVar[tuple[type[Operation], ...]] = _LOOPS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        guarded = counted = False
        for loop in find_ops(op, _LOOPS):
            if in_device_code(loop):
                continue
            for step in _run_time_steps(loop):
                _guard(loop, step)
                guarded = True
            counted |= _guard_counters(loop, _counters(loop))
        if guarded:
            declare(op, BAD_STEP, [i64, i64, i64], [], owner="dhir's runtime")
        if counted:
            declare(op, COUNTER_OVERFLOW, [i64, i64, i64, i64], [], owner="dhir's runtime")


def _run_time_steps(loop: Operation) -> list[SSAValue]:
    if isinstance(loop, scf.ForOp):
        steps = [loop.step]
    elif isinstance(loop, scf.ParallelOp):
        steps = list(loop.step)
    elif isinstance(loop, scf.ForallOp):
        steps = [step for step in loop.bounds()[2] if isinstance(step, SSAValue)]
    else:
        return []  # affine loops: constant steps, which their verifier checks
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
# A counter's lower bound, upper bound or step: an SSA value, or what makes one where the
# bounds need ops of their own before the loop, with its value where it is a constant.
_Make = Callable[[Block], SSAValue]
_Bound = tuple[SSAValue | _Make, int | None]
_Dim = tuple[_Bound, _Bound, _Bound]


def _counters(loop: Operation) -> list[_Dim]:
    """The counters of `loop`, outermost first. A parallel loop (scf.parallel left parallel
    on OpenMP, scf.forall, affine.parallel) is checked as the nest of loops that
    dhir-serial-loops and mlir-opt make of it, outermost first: a dimension when those
    outside it run at all, as the interpreter does."""
    if isinstance(loop, scf.ForOp):
        return [(_given(loop.lb), _given(loop.ub), _given(loop.step))]
    if isinstance(loop, scf.ParallelOp):
        values = zip(loop.lowerBound, loop.upperBound, loop.step)
        return [(_given(lb), _given(ub), _given(step)) for lb, ub, step in values]
    if isinstance(loop, scf.ForallOp):
        mixed = zip(*loop.bounds())
        return [(_mixed(lb), _mixed(ub), _mixed(step)) for lb, ub, step in mixed]
    if isinstance(loop, affine.ForOp):
        lower = _bound(loop.lowerBoundMap.data, loop.lowerBoundOperands, max)
        upper = _bound(loop.upperBoundMap.data, loop.upperBoundOperands, min)
        return [(lower, upper, _mixed(loop.step.value.data))]
    if isinstance(loop, affine.ParallelOp):
        lower_map, upper_map = loop.lowerBoundsMap.data, loop.upperBoundsMap.data
        inputs = lower_map.num_dims + lower_map.num_symbols
        lowers = _grouped(lower_map, loop.lowerBoundsGroups.get_values())
        uppers = _grouped(upper_map, loop.upperBoundsGroups.get_values())
        steps = [_mixed(step.value.data) for step in loop.steps]
        operands = list(loop.map_operands)
        return [
            (_bound(lb, operands[:inputs], max), _bound(ub, operands[inputs:], min), step)
            for lb, ub, step in zip(lowers, uppers, steps)
        ]
    return []


def _given(value: SSAValue) -> _Bound:
    return value, _number(value)


# Ops whose 64-bit result, of numbers, is their operands' result wrapped to 64 bits.
_WRAPPING: dict[type[Operation], Callable[[int, int], int]] = {
    arith.AddiOp: operator.add,
    arith.SubiOp: operator.sub,
    arith.MuliOp: operator.mul,
    arith.MaxSIOp: max,
    arith.MinSIOp: min,
}
_DIVIDING = (
    arith.DivUIOp,
    arith.CeilDivUIOp,
    arith.RemUIOp,
    arith.DivSIOp,
    arith.RemSIOp,
    arith.FloorDivSIOp,
    arith.CeilDivSIOp,
)
_HALF = 1 << (INDEX_WIDTH - 1)


def _number(value: SSAValue, depth: int = 16) -> int | None:
    """`value`'s number where only numbers make it: an `arith.constant`, or (64-bit
    values, within `depth` ops) the adds, subtracts, multiplies, signed max/min and
    divisions of such numbers, each wrapped to 64 bits as native code computes it; None
    for anything else."""
    known = int_constant(value)
    if known is not None or depth == 0 or scalar_int_width(value.type) != INDEX_WIDTH:
        return known
    op = value.owner
    if not isinstance(op, (*_WRAPPING, *_DIVIDING)) or len(op.operands) != 2:
        return None
    left, right = (_number(operand, depth - 1) for operand in op.operands)
    if left is None or right is None:
        return None
    left, right = _signed(left), _signed(right)
    if isinstance(op, _DIVIDING):
        return native_division(type(op), left, right)
    return _signed(_WRAPPING[type(op)](left, right))


def _signed(number: int) -> int:
    return (number + _HALF) % (2 * _HALF) - _HALF


def _mixed(value: int | SSAValue) -> _Bound:
    if isinstance(value, SSAValue):
        return _given(value)
    number = value

    def make(block: Block) -> SSAValue:
        return put(block, arith.ConstantOp(IntegerAttr(number, IndexType()))).result

    return make, number


def _grouped(whole: AffineMap, groups: Sequence[int]) -> list[AffineMap]:
    """The map of each dimension of an affine.parallel: its group of `whole`'s results."""
    maps, start = [], 0
    for count in groups:
        results = whole.results[start : start + count]
        maps.append(AffineMap(whole.num_dims, whole.num_symbols, tuple(results)))
        start += count
    return maps


def _bound(bound: AffineMap, operands: Sequence[SSAValue], pick: _Pick) -> _Bound:
    """An affine loop's bound: the largest (`max`) or least (`min`) result of `bound`, as
    --lower-affine computes it."""
    constants = [r.value for r in bound.results if isinstance(r, AffineConstantExpr)]
    known = pick(constants) if len(constants) == len(bound.results) else None
    arguments = list(operands)

    def make(block: Block) -> SSAValue:
        return affine_bound(block, bound, arguments, greatest=pick is max)

    return make, known


def _may_overflow(width: int | None, lb: int | None, ub: int | None, step: int | None) -> bool:
    """Whether a counter may step past its type's largest value, `top`: never with
    step 1 (the last value is below the upper bound); with constant bounds `lb` <= 0 and
    `ub`, never where `2 * (ub - 1) - lb <= top` (a step up to `ub - 1 - lb` ends at most
    there, a larger one at `lb + step`); with constants throughout, exactly."""
    if width is None or width > 64:
        return False  # no i64 to report it in; the interpreter checks it
    top = (1 << (width - 1)) - 1
    if step == 1:
        return False
    if lb is None or ub is None:
        return True
    if lb >= ub:
        return False
    if step is not None:
        return step > 0 and lb + (ub - 1 - lb) // step * step + step > top
    return lb > 0 or 2 * (ub - 1) - lb > top


def _guard_counters(loop: Operation, dims: Sequence[_Dim]) -> bool:
    """Guard each counter of `dims` that may overflow (with those outside it); whether any
    was."""
    guarded = [
        k
        for k, (lb, ub, step) in enumerate(dims)
        if _may_overflow(_width(_type_of(step[0])), lb[1], ub[1], step[1])
    ]
    if not guarded:
        return False  # nothing made: most loops, and building the bounds costs
    made = Block()
    values: list[_Bounds] = []
    for lb, ub, step in dims:
        ssa = [bound if isinstance(bound, SSAValue) else bound(made) for bound, _ in (lb, ub, step)]
        values.append((ssa[0], ssa[1], ssa[2]))
    insert_before(made, loop)
    for k in guarded:
        _guard_counter(loop, values[k], values[:k])
    return True


def _type_of(bound: SSAValue | _Make) -> object:
    """The type of a bound: an SSA value's, or index for what `_mixed` and `_bound` make."""
    return bound.type if isinstance(bound, SSAValue) else IndexType()


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
    last = last_value(body, lb, ub, step)
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
