"""Aliases of schedule data: every view, base buffer or address of a memref counts as
that memref, in a task's effects, in what the results need after a schedule, and
between schedule operands; mutable globals are not moved between ranks and are refused
in tasks. Native runs on two ranks against the sequential oracle."""

import shutil

import numpy as np
import pytest

import dhir
from dhir import DhirError, parse_string
from dhir.analysis.dependences import task_graph
from dhir.analysis.outputs import root_only
from dhir.analysis.sharing import check_shared_data
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.pass_failure import PassFailedAt

MPIS = ("mpich", "openmpi")
needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _schedules(text: str) -> list[ScheduleOp]:
    return [op for op in parse_string(text).walk() if isinstance(op, ScheduleOp)]


def _effects(text: str) -> list[tuple[set[str], set[str]]]:
    schedule = _schedules(text)[0]
    return [
        ({v.name_hint or "" for v in e.reads}, {v.name_hint or "" for v in e.writes})
        for e in task_graph(schedule).effects
    ]


def _native(text: str, inputs: list[np.ndarray], mpi: str = "mpich") -> list[np.ndarray]:
    return dhir.run(
        text, *inputs, backend="native", ranks=2, mpi=mpi, placement="round-robin", timeout=120
    )


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g, w)


# --- writes through the base buffer of extract_strided_metadata (issue 15, item 3) ----

METADATA_WRITE = """
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>) {
  dhir.schedule %a, %b {
    %t0 = dhir.task target = "cpu", %a attributes {dhir.rank = 1 : i64} {
      %base, %off, %size, %stride = memref.extract_strided_metadata %a
          : memref<4xi32> -> memref<i32>, index, index, index
      %r = memref.reinterpret_cast %base to offset: [0], sizes: [4], strides: [1]
          : memref<i32> to memref<4xi32>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %x = arith.constant 42 : i32
      scf.for %i = %c0 to %size step %c1 {
        memref.store %x, %r[%i] : memref<4xi32>
      }
    }
    %t1 = dhir.task target = "cpu", %a, %b attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %x = memref.load %a[%i] : memref<4xi32>
        memref.store %x, %b[%i] : memref<4xi32>
      }
    }
  }
  func.return
}
"""


def test_base_buffer_of_strided_metadata_aliases_its_source() -> None:
    # The sizes it returns are data: a loop bounded by one touches nothing more.
    assert _effects(METADATA_WRITE) == [(set(), {"a"}), ({"a"}, {"b"})]


ADDRESSES = """
func.func private @ext(i64)
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>, %c: memref<4xi32>, %d: memref<4xi32>) {
  dhir.schedule %a, %b, %c, %d {
    %t0 = dhir.task target = "cpu", %a {
      %p = memref.extract_aligned_pointer_as_index %a : memref<4xi32> -> index
      %q = arith.index_cast %p : index to i64
      func.call @ext(%q) : (i64) -> ()
    }
    %t1 = dhir.task target = "cpu", %b, %c {
      %p = memref.extract_aligned_pointer_as_index %b : memref<4xi32> -> index
      %c0 = arith.constant 0 : index
      memref.store %p, %c[%c0] : memref<4xi32>
    }
    %t2 = dhir.task target = "cpu", %c, %d {
      %true = arith.constant true
      %s = arith.select %true, %c, %d : memref<4xi32>
      %c0 = arith.constant 0 : index
      %x = arith.constant 1 : i32
      memref.store %x, %s[%c0] : memref<4xi32>
    }
  }
  func.return
}
"""


def test_addresses_and_selected_memrefs_alias_their_sources() -> None:
    assert _effects(ADDRESSES.replace("memref.store %p, %c[%c0] : memref<4xi32>", "")) == [
        ({"a"}, {"a"}),  # an address handed to a call: all of %a read and written
        (set(), set()),  # an address never used touches nothing
        (set(), {"c", "d"}),  # either memref of the select
    ]


def test_address_stored_as_data_escapes() -> None:
    text = ADDRESSES.replace(
        "memref<4xi32>, %d: memref<4xi32>", "memref<4xindex>, %d: memref<4xi32>"
    )
    text = text.replace("%c[%c0] : memref<4xi32>", "%c[%c0] : memref<4xindex>")
    text = text.replace("%t2 = dhir.task", "%t2x = dhir.task").split("    %t2x")[0]
    text += "  }\n  func.return\n}\n"
    assert _effects(text)[1] == ({"b"}, {"b", "c"})


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_write_through_strided_metadata_reaches_the_reader(mpi: str) -> None:
    # The interpreter cannot run extract_strided_metadata: NumPy gives the expected data.
    inputs = [np.arange(4, dtype=np.int32), np.zeros(4, np.int32)]
    want = [np.full(4, 42, np.int32), np.full(4, 42, np.int32)]
    _same(_native(METADATA_WRITE, inputs, mpi), want)


# --- results that only rank 0 needs: any alias read later counts (issue 15, item 2) ----

# A task on rank 0 writes %a; @read (placeholder) reads it afterwards through a view
# made before the schedule, on rank 1.
VIEW_READ_LATER = """
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>, %c: memref<4xi32>) {
  %v = memref.cast %a : memref<4xi32> to memref<?xi32>
  dhir.schedule %a {
    %t0 = dhir.task target = "cpu", %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %x = memref.load %a[%i] : memref<4xi32>
        %y = arith.addi %x, %x : i32
        memref.store %y, %a[%i] : memref<4xi32>
      }
    }
  }
  LATER
  func.return
}
"""

LATER_SCHEDULE = """
  dhir.schedule %v, %b {
    %t1 = dhir.task target = "cpu", %v, %b attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %x = memref.load %v[%i] : memref<?xi32>
        memref.store %x, %b[%i] : memref<4xi32>
      }
    }
  }
"""

# Host code (every rank) copies through the view into %b; a task on rank 1 copies %b on.
LATER_HOST_CODE = """
  %h0 = arith.constant 0 : index
  %h4 = arith.constant 4 : index
  %h1 = arith.constant 1 : index
  scf.for %i = %h0 to %h4 step %h1 {
    %x = memref.load %v[%i] : memref<?xi32>
    memref.store %x, %b[%i] : memref<4xi32>
  }
  dhir.schedule %b, %c {
    %t1 = dhir.task target = "cpu", %b, %c attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %x = memref.load %b[%i] : memref<4xi32>
        memref.store %x, %c[%i] : memref<4xi32>
      }
    }
  }
"""

LATER_PROGRAMS = {
    "later-schedule": VIEW_READ_LATER.replace("LATER", LATER_SCHEDULE),
    "later-host-code": VIEW_READ_LATER.replace("LATER", LATER_HOST_CODE),
    "subview": VIEW_READ_LATER.replace("LATER", LATER_SCHEDULE).replace(
        "%v = memref.cast %a : memref<4xi32> to memref<?xi32>",
        "%s = memref.subview %a[0] [4] [1] : memref<4xi32> to memref<4xi32, strided<[1]>>\n"
        "  %v = memref.cast %s : memref<4xi32, strided<[1]>> to memref<?xi32>",
    ),
}


def _root_only_names(text: str) -> list[set[str]]:
    return [{v.name_hint or "" for v in root_only(s)} for s in _schedules(text)]


def test_a_view_read_after_the_schedule_is_a_use() -> None:
    for name, text in LATER_PROGRAMS.items():
        assert "a" not in _root_only_names(text)[0], name
    # Without the later read, %a only has to reach rank 0.
    assert "a" in _root_only_names(VIEW_READ_LATER.replace("LATER", ""))[0]


def test_aliases_through_regions_addresses_and_metadata_are_uses() -> None:
    base = VIEW_READ_LATER.replace("  %v = memref.cast %a : memref<4xi32> to memref<?xi32>\n", "")
    befores = {
        "scf.if": """%true = arith.constant true
  %v = scf.if %true -> (memref<?xi32>) {
    %w = memref.cast %a : memref<4xi32> to memref<?xi32>
    scf.yield %w : memref<?xi32>
  } else {
    %w = memref.cast %b : memref<4xi32> to memref<?xi32>
    scf.yield %w : memref<?xi32>
  }""",
        "metadata": """%base, %o, %n, %st = memref.extract_strided_metadata %a
      : memref<4xi32> -> memref<i32>, index, index, index
  %r = memref.reinterpret_cast %base to offset: [0], sizes: [4], strides: [1]
      : memref<i32> to memref<4xi32>
  %v = memref.cast %r : memref<4xi32> to memref<?xi32>""",
        "call": """%v = func.call @id(%a) : (memref<4xi32>) -> memref<?xi32>""",
    }
    for name, before in befores.items():
        text = base.replace("  dhir.schedule %a {", f"  {before}\n  dhir.schedule %a {{", 1)
        text = text.replace("LATER", LATER_SCHEDULE)
        if name == "call":
            text = "func.func private @id(memref<4xi32>) -> memref<?xi32>\n" + text
        assert "a" not in _root_only_names(text)[0], name


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("name", sorted(LATER_PROGRAMS))
def test_view_read_after_a_schedule_sees_the_new_data(name: str, mpi: str) -> None:
    text = LATER_PROGRAMS[name]
    inputs = [np.arange(1, 5, dtype=np.int32), np.zeros(4, np.int32), np.zeros(4, np.int32)]
    oracle = dhir.run(text, *inputs, backend="interp")
    assert oracle[1].tolist() == [2, 4, 6, 8]  # the oracle runs the program as meant
    _same(_native(text, inputs, mpi), oracle)


# --- mutable globals in tasks (issue 15, item 4) -----------------------------------------

GLOBAL_IN_TASKS = """
memref.global "private" @g : memref<4xi32> = dense<[1, 2, 3, 4]>
func.func @main(%b: memref<4xi32>) {
  dhir.schedule %b {
    %t0 = dhir.task target = "cpu" attributes {dhir.rank = 1 : i64} {
      %g = memref.get_global @g : memref<4xi32>
      %c0 = arith.constant 0 : index
      %x = arith.constant 42 : i32
      memref.store %x, %g[%c0] : memref<4xi32>
    }
    %t1 = dhir.task target = "cpu", %b attributes {dhir.rank = 0 : i64} {
      %g = memref.get_global @g : memref<4xi32>
      memref.copy %g, %b : memref<4xi32> to memref<4xi32>
    }
  }
  func.return
}
"""

# The same as the error message says to write it: the global is a schedule operand.
GLOBAL_AS_OPERAND = """
memref.global "private" @g : memref<4xi32> = dense<[1, 2, 3, 4]>
func.func @main(%b: memref<4xi32>) {
  %g = memref.get_global @g : memref<4xi32>
  dhir.schedule %g, %b {
    %t0 = dhir.task target = "cpu", %g attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %x = arith.constant 42 : i32
      memref.store %x, %g[%c0] : memref<4xi32>
    }
    %t1 = dhir.task target = "cpu", %g, %b attributes {dhir.rank = 0 : i64} {
      memref.copy %g, %b : memref<4xi32> to memref<4xi32>
    }
  }
  dhir.schedule %g, %b {
    %t2 = dhir.task target = "cpu", %g, %b attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %x = memref.load %g[%c1] : memref<4xi32>
      %y = memref.load %g[%c1] : memref<4xi32>
      %c0 = arith.constant 0 : index
      %z = memref.load %g[%c0] : memref<4xi32>
      %s = arith.addi %y, %z : i32
      memref.store %s, %b[%c1] : memref<4xi32>
    }
  }
  func.return
}
"""


def _native_error(text: str, inputs: list[np.ndarray]) -> str:
    with pytest.raises(DhirError) as caught:
        _native(text, inputs)
    return str(caught.value)


@needs_mpi
def test_a_task_using_a_mutable_global_is_refused_at_the_task() -> None:
    inputs = [np.zeros(4, np.int32)]
    assert dhir.run(GLOBAL_IN_TASKS, *inputs, backend="interp")[0].tolist() == [42, 2, 3, 4]
    message = _native_error(GLOBAL_IN_TASKS, inputs)
    assert "<string>:5:11: error: this task uses the mutable memref.global @g" in message
    assert "as a schedule operand" in message


HOST_ADDRESS = """
func.func @main(%b: memref<4xf64>, %c: memref<4xi64>) {
  %p = memref.extract_aligned_pointer_as_index %b : memref<4xf64> -> index
  %q = arith.index_cast %p : index to i64
  %c8 = arith.constant 8 : i64
  %r = arith.addi %q, %c8 : i64
  dhir.schedule %b, %c {
    %t = dhir.task target = "cpu", %c {
      %c0 = arith.constant 0 : index
      memref.store %r, %c[%c0] : memref<4xi64>
    }
  }
  func.return
}
"""


@needs_mpi
def test_an_address_taken_outside_a_task_is_refused_where_the_task_uses_it() -> None:
    # On the task's rank it would point into that rank's copy of %b, which nothing moves.
    inputs = [np.zeros(4), np.zeros(4, np.int64)]
    message = _native_error(HOST_ADDRESS, inputs)
    assert "<string>:10:7: error: this op uses %r, an address in %b taken outside" in message
    assert "list %b on the task" in message


@needs_mpi
def test_a_task_calling_a_function_that_uses_a_mutable_global_is_refused() -> None:
    text = GLOBAL_IN_TASKS.replace(
        """      %g = memref.get_global @g : memref<4xi32>
      %c0 = arith.constant 0 : index
      %x = arith.constant 42 : i32
      memref.store %x, %g[%c0] : memref<4xi32>""",
        "      func.call @inner() : () -> ()",
    ).replace(
        "func.func @main",
        """func.func private @inner() {
  func.call @set() : () -> ()
  func.return
}
func.func private @set() {
  %g = memref.get_global @g : memref<4xi32>
  %c0 = arith.constant 0 : index
  %x = arith.constant 42 : i32
  memref.store %x, %g[%c0] : memref<4xi32>
  func.return
}
func.func @main""",
    )
    message = _native_error(text, [np.zeros(4, np.int32)])
    assert "this task calls @inner, which uses the mutable memref.global @g" in message


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_a_mutable_global_passed_as_operand_equals_the_oracle(mpi: str) -> None:
    inputs = [np.zeros(4, np.int32)]
    oracle = dhir.run(GLOBAL_AS_OPERAND, *inputs, backend="interp")
    assert oracle[0].tolist() == [42, 44, 3, 4]
    _same(_native(GLOBAL_AS_OPERAND, inputs, mpi), oracle)


@needs_mpi
def test_constant_globals_in_tasks_still_run() -> None:
    text = GLOBAL_IN_TASKS.replace('"private" @g', '"private" constant @g').replace(
        "%x = arith.constant 42 : i32\n      memref.store %x, %g[%c0] : memref<4xi32>",
        "%x = memref.load %g[%c0] : memref<4xi32>",
    )
    inputs = [np.zeros(4, np.int32)]
    oracle = dhir.run(text, *inputs, backend="interp")
    assert oracle[0].tolist() == [1, 2, 3, 4]
    _same(_native(text, inputs), oracle)


# --- schedule operands that alias (issue 15, item 5) -------------------------------------

ALIASING_OPERANDS = """
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>) {
  VIEW
  dhir.schedule %a, %v, %b {
    %t0 = dhir.task target = "cpu", %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %x = arith.constant 42 : i32
      memref.store %x, %a[%c0] : memref<4xi32>
    }
    %t1 = dhir.task target = "cpu", %v, %b attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %x = memref.load %v[%c0] : memref<?xi32>
      memref.store %x, %b[%c0] : memref<4xi32>
    }
  }
  func.return
}
"""

VIEWS = {
    "cast": "%v = memref.cast %a : memref<4xi32> to memref<?xi32>",
    "cast-of-subview": (
        "%s = memref.subview %a[0] [4] [1] : memref<4xi32> to memref<4xi32, strided<[1]>>\n"
        "  %v = memref.cast %s : memref<4xi32, strided<[1]>> to memref<?xi32>"
    ),
    "select": (
        "%true = arith.constant true\n  %w = arith.select %true, %a, %b : memref<4xi32>\n"
        "  %v = memref.cast %w : memref<4xi32> to memref<?xi32>"
    ),
    "call": "%v = func.call @view(%a) : (memref<4xi32>) -> memref<?xi32>",
}


@needs_mpi
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_aliasing_schedule_operands_are_refused(name: str) -> None:
    text = ALIASING_OPERANDS.replace("VIEW", VIEWS[name])
    if name == "call":
        text = "func.func private @view(memref<4xi32>) -> memref<?xi32>\n" + text
    else:  # the interpreter cannot call an external function
        inputs = [np.zeros(4, np.int32), np.zeros(4, np.int32)]
        assert dhir.run(text, *inputs, backend="interp")[1][0] == 42
    message = _native_error(text, [np.zeros(4, np.int32), np.zeros(4, np.int32)])
    at = next(n for n, line in enumerate(text.splitlines(), 1) if "dhir.schedule" in line)
    assert f"<string>:{at}:3: error: schedule operands %a and %v may be views of one buffer" in (
        message
    )
    assert "Pass the buffer once" in message


@needs_mpi
def test_aliasing_operands_that_no_task_writes_run() -> None:
    text = ALIASING_OPERANDS.replace("VIEW", VIEWS["cast"])
    text = text.replace("memref.store %x, %a[%c0] : memref<4xi32>", "")
    inputs = [np.arange(4, dtype=np.int32), np.zeros(4, np.int32)]
    _same(_native(text, inputs), dhir.run(text, *inputs, backend="interp"))


def test_distinct_buffers_are_not_aliases() -> None:
    from dhir.analysis.sharing import buffers

    text = ALIASING_OPERANDS.replace(
        "VIEW",
        "%n = arith.constant 4 : index\n  %u = memref.alloc(%n) : memref<?xi32>\n"
        "  %w = memref.alloc(%n) : memref<?xi32>\n  %v = memref.cast %w : memref<?xi32> to memref<?xi32>",
    )
    schedule = _schedules(text)[0]
    found = [buffers(v) for v in schedule.args]
    assert len(set().union(*found)) == 3 and all(len(f) == 1 for f in found)


CALLED_TWICE = """
func.func private @f(%x: memref<8xi32>, %y: memref<8xi32>) {
  dhir.schedule %x, %y {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %x attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 5 : i32
      memref.store %v, %x[%c0] : memref<8xi32>
    }
    %t1 = dhir.task %cpu, %y attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %w = memref.load %y[%c0] : memref<8xi32>
      memref.store %w, %y[%c1] : memref<8xi32>
    }
  }
  return
}
func.func private @g(%x: memref<8xi32>, %y: memref<8xi32>) {
  func.call @f(%x, %y) : (memref<8xi32>, memref<8xi32>) -> ()
  return
}
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>) {
  func.call @g(%a, ARG) : (memref<8xi32>, memref<8xi32>) -> ()
  return
}
"""


@needs_mpi
def test_a_call_passing_one_buffer_twice_to_a_schedule_is_refused() -> None:
    """Inside @f, %x and %y are distinct buffers; @main passes %a as both (through @g,
    which holds no schedule itself)."""
    text = CALLED_TWICE.replace("ARG", "%a")
    inputs = [np.zeros(8, np.int32), np.zeros(8, np.int32)]
    assert dhir.run(text, *inputs, backend="interp")[0][:2].tolist() == [5, 5]
    message = _native_error(text, inputs)
    assert "<string>:24:3: error: this call passes views of one buffer (%a) as arguments 0" in (
        message
    )
    assert "of @g, which holds a schedule" in message


@needs_mpi
def test_a_call_passing_distinct_buffers_to_a_schedule_runs() -> None:
    text = CALLED_TWICE.replace("ARG", "%b")
    inputs = [np.zeros(8, np.int32), np.arange(8, dtype=np.int32)]
    _same(_native(text, inputs), dhir.run(text, *inputs, backend="interp"))


# --- a reinterpret_cast that reaches past a schedule operand -----------------------------

# %r, the schedule operand, is the first half of %a; the task on rank 1 writes all of %a
# through a reinterpret_cast of %r (CAST). Rank 0 writes the results.
PAST_THE_OPERAND = """
HELPER
func.func @main(%a: memref<8xf32>, %b: memref<4xf32>) {
  %r = memref.reinterpret_cast %a to offset: [0], sizes: [4], strides: [1]
      : memref<8xf32> to memref<4xf32>
  dhir.schedule %r, %b {
    %t0 = dhir.task target = "cpu", %r attributes {dhir.rank = 1 : i64} {
      CAST
    }
    %t1 = dhir.task target = "cpu", %r, %b attributes {dhir.rank = 0 : i64} {
      memref.copy %r, %b : memref<4xf32> to memref<4xf32>
    }
  }
  func.return
}
"""

FILL = """%c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cn = arith.constant SIZE : index
      %x = arith.constant 7.0 : f32
      scf.for %i = %c0 to %cn step %c1 {
        memref.store %x, %w[%i] : memref<SIZExf32>
      }"""

CAST = (
    """%w = memref.reinterpret_cast %r to offset: [0], sizes: [SIZE], strides: [1]
          : memref<4xf32> to memref<SIZExf32>
      """
    + FILL
)

HELPER = (
    """func.func private @fill(%r: memref<4xf32>) {
  %w = memref.reinterpret_cast %r to offset: [0], sizes: [8], strides: [1]
      : memref<4xf32> to memref<8xf32>
  """
    + FILL.replace("SIZE", "8").replace("      ", "  ")
    + """
  func.return
}"""
)


def _past(cast: str, size: int = 8, helper: str = "") -> str:
    text = PAST_THE_OPERAND.replace("CAST", cast).replace("HELPER", helper)
    return text.replace("SIZE", str(size))


@needs_mpi
def test_a_cast_past_a_schedule_operand_is_refused_at_the_cast() -> None:
    # The oracle writes all of %a; natively rank 0 kept its old a[4:8) (issue: aliases).
    text = _past(CAST)
    inputs = [np.zeros(8, np.float32), np.zeros(4, np.float32)]
    assert dhir.run(text, *inputs, backend="interp")[0].tolist() == [7.0] * 8
    message = _native_error(text, inputs)
    assert "<string>:8:12: error: this reinterpret_cast may reach elements outside %r" in message
    assert "of the buffer %r is a view of" in message
    assert "Pass the whole buffer as the schedule operand" in message


def test_a_call_that_casts_past_a_schedule_operand_is_refused_at_the_call() -> None:
    text = _past("func.call @fill(%r) : (memref<4xf32>) -> ()", helper=HELPER)
    with pytest.raises(PassFailedAt) as caught:
        check_shared_data(parse_string(text))
    assert "func.call" in caught.value.op.name
    assert "@fill, called here, through the reinterpret_cast at <string>:3:" in str(caught.value)


def test_casts_within_the_operand_or_of_whole_buffers_pass() -> None:
    within = _past(CAST, size=4)  # a[0:4): only %r's own elements
    check_shared_data(parse_string(within))
    # %r is a buffer of its own: a cast past it is out of its bounds, not into %a.
    whole = _past(CAST).replace(
        "%r = memref.reinterpret_cast %a to offset: [0], sizes: [4], strides: [1]\n"
        "      : memref<8xf32> to memref<4xf32>",
        "%r = memref.alloc() : memref<4xf32>",
    )
    check_shared_data(parse_string(whole))


# %v, rows 1-2 of %a (elements 8 to 23 of its buffer), reinterpret_cast in a task to 4
# elements from OFFSET; VIEW replaced for a view that is no run of its buffer.
CAST_OF_ROWS = """
func.func @main(%a: memref<4x8xf64>, %b: memref<4xf64>) {
  %v = memref.subview %a[1, 0] [2, 8] [1, 1] : memref<4x8xf64> to VIEW
  dhir.schedule %v, %b {
    %t = dhir.task target = "cpu", %v, %b attributes {dhir.rank = 0 : i64} {
      %r = memref.reinterpret_cast %v to offset: [OFFSET], sizes: [4], strides: [1] : VIEW to memref<4xf64, strided<[1], offset: OFFSET>>
      memref.copy %r, %b : memref<4xf64, strided<[1], offset: OFFSET>> to memref<4xf64>
    }
  }
  func.return
}
"""
ROWS = "memref<2x8xf64, strided<[8, 1], offset: 8>>"


@pytest.mark.parametrize(
    ("offset", "inside"), [(8, True), (10, True), (20, True), (21, False), (4, False)]
)
def test_a_cast_of_a_view_operand_passes_where_it_stays_in_the_view(
    offset: int, inside: bool
) -> None:
    # Before, any cast of a view (not of the identity layout) was refused, also
    # elements 10 to 13 of rows 8 to 23, which the interpreter runs.
    text = CAST_OF_ROWS.replace("VIEW", ROWS).replace("OFFSET", str(offset))
    if inside:
        check_shared_data(parse_string(text))
        return
    with pytest.raises(PassFailedAt, match="this reinterpret_cast may reach elements outside %v"):
        check_shared_data(parse_string(text))


def test_a_cast_inside_a_view_of_gaps_is_refused() -> None:
    # Columns 0-3 of rows 1-2: elements 12 and 13, between its first and last, are not its.
    columns = "memref<2x4xf64, strided<[8, 1], offset: 8>>"
    text = CAST_OF_ROWS.replace("[2, 8] [1, 1]", "[2, 4] [1, 1]").replace("VIEW", columns)
    with pytest.raises(PassFailedAt, match="may reach elements outside %v"):
        check_shared_data(parse_string(text.replace("OFFSET", "10")))


# @h holds the schedule and takes %r as an argument; @main passes it ARG.
CALLED_WITH_A_VIEW = """
func.func private @h(%r: memref<4xf32>, %b: memref<4xf32>) {
  dhir.schedule %r, %b {
    %t0 = dhir.task target = "cpu", %r attributes {dhir.rank = 1 : i64} {
      CAST
    }
    %t1 = dhir.task target = "cpu", %r, %b attributes {dhir.rank = 0 : i64} {
      memref.copy %r, %b : memref<4xf32> to memref<4xf32>
    }
  }
  func.return
}
func.func private @g(%r: memref<4xf32>, %b: memref<4xf32>) {
  func.call @h(%r, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
func.func @main(%a: memref<8xf32>, %b: memref<4xf32>, %c: memref<4xf32>) {
  %r = memref.reinterpret_cast %a to offset: [0], sizes: [4], strides: [1]
      : memref<8xf32> to memref<4xf32>
  func.call @g(ARG, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
""".replace("CAST", CAST).replace("SIZE", "8")


@needs_mpi
def test_a_cast_past_an_argument_that_a_call_passes_a_view_is_refused() -> None:
    # Inside @h, %r is an argument; @main passes the first half of %a (through @g).
    text = CALLED_WITH_A_VIEW.replace("ARG", "%r")
    inputs = [np.zeros(8, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32)]
    assert dhir.run(text, *inputs, backend="interp")[0].tolist() == [7.0] * 8
    message = _native_error(text, inputs)
    assert "<string>:5:12: error: this reinterpret_cast may reach elements outside %r, of the " in (
        message
    )
    assert "buffer a call passes a view of as %r" in message


def test_a_cast_past_an_argument_passed_whole_buffers_passes() -> None:
    check_shared_data(parse_string(CALLED_WITH_A_VIEW.replace("ARG", "%c")))


# --- a function's argument that a call passes a global the function takes itself ----------

GLOBAL_AS_ARGUMENT = """
memref.global "private" @g : memref<4xf32> = dense<1.0>
func.func private @f(%x: memref<4xf32>, %b: memref<4xf32>) {
  %g = memref.get_global @g : memref<4xf32>
  dhir.schedule %x, %g, %b {
    %t0 = dhir.task target = "cpu", %x attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 7.0 : f32
      memref.store %v, %x[%c0] : memref<4xf32>
    }
    %t1 = dhir.task target = "cpu", %g, %b attributes {dhir.rank = 0 : i64} {
      memref.copy %g, %b : memref<4xf32> to memref<4xf32>
    }
  }
  func.return
}
func.func private @h(%y: memref<4xf32>, %b: memref<4xf32>) {
  func.call @f(%y, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
func.func @main(%b: memref<4xf32>, %c: memref<4xf32>) {
  %g0 = memref.get_global @g : memref<4xf32>
  func.call @h(ARG, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
"""


@needs_mpi
def test_a_global_passed_to_a_function_taking_it_itself_is_refused() -> None:
    # @main passes @g (through @h) as %x of @f, which lists %x and @g: one buffer.
    text = GLOBAL_AS_ARGUMENT.replace("ARG", "%g0")
    inputs = [np.zeros(4, np.float32), np.zeros(4, np.float32)]
    assert dhir.run(text, *inputs, backend="interp")[0].tolist() == [7.0, 1.0, 1.0, 1.0]
    message = _native_error(text, inputs)
    assert "<string>:5:3: error: schedule operands %x and %g may be views of one buffer" in (
        message
    )
    assert "(a call passes global @g as %x)" in message


def test_a_buffer_passed_to_a_function_taking_a_global_passes() -> None:
    check_shared_data(parse_string(GLOBAL_AS_ARGUMENT.replace("ARG", "%c")))


def test_a_memref_stored_as_data_escapes() -> None:
    # MLIR allows a memref of memrefs: %a stored into one may be loaded back and written.
    text = """
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>) {
  dhir.schedule %a, %b {
    %t0 = dhir.task target = "cpu", %a {
      %box = memref.alloca() : memref<1xmemref<8xf32>>
      %c0 = arith.constant 0 : index
      memref.store %a, %box[%c0] : memref<1xmemref<8xf32>>
      %m = memref.load %box[%c0] : memref<1xmemref<8xf32>>
      %x = arith.constant 7.0 : f32
      memref.store %x, %m[%c0] : memref<8xf32>
    }
    %t1 = dhir.task target = "cpu", %a, %b {
      memref.copy %a, %b : memref<8xf32> to memref<8xf32>
    }
  }
  func.return
}
"""
    assert _effects(text) == [({"a"}, {"a"}), ({"a"}, {"b"})]
    graph = task_graph(_schedules(text)[0])
    assert [(d.before, d.after) for d in graph.dependences] == [(0, 1)]
