"""Every backend against the sequential oracle: the example programs next to NumPy,
and random task graphs where the native backend must equal the interpreter bit for bit."""

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from strategies import CPU_TARGETS, RandomSchedule, RandomTask, schedules

import dhir
from dhir import DhirError

EXAMPLES = Path(__file__).parents[2] / "examples"
MPIS = ("mpich", "openmpi")


def _vector_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[np.ndarray]:
    c = a + b
    return [c * 2, b, c]


def _hazards(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    x = x + np.float32(10)
    y = x + x
    x = np.zeros_like(x)
    x[0] = 5
    y[3] = 7
    return [x, y]


def _time_loop(u: np.ndarray, v: np.ndarray, steps: np.ndarray) -> list[np.ndarray]:
    u, v = u.copy(), v.copy()
    for _ in range(int(steps)):
        v[1:15] = (u[0:14] + u[2:16]) * 0.5
        u[1:15] = v[1:15]
    return [u, v, steps]


def _host_between(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    a = np.arange(6, dtype=np.int64) ** 2
    b = a + a[5]
    return [a + b, b]


def _call(m: np.ndarray, out: np.ndarray, k: np.ndarray) -> list[np.ndarray]:
    m = m * np.float32(k)
    total = np.zeros(4, dtype=np.float32)
    for j in range(4):  # the same order of float additions as the program
        total = total + m[:, j]
    return [m, total, k]


def _inputs(name: str, rng: np.random.Generator) -> list[object]:
    ints = lambda n, t: rng.integers(-1000, 1000, n).astype(t)  # noqa: E731
    return {
        "vector_add": lambda: [ints(20, np.int32), ints(20, np.int32), ints(20, np.int32)],
        "hazards": lambda: [rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)],
        "time_loop": lambda: [rng.standard_normal(16), np.zeros(16), 5],
        "host_between": lambda: [ints(6, np.int64), ints(6, np.int64)],
        "call": lambda: [
            rng.standard_normal((4, 4)).astype(np.float32),
            np.zeros(4, np.float32),
            1.5,
        ],
    }[name]()


REFERENCES: dict[str, Callable[..., list[np.ndarray]]] = {
    "vector_add": _vector_add,
    "hazards": _hazards,
    "time_loop": _time_loop,
    "host_between": _host_between,
    "call": _call,
}


def _check(results: list[np.ndarray], expected: list[object]) -> None:
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        want = np.asarray(want)
        assert got.dtype == want.dtype or want.ndim == 0
        np.testing.assert_array_equal(got, want.astype(got.dtype))


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_examples_interp(name: str) -> None:
    inputs = _inputs(name, np.random.default_rng(1))
    results = dhir.run(EXAMPLES / f"{name}.mlir", *inputs, backend="interp")
    _check(results, REFERENCES[name](*inputs))


needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_examples_native(name: str, ranks: int, mpi: str) -> None:
    # Round robin spreads the tasks, so messages cross ranks; the default placement
    # keeps small examples mostly on one rank (see the test below).
    inputs = _inputs(name, np.random.default_rng(ranks))
    results = dhir.run(
        EXAMPLES / f"{name}.mlir",
        *inputs,
        backend="native",
        ranks=ranks,
        mpi=mpi,
        placement="round-robin",
    )
    _check(results, REFERENCES[name](*inputs))


@needs_mpi
@pytest.mark.parametrize("placement", ["heft", "peft", "best"])
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_examples_native_cost_driven_placement(name: str, placement: str) -> None:
    inputs = _inputs(name, np.random.default_rng(3))
    results = dhir.run(
        EXAMPLES / f"{name}.mlir", *inputs, backend="native", ranks=3, placement=placement
    )
    _check(results, REFERENCES[name](*inputs))


@needs_mpi
def test_gpu_task_without_a_driver_is_a_clear_error_on_native(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GPU tasks build and run on native (tests/unit/test_gpu_*.py); without a CUDA
    # driver the run stops with a message naming the task.
    monkeypatch.setenv("DHIR_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    a = np.zeros(20, np.int32)
    with pytest.raises(DhirError, match='GPU task "task3" at .* needs an NVIDIA GPU'):
        dhir.run(
            EXAMPLES / "proposal.mlir", a, a, a, backend="native", ranks=2, placement="round-robin"
        )


def _random_inputs(program: RandomSchedule, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-50, 50, program.size).astype(np.int32) for _ in range(program.buffers)]


@settings(max_examples=150, deadline=None)
@given(schedules(max_tasks=30, max_buffers=6, targets=CPU_TARGETS), st.integers(0, 2**16))
def test_random_schedules_interp_equals_numpy(program: RandomSchedule, seed: int) -> None:
    note(f"the program:\n{program.text()}")
    inputs = _random_inputs(program, seed)
    results = dhir.run(program.text(), *inputs, backend="interp")
    _check(results, program.reference(inputs))


@needs_mpi
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            schedules(max_tasks=30, max_buffers=6, targets=CPU_TARGETS, ranks=n),
            st.sampled_from(MPIS),
            st.integers(0, 2**16),
        )
    )
)
def test_random_schedules_native_equals_interp(case: tuple[int, RandomSchedule, str, int]) -> None:
    ranks, program, mpi, seed = case
    note(f"on {ranks} ranks with {mpi}, the program:\n{program.text()}")
    inputs = _random_inputs(program, seed)
    oracle = dhir.run(program.text(), *inputs, backend="interp")
    native = dhir.run(program.text(), *inputs, backend="native", ranks=ranks, mpi=mpi, timeout=120)
    for got, want in zip(native, oracle):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_long_schedule_spans_several_step_functions(mpi: str) -> None:
    """More tasks than one step function holds (STEPS_PER_FUNCTION): values cross the
    functions' boundaries correctly."""
    from dhir.transforms.lower_to_mpi import STEPS_PER_FUNCTION

    rng = np.random.default_rng(7)
    tasks = tuple(
        RandomTask(
            0,
            tuple(int(b) for b in rng.integers(0, 5, 2)),
            (int(rng.integers(0, 5)),),
            0,
            int(rng.integers(1, 9)),
            int(rng.integers(0, 3)),
        )
        for _ in range(2 * STEPS_PER_FUNCTION + 5)
    )
    program = RandomSchedule(5, 8, ('{kind = "cpu"}',), tasks)
    inputs = _random_inputs(program, 3)
    results = dhir.run(program.text(), *inputs, backend="native", ranks=3, mpi=mpi)
    _check(results, program.reference(inputs))


PARALLEL_SUM = """
func.func @main(%a: memref<64xi32>, %b: memref<64xf32>, %out: memref<1xf32>) {
  dhir.schedule %a, %b, %out {
    %cpu = dhir.target {kind = "cpu"}
    %fill = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %v = memref.load %a[%i] : memref<64xi32>
        %x = arith.index_cast %i : index to i32
        %w = arith.muli %v, %x : i32
        memref.store %w, %a[%i] : memref<64xi32>
      }
    }
    %sum = dhir.task %cpu, %b, %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %s = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
        %v = memref.load %b[%i] : memref<64xf32>
        scf.reduce(%v : f32) {
        ^bb0(%l: f32, %r: f32):
          %t = arith.addf %l, %r : f32
          scf.reduce.return %t : f32
        }
      }
      memref.store %s, %out[%c0] : memref<1xf32>
    }
  }
  return
}
"""


@needs_mpi
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_loops_on_threads_equal_the_oracle(threads: int) -> None:
    """scf.parallel runs on OpenMP threads; a float reduction keeps the program
    sequential (openmp_safe) so its sum cannot depend on the thread count."""
    rng = np.random.default_rng(threads)
    inputs = [
        rng.integers(-9, 9, 64).astype(np.int32),
        rng.standard_normal(64).astype(np.float32),
        np.zeros(1, np.float32),
    ]
    oracle = dhir.run(PARALLEL_SUM, *inputs, backend="interp")
    native = dhir.run(PARALLEL_SUM, *inputs, ranks=2, threads=threads)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


@needs_mpi
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threaded_example_equals_the_oracle(threads: int) -> None:
    inputs = _inputs("vector_add", np.random.default_rng(threads))
    oracle = dhir.run(EXAMPLES / "vector_add.mlir", *inputs, backend="interp")
    native = dhir.run(EXAMPLES / "vector_add.mlir", *inputs, ranks=2, threads=threads)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


def test_openmp_only_without_float_reductions() -> None:
    from dhir.backends.native import openmp_safe

    assert not openmp_safe(dhir.parse_string(PARALLEL_SUM))
    vector_add = dhir.parse_file(EXAMPLES / "vector_add.mlir")
    assert openmp_safe(vector_add)
    assert not openmp_safe(dhir.parse_file(EXAMPLES / "hazards.mlir"))
