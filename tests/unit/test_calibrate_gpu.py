"""`dhir calibrate` on GPUs (dhir/toolchain/calibrate_gpu.py), against the fake CUDA driver
(tests/gpu_fake/fake_cuda.c): its device memory is host memory, so these tests check that
the copies are made, timed, read and stored, not what a real GPU's rates are."""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dhir.machine.description import GUESSED_HOST_LINK, Link, System, guess_device
from dhir.machine.detect import detect
from dhir.toolchain.calibrate_gpu import (
    GPU_QUICK,
    GpuMeasurements,
    apply_gpu,
    build_kernel,
    calibrate_gpus,
    device_index,
)

needs_clang = pytest.mark.skipif(shutil.which("clang-22") is None, reason="needs clang-22")


def with_gpus(*names: str) -> System:
    system = detect()
    cpu = next(d for d in system.devices if d.kind == "cpu")
    gpus = tuple(guess_device(name, "sm_90") for name in names)
    return replace(system, nodes=(replace(system.nodes[0], devices=(cpu, *gpus)),))


def test_the_device_number_comes_from_the_name_else_the_place() -> None:
    gpu = guess_device("gpu3", "sm_90")
    assert device_index(gpu, 0) == 3
    assert device_index(replace(gpu, name="node0.gpu1"), 0) == 1
    assert device_index(replace(gpu, name="accelerator"), 2) == 2


def test_apply_gpu_replaces_the_guesses() -> None:
    gpu = guess_device("gpu0", "sm_90")
    assert {"peak_gflops", "mem_bw_gbs"} <= set(gpu.guessed) and gpu.host_link.guessed
    measured = apply_gpu(gpu, GpuMeasurements(Link(12.3456, 21.98765), 2345.678, 51234.56))
    assert measured.host_link == Link(12.35, 21.99)
    assert (measured.mem_bw_gbs, measured.peak_gflops) == (2346.0, 51230.0)
    assert not {"peak_gflops", "mem_bw_gbs"} & set(measured.guessed)
    assert measured.memory_bytes == gpu.memory_bytes


@needs_clang
@pytest.mark.parametrize(("arch", "version"), [("sm_80", "7.0"), ("sm_90", "7.8")])
def test_the_kernel_is_ptx_at_dhirs_level_for_the_chip(
    arch: str, version: str, tmp_path: Path
) -> None:
    text = build_kernel(tmp_path, arch).read_text()
    assert f".version {version}\n" in text and f".target {arch}\n" in text
    assert ".entry dhir_fma(" in text
    assert text.count("fma.rn.f32") >= 8  # the chains are not folded away


def test_no_gpu_no_measurement(tmp_path: Path) -> None:
    said: list[str] = []
    system = with_gpus()
    assert calibrate_gpus(system, "mpich", True, tmp_path, said.append) == system
    assert said == ["GPUs: none found (no nvidia-smi, or it lists none); nothing to measure"]


@pytest.fixture
def fake_gpu(fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake driver in use; returns its call log."""
    log = tmp_path / "cuda.log"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    return log


@pytest.mark.mpi
@needs_clang
def test_each_gpu_is_measured_through_the_runtime(
    fake_gpu: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    system = with_gpus("gpu0", "gpu1")
    monkeypatch.setenv("FAKE_CUDA_DEVICES", "2")
    result = calibrate_gpus(system, "mpich", True, tmp_path, said.append)
    for name in ("gpu0", "gpu1"):
        before, after = system.device(name), result.device(name)
        assert not after.host_link.guessed and after.host_link != GUESSED_HOST_LINK
        assert after.host_link.latency_us > 0 and after.host_link.bandwidth_gbs > 0
        assert after.mem_bw_gbs > 0 and after.peak_gflops > 0
        assert not {"peak_gflops", "mem_bw_gbs"} & set(after.guessed)
        assert after.memory_bytes == before.memory_bytes
    assert result.device("cpu0") == system.device("cpu0")
    # Each size copied in all three directions, the first trial not kept, on both GPUs.
    copies = [int(line.split()[1]) for line in fake_gpu.read_text().splitlines()
              if line.startswith("cuMemcpyAsync")]  # fmt: skip
    large = GPU_QUICK.large_copy
    per_gpu = 3 * (GPU_QUICK.trials + 1)
    assert copies.count(8) == 2 * per_gpu * GPU_QUICK.small_reps
    assert copies.count(large) == 2 * per_gpu * GPU_QUICK.large_reps
    # The kernel: loaded as PTX for the driver to compile, launched once per trial.
    log = fake_gpu.read_text().splitlines()
    assert sum(line.startswith("cuModuleLoadDataEx") for line in log) == 2
    launches = [line for line in log if line.startswith("cuLaunchKernel")]
    assert launches == 2 * (GPU_QUICK.trials + 1) * [
        "cuLaunchKernel dhir_fma grid=8192x1x1 block=256x1x1"
    ]
    assert sum(line.startswith("  host link: latency") for line in said) == 2


@pytest.mark.mpi
@needs_clang
def test_a_gpu_that_fails_keeps_its_guesses_and_says_why(
    fake_gpu: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    system = with_gpus("gpu0", "gpu1")  # the fake has one GPU: gpu1 is not there
    monkeypatch.setenv("FAKE_CUDA_FAIL", "cuMemAlloc_v2")
    result = calibrate_gpus(system, "mpich", True, tmp_path, said.append)
    assert result == system
    failures = [line for line in said if "not measured:" in line]
    assert len(failures) == 2
    assert "cuMemAlloc failed on GPU 0: out of memory (fake)" in failures[0]
    assert "DHIR_GPU_DEVICE=1, but this node has 1 GPUs" in failures[1]
    assert "dhir: error on rank" not in "\n".join(said)
    assert failures[0].startswith("  not measured: calibration step 'copies' failed")
    assert "\nthe GPU calibration: cuMemAlloc failed" in failures[0]


@pytest.mark.mpi
@needs_clang
def test_a_chip_llvm_cannot_target_is_not_measured(fake_gpu: Path, tmp_path: Path) -> None:
    said: list[str] = []
    # A description may name a chip by a suffix LLVM 22 has no code generator for.
    system = with_gpus("gpu0")
    system = system.with_device(replace(system.device("gpu0"), arch="sm_86f"))
    assert calibrate_gpus(system, "mpich", True, tmp_path, said.append) == system
    assert any('not measured: LLVM 22 cannot generate code for "sm_86f"' in line for line in said)
