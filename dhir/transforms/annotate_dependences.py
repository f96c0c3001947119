from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from dhir.analysis.dependences import task_graph
from dhir.dialects.dhir import ScheduleOp


@dataclass(frozen=True)
class AnnotateDependencesPass(ModulePass):
    """Mark each task with what it reads, writes and must wait for (for inspection).

    Sets on every dhir.task: `dhir.id` (its index in the schedule), `dhir.reads` and
    `dhir.writes` (positions in the schedule's operand list) and `dhir.after` (ids of
    the tasks it must follow because of RAW, WAR or WAW hazards).
    """

    name = "dhir-annotate-dependences"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for schedule in op.walk():
            if isinstance(schedule, ScheduleOp):
                _annotate(schedule)


def _annotate(schedule: ScheduleOp) -> None:
    graph = task_graph(schedule)
    position = {value: i for i, value in reversed(list(enumerate(schedule.args)))}
    for k, task in enumerate(schedule.tasks()):
        effects = graph.effects[k]
        task.attributes["dhir.id"] = IntegerAttr(k, i64)
        task.attributes["dhir.reads"] = _array(position[m] for m in effects.reads)
        task.attributes["dhir.writes"] = _array(position[m] for m in effects.writes)
        task.attributes["dhir.after"] = _array(graph.predecessors(k))


def _array(values: object) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, sorted(values))  # type: ignore[arg-type]
