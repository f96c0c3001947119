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
"""

import ctypes
import ctypes.util
import subprocess
import tempfile
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
)
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues
from xdsl.ir import Attribute, Operation

from dhir.backends.interp.core import INDEX_WIDTH, fail
from dhir.backends.interp.memref import base_array
from dhir.backends.interp.scalars import wrap
from dhir.dialects import func
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain.linking import C_INTERFACE, C_INTERFACE_PREFIX, LinkInputs, is_shared
from dhir.toolchain.tools import find_llvm_tools

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

    def symbol(self, name: str) -> Any | None:
        for handle in self.handles:
            try:
                return getattr(handle, name)
            except AttributeError:
                continue
        return None


def load(link: LinkInputs, folder: Path, symbols: Iterable[str]) -> Libraries:
    """`link`'s files and libraries linked in `folder` into one shared library, as the
    native backend links them into its executable, and loaded: the loader then finds a
    symbol where the executable finds it (the objects and the archive members that define
    `symbols`, then the shared libraries in command-line order, then libm and libc)."""
    link.check_names()  # what the native backend refuses (a `sqrt` of the user's, ...)
    return Libraries([ctypes.CDLL(str(_shared_from(link, folder, symbols)))])


def system_libraries() -> Libraries:
    """libm and libc, which native code links without being asked (what a run that links
    no file resolves names from)."""
    return Libraries([_system_library("m"), _system_library("c")])


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
    hint = " (compile objects with -fPIC)" if "-fPIC" in stderr else ""
    names = ", ".join(map(str, (*link.files, *link.found)))
    message = f"the interpreter links {names} into a shared library to call them, and "
    return DhirError([Diagnostic(f"{message}clang failed{hint}:\n{tail}")])


class ExternalCalls(InterpreterFunctions):
    """No op's functions: the key a run keeps its loaded libraries under."""


def attach(
    interpreter: Interpreter, module: ModuleOp, link: LinkInputs
) -> tempfile.TemporaryDirectory[str]:
    """Load `link` for the calls `module`'s run by `interpreter` makes; the returned
    folder holds what was built for it (remove it once the run ends)."""
    folder = tempfile.TemporaryDirectory(prefix="dhir-interp-link-")
    libraries = load(link, Path(folder.name), declared_symbols(module))
    interpreter.set_data(ExternalCalls, "libraries", libraries)
    return folder


def declared_symbols(module: ModuleOp) -> list[str]:
    """The C symbols of the functions `module` declares without a body."""
    return [
        _symbol(op) for op in module.walk() if isinstance(op, func.FuncOp) and op.is_declaration
    ]


# C library functions that end or replace the calling process: called in the interpreter
# they would take dhir with them (natively a rank ends, and the run says which).
ENDS_THE_PROCESS = frozenset(
    ("abort", "exit", "_exit", "_Exit", "quick_exit", "raise", "kill", "execv", "execve",
     "execvp", "execl", "execlp", "execle", "pthread_exit", "longjmp", "siglongjmp")
)  # fmt: skip


def _symbol(callee: func.FuncOp) -> str:
    name = callee.sym_name.data
    return f"{C_INTERFACE_PREFIX}{name}" if C_INTERFACE in callee.attributes else name


def call_external(
    interpreter: Interpreter, op: func.CallOp, callee: func.FuncOp, args: PythonValues
) -> PythonValues:
    """`callee` (a declaration) called on `args` from the linked files."""
    name = callee.sym_name.data
    if name in ENDS_THE_PROCESS:
        fail(
            op,
            f"calls {name}, which ends the process it runs in: the interpreter runs in "
            "dhir's own, which would die without a word; run the program natively, where "
            "dhir reports the rank that ended and the task",
        )
    c_interface = C_INTERFACE in callee.attributes
    libraries = interpreter.get_data(ExternalCalls, "libraries", system_libraries)
    function = libraries.symbol(_symbol(callee))
    if function is None:
        fail(
            op,
            f"calls {name}, which no file the program links defines; pass the file that "
            "does with --link FILE or -l NAME (dhir.run: link=[...])",
        )
    outputs = callee.function_type.outputs.data
    if len(outputs) > 1 or any(not _is_scalar(type_) for type_ in outputs):
        returned = ", ".join(str(type_) for type_ in outputs)
        fail(
            op,
            f"calls {name}, which returns {returned}: the interpreter takes one i1, i8 to "
            "i64, index, f32 or f64 result from a linked function, or none (ctypes has no "
            "f16 or bf16); return the value through a memref, or run natively",
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
    result = function(*values)
    bf16.write_back()
    return (_from_c(outputs[0], result),) if outputs else ()


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
    return isinstance(type_, IndexType | IntegerType) or type(type_) in _FLOATS


def _scalar(op: Operation, type_: Attribute) -> type[Any]:
    if isinstance(type_, IndexType):
        return ctypes.c_int64
    if isinstance(type_, IntegerType) and type_.width.data in _INTS:
        return _INTS[type_.width.data]
    if type(type_) in _FLOATS:
        return _FLOATS[type(type_)]
    fail(
        op,
        f"passes {type_} to a linked function: the interpreter passes i1, i8 to i64, index, "
        "f32, f64 and memrefs",
    )


def _to_c(type_: Attribute, value: Any) -> Any:
    if isinstance(type_, IntegerType) and type_.width.data == 1:
        return bool(value & 1)
    return value


def _from_c(type_: Attribute, value: Any) -> Any:
    if isinstance(type_, IndexType):
        return wrap(int(value), INDEX_WIDTH)
    if isinstance(type_, IntegerType):
        return wrap(int(value), type_.width.data)
    return float(value)
