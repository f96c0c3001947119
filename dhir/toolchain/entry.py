"""The entry function of a module, read as an EntrySignature."""

import json
import re
from dataclasses import replace

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
    TensorType,
)
from xdsl.ir import Attribute

from dhir.analysis.bounds import EntryBounds, entry_bounds, need_message
from dhir.dialects import func
from dhir.dialects.dhir import walk_outside_tasks
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of
from dhir.toolchain.signature import ARG, DYNAMIC, INPUT, RESULT, ArgSpec, EntrySignature


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


def entry_signature(
    module: ModuleOp, entry: str, given_only: bool = False, bounds: EntryBounds | None = None
) -> EntrySignature:
    """The arguments of `entry` as the built program takes them. An entry on tensors is
    bufferized first (dhir.toolchain.tensors): each tensor argument becomes a memref the
    user gives (INPUT), and each result a memref after the arguments (RESULT). With
    `given_only`, the arguments alone, results unchecked: what reads the inputs that an
    entry of dynamic shapes is then specialised to. `bounds`: `entry_bounds(module,
    entry)` as the caller found it already (`check_runnable`), instead of walking the
    entry again."""
    function = find_entry(module, entry)
    inputs, outputs = function.function_type.inputs.data, function.function_type.outputs.data
    specs = [_arg_spec(function, k, t) for k, t in enumerate(inputs)]
    args = _with_needs(module, entry, specs, bounds)
    tensors = on_tensors(function)
    for j, type_ in enumerate(() if given_only else outputs):
        if not tensors or not isinstance(type_, TensorType):
            raise DhirError(
                [
                    Diagnostic(
                        f"entry function @{entry} returns {type_}; dhir runs entries that "
                        "return ranked tensors (written to resK.npy) or nothing (results "
                        "read from their memref arguments)",
                        loc_of(function),
                    )
                ]
            )
        spec = _arg_spec(function, len(inputs) + j, type_, f"result #{j}")
        args.append(replace(spec, name=None, role=RESULT, result=j))
    return EntrySignature(entry, tuple(args))


def _with_needs(
    module: ModuleOp, entry: str, args: list[ArgSpec], bounds: EntryBounds | None
) -> list[ArgSpec]:
    """`args` with the least sizes the accesses of `entry` that surely run need of each
    memref argument's dimensions of dynamic size: checked against the inputs before a
    run, once, where native code checks no access. `bounds`: those accesses, when the
    caller found them already."""
    if not any(spec.shape is not None and DYNAMIC in spec.shape for spec in args):
        return args
    needs = (bounds if bounds is not None else entry_bounds(module, entry)).needs
    if not needs:
        return args
    out = list(args)
    for (arg, dim), need in sorted(needs.items()):
        spec = out[arg]
        out[arg] = replace(spec, needs=(*spec.needs, (dim, need.size, need_message(need))))
    return out


def on_tensors(function: func.FuncOp) -> bool:
    """Whether `function` takes or returns tensors (and is bufferized to run)."""
    types = [*function.function_type.inputs.data, *function.function_type.outputs.data]
    return any(isinstance(t, TensorType) for t in types)


def find_entry(module: ModuleOp, entry: str) -> func.FuncOp:
    """The entry function, or the error `dhir run` gives for one missing or bodiless."""
    functions = [op for op in walk_outside_tasks(module) if isinstance(op, func.FuncOp)]
    for function in functions:
        if function.sym_name.data == entry:
            if function.is_declaration:
                raise DhirError(
                    [Diagnostic(f"entry function @{entry} has no body", loc_of(function))]
                )
            return function
    names = ", ".join(f"@{f.sym_name.data}" for f in functions if not f.is_declaration)
    # With none to choose from, --entry is no help: the program must define one.
    fix = (
        "choose one with --entry, or entry= in dhir.run"
        if names
        else f"write one: func.func {_symbol(entry)}(...) {{ ... }}"
    )
    raise DhirError(
        [
            Diagnostic(
                f"no function {_symbol(entry)} to run; the module defines "
                f"{names or 'no function with a body'} ({fix})"
            )
        ]
    )


_BARE_SYMBOL = re.compile(r"[A-Za-z_][\w$.]*")


def _symbol(name: str) -> str:
    """`name` as MLIR writes a symbol: quoted where it is not bare (`@""`, `@"main "`),
    so that an empty name or one with blanks shows."""
    return f"@{name}" if _BARE_SYMBOL.fullmatch(name) else f"@{json.dumps(name)}"


def _arg_spec(
    function: func.FuncOp, index: int, type_: Attribute, what: str | None = None
) -> ArgSpec:
    shaped = isinstance(type_, (MemRefType, TensorType))
    element = type_.element_type if isinstance(type_, (MemRefType, TensorType)) else type_
    dtype = numpy_dtype(element)
    static = not isinstance(type_, TensorType) or DYNAMIC_INDEX not in type_.get_shape()
    if what is not None and not static:
        raise DhirError(
            [
                Diagnostic(
                    f"{what} of @{function.sym_name.data} has type {type_}; a result's "
                    "shape must be static, or follow from the shapes of the inputs `dhir "
                    "run` is given (dhir allocates it before the run)",
                    loc_of(function),
                )
            ]
        )
    if dtype is None or (isinstance(type_, MemRefType) and not _identity_layout(type_)):
        raise DhirError(
            [
                Diagnostic(
                    f"{what or f'argument #{index}'} of @{function.sym_name.data} has type "
                    f"{type_}; entry arguments must be memrefs with the default layout, "
                    "ranked tensors, or scalars, of "
                    "i1/i8/i16/i32/i64/index/f16/f32/f64 (or si/ui integers of 8 to 64 bits)",
                    loc_of(function),
                )
            ]
        )
    block_args = function.body.blocks[0].args if function.body.blocks else ()
    name = block_args[index].name_hint if index < len(block_args) else None
    if shaped:
        assert isinstance(type_, (MemRefType, TensorType))
        shape = tuple(DYNAMIC if d == DYNAMIC_INDEX else d for d in type_.get_shape())
        role = INPUT if isinstance(type_, TensorType) else ARG
        return ArgSpec(index, str(type_), dtype.str, shape, name, role)
    return ArgSpec(index, str(type_), dtype.str, None, name)


def _identity_layout(type_: MemRefType) -> bool:
    return isinstance(type_.layout, NoneAttr) and isinstance(type_.memory_space, NoneAttr)
