"""Which elements of each listed memref a task may read, may write and must write:
its access regions, as integer sets (isl, through islpy).

Each access is the image of the loop nest around it under its subscripts: loop bounds
and subscripts that are affine in the loop variables and constants (scf.for/parallel,
affine.for, affine maps, arith on index values, views with static or affine offsets)
give exact sets. Whatever this module cannot follow widens the region, never narrows
it: an unknown subscript or bound leaves that variable free within the memref's shape,
and an op it does not know (a call, a cast to a pointer, an unlisted view) counts as
reading and writing all of every memref it can reach (analysis/effects.py says which).
Subscripts and bounds are what dhir.analysis.lift makes of them (integer casts read
with their own signedness and width, min/max exact, a select of two values a range
between them). A memref that an arith.select may pick is accessed through each of its
choices.
A write is a *must*-write only when it runs for every point of its loop nest with known
subscripts: not under scf.if, not in a while loop, not through an unknown view, not
through a select.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum, auto
from functools import cache
from itertools import count
from math import prod
from typing import Protocol, cast

import islpy as isl
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from dhir.analysis.effects import memory_effects
from dhir.analysis.lift import Lifted, Lifter, apply, isl_text, leaf
from dhir.analysis.lift import constant as number_at
from dhir.analysis.shapes import Shapes
from dhir.dialects import affine, arith, cf, func, gpu, scf, vector
from dhir.dialects import memref as memref_dialect
from dhir.dialects.access import (
    Access,
    Kind,
    ViewKind,
    facts,
    global_name,
    is_alloc,
    view_source,
)
from dhir.dialects.arith import INDEX_WIDTH, scalar_int_width
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.dialects.layouts import is_identity_layout
from dhir.dialects.linalg import LinalgStructuredOperation

# An integer value (a subscript, a bound) as quasi-affine isl text over loop variables:
# exact text, the (low, high) texts of a range it lies in, or None when unknown.
Expr = str | tuple[str, str] | None


# The lowest and the highest index of each dimension.
Bounds = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Regions:
    """Per listed memref (a task operand), the elements a task may read, may write and
    must write; memrefs a task does not touch have no entry. Each set is coalesced and
    lies within its memref's shape. Read only: tasks alike in shape, constants and
    memrefs share one (`shared_regions`)."""

    reads: dict[SSAValue, isl.Set]
    writes: dict[SSAValue, isl.Set]
    must_writes: dict[SSAValue, isl.Set]
    _boxes: dict[tuple[SSAValue, bool], tuple[Bounds, ...] | None] = field(
        default_factory=dict[tuple[SSAValue, bool], tuple[Bounds, ...] | None],
        compare=False,
        repr=False,
    )

    def read(self, memref: SSAValue) -> isl.Set:
        return _get(self.reads, memref)

    def written(self, memref: SSAValue) -> isl.Set:
        return _get(self.writes, memref)

    def must_written(self, memref: SSAValue) -> isl.Set:
        return _get(self.must_writes, memref)

    def boxes(self, memref: SSAValue, written: bool) -> tuple[Bounds, ...] | None:
        """`piece_boxes` of what the task reads (or, with `written`, writes) of `memref`,
        found once: the dependence graph and the partition both ask."""
        key = (memref, written)
        if key not in self._boxes:
            # A memref the task does not read (or write) has no region to ask isl about.
            region = (self.writes if written else self.reads).get(memref)
            self._boxes[key] = piece_boxes(region) if region is not None else ()
        return self._boxes[key]

    def needs(self, memref: SSAValue) -> isl.Set:
        """The elements whose current values the task needs: what it reads, and what it
        may write without surely writing it (those must stay right)."""
        return self.read(memref) | (self.written(memref) - self.must_written(memref))


def _get(table: dict[SSAValue, isl.Set], memref: SSAValue) -> isl.Set:
    found = table.get(memref)
    return found if found is not None else empty(memref.type)


def piece_boxes(region: isl.Set) -> tuple[Bounds, ...] | None:
    """The bounding box of each piece (basic set) of `region`, a set without parameters;
    None when it is unbounded."""
    if region.is_empty():
        return ()
    if not region.is_bounded():
        return None
    if region.n_basic_set() == 1:
        return (_point(region) or _bounding(region),)
    return tuple(_bounding(isl.Set.from_basic_set(piece)) for piece in region.get_basic_sets())


def hull(boxes: Sequence[Bounds]) -> Bounds:
    """The smallest box holding every one of `boxes` (at least one)."""
    if len(boxes) == 1:
        return boxes[0]
    los, his = zip(*boxes, strict=True)
    return tuple(map(min, zip(*los, strict=True))), tuple(map(max, zip(*his, strict=True)))


def _point(region: isl.Set) -> Bounds | None:
    """The box of `region` (not empty, one piece) when its constraints fix every
    dimension to an integer (one element: a task's scalar access): read off them, where
    `_bounding` solves two linear programs per dimension. None otherwise."""
    point: list[int] = []
    for d in range(region.dim(isl.dim_type.set)):
        value = region.plain_get_val_if_fixed(isl.dim_type.set, d)
        if not value.is_int():  # NaN: not fixed
            return None
        point.append(value.to_python())
    return tuple(point), tuple(point)


def _bounding(region: isl.Set) -> Bounds:
    dims = range(region.dim(isl.dim_type.set))
    lo = tuple(int(region.dim_min_val(d).to_python()) for d in dims)
    return lo, tuple(int(region.dim_max_val(d).to_python()) for d in dims)


def row_span(region: isl.Set, memref: SSAValue) -> tuple[int, int] | None:
    """The rows [first, end) along `memref`'s first dimension that hold `region` (an
    empty range for an empty region); None when that is every row, or unknown."""
    shape = _shape(memref.type)
    boxes = piece_boxes(region)
    if boxes == ():
        return (0, 0)
    if boxes is None or DYNAMIC_INDEX in shape:
        return None
    low, high = hull(boxes)
    rows = (low[0], high[0] + 1)
    return None if rows == (0, shape[0]) else rows


def rows_region(memref: SSAValue, span: tuple[int, int] | None) -> isl.Set:
    """The elements of rows [first, end) of `memref` (all of them: None)."""
    region = whole(memref.type)
    if span is None:
        return region
    return region.lower_bound_val(isl.dim_type.set, 0, isl.Val(str(span[0]))).upper_bound_val(
        isl.dim_type.set, 0, isl.Val(str(span[1] - 1))
    )


def count_elements(region: isl.Set) -> int | None:
    """The number of elements of a bounded region; None for an unbounded one."""
    if region.is_empty():
        return 0
    if not region.is_bounded():
        return None
    return int(region.count_val().to_python())


@cache
def whole(type_: Attribute) -> isl.Set:
    """Every element of a memref type: its shape as a box (a dynamic extent is open)."""
    return _parse(_whole_text(_shape(type_)))


@cache
def empty(type_: Attribute) -> isl.Set:
    return whole(type_).empty(whole(type_).get_space())


@cache
def _shape(type_: Attribute) -> tuple[int, ...]:
    assert isinstance(type_, MemRefType)
    return tuple(type_.get_shape())


def _whole_text(shape: Sequence[int]) -> str:
    names = [f"x{k}" for k in range(len(shape))]
    bounds = [
        f"0 <= {n}" if extent == DYNAMIC_INDEX else f"0 <= {n} < {extent}"
        for n, extent in zip(names, shape, strict=True)
    ]
    return f"{{ [{', '.join(names)}] : {' and '.join(bounds) or 'true'} }}"


@cache
def _parse(text: str) -> isl.Set:
    return isl.Set(text)


@cache
def _within(text: str, type_: Attribute) -> isl.Set:
    """The set `text` describes, cut to the elements of memref type `type_`: tasks that
    differ only in their constants mostly access regions of the same text."""
    return _parse(text) & whole(type_)


def task_regions(task: TaskOp) -> Regions:
    walker = _Walker()
    walker.watch(task.memrefs)
    walker.walk_top(task.body.block.ops)
    return walker.result()


def shared_regions(tasks: Sequence[TaskOp], shapes: Shapes) -> list[Regions]:
    """Each task's regions (`task_regions`), found once per shape: over a parameter for
    each constant the shape leaves out (`Shapes.constants`), each then fixed to a task's
    own value."""
    templates: dict[int, _Template] = {}
    out: list[Regions] = []
    for task, shape, constants in zip(tasks, shapes.ids, shapes.constants, strict=True):
        template = templates.get(shape)
        if template is None:
            template = templates[shape] = _Template.of(task, constants)
        out.append(template.instance(task.memrefs, constants))
    return out


@dataclass(frozen=True)
class _Template:
    """A shape's regions over parameters `names`: `regions`, each distinct one once, and
    per table (reads, writes, must-writes) the first position of each memref in the
    task's list, with the index of its region in `regions` (a task's must-writes are
    mostly its writes: fixed once, not twice). `fixings`: per region, where in its
    parameters each constant it has is, with the constant's index in `names`."""

    names: tuple[str, ...]
    regions: tuple[isl.Set, ...]
    tables: tuple[tuple[tuple[int, int], ...], ...]
    fixings: tuple[tuple[tuple[int, int], ...], ...]
    # The regions fixed, per tuple of the constants' values: generated schedules repeat a
    # body with the same subscripts on other memrefs (the same sets, found once).
    _by_values: dict[tuple[int, ...], tuple[isl.Set, ...]] = field(
        default_factory=dict[tuple[int, ...], tuple[isl.Set, ...]], compare=False, repr=False
    )
    # One Regions per tuple of values and of memrefs: tasks alike in both (a body repeated
    # on the same memrefs) share it, and with it the boxes it finds once.
    _made: dict[tuple[tuple[int, ...], tuple[SSAValue, ...]], Regions] = field(
        default_factory=dict[tuple[tuple[int, ...], tuple[SSAValue, ...]], Regions],
        compare=False,
        repr=False,
    )

    @staticmethod
    def of(task: TaskOp, constants: Sequence[arith.ConstantOp]) -> "_Template":
        names = tuple(f"{_CONSTANT}{k}" for k in range(len(constants)))
        walker = _Walker(params=names)
        for constant, name in zip(constants, names, strict=True):
            walker.lift.name(constant.result, name)
        walker.watch(task.memrefs)
        walker.walk_top(task.body.block.ops)
        found = walker.result()
        first = {value: k for k, value in reversed(list(enumerate(task.memrefs)))}
        # By their text: equal text, equal sets with equal constraints, which fixing
        # turns into equal results (equal sets written otherwise stay apart).
        distinct: dict[str, int] = {}
        regions: list[isl.Set] = []
        tables: list[tuple[tuple[int, int], ...]] = []
        for table in (found.reads, found.writes, found.must_writes):
            entries: list[tuple[int, int]] = []
            for root, region in table.items():
                index = distinct.setdefault(str(region), len(regions))
                if index == len(regions):
                    regions.append(region)
                entries.append((first[root], index))
            tables.append(tuple(entries))
        fixings = tuple(_fixing(region, names) for region in regions)
        return _Template(names, tuple(regions), tuple(tables), fixings)

    def instance(
        self, memrefs: Sequence[SSAValue], constants: Sequence[arith.ConstantOp]
    ) -> Regions:
        numbers = tuple(_constant_number(c) for c in constants)
        key = (numbers, tuple(memrefs))
        made = self._made.get(key)
        if made is not None:
            return made
        fixed = self._by_values.get(numbers)
        if fixed is None:
            values = [_isl_value(n) for n in numbers]
            fixed = self._by_values[numbers] = tuple(
                _fixed(region, fixing, values)
                for region, fixing in zip(self.regions, self.fixings, strict=True)
            )
        reads, writes, musts = (
            {memrefs[k]: fixed[index] for k, index in table} for table in self.tables
        )
        made = self._made[key] = Regions(reads, writes, musts)
        return made


def _constant_number(op: arith.ConstantOp) -> int:
    attr = op.value
    assert isinstance(attr, IntegerAttr)  # a used subscript (dhir.analysis.shapes)
    return attr.value.data


def _isl_value(value: int) -> isl.Val:
    if -(2**63) <= value < 2**63:  # what int_from_si takes; parsing text costs 8 times more
        return isl.Val.int_from_si(isl.DEFAULT_CONTEXT, value)
    return isl.Val(str(value))


def _fixing(region: isl.Set, names: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """For each of the constants `names` that `region` has as a parameter, in order: its
    position there and its index in `names` (fixing one moves none of the others)."""
    params = isl.dim_type.param
    found = ((region.find_dim_by_name(params, name), k) for k, name in enumerate(names))
    return tuple((at, k) for at, k in found if at >= 0)


def _fixed(
    region: isl.Set, fixing: Sequence[tuple[int, int]], values: Sequence[isl.Val]
) -> isl.Set:
    """`region` with the parameter at each position of `fixing` fixed to its constant's
    value in `values`, parameters projected out."""
    params = isl.dim_type.param
    for at, k in fixing:
        region = region.fix_val(params, at, values[k])
    return region.project_out(params, 0, region.dim(params)).coalesce()


def iteration_regions(
    memrefs: Iterable[SSAValue],
    body: Block,
    variables: Mapping[SSAValue, str],
    before: Sequence[Operation] = (),
) -> Regions:
    """The regions of `memrefs` that one run of `body` (a loop body) touches, over the
    loop variables `variables` names: each becomes an isl parameter of that name, so that
    two iterations' regions can be compared. `before`: ops outside `body` (views of
    `memrefs` and the values they take, in order) whose views the body may access."""
    walker = _Walker(params=tuple(variables.values()))
    walker.watch(memrefs)
    walker.walk_top(before)
    walker.values.update(variables)
    walker.walk_top(body.ops)
    return walker.result()


def iterations_independent(
    memrefs: Iterable[SSAValue],
    body: Block,
    values: range | None = None,
    before: Sequence[Operation] = (),
) -> bool:
    """Whether no iteration of the loop whose body is `body` writes an element of
    `memrefs` that another iteration reads or writes (for any two distinct values of the
    loop variable, its first block argument; of those in `values` only, where the loop's
    bounds and step are known: two tiles of a loop of step 32 start 32 apart, not 1).
    `before`: as `iteration_regions` takes it. Unproven is False."""
    return clashing(memrefs, body, values, before) is None


def clashing(
    memrefs: Iterable[SSAValue],
    body: Block,
    values: range | None = None,
    before: Sequence[Operation] = (),
) -> SSAValue | None:
    """The first of `memrefs` that two iterations of the loop whose body is `body` may
    both touch, one writing (as `iterations_independent` compares them); None if none."""
    roots = list(memrefs)
    variable = body.args[0]
    one = iteration_regions(roots, body, {variable: "ia"}, before)
    other = iteration_regions(roots, body, {variable: "ib"}, before)
    apart = isl.Set("[ia, ib] -> { : ia < ib or ia > ib }")
    if values is not None:
        apart = apart.intersect(_taken(values))
    bits = scalar_int_width(variable.type)
    if bits is not None and bits < INDEX_WIDTH:
        # An iN variable holds a signed N-bit value, whatever its casts read it as.
        half = 1 << (bits - 1)
        apart = apart.intersect(
            isl.Set(f"[ia, ib] -> {{ : -{half} <= ia < {half} and -{half} <= ib < {half} }}")
        )
    for memref, written in one.writes.items():
        clash = written & (other.read(memref) | other.written(memref))
        if not clash.intersect_params(apart).is_empty():
            return memref
    return None


def _taken(values: range) -> isl.Set:
    """The pairs (ia, ib) of values in `values` (a range of positive step)."""
    low, high, step = values.start, values.stop, values.step
    assert step > 0
    return isl.Set(
        f"[ia, ib] -> {{ : exists (ka, kb : ia = {low} + {step} * ka and "
        f"ib = {low} + {step} * kb) and {low} <= ia < {high} and {low} <= ib < {high} }}"
    )


@dataclass(frozen=True)
class SureAccesses:
    """Per memref, the elements that one run of a loop body surely reads with a plain
    load and surely writes with a plain store (not atomically), over the loop variables:
    accesses under no condition, in loops of known bounds, at known subscripts."""

    reads: dict[SSAValue, isl.Set]
    writes: dict[SSAValue, isl.Set]


def sure_accesses(
    memrefs: Iterable[SSAValue],
    body: Block,
    variables: Mapping[SSAValue, str],
    views: Sequence[Operation] = (),
    params: Sequence[str] = (),
    lift: Lifter | None = None,
    ops: Sequence[Operation] | None = None,
) -> SureAccesses:
    """What one run of `body` surely reads and writes of `memrefs`, over the loop variables
    `variables` names (isl parameters, as in `iteration_regions`). `views`: ops outside
    `body` (subviews, in order) that make the views of `memrefs` the body uses, whose
    accesses then count as accesses of the memref viewed. `params`, `lift`: as
    `may_accesses` takes them (by default, the names of `variables` and a new lifter).
    `ops`: the ops of `body` to count (by default all of them)."""
    walker = _Walker(
        params=tuple(params or variables.values()),
        lift=lift if lift is not None else Lifter(),
        sure={False: {}, True: {}},
        reshapes=True,
    )
    walker.watch(memrefs)
    walker.values.update(variables)
    walker.walk_top(views)
    walker.walk_top(body.ops if ops is None else ops)
    assert walker.sure is not None
    return SureAccesses(_union(walker.sure[False]), _union(walker.sure[True]))


@dataclass(frozen=True)
class MayAccesses:
    """Per memref, the elements that one run of a loop body may read and may write other
    than atomically (loads, stores, copies, linalg ops, ops this module does not know),
    and those it may update atomically, over the loop variables."""

    reads: dict[SSAValue, isl.Set]
    writes: dict[SSAValue, isl.Set]
    atomics: dict[SSAValue, isl.Set]


def may_accesses(
    memrefs: Iterable[SSAValue],
    body: Block,
    variables: Mapping[SSAValue, str],
    params: Sequence[str],
    lift: Lifter,
    views: Sequence[Operation] = (),
) -> MayAccesses:
    """What one run of `body` may read, write and update atomically of `memrefs`, as
    `sure_accesses` takes its arguments; `params`: every isl parameter the texts may
    name (those of `variables`, and the leaves `lift` names as wholes)."""
    walker = _Walker(params=tuple(params), lift=lift, atomics={}, reshapes=True)
    walker.watch(memrefs)
    walker.values.update(variables)
    walker.walk_top(views)
    walker.walk_top(body.ops)
    assert walker.atomics is not None
    return MayAccesses(_union(walker.reads), _union(walker.writes), _union(walker.atomics))


class SureSink(Protocol):
    """What `walk_sure_points` tells of each access that surely runs."""

    def points(
        self,
        op: Operation,
        root: SSAValue,
        points: isl.Set,
        values: tuple[int, ...],
        at: tuple[int, ...],
        through: SSAValue | None = None,
        calls: tuple[Operation, ...] = (),
    ) -> None:
        """`op` accesses `root` at each of `points`: the loop variables around it in
        order, outermost first, then its subscripts (at positions `at`), over parameters
        that stand for the integer literals of its bounds and subscripts, whose values
        are `values` in order. Accesses that differ only in their literals get one set
        (the same object), which a caller can work on once. `through`: the view of
        `root` the op accesses, whose indices the subscripts are mapped from. `calls`:
        the calls, outermost first, through which the walk reached `op`."""

    def element(
        self,
        op: Operation,
        root: SSAValue,
        index: tuple[int, ...],
        calls: tuple[Operation, ...] = (),
    ) -> None:
        """`op`, in no loop, accesses `root` at the literal subscripts `index`."""


def walk_sure_points(
    ops: Iterable[Operation],
    roots: Iterable[SSAValue],
    tell: SureSink,
    functions: Mapping[str, func.FuncOp] | None = None,
    known: Mapping[SSAValue, int] | None = None,
) -> None:
    """Walk `ops` (a function's body, run once in order) and `tell` of each access
    through one of `roots`, a buffer allocated in `ops` or a view of either, that surely
    runs at known subscripts: in no region that may or may not run (but an if whose
    condition the loops decide), in loops of bounds known exactly, with no iter_args
    (tasks count as run once, in order), before nothing that may not return (a while
    loop, an assert, a call of a function not in `functions`). Calls of a function of
    one block in `functions` walk its body. Each of its points runs; an access this
    module cannot follow so is not told of. `known`: integer values (arguments, extents
    measured) that are these numbers for this walk, as inputs given to a run fix them."""
    walker = _Walker(on_sure=tell, reshapes=True, functions=functions or {})
    for value, number in (known or {}).items():
        walker.lift.define(value, Lifted.at(number_at(number)))
    walker.watch(roots)
    walker.walk_top(ops)


@dataclass(frozen=True)
class CopyOverlap:
    """A `memref.copy` whose source and target are views of one buffer that surely share
    an element: the buffer, and the first such element (row-major)."""

    memref: SSAValue
    element: tuple[int, ...]


# A copy of one memref's elements into another's, in host or device memory.
Copy = memref_dialect.CopyOp | gpu.MemcpyOp


def copy_ends(op: Copy) -> tuple[SSAValue, SSAValue]:
    """The source and the target of `op`."""
    if isinstance(op, gpu.MemcpyOp):
        return op.src, op.dst
    return op.source, op.destination


def copy_overlap(op: Copy) -> CopyOverlap | None:
    """Where the source and the target of `op` are views of one buffer, made by views this
    module maps (subviews, casts, transposes, reshapes, reinterpret_casts of the buffer)
    at offsets that are numbers, that surely share an element without being the same
    view; else None (not proven: other buffers, an offset known at run time only)."""
    maps = _copy_maps(op)
    if maps is None or maps[1].is_equal(maps[2]):
        return None  # the same view (a cast of it, say) copies each element onto itself
    shared = (maps[1].range() & maps[2].range()).coalesce()
    if shared.is_empty():
        return None
    point = shared.lexmin().sample_point()
    dims = range(shared.dim(isl.dim_type.set))
    element = tuple(int(point.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in dims)
    return CopyOverlap(maps[0], element)


def copy_decided(op: Copy) -> bool:
    """Whether it is known, for every run of `op`, if its source and target share an
    element: one view copied onto itself, views of two buffers allocated apart (by
    different allocs, or different globals; or an allocation and an argument of the
    function that makes it), or views of one buffer this module maps (`copy_overlap`
    then tells an overlap). Not known: views of two function arguments (a caller may pass
    views of one buffer), of a loop's carried buffer, offsets known at run time only."""
    source, target = copy_ends(op)
    if source is target:
        return True
    base, other = view_chain(source)[1], view_chain(target)[1]
    if base is not other:
        return _apart(base, other)
    return _copy_maps(op) is not None


def _apart(base: SSAValue, other: SSAValue) -> bool:
    """Whether two buffers are surely not one: two allocations, two globals of different
    names, or one of each; or a buffer allocated in a function and an argument of it."""
    names = [_global(base), _global(other)]
    if names[0] is not None and names[0] == names[1]:
        return False  # one global, got twice
    if all(name is not None or _allocated(v) for name, v in zip(names, (base, other))):
        return True
    return _fresh_beside(base, other) or _fresh_beside(other, base)


def _fresh_beside(fresh: SSAValue, argument: SSAValue) -> bool:
    """Whether `fresh` is allocated in the function whose argument `argument` is: the
    argument was passed before the allocation was made."""
    if not _allocated(fresh) or not isinstance(argument, BlockArgument):
        return False
    function = argument.owner.parent_op()
    if not isinstance(function, func.FuncOp) or argument.owner is not function.body.block:
        return False
    op = fresh.owner
    while isinstance(op, Operation) and op is not function:
        op = op.parent_op()
    return op is function


def _allocated(value: SSAValue) -> bool:
    return isinstance(value.owner, Operation) and is_alloc(value.owner)


def _global(value: SSAValue) -> str | None:
    """The global `value` is, or None for another buffer."""
    return global_name(value.owner) if isinstance(value.owner, Operation) else None


def _copy_maps(op: Copy) -> tuple[SSAValue, isl.Map, isl.Map] | None:
    """The buffer that the source and the target of `op` both view, and the element maps
    of the two views, where both are known; else None."""
    source, target = copy_ends(op)
    if source is target:
        return None
    (first, base), (second, other) = view_chain(source), view_chain(target)
    if base is not other:
        return None
    walker = _Walker(reshapes=True)
    walker.watch([base])
    walker.walk_top([*first, *second])
    maps = [walker.element_map(value) for value in (source, target)]
    if maps[0] is None or maps[1] is None:
        return None
    return base, maps[0], maps[1]


def view_chain(value: SSAValue) -> tuple[list[Operation], SSAValue]:
    """The view ops that make `value` (outermost first), and the buffer they view."""
    chain: list[Operation] = []
    while isinstance(value.owner, Operation):
        source = view_source(value.owner)
        if source is None or not isinstance(source.type, MemRefType):
            break
        chain.insert(0, value.owner)
        value = source
    return chain, value


@dataclass(frozen=True)
class _View:
    """A value that points into the listed memref `root`: `subscripts` maps the value's
    own indices (named y0, y1, ...) to the root's, or is None when that is unknown (any
    element of the root may be meant). A listed memref is its own view, with None for
    the identity. `sure`: the value is this view, not maybe another memref (one an
    arith.select may pick instead); only then can a write through it be a must-write."""

    root: SSAValue
    subscripts: tuple[str, ...] | None
    known: bool = True
    sure: bool = True


@dataclass(frozen=True)
class _Nest:
    """The loops around an op: their variables, the constraints on them (isl text), and
    whether every op of the nest runs for every point (no condition, no unknown bound)."""

    names: tuple[str, ...]
    constraints: tuple[str, ...]
    exact: bool

    def with_loop(self, names: Sequence[str], constraints: Sequence[str], exact: bool) -> "_Nest":
        return _Nest((*self.names, *names), (*self.constraints, *constraints), self.exact and exact)

    def inexact(self) -> "_Nest":
        return _Nest(self.names, self.constraints, False)


@dataclass
class _Walker:
    # The views each value that points into a listed memref may be: one, or several
    # when an arith.select picks one of them.
    views: dict[SSAValue, tuple[_View, ...]] = field(default_factory=dict)
    values: dict[SSAValue, str] = field(default_factory=dict)  # isl names of loop variables
    reads: dict[SSAValue, list[isl.Set]] = field(default_factory=dict)
    writes: dict[SSAValue, list[isl.Set]] = field(default_factory=dict)
    musts: dict[SSAValue, list[isl.Set]] = field(default_factory=dict)
    _fresh: "count[int]" = field(default_factory=count)
    params: tuple[str, ...] = ()  # names of values that isl treats as parameters
    lift: Lifter = field(default_factory=Lifter)
    # The integer literals of bounds and subscripts, by the isl parameter standing for
    # each (`literal`).
    literals: dict[str, int] = field(default_factory=dict)
    # When asked for (`sure_accesses`): the elements plain loads (False) and stores
    # (True) surely read and write, each for every point of its nest.
    sure: dict[bool, dict[SSAValue, list[isl.Set]]] | None = None
    # When asked for (`may_accesses`): the elements atomic updates may touch, kept out
    # of `reads` and `writes`; `atomic`: whether the op being walked is such an update.
    atomics: dict[SSAValue, list[isl.Set]] | None = None
    atomic: bool = False
    # Whether to map the indices of reinterpret_cast, expand_shape and collapse_shape
    # views to their source's (`_reshaped`), for the loop analyses.
    reshapes: bool = False
    # When asked for (`walk_sure_points`): told of each scalar load or store that surely
    # runs, straight through a listed memref at known subscripts; `accessing`: that op.
    on_sure: SureSink | None = None
    accessing: Operation | None = None
    # For `walk_sure_points`: the module's functions by name, those whose bodies are
    # being walked for a call, and whether an op walked may not have returned (nothing
    # after it surely runs).
    functions: Mapping[str, func.FuncOp] = field(default_factory=dict[str, func.FuncOp])
    calling: set[func.FuncOp] = field(default_factory=set[func.FuncOp])
    stopped: bool = False
    call_sites: list[Operation] = field(default_factory=list[Operation])  # outermost first
    _stops: dict[Operation, bool] = field(default_factory=dict[Operation, bool])

    def result(self) -> Regions:
        return Regions(_union(self.reads), _union(self.writes), _union(self.musts))

    def watch(self, memrefs: Iterable[SSAValue]) -> None:
        """Record the accesses of each of `memrefs` (and of its views) as its own."""
        for memref in memrefs:
            self.views[memref] = (_View(memref, None),)

    def walk_top(self, ops: Iterable[Operation]) -> None:
        """Walk `ops` in no loop and under no condition: every op of theirs runs."""
        self.walk(ops, _Nest((), (), True))

    def fresh(self, prefix: str = "v") -> str:
        return f"{prefix}{next(self._fresh)}"

    def literal(self, expr: Expr) -> Expr:
        """`expr` with an integer literal (or each bound of a range that is one) replaced
        by a parameter of its own: tasks that differ only in their constants then make
        regions of one text, which isl parses once (`_image`). Only for terms that stand
        alone in a sum: a literal factor must stay a number."""
        if isinstance(expr, tuple):
            return (self._literal(expr[0]), self._literal(expr[1]))
        return None if expr is None else self._literal(expr)

    def _literal(self, text: str) -> str:
        if not _INTEGER.fullmatch(text):
            return text
        name = self.fresh(_LITERAL)
        self.literals[name] = int(text)
        return name

    def element_map(self, value: SSAValue) -> isl.Map | None:
        """Each index of the view `value` (of a static shape) to the element of its one
        root it surely is; None where that is not known."""
        views = self.views.get(value, ())
        type_ = value.type
        if len(views) != 1 or not isinstance(type_, MemRefType):
            return None
        view = views[0]
        shape = type_.get_shape()
        if not view.known or not view.sure or DYNAMIC_INDEX in shape:
            return None
        own = [f"y{k}" for k in range(len(shape))]
        outs = [f"x{k}" for k in range(len(_shape(view.root.type)))]
        subscripts = (
            own if view.subscripts is None else [_substitute(s, own) for s in view.subscripts]
        )
        if len(subscripts) != len(outs):
            return None
        bounds = [f"0 <= {y} < {n}" for y, n in zip(own, shape, strict=True)]
        equalities = [f"{x} = {s}" for x, s in zip(outs, subscripts, strict=True)]
        body = " and ".join([*bounds, *equalities]) or "true"
        literals = list(dict.fromkeys(_LITERAL_NAME.findall(body)))
        prefix = f"[{', '.join(literals)}] -> " if literals else ""
        found = isl.Map(f"{prefix}{{ [{', '.join(own)}] -> [{', '.join(outs)}] : {body} }}")
        for name in literals:
            at = found.find_dim_by_name(isl.dim_type.param, name)
            found = found.fix_val(isl.dim_type.param, at, isl.Val(str(self.literals[name])))
            found = found.project_out(isl.dim_type.param, at, 1)
        return found

    # --- values -------------------------------------------------------------------

    def expr(self, value: SSAValue) -> Expr:
        return self._text(self.lift.value(value))

    def _text(self, lifted: Lifted | None) -> Expr:
        """`lifted` over the loop variables' names; a leaf without one is unknown."""
        if lifted is None:
            return None
        low = isl_text(lifted.low, self.values)
        if lifted.exact:
            return low
        high = isl_text(lifted.high, self.values)
        return None if low is None or high is None else (low, high)

    def map_exprs(self, amap: object, operands: Sequence[SSAValue]) -> list[Expr] | None:
        """The results of an affine map applied to `operands` (dims, then symbols)."""
        if not isinstance(amap, AffineMap):
            return None
        results = self.lift.map(amap, operands)
        out = [self._text(r) for r in results or []]
        return None if results is None or any(e is None for e in out) else out

    # --- ops ----------------------------------------------------------------------

    def walk(self, ops: Iterable[Operation], nest: _Nest) -> None:
        for op in ops:
            if self.on_sure is None:
                self.visit(op, nest)
                continue
            # A loop whose body may not return runs its later iterations only maybe.
            if isinstance(op, _LOOPS) and self._may_stop(op):
                self.stopped = True
            self.visit(op, nest.inexact() if self.stopped else nest)
            if not self.stopped and self._may_stop(op):
                self.stopped = True

    def _may_stop(self, op: Operation) -> bool:
        """Whether `op` may not return: it or an op in it is a while loop (which may
        never end), an assert, or a call of a function this walk does not know or that
        may not return."""
        if not op.regions or _stop_kind(type(op)) is _Stop.MAY:
            return self._stops_itself(op)
        known = self._stops.get(op)
        if known is None:
            self._stops[op] = False  # a recursive call is not followed twice
            inner = (o for region in op.regions for block in region.blocks for o in block.ops)
            known = self._stops[op] = any(self._may_stop(o) for o in inner)
        return known

    def _stops_itself(self, op: Operation) -> bool:
        kind_ = _stop_kind(type(op))
        if kind_ is not _Stop.CALL:
            return kind_ is _Stop.MAY
        assert isinstance(op, func.CallOp)
        callee = self.functions.get(op.callee.string_value())
        if callee is None or len(callee.body.blocks) != 1 or callee in self.calling:
            return True
        return self._may_stop(callee)

    def call(self, op: func.CallOp, nest: _Nest) -> None:
        """Walk the body of the function `op` calls, of one block, its memref arguments
        the views of the call's operands and its index arguments their values (for
        `walk_sure_points`); a recursive call is not followed."""
        callee = self.functions.get(op.callee.string_value())
        if callee is not None and len(callee.body.blocks) == 1 and callee not in self.calling:
            args = callee.body.blocks[0].args
            # The arguments' own meanings come back after the call (a call of the entry).
            saved = [(self.views.pop(a, None), self.values.pop(a, None)) for a in args]
            for arg, operand in zip(args, op.arguments, strict=True):
                views = saved[args.index(operand)][0] if operand in args else None
                views = views or self.views.get(operand)
                value = self.expr(operand) if isinstance(operand.type, IndexType) else None
                if views is not None:
                    self.views[arg] = views
                elif isinstance(value, str) and operand not in args:
                    self.values[arg] = f"({value})"
            self.calling.add(callee)
            self.call_sites.append(op)
            self.walk(callee.body.blocks[0].ops, nest)
            self.call_sites.pop()
            self.calling.discard(callee)
            for arg, (views, value) in zip(args, saved, strict=True):
                self.views.pop(arg, None)
                self.values.pop(arg, None)
                if views is not None:
                    self.views[arg] = views
                if value is not None:
                    self.values[arg] = value
        self._unknown(op)

    def visit(self, op: Operation, nest: _Nest) -> None:
        found = facts(op)
        if found is not None and found.kind is Kind.PURE and not op.regions:
            # Most ops of a body (constants, arithmetic): none of the cases below but the
            # last can hold for an op without regions that is no select.
            if not isinstance(op, arith.SelectOp):
                if any(v in self.views for v in op.operands):
                    self._unknown(op)
                return
        if found is not None and found.kind in _ACCESS_KINDS:
            if self._escapes(op, found.memrefs()):
                self._unknown(op)
                return
            plain = found.kind in (Kind.LOAD, Kind.STORE)
            self.atomic = found.kind is Kind.ATOMIC
            for access in self._sure_transfer(op) or found.accesses:
                # A whole access touches all of the memref only when it copies it (a
                # transfer op may touch any part).
                told = (plain and not access.whole) or found.kind is Kind.COPY
                self.accessing = op if told else None
                self.access(access, nest, plain)
            self.atomic = False
            self.accessing = None
            self._walk_regions(op, nest.inexact())  # a generic_atomic_rmw's body
        elif found is not None and found.kind in (Kind.VIEW, Kind.SHAPE):
            if self._escapes(op, op.operands[:1]):
                self._unknown(op)
            elif found.view is not None:
                self.view(op, found.view)
            else:
                self._derive(op, found.derived)
        elif isinstance(op, arith.SelectOp) and not self._escapes(op, op.operands[1:3]):
            self.select(op, nest)
        elif isinstance(op, _LOOPS) and not self._escapes(op, []):
            self.loop(op, nest)
        elif isinstance(op, LinalgStructuredOperation) and not self._escapes(
            op, [*op.inputs, *op.outputs]
        ):
            self._linalg(op, nest)
        elif isinstance(op, _STRUCTURED) and not self._escapes(op, []):
            self._branches(op, nest)
        elif self.on_sure is not None and found is not None and found.kind is Kind.ALLOC:
            for result in op.results:
                if isinstance(result.type, MemRefType):
                    self.views[result] = (_View(result, None),)
        elif self.on_sure is not None and isinstance(op, ScheduleOp | TaskOp):
            # Tasks run once each, in program order: the sequential meaning.
            if isinstance(op, TaskOp) and not nest.names and nest.exact:
                if self._literal_task(op, self.on_sure):
                    return
                # Each task names from one place again: tasks that differ only in their
                # literals then give one text, which isl parses once (thousands of
                # tasks). That place lies past every name made outside tasks so far (a
                # view's offset before the schedule is a literal too, and must keep
                # its value), and the names after the task go on from it.
                floor = next(self._fresh)
                self._fresh = count(floor)
                self._walk_regions(op, nest)
                self._fresh = count(floor)
                return
            self._walk_regions(op, nest)
        elif self.on_sure is not None and isinstance(op, func.CallOp):
            self.call(op, nest)
        elif op.regions or any(v in self.views for v in op.operands):
            self._unknown(op)

    def _branches(self, op: Operation, nest: _Nest) -> None:
        """Walk a structured op's regions: for `walk_sure_points`, an scf.if or affine.if
        whose condition is an exact affine constraint on the loops' variables runs its
        then-region exactly where that holds and its else-region where it does not;
        any other region may or may not run."""
        branches = self._conditions(op) if self.on_sure is not None else None
        if branches is None:
            self._walk_regions(op, nest.inexact())
            return
        for region, condition in zip(op.regions, branches, strict=True):
            for block in region.blocks:
                self.walk(block.ops, nest.with_loop((), (condition,), True))

    def _conditions(self, op: Operation) -> tuple[str, str] | None:
        """The isl text of the condition under which `op`'s then-region runs, and of its
        negation; None where that is not exact."""
        if isinstance(op, affine.IfOp):
            return self._affine_condition(op)
        if not isinstance(op, scf.IfOp):
            return None
        compare = op.cond.owner
        if not isinstance(compare, arith.CmpiOp) or not isinstance(compare.lhs.type, IndexType):
            return None
        sides = (self.expr(compare.lhs), self.expr(compare.rhs))
        predicate = compare.predicate.value.data
        if not all(isinstance(e, str) for e in sides) or predicate not in _SIGNED:
            return None
        holds, fails = _SIGNED[predicate]
        lhs, rhs = (f"({e})" for e in sides)
        return f"{lhs} {holds} {rhs}", f"{lhs} {fails} {rhs}"

    def _affine_condition(self, op: affine.IfOp) -> tuple[str, str] | None:
        iset = op.condition.data
        sides = [e for c in iset.constraints for e in (c.lhs, c.rhs)]
        amap = AffineMap(iset.num_dims, iset.num_symbols, tuple(sides))
        exprs = self.map_exprs(amap, op.operands)
        if exprs is None or not all(isinstance(e, str) for e in exprs):
            return None
        holds: list[str] = []
        fails: list[str] = []
        for k, constraint in enumerate(iset.constraints):
            lhs, rhs = f"({exprs[2 * k]})", f"({exprs[2 * k + 1]})"
            relation = "=" if constraint.kind.value == "==" else constraint.kind.value
            holds.append(f"{lhs} {relation} {rhs}")
            fails.append(f"not ({lhs} {relation} {rhs})")
        if not holds:
            return None
        return " and ".join(holds), f"({' or '.join(fails)})"

    def _walk_regions(self, op: Operation, nest: _Nest) -> None:
        for region in op.regions:
            for block in region.blocks:
                self.walk(block.ops, nest)

    def loop(self, op: Operation, nest: _Nest) -> None:
        if isinstance(op, scf.ForOp):
            self.scf_for(op, nest)
        elif isinstance(op, scf.ParallelOp):
            self.scf_parallel(op, nest)
        elif isinstance(op, affine.ForOp):
            self.affine_for(op, nest)
        else:
            self.affine_parallel(op, nest)

    def _escapes(self, op: Operation, memrefs: Sequence[SSAValue]) -> bool:
        """Whether `op` takes a pointer into a listed memref other than as `memrefs`
        (an address as data, a memref carried by a loop or yielded)."""
        expected = set(memrefs)
        return any(v in self.views and v not in expected for v in op.operands)

    def _unknown(self, op: Operation) -> None:
        """What effects.py finds `op` reads and writes counts whole; whatever its results
        point into becomes an unknown view."""
        roots = {v: frozenset(view.root for view in views) for v, views in self.views.items()}
        before = set(roots)
        reads, writes = memory_effects([op], roots)
        for root in reads:
            self._add(self.reads, root, whole(root.type))
        for root in writes:
            self._add(self.writes, root, whole(root.type))
        for value in set(roots) - before:
            self.views[value] = tuple(_View(root, None, known=False) for root in roots[value])

    def _derive(self, op: Operation, derived: Sequence[SSAValue]) -> None:
        """`derived` (results of `op`) point into what its operands point into, at
        elements this module does not follow (extract_strided_metadata's base buffer)."""
        roots = {view.root for v in op.operands for view in self.views.get(v, ())}
        for value in derived:
            self.views[value] = tuple(_View(root, None, known=False) for root in roots)

    # --- accesses -----------------------------------------------------------------

    def access(self, access: Access, nest: _Nest, plain: bool = False) -> None:
        """Record one access an op's facts name; `plain`: a load or store, not atomic."""
        memref = access.memref
        read, write, exact = access.read, access.write, access.exact
        if access.whole:
            self.whole_access(memref, nest, read=read, write=write, exact=exact)
            return
        if access.map is not None:
            subscripts = self.map_exprs(access.map, access.indices)
            exprs: list[Expr] = list(subscripts) if subscripts is not None else []
            if subscripts is None:
                exprs = [None] * _rank(memref)
        else:
            exprs = [self.expr(v) for v in access.indices]
        moved = access.lanes
        if moved is None:
            self._access(memref, exprs, nest, (), read, write, exact, plain)
            return
        lanes = moved.get_shape()
        first = len(exprs) - len(lanes)
        type_ = memref.type
        scalar = isinstance(type_, MemRefType) and not isinstance(
            type_.get_element_type(), VectorType
        )
        if not scalar or first < 0 or moved.get_num_scalable_dims():
            # Lanes that are not the memref's trailing elements (a memref of vectors, a
            # scalable vector): the whole memref, never a must-write.
            self._access(memref, [None] * len(exprs), nest, (), read, write, exact)
            return
        extra = tuple((first + k, width) for k, width in enumerate(lanes))
        self._access(memref, exprs, nest, extra, read, write, exact, plain)

    def _access(
        self,
        memref: SSAValue,
        exprs: Sequence[Expr],
        nest: _Nest,
        lanes: tuple[tuple[int, int], ...],
        read: bool = False,
        write: bool = False,
        exact: bool = True,
        plain: bool = False,
    ) -> None:
        """Record an access of `memref` at `exprs` (None: unknown) for every point of
        `nest`; `lanes` widens dimension d to [e, e + width) for vector accesses; `exact`:
        a write overwrites every element named; `plain`: a load or store (see `sure`). A
        memref that may be one of several views accesses each of them."""
        for view in self.views.get(memref, ()):
            self._view_access(view, memref, exprs, nest, lanes, read, write, exact, plain)

    def _view_access(
        self,
        view: _View,
        memref: SSAValue,
        exprs: Sequence[Expr],
        nest: _Nest,
        lanes: tuple[tuple[int, int], ...],
        read: bool,
        write: bool,
        exact: bool,
        plain: bool = False,
    ) -> None:
        names = list(nest.names)
        constraints = list(nest.constraints)
        own: list[str] = []
        surely = nest.exact and view.known and view.sure  # runs, at the elements named
        for d, e in enumerate(self.literal(e) for e in exprs):
            y = self.fresh("y")
            names.append(y)
            own.append(y)
            width = dict(lanes).get(d)
            if e is None:
                surely = False
            elif isinstance(e, tuple):
                surely = False
                low, high = e
                end = f"<= {high}" if width is None else f"< ({high}) + {width}"
                constraints.append(f"{low} <= {y} {end}")
            elif width is None:
                constraints.append(f"{y} = {e}")
            else:
                constraints.append(f"{e} <= {y} < ({e}) + {width}")
        if self.on_sure is not None:
            # Only the accesses that surely run are asked for, not the regions.
            if self.accessing is not None and nest.exact and all(isinstance(e, str) for e in exprs):
                index = _literal_index(exprs) if not lanes and not nest.constraints else None
                self._tell_view(view, memref, surely, own, names, constraints, index)
            return
        region = self._image(view, own, names, constraints)
        if self.atomics is not None and self.atomic:
            self._add(self.atomics, view.root, region)
            return
        if read:
            self._add(self.reads, view.root, region)
        if write:
            self._add(self.writes, view.root, region)
            if exact and surely:
                self._add(self.musts, view.root, region)
        if self.sure is not None and plain and surely and (read or exact):
            self._add(self.sure[write], view.root, region)

    def _sure_transfer(self, op: Operation) -> tuple[Access, ...]:
        """For `walk_sure_points`: a transfer op that moves each of its lanes (no mask, all
        in bounds, the minor identity map) as the access of a vector load or store."""
        if self.on_sure is None or not isinstance(
            op, vector.TransferReadOp | vector.TransferWriteOp
        ):
            return ()
        value = op.result if isinstance(op, vector.TransferReadOp) else op.vector
        source, lanes = op.source, value.type
        if op.mask is not None or not isinstance(lanes, VectorType):
            return ()
        flags = op.in_bounds.data
        rank = _rank(source)
        identity = AffineMap.minor_identity(rank, lanes.get_num_dims())
        if op.permutation_map.data != identity or not all(
            isinstance(f, IntegerAttr) and f.value.data for f in flags
        ):
            return ()
        read = isinstance(op, vector.TransferReadOp)
        indices = tuple(op.indices)
        return (Access(source, read, not read, indices, None, lanes, False, not read, value),)

    def _literal_task(self, task: TaskOp, sink: SureSink) -> bool:
        """Tell `sink` of the accesses of a task whose body is only constants, arithmetic
        and scalar loads and stores of listed memrefs at constant subscripts, as
        generated schedules' tasks are, without the walk; False for any other body.
        Every task of a 10,000-task schedule comes here before a run (`check_bounds`):
        the ops are read through `first_op`/`next_op` (not `block.ops`, an iterator
        object and a property a step) and told apart by class (`_memref_position`)."""
        accesses: list[tuple[Operation, SSAValue, tuple[int, ...]]] = []
        op = task.body.block.first_op
        while op is not None:
            operands = tuple(op.operands)  # not the named getters: thousands of tasks
            at = _memref_position(type(op))
            if at is not None:
                memref = operands[at]
                index = tuple(map(_constant_index, operands[at + 1 :]))
                if None in index or not self._listed(memref):
                    return False
                accesses.append((op, memref, cast(tuple[int, ...], index)))
            elif (
                op.regions
                or any(isinstance(v.type, MemRefType) for v in operands)
                or _stop_kind(type(op)) is not _Stop.NEVER
            ):
                return False
            op = op.next_op
        for op, memref, index in accesses:
            sink.element(op, memref, index)
        self._stops[task] = False  # none of its ops may stop (`_may_stop` need not look)
        return True

    def _tell_view(
        self,
        view: _View,
        memref: SSAValue,
        surely: bool,
        own: list[str],
        names: list[str],
        constraints: list[str],
        index: tuple[int, ...] | None,
    ) -> None:
        """Tell `on_sure` of an access at known subscripts that surely runs, through
        `memref`, one of whose views is `view`: against the memref's own shape when it
        is a view (whatever it views), and against the root's where the view maps its
        indices there (`surely`: it is that view, of known subscripts). `index`: the
        subscripts, where they are literals in no loop (no isl then)."""
        assert self.on_sure is not None and self.accessing is not None
        if memref is not view.root:
            self._tell_at(memref, own, names, constraints, index)
        if not surely:
            return
        if view.subscripts is None:
            self._tell_at(view.root, own, names, constraints, index)
            return
        outs = [self.fresh("x") for _ in view.subscripts]
        mapped = [_substitute(s, own) for s in view.subscripts]
        equalities = [f"{x} = {s}" for x, s in zip(outs, mapped, strict=True)]
        through = memref if memref is not view.root else None
        self._tell_sure(view.root, outs, [*names, *outs], [*constraints, *equalities], through)

    def _tell_at(
        self,
        memref: SSAValue,
        own: list[str],
        names: list[str],
        constraints: list[str],
        index: tuple[int, ...] | None,
    ) -> None:
        assert self.on_sure is not None and self.accessing is not None
        if index is not None:
            self.on_sure.element(self.accessing, memref, index, tuple(self.call_sites))
        else:
            self._tell_sure(memref, own, names, constraints)

    def _listed(self, memref: SSAValue) -> bool:
        """Whether `memref` is only itself, a listed memref (`_View(memref, None)`)."""
        views = self.views.get(memref)
        if views is None or len(views) != 1:
            return False
        view = views[0]
        return view.root is memref and view.subscripts is None and view.known and view.sure

    def _tell_sure(
        self,
        root: SSAValue,
        own: list[str],
        names: list[str],
        constraints: list[str],
        through: SSAValue | None = None,
    ) -> None:
        """Tell `on_sure` the points (loop variables, then the subscripts `own`) at which
        the op being walked surely accesses `root` (through the view `through`, whose
        indices map to the root's)."""
        assert self.on_sure is not None and self.accessing is not None
        body = " and ".join(constraints) or "true"
        literals = list(dict.fromkeys(_LITERAL_NAME.findall(body)))
        prefix = f"[{', '.join(literals)}] -> " if literals else ""
        points = _parse(f"{prefix}{{ [{', '.join(names)}] : {body} }}")
        values = tuple(self.literals[name] for name in literals)
        at = tuple(names.index(y) for y in own)
        calls = tuple(self.call_sites)
        self.on_sure.points(self.accessing, root, points, values, at, through, calls)

    def whole_access(
        self,
        memref: SSAValue,
        nest: _Nest,
        read: bool = False,
        write: bool = False,
        exact: bool = True,
    ) -> None:
        type_ = memref.type
        if not isinstance(type_, MemRefType):
            # An unranked memref (a `memref.copy` of `memref<*xf32>`s): its type has no
            # shape to bound the access, so it may reach all of the memrefs it views;
            # never a must-write.
            for view in self.views.get(memref, ()):
                if read:
                    self._add(self.reads, view.root, whole(view.root.type))
                if write:
                    self._add(self.writes, view.root, whole(view.root.type))
            return
        shape = type_.get_shape()
        exprs: list[Expr] = []
        constraints: list[str] = []
        names: list[str] = []
        for extent in shape:
            v = self.fresh("w")
            names.append(v)
            exprs.append(v)
            constraints.append(f"0 <= {v}" if extent == DYNAMIC_INDEX else f"0 <= {v} < {extent}")
        inner = nest.with_loop(names, constraints, DYNAMIC_INDEX not in shape)
        self._access(memref, exprs, inner, (), read=read, write=write, exact=exact)

    def _image(
        self, view: _View, own: list[str], names: list[str], constraints: list[str]
    ) -> isl.Set:
        """The root's elements that view indices `own` reach, over the loop variables."""
        root_type = view.root.type
        shape = _shape(root_type)
        outs = [f"x{k}" for k in range(len(shape))]
        if view.subscripts is None and view.known:
            subscripts: Sequence[str | None] = own
        elif view.subscripts is None:
            subscripts = [None] * len(shape)
        else:
            subscripts = [_substitute(s, own) for s in view.subscripts]
        equalities = [f"{x} = {s}" for x, s in zip(outs, subscripts, strict=True) if s is not None]
        body = " and ".join([*constraints, *equalities]) or "true"
        literals = list(dict.fromkeys(_LITERAL_NAME.findall(body)))
        params = [*self.params, *literals]
        prefix = f"[{', '.join(params)}] -> " if params else ""
        text = f"{prefix}{{ [{', '.join(outs)}] : exists ({', '.join(names) or 'e'} : {body}) }}"
        region = _within(text, root_type)
        # Each literal's parameter fixed to its value and projected out: the set the text
        # with the literals written in describes.
        for name in literals:
            at = region.find_dim_by_name(isl.dim_type.param, name)
            region = region.fix_val(isl.dim_type.param, at, isl.Val(str(self.literals[name])))
            region = region.project_out(isl.dim_type.param, at, 1)
        return region

    # --- views --------------------------------------------------------------------

    def view(self, op: Operation, kind: ViewKind) -> None:
        sources = self.views.get(op.operands[0])
        if sources is None:
            return
        if kind is ViewKind.SAME:
            for result in op.results:
                self.views[result] = sources
            return
        if kind is ViewKind.OTHER:
            mapping = self._reshaped(op, sources)
        elif kind is ViewKind.TRANSPOSE:
            mapping = _transposed(op)
        else:
            mapping = self._subview(op)
        for result in op.results:
            self.views[result] = tuple(_subview_of(source, mapping) for source in sources)

    def _reshaped(self, op: Operation, sources: tuple[_View, ...]) -> list[str] | None:
        """The source index for each result index y_k of a reinterpret_cast (of a listed
        memref itself, whose layout is the identity), an expand_shape or a collapse_shape,
        where the sizes and strides that takes are known (`reshapes`); else None."""
        if not self.reshapes:
            return None
        if isinstance(op, memref_dialect.ExpandShapeOp):
            return _expanded(op)
        if isinstance(op, memref_dialect.CollapseShapeOp):
            return _collapsed(op)
        if not isinstance(op, memref_dialect.ReinterpretCastOp) or any(
            view.subscripts is not None or not view.known for view in sources
        ):
            return None
        # Its offset and strides count from the start of the source's buffer: a listed
        # memref of the identity layout starts there.
        shape = _shape(sources[0].root.type) if sources else ()
        if any(not _identity(v.root.type) or _shape(v.root.type) != shape for v in sources):
            return None
        offsets = _static(op.properties.get("static_offsets"))
        strides = _static(op.properties.get("static_strides"))
        if offsets is None or strides is None or DYNAMIC_INDEX in strides or not shape:
            return None
        offset = self.expr(op.operands[1]) if offsets[0] == DYNAMIC_INDEX else str(offsets[0])
        if not isinstance(offset, str):
            return None
        linear = " + ".join([f"({offset})", *(f"{s}*{{{k}}}" for k, s in enumerate(strides))])
        return _unflattened(linear, shape)

    def select(self, op: Operation, nest: _Nest) -> None:
        """An arith.select of two memrefs may be either: each access through it is an
        access of both, and no write through it is a must-write."""
        chosen = [self.views.get(v) for v in op.operands[1:3]]
        if chosen[0] is None and chosen[1] is None:
            return  # a choice of values that point nowhere listed
        if op.operands[1] is op.operands[2]:
            self.views[op.results[0]] = chosen[0] or ()
            return
        # A memref that is not listed (a local allocation) is one of the choices too.
        self.views[op.results[0]] = tuple(
            replace(view, sure=False) for views in chosen for view in views or ()
        )

    def _subview(self, op: Operation) -> list[str] | None:
        """The source index for each result index y_k of a subview (offset + stride *
        y_k), or None when it drops dimensions or has an unknown offset or stride."""
        offsets = _static(op.properties.get("static_offsets"))
        strides = _static(op.properties.get("static_strides"))
        if offsets is None or strides is None or DYNAMIC_INDEX in strides:
            return None
        sizes = _static(op.properties.get("static_sizes"))
        result = op.results[0].type
        if sizes is None or not isinstance(result, MemRefType):
            return None
        kept = _kept_dims(sizes, len(result.get_shape()))
        if kept is None:
            return None
        dynamic = iter(op.operands[1:])
        out: list[str] = []
        for d, (offset, stride) in enumerate(zip(offsets, strides, strict=True)):
            start = self.expr(next(dynamic)) if offset == DYNAMIC_INDEX else str(offset)
            start = self.literal(start)
            if not isinstance(start, str):
                return None
            k = kept.get(d)
            out.append(f"({start})" if k is None else f"({start}) + {stride}*{{{k}}}")
        return out

    # --- loops --------------------------------------------------------------------

    def _loop_var(
        self, var: SSAValue, low: Expr, high: Expr, step: Expr
    ) -> tuple[list[str], list[str], bool]:
        name = self.fresh("i")
        self.values[var] = name
        constraints: list[str] = []
        exact = all(isinstance(e, str) for e in (low, high, step))
        low, high = self.literal(low), self.literal(high)
        if low is not None:
            constraints.append(f"{name} >= {_lowest(low)}")
        if high is not None:
            constraints.append(f"{name} < {_highest(high)}")
        names = [name]
        if isinstance(low, str) and isinstance(step, str) and step != "1":
            try:
                stride = int(step)
            except ValueError:
                stride = 0
            if stride > 0:
                k = self.fresh("k")
                names.append(k)
                constraints.append(f"{name} = ({low}) + {stride}*{k}")
            else:
                exact = False
        return names, constraints, exact

    def scf_for(self, op: Operation, nest: _Nest) -> None:
        block = op.regions[0].block
        # An iN loop compares signed: the lifter reads its bounds as signed values.
        lb, ub, step = (self.expr(v) for v in op.operands[:3])
        names, constraints, exact = self._loop_var(block.args[0], lb, ub, step)
        self.walk(block.ops, nest.with_loop(names, constraints, exact and len(block.args) == 1))

    def scf_parallel(self, op: Operation, nest: _Nest) -> None:
        block = op.regions[0].block
        ranks = len(block.args)
        bounds = [self.expr(v) for v in op.operands[: 3 * ranks]]
        inner = nest
        for k, var in enumerate(block.args):
            names, constraints, exact = self._loop_var(
                var, bounds[k], bounds[ranks + k], bounds[2 * ranks + k]
            )
            inner = inner.with_loop(names, constraints, exact)
        exact_reductions = len(op.results) == 0
        self.walk(block.ops, inner if exact_reductions else inner.inexact())

    def affine_for(self, op: Operation, nest: _Nest) -> None:
        lower = op.properties.get("lowerBoundMap")
        upper = op.properties.get("upperBoundMap")
        step_attr = op.properties.get("step")
        low_ops = op.operands[: _map_arity(lower)]
        high_ops = op.operands[len(low_ops) : len(low_ops) + _map_arity(upper)]
        lows = self.map_exprs(getattr(lower, "data", None), low_ops)
        highs = self.map_exprs(getattr(upper, "data", None), high_ops)
        step = str(step_attr.value.data) if isinstance(step_attr, IntegerAttr) else None
        block = op.regions[0].block
        name = self.fresh("i")
        self.values[block.args[0]] = name
        exact = _all_exact(lows) and _all_exact(highs) and step is not None
        lows = [self.literal(e) for e in lows] if lows is not None else None
        highs = [self.literal(e) for e in highs or []]
        constraints = [f"{name} >= {_lowest(e)}" for e in lows or []]
        constraints += [f"{name} < {_highest(e)}" for e in highs]
        names = [name]
        if lows is not None and step not in (None, "1"):
            if len(lows) == 1 and isinstance(lows[0], str):
                k = self.fresh("k")
                names.append(k)
                constraints.append(f"{name} = ({lows[0]}) + {step}*{k}")
            else:
                exact = False
        only_iv = len(block.args) == 1
        self.walk(block.ops, nest.with_loop(names, constraints, exact and only_iv))

    def affine_parallel(self, op: Operation, nest: _Nest) -> None:
        lower = op.properties.get("lowerBoundsMap")
        upper = op.properties.get("upperBoundsMap")
        split = _map_arity(lower)
        lows = self.map_exprs(getattr(lower, "data", None), op.operands[:split])
        highs = self.map_exprs(getattr(upper, "data", None), op.operands[split:])
        low_groups = _groups(op.properties.get("lowerBoundsGroups"))
        high_groups = _groups(op.properties.get("upperBoundsGroups"))
        steps = op.properties.get("steps")
        block = op.regions[0].block
        inner = nest
        for k, var in enumerate(block.args):
            step = _step_at(steps, k)
            lo = _group(lows, low_groups, k)
            hi = _group(highs, high_groups, k)
            name = self.fresh("i")
            self.values[var] = name
            exact = _all_exact(lo) and _all_exact(hi) and step is not None
            lo = [self.literal(e) for e in lo] if lo is not None else None
            constraints = [f"{name} >= {_lowest(e)}" for e in lo or []]
            constraints += [f"{name} < {_highest(self.literal(e))}" for e in hi or []]
            names = [name]
            if step != 1:
                if lo is not None and len(lo) == 1 and isinstance(lo[0], str) and (step or 0) > 0:
                    var_k = self.fresh("k")
                    names.append(var_k)
                    constraints.append(f"{name} = ({lo[0]}) + {step}*{var_k}")
                else:
                    exact = False
            inner = inner.with_loop(names, constraints, exact)
        self.walk(block.ops, inner if not op.results else inner.inexact())

    # --- linalg -------------------------------------------------------------------

    def _linalg(self, op: LinalgStructuredOperation, nest: _Nest) -> None:
        operands = [*op.inputs, *op.outputs]
        for block in op.body.blocks:
            self.walk(block.ops, nest.inexact())
        if not any(v in self.views for v in operands):
            return
        try:
            ranges = op.get_static_loop_ranges()
            maps = op.get_indexing_maps()
        except Exception:  # noqa: BLE001 - xDSL raises several kinds for odd ops
            ranges, maps = None, None
        if ranges is None or maps is None or len(maps) != len(operands) or DYNAMIC_INDEX in ranges:
            self._unknown(op)
            return
        names = [self.fresh("l") for _ in ranges]
        constraints = [f"0 <= {n} < {r}" for n, r in zip(names, ranges, strict=True)]
        inner = nest.with_loop(names, constraints, True)
        outputs = set(op.outputs)
        for k, (value, amap) in enumerate(zip(operands, maps, strict=True)):
            if value not in self.views:
                continue
            variables = [Lifted.at(leaf(n)) for n in names]
            exprs = [self._text(apply(e, variables, [])) for e in amap.data.results]
            is_output = value in outputs
            read = not is_output or _reads_output(op, k)
            # Each point of the loops writes each output and reads each input the body
            # uses (an unused one's load is dead: lowering drops it).
            self.accessing = op if is_output or _uses_operand(op, k) else None
            self._access(value, exprs, inner, (), read=read, write=is_output)
        self.accessing = None

    def _add(self, table: dict[SSAValue, list[isl.Set]], root: SSAValue, region: isl.Set) -> None:
        table.setdefault(root, []).append(region)


class _Stop(Enum):
    NEVER = auto()  # returns (or its regions say)
    MAY = auto()  # may never return: a while loop, an assert
    CALL = auto()  # as the function it calls


@cache
def _stop_kind(cls: type[Operation]) -> _Stop:
    """By op class (looked up once each: the walk asks of every op)."""
    if issubclass(cls, scf.WhileOp | cf.AssertOp):
        return _Stop.MAY
    return _Stop.CALL if issubclass(cls, func.CallOp) else _Stop.NEVER


def _literal_index(exprs: Sequence[Expr]) -> tuple[int, ...] | None:
    """The subscripts `exprs` as numbers, where each is an integer literal."""
    if all(isinstance(e, str) and _INTEGER.fullmatch(e) for e in exprs):
        return tuple(int(cast(str, e)) for e in exprs)
    return None


def _constant_index(value: SSAValue) -> int | None:
    """The value of an index `arith.constant`; None for any other value."""
    op = value.owner
    # The exact classes first: an IRDL `isinstance` goes through `ABCMeta`.
    if (type(op) is arith.ConstantOp or isinstance(op, arith.ConstantOp)) and (
        type(value.type) is IndexType or isinstance(value.type, IndexType)
    ):
        attr = op.properties.get("value")
        return attr.value.data if isinstance(attr, IntegerAttr) else None
    return None


# Per op class: where a scalar load's or store's memref operand is (its subscripts follow
# it), None for other ops; kept across walks, as classes do not change.
_MEMREF_POSITIONS: dict[type[Operation], int | None] = {}


def _memref_position(kind: type[Operation]) -> int | None:
    if kind not in _MEMREF_POSITIONS:
        load = issubclass(kind, memref_dialect.LoadOp)
        store = issubclass(kind, memref_dialect.StoreOp)
        _MEMREF_POSITIONS[kind] = 0 if load else 1 if store else None
    return _MEMREF_POSITIONS[kind]


def _subview_of(source: _View, mapping: list[str] | None) -> _View:
    """The view a subview whose indices map to its source's by `mapping` (None:
    unknown) makes of `source`."""
    if mapping is None or not source.known:
        return _View(source.root, None, known=False, sure=source.sure)
    if source.subscripts is None:
        return replace(source, subscripts=tuple(mapping))
    composed = tuple(_substitute(s, mapping) for s in source.subscripts)
    return replace(source, subscripts=composed)


def _identity(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and is_identity_layout(type_)


def _groups_of(op: Operation) -> list[list[int]]:
    attr = op.properties.get("reassociation")
    assert isinstance(attr, ArrayAttr)
    return [
        [d.value.data for d in group] for group in cast(ArrayAttr[ArrayAttr[IntegerAttr]], attr)
    ]


def _expanded(op: memref_dialect.ExpandShapeOp) -> list[str] | None:
    """The source index for each result index y_k of an expand_shape: per group, the
    row-major number of its indices (its sizes but the first must be static)."""
    shape = _shape(op.result.type)
    out: list[str] = []
    for group in _groups_of(op):
        terms: list[str] = []
        for at, d in enumerate(group):
            inner = [shape[e] for e in group[at + 1 :]]
            if DYNAMIC_INDEX in inner:
                return None
            terms.append(f"{prod(inner)}*{{{d}}}")
        out.append(" + ".join(terms) or "0")
    return out


def _collapsed(op: memref_dialect.CollapseShapeOp) -> list[str] | None:
    """The source index for each result index y_k of a collapse_shape: per group, its
    index split row-major over the source's sizes (static but the first)."""
    shape = _shape(op.src.type)
    out: list[str] = []
    for k, group in enumerate(_groups_of(op)):
        split = _unflattened(f"{{{k}}}", tuple(shape[d] for d in group))
        if split is None:
            return None
        out += split
    return out


def _unflattened(linear: str, shape: tuple[int, ...]) -> list[str] | None:
    """The row-major indices into `shape` of element number `linear` (isl text); None
    when a size but the first is not static."""
    if DYNAMIC_INDEX in shape[1:] or 0 in shape[1:]:
        return None
    out: list[str] = []
    for d, size in enumerate(shape):
        below = prod(shape[d + 1 :])
        part = f"floor(({linear})/{below})" if below != 1 else f"({linear})"
        out.append(part if d == 0 else f"({part}) mod {size}")
    return out


def _uses_operand(op: LinalgStructuredOperation, k: int) -> bool:
    """Whether the body of `op` uses its operand `k` (False where not known)."""
    blocks = list(op.body.blocks)
    return len(blocks) == 1 and len(blocks[0].args) > k and bool(blocks[0].args[k].uses)


def _reads_output(op: LinalgStructuredOperation, k: int) -> bool:
    """Whether the body of `op` uses the old value of its operand `k` (an output): a fill
    or a copy does not; a matmul accumulates into it."""
    blocks = list(op.body.blocks)
    if len(blocks) != 1 or len(blocks[0].args) <= k:
        return True
    return bool(blocks[0].args[k].uses)


def _union(table: dict[SSAValue, list[isl.Set]]) -> dict[SSAValue, isl.Set]:
    out: dict[SSAValue, isl.Set] = {}
    for root, sets in table.items():
        total = sets[0]
        for s in sets[1:]:
            total = total | s
        out[root] = total.coalesce()
    return out


def _rank(memref: SSAValue) -> int:
    type_ = memref.type
    return len(type_.get_shape()) if isinstance(type_, MemRefType) else 0


def _kept_dims(sizes: tuple[int, ...], rank: int) -> dict[int, int] | None:
    """For a subview of `sizes` with a result of `rank` dimensions: the result dimension
    of each kept source dimension. Dropping dimensions is read only when exactly the
    unit ones go (otherwise which ones go is ambiguous)."""
    if rank == len(sizes):
        return {d: d for d in range(rank)}
    kept = [d for d, size in enumerate(sizes) if size != 1]
    if len(kept) != rank:
        return None
    return {d: k for k, d in enumerate(kept)}


def _static(attr: Attribute | None) -> tuple[int, ...] | None:
    if isinstance(attr, DenseArrayBase):
        return tuple(int(v) for v in attr.get_values())
    return None


def _groups(attr: Attribute | None) -> list[int] | None:
    """An affine.parallel's bound groups: how many map results bound each variable."""
    values = getattr(attr, "get_values", None)
    return [int(g) for g in values()] if values is not None else None


def _group(exprs: list[Expr] | None, groups: list[int] | None, k: int) -> list[Expr] | None:
    """The bounds of variable k: its group's results of the bound map."""
    if exprs is None or groups is None or k >= len(groups):
        return None
    start = sum(groups[:k])
    return exprs[start : start + groups[k]]


def _step_at(steps: Attribute | None, k: int) -> int | None:
    if isinstance(steps, ArrayAttr) and k < len(steps.data):
        step = steps.data[k]
        return step.value.data if isinstance(step, IntegerAttr) else None
    return None


def _map_arity(attr: Attribute | None) -> int:
    amap = getattr(attr, "data", None)
    return amap.num_dims + amap.num_symbols if isinstance(amap, AffineMap) else 0


def _transposed(op: Operation) -> list[str] | None:
    """The source index for each result index y_k of a memref.transpose: source dimension
    d is the result dimension k whose permutation result is d."""
    amap = op.properties.get("permutation")
    if not isinstance(amap, AffineMapAttr):
        return None
    axes = [e.position for e in amap.data.results if isinstance(e, AffineDimExpr)]
    if sorted(axes) != list(range(amap.data.num_dims)):
        return None
    return [f"{{{axes.index(d)}}}" for d in range(len(axes))]


def _substitute(template: str, values: Sequence[str]) -> str:
    """`template` with `{k}` replaced by values[k]."""
    return template.format(*(f"({v})" for v in values))


def _lowest(expr: Expr) -> str | None:
    """The text of the least value `expr` may be."""
    return expr[0] if isinstance(expr, tuple) else expr


def _highest(expr: Expr) -> str | None:
    """The text of the greatest value `expr` may be."""
    return expr[1] if isinstance(expr, tuple) else expr


def _all_exact(exprs: Sequence[Expr] | None) -> bool:
    return exprs is not None and all(isinstance(e, str) for e in exprs)


_INTEGER = re.compile(r"-?[0-9]+")
_LITERAL = "c_"  # the prefix of the parameters standing for literals (no other name has it)
# The prefix of the parameters standing for a shape's constants (`shared_regions`).
_CONSTANT = "s_"
_LITERAL_NAME = re.compile(rf"\b{_LITERAL}[0-9]+\b")

# Kinds of ops whose accesses this module records (linalg has its own walk).
_ACCESS_KINDS = (Kind.LOAD, Kind.STORE, Kind.COPY, Kind.ATOMIC)
_LOOPS = (scf.ForOp, scf.ParallelOp, affine.ForOp, affine.ParallelOp)
# Signed comparisons (by arith.cmpi's predicate number): the isl relation when it holds,
# and when it does not.
_SIGNED = {
    0: ("=", "!="),
    1: ("!=", "="),
    2: ("<", ">="),
    3: ("<=", ">"),
    4: (">", "<="),
    5: (">=", "<"),
}
# Ops whose regions run zero or more times, under conditions this module does not read.
_STRUCTURED = (
    scf.IfOp,
    affine.IfOp,
    scf.WhileOp,
    scf.ExecuteRegionOp,
    scf.YieldOp,
    affine.YieldOp,
    scf.ConditionOp,
    scf.ReduceOp,
    scf.ReduceReturnOp,
)
