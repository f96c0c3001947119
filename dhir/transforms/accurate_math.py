"""`dhir-accurate-math`: the math ops MLIR 22's CPU lowering gets wrong, made right.

- math.expm1 and math.log1p become calls of the C library's: convert-math-to-llvm expands
  them to exp(x) - 1 and log(1 + x), which lose every digit near 0 (expm1(1e-10) is
  1.00000008e-10 in f64 and 0 in f32); libm's are accurate to an ulp, as NumPy's and the
  interpreter's are. f16 and bf16 are computed in f32 and rounded back (as LLVM does for
  other math ops); vectors lane by lane.
- math.atan2 becomes a call of libm's too: MLIR 22's folder (which canonicalization, also
  in expand-strided-metadata, runs) makes atan2 of two constant zeros NaN, where C gives
  +-0 or +-pi by their signs; at run time convert-math-to-libm calls atan2 anyway.
- math.fpowi on f16 and bf16 is computed in f32 and rounded once: LLVM expands a constant
  exponent into products rounded to half precision, and convert-math-to-funcs computes i64
  exponents in half precision.
- math.fpowi with an exponent narrower than i32 gets it sign-extended to i32 (exact): LLVM's
  powi takes a C int, and clang rejects any other width ("POWI exponent does not match
  sizeof(int)"); wider exponents are outlined by mlir-opt's convert-math-to-funcs. On
  vectors with exponents up to i32, lane by lane: MLIR 22 would give powi a vector exponent.
- arith.maxnumf and minnumf become maximumf/minimumf where neither operand is NaN, and the
  other operand where one is: LLVM 22's llvm.maxnum may give either of +0 and -0 (x86 code
  gave the first operand, so maxnumf(-0.0, 0.0) was -0.0, while constant folding gives
  +0.0); maximumf orders -0 below +0, as the interpreter does. Ops whose fastmath flags
  allow `nsz` keep llvm.maxnum.
- vector.reduction <maxnumf> and <minnumf> become the chain of arith.maxnumf/minnumf the
  interpreter computes, in lane order (from the accumulator, if any), each made as above:
  llvm.vector.reduce.fmax leaves the zero open too (x86 code reduced [-0.0, +0.0] to
  -0.0). Reductions whose flags allow `nsz` keep LLVM's.
- vector.mask around a vector.reduction of a float maximum or minimum becomes the
  reduction of `arith.select %mask, %v, N`, N the kind's neutral value (-inf for
  maximumf, +inf for minimumf, NaN, which they skip, for maxnumf and minnumf): MLIR 22
  fills the lanes off with -1.4e-45 for maximumf and 3.4e38 for minimumf, so the
  maximum of [-4, -3, -2] was -1.4e-45; and the maxnumf chain above needs no mask.

The native backend runs this on host code only: GPU kernels have libdevice's versions.
"""

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FunctionType,
    IntegerType,
    ModuleOp,
    VectorType,
    f32,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.type import get_element_type_or_self

from dhir.dialects import arith, func, vector
from dhir.dialects import math as mathd
from dhir.dialects.arith import ExtSIOp
from dhir.dialects.gpu import in_device_code
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.walk import find_ops

_C_NAMES: dict[type[Operation], str] = {
    mathd.ExpM1Op: "expm1",
    mathd.Log1pOp: "log1p",
    mathd.Atan2Op: "atan2",
}
_NUMBER_OPS = (arith.MaxnumfOp, arith.MinnumfOp)
_NUMBER_KINDS: dict[str, type[arith.MaxnumfOp | arith.MinnumfOp]] = {
    "maxnumf": arith.MaxnumfOp,
    "minnumf": arith.MinnumfOp,
}
_CHANGED = (*_C_NAMES, mathd.FPowIOp, *_NUMBER_OPS, vector.ReductionOp)
# One lane's value from its operands' lanes, appending the ops that compute it to the list.
_Scalar = Callable[[list[SSAValue], list[Operation]], SSAValue]


@dataclass(frozen=True)
class AccurateMathPass(ModulePass):
    """math.expm1/log1p outside GPU code become calls of libm's accurate versions.

    (@expm1/@expm1f/@log1p/@log1pf); math.fpowi exponents narrower than i32 are
    sign-extended to i32, as LLVM's powi takes a C int (vectors lane by lane);
    arith.maxnumf/minnumf order -0 below +0, as the interpreter does."""

    name = "dhir-accurate-math"
    needs: ClassVar[tuple[type[Operation], ...]] = (vector.MaskOp, *_CHANGED)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # One walk finds both kinds (a walk of a lowered piece of 10,000 tasks costs 6 ms);
        # a second only when unmasking made reductions the first did not meet.
        found = find_ops(op, (vector.MaskOp, *_CHANGED))
        masks = [o for o in found if isinstance(o, vector.MaskOp)]
        unmasked = [_unmask_min_max(mask) for mask in masks if not in_device_code(mask)]
        if any(unmasked):
            found = find_ops(op, _CHANGED)
        # Where an op is (a walk up its parents) is asked only of the few it changes.
        changed = [o for o in found if isinstance(o, _CHANGED) and not in_device_code(o)]
        for math_op in changed:
            if _c_name(math_op) is not None:
                _replace(op, math_op)
            elif isinstance(math_op, mathd.FPowIOp):
                _widen_exponent(_in_f32(math_op))
            elif isinstance(math_op, _NUMBER_OPS):
                order_zeros(math_op)
            elif isinstance(math_op, vector.ReductionOp):
                _reduce_in_lane_order(math_op)


def _reduce_in_lane_order(op: vector.ReductionOp) -> None:
    """A maxnumf/minnumf reduction as `maxnumf(...maxnumf(acc, v[0])..., v[n-1])` (from
    v[0] without an accumulator), each op ordering zeros as `order_zeros` does: which
    zero, and which of several NaNs, comes out is then the interpreter's."""
    number = _NUMBER_KINDS.get(op.kind.data.value)
    if number is None or _no_signed_zeros(op):
        return
    type_ = op.vector.type
    assert isinstance(type_, VectorType)
    if type_.get_num_scalable_dims():
        raise PassFailedAt(op, f"'{op.name}' on a scalable vector is not supported natively")
    ops: list[Operation] = []
    lanes: list[SSAValue] = []
    for position in product(*map(range, type_.get_shape())):
        ops.append(lane := vector.ExtractOp(op.vector, list(position), op.dest.type))
        lanes.append(lane.result)
    total = op.acc if op.acc is not None else lanes.pop(0)
    chain: list[arith.MaxnumfOp | arith.MinnumfOp] = []
    for lane in lanes:
        ops.append(step := number(total, lane, op.fastmath))
        chain.append(step)
        total = step.result
    Rewriter.replace_op(op, ops, [total])
    for step in chain:
        order_zeros(step)


# The value a lane off takes in a masked float maximum or minimum: what the kind skips.
_MIN_MAX_NEUTRAL = {"maximumf": "-inf", "minimumf": "inf", "maxnumf": "nan", "minnumf": "nan"}


def _unmask_min_max(mask: vector.MaskOp) -> bool:
    """`vector.mask %m { vector.reduction <maximumf>, %v }` as the reduction of
    `select(%m, %v, -inf)` (see the module's doc for the other kinds); whether it was."""
    inner = mask.body.block.first_op
    if not isinstance(inner, vector.ReductionOp) or mask.passthru is not None:
        return False
    neutral = _MIN_MAX_NEUTRAL.get(inner.kind.data.value)
    type_ = inner.vector.type
    if neutral is None or not isinstance(type_, VectorType):
        return False
    element = type_.element_type
    assert isinstance(element, AnyFloat)
    lanes = arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(type_, [float(neutral)]))
    chosen = arith.SelectOp(mask.mask, inner.vector, lanes.result)
    operands = [chosen.result] if inner.acc is None else [chosen.result, inner.acc]
    unmasked = inner.clone()
    for index, operand in enumerate(operands):
        unmasked.operands[index] = operand
    Rewriter.replace_op(mask, [lanes, chosen, unmasked], unmasked.results)
    return True


def _no_signed_zeros(op: Operation) -> bool:
    flags = getattr(op, "fastmath", None)
    return flags is not None and any(flag.value == "nsz" for flag in flags.data)


def order_zeros(op: arith.MaxnumfOp | arith.MinnumfOp) -> None:
    """`maxnumf(a, b)` as `isnan(a) ? b : isnan(b) ? a : maximumf(a, b)` (minnumf alike):
    the interpreter's result, also for zeros of opposite signs, which llvm.maxnum leaves
    open."""
    if _no_signed_zeros(op):
        return
    a, b = op.lhs, op.rhs
    exact = arith.MaximumfOp if isinstance(op, arith.MaxnumfOp) else arith.MinimumfOp
    ordered = exact(a, b, op.fastmath)
    a_nan, b_nan = arith.CmpfOp(a, a, "uno"), arith.CmpfOp(b, b, "uno")
    keep_a = arith.SelectOp(b_nan.result, a, ordered.result)
    result = arith.SelectOp(a_nan.result, b, keep_a.result)
    Rewriter.replace_op(op, [ordered, a_nan, b_nan, keep_a, result], [result.result])


def _in_f32(op: mathd.FPowIOp) -> mathd.FPowIOp:
    """An f16 or bf16 fpowi computed in f32 and rounded once, as the interpreter does (and
    compiler-rt's powi on promoted halves): else LLVM expands a constant exponent into
    products rounded to half precision (300^-2 became 0), and convert-math-to-funcs does
    so for i64 exponents."""
    type_ = op.result.type
    element = get_element_type_or_self(type_)
    if not isinstance(element, Float16Type | BFloat16Type):
        return op
    wide = VectorType(f32, type_.get_shape()) if isinstance(type_, VectorType) else f32
    extend = arith.ExtFOp(op.lhs, wide)
    power = mathd.FPowIOp.create(
        operands=[extend.result, op.rhs],
        result_types=[wide],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    narrow = arith.TruncFOp(power.results[0], type_)
    Rewriter.replace_op(op, [extend, power, narrow], [narrow.result])
    return power


def _widen_exponent(op: mathd.FPowIOp) -> None:
    """Exponents narrower than i32 sign-extended to i32. Vectors with exponents up to i32
    are done lane by lane: MLIR 22 lowers them to an `llvm.intr.powi` with a vector
    exponent, which LLVM rejects (it takes one int). Wider exponents are left to
    convert-math-to-funcs, which unrolls vectors itself."""
    type_ = op.rhs.type
    element = get_element_type_or_self(type_)
    if not isinstance(element, IntegerType) or element.width.data > 32:
        return
    if isinstance(type_, VectorType):
        _lane_by_lane(op, lambda lanes, ops: _scalar_fpowi(op, lanes, ops))
    elif element.width.data < 32:
        extend = ExtSIOp(op.rhs, i32)
        Rewriter.insert_op(extend, InsertPoint.before(op))
        op.operands[1] = extend.result


def _scalar_fpowi(op: mathd.FPowIOp, lanes: list[SSAValue], ops: list[Operation]) -> SSAValue:
    base, exponent = lanes
    if exponent.type != i32:
        ops.append(extend := ExtSIOp(exponent, i32))
        exponent = extend.result
    power = mathd.FPowIOp.create(
        operands=[base, exponent],
        result_types=[base.type],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    ops.append(power)
    return power.results[0]


def _c_name(op: Operation) -> str | None:
    return next((name for t, name in _C_NAMES.items() if isinstance(op, t)), None)


def _replace(module: ModuleOp, op: Operation) -> None:
    element = get_element_type_or_self(op.results[0].type)
    c_name = _c_name(op)
    assert c_name is not None

    def scalar(lanes: list[SSAValue], ops: list[Operation]) -> SSAValue:
        if isinstance(element, Float64Type):
            callee = _declare(module, op, c_name, element, len(lanes))
            ops.append(call := func.CallOp(callee, lanes, [element]))
            return call.res[0]
        wide = list(lanes)
        if not isinstance(element, Float32Type):  # f16, bf16
            ops.extend(extend := [arith.ExtFOp(lane, f32) for lane in lanes])
            wide = [e.result for e in extend]
        callee = _declare(module, op, c_name + "f", f32, len(lanes))
        ops.append(call := func.CallOp(callee, wide, [f32]))
        if isinstance(element, Float32Type):
            return call.res[0]
        ops.append(narrow := arith.TruncFOp(call.res[0], element))
        return narrow.result

    if isinstance(op.results[0].type, VectorType):
        _lane_by_lane(op, scalar)
    else:
        ops: list[Operation] = []
        value = scalar(list(op.operands), ops)
        Rewriter.replace_op(op, ops, [value])


def _lane_by_lane(op: Operation, scalar: _Scalar) -> None:
    """Replace `op`, whose operands and float result are vectors of one shape, by `scalar`
    of each lane's operands (appending its ops to the list it is given), the results
    inserted into a vector in their lanes."""
    type_ = op.results[0].type
    assert isinstance(type_, VectorType)
    if type_.get_num_scalable_dims():
        raise PassFailedAt(op, f"'{op.name}' on a scalable vector is not supported natively")
    ops: list[Operation] = []
    ops.append(result := arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(type_, [0.0])))
    value: SSAValue = result.result
    for position in product(*map(range, type_.get_shape())):
        lanes: list[SSAValue] = []
        for operand in op.operands:
            lane_type = get_element_type_or_self(operand.type)
            ops.append(item := vector.ExtractOp(operand, list(position), lane_type))
            lanes.append(item.result)
        ops.append(put := vector.InsertOp(scalar(lanes, ops), value, list(position), type_))
        value = put.result
    Rewriter.replace_op(op, ops, [value])


def _declare(module: ModuleOp, user: Operation, name: str, type_: Attribute, arity: int) -> str:
    """The name of libm's `name`, of `arity` arguments, declared in `module` once."""
    signature = FunctionType.from_lists([type_] * arity, [type_])
    existing = SymbolTable.lookup_symbol(module, name)
    if existing is None:
        declaration = func.FuncOp.external(name, [type_] * arity, [type_])
        block = module.body.block
        if block.first_op is None:
            block.add_op(declaration)
        else:
            block.insert_op_before(declaration, block.first_op)
        return name
    if isinstance(existing, func.FuncOp) and existing.function_type == signature:
        return name
    raise PassFailedAt(
        user,
        f"'{user.name}' is lowered to a call of the C library's @{name}, but the module "
        f"defines another @{name}; rename it",
    )
