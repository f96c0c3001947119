"""A shard program's halo stencil on 1, 2 and 4 ranks (examples/shard_stencil.mlir, a
3-point stencil in a time loop written per device, `shard.update_halo` each step).

    .venv/bin/python bench/shard_stencil.py [--rows N] [--cols M] [--steps T] [--repeats R]

Prints, per rank count: the time per step (the run with T steps less the run with none,
over T: start-up, input and output cancel out), the speed-up over 1 rank, and the bytes
each rank sent per step against the halo rows alone (the goal: no more than the halo).
Each result is checked against NumPy first.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.runner import drop_code
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tensors import bufferize

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "shard_stencil.mlir"


def program(rows: int, cols: int, grid: int, steps: int) -> str:
    """The example's program for a `rows` x `cols` array on `grid` devices."""
    mine = rows // grid
    text = EXAMPLE.read_text()
    for old, new in [
        ("64x32", f"{rows}x{cols}"),
        ("18x32", f"{mine + 2}x{cols}"),
        ("16x32", f"{mine}x{cols}"),
        ("[16, 32]", f"[{mine}, {cols}]"),
        ("shape = 4", f"shape = {grid}"),
        ("%steps = arith.constant 10", f"%steps = arith.constant {steps}"),
    ]:
        text = text.replace(old, new)
    return text


def expected(u: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        padded = np.zeros((u.shape[0] + 2, u.shape[1]))
        padded[1:-1] = u
        u = ((padded[:-2] + padded[1:-1]) + padded[2:]) / 3.0
    return u


def timed(u: np.ndarray, grid: int, steps: int, repeats: int) -> tuple[float, list[str]]:
    module = bufferize(parse_string(program(*u.shape, grid, steps)), "main", grid)
    options = RunOptions(ranks=grid, threads=1)
    drop_code(module, "main", options)
    exe, signature = compile_native(module, "main", options)
    inputs = [u, np.zeros_like(u)]
    traffic: list[str] = []
    got = run_executable(exe, signature, inputs, options, traffic=traffic)[-1]
    np.testing.assert_array_equal(got, expected(u, steps))
    return median_seconds(exe, signature, inputs, options, repeats), traffic


def median_seconds(
    exe: Path, signature: EntrySignature, inputs: list[np.ndarray], options: RunOptions, runs: int
) -> float:
    """The median wall time of `runs` runs of `exe`."""
    seconds = []
    for _ in range(runs):
        began = time.perf_counter()
        run_executable(exe, signature, inputs, options)
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds)


def sent(traffic: list[str]) -> list[int]:
    return [int(line.split()[4]) for line in traffic]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    u = np.random.default_rng(0).random((args.rows, args.cols))
    halo = args.cols * 8  # one row, each way
    cores = os.cpu_count() or 1
    print(f"## Shard halo stencil {args.rows}x{args.cols} f64, {args.steps} steps")
    print(f"{'ranks':>5} {'ms/step':>9} {'speed-up':>9} {'bytes/step/rank':>16} {'halo rows':>10}")
    base = None
    for grid in (1, 2, 4):
        full, traffic = timed(u, grid, args.steps, args.repeats)
        none, quiet = timed(u, grid, 0, args.repeats)
        per_step = (full - none) / args.steps
        base = base or per_step
        moved = max(a - b for a, b in zip(sent(traffic), sent(quiet)))
        note = "" if grid <= cores else f"  ({cores} cores: oversubscribed)"
        print(
            f"{grid:5} {per_step * 1e3:9.3f} {base / per_step:9.2f}x "
            f"{moved / args.steps:16.0f} {2 * halo if grid > 2 else halo * (grid > 1):10}{note}"
        )


if __name__ == "__main__":
    main()
