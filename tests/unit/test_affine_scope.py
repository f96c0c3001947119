"""Affine symbols defined at the top of a task's body (`%n = affine.load %a[0]`, then
`affine.for %i = 0 to %n`, `affine.load %b[symbol(%n)]`, ...): valid there, since a task
counts as an affine scope, but not once dhir-lower-to-mpi puts the body under its rank
guard on two ranks, which mlir-opt-22 refused (dhir.transforms.affine_scope). Native
equals the interpreter bit for bit on 1 and 2 ranks, with and without OpenMP threads, in
a schedule, in a time loop and after CodeDrop."""

import numpy as np
import pytest
from xdsl.dialects.builtin import UnitAttr
from xdsl.passes import PassPipeline

import dhir
from dhir.api import run_pipeline
from dhir.dialects import affine, scf
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass
from dhir.transforms.serial_loops import IN_ORDER

TIMEOUT = 90

# Every affine op whose dimensions or symbols a guard leaves invalid: loop bounds (one
# result, max/min groups, iter_args), conditions (with results and an else), accesses
# (scalar and vector), parallel loops (with reductions, two dimensions); a symbol that
# stays valid (a delinearize_index of a constant), and a nest that stays valid (constant
# bounds, loop counters).
SCHEDULE = """
func.func @main(%a: memref<4xindex>, %b: memref<16xf64>, %c: memref<16xf64>,
                %d: memref<4xf64>, %e: memref<16xi32>) {
  dhir.schedule %a, %b, %c, %d, %e {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %b, %c {
      %n = affine.load %a[0] : memref<4xindex>
      %m = affine.load %a[1] : memref<4xindex>
      affine.for %i = 0 to %n {
        %x = affine.load %b[%i + symbol(%m)] : memref<16xf64>
        affine.store %x, %c[%i] : memref<16xf64>
      }
      affine.for %i = max affine_map<()[s0] -> (0, s0 - 2)>()[%m]
          to min affine_map<()[s0] -> (16, s0 + 4)>()[%n] step 2 {
        %x = affine.load %c[%i] : memref<16xf64>
        %y = arith.addf %x, %x : f64
        affine.store %y, %c[%i] : memref<16xf64>
      }
      affine.for %i = 0 to 4 {
        affine.if affine_set<(d0)[s0] : (d0 - s0 + 2 >= 0, -d0 + 3 >= 0)>(%i)[%m] {
          %x = affine.load %c[%i + 8] : memref<16xf64>
          %one = arith.constant 1.0 : f64
          %y = arith.addf %x, %one : f64
          affine.store %y, %c[%i + 8] : memref<16xf64>
        }
      }
      %v = affine.vector_load %b[symbol(%m) + 4] : memref<16xf64>, vector<4xf64>
      affine.vector_store %v, %c[symbol(%n) + 6] : memref<16xf64>, vector<4xf64>
    }
    %t1 = dhir.task %cpu, %a, %c, %d, %e {
      %n = affine.load %a[0] : memref<4xindex>
      %m = affine.load %a[1] : memref<4xindex>
      %k = arith.addi %n, %m : index
      %z = arith.constant 0.0 : f64
      %s = affine.for %i = 0 to %n iter_args(%acc = %z) -> (f64) {
        %x = affine.load %c[%i] : memref<16xf64>
        %r = arith.addf %acc, %x : f64
        affine.yield %r : f64
      }
      affine.store %s, %d[0] : memref<4xf64>
      %p = affine.parallel (%i) = (0) to (%k) reduce ("addf") -> (f64) {
        %x = affine.load %c[%i] : memref<16xf64>
        affine.yield %x : f64
      }
      affine.store %p, %d[1] : memref<4xf64>
      %q = affine.parallel (%i) = (max(0, symbol(%m) - 1)) to (min(16, symbol(%k)))
          reduce ("maximumf") -> (f64) {
        %x = affine.load %c[%i] : memref<16xf64>
        affine.yield %x : f64
      }
      affine.store %q, %d[2] : memref<4xf64>
      %w = affine.if affine_set<()[s0] : (s0 - 4 >= 0)>()[%n] -> f64 {
        affine.yield %p : f64
      } else {
        affine.yield %q : f64
      }
      affine.store %w, %d[3] : memref<4xf64>
      affine.parallel (%i, %j) = (0, 0) to (symbol(%m), 4) {
        %ij = affine.apply affine_map<(d0, d1) -> (d0 * 4 + d1)>(%i, %j)
        %v = arith.index_cast %ij : index to i32
        affine.store %v, %e[%i * 4 + %j] : memref<16xi32>
      }
      %c3 = arith.constant 3 : index
      %dl:2 = affine.delinearize_index %c3 into (2, 2) : index, index
      %last = affine.apply affine_map<()[s0] -> (s0 + 14)>()[%dl#1]
      %nine = arith.constant 9 : i32
      memref.store %nine, %e[%last] : memref<16xi32>
      affine.for %i = 0 to 2 {
        affine.for %j = 0 to 2 {
          %x = affine.load %e[%i * 2 + %j] : memref<16xi32>
          %y = arith.addi %x, %x : i32
          affine.store %y, %e[%i * 2 + %j] : memref<16xi32>
        }
      }
    }
  }
  return
}
"""

# A schedule in a time loop whose tasks bound their loops by a loaded value and index
# by the step (a value from outside the task, which the part function receives).
TIME_LOOP = """
func.func @main(%a: memref<4xindex>, %u: memref<16xf64>, %v: memref<16xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %t = %c0 to %c3 step %c1 {
    dhir.schedule %a, %u, %v {
      %cpu = dhir.target {kind = "cpu"}
      %s0 = dhir.task %cpu, %a, %u, %v {
        %n = affine.load %a[0] : memref<4xindex>
        %half = arith.constant 0.5 : f64
        affine.for %i = 1 to %n {
          %l = affine.load %u[%i - 1] : memref<16xf64>
          %r = affine.load %u[%i + 1] : memref<16xf64>
          %s = arith.addf %l, %r : f64
          %h = arith.mulf %s, %half : f64
          affine.store %h, %v[%i] : memref<16xf64>
        }
      }
      %s1 = dhir.task %cpu, %a, %v, %u {
        %n = affine.load %a[0] : memref<4xindex>
        affine.for %i = 1 to %n {
          %x = affine.load %v[%i] : memref<16xf64>
          %y = affine.load %u[symbol(%t) + 12] : memref<16xf64>
          %z = arith.addf %x, %y : f64
          affine.store %z, %u[%i] : memref<16xf64>
        }
      }
    }
  }
  return
}
"""

# Symbols that MLIR 22 takes from pure ops of valid symbols at any depth (arith of
# them, a division by a constant, affine.min, an scf.for of step 1): valid of the loaded
# %n and %m only at the top of a task, so lowered under a guard; valid of constants (%k4)
# or of values from outside (the time step) under a guard as well, so kept affine.
PURE_SYMBOLS = """
func.func @main(%a: memref<4xindex>, %b: memref<16xf64>, %c: memref<16xf64>,
                %e: memref<16xindex>, %g: memref<4xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %t = %c0 to %c2 step %c1 {
    dhir.schedule %a, %b, %c, %e, %g {
      %cpu = dhir.target {kind = "cpu"}
      %t0 = dhir.task %cpu, %a, %b, %c, %e {
        %n = affine.load %a[0] : memref<4xindex>
        %m = affine.load %a[1] : memref<4xindex>
        affine.for %i = 0 to 2 {
          %n1 = arith.addi %n, %c1 : index
          %h = arith.divui %n1, %c2 : index
          %r = arith.remui %n, %m : index
          %f = arith.floordivsi %n, %m : index
          %lo = affine.min affine_map<()[s0, s1] -> (s0, s1)>()[%h, %r]
          affine.for %j = %lo to %n1 {
            %x = affine.load %b[%j + %i + symbol(%f)] : memref<16xf64>
            affine.store %x, %c[%j + %i * 8] : memref<16xf64>
          }
          %s = scf.for %k = %c0 to %m step %c1 iter_args(%acc = %t) -> (index) {
            %acc2 = arith.addi %acc, %k : index
            scf.yield %acc2 : index
          }
          %v = affine.load %b[symbol(%s) + 10] : memref<16xf64>
          affine.store %v, %c[%i + 14] : memref<16xf64>
          affine.store %n1, %e[%i * 8] : memref<16xindex>
          affine.store %h, %e[%i * 8 + 1] : memref<16xindex>
          affine.store %r, %e[%i * 8 + 2] : memref<16xindex>
          affine.store %f, %e[%i * 8 + 3] : memref<16xindex>
          affine.store %lo, %e[%i * 8 + 4] : memref<16xindex>
          affine.store %s, %e[%i * 8 + 5] : memref<16xindex>
        }
      }
      %t1 = dhir.task %cpu, %c, %b {
        affine.for %i = 0 to 8 {
          %k4 = arith.muli %c2, %c2 : index
          %tt = arith.addi %t, %k4 : index
          %x = affine.load %c[%i + symbol(%k4) + symbol(%t)] : memref<16xf64>
          %y = affine.load %c[%i + symbol(%tt) - 4] : memref<16xf64>
          %z = arith.addf %x, %y : f64
          affine.store %z, %b[%i] : memref<16xf64>
        }
      }
      %t2 = dhir.task %cpu, %a, %g {
        %n = affine.load %a[0] : memref<4xindex>
        affine.for %i = 0 to 4 {
          %z = arith.muli %n, %c2 : index
          %w = arith.subi %z, %c1 : index
          affine.if affine_set<(d0)[s0] : (s0 - d0 - 7 >= 0)>(%i)[%w] {
            affine.store %z, %g[%i] : memref<4xindex>
          } else {
            affine.store %w, %g[%i] : memref<4xindex>
          }
        }
      }
    }
  }
  return
}
"""

# Plain MLIR for CodeDrop: the bound is loaded by host code, outside the tasks.
PLAIN = """
func.func @main(%a: memref<4xindex>, %b: memref<16xf64>, %c: memref<16xf64>) {
  %n = affine.load %a[0] : memref<4xindex>
  %m = affine.load %a[1] : memref<4xindex>
  affine.for %i = 0 to %n {
    %x = affine.load %b[%i + symbol(%m)] : memref<16xf64>
    affine.store %x, %c[%i] : memref<16xf64>
  }
  affine.for %i = 0 to %m {
    %x = affine.load %c[%i] : memref<16xf64>
    %y = arith.addf %x, %x : f64
    affine.store %y, %b[%i] : memref<16xf64>
  }
  return
}
"""


def _index_inputs() -> np.ndarray:
    return np.array([5, 3, 0, 0], np.int64)


def _schedule_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [
        _index_inputs(),
        rng.standard_normal(16),
        rng.standard_normal(16),
        np.zeros(4),
        np.zeros(16, np.int32),
    ]


def _two_arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(6)
    return [_index_inputs(), rng.standard_normal(16), rng.standard_normal(16)]


def _pure_symbol_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [
        _index_inputs(),
        rng.standard_normal(16),
        rng.standard_normal(16),
        np.zeros(16, np.int64),
        np.zeros(4, np.int64),
    ]


PROGRAMS = {
    "pure_symbols": (PURE_SYMBOLS, _pure_symbol_inputs),
    "schedule": (SCHEDULE, _schedule_inputs),
    "time_loop": (TIME_LOOP, _two_arrays),
    "codedrop": (PLAIN, _two_arrays),
}


def _check(name: str, ranks: int, threads: int) -> None:
    text, inputs = PROGRAMS[name]
    oracle = dhir.run(text, *inputs(), backend="interp")
    native = dhir.run(
        text,
        *inputs(),
        ranks=ranks,
        threads=threads,
        placement="round-robin",
        timeout=TIMEOUT,
    )
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ranks", [1, 2])
def test_symbols_from_the_top_of_a_task_equal_the_interpreter(ranks: int, threads: int) -> None:
    _check("schedule", ranks, threads)


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("name", ["time_loop", "codedrop"])
def test_symbols_in_time_loops_and_codedrop_equal_the_interpreter(name: str) -> None:
    _check(name, 2, 2)


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_symbols_of_pure_ops_equal_the_interpreter(ranks: int) -> None:
    """MLIR 22's wider symbol rule (an arith op of symbols is one at any depth): what
    a guard leaves invalid is lowered, what stays valid stays affine."""
    _check("pure_symbols", ranks, 1)


def test_guarded_bodies_keep_only_valid_affine_ops() -> None:
    """On 2 ranks, the ops left invalid are lowered, and the nests still valid stay
    affine; on 1 rank (no guard) the body is left as written."""
    for ranks, lowered in ((2, True), (1, False)):
        module = dhir.parse_string(SCHEDULE)
        passes = (PlacePass(ranks, "round-robin"), LowerToMPIPass(ranks))
        run_pipeline(module, PassPipeline(passes))
        ops = list(module.walk())
        names = {op.name for op in ops}
        assert ("affine.parallel" not in names) is lowered
        assert any(isinstance(op, scf.ParallelOp) for op in ops) is lowered
        # The 2 x 2 nest over constants, indexed by its counters, stays as written.
        inner = [op for op in ops if isinstance(op, affine.ForOp) and _nested_in_for(op)]
        assert len(inner) == 1
        module.verify()


def test_lowered_parallel_loops_keep_their_marks() -> None:
    """A parallel loop marked to run its iterations in order (dhir.in_order: their
    independence is not proven) stays marked once a guard makes it an scf.parallel, so
    that dhir-serial-loops still runs it in order rather than on threads."""
    module = dhir.parse_string(SCHEDULE)
    for loop in module.walk():
        if isinstance(loop, affine.ParallelOp):
            loop.attributes[IN_ORDER] = UnitAttr()
    run_pipeline(module, PassPipeline((PlacePass(2, "round-robin"), LowerToMPIPass(2))))
    lowered = [op for op in module.walk() if isinstance(op, scf.ParallelOp)]
    assert len(lowered) == 3
    assert all(IN_ORDER in op.attributes for op in lowered)


def test_guards_lower_only_what_pure_symbols_of_loads_bound() -> None:
    """On 2 ranks, the loop bounded by arith of loaded values and the condition on one
    are lowered; the loads indexed by arith of constants and of the time step stay."""
    for ranks, lowered in ((2, True), (1, False)):
        module = dhir.parse_string(PURE_SYMBOLS)
        passes = (PlacePass(ranks, "round-robin"), LowerToMPIPass(ranks))
        run_pipeline(module, PassPipeline(passes))
        ops = list(module.walk())
        fors = [op for op in ops if isinstance(op, affine.ForOp)]
        assert len(fors) == (3 if lowered else 4)
        assert any(isinstance(op, affine.IfOp) for op in ops) is not lowered
        by_step = [
            op for op in ops if isinstance(op, affine.LoadOp) and op.map.data.num_symbols == 2
        ]
        assert len(by_step) == 1
        module.verify()


def _nested_in_for(op: affine.ForOp) -> bool:
    parent = op.parent_op()
    return isinstance(parent, affine.ForOp)
