"""Lower placed schedules to SPMD code over upstream's `mpi` dialect.

Every rank runs the same host code. A schedule becomes, in program order, its tasks'
bodies under `scf.if rank == R`, with the messages that bring each task's rank the
elements it needs and lacks (analysis/validity.py: which rank holds which elements,
from the tasks' access regions), posted and completed where analysis/transfers.py
says: a send as soon as its data is final, its wait as late as the data allows.

At the end of a schedule, what some rank holds only partly is made consistent again
(broadcasts, or one collective on three ranks or more), except where nothing reads it
afterwards: in the entry function's top level, a memref argument with no later use only
needs to reach rank 0, which writes the results. A schedule alone in a time loop's body
keeps its data distributed between iterations and is assembled after the loop (but for
the memrefs host code there loads, an scf.while's condition testing a residual: each
iteration's end makes those whole on every rank; analysis/outputs.py, `step_loop`); on the
loop's first iteration (an scf.for's, or an scf.while's: told by its counter or by a
flag it is made to carry), the messages whose receivers hold what they carry on entering
the loop (the input's rows) are skipped (analysis/transfers.py, `skipped_first`).

With `partition` (the native backend's choice), a memref argument of the entry that each
rank can hold in part (dhir.analysis.partition: the rows its tasks touch) starts each
schedule valid only in those rows, and where it would reach rank 0 at the end, each rank
writes its up-to-date elements to its result file instead (`dhir_rt_write_part`; rank 0
copies what no rank holds from the input, `dhir_rt_copy_part`); the rows go on the entry
as `dhir.bands` for the harness, which reserves and reads them (docs/semantics.md,
"Partitioned storage").

Every message is a call to dhir's runtime (`dhir_rt_isend`/`dhir_rt_recv`/
`dhir_rt_bcast`, their `_strided` forms, `dhir_rt_allgatherv`/`dhir_rt_gatherv`) with
addresses and sizes in bytes: MPI has no datatype for i1, f16 or bf16, and its int
counts cannot hold 2^31 elements, so the runtime sends bytes, in pieces when a buffer is
larger than a piece (docs/semantics.md). Why no rank waits forever: see
analysis/transfers.py and docs/semantics.md, "Deadlock freedom".
"""

import itertools
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import islpy as isl
from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir import Block as IRBlock
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.counted_whiles import counted_bounds
from dhir.analysis.footprint import Whole
from dhir.analysis.handoff import take_all
from dhir.analysis.outputs import (
    Memo,
    dead_after,
    entry_called,
    final_to_root,
    loaded_regions,
    remembered,
    root_only,
    step_loop,
)
from dhir.analysis.partition import Rows, loaded, row_bands
from dhir.analysis.sharing import check_shared_data
from dhir.analysis.transfers import Event, TaskStep, plan_events, skipped_first
from dhir.analysis.validity import Block, Transfer, Validity, everything, merge_blocks
from dhir.dialects import arith, func, memref, mpi, scf
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp, walk_outside_tasks
from dhir.dialects.dlti import DataLayoutEntryAttr, MapAttr
from dhir.dialects.layouts import is_contiguous_layout
from dhir.ir.build import move_run
from dhir.ir.layout import element_bytes
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import rank_of
from dhir.ir.walk import find_ops
from dhir.transforms.affine_scope import lower_unscoped
from dhir.transforms.building import first_address, while_with_flag
from dhir.transforms.outline import outline
from dhir.transforms.pass_options import check_entry, check_ranks
from dhir.transforms.track_tasks import SWITCH, switch_tasks

BCAST = "dhir_rt_bcast"
SEND = "dhir_rt_send"
RECV = "dhir_rt_recv"
ISEND = "dhir_rt_isend"
ALLGATHER = "dhir_rt_allgatherv"
GATHER = "dhir_rt_gatherv"
WAIT = "dhir_rt_wait"
WRITE = "dhir_rt_write_part"
COPY = "dhir_rt_copy_part"
# Attributes of the entry function: the row bands of its partitioned memref arguments
# and why the others stay whole (see LowerToMPIPass._partition).
BANDS = "dhir.bands"
WHOLE = "dhir.whole"
# Marks a function a schedule's steps were outlined into ("part", or "group" for one that
# calls parts): dhir/toolchain/split.py moves these, and only these, between modules, and
# takes the mark off before the module is printed.
STEP = "dhir.step"
# Suffix of the runtime's calls for strided blocks (dhir_rt_send_strided, ...).
STRIDED = "_strided"
# Rounds to find the validity a time loop's iterations start with (two suffice for a
# schedule whose tasks write the same places every iteration).
LOOP_ROUNDS = 8
STEPS_PER_FUNCTION = 32
# Step calls per group function (see _group_steps).
CALLS_PER_GROUP = 16


@dataclass(frozen=True)
class LowerToMPIPass(ModulePass):
    """Turn placed schedules into rank-guarded code with MPI messages (needs dhir-place)."""

    name = "dhir-lower-to-mpi"

    ranks: int = 1
    mpi: str = "mpich"
    entry: str | None = None  # default: @main, where there is one
    partition: bool = False

    @property
    def entry_name(self) -> str:
        """`entry`, or main where none is named."""
        return self.entry or "main"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for _ in self.lower(op):
            pass

    def _check_placed_ranks(self, op: ModuleOp) -> None:
        """A task placed on a rank the program does not have (a dhir.rank written by hand,
        or placed for more ranks) ended in an internal error while lowering."""
        for task in find_ops(op, TaskOp):
            rank = rank_of(task)
            if rank is not None and not 0 <= rank < self.ranks:
                raise PassFailedAt(
                    task,
                    f"task is placed on rank {rank} (dhir.rank), but dhir-lower-to-mpi lowers "
                    f"for {self.ranks} rank{'s' if self.ranks != 1 else ''} (ranks 0.."
                    f"{self.ranks - 1}); place it on one of those",
                )

    def lower(self, op: ModuleOp) -> Iterator[func.FuncOp]:
        """What `apply` does, yielding each step function a schedule's tasks were
        outlined into (a part, marked STEP) as soon as it is finished: nothing changes it
        afterwards, so a caller may build it while the rest is lowered (a part may move
        out of the module meanwhile, leaving a declaration of itself in its place; see
        dhir.toolchain.split.StepPieces)."""
        check_ranks(self.name, self.ranks)
        check_entry(self.name, op, self.entry)
        if self.mpi not in mpi.IMPLEMENTATIONS:
            raise PassFailedException(
                f"dhir-lower-to-mpi: mpi must be mpich or openmpi, got {self.mpi}"
            )
        op.attributes["dlti.map"] = MapAttr(
            ArrayAttr([_dlti_entry(mpi.IMPLEMENTATION_KEY, mpi.IMPLEMENTATIONS[self.mpi])])
        )
        check_shared_data(op)
        self._check_placed_ranks(op)
        runtime: set[str] = set()
        called = entry_called(op, self.entry_name)
        for function in [f for f in op.body.block.ops if isinstance(f, func.FuncOp)]:
            schedules = [s for s in walk_outside_tasks(function) if isinstance(s, ScheduleOp)]
            if not schedules:
                continue
            guards = _RankGuards(function, self.ranks)
            last: Operation = function
            all_plans = [_plans(schedule) for schedule in schedules]
            # The block's facts, found once: lowering a schedule changes ops before the
            # next one (and inside its own time loop) only, which leaves what is used
            # after the next one, and through which aliases, as it was.
            memo = Memo()
            with remembered(memo):
                parts = self._partition(function, list(zip(schedules, all_plans)), called)
            held = parts.held if parts is not None else {}
            for number, schedule in enumerate(schedules):
                plans = all_plans[number]
                with remembered(memo):
                    outputs, start, loop, shared = self._prepare(schedule, plans, called, parts)
                lowering = _ScheduleLowering(schedule, guards, self.ranks, function, number, last)
                lowering.held = held
                lowering.memo = memo
                lowering.shared = shared
                runtime |= yield from lowering.run(plans, outputs, start, loop)
                last = lowering.last_function
            if parts is not None:
                parts.record(function)
        _erase_targets(op)
        for name in sorted(runtime):
            declaration = runtime_declaration(name)
            assert declaration is not None, f"{name} is missing from RUNTIME_FUNCTIONS"
            op.body.block.add_op(declaration)

    def _prepare(
        self, schedule: ScheduleOp, plans: list[TaskStep], called: bool, parts: "_Parts | None"
    ) -> "_Step":
        held = parts.held if parts is not None else None
        found = step_loop(schedule)
        # Found once: each loop_entry_state below would find them again.
        loaded = loaded_regions(schedule) if found is not None and self.ranks > 1 else {}
        kept = (
            loop_entry_state(schedule, self.ranks, plans, held, loaded) if self.ranks > 1 else None
        )
        mine = [v for v in schedule.operands if held and v in held]
        if parts is not None and kept is None and mine and found is not None:
            parts.keep_whole(mine, "its time loop finds no fixed layout")
            kept = loop_entry_state(schedule, self.ranks, plans, parts.held, loaded)
        loop, start = kept if kept is not None else (None, None)
        outputs = root_only(loop or schedule, self.entry_name, called)
        shared = loaded if kept is not None else {}
        return outputs, start, loop, shared

    def _partition(
        self,
        function: func.FuncOp,
        schedules: Sequence[tuple[ScheduleOp, list[TaskStep]]],
        called: bool,
    ) -> "_Parts | None":
        """With `partition`, the entry's memref arguments each rank holds only in part
        (dhir.analysis.partition); None without."""
        if not self.partition or function.sym_name.data != self.entry_name or self.ranks == 1:
            return None
        # As _prepare finds the outputs, when a time loop keeps its data distributed.
        regions = {
            task: plan.regions
            for schedule, plans in schedules
            for task, plan in zip(schedule.tasks(), plans, strict=True)
        }
        outputs = final_to_root(function, self.entry_name, called)
        found = row_bands(function, self.ranks, outputs, regions=regions)
        args = function.body.blocks[0].args
        held: _Held = {
            args[k]: [loaded(r, _shape(args[k])) for r in rows] for k, rows in found.bands.items()
        }
        return _Parts(held, dict(found.bands), dict(found.whole))


# Per memref argument held in part, the elements each rank holds when a schedule starts.
_Held = dict[SSAValue, list[isl.Set]]
# The memrefs only rank 0 needs after a schedule, and for a schedule that keeps its data
# distributed through a time loop, its entry validity, the loop, and the elements the
# loop's host code loads (`loaded_regions`), on every rank at each step's end.
_Step = tuple[set[SSAValue], Validity | None, Operation | None, dict[SSAValue, isl.Set]]


@dataclass
class _Parts:
    """The entry's memref arguments held in part: what each rank holds of each when a
    schedule starts, and by argument position, each rank's rows or why it stays whole."""

    held: _Held
    bands: dict[int, tuple[Rows, ...]]
    whole: dict[int, Whole]

    def keep_whole(self, values: Iterable[SSAValue], reason: str) -> None:
        for value in values:
            assert isinstance(value, BlockArgument)
            del self.held[value], self.bands[value.index]
            self.whole[value.index] = Whole(reason)

    def record(self, function: func.FuncOp) -> None:
        """As `dhir.bands` (argument position to each rank's row ranges, as lo, hi
        pairs) and `dhir.whole` (position to why not) on the entry, for the harness and
        `--timing`."""
        function.attributes[BANDS] = DictionaryAttr(
            {
                str(k): ArrayAttr(
                    [DenseArrayBase.from_list(i64, [n for band in r for n in band]) for r in rows]
                )
                for k, rows in self.bands.items()
            }
        )
        function.attributes[WHOLE] = DictionaryAttr(
            {str(k): StringAttr(w.reason) for k, w in self.whole.items()}
        )


def _runtime_inputs(name: str) -> list[Attribute]:
    """Address, run length (and four layout words for a strided block), then the peer
    (root of a broadcast) and the tag, and a send's request slot; a wait takes the slot."""
    if name in (WAIT, SWITCH):
        return [i64]
    if name in (WRITE, COPY):
        # The argument's position, (a write's address,) then a block's five words in bytes.
        return [i32, *([i64] if name == WRITE else []), i64, i64, i64, i64, i64, i64]
    if name in (ALLGATHER, GATHER):
        # Buffer address and size, this rank's run (offset, length), the root of a gather.
        return [i64, i64, i64, i64, *([i32] if name == GATHER else [])]
    layout = [i64, i64, i64, i64] if name.endswith(STRIDED) else []
    peers = [i32] if name.startswith(BCAST) else [i32, i32]
    slot = [i64] if name.startswith(ISEND) else []
    return [i64, i64, *layout, *peers, *slot]


# The runtime functions the lowered code may call (declared at the end of lowering).
RUNTIME_FUNCTIONS = frozenset(
    {BCAST, SEND, RECV, ISEND, ALLGATHER, GATHER, WAIT, WRITE, COPY, SWITCH}
    | {name + STRIDED for name in (BCAST, SEND, RECV, ISEND)}
)


def part_count(tasks: int) -> int:
    """About how many parts a schedule of `tasks` tasks is lowered into."""
    return -(-tasks // STEPS_PER_FUNCTION)


def runtime_declaration(name: str) -> func.FuncOp | None:
    """The declaration of the runtime function `name` that dhir-lower-to-mpi adds to the
    module when its code calls it; None when `name` is no such function."""
    return _declare(name, _runtime_inputs(name)) if name in RUNTIME_FUNCTIONS else None


def _dlti_entry(key: str, value: str) -> DataLayoutEntryAttr:
    return DataLayoutEntryAttr(StringAttr(key), StringAttr(value))


def _declare(name: str, inputs: Sequence[object]) -> func.FuncOp:
    return func.FuncOp.external(name, list(inputs), [])  # type: ignore[arg-type]


def _erase_targets(module: ModuleOp) -> None:
    for op in find_ops(module, TargetOp):
        if op.result.uses:
            raise PassFailedAt(op, "dhir.target is still used after lowering")
        op.detach()
        op.erase()


class _RankGuards:
    """`%comm`, `%rank` and `rank == R` conditions, made once at the start of the
    function's entry block, which dominates its every block and so every schedule."""

    def __init__(self, function: func.FuncOp, ranks: int) -> None:
        self._block = function.body.blocks[0]
        self.ranks = ranks
        comm = mpi.CommWorldOp()
        comm.comm.name_hint = "comm"
        rank = mpi.CommRankOp(comm.comm)
        self._block.insert_op_before(comm, self._block.first_op)  # type: ignore[arg-type]
        self._block.insert_op_after(rank, comm)
        self._last: Operation = rank
        self.comm: SSAValue = comm.comm
        self._rank: SSAValue = rank.rank
        self._i32: dict[int, SSAValue] = {}
        self._is: dict[int, SSAValue] = {}
        self._tested: set[SSAValue] = set()

    def _insert(self, ops: Iterable[Operation]) -> None:
        """At the function entry, after what came before: made on demand, they still
        dominate every schedule of the function."""
        for op in ops:
            self._block.insert_op_after(op, self._last)
            self._last = op

    def const(self, value: int) -> SSAValue:
        if value not in self._i32:
            op = arith.ConstantOp(IntegerAttr(value, i32))
            self._insert([op])
            self._i32[value] = op.result
        return self._i32[value]

    def on(self, rank: int) -> SSAValue:
        """The i1 `rank == R`."""
        if rank not in self._is:
            op = arith.CmpiOp(self._rank, self.const(rank), "eq")
            op.result.name_hint = f"on{rank}"
            self._insert([op])
            self._is[rank] = op.result
            self._tested.add(op.result)
        return self._is[rank]

    def is_rank_test(self, value: SSAValue) -> bool:
        """Whether `value` is one of the `rank == R` conditions."""
        return value in self._tested


def _plans(schedule: ScheduleOp) -> list[TaskStep]:
    tasks = list(schedule.tasks())
    ranks: list[int] = []
    for task in tasks:
        rank = rank_of(task)
        if rank is None:
            raise PassFailedAt(task, "task has no rank; run dhir-place before dhir-lower-to-mpi")
        ranks.append(rank)
    # dhir-place's facts, when the driver hands them on (not round-robin's, which finds
    # none); the others found once per body shape.
    facts = take_all(tasks)
    return [
        TaskStep(rank, effects, regions)
        for rank, (effects, regions) in zip(ranks, facts, strict=True)
    ]


def loop_entry_state(
    schedule: ScheduleOp,
    ranks: int,
    plans: Sequence[TaskStep] | None = None,
    held: Mapping[SSAValue, Sequence[isl.Set]] | None = None,
    loaded: Mapping[SSAValue, isl.Set] | None = None,
) -> tuple[Operation, Validity] | None:
    """For a schedule that is the only user of its memrefs in the body of a loop: the
    loop, and the validity that holds at the start of every iteration, the fixed point
    of running the body from "everything everywhere" (the state on entry) met with what
    the body leaves, the elements the loop's host code loads brought to every rank
    (`loaded_regions`). None when the schedule is not in such a loop, or no fixed point is
    found. `plans`: the schedule's, when known; `held`: what each rank holds of the
    memrefs it holds only in part; `loaded`: the schedule's `loaded_regions`, when known."""
    found = step_loop(schedule)
    if found is None:
        return None
    loop = found[0]
    shared = loaded if loaded is not None else loaded_regions(schedule)
    plans = plans if plans is not None else _plans(schedule)
    state = Validity(list(schedule.args), ranks, held)
    for _ in range(LOOP_ROUNDS):
        after = state.copy()
        for plan in plans:
            for value in plan.effects.touches():
                plan.run(value, after)
        for value, region in shared.items():
            after.spread(value, region)
        met = state.meet(after)
        if met.same(state):
            return loop, state
        state = met
    return None


@dataclass
class _ScheduleLowering:
    schedule: ScheduleOp
    guards: _RankGuards
    ranks: int
    function: func.FuncOp
    number: int
    last_function: Operation  # step functions follow their host function, in program order
    state: Validity = field(init=False)
    _parts: int = 0
    _tasks_emitted: int = 0
    _emitted: list[Operation] = field(default_factory=list)
    _steps: list[tuple[func.CallOp, func.FuncOp]] = field(default_factory=list)
    _runtime: set[str] = field(default_factory=set)
    # What each rank holds of the memrefs held in part (see LowerToMPIPass._partition).
    held: "_Held" = field(default_factory=dict)
    dead: set[SSAValue] = field(default_factory=set[SSAValue])  # no rank needs after it
    memo: Memo = field(default_factory=Memo)  # the function's block's (outputs.remembered)
    # The elements a time loop's host code loads, on every rank at each step's end.
    shared: dict[SSAValue, isl.Set] = field(default_factory=dict[SSAValue, isl.Set])

    def run(
        self,
        plans: Sequence[TaskStep],
        final_to_root: set[SSAValue],
        start: Validity | None,
        loop: Operation | None,
    ) -> Generator[func.FuncOp, None, set[str]]:
        """Emit the schedule's code before it, then erase it; yield each part function
        once it is finished, and return the runtime functions the code calls. `start`:
        the validity every run of the schedule begins with, given for a schedule in a
        time loop, whose memrefs then stay where they are at its end and are assembled
        after `loop`; else everything is valid everywhere at the start and made so again
        at the end."""
        position = {v: i for i, v in reversed(list(enumerate(self.schedule.args)))}
        self.state = (
            start.copy()
            if start is not None
            else Validity(list(self.schedule.args), self.ranks, self.held)
        )
        tasks = list(self.schedule.tasks())
        finished = 0
        events = plan_events(plans, self.state, position)
        later, skipped, loop = self._later_only(plans, events, start, loop)
        for event in events:
            if event.kind == "task":
                self._lower_task(tasks[event.task], event.rank)
            else:
                self._place_event(event, position, later if event.slot in skipped else None)
            for _, part in self._steps[finished:]:
                yield part
            finished = len(self._steps)
        self._outline_steps()
        for _, part in self._steps[finished:]:
            yield part
        self._group_steps()
        with remembered(self.memo):  # the code emitted so far is all before it
            self.dead = dead_after(loop or self.schedule, self.schedule.args)
        if start is None:
            self._assemble(self.state, final_to_root, position, self)
        else:
            assert loop is not None
            self._share(position)
            self._assemble(start.copy(), final_to_root, position, _After(loop))
        self.schedule.detach()
        self.schedule.erase()
        return self._runtime

    def _assemble(
        self,
        state: Validity,
        final_to_root: set[SSAValue],
        position: dict[SSAValue, int],
        sink: "_Sink",
    ) -> None:
        """Leave every memref valid everywhere (on rank 0 only for `final_to_root`, on no
        rank for a buffer dead after it); a partitioned one goes to its result file
        instead."""
        for value in sorted(state.held, key=position.__getitem__):
            if value in self.dead:
                continue
            if value in self.held and value in final_to_root:
                self._place_writes(value, state, sink)
                continue
            if state.everywhere(value):
                continue
            dest = 0 if value in final_to_root else None
            self._check_sendable(self.schedule, value)
            runs = state.collective(value, dest) if self.ranks > 2 else None
            if runs is not None:
                self._place_collective(value, runs, dest, sink)
                continue
            for transfer in state.assemble(value, dest):
                self._place_transfer(transfer, position[value], sink)

    def _share(self, position: dict[SSAValue, int]) -> None:
        """At the end of a step of a time loop, bring the elements its host code loads
        (`shared`) to every rank, which all run those loads: a condition testing a
        residual takes the same branch on each."""
        for value in sorted(self.shared, key=position.__getitem__):
            region = self.shared[value]
            if all(self.state.holds(value, r, region) for r in range(self.ranks)):
                continue
            self._check_sendable(self.schedule, value)
            whole = everything(value.type).is_subset(region)
            runs = self.state.collective(value, None) if self.ranks > 2 and whole else None
            if runs is not None:
                self._place_collective(value, runs, None, self)
                self.state.assemble(value, None)
                continue
            for transfer in self.state.spread(value, region):
                self._place_transfer(transfer, position[value], self)

    def _place_writes(self, value: SSAValue, state: Validity, sink: "_Sink") -> None:
        """Each rank writes the up-to-date elements of its band to `value`'s result file,
        and rank 0 copies from the input file what no rank holds."""
        assert isinstance(value, BlockArgument)
        plan, copies = state.writes(value)
        width = element_bytes(_element_type(value))
        assert width is not None
        index = self.guards.const(value.index)
        for rank, blocks in plan:
            self._runtime.add(WRITE)
            ops: list[Operation] = []
            address = first_address(ops, value)
            for block in blocks:
                words = _block_words(block, width)
                ops += [*words, func.CallOp(WRITE, [index, address, *_results(words)], [])]
            sink.emit(self._guarded(rank, ops, sink))
        if copies:
            self._runtime.add(COPY)
            ops = []
            for block in copies:
                words = _block_words(block, width)
                ops += [*words, func.CallOp(COPY, [index, *_results(words)], [])]
            sink.emit(self._guarded(0, ops, sink))

    def _place_collective(
        self, value: SSAValue, runs: list[Block | None], dest: int | None, sink: "_Sink"
    ) -> None:
        """One MPI_Allgatherv (or MPI_Gatherv to `dest`) of every rank's run: each rank
        calls it once, with its own run (or none)."""
        name = ALLGATHER if dest is None else GATHER
        self._runtime.add(name)
        for rank, run in enumerate(runs):
            ops: list[Operation] = []
            address = first_address(ops, value)
            width = element_bytes(_element_type(value))
            assert width is not None
            offset = run.offset * width if run is not None else 0
            length = run.length * width if run is not None else 0
            size, size_ops = _byte_count(value)
            words = [arith.ConstantOp(IntegerAttr(n, i64)) for n in (offset, length)]
            tail = [self.guards.const(dest)] if dest is not None else []
            arguments = [address, size, *(w.result for w in words), *tail]
            call = func.CallOp(name, arguments, [])
            ops += [*size_ops, *words, call]
            sink.emit(self._guarded(rank, ops, sink) if self.ranks > 1 else ops)

    def _lower_task(self, task: TaskOp, rank: int) -> None:
        body = _body_ops(task)
        if self.ranks == 1:
            if self._emitted and switch_tasks(self._emitted[-1], body):
                self._emitted.pop()
                self._runtime.add(SWITCH)
            self._emit_moved(body)
        else:
            branch = self._branch(rank)
            yielded = branch.last_op
            assert yielded is not None  # the scf.yield
            # Only ops for other ranks may stand between the two tasks (`_open_guard`).
            if switch_tasks(yielded.prev_op, body):
                self._runtime.add(SWITCH)
            if body:
                move_run(body[0], body[-1], branch, branch.last_op)
            # Under its guard, the body is no affine scope any more: what was valid only
            # at its top (a symbol loaded there) is lowered as --lower-affine would.
            scope = self.schedule.parent_region()
            assert scope is not None
            lower_unscoped(body, scope)
        self._tasks_emitted += 1
        if self._tasks_emitted == STEPS_PER_FUNCTION:
            self._outline_steps()
        task.detach()
        task.erase()

    def _emit_moved(self, ops: list[Operation]) -> None:
        """`emit` of ops that are consecutive in a block: moved at once (`move_run`)."""
        block = self.schedule.parent
        assert block is not None
        if ops:
            move_run(ops[0], ops[-1], block, self.schedule)
        self._emitted += ops

    def _branch(self, rank: int) -> IRBlock:
        """The branch of `scf.if rank == R` that a task on `rank` joins, as `_guarded`
        finds it: the guard emitted last, when it is for `rank`, else a new one."""
        joined = self._open_guard(rank, self)
        if joined is not None:
            return joined.true_region.block
        guard = scf.IfOp(self.guards.on(rank), [], [scf.YieldOp()])
        self.emit([guard])
        return guard.true_region.block

    def _later_only(
        self,
        plans: Sequence[TaskStep],
        events: Sequence[Event],
        start: Validity | None,
        loop: Operation | None,
    ) -> tuple[SSAValue | None, frozenset[int], Operation | None]:
        """For a schedule in a time loop: whether this is a step after the loop's first,
        and the slots of the transfers only later steps need, whose sends, receives and
        waits it guards (analysis.transfers.skipped_first: the first step's receivers
        hold the data on entering the loop, as time tiles' ranks hold their first band's
        halo rows from the input); and the loop, remade where an scf.while must carry a
        flag for it (`_later`). None and no slots otherwise."""
        if start is None or not isinstance(loop, scf.ForOp | scf.WhileOp) or self.ranks == 1:
            return None, frozenset(), loop
        first = Validity(list(self.schedule.args), self.ranks, self.held)
        skipped = skipped_first(plans, events, first, start, self.shared)
        if not skipped:
            return None, skipped, loop
        later, loop = self._later(loop)
        later.name_hint = "later"
        return later, skipped, loop

    def _later(self, loop: scf.ForOp | scf.WhileOp) -> tuple[SSAValue, Operation]:
        """Whether the schedule runs a step after its loop's first, at the top of the
        region holding it: an scf.for's `iv != lb`; an scf.while's counter other than
        its start, where it counts (`counted_bounds`: it only grows) and the schedule is
        in its after region; else a flag it is remade to carry (`while_with_flag`), false
        on the first run of either region and true after."""
        if isinstance(loop, scf.ForOp):
            test = arith.CmpiOp(loop.body.block.args[0], loop.lb, "ne")
            loop.body.block.insert_op_before(test, loop.body.block.first_op)  # type: ignore[arg-type]
            return test.result, loop
        after = loop.after_region.block
        if self.schedule.parent_block() is after and counted_bounds(loop) is not None:
            test = arith.CmpiOp(after.args[0], loop.arguments[0], "ne")
            after.insert_op_before(test, after.first_op)  # type: ignore[arg-type]
            return test.result, loop
        in_before = self.schedule.parent_block() is loop.before_region.block
        block = loop.parent_block()
        new, flags = while_with_flag(loop, first=False)
        self.memo.forget(block)  # its facts name the loop replaced
        return (flags[0] if in_before else flags[1]), new

    def _place_event(
        self, event: Event, position: dict[SSAValue, int], later: SSAValue | None = None
    ) -> None:
        """A send posted, a receive, or a send completed, on the event's rank; with
        `later`, only where it holds (iterations after a time loop's first)."""
        if event.kind == "wait":
            self._runtime.add(WAIT)
            slot = arith.ConstantOp(IntegerAttr(event.slot, i64))
            call = func.CallOp(WAIT, [slot.result], [])
            self.emit(self._guarded(event.rank, _when(later, [slot, call]), self))
            return
        transfer = event.transfer
        assert transfer is not None and transfer.dest is not None
        value = transfer.memref
        self._check_sendable(self.schedule, value)
        tag = self.guards.const(position[value])
        blocks = _messages(transfer)
        ops: list[Operation] = []
        if event.kind == "send":
            # Every block of one transfer joins one request slot of the runtime.
            slot = arith.ConstantOp(IntegerAttr(event.slot, i64))
            ops.append(slot)
            peer = [self.guards.const(transfer.dest), tag, slot.result]
            for block in blocks:
                ops += self._message(ISEND, value, block, peer)
        else:
            source = [self.guards.const(transfer.source), tag]
            for block in blocks:
                ops += self._message(RECV, value, block, source)
        self.emit(self._guarded(event.rank, _when(later, ops), self))

    def _outline_steps(self) -> None:
        """Move the steps emitted since the last call (each task's incoming messages and
        guarded body) into a function of their own. One huge host function makes
        mlir-opt's scf-to-cf quadratic (it splits the block at every scf.if), while a
        function per task makes LLVM slow on thousands of functions; a few dozen tasks per
        function sits between the two (docs/performance.md)."""
        if not self._emitted:
            return
        name = f"{self.function.sym_name.data}.schedule{self.number}.part{self._parts}"
        self._parts += 1
        call, function = outline(self._emitted, name, self.last_function)
        # Kept out of line, or clang -O2 inlines them all back into one function.
        function.attributes["passthrough"] = ArrayAttr([StringAttr("noinline")])
        function.attributes[STEP] = StringAttr("part")
        self.last_function = function
        self._steps.append((call, function))
        self._emitted = []
        self._tasks_emitted = 0

    def _group_steps(self) -> None:
        """Move the calls of a long run of steps, CALLS_PER_GROUP at a time, into
        group functions (`.schedule<S>.group<K>`, each after its last step). Every call
        passes each memref as its descriptor (5+ words), all live across the whole run,
        which keeps clang's register allocator busy on a long host function
        (docs/performance.md)."""
        if len(self._steps) <= CALLS_PER_GROUP:
            return
        prefix = f"{self.function.sym_name.data}.schedule{self.number}.group"
        for number, start in enumerate(range(0, len(self._steps), CALLS_PER_GROUP)):
            run = self._steps[start : start + CALLS_PER_GROUP]
            calls = [call for call, _ in run]
            _, group = outline(calls, f"{prefix}{number}", run[-1][1])
            group.attributes["passthrough"] = ArrayAttr([StringAttr("noinline")])
            group.attributes[STEP] = StringAttr("group")
            self.last_function = group

    def _place_transfer(self, transfer: Transfer, tag: int, sink: "_Sink") -> None:
        """Emit one transfer: a broadcast every rank calls, or a send guarded by the
        source's rank, then a receive guarded by the destination's."""
        value, source, dest = transfer.memref, transfer.source, transfer.dest
        blocks = _messages(transfer)
        if dest is None:
            for block in blocks:
                sink.emit(self._message(BCAST, value, block, [self.guards.const(source)]))
            return
        sends: list[Operation] = []
        receives: list[Operation] = []
        for block in blocks:
            to = [self.guards.const(dest), self.guards.const(tag)]
            sends += self._message(SEND, value, block, to)
            back = [self.guards.const(source), self.guards.const(tag)]
            receives += self._message(RECV, value, block, back)
        sink.emit(self._guarded(source, sends, sink))
        sink.emit(self._guarded(dest, receives, sink))

    def _message(
        self, call: str, value: SSAValue, block: Block | None, tail: list[SSAValue]
    ) -> list[Operation]:
        """One call of one side of a transfer. Each side finds the address and size
        itself, inside its guard, so that a send joins the branch of the task that wrote
        the data."""
        pointer, size, ops = _buffer(value, block)
        if block is None or (block.count == 1 and block.count2 == 1):
            self._runtime.add(call)
            return [*ops, func.CallOp(call, [pointer, size, *tail], [])]
        width = element_bytes(_element_type(value))
        assert width is not None
        layout = [
            block.count,
            block.stride * width,
            block.count2,
            block.stride2 * width,
        ]
        constants = [arith.ConstantOp(IntegerAttr(n, i64)) for n in layout]
        name = call + STRIDED
        self._runtime.add(name)
        arguments = [pointer, size, *(c.result for c in constants), *tail]
        return [*ops, *constants, func.CallOp(name, arguments, [])]

    def _guarded(self, rank: int, ops: list[Operation], sink: "_Sink") -> list[Operation]:
        """`ops` under `scf.if rank == R`, to be emitted to `sink`; when `sink` has such a
        guard for the same rank open (`_open_guard`), `ops` join it (a receive and the
        task that needs it share one branch). Each rank still sees the same ops in the
        same order."""
        if self.ranks == 1:
            return ops  # one rank runs everything: no guard needed
        joined = self._open_guard(rank, sink)
        if joined is not None:
            _join(joined, ops)
            return []
        return [scf.IfOp(self.guards.on(rank), [], [*ops, scf.YieldOp()])]

    def _open_guard(self, rank: int, sink: "_Sink") -> scf.IfOp | None:
        """The guard `scf.if rank == R` that ops for `rank` emitted now may join: the op
        emitted last, when it is one; in this lowering's own steps, also one before it
        in the run of guards that ends them, each for another rank. Only one rank runs
        the ops under a guard, so the ops guarded for other ranks between the two run
        on none of the ranks that run these: each rank still runs the same ops in the
        same order, with a branch per run of tasks instead of one per task (tasks that
        alternate ranks: 10,000 guards, which took LLVM twice the time). A run holds a
        guard per rank at most (each joins the earlier one), so the search is short."""
        wanted = self.guards.on(rank)
        run = reversed(self._emitted) if sink is self else iter([sink.last()])
        for op in itertools.islice(run, self.ranks):
            if not isinstance(op, scf.IfOp) or not self.guards.is_rank_test(op.cond):
                return None
            if op.cond == wanted:
                return op
        return None

    def emit(self, ops: Iterable[Operation]) -> None:
        """Emit before the schedule (the _Sink protocol)."""
        block = self.schedule.parent
        assert block is not None
        for op in ops:
            block.insert_op_before(op, self.schedule)
            self._emitted.append(op)

    def last(self) -> Operation | None:
        return self._emitted[-1] if self._emitted else None

    def _check_sendable(self, task: Operation, value: SSAValue) -> None:
        type_ = value.type
        assert isinstance(type_, MemRefType)
        if not is_contiguous_layout(type_):
            raise PassFailedAt(
                task,
                f"schedule operand of type {type_} has a strided layout; the native backend "
                "sends contiguous memrefs only (pass the whole buffer, not a view)",
            )
        if self.ranks > 1 and element_bytes(type_.element_type) is None:
            raise PassFailedAt(
                task,
                f"schedule operand of type {type_}: the native backend cannot send elements "
                f"of type {type_.element_type} between ranks (it sends integers, index, f16, "
                "bf16, f32 and f64); use one of these types, or run on one rank",
            )


class _Sink(Protocol):
    """Where emitted ops go, and the op emitted there last."""

    def emit(self, ops: Iterable[Operation]) -> None: ...

    def last(self) -> Operation | None: ...


@dataclass
class _After:
    """Emits after `point` (a loop), in order."""

    point: Operation
    _last: Operation | None = None

    def emit(self, ops: Iterable[Operation]) -> None:
        block = self.point.parent_block()
        assert block is not None
        for op in ops:
            block.insert_op_after(op, self.point)
            self.point = op
            self._last = op

    def last(self) -> Operation | None:
        return self._last


def _messages(transfer: Transfer) -> Sequence[Block | None]:
    """The blocks of `transfer`, one message each (None: the whole buffer), merged: an
    interleaved placement leaves a transfer a block per row, and its every R-th row is
    one strided message instead of a message per row. The same elements travel."""
    if transfer.blocks is None:
        return [None]
    return merge_blocks(transfer.blocks)


def _when(condition: SSAValue | None, ops: list[Operation]) -> list[Operation]:
    """`ops` under `scf.if condition`, or as they are without one."""
    if condition is None:
        return ops
    return [scf.IfOp(condition, [], [*ops, scf.YieldOp()])]


def _join(guard: scf.IfOp, ops: list[Operation]) -> None:
    """`ops` at the end of `guard`'s branch, before its yield. xDSL checks, for each op
    it inserts, that the op holds no block it is inserted into, by walking up from the
    block to the module: ~9 steps from a guard in a step function, for each of the
    60,000 body ops and 30,000 message ops 10,000 tasks join their guards with. The
    guard leaves its block meanwhile, which leaves 3 steps (docs/performance.md)."""
    branch = guard.true_region.block
    end = branch.last_op
    assert end is not None  # the scf.yield
    outer = guard.parent_block()
    after = guard.next_op
    if outer is not None:
        outer.detach_op(guard)
    for op in ops:
        branch.insert_op_before(op, end)
    if outer is None:
        return
    if after is None:
        outer.add_op(guard)
    else:
        outer.insert_op_before(guard, after)


def _body_ops(task: TaskOp) -> list[Operation]:
    """The ops of the task's body but its dhir.yield, in order (followed op to op: the
    block's iterator costs more)."""
    ops: list[Operation] = []
    op = task.body.block.first_op
    while op is not None and op.next_op is not None:
        ops.append(op)
        op = op.next_op
    return ops


def _buffer(value: SSAValue, block: Block | None) -> tuple[SSAValue, SSAValue, list[Operation]]:
    """The address (i64) of `block` of a contiguous memref (from its first element) and
    the length in bytes (i64) of one of its runs, or of the whole buffer when `block` is
    None; and the ops computing them."""
    ops: list[Operation] = []
    address = first_address(ops, value)
    if block is None:
        size, size_ops = _byte_count(value)
        return address, size, [*ops, *size_ops]
    width = element_bytes(_element_type(value))
    assert width is not None, "checked by _check_sendable"
    if block.offset:
        offset = _append(ops, arith.ConstantOp(IntegerAttr(block.offset * width, i64)))
        address = _append(ops, arith.AddiOp(address, offset))
    size = _append(ops, arith.ConstantOp(IntegerAttr(block.length * width, i64)))
    return address, size, ops


def _block_words(block: Block, width: int) -> list[Operation]:
    """A block's offset, run length, count, stride, count2, stride2 in bytes (counts as
    they are), as i64 constants."""
    words = (
        block.offset * width,
        block.length * width,
        block.count,
        block.stride * width,
        block.count2,
        block.stride2 * width,
    )
    return [arith.ConstantOp(IntegerAttr(n, i64)) for n in words]


def _results(ops: Sequence[Operation]) -> list[SSAValue]:
    return [op.results[0] for op in ops]


def _shape(value: SSAValue) -> tuple[int, ...]:
    type_ = value.type
    assert isinstance(type_, MemRefType)
    return tuple(type_.get_shape())


def _element_type(value: SSAValue) -> Attribute:
    type_ = value.type
    assert isinstance(type_, MemRefType)
    return type_.element_type


def _byte_count(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    type_ = value.type
    assert isinstance(type_, MemRefType)
    width = element_bytes(type_.element_type)
    assert width is not None, "checked by _check_sendable"
    shape = type_.get_shape()
    if DYNAMIC_INDEX not in shape:
        const = arith.ConstantOp(IntegerAttr(_product(shape) * width, i64))
        return const.result, [const]
    ops: list[Operation] = []
    total: SSAValue = _append(ops, arith.ConstantOp(IntegerAttr(width, IndexType())))
    for dim in range(len(shape)):
        index = _append(ops, arith.ConstantOp(IntegerAttr(dim, IndexType())))
        size = _append(ops, memref.DimOp(value, index))
        total = _append(ops, arith.MuliOp(total, size))
    return _append(ops, arith.IndexCastOp(total, i64)), ops


def _append(ops: list[Operation], op: Operation) -> SSAValue:
    ops.append(op)
    return op.results[0]


def _product(shape: Sequence[int]) -> int:
    total = 1
    for extent in shape:
        total *= extent
    return total
