"""Measure this node's NVIDIA GPUs, as compiled programs use them: copies between ordinary
host memory and the GPU (its `host_link`: latency and bandwidth, both directions averaged),
within the GPU (its `mem_bw_gbs`: a device-to-device copy reads and writes each byte), and
f32 fused multiply-adds in a kernel filling the GPU (its `peak_gflops`), all through dhir's
own GPU runtime, with the C program dhir/runtime/dhir_calibrate_gpu.c. The kernel
(dhir_calibrate_gpu_kernel.c) is compiled to PTX for the GPU's chip by clang's NVPTX back
end, and by the driver when it loads: no CUDA toolkit is needed.

A GPU whose measurement fails keeps its guesses, and the failure is said; the CPU's
measurements still count.
"""

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.description import Device, Link, System
from dhir.runtime import GPU_RUNTIME_SOURCE, RUNTIME_DIR, RUNTIME_SOURCE
from dhir.targets import DeviceKind, UnknownArchError, ptx_feature
from dhir.toolchain.build import C_FLAGS, Timing
from dhir.toolchain.build import run_stage as run_build_stage
from dhir.toolchain.calibrate_steps import fit_link, results, run_step, significant
from dhir.toolchain.tools import find_llvm_tools, find_mpi

SOURCE = RUNTIME_DIR / "dhir_calibrate_gpu.c"
KERNEL_SOURCE = RUNTIME_DIR / "dhir_calibrate_gpu_kernel.c"
SMALL_COPY = 8  # bytes: the latency


@dataclass(frozen=True)
class GpuEffort:
    trials: int
    small_reps: int  # copies per trial of the small size
    large_copy: int  # bytes: the bandwidths (capped by the memories)
    large_reps: int
    fma_iters: int  # steps of each thread's FMA chains


GPU_FULL = GpuEffort(10, 200, 256 << 20, 4, 8192)
GPU_QUICK = GpuEffort(3, 50, 64 << 20, 2, 2048)


@dataclass(frozen=True)
class GpuMeasurements:
    host_link: Link
    mem_bw_gbs: float
    peak_gflops: float


def calibrate_gpus(
    system: System,
    mpi: str,
    quick: bool,
    directory: Path,
    say: Callable[[str], None],
) -> System:
    """`system` with each GPU's host link, memory bandwidth and compute rate measured
    where that works (`directory`: where the programs are built)."""
    gpus = [d for d in system.devices if d.kind == DeviceKind.GPU]
    if not gpus:
        say("GPUs: none found (no nvidia-smi, or it lists none); nothing to measure")
        return system
    effort = GPU_QUICK if quick else GPU_FULL
    try:
        exe = build_gpu_program(directory, mpi)
    except DhirError as error:
        say(f"GPUs: not measured, the measuring program did not build: {_reason(error)}")
        return system
    kernels: dict[str, Path] = {}  # by arch: a node's GPUs are mostly of one chip
    for position, gpu in enumerate(gpus):
        say(f"{gpu.name} ({gpu.arch}): copies to, from and within it, and f32 FMAs ...")
        arch = gpu.arch
        assert arch is not None  # a description's devices have one
        try:
            if arch not in kernels:
                kernels[arch] = build_kernel(directory, arch)
            kernel = kernels[arch]
            measured = measure_gpu(exe, kernel, device_index(gpu, position), effort, gpu)
        except DhirError as error:
            say(f"  not measured: {_reason(error)}; kept typical values, marked as guesses")
            continue
        link = measured.host_link
        say(
            f"  host link: latency {link.latency_us:.3g} us, bandwidth "
            f"{link.bandwidth_gbs:.3g} GB/s; memory {measured.mem_bw_gbs:.3g} GB/s; "
            f"compute {measured.peak_gflops:.4g} GFLOP/s"
        )
        system = system.with_device(apply_gpu(gpu, measured))
    return system


def _reason(error: DhirError) -> str:
    return "; ".join(d.message for d in error.diagnostics)


def device_index(gpu: Device, position: int) -> int:
    """The CUDA device number: detection names GPUs gpuN after nvidia-smi's index N (which
    CUDA_DEVICE_ORDER=PCI_BUS_ID makes the driver's too); else the GPU's place among them."""
    found = re.fullmatch(r"(?:.*\.)?gpu(\d+)", gpu.name)
    return int(found.group(1)) if found else position


def apply_gpu(gpu: Device, measured: GpuMeasurements) -> Device:
    """`gpu` with its host link, memory bandwidth and compute rate measured (no longer
    guesses)."""
    host = measured.host_link
    link = Link(significant(host.latency_us), significant(host.bandwidth_gbs))
    rates = {"mem_bw_gbs": measured.mem_bw_gbs, "peak_gflops": measured.peak_gflops}
    guessed = tuple(g for g in gpu.guessed if g not in rates)
    rates = {key: significant(value) for key, value in rates.items()}
    return replace(gpu, host_link=link, guessed=guessed, **rates)


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


def build_kernel(directory: Path, arch: str) -> Path:
    """The FMA kernel as PTX for `arch`, at the PTX level dhir's GPU builds use for it.
    clang's front end is called directly (-cc1): its driver would pick the newest PTX
    level it knows, which older drivers cannot load."""
    try:
        feature = ptx_feature(arch)
    except UnknownArchError as error:
        raise DhirError([Diagnostic(str(error))]) from None
    target = f"kernel-{arch}.ptx"
    command = [
        find_llvm_tools().clang,
        "-cc1",
        "-triple",
        "nvptx64-nvidia-cuda",
        "-target-cpu",
        arch,
        "-target-feature",
        feature,
        "-O3",
        f"-I{RUNTIME_DIR}",
        "-S",
        "-o",
        target,
        KERNEL_SOURCE,
    ]
    run_build_stage(Timing(), f"clang (GPU calibration kernel, {arch})", directory, command)
    return directory / target


def measure_gpu(
    exe: Path, kernel: Path, index: int, effort: GpuEffort, gpu: Device
) -> GpuMeasurements:
    large = effort.large_copy
    if gpu.memory_bytes:
        large = min(large, gpu.memory_bytes // 4)  # two buffers, with room to spare
    sizes = [f"{SMALL_COPY}:{effort.small_reps}", f"{large}:{effort.large_reps}"]
    times = _copy_times(_run(exe, ["copies", str(effort.trials), *sizes], index))
    wanted = [(way, n) for way in ("h2d", "d2h", "d2d") for n in (SMALL_COPY, large)]
    if not all(key in times for key in wanted):
        raise DhirError([Diagnostic(f"the copies printed times for {sorted(times)} only")])
    one_way = {n: (times["h2d", n] + times["d2h", n]) / 2 for n in (SMALL_COPY, large)}
    within = times["d2d", large]
    latency_us, bandwidth_gbs = fit_link(SMALL_COPY, one_way[SMALL_COPY], large, one_way[large])
    fma = ["fma", str(effort.trials), str(kernel), str(effort.fma_iters)]
    found = results(_run(exe, fma, index), "fma")[0]
    flops, seconds = found.amount, found.seconds
    link = Link(latency_us, bandwidth_gbs)
    return GpuMeasurements(link, 2 * large / within / 1e9, flops / seconds / 1e9)


def _copy_times(output: str) -> dict[tuple[str, int], float]:
    return {
        (direction, int(row.amount)): row.seconds
        for direction in ("h2d", "d2h", "d2d")
        for row in results(output, direction)
    }


def _run(exe: Path, args: list[str], index: int) -> str:
    env = dict(os.environ, DHIR_GPU_DEVICE=str(index), CUDA_DEVICE_ORDER="PCI_BUS_ID")
    env.pop("DHIR_GPU_STATS", None)
    return run_step(exe, args, env)
