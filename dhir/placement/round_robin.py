"""The proposal's placement: the k-th task of a schedule runs on rank k mod N.

It is the floor the cost-driven placements must beat; until they land it is the
default. Tasks that already carry a rank keep it.
"""

from dhir.dialects.dhir import ScheduleOp
from dhir.ir.tasks import rank_of


def round_robin(schedule: ScheduleOp, ranks: int) -> list[int]:
    return [
        explicit if (explicit := rank_of(task)) is not None else k % ranks
        for k, task in enumerate(schedule.tasks())
    ]
