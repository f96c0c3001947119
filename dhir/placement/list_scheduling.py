"""Cost-driven placement of a `TaskGraph`: list schedulers with insertion.

- `round_robin_graph`: task k runs on device k mod D (the next device that can run it).
- `heft`: Topcuoglu, Hariri and Wu 2002 (upward rank on mean costs, insertion-based EFT).
- `peft`: Arabnejad and Barbosa 2014 (optimistic cost table, rank_oct, EFT + OCT).
- `best`: a portfolio of schedules (`portfolio`: HEFT, PEFT, rank and device-choice
  variants, HEFT and PEFT on fewer devices, the fastest single device, round robin), then a
  bounded local search (`local_search`) that moves critical tasks between devices. It
  starts from the portfolio's shortest schedule and only accepts improvements, so it is
  never worse than round robin, HEFT, PEFT, or running everything on one device.

A device missing from a task's costs cannot run it, nor can a device too small for the
task's memory (see graph.py); every algorithm places tasks only where they can run, and a
task that can run nowhere is a DhirError naming it.

Everything is deterministic: ties go to the earlier task (in the graph's order) and the
earlier device (in `graph.devices`), and the local search's budget counts simulated tasks,
not time.
"""

import gc
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from heapq import heapify, heappop, heappush

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.placement.graph import Placement, TaskGraph
from dhir.units import bytes_words

INF = math.inf

# An improvement smaller than this is float noise, not a better schedule.
_EPS = 1e-9


class Problem:
    """A `TaskGraph` in index form (task i is `graph.tasks[i]`, device k `graph.devices[k]`),
    so the schedulers work on lists rather than dicts of names."""

    def __init__(self, graph: TaskGraph) -> None:
        self.graph = graph
        self.n = len(graph.tasks)
        self.n_devices = len(graph.devices)
        index = {task: i for i, task in enumerate(graph.tasks)}
        self.cost = [_cost_row(graph.cost.get(task, {}), graph.devices) for task in graph.tasks]
        if graph.memory and graph.capacity:
            self.cost = [_fitting(graph, task, row) for task, row in zip(graph.tasks, self.cost)]
        everywhere = list(range(self.n_devices))  # shared by rows that run anywhere; read-only
        self.runnable = [
            [k for k, c in enumerate(row) if c < INF] if INF in row else everywhere
            for row in self.cost
        ]
        stuck = [graph.tasks[i] for i, devices in enumerate(self.runnable) if not devices]
        if stuck:
            raise DhirError([_unschedulable(graph, task) for task in stuck])
        self.preds: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        self.succs: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        preds, succs = self.preds, self.succs
        for edge in graph.edges:
            source, target, comm = index[edge.source], index[edge.target], edge.comm
            preds[target].append((source, comm))
            succs[source].append((target, comm))
        # Nodes (None: one node, every edge costs its comm): each device's node, and the
        # edges' times between nodes where they differ from their comm.
        self.node = _node_index(graph)
        self.remote: dict[tuple[int, int], float] = {}
        if self.node is not None:
            for edge in graph.edges:
                if edge.remote is not None:
                    self.remote[index[edge.source], index[edge.target]] = edge.remote
        # Links by pair of devices (None: only the nodes matter): each device's class, and
        # the bytes of the edges that say them, timed between their two devices.
        links = self.links = graph.links
        self.link_class = [links.of[d] for d in graph.devices] if links is not None else None
        self.nbytes: dict[tuple[int, int], float] = {}
        if links is not None:
            for edge in graph.edges:
                if edge.nbytes is not None:
                    self.nbytes[index[edge.source], index[edge.target]] = edge.nbytes
        # Whether an input's time depends on more than its devices being two, and what it
        # depends on for a device holding none of a task's inputs.
        self.by_pair = self.node is not None or self.link_class is not None
        self.site = self.link_class if self.link_class is not None else self.node
        # sum(row) adds the same floats in the same order as the general form.
        self.mean_cost = [
            sum(row) / len(row)
            if devices is everywhere
            else sum(row[k] for k in devices) / len(devices)
            for row, devices in zip(self.cost, self.runnable)
        ]

    def paid(self, source: int, target: int, comm: float, here: int, there: int) -> float:
        """What the edge source -> target (of `comm`) costs from device `here` to `there`."""
        if here == there:
            return 0.0
        links, link_class = self.links, self.link_class
        if links is not None and link_class is not None:
            nbytes = self.nbytes.get((source, target))
            if nbytes is not None:
                return links.time(nbytes, link_class[here], link_class[there])
        node = self.node
        if node is None or node[here] == node[there]:
            return comm
        return self.remote.get((source, target), comm)

    def ready_on(self, task: int, device: int, device_of: list[int], finish: list[float]) -> float:
        """When all of `task`'s inputs are on `device` (with nodes or links: each input's
        own cost from its device)."""
        ready = 0.0
        for pred, comm in self.preds[task]:
            arrival = finish[pred] + self.paid(pred, task, comm, device_of[pred], device)
            if arrival > ready:
                ready = arrival
        return ready


def _node_index(graph: TaskGraph) -> list[int] | None:
    """Each device's node as a number, None when the devices are on one node (or none
    is given)."""
    if not graph.nodes:
        return None
    numbers: dict[str, int] = {}
    node = [numbers.setdefault(graph.nodes[d], len(numbers)) for d in graph.devices]
    return node if len(numbers) > 1 else None


def _cost_row(costs: dict[str, float], devices: tuple[str, ...]) -> list[float]:
    if tuple(costs) == devices:
        return list(costs.values())  # the common case: runs anywhere, listed in order
    return [costs.get(device, INF) for device in devices]


def _fitting(graph: TaskGraph, task: str, row: list[float]) -> list[float]:
    """`row` with the devices `task`'s memory does not fit on made unable to run it."""
    if task not in graph.memory:
        return row
    return [c if graph.fits(task, d) else INF for c, d in zip(row, graph.devices)]


def _unschedulable(graph: TaskGraph, task: str) -> Diagnostic:
    named = [d for d in graph.devices if d in graph.cost.get(task, {})]
    if not named:
        return Diagnostic(
            f"no device can run task '{task}' (its costs name none of the "
            f"devices {', '.join(graph.devices) or '(none)'})"
        )
    room = ", ".join(f"{d}: {bytes_words(graph.capacity[d])}" for d in named if d in graph.capacity)
    return Diagnostic(
        f"task '{task}' needs {bytes_words(graph.memory[task])} of memory, more than any device "
        f"that can run it has ({room})"
    )


class Timelines:
    """What each device runs, as sorted (start, finish) lists, with insertion into idle gaps."""

    def __init__(self, n_devices: int) -> None:
        self.starts: list[list[float]] = [[] for _ in range(n_devices)]
        self.finishes: list[list[float]] = [[] for _ in range(n_devices)]

    def earliest_start(self, device: int, ready: float, duration: float) -> float:
        finishes = self.finishes[device]
        if not finishes or ready >= finishes[-1]:
            return ready  # the common case: after everything already there
        starts = self.starts[device]
        # Intervals do not overlap, so finishes are sorted too: skip those over by `ready`.
        k = bisect_right(finishes, ready)
        time = ready if k == 0 or ready > finishes[k - 1] else finishes[k - 1]
        count = len(starts)
        while k < count:
            if time + duration <= starts[k]:
                return time
            # finishes[k] > ready, and finishes are sorted, so this only moves forward.
            time = finishes[k]
            k += 1
        return time

    def add(self, device: int, start: float, finish: float) -> None:
        starts, finishes = self.starts[device], self.finishes[device]
        if not starts or start >= finishes[-1]:
            starts.append(start)
            finishes.append(finish)
            return
        k = bisect_right(starts, start)
        while k > 0 and starts[k - 1] == start and finishes[k - 1] > finish:
            k -= 1  # a zero-length task goes before the one starting at the same time
        starts.insert(k, start)
        self.finishes[device].insert(k, finish)


class FrozenTimelines:
    """`Timelines` that no longer change, answering `earliest_start` (the same answer)
    without visiting every busy interval: past the first interval in the way, only the
    idle gaps of positive width can take a task (`later_start`), and each block of
    `block` consecutive gaps keeps its widest, so that a block too narrow for the task is
    skipped whole. The local search asks this of every critical task on every device,
    and a long critical path on a busy device made those scans quadratic."""

    def __init__(self, lines: Timelines, block: int = 32) -> None:
        self.starts = lines.starts
        self.finishes = lines.finishes
        self.block = block
        self.gaps = [gaps_of(s, f) for s, f in zip(self.starts, self.finishes)]
        # widest[device][b]: the widest of gaps b * block .. (b + 1) * block - 1.
        self.widest = [_widest(ends, begins, block) for begins, ends in self.gaps]

    def earliest_start(self, device: int, ready: float, duration: float) -> float:
        finishes = self.finishes[device]
        if not finishes or ready >= finishes[-1]:
            return ready
        starts = self.starts[device]
        k = bisect_right(finishes, ready)
        time = ready if k == 0 or ready > finishes[k - 1] else finishes[k - 1]
        if time + duration <= starts[k]:
            return time
        gaps, widest = self.gaps[device], self.widest[device]
        return later_start(starts, finishes, gaps, k, duration, widest, self.block)


def _widest(ends: list[float], begins: list[float], block: int) -> list[float]:
    widest = [-INF] * (len(begins) // block + 1)
    for j, (begin, end) in enumerate(zip(begins, ends)):
        if end - begin > widest[j // block]:
            widest[j // block] = end - begin
    return widest


# An idle gap: (its beginning, the last finish before it; its end, the next start), as two
# sorted lists. Only gaps of positive width are kept: they begin at distinct times.
Gaps = tuple[list[float], list[float]]


def gaps_of(starts: list[float], finishes: list[float]) -> Gaps:
    """The idle gaps of positive width between a device's intervals."""
    pairs = [(f, s) for f, s in zip(finishes, starts[1:]) if s > f]
    return [f for f, _ in pairs], [s for _, s in pairs]


def later_start(
    starts: list[float],
    finishes: list[float],
    gaps: Gaps,
    k: int,
    duration: float,
    widest: list[float] | None = None,
    block: int = 32,
) -> float:
    """Where a task of `duration` starts that does not fit before interval `k` (which
    finishes after its inputs are ready): the first later gap it fits, else after the
    last interval. The same answer as trying every later gap in turn, as
    `Timelines.earliest_start` does: a gap of width zero takes no task whose duration
    is not lost in rounding (that case takes the plain scan), and the widths kept in
    `widest` (per `block` gaps) round differently from `begin + duration <= end`, so a
    block is skipped only when short by a clear margin."""
    need = duration - _MARGIN * (abs(finishes[-1]) + duration)
    if need <= 0:
        time, count = finishes[k], len(starts)
        for j in range(k + 1, count):
            if time + duration <= starts[j]:
                return time
            time = finishes[j]
        return time
    begins, ends = gaps
    count = len(begins)
    j = bisect_left(begins, finishes[k])
    while j < count:
        if widest is not None and j % block == 0 and widest[j // block] < need:
            j += block
            continue
        if begins[j] + duration <= ends[j]:
            return begins[j]
        j += 1
    return finishes[-1]


def gap_filled(gaps: Gaps, starts: list[float], finishes: list[float], k: int) -> None:
    """Update `gaps` for interval `k`, just inserted: the gap it went into (between its
    neighbours) is replaced by what is left of it either side."""
    begins, ends = gaps
    last = len(starts) - 1
    if 0 < k < last and starts[k + 1] > finishes[k - 1]:
        j = bisect_left(begins, finishes[k - 1])
        del begins[j], ends[j]
    if k > 0 and starts[k] > finishes[k - 1]:
        j = bisect_left(begins, finishes[k - 1])
        begins.insert(j, finishes[k - 1])
        ends.insert(j, starts[k])
    if k < last and starts[k + 1] > finishes[k]:
        j = bisect_left(begins, finishes[k])
        begins.insert(j, finishes[k])
        ends.insert(j, starts[k + 1])


# Far above the rounding error of a difference of two times (a few ulps), and of a time
# plus a duration.
_MARGIN = 1e-9


def ready_times(
    preds: list[tuple[int, float]], device_of: list[int], finish: list[float]
) -> tuple[float, int, float]:
    """When a task's inputs are all on a device, as (elsewhere, device, there): they are
    on `device` at `there` and on every other device at `elsewhere`. Comm is paid only
    between devices, so only the device the latest arrival comes from is special: there
    the inputs made locally need no comm, and the others arrive by the second latest."""
    first_device, first, second = -1, 0.0, 0.0
    for pred, comm in preds:
        device, arrival = device_of[pred], finish[pred] + comm
        if device == first_device:
            if arrival > first:
                first = arrival
        elif arrival > first:
            # The old leader came from another device, and bounds everything else so far.
            first_device, first, second = device, arrival, first
        elif arrival > second:
            second = arrival
    there = second
    for pred, _ in preds:
        if device_of[pred] == first_device and finish[pred] > there:
            there = finish[pred]
    return first, first_device, there


# --- the list scheduler and the fixed-assignment simulator ------------------------------


class Schedule:
    """A schedule in index form, with the order tasks were placed in (a topological order)."""

    def __init__(
        self, order: list[int], device_of: list[int], start: list[float], finish: list[float]
    ) -> None:
        self.order = order
        self.device_of = device_of
        self.start = start
        self.finish = finish
        self.makespan = max(finish, default=0.0)

    def placement(self, problem: Problem) -> Placement:
        tasks, devices = problem.graph.tasks, problem.graph.devices
        return Placement(
            assignment=dict(zip(tasks, map(devices.__getitem__, self.device_of))),
            start=dict(zip(tasks, self.start)),
            finish=dict(zip(tasks, self.finish)),
        )


def list_schedule(
    problem: Problem,
    priority: Sequence[float],
    lookahead: Sequence[Sequence[float]] | None,
    runnable: list[list[int]] | None = None,
) -> Schedule:
    """Place ready tasks, highest priority first, each on the device minimising its
    insertion-based finish time plus `lookahead[task][device]` (PEFT's OCT; none for HEFT).

    A ready list rather than a plain sort keeps the order topological even when priorities
    tie across an edge (zero costs).

    This is the hot loop, so `Timelines.earliest_start` and `ready_times` are inlined
    here (same arithmetic, so the same results), and a device is skipped without searching
    its gaps when even starting at its ready time could not beat the best score so far
    (float addition is monotone, so a later start never scores less)."""
    n = problem.n
    n_devices = problem.n_devices
    preds, succs = problem.preds, problem.succs
    cost = problem.cost
    if runnable is None:
        runnable = problem.runnable
    waiting = [len(p) for p in preds]
    heap = [(-priority[i], i) for i in range(n) if not waiting[i]]
    heapify(heap)
    pop, push = heappop, heappush
    device_of, start, finish = [-1] * n, [0.0] * n, [0.0] * n
    order: list[int] = []
    append_order = order.append
    all_starts: list[list[float]] = [[] for _ in range(n_devices)]
    all_finishes: list[list[float]] = [[] for _ in range(n_devices)]
    # The last finish on each device (-inf while empty): before it, search the gaps.
    tail = [-INF] * n_devices
    gaps: list[Gaps] = [([], []) for _ in range(n_devices)]
    by_pair = problem.by_pair  # then inputs' times depend on the nodes or links too
    ready_on = problem.ready_on
    while heap:
        task = pop(heap)[1]
        # ready_times, inlined.
        task_preds = preds[task]
        first_device, elsewhere, second = -1, 0.0, 0.0
        for pred, comm in task_preds:
            arrival = finish[pred] + comm
            if device_of[pred] == first_device:
                if arrival > elsewhere:
                    elsewhere = arrival
            elif arrival > elsewhere:
                first_device, elsewhere, second = device_of[pred], arrival, elsewhere
            elif arrival > second:
                second = arrival
        there = second
        for pred, _ in task_preds:
            if device_of[pred] == first_device and finish[pred] > there:
                there = finish[pred]
        row = cost[task]
        best_device, best_begin, best_end = -1, 0.0, INF
        if lookahead is None:
            # The loop below with no lookahead (score = end), spelt out: HEFT's speed.
            for device in runnable[task]:
                if by_pair:
                    begin = ready_on(task, device, device_of, finish)
                else:
                    begin = there if device == first_device else elsewhere
                duration = row[device]
                if begin < tail[device]:
                    if begin + duration >= best_end:
                        continue
                    finishes = all_finishes[device]
                    k = bisect_right(finishes, begin)
                    if k != 0 and not begin > finishes[k - 1]:
                        begin = finishes[k - 1]
                    starts = all_starts[device]
                    if not begin + duration <= starts[k]:
                        begin = later_start(starts, finishes, gaps[device], k, duration)
                end = begin + duration
                if end < best_end:
                    best_device, best_begin, best_end = device, begin, end
        else:
            extra = lookahead[task]
            best_score = INF
            for device in runnable[task]:
                if by_pair:
                    begin = ready_on(task, device, device_of, finish)
                else:
                    begin = there if device == first_device else elsewhere
                duration = row[device]
                if begin < tail[device]:
                    if begin + duration + extra[device] >= best_score:
                        continue  # cannot win even at `begin`
                    # Timelines.earliest_start, inlined.
                    finishes = all_finishes[device]
                    k = bisect_right(finishes, begin)
                    if k != 0 and not begin > finishes[k - 1]:
                        begin = finishes[k - 1]
                    starts = all_starts[device]
                    if not begin + duration <= starts[k]:
                        begin = later_start(starts, finishes, gaps[device], k, duration)
                end = begin + duration
                score = end + extra[device]
                if score < best_score:
                    best_score, best_device, best_begin, best_end = score, device, begin, end
        start[task], finish[task] = best_begin, best_end
        device_of[task] = best_device
        # Timelines.add, inlined.
        starts, finishes = all_starts[best_device], all_finishes[best_device]
        if best_begin >= tail[best_device]:
            if best_begin > tail[best_device] and finishes:
                gaps[best_device][0].append(tail[best_device])
                gaps[best_device][1].append(best_begin)
            starts.append(best_begin)
            finishes.append(best_end)
            tail[best_device] = best_end
        else:
            k = bisect_right(starts, best_begin)
            while k > 0 and starts[k - 1] == best_begin and finishes[k - 1] > best_end:
                k -= 1  # a zero-length task goes before the one starting at the same time
            starts.insert(k, best_begin)
            finishes.insert(k, best_end)
            gap_filled(gaps[best_device], starts, finishes, k)
        append_order(task)
        for succ, _ in succs[task]:
            waiting[succ] -= 1
            if not waiting[succ]:
                push(heap, (-priority[succ], succ))
    return Schedule(order, device_of, start, finish)


def simulate(problem: Problem, order: Sequence[int], device_of: list[int]) -> Schedule:
    """Start times for a fixed assignment: tasks in `order` (topological), each as early as
    its inputs and an idle gap on its device allow."""
    n, n_devices = problem.n, problem.n_devices
    order = list(order)
    timelines: tuple[list[list[float]], list[list[float]]] = (
        [[] for _ in range(n_devices)],
        [[] for _ in range(n_devices)],
    )
    start, finish = [0.0] * n, [0.0] * n
    schedule = simulate_from(problem, order, list(device_of), 0, start, finish, timelines, INF)
    assert schedule is not None  # no limit
    return schedule


def simulate_from(
    problem: Problem,
    order: list[int],
    device_of: list[int],
    first: int,
    start: list[float],
    finish: list[float],
    timelines: tuple[list[list[float]], list[list[float]]],
    limit: float,
    known_gaps: list[Gaps | None] | None = None,
) -> Schedule | None:
    """`simulate` from position `first` of `order` on: `start`, `finish` and `timelines`
    (each device's sorted starts and finishes) hold the tasks before it, and are updated
    in place. None as soon as a task would finish at or after `limit`. `known_gaps`:
    the gaps of those timelines (`gaps_of`) where the caller has them, updated too.

    `ready_times`, `Timelines.earliest_start` and `Timelines.add` are inlined here (the
    local search calls this many times), with the same arithmetic."""
    all_starts, all_finishes = timelines
    # The last finish on each device (-inf while empty): before it, search the gaps.
    tail = [f[-1] if f else -INF for f in all_finishes]
    # Each device's gaps, found when a task first looks past the interval in its way.
    gaps: list[Gaps | None] = known_gaps if known_gaps is not None else [None] * len(all_starts)
    cost, preds = problem.cost, problem.preds
    for position in range(first, len(order)):
        task = order[position]
        device = device_of[task]
        task_preds = preds[task]
        first_device, elsewhere, second = -1, 0.0, 0.0
        for pred, comm in task_preds:
            arrival = finish[pred] + comm
            if device_of[pred] == first_device:
                if arrival > elsewhere:
                    elsewhere = arrival
            elif arrival > elsewhere:
                first_device, elsewhere, second = device_of[pred], arrival, elsewhere
            elif arrival > second:
                second = arrival
        if problem.by_pair:
            begin = problem.ready_on(task, device, device_of, finish)
        elif device == first_device:
            begin = second
            for pred, _ in task_preds:
                if device_of[pred] == device and finish[pred] > begin:
                    begin = finish[pred]
        else:
            begin = elsewhere
        duration = cost[task][device]
        starts, finishes = all_starts[device], all_finishes[device]
        if begin < tail[device]:
            k = bisect_right(finishes, begin)
            if k != 0 and not begin > finishes[k - 1]:
                begin = finishes[k - 1]
            if not begin + duration <= starts[k]:
                found = gaps[device]
                if found is None:
                    found = gaps[device] = gaps_of(starts, finishes)
                begin = later_start(starts, finishes, found, k, duration)
        end = begin + duration
        if end >= limit:
            return None
        start[task], finish[task] = begin, end
        found = gaps[device]
        if begin >= tail[device]:
            if found is not None and begin > tail[device] and finishes:
                found[0].append(tail[device])
                found[1].append(begin)
            starts.append(begin)
            finishes.append(end)
            tail[device] = end
        else:
            k = bisect_right(starts, begin)
            while k > 0 and starts[k - 1] == begin and finishes[k - 1] > end:
                k -= 1  # a zero-length task goes before the one starting at the same time
            starts.insert(k, begin)
            finishes.insert(k, end)
            if found is not None:
                gap_filled(found, starts, finishes, k)
    return Schedule(order, device_of, start, finish)


# --- priorities -------------------------------------------------------------------------


def timed(graph: TaskGraph, assignment: Mapping[str, str]) -> Placement:
    """`assignment` (task -> device) with each task's start and finish: tasks in the
    graph's order, each as early as its inputs and an idle gap on its device allow."""
    problem = Problem(graph)
    index = {device: k for k, device in enumerate(graph.devices)}
    device_of = [index[assignment[task]] for task in graph.tasks]
    return simulate(problem, range(problem.n), device_of).placement(problem)


def upward_rank(problem: Problem, task_cost: Sequence[float]) -> list[float]:
    """HEFT's rank_u: the task's cost plus the longest (cost + comm) path to an exit."""
    rank = [0.0] * problem.n
    succs = problem.succs
    for task in reversed(range(problem.n)):  # graph.tasks is topological
        # max((comm + rank[succ] ...), default=0.0), unrolled: the first of equal maxima.
        tail = 0.0
        first = True
        for succ, comm in succs[task]:
            value = comm + rank[succ]
            if first or value > tail:
                tail, first = value, False
        rank[task] = task_cost[task] + tail
    return rank


def downward_rank(problem: Problem) -> list[float]:
    """rank_d: the longest (cost + comm) path from an entry to the task, not counting it."""
    rank = [0.0] * problem.n
    mean = problem.mean_cost
    for task in range(problem.n):
        rank[task] = max(
            (rank[pred] + mean[pred] + comm for pred, comm in problem.preds[task]), default=0.0
        )
    return rank


def optimistic_cost_table(problem: Problem) -> list[list[float]]:
    """PEFT's OCT[t][p]: the longest of the shortest paths from t's children to an exit,
    with t on p (comm paid when a child runs elsewhere: with links, from p to where the
    child runs; else the edge's mean)."""
    zeros = [0.0] * problem.n_devices  # shared by exits; rows are replaced, never mutated
    table = [zeros] * problem.n
    # Per child: its OCT plus its cost on each device (INF where it cannot run), and the min
    # (with links, per link class).
    through = [[]] * problem.n
    cheapest = [0.0] * problem.n
    by_class: list[list[float]] = [[]] * problem.n
    links, link_class, nbytes = problem.links, problem.link_class, problem.nbytes
    for task in reversed(range(problem.n)):
        row = zeros
        for succ, comm in problem.succs[task]:
            moved = nbytes.get((task, succ)) if links is not None else None
            if links is not None and link_class is not None and moved is not None:
                # From a device of class a, the cheapest child elsewhere: per class b its
                # cheapest device plus the transfer from a to b.
                classes = range(len(by_class[succ]))
                reach = [
                    min(by_class[succ][b] + links.time(moved, a, b) for b in classes)
                    for a in classes
                ]
                row = [
                    r if r >= v else (v if v < reach[c] else (r if r >= reach[c] else reach[c]))
                    for r, v, c in zip(row, through[succ], link_class)
                ]
                continue
            remote = cheapest[succ] + comm
            # On p itself the child pays no comm; elsewhere the cheapest remote choice.
            row = [
                r if r >= v else (v if v < remote else (r if r >= remote else remote))
                for r, v in zip(row, through[succ])
            ]
        table[task] = row
        through[task] = [o + c for o, c in zip(row, problem.cost[task])]
        cheapest[task] = min(through[task])
        if links is not None and link_class is not None:
            by_class[task] = _cheapest_by_class(through[task], link_class, len(links.latency))
    return table


def _cheapest_by_class(row: list[float], link_class: list[int], classes: int) -> list[float]:
    """The least of `row` over the devices of each link class (INF where none is less)."""
    least = [INF] * classes
    for value, c in zip(row, link_class):
        if value < least[c]:
            least[c] = value
    return least


def oct_rank(problem: Problem, table: list[list[float]]) -> list[float]:
    ranks = []
    for row, runnable in zip(table, problem.runnable):
        if len(runnable) == len(row):
            ranks.append(sum(row) / len(row))
        else:
            ranks.append(sum(map(row.__getitem__, runnable)) / len(runnable))
    return ranks


# --- the algorithms ---------------------------------------------------------------------


def round_robin_graph(graph: TaskGraph) -> Placement:
    """Task k on device k mod D, or the next device after it that can run the task."""
    with _no_cycle_collection():
        problem = Problem(graph)
        return round_robin_schedule(problem).placement(problem)


def round_robin_schedule(problem: Problem) -> Schedule:
    device_of = []
    for k, row in enumerate(problem.cost):
        turn = k % problem.n_devices
        device_of.append(next(d for d in _cyclic(turn, problem.n_devices) if row[d] < INF))
    return simulate(problem, range(problem.n), device_of)


def _cyclic(first: int, count: int) -> list[int]:
    return [(first + k) % count for k in range(count)]


def heft_schedule(problem: Problem) -> Schedule:
    return list_schedule(problem, upward_rank(problem, problem.mean_cost), None)


def peft_schedule(problem: Problem) -> Schedule:
    table = optimistic_cost_table(problem)
    return list_schedule(problem, oct_rank(problem, table), table)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The schedulers allocate many small lists and tuples but no reference cycles, so
    reference counting frees everything, and the cyclic collector, triggered by the
    allocations, would only spend time scanning the caller's heap (a quarter of HEFT's
    time in a process holding much else)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def heft(graph: TaskGraph) -> Placement:
    with _no_cycle_collection():
        problem = Problem(graph)
        return heft_schedule(problem).placement(problem)


def peft(graph: TaskGraph) -> Placement:
    with _no_cycle_collection():
        problem = Problem(graph)
        return peft_schedule(problem).placement(problem)


def portfolio(problem: Problem) -> list[Schedule]:
    """HEFT and PEFT first (so ties keep them), then variants that win on other shapes:
    each ranking with the other's device choice, an optimistic (min-cost) rank, a
    critical-path rank (upward + downward, as in CPOP); the fastest single device (at high
    CCR no spreading can pay for its comm) and round robin, so that `best` is never worse
    than either; HEFT and PEFT on the fastest half, quarter, ... of the devices; with
    devices on several nodes, HEFT and PEFT taking the nodes in turn on ties; and ranks
    re-computed from the leader's own devices and comm."""
    table = optimistic_cost_table(problem)
    rank_u = upward_rank(problem, problem.mean_cost)
    rank_oct = oct_rank(problem, table)
    fastest = [min(row[d] for d in devices) for row, devices in zip(problem.cost, problem.runnable)]
    rank_min = upward_rank(problem, fastest)
    rank_d = downward_rank(problem)
    rank_cp = [u + d for u, d in zip(rank_u, rank_d)]
    # Ranks often coincide (rank_min is rank_u on alike devices; the leader's assigned
    # rank stays when the leader does): a list schedule depends on nothing else, so
    # each is made once (4 of the 10 on issue 25's program).
    made: dict[tuple[tuple[float, ...], bool], Schedule] = {}

    def once(rank: list[float], lookahead: list[list[float]] | None) -> Schedule:
        key = (tuple(rank), lookahead is None)
        if key not in made:
            made[key] = list_schedule(problem, rank, lookahead)
        return made[key]

    schedules = [
        once(rank_u, None),
        once(rank_oct, table),
        once(rank_u, table),
        once(rank_oct, None),
        once(rank_min, None),
        once(rank_cp, None),
    ]
    single = single_device_schedule(problem)
    if single is not None:
        schedules.append(single)
    schedules.append(round_robin_schedule(problem))  # rarely wins, but cheap
    for devices in fewer_devices(problem):
        runnable = restricted(problem, devices)
        schedules.append(list_schedule(problem, rank_u, None, runnable))
        schedules.append(list_schedule(problem, rank_oct, table, runnable))
    if problem.node is not None:
        # Ties go to the earlier device: by node, independent work fills one node first
        # and its transfers then cross to the next; taking the nodes in turn spreads it.
        runnable = across_nodes(problem)
        schedules.append(list_schedule(problem, rank_u, None, runnable))
        schedules.append(list_schedule(problem, rank_oct, table, runnable))
    leader = _shortest(schedules)
    for _ in range(2):
        rank = assigned_rank(problem, leader)
        schedules.append(once(rank, None))
        schedules.append(once(rank, table))
        leader = _shortest(schedules)
    return schedules


def _shortest(schedules: list[Schedule]) -> Schedule:
    return min(schedules, key=lambda s: s.makespan)  # the first of equals: HEFT on ties


def single_device_schedule(problem: Problem) -> Schedule | None:
    """Everything on the device that runs the whole graph soonest, None if none can."""
    totals = _device_totals(problem)
    device = min(range(problem.n_devices), key=totals.__getitem__, default=-1)
    if device < 0 or totals[device] == INF:
        return None
    return simulate(problem, range(problem.n), [device] * problem.n)


def _device_totals(problem: Problem) -> list[float]:
    # Summed in task order, as simulating them one after another adds them up.
    return [sum(row[k] for row in problem.cost) for k in range(problem.n_devices)]


def fewer_devices(problem: Problem) -> list[list[int]]:
    """The fastest half of the devices, the fastest quarter, ..., down to two. Speed is the
    total cost of the graph on a device, counting a task it cannot run at twice its mean."""
    speed = [0.0] * problem.n_devices
    for row, mean in zip(problem.cost, problem.mean_cost):
        for k, c in enumerate(row):
            speed[k] += c if c < INF else 2 * mean
    ranked = sorted(range(problem.n_devices), key=lambda k: (speed[k], k))
    subsets = []
    count = problem.n_devices // 2
    while count >= 2:
        subsets.append(sorted(ranked[:count]))
        count //= 2
    return subsets


def across_nodes(problem: Problem) -> list[list[int]]:
    """Each task's devices, taking the nodes in turn: the first device of each node, then
    the second of each, and so on."""
    node = problem.node or [0] * problem.n_devices
    seen: dict[int, int] = {}
    turn = [0] * problem.n_devices
    for device, number in enumerate(node):
        turn[device] = seen.get(number, 0)
        seen[number] = turn[device] + 1
    key = [(turn[d], node[d], d) for d in range(problem.n_devices)]
    return [sorted(own, key=key.__getitem__) for own in problem.runnable]


def restricted(problem: Problem, devices: list[int]) -> list[list[int]]:
    """Each task's devices among `devices`, or all of its own where none of them can run it."""
    chosen = set(devices)
    return [[d for d in own if d in chosen] or own for own in problem.runnable]


def assigned_rank(problem: Problem, schedule: Schedule) -> list[float]:
    """Upward rank with each task's cost on its device in `schedule`, and comm only where
    an edge crosses devices there."""
    rank = [0.0] * problem.n
    device_of, cost, succs = schedule.device_of, problem.cost, problem.succs
    for task in reversed(range(problem.n)):
        device = device_of[task]
        tail = 0.0
        for succ, comm in succs[task]:
            value = rank[succ] + problem.paid(task, succ, comm, device, device_of[succ])
            if value > tail:
                tail = value
        rank[task] = cost[task][device] + tail
    return rank


# How many whole-graph simulations' worth of tasks `best`'s local search may simulate: its
# time grows with the graph like the portfolio's. Past about 40, gains come slowly.
DEFAULT_BUDGET = 40
# ... of a graph of at most this many tasks: on larger ones the search simulates no more
# tasks than on one this large. Their portfolio schedule mostly stands (a move there
# gains little of the makespan), while each simulation costs as much as compiling a few
# of their tasks (10,000 tasks: a third of dhir-place went to the search).
SEARCHED_TASKS = 2_000


def best_schedule(
    problem: Problem, budget: int = DEFAULT_BUDGET, schedules: list[Schedule] | None = None
) -> Schedule:
    """The shortest of `schedules` (default: the portfolio's), improved by local_search."""
    schedules = schedules if schedules is not None else portfolio(problem)
    return local_search(problem, _shortest(schedules), budget)


def sequential_time(graph: TaskGraph) -> float:
    """The fastest single device's time to run the whole graph (inf if none can)."""
    return min(_device_totals(Problem(graph)), default=INF)


def best(graph: TaskGraph, budget: int = DEFAULT_BUDGET) -> Placement:
    """The portfolio's shortest schedule, improved by `local_search` with `budget`
    whole-graph simulations' worth of tasks."""
    with _no_cycle_collection():
        problem = Problem(graph)
        return best_schedule(problem, budget).placement(problem)


def best_candidates(graph: TaskGraph, budget: int = DEFAULT_BUDGET) -> list[Placement]:
    """`best`'s placement first, then the portfolio's other placements (HEFT's, PEFT's,
    the single device's, round robin's, ...), each assignment once: for a caller that
    judges them by another measure than the list schedules' makespan."""
    with _no_cycle_collection():
        problem = Problem(graph)
        schedules = portfolio(problem)
        chosen = best_schedule(problem, budget, schedules)
        seen: set[tuple[int, ...]] = set()
        candidates = []
        for schedule in [chosen, *schedules]:
            key = tuple(schedule.device_of)
            if key not in seen:
                seen.add(key)
                candidates.append(schedule.placement(problem))
        return candidates


# --- local search -----------------------------------------------------------------------


def local_search(problem: Problem, schedule: Schedule, budget: int) -> Schedule:
    """Move one task of the critical path to another device and re-simulate (same order,
    with insertion), taking the first strict improvement; moves are tried in the order of
    their estimated gain, and only those estimated to gain. At a local optimum, re-order
    the tasks for their devices (a list schedule by `assigned_rank`) and go on if that
    helps. Stops there, or after `budget` whole-graph simulations' worth of tasks (of a
    graph of at most SEARCHED_TASKS): a move of the task at position p in the order
    re-simulates only positions p on."""
    steps = budget * min(max(problem.n, 1), SEARCHED_TASKS)
    current = schedule
    floor = lower_bound(problem)
    while steps > 0:
        if current.makespan - _EPS < floor:
            return current  # no move can gain more than _EPS
        moves = Moves(problem, current)
        steps -= problem.n  # finding the critical path and the moves
        improved = None
        for task, device in moves.promising():
            improved, used = moves.apply(task, device, current.makespan - _EPS)
            steps -= used
            if improved is not None or steps <= 0:
                break
        if improved is None and steps > 0:
            improved = _reordered(problem, current)
            steps -= problem.n
        if improved is None:
            return current
        current = improved
    return current


def lower_bound(problem: Problem) -> float:
    """No schedule of `problem` is shorter: its tasks at their cheapest, spread evenly over
    all devices, or in a chain of dependences with no transfer paid."""
    least = [min(row) for row in problem.cost]
    chain = [0.0] * problem.n
    for task in range(problem.n):
        # Only edges from earlier tasks (program order): leaving one out lowers the bound.
        start = max((chain[p] for p, _ in problem.preds[task] if p < task), default=0.0)
        chain[task] = start + least[task]
    spread = sum(least) / max(problem.n_devices, 1)
    return max(spread, max(chain, default=0.0))


def _reordered(problem: Problem, schedule: Schedule) -> Schedule | None:
    pinned = [[device] for device in schedule.device_of]
    candidate = list_schedule(problem, assigned_rank(problem, schedule), None, pinned)
    return candidate if candidate.makespan < schedule.makespan - _EPS else None


class Moves:
    """Moves of critical tasks in one schedule: which look promising, and trying one."""

    def __init__(self, problem: Problem, schedule: Schedule) -> None:
        self.problem = problem
        self.schedule = schedule
        self.position = [0] * problem.n
        for k, task in enumerate(schedule.order):
            self.position[task] = k
        self.on_device = tasks_by_device(problem, schedule)
        # Each device's tasks' positions in the order, and their times, for `apply`.
        self._positions = [[self.position[t] for t in tasks] for tasks in self.on_device]
        self._starts = [[schedule.start[t] for t in tasks] for tasks in self.on_device]
        self._finishes = [[schedule.finish[t] for t in tasks] for tasks in self.on_device]
        self._in_order = [all(a < b for a, b in zip(p, p[1:])) for p in self._positions]
        self._used = [device for device, tasks in enumerate(self.on_device) if tasks]
        self._gaps: list[Gaps | None] = [None] * problem.n_devices

    def promising(self) -> list[tuple[int, int]]:
        """(task, device) moves of critical tasks estimated to finish the critical path
        sooner, the largest estimated gain first."""
        problem, schedule = self.problem, self.schedule
        lines = Timelines(problem.n_devices)
        lines.starts, lines.finishes = self._starts, self._finishes  # only read
        frozen = FrozenTimelines(lines)
        path = critical_path(problem, schedule, self.on_device)
        site = problem.site
        idle = [not tasks for tasks in self.on_device]
        ranked = []
        for k, task in enumerate(path):
            after = path[k - 1] if k else -1
            row = problem.cost[task]
            # On a device with no task, the estimates depend only on the task's cost
            # there and the device's site, its node or link class (no input is there,
            # nothing is in the way): found once per such pair, not once per idle rank.
            known: dict[tuple[float, int], tuple[float, float]] = {}
            for device in problem.runnable[task]:
                if device == schedule.device_of[task]:
                    continue
                key = (row[device], site[device] if site is not None else 0)
                if idle[device] and key in known:
                    end, gain = known[key]
                else:
                    end = self._finish_on(frozen, task, device)
                    gain = self._gain(task, after, device, end)
                    if idle[device]:
                        known[key] = (end, gain)
                if gain > _EPS:
                    ranked.append((-gain, end, k, device, task))
        ranked.sort()
        return [(task, device) for *_, device, task in ranked]

    def _finish_on(self, lines: "FrozenTimelines", task: int, device: int) -> float:
        """When `task` would finish on `device`, its inputs where they are now and
        `device` busy as it is now (with the tasks placed after it too: an estimate)."""
        device_of, finish = self.schedule.device_of, self.schedule.finish
        ready = self.problem.ready_on(task, device, device_of, finish)
        duration = self.problem.cost[task][device]
        return lines.earliest_start(device, ready, duration) + duration

    def _gain(self, task: int, after: int, device: int, end: float) -> float:
        """How much sooner the critical path could go on past `task` (to `after`, the
        next critical task, if any) with `task` on `device` finishing at `end`."""
        schedule = self.schedule
        if after < 0:
            return schedule.finish[task] - end
        device_of = schedule.device_of
        paid = self.problem.paid
        for succ, comm in self.problem.succs[task]:
            if succ == after:
                paid_now = paid(task, after, comm, device_of[task], device_of[after])
                paid_then = paid(task, after, comm, device, device_of[after])
                return schedule.finish[task] + paid_now - (end + paid_then)
        # `after` waited for `task` on their device: moving `task` off frees it.
        return schedule.start[after] - self._data_ready(after)

    def _data_ready(self, task: int) -> float:
        device_of, finish = self.schedule.device_of, self.schedule.finish
        return self.problem.ready_on(task, device_of[task], device_of, finish)

    def apply(self, task: int, device: int, limit: float) -> tuple[Schedule | None, int]:
        """The schedule with `task` moved to `device` if all of it finishes before `limit`
        (else None), and how many tasks were simulated. Tasks before `task` in the order
        keep their times, so simulation resumes at its position."""
        problem, schedule, position = self.problem, self.schedule, self.position
        first = position[task]
        device_of = list(schedule.device_of)
        device_of[task] = device
        start, finish = list(schedule.start), list(schedule.finish)
        # A device with no task keeps none: only the others are looked at (of 65,536
        # ranks, a few may hold tasks).
        n_devices = problem.n_devices
        starts: list[list[float]] = [[] for _ in range(n_devices)]
        finishes: list[list[float]] = [[] for _ in range(n_devices)]
        gaps: list[Gaps | None] = [([], []) for _ in range(n_devices)]
        for other in self._used:
            starts[other], finishes[other] = self._before(other, first)
            gaps[other] = self._gaps_before(other, len(starts[other]))
        timelines = (starts, finishes)
        moved = simulate_from(
            problem, schedule.order, device_of, first, start, finish, timelines, limit, gaps
        )
        if moved is not None and moved.makespan >= limit:
            moved = None  # a task before `task` already finishes that late
        return moved, problem.n - first

    def _before(self, device: int, first: int) -> tuple[list[float], list[float]]:
        """The starts and finishes, in the device's order, of its tasks placed before
        position `first` of the order: a prefix when the device runs its tasks in the
        order (the common case, found by bisection), else picked one by one."""
        positions = self._positions[device]
        if self._in_order[device]:
            cut = bisect_left(positions, first)
            return self._starts[device][:cut], self._finishes[device][:cut]
        kept = [k for k, p in enumerate(positions) if p < first]
        return [self._starts[device][k] for k in kept], [self._finishes[device][k] for k in kept]

    def _gaps_before(self, device: int, cut: int) -> Gaps | None:
        """The gaps between the device's first `cut` intervals, when those are a prefix
        (else None: found when needed). The device's gaps are found once, and a prefix's
        are those beginning before its last finish (a copy, which the simulation updates):
        copying them costs far less than finding them again for every move tried."""
        if not self._in_order[device]:
            return None
        found = self._gaps[device]
        if found is None:
            found = self._gaps[device] = gaps_of(self._starts[device], self._finishes[device])
        if cut == 0:
            return [], []
        begins, ends = found
        count = bisect_left(begins, self._finishes[device][cut - 1])
        return begins[:count], ends[:count]


def critical_path(
    problem: Problem, schedule: Schedule, on_device: list[list[int]] | None = None
) -> list[int]:
    """The tasks whose times fix the makespan: back from the last finisher, through the
    input or the device predecessor that its start waited for. Latest first.
    (`on_device`: `tasks_by_device(problem, schedule)`, if already at hand.)"""
    if problem.n == 0:
        return []
    task = max(range(problem.n), key=lambda t: (schedule.finish[t], -t))
    previous = [-1] * problem.n
    for tasks in on_device or tasks_by_device(problem, schedule):
        for before, after in zip(tasks, tasks[1:]):
            previous[after] = before
    path = [task]
    seen = {task}
    while schedule.start[task] > _EPS:
        task = _blocker(problem, schedule, task, previous)
        if task < 0 or task in seen:
            break
        path.append(task)
        seen.add(task)
    return path


def tasks_by_device(problem: Problem, schedule: Schedule) -> list[list[int]]:
    """Each device's tasks in the order they run (by start, then finish)."""
    by_device: list[list[int]] = [[] for _ in range(problem.n_devices)]
    start, finish = schedule.start, schedule.finish
    for task in sorted(range(problem.n), key=lambda t: (start[t], finish[t])):
        by_device[schedule.device_of[task]].append(task)
    return by_device


def _blocker(problem: Problem, schedule: Schedule, task: int, previous: list[int]) -> int:
    begin, device = schedule.start[task], schedule.device_of[task]
    for pred, comm in problem.preds[task]:
        paid = problem.paid(pred, task, comm, schedule.device_of[pred], device)
        if abs(schedule.finish[pred] + paid - begin) <= _EPS:
            return pred
    before = previous[task]
    if before >= 0 and abs(schedule.finish[before] - begin) <= _EPS:
        return before
    return -1


# The placement algorithms by the names every command and pass takes, and the default of
# `dhir run`, `dhir compile`, `dhir schedule` and `dhir.run`.
DEFAULT_ALGORITHM = "best"
ALGORITHMS: dict[str, Callable[[TaskGraph], Placement]] = {
    "round-robin": round_robin_graph,
    "heft": heft,
    "peft": peft,
    "best": best,
}
