"""dhir-lower-to-mpi calls `dhir_rt_task_switch(id)` in place of the previous task's
`dhir_rt_task_leave` and the next one's `dhir_rt_task_enter` where nothing runs between
the two tasks (dhir-track-tasks' `switch_tasks`): fewer calls, the same rank state and
trace (a rank that dies in such a task names it; test_trace.py's runs)."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from test_toolchain import need
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block

import dhir
from dhir import DhirError, parse_string
from dhir.dialects import func
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass
from dhir.transforms.track_tasks import ENTER, LEAVE, SWITCH, TrackTasksPass

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import programs  # noqa: E402  # pyright: ignore[reportMissingImports]

native = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _lowered(text: str, ranks: int) -> ModuleOp:
    module = parse_string(text)
    assert isinstance(module, ModuleOp)
    PlacePass(ranks, "round-robin").apply(Context(), module)
    TrackTasksPass().apply(Context(), module)
    LowerToMPIPass(ranks).apply(Context(), module)
    return module


def _tracking(block: Block) -> list[str]:
    return [
        op.callee.string_value()
        for op in block.ops
        if isinstance(op, func.CallOp) and op.callee.string_value() in (ENTER, LEAVE, SWITCH)
    ]


def _check_blocks(module: ModuleOp) -> dict[str, int]:
    """Counts of the three calls; in each block, they open a task, go from one to the
    next, and close it, in that order."""
    counts = dict.fromkeys((ENTER, LEAVE, SWITCH), 0)
    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                open_ = False
                for callee in _tracking(block):
                    counts[callee] += 1
                    assert open_ == (callee != ENTER), _tracking(block)
                    open_ = callee != LEAVE
                assert not open_
    return counts


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_tasks_one_after_another_switch_in_one_call(ranks: int) -> None:
    # Round robin: each rank's tasks of a part share one guard (test_guard_runs.py).
    module = _lowered(programs.many_tasks(96, literals=True), ranks)
    counts = _check_blocks(module)
    runs = counts[ENTER]
    assert counts[LEAVE] == runs and runs + counts[SWITCH] == 96
    assert runs == 3 * ranks, counts  # a run per rank in each of the 3 parts
    declared = [op.sym_name.data for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    assert SWITCH in declared


def test_a_message_between_two_tasks_keeps_them_apart() -> None:
    # Task k needs x[k - 1] from task k - 1, on the other rank: a receive before each.
    module = _lowered(_chain(20), 2)
    assert _check_blocks(module) == {ENTER: 19, LEAVE: 19, SWITCH: 0}


def _chain(tasks: int) -> str:
    t = f"memref<{tasks}xf64>"
    lines = [f"func.func @main(%x: {t}) {{", "  dhir.schedule %x {"]
    lines.append('    %cpu = dhir.target {kind = "cpu"}')
    for k in range(1, tasks):
        lines += [
            f"    %t{k} = dhir.task %cpu, %x {{",
            f"      %i = arith.constant {k - 1} : index",
            f"      %j = arith.constant {k} : index",
            f"      %a = memref.load %x[%i] : {t}",
            f"      memref.store %a, %x[%j] : {t}",
            "    }",
        ]
    return "\n".join([*lines, "  }", "  return", "}", ""])


# Two tasks on rank 0 with nothing between them; the second divides by %arg.
ADJACENT = """func.func @main(%a: memref<4xi32>, %arg: i32) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %first = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1 : i32
      memref.store %one, %a[%c0] : memref<4xi32>
    }
    %dies = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %x = memref.load %a[%c0] : memref<4xi32>
      %d = arith.divsi %x, %arg : i32
      memref.store %d, %a[%c1] : memref<4xi32>
    }
  }
  return
}
"""


@native
@pytest.mark.mpi
def test_a_rank_that_dies_in_a_task_switched_to_names_it(tmp_path: Path) -> None:
    need("mpich")
    program = tmp_path / "adjacent.mlir"
    program.write_text(ADJACENT)
    a = np.zeros(4, np.int32)
    with pytest.raises(DhirError, match=f"rank 0 died while running task dies at {program}:9"):
        dhir.run(program, a, np.int32(0), ranks=2, output_dir=tmp_path / "out")
    result = dhir.run(program, a, np.int32(1), ranks=2, output_dir=tmp_path / "out")
    assert result[0].tolist() == [1, 1, 0, 0]


@native
@pytest.mark.mpi
def test_a_trace_shows_both_tasks_of_a_switch(tmp_path: Path) -> None:
    need("mpich")
    program, trace = tmp_path / "adjacent.mlir", tmp_path / "run.json"
    program.write_text(ADJACENT)
    a = np.zeros(4, np.int32)
    dhir.run(program, a, np.int32(1), ranks=2, trace=trace, output_dir=tmp_path / "out")
    events = json.loads(trace.read_text())["traceEvents"]
    tasks = sorted((e for e in events if e.get("cat") == "task"), key=lambda e: e["ts"])
    assert [(e["name"], e["pid"]) for e in tasks] == [("first", 0), ("dies", 0)]
    assert tasks[0]["ts"] + tasks[0]["dur"] <= tasks[1]["ts"] + 1e-3
