"""dhir-split on one task: gemm written as a single task with an outer row loop
(bench/split/gemm_one_task.mlir), with its rows tiled by 32 (`--program gemm_tiled`), or
with its loops running to the matrices' sizes (`memref.dim`, `--program gemm_dim`),
native, on 1 and 2 ranks. Prints the median wall time of each run (mpirun's start
included; a run with an empty program gives that start alone) and the speed-up, after
checking both against NumPy.

    .venv/bin/python bench/split/run.py [--repeats R] [--mpi mpich|openmpi]
        [--program gemm_one_task|gemm_tiled|gemm_dim]
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from dhir import parse_file
from dhir.backends.native import compile_native
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions

HERE = Path(__file__).parent
N = 600
PROGRAMS = ("gemm_one_task", "gemm_tiled", "gemm_dim")


def _time(ranks: int, inputs: list[np.ndarray], repeats: int, mpi: str, program: str) -> float:
    module = parse_file(HERE / f"{program}.mlir")
    exe, signature = compile_native(module, "main", RunOptions(ranks=ranks, mpi=mpi))
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        out = run_executable(exe, signature, inputs, RunOptions(ranks=ranks, mpi=mpi, threads=1))
        seconds.append(time.perf_counter() - began)
        np.testing.assert_allclose(out[2], inputs[0] @ inputs[1], rtol=1e-12)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument("--program", default="gemm_one_task", choices=PROGRAMS)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    inputs = [rng.random((N, N)), rng.random((N, N)), np.zeros((N, N))]
    one = _time(1, inputs, args.repeats, args.mpi, args.program)
    two = _time(2, inputs, args.repeats, args.mpi, args.program)
    print(
        f"{args.program} {N}x{N}x{N} f64 as one task: 1 rank {one:.3f} s, 2 ranks {two:.3f} s, "
        f"speed-up {one / two:.2f}x (median of {args.repeats}, wall time of the run)"
    )


if __name__ == "__main__":
    main()
