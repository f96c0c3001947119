"""Replay a placed schedule on a machine model and predict its makespan.

The input is a `TaskGraph` and a `Placement` of it. The placement fixes which device runs
each task and, through its start times, the order in which each device runs its tasks
(by start, then finish, then the graph's order). The simulator keeps both and recomputes
the times:

- A device runs its tasks one at a time, in that order; a task starts once the device is
  free and all its inputs have arrived, and runs for its cost on that device.
- An input made on the same device arrives when its producer finishes. An input made on
  another device is a transfer: it is requested when the producer finishes and takes the
  edge's `comm`.
- Transfers contend for links. The `Network` maps each (source, target) device pair to a
  link, or to `None`: a channel of its own, so the transfer starts at once. A link carries
  one transfer at a time, whole, in the order they were requested (FIFO by request time;
  ties by the producer's place in the graph's order, then by edge order), without
  preemption.

`Contentionless` (the default) gives every transfer its own channel; that is the list
schedulers' own model, so replaying their placements reproduces their times exactly.
`PairLinks` gives each ordered device pair one link; `SharedNic` makes the devices of a
node share one outgoing network link for transfers to other nodes.

With the graph's memory and capacities, the replay also reports each device's most
resident bytes and the first time a device holds more than its capacity
(dhir.placement.residency): a placement that breaks a capacity is reported.

Since requests reach a link in time order, a transfer's start is known when it is
requested, so the only events are task completions: one heap entry per task.
"""

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Protocol

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.placement.graph import Placement, TaskGraph
from dhir.placement.residency import Overflow, first_overflow, peak_resident


class Network(Protocol):
    """Which link a transfer between two devices occupies."""

    def link(self, source: str, target: str) -> Hashable | None:
        """A key naming the link a transfer from `source` to `target` occupies (transfers
        whose keys are equal share it), or None for a channel of its own (no contention).
        Only called for distinct devices."""
        ...


class Contentionless:
    """Every transfer has a channel of its own: the list schedulers' model."""

    def link(self, source: str, target: str) -> Hashable | None:
        return None


class PairLinks:
    """One link per ordered device pair: transfers between the same two devices, in the
    same direction, go one after another."""

    def link(self, source: str, target: str) -> Hashable | None:
        return (source, target)


class SharedNic:
    """Devices grouped into nodes. Transfers inside a node have channels of their own
    (PCIe or NVLink, not modelled); transfers to another node leave through the sending
    node's one network link, so they queue behind each other."""

    def __init__(self, node_of: Mapping[str, str]) -> None:
        self.node_of = dict(node_of)

    @classmethod
    def grouped(cls, devices: Iterable[str], per_node: int) -> "SharedNic":
        """Nodes of `per_node` consecutive devices: n0 holds the first ones, and so on."""
        if per_node < 1:
            raise _error(f"a node needs at least one device, got {per_node}")
        return cls({device: f"n{k // per_node}" for k, device in enumerate(devices)})

    def link(self, source: str, target: str) -> Hashable | None:
        node_from, node_to = self.node_of.get(source), self.node_of.get(target)
        if node_from is None or node_to is None:
            device = target if node_from is not None else source
            raise _error(f"device '{device}' belongs to no node; add it to the node map")
        return None if node_from == node_to else ("nic", node_from)


@dataclass
class Simulation:
    """What the replay predicts: each task's times (same assignment as the input)."""

    placement: Placement
    transfers: int  # inputs that crossed devices
    link_wait: float  # total time transfers queued behind others on a link
    # With the graph's memory and capacities: each device's most resident bytes, and the
    # first time one holds more than its capacity (dhir.placement.residency).
    peaks: dict[str, float] = field(default_factory=dict)
    overflow: Overflow | None = None

    @property
    def makespan(self) -> float:
        return self.placement.makespan


def simulate(graph: TaskGraph, placement: Placement, network: Network | None = None) -> Simulation:
    """Replay `placement` of `graph` on `network` (default: `Contentionless`)."""
    network = network if network is not None else Contentionless()
    device_of, duration = _assignment(graph, placement)
    succs, n_preds = _successors(graph, device_of)
    link_of = _links(graph, device_of, succs, network)
    queues = _device_orders(graph, placement, device_of)
    start, finish, transfers, link_wait = _replay(
        device_of, duration, succs, n_preds, link_of, queues, graph.tasks
    )
    tasks, devices = graph.tasks, graph.devices
    result = Placement(
        assignment={task: devices[device_of[i]] for i, task in enumerate(tasks)},
        start=dict(zip(tasks, start)),
        finish=dict(zip(tasks, finish)),
    )
    if not (graph.memory and graph.capacity):
        return Simulation(result, transfers, link_wait)
    peaks, overflow = peak_resident(graph, result), first_overflow(graph, result)
    return Simulation(result, transfers, link_wait, peaks, overflow)


def _replay(
    device_of: list[int],
    duration: list[float],
    succs: list[list[tuple[int, float]]],
    waiting: list[int],
    link_of: list[list[int]],
    queues: list[list[int]],
    names: tuple[str, ...],
) -> tuple[list[float], list[float], int, float]:
    """The event loop, on the index form: each task's start and finish, how many transfers
    crossed devices and how long they queued for links in all. `waiting` (each task's
    count of inputs) is used up; `names` are for the error if some task never starts.
    One function with local names, since this is the hot loop."""
    n, n_devices = len(device_of), len(queues)
    start, finish = [0.0] * n, [0.0] * n
    ready = [0.0] * n  # when the inputs that arrived so far are all there
    head = [0] * n_devices  # the position in its queue of each device's next task
    free = [0.0] * n_devices  # when each device finishes what it started
    link_free = [0.0] * (max((k for row in link_of for k in row), default=-1) + 1)
    events: list[tuple[float, int]] = []
    started = 0
    transfers = 0
    link_wait = 0.0

    def run_heads(device: int) -> None:
        """Start the device's next tasks for as long as their inputs are all there."""
        nonlocal started
        queue, position = queues[device], head[device]
        while True:
            task = queue[position]
            if task < 0 or waiting[task]:
                break
            begin = ready[task] if ready[task] > free[device] else free[device]
            end = begin + duration[task]
            start[task], finish[task], free[device] = begin, end, end
            heappush(events, (end, task))
            position += 1
        started += position - head[device]
        head[device] = position

    for device in range(n_devices):
        run_heads(device)
    while events:
        now, task = heappop(events)
        here = device_of[task]
        for (succ, comm), link in zip(succs[task], link_of[task]):
            there = device_of[succ]
            if there == here:
                arrival = now
            else:
                transfers += 1
                if link < 0:
                    arrival = now + comm
                else:
                    begin = link_free[link]
                    if begin > now:
                        link_wait += begin - now
                    else:
                        begin = now
                    arrival = link_free[link] = begin + comm
            if arrival > ready[succ]:
                ready[succ] = arrival
            waiting[succ] -= 1
            if not waiting[succ] and queues[there][head[there]] == succ:
                run_heads(there)
    if started < n:
        raise _stuck(names, [queue[position] for queue, position in zip(queues, head)])
    return start, finish, transfers, link_wait


# --- the graph in index form ------------------------------------------------------------


def _assignment(graph: TaskGraph, placement: Placement) -> tuple[list[int], list[float]]:
    """Each task's device index and its cost there."""
    device_index = {device: k for k, device in enumerate(graph.devices)}
    device_of, duration = [], []
    for task in graph.tasks:
        device = placement.assignment.get(task)
        if device is None:
            raise _error(f"the placement does not place task '{task}'")
        cost = graph.cost.get(task, {}).get(device)
        if device not in device_index or cost is None:
            raise _error(
                f"task '{task}' is placed on '{device}', which cannot run it (its costs "
                f"name {', '.join(graph.cost.get(task, {})) or 'no device'})"
            )
        device_of.append(device_index[device])
        duration.append(cost)
    return device_of, duration


def _successors(
    graph: TaskGraph, device_of: list[int]
) -> tuple[list[list[tuple[int, float]]], list[int]]:
    """Each task's successors with what each edge costs between the devices its tasks
    are placed on (the graph's nodes decide it), and each task's count of inputs."""
    index = {task: i for i, task in enumerate(graph.tasks)}
    succs: list[list[tuple[int, float]]] = [[] for _ in graph.tasks]
    n_preds = [0] * len(graph.tasks)
    devices = graph.devices
    for edge in graph.edges:
        source, target = index[edge.source], index[edge.target]
        here, there = devices[device_of[source]], devices[device_of[target]]
        succs[source].append((target, graph.comm_between(edge, here, there)))
        n_preds[target] += 1
    return succs, n_preds


def _links(
    graph: TaskGraph,
    device_of: list[int],
    succs: list[list[tuple[int, float]]],
    network: Network,
) -> list[list[int]]:
    """Per task, per successor edge: the index of the link its transfer occupies, or -1
    (same device, or a channel of its own). The network is asked once per device pair."""
    devices = graph.devices
    count = len(devices)
    by_pair: dict[int, int] = {}  # here * count + there -> link
    by_key: dict[Hashable, int] = {}
    link_of = []
    for task, edges in enumerate(succs):
        here = device_of[task]
        row = []
        for succ, _ in edges:
            there = device_of[succ]
            pair = here * count + there
            link = by_pair.get(pair)
            if link is None:
                key = None if here == there else network.link(devices[here], devices[there])
                link = by_pair[pair] = -1 if key is None else by_key.setdefault(key, len(by_key))
            row.append(link)
        link_of.append(row)
    return link_of


def _device_orders(graph: TaskGraph, placement: Placement, device_of: list[int]) -> list[list[int]]:
    """Each device's tasks by (start, finish, graph order); a sentinel -1 ends each queue
    so that looking at the head never runs off the end."""
    start, finish = placement.start, placement.finish
    try:
        keys = [(start[task], finish[task], i) for i, task in enumerate(graph.tasks)]
    except KeyError as missing:
        raise _error(f"the placement gives no start or finish for task {missing}") from None
    keys.sort()
    queues: list[list[int]] = [[] for _ in graph.devices]
    for _, _, task in keys:
        queues[device_of[task]].append(task)
    for queue in queues:
        queue.append(-1)
    return queues


def _stuck(names: tuple[str, ...], heads: list[int]) -> DhirError:
    blocked = [names[task] for task in heads if task >= 0]
    shown = ", ".join(blocked[:5]) + (", ..." if len(blocked) > 5 else "")
    return _error(
        "the placement's order on each device contradicts the edges (a device would wait "
        f"forever; the first tasks that never start: {shown}); give each task a start after "
        "its inputs' finish"
    )


def _error(message: str) -> DhirError:
    return DhirError([Diagnostic(message)])
