"""The order a schedule's tasks must keep: read-after-write, write-after-read and
write-after-write hazards on the schedule's memrefs, in program order, between tasks
whose access regions (analysis/regions.py) overlap."""

from bisect import bisect_left, insort
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import islpy as isl
from xdsl.ir import SSAValue

from dhir.analysis.effects import Effects, shared_effects
from dhir.analysis.regions import (
    Bounds,
    Regions,
    count_elements,
    hull,
    piece_boxes,
    shared_regions,
)
from dhir.analysis.shapes import shapes_of
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
    # Each task's shape number (dhir.analysis.shapes): equal numbers, equal bodies.
    shapes: list[int] = field(default_factory=list[int])
    _final_counts: dict[SSAValue, list[tuple[int, int | None]]] | None = field(
        default=None, compare=False, repr=False
    )

    def predecessors(self, task: int) -> list[int]:
        return sorted({d.before for d in self.dependences if d.after == task})

    def final_counts(self) -> dict[SSAValue, list[tuple[int, int | None]]]:
        """`final_writes` with each region's element count (`count_elements`) in its
        place, counted once: the task graph's end edges and the replay both ask."""
        if self._final_counts is None:
            self._final_counts = {
                m: [(k, count_elements(region)) for k, region in writes]
                for m, writes in self.final_writes.items()
            }
        return self._final_counts


def task_graph(schedule: ScheduleOp) -> TaskGraph:
    """Hazards between the tasks' access regions. A write no later than another that
    covers it is dropped from the writes a later task is checked against: the later
    task then depends on the covering write, which depends on it. Reads are trimmed the
    same way. Accesses of one region by several tasks share one entry, and bounding
    boxes rule out most pairs before isl is asked."""
    tasks = list(schedule.tasks())
    shapes = shapes_of(tasks)
    effects = shared_effects(tasks, shapes.ids)
    regions = shared_regions(tasks, shapes)
    writers: dict[SSAValue, _Accesses] = {}
    readers: dict[SSAValue, _Accesses] = {}
    deps: list[Dependence] = []
    order = _order(schedule)
    for k, (effect, region) in enumerate(zip(effects, regions, strict=True)):
        for m in sorted(effect.touches(), key=order):
            read, written = _Region.of(region, m, False), _Region.of(region, m, True)
            needs = _Needs(region, m, read, written)
            for w, js in writers.setdefault(m, _Accesses()).meeting(read):
                for j in js:
                    deps.append(Dependence(j, k, m, Hazard.RAW, needs.count(w, read=True)))
            if written.empty:
                readers.setdefault(m, _Accesses()).add(read, k)
                continue
            for _, js in readers.setdefault(m, _Accesses()).overlapping(written):
                deps.extend(Dependence(j, k, m, Hazard.WAR) for j in js if j != k)
            for w, js in writers[m].meeting(written):
                for j in js:
                    deps.append(Dependence(j, k, m, Hazard.WAW, needs.count(w, read=False)))
            writers[m].trim(written)
            writers[m].add(written, k)
            readers[m].trim(written)
            if not read.empty and (rest := read.minus(written)) is not None:
                readers[m].add(rest, k)
    final = {m: [(j, r) for r, js in a.entries() for j in js] for m, a in writers.items()}
    return TaskGraph(
        effects,
        deps,
        regions,
        {m: sorted(w, key=lambda e: e[0]) for m, w in final.items() if w},
        shapes.ids,
    )


def carried(
    graph: TaskGraph, kept: Mapping[SSAValue, isl.Set] | None = None
) -> list[list[tuple[int, SSAValue, int | None]]]:
    """For a schedule a loop runs again and again (a time loop's step): per task, the
    elements it needs that a task no earlier wrote last in the step before, and no
    earlier task of its own step writes again: (that task, the memref, how many; None
    when not a finite count). `kept`: per memref, elements every rank holds anyway
    (none of them count)."""
    kept = kept or {}
    stale: dict[SSAValue, _Accesses] = {}
    for memref, writes in graph.final_writes.items():
        found = stale[memref] = _Accesses()
        for k, region in writes:
            left = region - kept[memref] if memref in kept else region
            found.add(_Region.of_set(left), k)
    needed: list[list[tuple[int, SSAValue, int | None]]] = [[] for _ in graph.effects]
    for k, (effect, regions) in enumerate(zip(graph.effects, graph.regions, strict=True)):
        for memref in effect.touches():
            accesses = stale.get(memref)
            if accesses is None:
                continue
            needs = _Region.of(regions, memref, False)  # its boxes found once already
            partly = regions.written(memref) - regions.must_written(memref)
            if not partly.is_empty():
                needs = _Region.of_set(regions.needs(memref))
            for region, tasks in accesses.meeting(needs):
                count = count_elements(region.set & needs.set)
                needed[k] += [(i, memref, count) for i in tasks if i != k]
            accesses.trim(_Region.of(regions, memref, True))
    return needed


@dataclass
class _Needs:
    """What a task needs of `memref` (`Regions.needs`), found when a dependence on it is
    first counted: most accesses meet no earlier writer."""

    regions: Regions
    memref: SSAValue
    read: "_Region"
    written: "_Region"
    _found: isl.Set | None = None

    def count(self, earlier: "_Region", *, read: bool) -> int | None:
        """How many elements of `earlier`, an earlier write that meets what the task
        reads (`read`) or writes, the task needs."""
        if earlier.point:
            # One element, which the task reads, or writes: generated tasks' scalar
            # accesses, where isl took most of the graph's time (docs/performance.md).
            if read:
                return 1
            if self.written.point and self.written.set.is_subset(
                self.regions.must_written(self.memref)
            ):
                # It surely writes that element: needed only when it reads it too.
                return 0 if self.read.empty else int(self.read.overlaps(earlier))
        if self._found is None:
            self._found = self.regions.needs(self.memref)
        return count_elements(earlier.set & self._found)


def _order(schedule: ScheduleOp) -> Callable[[SSAValue], int]:
    position = {v: i for i, v in reversed(list(enumerate(schedule.args)))}
    return lambda m: position.get(m, len(position))


@dataclass(frozen=True)
class _Region:
    """A region with its bounding box (None when unbounded), to rule out overlaps
    cheaply."""

    set: isl.Set
    box: Bounds | None
    empty: bool
    # One element: its box is the set itself, so isl need not be asked about it.
    point: bool = False

    @staticmethod
    def of(regions: Regions, memref: SSAValue, written: bool) -> "_Region":
        """What a task reads (or writes) of `memref`."""
        region = regions.written(memref) if written else regions.read(memref)
        return _Region.boxed(region, regions.boxes(memref, written))

    @staticmethod
    def of_set(region: isl.Set) -> "_Region":
        return _Region.boxed(region, piece_boxes(region))

    @staticmethod
    def boxed(region: isl.Set, boxes: tuple[Bounds, ...] | None) -> "_Region":
        if boxes is None:
            return _Region(region, None, False)
        if not boxes:
            return _Region(region, None, True)
        box = hull(boxes)
        return _Region(region, box, False, box[0] == box[1])

    def key(self) -> object:
        """Equal for equal regions (boxes by their bounds, others by their text)."""
        if self.box is not None and (self.point or self.set.is_box()):
            return self.box
        return str(self.set)

    def minus(self, other: "_Region") -> "_Region | None":
        """What is left of this region (not empty) without `other`; None if nothing."""
        if self.point and other.point:
            return None if self.may_overlap(other) else self
        rest = _Region.of_set((self.set - other.set).coalesce())
        return None if rest.empty else rest

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
        if not self.may_overlap(other):
            return False
        # Two points whose boxes meet are one point.
        return (self.point and other.point) or not (self.set & other.set).is_empty()


class _Entry:
    """A region of one memref and the tasks that last accessed it; `seq` orders the
    entries as they were first made (a merge keeps the earlier's place)."""

    __slots__ = ("region", "tasks", "seq", "key")

    def __init__(self, region: _Region, seq: int) -> None:
        self.region = region
        self.tasks: list[int] = []
        self.seq = seq
        self.key = region.key()


class _BoxIndex:
    """Entries by their bounding boxes, so that those that may overlap a box are found
    without visiting the others: per dimension and per class of extent (a power of two),
    their lower bounds sorted. A box's candidates have, in each dimension and class, a
    lower bound within that extent below the box; they are listed from the dimension
    where they are fewest. Entries without a box (unbounded, or of a 0-d memref) are
    candidates for every query."""

    def __init__(self) -> None:
        self._sorted: list[dict[int, list[tuple[int, int]]]] = []
        self._always: dict[int, _Entry] = {}
        self._by_seq: dict[int, _Entry] = {}

    def add(self, entry: _Entry) -> None:
        self._by_seq[entry.seq] = entry
        box = entry.region.box
        if box is None or not box[0]:
            self._always[entry.seq] = entry
            return
        if not self._sorted:
            self._sorted = [{} for _ in box[0]]
        for lo, hi, classes in zip(*box, self._sorted, strict=True):
            insort(classes.setdefault((hi - lo).bit_length(), []), (lo, entry.seq))

    def remove(self, entry: _Entry) -> None:
        del self._by_seq[entry.seq]
        box = entry.region.box
        if box is None or not box[0]:
            del self._always[entry.seq]
            return
        for lo, hi, classes in zip(*box, self._sorted, strict=True):
            listed = classes[(hi - lo).bit_length()]
            del listed[bisect_left(listed, (lo, entry.seq))]

    def candidates(self, region: _Region) -> list[_Entry]:
        """The entries that may overlap `region` (by their boxes), in `seq` order."""
        if region.empty:
            return []
        box = region.box
        if box is None or not box[0] or not self._sorted:
            found = list(self._by_seq.values())
        else:
            found = [self._by_seq[seq] for seq in self._narrowest(*box)]
            found = [e for e in found if e.region.may_overlap(region)]
            found += self._always.values()
        found.sort(key=_seq)
        return found

    def _narrowest(self, lo: tuple[int, ...], hi: tuple[int, ...]) -> list[int]:
        """The seqs of the entries whose extent meets [lo, hi] in the dimension where
        fewest may."""
        best: list[tuple[list[tuple[int, int]], int, int]] = []
        fewest = -1
        for d, classes in enumerate(self._sorted):
            spans = []
            count = 0
            for extent, listed in classes.items():
                first = bisect_left(listed, (lo[d] - (1 << extent) + 1,))
                last = bisect_left(listed, (hi[d] + 1,))
                spans.append((listed, first, last))
                count += last - first
            if fewest < 0 or count < fewest:
                best, fewest = spans, count
        return [seq for listed, first, last in best for _, seq in listed[first:last]]

    def entries(self) -> list[_Entry]:
        return sorted(self._by_seq.values(), key=_seq)


def _seq(entry: _Entry) -> int:
    return entry.seq


class _Accesses:
    """Regions of one memref and the tasks that last accessed each, in the order the
    regions were first accessed; by region, and indexed by bounding box."""

    def __init__(self) -> None:
        self._by_key: dict[object, _Entry] = {}
        self._index = _BoxIndex()
        self._made = 0

    def add(self, region: _Region, task: int) -> None:
        if region.empty:
            return
        entry = self._by_key.get(region.key())
        if entry is None:
            entry = _Entry(region, self._made)
            self._made += 1
            self._insert(entry)
        entry.tasks.append(task)

    def overlapping(self, region: _Region) -> list[tuple[isl.Set, list[int]]]:
        return [(found.set, tasks) for found, tasks in self.meeting(region)]

    def meeting(self, region: _Region) -> list[tuple[_Region, list[int]]]:
        """`overlapping`, with each region's box."""
        return [
            (e.region, e.tasks) for e in self._index.candidates(region) if e.region.overlaps(region)
        ]

    def trim(self, written: _Region) -> None:
        """Drop `written` from every region (what is left of each). Regions left equal
        become one entry, in the place of the earliest, with the tasks of all in order."""
        touched = self._index.candidates(written)
        for entry in touched:
            self._delete(entry)
        left: dict[object, list[_Entry]] = {}
        for entry in touched:
            rest = entry.region.minus(written)
            if rest is not None:
                if rest is not entry.region:
                    entry.region, entry.key = rest, rest.key()
                left.setdefault(entry.key, []).append(entry)
        for key, alike in left.items():
            kept = self._by_key.get(key)
            if kept is not None:
                self._delete(kept)
                alike = sorted([*alike, kept], key=_seq)
            first = alike[0]
            for other in alike[1:]:
                first.tasks.extend(other.tasks)
            self._insert(first)

    def entries(self) -> list[tuple[isl.Set, list[int]]]:
        return [(e.region.set, e.tasks) for e in self._index.entries()]

    def _insert(self, entry: _Entry) -> None:
        self._by_key[entry.key] = entry
        self._index.add(entry)

    def _delete(self, entry: _Entry) -> None:
        del self._by_key[entry.key]
        self._index.remove(entry)
