"""Task bodies of several blocks (branches with cf ops) mean what they mean in MLIR:
dhir wraps them in one scf.execute_region, which the interpreter and the native backend
both run."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.dialects.dhir import TaskOp
from dhir.dialects.scf import ExecuteRegionOp

PROGRAM = Path(__file__).parent / "data" / "task_blocks.mlir"
needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def test_the_blocks_become_one_execute_region() -> None:
    module = dhir.parse_file(PROGRAM)
    branching = [op for op in module.walk() if isinstance(op, TaskOp)][1]
    assert len(branching.body.blocks) == 1
    (region,) = [op for op in branching.body.block.ops if isinstance(op, ExecuteRegionOp)]
    assert len(region.region.blocks) == 4


@needs_llvm
def test_the_printed_form_reads_back_in_mlir_opt() -> None:
    text = dhir.print_module(dhir.parse_file(PROGRAM), generic=True)
    result = subprocess.run(
        ["mlir-opt-22", "--allow-unregistered-dialect", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@needs_llvm
@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_both_branches_equal_the_interpreter_on_two_ranks(flag: bool, mpi: str) -> None:
    a, b = np.zeros(4, np.int32), np.zeros(4, np.int32)
    expected = dhir.run(str(PROGRAM), a, b, flag, backend="interp")
    got = dhir.run(str(PROGRAM), a, b, flag, ranks=2, mpi=mpi, placement="round-robin")
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)
    assert expected[1][0] == (7 if flag else -1)
