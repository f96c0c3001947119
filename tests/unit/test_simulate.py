"""The discrete-event simulator: it reproduces the list schedulers' own predictions on a
contention-free network, contention only ever delays, small cases worked by hand, and
bad placements reported as errors."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhir import DhirError
from dhir.placement.generators import random_graph
from dhir.placement.graph import Edge, Placement, TaskGraph
from dhir.placement.list_scheduling import ALGORITHMS
from dhir.placement.simulate import (
    Contentionless,
    Network,
    PairLinks,
    SharedNic,
    simulate,
)

# --- random graphs ----------------------------------------------------------------------


@st.composite
def layered_graphs(draw: st.DrawFn) -> TaskGraph:
    """bench/schedule_quality.py's graphs: layered, costs spread by heterogeneity across
    devices, comm about CCR times compute."""
    return random_graph(
        draw(st.integers(0, 2**32)),
        draw(st.integers(0, 40)),
        draw(st.sampled_from((0.1, 1.0, 10.0))),
        draw(st.sampled_from((0.5, 1.0, 2.0))),
        draw(st.sampled_from((0.0, 0.5, 1.0))),
        draw(st.integers(1, 6)),
    )


@st.composite
def odd_graphs(draw: st.DrawFn) -> TaskGraph:
    """Small graphs with what layered ones lack: zero costs and comms, integer times that
    tie, tasks only some devices can run."""
    devices = tuple(f"d{k}" for k in range(draw(st.integers(1, 4))))
    tasks = tuple(f"t{i}" for i in range(draw(st.integers(0, 12))))
    times = st.integers(0, 6) | st.floats(0, 20, allow_nan=False)
    cost = {}
    for task in tasks:
        runnable = draw(st.lists(st.sampled_from(devices), min_size=1, unique=True))
        cost[task] = {d: float(draw(times)) for d in devices if d in runnable}
    edges = []
    for j in range(len(tasks)):
        for i in draw(st.sets(st.integers(0, j - 1), max_size=3) if j else st.just(set())):
            edges.append(Edge(tasks[i], tasks[j], float(draw(times))))
    return TaskGraph(devices, tasks, cost, tuple(edges))


def any_graph() -> st.SearchStrategy[TaskGraph]:
    return layered_graphs() | odd_graphs()


# --- against the list schedulers --------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(any_graph())
def test_contention_free_replay_reproduces_every_scheduler(graph: TaskGraph) -> None:
    for name, algorithm in ALGORITHMS.items():
        placement = algorithm(graph)
        replay = simulate(graph, placement)
        # Same arithmetic on the same floats, so equal, not just close.
        assert replay.placement == placement, name
        assert replay.makespan == placement.makespan


def check_valid(graph: TaskGraph, result: Placement, network: Network) -> None:
    for task in graph.tasks:
        device = result.assignment[task]
        assert result.finish[task] == result.start[task] + graph.cost[task][device]
    for edge in graph.edges:
        source, target = result.assignment[edge.source], result.assignment[edge.target]
        paid = edge.comm if source != target else 0.0
        assert result.start[edge.target] >= result.finish[edge.source] + paid - 1e-9
    for device in graph.devices:
        runs = sorted(
            (result.start[t], result.finish[t])
            for t in graph.tasks
            if result.assignment[t] == device
        )
        for (_, end), (begin, _) in zip(runs, runs[1:]):
            assert begin >= end


@settings(max_examples=200, deadline=None)
@given(any_graph(), st.integers(1, 3))
def test_contention_only_delays(graph: TaskGraph, per_node: int) -> None:
    placement = ALGORITHMS["heft"](graph)
    free = simulate(graph, placement).placement
    networks: list[Network] = [PairLinks(), SharedNic.grouped(graph.devices, per_node)]
    for network in networks:
        result = simulate(graph, placement, network)
        check_valid(graph, result.placement, network)
        assert result.placement.assignment == placement.assignment
        for task in graph.tasks:
            assert result.placement.start[task] >= free.start[task]
        assert result.link_wait >= 0.0


# --- worked by hand ---------------------------------------------------------------------


def fan_in(comm: float = 5.0) -> TaskGraph:
    """a and b (cost 1) both feed c (cost 1)."""
    devices = ("d0", "d1", "d2")
    cost = {t: dict.fromkeys(devices, 1.0) for t in ("a", "b", "c")}
    edges = (Edge("b", "c", comm), Edge("a", "c", comm))
    return TaskGraph(devices, ("a", "b", "c"), cost, edges)


def placed(assignment: dict[str, str], start: dict[str, float]) -> Placement:
    return Placement(assignment, start, {t: s + 1.0 for t, s in start.items()})


def test_a_node_nic_carries_one_transfer_at_a_time() -> None:
    # a on d0 and b on d1 (node n0) both send to c on d2 (node n1) when they finish at 1.
    graph = fan_in()
    placement = placed({"a": "d0", "b": "d1", "c": "d2"}, {"a": 0.0, "b": 0.0, "c": 6.0})
    assert simulate(graph, placement).makespan == 7.0
    nic = SharedNic({"d0": "n0", "d1": "n0", "d2": "n1"})
    result = simulate(graph, placement, nic)
    # a's transfer (the earlier task on a tie) 1-6, then b's 6-11; c runs 11-12.
    assert result.placement.start["c"] == 11.0
    assert result.makespan == 12.0
    assert result.transfers == 2
    assert result.link_wait == 5.0


def test_transfers_inside_a_node_do_not_queue() -> None:
    graph = fan_in()
    placement = placed({"a": "d0", "b": "d1", "c": "d2"}, {"a": 0.0, "b": 0.0, "c": 6.0})
    one_node = SharedNic.grouped(graph.devices, 3)
    assert simulate(graph, placement, one_node).makespan == 7.0
    # Separate nodes: separate NICs.
    assert simulate(graph, placement, SharedNic.grouped(graph.devices, 1)).makespan == 7.0


def test_a_pair_link_queues_in_request_order() -> None:
    # a (0-1) then b (1-2) on d0, both sending to c on d1. The edges list b's first, but a's
    # transfer is requested first: 1-6, then b's 6-11.
    graph = fan_in()
    placement = placed({"a": "d0", "b": "d0", "c": "d1"}, {"a": 0.0, "b": 1.0, "c": 7.0})
    assert simulate(graph, placement).placement.start["c"] == 7.0
    result = simulate(graph, placement, PairLinks())
    assert result.placement.start["c"] == 11.0
    assert result.link_wait == 4.0


def test_devices_keep_the_placements_order() -> None:
    # Two independent tasks on one device, the later one first in the placement.
    graph = TaskGraph(("d0",), ("x", "y"), {"x": {"d0": 2.0}, "y": {"d0": 3.0}}, ())
    result = simulate(
        graph, Placement({"x": "d0", "y": "d0"}, {"x": 3.0, "y": 0.0}, {"x": 5.0, "y": 3.0})
    )
    assert result.placement.start == {"y": 0.0, "x": 3.0}
    # Start times that left idle gaps are packed: only the order is kept.
    gappy = Placement({"x": "d0", "y": "d0"}, {"x": 10.0, "y": 20.0}, {"x": 12.0, "y": 23.0})
    assert simulate(graph, gappy).placement.start == {"x": 0.0, "y": 2.0}


def test_empty_graph() -> None:
    graph = TaskGraph(("d0",), (), {}, ())
    result = simulate(graph, Placement({}, {}, {}))
    assert result.makespan == 0.0
    assert result.transfers == 0


# --- bad input --------------------------------------------------------------------------


def two_tasks() -> TaskGraph:
    cost = {"x": {"d0": 1.0}, "y": {"d0": 1.0, "d1": 1.0}}
    return TaskGraph(("d0", "d1"), ("x", "y"), cost, (Edge("x", "y", 1.0),))


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        (Placement({"x": "d0"}, {"x": 0.0}, {"x": 1.0}), "does not place task 'y'"),
        (
            Placement({"x": "d1", "y": "d1"}, {"x": 0, "y": 1}, {"x": 1, "y": 2}),
            "task 'x' is placed on 'd1', which cannot run it",
        ),
        (
            Placement({"x": "d0", "y": "gpu"}, {"x": 0, "y": 1}, {"x": 1, "y": 2}),
            "task 'y' is placed on 'gpu'",
        ),
        (
            Placement({"x": "d0", "y": "d0"}, {"x": 0}, {"x": 1}),
            "no start or finish for task 'y'",
        ),
        (
            # y before x on d0, but y needs x.
            Placement({"x": "d0", "y": "d0"}, {"x": 5, "y": 0}, {"x": 6, "y": 1}),
            "contradicts the edges",
        ),
    ],
)
def test_bad_placements_are_reported(placement: Placement, message: str) -> None:
    with pytest.raises(DhirError, match=message):
        simulate(two_tasks(), placement)


def test_devices_outside_the_node_map_are_reported() -> None:
    placement = Placement({"x": "d0", "y": "d1"}, {"x": 0, "y": 2}, {"x": 1, "y": 3})
    with pytest.raises(DhirError, match="device 'd1' belongs to no node"):
        simulate(two_tasks(), placement, SharedNic({"d0": "n0"}))
    with pytest.raises(DhirError, match="at least one device"):
        SharedNic.grouped(("d0",), 0)


def test_the_default_network_is_contention_free() -> None:
    assert Contentionless().link("d0", "d1") is None
