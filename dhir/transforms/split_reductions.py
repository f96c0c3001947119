"""Splitting a reduction when the user allows reassociation (`dhir.reassociate`), for
`dhir-split` (dhir/transforms/split_tasks.py decides how many pieces and where they go).

A task with the unit attribute `dhir.reassociate` whose body is pure ops (and loads of
memrefs the loop does not write), one `scf.parallel` with reductions (or an `scf.for`
whose iter_args are plain accumulations and whose iterations are otherwise independent),
then ops without regions that use its results (pure ops, loads and stores) is cut like a
reduction-free loop, with two changes: each piece starts its reductions from the
combining op's identity and stores its partial results into its own element of a new
buffer (one per reduction, `memref.alloc` before the schedule, `memref.dealloc` after it,
a schedule operand like any other); and one more task, the last piece, combines the
original initial value and the partials in piece order with the same op and then runs
the ops that followed the loop. The result equals the sequential one up to the order of
the combining op: exactly for integer ops and float min/max, within rounding for float
sums and products.

Only ops with an exact identity qualify (`arith.addf` -0.0, `mulf` 1.0, `maximumf` -inf,
`minimumf` +inf, `maxnumf`/`minnumf` NaN, `addi`/`ori`/`xori`/`maxui` 0, `muli` 1,
`andi`/`minui` all ones, `maxsi`/`minsi` the smallest/largest signed value). A task
with the attribute that does not fit stays whole, with a one-line warning on stderr.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.analysis.lift import Lifter
from dhir.analysis.regions import iterations_independent
from dhir.dialects import arith, memref, scf
from dhir.dialects.access import Access, global_name, is_pure, scalar_access
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import Diagnostic, loc_of, warn
from dhir.ir.tasks import PIECE_ATTR, is_gpu_task, task_ids

REASSOCIATE_ATTR = "dhir.reassociate"

# Calls in the loop reach state the memref regions do not describe (a global does too).
_CALLS = frozenset({"func.call", "func.call_indirect"})
_FLOAT_OPS: dict[type[Operation], float] = {
    arith.AddfOp: -0.0,
    arith.MulfOp: 1.0,
    arith.MaximumfOp: -math.inf,
    arith.MinimumfOp: math.inf,
    # NaN, not -inf: maxnumf(NaN, x) is x even for a NaN x, so a piece of NaNs stays NaN.
    arith.MaxnumfOp: math.nan,
    arith.MinnumfOp: math.nan,
}
_INT_OPS: dict[type[Operation], Callable[[int], int]] = {
    arith.AddiOp: lambda _: 0,
    arith.MuliOp: lambda _: 1,
    arith.AndIOp: lambda _: -1,
    arith.OrIOp: lambda _: 0,
    arith.XOrIOp: lambda _: 0,
    arith.MaxSIOp: lambda width: -(2 ** (width - 1)),
    arith.MinSIOp: lambda width: 2 ** (width - 1) - 1,
    arith.MaxUIOp: lambda _: 0,
    arith.MinUIOp: lambda _: -1,
}

# The helpers of split_tasks.py that give the pieces' bounds and set a loop's range,
# passed in by it (it imports this module).
Bounds = Callable[
    [Operation, Sequence[int]], list[tuple[int, int] | tuple[Fraction, Fraction]] | None
]
SetRange = Callable[[Operation, int | Fraction, int | Fraction], None]


@dataclass(frozen=True)
class _Reduction:
    position: int  # of the loop among the body's ops
    loop: scf.ParallelOp | scf.ForOp
    # For each reduced value: the op combining the running value with a new one, and
    # which of its operands is the running value.
    combiners: tuple[tuple[Operation, SSAValue], ...]


def reassociable(task: TaskOp) -> bool:
    """Whether `task` asks for reassociation and is a reduction that can be split."""
    return REASSOCIATE_ATTR in task.attributes and isinstance(_reduction(task), _Reduction)


def warn_ignored(module: ModuleOp) -> None:
    """One line on stderr for each task whose `dhir.reassociate` has no effect, saying
    why."""
    asking = [
        task
        for schedule in walk_outside_tasks(module)
        if isinstance(schedule, ScheduleOp)
        for task in schedule.tasks()
        if REASSOCIATE_ATTR in task.attributes and PIECE_ATTR not in task.attributes
    ]
    names = task_ids(module) if asking else {}
    for task in asking:
        found = _reduction(task)
        if isinstance(found, str):
            name = names.get(task, "a task")
            message = f"{REASSOCIATE_ATTR} on {name} has no effect: {found}; the task stays whole"
            warn(Diagnostic(message, loc_of(task), "warning"))


def split_reduction(
    task: TaskOp, index: int, weights: Sequence[int], bounds_of: Bounds, set_range: SetRange
) -> bool:
    """Replace `task` (the schedule's task `index`, with `dhir.reassociate`) by pieces
    sized as `weights` that compute partial reductions, and a task combining them;
    whether it did."""
    if REASSOCIATE_ATTR not in task.attributes:
        return False
    found = _reduction(task)
    if not isinstance(found, _Reduction):
        return False
    bounds = bounds_of(found.loop, weights)
    if bounds is None or len(bounds) < 2:
        return False
    schedule = task.parent_op()
    assert isinstance(schedule, ScheduleOp)
    partials = [_partials(schedule, r.type, len(bounds)) for r in found.loop.results]
    for k, (low, high) in enumerate(bounds):
        piece = _piece(task, index, k)
        loop = list(piece.body.block.ops)[found.position]
        assert isinstance(loop, scf.ParallelOp | scf.ForOp)
        set_range(loop, low, high)
        _compute_partials(loop, found.combiners, partials, k)
        _list_used(piece, partials)
        Rewriter.insert_op(piece, InsertPoint.before(task))
    final = _piece(task, index, len(bounds))
    _combine(final, found, partials)
    _list_used(final, partials)
    Rewriter.insert_op(final, InsertPoint.before(task))
    task.detach()
    task.erase()
    return True


def reduction_whole(task: TaskOp) -> str | None:
    """Why the reduction of `task` cannot be split (None: it can, given 2 pieces)."""
    found = _reduction(task)
    return found if isinstance(found, str) else None


def _reduction(task: TaskOp) -> "_Reduction | str":
    """The task's reduction loop, or why it cannot be split."""
    if is_gpu_task(task):
        return "GPU tasks are not split"
    if task.token.uses:
        return "its token is used"
    ops = list(task.body.block.ops)[:-1]  # without the dhir.yield
    # Loads may come before the loop (an initial value read from memory) when the loop
    # only reads their memref: the combining task reads it after the pieces ran.
    loops = [k for k, op in enumerate(ops) if not (pure(op) or _load(op) is not None)]
    if not loops:
        return "its body has no loop"
    position = loops[0]
    loop = ops[position]
    if not (isinstance(loop, scf.ParallelOp) and loop.initVals) and not (
        isinstance(loop, scf.ForOp) and loop.iter_args
    ):
        return (
            f"its first op with effects is {loop.name}, not an scf.parallel with init values "
            "or an scf.for with iter_args"
        )
    after = ops[position + 1 :]
    # What follows the loop runs once, in the combining task: loads and stores only.
    bad = next(
        (op for op in after if op.regions or not (pure(op) or scalar_access(op) is not None)),
        None,
    )
    if bad is not None:
        return f"'{bad.name}' after the loop (only pure ops, loads and stores may follow it)"
    if opaque(loop):
        return "its loop calls a function or uses a global, llvm, gpu or mpi op"
    for load in (access for op in ops[:position] if (access := _load(op)) is not None):
        read = load.memref
        if any(_load(o) is None for o in loop.walk() if read in o.operands):
            return f"its loop may write %{read.name_hint or '?'}, which a load before it reads"
    if isinstance(loop, scf.ForOp):
        combiners = _accumulations(loop)
        # Compared as dhir-split compares a loop without iter_args: only the values the
        # variable takes (a step of 2 or a tile loop's starts), through the views before.
        if isinstance(combiners, tuple) and not iterations_independent(
            task.memrefs, loop.body.block, _values(loop), ops[:position]
        ):
            return "its scf.for's iterations are not proven independent"
    else:
        combiners = _combiners(loop)
    return _Reduction(position, loop, combiners) if isinstance(combiners, tuple) else combiners


def _values(loop: scf.ForOp) -> range | None:
    """The values the loop's variable takes, when its bounds and step are constants (an
    iN counter's read signed, as scf.for compares them)."""
    lifter = Lifter()
    low, high, step = (lifter.constant(v) for v in (loop.lb, loop.ub, loop.step))
    if low is None or high is None or step is None or step <= 0:
        return None
    return range(low, high, step)


def _combiners(loop: scf.ParallelOp) -> "tuple[tuple[Operation, SSAValue], ...] | str":
    reduce = loop.body.block.last_op
    assert isinstance(reduce, scf.ReduceOp)
    out: list[tuple[Operation, SSAValue]] = []
    for region in reduce.reductions:
        block = region.block
        ops = list(block.ops)
        if len(ops) != 2 or not isinstance(ops[1], scf.ReduceReturnOp):
            return "a reduction is not one combining op"
        op = ops[0]
        if set(op.operands) != set(block.args) or len(op.operands) != 2:
            return f"a reduction's '{op.name}' does not combine the two reduced values"
        if ops[1].operands[0] is not op.results[0]:
            return "a reduction does not return its combining op's result"
        why = _unusable(op)
        if why is not None:
            return why
        out.append((op, block.args[0]))
    return tuple(out)


def _accumulations(loop: scf.ForOp) -> "tuple[tuple[Operation, SSAValue], ...] | str":
    """For an scf.for whose each iter_arg is used only by one op combining it with a
    value of the iteration, whose result only the yield returns in its place."""
    block = loop.body.block
    yielded = block.last_op
    assert isinstance(yielded, scf.YieldOp)
    out: list[tuple[Operation, SSAValue]] = []
    for j, carried in enumerate(block.args[1:]):
        uses = list(carried.uses)
        op = uses[0].operation if len(uses) == 1 else None
        if op is None or op.parent_block() is not block or len(op.operands) != 2:
            return "an iter_arg is not used by exactly one combining op"
        result_uses = list(op.results[0].uses) if len(op.results) == 1 else []
        if [(u.operation, u.index) for u in result_uses] != [(yielded, j)]:
            return f"the result of '{op.name}' on an iter_arg is not only yielded in its place"
        why = _unusable(op)
        if why is not None:
            return why
        out.append((op, carried))
    return tuple(out)


def _unusable(op: Operation) -> str | None:
    """Why `op` cannot combine partials, if it cannot."""
    if _identity(op, op.results[0].type) is None:
        return f"a reduction by '{op.name}' on {op.results[0].type} has no exact identity"
    flags = op.properties.get("overflowFlags")
    if flags is not None and getattr(flags, "data", ()):
        return f"a reduction's '{op.name}' has overflow flags, which another order may break"
    return None


def _identity(op: Operation, type_: Attribute) -> IntegerAttr | FloatAttr | None:
    if isinstance(type_, AnyFloat) and type(op) in _FLOAT_OPS:
        return FloatAttr(_FLOAT_OPS[type(op)], type_)
    if isinstance(type_, IntegerType | IndexType) and type(op) in _INT_OPS:
        width = type_.width.data if isinstance(type_, IntegerType) else 64
        value = _INT_OPS[type(op)](width)
        return IntegerAttr(value, type_)
    return None


def pure(op: Operation) -> bool:
    """Whether each piece may run its own copy of `op`: it has no effect (dhir-split's
    rule too)."""
    if op.regions or any(isinstance(v.type, MemRefType) for v in (*op.operands, *op.results)):
        return False
    return is_pure(op)


def _load(op: Operation) -> Access | None:
    """The access of a load of one element (memref or affine), else None."""
    access = scalar_access(op)
    return access if access is not None and access.read else None


def opaque(loop: Operation) -> bool:
    """Whether `loop` reaches state that the memref regions do not describe."""
    return any(
        o.name in _CALLS or global_name(o) is not None or o.dialect_name() in ("llvm", "gpu", "mpi")
        for o in loop.walk()
    )


def _partials(schedule: ScheduleOp, type_: Attribute, count: int) -> SSAValue:
    """A new buffer of `count` elements around `schedule`, a schedule operand."""
    alloc = memref.AllocOp.get(type_, shape=[count])
    alloc.results[0].name_hint = "partials"
    Rewriter.insert_op(alloc, InsertPoint.before(schedule))
    Rewriter.insert_op(memref.DeallocOp.get(alloc.results[0]), InsertPoint.after(schedule))
    schedule.operands = [*schedule.operands, alloc.results[0]]
    return alloc.results[0]


def _piece(task: TaskOp, index: int, k: int) -> TaskOp:
    piece = task.clone()
    for name in (REASSOCIATE_ATTR, "dhir.split"):
        piece.attributes.pop(name, None)
    piece.attributes[PIECE_ATTR] = ArrayAttr([IntegerAttr(index, i64), IntegerAttr(k, i64)])
    return piece


def _compute_partials(
    loop: scf.ParallelOp | scf.ForOp,
    combiners: Sequence[tuple[Operation, SSAValue]],
    partials: Sequence[SSAValue],
    k: int,
) -> None:
    """Start `loop` (in piece k) from the identities, store its results at [k] of
    `partials`, and drop what followed it (the combining task runs that)."""
    block = loop.parent_block()
    assert block is not None
    first_init = 3 * len(loop.lowerBound) if isinstance(loop, scf.ParallelOp) else 3
    for j, ((combiner, _), result) in enumerate(zip(combiners, loop.results, strict=True)):
        identity = _identity(combiner, result.type)
        assert identity is not None
        constant = arith.ConstantOp(identity, result.type)
        Rewriter.insert_op(constant, InsertPoint.before(loop))
        loop.operands[first_init + j] = constant.result
    ops = list(block.ops)
    after = ops[ops.index(loop) + 1 : -1]
    before = [op for op in ops[: ops.index(loop)] if _load(op) is not None]
    for op in [*reversed(after), *(op for op in before if not op.results[0].uses)]:
        op.detach()
        op.erase()
    at = arith.ConstantOp(IntegerAttr(k, IndexType()))
    stores = [
        memref.StoreOp.get(r, p, [at.result]) for r, p in zip(loop.results, partials, strict=True)
    ]
    Rewriter.insert_op([at, *stores], InsertPoint.after(loop))


def _combine(task: TaskOp, found: _Reduction, partials: Sequence[SSAValue]) -> None:
    """Replace the loop in `task` by: the initial value, combined with each partial in
    piece order."""
    loop = list(task.body.block.ops)[found.position]
    assert isinstance(loop, scf.ParallelOp | scf.ForOp)
    inits = loop.initVals if isinstance(loop, scf.ParallelOp) else loop.iter_args
    count = partials[0].type.get_shape()[0] if isinstance(partials[0].type, MemRefType) else 0
    made: list[Operation] = []
    indices = [arith.ConstantOp(IntegerAttr(k, IndexType())) for k in range(count)]
    made.extend(indices)
    for (combiner, running), init, result, buffer in zip(
        found.combiners, inits, loop.results, partials, strict=True
    ):
        acc = init
        for at in indices:
            load = memref.LoadOp.get(buffer, [at.result])
            step = combiner.clone()
            for n, operand in enumerate(step.operands):
                step.operands[n] = acc if operand is running else load.res
            made.extend((load, step))
            acc = step.results[0]
        result.replace_all_uses_with(acc)
    Rewriter.insert_op(made, InsertPoint.before(loop))
    loop.detach()
    loop.erase()


def _list_used(task: TaskOp, partials: Sequence[SSAValue]) -> None:
    """Make the task list the memrefs its body uses: its own that it still uses, in
    their order, then the partial buffers it uses."""
    used = {v for op in task.body.walk() for v in op.operands}
    target = [task.target] if task.target is not None else []
    memrefs = [m for m in (*task.memrefs, *partials) if m in used]
    task.operands = [*target, *memrefs]
    task.properties["operandSegmentSizes"] = DenseArrayBase.from_list(
        i32, [len(target), len(memrefs)]
    )
