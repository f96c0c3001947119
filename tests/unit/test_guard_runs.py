"""dhir-lower-to-mpi's guards (`scf.if rank == R`) for tasks that alternate ranks: a
run of guards for different ranks holds one per rank, each task joining its rank's
(docs/performance.md, issue 27), and every rank still runs its own ops in order: the
native backend equals the interpreter bit for bit."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import dhir
from dhir import parse_string
from dhir.dialects import func, scf
from dhir.transforms.lower_to_mpi import STEP, LowerToMPIPass
from dhir.transforms.place import PlacePass

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import programs  # noqa: E402  # pyright: ignore[reportMissingImports]

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _guards_per_part(text: str, ranks: int) -> list[int]:
    """The top-level guards of each part function of `text` lowered on `ranks` ranks,
    its tasks placed round robin (so that they alternate ranks)."""
    module = parse_string(text)
    assert isinstance(module, ModuleOp)
    PlacePass(ranks, "round-robin").apply(Context(), module)
    LowerToMPIPass(ranks).apply(Context(), module)
    counts: list[int] = []
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp) and STEP in op.attributes:
            if op.attributes[STEP].data == "part":  # pyright: ignore[reportAttributeAccessIssue]
                body = op.body.block.ops
                counts.append(sum(isinstance(inner, scf.IfOp) for inner in body))
    return counts


@pytest.mark.parametrize("ranks", [2, 3])
def test_tasks_on_alternating_ranks_share_a_guard_per_rank(ranks: int) -> None:
    # 32 tasks per part, each on the rank after the last one's: a guard per task before.
    counts = _guards_per_part(programs.many_tasks(96, literals=True), ranks)
    assert counts and all(count <= ranks for count in counts), counts


def _chain(tasks: int) -> str:
    """`tasks` tasks, task k adding x[k - 1] and y[k % 5] into x[k], so that placed
    round robin each needs its predecessor's element from another rank, and each
    rank's y elements are read by the others: messages between guards of every rank."""
    t, u = f"memref<{tasks}xf64>", "memref<5xf64>"
    lines = [
        f"func.func @main(%x: {t}, %y: {u}) {{",
        "  dhir.schedule %x, %y {",
        '    %cpu = dhir.target {kind = "cpu"}',
    ]
    for k in range(1, tasks):
        lines += [
            f"    %t{k} = dhir.task %cpu, %x, %y {{",
            f"      %i = arith.constant {k - 1} : index",
            f"      %j = arith.constant {k} : index",
            f"      %m = arith.constant {k % 5} : index",
            f"      %a = memref.load %x[%i] : {t}",
            f"      %b = memref.load %y[%m] : {u}",
            "      %s = arith.addf %a, %b : f64",
            f"      memref.store %s, %x[%j] : {t}",
            f"      %c = arith.constant {k}.25 : f64",
            "      %d = arith.mulf %b, %c : f64",
            f"      memref.store %d, %y[%m] : {u}",
            "    }",
        ]
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_alternating_tasks_with_messages_equal_the_interpreter(ranks: int) -> None:
    text = _chain(40)
    assert max(_guards_per_part(text, ranks)) <= ranks  # one per task before
    rng = np.random.default_rng(ranks)
    x, y = rng.standard_normal(40), rng.standard_normal(5)
    module = parse_string(text)
    want = dhir.run(module.clone(), x, y, backend="interp")
    got = dhir.run(module, x, y, backend="native", ranks=ranks, placement="round-robin")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
