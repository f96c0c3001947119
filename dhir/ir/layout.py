"""How MLIR's LLVM lowering lays out a memref's elements in memory: the one rule dhir's
cost model, messages, partitioned storage and memory accounting share."""

from functools import lru_cache

from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    Float16Type,
    Float32Type,
    Float64Type,
    Float80Type,
    IndexType,
    IntegerType,
    VectorType,
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


@lru_cache(maxsize=4096)
def stored_bytes(element: Attribute) -> int | None:
    """Bytes between consecutive elements of a memref of `element` as MLIR's LLVM lowering
    lays them out on x86-64 (`element_bytes`, and more types): f80 16; complex<T> a
    struct of two T, twice T's; a vector of numbers LLVM's vector of the rows, its bits
    rounded up to whole bytes, then to a power of two (vector<3xf32> 16, vector<4xi1> 1,
    vector<5xf64> 64), times its other dimensions (vector<2x3xf32> is an array of two
    rows, 32). Measured with clang-22 (the sizes of getelementptr's null + 1). None for a
    type dhir does not know the layout of (a scalable vector, ...). For checks that need
    the bytes a memref spans; the cost model, messages and partitioning keep to
    `element_bytes`'s types."""
    known = element_bytes(element)
    if known is not None:
        return known
    if isinstance(element, Float80Type):
        return 16
    if isinstance(element, ComplexType):
        part = stored_bytes(element.element_type)
        return None if part is None else 2 * part
    if isinstance(element, VectorType) and not any(element.get_scalable_dims()):
        bits = _lane_bits(element.element_type)
        shape = element.get_shape() or (1,)  # a 0-d vector lowers to one lane
        if bits is None:
            return None
        row = max(1, (shape[-1] * bits + 7) // 8)
        rows = 1
        for extent in shape[:-1]:
            rows *= extent
        return (1 << (row - 1).bit_length()) * rows
    return None


def _lane_bits(lane: Attribute) -> int | None:
    if isinstance(lane, IndexType):
        return 64
    if isinstance(lane, IntegerType):
        return lane.width.data
    bytes_ = _FLOATS.get(type(lane))
    return None if bytes_ is None else 8 * bytes_
