"""Split a large lowered module into pieces that LLVM builds at the same time.

mlir-opt, mlir-translate and clang each use one core, and for 10,000 tasks they take a
quarter of the compile. dhir-lower-to-mpi already puts a large schedule's steps into
functions of a few dozen tasks each (`<function>.schedule<S>.part<K>`), which call only
external declarations (the runtime, MPI): those functions move, in contiguous runs, into
other modules, and each module is lowered and compiled on its own core; the linker joins
the objects. A moved step is made public (its dotted name cannot clash with a C symbol)
and the module left behind declares it. Anything else a step refers to keeps the module
whole: a global, or a function defined in the module, whose private name could clash.
"""

import re
from collections.abc import Iterator

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Attribute, Operation

STEP_NAME = re.compile(r"\.schedule\d+\.part\d+$")
# Fewer steps than this are not worth another round of tool start-ups (~0.1 s each).
MIN_STEPS_PER_PIECE = 16


def split_module(module: ModuleOp, pieces: int) -> list[ModuleOp]:
    """`module` (changed in place: the first piece, with the first run of steps) and up
    to `pieces - 1` new modules holding the other runs; [module] when it is small or not
    splittable."""
    steps = [op for op in module.body.block.ops if _is_step(op)]
    count = min(pieces, len(steps) // MIN_STEPS_PER_PIECE)
    if count < 2:
        return [module]
    declarations = {
        op.sym_name.data: op
        for op in module.body.block.ops
        if isinstance(op, func.FuncOp) and op.is_declaration
    }
    references = {step: set(_references(step)) for step in steps}
    allowed = declarations.keys() | {step.sym_name.data for step in steps}
    if not all(names <= allowed for names in references.values()):
        return [module]  # a step refers to a global, or to a function the module defines
    # Contiguous runs of steps, as long as can be within one; the first stays with the
    # host code.
    bounds = [len(steps) * k // count for k in range(count + 1)]
    return [module] + [
        _piece(module, steps[start:end], declarations, references)
        for start, end in zip(bounds[1:], bounds[2:])
    ]


def _is_step(op: Operation) -> bool:
    return (
        isinstance(op, func.FuncOp)
        and not op.is_declaration
        and STEP_NAME.search(op.sym_name.data) is not None
    )


def _piece(
    module: ModuleOp,
    steps: list[func.FuncOp],
    declarations: dict[str, func.FuncOp],
    references: dict[func.FuncOp, set[str]],
) -> ModuleOp:
    needed = sorted(set().union(*(references[step] for step in steps)) & declarations.keys())
    piece = ModuleOp([declarations[name].clone() for name in needed])
    piece.attributes.update(module.attributes)  # the DLTI saying which MPI, above all
    for step in steps:
        stub = func.FuncOp.external(
            step.sym_name.data, step.function_type.inputs.data, step.function_type.outputs.data
        )
        module.body.block.insert_op_before(stub, step)
        step.detach()
        step.sym_visibility = None  # public: the module left behind calls it
        piece.body.block.add_op(step)
    return piece


def _references(function: func.FuncOp) -> Iterator[str]:
    for op in function.walk():
        for attr in (*op.properties.values(), *op.attributes.values()):
            yield from _symbols(attr)


def _symbols(attr: Attribute) -> Iterator[str]:
    if isinstance(attr, SymbolRefAttr):
        yield attr.string_value()
    elif isinstance(attr, ArrayAttr):
        for item in attr.data:
            yield from _symbols(item)
    elif isinstance(attr, DictionaryAttr):
        for item in attr.data.values():
            yield from _symbols(item)
