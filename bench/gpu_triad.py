"""GPU memory bandwidth of a dhir GPU task: the STREAM triad a = b + s * c over float64
arrays of 1 GiB in all, as achieved GB/s and as a ratio to the device's peak.

    .venv/bin/python bench/gpu_triad.py [--iterations N] [--compile-only [-o EXE] [--cpu NAME]]
                                        [--exe EXE]

The task runs the triad N times in a loop, with its data on the device (copied in once,
out once). The program is instrumented (dhir-instrument), so the task's own time is
measured inside the program, without start-up and file I/O; the task's times for 10 and
10 + N iterations (medians of 3) are subtracted and divided by N, which leaves out the
copies too. Peak bandwidth comes from a table of known GPUs (by nvidia-smi's name);
unknown GPUs get GB/s only. Where nvcc is found, the same run times the hand-written
CUDA triad bench/c/triad.cu and prints dhir's time over it. Without a GPU it says so
and exits (--compile-only still builds the program, to check the path; with -o it keeps
the executable, which --exe runs on a GPU machine without LLVM).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.toolchain.entry import entry_signature  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402
from dhir.transforms.instrument import ProfileRecorder  # noqa: E402

ELEMENTS = (1 << 30) // (3 * 8)  # three float64 arrays, 1 GiB in all
BASE_ITERATIONS = 10
BYTES_PER_ELEMENT = 3 * 8  # read b and c, write a
GOAL = 0.9  # of the peak bandwidth (issue 31)
# Peak memory bandwidth in GB/s, by a part of nvidia-smi's name (first match wins).
PEAK_GBPS = (
    ("H200", 4800.0),
    ("GH200", 4000.0),
    ("H100 PCIe", 2000.0),
    ("H100 NVL", 3900.0),
    ("H100", 3350.0),
    ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("L4", 300.0),
    ("A10", 600.0),
    ("V100", 900.0),
    ("RTX 4090", 1008.0),
    ("T4", 320.0),
)

PROGRAM = f"""
func.func @main(%a: memref<{ELEMENTS}xf64>, %b: memref<{ELEMENTS}xf64>,
                %c: memref<{ELEMENTS}xf64>, %s: f64, %iterations: index) {{
  dhir.schedule %a, %b, %c, %s, %iterations {{
    %gpu = dhir.target {{kind = "gpu"}}
    %triad = dhir.task %gpu, %a, %b, %c attributes {{name = "triad"}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {ELEMENTS} : index
      scf.for %k = %c0 to %iterations step %c1 {{
        scf.parallel (%i) = (%c0) to (%n) step (%c1) {{
          %x = memref.load %b[%i] : memref<{ELEMENTS}xf64>
          %y = memref.load %c[%i] : memref<{ELEMENTS}xf64>
          %z = arith.mulf %s, %y : f64
          %w = arith.addf %x, %z : f64
          memref.store %w, %a[%i] : memref<{ELEMENTS}xf64>
        }}
      }}
    }}
  }}
  return
}}
"""


def gpu_name() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    result = subprocess.run(
        [smi, "--query-gpu=name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    names = result.stdout.strip().splitlines()
    return names[0].strip() if result.returncode == 0 and names else None


def peak_of(name: str) -> float | None:
    return next((peak for part, peak in PEAK_GBPS if part in name), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument(
        "-o", "--output", type=Path, help="with --compile-only: keep the executable"
    )
    parser.add_argument(
        "--cpu",
        help="with --compile-only: the GPU machine's CPU, as clang's -march names it "
        "(default: this machine's)",
    )
    parser.add_argument(
        "--exe", type=Path, help="run this executable (from -o) instead of building"
    )
    args = parser.parse_args()
    name = gpu_name()
    if name is None and not args.compile_only:
        print("gpu_triad: no GPU (nvidia-smi not found or reports none); nothing to measure")
        return 0
    module = parse_string(PROGRAM, "gpu_triad.mlir")
    signature = entry_signature(module, "main")
    exe = args.exe
    if exe is None:
        # A recorder makes compile_native instrument the build; the run's profile is read
        # from DHIR_PROFILE below, not written by the recorder.
        recorder = ProfileRecorder(module, 1, Path(os.devnull))
        exe = compile_native(module, "main", RunOptions(cpu=args.cpu), None, recorder)[0]
    if args.compile_only:
        if args.output is not None:
            shutil.copy2(exe, args.output)
        print(f"gpu_triad: built {args.output or exe}")
        return 0
    rng = np.random.default_rng(0)
    b, c = rng.standard_normal(ELEMENTS), rng.standard_normal(ELEMENTS)
    a = np.zeros(ELEMENTS)

    def run(iterations: int) -> float:
        """The triad task's own seconds, from the instrumented program's profile."""
        with tempfile.TemporaryDirectory(prefix="gpu-triad-") as scratch:
            profile = Path(scratch) / "profile.json"
            os.environ["DHIR_PROFILE"] = str(profile)
            inputs = [a, b, c, 3.0, iterations]
            run_executable(exe, signature, inputs, RunOptions(ranks=1, timeout=600))
            (task,) = json.loads(profile.read_text())["tasks"].values()
            return float(task["seconds"])

    times = {}
    for iterations in (BASE_ITERATIONS, BASE_ITERATIONS + args.iterations):
        times[iterations] = statistics.median(run(iterations) for _ in range(3))
    per_iteration = (times[BASE_ITERATIONS + args.iterations] - times[BASE_ITERATIONS]) / (
        args.iterations
    )
    gbps = BYTES_PER_ELEMENT * ELEMENTS / per_iteration / 1e9
    peak = peak_of(name or "")
    ratio = f"{gbps / peak:.2f} of peak {peak:.0f} GB/s" if peak else "peak unknown"
    print(f"gpu_triad on {name}: {gbps:.0f} GB/s ({ratio}); {per_iteration * 1e3:.3f} ms/iter")
    if peak:
        met = "met" if gbps >= GOAL * peak else "NOT met"
        print(f"goal: >= {GOAL} of peak: {gbps / peak:.2f}, {met}")
    cuda = cuda_baseline(args.iterations)
    if cuda is None:
        print(
            "gpu_triad: no nvcc on PATH; the hand-written CUDA baseline (bench/c/triad.cu) skipped"
        )
    else:
        print(
            f"CUDA baseline: {BYTES_PER_ELEMENT * ELEMENTS / cuda / 1e9:.0f} GB/s; "
            f"dhir / CUDA time = {per_iteration / cuda:.2f}"
        )
    return 0


def cuda_baseline(iterations: int) -> float | None:
    """Seconds per iteration of bench/c/triad.cu (median of 3), where nvcc is found."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="gpu-triad-cuda-") as scratch:
        exe = Path(scratch) / "triad"
        source = Path(__file__).parent / "c" / "triad.cu"
        subprocess.run([nvcc, "-O3", "-o", exe, source], check=True)
        runs = [
            subprocess.run([exe, str(ELEMENTS), str(iterations)], capture_output=True, text=True)
            for _ in range(3)
        ]
    return statistics.median(float(run.stdout) for run in runs)


if __name__ == "__main__":
    sys.exit(main())
