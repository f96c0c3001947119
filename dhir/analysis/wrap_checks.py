"""Which loops of bounds known at run time only need a check, at their entry, that the
64-bit index arithmetic the lifter took as exact stays in 64 bits; and the one rule by
which both backends check it.

The lifter (dhir.analysis.lift) takes 64-bit arithmetic of a loop variable with no
constant range as exact: `3 * i` is "multiples of 3" to the access regions, dhir-split and
the independence proofs of parallel loops. From i = 6148914691236517206 it wraps to 2, 5,
8, and a rank missed a message (exit 0). Proving the range before the run took those
proofs from every loop of run-time bounds, so the range is checked when the loop starts,
where its bounds are known: `WrapCheck` names the loop, the expressions to check and the
loop's variables that range over its bounds; `verdict` is the check, in Python ints, that
the interpreter runs and that dhir-wrap-checks builds as IR for native code. An
scf.while that counts as an scf.for (dhir.analysis.counted_whiles) is such a loop, its
counter the variable: native code makes it that scf.for before it is checked, and the
interpreter, which runs it as written, ran `A[3 * k]` of it wrapped where native code
stopped.

An expression is checked at the innermost loop whose variable, of no constant range, it
holds (the variables of loops around that one are fixed there), when every other leaf is
a number there: a loop variable of constant range (its range) or a value from outside the
loop (its value). One that holds no such variable (`3 * n + i`, `n` an argument, `i` of a
loop of constant bounds: the independence proof of a parallel loop takes it as exact) is
checked at the outermost loop around it, within its `dhir.task`, whose body makes none of
its leaves. One that only a branch uses (an `scf.if`, `affine.if` or `scf.index_switch`
case inside that loop) is checked where the branch starts, each time it runs. Expressions
in no such loop (a function's argument used directly, a value made in the innermost
loop), and a linalg op's names, are not checked: no analysis takes them as exact
(docs/semantics.md). A size `memref.dim` measures at run time is a leaf of its own, as
the independence proofs name it (`3 * d + 1` is exact there); measured in a loop, of a
memref from outside it at a constant dimension, it is a number at the loop's entry too.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.traits import IsTerminator

from dhir.analysis.counted_whiles import counted_bounds, counted_step
from dhir.analysis.lift import (
    Affine,
    Atom,
    Div,
    Extreme,
    Interval,
    Leaf,
    Lifted,
    Lifter,
    Mod,
    constant,
    leaf,
    leaves_of,
)
from dhir.dialects import affine, arith, index, memref, scf
from dhir.dialects import affine as dhir_affine
from dhir.dialects.access import is_pure
from dhir.dialects.affine import parallel_bounds
from dhir.dialects.arith import INDEX_WIDTH, scalar_int_width
from dhir.dialects.dhir import TaskOp, defined_inside
from dhir.dialects.gpu import in_device_code
from dhir.ir.walk import find_ops

# The loops whose entry is checked: those whose variables the lifter ranges over, and
# the scf.while loops that count as scf.for loops do (`is_loop`).
LOOPS = (scf.ForOp, scf.ParallelOp, affine.ForOp, affine.ParallelOp)

HALF_64 = 1 << (INDEX_WIDTH - 1)
# A term (coefficient times the range of its atom) or a partial sum past these is taken as
# leaving 64 bits: native code checks in 128 bits, and these keep its sums from wrapping.
TERM_LIMIT = 1 << 120
SUM_LIMIT = 1 << 125

# 64-bit results of the arithmetic the lifter takes as not wrapping.
_ARITHMETIC = (
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    index.AddOp,
    index.SubOp,
    index.MulOp,
    affine.ApplyOp,
    affine.MinOp,
    dhir_affine.MaxOp,
)
# The ops `_lifted` finds anything in: the only ones `wrap_checks` visits.
_LIFTED = (*_ARITHMETIC, affine.ForOp, affine.LoadOp, affine.StoreOp)


@dataclass(frozen=True)
class WrapCheck:
    """At the entry of `loop`: each of `exprs`, its `variables` (of no constant range)
    over the values the loop gives them, must stay in signed 64 bits."""

    loop: Operation
    variables: tuple[BlockArgument, ...]
    exprs: tuple[Affine, ...]
    # Set where `loop` is an `scf.if`, `affine.if` or `scf.index_switch` inside the loop
    # that would check the expressions: checked instead each time this region of it
    # runs, at the values its leaves have there, so that a branch never taken stops
    # nothing.
    region: Region | None = None


def wrap_lifter() -> Lifter:
    """The lifter `wrap_checks` finds the checks with (both backends): one that also
    reads an integer division or remainder of two numbers as the number native code
    computes. The optimizer's block ends (`(16 max 0) divui 64 * 64`) are then numbers,
    and a loop up to one has the constant range of a loop written with that number:
    nothing of it to check. Only numbers: a division of anything else stays unknown."""
    reader = _NumberDivisions()
    lifter = Lifter(reader)
    reader.lifter = lifter
    return lifter


class _NumberDivisions:
    """Reads `arith` divisions and remainders of 64-bit numbers (dhir.analysis.lift's
    Reader)."""

    lifter: Lifter | None = None

    def inputs(self, op: Operation) -> Sequence[SSAValue]:
        return op.operands if isinstance(op, _DIVIDING) else ()

    def read(self, value: OpResult) -> Lifted | None:
        op, lifter = value.op, self.lifter
        if not isinstance(op, _DIVIDING) or lifter is None:
            return None
        if scalar_int_width(value.type) != INDEX_WIDTH:
            return None
        left, right = (lifter.constant(v) for v in op.operands[:2])
        if left is None or right is None:
            return None
        found = native_division(type(op), left, right)
        return None if found is None else Lifted.at(constant(found))


def native_division(kind: type[Operation], left: int, right: int) -> int | None:
    """What the 64-bit division or remainder `kind` (one of _DIVIDING) gives for signed
    operands `left` and `right`, read signed, as the interpreter computes it; None where
    it has no defined result (a divisor of 0, the least number divided by -1)."""
    if issubclass(kind, _UNSIGNED):
        a, b = left % (2 * HALF_64), right % (2 * HALF_64)
        if b == 0:
            return None
        if issubclass(kind, arith.RemUIOp):
            found = a % b
        else:
            found = -(-a // b) if issubclass(kind, arith.CeilDivUIOp) else a // b
        return _signed(found)
    if right == 0 or (left == -HALF_64 and right == -1):
        return None
    truncated = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)
    if issubclass(kind, arith.DivSIOp):
        return truncated
    if issubclass(kind, arith.RemSIOp):
        return left - right * truncated
    return -(-left // right) if issubclass(kind, arith.CeilDivSIOp) else left // right


def _signed(bits: int) -> int:
    return (bits + HALF_64) % (2 * HALF_64) - HALF_64


_UNSIGNED = (arith.DivUIOp, arith.CeilDivUIOp, arith.RemUIOp)
_DIVIDING = (
    *_UNSIGNED,
    arith.DivSIOp,
    arith.RemSIOp,
    arith.FloorDivSIOp,
    arith.CeilDivSIOp,
)


def wrap_checks(root: Operation, lifter: Lifter | None = None) -> list[WrapCheck]:
    """The checks the host loops in `root` need, outermost loop first (`lifter`: one
    of `wrap_lifter`'s)."""
    lifter = wrap_lifter() if lifter is None else lifter
    _name_sizes(root, lifter)
    _name_invariants(root, lifter)
    found: dict[Operation | Region, dict[Affine, None]] = {}
    # Two walks of xDSL's over a lowered module's every op took most of the time here.
    for op in find_ops(root, _LIFTED):
        if _advances(op):
            continue
        for expr in _assumed(op, lifter):
            loop = _checking_loop(op, expr, lifter)
            if loop is not None:
                found.setdefault(_branch_of(op, loop) or loop, {})[expr] = None
    checks: list[WrapCheck] = []
    if not found:
        return checks
    for loop in find_ops(root, (*LOOPS, scf.WhileOp, *_CONDITIONS)):
        for region in (*loop.regions, loop):
            if region not in found:
                continue
            exprs = tuple(found[region])
            if isinstance(region, Region):
                checks.append(WrapCheck(loop, (), exprs, region))
            else:
                own = tuple(v for v in loop_variables(loop) if lifter.leaf_range(v) is None)
                checks.append(WrapCheck(loop, own, exprs))
    return checks


# The ops whose regions may not run where the loop around does: branches. A while
# loop's body is not one: it is checked as an scf.for's body is, at the loop around's
# entry whether it runs or not, since CodeDrop and dhir-optimize-bodies make a counted
# one that scf.for (dhir.transforms.counted_whiles) before native code is checked; a
# counted one is itself a loop (`is_loop`), checked at its entry as that scf.for is.
_CONDITIONS = (scf.IfOp, affine.IfOp, scf.IndexSwitchOp)


def _advances(op: Operation) -> bool:
    """Whether `op` adds the step to a counted while's counter: no arithmetic of the
    scf.for native code makes of the loop, which counts within its bounds."""
    loop = op.parent_op()
    if not isinstance(loop, scf.WhileOp) or not isinstance(op, arith.AddiOp):
        return False
    counted = counted_step(loop)
    return counted is not None and counted[1] is op


def _branch_of(op: Operation, loop: Operation) -> Region | None:
    """The branch (a region of one of _CONDITIONS between `loop` and `op`) whose start
    checks what `op` computes, each time it runs: the innermost one that holds every
    use of the value made (`%m = 3 * i` used only in an `scf.if` after it), else the
    innermost one that holds `op` (a loop's entry would stop a loop whose wrapping
    arithmetic only a branch never taken uses)."""
    own = _condition_inside(op, loop)
    if not isinstance(op, _ARITHMETIC):
        return own  # an access or a loop's bound: used where it is
    shared: list[Region] | None = None  # the branches holding every use so far
    for site in _use_sites(op):
        if shared is None:
            # The check at `op`'s own branch runs no more often than one around it.
            shared = [r for r in _conditions_around(site, loop) if own is None or _holds(own, r)]
        while shared and not _holds(shared[0], site):
            shared.pop(0)
        if not shared:
            return own
    return shared[0] if shared else own


def _conditions_around(op: Operation, loop: Operation) -> Iterator[Region]:
    """The regions of host _CONDITIONS between `loop` and `op` that hold `op`,
    innermost first."""
    inner = op
    while (parent := inner.parent_op()) is not None and parent is not loop:
        if isinstance(parent, _CONDITIONS) and not in_device_code(parent):
            region = inner.parent_region()
            assert region is not None
            if not _chains(region):
                yield region
        inner = parent


def _chains(region: Region) -> bool:
    """Whether `region` is an `scf.if`'s else holding only another `scf.if` (and its
    yield): not a branch of its own, but a way to the next one. dhir-mlir22-workarounds
    makes an `scf.index_switch` such a chain before native code is checked; a value that
    only cases 2 and 3 use is then checked at the loop's entry, as the interpreter,
    which runs the switch, checks it."""
    parent = region.parent_op()
    if not isinstance(parent, scf.IfOp) or region is not parent.false_region:
        return False
    ops = list(region.block.ops) if len(region.blocks) == 1 else []
    return len(ops) == 2 and isinstance(ops[0], scf.IfOp)


def _condition_inside(op: Operation, loop: Operation) -> Region | None:
    """The innermost region of a host _CONDITIONS op between `loop` and `op` that holds
    `op`: a check there runs each time `op` does."""
    return next(_conditions_around(op, loop), None)


def _use_sites(op: Operation) -> Iterator[Operation]:
    """The ops that use what `op` makes, or a value computed from it: its users but
    the pure ones (`%j = %m + 1`), whose results' users are followed instead; a
    terminator passes its operands on, so its parent op stands for it (an `scf.yield`
    out of an `scf.if` uses the value where the `scf.if` is)."""
    seen: set[Operation] = {op}
    todo = [op]
    while todo:
        for result in todo.pop().results:
            for use in result.uses:
                user = use.operation
                while user.has_trait(IsTerminator) and (parent := user.parent_op()) is not None:
                    user = parent
                if user in seen:
                    continue
                seen.add(user)
                if is_pure(user) and not user.regions:
                    todo.append(user)
                else:
                    yield user


def _holds(region: Region, op: Operation | Region) -> bool:
    """Whether `op` (or a region) lies in `region`."""
    inner: Operation | Region | None = op
    while inner is not None and inner is not region:
        inner = inner.parent_region() if isinstance(inner, Operation) else inner.parent_op()
    return inner is region


def _name_sizes(root: Operation, lifter: Lifter) -> None:
    """Lift each size `memref.dim` measures at run time as a leaf of its own: the
    independence proofs (dhir.analysis.overlaps) name it so and take `3 * d + 1` of it
    as exact, which wrapped natively (d = 6148914691236517205 gives 0) and let threads
    race, unchecked. Before any value made from one is lifted."""
    for op in find_ops(root, memref.DimOp):
        if lifter.value(op.result) is None:
            lifter.define(op.result, Lifted.at(leaf(op.result)))


def measured(key: SSAValue, lifter: Lifter) -> tuple[SSAValue, int] | None:
    """The memref and dimension whose size `key` is, when a `memref.dim` measures it
    at a constant dimension of a ranked memref: the same wherever it is measured."""
    op = key.owner
    if not isinstance(op, memref.DimOp) or not isinstance(op.source.type, MemRefType):
        return None
    dim = lifter.constant(op.index)
    if dim is None or not 0 <= dim < op.source.type.get_num_dims():
        return None
    return op.source, dim


def _made_inside(key: SSAValue, loop: Operation, lifter: Lifter) -> bool:
    """Whether `key` has no value at `loop`'s entry: made in its body, unless it is a
    size measured there of a memref made outside (`measured`)."""
    size = measured(key, lifter)
    return defined_inside(key if size is None else size[0], loop)


def _name_invariants(root: Operation, lifter: Lifter) -> None:
    """Lift each integer that a host parallel loop's body takes from outside it and the
    lifter does not follow (a loaded number) as a leaf of its own, as the independence
    proofs name it (dhir.analysis.overlaps): `3 * v + 1` of a loaded `v` is exact there.
    In program order, so that each is named before the values made from it are lifted."""
    taken: set[SSAValue] = set()
    for loop in find_ops(root, (scf.ParallelOp, affine.ParallelOp)):
        if not in_device_code(loop):
            for op in find_ops(loop, Operation):
                taken.update(
                    v
                    for v in op.operands
                    if scalar_int_width(v.type) is not None and not defined_inside(v, loop)
                )
    if not taken:
        return
    for op in find_ops(root, Operation):
        for value in op.results:
            if value in taken and lifter.value(value) is None:
                lifter.define(value, Lifted.at(leaf(value)))


def verdict(
    check: WrapCheck,
    spans: Mapping[BlockArgument, Interval],
    values: Mapping[SSAValue, int],
    lifter: Lifter,
) -> bool:
    """Whether every expression of `check` stays in 64 bits when its loop's variables
    range over `spans` (each its first and last value) and the other leaves not of
    constant range have `values`."""

    def leaf(key: SSAValue) -> Interval:
        if isinstance(key, BlockArgument) and key in spans:
            return spans[key]
        fixed = lifter.leaf_range(key)
        if fixed is not None:
            return fixed
        return values[key], values[key]

    return all(_fits(expr, leaf) for expr in check.exprs)


def leaves(check: WrapCheck, lifter: Lifter) -> list[SSAValue]:
    """The leaves of `check` whose values it needs at the loop's entry."""
    out: dict[SSAValue, None] = {}
    for expr in check.exprs:
        for key in leaves_of(expr):
            assert isinstance(key, SSAValue)  # wrap_checks keeps no named leaves
            if key not in check.variables and lifter.leaf_range(key) is None:
                out[key] = None
    return list(out)


def region_leaves(check: WrapCheck, lifter: Lifter) -> list[SSAValue]:
    """The leaves of a region's `check` whose values it takes where the region starts:
    all but the variables of loops in the region (of constant range)."""
    out: dict[SSAValue, None] = {}
    for expr in check.exprs:
        for key in leaves_of(expr):
            assert isinstance(key, SSAValue)  # wrap_checks keeps no named leaves
            if not _made_inside(key, check.loop, lifter):
                out[key] = None
    return list(out)


def terms_fit(low: int, high: int) -> bool:
    return -TERM_LIMIT <= low and high <= TERM_LIMIT


def sum_fits(low: int, high: int) -> bool:
    return -SUM_LIMIT <= low and high <= SUM_LIMIT


def in_64_bits(low: int, high: int) -> bool:
    return -HALF_64 <= low and high < HALF_64


def _fits(expr: Affine, leaf: Callable[[SSAValue], Interval]) -> bool:
    """The rule dhir-wrap-checks builds: `expr` and every sum it divides, takes the
    remainder, least or greatest of lie in 64 bits, each term within TERM_LIMIT and
    each partial sum within SUM_LIMIT."""
    ok = True

    def bounds(e: Affine) -> Interval:
        nonlocal ok
        low = high = e.constant
        for atom, k in e.terms:
            a, b = atom_bounds(atom)
            a, b = (k * a, k * b) if k >= 0 else (k * b, k * a)
            ok = ok and terms_fit(a, b)
            low, high = low + a, high + b
            ok = ok and sum_fits(low, high)
        return low, high

    def checked(e: Affine) -> Interval:
        nonlocal ok
        low, high = bounds(e)
        ok = ok and in_64_bits(low, high)
        return low, high

    def atom_bounds(atom: Atom) -> Interval:
        if isinstance(atom, Leaf):
            assert not isinstance(atom.key, str)
            return leaf(atom.key)
        if isinstance(atom, Mod):
            checked(atom.arg)
            return 0, atom.divisor - 1
        if isinstance(atom, Div):
            low, high = checked(atom.arg)
            return _divide(low, atom.divisor, atom.ceil), _divide(high, atom.divisor, atom.ceil)
        found = [checked(arg) for arg in atom.args]
        pick = max if atom.greatest else min
        return pick(f[0] for f in found), pick(f[1] for f in found)

    checked(expr)
    return ok


class _Unbounded(Exception):
    """A leaf with no bounds before the run."""


def _proven(expr: Affine, lifter: Lifter) -> bool:
    """Whether `expr` passes the rule whatever the run gives: each loop variable of no
    constant range within what its bounds' ranges allow (`i + 3` of a loop up to
    `min(jj + 4, 200)` for jj of constant range: at most 202)."""

    def leaf(key: SSAValue) -> Interval:
        found = lifter.leaf_range(key) or _span(key, lifter) or _type_range(key)
        if found is None:
            raise _Unbounded
        return found

    if len(expr.terms) == 1 and isinstance(expr.terms[0][0], Leaf):
        if expr.terms[0][1] == 1 and expr.constant == 0:
            return True  # the value itself
    try:
        return _fits(expr, leaf)
    except _Unbounded:
        return False


def _span(key: SSAValue, lifter: Lifter) -> Interval | None:
    """The values a loop's variable may take from the ranges of its bounds (its lower
    bound's least, its upper bound's greatest less 1); None where one has none."""
    loop = _loop_of(key)
    if loop is None:
        return None
    assert isinstance(key, BlockArgument)
    dim = loop_variables(loop).index(key)
    if isinstance(loop, affine.ForOp):
        lows = lifter.map_each(loop.lowerBoundMap.data, list(loop.lowerBoundOperands))
        highs = lifter.map_each(loop.upperBoundMap.data, list(loop.upperBoundOperands))
    elif isinstance(loop, affine.ParallelOp):
        (low_map, low_args), (high_map, high_args), _ = parallel_bounds(loop, dim)
        lows, highs = lifter.map_each(low_map, low_args), lifter.map_each(high_map, high_args)
    else:
        bounds = (loop.lb, loop.ub) if isinstance(loop, scf.ForOp) else None
        if isinstance(loop, scf.ParallelOp):
            bounds = (loop.lowerBound[dim], loop.upperBound[dim])
        if isinstance(loop, scf.WhileOp) and (counted := counted_bounds(loop)) is not None:
            bounds = (loop.arguments[0], counted[0])
        assert bounds is not None
        lows, highs = [lifter.value(bounds[0])], [lifter.value(bounds[1])]
    firsts = [_extreme(low.low, lifter, greatest=False) for low in lows if low is not None]
    lasts = [_extreme(high.high, lifter, greatest=True) for high in highs if high is not None]
    known_firsts = [first for first in firsts if first is not None]
    known_lasts = [last - 1 for last in lasts if last is not None]
    if not known_firsts or not known_lasts:
        return None
    return max(known_firsts), min(known_lasts)


def _type_range(key: SSAValue) -> Interval | None:
    """Every value a narrower integer may hold, read signed as the lifter reads it."""
    width = scalar_int_width(key.type)
    if width is None or width >= INDEX_WIDTH:
        return None
    half = 1 << (width - 1)
    return -half, half - 1


def _extreme(expr: Affine, lifter: Lifter, greatest: bool) -> int | None:
    """The greatest (or least) value `expr` may take: of a least of several values
    (`min(%n, 8)`), the least of those known (8)."""
    found = lifter.interval(expr)
    if found is not None:
        return found[1] if greatest else found[0]
    if expr.constant != 0 or len(expr.terms) != 1 or expr.terms[0][1] != 1:
        return None
    atom = expr.terms[0][0]
    if not isinstance(atom, Extreme) or atom.greatest == greatest:
        return None
    known = [v for v in (_extreme(arg, lifter, greatest) for arg in atom.args) if v is not None]
    if not known:
        return None
    return min(known) if greatest else max(known)


def _divide(value: int, divisor: int, ceil: bool) -> int:
    """As native code divides: the 64 bits of `value` (exact when it fits)."""
    bits = (value + HALF_64) % (2 * HALF_64) - HALF_64
    return -(-bits // divisor) if ceil else bits // divisor


def _assumed(op: Operation, lifter: Lifter) -> Iterator[Affine]:
    """The bounds of what `op` computes in 64 bits that the lifter kept by taking it
    not to wrap (no constant range proves it)."""
    for lifted in _lifted(op, lifter):
        for bound in {lifted.low: None, lifted.high: None}:
            if lifter.interval(bound) is None and not _proven(bound, lifter):
                yield bound


def _lifted(op: Operation, lifter: Lifter) -> Iterator[Lifted]:
    if isinstance(op, _ARITHMETIC):
        for result in op.results:
            lifted = lifter.value(result) if scalar_int_width(result.type) == INDEX_WIDTH else None
            if lifted is not None:
                yield lifted
    for amap, operands in _maps(op):
        yield from (r for r in lifter.map_each(amap, operands) if r is not None)


def _maps(op: Operation) -> list[tuple[AffineMap, list[SSAValue]]]:
    """The affine maps `op` applies inline (an access's subscripts, a loop's bounds)."""
    if isinstance(op, affine.ForOp):
        return [
            (op.lowerBoundMap.data, list(op.lowerBoundOperands)),
            (op.upperBoundMap.data, list(op.upperBoundOperands)),
        ]
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        return [(op.map.data, list(op.indices))]
    return []


def is_loop(op: Operation) -> bool:
    """Whether `op` is a loop whose entry checks: one of LOOPS, or an scf.while that
    counts as the scf.for native code makes it (dhir.analysis.counted_whiles), its
    counter the variable."""
    if isinstance(op, scf.WhileOp):
        return counted_bounds(op) is not None
    return isinstance(op, LOOPS)


def loop_variables(loop: Operation) -> list[BlockArgument]:
    """The variables of `loop` (`is_loop`), outermost dimension first."""
    if isinstance(loop, scf.ParallelOp):
        return list(loop.body.block.args[: len(loop.lowerBound)])
    if isinstance(loop, affine.ParallelOp):
        return list(loop.body.block.args[: len(loop.steps)])
    if isinstance(loop, scf.WhileOp):
        return [loop.after_region.block.args[0]]
    return [loop.regions[0].block.args[0]]


def _loop_of(key: SSAValue | str) -> Operation | None:
    """The loop `key` is a variable of (`is_loop`)."""
    if not isinstance(key, BlockArgument):
        return None
    loop = key.block.parent_op()
    if loop is not None and is_loop(loop) and key in loop_variables(loop):
        return loop
    return None


def _checking_loop(op: Operation, expr: Affine, lifter: Lifter) -> Operation | None:
    """The loop whose entry checks `expr` (computed at `op`): the outermost host loop
    around `op`, in its task, at whose entry each leaf of no constant range is a number
    or one of the loop's variables (the innermost loop whose variable of no constant
    range `expr` holds, where the other leaves are made outside it; for `3 * n + i`, `n`
    an argument and `i` of constant range, the outermost loop around). None where no
    loop is such
    (no analysis takes such an expression as exact there: docs/semantics.md)."""
    keys = set(leaves_of(expr))
    if any(isinstance(key, str) for key in keys):
        return None
    fixed = [k for k in keys if isinstance(k, SSAValue) and lifter.leaf_range(k) is None]
    found = None
    loop = op.parent_op()
    # Native code runs a task's body as a function of its own, whose loops check it: the
    # loops around the task are never its checking loops.
    while loop is not None and not isinstance(loop, TaskOp):
        if is_loop(loop):
            own = loop_variables(loop)
            if any(key not in own and _made_inside(key, loop, lifter) for key in fixed):
                break  # made in the loop: no number at its entry, nor at any outside it
            if not in_device_code(loop):
                found = loop
        loop = loop.parent_op()
    return found
