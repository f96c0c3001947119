"""Access regions, validity and the messages built from them: a stencil in a time loop
exchanges only its halo rows, strided blocks travel as strided MPI messages, and every
native run equals the interpreter."""

import shutil

import islpy as isl
import numpy as np
import pytest
from test_messages import MPIS

import dhir
from dhir.analysis.regions import task_regions
from dhir.analysis.validity import Box, Validity, blocks_of
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.text import parse_string
from dhir.toolchain.options import RunOptions
from dhir.transforms.lower_to_mpi import loop_entry_state

needs_mlir = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

N = 12


def _sweep(src: str, dst: str, lo: int, hi: int, rank: int, k: int) -> str:
    """A 5-point average of rows lo..hi-1 of `src` into `dst`, on `rank`."""
    return f"""
    %s{k} = dhir.task %cpu, %{src}, %{dst} attributes {{dhir.rank = {rank} : i64}} {{
      %c1 = arith.constant 1 : index
      %lo = arith.constant {lo} : index
      %hi = arith.constant {hi} : index
      %last = arith.constant {N - 1} : index
      scf.for %i = %lo to %hi step %c1 {{
        scf.for %j = %c1 to %last step %c1 {{
          %im = arith.subi %i, %c1 : index
          %ip = arith.addi %i, %c1 : index
          %jm = arith.subi %j, %c1 : index
          %jp = arith.addi %j, %c1 : index
          %n = memref.load %{src}[%im, %j] : memref<{N}x{N}xi64>
          %s = memref.load %{src}[%ip, %j] : memref<{N}x{N}xi64>
          %w = memref.load %{src}[%i, %jm] : memref<{N}x{N}xi64>
          %e = memref.load %{src}[%i, %jp] : memref<{N}x{N}xi64>
          %a = arith.addi %n, %s : i64
          %b = arith.addi %w, %e : i64
          %c = arith.addi %a, %b : i64
          memref.store %c, %{dst}[%i, %j] : memref<{N}x{N}xi64>
        }}
      }}
    }}"""


def stencil(ranks: int) -> str:
    half = N // 2
    tasks = [
        _sweep("u", "v", 1, half, 0, 0),
        _sweep("u", "v", half, N - 1, 1 % ranks, 1),
        _sweep("v", "u", 1, half, 0, 2),
        _sweep("v", "u", half, N - 1, 1 % ranks, 3),
    ]
    return f"""
func.func @main(%u: memref<{N}x{N}xi64>, %v: memref<{N}x{N}xi64>, %steps: index) {{
  %zero = arith.constant 0 : index
  %one = arith.constant 1 : index
  scf.for %t = %zero to %steps step %one {{
    dhir.schedule %u, %v {{
      %cpu = dhir.target {{kind = "cpu"}}
      {"".join(tasks)}
    }}
  }}
  return
}}
"""


def _schedule(text: str) -> ScheduleOp:
    module = parse_string(text)
    return next(op for op in module.walk() if isinstance(op, ScheduleOp))


def test_a_stencil_in_a_time_loop_exchanges_only_halo_rows() -> None:
    schedule = _schedule(stencil(2))
    kept = loop_entry_state(schedule, 2)
    assert kept is not None, "the schedule is the loop body's only user of u and v"
    _, start = kept
    # Two iterations from the loop's steady state: each sweep brings one halo row (the
    # interior columns, N - 2 elements) to each rank, nothing else.
    state = start.copy()
    for _ in range(2):
        moved: list[int] = []
        for task in schedule.tasks():
            regions = task_regions(task)
            rank = 0 if task.attributes["dhir.rank"].value.data == 0 else 1  # type: ignore[union-attr]
            for value in task.memrefs:
                for transfer in state.run_task(
                    value,
                    rank,
                    regions.read(value),
                    regions.written(value),
                    regions.must_written(value),
                ):
                    elements = transfer.elements()
                    assert elements is not None
                    moved.append(elements)
        assert moved == [N - 2] * 4
        assert state.same(start) or start.meet(state).same(start)


def test_the_first_sweep_of_a_schedule_outside_a_loop_needs_no_message() -> None:
    schedule = _schedule(stencil(2))
    state = Validity(list(schedule.args), 2)
    first = next(iter(schedule.tasks()))
    regions = task_regions(first)
    for value in first.memrefs:
        transfers = state.run_task(
            value, 0, regions.read(value), regions.written(value), regions.must_written(value)
        )
        assert transfers == []


def test_a_box_is_one_run_when_contiguous_or_its_span_is_held() -> None:
    shape = (4, 6)
    everything = isl.Set("{ [x0, x1] : 0 <= x0 < 4 and 0 <= x1 < 6 }")
    rows = Box((1, 0), (3, 6))
    assert [(b.offset, b.length, b.count) for b in blocks_of(rows, shape, everything)] == [
        (6, 12, 1)
    ]
    block = Box((1, 2), (3, 4))
    # The span from (1, 2) to (2, 3) is held: one run of 8 elements.
    assert [(b.offset, b.length) for b in blocks_of(block, shape, everything)] == [(8, 8)]
    # Held only where the box is: two runs of 2, 6 apart.
    only = block.as_set()
    (strided,) = blocks_of(block, shape, only)
    assert (strided.offset, strided.length, strided.count, strided.stride) == (8, 2, 2, 6)


COLUMNS = """
func.func @main(%a: memref<6x8xi64>, %b: memref<6x8xi64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %left = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c6 = arith.constant 6 : index
      scf.for %i = %c0 to %c6 step %c1 {
        scf.for %j = %c0 to %c3 step %c1 {
          %x = memref.load %a[%i, %j] : memref<6x8xi64>
          %i64 = arith.index_cast %i : index to i64
          %y = arith.addi %x, %i64 : i64
          memref.store %y, %a[%i, %j] : memref<6x8xi64>
        }
      }
    }
    %right = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c5 = arith.constant 5 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c1 to %c5 step %c1 {
        scf.for %j = %c3 to %c8 step %c1 {
          %x = memref.load %a[%i, %j] : memref<6x8xi64>
          %y = arith.muli %x, %x : i64
          memref.store %y, %a[%i, %j] : memref<6x8xi64>
        }
      }
    }
    %all = dhir.task %cpu, %a, %b attributes {dhir.rank = 2 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c6 step %c1 {
        scf.for %j = %c0 to %c8 step %c1 {
          %x = memref.load %a[%i, %j] : memref<6x8xi64>
          %c = arith.constant 3 : i64
          %y = arith.muli %x, %c : i64
          memref.store %y, %b[%i, %j] : memref<6x8xi64>
        }
      }
    }
  }
  return
}
"""


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_column_blocks_travel_strided_and_equal_the_oracle(mpi: str) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (6, 8)).astype(np.int64)
    b = np.zeros((6, 8), dtype=np.int64)
    expected = dhir.run(COLUMNS, a.copy(), b.copy(), backend="interp")
    got = dhir.run(COLUMNS, a.copy(), b.copy(), backend="native", ranks=3, mpi=mpi)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_stencil_in_a_time_loop_equals_the_oracle(ranks: int, mpi: str) -> None:
    rng = np.random.default_rng(ranks)
    u = rng.integers(0, 9, (N, N)).astype(np.int64)
    v = u.copy()
    steps = np.array(3, dtype=np.int64)
    text = stencil(ranks)
    expected = dhir.run(text, u.copy(), v.copy(), steps, backend="interp")
    got = dhir.run(text, u.copy(), v.copy(), steps, backend="native", ranks=ranks, mpi=mpi)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def _with_host_read_through_alias() -> str:
    """The stencil, with host code in the loop reading u[6, 6] through a cast made
    before the loop: the schedule must leave u whole on every rank each iteration."""
    text = stencil(2).replace(
        f"func.func @main(%u: memref<{N}x{N}xi64>, %v: memref<{N}x{N}xi64>, %steps: index) {{",
        f"func.func @main(%u: memref<{N}x{N}xi64>, %v: memref<{N}x{N}xi64>, %steps: index,"
        " %out: memref<1xi64>) {\n"
        f"  %alias = memref.cast %u : memref<{N}x{N}xi64> to memref<?x?xi64>",
    )
    host = """
    %six = arith.constant 6 : index
    %o = arith.constant 0 : index
    %seen = memref.load %alias[%six, %six] : memref<?x?xi64>
    %sum = memref.load %out[%o] : memref<1xi64>
    %new = arith.addi %sum, %seen : i64
    memref.store %new, %out[%o] : memref<1xi64>
  }
  return"""
    return text.replace("\n  }\n  return", host)


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_host_code_reading_an_alias_in_the_loop_sees_every_sweep(mpi: str) -> None:
    text = _with_host_read_through_alias()
    assert loop_entry_state(_schedule(text), 2) is None
    rng = np.random.default_rng(7)
    u = rng.integers(0, 9, (N, N)).astype(np.int64)
    inputs = [u, u.copy(), np.array(3, dtype=np.int64), np.zeros(1, dtype=np.int64)]
    expected = dhir.run(text, *(x.copy() for x in inputs), backend="interp")
    got = dhir.run(text, *(x.copy() for x in inputs), backend="native", ranks=2, mpi=mpi)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def _row_blocks(ranks: int, host_read: bool) -> str:
    rows = 4 * ranks
    tasks = "".join(
        f"""
    %w{r} = dhir.task %cpu, %a attributes {{dhir.rank = {r} : i64}} {{
      %c1 = arith.constant 1 : index
      %lo = arith.constant {4 * r} : index
      %hi = arith.constant {4 * r + 4} : index
      %c0 = arith.constant 0 : index
      %c5 = arith.constant 5 : index
      %k = arith.constant {r + 2} : i64
      scf.for %i = %lo to %hi step %c1 {{
        scf.for %j = %c0 to %c5 step %c1 {{
          %x = memref.load %a[%i, %j] : memref<{rows}x5xi64>
          %y = arith.muli %x, %k : i64
          memref.store %y, %a[%i, %j] : memref<{rows}x5xi64>
        }}
      }}
    }}"""
        for r in range(ranks)
    )
    after = ""
    if host_read:
        after = f"""
  %z = arith.constant 1 : index
  %seen = memref.load %a[%z, %z] : memref<{rows}x5xi64>
  %o = arith.constant 0 : index
  memref.store %seen, %out[%o] : memref<1xi64>"""
    return f"""
func.func @main(%a: memref<{rows}x5xi64>, %out: memref<1xi64>) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    {tasks}
  }}{after}
  return
}}
"""


@pytest.mark.parametrize("host_read", [False, True])
def test_row_blocks_are_assembled_by_one_collective(host_read: bool) -> None:
    from dhir.api import run_pipeline

    module = parse_string(_row_blocks(4, host_read))
    run_pipeline(module, "dhir-lower-to-mpi{ranks=4}")
    text = str(module)
    call = "dhir_rt_allgatherv" if host_read else "dhir_rt_gatherv"
    assert text.count(f"func.call @{call}(") == 4  # one per rank, each under its guard
    assert "dhir_rt_bcast" not in text and "dhir_rt_send" not in text


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("chunk", [None, "24"])
@pytest.mark.parametrize("host_read", [False, True])
@pytest.mark.parametrize("mpi", MPIS)
def test_collective_assembly_equals_the_oracle(
    mpi: str, host_read: bool, chunk: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A piece smaller than a rank's run takes the runtime's path without MPI_*gatherv.
    if chunk is not None:
        monkeypatch.setenv("DHIR_MESSAGE_CHUNK_BYTES", chunk)
    text = _row_blocks(4, host_read)
    rng = np.random.default_rng(5)
    a = rng.integers(-9, 9, (16, 5)).astype(np.int64)
    out = np.zeros(1, dtype=np.int64)
    expected = dhir.run(text, a.copy(), out.copy(), backend="interp")
    got = dhir.run(text, a.copy(), out.copy(), backend="native", ranks=4, mpi=mpi)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


@needs_mlir
@pytest.mark.mpi
def test_timing_reports_the_bytes_each_rank_sent() -> None:
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing

    timing = Timing()
    a = np.arange(48, dtype=np.int64).reshape(6, 8)
    b = np.zeros((6, 8), dtype=np.int64)
    run_module(parse_string(COLUMNS), "main", [a, b], "native", RunOptions(ranks=3), timing=timing)
    ranks = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    sent = {int(words[2]): int(words[4]) for words in ranks}
    took = {int(words[2]): int(words[-4]) for words in ranks}
    # Rank 2 reads all of %a: rank 0 sends the 6x3 left block it wrote, rank 1 its 4x5
    # block. Nothing goes to rank 0 at the end: each rank holds only the rows it touches
    # (rank 1 rows 1..4 of %a, rank 2 all of both) and writes its part of the results.
    # Every element is an i64.
    assert sent == {0: 18 * 8, 1: 20 * 8, 2: 0}
    assert took == {0: 48 * 8, 1: 32 * 8, 2: 2 * 48 * 8}
    assert "dhir: rank 1 sent 160 bytes in " in timing.report()


def _writer(rank: int) -> str:
    """A task on `rank` writing rows 4 * rank .. 4 * rank + 3 of %a."""
    return f"""
    %t{rank} = dhir.task %cpu, %a attributes {{dhir.rank = {rank}}} {{
      %one = arith.constant 1 : index
      %lo = arith.constant {4 * rank} : index
      %hi = arith.constant {4 * rank + 4} : index
      %x = arith.constant {rank + 1}.0 : f64
      scf.for %i = %lo to %hi step %one {{
        memref.store %x, %a[%i] : memref<12xf64>
      }}
    }}"""


def _writers(ranks: range) -> str:
    writers = "".join(_writer(r) for r in ranks)
    return f'  dhir.schedule %a {{\n    %cpu = dhir.target {{kind = "cpu"}}{writers}\n  }}\n'


# Two schedules list %a, so it stays whole: after the first, an allgatherv to which rank 2
# brings no run; after the second, a gatherv to rank 0, whose own run stays in place.
SCHEDULES = _writers(range(2)) + _writers(range(3))
GATHERS = f"func.func @main(%a: memref<12xf64>) {{\n{SCHEDULES}  return\n}}\n"


@needs_mlir
@pytest.mark.mpi
def test_a_gather_counts_only_at_the_ranks_whose_rows_it_moves() -> None:
    from dhir.runner import run_module
    from dhir.toolchain.build import Timing

    timing = Timing()
    options = RunOptions(ranks=3)
    module = parse_string(GATHERS)
    (got,) = run_module(module, "main", [np.zeros(12)], "native", options, timing=timing)
    np.testing.assert_array_equal(got, np.repeat([1.0, 2.0, 3.0], 4))
    ranks = [line.split() for line in timing.notes if line.startswith("dhir: rank")]
    sent = {int(words[2]): (int(words[4]), int(words[7])) for words in ranks}
    # Rank 0 sends its rows once (the allgatherv), rank 1 twice, rank 2 once (the gatherv):
    # a rank with no rows to send counted a message of 0 bytes.
    assert sent == {0: (32, 1), 1: (64, 2), 2: (32, 1)}


def _while_stencil() -> str:
    """The stencil under `scf.while` counting down %steps (the condition reads no memref)."""
    text = stencil(2)
    head = "  scf.for %t = %zero to %steps step %one {\n"
    assert head in text
    loop = (
        "  %left = scf.while (%k = %steps) : (index) -> index {\n"
        "    %more = arith.cmpi sgt, %k, %zero : index\n"
        "    scf.condition(%more) %k : index\n"
        "  } do {\n"
        "  ^bb0(%k2: index):\n"
    )
    text = text.replace(head, loop)
    return text.replace(
        "    }}\n  }}\n  return".replace("}}", "}"),
        "    }\n    %next = arith.subi %k2, %one : index\n    scf.yield %next : index\n  }\n  return",
    )


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_a_stencil_in_a_while_loop_stays_distributed_and_equals_the_oracle(mpi: str) -> None:
    text = _while_stencil()
    assert loop_entry_state(_schedule(text), 2) is not None
    rng = np.random.default_rng(11)
    u = rng.integers(0, 9, (N, N)).astype(np.int64)
    steps = np.array(3, dtype=np.int64)
    expected = dhir.run(text, u.copy(), u.copy(), steps, backend="interp")
    got = dhir.run(text, u.copy(), u.copy(), steps, backend="native", ranks=2, mpi=mpi)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


VECTORS = """
func.func @main(%f: memref<8xf32>, %g: memref<8xf32>) {
  dhir.schedule %f, %g {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %f, %g {
      %c2 = arith.constant 2 : index
      %x = arith.constant dense<1.0> : vector<4xf32>
      vector.store %x, %f[%c2] : memref<8xf32>, vector<4xf32>
      %y = arith.constant 1.0 : f32
      %z = vector.broadcast %y : f32 to vector<[4]xf32>
      vector.store %z, %g[%c2] : memref<8xf32>, vector<[4]xf32>
    }
  }
  return
}
"""


def test_vector_lanes_are_elements_unless_the_vector_is_scalable() -> None:
    """A vector store writes its lanes' elements (surely); a scalable vector's length is
    unknown, so its store counts as the whole memref and never as a must-write."""
    task = next(iter(_schedule(VECTORS).tasks()))
    regions = task_regions(task)
    f, g = task.memrefs
    lanes = isl.Set("{ [x0] : 2 <= x0 <= 5 }")
    assert regions.written(f).is_equal(lanes) and regions.must_written(f).is_equal(lanes)
    assert regions.written(g).is_equal(isl.Set("{ [x0] : 0 <= x0 <= 7 }"))
    assert regions.must_written(g).is_empty()


# --- unranked memrefs ----------------------------------------------------------------

# Rank 0 doubles %a; rank 1 copies a view of it into a view of %b through memref<*xi32>s;
# host code after the schedule reads both, so neither is partitioned.
UNRANKED_COPY = """
func.func @main(%a: memref<4x6xi32>, %b: memref<4x6xi32>, %s: memref<1xi32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c6 = arith.constant 6 : index
      scf.for %i = %c0 to %c4 step %c1 {
        scf.for %j = %c0 to %c6 step %c1 {
          %v = memref.load %a[%i, %j] : memref<4x6xi32>
          %w = arith.addi %v, %v : i32
          memref.store %w, %a[%i, %j] : memref<4x6xi32>
        }
      }
    }
    %t1 = dhir.task %cpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %sv = memref.subview %a[1, 2] [2, 3] [1, 1] : memref<4x6xi32> to memref<2x3xi32, strided<[6, 1], offset: 8>>
      %dv = memref.subview %b[2, 0] [2, 3] [1, 2] : memref<4x6xi32> to memref<2x3xi32, strided<[6, 2], offset: 12>>
      %us = memref.cast %sv : memref<2x3xi32, strided<[6, 1], offset: 8>> to memref<*xi32>
      %ud = memref.cast %dv : memref<2x3xi32, strided<[6, 2], offset: 12>> to memref<*xi32>
      memref.copy %us, %ud : memref<*xi32> to memref<*xi32>
    }
  }
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0, %c0] : memref<4x6xi32>
  %y = memref.load %b[%c0, %c0] : memref<4x6xi32>
  %z = arith.addi %x, %y : i32
  memref.store %z, %s[%c0] : memref<1xi32>
  return
}
"""


def test_a_copy_of_unranked_memrefs_may_touch_all_of_what_they_view() -> None:
    """An unranked memref's type has no shape to bound an access with: a copy through
    one may read or write any element of the memref it views, never surely. (It read
    and wrote nothing, so rank 1 copied stale data and its write was lost.)"""
    task = list(_schedule(UNRANKED_COPY).tasks())[1]
    regions = task_regions(task)
    a, b = task.memrefs
    every = isl.Set("{ [x0, x1] : 0 <= x0 <= 3 and 0 <= x1 <= 5 }")
    assert regions.read(a).is_equal(every)
    assert regions.written(b).is_equal(every)
    assert regions.must_written(b).is_empty()


@needs_mlir
@pytest.mark.mpi
def test_a_copy_of_unranked_memrefs_on_another_rank_equals_the_interpreter() -> None:
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    inputs = [a, np.zeros((4, 6), np.int32), np.zeros(1, np.int32)]
    expected = dhir.run(UNRANKED_COPY, *(x.copy() for x in inputs), backend="interp")
    assert expected[1][2].tolist() == [16, 0, 18, 0, 20, 0]
    got = dhir.run(UNRANKED_COPY, *(x.copy() for x in inputs), backend="native", ranks=2)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


# --- casts of narrow and unsigned integers, memrefs chosen by arith.select (issue 23) ---

# The user's program: -2 : i3 read unsigned is 6; the store on rank 1 must reach rank 0.
CASTUI = """
func.func @main(%a: memref<8xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c = arith.constant -2 : i3
      %i = arith.index_castui %c : i3 to index
      %x = arith.constant 7 : i32
      memref.store %x, %a[%i] : memref<8xi32>
    }
  }
  return
}
"""

# An i3 loop from -4 to 3 on rank 1, its variable read unsigned (rows 4-7, then 0-2)
# and signed (the value stored); rank 0 then reads all of %a.
I3_LOOP = """
func.func @main(%a: memref<8xi32>, %sum: memref<1xi32>) {
  dhir.schedule %a, %sum {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %lo = arith.constant -4 : i3
      %hi = arith.constant 3 : i3
      %one = arith.constant 1 : i3
      scf.for %i = %lo to %hi step %one : i3 {
        %x = arith.index_castui %i : i3 to index
        %v = arith.extsi %i : i3 to i32
        memref.store %v, %a[%x] : memref<8xi32>
      }
    }
    %r = dhir.task %cpu, %a, %sum attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {
        %v = memref.load %a[%i] : memref<8xi32>
        %s = memref.load %sum[%c0] : memref<1xi32>
        %n = arith.addi %s, %v : i32
        memref.store %n, %sum[%c0] : memref<1xi32>
      }
    }
  }
  return
}
"""

# A store through arith.select of two memrefs, on rank 1.
SELECT_STORE = """
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>, %flag: i1) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %m = arith.select %flag, %a, %b : memref<4xi32>
      %c1 = arith.constant 1 : index
      %x = arith.constant 7 : i32
      memref.store %x, %m[%c1] : memref<4xi32>
    }
  }
  return
}
"""


def _ping_pong_sweep(k: int, lo: int, hi: int) -> str:
    """Rows lo..hi-1 of the step's destination from three rows of its source."""
    return f"""
    %s{k} = dhir.task %cpu, %u, %v {{
      %src = arith.select %even, %u, %v : memref<10x4xi64>
      %dst = arith.select %even, %v, %u : memref<10x4xi64>
      %k0 = arith.constant 0 : index
      %k1 = arith.constant 1 : index
      %k4 = arith.constant 4 : index
      %lo = arith.constant {lo} : index
      %hi = arith.constant {hi} : index
      %three = arith.constant 3 : i64
      scf.for %i = %lo to %hi step %k1 {{
        scf.for %j = %k0 to %k4 step %k1 {{
          %im = arith.subi %i, %k1 : index
          %ip = arith.addi %i, %k1 : index
          %n = memref.load %src[%im, %j] : memref<10x4xi64>
          %m = memref.load %src[%i, %j] : memref<10x4xi64>
          %s = memref.load %src[%ip, %j] : memref<10x4xi64>
          %a = arith.addi %n, %s : i64
          %b = arith.muli %m, %three : i64
          %c = arith.subi %b, %a : i64
          memref.store %c, %dst[%i, %j] : memref<10x4xi64>
        }}
      }}
    }}"""


# The natural ping-pong stencil: each step reads one buffer and writes the other, the
# pair chosen by the step's parity; three tasks over row blocks.
PING_PONG = f"""
func.func @main(%u: memref<10x4xi64>, %v: memref<10x4xi64>, %steps: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %t = %c0 to %steps step %c1 {{
    %p = arith.remui %t, %c2 : index
    %even = arith.cmpi eq, %p, %c0 : index
    dhir.schedule %u, %v {{
      %cpu = dhir.target {{kind = "cpu"}}
      {_ping_pong_sweep(0, 1, 4)}
      {_ping_pong_sweep(1, 4, 7)}
      {_ping_pong_sweep(2, 7, 9)}
    }}
  }}
  return
}}
"""


def _ping_pong(u: np.ndarray, v: np.ndarray, steps: int) -> list[np.ndarray]:
    bufs = [u.copy(), v.copy()]
    for t in range(steps):
        src, dst = bufs[t % 2], bufs[1 - t % 2]
        dst[1:9] = 3 * src[1:9] - src[0:8] - src[2:10]
    return [*bufs, np.array(steps)]


# The buffer a time loop's schedule works on, chosen anew each step by host code: its data
# cannot stay distributed between steps (the next step's %m is the other buffer).
HOST_SELECT = """
func.func @main(%u: memref<8xi32>, %v: memref<8xi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %t = %c0 to %steps step %c1 {
    %p = arith.remui %t, %c2 : index
    %even = arith.cmpi eq, %p, %c0 : index
    %m = arith.select %even, %u, %v : memref<8xi32>
    dhir.schedule %m {
      %cpu = dhir.target {kind = "cpu"}
      %t0 = dhir.task %cpu, %m attributes {dhir.rank = 1 : i64} {
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k4 = arith.constant 4 : index
        %three = arith.constant 3 : i32
        scf.for %i = %k0 to %k4 step %k1 {
          %x = memref.load %m[%i] : memref<8xi32>
          %y = arith.muli %x, %three : i32
          memref.store %y, %m[%i] : memref<8xi32>
        }
      }
      %t1 = dhir.task %cpu, %m attributes {dhir.rank = 0 : i64} {
        %k0 = arith.constant 4 : index
        %k1 = arith.constant 1 : index
        %k4 = arith.constant 8 : index
        %two = arith.constant 2 : i32
        scf.for %i = %k0 to %k4 step %k1 {
          %x = memref.load %m[%i] : memref<8xi32>
          %y = arith.addi %x, %two : i32
          memref.store %y, %m[%i] : memref<8xi32>
        }
      }
    }
  }
  return
}
"""

# Subscripts through min, max and select (dhir.analysis.lift): min(i, 3) for i in 0..6
# surely writes rows 0-3 (row 3 last with 7), max(i, 5) rows 5-6, and a select
# of i and 7 - i may write any row between them (rows 0, 6, 5), surely none; a last
# task reads them all.
MIN_MAX_SELECT = """
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %w1 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c7 = arith.constant 7 : index
      scf.for %i = %c0 to %c7 step %c1 {
        %r = arith.minsi %i, %c3 : index
        %n = arith.addi %i, %c1 : index
        %v = arith.index_cast %n : index to i32
        memref.store %v, %a[%r] : memref<8xi32>
      }
    }
    %w2 = dhir.task %cpu, %a {
      %v = arith.constant -3 : i32
      %c5 = arith.constant 5 : index
      affine.for %i = 0 to 7 {
        %r = arith.maxsi %i, %c5 : index
        memref.store %v, %a[%r] : memref<8xi32>
      }
    }
    %w3 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c7 = arith.constant 7 : index
      %forty = arith.constant 40 : i32
      scf.for %i = %c0 to %c3 step %c1 {
        %first = arith.cmpi slt, %i, %c1 : index
        %j = arith.subi %c7, %i : index
        %r = arith.select %first, %i, %j : index
        %k = arith.index_cast %i : index to i32
        %v = arith.addi %forty, %k : i32
        memref.store %v, %a[%r] : memref<8xi32>
      }
    }
    %read = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c0 to %c8 step %c1 {
        %x = memref.load %a[%i] : memref<8xi32>
        %y = memref.load %b[%i] : memref<8xi32>
        %z = arith.addi %x, %y : i32
        memref.store %z, %b[%i] : memref<8xi32>
      }
    }
  }
  return
}
"""


def _min_max_select(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    a, b = a.copy(), b.copy()
    for i in range(7):
        a[min(i, 3)] = i + 1
    for i in range(7):
        a[max(i, 5)] = -3
    for i in range(3):
        a[i if i < 1 else 7 - i] = 40 + i
    return [a, a + b]


def _min_max_select_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(8)
    return [rng.integers(-9, 9, 8).astype(np.int32), rng.integers(-9, 9, 8).astype(np.int32)]


CASES = {
    "castui-of-minus-2-i3": (CASTUI, lambda: [np.zeros(8, np.int32)]),
    "i3-loop-through-castui": (I3_LOOP, lambda: [np.full(8, 99, np.int32), np.zeros(1, np.int32)]),
    "store-through-select-true": (
        SELECT_STORE,
        lambda: [np.zeros(4, np.int32), np.zeros(4, np.int32), True],
    ),
    "store-through-select-false": (
        SELECT_STORE,
        lambda: [np.zeros(4, np.int32), np.zeros(4, np.int32), False],
    ),
    "host-select-in-a-time-loop": (
        HOST_SELECT,
        lambda: [np.arange(8, dtype=np.int32), np.arange(8, dtype=np.int32) * 10, 4],
    ),
    "min-max-select-subscripts": (MIN_MAX_SELECT, _min_max_select_inputs),
    "ping-pong-by-parity": (
        PING_PONG,
        lambda: [
            np.random.default_rng(4).integers(-9, 9, (10, 4)).astype(np.int64),
            np.zeros((10, 4), np.int64),
            5,
        ],
    ),
}


def test_casts_and_selects_interp_means_what_the_programs_say() -> None:
    """The oracle itself: the values the user expected."""
    a = dhir.run(CASTUI, np.zeros(8, np.int32), backend="interp")[0]
    assert a.tolist() == [0, 0, 0, 0, 0, 0, 7, 0]
    a, total = dhir.run(I3_LOOP, *CASES["i3-loop-through-castui"][1](), backend="interp")[:2]
    assert a.tolist() == [0, 1, 2, 99, -4, -3, -2, -1] and total.tolist() == [92]
    for flag, written in ((True, 0), (False, 1)):
        got = dhir.run(
            SELECT_STORE, np.zeros(4, np.int32), np.zeros(4, np.int32), flag, backend="interp"
        )
        assert got[written].tolist() == [0, 7, 0, 0] and not got[1 - written].any()
    inputs = CASES["ping-pong-by-parity"][1]()
    got = dhir.run(PING_PONG, *inputs, backend="interp")
    for have, want in zip(got, _ping_pong(*inputs), strict=True):
        np.testing.assert_array_equal(have, want)


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_casts_and_selects_run_natively_as_the_interpreter_does(
    name: str, ranks: int, mpi: str
) -> None:
    text, make = CASES[name]
    expected = dhir.run(text, *make(), backend="interp")
    got = dhir.run(text, *make(), backend="native", ranks=ranks, mpi=mpi, placement="round-robin")
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def test_subscripts_through_min_max_and_select_have_their_regions() -> None:
    """min and max are exact (must-writes); a select of two subscripts may write any row
    between them, surely none. The oracle says what the program means."""
    inputs = _min_max_select_inputs()
    got = dhir.run(MIN_MAX_SELECT, *inputs, backend="interp")
    for have, want in zip(got, _min_max_select(*inputs), strict=True):
        np.testing.assert_array_equal(have, want)
    w1, w2, w3, _ = _schedule(MIN_MAX_SELECT).tasks()
    a = w1.memrefs[0]
    one = task_regions(w1)
    assert one.written(a).is_equal(isl.Set("{ [x0] : 0 <= x0 <= 3 }"))
    assert one.must_written(a).is_equal(one.written(a))
    two = task_regions(w2)
    assert two.must_written(a).is_equal(isl.Set("{ [x0] : 5 <= x0 <= 6 }"))
    three = task_regions(w3)
    assert three.written(a).is_equal(isl.Set("{ [x0] : 0 <= x0 <= 7 }"))
    assert three.must_written(a).is_empty()


def test_a_store_through_a_select_may_write_either_memref() -> None:
    """Both memrefs an arith.select may pick are written (may), neither surely."""
    task = next(iter(_schedule(SELECT_STORE).tasks()))
    regions = task_regions(task)
    one = isl.Set("{ [x0] : x0 = 1 }")
    for memref in task.memrefs:
        assert regions.written(memref).is_equal(one)
        assert regions.must_written(memref).is_empty()


TRANSPOSED = """
func.func @main(%a: memref<4x6xf64>, %b: memref<6x4xf64>) {
  dhir.schedule %a, %b {
    %w = dhir.task target = "cpu", %a, %b {
      %t = memref.transpose %a (i, j) -> (j, i) : memref<4x6xf64> to memref<6x4xf64, strided<[1, 6]>>
      %s = memref.subview %t[1, 0] [2, 4] [1, 1] : memref<6x4xf64, strided<[1, 6]>> to memref<2x4xf64, strided<[1, 6], offset: 1>>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %x = memref.load %s[%c1, %j] : memref<2x4xf64, strided<[1, 6], offset: 1>>
        memref.store %x, %b[%c3, %j] : memref<6x4xf64>
        memref.store %x, %t[%c0, %j] : memref<6x4xf64, strided<[1, 6]>>
      }
    }
  }
  return
}
"""


def test_a_transposed_view_maps_its_indices_back_to_the_buffer() -> None:
    """%t[i, j] is %a[j, i]: the task reads column 2 of %a (row 2 of %t, through a
    subview of it) and writes its column 0, not all of %a."""
    task = next(iter(_schedule(TRANSPOSED).tasks()))
    regions = task_regions(task)
    a, _ = task.memrefs
    assert regions.read(a).is_equal(isl.Set("{ [x0, 2] : 0 <= x0 <= 3 }"))
    column = isl.Set("{ [x0, 0] : 0 <= x0 <= 3 }")
    assert regions.written(a).is_equal(column) and regions.must_written(a).is_equal(column)


def test_tasks_differing_in_their_constants_share_one_parsed_text() -> None:
    """Tasks that differ only in their constants (task k reads b[k], b[k+1] and writes
    a[k] in a loop from k to k + 2) make their regions from a few parsed isl texts, each
    set still exact."""
    from dhir.analysis import regions

    tasks = 40
    body = []
    for k in range(tasks):
        body.append(f"""
    %t{k} = dhir.task %cpu, %a, %b {{
      %i = arith.constant {k} : index
      %j = arith.constant {k + 1} : index
      %n = arith.constant {k + 2} : index
      %c1 = arith.constant 1 : index
      %x = memref.load %b[%j] : memref<{tasks + 1}xf32>
      scf.for %l = %i to %n step %c1 {{
        memref.store %x, %a[%l] : memref<{tasks + 1}xf32>
      }}
    }}""")
    text = f"""func.func @main(%a: memref<{tasks + 1}xf32>, %b: memref<{tasks + 1}xf32>) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}{"".join(body)}
  }}
  return
}}"""
    schedule = next(op for op in parse_string(text).walk() if isinstance(op, ScheduleOp))
    regions._within.cache_clear()
    for k, task in enumerate(schedule.tasks()):
        found = task_regions(task)
        a, b = task.memrefs
        assert found.read(b).is_equal(isl.Set(f"{{ [x0] : x0 = {k + 1} }}"))
        assert found.written(a).is_equal(isl.Set(f"{{ [x0] : {k} <= x0 < {k + 2} }}"))
        assert found.must_written(a).is_equal(found.written(a))
    assert regions._within.cache_info().misses <= 4


# Subscripts through 64-bit arithmetic that wraps: %B[i + C + C] with C = 2**63 - 1 reads
# %B[i - 2]. The regions once took it as %B[i + 2**64 - 2], no element at all, so rank 1
# read %B[0..6] stale (exit 0), or, %B partitioned, died of SIGSEGV.
WRAPPED = """
func.func @main(%A: memref<16xi64>, %B: memref<16xi64>) {
  dhir.schedule %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %B attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      scf.for %i = %c0 to %c16 step %c1 {
        %x = memref.load %B[%i] : memref<16xi64>
        %k = arith.constant 100 : i64
        %y = arith.addi %x, %k : i64
        memref.store %y, %B[%i] : memref<16xi64>
      }
    }
    %t1 = dhir.task %cpu, %A, %B attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c9 = arith.constant 9 : index
      %big = arith.constant 9223372036854775807 : index
      scf.for %i = %c2 to %c9 step %c1 {
        %a = arith.addi %i, %big : index
        %j = arith.addi %a, %big : index
        %g = memref.load %A[%i] : memref<16xi64>
        %z = arith.constant 0 : i64
        %p = arith.cmpi sge, %g, %z : i64
        scf.if %p {
          %x = memref.load %B[%j] : memref<16xi64>
          memref.store %x, %A[%i] : memref<16xi64>
        }
      }
    }
  }
  HOST
  return
}
"""


def test_a_subscript_that_wraps_at_64_bits_reads_what_it_may_reach() -> None:
    schedule = _schedule(WRAPPED.replace("HOST", ""))
    tasks = list(schedule.body.ops)[1:]
    b = schedule.operands[1]
    read = task_regions(tasks[1]).read(b)  # pyright: ignore[reportArgumentType]
    assert isl.Set("{ [e] : 0 <= e < 7 }").is_subset(read)


@needs_mlir
@pytest.mark.mpi
@pytest.mark.parametrize("host_read", [False, True])
def test_a_subscript_that_wraps_at_64_bits_equals_the_oracle(host_read: bool) -> None:
    """With a host read of %B after the schedule, %B stays whole (the stale read); without,
    it is partitioned (the rank held none of the rows it read)."""
    host = """%h = arith.constant 15 : index
  %hv = memref.load %B[%h] : memref<16xi64>
  memref.store %hv, %A[%h] : memref<16xi64>"""
    text = WRAPPED.replace("HOST", host if host_read else "")
    inputs = (np.zeros(16, dtype=np.int64), np.arange(16, dtype=np.int64))
    expected = dhir.run(text, *inputs, backend="interp")
    got = dhir.run(text, *inputs, backend="native", ranks=2)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)
