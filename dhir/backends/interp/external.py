"""Calls of functions the module declares without a body, run from the files the program
links (`--link`, `-l`; dhir.toolchain.linking) loaded with ctypes, by MLIR's calling
convention as native code calls them (docs/commands.md, "Calling your own code"): so the
interpreter, the reference every backend is held to, runs such programs too.

The files are linked into one shared library as the native backend links them into its
executable (objects must be position-independent: `-fPIC`), so that a name several
define resolves as it does there. A memref
passes as its descriptor (a pointer to it with `llvm.emit_c_interface`, else its fields
one by one), pointing into the interpreter's own arrays, so what the function writes is
what the task sees.

Such code runs in the process that calls it, so a run that may call it forks and
interprets in the child (dhir.backends.interp.apart): code that crashes, ends the
process or never returns then ends the child, and a `CallRecord` in memory the parent
shares tells it which call and task that was.
"""

import ctypes
import ctypes.util
import mmap
import struct
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
    UnrankedMemRefType,
)
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues
from xdsl.ir import Attribute, Operation

from dhir.backends.function_names import MPI_CLOCKS
from dhir.backends.interp.core import INDEX_WIDTH, fail
from dhir.backends.interp.memref import base_array
from dhir.backends.interp.scalars import wrap
from dhir.backends.interp.written import mark
from dhir.dialects import func
from dhir.dialects.dhir import TaskOp
from dhir.dialects.llvm import LLVMPointerType
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.ir.tasks import task_ids
from dhir.toolchain.linking import (
    C_INTERFACE,
    C_INTERFACE_PREFIX,
    INTERP_SYSTEM,
    RUNNER_UTILS,
    LinkInputs,
    is_shared,
    missing_symbol_hint,
    position_independent_hint,
    runtime_library_hint,
    undefined_function,
)
from dhir.toolchain.tools import LLVM_LIB_DIR, find_llvm_tools

_FLOATS: dict[type[Attribute], type[Any]] = {
    Float32Type: ctypes.c_float,
    Float64Type: ctypes.c_double,
}
# Narrow ones widened as native code widens them (dhir-c-abi): i1 as bool, i8 and i16 by
# their sign.
_INTS: dict[int, type[Any]] = {
    1: ctypes.c_bool,
    8: ctypes.c_int8,
    16: ctypes.c_int16,
    32: ctypes.c_int32,
    64: ctypes.c_int64,
}


@dataclass
class Libraries:
    """The loaded files, searched in order for a symbol."""

    handles: list[ctypes.CDLL]
    searched: tuple[str, ...] = ()  # the user's files, in order, for messages

    def symbol(self, name: str) -> Any | None:
        for handle in self.handles:
            try:
                return getattr(handle, name)
            except AttributeError:
                continue
        return None


def link_shared(link: LinkInputs, folder: Path, symbols: Iterable[str]) -> Path:
    """`link`'s files and libraries linked in `folder` into one shared library, as the
    native backend links them into its executable: loaded, the loader then finds a symbol
    where the executable finds it (the objects and the archive members that define
    `symbols`, then the shared libraries in command-line order, then libm, MLIR's runner
    utils and libc)."""
    link.check_names()  # what the native backend refuses (a `sqrt` of the user's, ...)
    return _shared_from(link, folder, symbols)


def load(shared: Path, searched: tuple[str, ...] = ()) -> Libraries:
    """The library `link_shared` made of the files `searched`, loaded (which runs its
    constructors), then MLIR's runner utils."""
    try:
        return Libraries([ctypes.CDLL(str(shared)), *_runner_utils()], searched)
    except OSError as error:
        # The loader names the library by the path it was opened through (/proc/self/fd/N).
        said = str(error).replace(f"{shared}: ", "", 1)
        files = f" ({', '.join(searched)})" if searched else ""
        hint = runtime_library_hint(said) or missing_symbol_hint(said)
        message = f"the interpreter cannot load the code the program links{files}: {said}{hint}"
        raise DhirError([Diagnostic(message)]) from None


def system_libraries() -> Libraries:
    """libm, MLIR's runner utils and libc, which native code links without being asked
    (what a run that links no file resolves names from)."""
    return Libraries([_system_library("m"), *_runner_utils(), _system_library("c")])


@cache
def _runner_utils() -> tuple[ctypes.CDLL, ...]:
    """MLIR's runner utils (printF64, rtclock, ...), where native code finds them: a
    program declaring one runs on both backends. None where LLVM's folder lacks them."""
    found = [sorted(LLVM_LIB_DIR.glob(pattern))[-1:] for pattern in RUNNER_UTILS]
    try:
        return tuple(ctypes.CDLL(str(path)) for paths in found for path in paths)
    except OSError:
        return ()


@cache
def _system_library(name: str) -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library(name) or f"lib{name}.so.6")


def _shared_from(link: LinkInputs, folder: Path, symbols: Iterable[str]) -> Path:
    target = folder / "linked.so"
    # The program's calls pull archive members in, as they do in the executable.
    wanted = [word for symbol in symbols for word in ("-Xlinker", f"--undefined={symbol}")]
    # Each -l library by the file found for it, where the linker finds it: one without a
    # soname is then loaded by that path, not taken for one of its name loaded before.
    paths = [*link.files, *link.found]
    rpaths = [f"-Wl,-rpath,{path.parent}" for path in paths if is_shared(path)]
    clang = str(find_llvm_tools().clang)
    # libm, as native code always links it (clang adds libc after it, as there).
    command = [clang, "-shared", "-o", str(target), *wanted, *map(str, paths), *rpaths, "-lm"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise _link_error(link, done.stderr)
    return target


def _link_error(link: LinkInputs, stderr: str) -> DhirError:
    tail = "\n".join(stderr.strip().splitlines()[-10:])
    hint = position_independent_hint(stderr)
    names = ", ".join(map(str, (*link.files, *link.found)))
    message = f"the interpreter links {names} into a shared library to call them, and "
    return DhirError([Diagnostic(f"{message}clang failed{hint}:\n{tail}")])


class ExternalCalls(InterpreterFunctions):
    """No op's functions: the key a run keeps its loaded libraries and its call record
    under."""


def use(interpreter: Interpreter, libraries: Libraries | None, record: "CallRecord") -> None:
    """Calls made by `interpreter` from now on find their functions in `libraries` (None:
    libm, MLIR's runner utils and libc alone) and are written to `record`."""
    if libraries is not None:
        interpreter.set_data(ExternalCalls, "libraries", libraries)
    interpreter.set_data(ExternalCalls, "record", record)


def declared_symbols(module: ModuleOp) -> list[str]:
    """The C symbols of the functions `module` declares without a body."""
    return [
        _symbol(op) for op in module.walk() if isinstance(op, func.FuncOp) and op.is_declaration
    ]


def _symbol(callee: func.FuncOp) -> str:
    name = callee.sym_name.data
    return f"{C_INTERFACE_PREFIX}{name}" if C_INTERFACE in callee.attributes else name


def call_external(
    interpreter: Interpreter, op: func.CallOp, callee: func.FuncOp, args: PythonValues
) -> PythonValues:
    """`callee` (a declaration) called on `args` from the linked files."""
    name = callee.sym_name.data
    c_interface = C_INTERFACE in callee.attributes
    libraries = interpreter.get_data(ExternalCalls, "libraries", system_libraries)
    function = libraries.symbol(_symbol(callee))
    record: CallRecord | None = interpreter.get_data(ExternalCalls, "record", lambda: None)
    if function is None and name in MPI_CLOCKS:  # as native code, which links MPI
        return (_mpi_clock(name),)
    if function is None:
        task = record.task_name(op) if record is not None else None
        searched = libraries.searched
        fail(op, undefined_function(name, task, searched, INTERP_SYSTEM, c_interface))
    outputs = callee.function_type.outputs.data
    if len(outputs) > 1 or any(not _is_scalar(type_) for type_ in outputs):
        returned = ", ".join(str(type_) for type_ in outputs)
        fail(
            op,
            f"calls {name}, which returns {returned}: the interpreter takes one i1, i8 to "
            "i64, index, f32, f64 or !llvm.ptr result from a linked function, or none "
            "(ctypes has no f16 or bf16); return the value through a memref, or run natively",
        )
    argtypes: list[Any] = []
    values: list[Any] = []
    bf16 = Bf16Buffers()
    for type_, value in zip(callee.function_type.inputs.data, args, strict=True):
        if isinstance(type_, MemRefType):
            _memref(op, value, c_interface, argtypes, values, bf16 if _is_bf16(type_) else None)
        else:
            kind = _scalar(op, type_)
            argtypes.append(kind)
            values.append(_to_c(type_, value))
    function.argtypes = argtypes
    function.restype = _scalar(op, outputs[0]) if outputs else None
    if record is None:
        result = function(*values)
    else:
        record.enter(op)
        try:
            result = function(*values)
        finally:
            record.leave()
    bf16.write_back()
    for value in args:  # C may have written any of it: assume it wrote all
        if isinstance(value, np.ndarray):
            mark(value)
    return (_from_c(outputs[0], result),) if outputs else ()


def _mpi_clock(name: str) -> float:
    """MPI_Wtime's seconds or MPI_Wtick's resolution (the declaration's type, () -> f64,
    is checked before any run): read from a monotonic clock, as MPI's are."""
    if name == "MPI_Wtick":
        return time.get_clock_info("monotonic").resolution
    return time.monotonic()


# What a call record holds, as int64s: whether a call of linked code is under way (1) or
# not (0), the number of the call op last entered and of its task (-1: none or unknown).
_RECORD = struct.Struct("=3q")
_IN_CALL = struct.Struct("=q")


@dataclass(frozen=True)
class RecordedCall:
    """What a `CallRecord` last saw: `call` (None before any), whether it had not
    returned, and the task it was called in."""

    call: func.CallOp | None
    under_way: bool
    task: TaskOp | None
    task_name: str | None


class CallRecord:
    """Which call of linked code a run is in, in memory shared with the process that
    started the run, which reads it once the process making the calls has died. Numbers
    stand for the ops: both processes hold the module as it was when the run forked.
    Entering a call costs a dict lookup or two and one store."""

    def __init__(self, module: ModuleOp, running: list[Operation]) -> None:
        self.memory = mmap.mmap(-1, _RECORD.size)
        _RECORD.pack_into(self.memory, 0, 0, -1, -1)
        self._calls = [op for op in module.walk() if isinstance(op, func.CallOp)]
        self._call_numbers: dict[Operation, int] = {op: k for k, op in enumerate(self._calls)}
        self._names = task_ids(module)
        self._tasks = list(self._names)
        self._task_numbers = {task: k for k, task in enumerate(self._tasks)}
        self._task_of: dict[Operation, int] = {}
        self._running = running  # the ops being run, innermost last (a task of a caller)

    def enter(self, call: Operation) -> None:
        number = self._call_numbers.get(call, -1)
        _RECORD.pack_into(self.memory, 0, 1, number, self._task_number(call))

    def leave(self) -> None:
        _IN_CALL.pack_into(self.memory, 0, 0)

    def read(self) -> RecordedCall:
        under_way, call, task = _RECORD.unpack_from(self.memory)
        found = self._calls[call] if 0 <= call < len(self._calls) else None
        owner = self._tasks[task] if 0 <= task < len(self._tasks) else None
        name = self._names[owner] if owner is not None else None
        return RecordedCall(found, bool(under_way), owner, name)

    def task_name(self, call: Operation) -> str | None:
        """The name of the task `call` is run for (dhir.ir.tasks.task_ids), if any."""
        number = self._task_number(call)
        return self._names[self._tasks[number]] if number >= 0 else None

    def _task_number(self, call: Operation) -> int:
        """The task `call` is in: the one around it, else (a function a task calls) the
        innermost task being run."""
        if call not in self._task_of:
            parent = call.parent_op()
            while parent is not None and not isinstance(parent, TaskOp):
                parent = parent.parent_op()
            self._task_of[call] = -1 if parent is None else self._task_numbers.get(parent, -1)
        if self._task_of[call] >= 0:
            return self._task_of[call]
        for op in reversed(self._running):
            if isinstance(op, TaskOp):
                return self._task_numbers.get(op, -1)
        return -1


@dataclass
class Bf16Buffers:
    """The interpreter holds bf16 in float32 (dhir.backends.interp.core.value_dtype), but C
    reads and writes a bf16 memref's 16-bit elements, as native code holds them: each
    buffer passed goes as a copy of its values' bits (the top half of each float32, exact
    since the values are bf16's), made once per call so that two views of one buffer still
    share it, and copied back after the call."""

    copies: dict[int, tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict[int, tuple[np.ndarray, np.ndarray]]
    )

    def bits(self, op: Operation, base: np.ndarray) -> np.ndarray:
        if id(base) not in self.copies:
            if base.dtype != np.float32 or not base.flags.c_contiguous:
                fail(op, "passes a bf16 memref the interpreter does not hold as one buffer")
            bits = (base.view(np.uint32) >> 16).astype(np.uint16)
            self.copies[id(base)] = (base, bits)
        return self.copies[id(base)][1]

    def write_back(self) -> None:
        for base, bits in self.copies.values():
            base.view(np.uint32)[...] = bits.astype(np.uint32) << 16


def _is_bf16(type_: MemRefType[Attribute]) -> bool:
    return isinstance(type_.element_type, BFloat16Type)


def _memref(
    op: Operation,
    array: object,
    c_interface: bool,
    argtypes: list[Any],
    values: list[Any],
    bf16: Bf16Buffers | None,
) -> None:
    if not isinstance(array, np.ndarray):
        fail(op, "passes a memref the interpreter does not hold as an array")
    base, offset, sizes, strides = _descriptor(array)
    if bf16 is not None:
        base = bf16.bits(op, base_array(array)).ctypes.data
    if not c_interface:
        argtypes += [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        argtypes += [ctypes.c_int64] * (2 * array.ndim)
        values += [base, base, offset, *sizes, *strides]
        return
    row = ctypes.c_int64 * array.ndim
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p)]
    fields += [("offset", ctypes.c_int64), ("sizes", row), ("strides", row)]
    descriptor = type("Descriptor", (ctypes.Structure,), {"_fields_": fields})
    argtypes.append(ctypes.POINTER(descriptor))
    # byref keeps the descriptor alive through the call.
    values.append(ctypes.byref(descriptor(base, base, offset, row(*sizes), row(*strides))))


def _descriptor(array: np.ndarray) -> tuple[int, int, list[int], list[int]]:
    """The base address, offset, sizes and strides (in elements) of `array`'s view."""
    size = array.itemsize
    base = base_array(array).ctypes.data
    offset = (array.ctypes.data - base) // size
    return base, offset, list(array.shape), [stride // size for stride in array.strides]


def _is_scalar(type_: Attribute) -> bool:
    return isinstance(type_, IndexType | IntegerType | LLVMPointerType) or type(type_) in _FLOATS


def _scalar(op: Operation, type_: Attribute) -> type[Any]:
    if isinstance(type_, IndexType):
        return ctypes.c_int64
    if isinstance(type_, LLVMPointerType):
        # An address the program only passes on (to free, or to C of its own), as native
        # code does: no op of the interpreter reads through it.
        return ctypes.c_void_p
    if isinstance(type_, IntegerType) and type_.width.data in _INTS:
        return _INTS[type_.width.data]
    if type(type_) in _FLOATS:
        return _FLOATS[type(type_)]
    unranked = (
        " (not an unranked memref<*x...>: cast it to a memref of its rank, or run natively)"
        if isinstance(type_, UnrankedMemRefType)
        else ""
    )
    fail(
        op,
        f"passes {type_} to a linked function: the interpreter passes i1, i8 to i64, index, "
        f"f32, f64, !llvm.ptr and memrefs of a known rank{unranked}",
    )


def _to_c(type_: Attribute, value: Any) -> Any:
    if isinstance(type_, IntegerType) and type_.width.data == 1:
        return bool(value & 1)
    return value


def _from_c(type_: Attribute, value: Any) -> Any:
    if isinstance(type_, LLVMPointerType):
        return int(value or 0)  # ctypes gives None for a null pointer
    if isinstance(type_, IndexType):
        return wrap(int(value), INDEX_WIDTH)
    if isinstance(type_, IntegerType):
        return wrap(int(value), type_.width.data)
    return float(value)
