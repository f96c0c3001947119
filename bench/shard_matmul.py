"""A shard program's matmul on 2-D grids of 1, 2 and 4 devices (issue 30's SUMMA-like
shardings: A by blocks of rows and k, B by blocks of k and columns, C by blocks).

    .venv/bin/python bench/shard_matmul.py [--n N] [--repeats R] [--grids 1x1,1x2,2x1,2x2]
    .venv/bin/python bench/shard_matmul.py --build DIR [--cpu CPU] [--n N] [--grids ...]
    python3 bench/shard_matmul.py --run DIR [--repeats R]

Prints, per grid: the time of the run less that of the same program on 8 x 8 matrices
(start-up cancels out; the product, its messages and the files remain), its GFLOP/s, the
speed-up over the 1x1 grid and the bytes each rank sent (MLIR 22's partition gathers the
k of A and of B before the product, so a rank receives its rows of A and its columns of B
whole). Medians of R runs (3); each result is checked against NumPy first. Grids of more
devices than this machine has cores are marked: their times say little.

For a machine without LLVM 22 (the GPU machine's 16 cores), `--build DIR` compiles every
grid here for that machine's CPU (`--cpu`, as clang's `-march` names it) and `--run DIR`
runs them there: it needs NumPy, dhir importable and MPICH's launcher
(`DHIR_MPICH_PREFIX`; scripts/gpu_machine.sh sets it up).
"""

import argparse
import json
import os
import pickle
from collections.abc import Callable
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

Built = tuple[Path, EntrySignature, RunOptions]

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


def _devices(grid: str) -> int:
    return int(np.prod([int(d) for d in grid.split("x")]))


def build(n: int, grid: str, cpu: str | None = None) -> Built:
    ranks = _devices(grid)
    text = PROGRAM.replace("GRID", grid).replace("NxN", f"{n}x{n}")
    module = bufferize(parse_string(text), "main", ranks)
    options = RunOptions(ranks=ranks, threads=1, cpu=cpu)
    drop_code(module, "main", options)
    exe, signature = compile_native(module, "main", options)
    return exe, signature, options


def timed(built: Built, n: int, repeats: int) -> tuple[float, list[str]]:
    """The median time of `built` (for `n` x `n` matrices), checked against NumPy, and
    what each rank sent."""
    exe, signature, options = built
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    inputs = [a, b, np.zeros_like(a)]
    traffic: list[str] = []
    got = run_executable(exe, signature, inputs, options, traffic=traffic)[-1]
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    return median_seconds(exe, signature, inputs, options, repeats), traffic


def build_to(directory: Path, n: int, grids: list[str], cpu: str | None) -> None:
    """Every grid's executables, for `n` and for 8, in `directory` with a manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    for grid in grids:
        for size in (n, 8):
            exe, signature, _ = build(size, grid, cpu)
            stem = directory / f"matmul-{grid}-{size}"
            stem.write_bytes(exe.read_bytes())
            stem.chmod(0o755)
            stem.with_suffix(".sig").write_bytes(pickle.dumps(signature))
            print(f"built {stem.name}", flush=True)
    (directory / "manifest.json").write_text(json.dumps({"n": n, "grids": grids}))


def _built_in(directory: Path, grid: str, size: int) -> Built:
    stem = directory / f"matmul-{grid}-{size}"
    signature = pickle.loads(stem.with_suffix(".sig").read_bytes())
    return stem, signature, RunOptions(ranks=_devices(grid), threads=1)


def report(n: int, grids: list[str], repeats: int, built: Callable[[str, int], Built]) -> None:
    cores = os.cpu_count() or 1
    flops = 2 * n**3
    print(f"## Shard matmul {n}x{n} f64, SUMMA-like shardings, medians of {repeats}")
    print(f"{'grid':>5} {'ms':>9} {'GFLOP/s':>8} {'speed-up':>9}  sent per rank")
    base = None
    for grid in grids:
        full, traffic = timed(built(grid, n), n, repeats)
        none, _ = timed(built(grid, 8), 8, repeats)
        seconds = full - none
        base = base or seconds
        devices = _devices(grid)
        note = "" if devices <= cores else f"  ({cores} cores: oversubscribed)"
        sent = ", ".join(line.split("sent ")[1].split(" in ")[0] for line in traffic)
        print(
            f"{grid:>5} {seconds * 1e3:9.1f} {flops / seconds / 1e9:8.2f} "
            f"{base / seconds:8.2f}x  {sent}{note}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grids", default="1x1,1x2,2x1,2x2")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--build", type=Path, metavar="DIR", help="build for another machine")
    where.add_argument("--run", type=Path, metavar="DIR", help="run what --build built")
    parser.add_argument("--cpu", help="with --build: that machine's CPU (default: this one's)")
    args = parser.parse_args()
    grids = args.grids.split(",")
    if args.build is not None:
        build_to(args.build, args.n, grids, args.cpu)
    elif args.run is not None:
        manifest = json.loads((args.run / "manifest.json").read_text())
        run = args.run
        report(manifest["n"], manifest["grids"], args.repeats, lambda g, s: _built_in(run, g, s))
    else:
        report(args.n, grids, args.repeats, lambda g, s: build(s, g))


if __name__ == "__main__":
    main()
