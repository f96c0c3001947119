"""The entry function of a module, read as an EntrySignature."""

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    Signedness,
    SignednessAttr,
)
from xdsl.ir import Attribute

from dhir.dialects import func
from dhir.dialects.dhir import walk_outside_tasks
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of
from dhir.toolchain.signature import DYNAMIC, ArgSpec, EntrySignature


def numpy_dtype(element: Attribute) -> np.dtype | None:
    match element:
        case IndexType():
            return np.dtype(np.int64)
        case IntegerType(width=width) if width.data == 1:
            return np.dtype(np.bool_)
        case IntegerType(width=width, signedness=SignednessAttr(data=Signedness.UNSIGNED)) if (
            width.data in (8, 16, 32, 64)
        ):
            return np.dtype(f"uint{width.data}")
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
                    "i1/i8/i16/i32/i64/index/f16/f32/f64 (or si/ui integers of 8 to 64 bits)",
                    loc_of(function),
                )
            ]
        )
    name = function.body.blocks[0].args[index].name_hint if function.body.blocks else None
    if isinstance(type_, MemRefType):
        shape = tuple(DYNAMIC if d == DYNAMIC_INDEX else d for d in type_.get_shape())
        return ArgSpec(index, str(type_), dtype, shape, name)
    return ArgSpec(index, str(type_), dtype, None, name)


def _identity_layout(type_: MemRefType) -> bool:
    return isinstance(type_.layout, NoneAttr) and isinstance(type_.memory_space, NoneAttr)
