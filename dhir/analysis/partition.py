"""Which memref arguments of the entry each rank holds only in part, and which part: the
rows (ranges of the first dimension, every other dimension whole) that hold every
element its tasks read or write (dhir.analysis.footprint), halos included.

Row ranges, rather than the footprint's boxes, because they keep the memref's row-major
layout: a rank reserves the rows from its first range's start to its last range's end,
the descriptor's aligned pointer stands that many rows before them, and every task body,
message and write keeps its global subscripts and offsets (docs/semantics.md,
"Partitioned storage"); rows between ranges are reserved but never touched, so they take
no memory. The lowering starts each rank's validity from its rows (`loaded`): a message
then only carries elements its sender holds.

A memref stays whole where the lowering could not keep it in part: the footprint's
reasons (dynamic shape, host code, views, unlisted addresses), one rank, no dimension, a
layout other than the identity, a GPU task using it (device copies are whole), not
exactly one schedule listing it, or a schedule after which the memref is needed on more
than rank 0 (`final_to_root`: the lowering's, see dhir.analysis.outputs.root_only).
"""

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

import islpy as isl
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, NoneAttr
from xdsl.ir import SSAValue

from dhir.analysis.footprint import Whole, footprint
from dhir.analysis.validity import Box
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.ir.tasks import is_gpu_task

# Rows lo <= r < hi of the first dimension.
Band = tuple[int, int]
# A rank's rows of a memref: sorted ranges, apart from each other; none for no rows.
Rows = tuple[Band, ...]


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
                f"rank {r} rows {describe(rows)}" for r, rows in enumerate(self.bands[index])
            )
            out.append(f"{name}: partitioned, {ranks}")
        return out


def row_bands(
    function: func.FuncOp,
    ranks: int,
    final_to_root: Set[SSAValue],
    placement: Mapping[TaskOp, int] | None = None,
) -> Partition:
    """The bands of the memref arguments of `function` (the entry) on `ranks` ranks, with
    tasks placed as `placement` says, else as their `dhir.rank` says. `final_to_root`:
    the memrefs that, after the one schedule listing them (or its time loop), only rank 0
    needs."""
    found = footprint(function, ranks, placement)
    entry = function.body.blocks.first
    args = list(entry.args) if entry is not None else []
    listing = _listing(function)
    bands: dict[int, tuple[Rows, ...]] = {}
    whole: dict[int, Whole] = {}
    for memref in found.memrefs:
        arg = args[memref.index]
        reason = memref.whole or _reason(arg, ranks, listing.get(arg, []), final_to_root)
        if reason is not None:
            whole[memref.index] = reason
            continue
        rows = tuple(_rows(part) for part in memref.parts if not isinstance(part, Whole))
        extent = memref.shape[0] if memref.shape else 0
        if all(r == ((0, extent),) for r in rows):
            whole[memref.index] = Whole("every rank's tasks touch all its rows")
            continue
        bands[memref.index] = rows
    return Partition(ranks, bands, whole)


def _listing(function: func.FuncOp) -> dict[SSAValue, list[ScheduleOp]]:
    out: dict[SSAValue, list[ScheduleOp]] = {}
    for op in walk_outside_tasks(function):
        if isinstance(op, ScheduleOp):
            for value in dict.fromkeys(op.operands):
                out.setdefault(value, []).append(op)
    return out


def _reason(
    arg: SSAValue, ranks: int, schedules: list[ScheduleOp], final_to_root: Set[SSAValue]
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
    if any(is_gpu_task(t) and arg in t.memrefs for t in schedules[0].tasks()):
        return Whole("a GPU task uses it (device copies are whole)")
    if arg not in final_to_root:
        return Whole("code after its schedule needs it on every rank")
    return None


def _rows(boxes: tuple[Box, ...]) -> Rows:
    """The first-dimension ranges of `boxes`, sorted, those that touch or overlap joined."""
    out: list[Band] = []
    for lo, hi in sorted((b.lo[0], b.hi[0]) for b in boxes):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def describe(rows: Rows) -> str:
    """`0..9, 20..29` (inclusive), or `none`."""
    return ", ".join(f"{lo}..{hi - 1}" for lo, hi in rows) or "none"


def loaded(rows: Rows, shape: Sequence[int]) -> isl.Set:
    """The elements of a memref of `shape` in `rows`."""
    rest = tuple(shape[1:])
    total = Box((0, *(0 for _ in rest)), (0, *rest)).as_set()
    for lo, hi in rows:
        total = total | Box((lo, *(0 for _ in rest)), (hi, *rest)).as_set()
    return total.coalesce()
