"""Trip counts of loops whose bounds depend on enclosing loops through a min, max or
division (dhir.analysis.counts.LoopTrips): counted exactly, as the work count takes them."""

import pytest

from dhir.analysis.counts import DEFAULT_TRIP_COUNT, LoopTrips
from dhir.analysis.work import body_work
from dhir.api import parse_string, run_pipeline
from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import task_ids


def task_of(body: str, args: str = "%a: memref<64xf32>") -> TaskOp:
    names = ", ".join(a.split(":")[0].strip() for a in args.split(",") if "memref" in a)
    text = f"""
func.func @main({args}) {{
  dhir.schedule {names} {{
    %t = dhir.target {{kind = "cpu"}}
    %k = dhir.task %t, {names} {{
{body}
    }}
  }}
  return
}}
"""
    (task,) = task_ids(parse_string(text))
    return task


def loops_trips(task: TaskOp) -> list[float]:
    trips = LoopTrips()
    return [t for op in task.walk() if op.name == "scf.for" for t in trips.of(op)]


def test_a_ceiling_division_bound_is_read() -> None:
    # 0 .. ceildiv(10, 3) = 4 iterations, each one addf.
    task = task_of(
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c10 = arith.constant 10 : index
      %n = arith.ceildivsi %c10, %c3 : index
      %x = arith.constant 1.0 : f32
      scf.for %i = %c0 to %n step %c1 {
        %y = arith.addf %x, %x : f32
      }"""
    )
    assert loops_trips(task) == [4]
    assert body_work(task).flops == 4


def test_a_bound_clamped_by_min_of_the_outer_variable_is_counted_exactly() -> None:
    # j < min(i, 5) for i in 0..9: 0+1+2+3+4+5*5 = 35 iterations in all, not 10 times
    # the bound at i's mean value (min(4, 5) = 4: 40).
    task = task_of(
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c5 = arith.constant 5 : index
      %c10 = arith.constant 10 : index
      %x = arith.constant 1.0 : f32
      scf.for %i = %c0 to %c10 step %c1 {
        %m = arith.minsi %i, %c5 : index
        scf.for %j = %c0 to %m step %c1 {
          %y = arith.addf %x, %x : f32
        }
      }"""
    )
    assert loops_trips(task) == [10, 3.5]
    assert body_work(task).flops == 35


def test_an_affine_min_bound_with_a_step_is_counted_exactly() -> None:
    # Tiles of 4 over 0..10 (i = 0, 4, 8); j from i to min(i + 4, 10): 4 + 4 + 2.
    task = task_of(
        """
      %x = arith.constant 1.0 : f32
      affine.for %i = 0 to 10 step 4 {
        affine.for %j = affine_map<(d0) -> (d0)>(%i) to min affine_map<(d0) -> (d0 + 4, 10)>(%i) {
          %y = arith.addf %x, %x : f32
        }
      }"""
    )
    assert body_work(task).flops == 10


def test_a_bound_not_known_is_the_default_guess_or_less_where_bounded() -> None:
    # j runs to min(%n, i + 8) from i: %n is not known, but j takes at most 8 values.
    task = task_of(
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c10 = arith.constant 10 : index
      %x = arith.constant 1.0 : f32
      scf.for %i = %c0 to %c10 step %c1 {
        %e = arith.addi %i, %c10 : index
        %h = arith.minsi %n, %e : index
        scf.for %j = %i to %h step %c1 {
          %y = arith.addf %x, %x : f32
        }
        scf.for %k = %i to %n step %c1 {
          %z = arith.addf %x, %x : f32
        }
      }""",
        args="%a: memref<64xf32>, %n: index",
    )
    assert loops_trips(task) == [10, 10, DEFAULT_TRIP_COUNT]


JACOBI = """
func.func @main(%A: memref<{n}x{n}xf64>, %B: memref<{n}x{n}xf64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant {steps} : index
  scf.for %t = %c0 to %steps step %c1 {{
    dhir.schedule %A, %B {{
      %cpu = dhir.target {{kind = "cpu"}}
      %s0 = dhir.task %cpu, %A, %B {{ {sweep_ab} }}
      %s1 = dhir.task %cpu, %B, %A {{ {sweep_ba} }}
    }}
  }}
  return
}}
"""

SWEEP = """
        %i1 = arith.constant 1 : index
        %last = arith.constant {last} : index
        %w = arith.constant 0.2 : f64
        scf.for %i = %i1 to %last step %i1 {{
          scf.for %j = %i1 to %last step %i1 {{
            %l = arith.subi %j, %i1 : index
            %r = arith.addi %j, %i1 : index
            %u = arith.subi %i, %i1 : index
            %d = arith.addi %i, %i1 : index
            %v0 = memref.load %{src}[%i, %j] : memref<{n}x{n}xf64>
            %v1 = memref.load %{src}[%i, %l] : memref<{n}x{n}xf64>
            %v2 = memref.load %{src}[%i, %r] : memref<{n}x{n}xf64>
            %v3 = memref.load %{src}[%u, %j] : memref<{n}x{n}xf64>
            %v4 = memref.load %{src}[%d, %j] : memref<{n}x{n}xf64>
            %s1 = arith.addf %v0, %v1 : f64
            %s2 = arith.addf %s1, %v2 : f64
            %s3 = arith.addf %s2, %v3 : f64
            %s4 = arith.addf %s3, %v4 : f64
            %s5 = arith.mulf %w, %s4 : f64
            memref.store %s5, %{dst}[%i, %j] : memref<{n}x{n}xf64>
          }}
        }}"""


@pytest.mark.parametrize(("n", "steps", "band"), [(20, 10, 4), (30, 7, 3), (12, 9, 0)])
def test_a_time_tiled_stencil_counts_its_true_work(n: int, steps: int, band: int) -> None:
    """dhir-time-tiles' skewed bands bound each row loop by a max and a min of the band's
    variables, and each band's steps by a ceildivsi: the count is the program's, 5 flops
    per point of each sweep at each step (before, each of those loops was a guessed 100
    trips: 4.96e9 flops counted at MEDIUM against 6.15e7)."""
    sweep = {"last": n - 1, "n": n}
    text = JACOBI.format(
        n=n,
        steps=steps,
        sweep_ab=SWEEP.format(src="A", dst="B", **sweep),
        sweep_ba=SWEEP.format(src="B", dst="A", **sweep),
    )
    module = parse_string(text)
    run_pipeline(module, f"dhir-time-tiles{{steps={band} ranks=1}}")
    (task,) = task_ids(module)
    assert any(op.name == "arith.ceildivsi" for op in task.walk())
    assert body_work(task).flops == pytest.approx(steps * 2 * (n - 2) ** 2 * 5)
