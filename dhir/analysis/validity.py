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
"""

from collections.abc import Iterator, Mapping, Sequence
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
        self.held: dict[SSAValue, list[isl.Set]] = {
            m: [everything(m.type) for _ in range(ranks)] for m in memrefs
        }
        for m, sets in (start or {}).items():
            if m in self.held:
                self.held[m] = list(sets)

    def copy(self) -> "Validity":
        other = Validity([], self.ranks)
        other.held = {m: list(sets) for m, sets in self.held.items()}
        return other

    def meet(self, other: "Validity") -> "Validity":
        """What both hold: the elements valid in `self` and in `other`."""
        out = self.copy()
        for m, sets in out.held.items():
            out.held[m] = [(a & b).coalesce() for a, b in zip(sets, other.held[m], strict=True)]
        return out

    def same(self, other: "Validity") -> bool:
        return all(
            a.is_equal(b)
            for m, sets in self.held.items()
            for a, b in zip(sets, other.held[m], strict=True)
        )

    def everywhere(self, memref: SSAValue) -> bool:
        full = everything(memref.type)
        return all(full.is_subset(s) for s in self.held[memref])

    def bring(self, memref: SSAValue, rank: int, needed: isl.Set) -> list[Transfer]:
        """The transfers that give `rank` the `needed` elements it lacks; it holds them
        afterwards."""
        held = self.held[memref]
        missing = (units(memref.type, needed) - held[rank]).coalesce()
        transfers: list[Transfer] = []
        for source in self._sources(rank):
            if missing.is_empty():
                break
            piece = missing & held[source]
            if piece.is_empty():
                continue
            transfer = self._transfer(memref, source, rank, piece)
            transfers.append(transfer)
            missing = (missing - piece).coalesce()
            held[rank] = (held[rank] | carried(memref, transfer)).coalesce()
        assert missing.is_empty(), "every element is valid on some rank"
        return transfers

    def run_task(
        self, memref: SSAValue, rank: int, reads: isl.Set, writes: isl.Set, musts: isl.Set
    ) -> list[Transfer]:
        """A task on `rank` that reads `reads`, may write `writes` and surely writes
        `musts` of `memref`: the transfers it needs first; afterwards only `rank` holds
        what it wrote."""
        region = self.widen(memref, writes)
        needed = units(memref.type, reads)
        if not region.is_empty():
            surely = musts if divisible(memref.type) else region.empty(region.get_space())
            needed = needed | (region - surely)
        transfers = self.bring(memref, rank, needed) if not needed.is_empty() else []
        self._wrote(memref, rank, region)
        return transfers

    def _wrote(self, memref: SSAValue, rank: int, region: isl.Set) -> None:
        if region.is_empty():
            return
        held = self.held[memref]
        for other in range(self.ranks):
            if other == rank:
                held[other] = (held[other] | region).coalesce()
            else:
                held[other] = (held[other] - region).coalesce()

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
        stale = full.empty(full.get_space())
        for s in held:
            stale = stale | (full - s)
        transfers: list[Transfer] = []
        for source in range(self.ranks):
            if stale.is_empty():
                break
            piece = (stale & held[source]).coalesce()
            if piece.is_empty():
                continue
            transfer = self._transfer(memref, source, None, piece)
            transfers.append(transfer)
            stale = (stale - carried(memref, transfer)).coalesce()
        self.held[memref] = [full for _ in range(self.ranks)]
        return transfers

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
        held = self.held[memref]
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
        return runs

    def writes(self, memref: SSAValue) -> tuple[list[tuple[int, list[Block]]], list[Block]]:
        """How the final contents of `memref` reach a file laid out like it: per rank,
        the blocks it writes (elements it holds up to date, none chosen twice; a block
        may also cover others it holds up to date), and the blocks no rank holds, which
        (with every rank's part given as `start`) no task wrote, so they come unchanged
        from the input."""
        type_ = memref.type
        assert isinstance(type_, MemRefType) and divisible(type_)
        shape = tuple(type_.get_shape())
        full = everything(type_)
        done = full.empty(full.get_space())
        plan: list[tuple[int, list[Block]]] = []
        for rank, holder in enumerate(self.held[memref]):
            piece = (holder - done).coalesce()
            if piece.is_empty():
                continue
            blocks = [b for box in cover(piece, holder) for b in blocks_of(box, shape, holder)]
            plan.append((rank, blocks))
            done = (done | piece).coalesce()
        rest = (full - done).coalesce()
        copies = [b for box in cover(rest, full) for b in blocks_of(box, shape, full)]
        return plan, copies

    def _sources(self, rank: int) -> Iterator[int]:
        """Ranks to take elements from: the nearest after `rank` first, so that pieces
        spread over neighbours rather than all coming from rank 0."""
        for step in range(1, self.ranks):
            yield (rank + step) % self.ranks

    def _transfer(
        self, memref: SSAValue, source: int, dest: int | None, piece: isl.Set
    ) -> Transfer:
        type_ = memref.type
        if not divisible(type_):
            return Transfer(memref, source, dest, None, None)
        assert isinstance(type_, MemRefType)
        holder = self.held[memref][source]
        boxes = cover(piece, holder)
        shape = tuple(type_.get_shape())
        blocks = [b for box in boxes for b in blocks_of(box, shape, holder)]
        return Transfer(memref, source, dest, tuple(boxes), tuple(blocks))


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
