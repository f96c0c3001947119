"""Measure this node's NVIDIA GPUs, as compiled programs use them: copies between ordinary
host memory and the GPU (its `host_link`: latency and bandwidth, both directions averaged)
and within the GPU (its `mem_bw_gbs`: a device-to-device copy reads and writes each byte),
all through dhir's own GPU runtime, with the C program dhir/runtime/dhir_calibrate_gpu.c.

The compute rate (`peak_gflops`) stays the data sheet's guess: timing a kernel needs one
compiled for the chip, which this step does not build. A GPU whose measurement fails keeps
its guesses, and the failure is said; the CPU's measurements still count.
"""

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.calibrate import fit_link, significant
from dhir.machine.description import Device, Link, System
from dhir.runtime import RUNTIME_DIR, RUNTIME_SOURCE
from dhir.targets import DeviceKind
from dhir.toolchain.build import C_FLAGS, Timing
from dhir.toolchain.build import _run as run_build_stage
from dhir.toolchain.gpu import GPU_RUNTIME_SOURCE
from dhir.toolchain.tools import find_llvm_tools, find_mpi

SOURCE = RUNTIME_DIR / "dhir_calibrate_gpu.c"
SMALL_COPY = 8  # bytes: the latency
STEP_TIMEOUT_S = 180.0
_RUNTIME_PREFIX = re.compile(r"dhir: error on rank -?\d+: ")


@dataclass(frozen=True)
class GpuEffort:
    trials: int
    small_reps: int  # copies per trial of the small size
    large_copy: int  # bytes: the bandwidths (capped by the memories)
    large_reps: int


GPU_FULL = GpuEffort(10, 200, 256 << 20, 4)
GPU_QUICK = GpuEffort(3, 50, 64 << 20, 2)


@dataclass(frozen=True)
class GpuMeasurements:
    host_link: Link
    mem_bw_gbs: float


def calibrate_gpus(
    system: System,
    mpi: str,
    quick: bool,
    directory: Path,
    say: Callable[[str], None],
) -> System:
    """`system` with each GPU's host link and memory bandwidth measured where that works."""
    gpus = [d for d in system.devices if d.kind == DeviceKind.GPU]
    if not gpus:
        say("GPUs: none found (no nvidia-smi, or it lists none); nothing to measure")
        return system
    effort = GPU_QUICK if quick else GPU_FULL
    try:
        exe = build_gpu_program(directory, mpi)
    except DhirError as error:
        say(f"GPUs: not measured, the measuring program did not build: {error}")
        return system
    for position, gpu in enumerate(gpus):
        say(f"{gpu.name} ({gpu.arch}): copies to, from and within it ...")
        try:
            measured = measure_gpu(exe, device_index(gpu, position), effort, gpu.memory_bytes)
        except DhirError as error:
            say(f"  not measured: {error}; kept typical values, marked as guesses")
            continue
        link = measured.host_link
        say(
            f"  host link: latency {link.latency_us:.3g} us, bandwidth "
            f"{link.bandwidth_gbs:.3g} GB/s; memory {measured.mem_bw_gbs:.3g} GB/s; "
            "compute rate not measured (kept the data sheet's guess)"
        )
        system = system.with_device(apply_gpu(gpu, measured))
    return system


def device_index(gpu: Device, position: int) -> int:
    """The CUDA device number: detection names GPUs gpuN after nvidia-smi's index N (which
    CUDA_DEVICE_ORDER=PCI_BUS_ID makes the driver's too); else the GPU's place among them."""
    found = re.fullmatch(r"(?:.*\.)?gpu(\d+)", gpu.name)
    return int(found.group(1)) if found else position


def apply_gpu(gpu: Device, measured: GpuMeasurements) -> Device:
    """`gpu` with its host link and memory bandwidth measured (no longer guesses)."""
    host = measured.host_link
    link = Link(significant(host.latency_us), significant(host.bandwidth_gbs))
    guessed = tuple(g for g in gpu.guessed if g != "mem_bw_gbs")
    return replace(
        gpu, host_link=link, mem_bw_gbs=significant(measured.mem_bw_gbs), guessed=guessed
    )


def build_gpu_program(directory: Path, mpi: str) -> Path:
    """dhir_calibrate_gpu with dhir's runtimes (which need the MPI headers and library,
    though this program starts no MPI)."""
    tools = find_llvm_tools()
    install = find_mpi(mpi)
    sources = [SOURCE, GPU_RUNTIME_SOURCE, RUNTIME_SOURCE]
    command = [
        tools.clang,
        "-O2",
        *C_FLAGS,
        f"-I{RUNTIME_DIR}",
        *install.compile_flags,
        *sources,
        "-o",
        "dhir_calibrate_gpu",
        *install.link_flags,
        "-ldl",
    ]
    run_build_stage(Timing(), "clang (GPU calibration program)", directory, command)
    return directory / "dhir_calibrate_gpu"


def measure_gpu(
    exe: Path, index: int, effort: GpuEffort, memory_bytes: int | None
) -> GpuMeasurements:
    large = effort.large_copy
    if memory_bytes:
        large = min(large, memory_bytes // 4)  # two buffers, with room to spare
    args = [str(effort.trials), f"{SMALL_COPY}:{effort.small_reps}", f"{large}:{effort.large_reps}"]
    times = _copy_times(_run(exe, args, index))
    try:
        one_way = {n: (times["h2d", n] + times["d2h", n]) / 2 for n in (SMALL_COPY, large)}
        within = times["d2d", large]
    except KeyError:
        missing = "the GPU measurement printed no time for some copies"
        raise DhirError([Diagnostic(missing)]) from None
    latency_us, bandwidth_gbs = fit_link(SMALL_COPY, one_way[SMALL_COPY], large, one_way[large])
    return GpuMeasurements(Link(latency_us, bandwidth_gbs), 2 * large / within / 1e9)


def _copy_times(output: str) -> dict[tuple[str, int], float]:
    times: dict[tuple[str, int], float] = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] in ("h2d", "d2h", "d2d") and float(words[2]) > 0:
            times[words[0], int(words[1])] = float(words[2])
    return times


def _run(exe: Path, args: list[str], index: int) -> str:
    env = dict(os.environ, DHIR_GPU_DEVICE=str(index), CUDA_DEVICE_ORDER="PCI_BUS_ID")
    env.pop("DHIR_GPU_STATS", None)
    try:
        result = subprocess.run(
            [str(exe), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=STEP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DhirError([Diagnostic(f"it took over {STEP_TIMEOUT_S:g} s")]) from None
    if result.returncode != 0:
        reason = _RUNTIME_PREFIX.sub("", result.stderr.strip()) or f"exit {result.returncode}"
        raise DhirError([Diagnostic(reason)])
    return result.stdout
