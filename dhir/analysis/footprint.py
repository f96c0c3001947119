"""What each rank's tasks touch of each memref argument of the entry: the storage a rank
would need if it held only its part of each array (issue 24), as boxes.

For every memref argument and every rank R, the elements that the tasks placed on R may
read or write, over all the schedules of the entry function (each schedule of a time
loop once: its tasks touch the same regions every iteration), widened to a few boxes:
the bounding box of each piece of every task's read and written regions (as
dhir.analysis.validity widens writes: a task also needs the widened part), then boxes
that overlap or that together make a box merged, and at most `MAX_BOXES` kept (the
cheapest to merge are merged). The bytes a rank touches are those of the boxes before
any is merged, each element once (`union_volume`): merging into a few boxes takes in
elements between them, the rows of other ranks under an interleaved placement. A rank
whose tasks touch nothing of a memref needs none of it. A task without a rank counts on
every rank.

A memref stays whole, on every rank, where the IR does not bound what a rank touches:
a dynamic shape, host code (outside schedules, run by every rank) that uses it or any
alias of it, a call or an unknown op at host level that it reaches, a schedule listing
a view of it, a task using an address into it without listing it. Any alias counts
(dhir.analysis.sharing: views made anywhere, the same buffer through loops and branches).

What this leaves to the lowering that partitions storage (today every rank holds every
memref whole, and this analysis is only reported by `dhir schedule`):
- Input and output: rank 0 reads the inputs and writes the results, and every element
  is valid on every rank when a schedule starts. With partitioned storage rank 0 has to
  scatter each input to the ranks whose boxes hold it and gather the results: it needs
  the whole array at those moments, or has to stream it by pieces.
- Transfers: a box may travel as one run of memory that covers elements between its
  first and last ones (dhir.analysis.validity); a receiver holding only its boxes must
  receive the box itself (a strided block) instead.
- The end of a schedule makes every partly held memref consistent on every rank; with
  no host code reading it (else it is whole here) that is only the gather to rank 0.
"""

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import lru_cache
from heapq import heapify, heappop, heappush
from itertools import combinations
from typing import TypeVar

from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, UnrankedMemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue

from dhir.analysis.counts import element_bytes_of
from dhir.analysis.regions import Regions, task_regions
from dhir.analysis.sharing import buffers, memory_of, shared
from dhir.analysis.validity import Box
from dhir.dialects import func
from dhir.dialects.access import is_pure, is_shape_query, is_view
from dhir.dialects.dhir import DEVICE_BUFFER_ATTR, ScheduleOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import loc_of, value_name
from dhir.ir.tasks import rank_of

# Boxes per memref and rank, at most: the storage a rank allocates stays a few blocks.
MAX_BOXES = 4
# Past this many distinct boxes (after exact merges), one bounding box: choosing which
# to merge costs the square of their number.
MAX_CANDIDATES = 64
# A heap entry of `_fewest`: two boxes' numbers, after a waste.
_Pair = TypeVar("_Pair", tuple[int, int], tuple[int, int, int])


@dataclass(frozen=True)
class Whole:
    """The memref stays whole on every rank, for `reason` (a phrase: "its shape is
    dynamic")."""

    reason: str


# What a rank needs of a memref: its boxes (none: nothing), or all of it.
Part = tuple[Box, ...] | Whole


@dataclass(frozen=True)
class MemrefFootprint:
    """One memref argument of the entry: its name (`%a`, or `argK` when it has none), its
    position, shape (None for a dynamic extent), element size, per rank what that rank
    needs of it (a few boxes), and the elements of the boxes before merging, each once
    (what its tasks touch; none where it stays whole)."""

    name: str
    index: int
    shape: tuple[int | None, ...] | None  # None: unranked
    element_bytes: int
    parts: tuple[Part, ...]
    elements: tuple[int, ...] | None = None

    @property
    def whole(self) -> Whole | None:
        return next((p for p in self.parts if isinstance(p, Whole)), None)

    @property
    def size(self) -> int | None:
        """Bytes of the whole memref; None when its shape is not static."""
        if self.shape is None or None in self.shape:
            return None
        return math.prod(d for d in self.shape if d is not None) * self.element_bytes

    def bytes_on(self, rank: int) -> int | None:
        """Bytes rank `rank`'s tasks touch; None when that is the whole of a memref of
        unknown size."""
        part = self.parts[rank]
        if isinstance(part, Whole):
            return self.size
        if self.elements is not None:
            return self.elements[rank] * self.element_bytes
        return sum(volume(box) for box in part) * self.element_bytes


@dataclass(frozen=True)
class Footprint:
    """Every memref argument of the entry, in order, with what each rank needs of it."""

    ranks: int
    memrefs: tuple[MemrefFootprint, ...]

    def touched(self, rank: int) -> int:
        """Bytes rank `rank` needs of the memrefs of known size."""
        return sum(b for m in self.memrefs if (b := m.bytes_on(rank)) is not None)

    def held(self) -> int:
        """Bytes every rank holds today (every memref whole), of those of known size."""
        return sum(m.size for m in self.memrefs if m.size is not None)

    def unsized(self) -> list[MemrefFootprint]:
        """The memrefs whose size the IR does not fix."""
        return [m for m in self.memrefs if m.size is None]


def volume(box: Box) -> int:
    return math.prod(b - a for a, b in zip(box.lo, box.hi, strict=True))


def footprint(
    function: func.FuncOp, ranks: int, placement: Mapping[TaskOp, int] | None = None
) -> Footprint:
    """What each of `ranks` ranks needs of each memref argument of `function` (the entry),
    with its tasks placed as `placement` says, or else as their `dhir.rank` says."""
    entry = function.body.blocks.first
    args = [a for a in entry.args if _is_memref(a)] if entry is not None else []
    reasons = _whole_reasons(function, args)
    found = _touched(function, {a for a in args if a not in reasons}, ranks, placement)
    memrefs = []
    for arg in args:
        reason = reasons.get(arg)
        if reason is not None:
            memrefs.append(_memref(arg, (Whole(reason),) * ranks, None))
            continue
        boxes = [found.get((arg, rank), set()) for rank in range(ranks)]
        parts = tuple(merged(mine) for mine in boxes)
        memrefs.append(_memref(arg, parts, tuple(union_volume(mine) for mine in boxes)))
    return Footprint(ranks, tuple(memrefs))


def _touched(
    function: func.FuncOp,
    tracked: set[BlockArgument],
    ranks: int,
    placement: Mapping[TaskOp, int] | None,
) -> dict[tuple[SSAValue, int], set[Box]]:
    """Per (memref, rank): the boxes of each piece of what a task there reads or writes."""
    found: dict[tuple[SSAValue, int], set[Box]] = {}
    for schedule in _schedules(function):
        for task in schedule.tasks():
            touched = task_boxes(task, tracked)
            if not touched:
                continue
            on = task_ranks(task, ranks, placement)
            for memref, boxes in touched.items():
                for rank in on:
                    found.setdefault((memref, rank), set()).update(boxes)
    return found


def task_boxes(
    task: TaskOp, tracked: Set[SSAValue], regions: Regions | None = None
) -> dict[SSAValue, set[Box]]:
    """Per memref of `tracked` that `task` lists: the boxes of each piece of what it reads
    or writes of it. `regions`: the task's, when known."""
    listed = [m for m in task.memrefs if m in tracked]
    if not listed:
        return {}
    regions = regions if regions is not None else task_regions(task)
    return {memref: _boxes(regions, memref) for memref in listed}


def whole_reasons(function: func.FuncOp) -> dict[int, Whole]:
    """The memref arguments of `function` (the entry), by position, that stay whole on
    every rank whatever the placement, and why (see the module's docstring)."""
    entry = function.body.blocks.first
    args = [a for a in entry.args if _is_memref(a)] if entry is not None else []
    reasons = _whole_reasons(function, args)
    return {a.index: Whole(reasons[a]) for a in args if a in reasons}


def memref_name(arg: BlockArgument) -> str:
    """`%a` as written (`%y_1`, which xDSL's name hint shortens to `%y`), or `argK` for
    an argument without a name."""
    return value_name(arg, f"arg{arg.index}")


def _memref(
    arg: BlockArgument, parts: tuple[Part, ...], elements: tuple[int, ...] | None
) -> MemrefFootprint:
    type_ = arg.type
    shape = None
    if isinstance(type_, MemRefType):
        shape = tuple(None if d == DYNAMIC_INDEX else d for d in type_.get_shape())
    bytes_ = element_bytes_of(type_)
    return MemrefFootprint(memref_name(arg), arg.index, shape, bytes_, parts, elements)


def _is_memref(value: SSAValue) -> bool:
    return isinstance(value.type, MemRefType | UnrankedMemRefType)


def task_ranks(task: TaskOp, ranks: int, placement: Mapping[TaskOp, int] | None) -> range:
    """The ranks `task` runs on: its rank in `placement`, else its `dhir.rank`, else any."""
    rank = placement.get(task) if placement is not None else None
    if rank is None:
        rank = rank_of(task)
    if rank is None or not 0 <= rank < ranks:
        return range(ranks)  # unplaced: it may run anywhere
    return range(rank, rank + 1)


def _boxes(regions: Regions, memref: SSAValue) -> set[Box]:
    """The bounding box of each piece of what a task reads or writes of `memref`."""
    found: set[Box] = set()
    for written in (False, True):
        boxes = regions.boxes(memref, written)
        if boxes is None:  # unbounded: a dynamic shape, which stays whole (`whole_reasons`)
            type_ = memref.type
            assert isinstance(type_, MemRefType)
            return {Box(tuple(0 for _ in type_.get_shape()), tuple(type_.get_shape()))}
        found.update(Box(lo, tuple(h + 1 for h in hi)) for lo, hi in boxes)
    return found


# --- the elements of boxes --------------------------------------------------------------


def union_volume(boxes: Iterable[Box]) -> int:
    """The elements of the union of `boxes`, each once: a sweep along the first dimension,
    the boxes over each stretch of it counted again in the others. Boxes apart (a row per
    task, interleaved) cost a stretch each; as many as overlap a stretch, each of them."""
    found = sorted({(b.lo, b.hi) for b in boxes if volume(b) > 0})
    return _union_volume(found)


def _union_volume(boxes: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> int:
    """`union_volume` of (lo, hi) pairs, sorted by lo, none empty."""
    if len(boxes) <= 1 or not boxes[0][0]:
        return sum(math.prod(b - a for a, b in zip(lo, hi, strict=True)) for lo, hi in boxes[:1])
    if len(boxes[0][0]) == 1:  # intervals: joined in order
        total, end = 0, boxes[0][0][0]
        for (lo,), (hi,) in boxes:
            total += max(0, hi - max(lo, end))
            end = max(end, hi)
        return total
    cuts = sorted({lo[0] for lo, _ in boxes} | {hi[0] for _, hi in boxes})
    total, next_box = 0, 0
    over: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # boxes over this stretch
    for start, end in zip(cuts, cuts[1:]):
        over = [box for box in over if box[1][0] > start]
        while next_box < len(boxes) and boxes[next_box][0][0] == start:
            over.append(boxes[next_box])
            next_box += 1
        if over:
            rest = sorted({(lo[1:], hi[1:]) for lo, hi in over})
            total += (end - start) * _union_volume(rest)
    return total


# --- a few boxes ----------------------------------------------------------------------


def merged(boxes: Iterable[Box]) -> tuple[Box, ...]:
    """At most MAX_BOXES disjoint boxes that hold every box of `boxes`: those that
    together make a box joined, overlapping ones replaced by their bounding box, and
    while there are too many, the two whose bounding box adds the fewest elements."""
    found = _joined(set(boxes))
    if len(found) > MAX_CANDIDATES:
        return (_hull(found),)
    return _few(tuple(found))


# The same boxes come again (each memref that a rank's tasks touch alike, each candidate
# placement, then the lowering's): chosen once. Their order breaks ties: it is part of
# the key. After `_joined`, so that a key holds at most MAX_CANDIDATES boxes.
@lru_cache(maxsize=256)
def _few(boxes: tuple[Box, ...]) -> tuple[Box, ...]:
    return tuple(sorted(_fewest(boxes), key=lambda box: (box.lo, box.hi)))


def _joined(boxes: set[Box]) -> list[Box]:
    """`boxes` with every two that touch or overlap along one dimension and agree in the
    others joined, until no such pair is left (bands of rows become one block)."""
    found = list(boxes)
    changed = True
    while changed and found:
        changed = False
        for d in range(len(found[0].lo)):
            joined = _joined_along(found, d)
            changed = changed or len(joined) < len(found)
            found = joined
    return found


def _joined_along(boxes: list[Box], d: int) -> list[Box]:
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[Box]] = {}
    for box in boxes:
        key = (box.lo[:d] + box.lo[d + 1 :], box.hi[:d] + box.hi[d + 1 :])
        groups.setdefault(key, []).append(box)
    out: list[Box] = []
    for group in groups.values():
        group.sort(key=lambda box: box.lo[d])
        current = group[0]
        for box in group[1:]:
            if box.lo[d] <= current.hi[d]:
                hi = max(current.hi[d], box.hi[d])
                current = Box(current.lo, (*current.hi[:d], hi, *current.hi[d + 1 :]))
            else:
                out.append(current)
                current = box
        out.append(current)
    return out


def _fewest(boxes: Sequence[Box]) -> list[Box]:
    """`boxes` with overlapping ones replaced by their bounding box, then while more than
    MAX_BOXES are left, the two whose bounding box adds the fewest elements, and so on.

    Each box gets a number, its place in `boxes`, a new one the next: the pair merged
    is the first, by numbers, of those that overlap, else of those that waste least
    (the choice of looking at every pair again in that order after each merge). Heaps
    hold the pairs, and one with a box merged since is skipped when it comes up: a
    merge costs the new box's pairs, not all of them again."""
    live = dict(enumerate(boxes))
    sizes = {k: volume(box) for k, box in live.items()}
    overlaps = [(i, j) for (i, a), (j, b) in combinations(live.items(), 2) if _overlap(a, b)]
    wastes: list[tuple[int, int, int]] | None = None  # (waste, i, j): once needed
    new = len(live)
    while True:
        pair = _first_live(overlaps, live)
        if pair is None and len(live) > MAX_BOXES:
            if wastes is None:
                wastes = [
                    (_hull_volume(a, b) - sizes[i] - sizes[j], i, j)
                    for (i, a), (j, b) in combinations(live.items(), 2)
                ]
                heapify(wastes)
            pair = _first_live(wastes, live)
        if pair is None:
            return list(live.values())
        box = _hull([live.pop(pair[0]), live.pop(pair[1])])
        sizes[new] = size = volume(box)
        for k, other in live.items():
            if _overlap(other, box):
                heappush(overlaps, (k, new))
            if wastes is not None:
                heappush(wastes, (_hull_volume(other, box) - sizes[k] - size, k, new))
        live[new] = box
        new += 1


def _first_live(pairs: list[_Pair], live: Mapping[int, Box]) -> tuple[int, int] | None:
    """The numbers of the first pair of the heap `pairs` (popped) whose two boxes (its
    last two numbers) are both in `live`; None when none is."""
    while pairs:
        pair = heappop(pairs)
        if pair[-2] in live and pair[-1] in live:
            return pair[-2], pair[-1]
    return None


def _overlap(a: Box, b: Box) -> bool:
    return all(max(x, y) < min(u, v) for x, y, u, v in zip(a.lo, b.lo, a.hi, b.hi, strict=True))


def _hull(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    lo = tuple(min(values) for values in zip(*(b.lo for b in boxes), strict=True))
    hi = tuple(max(values) for values in zip(*(b.hi for b in boxes), strict=True))
    return Box(lo, hi)


def _hull_volume(a: Box, b: Box) -> int:
    """Elements of the bounding box of a and b (the waste of merging them, disjoint, is
    this less theirs)."""
    out = 1
    for x, y, u, v in zip(a.lo, b.lo, a.hi, b.hi, strict=True):
        out *= max(u, v) - min(x, y)
    return out


# --- memrefs that stay whole ----------------------------------------------------------


def _whole_reasons(function: func.FuncOp, args: Sequence[BlockArgument]) -> dict[SSAValue, str]:
    """Why each of `args` that stays whole does: the first reason found."""
    reasons: dict[SSAValue, str] = {}
    for arg in args:
        type_ = arg.type
        if not isinstance(type_, MemRefType):
            reasons[arg] = "its shape is not known (an unranked memref)"
        elif DYNAMIC_INDEX in type_.get_shape():
            reasons[arg] = f"its shape is dynamic ({type_})"
    aliases = _Aliases({arg: memory_of([arg]) for arg in args})
    for op in _host_ops(function):
        for arg, reason in _host_reasons(op, aliases):
            reasons.setdefault(arg, reason)
    return reasons


@dataclass
class _Aliases:
    """Which arguments a value may point into (each value's buffers found once)."""

    memory: dict[BlockArgument, frozenset[object]]
    known: dict[SSAValue, list[BlockArgument]] = field(default_factory=dict)
    buffered: dict[SSAValue, frozenset[object]] = field(default_factory=dict)

    def of(self, value: SSAValue) -> list[BlockArgument]:
        found = self.known.get(value)
        if found is None:
            mine = buffers(value, self.buffered)
            found = [a for a, memory in self.memory.items() if shared(mine, memory)]
            self.known[value] = found
        return found


def _host_reasons(op: Operation, aliases: _Aliases) -> Iterator[tuple[SSAValue, str]]:
    where = _where(op)
    if isinstance(op, ScheduleOp):
        for value in op.args:
            for arg in aliases.of(value):
                if value is not arg:
                    view = f"{_name(value)}, which may be a view of it"
                    yield arg, f"the schedule{where} lists {view}"
        return
    hits = dict.fromkeys(a for value in op.operands for a in aliases.of(value))
    if not hits:
        return
    if _harmless(op):
        yield from _unlisted_uses(op, aliases)
        return
    if _device_setup(op):
        return
    if isinstance(op, func.CallOp):
        what = f"host code, which every rank runs, passes it to @{op.callee.string_value()}"
    else:
        what = f"host code, which every rank runs, uses it ({op.name}"
    for arg in hits:
        yield arg, f"{what}{where})" if "(" in what else f"{what}{where}"


def _device_setup(op: Operation) -> bool:
    """Whether `op` belongs to dhir-gpu-data's making of device buffers (it pairs each
    with its host memref, which the runtime may page-lock as a whole)."""
    current: Operation | None = op
    while current is not None:
        if DEVICE_BUFFER_ATTR in current.attributes:
            return True
        current = current.parent_op()
    return False


def _harmless(op: Operation) -> bool:
    """Whether host op `op` touches no data of its operands and hands on no pointer other
    than as its results, whose uses are checked in turn: views, shape queries, pure
    arithmetic (an address cast to an integer, a select of two memrefs)."""
    return is_view(op) or is_shape_query(op) or is_pure(op)


def _unlisted_uses(op: Operation, aliases: _Aliases) -> Iterator[tuple[SSAValue, str]]:
    """A task that uses a result of `op` pointing into an argument without listing it (an
    address as an integer: a memref it would have to list)."""
    for result in op.results:
        users = [use.operation for use in result.uses if _inside_task(use.operation)]
        if users and not isinstance(result.type, MemRefType):
            for arg in aliases.of(result):
                yield arg, f"a task uses {_name(result)}{_where(users[0])}, an address into it"


def _inside_task(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, TaskOp | func.FuncOp):
        parent = parent.parent_op()
    return isinstance(parent, TaskOp)


def _host_ops(function: func.FuncOp) -> Iterator[Operation]:
    """The ops of `function` outside tasks: schedules and what their bodies hold besides
    tasks (targets) included, tasks not."""
    for op in walk_outside_tasks(function):
        if op is not function and not isinstance(op, TaskOp):
            yield op


def _schedules(function: func.FuncOp) -> Iterator[ScheduleOp]:
    return (op for op in _host_ops(function) if isinstance(op, ScheduleOp))


def _where(op: Operation) -> str:
    loc = loc_of(op)
    return f" at {loc}" if loc is not None else ""


def _name(value: SSAValue) -> str:
    if value.name_hint:
        return value_name(value)
    owner = value.owner
    return f"a result of {owner.name}" if isinstance(owner, Operation) else "a block argument"
