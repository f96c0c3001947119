"""How many bytes a task's loop nests move between a cache of a given size and what lies
beyond it: a reuse-aware count of memory traffic (docs/costs.md, "Reuse").

Accesses to one memref in one loop nest whose subscripts differ by constants (A[i][j-1],
A[i][j], A[i+1][j]) form a group, which touches the same lines. A group's data is reused
across the iterations of a loop when one iteration of that loop touches no more than the
cache holds (its footprint, over all the groups inside the loop); from the innermost loop
outwards, the first loop whose iteration does not fit fetches its body's data again at
each iteration. The traffic at a cache size is then, per group, the bytes of the lines it
touches within the loops that keep it, times the runs of the loops around them; a group
that is stored to moves its lines twice (read, written back). Bytes are counted as STREAM
counts them (line traffic x 3/4, see dhir.machine.roofline), so a triad's traffic is its
footprint. Subscripts are read as linear forms of the loop variables (dhir.analysis.lift:
`arith` constants, `+ - *`, casts by their signedness, affine maps; a mod or cast that
may wrap, or anything else, is unknown); an unknown subscript touches up to the whole
dimension.

`traffic_curve` gives the traffic at each cache size where it changes, or None for a body
it cannot follow (calls, linalg, GPU launches, vector accesses, while loops): the caller
then keeps the count of one access per load and store.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import DYNAMIC_INDEX, ShapedType
from xdsl.ir import Block, Operation, SSAValue

from dhir.analysis import counts as counting
from dhir.analysis.counts import BLOCKED_ATTR
from dhir.analysis.lift import Lifter
from dhir.dialects import affine, scf
from dhir.dialects.access import Access, Kind, is_dealloc, kind, scalar_access
from dhir.dialects.dhir import DHIR

# Bytes of a cache line: what a cache moves for one element.
LINE_BYTES = 64
# Line traffic in the bytes STREAM counts (a triad moves 32 bytes per 24 it counts).
STREAM_COUNTED = 24 / 32

# A subscript: coefficient per loop variable (constants dropped), or None when unknown.
Linear = dict[SSAValue, int] | None

_CONDITIONALS = (scf.IfOp, affine.IfOp)


@dataclass(eq=False)
class _Loop:
    """One loop op: its variables' trip counts, and the groups of accesses inside it."""

    trips: dict[SSAValue, float]
    depth: int
    iteration_bytes: float = 0.0  # footprint of one iteration (of all variables at once)

    @property
    def runs(self) -> float:
        return math.prod(self.trips.values())


@dataclass(eq=False)
class _Group:
    memref: SSAValue
    subscripts: tuple[Linear, ...]
    loops: tuple[_Loop, ...]  # enclosing loops of the task, outermost first
    stored: bool = False
    element: int = 8
    shape: tuple[int, ...] = field(default_factory=tuple[int, ...])
    # In a nest that runs as register-blocked code (work.BLOCKED_ATTR), whose blocks keep
    # what they reuse close: its lines move once, whatever the cache.
    kept: bool = False

    def span(self, inner: Sequence[_Loop]) -> float:
        """Bytes of the lines the group touches while the `inner` loops run once."""
        trips = {v: t for loop in inner for v, t in loop.trips.items()}
        if not self.subscripts:
            return float(LINE_BYTES)
        ranges = [_range(s, trips, extent) for s, extent in zip(self.subscripts, self.shape)]
        last = self.subscripts[-1]
        stride = min((abs(c) for v, c in (last or {}).items() if v in trips and c), default=1)
        elements = ranges[-1]
        lines = min(elements, math.ceil(elements * stride * self.element / LINE_BYTES))
        whole = math.prod(self.shape) * self.element
        touched = math.prod(ranges[:-1]) * lines * LINE_BYTES
        return float(min(touched, max(whole, LINE_BYTES)))

    def traffic(self, capacity: float) -> float:
        """Bytes moved with a cache of `capacity` bytes (STREAM-counted)."""
        keep = 0 if self.kept else len(self.loops)
        while keep > 0 and self.loops[keep - 1].iteration_bytes <= capacity:
            keep -= 1
        runs = math.prod(loop.runs for loop in self.loops[:keep])
        moves = 2 if self.stored else 1
        return self.span(self.loops[keep:]) * runs * moves * STREAM_COUNTED


def _range(subscript: Linear, trips: dict[SSAValue, float], extent: int) -> float:
    """How many values `subscript` takes while the loops of `trips` run (at most `extent`)."""
    if subscript is None:
        return max(1, min(extent, math.prod(trips.values())))
    varying = [(abs(c), trips[v]) for v, c in subscript.items() if v in trips and c]
    if not varying:
        return 1
    spread = 1 + sum(c * (t - 1) for c, t in varying)
    return max(1, min(extent, spread, math.prod(t for _, t in varying)))


class _Unfollowed(Exception):
    """The body holds something the count cannot follow."""


class _Collector:
    def __init__(self) -> None:
        self.groups: dict[tuple[object, ...], _Group] = {}
        self.loops: list[_Loop] = []
        self.trips = counting.LoopTrips()
        self.lift = Lifter()
        self.blocked = False  # inside a nest marked BLOCKED_ATTR

    def op(self, op: Operation, loops: tuple[_Loop, ...]) -> None:
        if BLOCKED_ATTR not in op.attributes or self.blocked:
            self._op(op, loops)
            return
        self.blocked = True
        try:
            self._op(op, loops)
        finally:
            self.blocked = False

    def block(self, block: Block, loops: tuple[_Loop, ...]) -> None:
        for op in block.ops:
            self.op(op, loops)

    def _op(self, op: Operation, loops: tuple[_Loop, ...]) -> None:
        access = scalar_access(op)
        if access is not None:
            self.access(access, loops)
        elif not op.regions:  # no loop nor conditional: quiet, or not followed
            if not _quiet(op):
                raise _Unfollowed(op.name)
        elif isinstance(op, scf.ForOp | scf.ParallelOp | affine.ForOp | affine.ParallelOp):
            args = op.regions[0].block.args
            self.loop(op, dict(zip(args, self.trips.of(op))), loops)
        elif isinstance(op, _CONDITIONALS):
            for region in op.regions:
                for block in region.blocks:
                    self.block(block, loops)
        elif not _quiet(op):
            raise _Unfollowed(op.name)

    def loop(self, op: Operation, trips: dict[SSAValue, float], loops: tuple[_Loop, ...]) -> None:
        loop = _Loop(trips, len(loops))
        self.loops.append(loop)
        self.block(op.regions[0].block, (*loops, loop))

    def access(self, access: Access, loops: tuple[_Loop, ...]) -> None:
        memref = access.memref
        store = access.write
        type_ = memref.type
        if not isinstance(type_, ShapedType):
            raise _Unfollowed(str(type_))
        indices = access.indices
        if access.map is not None:
            subscripts = [self.lift.linear(r) for r in self.lift.map_each(access.map, indices)]
        else:
            subscripts = [self.lift.linear(self.lift.value(v)) for v in indices]
        shape = tuple(
            counting.DEFAULT_TRIP_COUNT if d == DYNAMIC_INDEX else d for d in type_.get_shape()
        )
        key_subs = tuple(None if s is None else frozenset(s.items()) for s in subscripts)
        key = (memref, key_subs, tuple(id(loop) for loop in loops))
        group = self.groups.get(key)
        if group is None:
            element = counting.memref_bytes(type_) // max(1, math.prod(shape))
            group = _Group(memref, tuple(subscripts), loops, element=element, shape=shape)
            group.kept = self.blocked
            self.groups[key] = group
        group.stored |= store


def _quiet(op: Operation) -> bool:
    """Ops that move no data the count must follow: pure arithmetic, region
    terminators, shape queries, allocations and deallocations, dhir's own ops."""
    if type(op) in _DHIR_OPS:
        return True
    if op.regions:
        return False
    return (
        kind(op) in _QUIET_KINDS or isinstance(op, scf.YieldOp | affine.YieldOp) or is_dealloc(op)
    )


_QUIET_KINDS = (Kind.PURE, Kind.SHAPE, Kind.ALLOC)


_DHIR_OPS = frozenset(DHIR.operations)


def traffic_curve(block: Block) -> tuple[tuple[float, float], ...] | None:
    """(cache bytes, STREAM-counted bytes moved with a cache that large) at each size
    where the traffic of one run of `block` changes, from the smallest cache (0) up;
    None when the body holds what this count cannot follow."""
    collector = _Collector()
    try:
        collector.block(block, ())
    except _Unfollowed:
        return None
    groups = list(collector.groups.values())
    for group in groups:
        for depth, loop in enumerate(group.loops):
            loop.iteration_bytes += group.span(group.loops[depth + 1 :])
    sizes = sorted({0.0, *(loop.iteration_bytes for loop in collector.loops)})
    return tuple((size, sum(g.traffic(size) for g in groups)) for size in sizes)
