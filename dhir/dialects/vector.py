"""The vector dialect with the ops MLIR 22 has and xDSL 0.74 lacks.

These ops work on vector values only (no memref operand), so they carry no memory
effects for dhir's dependence analysis to miss."""

from xdsl.dialects import vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    IntegerType,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Dialect
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.hints import isa

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


Vector: Dialect = with_replaced_ops(
    vector.Vector,
    ShapeCastOp,
    ExtractStridedSliceOp,
    InsertStridedSliceOp,
    TransposeOp,
    ConstantMaskOp,
)
