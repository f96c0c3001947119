"""A failed run-time check of a size (a cast's, a linalg op's operand's, an access's
memref's) names the entry's argument that size is, where the IR says which: the size of
an argument along a dimension, or an index argument's value. Before, compiled
executables said only the op and the numbers ("size mismatch of dim 0: the cast's
operand has 3 there, where its type says 2"), and the user had to find which of the
inputs gave the 3."""

import re
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.ir.diagnostics import DhirError, SourceLoc
from dhir.ir.text import parse_string as parse_module
from dhir.toolchain.failure import FailedCheck, failed_check
from dhir.transforms.bounds_checks import BoundsChecksPass
from dhir.transforms.cast_checks import CastSizesPass
from dhir.transforms.linalg_sizes import LinalgSizesPass
from dhir.transforms.vector_checks import VectorChecksPass

# Casts of sizes an argument gives (%n's value, %a's size, %b's through a private
# function's argument) and of sizes no argument is (loaded; passed two ways).
CASTS = """\
func.func @main(%a: memref<?xf64>, %n: index, %b: memref<?x?xf64>, %p: memref<1xi64>, %k: i32) {
  %m = memref.alloc(%n) : memref<?xf64>
  %c = memref.cast %m : memref<?xf64> to memref<2xf64>
  %d = memref.cast %a : memref<?xf64> to memref<4xf64>
  func.call @f(%b) : (memref<?x?xf64>) -> ()
  %c0 = arith.constant 0 : index
  %l = memref.load %p[%c0] : memref<1xi64>
  %li = arith.index_cast %l : i64 to index
  %e = memref.alloc(%li) : memref<?xf64>
  %ec = memref.cast %e : memref<?xf64> to memref<5xf64>
  func.call @g(%a) : (memref<?xf64>) -> ()
  func.call @g(%m) : (memref<?xf64>) -> ()
  %ki = arith.index_cast %k : i32 to index
  %v = memref.subview %a[0] [%ki] [1] : memref<?xf64> to memref<?xf64, strided<[1]>>
  %vc = memref.cast %v : memref<?xf64, strided<[1]>> to memref<7xf64, strided<[1]>>
  return
}
func.func private @f(%x: memref<?x?xf64>) {
  %y = memref.cast %x : memref<?x?xf64> to memref<?x3xf64>
  return
}
func.func private @g(%x: memref<?xf64>) {
  %y = memref.cast %x : memref<?xf64> to memref<6xf64>
  return
}
"""


def _messages(text: str, *passes: object) -> list[str]:
    """The words of each check's failure in `text` after `passes`, in order."""
    module = parse_module(text)
    for one in passes:
        one.apply(None, module)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    said = str(module).split("Runtime op verification failed\\0A^ ")[1:]
    # As the runtime prints them: the printer's `\XX` is byte XX (the text is ASCII), its
    # `\\` a backslash.
    plain = (part.split("\\0ALocation")[0] for part in said)
    return [re.sub(r"\\([0-9A-F]{2}|\\)", _byte, part) for part in plain]


def _byte(escape: re.Match[str]) -> str:
    return "\\" if escape[1] == "\\" else chr(int(escape[1], 16))


def test_a_cast_s_check_names_the_argument_its_size_is() -> None:
    assert _messages(CASTS, CastSizesPass()) == [
        "size mismatch of dim 0 (the value of @main's argument %n)",
        "size mismatch of dim 0 (the size of @main's argument %a, dimension 0)",
        "size mismatch of dim 0",  # loaded from %p
        "size mismatch of dim 0 (the value of @main's argument %k)",
        "size mismatch of dim 1 (the size of @main's argument %b, dimension 1)",
        "size mismatch of dim 0",  # @g is given %a and %m
    ]


def test_an_entry_called_again_names_no_argument() -> None:
    again = CASTS.replace(
        "  func.call @g(%a)", "  func.call @main(%a, %n, %b, %p, %k) : "
        "(memref<?xf64>, index, memref<?x?xf64>, memref<1xi64>, i32) -> ()\n  func.call @g(%a)"
    )  # fmt: skip
    assert not any("argument" in said for said in _messages(again, CastSizesPass()))


# %a + %b into %a, of run-time rows each (line 2); %a read at an index from %idx.
LINALG = """\
func.func @main(%a: memref<?x3xf64>, %b: memref<?x3xf64>, %idx: memref<1xi64>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : memref<?x3xf64>, memref<?x3xf64>) outs(%a : memref<?x3xf64>) {
  ^bb0(%x: f64, %y: f64, %z: f64):
    %s = arith.addf %x, %y : f64
    linalg.yield %s : f64
  }
  %c0 = arith.constant 0 : index
  %i = memref.load %idx[%c0] : memref<1xi64>
  %ii = arith.index_cast %i : i64 to index
  %v = memref.load %a[%ii, %c0] : memref<?x3xf64>
  %w = memref.load %a[%ii, %ii] : memref<?x3xf64>
  return
}
"""


def test_a_linalg_op_s_check_names_both_arguments() -> None:
    assert _messages(LINALG, LinalgSizesPass()) == [
        "dimension #0 of input/output operand #1 is incompatible (it has the size of @main's "
        "argument %b, dimension 0; the loop runs the size of @main's argument %a, dimension 0)",
        "dimension #0 of input/output operand #2 is incompatible (it has the size of @main's "
        "argument %a, dimension 0; the loop runs the size of @main's argument %a, dimension 0)",
    ]


def test_an_access_s_check_names_the_argument_its_memref_s_size_is() -> None:
    assert _messages(LINALG, BoundsChecksPass()) == [
        "out-of-bounds access (the size of @main's argument %a, dimension 0)",
        # Dimension 1's size is 3, the type's: no argument gives it.
        "out-of-bounds access (dimension 0: the size of @main's argument %a, dimension 0)",
    ]


def test_a_failed_check_s_numbers_come_before_the_argument() -> None:
    output = (
        "ERROR: Runtime op verification failed\n^ size mismatch of dim 0 (the value of "
        '@main\'s argument %n)\nLocation: loc("p.mlir":5:8)\n'
    )
    errors = (
        "dhir: size mismatch on rank 0: dimension 0 of the cast's operand has 3, where its "
        "type says 2\n"
    )
    assert failed_check(output, errors) == FailedCheck(
        "size mismatch of dim 0: the cast's operand has 3 there, where its type says 2 "
        "(the value of @main's argument %n)",
        SourceLoc("p.mlir", 5, 8),
    )
    bounds = output.replace("size mismatch of dim 0", "out-of-bounds access").replace(
        "value of @main's argument %n", "size of @main's argument %a, dimension 0"
    )
    errors = "dhir: out-of-bounds access on rank 0: index 9 of dimension 0, whose size is 8\n"
    found = failed_check(bounds, errors)
    assert found is not None
    assert found.what == (
        "out-of-bounds access: index 9 of dimension 0, whose size is 8 (the size of @main's "
        "argument %a, dimension 0)"
    )


# b[i] = a[idx[i]] for i < 4, a of run-time size, in a task (the load at line 11).
GATHER = """\
func.func @main(%idx: memref<4xi64>, %a: memref<?xf64>, %b: memref<4xf64>) {
  dhir.schedule %idx, %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %idx, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %j = memref.load %idx[%i] : memref<4xi64>
        %ji = arith.index_cast %j : i64 to index
        %x = memref.load %a[%ji] : memref<?xf64>
        memref.store %x, %b[%i] : memref<4xf64>
      }
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_run_stopped_by_an_access_names_the_argument(tmp_path: Path, ranks: int) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(GATHER)
    run = partial(dhir.run, program, ranks=ranks)
    got = run(np.array([0, 3, 1, 2], np.int64), np.arange(4.0), np.zeros(4))
    assert got[2].tolist() == [0.0, 3.0, 1.0, 2.0]
    with pytest.raises(DhirError) as caught:
        run(np.array([0, 5, 1, 2], np.int64), np.arange(4.0), np.zeros(4))
    (diagnostic, *_) = caught.value.diagnostics
    assert diagnostic.loc == SourceLoc(str(program), 11, 14)
    assert diagnostic.message.startswith(
        "a runtime check failed: out-of-bounds access: index 5 of dimension 0, whose size is "
        "4 (the size of @main's argument %a, dimension 0);"
    ), diagnostic.message


def test_an_entry_named_with_parentheses_keeps_the_numbers_before_its_note() -> None:
    # The note was matched as parentheses holding none: after `@"f(x)"` (or `@f(x)`, as
    # it was written) the numbers were lost, and the note read as the check's words.
    odd = CASTS.replace("@main", '@"f(x)"')
    said = _messages(odd, CastSizesPass(entry="f(x)"))
    assert said[0] == 'size mismatch of dim 0 (the value of @"f(x)"\'s argument %n)'
    output = f'ERROR: Runtime op verification failed\n^ {said[0]}\nLocation: loc("p.mlir":3:8)\n'
    errors = (
        "dhir: size mismatch on rank 0: dimension 0 of the cast's operand has 3, where its "
        "type says 2\n"
    )
    found = failed_check(output, errors)
    assert found is not None
    assert found.what == (
        "size mismatch of dim 0: the cast's operand has 3 there, where its type says 2 "
        '(the value of @"f(x)"\'s argument %n)'
    )
    linalg = _messages(LINALG.replace("@main", '@"(m)"'), LinalgSizesPass(entry="(m)"))[0]
    output = output.replace(said[0], linalg)
    errors = (
        "dhir: size mismatch on rank 0: dimension 0 of operand #1 has 1, where the loop "
        "along it runs 2 times\n"
    )
    found = failed_check(output, errors)
    assert found is not None
    assert found.what.startswith(
        "dimension #0 of input/output operand #1 is incompatible: it has 1, where the loop "
        'along it runs 2 times (it has the size of @"(m)"\'s argument %b, dimension 0;'
    ), found.what


def test_an_entry_named_with_a_newline_keeps_its_note_on_one_line() -> None:
    # The runtime prints the message as it is: a newline in the name cut the line that
    # dhir.toolchain.failure reads.
    odd = CASTS.replace("@main", '@"a\\0Ab"')
    said = _messages(odd, CastSizesPass(entry="a\nb"))
    assert said[0] == 'size mismatch of dim 0 (the value of @"a\\0Ab"\'s argument %n)'


# a[i] read where the first element of %p is positive (line 7): %i is an index argument,
# which no check before the run decides, as the access may not run.
INDEXED = """\
func.func @main(%a: memref<?xf64>, %i: index, %b: memref<1xf64>, %p: memref<1xi64>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0 : i64
  %x = memref.load %p[%c0] : memref<1xi64>
  %go = arith.cmpi sgt, %x, %z : i64
  scf.if %go {
    %v = memref.load %a[%i] : memref<?xf64>
    memref.store %v, %b[%c0] : memref<1xf64>
  }
  return
}
"""


def test_an_access_s_check_names_the_argument_its_index_is() -> None:
    assert _messages(INDEXED, BoundsChecksPass()) == [
        "out-of-bounds access (the size of @main's argument %a, dimension 0; the index is "
        "the value of @main's argument %i)"
    ]
    two = INDEXED.replace("memref<?xf64>", "memref<?x4xf64>").replace("%a[%i]", "%a[%i, %i]")
    assert _messages(two, BoundsChecksPass()) == [
        "out-of-bounds access (dimension 0: the size of @main's argument %a, dimension 0; "
        "the index along dimension 0 is the value of @main's argument %i; the index along "
        "dimension 1 is the value of @main's argument %i)"
    ]


def test_a_note_of_the_index_alone_follows_the_numbers() -> None:
    output = (
        "ERROR: Runtime op verification failed\n^ out-of-bounds access (the index is the value "
        'of @main\'s argument %i)\nLocation: loc("p.mlir":7:10)\n'
    )
    errors = "dhir: out-of-bounds access on rank 0: index 5 of dimension 0, whose size is 4\n"
    found = failed_check(output, errors)
    assert found is not None
    assert found.what == (
        "out-of-bounds access: index 5 of dimension 0, whose size is 4 (the index is the value "
        "of @main's argument %i)"
    )


def _interp_error(text: str, tmp_path: Path, *inputs: object, entry: str = "main") -> str:
    program = tmp_path / "p.mlir"
    program.write_text(text)
    with pytest.raises(DhirError) as caught:
        dhir.run(program, *inputs, backend="interp", entry=entry)
    return caught.value.diagnostics[0].message


def test_the_interpreter_names_the_arguments_as_native_code_does(tmp_path: Path) -> None:
    # Before, its messages named the numbers only.
    gather = (np.array([0, 5, 1, 2], np.int64), np.arange(4.0), np.zeros(4))
    assert _interp_error(GATHER, tmp_path, *gather).endswith(
        "out of bounds (memref of shape 4, indices [5]) (the size of @main's argument %a, "
        "dimension 0)"
    )
    indexed = (np.arange(4.0), np.int64(5), np.zeros(1), np.array([1], np.int64))
    assert _interp_error(INDEXED, tmp_path, *indexed).endswith(
        "(the size of @main's argument %a, dimension 0; the index is the value of @main's "
        "argument %i)"
    )
    linalg = (np.zeros((2, 3)), np.zeros((1, 3)), np.array([0], np.int64))
    assert _interp_error(LINALG, tmp_path, *linalg).endswith(
        "the sizes must agree (it has the size of @main's argument %b, dimension 0; the loop "
        "runs the size of @main's argument %a, dimension 0)"
    )
    cast = CAST_OF_N.replace("@main", '@"f(x)"')
    said = _interp_error(cast, tmp_path, np.int64(3), np.zeros(4), entry="f(x)")
    assert said.endswith('(dimension 0: the value of @"f(x)"\'s argument %n)'), said


# A cast of an allocation of %n elements to 4 (line 3).
CAST_OF_N = """\
func.func @main(%n: index, %b: memref<4xf64>) {
  %a = memref.alloc(%n) : memref<?xf64>
  %c = memref.cast %a : memref<?xf64> to memref<4xf64>
  memref.copy %b, %c : memref<4xf64> to memref<4xf64>
  memref.dealloc %a : memref<?xf64>
  return
}
"""


# Vector accesses of %a, of run-time size, at an index loaded from %p (lines 4 to 6).
VECTORS = """\
func.func @main(%a: memref<?xf32>, %m: memref<?x?xf32>, %p: memref<1xi64>) {
  %c0 = arith.constant 0 : index
  %i = memref.load %p[%c0] : memref<1xi64>
  %ii = arith.index_cast %i : i64 to index
  %v = vector.load %a[%ii] : memref<?xf32>, vector<4xf32>
  %z = arith.constant 0.0 : f32
  %w = vector.transfer_read %m[%c0, %ii], %z {in_bounds = [true]} : memref<?x?xf32>, vector<4xf32>
  return
}
"""


def test_a_vector_access_s_check_names_the_arguments_its_sizes_are() -> None:
    # Before, "out-of-bounds access" alone.
    assert _messages(VECTORS, VectorChecksPass()) == [
        "out-of-bounds access (the size of @main's argument %a, dimension 0)",
        "out-of-bounds access (dimension 0: the size of @main's argument %m, dimension 0; "
        "dimension 1: the size of @main's argument %m, dimension 1)",
    ]
