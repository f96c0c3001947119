"""Placement on devices of several nodes: an edge between nodes costs its `remote` time
(the network's), one inside a node its `comm` (docs/commands.md, `dhir schedule --graph`);
and with links by pair of devices (`TaskGraph.links`), an edge's bytes over its pair's."""

import pytest

from dhir.ir.diagnostics import DhirError
from dhir.placement.graph import Edge, Links, TaskGraph
from dhir.placement.list_scheduling import ALGORITHMS
from dhir.placement.simulate import simulate

DEVICES = ["r0", "r1", "r2", "r3"]
TWO_NODES = {"r0": "n0", "r1": "n0", "r2": "n1", "r3": "n1"}  # 2 ranks per node


def two_forks(remote: float | None, nodes: dict[str, str] | None = TWO_NODES) -> TaskGraph:
    """Two independent forks Ak -> Bk, Ck: each fork's transfers stay inside a node only if
    the fork has a node of its own."""
    tasks, edges = {}, []
    for k in (1, 2):
        for name, cost in (("A", 10.0), ("B", 30.0), ("C", 30.0)):
            tasks[f"{name}{k}"] = {"cost": dict.fromkeys(DEVICES, cost)}
        for child in ("B", "C"):
            edge: dict[str, object] = {"from": f"A{k}", "to": f"{child}{k}", "comm": 1.0}
            if remote is not None:
                edge["remote"] = remote
            edges.append(edge)
    data: dict[str, object] = {"devices": DEVICES, "tasks": tasks, "edges": edges}
    if nodes is not None:
        data["nodes"] = nodes
    return TaskGraph.from_json(data)


def crossing(graph: TaskGraph, assignment: dict[str, str]) -> int:
    return sum(
        graph.nodes[assignment[e.source]] != graph.nodes[assignment[e.target]] for e in graph.edges
    )


def test_heavy_transfers_stay_inside_a_node() -> None:
    # Without the network's cost, best spreads the forks over both nodes (HEFT's choice).
    flat = ALGORITHMS["best"](two_forks(None))
    assert crossing(two_forks(None), flat.assignment) > 0
    graph = two_forks(50.0)
    placed = ALGORITHMS["best"](graph)
    assert crossing(graph, placed.assignment) == 0
    assert placed.makespan == 10 + 1 + 30  # each fork on a node of its own
    # The replay prices each edge between the devices it joins, as the scheduler did.
    assert simulate(graph, placed).makespan == placed.makespan


@pytest.mark.parametrize("algorithm", ["heft", "peft", "best"])
def test_a_slower_network_moves_more_inside_nodes(algorithm: str) -> None:
    crossings = []
    for remote in (1.0, 5.0, 50.0):
        graph = two_forks(remote)
        crossings.append(crossing(graph, ALGORITHMS[algorithm](graph).assignment))
    assert crossings == sorted(crossings, reverse=True) and crossings[-1] == 0
    assert crossings[0] > 0


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_without_costlier_transfers_nodes_change_nothing(algorithm: str) -> None:
    place = ALGORITHMS[algorithm]
    before = place(two_forks(None, nodes=None))
    # Nodes given but the network as fast as the node's link, or no edges at all.
    assert place(two_forks(1.0)).assignment == before.assignment
    assert place(two_forks(None)).assignment == before.assignment
    tasks = {f"T{k}": {"cost": dict.fromkeys(DEVICES, 1.0 + k)} for k in range(6)}
    alone = {"devices": DEVICES, "tasks": tasks, "edges": []}
    expected = place(TaskGraph.from_json(alone)).assignment
    assert place(TaskGraph.from_json({**alone, "nodes": TWO_NODES})).assignment == expected


def test_simulate_prices_edges_by_nodes() -> None:
    graph = two_forks(50.0)
    everywhere = {"A1": "r0", "B1": "r2", "C1": "r1", "A2": "r3", "B2": "r1", "C2": "r2"}
    placement = ALGORITHMS["round-robin"](graph)
    placement.assignment = everywhere
    replay = simulate(graph, placement)
    assert replay.placement.finish["B1"] == 10 + 50 + 30  # r0 -> r2: between nodes
    assert replay.placement.start["C1"] >= 10 + 1  # r0 -> r1: inside n0


def linked_fork(links: Links | None) -> TaskGraph:
    """A -> B, A -> C moving 100 bytes each, on r0 and r1 (class 0, 0.01 s a byte between
    them) and r2 and r3 (class 1, 1 s a byte to or from anything), whose mean (comm,
    over every pair) is 67 s, more than running B and C one after the other."""
    cost = {
        task: dict.fromkeys(DEVICES, time) for task, time in (("A", 10.0), ("B", 30.0), ("C", 30.0))
    }
    edges = tuple(Edge("A", child, 67.0, None, 100.0) for child in ("B", "C"))
    return TaskGraph(tuple(DEVICES), ("A", "B", "C"), cost, edges, links=links)


@pytest.mark.parametrize("algorithm", ["heft", "peft", "best"])
def test_edges_cost_the_link_of_the_devices_they_join(algorithm: str) -> None:
    # Timed at the mean, B and C ran after A on its device (70 s); between r0 and r1 the
    # transfer takes 1 s, so they run at once there.
    slow = ((0.0, 0.0), (0.0, 0.0)), ((0.01, 1.0), (1.0, 1.0))
    links = Links({"r0": 0, "r1": 0, "r2": 1, "r3": 1}, *slow)
    graph = linked_fork(links)
    placed = ALGORITHMS[algorithm](graph)
    assert placed.makespan == pytest.approx(10 + 1 + 30)
    assert {placed.assignment[t] for t in "ABC"} == {"r0", "r1"}
    assert simulate(graph, placed).makespan == placed.makespan
    assert ALGORITHMS[algorithm](linked_fork(None)).makespan == 70


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ({"r0": "n0"}, "device 'r1' has no node"),
        ({**TWO_NODES, "x": "n0"}, "unknown device 'x'"),
        ({"r0": 1}, "device name -> node name"),
    ],
)
def test_bad_nodes_are_errors(nodes: dict[str, object], message: str) -> None:
    data = {"devices": DEVICES, "tasks": {"T": {"cost": {"r0": 1.0}}}, "nodes": nodes}
    with pytest.raises(DhirError, match=message):
        TaskGraph.from_json(data)


@pytest.mark.parametrize(
    ("of", "said"),
    [
        ({"r0": 0, "r1": 0, "r2": 1}, "no class of its 2 to r3"),
        ({"r0": 0, "r1": 0, "r2": 1, "r3": 2}, "no class of its 2 to r3"),
    ],
)
def test_links_without_a_class_for_a_device_are_refused(of: dict[str, int], said: str) -> None:
    """A hand-made graph whose links leave a device out failed placing it with a KeyError
    (or an IndexError for a class beyond the tables)."""
    table = ((0.0, 0.0), (0.0, 0.0))
    with pytest.raises(DhirError, match=f"the task graph's links give {said}"):
        linked_fork(Links(of, table, table))
