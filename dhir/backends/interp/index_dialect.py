"""The index dialect: 64-bit wrapping arithmetic, undefined cases refused as arith's are."""

from collections.abc import Callable

from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.ir import Operation

from dhir.backends.interp.core import INDEX_WIDTH, Values, fail, handles, register
from dhir.backends.interp.scalars import (
    _CMPI,
    _divisor,
    _no_signed_overflow,
    int_width,
    signed,
    trunc_div,
    unsigned,
    wrap,
)
from dhir.dialects import index

_Exact = Callable[[int, int], int]

# On the operands read as two's complement (signed) or as unsigned numbers.
_SIGNED: dict[type[Operation], _Exact] = {
    index.AddOp: lambda a, b: a + b,
    index.SubOp: lambda a, b: a - b,
    index.MulOp: lambda a, b: a * b,
    index.MaxSOp: max,
    index.MinSOp: min,
    index.AndOp: lambda a, b: a & b,
    index.OrOp: lambda a, b: a | b,
    index.XOrOp: lambda a, b: a ^ b,
}
_UNSIGNED: dict[type[Operation], _Exact] = {
    index.MaxUOp: max,
    index.MinUOp: min,
}
_SIGNED_DIVISIONS: dict[type[Operation], _Exact] = {
    index.DivSOp: trunc_div,
    index.RemSOp: lambda a, b: a - b * trunc_div(a, b),  # the sign of the dividend
    index.CeilDivSOp: lambda a, b: -(-a // b),
    index.FloorDivSOp: lambda a, b: a // b,
}
_UNSIGNED_DIVISIONS: dict[type[Operation], _Exact] = {
    index.DivUOp: lambda a, b: a // b,
    index.RemUOp: lambda a, b: a % b,
    index.CeilDivUOp: lambda a, b: -(-a // b),
}


@register
class IndexImpls(InterpreterFunctions):
    @handles(index.ConstantOp)
    def run_constant(self, interp: Interpreter, op: index.ConstantOp, args: Values) -> Values:
        return (wrap(op.value.value.data, INDEX_WIDTH),)

    @handles(index.BoolConstantOp)
    def run_bool_constant(
        self, interp: Interpreter, op: index.BoolConstantOp, args: Values
    ) -> Values:
        return (int(bool(op.value.value.data)),)

    @handles(index.SizeOfOp)
    def run_sizeof(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (INDEX_WIDTH,)

    @handles(*index.BINARY_OPS)
    def run_binary(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (wrap(_binary(op, args[0], args[1]), INDEX_WIDTH),)

    @handles(index.CmpOp)
    def run_cmp(self, interp: Interpreter, op: index.CmpOp, args: Values) -> Values:
        predicate = index.CMP_PREDICATES.index(op.pred.data)
        view = unsigned if predicate >= 6 else signed  # arith.cmpi's order
        a, b = (view(v, INDEX_WIDTH) for v in args)
        return (int(_CMPI[predicate](a, b)),)

    @handles(index.CastSOp, index.CastUOp)
    def run_cast(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        width_in = int_width(op, op.operands[0].type)
        view = unsigned if isinstance(op, index.CastUOp) else signed
        return (wrap(view(args[0], width_in), int_width(op, op.results[0].type)),)


def _binary(op: Operation, a: int, b: int) -> int:
    kind = type(op)
    if kind in _SIGNED:
        return _SIGNED[kind](signed(a, INDEX_WIDTH), signed(b, INDEX_WIDTH))
    if kind in _UNSIGNED:
        return _UNSIGNED[kind](unsigned(a, INDEX_WIDTH), unsigned(b, INDEX_WIDTH))
    if kind in _SIGNED_DIVISIONS:
        a, b = signed(a, INDEX_WIDTH), _divisor(op, signed(b, INDEX_WIDTH))
        _no_signed_overflow(op, a, b, INDEX_WIDTH)
        return _SIGNED_DIVISIONS[kind](a, b)
    if kind in _UNSIGNED_DIVISIONS:
        a, b = unsigned(a, INDEX_WIDTH), _divisor(op, unsigned(b, INDEX_WIDTH))
        return _UNSIGNED_DIVISIONS[kind](a, b)
    return _shift(op, a, b)


def _shift(op: Operation, a: int, b: int) -> int:
    amount = unsigned(b, INDEX_WIDTH)
    if amount >= INDEX_WIDTH:
        fail(op, f"shifts an index by {amount} bits (MLIR gives poison)")
    if isinstance(op, index.ShlOp):
        return a << amount
    view = signed if isinstance(op, index.ShrSOp) else unsigned
    return view(a, INDEX_WIDTH) >> amount
