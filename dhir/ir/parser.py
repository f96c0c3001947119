"""xDSL's parser, plus a source location on every operation it reads.

xDSL keeps only explicit `loc(...)` annotations; dhir's diagnostics need the
position of every op, so this parser records it as a `FileLineColLoc`.
"""

import math
import re
import struct
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyDenseElement,
    AnyFloat,
    AnyVectorType,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FileLineColLoc,
    Float80Type,
    Float128Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    RankedStructure,
    StringAttr,
    UnknownLoc,
    i1,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.parser import AttrParser, Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Position, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, StringLiteral

from dhir.dialects.arith import other_kind
from dhir.dialects.mlir22_gaps import unknown_op_message
from dhir.ir.by_identity import ByIdentity
from dhir.ir.diagnostics import refused_type_message, remember_written_name
from dhir.ir.region_cache import TaskBodyCache

# xDSL 0.74's string-literal pattern nests a `+` inside a `*`, so an unterminated string
# followed by a long line backtracks exponentially: parsing hung. The same language,
# one character or escape at a time, matches in linear time.
MLIRLexer._unescaped_characters_regex = re.compile(  # pyright: ignore[reportPrivateUsage]
    r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
)

# Where each entry of an op's `attributes {...}` was written, by the entry's value (an
# attribute has no location of its own; a pass that clones the op keeps the value, so
# this survives it): a machine description in module attributes is reported at its line.
_ENTRY_LOCATIONS = ByIdentity[FileLineColLoc]()


def entry_location(value: Attribute) -> FileLineColLoc | None:
    """Where `value`, the value of an entry of an op's `attributes {...}`, was written."""
    return _ENTRY_LOCATIONS.get(value)


_lex_string = MLIRLexer._lex_string_literal  # pyright: ignore[reportPrivateUsage]


def _lex_utf8_string(self: MLIRLexer, start_pos: Position) -> MLIRToken:
    """xDSL 0.74 made a bytes literal of any string with escapes of non-ASCII bytes, also
    valid UTF-8 ones, which its printer (as MLIR's) writes for every non-ASCII character:
    a task's name "é" printed and read back was no longer a string. Such a literal is a
    string, as MLIR reads it."""
    token = _lex_string(self, start_pos)
    if token.kind is MLIRTokenKind.BYTES_LIT:
        try:
            StringLiteral.from_span(token.span).bytes_contents.decode("utf-8")
        except UnicodeDecodeError:
            return token
        return MLIRToken(MLIRTokenKind.STRING_LIT, token.span)
    return token


MLIRLexer._lex_string_literal = _lex_utf8_string  # pyright: ignore[reportPrivateUsage]


def _location(name: StringAttr, line: IntAttr, column: IntAttr) -> FileLineColLoc:
    """FileLineColLoc(name, line, column), without its constructor's checks of the
    parameters' kinds, which these have by their types: every op gets a location, and
    the checks are a visible part of parsing (docs/performance.md). (Parameters by
    name, as xDSL 0.74, which dhir pins, defines them; a test compares with the
    constructor's.)"""
    location = object.__new__(FileLineColLoc)
    object.__setattr__(location, "filename", name)
    object.__setattr__(location, "line", line)
    object.__setattr__(location, "column", column)
    return location


_NEWLINE = re.compile("\n")
_UNSUPPORTED_FLOATS = "f80 and f128 constants are not supported (f16, bf16, f32 and f64 are)"
_T = TypeVar("_T")


class _BitsElement(Parser._TensorLiteralElement):
    """A hexadecimal item of a dense literal: for a float type, the element's bits."""

    def to_type(self, parser: AttrParser, type: Attribute) -> Any:
        if not isinstance(type, AnyFloat):
            return super().to_type(parser, type)  # pyright: ignore[reportArgumentType]
        assert isinstance(self.value, int)
        if self.value >= 1 << (8 * type.compile_time_size):
            parser.raise_error(f"hexadecimal value too large for {type}", self.span)
        raw = self.value.to_bytes(type.compile_time_size, "little")
        return next(type.iter_unpack(raw))


def _readable(message: str) -> str:
    """`message` in the user's terms. Python refuses to read an integer literal of more
    than sys.get_int_max_str_digits() digits (4300: more than any i14000 holds) and
    says to raise that limit in Python, which a user of dhir cannot do."""
    if "limit" in message and "integer string conversion" in message:
        digits = sys.get_int_max_str_digits()
        return f"an integer literal in this op has more than {digits} digits, more than dhir reads"
    return message


# What xDSL says of a number whose type after `:` it refuses (1.5 : i32, 1 : none).
_NUMBER_TYPE_ERRORS = (
    "Floating point value is not valid for integer type.",
    "Invalid type given for integer or float attribute.",
)


class LocatedParser(Parser):
    def __init__(self, ctx: Context, text: str, name: str, line_offset: int = 0) -> None:
        super().__init__(ctx, text, name)
        self._name = StringAttr(name)
        self._line_offset = line_offset
        # Line starts are precomputed: xDSL's Span.get_location rescans the whole
        # prefix of the file, which is quadratic over a large module.
        self._line_starts = [0] + [match.end() for match in _NEWLINE.finditer(text)]
        self.task_bodies = TaskBodyCache()
        self._ints: dict[int, IntAttr] = {}
        # The entries of the `attributes {...}` being read, with where each starts;
        # None inside an entry's value (a nested dictionary's entries are not an op's).
        self._op_entries: list[tuple[int, Attribute]] | None = None
        self._op_names: list[Span] = []

    def parse_operation(self) -> Operation:
        # The op's name is known only once its results are read: one slot per op being
        # read (regions nest ops), which _parse_op_result_list fills in.
        self._op_names.append(self._current_token.span)
        try:
            return self._parse_located_operation()
        finally:
            self._op_names.pop()

    def _register_ssa_definition(self, name: str, values: Sequence[SSAValue], span: Span) -> None:
        super()._register_ssa_definition(name, values, span)
        for value in values:
            if value.name_hint != name:  # xDSL dropped a `_N` suffix: errors say it whole
                remember_written_name(value, name)

    def _parse_op_result_list(self) -> list[tuple[Span, int]]:
        results = super()._parse_op_result_list()
        self._op_names[-1] = self._current_token.span
        return results

    def _parse_located_operation(self) -> Operation:
        """xDSL's, located as MLIR locates ops: at the op's name (for a generic op, the
        quote that opens it), not at its first result."""
        try:
            op = super().parse_operation()
        except (VerifyException, ValueError) as error:
            # xDSL's declarative formats check types while parsing and raise
            # VerifyException (or, building an op's default maps from wrong types,
            # ValueError); for the user it is an error at this op.
            raise ParseError(self._op_names[-1], self._refused(str(error))) from None
        except struct.error as error:
            # xDSL packs an op's integer array as it builds it (`axes = [4294967296]`
            # on a shard op, whose axes are i16): a value its type cannot hold.
            raise ParseError(
                self._op_names[-1], f"a value in this op is out of range for its type ({error})"
            ) from None
        except AssertionError:
            # Some of xDSL's parsers assert what the types allow (linalg.add of index).
            raise ParseError(
                self._op_names[-1],
                "this op cannot be built from these types (xDSL, which dhir reads MLIR with, "
                "refuses them); check them against the op's definition",
            ) from None
        if isinstance(op.location, UnknownLoc):
            op.location = self.location_at(self._op_names[-1].start)
        return op

    def _refused(self, message: str) -> str:
        """xDSL's message for the op being read, in the user's terms."""
        name = self._op_names[-1].text.strip('"')
        return refused_type_message(name, _readable(message), other_kind(name))

    def _get_op_by_name(self, name: str) -> type[Operation]:
        found = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if found is not None:
            return found
        # At the op's name as MLIR puts it (a generic op's opening quote); xDSL points
        # past it.
        span = self._op_names[-1] if self._op_names else self._current_token.span
        start = span.start
        dialect = self.ctx.get_optional_dialect(name.split(".")[0]) if "." in name else None
        known = [op.name for op in dialect.operations] if dialect is not None else []
        self.raise_error(unknown_op_message(name, known), start, span.end)

    def parse_optional_attr_dict_with_keyword(
        self, reserved_attr_names: Iterable[str] = ()
    ) -> DictionaryAttr | None:
        outer, self._op_entries = self._op_entries, []
        try:
            attributes = super().parse_optional_attr_dict_with_keyword(reserved_attr_names)
            for start, value in self._op_entries:
                _ENTRY_LOCATIONS.put(value, self.location_at(start), replace=False)
        finally:
            self._op_entries = outer
        return attributes

    def _parse_attribute_entry(self) -> tuple[str, Attribute]:
        entries, self._op_entries = self._op_entries, None
        start_span = self._current_token.span
        start = start_span.start
        try:
            name, value = super()._parse_attribute_entry()
        except VerifyException as error:
            # An attribute that verifies itself as it is built (a DLTI spec with a key
            # twice): at its entry, not at the op that holds it (a module's first line).
            raise ParseError(start_span, _readable(str(error))) from None
        finally:
            self._op_entries = entries
        if entries is not None:
            entries.append((start, value))
        return name, value

    # xDSL packs float values as it makes their attributes: 1.0e39 : f32 overflows.
    def parse_optional_builtin_int_or_float_attr(self) -> IntegerAttr | FloatAttr | None:
        return self._packed(super().parse_optional_builtin_int_or_float_attr)

    def parse_dense_int_or_fp_elements_attr(
        self, type: RankedStructure[AnyDenseElement] | None
    ) -> DenseIntOrFPElementsAttr:
        bits = self._parse_optional_i1_hex(type)
        if bits is not None:
            return bits
        return self._packed(
            lambda: super(LocatedParser, self).parse_dense_int_or_fp_elements_attr(type)
        )

    def _parse_optional_i1_hex(
        self, type: RankedStructure[AnyDenseElement] | None
    ) -> DenseIntOrFPElementsAttr | None:
        """`dense<"0x...">` of i1 as MLIR reads it (mlir-opt writes one of more than 100
        elements so): bits packed eight to a byte, element k at bit k % 8 of byte k // 8,
        or one byte 0x00 or 0xFF for all alike. xDSL 0.74 read a byte per element (an
        error "Expected 150 elements ... got 19", or another count read silently)."""
        start = self._current_token.span
        self.parse_punctuation("<", " in dense attribute")
        text = self.parse_optional_str_literal()
        if text is None or self.parse_optional_punctuation(">") is None:
            self._resume_from(start.start)
            return None
        if type is None:
            self.parse_punctuation(":", " in dense attribute")
            type = self._parse_dense_literal_type()
        if type.element_type != i1:
            self._resume_from(start.start)
            return None
        count = math.prod(type.get_shape())
        try:
            raw = bytes.fromhex(text[2:]) if text[:2] in ("0x", "0X") else None
        except ValueError:
            raw = None
        if raw is None:
            self.raise_error("Hex string in denseAttr is invalid", start)
        if len(raw) == 1 and raw[0] in (0x00, 0xFF):
            values = [raw[0] & 1] * count
        elif len(raw) == (count + 7) // 8:
            values = [(raw[k // 8] >> (k % 8)) & 1 for k in range(count)]
        else:
            message = f"elements hex data size is invalid for provided type: '{type}'"
            self.raise_error(message, start)
        return DenseIntOrFPElementsAttr(type, BytesAttr(bytes(0xFF * bit for bit in values)))

    # MLIR refuses vectors with a dimension of 0; xDSL 0.74 builds them.
    def _parse_block(self) -> Block:
        """xDSL's, refusing a block defined twice whose first definition a branch named
        before it: xDSL's check missed that case and failed with a KeyError (an
        internal error) popping the forward reference a second time."""
        token = self._current_token
        name = token.text[1:]
        if (
            token.kind == MLIRTokenKind.CARET_IDENT
            and name in self.blocks
            and name not in self.forward_block_references
            and self.blocks[name][1] is None  # else xDSL's own check names both places
        ):
            raise ParseError(token.span, f"redefinition of block '^{name}'")
        return super()._parse_block()

    def _parse_vector_attrs(self) -> AnyVectorType:
        start = self._current_token.span
        vector = super()._parse_vector_attrs()
        if 0 in vector.get_shape():
            raise ParseError(start, "vector types must have positive constant sizes, not 0")
        return vector

    # In a dense literal of floats, a hexadecimal item is the element's bits, as MLIR
    # (and xDSL's printer, for NaN, inf and some large values) writes them; xDSL 0.74
    # read it as an integer and converted it: 0x7FC00000 became 2.14e9, not NaN.
    def _parse_tensor_literal_element(self) -> Parser._TensorLiteralElement:
        element = super()._parse_tensor_literal_element()
        if isinstance(element.value, int) and element.span.text[:2] in ("0x", "0X"):
            return _BitsElement(element.is_negative, element.value, element.span)
        return element

    def _packed(self, parse: Callable[[], _T]) -> _T:
        start = self._current_token.span
        try:
            attr = parse()
        except OverflowError:
            raise ParseError(start, "float constant out of its type's range") from None
        except NotImplementedError:  # xDSL packs no f80 or f128 values
            raise ParseError(start, _UNSUPPORTED_FLOATS) from None
        except ParseError as error:
            raise self._number_type_error(start, error) from None
        # xDSL 0.74 reads f80 and f128 constants but cannot write them (an internal error
        # when the module was printed); dhir computes in no such type.
        kind = getattr(getattr(attr, "type", None), "element_type", getattr(attr, "type", None))
        if isinstance(kind, Float80Type | Float128Type):
            raise ParseError(start, _UNSUPPORTED_FLOATS)
        return attr

    def _number_type_error(self, start: Span, error: ParseError) -> ParseError:
        """`error` at the number `start` begins, in the user's terms, where xDSL refused
        the type written after it: xDSL puts it at the token after the type (the next
        line's op)."""
        if error.msg not in _NUMBER_TYPE_ERRORS:
            return error
        typed = self.lexer.input.content[start.start : error.span.start].rstrip()
        number, _, type_text = typed.partition(":")
        number, type_text = number.strip(), type_text.strip()
        if error.msg == _NUMBER_TYPE_ERRORS[0]:
            why = (
                f"{number} is a float, but {type_text} is an integer type; write an "
                f"integer, or give a float type ({number} : f64)"
            )
        else:
            why = (
                f"{number} cannot be of type {type_text}: a number's type must be an "
                "integer or float type (i32, index, f64)"
            )
        return ParseError(Span(start.start, start.start + len(typed), start.input), why)

    def location_at(self, offset: int) -> FileLineColLoc:
        """The location of a character of the input."""
        line = bisect_right(self._line_starts, offset)
        col = offset - self._line_starts[line - 1] + 1
        return _location(self._name, self._int(line + self._line_offset), self._int(col))

    def offset_of(self, loc: FileLineColLoc) -> int:
        """The inverse of location_at."""
        return self._line_starts[loc.line.data - self._line_offset - 1] + loc.column.data - 1

    def _int(self, value: int) -> IntAttr:
        # Attributes are immutable: sharing them saves building one per op.
        attr = self._ints.get(value)
        if attr is None:
            attr = self._ints[value] = IntAttr(value)
        return attr

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if allow_implicit_module:
            self._parse_leading_definitions()
        if self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError:
            self._raise_at_undefined_use()
            raise

    def _parse_leading_definitions(self) -> None:
        """The attribute and type aliases (`#map = ...`, `!t = ...`) and file metadata
        before the first op. As in MLIR, a file of nothing else is an empty module (xDSL
        refuses it: it wants at least one op)."""
        definitions = {
            MLIRTokenKind.HASH_IDENT: self._parse_alias_def,  # pyright: ignore[reportPrivateUsage]
            MLIRTokenKind.EXCLAMATION_IDENT: self._parse_alias_def,  # pyright: ignore[reportPrivateUsage]
            MLIRTokenKind.FILE_METADATA_BEGIN: self._parse_file_metadata_dictionary,  # pyright: ignore[reportPrivateUsage]
        }
        while (parse := definitions.get(self._current_token.kind)) is not None:
            parse()

    def _raise_at_undefined_use(self) -> None:
        """xDSL reports values never defined at the end of the input; point at the
        first use instead, which is where the mistake is."""
        for name, values in self.forward_ssa_references.items():
            for value in values.values():
                use = next(iter(value.uses), None)
                loc = None if use is None else use.operation.location
                if isinstance(loc, FileLineColLoc):
                    start = _use_offset(self.lexer.input.content, self.offset_of(loc), name)
                    span = Span(start, start + 1, self.lexer.input)
                    raise ParseError(
                        span,
                        f"use of undefined value %{name} (it is never defined, or defined "
                        "inside a region that does not enclose this use)",
                    ) from None


def _use_offset(text: str, op_start: int, name: str) -> int:
    """Where `%name` is first written from the op at `op_start` on (its operands follow its
    name), as MLIR points at the use; the op itself where it is not found there."""
    found = re.compile(re.escape(f"%{name}") + r"(?![\w$.\-])").search(text, op_start)
    return found.start() if found is not None else op_start
