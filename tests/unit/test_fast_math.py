"""--fast-math (dhir-fast-math): the flags it adds, and relaxed results within a stated
tolerance of the exact interpreter, while exact stays bit for bit."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.arith import AddfOp, FastMathFlagsAttr, MulfOp

import dhir
from dhir import parse_string
from dhir.ir.diagnostics import DhirError
from dhir.toolchain.options import RunOptions
from dhir.transforms.fast_math import relax

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
