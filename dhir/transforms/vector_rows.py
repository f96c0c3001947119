"""`dhir-vector-rows`: n-D `vector.load`/`vector.store` become 1-D ones, row by row.

MLIR 22's `convert-vector-to-llvm` lowers only 1-D `vector.load`/`vector.store` and leaves
others in place without a word (mlir-translate then stops at "Dialect `vector' not
found"); no pass of mlir-opt's lowers them. A vector of rank k loaded from a memref covers
the memref's k innermost dimensions from the given indices, so it is its rows: for each
position p over the k - 1 leading vector dimensions, a 1-D load at the indices with p
added to the k - 1 dimensions before the innermost one, put in place with
`vector.insert` (a store takes its rows with `vector.extract`). Each row moves the same
elements as the whole op did, so the result is exact.

A load or store of a memref of vectors (its element type is the vector type), and
scalable vectors, are left as they are.
"""

from dataclasses import dataclass
from itertools import product
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, VectorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dhir.dialects import arith, vector
from dhir.dialects import vector as dhir_vector
from dhir.ir.walk import find_ops


@dataclass(frozen=True)
class VectorRowsPass(ModulePass):
    """vector.load/store of rank 2 and more from memrefs of scalars become 1-D ones."""

    name = "dhir-vector-rows"
    needs: ClassVar[tuple[type[Operation], ...]] = (vector.LoadOp, vector.StoreOp)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for found in find_ops(op, (vector.LoadOp, vector.StoreOp)):
            if isinstance(found, vector.LoadOp) and _rows(found.base, found.result.type):
                _load_rows(found)
            elif isinstance(found, vector.StoreOp) and _rows(found.base, found.vector.type):
                _store_rows(found)


def _rows(memory: SSAValue, kind: object) -> bool:
    """Whether a load or store of a `kind` vector from `memory` moves several rows."""
    assert isinstance(kind, VectorType) and isinstance(memory.type, MemRefType)
    scalable = any(d.value for d in kind.scalable_dims.data)
    scalars = not isinstance(memory.type.element_type, VectorType)
    return kind.get_num_dims() >= 2 and not scalable and scalars


def _positions(kind: VectorType) -> list[tuple[int, ...]]:
    """The positions over all but the innermost dimension of `kind`, in row-major order."""
    return list(product(*map(range, kind.get_shape()[:-1])))


def _row_type(kind: VectorType) -> VectorType:
    return VectorType(kind.element_type, kind.get_shape()[-1:])


def _row_indices(
    indices: tuple[SSAValue, ...], position: tuple[int, ...], made: list[Operation]
) -> list[SSAValue]:
    """The indices of the row at `position`: `position` added to the dimensions that the
    vector's leading dimensions cover (the ones before the innermost)."""
    lead = len(indices) - len(position) - 1
    out = list(indices)
    for k, step in enumerate(position):
        if step:
            made.append(offset := arith.ConstantOp(IntegerAttr(step, IndexType())))
            made.append(moved := arith.AddiOp(indices[lead + k], offset.result))
            out[lead + k] = moved.result
    return out


def _load_rows(op: vector.LoadOp) -> None:
    kind = op.result.type
    assert isinstance(kind, VectorType)
    made: list[Operation] = []
    value: SSAValue | None = None
    for position in _positions(kind):
        at = _row_indices(tuple(op.indices), position, made)
        made.append(row := dhir_vector.LoadOp(op.base, at, _row_type(kind)))
        row.properties.update(_hints(op))
        if value is None:  # the first row, everywhere: the others then take their places
            made.append(whole := vector.BroadcastOp(row.result, kind))
            value = whole.vector
        else:
            made.append(put := vector.InsertOp(row.result, value, list(position), kind))
            value = put.result
    assert value is not None
    Rewriter.replace_op(op, made, [value])


def _store_rows(op: vector.StoreOp) -> None:
    kind = op.vector.type
    assert isinstance(kind, VectorType)
    made: list[Operation] = []
    for position in _positions(kind):
        made.append(row := vector.ExtractOp(op.vector, list(position), _row_type(kind)))
        at = _row_indices(tuple(op.indices), position, made)
        made.append(store := dhir_vector.StoreOp(row.result, op.base, at))
        store.properties.update(_hints(op))
    Rewriter.replace_op(op, made, [])


def _hints(op: Operation) -> dict[str, Attribute]:
    """What a row keeps of the whole op's properties: `nontemporal` (an alignment would
    not hold for the rows after the first)."""
    return {k: v for k, v in op.properties.items() if k == "nontemporal"}
