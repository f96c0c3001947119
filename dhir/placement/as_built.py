"""A placed schedule's makespan as the native backend runs it.

The list schedulers (and the simulator replaying their placements) let a rank run its
tasks in any order the dependences allow, and let a transfer overlap the work of both
of its ranks. The program dhir-lower-to-mpi builds is stricter, and this replays it:

- Every rank walks the schedule in program order and runs its own tasks one at a time.
- Before a task, the elements it needs that another rank wrote (its dependences'
  counts, from the access regions) come from the writer's rank, once per rank: the
  sender posts the send as soon as it wrote them and goes on (analysis/transfers.py);
  the receiver waits for the writer's task to end, then for the transfer
  (`CostModel.pair_time`: between the two ranks' devices).
- At the end, the writes that stand go to rank 0 the same way for memrefs only rank 0
  needs afterwards; every other written memref is broadcast: every rank waits for the
  slowest, then for the broadcast (`broadcast_time`) of those elements.
- A schedule in a time loop (`step_loop`) is replayed for one step as the loop repeats
  it: nothing is assembled at its end but the elements the loop's host code loads
  (`loaded_regions`, broadcast from their last writers), and before a task, what it
  needs that another rank's task wrote a step before comes from that rank
  (`from_ir.StepFacts`), the facts dhir-lower-to-mpi plans its messages by.

Task times are the graph's (estimated or measured), re-estimated when the placement keeps
fewer ranks busy at once than the schedule is wide; all ranks start at 0.
"""

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from dhir.analysis.dependences import Hazard
from dhir.analysis.dependences import TaskGraph as DependenceGraph
from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.outputs import dead_after, root_only
from dhir.analysis.partition import Storage
from dhir.analysis.work import region_bytes
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.machine.description import Device
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import (
    broadcast_time,
    concurrency,
    depths,
    device_name,
    rank_of_device,
    step_facts,
    task_costs,
)
from dhir.placement.graph import Placement, TaskGraph
from dhir.placement.list_scheduling import ALGORITHMS, best_candidates, timed
from dhir.placement.memory import MemoryLimits, held_in_part, resident

# Candidates whose makespans as built are within this fraction of the shortest count as
# tied; the one whose fullest rank holds least is taken.
MEMORY_TIE = 0.01
# Up to this many tasks, `best` times its candidates without the messages taking the
# outputs each rank writes itself to rank 0. Above it they stay: spreading tasks that
# write an output row by row cuts it into more pieces than the lowering's validity sets
# handle quickly.
JUDGED_UNSENT = 256


def fastest_as_built(
    schedule: ScheduleOp,
    graph: TaskGraph,
    devices: Sequence[Device],
    costs: CostModel,
    entry: str = "main",
    deps: DependenceGraph | None = None,
    fits: Callable[[Mapping[str, str]], bool] | None = None,
    held: Callable[[Mapping[str, str]], int] | None = None,
    called: bool | None = None,
    in_part: Set[SSAValue] = frozenset(),
) -> Placement:
    """Of `best`'s candidate placements (`best_candidates`) that `fits` (all when none
    does), the one whose makespan as built is the shortest; `best`'s own on ties. The
    list schedules let a rank run its tasks out of program order and let transfers
    overlap work, which the built program does not: spreading can lose to one rank when
    its transfers hold both ranks (docs/performance.md). `deps`: the schedule's
    dependence graph, when known already. `held`: the most bytes a rank holds with a
    placement; of the candidates within MEMORY_TIE of the shortest, the one holding
    least wins (an estimate that close is no reason to hold a whole array on one rank).
    `called`: whether a function calls the entry, when known already. `in_part`: the
    outputs each rank writes itself (`held_in_part`), which the replay does not send."""
    candidates = best_candidates(graph)
    if fits is not None:
        candidates = [c for c in candidates if fits(c.assignment)] or candidates
    if len(candidates) == 1:
        return candidates[0]
    replay = _Replay(schedule, graph, devices, costs, entry, deps, called, in_part)
    times = [replay.makespan(placed.assignment) for placed in candidates]
    fastest = min(range(len(candidates)), key=times.__getitem__)
    near = [k for k, t in enumerate(times) if t <= times[fastest] * (1 + MEMORY_TIE)]
    if held is None or len(near) == 1:
        return candidates[fastest]
    return candidates[min(near, key=lambda k: (held(candidates[k].assignment), times[k], k))]


def place_program(
    schedule: ScheduleOp,
    graph: TaskGraph,
    devices: Sequence[Device],
    costs: CostModel,
    algorithm: str,
    deps: DependenceGraph | None = None,
    limits: MemoryLimits | None = None,
    storage: Callable[[], Storage | None] | None = None,
    called: bool | None = None,
    entry: str = "main",
) -> Placement:
    """A program's schedule placed as dhir-place places it: by `algorithm` (a key of
    `ALGORITHMS`) on its task graph, `best` taking the fastest of its candidates as built.
    With `limits`, what each rank holds fits its device's memory (`best` takes the fastest
    candidate that fits; else `MemoryLimits.settle` moves tasks, or refuses). `storage`:
    the program's memrefs as the ranks hold them (dhir.placement.memory.program_storage),
    found when needed, for `best` to break near ties by memory. `called`: whether a
    function calls the entry (`entry`, whose outputs go to rank 0), when known already."""
    tasks = list(schedule.tasks())
    names = graph.tasks[: len(tasks)]

    def ranks(assignment: Mapping[str, str]) -> dict[TaskOp, int]:
        return dict(zip(tasks, _ranks_of(assignment, names), strict=True))

    def fits(assignment: Mapping[str, str]) -> bool:
        return limits is None or limits.fits(schedule, ranks(assignment))

    def found() -> Storage | None:
        return limits.storage if limits is not None else storage() if storage else None

    def held(assignment: Mapping[str, str]) -> int:
        held_now = found()
        return max(resident(held_now, ranks(assignment)), default=0) if held_now else 0

    if algorithm == "best":
        placed = fastest_as_built(
            schedule,
            graph,
            devices,
            costs,
            entry,
            deps=deps,
            fits=fits if limits else None,
            held=held,
            called=called,
            in_part=_unsent(schedule, len(tasks), costs, devices, entry, found),
        )
    else:
        placed = ALGORITHMS[algorithm](graph)
    if limits is None:
        return placed
    chosen = list(ranks(placed.assignment).values())
    settled = limits.settle(
        schedule, chosen, lambda k, rank: graph.can_run(names[k], device_name(rank))
    )
    if settled == chosen:
        return placed
    moved = dict(placed.assignment) | {n: device_name(r) for n, r in zip(names, settled)}
    return timed(graph, moved)


def _unsent(
    schedule: ScheduleOp,
    count: int,
    costs: CostModel,
    devices: Sequence[Device],
    entry: str,
    storage: Callable[[], Storage | None],
) -> frozenset[SSAValue]:
    """The outputs `best` judges its candidates without sending (JUDGED_UNSENT)."""
    module = schedule.get_toplevel_object()
    if count > JUDGED_UNSENT or not isinstance(module, Operation):
        return frozenset()
    return held_in_part(module, entry, storage, costs.nodes(devices))


def as_built_makespan(
    schedule: ScheduleOp,
    graph: TaskGraph,
    assignment: Mapping[str, str],
    devices: Sequence[Device],
    costs: CostModel,
    entry: str = "main",
    in_part: Set[SSAValue] = frozenset(),
    deps: DependenceGraph | None = None,
) -> float:
    """The time from the schedule's start to its last rank's end, for `graph` (made by
    `dhir.placement.from_ir.task_graph` from `schedule`, `devices` and `costs`) placed
    as `assignment` says. `deps`: the schedule's dependence graph, when known already."""
    replay = _Replay(schedule, graph, devices, costs, entry, deps, in_part=in_part)
    return replay.makespan(assignment)


@dataclass(frozen=True)
class Transfer:
    """A message as built: from `source`'s rank to `target`'s (None: to rank 0 after the
    schedule), from `begin` to `end` seconds, `nbytes` long."""

    source: str
    target: str | None
    begin: float
    end: float
    nbytes: int


@dataclass(frozen=True)
class Timeline:
    """A placement as built: each task's start and finish, the messages, the end."""

    placement: Placement
    transfers: list[Transfer]
    makespan: float
    # A time loop's step's end: from each last writer of the elements the loop's host
    # code loads, a message to every other rank (target None), as MPI_Bcast counts it.
    spreads: list[Transfer] = field(default_factory=list[Transfer])


def as_built_timeline(
    schedule: ScheduleOp,
    graph: TaskGraph,
    assignment: Mapping[str, str],
    devices: Sequence[Device],
    costs: CostModel,
    entry: str = "main",
    in_part: Set[SSAValue] = frozenset(),
    deps: DependenceGraph | None = None,
) -> Timeline:
    """As `as_built_makespan`, with when each task runs and each message."""
    replay = _Replay(schedule, graph, devices, costs, entry, deps, in_part=in_part)
    return replay.timeline(assignment)


class _Replay:
    """What the replay of one schedule needs whatever the placement: each task's memrefs
    in the lowering's order, what moving each memref costs, and which go to rank 0 only.

    The graph's task times assume as many ranks busy at once as the schedule is wide
    (`concurrency`). A placement that keeps a level's tasks on fewer ranks leaves the
    others idle: the replay then times the tasks for the most ranks the placement keeps
    busy at one depth (a wide fork-join kept on one rank of two was estimated 46% too
    slow as if the idle rank competed for memory). `in_part`: the entry's memref
    arguments the ranks hold in part (Storage.in_part): each rank writes its part of
    such an output to the result files, nothing goes to rank 0. Placement itself keeps
    the message in its model above JUDGED_UNSENT tasks."""

    def __init__(
        self,
        schedule: ScheduleOp,
        graph: TaskGraph,
        devices: Sequence[Device],
        costs: CostModel,
        entry: str,
        deps: DependenceGraph | None = None,
        called: bool | None = None,
        in_part: Set[SSAValue] = frozenset(),
    ) -> None:
        self.schedule = schedule
        self.graph = graph
        self.devices = devices
        self.costs = costs
        self.ranks = len(devices)
        self.args = list(schedule.args)
        position = {value: k for k, value in reversed(list(enumerate(self.args)))}
        deps = deps if deps is not None else dependence_graph(schedule)
        self.depths = depths(deps)
        self.busy = min(concurrency(deps), self.ranks)
        self.times: dict[int, dict[str, dict[str, float]]] = {self.busy: graph.cost}
        # The schedule's tasks (the graph's names end with END_TASK, which has none).
        self.names = list(graph.tasks[: len(deps.effects)])
        # With a machine description, each transfer is timed between its two ranks: one
        # between CPU ranks crosses no GPU's host link, nor the network inside a node.
        self.by_pair = costs.transfer is not None
        self.incoming: list[list[tuple[int, SSAValue, int, float]]] = [[] for _ in self.names]
        for dep in deps.dependences:
            if dep.hazard != Hazard.WAR and dep.elements != 0:
                nbytes = region_bytes(dep.memref, dep.elements)
                seconds = costs.comm_time(nbytes, devices)
                self.incoming[dep.after].append((dep.before, dep.memref, nbytes, seconds))
        self.to_root = root_only(schedule, entry, called)
        # Nothing moves at the end: a buffer dead after it, an output each rank writes.
        unsent = dead_after(schedule, schedule.args) | (self.to_root & set(in_part))
        self.finals = {
            value: [(k, region_bytes(value, count)) for k, count in writes]
            for value, writes in deps.final_counts().items()
            if value not in unsent
        }
        self.position = position
        # In a time loop, its data is assembled once after the loop, not every step: a
        # step ends bringing the elements its host code loads to every rank, and its
        # tasks take what the step before wrote on other ranks.
        self.step = step_facts(schedule, deps)
        if self.step is not None:
            self.finals = {}

    def makespan(self, assignment: Mapping[str, str]) -> float:
        return self._replayed(assignment, None)[2]

    def timeline(self, assignment: Mapping[str, str]) -> "Timeline":
        """When each task runs, and each message between ranks, as built."""
        moves: list[Transfer] = []
        spreads: list[Transfer] = []
        start, finish, end = self._replayed(assignment, moves, spreads)
        placement = Placement(
            dict(assignment), dict(zip(self.names, start)), dict(zip(self.names, finish))
        )
        return Timeline(placement, moves, end, spreads)

    def _replayed(
        self,
        assignment: Mapping[str, str],
        moves: list[Transfer] | None,
        spreads: list[Transfer] | None = None,
    ) -> tuple[list[float], list[float], float]:
        """Each task's start and finish, and the end; each message added to `moves`, and
        each of a time loop's step's end to `spreads` (None: not recorded, for
        `makespan`, which judges every candidate)."""
        ranks = self.ranks
        cost = self._task_times(assignment)
        clock = [0.0] * ranks
        placed = _ranks_of(assignment, self.names)
        start = [0.0] * len(self.names)
        finish = [0.0] * len(self.names)
        received: set[tuple[int, SSAValue, int]] = set()
        carried = self._carried(placed)
        for k, name in enumerate(self.names):
            rank = placed[k]
            for before, nbytes in carried[k]:
                # Written a step before: sent at that step's end, no wait for the writer.
                seconds = self._seconds(nbytes, placed[before], rank)
                begin = clock[rank]
                clock[rank] = begin + seconds
                if moves is not None:
                    moves.append(Transfer(self.names[before], name, begin, clock[rank], nbytes))
            for before, value, nbytes, seconds in self.incoming[k]:
                if placed[before] != rank and (before, value, rank) not in received:
                    if self.by_pair:
                        seconds = self._pair(nbytes, placed[before], rank)
                    begin = max(clock[rank], finish[before])
                    clock[rank] = begin + seconds
                    if moves is not None:
                        moves.append(Transfer(self.names[before], name, begin, clock[rank], nbytes))
                    received.add((before, value, rank))
            start[k] = clock[rank]
            clock[rank] += cost[name][assignment[name]]
            finish[k] = clock[rank]
        for value in sorted(self.finals, key=self.position.__getitem__):
            writes = self.finals[value]
            if ranks == 1 or not writes:
                continue
            if value in self.to_root:
                for k, nbytes in writes:
                    if placed[k] != 0:
                        seconds = (
                            self._pair(nbytes, placed[k], 0)
                            if self.by_pair
                            else self.costs.comm_time(nbytes, self.devices)
                        )
                        begin = max(clock[0], finish[k])
                        clock[0] = begin + seconds
                        if moves is not None:
                            moves.append(Transfer(self.names[k], None, begin, clock[0], nbytes))
            else:
                total = sum(nbytes for _, nbytes in writes)
                end = max(clock) + broadcast_time(total, self.devices, self.costs)
                clock = [end] * ranks
        if self.step is not None and ranks > 1:
            clock = self._share(clock, finish, spreads)
        return start, finish, max(clock)

    def _carried(self, placed: Sequence[int]) -> list[list[tuple[int, int]]]:
        """Per task, the bytes it takes of what another rank's task wrote a step before
        (`StepFacts.carried`), once per writer, memref and rank; none where its rank took
        them during that step (a later task of its rank needed them then), or holds them."""
        found: list[list[tuple[int, int]]] = [[] for _ in self.names]
        if self.step is None:
            return found
        taken = {
            (before, value, placed[k])
            for k, incoming in enumerate(self.incoming)
            for before, value, _, _ in incoming
            if placed[before] != placed[k]
        }
        asked: set[tuple[int, SSAValue, int]] = set()
        for k, carried in enumerate(self.step.carried):
            for before, value, nbytes in carried:
                key = (before, value, placed[k])
                if placed[before] == placed[k] or key in taken or key in asked:
                    continue
                asked.add(key)
                found[k].append((before, nbytes))
        return found

    def _share(
        self, clock: list[float], finish: Sequence[float], spreads: list[Transfer] | None
    ) -> list[float]:
        """Each rank's clock once a step's end brought the elements the loop's host code
        loads to every rank, one broadcast per last writer (`StepFacts.shared`)."""
        assert self.step is not None
        for value in sorted(self.step.shared, key=self.position.__getitem__):
            for k, nbytes in self.step.shared[value]:
                begin = max(max(clock), finish[k])
                end = begin + broadcast_time(nbytes, self.devices, self.costs)
                clock = [end] * self.ranks
                if spreads is not None:
                    spreads.append(Transfer(self.names[k], None, begin, end, nbytes))
        return clock

    def _seconds(self, nbytes: int, source: int, target: int) -> float:
        if self.by_pair:
            return self._pair(nbytes, source, target)
        return self.costs.comm_time(nbytes, self.devices)

    def _pair(self, nbytes: int, source: int, target: int) -> float:
        return self.costs.pair_time(nbytes, self.devices[source], self.devices[target])

    def _task_times(self, assignment: Mapping[str, str]) -> dict[str, dict[str, float]]:
        """Task times for the most ranks `assignment` keeps busy at one depth."""
        at_depth: dict[int, set[str]] = {}
        for name, depth in zip(self.names, self.depths, strict=True):
            at_depth.setdefault(depth, set()).add(assignment[name])
        busy = min(self.busy, max((len(used) for used in at_depth.values()), default=1))
        if busy not in self.times:
            tasks = list(self.schedule.tasks())
            self.times[busy] = task_costs(tasks, self.names, self.devices, self.costs, busy)
        return self.times[busy]


def _ranks_of(assignment: Mapping[str, str], names: Sequence[str]) -> list[int]:
    """The rank of each of `names` in `assignment`, each device's name read once."""
    ranks: dict[str, int] = {}
    return [
        ranks[device] if device in ranks else ranks.setdefault(device, rank_of_device(device))
        for device in map(assignment.__getitem__, names)
    ]
