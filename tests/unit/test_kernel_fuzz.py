"""Contraction nests in any loop order (tests/unit/kernel_programs.py: gemm, batch gemm,
matrix-vector, vector-matrix, dot and outer products, scf or affine, the sum in memory or
in registers, sizes 0 to 65, triangles, scalar factors from memory, operands sharing the
output's buffer) built natively with dhir-optimize-bodies on 1-4 threads, against the
interpreter.

Without fast-math the results must equal the interpreter's bit for bit (a NaN's sign and
payload aside, as in test_native_fuzz.py); under `--fast-math` float results must be
within a relative tolerance of them where both are finite. A few programs by default;
DHIR_HYPOTHESIS=heavy runs many more, with a fresh seed each time.
"""

import os
import random
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st
from kernel_programs import kernel_case
from test_native_fuzz import _same

import dhir

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _close(got: np.ndarray, want: np.ndarray, t: str, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    finite = np.isfinite(got) & np.isfinite(want)
    rtol = 1e-3 if t == "f32" else 1e-9
    atol = 4 * rtol * (1 + float(np.abs(want[finite]).max(initial=0)))
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol, err_msg=what)


def check_kernel(seed: int, threads: int, fast_math: str) -> None:
    case, nest = kernel_case(random.Random(seed))
    note(f"{case.family} (seed {seed}), {threads} threads, fast-math {fast_math}:\n{case.text}")
    want = dhir.run(case.text, *case.inputs, backend="interp")
    got = dhir.run(case.text, *case.inputs, backend="native", ranks=1, threads=threads,
                   fast_math=fast_math)  # fmt: skip
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if fast_math == "none" or nest.t == "i32":
            _same(g, np.asarray(w), f"argument {k}")
        else:
            _close(g, np.asarray(w), nest.t, f"argument {k}")


@needs_llvm
@settings(
    max_examples=300 if HEAVY else 2,
    derandomize=not HEAVY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(
    seed=st.integers(0, 2**32 - 1),
    threads=st.sampled_from([1, 2, 3, 4]),
    fast_math=st.sampled_from(["none", "none", "none", "contract", "reassoc", "fast"]),
)
# y = A * x with x a view of y's rows 10-13 (matvec in affine.for, 17 rows): rows 10-13
# are read after rows 0-9 wrote them, so the optimizer must leave the nest (without its
# check of memrefs sharing memory, 8 rows side by side read x too early).
@example(seed=5078, threads=1, fast_math="none")
def test_kernels_in_any_loop_order_run_natively_as_the_interpreter_runs_them(
    seed: int, threads: int, fast_math: str
) -> None:
    check_kernel(seed, threads, fast_math)
