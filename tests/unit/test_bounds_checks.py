"""By default the native backend checks, as they run, the accesses whose subscripts dhir
does not prove in bounds (dhir-bounds-checks, dhir.analysis.proven_bounds): a subscript
loaded from an input array and out of its memref stops the run at the access's line with
the index and the size, where it ran on and exited 0 unless --runtime-checks was given."""

import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from xdsl.ir import Operation

import dhir
from dhir.analysis.proven_bounds import (
    InBounds,
    _outermost_loops,  # pyright: ignore[reportPrivateUsage]
)
from dhir.backends.native import _after_passes  # pyright: ignore[reportPrivateUsage]
from dhir.dialects import affine, memref, scf
from dhir.ir.diagnostics import DhirError, SourceLoc
from dhir.ir.text import parse_string as parse_module
from dhir.toolchain.failure import FailedCheck, failed_check
from dhir.toolchain.options import RunOptions
from dhir.transforms.bounds_checks import BoundsChecksPass, undecided_dims
from dhir.transforms.cast_checks import (
    CastChecksPass,
    CastSizesPass,
    Claims,
    undecided_cast_claims,
    undecided_subview_dims,
)

# b[i] = a[idx[i]] (line 11) or b[idx[i]] = a[i] (line 12), in a task.
GATHER = """\
func.func @main(%idx: memref<8xi64>, %a: memref<8xf64>, %b: memref<8xf64>) {
  dhir.schedule %idx, %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %idx, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {
        %k = memref.load %idx[%i] : memref<8xi64>
        %j = arith.index_cast %k : i64 to index
        ACCESS
      }
    }
  }
  return
}
"""
LOAD = """%x = memref.load %a[%j] : memref<8xf64>
        memref.store %x, %b[%i] : memref<8xf64>"""
STORE = """%x = memref.load %a[%i] : memref<8xf64>
        memref.store %x, %b[%j] : memref<8xf64>"""
# The same store with no schedule: CodeDrop makes the task.
PLAIN = """\
func.func @main(%idx: memref<8xi64>, %a: memref<8xf64>, %b: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %k = memref.load %idx[%i] : memref<8xi64>
    %j = arith.index_cast %k : i64 to index
    %x = memref.load %a[%i] : memref<8xf64>
    memref.store %x, %b[%j] : memref<8xf64>
  }
  return
}
"""
# A parallel loop (on OpenMP threads: its iterations write apart) reading a[1, idx[i]]
# (line 11) of a 2-D a.
PARALLEL = """\
func.func @main(%idx: memref<64xi64>, %a: memref<4x64xf64>, %b: memref<64xf64>) {
  dhir.schedule %idx, %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %idx, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
        %k = memref.load %idx[%i] : memref<64xi64>
        %j = arith.index_cast %k : i64 to index
        %x = memref.load %a[%c1, %j] : memref<4x64xf64>
        memref.store %x, %b[%i] : memref<64xf64>
      }
    }
  }
  return
}
"""

# b[i] = s[i] (line 12) or s[i] = b[i] (line 13) through a subview of a at an offset read
# from an input (line 10): each access is proven inside the view, not the view in a.
SUBVIEW = """\
func.func @main(%off: memref<1xi64>, %a: memref<8xf32>, %b: memref<4xf32>) {
  dhir.schedule %off, %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %off, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %k = memref.load %off[%c0] : memref<1xi64>
      %n = arith.index_cast %k : i64 to index
      %s = memref.subview %a[%n] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
      scf.for %i = %c0 to %c4 step %c1 {
        ACCESS
      }
    }
  }
  return
}
"""
VIEW_LOAD = """%x = memref.load %s[%i] : memref<4xf32, strided<[1], offset: ?>>
        memref.store %x, %b[%i] : memref<4xf32>"""
VIEW_STORE = """%x = memref.load %b[%i] : memref<4xf32>
        memref.store %x, %s[%i] : memref<4xf32, strided<[1], offset: ?>>"""
# The store through the view with no schedule: CodeDrop makes the task.
PLAIN_SUBVIEW = """\
func.func @main(%off: memref<1xi64>, %a: memref<8xf32>, %b: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %k = memref.load %off[%c0] : memref<1xi64>
  %n = arith.index_cast %k : i64 to index
  %s = memref.subview %a[%n] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %b[%i] : memref<4xf32>
    memref.store %x, %s[%i] : memref<4xf32, strided<[1], offset: ?>>
  }
  return
}
"""
# Static views and a tile of a loop inside a: all proven.
PROVEN_VIEWS = """\
func.func @main(%a: memref<8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %s = memref.subview %a[2, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 16>>
  scf.for %i = %c0 to %c8 step %c2 {
    %t = memref.subview %a[%i, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
  }
  %buf = memref.alloc() : memref<64xf32>
  %r = memref.reinterpret_cast %buf to offset: [8], sizes: [7, 8], strides: [8, 1] : memref<64xf32> to memref<7x8xf32, strided<[8, 1], offset: 8>>
  %bytes = memref.alloc() : memref<64xi8>
  %v = memref.view %bytes[%c8][] : memref<64xi8> to memref<14xf32>
  return
}
"""

# A view of a[off] of n elements (both read from %p, line 8) cast to 4 elements at
# offset 0 (line 9), then read whole: right only where n is 4 and off 0.
CAST = """\
func.func @main(%p: memref<2xi64>, %a: memref<8xf64>, %b: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %k = memref.load %p[%c0] : memref<2xi64>
  %o = memref.load %p[%c1] : memref<2xi64>
  %n = arith.index_cast %k : i64 to index
  %off = arith.index_cast %o : i64 to index
  %s = memref.subview %a[%off] [%n] [1] : memref<8xf64> to memref<?xf64, strided<[1], offset: ?>>
  %t = memref.cast %s : memref<?xf64, strided<[1], offset: ?>> to memref<4xf64>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %t[%i] : memref<4xf64>
    memref.store %x, %b[%i] : memref<8xf64>
  }
  return
}
"""
# The same through an unranked memref (the cast to 4 elements at line 11).
UNRANKED_CAST = CAST.replace(
    "  %t = memref.cast %s : memref<?xf64, strided<[1], offset: ?>> to memref<4xf64>\n",
    "  %u = memref.cast %s : memref<?xf64, strided<[1], offset: ?>> to memref<*xf64>\n"
    "  %t = memref.cast %u : memref<*xf64> to memref<4xf64>\n",
)
# A view of a at an offset and of a size read from %p (line 8), read to its end.
SIZED_SUBVIEW = """\
func.func @main(%p: memref<2xi64>, %a: memref<8xf64>, %b: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %k = memref.load %p[%c0] : memref<2xi64>
  %o = memref.load %p[%c1] : memref<2xi64>
  %off = arith.index_cast %k : i64 to index
  %n = arith.index_cast %o : i64 to index
  %s = memref.subview %a[%off] [%n] [1] : memref<8xf64> to memref<?xf64, strided<[1], offset: ?>>
  %m = memref.dim %s, %c0 : memref<?xf64, strided<[1], offset: ?>>
  scf.for %i = %c0 to %m step %c1 {
    %x = memref.load %s[%i] : memref<?xf64, strided<[1], offset: ?>>
    memref.store %x, %b[%i] : memref<8xf64>
  }
  return
}
"""
# Four elements of a at an offset read from %p (line 7), written.
SHIFTED_CAST = """\
func.func @main(%p: memref<1xi64>, %a: memref<8xf64>, %b: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %k = memref.load %p[%c0] : memref<1xi64>
  %off = arith.index_cast %k : i64 to index
  %s = memref.reinterpret_cast %a to offset: [%off], sizes: [4], strides: [1] : memref<8xf64> to memref<4xf64, strided<[1], offset: ?>>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %b[%i] : memref<8xf64>
    memref.store %x, %s[%i] : memref<4xf64, strided<[1], offset: ?>>
  }
  return
}
"""
# A reinterpret_cast of n elements at offset o (both read from %p, line 8), written to
# its measured end. Of a negative size, natively the check took it for a view of
# nothing, which may start anywhere up to the buffer's end: it ran with exit status 0
# (memref.dim -1), where the interpreter refused it (at offset 8), or failed with a
# Python ValueError (at offset 3).
SIZED_CAST = """\
func.func @main(%p: memref<2xi64>, %a: memref<8xf64>, %b: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %k = memref.load %p[%c0] : memref<2xi64>
  %off = arith.index_cast %k : i64 to index
  %m = memref.load %p[%c1] : memref<2xi64>
  %n = arith.index_cast %m : i64 to index
  %s = memref.reinterpret_cast %a to offset: [%off], sizes: [%n], strides: [1] : memref<8xf64> to memref<?xf64, strided<[1], offset: ?>>
  %d = memref.dim %s, %c0 : memref<?xf64, strided<[1], offset: ?>>
  scf.for %i = %c0 to %d step %c1 {
    %x = memref.load %b[%i] : memref<8xf64>
    memref.store %x, %s[%i] : memref<?xf64, strided<[1], offset: ?>>
  }
  return
}
"""
# A view of n elements of f64 (n read from %p, line 7) of 64 bytes, read.
SIZED_VIEW = """\
func.func @main(%p: memref<1xi64>, %a: memref<64xi8>, %b: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %k = memref.load %p[%c0] : memref<1xi64>
  %n = arith.index_cast %k : i64 to index
  %v = memref.view %a[%c0][%n] : memref<64xi8> to memref<?xf64>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%i] : memref<?xf64>
    memref.store %x, %b[%i] : memref<8xf64>
  }
  return
}
"""
# Casts of what an allocation of 4 elements, a number, makes: nothing to check.
PROVEN_CAST = """\
func.func @main() {
  %c4 = arith.constant 4 : index
  %m = memref.alloc(%c4) : memref<?xf64>
  %t = memref.cast %m : memref<?xf64> to memref<4xf64>
  %u = memref.cast %t : memref<4xf64> to memref<?xf64, strided<[?], offset: ?>>
  return
}
"""

INSIDE = np.array([7, 6, 5, 4, 3, 2, 1, 0], np.int64)
PAST_END = np.array([7, 6, 5, 4, 3, 2, 1, 9], np.int64)
A = np.arange(8.0)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "program.mlir"
    path.write_text(text)
    return path


def stopped_at(run: partial[list[np.ndarray]], *inputs: object) -> tuple[SourceLoc | None, str]:
    with pytest.raises(DhirError) as caught:
        run(*inputs)
    diagnostic = caught.value.diagnostics[0]
    return diagnostic.loc, diagnostic.message


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize(("access", "line", "column"), [(LOAD, 11, 14), (STORE, 12, 9)])
def test_an_input_dependent_access_out_of_bounds_stops_the_run(
    tmp_path: Path, ranks: int, access: str, line: int, column: int
) -> None:
    program = write(tmp_path, GATHER.replace("ACCESS", access))
    run = partial(dhir.run, program, ranks=ranks)
    want = dhir.run(program, INSIDE, A, np.zeros(8), backend="interp")
    got = run(INSIDE, A, np.zeros(8))
    assert want[2].tobytes() == got[2].tobytes()
    with pytest.raises(DhirError, match="index 9 of dimension 0, whose size is 8"):
        dhir.run(program, PAST_END, A, np.zeros(8), backend="interp")
    loc, message = stopped_at(run, PAST_END, A, np.zeros(8))
    assert loc == SourceLoc(str(program), line, column)
    assert message.startswith(
        "a runtime check failed: out-of-bounds access: index 9 of dimension 0, whose size is 8;"
    )


# The size of the dimension an argument names (line 3): MLIR 22 takes one past the rank
# as undefined, and native code returned a number (exit status 0) where the interpreter
# stopped at the op.
DIM_OF_ARGUMENT = """\
func.func @main(%a: memref<4x5xf32>, %k: index) {
  %c0 = arith.constant 0 : index
  %d = memref.dim %a, %k : memref<4x5xf32>
  %x = arith.index_cast %d : index to i32
  %f = arith.sitofp %x : i32 to f32
  memref.store %f, %a[%c0, %c0] : memref<4x5xf32>
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_dimension_past_the_rank_stops_the_run() -> None:
    a = np.zeros((4, 5), np.float32)
    assert dhir.run(DIM_OF_ARGUMENT, a, 1)[0][0, 0] == 5
    for k in (2, -1):
        with pytest.raises(DhirError) as error:
            dhir.run(DIM_OF_ARGUMENT, a, k)
        assert str(error.value).startswith(
            "<string>:3:8: error: a runtime check failed: 'memref.dim' asks for a dimension "
            "a rank-2 memref lacks"
        )
    with pytest.raises(DhirError, match=r"<string>:3:8: .*dimension 2 of a rank-2 memref"):
        dhir.run(DIM_OF_ARGUMENT, a, 2, backend="interp")


# The same on a tensor (line 2): bufferized, it is a memref.dim, which both backends named.
DIM_OF_TENSOR = """\
func.func @main(%t: tensor<?x4xf64>, %k: index) -> tensor<1xf64> {
  %d = tensor.dim %t, %k : tensor<?x4xf64>
  %i = arith.index_cast %d : index to i64
  %f = arith.sitofp %i : i64 to f64
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<1xf64>
  %r = tensor.insert %f into %e[%c0] : tensor<1xf64>
  return %r : tensor<1xf64>
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_tensor_dimension_past_the_rank_names_the_tensor_dim() -> None:
    t = np.zeros((3, 4))
    assert dhir.run(DIM_OF_TENSOR, t, 0)[-1][0] == 3
    with pytest.raises(DhirError) as error:
        dhir.run(DIM_OF_TENSOR, t, 5)
    assert str(error.value).startswith(
        "<string>:2:8: error: a runtime check failed: 'tensor.dim' asks for a dimension "
        "a rank-2 tensor lacks"
    ), str(error.value)
    with pytest.raises(
        DhirError, match=r"<string>:2:8: .*'tensor.dim' .*dimension 5 of a rank-2 tensor"
    ):
        dhir.run(DIM_OF_TENSOR, t, 5, backend="interp")


# The same through an unranked memref (line 4), whose rank only the run knows: native code
# returned a number (exit status 0) for 2, 7 and -1, and even a constant asks for a check.
DIM_OF_UNRANKED = """\
func.func @main(%a: memref<4x5xf32>, %k: index) {
  %c0 = arith.constant 0 : index
  %u = memref.cast %a : memref<4x5xf32> to memref<*xf32>
  %d = memref.dim %u, K : memref<*xf32>
  %x = arith.index_cast %d : index to i32
  %f = arith.sitofp %x : i32 to f32
  memref.store %f, %a[%c0, %c0] : memref<4x5xf32>
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_dimension_past_an_unranked_memref_s_rank_stops_the_run() -> None:
    a = np.zeros((4, 5), np.float32)
    by_argument = DIM_OF_UNRANKED.replace("K", "%k")
    assert dhir.run(by_argument, a, 1)[0][0, 0] == 5
    constant = DIM_OF_UNRANKED.replace("K", "%c2").replace(
        "%c0 = arith.constant 0 : index",
        "%c0 = arith.constant 0 : index\n  %c2 = arith.constant 2 : index",
    )
    failing = [(by_argument, 7), (by_argument, -1), (constant, 0)]
    for program, k in failing:
        with pytest.raises(DhirError) as error:
            dhir.run(program, a, k)
        assert str(error.value).startswith(
            f"<string>:{4 if program is by_argument else 5}:8: error: a runtime check failed: "
            "'memref.dim' asks for a dimension past its unranked memref's rank"
        )


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_plain_program_s_store_out_of_bounds_stops_the_run(tmp_path: Path) -> None:
    program = write(tmp_path, PLAIN)
    loc, message = stopped_at(partial(dhir.run, program), PAST_END, A, np.zeros(8))
    assert loc == SourceLoc(str(program), 9, 5)
    assert "index 9 of dimension 0, whose size is 8" in message


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_parallel_loop_s_load_out_of_bounds_stops_the_run(tmp_path: Path) -> None:
    program = write(tmp_path, PARALLEL)
    run = partial(dhir.run, program, threads=2)
    inside = np.arange(64, dtype=np.int64)[::-1].copy()
    a = np.arange(256.0).reshape(4, 64)
    assert run(inside, a, np.zeros(64))[2].tolist() == a[1][::-1].tolist()
    below = inside.copy()
    below[40] = -3
    loc, message = stopped_at(run, below, a, np.zeros(64))
    assert loc == SourceLoc(str(program), 11, 14)
    assert "index -3 of dimension 1, whose size is 64" in message


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("access", [VIEW_LOAD, VIEW_STORE])
def test_a_subview_past_its_buffer_stops_the_run(tmp_path: Path, ranks: int, access: str) -> None:
    program = write(tmp_path, SUBVIEW.replace("ACCESS", access))
    a, b = np.arange(8, dtype=np.float32), np.arange(10, 14, dtype=np.float32)
    run = partial(dhir.run, program, ranks=ranks)
    inside = np.array([4], np.int64)
    want = dhir.run(program, inside, a, b, backend="interp")
    got = run(inside, a, b)
    assert [w.tobytes() for w in want] == [g.tobytes() for g in got]
    past = np.array([6], np.int64)
    with pytest.raises(DhirError, match="'memref.subview' takes offset 6, size 4"):
        dhir.run(program, past, a, b, backend="interp")
    loc, message = stopped_at(run, past, a, b)
    assert loc == SourceLoc(str(program), 10, 12)
    assert message.startswith(
        "a runtime check failed: subview runs out-of-bounds along dimension 0: offset 6, "
        "size 4 and stride 1 in a dimension of 8;"
    )


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_plain_program_s_subview_past_its_buffer_stops_the_run(tmp_path: Path) -> None:
    program = write(tmp_path, PLAIN_SUBVIEW)
    a, b = np.arange(8, dtype=np.float32), np.arange(10, 14, dtype=np.float32)
    want = dhir.run(program, np.array([3], np.int64), a, b, backend="interp")
    got = dhir.run(program, np.array([3], np.int64), a, b)
    assert [w.tobytes() for w in want] == [g.tobytes() for g in got]
    loc, message = stopped_at(partial(dhir.run, program), np.array([5], np.int64), a, b)
    assert loc == SourceLoc(str(program), 7, 8)
    assert "subview runs out-of-bounds along dimension 0" in message


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(("text", "line"), [(CAST, 10), (UNRANKED_CAST, 11)])
def test_a_cast_to_a_size_or_offset_the_view_has_not_stops_the_run(
    tmp_path: Path, text: str, line: int
) -> None:
    """Natively the cast read a[0..3] whatever the view, with exit status 0."""
    program = write(tmp_path, text)
    a = np.arange(8.0)
    run = partial(dhir.run, program)
    fits = np.array([4, 0], np.int64)
    want = dhir.run(program, fits, a, np.zeros(8), backend="interp")
    assert [w.tobytes() for w in want] == [g.tobytes() for g in run(fits, a, np.zeros(8))]
    for p, what in (([2, 0], "size mismatch of dim 0"), ([4, 3], "offset mismatch")):
        with pytest.raises(DhirError, match="'memref.cast'"):
            dhir.run(program, np.array(p, np.int64), a, np.zeros(8), backend="interp")
        loc, message = stopped_at(run, np.array(p, np.int64), a, np.zeros(8))
        assert loc == SourceLoc(str(program), line, 8)
        # dhir-cast-sizes names a ranked source's size after the words (": it has ...").
        assert re.match(f"a runtime check failed: {what}[:;]", message), message


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("text", "line", "fits", "wrong", "what"),
    [
        (SIZED_SUBVIEW, 8, [[3, 4], [8, 0]], [[-1, 0], [9, -1], [2**63 - 2, 4]], "subview runs"),
        (SHIFTED_CAST, 7, [[4]], [[2**63 - 2], [5]], "result of reinterpret_cast"),
        (SIZED_VIEW, 7, [[4], [8]], [[2**61 + 1], [9]], "result of view"),
        (
            SIZED_CAST,
            8,
            [[2, 3], [8, 0]],
            [[3, -1], [8, -1], [0, -(2**63)]],
            "reinterpret_cast has a negative size along dimension 0",
        ),
    ],
)
def test_views_the_interpreter_refuses_stop_the_run(
    tmp_path: Path, text: str, line: int, fits: list[list[int]], wrong: list[list[int]], what: str
) -> None:
    """An empty subview before its source, a subview or reinterpret_cast of a negative
    size, and views at offsets near 2**63 or of sizes whose bytes pass 2**64, whose ends
    wrapped in 64 bits: natively they ran with exit status 0 (and read other memory, or
    wrote below the buffer and the rank aborted at its end)."""
    program = write(tmp_path, text)
    a = np.arange(64, dtype=np.int8) if "memref.view" in text else np.arange(8.0)
    run = partial(dhir.run, program)
    for p in fits:
        want = dhir.run(program, np.array(p, np.int64), a, np.zeros(8), backend="interp")
        got = run(np.array(p, np.int64), a, np.zeros(8))
        assert [w.tobytes() for w in want] == [g.tobytes() for g in got]
    for p in wrong:
        with pytest.raises(
            DhirError, match="out of bounds|outside its buffer|bytes|size is negative"
        ):
            dhir.run(program, np.array(p, np.int64), a, np.zeros(8), backend="interp")
        loc, message = stopped_at(run, np.array(p, np.int64), a, np.zeros(8))
        assert loc == SourceLoc(str(program), line, 8), p
        assert message.startswith(f"a runtime check failed: {what}"), p


def test_only_casts_not_proven_are_checked_by_default() -> None:
    proven = parse_module(PROVEN_CAST)
    CastChecksPass(undecided=True).apply(None, proven)  # pyright: ignore[reportArgumentType]
    assert "cf.assert" not in str(proven)
    module = parse_module(CAST)
    (cast,) = (op for op in module.walk() if isinstance(op, memref.CastOp))
    # A ranked source's sizes are dhir-cast-sizes', which names them.
    assert undecided_cast_claims(cast) == Claims({}, 0, {})
    CastChecksPass(undecided=True).apply(None, module)  # pyright: ignore[reportArgumentType]
    assert str(module).count("size mismatch of dim 0") == 0
    assert str(module).count("offset mismatch") == 1
    CastSizesPass().apply(None, module)  # pyright: ignore[reportArgumentType]
    assert str(module).count("size mismatch of dim 0") == 1
    module = parse_module(UNRANKED_CAST)
    cast = [op for op in module.walk() if isinstance(op, memref.CastOp)][-1]
    assert undecided_cast_claims(cast) == Claims({0: 4}, 0, {0: 1}, rank=1)


def test_only_views_not_proven_inside_are_checked_by_default() -> None:
    proven = parse_module(PROVEN_VIEWS)
    CastChecksPass(undecided=True).apply(None, proven)  # pyright: ignore[reportArgumentType]
    assert "cf.assert" not in str(proven)
    module = parse_module(SUBVIEW.replace("ACCESS", VIEW_LOAD))
    proof = InBounds(module)
    (view,) = (op for op in module.walk() if isinstance(op, memref.SubviewOp))
    assert undecided_subview_dims(view, proof) == [0]
    CastChecksPass(undecided=True).apply(None, module)  # pyright: ignore[reportArgumentType]
    assert str(module).count("subview runs out-of-bounds along dimension 0") == 1


def test_cli_stops_by_default_and_runs_unchecked_when_asked(tmp_path: Path) -> None:
    program = write(tmp_path, GATHER.replace("ACCESS", LOAD))
    for name, value in (("idx", PAST_END), ("a", A), ("b", np.zeros(8))):
        np.save(tmp_path / f"{name}.npy", value)
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(program), "-q"]
    for name in ("idx", "a", "b"):
        command += ["--input", str(tmp_path / f"{name}.npy")]
    checked = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert checked.returncode != 0
    assert checked.stderr.startswith(
        f"{program}:11:14: error: a runtime check failed: out-of-bounds access: index 9"
    )
    both = subprocess.run(
        [*command, "--runtime-checks", "--no-runtime-checks"], capture_output=True, text=True
    )
    assert both.returncode == 2  # argparse: not allowed together
    assert "not allowed with argument" in both.stderr


def test_only_the_loaded_subscript_is_undecided() -> None:
    module = parse_module(GATHER.replace("ACCESS", STORE))
    proof = InBounds(module)
    found = {
        str(op.indices[0].name_hint): undecided_dims(op, proof)
        for op in module.walk()
        if isinstance(op, memref.LoadOp | memref.StoreOp)
    }
    assert found == {"i": [], "j": [0]}


def test_the_default_build_runs_the_checks_of_undecided_accesses_only() -> None:
    def names(mode: str) -> list[str]:
        options = RunOptions(runtime_checks=mode)
        return [p.name for p in _after_passes(options, True, False, frozenset())]

    assert "dhir-bounds-checks" in names("undecided")
    assert "dhir-bounds-checks" not in names("all")  # MLIR checks every access then
    assert "dhir-bounds-checks" not in names("none")
    assert "dhir-cast-checks" in names("undecided")  # views not proven inside
    assert "dhir-cast-checks" not in names("none")
    assert "dhir-vector-checks" not in names("none")


def test_runtime_checks_modes() -> None:
    assert RunOptions().runtime_checks == "undecided"
    assert RunOptions(runtime_checks=True).runtime_checks == "all"
    assert RunOptions(runtime_checks=False).runtime_checks == "undecided"
    assert RunOptions(runtime_checks="none").runtime_checks == "none"
    with pytest.raises(DhirError, match='runtime_checks takes "none", "undecided" or "all"'):
        RunOptions(runtime_checks="some")


def test_a_failed_check_says_the_index_and_size_the_runtime_wrote() -> None:
    output = (
        "ERROR: Runtime op verification failed\n^ out-of-bounds access\n"
        'Location: loc("/tmp/p.mlir":11:14)\n'
    )
    errors = "dhir: out-of-bounds access on rank 1: index 9 of dimension 0, whose size is 8\n"
    assert failed_check(output, errors) == FailedCheck(
        "out-of-bounds access: index 9 of dimension 0, whose size is 8",
        SourceLoc("/tmp/p.mlir", 11, 14),
    )
    assert failed_check(output) == FailedCheck(
        "out-of-bounds access", SourceLoc("/tmp/p.mlir", 11, 14)
    )


def test_the_pass_adds_no_check_where_all_is_proven() -> None:
    proven = """%x = arith.sitofp %k : i64 to f64
        memref.store %x, %b[%i] : memref<8xf64>"""
    module = parse_module(GATHER.replace("ACCESS", proven))
    BoundsChecksPass().apply(None, module)  # pyright: ignore[reportArgumentType]
    assert "cf.assert" not in str(module)


def test_the_proof_reads_only_the_values_its_questions_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three passes ask of every piece of a large build; the values their accesses do not
    # use (most of a schedule's) are never read.
    unrelated = "\n".join(
        f"    %k{k} = arith.constant {k + 2} : index\n"
        f"    %q{k} = arith.floordivsi %n, %k{k} : index"
        for k in range(50)
    )
    module = parse_module(f"""
func.func @main(%a: memref<8xf64>, %n: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 1.0 : f64
  scf.for %i = %c0 to %c8 step %c1 {{
{unrelated}
    memref.store %x, %a[%i] : memref<8xf64>
  }}
  return
}}
""")
    reads: list[object] = []
    read = InBounds.read
    monkeypatch.setattr(InBounds, "read", lambda self, v: reads.append(v) or read(self, v))
    proof = InBounds(module)
    (store,) = (op for op in module.walk() if isinstance(op, memref.StoreOp))
    assert undecided_dims(store, proof) == []
    assert len(reads) < 5


def test_literal_subscripts_of_known_sizes_are_decided_without_the_proof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Generated tasks' accesses at literal subscripts (thousands of them) cost no lift and
    # no bounds; a size the type does not give still goes to the proof.
    module = parse_module("""
func.func @main(%a: memref<8x?xf64>) {
  %x = arith.constant 1.0 : f64
  %c0 = arith.constant 0 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %m1 = arith.constant -1 : index
  memref.store %x, %a[%c0, %c0] : memref<8x?xf64>
  memref.store %x, %a[%c7, %c0] : memref<8x?xf64>
  memref.store %x, %a[%c8, %c0] : memref<8x?xf64>
  memref.store %x, %a[%m1, %c0] : memref<8x?xf64>
  return
}
""")
    asked: list[int] = []
    proven = InBounds.proven
    monkeypatch.setattr(
        InBounds, "proven", lambda self, m, d, i, *r: asked.append(d) or proven(self, m, d, i, *r)
    )
    proof = InBounds(module)
    stores = [op for op in module.walk() if isinstance(op, memref.StoreOp)]
    assert [undecided_dims(store, proof) for store in stores] == [[1], [1], [0, 1], [0, 1]]
    assert asked == [1, 1, 1, 1]  # the dynamic dimension only


# Two private functions alike up to the memref they take, each nest ending at its own
# argument, which its call sets; and two nests of main alike up to the memref they store.
def _nests(first: int, second: int) -> str:
    return f"""
func.func private @f(%a: memref<16xf64>, %n: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 1.0 : f64
  scf.for %i = %c0 to %n step %c1 {{
    memref.store %x, %a[%i] : memref<16xf64>
  }}
  return
}}
func.func private @g(%b: memref<16xf64>, %n: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 1.0 : f64
  scf.for %i = %c0 to %n step %c1 {{
    memref.store %x, %b[%i] : memref<16xf64>
  }}
  return
}}
func.func @main(%a: memref<16xf64>, %b: memref<16xf64>) {{
  %n = arith.constant {first} : index
  %m = arith.constant {second} : index
  func.call @f(%a, %n) : (memref<16xf64>, index) -> ()
  func.call @g(%b, %m) : (memref<16xf64>, index) -> ()
  scf.for %i = %n to %m step %n {{
    %x = arith.constant 2.0 : f64
    memref.store %x, %a[%i] : memref<16xf64>
  }}
  scf.for %i = %n to %m step %n {{
    %x = arith.constant 2.0 : f64
    memref.store %x, %b[%i] : memref<16xf64>
  }}
  return
}}
"""


# Nests alike but for the value they add to the counter: p - q of two calls' results
# (unknown), or p - p (0), then p - q again.
SHARED_LEAF = """
func.func private @h() -> index
func.func @main(%a: memref<16xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 1.0 : f64
  %p = func.call @h() : () -> index
  %q = func.call @h() : () -> index
  %d = arith.subi %p, %q : index
  %e = arith.subi %p, %p : index
  scf.for %i = %c0 to %c8 step %c1 {
    %j = arith.addi %i, %d : index
    memref.store %x, %a[%j] : memref<16xf64>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %j = arith.addi %i, %e : index
    memref.store %x, %a[%j] : memref<16xf64>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %j = arith.addi %i, %d : index
    memref.store %x, %a[%j] : memref<16xf64>
  }
  return
}
"""


def _decisions(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[bool], int]:
    """Whether dhir-bounds-checks checks each store, and how many stores the proof was
    asked about."""
    module = parse_module(text)
    asked: list[object] = []
    decide = undecided_dims
    monkeypatch.setattr(
        "dhir.transforms.bounds_checks.undecided_dims",
        lambda op, proof: asked.append(op) or decide(op, proof),  # pyright: ignore[reportUnknownLambdaType]
    )
    BoundsChecksPass().apply(None, module)  # pyright: ignore[reportArgumentType]
    stores = [op for op in module.walk() if isinstance(op, memref.StoreOp)]
    checked = [s.prev_op is not None and s.prev_op.name == "cf.assert" for s in stores]
    return checked, len(asked)


def test_a_nest_repeated_with_other_memrefs_is_proven_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # main's two nests (8, 16, 24 in 16 elements) differ only in their memref: one proof.
    # The functions' nests end at their own argument, bounded by their calls: each is
    # proven on its own (8 is inside, 32 is not).
    assert _decisions(_nests(8, 32), monkeypatch) == ([False, True, True, True], 3)


def test_nests_alike_but_for_what_they_share_are_proven_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # p - q and p - p are made by ops alike: only which values they take tells them
    # apart. The third nest is the first again.
    assert _decisions(SHARED_LEAF, monkeypatch) == ([True, False, True], 2)


# Loops in loops, a loop beside them, and ops outside any loop, in two functions.
NESTED = """
func.func @f(%a: memref<16xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x = arith.constant 1.0 : f64
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %x, %a[%i] : memref<16xf64>
    scf.for %j = %c0 to %c4 step %c1 {
      affine.for %k = 0 to 4 {
        memref.store %x, %a[%k] : memref<16xf64>
      }
      scf.parallel (%p) = (%c0) to (%c4) step (%c1) {
        memref.store %x, %a[%p] : memref<16xf64>
      }
    }
  }
  scf.if %true {
    affine.parallel (%q) = (0) to (4) {
      memref.store %x, %a[%q] : memref<16xf64>
    }
  }
  memref.store %x, %a[%c0] : memref<16xf64>
  return
}
func.func @g(%a: memref<16xf64>) {
  %c0 = arith.constant 0 : index
  %x = arith.constant 1.0 : f64
  affine.for %k = 0 to 4 {
    memref.store %x, %a[%k] : memref<16xf64>
  }
  return
}
""".replace("scf.if %true", "%true = arith.constant true\n  scf.if %true")


def _outermost_by_walking_up(op: Operation) -> Operation | None:
    outermost = None
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, (scf.ForOp, scf.ParallelOp, affine.ForOp, affine.ParallelOp)):
            outermost = parent
        parent = parent.parent_op()
    return outermost


def test_outermost_loops_are_those_found_by_walking_up_from_each_op() -> None:
    ops = list(parse_module(NESTED).walk())
    found = _outermost_loops(ops)
    assert found == [_outermost_by_walking_up(op) for op in ops]
    assert len({id(loop) for loop in found if loop is not None}) == 3
    # Asked in any order, one op at a time or again, the answers stay the same.
    assert _outermost_loops(ops[::-1]) == found[::-1]
    assert [_outermost_loops([op])[0] for op in ops] == found
