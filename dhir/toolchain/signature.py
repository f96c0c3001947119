"""The entry function's arguments as data: what a backend needs to pass inputs in
and bring results out, and the checks that give users clear errors."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Attribute

from dhir.dialects.dhir import walk_outside_tasks
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of

DYNAMIC = -1


@dataclass(frozen=True)
class ArgSpec:
    """One entry argument: a memref (shape, DYNAMIC for `?`) or a scalar (shape None)."""

    index: int
    mlir_type: str
    dtype: np.dtype
    shape: tuple[int, ...] | None

    @property
    def is_memref(self) -> bool:
        return self.shape is not None


@dataclass(frozen=True)
class EntrySignature:
    name: str
    args: tuple[ArgSpec, ...]


def numpy_dtype(element: Attribute) -> np.dtype | None:
    match element:
        case IndexType():
            return np.dtype(np.int64)
        case IntegerType(width=width) if width.data == 1:
            return np.dtype(np.bool_)
        case IntegerType(width=width) if width.data in (8, 16, 32, 64):
            return np.dtype(f"int{width.data}")
        case Float16Type():
            return np.dtype(np.float16)
        case Float32Type():
            return np.dtype(np.float32)
        case Float64Type():
            return np.dtype(np.float64)
    return None


def entry_signature(module: ModuleOp, entry: str) -> EntrySignature:
    function = _find_entry(module, entry)
    args = tuple(_arg_spec(function, k, t) for k, t in enumerate(function.function_type.inputs))
    if function.function_type.outputs.data:
        raise DhirError(
            [
                Diagnostic(
                    f"entry function @{entry} returns values; dhir runs entries that return "
                    "nothing and reads results from their memref arguments",
                    loc_of(function),
                )
            ]
        )
    return EntrySignature(entry, args)


def _find_entry(module: ModuleOp, entry: str) -> func.FuncOp:
    functions = [op for op in walk_outside_tasks(module) if isinstance(op, func.FuncOp)]
    for function in functions:
        if function.sym_name.data == entry:
            if function.is_declaration:
                raise DhirError(
                    [Diagnostic(f"entry function @{entry} has no body", loc_of(function))]
                )
            return function
    names = ", ".join(f"@{f.sym_name.data}" for f in functions if not f.is_declaration)
    raise DhirError(
        [
            Diagnostic(
                f"no function @{entry} to run; the module defines {names or 'no functions'}"
                " (choose one with --entry)"
            )
        ]
    )


def _arg_spec(function: func.FuncOp, index: int, type_: Attribute) -> ArgSpec:
    element = type_.element_type if isinstance(type_, MemRefType) else type_
    dtype = numpy_dtype(element)
    if dtype is None or (isinstance(type_, MemRefType) and not _identity_layout(type_)):
        raise DhirError(
            [
                Diagnostic(
                    f"argument #{index} of @{function.sym_name.data} has type {type_}; entry "
                    "arguments must be memrefs with the default layout, or scalars, of "
                    "i1/i8/i16/i32/i64/index/f16/f32/f64",
                    loc_of(function),
                )
            ]
        )
    if isinstance(type_, MemRefType):
        shape = tuple(DYNAMIC if d == DYNAMIC_INDEX else d for d in type_.get_shape())
        return ArgSpec(index, str(type_), dtype, shape)
    return ArgSpec(index, str(type_), dtype, None)


def _identity_layout(type_: MemRefType) -> bool:
    from xdsl.dialects.builtin import NoneAttr

    return isinstance(type_.layout, NoneAttr) and isinstance(type_.memory_space, NoneAttr)


def check_inputs(signature: EntrySignature, inputs: list[object]) -> list[np.ndarray]:
    """Inputs as arrays (0-d for scalars) of the right dtype and shape, or a DhirError."""
    if len(inputs) != len(signature.args):
        raise DhirError(
            [
                Diagnostic(
                    f"@{signature.name} takes {len(signature.args)} arguments, {len(inputs)} given"
                )
            ]
        )
    return [
        _check_input(spec, value, signature.name) for spec, value in zip(signature.args, inputs)
    ]


def _check_input(spec: ArgSpec, value: object, entry: str) -> np.ndarray:
    where = f"argument #{spec.index} of @{entry} ({spec.mlir_type})"
    if not spec.is_memref:
        if isinstance(value, np.ndarray) and value.ndim != 0:
            raise DhirError(
                [Diagnostic(f"{where} is a scalar, but an array of shape {value.shape} was given")]
            )
        try:
            array = np.asarray(value, dtype=spec.dtype)
        except (TypeError, ValueError, OverflowError):
            raise DhirError(
                [Diagnostic(f"{where}: cannot use {value!r} as {spec.mlir_type}")]
            ) from None
        return array
    if not isinstance(value, np.ndarray):
        raise DhirError(
            [Diagnostic(f"{where} is a memref; give a NumPy array, not {type(value).__name__}")]
        )
    assert spec.shape is not None
    shape_ok = len(value.shape) == len(spec.shape) and all(
        want in (DYNAMIC, got) for want, got in zip(spec.shape, value.shape)
    )
    if not shape_ok or value.dtype != spec.dtype:
        want_shape = "x".join("?" if d == DYNAMIC else str(d) for d in spec.shape)
        raise DhirError(
            [
                Diagnostic(
                    f"{where} needs an array of shape ({want_shape}) and dtype {spec.dtype}, "
                    f"got shape {value.shape} and dtype {value.dtype}"
                )
            ]
        )
    return np.ascontiguousarray(value).copy()


def save_outputs(results: list[np.ndarray], signature: EntrySignature, directory: Path) -> None:
    """Memref argument K's final value to DIR/argK.npy, as rank 0 does natively."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for spec, array in zip(signature.args, results, strict=True):
            if spec.is_memref:
                np.save(directory / f"arg{spec.index}.npy", array)
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot write results to {directory}: {error}")]) from None
