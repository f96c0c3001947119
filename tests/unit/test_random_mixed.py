"""Random schedules mixing loops, tasks dhir-split cuts, memref.copy, linalg ops on strided
views and calls of functions that write their arguments (tests/unit/mixed_programs.py), in
time loops (scf.for and scf.while, zero trips, steps other than 1) with host code between
schedules: native runs on 2-4 ranks, under both MPIs, every placement algorithm, with or
without a machine description of uneven ranks, equal the interpreter bit for bit.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import shutil
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st
from mixed_programs import Program, programs
from profiles import profile

import dhir
from dhir import parse_string
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach

MPIS = ("mpich", "openmpi")
PLACEMENTS = ("round-robin", "best", "heft", "peft")
TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes(), f"argument {k}:\n{g}\n{w}"


def _uneven(ranks: int, fast: int) -> System:
    """One node of two CPUs: `fast` ranks on one of 100 GFLOP/s, the rest on one of 30."""
    quick = replace(guess_device("fast", "x86_64", cores=8), peak_gflops=100.0, ranks=fast)
    slow = replace(guess_device("slow", "x86_64", cores=8), peak_gflops=30.0, ranks=ranks - fast)
    return System((Node("n0", (quick, slow)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)


@profile(10)
@given(programs(ranks=4), st.integers(0, 99))
def test_random_mixed_programs_mean_the_same_without_dhir_ops(program: Program, seed: int) -> None:
    """The generator writes only programs the oracle runs (no out-of-bounds view), and
    their plain form (what CodeDrop takes) means what the schedules do."""
    note(program.text())
    got = dhir.run(program.text(), *program.inputs(seed), backend="interp")
    assert len(got) == program.buffers + 1
    _same(dhir.run(program.text(plain=True), *program.inputs(seed), backend="interp"), got)


@needs_mpi
@profile(7)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            programs(ranks=n),
            st.sampled_from(MPIS),
            st.sampled_from(PLACEMENTS),
            st.none() | st.integers(1, n - 1),
            st.booleans(),
            st.integers(0, 99),
        )
    )
)
def test_random_mixed_programs_native_equals_interp(
    case: tuple[int, Program, str, str, int | None, bool, int],
) -> None:
    """Written with schedules, or as plain code that CodeDrop cuts into tasks."""
    ranks, program, mpi, placement, fast, plain, seed = case
    text = program.text(plain=plain)
    note(f"on {ranks} ranks with {mpi}, placement {placement}, fast ranks {fast}:\n{text}")
    event(
        f"{ranks} ranks, {'a' if fast else 'no'} description, {'plain' if plain else 'schedules'}"
    )
    inputs = program.inputs(seed)
    oracle = dhir.run(text, *inputs, backend="interp")
    module = parse_string(text)
    if fast is not None:
        attach(module, _uneven(ranks, fast))
    got = dhir.run(
        module, *inputs, backend="native", ranks=ranks, mpi=mpi, placement=placement,
        timeout=TIMEOUT,
    )  # fmt: skip
    _same(got, oracle)
