"""One vocabulary across `dhir`'s commands (issue 28): the same option names everywhere,
a version, programs from standard input, and the documented API present."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.cli.main import build_parser, main

EXAMPLE = Path(__file__).parents[2] / "examples" / "proposal.mlir"
COMMANDS = ("run", "compile", "schedule", "calibrate")


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args([command, "--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_placement_is_called_the_same_everywhere(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help(command, capsys)
    assert "--algorithm" not in text
    if command != "calibrate":  # it places nothing
        assert "--placement" in text


def test_schedule_still_takes_the_old_name() -> None:
    parser = build_parser()
    assert parser.parse_args(["schedule", "x.mlir"]).algorithm == "best"
    assert parser.parse_args(["schedule", "x.mlir", "--placement", "peft"]).algorithm == "peft"
    assert parser.parse_args(["schedule", "x.mlir", "--algorithm", "heft"]).algorithm == "heft"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"dhir {dhir.__version__}"
    assert dhir.__version__[0].isdigit()


def test_run_reads_the_program_from_standard_input(tmp_path: Path) -> None:
    inputs = []
    for k in range(3):
        path = tmp_path / f"in{k}.npy"
        np.save(path, np.arange(20, dtype=np.int32) * (k + 1))
        inputs += ["--input", str(path)]
    command = [sys.executable, "-m", "dhir", "run", "-", "--backend", "interp", *inputs]
    command += ["--output-dir", str(tmp_path / "out")]
    done = subprocess.run(
        command, input=EXAMPLE.read_text(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    values = [np.arange(20, dtype=np.int32) * (k + 1) for k in range(3)]
    want = dhir.run(EXAMPLE, *values, backend="interp")
    for k, expected in enumerate(want):
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"arg{k}.npy"), expected)


def test_a_bad_program_on_standard_input_is_a_located_error() -> None:
    command = [sys.executable, "-m", "dhir", "run", "-", "--backend", "interp"]
    done = subprocess.run(command, input="func.func @main( {", capture_output=True, text=True)
    assert done.returncode != 0
    assert "<stdin>:1:" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_machine_api_is_where_the_docs_say(tmp_path: Path) -> None:
    """docs/machine.md names these in dhir.machine: a description written, read back and
    carried through DLTI attributes stays the same."""
    import dhir.machine as machine

    assert set(machine.__all__) >= {"System", "Node", "Device", "Link", "detect"}
    system = machine.load_local_system()
    path = tmp_path / "system.toml"
    machine.write_system(system, path)
    assert machine.read_system(path) == system
    assert machine.from_dlti(machine.to_dlti(system)) == system
    assert isinstance(system, machine.System)


def _schedule_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    import json

    assert main(["schedule", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_schedule_takes_the_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Memory per rank is that of the entry's memref arguments: given with --entry, and
    none for a program whose @main is missing."""
    program = tmp_path / "kernel.mlir"
    program.write_text(EXAMPLE.read_text().replace("@main", "@kernel"))
    found = _schedule_json(capsys, str(program), "-n", "2", "--entry", "kernel")
    assert found["schedules"][0]["schedule"] == "schedule #0 (in @kernel)"
    assert found["memory"]
    assert "memory" not in _schedule_json(capsys, str(program), "-n", "2")


def test_schedule_takes_measured_costs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A profile saying the example's CPU task (both its pieces) takes a second a piece
    makes the predicted makespan at least a second; the estimates are microseconds."""
    import json

    estimated = _schedule_json(capsys, str(EXAMPLE), "-n", "2")["schedules"][0]
    assert estimated["makespan"] < 0.5
    pieces = [name for name in estimated["assignment"] if name.startswith("task1.piece")]  # %task1
    assert len(pieces) == 2
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"tasks": dict.fromkeys(pieces, 1.0)}))
    measured = _schedule_json(capsys, str(EXAMPLE), "-n", "2", "--costs", str(costs))
    assert measured["schedules"][0]["makespan"] >= 1.0
    assert main(["schedule", "--graph", str(costs), "--costs", str(costs)]) != 0
    assert "a --graph has its own" in capsys.readouterr().err


def test_schedule_help_names_the_json_keys_it_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json`'s help shows the top-level keys a program's and a graph's output have."""
    text = " ".join(_help("schedule", capsys).split())
    program = _schedule_json(capsys, str(EXAMPLE), "-n", "2", "--simulate")
    graph_file = tmp_path / "g.json"
    graph_file.write_text('{"devices": ["d0"], "tasks": {"T": {"cost": {"d0": 1}}}, "edges": []}')
    graph = _schedule_json(capsys, "--graph", str(graph_file), "--simulate")
    keys = {*program, *program["schedules"][0], *graph}
    assert {"schedules", "memory", "makespan", "simulated_makespan"} <= keys
    for key in keys:
        assert f'"{key}"' in text, key


@pytest.mark.parametrize("command", ["run", "compile"])
def test_keep_build_help_names_the_bytecode_file_it_keeps(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CPU build keeps the LLVM dialect as bytecode (dhir.toolchain.build), and the help
    says so (tests/unit/test_keep_build.py checks every kept file against it)."""
    text = " ".join(_help(command, capsys).split())
    assert "program.llvm.mlirbc" in text and "program.ll)" in text


def test_top_level_help_and_version_load_no_compiler(capsys: pytest.CaptureFixture[str]) -> None:
    """`dhir --help` and `--version` answer from dhir/cli/names.py alone (no xDSL, NumPy or
    passes: about a second), with the full parser's text."""
    import subprocess
    import sys

    from dhir.cli.main import _top_level_parser, build_parser

    assert _top_level_parser().format_help() == build_parser().format_help()
    probe = (
        "import sys\nfrom dhir.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('xdsl', 'numpy', 'dhir.cli.commands') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "command", [["run", "p.mlir"], ["schedule", "p.mlir"], ["gantt", "t", "-o", "c.png"]]
)
def test_an_unknown_option_shows_the_commands_usage(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: dhir {command[0]} ")
    assert f"dhir {command[0]}: error: unrecognized arguments: --bogus" in err
