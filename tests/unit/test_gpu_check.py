"""tests/gpu_check.py, which runs the GPU-marked tests' programs on a lent GPU machine
(scripts/gpu_machine.sh): it must cover every test of tests/unit/test_gpu_real.py, which
runs only where a GPU is."""

import ast
import sys
from pathlib import Path

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
