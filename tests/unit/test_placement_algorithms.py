"""Placement algorithms on task graphs: the papers' worked examples, validity of every
placement on random graphs (checked here, independently of the schedulers), and
`dhir schedule` as users run it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhir import DhirError
from dhir.cli.schedule import graph_from_json, read_graph
from dhir.placement.graph import Edge, Placement, TaskGraph
from dhir.placement.list_scheduling import (
    ALGORITHMS,
    INF,
    Problem,
    Timelines,
    best,
    heft,
    list_schedule,
    optimistic_cost_table,
    peft,
    ready_times,
    round_robin_graph,
    simulate,
    upward_rank,
)

DATA = Path(__file__).parent / "data"
TOPCUOGLU = DATA / "topcuoglu2002.json"  # Topcuoglu, Hariri, Wu 2002, Fig. 2 / Table 1
ARABNEJAD = DATA / "arabnejad2014.json"  # Arabnejad, Barbosa 2014, Fig. 1 / Table 1


def check_valid(graph: TaskGraph, placement: Placement) -> None:
    """An independent check: every task placed once on a device that can run it, for
    exactly its cost; inputs arrive before it starts; no two tasks overlap on a device."""
    tol = 1e-6
    assert set(placement.assignment) == set(graph.tasks)
    for task in graph.tasks:
        device = placement.assignment[task]
        assert device in graph.cost[task], f"{task} placed on {device}, which cannot run it"
        assert placement.start[task] >= -tol
        duration = placement.finish[task] - placement.start[task]
        assert abs(duration - graph.cost[task][device]) <= tol, task
    for edge in graph.edges:
        remote = placement.assignment[edge.source] != placement.assignment[edge.target]
        arrival = placement.finish[edge.source] + (edge.comm if remote else 0.0)
        assert placement.start[edge.target] >= arrival - tol, edge
    for device in graph.devices:
        on_device = sorted(
            (placement.start[t], placement.finish[t], t)
            for t in graph.tasks
            if placement.assignment[t] == device
        )
        for (_, end, first), (begin, _, second) in zip(on_device, on_device[1:]):
            assert begin >= end - tol, f"{first} and {second} overlap on {device}"
    assert placement.makespan == max(placement.finish.values(), default=0.0)


# --- the papers' examples ---------------------------------------------------------------


def test_heft_reproduces_topcuoglu_2002() -> None:
    graph = read_graph(TOPCUOGLU)
    placement = heft(graph)
    check_valid(graph, placement)
    assert placement.makespan == 80
    # The paper's schedule (Fig. 5a): T1 on P3, T10 on P2 finishing at 80.
    assert placement.assignment["T1"] == "P3" and placement.finish["T10"] == 80


def test_peft_and_heft_reproduce_arabnejad_2014() -> None:
    graph = read_graph(ARABNEJAD)
    assert peft(graph).makespan == 122
    assert heft(graph).makespan == 133
    for algorithm in ALGORITHMS.values():
        check_valid(graph, algorithm(graph))


@pytest.mark.parametrize("path", [TOPCUOGLU, ARABNEJAD])
def test_best_is_no_worse_on_the_papers_examples(path: Path) -> None:
    graph = read_graph(path)
    placement = best(graph)
    check_valid(graph, placement)
    assert placement.makespan <= min(heft(graph).makespan, peft(graph).makespan)


# --- random graphs ----------------------------------------------------------------------


@st.composite
def task_graphs(draw: st.DrawFn) -> TaskGraph:
    devices = tuple(f"d{k}" for k in range(draw(st.integers(1, 4))))
    n = draw(st.integers(0, 14))
    tasks = tuple(f"t{i}" for i in range(n))
    times = st.integers(0, 20) | st.floats(0, 20, allow_nan=False)
    cost = {}
    for task in tasks:
        runnable = draw(st.lists(st.sampled_from(devices), min_size=1, unique=True))
        cost[task] = {d: float(draw(times)) for d in devices if d in runnable}
    edges = []
    for j in range(n):
        for i in draw(st.sets(st.integers(0, j - 1), max_size=3) if j else st.just(set())):
            edges.append(Edge(tasks[i], tasks[j], float(draw(times))))
    return TaskGraph(devices, tasks, cost, tuple(edges))


@settings(max_examples=300, deadline=None)
@given(task_graphs())
def test_every_algorithm_places_validly(graph: TaskGraph) -> None:
    for algorithm in ALGORITHMS.values():
        check_valid(graph, algorithm(graph))


@settings(max_examples=300, deadline=None)
@given(task_graphs())
def test_best_never_worse_than_heft_or_peft(graph: TaskGraph) -> None:
    limit = min(heft(graph).makespan, peft(graph).makespan)
    assert best(graph).makespan <= limit + 1e-9


@settings(max_examples=50, deadline=None)
@given(task_graphs())
def test_algorithms_are_deterministic(graph: TaskGraph) -> None:
    for algorithm in ALGORITHMS.values():
        assert algorithm(graph) == algorithm(graph)


# --- insertion into idle gaps, against simple references -------------------------------


def reference_earliest_start(
    intervals: list[tuple[float, float]], ready: float, duration: float
) -> float:
    """The earliest time >= ready such that [time, time + duration] fits before the next
    interval: try ready and every finish after it, in order."""
    for time in sorted({ready, *(f for _, f in intervals if f >= ready)}):
        if all(time >= f or time + duration <= s for s, f in intervals):
            return time
    raise AssertionError("after the last finish always fits")


@st.composite
def timelines(draw: st.DrawFn) -> list[tuple[float, float]]:
    """Disjoint intervals (zero-length ones included), in placement order."""
    bounds = sorted(draw(st.lists(st.integers(0, 60), max_size=16)))
    intervals = [(float(a), float(b)) for a, b in zip(bounds[::2], bounds[1::2])]
    return draw(st.permutations(intervals))


@settings(max_examples=500, deadline=None)
@given(timelines(), st.integers(0, 70), st.integers(0, 20) | st.floats(0, 20))
def test_earliest_start_matches_a_simple_reference(
    intervals: list[tuple[float, float]], ready: int, duration: float
) -> None:
    lines = Timelines(1)
    for s, f in intervals:
        lines.add(0, s, f)
    got = lines.earliest_start(0, float(ready), float(duration))
    assert got == reference_earliest_start(intervals, float(ready), float(duration))


def reference_list_schedule(
    problem: Problem, priority: list[float], lookahead: list[list[float]] | None
) -> tuple[list[int], list[int], list[float], list[float]]:
    """`list_schedule` as plainly as possible: `ready_times`, then `Timelines` on every
    device, the least score (ties to the earlier device)."""
    import heapq

    n = problem.n
    waiting = [len(p) for p in problem.preds]
    heap = [(-priority[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(heap)
    device_of, start, finish, order = [-1] * n, [0.0] * n, [0.0] * n, []
    lines = Timelines(problem.n_devices)
    while heap:
        _, task = heapq.heappop(heap)
        elsewhere, special, there = ready_times(problem.preds[task], device_of, finish)
        best_score, chosen = INF, (-1, 0.0, 0.0)
        for device in problem.runnable[task]:
            ready = there if device == special else elsewhere
            begin = lines.earliest_start(device, ready, problem.cost[task][device])
            end = begin + problem.cost[task][device]
            score = end + (lookahead[task][device] if lookahead is not None else 0.0)
            if score < best_score:
                best_score, chosen = score, (device, begin, end)
        device_of[task], start[task], finish[task] = chosen
        lines.add(chosen[0], chosen[1], chosen[2])
        order.append(task)
        for succ, _ in problem.succs[task]:
            waiting[succ] -= 1
            if waiting[succ] == 0:
                heapq.heappush(heap, (-priority[succ], succ))
    return order, device_of, start, finish


def reference_simulate(
    problem: Problem, order: list[int], device_of: list[int]
) -> tuple[list[float], list[float]]:
    start, finish = [0.0] * problem.n, [0.0] * problem.n
    lines = Timelines(problem.n_devices)
    for task in order:
        device = device_of[task]
        elsewhere, special, there = ready_times(problem.preds[task], device_of, finish)
        ready = there if device == special else elsewhere
        start[task] = lines.earliest_start(device, ready, problem.cost[task][device])
        finish[task] = start[task] + problem.cost[task][device]
        lines.add(device, start[task], finish[task])
    return start, finish


@settings(max_examples=300, deadline=None)
@given(task_graphs(), st.randoms(use_true_random=False))
def test_list_schedule_and_simulate_match_simple_references(graph: TaskGraph, rng: object) -> None:
    """The schedulers inline the gap search and skip devices that cannot win; the
    results must be exactly those of the plain version."""
    problem = Problem(graph)
    table = optimistic_cost_table(problem)
    rank = upward_rank(problem, problem.mean_cost)
    for lookahead in (None, table):
        got = list_schedule(problem, rank, lookahead)
        order, device_of, start, finish = reference_list_schedule(problem, rank, lookahead)
        assert (got.order, got.device_of, got.start, got.finish) == (
            order,
            device_of,
            start,
            finish,
        )
    # Any valid assignment, in a topological order.
    device_of = [rng.choice(devices) for devices in problem.runnable]  # type: ignore[attr-defined]
    order = list(range(problem.n))
    got = simulate(problem, order, device_of)
    assert (got.start, got.finish) == reference_simulate(problem, order, device_of)


def test_round_robin_skips_devices_a_task_cannot_run_on() -> None:
    graph = TaskGraph(
        ("a", "b", "c"),
        ("x", "y", "z", "w"),
        {"x": {"a": 1}, "y": {"a": 1, "c": 1}, "z": {"c": 2}, "w": {"a": 1, "b": 1}},
        (Edge("x", "y", 5.0),),
    )
    placement = round_robin_graph(graph)
    assert placement.assignment == {"x": "a", "y": "c", "z": "c", "w": "a"}
    check_valid(graph, placement)
    assert placement.start["y"] == 6  # x finishes at 1, then 5 to move its output


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_a_task_no_device_can_run_is_an_error(name: str) -> None:
    graph = TaskGraph(("a",), ("x", "lonely"), {"x": {"a": 1}, "lonely": {}}, ())
    with pytest.raises(DhirError, match="no device can run task 'lonely'"):
        ALGORITHMS[name](graph)


# --- reading graphs ---------------------------------------------------------------------


def _graph(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "devices": ["a", "b"],
        "tasks": {"x": {"cost": {"a": 1, "b": 2}}, "y": {"cost": {"a": 3}}},
        "edges": [{"from": "x", "to": "y", "comm": 4}],
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_graph(edges=[{"from": "x", "to": "nope", "comm": 1}]), "unknown task 'nope'"),
        (_graph(tasks={"x": {"cost": {"gpu9": 1}}}), "unknown device 'gpu9'"),
        (_graph(tasks={"x": {"cost": {"a": -1}}}), "non-negative"),
        (_graph(edges=[{"from": "x", "to": "y", "comm": -2}]), "non-negative"),
        (
            _graph(
                edges=[{"from": "x", "to": "y", "comm": 1}, {"from": "y", "to": "x", "comm": 1}]
            ),
            "cycle",
        ),
        (_graph(edges=[{"from": "x", "to": "x", "comm": 1}]), "cycle"),
        (_graph(devices=["a", "a"]), "listed twice"),
        ([], "expected an object"),
    ],
)
def test_bad_graphs_are_reported(data: object, message: str) -> None:
    with pytest.raises(DhirError, match=message):
        graph_from_json(data)


def test_tasks_out_of_order_are_sorted_topologically() -> None:
    data = _graph(edges=[{"from": "y", "to": "x", "comm": 1}])
    assert graph_from_json(data).tasks == ("y", "x")


# --- the command ------------------------------------------------------------------------


def dhir(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_schedule_json_output() -> None:
    result = dhir("schedule", "--graph", str(TOPCUOGLU), "--algorithm", "heft", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"makespan", "assignment", "start", "finish"}
    assert out["makespan"] == 80
    tasks = {f"T{i}" for i in range(1, 11)}
    assert set(out["assignment"]) == set(out["start"]) == set(out["finish"]) == tasks


def test_schedule_table_output_defaults_to_best() -> None:
    result = dhir("schedule", "--graph", str(ARABNEJAD))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["task", "device", "start", "finish"]
    assert len(lines) == 12
    makespan = float(lines[-1].removeprefix("makespan: "))
    assert makespan <= 122


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ('{"devices": ["a"], "tasks": {"x": {"cost": {}}}, "edges": []}', "no device can run"),
    ],
)
def test_schedule_errors_without_traceback(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "g.json"
    if content is not None:
        path.write_text(content)
    result = dhir("schedule", "--graph", str(path))
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
