"""The cost model's predicted task times against measured ones, kernel by kernel, on one
rank: PolyBench gemm, 2mm, atax and jacobi-2d (bench/polybench/kernels.py) and a scalar
recurrence (a loop-carried multiply-add chain), each as `dhir run` builds it.

    .venv/bin/python bench/cost_kernels.py [--size MEDIUM|LARGE] [--repeats 5]
        [--kernels gemm,2mm,atax,recurrence,jacobi-2d]

Per kernel: the sum of its tasks' predicted times (also by another checkout's dhir with
--baseline, from the same runs) (`dhir schedule --json -n 1`, finish -
start of each task: what placement weighs), the sum of their measured times (`dhir run
--profile`, the median over the runs of each task's time per run), and predicted /
measured. Inputs are the kernels' own (random, finite); the runs alternate kernels, so
that a busy spell of a shared machine slows one run of several kernels."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "polybench"))

import kernels  # noqa: E402

DHIR = [sys.executable, "-m", "dhir"]
POLYBENCH = ("gemm", "2mm", "atax", "jacobi-2d")
RECURRENCE_STEPS = {"MEDIUM": 200_000, "LARGE": 2_000_000}


def recurrence(n: int) -> str:
    """x[i] = s, s = s * a + b[i]: each step's multiply and add wait for the last step's."""
    t = f"memref<{n}xf64>"
    return f"""func.func @main(%x: {t}, %b: {t}) {{
  dhir.schedule %x, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
    %r = dhir.task %cpu, %x, %b {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {n} : index
      %a = arith.constant 0.999 : f64
      %zero = arith.constant 0.0 : f64
      %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {{
        %bi = memref.load %b[%i] : {t}
        %m = arith.mulf %acc, %a : f64
        %next = arith.addf %m, %bi : f64
        memref.store %next, %x[%i] : {t}
        scf.yield %next : f64
      }}
    }}
  }}
  return
}}
"""


def program(name: str, size: str, scratch: Path) -> tuple[Path, list[Path]]:
    """The kernel's program file and its inputs (.npy, one per argument)."""
    if name == "recurrence":
        n = RECURRENCE_STEPS[size]
        text = recurrence(n)
        rng = np.random.default_rng(0)
        values = {"x": np.zeros(n), "b": rng.random(n)}
    else:
        sizes = kernels.SIZES[name][size]
        text = kernels.program(name, sizes, 1, timed=False)
        values = kernels.inputs(name, sizes)
    path = scratch / f"{name}.mlir"
    path.write_text(text)
    inputs = []
    for arg, value in values.items():
        inputs.append(scratch / f"{name}.{arg}.npy")
        np.save(inputs[-1], value)
    return path, inputs


def predicted(path: Path, source: str | None = None) -> dict[str, float]:
    """Each task's predicted seconds per run, by the dhir in `source` (a checkout's
    root; None: this one)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = source
    out = subprocess.run(
        [*DHIR, "schedule", str(path), "-n", "1", "--json"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=path.parent,  # not a checkout's root, whose dhir/ `-m` would import
    ).stdout
    times: dict[str, float] = {}
    for schedule in json.loads(out)["schedules"]:
        for task, start in schedule["start"].items():
            times[task] = times.get(task, 0.0) + schedule["finish"][task] - start
    return times


def measured_once(path: Path, inputs: list[Path], scratch: Path) -> dict[str, float]:
    """Seconds of each task's run (a task in a time loop: per step, as predicted)."""
    profile = scratch / f"{path.stem}.profile.json"
    given = [arg for p in inputs for arg in ("--input", str(p))]
    subprocess.run(
        [
            *DHIR,
            "run",
            str(path),
            "-n",
            "1",
            "-q",
            "--profile",
            str(profile),
            *given,
            "--output-dir",
            str(scratch / "out"),
        ],  # fmt: skip
        check=True,
        capture_output=True,
        text=True,
        cwd=scratch,
    )
    return json.loads(profile.read_text())["tasks"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=("MEDIUM", "LARGE"), default="MEDIUM")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", default=",".join([*POLYBENCH[:3], "recurrence", "jacobi-2d"]))
    parser.add_argument(
        "--baseline", help="another dhir checkout's root: its predictions too (same runs)"
    )
    args = parser.parse_args()
    names = [n for n in args.kernels.split(",") if n]
    print(f"load: {os.getloadavg()[0]:.2f}; {args.size}, 1 rank, median of {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        files = {name: program(name, args.size, scratch) for name in names}
        guesses = {name: predicted(files[name][0]) for name in names}
        before = {name: predicted(files[name][0], args.baseline) for name in names}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for _ in range(args.repeats):
            for name in names:
                runs[name].append(measured_once(*files[name], scratch))
    heads = ("base ms", "pred ms", "meas ms", "base/meas", "pred/meas")
    print(f"{'kernel':12}" + "".join(f"{head:>10}" for head in heads))
    ratios: list[float] = []
    old: list[float] = []
    for name in names:
        guess = sum(guesses[name].values())
        base = sum(before[name].values())
        taken = sum(statistics.median(run[t] for run in runs[name]) for t in runs[name][0])
        ratios.append(guess / taken)
        old.append(base / taken)
        times = (base, guess, taken)
        print(
            f"{name:12}" + "".join(f"{t * 1e3:10.3f}" for t in times)
            + f"{base / taken:10.2f}{guess / taken:10.2f}"
        )  # fmt: skip
    print(f"median ratio: base {statistics.median(old):.2f}, pred {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
