"""`dhir-gpu-kernels`: GPU tasks' loops become kernels, named by chip.

Runs before placement. Each GPU task written as parallel loops (`scf.parallel`,
`affine.parallel`, linalg) gets kernels from mlir-opt-22: linalg and affine become
`scf.parallel`, each loop nest is tiled (a block of threads per tile, never one thread per
block) and mapped to a grid of blocks x threads (`gpu.launch`). Tasks written as an explicit
`gpu.launch` keep it. Every kernel is then named after its task and put in the `gpu.module`
of its chip (`dhir_sm_90`, ...), so one program may hold tasks for several chips; the
toolchain (dhir.toolchain.gpu) builds one binary per chip. The pass also checks that a GPU
task's host code leaves its memrefs, which live on the device, alone.
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from dhir.dialects import affine, arith, func, scf
from dhir.dialects import gpu as dgpu
from dhir.dialects.access import is_shape_query, is_view
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.diagnostics import error_at
from dhir.ir.tasks import (
    GPU_ROWS_ATTR,
    THREADED_KINDS,
    is_gpu_task,
    set_rows,
    task_label,
    task_numbers,
)
from dhir.ir.text import through_mlir_opt
from dhir.ir.walk import enclosing
from dhir.machine.detect import default_chip
from dhir.targets import UnknownArchError, ptx_feature
from dhir.transforms.endless_loops import keep_endless
from dhir.transforms.gpu_rows import task_rows

# Threads per block along each mapped dimension, by loop depth; the first dimension is the
# innermost (contiguous) one, see _reverse_dims.
TILE_SIZES: dict[int, tuple[int, ...]] = {1: (256,), 2: (32, 8), 3: (32, 4, 2)}
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNBUILDABLE = (*dgpu.MMA_OPS, *dgpu.SPARSE_OPS)


@dataclass(frozen=True)
class GpuKernelsPass(ModulePass):
    """Map GPU tasks' parallel loops to kernels and name every kernel by its chip.

    `mlir_opt`: the mlir-opt-22 that maps the loops. Also checks that GPU tasks' host code
    leaves their memrefs alone."""

    name = "dhir-gpu-kernels"

    mlir_opt: str = "mlir-opt-22"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tasks = gpu_tasks(op)
        if not tasks:
            return
        numbers = {
            task: number
            for schedule in {t.parent_op() for t in tasks}
            if isinstance(schedule, ScheduleOp)
            for task, number in zip(schedule.tasks(), task_numbers(schedule), strict=True)
        }
        labels = {task: task_label(task, numbers.get(task)) for task in tasks}
        loops = [task for task in tasks if _needs_mapping(task, labels[task])]
        for task in tasks:
            _check_buildable(task, labels[task])
            _check_kernel_calls(task, labels[task], op)
            # Before mapping too: the ops that come back from mlir-opt have lost the
            # user's source locations.
            _check_host_code(task, labels[task])
        for task in loops:
            # The kernels' accesses are not analysed: dhir-gpu-data reads these instead.
            set_rows(task, task_rows(task), GPU_ROWS_ATTR)
        for task in tasks:
            # Before mlir-opt's canonicalize (here, or the build's), which erased a loop
            # that writes nothing, ending or not.
            keep_endless(task)
        if loops:
            _map_loops(loops, labels, self.mlir_opt)
        for number, task in enumerate(tasks):
            _check_host_code(task, labels[task])
            chip = chip_of(task)
            try:
                ptx_feature(chip)
            except UnknownArchError as error:
                raise error_at(task, f"{labels[task]}: {error}") from None
            _name_kernels(task, chip, number)


def gpu_tasks(module: ModuleOp) -> list[TaskOp]:
    return [t for t in module.walk() if isinstance(t, TaskOp) and is_gpu_task(t)]


def kernel_chips(module: ModuleOp) -> tuple[str, ...]:
    """The chips the module's GPU tasks run on, sorted."""
    return tuple(sorted({chip_of(task) for task in gpu_tasks(module)}))


def chip_of(task: TaskOp) -> str:
    arch = task.target_info().arch
    return arch if arch is not None and arch.startswith("sm_") else default_chip()


def module_name(chip: str) -> str:
    return f"dhir_{chip}"


def _is_loop(op: Operation) -> bool:
    return isinstance(op, THREADED_KINDS)


def _needs_mapping(task: TaskOp, label: str) -> bool:
    launches = [op for op in task.body.walk() if isinstance(op, dgpu.LaunchOp)]
    outside = [op for op in _host_ops(task.body.block) if _is_loop(op)]
    if launches and outside:
        raise error_at(
            outside[0],
            f"{label} mixes parallel loops with an explicit gpu.launch; write its body either "
            "as parallel loops (dhir maps them to the GPU) or as gpu.launch ops",
        )
    for op in outside:
        if _reduces(op):
            raise error_at(
                op,
                f"{label}: this parallel loop reduces (init/scf.reduce), which dhir cannot "
                "map to the GPU yet; compute the reduction in a CPU task, or write the kernel "
                "as a gpu.launch",
            )
    if launches or outside:
        return bool(outside)
    calls = [op for op in task.body.walk() if isinstance(op, dgpu.LaunchFuncOp)]
    if calls:
        raise error_at(
            calls[0],
            f"{label}: the native backend does not build gpu.launch_func of the program's own "
            "gpu.func (the interpreter runs it); write the kernel as a gpu.launch with its "
            "body inline, or as parallel loops",
        )
    raise error_at(
        task,
        f"{label} has no parallel loop (scf.parallel, affine.parallel, linalg) or gpu.launch "
        "to run on the GPU; write its work as one of those, or bind it to a CPU target",
    )


def _reduces(op: Operation) -> bool:
    if isinstance(op, scf.ParallelOp):
        return bool(op.initVals)
    reductions = op.properties.get("reductions")
    return isinstance(op, affine.ParallelOp) and bool(getattr(reductions, "data", ()))


def _host_ops(block: Block) -> Iterator[Operation]:
    """Ops of a task body, not looking inside kernels (launches, and the parallel loops
    that become kernels)."""
    for op in block.ops:
        yield op
        if isinstance(op, dgpu.LaunchOp) or _is_loop(op):
            continue
        for region in op.regions:
            for inner in region.blocks:
                yield from _host_ops(inner)


def _check_buildable(task: TaskOp, label: str) -> None:
    """dhir reads and prints the tensor-core (MMA) and sparse (cuSPARSE) ops, but does not
    build them: mlir-opt-22 leaves some MMA ops unlowered, and the sparse ops call a
    runtime dhir does not provide."""
    for op in task.body.walk():
        if isinstance(op, _UNBUILDABLE):
            raise error_at(
                op,
                f"{label} uses '{op.name}', which dhir can read and print but not build or "
                "run; write the work as parallel loops (scf.parallel, affine.parallel, "
                "linalg) instead",
            )


def _check_kernel_calls(task: TaskOp, label: str, module: ModuleOp) -> None:
    """Refuse a call in a kernel of `task` that the GPU cannot make: of a function the
    program declares without a body (C linked with --link, libc's, libm's: host code,
    which mlir-opt-22 left in the kernel as an unresolved symbol and the build went on),
    directly or through functions with bodies; and any call in a parallel loop, which
    mlir-opt-22 maps to a kernel without the function ('does not reference a valid
    function', at no line of the program)."""
    for kernel in _host_ops(task.body.block):
        if not (isinstance(kernel, dgpu.LaunchOp) or _is_loop(kernel)):
            continue
        for call in kernel.walk():
            if not isinstance(call, func.CallOp):
                continue
            name = call.callee.string_value()
            external = _declared_reached(name, module)
            if external is not None:
                through = "" if external == name else f" (through @{name})"
                raise error_at(
                    call,
                    f"{label} calls @{external}{through} in a kernel, a function the "
                    "program declares without a body: its code (yours, linked with "
                    "--link/-l, or the C library's) runs on the host, never on the GPU. "
                    "Call it from a CPU task, or write its work in the program (math "
                    "ops for C's math functions)",
                )
            if not isinstance(kernel, dgpu.LaunchOp):
                raise error_at(
                    call,
                    f"{label} calls @{name} in a parallel loop, which dhir cannot map to "
                    "a GPU kernel yet; write the function's ops in the loop, or the kernel "
                    "as a gpu.launch (which may call it)",
                )


def _declared_reached(name: str, module: ModuleOp) -> str | None:
    """The first function declared without a body that a call of @`name` reaches,
    itself or through the calls of functions with bodies; None if none."""
    pending, seen = [name], {name}
    while pending:
        callee = SymbolTable.lookup_symbol(module, pending.pop())
        if not isinstance(callee, func.FuncOp):
            continue
        if callee.is_declaration:
            return callee.sym_name.data
        for call in callee.body.walk():
            if isinstance(call, func.CallOp) and (inner := call.callee.string_value()) not in seen:
                seen.add(inner)
                pending.append(inner)
    return None


def _check_host_code(task: TaskOp, label: str) -> None:
    listed = set(task.memrefs)
    for op in _host_ops(task.body.block):
        # Views and shape queries only read the descriptor, or hand the buffer (now on
        # the device) to the device.
        if is_view(op) or is_shape_query(op) or isinstance(op, dgpu.LaunchOp) or _is_loop(op):
            continue
        used = [v for v in op.operands if v in listed]
        if used:
            name = f"%{used[0].name_hint}" if used[0].name_hint else "a listed memref"
            raise error_at(
                op,
                f"{label} uses {name} in '{op.name}' outside a kernel; a GPU task's memrefs "
                "live on the device, so move this into the parallel loop (or the gpu.launch), "
                "or into a CPU task",
            )


def _name_kernels(task: TaskOp, chip: str, number: int) -> None:
    name = task.attributes.get("name")
    text = getattr(name, "data", "")
    base = text if isinstance(text, str) and _SIMPLE_NAME.fullmatch(text) else "task"
    launches = [op for op in task.body.walk() if isinstance(op, dgpu.LaunchOp)]
    for k, launch in enumerate(launches):
        launch.properties["module"] = SymbolRefAttr(module_name(chip))
        launch.properties["function"] = SymbolRefAttr(f"{base}{number}_kernel{k}")


def _map_loops(tasks: Sequence[TaskOp], labels: dict[TaskOp, str], mlir_opt: str) -> None:
    functions = [_to_function(task, f"dhir_gpu_task{k}") for k, task in enumerate(tasks)]
    module = ModuleOp([f for f, _ in functions])
    if any(isinstance(op, affine.ParallelOp | LinalgStructuredOperation) for op in module.walk()):
        module = _mlir_opt(
            module,
            "builtin.module(func.func(convert-linalg-to-parallel-loops),lower-affine)",
            mlir_opt,
            labels,
        )
    # After linalg and affine.parallel became scf.parallel, and at any depth (a loop in a
    # host loop), so every kernel gives thread x the contiguous dimension.
    for loop in [op for op in module.walk() if isinstance(op, scf.ParallelOp)]:
        _reverse_dims(loop)
        _count_from_zero(loop)
    mapped: dict[str, func.FuncOp] = {}
    for depth, group in _by_depth(module).items():
        sizes = ",".join(str(s) for s in TILE_SIZES[depth])
        # Fixed-size tiles with a bounds check inside: a loop shorter than one tile still
        # gets a block of threads, which canonicalizing min/max bounds would fold away.
        # No canonicalization before mapping: it would fold a one-iteration loop into
        # host code.
        pipeline = (
            "builtin.module(func.func(scf-parallel-loop-tiling{"
            f"parallel-loop-tile-sizes={sizes} no-min-max-bounds=true}},gpu-map-parallel-loops,"
            "convert-parallel-loops-to-gpu,canonicalize))"
        )
        result = _mlir_opt(ModuleOp(group), pipeline, mlir_opt, labels)
        mapped.update({f.sym_name.data: f for f in result.ops if isinstance(f, func.FuncOp)})
    for k, (task, (_, free)) in enumerate(zip(tasks, functions)):
        _take_back(task, mapped[f"dhir_gpu_task{k}"], free, labels[task])


def _to_function(task: TaskOp, name: str) -> tuple[func.FuncOp, list[SSAValue]]:
    """Move the task's body into a function of the values it uses from outside."""
    ops = list(task.body.block.ops)[:-1]  # all but dhir.yield
    inside = {nested for op in ops for nested in op.walk()}
    free: dict[SSAValue, None] = {}
    for op in inside:
        for value in op.operands:
            if not _defined_in(value, inside):
                free[value] = None
    block = Block(arg_types=[v.type for v in free])
    mapping = dict(zip(free, block.args))
    for op in ops:
        op.detach()
        block.add_op(op)
    for op in inside:
        for index, value in enumerate(op.operands):
            if value in mapping:
                op.operands[index] = mapping[value]
    block.add_op(func.ReturnOp())
    types = ([v.type for v in free], [])
    return func.FuncOp(name, types, Region(block), "private"), list(free)


def _defined_in(value: SSAValue, inside: set[Operation]) -> bool:
    if isinstance(value, BlockArgument):
        return value.block.parent_op() in inside
    return value.owner in inside


def _reverse_dims(loop: scf.ParallelOp) -> None:
    """Make the innermost (contiguous, in row-major memrefs) dimension the first, which
    gpu-map-parallel-loops gives to thread x: neighbouring threads then touch
    neighbouring elements. The iteration space is the same."""
    n = len(loop.lowerBound)
    if n < 2 or loop.initVals:
        return
    bounds = [list(loop.lowerBound), list(loop.upperBound), list(loop.step)]
    loop.operands = [*(v for group in bounds for v in reversed(group))]
    block = loop.body.block
    old = list(block.args)
    new = [block.insert_arg(IndexType(), len(block.args)) for _ in range(n)]
    for i, arg in enumerate(old):
        arg.replace_all_uses_with(new[n - 1 - i])
    for arg in old:
        block.erase_arg(arg)


def _count_from_zero(loop: scf.ParallelOp) -> None:
    """Make `loop` count its iterations from 0 in steps of 1 (i = lb + k * step inside).
    mlir-opt-22's tiling with `no-min-max-bounds` checks a thread's bound as lb + i * step
    with i already a multiple of the step, and compares unsigned: other steps skipped
    iterations and negative lower bounds dropped them (docs/upstream-bugs.md section 14).
    A loop whose upper bound is below its lower one gets 0 iterations, not a negative count."""
    bounds = list(zip(loop.lowerBound, loop.upperBound, loop.step))
    if all(_is_constant(lb, 0) and _is_constant(step, 1) for lb, _, step in bounds):
        return
    zero, one = (
        arith.ConstantOp.from_int_and_width(0, IndexType()),
        arith.ConstantOp.from_int_and_width(1, IndexType()),
    )
    before: list[Operation] = [zero, one]
    counts: list[SSAValue] = []
    for lb, ub, step in bounds:
        span = arith.SubiOp(ub, lb)
        count = arith.CeilDivSIOp(span, step)
        kept = arith.MaxSIOp(count, zero)
        before += [span, count, kept]
        counts.append(kept.result)
    Rewriter.insert_op(before, InsertPoint.before(loop))
    body = loop.body.block
    inside: list[Operation] = []
    for k, (lb, _, step) in zip(body.args, bounds):
        uses = list(k.uses)
        scaled = arith.MuliOp(k, step)
        index = arith.AddiOp(lb, scaled)
        for use in uses:
            use.operation.operands[use.index] = index.result
        inside += [scaled, index]
    Rewriter.insert_op(inside, InsertPoint.at_start(body))
    n = len(bounds)
    loop.operands = [*[zero.result] * n, *counts, *[one.result] * n, *loop.initVals]


def _is_constant(value: SSAValue, number: int) -> bool:
    op = value.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data == number
    )


def _by_depth(module: ModuleOp) -> dict[int, list[func.FuncOp]]:
    """Functions grouped by the deepest of their outermost parallel loops (1 to 3)."""
    groups: dict[int, list[func.FuncOp]] = {}
    for function in [f for f in module.ops if isinstance(f, func.FuncOp)]:
        depths = [
            len(op.lowerBound)
            for op in function.walk()
            if isinstance(op, scf.ParallelOp) and enclosing(op, scf.ParallelOp) is None
        ]
        depth = min(3, max(depths, default=1))
        function.detach()
        groups.setdefault(depth, []).append(function)
    return groups


def _mlir_opt(
    module: ModuleOp, pipeline: str, mlir_opt: str, labels: dict[TaskOp, str]
) -> ModuleOp:
    names = "; ".join(labels.values())
    return through_mlir_opt(
        module,
        mlir_opt,
        pipeline,
        what="map GPU loops",
        failed=f"mapping GPU tasks' loops to kernels failed ({names})",
        verify=False,
    )


def _take_back(task: TaskOp, function: func.FuncOp, free: list[SSAValue], label: str) -> None:
    """The mapped body back into the task, using the task's values again."""
    block = function.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, free))
    ops = list(block.ops)[:-1]  # all but func.return
    for op in ops:
        for nested in op.walk():
            for index, value in enumerate(nested.operands):
                if value in mapping:
                    nested.operands[index] = mapping[value]
            if isinstance(nested, scf.ParallelOp) and enclosing(nested, dgpu.LaunchOp) is None:
                raise error_at(
                    task,
                    f"{label}: a parallel loop could not be mapped to the GPU; write the "
                    "kernel as a gpu.launch",
                )
    yield_op = task.body.block.last_op
    assert yield_op is not None
    for op in ops:
        op.detach()
        task.body.block.insert_op_before(op, yield_op)
