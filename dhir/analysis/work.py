"""What running a task once costs, counted from the IR: arithmetic, memory traffic,
kernel launches, and the bytes it touches.

The body is walked with the number of times each op runs. Loops multiply their bodies by
their trip counts: `scf.for`, `scf.parallel`, `affine.for` and `affine.parallel` as
dhir.analysis.counts.LoopTrips reads their bounds (constants, or mean trips over the
enclosing loops), `DEFAULT_TRIP_COUNT` per loop otherwise (also for `scf.while`);
`gpu.launch` by grid x block threads; a linalg structured op by its iteration space
(each loop's extent read from an operand dimension that it indexes directly;
`DEFAULT_TRIP_COUNT` for a dynamic one); `scf.if` counts its
costlier branch; `func.call` counts the callee's body (a recursion: each of its functions'
bodies once). Counted: arithmetic (`arith` ops on ints and floats, `math` ops; one per
vector lane; index arithmetic, constants and casts are free) as flops; bytes loaded and
stored (element or vector size per access; a linalg op reads each operand element and
writes each output element once per iteration; `memref.copy` reads and writes the whole
buffer); kernel launches; and the footprint: bytes of the memrefs the task touches or
allocates. How long that takes on a device is dhir.machine.roofline's question; see
docs/costs.md.
"""

import math
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    IndexType,
    ShapedType,
    VectorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr

from dhir.analysis import reuse
from dhir.analysis.counts import (
    BLOCKED_ATTR,
    DEFAULT_TRIP_COUNT,
    LoopTrips,
    element_bytes_of,
    extent,
    memref_bytes,
)
from dhir.analysis.effects import Effects, task_effects
from dhir.analysis.lift import Affine, Lifted, Lifter
from dhir.analysis.regions import Regions, count_elements
from dhir.dialects import affine, func, gpu, scf
from dhir.dialects.access import Access, Kind, facts, is_alloc, is_arithmetic, kind, moved
from dhir.dialects.dhir import TaskOp
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.symbols import Symbols

# Ops that cost nothing at run time: constants, casts and moves of values.
_FREE_ARITH = frozenset(
    {
        "arith.constant",
        "arith.index_cast",
        "arith.index_castui",
        "arith.bitcast",
        "arith.extf",
        "arith.truncf",
        "arith.extsi",
        "arith.extui",
        "arith.trunci",
        "arith.sitofp",
        "arith.uitofp",
        "arith.fptosi",
        "arith.fptoui",
    }
)
# math ops that are one fused operation of two flops.
_TWO_FLOPS = frozenset({"math.fma"})


@dataclass(frozen=True)
class Work:
    """What running something once costs: arithmetic, memory traffic, kernel launches,
    and (for a whole task) the bytes of the memrefs it touches."""

    flops: float = 0.0
    bytes: float = 0.0
    launches: float = 0.0
    footprint: int = 0
    parallel: bool = False  # has a parallel loop (scf/affine.parallel): runs on threads
    # Bytes stored to elements not loaded first: a CPU's write-allocate cache reads their
    # lines before writing them (counted apart, since GPUs do not).
    allocated: float = 0.0
    # Bytes of all the data the task's schedule touches, which passes through the caches
    # between two tasks on the same data (0: not known; the footprint is taken to be
    # cached already when the task starts). See `cold_bytes`.
    working_set: int = 0
    # (cache bytes, bytes moved with a cache that large, STREAM-counted) where that
    # changes, smallest cache first (dhir.analysis.reuse); () when not known.
    reuse: tuple[tuple[float, float], ...] = ()
    # Of `flops`, those of the nests dhir-optimize-bodies turns into register-blocked
    # vector code (BLOCKED_ATTR), and the same weighed by their element width over f32's
    # (an f64 flop is 2): they run at the core's f32 peak times an efficiency.
    blocked: float = 0.0
    blocked_f32: float = 0.0
    # Float ops that wait for one another across the iterations of a loop (a value carried
    # from one iteration to the next: iter_args, or one memory element loaded and stored
    # again), summed over the iterations: they run at the FP latency, one after another.
    chain: float = 0.0

    def __add__(self, other: "Work") -> "Work":
        return Work(
            self.flops + other.flops,
            self.bytes + other.bytes,
            self.launches + other.launches,
            self.footprint + other.footprint,
            self.parallel or other.parallel,
            self.allocated + other.allocated,
            max(self.working_set, other.working_set),
            _added_reuse(self, other),
            self.blocked + other.blocked,
            self.blocked_f32 + other.blocked_f32,
            self.chain + other.chain,
        )

    def moved(self, cache: float) -> float | None:
        """STREAM-counted bytes moved beyond a cache of `cache` bytes (None: not known)."""
        if not self.reuse:
            return None
        return next(t for size, t in reversed(self.reuse) if size <= cache)

    def times(self, count: float) -> "Work":
        """`count` runs one after another (the footprint stays: the same memory)."""
        return Work(
            self.flops * count,
            self.bytes * count,
            self.launches * count,
            self.footprint,
            self.parallel,
            self.allocated * count,
            self.working_set,
            tuple((size, moved * count) for size, moved in self.reuse),
            self.blocked * count,
            self.blocked_f32 * count,
            self.chain * count,
        )


def task_work(
    task: TaskOp,
    effects: Effects | None = None,
    regions: Regions | None = None,
    body: Work | None = None,
    working_set: int | None = None,
) -> Work:
    """The work of one run of `task`, with its footprint (`effects`, `regions`, `body`:
    the task's effects, regions and `body_work`, when already known), and `working_set`
    (see Work) where given."""
    body = body if body is not None else body_work(task)
    return with_touched(body, touched_bytes(task, effects, regions), working_set)


def touched_bytes(
    task: TaskOp, effects: Effects | None = None, regions: Regions | None = None
) -> int:
    """Bytes of the elements `task` touches of the memrefs it lists (all of each, unless
    `regions` says which): what `task_work` adds to its body's footprint."""
    effects = effects if effects is not None else task_effects(task)
    return sum(_touched_bytes(value, regions) for value in effects.touches())


def with_touched(body: Work, touched: int, working_set: int | None = None) -> Work:
    """`task_work` of a task whose body counts `body` and which touches `touched` bytes."""
    if working_set is None:
        return replace(body, footprint=body.footprint + touched)
    return replace(body, footprint=body.footprint + touched, working_set=working_set)


def body_work(task: TaskOp) -> Work:
    """What `task_work` counts from the body alone, with the bytes the body allocates as
    its footprint: the same for tasks of one shape (dhir.analysis.shapes)."""
    body = _Counter().block(task.body.block)
    curve = reuse.traffic_curve(task.body.block) if body.bytes else None
    return Work(
        body.flops,
        body.bytes,
        body.launches,
        _allocated_bytes(task),
        body.parallel,
        body.allocated,
        reuse=curve or (),
        blocked=body.blocked,
        blocked_f32=body.blocked_f32,
        chain=body.chain,
    )


def _added_reuse(one: Work, other: Work) -> tuple[tuple[float, float], ...]:
    """The traffic curve of both; () unless both have one (or one moves nothing)."""
    if not one.bytes or not other.bytes:
        return one.reuse or other.reuse
    if not one.reuse or not other.reuse:
        return ()
    sizes = sorted({size for size, _ in (*one.reuse, *other.reuse)})
    return tuple((size, (one.moved(size) or 0.0) + (other.moved(size) or 0.0)) for size in sizes)


def task_footprint(
    task: TaskOp, effects: Effects | None = None, regions: Regions | None = None
) -> int:
    """Bytes of the elements `task` touches of the memrefs it lists (all of each, unless
    `regions` says which) and of what it allocates."""
    return touched_bytes(task, effects, regions) + _allocated_bytes(task)


def unknown_touched_bytes(effects: Effects, regions: Regions | None = None) -> int:
    """What the footprint counts for the memrefs of unknown size a task touches:
    `DEFAULT_TRIP_COUNT` elements a dynamic extent, a guess fit to weigh costs, not to
    refuse a program for the memory it would need."""
    return sum(
        _touched_bytes(value, regions) for value in effects.touches() if not _sized(value.type)
    )


def unknown_allocated_bytes(task: TaskOp) -> int:
    """What the footprint counts for the memrefs of unknown size `task` allocates (see
    `unknown_touched_bytes`): the same for tasks of one shape."""
    return _allocated_bytes(task, lambda type_: not _sized(type_))


def _sized(type_: Attribute) -> bool:
    return not isinstance(type_, ShapedType) or DYNAMIC_INDEX not in type_.get_shape()


def _allocated_bytes(task: TaskOp, counted: Callable[[Attribute], bool] = lambda _: True) -> int:
    return sum(
        memref_bytes(op.results[0].type)
        for op in task.body.walk()
        if is_alloc(op) and op.results and counted(op.results[0].type)
    )


def _touched_bytes(memref: SSAValue, regions: Regions | None) -> int:
    if regions is None:
        return memref_bytes(memref.type)
    return region_bytes(memref, count_elements(regions.read(memref) | regions.written(memref)))


class _Counter:
    """Counts ops of a task body, following calls into the module's functions."""

    def __init__(self) -> None:
        # Each callee's count, made once: a function calling the next one twice, down a
        # chain or around a ring, was counted 2**length times.
        self._counted: dict[func.FuncOp, Work] = {}
        self._recursion: frozenset[func.FuncOp] = frozenset()  # calls in it count nothing
        self._symbols = Symbols()
        self._trips = LoopTrips()
        self._blocked = False  # counting a nest marked BLOCKED_ATTR

    def region(self, region: Region) -> Work:
        total = Work()
        for block in region.blocks:
            total += self.block(block)
        return total

    def block(self, block: Block) -> Work:
        # Loads, stores and arithmetic (most of a body) add up here, without building a
        # Work each, which dominated the costing of large schedules.
        flops = traffic = allocated = 0.0
        nested = Work()
        loaded: dict[tuple[object, ...], SSAValue] = {}  # loads the compiler can reuse
        loads: list[Access] = []  # of this run of the block, for shifted recurrences
        chain = 0.0
        carried = isinstance(block.parent_op(), scf.ForOp | affine.ForOp)
        for op in block.ops:
            access = moved(op)
            if access is not None and access.read:
                key = _key(access)
                if key in loaded:
                    continue  # the same element again, with no store in between: reused
                assert access.value is not None
                loaded[key] = access.value
                loads.append(access)
                traffic += _access_bytes(access)
            elif access is not None:
                key = _key(access)
                stored = _access_bytes(access)
                allocated += 0.0 if key in loaded else stored  # update in place: line loaded
                if carried and key in loaded and not _varies(access.indices, block):
                    # One element updated at every iteration: the next one waits.
                    assert access.value is not None
                    chain = max(chain, _chain_length(block, loaded[key], access.value))
                elif carried:
                    chain = max(chain, self._shifted_chain(block, loads, access))
                loaded = {k: v for k, v in loaded.items() if k[0] is not key[0]}
                assert access.value is not None
                loaded[key] = access.value
                traffic += stored
            elif is_arithmetic(op):
                if self._blocked and carried and not _varies(op.operands, block, loads=True):
                    continue  # blocked code computes it once per run of the loop
                flops += _flops(op)
            else:
                if op.regions or isinstance(op, func.CallOp):
                    loaded = {}  # may store anywhere
                nested += self.op(op)
        return nested + Work(flops=flops, bytes=traffic, allocated=allocated, chain=chain)

    def _shifted_chain(self, block: Block, loads: Sequence[Access], store: Access) -> float:
        """The float ops per iteration of the loop of `block` on a chain through `store`'s
        memref, where one of `loads` reads the element it stored k iterations before
        (`a[i] = f(a[i - 1])`, k = 1): each iteration waits for the one k before, so k
        chains run side by side."""
        found = 0.0
        for load in loads:
            if load.memref is not store.memref:
                continue
            shift = _iterations_back(self._trips.lifter, block, load, store)
            if shift:
                assert load.value is not None and store.value is not None
                found = max(found, _chain_length(block, load.value, store.value) / shift)
        return found

    def op(self, op: Operation) -> Work:
        if BLOCKED_ATTR not in op.attributes or self._blocked:
            return self._op(op)
        self._blocked = True
        try:
            return _as_blocked(op, self._op(op))
        finally:
            self._blocked = False

    def _op(self, op: Operation) -> Work:
        access = moved(op)
        if access is not None:
            return Work(bytes=_access_bytes(access))
        if is_arithmetic(op):
            return Work(flops=_flops(op))
        if isinstance(op, scf.ForOp):
            trips = self._trips.of(op)[0]
            carried = Work(chain=_carried_chain(op.regions[0].block))
            return (self.region(op.regions[0]) + carried).times(trips)
        if isinstance(op, scf.ParallelOp):
            trips = self._trips.of(op)
            return self.block(op.body.block).times(math.prod(trips)) + _PARALLEL
        if isinstance(op, affine.ForOp | affine.ParallelOp):
            body = self.region(op.body).times(math.prod(self._trips.of(op)))
            return body + _PARALLEL if isinstance(op, affine.ParallelOp) else body
        if isinstance(op, scf.WhileOp):
            return self._regions(op).times(DEFAULT_TRIP_COUNT)
        if isinstance(op, scf.IfOp | affine.IfOp):
            return max((self.region(r) for r in op.regions), key=_weight, default=Work())
        if isinstance(op, gpu.LaunchOp):
            return self._launch(op)
        if isinstance(op, LinalgStructuredOperation):
            return self._linalg(op)
        if isinstance(op, func.CallOp):
            return self._call(op)
        if kind(op) is Kind.COPY:
            found = facts(op)
            assert found is not None
            size = memref_bytes(found.accesses[-1].memref.type)
            return Work(bytes=2 * size, allocated=size)
        # Anything else with regions (scf.execute_region, memref.alloca_scope, ...)
        # runs them once.
        return self._regions(op)

    def _regions(self, op: Operation) -> Work:
        total = Work()
        for region in op.regions:
            total += self.region(region)
        return total

    def _launch(self, op: gpu.LaunchOp) -> Work:
        sizes = (
            op.gridSizeX,
            op.gridSizeY,
            op.gridSizeZ,
            op.blockSizeX,
            op.blockSizeY,
            op.blockSizeZ,
        )
        threads = math.prod(extent(size) for size in sizes)
        return self.region(op.body).times(threads) + Work(launches=1.0, parallel=True)

    def _linalg(self, op: LinalgStructuredOperation) -> Work:
        iterations = math.prod(linalg_loop_ranges(op))
        body = self.region(op.body)
        per_iteration = sum(element_bytes_of(v.type) for v in op.inputs if _is_shaped(v))
        allocated = 0
        args = op.body.block.args if op.body.blocks else ()
        for k, out in enumerate(op.outputs):
            used = len(op.inputs) + k < len(args) and bool(args[len(op.inputs) + k].uses)
            per_iteration += element_bytes_of(out.type) * (2 if used else 1)
            allocated += 0 if used else element_bytes_of(out.type)
        work = Work(body.flops, body.bytes + per_iteration, allocated=body.allocated + allocated)
        return work.times(iterations)

    def _call(self, op: func.CallOp) -> Work:
        callee = self._callee(op)
        if callee is None:
            return Work()  # external (the runtime, libm): not counted
        if callee in self._recursion:
            return Work()  # recursive: not counted
        if callee not in self._counted:
            self._count(callee)
        return self._counted[callee]

    def _count(self, function: func.FuncOp) -> None:
        """Counts `function` and the functions it reaches, callees first. A recursion
        (functions calling one another in a cycle) is one count for all its functions:
        each one's body once, the calls among them counting nothing, as its depth is not
        known."""
        for group, recursive in _components(function, self._counted, self._callees):
            if not recursive:
                self._counted[group[0]] = self.region(group[0].body)
                continue
            self._recursion = frozenset(group)
            try:
                work = sum((self.region(f.body) for f in group), Work())
            finally:
                self._recursion = frozenset()
            self._counted.update(dict.fromkeys(group, work))

    def _callees(self, function: func.FuncOp) -> list[func.FuncOp]:
        calls = (op for op in function.body.walk() if isinstance(op, func.CallOp))
        return [callee for call in calls if (callee := self._callee(call)) is not None]

    def _callee(self, op: func.CallOp) -> func.FuncOp | None:
        """The function `op` calls, when the module defines it (has its body)."""
        callee = self._symbols.lookup(op, op.callee)
        return callee if isinstance(callee, func.FuncOp) and callee.body.blocks else None


_PARALLEL = Work(parallel=True)


def _components(
    root: func.FuncOp,
    done: Container[func.FuncOp],
    callees_of: Callable[[func.FuncOp], list[func.FuncOp]],
) -> list[tuple[list[func.FuncOp], bool]]:
    """The strongly connected components of the functions `root` reaches by calls
    (`callees_of` each function; not through those in `done`), each callee's before its
    callers', and whether each is a recursion. Tarjan's algorithm, with a stack of its
    own: a long call chain would overflow Python's."""
    order: dict[func.FuncOp, int] = {}  # when each function was reached
    low: dict[func.FuncOp, int] = {}  # the earliest function on `path` it reaches
    path: list[func.FuncOp] = []
    on_path: set[func.FuncOp] = set()
    calls_itself: set[func.FuncOp] = set()
    stack: list[tuple[func.FuncOp, Iterator[func.FuncOp]]] = []
    found: list[tuple[list[func.FuncOp], bool]] = []

    def reach(function: func.FuncOp) -> None:
        order[function] = low[function] = len(order)
        path.append(function)
        on_path.add(function)
        callees = [f for f in callees_of(function) if f not in done]
        if function in callees:
            calls_itself.add(function)
        stack.append((function, iter(callees)))

    reach(root)
    while stack:
        function, callees = stack[-1]
        callee = next(callees, None)
        if callee is not None:
            if callee not in order:
                reach(callee)
            elif callee in on_path:
                low[function] = min(low[function], order[callee])
            continue
        stack.pop()
        if stack:
            caller = stack[-1][0]
            low[caller] = min(low[caller], low[function])
        if low[function] == order[function]:
            group: list[func.FuncOp] = []
            while not group or group[-1] is not function:
                group.append(path.pop())
                on_path.discard(group[-1])
            found.append((group, len(group) > 1 or function in calls_itself))
    return found


def _as_blocked(op: Operation, work: Work) -> Work:
    """`work` of `op`, a nest that runs as register-blocked vector code: its flops at the
    blocked rate, no chain (the sums run side by side), and a linalg op's operands moved
    once (its count of one access per iteration is what blocking saves)."""
    bits = next(
        (
            result.type.bitwidth
            for inner in op.walk()
            if is_arithmetic(inner)
            for result in inner.results
            if isinstance(result.type, AnyFloat)
        ),
        32,
    )
    if isinstance(op, LinalgStructuredOperation):
        inputs = sum(memref_bytes(v.type) for v in op.inputs if _is_shaped(v))
        outputs = sum(memref_bytes(v.type) for v in op.outputs if _is_shaped(v))
        work = replace(work, bytes=float(inputs + 2 * outputs))
    flops = work.flops
    return replace(work, blocked=flops, blocked_f32=flops * bits / 32, chain=0.0)


def _iterations_back(lifter: Lifter, block: Block, load: Access, store: Access) -> int:
    """k >= 1 when `load` reads, in an iteration of the loop of `block`, the element
    `store` wrote k iterations before (every subscript of both exact, each the other's
    plus k times its own change per iteration); else 0."""
    loop = block.parent_op()
    if isinstance(loop, scf.ForOp):
        step = lifter.constant(loop.step)
    elif isinstance(loop, affine.ForOp):
        step = loop.step.value.data
    else:
        return 0
    variable = block.args[0]
    stored, read = _subscripts(lifter, store), _subscripts(lifter, load)
    if not step or step <= 0 or stored is None or read is None or len(stored) != len(read):
        return 0
    back = 0
    for written, was in zip(stored, read):
        gap = (written - was).number
        per_step = (lifter.linear(Lifted.at(written)) or {}).get(variable, 0) * step
        if gap is None or (per_step == 0) != (gap == 0):
            return 0
        if per_step == 0:
            continue
        if gap % per_step or gap // per_step <= 0 or back not in (0, gap // per_step):
            return 0
        back = gap // per_step
    return back


def _subscripts(lifter: Lifter, access: Access) -> list[Affine] | None:
    """The exact subscripts of `access`; None where one is not exact."""
    if access.map is not None:
        found = lifter.map_each(access.map, access.indices)
    else:
        found = [lifter.value(v) for v in access.indices]
    exact = [f.low for f in found if f is not None and f.exact]
    return exact if len(exact) == len(found) else None


def _carried_chain(body: Block) -> int:
    """The float ops on the longest chain from a value an scf.for carries (iter_args) to
    what the next iteration gets of it."""
    end = body.last_op
    if end is None:
        return 0
    carried = zip(body.args[1:], end.operands)
    return max((_chain_length(body, arg, out) for arg, out in carried), default=0)


def _chain_length(block: Block, source: SSAValue, target: SSAValue) -> int:
    """Float ops of `block` (straight-line, not in nested regions) on the longest path
    from `source` to `target`; 0 when there is none."""
    depth: dict[SSAValue, int] = {source: 0}
    for op in block.ops:
        if not is_arithmetic(op) or not op.results:
            continue
        found = [depth[v] for v in op.operands if v in depth]
        result = op.results[0]
        if not found or not _is_float(result.type):
            continue
        depth[result] = max(found) + (0 if op.name in _FREE_ARITH else 1)
    return depth.get(target, 0) if target is not source else 0


def _varies(values: Sequence[SSAValue], block: Block, loads: bool = False) -> bool:
    """Whether any of `values` may change from one run of `block` to the next: computed
    in it from its arguments (a loop's variable), or by anything but arithmetic (with
    `loads`, but loads at such places of memrefs `block` does not store to)."""
    seen: set[SSAValue] = set()
    todo = list(values)
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        if isinstance(value, BlockArgument):
            if value.block is block:
                return True
            continue
        op = value.owner
        assert isinstance(op, Operation)
        if op.parent_block() is not block:
            continue  # defined outside: the same at every run
        access = moved(op) if loads else None
        if access is not None and access.read and not _stores_to(block, access.memref):
            todo += access.indices
            continue
        if not is_arithmetic(op):
            return True
        todo += op.operands
    return False


def _stores_to(block: Block, memref: SSAValue) -> bool:
    """Whether `block` (or what it holds) may store to `memref`."""
    for op in block.walk():
        access = moved(op)
        if access is not None and access.write and access.memref is memref:
            return True
        if access is None and isinstance(op, func.CallOp):
            return True
    return False


def _is_float(type_: Attribute) -> bool:
    element = type_.get_element_type() if isinstance(type_, VectorType) else type_
    return isinstance(element, AnyFloat)


def _weight(work: Work) -> float:
    return work.flops + work.bytes


def _flops(op: Operation) -> float:
    if op.name in _FREE_ARITH or not op.results:
        return 0.0
    result = op.results[0].type
    element = result.get_element_type() if isinstance(result, VectorType) else result
    if isinstance(element, IndexType):
        return 0.0  # address arithmetic: folded into addressing modes, mostly
    lanes = math.prod(result.get_shape()) if isinstance(result, VectorType) else 1
    return float(lanes * (2 if op.name in _TWO_FLOPS else 1))


def linalg_loop_ranges(op: LinalgStructuredOperation) -> list[int]:
    """Each loop's extent, from an operand dimension its indexing map reads directly."""
    maps = [attr.data for attr in op.get_indexing_maps().data]
    extents: list[int | None] = [None] * (maps[0].num_dims if maps else 0)
    for value, indexing in zip(op.operands, maps):
        if not _is_shaped(value):
            continue
        shape = value.type.get_shape()  # type: ignore[attr-defined]
        for dim, expr in zip(shape, indexing.results):
            if isinstance(expr, AffineDimExpr) and extents[expr.position] is None:
                extents[expr.position] = dim if dim != DYNAMIC_INDEX else None
    return [DEFAULT_TRIP_COUNT if e is None else e for e in extents]


# --- sizes ----------------------------------------------------------------------------


def region_bytes(memref: SSAValue, elements: int | None) -> int:
    """Bytes of `elements` elements of `memref`; the whole memref when not counted."""
    whole, each = _sizes(memref.type)
    if elements is None:
        return whole
    return min(whole, elements * each)


@lru_cache(maxsize=4096)  # asked for every task's every memref, of a few types
def _sizes(type_: Attribute) -> tuple[int, int]:
    """Bytes of a whole `type_`, and of one of its elements as `region_bytes` counts them."""
    whole = memref_bytes(type_)
    shape = type_.get_shape() if isinstance(type_, ShapedType) else ()
    count = max(1, math.prod(max(1, d) for d in shape))
    return whole, whole // count


def _key(access: Access) -> tuple[object, ...]:
    """What tells two accesses of the same element apart: the memref first."""
    return (access.memref, *access.indices, access.map)


def _access_bytes(access: Access) -> int:
    """A load or store moves one element, or a whole vector."""
    assert access.value is not None
    value_type = access.value.type
    if isinstance(value_type, VectorType):
        return memref_bytes(value_type)
    return element_bytes_of(access.memref.type)


def _is_shaped(value: SSAValue) -> bool:
    return isinstance(value.type, ShapedType)
