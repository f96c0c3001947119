"""What a placement keeps resident on each device over time, and placement that fits it.

The model, for a `TaskGraph` with `memory` and `capacity` (graph.py): task T's `memory[T]`
bytes (its data) are resident on T's device from T's start until the last of its
successors finishes, wherever they run (to the end of the schedule for a task without
successors: its results stay). A successor S on another device also holds a copy of them
while it runs, from S's start to its finish. A device's resident bytes at a time are the
sum over what is resident there; a placement fits when no device ever holds more than its
capacity. Tasks sharing a device thus add up, unlike the per-task check of graph.py.

`fitting(algorithm)` makes any placement algorithm keep to it. A task whose data and its
inputs' exceed every device that can run it makes the graph unable to fit whatever the
placement: a DhirError names it. Otherwise it places, finds the first moment a device
holds too much, sends one task whose data is there then to its other device with the most
room (the largest whose data only waits there, not in use), and places again, until the
placement fits; when nothing can move, or after a bounded number of rounds, a DhirError
names the device, the bytes it would hold and its capacity (that graph may still fit some
other way: the search is a heuristic). Data is never evicted to make room (so no eviction
transfers are paid): a placement needing it is avoided instead.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.placement.graph import Placement, TaskGraph
from dhir.units import bytes_words

# At most this many rounds of placing (each places the whole graph) before giving up.
MAX_ROUNDS = 200


@dataclass(frozen=True)
class Resident:
    """`task`'s data resident on `device` over [begin, end), there because `owner` runs
    there: `task` itself, or a successor holding a copy while it runs."""

    task: str
    device: str
    begin: float
    end: float
    nbytes: float
    owner: str


@dataclass(frozen=True)
class Overflow:
    """The first time `device` holds more than its capacity, and what it holds then."""

    device: str
    time: float
    held: float
    capacity: float
    resident: tuple[Resident, ...]


def residents(graph: TaskGraph, placement: Placement) -> list[Resident]:
    """Everything `placement` keeps resident, per the model above."""
    end_of_schedule = placement.makespan
    found: list[Resident] = []
    for task in graph.tasks:
        nbytes = graph.memory.get(task, 0.0)
        if nbytes <= 0:
            continue
        device, start = placement.assignment[task], placement.start[task]
        consumers = [edge.target for edge in graph.successors(task)]
        release = max((placement.finish[c] for c in consumers), default=end_of_schedule)
        release = max(release, placement.finish[task])
        found.append(Resident(task, device, start, release, nbytes, task))
        for consumer in consumers:
            where = placement.assignment[consumer]
            if where != device:
                begin, end = placement.start[consumer], placement.finish[consumer]
                found.append(Resident(task, where, begin, end, nbytes, consumer))
    return found


def peak_resident(graph: TaskGraph, placement: Placement) -> dict[str, float]:
    """Each device's most resident bytes at any time."""
    peaks = {device: 0.0 for device in graph.devices}
    for device, _, held in _sweep(residents(graph, placement)):
        peaks[device] = max(peaks[device], held)
    return peaks


def first_overflow(graph: TaskGraph, placement: Placement) -> Overflow | None:
    """The earliest moment a device with a capacity holds more than it (None: it fits)."""
    return _first_overflow(graph, residents(graph, placement))


def _first_overflow(graph: TaskGraph, found: list[Resident]) -> Overflow | None:
    first: tuple[float, str, float] | None = None
    for device, time, held in _sweep(found):
        capacity = graph.capacity.get(device)
        if capacity is not None and held > capacity and (first is None or time < first[0]):
            first = (time, device, held)
    if first is None:
        return None
    time, device, held = first
    live = tuple(r for r in found if r.device == device and _holds(r, time))
    return Overflow(device, time, held, graph.capacity[device], live)


def _holds(r: Resident, time: float) -> bool:
    """An interval holds from its begin to just before its end; a zero-length one (a task
    that takes no time) at its instant."""
    return r.begin <= time and (time < r.end or r.begin == r.end == time)


def _sweep(found: list[Resident]) -> list[tuple[str, float, float]]:
    """At each time something becomes resident on a device: the device, the time and the
    bytes it holds then (see `_holds`)."""
    by_device: dict[str, list[Resident]] = {}
    for r in found:
        by_device.setdefault(r.device, []).append(r)
    points = []
    for device, items in by_device.items():
        # At one time: what ends leaves (0), then what begins arrives (1) and is counted
        # (2), then what began and ended at that instant leaves (3).
        events = []
        for r in items:
            events.append((r.begin, 1, r.nbytes))
            events.append((r.end, 3 if r.end == r.begin else 0, -r.nbytes))
        events += [(t, 2, 0.0) for t in {r.begin for r in items}]
        held = 0.0
        for time, kind, change in sorted(events):
            if kind == 2:
                points.append((device, time, held))
            else:
                held += change
    return points


def fitting(
    algorithm: Callable[[TaskGraph], Placement],
) -> Callable[[TaskGraph], Placement]:
    """`algorithm` kept within the devices' capacities (see the module docstring); the
    same algorithm where the graph gives no capacity."""

    def place(graph: TaskGraph) -> Placement:
        if not graph.capacity or not graph.memory:
            return algorithm(graph)
        too_big = oversized(graph)
        if too_big is not None:
            raise DhirError([Diagnostic(too_big)])
        sent: dict[str, str] = {}  # task -> the one device it is sent to
        rounds = MAX_ROUNDS
        while True:
            placement = algorithm(_sent(graph, sent))
            found = residents(graph, placement)
            over = _first_overflow(graph, found)
            if over is None:
                return placement
            move = _move(graph, found, over)
            rounds -= 1
            if move is None or rounds == 0:
                raise _cannot_fit(over)
            sent[move[0]] = move[1]

    return place


def oversized(graph: TaskGraph) -> str | None:
    """Why `graph` cannot fit whatever the placement: a task whose data and its inputs'
    (all resident on its device while it runs) exceed the capacity of every device that
    can run it; None when there is none."""
    found = oversized_task(graph)
    return None if found is None else found[1]


def oversized_task(graph: TaskGraph) -> tuple[str, str] | None:
    """The first task `oversized` speaks of, and what it says."""
    for task in graph.tasks:
        need = graph.memory.get(task, 0.0) + sum(
            graph.memory.get(edge.source, 0.0) for edge in graph.predecessors(task)
        )
        devices = list(graph.cost.get(task, {}))
        if devices and all(need > graph.capacity.get(d, math.inf) for d in devices):
            room = ", ".join(f"{d}: {bytes_words(graph.capacity[d])}" for d in devices)
            return task, (
                f"task '{task}' needs {bytes_words(need)} resident while it runs (its data and "
                f"its inputs'), more than any device that can run it has ({room})"
            )
    return None


def _sent(graph: TaskGraph, sent: dict[str, str]) -> TaskGraph:
    if not sent:
        return graph
    cost = {
        task: {sent[task]: costs[sent[task]]} if task in sent else costs
        for task, costs in graph.cost.items()
    }
    return replace(graph, cost=cost)


def _move(graph: TaskGraph, found: list[Resident], over: Overflow) -> tuple[str, str] | None:
    """Which task whose data (or copies of its inputs) `over` finds on its device to send
    where: of those that can run on another device, the one holding data that waits there
    rather than being used, the most bytes; to its other device with the most room at that
    time (its capacity less what it holds then)."""
    held: dict[str, float] = {}
    waiting: dict[str, bool] = {}
    for r in over.resident:
        held[r.owner] = held.get(r.owner, 0.0) + r.nbytes
        running = r.owner != r.task or over.time < _finish_guess(graph, r)
        waiting[r.owner] = waiting.get(r.owner, True) and not running
    room = {
        device: graph.capacity.get(device, math.inf)
        - sum(r.nbytes for r in found if r.device == device and _holds(r, over.time))
        for device in graph.devices
    }
    candidates = []
    for owner, nbytes in held.items():
        others = [d for d in graph.cost.get(owner, {}) if d != over.device]
        if others:
            target = max(others, key=lambda d: (room[d], -graph.devices.index(d)))
            order = (not waiting[owner], room[target] < nbytes, -nbytes, graph.tasks.index(owner))
            candidates.append((order, owner, target))
    if not candidates:
        return None
    _, owner, target = min(candidates)
    return owner, target


def _finish_guess(graph: TaskGraph, r: Resident) -> float:
    """When `r`'s task stops running, at the latest: its cost on its device after it
    became resident (its data then waits for its consumers)."""
    return r.begin + graph.cost.get(r.task, {}).get(r.device, 0.0)


def _cannot_fit(over: Overflow) -> DhirError:
    return DhirError(
        [
            Diagnostic(
                f"the tasks cannot fit in the devices' memory: {over.device} would hold "
                f"{over.held:g} bytes at time {over.time:g}, more than its capacity "
                f"{over.capacity:g}, and none of the tasks whose data it holds then can run "
                "elsewhere (give more devices or more capacity)"
            )
        ]
    )
