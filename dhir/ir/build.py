"""Building many ops fast: xDSL's `Operation.create` without its generic steps.

`create` goes through properties and setters that each cost a call (the operands'
setter detaches the uses of the operands an op never had; `__post_init__` fills the
IRDL defaults of properties the caller always gives here). Cloning thousands of task
bodies and wrapping every task in calls spend most of their time there
(docs/performance.md), so `new_op` sets what xDSL 0.74's `Operation.__init__` sets,
directly (tests/unit/test_per_task_builds.py checks that the two ops hold the same).
`move_run` moves a run of ops between blocks at once, where xDSL moves them one by one.
"""

from collections.abc import Mapping, Sequence
from typing import TypeVar, cast

from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    Float64Type,
    FloatAttr,
    FloatData,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    LocationAttr,
)
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue, Use
from xdsl.ir.core import SSAValues

OpT = TypeVar("OpT", bound=Operation)


def new_op(
    cls: type[OpT],
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    properties: Mapping[str, Attribute],
    attributes: Mapping[str, Attribute],
    location: LocationAttr,
    regions: Sequence[Region] = (),
) -> OpT:
    """`cls.create(...)` of an op without successors whose `properties` already hold
    every default its IRDL definition would add (those of an existing op of `cls`)."""
    op = cls.__new__(cls)
    init_op(op, operands, result_types, properties, attributes, location, regions)
    return op


def init_op(
    op: Operation,
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    properties: Mapping[str, Attribute],
    attributes: Mapping[str, Attribute],
    location: LocationAttr,
    regions: Sequence[Region] = (),
) -> None:
    """What `new_op` sets on the op it makes, set on `op`, just made by its class's
    `__new__`: for an op class whose own `__init__` builds it so."""
    values = SSAValues(operands)
    uses = tuple([Use(op, index) for index in range(len(values))])
    for value, use in zip(values, uses, strict=True):
        value.add_use(use)
    op._operands = values  # pyright: ignore[reportPrivateUsage]
    op._operand_uses = uses  # pyright: ignore[reportPrivateUsage]
    op.results = SSAValues([OpResult(kind, op, index) for index, kind in enumerate(result_types)])
    op.properties = dict(properties)
    op.attributes = dict(attributes)
    op.location = location
    op._successors = ()  # pyright: ignore[reportPrivateUsage]
    op._successor_uses = ()  # pyright: ignore[reportPrivateUsage]
    op.regions = ()
    for region in regions:
        op.add_region(region)


def integer_attr(value: int, type_: IntegerType | IndexType) -> IntegerAttr:
    """`IntegerAttr(value, type_)`: without the constructor's checks of its parameters
    for an index (which the constructor neither normalizes nor refuses) and when `value`
    lies in [0, 2^(width-1)), which every integer type holds as it is; through the
    constructor else. dhir-track-tasks numbers every task with one, and the parser's
    cloned task bodies get their literals so (docs/performance.md)."""
    if not isinstance(type_, IndexType) and not 0 <= value < 1 << (type_.width.data - 1):
        return IntegerAttr(value, type_)
    attr = cast(IntegerAttr, IntegerAttr.__new__(IntegerAttr))
    object.__setattr__(attr, "value", IntAttr(value))
    object.__setattr__(attr, "type", type_)
    return attr


def float_attr(value: float, type_: AnyFloat) -> FloatAttr:
    """`FloatAttr(value, type_)`: rounded to an f32 or f64 as the constructor rounds it,
    without its checks of the parameters; through the constructor for other types."""
    if not isinstance(type_, Float32Type | Float64Type):
        return FloatAttr(value, type_)
    rounded = type_.unpack(type_.pack((value,)), 1)[0]  # as the constructor does
    attr = cast(FloatAttr, FloatAttr.__new__(FloatAttr))
    object.__setattr__(attr, "value", FloatData(rounded))
    object.__setattr__(attr, "type", type_)
    return attr


def move_run(first: Operation, last: Operation, block: Block, before: Operation | None) -> None:
    """Move the ops from `first` to `last` (consecutive, in that order, in one block) into
    `block`, before `before` (an op of `block`; None: at its end), as xDSL 0.74 links them
    (`_prev_op`, `_next_op`, `_first_op`, `_last_op`). xDSL's inserts walk up from `block`
    for each op, to refuse one holding `block`: the caller knows that none of the ops
    holds `block`. Each op keeps its operands, results and regions."""
    source = first.parent
    assert source is not None and last.parent is source
    assert before is None or before.parent is block
    _link(source, first.prev_op, last.next_op)
    op = first
    while op is not last:
        op.parent = block
        op = op.next_op
        assert op is not None, "`last` does not follow `first`"
    last.parent = block
    tail = block.last_op if before is None else before.prev_op
    _link(block, tail, first)
    _link(block, last, before)


def _link(block: Block, prior: Operation | None, after: Operation | None) -> None:
    """`after` follows `prior` in `block`; None: `block`'s start or end."""
    if prior is None:
        block._first_op = after  # pyright: ignore[reportPrivateUsage]
    else:
        prior._next_op = after  # pyright: ignore[reportPrivateUsage]
    if after is None:
        block._last_op = prior  # pyright: ignore[reportPrivateUsage]
    else:
        after._prev_op = prior  # pyright: ignore[reportPrivateUsage]


def move_ops(ops: Sequence[Operation], block: Block, before: Operation | None) -> None:
    """Move `ops` (each attached to a block; none holding `block`) into `block` in their
    order, before `before` (None: at its end): each run of them that is consecutive in
    its block at once (`move_run`)."""
    start = 0
    for end in range(1, len(ops) + 1):
        if end == len(ops) or ops[end] is not ops[end - 1].next_op:
            move_run(ops[start], ops[end - 1], block, before)
            start = end


def insert_new(ops: Sequence[Operation], block: Block, before: Operation | None) -> None:
    """Insert `ops`, just made (in no block, holding no block), into `block` in their
    order, before `before` (an op of `block`; None: at its end), linked as `move_run`
    links them, without xDSL's walk up from `block` for each op."""
    assert before is None or before.parent is block
    tail = block.last_op if before is None else before.prev_op
    for op in ops:
        assert op.parent is None, "an op already in a block"
        op.parent = block
        op._prev_op = tail  # pyright: ignore[reportPrivateUsage]
        if tail is None:
            block._first_op = op  # pyright: ignore[reportPrivateUsage]
        else:
            tail._next_op = op  # pyright: ignore[reportPrivateUsage]
        tail = op
    if tail is None:
        return
    tail._next_op = before  # pyright: ignore[reportPrivateUsage]
    if before is None:
        block._last_op = tail  # pyright: ignore[reportPrivateUsage]
    else:
        before._prev_op = tail  # pyright: ignore[reportPrivateUsage]
