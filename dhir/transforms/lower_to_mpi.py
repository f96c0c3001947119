"""Lower placed schedules to SPMD code over upstream's `mpi` dialect.

Every rank runs the same host code. A schedule becomes, in program order, for each
task: the messages that bring the task's rank an up-to-date copy of each memref it
touches, then the task body under `scf.if rank == R`. A copy is up to date on the
ranks in its *valid set*: all ranks when the schedule starts (host code is SPMD),
only the writer's rank after a task writes it, plus every rank it is sent to. A
write needs an up-to-date copy too, because a task may write only part of a buffer.
Messages go from the rank that last wrote the data to the rank that needs it, and
only when the two differ; there is no barrier per task and no gather to rank 0.

At the end of a schedule, written memrefs are made consistent again with one
broadcast from their last writer, except where nothing reads them afterwards: in the
entry function's top level, a memref argument with no later use only needs to reach
rank 0, which writes the results.

Every message is a call to dhir's runtime (`dhir_rt_send`/`dhir_rt_recv`/
`dhir_rt_bcast`) with the buffer's address and size in bytes: MPI has no datatype
for i1, f16 or bf16, and its int counts cannot hold 2^31 elements, so the runtime
sends bytes, in pieces when a buffer is larger than a piece (docs/semantics.md).

Deadlock freedom: every rank walks the same global sequence of events (transfers
and tasks) in the same order, and each transfer is blocking send/recv pairs (one per
piece, in order) between two ranks. The earliest unfinished transfer always has both of its ranks
waiting on it, since everything before it has finished, so it completes; by
induction every transfer does, even if sends are synchronous.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
    i32,
    i64,
)
from xdsl.dialects.dlti import DataLayoutEntryAttr, MapAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.effects import Effects, task_effects
from dhir.analysis.outputs import entry_called, root_only
from dhir.analysis.sharing import check_shared_data
from dhir.dialects import memref as dhir_memref
from dhir.dialects import mpi
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import PassFailedAt
from dhir.ir.tasks import rank_of
from dhir.transforms.outline import outline

BCAST = "dhir_rt_bcast"
SEND = "dhir_rt_send"
RECV = "dhir_rt_recv"
STEPS_PER_FUNCTION = 32
# Step calls per group function (see _group_steps).
CALLS_PER_GROUP = 16
_MPI_NAMES = {"mpich": "MPICH", "openmpi": "OpenMPI"}


@dataclass(frozen=True)
class LowerToMPIPass(ModulePass):
    """Turn placed schedules into rank-guarded code with MPI messages (needs dhir-place)."""

    name = "dhir-lower-to-mpi"

    ranks: int = 1
    mpi: str = "mpich"
    entry: str = "main"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mpi not in _MPI_NAMES:
            raise PassFailedException(
                f"dhir-lower-to-mpi: mpi must be mpich or openmpi, got {self.mpi}"
            )
        op.attributes["dlti.map"] = MapAttr(
            ArrayAttr([_dlti_entry("MPI:Implementation", _MPI_NAMES[self.mpi])])
        )
        check_shared_data(op)
        runtime: set[str] = set()
        called = entry_called(op, self.entry)
        for function in [f for f in op.body.block.ops if isinstance(f, func.FuncOp)]:
            schedules = [s for s in walk_outside_tasks(function) if isinstance(s, ScheduleOp)]
            if not schedules:
                continue
            guards = _RankGuards(function, self.ranks)
            last: Operation = function
            for number, schedule in enumerate(schedules):
                lowering = _ScheduleLowering(schedule, guards, self.ranks, function, number, last)
                outputs = root_only(schedule, self.entry, called)
                runtime |= lowering.run(final_to_root=outputs)
                last = lowering.last_function
        _erase_targets(op)
        for name in sorted(runtime):
            inputs = [i64, i64, i32] if name == BCAST else [i64, i64, i32, i32]
            op.body.block.add_op(_declare(name, inputs))


def _dlti_entry(key: str, value: str) -> DataLayoutEntryAttr:
    return DataLayoutEntryAttr(StringAttr(key), StringAttr(value))


def _declare(name: str, inputs: Sequence[object]) -> func.FuncOp:
    return func.FuncOp.external(name, list(inputs), [])  # type: ignore[arg-type]


def _erase_targets(module: ModuleOp) -> None:
    for op in list(module.walk()):
        if isinstance(op, TargetOp):
            if op.result.uses:
                raise PassFailedAt(op, "dhir.target is still used after lowering")
            op.detach()
            op.erase()


class _RankGuards:
    """`%comm`, `%rank` and `rank == R` conditions, made once at the function entry."""

    def __init__(self, function: func.FuncOp, ranks: int) -> None:
        self._block = function.body.block
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
        return self._is[rank]


@dataclass
class _ScheduleLowering:
    schedule: ScheduleOp
    guards: _RankGuards
    ranks: int
    function: func.FuncOp
    number: int
    last_function: Operation  # step functions follow their host function, in program order
    valid: dict[SSAValue, set[int]] = field(default_factory=dict)
    writer: dict[SSAValue, int] = field(default_factory=dict)
    _parts: int = 0
    _tasks_emitted: int = 0
    _emitted: list[Operation] = field(default_factory=list)
    _steps: list[tuple[func.CallOp, func.FuncOp]] = field(default_factory=list)
    _runtime: set[str] = field(default_factory=set)

    def run(self, final_to_root: set[SSAValue]) -> set[str]:
        """Emit the schedule's code before it, then erase it; return the runtime
        functions it calls."""
        position = {v: i for i, v in reversed(list(enumerate(self.schedule.args)))}
        everyone = set(range(self.ranks))
        for value in self.schedule.args:
            self.valid[value] = set(everyone)
        for task in list(self.schedule.tasks()):
            self._lower_task(task, task_effects(task), position)
        self._outline_steps()
        self._group_steps()
        for value in sorted(self.writer, key=position.__getitem__):
            if self.valid[value] == everyone:
                continue
            if value in final_to_root:
                self._transfer(value, 0, position[value])
            else:
                self._emit(self._broadcast(value, self.writer[value]))
        self.schedule.detach()
        self.schedule.erase()
        return self._runtime

    def _lower_task(self, task: TaskOp, effects: Effects, position: dict[SSAValue, int]) -> None:
        rank = rank_of(task)
        if rank is None:
            raise PassFailedAt(task, "task has no rank; run dhir-place before dhir-lower-to-mpi")
        for value in sorted(effects.touches(), key=position.__getitem__):
            self._check_sendable(task, value)
            self._transfer(value, rank, position[value])
        self._emit(self._guarded(rank, _take_body(task)))
        self._tasks_emitted += 1
        if self._tasks_emitted == STEPS_PER_FUNCTION:
            self._outline_steps()
        for value in effects.writes:
            self.valid[value] = {rank}
            self.writer[value] = rank
        task.detach()
        task.erase()

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
            self.last_function = group

    def _transfer(self, value: SSAValue, to: int, tag: int) -> None:
        if to in self.valid[value]:
            return
        source = self.writer[value]
        self._emit(self._guarded(source, self._message(SEND, value, to, tag)))
        self._emit(self._guarded(to, self._message(RECV, value, source, tag)))
        self.valid[value].add(to)

    def _message(self, call: str, value: SSAValue, peer: int, tag: int) -> list[Operation]:
        """One side of a transfer. Each side finds the address and size itself, inside its
        guard, so that a send joins the branch of the task that wrote the data."""
        pointer, size, buffer_ops = _buffer(value)
        self._runtime.add(call)
        arguments = [pointer, size, self.guards.const(peer), self.guards.const(tag)]
        return [*buffer_ops, func.CallOp(call, arguments, [])]

    def _guarded(self, rank: int, ops: list[Operation]) -> list[Operation]:
        """`ops` under `scf.if rank == R`; when the op emitted last is already such a
        guard for the same rank, `ops` join it (a receive and the task that needs it
        share one branch). Each rank still sees the same ops in the same order."""
        if self.ranks == 1:
            return ops  # one rank runs everything: no guard needed
        last = self._emitted[-1] if self._emitted else None
        if isinstance(last, scf.IfOp) and last.cond == self.guards.on(rank):
            block = last.true_region.block
            for op in ops:
                block.insert_op_before(op, block.last_op)  # type: ignore[arg-type]
            return []
        return [scf.IfOp(self.guards.on(rank), [], [*ops, scf.YieldOp()])]

    def _broadcast(self, value: SSAValue, root: int) -> list[Operation]:
        pointer, size, buffer_ops = _buffer(value)
        self._runtime.add(BCAST)
        return [*buffer_ops, func.CallOp(BCAST, [pointer, size, self.guards.const(root)], [])]

    def _emit(self, ops: Iterable[Operation]) -> None:
        block = self.schedule.parent
        assert block is not None
        for op in ops:
            block.insert_op_before(op, self.schedule)
            self._emitted.append(op)

    def _check_sendable(self, task: TaskOp, value: SSAValue) -> None:
        type_ = value.type
        assert isinstance(type_, MemRefType)
        if not isinstance(type_.layout, NoneAttr):
            raise PassFailedAt(
                task,
                f"schedule operand of type {type_} has a strided layout; the native backend "
                "sends contiguous memrefs only (pass the whole buffer, not a view)",
            )
        if self.ranks > 1 and _element_bytes(type_.element_type) is None:
            raise PassFailedAt(
                task,
                f"schedule operand of type {type_}: the native backend cannot send elements "
                f"of type {type_.element_type} between ranks (it sends integers, index, f16, "
                "bf16, f32 and f64); use one of these types, or run on one rank",
            )


def _take_body(task: TaskOp) -> list[Operation]:
    ops = list(task.body.block.ops)[:-1]  # drop dhir.yield
    for op in ops:
        op.detach()
    return ops


def _buffer(value: SSAValue) -> tuple[SSAValue, SSAValue, list[Operation]]:
    """The address (i64) and size in bytes (i64) of a contiguous memref with the
    identity layout (its offset is 0), and the ops computing them."""
    pointer = dhir_memref.ExtractAlignedPointerAsIndexOp(value)
    as_int = arith.IndexCastOp(pointer.aligned_pointer, i64)
    size, size_ops = _byte_count(value)
    return as_int.result, size, [pointer, as_int, *size_ops]


def _byte_count(value: SSAValue) -> tuple[SSAValue, list[Operation]]:
    type_ = value.type
    assert isinstance(type_, MemRefType)
    width = _element_bytes(type_.element_type)
    assert width is not None, "checked by _check_sendable"
    shape = type_.get_shape()
    if DYNAMIC_INDEX not in shape:
        const = arith.ConstantOp(IntegerAttr(_product(shape) * width, i64))
        return const.result, [const]
    ops: list[Operation] = []
    total: SSAValue = _append(ops, arith.ConstantOp(IntegerAttr(width, IndexType())))
    for dim in range(len(shape)):
        index = _append(ops, arith.ConstantOp(IntegerAttr(dim, IndexType())))
        size = _append(ops, memref.DimOp.from_source_and_index(value, index))
        total = _append(ops, arith.MuliOp(total, size))
    return _append(ops, arith.IndexCastOp(total, i64)), ops


def _append(ops: list[Operation], op: Operation) -> SSAValue:
    ops.append(op)
    return op.results[0]


def _element_bytes(element: Attribute) -> int | None:
    """Bytes between consecutive elements of a memref in memory, as MLIR's LLVM lowering
    lays them out on x86-64 and AArch64 (an integer takes the next power of two bytes:
    i1 one byte, i24 four); None for types this does not know."""
    if isinstance(element, IndexType):
        return 8
    if isinstance(element, IntegerType):
        store = max(1, (element.width.data + 7) // 8)
        return 1 << (store - 1).bit_length()
    sizes = {Float16Type: 2, BFloat16Type: 2, Float32Type: 4, Float64Type: 8}
    return sizes.get(type(element))


def _product(shape: Sequence[int]) -> int:
    total = 1
    for extent in shape:
        total *= extent
    return total
