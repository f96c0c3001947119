"""Out-of-bounds accesses refused before a run (dhir.analysis.bounds): a load or store that
surely runs outside its memref's static shape is refused at its line by both backends,
and an input too small for the accesses a program surely runs on a memref of dynamic
shape is refused before the run starts. Native code checks no access without
--runtime-checks, so these programs used to read or write other memory and exit 0;
programs in bounds, and those the analysis cannot decide, still run."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.ir import SSAValue

import dhir
from dhir.analysis import bounds
from dhir.analysis.bounds import entry_bounds
from dhir.ir.diagnostics import DhirError, SourceLoc, loc_of
from dhir.ir.text import parse_string
from dhir.toolchain import entry as entry_module


def _task(args: str, memrefs: str, body: str) -> str:
    return f"""func.func @main({args}) {{
  dhir.schedule {memrefs} {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, {memrefs} {{
{body}
    }}
  }}
  return
}}
"""


# b[i] = a[i] for i in [0, 11) of 10 elements: the load at line 9 runs past the end.
PAST_END = _task(
    "%a: memref<10xf64>, %b: memref<10xf64>",
    "%a, %b",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c11 = arith.constant 11 : index
      scf.for %i = %c0 to %c11 step %c1 {
        %x = memref.load %a[%i] : memref<10xf64>
        memref.store %x, %b[%i] : memref<10xf64>
      }""",
)
# A halo read a[i - 1] from i = 0 (line 6), with affine ops.
HALO = _task(
    "%a: memref<10xf64>, %b: memref<10xf64>",
    "%a, %b",
    """      affine.for %i = 0 to 10 {
        %x = affine.load %a[%i - 1] : memref<10xf64>
        affine.store %x, %b[%i] : memref<10xf64>
      }""",
)
# The same halo in bounds: i from 1.
HALO_IN_BOUNDS = HALO.replace("affine.for %i = 0 to 10", "affine.for %i = 1 to 10")
# Rows of a 4x5 array, columns 0..5: the first point out is (0, 5), at line 11.
COLUMNS_PAST_END = _task(
    "%a: memref<4x5xi32>",
    "%a",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c6 = arith.constant 6 : index
      %v = arith.constant 7 : i32
      scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c6) step (%c1, %c1) {
        memref.store %v, %a[%i, %j] : memref<4x5xi32>
      }""",
)
# An entry without dhir.schedule (CodeDrop makes its task): the store at line 6.
PLAIN_MAIN = """func.func @main(%a: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c9 = arith.constant 9 : index
  %v = arith.constant 7 : i32
  scf.for %i = %c0 to %c9 step %c1 {
    memref.store %v, %a[%i] : memref<8xi32>
  }
  return
}
"""
# A constant subscript past the end in a task of no loop (line 7).
CONSTANT_INDEX = _task(
    "%a: memref<8xi32>",
    "%a",
    """      %c8 = arith.constant 8 : index
      %v = arith.constant 7 : i32
      memref.store %v, %a[%c8] : memref<8xi32>""",
)
# A buffer the task allocates, written past its end (line 11).
ALLOCATED = _task(
    "%a: memref<4xf32>",
    "%a",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c5 = arith.constant 5 : index
      %one = arith.constant 1.0 : f32
      %buf = memref.alloc() : memref<4xf32>
      scf.for %i = %c0 to %c5 step %c1 {
        memref.store %one, %buf[%i] : memref<4xf32>
      }
      memref.dealloc %buf : memref<4xf32>""",
)
# A halo a[i - 1] from i = 0 of a memref of dynamic size: below 0 whatever its size.
DYNAMIC_HALO = _task(
    "%a: memref<?xf64>, %b: memref<?xf64>",
    "%a, %b",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {
        %j = arith.subi %i, %c1 : index
        %x = memref.load %a[%j] : memref<?xf64>
        memref.store %x, %b[%i] : memref<?xf64>
      }""",
)
# b[i] = a[i + 1] for i in [0, 16) of memrefs of dynamic size: a needs 17 elements, b 16.
DYNAMIC = _task(
    "%a: memref<?xf64>, %b: memref<?xf64>",
    "%a, %b",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      scf.for %i = %c0 to %c16 step %c1 {
        %j = arith.addi %i, %c1 : index
        %x = memref.load %a[%j] : memref<?xf64>
        memref.store %x, %b[%i] : memref<?xf64>
      }""",
)
# DYNAMIC without dhir.schedule: CodeDrop makes its task before the build.
PLAIN_DYNAMIC = """func.func @main(%a: memref<?xf64>, %b: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c16 step %c1 {
    %j = arith.addi %i, %c1 : index
    %x = memref.load %a[%j] : memref<?xf64>
    memref.store %x, %b[%i] : memref<?xf64>
  }
  return
}
"""
# Past the end only where a condition holds, which it never does: not refused.
GUARDED = _task(
    "%a: memref<10xf64>, %b: memref<10xf64>",
    "%a, %b",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c10 = arith.constant 10 : index
      %c11 = arith.constant 11 : index
      scf.for %i = %c0 to %c11 step %c1 {
        %in = arith.cmpi ult, %i, %c10 : index
        scf.if %in {
          %x = memref.load %a[%i] : memref<10xf64>
          memref.store %x, %b[%i] : memref<10xf64>
        }
      }""",
)
# The loop's end is an argument: not known before the run (--runtime-checks' case).
RUN_TIME_BOUND = _task(
    "%a: memref<10xf64>, %b: memref<10xf64>, %n: index",
    "%a, %b",
    """      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %n step %c1 {
        %x = memref.load %a[%i] : memref<10xf64>
        memref.store %x, %b[%i] : memref<10xf64>
      }""",
)
# A stencil whose rows split between ranks: u[i + 1] for i up to 31 of 32 rows (line 11).
STENCIL = """func.func @main(%u: memref<32x8xf64>, %v: memref<32x8xf64>) {
  dhir.schedule %u, %v {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %u, %v {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c32 = arith.constant 32 : index
      scf.parallel (%i, %j) = (%c0, %c0) to (%c32, %c8) step (%c1, %c1) {
        %ip = arith.addi %i, %c1 : index
        %x = memref.load %u[%ip, %j] : memref<32x8xf64>
        memref.store %x, %v[%i, %j] : memref<32x8xf64>
      }
    }
  }
  return
}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.mlir"
    path.write_text(text)
    return path


def _refused(program: Path, *args: object, backend: str = "native") -> DhirError:
    with pytest.raises(DhirError) as caught:
        dhir.run(program, *args, backend=backend)
    return caught.value


def _f64(*shape: int) -> np.ndarray:
    return np.zeros(shape)


def _i32(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.int32)


@pytest.mark.parametrize("backend", ["native", "interp"])
@pytest.mark.parametrize(
    ("text", "inputs", "line", "col", "says"),
    [
        (
            PAST_END,
            [_f64(10), _f64(10)],
            9,
            14,
            "'memref.load' accesses index 10 of dimension 0, whose size is 10",
        ),
        (
            HALO,
            [_f64(10), _f64(10)],
            6,
            14,
            "'affine.load' accesses index -1 of dimension 0, below 0",
        ),
        (COLUMNS_PAST_END, [_i32(4, 5)], 11, 9, "index 5 of dimension 1, whose size is 5"),
        (PLAIN_MAIN, [_i32(8)], 7, 5, "'memref.store' accesses index 8 of dimension 0"),
        (CONSTANT_INDEX, [_i32(8)], 7, 7, "'memref.store' accesses index 8 of dimension 0"),
        (ALLOCATED, [np.zeros(4, np.float32)], 11, 9, "'memref.store' accesses index 4 of"),
        (
            DYNAMIC_HALO,
            [_f64(8), _f64(8)],
            10,
            14,
            "'memref.load' accesses index -1 of dimension 0, below 0",
        ),
        (STENCIL, [_f64(32, 8), _f64(32, 8)], 11, 14, "index 32 of dimension 0, whose size is 32"),
    ],
)
def test_a_sure_access_out_of_bounds_is_refused_at_its_line(
    tmp_path: Path,
    backend: str,
    text: str,
    inputs: list[np.ndarray],
    line: int,
    col: int,
    says: str,
) -> None:
    program = _write(tmp_path, text)
    diagnostic = _refused(program, *inputs, backend=backend).diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), line, col)
    assert says in diagnostic.message
    assert "out of bounds" in diagnostic.message


def test_the_first_point_out_is_reported() -> None:
    outside = entry_bounds(parse_string(COLUMNS_PAST_END), "main").outside
    assert outside is not None
    assert (outside.index, outside.dim) == ((0, 5), 1)


@pytest.mark.parametrize("text", [HALO_IN_BOUNDS, GUARDED, RUN_TIME_BOUND, DYNAMIC])
def test_programs_the_analysis_does_not_prove_out_are_not_refused(text: str) -> None:
    assert entry_bounds(parse_string(text), "main").outside is None


def test_guarded_and_run_time_bounds_run_as_before() -> None:
    a = np.arange(10.0)
    got = dhir.run(GUARDED, a, np.zeros(10), backend="interp")
    np.testing.assert_array_equal(got[1], a)
    got = dhir.run(RUN_TIME_BOUND, a, np.zeros(10), np.int64(10), backend="interp")
    np.testing.assert_array_equal(got[1], a)
    got = dhir.run(HALO_IN_BOUNDS, a, np.zeros(10), backend="interp")
    np.testing.assert_array_equal(got[1][1:], a[:-1])


def test_dynamic_sizes_needed_are_found() -> None:
    needs = entry_bounds(parse_string(DYNAMIC), "main").needs
    assert {key: need.size for key, need in needs.items()} == {(0, 0): 17, (1, 0): 16}


@pytest.mark.parametrize("backend", ["native", "interp"])
def test_an_input_too_small_for_a_dynamic_shape_is_refused_before_the_run(
    tmp_path: Path, backend: str
) -> None:
    program = _write(tmp_path, DYNAMIC)
    error = _refused(program, np.arange(16.0), np.zeros(16), backend=backend)
    message = error.diagnostics[0].message
    assert message.startswith("argument #0 of @main (memref<?xf64>) is given an array of")
    assert f"'memref.load' at {program}:10:14 accesses index 16 of dimension 0" in message
    assert "give at least 17 elements along dimension 0" in message


def test_an_input_large_enough_for_a_dynamic_shape_runs() -> None:
    a = np.arange(20.0)
    got = dhir.run(DYNAMIC, a, np.zeros(16), backend="interp")
    np.testing.assert_array_equal(got[1], a[1:17])


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_compiled_executable_checks_its_inputs_sizes(tmp_path: Path) -> None:
    program = _write(tmp_path, DYNAMIC)
    exe = tmp_path / "prog"
    cli = [sys.executable, "-m", "dhir.cli.main"]
    subprocess.run([*cli, "compile", str(program), "-n", "2", "-o", str(exe), "-q"], check=True)
    for name, size in (("a", 17), ("small", 10), ("b", 16)):
        np.save(tmp_path / f"{name}.npy", np.arange(float(size)))
    run = [*cli, "run", str(exe), "-n", "2", "-q", "--output-dir", str(tmp_path / "out")]
    small = subprocess.run(
        [*run, "--input", str(tmp_path / "small.npy"), "--input", str(tmp_path / "b.npy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert small.returncode != 0
    assert "give at least 17 elements along dimension 0" in small.stderr
    subprocess.run(
        [*run, "--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy")],
        check=True,
        timeout=300,
    )
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "arg1.npy"), np.arange(1.0, 17.0))
    # Run with mpirun directly, no dhir to check first: the executable checks the sizes.
    from dhir.toolchain.tools import find_mpi

    mpirun = find_mpi("mpich").prefix / "bin" / "mpirun"
    np.arange(10.0).tofile(tmp_path / "small.raw")
    np.zeros(16).tofile(tmp_path / "b.raw")
    (tmp_path / "raw").mkdir()
    words = [
        str(tmp_path / "raw"),
        str(tmp_path / "small.raw"),
        "10",
        str(tmp_path / "b.raw"),
        "16",
    ]
    direct = subprocess.run(
        [str(mpirun), "-n", "2", str(exe), *words], capture_output=True, text=True, timeout=300
    )
    assert direct.returncode != 0
    assert (
        "the size of dimension 0 of argument #0 (memref<?xf64>) is 10, but 'memref.load' at "
        f"{program}:10:14 accesses index 16 of dimension 0" in direct.stderr
    )
    assert "give at least 17 elements" in direct.stderr


# --- views, vector widths, linalg ops and copies ------------------------------------------


def _main(args: str, body: str) -> str:
    return f"""func.func @main({args}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v7 = arith.constant 7 : i32
{body}
  return
}}
"""


def _constant_tasks(count: int, b_size: int) -> str:
    """`count` tasks of constant subscripts (a generated schedule's, which the analysis
    reads without its walk): task k reads a[k + 1] of a memref of dynamic size and writes
    b[k] of `b_size` elements; task k's store is at line 10 + 8k."""
    tasks = "\n".join(
        f"""    %t{k} = dhir.task %cpu, %a, %b {{
      %i = arith.constant {k} : index
      %j = arith.constant {k + 1} : index
      %x = memref.load %a[%j] : memref<?xf64>
      %c = arith.constant 1.0 : f64
      %y = arith.addf %x, %c : f64
      memref.store %y, %b[%i] : memref<{b_size}xf64>
    }}"""
        for k in range(count)
    )
    return f"""func.func @main(%a: memref<?xf64>, %b: memref<{b_size}xf64>) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
{tasks}
  }}
  return
}}
"""


TEN = "%a: memref<10xi32>, %out: memref<10xi32>"
STRIDED4 = "memref<4xi32, strided<[1], offset: 4>>"
STRIDED8 = "memref<8xi32, strided<[1], offset: 6>>"
# Index 4 of a subview of 4 elements (in its base, a[8]): out of the view, line 8.
SUBVIEW = _main(
    TEN,
    f"""  %c6 = arith.constant 6 : index
  %s = memref.subview %a[4] [4] [1] : memref<10xi32> to {STRIDED4}
  scf.for %i = %c0 to %c6 step %c1 {{
    memref.store %v7, %s[%i] : {STRIDED4}
  }}""",
)
# A cast of 8 elements from a[6]: in the view, but a[10] is past its base (line 8).
REINTERPRET = _main(
    TEN,
    f"""  %c8 = arith.constant 8 : index
  %s = memref.reinterpret_cast %a to offset: [6], sizes: [8], strides: [1] : memref<10xi32> to {STRIDED8}
  scf.for %i = %c0 to %c8 step %c1 {{
    memref.store %v7, %s[%i] : {STRIDED8}
  }}""",
)
REINTERPRET_IN_BOUNDS = REINTERPRET.replace("%c8 = arith.constant 8", "%c8 = arith.constant 4")
# Row 2 of a 2x5 expand_shape (line 8).
EXPAND = _main(
    TEN,
    """  %c5 = arith.constant 5 : index
  %s = memref.expand_shape %a [[0, 1]] output_shape [2, 5] : memref<10xi32> into memref<2x5xi32>
  scf.for %i = %c0 to %c5 step %c1 {
    %x = memref.load %s[%i, %c1] : memref<2x5xi32>
    memref.store %x, %out[%i] : memref<10xi32>
  }""",
)
# Element 10 of a collapse_shape of 2x5 (line 8).
COLLAPSE = _main(
    "%a: memref<2x5xi32>, %out: memref<12xi32>",
    """  %c12 = arith.constant 12 : index
  %s = memref.collapse_shape %a [[0, 1]] : memref<2x5xi32> into memref<10xi32>
  scf.for %i = %c0 to %c12 step %c1 {
    %x = memref.load %s[%i] : memref<10xi32>
    memref.store %x, %out[%i] : memref<12xi32>
  }""",
)
# Element 10 of a memref.view of 10 i32 of a buffer of 40 bytes (line 9).
VIEW = _main(
    TEN,
    """  %c12 = arith.constant 12 : index
  %buf = memref.alloc() : memref<40xi8>
  %s = memref.view %buf[%c0][] : memref<40xi8> to memref<10xi32>
  scf.for %i = %c0 to %c12 step %c1 {
    memref.store %v7, %s[%i] : memref<10xi32>
  }
  memref.dealloc %buf : memref<40xi8>""",
)
# Column 2 of a transpose of shape 5x2 (line 8).
TRANSPOSE = _main(
    "%a: memref<2x5xi32>, %out: memref<10xi32>",
    """  %c3 = arith.constant 3 : index
  %t = memref.transpose %a (i, j) -> (j, i) : memref<2x5xi32> to memref<5x2xi32, strided<[1, 5]>>
  scf.for %i = %c0 to %c3 step %c1 {
    %x = memref.load %t[%c1, %i] : memref<5x2xi32, strided<[1, 5]>>
    memref.store %x, %out[%i] : memref<10xi32>
  }""",
)
F10 = "%a: memref<10xf32>, %out: memref<10xf32>"
# Four lanes from index 8 of 10 elements: lanes 10 and 11 are past the end (line 6).
VECTOR_LOAD = _main(
    F10,
    """  %c8 = arith.constant 8 : index
  %x = vector.load %a[%c8] : memref<10xf32>, vector<4xf32>
  vector.store %x, %out[%c0] : memref<10xf32>, vector<4xf32>""",
)
VECTOR_STORE = _main(
    F10,
    """  %c8 = arith.constant 8 : index
  %x = vector.load %a[%c0] : memref<10xf32>, vector<4xf32>
  vector.store %x, %out[%c8] : memref<10xf32>, vector<4xf32>""",
)
# A transfer_read said in bounds that is not (line 7); without in_bounds it pads.
TRANSFER_READ = _main(
    F10,
    """  %c8 = arith.constant 8 : index
  %p = arith.constant 0.0 : f32
  %x = vector.transfer_read %a[%c8], %p {in_bounds = [true]} : memref<10xf32>, vector<4xf32>
  vector.store %x, %out[%c0] : memref<10xf32>, vector<4xf32>""",
)
TRANSFER_PADDED = TRANSFER_READ.replace(" {in_bounds = [true]}", "")
TRANSFER_WRITE = _main(
    F10,
    """  %c8 = arith.constant 8 : index
  %x = vector.load %a[%c0] : memref<10xf32>, vector<4xf32>
  vector.transfer_write %x, %out[%c8] {in_bounds = [true]} : vector<4xf32>, memref<10xf32>""",
)
# A linalg.copy out of a cast that reaches past its base (line 7).
LINALG = _main(
    F10,
    """  %s = memref.reinterpret_cast %a to offset: [6], sizes: [8], strides: [1] : memref<10xf32> to memref<8xf32, strided<[1], offset: 6>>
  %o = memref.subview %out[0] [8] [1] : memref<10xf32> to memref<8xf32, strided<[1]>>
  linalg.copy ins(%s : memref<8xf32, strided<[1], offset: 6>>) outs(%o : memref<8xf32, strided<[1]>>)""",
)
# A memref.copy out of the same cast (line 7).
COPY = _main(
    F10,
    """  %s = memref.reinterpret_cast %a to offset: [6], sizes: [8], strides: [1] : memref<10xf32> to memref<8xf32, strided<[1], offset: 6>>
  %o = memref.subview %out[0] [8] [1] : memref<10xf32> to memref<8xf32, strided<[1]>>
  memref.copy %s, %o : memref<8xf32, strided<[1], offset: 6>> to memref<8xf32, strided<[1]>>""",
)


def _i32s(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [np.zeros(shape, np.int32) for shape in shapes]


def _f32s(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [np.zeros(shape, np.float32) for shape in shapes]


OF_VIEW = "out of bounds of the view %s (memref of shape"
THROUGH = "'memref.store' accesses, through the view %s (the 'memref.reinterpret_cast' at"
VIEW_CASES = [
    (SUBVIEW, _i32s((10,), (10,)), 8, 5, f"index 4 of dimension 0, whose size is 4, {OF_VIEW}"),
    (REINTERPRET, _i32s((10,), (10,)), 8, 5, THROUGH),
    (EXPAND, _i32s((10,), (10,)), 8, 10, f"index 2 of dimension 0, whose size is 2, {OF_VIEW}"),
    (
        COLLAPSE,
        _i32s((2, 5), (12,)),
        8,
        10,
        f"index 10 of dimension 0, whose size is 10, {OF_VIEW}",
    ),
    (VIEW, _i32s((10,), (10,)), 9, 5, f"index 10 of dimension 0, whose size is 10, {OF_VIEW}"),
    (TRANSPOSE, _i32s((2, 5), (10,)), 8, 10, "index 2 of dimension 1, whose size is 2, out of"),
    (VECTOR_LOAD, _f32s((10,), (10,)), 6, 8, "'vector.load' accesses index 10 of dimension 0"),
    (VECTOR_STORE, _f32s((10,), (10,)), 7, 3, "'vector.store' accesses index 10 of"),
    (TRANSFER_READ, _f32s((10,), (10,)), 7, 8, "'vector.transfer_read' accesses index 10 of"),
    (TRANSFER_WRITE, _f32s((10,), (10,)), 7, 3, "'vector.transfer_write' accesses index 10"),
    (LINALG, _f32s((10,), (10,)), 7, 3, "'linalg.copy' accesses, through the view %s"),
    (COPY, _f32s((10,), (10,)), 7, 3, "'memref.copy' accesses, through the view %s"),
]


@pytest.mark.parametrize("backend", ["native", "interp"])
@pytest.mark.parametrize(("text", "inputs", "line", "col", "says"), VIEW_CASES)
def test_views_vectors_and_linalg_out_of_bounds_are_refused_at_the_access(
    tmp_path: Path,
    backend: str,
    text: str,
    inputs: list[np.ndarray],
    line: int,
    col: int,
    says: str,
) -> None:
    """Each of these ran natively to exit 0, reading or writing past the memref."""
    program = _write(tmp_path, text)
    diagnostic = _refused(program, *inputs, backend=backend).diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), line, col)
    assert says in diagnostic.message
    # Native code checks such an access by default: the error must not say it does not.
    assert "does not check" not in diagnostic.message
    assert "each time the program runs. Fix" in diagnostic.message


def test_a_view_past_its_base_names_the_view_the_base_and_the_fix(tmp_path: Path) -> None:
    program = _write(tmp_path, REINTERPRET)
    message = _refused(program, *_i32s((10,), (10,))).diagnostics[0].message
    assert f"(the 'memref.reinterpret_cast' at {program}:6:8), index 10 of dimension 0" in message
    assert "of the memref it views, %a, whose size is 10" in message
    assert "Fix the view's offset, sizes and strides so that it stays within %a" in message
    program = _write(tmp_path, SUBVIEW)
    message = _refused(program, *_i32s((10,), (10,))).diagnostics[0].message
    assert f"%s (the 'memref.subview' at {program}:6:8) views %a)" in message


@pytest.mark.parametrize("text", [REINTERPRET_IN_BOUNDS, TRANSFER_PADDED])
def test_views_and_transfers_in_bounds_are_not_refused(text: str) -> None:
    assert entry_bounds(parse_string(text), "main").outside is None


def test_a_padded_transfer_read_runs() -> None:
    a = np.arange(10, dtype=np.float32)
    got = dhir.run(TRANSFER_PADDED, a, np.zeros(10, np.float32), backend="interp")
    np.testing.assert_array_equal(got[1][:4], [8, 9, 0, 0])


# --- accesses under conditions decided by the loops' bounds -------------------------------

# a[i + 10] where i < 5, in a loop to 20: a[10] at i = 0 (line 12).
SCF_IF = _main(
    TEN,
    """  %c5 = arith.constant 5 : index
  %c20 = arith.constant 20 : index
  scf.for %i = %c0 to %c20 step %c1 {
    %lt = arith.cmpi slt, %i, %c5 : index
    scf.if %lt {
      %j = arith.addi %i, %c5 : index
      %k = arith.addi %j, %c5 : index
      %x = memref.load %a[%k] : memref<10xi32>
      memref.store %x, %out[%i] : memref<10xi32>
    }
  }""",
)
# The else-branch of i < 5 runs from i = 5: out[i] reaches out[10] (line 15).
SCF_ELSE = SCF_IF.replace(
    "      memref.store %x, %out[%i] : memref<10xi32>\n    }",
    "      memref.store %x, %out[%i] : memref<10xi32>\n    } else {\n"
    "      memref.store %v7, %out[%i] : memref<10xi32>\n    }",
).replace("%a[%k]", "%a[%i]")
# a[i - 8] where i >= 15, in a loop to 20: a[10] at i = 18 (line 4).
AFFINE_IF = """func.func @main(%a: memref<10xi32>, %out: memref<20xi32>) {
  affine.for %i = 0 to 20 {
    affine.if affine_set<(d0) : (d0 - 15 >= 0)>(%i) {
      %x = affine.load %a[%i - 8] : memref<10xi32>
      affine.store %x, %out[%i] : memref<20xi32>
    }
  }
  return
}
"""
CONDITION_CASES = [
    (SCF_IF, _i32s((10,), (10,)), 12, 12, "'memref.load' accesses index 10 of dimension 0"),
    (SCF_ELSE, _i32s((10,), (10,)), 15, 7, "'memref.store' accesses index 10 of dimension 0"),
    (AFFINE_IF, _i32s((10,), (20,)), 4, 12, "'affine.load' accesses index 10 of dimension 0"),
]
# Conditions that never hold where the access would be out, or that the loops' bounds do
# not decide: not refused.
NEVER = SCF_IF.replace("arith.cmpi slt, %i, %c5", "arith.cmpi slt, %i, %c0")
IN_BOUNDS_WHERE_IT_HOLDS = SCF_IF.replace("%a[%k]", "%a[%j]")  # a[i + 5] for i < 5
AT_RUN_TIME = SCF_IF.replace("%out: memref<10xi32>", "%out: memref<10xi32>, %n: index").replace(
    "arith.cmpi slt, %i, %c5", "arith.cmpi slt, %i, %n"
)
NO_LOOP = _main(
    TEN,
    """  %c12 = arith.constant 12 : index
  %c5 = arith.constant 5 : index
  %no = arith.cmpi sgt, %c1, %c5 : index
  scf.if %no {
    memref.store %v7, %out[%c12] : memref<10xi32>
  }""",
)


@pytest.mark.parametrize("backend", ["native", "interp"])
@pytest.mark.parametrize(("text", "inputs", "line", "col", "says"), CONDITION_CASES)
def test_accesses_under_decided_conditions_out_of_bounds_are_refused(
    tmp_path: Path,
    backend: str,
    text: str,
    inputs: list[np.ndarray],
    line: int,
    col: int,
    says: str,
) -> None:
    """Each of these ran natively to exit 0 with garbage; both backends now refuse it
    before the run (the interpreter alone would stop at the access, without these
    words)."""
    program = _write(tmp_path, text)
    diagnostic = _refused(program, *inputs, backend=backend).diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), line, col)
    assert says in diagnostic.message
    assert "out of bounds (memref of shape" in diagnostic.message
    assert "each time the program runs" in diagnostic.message


@pytest.mark.parametrize("text", [NEVER, IN_BOUNDS_WHERE_IT_HOLDS, AT_RUN_TIME, NO_LOOP])
def test_accesses_under_conditions_not_surely_out_are_not_refused(text: str) -> None:
    assert entry_bounds(parse_string(text), "main").outside is None


def test_an_access_under_a_condition_that_never_holds_runs() -> None:
    got = dhir.run(NEVER, *_i32s((10,), (10,)), backend="interp")
    np.testing.assert_array_equal(got[1], np.zeros(10, np.int32))
    got = dhir.run(NO_LOOP, *_i32s((10,), (10,)), backend="interp")
    np.testing.assert_array_equal(got[1], np.zeros(10, np.int32))


# --- accesses in functions the entry calls, and after what may not return -----------------

# @put stores m[0..n) of 10 elements; @twice calls it with k + 2; the entry with 7, then 9:
# the store (line 7) reaches index 10 through the calls at lines 14 and 21.
CALLS = """func.func private @ext()
func.func @put(%m: memref<10xi32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 7 : i32
  scf.for %i = %c0 to %n step %c1 {
    memref.store %v, %m[%i] : memref<10xi32>
  }
  return
}
func.func @twice(%m: memref<10xi32>, %k: index) {
  %c2 = arith.constant 2 : index
  %n = arith.addi %k, %c2 : index
  func.call @put(%m, %n) : (memref<10xi32>, index) -> ()
  return
}
func.func @main(%a: memref<10xi32>) {
  %c7 = arith.constant 7 : index
  %c9 = arith.constant 9 : index
  func.call @twice(%a, %c7) : (memref<10xi32>, index) -> ()
  func.call @twice(%a, %c9) : (memref<10xi32>, index) -> ()
  return
}
"""
CALLS_IN_BOUNDS = CALLS.replace("%c9 = arith.constant 9", "%c9 = arith.constant 8")
# What may not return comes first: a function the module only declares (it may exit), a
# call of the entry itself, a while loop that may never end, an assert.
BEFORE = "  func.call @twice(%a, %c7) : (memref<10xi32>, index) -> ()\n"
AFTER_EXTERNAL = CALLS.replace(BEFORE, BEFORE + "  func.call @ext() : () -> ()\n")
AFTER_RECURSION = CALLS.replace(BEFORE, BEFORE + "  func.call @main(%a) : (memref<10xi32>) -> ()\n")
AFTER_WHILE = CALLS.replace(
    BEFORE,
    BEFORE
    + """  scf.while : () -> () {
    %go = arith.cmpi slt, %c7, %c9 : index
    scf.condition(%go)
  } do {
    scf.yield
  }
""",
)
AFTER_ASSERT = CALLS.replace(
    BEFORE,
    BEFORE + '  %ok = arith.cmpi sgt, %c7, %c9 : index\n  cf.assert %ok, "never"\n',
)
# The same stores straight in the entry, after an assert in the loop's body: from the
# second iteration on they run only if the first assert held.
ASSERT_IN_LOOP = _main(
    TEN,
    """  %c12 = arith.constant 12 : index
  scf.for %i = %c0 to %c12 step %c1 {
    memref.store %v7, %a[%i] : memref<10xi32>
    %ok = arith.cmpi slt, %i, %c1 : index
    cf.assert %ok, "only once"
  }""",
)


@pytest.mark.parametrize("backend", ["native", "interp"])
def test_an_access_in_a_called_function_is_refused_with_its_calls(
    tmp_path: Path, backend: str
) -> None:
    """It ran natively to exit 0, a store past the end of %a."""
    program = _write(tmp_path, CALLS)
    diagnostic = _refused(program, _i32(10), backend=backend).diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 7, 5)
    assert "'memref.store' accesses index 10 of dimension 0, whose size is 10" in (
        diagnostic.message
    )
    assert diagnostic.message.endswith(
        f"The entry reaches it through the 'func.call' at {program}:14:3, called from "
        f"the 'func.call' at {program}:21:3"
    )


@pytest.mark.parametrize(
    "text",
    [CALLS_IN_BOUNDS, AFTER_EXTERNAL, AFTER_RECURSION, AFTER_WHILE, AFTER_ASSERT, ASSERT_IN_LOOP],
)
def test_calls_in_bounds_and_accesses_after_what_may_not_return_are_not_refused(
    text: str,
) -> None:
    assert entry_bounds(parse_string(text), "main").outside is None


def test_an_access_before_what_may_not_return_is_still_refused() -> None:
    before = AFTER_WHILE.replace("%c7 = arith.constant 7", "%c7 = arith.constant 9")
    outside = entry_bounds(parse_string(before), "main").outside
    assert outside is not None
    assert outside.index == (10,)


def test_an_assert_that_fails_stops_before_the_access_out() -> None:
    with pytest.raises(DhirError, match="never"):
        dhir.run(AFTER_ASSERT, _i32(10), backend="interp")


# A generated schedule's task of literal subscripts, after a task that may stop.
TASK_AFTER_ASSERT = """func.func @main(%a: memref<8xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %no = arith.constant false
      cf.assert %no, "stop"
    }
    %t1 = dhir.task %cpu, %a {
      %c8 = arith.constant 8 : index
      %v = arith.constant 7 : i32
      memref.store %v, %a[%c8] : memref<8xi32>
    }
  }
  return
}
"""


def test_a_task_after_a_task_that_may_stop_is_not_refused() -> None:
    assert entry_bounds(parse_string(TASK_AFTER_ASSERT), "main").outside is None
    alone = TASK_AFTER_ASSERT.replace('      cf.assert %no, "stop"\n', "")
    outside = entry_bounds(parse_string(alone), "main").outside
    assert outside is not None
    assert outside.index == (8,)


def test_tasks_of_constant_subscripts_give_needs_and_the_first_out() -> None:
    found = entry_bounds(parse_string(_constant_tasks(6, 4)), "main")
    assert {key: need.size for key, need in found.needs.items()} == {(0, 0): 7}
    assert found.outside is not None
    assert (found.outside.index, found.outside.dim) == ((4,), 0)
    assert loc_of(found.outside.op) == SourceLoc("<string>", 10 + 8 * 4, 7)


def test_each_memrefs_shape_is_read_once_a_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    # Thousands of generated tasks access the same two memrefs (bench/programs.py).
    read: list[SSAValue] = []
    shape_of = bounds._shape  # pyright: ignore[reportPrivateUsage]

    def counted(memref: SSAValue) -> tuple[int, ...]:
        read.append(memref)
        return shape_of(memref)

    monkeypatch.setattr(bounds, "_shape", counted)
    assert entry_bounds(parse_string(_constant_tasks(50, 50)), "main").outside is None
    assert len(read) == 2
    # A walk's shapes are its own: another module's b of 4 elements is read anew.
    assert entry_bounds(parse_string(_constant_tasks(50, 4)), "main").outside is not None
    assert len(read) == 4


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_the_entry_is_walked_once_a_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backend: str
) -> None:
    """The checks before a run find the sizes an entry of dynamic shapes needs; the
    signatures of the run and of the build take them from there (CodeDrop and
    fast-math change no load or store), not from a walk of their own each."""
    walks: list[str] = []
    walk = bounds.entry_bounds

    def counted(module: object, entry: str) -> bounds.EntryBounds:
        walks.append(entry)
        return walk(module, entry)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(bounds, "entry_bounds", counted)
    monkeypatch.setattr(entry_module, "entry_bounds", counted)
    got = dhir.run(
        PLAIN_DYNAMIC, np.arange(20.0), np.zeros(16), backend=backend, output_dir=tmp_path
    )
    np.testing.assert_array_equal(got[1], np.arange(1.0, 17.0))
    assert walks == ["main"]
    error = _refused(_write(tmp_path, PLAIN_DYNAMIC), np.arange(16.0), np.zeros(16))
    assert "give at least 17 elements along dimension 0" in error.diagnostics[0].message


# b[i] = a[i] for i up to a's size, known at run time only: b of 2 elements for a of 4
# is written past at line 7 (natively, exit 0 before the inputs' sizes were used).
DIM_BOUND = """func.func @main(%a: memref<?xf64>, %b: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf64>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xf64>
    memref.store %x, %b[%i] : memref<?xf64>
  }
  return
}
"""
# The same loop, run only where a[0] > 0: a condition on data, so not surely run.
DIM_BOUND_IF_POSITIVE = DIM_BOUND.replace(
    "  scf.for %i = %c0 to %n step %c1 {",
    """  %first = memref.load %a[%c0] : memref<?xf64>
  %zero = arith.constant 0.0 : f64
  %positive = arith.cmpf ogt, %first, %zero : f64
  scf.if %positive {
  scf.for %i = %c0 to %n step %c1 {""",
).replace("  }\n  return", "  }\n  }\n  return")
DIM_BOUND_SAYS = (
    "'memref.store' accesses index 2 of dimension 0, whose size is 2, out of bounds "
    "(memref of shape ?, indices [2]), each time the program runs with these inputs "
    "(argument #1 (%b) given an array of shape (2,))"
)


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_loop_bounded_by_an_inputs_size_past_another_is_refused(
    tmp_path: Path, ranks: int
) -> None:
    program = _write(tmp_path, DIM_BOUND)
    with pytest.raises(DhirError) as caught:  # before the build
        dhir.run(program, np.arange(4.0), np.zeros(2), ranks=ranks)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc == SourceLoc(str(program), 7, 5)
    assert DIM_BOUND_SAYS in diagnostic.message
    assert "Give a larger array, or fix the loop bounds or subscripts" in diagnostic.message


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", ["1", "2"])
def test_dhir_run_refuses_a_loop_bounded_by_an_inputs_size_past_another(
    tmp_path: Path, ranks: str
) -> None:
    program = _write(tmp_path, DIM_BOUND)
    np.save(tmp_path / "a.npy", np.arange(4.0))
    np.save(tmp_path / "b.npy", np.zeros(2))
    inputs = ["--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy")]
    run = [sys.executable, "-m", "dhir.cli.main", "run", str(program), "-n", ranks, *inputs]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert f"{program}:7:5: error: {DIM_BOUND_SAYS}" in done.stderr


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_loop_bounded_by_an_inputs_size_within_the_others_runs(ranks: int) -> None:
    a = np.arange(4.0)
    want = dhir.run(DIM_BOUND, a, np.zeros(5), backend="interp")
    got = dhir.run(DIM_BOUND, a, np.zeros(5), ranks=ranks)
    for mine, oracle in zip(got, want, strict=True):
        np.testing.assert_array_equal(mine, oracle)
    np.testing.assert_array_equal(got[1], [0.0, 1.0, 2.0, 3.0, 0.0])


def test_a_loop_under_a_condition_on_data_is_not_decided() -> None:
    module = parse_string(DIM_BOUND_IF_POSITIVE)
    assert bounds.given_bounds(module, "main", {0: (4,), 1: (2,)}, {}).outside is None
    assert bounds.given_bounds(parse_string(DIM_BOUND), "main", {0: (4,), 1: (2,)}, {}).outside


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_loop_under_a_condition_on_data_is_not_refused() -> None:
    # a[0] = 0: the loop does not run, and nothing is written past b.
    a, b = np.arange(4.0), np.zeros(2)
    want = dhir.run(DIM_BOUND_IF_POSITIVE, a, b, backend="interp")
    got = dhir.run(DIM_BOUND_IF_POSITIVE, a, b)
    for mine, oracle in zip(got, want, strict=True):
        np.testing.assert_array_equal(mine, oracle)


def test_a_scalar_input_bounding_a_loop_is_checked_with_its_value(tmp_path: Path) -> None:
    program = _write(tmp_path, RUN_TIME_BOUND)
    a, b = np.arange(10.0), np.zeros(10)
    error = _refused(program, a, b, np.int64(11))  # natively: refused before the build
    assert error.diagnostics[0].loc == SourceLoc(str(program), 8, 14)
    says = "index 10 of dimension 0, whose size is 10, out of bounds (memref of shape 10, "
    says += "indices [10]), each time the program runs with these inputs. Give other inputs, "
    says += "or fix the loop bounds or subscripts"
    assert says in error.diagnostics[0].message
    np.testing.assert_array_equal(dhir.run(program, a, b, np.int64(10), backend="interp")[1], a)


def test_inputs_are_walked_again_only_where_an_argument_decides_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks: list[str] = []
    walk = bounds.given_bounds

    def counted(*args: object) -> bounds.EntryBounds:
        walks.append("given")
        return walk(*args)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(bounds, "given_bounds", counted)
    # Both refused natively before a build: the first by the sizes it needs, unwalked.
    with pytest.raises(DhirError, match="give at least 17 elements"):
        dhir.run(PLAIN_DYNAMIC, np.arange(16.0), np.zeros(16))
    assert walks == []
    with pytest.raises(DhirError, match="with these inputs"):
        dhir.run(DIM_BOUND, np.arange(4.0), np.zeros(2))
    assert walks == ["given"]
    # The interpreter checks each access as it runs; so does --runtime-checks.
    with pytest.raises(DhirError, match="out of bounds"):
        dhir.run(DIM_BOUND, np.arange(4.0), np.zeros(2), backend="interp")
    assert walks == ["given"]


# Views made before the schedule, at offsets that are numbers (or an argument's value given
# to a run), read in a task's loops: every access is in bounds (%A rows 1..3 of 5, %B rows
# 1..3 of 4). The walk names each task's literals from scratch, so that tasks differing
# only in them give one text; the views' offsets, named before the task, once took the
# values of the task's literals of those names (%B read at row 4, "out of bounds").
VIEWS_BEFORE_THE_TASK = """
func.func @main(%A_: memref<5x3xf64>, %B_: memref<4x2xf64>, %o: index) {
  %A = memref.subview %A_[OFFSET, 0] [4, 3] [1, 1] : memref<5x3xf64> to memref<4x3xf64, strided<[3, 1], offset: ?>>
  %B = memref.subview %B_[OFFSET, 0] [3, 2] [1, 1] : memref<4x2xf64> to memref<3x2xf64, strided<[2, 1], offset: ?>>
  dhir.schedule %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %s0 = dhir.task %cpu, %A, %B {
      %k0 = arith.constant 0 : index
      %k1 = arith.constant 1 : index
      %n = arith.constant 2 : index
      %kk = arith.constant 3 : index
      scf.for %k = %k0 to %kk step %k1 {
        scf.for %j = %k0 to %n step %k1 {
          %a = memref.load %A[%k, %j] : memref<4x3xf64, strided<[3, 1], offset: ?>>
          %b = memref.load %B[%k, %j] : memref<3x2xf64, strided<[2, 1], offset: ?>>
          %c = arith.addf %a, %b : f64
          memref.store %c, %B[%k, %j] : memref<3x2xf64, strided<[2, 1], offset: ?>>
        }
      }
    }
  }
  return
}
"""


@pytest.mark.parametrize("offset", ["1", "%o"])
def test_views_made_before_a_task_keep_their_offsets(offset: str) -> None:
    text = VIEWS_BEFORE_THE_TASK.replace("OFFSET", offset)
    if offset == "1":  # the views' types then say their offsets
        text = text.replace("[3, 1], offset: ?", "[3, 1], offset: 3")
        text = text.replace("[2, 1], offset: ?", "[2, 1], offset: 2")
    assert entry_bounds(parse_string(text), "main").outside is None
    given = bounds.given_bounds(parse_string(text), "main", {}, {2: 1})
    assert given.outside is None
    inputs = [np.ones((5, 3)), np.ones((4, 2)), np.int64(1)]
    want = dhir.run(text, *inputs, backend="interp")
    got = dhir.run(text, *inputs, backend="native", ranks=1)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in want]
