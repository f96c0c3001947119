"""`--keep-build DIR` (`keep_build=` in the API): what the build made, kept; and the kept
executable run with mpirun directly, as docs/commands.md says, gives dhir's results."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import DhirError
from dhir.cli.main import main
from dhir.toolchain.tools import find_mpi

ROOT = Path(__file__).parents[2]
TIME_LOOP = ROOT / "examples" / "time_loop.mlir"
pytestmark = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _help(command: str) -> str:
    """`dhir COMMAND --help`, on one line."""
    done = subprocess.run(
        [sys.executable, "-m", "dhir", command, "--help"], capture_output=True, text=True
    )
    return " ".join(done.stdout.split())


def _inputs() -> list[object]:
    return [np.arange(16.0), np.zeros(16), 3]


def test_the_kept_build_holds_every_stage_and_runs_under_mpirun(tmp_path: Path) -> None:
    kept = tmp_path / "build"
    got = dhir.run(TIME_LOOP, *_inputs(), ranks=2, keep_build=kept)
    names = {p.name for p in kept.iterdir()}
    assert {"program", "program.mlir", "program.ll", "harness.c"} <= names, names
    assert "program.llvm.mlirbc" in names, names  # a CPU build's LLVM dialect, as bytecode
    help_text = _help("run")
    for name in names:
        assert name in help_text, name  # --keep-build's help names each file kept
    assert "dhir.schedule" not in (kept / "program.mlir").read_text()  # lowered already
    assert "define" in (kept / "program.ll").read_text()
    # EXE OUTDIR ARG0.raw ARG1.raw STEPS: raw little-endian arrays in, argK.raw out.
    for k, array in enumerate(_inputs()[:2]):
        np.asarray(array).astype("<f8").tofile(tmp_path / f"in{k}.raw")
    out = tmp_path / "out"
    out.mkdir()
    mpirun = find_mpi("mpich").mpirun
    command = [str(mpirun), "-n", "2", str(kept / "program"), str(out)]
    command += [str(tmp_path / "in0.raw"), str(tmp_path / "in1.raw"), "3"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DHIR_")}
    subprocess.run(command, check=True, timeout=120, env=env, capture_output=True)
    for k in (0, 1):
        np.testing.assert_array_equal(np.fromfile(out / f"arg{k}.raw", "<f8"), got[k])


def test_compile_keeps_its_build_and_a_built_executable_has_none_to_keep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exe, kept = tmp_path / "loop", tmp_path / "kept"
    assert main(["compile", str(TIME_LOOP), "-o", str(exe), "--keep-build", str(kept)]) == 0
    assert (kept / "program.ll").is_file() and (kept / "program").is_file()
    code = main(["run", str(exe), "--keep-build", str(tmp_path / "again"), "--input", "x.npy"])
    assert code != 0 and "--keep-build" in capsys.readouterr().err


def test_the_interpreter_builds_nothing_to_keep(tmp_path: Path) -> None:
    with pytest.raises(DhirError, match="keep_build: the interpreter builds nothing to keep"):
        dhir.run(TIME_LOOP, *_inputs(), backend="interp", keep_build=tmp_path / "kept")
