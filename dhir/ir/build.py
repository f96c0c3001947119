"""Building many ops fast: xDSL's `Operation.create` without its generic steps.

`create` goes through properties and setters that each cost a call (the operands'
setter detaches the uses of the operands an op never had; `__post_init__` fills the
IRDL defaults of properties the caller always gives here). Cloning thousands of task
bodies and wrapping every task in calls spend most of their time there
(docs/performance.md), so `new_op` sets what xDSL 0.74's `Operation.__init__` sets,
directly (tests/unit/test_per_task_builds.py checks that the two ops hold the same).
"""

from collections.abc import Mapping, Sequence
from typing import TypeVar

from xdsl.dialects.builtin import LocationAttr
from xdsl.ir import Attribute, Operation, OpResult, Region, SSAValue, Use
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
