"""Memory resident over time (dhir.placement.residency): the model, placement that keeps
within the devices' capacities with every algorithm, and the simulator's report."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from dhir.cli.main import main
from dhir.ir.diagnostics import DhirError
from dhir.placement.graph import Edge, Placement, TaskGraph
from dhir.placement.list_scheduling import ALGORITHMS, heft
from dhir.placement.residency import (
    first_overflow,
    fitting,
    oversized,
    peak_resident,
    residents,
)
from dhir.placement.simulate import simulate

# T1 and T2 feed T3: T3's device holds all three while T3 runs.
GRAPH = TaskGraph(
    ("a", "b"),
    ("T1", "T2", "T3"),
    {t: {"a": 1.0, "b": 2.0} for t in ("T1", "T2", "T3")},
    (Edge("T1", "T3", 1.0), Edge("T2", "T3", 1.0)),
    memory={"T1": 60.0, "T2": 60.0, "T3": 10.0},
    capacity={"a": 140.0, "b": 75.0},
)


def placed(assignment: dict[str, str], start: list[float], finish: list[float]) -> Placement:
    tasks = list(assignment)
    return Placement(assignment, dict(zip(tasks, start)), dict(zip(tasks, finish)))


def test_data_stays_until_its_last_consumer_finishes_and_copies_while_they_run() -> None:
    placement = placed({"T1": "a", "T2": "b", "T3": "a"}, [0, 0, 3], [1, 2, 4])
    found = {(r.task, r.device): (r.begin, r.end, r.owner) for r in residents(GRAPH, placement)}
    assert found == {
        ("T1", "a"): (0, 4, "T1"),
        ("T2", "b"): (0, 4, "T2"),
        ("T2", "a"): (3, 4, "T3"),  # T3's copy of its input from b
        ("T3", "a"): (3, 4, "T3"),  # no successor: kept to the end
    }
    assert peak_resident(GRAPH, placement) == {"a": 130.0, "b": 60.0}
    over = first_overflow(replace(GRAPH, capacity={"a": 100.0}), placement)
    assert over is not None and (over.device, over.time, over.held) == ("a", 3, 130.0)
    assert first_overflow(GRAPH, placement) is None


def test_an_interval_ending_when_another_begins_does_not_add_up() -> None:
    chain = TaskGraph(
        ("a",),
        ("T1", "T2", "T3"),
        {t: {"a": 1.0} for t in ("T1", "T2", "T3")},
        (Edge("T1", "T2", 0.0), Edge("T2", "T3", 0.0)),
        memory={"T1": 50.0, "T2": 50.0, "T3": 50.0},
        capacity={"a": 100.0},
    )
    placement = placed({"T1": "a", "T2": "a", "T3": "a"}, [0, 1, 2], [1, 2, 3])
    # T1's data lives until T2 finishes (2), T2's until T3 finishes, T3's to the end.
    assert peak_resident(chain, placement) == {"a": 100.0}
    zero = replace(chain, cost={t: {"a": 0.0} for t in chain.tasks})
    instant = placed({"T1": "a", "T2": "a", "T3": "a"}, [0, 0, 0], [0, 0, 0])
    assert peak_resident(zero, instant) == {"a": 150.0}


def test_fitting_moves_tasks_off_a_full_device() -> None:
    graph = replace(GRAPH, capacity={"a": 135.0, "b": 135.0})
    plain = heft(graph)  # all on a, the faster device: 130 bytes
    squeezed = replace(graph, capacity={"a": 125.0, "b": 135.0})
    assert first_overflow(squeezed, heft(squeezed)) is not None
    fitted = fitting(heft)(squeezed)
    assert first_overflow(squeezed, fitted) is None
    assert fitted.makespan >= plain.makespan
    assert fitting(heft)(replace(graph, capacity={})) == heft(replace(graph, capacity={}))


def test_memory_too_large_for_every_device_is_written_in_units() -> None:
    """`dhir run -n 2` of a task allocating 800 TB said "needs 8e+14 bytes of memory, more
    than any device that can run it has (rank0: 2.52761e+10, rank1: 2.52761e+10)"."""
    huge = replace(GRAPH, memory={"T1": 8e14, "T2": 60.0, "T3": 10.0})
    huge = replace(huge, capacity={"a": 25276059648.0, "b": 25276059648.0})
    with pytest.raises(DhirError) as caught:
        fitting(heft)(huge)
    message = str(caught.value)
    assert "task 'T1' needs 728 TiB" in message
    assert "(a: 23.5 GiB, b: 23.5 GiB)" in message
    with pytest.raises(DhirError) as caught:
        heft(huge)
    assert "task 'T1' needs 728 TiB of memory" in str(caught.value)
    assert "(a: 23.5 GiB, b: 23.5 GiB)" in str(caught.value)


def test_a_graph_that_cannot_fit_is_refused_naming_the_task_or_device() -> None:
    tight = replace(GRAPH, capacity={"a": 100.0, "b": 100.0})
    with pytest.raises(DhirError, match=r"task 'T3' needs 130 bytes resident while it runs"):
        fitting(heft)(tight)
    results = TaskGraph(  # two results kept to the end, on the one device
        ("a",),
        ("T1", "T2"),
        {"T1": {"a": 1.0}, "T2": {"a": 1.0}},
        (),
        memory={"T1": 60.0, "T2": 60.0},
        capacity={"a": 100.0},
    )
    with pytest.raises(
        DhirError, match=r"a would hold 120 bytes at time 1, more than its capacity 100"
    ):
        fitting(heft)(results)


@st.composite
def graphs(draw: st.DrawFn) -> TaskGraph:
    devices = tuple(f"d{k}" for k in range(draw(st.integers(1, 3))))
    n = draw(st.integers(1, 7))
    tasks = tuple(f"T{k}" for k in range(n))
    cost = {
        t: {
            d: float(draw(st.integers(0, 5)))
            for d in draw(st.lists(st.sampled_from(devices), min_size=1, unique=True))
        }
        for t in tasks
    }
    edges = tuple(
        Edge(tasks[i], tasks[j], float(draw(st.integers(0, 3))))
        for i in range(n)
        for j in range(i + 1, n)
        if draw(st.booleans())
    )
    memory = {t: float(draw(st.integers(0, 40))) for t in tasks}
    capacity = {d: float(draw(st.integers(40, 160))) for d in devices}
    return TaskGraph(devices, tasks, cost, edges, memory, capacity)


@settings(max_examples=300, deadline=None)
@given(graphs(), st.sampled_from(sorted(ALGORITHMS)))
def test_every_algorithm_fits_or_refuses(graph: TaskGraph, algorithm: str) -> None:
    note(f"{graph}")
    try:
        placement = fitting(ALGORITHMS[algorithm])(graph)
    except DhirError as error:
        provably = oversized(graph)
        assert str(error).endswith(provably) if provably else "cannot fit" in str(error)
        return
    assert first_overflow(graph, placement) is None
    for task, device in placement.assignment.items():
        assert device in graph.cost[task]
    replay = simulate(graph, placement)
    if replay.placement.start == placement.start:  # the same times: the same verdict
        assert replay.overflow is None


def test_the_simulator_reports_a_placement_over_capacity() -> None:
    squeezed = replace(GRAPH, capacity={"a": 100.0, "b": 135.0})
    replay = simulate(squeezed, heft(squeezed))
    assert replay.overflow is not None and replay.overflow.device == "a"
    assert replay.peaks["a"] == 130.0


def test_dhir_schedule_places_a_graph_within_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.json"
    spec = {
        "devices": ["a", "b"],
        "capacity": {"a": 125, "b": 135},
        "tasks": {t: {"cost": {"a": 1, "b": 2}, "memory": m} for t, m in GRAPH.memory.items()},
        "edges": [{"from": e.source, "to": e.target, "comm": e.comm} for e in GRAPH.edges],
    }
    path.write_text(json.dumps(spec))
    assert main(["schedule", "--graph", str(path), "--simulate"]) == 0
    out = capsys.readouterr().out
    assert "peak resident bytes: a " in out and "of 125" in out and "simulated memory" not in out
    assert main(["schedule", "--graph", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["capacity"] == {"a": 125, "b": 135}
    assert all(data["peak_resident"][d] <= data["capacity"][d] for d in ("a", "b"))
    spec["capacity"] = {"a": 100, "b": 100}
    path.write_text(json.dumps(spec))
    assert main(["schedule", "--graph", str(path)]) == 1
    assert "task 'T3' needs 130 bytes resident" in capsys.readouterr().err
