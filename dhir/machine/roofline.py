"""How long work takes on a device: a roofline, max(flops / compute rate, traffic /
memory rate), plus a launch overhead per kernel on a GPU.

On a CPU (`rates`): one core's rates for a task without parallel loops, the rank's threads'
with them, within the node's rates shared among the ranks busy at once; a cache's bandwidth
when the footprint fits it; traffic counts the write-allocate reads that STREAM-counted
rates leave out. The work comes from dhir.analysis.work, the device from a machine
description (dhir.machine.description). See docs/costs.md.
"""

import math
from collections.abc import Sequence
from dataclasses import replace

from dhir.analysis.work import Work
from dhir.machine.description import CPU_FP_LATENCY_NS, Device
from dhir.targets import DeviceKind

# A STREAM triad (a = b + s * c) counts 24 bytes per element, but a CPU's write-allocate
# cache moves 32 from memory: it reads a's line before writing it. Rates are STREAM's.
STREAM_COUNTED = 24 / 32
# GPUs pay to start a kernel even when a machine description does not say how much.
DEFAULT_LAUNCH_OVERHEAD_S = 5e-6
# The share of a core's f32 FMA peak (as `core_gflops` gives it) that the register-blocked
# code of dhir-optimize-bodies reaches, weighed by element width (f64 at half the f32
# rate): measured on gemm and 2mm (docs/costs.md, "Blocked nests and chains").
BLOCKED_EFFICIENCY = 1.0
# Seconds a float add or multiply takes before an op that needs its result can start:
# what each step of a loop-carried chain costs (docs/costs.md, "Blocked nests and
# chains"), for a CPU whose description has no `fp_latency_ns`.
FP_LATENCY_S = CPU_FP_LATENCY_NS * 1e-9
# A core's first-level data cache, which machine descriptions leave out: 32 KiB on most
# x86-64 and Arm cores. Data kept there is reused at no cost; what it cannot keep comes
# from the core's own cache.
FIRST_LEVEL_BYTES = 32 << 10


def roofline_time(work: Work, device: Device, busy: int | None = None) -> float:
    """Seconds for `work` on `device`: bounded by compute or by memory, whichever is
    slower (rates from `rates`), plus a fixed cost per kernel launch on a GPU. `busy`:
    how many of the device's ranks run at the same time (None: all of them)."""
    compute, memory = rates(work, device, busy)
    if not _is_gpu(device):
        traffic = _cpu_traffic(work, device, busy, memory)
        return max(_cpu_compute(work, compute, device), traffic, _chain_time(work, device))
    seconds = max(work.flops / (compute * 1e9), work.bytes / (memory * 1e9))
    # Whatever runs on a GPU runs as at least one kernel.
    return seconds + max(work.launches, 1.0) * _launch_overhead(device)


def _cpu_compute(work: Work, compute: float, device: Device) -> float:
    """Seconds of a CPU task's arithmetic at `compute` GFLOP/s (f32 FMA peak): its
    register-blocked nests at BLOCKED_EFFICIENCY of it per f32-wide flop, the rest (loops
    the optimizer leaves as written) at the share of it `loop_share` gives."""
    rest = max(0.0, work.flops - work.blocked)
    return (rest / loop_share(device) + work.blocked_f32 / BLOCKED_EFFICIENCY) / (compute * 1e9)


def loop_share(device: Device) -> float:
    """The share of a CPU core's f32 FMA rate that its loops not blocked get: its
    `core_loop_gflops` over its `core_gflops` (the node's peak over its cores where that
    is not given). Placement fills a description's missing per-core fields first
    (with_core_guesses: CPU_LOOP_SHARE); a hand-made Device without them is timed as
    before they existed, at the FMA rate."""
    loop = device.core_loop_gflops
    core = device.core_gflops or device.peak_gflops / (device.cores or 1)
    return min(1.0, loop / core) if loop and core else 1.0


def _chain_time(work: Work, device: Device) -> float:
    """Seconds of a CPU task's loop-carried chains, one float op after another, each the
    device's `fp_latency_ns` (FP_LATENCY_S where not given; each thread runs its share of
    a parallel loop's)."""
    threads = (_threads(device) if work.parallel else 1) or 1
    latency = device.fp_latency_ns * 1e-9 if device.fp_latency_ns else FP_LATENCY_S
    return work.chain * latency / threads


def rates(work: Work, device: Device, busy: int | None = None) -> tuple[float, float]:
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
    core_gflops = device.core_gflops
    core_bw = device.core_mem_bw_gbs
    if core_gflops:
        compute = min(threads * core_gflops, compute)
    point = _curve_point(work, device, share)
    if point is not None:
        # Each thread gets what one core gets at this footprint, but the part of it that
        # comes from memory is shared with the other busy ranks, and so is the part from
        # the last-level cache unless each thread's share fits its core's own cache.
        per_thread, from_memory, _ = point
        cached = max(0.0, per_thread - from_memory)
        core_cache = device.core_cache_bytes or 0
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


def _curve_point(work: Work, device: Device, share: int) -> tuple[float, float, float] | None:
    """On `device`'s measured curve, if it has one: (one thread's GB/s at `work`'s
    footprint with `share` busy ranks, the memory rate, the curve's fastest rate)."""
    curve = device.core_bw_curve
    if not curve:
        return None
    return curve_rate(curve, work.footprint * share), *_curve_ends(curve, device)


def _curve_ends(curve: Sequence[tuple[int, float]], device: Device) -> tuple[float, float]:
    """(one core's memory rate, the curve's fastest rate)."""
    memory = device.core_mem_bw_gbs or curve[-1][1]
    return memory, max(rate for _, rate in curve)


def _cpu_traffic(work: Work, device: Device, busy: int | None, rate: float) -> float:
    """Seconds of a CPU task's memory traffic at `rate` GB/s (STREAM-counted). From a cache,
    accesses bound the time, and STREAM counts accesses. From memory, cache lines do: the
    lines stores allocate are read too, which STREAM's count leaves out (STREAM_COUNTED).
    With a traffic curve (`Work.reuse`) and known caches, see `_reuse_traffic`."""
    caches = _cache_sizes(work, device, busy)
    if work.reuse and caches:
        return _reuse_traffic(work, device, busy, rate, caches)
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


def _reuse_traffic(
    work: Work, device: Device, busy: int | None, rate: float, caches: list[tuple[float, float]]
) -> float:
    """Seconds of traffic that reuses data in the caches: the bytes the task touches at
    all, at the rate of its footprint (as without reuse, cold first pass included), and
    at the slowest cache, the bytes its loops fetch again because they cannot keep them
    in a cache of its size, at the rate of the level beyond it."""
    touched = work.moved(math.inf) or 0.0
    counted = (work.bytes + work.allocated) * STREAM_COUNTED
    scale = min(1.0, touched / counted) if counted else 1.0
    whole = replace(work, bytes=work.bytes * scale, allocated=work.allocated * scale, reuse=())
    again = max((((work.moved(c) or 0.0) - touched) / (b * 1e9) for c, b in caches), default=0)
    return _cpu_traffic(whole, device, busy, rate) + max(0.0, again)


def _cache_sizes(work: Work, device: Device, busy: int | None) -> list[tuple[float, float]]:
    """(bytes, GB/s of what lies beyond) of each cache a rank's task uses: a first-level
    cache of FIRST_LEVEL_BYTES per thread, then the points of the measured curve but the
    last (the rank's share of them; beyond: the next point's rate), or without a curve
    the core caches and the last level's share (beyond: the next level's rate)."""
    share = _share(device, busy)
    curve = device.core_bw_curve
    threads = (_threads(device) if work.parallel else 1) or 1
    if curve:
        sizes = [FIRST_LEVEL_BYTES * threads] + [size / share for size, _ in curve[:-1]]
        beyond = [size / share for size, _ in curve]
    else:
        core = device.core_cache_bytes * threads if device.core_cache_bytes else 0
        llc = device.llc_bytes / share if device.llc_bytes else 0
        if not core and not llc:
            return []
        sizes = [s for s in (FIRST_LEVEL_BYTES * threads, core, llc) if s]
        sizes = [s for k, s in enumerate(sizes) if not k or s > sizes[k - 1]]
        beyond = [s + 1 for s in sizes]
    return [
        (float(size), rates(replace(work, footprint=int(past), reuse=()), device, busy)[1])
        for size, past in zip(sizes, beyond)
    ]


def cold_bytes(work: Work, device: Device, busy: int | None = None) -> float:
    """Bytes of `work`'s footprint that are not in a cache when it starts (at most its
    traffic): none when its schedule's working set stays in the caches, all of them when
    the working set is far beyond, and in between what the curve says of the working set
    (the share of one core's rate above memory's that it keeps). A CPU with a measured
    curve only: the working set is what the curve can tell (docs/performance.md)."""
    curve = device.core_bw_curve
    if not curve or not work.working_set or not work.bytes:
        return 0.0
    kept = _cached_share(curve_rate(curve, work.working_set), *_curve_ends(curve, device))
    return min(work.bytes, work.footprint * (1.0 - kept))


def _memory_rate(device: Device, busy: int | None, threads: int) -> float:
    """GB/s from memory for `threads` threads of a rank while `busy` ranks run."""
    memory = device.mem_bw_gbs / _share(device, busy)
    core = device.core_mem_bw_gbs
    return min(threads * core, memory) if core else memory


def _cached_share(rate: float, memory: float, fastest: float) -> float:
    """Where `rate` lies between memory's and the fastest cache's, from 0 to 1."""
    if fastest <= memory:
        return 0.0
    return min(1.0, max(0.0, (rate - memory) / (fastest - memory)))


def _share(device: Device, busy: int | None) -> int:
    ranks = max(1, device.ranks)
    return ranks if busy is None else max(1, min(ranks, busy))


def _threads(device: Device) -> int | None:
    """A rank's OpenMP threads: the device's cores shared among its ranks (as `dhir run`
    sets them)."""
    cores = device.cores
    if not cores:
        return None
    return max(1, int(cores) // max(1, device.ranks))


def _cache_rate(work: Work, device: Device, threads: int, share: int) -> float:
    """GB/s from the caches that hold the whole footprint; 0 when none does (or the
    description has no caches)."""
    core_cache = device.core_cache_bytes
    core_cache_bw = device.core_cache_bw_gbs
    if core_cache and core_cache_bw and work.footprint <= core_cache * threads:
        return threads * core_cache_bw
    llc = device.llc_bytes
    llc_bw = device.llc_bw_gbs
    if llc and llc_bw and work.footprint <= llc / share:
        return threads * llc_bw
    return 0.0


def _is_gpu(device: Device) -> bool:
    return device.kind == DeviceKind.GPU


def _launch_overhead(device: Device) -> float:
    given = device.launch_overhead_s
    return given if given else DEFAULT_LAUNCH_OVERHEAD_S
