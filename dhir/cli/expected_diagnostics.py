"""`// expected-error {{...}}` annotations, checked as mlir-opt --verify-diagnostics does.

An annotation `expected-<severity>[@<where>] {{text}}` in a comment expects a diagnostic
of that severity (error, warning, note, remark) whose message contains `text`, on the
annotation's own line, or at `@+N`/`@-N` lines from it, `@above` (the nearest line above
that is not an annotation), `@below` (the nearest such line below) or `@unknown` (a
diagnostic without a location). Each annotation matches one diagnostic; a diagnostic no
annotation matches, and an annotation no diagnostic matches, are errors. A comment that
starts `// expected-` but is no such annotation (`expected-eror`, `expected-errors`,
`@+x`) is an error too, at its place: ignored, it would let a test check nothing.
"""

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc

_ANNOTATION = re.compile(
    r"expected-(?P<severity>error|warning|note|remark)"
    r"(?: *@(?P<where>above|below|unknown|[+-][0-9]+))? *\{\{(?P<text>.*)\}\}"
)
# A comment that starts as an annotation does, for finding misspelt ones: any word after
# `expected-`, so that `expected-eror` or `expected-errors` is refused, not ignored (an
# ignored annotation would let a test pass that checks nothing).
_MENTION = re.compile(r"//\s*(expected-[\w-]*)")


@dataclass(frozen=True)
class Expected:
    severity: str
    line: int | None  # None: a diagnostic without a location
    text: str
    at: SourceLoc  # where the annotation is written

    def matches(self, diagnostic: Diagnostic) -> bool:
        if diagnostic.severity != self.severity or self.text not in diagnostic.message:
            return False
        if diagnostic.loc is None:
            return self.line is None
        return diagnostic.loc.file == self.at.file and diagnostic.loc.line == self.line

    def describe(self) -> str:
        return f'expected {self.severity} "{self.text}" was not produced'


def expectations(text: str, name: str, line_offset: int = 0) -> list[Expected]:
    """The annotations in `text` (a file, or one chunk of it starting `line_offset` lines
    into it); lines are those of the whole file. A malformed annotation is a DhirError."""
    found: list[Expected] = []
    below: list[tuple[str, str, SourceLoc]] = []
    last_plain: int | None = None
    for number, line in enumerate(text.splitlines(), start=line_offset + 1):
        annotations = list(_ANNOTATION.finditer(line))
        if (column := _stray_mention(line, annotations)) is not None:
            raise _malformed(SourceLoc(name, number, column))
        if not annotations:
            found.extend(Expected(s, number, t, at) for s, t, at in below)
            below.clear()
            last_plain = number
            continue
        for match in annotations:
            at = SourceLoc(name, number, match.start() + 1)
            severity, where, message = match["severity"], match["where"], match["text"]
            if where == "below":
                below.append((severity, message, at))
                continue
            line_of = _target_line(where, number, last_plain)
            if line_of == 0:
                raise _malformed(at, "@above has no line above it to apply to")
            found.append(Expected(severity, line_of, message, at))
    if below:
        raise _malformed(below[0][2], "@below has no line below it to apply to")
    return found


def _stray_mention(line: str, annotations: list[re.Match[str]]) -> int | None:
    """The column of a comment in `line` that starts as an annotation does but is none of
    `annotations` (a misspelt or malformed one); None if there is no such comment."""
    for mention in _MENTION.finditer(line):
        start = mention.start(1)
        if not any(a.start() <= start < a.end() for a in annotations):
            return start + 1
    return None


def _malformed(at: SourceLoc, why: str = "") -> DhirError:
    usage = (
        "write expected-<error|warning|note|remark>[@+N|@-N|@above|@below|@unknown] "
        "{{message text}}"
    )
    return DhirError([Diagnostic(f"malformed annotation: {why or usage}", at)])


def _target_line(where: str | None, number: int, last_plain: int | None) -> int | None:
    match where:
        case None:
            return number
        case "unknown":
            return None
        case "above":
            return last_plain or 0
        case _:
            return number + int(where)


def flattened(diagnostics: Iterable[Diagnostic]) -> Iterator[Diagnostic]:
    """Each diagnostic, then its notes, as separate diagnostics."""
    for diagnostic in diagnostics:
        yield diagnostic
        yield from flattened(diagnostic.notes)


def mismatches(expected: Sequence[Expected], produced: Iterable[Diagnostic]) -> list[Diagnostic]:
    """What differs between the annotations and the diagnostics produced, as errors:
    each diagnostic no annotation expects, then each annotation no diagnostic matches."""
    unmatched = list(expected)
    problems: list[Diagnostic] = []
    for diagnostic in flattened(produced):
        match = next((e for e in unmatched if e.matches(diagnostic)), None)
        if match is None:
            message = f"unexpected {diagnostic.severity}: {diagnostic.message}"
            problems.append(Diagnostic(message, diagnostic.loc))
        else:
            unmatched.remove(match)
    problems.extend(Diagnostic(e.describe(), e.at) for e in unmatched)
    return problems
