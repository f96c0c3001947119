"""Shardings on a schedule's memrefs as placement hints.

A schedule may say how its memref operands are laid out over the ranks, with the shard
dialect's split axes, one per operand:

    dhir.schedule %a, %b attributes {dhir.shardings = [#shard<axisarray[[0]]>,
                                                        #shard<axisarray[[]]>]} { ... }

The ranks form a 1-D grid (axis 0). `[[0]]` splits an operand's rows evenly over the
ranks, rank R holding rows [R n / ranks, (R + 1) n / ranks); `[[]]` leaves it unsplit.
dhir-place then gives each task that writes rows of a split operand within one rank's
block that rank (the first such operand decides), and places the rest as it would;
partitioned storage follows the placement, so each rank holds the rows its tasks use.
dhir holds arrays in row blocks, so only the first dimension can be split.
"""

from xdsl.dialects.builtin import ArrayAttr, MemRefType
from xdsl.ir import Attribute, SSAValue

from dhir.analysis.regions import row_span, task_regions
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.dialects.shard import ShardAxesArrayAttr
from dhir.ir.diagnostics import error_at

SHARDINGS_ATTR = "dhir.shardings"


def hinted_ranks(schedule: ScheduleOp, ranks: int) -> dict[TaskOp, int]:
    """The rank each task of `schedule` gets from the shardings its operands carry (see
    the module docstring); tasks the hints say nothing about are left out."""
    split = _split_operands(schedule)
    if not split:
        return {}
    chosen: dict[TaskOp, int] = {}
    for task in schedule.tasks():
        regions = task_regions(task)
        for memref in split:
            if memref not in regions.writes:
                continue
            rank = _block_of(row_span(regions.written(memref), memref), memref, ranks)
            if rank is not None:
                chosen[task] = rank
                break
    return chosen


def _split_operands(schedule: ScheduleOp) -> list[SSAValue]:
    attr = schedule.attributes.get(SHARDINGS_ATTR)
    if attr is None:
        return []
    operands = list(schedule.operands)
    if not isinstance(attr, ArrayAttr) or len(attr.data) != len(operands):
        raise error_at(
            schedule,
            f"{SHARDINGS_ATTR} must list one #shard<axisarray[...]> per schedule operand "
            f"({len(operands)} here)",
        )
    split: list[SSAValue] = []
    for index, (operand, axes) in enumerate(zip(operands, attr.data)):
        if _rows_split(schedule, axes):
            _check_has_rows(schedule, operand, index)
            split.append(operand)
    return split


def _check_has_rows(schedule: ScheduleOp, operand: SSAValue, index: int) -> None:
    """Refuse a row split of an operand without rows: the blocks of rows are what a split
    hands out, so a scalar or a 0-d memref cannot be split."""
    if isinstance(operand.type, MemRefType) and operand.type.get_shape():
        return
    name = f" %{operand.name_hint}" if operand.name_hint else ""
    raise error_at(
        schedule,
        f"{SHARDINGS_ATTR}: operand #{index}{name} ({operand.type}) has no rows to split over the "
        "ranks; give it #shard<axisarray[[]]> (not split)",
    )


def _rows_split(schedule: ScheduleOp, axes: Attribute) -> bool:
    """Whether `axes` splits the rows over the ranks ([[0]]); False for unsplit ([[]])."""
    if isinstance(axes, ShardAxesArrayAttr):
        split = [tuple(a.get_values()) for a in axes.axes.data]
        if all(not a for a in split):
            return False
        if split[0] == (0,) and all(not a for a in split[1:]):
            return True
    raise error_at(
        schedule,
        f"{SHARDINGS_ATTR}: {axes} is not a sharding dhir can follow; dhir holds arrays in "
        "row blocks over all ranks, so an operand is either #shard<axisarray[[0]]> (rows "
        "split over the ranks) or #shard<axisarray[[]]> (not split)",
    )


def _block_of(span: tuple[int, int] | None, memref: SSAValue, ranks: int) -> int | None:
    """The rank whose block of rows holds all of `span`, if one does."""
    if span is None or span[0] >= span[1]:
        return None
    rows = memref.type.get_shape()[0]  # pyright: ignore[reportAttributeAccessIssue]
    for rank in range(ranks):
        low, high = rank * rows // ranks, (rank + 1) * rows // ranks
        if low <= span[0] and span[1] <= high:
            return rank
    return None
