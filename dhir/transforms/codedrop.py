"""`dhir-codedrop`: plain MLIR in, schedules of tasks out.

A function without dhir ops becomes one with schedules. Each top-level piece of work
becomes a task: a loop nest (`scf.for`, `scf.parallel`, `affine.for`, `affine.parallel`),
a linalg structured op, or a `func.call` taking memrefs. A task lists the memrefs defined
outside it that it uses; a view made by host code (a `memref.subview` of an argument,
say) is made again inside the task, which lists the view's base buffer instead, so that
no two schedule operands alias. Consecutive tasks share one schedule; scalar arithmetic,
allocations and views between them move before it. Anything else is host code and ends
the schedule.

An `scf.while` that counts as an `scf.for` does (`while (i < n) { ...; i = i + c }`, with
no wrap of the counter possible: dhir.transforms.counted_whiles) is first made that
`scf.for`, so that it becomes the same tasks; other while loops stay host code.

An outer `scf.for`/`affine.for` around several pieces of work is a *time loop*: it stays
a host loop around schedules of its body. One around a single nest is a task when its
counter reaches a subscript of that nest (the rows of a gemm) and a time loop otherwise.
Both choices keep the meaning (tasks run in program order); the rule only decides what
dhir may spread over ranks.

Work stays host code (still correct, run on every rank) when it cannot be a task: its
results are used, it uses a memref type dhir cannot send, its memrefs may alias one
another and it writes one, it touches a mutable global, it calls a function that
holds schedules, or it would list part of a larger buffer and reinterpret_cast past
it. See docs/commands.md.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerType, MemRefType, ModuleOp, NoneAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import PassFailedException, VerifyException

from dhir.analysis.effects import memory_effects
from dhir.analysis.regions import iterations_independent, view_chain
from dhir.analysis.sharing import (
    CastReach,
    buffers,
    mutable_global_users,
    reaches_mutable_global,
    shared,
)
from dhir.dialects import affine, func, scf
from dhir.dialects.access import Kind, is_pure, kind, subscripts
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp, defined_inside
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.calls import callers_of, through_callers
from dhir.ir.diagnostics import DhirError, Diagnostic, UsageError, loc_of
from dhir.ir.tasks import reaching_schedules
from dhir.ir.walk import enclosing, find_ops
from dhir.transforms.counted_whiles import as_for_loops
from dhir.transforms.pass_options import check_entry
from dhir.transforms.shard_collectives import SPMD
from dhir.transforms.split_tasks import loop_values

TARGET_KINDS = ("any", "cpu", "gpu")
_LOOPS = (scf.ForOp, scf.ParallelOp, affine.ForOp, affine.ParallelOp)
_SERIAL_LOOPS = (scf.ForOp, affine.ForOp)
# Host ops whose regions may hold work of their own (a time loop's body, a branch).
_HOST_REGIONS = (
    scf.ForOp,
    affine.ForOp,
    scf.WhileOp,
    scf.IfOp,
    affine.IfOp,
    scf.ExecuteRegionOp,
)
# Ops that touch no data: they may move before a schedule instead of ending it.
_MOVABLE = (Kind.ALLOC, Kind.SHAPE, Kind.VIEW, Kind.PURE)


@dataclass(frozen=True)
class CodeDropPass(ModulePass):
    """Wrap the loop nests, linalg ops and calls of functions without dhir ops in tasks."""

    name = "dhir-codedrop"

    entry: str | None = None  # the one function to rewrite; default: all but tasks' callees
    target: str = "any"  # an arch, or the kind cpu, gpu or any

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        codedrop(op, self.entry, self.target)


@dataclass
class Summary:
    """What CodeDrop did: pieces of work wrapped in tasks, schedules made."""

    nests: int = 0
    schedules: int = 0


def has_schedule(function: func.FuncOp) -> bool:
    return any(isinstance(op, ScheduleOp | TaskOp) for op in function.walk())


def find_function(module: ModuleOp, name: str) -> func.FuncOp | None:
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            return op
    return None


def codedrop(module: ModuleOp, entry: str | None = None, target: str = "any") -> Summary:
    """Rewrite `entry` (or every function no task calls) when it holds no dhir ops; what
    was done."""
    _check_target(target)
    functions = [f for f in module.body.block.ops if isinstance(f, func.FuncOp) and f.body.blocks]
    check_entry(CodeDropPass.name, module, entry)
    if entry is not None:
        functions = [f for f in functions if f.sym_name.data == entry]
    else:
        # A function a task calls runs inside that task: schedules made there could
        # not run (the verifier refuses them), so it stays as written.
        called = called_from_tasks(module)
        functions = [f for f in functions if f.sym_name.data not in called]
    functions = [f for f in functions if not has_schedule(f)]
    names = {f.sym_name.data for f in functions}
    # Calls into functions that hold (or will hold) schedules, or call one that does,
    # stay host code: a task cannot run a schedule.
    blocked = names | reaching_schedules(module)
    dropper = _Dropper(target, blocked, mutable_global_users(module), CastReach(module))
    for function in functions:
        as_for_loops(function)  # counted scf.while loops: the scf.for nests they are
        for block in function.body.blocks:
            dropper.block(block)
    return dropper.summary


def called_from_tasks(module: ModuleOp) -> set[str]:
    """The names of the functions a task calls, directly or through other calls."""
    callees: dict[str, dict[str, None]] = {}
    for callee, callers in callers_of(module).items():
        for caller in callers:
            callees.setdefault(caller, {})[callee] = None
    direct = {
        c.callee.string_value(): None for c in find_ops(module, func.CallOp) if enclosing(c, TaskOp)
    }
    return set(through_callers(direct, callees))


def _check_target(target: str) -> None:
    try:
        _make_target(target).verify_()
    except VerifyException as error:
        raise PassFailedException(
            f"dhir-codedrop: bad target '{target}': {error}; give an arch, or cpu, gpu or any"
        ) from None


def _make_target(target: str) -> TargetOp:
    return TargetOp(kind=target) if target in TARGET_KINDS else TargetOp(arch=target)


@dataclass
class _Task:
    """A piece of work about to become a task."""

    op: Operation
    bases: list[SSAValue]  # the memrefs it lists
    views: dict[SSAValue, list[Operation]]  # a used view -> the host ops making it
    writes: frozenset[SSAValue]


@dataclass
class _Dropper:
    target: str
    blocked: set[str]
    globals_: tuple[set[str], dict[str, str]]
    reach: CastReach
    summary: Summary = field(default_factory=Summary)

    def block(self, block: Block) -> None:
        run: list[_Task] = []
        moved: list[Operation] = []
        for op in list(block.ops):
            if op.has_trait(IsTerminator):
                break
            if _is_movable(op):
                if run:
                    moved.append(op)
                continue
            task = self._task(op) if self._is_work(op) else None
            if task is not None and not _conflicts(run, task):
                run.append(task)
                continue
            self._flush(run, moved)
            run, moved = [], []
            if task is not None:
                run.append(task)
            elif isinstance(op, _HOST_REGIONS) and not self._is_work(op):
                for region in op.regions:
                    for inner in region.blocks:
                        self.block(inner)
        self._flush(run, moved)

    def _is_work(self, op: Operation) -> bool:
        if any(result.uses for result in op.results):
            return False
        if isinstance(op, _SERIAL_LOOPS):
            return not _is_time_loop(op)
        if isinstance(op, (*_LOOPS, LinalgStructuredOperation)):
            return True
        if isinstance(op, func.CallOp):
            return op.callee.string_value() not in self.blocked and any(
                isinstance(v.type, MemRefType) for v in op.operands
            )
        return False

    def _task(self, op: Operation) -> _Task | None:
        """`op` as a task, or None when it must stay host code."""
        used = _outside_memrefs(op)
        views: dict[SSAValue, list[Operation]] = {}
        roots: dict[SSAValue, frozenset[SSAValue]] = {}
        for value in used:
            chain, base = view_chain(value)
            if chain:
                views[value] = chain
            roots[value] = frozenset([base])
        bases = list(dict.fromkeys(next(iter(r)) for r in roots.values()))
        if not all(_sendable(b) for b in bases) or self._reaches_outside(op):
            return None
        if self._casts_past(op, views, bases):
            return None
        _, writes = memory_effects([op], dict(roots))
        task = _Task(op, bases, views, frozenset(writes))
        if _aliased(task.bases, task.bases, task.writes):
            return None
        return task

    def _reaches_outside(self, op: Operation) -> bool:
        """Whether `op` uses a mutable global or calls a function holding schedules."""
        calls = (o for o in op.walk() if isinstance(o, func.CallOp))
        blocked = any(call.callee.string_value() in self.blocked for call in calls)
        return blocked or reaches_mutable_global(op, *self.globals_)

    def _casts_past(
        self, op: Operation, views: dict[SSAValue, list[Operation]], bases: list[SSAValue]
    ) -> bool:
        """Whether the task would list part of a larger buffer (the base buffer of an
        extract_strided_metadata, say) and reinterpret_cast past it, there or in a
        function it calls: dhir-lower-to-mpi refuses that, host code runs it."""
        if all(self.reach.whole(b) for b in bases):
            return False
        made = (view for chain in views.values() for view in chain)
        return any(self.reach.past(inner) for inner in (*made, *op.walk()))

    def _flush(self, run: list[_Task], moved: list[Operation]) -> None:
        if not run:
            return
        first = run[0].op
        block = first.parent_block()
        assert block is not None
        for op in moved:
            op.detach()
            block.insert_op_before(op, first)
        operands = list(dict.fromkeys(b for task in run for b in task.bases))
        target = _make_target(self.target)
        target.result.name_hint = self.target if self.target in TARGET_KINDS else "target"
        body = Block([target])
        schedule = ScheduleOp(operands, Region(body))
        schedule.location = first.location
        block.insert_op_before(schedule, first)
        end = body.last_op
        assert end is not None  # the schedule's dhir.yield
        for task in run:
            body.insert_op_before(_wrap(task, target.result), end)
            _erase_unused(task.views.values())
        self.summary.nests += len(run)
        self.summary.schedules += 1


def _wrap(task: _Task, target: SSAValue) -> TaskOp:
    op = task.op
    inner = Block()
    for value, chain in task.views.items():
        mapping: dict[SSAValue, SSAValue] = {}
        for view in chain:
            clone = view.clone(value_mapper=mapping)
            inner.add_op(clone)
            mapping.update(zip(view.results, clone.results))
        made = mapping[value]
        value.replace_uses_with_if(made, lambda use: _inside(use.operation, op))
    op.detach()
    inner.add_op(op)
    wrapped = TaskOp(target, task.bases, Region(inner))
    wrapped.location = op.location
    return wrapped


def _erase_unused(chains: Iterable[list[Operation]]) -> None:
    """Drop host views that only the wrapped work used (each task makes its own)."""
    for chain in chains:
        for view in reversed(chain):
            if view.parent is not None and not any(r.uses for r in view.results):
                view.detach()
                view.erase()


def auto_codedrop(module: ModuleOp, entry: str, target: str = "any") -> str | None:
    """What `dhir run` does with a plain program: apply CodeDrop to `entry` when it holds
    no schedule, and say so (the line to show the user); None when it has one."""
    function = find_function(module, entry)
    if function is None or not function.body.blocks:
        return None
    if has_schedule(function) or SPMD in function.attributes:
        _check_target_unused(function, target)
        if has_schedule(function):
            return None
        return f"dhir: @{entry} is a shard program; each rank runs its device's part"
    try:
        done = codedrop(module, entry, target)
    except PassFailedException as error:
        raise DhirError([Diagnostic(str(error.args[0]) if error.args else str(error))]) from None
    where = f"dhir: no dhir.schedule in @{entry}"
    if not done.nests and entry in reaching_schedules(module):
        return None  # the schedules of the functions it calls run as written
    if not done.nests:
        return (
            f"{where}, and no loop nest, linalg op or call CodeDrop can wrap; it runs as host code"
        )
    tasks = f"{done.nests} task{'s' if done.nests != 1 else ''}"
    schedules = f"{done.schedules} schedule{'s' if done.schedules != 1 else ''}"
    return f"{where}; CodeDrop made {tasks} in {schedules} (--no-codedrop to run it as written)"


def _check_target_unused(function: func.FuncOp, target: str) -> None:
    """Refuse a target other than "any" for an entry CodeDrop leaves as it is: its tasks
    keep the targets they were written with, and a shard program runs on the ranks' CPUs,
    so the target asked for would be dropped without a word."""
    if target == "any":
        return
    if has_schedule(function):
        what = "holds a dhir.schedule, whose tasks keep the dhir.target they name"
        hint = "drop --target (target= in dhir.run), or change the tasks' dhir.target"
    else:
        what = "is a shard program, which runs on the ranks' CPUs"
        hint = "drop --target (target= in dhir.run)"
    name = function.sym_name.data
    message = f"the target {target} is for the tasks CodeDrop makes, and @{name} {what}: {hint}"
    raise UsageError([Diagnostic(message, loc_of(function))])


def _is_time_loop(op: Operation) -> bool:
    """An outer serial loop around work that is not one nest over its rows, and whose
    iterations may depend on one another (a loop proved free of carried dependences,
    such as gemm's rows around two nests, is one task that dhir-split can cut)."""
    body = [o for o in op.regions[0].block.ops if not o.has_trait(IsTerminator)]
    nests = [o for o in body if not _is_movable(o)]
    if not any(_holds_work(o) for o in nests):
        return False  # a loop of plain statements: one nest
    block = op.regions[0].block
    if not op.results and len(block.args) == 1 and _free_of_carried(op):
        return False
    if len(nests) != 1 or op.results or not isinstance(nests[0], _LOOPS):
        return True
    return not _reaches_subscript(block.args[0], nests[0])


def _free_of_carried(loop: Operation) -> bool:
    """Whether the loop's iterations provably touch disjoint data (isl, over the memrefs
    defined outside it); calls and unknown ops make that unprovable."""
    if any(isinstance(o, func.CallOp) for o in loop.walk()):
        return False
    outside = {
        v
        for o in loop.walk()
        for v in o.operands
        if isinstance(v.type, MemRefType) and not defined_inside(v, loop)
    }
    return iterations_independent(outside, loop.regions[0].block, _tiles(loop))


def _tiles(loop: Operation) -> range | None:
    """The values a loop of constant bounds and a step above 1 takes (tiles 32 apart touch
    disjoint rows), where it takes two or more; else None: any values. A loop of one
    iteration, trivially free of carried dependences, stays a time loop around its nests,
    which dhir-split can cut one by one."""
    values = loop_values(loop) if isinstance(loop, scf.ForOp | affine.ForOp) else None
    return values if values is not None and values.step > 1 and len(values) > 1 else None


def _holds_work(op: Operation) -> bool:
    return any(isinstance(o, (*_LOOPS, LinalgStructuredOperation, func.CallOp)) for o in op.walk())


def _reaches_subscript(counter: SSAValue, nest: Operation) -> bool:
    """Whether `counter`, through index arithmetic, is a subscript of an access in `nest`."""
    derived = {counter}
    for op in nest.walk():
        if any(v in derived for v in subscripts(op)):
            return True
        if is_pure(op) and any(v in derived for v in op.operands):
            derived.update(op.results)
    return False


def _is_movable(op: Operation) -> bool:
    return not op.regions and kind(op) in _MOVABLE


def _outside_memrefs(op: Operation) -> list[SSAValue]:
    used: dict[SSAValue, None] = {}
    for inner in op.walk():
        for value in inner.operands:
            if isinstance(value.type, MemRefType) and not defined_inside(value, op):
                used[value] = None
    return list(used)


def _sendable(value: SSAValue) -> bool:
    type_ = value.type
    return (
        isinstance(type_, MemRefType)
        and isinstance(type_.layout, NoneAttr)
        and isinstance(type_.element_type, IntegerType | IndexType | AnyFloat)
    )


def _aliased(first: list[SSAValue], second: list[SSAValue], writes: frozenset[SSAValue]) -> bool:
    """Whether a value of `first` and a different one of `second` may share a buffer
    while one of them is written (dhir-lower-to-mpi refuses such schedule operands)."""
    for a in first:
        for b in second:
            if a is not b and (a in writes or b in writes) and shared(buffers(a), buffers(b)):
                return True
    return False


def _conflicts(run: list[_Task], task: _Task) -> bool:
    if not run:
        return False
    bases = list(dict.fromkeys(b for t in run for b in t.bases))
    writes = task.writes.union(*(t.writes for t in run))
    return _aliased(task.bases, bases, writes)


def _inside(user: Operation, op: Operation) -> bool:
    current: Operation | None = user
    while current is not None:
        if current is op:
            return True
        current = current.parent_op()
    return False


__all__ = ["CodeDropPass", "Summary", "auto_codedrop", "codedrop", "find_function", "has_schedule"]
