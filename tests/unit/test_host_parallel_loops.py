"""Host parallel loops around schedules, on several OpenMP threads per rank: such a loop
reaches MPI, so dhir-serial-loops runs it sequentially (MPI is initialised for the main
thread only), and native equals the interpreter bit for bit; loops that reach no MPI stay
on threads. Fixed programs, and random ones (tests/unit/region_programs.py) whose time
loop is an scf.parallel or affine.parallel."""

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, note, reject, settings
from hypothesis import strategies as st
from region_programs import (
    TIME_LOOPS,
    Access,
    Host,
    Loop,
    Program,
    Schedule,
    Stmt,
    Task,
    programs,
)

import dhir
from dhir import DhirError
from dhir.backends.native import openmp_safe

pytestmark = [pytest.mark.mlir, pytest.mark.mpi]
TIMEOUT = 90

# Two tasks per schedule (round robin puts them on two ranks), using the loop's counter:
# a[i, j] = 3 a[i, j] + i, then b[j] = 2 b[j] + a[i, j].
_SCHEDULE = """
    dhir.schedule %a, %b {
      %cpu = dhir.target {kind = "cpu"}
      %t0 = dhir.task %cpu, %a {
        %z = arith.constant 0 : index
        %one = arith.constant 1 : index
        %n = arith.constant 8 : index
        %three = arith.constant 3 : i32
        %x = arith.index_cast %i : index to i32
        scf.for %j = %z to %n step %one {
          %v = memref.load %a[%i, %j] : memref<4x8xi32>
          %w = arith.muli %v, %three : i32
          %y = arith.addi %w, %x : i32
          memref.store %y, %a[%i, %j] : memref<4x8xi32>
        }
      }
      %t1 = dhir.task %cpu, %a, %b {
        %z = arith.constant 0 : index
        %one = arith.constant 1 : index
        %n = arith.constant 8 : index
        %two = arith.constant 2 : i32
        scf.for %j = %z to %n step %one {
          %v = memref.load %a[%i, %j] : memref<4x8xi32>
          %u = memref.load %b[%j] : memref<8xi32>
          %m = arith.muli %u, %two : i32
          %y = arith.addi %m, %v : i32
          memref.store %y, %b[%j] : memref<8xi32>
        }
      }
    }
"""

# An scf.parallel around the schedule, summing b[0] after each iteration (which depends on
# the iterations before it). A loop without MPI stays parallel next to it.
SCF = f"""
func.func @main(%a: memref<4x8xi32>, %b: memref<8xi32>, %out: memref<4xi32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0 : i32
  %r = scf.parallel (%i) = (%c0) to (%c4) step (%c1) init (%zero) -> i32 {{
{_SCHEDULE}
    %v = memref.load %b[%c0] : memref<8xi32>
    scf.reduce(%v : i32) {{
    ^bb0(%l: i32, %q: i32):
      %s = arith.addi %l, %q : i32
      scf.reduce.return %s : i32
    }}
  }}
  memref.store %r, %out[%c0] : memref<4xi32>
  scf.parallel (%k) = (%c1) to (%c4) step (%c1) {{
    %x = arith.index_cast %k : index to i32
    memref.store %x, %out[%k] : memref<4xi32>
  }}
  return
}}
"""

# An affine.parallel of two dimensions whose body calls a function holding the schedule.
AFFINE = f"""
func.func @step(%a: memref<4x8xi32>, %b: memref<8xi32>, %i: index) {{
{_SCHEDULE}
  return
}}

func.func @main(%a: memref<4x8xi32>, %b: memref<8xi32>, %out: memref<4xi32>) {{
  %c0 = arith.constant 0 : index
  %r = affine.parallel (%i, %k) = (0, 0) to (4, 2) reduce ("addi") -> i32 {{
    func.call @step(%a, %b, %i) : (memref<4x8xi32>, memref<8xi32>, index) -> ()
    %v = memref.load %b[%k] : memref<8xi32>
    affine.yield %v : i32
  }}
  memref.store %r, %out[%c0] : memref<4xi32>
  return
}}
"""

PROGRAMS = {"scf": SCF, "affine": AFFINE}


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [
        rng.integers(-9, 9, (4, 8)).astype(np.int32),
        rng.integers(-9, 9, 8).astype(np.int32),
        np.zeros(4, np.int32),
    ]


def _check(text: str, ranks: int, mpi: str = "mpich", inputs: list[object] | None = None) -> None:
    assert openmp_safe(dhir.parse_string(text))  # so the loops would run on threads
    inputs = inputs if inputs is not None else _inputs()
    oracle = dhir.run(text, *inputs, backend="interp")
    native = dhir.run(
        text,
        *inputs,
        ranks=ranks,
        threads=2,
        mpi=mpi,
        placement="round-robin",
        timeout=TIMEOUT,
    )
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_schedules_in_host_parallel_loops_on_threads_equal_the_interpreter(
    program: str, ranks: int
) -> None:
    _check(PROGRAMS[program], ranks)


def test_schedules_in_host_parallel_loops_with_openmpi() -> None:
    _check(SCF, 2, "openmpi")


# In a task: a reduction whose body OpenMP does not know (two ops), and one over index;
# mlir-opt-22's convert-scf-to-openmp stopped on both ("unconverted operation found").
REDUCTIONS = """
func.func @main(%a: memref<8xi32>, %out: memref<1xi32>, %n: memref<1xindex>) {
  dhir.schedule %a, %out, %n {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %out, %n {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %zero = arith.constant 0 : i32
      %r = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> i32 {
        %v = memref.load %a[%i] : memref<8xi32>
        scf.reduce(%v : i32) {
        ^bb0(%l: i32, %q: i32):
          %s = arith.muli %l, %q : i32
          %u = arith.addi %s, %q : i32
          scf.reduce.return %u : i32
        }
      }
      memref.store %r, %out[%c0] : memref<1xi32>
      %k = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%c1) -> index {
        scf.reduce(%i : index) {
        ^bb0(%l: index, %q: index):
          %s = arith.addi %l, %q : index
          scf.reduce.return %s : index
        }
      }
      memref.store %k, %n[%c0] : memref<1xindex>
    }
  }
  return
}
"""


def test_reductions_openmp_does_not_know_run_sequentially() -> None:
    inputs: list[object] = [
        np.arange(1, 9, dtype=np.int32),
        np.zeros(1, np.int32),
        np.zeros(1, np.int64),
    ]
    _check(REDUCTIONS, 1, inputs=inputs)


PARALLEL_TIME_LOOPS = tuple(k for k in TIME_LOOPS if k != "scf.for")

# Host code in the time loop storing b0[0] and b0[1] in every step: two steps write one
# element, which breaks the parallel loop's promise (about a fifth of the random programs
# do, by host code like this).
_FILL = Stmt((Loop(0, 2),), (), Access(0, ((1,),), (0,)), "scf", "fill")
_TASK = Task((Stmt((Loop(0, 1),), (), Access(0, ((1,),), (2,)), "subview", "fill"),))
OVERLAPPING = Program(
    "i32", ((4,),), (2,), 2, (Schedule((_TASK,)), Host(_FILL)), (), time_loop="scf.parallel"
)


def test_a_parallel_time_loop_that_overlaps_is_refused_though_it_runs_in_order() -> None:
    """Such a loop reaches MPI, so natively it runs in order: the refusal says why the
    program is wrong all the same, not that it runs on threads."""
    text = OVERLAPPING.text()
    with pytest.raises(DhirError) as error:
        dhir.run(text, *OVERLAPPING.inputs(0), backend="interp")
    said = str(error.value)
    assert "may run them in any order (dhir runs this one in order, as it reaches MPI" in said
    assert "threads" not in said


@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=True,
)
@example((2, OVERLAPPING, "mpich", 0))
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.tuples(
            st.just(n),
            programs(n, time_loops=PARALLEL_TIME_LOOPS),
            st.sampled_from(("mpich", "openmpi")),
            st.integers(0, 2**16),
        )
    )
)
def test_random_schedules_in_host_parallel_loops_on_threads_equal_the_interpreter(
    case: tuple[int, Program, str, int],
) -> None:
    ranks, program, mpi, seed = case
    text = program.text()
    note(f"on {ranks} ranks with {mpi}, 2 threads each, the program:\n{text}")
    inputs = program.inputs(seed)
    try:
        oracle = dhir.run(text, *inputs, backend="interp")
    except DhirError as error:
        # Iterations proven to write one element break the parallel loop's promise: both
        # backends refuse the program at the time loop (docs/semantics.md), even though
        # natively this loop would run in order. Nothing to compare, so draw another.
        line = 1 + [row.strip() for row in text.splitlines()].index(TIME_LOOPS[program.time_loop])
        refused = f"<string>:{line}:3: error: iterations of this {program.time_loop} overlap"
        assert str(error).startswith(refused), error
        with pytest.raises(DhirError, match=refused):
            dhir.run(text, *inputs, ranks=ranks, mpi=mpi, threads=2, timeout=TIMEOUT)
        reject()
    for got, want in zip(oracle, program.reference(inputs), strict=True):
        assert got.tobytes() == np.asarray(want).tobytes()
    _check(text, ranks, mpi, inputs)
