"""Random programs (tests/unit/native_programs.py) run natively on one rank, against the
interpreter: element-wise arithmetic at the edges of i1 to i64, index and f32/f64, counting
and other scf.while loops, scf.if and calls, memref views, affine maps of negative values,
loop nests the optimizer rewrites or leaves, linalg.generic with unusual maps, parallel
reductions, and views of one buffer read and written together.

Native results must equal the interpreter's bit for bit, except a NaN's sign and payload
(docs/semantics.md: the interpreter's and the CPU's NaNs may differ where LLVM folds
constants or picks which of two NaN operands to keep).

A few programs per family by default; DHIR_HYPOTHESIS=heavy runs many more, with a
fresh seed each time.
"""

import os
import random
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from native_programs import FAMILIES

import dhir

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"
EXAMPLES = 2  # per family: each is a native build of a few seconds

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, what)
        got, want = got[~nan], want[~nan]
    assert got.tobytes() == want.tobytes(), f"{what}: native\n{got}\ninterpreter\n{want}"


@needs_llvm
@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(
    max_examples=EXAMPLES * 50 if HEAVY else EXAMPLES,
    derandomize=not HEAVY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(
    seed=st.integers(0, 2**32 - 1),
    cpu=st.sampled_from(["native", "haswell", "x86-64"]),
    threads=st.sampled_from([1, 3]),
)
def test_random_programs_run_natively_as_the_interpreter_runs_them(
    family: str, seed: int, cpu: str, threads: int
) -> None:
    case = FAMILIES[family](random.Random(seed))
    note(f"{family} program (seed {seed}), cpu {cpu}, {threads} threads:\n{case.text}")
    want = dhir.run(case.text, *case.inputs, backend="interp")
    got = dhir.run(
        case.text, *case.inputs, backend="native", ranks=1, cpu=cpu, threads=threads, timeout=120
    )
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, np.asarray(w), f"argument {k}")
