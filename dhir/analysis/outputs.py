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

from collections.abc import Iterable

from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.traits import IsTerminator

from dhir.analysis.effects import derived_results
from dhir.analysis.sharing import may_alias, meets_passed_global, memory_of
from dhir.dialects import func, memref, scf
from dhir.dialects.dhir import (
    DEVICE_BUFFER_ATTR,
    HOOK_ATTR,
    ScheduleOp,
    defined_inside,
    walk_outside_tasks,
)
from dhir.ir.walk import find_ops


def entry_called(module: ModuleOp, entry: str) -> bool:
    """Whether a function of `module` calls `entry`."""
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
    roots = _alias_roots(block.ops, local, skip=op)
    tops = list(block.ops)
    used: set[SSAValue] = set()
    for top in tops[tops.index(op) + 1 :]:
        for inner in top.walk():
            if isinstance(inner, memref.DeallocOp) and inner.memref in local:
                continue
            for value in inner.operands:
                used |= roots.get(value, frozenset())
    return set(local) - used


def _used_after(schedule: Operation, args: list[SSAValue]) -> set[SSAValue]:
    """The `args` that an op after `schedule` (in its block) uses through any alias, but
    for dhir-gpu-data's freeing of device buffers (DEVICE_BUFFER_ATTR), which touches no
    host memory."""
    block = schedule.parent_block()
    assert block is not None
    roots = _alias_roots(block.ops, args, skip=schedule)
    tops = list(block.ops)
    used: set[SSAValue] = set()
    for top in tops[tops.index(schedule) + 1 :]:
        if DEVICE_BUFFER_ATTR in top.attributes:
            continue
        for op in top.walk():
            for value in op.operands:
                used |= roots.get(value, frozenset())
    return used


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
    loop = schedule.parent_op()
    if not isinstance(loop, scf.ForOp | scf.WhileOp):
        return None
    seeds = [v for v in schedule.operands if isinstance(v.type, MemRefType)]
    if any(defined_inside(v, loop) for v in seeds):
        return None  # made anew each iteration (an arith.select, a view): maybe other memory
    memory = memory_of(seeds)
    for op in loop.walk():
        if op is schedule or schedule.is_ancestor(op):
            continue
        if isinstance(op, func.CallOp) and HOOK_ATTR not in op.attributes:
            return None
        if op.dialect_name() == "builtin":
            return None
        if any(may_alias(v, memory) for v in op.operands):
            return None
        if meets_passed_global(op, memory):
            return None  # a call may pass the global as the argument
    return loop


def final_to_root(
    function: func.FuncOp, entry: str = "main", called: bool | None = None
) -> set[SSAValue]:
    """The memrefs that, after a schedule of `function` listing them (or its time loop,
    `time_loop`), only rank 0 needs: those dhir-lower-to-mpi may partition."""
    found: set[SSAValue] = set()
    for op in walk_outside_tasks(function):
        if isinstance(op, ScheduleOp):
            outputs = root_only(time_loop(op) or op, entry, called)
            found |= outputs & set(op.operands)
    return found
