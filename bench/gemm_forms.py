"""C += A B (f64, N^3, default N = 1200) written as plain MLIR a user would write (loops
of scf.for or of affine.for, linalg.matmul, and linalg.generic with its dimensions in each
of the 6 orders of (i, j, k), the reduction k), and the other named contractions beside
their generic forms (batch_matmul on a batch of 4 products of N/2 x N/2, vecmat x A and
matvec A x with A N x N; batch_matvec on a batch of 4 such, batch_reduce_matmul summing
a batch of 4 products of N/2 x N/2), built by dhir for 1 rank (CodeDrop makes the task), with and
without dhir-optimize-bodies, against NumPy (OpenBLAS, 1 thread) in this process and
against the core's measured f64 peak (bench/c/fma_peak.c: independent vector FMAs, and
multiplies and adds rounded apart, which is what exact code may use). Results are checked
against the interpreter's order of operations: the dhir runs of one product must equal
each other bit for bit.

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
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

from peak import core_f64_peak  # noqa: E402

from dhir import parse_string  # noqa: E402
from dhir.backends.native import compile_native  # noqa: E402
from dhir.runner import drop_code  # noqa: E402
from dhir.toolchain.launch import run_executable  # noqa: E402
from dhir.toolchain.options import RunOptions  # noqa: E402


@dataclass(frozen=True)
class Product:
    """What a form computes: its title, the shapes of A, B and C at N, C plus the product
    as NumPy computes it, and its floating-point operations."""

    title: str
    shapes: Callable[[int], list[tuple[int, ...]]]
    numpy: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    flops: Callable[[int], float]


BATCH = 4
PRODUCTS = {
    "gemm": Product(
        "C += A B, f64", lambda n: [(n, n)] * 3, lambda a, b, c: c + a @ b, lambda n: 2.0 * n**3
    ),
    "batch": Product(
        f"C += A B on a batch of {BATCH} products of N/2 x N/2, f64",
        lambda n: [(BATCH, n // 2, n // 2)] * 3,
        lambda a, b, c: c + a @ b,
        lambda n: 2.0 * BATCH * (n // 2) ** 3,
    ),
    "x A": Product(
        "y += x A, f64, A N x N",
        lambda n: [(n,), (n, n), (n,)],
        lambda a, b, c: c + a @ b,
        lambda n: 2.0 * n**2,
    ),
    "A x": Product(
        "y += A x, f64, A N x N",
        lambda n: [(n, n), (n,), (n,)],
        lambda a, b, c: c + a @ b,
        lambda n: 2.0 * n**2,
    ),
    "batch A x": Product(
        f"y += A x on a batch of {BATCH}, f64, A N x N",
        lambda n: [(BATCH, n, n), (BATCH, n), (BATCH, n)],
        lambda a, b, c: c + np.matmul(a, b[..., None])[..., 0],
        lambda n: 2.0 * BATCH * n**2,
    ),
    "batch reduce": Product(
        f"C += sum of A B over a batch of {BATCH} products of N/2 x N/2, f64",
        lambda n: [(BATCH, n // 2, n // 2), (BATCH, n // 2, n // 2), (n // 2, n // 2)],
        lambda a, b, c: c + np.tensordot(a, b, axes=([0, 2], [0, 1])),
        lambda n: 2.0 * BATCH * (n // 2) ** 3,
    ),
}


def _memref(shape: tuple[int, ...]) -> str:
    return "memref<" + "x".join([*map(str, shape), "f64"]) + ">"


def _program(form: str, n: int) -> str:
    a, b, c = (_memref(s) for s in PRODUCTS[FORMS[form]].shapes(n))
    body = _program_body(form, n)
    head = [
        "func.func private @MPI_Wtime() -> f64",
        f"func.func @main(%A: {a}, %B: {b}, %C: {c}, %time: memref<1xf64>) {{",
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
    }.get(form) or _other(form, n)


# Each product's dimensions as its operands pick them (A, B, C), as the named op's maps do.
SUBSCRIPTS = {
    "gemm": ("i, k", "k, j", "i, j"),
    "batch": ("b, i, k", "b, k, j", "b, i, j"),
    "x A": ("k", "k, j", "j"),
    "A x": ("i, k", "k", "i"),
}


def _other(form: str, n: int) -> list[str]:
    a, b, c = (_memref(s) for s in PRODUCTS[FORMS[form]].shapes(n))
    if form.startswith("linalg.generic "):
        return _generic(form.split()[-1], SUBSCRIPTS[FORMS[form]], (a, b, c))
    if form.startswith("linalg."):
        return [f"  {form} ins(%A, %B : {a}, {b}) outs(%C : {c})"]
    return _affine(_program_body(form.removeprefix("affine "), n), n)


def _generic(order: str, picks: tuple[str, str, str], types: tuple[str, str, str]) -> list[str]:
    """C += A B as a linalg.generic listing its dimensions in `order` (its letters, the
    reduction k), its operands picking `picks`, its body the loops' `c + a * b`."""
    a, b, c = types
    dims = ", ".join(order)
    maps = ", ".join(f"affine_map<({dims}) -> ({p})>" for p in picks)
    kinds = ", ".join('"reduction"' if d == "k" else '"parallel"' for d in order)
    return [
        f"  linalg.generic {{indexing_maps = [{maps}], iterator_types = [{kinds}]}}",
        f"      ins(%A, %B : {a}, {b}) outs(%C : {c}) {{",
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


# Each form and the product it computes.
FORMS = {
    "i-k-j": "gemm",
    "k innermost, iter_args": "gemm",
    "linalg.matmul": "gemm",
    "affine i-k-j": "gemm",
    "affine k innermost, iter_args": "gemm",
    **{f"linalg.generic {''.join(p)}": "gemm" for p in itertools.permutations("ijk")},
    "linalg.batch_matmul": "batch",
    "linalg.generic batch bijk": "batch",
    "linalg.vecmat": "x A",
    "linalg.generic x A jk": "x A",
    "linalg.matvec": "A x",
    "linalg.generic A x ik": "A x",
    "linalg.batch_matvec": "batch A x",
    "linalg.batch_reduce_matmul": "batch reduce",
}


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


def _label(form: str, optimize: bool) -> str:
    return f"dhir {form}{'' if optimize else ' (--no-optimize)'}"


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
    runs = (True,) if args.optimized_only else (True, False)
    # Labels longer than the first column would push the numbers out of their columns.
    width = max([40, *(len(_label(form, o)) + 2 for form in forms for o in runs)])
    fused, apart = core_f64_peak()
    print(f"core f64 peak (measured): {fused:.1f} GFLOP/s with FMA, {apart:.1f} without")
    for product in dict.fromkeys(FORMS[form] for form in forms):
        chosen = [form for form in forms if FORMS[form] == product]
        _measure(PRODUCTS[product], chosen, runs, args.n, args.repeats, width, (fused, apart))


def _measure(
    product: Product,
    forms: list[str],
    runs: tuple[bool, ...],
    n: int,
    repeats: int,
    width: int,
    peaks: tuple[float, float],
) -> None:
    """One table: `product` as NumPy computes it, then as each form, each run of it."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s) for s in product.shapes(n))
    flops = product.flops(n)
    numpy_times = []
    for _ in range(repeats):
        began = time.perf_counter()
        want = product.numpy(a, b, c)
        numpy_times.append(time.perf_counter() - began)
    numpy_s = statistics.median(numpy_times)
    print(f"## {product.title}, N = {n}, 1 rank, 1 thread (medians of {repeats})")
    print(f"{'':{width}}{'ms':>9}{'GFLOP/s':>9}{'vs NumPy':>10}{'% peak':>8}")

    def row(name: str, seconds: float, peak: float) -> None:
        rate = flops / seconds / 1e9
        line = f"{name:{width}}{seconds * 1e3:9.2f}{rate:9.1f}{seconds / numpy_s:10.2f}"
        print(f"{line}{100 * rate / peak:7.0f}%")

    row("NumPy (OpenBLAS, 1 thread)", numpy_s, peaks[0])
    exact: np.ndarray | None = None
    for form in forms:
        for optimize in runs:
            seconds, result = _dhir(form, n, optimize, [a, b, c], repeats)
            assert result is not None
            if exact is None:
                exact = result
            elif not np.array_equal(result, exact):
                raise SystemExit(f"MISMATCH: {form} differs from {forms[0]} bit for bit")
            if not np.allclose(result, want, rtol=1e-10, atol=1e-10 * float(np.abs(want).max())):
                raise SystemExit(f"MISMATCH: {form} differs from NumPy beyond rounding")
            row(_label(form, optimize), seconds, peaks[1])
            if optimize:
                ratio = seconds / numpy_s
                verdict = "met" if ratio <= 2.0 else "NOT met"
                print(f"  {form}: {ratio:.2f}x NumPy (goal <= 2.0x, exact: {verdict})")


if __name__ == "__main__":
    main()
