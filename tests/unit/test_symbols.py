"""dhir.ir.symbols.Symbols finds what xDSL's SymbolTable.lookup_symbol finds, and the verifier
finds each call's callee with it."""

import pytest
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.traits import SymbolOpInterface, SymbolTable

from dhir import DhirError, parse_string
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


def _chain(n: int) -> str:
    """n functions, each calling the next."""
    lines = []
    for k in range(n):
        call = f"  func.call @f{k + 1}(%x) : (i64) -> ()\n" if k + 1 < n else ""
        lines.append(f"func.func @f{k}(%x: i64) {{\n{call}  return\n}}\n")
    return "".join(lines)


def _name_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the symbol names read from here on."""
    reads = [0]
    read = SymbolOpInterface.get_sym_attr_name

    def counted(self: SymbolOpInterface, op: Operation) -> StringAttr | None:
        reads[0] += 1
        return read(self, op)

    monkeypatch.setattr(SymbolOpInterface, "get_sym_attr_name", counted)
    return reads


def test_verifying_calls_reads_each_symbol_name_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """xDSL's func.call verifier read the name of every function of the module for each
    call: 20,300 reads for this chain of 200 functions (8 s of CPU to parse 2,000)."""
    reads = _name_reads(monkeypatch)
    parse_string(_chain(200), "chain.mlir")
    assert reads[0] <= 3 * 200


def _globals(n: int) -> str:
    """n functions, each reading a memref.global of its own."""
    return "".join(
        f'memref.global "private" constant @g{k} : memref<2xi32> = dense<[{k}, 1]>\n'
        f"func.func @f{k}(%i: index) -> i32 {{\n"
        f"  %a = memref.get_global @g{k} : memref<2xi32>\n"
        "  %v = memref.load %a[%i] : memref<2xi32>\n"
        "  return %v : i32\n}\n"
        for k in range(n)
    )


def test_verifying_get_global_reads_each_symbol_name_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """memref.get_global was checked with lookup_symbol: 10,201 names read for these 100
    globals and functions (52 s of CPU to parse 4,000)."""
    reads = _name_reads(monkeypatch)
    parse_string(_globals(100), "globals.mlir")
    assert reads[0] <= 3 * 2 * 100


GETTER = "func.func @main() {\n  %a = memref.get_global @g : memref<2xi32>\n  return\n}\n"


@pytest.mark.parametrize(
    ("named", "error"),
    [
        ("", "@g is no memref.global"),
        ("func.func private @g()\n", "@g is no memref.global"),
        ('memref.global "private" @g : memref<3xi32>\n', "@g is a memref<3xi32>, not a"),
    ],
)
def test_a_get_global_that_does_not_match_its_global_is_refused(named: str, error: str) -> None:
    with pytest.raises(DhirError) as caught:
        parse_string(named + GETTER, "prog.mlir")
    assert error in str(caught.value)
    assert f"prog.mlir:{named.count(chr(10)) + 2}:" in str(caught.value)


CALLER = "func.func @main(%x: i64) {\n  %r = func.call @f(%x) : (i64) -> i64\n  return\n}\n"


@pytest.mark.parametrize(
    ("callee", "error"),
    [
        ("", "'@f' could not be found in symbol table"),
        ('memref.global "private" @f : memref<1xi64>\n', "'@f' does not reference a valid"),
        ("func.func private @f(i64, i64) -> i64\n", "incorrect number of operands for callee"),
        ("func.func private @f(i64)\n", "incorrect number of results for callee"),
        ("func.func private @f(i32) -> i64\n", "expected operand type i32, but provided i64"),
        ("func.func private @f(i64) -> f32\n", "expected result type f32, but provided i64"),
    ],
)
def test_a_call_that_does_not_match_its_callee_is_refused(callee: str, error: str) -> None:
    """The errors of xDSL's own check, at the call."""
    with pytest.raises(DhirError) as caught:
        parse_string(callee + CALLER, "prog.mlir")
    assert error in str(caught.value)
    assert f"prog.mlir:{callee.count(chr(10)) + 2}:" in str(caught.value)
