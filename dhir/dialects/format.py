"""Helpers for dhir's versions of xDSL ops: changing a subclass's IRDL definition,
giving it a declarative assembly format, and small pieces of MLIR syntax."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar, cast

from xdsl.ir import Attribute, Block
from xdsl.irdl import (
    AttributeDef,
    AttrSizedOperandSegments,
    IRDLOperation,
    OperandDef,
    OptPropertyDef,
    OpTraits,
    PropertyDef,
    irdl_to_attr_constraint,
)
from xdsl.irdl.declarative_assembly_format import FormatProgram
from xdsl.irdl.operations import get_accessors_from_op_def
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.str_enum import StrEnum

OpT = TypeVar("OpT", bound=type[IRDLOperation])


class AngleBracketEnum:
    """Mixin for an EnumAttribute written `#dialect.name<value>` (put it before
    `EnumAttribute[...]` in the bases): the value sits in angle brackets."""

    # The attribute's own `data` and `enum_type` (EnumAttribute's), read as such.
    def print_parameter(self, printer: Printer) -> None:
        data = cast(StrEnum, getattr(self, "data"))  # noqa: B009
        with printer.in_angle_brackets():
            printer.print_identifier_or_string_literal(data.value)

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Any:
        enum_type = cast(type[StrEnum], getattr(cls, "enum_type"))  # noqa: B009
        with parser.in_angle_brackets():
            return parser.parse_str_enum(enum_type)


def redefine(
    *,
    properties: Mapping[str, PropertyDef] = {},
    attributes: Mapping[str, AttributeDef] = {},
    drop: Iterable[str] = (),
    drop_segment_sizes: bool = False,
    traits: OpTraits | None = None,
) -> Callable[[OpT], OpT]:
    """Class decorator giving a subclass of an xDSL op a changed IRDL definition.

    `irdl_op_definition` cannot be applied again to a subclass of a defined op, so this
    edits a copy of the base definition instead. New entries replace old ones of the same
    name, and the properties named in `drop` go; the accessor of an attribute is the
    last part of its name (`gpu.kernel` -> `kernel`); `traits`, given, replace the base
    op's (a subclass's own `traits` would only add to them). The base op's own `verify_`
    checks are lost: the subclass restates those it needs in its own `verify_`.
    """

    def apply(cls: OpT) -> OpT:
        base = cls.get_irdl_definition()
        dropped = set(drop)
        options = list(base.options)
        if drop_segment_sizes:
            # The option also declared the segment sizes attribute/property.
            segments = AttrSizedOperandSegments
            options = [o for o in options if not isinstance(o, segments)]
            dropped.add(AttrSizedOperandSegments.attribute_name)
        kept = {k: v for k, v in base.properties.items() if k not in dropped}
        kept_attrs = {k: v for k, v in base.attributes.items() if k not in dropped}
        accessors = {k: v for k, v in base.accessor_names.items() if v[0] not in dropped}
        accessors.update({name: (name, "property") for name in properties})
        accessors.update({name.rsplit(".", 1)[-1]: (name, "attribute") for name in attributes})
        op_def = replace(
            base,
            properties={**kept, **properties},
            attributes={**kept_attrs, **attributes},
            accessor_names=accessors,
            options=options,
            assembly_format=None,
            traits=base.traits if traits is None else traits,
        )
        own_verify = cls.__dict__.get("verify_")
        for name, value in get_accessors_from_op_def(op_def, own_verify).items():
            setattr(cls, name, value)
        return cls

    return apply


def optional_property(constraint: object) -> OptPropertyDef:
    return OptPropertyDef(irdl_to_attr_constraint(constraint))  # pyright: ignore


def custom_format(assembly_format: str) -> Callable[[OpT], OpT]:
    """Class decorator giving a subclass of an xDSL op a declarative assembly format."""

    def apply(cls: OpT) -> OpT:
        program = FormatProgram.from_str(assembly_format, cls.get_irdl_definition())

        def parse(op_type: OpT, parser: Parser) -> IRDLOperation:
            return program.parse(parser, op_type)

        def print_op(self: IRDLOperation, printer: Printer) -> None:
            program.print(printer, self)

        patched = cast(Any, cls)  # IRDL ops' syntax is replaced after the class is made
        patched.parse = classmethod(parse)
        patched.print = print_op
        return cls

    return apply


def split_properties(
    op_type: type[IRDLOperation], attrs: Mapping[str, Attribute]
) -> tuple[dict[str, Attribute], dict[str, Attribute]]:
    """(properties, attributes) of an attr-dict: as in MLIR, an entry naming one of the
    op's properties sets that property."""
    names = op_type.get_irdl_definition().properties
    props = {k: v for k, v in attrs.items() if k in names}
    return props, {k: v for k, v in attrs.items() if k not in names}


def has_terminator(block: Block) -> bool:
    last = block.last_op
    return last is not None and last.has_trait(IsTerminator)


def print_type_list(printer: Printer, types: Iterable[Attribute]) -> None:
    printer.print_list(types, printer.print_attribute)


def parse_type_pair(parser: Parser, keyword: str) -> tuple[Attribute, Attribute]:
    """`: A keyword B`, the end of a cast's syntax (`: vector<4xf32> to vector<2x2xf32>`)."""
    parser.parse_punctuation(":")
    first = parser.parse_type()
    parser.parse_keyword(keyword)
    return first, parser.parse_type()


def print_type_pair(printer: Printer, first: Attribute, keyword: str, second: Attribute) -> None:
    """Prints what `parse_type_pair` reads."""
    printer.print_string(" : ")
    printer.print_attribute(first)
    printer.print_string(f" {keyword} ")
    printer.print_attribute(second)


def redefine_operands(operands: Mapping[str, OperandDef]) -> Callable[[OpT], OpT]:
    """Class decorator giving a subclass of an xDSL op other constraints on the operands
    named in `operands` (their order is kept); like `redefine`, the base op's own
    `verify_` checks are lost."""

    def apply(cls: OpT) -> OpT:
        base = cls.get_irdl_definition()
        changed = [(name, operands.get(name, old)) for name, old in base.operands]
        op_def = replace(base, operands=changed, assembly_format=None)
        own_verify = cls.__dict__.get("verify_")
        for name, value in get_accessors_from_op_def(op_def, own_verify).items():
            setattr(cls, name, value)
        return cls

    return apply
