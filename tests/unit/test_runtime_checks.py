"""--runtime-checks (`runtime_checks=` in dhir.run): MLIR's generate-runtime-verification
checks every memref access, cast and view of the native build as it runs, so that one out
of its memref stops the run at the user's line, as the interpreter does, where the
unchecked build runs on and exits 0."""

import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.ir.diagnostics import DhirError, SourceLoc
from dhir.toolchain.failure import FailedCheck, failed_check
from dhir.toolchain.llvm_text import patch_llvm_ir
from dhir.toolchain.options import RunOptions
from dhir.toolchain.tools import MpiInstall

# Stores a[0..n) of an 8-element memref: with n = 9 the last store (line 10) is out of
# it. The loop's end is known at run time only, so no check before the run refuses it
# (dhir.analysis.bounds): these tests are --runtime-checks'.
STORE_PAST_END = """\
func.func @main(%a: memref<8xi32>, %n: index) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9 = arith.addi %n, %c0 : index
      %v = arith.constant 7 : i32
      scf.for %i = %c0 to %c9 step %c1 {
        memref.store %v, %a[%i] : memref<8xi32>
      }
    }
  }
  return
}
"""
# Reads a[i + 1] for i in [0, n): with n = 16 the last load (line 10) is out of the
# memref.
LOAD_PAST_END = """\
func.func @main(%a: memref<16xf64>, %b: memref<16xf64>, %n: index) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.addi %n, %c0 : index
      scf.for %i = %c0 to %c16 step %c1 {
        %j = arith.addi %i, %c1 : index
        %x = memref.load %a[%j] : memref<16xf64>
        memref.store %x, %b[%i] : memref<16xf64>
      }
    }
  }
  return
}
"""
# Stores a[0..n) with affine.store (line 7): MLIR 22 makes no check for affine accesses.
AFFINE_STORE_PAST_END = """\
func.func @main(%a: memref<8xi32>, %n: index) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %v = arith.constant 7 : i32
      affine.for %i = 0 to %n {
        affine.store %v, %a[%i] : memref<8xi32>
      }
    }
  }
  return
}
"""
# A view of 4 elements from %o on of a buffer of 8 (line 9), written through: MLIR 22
# checks the stores against the view only.
REINTERPRET_CAST = """\
func.func @main(%out: memref<4xf32>, %o: index) {
  dhir.schedule %out {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %buf = memref.alloc() : memref<8xf32>
      %v = memref.reinterpret_cast %buf to offset: [%o], sizes: [4], strides: [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
      scf.for %i = %c0 to %c4 step %c1 {
        %x = arith.index_cast %i : index to i32
        %f = arith.sitofp %x : i32 to f32
        memref.store %f, %v[%i] : memref<4xf32, strided<[1], offset: ?>>
      }
      scf.for %i = %c0 to %c4 step %c1 {
        %f = memref.load %v[%i] : memref<4xf32, strided<[1], offset: ?>>
        memref.store %f, %out[%i] : memref<4xf32>
      }
      memref.dealloc %buf : memref<8xf32>
    }
  }
  return
}
"""
# A view of 4 elements from %n on (line 5), with no scf op in the module: MLIR 22's
# subview check crashes mlir-opt when no pass of the pipeline loads scf.
SUBVIEW = """\
func.func @main(%a: memref<8xf32>, %n: index) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %s = memref.subview %a[%n] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
      %c0 = arith.constant 0 : index
      %one = arith.constant 1.0 : f32
      memref.store %one, %s[%c0] : memref<4xf32, strided<[1], offset: ?>>
    }
  }
  return
}
"""
# A five-point stencil on rows split between ranks, with halos.
STENCIL = """\
func.func @main(%u: memref<32x32xf64>, %v: memref<32x32xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c31 = arith.constant 31 : index
  %quarter = arith.constant 0.25 : f64
  scf.for %i = %c1 to %c31 step %c1 {
    scf.for %j = %c1 to %c31 step %c1 {
      %im = arith.subi %i, %c1 : index
      %ip = arith.addi %i, %c1 : index
      %jm = arith.subi %j, %c1 : index
      %jp = arith.addi %j, %c1 : index
      %n = memref.load %u[%im, %j] : memref<32x32xf64>
      %s = memref.load %u[%ip, %j] : memref<32x32xf64>
      %w = memref.load %u[%i, %jm] : memref<32x32xf64>
      %e = memref.load %u[%i, %jp] : memref<32x32xf64>
      %a = arith.addf %n, %s : f64
      %b = arith.addf %w, %e : f64
      %c = arith.addf %a, %b : f64
      %d = arith.mulf %c, %quarter : f64
      memref.store %d, %v[%i, %j] : memref<32x32xf64>
    }
  }
  return
}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "program.mlir"
    path.write_text(text)
    return path


def refused_before_the_run(program: Path, *inputs: object) -> SourceLoc | None:
    """Where a run without the flag is refused before it starts: the inputs' sizes and
    values decide an access that surely runs out of bounds (bounds.given_bounds)."""
    with pytest.raises(DhirError, match="each time the program runs with these inputs") as caught:
        dhir.run(program, *inputs)
    return caught.value.diagnostics[0].loc


def test_a_failed_check_is_read_with_its_location() -> None:
    output = (
        "rank output\nERROR: Runtime op verification failed\r\n^ out-of-bounds access\r\n"
        'Location: loc("/tmp/a \\22b\\22 \\C3\\A9\\\\.mlir":10:9)\r\nmore\n'
    )
    assert failed_check(output) == FailedCheck(
        "out-of-bounds access", SourceLoc('/tmp/a "b" \u00e9\\.mlir', 10, 9)
    )
    unknown = "ERROR: Runtime op verification failed\n^ offset mismatch\nLocation: loc(unknown)\n"
    assert failed_check(unknown) == FailedCheck("offset mismatch", None)
    assert failed_check("ERROR: something else\n") is None


def test_a_failed_layout_check_is_read_with_the_numbers_it_found() -> None:
    report = "dhir: layout mismatch on rank 0: dimension 1 of the cast's operand has stride 9, "
    report += "where its type says 4\n"
    check = "ERROR: Runtime op verification failed\n^ stride mismatch of dim 1\n"
    check += 'Location: loc("p.mlir":6:12)\n'
    said = "stride mismatch of dim 1: the cast's operand has stride 9 there, where its type says 4"
    assert failed_check(check, report) == FailedCheck(said, SourceLoc("p.mlir", 6, 12))


def test_main_in_a_check_s_message_is_not_renamed() -> None:
    # A shard program's locations are named "<mlir-opt: partition @main (a shard
    # program)>": renaming @main in the message's string made its array type 10 bytes
    # short, which clang refused.
    message = 'c"Location: loc(\\22<mlir-opt: partition @main (a shard program)>\\22:1:1)\\00"'
    ll = f"@assert_msg = private constant [70 x i8] {message}\ndefine void @main() {{\n"
    mpi = MpiInstall("mpich", Path("/"), Path("/"), Path("/"), Path("/"), (), "4")
    patched = patch_llvm_ir(ll, mpi)
    assert patched == ll.replace("define void @main", "define void @dhir_mlir_main")


def test_a_quoted_name_ending_in_c_is_no_string() -> None:
    # `@"dhir_user$calc"` ends in `c"`: read as a string's start (up to the next quote),
    # it hid the `@main` after it.
    ll = 'define i32 @"dhir_user$calc"() {\n}\ndefine void @main() {\n  call i32 @"dhir_user$calc"()\n}\n'
    mpi = MpiInstall("mpich", Path("/"), Path("/"), Path("/"), Path("/"), (), "4")
    assert patch_llvm_ir(ll, mpi) == ll.replace("@main", "@dhir_mlir_main")


def test_runtime_checks_takes_a_mode() -> None:
    with pytest.raises(DhirError, match='runtime_checks takes "none", "undecided" or "all"'):
        RunOptions(runtime_checks="yes")  # pyright: ignore[reportArgumentType]


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("text", "line"), [(STORE_PAST_END, 10), (AFFINE_STORE_PAST_END, 7)], ids=["store", "affine"]
)
def test_an_out_of_bounds_store_stops_the_run_at_its_line(
    tmp_path: Path, text: str, line: int
) -> None:
    program = write(tmp_path, text)
    where = SourceLoc(str(program), line, 9)
    assert refused_before_the_run(program, np.zeros(8, np.int32), np.int64(9)) == where
    with pytest.raises(DhirError) as caught:
        dhir.run(program, np.zeros(8, np.int32), np.int64(9), runtime_checks=True)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == where
    assert diagnostic.message.startswith("a runtime check failed: out-of-bounds access;")


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_reinterpret_cast_past_its_buffer_is_caught(tmp_path: Path) -> None:
    program = write(tmp_path, REINTERPRET_CAST)
    assert refused_before_the_run(program, np.zeros(4, np.float32), np.int64(6))
    inside = dhir.run(program, np.zeros(4, np.float32), np.int64(4), runtime_checks=True)
    assert list(inside[0]) == [0, 1, 2, 3]
    with pytest.raises(DhirError) as caught:
        dhir.run(program, np.zeros(4, np.float32), np.int64(6), runtime_checks=True)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 9, 12)
    assert "reinterpret_cast is out-of-bounds of the base memref" in diagnostic.message


# Rows 0-1 of %a copied to %o by the first task, rows 2-3 doubled by the second, which
# also reads a[k + 1] through a view of 2 elements from %k (line 22): on 2 ranks each
# holds only the rows its tasks touch (rank 0 rows 0-1 of %a), and its descriptor keeps
# the global sizes.
ARGUMENT_CAST = """\
func.func @main(%a: memref<4x512xf64>, %o: memref<4x512xf64>, %k: index) {
  dhir.schedule %a, %o {
    %cpu = dhir.target {kind = "cpu"}
    %t1 = dhir.task %cpu, %a, %o {
      %s = memref.subview %a[0, 0] [2, 512] [1, 1] : memref<4x512xf64> to memref<2x512xf64, strided<[512, 1]>>
      %d = memref.subview %o[0, 0] [2, 512] [1, 1] : memref<4x512xf64> to memref<2x512xf64, strided<[512, 1]>>
      memref.copy %s, %d : memref<2x512xf64, strided<[512, 1]>> to memref<2x512xf64, strided<[512, 1]>>
    }
    %t2 = dhir.task %cpu, %a, %o {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c512 = arith.constant 512 : index
      scf.for %i = %c2 to %c4 step %c1 {
        scf.for %j = %c0 to %c512 step %c1 {
          %x = memref.load %a[%i, %j] : memref<4x512xf64>
          %y = arith.addf %x, %x : f64
          memref.store %y, %o[%i, %j] : memref<4x512xf64>
        }
      }
      %v = memref.reinterpret_cast %a to offset: [%k], sizes: [2], strides: [1] : memref<4x512xf64> to memref<2xf64, strided<[1], offset: ?>>
      %z = memref.load %v[%c1] : memref<2xf64, strided<[1], offset: ?>>
      memref.store %z, %o[%c2, %c0] : memref<4x512xf64>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_reinterpret_cast_past_an_argument_is_caught(tmp_path: Path, ranks: int) -> None:
    program = write(tmp_path, ARGUMENT_CAST)
    a = np.arange(4 * 512, dtype=np.float64).reshape(4, 512)
    run = partial(dhir.run, ranks=ranks, placement="round-robin", runtime_checks=True)
    for k in (0, 2046):  # the view's last element a[3, 511]
        want = dhir.run(program, a, np.zeros_like(a), np.int64(k), backend="interp")
        got = run(program, a, np.zeros_like(a), np.int64(k))
        assert want[1].tobytes() == got[1].tobytes()
    for k in (2047, -1):
        with pytest.raises(DhirError, match="outside its buffer"):
            dhir.run(program, a, np.zeros_like(a), np.int64(k), backend="interp")
        with pytest.raises(DhirError) as caught:
            run(program, a, np.zeros_like(a), np.int64(k))
        diagnostic = caught.value.diagnostics[0]
        assert diagnostic.loc == SourceLoc(str(program), 22, 12)
        assert "reinterpret_cast is out-of-bounds of the base memref" in diagnostic.message


# @f casts %x, a view of a[2:6] that @main passes it (its buffer's size unknown there), to
# 4 elements from offset o of a (line 11). With o = 6 the native build read a[8], a[9]
# past the buffer and exited 0 with garbage in %b, where the interpreter stops at the cast.
VIEW_CAST = """\
func.func @main(%a: memref<8xf64>, %b: memref<4xf64>, %p: memref<1xi64>) {
  %c0 = arith.constant 0 : index
  %l = memref.load %p[%c0] : memref<1xi64>
  %o = arith.index_cast %l : i64 to index
  %v = memref.subview %a[2] [4] [1] : memref<8xf64> to memref<4xf64, strided<[1], offset: 2>>
  %vc = memref.cast %v : memref<4xf64, strided<[1], offset: 2>> to memref<?xf64, strided<[1], offset: ?>>
  func.call @f(%vc, %b, %o) : (memref<?xf64, strided<[1], offset: ?>>, memref<4xf64>, index) -> ()
  return
}
func.func private @f(%x: memref<?xf64, strided<[1], offset: ?>>, %b: memref<4xf64>, %o: index) {
  %r = memref.reinterpret_cast %x to offset: [%o], sizes: [4], strides: [1] : memref<?xf64, strided<[1], offset: ?>> to memref<4xf64, strided<[1], offset: ?>>
  memref.copy %r, %b : memref<4xf64, strided<[1], offset: ?>> to memref<4xf64>
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_reinterpret_cast_of_a_passed_view_stays_in_the_view(tmp_path: Path) -> None:
    program = write(tmp_path, VIEW_CAST)

    def inputs(offset: int) -> tuple[np.ndarray, ...]:
        return np.arange(8.0), np.zeros(4), np.array([offset], np.int64)

    got = dhir.run(program, *inputs(2))
    assert got[1].tolist() == [2.0, 3.0, 4.0, 5.0]
    # Past the buffer (the interpreter stops too), and inside it but past the view (which
    # the interpreter runs: the native build cannot see the buffer there).
    for offset in (6, 4):
        with pytest.raises(DhirError) as caught:
            dhir.run(program, *inputs(offset))
        diagnostic = caught.value.diagnostics[0]
        assert diagnostic.loc == SourceLoc(str(program), 11, 8)
        assert "out-of-bounds of its source view" in diagnostic.message
    with pytest.raises(DhirError, match="outside its buffer"):
        dhir.run(program, *inputs(6), backend="interp")


# VIEW_CAST with @f casting an unranked memref made of its view argument: native code
# read a[8], a[9] past the buffer and exited 0 with [6.0, 7.0, 0.0, 3.2e-322] in %b.
UNRANKED_CAST = VIEW_CAST.replace(
    "  %r = memref.reinterpret_cast %x",
    "  %u = memref.cast %x : memref<?xf64, strided<[1], offset: ?>> to memref<*xf64>\n"
    "  %r = memref.reinterpret_cast %u",
).replace(
    "strides: [1] : memref<?xf64, strided<[1], offset: ?>> to",
    "strides: [1] : memref<*xf64> to",
)


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_reinterpret_cast_of_an_unranked_cast_of_a_passed_view_stays_in_the_view(
    tmp_path: Path,
) -> None:
    program = write(tmp_path, UNRANKED_CAST)
    inputs = (np.arange(8.0), np.zeros(4))
    assert dhir.run(program, *inputs, np.array([2], np.int64))[1].tolist() == [2.0, 3.0, 4.0, 5.0]
    with pytest.raises(DhirError) as caught:
        dhir.run(program, *inputs, np.array([6], np.int64))
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 12, 8)
    assert "out-of-bounds of its source view" in diagnostic.message


# UNRANKED_CAST with the unranked memref made in @main and passed to @f: where it is cast
# (line 12), nothing says which buffer it views, and native code read past it with exit
# status 0; the build refuses the cast, the interpreter runs it.
PASSED_UNRANKED = (
    VIEW_CAST.replace(
        "  func.call @f(%vc, %b, %o) : (memref<?xf64, strided<[1], offset: ?>>,",
        "  %u = memref.cast %vc : memref<?xf64, strided<[1], offset: ?>> to memref<*xf64>\n"
        "  func.call @f(%u, %b, %o) : (memref<*xf64>,",
    )
    .replace("@f(%x: memref<?xf64, strided<[1], offset: ?>>,", "@f(%x: memref<*xf64>,")
    .replace(
        "strides: [1] : memref<?xf64, strided<[1], offset: ?>> to",
        "strides: [1] : memref<*xf64> to",
    )
)


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_reinterpret_cast_of_a_passed_unranked_memref_is_refused(tmp_path: Path) -> None:
    program = write(tmp_path, PASSED_UNRANKED)
    inputs = (np.arange(8.0), np.zeros(4), np.array([6], np.int64))
    with pytest.raises(DhirError) as caught:
        dhir.run(program, *inputs)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 12, 8)
    assert "unranked" in diagnostic.message and "--backend interp" in diagnostic.message
    with pytest.raises(DhirError, match="outside its buffer"):
        dhir.run(program, *inputs, backend="interp")
    fine = (np.arange(8.0), np.zeros(4), np.array([2], np.int64))
    assert dhir.run(program, *fine, backend="interp")[1].tolist() == [2.0, 3.0, 4.0, 5.0]


# An atomic update of a[0, n] (line 7), out of bounds from n = 8 on: dhir-float-atomics
# makes a float generic_atomic_rmw (and atomic_rmw mulf, maxnumf, minnumf, through one)
# a load and a store, whose checks MLIR makes.
ATOMIC = """\
func.func @main(%a: memref<4x8xf32>, %n: index) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %f = arith.constant 2.0 : f32
      UPDATE
    }
  }
  return
}
"""
GENERIC_UPDATE = """%r = memref.generic_atomic_rmw %a[%c0, %n] : memref<4x8xf32> {
      ^bb0(%cur: f32):
        %s = arith.addf %cur, %f : f32
        memref.atomic_yield %s : f32
      }"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    "update",
    [
        GENERIC_UPDATE,
        "%r = memref.atomic_rmw mulf %f, %a[%c0, %n] : (f32, memref<4x8xf32>) -> f32",
        "%r = memref.atomic_rmw addf %f, %a[%c0, %n] : (f32, memref<4x8xf32>) -> f32",
    ],
    ids=["generic", "mulf", "addf"],
)
def test_an_atomic_update_out_of_bounds_fails_at_its_line(tmp_path: Path, update: str) -> None:
    program = write(tmp_path, ATOMIC.replace("UPDATE", update))
    a = np.ones((4, 8), np.float32)
    assert dhir.run(program, a, np.int64(7), runtime_checks=True)[0][0, 7] != 1
    with pytest.raises(DhirError) as caught:
        dhir.run(program, a, np.int64(8), runtime_checks=True)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 7, 12)
    assert diagnostic.message.startswith("a runtime check failed: out-of-bounds access;")


# A linalg.copy of row 1's first n elements of %a into all of %o (line 8): MLIR requires
# the two sizes to agree, and native code copies n elements when they do not.
LINALG_COPY = """\
func.func @main(%a: memref<4x8xf32>, %o: memref<8xf32>, %n: index) {
  dhir.schedule %a, %o {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %o {
      %c1 = arith.constant 1 : index
      %s = memref.subview %a[%c1, 0] [1, %n] [1, 1] : memref<4x8xf32> to memref<?xf32, strided<[1], offset: ?>>
      %p = memref.cast %o : memref<8xf32> to memref<?xf32>
      linalg.copy ins(%s : memref<?xf32, strided<[1], offset: ?>>) outs(%p : memref<?xf32>)
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_linalg_op_whose_sizes_disagree_fails_in_both_backends(tmp_path: Path) -> None:
    program = write(tmp_path, LINALG_COPY)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    want = dhir.run(program, a, np.zeros(8, np.float32), np.int64(8), backend="interp")
    got = dhir.run(program, a, np.zeros(8, np.float32), np.int64(8), runtime_checks=True)
    assert want[1].tobytes() == got[1].tobytes() == a[1].tobytes()
    with pytest.raises(DhirError, match=r"operand #1's dimension 0 has size 8, where its loop"):
        dhir.run(program, a, np.zeros(8, np.float32), np.int64(4), backend="interp")
    for checks in ("all", "undecided"):  # by default natively copied 4 elements, exit 0
        with pytest.raises(DhirError) as caught:
            dhir.run(program, a, np.zeros(8, np.float32), np.int64(4), runtime_checks=checks)
        diagnostic = caught.value.diagnostics[0]
        assert diagnostic.loc == SourceLoc(str(program), 8, 7)
        said = "dimension #0 of input/output operand #1 is incompatible: it has 8, where the "
        assert said + "loop along it runs 4 times" in diagnostic.message


def test_a_failed_size_check_is_read_with_its_sizes() -> None:
    output = (
        "ERROR: Runtime op verification failed\n^ size mismatch of dim 1\n"
        'Location: loc("p.mlir":5:8)\n'
    )
    errors = (
        "dhir: size mismatch on rank 1: dimension 0 of the cast's operand has 7, where its "
        "type says 4\ndhir: size mismatch on rank 0: dimension 1 of the cast's operand has "
        "3, where its type says 2\n"
    )
    found = failed_check(output, errors)
    assert found == FailedCheck(
        "size mismatch of dim 1: the cast's operand has 3 there, where its type says 2",
        SourceLoc("p.mlir", 5, 8),
    )
    assert failed_check(output) == FailedCheck("size mismatch of dim 1", SourceLoc("p.mlir", 5, 8))
    linalg = output.replace(
        "size mismatch of dim 1",
        "dimension #0 of input/output operand #2 is incompatible with inferred dimension size",
    )
    errors = (
        "dhir: size mismatch on rank 0: dimension 1 of operand #2 has 4, where the loop along "
        "it runs 8 times\ndhir: size mismatch on rank 0: dimension 0 of operand #2 has 3, "
        "where the loop along it runs 5 times\n"
    )
    assert failed_check(linalg, errors).what.endswith(
        "operand #2 is incompatible with inferred dimension size: it has 3, where the loop "
        "along it runs 5 times"
    )


# A cast of an input of run-time rows to 2 rows (line 5), in a task: with 3 rows native
# code read row 1 of the 3 and exited 0 (unchecked by default), where the interpreter
# stops at the cast.
SIZE_CAST = """func.func @main(%b: memref<?x3xf64>, %o: memref<3xf64>) {
  dhir.schedule %b, %o {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %b, %o {
      %c = memref.cast %b : memref<?x3xf64> to memref<2x3xf64>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %x = memref.load %c[%c1, %c0] : memref<2x3xf64>
      memref.store %x, %o[%c0] : memref<3xf64>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(("ranks", "checks"), [(1, "undecided"), (2, "undecided"), (1, "all")])
def test_a_cast_to_a_size_the_input_has_not_stops_at_the_cast(
    tmp_path: Path, ranks: int, checks: str
) -> None:
    program = write(tmp_path, SIZE_CAST)
    run = partial(dhir.run, ranks=ranks, runtime_checks=checks)
    b = np.arange(6.0).reshape(2, 3)
    assert run(program, b, np.zeros(3))[1][0] == 3.0
    with pytest.raises(DhirError) as caught:
        run(program, np.arange(9.0).reshape(3, 3), np.zeros(3))
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 5, 12)
    said = "size mismatch of dim 0: the cast's operand has 3 there, where its type says 2"
    assert said in diagnostic.message


# An input of run-time size split into %n rows of 4 (line 5), in a task, reading row 0.
EXPAND = """func.func @main(%a: memref<?xf32>, %o: memref<4xf32>, %n: index) {
  dhir.schedule %a, %o, %n {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %o {
      %e = memref.expand_shape %a [[0, 1]] output_shape [%n, 4] : memref<?xf32> into memref<?x4xf32>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %x = memref.load %e[%c0, %c1] : memref<?x4xf32>
      memref.store %x, %o[%c0] : memref<4xf32>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("rows", [-2, 3])
def test_an_expand_shape_whose_sizes_do_not_split_its_source_stops_at_it(
    tmp_path: Path, rows: int
) -> None:
    """Native code took -2 (or 3) rows of 4 of 8 elements as given and exited 0, where the
    interpreter stops at the expand_shape ("reshapes (8,) into (-2, 4)")."""
    program = write(tmp_path, EXPAND)
    a = np.arange(8, dtype=np.float32)
    assert dhir.run(program, a, np.zeros(4, np.float32), np.int64(2))[1][0] == 1.0
    for backend in ("interp", "native"):
        with pytest.raises(DhirError) as caught:
            dhir.run(program, a, np.zeros(4, np.float32), np.int64(rows), backend=backend)
        diagnostic = caught.value.diagnostics[0]
        assert diagnostic.loc == SourceLoc(str(program), 5, 12), backend
    said = "expand_shape's sizes do not multiply to dimension 0 of its source: they multiply "
    said += f"to {4 * rows}, where it has 8 (the size of @main's argument %a, dimension 0)"
    assert said in diagnostic.message


# 8 floats seen from byte %s of a buffer of 40 bytes (line 6), written and copied out.
VIEW = """\
func.func @main(%o: memref<8xf32>, %s: index) {
  dhir.schedule %o {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %o {
      %buf = memref.alloc() : memref<40xi8>
      %v = memref.view %buf[%s][] : memref<40xi8> to memref<8xf32>
      %f = arith.constant 3.0 : f32
      linalg.fill ins(%f : f32) outs(%v : memref<8xf32>)
      memref.copy %v, %o : memref<8xf32> to memref<8xf32>
      memref.dealloc %buf : memref<40xi8>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_view_past_its_source_fails_in_both_backends(tmp_path: Path) -> None:
    program = write(tmp_path, VIEW)
    for shift in (0, 8):
        got = dhir.run(program, np.zeros(8, np.float32), np.int64(shift), runtime_checks=True)
        assert got[0].tolist() == [3.0] * 8
    for shift in (9, -1):
        with pytest.raises(DhirError, match="out of bounds"):
            dhir.run(program, np.zeros(8, np.float32), np.int64(shift), backend="interp")
        with pytest.raises(DhirError) as caught:
            dhir.run(program, np.zeros(8, np.float32), np.int64(shift), runtime_checks=True)
        diagnostic = caught.value.diagnostics[0]
        assert diagnostic.loc == SourceLoc(str(program), 6, 12)
        assert "result of view is out-of-bounds of the source memref" in diagnostic.message


@pytest.mark.mlir
@pytest.mark.mpi
def test_cli_out_of_bounds_load_fails_at_its_line(tmp_path: Path) -> None:
    program = write(tmp_path, LOAD_PAST_END)
    np.save(tmp_path / "a.npy", np.arange(16.0))
    np.save(tmp_path / "b.npy", np.zeros(16))
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(program), "-n", "2"]
    command += ["--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy")]
    command += ["--input", "index=16", "--runtime-checks", "-q"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{program}:10:14: error: a runtime check failed: out-of-bounds")


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_subview_out_of_its_memref_is_caught(tmp_path: Path) -> None:
    program = write(tmp_path, SUBVIEW)
    inside = dhir.run(program, np.zeros(8, np.float32), np.int64(4), runtime_checks=True)[0]
    assert inside[4] == 1.0
    with pytest.raises(DhirError) as caught:
        dhir.run(program, np.zeros(8, np.float32), np.int64(6), runtime_checks=True)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 5, 12)
    assert "subview runs out-of-bounds" in diagnostic.message


# The view of SUBVIEW cast to offset 2 (line 6).
CAST_OFFSET = SUBVIEW.replace(
    "      %c0 = arith.constant 0 : index\n",
    "      %v = memref.cast %s : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, "
    "strided<[1], offset: 2>>\n      %c0 = arith.constant 0 : index\n",
).replace(
    "memref.store %one, %s[%c0] : memref<4xf32, strided<[1], offset: ?>>",
    "memref.store %one, %v[%c0] : memref<4xf32, strided<[1], offset: 2>>",
)


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("text", "n", "line", "said"),
    [
        (
            SUBVIEW,
            6,
            5,
            "subview runs out-of-bounds along dimension 0: offset 6, size 4 and stride 1 in "
            "a dimension of 8",
        ),
        (
            CAST_OFFSET,
            3,
            6,
            "offset mismatch: the cast's operand has offset 3, where its type says 2",
        ),
    ],
)
@pytest.mark.parametrize("checks", [False, True])
def test_a_failed_view_check_says_the_numbers_it_found(
    tmp_path: Path, text: str, n: int, line: int, said: str, checks: bool
) -> None:
    """By default and under --runtime-checks (dhir's checks, before MLIR's): MLIR's
    words alone said no number ("subview runs out-of-bounds along dimension 0")."""
    program = write(tmp_path, text)
    with pytest.raises(DhirError) as caught:
        dhir.run(program, np.zeros(8, np.float32), np.int64(n), runtime_checks=checks)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), line, 12)
    assert said in diagnostic.message


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_correct_program_gives_the_same_bits_checked(tmp_path: Path, ranks: int) -> None:
    program = write(tmp_path, STENCIL)
    u = np.random.default_rng(7).random((32, 32))
    plain = dhir.run(program, u, np.zeros((32, 32)), ranks=ranks)
    checked = dhir.run(program, u, np.zeros((32, 32)), ranks=ranks, runtime_checks=True)
    for want, got in zip(plain, checked, strict=True):
        assert want.tobytes() == got.tobytes()
