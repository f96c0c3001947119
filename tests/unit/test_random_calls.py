"""Random programs whose tasks and host code call the program's functions
(tests/unit/call_programs.py): on views of dynamic sizes made in the task or before
its schedule, on whole grids through a 1-D reinterpret_cast, nested calls, a result,
a column view, write-only views, conditional row writes, @sweep and @poke as linked C
code; one to three schedules with host calls between them, in a time loop or not, one
maybe in an scf.if on a grid's element, or no schedule at all (CodeDrop): native
runs on 1-4 ranks, with 1 or 2 threads, round-robin or `best`, partitioned storage
counted in pages of 4 bytes or not, equal the interpreter: bit for bit without fast-math,
within 1e-12 under the other modes (the values are multiples of 1/16 that few ops round).

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import shutil
import tempfile
from contextlib import nullcontext
from functools import cache
from unittest import mock

import numpy as np
import pytest
from call_programs import generate, linked_object
from hypothesis import example, given, note
from hypothesis import strategies as st
from profiles import profile

import dhir

TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


@cache
def _linked() -> str:
    return linked_object(tempfile.mkdtemp(prefix="dhir-calls-"))


def check(
    seed: int, ranks: int, threads: int, placement: str, plain: bool, fast_math: str, small: bool
) -> None:
    """Program `seed` natively as the other arguments say, against the interpreter.
    `small`: partitioned storage counted in pages of 4 bytes, so that a rank's rows stay
    apart however few."""
    program = generate(seed)
    text = program.text(ranks, plain)
    note(f"seed {seed}, {ranks} ranks, {threads} threads, {placement}, plain {plain}")
    note(text)
    inputs = program.inputs(seed)
    link = [_linked()] if program.linked else []
    want = dhir.run(text, *inputs, backend="interp", link=link)
    pages = mock.patch("dhir.analysis.partition.PAGE_BYTES", 4) if small else nullcontext()
    with pages:
        got = dhir.run(
            text, *inputs, backend="native", ranks=ranks, threads=threads, placement=placement,
            fast_math=fast_math, link=link, timeout=TIMEOUT,
        )  # fmt: skip
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if fast_math == "none":
            assert g.tobytes() == w.tobytes(), f"argument {k}: native\n{g}\ninterpreter\n{w}"
        else:  # the flags allow other roundings, where a long chain of ops rounds at all
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@needs_mpi
@profile(1)
# Every kind of call: linked @sweep and @poke, views made before their schedule, host
# calls between schedules (seed 46); a time loop, a phase in an scf.if, CodeDrop (329).
@example(seed=46, ranks=3, threads=2, placement="best", plain=False, fast_math="fast", small=True)
@example(
    seed=329, ranks=4, threads=1, placement="round-robin", plain=True, fast_math="none", small=True
)
@given(
    seed=st.integers(0, 2**32 - 1),
    ranks=st.integers(1, 4),
    threads=st.integers(1, 2),
    placement=st.sampled_from(("round-robin", "best")),
    plain=st.booleans(),
    fast_math=st.sampled_from(("none", "contract", "reassoc", "fast")),
    small=st.booleans(),
)
def test_calls_native_equals_interp(
    seed: int, ranks: int, threads: int, placement: str, plain: bool, fast_math: str, small: bool
) -> None:
    check(seed, ranks, threads, placement, plain, fast_math, small)
