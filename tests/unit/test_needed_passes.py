"""mlir-opt skips the passes of the build pipeline that would find nothing to do in a
module (dhir.toolchain.build.needed_passes): the output is what the whole pipeline
gives."""

import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.passes import PassPipeline

from dhir.api import parse_string, print_module, run_pipeline
from dhir.toolchain.build import MLIR_OPT_PIPELINE, needed_passes
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import programs  # noqa: E402

MATH = "math.sqrt"


def test_dialect_passes_are_skipped_only_without_every_dialect() -> None:
    plain = needed_passes(MLIR_OPT_PIPELINE, "func.func @f() {\n  return\n}")
    assert not [flag for flag in plain if "linalg" in flag or "vector" in flag or "math" in flag]
    assert plain == [f for f in MLIR_OPT_PIPELINE if f in plain]  # in order
    assert "--lower-affine" in plain and "--convert-to-llvm" in plain
    for word in ("linalg.matmul", "vector<4xf32>", MATH):
        assert needed_passes(MLIR_OPT_PIPELINE, f"... {word} ...") == list(MLIR_OPT_PIPELINE)


def _lowered(text: str) -> str:
    module = parse_string(text)
    passes = (PlacePass(2, "round-robin", None), LowerToMPIPass(2, "mpich", "main"))
    run_pipeline(module, PassPipeline(passes), verify_each=False)
    return print_module(module)


def _mlir_opt(passes: list[str], text: str, tmp_path: Path) -> str:
    source = tmp_path / "in.mlir"
    source.write_text(text)
    command = [str(find_llvm_tools().mlir_opt), *passes, str(source)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


# Each dialect the skipped passes lower, alone in a module (vector types without vector
# ops too): what needed_passes keeps must lower it as the whole pipeline does.
ONE_DIALECT = [
    "func.func @f(%a: memref<4xf32>, %b: memref<4xf32>) {\n"
    "  linalg.copy ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)\n  return\n}\n",
    "func.func @f(%a: memref<8xf32>, %i: index) -> vector<4xf32> {\n"
    "  %v = vector.load %a[%i] : memref<8xf32>, vector<4xf32>\n  return %v : vector<4xf32>\n}\n",
    "func.func @f(%x: vector<4xf32>) -> vector<4xf32> {\n"
    "  %y = arith.addf %x, %x : vector<4xf32>\n  return %y : vector<4xf32>\n}\n",
    "func.func @f(%x: f32, %n: i64) -> f32 {\n  %y = math.sqrt %x : f32\n"
    "  %z = math.fpowi %y, %n : f32, i64\n  return %z : f32\n}\n",
]


@pytest.mark.mlir
@pytest.mark.parametrize(
    "text",
    [
        _lowered(programs.neighbour_tasks(20)),
        _lowered(programs.many_tasks(40, literals=True)),
        _lowered(programs.dag20(8, 2)),
        *ONE_DIALECT,
    ],
    ids=["neighbours", "many_tasks", "dag20", "linalg", "vector", "vector-type", "math"],
)
def test_skipping_changes_nothing(text: str, tmp_path: Path) -> None:
    """A math op alone once made different (equivalent) control flow when the vector and
    linalg passes were skipped."""
    needed = needed_passes(MLIR_OPT_PIPELINE, text)
    assert (len(needed) < len(MLIR_OPT_PIPELINE)) == (text not in ONE_DIALECT)
    assert _mlir_opt(needed, text, tmp_path) == _mlir_opt(list(MLIR_OPT_PIPELINE), text, tmp_path)
