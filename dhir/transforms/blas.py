"""Matrix products as calls to BLAS's gemm, where the program allows any order of sums.

BLAS sums in an order of its own and fuses multiplies with adds, so a product goes to it
only when every add and multiply of it carries the `reassoc` and `contract` fastmath
flags (`--fast-math=reassoc` gives them to all). The library is OpenBLAS as NumPy's wheel
ships it (`libscipy_openblas64_`: 64-bit integers, symbols `scipy_cblas_<name>64_`), so
it is there wherever dhir is; the native backend links it when a call is made
(dhir.toolchain.linking.blas_library). Memrefs go to it as addresses (i64): the
address analysis sees that they escape, so a task's facts stay as large as the truth.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.traits import SymbolTable

from dhir.dialects import arith, func, memref, scf

GEMM = {64: "scipy_cblas_dgemm64_", 32: "scipy_cblas_sgemm64_"}
_ROW_MAJOR, _NO_TRANSPOSE = 101, 111
_RELAXED = frozenset({"reassoc", "contract"})


def allows_any_order(ops: Iterable[Operation]) -> bool:
    """Whether every float add and multiply among `ops` may be reordered and fused."""
    relaxed = [op for op in ops if isinstance(op, arith.AddfOp | arith.MulfOp)]
    return bool(relaxed) and all(_RELAXED <= set(op.fastmath.data) for op in relaxed)


@dataclass(frozen=True)
class Corner:
    """A row-major matrix in a 2-D memref, from element (row, col) on."""

    memref: SSAValue
    row: SSAValue
    col: SSAValue


def emit_gemm(
    block: Block,
    module: ModuleOp,
    a: Corner,
    b: Corner,
    c: Corner,
    sizes: tuple[SSAValue, SSAValue, SSAValue],
    alpha: SSAValue,
) -> None:
    """At the end of `block`: C[m x n] += alpha * A[m x k] * B[k x n], the sizes (index
    values, none negative) as `sizes` says."""
    element = _element(c.memref)
    symbol = GEMM[element.bitwidth]
    _declare(module, symbol, element)
    ops: list[Operation] = []

    def put(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def wide(value: SSAValue) -> SSAValue:
        return put(arith.IndexCastOp(value, i64))

    def constant(value: int, kind: IntegerType = i64) -> SSAValue:
        return put(arith.ConstantOp.from_int_and_width(value, kind))

    def address(corner: Corner) -> tuple[SSAValue, SSAValue]:
        rows, cols = _shape(corner.memref)
        base = wide(put(memref.ExtractAlignedPointerAsIndexOp.get(corner.memref)))
        leading = constant(cols)
        first = put(arith.MuliOp(wide(corner.row), leading))
        first = put(arith.AddiOp(first, wide(corner.col)))
        offset = put(arith.MuliOp(first, constant(element.bitwidth // 8)))
        return put(arith.AddiOp(base, offset)), leading

    (pa, lda), (pb, ldb), (pc, ldc) = address(a), address(b), address(c)
    m, n, k = (wide(size) for size in sizes)
    order, keep = constant(_ROW_MAJOR, i32), constant(_NO_TRANSPOSE, i32)
    beta = put(arith.ConstantOp(FloatAttr(1.0, element)))
    arguments = [order, keep, keep, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc]
    # An empty product changes nothing (beta is 1); BLAS is not asked about it at all,
    # since it refuses leading dimensions of 0 that empty memrefs have.
    zero = constant(0)
    some = [put(arith.CmpiOp(size, zero, "sgt")) for size in (m, n, k)]
    every = put(arith.AndIOp(put(arith.AndIOp(some[0], some[1])), some[2]))
    call = Block()
    call.add_ops([func.CallOp(symbol, arguments, []), scf.YieldOp()])
    ops.append(scf.IfOp(every, [], Region(call)))
    block.add_ops(ops)


def _element(value: SSAValue) -> AnyFloat:
    kind = value.type
    assert isinstance(kind, MemRefType) and isinstance(kind.element_type, AnyFloat)
    return kind.element_type


def _shape(value: SSAValue) -> tuple[int, int]:
    kind = value.type
    assert isinstance(kind, MemRefType)
    rows, cols = kind.get_shape()
    return rows, cols


def _declare(module: ModuleOp, symbol: str, element: AnyFloat) -> None:
    if SymbolTable.lookup_symbol(module, symbol) is not None:
        return
    inputs = [i32, i32, i32, i64, i64, i64, element, i64, i64, i64, i64, element, i64, i64]
    module.body.block.add_op(func.FuncOp.external(symbol, inputs, []))


def count(block: Block, lb: SSAValue, ub: SSAValue) -> SSAValue:
    """max(ub - lb, 0), at the end of `block`."""
    zero = arith.ConstantOp.from_int_and_width(0, IndexType())
    span = arith.SubiOp(ub, lb)
    most = arith.MaxSIOp(span.result, zero.result)
    block.add_ops([zero, span, most])
    return most.result
