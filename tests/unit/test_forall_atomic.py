"""scf.forall and memref.generic_atomic_rmw in dhir tasks: their effects, the
interpreter and the native backend on 2 ranks (integer and float atomics: MLIR 22
cannot lower the float ones by itself), and what their verifiers refuse."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from roundtrip import parse

import dhir
from dhir.analysis.effects import task_effects
from dhir.dialects.dhir import TaskOp

PROGRAM = (Path(__file__).parent / "data" / "forall_atomic_tasks.mlir").read_text()


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.integers(-50, 50, 16).astype(np.int32), rng.standard_normal((4, 8))


def test_generic_atomic_rmw_reads_and_writes_its_memref() -> None:
    tasks = [op for op in parse(PROGRAM).walk() if isinstance(op, TaskOp)]
    effects = task_effects(tasks[0])
    (a,) = tasks[0].memrefs
    assert effects.reads == effects.writes == {a}
    b, a = tasks[1].memrefs
    effects = task_effects(tasks[1])
    assert effects.reads == {a, b} and effects.writes == {b}


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_forall_and_atomics_natively_equal_the_interpreter() -> None:
    oracle = dhir.run(dhir.parse_string(PROGRAM), *_inputs(), backend="interp")
    native = dhir.run(dhir.parse_string(PROGRAM), *_inputs(), backend="native", ranks=2)
    a, b = _inputs()
    assert not np.array_equal(oracle[0], a) and not np.array_equal(oracle[1], b)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


BAD = {
    "no in_parallel": """
  "scf.forall"(%n) <{operandSegmentSizes = array<i32: 0, 1, 0, 0>, staticLowerBound = array<i64: 0>, staticStep = array<i64: 1>, staticUpperBound = array<i64: -9223372036854775808>}> ({
  ^bb0(%i: index):
    "scf.yield"() : () -> ()
  }) : (index) -> ()""",
    "bound count": """
  "scf.forall"(%n) <{operandSegmentSizes = array<i32: 0, 1, 0, 0>, staticLowerBound = array<i64: 0, 0>, staticStep = array<i64: 1>, staticUpperBound = array<i64: -9223372036854775808>}> ({
  ^bb0(%i: index):
    "scf.forall.in_parallel"() ({
    ^bb0:
    }) : () -> ()
  }) : (index) -> ()""",
    "zero step": "scf.forall (%i) = (0) to (%n) step (0) {\n  }",
    "bounds for ivs": "scf.forall (%i, %j) in (%n) {\n  }",
    "yield type": """
  %x = memref.generic_atomic_rmw %m[%n] : memref<4xf32> {
  ^bb0(%cur: f32):
    %k = arith.constant 1 : i32
    memref.atomic_yield %k : i32
  }""",
    "side effects": """
  %x = memref.generic_atomic_rmw %m[%n] : memref<4xf32> {
  ^bb0(%cur: f32):
    memref.store %cur, %m[%n] : memref<4xf32>
    memref.atomic_yield %cur : f32
  }""",
    "index count": """
  %x = memref.generic_atomic_rmw %m[%n, %n] : memref<4xf32> {
  ^bb0(%cur: f32):
    memref.atomic_yield %cur : f32
  }""",
}


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
def test_invalid_forms_are_refused(body: str) -> None:
    text = f"func.func @f(%n: index, %m: memref<4xf32>) {{\n  {body}\n  return\n}}"
    with pytest.raises(Exception):  # noqa: B017  # a parse or a verify error
        parse(text)


UPDATES = """
func.func @main(%a: memref<512xf64>, %k: memref<512xi32>, %s: memref<4xf64>, %n: memref<2xi32>) {
  dhir.schedule %a, %k, %s, %n {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %k, %s, %n {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %end = arith.constant 512 : index
      scf.parallel (%i) = (%c0) to (%end) step (%c1) {
        %x = memref.load %a[%i] : memref<512xf64>
        %y = memref.load %k[%i] : memref<512xi32>
        %0 = memref.atomic_rmw addf %x, %s[%c0] : (f64, memref<4xf64>) -> f64
        %1 = memref.atomic_rmw mulf %x, %s[%c1] : (f64, memref<4xf64>) -> f64
        %2 = memref.atomic_rmw assign %x, %s[%c2] : (f64, memref<4xf64>) -> f64
        %3 = memref.atomic_rmw maximumf %x, %s[%c3] : (f64, memref<4xf64>) -> f64
        %4 = memref.atomic_rmw muli %y, %n[%c0] : (i32, memref<2xi32>) -> i32
        %5 = memref.atomic_rmw addi %y, %n[%c1] : (i32, memref<2xi32>) -> i32
        scf.reduce
      }
    }
  }
  return
}
"""


def test_updates_whose_order_matters_keep_their_loop_on_one_thread() -> None:
    from dhir.backends.native import openmp_safe

    assert not openmp_safe(dhir.parse_string(UPDATES))
    commutative = "\n".join(
        line
        for line in UPDATES.splitlines()
        if " = memref.atomic_rmw " not in line or "maximumf" in line or "i32" in line
    )
    assert openmp_safe(dhir.parse_string(commutative))


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_every_atomic_update_kind_natively_equals_the_interpreter() -> None:
    """mulf and muli, which MLIR 22 does not lower, as generic updates; float sums and
    assign in program order, on one thread; bit for bit the interpreter's."""
    rng = np.random.default_rng(3)
    inputs = [
        rng.standard_normal(512) * 0.1 + 1.0,
        rng.integers(-9, 9, 512).astype(np.int32) | 1,
        np.array([0.0, 1.0, 0.0, -np.inf]),
        np.array([1, 0], np.int32),
    ]
    oracle = dhir.run(UPDATES, *inputs, backend="interp")
    native = dhir.run(UPDATES, *inputs, backend="native", threads=2)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


NUMBER_UPDATES = """
func.func @main(%a: memref<4xf32>, %s: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  affine.for %i = 0 to 4 {
    %x = affine.load %a[%i] : memref<4xf32>
    %0 = memref.atomic_rmw maxnumf %x, %s[%c0] : (f32, memref<2xf32>) -> f32
    %1 = memref.atomic_rmw minnumf %x, %s[%c1] : (f32, memref<2xf32>) -> f32
  }
  return
}
"""


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
@pytest.mark.parametrize("start", [0.0, -0.0, np.nan])
def test_maxnumf_and_minnumf_updates_order_minus_zero_below_plus_zero(start: float) -> None:
    """LLVM's atomicrmw fmax/fmin leave the zero open: x86 code kept -0.0 against +0.0
    (and +0.0 against -0.0 for fmin), the interpreter orders -0.0 below +0.0."""
    from dhir.backends.native import openmp_safe

    assert not openmp_safe(dhir.parse_string(NUMBER_UPDATES))  # a plain load and store
    for values in ([-0.0, 0.0, -0.0, 0.0], [0.0, -0.0, np.nan, -0.0], [np.nan] * 4):
        inputs = [np.array(values, np.float32), np.full(2, start, np.float32)]
        oracle = dhir.run(NUMBER_UPDATES, *inputs, backend="interp")
        native = dhir.run(NUMBER_UPDATES, *inputs, backend="native")
        assert native[1].tobytes() == oracle[1].tobytes(), (values, native[1], oracle[1])
    zeros = [np.array([-0.0, 0.0, -0.0, 0.0], np.float32), np.zeros(2, np.float32)]
    native = dhir.run(NUMBER_UPDATES, *zeros, backend="native")
    assert np.signbit(native[1]).tolist() == [False, True]


MATMULS = """
func.func private @mm(%p: memref<4x4xf32>, %b: memref<4x4xf32>, %q: memref<4x4xf32>) {
  linalg.matmul ins(%p, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%q : memref<4x4xf32>)
  return
}
func.func @main(%W: memref<4x4xf32>, %B: memref<4x4xf32>, %V: memref<4x4xf32>) {
  CALL
  return
}
"""


@pytest.mark.parametrize(
    ("call", "threads"),
    [
        (
            "func.call @mm(%W, %B, %V) : (memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) -> ()",
            True,
        ),
        (
            "func.call @mm(%B, %V, %V) : (memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) -> ()",
            False,
        ),
        (
            "linalg.matmul ins(%B, %V : memref<4x4xf32>, memref<4x4xf32>) outs(%V : memref<4x4xf32>)",
            False,
        ),
    ],
)
def test_loops_that_may_write_what_they_read_stay_on_one_thread(call: str, threads: bool) -> None:
    """A matmul whose output is also its right factor: threads taking rows apart would
    read elements other threads already rewrote (the sequential nest reads them in
    order); so with views of one buffer passed as two arguments."""
    from dhir.backends.native import openmp_safe

    assert openmp_safe(dhir.parse_string(MATMULS.replace("CALL", call))) is threads
