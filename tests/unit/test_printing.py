"""dhir's printer (dhir.api.print_module) writes exactly what xDSL's Printer writes, in
both forms, with and without locations: it only takes a shorter way to the stream."""

from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import BytesAttr, StringAttr, SymbolRefAttr, f32, f64, i32
from xdsl.ir import Attribute, Operation
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import FormatProgram
from xdsl.printer import Printer
from xdsl.traits import IsTerminator

from dhir import DhirError
from dhir.api import parse_string, print_module
from dhir.ir.text import float_text

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.mlir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("debuginfo", [False, True])
def test_same_text_as_xdsls_printer(path: Path, generic: bool, debuginfo: bool) -> None:
    module = parse_string(path.read_text(), str(path))
    out = StringIO()
    Printer(stream=out, print_generic_format=generic, print_debuginfo=debuginfo).print_op(module)
    out.write("\n")
    assert print_module(module, generic=generic, debuginfo=debuginfo) == out.getvalue()


def _xdsl_text(module: object) -> str:
    out = StringIO()
    Printer(stream=out).print_op(module)  # type: ignore[arg-type]
    out.write("\n")
    return out.getvalue()


CONSTANTS = """
func.func @main(%a: memref<8xf32>, %b: memref<2x3xf64>, %h: memref<4xf16>) {
  %i = arith.constant 3 : index
  %j = arith.constant -1 : i8
  %t = arith.constant true
  %f = arith.constant 0x7F800000 : f32
  %g = arith.constant -2.5e-300 : f64
  %q = arith.constant 1.5 : f16
  %v = arith.constant dense<[1.0, 2.0]> : vector<2xf32>
  %x = memref.load %a[%i] : memref<8xf32>
  %y = arith.addf %x, %f fastmath<fast> : f32
  %z = arith.mulf %x, %y : f32
  %w = arith.divf %z, %x : f32
  %s = arith.subf %w, %z {tag} : f32
  memref.store %s, %a[%i] {nontemporal = true} : memref<8xf32>
  memref.store %s, %a[%i] : memref<8xf32>
  %d = memref.load %b[%i, %i] : memref<2x3xf64>
  %e = arith.addf %d, %g : f64
  memref.store %e, %b[%i, %i] : memref<2x3xf64>
  %k = memref.load %h[%i] {nontemporal = false} : memref<4xf16>
  %m = arith.mulf %k, %q : f16
  memref.store %m, %h[%i] : memref<4xf16>
  func.call @none() : () -> ()
  %r = func.call @one(%i, %x) : (index, f32) -> i32
  %p:2 = func.call @two(%a) : (memref<8xf32>) -> (f32, f32)
  %u = func.call @"odd name"(%i) {tag} : (index) -> f32
  %o = func.call @fn() : () -> ((i32) -> i32)
  return
}
func.func private @none()
func.func private @one(index, f32) -> i32
func.func private @two(memref<8xf32>) -> (f32, f32)
func.func private @"odd name"(index) -> f32
func.func private @fn() -> ((i32) -> i32)
"""


def test_plain_forms_print_as_xdsl_does() -> None:
    """Constants of every kind, loads and stores of any rank, float arithmetic, calls
    with no, one and two results, and the same ops with flags or attributes, which
    xDSL prints itself."""
    module = parse_string(CONSTANTS)
    assert print_module(module) == _xdsl_text(module)


INTEGERS = """
func.func @main(%a: memref<4x16xf32>, %n: index, %m: index, %w: i32, %v: vector<4xindex>) {
  %s = arith.addi %n, %m : index
  %t = arith.subi %s, %n overflow<nsw> : index
  %u = arith.muli %t, %m overflow<nsw, nuw> : index
  %d = arith.divui %u, %m : index
  %e = arith.maxsi %d, %n : index
  %f = arith.minsi %e, %n {tag} : index
  %g = arith.remsi %f, %m : index
  %h = arith.floordivsi %g, %m : index
  %c = arith.cmpi slt, %s, %m : index
  %c2 = arith.cmpi uge, %w, %w : i32
  %c3 = arith.cmpi eq, %v, %v : vector<4xindex>
  %b = arith.andi %c, %c2 : i1
  %o = arith.ori %b, %c : i1
  %x = arith.xori %o, %b : i1
  %i = arith.index_cast %h : index to i64
  %j = arith.extsi %i : i64 to i128
  %k = arith.extui %w : i32 to i64
  %l = arith.index_cast %w {tag} : i32 to index
  %r = vector.load %a[%n, %m] : memref<4x16xf32>, vector<16xf32>
  %q = vector.load %a[%n, %m] {nontemporal = true} : memref<4x16xf32>, vector<16xf32>
  vector.store %r, %a[%m, %n] : memref<4x16xf32>, vector<16xf32>
  vector.store %q, %a[%m, %n] {nontemporal = false} : memref<4x16xf32>, vector<16xf32>
  return
}
"""


def test_integer_ops_and_vector_accesses_print_as_xdsl_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Integer arithmetic, comparisons, casts and vector loads and stores, with and
    without flags or attributes: the plain ones are written without the declarative
    formats' machinery (most of what the checks and optimized bodies of a lowered
    schedule are made of), the others printed by xDSL, the same text either way."""
    module = parse_string(INTEGERS)
    expected = _xdsl_text(module)
    formatted: list[str] = []
    print_with_format = FormatProgram.print

    def counted(self: FormatProgram, printer: Printer, op: IRDLOperation) -> None:
        formatted.append(op.name)
        print_with_format(self, printer, op)

    monkeypatch.setattr(FormatProgram, "print", counted)
    assert print_module(module) == expected
    # The ops with flags, attributes or properties, and the function's return.
    assert sorted(formatted) == sorted(
        [
            "arith.subi",
            "arith.muli",
            "arith.minsi",
            "arith.index_cast",
            "vector.load",
            "vector.store",
            "func.return",
        ]
    )


@pytest.mark.parametrize("literals", [False, True])
def test_a_lowered_schedule_prints_as_xdsl_does(literals: bool) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    import programs

    from dhir.api import run_pipeline

    module = parse_string(programs.many_tasks(200, literals=literals))
    run_pipeline(module, "dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}")
    assert print_module(module) == _xdsl_text(module)


def test_a_body_without_its_terminator_asks_each_class_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ops of an scf.if body (printed without its scf.yield) are told terminators
    by their class: xDSL asked each op, a tenth of printing a lowered schedule."""
    stores = "\n".join(f"    memref.store %x, %a[%i{k % 4}] : memref<4xf32>" for k in range(40))
    module = parse_string(
        "func.func @main(%a: memref<4xf32>, %c: i1, %x: f32) {\n"
        + "".join(f"  %i{k} = arith.constant {k} : index\n" for k in range(4))
        + f"  scf.if %c {{\n{stores}\n  }}\n  return\n}}"
    )
    expected = _xdsl_text(module)
    asked: list[type[Operation]] = []
    has_trait = Operation.has_trait.__func__  # pyright: ignore[reportFunctionMemberAccess]

    def counted(cls: type[Operation], trait: object, **kwargs: bool) -> bool:
        if trait is IsTerminator:
            asked.append(cls)
        return has_trait(cls, trait, **kwargs)

    monkeypatch.setattr(Operation, "has_trait", classmethod(counted))
    assert print_module(module) == expected
    assert len(asked) == len(set(asked))  # store, yield


def test_a_callee_and_its_types_print_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lowered schedule calls the runtime twice per task, always with the same callee
    and types: each callee and signature is printed once, then written as text (xDSL
    printed the symbol for every call, a third of printing those calls)."""
    calls = "\n".join(
        f"  func.call @enter(%k{k % 3}) : (i64) -> ()\n  %r{k} = func.call @get(%k{k % 3}) : (i64) -> f32"
        for k in range(30)
    )
    module = parse_string(
        "func.func private @enter(i64)\nfunc.func private @get(i64) -> f32\n"
        "func.func @main() {\n"
        + "".join(f"  %k{k} = arith.constant {k} : i64\n" for k in range(3))
        + f"{calls}\n  return\n}}"
    )
    expected = _xdsl_text(module)
    printed: list[str] = []
    print_builtin = SymbolRefAttr.print_builtin

    def counted(self: SymbolRefAttr, printer: Printer) -> None:
        printed.append(self.string_value())
        print_builtin(self, printer)

    monkeypatch.setattr(SymbolRefAttr, "print_builtin", counted)
    assert print_module(module) == expected
    assert sorted(printed) == ["enter", "get"]


DENSE_BITS = [
    ("f32", ["0x7FC00000", "0x7F800000", "0xFF800000", "0x3F800000"], [np.nan, np.inf, -np.inf, 1.0]),
    ("f64", ["0x7FF0000000000000", "0x4000000000000000"], [np.inf, 2.0]),
    ("f16", ["0x7C00", "0x3C00"], [np.inf, 1.0]),
    ("bf16", ["0x3F80", "0xFF80"], [1.0, -np.inf]),
    ("i32", ["0x10", "0x7FFFFFFF"], [16, 2**31 - 1]),
]  # fmt: skip


@pytest.mark.parametrize("type_, items, values", DENSE_BITS, ids=[t for t, _, _ in DENSE_BITS])
def test_hexadecimal_items_of_a_float_dense_literal_are_bits(
    type_: str, items: list[str], values: list[float]
) -> None:
    """As MLIR reads them; xDSL 0.74 read 0x7FC00000 as the integer 2143289344."""
    text = f"%x = arith.constant dense<[{', '.join(items)}]> : tensor<{len(items)}x{type_}>"
    module = parse_string(text)
    attr = next(iter(module.ops)).properties["value"]
    got = [getattr(v, "data", v) for v in attr.get_values()]  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got, values)


def test_floats_xdsl_prints_in_hexadecimal_come_back_unchanged() -> None:
    text = "%x = arith.constant dense<[16777216.0, 0.1, 0x7FC00001]> : tensor<3xf32>"
    printed = print_module(parse_string(text))
    assert "0x4B800000" in printed  # the printer's choice for this value
    assert print_module(parse_string(printed)) == printed


def test_a_hexadecimal_item_wider_than_its_float_type_is_an_error() -> None:
    with pytest.raises(DhirError, match="hexadecimal value too large for f16"):
        parse_string("%x = arith.constant dense<[0x10000]> : tensor<1xf16>")


# As mlir-opt-22 reads them (checked on it): element k at bit k % 8 of byte k // 8, the
# bits past the last element ignored, one byte 0x00 or 0xFF for all alike.
I1_HEX = [
    ("0x05F9", 12, [1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1]),
    ("0xFF", 150, [1] * 150),
    ("0x00", 3, [0] * 3),
    ("0x" + "39" * 19, 150, ([1, 0, 0, 1, 1, 1, 0, 0] * 19)[:150]),
]


@pytest.mark.parametrize("hex_, count, bits", I1_HEX, ids=[h[:6] for h, _, _ in I1_HEX])
def test_hexadecimal_i1_elements_are_packed_bits(hex_: str, count: int, bits: list[int]) -> None:
    """mlir-opt writes more than 100 i1 elements so (a tensor entry's mask, bufferized);
    xDSL 0.74 read a byte per element: "Expected 150 elements ... but got 19"."""
    constant = f'%x = arith.constant dense<"{hex_}"> : tensor<{count}xi1>'
    entry = f'"test.op"() {{v = dense<"{hex_}"> : tensor<{count}xi1>}} : () -> ()'
    attrs = [next(iter(parse_string(t).ops)) for t in (constant, entry)]
    for attr in (attrs[0].properties["value"], attrs[1].attributes["v"]):
        assert [-v for v in attr.get_values()] == bits  # type: ignore[attr-defined]


@pytest.mark.parametrize("hex_", ["0x0509", "0x01", "0xZZ", "05"])
def test_i1_hexadecimal_of_the_wrong_size_is_an_error(hex_: str) -> None:
    with pytest.raises(DhirError, match="(?i)1:26: .*hex"):
        parse_string(f'%x = arith.constant dense<"{hex_}"> : tensor<150xi1>')


@pytest.mark.parametrize("text", ["initialisé", "a\tb✓", "日本"])
def test_non_ascii_strings_come_back_as_strings(text: str) -> None:
    """The printer writes non-ASCII characters as byte escapes, as MLIR's does; xDSL 0.74
    read them back as a bytes attribute, so a task named "initialisé" lost its name."""
    source = f'"test.op"() {{note = "{text.replace(chr(9), chr(92) + "t")}"}} : () -> ()'
    printed = print_module(parse_string(source))
    assert "\\" in printed  # written with escapes
    again = parse_string(printed)
    assert next(iter(again.ops)).attributes["note"] == StringAttr(text)
    assert print_module(again) == printed


def test_a_string_of_bytes_that_are_not_utf8_stays_bytes() -> None:
    module = parse_string('"test.op"() {blob = "\\FF\\00"} : () -> ()')
    assert next(iter(module.ops)).attributes["blob"] == BytesAttr(b"\xff\x00")


def test_a_while_loop_printed_with_locations_reads_back() -> None:
    """scf.while wrote its location before its regions, so the tensor entry path (which
    keeps locations through mlir-opt) failed on any program with a while loop."""
    text = """func.func @f(%c0: index) -> index {
  %n = scf.while (%i = %c0) : (index) -> index {
    %go = arith.cmpi slt, %i, %c0 : index
    scf.condition(%go) %i : index
  } do {
  ^bb0(%j: index):
    scf.yield %j : index
  }
  return %n : index
}"""
    printed = print_module(parse_string(text, "w.mlir"), debuginfo=True)
    assert 'loc("w.mlir":2:8)' in printed
    again = parse_string(printed)
    assert print_module(again) == print_module(parse_string(text))


def _bits_as_floats(words: np.ndarray, kind: type) -> list[float]:
    return [float(x) for x in words.view(kind)]


def test_float_literals_are_written_as_xdsls_print_float_writes_them() -> None:
    """`float_text` writes f32 and f64 literals without xDSL's pack and unpack (a sixth
    of printing 10,000 tasks with float constants), the same digits; what xDSL writes in
    hexadecimal, NaN and infinities are left to it."""
    rng = np.random.default_rng(27)
    cases: list[tuple[float, Attribute]] = []
    for kind, width, words in ((f32, np.float32, np.uint32), (f64, np.float64, np.uint64)):
        bits = rng.integers(0, np.iinfo(words).max, 3000, dtype=words, endpoint=True)
        values = _bits_as_floats(bits, width)
        values += [0.0, -0.0, 0.5, 2.5, 0.1, 1e-45, 3.4028234663852886e38, 1e300, 5e-324]
        values += [float(k) + 0.5 for k in range(200)] + [float("nan"), float("inf")]
        cases += [(value, kind) for value in values if kind is f64 or abs(value) < 3.5e38]
    written = 0
    for value, kind in cases:
        out = StringIO()
        Printer(stream=out).print_float(value, kind)  # pyright: ignore[reportArgumentType]
        text = float_text(value, kind)
        assert text in (None, out.getvalue()), (value, kind)
        written += text is not None
    assert written > 0.9 * len(cases)
    assert float_text(float("nan"), f32) is None
    assert float_text(1.0, i32) is None
