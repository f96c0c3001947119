"""What a message between GPU tasks on two ranks costs: a GPU task on rank 0 writes a
float64 array of 256 MiB that a GPU task on rank 1 reads, against both tasks on rank 0
(the array stays on the device), each an entry's loop of iterations.

    .venv/bin/python bench/gpu_messages.py build DIR [--cpu x86-64-v3] [--arch sm_90]   # here
    python3 bench/gpu_messages.py run DIR [--runtime RUNTIME] [--repeats 3]           # there

The array goes from rank 0's device buffer to rank 1's (docs/gpu.md, "Messages between
GPU tasks on different ranks"), each way in the same run, by DHIR_GPU_MESSAGES: `peer`
(rank 1 copies from rank 0's buffer through CUDA IPC) and `staged` (through page-locked
host buffers and MPI), and `direct` with `--direct` (device addresses to MPI: only for a
CUDA-aware MPI, which the `mpich` wheel is not). The cost of a way is the 2-rank time per
iteration less the 1-rank time, reported as GB/s of the array; it also holds the copies
out of the reader's results, which code after the schedule reads. Times are the entry's
own (MPI_Wtime on rank 0), per iteration from runs of 2 and 2 + N iterations, medians of
`--repeats`; both ranks share the node's one GPU where it has one. `run` checks every
result against NumPy. `bench/c/host_copies.cu` (nvcc there) gives the host copy bandwidth
alone, pageable and page-locked.
"""

# ruff: noqa: E402
import argparse
import json
import os
import pickle
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions

N = (256 << 20) // 8
BASE, EXTRA = 2, 8
WAYS = ("staged", "peer")  # DHIR_GPU_MESSAGES; "direct" with --direct

CHAIN = f"""
func.func private @MPI_Wtime() -> f64
func.func @main(%m: memref<{N}xf64>, %n: memref<{N}xf64>, %iters: index,
                %time: memref<1xf64>) {{
  %start = func.call @MPI_Wtime() : () -> f64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %k = %c0 to %iters step %c1 {{
    dhir.schedule %m, %n {{
      %gpu = dhir.target {{arch = "ARCH"}}
      %w = dhir.task %gpu, %m attributes {{name = "write", dhir.rank = 0 : i64}} {{
        %one = arith.constant 1.0 : f64
        %z = arith.constant 0 : index
        %u = arith.constant 1 : index
        %size = arith.constant {N} : index
        scf.parallel (%i) = (%z) to (%size) step (%u) {{
          %x = memref.load %m[%i] : memref<{N}xf64>
          %y = arith.addf %x, %one : f64
          memref.store %y, %m[%i] : memref<{N}xf64>
        }}
      }}
      %r = dhir.task %gpu, %m, %n attributes {{name = "read", dhir.rank = READER : i64}} {{
        %two = arith.constant 2.0 : f64
        %z = arith.constant 0 : index
        %u = arith.constant 1 : index
        %size = arith.constant {N} : index
        scf.parallel (%i) = (%z) to (%size) step (%u) {{
          %x = memref.load %m[%i] : memref<{N}xf64>
          %y = arith.mulf %x, %two : f64
          memref.store %y, %n[%i] : memref<{N}xf64>
        }}
      }}
    }}
  }}
  %end = func.call @MPI_Wtime() : () -> f64
  %seconds = arith.subf %end, %start : f64
  memref.store %seconds, %time[%c0] : memref<1xf64>
  return
}}
"""


def build(directory: Path, cpu: str, arch: str) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    for ranks in (1, 2):
        text = CHAIN.replace("ARCH", arch).replace("READER", str(ranks - 1))
        module = parse_string(text, "gpu_messages.mlir")
        exe, signature = compile_native(module, "main", RunOptions(ranks=ranks, cpu=cpu))
        (directory / f"chain-{ranks}").write_bytes(exe.read_bytes())
        (directory / f"chain-{ranks}").chmod(0o755)
        (directory / f"chain-{ranks}.sig").write_bytes(pickle.dumps(signature))
        print(f"built chain-{ranks}", flush=True)
    (directory / "manifest.json").write_text(json.dumps({"n": N}))
    return 0


def _seconds(directory: Path, ranks: int, iters: int) -> float:
    exe = directory / f"chain-{ranks}"
    signature = pickle.loads((directory / f"chain-{ranks}.sig").read_bytes())
    m = np.arange(N, dtype=np.float64)
    results = run_executable(
        exe,
        signature,
        [m, np.zeros(N), iters, np.zeros(1)],
        RunOptions(ranks=ranks, threads=1, timeout=600),
    )
    np.testing.assert_array_equal(results[0], m + iters)
    np.testing.assert_array_equal(results[1], (m + iters) * 2)
    return float(results[-1][0])


def _per_iteration(directory: Path, ranks: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        base = _seconds(directory, ranks, BASE)
        times.append((_seconds(directory, ranks, BASE + EXTRA) - base) / EXTRA)
    return statistics.median(times)


def run(directory: Path, runtime: Path | None, repeats: int, direct: bool) -> int:
    if runtime is not None:
        old = os.environ.get("LD_LIBRARY_PATH", "")
        os.environ["DHIR_MPICH_PREFIX"] = str(runtime / "mpich")
        os.environ["LD_LIBRARY_PATH"] = f"{runtime / 'lib'}:{runtime / 'mpich' / 'lib'}:{old}"
    one = _per_iteration(directory, 1, repeats)
    print(f"one rank (both tasks on its GPU): {one * 1e3:.2f} ms per iteration", flush=True)
    costs: dict[str, float] = {}
    for way in (*WAYS, "direct") if direct else WAYS:
        os.environ["DHIR_GPU_MESSAGES"] = way
        two = _per_iteration(directory, 2, repeats)
        costs[way] = message = two - one
        print(
            f"DHIR_GPU_MESSAGES={way}: two ranks {two * 1e3:.2f} ms per iteration; the "
            f"message of {N * 8 >> 20} MiB and the copies out {message * 1e3:.2f} ms, "
            f"{N * 8 / message / 1e9:.1f} GB/s",
            flush=True,
        )
    print(f"peer against staged: {costs['staged'] / costs['peer']:.2f}x faster")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("build")
    made.add_argument("directory", type=Path)
    made.add_argument("--cpu", default="x86-64-v3", help="the GPU machine's CPU (clang -march)")
    made.add_argument("--arch", default="sm_90", help="the GPU's chip")
    ran = sub.add_parser("run")
    ran.add_argument("directory", type=Path)
    ran.add_argument("--runtime", type=Path, help="gpu_check's DIR/runtime")
    ran.add_argument("--repeats", type=int, default=3)
    ran.add_argument("--direct", action="store_true", help="also device addresses to MPI")
    args = parser.parse_args()
    if args.command == "build":
        return build(args.directory, args.cpu, args.arch)
    runtime = args.runtime.resolve() if args.runtime else None
    return run(args.directory, runtime, args.repeats, args.direct)


if __name__ == "__main__":
    sys.exit(main())
