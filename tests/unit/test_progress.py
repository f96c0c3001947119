"""The status line of `dhir run` and `dhir compile` (dhir/toolchain/progress.py): on a
terminal, a stage running longer than SHOW_AFTER_S shows its name and seconds, and the line
is cleared at the end; nothing is written with -q or when standard error is no terminal."""

import io
import time

import pytest

from dhir.cli.main import build_parser
from dhir.toolchain import progress
from dhir.toolchain.build import Timing


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.05)
    monkeypatch.setattr(progress, "TICK_S", 0.01)


def _run(stream: io.StringIO, quiet: bool) -> None:
    timing = Timing()
    with progress.status_line("dhir run", quiet, stream):
        with timing.stage("mlir-opt"):
            time.sleep(0.3)
        with timing.stage("quick"):
            pass


def test_a_long_stage_is_shown_and_cleared_on_a_terminal(fast: None) -> None:
    out = Terminal()
    _run(out, quiet=False)
    text = out.getvalue()
    assert "\r\x1b[Kdhir run: mlir-opt ... 0 s" in text
    assert "quick" not in text  # shorter than SHOW_AFTER_S
    assert text.endswith("\r\x1b[K")
    assert progress.listener() is None


@pytest.mark.parametrize("stream", [Terminal(), io.StringIO()], ids=["quiet", "no-terminal"])
def test_nothing_is_written_when_quiet_or_not_on_a_terminal(
    fast: None, stream: io.StringIO
) -> None:
    _run(stream, quiet=isinstance(stream, Terminal))
    assert stream.getvalue() == ""


def test_run_compile_and_schedule_take_quiet() -> None:
    parser = build_parser()
    for command in (["run", "f.mlir"], ["compile", "f.mlir", "-o", "x"], ["schedule", "f.mlir"]):
        assert parser.parse_args([*command, "-q"]).quiet
