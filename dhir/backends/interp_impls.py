"""What xDSL's interpreter lacks to run dhir programs, with MLIR's exact semantics.

Values, as the interpreter passes them between ops:
  - integers and index: Python ints, signed two's complement of the declared width
    (i1 is 0 or 1); every op reinterprets its operands as signed or unsigned itself;
  - floats: Python floats holding a value exactly representable in the declared type;
    every f16/f32 op rounds its result to that type (for + - * / and sqrt, computing in
    double and rounding once is exact, since 53 >= 2*24 + 2);
  - memrefs: NumPy arrays; subviews and reshapes are NumPy views of the same buffer;
  - dhir targets/tokens, gpu async tokens: None.

Run-time errors in the program (out-of-bounds access, division by zero, values MLIR
calls poison) raise `Trap`, which `dhir.backends.interp` turns into a located DhirError.
"""

import ctypes
import ctypes.util
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any, NoReturn, TypeVar

import numpy as np
from xdsl.dialects import affine, arith, cf, func, gpu, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    UnitAttr,
)
from xdsl.dialects.linalg import abstract_ops as linalg_base
from xdsl.dialects.linalg import ops as linalg
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.cf import CfFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineMap
from xdsl.ir.affine.affine_set import AffineConstraintKind
from xdsl.traits import IsTerminator, SymbolTable

# dhir's subclasses of xDSL ops must exist before `register` looks for them.
import dhir.dialects.gpu
import dhir.dialects.memref
import dhir.dialects.scf  # noqa: F401
from dhir.backends.signature import numpy_dtype
from dhir.dialects import dhir as dhir_ops
from dhir.dialects.memref import ATOMIC_RMW_KINDS

INDEX_WIDTH = 64
# The Python recursion limit during a run (see run_interp); each level of calls or
# nested regions takes about 12 Python frames.
RECURSION_LIMIT = 20_000
MAX_DEPTH = RECURSION_LIMIT // 12
Values = PythonValues
Returned = tuple[ReturnedValues, PythonValues]


class Trap(BaseException):
    """A run-time error of the program at `op`. A BaseException so that it passes
    through xDSL's dispatcher, which catches Exception at every nesting level and
    prints the whole module into a note each time."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op
        self.message = message


def fail(op: Operation, message: str) -> NoReturn:
    raise Trap(op, f"'{op.name}' {message}")


# --- registering one implementation for an xDSL op and dhir's subclasses of it --------

ImplT = TypeVar("ImplT", bound=Callable[..., Any])


def handles(*op_types: type[Operation]) -> Callable[[ImplT], ImplT]:
    def mark(function: ImplT) -> ImplT:
        before = getattr(function, "_dhir_op_types", ())
        function._dhir_op_types = *before, *op_types
        return function

    return mark


def _with_dhir_subclasses(op_type: type[Operation]) -> list[type[Operation]]:
    # xDSL dispatches on the exact class, and dhir's parser builds its own subclasses
    # of some xDSL ops (custom syntax), so each needs the implementation too.
    found = [op_type]
    for sub in op_type.__subclasses__():
        found += [t for t in _with_dhir_subclasses(sub) if t.__module__.startswith("dhir.")]
    return found


FunctionsT = TypeVar("FunctionsT", bound=type[InterpreterFunctions])


def register(cls: FunctionsT) -> FunctionsT:
    for name, function in list(vars(cls).items()):
        for op_type in getattr(function, "_dhir_op_types", ()):
            for target in _with_dhir_subclasses(op_type):
                wrap = impl_terminator if target.has_trait(IsTerminator) else impl
                key = f"_{name}__{target.__module__}.{target.__qualname__}"
                setattr(cls, key, wrap(target)(function))  # type: ignore[arg-type]
    return register_impls(cls)


# --- scalar semantics -----------------------------------------------------------------


def int_width(op: Operation, type_: Attribute) -> int:
    if isinstance(type_, IndexType):
        return INDEX_WIDTH
    if isinstance(type_, IntegerType):
        return type_.width.data
    fail(op, f"on {type_} is not supported by the interpreter (scalars only)")


def wrap(value: int, width: int) -> int:
    """`value` modulo 2**width, as the canonical signed value (0 or 1 for i1)."""
    if width == 1:
        return value & 1
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def signed(value: int, width: int) -> int:
    return -(value & 1) if width == 1 else wrap(value, width)


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


# The precision (significand bits) and rounding of each float type the interpreter runs.
_FLOATS: dict[type[Attribute], tuple[int, Callable[[float], float]]] = {
    Float16Type: (11, _rounder(_F16)),
    Float32Type: (24, _rounder(_F32)),
    Float64Type: (53, _same),
}


def float_rounder(op: Operation, type_: Attribute) -> Callable[[float], float]:
    found = _FLOATS.get(type(type_))
    if found is None:
        fail(op, f"on {type_} is not supported by the interpreter (f16, f32, f64 only)")
    return found[1]


def result_rounder(op: Operation) -> Callable[[float], float]:
    return float_rounder(op, op.results[0].type)


def int_to_float(op: Operation, value: int, type_: Attribute) -> float:
    """`value` rounded once, to nearest even, into the float type (no double rounding
    through float64 for wide integers)."""
    round_to = float_rounder(op, type_)
    bits = _FLOATS[type(type_)][0]
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


def divide(a: float, b: float) -> float:
    """IEEE division (Python raises on division by zero)."""
    if b:
        return a / b
    if a != a or a == 0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def maximum(a: float, b: float) -> float:
    """arith.maximumf: NaN if either is NaN; +0 > -0."""
    if a != a or b != b:
        return math.nan
    if a == b == 0:
        return a if math.copysign(1.0, a) > 0 else b
    return a if a > b else b


def minimum(a: float, b: float) -> float:
    if a != a or b != b:
        return math.nan
    if a == b == 0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def maxnum(a: float, b: float) -> float:
    """arith.maxnumf: the other operand when one is NaN (+0 > -0, which MLIR leaves open)."""
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
    if b == -1 and a == -(1 << (width - 1)) and width > 1:
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
            "addf": lambda x, y: round_to(x + y), "mulf": lambda x, y: round_to(x * y),
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


# --- arith ----------------------------------------------------------------------------


@register
class ArithImpls(InterpreterFunctions):
    @handles(arith.ConstantOp)
    def run_constant(self, interp: Interpreter, op: arith.ConstantOp, args: Values) -> Values:
        value = op.value
        if isinstance(value, IntegerAttr):
            return (wrap(value.value.data, int_width(op, op.result.type)),)
        if isinstance(value, FloatAttr):
            return (float_rounder(op, op.result.type)(value.value.data),)
        fail(op, f"of {op.result.type} is not supported by the interpreter (scalars only)")

    @handles(arith.AddiOp, arith.SubiOp, arith.MuliOp)
    def run_int_arith(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        a, b = args
        return (_int_binary(op, args, _exact(op, a, b)),)

    @handles(arith.AndIOp, arith.OrIOp, arith.XOrIOp)
    def run_bitwise(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        a, b = args
        width = int_width(op, op.results[0].type)
        if isinstance(op, arith.AndIOp):
            return (wrap(a & b, width),)
        return (wrap(a | b if isinstance(op, arith.OrIOp) else a ^ b, width),)

    @handles(arith.DivSIOp, arith.RemSIOp, arith.CeilDivSIOp, arith.FloorDivSIOp)
    def run_signed_div(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        a, b = signed(args[0], width), _divisor(op, signed(args[1], width))
        _no_signed_overflow(op, a, b, width)
        if isinstance(op, arith.DivSIOp):
            return (wrap(trunc_div(a, b), width),)
        if isinstance(op, arith.RemSIOp):  # the sign of the dividend
            return (wrap(a - b * trunc_div(a, b), width),)
        if isinstance(op, arith.CeilDivSIOp):
            return (wrap(-(-a // b), width),)
        return (wrap(a // b, width),)

    @handles(arith.DivUIOp, arith.RemUIOp, arith.CeilDivUIOp)
    def run_unsigned_div(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        a, b = unsigned(args[0], width), _divisor(op, unsigned(args[1], width))
        if isinstance(op, arith.DivUIOp):
            return (wrap(a // b, width),)
        if isinstance(op, arith.RemUIOp):
            return (wrap(a % b, width),)
        return (wrap(-(-a // b), width),)

    @handles(arith.MaxSIOp, arith.MinSIOp, arith.MaxUIOp, arith.MinUIOp)
    def run_int_minmax(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        view = unsigned if isinstance(op, arith.MaxUIOp | arith.MinUIOp) else signed
        a, b = view(args[0], width), view(args[1], width)
        pick = max if isinstance(op, arith.MaxSIOp | arith.MaxUIOp) else min
        return (wrap(pick(a, b), width),)

    @handles(arith.ShLIOp, arith.ShRSIOp, arith.ShRUIOp)
    def run_shift(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        amount = unsigned(args[1], width)
        if amount >= width:
            fail(op, f"shifts an i{width} by {amount} bits (MLIR gives poison)")
        if isinstance(op, arith.ShLIOp):
            return (_int_binary(op, (args[0], amount), args[0] << amount),)
        view = signed if isinstance(op, arith.ShRSIOp) else unsigned
        return (wrap(view(args[0], width) >> amount, width),)

    @handles(arith.AddUIExtendedOp)
    def run_addui_extended(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        total = unsigned(args[0], width) + unsigned(args[1], width)
        return (wrap(total, width), total >> width)

    @handles(arith.MulUIExtendedOp, arith.MulSIExtendedOp)
    def run_mul_extended(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        view = signed if isinstance(op, arith.MulSIExtendedOp) else unsigned
        product_ = view(args[0], width) * view(args[1], width)
        return (wrap(product_, width), wrap(product_ >> width, width))

    @handles(arith.CmpiOp)
    def run_cmpi(self, interp: Interpreter, op: arith.CmpiOp, args: Values) -> Values:
        width = int_width(op, op.lhs.type)
        predicate = op.predicate.value.data
        view = unsigned if predicate >= 6 else signed
        return (int(_CMPI[predicate](view(args[0], width), view(args[1], width))),)

    @handles(arith.CmpfOp)
    def run_cmpf(self, interp: Interpreter, op: arith.CmpfOp, args: Values) -> Values:
        return (int(_CMPF[op.predicate.value.data](args[0], args[1])),)

    @handles(arith.SelectOp)
    def run_select(self, interp: Interpreter, op: arith.SelectOp, args: Values) -> Values:
        return (args[1] if args[0] else args[2],)

    @handles(arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp)
    def run_float_arith(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        a, b = args
        round_to = result_rounder(op)
        if isinstance(op, arith.AddfOp):
            return (round_to(a + b),)
        if isinstance(op, arith.SubfOp):
            return (round_to(a - b),)
        if isinstance(op, arith.MulfOp):
            return (round_to(a * b),)
        return (round_to(divide(a, b)),)

    @handles(arith.MaximumfOp, arith.MinimumfOp, arith.MaxnumfOp, arith.MinnumfOp)
    def run_float_minmax(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        result_rounder(op)  # rejects unsupported types
        pick = {arith.MaximumfOp: maximum, arith.MinimumfOp: minimum,
                arith.MaxnumfOp: maxnum, arith.MinnumfOp: minnum}  # fmt: skip
        base = next(t for t in type(op).__mro__ if t in pick)
        return (pick[base](args[0], args[1]),)

    @handles(arith.NegfOp)
    def run_negf(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        result_rounder(op)
        return (-args[0],)

    @handles(arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.IndexCastOp)
    def run_int_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width_in = int_width(op, op.operands[0].type)
        width_out = int_width(op, op.results[0].type)
        view = unsigned if isinstance(op, arith.ExtUIOp) else signed
        return (wrap(view(args[0], width_in), width_out),)

    @handles(arith.SIToFPOp, arith.UIToFPOp)
    def run_int_to_float(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.operands[0].type)
        view = signed if isinstance(op, arith.SIToFPOp) else unsigned
        return (int_to_float(op, view(args[0], width), op.results[0].type),)

    @handles(arith.FPToSIOp, arith.FPToUIOp)
    def run_float_to_int(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width = int_width(op, op.results[0].type)
        return (float_to_int(op, args[0], width, isinstance(op, arith.FPToSIOp)),)

    @handles(arith.ExtFOp, arith.TruncFOp)
    def run_float_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        float_rounder(op, op.operands[0].type)
        return (result_rounder(op)(args[0]),)

    @handles(arith.BitcastOp)
    def run_bitcast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        source, target = op.operands[0].type, op.results[0].type
        value = args[0]
        if type(source) in _FLOATS:  # through the bits as a signless integer
            value = int(np.array(value, numpy_dtype(source)).view(f"u{_bytes(op, source)}"))
        if type(target) in _FLOATS:
            width = 8 * _bytes(op, target)
            bits = np.array(unsigned(value, width), f"u{width // 8}")
            return (float(bits.view(numpy_dtype(target))),)
        return (wrap(value, int_width(op, target)),)


def _bytes(op: Operation, type_: Attribute) -> int:
    dtype = numpy_dtype(type_)
    if dtype is None:
        fail(op, f"on {type_} is not supported by the interpreter")
    return dtype.itemsize


# --- math -----------------------------------------------------------------------------

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _libm(name: str, arity: int, c_type: type) -> Callable[..., float]:
    function = getattr(_LIBM, name)
    function.argtypes = [c_type] * arity
    function.restype = c_type
    return function


# Transcendental functions come from the C library, as in native CPU code (LLVM lowers
# math ops to libm calls); f16 is computed in f32 and rounded, as LLVM does.
_MATH_C_NAMES: dict[type[Operation], str] = {
    mathd.AbsFOp: "fabs", mathd.AcosOp: "acos", mathd.AcoshOp: "acosh",
    mathd.AsinOp: "asin", mathd.AsinhOp: "asinh", mathd.AtanOp: "atan",
    mathd.AtanhOp: "atanh", mathd.Atan2Op: "atan2", mathd.CbrtOp: "cbrt",
    mathd.CeilOp: "ceil", mathd.CopySignOp: "copysign", mathd.CosOp: "cos",
    mathd.CoshOp: "cosh", mathd.ErfOp: "erf", mathd.ExpOp: "exp", mathd.Exp2Op: "exp2",
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


def _math_op_type(op: Operation) -> type[Operation]:
    return next(t for t in type(op).__mro__ if t in _MATH_C_NAMES)


@register
class MathImpls(InterpreterFunctions):
    @handles(*_MATH_C_NAMES)
    def run_libm(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        round_to = result_rounder(op)
        is_double = isinstance(op.results[0].type, Float64Type)
        function = libm_function(_MATH_C_NAMES[_math_op_type(op)], len(args), is_double)
        return (round_to(function(*args)),)

    @handles(mathd.RsqrtOp)
    def run_rsqrt(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # MLIR expands rsqrt to 1 / sqrt(x): two roundings.
        round_to = result_rounder(op)
        root = libm_function("sqrt", 1, isinstance(op.results[0].type, Float64Type))(args[0])
        return (round_to(divide(1.0, round_to(root))),)

    @handles(mathd.FPowIOp)
    def run_fpowi(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # Square-and-multiply with each product rounded, as LLVM's powi (compiler-rt).
        round_to = result_rounder(op)
        base, power = args[0], signed(args[1], int_width(op, op.operands[1].type))
        result, count = 1.0, abs(power)
        while count:
            if count & 1:
                result = round_to(result * base)
            count >>= 1
            if count:
                base = round_to(base * base)
        return (round_to(divide(1.0, result)) if power < 0 else result,)

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


# --- memref ---------------------------------------------------------------------------


@dataclass
class RunState:
    """Per-run data: memref.global buffers, the GPU thread being run, linalg indices."""

    globals: dict[Operation, np.ndarray] = field(default_factory=dict[Operation, np.ndarray])
    gpu: "GpuIds | None" = None
    linalg_indices: list[tuple[int, ...]] = field(default_factory=list[tuple[int, ...]])


def state(interpreter: Interpreter) -> RunState:
    return interpreter.get_data(ControlImpls, "state", RunState)


def element_dtype(op: Operation, type_: MemRefType[Attribute]) -> np.dtype:
    dtype = numpy_dtype(type_.element_type)
    if dtype is None:
        fail(
            op,
            f"needs a {type_}; the interpreter runs memrefs of "
            "i1/i8/i16/i32/i64/index/f16/f32/f64 only",
        )
    return dtype


def new_array(op: Operation, type_: Attribute, dynamic: Sequence[int]) -> np.ndarray:
    """A zero-filled buffer (MLIR leaves it uninitialized) for a memref type."""
    assert isinstance(type_, MemRefType)
    if not isinstance(type_.layout, NoneAttr):
        fail(op, f"allocates a {type_} with a layout, which the interpreter does not support")
    sizes = iter(dynamic)
    shape = [next(sizes) if d == DYNAMIC_INDEX else d for d in type_.get_shape()]
    if any(d < 0 for d in shape):
        fail(op, f"allocates a negative size {tuple(shape)}")
    return np.zeros(shape, element_dtype(op, type_))


def checked_index(op: Operation, array: np.ndarray, indices: Sequence[int]) -> tuple[int, ...]:
    for axis, (i, size) in enumerate(zip(indices, array.shape)):
        if not 0 <= i < size:
            shape = "x".join(map(str, array.shape)) or "scalar"
            fail(
                op,
                f"accesses index {i} of dimension {axis}, whose size is {size}, "
                f"out of bounds (memref of shape {shape}, indices {list(indices)})",
            )
    return tuple(indices)


def load(op: Operation, array: np.ndarray, indices: Sequence[int]) -> Any:
    return array.item(checked_index(op, array, indices)) if indices else array.item()


def store(op: Operation, array: np.ndarray, indices: Sequence[int], value: Any) -> None:
    index = checked_index(op, array, indices)
    try:
        array[index] = value
    except ValueError:  # read-only: see _global_array
        fail(op, "writes into a constant memref.global")


def copy(op: Operation, source: np.ndarray, target: np.ndarray) -> None:
    if source.shape != target.shape:
        fail(op, f"copies shape {source.shape} into shape {target.shape}")
    if not target.flags.writeable:
        fail(op, "writes into a constant memref.global")
    np.copyto(target, source)


def _static_or_dynamic(static: Sequence[int], dynamic: Sequence[int]) -> list[int]:
    values = iter(dynamic)
    return [next(values) if v == DYNAMIC_INDEX else v for v in static]


def dropped_unit_dims(sizes: Sequence[int], shape: Sequence[int]) -> list[int] | None:
    """Which size-1 dims a rank-reducing subview drops so that `sizes` becomes `shape`
    (any answer gives the same view: unit dims do not affect addressing)."""
    if not shape:
        return list(range(len(sizes))) if all(s == 1 for s in sizes) else None
    if not sizes:
        return None
    if shape[0] in (DYNAMIC_INDEX, sizes[0]):
        rest = dropped_unit_dims(sizes[1:], shape[1:])
        if rest is not None:
            return [d + 1 for d in rest]
    if sizes[0] == 1:
        rest = dropped_unit_dims(sizes[1:], shape)
        if rest is not None:
            return [0] + [d + 1 for d in rest]
    return None


def _check_shape(op: Operation, array: np.ndarray, type_: Attribute) -> None:
    assert isinstance(type_, MemRefType)
    want = type_.get_shape()
    matches = all(w in (DYNAMIC_INDEX, g) for w, g in zip(want, array.shape))
    if len(want) != array.ndim or not matches:
        fail(op, f"gets a memref of shape {array.shape} where {type_} is expected")


def _offsets_sizes_strides(
    op: memref.SubviewOp | memref.ReinterpretCastOp, dynamic: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    n_offsets, n_sizes = len(op.offsets), len(op.sizes)
    return (
        _static_or_dynamic(op.static_offsets.get_values(), dynamic[:n_offsets]),
        _static_or_dynamic(op.static_sizes.get_values(), dynamic[n_offsets : n_offsets + n_sizes]),
        _static_or_dynamic(op.static_strides.get_values(), dynamic[n_offsets + n_sizes :]),
    )


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


@register
class MemrefImpls(InterpreterFunctions):
    @handles(memref.AllocOp, memref.AllocaOp)
    def run_alloc(self, interp: Interpreter, op: memref.AllocOp, args: Values) -> Values:
        return (new_array(op, op.memref.type, args[: len(op.dynamic_sizes)]),)

    @handles(memref.DeallocOp)
    def run_dealloc(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return ()

    @handles(memref.LoadOp)
    def run_load(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (load(op, args[0], args[1:]),)

    @handles(memref.StoreOp)
    def run_store(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        store(op, args[1], args[2:], args[0])
        return ()

    @handles(memref.CopyOp)
    def run_copy(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        copy(op, *args)
        return ()

    @handles(memref.CastOp, memref.MemorySpaceCastOp, memref.AssumeAlignmentOp)
    def run_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        _check_shape(op, args[0], op.results[0].type)
        return (args[0],)

    @handles(memref.DimOp)
    def run_dim(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array, axis = args
        if not 0 <= axis < array.ndim:
            fail(op, f"asks for dimension {axis} of a rank-{array.ndim} memref")
        return (array.shape[axis],)

    @handles(memref.RankOp)
    def run_rank(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (args[0].ndim,)

    @handles(memref.SubviewOp)
    def run_subview(self, interp: Interpreter, op: memref.SubviewOp, args: Values) -> Values:
        array = args[0]
        offsets, sizes, strides = _offsets_sizes_strides(op, args[1:])
        for axis, (offset, size, stride, dim) in enumerate(
            zip(offsets, sizes, strides, array.shape)
        ):
            last = offset + (size - 1) * stride
            if size < 0 or stride < 1 or offset < 0 or (size > 0 and last >= dim) or offset > dim:
                fail(
                    op,
                    f"takes offset {offset}, size {size}, stride {stride} of dimension "
                    f"{axis}, whose size is {dim}: out of bounds (or a stride < 1)",
                )
        shape = op.result.type.get_shape()
        dropped = dropped_unit_dims(sizes, shape) if len(shape) < len(sizes) else []
        if dropped is None:
            fail(op, f"cannot drop unit dimensions of sizes {sizes} to get {op.result.type}")
        index = tuple(
            o if axis in dropped else slice(o, o + (n - 1) * s + 1 if n else o, s)
            for axis, (o, n, s) in enumerate(zip(offsets, sizes, strides))
        )
        return (array[(*index, ...)],)  # `...`: a view even when every index is an int

    @handles(memref.CollapseShapeOp, memref.ExpandShapeOp)
    def run_reshape(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        array = args[0]
        if isinstance(op, memref.ExpandShapeOp):
            shape = _static_or_dynamic(op.static_output_shape.get_values(), args[1:])
        else:
            reassociation = op.reassociation  # type: ignore[attr-defined]
            groups = [[i.value.data for i in group] for group in reassociation]
            shape = [math.prod(array.shape[i] for i in g) for g in groups]
        if math.prod(shape) != array.size:
            fail(op, f"reshapes {array.shape} into {tuple(shape)}")
        try:
            return (array.reshape(shape, copy=False),)  # a view, as in MLIR
        except ValueError:
            fail(op, f"cannot reshape a strided view of shape {array.shape} without copying")

    @handles(memref.ReinterpretCastOp)
    def run_reinterpret_cast(
        self, interp: Interpreter, op: memref.ReinterpretCastOp, args: Values
    ) -> Values:
        # Relative to the start of the underlying allocation, like MLIR's base pointer.
        root = _root(args[0])
        offsets, sizes, strides = _offsets_sizes_strides(op, args[1:])
        offset = offsets[0]
        reach = offset + sum((n - 1) * s for n, s in zip(sizes, strides) if n > 0)
        inside = offset >= 0 and reach < root.size and min(strides, default=0) >= 0
        if not (root.flags.c_contiguous and inside):
            fail(
                op,
                f"views offset {offset}, sizes {sizes}, strides {strides} outside its "
                f"buffer of {root.size} elements",
            )
        flat = root.reshape(-1)[offset:]
        item = flat.itemsize
        return (np.lib.stride_tricks.as_strided(flat, sizes, [s * item for s in strides]),)

    @handles(memref.GetGlobalOp)
    def run_get_global(self, interp: Interpreter, op: memref.GetGlobalOp, args: Values) -> Values:
        found = SymbolTable.lookup_symbol(op, op.name_)
        if not isinstance(found, memref.GlobalOp):
            fail(op, f"names @{op.name_.string_value()}, which is not a memref.global")
        buffers = state(interp).globals
        if found not in buffers:
            buffers[found] = _global_array(op, found)
        return (buffers[found],)

    @handles(memref.AllocaScopeOp)
    def run_alloca_scope(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return interp.run_ssacfg_region(op.regions[0], (), "memref.alloca_scope")

    @handles(memref.AllocaScopeReturnOp)
    def run_alloca_scope_return(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(memref.AtomicRMWOp)
    def run_atomic_rmw(self, interp: Interpreter, op: memref.AtomicRMWOp, args: Values) -> Values:
        value, array, *indices = args
        old = load(op, array, indices)
        kind = ATOMIC_RMW_KINDS[op.kind.value.data]
        store(op, array, indices, combine(op, kind, old, value, op.result.type))
        return (old,)


def _global_array(op: Operation, global_op: memref.GlobalOp) -> np.ndarray:
    type_ = global_op.type
    initial = global_op.initial_value
    if isinstance(initial, UnitAttr):
        return new_array(op, type_, [])
    if not isinstance(initial, DenseIntOrFPElementsAttr):
        fail(op, f"reads @{global_op.sym_name.data}, which has no initial value to run with")
    values = np.array(initial.get_values()).astype(element_dtype(op, type_))
    array = values.reshape(type_.get_shape())
    if global_op.constant is not None:
        array.flags.writeable = False  # a store is a run-time error
    return array


# --- control flow, affine, func, dhir --------------------------------------------------


def eval_map(affine_map: AffineMap, operands: Sequence[int]) -> tuple[int, ...]:
    return affine_map.eval(operands[: affine_map.num_dims], operands[affine_map.num_dims :])


def _inputs(affine_map: AffineMap) -> int:
    return affine_map.num_dims + affine_map.num_symbols


def _positive_steps(op: Operation, steps: Sequence[int]) -> None:
    if any(step <= 0 for step in steps):
        fail(op, f"has step {min(steps)}; steps must be positive")


@register
class ControlImpls(InterpreterFunctions):
    @handles(dhir_ops.ScheduleOp)
    def run_schedule(self, interp: Interpreter, op: dhir_ops.ScheduleOp, args: Values) -> Values:
        # The meaning of a schedule: its tasks, one by one, in program order.
        interp.run_ssacfg_region(op.body, (), "dhir.schedule")
        return ()

    @handles(dhir_ops.TaskOp)
    def run_task(self, interp: Interpreter, op: dhir_ops.TaskOp, args: Values) -> Values:
        interp.run_ssacfg_region(op.body, (), "dhir.task")
        return (None,)

    @handles(dhir_ops.TargetOp)
    def run_target(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (None,)

    @handles(dhir_ops.YieldOp, scf.ReduceOp, scf.ReduceReturnOp, affine.YieldOp, scf.YieldOp)
    def run_return(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(scf.ForOp)
    def run_for(self, interp: Interpreter, op: scf.ForOp, args: Values) -> Values:
        lower, upper, step, *carried = args
        _positive_steps(op, [step])
        values = tuple(carried)
        for i in range(lower, upper, step):
            values = interp.run_ssacfg_region(op.body, (i, *values), "scf.for")
        return values

    @handles(scf.ParallelOp)
    def run_parallel(self, interp: Interpreter, op: scf.ParallelOp, args: Values) -> Values:
        # Sequentially, in lexicographic order; reductions fold from the initial values
        # in that order.
        rank = len(op.lowerBound)
        lowers, uppers, steps = args[:rank], args[rank : 2 * rank], args[2 * rank : 3 * rank]
        _positive_steps(op, steps)
        results = list(args[3 * rank :])
        reduce = op.body.block.last_op
        assert isinstance(reduce, scf.ReduceOp)
        for ivs in product(*map(range, lowers, uppers, steps)):
            values = interp.run_ssacfg_region(op.body, ivs, "scf.parallel")
            for k, value in enumerate(values):
                region = reduce.reductions[k]
                (results[k],) = interp.run_ssacfg_region(region, (results[k], value), "scf.reduce")
        return tuple(results)

    @handles(scf.ExecuteRegionOp)
    def run_execute_region(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return interp.run_ssacfg_region(op.regions[0], (), "scf.execute_region")

    @handles(affine.ForOp)
    def run_affine_for(self, interp: Interpreter, op: affine.ForOp, args: Values) -> Values:
        n_lower, n_upper = len(op.lowerBoundOperands), len(op.upperBoundOperands)
        lower = max(eval_map(op.lowerBoundMap.data, args[:n_lower]))
        upper = min(eval_map(op.upperBoundMap.data, args[n_lower : n_lower + n_upper]))
        step = op.step.value.data
        _positive_steps(op, [step])
        values = tuple(args[n_lower + n_upper :])
        for i in range(lower, upper, step):
            values = interp.run_ssacfg_region(op.body, (i, *values), "affine.for")
        return values

    @handles(affine.ParallelOp)
    def run_affine_parallel(
        self, interp: Interpreter, op: affine.ParallelOp, args: Values
    ) -> Values:
        # xDSL 0.74's verifier wants an operand per result, so reductions cannot be
        # written; without them this is a loop nest run in lexicographic order.
        if op.res:
            fail(op, "with reductions is not supported by the interpreter")
        lower_map, upper_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
        n_lower = _inputs(lower_map)
        lower_groups = op.lowerBoundsGroups.get_values()
        upper_groups = op.upperBoundsGroups.get_values()
        lowers = _grouped(eval_map(lower_map, args[:n_lower]), lower_groups, max)
        uppers = _grouped(eval_map(upper_map, args[n_lower:]), upper_groups, min)
        steps = [s.value.data for s in op.steps]
        _positive_steps(op, steps)
        for ivs in product(*map(range, lowers, uppers, steps)):
            interp.run_ssacfg_region(op.body, ivs, "affine.parallel")
        return ()

    @handles(affine.ApplyOp)
    def run_apply(self, interp: Interpreter, op: affine.ApplyOp, args: Values) -> Values:
        return (wrap(eval_map(op.map.data, args)[0], INDEX_WIDTH),)

    @handles(affine.MinOp)
    def run_affine_min(self, interp: Interpreter, op: affine.MinOp, args: Values) -> Values:
        return (min(eval_map(op.map.data, args)),)

    @handles(affine.LoadOp)
    def run_affine_load(self, interp: Interpreter, op: affine.LoadOp, args: Values) -> Values:
        return (load(op, args[0], eval_map(op.map.data, args[1:])),)

    @handles(affine.StoreOp)
    def run_affine_store(self, interp: Interpreter, op: affine.StoreOp, args: Values) -> Values:
        store(op, args[1], eval_map(op.map.data, args[2:]), args[0])
        return ()

    @handles(affine.IfOp)
    def run_affine_if(self, interp: Interpreter, op: affine.IfOp, args: Values) -> Values:
        condition = op.condition.data
        dims, symbols = args[: condition.num_dims], args[condition.num_dims :]
        holds = True
        for constraint in condition.constraints:
            value = constraint.lhs.eval(dims, symbols) - constraint.rhs.eval(dims, symbols)
            if constraint.kind == AffineConstraintKind.eq:
                holds &= value == 0
            elif constraint.kind == AffineConstraintKind.ge:
                holds &= value >= 0
            else:
                holds &= value <= 0
        region = op.then_region if holds else op.else_region
        return interp.run_ssacfg_region(region, (), "affine.if")

    @handles(func.CallOp)
    def run_call(self, interp: Interpreter, op: func.CallOp, args: Values) -> Values:
        callee = SymbolTable.lookup_symbol(op, op.callee)
        if not isinstance(callee, func.FuncOp) or callee.is_declaration:
            fail(
                op,
                f"calls {op.callee}, which has no body in the module; the interpreter "
                "runs only functions defined in the module",
            )
        try:
            return interp.run_ssacfg_region(callee.body, args, callee.sym_name.data)
        except RecursionError:
            # Turned into a Trap at the innermost call: xDSL would print the whole
            # module at every level on the way out.
            fail(op, f"nests calls deeper than the interpreter's limit of about {MAX_DEPTH}")

    @handles(cf.AssertOp)
    def run_assert(self, interp: Interpreter, op: cf.AssertOp, args: Values) -> Values:
        if not args[0]:
            fail(op, f"failed: {op.msg.data}")
        return ()


def _grouped(values: Sequence[int], groups: Sequence[int], pick: Callable[..., int]) -> list[int]:
    result, start = [], 0
    for count in groups:
        result.append(pick(values[start : start + count]))
        start += count
    return result


# --- gpu ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuIds:
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    grid: tuple[int, int, int]
    block_dim: tuple[int, int, int]


_XYZ = {"x": 0, "y": 1, "z": 2}
SUBGROUP_SIZE = 32


def _ids(interp: Interpreter, op: Operation) -> GpuIds:
    ids = state(interp).gpu
    if ids is None:
        fail(op, "runs outside a GPU kernel")
    return ids


def _no_barrier(kernel: Operation) -> None:
    for inner in kernel.walk():
        if isinstance(inner, gpu.BarrierOp):
            fail(
                inner,
                "is not supported by the interpreter: it runs GPU threads one after "
                "another, so threads cannot wait for each other",
            )


def _attributions(op: Operation, types: Sequence[Attribute]) -> tuple[np.ndarray, ...]:
    return tuple(new_array(op, t, []) for t in types)


def run_kernel(
    interpreter: Interpreter,
    op: Operation,
    body: Any,
    grid: Sequence[int],
    block: Sequence[int],
    make_args: Callable[[tuple[int, ...], tuple[int, ...]], tuple[Any, ...]],
    workgroup: Sequence[Attribute],
    private: Sequence[Attribute],
) -> None:
    """Every thread of every block, one after another: blocks in order, x fastest,
    and within a block its threads in order, x fastest."""
    if min(*grid, *block) < 1:
        fail(
            op,
            f"launches a grid of {tuple(grid)} blocks of {tuple(block)} threads; "
            "sizes must be at least 1",
        )
    run_state = state(interpreter)
    g3, b3 = (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])
    try:
        for bz, by, bx in product(range(grid[2]), range(grid[1]), range(grid[0])):
            shared = _attributions(op, workgroup)
            for tz, ty, tx in product(range(block[2]), range(block[1]), range(block[0])):
                run_state.gpu = GpuIds((bx, by, bz), (tx, ty, tz), g3, b3)
                own = _attributions(op, private)
                args = (*make_args((bx, by, bz), (tx, ty, tz)), *shared, *own)
                interpreter.run_ssacfg_region(body, args, op.name)
    finally:
        run_state.gpu = None


@register
class GpuImpls(InterpreterFunctions):
    @handles(gpu.LaunchOp)
    def run_launch(self, interp: Interpreter, op: gpu.LaunchOp, args: Values) -> Values:
        if op.clusterSizeX is not None:
            fail(op, "with clusters is not supported by the interpreter")
        _no_barrier(op)
        sizes = interp.get_values(
            [op.gridSizeX, op.gridSizeY, op.gridSizeZ, op.blockSizeX, op.blockSizeY, op.blockSizeZ]
        )
        grid, block = sizes[:3], sizes[3:]
        block_args = op.body.blocks[0].arg_types
        attr = op.attributes.get("workgroup_attributions")
        n_workgroup = attr.value.data if isinstance(attr, IntegerAttr) else 0
        workgroup = block_args[12 : 12 + n_workgroup]
        private = block_args[12 + n_workgroup :]
        run_kernel(
            interp, op, op.body, grid, block,
            lambda b, t: (*b, *t, *grid, *block), workgroup, private,
        )  # fmt: skip
        return (None,) * len(op.results)

    @handles(gpu.LaunchFuncOp)
    def run_launch_func(self, interp: Interpreter, op: gpu.LaunchFuncOp, args: Values) -> Values:
        kernel = SymbolTable.lookup_symbol(op, op.kernel)
        if not isinstance(kernel, gpu.FuncOp):
            fail(op, f"launches {op.kernel}, which is not a gpu.func in the module")
        if op.clusterSizeX is not None:
            fail(op, "with clusters is not supported by the interpreter")
        _no_barrier(kernel)
        sizes = interp.get_values(
            [op.gridSizeX, op.gridSizeY, op.gridSizeZ, op.blockSizeX, op.blockSizeY, op.blockSizeZ]
        )
        operands = interp.get_values(op.kernelOperands)
        block_args = kernel.body.blocks[0].arg_types
        n_inputs = len(kernel.function_type.inputs)
        attr = kernel.attributes.get("workgroup_attributions")
        n_workgroup = attr.value.data if isinstance(attr, IntegerAttr) else 0
        workgroup = block_args[n_inputs : n_inputs + n_workgroup]
        private = block_args[n_inputs + n_workgroup :]
        run_kernel(
            interp, op, kernel.body, sizes[:3], sizes[3:],
            lambda b, t: operands, workgroup, private,
        )  # fmt: skip
        return (None,) * len(op.results)

    @handles(gpu.TerminatorOp, gpu.ReturnOp, gpu.YieldOp)
    def run_terminator(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(gpu.ThreadIdOp, gpu.BlockIdOp, gpu.BlockDimOp, gpu.GridDimOp, gpu.GlobalIdOp)
    def run_id(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        ids = _ids(interp, op)
        axis = _XYZ[str(op.properties["dimension"].data)]  # type: ignore[attr-defined]
        if isinstance(op, gpu.ThreadIdOp):
            return (ids.thread[axis],)
        if isinstance(op, gpu.BlockIdOp):
            return (ids.block[axis],)
        if isinstance(op, gpu.BlockDimOp):
            return (ids.block_dim[axis],)
        if isinstance(op, gpu.GridDimOp):
            return (ids.grid[axis],)
        return (ids.block[axis] * ids.block_dim[axis] + ids.thread[axis],)

    @handles(gpu.LaneIdOp, gpu.SubgroupIdOp, gpu.SubgroupSizeOp, gpu.NumSubgroupsOp)
    def run_subgroup(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        ids = _ids(interp, op)
        (tx, ty, tz), (sx, sy, sz) = ids.thread, ids.block_dim
        linear = tx + sx * (ty + sy * tz)
        if isinstance(op, gpu.LaneIdOp):
            return (linear % SUBGROUP_SIZE,)
        if isinstance(op, gpu.SubgroupIdOp):
            return (linear // SUBGROUP_SIZE,)
        if isinstance(op, gpu.SubgroupSizeOp):
            return (SUBGROUP_SIZE,)
        return (-(-(sx * sy * sz) // SUBGROUP_SIZE),)

    @handles(gpu.AllocOp)
    def run_gpu_alloc(self, interp: Interpreter, op: gpu.AllocOp, args: Values) -> Values:
        sizes = interp.get_values(op.dynamicSizes)
        return (new_array(op, op.result.type, sizes), *(None,) * (len(op.results) - 1))

    @handles(gpu.MemcpyOp)
    def run_gpu_memcpy(self, interp: Interpreter, op: gpu.MemcpyOp, args: Values) -> Values:
        copy(op, *interp.get_values([op.src, op.dst]))
        return (None,) * len(op.results)

    @handles(gpu.DeallocOp, gpu.WaitOp, gpu.HostRegisterOp, gpu.HostUnregisterOp)
    @handles(gpu.SetDefaultDeviceOp)
    def run_gpu_no_op(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (None,) * len(op.results)


# --- linalg ---------------------------------------------------------------------------


def _concrete_subclasses(base: type[Operation]) -> list[type[Operation]]:
    found: list[type[Operation]] = []
    for sub in base.__subclasses__():
        if getattr(sub, "name", None) and not getattr(sub, "__abstractmethods__", None):
            found.append(sub)
        found += _concrete_subclasses(sub)
    return list(dict.fromkeys(found))


_STRUCTURED = [
    t
    for t in _concrete_subclasses(linalg_base.LinalgStructuredOperation)
    if t.__module__.startswith("xdsl.dialects.linalg")
]


@register
class LinalgImpls(InterpreterFunctions):
    @handles(*_STRUCTURED)
    def run_structured(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        assert isinstance(op, linalg_base.LinalgStructuredOperation)
        if op.res:
            fail(op, "on tensors is not supported by the interpreter (memrefs only)")
        maps = [m.data for m in op.get_indexing_maps()]
        shapes = [d for a in args if isinstance(a, np.ndarray) for d in a.shape]
        try:
            ranges = op.get_shapes_to_loops_map().eval(shapes, [])
        except NotImplementedError:
            fail(op, "has indexing maps the interpreter cannot invert into loop bounds")
        n_inputs = len(op.inputs)
        outputs = list(zip(args[n_inputs:], maps[n_inputs:]))
        indices = state(interp).linalg_indices
        for point in product(*map(range, ranges)):
            scalars = tuple(
                load(op, a, m.eval(point, ())) if isinstance(a, np.ndarray) else a
                for a, m in zip(args, maps)
            )
            indices.append(point)
            values = interp.run_ssacfg_region(op.body, scalars, op.name)
            indices.pop()
            for (array, output_map), value in zip(outputs, values):
                store(op, array, output_map.eval(point, ()), value)
        return ()

    @handles(linalg.YieldOp)
    def run_yield(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(linalg.IndexOp)
    def run_index(self, interp: Interpreter, op: linalg.IndexOp, args: Values) -> Values:
        indices = state(interp).linalg_indices
        if not indices:
            fail(op, "runs outside a linalg op")
        return (indices[-1][op.dim.value.data],)


# --- the interpreter ------------------------------------------------------------------


def make_interpreter(
    module: ModuleOp, listeners: Sequence[Interpreter.Listener] = ()
) -> Interpreter:
    interpreter = Interpreter(module, index_bitwidth=INDEX_WIDTH, listeners=tuple(listeners))
    # From xDSL: func.return and calling func.func, scf.if/while/index_switch and
    # cf.br/cond_br; they pass values on without looking at them.
    for functions in (FuncFunctions(), ScfFunctions(), CfFunctions()):
        interpreter.register_implementations(functions)
    ours = (ArithImpls, MathImpls, MemrefImpls, ControlImpls, GpuImpls, LinalgImpls)
    for ours_functions in ours:
        interpreter.register_implementations(ours_functions(), override=True)
    return interpreter


__all__ = ["Trap", "make_interpreter", "state", "wrap", "signed", "unsigned", "int_to_float"]
