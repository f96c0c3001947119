"""The order a schedule's tasks must keep: read-after-write, write-after-read and
write-after-write hazards on the schedule's memrefs, in program order, between tasks
whose access regions (analysis/regions.py) overlap."""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import islpy as isl
from xdsl.ir import SSAValue

from dhir.analysis.effects import Effects, task_effects
from dhir.analysis.regions import Regions, task_regions
from dhir.dialects.dhir import ScheduleOp


class Hazard(StrEnum):
    RAW = "raw"
    WAR = "war"
    WAW = "waw"


@dataclass(frozen=True)
class Dependence:
    """Task `before` must finish before task `after` (indices in program order)
    because of `hazard` on `memref`; `elements`: how many elements `before` wrote that
    `after` needs (for RAW and WAW; None when that is not a finite count)."""

    before: int
    after: int
    memref: SSAValue
    hazard: Hazard
    elements: int | None = None


@dataclass
class TaskGraph:
    effects: list[Effects]
    dependences: list[Dependence]
    regions: list[Regions]
    # Per memref, the writes no later task overwrites: (task, elements), in order.
    final_writes: dict[SSAValue, list[tuple[int, isl.Set]]]

    def predecessors(self, task: int) -> list[int]:
        return sorted({d.before for d in self.dependences if d.after == task})


def task_graph(schedule: ScheduleOp) -> TaskGraph:
    """Hazards between the tasks' access regions. A write no later than another that
    covers it is dropped from the writes a later task is checked against: the later
    task then depends on the covering write, which depends on it. Reads are trimmed the
    same way."""
    tasks = list(schedule.tasks())
    effects = [task_effects(task) for task in tasks]
    regions = [task_regions(task) for task in tasks]
    writers: dict[SSAValue, list[tuple[int, isl.Set]]] = {}
    readers: dict[SSAValue, list[tuple[int, isl.Set]]] = {}
    deps: list[Dependence] = []
    for k, (effect, region) in enumerate(zip(effects, regions, strict=True)):
        for m in sorted(effect.touches(), key=_order(schedule)):
            read, written = region.read(m), region.written(m)
            needs = region.needs(m)
            for j, w in writers.get(m, []):
                if not (w & read).is_empty():
                    deps.append(Dependence(j, k, m, Hazard.RAW, count_elements(w & needs)))
            if written.is_empty():
                readers.setdefault(m, []).append((k, read))
                continue
            deps.extend(
                Dependence(j, k, m, Hazard.WAR)
                for j, r in readers.get(m, [])
                if j != k and not (r & written).is_empty()
            )
            for j, w in writers.get(m, []):
                if not (w & written).is_empty():
                    deps.append(Dependence(j, k, m, Hazard.WAW, count_elements(w & needs)))
            writers[m] = [*_trim(writers.get(m, []), written), (k, written)]
            readers[m] = _trim(readers.get(m, []), written)
            rest = (read - written).coalesce()
            if not rest.is_empty():
                readers[m].append((k, rest))
    return TaskGraph(effects, deps, regions, writers)


def _order(schedule: ScheduleOp) -> Callable[[SSAValue], int]:
    position = {v: i for i, v in reversed(list(enumerate(schedule.args)))}
    return lambda m: position.get(m, len(position))


def _trim(accesses: list[tuple[int, isl.Set]], written: isl.Set) -> list[tuple[int, isl.Set]]:
    out: list[tuple[int, isl.Set]] = []
    for j, region in accesses:
        rest = (region - written).coalesce()
        if not rest.is_empty():
            out.append((j, rest))
    return out


def count_elements(region: isl.Set) -> int | None:
    """The number of elements of a bounded region; None for an unbounded one."""
    if region.is_empty():
        return 0
    if not region.is_bounded():
        return None
    return int(region.count_val().to_python())
