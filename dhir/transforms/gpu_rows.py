"""Row-wise device data for a time loop whose GPU tasks on several ranks share memrefs by
rows: which rows go from one rank's device to another's each step (a halo exchange),
which rows each rank copies in before the loop and out after it.

dhir-gpu-data tracks whole memrefs; where two ranks' GPU tasks write different rows of
one memref and read a few of each other's (a Jacobi sweep cut in two), each write made
the other rank's whole device copy stale, so every step copied whole arrays out, through
MPI and back in. Here the state is per row (along the first dimension): per memref, the
rows each rank's device holds current, and the task that wrote each row last. Steps are
simulated until what a step does repeats; a row a task needs that another rank's device
wrote last comes from there, in a message of just those rows, sent at the end of the
writer's task: in the same step, or (`crossing`) on the step before, not on the loop's
last step, and received on every step but the first. What the first step needs that no
task wrote before is copied in from the host before the loop, and what the loop wrote
goes out after it, from the rank that wrote it last.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from dhir.analysis.regions import row_span, rows_region, task_regions
from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import PieceRows

# Rows [first, end) along a memref's first dimension.
Interval = tuple[int, int]


@dataclass(frozen=True)
class Rows:
    """A set of rows, as sorted, disjoint, non-adjacent intervals."""

    spans: tuple[Interval, ...] = ()

    @staticmethod
    def of(spans: Iterable[Interval]) -> "Rows":
        merged: list[Interval] = []
        for low, high in sorted(s for s in spans if s[0] < s[1]):
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        return Rows(tuple(merged))

    def __or__(self, other: "Rows") -> "Rows":
        return Rows.of(self.spans + other.spans)

    def __and__(self, other: "Rows") -> "Rows":
        return Rows.of((max(a, c), min(b, d)) for a, b in self.spans for c, d in other.spans)

    def __sub__(self, other: "Rows") -> "Rows":
        left = list(self.spans)
        for c, d in other.spans:
            left = [p for a, b in left for p in ((a, min(b, c)), (max(a, d), b)) if p[0] < p[1]]
        return Rows.of(left)

    def __bool__(self) -> bool:
        return bool(self.spans)


@dataclass(frozen=True)
class RowFacts:
    """A whole GPU task: its rank; per memref it touches, the rows whose current values
    it needs (what it reads, and what it may write without surely writing it) and the
    rows it may write."""

    rank: int
    needs: dict[SSAValue, Rows]
    writes: dict[SSAValue, Rows]


@dataclass(frozen=True)
class RowMessage:
    """Rows of a memref that task `sender` sends at its end to task `receiver` (on
    another rank), which receives them at its start: on the next step where
    `crossing`."""

    memref: SSAValue
    rows: Interval
    sender: int
    receiver: int
    crossing: bool


@dataclass
class RowPlan:
    messages: list[RowMessage]
    # Per rank: rows copied host to device before the loop, device to host after it.
    copy_in: dict[int, list[tuple[SSAValue, Interval]]]
    copy_out: dict[int, list[tuple[SSAValue, Interval]]]
    # Per task: the messages (their places in `messages`) whose sends must have finished
    # before it, since it writes some of their rows on the sender's device.
    ready: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class _State:
    valid: dict[SSAValue, dict[int, Rows]]  # per memref and rank: rows current there
    last: dict[SSAValue, list[tuple[Rows, int]]]  # per memref: rows, the task that wrote them


# Steps simulated: the first (from the host), then until two in a row do the same.
STEPS = 4


def plan_row_loop(
    facts: Sequence[RowFacts], order: Sequence[SSAValue], needed_after: set[SSAValue]
) -> RowPlan | None:
    """The row-wise plan for a time loop's schedule of whole GPU tasks `facts`, in program
    order; None where the steps do not settle into one that repeats."""
    state = _State({m: {} for m in order}, {m: [] for m in order})
    first, copy_in = _step(facts, state, order)
    steps = [_step(facts, state, order) for _ in range(STEPS - 1)]
    if any(host for _, host in steps) or steps[-1][0] != steps[-2][0]:
        return None
    messages = steps[-1][0]
    if [m for m in messages if not m.crossing] != first:
        return None
    copy_out: dict[int, list[tuple[SSAValue, Interval]]] = {}
    for m in order:
        if m in needed_after:
            for rows, k in state.last[m]:
                copy_out.setdefault(facts[k].rank, []).extend((m, s) for s in rows.spans)
    plan = RowPlan(messages, copy_in, copy_out)
    for number, message in enumerate(messages):
        writer = _next_writer(facts, message)
        plan.ready.setdefault(writer, []).append(number)
    return plan


def _step(
    facts: Sequence[RowFacts], state: _State, order: Sequence[SSAValue]
) -> tuple[list[RowMessage], dict[int, list[tuple[SSAValue, Interval]]]]:
    """One step from `state`, which it updates: the messages it receives, and per rank
    the rows it takes from the host (no task wrote them yet)."""
    messages: list[RowMessage] = []
    host: dict[int, list[tuple[SSAValue, Interval]]] = {}
    for k, task in enumerate(facts):
        for m in order:
            needs = task.needs.get(m, Rows())
            valid = state.valid[m]
            missing = needs - valid.get(task.rank, Rows())
            for rows, writer in state.last[m]:
                got = missing & rows
                assert not got or facts[writer].rank != task.rank, "a write got lost"
                messages += [RowMessage(m, s, writer, k, writer >= k) for s in got.spans]
                missing = missing - rows
            written = task.writes.get(m, Rows())
            # Rows it writes that no task wrote yet come from the host too, as dhir-gpu-data
            # fills what a kernel writes: one that leaves some unwritten still copies out
            # the host's values (and so does the fake driver, which runs no kernel).
            fill = written - valid.get(task.rank, Rows())
            for rows, _ in state.last[m]:
                fill = fill - rows
            host.setdefault(task.rank, []).extend((m, s) for s in (missing | fill).spans)
            valid[task.rank] = valid.get(task.rank, Rows()) | needs | fill
            if not written:
                continue
            for rank in valid:
                valid[rank] = valid[rank] - written if rank != task.rank else valid[rank] | written
            kept = [(rows - written, j) for rows, j in state.last[m]]
            state.last[m] = [(rows, j) for rows, j in kept if rows] + [(written, k)]
    return messages, {r: spans for r, spans in host.items() if spans}


def _next_writer(facts: Sequence[RowFacts], message: RowMessage) -> int:
    """The first task after the message's receiver, on its sender's rank, that writes
    some of its rows (wrapping round to the next step: the sender itself does)."""
    rank = facts[message.sender].rank
    rows = Rows.of([message.rows])
    count = len(facts)
    for later in range(message.receiver + 1, message.receiver + 1 + count):
        task = facts[later % count]
        if task.rank == rank and task.writes.get(message.memref, Rows()) & rows:
            return later % count
    raise AssertionError("the sender writes its rows")


def task_rows(task: TaskOp) -> dict[SSAValue, PieceRows]:
    """Per memref `task` touches: the rows whose current values it needs (`copy_in`: what
    it reads, and what it may write without surely writing it) and the rows it may write
    (`copy_out`), from its access regions; None for every row (or unknown)."""
    regions = task_regions(task)
    found: dict[SSAValue, PieceRows] = {}
    for m in task.memrefs:
        if m not in regions.reads and m not in regions.writes:
            continue
        read = row_span(regions.read(m), m)
        written = row_span(regions.written(m), m)
        sure = written is not None and (
            written[0] >= written[1] or rows_region(m, written).is_subset(regions.must_written(m))
        )
        needs = read if sure else _hull(read, written)
        found[m] = PieceRows(needs, written)
    return found


def _hull(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    """The rows from the first of `a` and `b` to the last of them (None: all rows)."""
    if a is None or b is None:
        return None
    if a[0] >= a[1]:
        return b
    if b[0] >= b[1]:
        return a
    return min(a[0], b[0]), max(a[1], b[1])


__all__ = [
    "Interval",
    "RowFacts",
    "RowMessage",
    "RowPlan",
    "Rows",
    "plan_row_loop",
    "task_rows",
]
