"""What neither backend runs, refused at its line before either starts: memrefs whose
elements are memrefs (`memref<2xmemref<4xf32>>`). MLIR takes them, but the interpreter
holds no memref in an array, and natively MLIR 22 lowers them only in part (a crash or a
refusal deep in the build, at a line of dhir's generated text)."""

from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, UnrankedMemRefType
from xdsl.ir import Attribute, Operation

from dhir.ir.diagnostics import error_at


def check_memref_elements(module: ModuleOp) -> None:
    """Refuse the first op that makes, takes or declares a memref of memrefs."""
    for op in module.walk():
        kind = next((n for k in _types_of(op) if (n := _memref_of_memrefs(k))), None)
        if kind is not None:
            raise error_at(
                op,
                f"{kind} is a memref of memrefs, which dhir does not run (the interpreter "
                "holds no memref in one, and MLIR 22 lowers them only in part); keep the "
                "inner buffers as separate memrefs, or one memref with a dimension more",
            )


def _types_of(op: Operation) -> list[Attribute]:
    kinds: list[Attribute] = [*op.result_types, *op.operand_types]
    kinds += [arg.type for region in op.regions for block in region.blocks for arg in block.args]
    # A function declaration, a global: their types are properties, not values'.
    kinds += [a for a in op.properties.values() if isinstance(a, FunctionType | MemRefType)]
    return kinds


def _memref_of_memrefs(kind: Attribute) -> Attribute | None:
    """The memref of memrefs `kind` is or holds (a function type's argument), if any."""
    if isinstance(kind, FunctionType):
        found = (_memref_of_memrefs(k) for k in (*kind.inputs, *kind.outputs))
        return next((k for k in found if k is not None), None)
    if isinstance(kind, MemRefType | UnrankedMemRefType):
        if isinstance(kind.element_type, MemRefType | UnrankedMemRefType):
            return kind
    return None
