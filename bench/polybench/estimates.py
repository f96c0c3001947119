"""The cost model's estimate of each PolyBench kernel against its measured time on one rank
(docs/costs.md, "Reuse").

    .venv/bin/python bench/polybench/estimates.py [--size MEDIUM|LARGE] [--kernels gemm,...]
        [--repeats N] [--tasks K]

Per kernel: the estimate of the hand-tasked program on one rank of this machine (its
description: $DHIR_SYSTEM, else the one `dhir calibrate` wrote, else what dhir detects),
the sum of its tasks' roofline times (times the time loop's steps), with the reuse-aware
traffic count and without it (one access per load and store, as before it); the median
measured time of N runs of dhir on one rank; and the two ratios estimate / measured."""

import argparse
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import kernels  # noqa: E402
import run  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.analysis.work import task_work  # noqa: E402
from dhir.ir.tasks import task_ids  # noqa: E402
from dhir.machine.detect import load_local_system  # noqa: E402
from dhir.machine.roofline import roofline_time  # noqa: E402


def estimates(name: str, sizes: dict[str, int], tasks: int) -> tuple[float, float]:
    """(with reuse, without) seconds for the kernel on one rank of this machine."""
    device = replace(load_local_system().nodes[0].devices[0], ranks=1)
    kernel = kernels.kernel(name, sizes)
    module = parse_string(kernels.program(name, sizes, tasks))
    working_set = sum(8 * math.prod(shape) for shape in kernel.arrays.values())  # f64
    with_reuse = without = 0.0
    for task in task_ids(module):
        work = replace(task_work(task), working_set=working_set)
        with_reuse += roofline_time(work, device, 1)
        without += roofline_time(replace(work, reuse=()), device, 1)
    steps = max(1, kernel.steps)
    return with_reuse * steps, without * steps


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=("MEDIUM", "LARGE"), default="LARGE")
    parser.add_argument("--kernels", default=",".join(kernels.SIZES), help="comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=1, help="tasks per statement")
    args = parser.parse_args()
    names = [n for n in args.kernels.split(",") if n]
    unknown = [n for n in names if n not in kernels.SIZES]
    if unknown:
        parser.error(f"unknown kernel {', '.join(unknown)}; choose from {', '.join(kernels.SIZES)}")
    run_args = argparse.Namespace(
        repeats=args.repeats, mpi="mpich", placement="best", fast_math="none", no_optimize=False
    )
    device = load_local_system().nodes[0].devices[0]
    calibrated = "calibrated (measured curve)" if device.core_bw_curve else "uncalibrated"
    print(f"PolyBench {args.size}, 1 rank, median of {args.repeats}; machine: {calibrated}")
    heads = ("est ms", "old ms", "meas ms", "est/meas", "old/meas")
    print(f"{'kernel':12}" + "".join(f"{head:>10}" for head in heads))
    ratios: list[float] = []
    for name in names:
        sizes = kernels.SIZES[name][args.size]
        new, old = estimates(name, sizes, args.tasks)
        measured = statistics.median(run.measure_dhir(name, sizes, args.tasks, 1, run_args).seconds)
        ratios.append(new / measured)
        print(
            f"{name:12}{new * 1e3:10.2f}{old * 1e3:10.2f}{measured * 1e3:10.2f}"
            f"{new / measured:10.2f}{old / measured:10.2f}",
            flush=True,
        )
    worst = max(max(r, 1 / r) for r in ratios)
    print(f"worst factor (estimate vs measured, either way): {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
