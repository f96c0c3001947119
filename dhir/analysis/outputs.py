"""Which memrefs a schedule's results only need to reach rank 0: the rule that the
lowering applies and the cost model prices, stated once.

Only the harness calls the entry function, and only rank 0 writes its results; so an
argument of the entry that nothing uses after a schedule at the entry's top level is read
by no rank other than 0 again. When some function calls the entry, the rule does not hold
and everything goes to every rank.
"""

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue

from dhir.dialects.dhir import ScheduleOp


def entry_called(module: ModuleOp, entry: str) -> bool:
    """Whether a function of `module` calls `entry`."""
    return any(
        isinstance(op, func.CallOp) and op.callee.string_value() == entry for op in module.walk()
    )


def root_only(
    schedule: ScheduleOp, entry: str = "main", called: bool | None = None
) -> set[SSAValue]:
    """The memref arguments of the entry function that nothing uses after `schedule`
    (at the entry's top level), which need to reach only rank 0. `called`: whether some
    function calls the entry (`entry_called`), when already known."""
    function = schedule.parent_op()
    if not isinstance(function, func.FuncOp) or function.sym_name.data != entry:
        return set()
    if called is None:
        module = function.parent_op()
        called = isinstance(module, ModuleOp) and entry_called(module, entry)
    if called:
        return set()
    later: set[SSAValue] = set()
    op: Operation | None = schedule.next_op
    while op is not None:
        for nested in op.walk():
            later.update(nested.operands)
        op = op.next_op
    body = function.body.block
    return {a for a in body.args if isinstance(a.type, MemRefType) and a not in later}
