"""Affine ops left without the affine scope that made their dimensions and symbols valid.

dhir counts a `dhir.task` as an affine scope, as MLIR counts a function
(dhir.dialects.affine): a value defined at the top of a task's body is a valid affine
symbol there (`%n = affine.load %a[0]`, then `affine.for %i = 0 to %n`, or
`affine.load %b[symbol(%n)]`). On two ranks or more, dhir-lower-to-mpi puts the body
under `scf.if rank == R`, where the same value is no longer at the top of a scope, and
mlir-opt-22 refuses the op ("operand cannot be used as a symbol").

Each op so left becomes what mlir-opt-22's --lower-affine makes of it, with its
semantics: `affine.for` an `scf.for` (from the max of its lower bounds to the min of its
upper ones), `affine.parallel` an `scf.parallel` whose reductions start from their
identities, `affine.if` an `scf.if` of `arith.cmpi`s, a load or store a `memref` or
`vector` one; bounds and subscripts are `affine.apply`/`affine.max`/`affine.min` of the
same expressions, which MLIR takes of any operands. The ops inside a loop made so lose
its counter as a dimension and are made over in turn. (`affine.apply`, `min` and
`max` take any operands but a valid dimension as a symbol, and no symbol becomes a
dimension only: they stay.)

--lower-affine lowers all of these anyway, so the machine code is the same as when the
body stays in a scope (on one rank). Moving the body into a function of its own (a
scope) instead would cost a call or, inlined, LLVM's time on a function per task, which
dhir-lower-to-mpi avoids (docs/performance.md).

`lower_nest` makes a whole affine loop nest so, for the passes that read loops in their
scf form (dhir-optimize-bodies, dhir-time-tiles).
"""

from collections.abc import Callable, Sequence
from functools import cache

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    DenseIntElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    i1,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintKind
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.dialects import affine, arith, memref, scf, vector
from dhir.dialects.affine import REDUCTION_COMBINERS, REDUCTION_IDENTITIES, valid_dim, valid_symbol
from dhir.ir.pass_failure import PassFailedAt

_Access = affine.LoadOp | affine.StoreOp | affine.VectorLoadOp | affine.VectorStoreOp
_CHECKED = (
    affine.LoadOp,
    affine.StoreOp,
    affine.VectorLoadOp,
    affine.VectorStoreOp,
    affine.ForOp,
    affine.IfOp,
    affine.ParallelOp,
    affine.PrefetchOp,
)


def lower_unscoped(ops: Sequence[Operation], scope: Region) -> None:
    """Make the affine ops in `ops` (at any depth) whose dimensions or symbols are not
    valid with `scope` as their affine scope into what --lower-affine makes of them.
    Values defined outside `scope` count as its arguments: a part function receives
    them so (dhir.transforms.outline)."""
    found = [nested for op in ops for nested in op.walk() if _checked(type(nested))]
    for op in found:  # outer ops first: a loop made scf.for is no dimension for the inner
        if not all(_valid(values, dims, scope) for values, dims in _map_operands(op)):
            _lower(op)


@cache
def _checked(kind: type[Operation]) -> bool:
    # By class, once: isinstance on IRDL classes is slow, and every op of every task asks.
    return issubclass(kind, _CHECKED)


def _map_operands(op: Operation) -> list[tuple[Sequence[SSAValue], int]]:
    """Each operand list of `op`'s maps or set, with how many of them are dimensions."""
    if isinstance(op, _Access):
        return [(op.indices, op.map.data.num_dims)]
    if isinstance(op, affine.ForOp):
        return [
            (op.lowerBoundOperands, op.lowerBoundMap.data.num_dims),
            (op.upperBoundOperands, op.upperBoundMap.data.num_dims),
        ]
    if isinstance(op, affine.IfOp):
        return [(op.args, op.condition.data.num_dims)]
    if isinstance(op, affine.PrefetchOp):
        return [(op.indices, op.map.data.num_dims)]
    assert isinstance(op, affine.ParallelOp)
    lower = op.lowerBoundsMap.data
    split = lower.num_dims + lower.num_symbols
    upper = op.map_operands[split:]
    return [(op.map_operands[:split], lower.num_dims), (upper, op.upperBoundsMap.data.num_dims)]


def _valid(values: Sequence[SSAValue], dims: int, scope: Region) -> bool:
    return all(
        valid_dim(v, scope) if k < dims else valid_symbol(v, scope) for k, v in enumerate(values)
    )


def _as_dims(amap: AffineMap) -> AffineMap:
    """`amap` with its symbols as dimensions after its own (the same operand order)."""
    dims = [AffineExpr.dimension(amap.num_dims + k) for k in range(amap.num_symbols)]
    results = tuple(e.replace_dims_and_symbols([], dims) for e in amap.results)
    return AffineMap(amap.num_dims + amap.num_symbols, 0, results)


def lower_access(op: _Access) -> Operation:
    """`op` as --lower-affine lowers it: a memref.load, memref.store, vector.load or
    vector.store (for an affine.load, store, vector_load or vector_store) whose subscripts
    affine.apply computes; the new op."""
    return _lower(op)


def _lower(op: Operation) -> Operation:
    made: list[Operation] = []
    if isinstance(op, _Access):
        new = _access(op, _results(op.map.data, op.indices, made))
    elif isinstance(op, affine.ForOp):
        new = _for(op, made)
    elif isinstance(op, affine.IfOp):
        new = _if(op, made)
    elif isinstance(op, affine.PrefetchOp):
        new = _prefetch(op, made)
    else:
        assert isinstance(op, affine.ParallelOp)
        new = _parallel(op, made)
    new.location = op.location
    # Marks such as dhir.in_order (run the iterations in order) hold for the new op too.
    new.attributes.update(op.attributes)
    Rewriter.insert_op(made, InsertPoint.before(op))
    Rewriter.replace_op(op, new, list(new.results))
    return new


def _results(
    amap: AffineMap, operands: Sequence[SSAValue], made: list[Operation]
) -> list[SSAValue]:
    """The value of each result of `amap` on `operands`: the operand itself where the
    result is one, a constant, else an affine.apply (new ops appended to `made`)."""
    values: list[SSAValue] = []
    flat = _as_dims(amap)
    for expr in flat.results:
        if isinstance(expr, AffineDimExpr):
            values.append(operands[expr.position])
            continue
        if isinstance(expr, AffineConstantExpr):
            values.append(_index(expr.value, made))
            continue
        apply = affine.ApplyOp(operands, AffineMapAttr(AffineMap(flat.num_dims, 0, (expr,))))
        made.append(apply)
        values.append(apply.result)
    return values


def _access(op: _Access, indices: list[SSAValue]) -> Operation:
    if isinstance(op, affine.LoadOp):
        return memref.LoadOp.get(op.memref, indices)
    if isinstance(op, affine.StoreOp):
        return memref.StoreOp.get(op.value, op.memref, indices)
    if isinstance(op, affine.VectorLoadOp):
        return vector.LoadOp(op.memref, indices, op.result.type)
    return vector.StoreOp(op.value, op.memref, indices)


def _bound(
    amap: AffineMap, operands: Sequence[SSAValue], upper: bool, made: list[Operation]
) -> SSAValue:
    """The max of `amap`'s results on `operands` (the min for an `upper` bound)."""
    if len(amap.results) == 1:
        return _results(amap, operands, made)[0]
    attr = AffineMapAttr(_as_dims(amap))
    pick = (
        affine.MinOp(operands, attr)
        if upper
        else affine.MaxOp.create(
            operands=list(operands), result_types=[IndexType()], properties={"map": attr}
        )
    )
    made.append(pick)
    return pick.results[0]


def _index(value: int, made: list[Operation]) -> SSAValue:
    constant = arith.ConstantOp.from_int_and_width(value, IndexType())
    made.append(constant)
    return constant.result


def _body(region: Region, end: Callable[[list[SSAValue]], Operation]) -> Region:
    """`region`, detached, its affine.yield replaced by `end` of the same values (added
    where the region has none)."""
    block = region.blocks[-1]
    last = block.last_op
    values = list(last.operands) if isinstance(last, affine.YieldOp) else []
    if isinstance(last, affine.YieldOp):
        block.erase_op(last)
    block.add_op(end(values))
    return region


def _yield(values: list[SSAValue]) -> Operation:
    return scf.YieldOp(*values)


def _prefetch(op: affine.PrefetchOp, made: list[Operation]) -> Operation:
    indices = _results(op.map.data, op.indices, made)
    hints = {name: op.properties[name] for name in ("isWrite", "localityHint", "isDataCache")}
    return memref.PrefetchOp.build(operands=[op.memref, indices], properties=hints)


def _for(op: affine.ForOp, made: list[Operation]) -> Operation:
    lower = _bound(op.lowerBoundMap.data, op.lowerBoundOperands, False, made)
    upper = _bound(op.upperBoundMap.data, op.upperBoundOperands, True, made)
    step = _index(op.step.value.data, made)
    body = _body(op.detach_region(op.body), _yield)
    return scf.ForOp(lower, upper, step, list(op.inits), body)


def _if(op: affine.IfOp, made: list[Operation]) -> Operation:
    condition = op.condition.data
    zero: SSAValue | None = None
    holds: SSAValue | None = None
    for constraint in condition.constraints:
        lhs, rhs = constraint.lhs, constraint.rhs
        expr = rhs - lhs if constraint.kind is AffineConstraintKind.le else lhs - rhs
        amap = AffineMap(condition.num_dims, condition.num_symbols, (expr,))
        (value,) = _results(amap, op.args, made)
        zero = zero if zero is not None else _index(0, made)
        eq = constraint.kind is AffineConstraintKind.eq
        compare = arith.CmpiOp(value, zero, "eq" if eq else "sge")
        made.append(compare)
        if holds is not None:
            made.append(both := arith.AndIOp(holds, compare.result))
            holds = both.result
        else:
            holds = compare.result
    if holds is None:
        made.append(true := arith.ConstantOp(IntegerAttr(1, i1)))
        holds = true.result
    then, other = op.then_region, op.else_region  # before detaching renumbers them
    then = _body(op.detach_region(then), _yield)
    other = op.detach_region(other)
    other = _body(other, _yield) if other.blocks else other
    return scf.IfOp(holds, list(op.result_types), then, other)


def _parallel(op: affine.ParallelOp, made: list[Operation]) -> Operation:
    lower_map, upper_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
    split = lower_map.num_dims + lower_map.num_symbols
    lowers = _grouped(lower_map, op.map_operands[:split], op.lowerBoundsGroups, False, made)
    uppers = _grouped(upper_map, op.map_operands[split:], op.upperBoundsGroups, True, made)
    steps = [_index(s.value.data, made) for s in op.steps]
    kinds, types = op.reduction_kinds(), list(op.result_types)
    inits = [_identity(op, kind, t, made) for kind, t in zip(kinds, types)]
    combiners = [_combiner(k, t) for k, t in zip(kinds, types)]
    body = _body(op.detach_region(op.body), lambda values: scf.ReduceOp(values, combiners))
    return scf.ParallelOp(lowers, uppers, steps, body, inits)


def _grouped(
    amap: AffineMap,
    operands: Sequence[SSAValue],
    groups: DenseIntElementsAttr,
    upper: bool,
    made: list[Operation],
) -> list[SSAValue]:
    """Each loop variable's bound: the max (min, for `upper`) of its group of results."""
    sizes = [int(g) for g in groups.get_values()]
    bounds: list[SSAValue] = []
    start = 0
    for size in sizes:
        part = AffineMap(amap.num_dims, amap.num_symbols, amap.results[start : start + size])
        bounds.append(_bound(part, operands, upper, made))
        start += size
    return bounds


def _identity(op: Operation, kind: str, type_: Attribute, made: list[Operation]) -> SSAValue:
    if kind not in REDUCTION_IDENTITIES:
        raise PassFailedAt(
            op,
            f'the reduction "{kind}" of this affine.parallel cannot be run (mlir-opt-22 '
            "cannot lower it)",
        )
    value = REDUCTION_IDENTITIES[kind]
    attr = (
        FloatAttr(float(value), type_)
        if isinstance(type_, AnyFloat)
        else IntegerAttr(int(value), type_)  # type: ignore[arg-type]
    )
    constant = arith.ConstantOp(attr)
    made.append(constant)
    return constant.result


def _combiner(kind: str, type_: Attribute) -> Region:
    """An scf.reduce region combining two values as reduction `kind` does."""
    block = Block(arg_types=[type_, type_])
    combine = REDUCTION_COMBINERS[kind].create(operands=list(block.args), result_types=[type_])
    block.add_ops([combine, scf.ReduceReturnOp(combine.results[0])])
    return Region(block)


# Ops dhir-time-tiles does not model in a row statement: it leaves an affine loop holding
# one as written (dhir-optimize-bodies makes such nests scf too: see `unlowerable`).
_KEPT = (affine.ParallelOp, affine.PrefetchOp)


def kept_in(loop: affine.ForOp) -> Operation | None:
    """The first op in `loop` that dhir-time-tiles does not model, or None."""
    return next((op for op in loop.walk() if isinstance(op, _KEPT)), None)


def unlowerable(root: Operation) -> affine.ParallelOp | None:
    """The first affine.parallel in `root` whose reductions --lower-affine cannot lower
    (no identity to start from), or None: `lower_nest` makes the rest scf."""
    for op in root.walk():
        if isinstance(op, affine.ParallelOp) and any(
            kind not in REDUCTION_IDENTITIES for kind in op.reduction_kinds()
        ):
            return op
    return None


def in_affine_loop(
    op: Operation, root: Operation, kinds: tuple[type[Operation], ...] = (affine.ForOp,)
) -> bool:
    """Whether an op of `kinds` (an affine loop) between `op` and `root` (an op holding
    it) holds `op`: the nests `lower_nest` takes are the affine loops of a body in none of
    its others."""
    parent = op.parent_op()
    while parent is not None and parent is not root:
        if isinstance(parent, kinds):
            return True
        parent = parent.parent_op()
    return False


def lower_nest(loop: affine.ForOp | affine.ParallelOp) -> Operation:
    """`loop` and every affine op in it as --lower-affine makes them (what the build does
    with them anyway, so the same semantics: an affine.parallel an scf.parallel, an
    affine.prefetch a memref.prefetch), with the sums and constant multiples that
    affine.apply computes as arith ops: the form dhir-optimize-bodies reads. `loop` holds
    nothing `unlowerable` names."""
    walked = list(loop.walk())
    before = set(walked)
    found = [op for op in walked if _checked(type(op))]
    made = [_lower(op) for op in found]  # outer ops first, as in lower_unscoped
    new = made[0]
    for apply in [op for op in new.walk() if isinstance(op, affine.ApplyOp)]:
        _expand_apply(apply)
    _hoist_constants([op for op in new.walk() if op not in before], new)
    _hoist_bounds([op for op in new.walk() if op not in before and _bound_only(op)], new)
    return new


def _bound_only(op: Operation) -> bool:
    """Whether `op` is the min or max of a tiled loop's bounds (`min(jj + 32, n)`), which
    only loop bounds take. Sums stay where the lowering put them, before their loop: the
    recognisers take them there (a triangle's `i + 1`)."""
    return isinstance(op, (affine.MinOp, affine.MaxOp)) and all(
        (isinstance(use.operation, scf.ForOp) and use.index in (0, 1))
        or isinstance(use.operation, scf.ParallelOp)
        for use in op.results[0].uses
    )


def _hoist_bounds(made: list[Operation], root: Operation) -> None:
    """Each op of `made` out of the loops (up to `root`'s) whose counters and values it
    does not take (pure, and unable to trap): a tiled loop's bounds then sit before the
    loops that they do not vary in, where the recognisers take them as fixed."""
    for op in made:  # outer first: what an op takes is hoisted before it
        loop = op.parent_op()
        while (
            loop is not None
            and isinstance(loop, (scf.ForOp, scf.ParallelOp))
            and (loop is root or _holds(root, loop))
            and not any(_holds(loop, v.owner) for v in op.operands)
        ):
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(loop))
            loop = op.parent_op()


def _holds(outer: Operation, inner: Operation | Block) -> bool:
    """Whether `inner` (an op, or the block of a block argument) is inside `outer`."""
    parent = inner.parent_op() if isinstance(inner, Operation) else inner.parent_op()
    while parent is not None and parent is not outer:
        parent = parent.parent_op()
    return parent is outer


def _hoist_constants(made: list[Operation], loop: Operation) -> None:
    """The index constants in `made` (the bounds, steps and offsets the lowering made
    inside `loop`) once each, before `loop`: where the recognisers look for bounds that do
    not vary with the loops."""
    kept: dict[int, arith.ConstantOp] = {}
    for op in made:
        if not isinstance(op, arith.ConstantOp) or not isinstance(op.result.type, IndexType):
            continue
        value = op.value
        assert isinstance(value, IntegerAttr)
        first = kept.get(value.value.data)
        if first is None:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(loop))
            kept[value.value.data] = op
        else:
            op.result.replace_all_uses_with(first.result)
            Rewriter.erase_op(op)


def _expand_apply(apply: affine.ApplyOp) -> None:
    """`apply` as arith ops where its expression only adds and multiplies (index
    arithmetic, exact: the same integers); one of divisions and remainders stays, for
    --lower-affine."""
    amap = apply.map.data
    made: list[Operation] = []
    value = _arith(amap.results[0], list(apply.mapOperands), amap.num_dims, made)
    if value is None:
        return
    Rewriter.insert_op(made, InsertPoint.before(apply))
    Rewriter.replace_op(apply, [], [value])


def _arith(
    expr: AffineExpr, operands: Sequence[SSAValue], dims: int, made: list[Operation]
) -> SSAValue | None:
    if isinstance(expr, AffineDimExpr):
        return operands[expr.position]
    if isinstance(expr, AffineSymExpr):
        return operands[dims + expr.position]
    if isinstance(expr, AffineConstantExpr):
        return _index(expr.value, made)
    if not isinstance(expr, AffineBinaryOpExpr) or expr.kind not in _ARITH:
        return None
    lhs = _arith(expr.lhs, operands, dims, made)
    rhs = _arith(expr.rhs, operands, dims, made)
    if lhs is None or rhs is None:
        return None
    op = _ARITH[expr.kind](lhs, rhs)
    made.append(op)
    return op.result


_ARITH = {AffineBinaryOpKind.Add: arith.AddiOp, AffineBinaryOpKind.Mul: arith.MuliOp}
