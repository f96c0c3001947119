"""The math dialect with the ops MLIR 22 has and xDSL 0.74 lacks. They compute on
values only (no memref operand), so they carry no memory effects."""

from typing import ClassVar

from xdsl.dialects import math
from xdsl.dialects.arith import FastMathFlagsAttr, floatingPointLike
from xdsl.ir import Dialect
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

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


Math: Dialect = with_replaced_ops(math.Math, SincosOp, ClampFOp)
