"""Which ops reach MPI or dhir's runtime, which must never run on several threads at once.

dhir's main initialises MPI with `MPI_THREAD_FUNNELED`: only the main thread may call it,
and dhir's runtime keeps per-rank state (request slots, the current task) without locks.
So a parallel loop that reaches either must not run on OpenMP threads
(dhir/transforms/serial_loops.py makes it sequential).

An op *communicates* when it is or holds a `dhir.schedule` or `dhir.task` (they lower to
messages and runtime calls), an `mpi` or `gpu` op (GPU ops lower to dhir's GPU runtime),
a call that is not a plain `func.call`, or a `func.call` of a function that communicates. A
function communicates when its body does, or when it has no body in the module and is not
one of the C math library's functions, which touch neither MPI nor dhir's runtime: an
unknown external function may call either, so it is assumed to.
"""

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir.dialects import func
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.calls import callers_of, through_callers

_MATH = (
    "sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 expm1 log "
    "log2 log10 log1p pow sqrt cbrt hypot fabs floor ceil round trunc rint fmod remainder "
    "copysign fma fmin fmax erf erfc tgamma"
).split()
# libm's functions in double and float precision (dhir-accurate-math declares some).
THREAD_SAFE_EXTERNALS = frozenset([*_MATH, *(name + "f" for name in _MATH)])
_DIALECTS = frozenset({"mpi", "gpu"})
_OTHER_CALLS = frozenset({"func.call_indirect", "llvm.call", "llvm.invoke"})


def communicating_functions(module: ModuleOp) -> set[str]:
    """The names of `module`'s functions that communicate (see the module's docstring)."""
    callers = callers_of(module)
    found: list[str] = []
    for function in (f for f in module.body.block.ops if isinstance(f, func.FuncOp)):
        name = function.sym_name.data
        if function.is_declaration:
            direct = name not in THREAD_SAFE_EXTERNALS
        else:
            direct = any(_communicates_itself(op) for op in function.body.walk())
        if direct:
            found.append(name)
    defined = {f.sym_name.data for f in module.body.block.ops if isinstance(f, func.FuncOp)}
    # A callee the module does not define is as unknown as an external one.
    found += [callee for callee in callers if callee not in defined]
    return set(through_callers(dict.fromkeys(found), callers))


def communicates(op: Operation, functions: set[str]) -> bool:
    """Whether `op` or an op nested in it communicates; `functions`: those of the module
    that do (`communicating_functions`)."""
    for inner in op.walk():
        if isinstance(inner, func.CallOp):
            if inner.callee.string_value() in functions:
                return True
        elif _communicates_itself(inner):
            return True
    return False


def _communicates_itself(op: Operation) -> bool:
    return (
        isinstance(op, ScheduleOp | TaskOp)
        or op.dialect_name() in _DIALECTS
        or op.name in _OTHER_CALLS
    )
