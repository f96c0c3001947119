"""Shard collectives as calls into dhir's runtime, in two steps around bufferization.

`dhir-shard-stubs`, on tensors (after mlir-opt-22's `shard-partition`): each collective
becomes a call to a private function declared for it alone, whose `dhir.collective`
attribute says which runtime function does its work and with which words (the grid's
description, sizes in bytes, the reduction); the process queries become arithmetic on
the MPI rank, and the grids go. One-shot bufferization then turns each such call into
one on memrefs (its result a new buffer).

`dhir-shard-collectives`, on memrefs: each such call becomes a buffer for its result and
a call to `dhir_rt_shard_*` (dhir/runtime/dhir_rt.h) with the buffers' addresses. Every
rank runs the code alike (host code), so every rank makes the same calls in the same
order, as MPI's collectives need.

A split result on its way out of the entry (dhir.toolchain.shards marks the gathers that
bring it whole to the return with `dhir.result_part`) is not gathered where the gathered
buffer is only copied into the entry's out-parameter: each rank writes its shard into the
result file itself (`dhir_rt_shard_write_box`; one rank of those holding the same shard).
Likewise an argument used only by the slices that take it to its shard
(`dhir.input_part`): each rank reads its shard from the input file
(`dhir_rt_shard_read_box`). Such parameters are held by no rank (an empty band in
`dhir.shard_bands`), and nothing is sent.

Roots and peers given as values, reductions of another element type or of f16, and a
dimension split over more than one grid axis in `update_halo` are refused with the op's
location.
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    ShapedType,
    Signedness,
    SymbolRefAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.shard_layout import Padding
from dhir.dialects import arith, func, shard
from dhir.dialects import memref as dmemref
from dhir.ir.diagnostics import error_at
from dhir.ir.walk import find_ops
from dhir.transforms.building import ConstantArrays, aligned_address

COLLECTIVE = "dhir.collective"
# On an entry every rank runs alike (a partitioned shard program): CodeDrop leaves it.
SPMD = "dhir.spmd"
# On such an entry: per argument whose shard is a block of rows, each rank's rows (as
# dhir-lower-to-mpi's `dhir.bands`): each rank loads only those.
SHARD_BANDS = "dhir.shard_bands"
# On the gathers of a result on its way out: {result = K} and, on the first, the split of
# the shard it starts from (split = [axes per dimension]); on the slices of an argument on
# its way in: {argument = K} and, on the last, the split of the shard it ends in.
RESULT_PART = "dhir.result_part"
INPUT_PART = "dhir.input_part"
# On an all_reduce or reduce_scatter of integers: compare them unsigned (max, min).
UNSIGNED = "dhir.unsigned"
STUB_PREFIX = "__dhir_collective"
RANK = "dhir_rt_comm_rank"
# The runtime's numbering (dhir_rt.c, shard_type and shard_op).
_TYPES = ["f64", "f32", "i64", "i32", "i16", "i8", "ui64", "ui32", "ui16", "ui8"]
_REDUCTIONS = ["sum", "max", "min", "product", "bitwise_and", "bitwise_or", "bitwise_xor"]
_REDUCTIONS += ["average"]
# The reductions dhir takes on i1, as the reductions on its bytes that compute them.
_BOOLEAN = {"sum": "bitwise_xor", "product": "bitwise_and"}
_BOOLEAN |= {r: r for r in ("bitwise_and", "bitwise_or", "bitwise_xor")}
_SIGNED_BOOLEAN = {"max": "bitwise_and", "min": "bitwise_or"}
_UNSIGNED_BOOLEAN = {"max": "bitwise_or", "min": "bitwise_and"}
# Each runtime function's integer arguments after the grid's address and the buffers'.
_WORDS = {
    "dhir_rt_shard_all_reduce": 3,
    "dhir_rt_shard_all_gather": 2,
    "dhir_rt_shard_all_slice": 2,
    "dhir_rt_shard_all_to_all": 4,
    "dhir_rt_shard_broadcast": 2,
    "dhir_rt_shard_shift": 4,
    "dhir_rt_shard_send": 2,
    "dhir_rt_shard_recv": 2,
}
_HALO = "dhir_rt_shard_update_halo"
_WRITE_BOX = "dhir_rt_shard_write_box"
_READ_BOX = "dhir_rt_shard_read_box"


@dataclass(frozen=True)
class _Work:
    """What a collective's stub stands for: one or two runtime calls, each with its
    words; the grid's description (and, for update_halo, its layout words after it)."""

    calls: tuple[tuple[str, tuple[int, ...]], ...]
    grid: tuple[int, ...]


@dataclass(frozen=True)
class ShardStubsPass(ModulePass):
    """Collectives to calls of private stubs, process queries to arithmetic (on tensors)."""

    name = "dhir-shard-stubs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        stub_collectives(op)


@dataclass(frozen=True)
class ShardCollectivesPass(ModulePass):
    """Calls of collective stubs to calls of dhir's runtime (on memrefs)."""

    name = "dhir-shard-collectives"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_collectives(op)


def grid_shapes(module: ModuleOp) -> dict[str, tuple[int, ...]]:
    """The shape of each `shard.grid` of `module`, by name."""
    return {g.sym_name.data: g.shape.get_values() for g in find_ops(module, shard.GridOp)}


def stub_collectives(module: ModuleOp) -> None:
    """`dhir-shard-stubs` on `module` (see the module docstring); a located error for a
    collective dhir cannot run, or a shard op other than those left over."""
    grids = grid_shapes(module)
    stubs: list[func.FuncOp] = []
    for op in list(module.walk()):
        if isinstance(op, _QUERIES):
            _replace(op, *_query(op, _shape(grids, op)))
        elif isinstance(op, _COLLECTIVES):
            stub = _stub(op, _work(op, _shape(grids, op)), len(stubs))
            if isinstance(op, (shard.AllGatherOp, shard.AllSliceOp)):
                _carry_part(op, stub, _shape(grids, op))
            stubs.append(stub)
    for grid in find_ops(module, shard.GridOp):
        grid.detach()
        grid.erase()
    for stub in stubs:
        module.body.block.add_op(stub)
    left = next((op for op in module.walk() if shard.is_shard_op(op)), None)
    if left is not None:
        raise error_at(left, f"{left.name} is left after partitioning; dhir cannot run it")
    declared = {f.sym_name.data for f in find_ops(module, func.FuncOp)}
    if RANK in _called(module) - declared:
        module.body.block.add_op(func.FuncOp.external(RANK, [], [i32]))


def _shape(grids: dict[str, tuple[int, ...]], op: Operation) -> tuple[int, ...]:
    grid = op.properties["grid"]
    assert isinstance(grid, SymbolRefAttr)
    shape = grids.get(grid.root_reference.data)
    if shape is None:
        raise error_at(
            op,
            f"{op.name} names the grid @{grid.root_reference.data}, which the "
            "module does not define",
        )
    if any(n <= 0 for n in shape):
        raise error_at(
            op,
            f"the grid @{grid.root_reference.data} has a size that is not "
            "fixed; give every grid axis its size",
        )
    return shape


_QUERIES = (shard.ProcessLinearIndexOp, shard.ProcessMultiIndexOp, shard.GridShapeOp)


def _query(op: Operation, shape: tuple[int, ...]) -> tuple[list[Operation], list[SSAValue]]:
    """Ops computing the query's results, and those results in order."""
    if isinstance(op, shard.GridShapeOp):
        axes = op.axes.get_values() or tuple(range(len(shape)))
        sizes = [arith.ConstantOp(IntegerAttr(shape[a], IndexType())) for a in axes]
        return list(sizes), [c.result for c in sizes]
    rank = func.CallOp(RANK, [], [i32])
    index = arith.IndexCastOp(rank.res[0], IndexType())
    ops: list[Operation] = [rank, index]
    if isinstance(op, shard.ProcessLinearIndexOp):
        return ops, [index.result]
    assert isinstance(op, shard.ProcessMultiIndexOp)
    results: list[SSAValue] = []
    for axis in op.axes.get_values() or tuple(range(len(shape))):
        stride = arith.ConstantOp(IntegerAttr(math.prod(shape[axis + 1 :]), IndexType()))
        size = arith.ConstantOp(IntegerAttr(shape[axis], IndexType()))
        above = arith.DivUIOp(index.result, stride.result)
        coordinate = arith.RemUIOp(above.result, size.result)
        ops += [stride, size, above, coordinate]
        results.append(coordinate.result)
    return ops, results


def _replace(op: Operation, ops: list[Operation], values: Sequence[SSAValue]) -> None:
    block = op.parent_block()
    assert block is not None
    block.insert_ops_before(ops, op)
    for old, new in zip(op.results, values, strict=True):
        old.replace_all_uses_with(new)
    op.detach()
    op.erase()


_COLLECTIVES = (
    shard.AllReduceOp,
    shard.AllGatherOp,
    shard.AllSliceOp,
    shard.AllToAllOp,
    shard.ReduceScatterOp,
    shard.BroadcastOp,
    shard.GatherOp,
    shard.ScatterOp,
    shard.ReduceOp,
    shard.ShiftOp,
    shard.UpdateHaloOp,
    shard.SendOp,
    shard.RecvOp,
)


def _work(op: Operation, shape: tuple[int, ...]) -> _Work:
    source, target = _tensor(op, op.operands[0].type), _tensor(op, op.results[0].type)
    if isinstance(op, shard.UpdateHaloOp):
        return _halo(op, shape, source)
    axes = op.grid_axes.get_values()  # pyright: ignore[reportAttributeAccessIssue]
    grid = (len(shape), *shape, len(axes), *axes)
    members = math.prod(shape[a] for a in axes)
    element = _element_bytes(op, source)
    if isinstance(op, (shard.AllReduceOp, shard.ReduceOp)):
        return _Work((_reduce(op, source, target),), grid)
    if isinstance(op, (shard.AllGatherOp, shard.GatherOp)):
        # A gather leaves the whole on every member, its root included.
        words = _cut(source, int(op.gather_axis.value.data), element)
        return _Work((("dhir_rt_shard_all_gather", words),), grid)
    if isinstance(op, shard.AllSliceOp):
        words = _cut(target, int(op.slice_axis.value.data), element)
        return _Work((("dhir_rt_shard_all_slice", words),), grid)
    if isinstance(op, shard.AllToAllOp):
        split, concat = int(op.split_axis.value.data), int(op.concat_axis.value.data)
        chunk = _resized(source, split, source.get_shape()[split] // members)
        words = (*_cut(chunk, split, element), *_cut(chunk, concat, element))
        return _Work((("dhir_rt_shard_all_to_all", words),), grid)
    if isinstance(op, shard.ReduceScatterOp):
        reduced = _reduce(op, source, source)
        words = _cut(target, int(op.scatter_axis.value.data), element)
        return _Work((reduced, ("dhir_rt_shard_all_slice", words)), grid)
    if isinstance(op, (shard.BroadcastOp, shard.ScatterOp)):
        root = _root(op, shape, axes)
        broadcast = ("dhir_rt_shard_broadcast", (_bytes(source, element), root))
        if isinstance(op, shard.BroadcastOp):
            return _Work((broadcast,), grid)
        words = _cut(target, int(op.scatter_axis.value.data), element)
        return _Work((broadcast, ("dhir_rt_shard_all_slice", words)), grid)
    if isinstance(op, (shard.SendOp, shard.RecvOp)):
        return _Work((_point_to_point(op, shape, axes, element, source),), grid)
    assert isinstance(op, shard.ShiftOp)
    axis = int(op.shift_axis.value.data)
    words = (_bytes(source, element), axis, op.offset.value.data, 1 if op.rotate else 0)
    return _Work((("dhir_rt_shard_shift", words),), grid)


def _tensor(op: Operation, type_: Attribute) -> TensorType:
    if not isinstance(type_, TensorType) or any(n < 0 for n in type_.get_shape()):
        raise error_at(op, f"{op.name} on {type_}: dhir runs collectives on tensors of fixed shape")
    return type_


def _element_bytes(op: Operation, type_: TensorType) -> int:
    element = type_.get_element_type()
    if isinstance(element, (Float16Type, Float32Type, Float64Type)):
        return element.bitwidth // 8
    if isinstance(element, IntegerType) and element.width.data in (8, 16, 32, 64):
        return element.width.data // 8
    if isinstance(element, IntegerType) and element.width.data == 1:
        return 1  # a buffer of i1 holds a byte, 0 or 1, per element
    if isinstance(element, IndexType):
        return 8
    raise error_at(
        op,
        f"{op.name} on elements of {element}: dhir's collectives take floats, "
        "i1 and integers of 8 to 64 bits",
    )


def _bytes(type_: ShapedType, element: int) -> int:
    return math.prod(type_.get_shape()) * element


def _cut(type_: ShapedType, dim: int, element: int) -> tuple[int, int]:
    """(outer, inner bytes) of `type_` around dimension `dim`."""
    shape = type_.get_shape()
    return math.prod(shape[:dim]), math.prod(shape[dim:]) * element


def _resized(type_: TensorType, dim: int, size: int) -> TensorType:
    shape = list(type_.get_shape())
    shape[dim] = size
    return TensorType(type_.get_element_type(), shape)


def _reduce(op: Operation, source: TensorType, target: TensorType) -> tuple[str, tuple[int, ...]]:
    if source.get_element_type() != target.get_element_type():
        raise error_at(
            op,
            f"{op.name} from {source.get_element_type()} to "
            f"{target.get_element_type()}: dhir reduces in the input's element type; "
            "convert the elements before or after",
        )
    reduction = str(op.properties["reduction"].data)  # pyright: ignore[reportAttributeAccessIssue]
    element = source.get_element_type()
    if element == IntegerType(1):
        # Bytes of 0 or 1: i1's sum is xor and its product and (as arith.addi and muli
        # on i1); signed, true is -1, so its max is and (unsigned, or).
        boolean = _BOOLEAN | (_UNSIGNED_BOOLEAN if UNSIGNED in op.attributes else _SIGNED_BOOLEAN)
        if reduction not in boolean:
            raise error_at(
                op,
                f"{op.name} with reduction {reduction} on i1 is not supported: dhir "
                f"reduces i1 by {', '.join(boolean)}",
            )
        count = math.prod(source.get_shape())
        how = _REDUCTIONS.index(boolean[reduction])
        return "dhir_rt_shard_all_reduce", (count, _TYPES.index("ui8"), how)
    kind = _type_number(element)
    if isinstance(element, IntegerType) and UNSIGNED in op.attributes:
        kind = _type_number(IntegerType(element.width.data, Signedness.UNSIGNED))
    if kind is None or reduction not in _REDUCTIONS:
        raise error_at(
            op,
            f"{op.name} with reduction {reduction} on {element} is not supported: "
            f"dhir reduces {', '.join(_REDUCTIONS)} on {', '.join(_TYPES)} (and i1)",
        )
    count = math.prod(source.get_shape())
    return "dhir_rt_shard_all_reduce", (count, kind, _REDUCTIONS.index(reduction))


def _type_number(element: Attribute) -> int | None:
    if isinstance(element, IndexType):
        return _TYPES.index("i64")
    if isinstance(element, IntegerType):
        unsigned = element.signedness.data == Signedness.UNSIGNED
        name = f"{'ui' if unsigned else 'i'}{element.width.data}"
    elif isinstance(element, (Float32Type, Float64Type)):
        name = f"f{element.bitwidth}"
    else:
        return None
    return _TYPES.index(name) if name in _TYPES else None


def _root(op: Operation, shape: tuple[int, ...], axes: Sequence[int]) -> int:
    """The root's index in its group, row-major over the group's axes."""
    if op.operands[1:]:
        raise error_at(
            op,
            f"{op.name} with a root given as values is not supported yet; "
            "give the root's coordinates as numbers",
        )
    return _index(shape, axes, op.root.get_values())  # pyright: ignore[reportAttributeAccessIssue]


def _point_to_point(
    op: shard.SendOp | shard.RecvOp,
    shape: tuple[int, ...],
    axes: Sequence[int],
    element: int,
    type_: TensorType,
) -> tuple[str, tuple[int, ...]]:
    """A send to the group member at `destination`, or a receive from the one at
    `source` (any member when it has none): blocking, so the program orders them."""
    if op.operands[1:]:
        raise error_at(
            op,
            f"{op.name} with a peer given as values is not supported yet; "
            "give the peer's coordinates as numbers",
        )
    if isinstance(op, shard.SendOp):
        peer = _index(shape, axes, op.destination.get_values())
        return "dhir_rt_shard_send", (_bytes(type_, element), peer)
    source = op.source.get_values() if op.source is not None else ()
    peer = _index(shape, axes, source) if source else -1
    return "dhir_rt_shard_recv", (_bytes(type_, element), peer)


def _index(shape: tuple[int, ...], axes: Sequence[int], coordinates: Sequence[int]) -> int:
    """The group index of the member at `coordinates` on `axes`, row-major."""
    index = 0
    for axis, coordinate in zip(axes, coordinates, strict=True):
        index = index * shape[axis] + coordinate
    return index


def _halo(op: shard.UpdateHaloOp, shape: tuple[int, ...], type_: TensorType) -> _Work:
    if op.halo_sizes:
        raise error_at(
            op,
            "shard.update_halo with halo sizes given as values is not "
            "supported yet; give them as numbers",
        )
    split = [a.get_values() for a in op.split_axes.axes.data]
    if any(len(axes) > 1 for axes in split):
        raise error_at(
            op, "shard.update_halo of a dimension split over several grid axes is not supported yet"
        )
    dims = type_.get_shape()
    axes = [axes[0] if axes else -1 for axes in split] + [-1] * (len(dims) - len(split))
    halos = op.static_halo_sizes.get_values()
    layout = (len(dims), *dims, *axes, *halos)
    element = _element_bytes(op, type_)
    grid = (len(shape), *shape, 0)
    return _Work(((_HALO, (element,)),), (*grid, *layout))


def _stub(op: Operation, work: _Work, number: int) -> func.FuncOp:
    """The stub `op` becomes a call of, and the call in its place."""
    name = f"{STUB_PREFIX}{number}"
    stub = func.FuncOp.external(name, [op.operands[0].type], [op.results[0].type])
    stub.attributes[COLLECTIVE] = DictionaryAttr(
        {
            "grid": DenseArrayBase.from_list(i64, work.grid),
            "calls": DictionaryAttr(
                {
                    f"{k}:{call}": DenseArrayBase.from_list(i64, words)
                    for k, (call, words) in enumerate(work.calls)
                }
            ),
        }
    )
    call = func.CallOp(name, [op.operands[0]], [op.results[0].type])
    _replace(op, [call], call.res)
    return stub


def _carry_part(
    op: shard.AllGatherOp | shard.AllSliceOp, stub: func.FuncOp, shape: tuple[int, ...]
) -> None:
    """The op's RESULT_PART or INPUT_PART on its stub (`result`/`argument` = K); on the
    op next to the shard (a result's first gather, an argument's last slice), the box the
    shard is of the whole, as dhir_rt_shard_write_box and read_box take it (see _box)."""
    gather = isinstance(op, shard.AllGatherOp)
    part = op.attributes.get(RESULT_PART if gather else INPUT_PART)
    if not isinstance(part, DictionaryAttr):
        return
    info = _info(stub)
    key = "result" if gather else "argument"
    info[key] = part.data[key]
    split_attr = part.data.get("split")
    if isinstance(split_attr, ArrayAttr):
        split = [cast(DenseArrayBase[IntegerType], a).get_values() for a in split_attr.data]
        local = _tensor(op, op.operands[0].type if gather else op.results[0].type)
        whole, padding = part.data.get("whole"), part.data.get("padding")
        counts = (
            [cast(DenseArrayBase[IntegerType], c).get_values() for c in padding.data]
            if isinstance(padding, ArrayAttr)
            else []
        )
        true = cast(DenseArrayBase[IntegerType], whole).get_values() if whole else None
        floating = isinstance(local.get_element_type(), Float16Type | Float32Type | Float64Type)
        negative = floating and part.data.get("negative") != BoolAttr.from_bool(False)
        box = _box(shape, split, local, _element_bytes(op, local), counts, true, negative)
        info["box"] = DenseArrayBase.from_list(i64, box)
    stub.attributes[COLLECTIVE] = DictionaryAttr(info)


def _box(
    shape: tuple[int, ...],
    split: Sequence[Sequence[int]],
    local: TensorType,
    element: int,
    padding: Sequence[Sequence[int]] = (),
    whole: Sequence[int] | None = None,
    negative: bool = False,
) -> list[int]:
    """The box of a shard of type `local` split as `split` over a grid of `shape`, as
    int64 words (dhir_rt.h): the number of dimensions, the element's bytes, whether its
    padding is -0.0 (`negative`) rather than zeros, the pieces per rank, the whole's
    shape, the shard's, then per rank whether it writes its shard (the first rank holding
    it) and the pieces of its real part: where each starts in the whole, where in the
    shard, and its shape. Without `padding` a shard is one piece; along a dimension with
    `padding` (each padded block's real count, dhir.toolchain.shard_padding) a shard
    meets the real part of each block it spans, in the `whole` of true shape."""
    pieces = local.get_shape()
    split = [*split, *[()] * (len(pieces) - len(split))]
    padding = [*padding, *[()] * (len(pieces) - len(padding))]
    if whole is None:
        whole = [n * math.prod(shape[a] for a in axes) for n, axes in zip(pieces, split)]
    entries: list[list[tuple[int, ...]]] = []
    for rank in range(math.prod(shape)):
        at = [rank // math.prod(shape[d + 1 :]) % shape[d] for d in range(len(shape))]
        segments = [
            _segments(counts, _index(shape, axes, [at[a] for a in axes]) * n, n)
            for axes, counts, n in zip(split, padding, pieces)
        ]
        entries.append([sum(zip(*piece), ()) for piece in itertools.product(*segments)])
    most = max(map(len, entries))
    words = [len(pieces), element, int(negative), most, *whole, *pieces]
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for entry in entries:
        words += [int(tuple(entry) not in seen), *itertools.chain(*entry)]
        words += [0] * (3 * len(pieces) * (most - len(entry)))
        seen.add(tuple(entry))
    return words


def _box_ranks(words: Sequence[int]) -> int:
    """The ranks a box (see _box) has an entry for."""
    return (len(words) - 4 - 2 * words[0]) // (1 + 3 * words[0] * words[3])


def _segments(counts: Sequence[int], start: int, length: int) -> list[tuple[int, int, int]]:
    """Where each real part of a shard's `length` elements from `start` starts along a
    dimension, in the whole and in the shard, and its length."""
    if not counts:
        return [(start, 0, length)] if length else []
    return Padding(tuple(counts)).segments(start, length)


def _called(module: ModuleOp) -> set[str]:
    return {call.callee.root_reference.data for call in find_ops(module, func.CallOp)}


# --- on memrefs -----------------------------------------------------------------------


def lower_collectives(module: ModuleOp) -> None:
    """`dhir-shard-collectives` on `module` (see the module docstring)."""
    stubs = {
        f.sym_name.data: f for f in find_ops(module, func.FuncOp) if COLLECTIVE in f.attributes
    }
    if not stubs:
        return
    grids = ConstantArrays(module, "__dhir_grid", i64)
    boxes = ConstantArrays(module, "__dhir_box", i64)
    direct = _direct_parts(module, stubs)
    used: set[str] = set()
    for call in find_ops(module, func.CallOp):
        stub = stubs.get(call.callee.root_reference.data)
        if stub is not None:
            used |= _lower_call(call, stub, grids, (direct.get(call), boxes))
    for stub in stubs.values():
        stub.detach()
        stub.erase()
    for name in sorted(used - {f.sym_name.data for f in find_ops(module, func.FuncOp)}):
        # the grid's (box's) address, the buffers', the words
        inputs = [i64] * (3 if name in (_HALO, _WRITE_BOX, _READ_BOX) else 3 + _WORDS[name])
        module.body.block.add_op(func.FuncOp.external(name, inputs, []))


@dataclass(frozen=True)
class _Direct:
    """A gather or slice whose data goes between a shard and a file instead: `index` is
    the argument whose file (-1: the call only keeps its buffer), `name` the runtime
    function that reads or writes the shard."""

    index: int
    name: str


def _direct_parts(module: ModuleOp, stubs: dict[str, func.FuncOp]) -> dict[func.CallOp, _Direct]:
    """In SPMD entries, the calls of a result's gathers whose last result is only copied
    into an out-parameter, and of an argument's slices that are all it is used for,
    where nothing else uses that parameter: each goes direct (see _Direct). The copies
    go, and the entry's SHARD_BANDS gives each such parameter an empty band on every rank:
    no rank holds it."""
    direct: dict[func.CallOp, _Direct] = {}
    for function in find_ops(module, func.FuncOp):
        if SPMD not in function.attributes:
            continue
        for argument in function.body.blocks[0].args:
            chain = _slices_of(argument, stubs) or _gathers_into(argument, stubs)
            if not chain:
                continue
            name = _READ_BOX if "argument" in _info(_stub_of(chain[0], stubs)) else _WRITE_BOX
            direct |= {call: _Direct(-1, name) for call in chain}
            direct[chain[-1]] = _Direct(argument.index, name)
            box = _info(_stub_of(chain[-1], stubs))["box"]
            assert isinstance(box, DenseArrayBase)
            words = box.get_values()
            _held_by_none(function, argument.index, _box_ranks(words))
    return direct


def _stub_of(call: func.CallOp, stubs: dict[str, func.FuncOp]) -> func.FuncOp:
    return stubs[call.callee.root_reference.data]


def _slices_of(argument: BlockArgument, stubs: dict[str, func.FuncOp]) -> list[func.CallOp]:
    """The calls of the argument's slices (INPUT_PART) when they are all it is used for,
    the one next to the shard last; else none."""
    chain: list[func.CallOp] = []
    value: SSAValue = argument
    while True:
        calls = [u.operation for u in value.uses if isinstance(u.operation, func.CallOp)]
        if not argument.has_one_use() or len(calls) != 1:
            return []
        info = _info(stub) if (stub := stubs.get(calls[0].callee.root_reference.data)) else {}
        if info.get("argument") != IntegerAttr(argument.index, i64):
            return []
        chain.append(calls[0])
        if "box" in info:
            return chain
        value = calls[0].res[0]


def _gathers_into(argument: BlockArgument, stubs: dict[str, func.FuncOp]) -> list[func.CallOp]:
    """The calls of a result's gathers (RESULT_PART) whose last result is only copied
    into `argument`, used for nothing else, the one next to the shard last; else none.
    The copy goes."""
    copy = argument.get_user_of_unique_use()
    if not isinstance(copy, dmemref.CopyOp) or copy.destination is not argument:
        return []
    chain: list[func.CallOp] = []
    value, result = copy.source, None
    while isinstance(call := value.owner, func.CallOp):
        info = _info(stub) if (stub := stubs.get(call.callee.root_reference.data)) else {}
        if "result" not in info or result not in (None, info["result"]):
            return []
        result = info["result"]
        chain.append(call)
        if "box" in info:
            copy.detach()
            copy.erase()
            return chain
        value = call.arguments[0]
    return []


def _held_by_none(function: func.FuncOp, index: int, ranks: int) -> None:
    bands = function.attributes.get(SHARD_BANDS)
    entries = dict(bands.data) if isinstance(bands, DictionaryAttr) else {}
    entries[str(index)] = ArrayAttr([DenseArrayBase.from_list(i64, [])] * ranks)
    function.attributes[SHARD_BANDS] = DictionaryAttr(entries)


def _info(stub: func.FuncOp) -> dict[str, Attribute]:
    info = stub.attributes[COLLECTIVE]
    assert isinstance(info, DictionaryAttr)
    return dict(info.data)


def _grid_and_calls(
    stub: func.FuncOp, info: dict[str, Attribute]
) -> tuple[DenseArrayBase[IntegerType], DictionaryAttr]:
    """The stub's grid words and runtime calls, as dhir-shard-stubs writes them
    (`{"0:dhir_rt_shard_all_gather" = array<i64: ...>}`); an error at the stub where a hand
    or another tool wrote something else."""
    grid, calls = info.get("grid"), info.get("calls")
    known = (*_WORDS, _HALO)
    if isinstance(grid, DenseArrayBase) and isinstance(calls, DictionaryAttr) and calls.data:
        wrong = [
            key
            for key, words in calls.data.items()
            if not (
                (parts := key.partition(":"))[0].isdigit()
                and parts[2] in known
                and isinstance(words, DenseArrayBase)
                and len(words) == _WORDS.get(parts[2], len(words))
            )
        ]
        if not wrong:
            return cast(DenseArrayBase[IntegerType], grid), calls
        why = f"its call {wrong[0]!r} is not a step dhir's runtime has with its words"
    else:
        why = "it needs a grid array and a non-empty dictionary of calls"
    raise error_at(
        stub,
        f"{COLLECTIVE} is not as dhir-shard-stubs writes it: {why} "
        '("N:dhir_rt_shard_NAME" = array<i64: ...>); let dhir-shard-stubs make the stubs',
    )


def _lower_call(
    call: func.CallOp,
    stub: func.FuncOp,
    grids: ConstantArrays,
    direct: tuple[_Direct | None, ConstantArrays],
) -> set[str]:
    """`call` of `stub` as a new buffer for its result and the runtime calls into it;
    where it goes `direct`, the buffer alone, and next to the shard the call that reads
    or writes it (its box in `direct`'s arrays)."""
    info = _info(stub)
    grid_words, calls = _grid_and_calls(stub, info)
    source, target = call.arguments[0], call.res[0]
    for value in (source, target):
        if not isinstance(value.type, MemRefType) or not isinstance(value.type.layout, NoneAttr):
            raise error_at(
                call,
                f"a collective on {value.type}: dhir expected a buffer of the "
                "default layout after bufferization",
            )
    assert isinstance(target.type, MemRefType)
    out = dmemref.AllocOp.get(target.type.element_type, shape=target.type.get_shape())
    ops: list[Operation] = [out]
    part, boxes = direct
    if part is not None:
        # Never touched where nothing reads or writes it: a large buffer's pages are
        # never taken.
        names: set[str] = set()
        if part.index >= 0:
            shard_ = source if part.name == _WRITE_BOX else out.memref
            table = boxes.address(
                ops, tuple(cast(DenseArrayBase[IntegerType], info["box"]).get_values())
            )
            position = arith.ConstantOp(IntegerAttr(part.index, i64))
            ops += [
                position,
                func.CallOp(part.name, [table, aligned_address(ops, shard_), position], []),
            ]
            names.add(part.name)
        _replace_call(call, ops, out.memref)
        return names
    grid = grids.address(ops, tuple(grid_words.get_values()))
    steps = [(key.partition(":")[2], words) for key, words in calls.data.items()]
    names = {name for name, _ in steps}
    if _HALO in names:
        ops.append(dmemref.CopyOp(source, out.memref))
        buffers = [[aligned_address(ops, out.memref)]]
    elif len(steps) == 1:
        buffers = [[aligned_address(ops, source), aligned_address(ops, out.memref)]]
    else:
        # A reduce-scatter or scatter: reduced (broadcast) whole first, then sliced.
        assert isinstance(source.type, MemRefType)
        whole = dmemref.AllocOp.get(source.type.element_type, shape=source.type.get_shape())
        ops.append(whole)
        middle = aligned_address(ops, whole.memref)
        buffers = [
            [aligned_address(ops, source), middle],
            [middle, aligned_address(ops, out.memref)],
        ]
    for (name, words), addresses in zip(steps, buffers, strict=True):
        assert isinstance(words, DenseArrayBase)
        args = [grid, *addresses]
        for word in words.get_values():
            constant = arith.ConstantOp(IntegerAttr(int(word), i64))
            ops.append(constant)
            args.append(constant.result)
        ops.append(func.CallOp(name, args, []))
    _replace_call(call, ops, out.memref)
    return names


def _replace_call(call: func.CallOp, ops: list[Operation], result: SSAValue) -> None:
    block = call.parent_block()
    assert block is not None
    block.insert_ops_before(ops, call)
    call.res[0].replace_all_uses_with(result)
    call.detach()
    call.erase()
