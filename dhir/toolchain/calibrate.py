"""Measure this machine: MPI latency and bandwidth between two local ranks (ping-pong, the
bandwidth with messages larger than the last-level cache, as a schedule's arrays are), memory
bandwidth (a STREAM triad on every core) and f32 FMA throughput (every core), and the same
for one core: a triad as generated code runs it from memory, from the core's own cache and
from the last-level cache (sized by detection), its bandwidth over a range of footprints
(`core_bw_curve`), FMAs on one thread, a stencil as generated code runs loops the optimizer
does not block, and the latency of a chain of float ops; with the C program
dhir/runtime/dhir_calibrate.c built by the toolchain's clang and MPI.

Each GPU is measured by dhir/toolchain/calibrate_gpu.py. What one node cannot measure stays a
guess, and is said to be: the network between nodes.

A description of two nodes or more (`calibrate_links`) gets its links measured instead, with
ranks laid out by a hostfile as `dhir run` lays them out: `network` between one rank on its
first node and one on its second, `intra_node` between two ranks on its first node.
"""

import math
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.description import Device, Link, System
from dhir.machine.detect import detect
from dhir.machine.layout import slots_text
from dhir.runtime import RUNTIME_DIR
from dhir.targets import DeviceKind, host_arch
from dhir.toolchain.build import C_FLAGS, Timing, writing_cache
from dhir.toolchain.build import run_stage as run_build_stage
from dhir.toolchain.calibrate_gpu import calibrate_gpus
from dhir.toolchain.calibrate_steps import (
    STEP_TIMEOUT_S,
    Result,
    fit_link,
    noisy,
    results,
    run_step,
    significant,
)
from dhir.toolchain.launch import run_mpi_program
from dhir.toolchain.options import RunOptions
from dhir.toolchain.tools import DEFAULT_MPI, cache_root, find_llvm_tools, find_mpi
from dhir.units import byte_size

SOURCE = RUNTIME_DIR / "dhir_calibrate.c"
SMALL_MESSAGE = 8  # bytes: the latency


@dataclass(frozen=True)
class Effort:
    """How long to measure: sizes and repetitions (the median of `trials` is kept)."""

    pingpong_trials: int
    pingpong_reps: int  # round trips per trial of the small message
    pingpong_bytes: int  # bytes per trial of the large message (fewer round trips)
    large_message: int  # bytes: the bandwidth
    triad_elements: int  # per array, of 8 bytes: far beyond the caches
    triad_trials: int
    fma_iterations: int
    fma_trials: int
    cache_bytes_moved: int = 256 << 20  # per trial of an in-cache triad on one core
    curve_passes: int = 3  # over all of the curve's footprints, the trials split among them
    # One core's stencil sweeps and float chain: trials of a fraction of a millisecond,
    # which a shared machine rarely preempts (trials of 10 ms measured up to 3x slower
    # under a load of 15 on 2 cores), many of them for the median.
    loop_sweeps: int = 20
    chain_iterations: int = 100_000
    short_trials: int = 51


FULL = Effort(10, 2000, 1 << 30, 16 << 20, 1 << 26, 20, 20_000_000, 10)
QUICK = Effort(3, 200, 64 << 20, 4 << 20, 1 << 24, 5, 10_000_000, 3, 64 << 20, 1)
TRIAD_BYTES = 24  # per element: STREAM's count (read 2 doubles, write 1)
CURVE_SMALLEST = 1 << 20  # a core's cache, when detection did not find it
CURVE_LARGEST = 64 << 20  # the largest footprint at the least


@dataclass(frozen=True)
class Measurements:
    latency_us: float
    bandwidth_gbs: float
    mem_bw_gbs: float
    peak_gflops: float
    # One core (None: not measured): description field name -> rate.
    core: dict[str, float] = field(default_factory=dict)
    curve: tuple[tuple[int, float], ...] | None = None  # one core's GB/s by footprint


def calibrate(
    mpi: str = DEFAULT_MPI,
    quick: bool = False,
    base: System | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> System:
    """`base` (default: detect()) with this node's CPU rates and intra-node link measured.
    `say` hears progress and what was left unmeasured, line by line."""
    system = detect() if base is None else base
    if len(system.nodes) != 1:
        raise DhirError([Diagnostic("calibration measures one node: give a one-node description")])
    cpu = next(d for d in system.devices if d.kind == DeviceKind.CPU)
    effort = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="dhir-calibrate-") as tmp:
        exe = build_program(Path(tmp), mpi)
        measured = measure(exe, mpi, effort, cpu, say)
        system = apply(system, cpu, measured, say)
        return calibrate_gpus(system, mpi, quick, Path(tmp), say)


def calibrate_links(
    system: System, mpi: str = DEFAULT_MPI, quick: bool = False, say: Callable[[str], None] = print
) -> System:
    """`system` (two nodes or more) with `network` and `intra_node` measured by ping-pongs
    launched with a hostfile, as `dhir run` lays ranks out: one rank on each of its first
    two nodes, then two ranks on its first node. The program is built here, under dhir's
    cache (as `dhir run` builds programs), so every node must reach it at the same path
    (a shared file system) and run this CPU's code. Devices
    are kept as given: calibrate each node on its own for them."""
    if len(system.nodes) < 2:
        raise DhirError(
            [Diagnostic("measuring the network needs a description of two nodes or more")]
        )
    first, second = system.nodes[0], system.nodes[1]
    cpu = next(d for d in first.devices if d.kind == DeviceKind.CPU)
    effort = QUICK if quick else FULL
    root = cache_root()
    with writing_cache(root):
        root.mkdir(parents=True, exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix="calibrate-", dir=root))
        try:
            exe = build_program(directory, mpi)
            links = {}
            for name, slots, between in (
                ("network", [(first.host, 1), (second.host, 1)], f"{first.host} and {second.host}"),
                ("intra_node", [(first.host, 2)], f"2 ranks on {first.host}"),
            ):
                hostfile = directory / f"hosts-{name}"
                hostfile.write_text(slots_text(slots, mpi))
                latency, bandwidth = measure_pingpong(
                    exe, mpi, effort, say, cpu.llc_bytes, hostfile, between
                )
                links[name] = Link(significant(latency), significant(bandwidth))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    if len(system.nodes) > 2:
        say(f"network: measured between {first.name} and {second.name}, taken for all nodes")
    say("devices: kept as described; run dhir calibrate on each node to measure them")
    return replace(system, network=links["network"], intra_node=links["intra_node"])


def build_program(directory: Path, mpi: str) -> Path:
    """dhir_calibrate for this CPU (-march=native: it only ever runs here), with OpenMP and
    `mpi`, built by the toolchain's clang."""
    tools = find_llvm_tools()
    install = find_mpi(mpi)
    tuning = ["-march=native"]
    if host_arch() == "x86_64":
        tuning.append("-mprefer-vector-width=512")  # clang's default keeps AVX-512 to 256 bits
    command = [
        tools.clang,
        "-O3",
        *tuning,
        "-fopenmp",
        *C_FLAGS,
        *install.compile_flags,
        SOURCE,
        "-o",
        "dhir_calibrate",
        *install.link_flags,
    ]
    run_build_stage(Timing(), "clang (calibration program)", directory, command)
    return directory / "dhir_calibrate"


def measure(
    exe: Path, mpi: str, effort: Effort, cpu: Device, say: Callable[[str], None]
) -> Measurements:
    latency, bandwidth = measure_pingpong(exe, mpi, effort, say, cpu.llc_bytes)
    threads = cpu.cores or 1
    memory = cpu.memory_bytes or effort.triad_elements * 4 * 3 * 8  # unknown: not the limit
    elements = min(effort.triad_elements, memory // (4 * 3 * 8))  # a quarter of RAM
    say(f"memory bandwidth: triad on {threads} threads, 3 x {byte_size(elements * 8)} ...")
    triad = ["triad", str(elements), str(effort.triad_trials)]
    found = _run_local(exe, triad, threads)
    mem_bw = found.amount / found.seconds / 1e9
    _say_rate(say, f"{mem_bw:.3g} GB/s", found)
    say(f"compute: f32 fused multiply-adds on {threads} threads ...")
    fma = ["fma", str(effort.fma_iterations), str(effort.fma_trials)]
    found = _run_local(exe, fma, threads)
    gflops = found.amount / found.seconds / 1e9
    _say_rate(say, f"{gflops:.4g} GFLOP/s", found)
    core, curve = measure_core(exe, effort, cpu, say)
    return Measurements(latency, bandwidth, mem_bw, gflops, core, curve)


def measure_core(
    exe: Path, effort: Effort, cpu: Device, say: Callable[[str], None]
) -> tuple[dict[str, float], tuple[tuple[int, float], ...]]:
    """One core's rates: a triad from memory, from its own cache (a footprint of half of
    it) and from the last-level cache (the geometric mean of both caches' sizes), and f32
    FMAs, on one thread."""
    memory = cpu.memory_bytes or effort.triad_elements * 4 * TRIAD_BYTES
    elements = min(effort.triad_elements, memory // (4 * TRIAD_BYTES))
    sizes = {"core_mem_bw_gbs": elements * TRIAD_BYTES}
    if cpu.core_cache_bytes:
        sizes["core_cache_bw_gbs"] = cpu.core_cache_bytes // 2
    if cpu.llc_bytes and cpu.core_cache_bytes and cpu.llc_bytes > 2 * cpu.core_cache_bytes:
        # In the middle of the range only the LLC holds, geometrically: well beyond the
        # core's cache, and well within the LLC even where other cores (or, in a VM,
        # other guests) use part of it.
        sizes["llc_bw_gbs"] = math.isqrt(cpu.llc_bytes * cpu.core_cache_bytes)
    elif cpu.llc_bytes and not cpu.core_cache_bytes:
        sizes["llc_bw_gbs"] = cpu.llc_bytes // 4
    rates: dict[str, float] = {}
    for key, footprint in sizes.items():
        n = max(footprint // TRIAD_BYTES, 1024)
        sweeps = max(1, effort.cache_bytes_moved // (n * TRIAD_BYTES))
        # In-cache trials are short, and the median of few of them is still noisy.
        trials = effort.triad_trials * (1 if key == "core_mem_bw_gbs" else 4)
        say(f"one core: triad over {byte_size(n * TRIAD_BYTES)} ...")
        serial = ["serial", str(n), str(trials), str(sweeps)]
        found = _run_local(exe, serial, 1)
        rates[key] = found.amount / found.seconds / 1e9
        _say_rate(say, f"{rates[key]:.3g} GB/s", found)
    if "llc_bw_gbs" not in rates and "core_cache_bw_gbs" in rates:
        rates["llc_bw_gbs"] = rates["core_cache_bw_gbs"]  # one level: the core's is the last
    curve = measure_curve(exe, effort, cpu, say)
    say("one core: f32 fused multiply-adds on 1 thread ...")
    args = ["fma", str(effort.fma_iterations), str(effort.fma_trials)]
    found = _run_local(exe, args, 1)
    rates["core_gflops"] = found.amount / found.seconds / 1e9
    _say_rate(say, f"{rates['core_gflops']:.4g} GFLOP/s", found)
    rates |= measure_loops(exe, effort, say)
    return rates, curve


def measure_loops(exe: Path, effort: Effort, say: Callable[[str], None]) -> dict[str, float]:
    """One core's rate on loops the optimizer does not block (`core_loop_gflops`: a 5-point
    stencil as generated code runs it, from its own cache) and the latency of a float add
    or multiply (`fp_latency_ns`: a chain of them, each waiting for the last)."""
    trials = str(effort.short_trials)
    say("one core: 5-point f64 stencil sweeps (a loop as built, not blocked) ...")
    found = _run_local(exe, ["loop", str(effort.loop_sweeps), trials], 1)
    loop = found.amount / found.seconds / 1e9
    _say_rate(say, f"{loop:.4g} GFLOP/s", found)
    say("one core: a chain of f64 multiplies and adds (the FP latency) ...")
    found = _run_local(exe, ["chain", str(effort.chain_iterations), trials], 1)
    latency = found.seconds / found.amount * 1e9
    _say_rate(say, f"{latency:.3g} ns per op", found)
    return {"core_loop_gflops": loop, "fp_latency_ns": latency}


def curve_footprints(cpu: Device) -> list[int]:
    """Footprints from a quarter of the core's cache to four times the last level (at
    least 64 MiB), two per doubling: where the caches' effective sizes lie is what the
    curve is for."""
    smallest = (cpu.core_cache_bytes or CURVE_SMALLEST) // 4
    largest = max(4 * (cpu.llc_bytes or 0), CURVE_LARGEST)
    sizes: list[int] = []
    size = float(max(smallest, 64 << 10))
    while size <= largest * 1.001:
        sizes.append(int(size) // TRIAD_BYTES * TRIAD_BYTES)
        size *= math.sqrt(2)
    return sizes


def measure_curve(
    exe: Path, effort: Effort, cpu: Device, say: Callable[[str], None]
) -> tuple[tuple[int, float], ...]:
    """One core's triad GB/s at each of curve_footprints: the median of `curve_passes`
    passes over all of them. Where the caches end, a busy spell of the machine's other
    guests moves a single pass's rates by up to 40%, and passes seconds apart rarely all
    meet one."""
    sizes = curve_footprints(cpu)
    passes = max(1, effort.curve_passes)
    say(
        f"one core: triad over {len(sizes)} footprints, {byte_size(sizes[0])} to "
        f"{byte_size(sizes[-1])}"
        f", {passes} pass(es) ..."
    )
    steps: dict[int, list[str]] = {}
    for footprint in sizes:
        sweeps = max(1, effort.cache_bytes_moved // footprint)
        trials = effort.triad_trials * (4 if footprint <= 2 * (cpu.llc_bytes or 0) else 1)
        trials = max(3, -(-trials // passes))
        steps[footprint] = ["serial", str(footprint // TRIAD_BYTES), str(trials), str(sweeps)]
    rates: dict[int, list[float]] = {footprint: [] for footprint in sizes}
    for _ in range(passes):
        for footprint, args in steps.items():
            # Not warned about one by one: the curve takes the median of the passes.
            found = _run_local(exe, args, 1)
            rates[footprint].append(found.amount / found.seconds / 1e9)
    # curve_footprints gives whole triad elements, so each footprint is what was measured.
    points = [(size, significant(statistics.median(found))) for size, found in rates.items()]
    say("  " + ", ".join(f"{byte_size(size)} {rate:.3g}" for size, rate in points) + " (GB/s)")
    return tuple(points)


def measure_pingpong(
    exe: Path,
    mpi: str,
    effort: Effort,
    say: Callable[[str], None],
    llc_bytes: int | None = None,
    hostfile: Path | None = None,
    between: str = "2 local ranks",
) -> tuple[float, float]:
    """(latency in us, bandwidth in GB/s) between 2 ranks (local ones, or where `hostfile`
    puts them; `between` says which, for `say`), run as dhir runs programs. The large
    message is at least twice the last-level cache: smaller ones are copied through the
    cache, at twice the rate on a 2-core VM, which schedules' arrays are not."""
    say(f"MPI ping-pong between {between} ({mpi}) ...")
    small, large = SMALL_MESSAGE, max(effort.large_message, 2 * (llc_bytes or 0))
    large_reps = max(2, effort.pingpong_bytes // large)
    sizes = [f"{small}:{effort.pingpong_reps}", f"{large}:{large_reps}"]
    command = ["pingpong", str(effort.pingpong_trials), *sizes]
    options = RunOptions(ranks=2, mpi=mpi, timeout=STEP_TIMEOUT_S, hostfile=hostfile)
    output = run_mpi_program(exe, command, options)
    rows = {int(row.amount): row for row in results(output, "pingpong")}
    if small not in rows or large not in rows:
        raise DhirError([Diagnostic(f"the ping-pong printed no time for some sizes:\n{output}")])
    latency, bandwidth = fit_link(small, rows[small].seconds, large, rows[large].seconds)
    say(
        f"  latency {latency:.3g} us{_spread(rows[small])}, bandwidth {bandwidth:.3g} GB/s"
        f"{_spread(rows[large])}"
    )
    _warn(say, rows[small], rows[large])
    return latency, bandwidth


def apply(
    system: System, cpu: Device, measured: Measurements, say: Callable[[str], None]
) -> System:
    """`system` with the measured values in place of guesses."""
    rates = {"peak_gflops": measured.peak_gflops, "mem_bw_gbs": measured.mem_bw_gbs}
    rates = {key: significant(value) for key, value in (rates | measured.core).items()}
    guessed = tuple(g for g in cpu.guessed if g not in rates)
    curve = measured.curve if measured.curve is not None else cpu.core_bw_curve
    system = system.with_device(replace(cpu, **rates, core_bw_curve=curve, guessed=guessed))
    intra = Link(significant(measured.latency_us), significant(measured.bandwidth_gbs))
    if system.network.guessed:
        say("network between nodes: not measured on one node; kept a typical value (a guess)")
    return replace(system, intra_node=intra)


def _run_local(exe: Path, args: list[str], threads: int) -> Result:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return results(run_step(exe, args, env), args[0])[0]


def _say_rate(say: Callable[[str], None], rate: str, found: Result) -> None:
    """`rate` with how far the trials spread, and a warning when they spread too far."""
    say(f"  {rate}{_spread(found)}")
    _warn(say, found)


def _spread(result: Result) -> str:
    return f" (trials +-{result.spread / 2:.0%})" if result.spread is not None else ""


def _warn(say: Callable[[str], None], *found: Result) -> None:
    for line in dict.fromkeys(noisy(result) for result in found):
        if line:
            say(line)
