"""The command synopses in README.md and docs/commands.md name every option the parsers
take, and no option they do not."""

import argparse
import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dhir
from dhir.cli import opt_driver
from dhir.cli.main import build_parser
from dhir.transforms import all_passes, dhir_passes

ROOT = Path(__file__).parents[2]
DOCS = ("README.md", "docs/commands.md")
# A synopsis: an indented line `dhir COMMAND` or `dhir-opt` whose next word is a
# placeholder (FILE, RUN.json), an optional part or --graph; examples name real files.
_START = re.compile(r"^    (dhir-opt|dhir (\w+)) +(\[|[A-Z]|--graph)")
_OPTION = re.compile(r"(?<![\w.-])(--?[A-Za-z][\w-]*)")


def synopses(doc: str) -> dict[str, str]:
    """Each command's synopsis lines in `doc`, joined (a command may have several)."""
    found: dict[str, str] = {}
    command = None
    for line in (ROOT / doc).read_text().splitlines():
        start = _START.match(line)
        if start is not None:
            command = start[2] or start[1]
            found[command] = found.get(command, "") + " " + line
        elif command is not None and line.startswith("     ") and line.strip():
            found[command] += " " + line  # a continuation, indented further
        else:
            command = None
    return found


def parser_of(command: str) -> argparse.ArgumentParser:
    if command == "dhir-opt":
        return opt_driver.build_parser()
    subparsers = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    return subparsers.choices[command]


def options_of(parser: argparse.ArgumentParser) -> list[list[str]]:
    """Each documented option's spellings (not --help, nor those kept off --help)."""
    return [
        action.option_strings
        for action in parser._actions
        if action.option_strings
        and action.help != argparse.SUPPRESS
        and not isinstance(action, argparse._HelpAction)
    ]


CASES = [(doc, command) for doc in DOCS for command in synopses(doc)]


def prose(doc: str) -> str:
    """`doc` without its synopses: what it says of the options."""
    kept: list[str] = []
    inside = False
    for line in (ROOT / doc).read_text().splitlines():
        inside = _START.match(line) is not None or (
            inside and line.startswith("     ") and bool(line.strip())
        )
        if not inside:
            kept.append(line)
    return "\n".join(kept)


@pytest.mark.parametrize(
    "command", ["run", "compile", "schedule", "calibrate", "gantt", "cache", "dhir-opt"]
)
def test_the_reference_says_what_every_option_does(command: str) -> None:
    """dhir-opt's -v/--version was named in its synopsis alone."""
    text = prose("docs/commands.md")
    silent = [
        spellings
        for spellings in options_of(parser_of(command))
        if not any(re.search(f"`{re.escape(s)}[` =]", text) for s in spellings)
    ]
    assert not silent, f"docs/commands.md names {silent} of {command} in its synopsis alone"


def _commands() -> set[str]:
    """dhir's subcommands, as its parser has them."""
    subparsers = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    return set(subparsers.choices)


def test_every_command_has_a_synopsis_in_the_reference() -> None:
    assert set(synopses("docs/commands.md")) == _commands() | {"dhir-opt"}


def test_the_reference_names_dhir_s_own_options() -> None:
    """`dhir --version` (and any option dhir takes before its command) is described."""
    text = (ROOT / "docs/commands.md").read_text()
    options = options_of(build_parser())
    assert options, "dhir takes --version"
    silent = [s for s in options if not any(f"`dhir {o}`" in text for o in s)]
    assert not silent, f"docs/commands.md does not name dhir {silent}"


@pytest.mark.parametrize(("doc", "command"), CASES)
def test_a_synopsis_names_the_options_the_parser_takes(doc: str, command: str) -> None:
    text = synopses(doc)[command]
    named = set(_OPTION.findall(text))
    options = options_of(parser_of(command))
    unknown = named - {spelling for spellings in options for spelling in spellings}
    assert not unknown, f"{doc}: {command}'s synopsis names options it lacks: {unknown}"
    if re.search(r"\s\.\.\.(\s|$)", text):
        return  # it shows some options, and a "..." says there are more
    missing = [spellings[-1] for spellings in options if not named & set(spellings)]
    assert not missing, f"{doc}: {command}'s synopsis lacks {missing}"


@pytest.mark.parametrize("command", ["run", "compile", "schedule", "calibrate", "gantt", "cache"])
def test_every_option_says_what_it_does_in_help(command: str) -> None:
    """`dhir compile --help` listed -o EXE with no word on it."""
    parser = parser_of(command)
    bare = [a.option_strings for a in parser._actions if a.option_strings and not a.help]
    assert not bare, f"dhir {command}: options without help: {bare}"


def test_the_help_says_what_the_reference_says_of_timeout() -> None:
    """docs/commands.md: more than 0; `inf` waits for ever."""
    (timeout,) = [a for a in parser_of("run")._actions if "--timeout" in a.option_strings]
    assert timeout.help is not None
    assert "more than 0" in timeout.help and "inf waits for ever" in timeout.help


def test_the_reference_gives_dhir_run_s_signature() -> None:
    """docs/commands.md's `dhir.run(...)` lacked `runtime_checks=False`."""
    text = (ROOT / "docs/commands.md").read_text()
    start = text.index("`dhir.run(program, ")
    shown = " ".join(text[start + 1 : text.index("`", start + 1)].split())
    signature = inspect.signature(dhir.run)
    words = [
        f"*{p.name}" if p.kind is p.VAR_POSITIONAL
        else p.name if p.default is p.empty
        else f"{p.name}={p.default!r}".replace("'", '"')
        for p in signature.parameters.values()
    ]  # fmt: skip
    assert shown == f"dhir.run({', '.join(words)})"


def _pass_options(row: str) -> dict[str, str]:
    """The `name=value` options a pass's row in the table of passes shows in braces."""
    head = row.split("`")[1]
    braces = head.partition("{")[2].rstrip("}")
    return dict(word.split("=", 1) for word in braces.split())


@pytest.mark.parametrize("name", sorted(dhir_passes()))
def test_the_table_of_passes_names_each_pass_s_options(name: str) -> None:
    """dhir-place and dhir-gpu-data take `entry`, which their rows did not show, and
    dhir-codedrop's showed `entry=main` where it rewrites every function by default."""
    text = (ROOT / "docs/commands.md").read_text()
    (row,) = [
        line for line in text.splitlines()
        if line.startswith((f"| `{name}`", f"| `{name}{{"))
    ]  # fmt: skip
    shown = {key.replace("-", "_"): value for key, value in _pass_options(row).items()}
    fields = {f.name: f.default for f in dataclasses.fields(dhir_passes()[name]())}
    assert sorted(shown) == sorted(fields)
    for key, value in shown.items():
        default = fields[key]
        if value.isupper() or value.startswith('"'):
            continue  # a placeholder (ranks=N, entry=NAME, costs="P.json")
        assert value == str(default).lower(), f"{name}: {key}={value}, default {default}"


# A benchmark's synopsis: `.venv/bin/python bench/X.py [SUB] ...` or `python3 bench/...`,
# continued on lines indented further that start with an optional part.
_BENCH = re.compile(r"^    (?:\.venv/bin/python|python3) (bench/\S+\.py)(?: ([a-z]+)\b)?(.*)$")


def bench_synopses(doc: str = "docs/commands.md") -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    key = None
    for line in (ROOT / doc).read_text().splitlines():
        start = _BENCH.match(line)
        if start is not None:
            key = (start[1], start[2] or "")
            found[key] = found.get(key, "") + " " + start[3]
        elif key is not None and line.startswith("        ["):
            found[key] += " " + line
        else:
            key = None
    return found


@pytest.mark.parametrize(("script", "sub"), sorted(bench_synopses()))
def test_a_benchmark_synopsis_names_the_options_its_script_takes(script: str, sub: str) -> None:
    """bench/polybench/run.py's synopsis lacked --plain, --fast-math and --no-optimize,
    gpu_split.py run's --budget, gpu_messages.py run's --direct, cost_accuracy.py's --mpi."""
    named = set(_OPTION.findall(bench_synopses()[(script, sub)]))
    command = [sys.executable, script, *([sub] if sub else []), "--help"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    usage = result.stdout.split("\n\n")[0]
    takes = set(_OPTION.findall(usage)) - {"-h"}
    assert named == takes, f"{script} {sub}: the docs name {named}, --help {takes}"


def _usage(script: str, sub: str) -> str:
    command = [sys.executable, script, *([sub] if sub else []), "--help"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n\n")[0]


@pytest.mark.parametrize(("script", "sub"), sorted(bench_synopses("docs/performance.md")))
def test_a_benchmark_command_in_the_performance_notes_takes_its_options(
    script: str, sub: str
) -> None:
    """docs/performance.md's commands may show some options only, but each one the script
    takes, with values it takes: bench/split/run.py's --mpi took any word, where the notes
    show mpich|openmpi."""
    shown = bench_synopses("docs/performance.md")[(script, sub)]
    usage = _usage(script, sub)
    assert set(_OPTION.findall(shown)) <= set(_OPTION.findall(usage)) - {"-h"}
    for option, values in _CHOICES.findall(shown):
        listed = re.search(rf"\[{option} \{{([\w,-]+)\}}\]", usage)
        assert listed is not None, f"{script}: {option} takes any value, not {values}"
        assert set(values.split("|")) <= set(listed[1].split(",")), f"{script}: {option}"


def test_the_benchmarks_synopsis_names_every_benchmark() -> None:
    """bench/run.py runs `startup` too, which its synopses (docs/commands.md, and its own
    --help) left out."""
    source = (ROOT / "bench/run.py").read_text()
    table = source[source.index("BENCHMARKS = {") : source.index("}", source.index("BENCHMARKS"))]
    benchmarks = re.findall(r'"(\w+)":', table)
    for where in ("bench/run.py" + bench_synopses()[("bench/run.py", "")], source):
        shown = re.search(r"bench/run\.py +\[(\w+(?:\|\w+)+)", where)
        assert shown is not None and shown[1].split("|") == benchmarks


def test_the_reference_names_every_pass_dhir_opt_offers() -> None:
    """docs/commands.md's dhir-opt section named dhir's passes alone, not the xDSL passes
    (canonicalize, cse, dce, licm) that `dhir-opt --help` lists too."""
    text = (ROOT / "docs/commands.md").read_text()
    section = text[text.index("## `dhir-opt`") : text.index("## Python")]
    missing = [
        name for name in all_passes() if f"`{name}`" not in section and f"`{name}{{" not in section
    ]
    assert not missing, f"docs/commands.md's dhir-opt section does not name {missing}"


# An option shown with its values in a synopsis, `--mpi mpich|openmpi`.
_CHOICES = re.compile(r"(?<![\w.-])(--?[A-Za-z][\w-]*)[ =]([a-z][\w-]*(?:\|[a-z][\w-]*)+)")


@pytest.mark.parametrize(("doc", "command"), CASES)
def test_a_synopsis_shows_the_values_the_parser_takes(doc: str, command: str) -> None:
    """Each `--option a|b|c` in a synopsis names the parser's choices for it, all of them."""
    actions = {s: a for a in parser_of(command)._actions for s in a.option_strings}
    for option, shown in _CHOICES.findall(synopses(doc)[command]):
        choices = actions[option].choices
        assert choices is not None, f"{doc}: {command} {option} takes any value, not {shown}"
        assert sorted(shown.split("|")) == sorted(choices), f"{doc}: {command} {option}"


# A command as the docs show it run: inline (`dhir run prog.mlir -n 2`) or on a line of its
# own, indented (an example, or a synopsis).
_INVOCATION = re.compile(
    r"(?:\.venv/bin/)?dhir(-opt|\s+(?:run|compile|schedule|calibrate|gantt|cache))\b"
)


def invocations(doc: str) -> list[tuple[str, str]]:
    """(command, what follows it) for each dhir command `doc` shows run."""
    text = (ROOT / doc).read_text()
    shown = re.findall(r"`((?:\.venv/bin/)?dhir[^`]*)`", text)
    shown += [line.strip() for line in text.splitlines() if re.match(r"^\s+\S*dhir", line)]
    found: list[tuple[str, str]] = []
    for words in shown:
        start = _INVOCATION.match(words)
        if start is not None:
            found.append(
                (start[1].strip() if start[1] != "-opt" else "dhir-opt", words[start.end() :])
            )
    return found


@pytest.mark.parametrize(
    "doc", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
)
def test_every_command_the_docs_show_takes_its_options(doc: str) -> None:
    """An option shown with a command is one that command takes (`dhir schedule --mpi`
    would be a usage error)."""
    wrong = []
    for command, rest in invocations(doc):
        takes = {s for a in parser_of(command)._actions for s in a.option_strings}
        wrong += [f"{command} {o}" for o in _OPTION.findall(rest) if o not in takes]
    assert not wrong, f"{doc} shows {wrong}"


# A command shown in a message, `dhir run --trace FILE`: what follows the backtick.
_SHOWN = re.compile(r"`((?:\.venv/bin/)?dhir(?:-opt)?(?: [^`]*)?)`")


def _messages() -> list[tuple[str, str]]:
    """(place, text) of each string in dhir's Python and C sources that reads as a sentence
    (it has a space; a lone `--flag` is a word of another tool's command line), docstrings
    left out, with the commands of other tools quoted in it (`sudo apt-get install
    --reinstall ...`) taken out."""
    found: list[tuple[str, str]] = []
    for source in sorted((ROOT / "dhir").rglob("*.py")):
        tree = ast.parse(source.read_text())
        documented = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and ast.get_docstring(node) is not None
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):  # an f-string: its parts as one text
                documented |= {id(part) for part in node.values}
                text = "".join(
                    p.value if isinstance(p, ast.Constant) else "{}" for p in node.values
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            if id(node) not in documented:
                found.append((f"{source.relative_to(ROOT)}:{node.lineno}", text))
    for source in sorted((ROOT / "dhir").rglob("*.[ch]")):
        for number, line in enumerate(source.read_text().splitlines(), 1):
            found += [(f"{source.relative_to(ROOT)}:{number}", s) for s in re.findall(r'"((?:[^"\\]|\\.)*)"', line)]  # fmt: skip
    return [(place, re.sub(r"`([^`]*)`", _dhir_s, text)) for place, text in found if " " in text]


def _dhir_s(quoted: re.Match[str]) -> str:
    """A quoted command of dhir's as it is; another tool's, or a quoted word, taken out."""
    return quoted[0] if _SHOWN.fullmatch(quoted[0]) else ""


def _spellings(parsers: list[argparse.ArgumentParser]) -> set[str]:
    return {s for parser in parsers for a in parser._actions for s in a.option_strings}


def test_every_option_a_message_names_is_one_dhir_takes() -> None:
    """An error that says what to do (`pass --Y`, `run dhir X --Y`) names an option that
    some command of dhir's takes, and a `dhir X ...` it quotes is a command with that option."""
    every = _spellings([build_parser(), opt_driver.build_parser()])
    every |= _spellings([parser_of(command) for command in _commands()])
    wrong: list[str] = []
    for place, text in _messages():
        wrong += [f"{place}: {o}" for o in _OPTION.findall(text) if o.startswith("--") and o not in every]  # fmt: skip
        for shown in _SHOWN.findall(text):
            words = [*shown.split(), ""]
            command = "dhir-opt" if words[0].endswith("dhir-opt") else words[1]
            if command in ("", "--help", "--version"):
                continue  # `dhir`'s own options
            if command != "dhir-opt" and command not in _commands():
                wrong.append(f"{place}: `{shown}`: no command {command}")
                continue
            takes = _spellings([parser_of(command)])
            wrong += [f"{place}: `{shown}`" for o in _OPTION.findall(shown) if o not in takes]
    assert not wrong, f"messages name options no command takes: {wrong}"
