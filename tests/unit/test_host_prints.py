"""dhir-host-prints: a `vector.print` of the entry's host code prints once over the
ranks, as the sequential program (and the interpreter) prints it."""

import shutil

import numpy as np
import pytest

import dhir
from dhir.dialects import scf, vector
from dhir.dialects.dhir import TaskOp
from dhir.ir.walk import enclosing, find_ops

PROGRAM = """
func.func @main(%x: memref<100xf64>, %s: memref<1xf64>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %x, %s {
      %cpu = dhir.target {kind = "cpu"}
      %sum = dhir.task %cpu, %x, %s {
        %z = arith.constant 0.0 : f64
        %n = arith.constant 100 : index
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (f64) {
          %v = memref.load %x[%i] : memref<100xf64>
          %a = arith.addf %acc, %v : f64
          scf.yield %a : f64
        }
        memref.store %r, %s[%c0] : memref<1xf64>
        vector.print str "task\\n"
      }
    }
    %res = memref.load %s[%c0] : memref<1xf64>
    vector.print %res : f64
  }
  return
}
"""


def _guarded(ranks: int) -> list[bool]:
    module = dhir.parse_string(PROGRAM, "prog.mlir")
    dhir.run_pipeline(module, f"dhir-host-prints{{ranks={ranks}}}")
    prints = find_ops(module, vector.PrintOp)
    assert len(prints) == 2
    assert enclosing(prints[0], TaskOp) is not None
    return [isinstance(p.parent_op(), scf.IfOp) for p in prints]


def test_only_the_host_print_is_guarded_and_only_on_several_ranks() -> None:
    assert _guarded(2) == [False, True]
    assert _guarded(1) == [False, False]


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_host_print_prints_once_on_several_ranks(capfd: pytest.CaptureFixture[str]) -> None:
    """On 3 ranks each rank printed the sum: `4950` three times a step, the numbers
    and their newlines interleaved (`495049504950` and three empty lines)."""
    module = dhir.parse_string(PROGRAM, "prog.mlir")
    inputs = (np.arange(100.0), np.zeros(1), 2)
    dhir.run(module, *inputs, backend="interp")
    want = capfd.readouterr().out
    assert want == "task\n4950\ntask\n4950\n"
    dhir.run(module, *inputs, ranks=3)
    got = capfd.readouterr().out
    assert sorted(got.splitlines()) == sorted(want.splitlines())
