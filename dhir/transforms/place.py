"""`dhir-place`: give every task an MPI rank (`dhir.rank`), keeping ranks already given.

Algorithms: `round-robin` (task k of a schedule on rank k mod N; the pass's default,
so that hand-written expectations stay put), and the cost-driven list schedulers of
`dhir.placement.list_scheduling` (`heft`, `peft`, `best`) on each schedule's task graph
(`dhir.placement.from_ir`): task times estimated from the IR (`dhir.placement.cost_model`),
or measured ones from a profile (`costs=FILE`, as `dhir run --profile FILE` writes
it). `best` takes, of its candidate placements, the one whose makespan as the native
backend runs it is the shortest (`dhir.placement.as_built.fastest_as_built`). `dhir run`
and `dhir compile` use `best` unless told otherwise.
"""

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.handoff import hand_over
from dhir.analysis.profile import Profile, load_profile, unmatched
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import Diagnostic, PassFailedAt
from dhir.ir.tasks import RANK_ATTR, rank_of, task_ids
from dhir.machine.description import Device
from dhir.placement.as_built import place_program
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import local_devices, machine_for, rank_of_device, task_graph
from dhir.placement.list_scheduling import ALGORITHMS
from dhir.placement.round_robin import round_robin


@dataclass(frozen=True)
class PlacePass(ModulePass):
    """Give every task an MPI rank (`dhir.rank`), keeping ranks already given."""

    name = "dhir-place"

    ranks: int = 1
    algorithm: str = "round-robin"
    costs: str | None = None  # a profile whose measured task times replace the estimates

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.ranks < 1:
            raise PassFailedException(f"dhir-place: ranks must be at least 1, got {self.ranks}")
        if self.algorithm not in ALGORITHMS:
            raise PassFailedException(
                f"dhir-place: unknown algorithm '{self.algorithm}'; known: {', '.join(ALGORITHMS)}"
            )
        schedules = [s for s in walk_outside_tasks(op) if isinstance(s, ScheduleOp)]
        profile = load_profile(self.costs) if self.costs else None  # checked in any case
        if profile is not None:
            drop_unmatched(profile, op, str(self.costs))
        if self.algorithm == "round-robin":
            for schedule in schedules:
                place_schedule(schedule, self.ranks)
            return
        devices, model = machine_for(op, self.ranks, profile)
        for schedule in schedules:
            place_schedule(schedule, self.ranks, self.algorithm, model, devices)


def drop_unmatched(profile: Profile, module: ModuleOp, path: str) -> None:
    """Warn about the profile's entries that describe no task of `module` (a name from
    another program, a task measured whole that is now cut, or cut otherwise), and
    leave them out: those tasks keep their estimates."""
    stale = unmatched(profile, task_ids(module).values())
    if not stale:
        return
    for name in stale:
        del profile.tasks[name]
    shown = ", ".join(stale[:8]) + (f" and {len(stale) - 8} more" if len(stale) > 8 else "")
    message = (
        f"{path} has times for tasks this program does not have: {shown}; they are not "
        "used (the names are those `dhir schedule` prints for the same rank count; pieces "
        "measured with another rank count or dhir.split are cut otherwise)"
    )
    print(Diagnostic(message, severity="warning").render(), file=sys.stderr)


def place_schedule(
    schedule: ScheduleOp,
    ranks: int,
    algorithm: str = "round-robin",
    model: CostModel | None = None,
    devices: Sequence[Device] | None = None,
) -> None:
    """Write `dhir.rank` on every task of `schedule`. `devices[R]` is rank R's device
    (default: alike local CPUs); `model` gives the costs (default: estimates)."""
    for task in schedule.tasks():
        _check_explicit(task, ranks)
    if algorithm == "round-robin":
        chosen = round_robin(schedule, ranks)
    else:
        chosen = _by_cost(schedule, ranks, algorithm, model, devices)
    for task, rank in zip(schedule.tasks(), chosen, strict=True):
        task.attributes[RANK_ATTR] = IntegerAttr(rank, i64)


def _by_cost(
    schedule: ScheduleOp,
    ranks: int,
    algorithm: str,
    model: CostModel | None,
    devices: Sequence[Device] | None,
) -> list[int]:
    tasks = list(schedule.tasks())
    if ranks == 1:
        return [0] * len(tasks)  # nothing to choose: skip the analysis
    devices = devices if devices is not None else local_devices(ranks)
    model = model if model is not None else CostModel()
    deps = dependence_graph(schedule)
    hand_over(tasks, deps.effects, deps.regions)
    graph = task_graph(schedule, devices, model, deps=deps)
    assignment = place_program(schedule, graph, devices, model, algorithm, deps).assignment
    return [rank_of_device(assignment[name]) for name in graph.tasks[: len(tasks)]]


def _check_explicit(task: TaskOp, ranks: int) -> None:
    rank = rank_of(task)
    if rank is not None and not 0 <= rank < ranks:
        raise PassFailedAt(
            task,
            f"task is placed on rank {rank} ({RANK_ATTR}), but the program runs "
            f"on {ranks} rank{'s' if ranks != 1 else ''} (ranks 0..{ranks - 1})",
        )
