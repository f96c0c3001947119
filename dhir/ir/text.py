"""MLIR text in and out: parse (with source locations) and verify, print, and a round
trip through mlir-opt."""

import math
import os
import struct
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    i1,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue, TypeAttribute
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, SymbolTable
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Span

from dhir.context import make_context
from dhir.dialects import arith, func, memref, vector
from dhir.install import llvm_hint
from dhir.ir.collections import fewer_collections
from dhir.ir.diagnostics import (
    BOM,
    DhirError,
    Diagnostic,
    SourceLoc,
    bom_error,
    decode_source,
    read_file,
    remember_source,
)
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
    if not isinstance(text, str):
        hint = "; decode bytes first (text.decode())" if isinstance(text, bytes) else ""
        raise DhirError(
            [Diagnostic(f"parse_string takes MLIR text (str), not {type(text).__name__}{hint}")]
        )
    check_flag(verify, "verify")
    _check_source_keywords(name, ctx, line_offset)
    if text.startswith(BOM):
        raise bom_error(text, name, line_offset + 1)
    ctx = ctx or make_context()
    # Diagnostics quote source lines by their line number in the whole file.
    sources = {name: "\n" * line_offset + text}
    if name != "<string>":  # a name given for the text, not one that any text may share
        remember_source(name, sources[name])
    parser: LocatedParser | None = None
    try:
        # Inside: the parser reads the first token as it starts, and it may be bad.
        parser = LocatedParser(ctx, text, name, line_offset)
        module = parser.parse_module()
    except ParseError as error:
        raise DhirError([_parse_diagnostic(error, line_offset)], sources) from None
    except NotImplementedError as error:
        # What xDSL cannot represent yet (a semi-affine map, s0 * s1) is no ParseError.
        raise DhirError([_unsupported(parser, str(error), line_offset)], sources) from None
    except RecursionError:
        # xDSL's parser recurses once per nested region, attribute or type.
        why = "nested too deeply for dhir's parser (Python's recursion limit)"
        raise DhirError([Diagnostic(why, _here(parser, line_offset))], sources) from None
    if verify:
        try:
            verify_module(module, parser.task_bodies.cloned)
        except DhirError as error:
            raise DhirError(error.diagnostics, sources) from None
    return module


def _check_source_keywords(name: object, ctx: object, line_offset: object) -> None:
    """A DhirError for a keyword of `parse_string` of another type, which reached the
    parser as a bare AttributeError or TypeError (`name=5`, `ctx=5`, `line_offset="3"`),
    and for a negative `line_offset`, which numbered lines from 0 or below."""
    if not isinstance(name, str):
        message = f"name (the file messages name) takes a str, not {type(name).__name__}"
        raise DhirError([Diagnostic(message)])
    if ctx is not None and not isinstance(ctx, Context):
        message = f"ctx takes an xdsl Context (or None for dhir's), not {type(ctx).__name__}"
        raise DhirError([Diagnostic(message)])
    if isinstance(line_offset, bool) or not isinstance(line_offset, int) or line_offset < 0:
        message = (
            "line_offset takes a count of lines before the text (an int, 0 or more), "
            f"got {line_offset!r}"
        )
        raise DhirError([Diagnostic(message)])


def parse_file(
    path: str | os.PathLike[str], *, ctx: Context | None = None, verify: bool = True
) -> ModuleOp:
    """Parse (and by default verify, as `parse_string`) the MLIR file at `path`; raise
    DhirError on bad input."""
    if not isinstance(path, str | os.PathLike):
        hint = "; decode bytes first (path.decode())" if isinstance(path, bytes) else ""
        raise DhirError(
            [
                Diagnostic(
                    f"parse_file takes a path (str or os.PathLike), not {type(path).__name__}{hint}"
                )
            ]
        )
    if not os.fspath(path):  # Path("") is the current folder: "cannot read ."
        raise DhirError([Diagnostic("parse_file was given an empty path; name a .mlir file")])
    path = Path(path)
    try:
        data = read_file(path)
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot read {path}: {error.strerror}")]) from None
    return parse_string(decode_source(data, str(path)), str(path), ctx=ctx, verify=verify)


def _parse_diagnostic(error: ParseError, line_offset: int) -> Diagnostic:
    loc = error.span.get_location()
    message = error.msg
    notes: list[Diagnostic] = []
    if not message.strip() or message.startswith(" in "):
        # xDSL names only where it was (" in block definition") when the input ends.
        ended = not error.span.input.content[error.span.start :].strip()
        what = "the input ends before the '}' that closes a region" if ended else "unexpected text"
        message = what + message
        content = error.span.input.content
        if ended and isinstance(content, str):
            note = _unclosed_brace(content, loc.file, line_offset)
            notes = [note] if note is not None else []
    return Diagnostic(message, SourceLoc(loc.file, loc.line + line_offset, loc.col), notes=notes)


def _unclosed_brace(text: str, file: str, line_offset: int) -> Diagnostic | None:
    """A note at the '{' of `text` that most likely lacks its '}': the first whose '}' by
    count starts a line indented unlike the '{'s line (that '}' closes an outer region),
    else the outermost left open. Braces in strings and `//` comments do not count."""
    lines = text.split("\n")
    open_: list[tuple[int, int]] = []  # (line, column) from 0
    for number, line in enumerate(lines):
        for column in _brace_columns(line):
            if line[column] == "{":
                open_.append((number, column))
                continue
            if not open_:
                return None
            opened = open_.pop()
            if line[:column].strip() or _indent(lines[opened[0]]) == column:
                continue
            return _brace_note(
                opened,
                file,
                line_offset,
                f"looks unclosed: the '}}' at {number + 1 + line_offset}:{column + 1} that "
                "closes it by count is indented as an outer line; add its '}' where its "
                "region ends",
            )
    if not open_:
        return None
    return _brace_note(open_[0], file, line_offset, "is never closed; add its '}'")


def _brace_columns(line: str) -> Iterator[int]:
    """The columns of `line`'s braces outside strings and comments."""
    quoted = escaped = False
    for column, char in enumerate(line):
        if escaped:
            escaped = False
        elif quoted:
            escaped, quoted = char == "\\", char != '"'
        elif char == '"':
            quoted = True
        elif line.startswith("//", column):
            return
        elif char in "{}":
            yield column


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _brace_note(at: tuple[int, int], file: str, line_offset: int, what: str) -> Diagnostic:
    place = SourceLoc(file, at[0] + 1 + line_offset, at[1] + 1)
    return Diagnostic(f"this '{{' {what}", place, severity="note")


def _here(parser: LocatedParser | None, line_offset: int) -> SourceLoc | None:
    """Where `parser` stopped."""
    if parser is None:
        return None
    loc = Span(parser.pos, parser.pos, parser.lexer.input).get_location()
    return SourceLoc(loc.file, loc.line + line_offset, loc.col)


def _unsupported(parser: LocatedParser | None, why: str, line_offset: int) -> Diagnostic:
    where = _here(parser, line_offset)
    hint = " (a product of two symbols as arith.muli of the values)" if "semi-affine" in why else ""
    return Diagnostic(
        f"xDSL, which dhir reads MLIR with, cannot represent this yet ({why}); "
        f"write it another way{hint}",
        where,
    )


# A call's callee, operand types and result type (None: it has none).
_CallKey = tuple[Attribute, tuple[Attribute, ...], Attribute | None]


@dataclass(eq=False, repr=False)
class _Printer(Printer):
    """xDSL's printer, with shorter ways to the same text: it writes text without line
    breaks straight to the stream (its own print_string calls print() for every token),
    prints each type once, and prints the ops most of a lowered schedule is made of
    (constants, loads, stores, float arithmetic, calls) in their plain form in one
    write, without going through their declarative formats' machinery; both matter for
    large schedules (docs/performance.md). A block's ops are told terminators by their
    class once each, and a new line is written in one write."""

    _types: dict[TypeAttribute, str] = field(default_factory=dict[TypeAttribute, str], init=False)
    # The same, by the type object's identity, which keeps the object: hashing a type
    # hashes its parameters, all the way down, on every lookup (a memref type's shape,
    # element type and layout), and most types an op prints are objects met before.
    _type_ids: dict[int, tuple[Attribute, str]] = field(
        default_factory=dict[int, tuple[Attribute, str]], init=False
    )
    # Per op class: whether it is a terminator (`has_trait` is a class method in xDSL
    # 0.74, so the answer is the class's; this printer lives for one print).
    _terminators: dict[type[Operation], bool] = field(
        default_factory=dict[type[Operation], bool], init=False
    )
    # Per callee and types: a call's callee and type as they print.
    _calls: dict[_CallKey, tuple[str, str]] = field(
        default_factory=dict[_CallKey, tuple[str, str]], init=False
    )

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        if "\n" in text or self.stream is None:
            super().print_string(text, indent=indent)
            return
        self._current_column += len(text)
        self.stream.write(text)

    def _print_new_line(self, indent: int | None = None, print_message: bool = True) -> None:
        if self.stream is None or (print_message and self._next_line_callback):
            super()._print_new_line(indent, print_message)
            return
        spaces = (self._indent if indent is None else indent) * self.indent_num_spaces
        self.stream.write("\n" + " " * spaces)
        self._current_line += 1
        self._current_column = spaces

    def print_block(
        self, block: Block, print_block_args: bool = True, print_block_terminator: bool = True
    ) -> None:
        """xDSL's; without a label or the terminator, its loop with the terminator told
        by the op's class (xDSL asks each op: a tenth of printing a lowered schedule)."""
        if print_block_args or print_block_terminator:
            super().print_block(block, print_block_args, print_block_terminator)
            return
        terminators = self._terminators
        with self.indented():
            for op in block.ops:
                kind = type(op)
                skip = terminators.get(kind)
                if skip is None:
                    skip = kind.has_trait(IsTerminator, value_if_unregistered=False)
                    terminators[kind] = skip
                if not skip:
                    self._print_new_line()
                    self.print_op(op)

    def print_attribute(self, attribute: Attribute) -> None:
        if isinstance(attribute, TypeAttribute):
            self.print_string(self.type_text(attribute))
        elif isinstance(attribute, DenseIntOrFPElementsAttr):
            memref.print_elements(attribute, self)  # i1 as MLIR reads it
            self.print_string(f" : {self.type_text(attribute.get_type())}")
        else:
            super().print_attribute(attribute)

    def type_text(self, type_: Attribute) -> str:
        """`type_` as it prints: a type prints the same wherever it stands, on one line,
        so each is printed once."""
        seen = self._type_ids.get(id(type_))
        if seen is not None and seen[0] is type_:
            return seen[1]
        text = self._types.get(type_) if isinstance(type_, TypeAttribute) else None
        if text is None:
            out = StringIO()
            Printer(stream=out).print_attribute(type_)
            text = out.getvalue()
            if isinstance(type_, TypeAttribute):
                self._types[type_] = text
        if isinstance(type_, TypeAttribute):
            self._type_ids[id(type_)] = (type_, text)
        return text

    def call_text(
        self, callee: Attribute, inputs: tuple[Attribute, ...], output: Attribute | None
    ) -> tuple[str, str]:
        """A call's callee as it prints, and its `(inputs) -> output` type: printed once
        for each callee and types (a lowered schedule calls the runtime twice per task)."""
        key: _CallKey = (callee, inputs, output)
        found = self._calls.get(key)
        if found is None:
            out = StringIO()
            Printer(stream=out).print_attribute(callee)
            types = ", ".join(self.type_text(type_) for type_ in inputs)
            result = "()" if output is None else self.type_text(output)
            found = self._calls[key] = (out.getvalue(), f"({types}) -> {result}")
        return found

    def names(self, values: Sequence[SSAValue]) -> list[str] | None:
        """`%name` of each of `values`, when all have been printed before (as an op's
        operands mostly have); else None."""
        known = self._ssa_values
        names = [known.get(value) for value in values]
        return None if None in names else [f"%{name}" for name in names]

    def print_op(self, op: Operation) -> None:
        if isinstance(op, func.FuncOp) and op.is_declaration and op.arg_attrs is not None:
            self._print_generic(op)
            return
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

    def _print_generic(self, op: Operation) -> None:
        """`op` in the generic form: xDSL prints a declaration's argument attributes
        (dhir-c-abi's `llvm.signext`) only there."""
        generic = self.print_generic_format
        self.print_generic_format = True
        try:
            super().print_op(op)
        finally:
            self.print_generic_format = generic


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
    if isinstance(value, IntegerAttr) and value.type != i1:  # i1 prints true or false
        text = f"{value.value.data} : {printer.type_text(value.type)}"
        printer.print_string(f" = arith.constant {text}")
        return True
    number = float_text(value.value.data, value.type) if isinstance(value, FloatAttr) else None
    if number is not None:
        printer.print_string(f" = arith.constant {number} : {printer.type_text(value.type)}")
        return True
    printer.print_string(" = arith.constant ")
    printer.print_attribute(value)
    return True


# struct's formats of the float types whose literals `float_text` writes.
_FLOAT_FORMATS: dict[type[Attribute], str] = {Float32Type: "<f", Float64Type: "<d"}


def float_text(value: float, kind: Attribute) -> str | None:
    """A finite f32 or f64 literal as xDSL's `Printer.print_float` writes it, in
    decimal; None for what it writes otherwise (hexadecimal, NaN, infinities, other
    types), which is left to it. Its own way (a pack and an unpack through the type's
    generic methods) took a sixth of printing 10,000 tasks of float literals."""
    layout = _FLOAT_FORMATS.get(type(kind))
    if layout is None or math.isnan(value) or math.isinf(value):
        return None
    text = f"{value:.5e}"
    at = text.find("e")
    text = text[:at] + "0" + text[at:]  # 5.000000e-01: six digits, as MLIR writes
    try:
        if struct.unpack(layout, struct.pack(layout, float(text)))[0] == value:
            return text
    except (OverflowError, struct.error):
        return None  # xDSL's pack raises: left to it, to say so
    # Else the digits that give the value back: 9 for f32, 17 for f64.
    text = f"{value:.9g}" if layout == "<f" else f"{value:.17g}"
    return text if "." in text else None


def _print_load(printer: _Printer, op: Operation) -> bool:
    names = printer.names(op.operands)
    if op.properties or names is None:
        return False
    printer.print_ssa_value(op.results[0])
    printer.print_string(f" = memref.load {_access(printer, op.operands[0], names)}")
    return True


def _print_store(printer: _Printer, op: Operation) -> bool:
    names = printer.names(op.operands)
    if op.properties or names is None:
        return False
    printer.print_string(f"memref.store {names[0]}, {_access(printer, op.operands[1], names[1:])}")
    return True


def _access(printer: _Printer, memref: SSAValue, names: Sequence[str]) -> str:
    """`%m[%i, %j] : type`, `names` the memref's and the indices'."""
    return f"{names[0]}[{', '.join(names[1:])}] : {printer.type_text(memref.type)}"


def _print_float_binary(printer: _Printer, op: Operation) -> bool:
    return _print_binary(printer, op, _NO_FASTMATH)


def _print_int_binary(printer: _Printer, op: Operation) -> bool:
    return _print_binary(printer, op, _NO_OVERFLOW)


def _print_binary(printer: _Printer, op: Operation, unflagged: Mapping[str, Attribute]) -> bool:
    """`%r = op %a, %b : type` where `op` carries no properties but `unflagged`."""
    names = printer.names(op.operands)
    if (op.properties and op.properties != unflagged) or names is None:
        return False
    result = op.results[0]
    printer.print_ssa_value(result)
    text = f"{names[0]}, {names[1]} : {printer.type_text(result.type)}"
    printer.print_string(f" = {op.name} {text}")
    return True


def _print_call(printer: _Printer, op: Operation) -> bool:
    results, operands = op.results, op.operands
    names = printer.names(operands)
    if len(op.properties) != 1 or len(results) > 1 or names is None:
        return False
    if results and isinstance(results[0].type, FunctionType):
        return False  # printed in parentheses
    if results:
        printer.print_ssa_value(results[0])
        printer.print_string(" = ")
    callee, signature = printer.call_text(
        op.properties["callee"],
        tuple(operand.type for operand in operands),
        results[0].type if results else None,
    )
    printer.print_string(f"func.call {callee}({', '.join(names)}) : {signature}")
    return True


def _print_compare(printer: _Printer, op: Operation) -> bool:
    names = printer.names(op.operands)
    predicate = op.properties.get("predicate")
    if len(op.properties) != 1 or not isinstance(predicate, IntegerAttr) or names is None:
        return False
    number = predicate.value.data
    if not 0 <= number < len(arith.CMPI_COMPARISON_OPERATIONS):
        return False
    how = arith.CMPI_COMPARISON_OPERATIONS[number]
    printer.print_ssa_value(op.results[0])
    text = f"{how}, {names[0]}, {names[1]} : {printer.type_text(op.operands[0].type)}"
    printer.print_string(f" = arith.cmpi {text}")
    return True


def _print_cast(printer: _Printer, op: Operation) -> bool:
    names = printer.names(op.operands)
    if op.properties or names is None:
        return False
    result = op.results[0]
    printer.print_ssa_value(result)
    kinds = f"{printer.type_text(op.operands[0].type)} to {printer.type_text(result.type)}"
    printer.print_string(f" = {op.name} {names[0]} : {kinds}")
    return True


def _print_vector_load(printer: _Printer, op: Operation) -> bool:
    names = printer.names(op.operands)
    if op.properties or names is None:
        return False
    result = op.results[0]
    printer.print_ssa_value(result)
    access = _access(printer, op.operands[0], names)
    printer.print_string(f" = vector.load {access}, {printer.type_text(result.type)}")
    return True


def _print_vector_store(printer: _Printer, op: Operation) -> bool:
    names = printer.names(op.operands)
    if op.properties or names is None:
        return False
    access = _access(printer, op.operands[1], names[1:])
    kind = printer.type_text(op.operands[0].type)
    printer.print_string(f"vector.store {names[0]}, {access}, {kind}")
    return True


_NO_FASTMATH = {"fastmath": arith.FastMathFlagsAttr("none")}
_NO_OVERFLOW = {"overflowFlags": arith.IntegerOverflowAttr("none")}
# arith's binary ops on integers whose format is `$lhs, $rhs : type` (with the overflow
# flags, when there are none).
_INT_BINARIES = (
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.AndIOp,
    arith.OrIOp,
    arith.XOrIOp,
    arith.DivUIOp,
    arith.DivSIOp,
    arith.RemUIOp,
    arith.RemSIOp,
    arith.MaxSIOp,
    arith.MinSIOp,
    arith.MaxUIOp,
    arith.MinUIOp,
    arith.CeilDivSIOp,
    arith.FloorDivSIOp,
)
_PLAIN_FORMS: dict[type[Operation], Callable[[_Printer, Operation], bool]] = {
    arith.ConstantOp: _print_constant,
    memref.LoadOp: _print_load,
    memref.StoreOp: _print_store,
    func.CallOp: _print_call,
    **dict.fromkeys((arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp), _print_float_binary),
    **dict.fromkeys(_INT_BINARIES, _print_int_binary),
    arith.CmpiOp: _print_compare,
    **dict.fromkeys((arith.IndexCastOp, arith.ExtSIOp, arith.ExtUIOp), _print_cast),
    vector.LoadOp: _print_vector_load,
    vector.StoreOp: _print_vector_store,
}


def print_module(module: ModuleOp, *, generic: bool = False, debuginfo: bool = False) -> str:
    check_module(module, "print_module")
    check_flag(generic, "generic")
    check_flag(debuginfo, "debuginfo")
    out = StringIO()
    printer = _Printer(stream=out, print_generic_format=generic, print_debuginfo=debuginfo)
    printer.print_op(module)
    out.write("\n")
    return out.getvalue()


def check_flag(value: object, name: str) -> None:
    """A DhirError unless `value` is a bool: a keyword's "no" or 0 was read as true or
    false by its truth."""
    if not isinstance(value, bool):
        raise DhirError([Diagnostic(f"{name} takes True or False, got {value!r}")])


def check_module(module: object, caller: str) -> None:
    """A DhirError unless `module` is a parsed module: the API's callers get a bare
    AttributeError from deep inside xDSL otherwise."""
    if not isinstance(module, ModuleOp):
        raise DhirError(
            [
                Diagnostic(
                    f"{caller} takes a module (from dhir.parse_file or dhir.parse_string), "
                    f"not {type(module).__name__}"
                )
            ]
        )


def keep_argument_names(source: ModuleOp, made: ModuleOp, function: str) -> None:
    """Give `function`'s arguments in `made` (from mlir-opt, which numbers them) the
    names they have in `source`, in order, so that messages name them as the user did."""
    before, after = _function(source, function), _function(made, function)
    if before is None or after is None:
        return
    for old, new in zip(before.body.blocks[0].args, after.body.blocks[0].args):
        if old.name_hint is not None:
            new.name_hint = old.name_hint


def _function(module: ModuleOp, name: str) -> func.FuncOp | None:
    found = SymbolTable.lookup_symbol(module, name)
    return found if isinstance(found, func.FuncOp) and found.body.blocks else None


def _last_words(stderr: str) -> str:
    """The end of what mlir-opt printed; for a crash, what it said before its stack dump."""
    said, crashed, _ = stderr.strip().partition("Stack dump:")
    lines = said.strip().splitlines()[-20:]
    if crashed:
        lines.append("(mlir-opt-22 crashed; its stack dump is left out)")
    return "\n".join(lines)


def through_mlir_opt(
    module: ModuleOp,
    mlir_opt: str,
    pipeline: str,
    *,
    what: str,
    failed: str,
    locations: bool = False,
    verify: bool = True,
) -> ModuleOp:
    """`module` run through `mlir-opt --pass-pipeline=PIPELINE` and read back (generic
    form; with `locations`, each op's location inline, as xDSL cannot read location
    aliases). Errors say `cannot run MLIR_OPT to WHAT`, with how to reinstall it, and
    `FAILED:` with the last lines mlir-opt printed."""
    flags = ["--mlir-print-debuginfo", "--mlir-print-local-scope"] if locations else []
    try:
        done = subprocess.run(
            [mlir_opt, f"--pass-pipeline={pipeline}", "--mlir-print-op-generic", *flags, "-"],
            input=print_module(module, debuginfo=locations),
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        where = "" if os.sep in mlir_opt else " on PATH"
        missing = f"{mlir_opt} not found{where}, and dhir runs it to {what}; {llvm_hint()}"
        raise DhirError([Diagnostic(missing)]) from None
    except OSError as error:
        cannot = f"cannot run {mlir_opt} to {what}: {error}; {llvm_hint(reinstall=True)}"
        raise DhirError([Diagnostic(cannot)]) from None
    if done.returncode != 0:
        raise DhirError([Diagnostic(f"{failed}:\n{_last_words(done.stderr)}")])
    result = parse_string(done.stdout, f"{MLIR_OPT_TEXT}{what}>", verify=verify)
    _keep_module_attributes(module, result)
    if locations:
        _located_in_the_users_ops(result)
    return result


def _keep_module_attributes(source: ModuleOp, made: ModuleOp) -> None:
    """Give `made` the very attributes of `source` that mlir-opt passed on unchanged: what
    dhir knows of an attribute by its identity (the file a machine description was read
    from, where the user wrote it) is then still known. Read back, a `--system` file's
    CPU clang did not know was an error at `<mlir-opt: partition @main ...>:1:1`."""
    for name, value in source.attributes.items():
        if made.attributes.get(name) == value:
            made.attributes[name] = value


# The name dhir reads mlir-opt's output under: ops located in it were made by mlir-opt.
MLIR_OPT_TEXT = "<mlir-opt: "


def _located_in_the_users_ops(module: ModuleOp) -> None:
    """Ops that mlir-opt made without a location (a linalg op's body, printed in generic
    form) were located in its output, which the user never sees: an interpreter error
    there pointed at `<mlir-opt: bufferize @main>:30:12`. Each takes the location of the
    nearest op around it that has a user's."""
    for op in module.walk():  # outer ops first: a parent's location is settled
        parent = op.parent_op()
        if parent is not None and _in_mlir_opt_text(op) and not _in_mlir_opt_text(parent):
            op.location = parent.location


def _in_mlir_opt_text(op: Operation) -> bool:
    loc = op.location
    return isinstance(loc, FileLineColLoc) and loc.filename.data.startswith(MLIR_OPT_TEXT)
