"""Whether a rank's parallel loops and linalg ops run on its OpenMP threads, as the native
backend builds the module: one answer that the build, the cost model
(dhir.placement.from_ir) and dhir-split's piece sizes (`split_tasks.piece_rates`) all take,
so that a task is timed on the threads it gets.

The build decides in two steps. `openmp_safe` first (results must equal the sequential
interpreter's bit for bit); then, after dhir-time-tiles and with dhir-optimize-bodies in
view, `decide_threads` drops the "yes" where nothing it rested on is left: no parallel
loop or linalg op at all, or, where linalg ops alone made it say yes, none of them (the
optimizer writes a contraction and its fills as loops, whose rows then run in order, as
the loops written by hand do). The answer is kept on the module (`THREADS_ATTR`) for the
passes that follow; without it, `runs_on_threads` says what `openmp_safe` says.
"""

from collections.abc import Callable

from xdsl.dialects.builtin import AnyFloat, IntegerAttr, ModuleOp, i1

from dhir.analysis.communication import communicates, communicating_functions
from dhir.analysis.sharing import aliased_arguments, may_alias, memory_of
from dhir.dialects import affine, func, memref, scf
from dhir.dialects.dhir import TaskOp
from dhir.dialects.gpu import in_device_code
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.dialects.memref import ATOMIC_RMW_KINDS, GenericAtomicRMWOp
from dhir.ir.tasks import PARALLEL_LOOPS, THREADED_KINDS
from dhir.ir.walk import find_ops, holds_op

# The build's decision, kept on the module between dhir-time-tiles and the lowering.
THREADS_ATTR = "dhir.threads"

# Kinds whose result depends on the order of the updates: float sums and products
# round in between, and the last `assign` wins; of several NaNs, maxnumf and minnumf
# keep the last (and their plain form needs one thread anyway).
_ORDERED = ("addf", "mulf", "assign", "maxnumf", "minnumf")


def runs_on_threads(module: ModuleOp) -> bool:
    """Whether `module`'s parallel loops and linalg ops run on its ranks' OpenMP threads:
    the decision `decide_threads` kept on it, else `openmp_safe`'s."""
    kept = module.attributes.get(THREADS_ATTR)
    if isinstance(kept, IntegerAttr):
        return bool(kept.value.data)
    return openmp_safe(module)


def task_runs_on_threads(task: TaskOp, threads: bool) -> bool:
    """Whether `task` runs on its rank's threads in a module whose answer is `threads`
    (`runs_on_threads`): where it holds an op that runs on them (THREADED_KINDS)."""
    return threads and holds_op(task, THREADED_KINDS)


def decide_threads(
    module: ModuleOp, safe: bool, loops: bool, linalg_left: Callable[[], bool]
) -> bool:
    """Keep on `module` (after dhir-time-tiles) whether it is built with OpenMP, and say
    it: `safe`, `openmp_safe`'s answer before the time tiles, and `loops`, whether a
    parallel loop was among its reasons; `linalg_left`: whether a linalg op will be left
    once dhir-optimize-bodies has run (as the build runs it)."""
    threads = safe and (holds_op(module, THREADED_KINDS) if loops else linalg_left())
    module.attributes[THREADS_ATTR] = IntegerAttr(int(threads), i1)
    return threads


def forget_threads(module: ModuleOp) -> None:
    """Drop the kept decision (before the module is printed for mlir-opt)."""
    module.attributes.pop(THREADS_ATTR, None)


def has_parallel_loops(module: ModuleOp) -> bool:
    """Whether `module` holds an scf.parallel or affine.parallel (`decide_threads`'s
    `loops`, with `openmp_safe`'s yes)."""
    return holds_op(module, PARALLEL_LOOPS)


def openmp_safe(module: ModuleOp) -> bool:
    """Whether to run parallel loops on threads: when there are any, none reduces
    floats, whose sum would then depend on the thread count, and no linalg op reaches
    MPI. (Results must equal the sequential interpreter's bit for bit; such modules run
    their loops sequentially.) Nor with a float `generic_atomic_rmw` in host code, which
    dhir-float-atomics makes a plain load and store. Other loops that reach MPI run
    sequentially: see dhir-serial-loops. Nor with an atomic update whose result depends
    on the order of the updates (`ordered_atomics`: float sums, assign), with a call
    passing views of one buffer as two arguments, or a linalg op whose output may share
    memory with an input: threads would take apart what the program does in order."""
    # One walk for every kind asked about (each walk of a large module costs 50 ms).
    found = find_ops(module, _OPENMP_KINDS)
    atomic = any(isinstance(op, memref.AtomicRMWOp | GenericAtomicRMWOp) for op in found)
    # Every host generic_atomic_rmw (the float ones among them) is ordered.
    if atomic and ordered_atomics(module):
        return False
    calls = (op for op in found if isinstance(op, func.CallOp))
    if any(aliased_arguments(call) for call in calls):
        return False
    parallel = False
    linalg: list[LinalgStructuredOperation] = []
    for op in found:
        if isinstance(op, scf.ParallelOp):
            parallel = True
            if any(isinstance(v.type, AnyFloat) for v in op.initVals):
                return False
        elif isinstance(op, affine.ParallelOp):
            parallel = True
            if any(isinstance(t, AnyFloat) for t in op.result_types):
                return False
        elif isinstance(op, LinalgStructuredOperation):
            parallel = True
            linalg.append(op)
            outputs = memory_of(op.outputs)
            if any(may_alias(v, outputs) for v in op.inputs):  # threads would race
                return False
    return parallel and not _linalg_communicates(module, linalg)


_OPENMP_KINDS = (memref.AtomicRMWOp, GenericAtomicRMWOp, func.CallOp, *THREADED_KINDS)


def ordered_atomics(module: ModuleOp) -> bool:
    """Whether host code holds an atomic update whose result depends on the order of the
    updates (an atomic_rmw of an `_ORDERED` kind, any generic_atomic_rmw): threads would
    make it differ from the program's order."""
    for op in find_ops(module, (memref.AtomicRMWOp, GenericAtomicRMWOp)):
        if in_device_code(op):
            continue
        if isinstance(op, GenericAtomicRMWOp):
            return True
        if ATOMIC_RMW_KINDS[op.kind.value.data] in _ORDERED:
            return True
    return False


def _linalg_communicates(module: ModuleOp, ops: list[LinalgStructuredOperation]) -> bool:
    """Whether a linalg op's body reaches MPI or the runtime (a call of a function holding
    a schedule): OpenMP would run it on threads, and dhir-serial-loops, which keeps such
    scf and affine loops sequential, cannot reach the loops linalg becomes."""
    if not ops:
        return False
    functions = communicating_functions(module)
    return any(communicates(op, functions) for op in ops)
