"""Partitioned storage (issue 24): each rank holds, reads and writes only the rows of an
array its tasks touch (dhir/analysis/partition.py, the harness, dhir-lower-to-mpi's
writes), and arrays it cannot bound stay whole. Native runs equal the interpreter bit for
bit; the random region programs of test_random_regions.py run partitioned too."""

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from region_programs import Program, programs
from xdsl.dialects import func
from xdsl.passes import PassPipeline
from xdsl.traits import SymbolTable

from dhir.analysis.outputs import final_to_root
from dhir.analysis.partition import Partition, describe, row_bands
from dhir.api import run_pipeline
from dhir.backends.native import compile_native
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string
from dhir.runner import run_module
from dhir.toolchain.build import Timing
from dhir.toolchain.entry import entry_signature
from dhir.toolchain.launch import _mpirun, find_mpi
from dhir.toolchain.options import RunOptions
from dhir.transforms import lower_to_mpi
from dhir.transforms.place import PlacePass

MPIS = ("mpich", "openmpi")
HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"  # many more random programs
needs_mlir = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
BENCH = Path(__file__).parents[2] / "bench"


def stencil(n: int, tasks: int, ranks: list[int | None], steps: int = 2, host: str = "") -> str:
    """A 1-D three-point stencil on an n x 8 array in a time loop: `tasks` row blocks per
    sweep, block k on `ranks[k]`, from %a into %b and back; `host` after the loop."""
    rows = (n - 2) // tasks
    sweeps = []
    for src, dst in (("a", "b"), ("b", "a")):
        for k in range(tasks):
            lo, hi = 1 + k * rows, (n - 1 if k == tasks - 1 else 1 + (k + 1) * rows)
            rank = f" attributes {{dhir.rank = {ranks[k]} : i64}}" if ranks[k] is not None else ""
            sweeps.append(
                f"""      dhir.task %cpu, %{src}, %{dst}{rank} {{
        %lo = arith.constant {lo} : index
        %hi = arith.constant {hi} : index
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c8 = arith.constant 8 : index
        %third = arith.constant 0.25 : f64
        scf.for %i = %lo to %hi step %c1 {{
          %im = arith.subi %i, %c1 : index
          %ip = arith.addi %i, %c1 : index
          scf.for %j = %c0 to %c8 step %c1 {{
            %x = memref.load %{src}[%im, %j] : memref<{n}x8xf64>
            %y = memref.load %{src}[%i, %j] : memref<{n}x8xf64>
            %z = memref.load %{src}[%ip, %j] : memref<{n}x8xf64>
            %s = arith.addf %x, %y : f64
            %w = arith.addf %s, %z : f64
            %u = arith.mulf %w, %third : f64
            memref.store %u, %{dst}[%i, %j] : memref<{n}x8xf64>
          }}
        }}
      }}"""
            )
    body = "\n".join(sweeps)
    return f"""func.func @main(%a: memref<{n}x8xf64>, %b: memref<{n}x8xf64>) {{
  %t0 = arith.constant 0 : index
  %t1 = arith.constant 1 : index
  %steps = arith.constant {steps} : index
  scf.for %t = %t0 to %steps step %t1 {{
    dhir.schedule %a, %b {{
      %cpu = dhir.target {{kind = "cpu"}}
{body}
    }}
  }}
{host}  return
}}
"""


def bands_of(text: str, ranks: int, final: tuple[str, ...] = ("a", "b")) -> Partition:
    module = parse_string(text)
    entry = next(op for op in module.walk() if op.name == "func.func")
    args = {a.name_hint: a for a in entry.regions[0].block.args}  # type: ignore[attr-defined]
    return row_bands(entry, ranks, {args[n] for n in final})  # type: ignore[arg-type]


# --- which rows -------------------------------------------------------------------------


def test_a_stencil_in_blocks_holds_its_rows_and_halos() -> None:
    found = bands_of(stencil(18, 4, [0, 0, 1, 1]), 2)
    # Blocks of 4 rows from row 1: rank 0 writes rows 1..8 and reads 0..9.
    assert found.bands[0] == (((0, 10),), ((8, 18),))
    assert found.bands[1] == found.bands[0]
    assert not found.whole


def test_round_robin_blocks_leave_gaps_between_ranges() -> None:
    found = bands_of(stencil(18, 4, [0, 1, 0, 1]), 2)
    assert found.bands[0] == (((0, 6), (8, 14)), ((4, 10), (12, 18)))


def test_a_task_without_a_rank_counts_on_every_rank() -> None:
    found = bands_of(stencil(18, 4, [0, 1, None, 1]), 2)
    rank0, rank1 = found.bands[0]
    assert rank0 == ((0, 6), (8, 14)) and rank1 == ((4, 18),)


@pytest.mark.parametrize(
    ("text", "final", "reason"),
    [
        (stencil(18, 2, [0, 1]), ("a", "b"), None),
        (stencil(18, 2, [None, None]), ("a", "b"), "every rank's tasks touch all its rows"),
        (stencil(18, 2, [0, 1]), ("b",), "code after its schedule needs it on every rank"),
        (
            stencil(18, 2, [0, 1], host="  %r = memref.load %a[%t0, %t0] : memref<18x8xf64>\n"),
            ("b",),
            "host code",
        ),
    ],
    ids=["split", "unplaced", "needed-after", "host-code"],
)
def test_what_stays_whole_says_why(text: str, final: tuple[str, ...], reason: str | None) -> None:
    found = bands_of(text, 2, final)
    if reason is None:
        assert 0 in found.bands and not found.whole
    else:
        assert reason in found.whole[0].reason


COLUMNS = """func.func @main(%a: memref<6x4xf64>, %b: memref<6x4xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    dhir.task %cpu, %a, %b attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      scf.for %i = %c0 to %c3 step %c1 {
        %x = memref.load %a[%i, %c0] : memref<6x4xf64>
        memref.store %x, %b[%i, %c0] : memref<6x4xf64>
      }
    }
    dhir.task %cpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c6 = arith.constant 6 : index
      scf.for %i = %c0 to %c6 step %c1 {
        %x = memref.load %a[%i, %c1] : memref<6x4xf64>
        memref.store %x, %b[%c3, %c1] : memref<6x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c6 = arith.constant 6 : index
      scf.for %i = %c3 to %c6 step %c1 {
        %x = memref.load %a[%i, %c2] : memref<6x4xf64>
        memref.store %x, %a[%i, %c3] : memref<6x4xf64>
      }
    }
  }
  return
}
"""


def test_a_task_touching_every_row_is_named_where_it_keeps_a_memref_whole() -> None:
    # The task on rank 1 reads a column of %a, all its rows; rank 0's two tasks touch all
    # rows of %a between them. No task alone touches every row of %b.
    found = bands_of(COLUMNS, 2)
    assert found.whole[0].reason == (
        "every rank's tasks touch all its rows (the task at <string>:13:5 alone touches every row)"
    )
    assert 1 in found.bands


def test_one_rank_and_two_schedules_stay_whole() -> None:
    assert "one rank" in bands_of(stencil(18, 2, [0, 0]), 1).whole[0].reason
    text = stencil(18, 2, [0, 1])
    module = parse_string(text)
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    schedule.parent_block().insert_op_after(schedule.clone(), schedule)  # type: ignore[union-attr]
    entry = next(op for op in module.walk() if op.name == "func.func")
    found = row_bands(entry, 2, set(entry.regions[0].block.args))  # type: ignore[attr-defined]
    assert "2 schedules list it" in found.whole[0].reason


# --- native runs ------------------------------------------------------------------------


def _native(text: str, inputs: list[object], ranks: int, mpi: str, placement: str) -> Timing:
    timing = Timing()
    options = RunOptions(ranks=ranks, mpi=mpi, timeout=90, placement=placement)
    got = run_module(parse_string(text), "main", list(inputs), "native", options, timing=timing)
    want = run_module(parse_string(text), "main", list(inputs), "interp")
    for g, w in zip(got, want, strict=True):
        assert g.tobytes() == np.asarray(w).tobytes()
    return timing


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(
    ("ranks", "owners"),
    [(2, [0, 0, 1, 1]), (2, [0, 1, 0, 1]), (3, [2, 0, 1, 2]), (4, [3, 2, 1, 0])],
)
@pytest.mark.parametrize("io", ["each", "rank0"])
def test_a_partitioned_stencil_equals_the_interpreter(
    mpi: str, ranks: int, owners: list[int], io: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With io="rank0", rank 0 reads every rank's rows and writes every rank's results
    (what happens where the other ranks cannot open the files)."""
    if io == "rank0":
        monkeypatch.setenv("DHIR_IO", "rank0")
    rng = np.random.default_rng(ranks)
    a, b = rng.random((22, 8)), rng.random((22, 8))
    timing = _native(stencil(22, 4, list(owners), steps=3), [a, b], ranks, mpi, "best")
    assert any(line.startswith("memory: %a: partitioned") for line in timing.notes)


@needs_mlir
@pytest.mark.mpi
def test_each_rank_takes_only_its_rows_of_the_inputs() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((22, 8)), rng.random((22, 8))
    timing = _native(stencil(22, 4, [0, 0, 1, 1]), [a, b], 2, "mpich", "best")
    took = {
        int(line.split()[2]): int(line.split()[-4])
        for line in timing.notes
        if line.startswith("dhir: rank")
    }
    # Rank 0 holds rows 0..11 of each array (its blocks 1..10 and their halos), rank 1
    # rows 10..21; a row is 8 f64.
    assert took == {0: 2 * 12 * 64, 1: 2 * 12 * 64}


@needs_mlir
@pytest.mark.mpi
def test_a_run_timed_out_moving_its_inputs_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 sends rank 1 its 8 MB of rows in pieces of one byte, which takes far longer
    than the timeout: the report said both ranks were "starting, before its first task"."""
    monkeypatch.setenv("DHIR_IO", "rank0")
    monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", "1")
    rows = 1 << 18
    a = np.zeros((rows, 8))
    options = RunOptions(ranks=2, timeout=3, placement="best")
    with pytest.raises(DhirError, match="timed out") as error:
        run_module(
            parse_string(stencil(rows, 4, [0, 0, 1, 1], steps=1)), "main", [a, a], "native", options
        )
    assert "reading its part of the inputs, before its first task" in str(error.value)


@needs_mlir
@pytest.mark.mpi
def test_rows_no_task_writes_keep_their_input_values() -> None:
    # Only rows 5..9 change, on rank 1; rank 0's task reads rows 0..2: rows 10..21 are in
    # no rank's rows and come from the input file.
    text = """func.func @main(%a: memref<22x8xf64>, %s: memref<2xf64>) {
  dhir.schedule %a, %s {
    %cpu = dhir.target {kind = "cpu"}
    dhir.task %cpu, %a, %s attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %x = memref.load %a[%c2, %c0] : memref<22x8xf64>
      memref.store %x, %s[%c0] : memref<2xf64>
    }
    dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c5 = arith.constant 5 : index
      %c10 = arith.constant 10 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %two = arith.constant 2.0 : f64
      scf.for %i = %c5 to %c10 step %c1 {
        scf.for %j = %c0 to %c8 step %c1 {
          memref.store %two, %a[%i, %j] : memref<22x8xf64>
        }
      }
    }
  }
  return
}
"""
    rng = np.random.default_rng(1)
    timing = _native(text, [rng.random((22, 8)), np.zeros(2)], 2, "mpich", "best")
    assert "memory: %a: partitioned, rank 0 rows 2..2; rank 1 rows 5..9" in timing.notes


@needs_mlir
@pytest.mark.mpi
def test_an_array_host_code_reads_stays_whole_and_right() -> None:
    host = """  %s = memref.load %a[%t1, %t1] : memref<22x8xf64>
  memref.store %s, %b[%t0, %t0] : memref<22x8xf64>
"""
    rng = np.random.default_rng(2)
    a, b = rng.random((22, 8)), rng.random((22, 8))
    timing = _native(stencil(22, 4, [0, 0, 1, 1], host=host), [a, b], 2, "mpich", "best")
    assert any("%a: whole on every rank, host code" in line for line in timing.notes)


# A random program's memrefs are partitioned where they can be; either way native equals
# the interpreter (event: how many were partitioned).
@needs_mlir
@pytest.mark.mpi
@settings(
    max_examples=500 if HEAVY else 40,
    derandomize=not HEAVY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            programs(ranks=n, partitionable=True),
            st.sampled_from(MPIS),
            st.integers(0, 2**16),
        )
    )
)
def test_random_region_programs_partitioned_equal_the_interpreter(
    case: tuple[int, Program, str, int],
) -> None:
    ranks, program, mpi, seed = case
    text = program.text()
    note(f"on {ranks} ranks with {mpi}:\n{text}")
    timing = _native(text, program.inputs(seed), ranks, mpi, "round-robin")
    parts = sum("partitioned" in line for line in timing.notes)
    event(f"{parts} partitioned")


# --- results and failures ---------------------------------------------------------------

DIES = """func.func private @exit(i32)
func.func @main(%a: memref<8x4xi32>, %b: memref<2xi32>, %die: i32) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1 : i32
      memref.store %one, %a[%c0, %c0] : memref<8x4xi32>
    }
    dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c7 = arith.constant 7 : index
      %c0 = arith.constant 0 : index
      %two = arith.constant 2 : i32
      memref.store %two, %a[%c7, %c0] : memref<8x4xi32>
    }
  }
  dhir.schedule %b {
    %cpu = dhir.target {kind = "cpu"}
    dhir.task %cpu, %b attributes {dhir.rank = 1 : i64} {
      %zero = arith.constant 0 : i32
      %no = arith.cmpi eq, %die, %zero : i32
      scf.if %no {
      } else {
        func.call @exit(%die) : (i32) -> ()
      }
      %c0 = arith.constant 0 : index
      memref.store %die, %b[%c0] : memref<2xi32>
    }
  }
  return
}
"""


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_a_result_file_appears_only_when_every_rank_finished(mpi: str, tmp_path: Path) -> None:
    """The executable itself: rank 1 dies after both ranks wrote their rows of %a."""
    module = parse_string(DIES)
    timing = Timing()
    exe, signature = compile_native(module, "main", RunOptions(ranks=2, mpi=mpi), timing=timing)
    assert "memory: %a: partitioned, rank 0 rows 0..0; rank 1 rows 7..7" in timing.notes
    a = tmp_path / "a.raw"
    np.arange(32, dtype=np.int32).tofile(a)
    b = tmp_path / "b.raw"
    np.zeros(2, np.int32).tofile(b)
    for die, ok in ((3, False), (0, True)):
        out = tmp_path / f"out{die}"
        out.mkdir()
        command = [*_mpirun(find_mpi(mpi), 2, None), str(exe), str(out), str(a), str(b), str(die)]
        run = subprocess.run(command, capture_output=True, timeout=90, env=dict(os.environ))
        assert (run.returncode == 0) == ok, run.stderr
        assert (out / "arg0.raw").exists() == ok
    want = np.arange(32, dtype=np.int32).reshape(8, 4)
    want[0, 0], want[7, 0] = 1, 2
    assert np.array_equal(np.fromfile(tmp_path / "out0" / "arg0.raw", np.int32).reshape(8, 4), want)
    assert entry_signature(parse_string(DIES), "main") == signature


def row_writes(
    shape: tuple[int, ...], rows: list[int], ranks: list[int], part: list[tuple[int, int]]
) -> str:
    """Task k on rank `ranks[k]` doubles row `rows[k]` of %a (shape `shape`) and adds k,
    within `part` (lo, hi per further dimension) of the row."""
    t = f"memref<{'x'.join(map(str, shape))}xf64>"
    names = [f"%i{d}" for d in range(len(part))]
    at = ", ".join(["%r", *names])
    head = [f"%lo{d} = arith.constant {lo} : index" for d, (lo, _) in enumerate(part)]
    head += [f"%hi{d} = arith.constant {hi} : index" for d, (_, hi) in enumerate(part)]
    loops = " ".join(f"scf.for {n} = %lo{d} to %hi{d} step %c1 {{" for d, n in enumerate(names))
    setup = "\n      ".join(head)
    tasks = [
        f"""    dhir.task %cpu, %a attributes {{dhir.rank = {rank} : i64}} {{
      %c1 = arith.constant 1 : index
      %r = arith.constant {row} : index
      %k = arith.constant {k}.0 : f64
      %two = arith.constant 2.0 : f64
      {setup}
      {loops}
        %x = memref.load %a[{at}] : {t}
        %y = arith.mulf %x, %two : f64
        %z = arith.addf %y, %k : f64
        memref.store %z, %a[{at}] : {t}
      {"}" * len(names)}
    }}"""
        for k, (row, rank) in enumerate(zip(rows, ranks, strict=True))
    ]
    body = "\n".join(tasks)
    return f"""func.func @main(%a: {t}) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
{body}
  }}
  return
}}
"""


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("ranks", "shape", "step", "part", "interleaved", "io", "mpi"),
    [
        (1, (9, 5), 1, None, True, "each", "mpich"),
        (2, (9, 5), 1, None, True, "each", "openmpi"),  # odd: rank 0 holds one row more
        (3, (10,), 1, None, True, "rank0", "mpich"),  # 1-D
        (4, (3, 5), 1, None, True, "each", "mpich"),  # rank 3 holds nothing
        (3, (11, 3, 4), 2, None, True, "each", "mpich"),  # odd rows come from the input
        (2, (8, 3, 4), 1, [(0, 2), (1, 3)], True, "rank0", "openmpi"),  # parts of rows
        (4, (13, 6), 1, None, False, "each", "mpich"),  # contiguous blocks
        (2, (12, 6), 3, [(2, 5)], False, "each", "mpich"),
    ],
)
def test_row_writes_reach_the_result_file_as_the_interpreter_writes_them(
    ranks: int,
    shape: tuple[int, ...],
    step: int,
    part: list[tuple[int, int]] | None,
    interleaved: bool,
    io: str,
    mpi: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each rank's rows of a result are merged into few strided writes (one call per
    rank where rows interleave): the file must still hold every row, from the rank that
    wrote it or from the input, and nothing else."""
    if io == "rank0":
        monkeypatch.setenv("DHIR_IO", "rank0")
    rows = list(range(0, shape[0], step))
    owners = [k % ranks if interleaved else k * ranks // len(rows) for k in range(len(rows))]
    text = row_writes(shape, rows, owners, part or [(0, n) for n in shape[1:]])
    a = np.random.default_rng(len(rows)).random(shape)
    timing = _native(text, [a], ranks, mpi, "best")
    if ranks > 1:
        assert any(line.startswith("memory: %a: partitioned") for line in timing.notes)


def _file_messages(timing: Timing) -> dict[int, tuple[int, int]]:
    """Rank: (bytes, messages) of files it sent where rank 0 did the file I/O."""
    lines = [line.split() for line in timing.notes if line.startswith("dhir: files through")]
    return {int(words[6]): (int(words[8]), int(words[11])) for words in lines}


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("mpi", "chunk"), [("mpich", None), ("openmpi", None), ("mpich", 1000), ("mpich", 5)]
)
def test_rank0_moves_a_rank_s_interleaved_rows_in_one_message(
    mpi: str, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With DHIR_IO=rank0, rank 1's 12 rows (every other row of 24, each a range of its
    own: a row is a page) reach it from rank 0's read of the input in one message, not one
    per row, and go back to rank 0 for the result file in two: the rows' count and places,
    then their bytes (not two messages per row; the count was a message of its own). With
    pieces of `chunk` bytes, which cut rows (4096 bytes) apart, a message per piece (of
    the places, at least 8 bytes: the first holds their count)."""
    monkeypatch.setenv("DHIR_IO", "rank0")
    if chunk is not None:
        monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", str(chunk))
    text = row_writes((24, 512), list(range(24)), [k % 2 for k in range(24)], [(0, 512)])
    a = np.random.default_rng(24).random((24, 512))
    timing = _native(text, [a], 2, mpi, "best")
    assert any(line.endswith("(12 ranges)") for line in timing.notes)
    sent = _file_messages(timing)
    rows = 12 * 512 * 8  # rank 1's rows of %a, in bytes
    pieces = -(-rows // chunk) if chunk else 1
    places = 12 * 16  # each row's place in the file and its length, two int64
    assert sent[0] == (rows, pieces)
    place_pieces = -(-(8 + places) // max(chunk, 8)) if chunk else 1
    assert sent[1] == (8 + places + rows, place_pieces + pieces)


# Makes every pwrite to a result file being written (`*.partial`) fail as on a full disk.
FULL_DISK = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
ssize_t pwrite64(int fd, const void *data, size_t count, off_t at) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n > 0 && (path[n] = 0, strstr(path, ".partial") != NULL)) {
    errno = ENOSPC;
    return -1;
  }
  ssize_t (*real)(int, const void *, size_t, off_t) = dlsym(RTLD_NEXT, "pwrite64");
  return real(fd, data, count, at);
}
ssize_t pwrite(int fd, const void *data, size_t count, off_t at) {
  return pwrite64(fd, data, count, at);
}
"""


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("io", ["each", "rank0"])
def test_a_full_disk_names_the_result_file_it_could_not_write(
    io: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "full.c"
    source.write_text(FULL_DISK)
    shim = tmp_path / "full.so"
    subprocess.run(
        ["clang-22", "-shared", "-fPIC", str(source), "-o", str(shim), "-ldl"], check=True
    )
    if io == "rank0":
        monkeypatch.setenv("DHIR_IO", "rank0")
    monkeypatch.setenv("LD_PRELOAD", str(shim))
    text = row_writes((9, 5), list(range(9)), [k % 2 for k in range(9)], [(0, 5)])
    options = RunOptions(ranks=2, mpi="mpich", timeout=90)
    with pytest.raises(DhirError, match=r"cannot write \S*/arg0\.raw\.partial: No space left"):
        run_module(parse_string(text), "main", [np.zeros((9, 5))], "native", options)


# --- memory -----------------------------------------------------------------------------


@needs_mlir
@pytest.mark.mpi
@pytest.mark.slow
def test_each_rank_of_a_partitioned_stencil_holds_about_its_share(tmp_path: Path) -> None:
    """Peak resident memory, measured by bench/peak_rss.py in front of each rank: two
    16 MiB arrays in 4 blocks over 2 ranks take about half each, over an empty run's."""
    sys.path.insert(0, str(BENCH))
    import memory

    n = 4 * 65536 + 2
    text = stencil(n, 4, [0, 0, 1, 1], steps=1)
    values = [np.ones((n, 8)), np.zeros((n, 8))]
    launcher = memory.Launcher(tmp_path, "mpich")
    exe, signature = compile_native(parse_string(text), "main", RunOptions(ranks=2, mpi="mpich"))
    results, reports = launcher.run(exe, signature, 2, values)
    empty_exe, empty_sig = compile_native(
        parse_string(stencil(6, 2, [0, 1], 1)), "main", RunOptions(ranks=2)
    )
    _, empty = launcher.run(empty_exe, empty_sig, 2, [np.ones((6, 8)), np.zeros((6, 8))])
    arrays_mb = 2 * n * 8 * 8 / 2**20
    for rank in (0, 1):
        extra = reports[rank].peak_mb - empty[rank].peak_mb
        print(f"rank {rank}: {extra:.1f} MB over an empty run, arrays {arrays_mb:.1f} MB")
        assert extra < 0.65 * arrays_mb, (rank, extra, arrays_mb)
    assert results[0].shape == (n, 8)


# --- placement ------------------------------------------------------------------------


def test_best_spreads_a_stencil_when_that_is_as_fast_and_holds_less() -> None:
    """The cost model finds jacobi-2d 4096x4096 on one rank about as fast as on two (its
    tasks are bound by memory bandwidth): of placements that close, `best` takes the one
    whose fullest rank holds least. On a described 2-core CPU with a 32 MiB last-level
    cache: with this machine's it may differ (a 105 MiB one holds a task's quarter of
    the grid for one rank alone, and the model finds one rank faster)."""
    from dhir.machine.description import Node, System
    from dhir.machine.detect import detect
    from dhir.machine.dlti import attach

    sys.path.insert(0, str(BENCH / "polybench"))
    import kernels

    here = detect()
    cpu = replace(here.devices[0], core_cache_bytes=1 << 20, llc_bytes=32 << 20, cores=2, ranks=2)
    module = parse_string(kernels.program("jacobi-2d", {"tsteps": 5, "n": 4096}, 4, False))
    attach(module, System((Node(here.nodes[0].name, (cpu,)),), here.network, here.intra_node))
    run_pipeline(module, PassPipeline((PlacePass(2, "best"),)))
    entry = SymbolTable.lookup_symbol(module, "main")
    assert isinstance(entry, func.FuncOp)
    found = row_bands(entry, 2, final_to_root(entry))
    for rows in found.bands.values():
        for ranges in rows:
            assert sum(hi - lo for lo, hi in ranges) < 0.6 * 4096, rows


@needs_mlir
@pytest.mark.mpi
def test_a_time_loop_without_a_fixed_layout_keeps_its_arrays_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the lowering finds no validity every iteration starts with (no rounds here),
    the loop's schedule assembles its data every iteration: its arrays stay whole."""
    monkeypatch.setattr(lower_to_mpi, "LOOP_ROUNDS", 0)
    rng = np.random.default_rng(3)
    a, b = rng.random((22, 8)), rng.random((22, 8))
    timing = _native(stencil(22, 4, [0, 0, 1, 1], steps=3), [a, b], 2, "mpich", "best")
    for name in ("%a", "%b"):
        assert f"memory: {name}: whole on every rank, its time loop finds no fixed layout" in (
            timing.notes
        )


@needs_mlir
def test_an_unknown_dhir_io_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_IO", "bogus")
    a, b = np.zeros((22, 8)), np.zeros((22, 8))
    with pytest.raises(DhirError, match="DHIR_IO is 'bogus'; it takes rank0"):
        _native(stencil(22, 4, [0, 1, 0, 1], steps=1), [a, b], 2, "mpich", "best")


def test_ranks_holding_alike_share_a_line() -> None:
    """Thousands of ranks print a line of a few runs, not one entry per rank."""
    partition = Partition(6, {0: (((0, 20),), (), (), (), ((20, 30),), ())}, {})
    assert partition.lines({0: "%a"}) == [
        "%a: partitioned, rank 0 rows 0..19; ranks 1-3 rows none; rank 4 rows 20..29; "
        "rank 5 rows none"
    ]


# --- interleaved placements -------------------------------------------------------------


def interleaved(rows: int, cols: int, ranks: int, halo: bool = True) -> str:
    """Task k, on rank k mod `ranks`, writes row k of %b from rows k-1 (with `halo`) and
    k of %a."""
    t = f"memref<{rows}x{cols}xf64>"
    tasks = "".join(
        f"""
    dhir.task %cpu, %a, %b attributes {{dhir.rank = {k % ranks} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cc = arith.constant {cols} : index
      %i = arith.constant {k} : index
      %up = arith.constant {max(k - 1, 0) if halo else k} : index
      scf.for %j = %c0 to %cc step %c1 {{
        %x = memref.load %a[%i, %j] : {t}
        %y = memref.load %a[%up, %j] : {t}
        %s = arith.addf %x, %y : f64
        memref.store %s, %b[%i, %j] : {t}
      }}
    }}"""
        for k in range(rows)
    )
    return f"""func.func @main(%a: {t}, %b: {t}) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}{tasks}
  }}
  return
}}
"""


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_interleaved_rows_of_a_page_or_more_are_held_apart(ranks: int) -> None:
    """Rank r writes rows r, r+R, ... of %b: rows of 8 KiB keep the rows between them
    out of its memory (each holds a whole page), so it holds 1/R of %b."""
    rows = 40
    found = bands_of(interleaved(rows, 1024, ranks), ranks)
    for rank, mine in enumerate(found.bands[1]):
        assert mine == tuple((k, k + 1) for k in range(rank, rows, ranks))
    names = {0: "%a", 1: "%b"}
    assert "rank 0 rows 0..0, " in found.lines(names)[1]
    assert f"({len(range(0, rows, ranks))} ranges)" in found.lines(names)[1]


def test_interleaved_rows_smaller_than_a_page_are_joined() -> None:
    """Rows of 64 bytes: every page between a rank's rows holds some of them, so the
    rows between cost memory anyway, and the rank holds one range, not a range per row."""
    found = bands_of(interleaved(40, 8, 2), 2)
    assert found.bands[1] == (((0, 39),), ((1, 40),))


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(("ranks", "io"), [(2, "each"), (3, "rank0"), (4, "each")])
def test_interleaved_rows_held_apart_equal_the_interpreter(
    mpi: str, ranks: int, io: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if io == "rank0":
        monkeypatch.setenv("DHIR_IO", "rank0")
    rng = np.random.default_rng(ranks)
    a, b = rng.random((12, 1024)), rng.random((12, 1024))
    timing = _native(interleaved(12, 1024, ranks), [a, b], ranks, mpi, "best")
    assert any(line.startswith("memory: %b: partitioned") for line in timing.notes)


@needs_mlir
@pytest.mark.mpi
@pytest.mark.slow
def test_each_rank_of_interleaved_wide_rows_holds_about_its_share(tmp_path: Path) -> None:
    """Peak resident memory (as above): %a and %b, 256 rows of 64 KiB (16 MiB) each,
    every other row on each of 2 ranks, take about half of them on each, over an empty
    run's (all of them before: the rank's rows were one range)."""
    sys.path.insert(0, str(BENCH))
    import memory

    rows, cols = 256, 8192
    launcher = memory.Launcher(tmp_path, "mpich")
    results, reports = launcher.run(
        *compile_native(
            parse_string(interleaved(rows, cols, 2, False)), "main", RunOptions(ranks=2)
        ),
        2,
        [np.ones((rows, cols)), np.zeros((rows, cols))],
    )
    _, empty = launcher.run(
        *compile_native(parse_string(interleaved(2, cols, 2, False)), "main", RunOptions(ranks=2)),
        2,
        [np.ones((2, cols)), np.zeros((2, cols))],
    )
    arrays_mb = 2 * rows * cols * 8 / 2**20
    for rank in (0, 1):
        extra = reports[rank].peak_mb - empty[rank].peak_mb
        print(f"rank {rank}: {extra:.1f} MB over an empty run, arrays {arrays_mb:.1f} MB")
        assert extra < 0.65 * arrays_mb, (rank, extra, arrays_mb)
    assert np.array_equal(results[1], np.full((rows, cols), 2.0))


def test_many_evenly_spaced_ranges_are_described_in_short() -> None:
    assert describe(((0, 1), (2, 3), (4, 5), (6, 7))) == "0..0, 2..2, 4..4, 6..6"
    rows = (*((k, k + 1) for k in range(0, 20, 2)), (30, 35))
    assert describe(rows) == "0..0, 2..2, ..., 18..18 (10 ranges), 30..34"
