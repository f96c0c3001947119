from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.diagnostics import PassFailedAt
from dhir.placement import RANK_ATTR, rank_of
from dhir.placement.round_robin import round_robin

ALGORITHMS = {"round-robin": round_robin}


@dataclass(frozen=True)
class PlacePass(ModulePass):
    """Give every task an MPI rank (`dhir.rank`), keeping ranks already given."""

    name = "dhir-place"

    ranks: int = 1
    algorithm: str = "round-robin"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.ranks < 1:
            raise PassFailedException(f"dhir-place: ranks must be at least 1, got {self.ranks}")
        place = ALGORITHMS.get(self.algorithm)
        if place is None:
            known = ", ".join(ALGORITHMS)
            raise PassFailedException(
                f"dhir-place: unknown algorithm '{self.algorithm}'; known: {known}"
            )
        for schedule in op.walk():
            if isinstance(schedule, ScheduleOp):
                self._place(schedule, place(schedule, self.ranks))

    def _place(self, schedule: ScheduleOp, ranks: list[int]) -> None:
        for task, rank in zip(schedule.tasks(), ranks, strict=True):
            _check_explicit(task, self.ranks)
            task.attributes[RANK_ATTR] = IntegerAttr(rank, i64)


def _check_explicit(task: TaskOp, ranks: int) -> None:
    rank = rank_of(task)
    if rank is not None and not 0 <= rank < ranks:
        raise PassFailedAt(
            task,
            f"task is placed on rank {rank} ({RANK_ATTR}), but the program runs "
            f"on {ranks} rank{'s' if ranks != 1 else ''} (ranks 0..{ranks - 1})",
        )
