"""MLIR text in and out: parse (with source locations) and verify, print."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, FunctionType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError

from dhir.context import make_context
from dhir.dialects import arith, func, memref
from dhir.ir.collections import fewer_collections
from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc
from dhir.ir.parser import LocatedParser
from dhir.ir.verifier import verify_module


@fewer_collections()
def parse_string(
    text: str,
    name: str = "<string>",
    *,
    ctx: Context | None = None,
    verify: bool = True,
    line_offset: int = 0,
) -> ModuleOp:
    """Parse (and by default verify) MLIR text; raise DhirError on bad input."""
    ctx = ctx or make_context()
    # Diagnostics quote source lines by their line number in the whole file.
    sources = {name: "\n" * line_offset + text}
    try:
        # Inside: the parser reads the first token as it starts, and it may be bad.
        parser = LocatedParser(ctx, text, name, line_offset)
        module = parser.parse_module()
    except ParseError as error:
        raise DhirError([_parse_diagnostic(error, line_offset)], sources) from None
    if verify:
        try:
            verify_module(module, parser.task_bodies.cloned)
        except DhirError as error:
            raise DhirError(error.diagnostics, sources) from None
    return module


def parse_file(path: str | Path, **kwargs: object) -> ModuleOp:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot read {path}: {error.strerror}")]) from None
    return parse_string(text, str(path), **kwargs)  # type: ignore[arg-type]


def _parse_diagnostic(error: ParseError, line_offset: int) -> Diagnostic:
    loc = error.span.get_location()
    return Diagnostic(error.msg, SourceLoc(loc.file, loc.line + line_offset, loc.col))


@dataclass(eq=False, repr=False)
class _Printer(Printer):
    """xDSL's printer, with shorter ways to the same text: it writes text without line
    breaks straight to the stream (its own print_string calls print() for every token),
    and prints the ops most of a lowered schedule is made of (constants, loads, stores,
    float arithmetic) in their plain form without going through their declarative
    formats' machinery (and calls, which tracked tasks are full of); both matter for
    large schedules (docs/performance.md)."""

    _memref_types: dict[MemRefType, str] = field(default_factory=dict[MemRefType, str], init=False)

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        if "\n" in text or self.stream is None:
            super().print_string(text, indent=indent)
            return
        self._current_column += len(text)
        self.stream.write(text)

    def print_attribute(self, attribute: Attribute) -> None:
        # Every load and store prints its memref's type: each is printed once (a type
        # prints the same wherever it stands, on one line).
        if not isinstance(attribute, MemRefType):
            super().print_attribute(attribute)
            return
        text = self._memref_types.get(attribute)
        if text is None:
            out = StringIO()
            Printer(stream=out).print_attribute(attribute)
            text = self._memref_types[attribute] = out.getvalue()
        self.print_string(text)

    def print_op(self, op: Operation) -> None:
        plain = _PLAIN_FORMS.get(type(op))
        if (
            plain is None
            or self.print_generic_format
            or self.print_debuginfo
            or op.attributes
            or op in self.diagnostic.op_messages
            or not plain(self, op)
        ):
            super().print_op(op)


# Each prints its op in the form its declarative format gives it when it has no
# attributes and its properties are the defaults, and returns True; or prints nothing
# and returns False, leaving the op to xDSL.
def _print_constant(printer: _Printer, op: Operation) -> bool:
    value = op.properties.get("value")
    if len(op.properties) != 1 or not isinstance(value, IntegerAttr | FloatAttr):
        return False
    if value.type != op.results[0].type:
        return False
    printer.print_ssa_value(op.results[0])
    printer.print_string(" = arith.constant ")
    printer.print_attribute(value)
    return True


def _print_load(printer: _Printer, op: Operation) -> bool:
    if op.properties:
        return False
    printer.print_ssa_value(op.results[0])
    printer.print_string(" = memref.load ")
    _print_access(printer, op.operands[0], op.operands[1:])
    return True


def _print_store(printer: _Printer, op: Operation) -> bool:
    if op.properties:
        return False
    printer.print_string("memref.store ")
    printer.print_ssa_value(op.operands[0])
    printer.print_string(", ")
    _print_access(printer, op.operands[1], op.operands[2:])
    return True


def _print_access(printer: _Printer, memref: SSAValue, indices: Sequence[SSAValue]) -> None:
    printer.print_ssa_value(memref)
    printer.print_string("[")
    printer.print_list(indices, printer.print_ssa_value)
    printer.print_string("] : ")
    printer.print_attribute(memref.type)


def _print_float_binary(printer: _Printer, op: Operation) -> bool:
    if op.properties and op.properties != _NO_FASTMATH:
        return False
    printer.print_ssa_value(op.results[0])
    printer.print_string(f" = {op.name} ")
    printer.print_ssa_value(op.operands[0])
    printer.print_string(", ")
    printer.print_ssa_value(op.operands[1])
    printer.print_string(" : ")
    printer.print_attribute(op.results[0].type)
    return True


def _print_call(printer: _Printer, op: Operation) -> bool:
    results = op.result_types
    if len(op.properties) != 1 or len(results) > 1:
        return False
    if results and isinstance(results[0], FunctionType):
        return False  # printed in parentheses
    if results:
        printer.print_ssa_value(op.results[0])
        printer.print_string(" = ")
    printer.print_string("func.call ")
    printer.print_attribute(op.properties["callee"])
    printer.print_string("(")
    printer.print_list(op.operands, printer.print_ssa_value)
    printer.print_string(") : (")
    printer.print_list(op.operand_types, printer.print_attribute)
    printer.print_string(") -> ")
    if results:
        printer.print_attribute(results[0])
    else:
        printer.print_string("()")
    return True


_NO_FASTMATH = {"fastmath": arith.FastMathFlagsAttr("none")}
_PLAIN_FORMS: dict[type[Operation], Callable[[_Printer, Operation], bool]] = {
    arith.ConstantOp: _print_constant,
    memref.LoadOp: _print_load,
    memref.StoreOp: _print_store,
    func.CallOp: _print_call,
    **dict.fromkeys((arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp), _print_float_binary),
}


def print_module(module: ModuleOp, *, generic: bool = False, debuginfo: bool = False) -> str:
    out = StringIO()
    printer = _Printer(stream=out, print_generic_format=generic, print_debuginfo=debuginfo)
    printer.print_op(module)
    out.write("\n")
    return out.getvalue()
