"""MLIR 22's index dialect, which xDSL 0.74 lacks: integer arithmetic on `index` values
(64 bits wide on every target dhir builds for), in MLIR's textual form.

Each binary op computes what the arith op of `ARITH_EQUIVALENT` computes on index
values (index.shl by 64 or more, a division by zero and the signed overflow of
index.divs are undefined, as there); `convert-to-llvm` lowers them natively."""

from xdsl.dialects.builtin import (
    BoolAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    i1,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Dialect, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Commutative, ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

INDEX_BITS = 64


class _Binary(IRDLOperation):
    """`index.OP %lhs, %rhs`: two index values to one."""

    lhs = operand_def(IndexType)
    rhs = operand_def(IndexType)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    assembly_format = "$lhs `,` $rhs attr-dict"


class _Commutative(_Binary):
    traits = traits_def(Pure(), Commutative())


@irdl_op_definition
class AddOp(_Commutative):
    name = "index.add"


@irdl_op_definition
class SubOp(_Binary):
    name = "index.sub"


@irdl_op_definition
class MulOp(_Commutative):
    name = "index.mul"


@irdl_op_definition
class DivSOp(_Binary):
    name = "index.divs"


@irdl_op_definition
class DivUOp(_Binary):
    name = "index.divu"


@irdl_op_definition
class CeilDivSOp(_Binary):
    name = "index.ceildivs"


@irdl_op_definition
class CeilDivUOp(_Binary):
    name = "index.ceildivu"


@irdl_op_definition
class FloorDivSOp(_Binary):
    name = "index.floordivs"


@irdl_op_definition
class RemSOp(_Binary):
    name = "index.rems"


@irdl_op_definition
class RemUOp(_Binary):
    name = "index.remu"


@irdl_op_definition
class MaxSOp(_Commutative):
    name = "index.maxs"


@irdl_op_definition
class MaxUOp(_Commutative):
    name = "index.maxu"


@irdl_op_definition
class MinSOp(_Commutative):
    name = "index.mins"


@irdl_op_definition
class MinUOp(_Commutative):
    name = "index.minu"


@irdl_op_definition
class ShlOp(_Binary):
    name = "index.shl"


@irdl_op_definition
class ShrSOp(_Binary):
    name = "index.shrs"


@irdl_op_definition
class ShrUOp(_Binary):
    name = "index.shru"


@irdl_op_definition
class AndOp(_Commutative):
    name = "index.and"


@irdl_op_definition
class OrOp(_Commutative):
    name = "index.or"


@irdl_op_definition
class XOrOp(_Commutative):
    name = "index.xor"


BINARY_OPS: tuple[type[_Binary], ...] = (
    AddOp, SubOp, MulOp, DivSOp, DivUOp, CeilDivSOp, CeilDivUOp, FloorDivSOp, RemSOp,
    RemUOp, MaxSOp, MaxUOp, MinSOp, MinUOp, ShlOp, ShrSOp, ShrUOp, AndOp, OrOp, XOrOp,
)  # fmt: skip


class CmpPredicate(StrEnum):
    EQ = "eq"
    NE = "ne"
    SLT = "slt"
    SLE = "sle"
    SGT = "sgt"
    SGE = "sge"
    ULT = "ult"
    ULE = "ule"
    UGT = "ugt"
    UGE = "uge"


# In arith.cmpi's order: a predicate's position is its arith.cmpi number.
CMP_PREDICATES: tuple[CmpPredicate, ...] = tuple(CmpPredicate)


@irdl_attr_definition
class CmpPredicateAttr(EnumAttribute[CmpPredicate], SpacedOpaqueSyntaxAttribute):
    """`#index<cmp_predicate slt>` in the generic form."""

    name = "index.cmp_predicate"


@irdl_op_definition
class CmpOp(IRDLOperation):
    """`index.cmp slt(%lhs, %rhs)`: an i1."""

    name = "index.cmp"

    pred = prop_def(CmpPredicateAttr)
    lhs = operand_def(IndexType)
    rhs = operand_def(IndexType)
    result = result_def(i1)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "CmpOp":
        predicate = CmpPredicateAttr(parser.parse_str_enum(CmpPredicate))
        operands = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        start = parser.pos
        attrs = parser.parse_optional_attr_dict()
        resolved = parser.resolve_operands(operands, [IndexType()] * len(operands), start)
        return cls.create(
            operands=resolved, result_types=[i1], properties={"pred": predicate}, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.pred.data.value}(")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if len(self.operands) != 2:
            raise VerifyException("expected two operands")


class _Cast(IRDLOperation):
    """`index.OP %input : T to U`: between index and an integer type."""

    input = operand_def(IntegerType | IndexType)
    output = result_def(IntegerType | IndexType)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `to` type($output)"

    def verify_(self) -> None:
        kinds = (isinstance(self.input.type, IndexType), isinstance(self.output.type, IndexType))
        if sum(kinds) != 1:
            raise VerifyException(
                f"casts between index and an integer type, not {self.input.type} to "
                f"{self.output.type}"
            )


@irdl_op_definition
class CastSOp(_Cast):
    """Sign-extends or truncates."""

    name = "index.casts"


@irdl_op_definition
class CastUOp(_Cast):
    """Zero-extends or truncates."""

    name = "index.castu"


@irdl_op_definition
class SizeOfOp(IRDLOperation):
    """`index.sizeof`: the width of index in bits (64)."""

    name = "index.sizeof"

    result = result_def(IndexType)

    traits = traits_def(Pure())

    assembly_format = "attr-dict"


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """`index.constant 42`: a signed 64-bit value."""

    name = "index.constant"

    value = prop_def(IntegerAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: int) -> None:
        super().__init__(
            result_types=[IndexType()], properties={"value": IntegerAttr(value, IndexType())}
        )

    @classmethod
    def parse(cls, parser: Parser) -> "ConstantOp":
        start = parser.pos
        value = parser.parse_integer(allow_boolean=False)
        if not -(1 << (INDEX_BITS - 1)) <= value < 1 << (INDEX_BITS - 1):
            parser.raise_error("integer constant out of range for index", start, parser.pos)
        op = cls(value)
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.value.value.data}")
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if not isinstance(self.value.type, IndexType):
            raise VerifyException(f"expected an index value, not {self.value}")


@irdl_op_definition
class BoolConstantOp(IRDLOperation):
    """`index.bool.constant true`: an i1."""

    name = "index.bool.constant"

    value = prop_def(BoolAttr)
    result = result_def(i1)

    traits = traits_def(Pure(), ConstantLike())

    @classmethod
    def parse(cls, parser: Parser) -> "BoolConstantOp":
        value = parser.parse_boolean()
        attrs = parser.parse_optional_attr_dict()
        return cls.create(
            result_types=[i1], properties={"value": BoolAttr.from_bool(value)}, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" true" if self.value.value.data else " false")
        printer.print_op_attributes(self.attributes)


Index: Dialect = Dialect(
    "index",
    [*BINARY_OPS, CmpOp, CastSOp, CastUOp, SizeOfOp, ConstantOp, BoolConstantOp],
    [CmpPredicateAttr],
)
