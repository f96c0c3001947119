"""dhir-split-devices, dhir-time-tiles and dhir-split run in one order, defined once
(dhir.toolchain.rank_splits), for `dhir run` and `dhir schedule` alike: the schedule
shown is of the tasks a run places (tests/unit/test_trace.py compares the two)."""

import ast
from pathlib import Path

import pytest

from dhir import parse_string
from dhir.toolchain.rank_splits import RankSplits

DHIR = Path(__file__).resolve().parents[2] / "dhir"
SPLITS = {"SplitDevicesPass", "SplitTasksPass", "time_tiles"}


def _names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


@pytest.mark.parametrize("user", ["backends/native.py", "cli/schedule.py"])
def test_run_and_schedule_split_only_through_rank_splits(user: str) -> None:
    names = _names(DHIR / user)
    assert "RankSplits" in names
    assert not names & SPLITS  # each its own order again: they could drift apart


def test_tasks_are_split_after_devices() -> None:
    module = parse_string("func.func @main() {\n  return\n}\n", "p.mlir")
    splits = RankSplits(2)
    with pytest.raises(AssertionError, match="dhir-split-devices runs before dhir-split"):
        splits.tasks(module)
    splits.devices(module, split=False)
    assert splits.tasks(module) == []
