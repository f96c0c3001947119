"""C += A B (f64, N^3, default N = 1200) written as plain MLIR a user would write (loops
of scf.for or of affine.for, linalg.matmul, and linalg.generic with its dimensions in each
of the 6 orders of (i, j, k), the reduction k), built by dhir for 1
rank (CodeDrop makes the task), with and without
dhir-optimize-bodies, against NumPy (OpenBLAS, 1 thread) in this process and against the
core's measured f64 peak (bench/c/fma_peak.c: independent vector FMAs, and multiplies and
adds rounded apart, which is what exact code may use). Results are checked against the
interpreter's order of operations: the dhir runs must equal each other bit for bit.

    .venv/bin/python bench/gemm_forms.py [--n N] [--repeats R] [--forms i-k-j,...]
        [--optimized-only]
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

from peak import core_f64_peak  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.runner import drop_code  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402


def _program(form: str, n: int) -> str:
    t = f"memref<{n}x{n}xf64>"
    body = _program_body(form, n)
    head = [
        "func.func private @MPI_Wtime() -> f64",
        f"func.func @main(%A: {t}, %B: {t}, %C: {t}, %time: memref<1xf64>) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %n = arith.constant {n} : index",
        "  %start = func.call @MPI_Wtime() : () -> f64",
    ]
    tail = [
        "  %end = func.call @MPI_Wtime() : () -> f64",
        "  %seconds = arith.subf %end, %start : f64",
        "  memref.store %seconds, %time[%c0] : memref<1xf64>",
        "  return",
        "}",
    ]
    return "\n".join([*head, *body, *tail])


def _program_body(form: str, n: int) -> list[str]:
    t = f"memref<{n}x{n}xf64>"
    return {
        "i-k-j": [
            "  scf.for %i = %c0 to %n step %c1 {",
            "    scf.for %k = %c0 to %n step %c1 {",
            "      scf.for %j = %c0 to %n step %c1 {",
            f"        %c = memref.load %C[%i, %j] : {t}",
            f"        %a = memref.load %A[%i, %k] : {t}",
            f"        %b = memref.load %B[%k, %j] : {t}",
            "        %p = arith.mulf %a, %b : f64",
            "        %s = arith.addf %c, %p : f64",
            f"        memref.store %s, %C[%i, %j] : {t}",
            "      }",
            "    }",
            "  }",
        ],
        "k innermost, iter_args": [
            "  scf.for %i = %c0 to %n step %c1 {",
            "    scf.for %j = %c0 to %n step %c1 {",
            f"      %c = memref.load %C[%i, %j] : {t}",
            "      %sum = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %c) -> (f64) {",
            f"        %a = memref.load %A[%i, %k] : {t}",
            f"        %b = memref.load %B[%k, %j] : {t}",
            "        %p = arith.mulf %a, %b : f64",
            "        %s = arith.addf %acc, %p : f64",
            "        scf.yield %s : f64",
            "      }",
            f"      memref.store %sum, %C[%i, %j] : {t}",
            "    }",
            "  }",
        ],
        "linalg.matmul": [f"  linalg.matmul ins(%A, %B : {t}, {t}) outs(%C : {t})"],
    }.get(form) or _other(form, n)


def _other(form: str, n: int) -> list[str]:
    if form.startswith("linalg.generic "):
        return _generic(form.removeprefix("linalg.generic "), n)
    return _affine(_program_body(form.removeprefix("affine "), n), n)


def _generic(order: str, n: int) -> list[str]:
    """C[i, j] += A[i, k] * B[k, j] as a linalg.generic listing its dimensions in `order`
    (a permutation of "ijk"), its body the loops' `c + a * b`."""
    t = f"memref<{n}x{n}xf64>"
    dims = ", ".join(order)
    maps = ", ".join(f"affine_map<({dims}) -> ({p})>" for p in ("i, k", "k, j", "i, j"))
    kinds = ", ".join('"reduction"' if d == "k" else '"parallel"' for d in order)
    return [
        f"  linalg.generic {{indexing_maps = [{maps}], iterator_types = [{kinds}]}}",
        f"      ins(%A, %B : {t}, {t}) outs(%C : {t}) {{",
        "  ^bb0(%a: f64, %b: f64, %c: f64):",
        "    %p = arith.mulf %a, %b : f64",
        "    %s = arith.addf %c, %p : f64",
        "    linalg.yield %s : f64",
        "  }",
    ]


def _affine(lines: list[str], n: int) -> list[str]:
    """A loop form written with affine.for, affine.load and affine.store, as PolyBench's
    programs are."""
    text = "\n".join(lines).replace("%c0 to %n step %c1", f"0 to {n}")
    text = text.replace("scf.for", "affine.for").replace("scf.yield", "affine.yield")
    return (
        text.replace("memref.load", "affine.load")
        .replace("memref.store", "affine.store")
        .split("\n")
    )


FORMS = (
    "i-k-j",
    "k innermost, iter_args",
    "linalg.matmul",
    "affine i-k-j",
    "affine k innermost, iter_args",
    *(f"linalg.generic {''.join(p)}" for p in itertools.permutations("ijk")),
)


def _dhir(form: str, n: int, optimize: bool, inputs: list[np.ndarray], repeats: int):
    module = parse_string(_program(form, n))
    with contextlib.redirect_stderr(io.StringIO()):
        drop_code(module, "main")
    options = RunOptions(ranks=1, optimize=optimize, timeout=3600)
    exe, signature = compile_native(module, "main", options)
    times, result = [], None
    for _ in range(repeats):
        out = run_executable(exe, signature, [*inputs, np.zeros(1)], options)
        times.append(float(out[-1][0]))
        result = out[2]
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--forms", default=",".join(FORMS), help="comma-separated, of FORMS")
    parser.add_argument("--optimized-only", action="store_true", help="no --no-optimize runs")
    args = parser.parse_args()
    forms = re.split(r",(?! )", args.forms)  # "k innermost, iter_args" keeps its comma
    unknown = [form for form in forms if form not in FORMS]
    if unknown:
        parser.error(f"unknown forms {unknown}; the forms are {', '.join(FORMS)}")
    n = args.n
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((n, n)) for _ in range(3))
    flops = 2.0 * n**3
    fused, apart = core_f64_peak()
    numpy_times = []
    for _ in range(args.repeats):
        began = time.perf_counter()
        want = c + a @ b
        numpy_times.append(time.perf_counter() - began)
    numpy_s = statistics.median(numpy_times)
    print(f"## C += A B, f64, N = {n}, 1 rank, 1 thread (medians of {args.repeats})")
    print(f"core f64 peak (measured): {fused:.1f} GFLOP/s with FMA, {apart:.1f} without")
    print(f"{'':40}{'ms':>9}{'GFLOP/s':>9}{'vs NumPy':>10}{'% peak':>8}")

    def row(name: str, seconds: float, peak: float) -> None:
        rate = flops / seconds / 1e9
        line = f"{name:40}{seconds * 1e3:9.1f}{rate:9.1f}{seconds / numpy_s:10.2f}"
        print(f"{line}{100 * rate / peak:7.0f}%")

    row("NumPy (OpenBLAS, 1 thread)", numpy_s, fused)
    exact: np.ndarray | None = None
    for form in forms:
        for optimize in (True,) if args.optimized_only else (True, False):
            seconds, result = _dhir(form, n, optimize, [a, b, c], args.repeats)
            assert result is not None
            if exact is None:
                exact = result
            elif not np.array_equal(result, exact):
                raise SystemExit(f"MISMATCH: {form} differs from {forms[0]} bit for bit")
            if not np.allclose(result, want, rtol=1e-10, atol=1e-10 * float(np.abs(want).max())):
                raise SystemExit(f"MISMATCH: {form} differs from NumPy beyond rounding")
            label = f"dhir {form}{'' if optimize else ' (--no-optimize)'}"
            row(label, seconds, apart)
            if optimize:
                ratio = seconds / numpy_s
                verdict = "met" if ratio <= 2.0 else "NOT met"
                print(f"  {form}: {ratio:.2f}x NumPy (goal <= 2.0x, exact: {verdict})")


if __name__ == "__main__":
    main()
