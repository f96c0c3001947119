"""Host code in a time loop that reaches a schedule's buffer under another name (issue
23): the base of the view the schedule lists, a sibling view, the same global taken
again. Such a loop must not keep the schedule's data distributed between iterations.
Native runs on two ranks against the sequential oracle. Also the error texts for a
buffer ping-ponged through `iter_args` and for a `dhir.rank` that is no integer."""

import shutil

import numpy as np
import pytest

import dhir
from dhir import DhirError, parse_string
from dhir.analysis.outputs import time_loop
from dhir.analysis.sharing import buffers, check_shared_data
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.pass_failure import PassFailedAt

MPIS = ("mpich", "openmpi")
needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# The task on rank 1 doubles %d[0] every step; the host reads it through NAME into %acc.
LOOP = """
GLOBAL
func.func @main(ARGS%acc: memref<2xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  VIEW
  scf.for %t = %c0 to %c2 step %c1 {
    dhir.schedule %d {
      %t0 = dhir.task target = "cpu", %d attributes {dhir.rank = 1 : i64} {
        %k0 = arith.constant 0 : index
        %x = memref.load %d[INDEX] : TYPE
        %y = arith.addi %x, %x : i32
        memref.store %y, %d[INDEX] : TYPE
      }
    }
    HOST
    %v = memref.load NAME[%c0] : memref<4xi32>
    memref.store %v, %acc[%t] : memref<2xi32>
  }
  func.return
}
"""

ARG = "%a: memref<4xi32>, "
CASES = {
    "cast": dict(
        ARGS=ARG,
        VIEW="%d = memref.cast %a : memref<4xi32> to memref<?xi32>",
        INDEX="%k0",
        TYPE="memref<?xi32>",
        NAME="%a",
    ),
    "expand_shape": dict(
        ARGS=ARG,
        VIEW="%d = memref.expand_shape %a [[0, 1]] output_shape [2, 2]"
        " : memref<4xi32> into memref<2x2xi32>",
        INDEX="%k0, %k0",
        TYPE="memref<2x2xi32>",
        NAME="%a",
    ),
    # a sibling: the schedule lists one view of %a, the host reads another
    "sibling-subview": dict(
        ARGS=ARG,
        VIEW="%d = memref.cast %a : memref<4xi32> to memref<?xi32>\n"
        "  %s = memref.subview %a[0] [4] [1] : memref<4xi32> to memref<4xi32, strided<[1]>>",
        INDEX="%k0",
        TYPE="memref<?xi32>",
        NAME="%s",
    ),
    # a later block gets %a as its argument %d from a branch
    "branch-argument": dict(
        ARGS=ARG,
        VIEW="cf.br ^next(%a : memref<4xi32>)\n^next(%d: memref<4xi32>):",
        INDEX="%k0",
        TYPE="memref<4xi32>",
        NAME="%a",
    ),
    "get_global-again": dict(
        GLOBAL='memref.global "private" @g : memref<4xi32> = dense<[1, 1, 1, 1]>',
        VIEW="%d = memref.get_global @g : memref<4xi32>",
        INDEX="%k0",
        TYPE="memref<4xi32>",
        HOST="%e = memref.get_global @g : memref<4xi32>",
        NAME="%e",
    ),
}


def _program(name: str) -> str:
    text = LOOP
    for key in ("GLOBAL", "ARGS", "VIEW", "INDEX", "TYPE", "HOST", "NAME"):
        text = text.replace(key, CASES[name].get(key, ""))
    text = text.replace(
        "memref.load %s[%c0] : memref<4xi32>", "memref.load %s[%c0] : memref<4xi32, strided<[1]>>"
    )
    return text


def _inputs(name: str) -> list[np.ndarray]:
    a = [np.ones(4, np.int32)] if CASES[name].get("ARGS") else []
    return [*a, np.zeros(2, np.int32)]


def _loop_schedule(text: str) -> ScheduleOp:
    return next(op for op in parse_string(text).walk() if isinstance(op, ScheduleOp))


@pytest.mark.parametrize("name", sorted(CASES))
def test_host_code_under_another_name_is_no_time_loop(name: str) -> None:
    assert time_loop(_loop_schedule(_program(name))) is None


def test_a_loop_whose_host_code_touches_other_buffers_is_a_time_loop() -> None:
    # The rule still lets data stay distributed where the host reads something else.
    text = _program("cast").replace("memref.load %a[%c0]", "memref.load %b[%c0]")
    text = text.replace("%a: memref<4xi32>, ", "%a: memref<4xi32>, %b: memref<4xi32>, ")
    assert time_loop(_loop_schedule(text)) is not None


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_host_code_under_another_name_sees_each_step(name: str, mpi: str) -> None:
    text, inputs = _program(name), _inputs(name)
    oracle = dhir.run(text, *inputs, backend="interp")
    assert oracle[-1].tolist() == [2, 4]  # the oracle runs the program as meant
    got = dhir.run(text, *inputs, backend="native", ranks=2, mpi=mpi, timeout=120)
    for g, w in zip(got, oracle, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g, w)


# @f's time loop: its task doubles %x[0] on rank 1; the host reads @g, which @main passes
# as %x: the same buffer under a name buffers() keeps apart from the argument.
PASSED_GLOBAL = """
memref.global "private" KIND@g : memref<4xi32> = dense<1>
func.func private @f(%x: memref<4xi32>, %acc: memref<3xi32>) {
  %h0 = arith.constant 0 : index
  %h1 = arith.constant 1 : index
  %h3 = arith.constant 3 : index
  scf.for %t = %h0 to %h3 step %h1 {
    dhir.schedule %x {
      %t0 = dhir.task target = "cpu", %x attributes {dhir.rank = 1 : i64} {
        %c0 = arith.constant 0 : index
        %v = memref.load %x[%c0] : memref<4xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %x[%c0] : memref<4xi32>
      }
    }
    %g = memref.get_global @g : memref<4xi32>
    %y = memref.load %g[%h0] : memref<4xi32>
    memref.store %y, %acc[%t] : memref<3xi32>
  }
  func.return
}
func.func @main(%acc: memref<3xi32>) {
  %g0 = memref.get_global @g : memref<4xi32>
  func.call @f(%g0, %acc) : (memref<4xi32>, memref<3xi32>) -> ()
  func.return
}
"""


def test_a_mutable_global_beside_an_argument_is_no_time_loop() -> None:
    assert time_loop(_loop_schedule(PASSED_GLOBAL.replace("KIND", ""))) is None
    # A constant global cannot be the buffer a task writes: the loop stays one.
    assert time_loop(_loop_schedule(PASSED_GLOBAL.replace("KIND", "constant "))) is not None


@needs_mpi
def test_a_global_passed_as_the_argument_sees_each_step() -> None:
    text, inputs = PASSED_GLOBAL.replace("KIND", ""), [np.zeros(3, np.int32)]
    oracle = dhir.run(text, *inputs, backend="interp")
    assert oracle[0].tolist() == [2, 4, 8]
    got = dhir.run(text, *inputs, backend="native", ranks=2, timeout=120)
    assert got[0].tobytes() == oracle[0].tobytes(), (got, oracle)


# --- item 8: the error texts -----------------------------------------------------------

PING_PONG = """
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %t = %c0 to %steps step %c1 iter_args(%x = %a, %y = %b)
      -> (memref<4xi32>, memref<4xi32>) {
    dhir.schedule %x, %y {
      %t0 = dhir.task target = "cpu", %x, %y attributes {dhir.rank = 1 : i64} {
        %k0 = arith.constant 0 : index
        %v = memref.load %x[%k0] : memref<4xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %y[%k0] : memref<4xi32>
      }
    }
    scf.yield %y, %x : memref<4xi32>, memref<4xi32>
  }
  func.return
}
"""


def test_a_trip_count_is_no_buffer() -> None:
    schedule = _loop_schedule(PING_PONG)
    names = [{getattr(b, "name_hint", b) for b in buffers(v)} for v in schedule.args]
    # each iter_arg may be either buffer (what the loop starts with and hands on)
    assert names == [{"a", "b"}, {"a", "b"}]


# Handing %a on instead of %x makes %x and %y both %a from the third step: no permutation.
HANDED_ON = PING_PONG.replace("scf.yield %y, %x", "scf.yield %y, %a")
# Both started as %a: a permutation of one buffer twice.
SAME_START = PING_PONG.replace("iter_args(%x = %a, %y = %b)", "iter_args(%x = %a, %y = %a)")


@needs_mpi
@pytest.mark.parametrize("text", [HANDED_ON, SAME_START])
def test_a_ping_ponged_buffer_is_refused_naming_the_memref(text: str) -> None:
    inputs = [np.ones(4, np.int32), np.zeros(4, np.int32), np.int64(3)]
    dhir.run(text, *inputs, backend="interp")
    with pytest.raises(DhirError) as caught:
        dhir.run(text, *inputs, backend="native", ranks=2, timeout=120)
    message = str(caught.value)
    assert "<string>:7:5: error: schedule operands %x and %y may be views of one buffer (%a" in (
        message
    )


def test_buffers_swapped_apart_are_no_aliases() -> None:
    # Started as distinct buffers and handed on as a permutation: distinct every step.
    check_shared_data(parse_string(PING_PONG))
    rotated = PING_PONG.replace(
        "iter_args(%x = %a, %y = %b)", "iter_args(%x = %a, %y = %b, %z = %c)"
    )
    rotated = rotated.replace(
        "%b: memref<4xi32>, %steps", "%b: memref<4xi32>, %c: memref<4xi32>, %steps"
    )
    rotated = rotated.replace(
        "-> (memref<4xi32>, memref<4xi32>)", "-> (memref<4xi32>, memref<4xi32>, memref<4xi32>)"
    )
    rotated = rotated.replace("%r:2", "%r:3").replace(
        "scf.yield %y, %x : memref<4xi32>, memref<4xi32>",
        "scf.yield %y, %z, %x : memref<4xi32>, memref<4xi32>, memref<4xi32>",
    )
    check_shared_data(parse_string(rotated))
    # A permutation of buffers that may be one (a view of %a and %a) is refused.
    viewed = PING_PONG.replace("iter_args(%x = %a, %y = %b)", "iter_args(%x = %a, %y = %view)")
    viewed = viewed.replace(
        "  %r:2", "  %view = memref.cast %a : memref<4xi32> to memref<4xi32>\n  %r:2"
    )
    with pytest.raises(PassFailedAt, match="may be views of one buffer"):
        check_shared_data(parse_string(viewed))


# On each step, rank 0 reads %x[4] that rank 1 wrote the step before (into the buffer
# that is %y then) and rank 1 reads %x[3]: the halo goes both ways, every step.
HALO = """
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %t = %c0 to %steps step %c1 iter_args(%x = %a, %y = %b)
      -> (memref<8xi32>, memref<8xi32>) {
    dhir.schedule %x, %y {
      %t0 = dhir.task target = "cpu", %x, %y attributes {dhir.rank = 0 : i64} {
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k4 = arith.constant 4 : index
        scf.for %i = %k0 to %k4 step %k1 {
          %j = arith.addi %i, %k1 : index
          %u = memref.load %x[%i] : memref<8xi32>
          %v = memref.load %x[%j] : memref<8xi32>
          %w = arith.addi %u, %v : i32
          memref.store %w, %y[%i] : memref<8xi32>
        }
      }
      %t1 = dhir.task target = "cpu", %x, %y attributes {dhir.rank = 1 : i64} {
        %k1 = arith.constant 1 : index
        %k4 = arith.constant 4 : index
        %k8 = arith.constant 8 : index
        scf.for %i = %k4 to %k8 step %k1 {
          %j = arith.subi %i, %k1 : index
          %u = memref.load %x[%i] : memref<8xi32>
          %v = memref.load %x[%j] : memref<8xi32>
          %w = arith.muli %u, %v : i32
          %z = arith.addi %w, %u : i32
          memref.store %z, %y[%i] : memref<8xi32>
        }
      }
    }
    scf.yield %y, %x : memref<8xi32>, memref<8xi32>
  }
  func.return
}
"""


@needs_mpi
@pytest.mark.parametrize("steps", [3, 4])
def test_ping_ponged_buffers_run_natively(steps: int) -> None:
    inputs = [np.arange(1, 9, dtype=np.int32), np.zeros(8, np.int32), np.int64(steps)]
    want = dhir.run(HALO, *inputs, backend="interp")
    got = dhir.run(HALO, *inputs, backend="native", ranks=2, timeout=120)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in want]
    small = [np.ones(4, np.int32), np.zeros(4, np.int32), np.int64(steps)]
    want = dhir.run(PING_PONG, *small, backend="interp")
    got = dhir.run(PING_PONG, *small, backend="native", ranks=2, timeout=120)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in want]


# The HALO tasks in an scf.while: the condition passes %x, %y on as %p, %q (PASS), the
# body yields them swapped (YIELD); the schedule stands in the body (AFTER) or before the
# condition (BEFORE), there on %x and %y, and runs once more than the body.
WHILE = """
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:3 = scf.while (%it = %c0, %x = %a, %y = %b) : (index, memref<8xi32>, memref<8xi32>)
      -> (index, memref<8xi32>, memref<8xi32>) {
    BEFORE
    %go = arith.cmpi slt, %it, %steps : index
    scf.condition(%go) %it, PASS : index, memref<8xi32>, memref<8xi32>
  } do {
  ^bb0(%jt: index, %p: memref<8xi32>, %q: memref<8xi32>):
    AFTER
    %n = arith.addi %jt, %c1 : index
    scf.yield %n, YIELD : index, memref<8xi32>, memref<8xi32>
  }
  func.return
}
"""


def _halo_schedule(x: str, y: str) -> str:
    """HALO's schedule, on `x` (read) and `y` (written)."""
    start = HALO.index("    dhir.schedule")
    text = HALO[start : HALO.index("    scf.yield")]
    return text.replace("%x", "%X").replace("%y", "%Y").replace("%X", x).replace("%Y", y)


def _while(
    *, before: str = "", after: str = "", passed: str = "%x, %y", handed: str = "%q, %p"
) -> str:
    text = WHILE.replace("BEFORE", before).replace("AFTER", after)
    return text.replace("PASS", passed).replace("YIELD", handed)


WHILE_SAFE = {
    "body": _while(after=_halo_schedule("%p", "%q")),
    "before": _while(before=_halo_schedule("%x", "%y")),
    # the condition swaps them and the body hands them on in order: still a permutation
    "condition-swaps": _while(after=_halo_schedule("%p", "%q"), passed="%y, %x", handed="%p, %q"),
}


@needs_mpi
@pytest.mark.parametrize("name", sorted(WHILE_SAFE))
def test_buffers_ping_ponged_through_a_while_run_natively(name: str) -> None:
    for steps in (3, 4):
        inputs = [np.arange(1, 9, dtype=np.int32), np.zeros(8, np.int32), np.int64(steps)]
        want = dhir.run(WHILE_SAFE[name], *inputs, backend="interp")
        got = dhir.run(WHILE_SAFE[name], *inputs, backend="native", ranks=2, timeout=120)
        assert [a.tobytes() for a in got] == [a.tobytes() for a in want]


WHILE_UNSAFE = {
    # an iter_arg beside one of the buffers the loop starts it as
    "beside-start": _while(after=_halo_schedule("%p", "%a")),
    # the body yields one buffer twice: %x and %y are both %b from the second step
    "yield-twice": _while(after=_halo_schedule("%p", "%q"), handed="%q, %q"),
    # the body hands on a starting buffer instead of an iter_arg
    "yield-start": _while(after=_halo_schedule("%p", "%q"), handed="%q, %a"),
    # the condition passes %x twice: %p and %q are one buffer
    "condition-twice": _while(after=_halo_schedule("%p", "%q"), passed="%x, %x"),
    # ... which the schedule before it sees as %x and %y from the second step
    "condition-twice-before": _while(before=_halo_schedule("%x", "%y"), passed="%x, %x"),
    # both started as %a
    "same-start": _while(after=_halo_schedule("%p", "%q")).replace("%y = %b", "%y = %a"),
}


@pytest.mark.parametrize("name", sorted(WHILE_UNSAFE))
def test_aliasing_while_iter_args_are_refused(name: str) -> None:
    text = WHILE_UNSAFE[name]
    inputs = [np.arange(1, 9, dtype=np.int32), np.zeros(8, np.int32), np.int64(3)]
    dhir.run(text, *inputs, backend="interp")  # a valid program, run sequentially
    with pytest.raises(PassFailedAt, match="may be views of one buffer") as caught:
        check_shared_data(parse_string(text))
    if name != "beside-start":
        assert "The scf.while at <string>:5:10 carries" in str(caught.value)


@needs_mpi
def test_an_aliasing_while_is_refused_at_its_schedule() -> None:
    inputs = [np.arange(1, 9, dtype=np.int32), np.zeros(8, np.int32), np.int64(3)]
    with pytest.raises(DhirError) as caught:
        dhir.run(WHILE_UNSAFE["yield-twice"], *inputs, backend="native", ranks=2, timeout=120)
    assert "<string>:12:9: error: schedule operands %p and %q may be views of one buffer (%b)" in (
        str(caught.value)
    )


# What the ping-pong error advises instead: both buffers listed, picked by the step's parity.
BY_PARITY = """
func.func @main(%a: memref<4xi32>, %b: memref<4xi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %t = %c0 to %steps step %c1 {
    %p = arith.remui %t, %c2 : index
    %even = arith.cmpi eq, %p, %c0 : index
    dhir.schedule %a, %b, %even {
      %t0 = dhir.task target = "cpu", %a, %b attributes {dhir.rank = 1 : i64} {
        %k0 = arith.constant 0 : index
        scf.if %even {
          %v = memref.load %a[%k0] : memref<4xi32>
          %w = arith.addi %v, %v : i32
          memref.store %w, %b[%k0] : memref<4xi32>
        } else {
          %v = memref.load %b[%k0] : memref<4xi32>
          %w = arith.addi %v, %v : i32
          memref.store %w, %a[%k0] : memref<4xi32>
        }
      }
    }
  }
  func.return
}
"""


def test_the_ping_pong_error_says_what_to_do_instead() -> None:
    # "Pass the buffer once and make the view inside the tasks" does not fit two buffers
    # swapped through iter_args: the message names the loop and the way that runs.
    with pytest.raises(PassFailedAt) as caught:
        check_shared_data(parse_string(HANDED_ON))
    message = str(caught.value)
    assert "The scf.for at <string>:5:10 carries %x and %y (iter_args)" in message
    assert "choose between them inside the tasks (an scf.if on the step's parity)" in message
    assert "Pass the buffer once" not in message
    check_shared_data(parse_string(BY_PARITY))  # the advice is accepted


@needs_mpi
def test_ping_pong_by_parity_runs() -> None:
    inputs = [np.ones(4, np.int32), np.zeros(4, np.int32), np.int64(3)]
    want = dhir.run(PING_PONG, *inputs, backend="interp")
    got = dhir.run(BY_PARITY, *inputs, backend="native", ranks=2, timeout=120)
    assert [a.tolist() for a in got] == [a.tolist() for a in want]


@pytest.mark.parametrize("rank", ['"one"', "1.0", "true", "[1]"])
def test_a_rank_that_is_no_integer_is_refused_where_it_is_written(rank: str) -> None:
    text = _program("cast").replace("dhir.rank = 1 : i64", f"dhir.rank = {rank}")
    at = next(n for n, line in enumerate(text.splitlines(), 1) if "dhir.task" in line)
    for backend in ("interp", "native"):
        with pytest.raises(DhirError) as caught:
            dhir.run(text, *_inputs("cast"), backend=backend, ranks=2, timeout=120)
        assert f"<string>:{at}:13: error: dhir.rank must be an integer" in str(caught.value)
