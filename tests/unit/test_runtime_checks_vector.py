"""--runtime-checks on vector accesses (dhir-vector-checks): MLIR 22 checks none, so a
vector.load, a transfer or the optimizer's vector code out of its memref ran on and
exited 0; now it stops the run at the user's line, as the interpreter does, and a
correct program gives the same bits checked."""

from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.ir.diagnostics import DhirError, SourceLoc

# Loads 8 elements from a[n] (line 6): out of the memref from n = 9 on.
VECTOR_LOAD = """\
func.func @main(%a: memref<16xf32>, %b: memref<16xf32>, %n: index) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %v = vector.load %a[%n] : memref<16xf32>, vector<8xf32>
      vector.store %v, %b[%c0] : memref<16xf32>, vector<8xf32>
    }
  }
  return
}
"""
# Writes 8 ones to a row of a[i, j..] it says is in bounds (line 6): out from j = 1 on.
TRANSFER_WRITE = """\
func.func @main(%a: memref<4x8xf32>, %i: index, %j: index) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %one = arith.constant dense<1.0> : vector<8xf32>
      vector.transfer_write %one, %a[%i, %j] {in_bounds = [true]} : vector<8xf32>, memref<4x8xf32>
    }
  }
  return
}
"""
# A masked read, masked load and gather of the lanes %m sets (from a memref of i32):
# each lane of the mask set reads a[i, j + k], or the gather a[i, j] plus g[k] on.
MASKED = """\
func.func @main(%a: memref<4x8xf32>, %o: memref<3x8xf32>, %mk: memref<8xi32>, %g: memref<8xi32>, %i: index, %j: index) {
  dhir.schedule %a, %o, %mk, %g {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %o, %mk, %g {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %pad = arith.constant -1.0 : f32
      %pass = arith.constant dense<-2.0> : vector<8xf32>
      %zero = arith.constant dense<0> : vector<8xi32>
      %raw = vector.load %mk[%c0] : memref<8xi32>, vector<8xi32>
      %m = arith.cmpi ne, %raw, %zero : vector<8xi32>
      %ix = vector.load %g[%c0] : memref<8xi32>, vector<8xi32>
      %r = vector.transfer_read %a[%i, %j], %pad, %m {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>
      %l = vector.maskedload %a[%i, %j], %m, %pass : memref<4x8xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
      %v = vector.gather %a[%i, %j] [%ix], %m, %pass : memref<4x8xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
      vector.store %r, %o[%c0, %c0] : memref<3x8xf32>, vector<8xf32>
      vector.store %l, %o[%c1, %c0] : memref<3x8xf32>, vector<8xf32>
      vector.store %v, %o[%c2, %c0] : memref<3x8xf32>, vector<8xf32>
    }
  }
  return
}
"""
# C += A B over the first %nj columns: dhir-optimize-bodies makes the nest (line 10)
# vector loads of 8 columns of B, out of B's rows of 28 when %nj is 32.
MATMUL = """\
func.func @main(%C: memref<8x32xf64>, %A: memref<8x16xf64>, %B: memref<16x28xf64>, %nj: index) {
  dhir.schedule %C, %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %C, %A, %B {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      scf.for %i = %c0 to %c8 step %c1 {
        scf.for %j = %c0 to %nj step %c1 {
          scf.for %k = %c0 to %c16 step %c1 {
            %a = memref.load %A[%i, %k] : memref<8x16xf64>
            %b = memref.load %B[%k, %j] : memref<16x28xf64>
            %c = memref.load %C[%i, %j] : memref<8x32xf64>
            %p = arith.mulf %a, %b : f64
            %s = arith.addf %c, %p : f64
            memref.store %s, %C[%i, %j] : memref<8x32xf64>
          }
        }
      }
    }
  }
  return
}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "program.mlir"
    path.write_text(text)
    return path


def failed_at(program: Path, *inputs: object) -> SourceLoc | None:
    """Where the checked run's failed check is; None: it ran to the end."""
    try:
        dhir.run(program, *inputs, runtime_checks=True)
    except DhirError as error:
        diagnostic = error.diagnostics[0]
        # The words, then the arguments the memref's sizes are, where some are.
        words = "a runtime check failed: out-of-bounds access"
        assert diagnostic.message.startswith((f"{words};", f"{words} (")), diagnostic.message
        return diagnostic.loc
    return None


def refused_before_the_run(program: Path, *inputs: object) -> SourceLoc | None:
    """Where a run without the flag is refused before it starts: the inputs' sizes and
    values decide an access that surely runs out of bounds (bounds.given_bounds)."""
    with pytest.raises(DhirError, match="each time the program runs with these inputs") as caught:
        dhir.run(program, *inputs)
    return caught.value.diagnostics[0].loc


@pytest.mark.mlir
@pytest.mark.mpi
def test_an_out_of_bounds_vector_load_stops_the_run_at_its_line(tmp_path: Path) -> None:
    program = write(tmp_path, VECTOR_LOAD)
    a = np.arange(16, dtype=np.float32)
    where = SourceLoc(str(program), 6, 12)
    assert refused_before_the_run(program, a, np.zeros(16, np.float32), np.int64(12)) == where
    assert failed_at(program, a, np.zeros(16, np.float32), np.int64(12)) == where
    inside = dhir.run(program, a, np.zeros(16, np.float32), np.int64(8), runtime_checks=True)
    assert (inside[1][:8] == a[8:]).all()
    # n + 8 wrapped below 16 and the load read other memory with exit status 0.
    assert failed_at(program, a, np.zeros(16, np.float32), np.int64(2**63 - 4)) == where


@pytest.mark.mlir
@pytest.mark.mpi
def test_an_out_of_bounds_transfer_write_stops_the_run_at_its_line(tmp_path: Path) -> None:
    program = write(tmp_path, TRANSFER_WRITE)
    inputs = (np.zeros((4, 8), np.float32), np.int64(3), np.int64(4))
    assert refused_before_the_run(program, *inputs) == SourceLoc(str(program), 6, 7)
    assert failed_at(program, *inputs) == SourceLoc(str(program), 6, 7)
    assert failed_at(program, np.zeros((4, 8), np.float32), np.int64(-1), np.int64(0))
    assert failed_at(program, np.zeros((4, 8), np.float32), np.int64(3), np.int64(0)) is None


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("i", "j", "mask", "gathered", "outside"),
    [
        (1, 0, [1] * 8, [0, 1, 2, 3, 4, 5, 6, 7], False),
        (3, 4, [1, 1, 1, 1, 0, 0, 0, 0], [0, 1, 2, 3, 99, -9, 99, -9], False),  # lanes off
        (3, 4, [1, 1, 1, 1, 1, 0, 0, 0], [0, 1, 2, 3, 0, 0, 0, 0], True),  # lane 4: a[3, 8]
        (0, 0, [0, 0, 1, 0, 0, 0, 0, 0], [0, 0, -1, 0, 0, 0, 0, 0], True),  # gather's lane 2
        (0, -1, [0] * 8, [0] * 8, True),  # the gather's offsets, masked or not
        (4, 0, [0] * 8, [0] * 8, True),
    ],
)
def test_masked_lanes_are_checked_as_the_interpreter_touches_them(
    tmp_path: Path, i: int, j: int, mask: list[int], gathered: list[int], outside: bool
) -> None:
    program = write(tmp_path, MASKED)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    inputs = (a, np.zeros((3, 8), np.float32), np.array(mask, np.int32))
    inputs += (np.array(gathered, np.int32), np.int64(i), np.int64(j))
    if outside:
        with pytest.raises(DhirError, match="out of bounds"):
            dhir.run(program, *inputs, backend="interp")
        assert failed_at(program, *inputs) is not None
        return
    want = dhir.run(program, *inputs, backend="interp")
    got = dhir.run(program, *inputs, runtime_checks=True)
    for expected, found in zip(want, got, strict=True):
        assert expected.tobytes() == found.tobytes()


@pytest.mark.mlir
@pytest.mark.mpi
def test_the_optimizer_s_vector_loads_are_checked_at_the_nest(tmp_path: Path) -> None:
    program = write(tmp_path, MATMUL)
    rng = np.random.default_rng(3)
    c, a, b = rng.random((8, 32)), rng.random((8, 16)), rng.random((16, 28))
    assert refused_before_the_run(program, c, a, b, np.int64(32))  # past B's rows
    assert failed_at(program, c, a, b, np.int64(32)) == SourceLoc(str(program), 10, 9)
    plain = dhir.run(program, c, a, b, np.int64(28))
    checked = dhir.run(program, c, a, b, np.int64(28), runtime_checks=True)
    for want, got in zip(plain, checked, strict=True):
        assert want.tobytes() == got.tobytes()


# Reads 4 elements from a[j..] that may run out of bounds (line 6): past the end they are
# the padding; MLIR allows no start before 0, where native code reads before the memref.
TRANSFER_READ = """\
func.func @main(%a: memref<8xf32>, %b: memref<4xf32>, %j: index) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %b {
      %pad = arith.constant -1.0 : f32
      %v = vector.transfer_read %a[%j], %pad : memref<8xf32>, vector<4xf32>
      %c0 = arith.constant 0 : index
      vector.store %v, %b[%c0] : memref<4xf32>, vector<4xf32>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_transfer_starting_before_its_memref_fails_in_both_backends(tmp_path: Path) -> None:
    program = write(tmp_path, TRANSFER_READ)
    a = np.arange(8, dtype=np.float32)
    past_end = dhir.run(program, a, np.zeros(4, np.float32), np.int64(6), backend="interp")[1]
    assert past_end.tolist() == [6, 7, -1, -1]
    with pytest.raises(DhirError, match=r"index -2 of dimension 0, before the memref's start"):
        dhir.run(program, a, np.zeros(4, np.float32), np.int64(-2), backend="interp")
    assert failed_at(program, a, np.zeros(4, np.float32), np.int64(-2)) == SourceLoc(
        str(program), 6, 12
    )


# An expanding load (or compressing store) of a[i, j..] by the mask in %mk (line 10): the
# k-th lane the mask sets reads (writes) a[i, j + k], so as many elements as it sets.
PACKED = """\
func.func @main(%a: memref<4x8xf32>, %o: memref<8xf32>, %mk: memref<8xi32>, %i: index, %j: index) {
  dhir.schedule %a, %o, %mk {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %o, %mk {
      %c0 = arith.constant 0 : index
      %zero = arith.constant dense<0> : vector<8xi32>
      %raw = vector.load %mk[%c0] : memref<8xi32>, vector<8xi32>
      %m = arith.cmpi ne, %raw, %zero : vector<8xi32>
      {access}
    }
  }
  return
}
"""
EXPAND = """%pass = arith.constant dense<-2.0> : vector<8xf32>
      %l = vector.expandload %a[%i, %j], %m, %pass : memref<4x8xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
      vector.store %l, %o[%c0] : memref<8xf32>, vector<8xf32>"""
COMPRESS = """%w = vector.load %o[%c0] : memref<8xf32>, vector<8xf32>
      vector.compressstore %a[%i, %j], %m, %w : memref<4x8xf32>, vector<8xi1>, vector<8xf32>"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("access", [EXPAND, COMPRESS], ids=["expandload", "compressstore"])
@pytest.mark.parametrize(
    ("i", "j", "mask", "outside"),
    [
        (3, 4, [1, 0, 1, 0, 1, 0, 1, 0], False),  # 4 set lanes: a[3, 4..7]
        (3, 6, [0, 0, 0, 0, 0, 0, 1, 1], False),  # the last lanes, at a[3, 6..7]
        (5, -1, [0] * 8, False),  # none set: nothing touched, not even a[5, -1]
        (3, 4, [1, 1, 1, 1, 1, 0, 0, 0], True),  # the fifth at a[3, 8]
        (0, -1, [0, 0, 0, 1, 0, 0, 0, 0], True),
        (4, 0, [1, 0, 0, 0, 0, 0, 0, 0], True),
    ],
)
def test_packed_lanes_are_checked_as_the_interpreter_touches_them(
    tmp_path: Path, access: str, i: int, j: int, mask: list[int], outside: bool
) -> None:
    program = write(tmp_path, PACKED.replace("{access}", access))
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    inputs = (a, np.arange(8, dtype=np.float32) + 100, np.array(mask, np.int32))
    inputs += (np.int64(i), np.int64(j))
    if outside:
        with pytest.raises(DhirError, match="accesses index"):
            dhir.run(program, *inputs, backend="interp")
        column = 12 if access == EXPAND else 7  # the op's name, as MLIR locates ops
        assert failed_at(program, *inputs) == SourceLoc(str(program), 10, column)
        return
    want = dhir.run(program, *inputs, backend="interp")
    got = dhir.run(program, *inputs, runtime_checks=True)
    for expected, found in zip(want, got, strict=True):
        assert expected.tobytes() == found.tobytes()


# A gather from rows r, r+1 of a, columns 0 to w-1 (line 10): a strided view, whose
# lanes are counted row-major from [i, j] where it is contiguous (w = 8), as the
# interpreter counts them; with gaps between its rows only its offsets are checked.
GATHER_VIEW = """\
func.func @main(%a: memref<4x8xf32>, %o: memref<8xf32>, %g: memref<8xi32>, %r: index, %w: index, %i: index, %j: index) {
  dhir.schedule %a, %o, %g {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %o, %g {
      %c0 = arith.constant 0 : index
      %pass = arith.constant dense<-2.0> : vector<8xf32>
      %m = arith.constant dense<true> : vector<8xi1>
      %ix = vector.load %g[%c0] : memref<8xi32>, vector<8xi32>
      %s = memref.subview %a[%r, 0] [2, %w] [1, 1] : memref<4x8xf32> to memref<2x?xf32, strided<[8, 1], offset: ?>>
      %v = vector.gather %s[%i, %j] [%ix], %m, %pass : memref<2x?xf32, strided<[8, 1], offset: ?>>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
      vector.store %v, %o[%c0] : memref<8xf32>, vector<8xf32>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("r", "i", "j", "gathered", "outside"),
    [
        (2, 1, 3, [0, 4, 1, 0, 0, 0, 0, 0], False),  # a[3, 7] the view's last
        (2, 0, 3, [-3, 12, 0, 0, 0, 0, 0, 0], False),  # back to its first
        (2, 1, 3, [0, 5, 0, 0, 0, 0, 0, 0], True),  # a[4, 0], past the view and a
        (1, 0, 3, [-4, 0, 0, 0, 0, 0, 0, 0], True),  # a[0, 7], before the view
        (1, 2, 0, [0] * 8, True),  # the offsets
    ],
)
def test_a_contiguous_view_s_gather_is_checked_as_the_interpreter_counts(
    tmp_path: Path, r: int, i: int, j: int, gathered: list[int], outside: bool
) -> None:
    program = write(tmp_path, GATHER_VIEW)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    inputs = (a, np.zeros(8, np.float32), np.array(gathered, np.int32), np.int64(r))
    inputs += (np.int64(8), np.int64(i), np.int64(j))
    if outside:
        with pytest.raises(DhirError, match="out of bounds"):
            dhir.run(program, *inputs, backend="interp")
        assert failed_at(program, *inputs) == SourceLoc(str(program), 10, 12)
        return
    want = dhir.run(program, *inputs, backend="interp")
    got = dhir.run(program, *inputs, runtime_checks=True)
    for expected, found in zip(want, got, strict=True):
        assert expected.tobytes() == found.tobytes()


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_view_with_gaps_checks_its_gather_s_offsets_alone(tmp_path: Path) -> None:
    # Columns 0-3: native code reaches a[r + i, j + k] for lane value k, past the view's
    # columns, which the interpreter does not run at all.
    program = write(tmp_path, GATHER_VIEW)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    lanes = np.array([0, 1, 2, 3, 4, 0, 0, 0], np.int32)
    inputs = (a, np.zeros(8, np.float32), lanes, np.int64(2), np.int64(4), np.int64(0))
    with pytest.raises(DhirError, match="not contiguous"):
        dhir.run(program, *inputs, np.int64(3), backend="interp")
    got = dhir.run(program, *inputs, np.int64(3), runtime_checks=True)[1]
    assert got[:5].tolist() == a[2, 3:8].tolist()
    assert failed_at(program, *inputs, np.int64(4)) == SourceLoc(str(program), 10, 12)


# Transfers not in bounds from a[i, j], masked by %mk's lanes or not (lines 12-15): the
# lanes from the row's end on are skipped, a read's padded. At j >= 2**31 past the end,
# native code counted them in 32 bits (convert-vector-to-llvm's default): it read other
# memory with exit status 0 (j = 2**63 - 2: [6, 7, 8, 9] for pads) or died of SIGSEGV
# (j = 2**32 + 2). The check of the masked ones took lane k at j + k, which wrapped
# negative from j = 2**63 - 2 on, and stopped a read the interpreter pads.
PADDED = """\
func.func @main(%a: memref<4x8xf32>, %o: memref<2x8xf32>, %mk: memref<8xi32>, %i: index, %j: index) {
  dhir.schedule %a, %o, %mk {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %o, %mk {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %pad = arith.constant -1.0 : f32
      %seven = arith.constant dense<7.0> : vector<8xf32>
      %zero = arith.constant dense<0> : vector<8xi32>
      %raw = vector.load %mk[%c0] : memref<8xi32>, vector<8xi32>
      %m = arith.cmpi ne, %raw, %zero : vector<8xi32>
      %r = vector.transfer_read %a[%i, %j], %pad, %m {in_bounds = [false]} : memref<4x8xf32>, vector<8xf32>
      %u = vector.transfer_read %a[%i, %j], %pad {in_bounds = [false]} : memref<4x8xf32>, vector<8xf32>
      vector.transfer_write %seven, %a[%i, %j], %m {in_bounds = [false]} : vector<8xf32>, memref<4x8xf32>
      vector.transfer_write %seven, %a[%i, %j] {in_bounds = [false]} : vector<8xf32>, memref<4x8xf32>
      vector.store %r, %o[%c0, %c0] : memref<2x8xf32>, vector<8xf32>
      vector.store %u, %o[%c1, %c0] : memref<2x8xf32>, vector<8xf32>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_padded_lanes_far_past_the_end_are_skipped_as_the_interpreter_skips_them(
    tmp_path: Path,
) -> None:
    program = write(tmp_path, PADDED)
    for j in (5, 2**31 + 2, 2**32 + 2, 2**63 - 2):
        inputs = (np.arange(32, dtype=np.float32).reshape(4, 8), np.zeros((2, 8), np.float32))
        inputs += (np.array([1, 1, 0, 1, 1, 1, 1, 1], np.int32), np.int64(1), np.int64(j))
        want = dhir.run(program, *inputs, backend="interp")
        got = dhir.run(program, *inputs)
        assert [w.tobytes() for w in want] == [g.tobytes() for g in got], j
