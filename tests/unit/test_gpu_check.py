"""tests/gpu_check.py, which runs the GPU-marked tests' programs on a lent GPU machine
(scripts/gpu_machine.sh): it must cover every test of tests/unit/test_gpu_real.py, which
runs only where a GPU is."""

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

import dhir

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import gpu_check  # noqa: E402


def _real_tests() -> set[str]:
    tree = ast.parse((ROOT / "tests" / "unit" / "test_gpu_real.py").read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_every_gpu_marked_test_has_its_cases_on_the_gpu_machine() -> None:
    """The tiled matmul with barriers (test_gpu_real.py) and the GPU calibration were run
    by no case: a lent GPU machine never ran them."""
    assert set(gpu_check.REAL_TESTS) == _real_tests()
    names = {str(case["name"]) for case in gpu_check._cases(0)}
    if callable(getattr(gpu_check, "_check_calibration", None)):
        names.add("calibration")
    missing = {t: c for t, cs in gpu_check.REAL_TESTS.items() for c in cs if c not in names}
    assert not missing


# Strided views at both ends (memref.copy calls memrefCopy), rows of contiguous elements or
# not, and a copy of one column.
STRIDED_COPIES = """
func.func @main(%a: memref<6x7x5xf64>, %b: memref<6x7x5xf64>, %c: memref<4x3xi32>,
                %d: memref<4x3xi32>) {
  %x = memref.subview %a[1, 2, 0] [3, 4, 5] [2, 1, 1]
      : memref<6x7x5xf64> to memref<3x4x5xf64, strided<[70, 5, 1], offset: 45>>
  %y = memref.subview %b[0, 1, 0] [3, 4, 5] [1, 1, 1]
      : memref<6x7x5xf64> to memref<3x4x5xf64, strided<[35, 5, 1], offset: 5>>
  memref.copy %x, %y : memref<3x4x5xf64, strided<[70, 5, 1], offset: 45>>
      to memref<3x4x5xf64, strided<[35, 5, 1], offset: 5>>
  %u = memref.subview %a[0, 0, 1] [2, 3, 2] [3, 2, 2]
      : memref<6x7x5xf64> to memref<2x3x2xf64, strided<[105, 10, 2], offset: 1>>
  %v = memref.subview %b[3, 4, 0] [2, 3, 2] [1, 1, 1]
      : memref<6x7x5xf64> to memref<2x3x2xf64, strided<[35, 5, 1], offset: 125>>
  memref.copy %u, %v : memref<2x3x2xf64, strided<[105, 10, 2], offset: 1>>
      to memref<2x3x2xf64, strided<[35, 5, 1], offset: 125>>
  %e = memref.subview %c[0, 1] [4, 1] [1, 1]
      : memref<4x3xi32> to memref<4x1xi32, strided<[3, 1], offset: 1>>
  %f = memref.subview %d[0, 2] [4, 1] [1, 1]
      : memref<4x3xi32> to memref<4x1xi32, strided<[3, 1], offset: 2>>
  memref.copy %e, %f : memref<4x1xi32, strided<[3, 1], offset: 1>>
      to memref<4x1xi32, strided<[3, 1], offset: 2>>
  return
}
"""


@pytest.mark.mlir
def test_strided_copies_need_no_library_the_gpu_machine_lacks() -> None:
    """The GPU machine lacks libMLIR.so, which LLVM 22's runner utils need: the 2-rank
    jacobi-2d and heat-3d of bench/polybench (their halo copies call memrefCopy) stopped
    at load there, and every rank elsewhere loaded 74 MB of them. dhir's runtime defines
    memrefCopy, so such a program links none of it, and copies as MLIR's does."""
    import subprocess

    from dhir.backends.native import compile_native
    from dhir.toolchain.options import RunOptions

    exe, _ = compile_native(dhir.parse_string(STRIDED_COPIES), "main", RunOptions(ranks=1))
    symbols = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True)
    assert " T memrefCopy" in symbols.stdout
    needed = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True)
    for library in ("runner_utils", "libMLIR", "libLLVM"):
        assert library not in needed.stdout, needed.stdout
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((6, 7, 5)) for _ in "ab"]
    inputs += [rng.integers(-9, 9, (4, 3)).astype(np.int32) for _ in "cd"]
    want = dhir.run(STRIDED_COPIES, *inputs, backend="interp")
    got = dhir.run(STRIDED_COPIES, *inputs, ranks=1, timeout=300)
    for g, w in zip(got, want, strict=True):
        assert g.tobytes() == w.tobytes()
