"""Random programs for partitioned storage (tests/unit/partition_programs.py), native
against the interpreter, bit for bit: the rows of 2-D buffers, narrow or a page wide and
more, cut into blocks or every K-th row, written from a row above or below, through
global subscripts, subviews, reinterpret_casts, collapsed or expanded shapes, linalg on
views, scf.parallel loops cut by dhir-split or run on threads; one or two schedules, in a
time loop or not, with host code reading a buffer between them; on 1-4 ranks, with 1 or
2 threads, round-robin, `best` or `heft`, both MPIs, each rank reading its own rows or rank 0
reading for all (DHIR_IO=rank0), messages cut into pieces of 100 bytes
(DHIR_MESSAGE_CHUNK_BYTES) or not, and partitioned storage counted in pages of 4 bytes
(a rank's rows kept apart however few) or not.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import shutil
from contextlib import nullcontext
from unittest import mock

import numpy as np
import pytest
from hypothesis import event, example, given, note
from hypothesis import strategies as st
from partition_programs import Part, Program, Sched, programs
from profiles import profile

from dhir.ir.text import parse_string
from dhir.runner import run_module
from dhir.toolchain.build import Timing
from dhir.toolchain.options import RunOptions

TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def check(
    program: Program,
    ranks: int,
    threads: int,
    mpi: str,
    placement: str,
    small: bool,
    io: str,
    chunk: str,
    monkeypatch: pytest.MonkeyPatch,
    seed: int = 1,
) -> Timing:
    """`program` natively as the other arguments say (`small`: partitioned storage counted
    in pages of 4 bytes; `io`: DHIR_IO; `chunk`: DHIR_MESSAGE_CHUNK_BYTES, or none),
    against the interpreter; the run's report."""
    text = program.text()
    note(f"{ranks} ranks, {threads} threads, {mpi}, {placement}, small {small}, io {io}")
    note(f"chunk {chunk or 'default'}")
    note(text)
    monkeypatch.setenv("DHIR_IO", io)
    if chunk:
        monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", chunk)
    else:
        monkeypatch.delenv("DHIR_MESSAGE_CHUNK_BYTES", raising=False)
    inputs = program.inputs(seed)
    want = run_module(parse_string(text), "main", inputs, "interp")
    timing = Timing()
    options = RunOptions(
        ranks=ranks, mpi=mpi, timeout=TIMEOUT, placement=placement, threads=threads
    )
    pages = mock.patch("dhir.analysis.partition.PAGE_BYTES", 4) if small else nullcontext()
    with pages:
        got = run_module(parse_string(text), "main", inputs, "native", options, timing=timing)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.tobytes() == w.tobytes(), f"argument {k}: native\n{g}\ninterpreter\n{w}"
    return timing


# Rows of 4 KiB (%a0) and a little more (%a1), a task per row, on rank row mod 3: rank k
# writes rows k, k + 3, ... of %a0, then those of %a1 from the rows of %a0 below them
# (rank k + 1's), through global subscripts, subviews, rank-reducing row views and vectors,
# in two steps of a time loop; a rank holds its rows of each apart (5 ranges and more);
# rank 0 reads and writes the files for all, in pieces of 100 bytes.
ROW_STYLES = ("scf", "subview", "rowview", "vector")
INTERLEAVED = Program(
    "f64",
    15,
    (512, 515),
    2,
    2,
    (
        Sched(
            (
                *(Part(0, 1, r, r + 1, 1, 1, 4, 0, "scf", r % 3, r + 1) for r in range(15)),
                *(
                    Part(1, 0, r, r + 1, 1, 0, 3, 1, ROW_STYLES[r % 4], r % 3, r + 2)
                    for r in range(14)
                ),
            )
        ),
    ),
    (),
)


@needs_mpi
@pytest.mark.mpi
@profile(2)
@example(
    case=(3, INTERLEAVED),
    threads=1,
    mpi="mpich",
    placement="round-robin",
    small=True,
    io="rank0",
    chunk="100",
)
@given(
    case=st.integers(1, 4).flatmap(lambda n: st.tuples(st.just(n), programs(n))),
    threads=st.integers(1, 2),
    mpi=st.sampled_from(("mpich", "openmpi")),
    placement=st.sampled_from(("round-robin", "best", "heft")),
    small=st.booleans(),
    io=st.sampled_from(("each", "rank0")),
    # pieces of a few bytes take minutes on a crowded machine: rank 0 then moves
    # hundreds of thousands of them (files through rank 0)
    chunk=st.sampled_from(("", "100", "4096")),
)
def test_random_partitioned_programs_equal_the_interpreter(
    case: tuple[int, Program],
    threads: int,
    mpi: str,
    placement: str,
    small: bool,
    io: str,
    chunk: str,
) -> None:
    ranks, program = case
    with pytest.MonkeyPatch.context() as monkeypatch:
        timing = check(program, ranks, threads, mpi, placement, small, io, chunk, monkeypatch)
    parts = sum("partitioned" in line for line in timing.notes)
    event(f"{parts} partitioned")
