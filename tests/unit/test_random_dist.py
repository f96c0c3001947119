"""Random distributed runs of dhir's newer features, native against the interpreter:

- time loops that dhir-time-tiles cuts into bands (tests/unit/test_time_tiles.py's random
  sweeps) run on 2-4 ranks, a block of rows each, under both MPIs, short loops and step
  counts that are no multiple of the band included: bit for bit;
- the same sweeps, left as written, under `--fast-math contract|reassoc|fast`: within a
  stated tolerance (bit for bit under `none`);
- tests/unit/mixed_programs.py's programs (`newer`: split reductions with
  dhir.reassociate, schedules' operands that are contiguous views at a run-time offset,
  fixed or moving with the time step, buffers ping-ponged through scf.for iter_args,
  functions in the user's C code, `--link`) with placement pins (`--constraints`),
  machine descriptions giving each rank's `memory_bytes`, and partitioned storage counted
  in pages of 4 bytes (a rank's rows kept apart however many): bit for bit, or refused
  with a message naming what does not fit;
- contraction nests cut into row blocks (tests/unit/contraction_programs.py), on arrays
  or on contiguous views of them, under every `--fast-math` mode on 1-4 ranks.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import functools
import os
import shutil
import subprocess
import tempfile
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from contraction_programs import contractions
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st
from mixed_programs import LINKED_C, PAD, Guarded, Program, programs
from test_time_tiles import programs as sweep_programs

import dhir
from dhir import parse_string, print_module
from dhir.ir.diagnostics import DhirError
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach
from dhir.transforms.time_tiles import time_tiles

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"
MPIS = ("mpich", "openmpi")
TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run
# |native - interpreter| allowed under fast-math, relative to the largest result
FAST_MATH_TOLERANCE = 1e-9

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _profile(examples: int) -> settings:
    return settings(
        max_examples=examples * 10 if HEAVY else examples,
        derandomize=not HEAVY,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
    )


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes(), f"argument {k}:\n{g}\n{w}"


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        scale = float(np.max(np.abs(w), initial=1.0))
        np.testing.assert_allclose(g, w, rtol=0, atol=FAST_MATH_TOLERANCE * scale, err_msg=str(k))


@needs_mpi
@_profile(2)
@given(sweep_programs(), st.integers(2, 4), st.integers(2, 4), st.sampled_from(MPIS))
def test_time_tiled_bands_on_several_ranks_run_natively(
    program: object, band: int, ranks: int, mpi: str
) -> None:
    text = program.text()  # pyright: ignore[reportAttributeAccessIssue]
    module = parse_string(text)
    (decision,) = time_tiles(module, band, ranks)
    assume(decision.done)  # left loops run as test_sweeps_under_fast_math_stay_close's
    event(f"bands of {band} on {ranks} ranks")
    note(f"bands of {band} on {ranks} ranks with {mpi}:\n{text}")
    inputs = program.inputs(band)  # pyright: ignore[reportAttributeAccessIssue]
    want = dhir.run(text, *inputs, backend="interp")
    got = dhir.run(
        print_module(module), *inputs, backend="native", ranks=ranks, mpi=mpi, timeout=TIMEOUT
    )
    _same(got, want)


@needs_mpi
@_profile(2)
@given(
    sweep_programs(),
    st.integers(1, 4),
    st.sampled_from(("none", "contract", "reassoc", "fast")),
    st.sampled_from(("round-robin", "best")),
)
def test_sweeps_under_fast_math_stay_close(
    program: object, ranks: int, mode: str, placement: str
) -> None:
    text = program.text()  # pyright: ignore[reportAttributeAccessIssue]
    note(f"--fast-math {mode} on {ranks} ranks, {placement}:\n{text}")
    inputs = program.inputs(ranks)  # pyright: ignore[reportAttributeAccessIssue]
    want = dhir.run(text, *inputs, backend="interp")
    got = dhir.run(
        text, *inputs, backend="native", ranks=ranks, fast_math=mode, placement=placement,
        timeout=TIMEOUT,
    )  # fmt: skip
    if mode == "none":
        _same(got, want)
    else:
        _close(got, want)


def _pins(program: Program, ranks: int, data: st.DataObject) -> str:
    """A constraints file pinning a few of the tasks named tK (main.schedule0.tK where
    several are) to random ranks; a K where some task carries a dhir.rank is left (a pin
    against it is an error)."""
    schedules = [p for p in program.phases if isinstance(p, tuple)]
    schedules += [p.tasks for p in program.phases if isinstance(p, Guarded)]
    if program.after:
        schedules.append(program.after)
    ranked = {k for s in schedules for k, t in enumerate(s) if t.rank is not None}
    free = sorted({k for s in schedules for k in range(len(s))} - ranked)
    if not free:
        return ""
    chosen = data.draw(st.lists(st.sampled_from(free), max_size=3, unique=True))
    rank = st.integers(0, ranks - 1)
    return "".join(f'[[pin]]\ntasks = "*t{k}"\nrank = {data.draw(rank)}\n\n' for k in chosen)


def _pages(small: bool) -> AbstractContextManager[object]:
    """With `small`, partitioned storage counted in pages of 4 bytes: a rank's ranges of
    rows stay apart however many (an interleaved placement keeps every R-th row), as
    they do for rows of 4 KiB and more."""
    if not small:
        return nullcontext()
    return mock.patch("dhir.analysis.partition.PAGE_BYTES", 4)


@functools.cache
def _linked() -> str:
    """LINKED_C built as an object file (kept for the test session)."""
    folder = tempfile.mkdtemp(prefix="dhir-linked-")
    source, obj = os.path.join(folder, "linked.c"), os.path.join(folder, "linked.o")
    with open(source, "w") as file:
        file.write(LINKED_C)
    subprocess.run(["clang-22", "-O2", "-fPIC", "-c", source, "-o", obj], check=True)
    return obj


def _described(ranks: int, memory: int | None) -> System:
    """A node of `ranks` CPUs, one a rank, each of `memory` bytes."""
    devices = tuple(
        replace(guess_device(f"cpu{r}", "x86_64", cores=2), ranks=1, memory_bytes=memory)
        for r in range(ranks)
    )
    return System((Node("n0", devices),), GUESSED_NETWORK, GUESSED_INTRA_NODE)


@needs_mpi
@_profile(3)
@given(st.data())
def test_newer_mixed_programs_native_equals_interp(data: st.DataObject) -> None:
    """Contiguous views as schedule operands, ping-ponged buffers, pins and memory."""
    ranks = data.draw(st.integers(2, 4))
    program = data.draw(programs(ranks=ranks, newer=True))
    mpi = data.draw(st.sampled_from(MPIS))
    placement = data.draw(st.sampled_from(("round-robin", "round-robin", "best", "heft", "peft")))
    plain = data.draw(st.integers(0, 4)) == 0
    pins = "" if plain else _pins(program, ranks, data)
    total = program.buffers * (program.size + (PAD if program.viewed else 0)) * 4
    memory = data.draw(st.none() | st.integers(program.size * 4, total + 64))
    small = data.draw(st.booleans())
    text = program.text(plain=plain)
    note(f"{ranks} ranks, {mpi}, {placement}, memory {memory}, pins:\n{pins}\n{text}")
    event(f"viewed {program.viewed}, moving {program.moving}, ping-pong {program.pingpong}")
    event(f"plain {plain}, linked {program.linked}, pins {bool(pins)}, memory {memory is not None}")
    inputs = program.inputs(ranks)
    link = [_linked()] if program.linked else []
    oracle = dhir.run(text, *inputs, backend="interp", link=link)
    module = parse_string(text)
    if memory is not None:
        attach(module, _described(ranks, memory))
    with tempfile.TemporaryDirectory() as folder, _pages(small):
        constraints = None
        if pins:
            constraints = os.path.join(folder, "pins.toml")
            with open(constraints, "w") as file:
                file.write(pins)
        try:
            got = dhir.run(
                module, *inputs, backend="native", ranks=ranks, mpi=mpi, placement=placement,
                constraints=constraints, link=link, timeout=TIMEOUT,
            )  # fmt: skip
        except DhirError as error:
            # Every buffer whole on every rank fits where memory >= total; but a task's
            # footprint counts a memref<?xi32> as DEFAULT_TRIP_COUNT elements.
            fits = memory is not None and memory >= total and not program.dynamic
            if memory is not None and not fits and "memory_bytes" in str(error):
                event("refused: memory")
                return
            raise
    _same(got, oracle)


@needs_mpi
@_profile(2)
@given(st.data())
def test_contractions_on_several_ranks_under_fast_math(data: st.DataObject) -> None:
    """Contraction nests cut into row blocks over ranks (OpenBLAS, register kernels and
    row sums under reassoc): bit for bit without fast-math, else close."""
    ranks = data.draw(st.integers(1, 4))
    program = data.draw(contractions(ranks))
    mode = data.draw(st.sampled_from(("none", "contract", "reassoc", "fast")))
    placement = data.draw(st.sampled_from(("round-robin", "best", "heft")))
    mpi = data.draw(st.sampled_from(MPIS))
    small = data.draw(st.booleans())
    text = program.text()
    note(f"pages of {4 if small else 4096} bytes")
    note(f"--fast-math {mode} on {ranks} ranks with {mpi}, {placement}:\n{text}")
    event(f"fast-math {mode}, {'views' if program.pad else 'arrays'}")
    inputs = program.inputs(ranks)
    want = dhir.run(text, *inputs, backend="interp")
    with _pages(small):
        got = dhir.run(
            text, *inputs, backend="native", ranks=ranks, fast_math=mode, placement=placement,
            mpi=mpi, timeout=TIMEOUT,
        )  # fmt: skip
    if mode == "none":
        _same(got, want)
    else:
        _close(got, want)
