"""Deciding which MPI rank runs each task.

The decision is recorded on each task as `dhir.rank = R : i64`; a rank written there
by the user (or a test) is honoured, so any placement can be forced.
"""

from xdsl.dialects.builtin import IntegerAttr

from dhir.dialects.dhir import TaskOp

RANK_ATTR = "dhir.rank"


def rank_of(task: TaskOp) -> int | None:
    attr = task.attributes.get(RANK_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else None
