"""How long a task runs on a device, and a transfer between devices takes, estimated
from the IR (or taken from a measured profile).

**Work** (`task_work`): the body is walked with the number of times each op runs.
Loops multiply their bodies by their trip counts: `scf.for`, `scf.parallel`,
`affine.for` and `affine.parallel` with constant bounds (folded through `arith`
constants, casts, `+ - *`), `DEFAULT_TRIP_COUNT` per loop otherwise (also for
`scf.while`); `gpu.launch` by grid x block threads; a linalg structured op by its
iteration space (each loop's extent read from an operand dimension that it indexes
directly; `DEFAULT_TRIP_COUNT` for a dynamic one); `scf.if` counts its costlier branch;
`func.call` counts the callee's body. Counted: arithmetic (`arith` ops on ints and
floats, `math` ops; one per vector lane; index arithmetic, constants and casts are
free) as flops; bytes loaded and stored (element or vector size per access; a linalg op
reads each operand element and writes each output element once per iteration;
`memref.copy` reads and writes the whole buffer); kernel launches; and the footprint:
bytes of the memrefs the task touches or allocates.

**Time** (`task_time`): a roofline, max(flops / compute rate, traffic / memory rate),
plus a launch overhead per kernel on a GPU. On a CPU (`rates`): one core's rates for a task
without parallel loops, the rank's threads' with them, within the node's rates shared among
the ranks busy at once; a cache's bandwidth when the footprint fits it; traffic counts the
write-allocate reads that STREAM-counted rates leave out. A device is anything with
`peak_gflops` and `mem_bw_gbs` (`DeviceRates`), and optionally per-core fields;
`Device` is dhir's own, with typical defaults. See docs/costs.md.

**Transfers** (`Link.time`): latency + bytes / bandwidth.

**Profiles** (`Profile`): task times measured by `dhir run --profile`; `CostModel`
uses them instead of the estimates on devices of the kind (and arch) they were
measured on. Tasks are named `<function>.schedule<S>.task<T>` (`task_ids`): the T-th
task of the S-th schedule (in program order) of that function.
"""

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from xdsl.dialects import affine, arith, func, gpu, scf
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    IndexType,
    IntegerAttr,
    IntegerType,
    ShapedType,
    VectorType,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.traits import SymbolTable

from dhir.analysis.effects import Effects, task_effects
from dhir.dialects.dhir import TaskOp
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.targets import DeviceKind

# The guess for a loop whose trip count is not a constant (and for a dynamic extent):
# large enough that such a loop outweighs straight-line code, small enough not to
# dwarf loops whose counts are known.
DEFAULT_TRIP_COUNT = 100

# A STREAM triad (a = b + s * c) counts 24 bytes per element, but a CPU's write-allocate
# cache moves 32 from memory: it reads a's line before writing it. Rates are STREAM's.
STREAM_COUNTED = 24 / 32

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
_LOADS = frozenset({"memref.load", "affine.load", "vector.load", "vector.transfer_read"})
_STORES = frozenset({"memref.store", "affine.store", "vector.store", "vector.transfer_write"})
_ALLOCS = frozenset({"memref.alloc", "memref.alloca", "gpu.alloc"})


# --- work -------------------------------------------------------------------------


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

    def __add__(self, other: "Work") -> "Work":
        return Work(
            self.flops + other.flops,
            self.bytes + other.bytes,
            self.launches + other.launches,
            self.footprint + other.footprint,
            self.parallel or other.parallel,
            self.allocated + other.allocated,
            max(self.working_set, other.working_set),
        )

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
        )


def task_work(task: TaskOp, effects: Effects | None = None) -> Work:
    """The work of one run of `task`, with its footprint (`effects`: the task's, when
    already known)."""
    body = _Counter().block(task.body.block)
    footprint = task_footprint(task, effects)
    return Work(body.flops, body.bytes, body.launches, footprint, body.parallel, body.allocated)


def task_footprint(task: TaskOp, effects: Effects | None = None) -> int:
    """Bytes of the memrefs `task` touches (the ones it lists and uses) or allocates."""
    effects = effects if effects is not None else task_effects(task)
    touched = sum(memref_bytes(value.type) for value in effects.touches())
    allocated = sum(
        memref_bytes(op.results[0].type)
        for op in task.body.walk()
        if op.name in _ALLOCS and op.results
    )
    return touched + allocated


class _Counter:
    """Counts ops of a task body, following calls into the module's functions."""

    def __init__(self) -> None:
        self._calls: list[str] = []  # callees being counted, against recursion

    def region(self, region: Region) -> Work:
        total = Work()
        for block in region.blocks:
            total += self.block(block)
        return total

    def block(self, block: Block) -> Work:
        # Loads, stores and arithmetic (most of a body) add up here, without a Work each:
        # building them took half of costing 10,000 tasks.
        flops = traffic = allocated = 0.0
        nested = Work()
        loaded: set[tuple[object, ...]] = set()  # loads the compiler can reuse
        for op in block.ops:
            name = op.name
            if name in _LOADS:
                key = (*op.operands, op.properties.get("map"))
                if key in loaded:
                    continue  # the same element again, with no store in between: reused
                loaded.add(key)
                traffic += _access_bytes(op.results[0].type, op.operands[0].type)
            elif name in _STORES:
                key = (*op.operands[1:], op.properties.get("map"))
                stored = _access_bytes(op.operands[0].type, op.operands[1].type)
                allocated += 0.0 if key in loaded else stored  # update in place: line loaded
                loaded = {k for k in loaded if k[0] is not key[0]} | {key}
                traffic += stored
            elif name.startswith(("arith.", "math.")):
                flops += _flops(op)
            else:
                if op.regions or isinstance(op, func.CallOp):
                    loaded = set()  # may store anywhere
                nested += self.op(op)
        return nested + Work(flops=flops, bytes=traffic, allocated=allocated)

    def op(self, op: Operation) -> Work:
        # Dispatched by name: most ops of a body are loads, stores and arithmetic.
        name = op.name
        if name in _LOADS:
            return Work(bytes=_access_bytes(op.results[0].type, op.operands[0].type))
        if name in _STORES:
            return Work(bytes=_access_bytes(op.operands[0].type, op.operands[1].type))
        dialect = name.partition(".")[0]
        if dialect in ("arith", "math"):
            return Work(flops=_flops(op))
        if name == "scf.for":
            trips = _trips(op.operands[0], op.operands[1], op.operands[2])
            return self.region(op.regions[0]).times(trips)
        if isinstance(op, scf.ParallelOp):
            trips = map(_trips, op.lowerBound, op.upperBound, op.step)
            return self.block(op.body.block).times(math.prod(trips)) + _PARALLEL
        if isinstance(op, affine.ForOp | affine.ParallelOp):
            body = self.region(op.body).times(math.prod(_affine_trips(op)))
            return body + _PARALLEL if isinstance(op, affine.ParallelOp) else body
        if name == "scf.while":
            return self._regions(op).times(DEFAULT_TRIP_COUNT)
        if name in ("scf.if", "affine.if"):
            return max((self.region(r) for r in op.regions), key=_weight, default=Work())
        if isinstance(op, gpu.LaunchOp):
            return self._launch(op)
        if dialect == "linalg" and isinstance(op, LinalgStructuredOperation):
            return self._linalg(op)
        if isinstance(op, func.CallOp):
            return self._call(op)
        if name in ("memref.copy", "gpu.memcpy"):
            size = memref_bytes(op.operands[-1].type)
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
        threads = math.prod(_extent(size) for size in sizes)
        return self.region(op.body).times(threads) + Work(launches=1.0, parallel=True)

    def _linalg(self, op: LinalgStructuredOperation) -> Work:
        iterations = math.prod(linalg_loop_ranges(op))
        body = self.region(op.body)
        per_iteration = sum(_element_bytes(v.type) for v in op.inputs if _is_shaped(v))
        allocated = 0
        args = op.body.block.args if op.body.blocks else ()
        for k, out in enumerate(op.outputs):
            used = len(op.inputs) + k < len(args) and bool(args[len(op.inputs) + k].uses)
            per_iteration += _element_bytes(out.type) * (2 if used else 1)
            allocated += 0 if used else _element_bytes(out.type)
        work = Work(body.flops, body.bytes + per_iteration, allocated=body.allocated + allocated)
        return work.times(iterations)

    def _call(self, op: func.CallOp) -> Work:
        name = op.callee.string_value()
        callee = SymbolTable.lookup_symbol(op, op.callee)
        if not isinstance(callee, func.FuncOp) or not callee.body.blocks or name in self._calls:
            return Work()  # external (the runtime, libm) or recursive: not counted
        self._calls.append(name)
        try:
            return self.region(callee.body)
        finally:
            self._calls.pop()


_PARALLEL = Work(parallel=True)


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


# --- constants and trip counts ------------------------------------------------------


def constant_int(value: SSAValue, depth: int = 8) -> int | None:
    """The integer `value` always holds, when `arith` constants and + - * casts fix it."""
    op = value.owner
    if depth == 0 or not isinstance(op, Operation):
        return None
    if isinstance(op, arith.ConstantOp):
        attr = op.value
        return attr.value.data if isinstance(attr, IntegerAttr) else None
    if op.name in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui"):
        return constant_int(op.operands[0], depth - 1)
    folds: dict[str, Callable[[int, int], int]] = {
        "arith.addi": lambda a, b: a + b,
        "arith.subi": lambda a, b: a - b,
        "arith.muli": lambda a, b: a * b,
    }
    fold = folds.get(op.name)
    if fold is None:
        return None
    left, right = (constant_int(v, depth - 1) for v in op.operands[:2])
    return None if left is None or right is None else fold(left, right)


def trip_count(lower: int | None, upper: int | None, step: int | None) -> int:
    """Iterations of `for i = lower to upper step step`; the default guess if unknown."""
    if lower is None or upper is None or step is None or step <= 0:
        return DEFAULT_TRIP_COUNT
    return max(0, -(-(upper - lower) // step))


def _trips(lower: SSAValue, upper: SSAValue, step: SSAValue) -> int:
    return trip_count(constant_int(lower), constant_int(upper), constant_int(step))


def _extent(value: SSAValue) -> int:
    known = constant_int(value)
    return DEFAULT_TRIP_COUNT if known is None or known < 0 else known


def _affine_trips(op: affine.ForOp | affine.ParallelOp) -> list[int]:
    if isinstance(op, affine.ForOp):
        lower = _bound(op.lowerBoundMap.data, op.lowerBoundOperands, max)
        upper = _bound(op.upperBoundMap.data, op.upperBoundOperands, min)
        return [trip_count(lower, upper, op.step.value.data)]
    lower_map, upper_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
    split = lower_map.num_dims + lower_map.num_symbols
    lowers = _grouped(lower_map, op.map_operands[:split], op.lowerBoundsGroups, max)
    uppers = _grouped(upper_map, op.map_operands[split:], op.upperBoundsGroups, min)
    steps = [s.value.data for s in op.steps.data]
    return [trip_count(lo, up, st) for lo, up, st in zip(lowers, uppers, steps)]


def _evaluated(bounds: AffineMap, operands: Sequence[SSAValue]) -> tuple[int, ...] | None:
    values = [constant_int(v) for v in operands]
    if any(v is None for v in values):
        return None
    known = [v for v in values if v is not None]
    return bounds.eval(known[: bounds.num_dims], known[bounds.num_dims :])


def _bound(
    bounds: AffineMap, operands: Sequence[SSAValue], pick: Callable[[Iterable[int]], int]
) -> int | None:
    results = _evaluated(bounds, operands)
    return pick(results) if results else None


def _grouped(
    bounds: AffineMap,
    operands: Sequence[SSAValue],
    groups: Attribute,
    pick: Callable[[Iterable[int]], int],
) -> list[int | None]:
    sizes = [int(n) for n in groups.get_values()]  # type: ignore[attr-defined]
    results = _evaluated(bounds, operands)
    picked: list[int | None] = []
    start = 0
    for size in sizes:
        picked.append(pick(results[start : start + size]) if results else None)
        start += size
    return picked


# --- sizes ----------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def element_bytes(element: Attribute) -> int:
    if isinstance(element, IndexType):
        return 8
    if isinstance(element, IntegerType):
        return max(1, (element.width.data + 7) // 8)
    width = getattr(element, "bitwidth", 32)
    return max(1, width // 8)


@lru_cache(maxsize=4096)  # a program has few types, asked about for every access
def memref_bytes(type_: Attribute) -> int:
    """Bytes of a memref (or any shaped type); `DEFAULT_TRIP_COUNT` per dynamic extent."""
    if not isinstance(type_, ShapedType):
        return element_bytes(type_)
    shape = [DEFAULT_TRIP_COUNT if d == DYNAMIC_INDEX else d for d in type_.get_shape()]
    return math.prod(shape) * element_bytes(type_.get_element_type())


def _element_bytes(type_: Attribute) -> int:
    element = type_.get_element_type() if isinstance(type_, ShapedType) else type_
    return element_bytes(element)


def _access_bytes(value_type: Attribute, memref_type: Attribute) -> int:
    """A load or store moves one element, or a whole vector."""
    if isinstance(value_type, VectorType):
        return memref_bytes(value_type)
    return _element_bytes(memref_type)


def _is_shaped(value: SSAValue) -> bool:
    return isinstance(value.type, ShapedType)


# --- devices, links and time ---------------------------------------------------------


class DeviceRates(Protocol):
    """What the roofline needs of a device (the machine description's devices have it)."""

    @property
    def peak_gflops(self) -> float: ...

    @property
    def mem_bw_gbs(self) -> float: ...


@dataclass(frozen=True)
class Device:
    """A device a rank runs on. `arch` None: any arch of its kind (no machine description
    says which). `memory_bytes` None: unknown."""

    kind: DeviceKind
    arch: str | None = None
    peak_gflops: float = 20.0
    mem_bw_gbs: float = 30.0
    memory_bytes: int | None = None
    launch_overhead_s: float = 0.0
    # CPUs: the ranks sharing the device and its cores (threads per rank: cores / ranks),
    # and one core's rates and caches as the machine description has them. None: unknown,
    # and the roofline uses the device's whole rates (shared among its ranks).
    ranks: int = 1
    cores: int | None = None
    core_gflops: float | None = None
    core_mem_bw_gbs: float | None = None
    core_cache_bytes: int | None = None
    core_cache_bw_gbs: float | None = None
    llc_bytes: int | None = None
    llc_bw_gbs: float | None = None
    core_bw_curve: tuple[tuple[int, float], ...] | None = None  # (footprint bytes, GB/s)
    # A CPU rank that also drives a GPU (ranks without a machine description: the GPU
    # runtime gives local rank r the node's GPU r mod count): its GPU tasks run there.
    gpu: "Device | None" = None


# A CPU of typical rates, for comparisons and tests (placement without a machine
# description uses this machine's: dhir.placement.from_ir.local_devices). The bandwidth
# is for bytes accessed, mostly from caches: a streaming task of 2 x 512 KiB (bench
# dag20) measured at ~35 GB/s of accesses on one core.
LOCAL_CPU = Device(DeviceKind.CPU)
# A data-centre GPU, for comparisons (H100-class: FP32 without tensor cores, HBM3).
REFERENCE_GPU = Device(
    DeviceKind.GPU, peak_gflops=60_000.0, mem_bw_gbs=3_000.0, launch_overhead_s=5e-6
)
# GPUs pay to start a kernel even when a machine description does not say how much.
DEFAULT_LAUNCH_OVERHEAD_S = 5e-6


@dataclass(frozen=True)
class Link:
    """A connection between two devices: a message of n bytes takes
    latency + n / bandwidth."""

    latency_s: float = 2e-6
    bandwidth_gbs: float = 5.0

    def time(self, nbytes: float) -> float:
        return self.latency_s + nbytes / (self.bandwidth_gbs * 1e9)


# Ranks of one machine talk through shared memory (MPICH/OpenMPI's shm transport).
LOCAL_LINK = Link()


def roofline_time(work: Work, device: DeviceRates, busy: int | None = None) -> float:
    """Seconds for `work` on `device`: bounded by compute or by memory, whichever is
    slower (rates from `rates`), plus a fixed cost per kernel launch on a GPU. `busy`:
    how many of the device's ranks run at the same time (None: all of them)."""
    compute, memory = rates(work, device, busy)
    if not _is_gpu(device):
        return max(work.flops / (compute * 1e9), _cpu_traffic(work, device, busy, memory))
    seconds = max(work.flops / (compute * 1e9), work.bytes / (memory * 1e9))
    # Whatever runs on a GPU runs as at least one kernel.
    return seconds + max(work.launches, 1.0) * _launch_overhead(device)


def rates(work: Work, device: DeviceRates, busy: int | None = None) -> tuple[float, float]:
    """(GFLOP/s, GB/s) that `work` gets on `device` while `busy` of the device's ranks run
    (None: all of them). The device's rates are shared among the busy ranks. On a CPU
    whose per-core rates are known, a task runs on one core, or with a parallel loop on
    its rank's threads (cores / ranks), each at the core's rates, within that share; and
    its bytes come from a cache when its footprint fits there: the core's own cache (per
    thread), else the last-level cache (its share of it). A measured `core_bw_curve`
    replaces those two levels: see curve_rate."""
    share = _share(device, busy)
    compute = device.peak_gflops / share
    memory = device.mem_bw_gbs / share
    if _is_gpu(device):
        return compute, memory
    threads = _threads(device) if work.parallel else 1
    if threads is None:  # cores unknown: the rank's share of the whole device
        return compute, memory
    core_gflops = getattr(device, "core_gflops", None)
    core_bw = getattr(device, "core_mem_bw_gbs", None)
    if core_gflops:
        compute = min(threads * core_gflops, compute)
    point = _curve_point(work, device, share)
    if point is not None:
        # Each thread gets what one core gets at this footprint, but the part of it that
        # comes from memory is shared with the other busy ranks, and so is the part from
        # the last-level cache unless each thread's share fits its core's own cache.
        per_thread, from_memory, _ = point
        cached = max(0.0, per_thread - from_memory)
        core_cache = getattr(device, "core_cache_bytes", None) or 0
        private = work.footprint <= core_cache * threads
        return compute, min(threads * per_thread, memory + cached * (threads if private else 1))
    if core_bw:
        memory = min(threads * core_bw, memory)
    return compute, max(memory, _cache_rate(work, device, threads, share))


def curve_rate(curve: Sequence[tuple[int, float]], footprint: float) -> float:
    """GB/s at `footprint` bytes on a measured curve (see dhir.machine.description):
    linear in the footprint's logarithm between points, flat beyond the ends. The
    footprint counts every busy rank's (they share the last-level cache)."""
    if footprint <= curve[0][0]:
        return curve[0][1]
    for (small, low_rate), (large, high_rate) in zip(curve, curve[1:]):
        if footprint <= large:
            t = math.log(footprint / small) / math.log(large / small)
            return low_rate + t * (high_rate - low_rate)
    return curve[-1][1]


def _curve_point(work: Work, device: DeviceRates, share: int) -> tuple[float, float, float] | None:
    """On `device`'s measured curve, if it has one: (one thread's GB/s at `work`'s
    footprint with `share` busy ranks, the memory rate, the curve's fastest rate)."""
    curve = getattr(device, "core_bw_curve", None)
    if not curve:
        return None
    return curve_rate(curve, work.footprint * share), *_curve_ends(curve, device)


def _curve_ends(curve: Sequence[tuple[int, float]], device: DeviceRates) -> tuple[float, float]:
    """(one core's memory rate, the curve's fastest rate)."""
    memory = getattr(device, "core_mem_bw_gbs", None) or curve[-1][1]
    return memory, max(rate for _, rate in curve)


def _cpu_traffic(work: Work, device: DeviceRates, busy: int | None, rate: float) -> float:
    """Seconds of a CPU task's memory traffic at `rate` GB/s (STREAM-counted). From a cache,
    accesses bound the time, and STREAM counts accesses. From memory, cache lines do: the
    lines stores allocate are read too, which STREAM's count leaves out (STREAM_COUNTED)."""
    threads = (_threads(device) if work.parallel else 1) or 1
    from_memory = (work.bytes + work.allocated) * STREAM_COUNTED
    point = _curve_point(work, device, _share(device, busy))
    if point is not None:
        # Between the caches' rate and memory's, weighed by where the footprint lies.
        per_thread, memory, fastest = point
        cached = _cached_share(per_thread, memory, fastest)
        warm = (cached * work.bytes + (1 - cached) * from_memory) / (rate * 1e9)
        cold = cold_bytes(work, device, busy) / work.bytes if work.bytes else 0.0
        if not cold:
            return warm
        # The first pass over the cold bytes comes from memory, at the rate one core (or
        # the task's threads) streams a large array; the rest as above.
        first = cold * from_memory / (_memory_rate(device, busy, threads) * 1e9)
        return first + warm * (1.0 - cold)
    if _cache_rate(work, device, threads, _share(device, busy)) > 0:
        return work.bytes / (rate * 1e9)
    return from_memory / (rate * 1e9)


def cold_bytes(work: Work, device: DeviceRates, busy: int | None = None) -> float:
    """Bytes of `work`'s footprint that are not in a cache when it starts (at most its
    traffic): none when its schedule's working set stays in the caches, all of them when
    the working set is far beyond, and in between what the curve says of the working set
    (the share of one core's rate above memory's that it keeps). A CPU with a measured
    curve only: the working set is what the curve can tell. (Measured here: a stencil
    whose 16 MiB tasks sweep 64 MiB of data ran at memory's rate, twice the estimate that
    took their data for cached.)"""
    curve = getattr(device, "core_bw_curve", None)
    if not curve or not work.working_set or not work.bytes:
        return 0.0
    kept = _cached_share(curve_rate(curve, work.working_set), *_curve_ends(curve, device))
    return min(work.bytes, work.footprint * (1.0 - kept))


def _memory_rate(device: DeviceRates, busy: int | None, threads: int) -> float:
    """GB/s from memory for `threads` threads of a rank while `busy` ranks run."""
    memory = device.mem_bw_gbs / _share(device, busy)
    core = getattr(device, "core_mem_bw_gbs", None)
    return min(threads * core, memory) if core else memory


def _cached_share(rate: float, memory: float, fastest: float) -> float:
    """Where `rate` lies between memory's and the fastest cache's, from 0 to 1."""
    if fastest <= memory:
        return 0.0
    return min(1.0, max(0.0, (rate - memory) / (fastest - memory)))


def _share(device: DeviceRates, busy: int | None) -> int:
    ranks = max(1, int(getattr(device, "ranks", 1) or 1))
    return ranks if busy is None else max(1, min(ranks, busy))


def _threads(device: DeviceRates) -> int | None:
    """A rank's OpenMP threads: the device's cores shared among its ranks (as `dhir run`
    sets them)."""
    cores = getattr(device, "cores", None)
    if not cores:
        return None
    return max(1, int(cores) // max(1, int(getattr(device, "ranks", 1) or 1)))


def _cache_rate(work: Work, device: DeviceRates, threads: int, share: int) -> float:
    """GB/s from the caches that hold the whole footprint; 0 when none does (or the
    description has no caches)."""
    core_cache = getattr(device, "core_cache_bytes", None)
    core_cache_bw = getattr(device, "core_cache_bw_gbs", None)
    if core_cache and core_cache_bw and work.footprint <= core_cache * threads:
        return threads * core_cache_bw
    llc = getattr(device, "llc_bytes", None)
    llc_bw = getattr(device, "llc_bw_gbs", None)
    if llc and llc_bw and work.footprint <= llc / share:
        return threads * llc_bw
    return 0.0


def _is_gpu(device: DeviceRates) -> bool:
    return str(getattr(device, "kind", "cpu")) == DeviceKind.GPU


def _launch_overhead(device: DeviceRates) -> float:
    given = getattr(device, "launch_overhead_s", None)
    return float(given) if given else DEFAULT_LAUNCH_OVERHEAD_S


# --- measured profiles --------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """Seconds per run of a task, measured on a device of `kind` (and `arch`)."""

    seconds: float
    kind: str = "cpu"
    arch: str | None = None


@dataclass
class Profile:
    """Measured task times, by task name (see `task_ids`); JSON as `dhir run --profile`
    writes it: {"tasks": {"main.schedule0.task0": seconds, ...}, "ranks": N,
    "devices": {"main.schedule0.task0": {"kind": "cpu", "arch": "x86_64", "rank": 0}},
    "calls": {...}, "schedules": {"main.schedule0": seconds, ...}}. Only "tasks" is
    required; a task without "devices" was measured on a CPU. `schedules` holds each
    schedule's measured wall time per run (the slowest rank's), when the profile has it."""

    tasks: dict[str, Measurement] = field(default_factory=dict)
    schedules: dict[str, float] = field(default_factory=dict)

    def seconds(self, task: str, device: object) -> float | None:
        """The measured time of `task` on a device like `device`, if there is one."""
        found = self.tasks.get(task)
        if found is None or found.kind != str(getattr(device, "kind", "cpu")):
            return None
        arch = getattr(device, "arch", None)
        if found.arch is not None and arch is not None and found.arch != arch:
            return None
        return found.seconds


def load_profile(path: str | Path) -> Profile:
    """Read a profile; a missing or malformed file is a DhirError."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as error:
        raise _profile_error(path, f"cannot read it: {error.strerror}") from None
    except ValueError as error:
        raise _profile_error(path, f"it is not JSON: {error}") from None
    return profile_from_json(data, str(path))


def profile_from_json(data: object, where: str = "the profile") -> Profile:
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict):
        raise _profile_error(where, 'it needs a "tasks" object: {"tasks": {"<task>": seconds}}')
    devices = data.get("devices", {}) if isinstance(data, dict) else {}
    profile = Profile()
    for name, seconds in tasks.items():
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise _profile_error(where, f'task "{name}" has time {seconds!r}; need seconds >= 0')
        device = devices.get(name, {}) if isinstance(devices, dict) else {}
        kind = device.get("kind", "cpu") if isinstance(device, dict) else "cpu"
        arch = device.get("arch") if isinstance(device, dict) else None
        profile.tasks[name] = Measurement(float(seconds), str(kind), arch)
    profile.schedules = _schedule_times(data.get("schedules", {}), where)  # type: ignore[union-attr]
    return profile


def _schedule_times(schedules: object, where: str) -> dict[str, float]:
    if not isinstance(schedules, dict):
        raise _profile_error(where, '"schedules" must be an object: {"<schedule>": seconds}')
    times: dict[str, float] = {}
    for name, seconds in schedules.items():
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise _profile_error(
                where, f'schedule "{name}" has time {seconds!r}; need seconds >= 0'
            )
        times[str(name)] = float(seconds)
    return times


def _profile_error(path: object, why: str) -> DhirError:
    return DhirError([Diagnostic(f"cannot use {path} as task costs: {why}")])


# --- the cost model ----------------------------------------------------------------------


Transfer = Callable[[object, object, float], float]


class CostModel:
    """Task times (estimated, or measured when `profile` has them) and transfer times.

    `transfer(src, dst, nbytes)` gives a transfer's time between two devices (a machine
    description's `transfer_time`); without it every pair is joined by `link`."""

    def __init__(
        self,
        profile: Profile | None = None,
        link: Link = LOCAL_LINK,
        transfer: Transfer | None = None,
    ) -> None:
        self.profile = profile
        self.link = link
        self.transfer = transfer
        self._work: dict[TaskOp, Work] = {}

    def work(self, task: TaskOp, effects: Effects | None = None, working_set: int = 0) -> Work:
        """`task`'s work (`effects`: its effects, when known), with `working_set` (see
        Work) the first time it is asked for."""
        if task not in self._work:
            work = task_work(task, effects)
            self._work[task] = replace(work, working_set=working_set)
        return self._work[task]

    def task_time(
        self, task: TaskOp, name: str, device: DeviceRates, busy: int | None = None
    ) -> float:
        """Measured, else estimated with `busy` of the device's ranks running at once
        (None: all of them; see `rates`)."""
        measured = self.profile.seconds(name, device) if self.profile is not None else None
        if measured is not None:
            return measured
        return roofline_time(self.work(task), device, busy)

    def comm_time(self, nbytes: float, devices: Sequence[object]) -> float:
        """A transfer's time between two distinct devices of `devices`, on average."""
        if self.transfer is None:
            return self.link.time(nbytes)
        latency, per_byte = self._mean_link(tuple(devices))
        return latency + nbytes * per_byte

    def _mean_link(self, devices: tuple[object, ...]) -> tuple[float, float]:
        # Transfer times are affine in the size, so their mean is the mean latency
        # plus the mean time per byte: two probes per pair, once per device list.
        cached = getattr(self, "_link_cache", None)
        if cached is not None and cached[0] == devices:
            return cached[1]
        assert self.transfer is not None
        pairs = [(a, b) for i, a in enumerate(devices) for j, b in enumerate(devices) if i != j]
        probe = 1e9
        latency = sum(self._pair_time(a, b, 0.0) for a, b in pairs) / max(len(pairs), 1)
        full = sum(self._pair_time(a, b, probe) for a, b in pairs) / max(len(pairs), 1)
        result = (latency, (full - latency) / probe)
        self._link_cache = (devices, result)
        return result

    def _pair_time(self, source: object, target: object, nbytes: float) -> float:
        # Two ranks of one device still exchange messages: over `link`.
        assert self.transfer is not None
        if source is target:
            return self.link.time(nbytes)
        return self.transfer(source, target, nbytes)
