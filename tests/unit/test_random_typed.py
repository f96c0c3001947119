"""Random schedules over buffers of i32, i64, index, f32 and f64, 0-d, empty, 1-D and 2-D,
passed whole or as contiguous views (row blocks, reinterpret_casts, collapse_shapes), with
tasks that update them in place, through strided subviews taken in the task (at offsets
that move with the time step), through calls of private functions that write their
(overlapping) view arguments, through reinterpret_casts, at constant subscripts (tasks of
one body shape), and scf.parallel loops that dhir-split cuts, in scf.for and scf.while
time loops and beside host code (tests/unit/typed_programs.py): native runs on 1-4
ranks, round-robin or `best`, equal the interpreter bit for bit (NaNs aside), or, where
two operands of a schedule are views of one buffer that a task writes, are refused.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import random
import shutil
from contextlib import nullcontext
from unittest import mock

import numpy as np
import pytest
from hypothesis import event, example, given, note
from hypothesis import strategies as st
from profiles import profile
from typed_programs import program

import dhir
from dhir import DhirError

TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run
ALIASED = "may be views of one buffer"

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, f"argument {k}"
        if w.dtype.kind == "f":
            nan = np.isnan(w)
            np.testing.assert_array_equal(np.isnan(g), nan, f"argument {k}")
            g, w = g[~nan], w[~nan]
        assert g.tobytes() == w.tobytes(), f"argument {k}: native\n{g}\ninterpreter\n{w}"


def check(seed: int, ranks: int, placement: str, alias: bool, small: bool = False) -> None:
    """`small`: partitioned storage counted in pages of 4 bytes, so that a rank's rows
    stay apart however few (as rows of 4 KiB and more do)."""
    case = program(random.Random(seed), ranks, alias)
    text = case.text(ranks)
    note(f"seed {seed}, {ranks} ranks, {placement}, alias {alias}, small {small}:\n{text}")
    want = dhir.run(text, *case.inputs(), backend="interp")
    pages = mock.patch("dhir.analysis.partition.PAGE_BYTES", 4) if small else nullcontext()
    try:
        with pages:
            got = dhir.run(
                text, *case.inputs(), backend="native", ranks=ranks, mpi="mpich",
                placement=placement, timeout=TIMEOUT,
            )  # fmt: skip
    except DhirError as error:
        assert alias and ALIASED in str(error), str(error)
        event("refused: aliased operands")
        return
    _same(got, want)


@needs_mpi
@profile(2)
# Writes through subviews taken in tasks, on 2 ranks: fails where dhir's effects do not
# follow a view to the memref it views (a mutation of dhir.analysis.effects).
@example(3, 2, "round-robin", False, False)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 4),
    st.sampled_from(("round-robin", "best")),
    st.booleans(),
    st.booleans(),
)
def test_typed_programs_native_equals_interp(
    seed: int, ranks: int, placement: str, alias: bool, small: bool
) -> None:
    check(seed, ranks, placement, alias, small)
