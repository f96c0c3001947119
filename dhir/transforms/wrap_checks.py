"""`dhir-wrap-checks`: before each host loop of bounds known at run time only whose
index arithmetic the analysis took as exact (dhir.analysis.wrap_checks), a check that
the loop's bounds keep it in 64 bits, which stops the rank naming the loop when they do
not, as the interpreter does; likewise before the outermost loop around an expression of
values known at run time only that holds no such loop's variable (`3 * n + 3 * i + 1`).

The access regions, dhir-split and the independence proofs of parallel loops take `3 * i`
of a loop from %lo to %hi as the multiples of 3; from lo = 6148914691236517206 it wraps to
2, 5, 8, and rank 1 read A[2] before rank 0's message with it came (exit 0). Where the
loop runs, each expression's least and greatest values over the loop's range (its
variables from their first to their last value, each other leaf its value there) are
computed in 128 bits, as dhir.analysis.wrap_checks.verdict computes them, and compared with
the 64-bit range; if one leaves it, `dhir_rt_index_wraps(line, column)` stops the run.
Once per entry into the loop; loops whose variables have constant ranges need none. An
expression in an `scf.if` or `affine.if` inside the loop (or made before it and used
only there) is checked instead at the start of its region, each time it runs, at its
leaves' values there
(`dhir_rt_branch_index_wraps`): a branch never taken stops nothing.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp, i64
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass

from dhir.analysis.counted_whiles import counted_bounds
from dhir.analysis.lift import Affine, Atom, Div, Leaf, Lifter, Mod
from dhir.analysis.wrap_checks import (
    HALF_64,
    LOOPS,
    SUM_LIMIT,
    TERM_LIMIT,
    WrapCheck,
    loop_variables,
    measured,
    region_leaves,
    wrap_checks,
    wrap_lifter,
)
from dhir.dialects import affine, arith, func, memref, scf
from dhir.dialects.affine import parallel_bounds
from dhir.ir.diagnostics import loc_of
from dhir.transforms.building import affine_bound, declare, insert_before, last_value, put

INDEX_WRAPS = "dhir_rt_index_wraps"
BRANCH_WRAPS = "dhir_rt_branch_index_wraps"

_I128 = IntegerType(128)


@dataclass(frozen=True)
class WrapChecksPass(ModulePass):
    """Host loops whose run-time values take exact index arithmetic past 64 bits stop."""

    name = "dhir-wrap-checks"
    needs: ClassVar[tuple[type[Operation], ...]] = (*LOOPS, scf.WhileOp)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lifter = wrap_lifter()
        checks = wrap_checks(op, lifter)
        for check in checks:
            if check.region is None:
                _guard(check, lifter)
            else:
                _guard_region(check, check.region, lifter)
        for name in {INDEX_WRAPS if c.region is None else BRANCH_WRAPS: None for c in checks}:
            declare(op, name, [i64, i64], [], owner="dhir's runtime")


_Bounds = tuple[SSAValue, SSAValue, SSAValue]


def _bounds(loop: Operation, ops: Block) -> list[_Bounds]:
    """Each dimension's lower bound, upper bound and step, built in `ops` where the loop
    computes them inline."""
    if isinstance(loop, scf.ForOp):
        return [(loop.lb, loop.ub, loop.step)]
    if isinstance(loop, scf.ParallelOp):
        return list(zip(loop.lowerBound, loop.upperBound, loop.step, strict=True))
    if isinstance(loop, affine.ParallelOp):
        return [_affine_bounds(ops, *parallel_bounds(loop, k)) for k in range(len(loop.steps))]
    if isinstance(loop, scf.WhileOp):  # one that counts (is_loop): the scf.for it is
        counted = counted_bounds(loop)
        assert counted is not None
        first = loop.arguments[0]
        kind = first.type
        assert isinstance(kind, IntegerType | IndexType)  # a counter's (counted_bounds)
        step = put(ops, arith.ConstantOp(IntegerAttr(counted[1], kind), kind))
        return [(first, counted[0], step.result)]
    assert isinstance(loop, affine.ForOp)
    lower = (loop.lowerBoundMap.data, list(loop.lowerBoundOperands))
    upper = (loop.upperBoundMap.data, list(loop.upperBoundOperands))
    return [_affine_bounds(ops, lower, upper, loop.step.value.data)]


_Map = tuple[AffineMap, list[SSAValue]]


def _affine_bounds(ops: Block, lower: _Map, upper: _Map, step: int) -> _Bounds:
    """An affine loop's dimension's bounds and step, built in `ops` as --lower-affine
    computes them."""
    first = affine_bound(ops, *lower, greatest=True)
    end = affine_bound(ops, *upper, greatest=False)
    stride = put(ops, arith.ConstantOp.from_int_and_width(step, IndexType()))
    return first, end, stride.result


def _guard(check: WrapCheck, lifter: Lifter) -> None:
    loop = check.loop
    ops = Block()
    dims = _bounds(loop, ops)
    runs: SSAValue | None = None
    for lower, upper, step in dims:
        kind = step.type
        assert isinstance(kind, IntegerType | IndexType)
        zero = put(ops, arith.ConstantOp(IntegerAttr(0, kind), kind)).result
        for ready in (
            put(ops, arith.CmpiOp(lower, upper, "slt")).result,
            put(ops, arith.CmpiOp(step, zero, "sgt")).result,
        ):
            runs = ready if runs is None else put(ops, arith.AndIOp(runs, ready)).result
    assert runs is not None
    body = Block()
    build = _Builder(body, lifter)
    for variable, (lower, upper, step) in zip(loop_variables(loop), dims, strict=True):
        if variable in check.variables:
            build.spans[variable] = (
                build.wide(lower),
                build.wide(last_value(body, lower, upper, step)),
            )
    for expr in check.exprs:
        build.checked(expr)
    _report(build, loop, INDEX_WRAPS)
    put(body, scf.YieldOp())
    put(ops, scf.IfOp(runs, [], Region(body)))
    insert_before(ops, loop)


def _guard_region(check: WrapCheck, region: Region, lifter: Lifter) -> None:
    """At the start of `region`, of an `scf.if` or `affine.if`: the check, at the values
    the leaves have there."""
    ops = Block()
    build = _Builder(ops, lifter)
    for key in region_leaves(check, lifter):
        if isinstance(key, BlockArgument):
            value = build.wide(key)
            build.spans[key] = (value, value)
    for expr in check.exprs:
        build.checked(expr)
    _report(build, check.loop, BRANCH_WRAPS)
    first = region.block.first_op
    assert first is not None  # a terminator at least
    insert_before(ops, first)


def _report(build: "_Builder", at: Operation, call: str) -> None:
    """Where `build`'s checks fail, the call that stops the run at `at`."""
    bad = build.add(arith.XOrIOp(build.ok, build.true()))
    report = Block()
    where = loc_of(at)
    line, column = (where.line, where.col) if where is not None else (0, 0)
    numbers = [
        put(report, arith.ConstantOp.from_int_and_width(v, 64)).result for v in (line, column)
    ]
    put(report, func.CallOp(call, numbers, []))
    put(report, scf.YieldOp())
    build.add_op(scf.IfOp(bad, [], Region(report)))


@lru_cache(maxsize=4096)
def _wide_number(value: int) -> IntegerAttr:
    """`value` as an i128 attribute, one object per value (the rule's limits recur in
    every check, and an attribute's range check cost more than its constant op)."""
    return IntegerAttr(value, _I128)


class _Builder:
    """The ops of dhir.analysis.wrap_checks.verdict, in 128 bits: each expression's
    bounds, and whether they and the rule's limits hold."""

    def __init__(self, block: Block, lifter: Lifter) -> None:
        self.block = block
        self.lifter = lifter
        self.spans: dict[BlockArgument, tuple[SSAValue, SSAValue]] = {}
        self.ok = self.true()
        self._atoms: dict[int, tuple[SSAValue, SSAValue]] = {}
        self._leaves: dict[SSAValue, SSAValue] = {}

    def add(self, op: Operation) -> SSAValue:
        return put(self.block, op).results[0]

    def add_op(self, op: Operation) -> None:
        put(self.block, op)

    def number(self, value: int) -> SSAValue:
        return self.add(arith.ConstantOp(_wide_number(value), _I128))

    def true(self) -> SSAValue:
        return self.add(arith.ConstantOp.from_int_and_width(1, 1))

    def both(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(arith.AndIOp(a, b))

    def wide(self, value: SSAValue) -> SSAValue:
        """`value`, a signed integer or index, in 128 bits."""
        if isinstance(value.type, IndexType):
            value = self.add(arith.IndexCastOp(value, i64))
        return self.add(arith.ExtSIOp(value, _I128))

    def within(self, low: SSAValue, high: SSAValue, least: int, greatest: int) -> SSAValue:
        above = self.add(arith.CmpiOp(low, self.number(least), "sge"))
        below = self.add(arith.CmpiOp(high, self.number(greatest), "sle"))
        return self.both(above, below)

    def checked(self, expr: Affine) -> tuple[SSAValue, SSAValue]:
        """The bounds of `expr`, with whether they lie in 64 bits joined to `ok`."""
        low, high = self.bounds(expr)
        self.ok = self.both(self.ok, self.within(low, high, -HALF_64, HALF_64 - 1))
        return low, high

    def bounds(self, expr: Affine) -> tuple[SSAValue, SSAValue]:
        low = high = self.number(expr.constant)
        for atom, k in expr.terms:
            a, b = self.atom(atom)
            factor = self.number(k)
            a, b = self.add(arith.MuliOp(a, factor)), self.add(arith.MuliOp(b, factor))
            a, b = (a, b) if k >= 0 else (b, a)
            self.ok = self.both(self.ok, self.within(a, b, -TERM_LIMIT, TERM_LIMIT))
            low, high = self.add(arith.AddiOp(low, a)), self.add(arith.AddiOp(high, b))
            self.ok = self.both(self.ok, self.within(low, high, -SUM_LIMIT, SUM_LIMIT))
        return low, high

    def atom(self, atom: Atom) -> tuple[SSAValue, SSAValue]:
        if id(atom) not in self._atoms:
            self._atoms[id(atom)] = self._atom(atom)
        return self._atoms[id(atom)]

    def _atom(self, atom: Atom) -> tuple[SSAValue, SSAValue]:
        if isinstance(atom, Leaf):
            key = atom.key
            assert isinstance(key, SSAValue)
            if isinstance(key, BlockArgument) and key in self.spans:
                return self.spans[key]
            fixed = self.lifter.leaf_range(key)
            if fixed is not None:
                return self.number(fixed[0]), self.number(fixed[1])
            if key not in self._leaves:
                self._leaves[key] = self.wide(self._at_entry(key))
            return self._leaves[key], self._leaves[key]
        if isinstance(atom, Mod):
            self.checked(atom.arg)
            return self.number(0), self.number(atom.divisor - 1)
        if isinstance(atom, Div):
            low, high = self.checked(atom.arg)
            return self._divided(low, atom), self._divided(high, atom)
        found = [self.checked(arg) for arg in atom.args]
        pick = arith.MaxSIOp if atom.greatest else arith.MinSIOp
        low, high = found[0]
        for a, b in found[1:]:
            low, high = self.add(pick(low, a)), self.add(pick(high, b))
        return low, high

    def _at_entry(self, key: SSAValue) -> SSAValue:
        """`key`'s value where the check runs: a size measured in the loop measured
        again there, of the memref made outside it."""
        size = measured(key, self.lifter)
        if size is None:
            return key
        dim = self.add(arith.ConstantOp.from_int_and_width(size[1], IndexType()))
        return self.add(memref.DimOp(size[0], dim))

    def _divided(self, value: SSAValue, atom: Div) -> SSAValue:
        """`value` divided as native code divides its 64 bits (exact where it fits)."""
        bits = self.add(arith.TruncIOp(value, i64))
        divisor = self.add(arith.ConstantOp.from_int_and_width(atom.divisor, 64))
        kind = arith.CeilDivSIOp if atom.ceil else arith.FloorDivSIOp
        return self.add(arith.ExtSIOp(self.add(kind(bits, divisor)), _I128))
