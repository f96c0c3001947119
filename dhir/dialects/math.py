"""The math dialect with the ops MLIR 22 has and xDSL 0.74 lacks. They compute on
values only (no memref operand), so they carry no memory effects."""

from typing import ClassVar

from xdsl.dialects import math
from xdsl.dialects.arith import FastMathFlagsAttr, floatingPointLike
from xdsl.dialects.builtin import container_of, i1
from xdsl.dialects.math import FloatingPointLikeUnaryMathOperation
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

# What the rest of dhir uses of xDSL's math dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.math is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.math import (
    AbsFOp as AbsFOp,
    AbsIOp as AbsIOp,
    AcosOp as AcosOp,
    AcoshOp as AcoshOp,
    AsinOp as AsinOp,
    AsinhOp as AsinhOp,
    Atan2Op as Atan2Op,
    AtanOp as AtanOp,
    AtanhOp as AtanhOp,
    CbrtOp as CbrtOp,
    CeilOp as CeilOp,
    CopySignOp as CopySignOp,
    CosOp as CosOp,
    CoshOp as CoshOp,
    CountLeadingZerosOp as CountLeadingZerosOp,
    CountTrailingZerosOp as CountTrailingZerosOp,
    CtPopOp as CtPopOp,
    ErfOp as ErfOp,
    Exp2Op as Exp2Op,
    ExpM1Op as ExpM1Op,
    ExpOp as ExpOp,
    FPowIOp as FPowIOp,
    FloorOp as FloorOp,
    FmaOp as FmaOp,
    IPowIOp as IPowIOp,
    Log10Op as Log10Op,
    Log1pOp as Log1pOp,
    Log2Op as Log2Op,
    LogOp as LogOp,
    PowFOp as PowFOp,
    RoundEvenOp as RoundEvenOp,
    RoundOp as RoundOp,
    RsqrtOp as RsqrtOp,
    SinOp as SinOp,
    SinhOp as SinhOp,
    SqrtOp as SqrtOp,
    TanOp as TanOp,
    TanhOp as TanhOp,
    TruncOp as TruncOp,
)
# isort: on

from dhir.dialects import with_replaced_ops
from dhir.dialects.arith import bools_like


@irdl_op_definition
class SincosOp(IRDLOperation):
    """`math.sincos %x : T`: the sine and the cosine of `%x`. xDSL 0.74 lacks this op."""

    name = "math.sincos"

    T: ClassVar = VarConstraint("T", floatingPointLike)
    operand = operand_def(T)
    sin = result_def(T)
    cos = result_def(T)
    fastmath = prop_def(FastMathFlagsAttr, default_value=FastMathFlagsAttr("none"))

    traits = traits_def(Pure())

    assembly_format = "$operand (`fastmath` `` $fastmath^)? attr-dict `:` type($operand)"


@irdl_op_definition
class ClampFOp(IRDLOperation):
    """`math.clampf %x to [%low, %high] : T`: `%x` clamped to the range. xDSL 0.74 lacks this op."""

    name = "math.clampf"

    T: ClassVar = VarConstraint("T", floatingPointLike)
    value = operand_def(T)
    min = operand_def(T)
    max = operand_def(T)
    result = result_def(T)
    fastmath = prop_def(FastMathFlagsAttr, default_value=FastMathFlagsAttr("none"))

    traits = traits_def(Pure())

    assembly_format = (
        "$value `to` `[` $min `,` $max `]` (`fastmath` `` $fastmath^)? attr-dict `:` type($result)"
    )


@irdl_op_definition
class ErfcOp(FloatingPointLikeUnaryMathOperation):
    """`math.erfc %x : T`: the complementary error function, 1 - erf(x) without its
    cancellation. xDSL 0.74 lacks this op."""

    name = "math.erfc"

    traits = traits_def(Pure())


_NO_FASTMATH = FastMathFlagsAttr("none")


class FloatClassOp(IRDLOperation):
    """`math.isnan %x : T` and its kin: whether each element of `%x` is of a class of
    floats, as i1 (a vector or tensor of i1 for one of floats). MLIR prints the fast-math
    flags, where there are any, in the attribute dictionary. xDSL 0.74 lacks these ops."""

    operand = operand_def(floatingPointLike)
    result = result_def(container_of(i1))
    fastmath = prop_def(FastMathFlagsAttr, default_value=_NO_FASTMATH)

    traits = traits_def(Pure())

    def verify_(self) -> None:
        if self.result.type != bools_like(self.operand.type):
            raise VerifyException(
                f"'{self.name}' op result type must be {bools_like(self.operand.type)}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> "FloatClassOp":
        operand = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        properties: dict[str, Attribute] = {}
        flags = attributes.pop("fastmath", None)
        if flags is not None:
            if not isinstance(flags, FastMathFlagsAttr):
                parser.raise_error(f"expected fast-math flags, not {flags}")
            properties["fastmath"] = flags
        parser.parse_punctuation(":")
        type_ = parser.parse_type()
        (value,) = parser.resolve_operands([operand], [type_], parser.pos)
        return cls.create(
            operands=[value],
            result_types=[bools_like(type_)],
            properties=properties,
            attributes=attributes,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand)
        shown = dict(self.attributes)
        if self.fastmath != _NO_FASTMATH:
            shown["fastmath"] = self.fastmath
        printer.print_op_attributes(shown)
        printer.print_string(" : ")
        printer.print_attribute(self.operand.type)


@irdl_op_definition
class IsNaNOp(FloatClassOp):
    """Whether `%x` is a NaN. xDSL 0.74 lacks this op."""

    name = "math.isnan"


@irdl_op_definition
class IsInfOp(FloatClassOp):
    """Whether `%x` is an infinity of either sign. xDSL 0.74 lacks this op."""

    name = "math.isinf"


@irdl_op_definition
class IsFiniteOp(FloatClassOp):
    """Whether `%x` is neither NaN nor infinite. xDSL 0.74 lacks this op."""

    name = "math.isfinite"


@irdl_op_definition
class IsNormalOp(FloatClassOp):
    """Whether `%x` is normal: finite, nonzero and not subnormal. xDSL 0.74 lacks this op."""

    name = "math.isnormal"


Math: Dialect = with_replaced_ops(
    math.Math, SincosOp, ClampFOp, ErfcOp, IsNaNOp, IsInfOp, IsFiniteOp, IsNormalOp
)
