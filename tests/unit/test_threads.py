"""One answer to whether a task runs on its rank's OpenMP threads (dhir.analysis.threads):
the cost model and dhir-split time a task on the threads the native build gives it."""

import pytest
from devices import rank_device

from dhir.analysis.threads import THREADS_ATTR, runs_on_threads
from dhir.api import parse_string
from dhir.backends.native import compile_native
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.walk import find_ops
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import task_graph
from dhir.runner import drop_code
from dhir.targets import DeviceKind
from dhir.toolchain.options import RunOptions
from dhir.toolchain.rank_splits import RankSplits
from dhir.transforms.split_tasks import piece_rates

# One rank of a 4-core CPU: 4 threads for a task that runs on them.
CPU = rank_device(DeviceKind.CPU, peak_gflops=40.0, cores=4, core_gflops=10.0)

SWEEP = """
    %poly = dhir.task %cpu, %x, %y {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 4096 : index
      %a = arith.constant 0.5 : f64
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %v = memref.load %x[%i] : memref<4096xf64>
        %w = arith.mulf %v, %a : f64
        memref.store %w, %y[%i] : memref<4096xf64>
      }
    }"""

SUM = """
    %sum = dhir.task %cpu, %y, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 4096 : index
      %zero = arith.constant 0.0 : f64
      %s = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f64 {
        %v = memref.load %y[%i] : memref<4096xf64>
        scf.reduce(%v : f64) {
        ^bb0(%l: f64, %r: f64):
          %t = arith.addf %l, %r : f64
          scf.reduce.return %t : f64
        }
      }
      memref.store %s, %out[%c0] : memref<1xf64>
    }"""

FILL = """
    %fill = dhir.task %cpu, %z {
      %one = arith.constant 1.0 : f64
      linalg.fill ins(%one : f64) outs(%z : memref<4096xf64>)
    }"""


def _program(*tasks: str) -> str:
    return f"""
func.func @main(%x: memref<4096xf64>, %y: memref<4096xf64>, %out: memref<1xf64>,
                %z: memref<4096xf64>) {{
  dhir.schedule %x, %y, %out, %z {{
    %cpu = dhir.target {{kind = "cpu"}}{"".join(tasks)}
  }}
  return
}}"""


MATMUL = """
func.func @main(%A: memref<64x64xf64>, %B: memref<64x64xf64>, %C: memref<64x64xf64>) {
  linalg.matmul ins(%A, %B : memref<64x64xf64>, memref<64x64xf64>)
    outs(%C : memref<64x64xf64>)
  return
}"""


def _as_built(text: str, optimize: bool = True):  # noqa: ANN202 - a module
    """`text` as the native build has it when it places the tasks."""
    module = parse_string(text)
    drop_code(module, "main", RunOptions())
    splits = RankSplits(1)
    splits.devices(module)
    splits.tasks(module, tiles=optimize)
    return module


def _on_threads(text: str, optimize: bool = True) -> list[bool]:
    """Whether the cost model and dhir-split time each task on the rank's threads."""
    module = _as_built(text, optimize)
    schedule = find_ops(module, ScheduleOp)[0]
    costs = CostModel()
    task_graph(schedule, [CPU], costs)
    threads = runs_on_threads(module)
    timed: list[bool] = []
    for task in find_ops(module, TaskOp):
        work = costs.work(task).parallel
        [rate] = piece_rates(task, [CPU], threads)
        assert rate == (40.0 if work else 10.0)  # dhir-split agrees with the cost model
        timed.append(work)
    return timed


def test_a_module_openmp_safe_refuses_is_timed_on_one_core() -> None:
    """A float sum keeps the module's loops in order: the element-wise loop beside it is
    timed on one core, not on 4 threads it will not get."""
    assert _on_threads(_program(SWEEP)) == [True]
    assert _on_threads(_program(SWEEP, SUM)) == [False, False]


def test_a_linalg_matmul_is_timed_as_the_optimizer_builds_it() -> None:
    """Alone in its module, the optimizer writes the matmul as loops, built without
    OpenMP: one core. Without the optimizer, linalg runs on the threads."""
    assert _on_threads(MATMUL) == [False]
    assert _on_threads(MATMUL, optimize=False) == [True]


def test_linalg_beside_a_threaded_loop_is_timed_on_the_threads() -> None:
    """In a module built with OpenMP, a linalg op runs on the threads as the
    scf.parallel does: both are timed on them."""
    assert _on_threads(_program(SWEEP, FILL)) == [True, True]


@pytest.mark.parametrize(
    ("text", "threaded"),
    [(_program(SWEEP, SUM), False), (MATMUL, False), (_program(SWEEP, FILL), True)],
)
def test_the_build_uses_the_threads_the_cost_model_counted(text: str, threaded: bool) -> None:
    """The decision the cost model read is the build's: OpenMP exactly when it says so,
    and it leaves the module without the attribute that carried it."""
    assert runs_on_threads(_as_built(text)) is threaded
    module = parse_string(text)
    drop_code(module, "main", RunOptions())  # as `dhir run` does before the build
    exe, _ = compile_native(module, "main", RunOptions())
    assert (b"__kmpc_" in exe.read_bytes()) is threaded
    assert THREADS_ATTR not in module.attributes
