"""Placement quality and speed: `best` against round-robin, HEFT and PEFT.

    .venv/bin/python bench/schedule_quality.py [--quick]

Graphs (dhir/placement/generators.py, fixed seeds): random layered graphs in the style of
Topcuoglu et al. 2002 (sizes 20-1000, CCR 0.1-10, shape 0.5-2, heterogeneity 0.1-1, 4/8/16
devices), and Gaussian elimination, FFT and tiled Cholesky graphs on CPUs and GPUs (4 = 2
CPUs + 2 GPUs, 8 = 6 + 2, 16 = 12 + 4), with per-kind costs and CCR 0.1-10. Also the
papers' golden graphs from tests/unit/data.

Metrics, per graph family and CCR band (< 1, >= 1):
- makespan ratios: the mean over graphs of best's makespan over each baseline's (< 1:
  best is faster);
- SLR: makespan over the critical path at each task's fastest cost (>= 1, lower is better);
- speedup: the fastest single device's sequential time over the makespan;
- better/equal/worse: how often best's makespan is below, equal to, above each baseline's.
Then the issue's goals, PASS or FAIL, and how many tasks per second each scheduler places
at 16 devices.

Constraints (issue 29), on random graphs of 100 tasks, CCR 1, 4 devices:
- memory: each task's data (1-100 bytes, seeded) resident as dhir.placement.residency
  models it, the devices' capacities adding up to half the graph's total; how many plain
  HEFT placements break a capacity, how many `best` kept within them (`fitting`) breaks
  (goal 0) or refuses, and its makespan over unconstrained `best`'s (goal <= 1.3);
- pins: half the tasks (at random) pinned where unconstrained `best` put them, so that the
  pins allow its makespan: `best`'s pinned makespan over its unpinned one (goal <= 1.1);
  then pinned to random devices, which can force slower ones, printed beside a lower
  bound's ratio (the pinned graph's critical path over the unpinned one's).
"""

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir.ir.diagnostics import DhirError  # noqa: E402
from dhir.placement import generators  # noqa: E402
from dhir.placement.generators import MACHINES, random_graph  # noqa: E402
from dhir.placement.graph import Placement, TaskGraph  # noqa: E402
from dhir.placement.list_scheduling import (  # noqa: E402
    DEFAULT_BUDGET,
    best,
    heft,
    peft,
    round_robin_graph,
    sequential_time,
)
from dhir.placement.residency import first_overflow, fitting, oversized  # noqa: E402

DATA = Path(__file__).parents[1] / "tests" / "unit" / "data"
GOLDEN = {
    "topcuoglu2002.json": {"heft": 80.0},
    "arabnejad2014.json": {"heft": 133.0, "peft": 122.0},
}
SCHEDULERS: dict[str, Callable[[TaskGraph], Placement]] = {
    "rr": round_robin_graph,
    "heft": heft,
    "peft": peft,
    "best": best,
}
BASELINES = ("rr", "heft", "peft")
TOL = 1e-9
GOAL_HEFT, GOAL_PEFT, GOAL_SPEED = 0.95, 0.97, 50_000
GOAL_MEMORY, GOAL_PINS = 1.3, 1.1


# --- the graphs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    family: str
    ccr: float
    graph: TaskGraph


def cases(quick: bool) -> Iterator[Case]:
    if quick:
        sizes, ccrs, shapes, hets = (20, 100, 300), (0.1, 1.0, 10.0), (0.5, 2.0), (0.1, 1.0)
    else:
        sizes = (20, 50, 100, 200, 500, 1000)
        ccrs, shapes, hets = (0.1, 0.5, 1.0, 5.0, 10.0), (0.5, 1.0, 2.0), (0.1, 0.5, 1.0)
    for seed, config in enumerate(itertools.product(sizes, ccrs, shapes, hets, (4, 8, 16))):
        yield Case("random", config[1], random_graph(seed, *config))
    # Matrix sizes, points, tiles: from 14-20 tasks up to 816-1151.
    scales = {
        "gaussian": (5, 10, 20, 30, 44),
        "fft": (8, 16, 32, 64, 128),
        "cholesky": (4, 6, 8, 12, 16),
    }
    if quick:
        scales = {family: (scale[0], scale[2]) for family, scale in scales.items()}
        hets = (0.5,)
    for f, (family, scale) in enumerate(scales.items()):
        make = generators.FAMILIES[family]
        configs = itertools.product(scale, ccrs, hets, MACHINES.values())
        for seed, (size, ccr, het, machine) in enumerate(configs):
            yield Case(family, ccr, make(10_000 * (f + 1) + seed, size, ccr, het, machine))


# --- measuring --------------------------------------------------------------------------


@dataclass
class Result:
    family: str
    ccr: float
    makespan: dict[str, float]
    slr: dict[str, float]
    sequential: float  # the fastest single device's time for the whole graph


def measure(case: Case) -> Result:
    graph = case.graph
    spans = {name: scheduler(graph).makespan for name, scheduler in SCHEDULERS.items()}
    bound = critical_path_bound(graph)
    slr = {name: span / bound for name, span in spans.items()}
    return Result(case.family, case.ccr, spans, slr, sequential_time(graph))


def critical_path_bound(graph: TaskGraph) -> float:
    """The longest path at each task's fastest cost, with no comm: no schedule beats it."""
    longest: dict[str, float] = {}
    for task in graph.tasks:
        before = max((longest[e.source] for e in graph.predecessors(task)), default=0.0)
        longest[task] = before + min(graph.cost[task].values())
    return max(longest.values(), default=0.0) or 1.0


def compare(mine: float, theirs: float) -> int:
    """0: better, 1: equal, 2: worse."""
    return 0 if mine < theirs - TOL else 1 if mine <= theirs + TOL else 2


# --- reporting --------------------------------------------------------------------------


@dataclass
class Group:
    name: str
    band: str
    results: list[Result] = field(default_factory=list)

    def ratio(self, mine: str, theirs: str) -> float:
        return statistics.mean(r.makespan[mine] / r.makespan[theirs] for r in self.results)

    def mean_slr(self, name: str) -> float:
        return statistics.mean(r.slr[name] for r in self.results)

    def speedup(self, name: str) -> float:
        return statistics.mean(r.sequential / r.makespan[name] for r in self.results)

    def counts(self, base: str) -> list[int]:
        tally = [0, 0, 0]
        for r in self.results:
            tally[compare(r.makespan["best"], r.makespan[base])] += 1
        return tally

    def slower_than_one_device(self) -> int:
        return sum(r.makespan["best"] > r.sequential + TOL for r in self.results)


def groups(results: list[Result]) -> list[Group]:
    bands = {"<1": lambda c: c < 1, ">=1": lambda c: c >= 1, "all": lambda c: True}
    families = list(dict.fromkeys(r.family for r in results)) + ["all"]
    out = []
    for family in families:
        for band, within in bands.items():
            chosen = [r for r in results if family in ("all", r.family) and within(r.ccr)]
            if chosen:
                out.append(Group(family, band, chosen))
    return out


def print_tables(table: list[Group]) -> None:
    print("\n## Makespan ratios (mean over graphs; < 1: the first is faster), SLR, speedup")
    head = f"{'family':9}{'CCR':>4}{'graphs':>7}"
    print(
        f"{head}{'best/rr':>9}{'best/heft':>10}{'best/peft':>10}{'peft/heft':>10}"
        f"  {'SLR: heft':>10}{'peft':>7}{'best':>7}  {'speedup: heft':>13}{'peft':>6}{'best':>6}"
    )
    for g in table:
        print(
            f"{g.name:9}{g.band:>4}{len(g.results):7}"
            f"{g.ratio('best', 'rr'):9.4f}{g.ratio('best', 'heft'):10.4f}"
            f"{g.ratio('best', 'peft'):10.4f}{g.ratio('peft', 'heft'):10.4f}"
            f"  {g.mean_slr('heft'):10.3f}{g.mean_slr('peft'):7.3f}{g.mean_slr('best'):7.3f}"
            f"  {g.speedup('heft'):13.2f}{g.speedup('peft'):6.2f}{g.speedup('best'):6.2f}"
        )
    print("\n## best against each baseline: better/equal/worse; slower than one device")
    print(f"{head}{'vs rr':>14}{'vs heft':>14}{'vs peft':>14}{'> 1 device':>12}")
    for g in table:
        cells = "".join(f"{'/'.join(map(str, g.counts(base))):>14}" for base in BASELINES)
        print(f"{g.name:9}{g.band:>4}{len(g.results):7}{cells}{g.slower_than_one_device():12}")


def golden() -> tuple[bool, list[str]]:
    """The papers' worked examples: the baselines' published makespans, and best's."""
    lines, ok = [], True
    for name, expected in GOLDEN.items():
        graph = TaskGraph.from_json(json.loads((DATA / name).read_text()), name)
        spans = {s: SCHEDULERS[s](graph).makespan for s in ("heft", "peft", "best")}
        ok &= all(spans[s] == value for s, value in expected.items())
        ok &= spans["best"] <= min(spans["heft"], spans["peft"]) + TOL
        shown = ", ".join(f"{s} {v:g}" for s, v in spans.items())
        paper = ", ".join(f"{s} {v:g}" for s, v in expected.items())
        lines.append(f"{name}: {shown} (paper: {paper})")
    return ok, lines


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_goals(table: list[Group], golden_ok: bool, heft_rate: float) -> None:
    high = [g for g in table if g.band == ">=1"]
    overall = next(g for g in table if g.name == "all" and g.band == "all")
    every = high[-1]  # all families
    to_heft, to_peft = every.ratio("best", "heft"), every.ratio("best", "peft")
    worse = sum(overall.counts(base)[2] for base in BASELINES)
    slower = overall.slower_than_one_device()
    graphs = len(overall.results)
    print("\n## Goals")
    print(
        f"[{verdict(to_heft <= GOAL_HEFT)}] CCR >= 1, all families: mean best/heft "
        f"{to_heft:.4f} <= {GOAL_HEFT} (at least 5% below HEFT)"
    )
    print(
        f"[{verdict(to_peft <= GOAL_PEFT)}] CCR >= 1, all families: mean best/peft "
        f"{to_peft:.4f} <= {GOAL_PEFT} (at least 3% below PEFT)"
    )
    for g in high[:-1]:
        ok = g.ratio("best", "heft") <= GOAL_HEFT and g.ratio("best", "peft") <= GOAL_PEFT
        print(
            f"[{verdict(ok)}]   {g.name}: best/heft {g.ratio('best', 'heft'):.4f}, "
            f"best/peft {g.ratio('best', 'peft'):.4f}"
        )
    print(
        f"[{verdict(worse == 0 and golden_ok)}] best worse than round-robin, HEFT or PEFT: "
        f"{worse} of {graphs} graphs; golden graphs as published, best no worse: {golden_ok}"
    )
    print(
        f"[{verdict(slower == 0)}] best slower than the fastest single device: "
        f"{slower} of {graphs} graphs"
    )
    print(
        f"[{verdict(heft_rate >= GOAL_SPEED)}] HEFT places {heft_rate:,.0f} tasks per CPU "
        f"second at 16 devices (median), >= {GOAL_SPEED:,} (the speed goal is HEFT's)"
    )


def quality(quick: bool) -> tuple[list[Group], bool]:
    results = [measure(case) for case in cases(quick)]
    table = groups(results)
    print(f"\n## Placement quality: {len(results)} graphs")
    print_tables(table)
    ok, lines = golden()
    print("\n## Golden graphs")
    print("\n".join(lines))
    return table, ok


def speed(quick: bool) -> dict[str, float]:
    """Tasks placed per second, building the index form and the result dicts included.
    Per CPU second of this process (so that other work on the machine does not count),
    and per wall-clock second."""
    size, count, passes = (1000, 3, 5) if quick else (2000, 5, 7)
    graphs = [random_graph(1000 + k, size, 1.0, 1.0, 0.5, 16) for k in range(count)]
    print(f"\n## Scheduler speed: {count} random graphs of {size} tasks, CCR 1, 16 devices")
    print(f"tasks per second, median of {passes} passes (slowest pass)")
    print(f"{'scheduler':10}{'per CPU second':>24}{'per wall second':>24}")
    medians = {}
    for name in ("heft", "peft", "best"):
        cpu, wall = [], []
        for _ in range(1 if name == "best" and quick else passes):
            started, started_cpu = time.perf_counter(), time.process_time()
            for graph in graphs:
                SCHEDULERS[name](graph)
            cpu.append(size * count / (time.process_time() - started_cpu))
            wall.append(size * count / (time.perf_counter() - started))
        medians[name] = statistics.median(cpu)
        print(
            f"{name:10}{medians[name]:14,.0f} ({min(cpu):7,.0f})"
            f"{statistics.median(wall):14,.0f} ({min(wall):7,.0f})"
        )
    print(
        f"(best: a portfolio of about 20 list schedules, then a local search of at most "
        f"{DEFAULT_BUDGET} whole-graph simulations' worth of tasks)"
    )
    return medians


def constrained(quick: bool) -> list[str]:
    """The memory and pin measurements above, and their goal lines."""
    count = 8 if quick else 30
    graphs = [random_graph(2000 + k, 100, 1.0, 1.0, 0.5, 4) for k in range(count)]
    heft_invalid, invalid, refused, impossible, memory_ratios = 0, 0, 0, 0, []
    pin_ratios, random_ratios, bound_ratios = [], [], []
    for seed, graph in enumerate(graphs):
        rng = random.Random(seed)
        free = best(graph)
        memory = {t: float(rng.randint(1, 100)) for t in graph.tasks}
        share = sum(memory.values()) / 2 / len(graph.devices)
        tight = replace(graph, memory=memory, capacity=dict.fromkeys(graph.devices, share))
        heft_invalid += first_overflow(tight, heft(tight)) is not None
        try:
            fitted = fitting(best)(tight)
        except DhirError:
            refused += 1
            impossible += oversized(tight) is not None
        else:
            invalid += first_overflow(tight, fitted) is not None
            memory_ratios.append(fitted.makespan / free.makespan)
        allowed = _pinned(graph, rng, free.assignment)
        pin_ratios.append(best(allowed).makespan / free.makespan)
        anywhere = _pinned(graph, rng, None)
        random_ratios.append(best(anywhere).makespan / free.makespan)
        bound_ratios.append(critical_path_bound(anywhere) / critical_path_bound(graph))
    print(f"\n## Constraints: {count} random graphs of 100 tasks, CCR 1, 4 devices")
    print(
        f"memory (capacities 50% of the footprint): plain HEFT breaks a capacity in "
        f"{heft_invalid} of {count}; best kept within them breaks {invalid}, refuses "
        f"{refused} ({impossible} of them provably: a task's data and inputs exceed every "
        f"capacity); its makespan / unconstrained best: mean {statistics.mean(memory_ratios):.3f}, "
        f"max {max(memory_ratios):.3f}"
    )
    print(
        f"pins (50% of the tasks) where unpinned best put them: best pinned / unpinned: mean "
        f"{statistics.mean(pin_ratios):.3f}, max {max(pin_ratios):.3f}"
    )
    print(
        f"pins to random devices: best pinned / unpinned: mean "
        f"{statistics.mean(random_ratios):.3f}, max {max(random_ratios):.3f}; critical path "
        f"pinned / unpinned (a bound's): mean {statistics.mean(bound_ratios):.3f}"
    )
    ok_memory = invalid == 0 and max(memory_ratios) <= GOAL_MEMORY
    return [
        f"[{verdict(ok_memory)}] memory: 0 placements over capacity ({invalid}), makespan "
        f"<= {GOAL_MEMORY}x unconstrained best (max {max(memory_ratios):.3f}; {refused} of "
        f"{count} refused, {refused - impossible} that might fit)",
        f"[{verdict(max(pin_ratios) <= GOAL_PINS)}] pins where the pins allow best's "
        f"placement: pinned / unpinned max {max(pin_ratios):.3f} <= {GOAL_PINS}",
    ]


def _pinned(graph: TaskGraph, rng: random.Random, where: dict[str, str] | None) -> TaskGraph:
    """`graph` with half its tasks, at random, able to run on one device only: the one
    `where` gives, else one of theirs at random."""
    cost = dict(graph.cost)
    for task in rng.sample(list(graph.tasks), len(graph.tasks) // 2):
        device = where[task] if where is not None else rng.choice(sorted(cost[task]))
        cost[task] = {device: cost[task][device]}
    return replace(graph, cost=cost)


def main(quick: bool = False) -> None:
    started = time.time()
    table, golden_ok = quality(quick)
    rates = speed(quick)
    goals = constrained(quick)
    print_goals(table, golden_ok, rates["heft"])
    print("\n".join(goals))
    print(f"\n(schedule benchmark took {time.time() - started:.0f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller grid (under a minute)")
    main(parser.parse_args().quick)
