"""The memref dialect on NumPy arrays (views share their buffer)."""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    IndexType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    UnitAttr,
    UnrankedMemRefType,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    ReturnedValues,
)
from xdsl.ir import Attribute, Operation

from dhir.backends.interp.core import (
    INDEX_WIDTH,
    Named,
    Returned,
    Values,
    assign,
    f32_value,
    fail,
    handles,
    put,
    register,
    value_dtype,
)
from dhir.backends.interp.scalars import combine
from dhir.backends.interp.written import (
    allocation,
    check_read_one,
    copy_flags,
    is_allocation,
    mark,
    mark_one,
    parent_array,
)
from dhir.dialects import memref
from dhir.dialects.memref import (
    ATOMIC_RMW_KINDS,
    AtomicYieldOp,
    GenericAtomicRMWOp,
    ReshapeOp,
    TransposeOp,
)
from dhir.ir.symbols import Symbols

if TYPE_CHECKING:
    from dhir.backends.interp.gpu import GpuIds


@dataclass
class RunState:
    """Per-run data: memref.global buffers, the GPU thread being run, where a GPU thread
    waits at a barrier, linalg indices."""

    globals: dict[Operation, np.ndarray] = field(default_factory=dict[Operation, np.ndarray])
    gpu: "GpuIds | None" = None  # set by dhir.backends.interp.gpu while a kernel runs
    # Set by dhir.backends.interp.phases while a block whose threads may wait runs: a
    # barrier's op, or a collective op and what the thread brings to it (its Meeting),
    # to what the op gives the thread.
    barrier: Callable[..., Any] | None = None
    linalg_indices: list[tuple[int, ...]] = field(default_factory=list[tuple[int, ...]])


def state(interpreter: Interpreter) -> RunState:
    return interpreter.get_data(MemrefImpls, "state", RunState)


def element_dtype(op: Operation, type_: MemRefType[Attribute]) -> np.dtype:
    dtype = value_dtype(type_.element_type)
    if dtype is None:
        fail(
            op,
            f"needs a {type_}; the interpreter runs memrefs of "
            "i1/i8/i16/i32/i64/index/f16/bf16/f32/f64 only",
        )
    return dtype


def new_array(
    op: Operation, type_: Attribute, dynamic: Sequence[int], made_by: Operation | None = None
) -> np.ndarray:
    """A buffer for a memref type, made by `made_by` (else `op`), that nothing has
    written (MLIR leaves it uninitialized): reading an element of it before writing
    it is an error (dhir.backends.interp.written)."""
    assert isinstance(type_, MemRefType)
    if not isinstance(type_.layout, NoneAttr):
        fail(op, f"allocates a {type_} with a layout, which the interpreter does not support")
    sizes = iter(dynamic)
    shape = [next(sizes) if d == DYNAMIC_INDEX else d for d in type_.get_shape()]
    if any(d < 0 for d in shape):
        fail(op, f"allocates a negative size {tuple(shape)}")
    dtype = element_dtype(op, type_)
    if math.prod(shape) * dtype.itemsize >= 2**63:
        fail(
            op,
            f"allocates {tuple(shape)} elements of {dtype.itemsize} bytes, more bytes than "
            "the largest signed 64-bit number (MLIR's lowering would wrap them)",
        )
    return allocation(op, np.zeros(shape, dtype), made_by)


def checked_index(op: Operation, array: np.ndarray, indices: Sequence[int]) -> tuple[int, ...]:
    for axis, (i, size) in enumerate(zip(indices, array.shape)):
        if not 0 <= i < size:
            shape = "x".join(map(str, array.shape)) or "scalar"
            fail(
                op,
                f"accesses index {i} of dimension {axis}, whose size is {size}, "
                f"out of bounds (memref of shape {shape}, indices {list(indices)})",
                _access_named(op, axis),
            )
    return tuple(indices)


def _access_named(op: Operation, axis: int) -> tuple[Named, ...]:
    """The size along `axis` of the one memref `op` accesses and, for a memref.load or
    store, the index it gives there: what the failed access's note names."""
    memories = [v for v in op.operands if isinstance(v.type, MemRefType)]
    if len(memories) != 1:
        return ()  # a linalg op's: which of its operands is not known here
    named: list[Named] = [("", memories[0], axis)]
    if isinstance(op, memref.LoadOp | memref.StoreOp) and axis < len(op.indices):
        named.append(("the index is ", op.indices[axis], None))
    return tuple(named)


def load(op: Operation, array: np.ndarray, indices: Sequence[int]) -> Any:
    index = checked_index(op, array, indices) if indices else ()
    check_read_one(op, array, index)
    value = array.item(index)
    if value != value and array.dtype == np.float32:  # a NaN: keep its every bit
        return f32_value(int(array.view(np.uint32)[index]))
    return value


def store(op: Operation, array: np.ndarray, indices: Sequence[int], value: Any) -> None:
    index = checked_index(op, array, indices)
    try:
        put(array, index, value)
    except ValueError:  # read-only: see _global_array
        fail(op, "writes into a constant memref.global")
    mark_one(array, index)


def copy(op: Operation, source: np.ndarray, target: np.ndarray) -> None:
    if source.shape != target.shape:
        fail(op, f"copies shape {source.shape} into shape {target.shape}")
    if not target.flags.writeable:
        fail(op, "writes into a constant memref.global")
    same = source.__array_interface__ == target.__array_interface__
    if not same and np.shares_memory(source, target):
        # Native code copies element by element, or with memcpy: the order decides.
        fail(op, "copies between views that overlap, which MLIR leaves undefined")
    copy_flags(op, source, target)
    assign(target, source)


def _static_or_dynamic(static: Sequence[int], dynamic: Sequence[int]) -> list[int]:
    values = iter(dynamic)
    return [next(values) if v == DYNAMIC_INDEX else v for v in static]


def dropped_unit_dims(sizes: Sequence[int], shape: Sequence[int]) -> list[int] | None:
    """Which size-1 dims a rank-reducing subview drops so that `sizes` becomes `shape`
    (any answer gives the same view: unit dims do not affect addressing)."""
    if not shape:
        return list(range(len(sizes))) if all(s == 1 for s in sizes) else None
    if not sizes:
        return None
    if shape[0] in (DYNAMIC_INDEX, sizes[0]):
        rest = dropped_unit_dims(sizes[1:], shape[1:])
        if rest is not None:
            return [d + 1 for d in rest]
    if sizes[0] == 1:
        rest = dropped_unit_dims(sizes[1:], shape)
        if rest is not None:
            return [0] + [d + 1 for d in rest]
    return None


def _check_shape(op: Operation, array: np.ndarray, type_: Attribute) -> None:
    if isinstance(type_, UnrankedMemRefType):
        return  # any shape casts to an unranked memref (`memref<*xf32>`)
    assert isinstance(type_, MemRefType)
    want = type_.get_shape()
    wrong = [d for d, (w, g) in enumerate(zip(want, array.shape)) if w not in (DYNAMIC_INDEX, g)]
    if len(want) != array.ndim or wrong:
        named = tuple((f"dimension {d}: ", op.operands[0], d) for d in wrong)
        fail(op, f"gets a memref of shape {array.shape} where {type_} is expected", named)


def _check_layout(op: Operation, array: np.ndarray, type_: Attribute) -> None:
    """Refuse a cast to a type whose static offset or strides `array` does not have: MLIR
    leaves such a cast undefined, and native code addresses the result by the type's
    (a view at offset 2 cast to `memref<?xi32>` is read from element 0 there)."""
    if not isinstance(type_, MemRefType) or array.size == 0:
        return
    root = base_array(array)
    if not root.flags.c_contiguous:
        return
    item = array.itemsize
    offset = (array.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // item
    strides = [s // item for s in array.strides]
    if isinstance(type_.layout, NoneAttr):
        want_offset, want = 0, list(MemRefType.strides_for_shape(array.shape))
    elif isinstance(type_.layout, StridedLayoutAttr):
        want_offset, want = type_.layout.get_offset(), list(type_.layout.get_strides())
    else:
        return  # an affine map layout
    wrong_offset = want_offset is not None and want_offset != offset
    wrong_strides = any(
        w is not None and n > 1 and w != s for w, s, n in zip(want, strides, array.shape)
    )
    if wrong_offset or wrong_strides:
        fail(
            op,
            f"casts a memref of offset {offset} and strides {strides} to {type_}, whose "
            f"layout says otherwise: MLIR leaves such a cast undefined (native code uses "
            f"the type's offset and strides); cast to a layout with `?` where they vary",
        )


def _offsets_sizes_strides(
    op: memref.SubviewOp | memref.ReinterpretCastOp, dynamic: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    n_offsets, n_sizes = len(op.offsets), len(op.sizes)
    return (
        _static_or_dynamic(op.static_offsets.get_values(), dynamic[:n_offsets]),
        _static_or_dynamic(op.static_sizes.get_values(), dynamic[n_offsets : n_offsets + n_sizes]),
        _static_or_dynamic(op.static_strides.get_values(), dynamic[n_offsets + n_sizes :]),
    )


class ViewedBytes(np.ndarray):
    """What a memref.view makes of bytes: a buffer of its own, as in MLIR (its
    reinterpret_casts start from its first byte, not from the bytes' first). Its views
    are of this class too, but not buffers themselves."""

    own: bool = False

    def __array_finalize__(self, obj: object) -> None:
        self.own = False


def base_array(array: np.ndarray) -> np.ndarray:
    """The array `array` is a view of (itself when it is none), as MLIR's base buffer."""
    while True:
        if is_allocation(array) or (isinstance(array, ViewedBytes) and array.own):
            return array  # a view of a zero-filled array, holding the written flags
        parent = parent_array(array)
        if parent is None or parent.dtype != array.dtype:
            return array  # a memref.view of bytes is a buffer of its own, as in MLIR
        array = parent


@register
class MemrefImpls(InterpreterFunctions):
    def __init__(self) -> None:
        # Globals found in a table of the module's names, as ControlImpls finds callees:
        # xDSL's lookup_symbol reads every name at every memref.get_global run.
        self._symbols = Symbols()

    @handles(memref.AllocOp, memref.AllocaOp)
    def run_alloc(self, interp: Interpreter, op: memref.AllocOp, args: Values) -> Values:
        return (new_array(op, op.memref.type, args[: len(op.dynamic_sizes)]),)

    @handles(memref.DeallocOp)
    def run_dealloc(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return ()

    @handles(memref.LoadOp)
    def run_load(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (load(op, args[0], args[1:]),)

    @handles(memref.StoreOp)
    def run_store(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        store(op, args[1], args[2:], args[0])
        return ()

    @handles(memref.CopyOp)
    def run_copy(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        copy(op, *args)
        return ()

    @handles(memref.CastOp, memref.MemorySpaceCastOp, memref.AssumeAlignmentOp)
    def run_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        _check_shape(op, args[0], op.results[0].type)
        _check_layout(op, args[0], op.results[0].type)
        return (args[0],)

    @handles(memref.DimOp)
    def run_dim(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array, axis = args
        if not 0 <= axis < array.ndim:
            name = memref.dim_written(op)  # a tensor.dim, bufferized
            what = "memref" if name == op.name else "tensor"
            fail(op, f"asks for dimension {axis} of a rank-{array.ndim} {what}", name=name)
        return (array.shape[axis],)

    @handles(memref.RankOp)
    def run_rank(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (args[0].ndim,)

    @handles(memref.SubviewOp)
    def run_subview(self, interp: Interpreter, op: memref.SubviewOp, args: Values) -> Values:
        array = args[0]
        offsets, sizes, strides = _offsets_sizes_strides(op, args[1:])
        for axis, (offset, size, stride, dim) in enumerate(
            zip(offsets, sizes, strides, array.shape)
        ):
            last = offset + (size - 1) * stride
            if size < 0 or stride < 0 or offset < 0 or (size > 0 and last >= dim) or offset > dim:
                fail(
                    op,
                    f"takes offset {offset}, size {size}, stride {stride} of dimension "
                    f"{axis}, whose size is {dim}: out of bounds (or a negative stride)",
                )
        shape = op.result.type.get_shape()
        dropped = dropped_unit_dims(sizes, shape) if len(shape) < len(sizes) else []
        if dropped is None:
            fail(op, f"cannot drop unit dimensions of sizes {sizes} to get {op.result.type}")
        # A stride of 0 (MLIR allows it) repeats one element: a slice of it, then
        # as_strided gives that dimension its size and stride 0.
        index = tuple(
            o if axis in dropped else slice(o, o + (n - 1) * max(s, 1) + 1 if n else o, s or 1)
            for axis, (o, n, s) in enumerate(zip(offsets, sizes, strides))
        )
        view = array[(*index, ...)]  # `...`: a view even when every index is an int
        kept = [(n, s) for axis, (n, s) in enumerate(zip(sizes, strides)) if axis not in dropped]
        if all(s for _, s in kept):
            return (view,)
        shape = [n if s else min(n, 1) for n, s in kept]
        view = view[tuple(slice(0, n) for n in shape)]
        repeated = [n for n, _ in kept]
        steps = [step if s else 0 for step, (_, s) in zip(view.strides, kept)]
        return (np.lib.stride_tricks.as_strided(view, repeated, steps),)

    @handles(memref.ViewOp)
    def run_view(self, interp: Interpreter, op: memref.ViewOp, args: Values) -> Values:
        # The bytes from `shift` on, seen as the result's elements (a view, as in MLIR).
        source, shift, *dynamic = args
        type_ = op.result.type
        assert isinstance(type_, MemRefType)
        dtype = element_dtype(op, type_)
        element = type_.element_type
        width = INDEX_WIDTH if isinstance(element, IndexType) else getattr(element, "bitwidth", 0)
        if width != dtype.itemsize * 8:
            fail(op, f"to {type_} is not supported by the interpreter, which holds its "
                     f"elements in {dtype.itemsize} bytes each")  # fmt: skip
        shape = _static_or_dynamic(type_.get_shape(), dynamic)
        size = math.prod(shape) * dtype.itemsize
        if shift < 0 or min(shape, default=0) < 0 or shift + size > source.nbytes:
            fail(
                op,
                f"views {size} bytes from byte {shift} of a buffer of {source.nbytes} "
                "bytes: out of bounds",
            )
        if not source.flags.c_contiguous:
            fail(op, "runs on a buffer the interpreter does not hold contiguously")
        raw = source.reshape(-1).view(np.dtype("V1"))[shift : shift + size]
        viewed = raw.view(dtype).reshape(shape).view(ViewedBytes)
        viewed.own = True  # an i8 view of i8 bytes at a shift is no view of the bytes' start
        return (viewed,)

    @handles(memref.CollapseShapeOp, memref.ExpandShapeOp)
    def run_reshape(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array = args[0]
        if isinstance(op, memref.ExpandShapeOp):
            shape = _static_or_dynamic(op.static_output_shape.get_values(), args[1:])
        else:
            reassociation = op.reassociation  # type: ignore[attr-defined]
            groups = [[i.value.data for i in group] for group in reassociation]
            shape = [math.prod(array.shape[i] for i in g) for g in groups]
        return (_reshaped(op, array, shape),)

    @handles(ReshapeOp)
    def run_memref_reshape(self, interp: Interpreter, op: ReshapeOp, args: Values) -> Values:
        array, sizes = args[0], [int(n) for n in np.asarray(args[1]).reshape(-1)]
        result = op.result.type
        static = result.get_shape() if isinstance(result, MemRefType) else None
        if static is not None and (
            len(static) != len(sizes)
            or any(s != DYNAMIC_INDEX and s != n for s, n in zip(static, sizes))
        ):
            fail(op, f"reshapes into sizes {sizes}, which {result} does not have")
        return (_reshaped(op, array, sizes),)

    @handles(TransposeOp)
    def run_transpose(self, interp: Interpreter, op: TransposeOp, args: Values) -> Values:
        return (args[0].transpose(op.axes()),)  # a view, as in MLIR

    @handles(memref.ReinterpretCastOp)
    def run_reinterpret_cast(
        self, interp: Interpreter, op: memref.ReinterpretCastOp, args: Values
    ) -> Values:
        # Relative to the start of the underlying allocation, like MLIR's base pointer.
        root = base_array(args[0])
        offsets, sizes, strides = _offsets_sizes_strides(op, args[1:])
        offset = offsets[0]
        if any(n < 0 for n in sizes):
            # A memref's sizes are 0 or more (native code's check stops here too).
            fail(
                op,
                f"views offset {offset}, sizes {sizes}, strides {strides}: a size is "
                f"negative; give each size 0 or more",
            )
        # A negative stride reaches below the offset (MLIR's layouts allow it: native
        # code addresses offset + i * stride as for any other).
        steps = [(n - 1) * s for n, s in zip(sizes, strides) if n > 0]
        low = offset + sum(d for d in steps if d < 0)
        high = offset + sum(d for d in steps if d > 0)
        # A view of no elements reaches none: of an empty buffer too, at any offset up
        # to its end (the cast MLIR makes of a memref<0x3xf32> as memref<0xf32>).
        empty = 0 in sizes and 0 <= offset <= root.size
        inside = empty or (low >= 0 and high < root.size)
        if not (root.flags.c_contiguous and inside):
            fail(
                op,
                f"views offset {offset}, sizes {sizes}, strides {strides} outside its "
                f"buffer of {root.size} elements",
            )
        flat = root.reshape(-1)[offset:]
        item = flat.itemsize
        return (np.lib.stride_tricks.as_strided(flat, sizes, [s * item for s in strides]),)

    @handles(memref.ExtractStridedMetaDataOp)
    def run_extract_strided_metadata(
        self, interp: Interpreter, op: Operation, args: Values
    ) -> Values:
        # The base is a 0-d view of the allocation's first element, so that a
        # reinterpret_cast of it sees the whole allocation, as in MLIR.
        array = args[0]
        root = base_array(array)
        if not root.flags.c_contiguous:
            fail(op, "runs on a buffer the interpreter does not hold contiguously")
        item = array.itemsize
        start = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        base = root.reshape(-1)[:1].reshape(())
        strides = [s // item for s in array.strides]
        return (base, start // item, *array.shape, *strides)

    @handles(memref.ExtractAlignedPointerAsIndexOp)
    def run_aligned_pointer(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # The address of the buffer in this process, as native code has it: C code the
        # program links may be handed it (dhir.backends.interp.external).
        type_ = op.operands[0].type
        if isinstance(type_, MemRefType) and isinstance(type_.element_type, BFloat16Type):
            fail(
                op,
                "takes the address of a bf16 memref, which the interpreter holds in f32: "
                "C would read f32 there; pass the memref itself (llvm.emit_c_interface), "
                "or run natively",
            )
        return (base_array(args[0]).__array_interface__["data"][0],)

    @handles(memref.GetGlobalOp)
    def run_get_global(self, interp: Interpreter, op: memref.GetGlobalOp, args: Values) -> Values:
        found = self._symbols.lookup(op, op.name_)
        if not isinstance(found, memref.GlobalOp):
            fail(op, f"names @{op.name_.string_value()}, which is not a memref.global")
        buffers = state(interp).globals
        if found not in buffers:
            buffers[found] = _global_array(op, found)
        return (buffers[found],)

    @handles(memref.AllocaScopeOp)
    def run_alloca_scope(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return interp.run_ssacfg_region(op.regions[0], (), "memref.alloca_scope")

    @handles(memref.AllocaScopeReturnOp)
    def run_alloca_scope_return(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(memref.AtomicRMWOp)
    def run_atomic_rmw(self, interp: Interpreter, op: memref.AtomicRMWOp, args: Values) -> Values:
        value, array, *indices = args
        kind = ATOMIC_RMW_KINDS[op.kind.value.data]
        if kind == "assign" and not op.result.uses:  # a store: the old value is unused
            old = array.item(checked_index(op, array, indices))
        else:
            old = load(op, array, indices)
        store(op, array, indices, combine(op, kind, old, value, op.result.type))
        return (old,)

    @handles(GenericAtomicRMWOp)
    def run_generic_atomic_rmw(
        self, interp: Interpreter, op: GenericAtomicRMWOp, args: Values
    ) -> Values:
        array, *indices = args
        old = load(op, array, indices)
        (new,) = interp.run_ssacfg_region(op.atomic_body, (old,), "memref.generic_atomic_rmw")
        store(op, array, indices, new)
        return (old,)

    @handles(AtomicYieldOp)
    def run_atomic_yield(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()


def _reshaped(op: Operation, array: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """`array` as `shape`, a view of it, as in MLIR; an error at `op` where the sizes do
    not hold its elements or no view can be."""
    if math.prod(shape) != array.size or min(shape, default=0) < 0:
        fail(op, f"reshapes {array.shape} into {tuple(shape)}")
    try:
        return array.reshape(shape, copy=False)
    except ValueError:
        fail(op, f"cannot reshape a strided view of shape {array.shape} without copying")


def _global_array(op: Operation, global_op: memref.GlobalOp) -> np.ndarray:
    type_ = global_op.type
    initial = global_op.initial_value
    if isinstance(initial, UnitAttr):  # `= uninitialized`: undefined until written
        return new_array(op, type_, [], global_op)
    if not isinstance(initial, DenseIntOrFPElementsAttr):
        fail(op, f"reads @{global_op.sym_name.data}, which has no initial value to run with")
    values = np.array(initial.get_values()).astype(element_dtype(op, type_))
    array = values.reshape(type_.get_shape())
    if global_op.constant is not None:
        array.flags.writeable = False  # a store is a run-time error
        return array
    # The program's own memory, written by its initial value: a copy of an element
    # nothing wrote into it is carried, as into a buffer it allocated.
    buffer = allocation(op, np.ascontiguousarray(array), global_op)
    mark(buffer)
    return buffer
