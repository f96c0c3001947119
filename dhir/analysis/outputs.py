"""Which memrefs a schedule's results only need to reach rank 0, and which no rank
(`dead_after`): the rules that the lowering applies and the cost model prices, stated
once.

Only the harness calls the entry function, and only rank 0 writes its results; so an
argument of the entry that nothing uses after a schedule at the entry's top level is read
by no rank other than 0 again. A use of any alias counts: a view made before the schedule
and read after it, an address, whatever an unknown op or a region returns from it. When
some function calls the entry, or its body has several blocks (a branch may run code
again), the rule does not hold and everything goes to every rank.
"""

import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import islpy as isl
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator

from dhir.analysis.effects import derived_results
from dhir.analysis.lift import Lifter, number
from dhir.analysis.sharing import may_alias, meets_passed_global, memory_of
from dhir.analysis.validity import Box, divisible, everything
from dhir.dialects import affine, func, memref, scf
from dhir.dialects.dhir import (
    DEVICE_BUFFER_ATTR,
    HOOK_ATTR,
    ScheduleOp,
    defined_inside,
    walk_outside_tasks,
)
from dhir.ir.walk import find_ops


def entry_called(module: ModuleOp, entry: str) -> bool:
    """Whether a function of `module` calls `entry` (found once within `remembered`)."""
    memo = _MEMO.get()
    if memo is None:
        return _calls(module, entry)
    key = (module, entry)
    if key not in memo.called:
        memo.called[key] = _calls(module, entry)
    return memo.called[key]


def _calls(module: ModuleOp, entry: str) -> bool:
    return any(call.callee.string_value() == entry for call in find_ops(module, func.CallOp))


def root_only(
    schedule: Operation, entry: str = "main", called: bool | None = None
) -> set[SSAValue]:
    """The memref arguments of the entry function that nothing uses after `schedule`
    (at the entry's top level; or a loop around a schedule there), which need to reach
    only rank 0. `called`: whether some function calls the entry (`entry_called`),
    when already known."""
    function = schedule.parent_op()
    if not isinstance(function, func.FuncOp) or function.sym_name.data != entry:
        return set()
    if called is None:
        module = function.parent_op()
        called = isinstance(module, ModuleOp) and entry_called(module, entry)
    if called or len(function.body.blocks) != 1:
        return set()
    args: list[SSAValue] = [a for a in function.body.block.args if isinstance(a.type, MemRefType)]
    return set(args) - _used_after(schedule, args)


def dead_after(op: Operation, values: Iterable[SSAValue]) -> set[SSAValue]:
    """The `values` (memrefs a schedule lists; `op`: the schedule or its time loop) that
    no rank needs after `op`: buffers its function allocates in the same block before it
    (memref.alloc or alloca) that no later op uses through any alias, except to free
    them. A function of several blocks has none."""
    block, function = op.parent_block(), op.parent_op()
    if block is None or not isinstance(function, func.FuncOp) or len(function.body.blocks) != 1:
        return set()
    local = [
        v
        for v in values
        if isinstance(v.owner, memref.AllocOp | memref.AllocaOp) and v.owner.parent is block
    ]
    if not local:
        return set()
    return set(local) - _uses_after(block, op, local, freeing=True)


def _used_after(schedule: Operation, args: list[SSAValue]) -> set[SSAValue]:
    """The `args` that an op after `schedule` (in its block) uses through any alias, but
    for dhir-gpu-data's freeing of device buffers (DEVICE_BUFFER_ATTR), which touches no
    host memory."""
    block = schedule.parent_block()
    assert block is not None
    return _uses_after(block, schedule, args, freeing=False)


@dataclass
class Memo:
    """The facts `remembered` keeps: per block, and per (module, entry) whether it is
    called."""

    blocks: "dict[Block, _BlockFacts]" = field(default_factory=lambda: {})
    schedules: dict[Block, int] = field(default_factory=lambda: {})
    called: dict[tuple[ModuleOp, str], bool] = field(default_factory=lambda: {})

    def forget(self, block: Block | None) -> None:
        """Drop the facts of `block`, whose top-level ops a caller replaced."""
        if block is not None:
            self.blocks.pop(block, None)


@contextmanager
def remembered(memo: Memo | None = None) -> Iterator[Memo]:
    """Within it, `root_only`, `dead_after` and `entry_called` find the facts of each
    block and module once and answer every schedule from them: for callers that ask
    about many schedules and meanwhile change no op, operand or use (attributes aside;
    see _BlockFacts). Outside it, each call finds them anew. Within another, it keeps
    what that one found. `memo`: what an earlier one found, for a caller whose changes
    in between leave the answers it asks for alone (dhir-lower-to-mpi)."""
    current = _MEMO.get()
    if current is not None and memo is None:
        yield current
        return
    memo = memo if memo is not None else Memo()
    token = _MEMO.set(memo)
    try:
        yield memo
    finally:
        _MEMO.reset(token)


_MEMO: ContextVar[Memo | None] = ContextVar("dhir_outputs_memo", default=None)


def _uses_after(block: Block, op: Operation, seeds: list[SSAValue], freeing: bool) -> set[SSAValue]:
    """The `seeds` some op after `op` (a top-level op of `block`) uses through an alias
    (see _BlockFacts.used_after). A block of one schedule is walked past `op` as asked:
    the facts of the whole block would walk that schedule's task bodies too, most of a
    program's ops (bench/compile_case.py 10000 neighbours: 1.8 s more)."""
    if _schedule_count(block) < 2:
        return _walked(block, op, seeds, freeing)
    return _facts(block).used_after(op, seeds, freeing)


def _schedule_count(block: Block) -> int:
    """How many of `block`'s top-level ops are or hold a schedule (once within
    `remembered`)."""
    memo = _MEMO.get()
    if memo is not None and block in memo.schedules:
        return memo.schedules[block]
    count = sum(
        any(isinstance(o, ScheduleOp) for o in walk_outside_tasks(top)) for top in block.ops
    )
    if memo is not None:
        memo.schedules[block] = count
    return count


def _facts(block: Block) -> "_BlockFacts":
    memo = _MEMO.get()
    if memo is None:
        return _BlockFacts(block)
    found = memo.blocks.get(block)
    if found is None:
        found = memo.blocks[block] = _BlockFacts(block)
    return found


class _BlockFacts:
    """What `_used_after` and `dead_after` ask of a block, found in one walk of it: the
    aliases of every seed either may ask about (memref arguments, buffers allocated at
    the top level) and, per seed, the last top-level op that uses it through an alias.
    The roots of a seed do not depend on the other seeds, so finding them all at once
    changes no answer. DEVICE_BUFFER_ATTR is read here once: the passes that set it
    change ops too, and ask outside `remembered`."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.tops = list(block.ops)
        self.index = {op: k for k, op in enumerate(self.tops)}
        buffers = [
            t.results[0] for t in self.tops if isinstance(t, memref.AllocOp | memref.AllocaOp)
        ]
        args = [a for a in block.args if isinstance(a.type, MemRefType)]
        seeds: list[SSAValue] = [*args, *buffers]
        self.roots = _alias_roots(self.tops, seeds)
        allocated = set(buffers)
        # The last top-level op using each seed: but for freeing a seed allocated here
        # (`last_kept`), but for ops marked DEVICE_BUFFER_ATTR (`last_host`).
        self.last_kept: dict[SSAValue, int] = {}
        self.last_host: dict[SSAValue, int] = {}
        # Frees of a seed that an alias of other seeds reaches: (top, freed, its roots).
        self.frees: list[tuple[int, SSAValue, frozenset[SSAValue]]] = []
        for k, top in enumerate(self.tops):
            host = DEVICE_BUFFER_ATTR not in top.attributes
            for op in top.walk():
                for value in op.operands:
                    reached = self.roots.get(value)
                    if not reached:
                        continue
                    freed = isinstance(op, memref.DeallocOp) and value in allocated
                    for seed in reached:
                        if host:
                            self.last_host[seed] = k
                        if not freed:
                            self.last_kept[seed] = k
                    if freed and reached != {value}:
                        self.frees.append((k, value, reached))

    def used_after(self, op: Operation, seeds: list[SSAValue], freeing: bool) -> set[SSAValue]:
        """The `seeds` some op after `op` (a top-level op) uses through an alias: with
        `freeing`, as dead_after asks (freeing one of `seeds` is no use), else as
        _used_after (DEVICE_BUFFER_ATTR ops aside)."""
        at = self.index.get(op)
        if at is None or self._skip_matters(op, seeds):
            return _walked(self.block, op, seeds, freeing)
        if not freeing:
            return {s for s in seeds if self.last_host.get(s, -1) > at}
        used = {s for s in seeds if self.last_kept.get(s, -1) > at}
        for k, value, reached in self.frees:
            if k > at and value not in seeds:
                used |= reached & set(seeds)
        return used

    def _skip_matters(self, op: Operation, seeds: list[SSAValue]) -> bool:
        """Whether what `op`'s results alias (the only facts of `op` that reach past it)
        holds some of `seeds`: the walk here counted them, the answer must not."""
        wanted = set(seeds)
        return any(self.roots.get(r, frozenset()) & wanted for r in op.results)


def _walked(block: Block, op: Operation, seeds: list[SSAValue], freeing: bool) -> set[SSAValue]:
    """`_BlockFacts.used_after` by walking `block` without `op`, as it stands now."""
    roots = _alias_roots(block.ops, seeds, skip=op)
    tops = list(block.ops)
    used: set[SSAValue] = set()
    for top in tops[tops.index(op) + 1 :]:
        if not freeing and DEVICE_BUFFER_ATTR in top.attributes:
            continue
        for inner in top.walk():
            if freeing and isinstance(inner, memref.DeallocOp) and inner.memref in seeds:
                continue
            for value in inner.operands:
                used |= roots.get(value, frozenset())
    return used & set(seeds)


def _alias_roots(
    ops: Iterable[Operation], seeds: list[SSAValue], skip: Operation | None = None
) -> dict[SSAValue, frozenset[SSAValue]]:
    """Every value in `ops` (and the ops nested in them, `skip` aside) that may point
    into the memory of some of `seeds`, with those seeds. Pre-order visits every
    definition before its uses; what a region yields reaches its op's results, what an
    op takes reaches its regions' arguments."""
    roots: dict[SSAValue, frozenset[SSAValue]] = {s: frozenset([s]) for s in seeds}
    for top in ops:
        if top is skip:
            continue
        for op in top.walk():
            reached = frozenset().union(*(roots.get(v, frozenset()) for v in op.operands))
            if not reached:
                continue
            derived = list(derived_results(op))
            derived += [a for region in op.regions for inner in region.blocks for a in inner.args]
            parent = op.parent_op()
            if op.has_trait(IsTerminator) and parent is not None:
                derived += parent.results
            for value in derived:
                roots[value] = roots.get(value, frozenset()) | reached
    return roots


def time_loop(schedule: ScheduleOp) -> Operation | None:
    """The scf.for or scf.while whose body holds `schedule` and nothing else that may
    touch its memrefs: no other op that uses a value which may point into their buffers
    (a view of the same base made anywhere, the base itself, the same global taken
    again, a mutable global where they hold a function's argument, which a call may
    pass it, or the reverse; see sharing.buffers), and no call (a callee may reach a
    global) but dhir's runtime hooks (HOOK_ATTR: dhir-instrument's timers). None when
    there is no such loop. Such a schedule's data may stay distributed between the
    loop's iterations."""
    found = _loop_around(schedule, loads=False)
    return found[0] if found is not None else None


def loop_reading_between_steps(
    schedule: ScheduleOp,
) -> tuple[Operation, frozenset[SSAValue]] | None:
    """The scf.for or scf.while around `schedule` that `time_loop` would give but for
    host code that loads elements of some of the schedule's memrefs (an scf.while's
    condition testing a residual), and those memrefs: each loaded by `memref.load` or
    `affine.load` of the memref itself, which shares no memory with another of the
    schedule's memrefs.
    The loads run between two steps' schedules, so a device may keep everything else
    from one step to the next. None where there is no such loop, or no such load."""
    found = _loop_around(schedule, loads=True)
    return found if found is not None and found[1] else None


def step_loop(schedule: ScheduleOp) -> tuple[Operation, frozenset[SSAValue]] | None:
    """The loop of `time_loop`, or else of `loop_reading_between_steps`, with the memrefs
    its host code loads (none for `time_loop`'s). Each step's schedule may keep its data
    distributed over ranks through such a loop, but for those memrefs: every rank runs
    the loads, so every rank must hold them whole at the end of each step."""
    return _loop_around(schedule, loads=True)


def _loop_around(schedule: ScheduleOp, loads: bool) -> tuple[Operation, frozenset[SSAValue]] | None:
    """The loop of `time_loop`; with `loads`, one whose other ops may also load from
    schedule memrefs that share memory with no other (`loop_reading_between_steps`),
    and those memrefs."""
    loop = schedule.parent_op()
    if not isinstance(loop, scf.ForOp | scf.WhileOp):
        return None
    seeds = [v for v in schedule.operands if isinstance(v.type, MemRefType)]
    if any(defined_inside(v, loop) for v in seeds):
        return None  # made anew each iteration (an arith.select, a view): maybe other memory
    memory = memory_of(seeds)
    alone = _alone(seeds) if loads else set[SSAValue]()
    read: set[SSAValue] = set()
    for op in loop.walk():
        if op is schedule or schedule.is_ancestor(op):
            continue
        if loads and isinstance(op, Load) and op.memref in alone:
            if not any(may_alias(v, memory) for v in op.indices):
                read.add(op.memref)
                continue
        if isinstance(op, func.CallOp) and HOOK_ATTR not in op.attributes:
            return None
        if op.dialect_name() == "builtin":
            return None
        if any(may_alias(v, memory) for v in op.operands):
            return None
        if meets_passed_global(op, memory):
            return None  # a call may pass the global as the argument
    return loop, frozenset(read)


Load = memref.LoadOp | affine.LoadOp


def loaded_elements(
    loop: Operation, schedule: ScheduleOp, memref: SSAValue
) -> tuple[tuple[int, ...], ...] | None:
    """The elements of `memref` that the loads of `loop_reading_between_steps` read
    (the loop's ops outside `schedule`), in program order without repeats; None where a
    subscript is not a number known at compile time (any element may be read then)."""
    lifter = Lifter()
    found: list[tuple[int, ...]] = []
    for op in loop.walk():
        if not isinstance(op, Load) or op.memref is not memref or schedule.is_ancestor(op):
            continue
        element = _subscripts(op, lifter)
        if element is None:
            return None
        if element not in found:
            found.append(element)
    return tuple(found)


def loaded_regions(schedule: ScheduleOp) -> dict[SSAValue, isl.Set]:
    """Per memref that host code in the time loop around `schedule` loads (`step_loop`),
    the elements it loads (`loaded_elements`; all of them where a subscript is not
    known, or the shape is not): what every rank holds at each step's end, as
    dhir-lower-to-mpi brings it and the placement's replay charges it."""
    found = step_loop(schedule)
    if found is None:
        return {}
    loop, loaded = found
    out: dict[SSAValue, isl.Set] = {}
    for value in loaded:
        full = everything(value.type)
        elements = loaded_elements(loop, schedule, value) if divisible(value.type) else None
        if elements is None:
            out[value] = full
            continue
        points = [Box(e, tuple(k + 1 for k in e)).as_set() for e in elements]
        out[value] = functools.reduce(isl.Set.union, points, full.empty(full.get_space())) & full
    return out


def _subscripts(op: memref.LoadOp | affine.LoadOp, lifter: Lifter) -> tuple[int, ...] | None:
    if isinstance(op, memref.LoadOp):
        values = [lifter.constant(v) for v in op.indices]
    else:
        lifted = lifter.map(op.map.data, op.indices)
        values = [number(v, {}) for v in lifted] if lifted is not None else [None]
    known = [v for v in values if v is not None]
    return tuple(known) if len(known) == len(values) else None


def _alone(memrefs: list[SSAValue]) -> set[SSAValue]:
    """The `memrefs` that share memory with none of the others."""
    return {v for v in memrefs if not may_alias(v, memory_of(w for w in memrefs if w is not v))}


def final_to_root(
    function: func.FuncOp, entry: str = "main", called: bool | None = None
) -> set[SSAValue]:
    """The memrefs that, after a schedule of `function` listing them (or its time loop,
    `step_loop`), only rank 0 needs: those dhir-lower-to-mpi may partition."""
    found: set[SSAValue] = set()
    with remembered():
        for op in walk_outside_tasks(function):
            if isinstance(op, ScheduleOp):
                loop = step_loop(op)
                outputs = root_only(loop[0] if loop is not None else op, entry, called)
                found |= outputs & set(op.operands)
    return found
