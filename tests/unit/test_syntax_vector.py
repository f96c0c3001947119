"""The vector ops dhir adds to xDSL 0.74's dialect (contract, mask, gather/scatter,
expandload/compressstore, multi_reduction, scan, vscale, scalable.insert/extract,
interleave/deinterleave; load/store of memrefs of vectors; bitcast of index vectors).
Their syntax round trips through mlir-opt-22 in the corpus (data/syntax/vector_*.mlir,
test_syntax_mlir22.py); here: errors, the memory they touch, and how both backends run
them (natively, as MLIR lowers them; the interpreter refuses them at their line)."""

import shutil
import subprocess

import numpy as np
import pytest
from roundtrip import assert_read_as_mlir_says

import dhir
from dhir import parse_string
from dhir.analysis.dependences import task_graph
from dhir.dialects.dhir import ScheduleOp

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

DOT = (
    "{indexing_maps = [affine_map<(k) -> (k)>, affine_map<(k) -> (k)>, "
    'affine_map<(k) -> ()>], iterator_types = ["reduction"]}'
)


def _mlir_opt_agrees_where_present(text: str, valid: bool) -> None:
    if shutil.which("mlir-opt-22") is not None:
        done = subprocess.run(["mlir-opt-22"], input=text, capture_output=True, text=True)
        assert (done.returncode == 0) is valid, done.stderr


def _in_func(line: str) -> str:
    return (
        f"func.func @f(%v: vector<4xf32>, %s: f32, %m: vector<4xi1>) {{\n  {line}\n  return\n}}\n"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%r = vector.contract {indexing_maps = []} %v, %v, %s : vector<4xf32>, "
         "vector<4xf32> into f32", "2:24: error: the trait needs indexing_maps and iterator_types"),
        (f"%r = vector.contract {DOT.replace('reduction', 'sideways')} %v, %v, %s : "
         "vector<4xf32>, vector<4xf32> into f32", "\"sideways\" is not 'parallel' or 'reduction'"),
        (f"%r = vector.contract {DOT.replace('(k) -> ()', '(k, l) -> ()')} %v, %v, %s : "
         "vector<4xf32>, vector<4xf32> into f32", "expected indexing maps of 1 dimensions"),
        ("%r = vector.mask %m, %s { vector.reduction <add>, %v : vector<4xf32> into f32 } : "
         "vector<4xi1>", "a passthru value needs a result type"),
        ("%r = vector.mask %m { vector.reduction <add>, %v : vector<4xf32> into f32 } : "
         "vector<4xi1> -> i32", "the region must yield values of the result types"),
        ("%r = vector.scalable.insert %v, %v[0] : vector<4xf32> into vector<4xf32>",
         "expected a scalable vector, not vector<4xf32>"),
        ("%r = vector.interleave %v, %v : vector<4xf32> -> vector<7xf32>",
         "vector<7xf32> is not vector<4xf32> with its last dimension doubled"),
        ("%r = vector.bitcast %v : vector<4xf32> to vector<3xi32>",
         "the last dimensions must hold the same number of bits"),
    ],
)  # fmt: skip
def test_malformed_ops_are_located_errors(line: str, message: str) -> None:
    with pytest.raises(dhir.DhirError) as error:
        parse_string(_in_func(line), "bad.mlir")
    assert str(error.value).startswith("bad.mlir:2:") and message in str(error.value)


MATMUL = (
    "{indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, "
    'affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}'
)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f"%r = vector.contract {MATMUL.replace('(k, n)>', '(n)>')} %a, %n, %c : "
         "vector<2x4xf32>, vector<3xf32> into vector<2x3xf32>",
         "expected at least one contracting dimension pair"),
        (f"%r = vector.contract {MATMUL.replace('(k, n)>', '(k)>')} %a, %k, %c : "
         "vector<2x4xf32>, vector<4xf32> into vector<2x3xf32>",
         "expected all dimensions to be either a LHS or a RHS dimension"),
        (f"%r = vector.contract {MATMUL} %a, %b, %a : vector<2x4xf32>, vector<4x3xf32> into "
         "vector<2x4xf32>", "invalid accumulator/result vector shape"),
        ("%r = vector.contract {indexing_maps = [affine_map<(m, k) -> (m, k)>, "
         "affine_map<(m, k) -> (k)>, affine_map<(m, k) -> ()>], iterator_types = "
         '["reduction", "reduction"]} %a, %k, %s : vector<2x4xf32>, vector<4xf32> into f32',
         "invalid accumulator/result vector shape"),
        (f"%r = vector.contract {MATMUL} %a, %w, %c : vector<2x4xf32>, vector<5x3xf32> into "
         "vector<2x3xf32>", "invalid contracting dimension map"),
        (f"%r = vector.contract {MATMUL} %k, %b, %c : "
         "vector<4xf32>, vector<4x3xf32> into vector<2x3xf32>",
         "expected indexing map 0 to have 1 number of outputs"),
        (f"%r = vector.contract {MATMUL.replace('(m, k)>', '(k, k)>')} %a, %b, %c : "
         "vector<2x4xf32>, vector<4x3xf32> into vector<2x3xf32>",
         "expected indexing map 0 to be a projected permutation of its inputs"),
    ],
)  # fmt: skip
def test_malformed_contractions_are_refused_as_mlir_refuses_them(line: str, message: str) -> None:
    """mlir-opt-22 refused them (the native build stopped in mlir-opt, at the printed
    program's line); dhir accepted them, and the interpreter ran them."""
    program = (
        "func.func @f(%a: vector<2x4xf32>, %b: vector<4x3xf32>, %c: vector<2x3xf32>,"
        " %n: vector<3xf32>, %k: vector<4xf32>, %w: vector<5x3xf32>, %s: f32) {\n"
        f"  {line}\n  return\n}}\n"
    )
    if shutil.which("mlir-opt-22") is not None:
        checked = subprocess.run(
            ["mlir-opt-22", "-"], input=program, capture_output=True, text=True, check=False
        )
        assert checked.returncode != 0 and message in checked.stderr, checked.stderr
    with pytest.raises(dhir.DhirError) as error:
        parse_string(program, "bad.mlir")
    assert str(error.value).startswith("bad.mlir:2:8:") and message in str(error.value)


MEMORY = """
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>, %d: memref<8xf32>) {
  dhir.schedule %a, %b, %c, %d {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
      %m = arith.constant dense<true> : vector<8xi1>
      %i = arith.constant dense<[7, 6, 5, 4, 3, 2, 1, 0]> : vector<8xi32>
      vector.scatter %b[%c0][%i], %m, %v : memref<8xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32>
    }
    %t1 = dhir.task %cpu, %c, %d {
      %c0 = arith.constant 0 : index
      %z = arith.constant 0.0 : f32
      %m = arith.constant dense<true> : vector<8xi1>
      %v = vector.mask %m { vector.transfer_read %c[%c0], %z : memref<8xf32>, vector<8xf32> } : vector<8xi1> -> vector<8xf32>
      vector.mask %m { vector.transfer_write %v, %d[%c0] : vector<8xf32>, memref<8xf32> } : vector<8xi1>
    }
  }
  return
}
"""


def test_memory_under_a_mask_or_behind_a_scatter_is_seen() -> None:
    schedule = next(op for op in parse_string(MEMORY).walk() if isinstance(op, ScheduleOp))
    names = {value: value.name_hint for value in schedule.args}
    found = [
        ({names[v] for v in e.reads}, {names[v] for v in e.writes})
        for e in task_graph(schedule).effects
    ]
    # vector.scatter is not in dhir's table of accesses: it may read and write %b.
    assert found == [({"a", "b"}, {"b"}), ({"c"}, {"d"})]


NATIVE = f"""
func.func @main(%a: memref<8xf32>, %sums: memref<2xf32>, %rev: memref<8xf32>, %odd: memref<8xf32>,
                %packed: memref<8xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
  %dot = vector.contract {DOT} %v, %v, %z : vector<8xf32>, vector<8xf32> into f32
  memref.store %dot, %sums[%c0] : memref<2xf32>
  %first = arith.constant dense<[true, true, true, true, true, false, false, false]> : vector<8xi1>
  %part = vector.mask %first {{ vector.reduction <add>, %v : vector<8xf32> into f32 }} : vector<8xi1> -> f32
  memref.store %part, %sums[%c1] : memref<2xf32>
  %all = arith.constant dense<true> : vector<8xi1>
  %back = arith.constant dense<[7, 6, 5, 4, 3, 2, 1, 0]> : vector<8xi32>
  %r = vector.gather %a[%c0][%back], %all, %v : memref<8xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
  vector.store %r, %rev[%c0] : memref<8xf32>, vector<8xf32>
  %twice = vector.interleave %r, %v : vector<8xf32> -> vector<16xf32>
  %even, %o = vector.deinterleave %twice : vector<16xf32> -> vector<8xf32>
  vector.store %o, %odd[%c0] : memref<8xf32>, vector<8xf32>
  %odds = arith.constant dense<[false, true, false, true, false, true, false, true]> : vector<8xi1>
  vector.compressstore %packed[%c0], %odds, %v : memref<8xf32>, vector<8xi1>, vector<8xf32>
  return
}}
"""


@needs_llvm
def test_native_backend_runs_the_new_ops_as_numpy_does() -> None:
    a = np.arange(1, 9, dtype=np.float32)
    outputs = [np.zeros(2, np.float32), *(np.zeros(8, np.float32) for _ in range(3))]
    _, sums, rev, odd, packed = dhir.run(parse_string(NATIVE, "prog.mlir"), a, *outputs, ranks=1)
    np.testing.assert_array_equal(sums, [a @ a, a[:5].sum()])
    np.testing.assert_array_equal(rev, a[::-1])
    np.testing.assert_array_equal(odd, a)
    np.testing.assert_array_equal(packed, [*a[1::2], 0, 0, 0, 0])


@needs_llvm
@pytest.mark.parametrize(
    "line",
    [
        "%x = vector.multi_reduction <add>, %v, %z [0] : vector<8xf32> to f32\n"
        "  memref.store %x, %a[%c0] : memref<8xf32>",
        "%x:2 = vector.scan <add>, %v, %zs {reduction_dim = 0 : i64, inclusive = true} : "
        "vector<8xf32>, vector<f32>\n  vector.store %x#0, %a[%c0] : memref<8xf32>, vector<8xf32>",
    ],
)
def test_ops_mlir_cannot_lower_natively_are_errors(line: str) -> None:
    # dhir's pipeline (convert-vector-to-llvm) leaves them in place: refused at the op.
    op = next(word for word in line.split() if word.startswith("vector."))
    program = parse_string(REFUSED.replace("OP", line), "prog.mlir")
    at = REFUSED.splitlines().index("  OP") + 1
    column = 3 + line.index(op)  # at the op's name, after its results
    with pytest.raises(
        dhir.DhirError,
        match=f"prog.mlir:{at}:{column}: error: '{op}' is not supported by the native",
    ):
        dhir.run(program, np.zeros(8, np.float32), ranks=1)


REFUSED = """
func.func @main(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
  %m = arith.constant dense<true> : vector<8xi1>
  %i = arith.constant dense<[7, 6, 5, 4, 3, 2, 1, 0]> : vector<8xi32>
  %zs = vector.broadcast %z : f32 to vector<f32>
  OP
  return
}
"""


@pytest.mark.parametrize(
    "line",
    [
        f"%x = vector.contract {DOT[:-1]}, kind = #vector.kind<mul>}} %v, %v, %z : vector<8xf32>, vector<8xf32> into f32",
        "%x = vector.mask %m { vector.transfer_read %a[%c0], %z : memref<8xf32>, vector<8xf32> } : vector<8xi1> -> vector<8xf32>",
        "%x = vector.multi_reduction <add>, %v, %z [0] : vector<8xf32> to f32",
        "%x:2 = vector.scan <add>, %v, %zs {reduction_dim = 0 : i64, inclusive = true} : vector<8xf32>, vector<f32>",
        "%x = vector.vscale",
    ],
)  # fmt: skip
def test_interpreter_refuses_the_new_ops_at_their_line(line: str) -> None:
    op = next(word for word in line.split() if word.startswith("vector."))
    at = REFUSED.splitlines().index("  OP") + 1
    with pytest.raises(dhir.DhirError) as error:
        program = parse_string(REFUSED.replace("OP", line), "prog.mlir")
        dhir.run(program, np.zeros(8, np.float32), backend="interp")
    assert str(error.value).startswith(f"prog.mlir:{at}:")
    assert f"'{op}' is not supported by the interpreter" in str(error.value)


STRIDED = """
func.func @f(%v: vector<4x6xf32>, %w: vector<3xf32>) -> (vector<2x3xf32>, vector<4x6xf32>) {
  %s = vector.extract_strided_slice %v {offsets = [OFFSETS], sizes = [2, 3], strides = [STRIDES]} : vector<4x6xf32> to vector<2x3xf32>
  %t = vector.insert_strided_slice %w, %v {offsets = [INTO], strides = [1]} : vector<3xf32> into vector<4x6xf32>
  return %s, %t : vector<2x3xf32>, vector<4x6xf32>
}
"""


@pytest.mark.parametrize(
    "offsets, strides, into, valid",
    [
        ("2, 3", "1, 1", "3, 3", True),
        ("3, 3", "1, 1", "0, 0", False),  # rows 3 and 4 of 4
        ("0, 4", "1, 1", "0, 0", False),  # columns 4 to 6 of 6
        ("0, 0", "2, 1", "0, 0", False),  # MLIR 22 takes strides of 1 only
        ("0, 0", "1, 1", "0, 4", False),  # columns 4 to 6 of 6
        ("0, 0", "1, 1", "4, 0", False),  # row 4 of 4
        ("0, 0", "1, 1", "0", False),  # an offset for each dimension of the destination
    ],
)
def test_strided_slices_verify_as_mlir_s(
    offsets: str, strides: str, into: str, valid: bool
) -> None:
    """dhir took slices past the vector's end (the interpreter's NumPy slice stopped
    there) and strides other than 1, which mlir-opt-22 refuses."""
    text = STRIDED.replace("OFFSETS", offsets).replace("STRIDES", strides).replace("INTO", into)
    assert_read_as_mlir_says(text, valid, r"prog.mlir:[34]:\d+: error: ", "prog.mlir")
    _mlir_opt_agrees_where_present(text, valid)


@pytest.mark.parametrize(
    "line, valid",
    [
        ("%x = vector.shape_cast %w : vector<4x6xf32> to vector<24xf32>", True),
        ("%x = vector.shape_cast %w : vector<4x6xf32> to vector<5x5xf32>", False),
        ("%x = vector.shape_cast %w : vector<4x6xf32> to vector<24xi32>", False),
        ("%x = vector.transpose %w, [1, 0] : vector<4x6xf32> to vector<6x4xf32>", True),
        ("%x = vector.transpose %w, [0, 0] : vector<4x6xf32> to vector<4x6xf32>", False),
        ("%x = vector.transpose %w, [1, 0] : vector<4x6xf32> to vector<4x6xf32>", False),
        ("%x = vector.constant_mask [3, 2] : vector<4x6xi1>", True),
        ("%x = vector.constant_mask [0, 0] : vector<4x6xi1>", True),
        ("%x = vector.constant_mask [3] : vector<4x6xi1>", False),
        ("%x = vector.constant_mask [5, 2] : vector<4x6xi1>", False),
        ("%x = vector.constant_mask [0, 2] : vector<4x6xi1>", False),
    ],
)
def test_lane_moves_verify_as_mlir_s(line: str, valid: bool) -> None:
    """dhir took shape casts and transposes to a type of other lanes and masks of other
    ranks or past the shape, which the interpreter would have run on lanes the type
    does not have (a one-dimensional mask of a matrix masked its rows only)."""
    text = f"func.func @f(%w: vector<4x6xf32>) {{\n  {line}\n  return\n}}\n"
    assert_read_as_mlir_says(text, valid, r"prog.mlir:2:8: error: ", "prog.mlir")
    _mlir_opt_agrees_where_present(text, valid)
