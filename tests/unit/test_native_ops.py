"""Ops that MLIR 22's CPU lowering gets wrong or cannot lower by itself (math at small and
extreme inputs, math.ipowi, the vector dialect, bf16): natively and in the interpreter,
against NumPy. Native results must equal the interpreter's bit for bit; both must be
within the ulps test_interp.py allows of NumPy."""

import math
import shutil
from collections.abc import Callable

import numpy as np
import pytest

import dhir

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def both(src: str, *inputs: object) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The results of the native backend (one rank) and of the interpreter."""
    native = dhir.run(dhir.parse_string(src, "prog.mlir"), *inputs, backend="native", ranks=1)
    interp = dhir.run(dhir.parse_string(src, "prog.mlir"), *inputs, backend="interp")
    return native, interp


def same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
    np.testing.assert_array_equal(np.isnan(got) if got.dtype.kind == "f" else nan, nan, what)
    bits = f"u{got.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits), what)


def within_ulps(got: np.ndarray, want: np.ndarray, ulps: int, what: str) -> None:
    bits = f"i{got.itemsize}"
    apart = np.abs(got.view(bits).astype(np.int64) - want.view(bits).astype(np.int64))
    close = (got == want) | (np.isnan(got) & np.isnan(want)) | (apart <= ulps)
    assert close.all(), f"{what}: {got[~close]} where NumPy gives {want[~close]}"


# --- math at small and extreme inputs --------------------------------------------------

SMALL_AND_EXTREME = {
    "f64": [0.0, -0.0, 5e-324, -5e-324, 2.2e-308, 1e-300, -1e-300, 1e-20, -1e-20, 1e-10,
            -1e-10, 3e-8, -3e-8, 1e-5, -1e-5, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 100.0, -100.0,
            700.0, -700.0, 710.0, -746.0, 1e300, -1e300, 1.7976931348623157e308, math.inf,
            -math.inf, math.nan],
    "f32": [0.0, -0.0, 1e-45, -1e-45, 1.2e-38, 1e-30, -1e-30, 1e-10, -1e-10, 1e-7, -1e-7,
            3e-4, -3e-4, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 50.0, -50.0, 88.0, -88.0, 89.0,
            -104.0, 1e30, -1e30, 3.4028235e38, -3.4028235e38, math.inf, -math.inf, math.nan],
}  # fmt: skip
MATH: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "cbrt": np.cbrt, "erf": np.vectorize(math.erf, otypes=[float]), "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "absf": np.abs, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "roundeven": np.rint,
}  # fmt: skip
# As in test_interp.py: glibc's and NumPy's cbrt and tanh differ by up to 3 ulp in f64.
WIDER_ULPS = {("cbrt", "f64"): 3, ("tanh", "f64"): 3}


def _unary_program(names: list[str], type_: str, n: int) -> str:
    outputs = ", ".join(f"%o{k}: memref<{n}x{type_}>" for k in range(len(names)))
    body = [f"    %x = memref.load %in[%i] : memref<{n}x{type_}>"]
    for k, name in enumerate(names):
        body += [
            f"    %r{k} = math.{name} %x : {type_}",
            f"    memref.store %r{k}, %o{k}[%i] : memref<{n}x{type_}>",
        ]
    return "\n".join(
        [
            f"func.func @main(%in: memref<{n}x{type_}>, {outputs}) {{",
            "  %lo = arith.constant 0 : index",
            "  %one = arith.constant 1 : index",
            f"  %hi = arith.constant {n} : index",
            "  scf.for %i = %lo to %hi step %one {",
            *body,
            "  }",
            "  return",
            "}",
        ]
    )


@needs_llvm
@pytest.mark.parametrize("type_", ["f32", "f64"])
def test_math_at_small_and_extreme_inputs(type_: str) -> None:
    dtype = np.dtype(np.float32 if type_ == "f32" else np.float64)
    x = np.array(SMALL_AND_EXTREME[type_], dtype)
    names = list(MATH)
    outputs = [np.zeros_like(x) for _ in names]
    native, interp = both(_unary_program(names, type_, len(x)), x, *outputs)
    for name, got, oracle in zip(names, native[1:], interp[1:]):
        same_bits(got, oracle, f"math.{name} : {type_}, native against the interpreter")
        with np.errstate(all="ignore"):
            want = MATH[name](x.astype(np.float64)).astype(dtype)  # rounded once
        ulps = WIDER_ULPS.get((name, type_), 2)
        within_ulps(got, want, ulps, f"math.{name} : {type_} of {x}")


@needs_llvm
def test_expm1_and_log1p_keep_small_inputs() -> None:
    # MLIR's expansion, exp(x) - 1 and log(1 + x), gives 1.0000000827e-10 and 0 here.
    x64 = np.array([1e-10, -1e-10, 1e-300], np.float64)
    x32 = np.array([1e-10, -1e-10, 1e-30], np.float32)
    program = _unary_program(["expm1", "log1p"], "f64", 3)
    native, _ = both(program, x64, np.zeros(3), np.zeros(3))
    np.testing.assert_array_equal(native[1:], [np.expm1(x64), np.log1p(x64)])
    program = _unary_program(["expm1", "log1p"], "f32", 3)
    native, _ = both(program, x32, np.zeros(3, np.float32), np.zeros(3, np.float32))
    np.testing.assert_array_equal(native[1:], [np.expm1(x32), np.log1p(x32)])


def _ipowi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MLIR's expansion: a negative power gives 0, except for 1 and -1."""

    def one(a: int, b: int) -> int:
        return pow(a, b, 2**32) if b >= 0 else (a ** (-b % 2) if a in (1, -1) else 0)

    return np.array([one(int(a), int(b)) for a, b in zip(x, y)], np.int64).astype(np.int32)


IPOWI = """
func.func @main(%a: memref<12xi32>, %b: memref<12xi32>, %c: memref<12xi32>) {
  %lo = arith.constant 0 : index
  %one = arith.constant 1 : index
  %hi = arith.constant 12 : index
  scf.for %i = %lo to %hi step %one {
    %x = memref.load %a[%i] : memref<12xi32>
    %y = memref.load %b[%i] : memref<12xi32>
    %z = math.ipowi %x, %y : i32
    memref.store %z, %c[%i] : memref<12xi32>
  }
  return
}
"""


@needs_llvm
def test_ipowi() -> None:
    a = np.array([2, -3, 7, 1, -1, -1, 5, 0, 0, 123456, 2, -2], np.int32)
    b = np.array([10, 3, 0, -5, -3, -4, -1, 0, 7, 5, 31, 31], np.int32)
    native, interp = both(IPOWI, a, b, np.zeros(12, np.int32))
    same_bits(native[2], interp[2], "math.ipowi natively")
    np.testing.assert_array_equal(native[2], _ipowi(a, b))
