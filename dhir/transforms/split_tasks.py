"""`dhir-split`: cut a task whose work is one parallel loop (or one linalg op) into pieces
over contiguous ranges of its outermost loop, so that placement can spread one loop over
several ranks.

A task is split when its body is pure ops (constants, index arithmetic, `memref.dim` of a
static extent), one loop, and pure ops again (and subviews, see below; ops with effects
but no regions after the loop run in the last piece only), and the loop is
- an `scf.parallel` without reductions (split along its first dimension), or an
  `affine.parallel` without reductions whose first dimension has constant bounds, or
- an `scf.for` or `affine.for` without iter_args whose iterations provably touch
  disjoint elements: what iteration i writes overlaps nothing iteration i' != i reads or
  writes (`dhir.analysis.regions.iteration_regions`, isl), i and i' taken among the values
  the variable takes where its bounds and step are constants (the tile loop of a tiled
  nest, `for ii in [0, n) step 32 { for i in [ii, min(ii + 32, n)) ...}`), or
- a linalg structured op on memrefs (`linalg.generic`, `matmul`, `fill`, `add`, ...)
  whose first loop d0 is "parallel", no `linalg.index` in its body, where each operand's
  indexing map has d0 at most as one plain result (`(d0, d1, d2) -> (d0, d2)`, not
  `d0 + d1`), every output has it, and the operands that have it have static shapes that
  agree on d0's extent and static strided layouts. Unproven means kept whole.

The loop may stand under `scf.if`s without results or else branches whose other ops are
pure: each piece tests the condition again. Before the loop or op may also stand
`memref.subview`s of listed memrefs, or of such views
(dhir-codedrop makes again inside a task the views host code made): each piece makes them
again, a linalg piece views its rows of them, and a loop's iterations are compared through
them.

Each piece is a copy of the task (same target, same memrefs) whose loop runs over its
range only, so the region analysis sees the rows each piece touches. Constant bounds give
constant ranges; bounds that are schedule scalars (a constant step) give `affine.apply`
bounds; both keep the type of the loop's bounds (an `scf.for` may count in `i32`). A
linalg piece runs the same op on views: each operand that uses d0 becomes a static
`memref.subview` of rows [lo, hi) along the dimension d0 indexes (a strided layout type),
the others stay whole; d0 being outermost, the pieces run one after the other are the
whole op's iterations in the same order. A task left whole is told why (`why_whole`: the
first thing that keeps it whole, in a `dhir.split = K` warning). Asked for a `SplitPlan`
(`SplitTasksPass.split`: `dhir schedule`, `--timing`), the pass notes in it each task it
might have cut: the loop and piece sizes, or why it stays whole; otherwise it finds no more
than it needs.

How many pieces: `dhir.split = K` on the task (K even pieces; 1 keeps it whole), else
the pass's `pieces` (default: `ranks`, and then only in schedules with fewer independent
tasks than ranks that would take a piece: a schedule cut into enough tasks by hand, or a
hand-split stencil, keeps them). With a machine description in the module and as many
pieces as ranks, pieces are sized by the compute rate a piece gets on each rank that can
run the task (one core's, or its threads' where the piece holds parallel loops or linalg
ops, within its device's peak GFLOP/s over the ranks sharing it), CPU ranks alone (a GPU rank would
run a piece, CPU code, on its host; one CPU rank keeps the task whole); otherwise they
are even. A share is of work, not of iterations, where the iterations of a loop with
constant bounds do unequal work that is known: inner `scf.for` loops whose bounds depend
on the outer variable alone (a triangle, `for j in [0, i + 1)`, is cut at about
n / sqrt(2) in two); else of iterations.

Pieces carry `dhir.piece = [T, k]`: piece k of the schedule's task T, which is how
`dhir.ir.tasks.task_ids` names them (`main.schedule0.task3.piece1`).
"""

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import partial
from typing import TypeGuard, cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass

from dhir.analysis.counts import constant_int
from dhir.analysis.dependences import task_graph
from dhir.analysis.lift import Lifter
from dhir.analysis.regions import clashing
from dhir.analysis.threads import runs_on_threads, task_runs_on_threads
from dhir.analysis.work import Work
from dhir.choices import MAX_RANKS
from dhir.dialects import affine, arith, memref, scf
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.dialects.linalg import IndexOp, IteratorTypeAttr, LinalgStructuredOperation
from dhir.ir.diagnostics import (
    REPORT_ENV,
    Diagnostic,
    error_at,
    loc_of,
    report_everything,
    value_name,
    warn,
)
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import PIECE_ATTR, RANK_ATTR, is_gpu_task, task_ids
from dhir.ir.walk import find_ops
from dhir.machine.description import Device
from dhir.machine.roofline import rates
from dhir.placement.from_ir import can_run, concurrency, has_machine, machine_for
from dhir.targets import DeviceKind
from dhir.transforms.building import rows_view
from dhir.transforms.pass_options import check_ranks
from dhir.transforms.split_reductions import (
    REASSOCIATE_ATTR,
    opaque,
    pure,
    reassociable,
    reduction_whole,
    split_reduction,
    warn_ignored,
)

SPLIT_ATTR = "dhir.split"
SPLIT_RANGE = f"{SPLIT_ATTR} must be an integer from 1 to {MAX_RANKS} (1 keeps the task whole)"

# A piece's bounds: constants, or (lower, upper) values with the fraction of the way
# from lower to upper where the piece starts and ends.
_Bounds = tuple[int, int] | tuple[Fraction, Fraction]


@dataclass(frozen=True)
class Whole:
    """Why a task stays whole: `why`, a phrase that tasks kept whole alike share (a plan
    of many tasks counts them by it), the op it is about (`at`, its loop) and what is this
    task's own (`detail`)."""

    why: str
    at: Operation | None = None
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.why} ({self.detail})" if self.detail else self.why

    def details(self) -> str:
        """Where (the op at file:line:col) and this task's own detail, if any."""
        loc = loc_of(self.at) if self.at is not None else None
        parts = [f"at {loc}"] if loc is not None else []
        return ", ".join([*parts, self.detail] if self.detail else parts)


@dataclass(frozen=True)
class SplitTasksPass(ModulePass):
    """Cut each task whose work is one parallel loop into pieces over its outer loop.

    One piece per rank where a schedule has fewer independent tasks than ranks, or
    `pieces`; `dhir.split = K` on a task forces K (1 keeps it whole)."""

    name = "dhir-split"

    ranks: int = 1
    pieces: int = 0  # 0: as many as ranks

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.split(op)

    def split(self, op: ModuleOp, plan: "SplitPlan | None" = None) -> None:
        """Split `op`'s tasks; with a `plan`, say in it what became of each task that
        might have been cut, and why (only then: `dhir schedule` and `--timing` ask)."""
        check_ranks(self.name, self.ranks)
        check_ranks(self.name, self.pieces, "pieces", least=0)
        count = self.pieces or self.ranks
        devices = _devices(op, self.ranks) if count == self.ranks else None
        # Only where ranks' devices differ do the threads size the pieces.
        threads = devices is not None and runs_on_threads(op)
        warn_ignored(op)
        # Tasks are found through their schedules: a walk into every task's body (most
        # of a large schedule's ops) found no more (docs/performance.md).
        schedules = [s for s in walk_outside_tasks(op) if isinstance(s, ScheduleOp)]
        forced = any(SPLIT_ATTR in t.attributes for s in schedules for t in s.tasks())
        names = task_ids(op) if forced else {}  # only to name tasks in warnings
        note = _Noter(plan, count)
        for schedule in schedules:
            busy: int | None = None
            for index, task in enumerate(list(schedule.tasks())):
                weights = _weights(task, count, devices, threads)
                if not isinstance(weights, list):
                    if is_gpu_task(task) and _forced(task) > 1:
                        _warn_forced(task, names, "GPU tasks are not split")
                    note.whole(task, weights)
                    continue
                if self.pieces == 0 and SPLIT_ATTR not in task.attributes:
                    found = _one_loop(task)
                    if isinstance(found, Whole) and not reassociable(task):
                        if plan is not None and REASSOCIATE_ATTR in task.attributes:
                            found = _reduction_whole(task)
                        note.whole(task, found)
                        continue
                    # Enough independent tasks already keep every rank busy that would
                    # take a piece (the CPU ranks, beside GPU ranks): leave them.
                    if busy is None:
                        busy = concurrency(task_graph(schedule))
                    if busy >= len(weights):
                        note.whole(task, _busy(busy, len(weights), self.ranks))
                        continue
                cut = _cut(task, index, weights)
                if cut is not None:
                    if plan is not None:
                        loop, bounds, pieces = cut
                        first = next(iter(pieces.values()))
                        note.split(first, _detail(loop, bounds), len(bounds))
                    continue
                seen: list[tuple[str, int]] = []
                bounds_of = partial(_seen_bounds, seen) if plan is not None else _piece_bounds
                before = task.prev_op
                if split_reduction(task, index, weights, bounds_of, _set_range):
                    if plan is not None:
                        block = schedule.body.block
                        first = before.next_op if before is not None else block.first_op
                        assert isinstance(first, TaskOp)
                        note.split(first, *seen[-1])
                    continue
                if _forced(task) > 1 and REASSOCIATE_ATTR not in task.attributes:
                    _warn_forced(task, names, why_whole(task))
                if plan is not None:
                    note.whole(task, _reduction_whole(task))


def _busy(busy: int, able: int, ranks: int) -> Whole:
    """`able` of the `ranks` would take its pieces."""
    why = "its schedule already has enough tasks that can run at once to keep every rank busy"
    of = f"{able} of {ranks} ranks can run its pieces" if able < ranks else f"{ranks} ranks"
    return Whole(why, None, f"{busy} at once, {of}")


def _seen_bounds(
    seen: list[tuple[str, int]], loop: Operation, weights: Sequence[int]
) -> list[_Bounds] | None:
    """`_piece_bounds`, remembering the loop a reduction is split over and the pieces'
    sizes (said now: the loop goes with its task)."""
    bounds = _piece_bounds(loop, weights)
    if bounds is not None:
        seen.append((_detail(loop, bounds), len(bounds)))
    return bounds


def _reduction_whole(task: TaskOp) -> Whole:
    """Why a task that dhir-split tried to cut (or split its reduction) stays whole."""
    if REASSOCIATE_ATTR not in task.attributes or splittable(task) is not None:
        return _whole(task)
    why = reduction_whole(task)
    if why is not None:
        return Whole(f"its reduction cannot be split: {why}")
    return Whole("its reduction's loop has too few iterations to cut into 2 pieces or more")


_OPAQUE = (
    "its loop calls a function or reaches a global (or llvm, gpu or mpi ops), whose "
    "accesses dhir-split cannot see to give each piece its part"
)


def why_whole(task: TaskOp) -> str:
    """Why dhir-split leaves `task` whole (asked by `dhir.split = K` or not)."""
    return str(_whole(task))


def _whole(task: TaskOp) -> Whole:
    found = _one_loop(task)
    if isinstance(found, Whole):
        return found
    loop = found[1]
    known = _loop_range(loop).known
    if known is None:
        why = "its loop's bounds are run-time values and its step is not a positive constant"
        return Whole(why, loop)
    if known[2] <= 0:
        return Whole("its loop's step is not positive", loop)
    trips = max(0, -(-(known[1] - known[0]) // known[2]))
    return Whole(
        "its loop has too few iterations to cut into 2 pieces or more",
        loop,
        f"{_count(trips, 'iteration')}",
    )


def _named(value: SSAValue) -> str:
    return value_name(value, f"a {value.type}")


def _over(op: Operation) -> str:
    loc = loc_of(op)
    return f"the {op.name} at {loc}" if loc is not None else f"its {op.name}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _forced(task: TaskOp) -> int:
    forced = task.attributes.get(SPLIT_ATTR)
    return forced.value.data if isinstance(forced, IntegerAttr) else 0


def _warn_forced(task: TaskOp, names: dict[TaskOp, str], why: str) -> None:
    """`dhir.split = K` asked for pieces that cannot be made: say so, as for reductions."""
    name = names.get(task, "a task")
    message = f"{SPLIT_ATTR} = {_forced(task)} on {name} has no effect: {why}; the task stays whole"
    warn(Diagnostic(message, loc_of(task), "warning"))


def _devices(module: ModuleOp, ranks: int) -> list[Device] | None:
    """Each rank's device, when the module describes the machine (else: alike ranks)."""
    if ranks == 1 or not has_machine(module):
        return None
    devices, _ = machine_for(module, ranks)
    return devices


def check_splits(module: ModuleOp) -> None:
    """Refuse, at the task, a `dhir.split` dhir-split refuses, for the interpreter, which
    runs no dhir-split. (A `dhir.rank` it may ignore: where a task runs does not change
    what the program computes, and the interpreter is the oracle of runs on any ranks.)"""
    for task in find_ops(module, TaskOp):
        forced = task.attributes.get(SPLIT_ATTR)
        if forced is not None and not _split_allowed(forced):
            raise error_at(task, SPLIT_RANGE)


def _split_allowed(forced: Attribute) -> TypeGuard[IntegerAttr[IntegerType | IndexType]]:
    # At most as many pieces as ranks may be: 2**63 - 1 made a list of that many
    # weights (a MemoryError, an internal error), and millions ran for minutes.
    return isinstance(forced, IntegerAttr) and 1 <= forced.value.data <= MAX_RANKS


def _weights(
    task: TaskOp, count: int, devices: Sequence[Device] | None, threads: bool
) -> list[int] | Whole | None:
    """The relative sizes of the pieces `task` becomes, or why it stays whole (None: a
    piece already, or nothing to cut it for); `threads`: `runs_on_threads`' answer for
    the module."""
    if PIECE_ATTR in task.attributes:
        return None
    if is_gpu_task(task):
        return Whole("it is a GPU task (dhir-split cuts CPU tasks)")
    forced = task.attributes.get(SPLIT_ATTR)
    if forced is not None:
        if not _split_allowed(forced):
            raise PassFailedAt(task, SPLIT_RANGE)
        if forced.value.data == 1:
            return Whole(f"{SPLIT_ATTR} = 1 on it")
        return [1] * forced.value.data
    if count == 1:
        return None
    if RANK_ATTR in task.attributes:
        return Whole(f"it is placed by hand ({RANK_ATTR})")
    if devices is None:
        return [1] * count
    target = task.target_info()
    able = [d for d in devices if can_run(target, d)]
    # The pieces are CPU code (dhir-split makes no kernels): a GPU rank runs its piece on
    # its host, not at its GPU's rate, so the CPU ranks alone take them, by their rates.
    cpus = [d for d in able if d.kind != DeviceKind.GPU]
    if len(cpus) > 1:
        return integer_weights(piece_rates(task, cpus, threads))
    if len(cpus) < len(able):
        return Whole(_CPU_CODE)
    return Whole("the device of one rank at most can run it", None, f"target {target}")


_CPU_CODE = (
    "one CPU rank at most can run it: dhir-split makes CPU code, which a GPU rank runs "
    "on its host, not on its GPU (dhir-split-devices cuts parallel loops for GPUs)"
)


def piece_rates(task: TaskOp, devices: Sequence[Device], threads: bool) -> list[float]:
    """The GFLOP/s a piece of `task` gets on a rank of each of `devices`, as the cost model
    times it: on a CPU one core's rate, or its rank's threads' where the task runs on them
    (`task_runs_on_threads`: it holds code that does, in a module built with OpenMP,
    `threads`: dhir.analysis.threads' `runs_on_threads`), within the rank's share of the
    device; on a GPU the rank's share (dhir.machine.roofline.rates)."""
    work = Work(parallel=task_runs_on_threads(task, threads))
    return [rates(work, device)[0] for device in devices]


def integer_weights(rates: Sequence[float]) -> list[int]:
    """Rates as small integers in the same proportions (to 1 part in 1000)."""
    top = max(rates)
    return [max(1, round(1000 * r / top)) for r in rates]


def cut_sized(
    task: TaskOp, index: int, weights: Sequence[int]
) -> tuple[str, dict[int, tuple[TaskOp, str]]] | None:
    """Replace `task` (the schedule's task number `index`) by pieces sized as `weights`,
    when it is a loop that may be split: the loop it cut (`the scf.parallel at
    p.mlir:7:5`), and each piece by the index of its weight (a weight too small for an
    iteration gets none) with its size (`9 iterations`, `3/4 of its run-time range`);
    None when the task was not split."""
    cut = _cut(task, index, weights)
    if cut is None:
        return None
    loop, bounds, pieces = cut
    sizes = [_size(loop, b) for b in bounds]
    return _over(loop), {
        slot: (piece, size) for (slot, piece), size in zip(pieces.items(), sizes, strict=True)
    }


def _size(loop: Operation, bounds: _Bounds) -> str:
    """One piece's `_sizes`."""
    low, high = bounds
    if isinstance(low, Fraction) or isinstance(high, Fraction):
        return f"{Fraction(high) - Fraction(low)} of its run-time range"
    known = None if isinstance(loop, LinalgStructuredOperation) else _loop_range(loop).known
    step = known[2] if known is not None and known[2] > 0 else 1
    noun = "row" if isinstance(loop, LinalgStructuredOperation) else "iteration"
    return _count(-(-(int(high) - int(low)) // step), noun)


def _cut(
    task: TaskOp, index: int, weights: Sequence[int]
) -> tuple[Operation, list[_Bounds], dict[int, TaskOp]] | None:
    """`cut_sized`, with the first piece's loop and each piece's bounds; None if it did
    not."""
    found = splittable(task)
    if found is None:
        return None
    position, loop = found
    slots = _piece_slots(loop, weights)
    if slots is None or len(slots) < 2:
        return None
    block = task.parent_block()
    assert block is not None
    pieces: dict[int, TaskOp] = {}
    cut: list[Operation] = []  # each piece's loop
    for k, (slot, (low, high)) in enumerate(slots.items()):
        piece = task.clone()
        piece.attributes.pop(SPLIT_ATTR, None)
        piece.attributes[PIECE_ATTR] = ArrayAttr([IntegerAttr(index, i64), IntegerAttr(k, i64)])
        ops = list(piece.body.block.ops)
        cut.append(_under_ifs(ops[position]))
        _set_range(cut[-1], low, high)
        if k < len(slots) - 1:  # what follows the loop runs once, after the last piece's
            for op in reversed(ops[position + 1 : -1]):
                op.detach()
                op.erase()
        block.insert_op_before(piece, task)
        pieces[slot] = piece
    task.detach()
    task.erase()
    return cut[0], list(slots.values()), pieces


def splittable(task: TaskOp) -> tuple[int, Operation] | None:
    """The position and op of the task's one loop, when the task may be split."""
    found = _one_loop(task)
    return None if isinstance(found, Whole) else found


def _one_loop(task: TaskOp) -> tuple[int, Operation] | Whole:
    """The position and op of the task's one loop, when the task may be split; else why
    not (a phrase)."""
    if task.token.uses:
        return Whole("its token is used")
    ops = list(task.body.block.ops)[:-1]  # without the dhir.yield
    if not any(op.regions for op in ops):
        return Whole("it has no loop")  # what most tasks of large schedules are
    loops: list[tuple[int, Operation]] = []
    viewed: set[SSAValue] = set(task.memrefs)
    for k, op in enumerate(ops):
        if isinstance(op, memref.SubviewOp) and op.source in viewed:
            viewed.add(op.result)  # each piece makes the view again
        elif _static_size(op, viewed):
            continue  # a constant: each piece measures it again
        elif not pure(op):
            loops.append((k, op))
    first = next(k for k, (_, op) in enumerate(loops) if op.regions)
    after = [op for _, op in loops[first + 1 :]]
    if first > 0 or any(op.regions for op in after):
        return Whole(_not_one(loops))
    if any(opaque(op) for op in after):
        return Whole(
            "after its loop it calls a function or reaches a global (or llvm, gpu or mpi ops)",
            loops[0][1],
        )
    position, loop = loops[0]
    if opaque(loop):
        return Whole(_OPAQUE, loop)
    before = ops[:position]  # they make the views its body may access, and their offsets
    guarded = _guarded(loop, before)
    if isinstance(guarded, str):
        return Whole(guarded, loop)
    loop = guarded
    if isinstance(loop, scf.ParallelOp | affine.ParallelOp):
        return _parallel(position, loop)
    if isinstance(loop, scf.ForOp | affine.ForOp):
        return _for(task, position, loop, before)
    if isinstance(loop, LinalgStructuredOperation):
        if _linalg_rows(loop) is not None:
            return position, loop
        return Whole(
            f"its {loop.name} cannot be cut by rows of d0 (d0 not parallel, in an "
            "expression, dynamic or disagreeing extents, or tensors)",
            loop,
        )
    return Whole(f"its work is {loop.name}, not a loop dhir-split cuts", loop)


def _for(
    task: TaskOp, position: int, loop: scf.ForOp | affine.ForOp, before: list[Operation]
) -> tuple[int, Operation] | Whole:
    body = loop.body.block
    if isinstance(loop, affine.ForOp) and _affine_range(loop) is None:
        return Whole("its affine.for's bounds are not constants", loop)
    if len(body.args) != 1:
        why = f"its {loop.name} carries values (iter_args: reductions need {REASSOCIATE_ATTR})"
        return Whole(why, loop)
    clash = clashing(task.memrefs, body, loop_values(loop), before)
    if clash is not None:
        return Whole(
            f"its {loop.name}'s iterations are not proven to touch disjoint elements",
            loop,
            f"two of them may touch one element of {_named(clash)}",
        )
    return position, loop


def _guarded(op: Operation, before: list[Operation]) -> Operation | str:
    """The loop that `op` runs: itself, or the one loop under an `scf.if` (nested ones
    too) without results or else branch whose other ops are pure, which each piece tests
    again (its pure ops added to `before`); else why not."""
    while isinstance(op, scf.IfOp):
        otherwise = op.false_region.blocks
        if op.results or (otherwise and len(otherwise[0].ops) > 1):
            return "its scf.if has results or an else branch"
        inner = list(op.true_region.block.ops)[:-1]  # without the scf.yield
        effects = [o for o in inner if not pure(o)]
        if len(effects) != 1 or not effects[0].regions:
            return "its scf.if holds other ops with effects than one loop"
        before.extend(inner[: inner.index(effects[0])])
        op = effects[0]
    return op


def _under_ifs(op: Operation) -> Operation:
    """The loop that `op` (a task's op `_one_loop` accepted) runs, under its scf.ifs."""
    while isinstance(op, scf.IfOp):
        op = next(o for o in op.true_region.block.ops if o.regions)
    return op


def effects_after(task: TaskOp, loop: Operation) -> bool:
    """Whether ops with effects follow `loop` (a task's op) in `task`: only the last piece
    runs them."""
    ops = list(task.body.block.ops)[:-1]
    return not all(pure(op) for op in ops[ops.index(loop) + 1 :])


def _static_size(op: Operation, viewed: set[SSAValue]) -> bool:
    """Whether `op` measures a static extent of a memref the task lists or views."""
    return (
        isinstance(op, memref.DimOp) and op.source in viewed and constant_int(op.result) is not None
    )


def _not_one(loops: Sequence[tuple[int, Operation]]) -> str:
    """Why a task whose body has several ops with effects stays whole."""
    with_regions = sum(1 for _, op in loops if op.regions)
    if with_regions > 1:
        return f"its body has {with_regions} loops or other ops with regions, not one"
    others = [op for _, op in loops if not op.regions]
    if all(isinstance(op, memref.DimOp) for op in others):
        return (
            "besides its loop it measures a dynamic size (memref.dim): dhir-split copies "
            "only static sizes into the pieces, whose rows it must bound"
        )
    names = ", ".join(sorted({op.name for op in others}))
    return f"besides its loop it has ops with effects ({names}) that each piece would repeat"


def _parallel(
    position: int, loop: scf.ParallelOp | affine.ParallelOp
) -> tuple[int, Operation] | Whole:
    if loop.initVals if isinstance(loop, scf.ParallelOp) else loop.results:
        return Whole(f"its {loop.name} reduces (reductions need {REASSOCIATE_ATTR})", loop)
    if isinstance(loop, affine.ParallelOp) and _first_range(loop) is None:
        return Whole("its affine.parallel's first bounds are not constants", loop)
    return position, loop


@dataclass(frozen=True)
class _Rows:
    """How a linalg op is cut along its first loop d0: d0's extent, and for each operand
    the dimension that d0 indexes (None: the operand does not use d0 and stays whole)."""

    extent: int
    dims: tuple[int | None, ...]


def _linalg_rows(op: LinalgStructuredOperation) -> _Rows | None:
    """How `op` may be cut along d0, when d0 is a parallel loop that each operand uses at
    most as one plain result of its map, every output uses, and whose extent the operands'
    static shapes agree on; None keeps the op whole."""
    if op.res or any(isinstance(o, IndexOp) for o in op.body.walk()):
        return None  # tensors; a body reading d0 would see the piece's own count
    try:
        maps = [m.data for m in op.get_indexing_maps()]
        iterators = list(op.get_iterator_types())
    except Exception:  # noqa: BLE001 - xDSL raises several kinds for odd ops
        return None
    operands = [*op.inputs, *op.outputs]
    if not iterators or iterators[0] != IteratorTypeAttr.parallel() or len(maps) != len(operands):
        return None
    dims: list[int | None] = []
    extents: set[int] = set()
    for value, amap in zip(operands, maps, strict=True):
        dim = _row_dim(amap)
        if dim is False:
            return None
        if dim is not None:
            if not _cuttable(value.type, dim):
                return None
            assert isinstance(value.type, MemRefType)
            extents.add(value.type.get_shape()[dim])
        dims.append(dim)
    if len(extents) != 1 or any(d is None for d in dims[len(op.inputs) :]):
        return None
    return _Rows(extents.pop(), tuple(dims))


def _row_dim(amap: AffineMap) -> int | None | bool:
    """The result position where `amap` has d0 alone; None if it does not use d0; False
    if it uses d0 otherwise (in an expression, twice, or with symbols)."""
    if amap.num_symbols:
        return False
    plain = [
        k for k, e in enumerate(amap.results) if isinstance(e, AffineDimExpr) and e.position == 0
    ]
    uses = [k for k, e in enumerate(amap.results) if 0 in e.used_dims()]
    if not uses:
        return None
    return plain[0] if len(uses) == 1 and plain == uses else False


def _cuttable(kind: Attribute, dim: int) -> bool:
    """Whether a memref of type `kind` has a static extent along `dim` and a static
    strided layout, so that its rows along `dim` make a subview of a static type."""
    if not isinstance(kind, MemRefType):
        return False
    shape = kind.get_shape()
    # An empty memref holds no rows to share out, and mlir-opt types its subviews with
    # dynamic strides, not the static ones dhir would write.
    if DYNAMIC_INDEX in shape or 0 in shape:
        return False
    try:
        strides, offset = kind.get_strides(), kind.get_offset()
    except Exception:  # noqa: BLE001 - a layout that is not strided
        return False
    return strides is not None and None not in strides and offset is not None


@dataclass(frozen=True)
class _Range:
    """A loop's outermost range: constants (`known`: low, high, step) when all three are,
    else the lower and upper bound values and the step where it is a constant."""

    known: tuple[int, int, int] | None
    lower: SSAValue | None = None
    upper: SSAValue | None = None
    step: int | None = None


def _loop_range(loop: Operation) -> _Range:
    if isinstance(loop, LinalgStructuredOperation):
        rows = _linalg_rows(loop)
        assert rows is not None
        return _Range((0, rows.extent, 1))
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
    low, high, stride = (constant_int(v) for v in (lower, upper, step))
    if low is not None and high is not None and stride is not None:
        return _Range((low, high, stride))
    return _Range(None, lower, upper, stride)


def loop_values(loop: scf.ForOp | affine.ForOp) -> range | None:
    """The values the loop's variable takes, when its bounds and step are constants."""
    known = _loop_range(loop).known
    if known is None or known[2] <= 0:
        return None
    return range(*known)


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


def _piece_bounds(loop: Operation, weights: Sequence[int]) -> list[_Bounds] | None:
    """Each non-empty piece's bounds: constants when the loop's range is, else fractions
    of the way from the lower bound to the upper one (step 1 only)."""
    slots = _piece_slots(loop, weights)
    return None if slots is None else list(slots.values())


def _piece_slots(loop: Operation, weights: Sequence[int]) -> dict[int, _Bounds] | None:
    """`_piece_bounds` by the index of each non-empty piece's weight."""
    total = sum(weights)
    cuts = [Fraction(w, total) for w in itertools.accumulate(weights, initial=0)]
    found = _loop_range(loop)
    if found.known is None:
        if found.step is None or found.step <= 0:
            return None
        return {k: (a, b) for k, (a, b) in enumerate(itertools.pairwise(cuts)) if a < b}
    low, high, step = found.known
    if step <= 0:
        return None
    trips = max(0, -(-(high - low) // step))
    # Weighed at most WEIGHED iterations apart, each standing for the `every` from it.
    every = -(-trips // WEIGHED) if trips else 1
    work = _iteration_work(loop, range(low, high, step * every))
    if work is None:
        edges = [low + step * int(trips * c) for c in cuts]
    else:
        sizes = [min(every, trips - k * every) for k in range(len(work))]
        done = list(itertools.accumulate((w * n for w, n in zip(work, sizes)), initial=0))
        edges = [low + step * every * bisect.bisect_left(done, c * done[-1]) for c in cuts]
    edges[-1] = max(high, low)
    edges = [min(e, max(high, low)) for e in edges]
    return {k: (a, b) for k, (a, b) in enumerate(itertools.pairwise(edges)) if a < b}


# Iterations weighed per loop (a walk each); more are weighed a block at a time.
WEIGHED = 1024


def _iteration_work(loop: Operation, values: range) -> list[int] | None:
    """How many innermost iterations each iteration of `loop` (an scf.for, or the first
    dimension of an scf.parallel) runs, for the outer variable's `values`, when the loops
    inside are scf.for loops whose bounds depend on that variable alone and the counts
    differ (a triangle: `for j in [0, i + 1)`); else None, and the pieces are cut by
    iteration count."""
    if not isinstance(loop, scf.ForOp | scf.ParallelOp):
        return None
    inner = [op for op in loop.body.walk() if op is not loop and op.regions]
    if not inner or not all(isinstance(op, scf.ForOp) and not op.iter_args for op in inner):
        return None
    iv, lifter = loop.body.block.args[0], Lifter()
    work: list[int] = []
    for value in values:
        count = _block_work(loop.body.block, {iv: value}, lifter)
        if count is None:
            return None
        work.append(count)
    return work if len(set(work)) > 1 else None


def _block_work(block: Block, env: dict[SSAValue, int], lifter: Lifter) -> int | None:
    """1 for `block`'s own ops, plus each loop's trips times its body's work."""
    total = 1
    for op in block.ops:
        if not isinstance(op, scf.ForOp):
            continue
        bounds = [lifter.constant(v, env) for v in (op.lb, op.ub, op.step)]
        body = _block_work(op.body.block, env, lifter)
        if body is None or None in bounds or bounds[2] <= 0:  # type: ignore[operator]
            return None
        lb, ub, step = cast(list[int], bounds)
        total += max(0, -(-(ub - lb) // step)) * body
    return total


def _set_range(loop: Operation, low: int | Fraction, high: int | Fraction) -> None:
    """Make `loop` (in a piece) run from `low` to `high` (see _piece_bounds)."""
    if isinstance(loop, LinalgStructuredOperation):
        assert isinstance(low, int) and isinstance(high, int)
        _view_rows(loop, low, high)
        return
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
    step = constant_int(loop.operands[2 * ranks])  # a constant where `low` is a Fraction
    bounds = (lower, upper, step if step is not None else 1)
    loop.operands[0] = _bound(loop, low, bounds)
    loop.operands[ranks] = _bound(loop, high, bounds)


def _bound(loop: Operation, at: int | Fraction, bounds: tuple[SSAValue, SSAValue, int]) -> SSAValue:
    """A value before `loop`, of the type of its bounds: the constant `at`, or the first
    value the loop takes at or after the fraction `at` of its iterations (`_between`)."""
    lower, upper, step = bounds
    block = loop.parent_block()
    assert block is not None
    kind = lower.type  # index, or the integer type of an scf.for's counter
    assert isinstance(kind, IndexType | IntegerType)
    if isinstance(at, int):
        made: list[Operation] = [arith.ConstantOp(IntegerAttr(at, kind))]
    elif at == 0:
        return lower
    elif at == 1:
        return upper
    else:
        made = _between(lower, upper, at, step)
    for op in made:
        block.insert_op_before(op, loop)
    return made[-1].results[0]


def _between(lower: SSAValue, upper: SSAValue, at: Fraction, step: int) -> list[Operation]:
    """Ops computing lower + floor((upper - lower) * at), with 0 < at < 1 (a step of 1),
    else lower + step * floor(trips * at) with trips = ceil((upper - lower) / step): a
    value the loop takes, so that each iteration falls in one piece. An affine.apply on
    index values; integer bounds are widened to index for it (signed, as scf.for compares
    them) and the result, which lies between them, narrowed back."""
    kind = lower.type
    made: list[Operation] = []
    if not isinstance(kind, IndexType):
        made = [arith.IndexCastOp(v, IndexType()) for v in (lower, upper)]
        lower, upper = (op.results[0] for op in made)
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    if step == 1:
        expr = d0 + ((d1 - d0) * at.numerator) // at.denominator
    else:
        expr = d0 + (((d1 - d0).ceil_div(step) * at.numerator) // at.denominator) * step
    made.append(affine.ApplyOp([lower, upper], AffineMapAttr(AffineMap(2, 0, (expr,)))))
    if not isinstance(kind, IndexType):
        made.append(arith.IndexCastOp(made[-1].results[0], kind))
    return made


def _view_rows(op: LinalgStructuredOperation, low: int, high: int) -> None:
    """Give each operand of `op` that uses d0 as its view of rows [low, high) along the
    dimension d0 indexes: the op then runs over those rows only, in the same order."""
    rows = _linalg_rows(op)
    assert rows is not None
    for k, dim in enumerate(rows.dims):
        if dim is None:
            continue
        view = rows_view(op.operands[k], dim, low, high)
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(view, op)
        op.operands[k] = view.result


_SHOWN = 3  # tasks named per reason in a summary line


@dataclass(frozen=True)
class PieceDevice:
    """Where dhir-split-devices put one piece of a task: its rank, that rank's device
    (`name`, `kind`, `arch`), the rank's share of the device's rate that sized the piece
    (`gflops`), and the piece's size (`9 iterations`)."""

    rank: int
    name: str
    kind: str
    arch: str | None
    gflops: float
    size: str

    def __str__(self) -> str:
        chip = f" {self.arch}" if self.arch else ""
        return f"rank{self.rank} ({self.kind}{chip}, {self.gflops:g} GFLOP/s): {self.size}"


@dataclass(frozen=True)
class SplitChoice:
    """What dhir-split (or dhir-split-devices) did with one task: cut it into `pieces`
    (0: kept it whole), `how` (what tasks treated alike share) and `detail` (this task's
    own: where, how big); `devices`, for dhir-split-devices' pieces, each piece's rank,
    device and rate."""

    task: str
    pieces: int
    how: str
    detail: str = ""
    devices: tuple[PieceDevice, ...] = ()

    def line(self) -> str:
        if not self.detail:
            return f"{self.task}: {self.how}"
        return (
            f"{self.task}: {self.how} ({self.detail})"
            if self.pieces
            else f"{self.task}: {self.how}; {self.detail}"
        )


@dataclass
class SplitPlan:
    """What dhir-split did with each task it might have cut (`choices`, in program
    order); the pass fills one only where asked to (`SplitTasksPass.split`)."""

    ranks: int = 1
    choices: list[SplitChoice] = field(default_factory=list[SplitChoice])
    # The task of each choice not yet named (a whole one, or a cut one's first piece).
    unnamed: list[tuple[int, TaskOp]] = field(default_factory=list[tuple[int, TaskOp]])

    def add(self, task: TaskOp, choice: SplitChoice) -> None:
        self.unnamed.append((len(self.choices), task))
        self.choices.append(choice)

    def name(self, names: Mapping[TaskOp, str]) -> None:
        """Name each task as `names` (`task_ids` of the module split, a cut task by the
        name its pieces extend), once: a large schedule's names take long to find."""
        for k, task in self.unnamed:
            name = names.get(task, "a task")
            if self.choices[k].pieces:
                name = name.removesuffix(".piece0")
            self.choices[k] = replace(self.choices[k], task=name)
        self.unnamed.clear()

    def lines(self, every: bool | None = None) -> list[str]:
        """A head line, then a line per task, or per reason that more than a few tasks
        share (the number and the first few: a schedule of 10,000 tasks prints a few
        lines); `every` (default: `DHIR_REPORT=all`) lists every task. None
        without tasks. Named first (`name`)."""
        assert not self.unnamed, "a split plan's tasks are named before it is printed"
        if not self.choices:
            return []
        if every is None:
            every = report_everything()
        groups: dict[str, list[SplitChoice]] = {}
        for choice in sorted(self.choices, key=lambda c: c.pieces == 0):  # the cut first
            groups.setdefault(choice.how, []).append(choice)
        cut = sum(1 for c in self.choices if c.pieces)
        whole = len(self.choices) - cut
        out = [
            f"dhir-split on {_count(self.ranks, 'rank')}: {_count(cut, 'task')} cut into "
            f"pieces, {whole} left whole"
        ]
        for how, group in groups.items():
            if every or len(group) <= _SHOWN + 1:
                out += [c.line() for c in group]
                continue
            named = ", ".join(
                c.task + (f" ({c.detail})" if c.detail else "") for c in group[:_SHOWN]
            )
            out.append(
                f"{how} ({len(group)} tasks): {named} and {len(group) - _SHOWN} more "
                f"({REPORT_ENV}=all lists each)"
            )
        return out


class _Noter:
    """Notes in a plan (where there is one) what became of each task."""

    def __init__(self, plan: SplitPlan | None, ranks: int) -> None:
        self.plan = plan
        if plan is not None:
            plan.ranks = ranks

    def whole(self, task: TaskOp, why: Whole | None) -> None:
        if self.plan is not None and why is not None:
            choice = SplitChoice("", 0, f"whole: {why.why}", why.details())
            self.plan.add(task, choice)

    def split(self, first: TaskOp, detail: str, count: int) -> None:
        """`first`: the first piece."""
        if self.plan is not None:
            self.plan.add(first, SplitChoice("", count, f"cut into {count} pieces", detail))


def _detail(loop: Operation, bounds: Sequence[_Bounds]) -> str:
    return f"over {_over(loop)}, {_sizes(loop, bounds)}"


def _sizes(loop: Operation, bounds: Sequence[_Bounds]) -> str:
    """How big each piece is: its iterations (rows of d0 for a linalg op), or its share
    of a range known only at run time."""
    if any(isinstance(low, Fraction) for low, _ in bounds):
        shares = [str(Fraction(high) - Fraction(low)) for low, high in bounds]
        return f"{_listed(shares)} of its run-time range"
    known = None if isinstance(loop, LinalgStructuredOperation) else _loop_range(loop).known
    step = known[2] if known is not None and known[2] > 0 else 1
    counts = [-(-(int(high) - int(low)) // step) for low, high in bounds]
    noun = "row" if isinstance(loop, LinalgStructuredOperation) else "iteration"
    if len(set(counts)) == 1:
        return f"{_count(counts[0], noun)} each"
    return f"{_listed([str(c) for c in counts])} {noun}s"


def _listed(sizes: Sequence[str]) -> str:
    """`1/4 each`, `34, 33, 33`, or for many pieces runs of equal sizes: `3 x 34, 5 x 33`."""
    if len(set(sizes)) == 1:
        return f"{sizes[0]} each"
    if len(sizes) <= 8:
        return ", ".join(sizes)
    runs = [(size, len(list(same))) for size, same in itertools.groupby(sizes)]
    return ", ".join(f"{n} x {size}" for size, n in runs)
