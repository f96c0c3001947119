"""dhir-opt as users run it: exit codes, messages, never a traceback."""

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhir import DhirError, parse_string
from dhir.transforms import dhir_passes

EXAMPLE = Path(__file__).parents[2] / "examples" / "proposal.mlir"


def dhir_opt(
    *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.dhir_opt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_example_round_trips_through_stdin_and_output_file(tmp_path: Path) -> None:
    first = dhir_opt(str(EXAMPLE))
    assert first.returncode == 0, first.stderr
    out = tmp_path / "out.mlir"
    second = dhir_opt("-", "-o", str(out), stdin=first.stdout)
    assert second.returncode == 0, second.stderr
    assert out.read_text() == first.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/x.mlir"], "cannot read /nonexistent/x.mlir"),
        ([str(EXAMPLE), "-p", "no-such-pass"], "no-such-pass"),
        ([str(EXAMPLE), "-p", "dhir-place{ranks=/2}"], "bad pass pipeline"),
        ([str(EXAMPLE), "-p", "dhir-place{ranks=2"], "bad pass pipeline"),
        ([str(EXAMPLE), "-o", "/nonexistent/dir/out.mlir"], "cannot write"),
    ],
)
def test_bad_invocations_fail_cleanly(args: list[str], message: str) -> None:
    result = dhir_opt(*args)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_binary_input_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.mlir"
    path.write_bytes(b"\xff\xfe\x00garbage")
    result = dhir_opt(str(path))
    assert result.returncode == 1 and "not UTF-8" in result.stderr


def test_bad_first_character_is_a_located_error() -> None:
    # xDSL's parser reads the first token as it is made, before parsing starts.
    result = dhir_opt(stdin="'s example\n")
    assert result.returncode == 1
    assert "<stdin>:1:1: error: Unexpected character" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unterminated_string_before_a_long_line_is_an_error_not_a_hang() -> None:
    # xDSL 0.74's string pattern backtracked exponentially here (found by the fuzz test
    # below); dhir.ir.parser replaces it. Before, this took longer than the timeout.
    line = '  %t = dhir.target {arch = "sm_' + "x" * 40 + " %a, %b, %c {" * 4 + "\n"
    result = dhir_opt(stdin=line + "}\n", timeout=20)
    assert result.returncode == 1
    assert "<stdin>:1:" in result.stderr and "Traceback" not in result.stderr


def test_split_input_reports_errors_per_chunk_and_keeps_going() -> None:
    text = 'func.func @ok() {\n  return\n}\n// -----\nfunc.func @bad( {\n// -----\n"x"'
    result = dhir_opt("--split-input-file", stdin=text)
    assert result.returncode == 1
    assert "func.func @ok" in result.stdout
    assert "<stdin>:5:" in result.stderr and "<stdin>:7:" in result.stderr
    diagnostics = dhir_opt("--split-input-file", "--verify-diagnostics", stdin=text)
    assert diagnostics.returncode == 0
    assert "<stdin>:5:" in diagnostics.stdout


def test_help_lists_passes() -> None:
    result = dhir_opt("--help")
    assert result.returncode == 0
    assert "dhir passes:" in result.stdout and "canonicalize" in result.stdout
    listed = result.stdout.split("dhir passes:")[1].split("general passes")[0]
    for name in dhir_passes():
        line = next(row for row in listed.splitlines() if row.split()[:1] == [name])
        # Each says what it does: a docstring's first line, not a dataclass's repr.
        assert not line.rstrip().endswith("()") and len(line.split()) > 3, line


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mangled_programs_give_diagnostics_not_crashes(data: st.DataObject) -> None:
    """Cut, duplicate or swap pieces of a valid program: the result either parses
    and verifies, or is reported as a DhirError; nothing else escapes."""
    text = EXAMPLE.read_text()
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    insert = data.draw(st.sampled_from(["", "%a", "}", "{", ",", "dhir.task", "%cpu, ", "\n"]))
    mangled = text[:start] + insert + text[end:]
    try:
        parse_string(mangled, "mangled.mlir")
    except DhirError as error:
        assert error.diagnostics
