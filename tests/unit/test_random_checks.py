"""Random programs whose subscripts depend on their inputs (tests/unit/check_programs.py),
native with the default run-time checks against the interpreter: loads and stores through
an index array, subviews, reinterpret_casts and memref.casts at offsets and of sizes read
from an input, index arithmetic of loaded values (products, sums, divisions, remainders,
min and max, through 32 bits and past 64), nests of loops with steps, loops between
numbers read from an input, counted scf.while loops, scf.if guards, scf.parallel loops on
two OpenMP threads, private functions, affine loads, vector.load, vector.store,
vector.transfer_read and transfer_write (masked, far past the end); in tasks on 1 and 2
ranks and in plain programs (CodeDrop), with inputs inside and out of bounds.

The verdicts must agree (docs/semantics.md, "Out-of-bounds accesses checked as the
program runs"): both run, to the same arrays bit for bit, or both stop at the same
line:col. Programs whose subscripts are in bounds by construction, from loop variables
and numbers, must build with no check of an access or a view (`keep_build`'s
program.mlir).

A few programs by default (one build each, two runs); DHIR_HYPOTHESIS=heavy runs many
more, with a fresh seed each time.
"""

import os
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from check_programs import case
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

import dhir
from dhir.ir.diagnostics import DhirError

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"
TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run
# What the failed check of an access or a view says (bounds, vector and cast checks).
CHECK_WORDS = ("out-of-bounds", "mismatch")

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _profile(examples: int) -> settings:
    return settings(
        max_examples=examples * 50 if HEAVY else examples,
        derandomize=not HEAVY,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )


def _verdict(run: object) -> tuple[str, object]:
    """("ran", the arrays' bytes) or ("stopped", line and column)."""
    try:
        arrays = run()  # pyright: ignore[reportCallIssue]
    except DhirError as error:
        loc = error.diagnostics[0].loc
        assert loc is not None, str(error)  # a located error, never one without a place
        return "stopped", (loc.line, loc.col)
    return "ran", [np.asarray(a).tobytes() for a in arrays]  # pyright: ignore[reportGeneralTypeIssues, reportUnknownVariableType]


def _checks(folder: Path) -> int:
    """The checks of accesses and views in the kept build's program.mlir."""
    text = (folder / "program.mlir").read_text()
    lines = [line for line in text.splitlines() if "cf.assert" in line]
    return sum(1 for line in lines if any(word in line for word in CHECK_WORDS))


@needs_llvm
@pytest.mark.mpi
@_profile(2)
@given(seed=st.integers(0, 2**32 - 1))
@example(seed=2014)  # 2 ranks: a memref.cast to a size the view has not; a gather past a
@example(seed=2106)  # a subview of a negative size, then a cast of it
@example(seed=578)  # 2 ranks: a counted while of constant bounds, a[5, i * (2**63 - 1) // 16]
@example(seed=698)  # a masked transfer_read not in bounds at 2**63 - 2 (lanes 2, 3 wrap)
@example(seed=548)  # a reinterpret_cast of -1 columns at offset 47
def test_native_stops_where_the_interpreter_stops(seed: int) -> None:
    rng = random.Random(seed)
    program = case(rng)
    ranks = rng.choice([1, 2]) if program.shape == "tasks" else 1
    threads = 2 if program.parallel else 1
    note(f"seed {seed}, {ranks} ranks, {threads} threads:\n{program.text}")
    for inside in (True, False):
        inputs = program.inputs(rng, inside)
        note(f"inputs (inside: {inside}): {inputs[0].tolist()}, {inputs[1].tolist()}")
        want = _verdict(lambda: dhir.run(program.text, *inputs, backend="interp"))
        got = _verdict(
            lambda: dhir.run(program.text, *inputs, ranks=ranks, threads=threads, timeout=TIMEOUT)
        )
        assert got == want


@needs_llvm
@pytest.mark.mpi
@_profile(2)
@given(seed=st.integers(0, 2**32 - 1))
def test_accesses_in_bounds_by_construction_carry_no_check(seed: int) -> None:
    rng = random.Random(seed)
    program = case(rng, proven=True)
    note(f"seed {seed}:\n{program.text}")
    inputs = program.inputs(rng, inside=True)
    want = dhir.run(program.text, *inputs, backend="interp")
    with tempfile.TemporaryDirectory() as kept:
        got = dhir.run(program.text, *inputs, threads=2, keep_build=kept, timeout=TIMEOUT)
        assert _checks(Path(kept)) == 0
    assert [g.tobytes() for g in got] == [np.asarray(w).tobytes() for w in want]
