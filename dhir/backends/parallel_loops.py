"""What neither backend runs, refused at its line before either starts: a parallel loop
(`scf.parallel`, `affine.parallel`) two of whose iterations surely touch one element,
one writing it with a plain store (dhir/analysis/overlaps.py). The interpreter runs the
iterations in order; natively they run at once on threads, and the result would depend
on their timing.

The threads of a GPU kernel (`gpu.launch`, `gpu.launch_func`) are refused the same way
when two of them surely touch one element, one writing it, with no barrier between them
(`check_kernels`): on a GPU they run at once, in the interpreter one after another.

A loop whose iterations are not proven independent either (a subscript loaded from
memory, a view dhir does not follow, a bound known at run time only) is marked to run its
iterations in order natively, as the interpreter does (`mark_unproven_loops`).

A `memref.copy` between two views of one buffer that surely share an element is refused
too (`check_copies`): MLIR leaves its result undefined, the interpreter refuses it, and
native code would copy in an order of its own and exit 0."""

from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Operation

from dhir.analysis.communication import communicates, communicating_functions
from dhir.analysis.overlaps import (
    Overlap,
    kernel_overlap,
    parallel_independence,
    parallel_overlap,
)
from dhir.analysis.regions import copy_overlap
from dhir.dialects import affine, gpu, scf
from dhir.dialects import memref as memref_dialect
from dhir.dialects.dhir import TaskOp
from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import error_at, loc_of, value_name
from dhir.ir.tasks import is_gpu_task
from dhir.ir.walk import enclosing, find_among, find_ops
from dhir.transforms.serial_loops import IN_ORDER


def check_parallel_loops(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first parallel loop whose iterations are proven to overlap."""
    for op in find_among(module, (scf.ParallelOp, affine.ParallelOp), ops):
        overlap = parallel_overlap(op)
        if overlap is not None:
            raise error_at(op, _message(op, overlap))


def check_kernels(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first GPU launch two of whose threads are proven to race."""
    for op in find_among(module, (gpu.LaunchOp, gpu.LaunchFuncOp), ops):
        overlap = kernel_overlap(op)
        if overlap is not None:
            raise error_at(op, _kernel_message(op, overlap))


def check_copies(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first memref.copy or gpu.memcpy whose source and target are proven to
    overlap."""
    for op in find_among(module, (memref_dialect.CopyOp, gpu.MemcpyOp), ops):
        overlap = copy_overlap(op)
        if overlap is None:
            continue
        memref = value_name(overlap.memref, f"a {overlap.memref.type}")
        element = f"{memref}[{', '.join(map(str, overlap.element))}]"
        raise error_at(
            op,
            f"this {op.name} copies between views that overlap ({element} is in both, "
            "and they are not the same view), which MLIR leaves undefined: "
            "the result would depend on the order the elements are copied in. Copy "
            "through a buffer of its own (memref.alloc, a copy into it, then one out "
            "of it), or make the views apart",
        )


def mark_unproven_loops(module: ModuleOp) -> list[str]:
    """Mark `dhir.in_order` each parallel loop of host code whose iterations are not proven
    independent, for dhir-serial-loops to run them in order: on threads they might touch
    one element at once, and the result would then depend on their timing. One line for
    each, saying where and why (for --timing)."""
    notes: list[str] = []
    loops = find_ops(module, (scf.ParallelOp, affine.ParallelOp))
    # Loops that reach MPI run in order anyway (dhir-serial-loops): no note for them.
    functions = communicating_functions(module) if loops else set[str]()
    for op in loops:
        if IN_ORDER in op.attributes or in_device_code(op) or communicates(op, functions):
            continue
        reason = parallel_independence(op)
        if reason is None:
            continue
        op.attributes[IN_ORDER] = UnitAttr()
        where = f"{loc}: " if (loc := loc_of(op)) is not None else ""
        notes.append(
            f"in order: {where}this {op.name} runs its iterations one at a time, in order: "
            f"their independence is not proven ({reason})"
        )
    return notes


def _message(loop: Operation, overlap: Overlap) -> str:
    memref = value_name(overlap.memref, f"a {overlap.memref.type}")
    element = f"{memref}[{', '.join(map(str, overlap.element))}]"
    first, second = (f"({', '.join(map(str, it))})" for it in (overlap.first, overlap.second))
    what = "reads" if overlap.read else "writes"
    sequential, combine = (
        (scf.ForOp.name, scf.ReduceOp.name)
        if isinstance(loop, scf.ParallelOp)
        else (affine.ForOp.name, f'an {loop.name} reduction (reduce ("addf") ...)')
    )
    atomic = f"an atomic update ({memref_dialect.AtomicRMWOp.name})"
    head = (
        f"iterations of this {loop.name} overlap: iteration {first} writes {element}, "
        f"which iteration {second} {what} too{_where(overlap)}. Its iterations must be "
        f"independent: "
    )
    if _in_gpu_task(loop):
        # A GPU task runs neither a sequential loop nor a reduction (dhir-gpu-kernels).
        return (
            f"{head}a GPU runs them at once on its threads (the interpreter runs them in "
            f"order), so the result would depend on their order. Combine their values with "
            f"{atomic}, or run the loop as {sequential} or with {combine} in a CPU task"
        )
    return (
        f"{head}{_how_run(loop)}, so the result would depend on their order. "
        "Write the loop as "
        f"{sequential} to run its iterations in order, or combine their values with "
        f"{combine} or {atomic}"
    )


def _in_gpu_task(loop: Operation) -> bool:
    task = enclosing(loop, TaskOp)
    return task is not None and is_gpu_task(task)


def _how_run(loop: Operation) -> str:
    """How a parallel loop's iterations may run: at once (on threads, natively), unless
    the loop reaches MPI, which only the order of a parallel loop's iterations keeps
    apart (dhir-serial-loops runs those in order, as the interpreter does)."""
    module = loop.get_toplevel_object()
    functions = communicating_functions(module) if isinstance(module, ModuleOp) else set[str]()
    if communicates(loop, functions):
        return (
            "a parallel loop may run them in any order (dhir runs this one in order, as it "
            "reaches MPI, but a parallel loop does not promise that)"
        )
    return "the native backend runs them at once on threads (the interpreter runs them in order)"


def _where(overlap: Overlap) -> str:
    """The run-time values the bounds (a loop's, a launch's) are made of, as the overlap
    has them."""
    if not overlap.values:
        return ""
    named = [f"%{name}" if name is not None else "a run-time value" for name, _ in overlap.values]
    return ", where " + ", ".join(
        f"{n} = {v}" for n, (_, v) in zip(named, overlap.values, strict=True)
    )


def _kernel_message(launch: Operation, overlap: Overlap) -> str:
    first, second = (_thread(it) for it in (overlap.first, overlap.second))
    what = "reads" if overlap.read else "writes"
    kernel = f" of {launch.kernel}" if isinstance(launch, gpu.LaunchFuncOp) else ""
    if overlap.first[:3] != overlap.second[:3]:
        order = (
            f"split the kernel in two launches ({gpu.BarrierOp.name} orders the threads of "
            "one block only, and these are in different blocks)"
        )
    elif overlap.read:
        order = f"put a {gpu.BarrierOp.name} between the write and the read"
    else:
        order = f"put a {gpu.BarrierOp.name} between the two writes, if they are two ops"
    return (
        f"threads of this {launch.name}{kernel} race: {first} writes {_element(overlap)}, "
        f"which {second} {what} too{_where(overlap)}. A GPU runs a launch's threads at "
        "once (the interpreter runs them one after another), so the result would depend "
        "on their timing. Give each thread elements of its own, update the element "
        f"atomically ({memref_dialect.AtomicRMWOp.name}), combine the values with a "
        f"reduction ({gpu.AllReduceOp.name}), or {order}"
    )


def _thread(ids: tuple[int, ...]) -> str:
    block, thread = ids[:3], ids[3:]
    return f"thread ({', '.join(map(str, thread))}) of block ({', '.join(map(str, block))})"


def _element(overlap: Overlap) -> str:
    memref = value_name(overlap.memref, f"a {overlap.memref.type}")
    return f"{memref}[{', '.join(map(str, overlap.element))}]"
