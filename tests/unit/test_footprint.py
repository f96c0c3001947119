"""What each rank's tasks touch of each memref argument (dhir/analysis/footprint.py).

The random test runs programs in the interpreter, records every element each task
actually reads or writes (the interpreter's loads and stores, patched for the test),
and checks that it lies in the boxes of the rank the task is placed on, or that the
memref stays whole; an element host code touches, in the boxes of every rank. Hand cases spell out the boxes of stencils and gemms, and why a
memref stays whole.
"""

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from region_programs import Host, Program, programs
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir.analysis import footprint as footprint_module
from dhir.analysis.footprint import (
    MAX_BOXES,
    MAX_CANDIDATES,
    Footprint,
    Whole,
    footprint,
    merged,
    union_volume,
    volume,
)
from dhir.analysis.validity import Box
from dhir.backends.interp import control as interp_control
from dhir.backends.interp import gpu as interp_gpu
from dhir.backends.interp import linalg as interp_linalg
from dhir.backends.interp import memref as interp_memref
from dhir.backends.interp import run_interp
from dhir.backends.interp import vector as interp_vector
from dhir.cli.main import main
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.tasks import rank_of
from dhir.ir.text import parse_string

PROFILE = settings(
    max_examples=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _entry(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def _tasks(module: ModuleOp) -> list[TaskOp]:
    return [t for s in module.walk() if isinstance(s, ScheduleOp) for t in s.tasks()]


def _footprint(text: str, ranks: int) -> Footprint:
    module = parse_string(text)
    return footprint(_entry(module), ranks)


# --- what the interpreter touches -------------------------------------------------------


@dataclass(frozen=True)
class Touch:
    task: TaskOp | None  # None: host code
    root: np.ndarray  # the buffer touched (a view's base array)
    index: tuple[int, ...]  # in the root's own indices


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _element(array: np.ndarray, index: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """The root buffer of `array` and the index in it of `array[index]` (views share
    their root's memory: the element's byte offset says where it is)."""
    root = _root(array)
    start = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    offset = start + sum(int(i) * s for i, s in zip(index, array.strides, strict=True))
    flat, rest = divmod(offset, root.itemsize)
    assert rest == 0 and root.flags.c_contiguous
    return root, tuple(int(i) for i in np.unravel_index(flat, root.shape)) if root.ndim else ()


def _task_of(op: Operation) -> TaskOp | None:
    current = op.parent_op()
    while current is not None and not isinstance(current, TaskOp):
        current = current.parent_op()
    return current


@contextmanager
def recording() -> Iterator[list[Touch]]:
    """Every element the interpreter loads or stores while this lasts, with its task."""
    touches: list[Touch] = []

    def note(op: Operation, array: np.ndarray, index: Sequence[int]) -> None:
        root, at = _element(array, index)
        touches.append(Touch(_task_of(op), root, at))

    def note_all(op: Operation, array: np.ndarray) -> None:
        for index in np.ndindex(*array.shape):
            note(op, array, index)

    load, store, copy = interp_memref.load, interp_memref.store, interp_memref.copy
    contiguous: Callable[..., np.ndarray] = interp_vector._contiguous  # pyright: ignore[reportPrivateUsage]

    def loading(op: Operation, array: np.ndarray, index: Sequence[int]) -> Any:
        note(op, array, index)
        return load(op, array, index)

    def storing(op: Operation, array: np.ndarray, index: Sequence[int], value: Any) -> None:
        note(op, array, index)
        store(op, array, index, value)

    def copying(op: Operation, source: np.ndarray, target: np.ndarray) -> None:
        note_all(op, source)
        note_all(op, target)
        copy(op, source, target)

    def lanes(op: Operation, array: np.ndarray, *rest: Any) -> np.ndarray:
        view = contiguous(op, array, *rest)
        note_all(op, view)
        return view

    with ExitStack() as stack:
        for module in (interp_memref, interp_linalg, interp_control):
            stack.enter_context(mock.patch.object(module, "load", loading))
            stack.enter_context(mock.patch.object(module, "store", storing))
        for module in (interp_memref, interp_gpu):
            stack.enter_context(mock.patch.object(module, "copy", copying))
        stack.enter_context(mock.patch.object(interp_vector, "_contiguous", lanes))
        yield touches


# --- random programs ------------------------------------------------------------------


def _placed(module: ModuleOp, ranks: int, unplaced: bool) -> dict[TaskOp, int]:
    """Each task's rank: its dhir.rank, else round robin (or none, when `unplaced`)."""
    placement: dict[TaskOp, int] = {}
    for k, task in enumerate(_tasks(module)):
        rank = rank_of(task)
        if rank is not None or not unplaced:
            placement[task] = rank if rank is not None else k % ranks
    return placement


def _without_host_code(program: Program) -> Program:
    def kept(phases: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(p for p in phases if not isinstance(p, Host))

    return replace(program, loop=kept(program.loop), after=kept(program.after))


@PROFILE
@given(
    st.integers(1, 4).flatmap(lambda r: st.tuples(st.just(r), programs(ranks=r))),
    st.booleans(),
    st.booleans(),
)
def test_every_element_a_task_touches_is_in_its_ranks_boxes(
    drawn: tuple[int, Program], host_code: bool, unplaced: bool
) -> None:
    ranks, program = drawn
    if not host_code:
        program = _without_host_code(program)
    module = parse_string(program.text())
    placement = _placed(module, ranks, unplaced)
    found = footprint(_entry(module), ranks, placement)
    inputs = program.inputs(0)
    with recording() as touches:
        arrays = run_interp(module, "main", inputs)
    by_root = {id(_root(arrays[m.index])): m for m in found.memrefs}
    assert any(t.task is not None for t in touches), "the recording saw no task"
    bounded = 0
    for touch in touches:
        memref = by_root[id(touch.root)]
        # Host code runs on every rank, and so may a task without a rank.
        rank = placement.get(touch.task) if touch.task is not None else None
        for r in range(ranks) if rank is None else [rank]:
            part = memref.parts[r]
            if isinstance(part, Whole):
                continue
            bounded += 1
            who = "host code" if touch.task is None else "a task"
            assert any(_inside(touch.index, box) for box in part), (
                f"{memref.name}{list(touch.index)}, touched by {who} on rank {r}, is "
                f"outside its boxes {part}\n{program.text()}"
            )
    event(f"elements checked against boxes: {'some' if bounded else 'none'}")


def _inside(index: tuple[int, ...], box: Box) -> bool:
    return all(a <= i < b for i, a, b in zip(index, box.lo, box.hi, strict=True))


def _boxes(dims: int, extent: int) -> st.SearchStrategy[Box]:
    def box(corners: list[tuple[int, int]]) -> Box:
        return Box(tuple(min(c) for c in corners), tuple(max(c) + 1 for c in corners))

    corner = st.tuples(st.integers(0, extent), st.integers(0, extent))
    return st.lists(corner, min_size=dims, max_size=dims).map(box)


@PROFILE
@given(st.integers(1, 3).flatmap(lambda d: st.lists(_boxes(d, 12), min_size=1, max_size=12)))
def test_merged_boxes_are_few_disjoint_and_hold_every_box(boxes: list[Box]) -> None:
    found = merged(boxes)
    assert 1 <= len(found) <= MAX_BOXES
    for k, a in enumerate(found):
        for b in found[k + 1 :]:
            assert any(max(x, y) >= min(u, v) for x, y, u, v in zip(a.lo, b.lo, a.hi, b.hi))
    for box in boxes:
        for index in np.ndindex(*(h - lo for lo, h in zip(box.lo, box.hi))):
            point = tuple(lo + i for lo, i in zip(box.lo, index))
            assert any(_inside(point, b) for b in found), (point, found)


def _rows_of_2d(extent: int) -> st.SearchStrategy[list[Box]]:
    """Many 2-D boxes, most a row or a few (as interleaved tasks touch), some wider."""
    row = st.tuples(st.integers(0, extent - 1), st.integers(1, 3)).map(
        lambda r: Box((r[0], 0), (min(r[0] + r[1], extent), 16))
    )
    return st.lists(st.one_of(row, _boxes(2, extent)), min_size=1, max_size=MAX_CANDIDATES)


@PROFILE
@given(_rows_of_2d(200))
def test_merged_many_boxes_are_few_disjoint_and_hold_every_box(boxes: list[Box]) -> None:
    found = merged(boxes)
    assert 1 <= len(found) <= MAX_BOXES
    for k, a in enumerate(found):
        for b in found[k + 1 :]:
            assert _common(a, b) == 0, (a, b)
    for box in boxes:  # the boxes found being disjoint, what of `box` they hold adds up
        assert sum(_common(box, b) for b in found) == volume(box), (box, found)


def _common(a: Box, b: Box) -> int:
    """Elements a and b share."""
    return math.prod(
        max(0, min(u, v) - max(x, y)) for x, y, u, v in zip(a.lo, b.lo, a.hi, b.hi, strict=True)
    )


def test_merging_interleaved_rows_costs_each_new_box_its_pairs() -> None:
    # A rank's rows of a round-robin placement: every pair of them wastes alike. Choosing
    # each merge anew among all pairs cost the square of the boxes per merge (issue:
    # 29 of 33 s of a 250-task compile on 4 ranks); each merge should only add the new
    # box's pairs.
    rows = [Box((4 * k, 0), (4 * k + 1, 16)) for k in range(MAX_CANDIDATES)]
    footprint_module._few.cache_clear()
    with (
        mock.patch.object(footprint_module, "Box", wraps=Box) as built,
        mock.patch.object(footprint_module, "_overlap", wraps=footprint_module._overlap) as met,
    ):
        found = merged(rows)
    pairs = MAX_CANDIDATES * (MAX_CANDIDATES - 1) // 2
    assert met.call_count <= 3 * pairs
    assert built.call_count <= 2 * MAX_CANDIDATES
    # Every gap wastes 3 rows: the best keeps MAX_BOXES - 1 of them open.
    span = 4 * (MAX_CANDIDATES - 1) + 1
    assert sum(volume(b) for b in found) == (span - 3 * (MAX_BOXES - 1)) * 16
    with mock.patch.object(footprint_module, "Box", wraps=Box) as built:
        assert merged(rows) == found  # the same boxes again (another memref): found once
    assert built.call_count == 0


def test_boxes_of_adjacent_bands_join_into_one() -> None:
    bands = [Box((r, 0), (r + 1, 8)) for r in range(100)]
    assert merged(bands) == (Box((0, 0), (100, 8)),)
    assert volume(merged(bands)[0]) == 800


# --- hand cases -----------------------------------------------------------------------


def jacobi(rows: int, cols: int, ranks: int) -> str:
    """A time loop of 5-point sweeps of u into v and copies back, one task pair per
    band of interior rows, band k on rank k."""
    inner = rows - 2
    bands = [(1 + k * inner // ranks, 1 + (k + 1) * inner // ranks) for k in range(ranks)]
    tasks = []
    for k, (lo, hi) in enumerate(bands):
        tasks.append(f"""
      %s{k} = dhir.task %cpu, %u, %v attributes {{dhir.rank = {k} : i64}} {{
        %one = arith.constant 1 : index
        %lo = arith.constant {lo} : index
        %hi = arith.constant {hi} : index
        %last = arith.constant {cols - 1} : index
        scf.for %i = %lo to %hi step %one {{
          scf.for %j = %one to %last step %one {{
            %im = arith.subi %i, %one : index
            %ip = arith.addi %i, %one : index
            %jm = arith.subi %j, %one : index
            %jp = arith.addi %j, %one : index
            %n = memref.load %u[%im, %j] : memref<{rows}x{cols}xf64>
            %s = memref.load %u[%ip, %j] : memref<{rows}x{cols}xf64>
            %w = memref.load %u[%i, %jm] : memref<{rows}x{cols}xf64>
            %e = memref.load %u[%i, %jp] : memref<{rows}x{cols}xf64>
            %a = arith.addf %n, %s : f64
            %b = arith.addf %w, %e : f64
            %c = arith.addf %a, %b : f64
            memref.store %c, %v[%i, %j] : memref<{rows}x{cols}xf64>
          }}
        }}
      }}
      %b{k} = dhir.task %cpu, %v, %u attributes {{dhir.rank = {k} : i64}} {{
        %one = arith.constant 1 : index
        %lo = arith.constant {lo} : index
        %hi = arith.constant {hi} : index
        %last = arith.constant {cols - 1} : index
        scf.for %i = %lo to %hi step %one {{
          scf.for %j = %one to %last step %one {{
            %x = memref.load %v[%i, %j] : memref<{rows}x{cols}xf64>
            memref.store %x, %u[%i, %j] : memref<{rows}x{cols}xf64>
          }}
        }}
      }}""")
    return f"""
func.func @main(%u: memref<{rows}x{cols}xf64>, %v: memref<{rows}x{cols}xf64>, %steps: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {{
    dhir.schedule %u, %v {{
      %cpu = dhir.target {{kind = "cpu"}}{"".join(tasks)}
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize("ranks", [2, 4])
def test_jacobi_row_bands_need_their_rows_and_one_halo_row_each_side(ranks: int) -> None:
    rows, cols = 18, 6
    found = _footprint(jacobi(rows, cols, ranks), ranks)
    u, v = found.memrefs
    assert (u.name, v.name, u.shape, u.element_bytes) == ("%u", "%v", (rows, cols), 8)
    inner = rows - 2
    for k in range(ranks):
        lo, hi = 1 + k * inner // ranks, 1 + (k + 1) * inner // ranks
        assert u.parts[k] == (Box((lo - 1, 0), (hi + 1, cols)),)
        assert v.parts[k] == (Box((lo, 1), (hi, cols - 1)),)
        # What the tasks touch of %u, counted in the boxes of the pieces of its regions:
        # at least the five-point cross, less than the box around it (no piece reaches
        # the halo rows' outer corners).
        cross = (hi - lo + 2) * (cols - 2) + (hi - lo) * 2
        assert cross * 8 <= (u.bytes_on(k) or 0) < (hi - lo + 2) * cols * 8
        assert v.bytes_on(k) == (hi - lo) * (cols - 2) * 8
        assert found.touched(k) == (u.bytes_on(k) or 0) + v.bytes_on(k)
    assert found.held() == 2 * rows * cols * 8


def gemm(m: int, n: int, k: int, ranks: int) -> str:
    """C += A B with one task per band of C's rows, band r on rank r."""
    tasks = []
    for r in range(ranks):
        lo, hi = r * m // ranks, (r + 1) * m // ranks
        tasks.append(f"""
    %t{r} = dhir.task %cpu, %A, %B, %C attributes {{dhir.rank = {r} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %lo = arith.constant {lo} : index
      %hi = arith.constant {hi} : index
      %n = arith.constant {n} : index
      %k = arith.constant {k} : index
      scf.for %i = %lo to %hi step %c1 {{
        scf.for %j = %c0 to %n step %c1 {{
          scf.for %p = %c0 to %k step %c1 {{
            %a = memref.load %A[%i, %p] : memref<{m}x{k}xf32>
            %b = memref.load %B[%p, %j] : memref<{k}x{n}xf32>
            %c = memref.load %C[%i, %j] : memref<{m}x{n}xf32>
            %ab = arith.mulf %a, %b : f32
            %s = arith.addf %c, %ab : f32
            memref.store %s, %C[%i, %j] : memref<{m}x{n}xf32>
          }}
        }}
      }}
    }}""")
    return f"""
func.func @main(%A: memref<{m}x{k}xf32>, %B: memref<{k}x{n}xf32>, %C: memref<{m}x{n}xf32>) {{
  dhir.schedule %A, %B, %C {{
    %cpu = dhir.target {{kind = "cpu"}}{"".join(tasks)}
  }}
  return
}}
"""


def test_gemm_row_tasks_need_bands_of_a_and_c_and_all_of_b() -> None:
    m, n, k = 10, 6, 4
    found = _footprint(gemm(m, n, k, 2), 2)
    a, b, c = found.memrefs
    assert a.parts == ((Box((0, 0), (5, k)),), (Box((5, 0), (10, k)),))
    assert b.parts == ((Box((0, 0), (k, n)),),) * 2
    assert c.parts == ((Box((0, 0), (5, n)),), (Box((5, 0), (10, n)),))
    assert [found.touched(r) for r in range(2)] == [(5 * k + k * n + 5 * n) * 4] * 2


def _one_task(header: str, host: str = "", body: str = "", memref: str = "memref<8xf32>") -> str:
    """@main(header) with `host` code before a schedule whose task on rank 0 stores
    into %a[0] (and does `body`), and a second task on rank 1 that touches only %b."""
    return f"""
func.func @main({header}) {{
  %c0 = arith.constant 0 : index
  %x = arith.constant 1.0 : f32
{host}
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t0 = dhir.task %cpu, %a attributes {{dhir.rank = 0 : i64}} {{
      %z = arith.constant 0 : index
      %y = arith.constant 2.0 : f32
      memref.store %y, %a[%z] : {memref}
{body}
    }}
    %t1 = dhir.task %cpu, %b attributes {{dhir.rank = 1 : i64}} {{
      %z = arith.constant 3 : index
      %y = arith.constant 2.0 : f32
      memref.store %y, %b[%z] : memref<8xf32>
    }}
  }}
  return
}}
func.func private @f(memref<8xf32>)
"""


ARGS = "%a: memref<8xf32>, %b: memref<8xf32>"


def test_a_memref_no_task_of_a_rank_touches_takes_nothing_there() -> None:
    found = _footprint(_one_task(ARGS), 2)
    a, b = found.memrefs
    assert a.parts == ((Box((0,), (1,)),), ())
    assert b.parts == ((), (Box((3,), (4,)),))
    assert (a.bytes_on(1), b.bytes_on(0)) == (0, 0)
    assert (found.touched(0), found.touched(1), found.held()) == (4, 4, 64)


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        (
            "  %r = memref.load %a[%c0] : memref<8xf32>",
            "host code, which every rank runs, uses it (memref.load at <string>:5:",
        ),
        ("  func.call @f(%a) : (memref<8xf32>) -> ()", "passes it to @f at <string>:5:"),
        (
            "  %h = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32>\n"
            "  memref.store %x, %h[%c0] : memref<4xf32>",
            "uses it (memref.store at <string>:6:",
        ),
        (
            "  %h = memref.cast %a : memref<8xf32> to memref<?xf32>\n"
            "  %c1 = arith.constant 1 : index\n"
            "  scf.for %i = %c0 to %c0 step %c1 {\n"
            "    %r = memref.load %h[%i] : memref<?xf32>\n"
            "  }",
            "uses it (memref.load at <string>:8:",
        ),
    ],
)
def test_a_memref_host_code_uses_stays_whole(host: str, reason: str) -> None:
    found = _footprint(_one_task(ARGS, host), 2)
    a, b = found.memrefs
    assert a.parts[0] == a.parts[1] and isinstance(a.parts[0], Whole)
    assert reason in a.parts[0].reason
    assert b.parts == ((), (Box((3,), (4,)),))  # the other memref is not dragged along
    assert found.touched(1) == 32 + 4


VIEW = """
func.func @main(%a: memref<8xf32>) {
  %w = memref.subview %a[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  dhir.schedule %w {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %w {
      %z = arith.constant 0 : index
      %y = arith.constant 2.0 : f32
      memref.store %y, %w[%z] : memref<4xf32, strided<[1], offset: 2>>
    }
  }
  return
}
"""


def test_a_view_listed_by_the_schedule_keeps_its_memref_whole() -> None:
    (a,) = _footprint(VIEW, 2).memrefs
    assert isinstance(a.parts[0], Whole)
    assert "the schedule at <string>:4:3 lists %w, which may be a view of it" in a.parts[0].reason


def test_an_address_a_task_uses_without_listing_keeps_its_memref_whole() -> None:
    host = "  %p = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index"
    body = "      %q = arith.addi %p, %z : index"
    found = _footprint(_one_task(ARGS, host, body), 2)
    whole = found.memrefs[0].parts[0]
    assert isinstance(whole, Whole) and "a task uses %p" in whole.reason


def test_a_dynamic_shape_stays_whole_and_its_size_is_not_counted() -> None:
    header = "%a: memref<?xf32>, %b: memref<8xf32>"
    found = _footprint(_one_task(header, memref="memref<?xf32>"), 2)
    a, b = found.memrefs
    assert a.shape == (None,) and a.size is None and a.bytes_on(0) is None
    assert isinstance(a.parts[0], Whole) and "its shape is dynamic" in a.parts[0].reason
    assert [m.name for m in found.unsized()] == ["%a"]
    assert (found.touched(0), found.touched(1), found.held()) == (0, 4, 32)


def test_a_task_without_a_rank_counts_on_every_rank() -> None:
    text = _one_task(ARGS).replace(" attributes {dhir.rank = 0 : i64}", "")
    a, _ = _footprint(text, 3).memrefs
    assert a.parts == ((Box((0,), (1,)),),) * 3


# --- dhir schedule ---------------------------------------------------------------------


def test_dhir_schedule_prints_memory_per_rank(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "prog.mlir"
    path.write_text(_one_task(ARGS, "  func.call @f(%a) : (memref<8xf32>) -> ()"))
    assert main(["schedule", str(path), "-n", "2", "--placement", "round-robin"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("memory per rank") :].splitlines()
    assert "where dhir partitions it" in section[0]
    # %a whole and none of %b on rank 0, one row of %b too on rank 1; beside the memory
    # of this machine's CPU, which both ranks share.
    shared = r"( of its device's [0-9.]+ [KMGT]?i?B, shared by 2 ranks)?"
    assert re.fullmatch(rf"  rank0: holds 32 B{shared}, its tasks touch 32 B", section[1])
    assert re.fullmatch(rf"  rank1: holds 36 B{shared}, its tasks touch 36 B", section[2])
    assert section[3].startswith("  %a: whole on every rank, host code, which every rank runs")
    assert section[4] == "  %b: partitioned, rank 0 rows none; rank 1 rows 3..3"
    assert len(section) == 5


def test_dhir_schedule_names_memrefs_as_written(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # xDSL's name hint of %y_1 and %y_2 is %y: the memory lines named two memrefs alike.
    path = tmp_path / "prog.mlir"
    text = _one_task(ARGS).replace("%a", "%y_1").replace("%b", "%y_2")
    path.write_text(text)
    assert main(["schedule", str(path), "-n", "2", "--placement", "round-robin"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("memory per rank") :].splitlines()
    assert section[-2:] == [
        "  %y_1: partitioned, rank 0 rows 0..0; rank 1 rows none",
        "  %y_2: partitioned, rank 0 rows none; rank 1 rows 3..3",
    ]


def _every_other_row(rows: int, cols: int, touched: int) -> str:
    """Task k, on rank k mod 2, doubles the first `touched` elements of row k of %a."""
    t = f"memref<{rows}x{cols}xf64>"
    tasks = "".join(
        f"""
    dhir.task %cpu, %a attributes {{dhir.rank = {k % 2} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {touched} : index
      %r = arith.constant {k} : index
      scf.for %j = %c0 to %n step %c1 {{
        %x = memref.load %a[%r, %j] : {t}
        %y = arith.addf %x, %x : f64
        memref.store %y, %a[%r, %j] : {t}
      }}
    }}"""
        for k in range(rows)
    )
    return f"""func.func @main(%a: {t}) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}{tasks}
  }}
  return
}}
"""


@pytest.mark.parametrize("touched", [512, 100])
def test_dhir_schedule_counts_what_interleaved_tasks_touch_exactly(
    touched: int, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other row of 24 (a page each) on each of 2 ranks: the rows a rank holds are
    its 12, and its tasks touch `touched` elements of each, not the few boxes around them
    (which take in the other rank's rows)."""
    path = tmp_path / "prog.mlir"
    path.write_text(_every_other_row(24, 512, touched))
    assert main(["schedule", str(path), "-n", "2", "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    for rank in ("rank0", "rank1"):
        assert memory["ranks"][rank]["held_bytes"] == 12 * 512 * 8
        assert memory["ranks"][rank]["touched_bytes"] == 12 * touched * 8
    assert len(memory["memrefs"][0]["boxes"]["rank0"]) == MAX_BOXES  # still a few boxes


@st.composite
def _some_boxes(draw: st.DrawFn) -> list[Box]:
    """Up to 8 boxes of 1 to 3 dimensions within 0..6, some empty (lo == hi somewhere)."""
    dims = draw(st.integers(1, 3))
    corner = st.tuples(*[st.integers(0, 6)] * dims)
    pairs = draw(st.lists(st.tuples(corner, corner), max_size=8))
    return [Box(tuple(map(min, a, b)), tuple(map(max, a, b))) for a, b in pairs]


@settings(max_examples=200, deadline=None)
@given(_some_boxes())
def test_union_volume_counts_each_element_once(boxes: list[Box]) -> None:
    elements = {
        tuple(lo + i for lo, i in zip(box.lo, at, strict=True))
        for box in boxes
        for at in np.ndindex(*(hi - lo for lo, hi in zip(box.lo, box.hi, strict=True)))
    }
    assert union_volume(boxes) == len(elements)


def test_dhir_schedule_json_has_the_memory_key(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "prog.mlir"
    path.write_text(_one_task(ARGS))
    assert main(["schedule", str(path), "-n", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"schedules", "memory", "split"}
    memory = result["memory"]
    assert memory["partitioned"] is True
    device = memory["ranks"]["rank0"]["device_memory_bytes"]
    assert device is None or (isinstance(device, int) and device > 0)
    assert memory["ranks"] == {
        "rank0": {"held_bytes": 4, "touched_bytes": 4, "device_memory_bytes": device},
        "rank1": {"held_bytes": 4, "touched_bytes": 4, "device_memory_bytes": device},
    }
    a, b = memory["memrefs"]
    assert a == {
        "name": "%a",
        "shape": [8],
        "element_bytes": 4,
        "bytes": 32,
        "whole": None,
        "boxes": {"rank0": [[[0, 1]]], "rank1": []},
        "rows": {"rank0": [[0, 1]], "rank1": []},
    }
    assert b["boxes"] == {"rank0": [], "rank1": [[[3, 4]]]}


def test_element_sizes_count_every_lane_of_a_vector_and_both_parts_of_a_complex() -> None:
    text = """
func.func @main(%v: memref<3xvector<4xf32>>, %z: memref<2xcomplex<f64>>, %i: memref<5xi1>) {
  return
}
"""
    v, z, i = _footprint(text, 1).memrefs
    assert (v.element_bytes, z.element_bytes, i.element_bytes) == (16, 16, 1)
    assert (v.size, z.size, i.size) == (48, 32, 5)
