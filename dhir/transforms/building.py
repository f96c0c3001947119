"""Small helpers the rewriting passes share to build IR: ops appended to a block, index
constants, and where a value is defined."""

from typing import TypeVar

from xdsl.dialects.builtin import IndexType, MemRefType, NoneAttr, StridedLayoutAttr, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dhir.dialects import arith, memref

_Op = TypeVar("_Op", bound=Operation)


def put(block: Block, op: _Op) -> _Op:
    """`op`, appended to `block`."""
    block.add_op(op)
    return op


def const_index(block: Block, value: int) -> SSAValue:
    """An index constant, appended to `block`."""
    return put(block, arith.ConstantOp.from_int_and_width(value, IndexType())).result


def aligned_address(ops: list[Operation], value: SSAValue) -> SSAValue:
    """The aligned base address of memref `value`, as an i64 (the address of its first
    element when its offset is 0); appends the ops computing it to `ops`."""
    pointer = memref.ExtractAlignedPointerAsIndexOp(value)
    wide = arith.IndexCastOp(pointer.aligned_pointer, i64)
    ops += [pointer, wide]
    return wide.result


def insert_before(ops: Block, op: Operation) -> None:
    """Move the ops of `ops` to just before `op`."""
    block = op.parent_block()
    assert block is not None
    made = list(ops.ops)
    for new in made:
        new.detach()
    block.insert_ops_before(made, op)


def replace_by(op: Operation, ops: Block) -> None:
    """Put the ops of `ops` where `op` is, and erase it."""
    insert_before(ops, op)
    block = op.parent_block()
    assert block is not None
    block.erase_op(op)


def inside(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is defined in `op`'s regions."""
    parent = value.owner.parent_op()
    while parent is not None:
        if parent is op:
            return True
        parent = parent.parent_op()
    return False


def rows_contiguous(kind: Attribute) -> bool:
    """A memref whose rows are contiguous: row-major, or a view of one with static strides
    whose last is 1 (a block of rows, as the pieces of a split matmul use)."""
    if not isinstance(kind, MemRefType):
        return False
    layout = kind.layout
    if isinstance(layout, NoneAttr):
        return True
    if not isinstance(layout, StridedLayoutAttr):
        return False
    strides = layout.get_strides()
    return bool(strides) and strides[-1] == 1 and None not in strides


def rows_view(value: SSAValue, dim: int, low: int, high: int) -> memref.SubviewOp:
    """The static view of `value` (a memref of static shape) holding indices [low, high)
    of dimension `dim` and all of the others."""
    kind = value.type
    assert isinstance(kind, MemRefType)
    shape = list(kind.get_shape())
    offsets = [low if d == dim else 0 for d in range(len(shape))]
    shape[dim] = high - low
    return memref.SubviewOp.from_static_parameters(value, kind, offsets, shape, [1] * len(shape))
