"""Errors that point at the user's source: `file:line:col: error: message`.

Every error dhir reports for bad input is a `DhirError`; the command-line tools print
it and exit non-zero, so users never see a Python traceback for their mistakes.
"""

import io
import json
import os
import re
import stat
import sys
import tomllib
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from xdsl.dialects.builtin import LocationAttr
    from xdsl.ir import Operation, SSAValue

# The most characters of a source line an error quotes (a line may be megabytes long).
_EXCERPT = 160


def as_written(value: object) -> str:
    """A value read from a JSON or TOML file, spelt as such a file spells it (true, null,
    "text", [1, 2]) in a message about it, not as Python prints it (True, None, 'text')."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # not a JSON value (a TOML date): Python's words
        return repr(value)


# xDSL's words for an op given a type its definition does not take.
_REFUSED_TYPE = re.compile(
    r"(?:(operand|result) '(\w+)' at position \d+ does not verify:\s*)?Unexpected attribute (.+)"
)


# xDSL's words for an attribute other than the one the op's definition fixes (an
# `array<i32: 0>` where vector.extract takes `array<i64: 0>`), which name neither.
_OTHER_ATTRIBUTE = re.compile(r"Expected attribute (.+) but got (.+)")
_NUMBER_TYPE = re.compile(r"[isu]?i\d+|f\d+|bf16|tf32|index")


def refused_type_message(op_name: str, message: str, other_op: str | None = None) -> str:
    """`message`, xDSL's for an op given a type it does not take ("Unexpected attribute
    f32"), in the user's terms: the op, the type, what to check; `other_op`: an op that
    takes that type, to suggest. Any other message is returned as it is."""
    other = _OTHER_ATTRIBUTE.fullmatch(message.strip())
    if other is not None:
        return _other_attribute(op_name, *other.groups())
    match = _REFUSED_TYPE.fullmatch(message.strip())
    if match is None:
        return message
    role, name, type_text = match.groups()
    where = f" as its {role} '{name}'" if role else ""
    hint = f" (for {type_text}, {other_op}?)" if other_op else ""
    return (
        f"'{op_name}' does not take {type_text}{where}; check the types written after ':' "
        f"against the op's definition{hint}"
    )


def _other_attribute(op_name: str, wanted: str, got: str) -> str:
    """What to write in `op_name`, given `got` where it takes `wanted`."""
    said = f"'{op_name}' takes {wanted} in an attribute where this one has {got}"
    if _NUMBER_TYPE.fullmatch(wanted) and _NUMBER_TYPE.fullmatch(got):
        return (
            f"{said}: write its numbers as {wanted} (`array<{wanted}: ...>`, "
            f"`N : {wanted}`) in the op's properties or attributes"
        )
    return f"{said}: write {wanted} there"


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def loc_of(op: "Operation") -> SourceLoc | None:
    """The source location of `op`, or of its nearest located ancestor."""
    current: Operation | None = op
    while current is not None:
        loc = location_from_attr(current.location)
        if loc is not None:
            return loc
        current = current.parent_op()
    return None


def location_from_attr(attr: "LocationAttr") -> SourceLoc | None:
    from xdsl.dialects.builtin import FileLineColLoc

    if isinstance(attr, FileLineColLoc):
        return SourceLoc(attr.filename.data, attr.line.data, attr.column.data)
    return None


# SSA names as written where xDSL keeps less: it drops a `_N` suffix from a name (%view_1
# is %view), so an error named %view_0 and %view_1 "%view and %view".
_WRITTEN: "weakref.WeakKeyDictionary[SSAValue, str]" = weakref.WeakKeyDictionary()


def remember_written_name(value: "SSAValue", name: str) -> None:
    """`value` was written %`name` (the parser tells, where xDSL's name_hint differs)."""
    _WRITTEN[value] = name


def value_name(value: "SSAValue", otherwise: str = "a value") -> str:
    """`value` as an error names it: %name as written in the source, else `otherwise`."""
    name = _WRITTEN.get(value, value.name_hint)
    return f"%{name}" if name else otherwise


def value_names(
    first: "SSAValue", second: "SSAValue", otherwise: str = "a value"
) -> tuple[str, str]:
    """Two values as one error names them, told apart by where each is defined when
    their names are alike (%v of one task and %v of another)."""
    names = (value_name(first, otherwise), value_name(second, otherwise))
    if names[0] != names[1]:
        return names
    return (_defined_at(first, names[0]), _defined_at(second, names[1]))


def _defined_at(value: "SSAValue", name: str) -> str:
    from xdsl.ir import Block, Operation

    owner = value.owner
    op = owner if isinstance(owner, Operation) else owner.parent_op()
    if isinstance(owner, Block) and op is not None:
        what = f"an argument of the block of '{op.name}'"
    else:
        what = None
    loc = loc_of(op) if op is not None else None
    if loc is None:
        return name
    where = f"line {loc.line}:{loc.col}" if what is None else f"{what} at line {loc.line}:{loc.col}"
    return f"{name} ({where})"


@dataclass
class Diagnostic:
    message: str
    loc: SourceLoc | None = None
    severity: str = "error"
    notes: list["Diagnostic"] = field(default_factory=list)

    def render(self, sources: Mapping[str, str] | None = None) -> str:
        head = f"{self.severity}: {self.message}"
        if self.loc is None:
            lines = [head]
        else:
            lines = [f"{self.loc}: {head}", *_source_context(self.loc, sources)]
        for note in self.notes:
            lines.append(note.render(sources))
        return "\n".join(lines)


def _source_context(loc: SourceLoc, sources: Mapping[str, str] | None) -> list[str]:
    text = None if sources is None else sources.get(loc.file)
    if text is None:
        return []
    source_lines = text.splitlines()
    if not 0 < loc.line <= len(source_lines):
        return []
    line = source_lines[loc.line - 1]
    column = loc.col - 1
    if len(line) > _EXCERPT:  # a window of the line around the column, marked as cut
        start = max(0, min(column - _EXCERPT // 2, len(line) - _EXCERPT))
        end = start + _EXCERPT
        head = "..." if start else ""
        line = head + line[start:end] + ("..." if end < len(line) else "")
        column = column - start + len(head)
    # The line's own tabs before the column, so that the caret lines up where they are wide.
    indent = "".join("\t" if c == "\t" else " " for c in line[:column])
    return [line, indent + "^"]


# The text of the files parsed lately, by name (`remember_source`): an error a pass raises
# long after parsing quotes its line as the verifier's do. A few only, newest last.
_PARSED: dict[str, str] = {}
_PARSED_KEPT = 8


def remember_source(name: str, text: str) -> None:
    """Keep `text`, just parsed as the file `name`, for the errors raised about it later."""
    _PARSED.pop(name, None)
    _PARSED[name] = text
    while len(_PARSED) > _PARSED_KEPT:
        del _PARSED[next(iter(_PARSED))]


class DhirError(Exception):
    """One or more diagnostics about the user's input; a line of a file parsed lately
    (`remember_source`) is quoted under the diagnostic at it, unless `sources` has the file."""

    def __init__(self, diagnostics: Iterable[Diagnostic], sources: Mapping[str, str] | None = None):
        self.diagnostics = list(diagnostics)
        self.sources = dict(sources or {})
        for diagnostic in self.diagnostics:
            for loc in (diagnostic.loc, *(note.loc for note in diagnostic.notes)):
                if loc is not None and loc.file not in self.sources and loc.file in _PARSED:
                    self.sources[loc.file] = _PARSED[loc.file]
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render(self.sources) for d in self.diagnostics)


class UsageError(DhirError):
    """Options that conflict, or one given without another it needs: a mistake in how
    dhir was called, not in the program or its inputs (the commands exit with status 2,
    a malformed command line, as for options argparse refuses)."""


def error_at(op: "Operation", message: str) -> DhirError:
    return DhirError([Diagnostic(message, loc_of(op))])


_warnings: ContextVar[list["Diagnostic"] | None] = ContextVar("dhir_warnings", default=None)


def warn(diagnostic: Diagnostic) -> None:
    """Report a warning: on standard error, or to the innermost `collected_warnings`."""
    collected = _warnings.get()
    if collected is None:
        print(diagnostic.render(), file=sys.stderr)
    else:
        collected.append(diagnostic)


@contextmanager
def collected_warnings() -> Iterator[list[Diagnostic]]:
    """Within: warnings are kept in the list given, not printed (dhir-opt
    --verify-diagnostics checks them against expected-warning annotations)."""
    collected: list[Diagnostic] = []
    token = _warnings.set(collected)
    try:
        yield collected
    finally:
        _warnings.reset(token)


# What a file other than a regular one (a device, a pipe, a FIFO, a socket) may give before
# dhir takes it for one that never ends (/dev/zero, `<(yes)`): reading it whole hung dhir.
STREAM_LIMIT = 64 << 20


def read_file(path: "str | os.PathLike[str]") -> bytes:
    """The bytes of the file `path` (an OSError as `open` raises it); a DhirError for one
    that is not a regular file and does not end."""
    with open(path, "rb") as file:
        return read_all(file, os.fspath(path))


def read_all(file: BinaryIO, name: str) -> bytes:
    """What `file` (called `name`) holds; a DhirError where it is not a regular file
    (a device, a pipe or a terminal: read as it comes) and gives more than STREAM_LIMIT
    bytes."""
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (OSError, ValueError):  # no descriptor: an in-memory stream, which ends
        return file.read()
    if stat.S_ISREG(mode):
        return file.read()
    data = file.read(STREAM_LIMIT + 1)
    if len(data) > STREAM_LIMIT:
        what = "a device" if stat.S_ISCHR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "a file"
        message = (
            f"{name} is {what} that does not end (it gave more than {STREAM_LIMIT >> 20} "
            "MiB); name a file"
        )
        raise DhirError([Diagnostic(message)])
    return data


def decode_source(data: bytes, name: str, bom: bool = False) -> str:
    """`data`, the bytes of the file `name`, as text: UTF-8, as MLIR reads it, line ends
    as text-mode reading gives them (\\r\\n and \\r become \\n). UTF-16 and bytes that
    are not UTF-8 are errors at their place, as a leading byte order mark is in MLIR
    (mlir-opt refuses it: "unexpected character" at 1:1); with `bom` (TOML and JSON files,
    which Windows editors start with one) it is dropped."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:2]:
        why = "UTF-16 text; dhir reads UTF-8: convert it (iconv -f UTF-16 -t UTF-8)"
        raise DhirError([Diagnostic(why, SourceLoc(name, 1, 1))])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        if data.startswith(b"\x7fELF") or b"\x00" in data:
            raise _binary(data, name) from None
        raise _not_utf8(data, error, name) from None
    text = io.StringIO(text, newline=None).read()
    if bom:
        return text.removeprefix(BOM)
    if text.startswith(BOM):
        raise bom_error(text, name)
    return text


# The byte order mark some editors start UTF-8 files with, which MLIR does not read.
BOM = "\ufeff"


def bom_error(text: str, name: str, line: int = 1) -> DhirError:
    """The error for MLIR text `text` (from line `line` of `name`) that starts with a BOM."""
    why = (
        "a byte order mark (U+FEFF) starts the text, which MLIR does not read (mlir-opt: "
        '"unexpected character"); save the file as UTF-8 without one'
    )
    shown = "\n" * (line - 1) + text.removeprefix(BOM)
    return DhirError([Diagnostic(why, SourceLoc(name, line, 1))], {name: shown})


def _binary(data: bytes, name: str) -> DhirError:
    """The error for a file that is no text at all, with no line quoted: its bytes would
    fill the terminal with noise (a `dhir compile` output given to `dhir compile` again)."""
    what = "an executable (ELF)" if data.startswith(b"\x7fELF") else "a binary file"
    why = f"{what}, not text; dhir reads UTF-8 text (a .mlir program, a TOML or JSON file)"
    return DhirError([Diagnostic(why, SourceLoc(name, 1, 1))])


def _not_utf8(data: bytes, error: UnicodeDecodeError, name: str) -> DhirError:
    """The error for the first byte of `data` that is not UTF-8, at its line and column."""
    before = data[: error.start].decode("utf-8")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    why = f"byte 0x{data[error.start]:02x} is not UTF-8; dhir reads UTF-8 text"
    shown = data.decode("utf-8", errors="replace")
    return DhirError([Diagnostic(why, SourceLoc(name, line, column))], {name: shown})


class _Duplicate(ValueError):
    """A JSON object gives one key twice."""


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Duplicate
    return found


# Said of a file the reader cannot go on in: the errors past this one are not found yet
# (a machine description's are otherwise all reported at once).
READ_NO_FURTHER = "; the file is read no further, so what follows is not checked yet"


def parse_json(text: str, where: str) -> object:
    """`text`, the file `where`, read as JSON; malformed JSON is a DhirError at its line
    and column, and JSON nested too deeply for Python's reader one naming the file. A key
    given twice in one object is an error too (JSON readers keep the last one silently,
    TOML refuses it)."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except _Duplicate:
        raise _duplicate(text, where) from None
    except json.JSONDecodeError as error:
        loc = SourceLoc(where, error.lineno, error.colno)
        why = f"not valid JSON: {error.msg}{READ_NO_FURTHER}"
        raise DhirError([Diagnostic(why, loc)], {where: text}) from None
    except ValueError as error:  # an integer of more digits than Python converts
        raise DhirError([Diagnostic(f"{where} is not valid JSON: {error}")]) from None
    except RecursionError:  # the reader recurses once per level
        raise DhirError([Diagnostic(f"{where}: {_TOO_DEEP}")]) from None


def _duplicate(text: str, where: str) -> DhirError:
    from dhir.ir.file_lines import json_duplicate  # which reads with this module's errors

    found = json_duplicate(text)
    if found is None:  # not found again: cannot happen, but say what is wrong anyway
        return DhirError([Diagnostic(f"{where}: an object gives a key twice; give it once")])
    key, (line, col) = found
    why = f"{json.dumps(key)} is given twice in one object; give it once"
    return DhirError([Diagnostic(why, SourceLoc(where, line, col))], {where: text})


def parse_toml(text: str, where: str) -> object:
    """`text`, the file `where`, read as TOML; errors as `parse_json`'s."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # Python before 3.14 gives the place only in the message: "... (at line 3, column 7)".
        message = str(error)
        found = _TOML_PLACE.search(message)
        if found is None:
            raise DhirError([Diagnostic(f"{where} is not valid TOML: {message}")]) from None
        loc = _toml_place(found, text, where)
        why = f"not valid TOML: {message[: found.start()]}{READ_NO_FURTHER}"
        raise DhirError([Diagnostic(why, loc)], {where: text}) from None
    except RecursionError:
        raise DhirError([Diagnostic(f"{where}: {_TOO_DEEP}")]) from None


_TOML_PLACE = re.compile(
    r" \(at (line (?P<line>\d+), column (?P<col>\d+)|(?P<end>end of document))\)$"
)


def _toml_place(found: re.Match[str], text: str, where: str) -> SourceLoc:
    """Where a TOML error `found` in its message lies; "end of document" is after the
    last character, as a file cut short is shown."""
    if found["end"] is None:
        return SourceLoc(where, int(found["line"]), int(found["col"]))
    lines = text.splitlines() or [""]
    return SourceLoc(where, len(lines), len(lines[-1]) + 1)


_TOO_DEEP = "its arrays and tables are nested too deeply to read (Python's recursion limit)"


# `DHIR_REPORT=all`: the reports of `--timing` and `dhir schedule` (what dhir-split and the
# optimizer did) list every task and nest, not one line per reason that many share.
REPORT_ENV = "DHIR_REPORT"


def report_everything() -> bool:
    """Whether reports list every task and nest (`DHIR_REPORT=all`)."""
    return os.environ.get(REPORT_ENV, "") == "all"
