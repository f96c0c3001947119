from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.dependences import task_graph
from dhir.analysis.regions import Regions
from dhir.dialects.dhir import DEPENDENCE_ANNOTATIONS, ScheduleOp, TaskOp
from dhir.ir.diagnostics import error_at

# What the pass writes on each task, for reading: dhir orders and places tasks from their
# bodies and reads none of these back.
ANNOTATIONS = DEPENDENCE_ANNOTATIONS


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
        regions = graph.regions[k]
        reads = sorted(effects.reads, key=position.__getitem__)
        writes = sorted(effects.writes, key=position.__getitem__)
        task.attributes["dhir.read_regions"] = _strings(str(regions.read(m)) for m in reads)
        task.attributes["dhir.write_regions"] = _strings(_write(regions, m) for m in writes)
        task.attributes["dhir.after"] = _array(graph.predecessors(k))


def _write(regions: Regions, memref: SSAValue) -> str:
    written = regions.written(memref)
    must = written.is_subset(regions.must_written(memref))
    return f"{'must' if must else 'may'} {written}"


def _strings(texts: Iterable[str]) -> ArrayAttr[StringAttr]:
    return ArrayAttr([StringAttr(t) for t in texts])


def _array(values: object) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, sorted(values))  # type: ignore[arg-type]


def check_annotations(ops: Iterable[Operation]) -> None:
    """Refuse, at its task, an annotation of this pass in a program to run: written by
    hand (`dhir.after = array<i64: 5>`) it looks like an order dhir keeps, and was ignored."""
    for op in ops:
        if not isinstance(op, TaskOp):
            continue
        for name in ANNOTATIONS:
            if name in op.attributes:
                raise error_at(
                    op,
                    f"{name} on this task is what dhir-annotate-dependences writes, for "
                    "reading only: dhir orders tasks by what their bodies read and write "
                    "(program order wherever two touch the same data) and never reads "
                    f"{name}. Remove it; to make a task wait for another, let it read "
                    "what the other writes",
                )
