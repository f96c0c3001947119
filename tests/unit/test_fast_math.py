"""--fast-math (dhir-fast-math): the flags it adds, and relaxed results within a stated
tolerance of the exact interpreter, while exact stays bit for bit."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.arith import AddfOp, FastMathFlagsAttr, MulfOp

import dhir
from dhir import parse_string
from dhir.ir.diagnostics import DhirError
from dhir.runner import drop_code
from dhir.toolchain.options import RunOptions
from dhir.transforms.fast_math import relax
from dhir.transforms.optimize_bodies import optimize_bodies

K = 256
GEMM = f"""
func.func @main(%A: memref<8x{K}xf64>, %B: memref<{K}x64xf64>, %C: memref<8x64xf64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %ck = arith.constant {K} : index
  scf.for %i = %c0 to %c8 step %c1 {{
    scf.for %k = %c0 to %ck step %c1 {{
      scf.for %j = %c0 to %c64 step %c1 {{
        %c = memref.load %C[%i, %j] : memref<8x64xf64>
        %a = memref.load %A[%i, %k] : memref<8x{K}xf64>
        %b = memref.load %B[%k, %j] : memref<{K}x64xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p fastmath<nsz> : f64
        memref.store %s, %C[%i, %j] : memref<8x64xf64>
      }}
    }}
  }}
  return
}}
"""
N = 4096
DOT = f"""
func.func @main(%a: memref<{N}xf64>, %b: memref<{N}xf64>, %out: memref<1xf64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {N} : index
  %zero = arith.constant 0.0 : f64
  %sum = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {{
    %x = memref.load %a[%k] : memref<{N}xf64>
    %y = memref.load %b[%k] : memref<{N}xf64>
    %p = arith.mulf %x, %y : f64
    %s = arith.addf %acc, %p : f64
    scf.yield %s : f64
  }}
  memref.store %sum, %out[%c0] : memref<1xf64>
  return
}}
"""
# A relaxed result is within this much of the exact one, relative to the sum of the
# magnitudes of the terms (each reordering or fusion moves a term's rounding, at most
# a few units in the last place of the running sum).
TOLERANCE = 1e-13


def _gemm_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal(s) for s in ((8, K), (K, 64), (8, 64))]


def test_relax_adds_flags_and_keeps_those_there() -> None:
    module = parse_string(GEMM)
    assert relax(module, "contract") == 2
    flags = {type(op): op.fastmath for op in module.walk() if isinstance(op, AddfOp | MulfOp)}
    assert flags[MulfOp] == FastMathFlagsAttr(["contract"])  # pyright: ignore[reportArgumentType]
    assert flags[AddfOp] == FastMathFlagsAttr(["contract", "nsz"])  # pyright: ignore[reportArgumentType]
    assert relax(parse_string(GEMM), "none") == 0


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(DhirError, match="unknown fast-math mode 'fastest'"):
        RunOptions(fast_math="fastest")


def _relative_error(got: np.ndarray, want: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(got - want) / scale))


def test_contract_fuses_and_stays_within_tolerance() -> None:
    """Built for a CPU with FMA, `contract` changes the gemm's roundings (so the flags
    reach LLVM), within the tolerance; exact it equals the interpreter bit for bit."""
    inputs = _gemm_inputs()
    want = dhir.run(GEMM, *inputs, backend="interp", ranks=1)[2]
    exact = dhir.run(GEMM, *inputs, ranks=1, cpu="haswell")[2]
    np.testing.assert_array_equal(exact, want)
    fused = dhir.run(GEMM, *inputs, ranks=1, cpu="haswell", fast_math="contract")[2]
    scale = inputs[2] * 0 + np.abs(inputs[0]) @ np.abs(inputs[1]) + np.abs(inputs[2])
    assert not np.array_equal(fused, want)
    assert _relative_error(fused, want, scale) < TOLERANCE


@pytest.mark.parametrize("mode", ["reassoc", "fast"])
def test_reassoc_reorders_a_sum_within_tolerance(mode: str) -> None:
    rng = np.random.default_rng(1)  # (seed 5 happens to round to the exact sum)
    a, b = rng.standard_normal(N), rng.standard_normal(N)
    want = dhir.run(DOT, a, b, np.zeros(1), backend="interp", ranks=1)[2]
    exact = dhir.run(DOT, a, b, np.zeros(1), ranks=1)[2]
    np.testing.assert_array_equal(exact, want)
    relaxed = dhir.run(DOT, a, b, np.zeros(1), ranks=1, fast_math=mode)[2]
    scale = np.sum(np.abs(a * b))
    assert not np.array_equal(relaxed, want), "a reassociated sum of 4096 terms moved"
    assert _relative_error(relaxed, want, np.array(scale)) < TOLERANCE


MAXNUM = """
func.func @main(%a: memref<4xf32>, %b: memref<4xf32>, %c: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    %y = memref.load %b[%i] : memref<4xf32>
    %m = arith.maxnumf %x, %y : f32
    %n = arith.minnumf %m, %y : f32
    memref.store %n, %c[%i] : memref<4xf32>
  }
  return
}
"""


@pytest.mark.parametrize("mode", ["contract", "reassoc", "fast"])
def test_maxnumf_under_each_mode(mode: str) -> None:
    # dhir-fast-math gave the flags as strings, and dhir-accurate-math, reading
    # `flag.value` for nsz on maxnumf and minnumf, stopped the build with an AttributeError.
    a = np.array([1.0, np.nan, -2.0, 0.5], np.float32)
    b = np.array([2.0, 3.0, np.nan, -1.0], np.float32)
    want = dhir.run(MAXNUM, a, b, np.zeros(4, np.float32), backend="interp")[2]
    got = dhir.run(MAXNUM, a, b, np.zeros(4, np.float32), ranks=1, fast_math=mode)[2]
    if mode != "fast":  # fast assumes no NaNs
        np.testing.assert_array_equal(got, want)


def test_cli_fast_math(tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main() {\n  return\n}\n")
    run = [sys.executable, "-m", "dhir", "run", str(program)]
    bad = subprocess.run([*run, "--fast-math", "fastest"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'fastest'" in bad.stderr
    good = subprocess.run([*run, "--fast-math", "fast"], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr


# Every kind of float loop nest and linalg contraction the optimizer rewrites, in one
# program: built without flags, nothing in it may be relaxed.
PLAIN_FLOATS = """
func.func @main(%A: memref<16x16xf64>, %B: memref<16x16xf64>, %C: memref<16x16xf64>,
                %x: memref<16xf64>, %y: memref<16xf64>, %o: memref<f64>,
                %S: memref<2x16x16xf32>, %T: memref<2x16x16xf32>, %v: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %z = arith.constant 0.0 : f64
  scf.for %i = %c0 to %c16 step %c1 {
    scf.for %k = %c0 to %c16 step %c1 {
      scf.for %j = %c0 to %c16 step %c1 {
        %a = memref.load %A[%i, %k] : memref<16x16xf64>
        %b = memref.load %B[%k, %j] : memref<16x16xf64>
        %c = memref.load %C[%i, %j] : memref<16x16xf64>
        %p = arith.mulf %a, %b : f64
        %t = arith.addf %c, %p : f64
        memref.store %t, %C[%i, %j] : memref<16x16xf64>
      }
    }
  }
  scf.for %i = %c0 to %c16 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %s = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %z) -> (f64) {
        %a = memref.load %A[%i, %k] : memref<16x16xf64>
        %b = memref.load %B[%k, %j] : memref<16x16xf64>
        %p = arith.mulf %a, %b : f64
        %t = arith.addf %acc, %p : f64
        scf.yield %t : f64
      }
      memref.store %s, %C[%i, %j] : memref<16x16xf64>
    }
  }
  scf.for %i = %c0 to %c16 step %c1 {
    %s = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %z) -> (f64) {
      %a = memref.load %A[%i, %k] : memref<16x16xf64>
      %b = memref.load %x[%k] : memref<16xf64>
      %p = arith.mulf %a, %b : f64
      %t = arith.addf %acc, %p : f64
      scf.yield %t : f64
    }
    memref.store %s, %y[%i] : memref<16xf64>
  }
  linalg.matmul ins(%A, %B : memref<16x16xf64>, memref<16x16xf64>) outs(%C : memref<16x16xf64>)
  linalg.matvec ins(%A, %x : memref<16x16xf64>, memref<16xf64>) outs(%y : memref<16xf64>)
  linalg.vecmat ins(%x, %A : memref<16xf64>, memref<16x16xf64>) outs(%y : memref<16xf64>)
  linalg.dot ins(%x, %y : memref<16xf64>, memref<16xf64>) outs(%o : memref<f64>)
  linalg.batch_matmul ins(%S, %S : memref<2x16x16xf32>, memref<2x16x16xf32>)
                      outs(%T : memref<2x16x16xf32>)
  %w = vector.load %v[%c0] : memref<16xf32>, vector<16xf32>
  %r = vector.reduction <add>, %w : vector<16xf32> into f32
  memref.store %r, %v[%c0] : memref<16xf32>
  return
}
"""
_LLVM_FLAG = re.compile(
    r"\b(?:fadd|fsub|fmul|fdiv|call|fneg)\s+((?:(?:fast|reassoc|contract|nnan|ninf|nsz|arcp|afn)\s+)+)"
)


@pytest.mark.parametrize(
    ("mode", "allowed"),
    [
        ("none", set()),
        ("contract", {"contract"}),
        ("reassoc", {"contract", "reassoc"}),
        ("fast", {"fast"}),
    ],
)
def test_each_mode_gives_llvm_its_own_relaxations_only(
    mode: str, allowed: set[str], tmp_path: Path
) -> None:
    """The LLVM IR of a program of float nests and contractions, built with --fast-math
    MODE: each instruction's fast-math flags are MODE's (none at all without one: no
    fused multiply-add, no reduction in another order), and OpenBLAS, which sums in its
    own order, is called only under reassoc and fast."""
    shapes = [(16, 16), (16, 16), (16, 16), (16,), (16,), ()]
    rng = np.random.default_rng(2)
    inputs: list[np.ndarray] = [rng.standard_normal(s) for s in shapes]
    inputs += [rng.standard_normal(s).astype(np.float32) for s in ((2, 16, 16),) * 2]
    inputs.append(rng.standard_normal(16).astype(np.float32))
    kept = tmp_path / "build"
    got = dhir.run(PLAIN_FLOATS, *inputs, ranks=1, fast_math=mode, keep_build=kept)
    ir = (kept / "program.ll").read_text()
    flags = {flag for found in _LLVM_FLAG.findall(ir) for flag in found.split()}
    assert flags == allowed, flags
    assert ("llvm.fma" in ir or "llvm.fmuladd" in ir) is False
    assert ("scipy_cblas_" in ir) == (mode in ("reassoc", "fast"))
    if mode == "none":
        want = dhir.run(PLAIN_FLOATS, *inputs, backend="interp", ranks=1)
        for expected, actual in zip(want, got):
            np.testing.assert_array_equal(actual, expected)


def _named_shapes(name: str, b: int, m: int, n: int, k: int) -> list[tuple[int, ...]]:
    return {
        "matmul": [(m, k), (k, n), (m, n)],
        "matvec": [(m, k), (k,), (m,)],
        "vecmat": [(k,), (k, n), (n,)],
        "dot": [(k,), (k,), ()],
        "batch_matmul": [(b, m, k), (b, k, n), (b, m, n)],
    }[name]


def _memref(shape: tuple[int, ...], dtype: str, layout: str = "") -> str:
    return "memref<" + "".join(f"{d}x" for d in shape) + dtype + layout + ">"


def _view(arg: str, shape: tuple[int, ...], dtype: str, view: str) -> tuple[str, str, str]:
    """A subview of `shape` at offset 1 in every dimension (`view` "static", or "dynamic":
    the offset read at run time) of an argument 2 larger each way: the argument's type,
    the line making the view, the view's type."""
    whole = tuple(d + 2 for d in shape)
    strides = [int(np.prod(whole[d + 1 :])) for d in range(len(whole))]
    offset = str(sum(strides)) if view == "static" else "?"
    kind = _memref(shape, dtype, f", strided<[{', '.join(map(str, strides))}], offset: {offset}>")
    at = ", ".join(["1" if view == "static" else "%off"] * len(shape))
    ones = ", ".join(["1"] * len(shape))
    sizes = ", ".join(map(str, shape))
    line = f"  {arg}v = memref.subview {arg}[{at}] [{sizes}] [{ones}] : "
    return _memref(whole, dtype), f"{line}{_memref(whole, dtype)} to {kind}", kind


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["matmul", "matvec", "vecmat", "dot", "batch_matmul"]),
    sizes=st.tuples(*(st.sampled_from([0, 1, 2, 5, 9]) for _ in range(4))),
    dtype=st.sampled_from(["f32", "f64"]),
    views=st.tuples(*(st.sampled_from(["plain", "static", "dynamic"]) for _ in range(3))),
    mode=st.sampled_from(["none", "contract", "reassoc", "fast"]),
    ranks=st.integers(1, 2),
)
def test_named_contractions_on_views_under_each_mode(
    name: str,
    sizes: tuple[int, int, int, int],
    dtype: str,
    views: tuple[str, str, str],
    mode: str,
    ranks: int,
) -> None:
    """matmul, matvec, vecmat, dot and batch_matmul on whole memrefs or on subviews of
    static or run-time offsets, sizes 0, 1 and more, under each mode on 1 or 2 ranks:
    without a relaxation bit for bit the interpreter's, with one within rounding of it
    (OpenBLAS takes whole row-major memrefs only; views keep the loops)."""
    shapes = _named_shapes(name, *sizes)
    arguments, lines, operands, kinds, arrays = [], [], [], [], []
    rng = np.random.default_rng(sum(sizes))
    numpy_type = np.float64 if dtype == "f64" else np.float32
    for index, (shape, view) in enumerate(zip(shapes, views)):
        arg = f"%a{index}"
        if view == "plain" or not shape:
            arguments.append(f"{arg}: {_memref(shape, dtype)}")
            operands.append(arg)
            kinds.append(_memref(shape, dtype))
            arrays.append(np.asarray(rng.standard_normal(shape)).astype(numpy_type))
            continue
        whole, line, kind = _view(arg, shape, dtype, view)
        arguments.append(f"{arg}: {whole}")
        lines.append(line)
        operands.append(f"{arg}v")
        kinds.append(kind)
        arrays.append(rng.standard_normal(tuple(d + 2 for d in shape)).astype(numpy_type))
    text = (
        f"func.func @main({', '.join(arguments)}, %offs: memref<1xindex>) {{\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %off = memref.load %offs[%c0] : memref<1xindex>\n"
        + "".join(line + "\n" for line in lines)
        + f"  linalg.{name} ins({operands[0]}, {operands[1]} : {kinds[0]}, {kinds[1]}) "
        f"outs({operands[2]} : {kinds[2]})\n  return\n}}\n"
    )
    offsets = np.array([1], np.int64)
    want = dhir.run(text, *arrays, offsets, backend="interp", ranks=1)[2]
    got = dhir.run(text, *arrays, offsets, ranks=ranks, fast_math=mode)[2]
    if mode == "none":
        np.testing.assert_array_equal(got, want)
    else:
        # Each element: its start and at most 9 products of standard normal values.
        tolerance = 1e-12 if dtype == "f64" else 1e-4
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


SCALED = """
func.func @main(%A: memref<6x5xf64>, %B: memref<5x19xf64>, %C: memref<6x19xf64>,
                %s: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c19 = arith.constant 19 : index
  %alpha = memref.load %s[%c0] : memref<1xf64>
  scf.for %i = %c0 to %c6 step %c1 {
    scf.for %k = %c0 to %c5 step %c1 {
      scf.for %j = %c0 to %c19 step %c1 {
        %a = memref.load %A[%i, %k] : memref<6x5xf64>
        %b = memref.load %B[%k, %j] : memref<5x19xf64>
        %c = memref.load %C[%i, %j] : memref<6x19xf64>
        %p = arith.mulf %alpha, %a FLAGS0 : f64
        %q = arith.mulf %p, %b FLAGS1 : f64
        %t = arith.addf %c, %q FLAGS2 : f64
        memref.store %t, %C[%i, %j] : memref<6x19xf64>
      }
    }
  }
  return
}
"""
_SOME_FLAGS = st.sets(st.sampled_from(["reassoc", "contract", "nsz"]))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flags=st.tuples(_SOME_FLAGS, _SOME_FLAGS, _SOME_FLAGS), seed=st.integers(0, 2**16))
def test_flags_on_some_ops_relax_those_ops_only(
    flags: tuple[set[str], set[str], set[str]], seed: int
) -> None:
    """C[i, j] += (alpha * A[i, k]) * B[k, j] with fastmath flags on some of its three ops,
    built with --fast-math=none: OpenBLAS only where all three allow reassoc and contract.
    The result is the interpreter's bit for bit unless the flags allow a change: reassoc on
    the add (the sum along k, which it makes, in another order), contract on the add and
    the multiply it takes (a fused multiply-add), or reassoc on both multiplies."""
    text = SCALED
    for index, ops in enumerate(flags):
        written = f"fastmath<{','.join(sorted(ops))}>" if ops else ""
        text = text.replace(f"FLAGS{index}", written)
    module = parse_string(text)
    drop_code(module, "main")
    decisions = optimize_bodies(module, 256)
    called = any("OpenBLAS" in d.text for d in decisions)
    assert called == all({"reassoc", "contract"} <= ops for ops in flags), decisions
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(s) for s in ((6, 5), (5, 19), (6, 19))]
    inputs.append(np.array([rng.standard_normal()]))
    want = dhir.run(text, *inputs, backend="interp", ranks=1)[2]
    got = dhir.run(text, *inputs, ranks=1, cpu="haswell")[2]
    first, second, add = flags
    fused = "contract" in add & second
    if "reassoc" not in add | (first & second) and not fused:
        np.testing.assert_array_equal(got, want)
    else:
        scale = np.abs(inputs[3][0]) * np.abs(inputs[0]) @ np.abs(inputs[1])
        assert _relative_error(got, want, scale + np.abs(inputs[2])) < TOLERANCE


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.tuples(
        st.sampled_from([1, 3, 6, 9]), st.sampled_from([0, 1, 4, 7]), st.sampled_from([1, 5, 33])
    ),
    views=st.tuples(*(st.sampled_from(["plain", "static", "dynamic"]) for _ in range(3))),
    mode=st.sampled_from(["none", "contract", "reassoc", "fast"]),
    ranks=st.integers(1, 2),
)
def test_nests_on_views_under_each_mode(
    sizes: tuple[int, int, int], views: tuple[str, str, str], mode: str, ranks: int
) -> None:
    """C[i, j] += A[i, k] * B[k, j] in i-k-j order, each of A, B and C a whole memref or
    a subview of static or run-time offset, under each mode on 1 or 2 ranks: without a
    relaxation bit for bit the interpreter's (the exact kernels), with one within
    rounding (OpenBLAS where all three are whole memrefs)."""
    ni, nk, nj = sizes
    arguments, lines, names, kinds, arrays = [], [], [], [], []
    rng = np.random.default_rng(ni * 100 + nk * 10 + nj)
    for arg, shape, view in zip(("%A", "%B", "%C"), ((ni, nk), (nk, nj), (ni, nj)), views):
        if view == "plain":
            whole, kind = _memref(shape, "f64"), _memref(shape, "f64")
            names.append(arg)
        else:
            whole, line, kind = _view(arg, shape, "f64", view)
            lines.append(line)
            names.append(f"{arg}v")
            shape = tuple(d + 2 for d in shape)
        arguments.append(f"{arg}: {whole}")
        kinds.append(kind)
        arrays.append(rng.standard_normal(shape))
    (a, b, c), (ta, tb, tc) = names, kinds
    text = (
        f"func.func @main({', '.join(arguments)}, %offs: memref<1xindex>) {{\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %c1 = arith.constant 1 : index\n"
        "  %off = memref.load %offs[%c0] : memref<1xindex>\n"
        f"  %ni = arith.constant {ni} : index\n"
        f"  %nk = arith.constant {nk} : index\n"
        f"  %nj = arith.constant {nj} : index\n"
        + "".join(line + "\n" for line in lines)
        + "  scf.for %i = %c0 to %ni step %c1 {\n"
        "    scf.for %k = %c0 to %nk step %c1 {\n"
        "      scf.for %j = %c0 to %nj step %c1 {\n"
        f"        %a = memref.load {a}[%i, %k] : {ta}\n"
        f"        %b = memref.load {b}[%k, %j] : {tb}\n"
        f"        %c = memref.load {c}[%i, %j] : {tc}\n"
        "        %p = arith.mulf %a, %b : f64\n"
        "        %s = arith.addf %c, %p : f64\n"
        f"        memref.store %s, {c}[%i, %j] : {tc}\n"
        "      }\n    }\n  }\n  return\n}\n"
    )
    offsets = np.array([1], np.int64)
    want = dhir.run(text, *arrays, offsets, backend="interp", ranks=1)[2]
    got = dhir.run(text, *arrays, offsets, ranks=ranks, fast_math=mode)[2]
    if mode == "none":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_the_optimizer_says_what_the_flags_allow_not_exact() -> None:
    """Under --fast-math contract the blocked kernel's multiply and add may become an FMA
    (its result differs from the interpreter's), yet --timing said "..., exact"."""
    exact = parse_string(GEMM.replace(" fastmath<nsz>", ""))
    drop_code(exact, "main")
    (done,) = optimize_bodies(exact, 256)
    assert done.done and done.text.endswith(", exact"), done.text
    relaxed = parse_string(GEMM.replace(" fastmath<nsz>", ""))
    drop_code(relaxed, "main")
    relax(relaxed, "contract")
    (done,) = optimize_bodies(relaxed, 256)
    assert done.done and "exact" not in done.text, done.text
    assert done.text.endswith(
        "in the program's order, as its fastmath allows (contract: a multiply and an add "
        "may become one FMA)"
    ), done.text
