"""Many schedules in one function: the facts dhir.analysis.outputs asks of the block
(what aliases what, what is used after each schedule) and the tasks' names are found
once, not once per schedule, which made placing quadratic in the schedules (100 took
90 s). Counted, not timed; and the answers are those of walking the block anew for
each schedule, as before."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import PassPipeline

import dhir.ir.tasks
import dhir.placement.as_built
import dhir.transforms.gpu_data
from dhir import parse_string, print_module
from dhir.analysis import outputs
from dhir.analysis.outputs import dead_after, final_to_root, remembered, root_only
from dhir.api import run_pipeline
from dhir.cli.main import main
from dhir.dialects import func, memref, scf
from dhir.ir.walk import find_ops
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass

SCHEDULE = """
  %wN = memref.alloc() : memref<8xf64>
  dhir.schedule %u, %v, %wN {
    %cpu = dhir.target {kind = "cpu"}
    %aN = dhir.task %cpu, %u, %wN {
      %c1 = arith.constant 1 : index
      %x = memref.load %u[%c1] : memref<8xf64>
      memref.store %x, %wN[%c1] : memref<8xf64>
    }
    %bN = dhir.task %cpu, %wN, %v {
      %c2 = arith.constant 2 : index
      %x = memref.load %wN[%c2] : memref<8xf64>
      memref.store %x, %v[%c2] : memref<8xf64>
    }
  }"""


def program(count: int) -> str:
    body = "".join(SCHEDULE.replace("N", str(k)) for k in range(count))
    frees = "".join(f"\n  memref.dealloc %w{k} : memref<8xf64>" for k in range(0, count, 2))
    return (
        "func.func @main(%u: memref<8xf64>, %v: memref<8xf64>) {"
        f"{body}\n  %c0 = arith.constant 0 : index"
        "\n  %y = memref.load %w1[%c0] : memref<8xf64>"
        f"{frees}\n  return\n}}\n"
    )


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Count the calls of `owner.name`."""
    calls = [0]
    original: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_final_to_root_walks_the_block_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_string(program(12))
    (function,) = find_ops(module, func.FuncOp)
    walks = counting(monkeypatch, outputs, "_alias_roots")
    found = final_to_root(function)
    assert walks[0] == 1
    assert {v.name_hint for v in found} == {"u", "v"}  # only the last schedule's


def test_one_schedule_is_answered_without_walking_its_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The facts of a whole block would walk the schedule's task bodies, most of the ops
    # of a program of one large schedule: asked about that schedule, the walk skips it.
    module = parse_string(program(1).replace("%w1[", "%w0["))
    (function,) = find_ops(module, func.FuncOp)
    whole = counting(monkeypatch, outputs, "_BlockFacts")
    found = final_to_root(function)
    assert whole[0] == 0
    assert {v.name_hint for v in found} == {"u", "v"}


def test_placing_finds_the_facts_and_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_string(program(12))
    walks = counting(monkeypatch, outputs, "_alias_roots")
    names = counting(monkeypatch, dhir.ir.tasks, "task_ids")
    run_pipeline(module, PassPipeline((PlacePass(2, "best"),)))
    assert walks[0] == 1
    assert names[0] <= 1


def old_used(op: Operation, seeds: list[SSAValue], freeing: bool) -> set[SSAValue]:
    """What root_only and dead_after asked before: a walk of the block for each `op`."""
    block = op.parent_block()
    assert block is not None
    return outputs._walked(block, op, seeds, freeing)  # pyright: ignore[reportPrivateUsage]


# A loop that hands an alias of %u on (iter_args): what it yields reaches past it.
LOOP = """
func.func @main(%u: memref<8xf64>, %v: memref<8xf64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w = memref.alloc() : memref<8xf64>
  %view = memref.subview %w[0] [4] [1] : memref<8xf64> to memref<4xf64, strided<[1]>>
  %r = scf.for %t = %c0 to %n step %c1 iter_args(%x = %w) -> (memref<8xf64>) {
    dhir.schedule %u, %w {
      %cpu = dhir.target {kind = "cpu"}
      %k = dhir.task %cpu, %u, %w {
        %i = arith.constant 1 : index
        %a = memref.load %u[%i] : memref<8xf64>
        memref.store %a, %w[%i] : memref<8xf64>
      }
    }
    scf.yield %u : memref<8xf64>
  }
  %b = memref.load %r[%c1] : memref<8xf64>
  %e = memref.load %view[%c1] : memref<4xf64, strided<[1]>>
  memref.dealloc %w : memref<8xf64>
  return
}
"""


@pytest.mark.parametrize("text", [program(5), LOOP])
def test_the_answers_are_those_of_walking_anew(text: str) -> None:
    """For every top-level op, as a schedule or its time loop would ask."""
    module = parse_string(text)
    (function,) = find_ops(module, func.FuncOp)
    block = function.body.block
    args: list[SSAValue] = [a for a in block.args if isinstance(a.type, MemRefType)]
    local: list[SSAValue] = [t.results[0] for t in block.ops if isinstance(t, memref.AllocOp)]
    with remembered():
        for op in list(block.ops):
            assert root_only(op) == set(args) - old_used(op, args, False)
            for seeds in [local, local[:1], local[1::2]]:
                assert dead_after(op, seeds) == set(seeds) - old_used(op, seeds, True)
    loops = [op for op in block.ops if isinstance(op, scf.ForOp)]
    facts = outputs._BlockFacts(block)  # pyright: ignore[reportPrivateUsage]
    # The loop's result aliases %u: its answer comes from a walk without it, as before.
    assert all(facts._skip_matters(loop, args) for loop in loops)  # pyright: ignore[reportPrivateUsage]


def test_dhir_schedule_finds_the_facts_and_names_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once while making the task graphs, once while placing and showing them."""
    path = tmp_path / "many.mlir"
    path.write_text(program(12))
    walks = counting(monkeypatch, outputs, "_alias_roots")
    names = counting(monkeypatch, dhir.ir.tasks, "task_ids")
    # The as-built replay gets the dependence graph the task graph was made from.
    again = counting(monkeypatch, dhir.placement.as_built, "dependence_graph")
    assert main(["schedule", "-n", "2", "-q", str(path)]) == 0
    assert "schedule #11" in capsys.readouterr().out
    assert walks[0] <= 2
    assert names[0] <= 2
    assert again[0] == 0


@pytest.mark.parametrize("partition", [False, True])
def test_lowering_finds_the_facts_once(monkeypatch: pytest.MonkeyPatch, partition: bool) -> None:
    """The lowering asks about every schedule while it replaces the ones before."""
    module = parse_string(program(12))
    run_pipeline(module, PassPipeline((PlacePass(2, "best"),)))
    walks = counting(monkeypatch, outputs, "_alias_roots")
    run_pipeline(module, PassPipeline((LowerToMPIPass(2, partition=partition),)))
    assert walks[0] == 1


GPU_SCHEDULE = """
  dhir.schedule %tmp, %out {
    %gpu = dhir.target {kind = "gpu"}
    %tN = dhir.task %gpu, %tmp, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
        %v = memref.load %tmp[%i] : memref<4xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %tmp[%i] : memref<4xi32>
        memref.store %w, %out[%i] : memref<4xi32>
      }
    }
  }"""


def gpu_program(count: int, read_after: bool) -> str:
    """`count` schedules of a GPU task each, all listing one local buffer %tmp."""
    body = "".join(GPU_SCHEDULE.replace("N", str(k)) for k in range(count))
    read = "\n  %y = memref.load %tmp[%c0] : memref<4xi32>" if read_after else ""
    return (
        "func.func @main(%out: memref<4xi32>) {\n  %tmp = memref.alloc() : memref<4xi32>"
        f"{body}\n  %c0 = arith.constant 0 : index{read}"
        "\n  memref.dealloc %tmp : memref<4xi32>\n  return\n}\n"
    )


@pytest.mark.parametrize("read_after", [False, True])
def test_gpu_data_finds_a_local_buffers_last_use_once(
    monkeypatch: pytest.MonkeyPatch, read_after: bool
) -> None:
    """Whether %tmp is read after a schedule was found by going through all its uses for
    each schedule listing it (about 2 * 20**2 uses placed here, 1,600 at 40)."""
    count = 20
    module = parse_string(gpu_program(count, read_after))
    placed = counting(monkeypatch, dhir.transforms.gpu_data, "_ancestor_in")
    run_pipeline(module, "dhir-gpu-data")
    assert placed[0] <= 5 * count  # a schedule and its task list %tmp, which it reads and writes
    text = print_module(module)
    # Each schedule but the last copies %tmp back for the next; the last only where the
    # host reads it afterwards.
    assert text.count("gpu.memcpy %tmp, ") == count - 1 + int(read_after)
