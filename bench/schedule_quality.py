"""Placement quality and speed on random task graphs in the style of Topcuoglu et al. 2002.

    .venv/bin/python bench/schedule_quality.py [--quick]

Graphs: v tasks in about sqrt(v)/shape levels of mean width shape*sqrt(v); each task's mean
cost is uniform in [0, 2*W] and its cost on each device uniform within +-heterogeneity/2 of
that mean; edge comm is uniform in [0, 2*CCR*W] so comm/compute is about CCR. Fixed seeds.

Prints mean makespan ratios (best/heft, best/peft, peft/heft; < 1 means the first wins),
mean SLR (makespan over the critical path at each task's fastest cost, >= 1), how often
`best` is better/equal/worse than each baseline, and how many tasks per second each
scheduler places at 16 devices (goal: >= 50,000/s).
"""

import argparse
import itertools
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir.placement.graph import Edge, Placement, TaskGraph  # noqa: E402
from dhir.placement.list_scheduling import best, heft, peft  # noqa: E402

MEAN_COST = 50.0


def random_graph(
    seed: int, size: int, ccr: float, shape: float, heterogeneity: float, n_devices: int
) -> TaskGraph:
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
            # One to three parents from the level above.
            for source in rng.sample(above, min(len(above), rng.randint(1, 3))):
                edges.append(Edge(tasks[source], tasks[target], _comm(rng, ccr)))
                fed.add(source)
        for source in above:  # no dead ends: every task feeds the next level
            if source not in fed:
                edges.append(Edge(tasks[source], tasks[rng.choice(level)], _comm(rng, ccr)))
    return TaskGraph(devices, tasks, cost, tuple(_dedup(edges)))


def _levels(rng: random.Random, size: int, shape: float) -> list[list[int]]:
    width = max(1.0, shape * math.sqrt(size))
    levels, placed = [], 0
    while placed < size:
        count = min(size - placed, max(1, round(rng.uniform(1, 2 * width - 1))))
        levels.append(list(range(placed, placed + count)))
        placed += count
    return levels


def _comm(rng: random.Random, ccr: float) -> float:
    return rng.uniform(0.0, 2 * ccr * MEAN_COST)


def _dedup(edges: list[Edge]) -> list[Edge]:
    seen: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        seen.setdefault((edge.source, edge.target), edge)
    return list(seen.values())


def slr(graph: TaskGraph, placement: Placement) -> float:
    """Makespan over the longest path at each task's fastest cost (a lower bound)."""
    index = {t: i for i, t in enumerate(graph.tasks)}
    longest = [0.0] * len(graph.tasks)
    for i, task in enumerate(graph.tasks):
        before = max((longest[index[e.source]] for e in graph.predecessors(task)), default=0.0)
        longest[i] = before + min(graph.cost[task].values())
    return placement.makespan / max(longest, default=1.0)


def grid(quick: bool) -> list[tuple[int, float, float, float, int]]:
    if quick:
        sizes, ccrs, shapes, hets = (20, 100, 300), (0.1, 1.0, 10.0), (0.5, 2.0), (0.1, 1.0)
    else:
        sizes = (20, 50, 100, 200, 500, 1000)
        ccrs, shapes, hets = (0.1, 0.5, 1.0, 5.0, 10.0), (0.5, 1.0, 2.0), (0.1, 0.5, 1.0)
    return list(itertools.product(sizes, ccrs, shapes, hets, (4, 8, 16)))


def quality(quick: bool) -> None:
    configs = grid(quick)
    ratios: dict[str, list[float]] = {"best/heft": [], "best/peft": [], "peft/heft": []}
    slrs: dict[str, list[float]] = {"heft": [], "peft": [], "best": []}
    counts = {"heft": [0, 0, 0], "peft": [0, 0, 0]}
    for seed, config in enumerate(configs):
        graph = random_graph(seed, *config)
        made = {name: fn(graph) for name, fn in (("heft", heft), ("peft", peft), ("best", best))}
        span = {name: p.makespan for name, p in made.items()}
        ratios["best/heft"].append(span["best"] / span["heft"])
        ratios["best/peft"].append(span["best"] / span["peft"])
        ratios["peft/heft"].append(span["peft"] / span["heft"])
        for name, placement in made.items():
            slrs[name].append(slr(graph, placement))
        for base in counts:
            diff = span["best"] - span[base]
            counts[base][0 if diff < -1e-9 else 1 if diff <= 1e-9 else 2] += 1
    print(f"\n## Placement quality: {len(configs)} random graphs (HEFT-paper style)")
    for name, values in ratios.items():
        print(f"mean makespan {name:10} {statistics.mean(values):.4f}")
    for name, values in slrs.items():
        print(f"mean SLR {name:15} {statistics.mean(values):.3f}")
    for base, (better, equal, worse) in counts.items():
        print(f"best vs {base}: better {better}, equal {equal}, worse {worse}")


def speed(quick: bool) -> None:
    size, count, passes = (1000, 3, 5) if quick else (2000, 5, 7)
    graphs = [random_graph(1000 + k, size, 1.0, 1.0, 0.5, 16) for k in range(count)]
    print(f"\n## Scheduler speed: {count} graphs of {size} tasks, 16 devices")
    print(f"{'scheduler':10}{'tasks/s (median of ' + str(passes) + ')':>26}{'slowest':>10}")
    schedulers: list[tuple[str, Callable[[TaskGraph], Placement]]] = [
        ("heft", heft),
        ("peft", peft),
        ("best", best),
    ]
    for name, scheduler in schedulers:
        rates = []
        for _ in range(1 if name == "best" and quick else passes):
            started = time.perf_counter()
            for graph in graphs:
                scheduler(graph)
            rates.append(size * count / (time.perf_counter() - started))
        print(f"{name:10}{statistics.median(rates):26,.0f}{min(rates):10,.0f}")
    print("(goal: >= 50,000 tasks/s; includes building the index form and the result dicts)")


def main(quick: bool = False) -> None:
    started = time.time()
    quality(quick)
    speed(quick)
    print(f"\n(schedule benchmark took {time.time() - started:.0f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller grid (under a minute)")
    main(parser.parse_args().quick)
