"""The task graph placement algorithms work on, apart from any IR.

Costs are times: `cost[task][device]` is how long `task` runs on `device` (a device
missing from a task's costs cannot run it), and an edge's `comm` is paid only when its
two tasks run on different devices.

Memory, optional: `memory[task]` is how many bytes `task` needs resident on its device
and `capacity[device]` how many bytes a device has. The algorithms place a task only on a
device whose capacity is at least the task's memory (each task checked on its own);
dhir.placement.residency models what stays resident over time (a task's data until its
consumers finish), where tasks sharing a device add up, and keeps any algorithm within
it (`fitting`, which `dhir schedule --graph` uses). A task missing from `memory` needs
none; a device missing from `capacity` has no limit, so by default nothing changes.

Nodes, optional: `nodes[device]` names the node (host) a device is on. Between devices of
different nodes an edge costs its `remote` time (the network's) when it has one, else its
`comm`; between devices of one node, `comm` (the link inside the node). Without nodes, or
with all devices on one node, every edge costs its `comm`, as before.

Links, optional (`dhir.placement.from_ir` gives them from a machine description whose
pairs of ranks are joined by links of different speeds): an edge that says how many bytes
it moves (`nbytes`) costs the transfer of those bytes between its two devices (`Links`),
whatever its `comm` and `remote`: those stay the means over pairs of devices, for what
is found before any task has a device (HEFT's upward rank, the downward rank).

In JSON, the format of `dhir schedule --graph G.json` (read by `TaskGraph.from_json`):
{"devices": [...], "tasks": {"T": {"cost": {"dev": t}, "memory": bytes}},
 "edges": [{"from": "T", "to": "U", "comm": t, "remote": t}], "capacity": {"dev": bytes},
 "nodes": {"dev": "node"}}
where "memory", "capacity", "comm", "remote" and "nodes" may be left out. Other keys,
a task without a cost on any device and an edge given twice are errors.
"""

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from dhir.analysis.profile import LARGEST
from dhir.ir.diagnostics import DhirError, Diagnostic, as_written
from dhir.ir.file_lines import Entry, EntryError, did_you_mean

FORMAT = (
    '{"devices": ["d0", ...], "tasks": {"T": {"cost": {"d0": 3.0, ...}, "memory": 1e9}, '
    '...}, "edges": [{"from": "T", "to": "U", "comm": 1.0, "remote": 4.0}, ...], '
    '"capacity": {"d0": 8e9}, "nodes": {"d0": "host0", ...}} ("memory", "capacity", '
    '"remote" (an edge\'s time between nodes) and "nodes" optional)'
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    comm: float  # between devices of one node
    remote: float | None = None  # between devices of different nodes (None: comm)
    nbytes: float | None = None  # what it moves, timed by the graph's links (None: comm)


@dataclass(frozen=True)
class Links:
    """Transfer times by pair of devices: device d is of class `of[d]`, and from a device
    of class a to another of class b, `nbytes` take latency[a][b] + nbytes *
    per_byte[a][b] seconds (two devices of one class: the link between them)."""

    of: dict[str, int]
    latency: tuple[tuple[float, ...], ...]
    per_byte: tuple[tuple[float, ...], ...]

    def time(self, nbytes: float, source: int, target: int) -> float:
        """The transfer of `nbytes` from a device of class `source` to one of `target`."""
        return self.latency[source][target] + nbytes * self.per_byte[source][target]


def _check_links(links: Links, devices: tuple[str, ...]) -> None:
    """That each device has a link class its tables time (a graph made by hand may not:
    placing it then failed with a KeyError or IndexError)."""
    size = len(links.latency)
    square = len(links.per_byte) == size and all(
        len(row) == size for row in (*links.latency, *links.per_byte)
    )
    missing = [d for d in devices if not 0 <= links.of.get(d, -1) < size]
    if square and not missing:
        return
    what = f"no class of its {size} to {', '.join(missing)}" if missing else "tables not square"
    raise DhirError([Diagnostic(f"the task graph's links give {what}")])


@dataclass(frozen=True)
class TaskGraph:
    devices: tuple[str, ...]
    tasks: tuple[str, ...]  # in a topological order (the input's order when it is one)
    cost: dict[str, dict[str, float]]
    edges: tuple[Edge, ...]
    memory: dict[str, float] = field(default_factory=dict)  # bytes; missing: none needed
    capacity: dict[str, float] = field(default_factory=dict)  # bytes; missing: unlimited
    nodes: dict[str, str] = field(default_factory=dict)  # device -> node; empty: one node
    links: Links | None = None  # None: edges cost their comm (or remote)

    def comm_between(self, edge: Edge, source: str, target: str) -> float:
        """What `edge` costs from a task on device `source` to one on `target`."""
        if source == target:
            return 0.0
        links = self.links
        if links is not None and edge.nbytes is not None:
            return links.time(edge.nbytes, links.of[source], links.of[target])
        if edge.remote is not None and self.nodes.get(source) != self.nodes.get(target):
            return edge.remote
        return edge.comm

    def successors(self, task: str) -> list[Edge]:
        return self._out.get(task, [])

    def predecessors(self, task: str) -> list[Edge]:
        return self._in.get(task, [])

    def fits(self, task: str, device: str) -> bool:
        """Whether `task`'s memory fits on `device` (whatever its costs say)."""
        return self.memory.get(task, 0.0) <= self.capacity.get(device, math.inf)

    def can_run(self, task: str, device: str) -> bool:
        return device in self.cost.get(task, {}) and self.fits(task, device)

    def __post_init__(self) -> None:
        out: dict[str, list[Edge]] = {}
        into: dict[str, list[Edge]] = {}
        for edge in self.edges:
            out.setdefault(edge.source, []).append(edge)
            into.setdefault(edge.target, []).append(edge)
        object.__setattr__(self, "_out", out)
        object.__setattr__(self, "_in", into)
        if self.links is not None:
            _check_links(self.links, self.devices)

    _out: dict[str, list[Edge]] = field(init=False, repr=False, compare=False)
    _in: dict[str, list[Edge]] = field(init=False, repr=False, compare=False)

    @staticmethod
    def from_json(data: object, where: str = "graph") -> "TaskGraph":
        """The graph in `data` (parsed JSON, the format above), checked: names known,
        times and sizes non-negative numbers, no cycles. Tasks are put in a topological
        order, the input's own when it is one. Raises DhirError naming what is wrong."""
        if not isinstance(data, dict):
            raise EntryError(where, f"expected an object like {FORMAT}")
        _check_keys(data, _GRAPH_KEYS, "", "a graph", (where, ()))
        devices = _devices(data.get("devices"), where)
        specs = _task_specs(data.get("tasks"), where)
        costs = {task: _costs(task, spec, set(devices), where) for task, spec in specs.items()}
        memory = {
            task: _size(spec["memory"], f"task '{task}' memory", (where, ("tasks", task)), "memory")
            for task, spec in specs.items()
            if "memory" in spec
        }
        capacity = _capacity(data.get("capacity", {}), set(devices), where)
        nodes = _nodes(data.get("nodes", {}), devices, where)
        edges = _edges(data.get("edges", []), costs, where)
        order = topological_order(list(costs), edges, where)
        return TaskGraph(tuple(devices), tuple(order), costs, tuple(edges), memory, capacity, nodes)


@dataclass
class Placement:
    """Where and when each task runs, as a placement algorithm predicts it."""

    assignment: dict[str, str]
    start: dict[str, float]
    finish: dict[str, float]

    @property
    def makespan(self) -> float:
        return max(self.finish.values(), default=0.0)


# --- reading and checking the JSON ------------------------------------------------------

# The keys each object may have: a misspelt optional one ("memroy") would otherwise be
# dropped without a word, and the graph placed as if it were not there.
_GRAPH_KEYS = ("devices", "tasks", "edges", "capacity", "nodes")
_TASK_KEYS = ("cost", "memory")
_EDGE_KEYS = ("from", "to", "comm", "remote")


# A file and the entry (the path in its data) a check is of, for errors there.
At = tuple[str, Entry]


def _check_keys(value: dict[str, Any], keys: tuple[str, ...], what: str, kind: str, at: At) -> None:
    unknown = [key for key in value if key not in keys]
    if unknown:
        raise EntryError(
            at[0],
            f"{what}unknown key '{unknown[0]}'{did_you_mean(unknown[0], keys)}; {kind} takes "
            f"{', '.join(repr(k) for k in keys)}",
            at[1],
            unknown[0],
        )


def _devices(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise EntryError(where, '"devices" must be a list of device names', (), "devices", True)
    seen: set[str] = set()
    for device in value:
        if device in seen:
            raise EntryError(where, f"device '{device}' is listed twice", (), "devices", True)
        seen.add(device)
    return value


def _task_specs(value: object, where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        message = '"tasks" must be an object of task name -> {"cost": {...}}'
        raise EntryError(where, message, (), "tasks", True)
    for task, spec in value.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("cost"), dict):
            message = f"task '{task}' needs \"cost\": {{device: time, ...}}"
            raise EntryError(where, message, ("tasks",), task, True)
        _check_keys(spec, _TASK_KEYS, f"task '{task}': ", "a task", (where, ("tasks", task)))
    return value


def _costs(task: str, spec: dict[str, Any], devices: set[str], where: str) -> dict[str, float]:
    entry = ("tasks", task)
    if not spec["cost"]:
        raise EntryError(
            where,
            f"no device can run task '{task}' (its cost names none of the devices); "
            f"give its time on at least one of {', '.join(sorted(devices)) or '(none)'}",
            entry,
            "cost",
            True,
        )
    for device, time in spec["cost"].items():
        if device not in devices:
            message = (
                f"task '{task}' has a cost on unknown device '{device}'"
                f"{did_you_mean(device, sorted(devices))}"
            )
            raise EntryError(where, message, (*entry, "cost"), device)
        what = f"task '{task}' on device '{device}'"
        _check_number(time, what, "time", (where, (*entry, "cost")), device)
    return {device: float(time) for device, time in spec["cost"].items()}


def _capacity(value: object, devices: set[str], where: str) -> dict[str, float]:
    if not isinstance(value, dict):
        message = '"capacity" must be an object of device name -> bytes'
        raise EntryError(where, message, (), "capacity", True)
    for device in value:
        if device not in devices:
            message = (
                f"capacity given for unknown device '{device}'"
                f"{did_you_mean(device, sorted(devices))}"
            )
            raise EntryError(where, message, ("capacity",), device)
    return {
        device: _size(size, f"capacity of '{device}'", (where, ("capacity",)), device)
        for device, size in value.items()
    }


def _size(value: object, what: str, at: At, key: str) -> float:
    _check_number(value, what, "size", at, key)
    return float(value)  # type: ignore[arg-type]


def _edges(value: object, tasks: dict[str, Any], where: str) -> list[Edge]:
    if not isinstance(value, list):
        message = '"edges" must be a list of {"from", "to", "comm"} objects'
        raise EntryError(where, message, (), "edges", True)
    edges = []
    first: dict[tuple[str, str], int] = {}  # (from, to) -> the edge that gave it
    for k, edge in enumerate(value):
        entry = ("edges", k)
        if not isinstance(edge, dict) or "from" not in edge or "to" not in edge:
            raise EntryError(where, f'edge #{k} needs "from" and "to" (and "comm")', entry)
        for end in ("from", "to"):
            if not isinstance(edge[end], str) or edge[end] not in tasks:
                message = (
                    f"edge #{k} {end} unknown task '{edge[end]}'{did_you_mean(edge[end], tasks)}"
                )
                raise EntryError(where, message, entry, end, True)
        what = f"edge #{k} ({edge['from']} -> {edge['to']})"
        _check_keys(edge, _EDGE_KEYS, f"{what}: ", "an edge", (where, entry))
        seen = first.setdefault((edge["from"], edge["to"]), k)
        if seen != k:
            message = (
                f"{what} repeats edge #{seen}; give each pair of tasks one edge, "
                "whose comm is all that moves between them"
            )
            raise EntryError(where, message, entry)
        comm = edge.get("comm", 0.0)
        _check_number(comm, what, "time", (where, entry), "comm")
        remote = edge.get("remote")
        if remote is not None:
            _check_number(remote, f"{what} remote", "time", (where, entry), "remote")
            remote = float(remote)
        edges.append(Edge(edge["from"], edge["to"], float(comm), remote))
    return edges


def _nodes(value: object, devices: list[str], where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(n, str) for n in value.values()):
        message = '"nodes" must be an object of device name -> node name'
        raise EntryError(where, message, (), "nodes", True)
    unknown = [d for d in value if d not in devices]
    if unknown:
        message = f"node given for unknown device '{unknown[0]}'{did_you_mean(unknown[0], devices)}"
        raise EntryError(where, message, ("nodes",), unknown[0])
    missing = [d for d in devices if d not in value]
    if value and missing:
        message = f"device '{missing[0]}' has no node; give every device one"
        raise EntryError(where, message, (), "nodes")
    return dict(value)


def _check_number(value: object, what: str, unit: str, at: At, key: str) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:  # type: ignore[arg-type]
        message = f"{what}: {unit} must be a non-negative number, got {as_written(value)}"
        raise EntryError(at[0], message, at[1], key, True)
    if value > LARGEST:  # type: ignore[operator]
        message = f"{what}: {unit} must be at most {LARGEST:g}, got {as_written(value)}"
        raise EntryError(at[0], message, at[1], key, True)


def topological_order(tasks: list[str], edges: list[Edge], where: str) -> list[str]:
    """Kahn's algorithm, always taking the earliest ready task in input order, so an input
    already in topological order is kept as it is."""
    position = {task: k for k, task in enumerate(tasks)}
    waiting = dict.fromkeys(tasks, 0)
    successors: dict[str, list[str]] = {}
    for edge in edges:
        waiting[edge.target] += 1
        successors.setdefault(edge.source, []).append(edge.target)
    ready = [position[t] for t in tasks if waiting[t] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        task = tasks[heapq.heappop(ready)]
        order.append(task)
        for succ in successors.get(task, []):
            waiting[succ] -= 1
            if waiting[succ] == 0:
                heapq.heappush(ready, position[succ])
    if len(order) < len(tasks):
        stuck = [t for t in tasks if waiting[t] > 0]
        message = f"the edges form a cycle (tasks on or after it: {', '.join(stuck)})"
        raise EntryError(where, message, (), "edges")
    return order
