"""Ops that MLIR 22's CPU lowering gets wrong or cannot lower by itself (math at small and
extreme inputs, math.ipowi, the vector dialect, bf16): natively and in the interpreter,
against NumPy. Native results must equal the interpreter's bit for bit; both must be
within the ulps test_interp.py allows of NumPy."""

import math
import shutil
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

import dhir
from dhir.backends.interp.scalars import wrap

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
    "f16": [0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 1e-4, -1e-4, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0,
            3.0, -3.0, 10.0, -10.0, 11.0, -17.0, 1000.0, -1000.0, 65504.0, -65504.0, math.inf,
            -math.inf, math.nan],
}  # fmt: skip
DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
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
@pytest.mark.parametrize("type_", ["f16", "f32", "f64"])
def test_math_at_small_and_extreme_inputs(type_: str) -> None:
    dtype = np.dtype(DTYPES[type_])
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


IPOWI_ON_INDEX = """
func.func @main(%a: memref<4xindex>, %b: memref<4xindex>, %c: memref<8xindex>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %x = memref.load %a[%c0] : memref<4xindex>
  %y = memref.load %b[%c0] : memref<4xindex>
  %z = math.ipowi %x, %y : index
  memref.store %z, %c[%c0] : memref<8xindex>
  %v = vector.load %a[%c0] : memref<4xindex>, vector<4xindex>
  %w = vector.load %b[%c0] : memref<4xindex>, vector<4xindex>
  %p = math.ipowi %v, %w : vector<4xindex>
  vector.store %p, %c[%c4] : memref<8xindex>, vector<4xindex>
  return
}
"""


@needs_llvm
def test_ipowi_on_index() -> None:
    # convert-math-to-funcs makes power functions for integer types only: mlir-opt-22
    # failed to legalize math.ipowi on index.
    a = np.array([3, -2, 1 << 40, 7], np.int64)
    b = np.array([41, 63, 2, -1], np.int64)
    native, interp = both(IPOWI_ON_INDEX, a, b, np.zeros(8, np.int64))
    same_bits(native[2], interp[2], "math.ipowi on index natively")
    want = [wrap(pow(int(x), int(y), 1 << 64) if y >= 0 else 0, 64) for x, y in zip(a, b)]
    np.testing.assert_array_equal(native[2], [want[0], 0, 0, 0, *want])


# --- the vector dialect ----------------------------------------------------------------

VECTORS = """
func.func @main(%a: memref<10xf32>, %m: memref<3x5xf64>, %o: memref<10xf32>,
                %t: memref<5x3xf64>, %n: memref<8xi32>, %s: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant -1.0 : f32
  %padd = arith.constant 0.5 : f64
  %v = vector.transfer_read %a[%c8], %pad : memref<10xf32>, vector<4xf32>
  %e = math.expm1 %v : vector<4xf32>
  vector.transfer_write %e, %o[%c8] : vector<4xf32>, memref<10xf32>
  %w = vector.load %a[%c2] : memref<10xf32>, vector<4xf32>
  %k = arith.constant dense<[1.5, -2.0, 0.25, 3.0]> : vector<4xf32>
  %f = math.fma %w, %k, %w : vector<4xf32>
  vector.store %f, %o[%c0] : memref<10xf32>, vector<4xf32>
  %tr = vector.transfer_read %m[%c0, %c1], %padd
      {permutation_map = affine_map<(d0, d1) -> (d1, d0)>} : memref<3x5xf64>, vector<5x3xf64>
  vector.transfer_write %tr, %t[%c0, %c0] : vector<5x3xf64>, memref<5x3xf64>
  %ni = vector.load %n[%c0] : memref<8xi32>, vector<8xi32>
  %three = arith.constant 3 : i32
  %b3 = vector.broadcast %three : i32 to vector<8xi32>
  %prod = arith.muli %ni, %b3 : vector<8xi32>
  %zero = arith.constant dense<0> : vector<8xi32>
  %pos = arith.maxsi %prod, %zero : vector<8xi32>
  vector.store %pos, %n[%c0] : memref<8xi32>, vector<8xi32>
  %sum = vector.reduction <add>, %w : vector<4xf32> into f32
  %mx = vector.reduction <maxsi>, %prod : vector<8xi32> into i32
  %mxf = arith.sitofp %mx : i32 to f32
  %x1 = vector.extract %w[1] : f32 from vector<4xf32>
  %i0 = vector.insert %sum, %k [0] : f32 into vector<4xf32>
  %i1 = vector.insert %mxf, %i0 [%c1] : f32 into vector<4xf32>
  %i2 = vector.insert %x1, %i1 [2] : f32 into vector<4xf32>
  vector.store %i2, %s[%c0] : memref<4xf32>, vector<4xf32>
  return
}
"""


def _f32_sum(values: np.ndarray) -> np.float32:
    total = values[0]
    for value in values[1:]:
        total = np.float32(total + value)
    return total


@needs_llvm
def test_vector_ops() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal(10).astype(np.float32)
    m = rng.standard_normal((3, 5))
    n = rng.integers(-100, 100, 8).astype(np.int32)
    inputs = [a, m, np.zeros(10, np.float32), np.zeros((5, 3)), n, np.zeros(4, np.float32)]
    native, interp = both(VECTORS, *inputs)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    o = np.zeros(10, np.float32)
    o[8:] = np.expm1(a[8:])  # the lanes past the end are padding, not written back
    k = np.array([1.5, -2.0, 0.25, 3.0], np.float32)
    w = a[2:6]
    o[:4] = (w.astype(np.float64) * k + w).astype(np.float32)  # fma: rounded once
    t = np.full((5, 3), 0.5)
    t[:4] = m[:, 1:].T
    s = np.array([_f32_sum(w), (n * 3).max(), w[1], k[3]], np.float32)
    for got, want in zip(interp, [a, m, o, t, np.maximum(n * 3, 0), s]):
        np.testing.assert_array_equal(got, want)


ROWS = """
func.func @main(%a: memref<8x8xf64>, %b: memref<8x8xf64>, %n: memref<3x4x5xi32>,
                %o: memref<3x4x5xi32>, %i: index, %j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %v = vector.load %a[%i, %j] : memref<8x8xf64>, vector<2x4xf64>
  %w = arith.addf %v, %v : vector<2x4xf64>
  vector.store %w, %b[%c1, %i] : memref<8x8xf64>, vector<2x4xf64>
  %x = vector.load %n[%c0, %c1, %c2] : memref<3x4x5xi32>, vector<3x2x3xi32>
  vector.store %x, %o[%c0, %c2, %c1] {nontemporal = true} : memref<3x4x5xi32>, vector<3x2x3xi32>
  %y = vector.load %n[%c2, %c0, %c1] : memref<3x4x5xi32>, vector<4x2xi32>
  %s = arith.muli %y, %y : vector<4x2xi32>
  vector.store %s, %o[%c1, %c0, %c0] : memref<3x4x5xi32>, vector<4x2xi32>
  return
}
"""


@needs_llvm
def test_n_d_vector_loads_and_stores() -> None:
    """MLIR 22 lowers only 1-D vector.load/store (dhir-vector-rows cuts the others)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((8, 8))
    n = rng.integers(-100, 100, (3, 4, 5)).astype(np.int32)
    inputs = [a, np.zeros((8, 8)), n, np.zeros((3, 4, 5), np.int32), 3, 2]
    native, interp = both(ROWS, *inputs)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    b = np.zeros((8, 8))
    b[1:3, 3:7] = 2 * a[3:5, 2:6]
    o = np.zeros((3, 4, 5), np.int32)
    o[0:3, 2:4, 1:4] = n[0:3, 1:3, 2:5]
    o[1, 0:4, 0:2] = n[2, 0:4, 1:3] ** 2
    np.testing.assert_array_equal(interp[1], b)
    np.testing.assert_array_equal(interp[3], o)


RUN_TIME_POSITIONS = """
func.func @main(%a: memref<3x2x4xf32>, %out: memref<3x2x4xf32>, %row: memref<4xf32>,
                %flat: memref<12xf64>, %sum: memref<3x4xf64>, %i: index, %j: index, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %a[%c0, %c0, %c0], %pad : memref<3x2x4xf32>, vector<3x2x4xf32>
  %r = vector.extract %v[%j, %i] : vector<4xf32> from vector<3x2x4xf32>
  %p = vector.extract %v[%i] : vector<2x4xf32> from vector<3x2x4xf32>
  %x = vector.extract %v[%j, %i, %k] : f32 from vector<3x2x4xf32>
  %w = vector.insert %r, %v[%i, %i] : vector<4xf32> into vector<3x2x4xf32>
  %w2 = vector.insert %p, %w[%j] : vector<2x4xf32> into vector<3x2x4xf32>
  %w3 = vector.insert %x, %w2[%k, %i, %j] : f32 into vector<3x2x4xf32>
  %r2 = vector.insert %x, %r[%k] : f32 into vector<4xf32>
  vector.transfer_write %w3, %out[%c0, %c0, %c0] : vector<3x2x4xf32>, memref<3x2x4xf32>
  vector.transfer_write %r2, %row[%c0] : vector<4xf32>, memref<4xf32>
  %d = memref.cast %flat : memref<12xf64> to memref<?xf64>
  %e = memref.expand_shape %d [[0, 1]] output_shape [%c3, %c4] : memref<?xf64> into memref<?x?xf64>
  %s = memref.subview %d[1] [%c6] [1] : memref<?xf64> to memref<?xf64, strided<[1], offset: 1>>
  %f = memref.expand_shape %s [[0, 1]] output_shape [%c2, %c3]
      : memref<?xf64, strided<[1], offset: 1>> into memref<?x?xf64, strided<[?, 1], offset: 1>>
  scf.for %m = %c0 to %c3 step %c1 {
    scf.for %n = %c0 to %c4 step %c1 {
      %y = memref.load %e[%m, %n] : memref<?x?xf64>
      %z = memref.load %f[%c1, %m] : memref<?x?xf64, strided<[?, 1], offset: 1>>
      %t = arith.addf %y, %z : f64
      memref.store %t, %sum[%m, %n] : memref<3x4xf64>
    }
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("i, j, k", [(0, 0, 0), (1, 2, 2), (1, 0, 1)])
def test_run_time_positions_and_expand_shapes_mlir_opt_crashes_on(i: int, j: int, k: int) -> None:
    """dhir-mlir22-workarounds: inserts and extracts at run-time positions in outer vector
    dimensions, and expand_shape with two run-time sizes in a group (mlir-opt-22 crashed
    on or left them)."""
    a = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    flat = np.arange(12.0)
    inputs = [a, np.zeros((3, 2, 4), np.float32), np.zeros(4, np.float32), flat]
    native, interp = both(RUN_TIME_POSITIONS, *inputs, np.zeros((3, 4)), i, j, k)
    for n, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {n}, native against the interpreter")
    want = a.copy()
    want[i, i] = a[j, i]
    want[j] = a[i]
    want[k, i, j] = a[j, i, k]
    row = a[j, i].copy()
    row[k] = a[j, i, k]
    np.testing.assert_array_equal(interp[1], want)
    np.testing.assert_array_equal(interp[2], row)
    np.testing.assert_array_equal(interp[4], flat.reshape(3, 4) + flat[4:7][:, None])


def test_unsupported_vector_ops_are_located_errors() -> None:
    out_of_bounds = """
func.func @main(%a: memref<8xf32>) {
  %c6 = arith.constant 6 : index
  %v = vector.load %a[%c6] : memref<8xf32>, vector<4xf32>
  vector.store %v, %a[%c6] : memref<8xf32>, vector<4xf32>
  return
}
"""
    with pytest.raises(dhir.DhirError, match=r"prog.mlir:4:\d+: error: 'vector.load' .*out of"):
        program = dhir.parse_string(out_of_bounds, "prog.mlir")
        dhir.run(program, np.zeros(8, np.float32), backend="interp")


# --- vectors of i1 in memory -------------------------------------------------------------

# A memref of i1 holds a byte per element; MLIR 22 loads and stores vector<Nxi1> as packed
# bits (dhir-packed-vectors makes them gathers and scatters).
BOOL_VECTORS = """
func.func @main(%a: memref<3x4xi1>, %b: memref<3x4xi1>, %c: memref<3x4xi1>, %d: memref<3x4xi1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %f = arith.constant false
  %v = vector.load %a[%c0, %c0] : memref<3x4xi1>, vector<4xi1>
  vector.store %v, %b[%c0, %c0] : memref<3x4xi1>, vector<4xi1>
  %w = vector.load %a[%c1, %c0] : memref<3x4xi1>, vector<2x4xi1>
  vector.store %w, %b[%c1, %c0] : memref<3x4xi1>, vector<2x4xi1>
  %r = vector.transfer_read %a[%c1, %c2], %f : memref<3x4xi1>, vector<4xi1>
  vector.transfer_write %r, %c[%c0, %c0] {in_bounds = [true]} : vector<4xi1>, memref<3x4xi1>
  %s = vector.transfer_read %a[%c2, %c0], %f {in_bounds = [true]} : memref<3x4xi1>, vector<4xi1>
  vector.transfer_write %s, %c[%c2, %c1] : vector<4xi1>, memref<3x4xi1>
  %y = affine.vector_load %a[2, 0] : memref<3x4xi1>, vector<4xi1>
  affine.vector_store %y, %d[2, 0] : memref<3x4xi1>, vector<4xi1>
  %m = arith.constant dense<[true, false, true, true]> : vector<4xi1>
  %t = arith.constant dense<true> : vector<4xi1>
  %x = vector.maskedload %a[%c1, %c0], %m, %t : memref<3x4xi1>, vector<4xi1>, vector<4xi1> into vector<4xi1>
  vector.maskedstore %d[%c0, %c0], %m, %x : memref<3x4xi1>, vector<4xi1>, vector<4xi1>
  return
}
"""


@needs_llvm
def test_vectors_of_i1_load_and_store_a_byte_per_element() -> None:
    a = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], bool)
    zeros = np.zeros((3, 4), bool)
    program = dhir.parse_string(BOOL_VECTORS, "prog.mlir")
    native = dhir.run(program, a, zeros, zeros, zeros, backend="native", ranks=1)
    c = zeros.copy()
    c[0, :2] = a[1, 2:]  # out of bounds: the padding, false
    c[2, 1:] = a[2, :3]
    d = zeros.copy()
    d[2] = a[2]
    masked = d.copy()
    masked[0] = [a[1, 0], False, a[1, 2], a[1, 3]]
    for got, want in zip(native, [a, a, c, masked], strict=True):
        np.testing.assert_array_equal(got, want)
    # The interpreter runs all but the masked ones.
    unmasked = BOOL_VECTORS.split("  %m = ")[0] + "  return\n}\n"
    interp = dhir.run(
        dhir.parse_string(unmasked, "prog.mlir"), a, zeros, zeros, zeros, backend="interp"
    )
    for got, want in zip(interp, [a, a, c, d], strict=True):
        np.testing.assert_array_equal(got, want)


# i4 and i24 elements take a byte and four in memory, but vectors of them pack tighter.
ODD_INTEGER_VECTORS = """
func.func @main(%o: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<4xi4>
  %b = memref.alloc() : memref<4xi24>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = arith.index_cast %i : index to i4
    %y = arith.addi %x, %x : i4
    memref.store %y, %a[%i] : memref<4xi4>
    %z = arith.index_cast %i : index to i24
    %w = arith.muli %z, %z : i24
    memref.store %w, %b[%i] : memref<4xi24>
  }
  %v = vector.load %a[%c0] : memref<4xi4>, vector<4xi4>
  %u = vector.load %b[%c0] : memref<4xi24>, vector<4xi24>
  %v2 = arith.addi %v, %v : vector<4xi4>
  %u2 = arith.addi %u, %u : vector<4xi24>
  vector.store %v2, %a[%c0] : memref<4xi4>, vector<4xi4>
  vector.store %u2, %b[%c0] : memref<4xi24>, vector<4xi24>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xi4>
    %xe = arith.extsi %x : i4 to i32
    memref.store %xe, %o[%i] : memref<8xi32>
    %y = memref.load %b[%i] : memref<4xi24>
    %ye = arith.extsi %y : i24 to i32
    %j = arith.addi %i, %c4 : index
    memref.store %ye, %o[%j] : memref<8xi32>
  }
  return
}
"""


@needs_llvm
def test_vectors_of_i4_and_i24_load_and_store_each_element() -> None:
    program = dhir.parse_string(ODD_INTEGER_VECTORS, "prog.mlir")
    (got,) = dhir.run(program, np.zeros(8, np.int32), backend="native")
    # 2 * (0, 2, 4, 6) wraps in i4; 2 * (0, 1, 4, 9) in i24 does not.
    np.testing.assert_array_equal(got, [0, 4, -8, -4, 0, 2, 8, 18])


def test_vector_ops_on_i1_the_native_backend_cannot_run_right_are_refused() -> None:
    text = """
func.func @main(%a: memref<2x4xi1>) {
  %c0 = arith.constant 0 : index
  %f = arith.constant false
  %v = vector.transfer_read %a[%c0, %c0], %f {permutation_map = affine_map<(d0, d1) -> (d0)>} : memref<2x4xi1>, vector<2xi1>
  vector.transfer_write %v, %a[%c0, %c0] : vector<2xi1>, memref<2x4xi1>
  return
}
"""
    with pytest.raises(
        dhir.DhirError, match=r"prog.mlir:5:\d+: error: 'vector.transfer_read' of a memref of i1"
    ):
        dhir.run(dhir.parse_string(text, "prog.mlir"), np.zeros((2, 4), bool), backend="native")
    scalable = """
func.func @main(%a: memref<8xi1>) {
  %c0 = arith.constant 0 : index
  %v = vector.load %a[%c0] : memref<8xi1>, vector<[4]xi1>
  vector.store %v, %a[%c0] : memref<8xi1>, vector<[4]xi1>
  return
}
"""
    with pytest.raises(dhir.DhirError, match=r"prog.mlir:4:\d+: error: 'vector.load' of a memref"):
        dhir.run(dhir.parse_string(scalable, "prog.mlir"), np.zeros(8, bool), backend="native")


I1_LANES = """
func.func @main(%a: memref<2x8xi1>, %o: memref<3x8xi1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %v = vector.load %a[%c1, %c0] : memref<2x8xi1>, vector<8xi1>
  %w = vector.load %a[%c0, %c0] : memref<2x8xi1>, vector<2x8xi1>
  vector.store %v, %o[%c0, %c0] : memref<3x8xi1>, vector<8xi1>
  %r = vector.extract %w[0] : vector<8xi1> from vector<2x8xi1>
  %x = arith.xori %r, %v : vector<8xi1>
  vector.store %x, %o[%c1, %c0] : memref<3x8xi1>, vector<8xi1>
  %n = arith.constant dense<true> : vector<8xi1>
  %y = arith.xori %r, %n : vector<8xi1>
  %t = vector.extract %y[5] : i1 from vector<8xi1>
  %s = vector.broadcast %t : i1 to vector<8xi1>
  %z = arith.andi %s, %v : vector<8xi1>
  vector.store %z, %o[%c2, %c0] : memref<3x8xi1>, vector<8xi1>
  return
}
"""


@needs_llvm
def test_vectors_of_i1_move_a_byte_per_lane() -> None:
    """LLVM packs <8 x i1> into bits: native code read the bits of the memref's first
    byte, where each element takes a byte."""
    a = np.array([[0, 1, 1, 0, 1, 0, 0, 1], [1, 1, 0, 1, 0, 0, 1, 0]], bool)
    native, interp = both(I1_LANES, a, np.zeros((3, 8), bool))
    np.testing.assert_array_equal(native[1], interp[1])
    np.testing.assert_array_equal(interp[1], [a[1], a[0] ^ a[1], a[1] & ~a[0][5]])


# --- bf16 ------------------------------------------------------------------------------

BF16 = """
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %n: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %t = memref.alloc() : memref<8xbf16>
  %third = arith.constant 0.333333 : bf16
  scf.for %k = %c0 to %c8 step %c1 {
    %x = memref.load %a[%k] : memref<8xf32>
    %y = arith.truncf %x : f32 to bf16
    %z = arith.mulf %y, %y : bf16
    %w = arith.addf %z, %third : bf16
    %d = arith.divf %w, %y : bf16
    %i = memref.load %n[%k] : memref<8xi32>
    %f = arith.sitofp %i : i32 to bf16
    %g = arith.subf %d, %f : bf16
    memref.store %g, %t[%k] : memref<8xbf16>
  }
  scf.for %k = %c0 to %c8 step %c1 {
    %w = memref.load %t[%k] : memref<8xbf16>
    %e = arith.extf %w : bf16 to f32
    memref.store %e, %b[%k] : memref<8xf32>
    %i = arith.fptosi %w : bf16 to i32
    memref.store %i, %n[%k] : memref<8xi32>
  }
  memref.dealloc %t : memref<8xbf16>
  return
}
"""


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 rounded to bf16 (nearest even), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return bits.view(np.float32)


@needs_llvm
def test_bf16_arithmetic() -> None:
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(8) * 3).astype(np.float32)
    n = rng.integers(-300, 300, 8).astype(np.int32)
    n[0] = 16777217  # rounds twice, through f32, as LLVM converts it
    native, interp = both(BF16, a, np.zeros(8, np.float32), n)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    y = _bf16(a)
    d = _bf16(_bf16(_bf16(y * y) + _bf16(np.array(0.333333, np.float32))) / y)
    g = _bf16(d - _bf16(n.astype(np.float32)))
    np.testing.assert_array_equal(interp[1], g)
    np.testing.assert_array_equal(interp[2], np.trunc(g).astype(np.int32))


F64_TO_BF16 = """
func.func @main(%a: memref<8xf64>, %o: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf64>
    %b = arith.truncf %x : f64 to bf16
    %y = arith.extf %b : bf16 to f32
    memref.store %y, %o[%i] : memref<8xf32>
  }
  return
}
"""


@needs_llvm
def test_f64_to_bf16_rounds_once() -> None:
    """1 + 2^-8 + 2^-30 is 1.0 through f32 (the tie 1 + 2^-8 rounds to even), 1 + 2^-7
    rounded once: the runtime's __truncdfbf2, which LLVM calls, and the interpreter."""
    a = np.array([1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8 + 2.0**-30), 1 + 2.0**-8, 3.4e38,
                  1e-39, -0.0, np.inf, 1.0 / 3.0])  # fmt: skip
    native, interp = both(F64_TO_BF16, a, np.zeros(8, np.float32))
    same_bits(native[1], interp[1], "native against the interpreter")
    want = np.array([1 + 2.0**-7, -(1 + 2.0**-7), 1.0, np.inf, 1e-39, -0.0, np.inf, 0.333984375])
    want[4] = np.float32(np.uint32(0x000B0000).view(np.float32))
    np.testing.assert_array_equal(interp[1], want.astype(np.float32))
    np.testing.assert_array_equal(np.signbit(interp[1]), np.signbit(want))


@needs_llvm
def test_f32_to_bf16_keeps_subnormals() -> None:
    """x86's bf16 conversion instructions flush subnormals to zero; dhir builds without
    them (on a CPU that lacks them, this passes either way)."""
    text = F64_TO_BF16.replace("memref<8xf64>", "memref<8xf32>").replace(
        ": f64 to bf16", ": f32 to bf16"
    )
    a = np.array([1e-39, -1e-39, 1e-45, 1.0, 3e-39, 5e-40, -0.0, 2.0], np.float32)
    native, interp = both(text, a, np.zeros(8, np.float32))
    same_bits(native[1], interp[1], "native against the interpreter")
    assert interp[1][0].view(np.uint32) == 0x000B0000


MINUS_ZEROS_SUMMED = """
func.func @main(%a: memref<4xf32>, %o: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = vector.load %a[%c0] : memref<4xf32>, vector<4xf32>
  %s = vector.reduction <add>, %v : vector<4xf32> into f32
  %m = vector.reduction <mul>, %v : vector<4xf32> into f32
  memref.store %s, %o[%c0] : memref<2xf32>
  memref.store %m, %o[%c1] : memref<2xf32>
  return
}
"""


@needs_llvm
def test_a_float_sum_of_a_vector_starts_from_plus_zero() -> None:
    """Without an accumulator MLIR's lowering adds the lanes to +0.0: -0.0 lanes sum to
    +0.0, in the interpreter as natively."""
    native, interp = both(MINUS_ZEROS_SUMMED, np.full(4, -0.0, np.float32), np.ones(2, np.float32))
    same_bits(native[1], interp[1], "native against the interpreter")
    assert not np.signbit(interp[1][0]) and interp[1][1] == 0.0


# --- linalg.reduce and views through extract_strided_metadata ----------------------------

REDUCE_AND_METADATA = """
func.func @main(%a: memref<4x6xf32>, %o: memref<4xf32>, %p: memref<6xf32>, %q: memref<3xf32>) {
  linalg.reduce ins(%a : memref<4x6xf32>) outs(%o : memref<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  linalg.reduce ins(%a : memref<4x6xf32>) outs(%p : memref<6xf32>) dimensions = [0]
    (%in: f32, %init: f32) {
      %s = arith.maximumf %in, %init : f32
      linalg.yield %s : f32
    }
  %sv = memref.subview %a[1, 2] [2, 3] [1, 1]
      : memref<4x6xf32> to memref<2x3xf32, strided<[6, 1], offset: 8>>
  %b, %off, %sz:2, %st:2 = memref.extract_strided_metadata %sv
      : memref<2x3xf32, strided<[6, 1], offset: 8>>
      -> memref<f32>, index, index, index, index, index
  %row = memref.reinterpret_cast %b to offset: [%off], sizes: [%sz#1], strides: [%st#1]
      : memref<f32> to memref<?xf32, strided<[?], offset: ?>>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %ten = arith.constant 10.0 : f32
  scf.for %i = %c0 to %c3 step %c1 {
    %x = memref.load %row[%i] : memref<?xf32, strided<[?], offset: ?>>
    %y = arith.addf %x, %ten : f32
    memref.store %y, %row[%i] : memref<?xf32, strided<[?], offset: ?>>
    memref.store %x, %q[%i] : memref<3xf32>
  }
  return
}
"""


@needs_llvm
def test_linalg_reduce_and_extract_strided_metadata() -> None:
    a = np.random.default_rng(7).standard_normal((4, 6)).astype(np.float32)
    o = np.random.default_rng(8).standard_normal(4).astype(np.float32)
    inputs = [a, o, np.full(6, -np.inf, np.float32), np.zeros(3, np.float32)]
    native, interp = both(REDUCE_AND_METADATA, *inputs)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    after = a.copy()
    after[1, 2:5] += np.float32(10)
    sums = np.array([_f32_sum(np.concatenate([[o[r]], a[r]])) for r in range(4)], np.float32)
    for got, want in zip(interp, [after, sums, a.max(axis=0), a[1, 2:5]]):
        np.testing.assert_array_equal(got, want)


# memref.reinterpret_cast of an unranked memref (of a subview: the cast's offset is from
# the allocation's start, not the subview's), in tasks on one rank and two.
UNRANKED_REINTERPRET_CAST = """
func.func @main(%a: memref<8xf32>, %o: memref<4xf32>) {
  dhir.schedule %a, %o {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %o {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %s = memref.subview %a[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
      %u = memref.cast %s : memref<4xf32, strided<[1], offset: 2>> to memref<*xf32>
      %v = memref.reinterpret_cast %u to offset: [%c1], sizes: [2, 2], strides: [%c3, 1]
          : memref<*xf32> to memref<2x2xf32, strided<[?, 1], offset: ?>>
      %x = memref.load %v[%c0, %c1] : memref<2x2xf32, strided<[?, 1], offset: ?>>
      %y = memref.load %v[%c1, %c1] : memref<2x2xf32, strided<[?, 1], offset: ?>>
      memref.store %x, %o[%c0] : memref<4xf32>
      memref.store %y, %o[%c1] : memref<4xf32>
    }
    %t1 = dhir.task %cpu, %a, %o {
      %u = memref.cast %a : memref<8xf32> to memref<*xf32>
      %w = memref.reinterpret_cast %u to offset: [4], sizes: [4], strides: [1]
          : memref<*xf32> to memref<4xf32, strided<[1], offset: 4>>
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %x = memref.load %w[%c3] : memref<4xf32, strided<[1], offset: 4>>
      memref.store %x, %o[%c2] : memref<4xf32>
    }
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_reinterpret_cast_of_an_unranked_memref(ranks: int) -> None:
    inputs = [np.arange(8, dtype=np.float32), np.zeros(4, np.float32)]
    interp = dhir.run(UNRANKED_REINTERPRET_CAST, *inputs, backend="interp")
    native = dhir.run(UNRANKED_REINTERPRET_CAST, *inputs, ranks=ranks, timeout=90)
    np.testing.assert_array_equal(interp[1], [2, 5, 7, 0])
    same_bits(native[1], interp[1], "native against the interpreter")


# Views of a memref with a layout map MLIR reads strides and an offset from (a subview,
# expand_shape and collapse_shape of it, loads through it), in tasks and in host code:
# dhir refused the reshapes, and took any subview result type.
MAP_VIEWS_IN_TASKS = """
#off = affine_map<(d0, d1) -> (d0 * 8 + d1 + 3)>
func.func @main(%a: memref<32xf32>, %o: memref<4xf32>) {
  dhir.schedule %a, %o {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %o {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %e = memref.expand_shape %a [[0, 1]] output_shape [4, 8] : memref<32xf32> into memref<4x8xf32>
      %s = memref.subview %e[0, 3] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 3>>
      %m = memref.cast %s : memref<4x4xf32, strided<[8, 1], offset: 3>> to memref<4x4xf32, #off>
      %s2 = memref.subview %m[1, 1] [2, 2] [1, 1] : memref<4x4xf32, #off> to memref<2x2xf32, strided<[8, 1], offset: 12>>
      %v0 = memref.load %s2[%c1, %c1] : memref<2x2xf32, strided<[8, 1], offset: 12>>
      memref.store %v0, %o[%c0] : memref<4xf32>
      %x = memref.expand_shape %m [[0], [1, 2]] output_shape [4, 2, 2] : memref<4x4xf32, #off> into memref<4x2x2xf32, strided<[8, 2, 1], offset: 3>>
      %v2 = memref.load %x[%c3, %c1, %c0] : memref<4x2x2xf32, strided<[8, 2, 1], offset: 3>>
      memref.store %v2, %o[%c1] : memref<4xf32>
    }
    %t1 = dhir.task %cpu, %a, %o {
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %e = memref.expand_shape %a [[0, 1]] output_shape [4, 8] : memref<32xf32> into memref<4x8xf32>
      %s = memref.subview %e[0, 3] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 3>>
      %m = memref.cast %s : memref<4x4xf32, strided<[8, 1], offset: 3>> to memref<4x4xf32, #off>
      %c = memref.collapse_shape %m [[0], [1]] : memref<4x4xf32, #off> into memref<4x4xf32, strided<[8, 1], offset: 3>>
      %v1 = memref.load %c[%c2, %c3] : memref<4x4xf32, strided<[8, 1], offset: 3>>
      memref.store %v1, %o[%c2] : memref<4xf32>
      %v3 = memref.load %m[%c3, %c3] : memref<4x4xf32, #off>
      memref.store %v3, %o[%c3] : memref<4xf32>
    }
  }
  return
}
"""

MAP_VIEWS_WITH_A_SYMBOL = """
#sym = affine_map<(d0, d1)[s0] -> (d0 * 8 + d1 + s0)>
func.func @main(%a: memref<32xf32>, %o: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %e = memref.expand_shape %a [[0, 1]] output_shape [4, 8] : memref<32xf32> into memref<4x8xf32>
  %s = memref.subview %e[0, %c3] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: ?>>
  %m = memref.cast %s : memref<4x4xf32, strided<[8, 1], offset: ?>> to memref<4x4xf32, #sym>
  %s2 = memref.subview %m[%c1, 1] [2, 2] [1, 1] : memref<4x4xf32, #sym> to memref<2x2xf32, strided<[8, 1], offset: ?>>
  %v0 = memref.load %s2[%c1, %c1] : memref<2x2xf32, strided<[8, 1], offset: ?>>
  memref.store %v0, %o[%c0] : memref<4xf32>
  %x = memref.expand_shape %m [[0], [1, 2]] output_shape [4, 2, 2] : memref<4x4xf32, #sym> into memref<4x2x2xf32, strided<[8, 2, 1], offset: ?>>
  %v2 = memref.load %x[%c3, %c1, %c0] : memref<4x2x2xf32, strided<[8, 2, 1], offset: ?>>
  memref.store %v2, %o[%c1] : memref<4xf32>
  %r = memref.subview %m[1, 0] [1, 4] [1, 1] : memref<4x4xf32, #sym> to memref<4xf32, strided<[1], offset: ?>>
  %v1 = memref.load %r[%c2] : memref<4xf32, strided<[1], offset: ?>>
  memref.store %v1, %o[%c2] : memref<4xf32>
  %v3 = memref.load %m[%c3, %c3] : memref<4x4xf32, #sym>
  memref.store %v3, %o[%c3] : memref<4xf32>
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("name", ["tasks", "symbol"])
def test_views_of_layout_maps(name: str, ranks: int) -> None:
    text = MAP_VIEWS_IN_TASKS if name == "tasks" else MAP_VIEWS_WITH_A_SYMBOL
    inputs = [np.arange(32, dtype=np.float32), np.zeros(4, np.float32)]
    interp = dhir.run(text, *inputs, backend="interp")
    native = dhir.run(text, *inputs, ranks=ranks, timeout=90)
    # Element (i, j) of the 4x4 view is element 8 i + j + 3 of the buffer.
    want = [21, 29, 22, 30] if name == "tasks" else [21, 29, 13, 30]
    np.testing.assert_array_equal(interp[1], want)
    same_bits(native[1], interp[1], "native against the interpreter")


F16_POWERS = """
func.func @main(%a: memref<8xf16>, %n: memref<8xi32>, %o: memref<8xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf16>
    %k = memref.load %n[%i] : memref<8xi32>
    %y = math.fpowi %x, %k : f16, i32
    memref.store %y, %o[%i] : memref<8xf16>
  }
  return
}
"""


@needs_llvm
def test_fpowi_on_f16_computes_in_f32_and_rounds_once() -> None:
    """LLVM promotes f16 to f32 for powi: 3.3 ** 4 is 118.6875, not 118.75 (each
    product rounded to f16)."""
    a = np.array([3.3, 3.3, -1.7, 0.9, 2.1, 7.7, 1.01, 0.5], np.float16)
    n = np.array([4, 7, 5, 11, -3, 3, 13, -9], np.int32)
    native, interp = both(F16_POWERS, a, n, np.zeros(8, np.float16))
    same_bits(native[2], interp[2], "native against the interpreter")
    assert interp[2][0] == np.float16(118.6875)


FPOWI = """
func.func @main(%a: memref<6xf64>, %n: memref<6xi64>, %m: memref<6xi16>, %o: memref<6xf64>,
                %p: memref<6xf32>) {
  %lo = arith.constant 0 : index
  %one = arith.constant 1 : index
  %hi = arith.constant 6 : index
  scf.for %i = %lo to %hi step %one {
    %x = memref.load %a[%i] : memref<6xf64>
    %y = memref.load %n[%i] : memref<6xi64>
    %z = math.fpowi %x, %y : f64, i64
    memref.store %z, %o[%i] : memref<6xf64>
    %s = arith.truncf %x : f64 to f32
    %k = memref.load %m[%i] : memref<6xi16>
    %t = math.fpowi %s, %k : f32, i16
    memref.store %t, %p[%i] : memref<6xf32>
  }
  return
}
"""


@needs_llvm
def test_fpowi_with_exponents_other_than_i32() -> None:
    # clang rejected both: LLVM's powi takes a C int.
    a = np.array([1.1, -2.5, 3.0, 0.999999, -1.0, 2.0])
    n = np.array([7, -3, 40, 5_000_000_000, 2**40 + 1, -1074], np.int64)
    m = np.array([7, -3, 40, 1000, -32768, 32767], np.int16)
    native, interp = both(FPOWI, a, n, m, np.zeros(6), np.zeros(6, np.float32))
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    with np.errstate(all="ignore"):
        within_ulps(interp[3], a ** n.astype(np.float64), 64, "fpowi f64, i64")
        want = (a.astype(np.float32).astype(np.float64) ** m).astype(np.float32)
    within_ulps(interp[4], want, 8, "fpowi f32, i16")


VECTOR_FPOWI = """
func.func @main(%a: memref<4xf32>, %m: memref<4xi16>, %p: memref<4xf32>) {
  %lo = arith.constant 0 : index
  %x = vector.load %a[%lo] : memref<4xf32>, vector<4xf32>
  %k = vector.load %m[%lo] : memref<4xi16>, vector<4xi16>
  %t = math.fpowi %x, %k : vector<4xf32>, vector<4xi16>
  vector.store %t, %p[%lo] : memref<4xf32>, vector<4xf32>
  return
}
"""


@needs_llvm
def test_fpowi_on_vectors_with_narrow_exponents() -> None:
    # dhir-accurate-math refused these: it widened the exponents of scalars only.
    a = np.array([1.1, -2.5, 3.0, 0.999999], np.float32)
    m = np.array([7, -3, 40, 1000], np.int16)
    native, interp = both(VECTOR_FPOWI, a, m, np.zeros(4, np.float32))
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    with np.errstate(all="ignore"):
        want = (a.astype(np.float64) ** m.astype(np.float64)).astype(np.float32)
    within_ulps(interp[2], want, 8, "fpowi vector<4xf32>, vector<4xi16>")


# --- integer min/max reductions on OpenMP ------------------------------------------------

MIN_MAX_REDUCTION = """
func.func @main(%a: memref<37xi32>, %out: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c37 = arith.constant 37 : index
  %i0 = arith.constant 0 : i32
  %r:4 = scf.parallel (%i) = (%c0) to (%c37) step (%c1)
      init (%i0, %i0, %i0, %i0) -> (i32, i32, i32, i32) {
    %v = memref.load %a[%i] : memref<37xi32>
    scf.reduce(%v, %v, %v, %v : i32, i32, i32, i32) {
    ^bb0(%x: i32, %y: i32):
      %m = arith.maxsi %x, %y : i32
      scf.reduce.return %m : i32
    }, {
    ^bb0(%x: i32, %y: i32):
      %m = arith.minsi %x, %y : i32
      scf.reduce.return %m : i32
    }, {
    ^bb0(%x: i32, %y: i32):
      %m = arith.maxui %x, %y : i32
      scf.reduce.return %m : i32
    }, {
    ^bb0(%x: i32, %y: i32):
      %m = arith.minui %x, %y : i32
      scf.reduce.return %m : i32
    }
  }
  memref.store %r#0, %out[%c0] : memref<4xi32>
  memref.store %r#1, %out[%c1] : memref<4xi32>
  memref.store %r#2, %out[%c2] : memref<4xi32>
  memref.store %r#3, %out[%c3] : memref<4xi32>
  return
}
"""


@needs_llvm
def test_integer_min_max_reductions_run_on_openmp() -> None:
    """MLIR 22's convert-scf-to-openmp stops on these (dhir-openmp-reductions)."""
    a = np.random.default_rng(5).integers(-1000, 1000, 37).astype(np.int32)
    module = dhir.parse_string(MIN_MAX_REDUCTION, "prog.mlir")
    native = dhir.run(module, a, np.zeros(4, np.int32), backend="native", threads=2, ranks=2)
    interp = dhir.run(
        dhir.parse_string(MIN_MAX_REDUCTION, "prog.mlir"),
        a,
        np.zeros(4, np.int32),
        backend="interp",
    )
    u = a.view(np.uint32)
    want = np.array([max(0, a.max()), min(0, a.min()), 0, 0], np.int32)
    want[2:] = np.array([u.max(), 0], np.uint32).view(np.int32)
    np.testing.assert_array_equal(native[1], want)
    np.testing.assert_array_equal(interp[1], want)


SIGNED_ZEROS = """
func.func @main(%a: memref<8xf64>, %b: memref<8xf64>, %hi: memref<8xf64>, %lo: memref<8xf64>,
                %vhi: memref<8xf32>, %vlo: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf64>
    %y = memref.load %b[%i] : memref<8xf64>
    %max = arith.maximumf %x, %y : f64
    %min = arith.minimumf %x, %y : f64
    memref.store %max, %hi[%i] : memref<8xf64>
    memref.store %min, %lo[%i] : memref<8xf64>
  }
  %v = vector.load %a[%c0] : memref<8xf64>, vector<8xf64>
  %w = vector.load %b[%c0] : memref<8xf64>, vector<8xf64>
  %v32 = arith.truncf %v : vector<8xf64> to vector<8xf32>
  %w32 = arith.truncf %w : vector<8xf64> to vector<8xf32>
  %vmax = arith.maximumf %v32, %w32 : vector<8xf32>
  %vmin = arith.minimumf %v32, %w32 : vector<8xf32>
  vector.store %vmax, %vhi[%c0] : memref<8xf32>, vector<8xf32>
  vector.store %vmin, %vlo[%c0] : memref<8xf32>, vector<8xf32>
  return
}
"""


@needs_llvm
def test_maximumf_and_minimumf_order_minus_zero_below_plus_zero() -> None:
    """MLIR 22's arith-expand gets this wrong (docs/upstream-bugs.md, 12)."""
    a = np.array([0.0, -0.0, -0.0, 0.0, np.nan, 1.0, -1.0, 2.0])
    b = np.array([-0.0, 0.0, -0.0, 0.0, 1.0, np.nan, -0.0, -3.0])
    zeros = [np.zeros(8), np.zeros(8), np.zeros(8, np.float32), np.zeros(8, np.float32)]
    native, interp = both(SIGNED_ZEROS, a, b, *zeros)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    hi, lo = np.fmax(a, b), np.fmin(a, b)
    hi[:2], lo[:2] = 0.0, -0.0
    hi[4:6] = lo[4:6] = np.nan
    for got, want in zip(interp[2:], [hi, lo, hi.astype(np.float32), lo.astype(np.float32)]):
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_equal(got, want)


NUMBER_ZEROS = """
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %hi: memref<8xf32>, %lo: memref<8xf32>,
                %vhi: memref<8xf32>, %vlo: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = memref.load %b[%i] : memref<8xf32>
    %h = arith.maxnumf %x, %y : f32
    %l = arith.minnumf %x, %y : f32
    memref.store %h, %hi[%i] : memref<8xf32>
    memref.store %l, %lo[%i] : memref<8xf32>
  }
  %x = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
  %y = vector.load %b[%c0] : memref<8xf32>, vector<8xf32>
  %h = arith.maxnumf %x, %y : vector<8xf32>
  %l = arith.minnumf %x, %y : vector<8xf32>
  vector.store %h, %vhi[%c0] : memref<8xf32>, vector<8xf32>
  vector.store %l, %vlo[%c0] : memref<8xf32>, vector<8xf32>
  return
}
"""


@needs_llvm
def test_maxnumf_and_minnumf_order_minus_zero_below_plus_zero() -> None:
    """llvm.maxnum may give either zero of opposite signs: x86 code gave the first operand
    (maxnumf(-0.0, 0.0) was -0.0), the interpreter +0.0."""
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0, np.nan, -2.0], np.float32)
    b = np.array([0.0, -0.0, -0.0, 0.0, -0.0, np.nan, np.nan, 3.0], np.float32)
    zeros = [np.zeros(8, np.float32) for _ in range(4)]
    native, interp = both(NUMBER_ZEROS, a, b, *zeros)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    hi, lo = np.fmax(a, b), np.fmin(a, b)
    hi[:2], lo[:2] = 0.0, -0.0
    for got, want in zip(interp[2:], [hi, lo, hi, lo]):
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_equal(got, want)


ATAN2_OF_ZEROS = """
func.func @main(%o: memref<4xT>) {
  %p = arith.constant 0.0 : T
  %m = arith.constant -0.0 : T
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %a = math.atan2 %p, %m : T
  %b = math.atan2 %m, %m : T
  %c = math.atan2 %p, %p : T
  %d = math.atan2 %m, %p : T
  memref.store %a, %o[%c0] : memref<4xT>
  memref.store %b, %o[%c1] : memref<4xT>
  memref.store %c, %o[%c2] : memref<4xT>
  memref.store %d, %o[%c3] : memref<4xT>
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("type_", ["f16", "f32", "f64"])
def test_atan2_of_constant_zeros_is_c_s(type_: str) -> None:
    """MLIR 22 folds atan2 of two constant zeros to NaN; C gives +-pi or +-0."""
    dtype = DTYPES[type_]
    native, interp = both(ATAN2_OF_ZEROS.replace("T", type_), np.zeros(4, dtype))
    same_bits(native[0], interp[0], "native against the interpreter")
    want = np.arctan2(np.array([0.0, -0.0, 0.0, -0.0]), np.array([-0.0, -0.0, 0.0, 0.0]))
    same_bits(interp[0], want.astype(dtype), "the interpreter against NumPy")


def _f64_bits(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint64).view(np.float64)


@needs_llvm
@pytest.mark.parametrize(
    "a, b",
    [
        # quiet and signalling NaNs of both signs, against each other and numbers
        ((0x7FF8 << 48, 0x7FF8 << 48 | 0x1234), (0xFFF8 << 48 | 0x5678, 0x7FF0 << 48 | 1)),
        ((0xFFF8 << 48 | 0x5678, 0x7FF8 << 48 | 0x1234), (0x7FF8 << 48, 0xFFF0 << 48 | 0x4321)),
        ((0x7FF8 << 48 | 9 << 32, 0x3FF0 << 48), (0xBFF0 << 48, 0xFFF8 << 48 | 7 << 32)),
    ],
)
def test_maximumf_and_minimumf_pick_the_nan_native_code_picks(
    a: tuple[int, int], b: tuple[int, int]
) -> None:
    """Of two NaNs, the interpreter gave the first; x86 code gives the first or the second
    by the first operand's sign."""
    x = _f64_bits(*a, *b, *b, *a)
    y = _f64_bits(*b, *a, *a[::-1], *b[::-1])
    zeros = [np.zeros(8), np.zeros(8), np.zeros(8, np.float32), np.zeros(8, np.float32)]
    native, interp = both(SIGNED_ZEROS, x, y, *zeros)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        np.testing.assert_array_equal(
            got.view(f"u{got.itemsize}"), oracle.view(f"u{got.itemsize}"), f"argument {k}"
        )


LIBRARY_NAMES = """
func.func private @exp(%x: f64) -> f64 {
  %one = arith.constant 1.0 : f64
  %y = arith.addf %x, %one : f64
  return %y : f64
}
func.func @write(%m: memref<4xf64>, %i: index) {
  %v = arith.constant 42.0 : f64
  memref.store %v, %m[%i] : memref<4xf64>
  return
}
func.func @main(%a: memref<4xf64>, %e: memref<4xf64>, %p: memref<4xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %a[%i] : memref<4xf64>
    %x = math.exp %v : f64
    memref.store %x, %e[%i] : memref<4xf64>
    %y = func.call @exp(%v) : (f64) -> f64
    memref.store %y, %p[%i] : memref<4xf64>
  }
  func.call @write(%a, %c1) : (memref<4xf64>, index) -> ()
  return
}
"""


@needs_llvm
def test_functions_named_as_library_ones_do_not_replace_them() -> None:
    """math.exp called the program's own @exp, and MPI's calls of write(2) reached the
    program's @write (the run hung)."""
    a = np.array([0.0, 1.0, 2.0, -1.0])
    inputs = [a, np.zeros(4), np.zeros(4)]
    native = dhir.run(dhir.parse_string(LIBRARY_NAMES), *inputs, ranks=2, timeout=60)
    interp = dhir.run(dhir.parse_string(LIBRARY_NAMES), *inputs, backend="interp")
    for k, (got, oracle) in enumerate(zip(native, interp)):
        same_bits(got, oracle, f"argument {k}, native against the interpreter")
    np.testing.assert_array_equal(interp[0], [0.0, 42.0, 2.0, -1.0])
    np.testing.assert_array_equal(interp[2], a + 1.0)
    within_ulps(interp[1], np.exp(a), 1, "math.exp")


INDEX_SWITCH = """
func.func @main(%s: memref<6xindex>, %o: memref<6xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %k = memref.load %s[%i] : memref<6xindex>
    %r = scf.index_switch %k -> i32
    case 4294967296 {
      %a = arith.constant 1 : i32
      scf.yield %a : i32
    }
    case 9223372036854775807 {
      %b = arith.constant 2 : i32
      scf.yield %b : i32
    }
    case -1 {
      %c = arith.constant 3 : i32
      scf.yield %c : i32
    }
    default {
      %d = arith.constant 4 : i32
      scf.yield %d : i32
    }
    memref.store %r, %o[%i] : memref<6xi32>
  }
  return
}
"""


@needs_llvm
def test_index_switch_compares_the_whole_index() -> None:
    """MLIR 22 switched on the low 32 bits: 0 took case 4294967296, and cases 2^63 - 1
    and -1 (equal there) made an invalid switch."""
    keys = np.array([0, 4294967296, 2**63 - 1, -1, 4294967295, 7], np.int64)
    native, interp = both(INDEX_SWITCH, keys, np.zeros(6, np.int32))
    same_bits(native[1], interp[1], "native against the interpreter")
    np.testing.assert_array_equal(interp[1], [4, 1, 2, 3, 4, 4])


def _remf_sincos_program(type_: str, n: int) -> str:
    m = f"memref<{n}x{type_}>"
    return f"""
func.func @main(%a: {m}, %b: {m}, %r: {m}, %s: {m}, %c: {m}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {n} : index
  scf.for %i = %c0 to %n step %c1 {{
    %x = memref.load %a[%i] : {m}
    %y = memref.load %b[%i] : {m}
    %q = arith.remf %x, %y : {type_}
    memref.store %q, %r[%i] : {m}
    %sn, %cs = math.sincos %x : {type_}
    memref.store %sn, %s[%i] : {m}
    memref.store %cs, %c[%i] : {m}
  }}
  return
}}
"""


@needs_llvm
@pytest.mark.parametrize("type_", ["f16", "f32", "f64"])
def test_remf_and_sincos(type_: str) -> None:
    """The interpreter refused both; it now computes them as native code does (fmod; libm's
    sin and cos)."""
    dtype = DTYPES[type_]
    a = np.array([5.5, -5.5, 5.5, -0.0, 1000.0, 3.0, math.inf, 7.0, math.nan, -4.0], dtype)
    b = np.array([2.0, 2.0, -2.0, 1.0, 3.0, 0.0, 2.0, math.inf, 1.0, 2.0], dtype)
    zeros = [np.zeros(len(a), dtype) for _ in range(3)]
    native, interp = both(_remf_sincos_program(type_, len(a)), a, b, *zeros)
    for k in (2, 3, 4):
        same_bits(native[k], interp[k], f"{type_} result {k}, native against the interpreter")
    with np.errstate(invalid="ignore"):  # fmod(inf, 2), fmod(3, 0), sin(inf): NaN
        np.testing.assert_array_equal(interp[2], np.fmod(a, b))
        within_ulps(interp[3], np.sin(a), 1, "sin")


BROADCASTS = """
func.func @main(%a: memref<4xf32>, %b: memref<3x4xf32>, %c: memref<4x3xf32>, %d: memref<2x4x3xf32>) {
  linalg.broadcast ins(%a : memref<4xf32>) outs(%b : memref<3x4xf32>) dimensions = [0]
  linalg.broadcast ins(%a : memref<4xf32>) outs(%c : memref<4x3xf32>) dimensions = [1]
  linalg.broadcast ins(%a : memref<4xf32>) outs(%d : memref<2x4x3xf32>) dimensions = [0, 2]
  return
}
"""


@needs_llvm
def test_linalg_broadcast() -> None:
    """The interpreter refused linalg.broadcast."""
    a = np.array([1.5, -2.0, 0.25, 8.0], np.float32)
    outs = [np.zeros(s, np.float32) for s in ((3, 4), (4, 3), (2, 4, 3))]
    native, interp = both(BROADCASTS, a, *outs)
    for k in (1, 2, 3):
        same_bits(native[k], interp[k], f"result {k}, native against the interpreter")
    np.testing.assert_array_equal(interp[1], np.broadcast_to(a, (3, 4)))
    np.testing.assert_array_equal(interp[2], np.broadcast_to(a[:, None], (4, 3)))
    np.testing.assert_array_equal(interp[3], np.broadcast_to(a[None, :, None], (2, 4, 3)))


@needs_llvm
@pytest.mark.parametrize("value", [-math.nan, math.nan, -0.0, -math.inf])
def test_a_scalar_argument_keeps_its_sign(value: float) -> None:
    """Native runs took every NaN argument as +NaN (float.hex writes "nan")."""
    text = (
        "func.func @main(%s: f64, %o: memref<1xf64>) {\n  %c0 = arith.constant 0 : index\n"
        "  %one = arith.constant 1.0 : f64\n  %r = math.copysign %one, %s : f64\n"
        "  memref.store %r, %o[%c0] : memref<1xf64>\n  return\n}\n"
    )
    native, interp = both(text, value, np.zeros(1))
    same_bits(native[1], interp[1], "native against the interpreter")
    assert interp[1][0] == math.copysign(1.0, value)


@needs_llvm
@pytest.mark.parametrize("width", [129, 264])
def test_memrefs_of_integers_wider_than_i128_are_refused(width: int) -> None:
    """They crashed at run time (MLIR 22 and LLVM lay them out at different strides)."""
    text = (
        "func.func @main(%out: memref<2xi32>) {\n"
        f"  %w = memref.alloc() : memref<2xi{width}>\n  %c0 = arith.constant 0 : index\n"
        f"  %x = memref.load %w[%c0] : memref<2xi{width}>\n"
        f"  %y = arith.trunci %x : i{width} to i32\n"
        "  memref.store %y, %out[%c0] : memref<2xi32>\n  return\n}\n"
    )
    module = dhir.parse_string(text, "wide.mlir")
    with pytest.raises(dhir.DhirError, match=f"wide.mlir:2:8: .*memrefs of i{width} are not"):
        dhir.run(module, np.zeros(2, np.int32), backend="native", ranks=1)


def _fpowi_program(type_: str, exponent: str, constant: int | None) -> str:
    """x ** n in `type_` for each f32 x (rounded to `type_` first), stored back as f32."""
    power = (
        f"  %n = arith.constant {constant} : {exponent}\n"
        if constant is not None
        else f"  %n = memref.load %e[%c0] : memref<1x{exponent}>\n"
    )
    return (
        f"func.func @main(%x: memref<4xf32>, %e: memref<1x{exponent}>, %o: memref<4xf32>) {{\n"
        "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
        f"  %c4 = arith.constant 4 : index\n{power}"
        "  scf.for %i = %c0 to %c4 step %c1 {\n"
        "    %w = memref.load %x[%i] : memref<4xf32>\n"
        f"    %a = arith.truncf %w : f32 to {type_}\n"
        f"    %r = math.fpowi %a, %n : {type_}, {exponent}\n"
        f"    %s = arith.extf %r : {type_} to f32\n"
        "    memref.store %s, %o[%i] : memref<4xf32>\n  }\n  return\n}\n"
    )


@needs_llvm
@pytest.mark.parametrize("type_", ["f16", "bf16"])
@pytest.mark.parametrize(
    ("exponent", "constant", "power"),
    [("i32", -2, -2), ("i16", -2, -2), ("i64", None, 1000), ("i32", None, 37)],
)
def test_half_precision_fpowi_is_computed_in_f32(
    type_: str, exponent: str, constant: int | None, power: int
) -> None:
    """LLVM expanded a constant exponent into half-precision products (300^-2 gave 0), and
    convert-math-to-funcs ran i64 exponents in half precision: native differed from the
    interpreter, which computes in f32 and rounds once."""
    x = np.array([300.0, 1.0009766, 9344.0, -1.5], np.float32)
    given = np.array([power], {"i16": np.int16, "i32": np.int32, "i64": np.int64}[exponent])
    native, interp = both(
        _fpowi_program(type_, exponent, constant), x, given, np.zeros(4, np.float32)
    )
    same_bits(native[2], interp[2], f"{type_} ** {power} ({exponent}): native, interpreter")


SHUFFLES = """
func.func @main(%a: memref<4xi32>, %b: memref<2x3xf32>, %o: memref<4xi32>, %p: memref<3x3xf32>) {
  %c0 = arith.constant 0 : index
  %zi = arith.constant 0 : i32
  %zf = arith.constant 0.0 : f32
  %v = vector.transfer_read %a[%c0], %zi : memref<4xi32>, vector<4xi32>
  %s = vector.shuffle %v, %v [3, 6, 1, 4] : vector<4xi32>, vector<4xi32>
  vector.transfer_write %s, %o[%c0] : vector<4xi32>, memref<4xi32>
  %m = vector.transfer_read %b[%c0, %c0], %zf : memref<2x3xf32>, vector<2x3xf32>
  %t = vector.shuffle %m, %m [1, 2, 0] : vector<2x3xf32>, vector<2x3xf32>
  vector.transfer_write %t, %p[%c0, %c0] : vector<3x3xf32>, memref<3x3xf32>
  return
}
"""


@needs_llvm
def test_vector_shuffle() -> None:
    """The interpreter refused vector.shuffle."""
    a = np.array([1, 2, 3, 4], np.int32)
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    native, interp = both(SHUFFLES, a, b, np.zeros(4, np.int32), np.zeros((3, 3), np.float32))
    for k in (2, 3):
        same_bits(native[k], interp[k], f"result {k}, native against the interpreter")
    np.testing.assert_array_equal(interp[2], [4, 3, 2, 1])
    np.testing.assert_array_equal(interp[3], np.concatenate([b, b])[[1, 2, 0]])


BF16_BITS = """
func.func @main(%a: memref<4xf32>, %bits: memref<4xi16>, %back: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    %h = arith.truncf %x : f32 to bf16
    %b = arith.bitcast %h : bf16 to i16
    memref.store %b, %bits[%i] : memref<4xi16>
    %one = arith.constant 1 : i16
    %n = arith.addi %b, %one : i16
    %g = arith.bitcast %n : i16 to bf16
    %y = arith.extf %g : bf16 to f32
    memref.store %y, %back[%i] : memref<4xf32>
  }
  return
}
"""


@needs_llvm
def test_bf16_bitcasts() -> None:
    """The interpreter could not reinterpret bf16."""
    a = np.array([1.0, -2.5, 3.0e38, 1.0e-40], np.float32)
    native, interp = both(BF16_BITS, a, np.zeros(4, np.int16), np.zeros(4, np.float32))
    for k in (1, 2):
        same_bits(native[k], interp[k], f"result {k}, native against the interpreter")
    np.testing.assert_array_equal(interp[1].view(np.uint16), _bf16(a).view(np.uint32) >> 16)


@needs_llvm
def test_a_traffic_report_setting_other_than_1_or_0_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Any value but "" and "0" turned the report on, "false" and "no" too.
    monkeypatch.setenv("DHIR_RT_STATS", "false")
    text = "func.func @main(%a: memref<2xf32>) {\n  return\n}\n"
    with pytest.raises(dhir.DhirError, match="DHIR_RT_STATS is 'false'; it takes 1"):
        dhir.run(dhir.parse_string(text), np.zeros(2, np.float32), ranks=1)


NAN_BITS = """
func.func @main(%a: memref<3xf64>, %b: memref<3xf64>, %d: memref<3xf64>, %m: memref<3xf64>,
                %r: memref<3xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    %x = memref.load %a[%i] : memref<3xf64>
    %y = memref.load %b[%i] : memref<3xf64>
    %q = arith.divf %x, %y : f64
    memref.store %q, %d[%i] : memref<3xf64>
    %n = arith.maximumf %x, %y : f64
    memref.store %n, %m[%i] : memref<3xf64>
    %e = arith.remf %x, %y : f64
    memref.store %e, %r[%i] : memref<3xf64>
  }
  return
}
"""


SIGNALLING = """
func.func @main(%s: memref<4xi32>, %h: memref<4xi16>, %b: memref<4xi16>, %d: memref<4xi64>,
                %o: memref<5x4xi32>, %oh: memref<5x4xi16>, %ob: memref<4x4xi16>,
                %od: memref<3x4xi64>, %z: memref<1xf32>, %n: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zero = memref.load %z[%c0] : memref<1xf32>
  %one = memref.load %n[%c0] : memref<1xi32>
  %sn = arith.constant 0x7F800001 : f32
  %hn = arith.constant 1.0 : f16
  %bn = arith.constant 1.0 : bf16
  %bz = arith.truncf %zero : f32 to bf16
  scf.for %i = %c0 to %c4 step %c1 {
    %si = memref.load %s[%i] : memref<4xi32>
    %x = arith.bitcast %si : i32 to f32
    %p = math.powf %x, %zero : f32
    %q = math.fpowi %x, %one : f32, i32
    %e = arith.extf %x : f32 to f64
    %hi = memref.load %h[%i] : memref<4xi16>
    %hx = arith.bitcast %hi : i16 to f16
    %hm = arith.maximumf %hx, %hn : f16
    %hl = arith.minimumf %hn, %hx : f16
    %hc = math.clampf %hx to [%hn, %hn] : f16
    %he = arith.extf %hx : f16 to f64
    %hq = math.fpowi %hx, %one : f16, i32
    %bi = memref.load %b[%i] : memref<4xi16>
    %bx = arith.bitcast %bi : i16 to bf16
    %bm = arith.maximumf %bx, %bn : bf16
    %bp = math.powf %bx, %bz : bf16
    %bq = math.fpowi %bx, %one : bf16, i32
    %be = arith.extf %bx : bf16 to f32
    %di = memref.load %d[%i] : memref<4xi64>
    %dx = arith.bitcast %di : i64 to f64
    %dq = math.fpowi %dx, %one : f64, i32
    %dh = arith.truncf %dx : f64 to f16
    %t = arith.truncf %dx : f64 to f32
    %r0 = arith.bitcast %p : f32 to i32
    %r1 = arith.bitcast %q : f32 to i32
    %r2 = arith.bitcast %t : f32 to i32
    %r3 = arith.bitcast %sn : f32 to i32
    %r4 = arith.bitcast %be : f32 to i32
    memref.store %r0, %o[%c0, %i] : memref<5x4xi32>
    memref.store %r1, %o[%c1, %i] : memref<5x4xi32>
    memref.store %r2, %o[%c2, %i] : memref<5x4xi32>
    memref.store %r3, %o[%c3, %i] : memref<5x4xi32>
    memref.store %r4, %o[%c4, %i] : memref<5x4xi32>
    %h0 = arith.bitcast %hm : f16 to i16
    %h1 = arith.bitcast %hl : f16 to i16
    %h2 = arith.bitcast %hc : f16 to i16
    %h3 = arith.bitcast %hq : f16 to i16
    %h4 = arith.bitcast %dh : f16 to i16
    memref.store %h0, %oh[%c0, %i] : memref<5x4xi16>
    memref.store %h1, %oh[%c1, %i] : memref<5x4xi16>
    memref.store %h2, %oh[%c2, %i] : memref<5x4xi16>
    memref.store %h3, %oh[%c3, %i] : memref<5x4xi16>
    memref.store %h4, %oh[%c4, %i] : memref<5x4xi16>
    %b0 = arith.bitcast %bm : bf16 to i16
    %b1 = arith.bitcast %bp : bf16 to i16
    %b2 = arith.bitcast %bq : bf16 to i16
    %b3 = arith.bitcast %bx : bf16 to i16
    memref.store %b0, %ob[%c0, %i] : memref<4x4xi16>
    memref.store %b1, %ob[%c1, %i] : memref<4x4xi16>
    memref.store %b2, %ob[%c2, %i] : memref<4x4xi16>
    memref.store %b3, %ob[%c3, %i] : memref<4x4xi16>
    %d0 = arith.bitcast %dq : f64 to i64
    %d1 = arith.bitcast %he : f64 to i64
    memref.store %d0, %od[%c0, %i] : memref<3x4xi64>
    memref.store %d1, %od[%c1, %i] : memref<3x4xi64>
    %d2 = arith.bitcast %e : f64 to i64
    memref.store %d2, %od[%c2, %i] : memref<3x4xi64>
  }
  return
}
"""


@needs_llvm
def test_signalling_nans_have_the_bits_native_code_gives_them() -> None:
    # Where conversions run natively (f16 computed in f32, the truncation of a bf16
    # result, f64 to f16) a signalling NaN is quieted; where bits move (fpowi to the
    # power 1, libgcc's powi; a constant; bf16 to f32) it is kept; and the C library's
    # powf(sNaN, 0) is NaN, where of the NaN ctypes made of it, 1. The exponents are read
    # at run time: LLVM folds pow(x, 0.0) to 1 and powi(x, 1) to x.
    s = np.array([0x7F800001, 0xFF800003, 0x7FC00005, 0x3F800000], np.uint32)
    h = np.array([0x7C01, 0xFC03, 0x7E05, 0x3C00], np.uint16)
    b = np.array([0x7F81, 0xFF83, 0x7FC5, 0x3F80], np.uint16)
    d = np.array([0x7FF0000000000001, 0x7FF0000020000000, 0xFFF8000000000005, 0], np.uint64)
    outs = (np.zeros((5, 4), np.int32), np.zeros((5, 4), np.int16),
            np.zeros((4, 4), np.int16), np.zeros((3, 4), np.int64))  # fmt: skip
    native, interp = both(SIGNALLING, s.view(np.int32), h.view(np.int16), b.view(np.int16),
                          d.view(np.int64), *outs, np.zeros(1, np.float32),
                          np.ones(1, np.int32))  # fmt: skip
    for k in range(4, 8):
        same_bits(native[k].view(f"u{native[k].itemsize}"), interp[k].view(f"u{interp[k].itemsize}"),
                  f"output {k}")  # fmt: skip
    assert native[4][1, 0].view(np.uint32) == 0x7F800001  # fpowi(sNaN, 1) kept
    assert native[4][0, 0].view(np.uint32) == 0x7FC00001  # powf(sNaN, 0) is NaN


@needs_llvm
def test_nans_have_the_bits_native_code_gives_them() -> None:
    """0/0 and fmod(x, 0) are the hardware's default NaN (x86: sign bit set), and
    maximumf gives its NaN operand; the interpreter gave +NaN (fuzzer)."""
    payload = np.array([0xFFF0000000000123], np.uint64).view(np.float64)[0]
    a = np.array([0.0, payload, 5.0])
    b = np.array([0.0, 2.0, 0.0])
    zeros = [np.zeros(3) for _ in range(3)]
    native, interp = both(NAN_BITS, a, b, *zeros)
    for k in (2, 3, 4):
        assert native[k].view(np.uint64).tolist() == interp[k].view(np.uint64).tolist(), k


def _reduction_program(loop: str, op: str) -> str:
    one = "0.0" if op == "addf" else "1.0"
    loops = {
        "affine.parallel": f"""
  %s = affine.parallel (%i) = (0) to (16) reduce ("{op}") -> f32 {{
    %v = affine.load %a[%i] : memref<16xf32>
    affine.yield %v : f32
  }}""",
        "affine.for": f"""
  %z = arith.constant {one} : f32
  %s = affine.for %i = 0 to 16 iter_args(%acc = %z) -> (f32) {{
    %v = affine.load %a[%i] : memref<16xf32>
    %n = arith.{op} %acc, %v : f32
    affine.yield %n : f32
  }}""",
        "scf.parallel": f"""
  %z = arith.constant {one} : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %s = scf.parallel (%i) = (%c0) to (%c16) step (%c1) init (%z) -> f32 {{
    %v = memref.load %a[%i] : memref<16xf32>
    scf.reduce(%v : f32) {{
    ^bb0(%x: f32, %y: f32):
      %n = arith.{op} %x, %y : f32
      scf.reduce.return %n : f32
    }}
  }}""",
    }
    return f"""
func.func @main(%a: memref<16xf32>, %r: memref<1xf32>) {{{loops[loop]}
  affine.store %s, %r[0] : memref<1xf32>
  return
}}
"""


@needs_llvm
@pytest.mark.parametrize("loop", ["affine.parallel", "affine.for", "scf.parallel"])
@pytest.mark.parametrize("op", ["addf", "mulf"])
def test_float_reductions_keep_the_accumulators_nan(loop: str, op: str) -> None:
    """Of two NaNs, x86 code keeps the first operand's, the accumulator's; the
    interpreter's reductions (Python's + and *) took the new value's."""
    bits = [0x3F800000, *(0x7FC00000 | k for k in range(1, 15)), 0xFFC00099]
    a = np.array(bits, np.uint32).view(np.float32)
    native, interp = both(_reduction_program(loop, op), a, np.zeros(1, np.float32))
    assert native[1].view(np.uint32)[0] == 0x7FC00001
    np.testing.assert_array_equal(interp[1].view(np.uint32), native[1].view(np.uint32))


AFFINE_INDEX_OPS = """
func.func @main(%a: memref<4x8xi32>, %n: memref<1xindex>, %o: memref<24x8xindex>,
                %v: memref<4x8xi32>) {
  %c0 = arith.constant 0 : index
  %k = memref.load %n[%c0] : memref<1xindex>
  affine.for %i = -3 to 21 {
    %m = affine.max affine_map<(d0)[s0] -> (d0 - 3, 0, s0 - d0)>(%i)[%k]
    %q:3 = affine.delinearize_index %i into (2, %k, 3) : index, index, index
    %p:3 = affine.delinearize_index %i into (%k, 3) : index, index, index
    %l = affine.linearize_index [%q#2, %q#1, %q#0] by (3, %k, 2) : index
    %l2 = affine.linearize_index disjoint [%p#0, %p#2] by (5) : index
    affine.store %m, %o[%i + 3, 0] : memref<24x8xindex>
    affine.store %q#0, %o[%i + 3, 1] : memref<24x8xindex>
    affine.store %q#1, %o[%i + 3, 2] : memref<24x8xindex>
    affine.store %q#2, %o[%i + 3, 3] : memref<24x8xindex>
    affine.store %p#0, %o[%i + 3, 4] : memref<24x8xindex>
    affine.store %p#1, %o[%i + 3, 5] : memref<24x8xindex>
    affine.store %l, %o[%i + 3, 6] : memref<24x8xindex>
    affine.store %l2, %o[%i + 3, 7] : memref<24x8xindex>
  }
  affine.for %i = 0 to 4 {
    %x = affine.vector_load %a[%i, symbol(%k) - 2] : memref<4x8xi32>, vector<4xi32>
    affine.vector_store %x, %v[3 - %i, 4] : memref<4x8xi32>, vector<4xi32>
  }
  return
}
"""


@needs_llvm
def test_affine_index_ops_and_vector_accesses() -> None:
    """The interpreter refused affine.max, delinearize_index, linearize_index and
    vector_load/store, which dhir parses and runs natively."""
    a = np.arange(32, dtype=np.int32).reshape(4, 8)
    inputs = [a, np.array([4], np.intp), np.zeros((24, 8), np.intp), np.zeros((4, 8), np.int32)]
    native, interp = both(AFFINE_INDEX_OPS, *inputs)
    for k, (got, oracle) in enumerate(zip(native, interp)):
        np.testing.assert_array_equal(got, oracle, f"argument {k}")
    np.testing.assert_array_equal(interp[3][3 - np.arange(4), 4:], a[:, 2:6])


EMPTY_OUTER_LOOP = """
func.func @main(%a: memref<8xf32>, %r: memref<1xindex>) {
  dhir.schedule %a, %r {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %r {
      %s = arith.constant 2 : index
      affine.for %i = 2 to 2 {
        affine.for %j = max affine_map<(d0)[s0] -> (d0 mod 3, s0)>(%i)[%s] to 8 {
          %c = arith.constant 1.5 : f32
          affine.store %c, %a[%j] : memref<8xf32>
        }
      }
      %n = affine.for %i = 5 to 2 iter_args(%acc = %s) -> (index) {
        %m = affine.for %j = max affine_map<(d0) -> (d0, 1)>(%i) to 8 iter_args(%b = %acc)
            -> (index) {
          %k = arith.addi %b, %j : index
          affine.yield %k : index
        }
        affine.yield %m : index
      }
      affine.store %n, %r[0] : memref<1xindex>
    }
  }
  return
}
"""


@needs_llvm
def test_a_max_lower_bound_inside_a_loop_that_never_runs() -> None:
    """mlir-opt-22 folded the inner bound map to `() -> ()` and refused the program
    (docs/upstream-bugs.md, 17)."""
    native, interp = both(EMPTY_OUTER_LOOP, np.arange(8, dtype=np.float32), np.zeros(1, np.intp))
    for k, (got, oracle) in enumerate(zip(native, interp)):
        np.testing.assert_array_equal(got, oracle, f"argument {k}")
    assert interp[1][0] == 2


def _min_max_reduction(kind: str, n: int, type_: str) -> str:
    return f"""
func.func @main(%a: memref<{n}x{type_}>, %b: memref<1x{type_}>, %r: memref<2x{type_}>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = vector.load %a[%c0] : memref<{n}x{type_}>, vector<{n}x{type_}>
  %acc = memref.load %b[%c0] : memref<1x{type_}>
  %s = vector.reduction <{kind}>, %v : vector<{n}x{type_}> into {type_}
  %t = vector.reduction <{kind}>, %v, %acc : vector<{n}x{type_}> into {type_}
  memref.store %s, %r[%c0] : memref<2x{type_}>
  memref.store %t, %r[%c1] : memref<2x{type_}>
  return
}}
"""


@needs_llvm
@pytest.mark.parametrize("kind", ["maximumf", "minimumf"])
@pytest.mark.parametrize("n, type_", [(8, "f32"), (16, "f32"), (4, "f64")])
def test_min_max_reductions_of_nans_in_x86_order(kind: str, n: int, type_: str) -> None:
    """x86 code reduces halves lane by lane down to one register, then its lanes in
    order; the interpreter went in lane order, so another of several NaNs came out."""
    rng = np.random.default_rng(5)
    dtype, bits = (np.float32, np.uint32) if type_ == "f32" else (np.float64, np.uint64)
    plus, minus = (0x7FC00000, 0xFFC00000) if type_ == "f32" else (0x7FF8 << 48, 0xFFF8 << 48)
    nans = [plus + k for k in range(1, 9)] + [minus + k for k in range(9, 17)]
    ones = np.array([1.0, -2.0, 0.0], dtype).view(bits).tolist()
    program = _min_max_reduction(kind, n, type_)
    for _ in range(6):
        a = np.array(rng.choice(nans + ones, n), bits).view(dtype)
        b = np.array(rng.choice(nans, 1), bits).view(dtype)
        native, interp = both(program, a, b, np.zeros(2, dtype))
        np.testing.assert_array_equal(interp[2].view(bits), native[2].view(bits), str(a))


@needs_llvm
@pytest.mark.parametrize("kind", ["maxnumf", "minnumf"])
@pytest.mark.parametrize("n, type_", [(8, "f32"), (4, "f64")])
def test_maxnumf_and_minnumf_reductions_order_minus_zero_below_plus_zero(
    kind: str, n: int, type_: str
) -> None:
    """llvm.vector.reduce.fmax leaves the zero open: x86 code reduced [-0.0, +0.0] to
    -0.0 and [+0.0, -0.0] by minnumf to +0.0, the interpreter to +0.0 and -0.0."""
    dtype, bits = (np.float32, np.uint32) if type_ == "f32" else (np.float64, np.uint64)
    nan, other_nan = np.array([np.nan, -np.nan], dtype).view(bits) | 5
    zero, minus_zero = np.array([0.0, -0.0], dtype).view(bits)
    lanes = [
        [minus_zero, zero],
        [zero, minus_zero],
        [nan, minus_zero, nan, zero],
        [minus_zero, nan, other_nan, minus_zero],
        [nan, other_nan],
    ]
    program = _min_max_reduction(kind, n, type_)
    for lane in lanes:
        a = np.resize(np.array(lane, bits), n).view(dtype)
        for acc in (zero, minus_zero, other_nan):
            b = np.array([acc], bits).view(dtype)
            native, interp = both(program, a, b, np.zeros(2, dtype))
            what = f"{kind} of {a} from {b}"
            np.testing.assert_array_equal(interp[2].view(bits), native[2].view(bits), what)
            if lane == [nan, other_nan] and acc != other_nan:  # NaNs give way to a zero
                assert interp[2].view(bits)[1] == acc, what
    a = np.resize(np.array(lanes[0], bits), n).view(dtype)
    native, _ = both(program, a, np.array([minus_zero], bits).view(dtype), np.zeros(2, dtype))
    want = {"maxnumf": zero, "minnumf": minus_zero}[kind]
    assert native[2].view(bits).tolist() == [want, want]


CLAMPF = """
func.func @main(%a: memref<12xT>, %lo: memref<12xT>, %hi: memref<12xT>, %o: memref<12xT>,
                %v: memref<12xT>) {
  affine.for %i = 0 to 12 {
    %x = affine.load %a[%i] : memref<12xT>
    %l = affine.load %lo[%i] : memref<12xT>
    %h = affine.load %hi[%i] : memref<12xT>
    %r = math.clampf %x to [%l, %h] : T
    affine.store %r, %o[%i] : memref<12xT>
  }
  affine.for %i = 0 to 12 step 4 {
    %x = affine.vector_load %a[%i] : memref<12xT>, vector<4xT>
    %l = affine.vector_load %lo[%i] : memref<12xT>, vector<4xT>
    %h = affine.vector_load %hi[%i] : memref<12xT>, vector<4xT>
    %r = math.clampf %x to [%l, %h] : vector<4xT>
    affine.vector_store %r, %v[%i] : memref<12xT>, vector<4xT>
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("type_", ["f16", "f32", "f64"])
def test_clampf_is_mlir_s_definition(type_: str) -> None:
    """MLIR defines clampf(x, min, max) as maximumf(minimumf(x, max), min); mlir-opt-22
    lowered it not at all, and its math-expand-ops with min and max swapped (0.5 clamped
    to [0, 1] was 1); the interpreter had no implementation."""
    dtype = DTYPES[type_]
    nan = np.nan
    x = np.array([0.5, 5.0, -5.0, nan, -0.0, 0.0, 2.0, 0.5, nan, 0.0, -np.inf, 1.0], dtype)
    lo = np.array([0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 3.0, nan, -nan, -0.0, -1.0, 1.0], dtype)
    hi = np.array([1.0, 1.0, 1.0, 1.0, 1.0, -0.0, 1.0, 1.0, nan, -0.0, np.inf, 1.0], dtype)
    zeros = [np.zeros(12, dtype), np.zeros(12, dtype)]
    native, interp = both(CLAMPF.replace("T", type_), x, lo, hi, *zeros)
    for k in (3, 4):
        same_bits(native[k], interp[k], f"argument {k}, native against the interpreter")
    want = np.array([0.5, 1.0, 0.0, nan, 0.0, -0.0, 3.0, nan, nan, -0.0, -1.0, 1.0], dtype)
    for got in interp[3:]:
        same_bits(got, want, "the interpreter against MLIR's definition")


F16_NANS = """
func.func @main(%a: memref<4xf16>, %b: memref<4xf16>, %s: memref<4xf16>, %m: memref<4xf16>,
                %q: memref<4xf16>) {
  affine.for %i = 0 to 4 {
    %x = affine.load %a[%i] : memref<4xf16>
    %y = affine.load %b[%i] : memref<4xf16>
    %sum = arith.addf %x, %y : f16
    %neg = arith.mulf %x, %y : f16
    %abs = math.absf %x : f16
    affine.store %sum, %s[%i] : memref<4xf16>
    affine.store %neg, %m[%i] : memref<4xf16>
    affine.store %abs, %q[%i] : memref<4xf16>
  }
  return
}
"""


@needs_llvm
def test_f16_nans_keep_their_payload() -> None:
    """Native code computes f16 in f32, which keeps a NaN's payload; the interpreter
    rounded through struct's 'e', which makes every NaN 0x7E00 (or 0xFE00)."""
    a = np.array([0x7E05, 0x0000, 0xFE03, 0x3C00], np.uint16).view(np.float16)
    b = np.array([0x0000, 0x7E41, 0x3C00, 0xFD01], np.uint16).view(np.float16)
    zeros = [np.zeros(4, np.float16) for _ in range(3)]
    native, interp = both(F16_NANS, a, b, *zeros)
    for k in (2, 3, 4):
        assert interp[k].view(np.uint16).tolist() == native[k].view(np.uint16).tolist(), k
    assert interp[2].view(np.uint16).tolist() == [0x7E05, 0x7E41, 0xFE03, 0xFF01]


LANE_MOVES = """
func.func @main(%a: memref<24xf32>, %n: memref<2xindex>, %o: memref<6x24xf32>,
                %m: memref<3x24xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %i = memref.load %n[%c0] : memref<2xindex>
  %j = memref.load %n[%c1] : memref<2xindex>
  %v = vector.load %a[%c0] : memref<24xf32>, vector<24xf32>
  %cube = vector.shape_cast %v : vector<24xf32> to vector<2x3x4xf32>
  %t = vector.transpose %cube, [2, 0, 1] : vector<2x3x4xf32> to vector<4x2x3xf32>
  %r0 = vector.shape_cast %t : vector<4x2x3xf32> to vector<24xf32>
  vector.store %r0, %o[%c0, %c0] : memref<6x24xf32>, vector<24xf32>
  %grid = vector.shape_cast %v : vector<24xf32> to vector<4x6xf32>
  %s = vector.extract_strided_slice %grid {offsets = [1, 2], sizes = [2, 3], strides = [1, 1]} : vector<4x6xf32> to vector<2x3xf32>
  %p = vector.insert_strided_slice %s, %grid {offsets = [2, 3], strides = [1, 1]} : vector<2x3xf32> into vector<4x6xf32>
  %r1 = vector.shape_cast %p : vector<4x6xf32> to vector<24xf32>
  vector.store %r1, %o[%c1, %c0] : memref<6x24xf32>, vector<24xf32>
  %row = vector.extract_strided_slice %v {offsets = [5], sizes = [4], strides = [1]} : vector<24xf32> to vector<4xf32>
  %q = vector.insert_strided_slice %row, %cube {offsets = [1, 2, 0], strides = [1]} : vector<4xf32> into vector<2x3x4xf32>
  %r2 = vector.shape_cast %q : vector<2x3x4xf32> to vector<24xf32>
  vector.store %r2, %o[%c2, %c0] : memref<6x24xf32>, vector<24xf32>
  %lo, %hi = vector.deinterleave %grid : vector<4x6xf32> -> vector<4x3xf32>
  %back = vector.interleave %hi, %lo : vector<4x3xf32> -> vector<4x6xf32>
  %r3 = vector.shape_cast %back : vector<4x6xf32> to vector<24xf32>
  %c3 = arith.constant 3 : index
  vector.store %r3, %o[%c3, %c0] : memref<6x24xf32>, vector<24xf32>
  %bits = vector.bitcast %v : vector<24xf32> to vector<48xi16>
  %swap = vector.shuffle %bits, %bits [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14, 17, 16, 19, 18, 21, 20, 23, 22, 25, 24, 27, 26, 29, 28, 31, 30, 33, 32, 35, 34, 37, 36, 39, 38, 41, 40, 43, 42, 45, 44, 47, 46] : vector<48xi16>, vector<48xi16>
  %r4 = vector.bitcast %swap : vector<48xi16> to vector<24xf32>
  %c4 = arith.constant 4 : index
  vector.store %r4, %o[%c4, %c0] : memref<6x24xf32>, vector<24xf32>
  %wide = vector.bitcast %grid : vector<4x6xf32> to vector<4x3xf64>
  %half = arith.truncf %wide : vector<4x3xf64> to vector<4x3xf32>
  %z = arith.constant dense<0.0> : vector<4x3xf32>
  %r5 = vector.interleave %half, %z : vector<4x3xf32> -> vector<4x6xf32>
  %r5f = vector.shape_cast %r5 : vector<4x6xf32> to vector<24xf32>
  %c5 = arith.constant 5 : index
  vector.store %r5f, %o[%c5, %c0] : memref<6x24xf32>, vector<24xf32>
  %k1 = vector.create_mask %i, %j : vector<4x6xi1>
  %k2 = vector.constant_mask [3, 2] : vector<4x6xi1>
  %k3 = vector.create_mask %j : vector<24xi1>
  %masks = vector.shape_cast %k1 : vector<4x6xi1> to vector<24xi1>
  %masks2 = vector.shape_cast %k2 : vector<4x6xi1> to vector<24xi1>
  %w1 = arith.extui %masks : vector<24xi1> to vector<24xi32>
  %w2 = arith.extui %masks2 : vector<24xi1> to vector<24xi32>
  %w3 = arith.extui %k3 : vector<24xi1> to vector<24xi32>
  vector.store %w1, %m[%c0, %c0] : memref<3x24xi32>, vector<24xi32>
  vector.store %w2, %m[%c1, %c0] : memref<3x24xi32>, vector<24xi32>
  vector.store %w3, %m[%c2, %c0] : memref<3x24xi32>, vector<24xi32>
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("bounds", [(2, 5), (-1, 9), (7, 0)])
def test_lane_moves(bounds: tuple[int, int]) -> None:
    """shape_cast, transpose, strided slices, (de)interleave, bitcast and masks of
    constants and bounds: native code ran them, the interpreter refused them."""
    a = (np.arange(24, dtype=np.float32) - 7.5) * 1.25
    n = np.array(bounds, np.intp)
    native, interp = both(
        LANE_MOVES, a, n, np.zeros((6, 24), np.float32), np.zeros((3, 24), np.int32)
    )
    same_bits(native[2], interp[2], "lanes, native against the interpreter")
    np.testing.assert_array_equal(native[3], interp[3], "masks, native against the interpreter")
    np.testing.assert_array_equal(interp[2][0], a.reshape(2, 3, 4).transpose(2, 0, 1).ravel())
    grid = a.reshape(4, 6).copy()
    grid[2:4, 3:6] = grid[1:3, 2:5]
    np.testing.assert_array_equal(interp[2][1], grid.ravel())
    cube = a.reshape(2, 3, 4).copy()
    cube[1, 2] = a[5:9]
    np.testing.assert_array_equal(interp[2][2], cube.ravel())
    i, j = bounds
    inside = (np.arange(4)[:, None] < i) & (np.arange(6)[None, :] < j)
    np.testing.assert_array_equal(interp[3][0], inside.ravel().astype(np.int32))
    np.testing.assert_array_equal(interp[3][2], (np.arange(24) < j).astype(np.int32))


UNLOWERED = """
func.func @main(%a: memref<8xf32>, %o: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %z = arith.constant 0.0 : f32
  %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
  %m = vector.create_mask %c3 : vector<8xi1>
  %zs = vector.broadcast %z : f32 to vector<f32>
  %t = memref.alloc() : memref<1xi32>
  OP
  return
}
"""


@needs_llvm
@pytest.mark.parametrize(
    "line",
    [
        "%x = vector.multi_reduction <add>, %v, %z [0] : vector<8xf32> to f32",
        "%x:2 = vector.scan <add>, %v, %zs {reduction_dim = 0 : i64, inclusive = true} : vector<8xf32>, vector<f32>",
        "%x = vector.mask %m { vector.transfer_read %a[%c0], %z : memref<8xf32>, vector<8xf32> } : vector<8xi1> -> vector<8xf32>",
        "vector.mask %m { vector.transfer_write %v, %o[%c0] : vector<8xf32>, memref<8xf32> } : vector<8xi1>",
        "%x = vector.vscale",
        "%x = memref.realloc %o : memref<8xf32> to memref<16xf32>",
        "memref.dma_start %a[%c0], %o[%c0], %c3, %t[%c0] : memref<8xf32>, memref<8xf32>, memref<1xi32>",
        "memref.dma_wait %t[%c0], %c3 : memref<1xi32>",
    ],
)  # fmt: skip
def test_ops_mlir_22_leaves_unlowered_are_refused_at_their_line(line: str) -> None:
    """mlir-translate stopped at the printed program's line (`Dialect vector not found`,
    an unknown memref op), or clang at llvm.vscale, naming no line of the user's."""
    op = next(word for word in line.split() if word.startswith(("vector.", "memref.")))
    at = UNLOWERED.splitlines().index("  OP") + 1
    program = UNLOWERED.replace("OP", line)
    with pytest.raises(dhir.DhirError) as error:
        dhir.run(dhir.parse_string(program, "prog.mlir"), np.zeros(8, np.float32),
                 np.zeros(8, np.float32), backend="native")  # fmt: skip
    assert str(error.value).startswith(f"prog.mlir:{at}:")
    assert f"'{op}' is not supported by the native backend" in str(error.value)


@needs_llvm
def test_a_mask_around_a_reduction_runs_natively() -> None:
    program = UNLOWERED.replace(
        "OP",
        "%x = vector.mask %m { vector.reduction <add>, %v : vector<8xf32> into f32 }"
        " : vector<8xi1> -> f32\n  memref.store %x, %o[%c0] : memref<8xf32>",
    )
    a = np.arange(1, 9, dtype=np.float32)
    native = dhir.run(dhir.parse_string(program), a, np.zeros(8, np.float32), backend="native")
    assert native[1][0] == 6.0


MASKED_MEMORY = """
func.func @main(%a: memref<4x6xf32>, %mk: memref<6xi32>, %ix: memref<6xi32>,
                %o: memref<6x6xf32>, %s: memref<4x6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %zero = arith.constant dense<0> : vector<6xi32>
  %mi = vector.load %mk[%c0] : memref<6xi32>, vector<6xi32>
  %m = arith.cmpi ne, %mi, %zero : vector<6xi32>
  %i = vector.load %ix[%c0] : memref<6xi32>, vector<6xi32>
  %pass = arith.constant dense<-1.5> : vector<6xf32>
  %l = vector.maskedload %a[%c1, %c0], %m, %pass : memref<4x6xf32>, vector<6xi1>, vector<6xf32> into vector<6xf32>
  vector.store %l, %o[%c0, %c0] : memref<6x6xf32>, vector<6xf32>
  %e = vector.expandload %a[%c2, %c0], %m, %pass : memref<4x6xf32>, vector<6xi1>, vector<6xf32> into vector<6xf32>
  vector.store %e, %o[%c1, %c0] : memref<6x6xf32>, vector<6xf32>
  %g = vector.gather %a[%c1, %c2][%i], %m, %pass : memref<4x6xf32>, vector<6xi32>, vector<6xi1>, vector<6xf32> into vector<6xf32>
  vector.store %g, %o[%c2, %c0] : memref<6x6xf32>, vector<6xf32>
  %v = vector.load %a[%c3, %c0] : memref<4x6xf32>, vector<6xf32>
  vector.maskedstore %s[%c0, %c0], %m, %v : memref<4x6xf32>, vector<6xi1>, vector<6xf32>
  vector.compressstore %s[%c1, %c0], %m, %v : memref<4x6xf32>, vector<6xi1>, vector<6xf32>
  vector.scatter %s[%c2, %c0][%i], %m, %v : memref<4x6xf32>, vector<6xi32>, vector<6xi1>, vector<6xf32>
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masked_loads_stores_gathers_and_scatters(seed: int) -> None:
    """Native code ran them; the interpreter refused them. Unset lanes touch no memory
    (the indices there lead out of the memref); of two scattered lanes at one element,
    the later one stays."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    mask = rng.integers(0, 2, 6).astype(np.int32)
    index = rng.integers(-8, 12, 6).astype(np.int32)
    index[mask == 0] = 1000  # out of bounds where unset
    index[np.flatnonzero(mask)[:2]] = 3  # a repeated element where set
    inputs = [a, mask, index, np.zeros((6, 6), np.float32), np.zeros((4, 6), np.float32)]
    native, interp = both(MASKED_MEMORY, *inputs)
    for k in (3, 4):
        same_bits(native[k], interp[k], f"argument {k}, native against the interpreter")
    on = mask.astype(bool)
    np.testing.assert_array_equal(interp[3][0], np.where(on, a[1], -1.5))
    expanded = np.full(6, -1.5, np.float32)
    expanded[on] = a[2, : on.sum()]
    np.testing.assert_array_equal(interp[3][1], expanded)
    np.testing.assert_array_equal(interp[3][2][on], a.ravel()[8 + index[on]])


OUTER = """
func.func @main(%a: memref<4xf32>, %b: memref<3xf32>, %i: memref<4xi32>, %j: memref<3xi32>,
                %o: memref<4x3xf32>, %s: memref<4xf32>, %p: memref<4x3xi32>,
                %q: memref<4x3xi32>) {
  %c0 = arith.constant 0 : index
  %x = vector.load %a[%c0] : memref<4xf32>, vector<4xf32>
  %y = vector.load %b[%c0] : memref<3xf32>, vector<3xf32>
  %u = vector.load %i[%c0] : memref<4xi32>, vector<4xi32>
  %w = vector.load %j[%c0] : memref<3xi32>, vector<3xi32>
  %k = memref.load %b[%c0] : memref<3xf32>
  %r = vector.outerproduct %x, %y : vector<4xf32>, vector<3xf32>
  vector.store %r, %o[%c0, %c0] : memref<4x3xf32>, vector<4x3xf32>
  %t = vector.outerproduct %x, %k : vector<4xf32>, f32
  vector.store %t, %s[%c0] : memref<4xf32>, vector<4xf32>
  %acc = arith.constant dense<7> : vector<4x3xi32>
  %m = vector.outerproduct %u, %w, %acc : vector<4xi32>, vector<3xi32>
  vector.store %m, %p[%c0, %c0] : memref<4x3xi32>, vector<4x3xi32>
  %n = vector.outerproduct %u, %w, %acc {kind = #vector.kind<maxsi>} : vector<4xi32>, vector<3xi32>
  vector.store %n, %q[%c0, %c0] : memref<4x3xi32>, vector<4x3xi32>
  return
}
"""


@needs_llvm
def test_outer_products() -> None:
    """Native code ran vector.outerproduct; the interpreter refused it. Without an
    accumulator (or on integers) each lane is one rounded product."""
    a = np.array([1.5, -2.0, 3e38, 1e-30], np.float32)
    b = np.array([3.0, 1e-20, -0.0], np.float32)
    i = np.array([2, -3, 2**30, 5], np.int32)
    j = np.array([4, -1, 9], np.int32)
    outs = [np.zeros((4, 3), np.float32), np.zeros(4, np.float32)]
    outs += [np.zeros((4, 3), np.int32), np.zeros((4, 3), np.int32)]
    native, interp = both(OUTER, a, b, i, j, *outs)
    for k in (4, 5, 6, 7):
        same_bits(native[k], interp[k], f"argument {k}, native against the interpreter")
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(interp[4], np.outer(a, b))
        np.testing.assert_array_equal(interp[6], np.outer(i, j) + 7)
    np.testing.assert_array_equal(interp[7], np.maximum(np.outer(i, j), 7))


def test_a_float_outer_product_with_an_accumulator_is_refused_by_the_interpreter() -> None:
    program = OUTER.replace(
        "%r = vector.outerproduct %x, %y : vector<4xf32>, vector<3xf32>",
        "%z = arith.constant dense<0.0> : vector<4x3xf32>\n"
        "  %r = vector.outerproduct %x, %y, %z : vector<4xf32>, vector<3xf32>",
    )
    inputs = [np.zeros(4, np.float32), np.zeros(3, np.float32), np.zeros(4, np.int32)]
    inputs += [np.zeros(3, np.int32), np.zeros((4, 3), np.float32), np.zeros(4, np.float32)]
    inputs += [np.zeros((4, 3), np.int32), np.zeros((4, 3), np.int32)]
    with pytest.raises(
        dhir.DhirError, match=r"prog.mlir:12:8: error: 'vector.outerproduct' with an accumulator"
    ):
        dhir.run(dhir.parse_string(program, "prog.mlir"), *inputs, backend="interp")


MEMREF_RESHAPE = """
func.func @main(%a: memref<8xf32>, %s: memref<2xindex>, %o: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = memref.reshape %a(%s) : (memref<8xf32>, memref<2xindex>) -> memref<?x?xf32>
  %t = memref.reshape %o(%s) : (memref<8xf32>, memref<2xindex>) -> memref<?x?xf32>
  %n = memref.dim %r, %c0 : memref<?x?xf32>
  %m = memref.dim %r, %c1 : memref<?x?xf32>
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %m step %c1 {
      %x = memref.load %r[%i, %j] : memref<?x?xf32>
      %k = arith.muli %i, %c2 : index
      %y = arith.index_cast %k : index to i32
      %f = arith.sitofp %y : i32 to f32
      %z = arith.addf %x, %f : f32
      memref.store %z, %t[%i, %j] : memref<?x?xf32>
    }
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("shape", [(2, 4), (4, 2), (8, 1)])
def test_memref_reshape_is_a_view(shape: tuple[int, int]) -> None:
    """Native code ran memref.reshape (to static sizes: MLIR 22 lowers no other); the
    interpreter refused it."""
    a = np.arange(8, dtype=np.float32) * 0.5
    s = np.array(shape, np.intp)
    program = MEMREF_RESHAPE.replace("?x?", f"{shape[0]}x{shape[1]}")
    native, interp = both(program, a, s, np.zeros(8, np.float32))
    same_bits(native[2], interp[2], "native against the interpreter")
    want = a.reshape(shape) + 2.0 * np.arange(shape[0])[:, None]
    np.testing.assert_array_equal(interp[2], want.ravel())


def test_a_memref_reshape_to_sizes_its_type_lacks_is_an_error() -> None:
    program = MEMREF_RESHAPE.replace("?x?", "2x4")
    inputs = [np.zeros(8, np.float32), np.array([4, 2], np.intp), np.zeros(8, np.float32)]
    with pytest.raises(
        dhir.DhirError, match=r"prog.mlir:6:\d+: error: 'memref.reshape' reshapes into"
    ):
        dhir.run(dhir.parse_string(program, "prog.mlir"), *inputs, backend="interp")


@needs_llvm
def test_a_memref_reshape_to_run_time_sizes_is_refused_natively() -> None:
    """mlir-translate stopped at the printed program's line: MLIR 22 lowers a reshape
    to static sizes only."""
    inputs = [np.zeros(8, np.float32), np.array([4, 2], np.intp), np.zeros(8, np.float32)]
    match = r"prog.mlir:6:\d+: error: 'memref.reshape' is not supported by the native backend"
    with pytest.raises(dhir.DhirError, match=match):
        dhir.run(dhir.parse_string(MEMREF_RESHAPE, "prog.mlir"), *inputs, backend="native")


UNIT_DIMS_KEPT = """
func.func @main(%a: memref<8x8xf32>, %b: memref<4x4x4xf32>, %out: memref<4xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %s = memref.subview %a[2, 0] [1, 1] [1, 2] : memref<8x8xf32> to memref<1xf32, strided<[2], offset: 16>>
  %x = memref.load %s[%c0] : memref<1xf32, strided<[2], offset: 16>>
  memref.store %x, %out[%c0] : memref<4xf32>
  %t = memref.subview %a[%i, 3] [1, 1] [3, 1] : memref<8x8xf32> to memref<1xf32, strided<[24], offset: ?>>
  %y = memref.load %t[%c0] : memref<1xf32, strided<[24], offset: ?>>
  memref.store %y, %out[%c1] : memref<4xf32>
  %u = memref.subview %a[1, %i] [1, 1] [1, 1] : memref<8x8xf32> to memref<1xf32, strided<[1], offset: ?>>
  %z = memref.load %u[%c0] : memref<1xf32, strided<[1], offset: ?>>
  memref.store %z, %out[%c2] : memref<4xf32>
  %v = memref.subview %b[0, 0, 0] [1, 4, 1] [1, 1, 16] : memref<4x4x4xf32> to memref<4x1xf32, strided<[4, 16]>>
  %w = memref.load %v[%c2, %c0] : memref<4x1xf32, strided<[4, 16]>>
  memref.store %w, %out[%c3] : memref<4xf32>
  return
}
"""


@needs_llvm
def test_subviews_keeping_a_unit_dimension_mlir_opt_crashes_on() -> None:
    """dhir-mlir22-workarounds: a subview dropping some of its dimensions of size 1 where
    MLIR's getDroppedDims, matching the source's strides, finds none to drop
    (`expand-strided-metadata` crashed: "build stage 'mlir-opt' failed") or other ones
    than the verifier (an invalid reinterpret_cast) becomes two subviews; the third one,
    whose kept stride is the source's, was fine and is left."""
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    b = np.arange(64, dtype=np.float32).reshape(4, 4, 4) + 100
    native, interp = both(UNIT_DIMS_KEPT, a, b, np.zeros(4, np.float32), 5)
    same_bits(native[2], interp[2], "native against the interpreter")
    np.testing.assert_array_equal(interp[2], [a[2, 0], a[5, 3], a[1, 5], b[0, 2, 0]])


MASKED_TRANSFERS = """
func.func @main(%a: memref<4x6xf32>, %n: memref<2xindex>, %o: memref<5x24xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %i = memref.load %n[%c0] : memref<2xindex>
  %j = memref.load %n[%c1] : memref<2xindex>
  %pad = arith.constant -1.5 : f32
  %m1 = vector.create_mask %j : vector<4xi1>
  %r1 = vector.transfer_read %a[%c1, %c4], %pad, %m1 : memref<4x6xf32>, vector<4xf32>
  vector.transfer_write %r1, %o[%c0, %c0] : vector<4xf32>, memref<5x24xf32>
  %m2 = vector.create_mask %i, %j : vector<4x6xi1>
  %r2 = vector.transfer_read %a[%c0, %c0], %pad, %m2 {permutation_map = affine_map<(d0, d1) -> (d1, d0)>} : memref<4x6xf32>, vector<6x4xf32>
  %f2 = vector.shape_cast %r2 : vector<6x4xf32> to vector<24xf32>
  vector.transfer_write %f2, %o[%c1, %c0] : vector<24xf32>, memref<5x24xf32>
  %m3 = vector.create_mask %j : vector<6xi1>
  %r3 = vector.transfer_read %a[%c2, %c0], %pad, %m3 {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (0, d1)>} : memref<4x6xf32>, vector<4x6xf32>
  %f3 = vector.shape_cast %r3 : vector<4x6xf32> to vector<24xf32>
  vector.transfer_write %f3, %o[%c2, %c0] : vector<24xf32>, memref<5x24xf32>
  %w = arith.constant dense<7.25> : vector<24xf32>
  %m4 = vector.create_mask %i : vector<24xi1>
  vector.transfer_write %w, %o[%c3, %c2], %m4 : vector<24xf32>, memref<5x24xf32>
  %v = vector.transfer_read %a[%c3, %c0], %pad : memref<4x6xf32>, vector<2x6xf32>
  %m5 = vector.create_mask %c1, %j : vector<2x6xi1>
  vector.transfer_write %v, %o[%c4, %c0], %m5 {in_bounds = [true, true]} : vector<2x6xf32>, memref<5x24xf32>
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("bounds", [(2, 3), (0, 6), (4, 9), (1, 0)])
def test_masked_transfers(bounds: tuple[int, int]) -> None:
    """Native code ran transfers with a mask; the interpreter refused them. A lane the
    mask leaves off reads the padding and writes nothing, even out of bounds (the last
    write's second row, `in_bounds` though past the memref); the mask of a transposed
    read is in the memref's order, and a broadcast dimension has none."""
    a = (np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5) * 1.25
    n = np.array(bounds, np.intp)
    native, interp = both(MASKED_TRANSFERS, a, n, np.zeros((5, 24), np.float32))
    same_bits(native[2], interp[2], "native against the interpreter")
    i, j = bounds
    on = (np.arange(4)[:, None] < i) & (np.arange(6)[None, :] < j)
    np.testing.assert_array_equal(interp[2][1], np.where(on, a, -1.5).T.ravel())
    np.testing.assert_array_equal(interp[2][2], np.tile(np.where(np.arange(6) < j, a[2], -1.5), 4))


STRIDE_0_VIEWS = """
func.func @main(%a: memref<4x6xf32>, %o: memref<4x6xf32>, %p: memref<3x6xf32>, %q: memref<8xf32>,
                %s: memref<2x6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %z = arith.constant 0.0 : f32
  %r = memref.subview %a[1, 0] [3, 6] [0, 1] : memref<4x6xf32> to memref<3x6xf32, strided<[0, 1], offset: 6>>
  memref.copy %r, %p : memref<3x6xf32, strided<[0, 1], offset: 6>> to memref<3x6xf32>
  %e = memref.subview %a[2, 1] [1, 4] [1, 0] : memref<4x6xf32> to memref<4xf32, strided<[0], offset: 13>>
  %v = vector.transfer_read %e[%c0], %z : memref<4xf32, strided<[0], offset: 13>>, vector<4xf32>
  vector.transfer_write %v, %q[%c0] : vector<4xf32>, memref<8xf32>
  %a3 = memref.subview %a[1, 0] [3, 6] [1, 1] : memref<4x6xf32> to memref<3x6xf32, strided<[6, 1], offset: 6>>
  %w = memref.subview %o[0, 0] [3, 6] [0, 1] : memref<4x6xf32> to memref<3x6xf32, strided<[0, 1]>>
  memref.copy %a3, %w : memref<3x6xf32, strided<[6, 1], offset: 6>> to memref<3x6xf32, strided<[0, 1]>>
  %t = memref.subview %o[3, 2] [1, 3] [1, 0] : memref<4x6xf32> to memref<3xf32, strided<[0], offset: 20>>
  %x = vector.load %a[%c1, %c0] : memref<4x6xf32>, vector<3xf32>
  vector.transfer_write %x, %t[%c0] : vector<3xf32>, memref<3xf32, strided<[0], offset: 20>>
  %y = memref.load %t[%c2] : memref<3xf32, strided<[0], offset: 20>>
  memref.store %y, %q[%c2] : memref<8xf32>
  %u = memref.subview %s[1, 0] [3, 6] [0, 1] : memref<2x6xf32> to memref<3x6xf32, strided<[0, 1], offset: 6>>
  %rows = vector.load %a[%c0, %c0] : memref<4x6xf32>, vector<3x6xf32>
  vector.store %rows, %u[%c0, %c0] : memref<3x6xf32, strided<[0, 1], offset: 6>>, vector<3x6xf32>
  return
}
"""


@needs_llvm
def test_subviews_of_stride_0() -> None:
    """MLIR allows a stride of 0 (one element seen again and again); native code ran such
    subviews, the interpreter refused them. A write through one keeps the last value
    written, as native code's loops do."""
    a = (np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5) * 1.25
    outs = [np.zeros((4, 6), np.float32), np.zeros((3, 6), np.float32), np.zeros(8, np.float32)]
    native, interp = both(STRIDE_0_VIEWS, a, *outs, np.zeros((2, 6), np.float32))
    for k in (1, 2, 3, 4):
        same_bits(native[k], interp[k], f"argument {k}, native against the interpreter")
    np.testing.assert_array_equal(interp[2], np.tile(a[1], (3, 1)))
    np.testing.assert_array_equal(interp[1][0], a[3])
    np.testing.assert_array_equal(interp[3][:4], [a[2, 1], a[2, 1], a[1, 2], a[2, 1]])
    np.testing.assert_array_equal(interp[4][1], a[2])


MEMREF_VIEWS = """
func.func @main(%b: memref<24xi8>, %a: memref<3xf32>, %o: memref<4xi64>, %n: index,
                %q: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %v = memref.view %b[%c2][] : memref<24xi8> to memref<3xf32>
  memref.copy %a, %v : memref<3xf32> to memref<3xf32>
  %r = memref.reinterpret_cast %v to offset: [1], sizes: [2], strides: [1] : memref<3xf32> to memref<2xf32, strided<[1], offset: 1>>
  %f = memref.load %r[%c1] : memref<2xf32, strided<[1], offset: 1>>
  memref.store %f, %q[%c0] : memref<1xf32>
  %w = memref.view %b[%n][%c3] : memref<24xi8> to memref<?xi16>
  scf.for %i = %c0 to %c3 step %c1 {
    %x = memref.load %w[%i] : memref<?xi16>
    %y = arith.extsi %x : i16 to i64
    memref.store %y, %o[%i] : memref<4xi64>
  }
  %t = memref.view %b[%c16][] : memref<24xi8> to memref<index>
  %m = arith.constant -3 : index
  memref.store %m, %t[] : memref<index>
  %s = memref.view %b[%n][] : memref<24xi8> to memref<2x2xi8>
  %z = memref.load %s[%c1, %c0] : memref<2x2xi8>
  %e = arith.extsi %z : i8 to i64
  memref.store %e, %o[%c3] : memref<4xi64>
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("shift", [0, 3, 9])
def test_memref_view_sees_bytes_as_other_elements(shift: int) -> None:
    """Native code ran memref.view; the interpreter refused it. Views start at any byte
    (2 and `shift`: not a multiple of the element's size), writes through one change the
    bytes, little-endian."""
    b = np.arange(-12, 12, dtype=np.int8) * 5
    a = np.array([-0.0, 1.5e-45, -3.25e38], np.float32)
    native, interp = both(MEMREF_VIEWS, b, a, np.zeros(4, np.int64), shift, np.zeros(1, np.float32))
    same_bits(native[0], interp[0], "bytes, native against the interpreter")
    same_bits(native[2], interp[2], "loads, native against the interpreter")
    np.testing.assert_array_equal(interp[0][2:14].view(np.float32), a)
    np.testing.assert_array_equal(interp[0][16:24].view(np.int64), [-3])
    same_bits(interp[4], a[2:], "a reinterpret_cast of the view starts where the view does")


def test_a_memref_view_out_of_its_buffer_is_an_error() -> None:
    program = MEMREF_VIEWS.replace("%c16 = arith.constant 16", "%c16 = arith.constant 17")
    inputs = [np.zeros(24, np.int8), np.zeros(3, np.float32), np.zeros(4, np.int64), 0]
    inputs.append(np.zeros(1, np.float32))
    with pytest.raises(
        dhir.DhirError,
        match=r"prog.mlir:20:\d+: error: 'memref.view' views 8 bytes from byte 17 of a "
        r"buffer of 24 bytes: out of bounds",
    ):
        dhir.run(dhir.parse_string(program, "prog.mlir"), *inputs, backend="interp")


def _masked_reductions(float_kinds: list[str], int_kinds: list[str]) -> str:
    lines = [
        "func.func @main(%a: memref<8xf32>, %b: memref<8xi32>, %k: memref<8xi32>,",
        "                %o: memref<2x6xf32>, %p: memref<2x9xi32>) {",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        "  %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>",
        "  %w = vector.load %b[%c0] : memref<8xi32>, vector<8xi32>",
        "  %mi = vector.load %k[%c0] : memref<8xi32>, vector<8xi32>",
        "  %zero = arith.constant dense<0> : vector<8xi32>",
        "  %m = arith.cmpi ne, %mi, %zero : vector<8xi32>",
        "  %af = arith.constant -0.0 : f32",
        "  %ai = arith.constant 7 : i32",
    ]
    for row, acc in enumerate(("", ", %af")):
        for k, kind in enumerate(float_kinds):
            lines += [
                f"  %x{row}{k} = vector.mask %m {{ vector.reduction <{kind}>, %v{acc} : "
                f"vector<8xf32> into f32 }} : vector<8xi1> -> f32",
                f"  %e{row}{k} = arith.constant {k} : index",
                f"  memref.store %x{row}{k}, %o[%c{row}, %e{row}{k}] : memref<2x6xf32>",
            ]
        for k, kind in enumerate(int_kinds):
            lines += [
                f"  %y{row}{k} = vector.mask %m {{ vector.reduction <{kind}>, %w{acc and ', %ai'} : "
                f"vector<8xi32> into i32 }} : vector<8xi1> -> i32",
                f"  %d{row}{k} = arith.constant {k} : index",
                f"  memref.store %y{row}{k}, %p[%c{row}, %d{row}{k}] : memref<2x9xi32>",
            ]
    return "\n".join([*lines, "  return", "}"])


MASKED_FLOAT_KINDS = ["add", "mul", "maximumf", "minimumf", "maxnumf", "minnumf"]
MASKED_INT_KINDS = ["add", "mul", "maxsi", "minsi", "maxui", "minui", "and", "or", "xor"]


@needs_llvm
@pytest.mark.parametrize(
    "mask",
    [[0] * 8, [1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 1, 0, 1, 0, 1],
     [0, 1, 0, 1, 0, 0, 0, 0], [1] * 8],
)  # fmt: skip
def test_masked_reductions(mask: list[int]) -> None:
    """Native code ran a vector.mask around a reduction; the interpreter refused it. A
    lane off counts as the kind's neutral value. MLIR 22 filled those lanes with
    -1.4e-45 for maximumf (the maximum of [-4, -3, -2] was -1.4e-45) and 3.4e38 for
    minimumf, and refused maxnumf and minnumf: dhir-accurate-math makes them selects."""
    a = np.array([-0.0, -4.0, -2.0, np.nan, 0.0, -np.inf, 3.5, np.inf], np.float32)
    b = np.array([3, -5, 2**31 - 1, -(2**31), 6, 0, -1, 9], np.int32)
    program = _masked_reductions(MASKED_FLOAT_KINDS, MASKED_INT_KINDS)
    k = np.array(mask, np.int32)
    outs = [np.zeros((2, 6), np.float32), np.zeros((2, 9), np.int32)]
    native, interp = both(program, a, b, k, *outs)
    same_bits(native[3], interp[3], "float reductions, native against the interpreter")
    same_bits(native[4], interp[4], "integer reductions, native against the interpreter")
    on = k.astype(bool)
    if on.any() and not np.isnan(a[on]).any():
        np.testing.assert_array_equal(interp[3][0, 2:4], [a[on].max(), a[on].min()])


@needs_llvm
def test_a_masked_maximum_of_negative_lanes_is_the_largest_lane() -> None:
    """MLIR 22 fills the lanes a mask leaves off with -1.4e-45 (APFloat's smallest
    negative, not -inf): the maximum of [-4, -3, -2] came out -1.4e-45."""
    program = UNLOWERED.replace(
        "OP",
        "%x = vector.mask %m { vector.reduction <maximumf>, %v : vector<8xf32> into f32 }"
        " : vector<8xi1> -> f32\n"
        "  %y = vector.mask %m { vector.reduction <minimumf>, %v : vector<8xf32> into f32 }"
        " : vector<8xi1> -> f32\n"
        "  memref.store %x, %o[%c0] : memref<8xf32>\n"
        "  memref.store %y, %o[%c3] : memref<8xf32>",
    )
    a = np.array([-4.0, -3.0, -2.0, 9.0, 9.0, 9.0, 9.0, 9.0], np.float32)
    b = a.copy()
    b[:3] = np.inf
    for x, want in ((a, [-2.0, -4.0]), (b, [np.inf, np.inf])):
        native = dhir.run(dhir.parse_string(program), x, np.zeros(8, np.float32), backend="native")
        np.testing.assert_array_equal(native[1][[0, 3]], want)


# name: the lhs, rhs and acc indexing maps, the iterators, the lhs, rhs and acc shapes.
CONTRACTIONS: dict[str, tuple[str, str, str, str, list[int], list[int], list[int]]] = {
    "dot": ("(k) -> (k)", "(k) -> (k)", "(k) -> ()", "r", [7], [7], []),
    "matvec": ("(m, k) -> (m, k)", "(m, k) -> (k)", "(m, k) -> (m)", "pr", [3, 7], [7], [3]),
    "matvec_t": ("(m, k) -> (k, m)", "(m, k) -> (k)", "(m, k) -> (m)", "pr", [7, 3], [7], [3]),
    "vecmat": ("(m, k) -> (k)", "(m, k) -> (m, k)", "(m, k) -> (m)", "pr", [7], [3, 7], [3]),
    "mm": ("(m, n, k) -> (m, k)", "(m, n, k) -> (k, n)", "(m, n, k) -> (m, n)", "ppr",
           [2, 5], [5, 3], [2, 3]),
    "mm_nt": ("(m, n, k) -> (m, k)", "(m, n, k) -> (n, k)", "(m, n, k) -> (m, n)", "ppr",
              [2, 5], [3, 5], [2, 3]),
    "mm_tt": ("(m, n, k) -> (k, m)", "(m, n, k) -> (k, n)", "(m, n, k) -> (m, n)", "ppr",
              [5, 2], [5, 3], [2, 3]),
    "mm_out_t": ("(m, n, k) -> (m, k)", "(m, n, k) -> (k, n)", "(m, n, k) -> (n, m)", "ppr",
                 [2, 5], [5, 3], [3, 2]),
    "mm_k_first": ("(k, m, n) -> (m, k)", "(k, m, n) -> (k, n)", "(k, m, n) -> (m, n)", "rpp",
                   [2, 5], [5, 3], [2, 3]),
    "batch": ("(b, m, n, k) -> (b, m, k)", "(b, m, n, k) -> (b, k, n)",
              "(b, m, n, k) -> (b, m, n)", "pppr", [2, 2, 4], [2, 4, 3], [2, 2, 3]),
    "two_reduced": ("(m, k, l) -> (m, k, l)", "(m, k, l) -> (k, l)", "(m, k, l) -> (m)", "prr",
                    [2, 3, 4], [3, 4], [2]),
    "reduced_first": ("(k, m) -> (m, k)", "(k, m) -> (k)", "(k, m) -> (m)", "rp", [3, 6], [6],
                      [3]),
    "all_reduced": ("(k, l) -> (k, l)", "(k, l) -> (l, k)", "(k, l) -> ()", "rr", [3, 4], [4, 3],
                    []),
    # Reduced along one operand only: MLIR 22 left these in place (dhir-mlir22-workarounds
    # broadcasts the other operand along that dimension), the interpreter refused them.
    "lone_left": ("(m, k, l) -> (m, k, l)", "(m, k, l) -> (k)", "(m, k, l) -> (m)", "prr",
                  [2, 3, 4], [3], [2]),
    "lone_right": ("(m, k, l) -> (k, m)", "(m, k, l) -> (l, k)", "(m, k, l) -> (m)", "prr",
                   [3, 2], [2, 3], [2]),
    "lone_both": ("(m, k, l, j) -> (l, m, k)", "(m, k, l, j) -> (k, j)", "(m, k, l, j) -> (m)",
                  "prrr", [3, 2, 4], [4, 3], [2]),
}  # fmt: skip


def _contraction(name: str, type_: str) -> str:
    lhs_map, rhs_map, acc_map, iterators, *shapes = CONTRACTIONS[name]
    lhs, rhs, acc = (f"{'x'.join(map(str, s))}x{type_}" if s else type_ for s in shapes)
    zeros = [", ".join(["%c0"] * len(s)) for s in shapes]
    kinds = ", ".join('"parallel"' if i == "p" else '"reduction"' for i in iterators)
    maps = ", ".join(f"affine_map<{m}>" for m in (lhs_map, rhs_map, acc_map))
    acc_type = f"vector<{acc}>" if shapes[2] else type_
    load = "vector.load" if shapes[2] else "memref.load"
    loaded = f", vector<{acc}>" if shapes[2] else ""
    store = "vector.store" if shapes[2] else "memref.store"
    return f"""
func.func @main(%a: memref<{lhs}>, %b: memref<{rhs}>, %c: memref<{acc}>, %o: memref<{acc}>) {{
  %c0 = arith.constant 0 : index
  %x = vector.load %a[{zeros[0]}] : memref<{lhs}>, vector<{lhs}>
  %y = vector.load %b[{zeros[1]}] : memref<{rhs}>, vector<{rhs}>
  %z = {load} %c[{zeros[2]}] : memref<{acc}>{loaded}
  %r = vector.contract {{indexing_maps = [{maps}], iterator_types = [{kinds}], kind = #vector.kind<add>}} %x, %y, %z : vector<{lhs}>, vector<{rhs}> into {acc_type}
  {store} %r, %o[{zeros[2]}] : memref<{acc}>{loaded}
  return
}}
"""


@needs_llvm
@pytest.mark.parametrize("name", list(CONTRACTIONS))
def test_contractions_sum_in_the_order_native_code_does(name: str) -> None:
    """Native code ran vector.contract; the interpreter refused it. Matrix products sum
    each row times column from +0.0 and add the accumulator last; other contractions
    start from it: values of many magnitudes, and -0.0 products onto a -0.0 accumulator,
    come out as native code's only in its order. A dimension reduced along one operand
    only failed in mlir-opt natively and was refused by the interpreter."""
    shapes = CONTRACTIONS[name][4:]
    rng = np.random.default_rng(len(name))
    program = _contraction(name, "f32")
    for trial in range(3):
        lhs, rhs, acc = (
            np.array(rng.standard_normal(s) * 10.0 ** rng.integers(-6, 7, s), np.float32)
            for s in shapes
        )
        if trial == 2:
            lhs, rhs = np.abs(lhs) * np.float32(-0.0), np.abs(rhs)  # products of -0.0
            acc = np.full(shapes[2], -0.0, np.float32)
        native, interp = both(program, lhs, rhs, acc, np.zeros(shapes[2], np.float32))
        same_bits(native[3], interp[3], f"{name} (trial {trial}), native against the interpreter")
    if name in ("mm", "two_reduced", "lone_both"):
        # vector.contract has no fastmath flags: `reassoc` leaves its order as it is.
        out = np.zeros(shapes[2], np.float32)
        relaxed = dhir.run(dhir.parse_string(program, "prog.mlir"), lhs, rhs, acc, out,
                           backend="native", ranks=1, fast_math="reassoc")  # fmt: skip
        same_bits(relaxed[3], interp[3], f"{name} under reassoc, native against the interpreter")
    if name in ("mm", "batch", "two_reduced", "lone_both"):
        ints = [rng.integers(-(2**31), 2**31, s).astype(np.int32) for s in shapes]
        native, interp = both(_contraction(name, "i32"), *ints, np.zeros(shapes[2], np.int32))
        same_bits(native[3], interp[3], f"{name} on i32, native against the interpreter")
    if name == "mm":
        halves = [(rng.standard_normal(s) * 30).astype(np.float16) for s in shapes]
        native, interp = both(_contraction(name, "f16"), *halves, np.zeros(shapes[2], np.float16))
        same_bits(native[3], interp[3], "mm on f16, native against the interpreter")


@pytest.mark.parametrize("backend", ["native", "interp"])
@pytest.mark.parametrize(
    "change, message",
    [
        ("kind = #vector.kind<add>", "kind = #vector.kind<mul>"),
        ("affine_map<(m, n, k) -> (k, n)>", "affine_map<(m, n, k) -> (n)>"),
    ],
)
def test_contractions_mlir_22_does_not_lower_are_refused(
    backend: str, change: str, message: str
) -> None:
    if backend == "native" and shutil.which("mlir-opt-22") is None:
        pytest.skip("needs LLVM 22")
    program = _contraction("mm", "f32").replace(change, message)
    rhs = (5, 3)
    if "kind" not in change:  # the right operand has n only
        program = program.replace("5x3xf32", "3xf32").replace("%b[%c0, %c0]", "%b[%c0]")
        rhs = (3,)
    inputs = [np.zeros((2, 5), np.float32), np.zeros(rhs, np.float32)]
    inputs += [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    want = (
        "not supported by the .*MLIR 22 lowers contractions of kind add only, not mul"
        if "kind" in change
        else "expected at least one contracting dimension pair"
    )
    with pytest.raises(dhir.DhirError, match=rf"prog.mlir:7:8: error: .*{want}"):
        dhir.run(dhir.parse_string(program, "prog.mlir"), *inputs, backend=backend)


@pytest.mark.parametrize("backend", ["native", "interp"])
def test_a_contraction_dropping_a_parallel_dimension_is_refused_at_its_line(backend: str) -> None:
    """m is parallel but not in the result: MLIR 22 left the contraction in place and the
    native build stopped in mlir-translate at a line of the lowered file; the interpreter
    refused it at the op."""
    if backend == "native" and shutil.which("mlir-opt-22") is None:
        pytest.skip("needs LLVM 22")
    program = (
        _contraction("mm", "f32")
        .replace("affine_map<(m, n, k) -> (m, n)>", "affine_map<(m, n, k) -> (n)>")
        .replace("2x3xf32", "3xf32")
        .replace("[%c0, %c0] : memref<3xf32>", "[%c0] : memref<3xf32>")
    )
    inputs = [np.zeros((2, 5), np.float32), np.zeros((5, 3), np.float32)]
    inputs += [np.zeros(3, np.float32), np.zeros(3, np.float32)]
    want = "not supported by the .*dimension 0 \\(of size 2\\) is not in the result"
    with pytest.raises(dhir.DhirError, match=rf"prog.mlir:7:8: error: .*{want}"):
        dhir.run(dhir.parse_string(program, "prog.mlir"), *inputs, backend=backend)


PRINTS = """
func.func @main(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
  vector.print %v : vector<8xf32>
  %w = vector.broadcast %v : vector<8xf32> to vector<2x8xf32>
  vector.print %w : vector<2x8xf32>
  %d = arith.extf %v : vector<8xf32> to vector<8xf64>
  vector.print %d : vector<8xf64>
  %h = arith.truncf %v : vector<8xf32> to vector<8xf16>
  vector.print %h : vector<8xf16>
  %b = arith.truncf %v : vector<8xf32> to vector<8xbf16>
  vector.print %b : vector<8xbf16>
  %i = arith.constant dense<[0, 1, -2147483648, 2147483647, 5, -7, 0, 3]> : vector<8xi32>
  vector.print %i : vector<8xi32>
  %t = arith.constant dense<[true, false]> : vector<2xi1>
  vector.print %t : vector<2xi1>
  %n = arith.constant -3 : index
  vector.print %n : index
  %u = arith.constant -3 : i8
  %z = vector.broadcast %n : index to vector<index>
  vector.print %z : vector<index>
  vector.print punctuation <comma>
  vector.print str "hello\\n"
  vector.print %u : i8 punctuation <no_punctuation>
  vector.print punctuation <open>
  vector.print punctuation <close>
  vector.print punctuation <newline>
  %f = memref.load %a[%c0] : memref<8xf32>
  vector.print %f : f32
  %big = arith.constant 123456789.0 : f64
  vector.print %big : f64
  %j = arith.constant -9223372036854775808 : i64
  vector.print %j : i64
  return
}
"""


@needs_llvm
def test_vector_print_writes_what_native_code_writes(capfd: pytest.CaptureFixture[str]) -> None:
    """Native code ran vector.print (printF32's %g, index unsigned, i1 as 0 or 1, NaN
    with its sign); the interpreter refused it. Native code could not print f16 or bf16
    (printF16 and printBF16 are in libmlir_float16_utils, which dhir did not link), nor
    build a bare `vector.print` before an op with a result (dhir printed it without its
    punctuation, and mlir-opt read the next line's result as its operand)."""
    a = np.array([-0.0, 1.5, np.nan, np.nan, np.inf, -np.inf, 1e-40, 3.4e38], np.float32)
    a.view(np.uint32)[3] = 0xFFC00000  # -nan
    printed = []
    for backend in ("native", "interp"):
        dhir.run(dhir.parse_string(PRINTS, "prog.mlir"), a, backend=backend)
        printed.append(capfd.readouterr().out)
    assert printed[0] == printed[1]
    lines = printed[1].splitlines()
    assert lines[0] == "( -0, 1.5, nan, -nan, inf, -inf, 9.99995e-41, 3.4e+38 )"
    assert lines[6:9] == ["( 1, 0 )", "18446744073709551613", "( 18446744073709551613 )"]
    assert lines[9:] == [", hello", "-3(  )", "-0", "1.23457e+08", "-9223372036854775808"]


CONVERSION_FLAGS = """
func.func @main(%a: memref<4xf64>, %o: memref<4xf32>, %p: memref<4xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf64>
    %n = arith.truncf %x to_nearest_even : f64 to f32
    %f = arith.truncf %x fastmath<contract> : f64 to f32
    %s = arith.addf %n, %f : f32
    %e = arith.extf %s fastmath<nnan> : f32 to f64
    memref.store %s, %o[%i] : memref<4xf32>
    memref.store %e, %p[%i] : memref<4xf64>
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("mode", ["none", "fast"])
def test_float_conversions_take_a_rounding_mode_and_flags(mode: str) -> None:
    """dhir's parser refused MLIR 22's `arith.truncf %x to_nearest_even` and the flags of
    truncf and extf ("Expected ':'"); with the flags convert-to-llvm makes an
    `llvm.fptrunc` that mlir-translate rejects, so dhir drops them (also those --fast-math
    adds)."""
    a = np.array([0.1, -1.0 / 3.0, 1e30, 5e-324])
    outs = (np.zeros(4, np.float32), np.zeros(4))
    native = dhir.run(dhir.parse_string(CONVERSION_FLAGS, "prog.mlir"), a, *outs,
                      backend="native", ranks=1, fast_math=mode)  # fmt: skip
    interp = dhir.run(dhir.parse_string(CONVERSION_FLAGS, "prog.mlir"), a, *outs,
                      backend="interp")  # fmt: skip
    for k in (1, 2):
        same_bits(native[k], interp[k], f"result {k}, native against the interpreter")
    np.testing.assert_array_equal(interp[1], a.astype(np.float32) * 2)


_MODES = ("to_nearest_even", "downward", "upward", "toward_zero", "to_nearest_away")
# Each float type's significand bits and smallest and largest exponents.
_FORMATS = {"f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}


def _rounded(x: float, target: str, mode: str) -> float:
    """`x` rounded into `target` as `mode` says, computed on exact rationals."""
    if x != x or math.isinf(x) or x == 0:
        return x
    precision, emin, emax = _FORMATS[target]
    size = Fraction(abs(x))
    exponent = max(emin, size.numerator.bit_length() - size.denominator.bit_length())
    if Fraction(2) ** exponent > size:
        exponent = max(emin, exponent - 1)
    quantum = Fraction(2) ** (exponent - precision + 1)
    low = math.floor(size / quantum) * quantum
    high = low if low == size else low + quantum
    if exponent > emax:  # beyond the largest float: between it and infinity
        low, high = Fraction(2) ** (emax + 1) - Fraction(2) ** (emax - precision + 1), size
    negative = x < 0
    if mode == "toward_zero" or (mode == "downward") != negative and mode in ("downward", "upward"):
        chosen = low
    elif mode in ("downward", "upward"):
        chosen = high
    elif size - low != high - size:
        chosen = low if size - low < high - size else high
    elif mode == "to_nearest_away":
        chosen = high
    else:
        chosen = low if (low / quantum) % 2 == 0 else high
    infinite = chosen >= Fraction(2) ** (emax + 1)
    value = math.inf if infinite else float(chosen)
    return -value if negative else value


def _edge_values(source: str, target: str) -> np.ndarray:
    precision, emin, emax = _FORMATS[target]
    ulp_one, tiny, largest = 2.0**-precision, 2.0 ** (emin - precision + 1), 2.0**emax
    edges = [0.1, 1 / 3, 1 + ulp_one, 1 + 3 * ulp_one, 1 + ulp_one / 2, 1 + ulp_one * 1.5,
             tiny, tiny / 2, tiny * 1.5, tiny / 3, 2.0**emin * 0.75, 2.0**emin * (1 - ulp_one),
             largest * (2 - 2 * ulp_one), largest * (2 - ulp_one), largest * (2 - ulp_one * 1.5),
             largest * 1.999999, 1e30, 1e300, 5e-324, 3.0, 0.0, 2.0**emin, math.inf, math.nan]  # fmt: skip
    random = np.random.default_rng(7)
    spread = random.uniform(0.5, 1, 60) * 2.0 ** random.integers(emin - precision, emax + 2, 60)
    values = np.array([*edges, *spread])
    values = np.concatenate([values, -values])
    dtype = np.float64 if source == "f64" else np.float32
    with np.errstate(over="ignore"):
        return values.astype(dtype)


def _truncations_program(source: str, target: str, n: int, lanes: int) -> str:
    def shaped(t: str) -> str:
        return f"vector<{lanes}x{t}>" if lanes > 1 else t

    access = "vector.load" if lanes > 1 else "memref.load"
    put = "vector.store" if lanes > 1 else "memref.store"
    load = f"%x = {access} %a[%i] : memref<{n}x{source}>, {shaped(source)}"
    if lanes == 1:
        load = f"%x = memref.load %a[%i] : memref<{n}x{source}>"
    body = [load]
    for k, mode in enumerate(_MODES):
        body += [
            f"%t{k} = arith.truncf %x {mode} : {shaped(source)} to {shaped(target)}",
            f"%e{k} = arith.extf %t{k} : {shaped(target)} to {shaped('f64')}",
            f"{put} %e{k}, %o{k}[%i] : memref<{n}xf64>"
            + (f", {shaped('f64')}" if lanes > 1 else ""),
        ]
    outs = ", ".join(f"%o{k}: memref<{n}xf64>" for k in range(len(_MODES)))
    lines = "\n    ".join(body)
    return f"""
func.func @main(%a: memref<{n}x{source}>, {outs}) {{
  %c0 = arith.constant 0 : index
  %step = arith.constant {lanes} : index
  %n = arith.constant {n} : index
  scf.for %i = %c0 to %n step %step {{
    {lines}
  }}
  return
}}
"""


@needs_llvm
@pytest.mark.parametrize(
    ("source", "target", "lanes"),
    [
        ("f64", "f32", 1),
        ("f64", "f32", 4),
        ("f64", "f16", 1),
        ("f64", "bf16", 1),
        ("f32", "f16", 1),
        ("f32", "bf16", 2),
    ],  # fmt: skip
)
def test_truncf_rounds_as_its_mode_says(source: str, target: str, lanes: int) -> None:
    """MLIR 22 lowers `arith.truncf %x downward` to a constrained fptrunc, whose mode only
    tells LLVM how the CPU is set: natively it rounded to nearest (0.1 gave 0x3DCCCCCD,
    not 0x3DCCCCCC); dhir refused every mode but to_nearest_even. Each mode against exact
    rounding of rationals, at ties, subnormals, overflow and signed zeros."""
    a = _edge_values(source, target)
    outs = [np.zeros(len(a)) for _ in _MODES]
    native, interp = both(_truncations_program(source, target, len(a), lanes), a, *outs)
    for k, mode in enumerate(_MODES):
        want = np.array([_rounded(float(x), target, mode) for x in a])
        same_bits(interp[k + 1], want, f"{mode}: the interpreter against exact rounding")
        same_bits(native[k + 1], interp[k + 1], f"{mode}: native against the interpreter")


# --- math.isnan, isinf, isfinite, isnormal and erfc -------------------------------------

_CLASSES = ("isnan", "isinf", "isfinite", "isnormal")


def _classes_program(in_type: str, type_: str, n: int, on_vectors: bool) -> str:
    """Each class test of `%a`'s elements (as `type_`, truncated to it from `in_type`) into
    %r0..%r3 as i32, and erfc of them into %o; element by element, or as one vector."""

    def shaped(t: str) -> str:
        return f"vector<{n}x{t}>" if on_vectors else t

    m, r = f"memref<{n}x{in_type}>", f"memref<{n}xi32>"
    lines = []
    if on_vectors:
        lines.append(f"%x = vector.load %a[%c0] : {m}, {shaped(in_type)}")
    else:
        lines.append(f"%x = memref.load %a[%i] : {m}")
    x = "%x"
    if type_ != in_type:
        lines.append(f"%y = arith.truncf %x : {shaped(in_type)} to {shaped(type_)}")
        x = "%y"
    for k, name in enumerate(_CLASSES):
        lines.append(f"%q{k} = math.{name} {x} : {shaped(type_)}")
        lines.append(f"%w{k} = arith.extui %q{k} : {shaped('i1')} to {shaped('i32')}")
    lines.append(f"%e = math.erfc {x} : {shaped(type_)}")
    e = "%e"
    if type_ != in_type:
        lines.append(f"%eb = arith.extf %e : {shaped(type_)} to {shaped(in_type)}")
        e = "%eb"
    outputs = [(f"%w{k}", f"%r{k}", r, "i32") for k in range(4)] + [(e, "%o", m, in_type)]
    for value, into, memref, element in outputs:
        if on_vectors:
            lines.append(f"vector.store {value}, {into}[%c0] : {memref}, {shaped(element)}")
        else:
            lines.append(f"memref.store {value}, {into}[%i] : {memref}")
    body = "\n".join(f"    {line}" for line in lines)
    if not on_vectors:
        body = f"  scf.for %i = %c0 to %n step %c1 {{\n{body}\n  }}"
    return f"""
func.func @main(%a: {m}, %r0: {r}, %r1: {r}, %r2: {r}, %r3: {r}, %o: {m}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {n} : index
{body}
  return
}}
"""


def _class_inputs(in_type: str, type_: str) -> np.ndarray:
    """Zeros, infinities, quiet and signalling NaNs, the smallest normal and subnormal
    numbers of `type_` and their neighbours, as `in_type`."""
    dtype = DTYPES[in_type]
    info = np.finfo(np.float32 if type_ == "bf16" else dtype)
    tiny, subnormal = float(info.tiny), float(info.smallest_subnormal)
    values = [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, -math.nan, tiny, -tiny]
    values += [subnormal, -subnormal, tiny * 0.75, float(info.max), 0.5, 30.0, -30.0, 1e-3]
    if type_ == "bf16":  # f32 values that round to bf16's smallest normal, or to infinity
        values += [tiny * 0.998, 3.4e38]
    signalling = {np.float16: 0x7C01, np.float32: 0x7F800001, np.float64: 0x7FF0000000000001}
    bits = np.array([signalling[dtype]], f"u{np.dtype(dtype).itemsize}")
    return np.concatenate([np.array(values, dtype), bits.view(dtype)])


def _to_bf16(a: np.ndarray) -> np.ndarray:
    """f32 values rounded to bf16 (their upper half), to nearest even; NaN stays NaN."""
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return np.where(np.isnan(a), a, rounded.view(np.float32))


@needs_llvm
@pytest.mark.parametrize("on_vectors", [False, True], ids=["scalars", "vectors"])
@pytest.mark.parametrize("type_", ["f16", "f32", "f64", "bf16"])
def test_float_classes_and_erfc(type_: str, on_vectors: bool) -> None:
    """dhir's parser did not know math.isnan, isinf, isfinite, isnormal or erfc ("Operation
    math.isnan is not registered"). The interpreter now classifies exactly and calls libm's
    erfc; natively mlir-opt-22 lowers isnan, isfinite and erfc, and isinf and isnormal
    (which it leaves in place) are written out by dhir-mlir22-workarounds."""
    in_type = "f32" if type_ == "bf16" else type_
    a = _class_inputs(in_type, type_)
    n = len(a)
    outputs = [np.zeros(n, np.int32) for _ in _CLASSES] + [np.zeros(n, a.dtype)]
    native, interp = both(_classes_program(in_type, type_, n, on_vectors), a, *outputs)
    for k in range(1, 6):
        same_bits(native[k], interp[k], f"{type_} result {k}, native against the interpreter")
    value = _to_bf16(a) if type_ == "bf16" else a
    info = np.finfo(np.float32 if type_ == "bf16" else a.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        want = [
            np.isnan(value),
            np.isinf(value),
            np.isfinite(value),
            np.isfinite(value) & (np.abs(value) >= info.tiny),
        ]
    for k, expected in enumerate(want):
        np.testing.assert_array_equal(interp[k + 1], expected.astype(np.int32), _CLASSES[k])
    if type_ == "f64":
        within_ulps(interp[5], np.array([math.erfc(v) for v in a]), 1, "erfc")
