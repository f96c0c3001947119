"""Constants, loop trip counts and sizes in bytes, as the cost model reads them from the
IR: what dhir.analysis.work (arithmetic and traffic) and dhir.analysis.reuse (what the
caches keep) both count with."""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import islpy as isl
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ComplexType,
    ContainerType,
    ShapedType,
    VectorType,
)
from xdsl.ir import Attribute, Operation, OpResult, SSAValue

from dhir.analysis.lift import (
    DIVISIONS,
    Affine,
    Extreme,
    Leaf,
    Lifted,
    Lifter,
    divided_by_constant,
    isl_text,
    leaves_of,
    number,
)
from dhir.dialects import affine, scf
from dhir.dialects.affine import parallel_bounds
from dhir.ir import layout

# The guess for a loop whose trip count is not a constant (and for a dynamic extent):
# large enough that such a loop outweighs straight-line code, small enough not to
# dwarf loops whose counts are known.
DEFAULT_TRIP_COUNT = 100

# The most points (of the loops around a loop whose bounds depend on theirs through a
# min, max or division) that LoopTrips has isl count to find its mean trips exactly:
# isl enumerates them, about a microsecond each. Past it, the bounds at the enclosing
# variables' mean values give the trips.
MOST_COUNTED = 200_000

# On a loop nest or linalg op that dhir-optimize-bodies will turn into register-blocked
# vector code, as its dry run found (dhir.transforms.blocked_nests): the work count and
# the reuse count time it as that code runs. Dropped before the lowering.
BLOCKED_ATTR = "dhir.blocked"


# --- constants and trip counts ------------------------------------------------------


def constant_int(value: SSAValue) -> int | None:
    """The integer `value` always holds, as dhir.analysis.lift reads it (a narrow integer
    signed)."""
    return Lifter().constant(value)


def trip_count(lower: int | None, upper: int | None, step: int | None) -> int:
    """Iterations of `for i = lower to upper step step`; the default guess if unknown."""
    if lower is None or upper is None or step is None or step <= 0:
        return DEFAULT_TRIP_COUNT
    return max(0, -(-(upper - lower) // step))


def extent(value: SSAValue) -> int:
    """The constant `value` holds when known and not negative, else the default guess."""
    known = constant_int(value)
    return DEFAULT_TRIP_COUNT if known is None or known < 0 else known


# --- trips of a loop whose bounds depend on enclosing loops ----------------------------


class _Divisions:
    """Reads (as the lifter's Reader) an index value divided by a positive constant: a
    signed floor or ceiling division exactly, the others when the dividend is surely
    not negative (dhir-time-tiles' bands end at a `ceildivsi`)."""

    def __init__(self) -> None:
        self.lifter = Lifter(reader=self)

    def inputs(self, op: Operation) -> Sequence[SSAValue]:
        return op.operands[:2] if isinstance(op, DIVISIONS) else ()

    def read(self, value: OpResult) -> Lifted | None:
        op = value.op
        if not isinstance(op, DIVISIONS):
            return None
        return divided_by_constant(self.lifter, op, self._not_negative)

    def _not_negative(self, dividend: Lifted) -> bool:
        least = self.lifter.interval(dividend.low)
        return least is not None and least[0] >= 0


@dataclass(frozen=True)
class _Variable:
    """One variable of a loop: from the greatest of `lows`, by `step`, while below the
    least of `highs` (None where a bound or the step is not known)."""

    iv: SSAValue
    lows: tuple[Lifted | None, ...]
    highs: tuple[Lifted | None, ...]
    step: int | None

    def bound_leaves(self) -> tuple[set[SSAValue], bool]:
        """The values its bounds are expressions of, and whether they are all exact."""
        found: set[SSAValue] = set()
        exact = bool(self.lows) and bool(self.highs)
        for bound in (*self.lows, *self.highs):
            if bound is None or not bound.exact:
                exact = False
                continue
            for key in leaves_of(bound.low):
                if isinstance(key, str):
                    exact = False
                else:
                    found.add(key)
        return found, exact

    def piecewise(self) -> bool:
        """Whether a bound is the max or min of several or holds a min, max, division or
        remainder: where its value at the enclosing variables' mean values may be far
        from its mean."""
        return (
            len(self.lows) > 1
            or len(self.highs) > 1
            or any(
                not isinstance(atom, Leaf)
                for bound in (*self.lows, *self.highs)
                if bound is not None
                for atom, _ in bound.low.terms
            )
        )


def _variables(op: Operation, lifter: Lifter) -> list[_Variable]:
    """The variables of a loop op, outermost first (none for another op)."""
    if isinstance(op, scf.ForOp):
        iv = op.body.block.args[0]
        return [
            _Variable(iv, (lifter.value(op.lb),), (lifter.value(op.ub),), _step(op.step, lifter))
        ]
    if isinstance(op, scf.ParallelOp):
        bounds = zip(op.body.block.args, op.lowerBound, op.upperBound, op.step)
        return [
            _Variable(iv, (lifter.value(lo),), (lifter.value(hi),), _step(st, lifter))
            for iv, lo, hi, st in bounds
        ]
    if isinstance(op, affine.ForOp):
        lows = lifter.map_each(op.lowerBoundMap.data, op.lowerBoundOperands)
        highs = lifter.map_each(op.upperBoundMap.data, op.upperBoundOperands)
        return [_Variable(op.body.block.args[0], tuple(lows), tuple(highs), op.step.value.data)]
    if isinstance(op, affine.ParallelOp):
        found: list[_Variable] = []
        for dim, iv in enumerate(op.body.block.args):
            (low_map, low_args), (high_map, high_args), step = parallel_bounds(op, dim)
            lows, highs = lifter.map_each(low_map, low_args), lifter.map_each(high_map, high_args)
            found.append(_Variable(iv, tuple(lows), tuple(highs), step))
        return found
    return []


def _step(value: SSAValue, lifter: Lifter) -> int | None:
    step = lifter.constant(value)
    return step if step is not None and step > 0 else None


class LoopTrips:
    """The trips of the loops of one body as the work and reuse counts take them, asked
    for each loop op outside in: per run of the loop op, each variable's mean trips over
    the iterations of the loops around it. Bounds are read by dhir.analysis.lift (and
    divisions by a positive constant). Constant bounds give the trips; bounds that depend
    on enclosing variables are evaluated at those variables' mean values, which is exact
    for an affine bound (a triangle); one that takes a min, max or division of them (the
    skewed bands of dhir-time-tiles, a tile's last partial block) is counted exactly by
    isl over the enclosing loops it depends on (at most MOST_COUNTED points). A bound
    not known at all counts DEFAULT_TRIP_COUNT trips, or fewer when the constant ranges
    of the values it depends on allow fewer. The IR must not change meanwhile."""

    def __init__(self) -> None:
        self.means: dict[SSAValue, int] = {}  # mean value of the variables met
        self._lifter = _Divisions().lifter
        self._trips: dict[SSAValue, float] = {}

    @property
    def lifter(self) -> Lifter:
        """The lifter that reads the bounds (and divisions), for other questions about
        the same IR."""
        return self._lifter

    def of(self, op: Operation) -> list[float]:
        """Each variable's trips of the loop op `op`."""
        variables = _variables(op, self._lifter)
        found: list[float] = []
        for k, variable in enumerate(variables):
            at_means = self._at_means(variable)
            counted = self._counted(op, variables[:k], variable)
            trips = at_means if counted is None else counted
            self._trips[variable.iv] = trips
            found.append(trips)
        return found

    def _at_means(self, variable: _Variable) -> float:
        """The trips with the enclosing variables at their mean values; records the
        variable's own mean value."""
        first = _pick((number(b, self.means) for b in variable.lows), max)
        last = _pick((number(b, self.means) for b in variable.highs), min)
        step = variable.step
        if first is None or last is None or step is None:
            return float(min(DEFAULT_TRIP_COUNT, self._most(variable)))
        trips = trip_count(first, last, step)
        self.means[variable.iv] = first + step * max(0, trips - 1) // 2
        return float(trips)

    def _most(self, variable: _Variable) -> float:
        """The most trips the bounds allow: the least of (upper - lower) / step over each
        upper bound the end is at most (itself, or each part of a min) and each lower
        bound the start is at least (itself, or each part of a max), where the constant
        ranges of the loop variables in it bound it (infinite where none is)."""
        if variable.step is None:
            return math.inf
        uppers = [p for b in variable.highs if b is not None for p in _parts(b.high, False)]
        lowers = [p for b in variable.lows if b is not None for p in _parts(b.low, True)]
        most = math.inf
        for upper in uppers:
            for lower in lowers:
                found = self._lifter.interval(upper - lower)
                if found is not None:
                    most = min(most, max(0, -(-found[1] // variable.step)))
        return most

    def _counted(
        self, op: Operation, earlier: Sequence[_Variable], variable: _Variable
    ) -> float | None:
        """The mean trips by isl's count of the points of the loops around it that its
        bounds depend on (None: not counted)."""
        if not variable.piecewise():
            return None
        chain = [*_enclosing(op, self._lifter), *earlier]
        members = _component(chain, variable)
        if members is None:
            return None
        estimate = math.prod(self._trips.get(v.iv, DEFAULT_TRIP_COUNT) for v in members)
        if estimate > MOST_COUNTED:
            return None
        names = {v.iv: f"v{k}" for k, v in enumerate([*members, variable])}
        outer = _points(members, names)
        inner = _points([*members, variable], names)
        if outer is None or inner is None:
            return None
        return inner / outer if outer else 0.0


def _parts(expr: Affine, greatest: bool) -> list[Affine]:
    """`expr`, or the parts of the max (with `greatest`, else min) it is."""
    atom = expr.terms[0][0] if len(expr.terms) == 1 and expr.terms[0][1] == 1 else None
    if isinstance(atom, Extreme) and atom.greatest == greatest and not expr.constant:
        return list(atom.args)
    return [expr]


def _pick(values: Iterable[int | None], pick: Callable[[Iterable[int]], int]) -> int | None:
    found = list(values)
    known = [v for v in found if v is not None]
    return pick(known) if known and len(known) == len(found) else None


def _enclosing(op: Operation, lifter: Lifter) -> list[_Variable]:
    """The variables of the loops around `op`, outermost first."""
    found: list[_Variable] = []
    parent = op.parent_op()
    while parent is not None:
        found = _variables(parent, lifter) + found
        parent = parent.parent_op()
    return found


def _component(chain: Sequence[_Variable], variable: _Variable) -> list[_Variable] | None:
    """The variables of `chain` whose iterations `variable`'s trips depend on: those its
    bounds name, and every one joined to them by bounds that name another, in `chain`'s
    order; None when one of them (or `variable`) has a bound that is not an exact
    expression of `chain`'s variables."""
    by_iv = {v.iv: v for v in chain}
    needed, exact = variable.bound_leaves()
    if not exact or not needed <= by_iv.keys():
        return None
    members = set(needed)
    grown = True
    while grown:
        grown = False
        for other in chain:
            leaves, exact = other.bound_leaves()
            inside = other.iv in members
            if not inside and not leaves & members:
                continue
            if not exact or not leaves <= by_iv.keys():
                return None
            if not inside or not leaves <= members:
                members |= leaves | {other.iv}
                grown = True
    return [v for v in chain if v.iv in members]


def _points(variables: Sequence[_Variable], names: Mapping[SSAValue, str]) -> int | None:
    """How many points the loops of `variables` (outermost first) run, by isl."""
    constraints: list[str] = []
    for k, variable in enumerate(variables):
        name = names[variable.iv]
        lows = [isl_text(b.low, names) for b in variable.lows if b is not None]
        highs = [isl_text(b.low, names) for b in variable.highs if b is not None]
        if variable.step is None or None in lows or None in highs or not lows or not highs:
            return None
        constraints += [f"{name} < {high}" for high in highs]
        if variable.step == 1:
            constraints += [f"{name} >= {low}" for low in lows]
            continue
        first = lows[0]
        for low in lows[1:]:
            first = f"max({first}, {low})"
        constraints.append(f"exists (e{k}: {name} = {first} + {variable.step}*e{k} and e{k} >= 0)")
    if not variables:
        return 1
    space = ", ".join(names[v.iv] for v in variables)
    return _count(f"{{ [{space}] : {' and '.join(constraints)} }}")


@lru_cache(maxsize=1024)
def _count(text: str) -> int | None:
    try:
        found = isl.Set(text).count_val().to_python()
    except isl.Error:
        return None
    return found if isinstance(found, int) else None


# --- sizes ----------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def element_bytes(element: Attribute) -> int:
    """dhir.ir.layout's rule where it knows the type; else an estimate for the cost model
    (a vector or complex number from its parts, another type from its bit width)."""
    known = layout.element_bytes(element)
    if known is not None:
        return known
    if isinstance(element, VectorType):  # a memref of vectors: each element is one
        return math.prod(element.get_shape()) * element_bytes(element.get_element_type())
    if isinstance(element, ComplexType):
        return 2 * element_bytes(element.element_type)
    width = getattr(element, "bitwidth", 32)
    return max(1, width // 8)


@lru_cache(maxsize=4096)  # a program has few types, asked about for every access
def memref_bytes(type_: Attribute) -> int:
    """Bytes of a memref (or any shaped type); `DEFAULT_TRIP_COUNT` per dynamic extent."""
    if not isinstance(type_, ShapedType):
        return element_bytes(type_)
    shape = [DEFAULT_TRIP_COUNT if d == DYNAMIC_INDEX else d for d in type_.get_shape()]
    return math.prod(shape) * element_bytes_of(type_)


def element_bytes_of(type_: Attribute) -> int:
    element = type_.get_element_type() if isinstance(type_, ContainerType) else type_
    return element_bytes(element)
