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
