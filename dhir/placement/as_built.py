"""A placed schedule's makespan as the native backend runs it.

The list schedulers (and the simulator replaying their placements) let a rank run its
tasks in any order the dependences allow, and let a transfer overlap the work of both
of its ranks. The program dhir-lower-to-mpi builds is stricter, and this replays it:

- Every rank walks the schedule in program order and runs its own tasks one at a time.
- Before a task, each memref it touches that its rank has no up-to-date copy of comes
  from the memref's last writer (once per rank, as the lowering's valid sets say) in a
  blocking send/recv pair: the transfer starts when both ranks have reached it and
  holds both for its time (`CostModel.comm_time`).
- At the end, memrefs that only rank 0 needs afterwards go there the same way; every
  other memref written on fewer than all ranks is broadcast: every rank waits for the
  slowest, then for the broadcast (`broadcast_time`).

Task times are the graph's (estimated or measured); all ranks start at 0.
"""

from collections.abc import Mapping, Sequence

from xdsl.ir import SSAValue

from dhir.analysis.costs import CostModel, memref_bytes
from dhir.analysis.effects import task_effects
from dhir.dialects.dhir import ScheduleOp
from dhir.placement.from_ir import broadcast_time, rank_of_device, root_only
from dhir.placement.graph import TaskGraph


def as_built_makespan(
    schedule: ScheduleOp,
    graph: TaskGraph,
    assignment: Mapping[str, str],
    devices: Sequence[object],
    costs: CostModel,
    entry: str = "main",
) -> float:
    """The time from the schedule's start to its last rank's end, for `graph` (made by
    `dhir.placement.from_ir.task_graph` from `schedule`, `devices` and `costs`) placed
    as `assignment` says."""
    ranks = len(devices)
    clock = [0.0] * ranks
    position = {value: k for k, value in reversed(list(enumerate(schedule.args)))}
    valid: dict[SSAValue, set[int]] = {value: set(range(ranks)) for value in schedule.args}
    writer: dict[SSAValue, int] = {}

    def transfer(value: SSAValue, source: int, target: int) -> None:
        start = max(clock[source], clock[target])
        clock[source] = clock[target] = start + costs.comm_time(memref_bytes(value.type), devices)
        valid[value].add(target)

    for task, name in zip(schedule.tasks(), graph.tasks, strict=False):
        device = assignment[name]
        rank = rank_of_device(device)
        effects = task_effects(task)
        for value in sorted(effects.touches(), key=position.__getitem__):
            if rank not in valid[value]:
                transfer(value, writer[value], rank)
        clock[rank] += graph.cost[name][device]
        for value in effects.writes:
            valid[value] = {rank}
            writer[value] = rank
    to_root = root_only(schedule, entry)
    for value in sorted(writer, key=position.__getitem__):
        if len(valid[value]) == ranks:
            continue
        if value in to_root:
            if 0 not in valid[value]:
                transfer(value, writer[value], 0)
        else:
            end = max(clock) + broadcast_time(memref_bytes(value.type), devices, costs)
            clock = [end] * ranks
    return max(clock)
