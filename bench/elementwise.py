"""Element-wise linalg.generics in a loop of steps (not time-tiled), against the same
loops written with scf.for, built by dhir for 1 rank (CodeDrop makes the tasks) on T
OpenMP threads:
`C = 1.2 C + A` (N x N, f64) and a jacobi-2d step as two generic sweeps over views of
static offsets (`B = 0.2 (A + A west + A east + A north + A south)`, then A from B).
Each form's result must equal the scf form's bit for bit. Medians of R runs, alternated.

    .venv/bin/python bench/elementwise.py [--n N] [--steps S] [--repeats R] [--threads T]
"""

import argparse
import contextlib
import io
import os
import statistics
from pathlib import Path

import numpy as np

from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.runner import drop_code
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions


def _array(n: int) -> str:
    return f"memref<{n}x{n}xf64>"


def _view(n: int, oi: int, oj: int) -> str:
    return f"memref<{n - 2}x{n - 2}xf64, strided<[{n}, 1], offset: {oi * n + oj}>>"


def _axpy_generic(n: int) -> list[str]:
    t = _array(n)
    identity = "affine_map<(i, j) -> (i, j)>"
    return [
        f"    linalg.generic {{indexing_maps = [{identity}, {identity}],",
        '                    iterator_types = ["parallel", "parallel"]}',
        f"        ins(%A : {t}) outs(%C : {t}) {{",
        "    ^bb0(%a: f64, %c: f64):",
        "      %p = arith.mulf %s, %c : f64",
        "      %q = arith.addf %p, %a : f64",
        "      linalg.yield %q : f64",
        "    }",
    ]


def _axpy_scf(n: int) -> list[str]:
    t = _array(n)
    return [
        "    scf.for %i = %c0 to %n step %c1 {",
        "      scf.for %j = %c0 to %n step %c1 {",
        f"        %c = memref.load %C[%i, %j] : {t}",
        f"        %a = memref.load %A[%i, %j] : {t}",
        "        %p = arith.mulf %s, %c : f64",
        "        %q = arith.addf %p, %a : f64",
        f"        memref.store %q, %C[%i, %j] : {t}",
        "      }",
        "    }",
    ]


# A jacobi sweep's inputs, as offsets of their views: centre, west, east, north, south.
_STENCIL = ((1, 1), (1, 0), (1, 2), (0, 1), (2, 1))


def _sweep_generic(n: int, src: str, dst: str) -> list[str]:
    t, m = _array(n), n - 2
    views = [
        f"    %{src}{k} = memref.subview %{src}[{oi}, {oj}] [{m}, {m}] [1, 1] : {t} to "
        f"{_view(n, oi, oj)}"
        for k, (oi, oj) in enumerate(_STENCIL)
    ]
    out = f"    %{dst}o = memref.subview %{dst}[1, 1] [{m}, {m}] [1, 1] : {t} to {_view(n, 1, 1)}"
    maps = ", ".join(["affine_map<(i, j) -> (i, j)>"] * 6)
    ins = ", ".join(f"%{src}{k}" for k in range(5))
    kinds = ", ".join(_view(n, oi, oj) for oi, oj in _STENCIL)
    return [
        *views,
        out,
        f"    linalg.generic {{indexing_maps = [{maps}],",
        '                    iterator_types = ["parallel", "parallel"]}',
        f"        ins({ins} : {kinds}) outs(%{dst}o : {_view(n, 1, 1)}) {{",
        "    ^bb0(%x0: f64, %x1: f64, %x2: f64, %x3: f64, %x4: f64, %y: f64):",
        *_five_point("%x0", "%x1", "%x2", "%x3", "%x4"),
        "      linalg.yield %r : f64",
        "    }",
    ]


def _five_point(*values: str) -> list[str]:
    x0, x1, x2, x3, x4 = values
    return [
        f"      %s1 = arith.addf {x0}, {x1} : f64",
        f"      %s2 = arith.addf %s1, {x2} : f64",
        f"      %s3 = arith.addf %s2, {x3} : f64",
        f"      %s4 = arith.addf %s3, {x4} : f64",
        "      %r = arith.mulf %f, %s4 : f64",
    ]


def _sweep_scf(n: int, src: str, dst: str) -> list[str]:
    t = _array(n)
    loads = [
        f"        %x{k} = memref.load %{src}[%i{oi}, %j{oj}] : {t}"
        for k, (oi, oj) in enumerate(_STENCIL)
    ]
    return [
        "    scf.for %i1 = %c1 to %m step %c1 {",
        "      %i0 = arith.subi %i1, %c1 : index",
        "      %i2 = arith.addi %i1, %c1 : index",
        "      scf.for %j1 = %c1 to %m step %c1 {",
        "        %j0 = arith.subi %j1, %c1 : index",
        "        %j2 = arith.addi %j1, %c1 : index",
        *loads,
        *(f"  {line}" for line in _five_point("%x0", "%x1", "%x2", "%x3", "%x4")),
        f"        memref.store %r, %{dst}[%i1, %j1] : {t}",
        "      }",
        "    }",
    ]


def _program(kind: str, form: str, n: int, steps: int) -> str:
    t = _array(n)
    if kind == "axpy":
        step = _axpy_generic(n) if form == "generic" else _axpy_scf(n)
    else:
        sweep = _sweep_generic if form == "generic" else _sweep_scf
        step = [*sweep(n, "A", "C"), *sweep(n, "C", "A")]
    lines = [
        "func.func private @MPI_Wtime() -> f64",
        f"func.func @main(%A: {t}, %C: {t}, %time: memref<1xf64>) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %n = arith.constant {n} : index",
        f"  %m = arith.constant {n - 1} : index",
        f"  %steps = arith.constant {steps} : index",
        "  %s = arith.constant 1.2 : f64",
        "  %f = arith.constant 0.2 : f64",
        "  %start = func.call @MPI_Wtime() : () -> f64",
        "  scf.for %t = %c0 to %steps step %c1 {",
        # A call in the time loop keeps dhir-time-tiles off it: each step runs whole.
        "    %now = func.call @MPI_Wtime() : () -> f64",
        *step,
        "  }",
        "  %end = func.call @MPI_Wtime() : () -> f64",
        "  %seconds = arith.subf %end, %start : f64",
        "  memref.store %seconds, %time[%c0] : memref<1xf64>",
        "  return",
        "}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep each build in KEEP/KIND-FORM")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    rng = np.random.default_rng(0)
    a, c = (rng.standard_normal((args.n, args.n)) for _ in range(2))
    print(f"N = {args.n}, {args.steps} steps, {args.threads} thread(s), medians of {args.repeats}")
    for kind in ("axpy", "jacobi"):
        builds = {}
        for form in ("generic", "scf"):
            module = parse_string(_program(kind, form, args.n, args.steps))
            with contextlib.redirect_stderr(io.StringIO()):
                drop_code(module, "main")
            options = RunOptions(ranks=1, threads=args.threads, timeout=3600)
            exe, signature = compile_native(module, "main", options)
            if args.keep is not None:
                from dhir.toolchain.build import keep_build

                keep_build(exe, args.keep / f"{kind}-{form}")
            builds[form] = (exe, signature, options)
        times: dict[str, list[float]] = {form: [] for form in builds}
        results: dict[str, np.ndarray] = {}
        for _ in range(args.repeats):
            for form, (exe, signature, options) in builds.items():
                out = run_executable(exe, signature, [a, c, np.zeros(1)], options)
                times[form].append(float(out[-1][0]) * 1e3)
                results[form] = out[1]
        if not np.array_equal(results["generic"], results["scf"]):
            raise SystemExit(f"MISMATCH: {kind}: the generic form differs from the scf form")
        for form, spent in times.items():
            runs = " ".join(f"{t:.1f}" for t in spent)
            print(f"{kind} {form:8s} {statistics.median(spent):8.2f} ms   ({runs})")
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
