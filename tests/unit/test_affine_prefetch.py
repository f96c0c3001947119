"""`affine.prefetch`, which xDSL 0.74 lacks: dhir reads and prints it as mlir-opt-22 does,
verifies it as MLIR does, runs it in the interpreter as a hint without effect (natively it
is `llvm.prefetch`, which does not fault even outside the memref) and builds it."""

import shutil

import numpy as np
import pytest
from roundtrip import assert_same_as_mlir

import dhir
from dhir import DhirError

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

PREFETCH = """
func.func @p(%m: memref<8x8xf32>, %n: index) {
  affine.for %i = 0 to 8 {
    affine.prefetch %m[%i, %i + 1], read, locality<3>, data : memref<8x8xf32>
    affine.prefetch %m[symbol(%n), %i], write, locality<0>, instr : memref<8x8xf32>
    affine.prefetch %m[%i floordiv 2, 0], read, locality<1>, data {note} : memref<8x8xf32>
  }
  return
}
"""


@pytest.mark.mlir
def test_affine_prefetch_round_trips_through_mlir_opt() -> None:
    assert_same_as_mlir(PREFETCH)


PROGRAM = """
func.func @main(%a: memref<4x3xf64>, %b: memref<4x3xf64>, %c: memref<4x3xf64>) {
  affine.for %r = 0 to 4 {
    affine.for %k = 0 to 3 {
      affine.prefetch %a[%r + 1, %k], read, locality<3>, data : memref<4x3xf64>
      affine.prefetch %c[%r, %k], write, locality<1>, data : memref<4x3xf64>
      %x = affine.load %a[%r, %k] : memref<4x3xf64>
      %y = affine.load %b[%r, %k] : memref<4x3xf64>
      %s = arith.addf %x, %y : f64
      affine.store %s, %c[%r, %k] : memref<4x3xf64>
    }
  }
  return
}
"""


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    return [rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), np.zeros((4, 3))]


def test_the_interpreter_takes_a_prefetch_as_a_hint() -> None:
    a, b, _ = _inputs()
    got = dhir.run(PROGRAM, *_inputs(), backend="interp")
    np.testing.assert_array_equal(got[2], a + b)
    # memref.prefetch, what lower-affine makes of it, is the same hint.
    lowered = PROGRAM.replace("affine.prefetch %a[%r + 1, %k]", "memref.prefetch %a[%r, %k]")
    got = dhir.run(lowered, *_inputs(), backend="interp")
    np.testing.assert_array_equal(got[2], a + b)


@needs_llvm
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_native_runs_equal_the_interpreter_bit_for_bit(ranks: int) -> None:
    expected = dhir.run(PROGRAM, *_inputs(), backend="interp")
    got = dhir.run(PROGRAM, *_inputs(), backend="native", ranks=ranks)
    for have, want in zip(got, expected, strict=True):
        assert have.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "affine.prefetch %a[0, 1], read, locality<3>, data : memref<4xf64>",
            "prog.mlir:2:3: error: 'affine.prefetch' op affine.prefetch affine map num "
            "results must equal memref rank",
        ),
        (
            "affine.prefetch %a[0], read, locality<5>, data : memref<4xf64>",
            "'affine.prefetch' op attribute 'localityHint' must be 0 to 3, got 5",
        ),
        (
            "affine.prefetch %a[0], read, locality<1>, code : memref<4xf64>",
            "prog.mlir:2:45: error: Expected one of 'data', 'instr'",
        ),
        (
            "affine.for %i = 0 to 4 {\n    %j = arith.addi %i, %i : index\n"
            "    affine.prefetch %a[symbol(%j)], read, locality<1>, data : memref<4xf64>\n  }",
            "operand 0 cannot be used as a symbol",
        ),
    ],
    ids=["rank", "locality", "cache", "symbol"],
)
def test_malformed_prefetches_are_refused_where_they_stand(body: str, message: str) -> None:
    text = f"func.func @main(%a: memref<4xf64>) {{\n  {body}\n  return\n}}\n"
    with pytest.raises(DhirError) as caught:
        dhir.parse_string(text, "prog.mlir")
    assert message in str(caught.value), str(caught.value)
