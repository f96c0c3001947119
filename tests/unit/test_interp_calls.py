"""The interpreter follows calls and finds globals without reading the module's names at
each one."""

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


def _globals(count: int) -> str:
    """@main adds memref.global @gk's one element to m[0], for each k, three times over."""
    globals_ = [
        f'memref.global "private" constant @g{k} : memref<1xi64> = dense<{k}>' for k in range(count)
    ]
    reads = "".join(
        f"""
    %a{k} = memref.get_global @g{k} : memref<1xi64>
    %v{k} = memref.load %a{k}[%c0] : memref<1xi64>
    %s{k + 1} = arith.addi %s{k}, %v{k} : i64"""
        for k in range(count)
    )
    main = f"""func.func @main(%m: memref<1xi64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {{
    %s0 = memref.load %m[%c0] : memref<1xi64>{reads}
    memref.store %s{count}, %m[%c0] : memref<1xi64>
  }}
  return
}}"""
    return "\n".join([*globals_, main])


def test_get_global_reads_the_module_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """As calls: each memref.get_global run read every name of the module (15,150 names
    here; 4 million, 15 s of CPU, for a chain of 2,000 functions reading a global each)."""
    count = 100
    module = dhir.parse_string(_globals(count), "prog.mlir")
    read: list[Operation] = []
    name = SymbolOpInterface.get_sym_attr_name

    def reading(self: SymbolOpInterface, op: Operation) -> StringAttr | None:
        read.append(op)
        return name(self, op)

    monkeypatch.setattr(SymbolOpInterface, "get_sym_attr_name", reading)
    (out,) = run_interp(module, "main", [np.zeros(1, np.int64)])
    assert out.tolist() == [3 * sum(range(count))]
    assert len(read) <= 2 * len(module.body.block.ops)
