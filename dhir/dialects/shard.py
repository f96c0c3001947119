"""MLIR's `shard` dialect (formerly `mesh`) as dhir reads it: xDSL's ops, and those MLIR
22 has that xDSL 0.74 lacks (`all_gather`, `all_slice`, `all_to_all`, `reduce_scatter`,
`update_halo`, `get_sharding`, and the process queries `shard-partition` emits) or
defines otherwise (`shift`, whose `rotate` MLIR leaves optional), with MLIR's syntax and
property names, so that partitioned programs read back from mlir-opt-22."""

from functools import cache
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    BytesAttr,
    DenseArrayBase,
    FlatSymbolRefAttr,
    IndexType,
    IndexTypeConstr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i16,
    i64,
)

# isort: off
from xdsl.dialects.shard import (
    AllReduceOp as AllReduceOp,
    BroadcastOp as BroadcastOp,
    CollectiveCommunicationOp as CollectiveCommunicationOp,
    GatherOp as GatherOp,
    GridOp as GridOp,
    RecvOp as RecvOp,
    ReduceOp as ReduceOp,
    ReductionKind as ReductionKind,
    ReductionKindAttr as ReductionKindAttr,
    ScatterOp as ScatterOp,
    SendOp as SendOp,
    ShardAxesArrayAttr as ShardAxesArrayAttr,
    ShardingOp as ShardingOp,
    ShardOp as ShardOp,
    ShardingType as ShardingType,
    Shard as XdslShard,
)

# isort: on
from xdsl.dialects.utils import DynamicIndexList
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure

from dhir.dialects import with_replaced_ops

_NO_AXES = DenseArrayBase(i16, BytesAttr(b""))
_AXIS = IntegerAttr.constr(IndexTypeConstr)


def _collective_format(properties: str) -> str:
    return (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? "
        f"{properties} attr-dict `:` type($input) `->` type($result)"
    )


class _TensorCollectiveOp(CollectiveCommunicationOp):
    """A collective over a group of the grid's devices, from a tensor to a tensor (its
    properties declared by each op)."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())


@irdl_op_definition
class AllGatherOp(_TensorCollectiveOp):
    """Each device of a group gets the group's tensors joined along `gather_axis`."""

    name = "shard.all_gather"
    gather_axis = prop_def(_AXIS)
    assembly_format = _collective_format("`gather_axis` `=` $gather_axis")


@irdl_op_definition
class AllSliceOp(_TensorCollectiveOp):
    """Each device of a group keeps its slice of the tensor along `slice_axis`."""

    name = "shard.all_slice"
    slice_axis = prop_def(_AXIS)
    assembly_format = _collective_format("`slice_axis` `=` $slice_axis")


@irdl_op_definition
class AllToAllOp(_TensorCollectiveOp):
    """Each device splits its tensor along `split_axis`, sends part K to the group's
    device K, and joins what it gets along `concat_axis`."""

    name = "shard.all_to_all"
    split_axis = prop_def(_AXIS)
    concat_axis = prop_def(_AXIS)
    assembly_format = _collective_format(
        "`split_axis` `=` $split_axis `concat_axis` `=` $concat_axis"
    )


@irdl_op_definition
class ReduceScatterOp(_TensorCollectiveOp):
    """The group's tensors reduced, each device keeping its slice along `scatter_axis`."""

    name = "shard.reduce_scatter"
    reduction = prop_def(ReductionKindAttr, default_value=ReductionKindAttr(ReductionKind.SUM))
    scatter_axis = prop_def(_AXIS)
    assembly_format = _collective_format(
        "(`reduction` `=` $reduction^)? `scatter_axis` `=` $scatter_axis"
    )


@irdl_op_definition
class ShiftOp(_TensorCollectiveOp):
    """Each device of a group gets the tensor of the device `offset` before it along
    `shift_axis`; with `rotate`, round the group (xDSL 0.74 requires `rotate`)."""

    name = "shard.shift"
    shift_axis = prop_def(_AXIS)
    offset = prop_def(IntegerAttr[I64])
    rotate = opt_prop_def(UnitAttr)
    assembly_format = _collective_format(
        "`shift_axis` `=` $shift_axis `offset` `=` $offset (`rotate` $rotate^)?"
    )


@irdl_op_definition
class UpdateHaloOp(IRDLOperation):
    """The halo of each device's shard (`halo_sizes`, low and high per split dimension)
    filled from its neighbours' shards."""

    name = "shard.update_halo"
    T: ClassVar = VarConstraint("T", base(TensorType))
    destination = operand_def(T)
    grid = prop_def(FlatSymbolRefAttr)
    split_axes = prop_def(ShardAxesArrayAttr)
    halo_sizes = var_operand_def(I64)
    static_halo_sizes = prop_def(
        DenseArrayBase[I64], default_value=DenseArrayBase(i64, BytesAttr(b""))
    )
    result = result_def(T)
    assembly_format = (
        "$destination `on` $grid `split_axes` `=` $split_axes "
        "(`halo_sizes` `=` custom<DynamicIndexList>($halo_sizes, $static_halo_sizes)^)? "
        "attr-dict `:` type($result)"
    )
    custom_directives = (DynamicIndexList,)


@irdl_op_definition
class ProcessLinearIndexOp(IRDLOperation):
    """This device's index in the grid, row-major."""

    name = "shard.process_linear_index"
    grid = prop_def(FlatSymbolRefAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "`on` $grid attr-dict `:` type($result)"


class _GridAxesQueryOp(IRDLOperation):
    """An index per axis of the grid named by `grid` (all its axes when `axes` is empty)."""

    grid = prop_def(FlatSymbolRefAttr)
    axes = prop_def(DenseArrayBase.constr(i16), default_value=_NO_AXES)
    result = var_result_def(IndexType)
    traits = traits_def(Pure())


@irdl_op_definition
class ProcessMultiIndexOp(_GridAxesQueryOp):
    """This device's coordinates on the grid's `axes` (all axes when empty)."""

    name = "shard.process_multi_index"
    assembly_format = "`on` $grid (`axes` `=` $axes^)? attr-dict `:` type($result)"


@irdl_op_definition
class GridShapeOp(_GridAxesQueryOp):
    """The grid's sizes on `axes` (all axes when empty)."""

    name = "shard.grid_shape"
    assembly_format = "$grid (`axes` `=` $axes^)? attr-dict `:` type($result)"


@irdl_op_definition
class GetShardingOp(IRDLOperation):
    """The sharding of a tensor (a value of `!shard.sharding`)."""

    name = "shard.get_sharding"
    source = operand_def(TensorType)
    result = result_def(ShardingType)
    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"


Shard = with_replaced_ops(
    XdslShard,
    GetShardingOp,
    AllGatherOp,
    AllSliceOp,
    AllToAllOp,
    ReduceScatterOp,
    ShiftOp,
    UpdateHaloOp,
    ProcessLinearIndexOp,
    ProcessMultiIndexOp,
    GridShapeOp,
)
SHARD_OPS = tuple(Shard.operations)


def is_shard_op(op: object) -> bool:
    """Whether `op` is one of the shard dialect's ops (grids, shardings, collectives)."""
    return _is_shard_class(type(op))


@cache
def _is_shard_class(cls: type) -> bool:
    # Asked once per class: `isinstance` against these IRDL classes goes through ABCMeta
    # for each of them (5 us an op), and the verifier and `is_shard_program` ask it of
    # every op of a module. Which classes a class derives from never changes.
    return issubclass(cls, SHARD_OPS)
