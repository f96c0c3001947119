"""Errors name SSA values as written: xDSL drops a `_N` suffix from a name, so two
schedule operands %view_0 and %view_1 were "%view and %view"."""

import pytest

from dhir.analysis.sharing import check_shared_data
from dhir.dialects.dhir import TaskOp
from dhir.ir.diagnostics import value_name, value_names
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.text import parse_string

ALIASED = """func.func @main(%x: memref<8xf32>) {
  %view_0 = memref.subview %x[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %view_1 = memref.subview %x[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  dhir.schedule %view_0, %view_1 {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %view_0 {
      %c0 = arith.constant 0 : index
      %v = arith.constant 1.0 : f32
      memref.store %v, %view_0[%c0] : memref<4xf32, strided<[1]>>
    }
    %t1 = dhir.task %cpu, %view_1 {
      %c0 = arith.constant 0 : index
      %v = arith.constant 2.0 : f32
      memref.store %v, %view_1[%c0] : memref<4xf32, strided<[1], offset: 2>>
    }
  }
  return
}
"""


def test_two_views_are_named_as_written() -> None:
    module = parse_string(ALIASED, "p.mlir")
    with pytest.raises(PassFailedAt, match=r"schedule operands %view_0 and %view_1 may be views"):
        check_shared_data(module)


def test_values_of_one_name_are_told_apart_by_their_line() -> None:
    module = parse_string(ALIASED, "p.mlir")
    first, second = (
        next(op for op in task.body.walk() if op.name == "arith.constant" and op.results)
        for task in module.walk()
        if isinstance(task, TaskOp)
    )
    one, two = first.results[0], second.results[0]
    assert value_name(one) == value_name(two) == "%c0"
    assert value_names(one, two) == ("%c0 (line 7:13)", "%c0 (line 12:13)")


def test_a_name_without_a_suffix_is_unchanged() -> None:
    module = parse_string(ALIASED, "p.mlir")
    x = next(iter(module.walk())).regions[0].block.first_op
    assert x is not None and value_name(x.regions[0].block.args[0]) == "%x"
