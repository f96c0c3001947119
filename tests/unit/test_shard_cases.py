"""MLIR's own shard test cases (tests/unit/shard_cases.py) run on dhir's ranks: each on 2
and 4 ranks (or the grid its shapes name), equal to the function without annotations (the
interpreter, or NumPy where the interpreter would take minutes), or refused with a clear
error where dhir or MLIR 22 cannot run it. Where upstream's shapes do not divide over 4
devices, dhir pads the shards (uneven shards)."""

import shutil

import numpy as np
import pytest
from shard_cases import CASES

import dhir
from dhir import DhirError
from dhir.ir.diagnostics import collected_warnings

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
pytestmark = [needs_llvm, pytest.mark.mpi, pytest.mark.mlir]

# Cases run as the function without their shardings (none: uneven shards are padded).
UNSHARDED: set[tuple[str, int]] = set()
RUNS = [(name, grid) for name, case in CASES.items() if not case.refused for grid in case.grids]
REFUSED = [name for name, case in CASES.items() if case.refused]


@pytest.mark.parametrize(("name", "grid"), RUNS)
def test_an_upstream_case_equals_its_function_unsharded(name: str, grid: int) -> None:
    case = CASES[name]
    text = case.text.replace("GRID", str(grid))
    inputs = case.arrays(grid)
    with collected_warnings() as said:
        native = dhir.run(text, *inputs, ranks=grid)[len(inputs) :]
    unsharded = any("without its shardings" in d.message for d in said)
    assert unsharded == ((name, grid) in UNSHARDED), [d.message for d in said]
    if case.oracle is not None:
        want = [case.oracle(*inputs)]
    else:
        want = dhir.run(text, *inputs, backend="interp")[len(inputs) :]
    assert len(native) == len(want)
    for got, expected in zip(native, want, strict=True):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        if case.tolerance:
            scale = float(np.abs(expected).max())
            np.testing.assert_allclose(got, expected, rtol=0, atol=case.tolerance * scale)
        else:
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", REFUSED)
def test_an_upstream_case_dhir_cannot_run_is_a_clear_error(name: str) -> None:
    case = CASES[name]
    refused = case.refused
    assert refused is not None
    grid = case.grids[0]
    with pytest.raises(DhirError, match=refused) as error:
        dhir.run(case.text.replace("GRID", str(grid)), *case.arrays(0), ranks=grid)
    assert "Traceback" not in str(error.value)


def test_every_upstream_case_is_run_or_refused() -> None:
    # The table in docs/commands.md lists each; a case that runs on no grid is a mistake.
    assert all(case.grids for case in CASES.values())
    assert len(RUNS) + len(REFUSED) >= len(CASES)
