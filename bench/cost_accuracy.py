"""How well dhir's cost model predicts a schedule's wall time on this machine.

    .venv/bin/python bench/cost_accuracy.py [--ranks 1,2,4] [--repeats 5] [--mpi mpich]

For each program and rank count: place its schedule as `dhir run` does (`best`, judged
as built) on the estimated task graph (this machine's description,
`dhir.placement.from_ir.machine_for`), pin that placement (`dhir.rank` on every task)
and run it natively with `--profile`, several times: in rounds of one run of every
program, so that a busy spell of this (shared) machine slows one run of several programs
rather than every run of one. Printed, in milliseconds:

- est: the placement's predicted makespan (the list scheduler's, from the estimates);
- sim: that placement replayed by the discrete-event simulator (`dhir.placement.simulate`,
  one link per ordered pair of ranks, so transfers between them queue), on the estimates;
- as built: that placement replayed as the native backend runs it (each rank's tasks in
  program order, blocking transfers before the tasks that need them, the broadcasts at
  the end: `dhir.placement.as_built`), on the estimates;
- prof: the same replay with the measured task times fed back (`costs=`: the median
  over the runs of each task's time);
- measured: the median over the runs of the schedule's wall time (the profile's
  "schedules": from a barrier at its start to the slowest rank's end; mpirun start-up
  and the program's input and output are outside it);
- spread: (slowest - fastest) / median of those runs, the machine's own noise.

Errors are (predicted - measured) / measured; the goal is a mean absolute error of at
most 15%, judged for the estimates as built and for the measured task times separately.
No constant is fitted: the rates are the machine description's, as `dhir run` uses them
(a description with guessed CPU rates, per-core ones included, is calibrated first, with
`dhir calibrate` (`--quick` with --quick), into a scratch file; set DHIR_SYSTEM to a
description to reuse one: calibrations on a busy machine vary).

Rank counts above this machine's cores are left out unless asked for with --ranks:
MPICH's waiting ranks spin, so oversubscribed runs measure the spinning.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import programs  # noqa: E402
from xdsl.dialects.builtin import IntegerAttr, i64  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.analysis.profile import Measurement, Profile, load_profile
from dhir.api import print_module  # noqa: E402
from dhir.dialects.dhir import ScheduleOp  # noqa: E402
from dhir.ir.tasks import RANK_ATTR
from dhir.machine.description import with_core_guesses  # noqa: E402
from dhir.machine.detect import local_cores  # noqa: E402
from dhir.machine.files import SYSTEM_ENV  # noqa: E402
from dhir.placement.as_built import as_built_makespan, fastest_as_built  # noqa: E402
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import (  # noqa: E402
    local_link,
    local_system,
    machine_for,
    rank_of_device,
    task_graph,
)
from dhir.placement.graph import Placement, TaskGraph  # noqa: E402
from dhir.placement.simulate import PairLinks, simulate  # noqa: E402
from dhir.runner import run  # noqa: E402

GOAL = 0.15
SEED = 0


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    inputs: Callable[[np.random.Generator], list[object]]


def _sweep(dst: str, src: str, n: int, reps: int, t: str) -> list[str]:
    """`reps` sweeps of dst[i] = dst[i] * 0.5 + src[i] * 0.25 (dst == src: one buffer)."""
    return [
        "      %c0 = arith.constant 0 : index",
        "      %c1 = arith.constant 1 : index",
        f"      %n = arith.constant {n} : index",
        f"      %reps = arith.constant {reps} : index",
        "      %half = arith.constant 0.5 : f64",
        "      %quarter = arith.constant 0.25 : f64",
        "      scf.for %r = %c0 to %reps step %c1 {",
        "        scf.for %i = %c0 to %n step %c1 {",
        f"          %d = memref.load %{dst}[%i] : {t}",
        f"          %s = memref.load %{src}[%i] : {t}",
        "          %dh = arith.mulf %d, %half : f64",
        "          %sq = arith.mulf %s, %quarter : f64",
        "          %sum = arith.addf %dh, %sq : f64",
        f"          memref.store %sum, %{dst}[%i] : {t}",
        "        }",
        "      }",
    ]


def _main(args: list[str], body: list[str], before: list[str] | None = None) -> str:
    names = ", ".join(a.split(":")[0] for a in args)
    lines = [f"func.func @main({', '.join(args)}) {{", *(before or [])]
    lines += [f"  dhir.schedule {names} {{", '    %cpu = dhir.target {kind = "cpu"}']
    return "\n".join([*lines, *body, "  }", "  return", "}", ""])


def chain(tasks: int, n: int, reps: int) -> str:
    """`tasks` sweeps over one buffer, each after the one before."""
    t = f"memref<{n}xf64>"
    body: list[str] = []
    for k in range(tasks):
        body += [f"    %t{k} = dhir.task %cpu, %x {{", *_sweep("x", "x", n, reps, t), "    }"]
    return _main([f"%x: {t}"], body)


def fork_join(width: int, n: int, reps: int) -> str:
    """`width` independent sweeps, each over a buffer of its own, then one task that adds
    them all up into %out."""
    t = f"memref<{n}xf64>"
    body: list[str] = []
    for k in range(width):
        body += [
            f"    %f{k} = dhir.task %cpu, %x{k} {{",
            *_sweep(f"x{k}", f"x{k}", n, reps, t),
            "    }",
        ]
    listed = ", ".join(f"%x{k}" for k in range(width))
    body += [
        f"    %join = dhir.task %cpu, %out, {listed} {{",
        "      %c0 = arith.constant 0 : index",
        "      %c1 = arith.constant 1 : index",
        f"      %n = arith.constant {n} : index",
        "      scf.for %i = %c0 to %n step %c1 {",
        f"        %s0 = memref.load %x0[%i] : {t}",
    ]
    for k in range(1, width):
        body += [
            f"        %v{k} = memref.load %x{k}[%i] : {t}",
            f"        %s{k} = arith.addf %s{k - 1}, %v{k} : f64",
        ]
    body += [f"        memref.store %s{width - 1}, %out[%i] : {t}", "      }", "    }"]
    args = [f"%out: {t}", *(f"%x{k}: {t}" for k in range(width))]
    return _main(args, body)


def stencil(blocks: int, n: int, steps: int) -> str:
    """A 1-D three-point stencil over `blocks` blocks of n elements (u0..), `steps` time
    steps of one schedule each: per block, v = the average of u and its neighbours
    (reading the neighbour blocks' edge elements), then u = v."""
    t = f"memref<{n}xf64>"
    body: list[str] = []
    for k in range(blocks):
        left = f"u{k - 1}" if k > 0 else f"u{k}"
        right = f"u{k + 1}" if k < blocks - 1 else f"u{k}"
        listed = ", ".join(dict.fromkeys([f"%v{k}", f"%u{k}", f"%{left}", f"%{right}"]))
        body += [
            f"      %s{k} = dhir.task %cpu, {listed} {{",
            "        %c0 = arith.constant 0 : index",
            "        %c1 = arith.constant 1 : index",
            f"        %last = arith.constant {n - 1} : index",
            "        %third = arith.constant 0.3333333333333333 : f64",
            f"        %l = memref.load %{left}[%last] : {t}",
            f"        %r = memref.load %{right}[%c0] : {t}",
            "        scf.for %i = %c0 to %last step %c1 {",
            "          %ip = arith.addi %i, %c1 : index",
            f"          %a = memref.load %u{k}[%i] : {t}",
            f"          %b = memref.load %u{k}[%ip] : {t}",
            "          %ab = arith.addf %a, %b : f64",
            "          %abl = arith.addf %ab, %l : f64",
            "          %m = arith.mulf %abl, %third : f64",
            f"          memref.store %m, %v{k}[%i] : {t}",
            "        }",
            f"        %e = memref.load %u{k}[%last] : {t}",
            "        %er = arith.addf %e, %r : f64",
            f"        memref.store %er, %v{k}[%last] : {t}",
            "      }",
        ]
    for k in range(blocks):
        body += [
            f"      %cp{k} = dhir.task %cpu, %u{k}, %v{k} {{",
            f"        memref.copy %v{k}, %u{k} : {t} to {t}",
            "      }",
        ]
    args = [f"%u{k}: {t}" for k in range(blocks)] + [f"%v{k}: {t}" for k in range(blocks)]
    names = ", ".join(a.split(":")[0] for a in args)
    lines = [
        f"func.func @main({', '.join(args)}) {{",
        "  %z = arith.constant 0 : index",
        "  %one = arith.constant 1 : index",
        f"  %steps = arith.constant {steps} : index",
        "  scf.for %step = %z to %steps step %one {",
        f"    dhir.schedule {names} {{",
        '      %cpu = dhir.target {kind = "cpu"}',
        *body,
        "    }",
        "  }",
        "  return",
        "}",
        "",
    ]
    return "\n".join(lines)


def _arrays(count: int, n: int) -> Callable[[np.random.Generator], list[object]]:
    return lambda rng: [rng.random(n) for _ in range(count)]


def cases(quick: bool) -> list[Case]:
    scale = 4 if quick else 1
    small, large = 1 << 16, (1 << 23) // scale
    dag_inputs = _arrays(4, small)
    return [
        Case(
            f"dag20 n={small} x16",
            programs.dag20(small, 16),
            lambda rng: [*dag_inputs(rng), np.zeros(1)],
        ),
        Case(
            f"dag20 n={large} x1",
            programs.dag20(large, 1),
            lambda rng: [*_arrays(4, large)(rng), np.zeros(1)],
        ),
        Case(f"chain 8 n={large // 4} x4", chain(8, large // 4, 4), _arrays(1, large // 4)),
        Case(
            f"fork-join 4 n={large // 4} x4",
            fork_join(4, large // 4, 4),
            _arrays(5, large // 4),
        ),
        Case(
            f"stencil 4x{large // 8} 5 steps",
            stencil(4, large // 8, 5),
            _arrays(8, large // 8),
        ),
    ]


# --- measuring and predicting ----------------------------------------------------------


@dataclass(frozen=True)
class Row:
    case: str
    ranks: int
    estimated: float  # the placement's makespan, on the estimates
    simulated: float  # the simulator's replay of it, on the estimates
    as_built: float  # replayed as the native backend runs it, estimates
    profiled: float  # the same, measured task times
    measured: float  # median schedule wall time
    spread: float  # (slowest - fastest) / median of the runs: the machine's noise


@dataclass(frozen=True)
class Pinned:
    """A program placed as `dhir run` places it, that placement pinned, with its inputs."""

    case: Case
    ranks: int
    schedule: ScheduleOp
    devices: list[object]
    graph: TaskGraph
    model: CostModel
    placed: Placement
    text: str
    inputs: list[object]


def pin(case: Case, ranks: int) -> Pinned:
    module = parse_string(case.text)
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    devices, model = machine_for(module, ranks)
    graph = task_graph(schedule, devices, model)
    placed = fastest_as_built(schedule, graph, devices, model)  # as dhir-place places it
    for task, name in zip(schedule.tasks(), graph.tasks, strict=False):
        task.attributes[RANK_ATTR] = IntegerAttr(rank_of_device(placed.assignment[name]), i64)
    # This placement, whatever the run's placement pass says.
    text = print_module(module)
    inputs = case.inputs(np.random.default_rng(SEED))
    return Pinned(case, ranks, schedule, devices, graph, model, placed, text, inputs)


def run_once(program: Pinned, k: int, mpi: str, scratch: Path) -> dict:
    """One run's profile."""
    path = scratch / f"profile-{id(program)}-{k}.json"
    run(
        program.text,
        *program.inputs,
        ranks=program.ranks,
        mpi=mpi,
        placement="round-robin",
        profile=path,
    )
    return json.loads(path.read_text())


def measure(programs: list[Pinned], repeats: int, mpi: str, scratch: Path) -> list[Row]:
    """Each program `repeats` times, in rounds of one run of each: a busy spell of the
    machine then slows one run of several programs, not several runs of one."""
    profiles: list[list[dict]] = [[] for _ in programs]
    for k in range(repeats):
        for program, runs in zip(programs, profiles, strict=True):
            runs.append(run_once(program, k, mpi, scratch))
        print(f"  round {k + 1} of {repeats} done", file=sys.stderr)
    return [row(p, runs, scratch) for p, runs in zip(programs, profiles, strict=True)]


def row(program: Pinned, profiles: list[dict], scratch: Path) -> Row:
    name = next(iter(profiles[0]["schedules"]))
    times = [p["schedules"][name] for p in profiles]
    measured = statistics.median(times)
    feedback = CostModel(_median_profile(profiles, scratch), link=local_link())
    schedule, devices, assignment = program.schedule, program.devices, program.placed.assignment
    measured_graph = task_graph(schedule, devices, feedback)
    return Row(
        program.case.name,
        program.ranks,
        program.placed.makespan,
        simulate(program.graph, program.placed, PairLinks()).makespan,
        as_built_makespan(schedule, program.graph, assignment, devices, program.model),
        as_built_makespan(schedule, measured_graph, assignment, devices, feedback),
        measured,
        (max(times) - min(times)) / measured,
    )


def _median_profile(profiles: list[dict], scratch: Path) -> Profile:
    tasks = {
        name: statistics.median(p["tasks"][name] for p in profiles) for name in profiles[0]["tasks"]
    }
    path = scratch / "median.json"
    path.write_text(json.dumps({**profiles[0], "tasks": tasks}))
    profile = load_profile(path)
    assert all(isinstance(m, Measurement) for m in profile.tasks.values())
    return profile


# --- the table ---------------------------------------------------------------------------


def error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def report(rows: list[Row], repeats: int) -> None:
    print(f"\n## Cost-model accuracy (median of {repeats} runs; times in ms)")
    header = f"{'program':28}{'ranks':>6}{'est':>8}{'sim':>8}{'as built':>9}{'prof':>8}"
    header += f"{'measured':>9}{'err est':>8}{'err sim':>8}{'err built':>10}{'err prof':>9}"
    print(header + f"{'spread':>7}")
    for r in rows:
        cells = f"{r.estimated * 1e3:8.2f}{r.simulated * 1e3:8.2f}{r.as_built * 1e3:9.2f}"
        cells += f"{r.profiled * 1e3:8.2f}{r.measured * 1e3:9.2f}"
        errors = (
            f"{error(r.estimated, r.measured):+8.0%}{error(r.simulated, r.measured):+8.0%}"
            f"{error(r.as_built, r.measured):+10.0%}{error(r.profiled, r.measured):+9.0%}"
            f"{r.spread:7.0%}"
        )
        print(f"{r.case:28}{r.ranks:6}{cells}{errors}")
    for label, pick, judged in (
        ("the scheduler's makespan (est)", lambda r: r.estimated, False),
        ("the simulator's replay (sim)", lambda r: r.simulated, False),
        ("estimates, as built", lambda r: r.as_built, True),
        ("measured task times, as built (prof)", lambda r: r.profiled, True),
    ):
        mean = statistics.mean(abs(error(pick(r), r.measured)) for r in rows)
        verdict = ("PASS" if mean <= GOAL else "FAIL") if judged else "(not judged)"
        print(f"mean |error|, {label:38} {mean:6.1%}   goal <= {GOAL:.0%}: {verdict}")
    spread = statistics.mean(r.spread for r in rows)
    print(f"mean spread of the runs (slowest - fastest) / median: {spread:.1%}")


def describe_machine(scratch: Path, mpi: str, quick: bool) -> None:
    """Use this machine's description; calibrate it first when its CPU rates are guesses."""
    cpu = next(d for d in local_system().nodes[0].devices if d.kind == "cpu")
    measured = {"peak_gflops", "mem_bw_gbs", "core_mem_bw_gbs", "core_cache_bw_gbs"}
    if measured & set(with_core_guesses(cpu).guessed) and not os.environ.get(SYSTEM_ENV):
        path = scratch / "system.toml"
        # The full calibration (~20 s): on a shared VM a quick one missed the rates the runs
        # got by up to 40%, one way or the other.
        flags = ["--quick"] if quick else []
        print(
            f"this machine's CPU rates are guesses: calibrating (dhir calibrate {' '.join(flags)})"
        )
        command = [sys.executable, "-m", "dhir.cli.main", "calibrate", *flags]
        subprocess.run([*command, "--mpi", mpi, "-o", str(path)], check=True, capture_output=True)
        os.environ[SYSTEM_ENV] = str(path)
        cpu = next(d for d in local_system().nodes[0].devices if d.kind == "cpu")
    link = local_system().intra_node
    core = with_core_guesses(cpu)
    print(
        f"machine: {cpu.cores} cores, {cpu.peak_gflops} GFLOP/s, {cpu.mem_bw_gbs} GB/s "
        f"(shared among the ranks busy at once); one core: {core.core_gflops} GFLOP/s, "
        f"{core.core_mem_bw_gbs} GB/s from memory, {core.core_cache_bw_gbs} GB/s from its "
        f"{(core.core_cache_bytes or 0) >> 10} KiB cache, {core.llc_bw_gbs} GB/s from the "
        f"{(core.llc_bytes or 0) >> 20} MiB LLC (guessed: {', '.join(core.guessed) or 'none'}); "
        f"ranks talk at {link.latency_us} us + bytes / {link.bandwidth_gbs} GB/s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ranks", help="comma-separated rank counts (default: 1,2,4 up to cores)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument(
        "--quick", action="store_true", help="arrays a quarter as large, a quick calibration"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.ranks:
        words = args.ranks.split(",")
        if not all(word.strip().isdigit() and int(word) > 0 for word in words):
            parser.error(
                f"--ranks takes positive whole numbers separated by commas, got {args.ranks!r}"
            )
        counts = [int(word) for word in words]
    else:
        counts = [r for r in (1, 2, 4) if r <= local_cores()]
        left = [r for r in (1, 2, 4) if r > local_cores()]
        if left:
            print(f"left out: {left} ranks (more than this machine's {local_cores()} cores)")
    with tempfile.TemporaryDirectory(prefix="dhir-cost-accuracy-") as tmp:
        describe_machine(Path(tmp), args.mpi, args.quick)
        pinned = [pin(case, ranks) for case in cases(args.quick) for ranks in counts]
        rows = measure(pinned, args.repeats, args.mpi, Path(tmp))
    report(rows, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
