"""Ctrl-C while a command starts up (xDSL, NumPy and the passes loading) ends as it does
later: `interrupted` on standard error, exit status 130, no traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"

# As the console scripts do (pyproject.toml), with SIGINT sent to the process the moment
# it first imports MODULE: a real signal, at a known point of the start-up. SIGINT gets
# Python's handler as from a terminal (a background job, as under CI, inherits it ignored).
_PROBE = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)

trigger = sys.argv.pop(1)

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == trigger:
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
from {module} import main
sys.exit(main())
"""


def _started(entry: str, trigger: str, *args: str) -> subprocess.CompletedProcess[str]:
    probe = _PROBE.format(module=entry)
    command = [sys.executable, "-c", probe, trigger, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("entry", "trigger", "args"),
    [
        ("dhir.cli.main", "xdsl", ["schedule", str(EXAMPLES / "vector_add.mlir"), "-n", "2"]),
        ("dhir.cli.main", "xdsl", ["compile", str(EXAMPLES / "vector_add.mlir"), "-o", "x"]),
        ("dhir.cli.main", "numpy", ["gantt", "trace.json", "-o", "chart.png"]),
        ("dhir.cli.main", "dhir.cli.cached_run", ["run", str(EXAMPLES / "vector_add.mlir")]),
        ("dhir.cli.dhir_opt", "xdsl", [str(EXAMPLES / "vector_add.mlir")]),
    ],
)
def test_ctrl_c_during_start_up_says_interrupted(entry: str, trigger: str, args: list[str]) -> None:
    result = _started(entry, trigger, *args)
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == "interrupted"
    assert result.returncode == 130
