"""The task graph generators the placement tests and benchmark share: sizes and shapes as
the computations have them, costs per kind of device, CCR, determinism."""

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhir.placement.generators import (
    FAMILIES,
    KERNELS,
    MACHINES,
    Machine,
    cholesky,
    fft,
    gaussian_elimination,
    random_graph,
)
from dhir.placement.graph import TaskGraph


def check_well_formed(graph: TaskGraph) -> None:
    """Tasks in topological order, every task runnable everywhere at a positive cost,
    edges between known tasks, non-negative, no duplicates."""
    position = {task: k for k, task in enumerate(graph.tasks)}
    assert len(position) == len(graph.tasks)
    for task in graph.tasks:
        assert set(graph.cost[task]) == set(graph.devices)
        assert all(c > 0 for c in graph.cost[task].values())
    pairs = [(e.source, e.target) for e in graph.edges]
    assert len(pairs) == len(set(pairs))
    for edge in graph.edges:
        assert position[edge.source] < position[edge.target]
        assert edge.comm >= 0


def measured_ccr(graph: TaskGraph) -> float:
    mean_cost = statistics.mean(statistics.mean(row.values()) for row in graph.cost.values())
    return statistics.mean(e.comm for e in graph.edges) / mean_cost


@pytest.mark.parametrize("matrix", [2, 3, 5, 10])
def test_gaussian_elimination_has_topcuoglus_task_count(matrix: int) -> None:
    graph = gaussian_elimination(0, matrix, 1.0, 0.5, MACHINES[4])
    check_well_formed(graph)
    assert len(graph.tasks) == (matrix * matrix + matrix - 2) // 2


def test_gaussian_elimination_structure() -> None:
    graph = gaussian_elimination(0, 3, 1.0, 0.5, MACHINES[4])
    edges = {(e.source, e.target) for e in graph.edges}
    assert edges == {
        ("p0", "u0_1"),
        ("p0", "u0_2"),
        ("u0_1", "p1"),
        ("p1", "u1_2"),
        ("u0_2", "u1_2"),
    }


@pytest.mark.parametrize("points", [2, 4, 8, 32])
def test_fft_has_tree_plus_butterflies(points: int) -> None:
    graph = fft(0, points, 1.0, 0.5, MACHINES[8])
    check_well_formed(graph)
    levels = int(math.log2(points))
    assert len(graph.tasks) == 2 * points - 1 + points * levels
    # Each butterfly reads two tasks; each split task but the root reads its parent.
    assert len(graph.edges) == 2 * points - 2 + 2 * points * levels


def test_fft_butterflies_pair_across_the_level_stride() -> None:
    graph = fft(0, 4, 1.0, 0.5, MACHINES[4])
    inputs = {t: sorted(e.source for e in graph.predecessors(t)) for t in graph.tasks}
    assert inputs["b2_0"] == ["b1_0", "b1_2"]
    assert inputs["b1_3"] == ["s5", "s6"]


@pytest.mark.parametrize("tiles", [1, 2, 3, 6])
def test_cholesky_has_one_task_per_kernel_call(tiles: int) -> None:
    graph = cholesky(0, tiles, 1.0, 0.5, MACHINES[16])
    check_well_formed(graph)
    pairs = tiles * (tiles - 1) // 2
    assert len(graph.tasks) == tiles + 2 * pairs + tiles * (tiles - 1) * (tiles - 2) // 6


def test_cholesky_dependences_follow_the_tiles() -> None:
    graph = cholesky(0, 3, 1.0, 0.5, MACHINES[4])
    inputs = {t: sorted(e.source for e in graph.predecessors(t)) for t in graph.tasks}
    assert inputs["potrf0"] == []
    assert inputs["gemm2_1_0"] == ["trsm1_0", "trsm2_0"]
    assert inputs["potrf1"] == ["syrk1_0"]
    assert inputs["trsm2_1"] == ["gemm2_1_0", "potrf1"]
    assert inputs["syrk2_1"] == ["syrk2_0", "trsm2_1"]
    assert inputs["potrf2"] == ["syrk2_1"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_costs_per_kind_of_device(family: str) -> None:
    """Without heterogeneity, a task costs the same on every device of a kind, and a GPU
    runs it the kernel's speedup times faster than a CPU."""
    graph = FAMILIES[family](3, 4 if family != "fft" else 8, 1.0, 0.0, Machine(2, 2))
    speedups = {speedup for _, speedup in KERNELS[family].values()}
    for row in graph.cost.values():
        assert row["cpu0"] == row["cpu1"] and row["gpu0"] == row["gpu1"]
        assert any(math.isclose(row["cpu0"] / row["gpu0"], s) for s in speedups)


def test_machines_name_cpus_then_gpus() -> None:
    assert Machine(2, 1).devices == ("cpu0", "cpu1", "gpu0")
    assert [len(m.devices) for m in MACHINES.values()] == list(MACHINES)


@pytest.mark.parametrize("ccr", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_families_have_the_ccr_asked_for(family: str, ccr: float) -> None:
    graph = FAMILIES[family](1, 8 if family != "fft" else 32, ccr, 0.5, MACHINES[8])
    assert measured_ccr(graph) == pytest.approx(ccr, rel=0.15)


@pytest.mark.parametrize("ccr", [0.1, 1.0, 10.0])
def test_random_graphs_have_about_the_ccr_asked_for(ccr: float) -> None:
    graph = random_graph(7, 500, ccr, 1.0, 0.5, 8)
    assert measured_ccr(graph) == pytest.approx(ccr, rel=0.2)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(1, 120),
    st.sampled_from([0.1, 1.0, 10.0]),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from([0.1, 0.5, 1.0]),
    st.integers(1, 16),
)
def test_random_graphs_are_well_formed_layers(
    seed: int, size: int, ccr: float, shape: float, het: float, n_devices: int
) -> None:
    graph = random_graph(seed, size, ccr, shape, het, n_devices)
    check_well_formed(graph)
    assert len(graph.tasks) == size and len(graph.devices) == n_devices
    for row in graph.cost.values():  # within +-het/2 of one mean
        assert max(row.values()) <= min(row.values()) * (1 + het / 2) / (1 - het / 2) + 1e-9
    # Levels are numbered in order: the last one holds the exits, the first the entries.
    exits = [t for t in graph.tasks if not graph.successors(t)]
    entries = [t for t in graph.tasks if not graph.predecessors(t)]
    assert exits == list(graph.tasks[len(graph.tasks) - len(exits) :])
    assert entries == list(graph.tasks[: len(entries)])


@pytest.mark.parametrize(
    "make",
    [lambda s: random_graph(s, 60, 1.0, 1.0, 0.5, 4)]
    + [
        lambda s, f=f: f(s, 4 if f is not fft else 8, 1.0, 0.5, MACHINES[4])
        for f in FAMILIES.values()
    ],
)
def test_same_seed_same_graph(make: object) -> None:
    assert make(5) == make(5)  # type: ignore[operator]
    assert make(5) != make(6)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("make", "size"),
    [(gaussian_elimination, 1), (fft, 6), (fft, 1), (cholesky, 0)],
)
def test_bad_sizes_are_refused(make: object, size: int) -> None:
    with pytest.raises(ValueError):
        make(0, size, 1.0, 0.5, MACHINES[4])  # type: ignore[operator]
