"""Cost-driven placement of a `TaskGraph`: list schedulers with insertion.

- `round_robin_graph`: task k runs on device k mod D (the next device that can run it).
- `heft`: Topcuoglu, Hariri and Wu 2002 (upward rank on mean costs, insertion-based EFT).
- `peft`: Arabnejad and Barbosa 2014 (optimistic cost table, rank_oct, EFT + OCT).
- `best`: a portfolio of list schedulers (HEFT, PEFT and rank/selection variants), then a
  bounded local search that moves critical tasks between devices. It starts from the best
  member, and the portfolio holds HEFT and PEFT, so it is never worse than either.

Everything is deterministic: ties go to the earlier task (in the graph's order) and the
earlier device (in `graph.devices`).
"""

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from heapq import heapify, heappop, heappush

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.placement.graph import Placement, TaskGraph

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
        everywhere = list(range(self.n_devices))  # shared by rows that run anywhere; read-only
        self.runnable = [
            [k for k, c in enumerate(row) if c < INF] if INF in row else everywhere
            for row in self.cost
        ]
        stuck = [graph.tasks[i] for i, devices in enumerate(self.runnable) if not devices]
        if stuck:
            raise DhirError(
                [
                    Diagnostic(
                        f"no device can run task '{task}' (its costs name none of the "
                        f"devices {', '.join(graph.devices) or '(none)'})"
                    )
                    for task in stuck
                ]
            )
        self.preds: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        self.succs: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        preds, succs = self.preds, self.succs
        for edge in graph.edges:
            source, target, comm = index[edge.source], index[edge.target], edge.comm
            preds[target].append((source, comm))
            succs[source].append((target, comm))
        # sum(row) adds the same floats in the same order as the general form.
        self.mean_cost = [
            sum(row) / len(row)
            if devices is everywhere
            else sum(row[k] for k in devices) / len(devices)
            for row, devices in zip(self.cost, self.runnable)
        ]


def _cost_row(costs: dict[str, float], devices: tuple[str, ...]) -> list[float]:
    if len(costs) == len(devices):
        try:
            return list(map(costs.__getitem__, devices))  # the common case: runs anywhere
        except KeyError:
            pass
    return [costs.get(device, INF) for device in devices]


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
    problem: Problem, priority: Sequence[float], lookahead: Sequence[Sequence[float]] | None
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
    cost, runnable = problem.cost, problem.runnable
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
    no_lookahead = [0.0] * n_devices
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
        extra = lookahead[task] if lookahead is not None else no_lookahead
        row = cost[task]
        best_score, best_device, best_begin, best_end = INF, -1, 0.0, 0.0
        for device in runnable[task]:
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
                count = len(starts)
                while k < count:
                    if begin + duration <= starts[k]:
                        break
                    begin = finishes[k]
                    k += 1
            end = begin + duration
            score = end + extra[device]
            if score < best_score:
                best_score, best_device, best_begin, best_end = score, device, begin, end
        start[task], finish[task] = best_begin, best_end
        device_of[task] = best_device
        # Timelines.add, inlined.
        starts, finishes = all_starts[best_device], all_finishes[best_device]
        if best_begin >= tail[best_device]:
            starts.append(best_begin)
            finishes.append(best_end)
            tail[best_device] = best_end
        else:
            k = bisect_right(starts, best_begin)
            while k > 0 and starts[k - 1] == best_begin and finishes[k - 1] > best_end:
                k -= 1  # a zero-length task goes before the one starting at the same time
            starts.insert(k, best_begin)
            finishes.insert(k, best_end)
        append_order(task)
        for succ, _ in succs[task]:
            waiting[succ] -= 1
            if not waiting[succ]:
                push(heap, (-priority[succ], succ))
    return Schedule(order, device_of, start, finish)


def simulate(problem: Problem, order: Sequence[int], device_of: list[int]) -> Schedule:
    """Start times for a fixed assignment: tasks in `order` (topological), each as early as
    its inputs and an idle gap on its device allow.

    `ready_times`, `Timelines.earliest_start` and `Timelines.add` are inlined here (the
    local search calls this many times), with the same arithmetic."""
    n = problem.n
    n_devices = problem.n_devices
    start, finish = [0.0] * n, [0.0] * n
    all_starts: list[list[float]] = [[] for _ in range(n_devices)]
    all_finishes: list[list[float]] = [[] for _ in range(n_devices)]
    tail = [-INF] * n_devices  # the last finish on each device (-inf while empty)
    cost, preds = problem.cost, problem.preds
    for task in order:
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
        if device == first_device:
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
            count = len(starts)
            while k < count:
                if begin + duration <= starts[k]:
                    break
                begin = finishes[k]
                k += 1
        end = begin + duration
        start[task], finish[task] = begin, end
        if begin >= tail[device]:
            starts.append(begin)
            finishes.append(end)
            tail[device] = end
        else:
            k = bisect_right(starts, begin)
            while k > 0 and starts[k - 1] == begin and finishes[k - 1] > end:
                k -= 1  # a zero-length task goes before the one starting at the same time
            starts.insert(k, begin)
            finishes.insert(k, end)
    return Schedule(list(order), list(device_of), start, finish)


# --- priorities -------------------------------------------------------------------------


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
    with t on p (comm paid when a child runs elsewhere)."""
    zeros = [0.0] * problem.n_devices  # shared by exits; rows are replaced, never mutated
    table = [zeros] * problem.n
    # Per child: its OCT plus its cost on each device (INF where it cannot run), and the min.
    through = [[]] * problem.n
    cheapest = [0.0] * problem.n
    for task in reversed(range(problem.n)):
        row = zeros
        for succ, comm in problem.succs[task]:
            remote = cheapest[succ] + comm
            # On p itself the child pays no comm; elsewhere the cheapest remote choice.
            row = [
                r if r >= v else (v if v < remote else (r if r >= remote else remote))
                for r, v in zip(row, through[succ])
            ]
        table[task] = row
        through[task] = [o + c for o, c in zip(row, problem.cost[task])]
        cheapest[task] = min(through[task])
    return table


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
    problem = Problem(graph)
    device_of = []
    for k, row in enumerate(problem.cost):
        turn = k % problem.n_devices
        device_of.append(next(d for d in _cyclic(turn, problem.n_devices) if row[d] < INF))
    return simulate(problem, range(problem.n), device_of).placement(problem)


def _cyclic(first: int, count: int) -> list[int]:
    return [(first + k) % count for k in range(count)]


def heft_schedule(problem: Problem) -> Schedule:
    return list_schedule(problem, upward_rank(problem, problem.mean_cost), None)


def peft_schedule(problem: Problem) -> Schedule:
    table = optimistic_cost_table(problem)
    return list_schedule(problem, oct_rank(problem, table), table)


def heft(graph: TaskGraph) -> Placement:
    problem = Problem(graph)
    return heft_schedule(problem).placement(problem)


def peft(graph: TaskGraph) -> Placement:
    problem = Problem(graph)
    return peft_schedule(problem).placement(problem)


def portfolio(problem: Problem) -> list[Schedule]:
    """HEFT and PEFT first (so ties keep them), then variants that win on other shapes:
    each ranking with the other's device choice, an optimistic (min-cost) rank, and a
    critical-path rank (upward + downward, as in CPOP)."""
    table = optimistic_cost_table(problem)
    rank_u = upward_rank(problem, problem.mean_cost)
    rank_oct = oct_rank(problem, table)
    fastest = [min(row[d] for d in devices) for row, devices in zip(problem.cost, problem.runnable)]
    rank_min = upward_rank(problem, fastest)
    rank_d = downward_rank(problem)
    rank_cp = [u + d for u, d in zip(rank_u, rank_d)]
    return [
        list_schedule(problem, rank_u, None),
        list_schedule(problem, rank_oct, table),
        list_schedule(problem, rank_u, table),
        list_schedule(problem, rank_oct, None),
        list_schedule(problem, rank_min, None),
        list_schedule(problem, rank_cp, None),
    ]


def best_schedule(problem: Problem, budget: int | None = None) -> Schedule:
    start = min(portfolio(problem), key=lambda s: s.makespan)  # first minimum: HEFT on ties
    if budget is None:
        # Each evaluation re-simulates the whole graph; bound the total work.
        budget = max(10, min(200, 60_000 // max(problem.n, 1)))
    return local_search(problem, start, budget)


def best(graph: TaskGraph, budget: int | None = None) -> Placement:
    problem = Problem(graph)
    return best_schedule(problem, budget).placement(problem)


def local_search(problem: Problem, schedule: Schedule, budget: int) -> Schedule:
    """Move one task of the critical path to another device, re-simulate with insertion
    (same order), keep the first strict improvement; stop at a local optimum or after
    `budget` simulations."""
    current = schedule
    while budget > 0:
        improved = None
        for task in critical_path(problem, current):
            for device in problem.runnable[task]:
                if device == current.device_of[task] or budget <= 0:
                    continue
                budget -= 1
                device_of = list(current.device_of)
                device_of[task] = device
                candidate = simulate(problem, current.order, device_of)
                if candidate.makespan < current.makespan - _EPS:
                    improved = candidate
                    break
            if improved is not None or budget <= 0:
                break
        if improved is None:
            return current
        current = improved
    return current


def critical_path(problem: Problem, schedule: Schedule) -> list[int]:
    """The tasks whose times fix the makespan: back from the last finisher, through the
    input or the device predecessor that its start waited for. Latest first."""
    if problem.n == 0:
        return []
    task = max(range(problem.n), key=lambda t: (schedule.finish[t], -t))
    previous_on_device = _previous_on_device(problem, schedule)
    path = [task]
    seen = {task}
    while schedule.start[task] > _EPS:
        task = _blocker(problem, schedule, task, previous_on_device)
        if task < 0 or task in seen:
            break
        path.append(task)
        seen.add(task)
    return path


def _previous_on_device(problem: Problem, schedule: Schedule) -> list[int]:
    by_device: list[list[int]] = [[] for _ in range(problem.n_devices)]
    for task in sorted(range(problem.n), key=lambda t: (schedule.start[t], schedule.finish[t])):
        by_device[schedule.device_of[task]].append(task)
    previous = [-1] * problem.n
    for tasks in by_device:
        for before, after in zip(tasks, tasks[1:]):
            previous[after] = before
    return previous


def _blocker(problem: Problem, schedule: Schedule, task: int, previous: list[int]) -> int:
    begin, device = schedule.start[task], schedule.device_of[task]
    for pred, comm in problem.preds[task]:
        paid = comm if schedule.device_of[pred] != device else 0.0
        if abs(schedule.finish[pred] + paid - begin) <= _EPS:
            return pred
    before = previous[task]
    if before >= 0 and abs(schedule.finish[before] - begin) <= _EPS:
        return before
    return -1


ALGORITHMS: dict[str, Callable[[TaskGraph], Placement]] = {
    "round-robin": round_robin_graph,
    "heft": heft,
    "peft": peft,
    "best": best,
}
