"""`dhir-split-devices`: cut a loop that may run on any device over a node's GPU and its
CPU ranks, each piece sized by its device's rate.

Where the module's machine description gives the program's ranks both GPUs and CPUs, a
task bound to `{kind = "any"}` whose work is one parallel loop (`scf.parallel`,
`affine.parallel`) or one linalg op with a parallel outer dimension, as `dhir-split` cuts
them, becomes one piece per rank, sized by the GFLOP/s a piece gets there, as dhir-split
sizes its pieces (`piece_rates`): a GPU rank's share of its GPU's peak GFLOP/s, a CPU
rank's OpenMP threads (cores / ranks) at a core's rate, within its share of the CPU's
peak. Each piece is pinned to its rank (`dhir.rank`) and bound to that rank's kind of
device (a GPU piece to its GPU's arch, when the description names it): a
GPU rank's piece is a GPU task, whose loop `dhir-gpu-kernels` turns into a kernel and
whose rows `dhir-gpu-data` copies in and out (`dhir.rows`, found here while the body is
still a loop); the CPU ranks' pieces run as CPU tasks. The pieces write disjoint rows, so
they run at once and meet, through dhir-lower-to-mpi's messages, as split pieces do.

Left whole: tasks with `dhir.rank` or `dhir.split` (the user chose), tasks with GPU code of
their own, sequential loops (a kernel cannot run them), loops the split cannot cut. A
rank whose share is too small for one iteration gets no piece.

It runs before `dhir-gpu-kernels` (the native backend runs it first), since the GPU pieces
need kernels; `dhir-split` then leaves the pieces alone.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.regions import row_span, rows_region, task_regions
from dhir.analysis.threads import runs_on_threads
from dhir.dialects import memref
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp, walk_outside_tasks
from dhir.ir.tasks import (
    PIECE_ATTR,
    RANK_ATTR,
    THREADED_KINDS,
    PieceRows,
    is_gpu_task,
    set_rows,
)
from dhir.machine.description import Device
from dhir.placement.from_ir import has_machine, machine_for
from dhir.targets import DeviceKind
from dhir.transforms.pass_options import check_ranks
from dhir.transforms.split_tasks import (
    SPLIT_ATTR,
    PieceDevice,
    SplitChoice,
    SplitPlan,
    cut_sized,
    effects_after,
    integer_weights,
    piece_rates,
    splittable,
)


@dataclass(frozen=True)
class SplitDevicesPass(ModulePass):
    """Cut loops bound to any device over the ranks' GPUs and CPUs, by their rates."""

    name = "dhir-split-devices"

    ranks: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.split(op)

    def split(self, module: ModuleOp, plan: SplitPlan | None = None) -> None:
        """The pass; a `plan` learns each task it cut, with each piece's rank, device,
        rate and size (`dhir schedule`, `--timing`)."""
        check_ranks(self.name, self.ranks)
        devices = mixed_devices(module, self.ranks)
        if devices is None:
            return
        threads = runs_on_threads(module)
        for schedule in [s for s in walk_outside_tasks(module) if isinstance(s, ScheduleOp)]:
            for index, task in enumerate(list(schedule.tasks())):
                if not _candidate(task):
                    continue
                rates = piece_rates(task, devices, threads)
                cut = cut_sized(task, index, integer_weights(rates))
                if cut is None:
                    continue
                where, sized = cut
                _bind({rank: piece for rank, (piece, _) in sized.items()}, devices)
                if plan is not None:
                    first = next(iter(sized.values()))[0]
                    plan.add(first, _choice(where, sized, devices, rates))


def _choice(
    where: str, sized: dict[int, tuple[TaskOp, str]], devices: list[Device], rates: list[float]
) -> SplitChoice:
    on = tuple(
        PieceDevice(rank, d.name, d.kind.value, d.arch, rates[rank], size)
        for rank, (_, size) in sized.items()
        for d in (devices[rank],)
    )
    count = len(on)
    how = f"cut into {count} pieces over GPU and CPU ranks by their rates (dhir-split-devices)"
    return SplitChoice("", count, how, f"over {where}, " + ", ".join(map(str, on)), on)


def mixed_devices(module: ModuleOp, ranks: int) -> list[Device] | None:
    """Each rank's device, when the module's machine description gives its ranks both
    GPUs and CPUs; else None."""
    if ranks < 2 or not has_machine(module):
        return None
    devices, _ = machine_for(module, ranks)
    kinds = {d.kind for d in devices}
    return devices if kinds == {DeviceKind.CPU, DeviceKind.GPU} else None


def _candidate(task: TaskOp) -> bool:
    if task.target_info().kind != DeviceKind.ANY or is_gpu_task(task):
        return False
    if any(a in task.attributes for a in (RANK_ATTR, SPLIT_ATTR, PIECE_ATTR)):
        return False
    # A GPU piece copies in and out rows of its listed memrefs: views the task makes of
    # them (which dhir-split may cut across CPU ranks) are left off that path, unchecked.
    if any(isinstance(op, memref.SubviewOp) for op in task.body.block.ops):
        return False
    # A GPU piece's loop must become a kernel: parallel loops and linalg ops only, not
    # under an scf.if nor followed by ops with effects.
    found = splittable(task)
    if found is None or found[1].parent_op() is not task:
        return False
    return isinstance(found[1], THREADED_KINDS) and not effects_after(task, found[1])


def _bind(pieces: dict[int, TaskOp], devices: list[Device]) -> None:
    """Pin each piece to its rank and bind it to that rank's kind of device."""
    targets: dict[str, SSAValue] = {}
    for rank, piece in pieces.items():
        device = devices[rank]
        # A GPU piece is built for its GPU's chip, where the description names it.
        name = device.arch if device.kind == DeviceKind.GPU and device.arch else device.kind.value
        piece.attributes[RANK_ATTR] = IntegerAttr(rank, i64)
        if device.kind == DeviceKind.GPU:
            set_rows(piece, _rows(piece))
        if piece.target is None:
            piece.properties["target"] = StringAttr(name)
            continue
        if name not in targets:
            target = TargetOp(arch=name) if name != device.kind.value else TargetOp(kind=name)
            block = piece.parent
            assert block is not None
            first = next(iter(pieces.values()))
            block.insert_op_before(target, first)
            targets[name] = target.result
        piece.operands[0] = targets[name]


def _rows(piece: TaskOp) -> dict[SSAValue, PieceRows]:
    """The rows of each memref a GPU piece writes, and those its device copy needs from
    the host first: what it reads, and whatever of the rows it copies back it does not
    surely write (those must come back as they were)."""
    regions = task_regions(piece)
    rows: dict[SSAValue, PieceRows] = {}
    for m in piece.memrefs:
        if m not in regions.reads and m not in regions.writes:
            continue
        out = row_span(regions.written(m), m)
        kept = rows_region(m, out) - regions.must_written(m)
        rows[m] = PieceRows(row_span(regions.needs(m) | kept, m), out)
    return rows
