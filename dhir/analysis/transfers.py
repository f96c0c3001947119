"""When each message of a schedule is sent, received and completed.

The validity walk (analysis/validity.py) says which transfers a task needs. A receive
stays right before the task that needs it; the send is posted (non-blocking) as early
as its data is final on the sender: right after the sender last wrote or received any
of the elements it carries, or at the start of the schedule. The sender completes it
(waits) as late as it may: before it next writes or receives any of those elements, or
at the end of the schedule. So a rank never waits for its receiver to reach the
matching receive, and data written early travels while both ranks compute.

Events are ordered by a key (slot, order, sequence): slot k holds what happens before
task k (slot n: the end), and within a slot the sends of data final after task k-1 come
first, then receives and the sends they make possible in planning order, then waits.

Deadlock freedom: every rank runs its events in key order. A send never blocks. A
receive waits only for its send, whose key is smaller (posted no later than the data's
last change before the receive). A wait waits only for its receive, whose key is
smaller (the sender keeps the data unchanged until after the receive). So every event
waits only for events with smaller keys, and by induction on the key all complete.
Sends of one memref between two ranks are posted in the order of their receives, so
MPI matches them right without extra tags.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl
from xdsl.ir import SSAValue

from dhir.analysis.effects import Effects
from dhir.analysis.regions import Regions
from dhir.analysis.validity import Transfer, Validity, carried

Key = tuple[int, int, int, int]
# How far back to look for the last change of a transfer's data: beyond it, the send
# is posted at the oldest change looked at (later than needed, never wrong).
LOOKBACK = 64


@dataclass(frozen=True)
class TaskStep:
    """What the plan needs of a task: its rank, effects and regions."""

    rank: int
    effects: Effects
    regions: Regions

    def run(self, value: SSAValue, state: Validity) -> list[Transfer]:
        """The transfers of `value` the task needs from `state`, which then records its
        writes (Validity.run_task)."""
        regions = self.regions
        return state.run_task(
            value,
            self.rank,
            regions.read(value),
            regions.written(value),
            regions.must_written(value),
        )


@dataclass(frozen=True)
class Event:
    """One thing one rank does, at `key`: `kind` is "send" (post transfer number
    `slot`), "recv", "wait" (complete send `slot`) or "task" (run task `task`)."""

    key: Key
    kind: str
    rank: int
    transfer: Transfer | None = None
    slot: int = -1
    task: int = -1


@dataclass
class _Pending:
    slot: int
    region: isl.Set
    recv_key: Key


def plan_events(
    steps: Sequence[TaskStep], state: Validity, order: dict[SSAValue, int]
) -> list[Event]:
    """The events of a schedule whose tasks are `steps`, from validity `state` (which
    ends as the schedule leaves it), in the order every rank runs them."""
    planner = _Planner(state, order)
    for k, step in enumerate(steps):
        planner.task(k, step)
    planner.finish(len(steps))
    return sorted(planner.events, key=lambda e: e.key)


class _Planner:
    def __init__(self, state: Validity, order: dict[SSAValue, int]) -> None:
        self.state = state
        self.order = order
        self.events: list[Event] = []
        self.sequence = 0
        # Per (memref, rank): when that rank's copy last changed, and which elements.
        self.changes: dict[tuple[SSAValue, int], list[tuple[Key, isl.Set]]] = {}
        self.last_send: dict[tuple[SSAValue, int, int], Key] = {}
        self.pending: dict[tuple[SSAValue, int], list[_Pending]] = {}
        self.slots = 0

    def task(self, k: int, step: TaskStep) -> None:
        for value in sorted(step.effects.touches(), key=self.order.__getitem__):
            for transfer in step.run(value, self.state):
                self._transfer(k, transfer)
        self.events.append(Event((k, 3, 0, 0), "task", step.rank, task=k))
        for value in step.effects.writes:
            written = self.state.widen(value, step.regions.written(value))
            if written.is_empty():
                continue
            self._complete_before(value, step.rank, written, (k, 2, 0, 0))
            self._changed(value, step.rank, (k + 1, 0, 0, 0), written)

    def finish(self, end: int) -> None:
        for (_, rank), sends in self.pending.items():
            for send in sends:
                self.events.append(Event((end, 2, 0, send.slot), "wait", rank, slot=send.slot))
        self.pending = {}

    def _transfer(self, k: int, transfer: Transfer) -> None:
        assert transfer.dest is not None
        value, source, dest = transfer.memref, transfer.source, transfer.dest
        region = carried(value, transfer, span=True)
        self.sequence += 1
        recv_key: Key = (k, 1, self.sequence, 2)
        send_key = max(
            self._last_change(value, source, region),
            self.last_send.get((value, source, dest), (0, 0, 0, 0)),
        )
        self.last_send[(value, source, dest)] = send_key
        slot = self.slots
        self.slots += 1
        self.events.append(Event(send_key, "send", source, transfer, slot=slot))
        self._complete_before(value, dest, region, (k, 1, self.sequence, 0))
        self.events.append(Event(recv_key, "recv", dest, transfer, slot=slot))
        self.pending.setdefault((value, source), []).append(_Pending(slot, region, recv_key))
        self._changed(value, dest, (k, 1, self.sequence, 3), region)

    def _last_change(self, value: SSAValue, rank: int, region: isl.Set) -> Key:
        """Just after the last change of any element of `region` on `rank`."""
        changes = self.changes.get((value, rank), [])
        for key, changed in reversed(changes[-LOOKBACK:]):
            if not (changed & region).is_empty():
                return key
        if len(changes) > LOOKBACK:
            return changes[-LOOKBACK][0]
        return (0, 0, 0, 0)

    def _changed(self, value: SSAValue, rank: int, key: Key, region: isl.Set) -> None:
        self.changes.setdefault((value, rank), []).append((key, region))

    def _complete_before(self, value: SSAValue, rank: int, region: isl.Set, key: Key) -> None:
        """Wait, before `key`, for the sends from `rank` that read elements `region`
        overwrites; each waits after its receive."""
        sends = self.pending.get((value, rank), [])
        keep: list[_Pending] = []
        for send in sends:
            if (send.region & region).is_empty():
                keep.append(send)
                continue
            wait = max(key, send.recv_key)
            self.events.append(Event((*wait[:3], wait[3] + 1), "wait", rank, slot=send.slot))
        self.pending[(value, rank)] = keep


def skipped_first(
    steps: Sequence[TaskStep],
    events: Sequence[Event],
    first: Validity,
    start: Validity,
    shared: Mapping[SSAValue, isl.Set] | None = None,
) -> frozenset[int]:
    """The slots of the transfers, of `events` planned from `start` (the validity every
    iteration of a time loop begins with), that the loop's first iteration, beginning
    with `first` (what the ranks hold on entering the loop: the input's rows, which
    `start` meets with what an iteration leaves), needs not: their receivers already
    hold what they carry. Checked by running the first iteration from `first` with the
    other transfers: empty where a task would then lack an element it needs, or the
    iteration ends holding less than `start` (the later iterations' plan), once every
    rank holds the `shared` regions, as every iteration's end makes them (the elements
    the loop's host code loads)."""
    state = first.copy()
    received: dict[int, list[Transfer]] = {}
    slots: dict[int, int] = {}
    for event in events:
        if event.kind == "recv" and event.transfer is not None:
            received.setdefault(event.key[0], []).append(event.transfer)
            slots[id(event.transfer)] = event.slot
    skipped: set[int] = set()
    for k, step in enumerate(steps):
        for value in step.effects.touches():
            for transfer in (t for t in received.get(k, []) if t.memref is value):
                assert transfer.dest is not None
                region = carried(value, transfer)
                if state.holds(value, transfer.dest, region):
                    skipped.add(slots[id(transfer)])
                elif state.holds(value, transfer.source, region):
                    state.receive(value, transfer.dest, region)
                else:
                    return frozenset()
            regions = step.regions
            reads, writes = regions.read(value), regions.written(value)
            needed = state.needs(value, reads, writes, regions.must_written(value))
            if not state.holds(value, step.rank, needed):
                return frozenset()
            step.run(value, state)
    for value, region in (shared or {}).items():
        state.spread(value, region)
    return frozenset(skipped) if state.meet(start).same(start) else frozenset()
