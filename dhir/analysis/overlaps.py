"""Parallel loops (`scf.parallel`, `affine.parallel`) two of whose iterations surely
touch one element of a memref, one of them writing it with a plain store: the program
broke its loop's promise that the iterations are independent. The native backend runs
such iterations at once (OpenMP threads, GPU threads), so the result depends on their
timing, while the interpreter runs them in order.

Only what is proven counts (`dhir.analysis.regions.sure_accesses`): loads and stores
that run in every iteration, at subscripts affine in the loop variables, of memrefs
from outside the loop, in a loop whose bounds and steps are constants. The variables
of the loops around it with constant bounds are the same in both iterations, and the
overlap must occur at each of their values. Atomic updates and reductions are the ways
to combine iterations, and never count.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import islpy as isl
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    MemRefType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from dhir.analysis.lift import Lifter
from dhir.analysis.regions import sure_accesses
from dhir.dialects import affine, func, scf
from dhir.dialects.access import Access, Kind, facts

# Per dimension of a loop: its first value, the bound it stays below, its step.
Range = tuple[int, int, int]


@dataclass(frozen=True)
class Overlap:
    """Iteration `first` writes element `element` of `memref`, which iteration `second`
    also writes, or reads when `read`."""

    memref: SSAValue
    element: tuple[int, ...]
    first: tuple[int, ...]
    second: tuple[int, ...]
    read: bool


def parallel_overlap(loop: Operation) -> Overlap | None:
    """A proven overlap between two iterations of `loop` (an scf.parallel or an
    affine.parallel), the first in lexicographic order (in the first iteration of the
    loops around it); None when none is proven."""
    lift = Lifter()
    ranges = _ranges(loop, lift)
    body = loop.regions[0].block
    if ranges is None or len(ranges) != len(body.args) or not _stepping(ranges):
        return None
    memrefs = _outside_memrefs(loop, body)
    if not memrefs or _plainly_apart(body, memrefs):
        return None
    firsts, seconds = _names(len(ranges))
    # The variables of the loops around it, with constant bounds, are the same for both
    # iterations: parameters too, and the overlap must hold at each of their values.
    around = _loops_around(loop, lift)
    outer = {variable: f"o{k}" for k, (variable, _) in enumerate(around)}
    one = sure_accesses(memrefs, body, dict(zip(body.args, firsts, strict=True)) | outer)
    other = sure_accesses(memrefs, body, dict(zip(body.args, seconds, strict=True)) | outer)
    runs = _domain(tuple(r for _, r in around), tuple(outer.values()))
    apart = _apart(tuple(ranges)).intersect_params(runs)
    for read in (False, True):
        for memref, written in one.writes.items():
            touched = (other.reads if read else other.writes).get(memref)
            if touched is None:
                continue
            clash = (written & touched).intersect_params(apart)
            if _everywhere(clash, runs, [*firsts, *seconds]):
                return _witness(clash, memref, firsts, seconds, list(outer.values()), read)
    return None


def _everywhere(clash: isl.Set, runs: isl.Set, names: list[str]) -> bool:
    """Whether `clash` holds a point for every value of the outer loops' variables that
    `runs` allows (with no outer loops: whether it is not empty)."""
    if clash.is_empty():
        return False
    found = clash.params()
    params = isl.dim_type.param
    for name in names:
        found = found.project_out(params, found.find_dim_by_name(params, name), 1)
    return runs.is_subset(found)


def _loops_around(loop: Operation, lift: Lifter) -> list[tuple[SSAValue, Range]]:
    """The variables of the loops around `loop` whose bounds and steps are constants."""
    found: list[tuple[SSAValue, Range]] = []
    parent = loop.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        if isinstance(parent, scf.ParallelOp | affine.ParallelOp):
            ranges = _ranges(parent, lift)
            block = parent.regions[0].block
            if ranges is not None and len(ranges) == len(block.args) and _stepping(ranges):
                found += zip(block.args, ranges, strict=True)
        elif isinstance(parent, scf.ForOp | affine.ForOp):
            bounds = _for_range(parent, lift)
            if bounds is not None and _stepping([bounds]):
                found.append((parent.regions[0].block.args[0], bounds))
        parent = parent.parent_op()
    return found


def _stepping(ranges: list[Range]) -> bool:
    """Whether every step is positive (a step of 0 is an error at run time)."""
    return all(step > 0 for _, _, step in ranges)


def _for_range(loop: scf.ForOp | affine.ForOp, lift: Lifter) -> Range | None:
    if isinstance(loop, scf.ForOp):
        numbers = [lift.constant(v) for v in (loop.lb, loop.ub, loop.step)]
        if any(n is None for n in numbers):
            return None
        first, end, step = (n for n in numbers if n is not None)
        return first, end, step
    props = loop.properties
    lower, upper = props.get("lowerBoundMap"), props.get("upperBoundMap")
    step = props.get("step")
    if not isinstance(lower, AffineMapAttr) or not isinstance(upper, AffineMapAttr):
        return None
    split = lower.data.num_dims + lower.data.num_symbols
    lows = _numbers(lift, lower, loop.operands[:split])
    highs = _numbers(lift, upper, loop.operands[split:])
    if not lows or not highs or not isinstance(step, IntegerAttr):
        return None
    return max(lows), min(highs), step.value.data


@cache
def _domain(ranges: tuple[Range, ...], names: tuple[str, ...]) -> isl.Set:
    """The values `names` take as the variables of loops of `ranges`, a set of parameters."""
    conditions = [_within(r, name) for r, name in zip(ranges, names, strict=True)]
    return isl.Set(f"[{', '.join(names)}] -> {{ : {' and '.join(conditions) or 'true'} }}")


def _within(bounds: Range, name: str) -> str:
    first, end, step = bounds
    text = f"{first} <= {name} < {end}"
    return text if step == 1 else f"{text} and ({name} - ({first})) mod {step} = 0"


def _ranges(loop: Operation, lift: Lifter) -> list[Range] | None:
    if isinstance(loop, scf.ParallelOp):
        found: list[Range] = []
        for low, high, step in zip(loop.lowerBound, loop.upperBound, loop.step, strict=True):
            numbers = [lift.constant(v) for v in (low, high, step)]
            if any(n is None for n in numbers):
                return None
            first, end, stride = (n for n in numbers if n is not None)
            found.append((first, end, stride))
        return found
    if isinstance(loop, affine.ParallelOp):
        return _affine_ranges(loop, lift)
    return None


def _affine_ranges(loop: affine.ParallelOp, lift: Lifter) -> list[Range] | None:
    props = loop.properties
    lower, upper = props.get("lowerBoundsMap"), props.get("upperBoundsMap")
    if not isinstance(lower, AffineMapAttr) or not isinstance(upper, AffineMapAttr):
        return None
    split = lower.data.num_dims + lower.data.num_symbols
    lows = _numbers(lift, lower, loop.operands[:split])
    highs = _numbers(lift, upper, loop.operands[split:])
    low_groups = _sizes(props.get("lowerBoundsGroups"))
    high_groups = _sizes(props.get("upperBoundsGroups"))
    steps = _sizes(props.get("steps"))
    if None in (lows, highs, low_groups, high_groups, steps):
        return None
    assert lows is not None and highs is not None
    assert low_groups is not None and high_groups is not None and steps is not None
    if not len(low_groups) == len(high_groups) == len(steps):
        return None
    found: list[Range] = []
    for low_group, high_group, step in zip(
        _split(lows, low_groups), _split(highs, high_groups), steps, strict=True
    ):
        if not low_group or not high_group:
            return None
        found.append((max(low_group), min(high_group), step))
    return found


def _numbers(lift: Lifter, amap: AffineMapAttr, operands: Sequence[SSAValue]) -> list[int] | None:
    results = lift.map(amap.data, operands)
    if results is None:
        return None
    numbers = [r.number for r in results]
    return None if any(n is None for n in numbers) else [n for n in numbers if n is not None]


def _sizes(attr: Attribute | None) -> list[int] | None:
    """The integers of an affine.parallel's steps (an array of integers) or bound groups
    (dense integer elements)."""
    if isinstance(attr, ArrayAttr):
        values = [a.value.data if isinstance(a, IntegerAttr) else None for a in attr.data]
        return None if None in values else [v for v in values if v is not None]
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return [int(v) for v in attr.get_values()]
    return None


def _split(numbers: list[int], sizes: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    at = 0
    for size in sizes:
        out.append(numbers[at : at + size])
        at += size
    return out


def _outside_memrefs(loop: Operation, body: Block) -> list[SSAValue]:
    """The ranked memrefs that `body` uses and that are defined outside `loop`."""
    found: dict[SSAValue, None] = {}
    for op in body.walk():
        for value in op.operands:
            if isinstance(value.type, MemRefType) and not _inside(loop, value):
                found[value] = None
    return list(found)


def _plainly_apart(body: Block, memrefs: list[SSAValue]) -> bool:
    """Whether no two iterations touch one element of a memref that one of them stores
    into, seen without isl (most loops, so that a program of thousands of them is checked
    in little time): each memref stored into is only loaded and stored, each time at the
    same subscripts, which include every loop variable."""
    outside = set(memrefs)
    places: dict[SSAValue, set[tuple[SSAValue, ...]]] = {}
    stored: set[SSAValue] = set()
    unclear: set[SSAValue] = set()  # used otherwise: isl decides
    for op in body.walk():
        found = facts(op)
        if found is None or found.kind not in (Kind.LOAD, Kind.STORE):
            unclear.update(v for v in op.operands if v in outside)
            continue
        for access in found.accesses:
            if access.memref not in outside:
                continue
            place = _place(access)
            if place is None:
                unclear.add(access.memref)
            else:
                places.setdefault(access.memref, set()).add(place)
            if found.kind is Kind.STORE:
                stored.add(access.memref)
    variables = set(body.args)
    for memref in stored:
        found_places = places.get(memref, set())
        if memref in unclear or len(found_places) != 1:
            return False
        if not variables <= set(next(iter(found_places))):
            return False
    return True


def _place(access: Access) -> tuple[SSAValue, ...] | None:
    """The subscripts of a scalar load or store; None for a vector's lanes, an element
    the subscripts do not name, or an affine map other than the identity."""
    identity = access.map is None or access.map == AffineMap.identity(len(access.indices))
    if access.lanes is not None or access.whole or not identity:
        return None
    return access.indices


def _inside(loop: Operation, value: SSAValue) -> bool:
    owner = value.owner
    op = owner.parent_op() if isinstance(value, BlockArgument) else owner
    return isinstance(op, Operation) and loop.is_ancestor(op)


@cache
def _apart(ranges: tuple[Range, ...]) -> isl.Set:
    """Two distinct iterations, each within `ranges`, as a set of parameters (`_names`)."""
    firsts, seconds = _names(len(ranges))
    conditions = [
        _within(r, v) for r, a, b in zip(ranges, firsts, seconds, strict=True) for v in (a, b)
    ]
    differ = " or ".join(f"{a} != {b}" for a, b in zip(firsts, seconds, strict=True))
    names = ", ".join([*firsts, *seconds])
    return isl.Set(f"[{names}] -> {{ : {' and '.join(conditions)} and ({differ}) }}")


def _names(rank: int) -> tuple[list[str], list[str]]:
    """The isl names of the first iteration's loop variables, and the second's."""
    return [f"ia{k}" for k in range(rank)], [f"ib{k}" for k in range(rank)]


def _witness(
    clash: isl.Set,
    memref: SSAValue,
    firsts: list[str],
    seconds: list[str],
    outer: list[str],
    read: bool,
) -> Overlap:
    """The least point of `clash` (parameters: the outer loops' variables, then the two
    iterations), as an Overlap."""
    params = isl.dim_type.param
    rank = clash.dim(isl.dim_type.set)
    wanted = [*outer, *firsts, *seconds]
    # The variables become the leading set dimensions, then lexmin picks one point.
    points = clash
    for name in reversed(wanted):
        at = points.find_dim_by_name(params, name)
        points = points.move_dims(isl.dim_type.set, 0, params, at, 1)
    points = points.project_out(params, 0, points.dim(params))
    point = points.lexmin().sample_point()
    dims = range(len(wanted) + rank)
    values = [point.get_coordinate_val(isl.dim_type.set, k).to_python() for k in dims]
    start, middle = len(outer), len(outer) + len(firsts)
    return Overlap(
        memref,
        tuple(values[len(wanted) :]),
        tuple(values[start:middle]),
        tuple(values[middle : len(wanted)]),
        read,
    )
