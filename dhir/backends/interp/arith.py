"""The arith dialect, with exact wrapping and rounding."""

from typing import cast

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
)
from xdsl.ir import Attribute, Operation

from dhir.backends.interp.core import (
    Values,
    f32_bits,
    f32_value,
    fail,
    handles,
    lanewise,
    register,
    value_dtype,
)
from dhir.backends.interp.scalars import (
    _CMPF,
    _CMPI,
    _FLOATS,
    _divisor,
    _exact,
    _int_binary,
    _no_signed_overflow,
    add,
    divide,
    float_rounder,
    float_to_int,
    int_to_float,
    int_width,
    lane_type,
    maximum,
    maxnum,
    minimum,
    minnum,
    multiply,
    quiet_if_narrow,
    remainder,
    result_rounder,
    round_bf16_once,
    round_directed,
    signed,
    trunc_div,
    truncate,
    unsigned,
    wrap,
)
from dhir.dialects import arith

# Loaded before registering: the implementations also go to dhir's subclasses.
from dhir.dialects import arith as dhir_arith
from dhir.toolchain.entry import numpy_dtype


@register
@lanewise
class ArithImpls(InterpreterFunctions):
    @handles(arith.ConstantOp)
    def run_constant(self, interp: Interpreter, op: arith.ConstantOp, args: Values) -> Values:
        value = op.value
        if isinstance(value, IntegerAttr):
            return (wrap(value.value.data, int_width(op, op.result.type)),)
        if isinstance(value, FloatAttr):
            return (float_rounder(op, op.result.type)(value.value.data),)
        if isinstance(value, DenseIntOrFPElementsAttr) and isinstance(op.result.type, VectorType):
            return (_dense_vector(op, value, op.result.type),)
        fail(op, f"of {op.result.type} is not supported by the interpreter")

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

    @handles(arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, dhir_arith.RemFOp)
    def run_float_arith(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        a, b = args
        round_to = result_rounder(op)
        if isinstance(op, dhir_arith.RemFOp):
            return (round_to(remainder(a, b)),)
        if isinstance(op, arith.AddfOp):
            return (round_to(add(a, b)),)
        if isinstance(op, arith.SubfOp):
            return (round_to(a - b),)
        if isinstance(op, arith.MulfOp):
            return (round_to(multiply(a, b)),)
        return (round_to(divide(a, b)),)

    @handles(arith.MaximumfOp, arith.MinimumfOp, arith.MaxnumfOp, arith.MinnumfOp)
    def run_float_minmax(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        result_rounder(op)  # rejects unsupported types
        pick = {arith.MaximumfOp: maximum, arith.MinimumfOp: minimum,
                arith.MaxnumfOp: maxnum, arith.MinnumfOp: minnum}  # fmt: skip
        base = next(t for t in type(op).__mro__ if t in pick)
        result = pick[base](args[0], args[1])
        if base in (arith.MaximumfOp, arith.MinimumfOp):  # maxnumf's lowering selects
            result = quiet_if_narrow(op, result)
        return (result,)

    @handles(arith.NegfOp)
    def run_negf(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        result_rounder(op)
        return (-args[0],)

    @handles(
        arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.IndexCastOp, dhir_arith.IndexCastUIOp
    )
    def run_int_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width_in = int_width(op, op.operands[0].type)
        width_out = int_width(op, op.results[0].type)
        if isinstance(op, arith.TruncIOp):
            return (truncate(op, args[0], width_in, width_out),)
        zero_extends = isinstance(op, arith.ExtUIOp | dhir_arith.IndexCastUIOp)
        view = unsigned if zero_extends else signed
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
        nearest = self._nearest(op, args[0])
        mode = op.rounding if isinstance(op, dhir_arith.TruncFOp) else None
        if mode is None or mode == "to_nearest_even":
            return (nearest,)
        return (round_directed(args[0], nearest, mode, lane_type(op.results[0].type)),)

    @staticmethod
    def _nearest(op: Operation, value: float) -> float:
        source, target = (lane_type(v.type) for v in (*op.operands, *op.results))
        if isinstance(source, BFloat16Type) and isinstance(target, Float32Type):
            return value  # bf16 is f32's upper half: a shift, signalling NaNs kept
        # Otherwise the hardware's conversion, which quiets a signalling NaN.
        value = value + value if value != value else value
        if isinstance(source, Float64Type) and isinstance(target, BFloat16Type):
            return round_bf16_once(value)
        return result_rounder(op)(value)

    @handles(arith.BitcastOp)
    def run_bitcast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        source, target = lane_type(op.operands[0].type), lane_type(op.results[0].type)
        value = args[0]
        if isinstance(source, BFloat16Type):  # bf16 is f32's upper half
            value = f32_bits(value) >> 16
        elif isinstance(source, Float32Type):  # through f32_bits, which keeps signalling NaNs
            value = f32_bits(value)
        elif type(source) in _FLOATS:  # through the bits as a signless integer
            bits = np.array(value, _float_dtype(op, source))
            value = int(bits.view(f"u{_bytes(op, source)}"))
        if isinstance(target, BFloat16Type):
            return (f32_value(unsigned(value, 16) << 16),)
        if isinstance(target, Float32Type):
            return (f32_value(value),)
        if type(target) in _FLOATS:
            width = 8 * _bytes(op, target)
            bits = np.array(unsigned(value, width), f"u{width // 8}")
            return (float(bits.view(_float_dtype(op, target))),)
        return (wrap(value, int_width(op, target)),)


def _bytes(op: Operation, type_: Attribute) -> int:
    dtype = numpy_dtype(type_)
    if dtype is None:
        fail(op, f"on {type_} is not supported by the interpreter")
    return dtype.itemsize


def _float_dtype(op: Operation, type_: Attribute) -> np.dtype:
    dtype = numpy_dtype(type_)
    if dtype is None:
        fail(op, f"cannot reinterpret {type_} in the interpreter")
    return dtype


def _dense_vector(
    op: Operation, value: DenseIntOrFPElementsAttr, type_: VectorType[Attribute]
) -> np.ndarray:
    if isinstance(type_.element_type, IntegerType | IndexType):
        width = int_width(op, type_)
        lanes = [wrap(int(cast(int, v)), width) for v in value.get_values()]
    else:
        round_to = float_rounder(op, type_)
        lanes = [round_to(float(cast(float, v))) for v in value.get_values()]
    dtype = value_dtype(type_.element_type)
    assert dtype is not None
    shape = tuple(type_.get_shape())
    flat = np.array(lanes, dtype)
    array = np.broadcast_to(flat, shape).copy() if flat.size == 1 else flat.reshape(shape)
    array.flags.writeable = False
    return array
