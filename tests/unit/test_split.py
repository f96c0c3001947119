"""Large lowered modules built as several pieces at once (dhir/toolchain/split.py): the
program behaves as built whole, and what cannot move keeps the module whole."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import PassPipeline

from dhir import parse_string
from dhir.api import run_pipeline
from dhir.backends import native
from dhir.runner import run
from dhir.toolchain import build, split
from dhir.toolchain.build import Timing
from dhir.toolchain.options import RunOptions
from dhir.toolchain.split import split_module
from dhir.transforms import lower_to_mpi
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import programs  # noqa: E402

TASKS = 300  # 10 step functions of 32 tasks


def lowered(text: str, ranks: int = 2):
    module = parse_string(text)
    passes = (PlacePass(ranks, "round-robin", None), LowerToMPIPass(ranks, "mpich", "main"))
    run_pipeline(module, PassPipeline(passes), verify_each=False)
    return module


def test_steps_move_in_runs_and_the_host_module_declares_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    pieces = split_module(lowered(programs.many_tasks(TASKS, literals=True)), 3)
    assert len(pieces) == 3
    defined = [
        {op.sym_name.data for op in piece.body.block.ops if not op.is_declaration}
        for piece in pieces
    ]
    assert not (defined[0] & defined[1] or defined[0] & defined[2] or defined[1] & defined[2])
    assert "main" in defined[0] and all(defined)
    # Contiguous runs of about equal size: pieces differ by less than the largest step.
    sizes = [sum(1 for _ in piece.walk()) for piece in pieces]
    largest = max(
        sum(1 for _ in op.walk())
        for piece in pieces
        for op in piece.body.block.ops
        if op.sym_name.data != "main" and not op.is_declaration
    )
    assert max(sizes) - min(sizes) <= 2 * largest
    order = [name for names in defined for name in sorted(names, key=_part_number)]
    assert order == sorted(order, key=_part_number)
    declared = {op.sym_name.data for op in pieces[0].body.block.ops if op.is_declaration}
    assert defined[1] | defined[2] <= declared
    for piece in pieces[1:]:
        assert all(isinstance(op, func.FuncOp) for op in piece.body.block.ops)
        assert piece.attributes == pieces[0].attributes  # the MPI's DLTI, above all


def _part_number(name: str) -> int:
    return -1 if name == "main" else int(name.rpartition("part")[2])


def test_steps_are_known_by_their_mark_not_their_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's function named like a step is not one: it stays with the host code, and
    private. The steps' `dhir.step` marks leave every piece before it is printed."""
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    helper = "func.func private @util.schedule0.part99() {\n  return\n}\n"
    pieces = split_module(lowered(programs.many_tasks(TASKS, literals=True) + helper), 3)
    assert len(pieces) == 3
    first = {op.sym_name.data: op for op in pieces[0].body.block.ops}
    kept = first["util.schedule0.part99"]
    assert not kept.is_declaration and kept.sym_visibility == StringAttr("private")
    marked = [op for piece in pieces for op in piece.walk() if lower_to_mpi.STEP in op.attributes]
    assert marked == []


def test_many_steps_are_called_from_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lower_to_mpi, "CALLS_PER_GROUP", 4)
    module = lowered(programs.many_tasks(TASKS))  # 10 steps: groups of 4, 4 and 2
    functions = {op.sym_name.data: op for op in module.body.block.ops}
    called = [
        op.callee.string_value() for op in functions["main"].walk() if isinstance(op, func.CallOp)
    ]
    called = [name for name in called if not name.startswith("dhir_rt_")]  # the final messages
    assert called == [f"main.schedule0.group{k}" for k in range(3)]
    in_groups = [
        [op.callee.string_value() for op in functions[name].walk() if isinstance(op, func.CallOp)]
        for name in called
    ]
    assert sum(in_groups, []) == [f"main.schedule0.part{k}" for k in range(10)]
    assert [len(calls) for calls in in_groups] == [4, 4, 2]


def test_a_large_module_makes_more_pieces_than_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond MAX_STEPS_PER_PIECE steps a piece, mlir-opt slows down more than linearly:
    10 steps at most 4 a piece make 4 pieces on 2 cores (a multiple of the cores, so that
    none is built alone at the end), 3 on 3 cores; 1 core keeps the module whole."""
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    monkeypatch.setattr(split, "MAX_STEPS_PER_PIECE", 4)
    pieces = split_module(lowered(programs.many_tasks(TASKS, literals=True)), 2)
    assert len(pieces) == 4
    assert len(split_module(lowered(programs.many_tasks(TASKS, literals=True)), 3)) == 3
    module = lowered(programs.many_tasks(TASKS, literals=True))
    assert split_module(module, 1) == [module]


def test_a_small_module_stays_whole() -> None:
    module = lowered(programs.many_tasks(40))
    assert split_module(module, 4) == [module]


def test_a_step_calling_a_function_defined_in_the_module_stays_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    first = "      %i = arith.constant 0 : index"
    text = programs.many_tasks(TASKS).replace(
        first, "      func.call @helper() : () -> ()\n" + first
    )
    module = lowered("func.func private @helper() {\n  return\n}\n" + text)
    assert split_module(module, 3) == [module]


def _recorded_splits(monkeypatch: pytest.MonkeyPatch) -> list[list[ModuleOp]]:
    """Each split the native backend makes, as it makes it (on 3 cores, any number of
    steps per piece)."""
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    splits: list[list[ModuleOp]] = []

    def recorded(module: ModuleOp, pieces: int) -> list[ModuleOp]:
        splits.append(split_module(module, pieces))
        return splits[-1]

    monkeypatch.setattr(native, "split_module", recorded)
    return splits


def _native_equals_interpreter(seed: int, mpi: str = "mpich", tasks: int = TASKS) -> None:
    text = programs.many_tasks(tasks, literals=True)
    rng = np.random.default_rng(seed)
    inputs = [rng.random(64, dtype=np.float32) for _ in range(8)]
    expected = run(text, *inputs, backend="interp")
    actual = run(text, *inputs, ranks=2, mpi=mpi, placement="round-robin")
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.mpi
@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_a_program_built_in_pieces_computes_what_the_interpreter_does(
    monkeypatch: pytest.MonkeyPatch, mpi: str
) -> None:
    splits = _recorded_splits(monkeypatch)
    _native_equals_interpreter(7, mpi)
    assert [len(pieces) for pieces in splits] == [3]


@pytest.mark.mpi
def test_groups_and_their_steps_in_different_pieces_compute_what_the_interpreter_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lower_to_mpi, "STEPS_PER_FUNCTION", 4)
    monkeypatch.setattr(lower_to_mpi, "CALLS_PER_GROUP", 3)
    splits = _recorded_splits(monkeypatch)
    # Where the pieces' edges fall depends on the host function's size: with 200 tasks
    # one falls inside a group.
    _native_equals_interpreter(11, tasks=200)
    (modules,) = splits
    declared_across = [
        op.sym_name.data
        for piece in modules[1:]
        for op in piece.body.block.ops
        if op.is_declaration and ".part" in op.sym_name.data
    ]
    assert declared_across  # a group called steps another piece holds


@pytest.mark.mpi
def test_pieces_are_cached_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Printed pieces build while the next ones print; a piece that did not change is
    not built again, and a program whose pieces are all known links nothing anew."""
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    splits = _recorded_splits(monkeypatch)
    ran: list[str] = []
    real_run = build.run_stage

    def counted(timing, stage, cwd, command):  # noqa: ANN001, ANN202
        ran.append(stage)
        real_run(timing, stage, cwd, command)

    monkeypatch.setattr(build, "run_stage", counted)

    def compiled(text: str) -> tuple[Path, Timing]:
        timing = Timing()
        exe, _ = native.compile_native(
            parse_string(text),
            "main",
            RunOptions(ranks=2, mpi="mpich", placement="round-robin"),
            timing=timing,
        )
        return exe, timing

    text = programs.many_tasks(TASKS, literals=True)
    exe, timing = compiled(text)
    assert [len(pieces) for pieces in splits] == [3]
    assert ran.count("mlir-opt") == 3 and ran.count("link") == 1
    assert "print" in dict(timing.stages)
    assert sorted(p.name for p in exe.parent.glob("program*.mlir*")) == [
        f"program{k}{suffix}" for k in range(3) for suffix in (".llvm.mlirbc", ".mlir")
    ]
    assert all(p.is_file() for p in exe.parent.glob("program*"))  # no link left dangling
    assert "int main" in (exe.parent / "harness.c").read_text()
    ran.clear()
    assert compiled(text)[0] == exe
    assert ran == []
    # The last task's constant lives in the last piece only.
    changed = text.replace(f"arith.constant {TASKS - 1}.5 : f32", "arith.constant 0.25 : f32")
    assert changed != text
    assert compiled(changed)[0] != exe
    assert ran.count("mlir-opt") == 1 and ran.count("link") == 1
