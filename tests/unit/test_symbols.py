"""dhir.ir.symbols.Symbols finds what xDSL's SymbolTable.lookup_symbol finds."""

from xdsl.dialects.builtin import ModuleOp
from xdsl.traits import SymbolTable

from dhir import parse_string
from dhir.dialects import func
from dhir.ir.symbols import Symbols

PROGRAM = """
func.func private @ext(i64)
func.func @f(%x: i64) {
  func.call @ext(%x) : (i64) -> ()
  return
}
builtin.module @inner {
  func.func @g(%x: i64) {
    func.call @f(%x) : (i64) -> ()
    return
  }
  func.func @f(%x: i64) {
    return
  }
}
func.func @main(%x: i64) {
  func.call @f(%x) : (i64) -> ()
  return
}
"""


def test_symbols_answer_as_lookup_symbol() -> None:
    """Each call's callee, in the module and in a nested one (whose @f is its own)."""
    module = parse_string(PROGRAM, "prog.mlir")
    symbols = Symbols()
    calls = [op for op in module.walk() if isinstance(op, func.CallOp)]
    assert len(calls) == 3
    for call in calls:
        found = symbols.lookup(call, call.callee)
        assert found is SymbolTable.lookup_symbol(call, call.callee)
        assert isinstance(found, func.FuncOp)
    inner = next(op for op in module.walk() if isinstance(op, ModuleOp) and op is not module)
    call_in_inner = next(op for op in inner.walk() if isinstance(op, func.CallOp))
    found = symbols.lookup(call_in_inner, call_in_inner.callee)
    assert found is not None and found.parent_op() is inner
