"""Parse each distinct task body once, and clone it for the tasks that repeat it.

Large schedules are usually generated: thousands of tasks whose bodies are the same
text up to the memrefs they list (`%b3` here, `%b7` there). xDSL parses ~5k ops/s,
which made parsing alone take 20 s for 10,000 tasks. A body whose text, with the
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
"""

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Region, SSAValue

if TYPE_CHECKING:
    from dhir.ir.parser import LocatedParser

# `%name` as MLIR spells value ids (a `#N` result suffix stays outside the match).
_VALUE_NAME = re.compile(r"%[A-Za-z0-9_$.\-]+")


@dataclass(frozen=True)
class _Prototype:
    region: Region
    operands: tuple[SSAValue, ...]  # the prototype task's operands, by position
    free: tuple[tuple[str, int, SSAValue], ...]  # other outer values: name, #index, value
    offsets: tuple[int | None, ...]  # of each op's location in the body text, in walk order
    renamed: tuple[tuple[int, int], ...]  # (offset, length) of each operand name


@dataclass
class TaskBodyCache:
    """Per parse: prototypes by key, and the regions that were cloned (with the
    outer values they use) for the verifier."""

    prototypes: dict[tuple[object, ...], _Prototype | None]
    cloned: dict[Region, tuple[SSAValue, ...]]

    def __init__(self) -> None:
        self.prototypes = {}
        self.cloned = {}

    def parse(
        self, parser: "LocatedParser", header_start: int, operands: Sequence[SSAValue]
    ) -> Region | None:
        """The body at the parser's position, or None when there is no `{` (the
        caller reports it)."""
        text = parser.lexer.input.content
        start = parser.pos
        end = _matching_brace(text, start) if text.startswith("{", start) else None
        if end is None or not _cacheable(text, start, end):
            return parser.parse_optional_region()
        names = _VALUE_NAME.findall(text, header_start, start)
        if len(names) != len(operands):
            return parser.parse_optional_region()
        normalized, renamed = _normalize(text, start, end, names)
        key = (normalized, *(value.type for value in operands))
        if key in self.prototypes:
            prototype = self.prototypes[key]
            clone = None if prototype is None else self._clone(parser, prototype, operands)
            if clone is not None:
                clone_region, free = clone
                _relocate(parser, clone_region, prototype, renamed, start)  # type: ignore[arg-type]
                parser._resume_from(end)  # pyright: ignore[reportPrivateUsage]
                self.cloned[clone_region] = free
                return clone_region
            return parser.parse_optional_region()
        region = parser.parse_optional_region()
        assert region is not None
        self.prototypes[key] = _prototype(parser, region, operands, text, (start, end), renamed)
        return region

    def _clone(
        self, parser: "LocatedParser", prototype: _Prototype, operands: Sequence[SSAValue]
    ) -> tuple[Region, tuple[SSAValue, ...]] | None:
        mapping: dict[SSAValue, SSAValue] = dict(zip(prototype.operands, operands, strict=True))
        for name, index, old in prototype.free:
            values = parser.ssa_values.get(name)
            if values is None or index >= len(values) or values[index].type != old.type:
                return None  # the parser reports it, or it is genuinely different IR
            mapping[old] = values[index]
        clone = Region()
        prototype.region.clone_into(clone, value_mapper=mapping)
        return clone, tuple(mapping[old] for _, _, old in prototype.free)


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


def _normalize(
    text: str, start: int, end: int, names: list[str]
) -> tuple[str, tuple[tuple[int, int], ...]]:
    position = {name: index for index, name in reversed(list(enumerate(names)))}
    renamed: list[tuple[int, int]] = []
    parts: list[str] = []
    last = start
    for match in _VALUE_NAME.finditer(text, start, end):
        index = position.get(match.group())
        if index is None:
            continue
        parts.append(text[last : match.start()])
        parts.append(f"%\0{index}")
        renamed.append((match.start() - start, match.end() - match.start()))
        last = match.end()
    parts.append(text[last:end])
    return "".join(parts), tuple(renamed)


def _prototype(
    parser: "LocatedParser",
    region: Region,
    operands: Sequence[SSAValue],
    text: str,
    span: tuple[int, int],
    renamed: tuple[tuple[int, int], ...],
) -> _Prototype | None:
    start, end = span
    remaining = _free_values(region) - set(operands)
    named: list[tuple[str, int, SSAValue]] = []
    for name in dict.fromkeys(_VALUE_NAME.findall(text, start, end)):
        for index, value in enumerate(parser.ssa_values.get(name[1:], ())):
            if value in remaining:
                named.append((name[1:], index, value))
                remaining.discard(value)
    if remaining:
        return None
    offsets = _op_offsets(parser, region, start)
    return _Prototype(region.clone(), tuple(operands), tuple(named), offsets, renamed)


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


def _relocate(
    parser: "LocatedParser",
    clone: Region,
    prototype: _Prototype,
    renamed: tuple[tuple[int, int], ...],
    start: int,
) -> None:
    """Give the clone's ops the locations of their own text: the same offsets in the
    body, shifted by how much longer or shorter the operand names before them are."""
    old_positions = [offset for offset, _ in prototype.renamed]
    shifts = [0, *accumulate(new - old for (_, new), (_, old) in zip(renamed, prototype.renamed))]
    for op, offset in zip(clone.walk(), prototype.offsets, strict=True):
        if offset is None:
            continue
        shift = shifts[bisect_left(old_positions, offset)]
        op.location = parser.location_at(start + offset + shift)
