"""One loop split over a node's GPU and its CPU cores (dhir-split-devices), against each
device alone: a float64 gemm (linalg.matmul) and a 5-point stencil sweep (scf.parallel),
each a task bound to `{kind = "any"}` that an entry runs ITERS times.

    .venv/bin/python bench/gpu_split.py build DIR [--cpu x86-64-v3] [--arch sm_90]
        [--shares 0.5,0.7,...]                                   # here (LLVM 22)
    python3 bench/gpu_split.py run DIR [--runtime RUNTIME] [--threads 15] [--repeats 2]
        [--budget 240]                                           # there

`build` makes, per kernel: the task on the GPU alone (1 rank), on the CPU alone (1 rank,
OpenMP threads), the task whole on each device of the split's 2 ranks (`gpu2r`, `cpu2r`:
what placement could do instead of splitting, with the messages it needs), and split
over 2 ranks (rank 0 the CPU, rank 1 the GPU) by machine descriptions that give the GPU
each share in `--shares` of the rates. The split's sizes
are fixed when it is built, and this machine has no GPU to measure, so several shares are
built; `run` measures both devices alone first, then the built shares nearest the one
their times call for (t_cpu / (t_cpu + t_gpu): the split a description with measured
rates makes) first, the 2-rank devices right after the first split.

Each time is the entry's own (MPI_Wtime on rank 0 around the loop, results gathered
included), per iteration: (time of 1 + N iterations - time of 1) / N, medians of
`--repeats`, so start-up, CUDA's first-use costs and file I/O are left out. Each line is
printed as soon as it is measured; variants not started within a kernel's share of
`--budget` seconds are skipped. Every iteration of a GPU piece copies its rows in and out,
as a task run once does; the whole task on the GPU (`gpu`, `gpu2r`) copies its data in
before the first iteration and out after the last only, since 2026-12-01 (docs/gpu.md,
"In a time loop"): its times before then include copies every iteration. `run` checks
every result against the CPU alone's bit for bit (all are exact) and the gemm against
NumPy. It needs Python with NumPy and dhir importable and the run-time libraries
`tests/gpu_check.py build` copies into DIR/runtime.
"""

# ruff: noqa: E402
import argparse
import json
import os
import pickle
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions

GEMM_N = 1536
STENCIL_N = 4096
BASE, EXTRA = 1, 4
SHARES = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)

GEMM = f"""
func.func private @MPI_Wtime() -> f64
func.func @main(%a: memref<{GEMM_N}x{GEMM_N}xf64>, %b: memref<{GEMM_N}x{GEMM_N}xf64>,
                %c: memref<{GEMM_N}x{GEMM_N}xf64>, %iters: index, %time: memref<1xf64>) {{
  %start = func.call @MPI_Wtime() : () -> f64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %k = %c0 to %iters step %c1 {{
    dhir.schedule %a, %b, %c {{
      %where = dhir.target {{kind = "TARGET"}}
      %t = dhir.task %where, %a, %b, %c attributes {{name = "gemm"}} {{
        linalg.matmul ins(%a, %b : memref<{GEMM_N}x{GEMM_N}xf64>, memref<{GEMM_N}x{GEMM_N}xf64>)
                      outs(%c : memref<{GEMM_N}x{GEMM_N}xf64>)
      }}
    }}
  }}
  %end = func.call @MPI_Wtime() : () -> f64
  %seconds = arith.subf %end, %start : f64
  memref.store %seconds, %time[%c0] : memref<1xf64>
  return
}}
"""

STENCIL = f"""
func.func private @MPI_Wtime() -> f64
func.func @main(%a: memref<{STENCIL_N}x{STENCIL_N}xf64>, %b: memref<{STENCIL_N}x{STENCIL_N}xf64>,
                %iters: index, %time: memref<1xf64>) {{
  %start = func.call @MPI_Wtime() : () -> f64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %k = %c0 to %iters step %c1 {{
    dhir.schedule %a, %b {{
      %where = dhir.target {{kind = "TARGET"}}
      %t = dhir.task %where, %a, %b attributes {{name = "sweep"}} {{
        %one = arith.constant 1 : index
        %last = arith.constant {STENCIL_N - 1} : index
        %q = arith.constant 0.25 : f64
        scf.parallel (%i, %j) = (%one, %one) to (%last, %last) step (%one, %one) {{
          %im = arith.subi %i, %one : index
          %ip = arith.addi %i, %one : index
          %jm = arith.subi %j, %one : index
          %jp = arith.addi %j, %one : index
          %n = memref.load %a[%im, %j] : memref<{STENCIL_N}x{STENCIL_N}xf64>
          %s = memref.load %a[%ip, %j] : memref<{STENCIL_N}x{STENCIL_N}xf64>
          %w = memref.load %a[%i, %jm] : memref<{STENCIL_N}x{STENCIL_N}xf64>
          %e = memref.load %a[%i, %jp] : memref<{STENCIL_N}x{STENCIL_N}xf64>
          %ns = arith.addf %n, %s : f64
          %we = arith.addf %w, %e : f64
          %all = arith.addf %ns, %we : f64
          %v = arith.mulf %all, %q : f64
          memref.store %v, %b[%i, %j] : memref<{STENCIL_N}x{STENCIL_N}xf64>
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

KERNELS = {"gemm": GEMM, "stencil": STENCIL}
# Useful work per iteration, for GFLOP/s: 2 n^3 for gemm, 5 per point for the sweep.
FLOPS = {"gemm": 2.0 * GEMM_N**3, "stencil": 5.0 * (STENCIL_N - 2) ** 2}


def _system(share: float, arch: str) -> System:
    """Rank 0: the node's CPU; rank 1: its GPU, with `share` of the two rates."""
    cpu = replace(guess_device("node.cpu", "x86_64", cores=16), peak_gflops=1000 * (1 - share))
    gpu = replace(guess_device("node.gpu0", arch), peak_gflops=1000 * share)
    return System((Node("node", (cpu, gpu)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)


Variant = tuple[str, str, int, float | None, int | None]


def _variants(shares: list[float]) -> list[Variant]:
    """(stem suffix, target kind, ranks, GPU share, rank the task is pinned to) of each
    build of a kernel: each device alone on 1 rank, then on the split's 2 ranks (the task
    whole on the GPU's rank or the CPU's: what placement could do instead of splitting),
    then the splits."""
    out: list[Variant] = [
        ("gpu", "gpu", 1, None, None),
        ("cpu", "cpu", 1, None, None),
        ("gpu2r", "gpu", 2, 0.5, 1),
        ("cpu2r", "cpu", 2, 0.5, 0),
    ]
    out += [(f"split{round(s * 100)}", "any", 2, s, None) for s in shares]
    return out


def build(directory: Path, cpu: str, arch: str, shares: list[float]) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    built = []
    for name, text in KERNELS.items():
        for suffix, kind, ranks, share, rank in _variants(shares):
            program = text.replace("TARGET", kind)
            if kind == "gpu":
                program = program.replace('{kind = "gpu"}', f'{{arch = "{arch}"}}')
            if rank is not None:
                pin = f'attributes {{dhir.rank = {rank} : i64, name = "'
                program = program.replace('attributes {name = "', pin)
            module = parse_string(program, f"{name}.mlir")
            if share is not None:
                attach(module, _system(share, arch))
            exe, signature = compile_native(module, "main", RunOptions(ranks=ranks, cpu=cpu))
            stem = f"{name}-{suffix}"
            (directory / stem).write_bytes(exe.read_bytes())
            (directory / stem).chmod(0o755)
            (directory / f"{stem}.sig").write_bytes(pickle.dumps(signature))
            built.append({"kernel": name, "stem": stem, "ranks": ranks, "share": share})
            print(f"built {stem}", flush=True)
    (directory / "manifest.json").write_text(json.dumps(built, indent=1))
    return 0


def _inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    n = GEMM_N if name == "gemm" else STENCIL_N
    count = 3 if name == "gemm" else 2
    return [rng.standard_normal((n, n)) for _ in range(count)]


def _seconds(directory: Path, entry: dict, threads: int, iters: int) -> tuple[float, list]:
    exe = directory / entry["stem"]
    signature = pickle.loads((directory / f"{entry['stem']}.sig").read_bytes())
    # Alone, the CPU has every core; split, one drives the GPU.
    count = threads + 1 if entry["ranks"] == 1 else threads
    options = RunOptions(ranks=entry["ranks"], threads=count, timeout=1200)
    inputs = [*_inputs(entry["kernel"]), iters, np.zeros(1)]
    results = run_executable(exe, signature, inputs, options)
    return float(results[-1][0]), results


def _per_iteration(directory: Path, entry: dict, threads: int, repeats: int) -> tuple[float, list]:
    """Median seconds per iteration, and the results of a run of BASE iterations."""
    times = []
    results: list = []
    for _ in range(repeats):
        base, results = _seconds(directory, entry, threads, BASE)
        more, _ = _seconds(directory, entry, threads, BASE + EXTRA)
        times.append((more - base) / EXTRA)
    return statistics.median(times), results


def run(directory: Path, runtime: Path | None, threads: int, repeats: int, budget: float) -> int:
    if runtime is not None:
        old = os.environ.get("LD_LIBRARY_PATH", "")
        os.environ["DHIR_MPICH_PREFIX"] = str(runtime / "mpich")
        os.environ["LD_LIBRARY_PATH"] = f"{runtime / 'lib'}:{runtime / 'mpich' / 'lib'}:{old}"
    entries = json.loads((directory / "manifest.json").read_text())
    end = time.monotonic() + budget
    failed = 0
    for number, name in enumerate(KERNELS):
        # Each kernel gets its share of what is left, so one slow kernel cannot starve the next.
        deadline = time.monotonic() + (end - time.monotonic()) / (len(KERNELS) - number)
        mine = {e["stem"].split("-", 1)[1]: e for e in entries if e["kernel"] == name}
        print(f"\n## {name}: ms per iteration (median), GFLOP/s, faster device alone / this")
        times: dict[str, float] = {}
        reference: list = []
        for suffix in _order(mine, times):
            if time.monotonic() > deadline:
                print(f"{suffix:>9}  not run: --budget spent", flush=True)
                continue
            times[suffix], got = _per_iteration(directory, mine[suffix], threads, repeats)
            reference = reference or got
            same = all(np.array_equal(g, w) for g, w in zip(got[:-2], reference[:-2], strict=True))
            failed += not same
            _line(name, suffix, times, "" if same else "  RESULTS DIFFER from the CPU alone's")
        _goal(name, times)
        if name == "gemm" and reference:
            a, b, c = _inputs("gemm")
            np.testing.assert_allclose(reference[2], c + BASE * (a @ b), rtol=1e-9, atol=1e-9)
    return 1 if failed else 0


def _goal(name: str, times: dict[str, float]) -> None:
    """Issue 31's goal: the best split never slower than the faster device alone (and
    faster where the two devices' rates are close)."""
    splits = {k: v for k, v in times.items() if k.startswith("split")}
    alone = [times[k] for k in ("cpu", "gpu") if k in times]
    if not splits or not alone:
        print(f"goal {name}: not measured (no split or device alone ran)")
        return
    best = min(splits, key=splits.__getitem__)
    ratio = min(alone) / splits[best]
    print(
        f"goal {name}: best split {best} {splits[best] * 1e3:.2f} ms, faster device alone "
        f"{min(alone) * 1e3:.2f} ms: {ratio:.2f}x (>= 1): {'met' if ratio >= 1 else 'NOT met'}"
        f"; measured share {_share(times):.2f}"
    )


def _order(variants: dict[str, dict], times: dict[str, float]) -> Iterator[str]:
    """The CPU alone (the reference), the GPU alone, then the splits nearest the share the
    two devices' measured times call for first (`times` fills in as they run)."""
    yield from ("cpu", "gpu")
    splits = [k for k in variants if k.startswith("split")]
    later = [k for k in ("gpu2r", "cpu2r") if k in variants]
    while splits:
        share = _share(times)
        chosen = min(splits, key=lambda k: abs(int(k.removeprefix("split")) / 100 - share))
        splits.remove(chosen)
        yield chosen
        yield from later  # after the split the times call for: the fair comparison
        later = []


def _share(times: dict[str, float]) -> float:
    """The GPU's share of a loop by the two devices' measured times alone."""
    if "cpu" not in times or "gpu" not in times:
        return 0.5
    return times["cpu"] / (times["cpu"] + times["gpu"])


def _line(name: str, suffix: str, times: dict[str, float], note: str) -> None:
    seconds = times[suffix]
    best = min(times.get("cpu", seconds), times.get("gpu", seconds))
    extra = ""
    if suffix == "gpu":
        extra = f"  (GPU share the measured rates call for: {_share(times):.2f})"
    on_two = [times[k] for k in ("gpu2r", "cpu2r") if k in times]
    if suffix.startswith("split") and on_two:
        extra = f"  ({min(on_two) / seconds:.2f}x the faster device alone on the same 2 ranks)"
    print(
        f"{suffix:>9}{seconds * 1e3:10.2f}{FLOPS[name] / seconds / 1e9:9.1f}"
        f"{best / seconds:8.2f}x{extra}{note}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("build")
    made.add_argument("directory", type=Path)
    made.add_argument("--cpu", default="x86-64-v3", help="the GPU machine's CPU (clang -march)")
    made.add_argument("--arch", default="sm_90", help="the GPU's chip")
    made.add_argument("--shares", default=",".join(map(str, SHARES)), help="GPU shares to build")
    ran = sub.add_parser("run")
    ran.add_argument("directory", type=Path)
    ran.add_argument("--runtime", type=Path, help="gpu_check's DIR/runtime")
    ran.add_argument(
        "--threads",
        type=int,
        default=15,
        help="OpenMP threads of the split's CPU rank (the CPU alone gets one more)",
    )
    ran.add_argument("--repeats", type=int, default=2)
    ran.add_argument(
        "--budget",
        type=float,
        default=240,
        help="seconds; variants not started by then are skipped",
    )
    args = parser.parse_args()
    if args.command == "build":
        shares = [float(part) for part in args.shares.split(",")]
        return build(args.directory, args.cpu, args.arch, shares)
    runtime = args.runtime.resolve() if args.runtime else None
    return run(args.directory, runtime, args.threads, args.repeats, args.budget)


if __name__ == "__main__":
    sys.exit(main())
