"""The reference executor (`--backend interp`): runs the entry function in-process on
NumPy arrays with xDSL's interpreter, every `dhir.schedule` as its tasks one by one in
program order. Every other backend is tested against it, bit for bit.

    results = run_interp(dhir.parse_file("examples/proposal.mlir"), "main", [a, b, c])
"""

import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.interpreters.cf import CfFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.ir import Operation
from xdsl.utils.exceptions import InterpretationError

from dhir.analysis.arg_origins import ArgOrigins, note
from dhir.analysis.bounds import EntryBounds
from dhir.backends.function_names import check_linked_callers
from dhir.backends.interp import written
from dhir.backends.interp.apart import run_apart, shared_copy
from dhir.backends.interp.arith import ArithImpls
from dhir.backends.interp.control import ControlImpls
from dhir.backends.interp.core import (
    INDEX_WIDTH,
    MAX_DEPTH,
    RECURSION_LIMIT,
    Named,
    OpStack,
    Trap,
    element,
)
from dhir.backends.interp.external import CallRecord, declared_symbols, link_shared, load, use
from dhir.backends.interp.gpu import GpuImpls
from dhir.backends.interp.index_dialect import IndexImpls
from dhir.backends.interp.linalg import LinalgImpls
from dhir.backends.interp.math_dialect import MathImpls
from dhir.backends.interp.memref import MemrefImpls
from dhir.backends.interp.vector import VectorImpls
from dhir.dialects import func
from dhir.ir.diagnostics import DhirError, Diagnostic, error_at
from dhir.ir.verifier import libm_type
from dhir.toolchain.entry import entry_signature
from dhir.toolchain.linking import C_INTERFACE, LinkInputs
from dhir.toolchain.options import TIMEOUT_HINT, timeout_seconds
from dhir.toolchain.signals import ending_cleanly
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.values import check_inputs

# Linux's names of a process's open files (the child's, once it has forked, are the same).
_OPEN_FILES = Path("/proc/self/fd")


class _TimedOut(BaseException):
    """The run passed its deadline (a BaseException, like Trap, so that it passes
    through xDSL's dispatcher)."""


class _OpStack(OpStack):
    """The ops being run (OpStack), which also stops a run that passes `deadline`
    (time.monotonic()), at the op it was about to run: checked before every op, so an
    endless loop is stopped however it loops, in any thread."""

    def __init__(self, deadline: float | None = None) -> None:
        super().__init__()
        self.deadline = deadline

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        super().will_interpret_op(op, args)
        if written.MADE.partial:
            written.check_uses(op, args)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _TimedOut()


def run_interp(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    timeout: float | None = None,
    link: LinkInputs | None = None,
    results: Mapping[int, int] | None = None,
    bounds: EntryBounds | None = None,
) -> list[np.ndarray]:
    """Run @entry on `inputs` (arrays for memrefs, numbers for scalars); return one array
    per argument: the final contents of each memref, a 0-d array of each scalar. A run
    longer than `timeout` seconds is stopped with a DhirError. Functions the module
    declares without a body run from `link`'s files (dhir.backends.interp.external), in a
    child process (dhir.backends.interp.apart). `results` says which arguments (by index)
    are an entry on tensors' results once bufferized (their result numbers): the entry
    must write every element of them. `bounds`: `entry_bounds(module, entry)`, when
    the caller found it (dhir.runner.check_runnable)."""
    if timeout is not None:
        timeout = timeout_seconds(timeout)  # RunOptions' rule, for callers without them
    signature = entry_signature(module, entry, bounds=bounds)
    arrays = check_inputs(signature, inputs)  # fresh copies: the run writes into them
    # Found as entry_signature finds it (it has checked that it exists and has a body).
    function = next(
        op for op in module.walk() if isinstance(op, func.FuncOp) and op.sym_name.data == entry
    )
    check_linked_callers(module, entry, link)  # as the native backend does
    symbols = declared_symbols(module)
    with _linked(link, symbols) as shared:
        if shared is None and _calls_only_libm(module):  # nothing to crash or hang: run here
            stack = _OpStack(_deadline(timeout))
            interpreter = make_interpreter(module, [stack])
            args, buffers = _args(function, signature, arrays, results)
            _interpret(interpreter, function, args, buffers, stack, timeout)
            return arrays
        searched = link.searched() if link else ()
        return _run_apart(module, function, signature, arrays, timeout, shared, searched, results)


def _run_apart(
    module: ModuleOp,
    function: func.FuncOp,
    signature: EntrySignature,
    arrays: list[np.ndarray],
    timeout: float | None,
    shared: Path | None,
    searched: tuple[str, ...],
    results: Mapping[int, int] | None,
) -> list[np.ndarray]:
    """The run in a child process, on arrays it shares with this one, which are copied
    out once it has ended well (later forks would share them too). `shared`: the linked
    files (`searched`) as one library."""
    arrays = [shared_copy(a) if spec.is_memref else a for spec, a in zip(signature.args, arrays)]
    stack = _OpStack(_deadline(timeout))
    interpreter = make_interpreter(module, [stack])
    record = CallRecord(module, stack.ops)

    def work() -> None:
        use(interpreter, load(shared, searched) if shared is not None else None, record)
        args, buffers = _args(function, signature, arrays, results)
        _interpret(interpreter, function, args, buffers, stack, timeout)

    run_apart(work, record, timeout)
    return [np.array(a) if spec.is_memref else a for spec, a in zip(signature.args, arrays)]


def _calls_only_libm(module: ModuleOp) -> bool:
    """Whether every function `module` declares is one of C's math functions, with its C
    type (a wrong type reads garbage registers: run such a call apart, as any other)."""
    return all(
        libm_type(op.sym_name.data) == str(op.function_type) and C_INTERFACE not in op.attributes
        for op in module.walk()
        if isinstance(op, func.FuncOp) and op.is_declaration
    )


@contextmanager
def _linked(link: LinkInputs | None, symbols: list[str]) -> Iterator[Path | None]:
    """`link`'s files linked into a shared library for the run; None when it links
    nothing. Where Linux names open files in /proc, the run reaches the library through
    a descriptor and its folder is removed at once: a dhir killed outright (SIGKILL,
    which no clean-up outlives) leaves no folder behind in the temporary directory."""
    if not link:
        yield None
        return
    # SIGTERM and SIGHUP unwind through the folder's removal whoever calls (dhir.run and
    # the commands turn them into exceptions themselves; a direct caller died of them).
    with ending_cleanly(redeliver=True):
        with tempfile.TemporaryDirectory(prefix="dhir-interp-link-") as folder:
            shared = link_shared(link, Path(folder), symbols)
            if not _OPEN_FILES.is_dir():
                yield shared
                return
            descriptor = os.open(shared, os.O_RDONLY)  # the forked child inherits it
        try:
            yield _OPEN_FILES / str(descriptor)
        finally:
            os.close(descriptor)


def _deadline(timeout: float | None) -> float | None:
    return time.monotonic() + timeout if timeout is not None else None


def _args(
    function: func.FuncOp,
    signature: EntrySignature,
    arrays: list[np.ndarray],
    results: Mapping[int, int] | None,
) -> tuple[tuple[object, ...], list[np.ndarray]]:
    """The entry's arguments, and the buffers of its results (`results`) among them,
    which start unwritten."""
    args: list[object] = []
    buffers: list[np.ndarray] = []
    for spec, array in zip(signature.args, arrays):
        if results and spec.index in results:
            name = f"result #{results[spec.index]} of @{signature.name}"
            buffers.append(written.result_buffer(function, array, name))
            args.append(buffers[-1])
        else:
            # element(): an f32 NaN that signals stays one, as the native harness passes it.
            args.append(array if spec.is_memref else element(array.reshape(1)[0]))
    return tuple(args), buffers


def _end(function: func.FuncOp) -> Operation:
    """Where `function` ends: its return, the function itself where it has several."""
    returns = [op for op in function.walk() if isinstance(op, func.ReturnOp)]
    return returns[0] if len(returns) == 1 else function


def _interpret(
    interpreter: Interpreter,
    function: func.FuncOp,
    args: tuple[object, ...],
    results: list[np.ndarray],
    stack: "_OpStack",
    timeout: float | None,
) -> None:
    """Run `function` on `args`; a DhirError at the op that failed."""
    limit = sys.getrecursionlimit()
    try:
        # Enough for ~1,600 levels of calls and regions (Python 3.11 keeps its frames
        # off the C stack).
        sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
        # Overflow to inf and NaN from invalid operations are IEEE results, not errors.
        with np.errstate(all="ignore"):
            interpreter.call_op(function, args)
        for result in results:
            written.check_result(_end(function), result)
    except Trap as trap:
        named = _named(interpreter, function, trap.named)
        raise error_at(trap.op, trap.message + named) from None
    except _TimedOut:
        message = f"the interpreter timed out after {timeout:g} s and stopped the run here"
        raise _error_here(stack, message, f"; {TIMEOUT_HINT}") from None
    except RecursionError:
        message = f"nesting deeper than the interpreter's limit of about {MAX_DEPTH}"
        raise _error(stack, message) from None
    except MemoryError as error:
        raise _too_big(stack, str(error) or "out of memory") from None
    except ValueError as error:
        if "array is too big" not in str(error):  # NumPy's for a size past its index range
            raise _error(stack, f"{type(error).__name__}: {error}") from None
        raise _too_big(stack, "more bytes than an array can have") from None
    except InterpretationError as error:
        if "Could not find interpretation function" in str(error) and stack.ops:
            op = stack.ops[-1]
            raise error_at(op, f"'{op.name}' is not supported by the interpreter") from None
        raise _error(stack, str(error)) from None
    except Exception as error:
        raise _error(stack, f"{type(error).__name__}: {error}") from None
    finally:
        sys.setrecursionlimit(limit)


def _named(interpreter: Interpreter, function: func.FuncOp, named: tuple[Named, ...]) -> str:
    """The note naming the entry's arguments that a failed check's sizes and values are,
    as native code's checks end their message (empty where none is one)."""
    if not named:
        return ""
    module = interpreter.module
    if not isinstance(module, ModuleOp):
        return ""
    origins = ArgOrigins(module, function.sym_name.data)
    return note(
        *(
            (words, origins.value(value) if dim is None else origins.size(value, dim))
            for words, value, dim in named
        )
    )


def _error_here(stack: _OpStack, message: str, then: str = "") -> DhirError:
    """`message` at the op the interpreter was running, named after it; then `then`."""
    if not stack.ops:
        return DhirError([Diagnostic(message + then)])
    op = stack.ops[-1]
    return error_at(op, f"{message} (at '{op.name}'){then}")


def _too_big(stack: _OpStack, why: str) -> DhirError:
    """An array larger than this machine's memory: NumPy's MemoryError, which says `why`."""
    message = (
        f"needs an array larger than the interpreter can hold ({why}); it keeps every "
        "array in this machine's memory: run the program with smaller sizes, or with the "
        "native backend"
    )
    if not stack.ops:
        return DhirError([Diagnostic(f"the interpreter {message}")])
    op = stack.ops[-1]
    return error_at(op, f"'{op.name}' {message}")


def _error(stack: _OpStack, message: str) -> DhirError:
    if not stack.ops:
        return DhirError([Diagnostic(f"the interpreter failed: {message}")])
    op = stack.ops[-1]
    return error_at(op, f"'{op.name}' failed in the interpreter: {message}")


__all__ = ["run_interp"]


def make_interpreter(
    module: ModuleOp, listeners: Sequence[Interpreter.Listener] = ()
) -> Interpreter:
    interpreter = Interpreter(module, index_bitwidth=INDEX_WIDTH, listeners=tuple(listeners))
    # From xDSL: func.return and calling func.func, scf.if/while/index_switch and
    # cf.br/cond_br; they pass values on without looking at them.
    for functions in (FuncFunctions(), ScfFunctions(), CfFunctions()):
        interpreter.register_implementations(functions)
    ours = (
        ArithImpls, IndexImpls, MathImpls, MemrefImpls, ControlImpls, GpuImpls, LinalgImpls,
        VectorImpls,
    )  # fmt: skip
    for ours_functions in ours:
        interpreter.register_implementations(ours_functions(), override=True)
    return interpreter
