"""dhir-opt as users run it: exit codes, messages, never a traceback."""

import os
import stat
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
    ("args", "message", "status"),
    [
        (["/nonexistent/x.mlir"], "cannot read /nonexistent/x.mlir", 1),
        # A -p that does not parse is a malformed command line: exit status 2 (options
        # a pass checks when it runs are reported as it runs, with status 1).
        ([str(EXAMPLE), "-p", "no-such-pass"], "no-such-pass", 2),
        ([str(EXAMPLE), "-p", "dhir-place{ranks=/2}"], "bad pass pipeline", 2),
        ([str(EXAMPLE), "-p", "dhir-place{ranks=2"], "bad pass pipeline", 2),
        ([str(EXAMPLE), "-o", "/nonexistent/dir/out.mlir"], "cannot write", 1),
        # Not "cannot write : No such file or directory", nor a file named "".
        ([str(EXAMPLE), "-o", ""], "argument -o/--output-file: an empty path", 2),
        # A folder's name, no folder there: "cannot write no-such-folder/: Is a directory",
        # status 1, once the whole pipeline had run (docs/commands.md: before any pass).
        (
            [str(EXAMPLE), "-o", "no-such-folder/"],
            "argument -o/--output-file: 'no-such-folder/' names a folder (it ends in /)",
            2,
        ),
        ([""], "argument input: an empty path; name a file or folder", 2),
        ([str(EXAMPLE), "-p", "dhir-time-tiles{steps=-1 ranks=0}"], "steps must be at least 0", 1),
        ([str(EXAMPLE), "-p", "dhir-optimize-bodies{vector_bits=7}"], "must be 128, 256 or 512", 1),
    ],
)
def test_bad_invocations_fail_cleanly(args: list[str], message: str, status: int) -> None:
    result = dhir_opt(*args)
    assert result.returncode == status
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("missing/out.mlir", "there is no folder {tmp}/missing; make it first"),
        ("ro/out.mlir", "the folder {tmp}/ro is not writable"),
        ("old.mlir", "the file is not writable"),
        (".", "it is a folder; name a file"),
    ],
)
def test_an_output_file_that_cannot_be_written_is_refused_before_the_passes(
    where: str,
    reason: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was said only after the whole pipeline had run."""
    from dhir.cli import opt_driver

    def must_not_run(*args: object) -> None:
        raise AssertionError("the passes ran")

    monkeypatch.setattr(opt_driver.DhirOptMain, "_process", must_not_run)
    real = os.access  # as it answers a user other than root, whom modes do not stop

    def access(path: str | Path, mode: int) -> bool:
        if mode & os.W_OK and not Path(path).stat().st_mode & stat.S_IWUSR:
            return False
        return real(path, mode)

    monkeypatch.setattr(os, "access", access)
    (tmp_path / "ro").mkdir(mode=0o555)
    (tmp_path / "old.mlir").write_text("")
    (tmp_path / "old.mlir").chmod(0o444)
    out = tmp_path / where
    assert opt_driver.run_opt([str(EXAMPLE), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"cannot write {out}: {reason.format(tmp=tmp_path)}" in err, err


def test_an_output_file_that_may_be_written_over_needs_no_writable_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As -o /dev/null, in a folder only root may write to."""
    from dhir.cli import opt_driver

    real = os.access  # as it answers a user other than root, whom modes do not stop

    def access(path: str | Path, mode: int) -> bool:
        return not (mode & os.W_OK and Path(path) == tmp_path / "ro") and real(path, mode)

    monkeypatch.setattr(os, "access", access)
    (tmp_path / "ro").mkdir()
    out = tmp_path / "ro" / "out.mlir"
    out.write_text("")
    assert opt_driver.run_opt([str(EXAMPLE), "-o", str(out)]) == 0
    assert "module" in out.read_text()


def test_binary_input_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.mlir"
    path.write_bytes(b"\xff\xfe\x00garbage")
    result = dhir_opt(str(path))
    assert result.returncode == 1 and f"{path}:1:1: error: UTF-16 text" in result.stderr


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


@pytest.mark.parametrize(
    "constant", ["1.0e39 : f32", "-7.0e4 : f16", "dense<[1.0, 1.0e39]> : vector<2xf32>"]
)
def test_a_float_constant_out_of_range_is_a_located_error(constant: str) -> None:
    # xDSL raised OverflowError packing the value.
    text = f"func.func @f() {{\n  %x = arith.constant {constant}\n  return\n}}\n"
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "<stdin>:2:" in result.stderr and "float constant out of its type's range" in (
        result.stderr
    )


def _parse_error(text: str) -> str:
    """The DhirError that parsing `text` raises, as it is printed."""
    with pytest.raises(DhirError) as caught:
        parse_string(text)
    return str(caught.value)


@pytest.mark.parametrize(
    ("constant", "words"),
    [
        ("1.5 : i32", "1.5 is a float, but i32 is an integer type"),
        ("2.5 : index", "2.5 is a float, but index is an integer type"),
        ("1 : memref<4xf32>", "a number's type must be an integer or float type"),
    ],
)
def test_a_number_of_the_wrong_type_is_an_error_at_the_number(constant: str, words: str) -> None:
    # xDSL raised it at the token after the type: the next line's `return`.
    text = f"func.func @f() {{\n  %x = arith.constant {constant}\n  return\n}}\n"
    message = _parse_error(text)
    assert "<string>:2:23: error:" in message and words in message


@pytest.mark.parametrize(
    ("op", "words"),
    [
        ("arith.addi %f, %f : f32", "'arith.addi' does not take f32; "),
        ("arith.cmpf olt, %i, %i : i32", "'arith.cmpf' does not take i32 as its operand 'lhs'"),
        ('"arith.addi"(%f, %f) : (f32, f32) -> f32', "does not take f32 as its operand 'lhs'"),
        ("math.sqrt %i : i32", "'math.sqrt' does not take i32; check the types"),
    ],
)
def test_an_op_given_a_type_it_does_not_take_says_which(op: str, words: str) -> None:
    # xDSL said only "Unexpected attribute f32".
    text = f"func.func @f(%f: f32, %i: i32) {{\n  %x = {op}\n  return\n}}\n"
    message = _parse_error(text)
    assert "<string>:2:8: error:" in message and words in message
    assert "Unexpected attribute" not in message


def test_an_attribute_of_another_type_says_what_to_write() -> None:
    """xDSL said only "Expected attribute i64 but got i32", at the op."""
    op = '"vector.extract"(%v) <{static_position = array<i32: 0>}> : (vector<4xf32>) -> f32'
    text = f"func.func @f(%v: vector<4xf32>) {{\n  %x = {op}\n  return\n}}\n"
    message = _parse_error(text)
    assert "<string>:2:8: error: 'vector.extract' takes i64 in an attribute where this one" in (
        message
    )
    assert "write its numbers as i64 (`array<i64: ...>`, `N : i64`)" in message


@pytest.mark.parametrize(("name", "noted"), [("foo.bar", True), ("arith.foo", False)])
def test_dhir_opt_says_how_to_read_an_op_of_a_dialect_it_does_not_know(
    name: str, noted: bool
) -> None:
    """mlir-opt's error names its --allow-unregistered-dialect; dhir-opt's did not.
    An op dhir-opt's own dialects lack gets no such note: the flag would not read it."""
    text = f'func.func @f() {{\n  "{name}"() : () -> ()\n  return\n}}\n'
    result = dhir_opt("-", stdin=text)
    assert result.returncode == 1
    note = "note: dhir-opt knows no dialect 'foo'; with --allow-unregistered-dialect it reads"
    assert (note in result.stderr) == noted
    assert dhir_opt("-", "--allow-unregistered-dialect", stdin=text).returncode == 0


def test_a_type_refused_names_the_arith_op_that_takes_it() -> None:
    text = "func.func @f(%f: f32) {\n  %x = arith.addi %f, %f : f32\n  return\n}\n"
    with pytest.raises(DhirError, match="for f32, arith.addf"):
        parse_string(text)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            "  %c = arith.constant 0 : index\n",
            "'arith.constant' ends the body of 'func.func' @f, which must end with its "
            "terminator: add func.return (`return`) after it",
        ),
        (
            "  %l = llvm.mlir.constant(0 : i32) : i32\n",
            "ends the body of 'func.func' @f, which must end with its terminator",
        ),
    ],
)
def test_a_body_without_its_terminator_says_what_to_add(body: str, words: str) -> None:
    # xDSL said "Operation arith.constant terminates block in single-block region but
    # is not a terminator", naming neither the function nor the missing `return`.
    message = _parse_error("func.func @f() {\n" + body + "}\n")
    assert "<string>:2:" in message and words in message


@pytest.mark.parametrize("constant", ["1.5 : f80", "dense<[1.5, 2.0]> : tensor<2xf128>"])
def test_an_f80_or_f128_constant_is_a_located_error(constant: str) -> None:
    # xDSL read them and failed to print them: an internal error.
    text = f"func.func @f() {{\n  %x = arith.constant {constant}\n  return\n}}\n"
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "<stdin>:2:" in result.stderr and "f80 and f128 constants are not" in result.stderr


@pytest.mark.parametrize("vector", ["vector<0xf32>", "vector<4x0x2xf32>", "vector<[0]xf32>"])
def test_a_vector_of_no_elements_is_a_located_error(vector: str) -> None:
    # MLIR refuses these; xDSL 0.74 built them, and the lowering failed far later.
    text = f"func.func @f(%v: {vector}) {{\n  return\n}}\n"
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "<stdin>:1:" in result.stderr and "positive constant sizes" in result.stderr


def test_an_op_xdsl_asserts_about_is_a_located_error() -> None:
    # xDSL's linalg parser asserts that element types are not index: an internal error.
    text = (
        "func.func @f(%a: memref<3xindex>) {\n"
        "  linalg.add ins(%a, %a : memref<3xindex>, memref<3xindex>) outs(%a : memref<3xindex>)\n"
        "  return\n}\n"
    )
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "<stdin>:2:3: error: this op cannot be built from these types" in result.stderr


def test_an_op_xdsl_cannot_build_from_its_types_is_a_located_error() -> None:
    # A transfer of more dimensions than the memref has: xDSL raised ValueError making
    # its default permutation map.
    text = (
        "func.func @f(%a: memref<8xf32>, %f: f32) {\n  %c0 = arith.constant 0 : index\n"
        "  %v = vector.transfer_read %a[%c0], %f : memref<8xf32>, vector<2x4xf32>\n"
        "  return\n}\n"
    )
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "<stdin>:3:8: error: Dimension mismatch" in result.stderr


def test_an_error_on_a_very_long_line_quotes_a_window_of_it() -> None:
    text = "func.func @f() {\n  " + " " * 500_000 + "%y = arith.addi %z, %z : i32\n  return\n}\n"
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and "use of undefined value %z" in result.stderr
    assert len(result.stderr) < 2000
    quoted, caret = result.stderr.splitlines()[1:3]
    assert quoted.startswith("...") and quoted[caret.index("^") :].startswith("%z, %z : i32")


def test_the_caret_lines_up_under_a_line_indented_with_tabs() -> None:
    # It was indented with one space per character, so under tabs it stood columns early.
    text = "func.func @f() {\n\t\t%y = arith.addi %z, %z : i32\n  return\n}\n"
    result = dhir_opt(stdin=text)
    # At the use, as MLIR points: tabs count one column each, as in mlir-opt-22.
    assert "<stdin>:2:19: error: use of undefined value %z" in result.stderr
    quoted, caret = result.stderr.splitlines()[1:3]
    assert quoted == "\t\t%y = arith.addi %z, %z : i32"
    assert caret == "\t\t" + " " * 16 + "^"


def test_a_missing_closing_brace_is_named() -> None:
    # xDSL's message was only " in block definition".
    result = dhir_opt(stdin="func.func @main() {\n  return\n")
    assert result.returncode == 1
    assert "<stdin>:3:1: error: the input ends before the '}' that closes a region" in (
        result.stderr
    )


UNCLOSED_LOOP = """\
func.func @main(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %true = arith.constant true
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    scf.if %true {
      memref.store %x, %a[%i] : memref<4xf32>
    } else {
      memref.store %x, %a[%c0] : memref<4xf32> // {
  }
  return
}
"""


def test_a_missing_closing_brace_points_at_the_region_left_open() -> None:
    """The error was only at the end of the input: which '{' lacked its '}' was the
    user's to find. The note names the else region's, whose '}' by count (at 12:3) is
    indented as an outer line; braces in comments and attributes do not count."""
    result = dhir_opt(stdin=UNCLOSED_LOOP)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("<stdin>:15:1: error: the input ends before the '}'")
    note = next(line for line in lines if "note:" in line)
    assert note == (
        "<stdin>:10:12: note: this '{' looks unclosed: the '}' at 12:3 that closes it "
        "by count is indented as an outer line; add its '}' where its region ends"
    )


def test_a_missing_closing_brace_of_the_outermost_region_is_named() -> None:
    result = dhir_opt(stdin='func.func @main() attributes {n = "{"} {\n  return\n')
    assert "<stdin>:1:40: note: this '{' is never closed; add its '}'" in result.stderr


def test_split_input_reports_errors_per_chunk_and_keeps_going() -> None:
    text = 'func.func @ok() {\n  return\n}\n// -----\nfunc.func @bad( {\n// -----\n"x"'
    result = dhir_opt("--split-input-file", stdin=text)
    assert result.returncode == 1
    assert "func.func @ok" in result.stdout
    assert "<stdin>:5:" in result.stderr and "<stdin>:7:" in result.stderr
    # Without expected-error annotations, each error is unexpected, and said to be.
    diagnostics = dhir_opt("--split-input-file", "--verify-diagnostics", stdin=text)
    assert diagnostics.returncode == 1
    assert "func.func @ok" in diagnostics.stdout
    assert "<stdin>:5:" in diagnostics.stderr and "<stdin>:7:" in diagnostics.stderr
    assert "unexpected error: " in diagnostics.stderr


def test_verify_diagnostics_passes_only_when_the_annotations_hold() -> None:
    bad = "func.func @bad() {\n  %1 = arith.addi %0, %0 : i32\n  return\n}\n"
    annotated = bad.replace("  %1", "  // expected-error@+1 {{use of undefined value %0}}\n  %1")
    assert dhir_opt("--verify-diagnostics", stdin=annotated).returncode == 0
    wrong = annotated.replace("@+1", "@+2")
    result = dhir_opt("--verify-diagnostics", stdin=wrong)
    assert result.returncode == 1
    assert "unexpected error: use of undefined value %0" in result.stderr
    assert 'expected error "use of undefined value %0" was not produced' in result.stderr
    assert "Traceback" not in result.stderr


def test_a_nested_pass_may_not_change_the_module_around_its_op() -> None:
    # dhir-track-tasks records its table on the module: nested under func.func, each
    # function's table would replace the last one's.
    result = dhir_opt(str(EXAMPLE), "-p", "builtin.module(func.func(dhir-track-tasks))")
    assert result.returncode == 1
    assert "proposal.mlir:3:1: error: passes nested under 'func.func' changed" in result.stderr
    assert "(dhir.task_table); run them on builtin.module instead" in result.stderr


def test_help_lists_passes() -> None:
    result = dhir_opt("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: dhir-opt ")
    for option in (
        "--pass-pipeline",
        "--verify-diagnostics",
        "--mlir-print-ir-after-all",
        "--mlir-timing",
        "--split-input-file",
    ):
        assert option in result.stdout
    assert "dhir passes:" in result.stdout and "canonicalize" in result.stdout
    listed = result.stdout.split("dhir passes:")[1].split("general passes")[0]
    for name in dhir_passes():
        line = next(row for row in listed.splitlines() if row.split()[:1] == [name])
        # Each says what it does: a docstring's first line, not a dataclass's repr.
        assert not line.rstrip().endswith("()") and len(line.split()) > 3, line
        # ... a whole sentence: its docstring's first line is a sentence of its own.
        assert line.rstrip().endswith("."), line
        assert "module docstring" not in line, line


@pytest.mark.parametrize("name", sorted(dhir_passes()))
def test_each_pass_has_a_one_line_summary(name: str) -> None:
    """`dhir-opt --help` shows a pass's docstring's first line: it must be the whole
    summary, not the start of a sentence the next line ends."""
    lines = (dhir_passes()[name]().__doc__ or "").strip().splitlines()
    assert lines[0].endswith("."), lines[0]
    assert len(lines) == 1 or not lines[1].strip(), lines[:2]
    assert "module docstring" not in lines[0]


def test_every_pass_has_a_row_in_the_docs() -> None:
    """docs/commands.md's table of passes names every registered dhir pass."""
    table = (Path(__file__).parents[2] / "docs" / "commands.md").read_text()
    rows = {
        line.split("`")[1].split("{")[0]
        for line in table.splitlines()
        if line.startswith("| `dhir-")
    }
    assert sorted(set(dhir_passes()) - rows) == []
    assert sorted(rows - set(dhir_passes())) == []


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


@pytest.mark.parametrize(
    "line, message",
    [
        ("dhir.yield %v : i32", "<stdin>:5:18: error: dhir.yield takes no values"),
        ("}\n%u = dhir.task target = 5, %a {", "error: string literal expected for the target"),
        (
            '}\n%u = dhir.task target = "cpu", %a attributes {target = "sm_90"} {',
            "error: 'target' is a property of dhir.task, not an attribute",
        ),
    ],
)
def test_task_syntax_mistakes_say_what_is_wrong(line: str, message: str) -> None:
    text = (
        "func.func @main(%a: memref<4xi32>) {\n  dhir.schedule %a {\n"
        '    %t = dhir.task target = "cpu", %a {\n      %v = arith.constant 1 : i32\n'
        f"      {line}\n    }}\n  }}\n  return\n}}\n"
    )
    result = dhir_opt(stdin=text)
    assert result.returncode == 1 and message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("dhir-place{ranks=abc}", "dhir-place: option ranks takes a whole number, got 'abc'"),
        ("dhir-place{ranks=true}", "dhir-place: option ranks takes a whole number, got true"),
        ("dhir-place{ranks}", "dhir-place: option ranks takes a whole number, got no value"),
        ("dhir-codedrop{entry=1}", "dhir-codedrop: option entry takes a word, got 1"),
        # xDSL said "Unknown token" under a caret, and not that the path goes in quotes.
        (
            "dhir-place{costs=p.json}",
            "cannot read 'dhir-place{costs=p.json}' from '.json}': an option's value other "
            "than a word, a number or true/false (a path such as P.json) goes in double "
            'quotes: name="P.json"',
        ),
    ],
)
def test_a_pass_option_of_the_wrong_type_says_what_it_takes(pipeline: str, message: str) -> None:
    from dhir.api import parse_pipeline

    with pytest.raises(DhirError) as error:
        parse_pipeline(pipeline)
    assert str(error.value) == f"error: bad pass pipeline '{pipeline}': {message}"


@pytest.mark.parametrize(
    "command", [["dhir.cli.dhir_opt", "-"], ["dhir", "schedule", "-"], ["dhir", "run", "-"]]
)
def test_stdin_that_is_not_utf8_is_refused_as_a_file_would_be(command: list[str]) -> None:
    # It reached the parser as "<stdin>:1:1: error: Unexpected character: \\udcff".
    result = subprocess.run(
        [sys.executable, "-m", *command], input=b"//\xff\n", capture_output=True, timeout=120
    )
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "<stdin>:1:3: error: byte 0xff is not UTF-8; dhir reads UTF-8 text\n//\ufffd\n  ^\n"
    )


def test_stdin_keeps_reading_line_ends_as_text() -> None:
    result = dhir_opt("-", stdin="module {}\r\n// x\r")
    assert result.returncode == 0 and result.stdout == "builtin.module {\n}\n"


def test_an_integer_literal_too_long_to_read_is_an_error_in_dhir_terms() -> None:
    digits = "1" * (sys.get_int_max_str_digits() + 1)
    text = f"func.func @f() {{\n  %c = arith.constant {digits} : i64\n  return\n}}\n"
    with pytest.raises(DhirError) as error:
        parse_string(text, "long.mlir")
    message = str(error.value)
    # It said to call sys.set_int_max_str_digits(), Python's remedy, not the user's.
    assert message.startswith("long.mlir:2:8: error: an integer literal in this op has more")
    assert "sys." not in message


@pytest.mark.parametrize(
    "pipeline",
    [
        "dhir-split{ranks=2 ranks=3}",
        "dhir-split{ranks pieces=3 ranks=2}",
        "builtin.module(func.func(dhir-split{ranks=2 ranks=2}))",
    ],
)
def test_a_pass_option_given_twice_is_refused(pipeline: str) -> None:
    # xDSL kept the last value and said nothing: ranks=2 ranks=3 ran on 3 ranks.
    from dhir.api import parse_pipeline

    with pytest.raises(DhirError) as error:
        parse_pipeline(pipeline)
    message = (
        "dhir-split: option ranks is given more than once: it takes one value, so give it once"
    )
    assert str(error.value) == f"error: bad pass pipeline '{pipeline}': {message}"


def test_options_that_only_look_repeated_still_parse() -> None:
    from dhir.api import parse_pipeline

    # Another option, a value with the option's name, and a quoted string holding it.
    assert parse_pipeline("dhir-split{ranks=2 pieces=3},dhir-split{ranks=2}").passes
    assert parse_pipeline("dhir-codedrop{entry=entry target=cpu}").passes
    assert parse_pipeline('dhir-place{ranks=2 costs="ranks ranks=1"}').passes


def test_good_pass_options_still_parse() -> None:
    from dhir.api import parse_pipeline

    assert parse_pipeline("dhir-place{ranks=2},dhir-codedrop{entry=main target=cpu}").passes


_FUNC = "func.func @f() {\n  return\n}\n"


@pytest.mark.parametrize(
    ("data", "at", "message", "quoted"),
    [
        (
            b"\xef\xbb\xbf" + _FUNC.encode(),
            "1:1",
            "a byte order mark (U+FEFF) starts the text, which MLIR does not read",
            "func.func @f() {",
        ),
        (_FUNC.encode("utf-16"), "1:1", "UTF-16 text; dhir reads UTF-8: convert it", None),
        (_FUNC.encode("utf-16-le"), "1:1", "UTF-16 text", None),
        (_FUNC.replace("return", "return \xe9").encode("latin-1"), "2:10", "byte 0xe9", None),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "1:1", "an executable (ELF), not", None),
        (b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'}", "1:1", "a binary file, not text", None),
    ],
)
@pytest.mark.parametrize("command", ["dhir-opt", "schedule", "run"])
def test_mlir_that_is_not_plain_utf8_is_an_error_at_its_place(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    data: bytes,
    at: str,
    message: str,
    quoted: str | None,
) -> None:
    """A BOM reached the parser as "Unexpected character: \\ufeff" (mlir-opt refuses it
    too); UTF-16 and other bytes said "is not UTF-8 text" naming the file alone."""
    from dhir.cli.dhir_opt import main as opt_main
    from dhir.cli.main import main

    path = tmp_path / "p.mlir"
    path.write_bytes(data)
    if command == "dhir-opt":
        assert opt_main([str(path)]) == 1
    else:
        extra = ["--backend", "interp", "-n", "1"] if command == "run" else []
        assert main([command, str(path), *extra]) == 1
    lines = capsys.readouterr().err.splitlines()
    if command == "run" and data.startswith(b"\x7fELF"):  # `dhir run` takes it for one
        assert lines == [f"error: {path} is an executable; the interpreter runs the .mlir program"]
        return
    assert lines[0].startswith(f"{path}:{at}: error: {message}")
    if quoted is not None:
        assert lines[1:3] == [quoted, "^"]
    if data[:1] in (b"\x7f", b"\x93"):  # a binary file: its bytes quoted as a line were noise
        assert len(lines) == 1


def test_parse_string_refuses_a_bom_at_the_chunks_line() -> None:
    with pytest.raises(DhirError) as error:
        parse_string("\ufeff" + _FUNC, "f.mlir", line_offset=4)
    assert str(error.value).startswith("f.mlir:5:1: error: a byte order mark")


_ENDLESS = "/dev/zero"
_NO_END = f"error: {_ENDLESS} is a device that does not end (it gave more than 64 MiB); name a file"


@pytest.mark.parametrize(
    ("command", "stdin"),
    [
        (["dhir", "run", _ENDLESS], None),
        (["dhir.cli.dhir_opt", _ENDLESS], None),
        (["dhir", "schedule", "-"], _ENDLESS),
    ],
)
def test_a_program_from_a_device_that_does_not_end_is_refused(
    command: list[str], stdin: str | None
) -> None:
    """dhir read /dev/zero whole as the program: it hung, its memory growing."""
    with open(stdin or os.devnull, "rb") as given:
        result = subprocess.run(
            [sys.executable, "-m", *command], stdin=given, capture_output=True, timeout=120
        )
    assert result.returncode == 1
    named = "<stdin>" if stdin else _ENDLESS
    assert result.stderr.decode() == _NO_END.replace(_ENDLESS, named, 1) + "\n"


def test_files_from_a_device_that_does_not_end_are_refused(tmp_path: Path) -> None:
    """--constraints, --costs, --system and --graph files hung as the program did."""
    from dhir.analysis.profile import load_profile
    from dhir.cli.schedule import read_graph
    from dhir.machine.files import read_system
    from dhir.placement.constraints import read_constraints

    readers = {"c.toml": read_constraints, "p.json": load_profile, "m.toml": read_system}
    for name, read in {**readers, "g.json": read_graph}.items():
        path = tmp_path / name
        path.symlink_to(_ENDLESS)
        with pytest.raises(DhirError) as error:
            read(path)
        assert f"{path} is a device that does not end" in str(error.value), name


def _endless_pipe(path: Path) -> "subprocess.Popen[bytes]":
    """A FIFO at `path` that `yes` writes to for ever, once it is opened."""
    os.mkfifo(path)
    return subprocess.Popen(["sh", "-c", 'exec yes > "$0"', str(path)])


def test_files_from_a_pipe_that_does_not_end_are_refused(tmp_path: Path) -> None:
    """`--costs <(yes)` hung, its memory growing: only devices were read to a limit."""
    from dhir.analysis.profile import load_profile
    from dhir.cli.schedule import read_graph
    from dhir.machine.files import read_system
    from dhir.placement.constraints import read_constraints
    from dhir.toolchain.trace import trace_chart

    readers = {"c.toml": read_constraints, "p.json": load_profile, "m.toml": read_system}
    for name, read in {**readers, "g.json": read_graph, "t.json": trace_chart}.items():
        path = tmp_path / name
        writer = _endless_pipe(path)
        try:
            with pytest.raises(DhirError) as error:
                read(path)
        finally:
            writer.kill()
            writer.wait()
        assert f"{path} is a pipe that does not end (it gave more than 64 MiB)" in str(
            error.value
        ), name


def test_a_program_from_a_pipe_that_does_not_end_is_refused() -> None:
    with subprocess.Popen(["yes"], stdout=subprocess.PIPE) as writer:
        result = subprocess.run(
            [sys.executable, "-m", "dhir", "schedule", "-"],
            stdin=writer.stdout,
            capture_output=True,
            timeout=120,
        )
        writer.kill()
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "error: <stdin> is a pipe that does not end (it gave more than 64 MiB); name a file\n"
    )


def test_the_cached_run_key_does_not_read_a_device_that_does_not_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`dhir run` keys its cached run on $DHIR_SYSTEM's bytes: /dev/zero hung it."""
    from dhir.cli.cached_run import run_key

    monkeypatch.setenv("DHIR_SYSTEM", _ENDLESS)
    assert len(run_key(EXAMPLE, [])) == 32


def test_dhir_lower_to_mpi_refuses_a_task_on_a_rank_it_does_not_lower_for() -> None:
    """A dhir.rank past the pass's ranks (by hand, or placed for more) was an internal
    error (IndexError) in dhir-lower-to-mpi, and an assertion after dhir-gpu-data."""
    from dhir.api import run_pipeline

    text = (
        (EXAMPLE.parent / "vector_add.mlir")
        .read_text()
        .replace(
            "dhir.task %cpu, %a, %b, %c {",
            "dhir.task %cpu, %a, %b, %c attributes {dhir.rank = 0} {",
        )
    )
    text = text.replace(
        "dhir.task %any, %c, %a {", "dhir.task %any, %c, %a attributes {dhir.rank = 5} {"
    )
    module = parse_string(text, "p.mlir")
    with pytest.raises(DhirError) as error:
        run_pipeline(module, "dhir-lower-to-mpi{ranks=2}")
    assert "task is placed on rank 5 (dhir.rank), but dhir-lower-to-mpi lowers for 2 ranks" in str(
        error.value
    )
    assert str(error.value.diagnostics[0].loc).startswith("p.mlir:")


_NO_MAIN = "func.func @f(%a: memref<4xf32>) {\n  return\n}\nfunc.func private @g()\n"


# The check passes name the entry's arguments in their failures.
_CHECKS = [
    "dhir-bounds-checks",
    "dhir-vector-checks",
    "dhir-cast-checks",
    "dhir-cast-sizes",
    "dhir-linalg-sizes",
]


@pytest.mark.parametrize(
    "name", ["dhir-place", "dhir-gpu-data", "dhir-lower-to-mpi", "dhir-codedrop", *_CHECKS]
)
def test_an_entry_option_that_names_no_function_is_refused(name: str) -> None:
    """dhir-place, dhir-gpu-data, dhir-lower-to-mpi and the check passes took
    entry=nosuch, exited 0 and did nothing for an entry; dhir-codedrop refused it, as
    they do now."""
    result = dhir_opt("-", "-p", f"{name}{{entry=nosuch}}", stdin=_NO_MAIN)
    assert result.returncode == 1
    assert result.stderr == (
        f"error: {name}: the module has no function @nosuch with a body; name one of: @f\n"
    )


def test_the_default_entry_needs_no_main() -> None:
    from dhir.api import run_pipeline

    module = parse_string(_NO_MAIN, "p.mlir")
    run_pipeline(
        module, ",".join(["dhir-place,dhir-gpu-data,dhir-lower-to-mpi,dhir-codedrop", *_CHECKS])
    )
