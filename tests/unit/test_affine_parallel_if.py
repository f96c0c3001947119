"""`affine.parallel` and `affine.if` in MLIR 22's custom syntax: read as mlir-opt-22
reads them (the round-trip corpus is tests/unit/data/syntax/affine_parallel_if.mlir),
refused with a located error where mlir-opt-22 refuses them, run by the interpreter
(reductions included) and natively on two ranks."""

import shutil

import numpy as np
import pytest
from roundtrip import parse
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir.affine import AffineMap

import dhir
from dhir import DhirError
from dhir.backends.native import openmp_safe
from dhir.dialects.affine import IfOp, ParallelOp

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# The first task runs on rank 1 and the second on rank 0, so the matrix travels.
PROGRAM = """
#upper_half = affine_set<(d0)[s0] : (d0 - s0 >= 0)>
func.func @main(%a: memref<16x16xf32>, %out: memref<2xf32>, %count: memref<1xi32>) {
  dhir.schedule %a, %out, %count {
    %cpu = dhir.target {kind = "cpu"}
    %scale = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %n = arith.constant 8 : index
      %two = arith.constant 2.0 : f32
      %one = arith.constant 1.0 : f32
      affine.parallel (%i, %j) = (0, 0) to (16, 16) step (1, 2) {
        %v = affine.load %a[%i, %j] : memref<16x16xf32>
        %w = affine.if #upper_half(%i)[%n] -> f32 {
          %d = arith.mulf %v, %two : f32
          affine.yield %d : f32
        } else {
          %e = arith.addf %v, %one : f32
          affine.yield %e : f32
        }
        affine.store %w, %a[%i, %j] : memref<16x16xf32>
      }
      affine.parallel (%i, %j) = (max(1, symbol(%n) - 5), 0) to (min(symbol(%n), 15), 16) {
        affine.if affine_set<(d0, d1) : (d0 - d1 == 0)>(%i, %j) {
          %z = arith.constant 0.0 : f32
          affine.store %z, %a[%i, %j] : memref<16x16xf32>
        }
      }
    }
    %reduce = dhir.task %cpu, %a, %out, %count attributes {dhir.rank = 0 : i64} {
      %s:2 = affine.parallel (%i, %j) = (0, 0) to (16, 16) reduce ("addf", "maximumf") -> (f32, f32) {
        %v = affine.load %a[%i, %j] : memref<16x16xf32>
        affine.yield %v, %v : f32, f32
      }
      affine.store %s#0, %out[0] : memref<2xf32>
      affine.store %s#1, %out[1] : memref<2xf32>
      %c = affine.parallel (%i) = (0) to (16) reduce ("addi") -> i32 {
        %v = affine.load %a[%i, 15 - %i] : memref<16x16xf32>
        %zero = arith.constant 0.0 : f32
        %pos = arith.cmpf ogt, %v, %zero : f32
        %k = arith.extui %pos : i1 to i32
        affine.yield %k : i32
      }
      affine.store %c, %count[0] : memref<1xi32>
    }
  }
  return
}
"""


def _reference(a: np.ndarray) -> list[np.ndarray]:
    a = a.copy()
    for i in range(16):
        for j in range(0, 16, 2):
            a[i, j] = a[i, j] * np.float32(2) if i >= 8 else a[i, j] + np.float32(1)
    for i in range(3, 8):
        a[i, i] = 0
    total = np.float32(0)
    for v in a.flat:  # the order of the sequential float additions
        total = np.float32(total + v)
    count = sum(int(a[i, 15 - i] > 0) for i in range(16))
    return [a, np.array([total, a.max()], np.float32), np.array([count], np.int32)]


def _inputs(seed: int) -> list[np.ndarray]:
    a = np.random.default_rng(seed).standard_normal((16, 16)).astype(np.float32)
    return [a, np.zeros(2, np.float32), np.zeros(1, np.int32)]


def test_interpreter_runs_parallel_reductions_and_conditions() -> None:
    inputs = _inputs(0)
    results = dhir.run(PROGRAM, *inputs, backend="interp")
    for got, want in zip(results, _reference(inputs[0]), strict=True):
        assert got.tobytes() == want.tobytes()


@needs_mpi
@pytest.mark.parametrize("threads", [1, 2])
def test_native_on_two_ranks_equals_the_interpreter(threads: int) -> None:
    inputs = _inputs(threads)
    oracle = dhir.run(PROGRAM, *inputs, backend="interp")
    native = dhir.run(PROGRAM, *inputs, ranks=2, threads=threads, timeout=120)
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


INTEGER_REDUCTIONS = """
func.func @main(%a: memref<64xi32>, %out: memref<4xi32>) {
  dhir.schedule %a, %out {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %out {
      %s:4 = affine.parallel (%i) = (0) to (64) reduce ("addi", "muli", "andi", "ori")
          -> (i32, i32, i32, i32) {
        %v = affine.load %a[%i] : memref<64xi32>
        affine.yield %v, %v, %v, %v : i32, i32, i32, i32
      }
      affine.store %s#0, %out[0] : memref<4xi32>
      affine.store %s#1, %out[1] : memref<4xi32>
      affine.store %s#2, %out[2] : memref<4xi32>
      affine.store %s#3, %out[3] : memref<4xi32>
    }
  }
  return
}
"""


@needs_mpi
def test_integer_reductions_on_threads_equal_the_interpreter_and_numpy() -> None:
    """Without float reductions the loops run on OpenMP threads; the product wraps."""
    a = np.random.default_rng(5).choice([-3, -2, -1, 1, 2, 3], 64).astype(np.int32)
    inputs = [a, np.zeros(4, np.int32)]
    oracle = dhir.run(INTEGER_REDUCTIONS, *inputs, backend="interp")
    product = 1
    for v in a.tolist():
        product = (product * v) & 0xFFFFFFFF
    want = [a.sum(), product, np.bitwise_and.reduce(a), np.bitwise_or.reduce(a)]
    assert oracle[1].tolist() == np.array(want, np.uint32).astype(np.int32).tolist()
    native = dhir.run(INTEGER_REDUCTIONS, *inputs, ranks=2, threads=2, timeout=120)
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


def _reducing(kind: str, type_: str) -> str:
    return f"""func.func @f(%n: index, %x: {type_}) -> {type_} {{
  %r = affine.parallel (%i) = (0) to (%n) reduce ("{kind}") -> {type_} {{
    affine.yield %x : {type_}
  }}
  return %r : {type_}
}}
"""


def test_float_reductions_keep_loops_off_threads() -> None:
    """A float sum on threads would depend on the thread count."""
    assert not openmp_safe(dhir.parse_string(_reducing("addf", "f32")))
    assert openmp_safe(dhir.parse_string(_reducing("addi", "i32")))


def test_reductions_are_the_ids_mlir_prints() -> None:
    op = next(o for o in parse(_reducing("muli", "i64")).walk() if isinstance(o, ParallelOp))
    assert [r.value.data for r in op.reductions] == [13]  # type: ignore[attr-defined]
    assert op.reduction_kinds() == ["muli"]


def test_a_value_keeps_the_kind_of_its_first_use_in_a_subscript() -> None:
    text = """
func.func @f(%m: memref<4x4xf32>, %n: index) -> f32 {
  %v = affine.load %m[symbol(%n), %n] : memref<4x4xf32>
  return %v : f32
}
"""
    load = next(o for o in parse(text).walk() if o.name == "affine.load")
    assert load.properties["map"] == AffineMapAttr(
        AffineMap.from_callable(lambda s: (s, s), dim_symbol_split=(0, 1))
    )
    assert len(load.operands) == 2


def test_if_without_else_has_an_empty_else_region() -> None:
    text = """
func.func @f(%m: memref<4xf32>, %f: f32, %n: index) {
  affine.if affine_set<(d0) : (d0 >= 0)>(%n) {
    affine.store %f, %m[0] : memref<4xf32>
  }
  return
}
"""
    op = next(o for o in parse(text).walk() if isinstance(o, IfOp))
    assert not op.else_region.blocks
    assert op.then_region.block.last_op is not None


BAD = {
    "reduction-type": (_reducing("addf", "i32"), 'reduction "addf" cannot produce'),
    "reduction-kind": (_reducing("plus", "f32"), "invalid reduction value"),
    "reduction-mlir-refuses": (_reducing("maxnumf", "f32"), 'reduction "maxnumf"'),
    "index-reduction": (_reducing("addi", "index"), 'reduction "addi"'),
    "step": (
        "func.func @f(%n: index) {\n  affine.parallel (%i) = (0) to (%n) step (%n) {\n  }\n"
        "  return\n}",
        "steps must be constant integers",
    ),
    "groups": (
        "func.func @f(%n: index) {\n  affine.parallel (%i, %j) = (0) to (%n, 2) {\n  }\n"
        "  return\n}",
        "bound groups",
    ),
    "set-operands": (
        "func.func @f(%n: index) {\n  affine.if affine_set<(d0)[s0] : (d0 - s0 >= 0)>(%n) {"
        "\n  }\n  return\n}",
        "the set takes 1 dimensions and 1 symbols",
    ),
    "if-results-without-else": (
        "func.func @f(%n: index, %x: f32) {\n  %r = affine.if affine_set<(d0) : (d0 >= 0)>"
        "(%n) -> f32 {\n    affine.yield %x : f32\n  }\n  return\n}",
        "must have an else region",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_invalid_forms_are_located_errors(name: str) -> None:
    text, message = BAD[name]
    with pytest.raises(DhirError) as caught:
        dhir.parse_string(text)
    assert message in str(caught.value)
    assert "<string>:2:" in str(caught.value)
