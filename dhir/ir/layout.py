"""How MLIR's LLVM lowering lays out a memref's elements in memory: the one rule dhir's
cost model, messages, partitioned storage and memory accounting share."""

from functools import lru_cache

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
)
from xdsl.ir import Attribute

_FLOATS: dict[type[Attribute], int] = {
    Float16Type: 2,
    BFloat16Type: 2,
    Float32Type: 4,
    Float64Type: 8,
}


@lru_cache(maxsize=4096)  # a program has few types, asked about for every access
def element_bytes(element: Attribute) -> int | None:
    """Bytes between consecutive elements of a memref of `element`, as MLIR's LLVM
    lowering lays them out on x86-64 and AArch64: index 8; an integer up to i128 the next
    power of two bytes (i1 one byte, i24 four, i48 eight, i96 sixteen), a wider one its
    bytes rounded up to i128's alignment, 16 (i200 32, i264 48: LLVM's data layout); f16,
    bf16, f32, f64 their width. None for a type whose layout dhir does not vouch for (f80,
    vectors, complex numbers, ...)."""
    if isinstance(element, IndexType):
        return 8
    if isinstance(element, IntegerType):
        store = max(1, (element.width.data + 7) // 8)
        return 1 << (store - 1).bit_length() if store <= 16 else -(-store // 16) * 16
    return _FLOATS.get(type(element))
