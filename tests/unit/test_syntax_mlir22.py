"""dhir reads and prints MLIR 22 as mlir-opt-22 does: the ops xDSL 0.74 misread
(silently, or with an internal error) and a corpus of small programs, one file per
dialect, compared through mlir-opt-22's generic form."""

from pathlib import Path

import pytest
from roundtrip import assert_same_as_mlir, parse
from xdsl.dialects import arith
from xdsl.dialects.builtin import DYNAMIC_INDEX, AffineMapAttr, TensorType, VectorType, i1
from xdsl.dialects.linalg.abstract_ops import NamedOperation
from xdsl.ir.affine import AffineMap

CORPUS = Path(__file__).parent / "data" / "syntax"

AFFINE_ACCESS = """
func.func @f(%m: memref<8x8xf32>, %n: index) {
  affine.for %i = 0 to 7 {
    %v = affine.load %m[%i, %i + 1] : memref<8x8xf32>
    affine.store %v, %m[symbol(%n), %i * 2 - 1] {note} : memref<8x8xf32>
    %w = affine.vector_load %m[%i, symbol(%n) floordiv 2] : memref<8x8xf32>, vector<4xf32>
    affine.vector_store %w, %m[%n, %i] : memref<8x8xf32>, vector<4xf32>
  }
  return
}
"""

POOLING = """
func.func @p(%i: memref<1x1x4x4xf32>, %w: memref<2x2xf32>, %o: memref<1x1x3x3xf32>,
             %ii: memref<1x1x4x4xi32>, %wi: memref<2x2xi32>, %oi: memref<1x1x3x3xi32>) {
  linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%i, %w : memref<1x1x4x4xf32>, memref<2x2xf32>) outs(%o : memref<1x1x3x3xf32>)
  linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%ii, %wi : memref<1x1x4x4xi32>, memref<2x2xi32>) outs(%oi : memref<1x1x3x3xi32>)
  return
}
"""

EXECUTE_REGION = """
func.func @e(%c: i1, %m: memref<f32>, %f: f32) -> i32 {
  scf.execute_region no_inline {
    cf.cond_br %c, ^a, ^b
  ^a:
    memref.store %f, %m[] : memref<f32>
    scf.yield
  ^b:
    scf.yield
  } {note}
  %r = scf.execute_region -> i32 {
    cf.cond_br %c, ^a, ^b
  ^a:
    %x = arith.constant 1 : i32
    scf.yield %x : i32
  ^b:
    %y = arith.constant 2 : i32
    scf.yield %y : i32
  }
  return %r : i32
}
"""

MATMUL = """
#a = affine_map<(d0, d1, d2) -> (d2, d0)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @m(%a: memref<3x5xf32>, %b: memref<3x7xf32>, %c: memref<5x7xf32>, %s: memref<5x3xf32>,
             %t: tensor<5x3xi32>, %u: tensor<3x7xi32>, %v: tensor<5x7xi32>) -> tensor<5x7xi32> {
  linalg.matmul indexing_maps = [#a, #b, #c] ins(%a, %b : memref<3x5xf32>, memref<3x7xf32>) outs(%c : memref<5x7xf32>)
  linalg.matmul {note} ins(%s, %b : memref<5x3xf32>, memref<3x7xf32>) outs(%c : memref<5x7xf32>)
  %r = linalg.matmul ins(%t, %u : tensor<5x3xi32>, tensor<3x7xi32>) outs(%v : tensor<5x7xi32>) -> tensor<5x7xi32>
  return %r : tensor<5x7xi32>
}
"""

COMPARE = """
func.func @c(%a: vector<4xf32>, %i: tensor<2x?xi32>) -> (vector<4xi1>, tensor<2x?xi1>) {
  %lt = arith.cmpf olt, %a, %a : vector<4xf32>
  %eq = arith.cmpi eq, %i, %i : tensor<2x?xi32>
  return %lt, %eq : vector<4xi1>, tensor<2x?xi1>
}
"""


def test_comparisons_of_vectors_and_tensors_give_their_shape() -> None:
    types = [op.results[0].type for op in parse(COMPARE).walk() if op.name.startswith("arith.cmp")]
    assert types == [VectorType(i1, [4]), TensorType(i1, [2, DYNAMIC_INDEX])]


def test_affine_subscripts_are_dimensions_unless_marked_symbol() -> None:
    load = next(op for op in parse(AFFINE_ACCESS).walk() if op.name == "affine.load")
    assert load.properties["map"] == AffineMapAttr(AffineMap.from_callable(lambda i: (i, i + 1)))


def test_pooling_max_takes_output_and_input() -> None:
    pool = next(op for op in parse(POOLING).walk() if op.name == "linalg.pooling_nchw_max")
    assert isinstance(pool, NamedOperation)
    maximum = pool.body.block.first_op
    assert isinstance(maximum, arith.MaximumfOp)
    args = pool.body.block.args
    assert (maximum.lhs, maximum.rhs) == (args[2], args[0])


@pytest.mark.mlir
@pytest.mark.parametrize(
    "text",
    [AFFINE_ACCESS, POOLING, EXECUTE_REGION, MATMUL, COMPARE],
    ids=["affine-access", "pooling", "execute-region", "matmul", "compare"],
)
def test_xdsl_misreads_are_fixed(text: str) -> None:
    assert_same_as_mlir(text)


@pytest.mark.mlir
@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.mlir")), ids=lambda p: p.stem)
def test_corpus_round_trips_through_mlir_opt(path: Path) -> None:
    assert_same_as_mlir(path.read_text())


ALIASES_ONLY = """
// Nothing but aliases: mlir-opt-22 reads an empty module.
#map = affine_map<(d0, d1) -> (d1, d0)>
!row = memref<4xf32>
"""


def test_a_module_of_aliases_only_is_empty() -> None:
    assert list(parse(ALIASES_ONLY).ops) == []


@pytest.mark.mlir
def test_a_module_of_aliases_only_reads_as_mlir_opt_reads_it() -> None:
    assert_same_as_mlir(ALIASES_ONLY)
