"""`dhir-track-tasks`: let every rank say which task it is running, for the launcher to
report when a rank dies (docs/commands.md, `dhir run`).

Each task body is wrapped in `func.call @dhir_rt_task_enter(%id)` and
`func.call @dhir_rt_task_leave(%id)`, `%id` (i64) the task's position in `task_ids` order,
as dhir-instrument numbers them. The runtime stores the id in a file mapped into the rank's
memory (a plain store, no system call), which outlives the rank even when it is killed.
The calls take no memref, so they change no task's effects. The pass records what the ids
stand for as the module attribute `dhir.task_table`: one `name<TAB>location` string per id,
which the native backend takes off the module and builds into the executable.

Where dhir-lower-to-mpi places a task right after another, under one guard, nothing runs
between the first's leave and the second's enter but the second's id constant: it calls
`dhir_rt_task_switch(%id)` there in place of the two (`switch_tasks`), which leaves the
same state and trace; each such pair was a call that clobbers the registers around it.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, SymbolRefAttr, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dhir.dialects import arith, func
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.diagnostics import loc_of
from dhir.ir.tasks import is_gpu_task, schedule_ids, task_ids
from dhir.transforms.instrument import wrap_task

ENTER = "dhir_rt_task_enter"
LEAVE = "dhir_rt_task_leave"
SWITCH = "dhir_rt_task_switch"
TABLE_ATTR = "dhir.task_table"


@dataclass(frozen=True)
class TrackTasksPass(ModulePass):
    """Call dhir_rt_task_enter/leave around every task; name the ids in `dhir.task_table`."""

    name = "dhir-track-tasks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names = task_ids(op)
        schedules = schedule_ids(op)
        for number, task in enumerate(names):
            if not _tracked(task):
                wrap_task(task, number, ENTER, LEAVE)
        op.attributes[TABLE_ATTR] = ArrayAttr(
            [StringAttr(_line(name, task, schedules)) for task, name in names.items()]
        )
        if names:
            present = {f.sym_name.data for f in op.body.block.ops if isinstance(f, func.FuncOp)}
            for callee in (ENTER, LEAVE):
                if callee not in present:
                    op.body.block.add_op(func.FuncOp.external(callee, [i64], []))


def switch_tasks(before: Operation | None, body: Sequence[Operation]) -> bool:
    """Whether `before` leaves a task and `body`, the ops of a task about to follow it
    directly, enters its own first: then `before` is erased and the enter calls
    SWITCH instead (with the same id)."""
    if not _calls(before, LEAVE) or len(body) < 2:
        return False
    ident, enter = body[0], body[1]
    if not (isinstance(ident, arith.ConstantOp) and _calls(enter, ENTER)):
        return False
    if enter.operands[0] is not ident.result:
        return False
    assert before is not None
    before.detach()
    before.erase()
    enter.properties["callee"] = _SWITCH
    return True


_SWITCH = SymbolRefAttr(SWITCH)


def _calls(op: Operation | None, callee: str) -> bool:
    return isinstance(op, func.CallOp) and op.callee.string_value() == callee


def task_table(module: ModuleOp) -> list[str]:
    """The table dhir-track-tasks left on `module`, taken off it (mlir-opt need not see it)."""
    table = module.attributes.pop(TABLE_ATTR, None)
    if not isinstance(table, ArrayAttr):
        return []
    return [entry.data for entry in table.data if isinstance(entry, StringAttr)]


def _line(name: str, task: TaskOp, schedules: dict[ScheduleOp, str]) -> str:
    """`name<TAB>location<TAB>schedule<TAB>device kind` (cpu or gpu)."""
    loc = loc_of(task)
    # Tabs and newlines would break the table's lines; names and paths rarely hold them.
    where = str(loc).replace("\t", " ").replace("\n", " ") if loc is not None else ""
    # The verifier refuses them in a `name`; this keeps the table whole for unverified modules.
    name = name.replace("\t", " ").replace("\n", " ")
    parent = task.parent_op()
    schedule = schedules.get(parent, "") if isinstance(parent, ScheduleOp) else ""
    return f"{name}\t{where}\t{schedule}\t{'gpu' if is_gpu_task(task) else 'cpu'}"


def _tracked(task: TaskOp) -> bool:
    return any(_calls(o, ENTER) for o in task.body.block.ops)
