"""Scans of a whole module, or of every task's body, that a build of a large schedule
makes go through dhir.ir.walk.find_ops (one stack, one class check per kind of op), not
xDSL's `walk()` (a generator per level, isinstance per op), which cost 0.1 s each at
10,000 tasks (docs/performance.md). Counted, not timed; the answers are checked too."""

import sys
from abc import ABCMeta
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region
from xdsl.passes import ModulePass, PassPipeline

from dhir import parse_string
from dhir.analysis import sharing
from dhir.analysis.lift import Lifter
from dhir.analysis.proven_bounds import _outermost_loops  # pyright: ignore[reportPrivateUsage]
from dhir.analysis.sharing import check_shared_data
from dhir.analysis.wrap_checks import wrap_checks
from dhir.api import run_found, run_pipeline
from dhir.backends import native
from dhir.backends.element_types import check_memref_elements
from dhir.dialects import memref, shard
from dhir.dialects.dhir import TaskOp
from dhir.ir import tasks, walk
from dhir.ir.diagnostics import DhirError
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import names_kept, task_ids
from dhir.runner import check_runnable
from dhir.toolchain.options import RunOptions
from dhir.toolchain.shards import is_shard_program
from dhir.transforms.accurate_math import AccurateMathPass
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.optimize_bodies import optimize_bodies
from dhir.transforms.place import PlacePass
from dhir.transforms.split_tasks import SplitTasksPass
from dhir.transforms.user_names import user_functions

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import programs  # noqa: E402  # pyright: ignore[reportMissingImports]
from test_wrap_checks import RUN_TIME_WRAP  # noqa: E402


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
    original = walk._found  # pyright: ignore[reportPrivateUsage]

    def counted(root: Operation, kinds: object) -> object:
        walks.append(kinds)
        return original(root, kinds)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(walk, "_found", counted)
    names = task_ids(module)
    assert walks == []
    assert list(names.values()) == [f"t{k}" for k in range(20)]


def test_task_ids_read_once_within_names_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The native backend names the tasks for its plan, dhir-place and dhir-track-tasks
    from one reading of the module; outside `names_kept`, each call reads it again."""
    module = parse_string(programs.neighbour_tasks(5))
    assert isinstance(module, ModuleOp)
    reads: list[ModuleOp] = []
    original = tasks._found_ids  # pyright: ignore[reportPrivateUsage]

    def counted(root: ModuleOp) -> dict[TaskOp, str]:
        reads.append(root)
        return original(root)

    monkeypatch.setattr(tasks, "_found_ids", counted)
    with names_kept():
        first = task_ids(module)
        first.clear()  # the caller's own copy
        again = task_ids(module)
    assert len(reads) == 1
    assert list(again.values()) == [f"t{k}" for k in range(5)]
    task_ids(module)
    task_ids(module)
    assert len(reads) == 3


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


def _instance_checks(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """Counts the `isinstance` checks that go through ABCMeta, as those against xDSL's
    op and attribute classes do (about 1 us each; 5 us for the shard dialect's 20)."""
    checks: list[type] = []
    original = ABCMeta.__instancecheck__

    def counted(cls: type, instance: object) -> bool:
        checks.append(cls)
        return original(cls, instance)

    monkeypatch.setattr(ABCMeta, "__instancecheck__", counted)
    return checks


def test_is_shard_program_without_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dhir compile` and `dhir run` ask it of every program: 0.4 s at 10,000 tasks when
    it asked each op through ABCMeta whether it was one of the dialect's 20 ops."""
    plain = parse_string(programs.neighbour_tasks(20))
    sharded = parse_string("shard.grid @grid(shape = 2)\n" + programs.neighbour_tasks(20))
    assert isinstance(plain, ModuleOp) and isinstance(sharded, ModuleOp)
    calls = _walks(monkeypatch)
    checks = _instance_checks(monkeypatch)
    assert not is_shard_program(plain)
    assert is_shard_program(sharded)
    assert calls == []
    assert checks == []


def test_is_shard_op_asks_each_class_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same answers as `isinstance`, for every op of a module (the verifier asks it
    of each), without an ABCMeta check per op."""
    module = parse_string("shard.grid @grid(shape = 2)\n" + programs.neighbour_tasks(20))
    assert isinstance(module, ModuleOp)
    ops = list(module.walk())
    want = [isinstance(op, shard.SHARD_OPS) for op in ops]
    checks = _instance_checks(monkeypatch)
    assert [shard.is_shard_op(op) for op in ops] == want
    assert checks == []
    assert want.count(True) == 1


def test_memref_elements_checked_without_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every program `dhir run` and `dhir compile` take: 0.7 s at 10,000 tasks when
    it went through `walk()` and asked each type of each op through ABCMeta. Now the
    checks do not grow with the program."""
    small, large = (parse_string(programs.neighbour_tasks(n)) for n in (20, 40))
    assert isinstance(small, ModuleOp) and isinstance(large, ModuleOp)
    check_memref_elements(small)  # each class of type asked once, here or earlier
    calls = _walks(monkeypatch)
    checks = _instance_checks(monkeypatch)
    check_memref_elements(small)
    asked = len(checks)
    check_memref_elements(large)
    assert len(checks) == 2 * asked
    assert calls == []


def test_accurate_math_walks_a_module_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its masks and the ops it changes, found in one walk of each lowered piece (two
    before); a second walk only after unmasking (tests/filecheck/transforms/accurate_math.mlir
    checks what it makes)."""
    module = parse_string(programs.neighbour_tasks(20))
    assert isinstance(module, ModuleOp)
    before = str(module)
    roots: list[str] = []
    original = walk._found

    def counted(root: Operation, kinds: object) -> object:
        roots.append(root.name)
        return original(root, kinds)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(walk, "_found", counted)
    AccurateMathPass().apply(Context(), module)
    assert roots == ["builtin.module"]
    assert str(module) == before


def test_the_checks_before_a_run_walk_the_module_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`check_runnable`'s checks of memref elements, parallel loops, kernels, copies and
    addresses share one walk of the module (five of a 10,000-task schedule cost 0.2 s);
    each still refuses what it did, first to last."""
    module = parse_string(programs.neighbour_tasks(20))
    walked: list[Operation] = []
    found = walk._found  # pyright: ignore[reportPrivateUsage]

    def counted(root: Operation, kinds: type[Operation] | tuple[type[Operation], ...]):
        if root is module:
            walked.append(root)
        return found(root, kinds)

    monkeypatch.setattr(walk, "_found", counted)
    check_runnable(module, "main")
    assert len(walked) == 1


def test_find_among_finds_what_find_ops_finds() -> None:
    module = parse_string(programs.neighbour_tasks(5))
    ops = walk.find_ops(module, Operation)
    for kinds in (TaskOp, (memref.LoadOp, memref.StoreOp), shard.GridOp):
        assert walk.find_among(module, kinds, ops) == walk.find_ops(module, kinds)


def test_wrap_checks_finds_its_loops_without_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """dhir-wrap-checks runs on each lowered piece: its ops (the arithmetic it lifts,
    affine loops and accesses) and then its loops are found without xDSL's walk, the
    checks those walks found, in the same order."""
    module = parse_string(RUN_TIME_WRAP + programs.neighbour_tasks(20).replace("@main", "@n"))
    assert isinstance(module, ModuleOp)
    calls = _walks(monkeypatch)
    checks = wrap_checks(module, Lifter())
    assert calls == []
    assert [type(check.loop).__name__ for check in checks] == ["ForOp"]
    assert [arg.name_hint for arg in checks[0].variables] == ["i"]
    assert len(checks[0].exprs) == 2  # 3 * i and i - lo


ROOT = Path(__file__).parents[2]


def test_op_kinds_are_the_classes_a_walk_meets() -> None:
    for text in (programs.neighbour_tasks(5), (ROOT / "examples" / "time_loop.mlir").read_text()):
        module = parse_string(text)
        assert walk.op_kinds(module) == {type(op) for op in module.walk()}


def _check_passes() -> dict[type[ModulePass], ModulePass]:
    """One of each pass the native build runs after dhir-lower-to-mpi, in every mode."""
    found: dict[type[ModulePass], ModulePass] = {}
    for checks in ("all", "undecided"):
        options = RunOptions(runtime_checks=checks)
        for each in native._after_passes(options, True, True, frozenset({"f"})):  # pyright: ignore[reportPrivateUsage]
            found.setdefault(type(each), each)
    return found


def test_the_checks_after_the_lowering_skip_what_a_piece_lacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ~15 passes after dhir-lower-to-mpi each walked every piece of a large build;
    those that look for kinds of op the piece holds none of are skipped, one walk telling
    (`op_kinds`, again after a pass that ran), and the piece comes out as with all run."""
    passes = native._after_passes(RunOptions(), False, False, frozenset(), "main")  # pyright: ignore[reportPrivateUsage]
    assert sum(getattr(each, "needs", None) is not None for each in passes) >= 12
    text = programs.many_tasks(40, literals=True)
    every = _lowered_for_checks(text)
    run_pipeline(every, PassPipeline(passes), verify_each=False)
    module = _lowered_for_checks(text)
    roots: list[Operation] = []
    original = walk._found  # pyright: ignore[reportPrivateUsage]

    def counted(root: Operation, *args: object) -> object:
        if root is module:
            roots.append(root)
        return original(root, *args)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(walk, "_found", counted)
    run_found(module, passes)
    assert str(module) == str(every)
    assert len(roots) <= 3  # dhir-bounds-checks' two, dhir-check-mpi's (22 before)


def _lowered_for_checks(text: str) -> ModuleOp:
    module = parse_string(text)
    placing = PlacePass(2, "round-robin", None)
    run_pipeline(module, PassPipeline((placing, LowerToMPIPass(2, "mpich", "main"))))
    return module


def test_a_pass_skipped_for_want_of_its_kinds_would_change_nothing() -> None:
    """Each pass's `needs` holds every kind of op it acts on: over the lit tests' inputs
    and the examples, a pass run on a module holding none of its kinds leaves it as it
    was (and refuses nothing)."""
    inputs = [*sorted((ROOT / "tests/filecheck/transforms").glob("*.mlir"))]
    inputs += sorted((ROOT / "examples").glob("*.mlir"))
    passes = [each for each in _check_passes().values() if getattr(each, "needs", None)]
    assert len(passes) >= 14
    tried = 0
    for path in inputs:
        try:
            module = parse_string(path.read_text(), str(path))
        except DhirError:
            continue  # an input that tests a refusal of the parser
        present = walk.op_kinds(module)
        for each in passes:
            if walk.any_of(present, each.needs):  # pyright: ignore[reportAttributeAccessIssue]
                continue
            copy = module.clone()
            each.apply(Context(), copy)
            assert str(copy) == str(module), (path.name, each.name)
            tried += 1
    assert tried > 500


def test_outermost_loops_asks_each_class_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """dhir-bounds-checks groups every access by its outermost loop: walking up from
    each access through ABCMeta checks was 0.27 s of 0.49 s at 10,000 tasks."""
    module = parse_string(programs.matmul_tasks(20, loops=True))
    assert isinstance(module, ModuleOp)
    ops = list(module.walk())
    checks = _instance_checks(monkeypatch)
    found = _outermost_loops(ops)
    assert checks == []
    assert any(loop is not None for loop in found)
