"""Random programs aimed at the optimizer, against the interpreter: contraction nests
(tests/unit/optimizer_programs.py) built natively with dhir-optimize-bodies, and stencil
time loops (test_time_tiles.Program) banded by dhir-time-tiles on 1-4 ranks with bands
of 1-40 steps over arrays of about a band's rows.

Results must equal the interpreter's bit for bit (a NaN's sign and payload aside, as in
test_native_fuzz.py). A few programs by default; DHIR_HYPOTHESIS=heavy runs many more,
with a fresh seed each time.
"""

import os
import random
import shutil
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from optimizer_programs import contraction_case
from test_native_fuzz import _same
from test_time_tiles import COLS, DEPTH, Program, Sweep

import dhir
from dhir import parse_string, print_module
from dhir.transforms.time_tiles import time_tiles

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


@needs_llvm
@settings(
    max_examples=300 if HEAVY else 4,
    derandomize=not HEAVY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(seed=st.integers(0, 2**32 - 1), threads=st.sampled_from([1, 2]))
def test_contraction_nests_run_natively_as_the_interpreter_runs_them(
    seed: int, threads: int
) -> None:
    case = contraction_case(random.Random(seed))
    note(f"{case.family} (seed {seed}), {threads} threads:\n{case.text}")
    want = dhir.run(case.text, *case.inputs, backend="interp")
    got = dhir.run(case.text, *case.inputs, backend="native", ranks=1, threads=threads)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, np.asarray(w), f"argument {k}")


def _sweep(rng: random.Random, arrays: int, rows: int) -> list[Sweep]:
    dst = rng.randrange(arrays)
    others = [a for a in range(arrays) if a != dst]
    cols = rng.choice([(0, COLS), (1, COLS - 1), (0, COLS - 2)])
    reads: list[tuple[int, int] | tuple[int, int, int]] = [
        (rng.choice(others), rng.randint(-2, 2), rng.randint(-cols[0], min(1, COLS - cols[1])))
        for _ in range(rng.randint(1, 4))
    ]
    if rng.random() < 0.5:
        reads.append((dst, 0, 0))
    forcing, weighted = rng.random() < 0.5, rng.random() < 0.5
    planes = rng.choice([(0, DEPTH), (1, DEPTH - 1)])
    if rng.random() < 0.2:
        row = rng.randint(2, rows - 3)
        return [Sweep(dst, tuple(reads), row, row + 1, row, forcing, weighted, cols, planes)]
    lo = rng.randint(2, rows - 2)
    sweep = Sweep(dst, tuple(reads), lo, rng.randint(lo, rows - 2), None, forcing, weighted,
                  cols, planes)  # fmt: skip
    if sweep.hi - lo >= 2 and rng.random() < 0.4:  # row blocks of one sweep: one stage
        at = rng.randint(lo + 1, sweep.hi - 1)
        return [replace(sweep, hi=at), replace(sweep, lo=at)]
    return [sweep]


def stencil_case(rng: random.Random) -> tuple[Program, int, int]:
    """A time loop of 1-40 steps, its band (1-40 steps) and ranks (1-4), over arrays of
    rows near the band (or, on several ranks, enough rows to cut)."""
    band, ranks = rng.randint(1, 40), rng.choice([1, 1, 2, 3, 4])
    rows = max(5, band + rng.randint(-3, 6)) if rng.random() < 0.7 else rng.randint(5, 30)
    if ranks > 1 and rng.random() < 0.7:
        band, rows = rng.randint(2, 6), rng.randint(12 * ranks, 20 * ranks)
    arrays = rng.randint(2, 3)
    sweeps = [s for _ in range(rng.randint(1, 3)) for s in _sweep(rng, arrays, rows)]
    program = Program(arrays, rng.randint(1, 40), tuple(sweeps), rng.random() < 0.3,
                      rng.random() < 0.4, rng.random() < 0.3, rows)  # fmt: skip
    return program, band, ranks


@needs_llvm
@settings(
    max_examples=300 if HEAVY else 3,
    derandomize=not HEAVY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(seed=st.integers(0, 2**32 - 1), native=st.booleans())
def test_banded_stencils_compute_what_the_interpreter_computes(seed: int, native: bool) -> None:
    """The banded program (on its ranks, interpreted or native) against the interpreter
    running the loop as written; a loop the pass leaves must say why."""
    program, band, ranks = stencil_case(random.Random(seed))
    text = program.text()
    note(f"band {band}, {ranks} ranks, rows {program.rows}:\n{text}")
    module = parse_string(text)
    (decision,) = time_tiles(module, band if band > 1 else 0, ranks)
    if not decision.done:
        assert decision.text.startswith("time loop left as written: ")
        return
    inputs = program.inputs(seed % 2**16)
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    got = dhir.run(print_module(module), *inputs, backend="native" if native else "interp",
                   ranks=ranks)  # fmt: skip
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, np.asarray(w), f"argument {k}")
