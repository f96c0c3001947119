"""Small helpers the rewriting passes share to build IR: ops appended to a block, index
constants, constant arrays in the module, memrefs' addresses, loops' bounds and last
values, a flag telling an scf.while's first step, and where a value is defined."""

from collections.abc import Sequence
from typing import TypeVar, cast

from xdsl.dialects.builtin import (
    AffineMapAttr,
    DenseIntOrFPElementsAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from dhir.dialects import affine, arith, func, memref, scf
from dhir.dialects.layouts import is_contiguous_layout
from dhir.ir.diagnostics import error_at
from dhir.ir.layout import element_bytes

_Op = TypeVar("_Op", bound=Operation)


def put(block: Block, op: _Op) -> _Op:
    """`op`, appended to `block`."""
    block.add_op(op)
    return op


def declare(
    module: ModuleOp,
    symbol: str,
    inputs: list[Attribute],
    outputs: list[Attribute],
    owner: str = "a library's function",
) -> None:
    """A declaration of the external function `symbol` (`owner`'s, as the message names
    it) in `module`, unless it has one; one of the program's own with other types, or a
    function it defines by that name, is an error at it: dhir's calls would not verify
    (mlir-opt's "operand type mismatch") or would call the program's function."""
    found = SymbolTable.lookup_symbol(module, symbol)
    if found is None:
        module.body.block.add_op(func.FuncOp.external(symbol, inputs, outputs))
        return
    wanted = FunctionType.from_lists(inputs, outputs)
    if isinstance(found, func.FuncOp) and found.is_declaration:
        if found.function_type == wanted:
            return
        raise error_at(
            found,
            f"@{symbol} is declared here as {found.function_type}, but dhir calls it too, as "
            f"{owner}, of type {wanted}; declare it with that type, or call your function "
            "by another name",
        )
    raise error_at(
        found,
        f"the program defines @{symbol}, but dhir calls a function of that name too "
        f"({owner}); rename yours",
    )


def int_constant(value: SSAValue) -> int | None:
    """The number of an `arith.constant` of an integer or index; None for any other."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def const_index(block: Block, value: int) -> SSAValue:
    """An index constant, appended to `block`."""
    return put(block, arith.ConstantOp.from_int_and_width(value, IndexType())).result


def affine_bound(
    block: Block, bound: AffineMap, operands: Sequence[SSAValue], greatest: bool
) -> SSAValue:
    """An affine loop's bound computed before it, appended to `block`, as --lower-affine
    computes it: the greatest result of `bound` for a lower bound, the least for an upper
    bound."""
    arguments, attribute = list(operands), AffineMapAttr(bound)
    if len(bound.results) == 1:
        return put(block, affine.ApplyOp(arguments, attribute)).result
    if not greatest:
        return put(block, affine.MinOp(arguments, attribute)).result
    made = affine.MaxOp.create(
        operands=arguments, result_types=[IndexType()], properties={"map": attribute}
    )
    return put(block, made).results[0]


def last_value(block: Block, lower: SSAValue, upper: SSAValue, step: SSAValue) -> SSAValue:
    """The last value of a loop that runs with a positive step, appended to `block`:
    `lb + ((ub - 1 - lb) udiv step) * step`, exact in the loop's type, as `ub - lb` fits
    unsigned."""
    kind = step.type
    assert isinstance(kind, IntegerType | IndexType)
    one = put(block, arith.ConstantOp(IntegerAttr(1, kind), kind)).result
    room = put(block, arith.SubiOp(put(block, arith.SubiOp(upper, lower)).result, one)).result
    steps = put(block, arith.DivUIOp(room, step)).result
    return put(block, arith.AddiOp(lower, put(block, arith.MuliOp(steps, step)).result)).result


def aligned_address(ops: list[Operation], value: SSAValue) -> SSAValue:
    """The aligned base address of memref `value`, as an i64 (the address of its first
    element when its offset is 0); appends the ops computing it to `ops`."""
    pointer = memref.ExtractAlignedPointerAsIndexOp(value)
    wide = arith.IndexCastOp(pointer.aligned_pointer, i64)
    ops += [pointer, wide]
    return wide.result


def first_address(ops: list[Operation], value: SSAValue) -> SSAValue:
    """The address (i64) of the first element of memref `value`, whose elements lie in one
    run (`is_contiguous_layout`) and have a size `element_bytes` knows; appends the ops
    computing it to `ops`. A view's aligned pointer is its buffer's: its offset comes on
    top, a constant where the type gives it, else read at run time."""
    address = aligned_address(ops, value)
    type_ = value.type
    assert isinstance(type_, MemRefType) and is_contiguous_layout(type_)
    width = element_bytes(type_.element_type)
    assert width is not None, "checked by the caller"
    layout = type_.layout
    if not isinstance(layout, StridedLayoutAttr) or layout.get_offset() == 0:
        return address
    skipped = _offset_bytes(ops, value, layout.get_offset(), width)
    moved = arith.AddiOp(address, skipped)
    ops.append(moved)
    return moved.result


def _offset_bytes(
    ops: list[Operation], value: SSAValue, offset: int | None, width: int
) -> SSAValue:
    """A view's offset in bytes (i64): `offset` elements, or, where that is None, the
    offset `memref.extract_strided_metadata` reads; appends the ops to `ops`."""
    if offset is not None:
        shift = arith.ConstantOp(IntegerAttr(offset * width, i64))
        ops.append(shift)
        return shift.result
    meta = memref.ExtractStridedMetaDataOp(value)
    elements = arith.IndexCastOp(meta.offset, i64)
    scale = arith.ConstantOp(IntegerAttr(width, i64))
    skipped = arith.MuliOp(elements.result, scale.result)
    ops += [meta, elements, scale, skipped]
    return skipped.result


class ConstantArrays:
    """Constant arrays of integers of `element` as private globals of `module` (named
    PREFIX0, PREFIX1, ... and put at its start), one per distinct content, for the
    runtime to read through their addresses."""

    def __init__(self, module: ModuleOp, prefix: str, element: IntegerType) -> None:
        self._module = module
        self._prefix = prefix
        self._element = element
        self._made: dict[tuple[int, ...], tuple[str, MemRefType]] = {}

    @property
    def used(self) -> bool:
        return bool(self._made)

    def address(self, ops: list[Operation], values: tuple[int, ...]) -> SSAValue:
        """The address (i64) of the array holding `values`; appends the ops to `ops`."""
        name, type_ = self._made.get(values) or self._add(values)
        get = memref.GetGlobalOp(name, type_)
        ops.append(get)
        return aligned_address(ops, get.memref)

    def _add(self, values: tuple[int, ...]) -> tuple[str, MemRefType]:
        name = f"{self._prefix}{len(self._made)}"
        type_ = MemRefType(self._element, [len(values)])
        initial = DenseIntOrFPElementsAttr.from_list(
            TensorType(self._element, [len(values)]), list(values)
        )
        global_ = memref.GlobalOp.build(
            properties={
                "sym_name": StringAttr(name),
                "type": type_,
                "initial_value": initial,
                "sym_visibility": StringAttr("private"),
                "constant": UnitAttr(),
            }
        )
        block = self._module.body.block
        first = block.first_op
        if first is None:
            block.add_op(global_)
        else:
            block.insert_op_before(global_, first)
        self._made[values] = (name, type_)
        return name, type_


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


def injective(kind: Attribute) -> bool:
    """Whether distinct indices of a memref of type `kind` surely address distinct
    elements: the default layout, or static strides under which each dimension's stride
    (in increasing order) passes the farthest element the smaller ones reach. A view made
    by `memref.reinterpret_cast` may overlap its own rows (a row stride below the row's
    length, or 0)."""
    if not isinstance(kind, MemRefType):
        return False
    layout = kind.layout
    if isinstance(layout, NoneAttr):
        return True
    if not isinstance(layout, StridedLayoutAttr):
        return False
    strides = layout.get_strides()
    if None in strides:
        return False
    shape = kind.get_shape()
    dims = sorted((abs(cast(int, s)), n) for s, n in zip(strides, shape) if n not in (0, 1))
    reach = 0  # the farthest element the dimensions so far reach
    for at, (stride, size) in enumerate(dims):
        if stride <= reach or (size < 0 and at < len(dims) - 1):
            return False
        reach += stride * (size - 1)
    return True


def rows_view(value: SSAValue, dim: int, low: int, high: int) -> memref.SubviewOp:
    """The static view of `value` (a memref of static shape) holding indices [low, high)
    of dimension `dim` and all of the others."""
    kind = value.type
    assert isinstance(kind, MemRefType)
    shape = list(kind.get_shape())
    offsets = [low if d == dim else 0 for d in range(len(shape))]
    shape[dim] = high - low
    return memref.SubviewOp.from_static_parameters(value, kind, offsets, shape, [1] * len(shape))


def element_view(value: SSAValue, element: Sequence[int]) -> memref.SubviewOp:
    """The static view of `value` (a memref of static shape) holding the one element at
    subscripts `element`."""
    kind = value.type
    assert isinstance(kind, MemRefType)
    ones = [1] * len(element)
    return memref.SubviewOp.from_static_parameters(value, kind, list(element), ones, ones)


def while_with_flag(
    loop: scf.WhileOp, first: bool
) -> tuple[scf.WhileOp, tuple[SSAValue, SSAValue]]:
    """`loop` remade carrying one more i1 value, `first` on its first step and not
    `first` after; the new loop, and that value in its before region and in its after
    region (the first step of either is the first run of that region)."""
    before, after = loop.before_region.block, loop.after_region.block
    flags = before.insert_arg(i1, len(before.args)), after.insert_arg(i1, len(after.args))
    condition = before.last_op
    assert isinstance(condition, scf.ConditionOp)
    before.insert_op_before(
        scf.ConditionOp(condition.condition, *condition.args, flags[0]), condition
    )
    before.erase_op(condition)
    end = after.last_op
    assert isinstance(end, scf.YieldOp)
    following = arith.ConstantOp(IntegerAttr(int(not first), i1))
    after.insert_ops_before([following, scf.YieldOp(*end.operands, following.result)], end)
    after.erase_op(end)
    initial = arith.ConstantOp(IntegerAttr(int(first), i1))
    initial.result.name_hint = "first" if first else "later"
    regions = [loop.detach_region(0), loop.detach_region(0)]  # before, after
    new = scf.WhileOp([*loop.arguments, initial.result], [*loop.result_types, i1], *regions)
    new.attributes.update(loop.attributes)
    new.location = loop.location
    Rewriter.insert_op([initial, new], InsertPoint.before(loop))
    for old, value in zip(loop.results, new.results):
        old.replace_all_uses_with(value)
    Rewriter.erase_op(loop)
    return new, flags
