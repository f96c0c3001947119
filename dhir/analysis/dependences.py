"""The order a schedule's tasks must keep: read-after-write, write-after-read and
write-after-write hazards on the schedule's memrefs, in program order."""

from dataclasses import dataclass
from enum import StrEnum

from xdsl.ir import SSAValue

from dhir.analysis.effects import Effects, task_effects
from dhir.dialects.dhir import ScheduleOp


class Hazard(StrEnum):
    RAW = "raw"
    WAR = "war"
    WAW = "waw"


@dataclass(frozen=True)
class Dependence:
    """Task `before` must finish before task `after` (indices in program order)
    because of `hazard` on `memref`."""

    before: int
    after: int
    memref: SSAValue
    hazard: Hazard


@dataclass
class TaskGraph:
    effects: list[Effects]
    dependences: list[Dependence]

    def predecessors(self, task: int) -> list[int]:
        return sorted({d.before for d in self.dependences if d.after == task})


def task_graph(schedule: ScheduleOp) -> TaskGraph:
    effects = [task_effects(task) for task in schedule.tasks()]
    last_writer: dict[SSAValue, int] = {}
    readers: dict[SSAValue, list[int]] = {}
    deps: list[Dependence] = []
    for k, effect in enumerate(effects):
        for m in effect.reads:
            if m in last_writer:
                deps.append(Dependence(last_writer[m], k, m, Hazard.RAW))
        for m in effect.writes:
            deps.extend(Dependence(r, k, m, Hazard.WAR) for r in readers.get(m, []) if r != k)
            if m in last_writer:
                deps.append(Dependence(last_writer[m], k, m, Hazard.WAW))
        for m in effect.writes:
            last_writer[m] = k
            readers[m] = []
        for m in effect.reads - effect.writes:
            readers.setdefault(m, []).append(k)
    return TaskGraph(effects, deps)
