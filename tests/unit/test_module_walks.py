"""Scans of a whole module, or of every task's body, that a build of a large schedule
makes go through dhir.ir.walk.find_ops (one stack, one class check per kind of op), not
xDSL's `walk()` (a generator per level, isinstance per op), which cost 0.1 s each at
10,000 tasks (docs/performance.md). Counted, not timed; the answers are checked too."""

import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region

from dhir import parse_string
from dhir.transforms.optimize_bodies import optimize_bodies
from dhir.transforms.user_names import user_functions

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import programs  # noqa: E402  # pyright: ignore[reportMissingImports]


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the calls of xDSL's walks of an op and of a region."""
    calls: list[str] = []
    for owner in (Operation, Region):
        original = owner.walk

        def counted(self: object, *args: object, original: object = original, **kw: object):
            calls.append(type(self).__name__)
            return original(self, *args, **kw)  # pyright: ignore

        monkeypatch.setattr(owner, "walk", counted)
    return calls


def test_user_functions_finds_functions_without_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_string(
        programs.neighbour_tasks(20)
        + "\nfunc.func @helper() {\n  return\n}\nfunc.func private @exp(f64) -> f64\n"
    )
    assert isinstance(module, ModuleOp)
    calls = _walks(monkeypatch)
    assert user_functions(module, "main") == {"helper"}
    assert calls == []


def test_optimize_bodies_looks_at_plain_tasks_without_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tasks without a contraction or a loop in a loop (every task of neighbour_tasks):
    nothing to do, found in one pass over each body."""
    module = parse_string(programs.neighbour_tasks(20))
    assert isinstance(module, ModuleOp)
    before = str(module)
    calls = _walks(monkeypatch)
    assert optimize_bodies(module, 256) == []
    assert calls == []
    assert str(module) == before
