"""The scf dialect with MLIR 22's custom syntax for `scf.parallel` and `scf.reduce`,
which xDSL 0.74 prints generically (`scf.parallel`) or with regions MLIR cannot read
(`scf.reduce` without the `,` between its regions)."""

from collections.abc import Sequence

from xdsl.dialects import scf
from xdsl.dialects.builtin import FunctionType, IndexType, UnitAttr
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from dhir.dialects import with_replaced_ops
from dhir.dialects.format import (
    has_terminator,
    optional_property,
    print_type_list,
    redefine,
    split_properties,
)

_SEGMENTS = "operandSegmentSizes"
_NO_INLINE = "no_inline"


class ReduceOp(scf.ReduceOp):
    """`scf.reduce ((%v, ... : types))? region (, region)* attr-dict`."""

    def print(self, printer: Printer) -> None:
        if self.args:
            printer.print_string("(")
            printer.print_list(self.args, printer.print_operand)
            printer.print_string(" : ")
            print_type_list(printer, self.args.types)
            printer.print_string(")")
        for i, region in enumerate(self.reductions):
            printer.print_string(", " if i else " ")
            printer.print_region(region)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "ReduceOp":
        args: Sequence[SSAValue] = []
        if parser.parse_optional_punctuation("("):
            names = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(":")
            pos = parser.pos
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            parser.parse_punctuation(")")
            args = parser.resolve_operands(names, types, pos)
        regions: list[Region] = []
        if (region := parser.parse_optional_region()) is not None:
            regions.append(region)
            while parser.parse_optional_punctuation(","):
                regions.append(parser.parse_region())
        attrs = parser.parse_optional_attr_dict()
        return cls.build(operands=[args], regions=[regions], attributes=attrs)


class ParallelOp(scf.ParallelOp):
    """`scf.parallel (%i, ...) = (lbs) to (ubs) step (steps) (init (vals))? (-> types)?
    region attr-dict`. Like MLIR, parsing adds the `scf.reduce` terminator when it is
    missing, and printing always shows it."""

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(
            self.body.block.args,
            lambda arg: printer.print_block_argument(arg, print_type=False),
        )
        for keyword, values in (
            (") = (", self.lowerBound),
            (") to (", self.upperBound),
            (") step (", self.step),
        ):
            printer.print_string(keyword)
            printer.print_list(values, printer.print_operand)
        printer.print_string(")")
        if self.initVals:
            printer.print_string(" init (")
            printer.print_list(self.initVals, printer.print_operand)
            printer.print_string(")")
        _print_arrow_types(printer, self.res.types)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes, reserved_attr_names=(_SEGMENTS,))

    @classmethod
    def parse(cls, parser: Parser) -> "ParallelOp":
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_punctuation("=")
        lower = _parse_index_list(parser)
        parser.parse_keyword("to")
        upper = _parse_index_list(parser)
        parser.parse_keyword("step")
        steps = _parse_index_list(parser)
        init_names: list[UnresolvedOperand] = []
        if parser.parse_optional_keyword("init"):
            init_names = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            )
        pos = parser.pos
        result_types = _parse_arrow_types(parser)
        inits = parser.resolve_operands(init_names, result_types, pos)
        body = parser.parse_region([iv.resolve(IndexType()) for iv in ivs])
        attrs = parser.parse_optional_attr_dict()
        attrs.pop(_SEGMENTS, None)
        _ensure_reduce(body)
        return cls.build(
            operands=[lower, upper, steps, inits],
            result_types=[result_types],
            regions=[body],
            attributes=attrs,
        )


@redefine(properties={_NO_INLINE: optional_property(UnitAttr)})
class ExecuteRegionOp(scf.ExecuteRegionOp):
    """`scf.execute_region (-> types)? no_inline? region attr-dict`. MLIR prints every
    terminator: xDSL 0.74 left them out when the op has no results, which loses the
    `scf.yield` of each block of a region with several, and dropped the attributes."""

    def print(self, printer: Printer) -> None:
        _print_arrow_types(printer, self.outs.types)
        printer.print_string(" ")
        if _NO_INLINE in self.properties:
            printer.print_string("no_inline ")
        printer.print_region(self.region, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if self.region.first_block is None:
            raise VerifyException("scf.execute_region needs a region with at least one block")

    @classmethod
    def parse(cls, parser: Parser) -> "ExecuteRegionOp":
        result_types = _parse_arrow_types(parser)
        no_inline = parser.parse_optional_keyword(_NO_INLINE) is not None
        region = parser.parse_region()
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        if no_inline:
            props[_NO_INLINE] = UnitAttr()
        return cls.build(
            result_types=[result_types], regions=[region], properties=props, attributes=attrs
        )


def _parse_index_list(parser: Parser) -> list[SSAValue]:
    return parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
    )


def _ensure_reduce(body: Region) -> None:
    if not body.blocks:
        body.add_block(Block())
    block = body.blocks[-1]
    if not has_terminator(block):
        block.add_op(ReduceOp())


def _print_arrow_types(printer: Printer, types: Sequence[Attribute]) -> None:
    """MLIR's optional arrow type list: nothing, `-> t` or `-> (t, u)`."""
    if not types:
        return
    printer.print_string(" -> ")
    # A lone function type needs parentheses to be read back.
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        printer.print_attribute(types[0])
        return
    printer.print_string("(")
    print_type_list(printer, types)
    printer.print_string(")")


def _parse_arrow_types(parser: Parser) -> list[Attribute]:
    if not parser.parse_optional_punctuation("->"):
        return []
    types: list[Attribute] | None = parser.parse_optional_comma_separated_list(
        parser.Delimiter.PAREN, parser.parse_type
    )
    return [parser.parse_type()] if types is None else types


SCF: Dialect = with_replaced_ops(scf.Scf, ParallelOp, ReduceOp, ExecuteRegionOp)
