"""Conditions on a loop's counter made the loop's bounds, for dhir-optimize-bodies.

A user may write a triangle (syr2k's `for j in [0, i]`) as a square whose body runs
under a condition: `affine.for %j = 0 to %n { affine.if (%i - %j >= 0) {...} }`. Where
the `affine.if` is the whole body of a loop of step 1, has no results, and each of its
constraints is linear in the loop's counter with the other operands defined outside the
loop, each constraint becomes a bound of the loop (`j <= i`: the upper bound
`min(n, i + 1)`; `2 j <= i`: `i floordiv 2 + 1`; `3 j >= i`: `i ceildiv 3`), and the
condition's body becomes the loop's. The counters for which such a condition holds are
one run of the loop's (every constraint bounds the counter on one side), so where it
has an else branch, the loop is cut in up to three at the run's ends: the else body
before it, the condition's body in it, the else body after it (a piece with an empty
body is dropped: `if (j > i) {} else {...}` is the triangle `j <= i`). That takes at
most one bound on each side from the condition, and a loop that is not the nest's
outermost (the nest stays one op). The same iterations run, in the same order, so the
result is the program's bit for bit. A bound that another one always implies
(`i + 1 <= n` for every `i` of a loop `i in [0, n)`) is dropped, so that the loop takes
the triangle's form the optimizer reads (a bound `i + 1`, no min).
"""

from collections.abc import Sequence

from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Block, BlockArgument, Region, SSAValue
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

from dhir.dialects import affine
from dhir.dialects.dhir import defined_inside

# A linear form: a coefficient per value, the constant under None.
Linear = dict[SSAValue | None, int]
# A bound of a loop: its expression over the values' list, and its linear form if it has one.
_Bound = tuple[AffineExpr, Linear | None]
_Nest = affine.ForOp | affine.ParallelOp
_PROOF_STEPS = 8  # counters replaced before a bound is taken as not implied


# A bound the condition adds: whether an upper one, its expression over the values'
# list's positions (filled in later), its linear form where it has one (no division).
_Added = tuple[bool, Linear, int]  # (is_upper, form over the other values, divisor)


def fold_conditions(nest: _Nest) -> _Nest:
    """Make each loop in `nest` whose whole body is a condition on its counter (module
    docstring) run only the iterations the condition holds for, and the else branch's
    where it has one; the nest (a new op where `nest` itself was such a loop)."""
    # Inner loops first: a loop cut in pieces clones the loops it holds.
    loops = [op for op in nest.walk() if isinstance(op, affine.ForOp)]
    for loop in reversed(loops):
        pieces = _fold_all(loop, outermost=loop is nest)
        nest = pieces[0] if loop is nest else nest
    return nest


def _fold_all(loop: affine.ForOp, outermost: bool) -> list[affine.ForOp]:
    """`loop` folded, and each piece it became folded again (a condition in an else
    branch), until none has a condition to take."""
    pieces = _fold(loop, outermost)
    if pieces is None:
        return [loop]
    return [done for piece in pieces for done in _fold_all(piece, outermost)]


def _fold(loop: affine.ForOp, outermost: bool) -> list[affine.ForOp] | None:
    """The loops `loop` became with its condition as bounds, or None where it has none
    to take."""
    condition = _only_condition(loop)
    if condition is None:
        return None
    iv = loop.body.block.args[0]
    added = _constraint_bounds(condition, iv, loop)
    if added is None:
        return None
    values: list[SSAValue] = []
    lowers = _old_bounds(loop.lowerBoundMap.data, loop.lowerBoundOperands, values)
    uppers = _old_bounds(loop.upperBoundMap.data, loop.upperBoundOperands, values)
    starts = [_bound(add, values) for add in added if not add[0]]
    ends = [_bound(add, values) for add in added if add[0]]
    pieces = [(True, lowers + starts, uppers + ends)]
    if not _empty(condition.else_region):
        if len(starts) > 1 or len(ends) > 1:
            return None
        before = [(False, lowers, uppers + starts)] if starts else []
        after = [(False, lowers + starts + ends, uppers)] if ends else []
        pieces = before + pieces + after
    pieces = [piece for piece in pieces if not _empty(_branch(condition, piece[0]))]
    if outermost and len(pieces) != 1:
        return None
    made = [_piece(loop, then, low, up, values) for then, low, up in pieces]
    Rewriter.insert_op(made, InsertPoint.before(loop))
    Rewriter.erase_op(loop)
    return made


def _bound(add: _Added, values: list[SSAValue]) -> _Bound:
    """The bound `add` over `values`: a division has no linear form."""
    is_upper, form, divisor = add
    if divisor == 1:
        return _expr(form, values), form
    if is_upper:  # iv <= form / d
        return _expr(form, values) // divisor + 1, None
    return _expr(form, values).ceil_div(divisor), None


def _piece(
    loop: affine.ForOp,
    then: bool,
    lowers: list[_Bound],
    uppers: list[_Bound],
    values: list[SSAValue],
) -> affine.ForOp:
    """A copy of `loop` with these bounds, its body the condition's branch `then`."""
    region = loop.body.clone()
    condition = region.block.first_op
    assert isinstance(condition, affine.IfOp)
    _inline(condition, _branch(condition, then))
    lowers, uppers = _needed(lowers, upper=False), _needed(uppers, upper=True)
    new = affine.ForOp.from_region(
        values,
        values,
        [],
        [],
        AffineMapAttr(AffineMap(len(values), 0, tuple(expr for expr, _ in lowers))),
        AffineMapAttr(AffineMap(len(values), 0, tuple(expr for expr, _ in uppers))),
        region,
        1,
    )
    new.location = loop.location
    new.attributes.update(loop.attributes)
    return new


def _branch(condition: affine.IfOp, then: bool) -> Region:
    return condition.then_region if then else condition.else_region


def _empty(region: Region) -> bool:
    """Whether `region` does nothing (no block, or only its yield)."""
    return all(isinstance(op, affine.YieldOp) for op in region.walk())


def _only_condition(loop: affine.ForOp) -> affine.IfOp | None:
    """The affine.if that is `loop`'s whole body, when it can become its bounds."""
    ops = list(loop.body.block.ops)
    if loop.results or loop.step.value.data != 1 or len(ops) != 2:
        return None
    condition = ops[0]
    if not isinstance(condition, affine.IfOp) or condition.results:
        return None
    return condition


def _constraint_bounds(
    condition: affine.IfOp, iv: SSAValue, loop: affine.ForOp
) -> list[_Added] | None:
    """Each constraint of `condition` as a bound of `iv` (whether an upper one, the form
    `iv` is at least or at most once divided, the divisor), or None where one is not
    linear in `iv` with the rest fixed in `loop`."""
    cset = condition.condition.data
    bounds: list[_Added] = []
    for constraint in cset.constraints:
        form = _linear(constraint.lhs - constraint.rhs, condition.args, cset.num_dims)
        if form is None:
            return None
        signs = {
            AffineConstraintKind.ge: (1,),
            AffineConstraintKind.le: (-1,),
            AffineConstraintKind.eq: (1, -1),
        }[constraint.kind]
        for sign in signs:  # sign * form >= 0
            geq = _scaled(form, sign)
            coef = geq.pop(iv, 0)
            if coef == 0 or any(v is not None and defined_inside(v, loop) for v in geq):
                return None
            if coef > 0:  # coef * iv >= -rest
                bounds.append((False, _scaled(geq, -1), coef))
            else:  # -coef * iv <= rest; where -coef is 1: iv < rest + 1
                bounds.append((True, _plus(geq, {None: 1}) if coef == -1 else geq, -coef))
    return bounds


def _old_bounds(
    amap: AffineMap, operands: Sequence[SSAValue], values: list[SSAValue]
) -> list[_Bound]:
    """`amap`'s results over `values` (to which its operands are added)."""
    dims = [AffineExpr.dimension(_position(v, values)) for v in operands]
    return [
        (
            expr.replace_dims_and_symbols(dims[: amap.num_dims], dims[amap.num_dims :]),
            _linear(expr, operands, amap.num_dims),
        )
        for expr in amap.results
    ]


def _position(value: SSAValue, values: list[SSAValue]) -> int:
    for at, known in enumerate(values):
        if known is value:
            return at
    values.append(value)
    return len(values) - 1


def _expr(form: Linear, values: list[SSAValue]) -> AffineExpr:
    expr = AffineExpr.constant(form.get(None, 0))
    for value, coef in form.items():
        if value is not None and coef:
            expr = expr + AffineExpr.dimension(_position(value, values)) * coef
    return expr


def _needed(bounds: list[_Bound], upper: bool) -> list[_Bound]:
    """`bounds` less those another always implies (a larger upper or smaller lower one)."""
    kept = list(bounds)
    for bound in bounds:
        _, form = bound
        for other in kept:
            if other is bound or form is None or other[1] is None:
                continue
            gap = _plus(form, _scaled(other[1], -1))
            if _nonnegative(gap if upper else _scaled(gap, -1)):
                kept.remove(bound)
                break
    return kept


def _nonnegative(form: Linear, steps: int = _PROOF_STEPS) -> bool:
    """Whether `form` is >= 0 wherever it is evaluated: the counter of the innermost
    affine loop in it replaced by a bound that makes it least (any one of a min or max),
    until only a constant is left (otherwise not known)."""
    form = {v: c for v, c in form.items() if c}
    counters = [v for v in form if v is not None and _bounds_of(v, True) is not None]
    if not counters:
        return all(v is None for v in form) and form.get(None, 0) >= 0
    if steps == 0:
        return False
    counter = max(counters, key=_depth)
    coef = form.pop(counter)
    choices = _bounds_of(counter, upper=coef < 0) or []
    return any(_nonnegative(_plus(form, _scaled(least, coef)), steps - 1) for least in choices)


def _depth(value: SSAValue) -> int:
    owner = value.owner
    depth, op = 0, owner.parent_op() if isinstance(owner, Block) else owner
    while op is not None:
        depth, op = depth + 1, op.parent_op()
    return depth


def _bounds_of(value: SSAValue, upper: bool) -> list[Linear] | None:
    """Linear forms the affine loop counter `value` never passes (its lower bounds, or
    its upper bounds less one), or None where `value` is no such counter."""
    if not isinstance(value, BlockArgument):
        return None
    owner = value.block.parent_op()
    if isinstance(owner, affine.ForOp) and value.index == 0:
        amap = owner.upperBoundMap.data if upper else owner.lowerBoundMap.data
        operands = owner.upperBoundOperands if upper else owner.lowerBoundOperands
        results: Sequence[AffineExpr] = amap.results
    elif isinstance(owner, affine.ParallelOp):
        lower = owner.lowerBoundsMap.data
        split = lower.num_dims + lower.num_symbols
        amap = owner.upperBoundsMap.data if upper else lower
        operands = owner.map_operands[split:] if upper else owner.map_operands[:split]
        groups = owner.upperBoundsGroups if upper else owner.lowerBoundsGroups
        sizes = [int(n) for n in groups.get_values()]
        first = sum(sizes[: value.index])
        results = amap.results[first : first + sizes[value.index]]
    else:
        return None
    forms = [_linear(expr, operands, amap.num_dims) for expr in results]
    less: Linear = {None: -1} if upper else {}
    return [_plus(form, less) for form in forms if form is not None]


def _linear(expr: AffineExpr, operands: Sequence[SSAValue], dims: int) -> Linear | None:
    """`expr` over `operands` (the first `dims` of them its dimensions) as a linear form,
    or None (a division or remainder, or a product of two operands)."""
    if isinstance(expr, AffineConstantExpr):
        return {None: expr.value}
    if isinstance(expr, AffineDimExpr):
        return {operands[expr.position]: 1}
    if isinstance(expr, AffineSymExpr):
        return {operands[dims + expr.position]: 1}
    if not isinstance(expr, AffineBinaryOpExpr):
        return None
    lhs, rhs = _linear(expr.lhs, operands, dims), _linear(expr.rhs, operands, dims)
    if lhs is None or rhs is None:
        return None
    if expr.kind is AffineBinaryOpKind.Add:
        return _plus(lhs, rhs)
    if expr.kind is AffineBinaryOpKind.Mul:
        for form, factor in ((lhs, rhs), (rhs, lhs)):
            if all(v is None for v in factor):
                return _scaled(form, factor.get(None, 0))
    return None


def _plus(lhs: Linear, rhs: Linear) -> Linear:
    total = dict(lhs)
    for value, coef in rhs.items():
        total[value] = total.get(value, 0) + coef
    return total


def _scaled(form: Linear, factor: int) -> Linear:
    return {value: coef * factor for value, coef in form.items()}


def _inline(condition: affine.IfOp, branch: Region) -> None:
    """`branch` (of `condition`) in `condition`'s place, less its yield."""
    block = branch.block
    terminator = block.last_op
    assert isinstance(terminator, affine.YieldOp)
    Rewriter.erase_op(terminator)
    Rewriter.inline_block(block, InsertPoint.before(condition))
    Rewriter.erase_op(condition)
