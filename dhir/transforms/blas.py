"""Matrix products as calls to BLAS's gemm, where the program allows any order of sums.

BLAS sums in an order of its own and fuses multiplies with adds, so a product goes to it
only when every add and multiply of it carries the `reassoc` and `contract` fastmath
flags (`--fast-math=reassoc` gives them to all). The library is OpenBLAS as NumPy's wheel
ships it (`libscipy_openblas64_`: 64-bit integers, symbols `scipy_cblas_<name>64_`), so
it is there wherever dhir is; the native backend links it when a call is made
(dhir.toolchain.linking.blas_library). Memrefs go to it as addresses (i64): the
address analysis sees that they escape, so a task's facts stay as large as the truth.

OpenBLAS starts each sum at +0, so where the exact sum is -0 (the output element -0 and
every product -0) it gives +0, which only `nsz` allows. In round-to-nearest, x + y is -0
only when x and y both are, so a sum in any order is -0 only where every term is: where
no output element is -0 before the call, BLAS's result is one the flags allow. Without
`nsz`, callers scan the output for -0 first (`holds_negative_zero`: O(mn) against gemm's
O(mnk)) and run exact loops where one is (an i-k-j nest: the blocked kernel that
`--fast-math=none` gives, dhir.transforms.optimize_bodies).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
    i1,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue

from dhir.dialects import arith, func, memref, scf
from dhir.transforms.building import aligned_address, declare

GEMM = {64: "scipy_cblas_dgemm64_", 32: "scipy_cblas_sgemm64_"}
GEMV = {64: "scipy_cblas_dgemv64_", 32: "scipy_cblas_sgemv64_"}
DOT = {64: "scipy_cblas_ddot64_", 32: "scipy_cblas_sdot64_"}
SYMBOLS = (*GEMM.values(), *GEMV.values(), *DOT.values())
_ROW_MAJOR, _NO_TRANSPOSE, _TRANSPOSE = 101, 111, 112
_RELAXED = frozenset({"reassoc", "contract"})
# Whose functions they are, as messages say it.
OPENBLAS = "OpenBLAS's function for --fast-math=reassoc"


def allows_any_order(ops: Iterable[Operation]) -> bool:
    """Whether every float add and multiply among `ops` may be reordered and fused."""
    relaxed = [op for op in ops if isinstance(op, arith.AddfOp | arith.MulfOp)]
    return bool(relaxed) and all(_RELAXED <= set(op.fastmath.data) for op in relaxed)


_ALLOWING = {
    "contract": "a multiply and an add may become one FMA",
    "reassoc": "sums may be reordered",
    "nsz": "a zero's sign may differ",
    "nnan": "no NaN assumed",
    "ninf": "no infinity assumed",
    "arcp": "divisions may be reciprocal multiplies",
    "afn": "functions may be approximate",
    "fast": "all of these",
}


def flags_allowing(ops: Iterable[Operation]) -> str | None:
    """What the fastmath flags of `ops` let LLVM change in their results, as said after
    "exact" in what the optimizer did; None where none has any."""
    flags: set[str] = set()
    for op in ops:
        attr = op.properties.get("fastmath")
        if isinstance(attr, arith.FastMathFlagsAttr):
            flags |= {str(flag) for flag in attr.data} - {"none"}
    if not flags:
        return None
    said = [_ALLOWING[f] for f in sorted(flags) if f in _ALLOWING]
    if flags - _ALLOWING.keys():
        said.append("what the others allow")
    return f"{', '.join(sorted(flags))}: {'; '.join(said)}"


def as_allowed(text: str, allowed: str | None) -> str:
    """`text`, whose "exact" holds only where no fastmath flag lets LLVM change the
    results (`allowed`: what `flags_allowing` says they let it change): under --fast-math
    contract, a multiply and an add may become an FMA, so it is no longer the
    interpreter's bits that a rewrite keeps. The optimizer's and dhir-time-tiles's lines
    say it alike."""
    head, exact, tail = text.rpartition(", exact")
    if allowed is None or not exact or tail[:1] not in ("", ";"):
        return text
    return f"{head}, in the program's order, as its fastmath allows ({allowed}){tail}"


def common_flags(ops: Iterable[Operation]) -> arith.FastMathFlagsAttr:
    """The fastmath flags every float add and multiply among `ops` carries: what an op
    made in their place may take. (`fast` would allow more than the program does: with
    `nsz`, an add of -0 and +0 may give either.)"""
    flags = [set(op.fastmath.data) for op in ops if isinstance(op, arith.AddfOp | arith.MulfOp)]
    return arith.FastMathFlagsAttr(set.intersection(*flags) if flags else "none")


def keeps_signed_zeros(ops: Iterable[Operation]) -> bool:
    """Whether some float add or multiply among `ops` lacks `nsz`: then BLAS's +0 where
    the exact sum is -0 is not allowed."""
    return "nsz" not in set(common_flags(ops).data)


def holds_negative_zero(
    block: Block, target: SSAValue, box: Sequence[tuple[SSAValue, SSAValue]]
) -> SSAValue:
    """At the end of `block`: an i1, whether some element of the float memref `target`
    in `box` (per dimension, [first, end) as index values; none for a 0-D memref) is -0.
    The bits are compared, so that +0 and NaNs are not taken for it."""
    element = _element(target)
    width = element.bitwidth
    bits = IntegerType(width)
    sign = arith.ConstantOp.from_int_and_width(-(1 << (width - 1)), bits)
    none = arith.ConstantOp.from_int_and_width(0, i1)
    one = arith.ConstantOp.from_int_and_width(1, IndexType())
    block.add_ops([sign, none, one])
    return _scan(block, (target, sign.result, one.result), box, [], none.result)


def _scan(
    block: Block,
    what: tuple[SSAValue, SSAValue, SSAValue],
    box: Sequence[tuple[SSAValue, SSAValue]],
    indices: list[SSAValue],
    found: SSAValue,
) -> SSAValue:
    target, sign, one = what
    if not box:
        load = memref.LoadOp.get(target, indices)
        cast_op = arith.BitcastOp(load.res, sign.type)
        same = arith.CmpiOp(cast_op.result, sign, "eq")
        either = arith.OrIOp(found, same.result)
        block.add_ops([load, cast_op, same, either])
        return either.result
    first, end = box[0]
    body = Block(arg_types=[IndexType(), i1])
    inner = _scan(body, what, box[1:], [*indices, body.args[0]], body.args[1])
    body.add_op(scf.YieldOp(inner))
    loop = scf.ForOp(first, end, one, [found], Region(body))
    block.add_op(loop)
    return loop.res[0]


@dataclass(frozen=True)
class Corner:
    """A row-major matrix in a memref's last two dimensions, from element (row, col) on
    (of matrix `batch` of a 3-D memref)."""

    memref: SSAValue
    row: SSAValue
    col: SSAValue
    batch: SSAValue | None = None


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
    gemm_args = [i32, i32, i32, i64, i64, i64, element, i64, i64, i64, i64, element, i64, i64]
    declare(module, symbol, gemm_args, [], OPENBLAS)
    ops: list[Operation] = []

    def put(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def wide(value: SSAValue) -> SSAValue:
        return put(arith.IndexCastOp(value, i64))

    def constant(value: int, kind: IntegerType = i64) -> SSAValue:
        return _constant(ops, value, kind)

    def address(corner: Corner) -> tuple[SSAValue, SSAValue]:
        rows, cols = _shape(corner.memref)
        base = aligned_address(ops, corner.memref)
        leading = constant(cols)
        row = wide(corner.row)
        if corner.batch is not None:
            row = put(arith.AddiOp(put(arith.MuliOp(wide(corner.batch), constant(rows))), row))
        first = put(arith.MuliOp(row, leading))
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


def emit_gemv(
    block: Block,
    module: ModuleOp,
    matrix: SSAValue,
    x: SSAValue,
    y: SSAValue,
    transpose: bool,
    batch: SSAValue | None = None,
) -> None:
    """At the end of `block`: y += A x (or A^T x), A the whole row-major 2-D `matrix`,
    x and y whole 1-D memrefs; with `batch` (an index), A, x and y the `batch`th matrix
    and vectors of a 3-D `matrix` and 2-D `x` and `y`."""
    element = _element(y)
    symbol = GEMV[element.bitwidth]
    args = [i32, i32, i64, i64, element, i64, i64, i64, i64, element, i64, i64]
    declare(module, symbol, args, [], OPENBLAS)
    rows, cols = _shape(matrix)
    ops: list[Operation] = []
    one = _constant(ops, 1)
    scale = arith.ConstantOp(FloatAttr(1.0, element))
    ops.append(scale)
    trans = _TRANSPOSE if transpose else _NO_TRANSPOSE
    order, which = _constant(ops, _ROW_MAJOR, i32), _constant(ops, trans, i32)
    m, n, lda = _constant(ops, rows), _constant(ops, cols), _constant(ops, cols)
    a, xs, ys = (_batch_start(ops, v, batch) for v in (matrix, x, y))
    arguments = [order, which, m, n, scale.result, a, lda, xs, one, scale.result, ys, one]
    if rows and cols:  # BLAS refuses a leading dimension of 0; nothing to add then
        ops.append(func.CallOp(symbol, arguments, []))
    block.add_ops(ops)


def emit_dot(
    block: Block,
    module: ModuleOp,
    vectors: tuple[SSAValue, SSAValue],
    out: SSAValue,
    flags: arith.FastMathFlagsAttr,
) -> None:
    """At the end of `block`: out[] += x . y, `vectors` x and y whole 1-D memrefs, out
    0-D; the add takes `flags` (the program's). Of empty vectors, nothing: out stays as
    it is (-0 too), as the loops leave it."""
    x, y = vectors
    size = cast(MemRefType, x.type).get_shape()[0]
    if size == 0:
        return
    element = _element(out)
    symbol = DOT[element.bitwidth]
    declare(module, symbol, [i64, i64, i64, i64, i64], [element], OPENBLAS)
    ops: list[Operation] = []
    one = _constant(ops, 1)
    arguments = [_constant(ops, size), aligned_address(ops, x), one, aligned_address(ops, y), one]
    call = func.CallOp(symbol, arguments, [element])
    start = memref.LoadOp.get(out, [])
    total = arith.AddfOp(start.res, call.res[0], flags)
    ops += [call, start, total, memref.StoreOp.get(total.result, out, [])]
    block.add_ops(ops)


def _batch_start(ops: list[Operation], value: SSAValue, batch: SSAValue | None) -> SSAValue:
    """The address (i64) of row-major memref `value`'s first element, or with `batch`, of
    its `batch`th slice along its first dimension."""
    address = aligned_address(ops, value)
    if batch is None:
        return address
    kind = cast(MemRefType, value.type)
    slice_bytes = _element(value).bitwidth // 8
    for size in kind.get_shape()[1:]:
        slice_bytes *= size
    stride = _constant(ops, slice_bytes)
    wide = arith.IndexCastOp(batch, i64)
    offset = arith.MuliOp(wide.result, stride)
    moved = arith.AddiOp(address, offset.result)
    ops += [wide, offset, moved]
    return moved.result


def _constant(ops: list[Operation], value: int, kind: IntegerType = i64) -> SSAValue:
    op = arith.ConstantOp.from_int_and_width(value, kind)
    ops.append(op)
    return op.result


def _shape(value: SSAValue) -> tuple[int, int]:
    kind = value.type
    assert isinstance(kind, MemRefType)
    *_, rows, cols = kind.get_shape()
    return rows, cols


def count(block: Block, lb: SSAValue, ub: SSAValue) -> SSAValue:
    """max(ub - lb, 0), at the end of `block`."""
    zero = arith.ConstantOp.from_int_and_width(0, IndexType())
    span = arith.SubiOp(ub, lb)
    most = arith.MaxSIOp(span.result, zero.result)
    block.add_ops([zero, span, most])
    return most.result
