"""Speed of the discrete-event simulator (dhir/placement/simulate.py).

    .venv/bin/python bench/simulator.py

Graphs of 1,000, 10,000 and 100,000 tasks on 1,024 devices: the layered random graphs
of bench/schedule_quality.py (dhir/placement/generators.py, fixed seeds). Running a list
scheduler on 1,024 devices at this size would take far longer than the replay, so each
task gets costs on four random devices and runs on the first; devices run their tasks
in the graph's (topological) order. Each graph is replayed on two networks:
contention-free, and nodes of 8 devices sharing one NIC. Events are task completions
plus transfers. Goal: 100,000 tasks on 1,024 devices in <= 10 s.
"""

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir.placement.generators import random_graph  # noqa: E402
from dhir.placement.graph import Placement, TaskGraph  # noqa: E402
from dhir.placement.simulate import Contentionless, Network, SharedNic, simulate  # noqa: E402

DEVICES = 1024
SIZES = (1_000, 10_000, 100_000)
PER_NODE = 8


def placed_graph(seed: int, size: int, n_devices: int) -> tuple[TaskGraph, Placement]:
    """A random graph of `size` tasks (CCR 1, shape 1, heterogeneity 0.5) whose four cost
    columns are spread over `n_devices` devices: each task can run on four random ones
    and is placed on the first. Devices run their tasks in the graph's order."""
    small = random_graph(seed, size, 1.0, 1.0, 0.5, 4)
    rng = random.Random(seed)
    devices = tuple(f"d{k}" for k in range(n_devices))
    cost, assignment = {}, {}
    for task in small.tasks:
        chosen = rng.sample(devices, 4)
        cost[task] = dict(zip(chosen, small.cost[task].values()))
        assignment[task] = chosen[0]
    graph = TaskGraph(devices, small.tasks, cost, small.edges)
    order = {task: float(i) for i, task in enumerate(small.tasks)}  # only the order counts
    return graph, Placement(assignment, order, order)


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options; --help says what it measures, not runs it
    print(
        f"{'tasks':>8} {'devices':>8} {'edges':>8} {'network':>13} {'seconds':>8} "
        f"{'events/s':>11} {'transfers':>10} {'makespan':>10}"
    )
    for seed, size in enumerate(SIZES):
        graph, placement = placed_graph(seed, size, DEVICES)
        networks: list[tuple[str, Network]] = [
            ("contentionless", Contentionless()),
            (f"nic/{PER_NODE}dev", SharedNic.grouped(graph.devices, PER_NODE)),
        ]
        for name, network in networks:
            began = time.perf_counter()
            result = simulate(graph, placement, network)
            seconds = time.perf_counter() - began
            events = size + result.transfers
            print(
                f"{size:>8,} {DEVICES:>8,} {len(graph.edges):>8,} {name:>14} {seconds:>8.2f} "
                f"{events / seconds:>11,.0f} {result.transfers:>10,} {result.makespan:>10,.0f}"
            )
    print("(goal: 100,000 tasks on 1,024 devices in <= 10 s; seconds include building the")
    print(" index form from the graph's dicts and the result placement)")


if __name__ == "__main__":
    main()
