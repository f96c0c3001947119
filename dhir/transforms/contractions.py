"""Linalg's contractions in CPU tasks, for dhir-optimize-bodies: `linalg.matmul`,
`batch_matmul`, `batch_reduce_matmul`, `matvec`, `batch_matvec`, `vecmat` and `dot` on
memrefs, and a `linalg.generic` with one output and reduction dimensions whose maps only
pick dimensions, become the loops they mean, each output element's sum running up the
reduction, as the interpreter computes it, in whichever order of its dimensions the
kernels and row sums take next (`_order`; a named op as its generic form), not
necessarily the one a generic lists; or, for the named ops with their own body (`out +
in0 * in1`), where its add and multiply allow any order (`reassoc`, `contract`), calls to
OpenBLAS (gemm, gemv, dot; a batch's one per matrix); without `nsz`, the calls where no
output element is -0 before them, else the loops without flags, which the kernels take
as exact ones (see dhir.transforms.blas)."""

from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    MemRefType,
    ModuleOp,
    NoneAttr,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from dhir.analysis.sharing import may_alias, memory_of
from dhir.dialects import arith, linalg, memref, scf
from dhir.dialects.access import is_pure
from dhir.transforms.blas import (
    Corner,
    allows_any_order,
    common_flags,
    emit_dot,
    emit_gemm,
    emit_gemv,
    holds_negative_zero,
    keeps_signed_zeros,
)
from dhir.transforms.building import const_index, injective, put, replace_by, rows_contiguous

_NAMED = (
    linalg.MatmulOp,
    linalg.BatchMatmulOp,
    linalg.BatchReduceMatmulOp,
    linalg.MatvecOp,
    linalg.BatchMatvecOp,
    linalg.VecmatOp,
    linalg.DotOp,
)
KINDS = (*_NAMED, linalg.GenericOp)
Contraction = (
    linalg.MatmulOp
    | linalg.BatchMatmulOp
    | linalg.BatchReduceMatmulOp
    | linalg.MatvecOp
    | linalg.BatchMatvecOp
    | linalg.VecmatOp
    | linalg.DotOp
    | linalg.GenericOp
)
CALLED = "a call to OpenBLAS"


def rewrite_contraction(op: Contraction, module: ModuleOp) -> str | None:
    """Replace `op` by its loops (None), or by a call to BLAS (what was done, starting
    CALLED); why it stays, when it does."""
    why = _refusal(op)
    if why is not None:
        return why
    block = Block()
    plain = all(isinstance(cast(MemRefType, v.type).layout, NoneAttr) for v in op.operands)
    # BLAS takes a leading dimension per matrix but no offset: views keep the loops.
    named = isinstance(op, _NAMED) and _sums_products(op)
    if plain and named and allows_any_order(op.body.block.ops):
        what = f"{CALLED} {_call_where_allowed(op, module, block)}"
    else:
        _loops(op, block)
        what = None
    replace_by(op, block)
    return what


def _call_where_allowed(op: Contraction, module: ModuleOp, block: Block) -> str:
    """At the end of `block`: the BLAS call, or without `nsz`, the call where no output
    element is -0 (its +0 for an exact -0 would not be allowed) and the loops where one
    is; what is called and when."""
    if not keeps_signed_zeros(op.body.block.ops):
        return f"{_call(op, module, block)} (reassoc allows its order of sums)"
    out = op.outputs[0]
    zero = const_index(block, 0)
    box = [(zero, const_index(block, d)) for d in cast(MemRefType, out.type).get_shape()]
    found = holds_negative_zero(block, out, box)
    call, loops = Block(), Block()
    name = _call(op, module, call)
    _loops(op, loops)
    _exact(loops)
    put(call, scf.YieldOp())
    put(loops, scf.YieldOp())
    put(block, scf.IfOp(found, [], Region(loops), Region(call)))
    return (
        f"{name} (reassoc allows its order of sums) where no element of the output is -0, "
        "else the exact loops (nsz would allow the call's +0)"
    )


def _exact(loops: Block) -> None:
    """The fallback `loops` without their adds' and multiplies' flags, so that the kernels
    take them as `--fast-math=none` gives them: with `reassoc` kept they were taken for a
    product again, behind a second scan for -0 that finds it and a BLAS call that never
    runs. The loops give the interpreter's bits either way."""
    for op in loops.walk():
        if isinstance(op, arith.AddfOp | arith.MulfOp):
            op.properties["fastmath"] = arith.FastMathFlagsAttr("none")


def _sums_products(op: Contraction) -> bool:
    """Whether `op`'s body is `out + in0 * in1`, as its name says and BLAS computes. A
    named op written in generic form may carry another body (`out - in0 * in1`), which
    the interpreter and the loops follow."""
    block = op.body.block
    ops = list(block.ops)
    if len(block.args) != 3 or len(ops) != 3:
        return False
    (x, y, acc), (mul, add, end) = block.args, ops
    return (
        isinstance(mul, arith.MulfOp)
        and {mul.lhs, mul.rhs} == {x, y}
        and isinstance(add, arith.AddfOp)
        and {add.lhs, add.rhs} == {acc, mul.result}
        and isinstance(end, linalg.YieldOp)
        and list(end.operands) == [add.result]
    )


def _refusal(op: Contraction) -> str | None:
    name = op.name
    operands = [*op.inputs, *op.outputs]
    kinds = [v.type for v in operands]
    if op.res or not all(isinstance(t, MemRefType) for t in kinds):
        return f"{name} on tensors"
    memrefs = cast(list[MemRefType], kinds)
    element = memrefs[0].element_type
    row_major = all(rows_contiguous(t) for t in memrefs)
    if any(t.element_type != element for t in memrefs) or not row_major:
        return f"{name} with mixed element types or a layout other than row-major"
    if not isinstance(element, AnyFloat) or element.bitwidth not in (32, 64):
        return f"{name} on {element}, not f32 or f64"
    if any(d < 0 for t in memrefs for d in t.get_shape()):
        return f"{name} with dynamic sizes"
    if isinstance(op, linalg.GenericOp):
        why = _generic_refusal(op)
        if why is not None:
            return f"{name} {why}"
    elif [m.data for m in op.get_indexing_maps()] != _default_maps(op):
        return f"{name} with other indexing maps"
    if not injective(op.outputs[0].type):
        return f"{name} whose output is a view whose elements may overlap"
    if may_alias(op.outputs[0], memory_of(op.inputs)):
        return f"{name} whose output may share memory with an input"
    return None


def _generic_refusal(op: linalg.GenericOp) -> str | None:
    """Why the loops `_loops` makes would not be `op`'s, or None: one output, reduction
    dimensions (an element's updates run in the lexicographic order of the reductions,
    as the generic lists them, wherever they sit among the parallel ones, as the
    interpreter runs them: `_order` keeps that order), maps that only pick dimensions
    (every one of them from some operand's shape), the output's none of the reductions,
    and a body that does not ask for its indices."""
    maps = [m.data for m in op.get_indexing_maps()]
    kinds = [str(kind.data.value) for kind in op.get_iterator_types()]
    if "reduction" not in kinds:
        return "with no reduction dimension (the optimizer rewrites contractions)"
    if len(op.outputs) != 1:
        return "without exactly one output"
    picked = {
        r.position for m in maps for r in m.results if isinstance(r, AffineDimExpr)
    }  # fmt: skip
    if any(not isinstance(r, AffineDimExpr) for m in maps for r in m.results) or len(picked) != len(
        kinds
    ):
        return "whose maps do more than pick each dimension"
    if any(kinds[cast(AffineDimExpr, r).position] == "reduction" for r in maps[-1].results):
        return "whose output is indexed by a reduction dimension"
    if any(isinstance(inner, linalg.IndexOp) for inner in op.body.walk()):
        return "whose body takes its indices (linalg.index)"
    return None


_MATMUL = [
    AffineMap.from_callable(lambda i, j, k: (i, k)),
    AffineMap.from_callable(lambda i, j, k: (k, j)),
    AffineMap.from_callable(lambda i, j, k: (i, j)),
]


def _default_maps(op: Contraction) -> list[AffineMap]:
    if isinstance(op, linalg.MatmulOp):
        return _MATMUL
    assert not isinstance(op, linalg.GenericOp)  # its maps are its own
    return list(type(op).MAPS)


def _loops(op: Contraction, block: Block) -> None:
    """At the end of `block`: the loops `op` means, in the order `_order` picks, the
    output element carried along the reduction from its load to its store where the
    reduction is innermost, else loaded, updated and stored in the innermost loop (each
    element's sum still runs up the reduction, and the nest is one a user writes)."""
    maps = [m.data for m in op.get_indexing_maps()]
    parallel = [kind.data.value == "parallel" for kind in op.get_iterator_types()]
    sizes = _dim_sizes(op, maps)
    order, carried = _order(op, maps, parallel)
    if carried:
        _carried_loops(op, block, maps, sizes, order)
    else:
        _loops_in_order(op, block, maps, sizes, order)


def _order(
    op: Contraction, maps: Sequence[AffineMap], parallel: Sequence[bool]
) -> tuple[list[int], bool]:
    """The dimensions of `op`'s loops, outermost first, and whether the reduction is
    innermost, carrying the element. A contraction (a named op as its generic form: its
    maps and body) whose output picks every parallel dimension once and whose body only
    computes: the output's dimensions in its order (rows outer, its last index the
    columns) and the reduction just before the columns (i-k-j) where every input read
    along the columns is read along its last index, else innermost. Every element is
    written at one point of the parallel dimensions and no input shares its memory
    (`_refusal`), so its updates run up the reduction in any such order, as the
    interpreter runs them. Of several reductions (batch_reduce_matmul's batch and k), all
    but the last run outermost, in their order: an element's updates still run up them
    as the interpreter's order of dimensions does (the batch outer, k inner). Otherwise
    the generic's order, the element carried only where the reduction is last."""
    dims = list(range(len(parallel)))
    reductions = [d for d in dims if not parallel[d]]
    outer, reduction = reductions[:-1], reductions[-1:]
    across = [d for d in dims if parallel[d]]
    out = [cast(AffineDimExpr, r).position for r in maps[-1].results]
    body = [inner for inner in op.body.block.ops if not isinstance(inner, linalg.YieldOp)]
    if sorted(out) != across or not all(is_pure(inner) for inner in body):
        return dims, not parallel[-1]
    if not out:
        return [*outer, *reduction], True
    columns = out[-1]
    along = [[cast(AffineDimExpr, r).position for r in m.results] for m in maps[:-1]]
    if all(picks[-1] == columns for picks in along if columns in picks):
        return [*outer, *out[:-1], *reduction, columns], False
    return [*outer, *out, *reduction], True


def _carried_loops(
    op: Contraction,
    block: Block,
    maps: Sequence[AffineMap],
    sizes: dict[int, int],
    order: Sequence[int],
) -> None:
    """At the end of `block`: a loop per dimension of `order` (the reduction last), the
    innermost carrying the output element from its load to its store."""
    index = IndexType()
    zero = const_index(block, 0)
    one = const_index(block, 1)
    ivs: dict[int, SSAValue] = {}
    out = op.outputs[0]
    element = cast(MemRefType, out.type).element_type
    *across, reduction = order
    here = block
    loops: list[tuple[Block, scf.ForOp]] = []
    for dim in across:
        body = Block(arg_types=[index])
        ivs[dim] = body.args[0]
        loops.append((here, scf.ForOp(zero, const_index(block, sizes[dim]), one, [], Region(body))))
        here = body
    start = put(here, memref.LoadOp.get(out, _at(maps[-1], ivs))).res
    red = Block(arg_types=[index, element])
    ivs[reduction] = red.args[0]
    loads = [put(red, memref.LoadOp.get(v, _at(m, ivs))).res for v, m in zip(op.inputs, maps)]
    mapper: dict[SSAValue, SSAValue] = dict(zip(op.body.block.args, (*loads, red.args[1])))
    for inner in op.body.block.ops:
        if isinstance(inner, linalg.YieldOp):
            put(red, scf.YieldOp(mapper.get(inner.operands[0], inner.operands[0])))
        else:
            put(red, inner.clone(value_mapper=mapper))
    depth = const_index(block, sizes[reduction])
    total = put(here, scf.ForOp(zero, depth, one, [start], Region(red)))
    put(here, memref.StoreOp.get(total.res[0], out, _at(maps[-1], ivs)))
    for parent, loop in reversed(loops):
        put(loop.body.block, scf.YieldOp())
        put(parent, loop)


def _loops_in_order(
    op: Contraction,
    block: Block,
    maps: Sequence[AffineMap],
    sizes: dict[int, int],
    order: Sequence[int],
) -> None:
    """At the end of `block`: a loop per dimension of `order`, the innermost loading the
    output element, adding to it and storing it."""
    zero = const_index(block, 0)
    one = const_index(block, 1)
    ivs: dict[int, SSAValue] = {}
    here = block
    loops: list[tuple[Block, scf.ForOp]] = []
    for dim in order:
        body = Block(arg_types=[IndexType()])
        ivs[dim] = body.args[0]
        loops.append((here, scf.ForOp(zero, const_index(block, sizes[dim]), one, [], Region(body))))
        here = body
    out = op.outputs[0]
    old = put(here, memref.LoadOp.get(out, _at(maps[-1], ivs))).res
    loads = [put(here, memref.LoadOp.get(v, _at(m, ivs))).res for v, m in zip(op.inputs, maps)]
    mapper: dict[SSAValue, SSAValue] = dict(zip(op.body.block.args, (*loads, old)))
    for inner in op.body.block.ops:
        if isinstance(inner, linalg.YieldOp):
            value = mapper.get(inner.operands[0], inner.operands[0])
            put(here, memref.StoreOp.get(value, out, _at(maps[-1], ivs)))
        else:
            put(here, inner.clone(value_mapper=mapper))
    for parent, loop in reversed(loops):
        put(loop.body.block, scf.YieldOp())
        put(parent, loop)


def _dim_sizes(op: Contraction, maps: Sequence[AffineMap]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for value, amap in zip([*op.inputs, *op.outputs], maps):
        shape = cast(MemRefType, value.type).get_shape()
        for extent, result in zip(shape, amap.results):
            sizes[cast(AffineDimExpr, result).position] = extent
    return sizes


def _at(amap: AffineMap, ivs: dict[int, SSAValue]) -> list[SSAValue]:
    return [ivs[cast(AffineDimExpr, result).position] for result in amap.results]


_BATCHED = (linalg.BatchMatmulOp, linalg.BatchReduceMatmulOp, linalg.BatchMatvecOp)


def _call(op: Contraction, module: ModuleOp, block: Block) -> str:
    """The BLAS calls that compute `op`, at the end of `block` (one per matrix of a
    batch, in the batch's order); their routine's name."""
    a, b = op.inputs
    if isinstance(op, linalg.DotOp):
        emit_dot(block, module, (a, b), op.outputs[0], common_flags(op.body.block.ops))
        return "dot"
    if not isinstance(op, _BATCHED):
        return _call_one(op, module, block, None)
    body = Block(arg_types=[IndexType()])
    name = _call_one(op, module, body, body.args[0])
    put(body, scf.YieldOp())
    batches = const_index(block, cast(MemRefType, a.type).get_shape()[0])
    zero, one = const_index(block, 0), const_index(block, 1)
    put(block, scf.ForOp(zero, batches, one, [], Region(body)))
    return f"{name} per batch"


def _call_one(op: Contraction, module: ModuleOp, block: Block, batch: SSAValue | None) -> str:
    """The BLAS call for `op`'s product, or for its matrix `batch` of a batch (which
    batch_reduce_matmul adds into its one output), at the end of `block`; its name."""
    a, b = op.inputs
    out = op.outputs[0]
    if isinstance(op, linalg.MatvecOp | linalg.VecmatOp | linalg.BatchMatvecOp):
        matrix, vector = (b, a) if isinstance(op, linalg.VecmatOp) else (a, b)
        emit_gemv(block, module, matrix, vector, out, isinstance(op, linalg.VecmatOp), batch)
        return "gemv"
    element = cast(AnyFloat, cast(MemRefType, out.type).element_type)
    one = put(block, arith.ConstantOp(FloatAttr(1.0, element))).result
    zero = const_index(block, 0)
    m, k = cast(MemRefType, a.type).get_shape()[-2:]
    n = cast(MemRefType, b.type).get_shape()[-1]
    sizes = (const_index(block, m), const_index(block, n), const_index(block, k))
    summed = isinstance(op, linalg.BatchReduceMatmulOp)
    ca, cb = (Corner(v, zero, zero, batch) for v in (a, b))
    cc = Corner(out, zero, zero, None if summed else batch)
    emit_gemm(block, module, ca, cb, cc, sizes, one)
    return "gemm"
