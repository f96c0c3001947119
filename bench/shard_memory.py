"""Memory per rank of a shard program whose input and result are split (issue 30).

    .venv/bin/python bench/shard_memory.py [--rows N] [--cols M] [--split rows|cols|blocks|mixed]
        [--repeats R] [--mpi mpich|openmpi]

The program doubles an N x M f64 array (default 4096 x 1024, 32 MiB) on a grid of 1, 2 and
4 devices, its input and result split as --split says (blocks: a 2 x 2 grid; mixed: a
2 x 2 grid, the input annotated with its rows split over the first axis, the doubling
and the result over both, so that rows the devices do not divide are padded for 4; both
on 4 ranks only). Each rank's peak resident memory is measured as bench/memory.py does
(its bench/peak_rss.py in front of each rank), with an empty dhir program on as many
ranks as the baseline (the MPI library and dhir's runtime alone). The ideal per rank is
the baseline plus the rank's shards of the input and of the result (2 x the array /
ranks), which each rank reads and writes itself.
Prints the most any rank held, its ratio to 1 rank's and to that ideal, and the bytes
each rank sent. Medians of --repeats runs (3). Every result is checked against NumPy.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import memory  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.runner import drop_code  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402
from dhir.toolchain.signature import EntrySignature  # noqa: E402
from dhir.toolchain.tensors import bufferize  # noqa: E402

PROGRAM = """
shard.grid @grid(shape = GRID)
func.func @main(%u: tensor<SHAPExf64>) -> tensor<SHAPExf64> {
  %i = shard.sharding @grid split_axes = INPUT : !shard.sharding
  %s = shard.sharding @grid split_axes = SPLIT : !shard.sharding
  %us = shard.shard %u to %i : tensor<SHAPExf64>
  %v = shard.shard %us to %s annotate_for_users : tensor<SHAPExf64>
  %e = tensor.empty() : tensor<SHAPExf64>
  %r = linalg.add ins(%v, %v : tensor<SHAPExf64>, tensor<SHAPExf64>)
                  outs(%e : tensor<SHAPExf64>) -> tensor<SHAPExf64>
  %rs = shard.shard %r to %s : tensor<SHAPExf64>
  return %rs : tensor<SHAPExf64>
}
"""

SPLITS = {  # per rank count: the grid, the input's split, the doubling's and the result's
    "rows": {1: ("1", "[[0]]", "[[0]]"), 2: ("2", "[[0]]", "[[0]]"), 4: ("4", "[[0]]", "[[0]]")},
    "cols": {
        1: ("1", "[[], [0]]", "[[], [0]]"),
        2: ("2", "[[], [0]]", "[[], [0]]"),
        4: ("4", "[[], [0]]", "[[], [0]]"),
    },
    "blocks": {1: ("1x1", "[[0], [1]]", "[[0], [1]]"), 4: ("2x2", "[[0], [1]]", "[[0], [1]]")},
    "mixed": {4: ("2x2", "[[0]]", "[[0, 1]]")},
}


def build(
    rows: int, cols: int, grid: str, into: str, split: str, ranks: int, mpi: str
) -> tuple[Path, EntrySignature]:
    text = PROGRAM.replace("GRID", grid).replace("SHAPE", f"{rows}x{cols}")
    text = text.replace("INPUT", into).replace("SPLIT", split)
    module = bufferize(parse_string(text), "main", ranks)
    options = RunOptions(ranks=ranks, mpi=mpi, threads=1)
    drop_code(module, "main", options)
    return compile_native(module, "main", options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--split", choices=sorted(SPLITS), default="rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mpi", default="mpich")
    parser.set_defaults(placement="best")  # for memory.measure_empty
    args = parser.parse_args()
    u = np.random.default_rng(0).random((args.rows, args.cols))
    array_mb = u.nbytes / memory.MB
    print(f"## doubling a {args.rows} x {args.cols} f64 array ({array_mb:.1f} MB), split by")
    print(f"{args.split}; peak resident MB per rank, medians of {args.repeats}")
    print(f"{'ranks':>6}{'empty':>8}{'most':>8}{'vs 1':>7}{'ideal':>8}{'most/ideal':>11}  sent")
    with tempfile.TemporaryDirectory() as work:
        launcher = memory.Launcher(Path(work), args.mpi)
        one = None
        for ranks, (grid, into, split) in SPLITS[args.split].items():
            empty = memory.measure_empty(launcher, ranks, args.repeats, args)
            exe, signature = build(args.rows, args.cols, grid, into, split, ranks, args.mpi)
            most: list[float] = []
            for _ in range(args.repeats):
                results, reports = launcher.run(exe, signature, ranks, [u, np.zeros_like(u)])
                np.testing.assert_array_equal(results[-1], 2 * u)
                most.append(max(r.peak_mb for r in reports.values()))
            peak = statistics.median(most)
            one = one or peak
            base = empty.most_mb()
            ideal = base + 2 * array_mb / ranks
            sent = _sent(exe, signature, ranks, u, args.mpi)
            print(
                f"{ranks:6}{base:8.1f}{peak:8.1f}{peak / one:7.2f}{ideal:8.1f}"
                f"{peak / ideal:11.2f}  {sent}"
            )
    return 0


def _sent(exe: Path, signature: EntrySignature, ranks: int, u: np.ndarray, mpi: str) -> str:
    """What each rank sent, from its traffic line."""
    traffic: list[str] = []
    options = RunOptions(ranks=ranks, mpi=mpi, threads=1)
    run_executable(exe, signature, [u, np.zeros_like(u)], options, traffic=traffic)
    return ", ".join(line.split("sent ")[1].split(" in ")[0] for line in traffic)


if __name__ == "__main__":
    raise SystemExit(main())
