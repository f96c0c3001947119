"""dhir-place hands its task facts to dhir-lower-to-mpi only inside `handing_over`, and
the lowering built from them is the one built from facts found afresh."""

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64

from dhir import parse_string, print_module, run_pipeline
from dhir.analysis.handoff import handing_over, take
from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import RANK_ATTR

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
