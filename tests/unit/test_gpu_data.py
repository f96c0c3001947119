"""dhir-gpu-data: where host<->device copies go, checked on plans and by running the
rewritten program in the interpreter, where a device buffer is an array of its own (a
missing copy in leaves a kernel reading stale data, a missing copy out leaves the host
with stale data)."""

import numpy as np
from hypothesis import given, note, settings
from strategies import RandomSchedule, random_inputs, ranked_cases
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i1
from xdsl.ir import SSAValue

import dhir
from dhir.analysis.effects import Effects
from dhir.backends.interp import run_interp
from dhir.dialects.dhir import DEVICE_BUFFER_ATTR
from dhir.transforms.gpu_data import PAIR_HOOK, TASK_HOOK, UNPIN_HOOK, TaskFacts, plan_copies

GPU_TARGETS = ('{arch = "sm_90"}', '{kind = "gpu"}', '{kind = "cpu"}', '{arch = "x86_64"}')


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


def test_gpu_tasks_on_two_ranks_copy_through_the_host() -> None:
    (a,) = _values(1)
    facts = [_fact(0, True, writes=[a]), _fact(1, True, reads=[a], writes=[a])]
    plan = plan_copies(facts, [a], {a})
    assert plan.copy_out[0] == [a]  # rank 1 needs it: out, then an MPI message
    assert plan.copy_in[1] == [a] and plan.copy_out[1] == [a]


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


# --- the rewritten program, run --------------------------------------------------------


def _run_on_interp(module: ModuleOp, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run a module after dhir-gpu-data in the interpreter: every rank's device buffers
    exist (their rank guards become `true`), and the runtime hooks are dropped."""
    hooks = (TASK_HOOK, PAIR_HOOK, UNPIN_HOOK)
    for op in list(module.walk()):
        if isinstance(op, func.CallOp) and op.callee.string_value() in hooks:
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
