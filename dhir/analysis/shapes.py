"""Task bodies of one shape: equal up to the memrefs they list and the literals of their
subscripts, so the analyses that depend on nothing else (effects, the counted work)
are found once per shape (docs/performance.md: generated schedules repeat a body with
other constants thousands of times).

A shape key is exact for those analyses: it holds every op's name, operands (by where
they are defined: an earlier op of the body, or the position of a listed memref, or
the outer value itself), result types, properties, attributes, successors, regions and
block arguments, the types of the listed memrefs, and the callee of each call (its
body is counted). Two kinds of literal are left out. The value of an `arith.constant`
whose every use is a subscript of a scalar load or store without a map: the effects do
not look at subscripts, the work count tells accesses apart by their SSA values, and the
reuse count drops a subscript's constant term. The access regions depend on those
constants: they are found once per shape with each constant left out as a parameter
(dhir.analysis.regions.shared_regions), given by `Shapes.constants`. And the value of a
scalar floating-point `arith.constant` (its type stays in the key): no analysis reads a
float's value (the regions, trip counts and reuse count lift integers only, and a value
cast from a float is unknown to them, so the worst case; the work count counts ops by
their types), and generated tasks differ by such literals (a scale, a coefficient). Any
other literal (a loop bound, an integer multiplier or stored value) is part of the key.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Block, Operation, SSAValue

from dhir.dialects import func
from dhir.dialects.access import memref_position, scalar_access
from dhir.dialects.arith import ConstantOp
from dhir.dialects.dhir import TaskOp
from dhir.ir.symbols import Symbols

ShapeKey = tuple[object, ...]


@dataclass(frozen=True)
class Shapes:
    """Per task: its shape number, the same for two tasks when their bodies have one
    shape (`body_shape`), meaningful among these tasks only; and the constants its key
    leaves out, in walk order (the k-th of one task stands where the k-th of another of
    its shape does)."""

    ids: list[int]
    constants: list[tuple[ConstantOp, ...]]


def shapes_of(tasks: Sequence[TaskOp]) -> Shapes:
    ids: dict[ShapeKey, int] = {}
    out = Shapes([], [])
    symbols = Symbols()  # a task calling a function looked up the module's every name
    for task in tasks:
        constants: list[ConstantOp] = []
        key = body_shape(task, constants, symbols)
        try:
            out.ids.append(ids.setdefault(key, len(ids)))
        except TypeError:  # an attribute that cannot be hashed: a shape of its own
            out.ids.append(-1 - len(out.ids))
        out.constants.append(tuple(constants))
    return out


def shape_ids(tasks: Sequence[TaskOp]) -> list[int]:
    return shapes_of(tasks).ids


def body_shape(
    task: TaskOp,
    constants: list[ConstantOp] | None = None,
    symbols: Symbols | None = None,
    *,
    literals: bool = False,
) -> ShapeKey:
    """The key of `task`'s body: equal for two tasks when the effects and the work of
    one, with its memrefs by position, are those of the other. The constants the key
    leaves out are added to `constants`; `symbols` finds callees (shared by tasks of one
    module that does not change meanwhile). With `literals`, the key leaves out no
    constant: equal for two bodies that are one up to the memrefs they list."""
    memrefs = task.memrefs
    refs: dict[int, object] = {}  # by id: SSAValue hashes in Python, once per operand
    for position in range(len(memrefs) - 1, -1, -1):
        refs[id(memrefs[position])] = -1 - position  # the first position of a listed value
    parts: list[object] = [tuple(value.type for value in memrefs)]
    found = constants if constants is not None else []
    _blocks(task.body.blocks, refs, {}, parts, found, symbols or Symbols(), literals)
    return tuple(parts)


def by_position(values: frozenset[SSAValue], memrefs: Sequence[SSAValue]) -> frozenset[int]:
    """`values` (some of a task's memrefs) as their first positions in `memrefs`."""
    first = {value: k for k, value in reversed(list(enumerate(memrefs)))}
    return frozenset(first[value] for value in values)


def at_positions(positions: frozenset[int], memrefs: Sequence[SSAValue]) -> frozenset[SSAValue]:
    return frozenset(memrefs[k] for k in positions)


def _blocks(
    blocks: Sequence[Block],
    refs: dict[int, object],
    numbers: dict[int, int],
    parts: list[object],
    constants: list[ConstantOp],
    symbols: Symbols,
    literals: bool,
) -> None:
    for block in blocks:
        numbers[id(block)] = len(numbers)
        for arg in block.args:
            refs[id(arg)] = len(refs)
        parts.append(("block", tuple(arg.type for arg in block.args)))
    for block in blocks:
        parts.append("ops")
        for op in block.ops:
            _op(op, refs, numbers, parts, constants, symbols, literals)


def _op(
    op: Operation,
    refs: dict[int, object],
    numbers: dict[int, int],
    parts: list[object],
    constants: list[ConstantOp],
    symbols: Symbols,
    literals: bool,
) -> None:
    # Called for every op of every task by dhir-place: each xDSL property read once, the
    # operands from their tuple (`op.operands` builds a view to iterate).
    cls = type(op)
    results = op.results
    regions = op.regions
    successors = op.successors if op.successor_uses else ()  # most ops: no view to build
    properties = op.properties
    attributes = op.attributes
    shown: object = tuple(properties.items()) if properties else ()
    if cls is ConstantOp and not literals:
        if _subscript_only(op):  # pyright: ignore[reportArgumentType]
            shown = "subscript"  # its value left out; its type is its result's
            if op.results[0].first_use is not None:  # an unused one stands for nothing
                constants.append(op)  # pyright: ignore[reportArgumentType]
        elif isinstance(properties.get("value"), FloatAttr):
            shown = "float"  # its value read by no analysis; its type is its result's
    parts.append(
        (
            cls,
            tuple([refs.get(id(value), value) for value in op._operands]),  # pyright: ignore[reportPrivateUsage]
            tuple([result.type for result in results]),
            shown,
            tuple(attributes.items()) if attributes else (),
            tuple([numbers.get(id(block), block) for block in successors]) if successors else (),
            _callee(op, symbols) if _is_call(cls) else len(regions),  # pyright: ignore[reportArgumentType]
        )
    )
    for result in results:
        refs[id(result)] = len(refs)
    for region in regions:
        parts.append(("region", len(region.blocks)))
        _blocks(region.blocks, refs, numbers, parts, constants, symbols, literals)


def _subscript_only(op: ConstantOp) -> bool:
    """Whether every use of the constant is a subscript of a scalar load or store
    without a map (not its memref, not the value stored)."""
    value = op.result
    for use in value.uses:
        user = use.operation
        position = memref_position(user)
        if position is not None:  # a memref.load or store: its subscripts follow its memref
            if use.index <= position:
                return False
            continue
        access = scalar_access(user)
        if access is None or access.map is not None:
            return False
        if value is access.value or value is access.memref or value not in access.indices:
            return False
    return True


@cache
def _is_call(cls: type[Operation]) -> bool:
    return issubclass(cls, func.CallOp)  # isinstance of an IRDL op: the ABC's slow check


def _callee(op: func.CallOp, symbols: Symbols) -> tuple[Operation | None, int]:
    """The function a call counts (the same name in another module is another body)."""
    return symbols.lookup(op, op.callee), len(op.regions)
