"""`dhir schedule`: place a task graph on devices and print when each task runs.

    dhir schedule --graph G.json [--algorithm round-robin|heft|peft|best] [--json]

Only task graphs in JSON (the format in dhir/placement/graph.py) for now; scheduling the
tasks of a dhir program comes later.
"""

import argparse
import heapq
import json
import math
from pathlib import Path
from typing import Any

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.placement.graph import Edge, Placement, TaskGraph
from dhir.placement.list_scheduling import ALGORITHMS

_FORMAT = (
    '{"devices": ["d0", ...], "tasks": {"T": {"cost": {"d0": 3.0, ...}}, ...}, '
    '"edges": [{"from": "T", "to": "U", "comm": 1.0}, ...]}'
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "schedule",
        help="place a task graph on devices (HEFT, PEFT, ...)",
        description="Place the tasks of a task graph (JSON) on devices and print each task's "
        "device, start and finish, and the makespan. Only --graph input for now: scheduling "
        "dhir programs comes later. The JSON format: " + _FORMAT,
    )
    parser.add_argument(
        "--graph", required=True, type=Path, metavar="G.json", help="the task graph (JSON)"
    )
    parser.add_argument(
        "--algorithm",
        choices=tuple(ALGORITHMS),
        default="best",
        help="round-robin, heft, peft, or best: a portfolio plus local search, never worse "
        "than heft and peft (default: best)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"makespan": m, "assignment": {...}, "start": {...}, "finish": {...}}',
    )


def run(args: argparse.Namespace) -> int:
    graph = read_graph(args.graph)
    placement = ALGORITHMS[args.algorithm](graph)
    print(to_json(placement) if args.json else table(graph, placement))
    return 0


def to_json(placement: Placement) -> str:
    return json.dumps(
        {
            "makespan": placement.makespan,
            "assignment": placement.assignment,
            "start": placement.start,
            "finish": placement.finish,
        }
    )


def table(graph: TaskGraph, placement: Placement) -> str:
    width = max((len(t) for t in graph.tasks), default=4)
    dev_width = max((len(d) for d in graph.devices), default=6)
    rows = [f"{'task':<{width}}  {'device':<{dev_width}}  {'start':>10}  {'finish':>10}"]
    by_start = sorted(graph.tasks, key=lambda t: (placement.start[t], placement.finish[t]))
    for task in by_start:
        rows.append(
            f"{task:<{width}}  {placement.assignment[task]:<{dev_width}}  "
            f"{placement.start[task]:>10g}  {placement.finish[task]:>10g}"
        )
    rows.append(f"makespan: {placement.makespan:g}")
    return "\n".join(rows)


# --- reading and checking the JSON ------------------------------------------------------


def read_graph(path: Path) -> TaskGraph:
    try:
        text = path.read_text()
    except OSError as error:
        raise _error(f"cannot read {path}: {error.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise _error(f"{path} is not JSON: {error}") from None
    return graph_from_json(data, str(path))


def graph_from_json(data: object, where: str = "graph") -> TaskGraph:
    if not isinstance(data, dict):
        raise _error(f"{where}: expected an object like {_FORMAT}")
    devices = _devices(data.get("devices"), where)
    costs = _tasks(data.get("tasks"), set(devices), where)
    edges = _edges(data.get("edges", []), costs, where)
    order = topological_order(list(costs), edges, where)
    return TaskGraph(tuple(devices), tuple(order), costs, tuple(edges))


def _devices(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise _error(f'{where}: "devices" must be a list of device names')
    seen: set[str] = set()
    for device in value:
        if device in seen:
            raise _error(f"{where}: device '{device}' is listed twice")
        seen.add(device)
    return value


def _tasks(value: object, devices: set[str], where: str) -> dict[str, dict[str, float]]:
    if not isinstance(value, dict):
        raise _error(f'{where}: "tasks" must be an object of task name -> {{"cost": {{...}}}}')
    costs: dict[str, dict[str, float]] = {}
    for task, spec in value.items():
        cost = spec.get("cost") if isinstance(spec, dict) else None
        if not isinstance(cost, dict):
            raise _error(f"{where}: task '{task}' needs \"cost\": {{device: time, ...}}")
        for device, time in cost.items():
            if device not in devices:
                raise _error(f"{where}: task '{task}' has a cost on unknown device '{device}'")
            _check_time(time, f"task '{task}' on device '{device}'", where)
        costs[task] = {device: float(time) for device, time in cost.items()}
    return costs


def _edges(value: object, tasks: dict[str, Any], where: str) -> list[Edge]:
    if not isinstance(value, list):
        raise _error(f'{where}: "edges" must be a list of {{"from", "to", "comm"}} objects')
    edges = []
    for k, edge in enumerate(value):
        if not isinstance(edge, dict) or "from" not in edge or "to" not in edge:
            raise _error(f'{where}: edge #{k} needs "from" and "to" (and "comm")')
        for end in ("from", "to"):
            if edge[end] not in tasks:
                raise _error(f"{where}: edge #{k} {end} unknown task '{edge[end]}'")
        comm = edge.get("comm", 0.0)
        _check_time(comm, f"edge #{k} ({edge['from']} -> {edge['to']})", where)
        edges.append(Edge(edge["from"], edge["to"], float(comm)))
    return edges


def _check_time(value: object, what: str, where: str) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:  # type: ignore[arg-type]
        raise _error(f"{where}: {what}: time must be a non-negative number, got {value!r}")


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
        raise _error(f"{where}: the edges form a cycle (tasks on or after it: {', '.join(stuck)})")
    return order


def _error(message: str) -> DhirError:
    return DhirError([Diagnostic(message)])
