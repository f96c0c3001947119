"""Placement algorithms on task graphs: the papers' worked examples, validity of every
placement on random graphs (checked here, independently of the schedulers), and
`dhir schedule` as users run it."""

import gc
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
    DEFAULT_BUDGET,
    INF,
    FrozenTimelines,
    Moves,
    Problem,
    Timelines,
    best,
    best_schedule,
    fewer_devices,
    heft,
    heft_schedule,
    list_schedule,
    local_search,
    lower_bound,
    optimistic_cost_table,
    peft,
    portfolio,
    ready_times,
    restricted,
    round_robin_graph,
    sequential_time,
    simulate,
    single_device_schedule,
    upward_rank,
)

DATA = Path(__file__).parent / "data"
TOPCUOGLU = DATA / "topcuoglu2002.json"  # Topcuoglu, Hariri, Wu 2002, Fig. 2 / Table 1
ARABNEJAD = DATA / "arabnejad2014.json"  # Arabnejad, Barbosa 2014, Fig. 1 / Table 1


def check_valid(graph: TaskGraph, placement: Placement) -> None:
    """An independent check: every task placed once on a device that can run it and has
    room for it, for exactly its cost; inputs arrive before it starts; no two tasks overlap
    on a device."""
    tol = 1e-6
    assert set(placement.assignment) == set(graph.tasks)
    for task in graph.tasks:
        device = placement.assignment[task]
        assert device in graph.cost[task], f"{task} placed on {device}, which cannot run it"
        room = graph.capacity.get(device, INF)
        assert graph.memory.get(task, 0.0) <= room, f"{task} does not fit on {device}"
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
def task_graphs(draw: st.DrawFn, memory: bool = False) -> TaskGraph:
    """Up to 14 tasks on up to 4 devices, each runnable on some of them; with `memory`,
    devices of limited capacity, and tasks that each fit on at least one of their own."""
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
    if not memory:
        return TaskGraph(devices, tasks, cost, tuple(edges))
    sizes = st.integers(0, 8).map(float)
    capacity = {d: draw(sizes) for d in devices if draw(st.booleans())}
    needs = {}
    for task in tasks:
        room = max(capacity.get(d, INF) for d in cost[task])
        needs[task] = draw(st.floats(0, min(room, 10.0)))
    return TaskGraph(devices, tasks, cost, tuple(edges), needs, capacity)


@settings(max_examples=300, deadline=None)
@given(task_graphs())
def test_every_algorithm_places_validly(graph: TaskGraph) -> None:
    for algorithm in ALGORITHMS.values():
        check_valid(graph, algorithm(graph))


@settings(max_examples=200, deadline=None)
@given(task_graphs(memory=True))
def test_every_algorithm_honours_memory_capacity(graph: TaskGraph) -> None:
    for algorithm in ALGORITHMS.values():
        check_valid(graph, algorithm(graph))


@settings(max_examples=300, deadline=None)
@given(task_graphs())
def test_best_never_worse_than_the_baselines(graph: TaskGraph) -> None:
    limit = min(algorithm(graph).makespan for algorithm in (round_robin_graph, heft, peft))
    assert best(graph).makespan <= limit + 1e-9


def fastest_single_device(graph: TaskGraph) -> float:
    """Independently of the schedulers: the least total cost of the graph on one device
    that can run (and fit) every task, summed in task order."""
    times = [
        sum(graph.cost[t][d] for t in graph.tasks)
        for d in graph.devices
        if all(d in graph.cost[t] and graph.fits(t, d) for t in graph.tasks)
    ]
    return min(times, default=INF)


@settings(max_examples=300, deadline=None)
@given(task_graphs(memory=True) | task_graphs())
def test_best_is_never_slower_than_the_fastest_single_device(graph: TaskGraph) -> None:
    assert sequential_time(graph) == fastest_single_device(graph)
    assert best(graph).makespan <= fastest_single_device(graph)


def test_best_keeps_everything_on_one_device_when_comm_dominates() -> None:
    # A chain whose every hop costs far more than running it all on the fastest device.
    chain = tuple(f"t{i}" for i in range(6))
    cost = {t: {"slow": 10.0 if i % 2 else 1.0, "fast": 2.0} for i, t in enumerate(chain)}
    edges = tuple(Edge(a, b, 100.0) for a, b in zip(chain, chain[1:]))
    graph = TaskGraph(("slow", "fast"), chain, cost, edges)
    placement = best(graph)
    assert placement.makespan <= 12.0
    check_valid(graph, placement)


def test_the_portfolio_holds_the_single_device_and_fewer_device_schedules() -> None:
    graph = TaskGraph(
        tuple(f"d{k}" for k in range(8)),
        ("x", "y"),
        {"x": {f"d{k}": 1.0 + k for k in range(8)}, "y": {f"d{k}": 8.0 - k for k in range(8)}},
        (Edge("x", "y", 1.0),),
    )
    problem = Problem(graph)
    single = single_device_schedule(problem)
    assert single is not None and single.device_of == [0, 0]  # 9 on d0, ties to the first
    assert any(s.device_of == single.device_of for s in portfolio(problem))
    assert fewer_devices(problem) == [[0, 1, 2, 3], [0, 1]]
    # Tasks none of the chosen devices can run keep their own devices.
    assert restricted(problem, [0]) == [[0], [0]]


def test_no_single_device_schedule_when_no_device_runs_everything() -> None:
    graph = TaskGraph(("a", "b"), ("x", "y"), {"x": {"a": 1.0}, "y": {"b": 1.0}}, ())
    assert single_device_schedule(Problem(graph)) is None
    assert sequential_time(graph) == INF
    check_valid(graph, best(graph))


@settings(max_examples=200, deadline=None)
@given(task_graphs(), st.randoms(use_true_random=False))
def test_a_local_search_move_resimulates_exactly(graph: TaskGraph, rng: object) -> None:
    """Moving a task re-simulates only from its position on; the result must be that of
    simulating the whole graph with the task moved."""
    problem = Problem(graph)
    if problem.n == 0:
        return
    schedule = heft_schedule(problem)
    moves = Moves(problem, schedule)
    for _ in range(2):  # moves tried one after the other share what `moves` found
        task = rng.randrange(problem.n)  # type: ignore[attr-defined]
        device = rng.choice(problem.runnable[task])  # type: ignore[attr-defined]
        moved, steps = moves.apply(task, device, INF)
        device_of = list(schedule.device_of)
        device_of[task] = device
        whole = simulate(problem, schedule.order, device_of)
        assert moved is not None and 0 < steps <= problem.n
        assert (moved.start, moved.finish) == (whole.start, whole.finish)
    # With a limit at the whole makespan, the move is cut short.
    if whole.makespan > 0:
        assert Moves(problem, schedule).apply(task, device, whole.makespan)[0] is None


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


@settings(max_examples=500, deadline=None)
@given(
    timelines(),
    st.integers(0, 70),
    st.integers(0, 20) | st.floats(0, 20),
    st.integers(1, 4),
    st.floats(0, 1e6),
)
def test_frozen_timelines_give_the_same_earliest_start(
    intervals: list[tuple[float, float]], ready: int, duration: float, block: int, shift: float
) -> None:
    """Blocks of gaps skipped whole (small blocks, so that many are), with times shifted
    by a float so that gap widths round differently from `time + duration`."""
    lines = Timelines(1)
    for s, f in intervals:
        lines.add(0, s + shift, f + shift)
    frozen = FrozenTimelines(lines, block)
    start = float(ready) + shift
    assert frozen.earliest_start(0, start, duration) == lines.earliest_start(0, start, duration)


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


@pytest.mark.parametrize("enabled", [True, False])
def test_schedulers_leave_the_cycle_collector_as_they_found_it(enabled: bool) -> None:
    graph = read_graph(TOPCUOGLU)
    broken = TaskGraph(("a",), ("x",), {"x": {}}, ())
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        for algorithm in ALGORITHMS.values():
            algorithm(graph)
            assert gc.isenabled() == enabled
            with pytest.raises(DhirError):
                algorithm(broken)
            assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_a_task_that_fits_nowhere_is_an_error(name: str) -> None:
    graph = TaskGraph(
        ("cpu", "gpu"),
        ("small", "huge"),
        {"small": {"cpu": 1, "gpu": 1}, "huge": {"gpu": 1}},
        (),
        memory={"small": 1.0, "huge": 64e9},
        capacity={"gpu": 16e9},  # the CPU has room, but cannot run it
    )
    with pytest.raises(DhirError, match=r"task 'huge' needs 59.6 GiB .*gpu: 14.9 GiB"):
        ALGORITHMS[name](graph)


@settings(max_examples=100, deadline=None)
@given(task_graphs(memory=True), st.data())
def test_tasks_that_fit_nowhere_are_named(graph: TaskGraph, data: st.DataObject) -> None:
    if not graph.tasks:
        return
    huge = data.draw(st.lists(st.sampled_from(graph.tasks), min_size=1, unique=True))
    capacity = {d: graph.capacity.get(d, 100.0) for d in graph.devices}
    memory = {**graph.memory, **dict.fromkeys(huge, 1000.0)}
    tight = TaskGraph(graph.devices, graph.tasks, graph.cost, graph.edges, memory, capacity)
    for algorithm in ALGORITHMS.values():
        with pytest.raises(DhirError) as raised:
            algorithm(tight)
        named = {m.split("'")[1] for m in (d.message for d in raised.value.diagnostics)}
        assert named == set(huge)


def test_memory_limits_steer_tasks_off_the_fast_device() -> None:
    graph = TaskGraph(
        ("gpu", "cpu"),
        ("a", "b"),
        {"a": {"gpu": 1, "cpu": 10}, "b": {"gpu": 1, "cpu": 10}},
        (),
        memory={"b": 5.0},
        capacity={"gpu": 4.0},
    )
    for algorithm in ALGORITHMS.values():
        placement = algorithm(graph)
        assert placement.assignment["b"] == "cpu"
        check_valid(graph, placement)


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
        (_graph(tasks={"x": {"cost": {"a": 1e308}}}), "must be at most 1e.30"),
        (
            _graph(
                edges=[{"from": "x", "to": "y", "comm": 1}, {"from": "y", "to": "x", "comm": 1}]
            ),
            "cycle",
        ),
        (_graph(edges=[{"from": "x", "to": "x", "comm": 1}]), "cycle"),
        (_graph(devices=["a", "a"]), "listed twice"),
        ([], "expected an object"),
        (
            _graph(capacty={"a": 1}),
            r"g.json: unknown key 'capacty' \(did you mean 'capacity'\?\); a graph takes",
        ),
        (
            _graph(tasks={"x": {"cost": {"a": 1}, "memroy": 1}}),
            r"g.json: task 'x': unknown key 'memroy' \(did you mean 'memory'\?\); a task takes "
            "'cost', 'memory'",
        ),
        (
            _graph(edges=[{"from": "x", "to": "y", "com": 1}]),
            r"g.json: edge #0 \(x -> y\): unknown key 'com' \(did you mean 'comm'\?\); an edge",
        ),
        (
            _graph(edges=[{"from": "x", "to": "y", "comm": 1}, {"from": "x", "to": "y"}]),
            r"g.json: edge #1 \(x -> y\) repeats edge #0",
        ),
        (_graph(edges=[{"from": ["x"], "to": "y"}]), "g.json: edge #0 from unknown task"),
        (
            _graph(tasks={"x": {"cost": {}}}),
            "g.json: no device can run task 'x' .*at least one of a, b",
        ),
    ],
)
@pytest.mark.parametrize("reader", [graph_from_json, TaskGraph.from_json])
def test_bad_graphs_are_reported(reader: object, data: object, message: str) -> None:
    with pytest.raises(DhirError, match=message):
        reader(data, "g.json")  # type: ignore[operator]


@pytest.mark.parametrize("reader", [graph_from_json, TaskGraph.from_json])
def test_tasks_out_of_order_are_sorted_topologically(reader: object) -> None:
    data = _graph(edges=[{"from": "y", "to": "x", "comm": 1}])
    assert reader(data).tasks == ("y", "x")  # type: ignore[operator]


def test_memory_and_capacity_are_read_when_given() -> None:
    tasks = {"x": {"cost": {"a": 1, "b": 2}, "memory": 3e9}, "y": {"cost": {"a": 3}}}
    graph = TaskGraph.from_json(_graph(tasks=tasks, capacity={"b": 2e9}))
    assert graph.memory == {"x": 3e9} and graph.capacity == {"b": 2e9}
    assert graph.fits("x", "a") and not graph.fits("x", "b") and graph.fits("y", "b")
    assert best(graph).assignment["x"] == "a"
    plain = TaskGraph.from_json(_graph())
    assert plain.memory == {} and plain.capacity == {}
    assert plain == graph_from_json(_graph())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_graph(capacity={"gpu9": 1}), "capacity given for unknown device 'gpu9'"),
        (_graph(capacity={"a": -1}), "capacity of 'a': size must be a non-negative number"),
        (_graph(capacity=[1]), '"capacity" must be an object'),
        (
            _graph(tasks={"x": {"cost": {"a": 1}, "memory": "lots"}}),
            "task 'x' memory: size must be a non-negative number, got \"lots\"",
        ),
        (
            _graph(tasks={"x": {"cost": {"a": 1}, "memory": None}}),
            "task 'x' memory: size must be a non-negative number, got null",
        ),
    ],
)
def test_bad_memory_and_capacity_are_reported(data: object, message: str) -> None:
    with pytest.raises(DhirError, match=message):
        TaskGraph.from_json(data)


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
        ("{not json", "g.json:1:2: error: not valid JSON"),
        ('{"devices": ["a"], "tasks": {"x": {"cost": {}}}, "edges": []}', "no device can run"),
        (
            '{"devices": ["a"], "tasks": {"x": {"cost": {"a": 1}, "memory": 9}}, "edges": [], '
            '"capacity": {"a": 5}}',
            "g.json:1:64: error: task 'x' needs 9 bytes resident",
        ),
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
    assert message in result.stderr and "g.json" in result.stderr
    assert "Traceback" not in result.stderr


@settings(max_examples=200, deadline=None)
@given(task_graphs())
def test_no_schedule_beats_the_lower_bound(graph: TaskGraph) -> None:
    """local_search stops at `lower_bound`: it must bound every schedule found."""
    problem = Problem(graph)
    floor = lower_bound(problem)
    for schedule in [*portfolio(problem), best_schedule(problem)]:
        assert schedule.makespan >= floor - 1e-9 * max(1.0, floor)


def test_a_schedule_at_the_lower_bound_is_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Independent equal tasks, evenly spread: no move can help, none is simulated."""
    tasks = tuple(f"t{i}" for i in range(8))
    graph = TaskGraph(("a", "b"), tasks, {t: {"a": 1.0, "b": 1.0} for t in tasks}, ())
    problem = Problem(graph)
    schedule = heft_schedule(problem)
    assert schedule.makespan == lower_bound(problem) == 4.0
    monkeypatch.setattr(Moves, "__init__", lambda *_: pytest.fail("a move was tried"))
    assert local_search(problem, schedule, DEFAULT_BUDGET) is schedule


def test_the_local_search_on_a_large_graph_simulates_a_bounded_number_of_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The search's work stops growing with the graph past SEARCHED_TASKS (here 20): on a
    graph of 300 tasks it simulates about budget * 20 tasks, not budget * 300."""
    import dhir.placement.list_scheduling as scheduling

    monkeypatch.setattr(scheduling, "SEARCHED_TASKS", 20, raising=False)
    # A chain placed round robin: every edge pays a transfer, and each move saves some.
    tasks = tuple(f"t{i}" for i in range(300))
    cost = {t: {"a": 1.0, "b": 1.0} for t in tasks}
    edges = tuple(Edge(tasks[i - 1], tasks[i], 1.0) for i in range(1, len(tasks)))
    problem = Problem(TaskGraph(("a", "b"), tasks, cost, edges))
    simulated = [0]
    apply = Moves.apply

    def counted(self: Moves, task: int, device: int, limit: float) -> tuple[object, int]:
        found, used = apply(self, task, device, limit)
        simulated[0] += used
        return found, used

    monkeypatch.setattr(Moves, "apply", counted)
    local_search(problem, round_robin_graph_schedule(problem), 4)
    # The last move may run past the budget by one simulation of the graph.
    assert simulated[0] > 0
    assert simulated[0] <= 4 * 20 + problem.n


def round_robin_graph_schedule(problem: Problem) -> object:
    return list_schedule(problem, list(range(problem.n)), None, [[k % 2] for k in range(problem.n)])
