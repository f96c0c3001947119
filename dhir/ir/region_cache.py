"""Parse each distinct task body once, and clone it for the tasks that repeat it.

Large schedules are usually generated: thousands of tasks whose bodies are the same
text up to the memrefs they list (`%b3` here, `%b7` there), and xDSL's parser is slow
on that much text (docs/performance.md). A body whose text, with the
task's operand names replaced by their positions, and whose operand types equal an
earlier task's is the same IR up to those operands, so it is cloned instead of parsed.

Soundness: the clone is what the parser would have built. The body text is the same;
the task's own operands are remapped by position (their types are part of the key);
every other value the body uses from outside is looked up by name in the current
scope, as the parser would, and must have the prototype's type. Anything this cannot
reason about (string literals, `loc(...)`, forward references, a value used from
outside under no name the body mentions) is parsed normally. Each clone gets the
source locations of its own text. Its ops were verified in the prototype, so
verification skips them (see dhir.ir.verifier), but it still checks that the values
the clone uses from outside dominate the task.

Generated bodies also differ in their numbers (a tile's offset, a loop's bound), so
the literal of an `arith.constant` is part of the body's shape, not of its key: the
clone gets its own values, built as the parser builds them (checked on the prototype:
if rebuilding its own literal does not give the parsed attribute, nothing is cloned).
"""

import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from typing import TYPE_CHECKING, NamedTuple, cast

from xdsl.dialects.builtin import FileLineColLoc, FloatAttr, IntegerAttr, LocationAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from dhir.dialects.arith import ConstantOp
from dhir.dialects.dhir import YieldOp
from dhir.ir.build import float_attr, insert_new, integer_attr, new_op
from dhir.ir.collections import settle_young

if TYPE_CHECKING:
    from dhir.ir.parser import LocatedParser

# `%name` as MLIR spells value ids (a `#N` result suffix stays outside the match).
_NAME = r"%[A-Za-z0-9_$.\-]+"
_VALUE_NAME = re.compile(_NAME)
# What a body's key abstracts: an `arith.constant`'s decimal literal, or a value name.
_VARIABLE = re.compile(
    rf"(?P<constant>{_NAME}\s*=\s*(?P<op>arith\.constant)\s+)"
    r"(?P<literal>-?\d+(?P<fraction>(?:\.\d*)?(?:[eE][+-]?\d+)?))(?=\s*:)"
    rf"|(?P<name>{_NAME})"
)


@dataclass(frozen=True)
class _Body:
    """A body's text with its variable parts taken out."""

    key: str
    spans: tuple[tuple[int, int], ...]  # (offset, length) of each part replaced, in order
    literals: tuple[tuple[int, str], ...]  # (offset of its op, text) of each constant


@dataclass(frozen=True)
class _Prototype:
    region: Region
    operands: tuple[SSAValue, ...]  # the prototype task's operands, by position
    free: tuple[tuple[str, int, SSAValue], ...]  # other outer values: name, #index, value
    offsets: tuple[int | None, ...]  # of each op's location in the body text, in walk order
    spans: tuple[tuple[int, int], ...]  # as in _Body
    constants: tuple[Operation, ...]  # the arith.constant of each literal, in `region`
    constant_indices: tuple[int, ...]  # their places in `region`'s walk order
    checked: bool  # whether a clone's body passes dhir.task's checks when this one does
    plan: "_Plan | None"  # how _copy builds a clone; None: _Copier builds it


class ClonedBody(NamedTuple):
    """A cloned region, for the verifier: the values it uses from outside besides its
    task's operands, and whether dhir.task's checks of its ops follow from the
    prototype's (its target can matter: gpu ops are allowed in GPU tasks only)."""

    free: tuple[SSAValue, ...]
    checked: bool


@dataclass
class TaskBodyCache:
    """Per parse: prototypes by key, and the regions that were cloned (with the
    outer values they use) for the verifier."""

    prototypes: dict[tuple[object, ...], _Prototype | None]
    cloned: dict[Region, ClonedBody]
    _constants: dict[tuple[str, type[Attribute], Attribute], Attribute | None]

    def __init__(self) -> None:
        self.prototypes = {}
        self.cloned = {}
        self._constants = {}

    def parse(
        self, parser: "LocatedParser", header_start: int, operands: Sequence[SSAValue]
    ) -> Region | None:
        """The body at the parser's position, or None when there is no `{` (the
        caller reports it)."""
        settle_young()  # a large schedule's bodies are its IR, alive: none to scan
        text = parser.lexer.input.content
        start = parser.pos
        end = _matching_brace(text, start) if text.startswith("{", start) else None
        if end is None or not _cacheable(text, start, end):
            return parser.parse_optional_region()
        names = _VALUE_NAME.findall(text, header_start, start)
        if len(names) != len(operands):
            return parser.parse_optional_region()
        body = _normalize(text, start, end, names)
        key = (body.key, *(value.type for value in operands))
        if key in self.prototypes:
            prototype = self.prototypes[key]
            clone = (
                None if prototype is None else self._clone(parser, prototype, operands, body, start)
            )
            if clone is None:
                return parser.parse_optional_region()
            assert prototype is not None
            clone_region, free = clone
            parser._resume_from(end)  # pyright: ignore[reportPrivateUsage]
            self.cloned[clone_region] = ClonedBody(free, prototype.checked)
            return clone_region
        region = parser.parse_optional_region()
        assert region is not None
        self.prototypes[key] = _prototype(parser, region, operands, text, (start, end), body)
        return region

    def _clone(
        self,
        parser: "LocatedParser",
        prototype: _Prototype,
        operands: Sequence[SSAValue],
        body: _Body,
        start: int,
    ) -> tuple[Region, tuple[SSAValue, ...]] | None:
        # A value the prototype lists twice stands for the clone's operand where it is
        # listed first: the key numbers each name by its first place in the list.
        mapping: dict[SSAValue, SSAValue] = {}
        for old, new in zip(prototype.operands, operands, strict=True):
            mapping.setdefault(old, new)
        for name, index, old in prototype.free:
            values = parser.ssa_values.get(name)
            if values is None or index >= len(values) or values[index].type != old.type:
                return None  # the parser reports it, or it is genuinely different IR
            mapping[old] = values[index]
        try:
            values = [
                self._constant(op, literal)
                for op, (_, literal) in zip(prototype.constants, body.literals, strict=True)
            ]
        except (ValueError, OverflowError, VerifyException):
            return None  # out of its type's range: the parser reports it
        locations = list(_locations(parser, prototype, body.spans, start))
        free = tuple(mapping[old] for _, _, old in prototype.free)
        if prototype.plan is not None:
            new_values = dict(zip(prototype.constant_indices, values, strict=True))
            inputs = [mapping[value] for value in prototype.plan.inputs]
            return _copy(prototype.plan, inputs, locations, new_values), free
        changes = [_Change(location, None) for location in locations]
        for index, value in zip(prototype.constant_indices, values, strict=True):
            changes[index] = changes[index]._replace(value=value)
        clone = _Copier(mapping, iter(changes)).region(prototype.region)
        return clone, free

    def _constant(self, op: Operation, literal: str) -> Attribute | None:
        """_constant_value, once per literal and kind of value (the class and type of the
        prototype's): neighbouring tasks of a generated schedule share most of their
        literals, and attributes are immutable."""
        value = op.properties["value"]
        assert isinstance(value, FloatAttr | IntegerAttr)  # see _constant_ops
        key = (literal, type(value), value.type)
        if key not in self._constants:
            self._constants[key] = _constant_value(op, literal)
        return self._constants[key]


class _Change(NamedTuple):
    """What a clone's op takes from its own text: its location (None: the
    prototype's) and, for a literal's arith.constant, its value."""

    location: LocationAttr | None
    value: Attribute | None


class _Copier:
    """Copies a prototype's ops as xDSL's `Region.clone` does (same operands, uses in the
    same order, types, properties, attributes, name hints), each with its `_Change` (in
    walk order) applied as it is built, in one pass: cloning thousands of bodies was a
    third of parsing a large schedule (docs/performance.md)."""

    def __init__(self, mapping: dict[SSAValue, SSAValue], changes: Iterator[_Change]) -> None:
        self._values = mapping
        self._blocks: dict[Block, Block] = {}
        self._changes = changes
        self._copies: list[tuple[Operation, Operation]] = []  # (prototype's, copy) in order
        self._forward = False  # an operand was defined after its use in walk order

    def region(self, region: Region) -> Region:
        copy = Region()
        self._fill(region, copy)
        if self._forward:
            # As xDSL does: every operand set once all ops exist, in walk order.
            for old, new in self._copies:
                new.operands = [self._values.get(value, value) for value in old.operands]
        return copy

    def _fill(self, region: Region, copy: Region) -> None:
        blocks = [self._block(block) for block in region.blocks]
        copy.add_block(blocks)
        for block, new in zip(region.blocks, blocks, strict=True):
            for op in block.ops:
                new.add_op(self._op(op))

    def _block(self, block: Block) -> Block:
        new = Block(arg_types=[arg.type for arg in block.args])
        # Names as parsed (xDSL's clone drops a block's), copied as they are: the setter
        # takes `_N` off the end again, so `%x_1_2`, kept as "x_1", became "x".
        new._name = block._name  # pyright: ignore[reportPrivateUsage]
        for arg, new_arg in zip(block.args, new.args, strict=True):
            new_arg._name = arg._name  # pyright: ignore[reportPrivateUsage]
            self._values[arg] = new_arg
        self._blocks[block] = new
        return new

    def _op(self, op: Operation) -> Operation:
        change = next(self._changes)
        operands = [self._values.get(value) for value in op.operands]
        if None in operands:
            self._forward = True
        # `create` copies the dicts it is given.
        properties = op.properties
        if change.value is not None:
            properties = {**properties, "value": change.value}
        regions = [Region() for _ in op.regions] if op.regions else ()
        successors = (
            [self._blocks.get(block, block) for block in op.successors] if op.successor_uses else ()
        )
        location = op.location if change.location is None else change.location
        if successors:
            copy = op.create(
                operands=() if self._forward else cast(list[SSAValue], operands),
                result_types=op.result_types,
                properties=properties,
                attributes=op.attributes,
                location=location,
                successors=successors,
                regions=regions,
            )
        else:
            copy = new_op(
                type(op),
                () if self._forward else cast(list[SSAValue], operands),
                [result.type for result in op.results],
                properties,
                op.attributes,
                location,
                regions,
            )
        self._copies.append((op, copy))
        for result, new in zip(op.results, copy.results, strict=True):
            new._name = result._name  # pyright: ignore[reportPrivateUsage]
            self._values[result] = new
        for region, new_region in zip(op.regions, regions, strict=True):
            self._fill(region, new_region)
        return copy


class _OpPlan(NamedTuple):
    """One op of a prototype, as _copy builds its copy: values by their slot."""

    cls: type[Operation]
    operands: tuple[int, ...]
    result_types: tuple[Attribute, ...]
    results: tuple[tuple[int, str | None], ...]  # (slot, name) of each result
    properties: dict[str, Attribute]
    attributes: dict[str, Attribute]
    location: LocationAttr  # the prototype's, for an op its text does not spell
    regions: tuple[tuple["_BlockPlan", ...], ...]


class _BlockPlan(NamedTuple):
    name: str | None
    arg_types: tuple[Attribute, ...]
    args: tuple[tuple[int, str | None], ...]  # (slot, name) of each argument
    ops: tuple[_OpPlan, ...]


class _Plan(NamedTuple):
    """A prototype's region flattened for _copy: its values numbered (the values from
    outside, `inputs`, first), its ops in walk order."""

    inputs: tuple[SSAValue, ...]
    slots: int
    blocks: tuple[_BlockPlan, ...]


def _plan(region: Region, inputs: tuple[SSAValue, ...]) -> _Plan | None:
    """The plan of `region`, which uses only `inputs` from outside; None when _Copier must
    copy it (a branch to a block, or an operand defined after its use in walk order)."""
    slots = {value: slot for slot, value in enumerate(inputs)}

    def blocks(region: Region) -> tuple[_BlockPlan, ...] | None:
        planned: list[_BlockPlan] = []
        for block in region.blocks:
            args = tuple((slots.setdefault(arg, len(slots)), arg._name) for arg in block.args)  # pyright: ignore[reportPrivateUsage]
            arg_types = tuple(arg.type for arg in block.args)
            ops: list[_OpPlan] = []
            for op in block.ops:
                planned_op = one(op)
                if planned_op is None:
                    return None
                ops.append(planned_op)
            planned.append(_BlockPlan(block._name, arg_types, args, tuple(ops)))  # pyright: ignore[reportPrivateUsage]
        return tuple(planned)

    def one(op: Operation) -> _OpPlan | None:
        if op.successors or any(value not in slots for value in op.operands):
            return None
        results = tuple((slots.setdefault(r, len(slots)), r._name) for r in op.results)  # pyright: ignore[reportPrivateUsage]
        regions: list[tuple[_BlockPlan, ...]] = []
        for inner in op.regions:
            planned = blocks(inner)
            if planned is None:
                return None
            regions.append(planned)
        return _OpPlan(
            type(op),
            tuple(slots[value] for value in op.operands),
            tuple(result.type for result in op.results),
            results,
            op.properties,
            op.attributes,
            op.location,
            tuple(regions),
        )

    planned = blocks(region)
    return None if planned is None else _Plan(inputs, len(slots), planned)


def _copy(
    plan: _Plan,
    inputs: list[SSAValue],
    locations: list[LocationAttr | None],
    new_values: Mapping[int, Attribute | None],
) -> Region:
    """A copy of the plan's region as _Copier makes it, built straight from the plan:
    `inputs` in place of its inputs, each op (in walk order) at its location in
    `locations` (None: the prototype's), the arith.constant at each index of
    `new_values` with that value."""
    values: list[SSAValue | None] = [*inputs, *repeat(None, plan.slots - len(inputs))]
    order = iter(range(len(locations)))

    def region(blocks: tuple[_BlockPlan, ...]) -> Region:
        copy = Region()
        made = [block(planned) for planned in blocks]
        copy.add_block(made)
        return copy

    def block(planned: _BlockPlan) -> Block:
        new = Block(arg_types=planned.arg_types)
        new._name = planned.name  # pyright: ignore[reportPrivateUsage]
        for arg, (slot, name) in zip(new.args, planned.args, strict=True):
            arg._name = name  # pyright: ignore[reportPrivateUsage]
            values[slot] = arg
        insert_new([op(planned_op) for planned_op in planned.ops], new, None)
        return new

    def op(planned: _OpPlan) -> Operation:
        index = next(order)
        location = locations[index]
        value = new_values.get(index)
        properties = planned.properties if value is None else {**planned.properties, "value": value}
        new = new_op(
            planned.cls,
            cast(list[SSAValue], [values[slot] for slot in planned.operands]),
            planned.result_types,
            properties,
            planned.attributes,
            planned.location if location is None else location,
        )
        for result, (slot, name) in zip(new.results, planned.results, strict=True):
            result._name = name  # pyright: ignore[reportPrivateUsage]
            values[slot] = result
        for blocks in planned.regions:
            new.add_region(region(blocks))
        return new

    return region(plan.blocks)


def _constant_value(op: Operation, literal: str) -> Attribute | None:
    """The value the parser gives `literal` in place of `op`'s (an arith.constant of
    the prototype, whose value says how the literal reads); None for other ops."""
    attr = op.properties.get("value") if isinstance(op, ConstantOp) else None
    # Without the constructors' checks: a generated schedule's literals are mostly
    # distinct, and each attribute took 20-30 us through them (docs/performance.md).
    if isinstance(attr, FloatAttr):
        return float_attr(float(literal), attr.type)
    if isinstance(attr, IntegerAttr):
        return integer_attr(int(literal), attr.type)
    return None


def _cacheable(text: str, start: int, end: int) -> bool:
    body = text[start:end]
    return '"' not in body and "loc(" not in body


def _matching_brace(text: str, start: int) -> int | None:
    """One past the `}` closing the `{` at `start` (no strings inside: _cacheable);
    `//` comments are skipped."""
    depth = 0
    position = start
    braces = re.compile(r"[{}]|//[^\n]*")
    while True:
        match = braces.search(text, position)
        if match is None:
            return None
        position = match.end()
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return position


def _normalize(text: str, start: int, end: int, names: list[str]) -> _Body:
    position = {name: index for index, name in reversed(list(enumerate(names)))}
    spans: list[tuple[int, int]] = []
    literals: list[tuple[int, str]] = []
    parts: list[str] = []
    last = start
    for match in _VARIABLE.finditer(text, start, end):
        if match.group("constant") is not None:
            kind = "f" if match.group("fraction") else "i"
            literal = match.group("literal")
            # Where the parser locates the op: at its name, as MLIR does.
            literals.append((match.start("op") - start, literal))
            span_start, replacement = match.start("literal"), f"\0{kind}"
        else:
            index = position.get(match.group())
            if index is None:
                continue
            span_start, replacement = match.start(), f"%\0{index}"
        parts.append(text[last:span_start])
        parts.append(replacement)
        spans.append((span_start - start, match.end() - span_start))
        last = match.end()
    parts.append(text[last:end])
    return _Body("".join(parts), tuple(spans), tuple(literals))


def _prototype(
    parser: "LocatedParser",
    region: Region,
    operands: Sequence[SSAValue],
    text: str,
    span: tuple[int, int],
    body: _Body,
) -> _Prototype | None:
    start, end = span
    free = _free_values(region)
    remaining = free - set(operands)
    named: list[tuple[str, int, SSAValue]] = []
    for name in dict.fromkeys(_VALUE_NAME.findall(text, start, end)):
        for index, value in enumerate(parser.ssa_values.get(name[1:], ())):
            if value in remaining:
                named.append((name[1:], index, value))
                remaining.discard(value)
    if remaining:
        return None
    offsets = _op_offsets(parser, region, start)
    constants = _constant_ops(region, offsets, body.literals)
    if constants is None:
        return None
    checked = not any(op.dialect_name() == "gpu" for op in region.walk())
    # The copy kept uses stand-ins for the values from outside: uses of the real ones
    # would stay on them, as if a detached body still used them.
    outer = list(free)
    stand_ins = dict(zip(outer, Block(arg_types=[value.type for value in outer]).args))
    kept = _Copier(dict(stand_ins), repeat(_Change(None, None))).region(region)
    kept_ops = list(kept.walk())
    literal_ops = tuple(kept_ops[index] for index in constants)
    if len(kept.blocks) == 1 and not isinstance(kept.block.last_op, YieldOp):
        # The dhir.yield that TaskOp adds to a body without one (last in walk order, with
        # no text of its own), copied with the rest rather than built for each clone.
        kept.block.add_op(YieldOp())
        offsets = (*offsets, None)
    return _Prototype(
        kept,
        tuple(stand_ins.get(value, value) for value in operands),
        tuple((name, index, stand_ins[value]) for name, index, value in named),
        offsets,
        body.spans,
        literal_ops,
        constants,
        checked,
        _plan(kept, tuple(stand_ins.values())),
    )


def _constant_ops(
    region: Region, offsets: tuple[int | None, ...], literals: tuple[tuple[int, str], ...]
) -> tuple[int, ...] | None:
    """The walk index of each literal's arith.constant, or None when one cannot be
    found or rebuilt exactly as parsed (then this body's shape is never cloned)."""
    where = {offset: index for index, offset in enumerate(offsets) if offset is not None}
    ops = list(region.walk())
    indices: list[int] = []
    for offset, literal in literals:
        index = where.get(offset)
        if index is None:
            return None
        try:
            value = _constant_value(ops[index], literal)
        except (ValueError, OverflowError, VerifyException):
            return None
        if value is None or value != ops[index].properties["value"]:
            return None
        indices.append(index)
    return tuple(indices)


def _free_values(region: Region) -> set[SSAValue]:
    defined: set[SSAValue] = set()
    used: set[SSAValue] = set()
    for op in region.walk():
        defined.update(op.results)
        for inner in op.regions:
            for block in inner.blocks:
                defined.update(block.args)
        used.update(op.operands)
    for block in region.blocks:
        defined.update(block.args)
    return used - defined


def _op_offsets(parser: "LocatedParser", region: Region, start: int) -> tuple[int | None, ...]:
    """Where each op's location is in the body text; None for ops the text does not
    spell (implicit terminators), which keep their unknown location."""
    return tuple(
        parser.offset_of(op.location) - start if isinstance(op.location, FileLineColLoc) else None
        for op in region.walk()
    )


def _locations(
    parser: "LocatedParser",
    prototype: _Prototype,
    spans: tuple[tuple[int, int], ...],
    start: int,
) -> Iterator[LocationAttr | None]:
    """The location of each op of a clone (in walk order) in its own text: the
    prototype's offsets in the body, shifted by how much longer or shorter the variable
    parts before them are; None for ops the text does not spell."""
    old_positions = [offset for offset, _ in prototype.spans]
    shifts = [0, *accumulate(new - old for (_, new), (_, old) in zip(spans, prototype.spans))]
    for offset in prototype.offsets:
        if offset is None:
            yield None
        else:
            shift = shifts[bisect_left(old_positions, offset)]
            yield parser.location_at(start + offset + shift)
