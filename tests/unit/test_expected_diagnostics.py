"""dhir-opt --verify-diagnostics: annotations read, and compared with what was produced."""

import pytest

from dhir.cli.expected_diagnostics import Expected, expectations, mismatches
from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc


def error(line: int | None, message: str, severity: str = "error") -> Diagnostic:
    loc = None if line is None else SourceLoc("f.mlir", line, 3)
    return Diagnostic(message, loc, severity)


def test_annotations_point_at_their_lines() -> None:
    text = "\n".join(
        [
            "%a = op  // expected-error {{same line}}",  # 1
            "// expected-error@+2 {{two below}}",  # 2
            "// expected-warning@-1 {{one above}}",  # 3
            "%b = op",  # 4
            "// expected-note@above {{nearest plain line above}}",  # 5
            "// expected-error@below {{nearest plain line below}}",  # 6
            "// expected-remark@unknown {{anywhere}}",  # 7
            "%c = op",  # 8
        ]
    )
    found = [(e.severity, e.line, e.text) for e in expectations(text, "f.mlir")]
    assert found == [
        ("error", 1, "same line"),
        ("error", 4, "two below"),
        ("warning", 2, "one above"),
        ("note", 4, "nearest plain line above"),
        ("remark", None, "anywhere"),
        ("error", 8, "nearest plain line below"),
    ]


def test_lines_count_in_the_whole_file() -> None:
    (one,) = expectations("\n// expected-error@+1 {{x}}\nop", "f.mlir", line_offset=10)
    assert one.line == 13 and one.at == SourceLoc("f.mlir", 12, 4)


def test_message_text_may_hold_braces() -> None:
    (one,) = expectations("// expected-error {{wrap it: { %t = dhir.task ... }}}", "f.mlir")
    assert one.text == "wrap it: { %t = dhir.task ... }"


@pytest.mark.parametrize(
    "line",
    [
        "// expected-error@+1 missing braces",
        "// expected-error@5 {{bad offset}}",
        "// expected-eror {{misspelt}}",
        "// expected-errors {{misspelt}}",
        "// expected-error-re {{regexes are not read}}",
        "// expected-error @+x {{bad offset}}",
    ],
)
def test_a_malformed_annotation_is_an_error_at_its_place(line: str) -> None:
    with pytest.raises(DhirError) as raised:
        expectations("op\n" + line, "f.mlir")
    (problem,) = raised.value.diagnostics
    assert problem.loc == SourceLoc("f.mlir", 2, 4)
    assert "malformed annotation" in problem.message


def test_a_plain_comment_about_annotations_is_no_annotation() -> None:
    assert expectations("// the expected-error annotations below\nop", "f.mlir") == []


def test_below_without_a_line_below_is_an_error() -> None:
    with pytest.raises(DhirError, match="@below has no line below"):
        expectations("// expected-error@below {{x}}", "f.mlir")


def test_agreement_gives_no_mismatches() -> None:
    expected = expectations("op // expected-error {{bad op}}", "f.mlir")
    assert mismatches(expected, [error(1, "this is a bad op, fix it")]) == []


def test_a_missing_diagnostic_is_reported_at_its_annotation() -> None:
    expected = expectations("op // expected-error {{bad op}}", "f.mlir")
    (problem,) = mismatches(expected, [])
    assert problem.message == 'expected error "bad op" was not produced'
    assert problem.loc == SourceLoc("f.mlir", 1, 7) and problem.severity == "error"


@pytest.mark.parametrize(
    "produced",
    [
        error(2, "bad op"),  # another line
        error(1, "bad op", "warning"),  # another severity
        error(1, "a different message"),
        error(None, "bad op"),  # no location
        Diagnostic("bad op", SourceLoc("other.mlir", 1, 1)),  # another file
    ],
)
def test_a_diagnostic_must_match_line_severity_text_and_file(produced: Diagnostic) -> None:
    expected = expectations("op // expected-error {{bad op}}", "f.mlir")
    problems = [p.message for p in mismatches(expected, [produced])]
    assert problems == [
        f"unexpected {produced.severity}: {produced.message}",
        'expected error "bad op" was not produced',
    ]


def test_notes_are_diagnostics_of_their_own() -> None:
    produced = error(1, "use before definition")
    produced.notes.append(error(2, "defined here", "note"))
    only_error = [Expected("error", 1, "use before", SourceLoc("f.mlir", 1, 1))]
    assert [p.message for p in mismatches(only_error, [produced])] == [
        "unexpected note: defined here"
    ]
    both = [*only_error, Expected("note", 2, "defined", SourceLoc("f.mlir", 1, 1))]
    assert mismatches(both, [produced]) == []


def test_each_annotation_matches_one_diagnostic() -> None:
    expected = expectations("op // expected-error {{bad}}", "f.mlir")
    problems = mismatches(expected, [error(1, "bad"), error(1, "bad")])
    assert [p.message for p in problems] == ["unexpected error: bad"]
    unknown = expectations("// expected-error@unknown {{lost}}\nop", "f.mlir")
    assert mismatches(unknown, [error(None, "lost place")]) == []
