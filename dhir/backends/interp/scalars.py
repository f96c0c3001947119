"""MLIR's scalar semantics: wrapping integers, float rounding, conversions."""

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    VectorType,
)
from xdsl.interpreter import (
    PythonValues,
)
from xdsl.ir import Attribute, Operation

from dhir.backends.interp.core import INDEX_WIDTH, f32_bits, f32_value, fail
from dhir.dialects import arith
from dhir.dialects.arith import signed


def lane_type(type_: Attribute) -> Attribute:
    """The element type of a vector (arith and math ops work lane by lane), else `type_`."""
    return type_.element_type if isinstance(type_, VectorType) else type_


def int_width(op: Operation, type_: Attribute) -> int:
    type_ = lane_type(type_)
    if isinstance(type_, IndexType):
        return INDEX_WIDTH
    if isinstance(type_, IntegerType):
        return type_.width.data
    fail(op, f"on {type_} is not supported by the interpreter (scalars only)")


def wrap(value: int, width: int) -> int:
    """`value` modulo 2**width, as the canonical signed value (0 or 1 for i1)."""
    return value & 1 if width == 1 else signed(value, width)


def unsigned(value: int, width: int) -> int:
    return value & ((1 << width) - 1)


_F32 = struct.Struct("<f")
_F16 = struct.Struct("<e")


def _rounder(packer: struct.Struct) -> Callable[[float], float]:
    def round_to(value: float) -> float:
        try:  # C's (float) cast: round to nearest even
            return packer.unpack(packer.pack(value))[0]
        except OverflowError:  # finite but rounds past the largest value
            return math.copysign(math.inf, value)

    return round_to


def _same(value: float) -> float:
    return value


_PACK_F16 = _rounder(_F16)


def _round_f16(value: float) -> float:
    """To f16 as native code rounds (LLVM computes f16 in f32): a NaN keeps its sign and
    the top bits of its payload, where struct's 'e' gives every NaN the payload 0x200."""
    if value != value:
        return float(np.float16(value))
    return _PACK_F16(value)


_PACK_F32 = _rounder(_F32)


def _round_f32(value: float) -> float:
    """To f32; a NaN keeps its bits that f32 holds, a signalling one too (f32_value),
    where the hardware's conversion quiets it: an arithmetic result is quiet already,
    and what else rounds to f32 (`math.fpowi` of power 1) keeps it natively."""
    return f32_value(f32_bits(value)) if value != value else _PACK_F32(value)


def _round_bf16(value: float) -> float:
    """As native code computes bf16 (MLIR's emulation in f32): rounded to f32, then to
    bf16's 8 significant bits, to nearest even; a NaN quieted, as its truncation does."""
    if value != value:
        return _round_f32(value + value)
    single = _round_f32(value)
    if math.isinf(single):
        return single
    bits = int.from_bytes(_F32.pack(single), "little")
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return _F32.unpack(bits.to_bytes(4, "little"))[0]


def round_bf16_once(value: float) -> float:
    """An f64 `value` rounded once to bf16, to nearest even (arith.truncf f64 to bf16, as
    dhir's runtime does it): to f32 rounding to odd, which keeps 16 bits more than bf16
    and marks an inexact result in its last bit, then to bf16."""
    single = _round_f32(value)
    if single == value or single != single:
        return _round_bf16(single)
    bits = int.from_bytes(_F32.pack(single), "little")
    if abs(single) > abs(value):
        bits -= 1  # rounded away from zero: the f32 below, in magnitude
    return _round_bf16(_F32.unpack((bits | 1).to_bytes(4, "little"))[0])


def _next_in_magnitude(value: float, target: Attribute, away: bool) -> float:
    """The float of `target` beside `value` (one of its floats, not a NaN) away from zero
    or toward it: its bits plus or minus one, the sign kept (bf16 is f32's upper half)."""
    packer, unit = (_F16, 1) if isinstance(target, Float16Type) else (_F32, 1)
    if isinstance(target, BFloat16Type):
        unit = 1 << 16
    bits = int.from_bytes(packer.pack(value), "little") + (unit if away else -unit)
    return packer.unpack(bits.to_bytes(packer.size, "little"))[0]


def round_directed(value: float, nearest: float, mode: str, target: Attribute) -> float:
    """`value` rounded into `target` as `mode` (arith.truncf's rounding mode) says, from
    `nearest`, its rounding to nearest even: one of the two floats of `target` around
    `value`, so the result is either it or its neighbour on `value`'s other side."""
    if nearest == value or value != value:
        return nearest
    further = abs(nearest) > abs(value)  # nearest lies beyond value, away from zero
    if mode == "toward_zero":
        return _next_in_magnitude(nearest, target, away=False) if further else nearest
    if mode in ("downward", "upward"):
        if (nearest > value) != (mode == "downward"):
            return nearest
        # Toward -inf is away from zero for a negative float, toward it for a positive one.
        negative = math.copysign(1.0, nearest) < 0
        return _next_in_magnitude(nearest, target, away=negative == (mode == "downward"))
    assert mode == "to_nearest_away", mode
    if further:
        return nearest
    other = _next_in_magnitude(nearest, target, away=True)
    # Exact differences: both floats lie within a factor two of value (Sterbenz).
    tie = abs(other) - abs(value) == abs(value) - abs(nearest)
    return other if tie else nearest


# The precision (significand bits) and rounding of each float type the interpreter runs.
_FLOATS: dict[type[Attribute], tuple[int, Callable[[float], float]]] = {
    Float16Type: (11, _round_f16),
    BFloat16Type: (24, _round_bf16),  # through f32, as native code computes it
    Float32Type: (24, _round_f32),
    Float64Type: (53, _same),
}


def float_rounder(op: Operation, type_: Attribute) -> Callable[[float], float]:
    found = _FLOATS.get(type(lane_type(type_)))
    if found is None:
        fail(op, f"on {type_} is not supported by the interpreter (f16, bf16, f32, f64 only)")
    return found[1]


def result_rounder(op: Operation) -> Callable[[float], float]:
    return float_rounder(op, op.results[0].type)


def int_to_float(op: Operation, value: int, type_: Attribute) -> float:
    """`value` rounded once, to nearest even, into the float type (no double rounding
    through float64 for wide integers)."""
    round_to = float_rounder(op, type_)
    bits = _FLOATS[type(lane_type(type_))][0]
    extra = abs(value).bit_length() - bits
    if extra > 0:
        quotient, rest = divmod(abs(value), 1 << extra)
        half = 1 << (extra - 1)
        if rest > half or (rest == half and quotient & 1):
            quotient += 1
        value = (quotient << extra) * (1 if value >= 0 else -1)
    return round_to(float(value))


def float_to_int(op: Operation, value: float, width: int, is_signed: bool) -> int:
    low = -(1 << (width - 1)) if is_signed else 0
    high = (1 << (width - 1 if is_signed else width)) - 1
    if math.isnan(value) or math.isinf(value) or not low <= math.trunc(value) <= high:
        kind = "signed" if is_signed else "unsigned"
        fail(
            op,
            f"converts {value} to a {width}-bit {kind} integer, which cannot hold it "
            "(MLIR gives poison)",
        )
    return wrap(math.trunc(value), width)


def add(a: float, b: float) -> float:
    """IEEE addition; of two NaNs, the first, as x86 gives it (CPython adds in either
    order, so its NaN changes as the interpreter warms up)."""
    return _first_nan(a, b) if a != a or b != b else a + b


def multiply(a: float, b: float) -> float:
    return _first_nan(a, b) if a != a or b != b else a * b


def _first_nan(a: float, b: float) -> float:
    nan = a if a != a else b
    return nan + nan  # quieted, as the hardware gives a signalling NaN back


def divide(a: float, b: float) -> float:
    """IEEE division (Python raises on division by zero); NaNs as the hardware makes
    them, as native code gets them (0/0 is x86's default NaN, with its sign bit set)."""
    if b:
        return a / b
    if a != a or a == 0:
        return _hardware(np.divide, a, b)
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _hardware(operation: Callable[..., Any], a: float, b: float) -> float:
    with np.errstate(all="ignore"):
        return float(operation(np.float64(a), np.float64(b)))


def remainder(a: float, b: float) -> float:
    """arith.remf: C's fmod, exact, with the sign of `a` (Python raises where IEEE gives
    NaN: an infinite `a` or a zero `b`)."""
    if a != a or b != b or math.isinf(a) or b == 0:
        return _hardware(np.fmod, a, b)  # a NaN operand, or the default NaN, as C's fmod
    return math.fmod(a, b)


def maximum(a: float, b: float) -> float:
    """arith.maximumf: the NaN operand if either is NaN; +0 > -0."""
    if a != a or b != b:
        return _nan_of(a, b, keep_first=math.copysign(1.0, a) < 0)
    if a == b == 0:
        return a if math.copysign(1.0, a) > 0 else b
    return a if a > b else b


def minimum(a: float, b: float) -> float:
    if a != a or b != b:
        return _nan_of(a, b, keep_first=math.copysign(1.0, a) > 0)
    if a == b == 0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def _nan_of(a: float, b: float, keep_first: bool) -> float:
    """The NaN that x86 code gives for llvm.maximum/minimum: LLVM orders the operands by
    the first one's sign (maximum keeps a negative `a` first, minimum a positive one),
    then the first of that order if it is NaN, else the second."""
    if a != a and b != b:
        return a if keep_first else b
    return a if a != a else b


def quiet_if_narrow(op: Operation, value: float) -> float:
    """`value`, a NaN quieted where the result is f16 or bf16: native code computes
    those in f32, and the conversion back quiets a signalling NaN (the maximumf of
    0x7c01 and 1 in f16 is 0x7e01)."""
    narrow = isinstance(lane_type(op.results[0].type), Float16Type | BFloat16Type)
    return value + value if narrow and value != value else value


def maxnum(a: float, b: float) -> float:
    """arith.maxnumf: the other operand when one is NaN (+0 > -0, which MLIR leaves open;
    dhir-accurate-math makes native code do the same)."""
    if a != a:
        return b
    return a if b != b else maximum(a, b)


def minnum(a: float, b: float) -> float:
    if a != a:
        return b
    return a if b != b else minimum(a, b)


def _overflow_flags(op: Operation) -> frozenset[str]:
    flags = op.properties.get("overflowFlags")
    return frozenset(str(f) for f in getattr(flags, "data", ()))


def _int_binary(op: Operation, args: PythonValues, exact: int) -> int:
    """Wrap `exact`, the mathematical result; with nsw/nuw flags, MLIR makes overflow
    poison, so report it."""
    width = int_width(op, op.results[0].type)
    result = wrap(exact, width)
    flags = _overflow_flags(op)
    if flags:
        a, b = args
        exact_s = _exact(op, signed(a, width), signed(b, width))
        exact_u = _exact(op, unsigned(a, width), unsigned(b, width))
        if "nsw" in flags and exact_s != signed(result, width):
            fail(op, "overflows with the nsw flag (MLIR gives poison)")
        if "nuw" in flags and exact_u != unsigned(result, width):
            fail(op, "overflows with the nuw flag (MLIR gives poison)")
    return result


def truncate(op: Operation, value: int, width_in: int, width_out: int) -> int:
    """arith.trunci of `value`; with nsw/nuw flags, MLIR makes a result that loses bits
    poison (as LLVM's trunc: nsw, the signed value; nuw, the unsigned one), so report it."""
    result = wrap(value, width_out)
    flags = _overflow_flags(op)
    if "nsw" in flags and signed(value, width_in) != signed(result, width_out):
        fail(op, f"truncates {signed(value, width_in)} to i{width_out} with the nsw flag, "
                 "which loses its value (MLIR gives poison)")  # fmt: skip
    if "nuw" in flags and unsigned(value, width_in) != unsigned(result, width_out):
        fail(op, f"truncates {unsigned(value, width_in)} to i{width_out} with the nuw flag, "
                 "which loses its value (MLIR gives poison)")  # fmt: skip
    return result


def _exact(op: Operation, a: int, b: int) -> int:
    """The mathematical result of addi/subi/muli/shli."""
    if isinstance(op, arith.AddiOp):
        return a + b
    if isinstance(op, arith.SubiOp):
        return a - b
    if isinstance(op, arith.MuliOp):
        return a * b
    return a << b  # shli


def _divisor(op: Operation, b: int) -> int:
    if b == 0:
        fail(op, "divides by zero (undefined behavior in MLIR)")
    return b


def _no_signed_overflow(op: Operation, a: int, b: int, width: int) -> None:
    # i1 too: its minimum is -1 (true), and true / true is 1, which i1 cannot hold.
    if b == -1 and a == -(1 << (width - 1)):
        fail(op, f"overflows: {a} / -1 does not fit in i{width} (undefined behavior in MLIR)")


def trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return -quotient if (a < 0) != (b < 0) else quotient


_CMPI: tuple[Callable[[int, int], bool], ...] = (
    lambda a, b: a == b, lambda a, b: a != b,
    lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b, lambda a, b: a >= b,
    lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b, lambda a, b: a >= b,
)  # fmt: skip

# Python's float comparisons are the ordered ones (false with NaN); `!=` is unordered.
_CMPF: tuple[Callable[[float, float], bool], ...] = (
    lambda x, y: False,
    lambda x, y: x == y, lambda x, y: x > y, lambda x, y: x >= y,
    lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x < y or x > y,
    lambda x, y: x == x and y == y,
    lambda x, y: not (x < y or x > y), lambda x, y: not x <= y, lambda x, y: not x < y,
    lambda x, y: not x >= y, lambda x, y: not x > y, lambda x, y: x != y,
    lambda x, y: x != x or y != y,
    lambda x, y: True,
)  # fmt: skip


def combine(op: Operation, kind: str, a: Any, b: Any, type_: Attribute) -> Any:
    """`a kind b` for memref.atomic_rmw (the kinds of arith.atomic_rmw_kind)."""
    if kind == "assign":
        return b
    if kind in ("addf", "mulf", "maximumf", "minimumf", "maxnumf", "minnumf"):
        round_to = float_rounder(op, type_)
        floats: dict[str, Callable[[float, float], float]] = {
            "addf": lambda x, y: round_to(add(x, y)),
            "mulf": lambda x, y: round_to(multiply(x, y)),
            "maximumf": maximum, "minimumf": minimum, "maxnumf": maxnum, "minnumf": minnum,
        }  # fmt: skip
        return floats[kind](a, b)
    width = int_width(op, type_)
    s, u = (lambda v: signed(v, width)), (lambda v: unsigned(v, width))
    ints: dict[str, Callable[[int, int], int]] = {
        "addi": lambda x, y: x + y, "muli": lambda x, y: x * y,
        "andi": lambda x, y: x & y, "ori": lambda x, y: x | y, "xori": lambda x, y: x ^ y,
        "maxs": lambda x, y: max(s(x), s(y)), "mins": lambda x, y: min(s(x), s(y)),
        "maxu": lambda x, y: max(u(x), u(y)), "minu": lambda x, y: min(u(x), u(y)),
    }  # fmt: skip
    if kind not in ints:
        fail(op, f"uses the reduction kind '{kind}', which the interpreter does not know")
    return wrap(ints[kind](a, b), width)
