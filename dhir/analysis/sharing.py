"""Data that the native backend cannot keep consistent across ranks, refused with an
error at the user's source.

The lowering moves each schedule operand between ranks on its own, from what the
tasks listing it read and write. These kinds of shared data escape that:

- schedule operands that are views of one buffer (the same base value through casts,
  subviews, ...): a write through one view is never sent to a rank reading the other;
- a mutable `memref.global` used inside a task, directly or through a function it
  calls: every rank has its own copy, and nothing moves it;
- an address taken outside a task (`memref.extract_aligned_pointer_as_index` in host
  code, then integer arithmetic) and used inside it: on the task's rank it points into
  that rank's copy, which nothing moves since the task does not list the memref;
- a `memref.reinterpret_cast` in a task (or a function it calls) of a schedule operand
  that is part of a larger buffer (a view made before the schedule, or an argument some
  call passes a view): it may reach the buffer's elements outside the operand, which
  dhir neither follows nor moves.

Where the IR shows any of them, the program is refused rather than run wrongly. Inside a
function, its memref arguments are distinct buffers; so a call that passes views of one
buffer as two of them, to a function holding a schedule (directly or through its calls),
is refused too, and an argument that some call passes a global counts as that global
(docs/semantics.md).
"""

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.traits import IsTerminator, SymbolTable

from dhir.analysis.effects import derived_results, task_effects
from dhir.dialects import func, memref, scf
from dhir.dialects.access import GLOBAL_USES, global_name, is_alloc, is_global
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.dialects.layouts import strided_layout
from dhir.ir.calls import callers_of, through_callers
from dhir.ir.diagnostics import loc_of, value_name, value_names
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import reaching_schedules
from dhir.ir.walk import enclosing, find_ops


def check_shared_data(module: ModuleOp) -> None:
    """Raise PassFailedAt for the first schedule with aliasing operands that a task
    writes, the first task that uses a mutable global or an address taken outside it."""
    # One walk for the three kinds (each walk of a large schedule costs 30 ms); nothing
    # here changes the module.
    found = find_ops(module, (func.CallOp, memref.ExtractAlignedPointerAsIndexOp, *GLOBAL_USES))
    calls = [op for op in found if isinstance(op, func.CallOp)]
    _check_calls(calls, module)
    passed = _passed_globals(calls, module)
    for taken in found:
        if isinstance(taken, memref.ExtractAlignedPointerAsIndexOp):
            _check_address(taken)
    mutable = _mutable_globals(module, [op for op in found if isinstance(op, GLOBAL_USES)])
    # Without a mutable global no task can use one: its ops need no second look.
    users = _functions_using(module, mutable) if mutable else {}
    reach = CastReach(module, calls)
    for schedule in (s for s in walk_outside_tasks(module) if isinstance(s, ScheduleOp)):
        _check_operands(schedule, passed)
        for task in schedule.tasks() if mutable else ():
            _check_globals(task, mutable, users)
        parts = [v for v in dict.fromkeys(schedule.args) if not reach.whole(v)]
        for task in schedule.tasks() if parts else ():
            # Most operands are whole buffers: no cast can reach past them.
            _check_reach(task, parts, reach)


# --- aliasing schedule operands ---------------------------------------------------------


def _check_operands(schedule: ScheduleOp, passed: dict[SSAValue, frozenset[object]]) -> None:
    operands = list(dict.fromkeys(v for v in schedule.args if isinstance(v.type, MemRefType)))
    if len(operands) < 2:
        return
    bases = {value: _with_passed(buffers(value), passed) for value in operands}
    pairs = [
        (first, second, common)
        for i, first in enumerate(operands)
        for second in operands[i + 1 :]
        if (common := shared(bases[first], bases[second]))
        and not _swapped_apart(first, second, passed)
    ]
    if not pairs:
        return  # no two operands may alias: what the tasks write does not matter
    written: set[SSAValue] = set()
    for task in schedule.tasks():
        written |= task_effects(task).writes
    for first, second, common in pairs:
        if first in written or second in written:
            message = _alias_message(first, second, common)
            called = [v for v in (first, second) if v in passed and passed[v] & common]
            if called:
                what = describe(passed[called[0]] & common)
                message += f" (a call passes {what} as {value_name(called[0])})"
            raise PassFailedAt(schedule, message)


def _swapped_apart(
    first: SSAValue, second: SSAValue, passed: dict[SSAValue, frozenset[object]]
) -> bool:
    """Whether `first` and `second` are memref arguments of one block of an scf.for or
    scf.while that are distinct buffers in every iteration: the loop starts its memref
    iter_args as buffers that share nothing, and each hand-on (an scf.for's yield; an
    scf.while's condition and yield) passes each of them on as one of them, a
    permutation (a ping-pong `scf.yield %b, %a`), so in each iteration they are those
    buffers in some order."""
    loop = _carrying_loop(first)
    if loop is None or _carrying_loop(second) is not loop:
        return False
    if isinstance(loop, scf.ForOp):
        hops = [(loop.body.block.args[1:], loop.body.block.args[1:], 0)]
        starts = loop.iter_args
    elif isinstance(loop, scf.WhileOp):
        before, after = loop.before_region.block, loop.after_region.block
        # Before to after through scf.condition (its flag first), after to before.
        hops = [(before.args, after.args, 1), (after.args, before.args, 0)]
        starts = loop.arguments
    else:
        return False
    if not all(_permutes(source, target, skip) for source, target, skip in hops):
        return False
    kept = [v for v in starts if isinstance(v.type, MemRefType)]
    found = [_with_passed(buffers(v), passed) for v in kept]
    return not any(shared(one, other) for i, one in enumerate(found) for other in found[i + 1 :])


def _permutes(source: Sequence[SSAValue], target: Sequence[SSAValue], skip: int) -> bool:
    """Whether the terminator of `source`'s block hands `target` (a block's arguments)
    exactly the memrefs of `source`, each once: its operands past the first `skip`,
    at the memref places of `target`."""
    if not source:
        return False
    block = source[0].owner
    assert isinstance(block, Block)
    end = block.last_op
    if end is None or not end.has_trait(IsTerminator):
        return False
    handed = list(end.operands[skip:])
    if len(handed) != len(target):
        return False
    places = [k for k, arg in enumerate(target) if isinstance(arg.type, MemRefType)]
    own = [arg for arg in source if isinstance(arg.type, MemRefType)]
    given = [handed[k] for k in places]
    return len(given) == len(own) and set(given) == set(own)


def _passed_globals(
    calls: list[func.CallOp], module: ModuleOp
) -> dict[SSAValue, frozenset[object]]:
    """The memref arguments of the module's functions that some call (of `calls`) may
    pass a global (or memory of unknown origin, which may be one), with those: a
    function may take the same global itself, and its argument is then no distinct
    buffer.

    An argument gets a global that a call passes it, or that an argument the call passes
    on has: each global's arguments are found in one walk from the calls passing it
    (going over every call until nothing changed took a round per function on a chain
    of calls written callee first)."""
    direct: dict[object, dict[SSAValue, object]] = {}
    passes_on: dict[SSAValue, list[SSAValue]] = {}
    for value, arg in _passed(calls, module):
        if not isinstance(value.type, MemRefType):
            continue
        for base in buffers(value):
            if isinstance(base, str | Opaque):
                direct.setdefault(base, {})[arg] = base
            elif isinstance(base, SSAValue):
                passes_on.setdefault(base, []).append(arg)
    found: dict[SSAValue, set[object]] = {}
    for base, args in direct.items():
        for arg in through_callers(args, passes_on):
            found.setdefault(arg, set()).add(base)
    return {arg: frozenset(bases) for arg, bases in found.items()}


def _passed(calls: list[func.CallOp], module: ModuleOp) -> list[tuple[SSAValue, SSAValue]]:
    """(value passed, the callee's argument it becomes) for each of `calls` to a function
    of `module` with a body."""
    bodies = {
        f.sym_name.data: f.body.blocks.first
        for f in module.body.block.ops
        if isinstance(f, func.FuncOp) and f.body.blocks.first is not None
    }
    return [
        pair
        for call in calls
        if (entry := bodies.get(call.callee.string_value())) is not None
        for pair in zip(call.arguments, entry.args)
    ]


def _with_passed(
    found: frozenset[object], passed: dict[SSAValue, frozenset[object]]
) -> frozenset[object]:
    """`found` (buffers) with the globals some call may pass as each argument in it."""
    extra = [passed[b] for b in found if isinstance(b, SSAValue) and b in passed]
    return found.union(*extra) if extra else found


def _check_calls(calls: list[func.CallOp], module: ModuleOp) -> None:
    """Raise PassFailedAt for the first of `calls` (the module's) passing views of one
    buffer as two memref arguments of a function that holds a schedule, directly or
    through its calls."""
    aliased = [(call, pair) for call in calls if (pair := aliased_arguments(call)) is not None]
    if not aliased:
        return  # most calls pass no two views of one buffer: no call graph needed
    holding = reaching_schedules(module)
    for call, (n, m, common) in aliased:
        if _callee(call) in holding:
            raise PassFailedAt(
                call,
                f"this call passes views of one buffer ({describe(common)}) as "
                f"arguments {n} and {m} of @{_callee(call)}, which holds a schedule; "
                "dhir takes a function's memref arguments as distinct buffers and "
                "moves each between ranks on its own. Pass the buffer once and make "
                "the views inside the function",
            )


def _check_address(taken: memref.ExtractAlignedPointerAsIndexOp) -> None:
    """Raise PassFailedAt where a task uses the address `taken` makes outside any task,
    or what integer arithmetic outside tasks makes of it."""
    found = address_use_in_task(taken)
    if found is not None:
        raise PassFailedAt(*found)


def address_use_in_task(
    taken: memref.ExtractAlignedPointerAsIndexOp,
) -> tuple[Operation, str] | None:
    """The first op of a task that uses the address `taken` makes outside any task, or
    what integer arithmetic outside tasks makes of it, with the error to give there."""
    if enclosing(taken, TaskOp) is not None:
        return None
    pending: list[SSAValue] = [taken.aligned_pointer]
    seen: set[SSAValue] = {taken.aligned_pointer}
    while pending:
        for use in pending.pop().uses:
            user = use.operation
            if enclosing(user, TaskOp) is not None:
                return user, _address_message(user.operands[use.index], taken)
            for result in derived_results(user):
                if result not in seen:
                    seen.add(result)
                    pending.append(result)
    return None


def _address_message(value: SSAValue, taken: memref.ExtractAlignedPointerAsIndexOp) -> str:
    source = value_name(taken.source)
    return (
        f"this op uses {value_name(value)}, an address in {source} taken outside its task; on "
        f"the rank running the task it points into that rank's own copy of {source}, "
        "which need not hold the task's data (dhir moves only what a task lists, and a "
        "rank may hold only some rows of a memref). Take the address "
        f"inside the task (memref.extract_aligned_pointer_as_index {source}) and list "
        f"{source} on the task"
    )


def aliased_arguments(call: func.CallOp) -> tuple[int, int, frozenset[object]] | None:
    """The first two memref arguments of `call` that may be views of one buffer, by
    position, and the buffers they may share; None when no two may."""
    memrefs = [(n, v) for n, v in enumerate(call.arguments) if isinstance(v.type, MemRefType)]
    for i, (n, first) in enumerate(memrefs):
        for m, second in memrefs[i + 1 :]:
            if common := shared(buffers(first), buffers(second)):
                return n, m, common
    return None


def _alias_message(first: SSAValue, second: SSAValue, common: frozenset[object]) -> str:
    one, other = value_names(first, second)
    message = (
        f"schedule operands {one} and {other} may be views of one buffer "
        f"({describe(common)}), and a task writes one of them; dhir moves each operand "
        "between ranks on its own, so the other would miss the write. "
    )
    carried = [(v, op) for v in (first, second) if (op := _carrying_loop(v)) is not None]
    if not carried:
        return message + "Pass the buffer once and make the view inside the tasks that need it"
    # Buffers carried through iter_args that the loop may make one (not handed on as a
    # permutation of distinct buffers): the usual advice would not help.
    loop = carried[0][1]
    where = f" at {loc}" if (loc := loc_of(loop)) is not None else ""
    names = " and ".join(value_name(v) for v, _ in carried)
    return message + (
        f"The {loop.name}{where} carries {names} (iter_args): in an iteration each may be "
        "any buffer the loop starts with or hands on. List each buffer once and choose "
        "between them inside the tasks (an scf.if on the step's parity)"
    )


def _carrying_loop(value: SSAValue) -> Operation | None:
    """The scf.for or scf.while whose loop-carried argument `value` is, if it is one."""
    if not isinstance(value, BlockArgument):
        return None
    loop = value.owner.parent_op()
    if isinstance(loop, scf.WhileOp) or (isinstance(loop, scf.ForOp) and value.index > 0):
        return loop
    return None


@dataclass(frozen=True)
class Opaque:
    """Memory that an op made from nothing dhir can follow (a call without memref
    operands, an unknown op): it may be any global, or what another such op made."""

    value: SSAValue


def buffers(
    value: SSAValue, known: dict[SSAValue, frozenset[object]] | None = None
) -> frozenset[object]:
    """The buffers `value` may point into: the values that made them (an argument, an
    allocation), the names of globals, and `Opaque` memory. Views, base buffers, what a
    loop carries and whatever an op or a region derives from a pointer lead back to
    their sources. A value that is no memref and comes from no pointer (a size, a trip
    count) points nowhere.

    `known` keeps answers between calls on an unchanged IR. The search follows each
    path back from `value` without coming round to a value on it again, on a stack of
    its own rather than Python's (a chain of a thousand views is a program), and keeps
    each value's answer once no cycle cut it short: values that each use the last one
    twice took 2**length steps, and a chain of 500 casts overflowed Python's stack."""
    memo: dict[SSAValue, frozenset[object]] = {} if known is None else known
    path: set[SSAValue] = set()
    frames: list[_Search] = []
    answer = _begin(value, path, frames, memo)
    while frames:
        frame = frames[-1]
        if answer is not None:
            frame.add(*answer)
        if frame.next < len(frame.sources):
            frame.next += 1
            answer = _begin(frame.sources[frame.next - 1], path, frames, memo)
            continue
        frames.pop()
        path.discard(frame.value)
        answer = frame.finish(memo)
    assert answer is not None
    return answer[0]


@dataclass
class _Search:
    """A value `buffers` is following back: where it came from, what its sources have
    given so far, and whether a cycle cut one short (then its answer holds for this
    path only and is not kept)."""

    value: SSAValue
    sources: list[SSAValue]
    next: int = 0
    found: frozenset[object] = frozenset()
    cut: bool = False

    def add(self, found: frozenset[object], cut: bool) -> None:
        self.found |= found
        self.cut |= cut

    def finish(self, memo: dict[SSAValue, frozenset[object]]) -> tuple[frozenset[object], bool]:
        found = self.found
        if not found and isinstance(self.value.type, MemRefType):
            found = frozenset([Opaque(self.value)])
        if not self.cut:
            memo[self.value] = found
        return found, self.cut


def _begin(
    value: SSAValue,
    path: set[SSAValue],
    frames: list[_Search],
    memo: dict[SSAValue, frozenset[object]],
) -> tuple[frozenset[object], bool] | None:
    """The buffers of `value` when they are known at once (with whether a cycle cut
    them short); else None, with a search of its sources pushed on `frames`."""
    if (found := memo.get(value)) is not None:
        return found, False
    if value in path:
        return frozenset(), True
    owner = value.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        if owner.parent is not None and owner is not owner.parent.first_block:
            sources = _branched(owner)
        elif parent is None or isinstance(parent, func.FuncOp):
            # Arguments are distinct buffers, as far as the IR shows (docs/semantics.md).
            return _made(value), False
        else:
            sources = _carried(value, owner, parent)
    elif (name := global_name(owner)) is not None:
        return frozenset([name]), False
    elif is_alloc(owner):
        # A new buffer, whatever its (size) operands.
        return _made(value), False
    elif value in derived_results(owner):
        sources = [*owner.operands, *_yielded(owner)]
    else:
        sources = []
    path.add(value)
    frames.append(_Search(value, sources))
    return None


def _made(value: SSAValue) -> frozenset[object]:
    return frozenset([value]) if isinstance(value.type, MemRefType) else frozenset()


def shared(first: frozenset[object], second: frozenset[object]) -> frozenset[object]:
    """The buffers of `first` that `second` may point into too: the same ones, and
    besides, where either side holds Opaque memory, the globals and Opaque memory of
    the other."""
    common = first & second
    if any(isinstance(b, Opaque) for b in second):
        common |= {b for b in first if isinstance(b, str | Opaque)}
    if any(isinstance(b, Opaque) for b in first):
        common |= {b for b in second if isinstance(b, str | Opaque)}
    return common


def memory_of(values: Iterable[SSAValue]) -> frozenset[object]:
    """The buffers any of `values` may point into."""
    return frozenset[object]().union(*(buffers(v) for v in values))


def may_alias(value: SSAValue, memory: frozenset[object]) -> bool:
    """Whether `value` may point into `memory` (`memory_of` some values): a view of the
    same buffer made anywhere, the same global taken again, or memory of unknown origin."""
    return bool(shared(buffers(value), memory))


def meets_passed_global(op: Operation, memory: frozenset[object]) -> bool:
    """Whether `op` may reach `memory` (`memory_of` some values) through a global that a
    call passes as a function's argument: `memory` holds an argument and `op` takes a
    mutable global, or `memory` holds a global and `op` uses an argument. `buffers`
    keeps arguments distinct from globals; a call may still pass one as the other
    (`check_shared_data` refuses that between schedule operands)."""
    if any(_is_argument(b) for b in memory) and _takes_mutable_global(op):
        return True
    if not any(isinstance(b, str) for b in memory):
        return False
    return any(_is_argument(b) for v in op.operands for b in buffers(v))


def _is_argument(base: object) -> bool:
    return isinstance(base, BlockArgument) and isinstance(base.owner.parent_op(), func.FuncOp)


def _takes_mutable_global(op: Operation) -> bool:
    name = global_name(op)
    if name is None:
        return False
    found = SymbolTable.lookup_symbol(op, name)
    return found is None or found.properties.get("constant") is None


def describe(common: frozenset[object]) -> str:
    """One of `common` (the buffers `shared` found), in words: a named memref first."""

    def rank(base: object) -> tuple[int, str]:
        if isinstance(base, SSAValue):
            return (0 if base.name_hint else 2, value_name(base))
        if isinstance(base, str):
            return (1, f"global @{base}")
        assert isinstance(base, Opaque)
        owner = base.value.owner
        what = owner.name if isinstance(owner, Operation) else "a region"
        return (3, f"what {what} returns")

    return min(rank(b) for b in common)[1]


def _carried(value: SSAValue, block: Block, parent: Operation) -> list[SSAValue]:
    """What a region's argument may be: for a loop, its initial value and what the
    iterations hand on at its place (a loop's counter is no pointer); for other ops,
    anything the op takes or its regions yield."""
    assert isinstance(value, BlockArgument)
    index = value.index
    regions = list(parent.regions)
    if isinstance(parent, scf.ForOp):
        if index == 0:
            return []
        return [parent.operands[2 + index], *_yielded_at(block, index - 1)]
    if isinstance(parent, scf.WhileOp) and len(regions) == 2:
        if block.parent is regions[0]:
            return [parent.operands[index], *_yielded_at(regions[1].blocks[0], index)]
        return [*_yielded_at(regions[0].blocks[0], index + 1)]  # scf.condition's flag first
    return [*parent.operands, *_yielded(parent)]


def _branched(block: Block) -> list[SSAValue]:
    """What a block after the first of its region may get as an argument: anything a
    branch to it passes (every operand of such a branch, over-approximating the place)."""
    region = block.parent
    assert region is not None
    return [
        v
        for other in region.blocks
        if (last := other.last_op) is not None and block in last.successors
        for v in last.operands
    ]


def _yielded_at(block: Block, index: int) -> list[SSAValue]:
    last = block.last_op
    if last is None or not last.has_trait(IsTerminator) or index >= len(last.operands):
        return []
    return [last.operands[index]]


def _yielded(op: Operation) -> Iterator[SSAValue]:
    """What the regions of `op` hand back to it (scf.if's branches, a loop's body)."""
    for region in op.regions:
        for block in region.blocks:
            last = block.last_op
            if last is not None and last.has_trait(IsTerminator):
                yield from last.operands


# --- casts that reach past a schedule operand ------------------------------------------


def _whole_buffer(
    value: SSAValue, viewed: set[SSAValue], seen: set[SSAValue] | None = None
) -> bool:
    """Whether the memref `value` is all of its buffer: an argument of a function that
    no call passes a view (not in `viewed`), an allocation, a global, a cast or reshape
    of one (the same elements), or what a loop carries when all it may be is. A view
    made otherwise (a subview, a reinterpret_cast, a memref.view, what an op or a
    region returns) may be part of a larger one."""
    if not isinstance(value.type, MemRefType):
        return True  # no memory: nothing to reach past
    seen = set() if seen is None else seen
    if value in seen:
        return True  # the loop hands on what it was given: decided by its other sources
    seen.add(value)
    owner = value.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        if parent is None or isinstance(parent, func.FuncOp):
            first = owner.parent is None or owner is owner.parent.first_block
            return first and value not in viewed
        if not isinstance(parent, scf.ForOp | scf.WhileOp):
            return False
        sources = _carried(value, owner, parent)
        return bool(sources) and all(_whole_buffer(v, viewed, seen) for v in sources)
    if global_name(owner) is not None or is_alloc(owner):
        return True
    if isinstance(owner, _SAME_ELEMENTS):
        return _whole_buffer(owner.operands[0], viewed, seen)
    return False


def _viewed_arguments(calls: list[func.CallOp], module: ModuleOp) -> set[SSAValue]:
    """The memref arguments of the module's functions that some call (of `calls`, the
    module's) may pass part of a larger buffer: a view, or such an argument again.

    A value passed whole but for the arguments it may be (`_entry_arguments`) waits on
    them: each becomes viewed once, and wakes its waiters. (Going over every call until
    nothing changed took a round per function on a chain of calls written callee first.)"""
    viewed: set[SSAValue] = set()
    work: list[SSAValue] = []
    waiting: dict[SSAValue, list[SSAValue]] = {}

    def view(arg: SSAValue) -> None:
        if arg not in viewed:
            viewed.add(arg)
            work.append(arg)

    for value, arg in _passed(calls, module):
        if not _whole_buffer(value, set()):
            view(arg)
            continue
        for source in _entry_arguments(value):
            waiting.setdefault(source, []).append(arg)
    while work:
        for arg in waiting.get(work.pop(), ()):
            view(arg)
    return viewed


def _entry_arguments(value: SSAValue, seen: set[SSAValue] | None = None) -> set[SSAValue]:
    """The function arguments whose being viewed `_whole_buffer(value, ...)` asks: it is
    true exactly when it is with nothing viewed and none of these is."""
    if not isinstance(value.type, MemRefType):
        return set()
    seen = set() if seen is None else seen
    if value in seen:
        return set()
    seen.add(value)
    owner = value.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        if parent is None or isinstance(parent, func.FuncOp):
            return {value}
        if not isinstance(parent, scf.ForOp | scf.WhileOp):
            return set()
        sources = _carried(value, owner, parent)
        return set[SSAValue]().union(*(_entry_arguments(v, seen) for v in sources))
    if isinstance(owner, _SAME_ELEMENTS):
        return _entry_arguments(owner.operands[0], seen)
    return set()


_SAME_ELEMENTS = (
    memref.CastOp,
    memref.MemorySpaceCastOp,
    memref.AssumeAlignmentOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
)


@dataclass
class CastReach:
    """For a module: which memrefs may be part of a larger buffer (`whole`), and which
    ops may reinterpret_cast past their source, directly or through a call (`past`);
    each found once, when first asked."""

    module: ModuleOp
    calls: list[func.CallOp] | None = None  # the module's, when found already
    _viewed: set[SSAValue] | None = None
    _stretching: dict[str, Operation] | None = None

    def whole(self, value: SSAValue) -> bool:
        if self._viewed is None:
            calls = self.calls
            if calls is None:
                calls = find_ops(self.module, func.CallOp)
            self._viewed = _viewed_arguments(calls, self.module)
        return _whole_buffer(value, self._viewed)

    def stretching(self) -> dict[str, Operation]:
        """Function name -> a reinterpret_cast past its source that it makes or calls."""
        if self._stretching is None:
            self._stretching = _stretching_functions(self.module)
        return self._stretching

    def past(self, op: Operation) -> bool:
        if isinstance(op, memref.ReinterpretCastOp):
            return not _within_source(op)
        callee = _callee(op)
        return callee is not None and callee in self.stretching()


def _check_reach(task: TaskOp, parts: list[SSAValue], reach: CastReach) -> None:
    """Raise PassFailedAt where `task` reinterpret_casts a pointer into one of `parts`
    (schedule operands that may be part of a larger buffer) past the elements of its
    source, or passes one to a function that may."""
    memory = {part: buffers(part) for part in parts}

    def reached(value: SSAValue) -> SSAValue | None:
        source = buffers(value)
        return next((part for part, mem in memory.items() if shared(source, mem)), None)

    for op in task.body.walk():
        if not reach.past(op):
            continue
        if isinstance(op, memref.ReinterpretCastOp):
            if (part := reached(op.source)) is not None:
                raise PassFailedAt(op, _reach_message(part, "this reinterpret_cast"))
            continue
        callee = _callee(op)
        for value in op.operands:
            if isinstance(value.type, MemRefType) and (part := reached(value)) is not None:
                where = loc_of(reach.stretching()[callee or ""])
                cast = f"the reinterpret_cast{f' at {where}' if where else ''}"
                what = f"@{callee}, called here, through {cast}"
                raise PassFailedAt(op, _reach_message(part, what))


def _reach_message(part: SSAValue, what: str) -> str:
    name = value_name(part)
    called = isinstance(part, BlockArgument) and isinstance(part.owner.parent_op(), func.FuncOp)
    whose = f"a call passes a view of as {name}" if called else f"{name} is a view of"
    return (
        f"{what} may reach elements outside {name}, of the buffer {whose}; dhir follows "
        f"and moves between ranks only the elements of the schedule operand {name}, so a "
        "write there could be lost. Pass the whole buffer as the schedule operand and "
        "make the view inside the tasks"
    )


def _within_source(op: memref.ReinterpretCastOp) -> bool:
    """Whether `op` surely reaches only elements of its source: a source of static shape
    whose elements are one run of the buffer (the identity layout, or a static offset
    and the row-major strides: a subview of whole rows), and a static offset, sizes and
    strides whose every element lies in that run."""
    source = op.source.type
    start = _run_start(source) if isinstance(source, MemRefType) else None
    if start is None:
        return False
    assert isinstance(source, MemRefType)
    offsets = op.static_offsets.get_values()
    sizes = op.static_sizes.get_values()
    strides = op.static_strides.get_values()
    numbers = [*offsets, *sizes, *strides]
    if any(n < 0 for n in numbers) or op.offsets or op.sizes or op.strides:
        return False  # a dynamic size or offset (DYNAMIC_INDEX is negative), or a stride
    if 0 in sizes:
        return True  # no element
    last = offsets[0] + sum(
        (size - 1) * stride for size, stride in zip(sizes, strides, strict=True)
    )
    return start <= offsets[0] and last < start + prod(source.get_shape())


def _run_start(kind: MemRefType) -> int | None:
    """Where in its buffer a memref of static shape whose elements follow each other
    (row-major, no gaps) starts; None for any other (a dynamic size, offset or stride, a
    gap between rows)."""
    shape = kind.get_shape()
    layout = strided_layout(kind)
    if layout is None or layout[1] is None or any(n < 0 for n in shape):
        return None
    strides, start = layout
    for dim, (size, stride) in enumerate(zip(shape, strides, strict=True)):
        if size > 1 and stride != prod(shape[dim + 1 :]):
            return None
    return start


def _stretching_functions(module: ModuleOp) -> dict[str, Operation]:
    """Function name -> a reinterpret_cast that it, or a function it calls, makes and
    that may reach past its source (see `_within_source`)."""
    found: dict[str, Operation] = {}
    for function in (f for f in module.body.block.ops if isinstance(f, func.FuncOp)):
        for op in find_ops(function, memref.ReinterpretCastOp):
            if not _within_source(op):
                found.setdefault(function.sym_name.data, op)
    return through_callers(found, callers_of(module))


# --- mutable globals ------------------------------------------------------------------


def mutable_global_users(module: ModuleOp) -> tuple[set[str], dict[str, str]]:
    """The module's mutable globals, and the functions reaching one (see below)."""
    mutable = _mutable_globals(module)
    return mutable, _functions_using(module, mutable)


def reaches_mutable_global(op: Operation, mutable: set[str], users: dict[str, str]) -> bool:
    """Whether `op` uses a mutable global, directly or through a function it calls."""
    for inner in op.walk():
        used = global_name(inner)
        if used is not None and used in mutable:
            return True
        callee = _callee(inner)
        if callee is not None and callee in users:
            return True
    return False


def _check_globals(task: TaskOp, mutable: set[str], users: dict[str, str]) -> None:
    for op in task.body.walk():
        used = global_name(op)
        if used is not None and used in mutable:
            raise PassFailedAt(
                task,
                f"this task uses the mutable memref.global @{used}; every rank "
                "has its own copy of a global and dhir does not move it between ranks. "
                f"Pass the buffer as a schedule operand: %g = memref.get_global "
                f"@{used} before the schedule, then list %g on the schedule and "
                "on the tasks that use it (or make the global constant)",
            )
        callee = _callee(op)
        if callee in users:
            raise PassFailedAt(
                task,
                f"this task calls @{callee}, which uses the mutable memref.global "
                f"@{users[callee]}; every rank has its own copy of a global and dhir does "
                "not move it between ranks. Pass the buffer to the function instead, as a "
                "schedule operand the task lists",
            )


def _mutable_globals(module: ModuleOp, uses: list[Operation] | None = None) -> set[str]:
    """Names of the module's globals that are not constant, and of globals used but
    not defined here (nothing says they are constant); `uses`: the module's ops of
    GLOBAL_USES, when found already."""
    defined: dict[str, bool] = {}
    for op in module.body.block.ops:
        if is_global(op):
            name = op.properties.get("sym_name")
            constant = op.properties.get("constant") is not None
            defined[getattr(name, "data", "")] = constant
    if uses is None:
        uses = find_ops(module, GLOBAL_USES)
    used = {name for op in uses if (name := global_name(op)) is not None}
    return {name for name in used if not defined.get(name, False)}


def _functions_using(module: ModuleOp, mutable: set[str]) -> dict[str, str]:
    """Function name -> a mutable global it uses, directly or through its callees."""
    users: dict[str, str] = {}
    for function in (f for f in module.body.block.ops if isinstance(f, func.FuncOp)):
        for op in find_ops(function, GLOBAL_USES):
            used = global_name(op)
            if used is not None and used in mutable:
                users.setdefault(function.sym_name.data, used)
    return through_callers(users, callers_of(module))


def _callee(op: Operation) -> str | None:
    if isinstance(op, func.CallOp):
        return op.callee.string_value()
    return None
