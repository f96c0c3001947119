"""Scans of a whole module, or of every task's body, that a build of a large schedule
makes go through dhir.ir.walk.find_ops (one stack, one class check per kind of op), not
xDSL's `walk()` (a generator per level, isinstance per op), which cost 0.1 s each at
10,000 tasks (docs/performance.md). Counted, not timed; the answers are checked too."""

import sys
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region

from dhir import parse_string
from dhir.analysis import sharing
from dhir.analysis.sharing import check_shared_data
from dhir.ir import tasks, walk
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import task_ids
from dhir.transforms.optimize_bodies import optimize_bodies
from dhir.transforms.split_tasks import SplitTasksPass
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


GLOBAL_IN_TASK = """
memref.global "private" @g : memref<4xi32> = dense<[1, 2, 3, 4]>
func.func @main(%b: memref<4xi32>) {
  dhir.schedule %b {
    %t0 = dhir.task target = "cpu", %b {
      %c0 = arith.constant 0 : index
      %x = memref.load %b[%c0] : memref<4xi32>
      memref.store %x, %b[%c0] : memref<4xi32>
    }
    %t1 = dhir.task target = "cpu" {
      %g = memref.get_global @g : memref<4xi32>
      %c0 = arith.constant 0 : index
      %x = arith.constant 42 : i32
      memref.store %x, %g[%c0] : memref<4xi32>
    }
  }
  func.return
}
"""


def _module_walks(monkeypatch: pytest.MonkeyPatch, module: ModuleOp) -> list[object]:
    """The kinds sharing's walks of the whole of `module` look for."""
    kinds: list[object] = []
    original = sharing.find_ops

    def counted(root: Operation, of: object) -> object:
        if root is module:
            kinds.append(of)
        return original(root, of)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(sharing, "find_ops", counted)
    return kinds


def test_check_shared_data_walks_the_module_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls, taken addresses and uses of globals, found in one walk (three before)."""
    module = parse_string(programs.neighbour_tasks(20))
    assert isinstance(module, ModuleOp)
    walks = _module_walks(monkeypatch, module)
    check_shared_data(module)
    assert len(walks) == 1
    refused = parse_string(GLOBAL_IN_TASK)
    assert isinstance(refused, ModuleOp)
    walks = _module_walks(monkeypatch, refused)
    with pytest.raises(PassFailedAt, match="this task uses the mutable memref.global @g"):
        check_shared_data(refused)
    assert len(walks) == 1


def test_task_ids_finds_schedules_outside_task_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schedules are found without walking the tasks' bodies (no schedule is nested in
    a task), which hold most of the ops; twice a build (dhir-place, dhir-track-tasks)."""
    module = parse_string(programs.neighbour_tasks(20))
    assert isinstance(module, ModuleOp)
    walks: list[object] = []
    original = tasks.find_ops

    def counted(root: Operation, of: object) -> object:
        walks.append(of)
        return original(root, of)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(tasks, "find_ops", counted)
    names = task_ids(module)
    assert walks == []
    assert list(names.values()) == [f"t{k}" for k in range(20)]


def test_split_finds_tasks_outside_task_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_string(programs.neighbour_tasks(20))
    assert isinstance(module, ModuleOp)
    before = str(module)
    roots: list[str] = []
    original = walk._found

    def counted(root: Operation, kinds: object) -> object:
        roots.append(root.name)
        return original(root, kinds)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(walk, "_found", counted)
    SplitTasksPass(2).apply(Context(), module)
    assert "builtin.module" not in roots  # no walk of every op
    assert str(module) == before  # no task of this program is split
