"""Memory per rank: each rank's peak resident memory, and the time spent distributing the
inputs and writing the results, on 1, 2 and 4 ranks (docs/performance.md, "Memory per
rank"). With partitioned storage (docs/semantics.md) a rank holds, reads and writes only
the rows of each array its tasks touch.

    .venv/bin/python bench/memory.py [--quick] [--mpi mpich|openmpi] [--repeats N]
        [--placement P]

How the memory is measured: mpirun starts, for each rank, bench/peak_rss.py, which forks
and execs the rank's executable and waits for it with os.wait4; the child's ru_maxrss is
its peak resident set (VmHWM) up to its exit, read when it is gone, so nothing in dhir or
its runtime changes and no peak between two samples is missed (polling /proc would). Linux
keeps ru_maxrss across the exec as the larger of the launcher's copy before the exec (about
9 MB, Python started with -S) and the executable's own peak: a figure above the launcher's
is the executable's own, exactly; one that is not is marked `<=`. The MPI library's memory
(its shared-memory segments included) is counted, as it is part of the rank's resident set.
The baseline is the same figure for an empty dhir program (one memref<1xf64> argument) on
the same rank count: the MPI library and dhir's runtime alone.

The runtime does not time its input and output phases, so they are derived: rank 0's
process lifetime (from the launcher's fork to the rank's exit) less the kernel's time
(MPI_Wtime around the schedules, stored by the program into its last argument) less the
empty program's lifetime on as many ranks (MPI_Init and MPI_Finalize). What remains is rank
0 reading its rows of the input files (the whole files, and a broadcast, for an array held
whole), and writing its part of the result files (whatever of it falls after the kernel's
second MPI_Wtime). Medians of
--repeats runs (5; 1 with --quick): memory is steady, times are noisy on a shared 2-core
machine, where 4 ranks oversubscribe the cores, so 4-rank timings are not shown.

Cases (the goals of issue 24, printed as measured ratio beside the goal, met or not):
- jacobi-2d 4096x4096 f64 (A and B, 128 MiB each), K = 4 row tasks per sweep, a time loop
  of 5 steps (1 with --quick): the most any rank holds on 2 ranks <= 0.55x, on 4 ranks
  <= 0.30x of 1 rank's; input and output on 2 ranks no slower than on 1.
- jacobi-2d LARGE (1300x1300, 500 steps; 50 with --quick): input and output on 2 ranks
  no slower than on 1.
- gemm 2000x2000x2000 f64, K = 4 row tasks: the most any rank holds on 4 ranks <= 0.5x of 1
  rank's (B replicated, A and C partitioned).

Tasks are placed round-robin (task k on rank k mod R) unless --placement says otherwise:
storage can only be divided among the ranks the tasks run on, and the compiler's default
(`best`, without a machine description giving memory_bytes) keeps jacobi-2d 4096x4096 and
gemm 2000 on rank 0 alone. The `tasks per rank`
column shows where they went (dhir-split and dhir-place run on a copy of the program).

Every result is checked against NumPy (kernels.check: a mismatch stops the run), and at a
small size each kernel's native result on 4 ranks equals the interpreter's bit for bit.
"""

import os

# One thread per rank, for dhir's OpenMP loops and NumPy's BLAS alike: set before NumPy loads.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import shlex  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "polybench"))

import kernels  # noqa: E402
import peak_rss  # noqa: E402
from kernels import check  # noqa: E402
from xdsl.passes import PassPipeline  # noqa: E402

import dhir  # noqa: E402
from dhir import parse_string, run_pipeline  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.ir.tasks import rank_of, task_ids  # noqa: E402
from dhir.placement.list_scheduling import ALGORITHMS  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402
from dhir.toolchain.signature import EntrySignature  # noqa: E402
from dhir.transforms.place import PlacePass  # noqa: E402
from dhir.transforms.split_tasks import SplitTasksPass  # noqa: E402

EMPTY_PROGRAM = "func.func @main(%x: memref<1xf64>) {\n  return\n}\n"
MB = 1e6


@dataclass(frozen=True)
class Case:
    label: str
    kernel: str
    sizes: dict[str, int]
    tasks: int
    ranks: tuple[int, ...]
    memory_goals: dict[int, float]  # ranks -> the most a rank may hold, over 1 rank's
    io_goal: bool  # whether input and output on 2 ranks must be no slower than on 1
    replicated: tuple[str, ...] = ()  # arrays every rank keeps whole, even partitioned


@dataclass
class Runs:
    """One case on one rank count: every run's reports (by rank) and kernel times."""

    peaks: list[dict[int, peak_rss.Report]] = field(
        default_factory=list[dict[int, peak_rss.Report]]
    )
    kernel_s: list[float] = field(default_factory=list[float])
    tasks: dict[int, int] = field(default_factory=dict[int, int])  # by rank

    def peak_mb(self, rank: int) -> float:
        return statistics.median(run[rank].peak_mb for run in self.peaks)

    def exact(self, rank: int) -> bool:
        return all(run[rank].exact for run in self.peaks)

    def most_mb(self) -> float:
        return max(self.peak_mb(rank) for rank in self.peaks[0])

    def lifetime_s(self) -> float:
        return statistics.median(run[0].seconds for run in self.peaks)

    def outside_kernel_s(self) -> float:
        return statistics.median(
            run[0].seconds - kernel for run, kernel in zip(self.peaks, self.kernel_s)
        )


class Launcher:
    """Runs built executables with bench/peak_rss.py in front of each rank."""

    def __init__(self, work: Path, mpi: str) -> None:
        self.work = work
        self.mpi = mpi
        self.reports = work / "reports"
        self.reports.mkdir()

    def run(
        self, exe: Path, signature: EntrySignature, ranks: int, values: list[np.ndarray]
    ) -> tuple[list[np.ndarray], dict[int, peak_rss.Report]]:
        """The results (rank 0's) and each rank's report."""
        wrapper = self.work / "rank.sh"
        words = [sys.executable, "-S", str(HERE / "peak_rss.py"), str(self.reports), str(exe)]
        wrapper.write_text(f'#!/bin/sh\nexec {shlex.join(words)} "$@"\n')
        wrapper.chmod(0o755)
        for old in self.reports.iterdir():
            old.unlink()
        options = RunOptions(ranks=ranks, mpi=self.mpi, timeout=3600)
        results = run_executable(wrapper, signature, values, options)
        reports = {int(name): r for name, r in peak_rss.read_reports(str(self.reports)).items()}
        if sorted(reports) != list(range(ranks)):
            raise SystemExit(f"expected a report from each of {ranks} ranks, got {sorted(reports)}")
        return results, reports


def tasks_per_rank(text: str, ranks: int, placement: str) -> dict[int, int]:
    """How many tasks of the program each rank runs: compile_native's first two passes,
    which split and place the tasks, on a copy. Partitioned storage can only divide an
    array among the ranks its tasks are spread over."""
    module = parse_string(text)
    run_pipeline(module, PassPipeline((SplitTasksPass(ranks), PlacePass(ranks, placement))))
    counts = Counter(rank_of(task) for task in task_ids(module))
    return {rank: counts[rank] for rank in range(ranks)}


def cases(quick: bool) -> list[Case]:
    steps = 1 if quick else 5
    large = {**kernels.SIZES["jacobi-2d"]["LARGE"], **({"tsteps": 50} if quick else {})}
    return [
        Case(
            "jacobi-2d 4096x4096",
            "jacobi-2d",
            {"tsteps": steps, "n": 4096},
            4,
            (1, 2, 4),
            {2: 0.55, 4: 0.30},
            io_goal=True,
        ),
        Case("jacobi-2d LARGE", "jacobi-2d", large, 4, (1, 2), {}, io_goal=True),
        Case(
            "gemm 2000x2000x2000",
            "gemm",
            {"ni": 2000, "nj": 2000, "nk": 2000},
            4,
            (1, 2, 4),
            {4: 0.5},
            io_goal=False,
            replicated=("B",),
        ),
    ]


def build(text: str, ranks: int, args: argparse.Namespace) -> tuple[Path, EntrySignature]:
    options = RunOptions(ranks=ranks, mpi=args.mpi, placement=args.placement)
    return compile_native(parse_string(text), "main", options)


def measure_empty(launcher: Launcher, ranks: int, repeats: int, args: argparse.Namespace) -> Runs:
    exe, signature = build(EMPTY_PROGRAM, ranks, args)
    runs = Runs()
    for _ in range(repeats):
        _, reports = launcher.run(exe, signature, ranks, [np.zeros(1)])
        runs.peaks.append(reports)
        runs.kernel_s.append(0.0)
    return runs


def measure_case(
    case: Case,
    ranks: int,
    launcher: Launcher,
    want: dict[str, np.ndarray],
    args: argparse.Namespace,
) -> Runs:
    values = kernels.inputs(case.kernel, case.sizes)
    text = kernels.program(case.kernel, case.sizes, case.tasks)
    exe, signature = build(text, ranks, args)
    runs = Runs(tasks=tasks_per_rank(text, ranks, args.placement))
    for _ in range(args.repeats):
        results, reports = launcher.run(exe, signature, ranks, [*values.values(), np.zeros(1)])
        check(f"{case.label} on {ranks} ranks", dict(zip(values, results)), want)
        runs.peaks.append(reports)
        runs.kernel_s.append(float(results[-1][0]))
    return runs


def check_small(case: Case, ranks: int, args: argparse.Namespace) -> None:
    """At a small size the native program on `ranks` ranks equals the interpreter bit for
    bit, and the interpreter equals NumPy: the large runs are checked against NumPy only."""
    sizes = kernels.tiny_sizes(case.kernel)
    values = kernels.inputs(case.kernel, sizes)
    text = kernels.program(case.kernel, sizes, case.tasks, timed=False)
    interp = dhir.run(text, *values.values(), backend="interp")
    native = dhir.run(
        text, *values.values(), ranks=ranks, mpi=args.mpi, placement=args.placement, threads=1
    )
    check(
        f"interp {case.kernel}",
        dict(zip(values, interp)),
        kernels.reference(case.kernel, sizes, values),
    )
    for name, got, expected in zip(values, native, interp):
        if not np.array_equal(got, expected):
            raise SystemExit(
                f"MISMATCH: {case.kernel} on {ranks} ranks: {name} differs from the interpreter"
            )


def array_bytes(case: Case) -> tuple[int, int]:
    """The bytes of all the kernel's arrays, and of those kept whole on every rank."""
    shapes = kernels.kernel(case.kernel, case.sizes).arrays
    every = {name: int(np.prod(shape)) * 8 for name, shape in shapes.items()}
    return sum(every.values()), sum(every[name] for name in case.replicated)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def print_baseline(empty: dict[int, Runs]) -> None:
    print("\n## Baseline: an empty dhir program (the MPI library and dhir's runtime alone)")
    print(f"{'ranks':>6}{'MB per rank (most)':>20}{'lifetime ms (rank 0)':>22}")
    for ranks, runs in empty.items():
        print(f"{ranks:6}{runs.most_mb():20.1f}{runs.lifetime_s() * 1e3:22.1f}")


def _peak_cell(runs: Runs, rank: int) -> str:
    if rank not in runs.peaks[0]:
        return f"{'':>9}"
    mark = "" if runs.exact(rank) else "<="
    return f"{mark + format(runs.peak_mb(rank), '.1f'):>9}"


def print_memory(case: Case, by_ranks: dict[int, Runs], empty: dict[int, Runs]) -> None:
    total, whole = array_bytes(case)
    shown = ", ".join(f"{k}={v}" for k, v in case.sizes.items())
    print(f"\n## {case.label} ({shown}), K = {case.tasks}: peak resident MB per rank")
    print(f"arrays {total / MB:.1f} MB in all; every result matched NumPy")
    most = max(by_ranks)
    ranks_header = "".join(f"{'rank ' + str(r):>9}" for r in range(most))
    extra = f"{'ideal, ' + '+'.join(case.replicated) + ' whole':>16}" if case.replicated else ""
    print(
        f"{'ranks':>6}{ranks_header}{'most':>9}{'vs 1':>7}{'ideal':>8}{'most/ideal':>11}{extra}"
        "   tasks per rank"
    )
    one = by_ranks[1].most_mb()
    for ranks, runs in by_ranks.items():
        cells = "".join(_peak_cell(runs, r) for r in range(most))
        base = empty[ranks].most_mb()
        ideal = total / ranks / MB + base
        row = f"{ranks:6}{cells}{runs.most_mb():9.1f}{runs.most_mb() / one:7.2f}{ideal:8.1f}"
        row += f"{runs.most_mb() / ideal:11.2f}"
        if case.replicated:
            row += f"{(whole + (total - whole) / ranks) / MB + base:16.1f}"
        tasks = " ".join(f"r{r}:{n}" for r, n in runs.tasks.items())
        print(f"{row}   {tasks}")
    for ranks, goal in case.memory_goals.items():
        ratio = by_ranks[ranks].most_mb() / one
        base = empty[ranks].most_mb()
        best = f"{(total / ranks / MB + base) / one:.2f}"
        if case.replicated:
            kept = (whole + (total - whole) / ranks) / MB + base
            best += f", with {'+'.join(case.replicated)} whole {kept / one:.2f}"
        print(
            f"  goal: the most a rank holds on {ranks} ranks <= {goal:.2f}x of 1 rank's: "
            f"{ratio:.2f} ({verdict(ratio <= goal)}; the ideal would be {best})"
        )


def print_io(case: Case, by_ranks: dict[int, Runs], empty: dict[int, Runs], repeats: int) -> None:
    print(
        f"\n  {case.label}: input distribution and result writing on rank 0, ms "
        f"(median of {repeats}; derived, see the docstring)"
    )
    print(
        f"  {'ranks':>5}{'lifetime':>10}{'kernel':>10}{'outside':>10}{'empty':>10}"
        f"{'in + out':>10}{'vs 1':>7}"
    )
    io: dict[int, float] = {}
    for ranks in (1, 2):
        runs = by_ranks[ranks]
        io[ranks] = runs.outside_kernel_s() - empty[ranks].lifetime_s()
        print(
            f"  {ranks:5}{runs.lifetime_s() * 1e3:10.1f}"
            f"{statistics.median(runs.kernel_s) * 1e3:10.1f}{runs.outside_kernel_s() * 1e3:10.1f}"
            f"{empty[ranks].lifetime_s() * 1e3:10.1f}{io[ranks] * 1e3:10.1f}"
            f"{io[ranks] / io[1]:7.2f}"
        )
    ratio = io[2] / io[1]
    ok = verdict(ratio <= 1.0)
    print(f"  goal: input and output on 2 ranks no slower than on 1: {ratio:.2f} ({ok})")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer time steps, one run each")
    parser.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument("--repeats", type=int, help="runs per case (default 5, 1 with --quick)")
    parser.add_argument(
        "--placement",
        choices=list(ALGORITHMS),
        default="round-robin",
        help="how tasks are placed (default round-robin: it spreads them over the ranks)",
    )
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    cores = os.cpu_count() or 1
    crowded = f"; 4 ranks oversubscribe this machine's {cores} cores" if cores < 4 else ""
    print(
        f"Memory per rank, {args.mpi}, placement {args.placement}, 1 thread per rank, "
        f"median of {args.repeats}{crowded}"
    )
    started = time.time()
    chosen = cases(args.quick)
    for case in {case.kernel: case for case in reversed(chosen)}.values():
        check_small(case, max(case.ranks), args)
    with tempfile.TemporaryDirectory(prefix="dhir-memory-") as tmp:
        launcher = Launcher(Path(tmp), args.mpi)
        empty = {r: measure_empty(launcher, r, args.repeats, args) for r in (1, 2, 4)}
        print_baseline(empty)
        for case in chosen:
            values = kernels.inputs(case.kernel, case.sizes)
            want = kernels.reference(case.kernel, case.sizes, values)
            by_ranks = {r: measure_case(case, r, launcher, want, args) for r in case.ranks}
            print_memory(case, by_ranks, empty)
            if case.io_goal:
                print_io(case, by_ranks, empty, args.repeats)
    print(f"\n(took {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
