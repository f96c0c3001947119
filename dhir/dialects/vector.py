"""The vector dialect with the ops MLIR 22 has and xDSL 0.74 lacks.

These ops work on vector values only (no memref operand), so they carry no memory
effects for dhir's dependence analysis to miss."""

from xdsl.dialects import vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    IntegerType,
    StringAttr,
    VectorType,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum

from dhir.dialects import with_replaced_ops

I64Array = ArrayAttr[IntegerAttr]


def _parse_i64_list(parser: Parser) -> DenseArrayBase:
    values = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
    return DenseArrayBase.from_list(i64, values)


def _print_i64_list(printer: Printer, values: DenseArrayBase) -> None:
    assert isa(values, DenseArrayBase[IntegerType])
    printer.print_string("[" + ", ".join(str(v) for v in values.get_values()) + "]")


@irdl_op_definition
class ShapeCastOp(IRDLOperation):
    name = "vector.shape_cast"

    source = operand_def(VectorType)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"


@irdl_op_definition
class ExtractStridedSliceOp(IRDLOperation):
    name = "vector.extract_strided_slice"

    source = operand_def(VectorType)
    offsets = prop_def(I64Array)
    sizes = prop_def(I64Array)
    strides = prop_def(I64Array)
    result = result_def(VectorType)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"


@irdl_op_definition
class InsertStridedSliceOp(IRDLOperation):
    name = "vector.insert_strided_slice"

    source = operand_def(VectorType)
    dest = operand_def(VectorType)
    offsets = prop_def(I64Array)
    strides = prop_def(I64Array)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "InsertStridedSliceOp":
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dest = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_keyword("into")
        dest_type = parser.parse_type()
        source, dest = parser.resolve_operands([source, dest], [source_type, dest_type], parser.pos)
        props = {k: attrs.pop(k) for k in ("offsets", "strides") if k in attrs}
        return cls.create(
            operands=[source, dest],
            result_types=[dest_type],
            properties=props,
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(", ")
        printer.print_operand(self.dest)
        printer.print_op_attributes({**self.properties, **self.attributes})
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" into ")
        printer.print_attribute(self.dest.type)


@irdl_op_definition
class TransposeOp(IRDLOperation):
    name = "vector.transpose"

    vector = operand_def(VectorType)
    permutation = prop_def(DenseArrayBase)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "TransposeOp":
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        permutation = _parse_i64_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_keyword("to")
        result_type = parser.parse_type()
        source = parser.resolve_operand(source, source_type)
        return cls.create(
            operands=[source],
            result_types=[result_type],
            properties={"permutation": permutation},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.vector)
        printer.print_string(", ")
        _print_i64_list(printer, self.permutation)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.vector.type)
        printer.print_string(" to ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class ConstantMaskOp(IRDLOperation):
    name = "vector.constant_mask"

    mask_dim_sizes = prop_def(DenseArrayBase)
    result = result_def(VectorType.constr(base(type(i1))))

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "ConstantMaskOp":
        sizes = _parse_i64_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        return cls.create(
            result_types=[result_type],
            properties={"mask_dim_sizes": sizes},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_i64_list(printer, self.mask_dim_sizes)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


class Punctuation(StrEnum):
    NO_PUNCTUATION = "no_punctuation"
    NEWLINE = "newline"
    COMMA = "comma"
    OPEN = "open"
    CLOSE = "close"


@irdl_attr_definition
class PunctuationAttr(EnumAttribute[Punctuation]):
    """`#vector.punctuation<newline>`: what `vector.print` prints after its value."""

    name = "vector.punctuation"

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.data)

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Punctuation:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(Punctuation)


_NEWLINE = PunctuationAttr(Punctuation.NEWLINE)


@irdl_op_definition
class PrintOp(IRDLOperation):
    """`vector.print (%value : T)? (punctuation <p>)? | str "text"`: prints from the
    host (a side effect, on values only)."""

    name = "vector.print"

    source = opt_operand_def()
    punctuation = prop_def(PunctuationAttr, default_value=_NEWLINE)
    stringLiteral = opt_prop_def(StringAttr)  # noqa: N815 - MLIR's name

    @classmethod
    def parse(cls, parser: Parser) -> "PrintOp":
        operands: list[SSAValue] = []
        props: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("str"):
            props["stringLiteral"] = StringAttr(parser.parse_str_literal())
        else:
            name = parser.parse_optional_unresolved_operand()
            if name is not None:
                parser.parse_punctuation(":")
                operands.append(parser.resolve_operand(name, parser.parse_type()))
            if parser.parse_optional_keyword("punctuation"):
                props["punctuation"] = PunctuationAttr(PunctuationAttr.parse_parameter(parser))
        attrs = parser.parse_optional_attr_dict()
        return cls.create(operands=operands, properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        if self.stringLiteral is not None:
            printer.print_string(" str ")
            printer.print_attribute(self.stringLiteral)
        if self.source is not None:
            printer.print_string(" ")
            printer.print_operand(self.source)
            printer.print_string(" : ")
            printer.print_attribute(self.source.type)
        if self.punctuation != _NEWLINE:
            printer.print_string(" punctuation ")
            self.punctuation.print_parameter(printer)
        printer.print_op_attributes(self.attributes)


_ADD = vector.CombiningKindAttr(vector.CombiningKindFlag.ADD)


def _outer_product_type(lhs: Attribute, rhs: Attribute) -> Attribute:
    """`lhs` x `rhs` as MLIR's outerproduct gives it (`lhs`'s type for a scalar `rhs`)."""
    if not isinstance(lhs, VectorType) or not isinstance(rhs, VectorType):
        return lhs
    scalable = (*lhs.scalable_dims.data, *rhs.scalable_dims.data)
    shape = (*lhs.get_shape(), *rhs.get_shape())
    return VectorType(lhs.element_type, shape, ArrayAttr(scalable))


@irdl_op_definition
class OuterProductOp(IRDLOperation):
    """`vector.outerproduct %lhs, %rhs (, %acc)? attr-dict : T, U`: the outer product
    of two 1-d vectors (or a vector and a scalar), added to `%acc` if given."""

    name = "vector.outerproduct"

    lhs = operand_def(VectorType)
    rhs = operand_def()
    acc = opt_operand_def(VectorType)
    kind = prop_def(vector.CombiningKindAttr, default_value=_ADD)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "OuterProductOp":
        pos = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        lhs_type = parser.parse_type()
        parser.parse_punctuation(",")
        rhs_type = parser.parse_type()
        if len(names) not in (2, 3):
            parser.raise_error("expected two or three operands", pos, parser.pos)
        result_type = _outer_product_type(lhs_type, rhs_type)
        types = [lhs_type, rhs_type, result_type][: len(names)]
        operands = parser.resolve_operands(names, types, pos)
        props = {"kind": attrs.pop("kind")} if "kind" in attrs else {}
        return cls.create(
            operands=operands, result_types=[result_type], properties=props, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        operands = (self.lhs, self.rhs) if self.acc is None else (self.lhs, self.rhs, self.acc)
        printer.print_list(operands, printer.print_operand)
        shown = dict(self.attributes)
        if self.kind != _ADD:
            shown = {"kind": self.kind, **shown}
        printer.print_op_attributes(shown)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)
        printer.print_string(", ")
        printer.print_attribute(self.rhs.type)


_ops = with_replaced_ops(
    vector.Vector,
    ShapeCastOp,
    ExtractStridedSliceOp,
    InsertStridedSliceOp,
    TransposeOp,
    ConstantMaskOp,
    PrintOp,
    OuterProductOp,
)

Vector: Dialect = Dialect(_ops.name, list(_ops.operations), [*_ops.attributes, PunctuationAttr])
