"""vector.contract, rounding by rounding as MLIR 22's CPU lowering computes it
(convert-vector-to-llvm, `vector-contract-lowering=dot`, the default).

A contraction that is a matrix-matrix or matrix-vector product (the iterators
`parallel, parallel, reduction` or `parallel, reduction`, with one of the indexing maps
MLIR's ContractionOpToDotLowering knows) becomes, for each result element, the sum of the
products of a row and a column from +0.0 in order of the reduced dimension, and the
accumulator is then added to it. Any other contraction is unrolled one dimension at a
time: the first dimension both operands have that is parallel, else the first dimension
of the left operand, then of the right, that is not reduced along both, each giving a
smaller contraction (which may then be such a product); with only reduced dimensions
left, each position of the first in turn feeds the accumulator to the next, and the last
dimension is summed onto the accumulator in order. Each product and sum is rounded on its
own (no reassociation, no fused multiply-add), as LLVM computes them without fast-math
flags. A dimension reduced along one operand only (of size above 1) is first made one
of both, the other operand broadcast along it, as dhir-mlir22-workarounds does for native
code. Contractions the lowering leaves in place are refused (the native backend refuses
them too: dhir-mlir22-workarounds).
"""

from typing import Any

import numpy as np
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerType, VectorType
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineDimExpr

from dhir.backends.interp.core import fail, value_dtype
from dhir.backends.interp.scalars import combine
from dhir.dialects import vector as dhir_vector
from dhir.transforms.mlir22_workarounds import contraction_unlowered

# Which dimensions of the iteration space each of lhs, rhs and acc has, in order.
_Maps = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


class _Unlowered(Exception):
    """MLIR 22's lowering leaves this contraction in place."""


def run_contract(op: dhir_vector.ContractionOp, lhs: Any, rhs: Any, acc: Any) -> Any:
    why = contraction_unlowered(op)
    if why is not None:
        fail(op, f"is not supported by the interpreter: {why}")
    element = op.result.type
    element = element.element_type if isinstance(element, VectorType) else element
    left, right, out = (_dims(op, m) for m in op.indexing_maps.data)
    reduced = tuple(str(t.data) == "reduction" for t in op.iterator_types.data)
    lhs, rhs, acc = _lanes(lhs), _lanes(rhs), _lanes(acc)
    # As dhir-mlir22-workarounds: each operand broadcast along the reduced dimensions
    # only the other has, as leading dimensions.
    left_only, right_only = dhir_vector.lone_reductions(op)
    sizes = dict(zip(left, np.shape(lhs))) | dict(zip(right, np.shape(rhs)))
    lhs = np.broadcast_to(lhs, tuple(sizes[d] for d in right_only) + np.shape(lhs))
    rhs = np.broadcast_to(rhs, tuple(sizes[d] for d in left_only) + np.shape(rhs))
    left, right = (*right_only, *left), (*left_only, *right)
    contraction = _Contraction(op, element)
    try:
        result = contraction.run(lhs, rhs, acc, (left, right, out), reduced)
    except _Unlowered as error:
        fail(
            op,
            f"is not supported by the interpreter: MLIR 22 does not lower it ({error}), "
            "so native code cannot run it either",
        )
    if not isinstance(op.result.type, VectorType):
        return result
    dtype = value_dtype(element)
    values = np.empty(np.shape(result), dtype)
    values[...] = result
    values.flags.writeable = False
    return values


def _dims(op: Operation, attr: Attribute) -> tuple[int, ...]:
    assert isinstance(attr, AffineMapAttr)
    dims: list[int] = []
    for expr in attr.data.results:
        if not isinstance(expr, AffineDimExpr):
            fail(op, f"has an indexing map that is not a projected permutation: {attr}")
        dims.append(expr.position)
    return tuple(dims)


def _lanes(value: Any) -> Any:
    """A vector as an array of Python numbers (a scalar as it is)."""
    if not isinstance(value, np.ndarray):
        return value
    lanes = np.empty(value.shape, object)
    for index in np.ndindex(*value.shape):
        item = value[index].item()
        lanes[index] = int(item) if isinstance(item, bool) else item
    return lanes


def _take(value: Any, axis: int, position: int) -> Any:
    if axis < 0:
        return value
    taken = np.take(value, position, axis=axis)
    return taken.item() if isinstance(taken, np.ndarray) and taken.ndim == 0 else taken


def _without(dims: tuple[int, ...], dim: int) -> tuple[int, ...]:
    return tuple(d - (d > dim) for d in dims if d != dim)


# ContractionOpToDotLowering's indexing maps (m, n, k = dimensions 0, 1, 2; m, n = 0, 1
# for matrix-vector products), each with the operands whose rows it multiplies: "l", "r",
# transposed when upper case.
_MATMAT: dict[_Maps, str] = {
    ((0, 2), (2, 1), (0, 1)): "lR",
    ((0, 2), (1, 2), (0, 1)): "lr",
    ((2, 0), (2, 1), (0, 1)): "LR",
    ((2, 0), (1, 2), (0, 1)): "Lr",
    ((0, 2), (2, 1), (1, 0)): "Rl",
    ((0, 2), (1, 2), (1, 0)): "rl",
    ((2, 0), (2, 1), (1, 0)): "RL",
    ((2, 0), (1, 2), (1, 0)): "rL",
}
_MATVEC: dict[_Maps, str] = {
    ((0, 1), (1,), (0,)): "lr",
    ((1, 0), (1,), (0,)): "Lr",
    ((1,), (0, 1), (0,)): "rl",
    ((1,), (1, 0), (0,)): "Rl",
}


class _Contraction:
    def __init__(self, op: Operation, element: Attribute) -> None:
        self.op = op
        self.element = element
        floats = not isinstance(element, IntegerType | IndexType)
        self.mul, self.add = ("mulf", "addf") if floats else ("muli", "addi")
        self.zero: Any = 0.0 if floats else 0

    def run(self, lhs: Any, rhs: Any, acc: Any, maps: _Maps, reduced: tuple[bool, ...]) -> Any:
        dot = self._dot(lhs, rhs, acc, maps, reduced)
        if dot is not None:
            return dot
        left, right, _ = maps
        n = len(reduced)
        for dim in range(n):  # a batch dimension
            if not reduced[dim] and dim in left and dim in right:
                return self._parallel(
                    lhs, rhs, acc, maps, reduced, left.index(dim), right.index(dim)
                )
        both = [d for d in range(n) if reduced[d] and d in left and d in right]
        for axis, dim in enumerate(left):
            if dim not in both:
                return self._parallel(lhs, rhs, acc, maps, reduced, axis, -1)
        for axis, dim in enumerate(right):
            if dim not in both:
                return self._parallel(lhs, rhs, acc, maps, reduced, -1, axis)
        if not both:
            raise _Unlowered("no dimension is reduced along both operands")
        return self._reduction(lhs, rhs, acc, maps, reduced)

    def _dot(self, lhs: Any, rhs: Any, acc: Any, maps: _Maps, reduced: tuple[bool, ...]) -> Any:
        if reduced == (False, False, True):
            order = _MATMAT.get(maps)
        elif reduced == (False, True):
            order = _MATVEC.get(maps)
        else:
            order = None
        if order is None:
            return None
        named = {"l": lhs, "r": rhs, "L": np.transpose(lhs), "R": np.transpose(rhs)}
        rows, columns = named[order[0]], named[order[1]]
        result = np.empty(np.shape(acc), object)
        for index in np.ndindex(*result.shape):
            row = rows[index[0]]
            column = columns[index[1]] if len(index) == 2 else columns
            total = self.zero
            for a, b in zip(row, column):
                total = self._combine(self.add, total, self._combine(self.mul, a, b))
            result[index] = self._combine(self.add, total, acc[index])
        return result

    def _parallel(
        self, lhs: Any, rhs: Any, acc: Any, maps: _Maps, reduced: tuple[bool, ...],
        left_axis: int, right_axis: int,
    ) -> Any:  # fmt: skip
        left, right, out = maps
        dim = left[left_axis] if left_axis >= 0 else right[right_axis]
        size = np.shape(lhs)[left_axis] if left_axis >= 0 else np.shape(rhs)[right_axis]
        out_axis = out.index(dim) if dim in out else -1
        if out_axis < 0 and size != 1:
            raise _Unlowered(f"dimension {dim} is neither in the result nor of size 1")
        smaller = (_without(left, dim), _without(right, dim), _without(out, dim))
        rest = reduced[:dim] + reduced[dim + 1 :]
        parts = [
            self.run(
                _take(lhs, left_axis, d),
                _take(rhs, right_axis, d),
                _take(acc, out_axis, d),
                smaller,
                rest,
            )  # fmt: skip
            for d in range(size)
        ]
        if out_axis < 0:
            return parts[0]
        stacked = [
            np.asarray(part, object) if isinstance(part, np.ndarray) else part for part in parts
        ]
        if not isinstance(stacked[0], np.ndarray):
            result = np.empty(len(stacked), object)
            result[:] = stacked
            return result
        return np.stack(stacked, axis=out_axis)

    def _reduction(
        self, lhs: Any, rhs: Any, acc: Any, maps: _Maps, reduced: tuple[bool, ...]
    ) -> Any:
        if isinstance(acc, np.ndarray):
            raise _Unlowered("a reduction into a vector")
        left, right, out = maps
        if 0 not in left or 0 not in right:
            raise _Unlowered("the first reduced dimension is not in both operands")
        left_axis, right_axis = left.index(0), right.index(0)
        if np.shape(lhs)[left_axis] != np.shape(rhs)[right_axis]:
            raise _Unlowered("the operands' reduced dimensions differ in size")
        if np.ndim(lhs) == 1:
            if np.ndim(rhs) != 1:
                raise _Unlowered("a left operand of rank 1 with a right one of another rank")
            total = acc  # vector.reduction <add> with the accumulator, in lane order
            for a, b in zip(lhs, rhs):
                total = self._combine(self.add, total, self._combine(self.mul, a, b))
            return total
        smaller = (_without(left, 0), _without(right, 0), _without(out, 0))
        for d in range(np.shape(lhs)[left_axis]):
            acc = self.run(_take(lhs, left_axis, d), _take(rhs, right_axis, d), acc, smaller,
                           reduced[1:])  # fmt: skip
        return acc

    def _combine(self, kind: str, a: Any, b: Any) -> Any:
        return combine(self.op, kind, a, b, self.element)
