"""Constants, loop trip counts and sizes in bytes, as the cost model reads them from the
IR: what dhir.analysis.work (arithmetic and traffic) and dhir.analysis.reuse (what the
caches keep) both count with."""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ComplexType,
    ContainerType,
    ShapedType,
    VectorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import AffineMap

from dhir.analysis.lift import Lifter, number
from dhir.dialects import affine
from dhir.ir import layout

# The guess for a loop whose trip count is not a constant (and for a dynamic extent):
# large enough that such a loop outweighs straight-line code, small enough not to
# dwarf loops whose counts are known.
DEFAULT_TRIP_COUNT = 100

# On a loop nest or linalg op that dhir-optimize-bodies will turn into register-blocked
# vector code, as its dry run found (dhir.transforms.blocked_nests): the work count and
# the reuse count time it as that code runs. Dropped before the lowering.
BLOCKED_ATTR = "dhir.blocked"


# --- constants and trip counts ------------------------------------------------------


def constant_int(value: SSAValue, means: Mapping[SSAValue, int] | None = None) -> int | None:
    """The integer `value` always holds, as dhir.analysis.lift reads it (a narrow integer
    signed); with `means` (the mean value of enclosing loops' variables), its mean value
    when those fix it."""
    return Lifter().constant(value, means)


def trip_count(lower: int | None, upper: int | None, step: int | None) -> int:
    """Iterations of `for i = lower to upper step step`; the default guess if unknown."""
    if lower is None or upper is None or step is None or step <= 0:
        return DEFAULT_TRIP_COUNT
    return max(0, -(-(upper - lower) // step))


def loop_trips(bounds: Sequence[SSAValue], iv: SSAValue, means: dict[SSAValue, int]) -> int:
    """Iterations of an `scf` loop over `iv` (on average, when its bounds depend on the
    variables of enclosing loops, whose mean values `means` holds); records `iv`'s mean
    value in `means` when its bounds are known."""
    first, last, stride = (constant_int(v, means=means) for v in bounds[:3])
    trips = trip_count(first, last, stride)
    if first is not None and stride is not None and last is not None:
        means[iv] = first + stride * max(0, trips - 1) // 2
    return trips


def extent(value: SSAValue) -> int:
    """The constant `value` holds when known and not negative, else the default guess."""
    known = constant_int(value)
    return DEFAULT_TRIP_COUNT if known is None or known < 0 else known


def affine_trips(
    op: affine.ForOp | affine.ParallelOp, means: dict[SSAValue, int] | None = None
) -> list[int]:
    """Iterations of each variable of an affine loop (as `loop_trips`)."""
    means = {} if means is None else means
    if isinstance(op, affine.ForOp):
        lower = _bound(op.lowerBoundMap.data, op.lowerBoundOperands, max, means)
        upper = _bound(op.upperBoundMap.data, op.upperBoundOperands, min, means)
        lowers, uppers, steps = [lower], [upper], [op.step.value.data]
    else:
        lower_map, upper_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
        split = lower_map.num_dims + lower_map.num_symbols
        lowers = _grouped(lower_map, op.map_operands[:split], op.lowerBoundsGroups, max, means)
        uppers = _grouped(upper_map, op.map_operands[split:], op.upperBoundsGroups, min, means)
        steps = [s.value.data for s in op.steps.data]
    trips = [trip_count(lo, up, st) for lo, up, st in zip(lowers, uppers, steps)]
    for iv, lo, up, st, n in zip(op.body.block.args, lowers, uppers, steps, trips):
        if lo is not None and up is not None:
            means[iv] = lo + st * max(0, n - 1) // 2
    return trips


def _evaluated(
    bounds: AffineMap, operands: Sequence[SSAValue], means: Mapping[SSAValue, int]
) -> tuple[int, ...] | None:
    results = Lifter().map(bounds, operands)
    values = [number(r, means) for r in results or []]
    known = [v for v in values if v is not None]
    return tuple(known) if results is not None and len(known) == len(values) else None


def _bound(
    bounds: AffineMap,
    operands: Sequence[SSAValue],
    pick: Callable[[Iterable[int]], int],
    means: Mapping[SSAValue, int],
) -> int | None:
    results = _evaluated(bounds, operands, means)
    return pick(results) if results else None


def _grouped(
    bounds: AffineMap,
    operands: Sequence[SSAValue],
    groups: Attribute,
    pick: Callable[[Iterable[int]], int],
    means: Mapping[SSAValue, int],
) -> list[int | None]:
    sizes = [int(n) for n in groups.get_values()]  # type: ignore[attr-defined]
    results = _evaluated(bounds, operands, means)
    picked: list[int | None] = []
    start = 0
    for size in sizes:
        picked.append(pick(results[start : start + size]) if results else None)
        start += size
    return picked


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
