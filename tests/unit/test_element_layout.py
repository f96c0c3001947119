"""One rule for the bytes of a memref's element (dhir/ir/layout.py), which the cost model
(dhir.analysis.counts), the messages (dhir-lower-to-mpi) and the memory per rank
(dhir.analysis.partition) share: they used to disagree on odd integer widths (i24: 3
bytes in the cost model, 4 in the messages, as LLVM lays it out)."""

import pytest
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    Float80Type,
    IndexType,
    IntegerType,
    MemRefType,
)
from xdsl.ir import Attribute

from dhir.analysis.counts import element_bytes as counted_bytes
from dhir.analysis.counts import memref_bytes
from dhir.ir.layout import element_bytes

# What MLIR 22's LLVM lowering gives each element of a memref on x86-64 (the LLVM
# DataLayout's alloc size of the element's LLVM type).
LLVM_SIZES: list[tuple[Attribute, int]] = [
    (IntegerType(1), 1),
    (IntegerType(3), 1),
    (IntegerType(8), 1),
    (IntegerType(12), 2),
    (IntegerType(16), 2),
    (IntegerType(24), 4),
    (IntegerType(32), 4),
    (IntegerType(48), 8),
    (IntegerType(64), 8),
    (IntegerType(96), 16),
    (IntegerType(128), 16),
    (IntegerType(136), 32),  # past i128: rounded up to i128's alignment, 16
    (IntegerType(256), 32),
    (IntegerType(264), 48),  # a power of two said 64: messages overran the buffer
    (IntegerType(520), 80),
    (IndexType(), 8),
    (Float16Type(), 2),
    (BFloat16Type(), 2),
    (Float32Type(), 4),
    (Float64Type(), 8),
]


@pytest.mark.parametrize(("element", "size"), LLVM_SIZES, ids=lambda x: str(x))
def test_every_part_of_dhir_counts_an_element_as_llvm_lays_it_out(
    element: Attribute, size: int
) -> None:
    assert element_bytes(element) == size
    assert counted_bytes(element) == size
    assert memref_bytes(MemRefType(element, [10, 3])) == 30 * size


def test_a_type_whose_layout_dhir_does_not_vouch_for_has_no_size() -> None:
    # The messages refuse such a memref (test_messages.py); the cost model estimates.
    assert element_bytes(Float80Type()) is None
    assert counted_bytes(Float80Type()) == 10
