"""The interpreter refuses reading an element of the program's own buffers that nothing
wrote (MLIR leaves it undefined; native code reads whatever the memory held), at the op
that reads it, and lets copies carry such elements until something reads them."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dhir
from dhir import DhirError
from dhir.backends.interp import run_interp

FAST = settings(max_examples=10, deadline=None)


def run(src: str, *inputs: object) -> list[np.ndarray]:
    return run_interp(dhir.parse_string(src, "prog.mlir"), "main", list(inputs))


def run_error(src: str, *inputs: object) -> str:
    with pytest.raises(DhirError) as caught:
        run(src, *inputs)
    return str(caught.value)


# Writes every element of a 2-D buffer but one, then sums them all.
ALL_BUT_ONE = """
func.func @main(%out: memref<1xi64>, %skip_i: index, %skip_j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0 : i64
  %buf = memref.{alloc}() : memref<3x4xi64>
  scf.for %i = %c0 to %c3 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %si = arith.cmpi ne, %i, %skip_i : index
      %sj = arith.cmpi ne, %j, %skip_j : index
      %write = arith.ori %si, %sj : i1
      scf.if %write {
        %v = arith.index_cast %j : index to i64
        memref.store %v, %buf[%i, %j] : memref<3x4xi64>
      }
    }
  }
  %sum = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %zero) -> i64 {
    %row = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %acc) -> i64 {
      %v = memref.load %buf[%i, %j] : memref<3x4xi64>
      %s = arith.addi %a, %v : i64
      scf.yield %s : i64
    }
    scf.yield %row : i64
  }
  memref.store %sum, %out[%c0] : memref<1xi64>
  return
}
"""


@FAST
@given(st.sampled_from(["alloc", "alloca"]), st.integers(0, 2), st.integers(0, 3))
def test_one_missing_write_is_caught_at_the_load(alloc: str, i: int, j: int) -> None:
    src = ALL_BUT_ONE.replace("{alloc}", alloc)
    message = run_error(src, np.zeros(1, np.int64), i, j)
    assert f"prog.mlir:22:12: error: 'memref.load' reads element [{i}, {j}] of the buffer " in (
        message
    )
    assert "allocated at prog.mlir:8:10 before anything wrote it" in message
    assert "write every element the program reads" in message


def test_every_element_written_runs() -> None:
    (out, _, _) = run(ALL_BUT_ONE.replace("{alloc}", "alloc"), np.zeros(1, np.int64), 5, 5)
    assert out[0] == 3 * (0 + 1 + 2 + 3)


# A 4x4 buffer whose interior alone is written (a halo with unwritten corners), copied
# whole into another buffer, from which the interior (or, with %at, any element) is read.
HALO = """
func.func @main(%out: memref<2x2xf64>, %at: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %one = arith.constant 1.5 : f64
  %a = memref.alloc() : memref<4x4xf64>
  %inner = memref.subview %a[1, 1] [2, 2] [1, 1]
      : memref<4x4xf64> to memref<2x2xf64, strided<[4, 1], offset: 5>>
  linalg.fill ins(%one : f64) outs(%inner : memref<2x2xf64, strided<[4, 1], offset: 5>>)
  %b = memref.alloc() : memref<4x4xf64>
  {copy}
  %view = memref.subview %b[1, 1] [2, 2] [1, 1]
      : memref<4x4xf64> to memref<2x2xf64, strided<[4, 1], offset: 5>>
  memref.copy %view, %out : memref<2x2xf64, strided<[4, 1], offset: 5>> to memref<2x2xf64>
  %v = memref.load %b[%at, %at] : memref<4x4xf64>
  memref.store %v, %out[%c0, %c0] : memref<2x2xf64>
  return
}
"""
COPIES = {
    "memref.copy": "memref.copy %a, %b : memref<4x4xf64> to memref<4x4xf64>",
    "linalg.copy": "linalg.copy ins(%a : memref<4x4xf64>) outs(%b : memref<4x4xf64>)",
    "linalg.generic": """linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x4xf64>) outs(%b : memref<4x4xf64>) {
    ^bb0(%x: f64, %y: f64):
      linalg.yield %x : f64
  }""",
}


@pytest.mark.parametrize("copy", list(COPIES))
def test_a_copy_of_a_partly_written_buffer_carries_what_was_written(copy: str) -> None:
    src = HALO.replace("{copy}", COPIES[copy])
    (out, _) = run(src, np.zeros((2, 2)), 1)  # the interior, written, read through the copy
    assert (out == 1.5).all()
    message = run_error(src, np.zeros((2, 2)), 0)  # a corner: copied, but never written
    assert "error: 'memref.load' reads element [0, 0] of the buffer " in message
    assert "allocated at prog.mlir:12:8 before anything wrote it: it is a copy of element " in (
        message
    )
    assert "[0, 0] of the buffer allocated at prog.mlir:8:8, which nothing wrote either" in (
        message
    )


CHAINED = """
func.func @main(%out: memref<1xf64>, %at: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.5 : f64
  %a = memref.alloc() : memref<4x4xf64>
  %inner = memref.subview %a[1, 1] [2, 2] [1, 1]
      : memref<4x4xf64> to memref<2x2xf64, strided<[4, 1], offset: 5>>
  linalg.fill ins(%one : f64) outs(%inner : memref<2x2xf64, strided<[4, 1], offset: 5>>)
  %t = memref.alloc() : memref<16xf64>
  %flat = memref.collapse_shape %a [[0, 1]] : memref<4x4xf64> into memref<16xf64>
  memref.copy %flat, %t : memref<16xf64> to memref<16xf64>
  %odd = memref.subview %t[1] [8] [2] : memref<16xf64> to memref<8xf64, strided<[2], offset: 1>>
  %b = memref.alloc() : memref<2x8xf64>
  %row = memref.subview %b[1, 0] [1, 8] [1, 1]
      : memref<2x8xf64> to memref<8xf64, strided<[1], offset: 8>>
  memref.copy %odd, %row : memref<8xf64, strided<[2], offset: 1>> to memref<8xf64, strided<[1], offset: 8>>
  %v = memref.load %b[%c0, %at] : memref<2x8xf64>
  memref.store %v, %out[%c0] : memref<1xf64>
  return
}
"""


def test_a_copy_of_a_copy_names_the_original() -> None:
    """Through a reshape and a strided view, the original element and buffer are named."""
    message = run_error(CHAINED.replace("%b[%c0, %at]", "%b[%c1, %at]"), np.zeros(1), 7)
    # b[1, 7] is t[15], a copy of a[3, 3].
    assert "'memref.load' reads element [1, 7] of the buffer allocated at prog.mlir:14:8" in (
        message
    )
    assert "it is a copy of element [3, 3] of the buffer allocated at prog.mlir:6:8" in message
    message = run_error(CHAINED, np.zeros(1), 7)  # b[0, 7]: not a copy of anything
    assert "'memref.load' reads element [0, 7] of the buffer allocated at prog.mlir:14:8 " in (
        message
    )
    assert "before anything wrote it (MLIR" in message


def test_a_copy_into_an_argument_reads_what_it_copies() -> None:
    """What the program hands back must be written: copying an unwritten element into an
    argument is refused at the copy (the case docs/semantics.md tells of)."""
    view = "%view = memref.subview %b[1, 1] [2, 2] [1, 1]\n      : memref<4x4xf64> to memref<2x2xf64, strided<[4, 1], offset: 5>>"
    shifted = "%view = memref.subview %a[1, 0] [2, 2] [1, 1]\n      : memref<4x4xf64> to memref<2x2xf64, strided<[4, 1], offset: 4>>"
    src = HALO.replace("{copy}", "").replace(view, shifted)
    src = src.replace("offset: 5>> to memref<2x2xf64>", "offset: 4>> to memref<2x2xf64>")
    message = run_error(src, np.zeros((2, 2)), 1)
    assert "prog.mlir:16:3: error: 'memref.copy' reads element [1, 0] of the buffer " in message
    assert "allocated at prog.mlir:8:8" in message


def test_copying_a_written_view_into_an_argument_runs() -> None:
    src = HALO.replace("{copy}", COPIES["memref.copy"]).replace(
        "%v = memref.load %b[%at, %at]", "%v = memref.load %a[%at, %at]"
    )
    (out, _) = run(src, np.zeros((2, 2)), 2)
    assert (out == 1.5).all()


# Writes a[i] where mask[i] is set, copies a into b, sums b where the mask is set and
# adds b[probe].
PARTLY_WRITTEN = """
func.func @main(%mask: memref<6xi32>, %out: memref<1xi64>, %probe: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0 : i32
  %a = memref.alloc() : memref<6xi64>
  %b = memref.alloc() : memref<6xi64>
  scf.for %i = %c0 to %c6 step %c1 {
    %m = memref.load %mask[%i] : memref<6xi32>
    %on = arith.cmpi ne, %m, %zero : i32
    scf.if %on {
      %v = arith.index_cast %i : index to i64
      memref.store %v, %a[%i] : memref<6xi64>
    }
  }
  memref.copy %a, %b : memref<6xi64> to memref<6xi64>
  %sum0 = memref.load %b[%probe] : memref<6xi64>
  %sum = scf.for %i = %c0 to %c6 step %c1 iter_args(%acc = %sum0) -> i64 {
    %m = memref.load %mask[%i] : memref<6xi32>
    %on = arith.cmpi ne, %m, %zero : i32
    %next = scf.if %on -> i64 {
      %v = memref.load %b[%i] : memref<6xi64>
      %s = arith.addi %acc, %v : i64
      scf.yield %s : i64
    } else {
      scf.yield %acc : i64
    }
    scf.yield %next : i64
  }
  memref.store %sum, %out[%c0] : memref<1xi64>
  return
}
"""


@FAST
@given(st.lists(st.booleans(), min_size=6, max_size=6), st.integers(0, 5))
def test_a_copy_carries_which_elements_were_written(mask: list[bool], probe: int) -> None:
    inputs = (np.array(mask, np.int32), np.zeros(1, np.int64), probe)
    if mask[probe]:
        (_, out, _) = run(PARTLY_WRITTEN, *inputs)
        assert out[0] == probe + sum(i for i, on in enumerate(mask) if on)
    else:
        message = run_error(PARTLY_WRITTEN, *inputs)
        assert f"prog.mlir:18:11: error: 'memref.load' reads element [{probe}] of the " in message
        assert "allocated at prog.mlir:8:8" in message  # %b, which the copy filled


OPS_THAT_READ = {
    # An accumulation into an output nothing wrote.
    "linalg.matmul": (
        "%m = memref.alloc() : memref<2x2xf64>\n"
        "  linalg.matmul ins(%out, %out : memref<2x2xf64>, memref<2x2xf64>)"
        " outs(%m : memref<2x2xf64>)",
        "'linalg.matmul' reads element [0, 0]",
    ),
    # A vector load copies; the vector's use reads (test_vectors_carry_...).
    "vector.load": (
        "%m = memref.alloca() : memref<4xf64>\n"
        "  memref.store %x, %m[%c0] : memref<4xf64>\n"
        "  %v = vector.load %m[%c0] : memref<4xf64>, vector<4xf64>\n"
        "  %s = vector.reduction <add>, %v : vector<4xf64> into f64",
        "'vector.reduction' uses lane [1] of a vector loaded from elements nothing wrote "
        "('vector.load' at prog.mlir:9:8 read element [1] of the buffer",
    ),
    "vector.transfer_read": (
        "%m = memref.alloca() : memref<4xf64>\n"
        "  %v = vector.transfer_read %m[%c0], %x {in_bounds = [true]}"
        " : memref<4xf64>, vector<2xf64>\n"
        "  %s = vector.reduction <add>, %v : vector<2xf64> into f64",
        "'vector.reduction' uses lane [0] of a vector loaded from elements nothing wrote "
        "('vector.transfer_read' at prog.mlir:8:8 read element [0] of the buffer",
    ),
    "memref.atomic_rmw": (
        "%m = memref.alloca() : memref<4xf64>\n"
        "  %old = memref.atomic_rmw addf %x, %m[%c0] : (f64, memref<4xf64>) -> f64",
        "'memref.atomic_rmw' reads element [0]",
    ),
    "memref.reinterpret_cast": (
        "%m = memref.alloc() : memref<2x2xf64>\n"
        "  memref.store %x, %m[%c0, %c0] : memref<2x2xf64>\n"
        "  %r = memref.reinterpret_cast %m to offset: [1], sizes: [3], strides: [1]"
        " : memref<2x2xf64> to memref<3xf64, strided<[1], offset: 1>>\n"
        "  %v = memref.load %r[%c0] : memref<3xf64, strided<[1], offset: 1>>",
        "'memref.load' reads element [0, 1]",
    ),
    "memref.extract_strided_metadata": (
        "%m = memref.alloc() : memref<2x2xf64>\n"
        "  %s = memref.subview %m[1, 0] [1, 2] [1, 1]"
        " : memref<2x2xf64> to memref<2xf64, strided<[1], offset: 2>>\n"
        "  linalg.fill ins(%x : f64) outs(%s : memref<2xf64, strided<[1], offset: 2>>)\n"
        "  %b, %o, %n, %st = memref.extract_strided_metadata %s"
        " : memref<2xf64, strided<[1], offset: 2>> -> memref<f64>, index, index, index\n"
        "  %r = memref.reinterpret_cast %b to offset: [0], sizes: [4], strides: [1]"
        " : memref<f64> to memref<4xf64>\n"
        "  %v = vector.load %r[%c0] : memref<4xf64>, vector<4xf64>\n"
        "  %sum = vector.reduction <add>, %v : vector<4xf64> into f64",
        "'vector.load' at prog.mlir:12:8 read element [0, 0]",
    ),
    "memref.view": (
        "%bytes = memref.alloc() : memref<32xi8>\n"
        "  %m = memref.view %bytes[%c0][] : memref<32xi8> to memref<4xf64>\n"
        "  memref.store %x, %m[%c0] : memref<4xf64>\n"
        "  %v = memref.load %bytes[%c8] : memref<32xi8>",
        "'memref.load' reads element [8]",
    ),
}
READER = """
memref.global "private" @g : memref<4xf64> = uninitialized
func.func @main(%out: memref<2x2xf64>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 2.0 : f64
  {ops}
  return
}
"""


@pytest.mark.parametrize("op", list(OPS_THAT_READ))
def test_reads_of_unwritten_elements_are_refused(op: str) -> None:
    ops, expected = OPS_THAT_READ[op]
    message = run_error(READER.replace("{ops}", ops), np.ones((2, 2)))
    # At the allocating op's name, after the result (`%m = `) that line 7 starts with.
    allocated = f"allocated at prog.mlir:7:{3 + ops.index('= ') + 2}"
    assert expected in message and allocated in message


def test_a_memref_global_without_initial_value_is_unwritten() -> None:
    ops = "%g = memref.get_global @g : memref<4xf64>\n  %v = memref.load %g[%c0] : memref<4xf64>"
    message = run_error(READER.replace("{ops}", ops), np.ones((2, 2)))
    assert "'memref.load' reads element [0] of @g, the memref.global without initial" in message
    assert "declared at prog.mlir:2:1" in message


WRITES_THEN_READS = {
    "vector.store": "%w = vector.broadcast %x : f64 to vector<4xf64>\n"
    "  vector.store %w, %m[%c0] : memref<4xf64>, vector<4xf64>",
    "vector.transfer_write": "%w = vector.broadcast %x : f64 to vector<4xf64>\n"
    "  vector.transfer_write %w, %m[%c0] {in_bounds = [true]} : vector<4xf64>, memref<4xf64>",
    "linalg.fill": "linalg.fill ins(%x : f64) outs(%m : memref<4xf64>)",
    "memref.view": "%v8 = memref.view %bytes[%c0][] : memref<32xi8> to memref<4xf64>\n"
    "  linalg.fill ins(%x : f64) outs(%v8 : memref<4xf64>)",
}


@pytest.mark.parametrize("op", list(WRITES_THEN_READS))
def test_writers_mark_what_they_write(op: str) -> None:
    ops = (
        "%bytes = memref.alloc() : memref<32xi8>\n"
        "  %m = memref.view %bytes[%c0][] : memref<32xi8> to memref<4xf64>\n"
        f"  {WRITES_THEN_READS[op]}\n"
        "  %v = vector.load %m[%c0] : memref<4xf64>, vector<4xf64>\n"
        "  %s = vector.reduction <add>, %v : vector<4xf64> into f64\n"
        "  memref.store %s, %out[%c0, %c0] : memref<2x2xf64>"
    )
    (out,) = run(READER.replace("{ops}", ops), np.ones((2, 2)))
    assert out[0, 0] == 8.0


MASKED = {
    "vector.transfer_read": "%v = vector.transfer_read %m[%c0], %x, %mask {in_bounds = [true]}"
    " : memref<4xf64>, vector<4xf64>",
    "vector.maskedload": "%v = vector.maskedload %m[%c0], %mask, %pass"
    " : memref<4xf64>, vector<4xi1>, vector<4xf64> into vector<4xf64>",
}


@pytest.mark.parametrize("op", list(MASKED))
def test_lanes_a_mask_leaves_off_read_nothing(op: str) -> None:
    """Only elements 0 and 1 are written, and only they are read."""
    ops = (
        "%m = memref.alloca() : memref<4xf64>\n"
        "  %c1 = arith.constant 1 : index\n"
        "  memref.store %x, %m[%c0] : memref<4xf64>\n"
        "  memref.store %x, %m[%c1] : memref<4xf64>\n"
        "  %mask = vector.constant_mask [{on}] : vector<4xi1>\n"
        "  %pass = vector.broadcast %x : f64 to vector<4xf64>\n"
        f"  {MASKED[op]}\n"
        "  %s = vector.reduction <add>, %v : vector<4xf64> into f64\n"
        "  memref.store %s, %out[%c0, %c0] : memref<2x2xf64>"
    )
    (out,) = run(READER.replace("{ops}", ops.replace("{on}", "2")), np.ones((2, 2)))
    assert out[0, 0] == 8.0
    message = run_error(READER.replace("{ops}", ops.replace("{on}", "3")), np.ones((2, 2)))
    assert "prog.mlir:14:8: error: 'vector.reduction' uses lane [2] of a vector" in message
    assert f"'{op}' at prog.mlir:13:8 read element [2] of the buffer allocated at" in message


# A buffer that C code fills, then read: C may write all it is passed.
FILLED_BY_C = """
func.func private @fill(memref<?xf64>) attributes {llvm.emit_c_interface}
func.func @main(%out: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %buf = memref.alloc() : memref<4xf64>
  %any = memref.cast %buf : memref<4xf64> to memref<?xf64>
  func.call @fill(%any) : (memref<?xf64>) -> ()
  %v = memref.load %buf[%c3] : memref<4xf64>
  memref.store %v, %out[%c0] : memref<1xf64>
  return
}
"""
FILL_C = """
#include <stdint.h>
struct memref { double *allocated, *aligned; int64_t offset, size, stride; };
void _mlir_ciface_fill(struct memref *m) {
  for (int64_t i = 0; i < m->size; i++) m->aligned[m->offset + i * m->stride] = 2.5;
}
"""


def test_a_buffer_passed_to_c_counts_as_written(tmp_path: Path) -> None:
    (tmp_path / "fill.c").write_text(FILL_C)
    obj = tmp_path / "fill.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "fill.c", "-o", obj], check=True)
    module = dhir.parse_string(FILLED_BY_C, "prog.mlir")
    (out,) = dhir.run(module, np.zeros(1), backend="interp", link=[str(obj)])
    assert out[0] == 2.5


# HALO's copy of %a into %b, a row at a time through vectors.
VECTOR_COPIES = {
    "vector.load": """%r = vector.load %a[%i, %c0] : memref<4x4xf64>, vector<4xf64>
    vector.store %r, %b[%i, %c0] : memref<4x4xf64>, vector<4xf64>""",
    "vector.transfer_read": """%r = vector.transfer_read %a[%i, %c0], %one {in_bounds = [true]}
        : memref<4x4xf64>, vector<4xf64>
    vector.transfer_write %r, %b[%i, %c0] {in_bounds = [true]} : vector<4xf64>, memref<4x4xf64>""",
    "vector.maskedload": """%all = vector.constant_mask [4] : vector<4xi1>
    %p = vector.broadcast %one : f64 to vector<4xf64>
    %r = vector.maskedload %a[%i, %c0], %all, %p
        : memref<4x4xf64>, vector<4xi1>, vector<4xf64> into vector<4xf64>
    vector.maskedstore %b[%i, %c0], %all, %r : memref<4x4xf64>, vector<4xi1>, vector<4xf64>""",
    "vector.gather": """%idx = arith.constant dense<[0, 1, 2, 3]> : vector<4xi32>
    %all = vector.constant_mask [4] : vector<4xi1>
    %p = vector.broadcast %one : f64 to vector<4xf64>
    %r = vector.gather %a[%i, %c0][%idx], %all, %p
        : memref<4x4xf64>, vector<4xi32>, vector<4xi1>, vector<4xf64> into vector<4xf64>
    vector.scatter %b[%i, %c0][%idx], %all, %r
        : memref<4x4xf64>, vector<4xi32>, vector<4xi1>, vector<4xf64>""",
    "scf.if": """%r = vector.load %a[%i, %c0] : memref<4x4xf64>, vector<4xf64>
    %yes = arith.cmpi sge, %i, %c0 : index
    %s = scf.if %yes -> vector<4xf64> {
      scf.yield %r : vector<4xf64>
    } else {
      scf.yield %r : vector<4xf64>
    }
    vector.store %s, %b[%i, %c0] : memref<4x4xf64>, vector<4xf64>""",
    "vector.shape_cast": """%r = vector.load %a[%i, %c0] : memref<4x4xf64>, vector<4xf64>
    %s = vector.shape_cast %r : vector<4xf64> to vector<2x2xf64>
    %t = vector.transpose %s, [1, 0] : vector<2x2xf64> to vector<2x2xf64>
    %u = vector.transpose %t, [1, 0] : vector<2x2xf64> to vector<2x2xf64>
    %lo = vector.extract %u[0] : vector<2xf64> from vector<2x2xf64>
    %hi = vector.extract_strided_slice %u {offsets = [1, 0], sizes = [1, 2], strides = [1, 1]}
        : vector<2x2xf64> to vector<1x2xf64>
    %z = vector.broadcast %one : f64 to vector<4xf64>
    %w = vector.insert_strided_slice %lo, %z {offsets = [0], strides = [1]}
        : vector<2xf64> into vector<4xf64>
    %h = vector.shape_cast %hi : vector<1x2xf64> to vector<2xf64>
    %x = vector.insert_strided_slice %h, %w {offsets = [2], strides = [1]}
        : vector<2xf64> into vector<4xf64>
    vector.store %x, %b[%i, %c0] : memref<4x4xf64>, vector<4xf64>""",
}
VECTOR_HALO = (
    HALO.replace(
        "{copy}",
        """%c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    {copy}
  }""",
    )
    .replace("%at: index)", "%at: index, %at_j: index)")
    .replace("%b[%at, %at]", "%b[%at, %at_j]")
)


@pytest.mark.parametrize("copy", list(VECTOR_COPIES))
def test_vectors_carry_which_elements_were_written(copy: str) -> None:
    """Copying a halo whose corners nothing wrote through vectors is legal, as memref.copy
    is, until a corner is read from the copy."""
    src = VECTOR_HALO.replace("{copy}", VECTOR_COPIES[copy])
    (out, _, _) = run(src, np.zeros((2, 2)), 1, 2)  # written, read through the copy
    assert (out == 1.5).all()
    for i, j in [(0, 0), (0, 1), (3, 3), (1, 0)]:  # never written, copied
        message = run_error(src, np.zeros((2, 2)), i, j)
        assert f"error: 'memref.load' reads element [{i}, {j}] of the buffer " in message
        assert "allocated at prog.mlir:12:8 before anything wrote it: it is a copy of a " in (
            message
        )
        assert f"read element [{i}, 0] of the buffer allocated at prog.mlir:8:8)" in message


# Loads the first row of a buffer only the last three elements of which are written,
# then {use}s the vector %v.
USES = {
    "arith.addf": "%w = arith.addf %v, %v : vector<4xf64>",
    "vector.reduction": "%s = vector.reduction <add>, %v : vector<4xf64> into f64",
    "vector.extract": "%s = vector.extract %v[0] : f64 from vector<4xf64>",
    "vector.bitcast": "%w = vector.bitcast %v : vector<4xf64> to vector<4xi64>",
    "arith.select": "%w = arith.select %true, %v, %v : vector<4xf64>",
    "vector.print": "vector.print %v : vector<4xf64>",
    "vector.store": "vector.store %v, %out[%c0, %c0] : memref<2x4xf64>, vector<4xf64>",
    "vector.transfer_write": "vector.transfer_write %v, %out[%c0, %c0] {in_bounds = [true]}"
    " : vector<4xf64>, memref<2x4xf64>",
    "arith.cmpf": "%mask = arith.cmpf oeq, %v, %v : vector<4xf64>",
    "func.call": "func.call @use(%v) : (vector<4xf64>) -> ()",
    "scf.for": """%r = scf.for %i = %c0 to %c2 step %c1 iter_args(%a = %v) -> vector<4xf64> {
    %q = vector.shape_cast %a : vector<4xf64> to vector<2x2xf64>
    %n = vector.shape_cast %q : vector<2x2xf64> to vector<4xf64>
    scf.yield %n : vector<4xf64>
  }
  %s = vector.reduction <add>, %r : vector<4xf64> into f64""",
}
USER = """
func.func @use(%v: vector<4xf64>) {
  %s = vector.reduction <add>, %v : vector<4xf64> into f64
  return
}
func.func @main(%out: memref<2x4xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %true = arith.constant true
  %x = arith.constant 2.0 : f64
  %m = memref.alloc() : memref<2x4xf64>
  %tail = memref.subview %m[0, 1] [1, 3] [1, 1]
      : memref<2x4xf64> to memref<3xf64, strided<[1], offset: 1>>
  linalg.fill ins(%x : f64) outs(%tail : memref<3xf64, strided<[1], offset: 1>>)
  %v = vector.load %m[%c0, %c0] : memref<2x4xf64>, vector<4xf64>
  {use}
  return
}
"""


@pytest.mark.parametrize("use", list(USES))
def test_a_use_of_a_vector_lane_nothing_wrote_is_refused(use: str) -> None:
    """Arithmetic, comparisons, reductions, a scalar out of the lane, its bits, a choice,
    printing, and storing it where the caller sees it, through calls and loops."""
    message = run_error(USER.replace("{use}", USES[use]), np.ones((2, 4)))
    assert "uses lane [0] of a vector loaded from elements nothing wrote ('vector.load' at" in (
        message
    )
    assert "prog.mlir:16:8 read element [0, 0] of the buffer allocated at prog.mlir:12:8;" in (
        message
    )


def test_lanes_that_were_written_may_be_used() -> None:
    use = (
        "%s = vector.extract %v[3] : f64 from vector<4xf64>\n"
        "  %w = vector.insert %x, %v [0] : f64 into vector<4xf64>\n"
        "  %t = vector.reduction <add>, %w : vector<4xf64> into f64\n"
        "  %u = arith.addf %s, %t : f64\n"
        "  memref.store %u, %out[%c1, %c0] : memref<2x4xf64>"
    )
    (out,) = run(USER.replace("{use}", use), np.ones((2, 4)))
    assert out[1, 0] == 10.0


def test_lanes_move_with_their_flags() -> None:
    """A written scalar inserted over the lane nothing wrote makes the vector whole; a
    vector inserted carries its own lanes' flags."""
    whole = (
        "%w = vector.insert %x, %v [0] : f64 into vector<4xf64>\n"
        "  %s = vector.shape_cast %w : vector<4xf64> to vector<2x2xf64>\n"
        "  vector.store %s, %out[%c0, %c0] : memref<2x4xf64>, vector<2x2xf64>"
    )
    (out,) = run(USER.replace("{use}", whole), np.ones((2, 4)))
    assert (out[:, :2] == 2.0).all() and (out[:, 2:] == 1.0).all()
    nested = (
        "%z = vector.broadcast %x : f64 to vector<2x4xf64>\n"
        "  %w = vector.insert %v, %z [1] : vector<4xf64> into vector<2x4xf64>\n"
        "  %r = vector.extract %w[1] : vector<4xf64> from vector<2x4xf64>\n"
        "  %s = vector.extract %r[1] : f64 from vector<4xf64>\n"
        "  memref.store %s, %out[%c0, %c0] : memref<2x4xf64>\n"
        "  vector.store %w, %out[%c0, %c0] : memref<2x4xf64>, vector<2x4xf64>"
    )
    message = run_error(USER.replace("{use}", nested), np.ones((2, 4)))
    assert "prog.mlir:22:3: error: 'vector.store' uses lane [1, 0] of a vector loaded" in message


# Copies the whole of a 4x4 buffer whose interior alone is written into the argument.
INTO_ARGUMENT = """
func.func @main(%out: memref<4x4xf64>) {
  %one = arith.constant 1.5 : f64
  %a = memref.alloc() : memref<4x4xf64>
  %inner = memref.subview %a[1, 1] [2, 2] [1, 1]
      : memref<4x4xf64> to memref<2x2xf64, strided<[4, 1], offset: 5>>
  linalg.fill ins(%one : f64) outs(%inner : memref<2x2xf64, strided<[4, 1], offset: 5>>)
  {copy}
  return
}
"""
COPIES_INTO_ARGUMENT = {
    **{k: v.replace("%b", "%out") for k, v in COPIES.items()},
    "linalg.transpose": "linalg.transpose ins(%a : memref<4x4xf64>)"
    " outs(%out : memref<4x4xf64>) permutation = [1, 0]",
}


@pytest.mark.parametrize("copy", list(COPIES_INTO_ARGUMENT))
def test_every_copy_into_an_argument_reads_what_it_copies(copy: str) -> None:
    """linalg bodies that yield an input unchanged copied an element nothing wrote into
    the caller's array silently (zeros here, whatever the memory held natively)."""
    message = run_error(
        INTO_ARGUMENT.replace("{copy}", COPIES_INTO_ARGUMENT[copy]), np.ones((4, 4))
    )
    assert f"prog.mlir:8:3: error: '{copy}' reads element [0, 0] of the buffer " in message
    assert "allocated at prog.mlir:4:8 before anything wrote it" in message


def test_a_copy_into_an_initialized_global_is_carried() -> None:
    """A mutable memref.global with an initial value is the program's own memory, not
    what the caller gets back: copying a halo into it was refused at the copy."""
    src = 'memref.global "private" @g : memref<4x4xf64> = dense<0.0>\n' + HALO.replace(
        "{copy}", COPIES["memref.copy"]
    ).replace(
        "%b = memref.alloc() : memref<4x4xf64>", "%b = memref.get_global @g : memref<4x4xf64>"
    )
    (out, _) = run(src, np.zeros((2, 2)), 1)
    assert (out == 1.5).all()
    message = run_error(src, np.zeros((2, 2)), 0)
    assert (
        "'memref.load' reads element [0, 0] of @g, the memref.global declared at prog.mlir:1:1"
        in (message)
    )
    assert "it is a copy of element [0, 0] of the buffer allocated at prog.mlir:9:8" in message
