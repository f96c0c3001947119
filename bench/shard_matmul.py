"""A shard program's matmul on 2-D grids of 1, 2 and 4 devices (issue 30's SUMMA-like
shardings: A by blocks of rows and k, B by blocks of k and columns, C by blocks).

    .venv/bin/python bench/shard_matmul.py [--n N] [--repeats R] [--grids 1x1,1x2,2x1,2x2]

Prints, per grid: the time of the run less that of the same program on 8 x 8 matrices
(start-up cancels out; the product, its messages and the files remain), its GFLOP/s, the
speed-up over the 1x1 grid and the bytes each rank sent (MLIR 22's partition gathers the
k of A and of B before the product, so a rank receives its rows of A and its columns of B
whole). Medians of R runs (3); each result is checked against NumPy first. Grids of more
devices than this machine has cores are marked: their times say little.
"""

import argparse
import os
from pathlib import Path

import numpy as np
from shard_stencil import median_seconds  # bench/, beside this script

from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.runner import drop_code
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tensors import bufferize

PROGRAM = """
shard.grid @grid(shape = GRID)
func.func @main(%a: tensor<NxNxf64>, %b: tensor<NxNxf64>) -> tensor<NxNxf64> {
  %sa = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %sb = shard.sharding @grid split_axes = [[1], [0]] : !shard.sharding
  %sc = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %as = shard.shard %a to %sa : tensor<NxNxf64>
  %bs = shard.shard %b to %sb : tensor<NxNxf64>
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<NxNxf64>
  %c = linalg.fill ins(%zero : f64) outs(%e : tensor<NxNxf64>) -> tensor<NxNxf64>
  %r = linalg.matmul ins(%as, %bs : tensor<NxNxf64>, tensor<NxNxf64>)
                     outs(%c : tensor<NxNxf64>) -> tensor<NxNxf64>
  %rs = shard.shard %r to %sc : tensor<NxNxf64>
  return %rs : tensor<NxNxf64>
}
"""


def build(n: int, grid: str) -> tuple[Path, EntrySignature, RunOptions]:
    ranks = int(np.prod([int(d) for d in grid.split("x")]))
    text = PROGRAM.replace("GRID", grid).replace("NxN", f"{n}x{n}")
    module = bufferize(parse_string(text), "main", ranks)
    options = RunOptions(ranks=ranks, threads=1)
    drop_code(module, "main", options)
    exe, signature = compile_native(module, "main", options)
    return exe, signature, options


def timed(n: int, grid: str, repeats: int) -> tuple[float, list[str]]:
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    inputs = [a, b, np.zeros_like(a)]
    exe, signature, options = build(n, grid)
    traffic: list[str] = []
    got = run_executable(exe, signature, inputs, options, traffic=traffic)[-1]
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    return median_seconds(exe, signature, inputs, options, repeats), traffic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grids", default="1x1,1x2,2x1,2x2")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    flops = 2 * args.n**3
    print(f"## Shard matmul {args.n}x{args.n} f64, SUMMA-like shardings, medians of {args.repeats}")
    print(f"{'grid':>5} {'ms':>9} {'GFLOP/s':>8} {'speed-up':>9}  sent per rank")
    base = None
    for grid in args.grids.split(","):
        full, traffic = timed(args.n, grid, args.repeats)
        none, _ = timed(8, grid, args.repeats)
        seconds = full - none
        base = base or seconds
        devices = int(np.prod([int(d) for d in grid.split("x")]))
        note = "" if devices <= cores else f"  ({cores} cores: oversubscribed)"
        sent = ", ".join(line.split("sent ")[1].split(" in ")[0] for line in traffic)
        print(
            f"{grid:>5} {seconds * 1e3:9.1f} {flops / seconds / 1e9:8.2f} "
            f"{base / seconds:8.2f}x  {sent}{note}"
        )


if __name__ == "__main__":
    main()
