"""dhir's benchmarks, each printed as a ratio against its baseline measured in the
same run (these machines are noisy: medians of several runs).

    .venv/bin/python bench/run.py [hop|overhead|compile|threads|startup|schedule ...]
                                  [--mpi mpich|openmpi] [--quick]

- hop: time per dependency hop (a chain of tiny tasks alternating between two ranks)
  vs a C MPI ping-pong. Goal <= 3x C.
- overhead: a 20-task DAG of real loops on 2 ranks vs the same placement written by
  hand in C + MPI (bench/c/dag20.c). Goal <= 1.05x. Also the same run with --trace:
  goal <= 1.02x of the run without.
- compile: compile time per stage for schedules of 100, 1,000 and 10,000 tasks, and of
  issue 25's program (task k reads b[k], b[k+1], writes a[k]) with 10,000 and 100,000.
  Goals: 10,000 tasks <= 10 s end to end, 100,000 <= 120 s. Each case up to 10,000
  tasks runs 3 times (the run of median total is shown), 100,000 once.
- threads: a compute-bound parallel loop in one CPU task on T OpenMP threads vs 1 thread
  (one rank). Goal: speed-up >= 0.9 x T.
- startup: `dhir run` of a program whose build is cached (its recorded executable, no
  xDSL) vs launching that executable with mpirun directly, and vs `mpirun` of a C MPI
  hello; also the full path (`--timing`, which loads the compiler) and `dhir --help`.
  Goals: the cached run within 0.2 s of its executable under mpirun; --help < 0.2 s.
- schedule: placement quality (best vs HEFT vs PEFT) on random task graphs and
  scheduler speed (bench/schedule_quality.py). Goal: >= 50,000 tasks/s at 16 devices.

PolyBench/C kernels (gemm, 2mm, 3mm, syr2k, atax, mvt, jacobi-2d, heat-3d, fdtd-2d) on 1
and 2 ranks against plain C, NumPy, mpi4py and Dask have their own command:
bench/polybench/run.py (docs/performance.md, "PolyBench suite").
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import programs  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.toolchain.build import Timing  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402
from dhir.toolchain.tools import find_llvm_tools, find_mpi  # noqa: E402

HERE = Path(__file__).parent


def build_c(source: Path, mpi: str, out_dir: Path) -> Path:
    install = find_mpi(mpi)
    exe = out_dir / f"{source.stem}-{mpi}"
    clang = find_llvm_tools().clang
    subprocess.run(
        [
            str(clang),
            "-O2",
            "-o",
            str(exe),
            str(source),
            *install.compile_flags,
            *install.link_flags,
        ],
        check=True,
    )
    return exe


def run_c(exe: Path, mpi: str, ranks: int, *args: object) -> str:
    install = find_mpi(mpi)
    command = [
        str(install.mpirun),
        *install.mpirun_flags,
        "-n",
        str(ranks),
        str(exe),
        *map(str, args),
    ]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=600).stdout


def dhir_build(
    text: str, ranks: int, mpi: str, timing: Timing | None = None
) -> tuple[Path, object]:
    # The C baselines place task k on rank k % 2 (or as dhir.rank says): so does dhir here.
    options = RunOptions(ranks=ranks, mpi=mpi, placement="round-robin")
    return compile_native(parse_string(text), "main", options, timing)


def median(values: list[float]) -> float:
    return statistics.median(values)


def bench_hop(mpi: str, quick: bool, out_dir: Path) -> None:
    hops = 401 if quick else 2001  # odd: the chain ends on rank 0, so hops - 1 messages
    repeats = 3 if quick else 7
    exe, signature = dhir_build(programs.hop_chain(hops), 2, mpi)
    dhir_times, options = [], RunOptions(ranks=2, mpi=mpi)
    for _ in range(repeats):
        results = run_executable(exe, signature, [np.zeros(1), np.zeros(1)], options)  # type: ignore[arg-type]
        assert results[0][0] == hops, results[0]
        dhir_times.append(float(results[1][0]) / (hops - 1))
    c_exe = build_c(HERE / "c" / "pingpong.c", mpi, out_dir)
    c_times = [float(run_c(c_exe, mpi, 2, hops)) for _ in range(repeats)]
    d, c = median(dhir_times), median(c_times)
    print(f"\n## Dependency hop ({mpi}, 2 ranks, {hops - 1} hops, median of {repeats})")
    print(f"{'':24}{'us/hop':>10}")
    print(f"{'C MPI ping-pong':24}{c * 1e6:10.2f}")
    print(f"{'dhir task chain':24}{d * 1e6:10.2f}")
    print(f"ratio dhir / C: {d / c:.2f}x   (goal <= 3x)")


def bench_overhead(mpi: str, quick: bool, out_dir: Path) -> None:
    n, reps = (1 << 16, 2) if quick else (1 << 20, 4)
    repeats = 3 if quick else 7
    exe, signature = dhir_build(programs.dag20(n, reps), 2, mpi)
    inputs = [np.full(n, b + 1.0) for b in range(4)] + [np.zeros(1)]
    dhir_times, traced_times, check = [], [], 0.0
    traced = RunOptions(ranks=2, mpi=mpi, trace=out_dir / "dag20-trace.json")
    for _ in range(repeats):
        results = run_executable(exe, signature, inputs, RunOptions(ranks=2, mpi=mpi))  # type: ignore[arg-type]
        dhir_times.append(float(results[4][0]))
        check = float(results[3][n // 2])
        results = run_executable(exe, signature, inputs, traced)  # type: ignore[arg-type]
        traced_times.append(float(results[4][0]))
    c_exe = build_c(HERE / "c" / "dag20.c", mpi, out_dir)
    c_runs = [run_c(c_exe, mpi, 2, n, reps).split() for _ in range(repeats)]
    c_times = [float(seconds) for seconds, _ in c_runs]
    assert float(c_runs[0][1]) == check, (c_runs[0][1], check)
    d, c, t = median(dhir_times), median(c_times), median(traced_times)
    print(
        f"\n## Overhead: 20-task DAG ({mpi}, 2 ranks, n = {n}, {reps} sweeps, median of {repeats})"
    )
    print(f"{'':24}{'ms':>10}")
    print(f"{'hand-written C + MPI':24}{c * 1e3:10.2f}")
    print(f"{'dhir':24}{d * 1e3:10.2f}")
    print(f"{'dhir, --trace':24}{t * 1e3:10.2f}")
    print(f"ratio dhir / C: {d / c:.3f}x   (goal <= 1.05x; results agree: {check})")
    print(f"ratio traced / not: {t / d:.3f}x   (goal <= 1.02x)")


def bench_startup(mpi: str, quick: bool, out_dir: Path) -> None:
    repeats = 5 if quick else 11
    program = out_dir / "startup.mlir"
    program.write_text(programs.dag20(64, 1))
    inputs = [out_dir / f"in{k}.npy" for k in range(5)]
    for k, path in enumerate(inputs):
        np.save(path, np.full(64 if k < 4 else 1, k + 1.0))
    dhir = [sys.executable, "-m", "dhir"]
    run = [*dhir, "run", str(program), "-n", "2", "--mpi", mpi, "-q", "--output-dir"]
    run += [str(out_dir / "results"), *(f"--input={path}" for path in inputs)]
    subprocess.run(run, check=True, capture_output=True)  # builds, and records the build
    exe = out_dir / "startup"  # the same build, copied out
    compile_ = [*dhir, "compile", str(program), "-n", "2", "--mpi", mpi, "-q", "-o", str(exe)]
    subprocess.run(compile_, check=True, capture_output=True)
    raw = [out_dir / f"in{k}.raw" for k in range(5)]
    for path, source in zip(raw, inputs):
        np.load(source).tofile(path)
    (out_dir / "raw-out").mkdir(exist_ok=True)
    hello = build_c(HERE / "c" / "hello.c", mpi, out_dir)
    cases = {
        "mpirun C MPI hello": lambda: run_c(hello, mpi, 2),
        "mpirun dhir executable": lambda: run_c(exe, mpi, 2, out_dir / "raw-out", *raw),
        "dhir run (cached)": lambda: subprocess.run(run, check=True, capture_output=True),
        "dhir run (full path)": lambda: subprocess.run(
            [*run, "--timing"], check=True, capture_output=True
        ),
        "dhir --help": lambda: subprocess.run([*dhir, "--help"], check=True, capture_output=True),
    }
    times = {name: median([_seconds(case) for _ in range(repeats)]) for name, case in cases.items()}
    print(f"\n## Start-up ({mpi}, 2 ranks, median of {repeats}; the dag20 program, n = 64)")
    print(f"{'':28}{'s':>8}")
    for name, seconds in times.items():
        print(f"{name:28}{seconds:8.3f}")
    gap = times["dhir run (cached)"] - times["mpirun dhir executable"]
    print(f"cached run - its executable under mpirun: {gap:.3f} s   (goal <= 0.2 s)")
    print(f"dhir --help: {times['dhir --help']:.3f} s   (goal < 0.2 s)")
    print(f"full path / cached: {times['dhir run (full path)'] / times['dhir run (cached)']:.1f}x")
    loaded = subprocess.run(
        [sys.executable, "-X", "importtime", *run[1:]], capture_output=True, text=True
    ).stderr
    print(f"cached run loads NumPy: {'yes' if ' numpy' in loaded else 'no'}")


def _seconds(case: Callable[[], object]) -> float:
    started = time.perf_counter()
    case()
    return time.perf_counter() - started


def bench_threads(mpi: str, quick: bool, out_dir: Path) -> None:
    n, inner = (1 << 12, 2000) if quick else (1 << 14, 4000)
    repeats = 3 if quick else 7
    most = os.cpu_count() or 1
    exe, signature = dhir_build(programs.compute_bound(n, inner), 1, mpi)
    inputs = [np.ones(n), np.zeros(1)]
    times: dict[int, float] = {}
    results: dict[int, np.ndarray] = {}
    for threads in sorted({1, most}):
        options = RunOptions(ranks=1, mpi=mpi, threads=threads)
        runs = [
            run_executable(exe, signature, inputs, options)  # type: ignore[arg-type]
            for _ in range(repeats)
        ]
        times[threads] = median([float(r[1][0]) for r in runs])
        results[threads] = runs[0][0]
    same = all(np.array_equal(results[1], r) for r in results.values())
    print(f"\n## CPU task on OpenMP threads ({mpi}, 1 rank, n = {n}, {inner} steps,", end=" ")
    print(f"median of {repeats})")
    print(f"{'threads':>8}{'ms':>10}{'speed-up':>10}{'/ threads':>11}")
    for threads, seconds in times.items():
        speedup = times[1] / seconds
        print(f"{threads:8}{seconds * 1e3:10.1f}{speedup:10.2f}{speedup / threads:11.2f}")
    print(f"goal: speed-up / threads >= 0.9 at {most} threads; results identical: {same}")


def bench_compile(mpi: str, quick: bool, out_dir: Path) -> None:
    sizes = (100, 1000) if quick else (100, 1000, 10000)
    cases = [(n, "plain") for n in sizes] + [(sizes[-1], "literals")]
    # Issue 25's program: every task with its own constants, all on two memrefs.
    cases += [(n, "neighbours") for n in ((1000, 10000) if quick else (10000, 100000))]
    print(f"\n## Compile time per stage (2 ranks, {mpi}, no cache), seconds")
    print("(*: every task with its own constants; n: task k reads b[k], b[k+1], writes a[k];")
    print(f" the run of median total of {COMPILE_REPEATS} up to 10,000 tasks, one of 100,000)")
    rows: list[tuple[str, Timing]] = []
    for tasks, program in cases:
        repeats = COMPILE_REPEATS if tasks <= 10_000 else 1
        runs = [
            _compile_case(tasks, program, mpi, out_dir / f"cache-{tasks}-{program}-{k}")
            for k in range(repeats)
        ]
        mark = {"plain": "", "literals": "*", "neighbours": "n"}[program]
        rows.append((f"{tasks:,}{mark}", sorted(runs, key=lambda t: t.total)[repeats // 2]))
    per_stage = [_by_stage(t) for _, t in rows]
    stages = list(dict.fromkeys(s for table in per_stage for s in table))
    print(f"{'stage':28}" + "".join(f"{name:>12}" for name, _ in rows))
    for stage in stages:
        print(f"{stage:28}" + "".join(f"{table.get(stage, 0.0):12.2f}" for table in per_stage))
    print(f"{'total':28}" + "".join(f"{t.total:12.2f}" for _, t in rows))
    for name, timing in rows:
        goal = COMPILE_GOALS.get(name.replace(",", "").rstrip("*n"))
        if goal is not None:
            print(
                f"{name} tasks end to end: {timing.total:.1f} s, {timing.total / goal:.2f}x"
                f" the goal (<= {goal:.0f} s)"
            )


# Seconds end to end, by task count (issue 25).
COMPILE_GOALS = {"10000": 10.0, "100000": 120.0}
COMPILE_REPEATS = 3


def _compile_case(tasks: int, program: str, mpi: str, cache: Path) -> Timing:
    """One run of bench/compile_case.py in a process of its own, with an empty cache."""
    command = [sys.executable, str(HERE / "compile_case.py"), str(tasks), program, mpi]
    env = {**os.environ, "DHIR_CACHE_DIR": str(cache)}
    output = subprocess.run(command, env=env, capture_output=True, text=True)
    if output.returncode != 0:
        raise SystemExit(f"compile case {tasks} {program} failed:\n{output.stderr}")
    timing = Timing()
    for name, seconds in json.loads(output.stdout.splitlines()[-1]):
        timing.add(name, seconds)
    return timing


def _by_stage(timing: Timing) -> dict[str, float]:
    table: dict[str, float] = {}
    for name, seconds in timing.stages:
        table[name] = table.get(name, 0.0) + seconds
    return table


def bench_schedule(mpi: str, quick: bool, out_dir: Path) -> None:
    import schedule_quality

    schedule_quality.main(quick)


BENCHMARKS = {
    "hop": bench_hop,
    "overhead": bench_overhead,
    "compile": bench_compile,
    "threads": bench_threads,
    "startup": bench_startup,
    "schedule": bench_schedule,
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "which",
        nargs="*",
        metavar="BENCHMARK",
        help="hop, overhead, compile, threads, startup, schedule (default: all)",
    )
    parser.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    args = parser.parse_args()
    unknown = [name for name in args.which if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="dhir-bench-") as tmp:
        for name in args.which or BENCHMARKS:
            BENCHMARKS[name](args.mpi, args.quick, Path(tmp))
    print(f"\n(benchmarks took {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
