"""PolyBench/C 4.2.1 kernels in dhir, against plain C and NumPy (docs/performance.md,
"PolyBench suite"). Every dhir and C result is checked against NumPy; a mismatch stops
the run.

    .venv/bin/python bench/polybench/run.py [--size MEDIUM|LARGE] [--kernels gemm,...]
        [--tasks K] [--ranks 1,2] [--mpi mpich|openmpi] [--repeats N] [--placement P]
        [--plain] [--fast-math none|contract|reassoc|fast] [--no-optimize]

Per kernel, medians of N runs: dhir on each rank count (1 thread per rank), the same loops
in C (clang -O2, one core), NumPy (vectorised, 1 thread), the ratios, and the bytes each
rank sent (from the runtime's DHIR_RT_STATS=1 report, "n/a" where it prints none). For
gemm and 2mm with 2 ranks, also the C loops as two processes at once over row halves, no
messages: what 2 ranks could at best reach on this machine; for the stencils, dhir's own
1-rank build on half the rows (and a halo row), two processes at once, no messages. For
jacobi-2d also mpi4py + NumPy on 2 ranks and Dask array on 2 threads (the optional extra
`bench`: .venv/bin/pip install mpi4py 'dask[array]'). With --plain, also the kernel written
as plain MLIR (no dhir ops, one loop nest per statement) through the normal compile path,
which hands a function without schedules to CodeDrop, on each rank count.

Issue 27's goals for each rank's code come last: for the matrix products, GFLOP/s and the
share of the core's f64 peak measured in the same run (bench/peak.py; without FMA for
exact code), and the time against NumPy's; atax and mvt against C; the stencils against
dhir as built before issue 27 (baseline x86-64, no optimizer: the "before" row); and each
kernel on 2 ranks against NumPy on one core. --fast-math builds dhir with that relaxation
(the goals against NumPy tighten with it), --no-optimize without dhir-optimize-bodies."""

import os

# One thread per rank, for dhir's OpenMP loops and NumPy's BLAS alike: set before NumPy loads.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["DHIR_RT_STATS"] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))  # bench/peak.py

import baselines  # noqa: E402
import kernels  # noqa: E402
from kernels import check  # noqa: E402
from peak import core_f64_peak  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.placement.list_scheduling import DEFAULT_ALGORITHM  # noqa: E402
from dhir.runner import drop_code  # noqa: E402
from dhir.toolchain.build import Timing  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402
from dhir.toolchain.signature import EntrySignature  # noqa: E402
from dhir.toolchain.tools import find_llvm_tools, find_mpi  # noqa: E402
from dhir.transforms.fast_math import MODES  # noqa: E402

# What --timing says of the memrefs every rank holds whole.
WHOLE = re.compile(r"^memory: %(\w+): whole", re.M)
# The runtime's report with DHIR_RT_STATS=1, one line per rank.
STATS = re.compile(r"dhir: rank (\d+) sent (\d+) bytes in (\d+) messages")
INSTALL_HINT = "install the optional extra `bench`: .venv/bin/pip install mpi4py 'dask[array]'"
MATMULS = ("gemm", "2mm", "3mm", "syr2k")
# Kernels whose statements each compute row i from row i of the one before, so that two
# processes over row halves compute the whole result with no messages.
ROW_HALVES = ("gemm", "2mm")
STENCILS = ("jacobi-2d", "heat-3d", "fdtd-2d")


@dataclass
class DhirRun:
    seconds: list[float] = field(default_factory=list[float])
    sent: dict[int, int] | None = None  # bytes per rank, None when the runtime says nothing
    messages: dict[int, int] | None = None
    build_s: float = 0.0
    whole: set[str] = field(default_factory=set[str])  # arrays every rank holds whole


def run_dhir(
    exe: Path, signature: EntrySignature, ranks: int, values: list[np.ndarray], mpi: str
) -> tuple[list[np.ndarray], str]:
    """Run a built kernel; the results and the runtime's traffic lines (one per rank)."""
    traffic: list[str] = []
    options = RunOptions(ranks=ranks, mpi=mpi, timeout=3600)
    results = run_executable(exe, signature, values, options, traffic=traffic)
    return results, "\n".join(traffic)


def measure_dhir(
    name: str,
    sizes: dict[str, int],
    tasks: int,
    ranks: int,
    args: argparse.Namespace,
    plain: bool = False,
    before: bool = False,
) -> DhirRun:
    """The hand-tasked program with `tasks` tasks per statement, or with `plain` the plain
    one, which goes through CodeDrop first as `dhir run` and `dhir compile` take it. With
    `before`, built as before issue 27: for baseline x86-64, without the optimizer."""
    values = kernels.inputs(name, sizes)
    want = kernels.reference(name, sizes, values)
    began = time.perf_counter()
    text = kernels.plain_program(name, sizes) if plain else kernels.program(name, sizes, tasks)
    module = parse_string(text)
    if plain:
        with contextlib.redirect_stderr(io.StringIO()):  # its one line, for every run
            drop_code(module, "main")
    options = RunOptions(
        ranks=ranks,
        mpi=args.mpi,
        placement=args.placement,
        fast_math=args.fast_math,
        optimize=not args.no_optimize and not before,
        cpu="x86-64" if before else None,
    )
    timing = Timing()
    exe, signature = compile_native(module, "main", options, timing)
    run = DhirRun(build_s=time.perf_counter() - began)
    run.whole = set(WHOLE.findall("\n".join(timing.notes)))
    for _ in range(args.repeats):
        results, log = run_dhir(exe, signature, ranks, [*values.values(), np.zeros(1)], args.mpi)
        what = "dhir plain" if plain else "dhir"
        check(f"{what} {name} on {ranks} ranks", dict(zip(values, results)), want)
        run.seconds.append(float(results[-1][0]))
        found = STATS.findall(log)
        if found:
            run.sent = {int(r): int(b) for r, b, _ in found}
            run.messages = {int(r): int(m) for r, _, m in found}
    return run


def measure_dhir_halves(name: str, sizes: dict[str, int], args: argparse.Namespace) -> list[float]:
    """The ceiling for 2 ranks on this machine for a stencil: dhir's own 1-rank build of
    the kernel on what one of 2 ranks holds (half the rows and a halo row), as two
    processes at once, with no messages. A run's time is the slower process's."""
    half = kernels.half_rows(name, sizes)
    values = kernels.inputs(name, half)
    want = kernels.reference(name, half, values)
    module = parse_string(kernels.program(name, half, args.tasks))
    options = RunOptions(
        ranks=1, mpi=args.mpi, fast_math=args.fast_math, optimize=not args.no_optimize
    )
    exe, signature = compile_native(module, "main", options, Timing())
    given = [*values.values(), np.zeros(1)]
    seconds: list[float] = []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(args.repeats):
            runs = list(pool.map(lambda _: run_dhir(exe, signature, 1, given, args.mpi), (0, 1)))
            for results, _ in runs:
                check(f"dhir {name} on half the rows", dict(zip(values, results)), want)
            seconds.append(max(float(results[-1][0]) for results, _ in runs))
    return seconds


def measure_c(name: str, sizes: dict[str, int], args: argparse.Namespace, tmp: Path) -> list[float]:
    values = kernels.inputs(name, sizes)
    want = kernels.reference(name, sizes, values)
    source = tmp / f"{name}.c"
    source.write_text(kernels.c_program(name, sizes))
    exe = tmp / name
    clang = find_llvm_tools().clang
    subprocess.run([str(clang), "-O2", "-o", str(exe), str(source)], check=True)
    given, taken = tmp / f"{name}-in", tmp / f"{name}-out"
    given.mkdir(exist_ok=True)
    taken.mkdir(exist_ok=True)
    for array_name, array in values.items():
        array.astype("<f8").tofile(given / f"{array_name}.raw")
    seconds: list[float] = []
    for _ in range(args.repeats):
        out = subprocess.run(
            [str(exe), str(given), str(taken)], check=True, capture_output=True, text=True
        )
        got = {
            k: np.fromfile(taken / f"{k}.raw", dtype="<f8").reshape(v.shape)
            for k, v in values.items()
        }
        check(f"C {name}", got, want)
        seconds.append(float(out.stdout))
    return seconds


def measure_c_halves(
    name: str, sizes: dict[str, int], args: argparse.Namespace, tmp: Path
) -> list[float]:
    """The ceiling for 2 ranks on this machine: the C kernel as two processes at once, each
    over half the rows, with no messages at all. Only for kernels whose row halves are
    independent (ROW_HALVES); a run's time is the slower half's."""
    values = kernels.inputs(name, sizes)
    want = kernels.reference(name, sizes, values)
    halves = [(0, sizes["ni"] // 2), (sizes["ni"] // 2, sizes["ni"])]
    given = tmp / f"{name}-in"
    given.mkdir(exist_ok=True)
    for array_name, array in values.items():
        array.astype("<f8").tofile(given / f"{array_name}.raw")
    clang = find_llvm_tools().clang
    exes: list[Path] = []
    for k, half in enumerate(halves):
        source = tmp / f"{name}-half{k}.c"
        source.write_text(kernels.c_program(name, sizes, half))
        exes.append(tmp / f"{name}-half{k}")
        subprocess.run([str(clang), "-O2", "-o", str(exes[k]), str(source)], check=True)
        (tmp / f"{name}-out{k}").mkdir(exist_ok=True)
    seconds: list[float] = []
    for _ in range(args.repeats):
        running = [
            subprocess.Popen(
                [str(exe), str(given), str(tmp / f"{name}-out{k}")],
                stdout=subprocess.PIPE,
                text=True,
            )
            for k, exe in enumerate(exes)
        ]
        taken = [float(process.communicate()[0]) for process in running]
        if any(process.returncode for process in running):
            raise SystemExit(f"C {name} halves: a process failed")
        for k, (lo, hi) in enumerate(halves):
            got = {
                out: np.fromfile(tmp / f"{name}-out{k}" / f"{out}.raw", dtype="<f8").reshape(
                    values[out].shape
                )[lo:hi]
                for out in want
            }
            check(f"C {name} rows {lo}..{hi}", got, {out: a[lo:hi] for out, a in want.items()})
        seconds.append(max(taken))
    return seconds


def measure_numpy(name: str, sizes: dict[str, int], repeats: int) -> list[float]:
    values = kernels.inputs(name, sizes)
    seconds: list[float] = []
    for _ in range(repeats):
        began = time.perf_counter()
        kernels.reference(name, sizes, values)
        seconds.append(time.perf_counter() - began)
    return seconds


def missing_extras() -> list[str]:
    return [m for m in ("mpi4py", "dask") if importlib.util.find_spec(m) is None]


def measure_mpi4py(sizes: dict[str, int], args: argparse.Namespace, tmp: Path) -> list[float]:
    want = kernels.reference("jacobi-2d", sizes, kernels.inputs("jacobi-2d", sizes))
    install = find_mpi("mpich")  # mpi4py's wheel runs with the MPICH wheel's mpirun
    out = tmp / "mpi4py.npz"
    command = [
        str(install.mpirun),
        *install.mpirun_flags,
        "-n",
        "2",
        sys.executable,
        str(Path(baselines.__file__)),
        str(sizes["tsteps"]),
        str(sizes["n"]),
        str(out),
    ]
    seconds: list[float] = []
    for _ in range(args.repeats):
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise SystemExit(f"mpi4py baseline failed:\n{done.stdout}\n{done.stderr}")
        with np.load(out) as got:
            check("mpi4py jacobi-2d", {"A": got["A"], "B": got["B"]}, want)
        seconds.append(float(done.stdout.split()[-1]))
    return seconds


def measure_dask(sizes: dict[str, int], repeats: int) -> list[float]:
    want = kernels.reference("jacobi-2d", sizes, kernels.inputs("jacobi-2d", sizes))
    seconds: list[float] = []
    for _ in range(repeats):
        taken, got = baselines.dask_jacobi(sizes["tsteps"], sizes["n"])
        check("Dask jacobi-2d", got, want)
        seconds.append(taken)
    return seconds


def _ms(values: list[float] | None) -> str:
    return f"{statistics.median(values) * 1e3:10.2f}" if values else f"{'-':>10}"


def _bytes(run: DhirRun) -> str:
    if run.sent is None or run.messages is None:
        return "n/a"
    return ", ".join(f"r{r} {b:,} B/{run.messages[r]} msgs" for r, b in sorted(run.sent.items()))


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


# Issue 27's goals for dhir on 1 rank against NumPy, by --fast-math mode.
BODY_GOALS = {"none": 1.8, "contract": 1.35, "reassoc": 1.05, "fast": 1.05}
SYR2K_GOAL = 2.5


def flops(name: str, sizes: dict[str, int]) -> float | None:
    """The matrix products' flops as PolyBench counts them (2 per multiply-add)."""
    s = sizes
    counts = {
        "gemm": lambda: 2.0 * s["ni"] * s["nj"] * s["nk"],
        "2mm": lambda: 2.0 * s["ni"] * s["nj"] * s["nk"] + 2.0 * s["ni"] * s["nl"] * s["nj"],
        "3mm": lambda: (
            2.0 * (s["ni"] * s["nj"] * s["nk"] + s["nj"] * s["nl"] * s["nm"])
            + 2.0 * s["ni"] * s["nl"] * s["nj"]
        ),
        "syr2k": lambda: 2.0 * s["m"] * s["n"] * (s["n"] + 1),
    }
    return counts[name]() if name in counts else None


def body_goals(
    name: str, sizes: dict[str, int], med: Callable[[str], float | None], fast_math: str
) -> list[str]:
    """Issue 27's goals for one rank's code (stated for LARGE, 1 rank, 1 thread)."""
    lines: list[str] = []
    d1, d2, c, numpy_s = med("dhir1"), med("dhir2"), med("C"), med("NumPy")
    count = flops(name, sizes)
    if d1 is not None and count is not None:
        fused, apart = core_f64_peak()
        peak = apart if fast_math == "none" else fused
        rate = count / d1 / 1e9
        lines.append(
            f"dhir1: {rate:.1f} GFLOP/s, {100 * rate / peak:.0f}% of the core's measured "
            f"f64 peak ({peak:.1f} GFLOP/s{' without FMA' if fast_math == 'none' else ''})"
        )
    if d1 is not None and numpy_s is not None and name in MATMULS:
        goal = SYR2K_GOAL if name == "syr2k" else BODY_GOALS[fast_math]
        what = "exact" if fast_math == "none" else fast_math
        if name != "syr2k" or fast_math == "none":
            lines.append(
                f"dhir1 / NumPy = {d1 / numpy_s:.2f} (goal <= {goal}, {what}: "
                f"{_verdict(d1 <= goal * numpy_s)})"
            )
    if d1 is not None and c is not None and name in ("atax", "mvt"):
        lines.append(f"dhir1 / C = {d1 / c:.2f} (goal <= 1.0: {_verdict(d1 <= c)})")
    before = med("before1")
    if d1 is not None and before is not None and name in STENCILS:
        lines.append(
            f"before1 / dhir1 = {before / d1:.2f} (goal >= 1.8: {_verdict(before >= 1.8 * d1)})"
        )
    if d2 is not None and numpy_s is not None:
        lines.append(f"NumPy / dhir2 = {numpy_s / d2:.2f} (goal > 1: {_verdict(d2 < numpy_s)})")
    return lines


def goals(
    name: str, sizes: dict[str, int], med: Callable[[str], float | None], run2: DhirRun | None
) -> list[str]:
    """The issue's goals (stated for LARGE on 2 cores) beside the measured ratios."""
    lines: list[str] = []
    d1, d2, c = med("dhir1"), med("dhir2"), med("C")
    if d1 is not None and c is not None:
        lines.append(f"dhir1 / C = {d1 / c:.2f} (goal <= 1.10: {_verdict(d1 <= 1.10 * c)})")
    if d1 is not None and d2 is not None:
        speedup = d1 / d2
        if name in MATMULS:
            # Issue 27 restates the matrix products' 2-rank goal as >= 1.7x.
            lines.append(f"dhir1 / dhir2 = {speedup:.2f} (goal >= 1.7: {_verdict(speedup >= 1.7)})")
        elif name in STENCILS:
            lines.append(f"dhir1 / dhir2 = {speedup:.2f} (goal >= 1.7: {_verdict(speedup >= 1.7)})")
        else:
            lines.append(
                f"dhir2 / dhir1 = {d2 / d1:.2f} (goal <= 1.05: {_verdict(d2 <= 1.05 * d1)})"
            )
    if name == "jacobi-2d":
        n, sweeps = sizes["n"], 2 * sizes["tsteps"]
        if run2 is not None and run2.sent is not None:
            # One halo row each way per sweep; where the arrays are held whole, also rank
            # 1's halves of both (A and B) gathered once at the end (partitioned, each rank
            # writes its own part of the results instead).
            halos = sweeps * n * 8
            most = max(run2.sent.values())
            gather = n * n * 8 if run2.whole & {"A", "B"} else 0
            per_sweep = (most - gather) / sweeps
            lines.append(
                f"bytes per rank per sweep, the final gather (if any) aside = {per_sweep:,.0f} "
                f"(goal <= {n * 8:,}, a halo row: {_verdict(most <= halos + gather)})"
            )
        else:
            lines.append("bytes per sweep: n/a (the runtime printed no DHIR_RT_STATS line)")
        m4, dk = med("mpi4py2"), med("dask2")
        if d2 is not None and m4 is not None:
            lines.append(f"mpi4py2 / dhir2 = {m4 / d2:.2f} (goal >= 3: {_verdict(m4 >= 3 * d2)})")
        if d2 is not None and dk is not None:
            lines.append(f"dask2 / dhir2 = {dk / d2:.2f} (goal >= 10: {_verdict(dk >= 10 * d2)})")
    return lines


def plain_goals(name: str, ranks: list[int], med: Callable[[str], float | None]) -> list[str]:
    """Issue 17's goals for the plain kernels: as fast as the hand-tasked program on the
    same rank count; gemm and 2mm (stated for LARGE) twice as fast on 2 ranks as on 1."""
    lines: list[str] = []
    for r in ranks:
        plain, tasked = med(f"plain{r}"), med(f"dhir{r}")
        if plain is not None and tasked is not None:
            lines.append(
                f"plain{r} / dhir{r} = {plain / tasked:.2f} "
                f"(goal <= 1.10: {_verdict(plain <= 1.10 * tasked)})"
            )
    p1, p2 = med("plain1"), med("plain2")
    if name in ("gemm", "2mm") and p1 is not None and p2 is not None:
        lines.append(f"plain1 / plain2 = {p1 / p2:.2f} (goal >= 1.85: {_verdict(p1 >= 1.85 * p2)})")
    return lines


def _label(key: str, runs: dict[str, DhirRun]) -> str:
    labels = {
        "C": "plain C (clang -O2, 1 core)",
        "C2": "C, 2 processes on row halves, no MPI",
        "halves2": "dhir 1 rank on half the rows, 2 at once",
        "NumPy": "NumPy (1 thread)",
        "mpi4py2": "mpi4py + NumPy, 2 ranks",
        "dask2": "Dask map_overlap, 2 threads",
    }
    if key in labels:
        return labels[key]
    if key == "before1":
        return f"dhir 1 rank, as before issue 27 (build {runs[key].build_s:.1f} s)"
    if key.startswith("plain"):
        return f"dhir plain (CodeDrop), {key[5:]} rank(s) (build {runs[key].build_s:.1f} s)"
    return f"dhir, {key[4:]} rank(s) (build {runs[key].build_s:.1f} s)"


def bench_kernel(name: str, args: argparse.Namespace, ranks: list[int], tmp: Path) -> None:
    sizes = kernels.SIZES[name][args.size]
    times: dict[str, list[float]] = {}
    runs: dict[str, DhirRun] = {}  # by key: dhirR (hand-tasked), plainR
    for r in ranks:
        runs[f"dhir{r}"] = measure_dhir(name, sizes, args.tasks, r, args)
    for r in ranks if args.plain else []:
        runs[f"plain{r}"] = measure_dhir(name, sizes, args.tasks, r, args, plain=True)
    if name in STENCILS and 1 in ranks:
        runs["before1"] = measure_dhir(name, sizes, args.tasks, 1, args, before=True)
    for key, run in runs.items():
        times[key] = run.seconds
    times["C"] = measure_c(name, sizes, args, tmp)
    if name in ROW_HALVES and 2 in ranks:
        times["C2"] = measure_c_halves(name, sizes, args, tmp)
    if name in STENCILS and 2 in ranks:
        times["halves2"] = measure_dhir_halves(name, sizes, args)
    times["NumPy"] = measure_numpy(name, sizes, args.repeats)
    if name == "jacobi-2d":
        if missing_extras():
            missing = ", ".join(missing_extras())
            print(f"(mpi4py / Dask baselines skipped: {missing} missing; {INSTALL_HINT})")
        else:
            times["mpi4py2"] = measure_mpi4py(sizes, args, tmp)
            times["dask2"] = measure_dask(sizes, args.repeats)

    def med(key: str) -> float | None:
        return statistics.median(times[key]) if times.get(key) else None

    shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
    print(f"\n## {name} {args.size} ({shown}), K = {args.tasks}, results match NumPy")
    width = max(34, *(len(_label(key, runs)) + 2 for key in times))
    print(f"{'':{width}}{'ms':>10}{'min ms':>10}{'vs dhir1':>10}   bytes sent per rank")
    base = med("dhir1") if 1 in ranks else None
    for key, values in times.items():
        ratio = f"{statistics.median(values) / base:10.2f}" if base else f"{'-':>10}"
        extra = _bytes(runs[key]) if key in runs else ""
        print(f"{_label(key, runs):{width}}{_ms(values)}{min(values) * 1e3:10.2f}{ratio}   {extra}")
    note = "" if args.size == "LARGE" else "  [goal stated for LARGE]"
    for line in goals(name, sizes, med, runs.get("dhir2")):
        print(f"  {line}{note}")
    for line in body_goals(name, sizes, med, args.fast_math):
        print(f"  {line}{note}")
    c1, c2 = med("C"), med("C2")
    if c1 is not None and c2 is not None:
        print(f"  C / C2 = {c1 / c2:.2f} (no goal: this machine's ceiling for 2 ranks)")
    d1, d2, halves = med("dhir1"), med("dhir2"), med("halves2")
    if d1 is not None and d2 is not None and halves is not None:
        print(
            f"  dhir1 / halves2 = {d1 / halves:.2f} (no goal: this machine's ceiling for 2 "
            f"ranks, no messages); dhir2 reaches {100 * halves / d2:.0f}% of it"
        )
    for line in plain_goals(name, ranks, med) if args.plain else []:
        print(f"  {line}{note if line.startswith('plain1 / plain2') else ''}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=("MEDIUM", "LARGE"), default="MEDIUM")
    parser.add_argument("--kernels", default=",".join(kernels.SIZES), help="comma-separated")
    parser.add_argument("--tasks", type=int, default=2, help="K: tasks per statement (row blocks)")
    parser.add_argument("--ranks", default="1,2", help="comma-separated rank counts")
    parser.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--plain",
        action="store_true",
        help="also the kernels as plain MLIR (no dhir ops), compiled through CodeDrop",
    )
    parser.add_argument(
        "--placement", default=DEFAULT_ALGORITHM, help="round-robin, heft, peft, best"
    )
    parser.add_argument(
        "--fast-math", choices=MODES, default="none", help="dhir's floating-point relaxations"
    )
    parser.add_argument(
        "--no-optimize", action="store_true", help="dhir without dhir-optimize-bodies"
    )
    args = parser.parse_args()
    names = [n for n in args.kernels.split(",") if n]
    unknown = [n for n in names if n not in kernels.SIZES]
    if unknown:
        parser.error(f"unknown kernel {', '.join(unknown)}; choose from {', '.join(kernels.SIZES)}")
    ranks = [int(r) for r in args.ranks.split(",")]
    if args.tasks < 1 or args.repeats < 1 or min(ranks) < 1:
        parser.error("--tasks, --repeats and every rank count must be at least 1")
    if missing_extras() and "jacobi-2d" in names:
        print(f"note: {', '.join(missing_extras())} not installed; {INSTALL_HINT}")
    print(
        f"PolyBench {args.size}, {args.mpi}, placement {args.placement}, K = {args.tasks}, "
        f"median of {args.repeats}; times are the kernel only (MPI_Wtime / clock_gettime)"
    )
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="polybench-") as tmp:
        for name in names:
            bench_kernel(name, args, ranks, Path(tmp))
    print(f"\n(took {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
