"""The linalg of MLIR 22 that xDSL 0.74 could not read: `linalg.map`, `linalg.reduce` of
several inputs and inits, `linalg.elementwise` and the `cast` property of matmul-like ops.
dhir reads them in MLIR 22's custom and generic forms and prints them back as mlir-opt-22
does (the corpus data/syntax/linalg_map_reduce.mlir and linalg_elementwise.mlir round trips
in test_syntax_mlir22.py, bodies included), verifies them as MLIR does, gives the analyses
what they read and write, runs them in the interpreter as NumPy does, and natively bit for
bit as the interpreter does."""

import shutil

import islpy as isl
import numpy as np
import pytest
from single_task import single_task

import dhir
from dhir import DhirError
from dhir.analysis.regions import task_regions
from dhir.dialects.access import Kind, facts

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

PROGRAM = """
func.func @main(%a: memref<4x6xf32>, %b: memref<4x6xf32>, %c: memref<4x6xf32>,
                %i: memref<4x6xi32>, %s: memref<4xf32>, %m: memref<4xi32>, %d: memref<6xf64>) {
  linalg.map { arith.addf } ins(%a, %b : memref<4x6xf32>, memref<4x6xf32>) outs(%c : memref<4x6xf32>)
  linalg.map ins(%a : memref<4x6xf32>) outs(%c : memref<4x6xf32>)
    (%x: f32, %o: f32) {
      %j = linalg.index 1 : index
      %k = arith.index_cast %j : index to i32
      %f = arith.sitofp %k : i32 to f32
      %p = arith.mulf %x, %o : f32
      %q = arith.addf %p, %f : f32
      linalg.yield %q : f32
    }
  linalg.reduce ins(%c, %i : memref<4x6xf32>, memref<4x6xi32>) outs(%s, %m : memref<4xf32>, memref<4xi32>) dimensions = [1]
    (%x: f32, %y: i32, %ox: f32, %oy: i32) {
      %sum = arith.addf %ox, %x : f32
      %top = arith.maxsi %y, %oy : i32
      linalg.yield %sum, %top : f32, i32
    }
  linalg.reduce { arith.subf } ins(%a : memref<4x6xf32>) outs(%s : memref<4xf32>) dimensions = [1]
  linalg.reduce ins(%a : memref<4x6xf32>) outs(%d : memref<6xf64>) dimensions = [0]
    (%x: f32, %o: f64) {
      %e = arith.extf %x : f32 to f64
      %sum = arith.addf %o, %e : f64
      linalg.yield %sum : f64
    }
  return
}
"""


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [
        rng.standard_normal((4, 6)).astype(np.float32),
        rng.standard_normal((4, 6)).astype(np.float32),
        np.zeros((4, 6), np.float32),
        rng.integers(-99, 99, (4, 6)).astype(np.int32),
        rng.standard_normal(4).astype(np.float32),
        np.full(4, -1000, np.int32),
        np.ones(6),
    ]


def _expected(a, b, c, i, s, m, d):  # noqa: ANN001, ANN202 - arrays, as the program's
    c = (a * (a + b) + np.arange(6, dtype=np.float32)).astype(np.float32)
    s, m, d = s.copy(), m.copy(), d.copy()
    for r, k in np.ndindex(4, 6):  # MLIR's loop order: the reduced loop innermost
        s[r] = s[r] + c[r, k]
        m[r] = max(m[r], i[r, k])
    for r, k in np.ndindex(4, 6):
        s[r] = s[r] - a[r, k]  # the short form's body is `subf %init, %in`
    for r, k in np.ndindex(4, 6):
        d[k] = d[k] + np.float64(a[r, k])
    return [a, b, c, i, s, m, d]


def test_the_interpreter_runs_them_as_numpy() -> None:
    got = dhir.run(PROGRAM, *_inputs(), backend="interp")
    for k, (have, want) in enumerate(zip(got, _expected(*_inputs()), strict=True)):
        np.testing.assert_array_equal(have, want, f"argument {k}")


@needs_llvm
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_native_runs_equal_the_interpreter_bit_for_bit(ranks: int) -> None:
    expected = dhir.run(PROGRAM, *_inputs(), backend="interp")
    got = dhir.run(PROGRAM, *_inputs(), backend="native", ranks=ranks)
    for k, (have, want) in enumerate(zip(got, expected, strict=True)):
        assert have.dtype == want.dtype and have.tobytes() == want.tobytes(), f"argument {k}"


def test_map_and_reduce_are_structured_ops_to_the_analyses() -> None:
    """xDSL's linalg.reduce was no structured op (the analyses took it as unknown, reading
    and writing all it reaches); map and reduce read their inputs and update their inits,
    at the elements their maps reach."""
    task = single_task(
        "%a: memref<8x8xf32>, %b: memref<8xf32>, %c: memref<8x8xf32>",
        """
      %v = memref.subview %a[2, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
      %w = memref.subview %c[4, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 32>>
      linalg.map { math.absf } ins(%v : memref<2x8xf32, strided<[8, 1], offset: 16>>) outs(%w : memref<2x8xf32, strided<[8, 1], offset: 32>>)
      linalg.reduce { arith.addf } ins(%v : memref<2x8xf32, strided<[8, 1], offset: 16>>) outs(%b : memref<8xf32>) dimensions = [0]
""",
    )
    a, b, c = task.memrefs
    ops = {op.name: op for op in task.walk()}
    for name in ("linalg.map", "linalg.reduce"):
        found = facts(ops[name])
        assert found is not None and found.kind is Kind.STRUCTURED, name
    regions = task_regions(task)
    rows = isl.Set("{ [x0, x1] : 2 <= x0 <= 3 and 0 <= x1 <= 7 }")
    assert regions.read(a).is_equal(rows) and regions.written(a).is_empty()
    written = isl.Set("{ [x0, x1] : 4 <= x0 <= 5 and 0 <= x1 <= 7 }")
    assert regions.written(c).is_equal(written) and regions.read(c).is_empty()
    whole = isl.Set("{ [x0] : 0 <= x0 <= 7 }")
    assert regions.read(b).is_equal(whole) and regions.written(b).is_equal(whole)


def _main(body: str) -> str:
    return (
        "func.func @main(%a: memref<4xf64>, %c: memref<4xf64>, %d: memref<5xf64>, "
        f"%s: memref<f64>, %f: memref<4xf32>, %i: memref<4xi32>) {{\n  {body}\n  return\n}}\n"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "linalg.map ins(%a : memref<4xf64>) outs(%c : memref<4xf64>) (%x: f64) {\n"
            "    linalg.yield %x : f64\n  }",
            "2:3: error: 'linalg.map' op expects number of operands to match the arity of "
            "mapper, but got: 2 and 1",
        ),
        (
            "linalg.map ins(%a : memref<4xf64>) outs(%d : memref<5xf64>) (%x: f64, %o: f64) {\n"
            "    linalg.yield %x : f64\n  }",
            "2:3: error: 'linalg.map' op expected shape of input (4) to match shape of output (5)",
        ),
        (
            "linalg.map ins(%a : memref<4xf64>) outs(%c, %c : memref<4xf64>, memref<4xf64>)"
            " (%x: f64, %o: f64, %p: f64) {\n    linalg.yield %x : f64\n  }",
            "linalg.map takes one init",
        ),
        (
            "linalg.map { arith.addf } ins(%a : memref<4xf64>) outs(%c : memref<4xf64>)",
            "2:14: error: 'arith.addf' as the body: Expected 2 operands, but got 1",
        ),
        (
            "linalg.map { arith.nothing } ins(%a : memref<4xf64>) outs(%c : memref<4xf64>)",
            "unknown operation 'arith.nothing' as the body",
        ),
        (
            "linalg.reduce ins(%a, %a : memref<4xf64>, memref<4xf64>) outs(%s : memref<f64>)"
            " dimensions = [0] (%x: f64, %y: f64, %o: f64) {\n    linalg.yield %o : f64\n  }",
            "linalg.reduce takes as many inits (`outs`) as inputs (`ins`)",
        ),
        (
            "linalg.reduce { arith.addf } ins(%a, %a : memref<4xf64>, memref<4xf64>)"
            " outs(%s, %s : memref<f64>, memref<f64>) dimensions = [0]",
            "the short form `linalg.reduce { op }` takes one input and one init",
        ),
        (
            "linalg.reduce ins(%a : memref<4xf64>) outs(%c : memref<4xf64>) dimensions = [0]"
            " (%x: f64, %o: f64) {\n    linalg.yield %x : f64\n  }",
            "2:3: error: 'linalg.reduce' op init dimensions [4] doesn't match input "
            "dimensions after reduction []",
        ),
        (
            "linalg.reduce ins(%a : memref<4xf64>) outs(%s : memref<f64>) dimensions = [1]"
            " (%x: f64, %o: f64) {\n    linalg.yield %x : f64\n  }",
            "'linalg.reduce' op dimensions for reduction should be in the range [0, 0]",
        ),
        (
            "linalg.reduce ins(%a : memref<4xf64>) outs(%s : memref<f64>) dimensions = [0]"
            " (%x: f64, %o: f32) {\n    linalg.yield %o : f32\n  }",
            "'linalg.reduce' op output element type 'f64' does not match corresponding block "
            "argument type 'f32'",
        ),
        (
            "linalg.elementwise kind=#linalg.elementwise_kind<exp> ins(%i : memref<4xi32>)"
            " outs(%i : memref<4xi32>)",
            "2:22: error: linalg.elementwise of kind exp needs float elements, not i32",
        ),
        (
            "linalg.elementwise kind=#linalg.elementwise_kind<add> ins(%a : memref<4xf64>)"
            " outs(%c : memref<4xf64>)",
            "linalg.elementwise takes 2 inputs and one output",
        ),
        (
            "linalg.elementwise kind=#linalg.elementwise_kind<add> ins(%a, %f : memref<4xf64>,"
            " memref<4xf32>) outs(%c : memref<4xf64>)",
            "linalg.elementwise takes elements of one type, the output's (f64)",
        ),
        (
            "linalg.elementwise kind=#linalg.elementwise_kind<select> ins(%i, %a, %a :"
            " memref<4xi32>, memref<4xf64>, memref<4xf64>) outs(%c : memref<4xf64>)",
            "linalg.elementwise selects by an i1 condition, not i32",
        ),
        (
            "linalg.elementwise kind=#linalg.elementwise_kind<frob> ins(%a : memref<4xf64>)"
            " outs(%c : memref<4xf64>)",
            "2:52: error: Expected `exp`, `log`",
        ),
        (
            "linalg.matmul {cast = #linalg.type_fn<cast_weird>} ins(%a, %a : memref<4xf64>,"
            " memref<4xf64>) outs(%c : memref<4xf64>)",
            "Expected `cast_signed`, or `cast_unsigned`",
        ),
        (
            "%x = linalg.index 0 : index",
            "'linalg.index' op expected parent op with LinalgOp interface",
        ),
    ],
    ids=[
        "map-arity",
        "map-shape",
        "map-two-inits",
        "map-payload-arity",
        "map-unknown-payload",
        "reduce-uneven",
        "reduce-short-form-of-two",
        "reduce-rank",
        "reduce-dimension",
        "reduce-argument-type",
        "elementwise-float-kind",
        "elementwise-arity",
        "elementwise-mixed",
        "elementwise-select",
        "elementwise-kind",
        "type-fn",
        "index-outside",
    ],
)
def test_malformed_ops_are_refused_where_they_stand(body: str, message: str) -> None:
    with pytest.raises(DhirError, match="prog.mlir:") as caught:
        dhir.parse_string(_main(body), "prog.mlir")
    assert message in str(caught.value), str(caught.value)


TENSORS = """
func.func @main(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>, %s: tensor<3xf32>,
                %t: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %m = linalg.map { math.absf } ins(%a : tensor<4x3xf32>) outs(%b : tensor<4x3xf32>)
  %r:2 = linalg.reduce ins(%m, %a : tensor<4x3xf32>, tensor<4x3xf32>) outs(%s, %t : tensor<3xf32>, tensor<3xf32>) dimensions = [0]
    (%x: f32, %y: f32, %ox: f32, %oy: f32) {
      %sum = arith.addf %ox, %x : f32
      %top = arith.maximumf %oy, %y : f32
      linalg.yield %sum, %top : f32, f32
    }
  return %m, %r#0, %r#1 : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>
}
"""


@needs_llvm
def test_on_tensors_mlir_opt_bufferizes_them_into_what_dhir_reads() -> None:
    """Bufferized by mlir-opt-22, whose generic form of linalg.map and of a linalg.reduce
    of two inits dhir reads back."""
    a = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    inputs = [
        a,
        np.zeros((4, 3), np.float32),
        np.zeros(3, np.float32),
        np.full(3, -np.inf, np.float32),
    ]
    got = dhir.run(TENSORS, *[x.copy() for x in inputs], backend="interp")
    sums = np.zeros(3, np.float32)
    for r in range(4):
        sums = sums + np.abs(a[r])
    for have, want in zip(got[-3:], [np.abs(a), sums, a.max(axis=0)], strict=True):
        np.testing.assert_array_equal(have, want)
    native = dhir.run(TENSORS, *[x.copy() for x in inputs], backend="native", ranks=1)
    for have, want in zip(native, got, strict=True):
        assert have.tobytes() == want.tobytes()


ELEMENTWISE = """
func.func @main(%a: memref<4x3xf32>, %b: memref<4x3xf32>, %c: memref<4x3xf32>, %v: memref<3xf32>,
                %p: memref<4x3xi1>, %i: memref<4x3xi8>, %k: memref<3x5xi8>, %q: memref<4x5xi32>,
                %u: memref<4x3xi32>, %w: memref<4x3xi32>) {
  linalg.elementwise kind=#linalg.elementwise_kind<add> ins(%a, %b : memref<4x3xf32>, memref<4x3xf32>) outs(%c : memref<4x3xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<mul> indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] ins(%v, %c : memref<3xf32>, memref<4x3xf32>) outs(%c : memref<4x3xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<select> ins(%p, %c, %a : memref<4x3xi1>, memref<4x3xf32>, memref<4x3xf32>) outs(%b : memref<4x3xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<negf> ins(%b : memref<4x3xf32>) outs(%a : memref<4x3xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<max_unsigned> ins(%u, %w : memref<4x3xi32>, memref<4x3xi32>) outs(%w : memref<4x3xi32>)
  linalg.matmul {cast = #linalg.type_fn<cast_unsigned>} ins(%i, %k : memref<4x3xi8>, memref<3x5xi8>) outs(%q : memref<4x5xi32>)
  return
}
"""


def _elementwise_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [
        rng.standard_normal((4, 3)).astype(np.float32),
        rng.standard_normal((4, 3)).astype(np.float32),
        np.zeros((4, 3), np.float32),
        rng.standard_normal(3).astype(np.float32),
        rng.integers(0, 2, (4, 3)).astype(np.bool_),
        rng.integers(-128, 128, (4, 3)).astype(np.int8),
        rng.integers(-128, 128, (3, 5)).astype(np.int8),
        np.zeros((4, 5), np.int32),
        rng.integers(-9, 9, (4, 3)).astype(np.int32),
        rng.integers(-9, 9, (4, 3)).astype(np.int32),
    ]


def test_the_interpreter_runs_elementwise_kinds_and_unsigned_casts_as_numpy() -> None:
    a, b, _, v, p, i, k, _, u, w = _elementwise_inputs()
    got = dhir.run(ELEMENTWISE, *_elementwise_inputs(), backend="interp")
    c = (a + b) * v
    np.testing.assert_array_equal(got[2], c)
    np.testing.assert_array_equal(got[1], np.where(p, c, a))
    np.testing.assert_array_equal(got[0], -np.where(p, c, a))
    unsigned = np.maximum(u.view(np.uint32), w.view(np.uint32)).view(np.int32)
    np.testing.assert_array_equal(got[9], unsigned)
    product = i.view(np.uint8).astype(np.int32) @ k.view(np.uint8).astype(np.int32)
    np.testing.assert_array_equal(got[7], product)  # cast_unsigned: zero-extended


@needs_llvm
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_elementwise_runs_natively_as_the_interpreter_does(ranks: int) -> None:
    expected = dhir.run(ELEMENTWISE, *_elementwise_inputs(), backend="interp")
    got = dhir.run(ELEMENTWISE, *_elementwise_inputs(), backend="native", ranks=ranks)
    for k, (have, want) in enumerate(zip(got, expected, strict=True)):
        assert have.dtype == want.dtype and have.tobytes() == want.tobytes(), f"argument {k}"


# Named ops convert their inputs to the output's float type (arith.extf, arith.truncf in
# the body they are given): the interpreter refused the casts ("'arith.extf' is not
# supported by the interpreter" at the matmul) while native code ran them.
MIXED_FLOATS = """
func.func @main(%a: memref<4x3xf16>, %b: memref<3x5xf16>, %c: memref<4x5xf32>,
                %d: memref<4x5xf64>, %g: memref<5x2xf64>, %e: memref<4x2xf32>) {
  linalg.matmul ins(%a, %b : memref<4x3xf16>, memref<3x5xf16>) outs(%c : memref<4x5xf32>)
  linalg.matmul ins(%d, %g : memref<4x5xf64>, memref<5x2xf64>) outs(%e : memref<4x2xf32>)
  return
}
"""


def _mixed_float_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(4)
    return [
        rng.integers(-8, 8, (4, 3)).astype(np.float16),  # small integers: exact products
        rng.integers(-8, 8, (3, 5)).astype(np.float16),
        np.ones((4, 5), np.float32),
        rng.integers(-8, 8, (4, 5)).astype(np.float64),
        rng.integers(-8, 8, (5, 2)).astype(np.float64),
        np.zeros((4, 2), np.float32),
    ]


def test_named_ops_convert_floats_to_the_output_type_on_both_backends() -> None:
    a, b, c, d, g, _ = _mixed_float_inputs()
    got = dhir.run(MIXED_FLOATS, *_mixed_float_inputs(), backend="interp")
    np.testing.assert_array_equal(got[2], c + a.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_array_equal(got[5], d.astype(np.float32) @ g.astype(np.float32))
    if shutil.which("mlir-opt-22") is not None:
        native = dhir.run(MIXED_FLOATS, *_mixed_float_inputs(), backend="native")
        for k, (have, want) in enumerate(zip(native, got, strict=True)):
            assert have.tobytes() == want.tobytes(), f"argument {k}"


@pytest.mark.parametrize(
    ("op", "inputs"),
    [("max", 2), ("add", 2), ("mul", 2), ("exp", 1), ("copy", 1), ("fill", 1), ("select", 3)],
)
def test_named_ops_short_of_inputs_are_refused_at_their_line(op: str, inputs: int) -> None:
    """Before: `linalg.max outs(%c ...)` (its `ins(...)` left out) ended dhir-opt in an
    internal error (xDSL's IndexError); `linalg.exp outs(%c ...)`, `copy` and `fill`
    parsed, and the interpreter ran them as nothing (exit 0, %c as it was)."""
    plural = "s" if inputs != 1 else ""
    with pytest.raises(DhirError) as caught:
        dhir.parse_string(_main(f"linalg.{op} outs(%c : memref<4xf64>)"), "prog.mlir")
    wanted = f"prog.mlir:2:{len(op) + 11}: error: linalg.{op} takes {inputs} input{plural} and one"
    assert wanted in str(caught.value), str(caught.value)
    too_many = f"linalg.{op} ins(%a, %a, %a, %a : {', '.join(['memref<4xf64>'] * 4)})"
    with pytest.raises(DhirError, match=f"linalg.{op} takes {inputs} input"):
        dhir.parse_string(_main(f"{too_many} outs(%c : memref<4xf64>)"), "prog.mlir")
