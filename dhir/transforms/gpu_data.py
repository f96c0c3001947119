"""`dhir-gpu-data`: device buffers, and the copies between host and device, for GPU tasks.

Runs after dhir-place (it needs each task's rank) and before dhir-lower-to-mpi. For every
schedule with GPU tasks it walks the tasks in program order and tracks, per memref, on which
ranks the device copy is valid and whether some rank's device holds data newer than every
host copy ("dirty"):

- Before a GPU task on rank R: R's device buffer for each memref the task touches is
  allocated (once per memref and rank, before the schedule, or before its time loop when
  the loop's body is the schedule alone; freed after it), and filled from
  R's host copy when R's device copy is stale. Written memrefs are filled too: a kernel may
  write only part of a buffer.
- After a GPU task: what it left dirty on the device is copied back to R's host copy only
  when something needs the host copy next: a CPU task on any rank, a GPU piece of a split
  loop, or code after the schedule (every schedule operand counts as needed afterwards
  unless it is a local allocation with no later use). A memref that the next task
  touching it also uses on R's GPU stays on the device: no copies in between.
- When that next task is a GPU task on another rank S, R's device buffer goes straight to
  S's (`dhir_rt_gpu_send` at the end of R's task, `dhir_rt_gpu_recv` at the start of S's;
  the runtime hands device addresses to a CUDA-aware MPI, or stages them through
  page-locked host buffers). No host copy is current then, and none is written: the
  copy out happens later, from whichever device holds the value when a host needs it.
  A send never waits for its receiver; the next GPU task on R that uses the buffer first
  waits for it (`dhir_rt_gpu_ready`), and so does freeing the buffer.
- A write anywhere else (a CPU task, a GPU task on another rank) invalidates R's device copy.
- In a time loop (an scf.for or scf.while holding the schedule and nothing else that
  touches its memrefs, `time_loop`, or nothing else but loads of some of them,
  `loop_reading_between_steps`), the steps are planned as a cycle
  (`plan_loop_copies`): what the next step first uses on a device that still holds it
  stays there, copied in under `scf.if` on the loop's first step and out on its last
  (`_Steps`; for an scf.while with no test for its last step, by a schedule of its own
  after the loop). What a host or another rank touches between two GPU uses is copied
  every step, as in a schedule alone; so is what the loop's own loads read: only the
  elements they load, where their subscripts are known numbers.
- An scf.for time loop whose schedule holds only GPU tasks, on several ranks, is planned
  row by row instead (dhir.transforms.gpu_rows): only the rows one GPU needs of another's
  go between them each step (`dhir_rt_gpu_send_rows`/`recv_rows`), and each rank's rows
  are copied in once before the loop and out once after it, by schedules of their own.

The copies become part of the GPU task's own body (`gpu.memcpy`), and the body uses the
device buffers instead of the schedule operands. So dhir-lower-to-mpi sees ordinary host
effects: a copy in reads the host memref (and brings it to R first), a copy out writes it.
Device messages touch no host memref, so dhir-lower-to-mpi sees none of them; they go on
a communicator of their own, each rank's in program order like its other messages.

Device buffers are made before the schedule, under `scf.if rank == R` on several ranks
(other ranks get the host memref, which they never use), by an op carrying
`dhir.device_buffer`: the task verifier lets GPU tasks use such values without listing
them, since they are private to one rank's device and never travel between ranks.

Each GPU task first calls `dhir_rt_gpu_task(name)` (dhir/runtime/dhir_gpu_rt.c), so that a
failing CUDA call, or a missing driver, is reported with the task's name and location.

Each device buffer is paired with its host memref (`dhir_rt_gpu_pair`), saying whether the
host memref lasts the whole run (an argument of the entry, a global): the runtime may then
page-lock it, which makes the copies several times faster, and keep it locked across
schedules until the entry returns (`dhir_rt_gpu_unpin_all`, called before its returns).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    UnitAttr,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue, Use
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.analysis.counted_whiles import counted_bounds
from dhir.analysis.effects import Effects, task_effects
from dhir.analysis.handoff import drop_facts
from dhir.analysis.outputs import loaded_elements, loop_reading_between_steps, time_loop
from dhir.dialects import arith, func, mpi, scf
from dhir.dialects import gpu as dgpu
from dhir.dialects import memref as xmemref
from dhir.dialects.access import is_view
from dhir.dialects.dhir import DEVICE_BUFFER_ATTR, RANK_ATTR, ScheduleOp, TargetOp, TaskOp
from dhir.ir.layout import element_bytes
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import (
    GPU_ROWS_ATTR,
    PieceRows,
    Span,
    is_gpu_task,
    rank_of,
    rows_of,
    task_label,
    task_numbers,
)
from dhir.machine.dlti import system_of
from dhir.placement.from_ir import has_machine
from dhir.targets import DeviceKind
from dhir.transforms.building import (
    ConstantArrays,
    aligned_address,
    element_view,
    rows_view,
    while_with_flag,
)
from dhir.transforms.gpu_rows import (
    Interval,
    RowFacts,
    RowMessage,
    RowPlan,
    Rows,
    plan_row_loop,
    task_rows,
)
from dhir.transforms.instrument import BEGIN as TASK_BEGIN
from dhir.transforms.instrument import END as TASK_END
from dhir.transforms.pass_options import check_entry, check_ranks
from dhir.transforms.track_tasks import ENTER as TASK_ENTER
from dhir.transforms.track_tasks import LEAVE as TASK_LEAVE

TASK_HOOK = "dhir_rt_gpu_task"
PAIR_HOOK = "dhir_rt_gpu_pair"
UNPIN_HOOK = "dhir_rt_gpu_unpin_all"
SEND_HOOK = "dhir_rt_gpu_send"
RECV_HOOK = "dhir_rt_gpu_recv"
READY_HOOK = "dhir_rt_gpu_ready"
SEND_ROWS_HOOK = "dhir_rt_gpu_send_rows"
RECV_ROWS_HOOK = "dhir_rt_gpu_recv_rows"
READY_ROWS_HOOK = "dhir_rt_gpu_ready_rows"
MESSAGE_TAGS = 1 << 14  # DONE_TAG in dhir_gpu_rt.c


@dataclass(frozen=True)
class GpuDataPass(ModulePass):
    """Allocate device buffers and copy between host and device around GPU tasks."""

    name = "dhir-gpu-data"

    ranks: int = 1
    # The function the program starts in: its arguments last the whole run.
    entry: str | None = None
    # Send what only a device holds straight to the next GPU task's device on another
    # rank (dhir_rt_gpu_send/recv), not through both hosts.
    device_messages: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_ranks(self.name, self.ranks)
        check_entry(self.name, op, self.entry)
        labels = _Labels(op)
        numbers = described_gpus(op, self.ranks)
        entry = _entry_function(op, self.entry)
        lasting = messages = row_messages = False
        local = _LocalUses()
        for schedule in [s for s in op.walk() if isinstance(s, ScheduleOp)]:
            tasks = list(schedule.tasks())
            if any(is_gpu_task(t) for t in tasks):
                data = _ScheduleData(schedule, tasks, self.ranks, labels, numbers, local, entry)
                data.run(self.device_messages)
                lasting |= data.lasting
                messages |= data.messages
                row_messages |= data.row_messages
        if labels.used:
            block = op.body.block
            block.add_op(func.FuncOp.external(TASK_HOOK, [i64], []))
            block.add_op(func.FuncOp.external(PAIR_HOOK, [i64, i64, i64], []))
        if messages:
            block = op.body.block
            block.add_op(func.FuncOp.external(SEND_HOOK, [i64, i32, i32], []))
            block.add_op(func.FuncOp.external(RECV_HOOK, [i64, i32, i32], []))
            block.add_op(func.FuncOp.external(READY_HOOK, [i64], []))
        if row_messages:
            block = op.body.block
            block.add_op(func.FuncOp.external(SEND_ROWS_HOOK, [i64, i64, i64, i32, i32], []))
            block.add_op(func.FuncOp.external(RECV_ROWS_HOOK, [i64, i64, i64, i32, i32], []))
            block.add_op(func.FuncOp.external(READY_ROWS_HOOK, [i32], []))
        if lasting and entry is not None:
            _unpin_before_returns(entry)
            op.body.block.add_op(func.FuncOp.external(UNPIN_HOOK, [], []))


# --- the plan: which copies go where ---------------------------------------------------


# The subscripts of one element of a memref.
Element = tuple[int, ...]


@dataclass
class CopyPlan:
    """Per task index: memrefs copied host to device before it, device to host after it;
    device messages (memref, the other rank) received before it and sent after it; device
    buffers whose earlier send must have finished before it (`ready`), and the sends that
    may be in flight when the schedule ends (`in_flight`)."""

    copy_in: dict[int, list[SSAValue]] = field(default_factory=dict)
    copy_out: dict[int, list[SSAValue]] = field(default_factory=dict)
    receive: dict[int, list[tuple[SSAValue, int]]] = field(default_factory=dict)
    send: dict[int, list[tuple[SSAValue, int]]] = field(default_factory=dict)
    ready: dict[int, list[SSAValue]] = field(default_factory=dict)
    # (rank, memref): a send of that rank's buffer may still be in flight at the end.
    in_flight: set[tuple[int, SSAValue]] = field(default_factory=set[tuple[int, SSAValue]])
    # In a time loop: memrefs copied in before the task on the loop's first step only,
    # and out after it on its last step only (plan_loop_copies).
    first_in: dict[int, list[SSAValue]] = field(default_factory=dict)
    last_out: dict[int, list[SSAValue]] = field(default_factory=dict)
    # In a time loop with no test for its last step: memrefs copied out once after the
    # loop, from the device of the rank of the task they are keyed by.
    after_loop: dict[int, list[SSAValue]] = field(default_factory=dict)
    # Single elements copied device to host after the task, for host code between steps
    # that loads only them (TaskFacts.elements); the rest stays on the device.
    copy_elements: dict[int, list[tuple[SSAValue, Element]]] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskFacts:
    rank: int
    gpu: bool
    effects: Effects
    # A GPU piece of a split loop (dhir-split-devices): per memref, the rows it copies in
    # and out, every time.
    rows: dict[SSAValue, PieceRows] | None = None
    # Host code between a time loop's steps (a CPU task, reading only): per memref it
    # reads, the elements it loads, where known; it needs nothing else of them.
    elements: dict[SSAValue, tuple[Element, ...]] | None = None

    @property
    def whole_gpu(self) -> bool:
        return self.gpu and self.rows is None


def plan_copies(
    facts: Sequence[TaskFacts],
    order: Sequence[SSAValue],
    needed_after: set[SSAValue],
    device_messages: bool = True,
    in_flight: set[tuple[int, SSAValue]] | None = None,
) -> CopyPlan:
    """The copies for tasks in program order; `order` sorts memrefs (schedule position),
    `needed_after` holds the memrefs whose host copy code after the schedule reads. With
    `device_messages`, a value that only devices hold goes from one rank's device buffer
    straight to the next GPU task's on another rank, not through both hosts. `in_flight`:
    the sends that may still be in flight when the schedule starts (its buffers outlive
    one run of it)."""
    state = _Devices.empty(order, in_flight)
    return _plan_step(facts, order, needed_after, device_messages, state, None)


# Steps of a time loop run to find the state every step starts in (one or two suffice:
# what a step leaves depends on the state it starts in only for memrefs it never writes).
LOOP_ROUNDS = 4


def plan_loop_copies(
    facts: Sequence[TaskFacts],
    order: Sequence[SSAValue],
    needed_after: set[SSAValue],
    device_messages: bool = True,
    last_step: bool = True,
) -> CopyPlan:
    """The copies for a schedule that is the body of a time loop (scf.for, scf.while)
    with nothing else in the loop touching its memrefs, whose device buffers last every
    step: what a step leaves on a device that the next step first uses there stays on
    the device between steps. Such a memref is copied in on the loop's first step only
    (`first_in`) and out on its last step only (`last_out`), where code after the loop
    may read it; without `last_step` (no test tells the last step: an scf.while that does
    not count), out once after the loop instead (`after_loop`). Everything else is
    copied every step, as `plan_copies` does; so is everything when no state repeats
    from step to step."""
    state = _Devices.empty(order)
    for _ in range(LOOP_ROUNDS):
        start = state.copy()
        plan = _plan_step(facts, order, needed_after, device_messages, state, last_step)
        if state == start:
            return plan
    first = plan_copies(facts, order, needed_after, device_messages)
    return plan_copies(facts, order, needed_after, device_messages, first.in_flight)


@dataclass
class _Devices:
    """Per memref, the ranks whose device copy is current; the memrefs no host copy of
    which is current; (rank, memref): a send of that rank's buffer may be in flight."""

    on_device: dict[SSAValue, set[int]]
    device_only: set[SSAValue]
    sending: set[tuple[int, SSAValue]]

    @staticmethod
    def empty(
        order: Sequence[SSAValue], in_flight: set[tuple[int, SSAValue]] | None = None
    ) -> "_Devices":
        return _Devices({m: set[int]() for m in order}, set(), set(in_flight or ()))

    def copy(self) -> "_Devices":
        on_device = {m: set(ranks) for m, ranks in self.on_device.items()}
        return _Devices(on_device, set(self.device_only), set(self.sending))


def _plan_step(
    facts: Sequence[TaskFacts],
    order: Sequence[SSAValue],
    needed_after: set[SSAValue],
    device_messages: bool,
    state: _Devices,
    last_step: bool | None,
) -> CopyPlan:
    """One run of the schedule from `state`, which it updates. Unless `last_step` is
    None, the schedule is a time loop's step, started in `state` (as the step before
    left it), and what no later task of the step uses goes to the next step's first
    user; `last_step`: a test tells the loop's last step (see plan_loop_copies)."""
    plan = CopyPlan()
    cyclic = last_step is not None
    on_device, device_only, sending = state.on_device, state.device_only, state.sending
    # Device copies a step starts with that no task of this step has used yet: on the
    # loop's first step, the first use fills them.
    carried = {(r, m) for m, ranks in on_device.items() for r in ranks} if cyclic else set()
    # A message's tag is its memref's place; MPI keeps each pair's messages in order, but
    # two memrefs' messages may cross, so tags must differ: beyond them, through hosts.
    tagged = {m: k < MESSAGE_TAGS for k, m in enumerate(order)}
    for k, task in enumerate(facts):
        touched = [m for m in order if m in task.effects.touches()]
        if not task.gpu:
            for m in task.effects.writes:
                on_device[m] = set()
            continue
        plan.ready[k] = [m for m in touched if (task.rank, m) in sending]
        sending -= {(task.rank, m) for m in touched}
        if task.rows is not None:
            # Other ranks write the other rows at the same time: the device never holds
            # the whole memref, and the host gets the piece's rows back at once.
            plan.copy_in[k] = [m for m in touched if _rows(task, m, out=False) != ()]
            plan.copy_out[k] = [m for m in touched if _rows(task, m, out=True) != ()]
            for m in touched:
                on_device[m] = set()
            continue
        stale = [m for m in touched if task.rank not in on_device[m]]
        received = {m for m, _ in plan.receive.get(k, [])}
        assert all(m in received for m in stale if m in device_only), "a value got lost"
        plan.copy_in[k] = [m for m in stale if m not in device_only]
        if cyclic:
            fresh = [m for m in touched if (task.rank, m) in carried and m not in stale]
            plan.first_in[k] = fresh
        carried -= {(task.rank, m) for m in touched}
        for m in stale:
            on_device[m].add(task.rank)
        for m in task.effects.writes:
            on_device[m] = {task.rank}
            device_only.add(m)
        plan.copy_out[k] = []
        for m in [m for m in touched if m in device_only]:
            later = _next_user(facts, k, m)
            # Host code that loads a few elements before the next user gets those alone;
            # dropped below where the whole memref goes out anyway.
            loaded = _elements_read(facts, k, later, m)
            if loaded:
                plan.copy_elements.setdefault(k, []).extend((m, e) for e in loaded)
            if later is None and cyclic:
                first = _next_user(facts, -1, m)
                assert first is not None  # task k uses it
                there = facts[first].rank
                if facts[first].whole_gpu and there in on_device[m]:
                    # The next step's first use finds it on its device (this one, or
                    # one this step sent it to): out after the last step only, from
                    # that rank, which copies it in on the first step: were the copy
                    # out elsewhere, dhir-lower-to-mpi would take that rank's host
                    # copy for the newest and send it there every step.
                    if m in needed_after:
                        out = plan.last_out if last_step else plan.after_loop
                        out.setdefault(_last_on(facts, k, m, there), []).append(m)
                    continue
            elif later is None:
                if m not in needed_after:
                    continue
            elif facts[later].whole_gpu and facts[later].rank == task.rank:
                continue
            elif device_messages and facts[later].whole_gpu and tagged[m]:
                there = facts[later].rank
                if there not in on_device[m]:
                    plan.send.setdefault(k, []).append((m, there))
                    plan.receive.setdefault(later, []).append((m, task.rank))
                    sending.add((task.rank, m))
                continue
            plan.copy_out[k].append(m)
            device_only.discard(m)
            if loaded:
                plan.copy_elements[k] = [(v, e) for v, e in plan.copy_elements[k] if v is not m]
    plan.in_flight = set(sending)
    return plan


def _elements_read(
    facts: Sequence[TaskFacts], k: int, later: int | None, m: SSAValue
) -> list[Element]:
    """The elements of `m` that host code loading only elements (TaskFacts.elements)
    reads between task k and `later` (the end: None)."""
    found: list[Element] = []
    for j in range(k + 1, len(facts) if later is None else later):
        elements = facts[j].elements
        if elements is not None and m in elements:
            found += [e for e in elements[m] if e not in found]
    return found


def _rows(task: TaskFacts, m: SSAValue, out: bool) -> Span | tuple[()]:
    """The rows of `m` a GPU piece copies (in, or with `out` out); () for none."""
    assert task.rows is not None
    found = task.rows.get(m)
    if found is None:  # not analysed: all of what it touches, both ways
        return None if out is False or m in task.effects.writes else ()
    span = found.copy_out if out else found.copy_in
    return () if span is not None and span[0] >= span[1] else span


def _last_on(facts: Sequence[TaskFacts], k: int, m: SSAValue, rank: int) -> int:
    """The last whole GPU task on `rank` up to task k that touches `m`: where a value
    that `rank`'s device holds at the step's end got there (no task after it writes `m`,
    or `rank` would have had to receive it again)."""
    return next(
        j
        for j in range(k, -1, -1)
        if facts[j].whole_gpu and facts[j].rank == rank and m in facts[j].effects.touches()
    )


def _next_user(facts: Sequence[TaskFacts], k: int, m: SSAValue) -> int | None:
    """The first task after task k that touches `m`, if any, but host code that loads
    only some elements of it (TaskFacts.elements), which gets them alone."""
    for later in range(k + 1, len(facts)):
        elements = facts[later].elements
        if elements is not None and m in elements:
            continue
        if m in facts[later].effects.touches():
            return later
    return None


# --- rewriting a schedule --------------------------------------------------------------


class _Labels:
    """Task names as constant strings in the module, for dhir_rt_gpu_task."""

    def __init__(self, module: ModuleOp) -> None:
        self._arrays = ConstantArrays(module, "dhir_gpu_task_name", i8)

    @property
    def used(self) -> bool:
        return self._arrays.used

    def pointer(self, text: str) -> tuple[list[Operation], SSAValue]:
        """Ops giving the address (i64) of a NUL-terminated copy of `text`."""
        data = text.encode() + b"\0"
        ops: list[Operation] = []
        # i8 is signed
        return ops, self._arrays.address(ops, tuple(b - 256 if b > 127 else b for b in data))


@dataclass
class _ScheduleData:
    schedule: ScheduleOp
    tasks: list[TaskOp]
    ranks: int
    labels: _Labels
    gpus: dict[int, int]  # rank -> its GPU on its node, by the machine description
    local: "_LocalUses"
    entry: func.FuncOp | None = None
    buffers: dict[tuple[int, SSAValue], SSAValue] = field(default_factory=dict)
    lasting: bool = False  # some device buffer's host memref lasts the whole run
    numbers: list[str] = field(default_factory=list)  # see task_numbers
    messages: bool = False  # some task sends or receives a device buffer
    row_messages: bool = False  # some task sends or receives rows of one (gpu_rows)
    order: list[SSAValue] = field(default_factory=list)  # the schedule's memrefs
    # What the device buffers are made before and freed after: the schedule, or its time
    # loop, so that they last all its steps and the loop holds nothing but the schedule
    # (dhir-lower-to-mpi then keeps the data distributed between steps).
    anchor: Operation = field(init=False)
    steps: "_Steps | None" = None  # the tests for the time loop's first and last steps
    # The memrefs host code in the time loop loads from between steps (its condition).
    host_reads: frozenset[SSAValue] = frozenset()

    def __post_init__(self) -> None:
        loop = time_loop(self.schedule)
        if loop is None and (reading := loop_reading_between_steps(self.schedule)):
            loop, self.host_reads = reading
        self.anchor = loop or self.schedule

    def run(self, device_messages: bool) -> None:
        self.numbers = task_numbers(self.schedule)
        order = self.order = [v for v in self.schedule.args if isinstance(v.type, MemRefType)]
        facts = [self._facts(task) for task in self.tasks]
        needed = self.local.needed_after(self.schedule, order)
        rows = self._row_plan(facts, needed) if device_messages else None
        if rows is not None:
            self._run_rows(facts, rows)
            return
        if isinstance(self.anchor, scf.ForOp | scf.WhileOp):
            steps = self.steps = _Steps(self.anchor, self.schedule)
            # Host code reading between steps: a CPU task at the step's end, so that what
            # it reads goes out every step and the rest stays on the devices.
            effects = Effects(self.host_reads, frozenset())
            host = [TaskFacts(0, False, effects, elements=self._host_elements())]
            cycle = [*facts, *host] if self.host_reads else facts
            plan = plan_loop_copies(cycle, order, needed, device_messages, steps.last_known)
            if any(plan.first_in.values()) or plan.after_loop:
                self.anchor = steps.prepare_first()
        else:
            plan = plan_copies(facts, order, needed, device_messages)
            if self.anchor is not self.schedule and plan.in_flight:
                # A step's sends may still be in flight when the next step reuses a buffer.
                plan = plan_copies(facts, order, needed, device_messages, plan.in_flight)
        self.messages = bool(plan.send)
        users = self._buffer_users(facts, order)
        self._allocate(users)
        for k, task in enumerate(self.tasks):
            if facts[k].gpu:
                self._rewrite(task, k, facts[k], plan)
        if plan.after_loop:
            self._copy_out_after_loop(plan.after_loop, facts)

    # --- a time loop planned row by row (gpu_rows) ---------------------------------------

    def _row_plan(self, facts: Sequence[TaskFacts], needed: set[SSAValue]) -> RowPlan | None:
        """The row-wise plan for an scf.for time loop whose schedule holds only whole GPU
        tasks, on more than one rank, of memrefs of static shape; None elsewhere, or
        where the steps do not repeat or the messages outnumber the tags."""
        if not isinstance(self.anchor, scf.ForOp) or self.host_reads:
            return None
        if not all(f.whole_gpu for f in facts) or len({f.rank for f in facts}) < 2:
            return None
        if not all(_static_rows(m) for m in self.order):
            return None
        row_facts = [_row_facts(task, fact.rank) for task, fact in zip(self.tasks, facts)]
        plan = plan_row_loop(row_facts, self.order, needed)
        if plan is None or len(self.order) + len(plan.messages) > MESSAGE_TAGS:
            return None
        return plan

    def _run_rows(self, facts: Sequence[TaskFacts], plan: RowPlan) -> None:
        self.row_messages = bool(plan.messages)
        self._allocate(self._buffer_users(facts, self.order))
        assert isinstance(self.anchor, scf.ForOp)
        self.steps = _Steps(self.anchor, self.schedule)
        for k, task in enumerate(self.tasks):
            self._rewrite_rows(task, k, facts[k], plan)
        loop = self.anchor
        firsts = {f.rank: k for k, f in reversed(list(enumerate(facts)))}
        before = self._rows_schedule(plan.copy_in, firsts, None)
        if before is not None:
            Rewriter.insert_op(before, InsertPoint.before(loop))
        # A loop that ran no step filled no device buffer: its schedule copies out nothing.
        ran = arith.CmpiOp(loop.lb, loop.ub, "slt")
        ran.result.name_hint = "ran"
        after = self._rows_schedule(plan.copy_out, firsts, ran.result)
        if after is not None:
            Rewriter.insert_op([ran, after], InsertPoint.after(loop))

    def _rewrite_rows(self, task: TaskOp, k: int, facts: TaskFacts, plan: RowPlan) -> None:
        mine, start = self._on_device(task, k, facts)
        block = task.body.block
        for number in plan.ready.get(k, []):
            tag = arith.ConstantOp(IntegerAttr(len(self.order) + number, i32))
            start += [tag, func.CallOp(READY_ROWS_HOOK, [tag.result], [])]
        end: list[Operation] = []
        for number, message in enumerate(plan.messages):
            if message.receiver == k:
                other = self.tasks[message.sender]
                call = self._row_message(RECV_ROWS_HOOK, mine, message, number, other)
                start += self._unless_step(call, message.crossing, first=True)
            if message.sender == k:
                other = self.tasks[message.receiver]
                call = self._row_message(SEND_ROWS_HOOK, mine, message, number, other)
                end += self._unless_step(call, message.crossing, first=False)
        first, last = _inside_hooks(block)
        block.insert_ops_before(start, first)
        block.insert_ops_before(end, last)

    def _row_message(
        self,
        hook: str,
        mine: dict[SSAValue, SSAValue],
        message: RowMessage,
        number: int,
        other: TaskOp,
    ) -> list[Operation]:
        """A call sending the message's rows of this rank's buffer to `other`'s rank,
        or receiving them from there; its tag follows the memrefs' (see plan_copies)."""
        ops: list[Operation] = []
        address = aligned_address(ops, mine[message.memref])
        row = _row_bytes(message.memref)
        low, high = message.rows
        offset = arith.ConstantOp(IntegerAttr(low * row, i64))
        size = arith.ConstantOp(IntegerAttr((high - low) * row, i64))
        rank = arith.ConstantOp(IntegerAttr(rank_of(other) or 0, i32))
        tag = arith.ConstantOp(IntegerAttr(len(self.order) + number, i32))
        values = [address, offset.result, size.result, rank.result, tag.result]
        return [*ops, offset, size, rank, tag, func.CallOp(hook, values, [])]

    def _unless_step(self, ops: list[Operation], crossing: bool, first: bool) -> list[Operation]:
        """`ops`, under `scf.if` on the loop's step not being its first (`first`) or its
        last where they cross from one step to the next."""
        if not crossing:
            return ops
        assert self.steps is not None
        test, condition = self.steps.first() if first else self.steps.last()
        return [*test, scf.IfOp(condition, [], [scf.YieldOp()], [*ops, scf.YieldOp()])]

    def _rows_schedule(
        self,
        copies: dict[int, list[tuple[SSAValue, Interval]]],
        firsts: dict[int, int],
        ran: SSAValue | None,
    ) -> ScheduleOp | None:
        """A schedule whose task on each rank copies `copies`'s rows for it into its
        device buffers (before the loop: `ran` None) or out of them, where `ran`; named
        after the rank's first task."""
        if not copies:
            return None
        block = Block()
        targets: dict[Operation, TargetOp] = {}
        memrefs: list[SSAValue] = []
        for rank in sorted(copies):
            k = firsts[rank]
            task = self.tasks[k]
            hook, name = self.labels.pointer(task_label(task, self.numbers[k]))
            ops: list[Operation] = [*hook, func.CallOp(TASK_HOOK, [name], [])]
            moved: list[Operation] = []
            for m, rows in copies[rank]:
                device = self.buffers[(rank, m)]
                moved += _copy(device, m, rows) if ran is None else _copy(m, device, rows)
            ops += moved if ran is None else [scf.IfOp(ran, [], [*moved, scf.YieldOp()])]
            used = [m for m in self.order if any(m is c for c, _ in copies[rank])]
            copy = TaskOp(self._target_in(block, task, targets), used, Region(Block(ops)))
            copy.attributes[RANK_ATTR] = IntegerAttr(rank, i64)
            copy.location = task.location
            block.add_op(copy)
            memrefs += [m for m in used if m not in memrefs]
        schedule = ScheduleOp([m for m in self.order if m in memrefs], Region(block))
        schedule.location = self.schedule.location
        return schedule

    def _host_elements(self) -> dict[SSAValue, tuple[Element, ...]]:
        """Per memref that host code between steps loads from: the elements it loads,
        where each subscript is a known number within a static shape (else the memref
        is left out, and goes out whole)."""
        found: dict[SSAValue, tuple[Element, ...]] = {}
        for m in self.host_reads:
            elements = loaded_elements(self.anchor, self.schedule, m)
            type_ = m.type
            assert isinstance(type_, MemRefType)
            shape = type_.get_shape()
            if elements is not None and all(_inside(e, shape) for e in elements):
                found[m] = elements
        return found

    def _facts(self, task: TaskOp) -> TaskFacts:
        rank = rank_of(task)
        if rank is None:
            if self.ranks > 1:
                raise PassFailedAt(task, "task has no rank; run dhir-place before dhir-gpu-data")
            rank = 0
        gpu = is_gpu_task(task)
        rows = rows_of(task) if gpu else None
        return TaskFacts(rank, gpu, task_effects(task), rows)

    def _buffer_users(
        self, facts: Sequence[TaskFacts], order: Sequence[SSAValue]
    ) -> dict[int, tuple[TaskOp, list[SSAValue]]]:
        """Per rank: its first GPU task, and the memrefs its GPU tasks use (in order)."""
        users: dict[int, tuple[TaskOp, list[SSAValue]]] = {}
        for task, fact in zip(self.tasks, facts):
            if not fact.gpu:
                continue
            used = _memrefs_used(task)
            _, memrefs = users.setdefault(fact.rank, (task, []))
            memrefs += [m for m in order if m in used and m not in memrefs]
        return users

    def _allocate(self, users: dict[int, tuple[TaskOp, list[SSAValue]]]) -> None:
        guards = _Guards(self.anchor) if self.ranks > 1 else None
        for rank in sorted(users):
            first, memrefs = users[rank]
            hook, name = self.labels.pointer(
                task_label(first, self.numbers[self.tasks.index(first)])
            )
            call = func.CallOp(TASK_HOOK, [name], [])
            allocs = [op for m in memrefs for op in _alloc(first, m)]
            made: list[SSAValue] = [op.results[0] for op in allocs if isinstance(op, dgpu.AllocOp)]
            pairs = [op for m, b in zip(memrefs, made) for op in self._pair(b, m)]
            body = [*_choose_gpu(self.gpus.get(rank)), *hook, call, *allocs, *pairs]
            if guards is None:
                self._before_schedule(body)
                for op in allocs:
                    op.attributes[DEVICE_BUFFER_ATTR] = UnitAttr()
                results = made
                frees: list[Operation] = [_dealloc(v) for v in made]
                self._after_schedule(frees)
            else:
                results = self._guarded_alloc(guards.on(rank), body, made, memrefs)
                frees = [_dealloc(v) for v in results]
                guard = scf.IfOp(guards.on(rank), [], [*frees, scf.YieldOp()])
                guard.attributes[DEVICE_BUFFER_ATTR] = UnitAttr()
                self._after_schedule([guard])
            for m, buffer in zip(memrefs, results):
                buffer.name_hint = f"{m.name_hint or 'm'}_dev{rank}"
                self.buffers[(rank, m)] = buffer

    def _pair(self, buffer: SSAValue, host: SSAValue) -> list[Operation]:
        """Tell the runtime which host memref `buffer` is copied from and to."""
        lasting = _lasts(host, self.entry)
        self.lasting |= lasting
        ops: list[Operation] = []
        addresses = [aligned_address(ops, value) for value in (buffer, host)]
        flag = arith.ConstantOp(IntegerAttr(int(lasting), i64))
        call = func.CallOp(PAIR_HOOK, [*addresses, flag.result], [])
        return [*ops, flag, call]

    def _guarded_alloc(
        self,
        condition: SSAValue,
        body: list[Operation],
        made: list[SSAValue],
        memrefs: list[SSAValue],
    ) -> list[SSAValue]:
        """`scf.if rank == R` yielding the device buffers (the host memrefs elsewhere)."""
        types = [m.type for m in memrefs]
        guard = scf.IfOp(condition, types, [*body, scf.YieldOp(*made)], [scf.YieldOp(*memrefs)])
        guard.attributes[DEVICE_BUFFER_ATTR] = UnitAttr()
        self._before_schedule([guard])
        return list(guard.results)

    def _on_device(
        self, task: TaskOp, k: int, facts: TaskFacts
    ) -> tuple[dict[SSAValue, SSAValue], list[Operation]]:
        """`task` made to use its rank's device buffers: each memref's buffer, and the
        ops that start the task (its tracking hook)."""
        drop_facts(task)  # its copies touch other elements than its kernels did
        mine = {m: b for (r, m), b in self.buffers.items() if r == facts.rank}
        for op in task.body.block.walk():
            for index, operand in enumerate(op.operands):
                if operand in mine:
                    op.operands[index] = mine[operand]
        hook, name = self.labels.pointer(task_label(task, self.numbers[k]))
        return mine, [*hook, func.CallOp(TASK_HOOK, [name], [])]

    def _rewrite(self, task: TaskOp, k: int, facts: TaskFacts, plan: CopyPlan) -> None:
        mine, start = self._on_device(task, k, facts)
        block = task.body.block
        start += [op for m in plan.ready.get(k, []) for op in _ready(mine[m])]
        for m, source in plan.receive.get(k, []):
            start += self._message(RECV_HOOK, mine[m], m, source)
        rows = facts.rows or {}
        for m in plan.copy_in.get(k, []):
            start += _copy(mine[m], m, rows[m].copy_in if m in rows else None)
        once = [op for m in plan.first_in.get(k, []) for op in _copy(mine[m], m, None)]
        start += self._on_step(once, first=True)
        first, last = _inside_hooks(block)
        block.insert_ops_before(start, first)
        end: list[Operation] = []
        for m in plan.copy_out.get(k, []):
            end += _copy(m, mine[m], rows[m].copy_out if m in rows else None)
        for m, element in plan.copy_elements.get(k, []):
            end += _copy_element(m, mine[m], element)
        once = [op for m in plan.last_out.get(k, []) for op in _copy(m, mine[m], None)]
        end += self._on_step(once, first=False)
        for m, destination in plan.send.get(k, []):
            end += self._message(SEND_HOOK, mine[m], m, destination)
        block.insert_ops_before(end, last)

    def _copy_out_after_loop(
        self, copies: dict[int, list[SSAValue]], facts: Sequence[TaskFacts]
    ) -> None:
        """A schedule right after the time loop, before its device buffers are freed,
        whose tasks copy out what the devices hold when the loop ends (`copies`, keyed by
        the task whose rank holds them), where the loop ran a step at all: a loop that
        ran none filled no device buffer. A task of a schedule, so that
        dhir-lower-to-mpi sees the rank that writes the host copies."""
        assert self.steps is not None
        loop = self.anchor
        guard, ran = self.steps.ran()
        block = Block()
        targets: dict[Operation, TargetOp] = {}
        memrefs: list[SSAValue] = []
        for k in sorted(copies):
            task, rank = self.tasks[k], facts[k].rank
            hook, name = self.labels.pointer(task_label(task, self.numbers[k]))
            ops: list[Operation] = [*hook, func.CallOp(TASK_HOOK, [name], [])]
            moved = [op for m in copies[k] for op in _copy(m, self.buffers[(rank, m)], None)]
            ops += moved if ran is None else [scf.IfOp(ran, [], [*moved, scf.YieldOp()])]
            copy = TaskOp(self._target_in(block, task, targets), copies[k], Region(Block(ops)))
            copy.attributes[RANK_ATTR] = IntegerAttr(rank, i64)
            copy.location = task.location
            block.add_op(copy)
            memrefs += [m for m in copies[k] if m not in memrefs]
        schedule = ScheduleOp([m for m in self.order if m in memrefs], Region(block))
        schedule.location = self.schedule.location
        Rewriter.insert_op([*guard, schedule], InsertPoint.after(loop))

    @staticmethod
    def _target_in(
        block: Block, task: TaskOp, targets: dict[Operation, TargetOp]
    ) -> SSAValue | str:
        """`task`'s target for a task of the schedule whose body is `block`: its name, or
        a copy of its `dhir.target` op there (`targets`: those copied so far)."""
        if task.target is None:
            assert task.target_name is not None  # verified
            return task.target_name.data
        owner = task.target.owner
        assert isinstance(owner, Operation)
        if owner not in targets:
            made = owner.clone()
            assert isinstance(made, TargetOp)
            targets[owner] = made
            block.add_op(made)
        return targets[owner].result

    def _on_step(self, ops: list[Operation], first: bool) -> list[Operation]:
        """`ops` under `scf.if` on the time loop's first step (`first`) or its last; the
        test is the loop's own (signed, the next value against the upper bound)."""
        if not ops:
            return []
        assert self.steps is not None
        test, condition = self.steps.first() if first else self.steps.last()
        return [*test, scf.IfOp(condition, [], [*ops, scf.YieldOp()])]

    def _message(
        self, hook: str, buffer: SSAValue, memref: SSAValue, other: int
    ) -> list[Operation]:
        """A call sending `buffer` to rank `other`'s buffer of `memref`, or receiving it
        from there; the memref's place in the schedule is the tag (see plan_copies)."""
        ops: list[Operation] = []
        address = aligned_address(ops, buffer)
        rank = arith.ConstantOp(IntegerAttr(other, i32))
        tag = arith.ConstantOp(IntegerAttr(self.order.index(memref), i32))
        return [*ops, rank, tag, func.CallOp(hook, [address, rank.result, tag.result], [])]

    def _before_schedule(self, ops: Iterable[Operation]) -> None:
        parent = self.anchor.parent
        assert parent is not None
        for op in ops:
            parent.insert_op_before(op, self.anchor)

    def _after_schedule(self, ops: Sequence[Operation]) -> None:
        parent = self.anchor.parent
        assert parent is not None
        anchor = self.anchor
        for op in ops:
            parent.insert_op_after(op, anchor)
            anchor = op


class _Steps:
    """The tests for a time loop's first step and its last, in its body: an scf.for's
    own, and those of an scf.while that counts as one (`counted_bounds`, with the
    schedule in its after region); any other scf.while is made to carry a flag that is
    true on its first step (`prepare_first`), and has no test for its last."""

    def __init__(self, loop: scf.ForOp | scf.WhileOp, schedule: ScheduleOp) -> None:
        self.loop = loop
        self._schedule = schedule
        self._counted: tuple[SSAValue, int] | None = None
        self._flag: SSAValue | None = None
        if isinstance(loop, scf.WhileOp) and schedule.parent_region() is loop.after_region:
            self._counted = counted_bounds(loop)

    @property
    def last_known(self) -> bool:
        return isinstance(self.loop, scf.ForOp) or self._counted is not None

    def prepare_first(self) -> Operation:
        """Make the loop able to test for its first step; the loop, remade if need be."""
        loop = self.loop
        if isinstance(loop, scf.WhileOp) and self._counted is None:
            in_before = self._schedule.parent_region() is loop.before_region
            self.loop, flags = while_with_flag(loop, first=True)
            self._flag = flags[0] if in_before else flags[1]
            self._flag.name_hint = "first_step"
        return self.loop

    def first(self) -> tuple[list[Operation], SSAValue]:
        """Ops computing whether this is the loop's first step, and that value."""
        loop = self.loop
        if isinstance(loop, scf.ForOp):
            test = arith.CmpiOp(loop.body.block.args[0], loop.lb, "eq")
        elif self._counted is not None:
            # The counter only grows (it never wraps: counted_bounds): first on its start.
            test = arith.CmpiOp(loop.after_region.block.args[0], loop.arguments[0], "eq")
        else:
            assert self._flag is not None, "prepare_first makes the flag"
            return [], self._flag
        test.result.name_hint = "first_step"
        return [test], test.result

    def ran(self) -> tuple[list[Operation], SSAValue | None]:
        """Ops after the loop computing whether its schedule ran at all, and that
        value; None where it always runs (a do-while's, in its before region). The
        first-step flag the loop returns stays true only where no step ran."""
        loop = self.loop
        assert isinstance(loop, scf.WhileOp) and self._flag is not None
        if self._schedule.parent_region() is loop.before_region:
            return [], None
        true = arith.ConstantOp(IntegerAttr(1, i1))
        ran = arith.XOrIOp(loop.results[-1], true.result)
        ran.result.name_hint = "ran"
        return [true, ran], ran.result

    def last(self) -> tuple[list[Operation], SSAValue]:
        """Ops computing whether this is the loop's last step (the loop's own signed
        test on the counter's next value), and that value."""
        loop = self.loop
        made: list[Operation] = []
        if isinstance(loop, scf.ForOp):
            value, bound, by = loop.body.block.args[0], loop.ub, loop.step
        else:
            assert self._counted is not None, "no last step to test for"
            value, (bound, number) = loop.after_region.block.args[0], self._counted
            counter = value.type
            assert isinstance(counter, IndexType | IntegerType)
            constant = arith.ConstantOp(IntegerAttr(number, counter))
            made.append(constant)
            by = constant.result
        following = arith.AddiOp(value, by)
        test = arith.CmpiOp(following.result, bound, "sge")
        test.result.name_hint = "last_step"
        made += [following, test]
        return made, test.result


class _Guards:
    """`rank == R` conditions, computed once before `anchor` (the schedule or its loop)."""

    def __init__(self, anchor: Operation) -> None:
        self._anchor = anchor
        comm = mpi.CommWorldOp()
        rank = mpi.CommRankOp(comm.comm)
        self._rank = rank.rank
        self._insert([comm, rank])
        self._on: dict[int, SSAValue] = {}

    def _insert(self, ops: Sequence[Operation]) -> None:
        parent = self._anchor.parent
        assert parent is not None
        for op in ops:
            parent.insert_op_before(op, self._anchor)

    def on(self, rank: int) -> SSAValue:
        if rank not in self._on:
            const = arith.ConstantOp(IntegerAttr(rank, i32))
            test = arith.CmpiOp(self._rank, const.result, "eq")
            test.result.name_hint = f"gpu_on{rank}"
            self._insert([const, test])
            self._on[rank] = test.result
        return self._on[rank]


def described_gpus(module: ModuleOp, ranks: int) -> dict[int, int]:
    """For each rank the machine description puts on a GPU: that GPU's number among its
    node's GPUs, in the description's order (which the CUDA driver's numbering must
    follow); empty without a description."""
    if not has_machine(module):
        return {}
    system = system_of(module)
    devices = system.rank_devices()
    if len(devices) != ranks:
        return {}  # placement reports the mismatch
    numbers: dict[int, int] = {}
    for rank, device in enumerate(devices):
        if device.kind == DeviceKind.GPU:
            node = system.node_of(device)
            gpus = [d.name for d in node.devices if d.kind == DeviceKind.GPU]
            numbers[rank] = gpus.index(device.name)
    return numbers


def _inside_hooks(block: Block) -> tuple[Operation, Operation]:
    """Where a GPU task's copies go: after the calls that open its body (dhir-track-tasks,
    dhir-instrument) and before those that close it, so that the task's time in a trace or
    a profile includes them; the ops to insert before."""
    ops = list(block.ops)
    start = 0
    while start < len(ops) and _opens(ops[start]):
        start += 1
    end = len(ops) - 1  # the terminator
    while end > start and _calls(ops[end - 1], _CLOSING):
        end -= 1
    return ops[start], ops[end]


_OPENING = (TASK_ENTER, TASK_BEGIN)
_CLOSING = (TASK_LEAVE, TASK_END)


def _opens(op: Operation) -> bool:
    """A hook's call, or the task number it takes."""
    if isinstance(op, arith.ConstantOp):
        users = [use.operation for use in op.result.uses]
        return bool(users) and all(_calls(u, _OPENING + _CLOSING) for u in users)
    return _calls(op, _OPENING)


def _calls(op: Operation, callees: tuple[str, ...]) -> bool:
    return isinstance(op, func.CallOp) and op.callee.string_value() in callees


def _entry_function(module: ModuleOp, name: str | None) -> func.FuncOp | None:
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name and op.body.blocks:
            return op
    return None


def _lasts(value: SSAValue, entry: func.FuncOp | None) -> bool:
    """Whether `value` is memory that outlives every schedule: the entry's arguments (the
    harness frees them after the entry returns) and globals (never freed)."""
    if isinstance(value.owner, xmemref.GetGlobalOp):
        return True
    return entry is not None and value.owner is entry.body.block


def _unpin_before_returns(entry: func.FuncOp) -> None:
    for block in entry.body.blocks:
        last = block.last_op
        if isinstance(last, func.ReturnOp):
            block.insert_op_before(func.CallOp(UNPIN_HOOK, [], []), last)


def _choose_gpu(number: int | None) -> list[Operation]:
    """Tell the runtime which GPU this rank uses (before its first use), if known."""
    if number is None:
        return []
    index = arith.ConstantOp(IntegerAttr(number, i32))
    return [index, dgpu.SetDefaultDeviceOp(index.result)]


def _memrefs_used(task: TaskOp) -> set[SSAValue]:
    listed = set(task.memrefs)
    return {v for op in task.body.walk() for v in op.operands if v in listed}


def _alloc(task: TaskOp, value: SSAValue) -> list[Operation]:
    type_ = value.type
    assert isinstance(type_, MemRefType)
    if not isinstance(type_.layout, NoneAttr):
        raise PassFailedAt(
            task,
            f"a GPU task cannot use {type_}, a memref with a layout; device buffers are "
            "contiguous (pass the whole buffer, not a view)",
        )
    ops: list[Operation] = []
    sizes: list[SSAValue] = []
    for dim, extent in enumerate(type_.get_shape()):
        if extent < 0:
            index = arith.ConstantOp(IntegerAttr(dim, IndexType()))
            size = xmemref.DimOp.from_source_and_index(value, index.result)
            ops += [index, size]
            sizes.append(size.result)
    alloc = dgpu.AllocOp.build(
        operands=[[], sizes, []], result_types=[type_, []], properties={}, attributes={}
    )
    return [*ops, alloc]


def _ready(buffer: SSAValue) -> list[Operation]:
    """A call waiting for the sends of `buffer` still in flight."""
    ops: list[Operation] = []
    address = aligned_address(ops, buffer)
    return [*ops, func.CallOp(READY_HOOK, [address], [])]


def _dealloc(buffer: SSAValue) -> Operation:
    return dgpu.DeallocOp.build(operands=[[], buffer], result_types=[[]])


def _memcpy(destination: SSAValue, source: SSAValue) -> Operation:
    return dgpu.MemcpyOp.build(operands=[[], destination, source], result_types=[[]])


def _static_rows(m: SSAValue) -> bool:
    """Whether `m` is a memref of static shape with at least one dimension, whose rows
    have a size in bytes dhir knows."""
    type_ = m.type
    if not isinstance(type_, MemRefType) or not type_.get_shape():
        return False
    return all(n >= 0 for n in type_.get_shape()) and _row_bytes(m) > 0


def _row_bytes(m: SSAValue) -> int:
    """Bytes in one row (along the first dimension) of `m`, a memref of static shape; 0
    where the element's size is unknown."""
    type_ = m.type
    assert isinstance(type_, MemRefType)
    size = element_bytes(type_.get_element_type()) or 0
    for n in type_.get_shape()[1:]:
        size *= n
    return size


def _row_facts(task: TaskOp, rank: int) -> RowFacts:
    """The rows of each memref `task` needs and may write: as dhir-gpu-kernels found them
    while its body was loops, else from its access regions now."""
    found = rows_of(task, GPU_ROWS_ATTR)
    if found is None:
        found = task_rows(task)
    needs: dict[SSAValue, Rows] = {}
    writes: dict[SSAValue, Rows] = {}
    used = _memrefs_used(task)  # those it has device buffers of: what its body still uses
    for m, rows in found.items():
        if m not in used:
            continue
        type_ = m.type
        assert isinstance(type_, MemRefType)
        every = Rows.of([(0, type_.get_shape()[0])])
        needs[m] = every if rows.copy_in is None else Rows.of([rows.copy_in])
        writes[m] = every if rows.copy_out is None else Rows.of([rows.copy_out])
    return RowFacts(rank, needs, writes)


def _inside(element: Element, shape: Sequence[int]) -> bool:
    return len(element) == len(shape) and all(0 <= i < n for i, n in zip(element, shape))


def _copy_element(destination: SSAValue, source: SSAValue, element: Element) -> list[Operation]:
    """A copy of one element of `source` into the same element of `destination`."""
    views = [element_view(v, element) for v in (destination, source)]
    return [*views, _memcpy(views[0].result, views[1].result)]


def _copy(destination: SSAValue, source: SSAValue, rows: Span) -> list[Operation]:
    """A copy of `rows` of `source` (all of it: None) into the same rows of `destination`."""
    if rows is None:
        return [_memcpy(destination, source)]
    views = [rows_view(v, 0, *rows) for v in (destination, source)]
    return [*views, _memcpy(views[0].result, views[1].result)]


class _LocalUses:
    """Which memrefs' host copies may be read after a schedule (see `needed_after`).

    A local buffer's last use is found once, in the IR as it is when first asked: asking
    per schedule went through every use of a buffer that N schedules list, N times, each
    use placed by walking the block (docs/performance.md). The pass handles schedules in
    order and adds uses of a buffer only before or inside a schedule that lists it, so
    what follows a later schedule is as it was when first asked."""

    def __init__(self) -> None:
        self._last: dict[SSAValue, Operation | None] = {}
        self._places: dict[Block, dict[Operation, int]] = {}

    def needed_after(self, schedule: ScheduleOp, memrefs: Sequence[SSAValue]) -> set[SSAValue]:
        """Memrefs whose host copy may be read after the schedule: all but local
        allocations (in the schedule's block) that nothing after the schedule uses except
        to free them."""
        return {m for m in memrefs if not self._dead_after(schedule, m)}

    def _dead_after(self, schedule: ScheduleOp, value: SSAValue) -> bool:
        owner = value.owner
        block = schedule.parent
        if not isinstance(owner, xmemref.AllocOp | xmemref.AllocaOp) or owner.parent is not block:
            return False
        assert block is not None
        if value not in self._last:
            self._last[value] = self._last_use(value, block)
        last = self._last[value]
        if last is None:
            return True
        # Uses before the schedule read an earlier allocation, even in a loop.
        places = self._places_of(block, [last, schedule])
        return places[last] <= places[schedule]

    def _last_use(self, value: SSAValue, block: Block) -> Operation | None:
        """The last op of `block` that uses `value` (or a view of it) but to free it."""
        tops = [
            top
            for use in _uses_through_views(value)
            if not isinstance(use.operation, xmemref.DeallocOp)
            and (top := _ancestor_in(use.operation, block)) is not None
        ]
        places = self._places_of(block, tops)
        return max(tops, key=places.__getitem__, default=None)

    def _places_of(self, block: Block, ops: Sequence[Operation]) -> dict[Operation, int]:
        """Where each op of `block` is, `ops` among them: found again when the pass has
        added one of `ops` since (adding ops moves none of the others)."""
        places = self._places.get(block)
        if places is None or any(op not in places for op in ops):
            places = self._places[block] = {op: k for k, op in enumerate(block.ops)}
        return places


def _uses_through_views(value: SSAValue) -> Iterable[Use]:
    """The uses of `value` and of the views made of it (a view made before the schedule
    may be read after it)."""
    values = [value]
    while values:
        for use in values.pop().uses:
            yield use
            if is_view(use.operation):
                values += use.operation.results


def _ancestor_in(op: Operation, block: Block) -> Operation | None:
    current: Operation | None = op
    while current is not None and current.parent is not block:
        current = current.parent_op()
    return current


__all__ = [
    "CopyPlan",
    "GpuDataPass",
    "TaskFacts",
    "is_gpu_task",
    "plan_copies",
    "plan_loop_copies",
    "task_label",
]
