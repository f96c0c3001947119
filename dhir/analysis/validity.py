"""Which rank holds an up-to-date copy of which elements of each memref, and the
transfers that bring a rank the elements a task needs.

A schedule starts with every element valid on every rank (host code is SPMD). A task
on rank R first receives the elements it needs that R lacks, each from a rank that
holds it; then the elements it may write are valid on R only. A transfer carries
boxes (rectangular blocks of elements) that the sender holds, so the receiver never
gets a stale value; since the task also needs every element it may write without
surely writing it, R's copy of its whole write region is right afterwards.

Writes are widened to boxes (the bounding box of each piece), which keeps every
validity set a union of boxes and every transfer a list of blocks; the task then
needs the widened part too. A memref with a dynamic shape is one indivisible unit.

A placement that interleaves rows over the ranks (round-robin, pins) leaves a rank's set a
piece per row, and isl's coalesce and subtract take time growing with the square of a
set's pieces: a whole-set operation at every task made a 1,000-task row program take a
minute. So each memref's sets are cut along the first dimension into slabs of a few
pieces (`Slabs`), and a task's operations touch only the slabs its region reaches; within
a slab, isl does all the set algebra, exactly as on the whole set.
"""

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import islpy as isl
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Attribute, SSAValue

from dhir.analysis.regions import whole

# A box's parts, at most: a needed set cut into more is sent as fewer, larger boxes
# where the sender holds them.
MAX_SPLITS = 4096


@dataclass(frozen=True)
class Box:
    """Elements lo[d] <= x[d] < hi[d] of a memref, in every dimension d."""

    lo: tuple[int, ...]
    hi: tuple[int, ...]

    def as_set(self) -> isl.Set:
        return _box_set(self.lo, self.hi)


@cache
def _box_set(lo: tuple[int, ...], hi: tuple[int, ...]) -> isl.Set:
    names = [f"x{d}" for d in range(len(lo))]
    bounds = [f"{a} <= {n} < {b}" for n, a, b in zip(names, lo, hi, strict=True)]
    return isl.Set(f"{{ [{', '.join(names)}] : {' and '.join(bounds) or 'true'} }}")


@dataclass(frozen=True)
class Block:
    """Elements in memory order (row-major, from the buffer's start): `count2` groups
    `stride2` apart, each of `count` runs `stride` apart, each run `length` long."""

    offset: int
    length: int
    count: int = 1
    stride: int = 0
    count2: int = 1
    stride2: int = 0

    def size(self) -> int:
        return self.length * self.count * self.count2


@dataclass(frozen=True)
class Transfer:
    """`boxes` of `memref` from rank `source` to rank `dest` (every rank when None),
    sent as `blocks`; both are None for the whole buffer (a dynamic shape)."""

    memref: SSAValue
    source: int
    dest: int | None
    boxes: tuple[Box, ...] | None
    blocks: tuple[Block, ...] | None

    def elements(self) -> int | None:
        """Elements sent, or None for a whole buffer of unknown size."""
        if self.blocks is None:
            return None
        return sum(b.size() for b in self.blocks)


def divisible(type_: Attribute) -> bool:
    """Whether transfers may carry parts of a memref of this type (a static shape)."""
    return isinstance(type_, MemRefType) and DYNAMIC_INDEX not in type_.get_shape()


def units(type_: Attribute, region: isl.Set) -> isl.Set:
    """`region` in the space validity is tracked in: the region itself for a static
    shape, the one point of `{ [] }` when it is not empty for a dynamic one."""
    if divisible(type_):
        return region
    return _unit() if not region.is_empty() else _unit().empty(_unit().get_space())


def _unit() -> isl.Set:
    return isl.Set("{ [] }")


def everything(type_: Attribute) -> isl.Set:
    return whole(type_) if divisible(type_) else _unit()


class Validity:
    """Per memref, the elements each rank holds up to date."""

    def __init__(
        self,
        memrefs: Sequence[SSAValue],
        ranks: int,
        start: Mapping[SSAValue, Sequence[isl.Set]] | None = None,
    ) -> None:
        """Every element of `memrefs` valid on every rank, except for those `start`
        gives, per rank, the elements held (a rank holding only part of a memref)."""
        self.ranks = ranks
        self.held: dict[SSAValue, Slabs] = {
            m: Slabs.of([everything(m.type) for _ in range(ranks)]) for m in memrefs
        }
        for m, sets in (start or {}).items():
            if m in self.held:
                self.held[m] = Slabs.of(list(sets))

    def copy(self) -> "Validity":
        other = Validity([], self.ranks)
        other.held = {m: slabs.copy() for m, slabs in self.held.items()}
        return other

    def meet(self, other: "Validity") -> "Validity":
        """What both hold: the elements valid in `self` and in `other`."""
        out = self.copy()
        for m, slabs in out.held.items():
            out.held[m] = slabs.combine(other.held[m], lambda a, b: a & b)
        return out

    def same(self, other: "Validity") -> bool:
        return all(slabs.equal(other.held[m]) for m, slabs in self.held.items())

    def everywhere(self, memref: SSAValue) -> bool:
        slabs = self.held[memref]
        full = everything(memref.type)
        return all(
            slabs.within(k, full).is_subset(s) for k, sets in enumerate(slabs.sets) for s in sets
        )

    def bring(self, memref: SSAValue, rank: int, needed: isl.Set) -> list[Transfer]:
        """The transfers that give `rank` the `needed` elements it lacks; it holds them
        afterwards."""
        held = self.held[memref]
        wanted = units(memref.type, needed)
        missing = (wanted - held.near(rank, wanted)).coalesce()
        transfers: list[Transfer] = []
        for source in self._sources(rank):
            if missing.is_empty():
                break
            piece = missing & held.near(source, missing)
            if piece.is_empty():
                continue
            transfer = self._transfer(memref, source, rank, piece)
            transfers.append(transfer)
            missing = (missing - piece).coalesce()
            held.update(carried(memref, transfer), {rank: _add})
        assert missing.is_empty(), "every element is valid on some rank"
        return transfers

    def run_task(
        self, memref: SSAValue, rank: int, reads: isl.Set, writes: isl.Set, musts: isl.Set
    ) -> list[Transfer]:
        """A task on `rank` that reads `reads`, may write `writes` and surely writes
        `musts` of `memref`: the transfers it needs first; afterwards only `rank` holds
        what it wrote."""
        region = self.widen(memref, writes)
        needed = self._needed(memref, reads, region, musts)
        transfers = self.bring(memref, rank, needed) if not needed.is_empty() else []
        self._wrote(memref, rank, region)
        return transfers

    def needs(self, memref: SSAValue, reads: isl.Set, writes: isl.Set, musts: isl.Set) -> isl.Set:
        """The elements of `memref` a task that reads `reads`, may write `writes` and
        surely writes `musts` needs valid on its rank first (`run_task`): what it reads,
        and what it may write but need not (a partial write leaves the rest as it was)."""
        return self._needed(memref, reads, self.widen(memref, writes), musts)

    def _needed(self, memref: SSAValue, reads: isl.Set, region: isl.Set, musts: isl.Set) -> isl.Set:
        """`needs`, given the writes `widen`ed (`run_task` has them already)."""
        needed = units(memref.type, reads)
        if not region.is_empty():
            surely = musts if divisible(memref.type) else region.empty(region.get_space())
            needed = needed | (region - surely)
        return needed

    def holds(self, memref: SSAValue, rank: int, region: isl.Set) -> bool:
        """Whether `rank` holds every element of `region` of `memref` up to date."""
        wanted = units(memref.type, region)
        return wanted.is_subset(self.held[memref].near(rank, wanted))

    def receive(self, memref: SSAValue, rank: int, region: isl.Set) -> None:
        """`rank` holds `region` of `memref` (a transfer brought it)."""
        if not region.is_empty():
            self.held[memref].update(region, {rank: _add})

    def _wrote(self, memref: SSAValue, rank: int, region: isl.Set) -> None:
        if region.is_empty():
            return
        changes = {other: _add if other == rank else _drop for other in range(self.ranks)}
        self.held[memref].update(region, changes)

    def widen(self, memref: SSAValue, written: isl.Set) -> isl.Set:
        region = units(memref.type, written)
        if not divisible(memref.type) or region.is_empty() or region.is_box():
            return region
        total = region.empty(region.get_space())
        for piece in region.coalesce().get_basic_sets():
            total = total | _bounding(isl.Set.from_basic_set(piece)).as_set()
        return total.coalesce()

    def assemble(self, memref: SSAValue, dest: int | None) -> list[Transfer]:
        """Transfers that leave rank `dest` (every rank when None) with all of `memref`."""
        if dest is not None:
            return self.bring(memref, dest, everything(memref.type))
        held = self.held[memref]
        full = everything(memref.type)
        # Slab by slab, as a whole set would be: a slab's elements never leave it.
        stale: list[isl.Set] = []
        for k, sets in enumerate(held.sets):
            within = held.within(k, full)
            part = within.empty(within.get_space())
            for s in sets:
                part = part | (within - s)
            stale.append(part)
        transfers: list[Transfer] = []
        for source in range(self.ranks):
            if all(part.is_empty() for part in stale):
                break
            pieces = [(k, (part & held.sets[k][source]).coalesce()) for k, part in enumerate(stale)]
            pieces = [(k, piece) for k, piece in pieces if not piece.is_empty()]
            if not pieces:
                continue
            boxes: list[Box] = []
            blocks: list[Block] = []
            for k, piece in pieces:
                found, runs = self._cover(memref, piece, held.sets[k][source])
                boxes += found
                blocks += runs
                sent = _union([box.as_set() for box in found], piece) if found else piece
                stale[k] = (stale[k] - sent).coalesce()
            transfers.append(self._made(memref, source, None, boxes, blocks))
        self.held[memref] = Slabs.of([full for _ in range(self.ranks)])
        return transfers

    def spread(self, memref: SSAValue, region: isl.Set) -> list[Transfer]:
        """Transfers that leave every rank holding `region` of `memref`: as `assemble`
        to every rank where that is all of it; else one broadcast where a rank holds it
        all and several lack it, or each rank brought what it lacks."""
        full = everything(memref.type)
        wanted = units(memref.type, region) & full
        if full.is_subset(wanted):
            return self.assemble(memref, None)
        holders = [r for r in range(self.ranks) if self.holds(memref, r, wanted)]
        if holders and self.ranks - len(holders) > 1:
            transfer = self._transfer(memref, holders[0], None, wanted)
            everyone = {rank: _add for rank in range(self.ranks)}
            self.held[memref].update(carried(memref, transfer), everyone)
            return [transfer]
        return [t for rank in range(self.ranks) for t in self.bring(memref, rank, wanted)]

    def collective(self, memref: SSAValue, dest: int | None) -> list[Block | None] | None:
        """Per rank, the one run of memory it contributes when `memref` is assembled by a
        single collective (a gather to `dest`, or to every rank when None), or None for a
        rank that contributes nothing; None when the stale elements do not split into
        one run per rank that its rank holds (then `assemble` sends pieces)."""
        type_ = memref.type
        if not divisible(type_):
            return None
        assert isinstance(type_, MemRefType)
        shape = tuple(type_.get_shape())
        slabs = self.held[memref]
        held = [slabs.whole(rank) for rank in range(self.ranks)]
        full = everything(type_)
        stale = full.empty(full.get_space())
        for rank, s in enumerate(held):
            if dest is None or rank == dest:
                stale = stale | (full - s)
        runs: list[Block | None] = []
        for source in range(self.ranks):
            piece = (stale & held[source]).coalesce()
            if source == dest or piece.is_empty():
                runs.append(None)
                continue
            first, last = _linear(piece.lexmin(), shape), _linear(piece.lexmax(), shape)
            span = _span(first, last, shape, _row_major(shape))
            if not span.is_subset(held[source]):
                return None
            runs.append(Block(first, last - first + 1))
            stale = (stale - span).coalesce()
        ends = sorted((b.offset, b.offset + b.length) for b in runs if b is not None)
        if not stale.is_empty() or any(a[1] > b[0] for a, b in zip(ends, ends[1:])):
            return None
        for rank in range(self.ranks):
            if dest is None or rank == dest:
                held[rank] = full
        self.held[memref] = Slabs.of(held)
        return runs

    def writes(self, memref: SSAValue) -> tuple[list[tuple[int, list[Block]]], list[Block]]:
        """How the final contents of `memref` reach a file laid out like it: per rank,
        the blocks it writes (elements it holds up to date, none chosen twice; a block
        may also cover others it holds up to date), and the blocks no rank holds, which
        (with every rank's part given as `start`) no task wrote, so they come unchanged
        from the input; each list merged (`merge_blocks`), as each block is a call."""
        type_ = memref.type
        assert isinstance(type_, MemRefType) and divisible(type_)
        shape = tuple(type_.get_shape())
        full = everything(type_)
        slabs = self.held[memref]
        chosen: dict[int, list[Block]] = {}
        copies: list[Block] = []
        # Slab by slab, as a whole set would be: a slab's elements never leave it.
        for k, sets in enumerate(slabs.sets):
            within = slabs.within(k, full)
            done = within.empty(within.get_space())
            for rank, holder in enumerate(sets):
                piece = (holder - done).coalesce()
                if piece.is_empty():
                    continue
                blocks = [b for box in cover(piece, holder) for b in blocks_of(box, shape, holder)]
                chosen.setdefault(rank, []).extend(blocks)
                done = (done | piece).coalesce()
            rest = (within - done).coalesce()
            copies += [b for box in cover(rest, full) for b in blocks_of(box, shape, full)]
        plan = [(rank, merge_blocks(blocks)) for rank, blocks in sorted(chosen.items())]
        return plan, merge_blocks(copies)

    def _sources(self, rank: int) -> Iterator[int]:
        """Ranks to take elements from: the nearest after `rank` first, so that pieces
        spread over neighbours rather than all coming from rank 0."""
        for step in range(1, self.ranks):
            yield (rank + step) % self.ranks

    def _transfer(
        self, memref: SSAValue, source: int, dest: int | None, piece: isl.Set
    ) -> Transfer:
        """`piece` (which `source` holds) sent from `source` to `dest`."""
        boxes: list[Box] = []
        blocks: list[Block] = []
        for part, holder in self.held[memref].parts(source, piece):
            found, runs = self._cover(memref, part, holder)
            boxes += found
            blocks += runs
        return self._made(memref, source, dest, boxes, blocks)

    def _cover(
        self, memref: SSAValue, piece: isl.Set, holder: isl.Set
    ) -> tuple[list[Box], list[Block]]:
        """Boxes covering `piece` within `holder` (what the sender holds of a slab that
        contains `piece`), and their memory blocks."""
        type_ = memref.type
        if not divisible(type_):
            return [], []
        assert isinstance(type_, MemRefType)
        boxes = cover(piece, holder)
        shape = tuple(type_.get_shape())
        return boxes, [b for box in boxes for b in blocks_of(box, shape, holder)]

    def _made(
        self,
        memref: SSAValue,
        source: int,
        dest: int | None,
        boxes: list[Box],
        blocks: list[Block],
    ) -> Transfer:
        if not divisible(memref.type):
            return Transfer(memref, source, dest, None, None)
        return Transfer(memref, source, dest, tuple(boxes), tuple(blocks))


# A slab's sets are coalesced and kept to at most this many pieces each: isl's
# coalesce and subtract take time that grows with the square of a set's pieces, and a
# placement that interleaves rows over the ranks leaves a piece per row.
SLAB_PIECES = 8
# Sets of more pieces are cut before they are coalesced.
COALESCE_PIECES = 4 * SLAB_PIECES

Change = Callable[[isl.Set, isl.Set], isl.Set]


def _add(held: isl.Set, region: isl.Set) -> isl.Set:
    return held | region


def _drop(held: isl.Set, region: isl.Set) -> isl.Set:
    return held - region


class Slabs:
    """Each rank's valid elements of one memref, cut along the first dimension into
    slabs: slab k holds the elements with cuts[k-1] <= x0 < cuts[k] (the first and last
    unbounded), `sets[k][rank]` those of them `rank` holds. A memref whose sets have
    few pieces is one slab (its sets are the coalesced whole); a slab where a rank's set
    has more than SLAB_PIECES pieces is cut in two, so that an operation on a region
    handles only the few pieces of the slabs the region reaches."""

    def __init__(self, cuts: list[int], sets: list[list[isl.Set]]) -> None:
        self.cuts = cuts
        self.sets = sets

    @staticmethod
    def of(held: list[isl.Set]) -> "Slabs":
        """Slabs of the per-rank sets `held`."""
        slabs = Slabs([], [held])
        slabs._settle(0, 0)
        return slabs

    def copy(self) -> "Slabs":
        return Slabs(list(self.cuts), [list(sets) for sets in self.sets])

    def whole(self, rank: int) -> isl.Set:
        """Every element `rank` holds."""
        return _union([sets[rank] for sets in self.sets], self.sets[0][rank])

    def within(self, k: int, region: isl.Set) -> isl.Set:
        """The elements of `region` in slab k."""
        if not self.cuts:
            return region
        lo = self.cuts[k - 1] if k > 0 else None
        hi = self.cuts[k] if k < len(self.cuts) else None
        return region & _rows(region.dim(isl.dim_type.set), lo, hi)

    def near(self, rank: int, region: isl.Set) -> isl.Set:
        """What `rank` holds of the slabs `region` reaches: within them, all it holds."""
        first, last = self._reached(region)
        return _union([sets[rank] for sets in self.sets[first : last + 1]], region)

    def parts(self, rank: int, piece: isl.Set) -> Iterator[tuple[isl.Set, isl.Set]]:
        """`piece`, held by `rank`, slab by slab: each part and what `rank` holds of its
        slab."""
        first, last = self._reached(piece)
        for k in range(first, last + 1):
            part = self.within(k, piece)
            if not part.is_empty():
                yield part, self.sets[k][rank]

    def update(self, region: isl.Set, changes: Mapping[int, Change]) -> None:
        """Apply `changes[rank]` to what each of those ranks holds, with `region`."""
        first, last = self._reached(region)
        if first > last:
            return
        for k in range(first, last + 1):
            part = self.within(k, region)
            sets = self.sets[k]
            for rank, change in changes.items():
                sets[rank] = change(sets[rank], part)
        self._settle(first, last)

    def combine(self, other: "Slabs", change: Change) -> "Slabs":
        """Per rank, `change` of what `self` and `other` hold."""
        mine, theirs = self._refined(other.cuts), other._refined(self.cuts)
        sets = [
            [change(a, b) for a, b in zip(x, y, strict=True)]
            for x, y in zip(mine.sets, theirs.sets, strict=True)
        ]
        out = Slabs(list(mine.cuts), sets)
        out._settle(0, len(sets) - 1)
        return out

    def equal(self, other: "Slabs") -> bool:
        mine, theirs = self._refined(other.cuts), other._refined(self.cuts)
        return all(
            a.is_equal(b)
            for x, y in zip(mine.sets, theirs.sets, strict=True)
            for a, b in zip(x, y, strict=True)
        )

    def _refined(self, cuts: list[int]) -> "Slabs":
        """The same sets in slabs cut at `cuts` as well."""
        every = sorted(set(self.cuts) | set(cuts))
        if every == self.cuts:
            return self
        out = Slabs(every, [])
        for k in range(len(every) + 1):
            lo = every[k - 1] if k > 0 else None
            mine = bisect_right(self.cuts, lo) if lo is not None else 0
            out.sets.append([out.within(k, s) for s in self.sets[mine]])
        return out

    def _reached(self, region: isl.Set) -> tuple[int, int]:
        """The first and last slab `region` reaches (first > last: none; one slab
        is reached by every region, an empty one too, which changes nothing)."""
        if not self.cuts:
            return 0, 0
        if region.is_empty():
            return 0, -1
        lo, hi = region.dim_min_val(0), region.dim_max_val(0)
        first = bisect_right(self.cuts, int(lo.to_python())) if lo.is_int() else 0
        last = bisect_right(self.cuts, int(hi.to_python())) if hi.is_int() else len(self.cuts)
        return first, last

    def _settle(self, first: int, last: int) -> None:
        """Coalesce slabs first..last, cut those with too many pieces and join each with
        its neighbour where together they have few."""
        if not self.cuts:  # one slab: coalesced, and cut only when fragmented
            self.cuts, self.sets = _cut(self.sets[0])
            return
        cuts: list[int] = []
        sets: list[list[isl.Set]] = []
        for k in range(first, last + 1):
            if k > first:
                cuts.append(self.cuts[k - 1])
            inner, pieces = _cut(self.sets[k])
            cuts += inner
            sets += pieces
        self.cuts[first:last] = cuts
        self.sets[first : last + 1] = sets
        k = max(first - 1, 0)
        end = min(first + len(sets), len(self.sets) - 1)
        while k < end:
            pairs = list(zip(self.sets[k], self.sets[k + 1], strict=True))
            if any(a.n_basic_set() + b.n_basic_set() > SLAB_PIECES for a, b in pairs):
                k += 1  # coalescing would leave more than SLAB_PIECES // 2
                continue
            joined = [(a | b).coalesce() for a, b in pairs]
            if max(s.n_basic_set() for s in joined) <= SLAB_PIECES // 2:
                self.sets[k : k + 2] = [joined]
                del self.cuts[k]
                end -= 1
            else:
                k += 1


def _cut(held: list[isl.Set]) -> tuple[list[int], list[list[isl.Set]]]:
    """`held` (the sets of one slab), coalesced and cut in halves along the first
    dimension while a set has more than SLAB_PIECES pieces and cutting lessens them:
    the cuts and the slabs' sets."""
    held = [s.coalesce() if s.n_basic_set() <= COALESCE_PIECES else s for s in held]
    pieces = max(s.n_basic_set() for s in held)
    if pieces <= SLAB_PIECES:
        return [], [held]
    middle = _middle(held)
    if middle is not None:
        dims = held[0].dim(isl.dim_type.set)
        low = [s & _rows(dims, None, middle) for s in held]
        high = [s & _rows(dims, middle, None) for s in held]
        # Where most pieces span the cut (columns, say), cutting only adds pieces.
        if 2 * sum(s.n_basic_set() for s in [*low, *high]) < 3 * sum(s.n_basic_set() for s in held):
            low_cuts, low_sets = _cut(low)
            high_cuts, high_sets = _cut(high)
            return [*low_cuts, middle, *high_cuts], [*low_sets, *high_sets]
    # Uncut, the slab's sets are coalesced whatever it costs, as whole sets were: left
    # as they are, they would gain pieces that coalescing merges.
    return [], [[s.coalesce() if s.n_basic_set() > COALESCE_PIECES else s for s in held]]


def _middle(held: list[isl.Set]) -> int | None:
    """Where to cut a slab whose sets are `held`: the middle of the first dimension's
    span of their elements; None for no cut (one row, unbounded, or no dimension)."""
    if held[0].dim(isl.dim_type.set) == 0:
        return None
    bounds = [(s.dim_min_val(0), s.dim_max_val(0)) for s in held if not s.is_empty()]
    if not all(lo.is_int() and hi.is_int() for lo, hi in bounds):
        return None
    first = min(int(lo.to_python()) for lo, _ in bounds)
    last = max(int(hi.to_python()) for _, hi in bounds)
    return (first + last + 1) // 2 if first < last else None


@cache
def _rows(dims: int, lo: int | None, hi: int | None) -> isl.Set:
    """The elements lo <= x0 < hi (unbounded where None) of a `dims`-dimensional memref."""
    names = ", ".join(f"x{d}" for d in range(dims))
    bounds = [f"{lo} <= x0" if lo is not None else "", f"x0 < {hi}" if hi is not None else ""]
    text = " and ".join(b for b in bounds if b) or "true"
    return isl.Set(f"{{ [{names}] : {text} }}")


def _union(sets: list[isl.Set], like: isl.Set) -> isl.Set:
    """The union of `sets` (empty, in the space of `like`, when there are none),
    joined in pairs: one at a time would copy a growing union each time."""
    if not sets:
        return like.empty(like.get_space())
    while len(sets) > 1:
        pairs = [a | b for a, b in zip(sets[::2], sets[1::2])]
        sets = pairs + sets[len(pairs) * 2 :]
    return sets[0]


def carried(memref: SSAValue, transfer: Transfer, span: bool = False) -> isl.Set:
    """The elements `transfer` makes valid at its receivers; with `span`, every element
    its blocks reach in memory (the elements between a block's runs included)."""
    if transfer.boxes is None or transfer.blocks is None:
        return _unit()
    full = everything(memref.type)
    total = full.empty(full.get_space())
    if not span:
        for box in transfer.boxes:
            total = total | box.as_set()
        return total.coalesce()
    type_ = memref.type
    assert isinstance(type_, MemRefType)
    shape = tuple(type_.get_shape())
    strides = _row_major(shape)
    for block in transfer.blocks:
        last = (
            block.offset
            + (block.count2 - 1) * block.stride2
            + (block.count - 1) * block.stride
            + block.length
            - 1
        )
        total = total | _span(block.offset, last, shape, strides)
    return total.coalesce()


def cover(piece: isl.Set, holder: isl.Set) -> list[Box]:
    """Boxes whose union contains `piece` and lies within `holder` (piece <= holder):
    each piece's bounding box where the holder has all of it, else its halves."""
    boxes: list[Box] = []
    stack = [isl.Set.from_basic_set(b) for b in piece.coalesce().get_basic_sets()]
    splits = 0
    while stack:
        part = stack.pop()
        if part.is_empty():
            continue
        box = _bounding(part)
        if box.as_set().is_subset(holder):
            boxes.append(box)
            continue
        splits += 1
        assert splits < MAX_SPLITS * 64, "a needed piece should be coverable"
        stack.extend(_halves(part, box))
    return boxes


def _bounding(part: isl.Set) -> Box:
    dims = part.dim(isl.dim_type.set)
    lo = tuple(int(part.dim_min_val(d).to_python()) for d in range(dims))
    hi = tuple(int(part.dim_max_val(d).to_python()) + 1 for d in range(dims))
    return Box(lo, hi)


def _halves(part: isl.Set, box: Box) -> list[isl.Set]:
    """`part` cut in two along its first dimension wider than one element."""
    for d, (a, b) in enumerate(zip(box.lo, box.hi, strict=True)):
        if b - a > 1:
            middle = (a + b) // 2
            lo = Box(box.lo, (*box.hi[:d], middle, *box.hi[d + 1 :]))
            hi = Box((*box.lo[:d], middle, *box.lo[d + 1 :]), box.hi)
            return [part & lo.as_set(), part & hi.as_set()]
    raise AssertionError("a one-element box lies within its holder")


def blocks_of(box: Box, shape: tuple[int, ...], holder: isl.Set) -> list[Block]:
    """A box of a row-major buffer as memory blocks: one run when it is contiguous, or
    when the whole span from its first to its last element lies within `holder` (so
    sending the elements between does no harm); else runs with strides."""
    strides = _row_major(shape)
    offset = sum(a * s for a, s in zip(box.lo, strides, strict=True))
    last = sum((b - 1) * s for b, s in zip(box.hi, strides, strict=True))
    partial = [d for d, (a, b) in enumerate(zip(box.lo, box.hi, strict=True)) if b - a != shape[d]]
    inner = partial[-1] if partial else 0
    length = (box.hi[inner] - box.lo[inner]) * strides[inner] if shape else 1
    outer = [d for d in range(inner) if box.hi[d] - box.lo[d] > 1]
    if not outer or _span(offset, last, shape, strides).is_subset(holder):
        return [Block(offset, last - offset + 1)]
    if len(outer) <= 2:
        return [_strided(box, offset, length, outer, strides)]
    blocks: list[Block] = []
    for start in _corners(box, outer[:-2], strides):
        blocks.append(_strided(box, offset + start, length, outer[-2:], strides))
    return blocks


def merge_blocks(blocks: Iterable[Block]) -> list[Block]:
    """The same runs as `blocks`, in fewer blocks: in offset order, runs end to end become
    one run, equally spaced runs of one length one strided block, and equally spaced
    strided blocks of one shape one block with `count2` groups. An interleaved placement
    leaves a rank a box per row; merged, its every R-th row is one block (one call)."""
    merged: list[Block] = []
    for block in sorted(blocks, key=lambda b: b.offset):
        joined = _joined(merged[-1], block) if merged else None
        if joined is None:
            merged.append(block)
        else:
            merged[-1] = joined
    return merged


def _joined(first: Block, then: Block) -> Block | None:
    """One block with the runs of `first` and then those of `then` (at no lower offset),
    or None where no block has exactly those runs."""
    run = first.count == 1 and first.count2 == 1
    if run and then.count == 1 and then.count2 == 1:
        gap = then.offset - first.offset
        if gap == first.length:
            return Block(first.offset, first.length + then.length)
        if gap > first.length and then.length == first.length:
            return Block(first.offset, first.length, 2, gap)
        return None
    if then.length != first.length:
        return None
    if first.count2 == 1 and then.count == 1 and then.count2 == 1:
        if then.offset == first.offset + first.count * first.stride:
            return Block(first.offset, first.length, first.count + 1, first.stride)
        return None
    if then.count2 != 1 or (then.count, then.stride) != (first.count, first.stride):
        return None
    gap = then.offset - first.offset
    if first.count2 == 1 and gap > 0:
        return Block(first.offset, first.length, first.count, first.stride, 2, gap)
    if first.count2 > 1 and gap == first.count2 * first.stride2:
        return Block(
            first.offset, first.length, first.count, first.stride, first.count2 + 1, first.stride2
        )
    return None


def _strided(
    box: Box, offset: int, length: int, outer: list[int], strides: tuple[int, ...]
) -> Block:
    extents = [(box.hi[d] - box.lo[d], strides[d]) for d in outer]
    count, stride = extents[-1]
    count2, stride2 = extents[0] if len(extents) == 2 else (1, 0)
    return Block(offset, length, count, stride, count2, stride2)


def _corners(box: Box, dims: list[int], strides: tuple[int, ...]) -> list[int]:
    """Offsets (from the box's first element) of every index combination over `dims`."""
    starts = [0]
    for d in dims:
        starts = [s + k * strides[d] for s in starts for k in range(box.hi[d] - box.lo[d])]
    return starts


def _linear(point: isl.Set, shape: tuple[int, ...]) -> int:
    """The row-major offset of the one point of `point`."""
    sample = point.sample_point()
    strides = _row_major(shape)
    return sum(
        int(sample.get_coordinate_val(isl.dim_type.set, d).to_python()) * strides[d]
        for d in range(len(shape))
    )


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _span(first: int, last: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> isl.Set:
    names = [f"x{d}" for d in range(len(shape))]
    linear = " + ".join(f"{s}*{n}" for s, n in zip(strides, names, strict=True)) or "0"
    bounds = [f"0 <= {n} < {e}" for n, e in zip(names, shape, strict=True)]
    text = f"{first} <= {linear} <= {last}"
    return isl.Set(f"{{ [{', '.join(names)}] : {' and '.join([*bounds, text])} }}")
