"""`dhir-accurate-math`: the math ops MLIR 22's CPU lowering gets wrong, made right.

- math.expm1 and math.log1p become calls of the C library's: convert-math-to-llvm expands
  them to exp(x) - 1 and log(1 + x), which lose every digit near 0 (expm1(1e-10) is
  1.00000008e-10 in f64 and 0 in f32); libm's are accurate to an ulp, as NumPy's and the
  interpreter's are. f16 and bf16 are computed in f32 and rounded back (as LLVM does for
  other math ops); vectors lane by lane.
- math.fpowi with an exponent narrower than i32 gets it sign-extended to i32 (exact): LLVM's
  powi takes a C int, and clang rejects any other width ("POWI exponent does not match
  sizeof(int)"); wider exponents are outlined by mlir-opt's convert-math-to-funcs.

The native backend runs this on host code only: GPU kernels have libdevice's versions.
"""

from dataclasses import dataclass
from itertools import product

from xdsl.context import Context
from xdsl.dialects import arith, func, vector
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
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

from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import PassFailedAt

_C_NAMES: dict[type[Operation], str] = {mathd.ExpM1Op: "expm1", mathd.Log1pOp: "log1p"}


@dataclass(frozen=True)
class AccurateMathPass(ModulePass):
    """math.expm1/log1p outside GPU code become calls of libm's accurate versions.

    (@expm1/@expm1f/@log1p/@log1pf); math.fpowi exponents narrower than i32 are
    sign-extended to i32, as LLVM's powi takes a C int."""

    name = "dhir-accurate-math"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        found = [o for o in op.walk() if not in_device_code(o)]
        for math_op in found:
            if _c_name(math_op) is not None:
                _replace(op, math_op)
            elif isinstance(math_op, mathd.FPowIOp):
                _widen_exponent(math_op)


def _widen_exponent(op: mathd.FPowIOp) -> None:
    type_ = op.operands[1].type
    element = type_.element_type if isinstance(type_, VectorType) else type_
    if not isinstance(element, IntegerType) or element.width.data >= 32:
        return
    if isinstance(type_, VectorType):  # xDSL 0.74's arith.extsi takes scalars only
        raise PassFailedAt(
            op,
            f"'{op.name}' with {type_} exponents cannot be lowered (LLVM's powi takes i32); "
            "extend the exponents to i32 first",
        )
    extend = arith.ExtSIOp(op.operands[1], i32)
    Rewriter.insert_op(extend, InsertPoint.before(op))
    op.operands[1] = extend.result


def _c_name(op: Operation) -> str | None:
    return next((name for t, name in _C_NAMES.items() if isinstance(op, t)), None)


def _replace(module: ModuleOp, op: Operation) -> None:
    type_ = op.results[0].type
    element = type_.element_type if isinstance(type_, VectorType) else type_
    c_name = _c_name(op)
    assert c_name is not None
    ops: list[Operation] = []

    def scalar(value: SSAValue) -> SSAValue:
        if isinstance(element, Float64Type):
            callee = _declare(module, op, c_name, element)
            ops.append(call := func.CallOp(callee, [value], [element]))
            return call.res[0]
        wide = value
        if not isinstance(element, Float32Type):  # f16, bf16
            ops.append(extend := arith.ExtFOp(value, f32))
            wide = extend.result
        ops.append(call := func.CallOp(_declare(module, op, c_name + "f", f32), [wide], [f32]))
        if isinstance(element, Float32Type):
            return call.res[0]
        ops.append(narrow := arith.TruncFOp(call.res[0], element))
        return narrow.result

    if isinstance(type_, VectorType):
        if any(d < 0 for d in type_.get_shape()):
            raise PassFailedAt(op, f"'{op.name}' on a scalable vector is not supported natively")
        ops.append(result := arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(type_, [0.0])))
        value: SSAValue = result.result
        for position in product(*map(range, type_.get_shape())):
            ops.append(item := vector.ExtractOp(op.operands[0], list(position), element))
            ops.append(put := vector.InsertOp(scalar(item.result), value, list(position), type_))
            value = put.result
    else:
        value = scalar(op.operands[0])
    Rewriter.replace_op(op, ops, [value])


def _declare(module: ModuleOp, user: Operation, name: str, type_: Attribute) -> str:
    """The name of libm's `name`, declared in `module` once."""
    signature = FunctionType.from_lists([type_], [type_])
    existing = SymbolTable.lookup_symbol(module, name)
    if existing is None:
        declaration = func.FuncOp.external(name, [type_], [type_])
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
