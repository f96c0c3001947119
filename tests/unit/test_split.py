"""Large programs built as several pieces, each built while the rest is lowered
(dhir/toolchain/split.py): the program behaves as built whole, and what cannot move
stays in the host module."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import PassPipeline

from dhir import parse_string
from dhir.api import run_pipeline
from dhir.backends import native
from dhir.ir.diagnostics import DhirError
from dhir.runner import run
from dhir.toolchain import build, split
from dhir.toolchain.build import Timing
from dhir.toolchain.options import RunOptions
from dhir.toolchain.split import StepPieces, piece_count, unmark_steps
from dhir.transforms import lower_to_mpi
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import programs  # noqa: E402
from strategies import CPU_TARGETS, RandomSchedule, random_inputs, ranked_cases  # noqa: E402

TASKS = 300  # 10 parts of 32 tasks


def placed(text: str, ranks: int = 2) -> ModuleOp:
    module = parse_string(text)
    run_pipeline(module, PassPipeline((PlacePass(ranks, "round-robin", None),)), verify_each=False)
    return module


def lowered(text: str, ranks: int = 2) -> ModuleOp:
    module = placed(text, ranks)
    run_pipeline(module, PassPipeline((LowerToMPIPass(ranks, "mpich", "main"),)))
    return module


def cut(module: ModuleOp, per_piece: int) -> list[ModuleOp]:
    """The pieces StepPieces cuts off `module` as it is lowered."""
    pieces = StepPieces(module, per_piece)
    made = [pieces.add(part) for part in LowerToMPIPass(2, "mpich", "main").lower(module)]
    last = pieces.flush()
    return [piece for piece in [*made, last] if piece is not None]


def defined(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.body.block.ops if not op.is_declaration]


def test_parts_move_in_runs_and_the_host_module_declares_them() -> None:
    module = placed(programs.many_tasks(TASKS, literals=True))
    pieces = cut(module, 4)
    assert [defined(piece) for piece in pieces] == [
        [f"main.schedule0.part{k}" for k in range(first, min(first + 4, 10))] for first in (0, 4, 8)
    ]
    assert defined(module) == ["main"]  # 10 parts: no groups
    declared = {op.sym_name.data for op in module.body.block.ops if op.is_declaration}
    assert {name for piece in pieces for name in defined(piece)} <= declared
    for piece in pieces:
        assert all(isinstance(op, func.FuncOp) for op in piece.body.block.ops)
        assert piece.attributes == module.attributes  # the MPI's DLTI, above all
        for op in piece.body.block.ops:
            assert lower_to_mpi.STEP not in op.attributes
            assert op.is_declaration == (op.sym_visibility == StringAttr("private"))
    # Each piece declares the runtime functions its parts call, as the host module does.
    runtime = {op.sym_name.data for op in module.body.block.ops if "dhir_rt_" in op.sym_name.data}
    for piece in pieces:
        calls = {op.callee.string_value() for op in piece.walk() if isinstance(op, func.CallOp)}
        declared_here = {op.sym_name.data for op in piece.body.block.ops if op.is_declaration}
        assert calls == declared_here and declared_here <= runtime


def test_steps_are_known_by_their_mark_not_their_name() -> None:
    """A user's function named like a step is not one: it stays with the host code, and
    private; the marks of the steps left in the host module come off."""
    helper = "func.func private @util.schedule0.part99() {\n  return\n}\n"
    module = placed(programs.many_tasks(TASKS, literals=True) + helper)
    pieces = cut(module, 4)
    assert len(pieces) == 3
    kept = {op.sym_name.data: op for op in module.body.block.ops}["util.schedule0.part99"]
    assert not kept.is_declaration and kept.sym_visibility == StringAttr("private")
    unmark_steps(module)
    marked = [op for op in module.walk() if lower_to_mpi.STEP in op.attributes]
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


def test_a_large_program_makes_more_pieces_than_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond MAX_STEPS_PER_PIECE parts a piece, mlir-opt slows down more than linearly:
    10 parts at most 4 a piece make 4 pieces on 2 cores (a multiple of the cores, so that
    none is built alone at the end), 3 on 3 cores; 1 core builds the program whole, and so
    do too few parts."""
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    monkeypatch.setattr(split, "MAX_STEPS_PER_PIECE", 4)
    assert [piece_count(10, cores) for cores in (1, 2, 3)] == [1, 4, 3]
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 16)
    assert piece_count(20, 4) == 1


def test_a_part_calling_a_function_defined_in_the_module_stays() -> None:
    """It could not call the module's private function from another module; nor do the
    parts after it move (they would be placed after it)."""
    first = "      %i = arith.constant 0 : index"
    head, tail = programs.many_tasks(TASKS).split("    %t192 = ")
    tail = tail.replace(first, "      func.call @helper() : () -> ()\n" + first)
    text = f"func.func private @helper() {{\n  return\n}}\n{head}    %t192 = {tail}"
    module = placed(text)
    pieces = cut(module, 2)
    moved = [name for piece in pieces for name in defined(piece)]
    assert moved == [f"main.schedule0.part{k}" for k in range(6)]  # tasks 0-191
    assert [f"main.schedule0.part{k}" for k in range(6, 10)] == defined(module)[-4:]


def _recorded_pieces(monkeypatch: pytest.MonkeyPatch) -> list[ModuleOp]:
    """Each piece the native backend cuts off, as it does (on 3 cores, any number of
    parts per piece)."""
    monkeypatch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    pieces: list[ModuleOp] = []

    class Recorded(StepPieces):
        def flush(self) -> ModuleOp | None:
            piece = super().flush()
            if piece is not None:
                pieces.append(piece)
            return piece

    monkeypatch.setattr(native, "StepPieces", Recorded)
    return pieces


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
    pieces = _recorded_pieces(monkeypatch)
    _native_equals_interpreter(7, mpi)
    assert len(pieces) == 3


@pytest.mark.mpi
def test_groups_and_their_steps_in_different_pieces_compute_what_the_interpreter_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lower_to_mpi, "STEPS_PER_FUNCTION", 4)
    monkeypatch.setattr(lower_to_mpi, "CALLS_PER_GROUP", 3)
    pieces = _recorded_pieces(monkeypatch)
    _native_equals_interpreter(11, tasks=200)  # 50 parts, called from 17 groups
    moved = [name for piece in pieces for name in defined(piece)]
    assert len(pieces) == 3 and len(moved) == 50
    assert all(".part" in name for name in moved)  # the groups stay with the host code


@pytest.mark.mpi
def test_pieces_are_cached_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces build while the rest is lowered; a piece that did not change is
    not built again, and a program whose pieces are all known links nothing anew."""
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    pieces = _recorded_pieces(monkeypatch)
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
    assert len(pieces) == 3
    assert ran.count("mlir-opt") == 4 and ran.count("link") == 1  # and the host module
    assert "print" in dict(timing.stages)
    assert sorted(p.name for p in exe.parent.glob("program*.mlir*")) == [
        f"program{k}{suffix}" for k in range(4) for suffix in (".llvm.mlirbc", ".mlir")
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


def test_an_op_refused_in_a_piece_is_an_error_at_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks after the lowering (here dhir-mlir22-workarounds') run on each piece as
    it is cut off: a refusal stops the build. (An mpi op in a task, which dhir-check-mpi
    refused here, is refused before the build now.)"""
    pieces = _recorded_pieces(monkeypatch)
    head, tail = programs.many_tasks(TASKS).split("    %t250 = ")
    first = "      %i = arith.constant 0 : index"
    scale = "      %vs = vector.vscale\n"
    text = f"{head}    %t250 = {tail.replace(first, scale + first, 1)}"
    line = text[: text.index("vector.vscale")].count("\n") + 1
    inputs = [np.zeros(64, np.float32) for _ in range(8)]
    with pytest.raises(DhirError, match=rf"prog.mlir:{line}:\d+: .*vector\.vscale"):
        run(parse_string(text, "prog.mlir"), *inputs, ranks=2, placement="round-robin")
    assert len(pieces) == 2  # the second holds task 250: the lowering stopped there


@pytest.mark.mpi
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ranked_cases((2, 3), 24, 5, CPU_TARGETS))
def test_random_schedules_built_in_pieces_equal_the_interpreter(
    case: tuple[int, RandomSchedule, int],
) -> None:
    """Random task graphs and placements, cut into pieces of a part of 2 tasks each (parts
    called from groups of 2) while they are lowered: bit for bit the interpreter's."""
    ranks, program, seed = case
    note(f"on {ranks} ranks, the program:\n{program.text()}")
    inputs = random_inputs(program, seed)
    oracle = run(program.text(), *inputs, backend="interp")
    made: list[ModuleOp] = []

    class Recorded(StepPieces):
        def flush(self) -> ModuleOp | None:
            piece = super().flush()
            made.extend([piece] if piece is not None else [])
            return piece

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lower_to_mpi, "STEPS_PER_FUNCTION", 2)
        patch.setattr(lower_to_mpi, "CALLS_PER_GROUP", 2)
        patch.setattr(split, "MIN_STEPS_PER_PIECE", 1)
        patch.setattr(os, "cpu_count", lambda: 3)
        patch.setattr(native, "StepPieces", Recorded)
        got = run(program.text(), *inputs, ranks=ranks, timeout=120)
    assert made or len(program.tasks) < 4  # the path under test was taken
    for native_out, want in zip(got, oracle, strict=True):
        assert native_out.tobytes() == want.tobytes()
