"""Random `scf.while` time loops whose condition loads elements of a residual or of a
grid that the loop's tasks write (tests/unit/residual_programs.py): constant subscripts
(only those elements reach every rank at each step's end) or the counter's (all of
them), %C of f64, f32, i32 or i64, 1-D, 2-D or of a dynamic size, the schedule after
or before the condition, element-wise generics in place or over shifted views, sweeps
that dhir-split cuts, pins, host code before, in and after the loop: native runs on 1-4
ranks, with 1 or 2 threads, round-robin or `best`, partitioned storage counted in
pages of 4 bytes or not, equal the interpreter bit for bit.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import shutil
from contextlib import nullcontext
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from profiles import profile
from residual_programs import generate, tuned

import dhir

TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def check(seed: int, ranks: int, threads: int, mpi: str, placement: str, small: bool) -> None:
    """Program `seed` natively as the other arguments say, against the interpreter.
    `small`: partitioned storage counted in pages of 4 bytes, so that a rank's rows stay
    apart however few."""
    program = tuned(generate(seed), seed)
    text = program.text(ranks)
    note(f"seed {seed}, {ranks} ranks, {threads} threads, {mpi}, {placement}, small {small}")
    note(text)
    inputs = program.inputs(seed)
    want = dhir.run(text, *inputs, backend="interp")
    pages = mock.patch("dhir.analysis.partition.PAGE_BYTES", 4) if small else nullcontext()
    with pages:
        got = dhir.run(
            text, *inputs, backend="native", ranks=ranks, threads=threads, mpi=mpi,
            placement=placement, timeout=TIMEOUT,
        )  # fmt: skip
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.tobytes() == w.tobytes(), f"argument {k}: native\n{g}\ninterpreter\n{w}"


@needs_mpi
@profile(2)
# Two elements of %C loaded, one written by a task on another rank: a rank crashes where
# only the first loaded element reaches every rank (a mutation of outputs.loaded_elements).
@example(seed=100004, ranks=3, threads=1, mpi="mpich", placement="best", small=False)
@given(
    seed=st.integers(0, 2**32 - 1),
    ranks=st.integers(1, 4),
    threads=st.integers(1, 2),
    mpi=st.sampled_from(("mpich", "openmpi")),
    placement=st.sampled_from(("round-robin", "best")),
    small=st.booleans(),
)
def test_residual_time_loops_native_equals_interp(
    seed: int, ranks: int, threads: int, mpi: str, placement: str, small: bool
) -> None:
    check(seed, ranks, threads, mpi, placement, small)
