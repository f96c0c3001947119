"""gpu.launch and gpu.launch_func, emulated thread by thread (in phases between barriers
where a kernel has them: dhir.backends.interp.phases)."""

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from xdsl.dialects.builtin import (
    IntegerAttr,
    MemRefType,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    ReturnedValues,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.traits import SymbolTable

from dhir.backends.interp.collectives import (
    SUBGROUP_SIZE,
    Combine,
    Meeting,
    all_reduce,
    combiner,
    shuffle,
    shuffle_width,
    subgroup_reduce,
)
from dhir.backends.interp.core import Returned, Values, fail, handles, register
from dhir.backends.interp.memref import copy, new_array, state
from dhir.backends.interp.phases import Workers, run_block
from dhir.dialects import func, gpu
from dhir.ir.layout import element_bytes


@dataclass(frozen=True)
class GpuIds:
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    grid: tuple[int, int, int]
    block_dim: tuple[int, int, int]


_XYZ = {"x": 0, "y": 1, "z": 2}
# Ops at which the threads of a block, or of a subgroup, wait for each other.
_WAITING = (gpu.BarrierOp, gpu.AllReduceOp, gpu.SubgroupReduceOp, gpu.ShuffleOp)
# What CUDA launches (dhir's GPU runtime refuses a larger grid the same way): blocks per
# grid in x, y, z, and threads per block in x, y, z and in all.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
# Shared memory a block may have (workgroup attributions and the launch's dynamic size
# together) where the kernel does not opt in to more (cuFuncSetAttribute), which dhir's
# GPU runtime never does.
MAX_SHARED_BYTES = 48 * 1024


def _ids(interp: Interpreter, op: Operation) -> GpuIds:
    ids = state(interp).gpu
    if ids is None:
        fail(op, "runs outside a GPU kernel")
    return ids


def _waits(kernel: Operation) -> bool:
    """Whether the threads of a block may wait for each other in `kernel`: it holds a
    barrier or a collective op, or calls a function that does."""
    seen: set[Operation] = set()
    todo = [kernel]
    while todo:
        for inner in todo.pop().walk():
            if isinstance(inner, _WAITING):
                return True
            if isinstance(inner, func.CallOp):
                callee = SymbolTable.lookup_symbol(inner, inner.callee)
                if callee is not None and callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
    return False


def _meet(interp: Interpreter, op: Operation, meeting: Meeting | None) -> Any:
    """Wait at `op` for the threads that must reach it too (phases.run_block); what it
    gives this thread."""
    _ids(interp, op)
    wait = state(interp).barrier
    if wait is None:  # _waits found no such op: reached in a way it does not follow
        fail(op, "is reached where the interpreter did not expect threads to wait")
    return wait(op, meeting)


def _all_reduce_combiner(interp: Interpreter, op: gpu.AllReduceOp) -> Combine:
    """The all_reduce's operation, or its region run on two values (its own first, as
    the lowering passes them)."""
    if op.op is not None:
        kind = cast(gpu.AllReduceOperationAttr, op.op).data.value
        return combiner(op, kind, op.operand.type)

    def region(a: Any, b: Any) -> Any:
        return interp.run_ssacfg_region(op.body, (a, b), op.name)[0]

    return region


def _attributions(op: Operation, types: Sequence[Attribute]) -> tuple[np.ndarray, ...]:
    return tuple(new_array(op, t, []) for t in types)


def run_kernel(
    interpreter: Interpreter,
    op: Operation,
    body: Any,
    grid: Sequence[int],
    block: Sequence[int],
    make_args: Callable[[tuple[int, ...], tuple[int, ...]], tuple[Any, ...]],
    attributions: tuple[Sequence[Attribute], Sequence[Attribute]],
    waits: bool,
) -> None:
    """Every block, one after another, in order, x fastest. Within a block, its threads
    in order, x fastest: each one to its end, or, where they may `waits` for each other
    at barriers, each one to its next barrier, phase after phase (phases.run_block). A
    size below 1 (a loop of no iterations) runs nothing, as dhir's GPU runtime does."""
    if min(*grid, *block) < 1:
        return
    _check_sizes(op, grid, block)
    run_state = state(interpreter)
    g3, b3 = (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])
    workgroup, private = attributions
    workers = Workers() if waits else None
    try:
        for bx, by, bz in _xyz(g3):
            shared = _attributions(op, workgroup)
            threads: list[tuple[GpuIds, tuple[Any, ...]]] = []
            for tx, ty, tz in _xyz(b3):
                ids = GpuIds((bx, by, bz), (tx, ty, tz), g3, b3)
                own = _attributions(op, private)
                args = (*make_args((bx, by, bz), (tx, ty, tz)), *shared, *own)
                if waits:
                    threads.append((ids, args))
                    continue
                run_state.gpu = ids
                interpreter.run_ssacfg_region(body, args, op.name)
            if workers is not None:
                run_block(interpreter, body, op.name, threads, workers)
    finally:
        run_state.gpu = None
        if workers is not None:
            workers.close()


def _check_shared(
    interp: Interpreter,
    op: Operation,
    sizes: Sequence[int],
    workgroup: Sequence[Attribute],
    size: SSAValue | None,
) -> None:
    """A launch asking for more shared memory than CUDA gives a block, or for a negative
    dynamic size, is refused, as a GPU would refuse it (dhir's GPU runtime stops at such a
    dynamic size); one of no threads runs nothing, and is not."""
    if min(sizes) < 1:
        return
    dynamic = interp.get_values([size])[0] if size is not None else 0
    static = sum(_bytes(t) for t in workgroup)
    if dynamic < 0:
        fail(op, f"asks for {dynamic} bytes of dynamic shared memory: give a size from 0")
    if static + dynamic > MAX_SHARED_BYTES:
        fail(
            op,
            f"needs {static + dynamic} bytes of shared memory a block ({static} of workgroup "
            f"attributions, {dynamic} dynamic); CUDA gives a block at most "
            f"{MAX_SHARED_BYTES} unless the kernel opts in to more, which dhir does not do: "
            "use smaller tiles",
        )


def _bytes(type_: Attribute) -> int:
    assert isinstance(type_, MemRefType)
    element = element_bytes(type_.element_type) or 0  # what new_array refuses anyway
    return element * math.prod(type_.get_shape())


def _xyz(sizes: tuple[int, int, int]) -> Iterator[tuple[int, int, int]]:
    """Every (x, y, z) below `sizes`, x fastest, one at a time (itertools.product first
    makes a tuple of each range: a MemoryError for a large grid)."""
    for z in range(sizes[2]):
        for y in range(sizes[1]):
            for x in range(sizes[0]):
                yield x, y, z


def _check_sizes(op: Operation, grid: Sequence[int], block: Sequence[int]) -> None:
    """A launch larger than CUDA runs is refused, as a GPU would refuse it."""
    shown = " x ".join
    if any(size > most for size, most in zip(grid, MAX_GRID, strict=True)):
        fail(
            op,
            f"needs a grid of {shown(map(str, grid))} blocks; CUDA allows at most "
            f"{shown(map(str, MAX_GRID))}: split the launch, or loop over the excess in the "
            "kernel",
        )
    threads = block[0] * block[1] * block[2]
    if threads > MAX_BLOCK_THREADS or any(
        size > most for size, most in zip(block, MAX_BLOCK, strict=True)
    ):
        fail(
            op,
            f"needs blocks of {shown(map(str, block))} threads; CUDA allows at most "
            f"{shown(map(str, MAX_BLOCK))} and {MAX_BLOCK_THREADS} threads in all: use "
            "smaller blocks and more of them",
        )


@register
class GpuImpls(InterpreterFunctions):
    @handles(gpu.LaunchOp)
    def run_launch(self, interp: Interpreter, op: gpu.LaunchOp, args: Values) -> Values:
        if op.clusterSizeX is not None:
            fail(op, "with clusters is not supported by the interpreter")
        sizes = interp.get_values(
            [op.gridSizeX, op.gridSizeY, op.gridSizeZ, op.blockSizeX, op.blockSizeY, op.blockSizeZ]
        )
        grid, block = sizes[:3], sizes[3:]
        block_args = op.body.blocks[0].arg_types
        attr = op.attributes.get("workgroup_attributions")
        n_workgroup = attr.value.data if isinstance(attr, IntegerAttr) else 0
        workgroup = block_args[12 : 12 + n_workgroup]
        private = block_args[12 + n_workgroup :]
        _check_shared(interp, op, sizes, workgroup, op.dynamicSharedMemorySize)
        run_kernel(
            interp, op, op.body, grid, block,
            lambda b, t: (*b, *t, *grid, *block), (workgroup, private), _waits(op),
        )  # fmt: skip
        return (None,) * len(op.results)

    @handles(gpu.LaunchFuncOp)
    def run_launch_func(self, interp: Interpreter, op: gpu.LaunchFuncOp, args: Values) -> Values:
        kernel = SymbolTable.lookup_symbol(op, op.kernel)
        if not isinstance(kernel, gpu.FuncOp):
            fail(op, f"launches {op.kernel}, which is not a gpu.func in the module")
        if op.clusterSizeX is not None:
            fail(op, "with clusters is not supported by the interpreter")
        sizes = interp.get_values(
            [op.gridSizeX, op.gridSizeY, op.gridSizeZ, op.blockSizeX, op.blockSizeY, op.blockSizeZ]
        )
        operands = interp.get_values(op.kernelOperands)
        block_args = kernel.body.blocks[0].arg_types
        n_inputs = len(kernel.function_type.inputs)
        attr = kernel.attributes.get("workgroup_attributions")
        n_workgroup = attr.value.data if isinstance(attr, IntegerAttr) else 0
        workgroup = block_args[n_inputs : n_inputs + n_workgroup]
        private = block_args[n_inputs + n_workgroup :]
        _check_shared(interp, op, sizes, workgroup, op.dynamicSharedMemorySize)
        run_kernel(
            interp, op, kernel.body, sizes[:3], sizes[3:],
            lambda b, t: operands, (workgroup, private), _waits(kernel),
        )  # fmt: skip
        return (None,) * len(op.results)

    @handles(gpu.BarrierOp)
    def run_barrier(self, interp: Interpreter, op: gpu.BarrierOp, args: Values) -> Values:
        _meet(interp, op, None)
        return ()

    @handles(gpu.AllReduceOp)
    def run_all_reduce(self, interp: Interpreter, op: gpu.AllReduceOp, args: Values) -> Values:
        add = _all_reduce_combiner(interp, op)
        return (_meet(interp, op, Meeting(args[0], 0, all_reduce(add))),)

    @handles(gpu.SubgroupReduceOp)
    def run_subgroup_reduce(
        self, interp: Interpreter, op: gpu.SubgroupReduceOp, args: Values
    ) -> Values:
        kind = cast(gpu.AllReduceOperationAttr, op.op).data.value
        settle = subgroup_reduce(op, combiner(op, kind, op.value.type))
        return (_meet(interp, op, Meeting(args[0], SUBGROUP_SIZE, settle)),)

    @handles(gpu.ShuffleOp)
    def run_shuffle(self, interp: Interpreter, op: gpu.ShuffleOp, args: Values) -> Values:
        value, offset, width = args
        shuffle_width(op, width, offset)
        return _meet(interp, op, Meeting((value, offset, width), width, shuffle(op)))

    @handles(gpu.TerminatorOp, gpu.ReturnOp, gpu.YieldOp)
    def run_terminator(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(gpu.ThreadIdOp, gpu.BlockIdOp, gpu.BlockDimOp, gpu.GridDimOp, gpu.GlobalIdOp)
    def run_id(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        ids = _ids(interp, op)
        axis = _XYZ[str(op.properties["dimension"].data)]  # type: ignore[attr-defined]
        if isinstance(op, gpu.ThreadIdOp):
            return (ids.thread[axis],)
        if isinstance(op, gpu.BlockIdOp):
            return (ids.block[axis],)
        if isinstance(op, gpu.BlockDimOp):
            return (ids.block_dim[axis],)
        if isinstance(op, gpu.GridDimOp):
            return (ids.grid[axis],)
        return (ids.block[axis] * ids.block_dim[axis] + ids.thread[axis],)

    @handles(gpu.LaneIdOp, gpu.SubgroupIdOp, gpu.SubgroupSizeOp, gpu.NumSubgroupsOp)
    def run_subgroup(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        ids = _ids(interp, op)
        (tx, ty, tz), (sx, sy, sz) = ids.thread, ids.block_dim
        linear = tx + sx * (ty + sy * tz)
        if isinstance(op, gpu.LaneIdOp):
            return (linear % SUBGROUP_SIZE,)
        if isinstance(op, gpu.SubgroupIdOp):
            return (linear // SUBGROUP_SIZE,)
        if isinstance(op, gpu.SubgroupSizeOp):
            return (SUBGROUP_SIZE,)
        return (-(-(sx * sy * sz) // SUBGROUP_SIZE),)

    @handles(gpu.AllocOp)
    def run_gpu_alloc(self, interp: Interpreter, op: gpu.AllocOp, args: Values) -> Values:
        sizes = interp.get_values(op.dynamicSizes)
        return (new_array(op, op.result.type, sizes), *(None,) * (len(op.results) - 1))

    @handles(gpu.MemcpyOp)
    def run_gpu_memcpy(self, interp: Interpreter, op: gpu.MemcpyOp, args: Values) -> Values:
        copy(op, *interp.get_values([op.src, op.dst]))
        return (None,) * len(op.results)

    @handles(gpu.DeallocOp, gpu.WaitOp, gpu.HostRegisterOp, gpu.HostUnregisterOp)
    @handles(gpu.SetDefaultDeviceOp)
    def run_gpu_no_op(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (None,) * len(op.results)
