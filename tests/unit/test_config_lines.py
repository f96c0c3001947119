"""Errors in the content of a well-formed --constraints, --costs, --graph or --system file
are at the file:line:col of the key or value at fault, the line quoted with a caret, as
syntax errors are; a misspelt key or name says what was meant. They named the file alone."""

from collections.abc import Callable
from pathlib import Path

import pytest

from dhir.analysis.profile import load_profile
from dhir.cli.main import main
from dhir.cli.schedule import read_graph
from dhir.ir.diagnostics import DhirError, parse_json
from dhir.ir.file_lines import file_lines
from dhir.machine.files import read_system
from dhir.placement.constraints import read_constraints


def _error_at(path: Path, text: str, read: Callable[[Path], object]) -> tuple[str, str, str]:
    """Where (line:col) the error reading `text` from `path` is, its message, and its
    whole rendering."""
    path.write_text(text)
    with pytest.raises(DhirError) as error:
        read(path)
    (diagnostic,) = error.value.diagnostics
    assert diagnostic.loc is not None, str(error.value)
    assert diagnostic.loc.file == str(path)
    return f"{diagnostic.loc.line}:{diagnostic.loc.col}", diagnostic.message, str(error.value)


def _caret_under(rendered: str, token: str) -> None:
    """The quoted line has `token` where the caret points."""
    _, line, caret = rendered.splitlines()[:3]
    assert line[len(caret) - 1 :].startswith(token), (line, caret)


_PIN = '[[pin]]\ntasks = "a"\nrank = 0\n\n'


@pytest.mark.parametrize(
    ("name", "text", "at", "token", "message"),
    [
        (
            "c.toml",
            _PIN + '[[pin]]\ntasks = "b"\nrank = -1\n',
            "7:8",
            "-1",
            "[[pin]] #2: rank must",
        ),
        ("c.toml", _PIN + '[[pin]]\ntasks = "b"\nrank = "1"\n', "7:8", '"1"', "rank must be"),
        (
            "c.toml",
            '[[pin]]\ntasks = "b"\nrnak = 0\n',
            "3:1",
            "rnak",
            "[[pin]] #1: unknown key rnak (did you mean 'rank'?); it takes",
        ),
        (
            "c.toml",
            '[[pin]]\ntasks = "b"\nkind = "gpus"\n',
            "3:8",
            '"gpus"',
            "kind must be one of cpu, gpu, got \"gpus\" (did you mean 'gpu'?)",
        ),
        ("c.toml", '[[pin]]\ntasks = "b"\nrank = 0\nnode = "n"\n', "4:1", "node", "gives rank"),
        ("c.toml", _PIN + '[[pin]]\ntasks = "b"\n', "5:1", "[[pin]]", "#2 must give one of"),
        ("c.toml", _PIN + "[[apart]]\nrank = 0\n", "6:1", "rank", "unknown key rank"),
        ("c.toml", _PIN + "[[apart]]\ntasks = []\n", "6:9", "[]", "tasks is empty; give a glob"),
        ("c.toml", _PIN + "[[togther]]\n", "5:1", "[[togther]]", "(did you mean 'together'?)"),
        ("c.toml", 'pin = "a"\n', "1:7", '"a"', "'pin' must be a list of tables"),
        (
            "c.json",
            '{"pin": [{"tasks": "a", "rank": 0},\n         {"tasks": "b", "rank": 1.5}]}',
            "2:33",
            "1.5",
            "[[pin]] #2: rank must be a whole number >= 0, got 1.5",
        ),
        ("c.json", '{"apart": [{"tasks": "a"}],\n "pins": []}', "2:2", '"pins"', "unknown section"),
        # Not an object, so not found: the list it is in.
        ("c.json", '{"apart": [{"tasks": "a"},\n  3]}', "1:2", '"apart"', "[[apart]] #2 must be"),
    ],
)
def test_a_constraints_error_is_at_its_key_or_value(
    tmp_path: Path, name: str, text: str, at: str, token: str, message: str
) -> None:
    where, said, rendered = _error_at(tmp_path / name, text, read_constraints)
    assert where == at
    assert message in said
    _caret_under(rendered, token)


_PROGRAM = """
func.func @main(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %one = dhir.task %cpu, %a attributes {name = "solve"} {}
    %two = dhir.task %cpu, %a attributes {name = "load"} {}
  }
  return
}
"""


@pytest.mark.parametrize(
    ("text", "at", "message"),
    [
        (
            '[[pin]]\ntasks = "solve"\nrank = 1\n[[apart]]\ntasks = ["load", "slove"]\n',
            "5:18",
            "[[apart]] #1: 'slove' matches no task (did you mean 'solve'?); the tasks are",
        ),
        ('[[pin]]\ntasks = "solve"\nrank = 2\n', "3:8", "[[pin]] #1: rank 2 does not exist"),
        ('[[pin]]\ntasks = "solve"\nkind = "gpu"\n', "3:8", "[[pin]] #1: no rank is on kind"),
    ],
)
def test_a_constraint_the_program_cannot_meet_is_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, at: str, message: str
) -> None:
    program, rules = tmp_path / "p.mlir", tmp_path / "c.toml"
    program.write_text(_PROGRAM)
    rules.write_text(text)
    assert main(["schedule", str(program), "-n", "2", "--constraints", str(rules)]) == 1
    assert capsys.readouterr().err.startswith(f"{rules}:{at}: error: {message}")


_GRAPH = """{
  "devices": ["d0", "d1"],
  "tasks": {
    "a": {"cost": {"d0": 1.0, "d1": 2.0}},
    "b": {"cost": {"d0": 3.0, "d1": 2.0}, "memory": 10}
  },
  "edges": [{"from": "a", "to": "b", "comm": 1}],
  "capacity": {"d0": 100}
}"""


@pytest.mark.parametrize(
    ("old", "new", "at", "token", "message"),
    [
        ('"d0": 3.0', '"d0": -3', "5:26", "-3", "task 'b' on device 'd0': time must be a non-"),
        ('"to": "b"', '"to": "bb"', "7:33", '"bb"', "edge #0 to unknown task 'bb' (did you mean"),
        ('"comm"', '"comn"', "7:38", '"comn"', "edge #0 (a -> b): unknown key 'comn' (did you"),
        ('"edges"', '"egdes"', "7:3", '"egdes"', "unknown key 'egdes' (did you mean 'edges'?)"),
        ('"d0": 3.0', '"dd0": 3.0', "5:20", '"dd0"', "task 'b' has a cost on unknown device"),
        ('"memory": 10', '"memroy": 10', "5:43", '"memroy"', "task 'b': unknown key 'memroy'"),
        ('"memory": 10', '"memory": true', "5:53", "true", "task 'b' memory: size must be"),
        ('"d0": 100', '"d2": 100', "8:16", '"d2"', "capacity given for unknown device 'd2'"),
        ('"d0": 100', '"d0": -1', "8:22", "-1", "capacity of 'd0': size must be a non-negative"),
        ('["d0", "d1"]', '["d0", "d0"]', "2:14", '["d0"', "device 'd0' is listed twice"),
        ('"to": "b", "comm": 1}', '"to": "b"}, {"from": "a", "to": "b"}', "7:39", "{", "repeats"),
        ('"cost": {"d0": 1.0, "d1": 2.0}', '"cost": 3', "4:10", '{"cost"', "task 'a' needs"),
        # Fits no device, whatever the placement: at its memory.
        ('"d0": 100', '"d0": 5, "d1": 5', "5:53", "10", "task 'b' needs 10 bytes resident"),
    ],
)
def test_a_graph_error_is_at_its_key_or_value(
    tmp_path: Path, old: str, new: str, at: str, token: str, message: str
) -> None:
    assert old in _GRAPH
    where, said, rendered = _error_at(tmp_path / "g.json", _GRAPH.replace(old, new), read_graph)
    assert where == at
    assert message in said
    _caret_under(rendered, token)


_PROFILE = """{
  "format": 1,
  "tasks": {"main.schedule0.task0": 0.5, "main.schedule0.task1": 1},
  "devices": {"main.schedule0.task0": {"kind": "cpu", "rank": 0}},
  "schedules": {"main.schedule0": 1.5}
}"""


@pytest.mark.parametrize(
    ("old", "new", "at", "token", "message"),
    [
        ('"format": 1', '"format": 2', "2:13", "2", "it is a profile of format 2"),
        (": 1}", ": -1}", "3:66", "-1", 'task "main.schedule0.task1" has time -1'),
        ('"rank"', '"rnak"', "4:55", '"rnak"', 'the devices entry of task "main.schedule0.task0"'),
        ('"cpu"', '"cpus"', "4:48", '"cpus"', 'task "main.schedule0.task0" has kind "cpus"'),
        ('"cpu"', '"cpu", "arch": "sm_90"', "4:63", '"sm_90"', 'has arch "sm_90", a gpu arch'),
        ('"devices"', '"device"', "4:3", '"device"', 'a profile has the unknown key "device" (did'),
        (": 1.5}", ': "x"}', "5:35", '"x"', 'schedule "main.schedule0" has time "x"'),
    ],
)
def test_a_profile_error_is_at_its_key_or_value(
    tmp_path: Path, old: str, new: str, at: str, token: str, message: str
) -> None:
    assert old in _PROFILE
    where, said, rendered = _error_at(tmp_path / "p.json", _PROFILE.replace(old, new), load_profile)
    assert where == at
    assert said.startswith("cannot use it as task costs: ") and message in said, said
    _caret_under(rendered, token)


def test_a_profile_error_without_a_line_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("[]")
    with pytest.raises(DhirError, match=f"^error: cannot use {path} as task costs: it needs"):
        load_profile(path)


@pytest.mark.parametrize(
    ("name", "read", "text", "at"),
    [
        ("g.json", read_graph, _GRAPH.replace('"b": {', '"a": {'), "5:5"),
        ("p.json", load_profile, _PROFILE.replace('"schedules"', '"format": 1,\n  "tasks"'), "5:3"),
        ("c.json", read_constraints, '{"pin": [{"tasks": "a", "rank": 0, "rank": 1}]}', "1:36"),
        ("m.json", read_system, '{"nodes": [], "name": "a",\n "name": "b"}', "2:2"),
    ],
)
def test_a_json_key_given_twice_is_an_error_at_the_second(
    tmp_path: Path, name: str, read: Callable[[Path], object], text: str, at: str
) -> None:
    """JSON readers keep the last value of a key given twice: the first was dropped
    without a word (a task's costs, a pin's rank); TOML refuses it as a syntax error."""
    where, said, _ = _error_at(tmp_path / name, text, read)
    assert where == at
    assert said.endswith("is given twice in one object; give it once")


def test_a_key_twice_in_nested_objects_is_no_duplicate() -> None:
    assert parse_json('{"a": {"x": 1}, "b": {"x": 2}, "x": 3}', "f.json") == {
        "a": {"x": 1},
        "b": {"x": 2},
        "x": 3,
    }


def test_a_toml_value_is_found_after_its_key() -> None:
    lines = file_lines("[[pin]]\n  rank   =   -1  # a comment\n", json_format=False)
    assert lines.find(("pin", 0), "rank") == (2, 3)
    assert lines.find(("pin", 0), "rank", at_value=True) == (2, 14)
    assert lines.find(("pin", 0), "kind", at_value=True) == (1, 1)  # not written: its table
