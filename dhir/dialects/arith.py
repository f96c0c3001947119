"""The arith dialect with the ops MLIR 22 has and xDSL 0.74 lacks, and the casts and
`arith.select` that MLIR 22 also takes on vectors and tensors (xDSL 0.74 takes scalars)."""

from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnrankedTensorType,
    VectorType,
    container_of,
    i1,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.type import get_element_type_or_self

# What the rest of dhir uses of xDSL's arith dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.arith is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.arith import (
    CMPI_COMPARISON_OPERATIONS as CMPI_COMPARISON_OPERATIONS,
    AddUIExtendedOp as AddUIExtendedOp,
    AddfOp as AddfOp,
    AddiOp as AddiOp,
    AndIOp as AndIOp,
    BitcastOp as BitcastOp,
    CeilDivSIOp as CeilDivSIOp,
    CeilDivUIOp as CeilDivUIOp,
    ConstantOp as ConstantOp,
    DivSIOp as DivSIOp,
    DivUIOp as DivUIOp,
    DivfOp as DivfOp,
    FastMathFlagsAttr as FastMathFlagsAttr,
    FloorDivSIOp as FloorDivSIOp,
    IntegerOverflowAttr as IntegerOverflowAttr,
    MaxSIOp as MaxSIOp,
    MaxUIOp as MaxUIOp,
    MaximumfOp as MaximumfOp,
    MaxnumfOp as MaxnumfOp,
    MinSIOp as MinSIOp,
    MinUIOp as MinUIOp,
    MinimumfOp as MinimumfOp,
    MinnumfOp as MinnumfOp,
    MulSIExtendedOp as MulSIExtendedOp,
    MulUIExtendedOp as MulUIExtendedOp,
    MulfOp as MulfOp,
    MuliOp as MuliOp,
    NegfOp as NegfOp,
    OrIOp as OrIOp,
    RemSIOp as RemSIOp,
    RemUIOp as RemUIOp,
    ShLIOp as ShLIOp,
    ShRSIOp as ShRSIOp,
    ShRUIOp as ShRUIOp,
    SignlessIntegerBinaryOperation as SignlessIntegerBinaryOperation,
    SubfOp as SubfOp,
    SubiOp as SubiOp,
    XOrIOp as XOrIOp,
)
from xdsl.dialects.utils import FastMathFlag as FastMathFlag
# isort: on

from dhir.dialects import with_replaced_ops
from dhir.dialects.format import parse_type_pair, print_type_pair

_INT = container_of(base(IntegerType))
_INT_OR_INDEX = arith.signlessIntegerLike
_FLOAT = arith.floatingPointLike
_NO_FASTMATH = arith.FastMathFlagsAttr("none")


class _OwnFormat:
    """Mixed in before an xDSL op that has an assembly format, so that
    `irdl_op_definition` builds this class's parser and printer from the format
    anew (the inherited ones were built for xDSL's operand constraints)."""

    parse = classmethod(Operation.parse.__func__)
    print = Operation.print

    def verify_(self) -> None:
        # The inherited `verify_` checks xDSL's constraints; the decorator adds ours.
        return None


def _check_widening(input: SSAValue, result: SSAValue) -> None:
    """An integer extension's result is wider than its input (as MLIR checks)."""
    if not _width(result.type) > _width(input.type):
        raise VerifyException("Destination bit-width must be larger than the input bit-width")


def _check_float_cast(name: str, input: SSAValue, result: SSAValue, widens: bool) -> None:
    """`arith.extf` widens and `arith.truncf` narrows, as MLIR checks (xDSL 0.74 does not:
    `f16 to bf16` reached mlir-opt-22, which stopped the build at the lowered file's line)."""
    source = get_element_type_or_self(input.type)
    target = get_element_type_or_self(result.type)
    assert isinstance(source, AnyFloat) and isinstance(target, AnyFloat)
    if (target.bitwidth > source.bitwidth) == widens and target.bitwidth != source.bitwidth:
        return
    if source == target:
        hint = "drop the cast"
    elif target.bitwidth == source.bitwidth:
        hint = (
            f"{source} and {target} are both {source.bitwidth} bits: go through f32 "
            f"(arith.extf to f32, then arith.truncf to {target})"
        )
    else:
        hint = f"use {'arith.truncf' if widens else 'arith.extf'} to go from {source} to {target}"
    raise VerifyException(
        f"'{name}' op operand type '{input.type}' and result type '{result.type}' are cast "
        f"incompatible: it must make floats {'wider' if widens else 'narrower'}; {hint}"
    )


def _width(type_: Attribute) -> int:
    element = get_element_type_or_self(type_)
    assert isinstance(element, IntegerType)
    return element.width.data


@irdl_op_definition
class IndexCastUIOp(IRDLOperation):
    """`arith.index_cast` that zero-extends where `arith.index_cast` sign-extends. xDSL 0.74
    lacks this op."""

    name = "arith.index_castui"

    input = operand_def(_INT_OR_INDEX)
    result = result_def(_INT_OR_INDEX)

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"


@irdl_op_definition
class IndexCastOp(_OwnFormat, arith.IndexCastOp):
    """xDSL 0.74 takes scalars only."""

    input = operand_def(_INT_OR_INDEX)
    result = result_def(_INT_OR_INDEX)

    def verify_(self) -> None:
        is_index = [
            isinstance(get_element_type_or_self(v.type), IndexType)
            for v in (self.input, self.result)
        ]
        if is_index[0] == is_index[1]:
            raise VerifyException(
                f"'arith.index_cast' op operand type '{self.input.type}' and result "
                f"type '{self.result.type}' are cast incompatible"
            )


@irdl_op_definition
class TruncIOp(_OwnFormat, arith.TruncIOp):
    """`arith.trunci` on vectors and tensors too, with MLIR 22's overflow flags. xDSL 0.74 takes
    scalars only."""

    input = operand_def(_INT)
    result = result_def(_INT)
    overflow_flags = prop_def(
        arith.IntegerOverflowAttr,
        default_value=arith.IntegerOverflowAttr("none"),
        prop_name="overflowFlags",
    )

    assembly_format = (
        "$input (`overflow` `` $overflowFlags^)? attr-dict `:` type($input) `to` type($result)"
    )

    def verify_(self) -> None:
        if not _width(self.result.type) < _width(self.input.type):
            raise VerifyException("Destination bit-width must be smaller than the input bit-width")


class _IntExtension(_OwnFormat):
    """The signed and unsigned integer extensions, of scalars, vectors and tensors."""

    input = operand_def(_INT)
    result = result_def(_INT)

    def verify_(self) -> None:
        _check_widening(self.input, self.result)


class _FloatToInt(_OwnFormat):
    input = operand_def(_FLOAT)
    result = result_def(_INT)


class _IntToFloat(_OwnFormat):
    input = operand_def(_INT)
    result = result_def(_FLOAT)


@irdl_op_definition
class ExtSIOp(_IntExtension, arith.ExtSIOp):
    """xDSL 0.74 takes scalars only."""


@irdl_op_definition
class ExtUIOp(_IntExtension, arith.ExtUIOp):
    """xDSL 0.74 takes scalars only."""


@irdl_op_definition
class FPToSIOp(_FloatToInt, arith.FPToSIOp):
    """xDSL 0.74 takes scalars only."""


@irdl_op_definition
class FPToUIOp(_FloatToInt, arith.FPToUIOp):
    """xDSL 0.74 takes scalars only."""


@irdl_op_definition
class SIToFPOp(_IntToFloat, arith.SIToFPOp):
    """xDSL 0.74 takes scalars only."""


@irdl_op_definition
class UIToFPOp(_IntToFloat, arith.UIToFPOp):
    """xDSL 0.74 takes scalars only."""


@irdl_op_definition
class ExtFOp(_OwnFormat, arith.ExtFOp):
    """`arith.extf` with MLIR 22's fast-math flags, which xDSL 0.74 lacks."""

    input = operand_def(_FLOAT)
    result = result_def(_FLOAT)
    fastmath = opt_prop_def(arith.FastMathFlagsAttr)  # optional in MLIR 22: none, no flags

    assembly_format = (
        "$input (`fastmath` `` $fastmath^)? attr-dict `:` type($input) `to` type($result)"
    )

    def verify_(self) -> None:
        _check_float_cast(self.name, self.input, self.result, widens=True)


# MLIR 22's arith::RoundingMode, by its value in the `roundingmode` property.
ROUNDING_MODES = ("to_nearest_even", "downward", "upward", "toward_zero", "to_nearest_away")


@irdl_op_definition
class TruncFOp(arith.TruncFOp):
    """`arith.truncf` with MLIR 22's rounding mode (`arith.truncf %x downward : f64 to f32`)
    and fast-math flags, which xDSL 0.74 lacks."""

    input = operand_def(_FLOAT)
    result = result_def(_FLOAT)
    roundingmode = opt_prop_def(IntegerAttr)
    fastmath = opt_prop_def(arith.FastMathFlagsAttr)  # optional in MLIR 22: none, no flags

    assembly_format = None

    def verify_(self) -> None:
        mode = self.roundingmode
        if mode is not None and not 0 <= mode.value.data < len(ROUNDING_MODES):
            raise VerifyException(f"'arith.truncf' op has no rounding mode {mode.value.data}")
        _check_float_cast(self.name, self.input, self.result, widens=False)

    @property
    def rounding(self) -> str | None:
        """The rounding mode's name, or None where the op names none."""
        mode = self.roundingmode
        return None if mode is None else ROUNDING_MODES[mode.value.data]

    @classmethod
    def parse(cls, parser: Parser) -> "TruncFOp":
        operand = parser.parse_unresolved_operand()
        properties: dict[str, Attribute] = {}
        mode = parser.parse_optional_keyword_in(ROUNDING_MODES)
        if mode is not None:
            properties["roundingmode"] = IntegerAttr(ROUNDING_MODES.index(mode), 32)
        if parser.parse_optional_keyword("fastmath"):
            flags = arith.FastMathFlagsAttr.parse_parameter(parser)
            properties["fastmath"] = arith.FastMathFlagsAttr(flags)
        attributes = parser.parse_optional_attr_dict()
        source, target = parse_type_pair(parser, "to")
        (input_,) = parser.resolve_operands([operand], [source], parser.pos)
        return cls.create(
            operands=[input_], result_types=[target], properties=properties, attributes=attributes
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.input)
        if self.rounding is not None:
            printer.print_string(f" {self.rounding}")
        if self.fastmath is not None:
            printer.print_string(" fastmath")
            self.fastmath.print_parameter(printer)
        printer.print_op_attributes(self.attributes)
        print_type_pair(printer, self.input.type, "to", self.result.type)


@irdl_op_definition
class SelectOp(arith.SelectOp):
    """`arith.select` whose condition may also be a vector or tensor of i1, chosen
    element by element; MLIR then prints the condition's type too.
    xDSL 0.74 takes only a scalar condition."""

    _T: ClassVar = VarConstraint("_T", AnyAttr())
    cond = operand_def(container_of(i1))
    lhs = operand_def(_T)
    rhs = operand_def(_T)
    result = result_def(_T)

    assembly_format = None

    def verify_(self) -> None:
        cond = self.cond.type
        if cond != i1 and getattr(cond, "shape", None) != getattr(self.result.type, "shape", 0):
            raise VerifyException(
                f"'arith.select' op condition type {cond} does not match the shape of "
                f"the result type {self.result.type}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> "SelectOp":
        cond = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) > 2:
            parser.raise_error("expected the condition's type and the result type")
        cond_type, result_type = types if len(types) == 2 else (i1, types[0])
        operands = parser.resolve_operands(
            [cond, lhs, rhs], [cond_type, result_type, result_type], parser.pos
        )
        return cls.create(operands=operands, result_types=[result_type], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list((self.cond, self.lhs, self.rhs), printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if self.cond.type != i1:
            printer.print_attribute(self.cond.type)
            printer.print_string(", ")
        printer.print_attribute(self.result.type)


def bools_like(type_: Attribute) -> Attribute:
    """i1, or a vector or tensor of i1 of `type_`'s shape: what comparing two
    values of `type_` gives."""
    if isinstance(type_, VectorType):
        return VectorType(i1, type_.shape, type_.scalable_dims)
    if isinstance(type_, TensorType):
        return TensorType(i1, type_.shape, type_.encoding)
    if isinstance(type_, UnrankedTensorType):
        return UnrankedTensorType(i1)
    return i1


@cache
def _predicate_attr(predicate: int) -> IntegerAttr:
    """A predicate's attribute, one object per predicate: attributes do not change, and
    building one (its i64 type, its value's range check) cost more than the rest of a
    comparison's construction."""
    return IntegerAttr(predicate, 64)


def _predicate(arg: int | str, names: list[str]) -> int:
    if isinstance(arg, int):
        return arg
    if arg not in names:
        raise VerifyException(f"Unknown comparison mnemonic: {arg}")
    return names.index(arg)


@irdl_op_definition
class CmpiOp(arith.CmpiOp):
    """`arith.cmpi` whose result, on vectors and tensors, has their shape (xDSL 0.74
    gives every comparison an i1 result)."""

    predicate = prop_def(IntegerAttr)
    lhs = operand_def(_INT_OR_INDEX)
    rhs = operand_def(_INT_OR_INDEX)
    result = result_def(container_of(i1))

    def __init__(
        self, operand1: Operation | SSAValue, operand2: Operation | SSAValue, arg: int | str
    ):
        lhs = SSAValue.get(operand1)
        predicate = _predicate(arg, arith.CMPI_COMPARISON_OPERATIONS)
        IRDLOperation.__init__(
            self,
            operands=[lhs, operand2],
            result_types=[bools_like(lhs.type)],
            properties={"predicate": _predicate_attr(predicate)},
        )

    def verify_(self) -> None:
        if self.result.type != bools_like(self.lhs.type):
            raise VerifyException(
                f"'arith.cmpi' op result type must be {bools_like(self.lhs.type)}"
            )


@irdl_op_definition
class CmpfOp(arith.CmpfOp):
    """`arith.cmpf` whose result, on vectors and tensors, has their shape. xDSL 0.74 gives every
    comparison an i1 result."""

    predicate = prop_def(IntegerAttr)
    lhs = operand_def(_FLOAT)
    rhs = operand_def(_FLOAT)
    fastmath = prop_def(arith.FastMathFlagsAttr, default_value=arith.FastMathFlagsAttr("none"))
    result = result_def(container_of(i1))

    def __init__(
        self,
        operand1: SSAValue | Operation,
        operand2: SSAValue | Operation,
        arg: int | str,
        fastmath: arith.FastMathFlagsAttr = _NO_FASTMATH,
    ):
        lhs = SSAValue.get(operand1)
        predicate = _predicate(arg, arith.CMPF_COMPARISON_OPERATIONS)
        IRDLOperation.__init__(
            self,
            operands=[lhs, operand2],
            result_types=[bools_like(lhs.type)],
            properties={"predicate": IntegerAttr(predicate, 64), "fastmath": fastmath},
        )

    def verify_(self) -> None:
        if self.result.type != bools_like(self.lhs.type):
            raise VerifyException(
                f"'arith.cmpf' op result type must be {bools_like(self.lhs.type)}"
            )


@irdl_op_definition
class RemFOp(arith.FloatingPointLikeBinaryOperation):
    """The remainder of a float division, with the dividend's sign (C's fmod). xDSL 0.74 lacks
    this op."""

    name = "arith.remf"

    traits = traits_def(Pure())


Arith: Dialect = with_replaced_ops(
    arith.Arith,
    IndexCastUIOp,
    IndexCastOp,
    TruncIOp,
    ExtSIOp,
    ExtUIOp,
    FPToSIOp,
    FPToUIOp,
    SIToFPOp,
    UIToFPOp,
    ExtFOp,
    TruncFOp,
    SelectOp,
    CmpiOp,
    CmpfOp,
    RemFOp,
)


# --- integer casts, as analyses read them ------------------------------------------------

INDEX_WIDTH = 64  # bits of `index` on every target dhir builds for

# Integer casts: op name -> whether the op reads its operand unsigned (zero-extends).
# A cast to fewer bits keeps the value modulo 2**bits, whichever of these it is.
INT_CASTS: dict[str, bool] = {
    "arith.index_cast": False,
    "arith.index_castui": True,
    "arith.extsi": False,
    "arith.extui": True,
    "arith.trunci": False,
    "index.casts": False,
    "index.castu": True,
}


def scalar_int_width(type_: Attribute) -> int | None:
    """The bits of a scalar integer or index type; None for any other type."""
    if isinstance(type_, IndexType):
        return INDEX_WIDTH
    if isinstance(type_, IntegerType):
        return type_.width.data
    return None


@dataclass(frozen=True)
class IntCast:
    """An integer cast of a scalar from `bits_in` to `bits_out` bits, reading its
    operand unsigned (zero-extending) or signed."""

    bits_in: int
    bits_out: int
    unsigned: bool

    def apply(self, value: int) -> int:
        """What the cast makes of `value` (any integer congruent to the operand's bits),
        as the result's signed value (index is signed)."""
        return signed(self.read(value), self.bits_out)

    def read(self, value: int) -> int:
        """The operand's value as the cast reads it: signed or unsigned."""
        low = value % (1 << self.bits_in)
        return low if self.unsigned else signed(low, self.bits_in)


def int_cast(op: Operation) -> IntCast | None:
    """`op` as an integer cast of a scalar, or None when it is none (or on vectors)."""
    unsigned = INT_CASTS.get(op.name)
    if unsigned is None or len(op.operands) != 1 or len(op.results) != 1:
        return None
    bits_in = scalar_int_width(op.operands[0].type)
    bits_out = scalar_int_width(op.results[0].type)
    if bits_in is None or bits_out is None:
        return None
    return IntCast(bits_in, bits_out, unsigned)


def signed(value: int, width: int) -> int:
    """`value` modulo 2**width as a signed (two's complement) number: -1 for an i1 true,
    as MLIR reads a signless integer."""
    low = value % (1 << width)
    return low - (1 << width) if low >> (width - 1) else low


def other_kind(name: str) -> str | None:
    """The arith op of the other kind of operands (`arith.addi` for `arith.addf`, and back),
    where arith has one: what a program giving an op the other kind's type meant."""
    if not name.startswith("arith.") or name[-1] not in "if":
        return None
    other = name[:-1] + ("f" if name[-1] == "i" else "i")
    return other if any(op.name == other for op in Arith.operations) else None
