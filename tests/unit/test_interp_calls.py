"""The interpreter follows calls without reading the module's names at each one."""

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation
from xdsl.traits import SymbolOpInterface

import dhir
from dhir.backends.interp import run_interp


def _chain(length: int) -> str:
    """@main calls @f0 three times; each @fk calls @f(k+1); the last adds one to m[0]."""
    functions = [
        f"""func.func @f{k}(%m: memref<1xi64>) {{
  func.call @f{k + 1}(%m) : (memref<1xi64>) -> ()
  return
}}"""
        for k in range(length)
    ]
    last = f"""func.func @f{length}(%m: memref<1xi64>) {{
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i64
  %v = memref.load %m[%c0] : memref<1xi64>
  %w = arith.addi %v, %one : i64
  memref.store %w, %m[%c0] : memref<1xi64>
  return
}}"""
    main = """func.func @main(%m: memref<1xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    func.call @f0(%m) : (memref<1xi64>) -> ()
  }
  return
}"""
    return "\n".join([*functions, last, main])


def test_calls_read_the_module_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """xDSL's lookup_symbol reads the name of every op of the module at each call: a
    chain of a thousand functions took 40 s to interpret. Its names are read once."""
    module = dhir.parse_string(_chain(100), "prog.mlir")
    read: list[Operation] = []
    name = SymbolOpInterface.get_sym_attr_name

    def reading(self: SymbolOpInterface, op: Operation) -> StringAttr | None:
        read.append(op)
        return name(self, op)

    monkeypatch.setattr(SymbolOpInterface, "get_sym_attr_name", reading)
    (out,) = run_interp(module, "main", [np.zeros(1, np.int64)])
    assert out.tolist() == [3]
    assert len(read) <= 2 * len(module.body.block.ops)
