"""The math dialect, through the C math library as native code would."""

import ctypes
import ctypes.util
import math
from collections.abc import Callable

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
)
from xdsl.ir import Attribute, Operation

from dhir.backends.interp.core import Values, f32_bits, fail, handles, lanewise, register
from dhir.backends.interp.scalars import (
    divide,
    float_rounder,
    int_width,
    lane_type,
    maximum,
    minimum,
    quiet_if_narrow,
    result_rounder,
    signed,
    unsigned,
    wrap,
)
from dhir.dialects import math as mathd

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _libm(name: str, arity: int, c_type: type) -> Callable[..., float]:
    function = getattr(_LIBM, name)
    function.argtypes = [c_type] * arity
    function.restype = c_type
    return function


# Transcendental functions come from the C library, as in native CPU code (LLVM lowers
# math ops to libm calls); f16 is computed in f32 and rounded, as LLVM does.
_MATH_C_NAMES: dict[type[Operation], str] = {
    mathd.AcosOp: "acos", mathd.AcoshOp: "acosh",
    mathd.AsinOp: "asin", mathd.AsinhOp: "asinh", mathd.AtanOp: "atan",
    mathd.AtanhOp: "atanh", mathd.Atan2Op: "atan2", mathd.CbrtOp: "cbrt",
    mathd.CeilOp: "ceil", mathd.CosOp: "cos", mathd.CoshOp: "cosh", mathd.ErfOp: "erf",
    mathd.ErfcOp: "erfc", mathd.ExpOp: "exp", mathd.Exp2Op: "exp2",
    mathd.ExpM1Op: "expm1", mathd.FloorOp: "floor", mathd.FmaOp: "fma",
    mathd.LogOp: "log", mathd.Log10Op: "log10", mathd.Log1pOp: "log1p",
    mathd.Log2Op: "log2", mathd.PowFOp: "pow", mathd.RoundOp: "round",
    mathd.RoundEvenOp: "roundeven" if hasattr(_LIBM, "roundeven") else "rint",
    mathd.SinOp: "sin", mathd.SinhOp: "sinh", mathd.SqrtOp: "sqrt", mathd.TanOp: "tan",
    mathd.TanhOp: "tanh", mathd.TruncOp: "trunc",
}  # fmt: skip
_LIBM_CACHE: dict[tuple[str, int, bool], Callable[..., float]] = {}


def libm_function(name: str, arity: int, double: bool) -> Callable[..., float]:
    key = (name, arity, double)
    if key not in _LIBM_CACHE:
        c_name, c_type = (name, ctypes.c_double) if double else (name + "f", ctypes.c_float)
        _LIBM_CACHE[key] = _libm(c_name, arity, c_type)
    return _LIBM_CACHE[key]


def _c_float(value: float) -> ctypes.c_float:
    """`value` as the C library's float functions get it natively: every bit, where
    ctypes' conversion quiets a signalling NaN (glibc's powf(sNaN, 0) is NaN, of a
    quiet one 1)."""
    return ctypes.c_float.from_buffer_copy(f32_bits(value).to_bytes(4, "little"))


def _smallest_normal(op: Operation, lane: Attribute) -> float:
    if isinstance(lane, Float16Type):
        return 2.0**-14
    if isinstance(lane, Float32Type | BFloat16Type):  # bf16 has f32's exponent
        return 2.0**-126
    if isinstance(lane, Float64Type):
        return 2.0**-1022
    fail(op, f"is not supported by the interpreter on {lane}")


def _math_op_type(op: Operation) -> type[Operation]:
    return next(t for t in type(op).__mro__ if t in _MATH_C_NAMES)


@register
@lanewise
class MathImpls(InterpreterFunctions):
    @handles(*_MATH_C_NAMES)
    def run_libm(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        round_to = result_rounder(op)
        lane = lane_type(op.results[0].type)
        is_double = isinstance(lane, Float64Type)
        function = libm_function(_MATH_C_NAMES[_math_op_type(op)], len(args), is_double)
        if isinstance(lane, Float32Type | BFloat16Type):  # bf16 is f32's upper half
            args = tuple(_c_float(arg) for arg in args)
        return (round_to(function(*args)),)

    @handles(mathd.AbsFOp, mathd.CopySignOp)
    def run_sign(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # Bitwise, exact, as LLVM defines fabs and copysign: every bit of a NaN is kept,
        # where the C library's float versions, through ctypes, quiet a signalling one.
        result_rounder(op)  # rejects unsupported types
        if isinstance(op, mathd.AbsFOp):
            return (math.fabs(args[0]),)
        return (math.copysign(args[0], args[1]),)

    @handles(mathd.IsNaNOp, mathd.IsInfOp, mathd.IsFiniteOp, mathd.IsNormalOp)
    def run_float_class(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # On the value, exact: f16 and bf16 hold theirs as a float (a subnormal one too),
        # so the smallest normal number of the type decides isnormal.
        (value,) = args
        if isinstance(op, mathd.IsNaNOp):
            return (int(value != value),)
        if isinstance(op, mathd.IsInfOp):
            return (int(math.isinf(value)),)
        if isinstance(op, mathd.IsFiniteOp):
            return (int(math.isfinite(value)),)
        smallest = _smallest_normal(op, lane_type(op.operands[0].type))
        return (int(math.isfinite(value) and abs(value) >= smallest),)

    @handles(mathd.ClampFOp)
    def run_clampf(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # MLIR's definition, maxf(minf(value, max), min) in the names minimumf and
        # maximumf had then: a NaN operand gives NaN, min > max gives min, -0 < +0.
        result_rounder(op)  # rejects unsupported types
        value, low, high = args
        return (quiet_if_narrow(op, maximum(minimum(value, high), low)),)

    @handles(mathd.SincosOp)
    def run_sincos(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # glibc's sincos, which native code calls, gives what sin and cos give.
        round_to = result_rounder(op)
        is_double = isinstance(lane_type(op.results[0].type), Float64Type)
        sin, cos = (libm_function(name, 1, is_double) for name in ("sin", "cos"))
        return (round_to(sin(args[0])), round_to(cos(args[0])))

    @handles(mathd.RsqrtOp)
    def run_rsqrt(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # MLIR expands rsqrt to 1 / sqrt(x): two roundings.
        round_to = result_rounder(op)
        root = libm_function("sqrt", 1, isinstance(lane_type(op.results[0].type), Float64Type))
        return (round_to(divide(1.0, round_to(root(args[0])))),)

    @handles(mathd.FPowIOp)
    def run_fpowi(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # Square-and-multiply with each product rounded, as LLVM's powi (libgcc's
        # __powidf2, which starts from the base for an odd power: a signalling NaN to
        # the power 1 stays one); f16 and bf16 are promoted to f32 for it (f16 by a
        # conversion, which quiets a NaN) and rounded once at the end.
        round_to = result_rounder(op)
        lane = lane_type(op.results[0].type)
        narrow = isinstance(lane, Float16Type | BFloat16Type)
        step = float_rounder(op, Float32Type()) if narrow else round_to
        base, power = args[0], signed(args[1], int_width(op, op.operands[1].type))
        if isinstance(lane, Float16Type) and base != base:
            base += base
        count = abs(power)
        result = base if count & 1 else 1.0
        while count > 1:
            count >>= 1
            base = step(base * base)
            if count & 1:
                result = step(result * base)
        return (round_to(step(divide(1.0, result)) if power < 0 else result),)

    @handles(mathd.IPowIOp)
    def run_ipowi(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        base, power = signed(args[0], width), signed(args[1], width)
        if power < 0:  # as MLIR's expansion: only 1 and -1 have nonzero results
            if base == 0:
                fail(op, "raises 0 to a negative power (division by zero)")
            return (wrap(base ** (-power % 2) if base in (1, -1) else 0, width),)
        return (wrap(pow(base, power, 1 << width), width),)

    @handles(mathd.AbsIOp, mathd.CountLeadingZerosOp, mathd.CountTrailingZerosOp, mathd.CtPopOp)
    def run_int_math(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        bits = unsigned(args[0], width)
        if isinstance(op, mathd.AbsIOp):
            return (wrap(abs(signed(bits, width)), width),)
        if isinstance(op, mathd.CountLeadingZerosOp):
            return (width - bits.bit_length(),)
        if isinstance(op, mathd.CountTrailingZerosOp):
            return (width if bits == 0 else (bits & -bits).bit_length() - 1,)
        return (bin(bits).count("1"),)
