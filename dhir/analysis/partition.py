"""Which memref arguments of the entry each rank holds only in part, and which part: the
rows (ranges of the first dimension, every other dimension whole) that hold every
element its tasks read or write (dhir.analysis.footprint), halos included.

Row ranges, rather than the footprint's boxes, because they keep the memref's row-major
layout: a rank reserves the rows from its first range's start to its last range's end,
the descriptor's aligned pointer stands that many rows before them, and every task body,
message and write keeps its global subscripts and offsets (docs/semantics.md,
"Partitioned storage"); rows between ranges are reserved but never touched, so the pages
wholly between them take no memory (see `_spans`). The lowering starts each rank's
validity from its rows (`loaded`): a message then only carries elements its sender holds.

A memref stays whole where the lowering could not keep it in part: the footprint's
reasons (dynamic shape, host code, views, unlisted addresses), one rank, no dimension, a
layout other than the identity, a GPU task using it (device copies are whole; a GPU
piece of a split loop copies rows, and counts as any task), not
exactly one schedule listing it, or a schedule after which the memref is needed on more
than rank 0 (`final_to_root`: the lowering's, see dhir.analysis.outputs.root_only).
"""

import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import TypeVar

import islpy as isl
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, NoneAttr, UnrankedMemRefType
from xdsl.ir import BlockArgument, SSAValue

from dhir.analysis.counts import element_bytes_of
from dhir.analysis.footprint import (
    Whole,
    memref_name,
    task_boxes,
    task_ranks,
    whole_reasons,
)
from dhir.analysis.regions import Regions
from dhir.analysis.validity import Box
from dhir.dialects import func
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import loc_of
from dhir.ir.tasks import is_gpu_task, rows_of

# Rows lo <= r < hi of the first dimension.
Band = tuple[int, int]
# A rank's rows of a memref: sorted ranges, apart from each other; none for no rows.
Rows = tuple[Band, ...]
_T = TypeVar("_T")
# A rank's ranges of one memref kept apart whatever the rows between them (see _spans).
MAX_SPANS = 4
# The page size the runtime's reserved memory is counted in: rows between a rank's
# ranges cost no memory only where they hold a whole page (4 KiB on x86-64 and most
# Linux systems; larger pages only make fewer of those rows free).
PAGE_BYTES = 4096


@dataclass(frozen=True)
class Partition:
    """Per memref argument of the entry (by position): each rank's rows, or Whole."""

    ranks: int
    bands: Mapping[int, tuple[Rows, ...]]
    whole: Mapping[int, Whole]

    def lines(self, names: Mapping[int, str]) -> list[str]:
        """What `--timing` and `dhir schedule` print: one line per memref argument."""
        out: list[str] = []
        for index in sorted({*self.bands, *self.whole}):
            name = names.get(index, f"arg{index}")
            if index in self.whole:
                out.append(f"{name}: whole on every rank, {self.whole[index].reason}")
                continue
            ranks = "; ".join(
                f"{ranks_named(first, last)} rows {describe(rows)}"
                for first, last, rows in equal_runs(self.bands[index])
            )
            out.append(f"{name}: partitioned, {ranks}")
        return out


def row_bands(
    function: func.FuncOp,
    ranks: int,
    final_to_root: Set[SSAValue],
    placement: Mapping[TaskOp, int] | None = None,
    regions: Mapping[TaskOp, Regions] | None = None,
) -> Partition:
    """The bands of the memref arguments of `function` (the entry) on `ranks` ranks, with
    tasks placed as `placement` says, else as their `dhir.rank` says. `final_to_root`:
    the memrefs that, after the one schedule listing them (or its time loop), only rank 0
    needs. `regions`: the tasks' access regions, where already found."""
    return storage(function, ranks, final_to_root, regions).partition(placement)


@dataclass(frozen=True)
class Stored:
    """A memref argument of the entry as storage, whatever the placement: its name,
    position, shape, bytes of one row (of its first dimension) and in all (None for an
    unknown shape); `whole`: why every rank holds it whole, if it does whatever the
    placement; else `schedule`, the one schedule listing it, and `boxes`, per task
    touching it, what that task reads or writes of it."""

    name: str
    index: int
    shape: tuple[int, ...] | None
    row_bytes: int
    size: int | None
    whole: Whole | None
    schedule: ScheduleOp | None = None
    boxes: Mapping[TaskOp, frozenset[Box]] = field(default_factory=dict[TaskOp, frozenset[Box]])


@dataclass(frozen=True)
class Storage:
    """Every memref argument of the entry (`storage`), to partition for a placement."""

    ranks: int
    memrefs: tuple[Stored, ...]

    def partition(self, placement: Mapping[TaskOp, int] | None = None) -> Partition:
        """Each rank's rows of each memref, tasks placed as `placement` says, else as
        their `dhir.rank` says (a task with neither counts on every rank)."""
        bands: dict[int, tuple[Rows, ...]] = {}
        whole: dict[int, Whole] = {}
        for memref in self.memrefs:
            found = self.rows(memref, placement)
            if isinstance(found, Whole):
                whole[memref.index] = found
            else:
                bands[memref.index] = found
        return Partition(self.ranks, bands, whole)

    def in_part(self, function: func.FuncOp) -> frozenset[SSAValue]:
        """The memref arguments of `function` (the entry) the ranks may hold in part,
        whatever the placement (one may still be held whole where every rank's tasks
        touch all its rows)."""
        args = function.body.blocks[0].args
        return frozenset(args[m.index] for m in self.memrefs if m.whole is None)

    def rows(
        self, memref: Stored, placement: Mapping[TaskOp, int] | None
    ) -> tuple[Rows, ...] | Whole:
        """Each rank's rows of `memref`, or why every rank holds it whole."""
        if memref.whole is not None:
            return memref.whole
        touched: list[set[Box]] = [set() for _ in range(self.ranks)]
        for task, boxes in memref.boxes.items():
            for rank in task_ranks(task, self.ranks, placement):
                touched[rank] |= boxes
        rows = tuple(_spans(boxes, memref.row_bytes) for boxes in touched)
        extent = memref.shape[0] if memref.shape else 0
        if all(r == ((0, extent),) for r in rows):
            return Whole("every rank's tasks touch all its rows" + _spanning(memref, extent))
        return rows

    def held(self, memref: Stored, rows: Rows | Whole) -> int:
        """The bytes of `memref` a rank holding `rows` of it holds (0 for an unknown size:
        not counted)."""
        if isinstance(rows, Whole):
            return memref.size or 0
        return sum(hi - lo for lo, hi in rows) * memref.row_bytes


def _spanning(memref: Stored, extent: int) -> str:
    """Where a task that alone touches every row of `memref` is (a column of it read in
    a row block's task, say), so that the user sees which access keeps it whole; empty
    when it takes several tasks."""
    for task, boxes in memref.boxes.items():
        if _rows(boxes) == ((0, extent),):
            loc = loc_of(task)
            return f" (the task at {loc} alone touches every row)" if loc is not None else ""
    return ""


def storage(
    function: func.FuncOp,
    ranks: int,
    final_to_root: Set[SSAValue],
    regions: Mapping[TaskOp, Regions] | None = None,
) -> Storage:
    """The memref arguments of `function` (the entry) on `ranks` ranks, as `row_bands`
    partitions them, with what decides their rows found once for every placement.
    `regions`: the tasks' access regions, where already found."""
    entry = function.body.blocks.first
    args = list(entry.args) if entry is not None else []
    memrefs = [a for a in args if isinstance(a.type, MemRefType | UnrankedMemRefType)]
    reasons = whole_reasons(function)
    listing = _listing(function)
    on_gpu = _gpu_memrefs(listing)
    out: list[Stored] = []
    tracked: set[SSAValue] = set()
    for arg in memrefs:
        schedules = listing.get(arg, [])
        reason = reasons.get(arg.index) or _reason(arg, ranks, schedules, final_to_root, on_gpu)
        out.append(_stored(arg, reason, schedules[0] if reason is None else None))
        if reason is None:
            tracked.add(arg)
    boxes: dict[SSAValue, dict[TaskOp, frozenset[Box]]] = {}
    for schedule in (op for op in walk_outside_tasks(function) if isinstance(op, ScheduleOp)):
        for task in schedule.tasks():
            known = regions.get(task) if regions is not None else None
            for memref, found in task_boxes(task, tracked, known).items():
                boxes.setdefault(memref, {})[task] = frozenset(found)
    memrefs_out = tuple(
        replace(s, boxes=boxes.get(args[s.index], {})) if s.whole is None else s for s in out
    )
    return Storage(ranks, memrefs_out)


def _stored(arg: BlockArgument, whole: Whole | None, schedule: ScheduleOp | None) -> Stored:
    type_ = arg.type
    element = element_bytes_of(type_)
    shape = None
    if isinstance(type_, MemRefType) and DYNAMIC_INDEX not in type_.get_shape():
        shape = tuple(type_.get_shape())
    size = math.prod(shape) * element if shape is not None else None
    row_bytes = math.prod(shape[1:]) * element if shape else 0
    return Stored(memref_name(arg), arg.index, shape, row_bytes, size, whole, schedule)


def _listing(function: func.FuncOp) -> dict[SSAValue, list[ScheduleOp]]:
    out: dict[SSAValue, list[ScheduleOp]] = {}
    for op in walk_outside_tasks(function):
        if isinstance(op, ScheduleOp):
            for value in dict.fromkeys(op.operands):
                out.setdefault(value, []).append(op)
    return out


def _gpu_memrefs(listing: Mapping[SSAValue, list[ScheduleOp]]) -> set[SSAValue]:
    """The memrefs a GPU task of a schedule in `listing` lists, but for a GPU piece of a
    split loop (dhir-split-devices): it copies rows of its memrefs, which its access
    regions (the copies) bound like any task's."""
    schedules = dict.fromkeys(s for found in listing.values() for s in found)
    tasks = [t for s in schedules for t in s.tasks() if is_gpu_task(t)]
    return {m for t in tasks if rows_of(t) is None for m in t.memrefs}


def _reason(
    arg: SSAValue,
    ranks: int,
    schedules: list[ScheduleOp],
    final_to_root: Set[SSAValue],
    on_gpu: Set[SSAValue],
) -> Whole | None:
    type_ = arg.type
    assert isinstance(type_, MemRefType)
    if ranks == 1:
        return Whole("one rank runs every task")
    if not type_.get_shape():
        return Whole("it has no dimension to split")
    if not isinstance(type_.layout, NoneAttr):
        return Whole("its layout is not the identity")
    if len(schedules) != 1:
        return Whole(f"{len(schedules) or 'no'} schedules list it, not one")
    if arg in on_gpu:
        return Whole("a GPU task uses it (device copies are whole)")
    if arg not in final_to_root:
        return Whole("code after its schedule needs it on every rank")
    return None


def _spans(boxes: Set[Box], row_bytes: int) -> Rows:
    """The rows of `boxes`, exactly: the first-dimension ranges of every box, those that
    touch or overlap joined. Past `MAX_SPANS` ranges (an interleaved placement leaves a
    range per row), two ranges stay apart only where the rows between them hold a whole
    page of the rank's reserved memory, which is then never touched: rows of a page or
    more keep every R-th row apart (the rank holds about 1/R of the array), smaller ones
    are joined, as their pages would be touched anyway."""
    rows = _rows(boxes)
    if len(rows) <= MAX_SPANS:
        return rows
    first = rows[0][0]
    out: list[Band] = [rows[0]]
    for lo, hi in rows[1:]:
        if _holds_a_page((out[-1][1] - first) * row_bytes, (lo - first) * row_bytes):
            out.append((lo, hi))
        else:
            out[-1] = (out[-1][0], hi)
    return tuple(out)


def _holds_a_page(start: int, end: int) -> bool:
    """Whether the bytes start <= b < end of a page-aligned reservation hold a page."""
    return -(-start // PAGE_BYTES) * PAGE_BYTES + PAGE_BYTES <= end


def _rows(boxes: Iterable[Box]) -> Rows:
    """The first-dimension ranges of `boxes`, sorted, those that touch or overlap joined."""
    out: list[Band] = []
    for lo, hi in sorted((b.lo[0], b.hi[0]) for b in boxes):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def equal_runs(values: Sequence[_T]) -> list[tuple[int, int, _T]]:
    """`values` as runs of equal neighbours: (first index, last index, value). Lines
    about thousands of ranks, most of them alike, stay short."""
    runs: list[tuple[int, int, _T]] = []
    for k, value in enumerate(values):
        if runs and runs[-1][2] == value:
            runs[-1] = (runs[-1][0], k, value)
        else:
            runs.append((k, k, value))
    return runs


def ranks_named(first: int, last: int) -> str:
    """`rank 3`, or `ranks 3-9` for a run of them."""
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def describe(rows: Rows) -> str:
    """`0..9, 20..29` (inclusive), or `none`; a run of more than `MAX_SPANS` ranges of
    one length, evenly spaced (an interleaved placement's), as `0..0, 2..2, ...,
    1998..1998 (1000 ranges)`."""
    parts: list[str] = []
    for run in _even_runs(rows):
        named = [f"{lo}..{hi - 1}" for lo, hi in run]
        if len(run) > MAX_SPANS:
            parts.append(f"{named[0]}, {named[1]}, ..., {named[-1]} ({len(run)} ranges)")
        else:
            parts += named
    return ", ".join(parts) or "none"


def _even_runs(rows: Rows) -> list[list[Band]]:
    """`rows` cut into runs of ranges of one length, evenly spaced."""
    runs: list[list[Band]] = []
    for band in rows:
        run = runs[-1] if runs else None
        if run and band[1] - band[0] == run[0][1] - run[0][0]:
            if len(run) == 1 or band[0] - run[-1][0] == run[1][0] - run[0][0]:
                run.append(band)
                continue
        runs.append([band])
    return runs


def loaded(rows: Rows, shape: Sequence[int]) -> isl.Set:
    """The elements of a memref of `shape` in `rows`."""
    rest = tuple(shape[1:])
    total = Box((0, *(0 for _ in rest)), (0, *rest)).as_set()
    boxes = [Box((lo, *(0 for _ in rest)), (hi, *rest)).as_set() for lo, hi in rows]
    if len(rows) <= MAX_SPANS:
        for box in boxes:
            total = total | box
        return total.coalesce()
    # Ranges apart are already the fewest boxes. A range per row (an interleaved
    # placement's) is joined in halves: one by one, or coalesced, takes time quadratic
    # in them.
    while len(boxes) > 1:
        boxes = [a | b for a, b in zip(boxes[::2], boxes[1::2])] + boxes[len(boxes) & ~1 :]
    return boxes[0]
