"""On a real NVIDIA GPU (skipped where nvidia-smi is absent): GPU tasks against the
sequential interpreter, and a GPU-to-GPU chain that must not copy through the host."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_gpu_barriers import MATMUL
from test_gpu_collectives import SUM, WARP_SUM, _program
from test_gpu_runtime import PROPOSAL, _chain

import dhir
from dhir.ir.text import parse_string

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU (nvidia-smi)"),
    pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22"),
]


def _against_oracle(program: str | Path, inputs: list[np.ndarray], ranks: int) -> None:
    oracle = dhir.run(program, *inputs, backend="interp")
    native = dhir.run(program, *inputs, ranks=ranks, placement="round-robin", timeout=300)
    for got, want in zip(native, oracle):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("ranks", [1, 2])
def test_proposal_equals_the_oracle(ranks: int) -> None:
    rng = np.random.default_rng(ranks)
    _against_oracle(PROPOSAL, [rng.integers(-99, 99, 20).astype(np.int32) for _ in range(3)], ranks)


def test_cpu_gpu_cpu_chain_across_two_ranks() -> None:
    rng = np.random.default_rng(5)
    _against_oracle(_chain(1), [rng.integers(-99, 99, 64).astype(np.int32) for _ in range(2)], 2)


def test_a_tiled_matmul_with_barriers_equals_the_oracle() -> None:
    """Workgroup memory and barriers in a loop: the interpreter runs the block's threads
    in phases between barriers, as the GPU orders them."""
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3)]
    oracle = dhir.run(parse_string(MATMUL), *inputs, backend="interp")
    native = dhir.run(parse_string(MATMUL), *inputs, ranks=1, timeout=300)
    for got, want in zip(native, oracle, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("grid", "threads"), [(2, 32), (3, 96), (2, 200)])
def test_a_block_sum_equals_the_oracle_bit_for_bit(grid: int, threads: int) -> None:
    """gpu.all_reduce, which the interpreter sums in the order of MLIR 22's lowering (a
    butterfly in each warp, then across warps: 1, 3 and 7 warps, the last of 8 lanes)."""
    n = grid * threads
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * np.float32(1e4)
    inputs = [x, np.zeros(n, np.float32), np.zeros(n, np.int32)]
    program = parse_string(_program(SUM, "f32", grid, (threads, 1, 1)))
    oracle = dhir.run(program, *inputs, backend="interp")
    native = dhir.run(program, *inputs, ranks=1, timeout=300)
    for got, want in zip(native, oracle, strict=True):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_warp_shuffle_block_sum_equals_the_oracle_bit_for_bit() -> None:
    x = np.random.default_rng(8).standard_normal(128).astype(np.float32)
    inputs = [x, np.zeros(1, np.float32)]
    oracle = dhir.run(parse_string(WARP_SUM), *inputs, backend="interp")
    native = dhir.run(parse_string(WARP_SUM), *inputs, ranks=1, timeout=300)
    for got, want in zip(native, oracle, strict=True):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("gpu_format", ["isa", "fatbin"])
def test_gpu_chain_stays_on_the_device(
    gpu_format: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DHIR_GPU_FORMAT", gpu_format)
    stats = tmp_path / "stats.txt"
    monkeypatch.setenv("DHIR_GPU_STATS", str(stats))
    rng = np.random.default_rng(6)
    _against_oracle(
        _chain(1, 1, 1), [rng.integers(-99, 99, 64).astype(np.int32) for _ in range(2)], 2
    )
    (line,) = stats.read_text().splitlines()
    counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (2, 1, 3)


def test_calibration_measures_every_gpu(tmp_path: Path) -> None:
    from dhir.machine.detect import detect
    from dhir.toolchain.calibrate_gpu import calibrate_gpus

    said: list[str] = []
    system = detect()
    result = calibrate_gpus(system, "mpich", True, tmp_path, said.append)
    gpus = [d for d in result.devices if d.kind == "gpu"]
    assert gpus, said
    for gpu, guess in zip(gpus, [d for d in system.devices if d.kind == "gpu"], strict=True):
        assert not gpu.host_link.guessed and not {"mem_bw_gbs", "peak_gflops"} & set(gpu.guessed)
        # Any PCIe or NVLink host link moves more than 1 GB/s, and a GPU's own memory more
        # than its host link; the FMA kernel gets within 3x of the data sheet's peak.
        assert gpu.host_link.bandwidth_gbs > 1 and gpu.mem_bw_gbs > gpu.host_link.bandwidth_gbs
        assert guess.peak_gflops / 3 < gpu.peak_gflops < 3 * guess.peak_gflops, said
