"""The vector dialect's memory and lane ops on read-only NumPy arrays (arith and math on
vectors run lane by lane: see `lanewise` in core); the ops that only move lanes (shape
casts, transposes, strided slices, interleaving, masks of constants and bounds, bitcasts
between widths NumPy has); masked loads and stores, gathers and scatters, expanding loads
and compressing stores, and masked transfers, which touch only the lanes their mask sets;
reductions (under a vector.mask too), outer products, contractions (see contract) and
vector.print, as native code computes and prints them. Scalable vectors are not
supported."""

import math
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from itertools import product
from typing import Any, cast

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr

from dhir.backends.interp.contract import run_contract
from dhir.backends.interp.control import eval_map
from dhir.backends.interp.core import (
    INDEX_WIDTH,
    Values,
    assign,
    element,
    fail,
    handles,
    put,
    register,
    value_dtype,
)
from dhir.backends.interp.memref import checked_index
from dhir.backends.interp.scalars import combine
from dhir.backends.interp.written import (
    Partial,
    carry_lanes,
    is_written_one,
    lanes_of,
    partial,
    read_lanes,
    refuse_use,
    source,
    write_lane,
    write_lanes,
)
from dhir.dialects import affine, vector
from dhir.dialects import vector as dhir_vector
from dhir.dialects.vector import Punctuation


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _new_vector(op: Operation, type_: Attribute) -> np.ndarray:
    assert isinstance(type_, VectorType)
    dtype = value_dtype(type_.element_type)
    if dtype is None:
        fail(op, f"on {type_} is not supported by the interpreter")
    return np.empty(tuple(type_.get_shape()), dtype)


def _integers(attr: Attribute) -> list[int]:
    """The integers of an `[1, 2]` array attribute or a `array<i64: 1, 2>` property."""
    if isinstance(attr, ArrayAttr):
        return [int(a.value.data) for a in attr.data if isinstance(a, IntegerAttr)]
    return list(attr.get_values())  # pyright: ignore[reportAttributeAccessIssue]


def _positions(op: Operation, static: Sequence[int], dynamic: Sequence[int]) -> tuple[int, ...]:
    values = iter(dynamic)
    return tuple(next(values) if p == DYNAMIC_INDEX else p for p in static)


def _in_bounds(op: Operation, rank: int) -> list[bool]:
    found = op.properties.get("in_bounds") or op.attributes.get("in_bounds")
    if isinstance(found, ArrayAttr):
        return [isinstance(b, IntegerAttr) and bool(b.value.data) for b in found.data]
    return [False] * rank


class _Transfer:
    """Where lane `v` of a vector.transfer_read/write is in memory: the base indices,
    moved along each memref dimension the permutation map names (a constant 0 result
    broadcasts the lane)."""

    def __init__(
        self,
        op: Operation,
        array: np.ndarray,
        base: Sequence[int],
        rank: int,
        mask: np.ndarray | None = None,
    ) -> None:
        permutation = op.properties.get("permutation_map")
        if not isinstance(array, np.ndarray):
            fail(op, "on tensors is not supported by the interpreter (memrefs only)")
        self.dims: list[int | None] = []
        results = permutation.data.results if isinstance(permutation, AffineMapAttr) else None
        if results is None:  # the minor identity
            self.dims = list(range(array.ndim - rank, array.ndim))
        for expr in results or ():
            if isinstance(expr, AffineDimExpr):
                self.dims.append(expr.position)
            elif isinstance(expr, AffineConstantExpr) and expr.value == 0:
                self.dims.append(None)
            else:
                fail(op, f"has a permutation map the interpreter cannot follow: {permutation}")
        self.op, self.array, self.base = op, array, list(base)
        self.in_bounds = _in_bounds(op, len(self.dims))
        self.mask = mask
        # The mask's dimensions are the memref dimensions the lanes move along, in the
        # memref's order (MLIR's inferTransferOpMaskType); broadcast lanes have none.
        moved = [(d, k) for k, d in enumerate(self.dims) if d is not None]
        self.mask_lanes = [k for _, k in sorted(moved)]

    def index(self, lane: tuple[int, ...]) -> tuple[int, ...] | None:
        """The element's indices, or None where it is out of bounds or masked off."""
        if self.mask is not None and not self.mask[tuple(lane[k] for k in self.mask_lanes)]:
            return None
        where = list(self.base)
        for step, dim, sure in zip(lane, self.dims, self.in_bounds):
            if dim is None:
                continue
            where[dim] += step
            if where[dim] < 0:
                self._before_start(dim, where[dim])
            if where[dim] >= self.array.shape[dim] and not sure:
                return None
        return checked_index(self.op, self.array, where)

    def _before_start(self, dim: int, index: int) -> None:
        # MLIR lets a transfer run out of bounds only as indices increase, past the end;
        # native code reads or writes before the memref where a lane starts below 0.
        fail(
            self.op,
            f"moves a lane at index {index} of dimension {dim}, before the memref's start: "
            "a transfer may run out of bounds only past the end; start it at 0 or more, "
            "or mask that lane off",
        )

    def lanes(self, shape: Sequence[int]) -> list[tuple[tuple[int, ...], tuple[int, ...] | None]]:
        return [(lane, self.index(lane)) for lane in product(*map(range, shape))]


def _read(op: Operation, view: np.ndarray) -> np.ndarray:
    """A vector of the elements of `view`, carrying which were written (a copy, as
    memref.copy: see dhir.backends.interp.written)."""
    return read_lanes(op, view, _frozen(np.array(view)))


def _write(op: Operation, view: np.ndarray, value: np.ndarray) -> None:
    write_lanes(op, view, value)
    assign(view, value)


class _Unwritten:
    """The lanes of a vector being read one by one that nothing wrote, found as they are
    read (no list at all where every one was written)."""

    def __init__(self, op: Operation, array: np.ndarray, shape: Sequence[int]) -> None:
        self.op, self.array, self.shape = op, array, shape
        self.lanes: np.ndarray | None = None
        self.first = ""

    def read(self, lane: Any, where: tuple[int, ...]) -> None:
        if is_written_one(self.array, where):
            return
        if self.lanes is None:
            self.lanes = np.ones(self.shape, np.bool_)
            self.first = source(self.op, self.array, where)
        self.lanes[lane] = False

    def vector(self, value: np.ndarray) -> np.ndarray:
        return value if self.lanes is None else partial(value, self.lanes, (self.first,))


def _handles_moving_lanes(op_type: type[Operation]) -> Callable[[Any], Any]:
    """`handles(op_type)` of an op that only moves lanes, run by `_moves_lanes`: it may
    be given Partial vectors (written.carry_lanes)."""
    carry_lanes(op_type)

    def decorate(function: Any) -> Any:
        return handles(op_type)(_moves_lanes(function))

    return decorate


def _moves_lanes(function: Any) -> Any:
    """An op that only moves lanes (and inserts scalars) run once more on the lanes'
    written flags, as numbers of the vectors' types, where a vector it is given is
    Partial: its results carry the flags along."""

    @wraps(function)
    def run(self: object, interp: Interpreter, op: Operation, args: Values) -> Values:
        results = function(self, interp, op, args)
        if not any(type(a) is Partial for a in args):
            return results
        flags = [
            _as_flags(a, t, isinstance(op, vector.InsertOp) and k == 0)
            for k, (a, t) in enumerate(zip(args, op.operand_types))
        ]
        moved = function(self, interp, op, tuple(flags))
        sources = tuple(dict.fromkeys(s for a in args if type(a) is Partial for s in a.sources))
        carried: list[Any] = []
        for value, lanes in zip(results, moved):
            if not isinstance(value, np.ndarray):  # a scalar extracted from a lane
                if not lanes:  # vector.extract's: the lane is its position
                    assert isinstance(op, vector.ExtractOp)
                    where = _positions(op, op.static_position.get_values(), args[1:])
                    refuse_use(op, args[0], where)
                carried.append(value)
            else:
                carried.append(partial(value, np.asarray(lanes, np.bool_), sources))
        return tuple(carried)

    return run


def _as_flags(value: Any, type_: Attribute, inserted: bool) -> Any:
    """`value`'s written flags as numbers of its type; a scalar `inserted` is written,
    and positions stay as they are."""
    if not isinstance(type_, VectorType):
        return 1 if inserted else value
    lanes = lanes_of(value)
    flags = np.ones(np.shape(value), value.dtype) if lanes is None else lanes.astype(value.dtype)
    return _frozen(flags)


def _contiguous(op: Operation, array: np.ndarray, base: Sequence[int], shape: Sequence[int]):
    """vector.load/store: the vector covers the memref's innermost dimensions from `base`."""
    if len(shape) > array.ndim:
        fail(op, f"moves a vector of rank {len(shape)} from a memref of rank {array.ndim}")
    lead = array.ndim - len(shape)
    last = [*base[:lead], *(b + n - 1 for b, n in zip(base[lead:], shape))]
    if any(n == 0 for n in shape):
        return array[tuple(slice(b, b) for b in base)]
    checked_index(op, array, base)
    checked_index(op, array, last)
    return array[(*base[:lead], *(slice(b, b + n) for b, n in zip(base[lead:], shape)))]


@register
class VectorImpls(InterpreterFunctions):
    @handles(vector.TransferReadOp)
    def run_transfer_read(
        self, interp: Interpreter, op: vector.TransferReadOp, args: Values
    ) -> Values:
        array, indices, padding = args[0], args[1 : 1 + len(op.indices)], args[1 + len(op.indices)]
        mask = args[2 + len(op.indices)] if op.mask is not None else None
        result = _new_vector(op, op.result.type)
        transfer = _Transfer(op, array, indices, result.ndim, mask)
        unwritten = _Unwritten(op, array, result.shape)
        for lane, where in transfer.lanes(result.shape):
            if where is not None:
                unwritten.read(lane, where)
            result[lane] = padding if where is None else array[where]
        return (unwritten.vector(_frozen(result)),)

    @handles(vector.TransferWriteOp)
    def run_transfer_write(
        self, interp: Interpreter, op: vector.TransferWriteOp, args: Values
    ) -> Values:
        value, array, indices = args[0], args[1], args[2 : 2 + len(op.indices)]
        mask = args[2 + len(op.indices)] if op.mask is not None else None
        if not array.flags.writeable:
            fail(op, "writes into a constant memref.global")
        transfer = _Transfer(op, array, indices, value.ndim, mask)
        for lane, where in transfer.lanes(value.shape):
            if where is not None:
                write_lane(op, array, where, value, lane)
                array[where] = value[lane]
        return ()

    # dhir's vector.load and vector.store (which take memrefs of vectors too) are the
    # ones parsed: name them so that they exist when the impls are registered.
    @handles(vector.LoadOp, dhir_vector.LoadOp)
    def run_load(self, interp: Interpreter, op: vector.LoadOp, args: Values) -> Values:
        shape = tuple(op.result.type.get_shape())
        return (_read(op, _contiguous(op, args[0], args[1:], shape)),)

    @handles(vector.StoreOp, dhir_vector.StoreOp)
    def run_store(self, interp: Interpreter, op: vector.StoreOp, args: Values) -> Values:
        value, array = args[0], args[1]
        if not array.flags.writeable:
            fail(op, "writes into a constant memref.global")
        _write(op, _contiguous(op, array, args[2:], value.shape), value)
        return ()

    @handles(affine.VectorLoadOp)
    def run_affine_vector_load(
        self, interp: Interpreter, op: affine.VectorLoadOp, args: Values
    ) -> Values:
        base = eval_map(op.map.data, args[1:])
        shape = tuple(op.result.type.get_shape())
        return (_read(op, _contiguous(op, args[0], base, shape)),)

    @handles(affine.VectorStoreOp)
    def run_affine_vector_store(
        self, interp: Interpreter, op: affine.VectorStoreOp, args: Values
    ) -> Values:
        value, array = args[0], args[1]
        if not array.flags.writeable:
            fail(op, "writes into a constant memref.global")
        _write(op, _contiguous(op, array, eval_map(op.map.data, args[2:]), value.shape), value)
        return ()

    @_handles_moving_lanes(vector.BroadcastOp)
    def run_broadcast(self, interp: Interpreter, op: vector.BroadcastOp, args: Values) -> Values:
        result = _new_vector(op, op.vector.type)
        put(result, ..., args[0])  # NumPy broadcasts as MLIR does (leading dims, unit dims)
        return (_frozen(result),)

    @_handles_moving_lanes(vector.ExtractOp)
    def run_extract(self, interp: Interpreter, op: vector.ExtractOp, args: Values) -> Values:
        source = args[0]
        where = _positions(op, op.static_position.get_values(), args[1:])
        checked_index(op, source, where)
        picked = source[where]
        if isinstance(op.result.type, VectorType):
            return (_frozen(np.array(picked)),)
        return (element(picked),)

    @_handles_moving_lanes(vector.InsertOp)
    def run_insert(self, interp: Interpreter, op: vector.InsertOp, args: Values) -> Values:
        value, dest = args[0], args[1]
        where = _positions(op, op.static_position.get_values(), args[2:])
        checked_index(op, dest, where)
        result = dest.copy()
        put(result, where, value)
        return (_frozen(result),)

    @_handles_moving_lanes(vector.ShuffleOp)
    def run_shuffle(self, interp: Interpreter, op: vector.ShuffleOp, args: Values) -> Values:
        # The mask picks rows (leading positions) of the two vectors, one after the other.
        rows = np.concatenate([np.atleast_1d(args[0]), np.atleast_1d(args[1])])
        return (_frozen(rows[list(op.mask.get_values())]),)

    @_handles_moving_lanes(dhir_vector.ShapeCastOp)
    def run_shape_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # Row-major, as MLIR defines it (and LLVM lays vectors out).
        shape = tuple(op.results[0].type.get_shape())  # pyright: ignore[reportAttributeAccessIssue]
        return (_frozen(np.array(np.reshape(args[0], shape))),)

    @_handles_moving_lanes(dhir_vector.TransposeOp)
    def run_transpose(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        permutation = _integers(op.properties["permutation"])
        return (_frozen(np.array(np.transpose(args[0], permutation))),)

    @_handles_moving_lanes(dhir_vector.ExtractStridedSliceOp)
    def run_extract_strided_slice(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        offsets, sizes, strides = (
            _integers(op.properties[name]) for name in ("offsets", "sizes", "strides")
        )
        picked = tuple(slice(o, o + n * s, s) for o, n, s in zip(offsets, sizes, strides))
        return (_frozen(np.array(args[0][picked])),)

    @_handles_moving_lanes(dhir_vector.InsertStridedSliceOp)
    def run_insert_strided_slice(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        source, dest = args
        offsets, strides = _integers(op.properties["offsets"]), _integers(op.properties["strides"])
        # The source's dimensions are the destination's innermost ones.
        lead = len(offsets) - source.ndim
        inner = zip(offsets[lead:], source.shape, strides)
        where = (*offsets[:lead], *(slice(o, o + n * s, s) for o, n, s in inner))
        result = dest.copy()
        result[where] = source
        return (_frozen(result),)

    @handles(dhir_vector.ConstantMaskOp, vector.CreateMaskOp)
    def run_mask(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        result = _new_vector(op, op.results[0].type)
        bounds = _integers(op.properties["mask_dim_sizes"]) if not args else list(args)
        # A bound below 0 or above the dimension is clamped (MLIR: all lanes off or on);
        # a 0-d mask has one bound.
        grid = np.indices(result.shape) if result.ndim else np.zeros((1,), int)
        inside = np.ones(result.shape, bool)
        for axis, bound in enumerate(bounds):
            inside &= grid[axis] < bound
        result[...] = inside
        return (_frozen(result),)

    @_handles_moving_lanes(dhir_vector.InterleaveOp)
    def run_interleave(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        lhs, rhs = args
        result = _new_vector(op, op.results[0].type)
        result[..., 0::2], result[..., 1::2] = lhs, rhs
        return (_frozen(result),)

    @_handles_moving_lanes(dhir_vector.DeinterleaveOp)
    def run_deinterleave(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        source = args[0]
        return (_frozen(np.array(source[..., 0::2])), _frozen(np.array(source[..., 1::2])))

    @handles(dhir_vector.StepOp)
    def run_step(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        if any(cast(VectorType, op.results[0].type).get_scalable_dims()):
            fail(op, "of a scalable vector is not supported by the interpreter")
        result = _new_vector(op, op.results[0].type)
        result[...] = np.arange(result.size)
        return (_frozen(result),)

    @handles(dhir_vector.FromElementsOp)
    def run_from_elements(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        result = _new_vector(op, op.results[0].type)
        lanes = result.reshape(-1)  # a view: row-major, as MLIR orders the elements
        for k, value in enumerate(args):
            put(lanes, k, value)
        return (_frozen(result),)

    # A vector with lanes nothing wrote is refused before this runs (its lanes are not
    # carried into the scalars).
    @handles(dhir_vector.ToElementsOp)
    def run_to_elements(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return tuple(element(lane) for lane in np.asarray(args[0]).reshape(-1))

    @handles(dhir_vector.BitcastOp)
    def run_bitcast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # The innermost dimension's bytes, read as the other element type.
        result = _new_vector(op, op.results[0].type)
        source = np.ascontiguousarray(args[0])
        if _packed(op.operand_types[0]) or _packed(op.results[0].type):
            fail(op, "on i1, bf16 or sub-byte elements is not supported by the interpreter")
        result[...] = source.view(result.dtype).reshape(result.shape)
        return (_frozen(result),)

    @handles(vector.MaskedLoadOp, dhir_vector.ExpandLoadOp)
    def run_masked_load(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # Lane k (or, expanding, the k-th set lane) reads the innermost dimension from
        # the indices on; unset lanes take the pass-through and touch no memory.
        array, *indices, mask, passthru = args
        result = np.array(passthru)
        expanding = isinstance(op, dhir_vector.ExpandLoadOp)
        unwritten = _Unwritten(op, array, result.shape)
        for k, where in _masked_lanes(op, array, indices, mask, expanding):
            unwritten.read(k, where)
            result[k] = array[where]
        return (unwritten.vector(_frozen(result)),)

    @handles(vector.MaskedStoreOp, dhir_vector.CompressStoreOp)
    def run_masked_store(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array, *indices, mask, value = args
        if not array.flags.writeable:
            fail(op, "writes into a constant memref.global")
        compressing = isinstance(op, dhir_vector.CompressStoreOp)
        for k, where in _masked_lanes(op, array, indices, mask, compressing):
            write_lane(op, array, where, value, k)
            array[where] = value[k]
        return ()

    @handles(dhir_vector.GatherOp)
    def run_gather(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array, *offsets, index_vec, mask, passthru = args
        result = np.array(passthru)
        unwritten = _Unwritten(op, array, result.shape)
        for lane, where in _gathered(op, array, offsets, index_vec, mask):
            unwritten.read(lane, where)
            result[lane] = array[where]
        return (unwritten.vector(_frozen(result)),)

    @handles(dhir_vector.ScatterOp)
    def run_scatter(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array, *offsets, index_vec, mask, value = args
        if not array.flags.writeable:
            fail(op, "writes into a constant memref.global")
        for lane, where in _gathered(op, array, offsets, index_vec, mask):  # in lane order:
            write_lane(op, array, where, value, lane)
            array[where] = value[lane]  # of two lanes at one element, the later one stays
        return ()

    @handles(dhir_vector.OuterProductOp)
    def run_outerproduct(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # Each product rounded, as arith.mulf/muli: MLIR lowers a float one with an
        # accumulator to vector.fma, which rounds once or twice by the CPU (see run_fma).
        lhs, rhs, *acc = args
        result = _new_vector(op, op.results[0].type)
        element = op.results[0].type.element_type  # pyright: ignore[reportAttributeAccessIssue]
        floats = not isinstance(element, IntegerType | IndexType)
        if acc and floats:
            fail(
                op,
                "with an accumulator on floats is not supported by the interpreter: MLIR "
                "lowers it to llvm.fmuladd, which rounds once or twice depending on the CPU",
            )
        kind = _kind_of(op, element)
        for lane in np.ndindex(*result.shape):
            factor = rhs if np.ndim(rhs) == 0 else rhs[lane[1]]
            product = combine(op, "mulf" if floats else "muli", _item(lhs[lane[0]]),
                              _item(factor), element)  # fmt: skip
            result[lane] = (
                combine(op, kind, _item(acc[0][lane]), product, element) if acc else product
            )
        return (_frozen(result),)

    @handles(dhir_vector.ContractionOp)
    def run_contract(
        self, interp: Interpreter, op: dhir_vector.ContractionOp, args: Values
    ) -> Values:
        return (run_contract(op, *args),)

    @handles(dhir_vector.PrintOp)
    def run_print(self, interp: Interpreter, op: dhir_vector.PrintOp, args: Values) -> Values:
        # As MLIR's runner utils print (printF32's "%g", printI64, printU64 for index),
        # to the same standard output: a string alone, else the value, then the
        # punctuation.
        if op.stringLiteral is not None:
            text = op.stringLiteral.data
        else:
            text = _printed(op, args[0], op.source.type) if op.source is not None else ""
            text += _PUNCTUATION[op.punctuation.data]
        sys.stdout.write(text)
        sys.stdout.flush()
        return ()

    @handles(vector.FMAOp)
    def run_fma(self, interp: Interpreter, op: vector.FMAOp, args: Values) -> Values:
        fail(
            op,
            "is not supported by the interpreter: MLIR lowers it to llvm.fmuladd, which "
            "rounds once or twice depending on the CPU; use math.fma, which rounds once",
        )

    @handles(vector.ReductionOp)
    def run_reduction(self, interp: Interpreter, op: vector.ReductionOp, args: Values) -> Values:
        lanes: list[Any] = [v.item() for v in np.asarray(args[0]).reshape(-1)]
        return (_reduce(op, [int(v) if isinstance(v, bool) else v for v in lanes], args[1:]),)

    @handles(dhir_vector.MaskOp)
    def run_vector_mask(self, interp: Interpreter, op: dhir_vector.MaskOp, args: Values) -> Values:
        # Only a reduction runs under a mask natively (dhir-mlir22-workarounds refuses
        # the others): the lanes the mask leaves off count as the kind's neutral value,
        # as LLVM's masked (vp) reductions and dhir-accurate-math's selects make them.
        inner = op.body.block.first_op
        if not isinstance(inner, vector.ReductionOp) or op.passthru is not None:
            fail(op, "is not supported by the interpreter around anything but a vector.reduction")
        mask = args[0]
        values = [interp.get_values((operand,))[0] for operand in inner.operands]
        neutral = _neutral(inner)
        lanes: list[Any] = [
            v.item() if on else neutral
            for v, on in zip(np.asarray(values[0]).reshape(-1), np.asarray(mask).reshape(-1))
        ]
        return (_reduce(inner, [int(v) if isinstance(v, bool) else v for v in lanes], values[1:]),)


def _reduce(op: vector.ReductionOp, lanes: list[Any], acc: Sequence[Any]) -> Any:
    """In lane order, as LLVM's ordered reductions (no reassoc flag) compute them."""
    kind = _kind(op)
    if kind in ("maximumf", "minimumf"):
        total = _x86_min_max(op, kind, lanes)
        return combine(op, kind, total, acc[0], op.dest.type) if acc else total
    if acc:
        total = acc[0]
    elif kind == "addf":
        total = 0.0  # MLIR's lowering starts from +0.0: -0.0 lanes sum to +0.0
    else:
        total = lanes.pop(0)
    for value in lanes:
        total = combine(op, kind, total, value, op.dest.type)
    return total


def _neutral(op: vector.ReductionOp) -> Any:
    """The value a lane a mask leaves off takes in a reduction of `op`'s kind."""
    kind = _kind(op)
    type_ = op.dest.type
    if kind in _FLOAT_NEUTRAL:
        return _FLOAT_NEUTRAL[kind]
    width = INDEX_WIDTH if isinstance(type_, IndexType) else getattr(type_, "bitwidth", 0)
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return {"addi": 0, "muli": 1, "andi": -1, "ori": 0, "xori": 0, "maxs": low,
            "mins": high, "maxu": 0, "minu": -1}[kind]  # fmt: skip


# maxnumf and minnumf skip a NaN: a masked-off lane is one (the kind's identity).
_FLOAT_NEUTRAL = {"addf": -0.0, "mulf": 1.0, "maximumf": -math.inf, "minimumf": math.inf,
                  "maxnumf": math.nan, "minnumf": math.nan}  # fmt: skip


_PUNCTUATION = {Punctuation.NO_PUNCTUATION: "", Punctuation.NEWLINE: "\n", Punctuation.COMMA: ", ",
                Punctuation.OPEN: "( ", Punctuation.CLOSE: " )"}  # fmt: skip


def _printed(op: Operation, value: Any, type_: Attribute) -> str:
    """`value` as vector.print writes it: `( 1, 2 )`, nested by rank."""
    if isinstance(type_, VectorType):
        lanes = np.asarray(value)
        if lanes.ndim == 0:
            return f"( {_printed(op, lanes.item(), type_.element_type)} )"
        inner = VectorType(type_.element_type, type_.get_shape()[1:]) if lanes.ndim > 1 else None
        parts = [_printed(op, lane, inner or type_.element_type) for lane in lanes]
        return f"( {', '.join(parts)} )"
    item = value.item() if isinstance(value, np.generic | np.ndarray) else value
    if isinstance(type_, IndexType):
        return str(int(item) % 2**INDEX_WIDTH)  # printU64
    if isinstance(type_, IntegerType):
        if type_.width.data > 64:
            fail(op, f"of {type_} is not supported: MLIR prints integers of up to 64 bits")
        return str(int(item))  # i1 as 0 or 1; others sign-extended to printI64
    number = float(item)
    if math.isnan(number):  # glibc's %g gives a NaN's sign
        return "-nan" if math.copysign(1.0, number) < 0 else "nan"
    return f"{number:g}"


def _x86_min_max(op: vector.ReductionOp, kind: str, lanes: list[Any]) -> Any:
    """As x86 code (16-byte registers) reduces llvm.vector.reduce.fmaximum/fminimum: the
    lower half with the upper, lane by lane, down to one register, then its lanes in
    order. Which of two NaNs comes out depends on this order."""
    per_register = 16 // np.dtype(value_dtype(op.dest.type) or np.float32).itemsize
    while len(lanes) > per_register and len(lanes) % 2 == 0:
        half = len(lanes) // 2
        pairs = zip(lanes[:half], lanes[half:])
        lanes = [combine(op, kind, a, b, op.dest.type) for a, b in pairs]
    total = lanes[0]
    for value in lanes[1:]:
        total = combine(op, kind, total, value, op.dest.type)
    return total


def _masked_lanes(
    op: Operation, array: np.ndarray, indices: Sequence[int], mask: np.ndarray, packed: bool
) -> list[tuple[int, tuple[int, ...]]]:
    """The set lanes of a 1-D mask and the element each touches: along the memref's
    innermost dimension from `indices`, lane k at k, or (`packed`, expanding and
    compressing) the k-th set lane at k."""
    if mask.ndim != 1 or not array.ndim:
        fail(op, "on a vector of rank other than 1 is not supported by the interpreter")
    lanes = [int(k) for k in np.flatnonzero(mask)]
    steps = range(len(lanes)) if packed else lanes
    base = list(indices)
    return [
        (k, checked_index(op, array, [*base[:-1], base[-1] + step]))
        for k, step in zip(lanes, steps)
    ]


def _gathered(
    op: Operation, array: np.ndarray, offsets: Sequence[int], index_vec: np.ndarray,
    mask: np.ndarray,
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:  # fmt: skip
    """Each set lane of a gather or scatter and its element: `index_vec`'s value in that
    lane elements on from `offsets`, in the memref's row-major order (MLIR adds it to the
    address of `offsets`), within the memref."""
    if not array.flags.c_contiguous:
        fail(op, "on a memref that is not contiguous is not supported by the interpreter")
    start = int(np.ravel_multi_index(checked_index(op, array, offsets), array.shape))
    found: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for lane in zip(*np.nonzero(mask)):
        flat = start + int(index_vec[lane])
        if not 0 <= flat < array.size:
            fail(op, f"reaches element {flat} of a memref of {array.size}, out of bounds")
        where = tuple(int(i) for i in np.unravel_index(flat, array.shape))
        found.append((tuple(int(i) for i in lane), where))
    return found


def _packed(type_: Attribute) -> bool:
    """Whether the interpreter's arrays hold `type_`'s elements in another width than
    LLVM's vectors do (i1 as a byte, bf16 as f32, i4 ...)."""
    element = type_.element_type if isinstance(type_, VectorType) else type_
    dtype = value_dtype(element)
    width = getattr(element, "bitwidth", None)
    return dtype is None or width is None or dtype.itemsize * 8 != width


# vector.combining_kind names, as arith.atomic_rmw_kind (`combine`) calls them.
_FLOAT_KINDS = {"add": "addf", "mul": "mulf"}
_INT_KINDS = {"add": "addi", "mul": "muli", "and": "andi", "or": "ori", "xor": "xori",
              "maxsi": "maxs", "minsi": "mins", "maxui": "maxu", "minui": "minu"}  # fmt: skip


def _item(value: Any) -> Any:
    item = value.item() if isinstance(value, np.generic | np.ndarray) else value
    return int(item) if isinstance(item, bool) else item


def _kind_of(op: Operation, element: Attribute) -> str:
    kind = str(op.properties["kind"].data.value)  # pyright: ignore[reportAttributeAccessIssue]
    if isinstance(element, IntegerType | IndexType):
        return _INT_KINDS.get(kind, kind)
    return _FLOAT_KINDS.get(kind, kind)


def _kind(op: vector.ReductionOp) -> str:
    kind = op.kind.data.value
    if isinstance(op.dest.type, IntegerType | IndexType):
        return _INT_KINDS.get(kind, kind)
    return _FLOAT_KINDS.get(kind, kind)
