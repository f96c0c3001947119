"""dhir.analysis.outputs.dead_after: the buffers no rank needs after a schedule."""

from dhir import parse_string
from dhir.analysis.outputs import dead_after
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.walk import find_ops

PROGRAM = """
func.func @main(%a: memref<4xf64>) {
  %freed = memref.alloc() : memref<4xf64>
  %kept = memref.alloc() : memref<4xf64>
  %viewed = memref.alloc() : memref<4xf64>
  %view = memref.subview %viewed[0] [2] [1] : memref<4xf64> to memref<2xf64, strided<[1]>>
  dhir.schedule %a, %freed, %kept, %viewed {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %freed, %kept, %viewed {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf64>
      memref.store %x, %freed[%c0] : memref<4xf64>
      memref.store %x, %kept[%c0] : memref<4xf64>
      memref.store %x, %viewed[%c0] : memref<4xf64>
    }
  }
  %c0 = arith.constant 0 : index
  %y = memref.load %kept[%c0] : memref<4xf64>
  %z = memref.load %view[%c0] : memref<2xf64, strided<[1]>>
  memref.dealloc %freed : memref<4xf64>
  memref.dealloc %kept : memref<4xf64>
  memref.dealloc %viewed : memref<4xf64>
  return
}
"""


def test_only_a_buffer_that_is_only_freed_afterwards_is_dead() -> None:
    """%freed is; %kept is read after, %viewed through a view made before the schedule,
    and %a is the entry's argument, which the caller reads."""
    module = parse_string(PROGRAM)
    (schedule,) = find_ops(module, ScheduleOp)
    dead = dead_after(schedule, schedule.args)
    assert [v.name_hint for v in dead] == ["freed"]
