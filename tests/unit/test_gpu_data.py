"""dhir-gpu-data: where host<->device copies go, checked on plans and by running the
rewritten program in the interpreter, where a device buffer is an array of its own (a
missing copy in leaves a kernel reading stale data, a missing copy out leaves the host
with stale data)."""

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from strategies import RandomSchedule, random_inputs, ranked_cases
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, i1
from xdsl.ir import Operation, SSAValue

import dhir
from dhir.analysis.effects import Effects
from dhir.backends.interp import run_interp
from dhir.dialects import gpu
from dhir.dialects.dhir import DEVICE_BUFFER_ATTR
from dhir.transforms.building import rows_view
from dhir.transforms.gpu_data import (
    PAIR_HOOK,
    READY_HOOK,
    READY_ROWS_HOOK,
    RECV_HOOK,
    RECV_ROWS_HOOK,
    SEND_HOOK,
    SEND_ROWS_HOOK,
    TASK_HOOK,
    UNPIN_HOOK,
    TaskFacts,
    plan_copies,
    plan_loop_copies,
)

GPU_TARGETS = ('{arch = "sm_90"}', '{kind = "gpu"}', '{kind = "cpu"}', '{arch = "x86_64"}')
# Only GPU tasks: on 2 or 3 ranks, about half of such schedules in a time loop send a
# device buffer from one rank's GPU to another's (a third with GPU_TARGETS).
GPU_ONLY = GPU_TARGETS[:2]


def gpu_cases(
    ranks: tuple[int, int], max_tasks: int
) -> st.SearchStrategy[tuple[int, RandomSchedule, int]]:
    """`ranked_cases` of GPU and CPU tasks or of GPU tasks only, with up to 4 buffers."""
    return st.one_of(
        ranked_cases(ranks, max_tasks, 4, GPU_TARGETS), ranked_cases(ranks, max_tasks, 4, GPU_ONLY)
    )


class ParallelSchedule(RandomSchedule):
    """Random schedules whose loops are scf.parallel (every element is independent), so
    that GPU-targeted tasks are valid GPU tasks."""

    def _task_lines(self, k: int, task: object) -> list[str]:
        lines = super()._task_lines(k, task)  # type: ignore[arg-type]
        loop = "      scf.for %i = %lo to %hi step %one {"
        return [
            "      scf.parallel (%i) = (%lo) to (%hi) step (%one) {" if line == loop else line
            for line in lines
        ]


def parallel(program: RandomSchedule) -> ParallelSchedule:
    return ParallelSchedule(program.buffers, program.size, program.targets, program.tasks)


# --- plans ----------------------------------------------------------------------------


def _values(n: int) -> list[SSAValue]:
    block = __import__("xdsl.ir", fromlist=["Block"]).Block(arg_types=[i1] * n)
    return list(block.args)


def _fact(rank: int, gpu: bool, reads=(), writes=()) -> TaskFacts:
    return TaskFacts(rank, gpu, Effects(frozenset(reads), frozenset(writes)))


def test_gpu_chain_on_one_rank_keeps_data_on_the_device() -> None:
    a, b = _values(2)
    facts = [
        _fact(0, False, writes=[a]),
        _fact(1, True, reads=[a], writes=[b]),
        _fact(1, True, reads=[b], writes=[b]),
        _fact(1, True, reads=[b], writes=[a]),
        _fact(0, False, reads=[a, b]),
    ]
    plan = plan_copies(facts, [a, b], {a, b})
    assert plan.copy_in == {1: [a, b], 2: [], 3: []}
    assert plan.copy_out == {1: [], 2: [], 3: [a, b]}


def test_write_elsewhere_invalidates_the_device_copy() -> None:
    (a,) = _values(1)
    facts = [
        _fact(0, True, reads=[a]),
        _fact(1, False, writes=[a]),
        _fact(0, True, reads=[a]),
        _fact(0, True, reads=[a]),
    ]
    plan = plan_copies(facts, [a], {a})
    assert plan.copy_in == {0: [a], 2: [a], 3: []}
    assert plan.copy_out == {0: [], 2: [], 3: []}  # only read: the host copy stays valid


def test_gpu_tasks_on_two_ranks_copy_through_the_host_without_device_messages() -> None:
    (a,) = _values(1)
    facts = [_fact(0, True, writes=[a]), _fact(1, True, reads=[a], writes=[a])]
    plan = plan_copies(facts, [a], {a}, device_messages=False)
    assert plan.copy_out[0] == [a]  # rank 1 needs it: out, then an MPI message
    assert plan.copy_in[1] == [a] and plan.copy_out[1] == [a]
    assert plan.send == plan.receive == {}


def test_gpu_tasks_on_two_ranks_send_device_to_device() -> None:
    (a,) = _values(1)
    facts = [_fact(0, True, writes=[a]), _fact(1, True, reads=[a], writes=[a])]
    plan = plan_copies(facts, [a], {a})
    assert plan.copy_out[0] == [] and plan.send == {0: [(a, 1)]}
    assert plan.copy_in[1] == [] and plan.receive == {1: [(a, 0)]}
    assert plan.copy_out[1] == [a]  # code after the schedule reads it


def test_a_value_only_devices_hold_is_copied_out_where_a_host_needs_it() -> None:
    a, b = _values(2)
    facts = [
        _fact(0, True, writes=[a]),
        _fact(1, True, reads=[a], writes=[b]),  # receives a from rank 0
        _fact(0, True, reads=[a]),  # current on rank 0's device; waits for the send
        _fact(2, False, reads=[a]),  # a host needs it: the last GPU user copies it out
        _fact(0, True, writes=[a]),  # its device copy is still current
    ]
    plan = plan_copies(facts, [a, b], {a, b})
    assert plan.send == {0: [(a, 1)]} and plan.receive == {1: [(a, 0)]}
    # Written memrefs are filled too (a kernel may write part of one).
    assert plan.copy_in == {0: [a], 1: [b], 2: [], 4: []}
    assert plan.copy_out == {0: [], 1: [b], 2: [a], 4: [a]}
    assert plan.ready == {0: [], 1: [], 2: [a], 4: []}


def test_a_send_still_in_flight_when_a_step_starts_is_waited_for_first() -> None:
    (a,) = _values(1)
    facts = [_fact(0, True, writes=[a]), _fact(1, True, reads=[a], writes=[a])]
    plan = plan_copies(facts, [a], {a})
    assert plan.in_flight == {(0, a)} and plan.ready == {0: [], 1: []}
    # In a time loop the buffers last: the next step's first use on rank 0 waits.
    again = plan_copies(facts, [a], {a}, in_flight=plan.in_flight)
    assert again.ready == {0: [a], 1: []} and again.in_flight == {(0, a)}


def test_a_time_loop_keeps_what_only_its_gpu_uses_on_the_device() -> None:
    """A Jacobi sweep and its copy back on one GPU: in before the first step, out after
    the last, nothing in between."""
    a, b = _values(2)
    facts = [_fact(0, True, reads=[a], writes=[b]), _fact(0, True, reads=[b], writes=[a])]
    plan = plan_loop_copies(facts, [a, b], {a, b})
    assert plan.copy_in == {0: [], 1: []} and plan.copy_out == {0: [], 1: []}
    assert plan.first_in == {0: [a, b], 1: []}
    assert plan.last_out == {1: [a, b]}
    # The schedule alone (no loop) copies both in and out.
    alone = plan_copies(facts, [a, b], {a, b})
    assert alone.copy_in == {0: [a, b], 1: []} and alone.copy_out == {0: [], 1: [a, b]}


def test_a_time_loop_copies_every_step_what_a_host_touches_between_gpu_uses() -> None:
    a, b, c = _values(3)
    facts = [
        _fact(0, True, reads=[a, c], writes=[b]),
        _fact(1, False, reads=[b]),  # another rank's CPU reads b: out every step
        _fact(1, False, writes=[a]),  # and writes a: in every step
    ]
    plan = plan_loop_copies(facts, [a, b, c], {a, b, c})
    assert plan.copy_in == {0: [a]} and plan.copy_out == {0: [b]}
    assert plan.first_in == {0: [b, c]}  # b: the rest of it, which the kernel may not write
    assert plan.last_out == {}


def test_a_time_loop_copies_out_what_the_next_step_uses_on_another_rank() -> None:
    """What rank 0's GPU writes and rank 1's GPU reads first in the next step goes out
    and in every step (device messages stay within a step)."""
    (a,) = _values(1)
    facts = [_fact(1, True, reads=[a]), _fact(0, True, reads=[a], writes=[a])]
    plan = plan_loop_copies(facts, [a], {a})
    assert plan.copy_out == {0: [], 1: [a]} and plan.last_out == {}
    assert plan.copy_in == {0: [a], 1: []} and plan.first_in == {0: [], 1: [a]}
    assert plan.send == plan.receive == {}


def test_a_time_loop_keeps_what_it_sent_on_both_devices() -> None:
    """Rank 0's GPU writes a value and sends it to rank 1's: both devices hold it at
    the step's end, so the next step's write on rank 0 needs no copy in, and only the
    last step copies it out, on rank 0, whose task copies it in on the first step (out
    on rank 1, the last to use it, dhir-lower-to-mpi sent rank 1's host copy to rank 0
    every step, for that copy in)."""
    (a,) = _values(1)
    facts = [_fact(0, True, reads=[a], writes=[a]), _fact(1, True, reads=[a])]
    plan = plan_loop_copies(facts, [a], {a})
    assert plan.send == {0: [(a, 1)]} and plan.receive == {1: [(a, 0)]}
    assert plan.copy_out == {0: [], 1: []} and plan.last_out == {0: [a]}
    assert plan.copy_in == {0: [], 1: []} and plan.first_in == {0: [a], 1: []}


def test_a_loop_with_no_last_step_to_test_for_copies_out_after_it() -> None:
    """An scf.while that does not count: no test tells its last step before its
    condition, so what code after it reads goes out once after the loop (from the rank
    that copies it in: `after_loop`, keyed by that rank's task), and in on the first
    step only. Until 2026-12-01 it went out every step."""
    a, b = _values(2)
    facts = [_fact(0, True, reads=[a], writes=[b]), _fact(0, True, reads=[b], writes=[a])]
    plan = plan_loop_copies(facts, [a, b], {a, b}, last_step=False)
    assert plan.first_in == {0: [a, b], 1: []} and plan.copy_in == {0: [], 1: []}
    assert plan.last_out == {} and plan.copy_out == {0: [], 1: []}
    assert plan.after_loop == {1: [a, b]}
    sent = [_fact(0, True, reads=[a], writes=[a]), _fact(1, True, reads=[a])]
    plan = plan_loop_copies(sent, [a], {a}, last_step=False)
    assert plan.send == {0: [(a, 1)]} and plan.copy_out == {0: [], 1: []}
    assert plan.first_in == {0: [a], 1: []} and plan.last_out == {}
    assert plan.after_loop == {0: [a]}


def test_host_code_loading_elements_between_steps_gets_only_those() -> None:
    """Host code at a step's end (the loop's condition) loads %a[0] and %a[3]: those
    elements go out every step, the whole of %a only after the last; %b, whose
    subscripts are not known (no `elements` entry), goes out whole every step."""
    a, b = _values(2)
    gpu_task = _fact(0, True, reads=[a, b], writes=[a, b])
    host = TaskFacts(0, False, Effects(frozenset([a, b]), frozenset()), None, {a: ((0,), (3,))})
    plan = plan_loop_copies([gpu_task, host], [a, b], {a, b})
    assert plan.copy_elements == {0: [(a, (0,)), (a, (3,))]}
    assert plan.copy_out == {0: [b]} and plan.last_out == {0: [a]}
    assert plan.first_in == {0: [a, b]}


def test_a_time_loop_waits_for_its_last_step_s_sends() -> None:
    (a,) = _values(1)
    facts = [_fact(0, True, writes=[a]), _fact(1, True, reads=[a], writes=[a])]
    plan = plan_loop_copies(facts, [a], {a})
    assert plan.ready == {0: [a], 1: []} and plan.in_flight == {(0, a)}


def test_nothing_copied_back_when_nothing_reads_it_afterwards() -> None:
    (a,) = _values(1)
    plan = plan_copies([_fact(0, True, writes=[a])], [a], needed_after=set())
    assert plan.copy_out == {0: []}


def test_local_buffer_unused_after_the_schedule_stays_on_the_device() -> None:
    program = """
    func.func @main(%out: memref<4xi32>) {
      %tmp = memref.alloc() : memref<4xi32>
      dhir.schedule %tmp, %out {
        %gpu = dhir.target {kind = "gpu"}
        %t0 = dhir.task %gpu, %tmp {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c4 = arith.constant 4 : index
          scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
            %v = arith.index_cast %i : index to i32
            memref.store %v, %tmp[%i] : memref<4xi32>
          }
        }
        %t1 = dhir.task %gpu, %tmp, %out {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c4 = arith.constant 4 : index
          scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
            %v = memref.load %tmp[%i] : memref<4xi32>
            memref.store %v, %out[%i] : memref<4xi32>
          }
        }
      }
      memref.dealloc %tmp : memref<4xi32>
      return
    }
    """
    module = dhir.parse_string(program)
    dhir.run_pipeline(module, "dhir-gpu-data")
    text = dhir.print_module(module)
    assert "gpu.memcpy %tmp, " not in text  # %tmp never returns to the host
    assert "gpu.memcpy %out, %out_dev0" in text
    results = _run_on_interp(module, [np.zeros(4, np.int32)])
    np.testing.assert_array_equal(results[0], np.arange(4, dtype=np.int32))


def test_a_view_made_before_the_schedule_and_read_after_it_gets_the_writes() -> None:
    program = """
    func.func @main(%out: memref<i32>) {
      %tmp = memref.alloc() : memref<2x2xi32>
      %flat = memref.collapse_shape %tmp [[0, 1]] : memref<2x2xi32> into memref<4xi32>
      dhir.schedule %tmp {
        %gpu = dhir.target {kind = "gpu"}
        %t0 = dhir.task %gpu, %tmp {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %c2 = arith.constant 2 : index
          scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c2) step (%c1, %c1) {
            %v = arith.index_cast %i : index to i32
            memref.store %v, %tmp[%i, %j] : memref<2x2xi32>
          }
        }
      }
      %c3 = arith.constant 3 : index
      %x = memref.load %flat[%c3] : memref<4xi32>
      memref.store %x, %out[] : memref<i32>
      memref.dealloc %tmp : memref<2x2xi32>
      return
    }
    """
    module = dhir.parse_string(program)
    dhir.run_pipeline(module, "dhir-gpu-data")
    assert "gpu.memcpy %tmp, " in dhir.print_module(module)
    results = _run_on_interp(module, [np.zeros((), np.int32)])
    assert results[0] == 1


MESSAGES_IN_A_LOOP = """
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>, %c: memref<8xi32>) {
  %s0 = arith.constant 0 : index
  %s1 = arith.constant 1 : index
  %steps = arith.constant 3 : index
  scf.for %step = %s0 to %steps step %s1 {
    dhir.schedule %a, %b, %c {
      %gpu = dhir.target {kind = "gpu"}
      %t0 = dhir.task %gpu, %a, %c attributes {dhir.rank = 0 : i64} {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c8 = arith.constant 8 : index
        scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
          %v = memref.load %c[%i] : memref<8xi32>
          %w = memref.load %a[%i] : memref<8xi32>
          %x = arith.addi %v, %w : i32
          memref.store %x, %a[%i] : memref<8xi32>
        }
      }
      %t1 = dhir.task %gpu, %a, %b attributes {dhir.rank = 1 : i64} {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c8 = arith.constant 8 : index
        scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
          %v = memref.load %a[%i] : memref<8xi32>
          %w = memref.load %b[%i] : memref<8xi32>
          %x = arith.addi %v, %w : i32
          memref.store %x, %b[%i] : memref<8xi32>
        }
      }
    }
  }
  func.return
}
"""


def test_a_time_loop_with_device_messages_still_keeps_data_on_the_device() -> None:
    """Rank 0's GPU sends %a to rank 1's each step (a send that may be in flight when
    the next step starts); %c, which only rank 0's GPU reads, and %b, which only rank
    1's GPU uses, still stay on their devices between steps. (GPU tasks alone on two
    ranks: planned row by row since 2026-12-01, so the copies are before and after
    the loop, not on its first and last steps.)"""
    module = dhir.parse_string(MESSAGES_IN_A_LOOP)
    dhir.run_pipeline(module, "dhir-gpu-data{ranks=2}")
    (loop,) = [op for op in module.walk() if isinstance(op, scf.ForOp)]
    copies = [op for op in module.walk() if isinstance(op, gpu.MemcpyOp)]
    assert not any(loop.is_ancestor(op) for op in copies)
    assert len(copies) == 5  # %a, %b and %c in before the loop; %a and %b out after it
    inputs = [np.arange(8, dtype=np.int32) * k for k in (1, 2, 3)]
    a, b, c = (x.copy() for x in inputs)
    for _ in range(3):
        a = a + c
        b = b + a
    results = _run_on_interp(module, [x.copy() for x in inputs])
    for got, want in zip(results, [a, b, c]):
        np.testing.assert_array_equal(got, want)


# A GPU counts %a up each step, and the loop's condition reads %a[0]: it stops once that
# reaches 5 (or after 10 steps), so stale host data would show in the step count.
CONVERGING = """
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %five = arith.constant 5 : i32
  %left = scf.while (%step = %c0) : (index) -> index {
    %more = arith.cmpi ult, %step, %c10 : index
    %r = memref.load %a[%c0] : memref<8xi32>
    %low = arith.cmpi slt, %r, %five : i32
    %go = arith.andi %more, %low : i1
    scf.condition(%go) %step : index
  } do {
  ^bb0(%i: index):
    dhir.schedule %a, %b {
      %gpu = dhir.target {arch = "sm_90"}
      %count = dhir.task %gpu, %a, %b RANK {
        %z = arith.constant 0 : index
        %u = arith.constant 1 : index
        %n = arith.constant 8 : index
        %one = arith.constant 1 : i32
        scf.parallel (%j) = (%z) to (%n) step (%u) {
          %x = memref.load %a[%j] : memref<8xi32>
          %y = arith.addi %x, %one : i32
          memref.store %y, %a[%j] : memref<8xi32>
          %v = memref.load %b[%j] : memref<8xi32>
          %w = arith.addi %v, %y : i32
          memref.store %w, %b[%j] : memref<8xi32>
        }
      }
    }
    %next = arith.addi %i, %c1 : index
    scf.yield %next : index
  }
  return
}
"""


def converging(ranks: int, load: str = "memref") -> str:
    """CONVERGING with its task on the last of `ranks`, its condition loading %a[0]
    with `memref.load` or `affine.load` (`load`)."""
    text = CONVERGING.replace("RANK", f"attributes {{dhir.rank = {ranks - 1} : i64}}")
    if load == "affine":
        text = text.replace(
            "memref.load %a[%c0] : memref<8xi32>", "affine.load %a[0] : memref<8xi32>"
        )
    return text


@pytest.mark.parametrize("load", ["memref", "affine"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_while_loop_whose_condition_reads_gpu_data_copies_out_only_that(
    ranks: int, load: str
) -> None:
    """The condition reads %a[0]: that element goes out every step (from the last
    rank's GPU), the rest of %a and all of %b stay on the device and go out once, after
    the loop; both go in on the first step only. Until 2026-12-01 a host load in the
    loop made every step copy both in and out; then all of %a went out every step (an
    `affine.load` still made every step copy both in and out)."""
    text = converging(ranks, load)
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, f"dhir-gpu-data{{ranks={ranks}}}")
    zeros = [np.zeros(8, np.int32), np.zeros(8, np.int32)]
    a, b = _run_on_interp(module, zeros)  # stale %a on the host: 10 steps, 10 and 55
    np.testing.assert_array_equal(a, np.full(8, 5, np.int32))
    np.testing.assert_array_equal(b, np.full(8, 1 + 2 + 3 + 4 + 5, np.int32))
    (loop,) = [op for op in module.walk() if isinstance(op, scf.WhileOp)]
    copies = [op for op in loop.walk() if isinstance(op, gpu.MemcpyOp)]
    every_step = [op for op in copies if not isinstance(op.parent_op(), scf.IfOp)]
    assert [_element_copied(op) for op in every_step] == [("a", (0,))]
    assert len(copies) == 3  # %a and %b in on the first step, %a[0] out
    after = [op for op in module.walk() if isinstance(op, gpu.MemcpyOp) and op not in copies]
    assert [op.dst.name_hint for op in after] == ["a", "b"]


def _element_copied(copy: gpu.MemcpyOp) -> tuple[str | None, tuple[int, ...]]:
    """The host memref a copy out of one element writes, and the element's subscripts."""
    view = copy.dst.owner
    assert isinstance(view, memref.SubviewOp)
    assert tuple(view.static_sizes.get_values()) == (1,) * len(view.static_sizes)
    return view.source.name_hint, tuple(view.static_offsets.get_values())


# --- the rewritten program, run --------------------------------------------------------


def _run_on_interp(module: ModuleOp, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run a module after dhir-gpu-data in the interpreter: every rank's device buffers
    exist (their rank guards become `true`), the runtime hooks are dropped, and a device
    message is a copy into a mailbox per tag and out of it, in program order (a message
    of rows: of those rows)."""
    hooks = (TASK_HOOK, PAIR_HOOK, UNPIN_HOOK, READY_HOOK, READY_ROWS_HOOK)
    messages = (SEND_HOOK, RECV_HOOK, SEND_ROWS_HOOK, RECV_ROWS_HOOK)
    mailboxes: dict[int, SSAValue] = {}
    for op in list(module.walk()):
        if isinstance(op, func.CallOp) and op.callee.string_value() in messages:
            _as_mailbox_copy(op, mailboxes)
        elif isinstance(op, func.CallOp) and op.callee.string_value() in hooks:
            operands = list(op.operands)
            op.detach()
            op.erase()
            for operand in operands:
                _erase_unused(operand)
        elif isinstance(op, scf.IfOp) and DEVICE_BUFFER_ATTR in op.attributes:
            true = arith.ConstantOp(IntegerAttr(1, i1))
            assert op.parent is not None
            op.parent.insert_op_before(true, op)
            old = op.cond
            op.operands[0] = true.result
            _erase_unused(old)
    return run_interp(module, "main", inputs)


def _as_mailbox_copy(call: func.CallOp, mailboxes: dict[int, SSAValue]) -> None:
    address, tag = call.operands[0], call.operands[-1]
    buffer = address.owner.operands[0].owner.operands[0]  # type: ignore[union-attr]
    number = tag.owner.value.value.data  # type: ignore[union-attr]
    if number not in mailboxes:
        assert isinstance(buffer.type, MemRefType)
        box = memref.AllocOp.get(buffer.type.element_type, shape=buffer.type.get_shape())
        main = next(o for o in _ops(call) if isinstance(o, func.FuncOp))
        main.body.block.insert_op_before(box, main.body.block.first_op)  # type: ignore[arg-type]
        mailboxes[number] = box.memref
    box = mailboxes[number]
    sending = call.callee.string_value() in (SEND_HOOK, SEND_ROWS_HOOK)
    ends = [box, buffer] if sending else [buffer, box]
    views: list[Operation] = []
    if len(call.operands) == 5:  # rows: bytes at an offset
        offset, size = (v.owner.value.value.data for v in call.operands[1:3])  # type: ignore[union-attr]
        row = _row_bytes(buffer.type)
        views = [rows_view(v, 0, offset // row, (offset + size) // row) for v in ends]
        ends = [v.result for v in views]
    copy = gpu.MemcpyOp.build(operands=[[], *ends], result_types=[[]])
    assert call.parent is not None
    for op in [*views, copy]:
        call.parent.insert_op_before(op, call)
    operands = list(call.operands)
    call.detach()
    call.erase()
    for operand in operands:
        _erase_unused(operand)


def _row_bytes(type_: object) -> int:
    assert isinstance(type_, MemRefType)
    size = type_.element_type.bitwidth // 8  # type: ignore[union-attr]
    for n in type_.get_shape()[1:]:
        size *= n
    return size


def _ops(op: Operation) -> list[Operation]:
    """`op` and the ops around it, innermost first."""
    found: list[Operation] = []
    current: Operation | None = op
    while current is not None:
        found.append(current)
        current = current.parent_op()
    return found


def _erase_unused(value: SSAValue) -> None:
    """Erase the chain of ops that only computed `value`."""
    owner = value.owner
    if value.uses or not hasattr(owner, "operands") or owner.regions:
        return
    operands = list(owner.operands)
    owner.detach()
    owner.erase()
    for operand in operands:
        _erase_unused(operand)


@settings(max_examples=120, deadline=None)
@given(ranked_cases((1, 3), 14, 4, GPU_TARGETS))
def test_copies_keep_the_sequential_result(case: tuple[int, RandomSchedule, int]) -> None:
    ranks, random_program, seed = case
    program = parallel(random_program)
    note(f"on {ranks} ranks, the program:\n{program.text()}")
    module = dhir.parse_string(program.text())
    dhir.run_pipeline(module, f"dhir-place{{ranks={ranks}}},dhir-gpu-data{{ranks={ranks}}}")
    note(dhir.print_module(module))
    inputs = random_inputs(program, seed)
    results = _run_on_interp(module, [a.copy() for a in inputs])
    for got, want in zip(results, program.reference(inputs)):
        np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(
    ranked_cases((2, 3), 10, 4, GPU_ONLY),
    st.integers(0, 4),
    st.integers(0, 2),
    st.integers(1, 3),
)
def test_rows_between_gpus_in_a_time_loop_keep_the_sequential_result(
    case: tuple[int, RandomSchedule, int], steps: int, lb: int, step: int
) -> None:
    """GPU tasks only, on several ranks, in an scf.for: planned row by row
    (dhir.transforms.gpu_rows), each message of rows a copy into a mailbox and out."""
    ranks, random_program, seed = case
    program = parallel(random_program)
    loop = TimeLoop(steps, lb, step)
    text = _in_time_loop(program.text(), loop.steps, loop)
    note(text)
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, f"dhir-place{{ranks={ranks}}},dhir-gpu-data{{ranks={ranks}}}")
    note(dhir.print_module(module))
    inputs = random_inputs(program, seed)
    want = loop.reference(program, inputs)
    results = _run_on_interp(module, [a.copy() for a in inputs])
    for got, expected in zip(results, want):
        np.testing.assert_array_equal(got, expected)


HALO_TASK = """%{name} = dhir.task %gpu, %a, %b attributes {{dhir.rank = {rank} : i64}} {{
        %lo = arith.constant {lo} : index
        %hi = arith.constant {hi} : index
        %u = arith.constant 1 : index
        %z = arith.constant 0 : index
        %w = arith.constant {width} : index
        %half = arith.constant 0.5 : f64
        scf.parallel (%i, %j) = (%lo, %z) to (%hi, %w) step (%u, %u) {{
          {body}
        }}
      }}
      """
HALO_SWEEP = """%l = arith.subi %i, %u : index
          %r = arith.addi %i, %u : index
          %x = memref.load %a[%l, %j] : memref<{rows}x{width}xf64>
          %y = memref.load %a[%r, %j] : memref<{rows}x{width}xf64>
          %s = arith.addf %x, %y : f64
          %m = arith.mulf %s, %half : f64
          memref.store %m, %b[%i, %j] : memref<{rows}x{width}xf64>"""
HALO_BACK = """%x = memref.load %b[%i, %j] : memref<{rows}x{width}xf64>
          memref.store %x, %a[%i, %j] : memref<{rows}x{width}xf64>"""


def halo(rows: int, width: int) -> str:
    """A Jacobi sweep over the rows of %a into %b and the copy back, in a time loop of
    %steps steps, cut in two: rank 0's GPU takes rows 1 to rows/2 - 1, rank 1's the
    rest but the last; each step each needs one row the other wrote the step before."""
    middle = rows // 2
    shape = {"rows": rows, "width": width}
    tasks = ""
    for name, body in (("sweep", HALO_SWEEP), ("back", HALO_BACK)):
        for rank, (lo, hi) in enumerate([(1, middle), (middle, rows - 1)]):
            code = body.format(**shape)
            tasks += HALO_TASK.format(
                name=f"{name}{rank}", rank=rank, lo=lo, hi=hi, body=code, width=width
            )
    memref = f"memref<{rows}x{width}xf64>"
    return f"""
func.func @main(%a: {memref}, %b: {memref}, %steps: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {{
    dhir.schedule %a, %b {{
      %gpu = dhir.target {{arch = "sm_90"}}
      {tasks}
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize("steps", [0, 1, 4])
@pytest.mark.parametrize(("rows", "width"), [(16, 1), (16, 8)])
def test_a_halo_exchange_sends_only_the_halo(rows: int, width: int, steps: int) -> None:
    """Each step each rank's GPU receives the one row of %a the other wrote the step
    before, at the start of its sweep (not on the first step), sent at the end of the
    other's copy back (not on the last step); each copies in the rows it reads before
    the loop and out the rows it wrote after it. Until 2026-12-01 every step copied %a
    out of rank 1's GPU, through MPI and into rank 0's, and sent all of %a and %b from
    rank 0's GPU to rank 1's."""
    text = halo(rows, width)
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, "dhir-gpu-data{ranks=2}")
    (loop,) = [op for op in module.walk() if isinstance(op, scf.ForOp)]
    calls = [op for op in loop.walk() if isinstance(op, func.CallOp)]
    sent = [c for c in calls if c.callee.string_value() == SEND_ROWS_HOOK]
    received = [c for c in calls if c.callee.string_value() == RECV_ROWS_HOOK]
    row = width * 8
    assert [_constants(c)[1:4] for c in sent] == [
        [row * (rows // 2 - 1), row, 1],
        [row * (rows // 2), row, 0],
    ]
    assert [_constants(c)[1:4] for c in received] == [
        [row * (rows // 2), row, 1],
        [row * (rows // 2 - 1), row, 0],
    ]
    assert all(isinstance(c.parent_op(), scf.IfOp) for c in sent + received)
    assert not [op for op in loop.walk() if isinstance(op, gpu.MemcpyOp)]
    assert not [c for c in calls if c.callee.string_value() in (SEND_HOOK, RECV_HOOK)]
    rng = np.random.default_rng(7)
    inputs = [
        rng.standard_normal((rows, width)),
        rng.standard_normal((rows, width)),
        np.int64(steps),
    ]
    want = run_interp(dhir.parse_string(text), "main", [np.copy(a) for a in inputs])
    got = _run_on_interp(module, [np.copy(a) for a in inputs])
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


def _constants(call: func.CallOp) -> list[int]:
    """The constant operands of a call, in order (its address left out: -1)."""
    return [
        v.owner.value.value.data if isinstance(v.owner, arith.ConstantOp) else -1  # type: ignore[union-attr]
        for v in call.operands
    ]


@dataclass(frozen=True)
class HostTouch:
    """Host code in a time loop's body, before or after its schedule: element `at` of
    %m<source> plus one, stored to %m<dest>."""

    source: int
    dest: int
    at: int
    before: bool

    def lines(self, k: int, memref: str) -> list[str]:
        return [
            f"    %host_at{k} = arith.constant {self.at} : index",
            f"    %host_v{k} = memref.load %m{self.source}[%host_at{k}] : {memref}",
            f"    %host_one{k} = arith.constant 1 : i32",
            f"    %host_w{k} = arith.addi %host_v{k}, %host_one{k} : i32",
            f"    memref.store %host_w{k}, %m{self.dest}[%host_at{k}] : {memref}",
        ]

    def run(self, buffers: list[np.ndarray]) -> None:
        buffers[self.dest][self.at] = buffers[self.source][self.at] + np.int32(1)


# The ways to write a time loop (TimeLoop.kind): an scf.for; an scf.while that counts
# as one (dhir-gpu-data tests for its first and last steps as for an scf.for); one that
# does not (an unsigned test: no last step to test for); one whose body is its before
# region (a do-while, which runs at least once).
LOOP_KINDS = ("for", "counted", "while", "do")


@dataclass(frozen=True)
class TimeLoop:
    """A loop from `lb` by `step` that runs `steps` times (its upper bound just past
    the last step's start, so that the last step's next value overshoots it), written
    as `kind` says (LOOP_KINDS), with `touches` in its body. An scf.while with `seen`
    (memref, element) loads that element each time its condition runs and adds it up
    (an i32 the loop carries), stored to it after the loop: host code reading between
    steps what the tasks wrote, as a test of convergence would."""

    steps: int
    lb: int = 0
    step: int = 1
    touches: tuple[HostTouch, ...] = ()
    kind: str = "for"
    seen: tuple[int, int] | None = None

    @property
    def runs(self) -> int:
        return max(self.steps, 1) if self.kind == "do" else self.steps

    def reference(self, program: RandomSchedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
        buffers = [a.copy() for a in inputs]
        seen = np.int32(0)
        with np.errstate(over="ignore"):
            if self.seen is not None and self.kind != "do":
                seen += buffers[self.seen[0]][self.seen[1]]  # the condition before step 1
            for _ in range(self.runs):
                for touch in [t for t in self.touches if t.before]:
                    touch.run(buffers)
                buffers = program.reference(buffers)
                for touch in [t for t in self.touches if not t.before]:
                    touch.run(buffers)
                if self.seen is not None:
                    seen += buffers[self.seen[0]][self.seen[1]]
        if self.seen is not None:
            buffers[self.seen[0]][self.seen[1]] = seen
        return buffers


@st.composite
def time_loops(draw: st.DrawFn, program: RandomSchedule) -> TimeLoop:
    """Time loops around `program`'s schedule, of every kind, half of them with host code
    touching its memrefs between steps, half of the scf.while loops with a condition
    reading one of them."""
    touch = st.builds(
        HostTouch,
        st.integers(0, program.buffers - 1),
        st.integers(0, program.buffers - 1),
        st.integers(0, program.size - 1),
        st.booleans(),
    )
    touches = draw(st.lists(touch, max_size=2)) if draw(st.booleans()) else []
    steps, lb, step = draw(st.integers(0, 3)), draw(st.integers(0, 2)), draw(st.integers(1, 3))
    kind = draw(st.sampled_from(LOOP_KINDS))
    element = st.tuples(st.integers(0, program.buffers - 1), st.integers(0, program.size - 1))
    seen = draw(st.none() | element) if kind != "for" else None
    return TimeLoop(steps, lb, step, tuple(touches), kind, seen)


def _in_time_loop(text: str, steps: int, loop: TimeLoop | None = None) -> str:
    """`text` (one schedule in @main) with its schedule run `steps` times by an scf.for
    (`loop`'s bounds, kind and host code when given)."""
    loop = loop or TimeLoop(steps)
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if "dhir.schedule" in line)
    end = lines.index("  func.return")
    memref = next(line for line in lines if "func.func @main" in line).split(": ")[1]
    memref = memref.split(",")[0].rstrip(") {")
    top = loop.lb + loop.step * (loop.steps - 1) + 1 if loop.steps else loop.lb
    header = [
        f"  %step0 = arith.constant {loop.lb} : index",
        f"  %step1 = arith.constant {loop.step} : index",
        f"  %steps = arith.constant {top} : index",
    ]
    before = [x for k, t in enumerate(loop.touches) if t.before for x in t.lines(k, memref)]
    after = [x for k, t in enumerate(loop.touches) if not t.before for x in t.lines(k, memref)]
    body = [*before, *lines[start:end], *after]
    if loop.seen is None:
        looped = _loop_lines(loop.kind, body)
    else:
        looped = _seeing_loop_lines(loop.kind, body, f"%m{loop.seen[0]}", loop.seen[1], memref)
    return "\n".join([*lines[:start], *header, *looped, *lines[end:]]) + "\n"


def _seeing_loop_lines(kind: str, body: list[str], name: str, at: int, memref: str) -> list[str]:
    """`body` in an scf.while of `kind` whose condition adds element `at` of memref
    `name` to the i32 it carries, stored to that element after the loop (TimeLoop.seen)."""
    looped = _loop_lines(kind, body)
    carried = {
        "  %left = scf.while (%step = %step0) : (index) -> index {": (
            "  %left, %seen_all = scf.while (%step = %step0, %seen = %seen0)"
            " : (index, i32) -> (index, i32) {"
        ),
        "    scf.condition(%go) %step : index": "    scf.condition(%go) %step, %seen_sum : index, i32",
        "    scf.condition(%go) %next : index": "    scf.condition(%go) %next, %seen_sum : index, i32",
        "  ^bb0(%step: index):": "  ^bb0(%step: index, %seen_in: i32):",
        "  ^bb0(%then: index):": "  ^bb0(%then: index, %seen_then: i32):",
        "    scf.yield %next : index": "    scf.yield %next, %seen_in : index, i32",
        "    scf.yield %then : index": "    scf.yield %then, %seen_then : index, i32",
    }
    reading = [
        f"    %seen_at = arith.constant {at} : index",
        f"    %seen_v = memref.load {name}[%seen_at] : {memref}",
        "    %seen_sum = arith.addi %seen, %seen_v : i32",
    ]
    out = ["  %seen0 = arith.constant 0 : i32"]
    for line in looped:
        if line.startswith("    scf.condition("):
            out += reading
        out.append(carried.get(line, line))
    out += [
        f"  %seen_put = arith.constant {at} : index",
        f"  memref.store %seen_all, {name}[%seen_put] : {memref}",
    ]
    return out


def _loop_lines(kind: str, body: list[str]) -> list[str]:
    """`body` in a loop of `kind` (LOOP_KINDS) over %step from %step0 to %steps by %step1."""
    if kind == "for":
        return ["  scf.for %step = %step0 to %steps step %step1 {", *body, "  }"]
    advance = "    %next = arith.addi %step, %step1 : index"
    if kind == "do":
        return [
            "  %left = scf.while (%step = %step0) : (index) -> index {",
            *body,
            advance,
            "    %go = arith.cmpi slt, %next, %steps : index",
            "    scf.condition(%go) %next : index",
            "  } do {",
            "  ^bb0(%then: index):",
            "    scf.yield %then : index",
            "  }",
        ]
    test = "slt" if kind == "counted" else "ult"
    return [
        "  %left = scf.while (%step = %step0) : (index) -> index {",
        f"    %go = arith.cmpi {test}, %step, %steps : index",
        "    scf.condition(%go) %step : index",
        "  } do {",
        "  ^bb0(%step: index):",
        *body,
        advance,
        "    scf.yield %next : index",
        "  }",
    ]


@settings(max_examples=60, deadline=None)
@given(gpu_cases((1, 3), 10), st.data())
def test_copies_in_a_time_loop_keep_the_sequential_result(
    case: tuple[int, RandomSchedule, int], data: st.DataObject
) -> None:
    """Device buffers are made once, before the loop, and last every step, unless host
    code in the loop touches the memrefs (then copies go around each step's tasks)."""
    ranks, random_program, seed = case
    program = parallel(random_program)
    loop = data.draw(time_loops(program))
    text = _in_time_loop(program.text(), loop.steps, loop)
    note(text)
    module = dhir.parse_string(text)
    dhir.run_pipeline(module, f"dhir-place{{ranks={ranks}}},dhir-gpu-data{{ranks={ranks}}}")
    note(dhir.print_module(module))
    (time_loop,) = [op for op in module.walk() if isinstance(op, scf.ForOp | scf.WhileOp)][:1]
    if not loop.touches:
        assert not any(DEVICE_BUFFER_ATTR in op.attributes for op in time_loop.walk())
    inputs = random_inputs(program, seed)
    want = loop.reference(program, inputs)
    results = _run_on_interp(module, [a.copy() for a in inputs])
    for got, expected in zip(results, want):
        np.testing.assert_array_equal(got, expected)
