"""Loops of bounds known at run time only whose index arithmetic the analysis takes as
exact: both backends stop at the loop when its bounds take it past 64 bits
(dhir.analysis.wrap_checks, dhir-wrap-checks), and run as before when they do not."""

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.ir import Operation

import dhir
from dhir import DhirError
from dhir.analysis.lift import Lifter
from dhir.analysis.overlaps import parallel_independence
from dhir.analysis.wrap_checks import WrapCheck, native_division, verdict, wrap_checks
from dhir.dialects import affine, arith, scf
from dhir.ir.walk import find_ops

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# Task 0 (rank 0) writes A[3k + 2]; task 1 (rank 1) copies A[3 * i] into B for i from %lo
# to %hi. From lo = 6148914691236517206, 3 * i wraps to 2, 5, 8: the regions took 3 * i
# as multiples of 3 and rank 1 read A stale, B = [0, 105, 108] natively on 2 ranks with
# exit status 0, where the interpreter gives [102, 105, 108].
RUN_TIME_WRAP = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index) {
  dhir.schedule %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %A attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c5 = arith.constant 5 : index
      scf.for %k = %c0 to %c5 step %c1 {
        %m = arith.muli %k, %c3 : index
        %e = arith.addi %m, %c2 : index
        %v = arith.index_cast %e : index to i64
        %h = arith.constant 100 : i64
        %w = arith.addi %v, %h : i64
        memref.store %w, %A[%e] : memref<16xi64>
      }
    }
    %t1 = dhir.task %cpu, %A, %B attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      scf.for %i = %lo to %hi step %c1 {
        %j = arith.muli %i, %c3 : index
        %x = memref.load %A[%j] : memref<16xi64>
        %d = arith.subi %i, %lo : index
        memref.store %x, %B[%d] : memref<16xi64>
      }
    }
  }
  return
}
"""

WRAPS = (np.zeros(16, np.int64), np.zeros(16, np.int64), 6148914691236517206, 6148914691236517209)
_WHAT = "64-bit index arithmetic in it wraps around"


def _run(backend: str, src: str, *inputs: object, ranks: int = 2) -> list[np.ndarray]:
    module = dhir.parse_string(src, "prog.mlir")
    if backend == "interp":
        return dhir.run(module, *inputs, backend="interp")
    return dhir.run(module, *inputs, backend="native", ranks=ranks)


def test_the_interpreter_stops_at_a_loop_whose_subscript_wraps() -> None:
    with pytest.raises(DhirError) as caught:
        _run("interp", RUN_TIME_WRAP, *WRAPS)
    assert "prog.mlir:22:7: error: 'scf.for' runs where " + _WHAT in str(caught.value)


@needs_llvm
@pytest.mark.mpi
def test_native_code_on_two_ranks_stops_at_the_loop() -> None:
    with pytest.raises(DhirError) as caught:
        _run("native", RUN_TIME_WRAP, *WRAPS)
    assert "the loop at line 22, column 7 runs where " + _WHAT in str(caught.value)


@needs_llvm
@pytest.mark.mpi
def test_ordinary_run_time_bounds_run_as_before() -> None:
    inputs = (np.zeros(16, np.int64), np.zeros(16, np.int64), 0, 5)
    want = _run("interp", RUN_TIME_WRAP, *inputs)
    assert list(want[1][:5]) == [0, 0, 0, 0, 0]
    got = _run("native", RUN_TIME_WRAP, *inputs)
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_array_equal(have, expected)


# c * i + b for i from %lo to %hi, and (c * i + b) floordiv 4 for i in a loop of constant
# bounds inside it: the first checked at the outer loop, the second there too (the inner
# loop's variable has a constant range).
NEAR_THE_TOP = """func.func @main(%o: memref<4xi64>, %lo: index, %hi: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c = arith.constant {c} : index
  %b = arith.constant {b} : index
  scf.for %i = %lo to %hi step %c1 {{
    %m = arith.muli %i, %c : index
    %j = arith.addi %m, %b : index
    %v = arith.index_cast %j : index to i64
    memref.store %v, %o[%c0] : memref<4xi64>
  }}
  return
}}
"""


def _check(c: int, b: int) -> tuple[WrapCheck | None, Lifter]:
    module = dhir.parse_string(NEAR_THE_TOP.format(c=c, b=b), "prog.mlir")
    lifter = Lifter()
    checks = wrap_checks(module, lifter)
    (loop,) = find_ops(module, scf.ForOp)
    assert [check.loop for check in checks] in ([], [loop])
    return (checks[0] if checks else None), lifter


_TOP = 2**63
_NEAR = st.integers(-(2**63), 2**63 - 1) | st.integers(2**62 - 1000, 2**62 + 1000)


@settings(max_examples=60, deadline=None)
@given(
    c=st.sampled_from([1, 2, 3, -3, 7, 2**31, 2**62 - 1, -(2**62)]),
    b=st.integers(-1000, 1000)
    | st.integers(_TOP - 1000, _TOP - 1)
    | st.integers(-_TOP, -_TOP + 1000),
    lo=_NEAR,
    trips=st.integers(1, 5),
)
def test_the_check_holds_exactly_when_every_value_fits(c: int, b: int, lo: int, trips: int) -> None:
    """The rule both backends follow: stop exactly when c * i + b leaves 64 bits for an i
    the loop takes (the product alone may leave them while the sum is back inside)."""
    hi = min(lo + trips, _TOP - 1)
    check, lifter = _check(c, b)
    values = [c * i + b for i in range(lo, hi)] + [c * i for i in range(lo, hi)]
    fits = all(-_TOP <= v < _TOP for v in values)
    if check is None:  # i + 0: the value itself
        assert (c, b) == (1, 0)
    elif hi > lo:
        (variable,) = check.variables
        assert verdict(check, {variable: (lo, hi - 1)}, {}, lifter) == fits


@pytest.mark.parametrize(
    ("c", "b", "lo", "stops"),
    [
        (3, 0, 3074457345618258600, False),  # 3 * lo = 2**63 - 8, the last 2**63 - 2
        (3, 0, 3074457345618258601, True),  # the last is 2**63 + 1
        (3, -9, 3074457345618258601, True),  # 3 * i leaves 64 bits, 3 * i - 9 does not
        (-2, 0, -(2**62) + 1, False),  # -2 * i from 2**63 - 2 down
        (-2, 0, -(2**62), True),  # -2 * lo = 2**63
        (1, 2**63 - 3, 0, False),  # i + b up to 2**63 - 1
        (1, 2**63 - 2, 0, True),
    ],
)
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_both_backends_agree_near_the_top(
    backend: str, c: int, b: int, lo: int, stops: bool
) -> None:
    src = NEAR_THE_TOP.format(c=c, b=b)
    inputs = (np.zeros(4, np.int64), lo, lo + 3)
    if stops:
        with pytest.raises(DhirError, match="runs where " + _WHAT):
            _run(backend, src, *inputs, ranks=1)
    else:
        got = _run(backend, src, *inputs, ranks=1)
        assert got[0][0] == c * (lo + 2) + b


# affine.for of symbol bounds, its subscript inline in the load's map: the check computes
# the loop's bounds (affine.max and affine.min of its maps) before it.
AFFINE = """func.func @main(%a: memref<16xi64>, %o: memref<16xi64>, %lo: index, %hi: index) {
  affine.for %i = %lo to %hi {
    %x = affine.load %a[%i * 3] : memref<16xi64>
    affine.store %x, %o[%i - symbol(%lo)] : memref<16xi64>
  }
  return
}
"""


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
@pytest.mark.parametrize(("lo", "stops"), [(6148914691236517206, True), (1, False)])
def test_an_affine_subscript_is_checked_too(backend: str, lo: int, stops: bool) -> None:
    a = np.arange(16, dtype=np.int64)
    inputs = (a, np.zeros(16, np.int64), lo, lo + 3)
    if stops:
        with pytest.raises(DhirError) as caught:
            _run(backend, AFFINE, *inputs, ranks=1)
        where = "prog.mlir:2:3: error: 'affine.for'" if backend == "interp" else "line 2, column 3"
        assert where in str(caught.value) and _WHAT in str(caught.value)
    else:
        got = _run(backend, AFFINE, *inputs, ranks=1)
        assert list(got[1][:3]) == [3, 6, 9]


# RUN_TIME_WRAP with task 1's loop an affine.parallel of run-time bounds, whose variable
# the regions took as exact too: the interpreter gave B = [102, 105, 108], and native code
# on 2 ranks refused the run before it with a wrong index (the given bounds read 3 * lo
# exactly: "accesses index 18446744073709551618 ... out of bounds").
AFFINE_PARALLEL = RUN_TIME_WRAP.replace(
    "scf.for %i = %lo to %hi step %c1 {", "affine.parallel (%i) = (%lo) to (%hi) {"
)


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_an_affine_parallel_of_run_time_bounds_is_checked(backend: str) -> None:
    with pytest.raises(DhirError) as caught:
        _run(backend, AFFINE_PARALLEL, *WRAPS)
    where = (
        "prog.mlir:22:7: error: 'affine.parallel'" if backend == "interp" else "line 22, column 7"
    )
    assert where in str(caught.value) and _WHAT in str(caught.value)


@needs_llvm
@pytest.mark.mpi
def test_an_affine_parallel_of_ordinary_bounds_runs_as_before() -> None:
    inputs = (np.arange(16, dtype=np.int64), np.zeros(16, np.int64), 1, 4)
    want = _run("interp", AFFINE_PARALLEL, *inputs)
    assert list(want[1][:3]) == [3, 6, 9]
    for have, expected in zip(_run("native", AFFINE_PARALLEL, *inputs), want, strict=True):
        np.testing.assert_array_equal(have, expected)


def test_an_affine_parallel_of_constant_bounds_has_their_range() -> None:
    """As an scf.parallel's: 3 * i of i up to 2**62 leaves 64 bits, so is no multiple of 3
    to the analysis, and needs no check."""
    module = dhir.parse_string(
        """func.func @main(%a: memref<16xi64>) {
  affine.parallel (%i, %j) = (1, 0) to (4611686018427387904, 5) step (1, 2) {
    %x = affine.load %a[%i * 3 + %j] : memref<16xi64>
  }
  return
}
""",
        "prog.mlir",
    )
    (loop,) = find_ops(module, affine.ParallelOp)
    lifter = Lifter()
    i, j = loop.body.block.args
    assert lifter.leaf_range(i) == (1, 2**62 - 1)
    assert lifter.leaf_range(j) == (0, 4)
    assert wrap_checks(module, lifter) == []


# An scf.parallel of constant bounds reading A[3 * n + 3 * i + 1] and writing A[3 * i], n
# an argument: independent iterations to the analysis (reads one past multiples of 3,
# writes multiples of 3), which ran them on threads; from n = 6148914691236517206, 3 * n
# wraps to 2 and iteration i reads A[3 * i + 3], which iteration i + 1 writes.
INVARIANT = """func.func @main(%A: memref<16xi64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %a = arith.muli %i, %c3 : index
    %m = arith.muli %n, %c3 : index
    %s = arith.addi %m, %a : index
    %b = arith.addi %s, %c1 : index
    %x = memref.load %A[%b] : memref<16xi64>
    %one = arith.constant 1 : i64
    %y = arith.addi %x, %one : i64
    memref.store %y, %A[%a] : memref<16xi64>
    scf.reduce
  }
  return
}
"""


def test_an_expression_of_arguments_is_checked_at_the_outermost_loop() -> None:
    module = dhir.parse_string(INVARIANT, "prog.mlir")
    (loop,) = find_ops(module, scf.ParallelOp)
    assert parallel_independence(loop) is None  # proven: the no-wrap assumption at work
    checks = wrap_checks(module)
    assert [check.loop for check in checks] == [loop]
    assert checks[0].variables == ()  # constant bounds: n's value and i's range


@pytest.mark.parametrize(
    ("backend", "ranks"),
    [
        ("interp", 1),
        pytest.param("native", 1, marks=needs_llvm),
        pytest.param("native", 2, marks=[needs_llvm, pytest.mark.mpi]),
    ],
)
def test_both_backends_stop_where_an_argument_wraps_a_subscript(backend: str, ranks: int) -> None:
    inputs = (np.arange(16, dtype=np.int64), 6148914691236517206)
    with pytest.raises(DhirError) as caught:
        _run(backend, INVARIANT, *inputs, ranks=ranks)
    where = "prog.mlir:6:3: error: 'scf.parallel'" if backend == "interp" else "line 6, column 3"
    assert where in str(caught.value) and _WHAT in str(caught.value)


@needs_llvm
def test_an_argument_that_keeps_the_subscripts_in_64_bits_runs() -> None:
    inputs = (np.arange(16, dtype=np.int64), 1)
    want = _run("interp", INVARIANT, *inputs)
    assert list(want[0][:4]) == [5, 1, 2, 8]  # A[3i] = A[3i + 4] + 1, in order
    np.testing.assert_array_equal(_run("native", INVARIANT, *inputs, ranks=1)[0], want[0])


# Outside any loop, no analysis takes 3 * n as exact (the regions leave a value of no loop
# free, the given inputs fold it as 64 bits wrap it): both backends read A[2], unchecked.
NO_LOOP = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %j = arith.muli %n, %c3 : index
  %x = memref.load %A[%j] : memref<16xi64>
  memref.store %x, %B[%c0] : memref<16xi64>
  return
}
"""


@pytest.mark.parametrize(
    ("backend", "ranks"),
    [
        ("interp", 1),
        pytest.param("native", 1, marks=needs_llvm),
        pytest.param("native", 2, marks=[needs_llvm, pytest.mark.mpi]),
    ],
)
def test_an_argument_wrapped_outside_any_loop_reads_as_64_bits_wrap(
    backend: str, ranks: int
) -> None:
    assert wrap_checks(dhir.parse_string(NO_LOOP, "prog.mlir")) == []
    inputs = (np.arange(16, dtype=np.int64) + 100, np.zeros(16, np.int64), 6148914691236517206)
    got = _run(backend, NO_LOOP, *inputs, ranks=ranks)
    assert got[1][0] == 102


# scf.forall's variables are no loop variables to the regions (its body's accesses may
# touch any element) nor to the independence proofs: 3 * i of lo = 6148914691236517206
# wraps, as the interpreter computes it, and rank 1 waits for A.
FORALL = RUN_TIME_WRAP.replace(
    "scf.for %i = %lo to %hi step %c1 {", "scf.forall (%i) = (%lo) to (%hi) step (%c1) {"
)


@needs_llvm
@pytest.mark.mpi
def test_an_scf_forall_of_run_time_bounds_needs_no_check() -> None:
    assert wrap_checks(dhir.parse_string(FORALL, "prog.mlir")) == []
    want = _run("interp", FORALL, *WRAPS)
    assert list(want[1][:3]) == [102, 105, 108]
    for have, expected in zip(_run("native", FORALL, *WRAPS), want, strict=True):
        np.testing.assert_array_equal(have, expected)


# INVARIANT's subscript of a value loaded in a loop of run-time bounds and its variable:
# made in the scf.for, so not checked at its entry, but a number at the scf.parallel's.
NESTED = """func.func @main(%A: memref<16xi64>, %P: memref<1xindex>, %lo: index, %hi: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %lo to %hi step %c1 {
    %v = memref.load %P[%c0] : memref<1xindex>
    %w = arith.addi %v, %i : index
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      %a = arith.muli %j, %c3 : index
      %m = arith.muli %w, %c3 : index
      %s = arith.addi %m, %a : index
      %b = arith.addi %s, %c1 : index
      %x = memref.load %A[%b] : memref<16xi64>
      %one = arith.constant 1 : i64
      %y = arith.addi %x, %one : i64
      memref.store %y, %A[%a] : memref<16xi64>
      scf.reduce
    }
  }
  return
}
"""


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_value_made_in_a_loop_is_checked_at_the_loop_inside(backend: str) -> None:
    module = dhir.parse_string(NESTED, "prog.mlir")
    (inner,) = find_ops(module, scf.ParallelOp)
    assert parallel_independence(inner) is None
    assert [check.loop for check in wrap_checks(module)] == [inner]
    inputs = (np.arange(16, dtype=np.int64), np.array([6148914691236517206]), 0, 1)
    with pytest.raises(DhirError) as caught:
        _run(backend, NESTED, *inputs, ranks=1)
    where = "prog.mlir:9:5: error: 'scf.parallel'" if backend == "interp" else "line 9, column 5"
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, NESTED, np.arange(16, dtype=np.int64), np.array([1]), 0, 1, ranks=1)
    assert list(got[0][:4]) == [5, 1, 2, 8]


# A called function's subscript of its argument, the caller's loop variable of run-time
# bounds: the accesses that surely run took 3 * k as exact, and native code refused the
# run (given lo = 6148914691236517206) with "accesses index 18446744073709551618 ... out
# of bounds", where the interpreter reads elements 2, 5, 8.
CALLED = """func.func @f(%A: memref<16xi64>, %B: memref<16xi64>, %k: index, %d: index) {
  %c3 = arith.constant 3 : index
  %j = arith.muli %k, %c3 : index
  %x = memref.load %A[%j] : memref<16xi64>
  memref.store %x, %B[%d] : memref<16xi64>
  return
}
func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index) {
  %c1 = arith.constant 1 : index
  scf.for %i = %lo to %hi step %c1 {
    %d = arith.subi %i, %lo : index
    func.call @f(%A, %B, %i, %d) : (memref<16xi64>, memref<16xi64>, index, index) -> ()
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_a_called_functions_subscript_that_wraps_is_no_index_past_64_bits(ranks: int) -> None:
    lo = 6148914691236517206
    inputs = (np.arange(16, dtype=np.int64), np.zeros(16, np.int64), lo, lo + 3)
    want = _run("interp", CALLED, *inputs)
    assert list(want[1][:3]) == [2, 5, 8]
    for have, expected in zip(_run("native", CALLED, *inputs, ranks=ranks), want, strict=True):
        np.testing.assert_array_equal(have, expected)


# INVARIANT with 3 * n made before the loop, outside the task CodeDrop makes of it: the
# outlined task took the product as an argument, a number to dhir-wrap-checks, so native
# code ran the iterations on threads from n = 6148914691236517206 (exit 0) where the
# interpreter, which sees 3 * n, stops.
PRODUCT_OUTSIDE = """func.func @main(%A: memref<16xi64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %m = arith.muli %n, %c3 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %a = arith.muli %i, %c3 : index
    %s = arith.addi %m, %a : index
    %b = arith.addi %s, %c1 : index
    %x = memref.load %A[%b] : memref<16xi64>
    %one = arith.constant 1 : i64
    %y = arith.addi %x, %one : i64
    memref.store %y, %A[%a] : memref<16xi64>
    scf.reduce
  }
  return
}
"""


# The product inside an affine.min, which xDSL does not mark Pure: passed whole to the
# part, native code ran the loop from n = 6148914691236517206 (A = 4, 1, 2, 7, exit 0)
# where the interpreter stops.
MIN_OUTSIDE = PRODUCT_OUTSIDE.replace(
    "%m = arith.muli %n, %c3 : index",
    "%m = affine.min affine_map<()[s0] -> (s0 * 3, 99)>()[%n]",
)


@pytest.mark.parametrize("src", [PRODUCT_OUTSIDE, MIN_OUTSIDE], ids=["muli", "affine.min"])
@pytest.mark.parametrize(
    ("backend", "ranks"),
    [
        ("interp", 1),
        pytest.param("native", 1, marks=needs_llvm),
        pytest.param("native", 2, marks=[needs_llvm, pytest.mark.mpi]),
    ],
)
def test_a_product_made_outside_the_task_is_checked_in_it(
    backend: str, ranks: int, src: str
) -> None:
    with pytest.raises(DhirError) as caught:
        inputs = (np.arange(16, dtype=np.int64), 6148914691236517206)
        _run(backend, src, *inputs, ranks=ranks)
    where = "prog.mlir:7:3: error: 'scf.parallel'" if backend == "interp" else "line 7, column 3"
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, src, np.arange(16, dtype=np.int64), 1, ranks=ranks)
    assert list(got[0][:4]) == [5, 1, 2, 8]


# INVARIANT with n the size of %Z's first dimension (memref.dim), which the independence
# proof names as a whole, taking 3 * n + 3 * i + 1 as exact: measured before the loop or
# in it, no check saw 3 * n (before the loop, a value the check took as a number; in it,
# one it did not lift), and from a size of 6148914691236517206 (an array of no element,
# shape (6148914691236517206, 0)) the iterations ran on threads, exit 0.
SIZE_BEFORE = """func.func @main(%A: memref<16xi64>, %Z: memref<?x0xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %n = memref.dim %Z, %c0 : memref<?x0xi8>
  %m = arith.muli %n, %c3 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %a = arith.muli %i, %c3 : index
    %s = arith.addi %m, %a : index
    %b = arith.addi %s, %c1 : index
    %x = memref.load %A[%b] : memref<16xi64>
    %one = arith.constant 1 : i64
    %y = arith.addi %x, %one : i64
    memref.store %y, %A[%a] : memref<16xi64>
    scf.reduce
  }
  return
}
"""
SIZE_INSIDE = SIZE_BEFORE.replace(
    "  %n = memref.dim %Z, %c0 : memref<?x0xi8>\n  %m = arith.muli %n, %c3 : index\n", ""
).replace(
    "    %a = arith.muli %i, %c3 : index\n",
    "    %a = arith.muli %i, %c3 : index\n"
    "    %n = memref.dim %Z, %c0 : memref<?x0xi8>\n"
    "    %m = arith.muli %n, %c3 : index\n",
)


@pytest.mark.parametrize(
    ("src", "line"), [(SIZE_BEFORE, "prog.mlir:8:3"), (SIZE_INSIDE, "prog.mlir:6:3")]
)
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_size_times_a_constant_is_checked(src: str, line: str, backend: str) -> None:
    module = dhir.parse_string(src, "prog.mlir")
    (loop,) = find_ops(module, scf.ParallelOp)
    assert parallel_independence(loop) is None  # proven: 3 * n taken as exact
    huge = np.empty((6148914691236517206, 0), np.int8)
    with pytest.raises(DhirError) as caught:
        _run(backend, src, np.arange(16, dtype=np.int64), huge, ranks=1)
    lines, column = line.split(":")[1:]
    where = f"{line}: error" if backend == "interp" else f"line {lines}, column {column}"
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, src, np.arange(16, dtype=np.int64), np.empty((1, 0), np.int8), ranks=1)
    assert list(got[0][:4]) == [5, 1, 2, 8]


# RUN_TIME_WRAP's copy under an scf.if on %go: checked at the loop's entry, it stopped
# the run from lo = 6148914691236517206 where the branch never runs (a correct program
# refused); now checked each time the branch runs, at i's value there.
UNDER_IF = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index,
                %go: i1) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %lo to %hi step %c1 {
    %d = arith.subi %i, %lo : index
    scf.if %go {
      %j = arith.muli %i, %c3 : index
      %x = memref.load %A[%j] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
    }
  }
  return
}
"""


UNDER_AFFINE_IF = UNDER_IF.replace("%go: i1", "%go: index").replace(
    "scf.if %go {", "affine.if affine_set<()[s0] : (s0 - 1 >= 0)>()[%go] {"
)


@pytest.mark.parametrize(
    ("src", "off", "on", "name"),
    [(UNDER_IF, False, True, "scf.if"), (UNDER_AFFINE_IF, 0, 1, "affine.if")],
)
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_arithmetic_under_a_branch_is_checked_where_the_branch_runs(
    src: str, off: object, on: object, name: str, backend: str
) -> None:
    (check,) = wrap_checks(dhir.parse_string(src, "prog.mlir"))  # i - lo and 3 * i
    assert check.loop.name == name and check.region is check.loop.regions[0]
    lo, a = 6148914691236517206, np.arange(16, dtype=np.int64) + 100
    got = _run(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, off, ranks=1)
    assert list(got[1][:4]) == [0, 0, 0, 0]
    with pytest.raises(DhirError) as caught:
        _run(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, on, ranks=1)
    where = f"prog.mlir:7:5: error: '{name}'" if backend == "interp" else "line 7, column 5"
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, src, a, np.zeros(16, np.int64), 0, 3, on, ranks=1)
    assert list(got[1][:4]) == [100, 103, 106, 0]


# UNDER_IF with 3 * i + 1 made before the branch and used only in it: checked at the
# loop's entry, both backends stopped the run from lo = 6148914691236517206 with %go
# false, where no access of it runs (a correct program refused).
BEFORE_IF = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index,
                %go: i1) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %lo to %hi step %c1 {
    %d = arith.subi %i, %lo : index
    %m = arith.muli %i, %c3 : index
    %j = arith.addi %m, %c1 : index
    scf.if %go {
      %x = memref.load %A[%j] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
    }
  }
  return
}
"""
BEFORE_AFFINE_IF = BEFORE_IF.replace("%go: i1", "%go: index").replace(
    "scf.if %go {", "affine.if affine_set<()[s0] : (s0 - 1 >= 0)>()[%go] {"
)
# The same under a case of an scf.index_switch on %go, made in the case and before it.
IN_SWITCH = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index,
                %go: index) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %lo to %hi step %c1 {
    %d = arith.subi %i, %lo : index
    %m = arith.muli %i, %c3 : index
    scf.index_switch %go
    case 1 {
      %j = arith.addi %m, %c1 : index
      %x = memref.load %A[%j] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
      scf.yield
    }
    default {
      scf.yield
    }
  }
  return
}
"""


@pytest.mark.parametrize(
    ("src", "off", "on", "name"),
    [
        (BEFORE_IF, False, True, "scf.if"),
        (BEFORE_AFFINE_IF, 0, 1, "affine.if"),
        (IN_SWITCH, 0, 1, "scf.index_switch"),
    ],
)
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_arithmetic_only_a_branch_uses_is_checked_where_the_branch_runs(
    src: str, off: object, on: object, name: str, backend: str
) -> None:
    (check,) = wrap_checks(dhir.parse_string(src, "prog.mlir"))
    taken = check.loop.regions[1 if name == "scf.index_switch" else 0]  # its default first
    assert check.loop.name == name and check.region is taken
    lo, a = 6148914691236517206, np.arange(16, dtype=np.int64) + 100
    got = _run(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, off, ranks=1)
    assert list(got[1][:4]) == [0, 0, 0, 0]
    with pytest.raises(DhirError) as caught:
        _run(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, on, ranks=1)
    where = f"prog.mlir:9:5: error: '{name}'" if backend == "interp" else "line 9, column 5"
    if name == "scf.index_switch":
        where = where.replace("9:5", "8:5").replace("line 9", "line 8")
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, src, a, np.zeros(16, np.int64), 0, 3, on, ranks=1)
    assert list(got[1][:4]) == [101, 104, 107, 0]


# BEFORE_IF where 3 * i + 1 also reaches what runs outside the branch: an access after
# it, or the branch's result (a load of which runs whatever %go is). Checked at the
# loop's entry still: from lo = 6148914691236517206 both backends stop there.
USED_AFTER = BEFORE_IF.replace(
    "    }\n  }\n  return",
    "    }\n    %y = memref.load %A[%j] : memref<16xi64>\n"
    "    memref.store %y, %B[%c1] : memref<16xi64>\n  }\n  return",
)
YIELDED = BEFORE_IF.replace(
    """    scf.if %go {
      %x = memref.load %A[%j] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
    }""",
    """    %k = scf.if %go -> index {
      %e = arith.addi %j, %c1 : index
      scf.yield %e : index
    } else {
      scf.yield %c1 : index
    }
    %x = memref.load %A[%k] : memref<16xi64>
    memref.store %x, %B[%d] : memref<16xi64>""",
)


# 3 * i used in two cases of an scf.index_switch: no one branch holds its uses, so it is
# checked at the loop's entry. Native code, which makes the switch a chain of scf.ifs
# (if go == 1 {} else { if go == 2 {...} else {...} }), checked it at the start of the
# outer else, and from lo = 6148914691236517206 with go = 1 ran (exit 0) where the
# interpreter stopped at the loop.
TWO_CASES = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index,
                %go: index) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %lo to %hi step %c1 {
    %d = arith.subi %i, %lo : index
    %m = arith.muli %i, %c3 : index
    scf.index_switch %go
    case 1 {
      scf.yield
    }
    case 2 {
      %x = memref.load %A[%m] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
      scf.yield
    }
    default {
      %x = memref.load %A[%m] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
      scf.yield
    }
  }
  return
}
"""


@pytest.mark.parametrize(
    ("src", "go"),
    [(USED_AFTER, False), (YIELDED, False), (TWO_CASES, 1)],
    ids=["used after", "yielded", "two cases"],
)
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_arithmetic_no_one_branch_uses_is_checked_at_the_loop(
    src: str, go: object, backend: str
) -> None:
    module = dhir.parse_string(src, "prog.mlir")
    (loop,) = find_ops(module, scf.ForOp)
    assert [(c.loop, c.region) for c in wrap_checks(module)][0] == (loop, None)
    lo, a = 6148914691236517206, np.arange(16, dtype=np.int64) + 100
    with pytest.raises(DhirError) as caught:
        _run(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, go, ranks=1)
    where = "prog.mlir:5:3: error: 'scf.for'" if backend == "interp" else "loop at line 5, column 3"
    assert where in str(caught.value) and _WHAT in str(caught.value)


# 3 * i in the body of a counted scf.while (k from 0 to %n) in the loop: CodeDrop makes
# the while loop an scf.for before native code is checked, and an scf.for's body is
# checked at the entry of the loop around, whether it runs or not. So a while loop's
# body is too, in both backends: with n = 0 (no iteration of it) both stop at the loop.
IN_WHILE = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index,
                %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %lo to %hi step %c1 {
    %d = arith.subi %i, %lo : index
    %r = scf.while (%k = %c0) : (index) -> index {
      %more = arith.cmpi slt, %k, %n : index
      scf.condition(%more) %k : index
    } do {
    ^bb0(%k2: index):
      %j = arith.muli %i, %c3 : index
      %x = memref.load %A[%j] : memref<16xi64>
      memref.store %x, %B[%d] : memref<16xi64>
      %next = arith.addi %k2, %c1 : index
      scf.yield %next : index
    }
  }
  return
}
"""


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_while_loops_body_is_checked_as_a_for_loops_is(backend: str) -> None:
    module = dhir.parse_string(IN_WHILE, "prog.mlir")
    (loop,) = find_ops(module, scf.ForOp)
    assert [(c.loop, c.region) for c in wrap_checks(module)] == [(loop, None)]
    lo, a = 6148914691236517206, np.arange(16, dtype=np.int64) + 100
    with pytest.raises(DhirError) as caught:
        _run(backend, IN_WHILE, a, np.zeros(16, np.int64), lo, lo + 3, 0, ranks=1)
    where = "prog.mlir:6:3: error: 'scf.for'" if backend == "interp" else "loop at line 6, column 3"
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, IN_WHILE, a, np.zeros(16, np.int64), 0, 3, 1, ranks=1)
    assert list(got[1][:4]) == [100, 103, 106, 0]


# 3 * n + i in a task's loop of constant bounds, the task in a host loop: the interpreter
# checked it at the host loop's entry (prog.mlir:4:3), native code, which runs the task
# as a function of its own, at the task's loop ("line 12, column 9"). Both check it at
# the task's loop now.
TASK_IN_A_LOOP = """func.func @main(%A: memref<16xi64>, %n: index, %T: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %T step %c1 {
    dhir.schedule %A {
      %cpu = dhir.target {kind = "cpu"}
      %t0 = dhir.task %cpu, %A {
        %c0b = arith.constant 0 : index
        %c1b = arith.constant 1 : index
        %c3 = arith.constant 3 : index
        %c4 = arith.constant 4 : index
        scf.for %i = %c0b to %c4 step %c1b {
          %m = arith.muli %n, %c3 : index
          %s = arith.addi %m, %i : index
          %x = memref.load %A[%s] : memref<16xi64>
          %one = arith.constant 1 : i64
          %y = arith.addi %x, %one : i64
          memref.store %y, %A[%i] : memref<16xi64>
        }
      }
    }
  }
  return
}
"""


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_tasks_arithmetic_is_checked_in_the_task(backend: str) -> None:
    with pytest.raises(DhirError) as caught:
        _run(
            backend, TASK_IN_A_LOOP, np.arange(16, dtype=np.int64), 6148914691236517206, 2, ranks=1
        )
    where = "prog.mlir:12:9: error: 'scf.for'" if backend == "interp" else "line 12, column 9"
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run(backend, TASK_IN_A_LOOP, np.arange(16, dtype=np.int64), 1, 2, ranks=1)
    assert list(got[0][:6]) == [8, 5, 6, 7, 4, 5]


# B[k - lo] = A[3 * k] in a counted scf.while (k from lo to hi, step 1) outside any loop.
# Native code makes it an scf.for (CodeDrop) and stopped at it from lo =
# 6148914691236517206, where 3 * k wraps to 2, 5, 8; the interpreter, which took only
# loop variables for checked ones, ran it: B = [102, 105, 108], exit 0.
COUNTED = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.while (%k = %lo) : (index) -> index {
    %more = arith.cmpi slt, %k, %hi : index
    scf.condition(%more) %k : index
  } do {
  ^bb0(%k2: index):
    %j = arith.muli %k2, %c3 : index
    %x = memref.load %A[%j] : memref<16xi64>
    %d = arith.subi %k2, %lo : index
    memref.store %x, %B[%d] : memref<16xi64>
    %next = arith.addi %k2, %c1 : index
    scf.yield %next : index
  }
  return
}
"""
# The same while in a loop of constant bounds, and in a task (which
# dhir-optimize-bodies, not CodeDrop, makes an scf.for natively).
COUNTED_IN_A_LOOP = COUNTED.replace(
    "  %r = scf.while",
    "  %c0 = arith.constant 0 : index\n  %c2 = arith.constant 2 : index\n"
    "  scf.for %t = %c0 to %c2 step %c1 {\n  %r = scf.while",
).replace("    scf.yield %next : index\n  }\n", "    scf.yield %next : index\n  }\n  }\n")
COUNTED_IN_A_TASK = COUNTED.replace(
    "  %c1 = arith.constant 1 : index\n",
    '  dhir.schedule %A, %B {\n  %cpu = dhir.target {kind = "cpu"}\n'
    "  %t0 = dhir.task %cpu, %A, %B {\n  %c1 = arith.constant 1 : index\n",
).replace("  }\n  return\n", "  }\n  }\n  }\n  return\n")
# (source, where the interpreter stops, where native code does)
_COUNTED_CASES = {
    "outside-loops": (COUNTED, "prog.mlir:4:8: error: 'scf.while'", "line 4, column 8"),
    "in-a-loop": (COUNTED_IN_A_LOOP, "prog.mlir:7:8: error: 'scf.while'", "line 7, column 8"),
    "in-a-task": (COUNTED_IN_A_TASK, "prog.mlir:7:8: error: 'scf.while'", "line 7, column 8"),
}


def _run_as(backend: str, src: str, *inputs: object, codedrop: bool = True) -> list[np.ndarray]:
    module = dhir.parse_string(src, "prog.mlir")
    if backend == "interp":
        return dhir.run(module, *inputs, backend="interp")
    return dhir.run(module, *inputs, backend="native", ranks=1, codedrop=codedrop)


def test_a_counted_whiles_counter_is_a_loop_variable() -> None:
    module = dhir.parse_string(COUNTED, "prog.mlir")
    (loop,) = find_ops(module, scf.WhileOp)
    (check,) = wrap_checks(module)
    assert (check.loop, check.variables, check.region) == (
        loop,
        (loop.after_region.block.args[0],),
        None,
    )


@pytest.mark.parametrize("case", list(_COUNTED_CASES))
@pytest.mark.parametrize(
    ("backend", "codedrop"),
    [
        ("interp", True),
        pytest.param("native", True, marks=needs_llvm),
        pytest.param("native", False, marks=needs_llvm),  # the while loop as written
    ],
)
def test_both_backends_stop_at_a_counted_while_that_wraps(
    case: str, backend: str, codedrop: bool
) -> None:
    src, interp_at, native_at = _COUNTED_CASES[case]
    a = np.arange(16, dtype=np.int64) + 100
    lo = 6148914691236517206
    with pytest.raises(DhirError) as caught:
        _run_as(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, codedrop=codedrop)
    where = interp_at if backend == "interp" else native_at
    assert where in str(caught.value) and _WHAT in str(caught.value)
    got = _run_as(backend, src, a, np.zeros(16, np.int64), 1, 4, codedrop=codedrop)
    assert list(got[1][:4]) == [103, 106, 109, 0]


# Whiles that count as no scf.for (a step given at run time; the body in the condition's
# region, a do-while) have no loop variable: outside any loop neither backend checks them
# (no analysis takes 3 * k as exact there), and both give the wrapped elements 2, 5, 8.
UNCOUNTED = COUNTED.replace("%hi: index)", "%hi: index, %s: index)").replace(
    "arith.addi %k2, %c1", "arith.addi %k2, %s"
)
DO_WHILE = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>, %lo: index, %hi: index,
                %s: index) {
  %c3 = arith.constant 3 : index
  %r = scf.while (%k = %lo) : (index) -> index {
    %j = arith.muli %k, %c3 : index
    %x = memref.load %A[%j] : memref<16xi64>
    %d = arith.subi %k, %lo : index
    memref.store %x, %B[%d] : memref<16xi64>
    %next = arith.addi %k, %s : index
    %more = arith.cmpi slt, %next, %hi : index
    scf.condition(%more) %next : index
  } do {
  ^bb0(%k2: index):
    scf.yield %k2 : index
  }
  return
}
"""


@pytest.mark.parametrize("src", [UNCOUNTED, DO_WHILE], ids=["run-time-step", "do-while"])
@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_whiles_that_count_as_no_for_loop_run_alike(src: str, backend: str) -> None:
    assert wrap_checks(dhir.parse_string(src, "prog.mlir")) == []
    a = np.arange(16, dtype=np.int64) + 100
    lo = 6148914691236517206
    got = _run_as(backend, src, a, np.zeros(16, np.int64), lo, lo + 3, 1)
    assert list(got[1][:4]) == [102, 105, 108, 0]


# IN_WHILE's while loop counting to %n by `ne`: no scf.for, yet its body is checked at
# the entry of the loop around, as a counted one's is.
UNCOUNTED_IN_WHILE = IN_WHILE.replace("arith.cmpi slt, %k, %n", "arith.cmpi ne, %k, %n")


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_an_uncounted_whiles_body_is_checked_at_the_loop_around(backend: str) -> None:
    lo, a = 6148914691236517206, np.arange(16, dtype=np.int64) + 100
    with pytest.raises(DhirError) as caught:
        _run_as(backend, UNCOUNTED_IN_WHILE, a, np.zeros(16, np.int64), lo, lo + 3, 0)
    where = "prog.mlir:6:3: error: 'scf.for'" if backend == "interp" else "loop at line 6, column 3"
    assert where in str(caught.value) and _WHAT in str(caught.value)


# A counted scf.while of constant bounds (k from 1 to 4) reading A[k + (2^63 - 1)]: the
# scf.for native code makes of it has k's range, so k + (2^63 - 1) is past 64 bits, no
# exact expression, and nothing checks it at the loop: the access's own check stops it.
# The interpreter took the while's counter for one of no range and stopped at the while
# ('scf.while' runs where 64-bit index arithmetic ... wraps), native code at the load.
CONSTANT_COUNTED = """func.func @main(%A: memref<16xi64>, %B: memref<16xi64>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %big = arith.constant 9223372036854775807 : index
  %r = scf.while (%k = %c1) : (index) -> index {
    %more = arith.cmpi slt, %k, %c4 : index
    scf.condition(%more) %k : index
  } do {
  ^bb0(%k2: index):
    %j = arith.addi %k2, %big : index
    %x = memref.load %A[%j] : memref<16xi64>
    memref.store %x, %B[%k2] : memref<16xi64>
    %next = arith.addi %k2, %c1 : index
    scf.yield %next : index
  }
  return
}
"""


def test_a_counted_whiles_counter_has_its_for_loops_range() -> None:
    module = dhir.parse_string(CONSTANT_COUNTED, "prog.mlir")
    (loop,) = find_ops(module, scf.WhileOp)
    lifter = Lifter()
    assert lifter.leaf_range(loop.after_region.block.args[0]) == (1, 3)
    assert lifter.leaf_range(loop.before_region.block.args[0]) is None  # it reaches 4
    assert wrap_checks(module, lifter) == []


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_counted_while_of_constant_bounds_stops_at_the_access(backend: str) -> None:
    a = np.arange(16, dtype=np.int64) + 100
    with pytest.raises(DhirError) as caught:
        _run_as(backend, CONSTANT_COUNTED, a, np.zeros(16, np.int64))
    assert "prog.mlir:11:10: error: " in str(caught.value)
    assert "index -9223372036854775808 of dimension 0" in str(caught.value)


# dhir-optimize-bodies' column blocks: a parallel loop up to (n max 0) divui 64 * 64, its
# lanes at j + 48. Of n = 200 the end is the number 192, as if written so: j ranges over
# 0, 64, 128 and nothing is checked; of an argument %n it is checked as before.
BLOCK_END = """func.func @main(%o: memref<256xi64>, %n: index) {{
  %c0 = arith.constant 0 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  %c200 = arith.constant 200 : index
  %m = arith.maxsi {end}, %c0 : index
  %d = arith.divui %m, %c64 : index
  %e = arith.muli %d, %c64 : index
  scf.parallel (%j) = (%c0) to (%e) step (%c64) {{
    %k = arith.addi %j, %c48 : index
    %v = arith.index_cast %k : index to i64
    memref.store %v, %o[%k] : memref<256xi64>
    scf.reduce
  }}
  return
}}
"""


def test_a_loop_up_to_a_division_of_numbers_has_that_range() -> None:
    module = dhir.parse_string(BLOCK_END.format(end="%c200"), "prog.mlir")
    assert wrap_checks(module) == []
    assert len(wrap_checks(module, Lifter())) == 1  # a lifter that reads no division


def test_a_loop_up_to_a_division_of_an_argument_is_checked() -> None:
    module = dhir.parse_string(BLOCK_END.format(end="%n"), "prog.mlir")
    (loop,) = find_ops(module, scf.ParallelOp)
    assert [check.loop for check in wrap_checks(module)] == [loop]


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_loop_up_to_a_division_of_numbers_runs(backend: str) -> None:
    out = _run(backend, BLOCK_END.format(end="%c200"), np.zeros(256, np.int64), 0, ranks=1)[0]
    want = np.zeros(256, np.int64)
    want[[48, 112, 176]] = [48, 112, 176]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(
    ("kind", "left", "right", "want"),
    [
        (arith.DivUIOp, -1, 2, 2**63 - 1),  # the bits of -1 read unsigned
        (arith.RemUIOp, -1, 10, 5),  # 2**64 - 1 = 18446744073709551615
        (arith.CeilDivUIOp, 5, 2, 3),
        (arith.DivUIOp, 5, -1, 0),  # divided by 2**64 - 1
        (arith.DivSIOp, -7, 2, -3),
        (arith.RemSIOp, -7, 2, -1),
        (arith.FloorDivSIOp, -7, 2, -4),
        (arith.CeilDivSIOp, -7, 2, -3),
        (arith.CeilDivSIOp, 7, 2, 4),
        (arith.DivSIOp, -(2**63), -1, None),  # overflows: no defined result
        (arith.FloorDivSIOp, 1, 0, None),
        (arith.DivUIOp, 1, 0, None),
    ],
)
def test_a_division_of_numbers_is_what_native_code_computes(
    kind: type[Operation], left: int, right: int, want: int | None
) -> None:
    assert native_division(kind, left, right) == want
