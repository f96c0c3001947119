"""The order a schedule's tasks must keep: read-after-write, write-after-read and
write-after-write hazards on the schedule's memrefs, in program order, between tasks
whose access regions (analysis/regions.py) overlap."""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import islpy as isl
from xdsl.ir import SSAValue

from dhir.analysis.effects import Effects, task_effects
from dhir.analysis.regions import Regions, count_elements, task_regions
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
    same way. Accesses of one region by several tasks share one entry, and bounding
    boxes rule out most pairs before isl is asked."""
    tasks = list(schedule.tasks())
    effects = [task_effects(task) for task in tasks]
    regions = [task_regions(task) for task in tasks]
    writers: dict[SSAValue, _Accesses] = {}
    readers: dict[SSAValue, _Accesses] = {}
    deps: list[Dependence] = []
    for k, (effect, region) in enumerate(zip(effects, regions, strict=True)):
        for m in sorted(effect.touches(), key=_order(schedule)):
            read, written = _Region.of(region.read(m)), _Region.of(region.written(m))
            needs = region.needs(m)
            for w, js in writers.setdefault(m, _Accesses()).overlapping(read):
                for j in js:
                    deps.append(Dependence(j, k, m, Hazard.RAW, count_elements(w & needs)))
            if written.empty:
                readers.setdefault(m, _Accesses()).add(read, k)
                continue
            for _, js in readers.setdefault(m, _Accesses()).overlapping(written):
                deps.extend(Dependence(j, k, m, Hazard.WAR) for j in js if j != k)
            for w, js in writers[m].overlapping(written):
                for j in js:
                    deps.append(Dependence(j, k, m, Hazard.WAW, count_elements(w & needs)))
            writers[m].trim(written)
            writers[m].add(written, k)
            readers[m].trim(written)
            readers[m].add(_Region.of((read.set - written.set).coalesce()), k)
    final = {m: [(j, r) for r, js in a.entries() for j in js] for m, a in writers.items()}
    return TaskGraph(
        effects, deps, regions, {m: sorted(w, key=lambda e: e[0]) for m, w in final.items() if w}
    )


def _order(schedule: ScheduleOp) -> Callable[[SSAValue], int]:
    position = {v: i for i, v in reversed(list(enumerate(schedule.args)))}
    return lambda m: position.get(m, len(position))


@dataclass(frozen=True)
class _Region:
    """A region with its bounding box (None when unbounded), to rule out overlaps
    cheaply."""

    set: isl.Set
    box: tuple[tuple[int, ...], tuple[int, ...]] | None
    empty: bool

    @staticmethod
    def of(region: isl.Set) -> "_Region":
        if region.is_empty():
            return _Region(region, None, True)
        if not region.is_bounded():
            return _Region(region, None, False)
        dims = region.dim(isl.dim_type.set)
        lo = tuple(int(region.dim_min_val(d).to_python()) for d in range(dims))
        hi = tuple(int(region.dim_max_val(d).to_python()) for d in range(dims))
        return _Region(region, (lo, hi), False)

    def key(self) -> object:
        """Equal for equal regions (boxes by their bounds, others by their text)."""
        if self.box is not None and self.set.is_box():
            return self.box
        return str(self.set)

    def may_overlap(self, other: "_Region") -> bool:
        if self.empty or other.empty:
            return False
        if self.box is None or other.box is None:
            return True
        (alo, ahi), (blo, bhi) = self.box, other.box
        # A loop rather than all(...): this runs for every pair of accesses of a memref.
        for d in range(len(alo)):
            if alo[d] > bhi[d] or blo[d] > ahi[d]:
                return False
        return True

    def overlaps(self, other: "_Region") -> bool:
        return self.may_overlap(other) and not (self.set & other.set).is_empty()


class _Accesses:
    """Regions of one memref and the tasks that last accessed each."""

    def __init__(self) -> None:
        self._entries: dict[object, tuple[_Region, list[int]]] = {}

    def add(self, region: _Region, task: int) -> None:
        if region.empty:
            return
        entry = self._entries.setdefault(region.key(), (region, []))
        entry[1].append(task)

    def overlapping(self, region: _Region) -> list[tuple[isl.Set, list[int]]]:
        return [(r.set, js) for r, js in self._entries.values() if r.overlaps(region)]

    def trim(self, written: _Region) -> None:
        """Drop `written` from every region (what is left of each)."""
        kept: dict[object, tuple[_Region, list[int]]] = {}
        for key, (region, tasks) in self._entries.items():
            if region.may_overlap(written):
                rest = _Region.of((region.set - written.set).coalesce())
                if rest.empty:
                    continue
                key, region = rest.key(), rest
            entry = kept.setdefault(key, (region, []))
            entry[1].extend(tasks)
        self._entries = kept

    def entries(self) -> list[tuple[isl.Set, list[int]]]:
        return [(r.set, js) for r, js in self._entries.values()]
