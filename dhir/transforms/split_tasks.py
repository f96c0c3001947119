"""`dhir-split`: cut a task whose work is one parallel loop into pieces over contiguous
ranges of its outermost loop, so that placement can spread one loop over several ranks.

A task is split when its body is pure ops (constants, index arithmetic), one loop, and
pure ops again, and the loop is
- an `scf.parallel` without reductions (split along its first dimension), or an
  `affine.parallel` without reductions whose first dimension has constant bounds, or
- an `scf.for` or `affine.for` without iter_args whose iterations provably touch
  disjoint elements: what iteration i writes overlaps nothing iteration i' != i reads or
  writes (`dhir.analysis.regions.iteration_regions`, isl). Unproven means kept whole.

Each piece is a copy of the task (same target, same memrefs) whose loop runs over its
range only, so the region analysis sees the rows each piece touches. Constant bounds give
constant ranges; bounds that are schedule scalars (step 1) give `affine.apply` bounds.

How many pieces: `dhir.split = K` on the task (K even pieces; 1 keeps it whole), else the
pass's `pieces` (default: `ranks`, and then only in schedules with fewer independent tasks
than ranks: a schedule cut into enough tasks by hand, or a hand-split stencil, keeps
them). With a machine description in the module and as many pieces as ranks, pieces are
sized by the compute rate of each rank's device that can run the task (its peak GFLOP/s
over the ranks sharing it); otherwise they are even.

Pieces carry `dhir.piece = [T, k]`: piece k of the schedule's task T, which is how
`dhir.ir.tasks.task_ids` names them (`main.schedule0.task3.piece1`).
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.context import Context
from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.dependences import task_graph
from dhir.analysis.regions import iterations_independent
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import PassFailedAt
from dhir.ir.tasks import PIECE_ATTR, RANK_ATTR, is_gpu_task
from dhir.machine.description import Device
from dhir.placement.from_ir import can_run, concurrency, has_machine, machine_for
from dhir.transforms.split_reductions import reassociable, split_reduction, warn_ignored

SPLIT_ATTR = "dhir.split"

# Ops that may stand before or after the loop in a task that is split: each piece gets
# its own copy, so they must have no effect.
_PURE_DIALECTS = frozenset({"arith", "index", "math"})
# Ops in the loop that reach state the memref regions do not describe.
_OPAQUE = frozenset({"func.call", "func.call_indirect", "memref.get_global"})


@dataclass(frozen=True)
class SplitTasksPass(ModulePass):
    """Cut each task whose work is one parallel loop into pieces over its outer loop.

    One piece per rank where a schedule has fewer independent tasks than ranks, or
    `pieces`; `dhir.split = K` on a task forces K (1 keeps it whole)."""

    name = "dhir-split"

    ranks: int = 1
    pieces: int = 0  # 0: as many as ranks

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.ranks < 1 or self.pieces < 0:
            raise PassFailedException(
                f"dhir-split: ranks must be at least 1 and pieces at least 0, got "
                f"ranks={self.ranks} pieces={self.pieces}"
            )
        count = self.pieces or self.ranks
        devices = _devices(op, self.ranks) if count == self.ranks else None
        warn_ignored(op)
        for schedule in [s for s in walk_outside_tasks(op) if isinstance(s, ScheduleOp)]:
            busy: int | None = None
            for index, task in enumerate(list(schedule.tasks())):
                weights = _weights(task, count, devices)
                if weights is None:
                    continue
                if self.pieces == 0 and SPLIT_ATTR not in task.attributes:
                    if _splittable(task) is None and not reassociable(task):
                        continue
                    # Enough independent tasks already keep every rank busy: leave them.
                    if busy is None:
                        busy = concurrency(task_graph(schedule))
                    if busy >= self.ranks:
                        continue
                if not split_task(task, index, weights):
                    split_reduction(task, index, weights, _piece_bounds, _set_range)


def _devices(module: ModuleOp, ranks: int) -> list[Device] | None:
    """Each rank's device, when the module describes the machine (else: alike ranks)."""
    if ranks == 1 or not has_machine(module):
        return None
    devices, _ = machine_for(module, ranks)
    return devices


def _weights(task: TaskOp, count: int, devices: Sequence[Device] | None) -> list[int] | None:
    """The relative sizes of the pieces `task` becomes, or None to keep it whole."""
    if PIECE_ATTR in task.attributes or is_gpu_task(task):
        return None
    forced = task.attributes.get(SPLIT_ATTR)
    if forced is not None:
        if not isinstance(forced, IntegerAttr) or forced.value.data < 1:
            raise PassFailedAt(
                task, f"{SPLIT_ATTR} must be an integer >= 1 (1 keeps the task whole)"
            )
        return [1] * forced.value.data if forced.value.data > 1 else None
    if count == 1 or RANK_ATTR in task.attributes:
        return None
    if devices is None:
        return [1] * count
    target = task.target_info()
    rates = [_rate(d) for d in devices if can_run(target, d)]
    return _integer_weights(rates) if len(rates) > 1 else None


def _rate(device: Device) -> float:
    return device.peak_gflops / max(device.ranks, 1)


def _integer_weights(rates: Sequence[float]) -> list[int]:
    """Rates as small integers in the same proportions (to 1 part in 1000)."""
    top = max(rates)
    return [max(1, round(1000 * r / top)) for r in rates]


def split_task(task: TaskOp, index: int, weights: Sequence[int]) -> bool:
    """Replace `task` (the schedule's task number `index`) by pieces sized as `weights`,
    when it is a loop that may be split; whether it was."""
    found = _splittable(task)
    if found is None:
        return False
    position, loop = found
    bounds = _piece_bounds(loop, weights)
    if bounds is None or len(bounds) < 2:
        return False
    block = task.parent_block()
    assert block is not None
    for k, (low, high) in enumerate(bounds):
        piece = task.clone()
        piece.attributes.pop(SPLIT_ATTR, None)
        piece.attributes[PIECE_ATTR] = ArrayAttr([IntegerAttr(index, i64), IntegerAttr(k, i64)])
        piece_loop = list(piece.body.block.ops)[position]
        _set_range(piece_loop, low, high)
        block.insert_op_before(piece, task)
    task.detach()
    task.erase()
    return True


def _splittable(task: TaskOp) -> tuple[int, Operation] | None:
    """The position and op of the task's one loop, when the task may be split."""
    if task.token.uses:
        return None
    ops = list(task.body.block.ops)[:-1]  # without the dhir.yield
    loops = [(k, op) for k, op in enumerate(ops) if not _pure(op)]
    if len(loops) != 1:
        return None
    position, loop = loops[0]
    if any(o.name in _OPAQUE or o.dialect_name() in ("llvm", "gpu", "mpi") for o in loop.walk()):
        return None
    if isinstance(loop, scf.ParallelOp):
        return (position, loop) if not loop.initVals else None
    if isinstance(loop, affine.ParallelOp):
        return (position, loop) if not loop.results and _first_range(loop) else None
    if isinstance(loop, scf.ForOp | affine.ForOp):
        body = loop.body.block
        if len(body.args) != 1 or not iterations_independent(task.memrefs, body):
            return None
        if isinstance(loop, affine.ForOp) and _affine_range(loop) is None:
            return None
        return position, loop
    return None


def _pure(op: Operation) -> bool:
    if op.regions or any(isinstance(v.type, MemRefType) for v in (*op.operands, *op.results)):
        return False
    return op.dialect_name() in _PURE_DIALECTS or isinstance(op, affine.ApplyOp)


@dataclass(frozen=True)
class _Range:
    """A loop's outermost range: constants (`known`: low, high, step) when all three are,
    else the lower and upper bound values and whether the step is the constant 1."""

    known: tuple[int, int, int] | None
    lower: SSAValue | None = None
    upper: SSAValue | None = None
    unit_step: bool = False


def _loop_range(loop: Operation) -> _Range:
    if isinstance(loop, affine.ParallelOp):
        first = _first_range(loop)
        assert first is not None
        return _Range(first)
    if isinstance(loop, affine.ForOp):
        low, high = _affine_range(loop) or (0, 0)
        return _Range((low, high, loop.step.value.data))
    if isinstance(loop, scf.ForOp):
        lower, upper, step = loop.lb, loop.ub, loop.step
    else:
        assert isinstance(loop, scf.ParallelOp)
        lower, upper, step = loop.lowerBound[0], loop.upperBound[0], loop.step[0]
    low, high, stride = (_constant(v) for v in (lower, upper, step))
    if low is not None and high is not None and stride is not None:
        return _Range((low, high, stride))
    return _Range(None, lower, upper, stride == 1)


def _affine_range(loop: affine.ForOp) -> tuple[int, int] | None:
    """Constant bounds of an affine.for (single constant results), else None."""
    out: list[int] = []
    for attr in (loop.lowerBoundMap, loop.upperBoundMap):
        amap = attr.data
        if amap.num_dims or amap.num_symbols or len(amap.results) != 1:
            return None
        value = amap.eval([], [])
        out.append(value[0])
    return out[0], out[1]


def _first_range(loop: affine.ParallelOp) -> tuple[int, int, int] | None:
    """The first variable's bounds and step in an affine.parallel, when each bound is
    one constant (a single result of its group)."""
    bounds: list[int] = []
    for amap, groups in (
        (loop.lowerBoundsMap.data, loop.lowerBoundsGroups),
        (loop.upperBoundsMap.data, loop.upperBoundsGroups),
    ):
        first = amap.results[0] if amap.results else None
        if int(groups.get_values()[0]) != 1 or not isinstance(first, AffineConstantExpr):
            return None
        bounds.append(first.value)
    step = loop.steps.data[0]
    return bounds[0], bounds[1], step.value.data


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


# A piece's bounds: constants, or (lower, upper) values with the fraction of the way
# from lower to upper where the piece starts and ends.
_Bounds = tuple[int, int] | tuple[Fraction, Fraction]


def _piece_bounds(loop: Operation, weights: Sequence[int]) -> list[_Bounds] | None:
    """Each non-empty piece's bounds: constants when the loop's range is, else fractions
    of the way from the lower bound to the upper one (step 1 only)."""
    total = sum(weights)
    cuts = [Fraction(sum(weights[:k]), total) for k in range(len(weights) + 1)]
    found = _loop_range(loop)
    if found.known is None:
        if not found.unit_step:
            return None
        return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]
    low, high, step = found.known
    if step <= 0:
        return None
    trips = max(0, -(-(high - low) // step))
    edges = [low + step * int(trips * c) for c in cuts]
    edges[-1] = max(high, low)
    return [(a, b) for a, b in itertools.pairwise(edges) if a < b]


def _set_range(loop: Operation, low: int | Fraction, high: int | Fraction) -> None:
    """Make `loop` (in a piece) run from `low` to `high` (see _piece_bounds)."""
    if isinstance(loop, affine.ParallelOp):
        assert isinstance(low, int) and isinstance(high, int)
        for name, value in (("lowerBoundsMap", low), ("upperBoundsMap", high)):
            amap = loop.properties[name]
            assert isinstance(amap, AffineMapAttr)
            old = amap.data
            results = (AffineExpr.constant(value), *old.results[1:])
            loop.properties[name] = AffineMapAttr(AffineMap(old.num_dims, old.num_symbols, results))
        return
    if isinstance(loop, affine.ForOp):
        assert isinstance(low, int) and isinstance(high, int)
        loop.properties["lowerBoundMap"] = AffineMapAttr(AffineMap.constant_map(low))
        loop.properties["upperBoundMap"] = AffineMapAttr(AffineMap.constant_map(high))
        return
    ranks = len(loop.regions[0].block.args) if isinstance(loop, scf.ParallelOp) else 1
    lower, upper = loop.operands[0], loop.operands[ranks]
    loop.operands[0] = _bound(loop, low, lower, upper)
    loop.operands[ranks] = _bound(loop, high, lower, upper)


def _bound(loop: Operation, at: int | Fraction, lower: SSAValue, upper: SSAValue) -> SSAValue:
    """A value before `loop`: the constant `at`, or lower + floor((upper - lower) * at)."""
    block = loop.parent_block()
    assert block is not None
    if isinstance(at, int):
        made: Operation = arith.ConstantOp(IntegerAttr(at, IndexType()))
    elif at == 0:
        return lower
    elif at == 1:
        return upper
    else:
        d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
        expr = d0 + ((d1 - d0) * at.numerator) // at.denominator
        made = affine.ApplyOp([lower, upper], AffineMapAttr(AffineMap(2, 0, (expr,))))
    block.insert_op_before(made, loop)
    return made.results[0]
