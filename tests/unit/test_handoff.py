"""dhir-place hands its task facts to dhir-lower-to-mpi only inside `handing_over`, and
the lowering built from them is the one built from facts found afresh."""

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64

from dhir import parse_string, print_module, run_pipeline
from dhir.analysis.effects import task_effects
from dhir.analysis.handoff import handing_over, take
from dhir.analysis.regions import Regions, _Walker, task_regions
from dhir.backends.native import compile_native
from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import RANK_ATTR
from dhir.toolchain.options import RunOptions
from dhir.transforms.optimize_bodies import optimize_bodies
from dhir.transforms.place import PlacePass

PLACE = "dhir-place{ranks=2 algorithm=best}"
LOWER = "dhir-lower-to-mpi{ranks=2}"

# Tasks on elements apart (placed on both ranks) and sharing some (messages), with a
# view, a loop and a partial write, so that the facts matter to the lowering.
PROGRAM = """
func.func @main(%a: memref<16xf32>, %b: memref<16xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %x = arith.constant 2.0 : f32
      scf.for %i = %c0 to %c8 step %c1 {
        memref.store %x, %a[%i] : memref<16xf32>
      }
    }
    %t1 = dhir.task %cpu, %a {
      %c8 = arith.constant 8 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %x = arith.constant 3.0 : f32
      scf.for %i = %c8 to %c16 step %c1 {
        memref.store %x, %a[%i] : memref<16xf32>
      }
    }
    %t2 = dhir.task %cpu, %a, %b {
      %v = memref.subview %a[4] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 4>>
      %c0 = arith.constant 0 : index
      %c5 = arith.constant 5 : index
      %y = memref.load %v[%c5] : memref<8xf32, strided<[1], offset: 4>>
      memref.store %y, %b[%c0] : memref<16xf32>
    }
  }
  return
}
"""


def _tasks(module: ModuleOp) -> list[TaskOp]:
    return [op for op in module.walk() if isinstance(op, TaskOp)]


def test_nothing_is_handed_outside_a_scope() -> None:
    module = parse_string(PROGRAM)
    run_pipeline(module, PLACE)
    assert all(take(task) is None for task in _tasks(module))


def test_place_hands_facts_over_once_inside_a_scope() -> None:
    module = parse_string(PROGRAM)
    with handing_over():
        run_pipeline(module, PLACE)
        tasks = _tasks(module)
        assert all(take(task) is not None for task in tasks)
        assert all(take(task) is None for task in tasks)  # taken once
    assert all(take(task) is None for task in tasks)


def _lowered(module: ModuleOp) -> str:
    """Placed, then spread over both ranks (ranks are no task facts), then lowered."""
    run_pipeline(module, PLACE)
    for task, rank in zip(_tasks(module), (0, 1, 0), strict=True):
        task.attributes[RANK_ATTR] = IntegerAttr(rank, i64)
    run_pipeline(module, LOWER)
    return print_module(module)


def test_lowering_from_handed_facts_is_the_same() -> None:
    fresh = _lowered(parse_string(PROGRAM))
    with handing_over():
        handed = _lowered(parse_string(PROGRAM))
    assert handed == fresh
    assert "dhir_rt_recv" in fresh  # t2 needs what t1 wrote on rank 1


def test_tracking_between_place_and_lower_changes_no_task_facts() -> None:
    """compile_native runs dhir-track-tasks inside the hand-off, between the two."""
    module = parse_string(PROGRAM)
    before = [(task_effects(t), str(task_regions(t))) for t in _tasks(module)]
    run_pipeline(module, "dhir-track-tasks")
    after = [(task_effects(t), str(task_regions(t))) for t in _tasks(module)]
    assert after == before
    assert all("dhir_rt_task_enter" in str(t) for t in _tasks(module))


@pytest.mark.mlir
def test_placement_in_the_native_build_sees_no_tracking_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls in a loop nest hide its reuse from the cost model (dhir.analysis.reuse): a
    gemm placed after dhir-track-tasks stayed on one rank."""
    seen: list[str] = []
    place = PlacePass.apply

    def spy(self: PlacePass, ctx: Context, op: ModuleOp) -> None:
        seen.append(str(op))
        place(self, ctx, op)

    monkeypatch.setattr(PlacePass, "apply", spy)
    compile_native(parse_string(PROGRAM), "main", RunOptions(ranks=2))
    assert seen and "dhir.task" in seen[0]
    assert "dhir_rt_task_enter" not in seen[0]


def _rows(tasks: int) -> str:
    """`tasks` tasks alike but for the row they double (a literal subscript, which
    leaves their body one shape, dhir.analysis.shapes), in a loop nest twice over."""
    t = f"memref<{tasks}x64xf64>"
    body = "".join(
        f"""
    %t{k} = dhir.task %cpu, %a {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %i = arith.constant {k} : index
      %two = arith.constant 2.0 : f64
      scf.for %r = %c0 to %c2 step %c1 {{
        scf.for %j = %c0 to %c64 step %c1 {{
          %x = memref.load %a[%i, %j] : {t}
          %d = arith.mulf %x, %two : f64
          memref.store %d, %a[%i, %j] : {t}
        }}
      }}
    }}"""
        for k in range(tasks)
    )
    return f"""func.func @main(%a: {t}) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}{body}
  }}
  return
}}
"""


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """Counts the task bodies the region analysis walks."""
    walks: list[None] = []
    result = _Walker.result

    def counted(self: _Walker) -> Regions:
        walks.append(None)
        return result(self)

    monkeypatch.setattr(_Walker, "result", counted)
    return walks


def test_round_robin_finds_the_facts_once_per_body_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Round-robin found no facts to hand on, and the lowering found them a walk per
    task, after dhir-track-tasks had told every body apart (2,000 row tasks spent
    seconds there); now dhir-place finds them once per body shape, as compile_native
    runs the passes."""
    module = parse_string(_rows(40))
    walks = _walks(monkeypatch)
    with handing_over():
        run_pipeline(module, "dhir-place{ranks=2 algorithm=round-robin},dhir-track-tasks")
        run_pipeline(module, LOWER)
    assert len(walks) == 1
    assert "dhir_rt_task_enter" in print_module(module)


def test_lowering_finds_missing_facts_once_per_body_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a hand-off (dhir-opt), too."""
    module = parse_string(_rows(40))
    run_pipeline(module, "dhir-place{ranks=2 algorithm=round-robin}")
    walks = _walks(monkeypatch)
    run_pipeline(module, LOWER)
    assert len(walks) == 1


def test_optimize_bodies_keeps_the_facts_once_per_body_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = parse_string(_rows(40))
    run_pipeline(module, "dhir-place{ranks=2 algorithm=round-robin}")
    walks = _walks(monkeypatch)
    with handing_over():
        decisions = optimize_bodies(module, 256)
        assert len(walks) == 1
        assert all(take(task) is not None for task in _tasks(module))
    assert decisions
