"""`dhir-packed-vectors`: vector loads and stores of memrefs of i1 (and of other integers
that are not a whole power of two of bytes), made exact.

A memref of i1 holds one byte per element (an i4 one byte, an i24 four: LLVM's size of
the element), but MLIR 22's `convert-vector-to-llvm` lowers `vector.load`/`vector.store`
(and the transfers and masked loads and stores it turns into them) of a `vector<Nxi1>`
to an LLVM load or store of `<N x i1>`, which LLVM packs into bits: a load read the bits
of the first bytes, a store wrote them packed into the first byte
(`vector.transfer_write` of `[true, true]` into a row of a `memref<3x2xi1>` left it
`[true, false]`). `vector.gather` and `vector.scatter` load and store each lane as its
own element, so each such op becomes one of them, over the lanes 0..N-1 of the innermost
dimension from its indices:

- `vector.load`/`vector.store` (and `affine.vector_load`/`store`, first lowered to them as
  `--lower-affine` would): every lane;
- `vector.maskedload`/`vector.maskedstore`: the lanes of its mask, the others passed
  through;
- `vector.transfer_read`/`vector.transfer_write` of one dimension along the memref's
  innermost (a minor identity map): the lanes of its mask, and where the dimension is not
  `in_bounds`, those before its end (`vector.create_mask` of the extent less the index);
  a read's other lanes are its padding.

The same lanes move, so results are exact. Others (`vector.expandload`,
`compressstore`, a transfer of several dimensions or along another, a memref whose
innermost stride is not 1, scalable vectors) are refused at the op: the native backend
cannot run them right.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    VectorType,
    i1,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.dialects import affine, arith, memref, vector
from dhir.ir.diagnostics import error_at
from dhir.ir.walk import find_ops
from dhir.transforms.affine_scope import lower_access

_LOADS_AND_STORES = (
    vector.LoadOp,
    vector.StoreOp,
    vector.MaskedLoadOp,
    vector.MaskedStoreOp,
    vector.TransferReadOp,
    vector.TransferWriteOp,
)
_REFUSED = (vector.ExpandLoadOp, vector.CompressStoreOp)
_AFFINE = (affine.VectorLoadOp, affine.VectorStoreOp)


@dataclass(frozen=True)
class PackedVectorsPass(ModulePass):
    """Vector loads and stores of memrefs of i1, i4, i24 become gathers and scatters.

    LLVM packs the lanes of such vectors tighter than the memref holds them."""

    name = "dhir-packed-vectors"
    needs: ClassVar[tuple[type[Operation], ...]] = (*_LOADS_AND_STORES, *_REFUSED, *_AFFINE)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for found in list(find_ops(op, (*_LOADS_AND_STORES, *_REFUSED, *_AFFINE))):
            memory = _memory(found)
            if not _packed(memory):
                continue
            if isinstance(found, _AFFINE):
                found = lower_access(found)  # a vector.load or store, as --lower-affine
            if isinstance(found, _REFUSED) or not _lanes_in_a_row(found, memory):
                raise error_at(
                    found,
                    f"'{found.name}' of a memref of {_element(memory)} cannot run natively: "
                    "MLIR 22 packs the vector's lanes into bits, where the memref holds "
                    "whole bytes for each; "
                    "load and store a fixed-size 1-D vector along a unit-stride innermost "
                    "dimension (vector.load, vector.store, a transfer with a minor identity "
                    "map), or element by element",
                )
            _as_gather_or_scatter(found)


# Adds an op before the one rewritten; its result.
_Add = Callable[[Operation], SSAValue]


def _memory(op: Operation) -> SSAValue:
    """The memref a load or store reads or writes."""
    for name in ("base", "source", "memref", "base_"):
        found = getattr(op, name, None)
        if isinstance(found, SSAValue):
            return found
    raise AssertionError(f"{op.name} names no memref")


def _packed(memory: SSAValue) -> bool:
    """Whether LLVM packs a vector of the memref's elements tighter than the memref
    holds them: integers of fewer than 8 bits, or not a power of two of bytes."""
    kind = memory.type
    if not isinstance(kind, MemRefType) or not isinstance(kind.element_type, IntegerType):
        return False
    width = kind.element_type.width.data
    return width < 8 or width & (width - 1) != 0


def _element(memory: SSAValue) -> object:
    kind = memory.type
    assert isinstance(kind, MemRefType)
    return kind.element_type


def _lanes_in_a_row(op: Operation, memory: SSAValue) -> bool:
    """A 1-D fixed-size vector along the memref's innermost dimension, whose stride
    is 1."""
    kind = memory.type
    assert isinstance(kind, MemRefType)
    strides = kind.get_strides()
    lanes = _vector_type(op)
    scalable = any(d.value for d in lanes.scalable_dims.data)
    if not strides or strides[-1] != 1 or len(lanes.get_shape()) != 1 or scalable:
        return False
    if isinstance(op, vector.TransferReadOp | vector.TransferWriteOp):
        results = op.permutation_map.data.results
        last = AffineDimExpr(kind.get_num_dims() - 1)
        return len(results) == 1 and results[0] == last
    return True


def _vector_type(op: Operation) -> VectorType:
    if isinstance(op, vector.StoreOp | vector.MaskedStoreOp):
        kind = op.vector.type if isinstance(op, vector.StoreOp) else op.value_to_store.type
    elif isinstance(op, vector.TransferWriteOp):
        kind = op.vector.type
    else:
        kind = op.results[0].type
    assert isinstance(kind, VectorType)
    return kind


def _as_gather_or_scatter(op: Operation) -> None:
    kind = _vector_type(op)
    lanes = kind.get_shape()[0]
    made: list[Operation] = []

    def add(new: Operation) -> SSAValue:
        made.append(new)
        return new.results[0]

    offsets = _vector(add, IndexType(), list(range(lanes)))
    mask = _mask(op, add, lanes)
    base, indices = _memory(op), _indices(op)
    if isinstance(op, vector.StoreOp | vector.TransferWriteOp | vector.MaskedStoreOp):
        value = op.value_to_store if isinstance(op, vector.MaskedStoreOp) else op.vector
        scatter = vector.ScatterOp.build(operands=[base, indices, offsets, mask, value])
        Rewriter.insert_op([*made, scatter], InsertPoint.before(op))
        Rewriter.erase_op(op)
        return
    if isinstance(op, vector.TransferReadOp):
        passed = add(vector.BroadcastOp(op.padding, kind))
    elif isinstance(op, vector.MaskedLoadOp):
        passed = op.pass_thru
    else:
        element = kind.element_type
        assert isinstance(element, IntegerType)
        passed = _vector(add, element, [0] * lanes)  # no lane is passed through
    gather = vector.GatherOp.build(
        operands=[base, indices, offsets, mask, passed], result_types=[kind]
    )
    Rewriter.insert_op([*made, gather], InsertPoint.before(op))
    Rewriter.replace_op(op, [], [gather.result])


def _indices(op: Operation) -> list[SSAValue]:
    return list(op.indices)  # type: ignore[attr-defined]


def _vector(add: _Add, element: IndexType | IntegerType, values: list[int]) -> SSAValue:
    kind = VectorType(element, [len(values)])
    return add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(kind, values)))


def _mask(op: Operation, add: _Add, lanes: int) -> SSAValue:
    """The lanes the op moves: its mask's, and those before the end of a dimension
    that is not in bounds."""
    given = getattr(op, "mask", None)
    mask: SSAValue | None = given if isinstance(given, SSAValue) else None
    if isinstance(op, vector.TransferReadOp | vector.TransferWriteOp):
        if not op.in_bounds.data[0].value.data:
            memory = _memory(op)
            assert isinstance(memory.type, MemRefType)
            last = memory.type.get_num_dims() - 1
            position = add(arith.ConstantOp(IntegerAttr(last, IndexType())))
            extent = add(memref.DimOp(memory, position))
            left = add(arith.SubiOp(extent, _indices(op)[-1]))
            inside = add(vector.CreateMaskOp([left], VectorType(i1, [lanes])))
            mask = inside if mask is None else add(arith.AndIOp(mask, inside))
    if mask is None:
        mask = _vector(add, i1, [1] * lanes)
    return mask
