"""What neither backend runs, refused at its line before either starts: memrefs whose
elements are memrefs (`memref<2xmemref<4xf32>>`). MLIR takes them, but the interpreter
holds no memref in an array, and natively MLIR 22 lowers them only in part (a crash or a
refusal deep in the build, at a line of dhir's generated text)."""

from collections.abc import Sequence
from functools import cache
from typing import cast

from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, UnrankedMemRefType
from xdsl.ir import Attribute, Operation

from dhir.ir.diagnostics import error_at
from dhir.ir.walk import find_ops


def check_memref_elements(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first op that makes, takes or declares a memref of memrefs. `ops`:
    every op of `module`, in `find_ops`'s order, when the caller has them."""
    # Every op of every program `dhir run` and `dhir compile` take: `find_ops`'s walk, and
    # the types' classes asked once each, not through ABCMeta per type (0.6 s of CPU
    # for a schedule of 10,000 tasks, 80,000 ops; docs/performance.md).
    for op in find_ops(module, Operation) if ops is None else ops:
        kind = _first_memref_of_memrefs(op)
        if kind is not None:
            raise error_at(
                op,
                f"{kind} is a memref of memrefs, which dhir does not run (the interpreter "
                "holds no memref in one, and MLIR 22 lowers them only in part); keep the "
                "inner buffers as separate memrefs, or one memref with a dimension more",
            )


def _first_memref_of_memrefs(op: Operation) -> Attribute | None:
    """The first memref of memrefs among the types of `op`'s results and blocks'
    arguments, and its properties (a function declaration's, a global's). Not its
    operands: each is a result or a block argument of an op the walk met before."""
    for value in op.results:
        if (found := _memref_of_memrefs(value.type)) is not None:
            return found
    for region in op.regions:
        for block in region.blocks:
            for arg in block.args:
                if (found := _memref_of_memrefs(arg.type)) is not None:
                    return found
    for prop in op.properties.values():
        if _is_function_or_memref(type(prop)) and (found := _memref_of_memrefs(prop)):
            return found
    return None


def _memref_of_memrefs(kind: Attribute) -> Attribute | None:
    """The memref of memrefs `kind` is or holds (a function type's argument), if any."""
    if _is_function(type(kind)):
        assert isinstance(kind, FunctionType)
        found = (_memref_of_memrefs(k) for k in (*kind.inputs, *kind.outputs))
        return next((k for k in found if k is not None), None)
    if _is_memref(type(kind)):
        element = cast(MemRefType | UnrankedMemRefType, kind).element_type
        if _is_memref(type(element)):
            return kind
    return None


# Per class of attribute (which classes a class derives from never changes).
@cache
def _is_function(cls: type) -> bool:
    return issubclass(cls, FunctionType)


@cache
def _is_memref(cls: type) -> bool:
    return issubclass(cls, MemRefType | UnrankedMemRefType)


@cache
def _is_function_or_memref(cls: type) -> bool:
    return issubclass(cls, FunctionType | MemRefType)
