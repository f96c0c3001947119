"""Task graphs for testing and benchmarking placement, all from fixed seeds.

- `random_graph`: random layered graphs in the style of Topcuoglu, Hariri and Wu 2002
  (size, CCR, shape, heterogeneity, device count).
- `gaussian_elimination`, `fft`, `cholesky`: the task graphs of those computations on a
  machine of CPUs and GPUs (`Machine`), where each kind of task has a cost on each kind
  of device (`KERNELS`).

CCR (communication to computation ratio) is the mean edge comm over the mean task cost
(each task's cost averaged over the devices). Heterogeneity h spreads each task's cost
on each device uniformly within +-h/2 of its cost on that kind of device.
"""

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from dhir.placement.graph import Edge, TaskGraph

MEAN_COST = 50.0  # the random graphs' mean task cost; only ratios matter


def random_graph(
    seed: int, size: int, ccr: float, shape: float, heterogeneity: float, n_devices: int
) -> TaskGraph:
    """`size` tasks in about sqrt(size)/shape levels of mean width shape*sqrt(size); each
    task's mean cost is uniform in [1, 2*MEAN_COST), its cost on each device uniform within
    +-heterogeneity/2 of that mean; each task has one to three parents in the level above
    and feeds the level below; edge comm is uniform in [0, 2*CCR*MEAN_COST]."""
    rng = random.Random(seed)
    devices = tuple(f"d{k}" for k in range(n_devices))
    levels = _levels(rng, size, shape)
    tasks = tuple(f"t{i}" for i in range(size))
    cost = {}
    for task in tasks:
        mean = rng.uniform(1.0, 2 * MEAN_COST)
        low, high = mean * (1 - heterogeneity / 2), mean * (1 + heterogeneity / 2)
        cost[task] = {d: rng.uniform(low, high) for d in devices}
    edges = []
    for above, level in zip(levels, levels[1:]):
        fed = set()
        for target in level:
            for source in rng.sample(above, min(len(above), rng.randint(1, 3))):
                edges.append(Edge(tasks[source], tasks[target], _random_comm(rng, ccr)))
                fed.add(source)
        for source in above:  # no dead ends: every task feeds the next level
            if source not in fed:
                edges.append(Edge(tasks[source], tasks[rng.choice(level)], _random_comm(rng, ccr)))
    return TaskGraph(devices, tasks, cost, tuple(_dedup(edges)))


def _levels(rng: random.Random, size: int, shape: float) -> list[list[int]]:
    width = max(1.0, shape * math.sqrt(size))
    levels, placed = [], 0
    while placed < size:
        count = min(size - placed, max(1, round(rng.uniform(1, 2 * width - 1))))
        levels.append(list(range(placed, placed + count)))
        placed += count
    return levels


def _random_comm(rng: random.Random, ccr: float) -> float:
    return rng.uniform(0.0, 2 * ccr * MEAN_COST)


def _dedup(edges: Iterable[Edge]) -> list[Edge]:
    seen: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        seen.setdefault((edge.source, edge.target), edge)
    return list(seen.values())


# --- computations on CPUs and GPUs ------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    cpus: int
    gpus: int

    @property
    def devices(self) -> tuple[str, ...]:
        return (*(f"cpu{k}" for k in range(self.cpus)), *(f"gpu{k}" for k in range(self.gpus)))

    @staticmethod
    def kind(device: str) -> str:
        return "gpu" if device.startswith("gpu") else "cpu"


# A few cores and GPUs per node, as in the benchmark's 4, 8 and 16 devices.
MACHINES = {4: Machine(2, 2), 8: Machine(6, 2), 16: Machine(12, 4)}

# Cost of each kind of task on one CPU core, and how many times faster a GPU runs it.
# Illustrative, not measured: GPUs gain most on the regular, compute-bound kernels (GEMM,
# the elimination updates, butterflies) and least, or lose, on the small sequential ones
# (POTRF, pivoting, the recursive splits) where launch and latency dominate.
KERNELS: dict[str, dict[str, tuple[float, float]]] = {
    "cholesky": {
        "potrf": (1.0, 1.5),
        "trsm": (3.0, 6.0),
        "syrk": (3.0, 12.0),
        "gemm": (6.0, 25.0),
    },
    "gaussian": {"pivot": (1.0, 0.5), "update": (2.0, 10.0)},
    "fft": {"split": (1.0, 0.5), "butterfly": (2.0, 6.0)},
}


class _Builder:
    """Tasks with a kind and a work scale, and edges carrying data volumes, turned into a
    TaskGraph with costs from KERNELS and comm scaled to the CCR."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.tasks: list[str] = []
        self.kinds: dict[str, str] = {}
        self.work: dict[str, float] = {}
        self.edges: list[tuple[str, str, float]] = []

    def task(self, name: str, kind: str, work: float = 1.0) -> str:
        self.tasks.append(name)
        self.kinds[name], self.work[name] = kind, work
        return name

    def edge(self, source: str, target: str, volume: float = 1.0) -> None:
        self.edges.append((source, target, volume))

    def graph(
        self, rng: random.Random, machine: Machine, ccr: float, heterogeneity: float
    ) -> TaskGraph:
        devices = machine.devices
        kernels = KERNELS[self.family]
        cost = {}
        for task in self.tasks:
            cpu, speedup = kernels[self.kinds[task]]
            base = {"cpu": cpu * self.work[task], "gpu": cpu * self.work[task] / speedup}
            cost[task] = {d: base[machine.kind(d)] * _spread(rng, heterogeneity) for d in devices}
        mean_cost = sum(sum(row.values()) / len(row) for row in cost.values()) / len(cost)
        mean_volume = sum(v for _, _, v in self.edges) / max(len(self.edges), 1)
        scale = ccr * mean_cost / mean_volume if self.edges else 0.0
        edges = tuple(
            Edge(s, t, scale * volume * rng.uniform(0.5, 1.5)) for s, t, volume in self.edges
        )
        return TaskGraph(devices, tuple(self.tasks), cost, edges)


def _spread(rng: random.Random, heterogeneity: float) -> float:
    return rng.uniform(1 - heterogeneity / 2, 1 + heterogeneity / 2)


def gaussian_elimination(
    seed: int, matrix: int, ccr: float, heterogeneity: float, machine: Machine
) -> TaskGraph:
    """Topcuoglu et al.'s Gaussian elimination graph for a `matrix` x `matrix` system:
    for each column k a pivot task, then one update per later column j, which feeds
    column j's update (or pivot) of step k+1. (matrix^2 + matrix - 2) / 2 tasks; the work
    of step k's tasks, and the rows they pass on, shrink with matrix - k."""
    if matrix < 2:
        raise ValueError("gaussian_elimination needs a matrix of at least 2 x 2")
    build = _Builder("gaussian")
    previous: dict[int, str] = {}  # column -> the task of the last step that updated it
    for k in range(matrix - 1):
        rows = matrix - k
        pivot = build.task(f"p{k}", "pivot", rows)
        if k in previous:
            build.edge(previous[k], pivot, rows)
        for j in range(k + 1, matrix):
            update = build.task(f"u{k}_{j}", "update", rows)
            build.edge(pivot, update, rows)
            if j in previous:
                build.edge(previous[j], update, rows)
            previous[j] = update
    return build.graph(random.Random(seed), machine, ccr, heterogeneity)


def fft(seed: int, points: int, ccr: float, heterogeneity: float, machine: Machine) -> TaskGraph:
    """Topcuoglu et al.'s FFT graph for `points` inputs (a power of two): a binary tree of
    2*points - 1 recursive-split tasks, whose leaves feed log2(points) levels of
    `points` butterfly tasks each; butterfly i of level l reads i and i xor 2^(l-1) of
    the level before."""
    if points < 2 or points & (points - 1):
        raise ValueError("fft needs a power of two of at least 2 points")
    build = _Builder("fft")
    tree = [build.task("s0", "split")]
    node = 1
    while len(tree) < points:  # each level of the tree doubles
        level = []
        for parent in tree:
            for _ in range(2):
                child = build.task(f"s{node}", "split")
                node += 1
                build.edge(parent, child)
                level.append(child)
        tree = level
    before = tree
    for lvl in range(1, points.bit_length()):
        level = [build.task(f"b{lvl}_{i}", "butterfly") for i in range(points)]
        for i, task in enumerate(level):
            build.edge(before[i], task)
            build.edge(before[i ^ (1 << (lvl - 1))], task)
        before = level
    return build.graph(random.Random(seed), machine, ccr, heterogeneity)


def cholesky(
    seed: int, tiles: int, ccr: float, heterogeneity: float, machine: Machine
) -> TaskGraph:
    """Right-looking tiled Cholesky of a `tiles` x `tiles` matrix of tiles: for each k,
    POTRF of tile (k, k), TRSM of each (i, k) below it, then SYRK of each (i, i) and GEMM
    of each (i, j), k < j < i. Each task reads the tiles it needs from their last writers
    and waits for the last writer of the tile it updates; every edge moves one tile."""
    if tiles < 1:
        raise ValueError("cholesky needs at least one tile")
    build = _Builder("cholesky")
    writer: dict[tuple[int, int], str] = {}

    def update(task: str, tile: tuple[int, int], *reads: tuple[int, int]) -> None:
        for source in dict.fromkeys(writer[t] for t in (tile, *reads) if t in writer):
            build.edge(source, task)
        writer[tile] = task

    for k in range(tiles):
        update(build.task(f"potrf{k}", "potrf"), (k, k))
        for i in range(k + 1, tiles):
            update(build.task(f"trsm{i}_{k}", "trsm"), (i, k), (k, k))
        for i in range(k + 1, tiles):
            update(build.task(f"syrk{i}_{k}", "syrk"), (i, i), (i, k))
            for j in range(k + 1, i):
                update(build.task(f"gemm{i}_{j}_{k}", "gemm"), (i, j), (i, k), (j, k))
    return build.graph(random.Random(seed), machine, ccr, heterogeneity)


FAMILIES = {"gaussian": gaussian_elimination, "fft": fft, "cholesky": cholesky}
