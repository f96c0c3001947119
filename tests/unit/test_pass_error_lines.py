"""An error a pass raises after parsing quotes its source line, with a caret under the
column, as the verifier's errors do (before: the `file:line:col: error:` line alone)."""

import pytest

from dhir.api import run_pipeline
from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc
from dhir.ir.text import parse_string

STRIDED = """func.func @main(%x: memref<8xf32>) {
  %a = memref.subview %x[0] [4] [2] : memref<8xf32> to memref<4xf32, strided<[2]>>
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 1.0 : f32
      memref.store %v, %a[%c0] : memref<4xf32, strided<[2]>>
    }
  }
  return
}
"""


def test_a_pass_error_quotes_its_line() -> None:
    module = parse_string(STRIDED, "strided_pass.mlir")
    with pytest.raises(DhirError) as raised:
        run_pipeline(module, "dhir-lower-to-mpi{ranks=2}")
    assert str(raised.value).splitlines() == [
        "strided_pass.mlir:3:3: error: schedule operand of type memref<4xf32, strided<[2]>> "
        "has a strided layout; the native backend sends contiguous memrefs only (pass the "
        "whole buffer, not a view)",
        "  dhir.schedule %a {",
        "  ^",
    ]


def test_text_parsed_without_a_name_is_not_quoted() -> None:
    """ "<string>" names any text parse_string was given: a later one may hold other lines."""
    parse_string(STRIDED)
    error = DhirError([Diagnostic("wrong", SourceLoc("<string>", 3, 3))])
    assert str(error) == "<string>:3:3: error: wrong"
