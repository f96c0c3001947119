"""dhir's GPU runtime (dhir/runtime/dhir_gpu_rt.c) against a fake CUDA driver
(tests/gpu_fake/fake_cuda.c): device memory is host memory and kernels do not run, so
these tests check the host side (driver loading, device choice, allocations, copies and
their count, launches, error messages), not what kernels compute."""

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from strategies import RandomSchedule, random_inputs, ranked_cases
from test_gpu_data import (
    GPU_ONLY,
    GPU_TARGETS,
    MESSAGES_IN_A_LOOP,
    _in_time_loop,
    _loop_lines,
    converging,
    gpu_cases,
    halo,
    parallel,
    time_loops,
)
from xdsl.dialects.builtin import ModuleOp

import dhir
from dhir import DhirError
from dhir.backends.interp import run_interp
from dhir.backends.native import compile_native
from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import is_gpu_task
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach
from dhir.toolchain.build import Timing
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions

pytestmark = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
ROOT = Path(__file__).parents[2]
PROPOSAL = ROOT / "examples" / "proposal.mlir"


class Fake:
    """The fake driver's call log and the runtime's statistics of one run."""

    def __init__(self, folder: Path, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log = work / "cuda.log"
        self.stats = work / "stats.txt"
        self._env = monkeypatch
        monkeypatch.setenv("LD_LIBRARY_PATH", str(folder))
        monkeypatch.setenv("FAKE_CUDA_LOG", str(self.log))
        monkeypatch.setenv("DHIR_GPU_STATS", str(self.stats))
        monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)

    def set(self, name: str, value: str) -> None:
        self._env.setenv(name, value)

    def calls(self, name: str) -> list[str]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line for line in lines if line.split()[0] == name]

    def counts(self) -> list[dict[str, int]]:
        """Per rank that used its GPU: launches, h2d, d2h, d2d, allocs, frees, ...;
        with `NAME_bytes` for the counts that give bytes (h2d_bytes, sent_bytes)."""
        found = []
        for line in self.stats.read_text().splitlines():
            counts: dict[str, int] = {}
            for key, value, size in re.findall(r"(\w+)=(\d+)(?: \((\d+) bytes\))?", line):
                counts[key] = int(value)
                if size:
                    counts[f"{key}_bytes"] = int(size)
            found.append(counts)
        return found


@pytest.fixture
def fake(fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    return Fake(fake_driver, tmp_path, monkeypatch)


def _run(program: str | Path, *args: np.ndarray, ranks: int = 2) -> list[np.ndarray]:
    return dhir.run(program, *args, ranks=ranks, placement="round-robin", timeout=120)


def _proposal_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.integers(-99, 99, 20).astype(np.int32) for _ in range(3)]


def test_proposal_copies_in_launches_and_copies_out(fake: Fake) -> None:
    a, b, c = _proposal_inputs()
    results = _run(PROPOSAL, a, b, c)
    # The CPU task ran (c = a + b); the fake ran no kernel, so %a came back unchanged
    # from its round trip through device memory.
    np.testing.assert_array_equal(results[2], a + b)
    np.testing.assert_array_equal(results[0], a)
    assert fake.calls("cuMemAlloc_v2") == ["cuMemAlloc_v2 80"] * 2
    assert fake.calls("cuLaunchKernel") == ["cuLaunchKernel task0_kernel0 grid=1x1x1 block=20x1x1"]
    assert len(fake.calls("cuModuleLoadData") + fake.calls("cuModuleLoadDataEx")) == 1
    assert len(fake.calls("cuMemFree_v2")) == 2
    # Only rank 1 runs the GPU task: only it loads the driver.
    assert len(fake.calls("cuInit")) == 1
    (counts,) = fake.counts()
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (2, 1, 1)


CHAIN = """
func.func @main(%a: memref<64xi32>, %b: memref<64xi32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %gpu = dhir.target {arch = "sm_90"}
    %fill = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.for %i = %c0 to %n step %c1 {
        %v = arith.index_cast %i : index to i32
        memref.store %v, %a[%i] : memref<64xi32>
      }
    }
    GPU_TASKS
    %use = dhir.task %cpu, %a, %b attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.for %i = %c0 to %n step %c1 {
        %x = memref.load %a[%i] : memref<64xi32>
        %y = memref.load %b[%i] : memref<64xi32>
        %z = arith.addi %x, %y : i32
        memref.store %z, %b[%i] : memref<64xi32>
      }
    }
  }
  return
}
"""
GPU_TASK = """%g{k} = dhir.task %gpu, %a, %b attributes {{dhir.rank = {rank} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {{
        %x = memref.load %a[%i] : memref<64xi32>
        %y = memref.load %b[%i] : memref<64xi32>
        %z = arith.addi %x, %y : i32
        memref.store %z, %b[%i] : memref<64xi32>
      }}
    }}
    """


def _chain(*ranks: int) -> str:
    tasks = "".join(GPU_TASK.format(k=k, rank=r) for k, r in enumerate(ranks))
    return CHAIN.replace("GPU_TASKS", tasks)


def test_cpu_gpu_cpu_across_two_ranks(fake: Fake) -> None:
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    results = _run(_chain(1), a, b)
    # The kernel did not run: %b made its round trip through rank 1's device, then
    # rank 0 added the %a it filled.
    np.testing.assert_array_equal(results[1], np.arange(64, dtype=np.int32) + 5)
    (counts,) = fake.counts()
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (2, 1, 1)
    assert fake.calls("cuLaunchKernel") == ["cuLaunchKernel task0_kernel0 grid=1x1x1 block=256x1x1"]


def test_gpu_to_gpu_chain_does_not_copy_through_the_host(fake: Fake) -> None:
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    _run(_chain(1, 1, 1), a, b)
    (counts,) = fake.counts()
    # %a and %b go in once before the first task, %b comes out once after the last.
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (2, 1, 3)
    assert counts["allocs"] == counts["frees"] == 2


# The CPU task reads a[n] (line 7) and b[n..n+3] (line 9) before the GPU task on rank 1.
CHECKED = """\
func.func @main(%a: memref<20xi32>, %b: memref<20xi32>, %c: memref<20xi32>, %n: index) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %gpu = dhir.target {arch = "sm_90"}
    %t1 = dhir.task %cpu, %a, %b, %c attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%n] : memref<20xi32>
      memref.store %x, %c[%c0] : memref<20xi32>
      %v = vector.load %b[%n] : memref<20xi32>, vector<4xi32>
      vector.store %v, %c[%c0] : memref<20xi32>, vector<4xi32>
    }
    %t2 = dhir.task %gpu, %c, %a attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c20, %sy = %c1, %sz = %c1) {
        %v = memref.load %c[%tx] : memref<20xi32>
        memref.store %v, %a[%tx] : memref<20xi32>
        gpu.terminator
      }
    }
  }
  return
}
"""


@pytest.mark.parametrize(("n", "line"), [(10, None), (18, 9), (25, 7)])
def test_runtime_checks_check_the_host_code_of_a_gpu_program(
    fake: Fake, tmp_path: Path, n: int, line: int | None
) -> None:
    # The kernel is not checked (device code is lowered before the checks are made),
    # the host code is, as in a program without GPU tasks.
    program = tmp_path / "checked.mlir"
    program.write_text(CHECKED)
    a, b, c = (np.arange(20, dtype=np.int32) for _ in range(3))
    if line is None:
        results = dhir.run(program, a, b, c, np.int64(n), ranks=2, runtime_checks=True)
        np.testing.assert_array_equal(results[2][:4], b[n : n + 4])
        assert len(fake.calls("cuLaunchKernel")) == 1
        return
    with pytest.raises(DhirError) as caught:
        dhir.run(program, a, b, c, np.int64(n), ranks=2, runtime_checks=True)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc is not None and diagnostic.loc.line == line
    assert diagnostic.message.startswith("a runtime check failed: out-of-bounds access;")


def test_ranks_take_the_gpus_of_their_node_by_local_rank(fake: Fake) -> None:
    fake.set("FAKE_CUDA_DEVICES", "2")
    a, b = np.zeros(64, np.int32), np.zeros(64, np.int32)
    _run(_chain(0, 1), a, b)
    assert sorted(fake.calls("cuDeviceGet")) == ["cuDeviceGet 0", "cuDeviceGet 1"]
    # Both ranks used their GPU; %b went from rank 0's device to rank 1's, then to the
    # host for the last task.
    assert sorted((c["d2h"], c["sent"], c["received"]) for c in fake.counts()) == [
        (0, 1, 0),
        (1, 0, 1),
    ]


@pytest.mark.parametrize("how", ["peer", "direct", "staged"])
def test_gpu_tasks_on_two_ranks_send_device_buffers(fake: Fake, how: str) -> None:
    fake.set("DHIR_GPU_MESSAGES", how)
    fake.set("DHIR_GPU_STAGE_BYTES", "100")  # %b's 256 bytes go in three pieces
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    results = _run(_chain(1, 0, 1, 0), a, b)
    # The kernels did not run: %b went 1 -> 0 -> 1 -> 0 device to device, and came out on
    # rank 0 (a lost message would leave a fresh buffer's zeros).
    np.testing.assert_array_equal(results[1], np.arange(64, dtype=np.int32) + 5)
    counts = sorted(fake.counts(), key=lambda c: c["sent"])
    assert [(c["sent"], c["received"]) for c in counts] == [(1, 2), (2, 1)]
    assert [c["d2h"] for c in counts] == [1, 0]  # after the last GPU task, on rank 0
    staged = 2 * 3 * 256 if how == "staged" else 0  # both ends of each message
    assert sum(c["staged"] for c in counts) == staged
    peer = 3 * 256 if how == "peer" else 0  # each receiver copies from the sender's buffer
    assert sum(c["peer"] for c in counts) == peer
    assert len(fake.calls("cuIpcOpenMemHandle_v2")) == (3 if how == "peer" else 0)
    if how == "staged":  # page-locked staging buffers, reused
        assert len(fake.calls("cuMemAllocHost_v2")) == 2


def test_ranks_of_one_node_copy_from_their_peers_by_default(fake: Fake) -> None:
    fake.set("FAKE_CUDA_DEVICES", "2")
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    results = _run(_chain(0, 1), a, b)
    np.testing.assert_array_equal(results[1], np.arange(64, dtype=np.int32) + 5)
    assert sum(c["peer"] for c in fake.counts()) == 256
    assert fake.calls("cuIpcOpenMemHandle_v2") == ["cuIpcOpenMemHandle_v2 256"]
    assert len(fake.calls("cuIpcCloseMemHandle")) == 1


CROSSING = """
func.func @main(%a: memref<64xi32>, %b: memref<64xi32>) {
  dhir.schedule %a, %b {
    %gpu = dhir.target {kind = "gpu"}
    TASKS
  }
  return
}
"""
DOUBLE = """%t{k} = dhir.task %gpu, %{m} attributes {{dhir.rank = {rank} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {{
        %x = memref.load %{m}[%i] : memref<64xi32>
        %y = arith.addi %x, %x : i32
        memref.store %y, %{m}[%i] : memref<64xi32>
      }}
    }}
    """


@pytest.mark.parametrize("how", ["peer", "direct", "staged"])
def test_crossing_device_messages_reach_their_buffers(fake: Fake, how: str) -> None:
    # Rank 0 sends %a, then %b; rank 1 receives %b first: the tags keep them apart.
    fake.set("DHIR_GPU_MESSAGES", how)
    order = [("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    tasks = "".join(DOUBLE.format(k=k, m=m, rank=r) for k, (m, r) in enumerate(order))
    a, b = np.full(64, 1, np.int32), np.full(64, 2, np.int32)
    results = _run(CROSSING.replace("TASKS", tasks), a, b)
    np.testing.assert_array_equal(results[0], a)  # the fake runs no kernel
    np.testing.assert_array_equal(results[1], b)
    assert sum(c["received"] for c in fake.counts()) == 2


@pytest.mark.parametrize("how", ["peer", "staged"])
def test_device_messages_under_openmpi(fake: Fake, how: str) -> None:
    fake.set("DHIR_GPU_MESSAGES", how)
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    results = dhir.run(
        _chain(1, 0), a, b, ranks=2, mpi="openmpi", placement="round-robin", timeout=120
    )
    np.testing.assert_array_equal(results[1], np.arange(64, dtype=np.int32) + 5)
    assert sum(c["received"] for c in fake.counts()) == 1


def test_failing_peer_copy_names_the_call_and_the_task(fake: Fake) -> None:
    fake.set("FAKE_CUDA_FAIL", "cuIpcGetMemHandle")
    with pytest.raises(
        DhirError, match=r'GPU task "g0".*cuIpcGetMemHandle failed.*DHIR_GPU_MESSAGES=staged'
    ):
        _run(_chain(0, 1), np.zeros(64, np.int32), np.zeros(64, np.int32))


def test_unknown_message_policy_is_a_clear_error(fake: Fake) -> None:
    fake.set("DHIR_GPU_MESSAGES", "carrier-pigeon")
    with pytest.raises(DhirError, match="DHIR_GPU_MESSAGES=carrier-pigeon: expected auto, peer"):
        _run(_chain(0, 1), np.zeros(64, np.int32), np.zeros(64, np.int32))


@pytest.mark.parametrize(
    ("name", "value"),
    [("DHIR_GPU_STAGE_BYTES", "4MiB"), ("DHIR_GPU_DEVICE", "abc"), ("DHIR_GPU_DEVICE", "-1")],
)
def test_a_setting_that_is_not_a_whole_number_is_a_clear_error(
    fake: Fake, name: str, value: str
) -> None:
    # atoi and atoll read "4MiB" as 4 bytes and "abc" as device 0.
    fake.set("DHIR_GPU_MESSAGES", "staged")
    fake.set(name, value)
    with pytest.raises(DhirError, match=f"{name}={value}: expected a whole number"):
        _run(_chain(0, 1), np.zeros(64, np.int32), np.zeros(64, np.int32))


def test_no_driver_names_the_gpu_task(fake: Fake) -> None:
    fake.set("DHIR_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    with pytest.raises(DhirError) as error:
        _run(PROPOSAL, *_proposal_inputs())
    message = str(error.value)
    assert re.search(r"GPU task \"task3\" at \S*proposal\.mlir:18:14 needs an NVIDIA GPU", message)
    assert "the CUDA driver cannot be loaded" in message and "--gpu-fallback=cpu" in message


def test_no_device(fake: Fake) -> None:
    fake.set("FAKE_CUDA_DEVICES", "0")
    with pytest.raises(DhirError, match="the CUDA driver sees none on this node"):
        _run(PROPOSAL, *_proposal_inputs())


def test_kernels_for_another_chip_are_a_clear_error(fake: Fake) -> None:
    fake.set("FAKE_CUDA_CC", "80")
    with pytest.raises(DhirError, match=r"cannot be loaded on GPU 0 \(compute capability 8\.0\)"):
        _run(PROPOSAL, *_proposal_inputs())


def test_driver_failure_names_the_call_and_the_task(fake: Fake) -> None:
    fake.set("FAKE_CUDA_FAIL", "cuMemAlloc_v2")
    with pytest.raises(
        DhirError, match=r"GPU task \"task3\" at .*: cuMemAlloc failed on GPU 0: out of memory"
    ):
        _run(PROPOSAL, *_proposal_inputs())


def test_ptx_is_compiled_by_the_driver(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_GPU_FORMAT", "isa")
    _run(PROPOSAL, *_proposal_inputs())
    assert fake.calls("cuModuleLoadDataEx") == ["cuModuleLoadDataEx ptx sm_90"]


def _gpu_tasks_read_what_they_write(program: RandomSchedule) -> RandomSchedule:
    """`program` with each GPU task also reading what it writes. The fake driver runs no
    kernel, so an element a GPU task only writes holds whatever its device buffer held,
    and dhir need not copy it there first (in a time loop it does not): only an element
    the task reads has a value the oracle can know."""
    gpu = {i for i, target in enumerate(program.targets) if target in GPU_ONLY}
    tasks = tuple(
        replace(task, reads=tuple(sorted({*task.reads, *task.writes})))
        if task.target in gpu
        else task
        for task in program.tasks
    )
    return replace(program, tasks=tasks)


def _without_gpu_work(text: str) -> ModuleOp:
    """The program with every GPU task's body emptied: what the fake driver computes,
    since it runs no kernel (data still makes its round trips through device memory)."""
    module = dhir.parse_string(text)
    for task in [t for t in module.walk() if isinstance(t, TaskOp) and is_gpu_task(t)]:
        for op in reversed(list(task.body.block.ops)[:-1]):
            op.detach()
            op.erase()
    return module


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ranked_cases((1, 3), 10, 4, GPU_TARGETS), st.sampled_from(["auto", "peer", "direct", "staged"])
)
def test_random_schedules_move_data_like_the_oracle(
    fake: Fake, case: tuple[int, RandomSchedule, int], how: str
) -> None:
    ranks, random_program, seed = case
    random_program = _gpu_tasks_read_what_they_write(random_program)
    fake.set("DHIR_GPU_MESSAGES", how)
    text = parallel(random_program).text()
    note(f"on {ranks} ranks, messages {how}, the program:\n{text}")
    inputs = random_inputs(random_program, seed)
    oracle = run_interp(_without_gpu_work(text), "main", [a.copy() for a in inputs])
    native = dhir.run(text, *inputs, ranks=ranks, placement="round-robin", timeout=120)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(gpu_cases((2, 3), 8), st.data())
def test_random_schedules_in_a_time_loop_move_data_like_the_oracle(
    fake: Fake, case: tuple[int, RandomSchedule, int], data: st.DataObject
) -> None:
    """Device buffers last every step and the ranks keep their data between steps; so
    do device copies, unless host code in the loop touches the memrefs. The loops are
    scf.for and scf.while loops of each kind (LOOP_KINDS); with GPU tasks only, about
    half of the schedules send device buffers between ranks' GPUs."""
    ranks, random_program, seed = case
    random_program = _gpu_tasks_read_what_they_write(random_program)
    program = parallel(random_program)
    loop = data.draw(time_loops(program))
    text = _in_time_loop(program.text(), loop.steps, loop)
    note(f"on {ranks} ranks, the program:\n{text}")
    inputs = random_inputs(random_program, seed)
    oracle = run_interp(_without_gpu_work(text), "main", [a.copy() for a in inputs])
    native = dhir.run(text, *inputs, ranks=ranks, placement="round-robin", timeout=120)
    for got, want in zip(native, oracle):
        assert got.tobytes() == want.tobytes()


JACOBI = """
func.func @main(%a: memref<256xf64>, %b: memref<256xf64>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %a, %b {
      %gpu = dhir.target {arch = "sm_90"}
      %sweep = dhir.task %gpu, %a, %b RANK {
        %z = arith.constant 1 : index
        %u = arith.constant 1 : index
        %n = arith.constant 255 : index
        %half = arith.constant 0.5 : f64
        scf.parallel (%i) = (%z) to (%n) step (%u) {
          %l = arith.subi %i, %u : index
          %r = arith.addi %i, %u : index
          %x = memref.load %a[%l] : memref<256xf64>
          %y = memref.load %a[%r] : memref<256xf64>
          %s = arith.addf %x, %y : f64
          %m = arith.mulf %s, %half : f64
          memref.store %m, %b[%i] : memref<256xf64>
        }
      }
      %back = dhir.task %gpu, %a, %b RANK {
        %z = arith.constant 1 : index
        %u = arith.constant 1 : index
        %n = arith.constant 255 : index
        scf.parallel (%i) = (%z) to (%n) step (%u) {
          %x = memref.load %b[%i] : memref<256xf64>
          memref.store %x, %a[%i] : memref<256xf64>
        }
      }
    }
    HOST
  }
  return
}
"""
# Host code between steps: reads what the GPU wrote, writes what it reads next.
JACOBI_HOST = """%h0 = arith.constant 7 : index
    %hv = memref.load %b[%h0] : memref<256xf64>
    %hw = arith.addf %hv, %hv : f64
    memref.store %hw, %a[%h0] : memref<256xf64>"""


# Host code between steps that only reads what the GPU wrote.
JACOBI_HOST_READS = """%h0 = arith.constant 7 : index
    %hv = memref.load %b[%h0] : memref<256xf64>"""


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize(
    ("host", "copies"),
    [("", (2, 2)), (JACOBI_HOST_READS, (2, 5 + 2)), (JACOBI_HOST, (10, 10))],
    ids=["no-host", "host-reads", "host-writes"],
)
def test_a_gpu_time_loop_copies_only_where_the_host_touches_its_data(
    fake: Fake, ranks: int, host: str, copies: tuple[int, int]
) -> None:
    """A Jacobi sweep on one GPU (rank 1 of 2: rank 0 writes the results) keeps its
    arrays on the device between steps: in before the first, out after the last. Host
    code in the loop reading %b[7] between steps gets that element out every step, and
    all of %b once after the last (until 2026-12-01, both in and out every step: 10
    and 10; then all of %b every step: 6 out); host code reading and writing them gets
    copies of both every step."""
    text = JACOBI.replace("HOST", host)
    text = text.replace("RANK", f"attributes {{dhir.rank = {ranks - 1} : i64}}")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(256), rng.standard_normal(256)
    steps = np.int64(5)
    oracle = run_interp(_without_gpu_work(text), "main", [a.copy(), b.copy(), steps])
    results = _run(text, a, b, steps, ranks=ranks)  # type: ignore[arg-type]
    for got, want in zip(results, oracle):
        assert got.tobytes() == want.tobytes()
    (counts,) = fake.counts()
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (*copies, 2 * 5)


def _jacobi_while(kind: str, rank: int | None) -> str:
    """The Jacobi sweep's time loop written as an scf.while of `kind` (LOOP_KINDS), its
    tasks on `rank` (placed by dhir-place where None)."""
    where = f"attributes {{dhir.rank = {rank} : i64}}" if rank is not None else ""
    head, rest = JACOBI.replace("RANK", where).split("  scf.for %t = %c0 to %steps step %c1 {\n")
    body, tail = rest.split("    HOST\n  }\n")
    body = body.replace("%c0", "%step0").replace("%c1", "%step1")
    header = "  %step0 = arith.constant 0 : index\n  %step1 = arith.constant 1 : index\n"
    return head + header + "\n".join(_loop_lines(kind, body.splitlines())) + "\n" + tail


@pytest.mark.parametrize("kind", ["counted", "while", "do"])
def test_a_gpu_while_loop_keeps_its_data_on_the_device(fake: Fake, kind: str) -> None:
    """The Jacobi sweep's time loop written as an scf.while: copied in on its first step
    only (a flag the loop carries, or the counter's first value) and out once: on its
    last step where the loop counts as an scf.for (its test on the counter's next
    value), else after the loop (no test tells the last step before the loop's
    condition). Until 2026-12-01, every scf.while copied both arrays in and out every
    step (10 and 10); then the uncounted ones copied out every step (2 and 10)."""
    text = _jacobi_while(kind, None)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(256), rng.standard_normal(256)
    steps = np.int64(5)
    oracle = run_interp(_without_gpu_work(text), "main", [a.copy(), b.copy(), steps])
    results = _run(text, a, b, steps, ranks=1)  # type: ignore[arg-type]
    for got, want in zip(results, oracle):
        assert got.tobytes() == want.tobytes()
    (counts,) = fake.counts()
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (2, 2, 2 * 5)


@pytest.mark.parametrize("kind", ["while", "do"])
@pytest.mark.parametrize("steps", [0, 1, 5])
def test_an_uncounted_while_on_another_rank_copies_out_after_the_loop(
    fake: Fake, kind: str, steps: int
) -> None:
    """On rank 1 of 2 (rank 0 writes the results), the copy out after an scf.while
    that does not count is a task of its own on rank 1, whose host copies then go to
    rank 0; where the loop ran no step (`while`, 0 steps), nothing is copied in or out
    and the inputs come back as they were. (The sweeps' kernels do not run here: the
    arrays make their round trip through device memory.)"""
    text = _jacobi_while(kind, 1)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal(256), rng.standard_normal(256)
    oracle = run_interp(_without_gpu_work(text), "main", [a.copy(), b.copy(), np.int64(steps)])
    results = _run(text, a, b, np.int64(steps), ranks=2)  # type: ignore[arg-type]
    for got, want in zip(results, oracle):
        assert got.tobytes() == want.tobytes()
    runs = max(steps, 1) if kind == "do" else steps
    counts = fake.counts()
    if runs == 0:
        assert counts == [] or (counts[0]["h2d"], counts[0]["d2h"]) == (0, 0)
        return
    ((h2d, d2h, launches),) = [(c["h2d"], c["d2h"], c["launches"]) for c in counts]
    assert (h2d, d2h, launches) == (2, 2, 2 * runs)


@pytest.mark.parametrize("load", ["memref", "affine"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_while_loop_reading_gpu_data_in_its_condition_copies_out_only_that(
    fake: Fake, ranks: int, load: str
) -> None:
    """The loop's condition reads %a[0], which the GPU (the last rank's) writes: that
    element goes out every step, %a and %b once after the loop, both in once. The fake
    runs no kernel, so %a[0] stays 0 and the loop runs its 10 steps. Until 2026-12-01,
    the host load made every step copy both in and out (20 and 20), and on 2 ranks rank
    1 sent both to rank 0 every step: 640 bytes in 20 messages; then all of %a went out
    every step (11 copies out, 352 bytes in 11 messages), and an `affine.load` still
    made every step copy both in and out. Now 104 bytes in 12 messages."""
    text = converging(ranks, load)
    inputs = [np.zeros(8, np.int32), np.zeros(8, np.int32)]
    oracle = run_interp(_without_gpu_work(text), "main", [a.copy() for a in inputs])
    options = RunOptions(ranks=ranks)
    exe, signature = compile_native(dhir.parse_string(text), "main", options, timing=Timing())
    traffic: list[str] = []
    results = run_executable(exe, signature, [a.copy() for a in inputs], options, traffic=traffic)
    for got, want in zip(results, oracle):
        assert got.tobytes() == want.tobytes()
    (counts,) = fake.counts()
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (2, 10 + 2, 10)
    assert counts["d2h_bytes"] == 10 * 4 + 2 * 32
    if ranks == 2:
        assert traffic[1].split(" sent ")[1].split(",")[0] == "104 bytes in 12 messages"


def test_a_device_message_in_a_time_loop_sends_no_host_copy_back(fake: Fake) -> None:
    """Rank 0's GPU sends %a to rank 1's every step, and rank 0's next step uses it
    again: only rank 1's own %b goes to rank 0 (after the loop), with a "done" byte per
    peer copy. The last step's copy out of %a was on rank 1, which made
    dhir-lower-to-mpi send rank 1's host copy of %a to rank 0 every step (for rank 0's
    first-step copy in): 163 bytes in 8 messages from rank 1."""
    fake.set("DHIR_GPU_MESSAGES", "peer")
    inputs = [np.arange(8, dtype=np.int32) * k for k in (1, 2, 3)]
    oracle = run_interp(_without_gpu_work(MESSAGES_IN_A_LOOP), "main", [a.copy() for a in inputs])
    module = dhir.parse_string(MESSAGES_IN_A_LOOP)
    options = RunOptions(ranks=2, placement="round-robin")
    exe, signature = compile_native(module, "main", options, timing=Timing())
    traffic: list[str] = []
    results = run_executable(exe, signature, [a.copy() for a in inputs], options, traffic=traffic)
    for got, want in zip(results, oracle):
        assert got.tobytes() == want.tobytes()
    sent = [line.split(" sent ")[1].split(",")[0] for line in traffic]
    assert sent[1] == "35 bytes in 4 messages"
    assert sorted((c["h2d"], c["d2h"], c["sent"], c["received"]) for c in fake.counts()) == [
        (1, 1, 0, 3),  # rank 1: %b in and out
        (2, 1, 3, 0),  # rank 0: %a and %c in, %a out
    ]


@pytest.mark.parametrize("how", ["peer", "staged", "direct"])
def test_a_halo_exchange_between_two_gpus_sends_only_the_halo(fake: Fake, how: str) -> None:
    """A Jacobi sweep of 16 x 8 f64 cut in two between rank 0's GPU and rank 1's, 5
    steps: each rank copies in 8 rows once (the 9 it reads of %a, 7 of %b it writes),
    out its 7 rows of each once, and sends the other one row (64 bytes) on each step
    but the last; MPI carries those rows and rank 1's results for rank 0, nothing else.
    Until 2026-12-01 (staged): rank 0 copied in 6 times (6,144 bytes), rank 1 out 5
    times (5,120), 15 whole-array device messages (15,360 bytes), and MPI carried
    10,240 bytes from rank 0 and 11,264 from rank 1."""
    fake.set("DHIR_GPU_MESSAGES", how)
    text = halo(16, 8)
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((16, 8)), rng.standard_normal((16, 8)), np.int64(5)]
    oracle = run_interp(_without_gpu_work(text), "main", [np.copy(a) for a in inputs])
    options = RunOptions(ranks=2)
    exe, signature = compile_native(dhir.parse_string(text), "main", options, timing=Timing())
    traffic: list[str] = []
    results = run_executable(exe, signature, [np.copy(a) for a in inputs], options, traffic=traffic)
    for got, want in zip(results, oracle):
        assert got.tobytes() == want.tobytes()
    for counts in fake.counts():
        assert (counts["h2d"], counts["h2d_bytes"], counts["d2h"], counts["d2h_bytes"]) == (
            2,
            (9 + 7) * 64,
            2,
            2 * 7 * 64,
        )
        assert (counts["sent"], counts["sent_bytes"], counts["received_bytes"]) == (4, 256, 256)
    sent = [line.split(" sent ")[1].split(",")[0] for line in traffic]
    if how != "peer":  # a peer copy's handle and "done" go by MPI instead of the rows
        assert sent == ["256 bytes in 4 messages", f"{256 + 2 * 7 * 64} bytes in 6 messages"]


PARTLY_GPU = """
func.func @main(%a: memref<64xi32>, %x: memref<64x8xi32>) {
  dhir.schedule %a, %x {
    %cpu = dhir.target {kind = "cpu"}
    %gpu = dhir.target {arch = "sm_90"}
    %double = dhir.task %gpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %v = memref.load %a[%i] : memref<64xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %a[%i] : memref<64xi32>
      }
    }
    TASKS
  }
  return
}
"""
ROWS = """%rows{r} = dhir.task %cpu, %x attributes {{dhir.rank = {r} : i64}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %lo = arith.constant {lo} : index
      %hi = arith.constant {hi} : index
      %m = arith.constant 8 : index
      scf.for %i = %lo to %hi step %c1 {{
        scf.for %j = %c0 to %m step %c1 {{
          %v = memref.load %x[%i, %j] : memref<64x8xi32>
          %w = arith.muli %v, %v : i32
          memref.store %w, %x[%i, %j] : memref<64x8xi32>
        }}
      }}
    }}
    """


def test_memrefs_no_gpu_task_uses_are_partitioned(fake: Fake) -> None:
    """Each rank holds only its rows of %x; %a, which a GPU task uses, stays whole."""
    tasks = "".join(ROWS.format(r=r, lo=32 * r, hi=32 * r + 32) for r in (0, 1))
    module = dhir.parse_string(PARTLY_GPU.replace("TASKS", tasks))
    timing = Timing()
    exe, signature = compile_native(module, "main", RunOptions(ranks=2), timing=timing)
    memory = [note for note in timing.notes if note.startswith("memory:")]
    assert "memory: %x: partitioned, rank 0 rows 0..31; rank 1 rows 32..63" in memory
    assert any(n.startswith("memory: %a: whole") and "a GPU task uses it" in n for n in memory)
    a = np.arange(64, dtype=np.int32)
    x = np.arange(512, dtype=np.int32).reshape(64, 8)
    got = run_executable(exe, signature, [a, x], RunOptions(ranks=2))
    np.testing.assert_array_equal(got[1], x * x)
    np.testing.assert_array_equal(got[0], a)  # the fake runs no kernel


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_default_placement_places_gpu_tasks_on_local_ranks(fake: Fake, ranks: int) -> None:
    # Without --system every rank may drive the node's GPU, so the cost-driven default
    # places the GPU task; with no driver the run names the task, not the placement.
    a, b, c = _proposal_inputs()
    results = dhir.run(PROPOSAL, a, b, c, ranks=ranks, timeout=120)
    np.testing.assert_array_equal(results[2], a + b)
    (counts,) = fake.counts()
    assert counts["launches"] == 1
    fake.set("DHIR_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    needs = r"GPU task \"task3\" at \S*proposal\.mlir:18:14 needs an NVIDIA"
    with pytest.raises(DhirError, match=needs):
        dhir.run(PROPOSAL, a, b, c, ranks=ranks, timeout=120)


def test_ranks_take_the_gpus_the_machine_description_gives_them(fake: Fake) -> None:
    fake.set("FAKE_CUDA_DEVICES", "2")
    cpu = guess_device("n0.cpu", "x86_64", cores=4)
    gpus = [guess_device(f"n0.gpu{k}", "sm_90") for k in range(2)]
    system = System((Node("n0", (cpu, *gpus)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)
    module = dhir.parse_string(_chain(2, 1))
    attach(module, system)
    a, b = np.zeros(64, np.int32), np.zeros(64, np.int32)
    dhir.run(module, a, b, ranks=3, timeout=120)
    # Rank 1 is n0.gpu0 and rank 2 n0.gpu1; by local rank they would take GPUs 1 and 0.
    stats = fake.stats.read_text()
    assert "rank 1 (device 0)" in stats and "rank 2 (device 1)" in stats, stats


# --- page-locked host memory ----------------------------------------------------------

STEPS = """
func.func @main(%a: memref<SIZExi32>, %b: memref<SIZExi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    LOCAL
    dhir.schedule %a, BUFFER {
      %cpu = dhir.target {kind = "cpu"}
      %gpu = dhir.target {arch = "sm_90"}
      %g = dhir.task %gpu, %a, BUFFER attributes {dhir.rank = 1 : i64} {
        %z = arith.constant 0 : index
        %u = arith.constant 1 : index
        %n = arith.constant SIZE : index
        scf.parallel (%i) = (%z) to (%n) step (%u) {
          %x = memref.load %a[%i] : memref<SIZExi32>
          %y = memref.load BUFFER[%i] : memref<SIZExi32>
          %s = arith.addi %x, %y : i32
          memref.store %s, BUFFER[%i] : memref<SIZExi32>
        }
      }
      %c = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
        %z = arith.constant 0 : index
        %u = arith.constant 1 : index
        %n = arith.constant SIZE : index
        %one = arith.constant 1 : i32
        scf.for %i = %z to %n step %u {
          %x = memref.load %a[%i] : memref<SIZExi32>
          %s = arith.addi %x, %one : i32
          memref.store %s, %a[%i] : memref<SIZExi32>
        }
      }
    }
    DEALLOC
  }
  return
}
"""


def _steps(local: bool, size: int) -> str:
    text = STEPS.replace("SIZE", str(size))
    if not local:
        return text.replace("LOCAL", "").replace("DEALLOC", "").replace("BUFFER", "%b")
    alloc = f"%l = memref.alloc() : memref<{size}xi32>"
    text = text.replace("LOCAL", alloc).replace(
        "DEALLOC", f"memref.dealloc %l : memref<{size}xi32>"
    )
    return text.replace("BUFFER", "%l")


def _run_steps(local: bool = False, steps: int = 3, size: int = 65536) -> list[np.ndarray]:
    a, b = np.arange(size, dtype=np.int32), np.full(size, 7, np.int32)
    results = _run(_steps(local, size), a, b, steps)  # type: ignore[arg-type]
    # The kernel did not run: %a only gained the CPU task's ones, %b came back as it went.
    np.testing.assert_array_equal(results[0], a + steps)
    np.testing.assert_array_equal(results[1], b)
    return results


def test_lasting_host_memrefs_are_locked_once_on_their_second_copy(fake: Fake) -> None:
    _run_steps()
    (counts,) = fake.counts()
    # Rank 1 copies %a in on each of 3 steps (rank 0's CPU task writes it between them),
    # %b in before the first and out after the last (it stays on the device between
    # them); each is locked once, on its second copy.
    assert (counts["h2d"], counts["d2h"]) == (4, 1)
    assert counts["pins"] == 2
    assert fake.calls("cuMemHostRegister_v2") == ["cuMemHostRegister_v2 262144"] * 2
    # Unlocked before the entry returns, so before the harness frees them.
    assert len(fake.calls("cuMemHostUnregister")) == 2


def test_a_single_copy_locks_nothing(fake: Fake) -> None:
    _run_steps(steps=1)
    (counts,) = fake.counts()
    assert counts["pins"] == 1  # %b goes in and comes out; %a only goes in
    assert len(fake.calls("cuMemHostUnregister")) == 1


def test_large_memrefs_are_locked_on_their_first_copy(fake: Fake) -> None:
    size = (64 << 20) // 4  # the runtime's LOCK_AT_ONCE
    _run_steps(steps=1, size=size)
    # %a, copied once, is locked too.
    assert fake.calls("cuMemHostRegister_v2") == [f"cuMemHostRegister_v2 {size * 4}"] * 2


def test_never_locks_nothing(fake: Fake) -> None:
    fake.set("DHIR_GPU_PIN", "never")
    _run_steps()
    assert fake.counts()[0]["pins"] == 0
    assert fake.calls("cuMemHostRegister_v2") == []


def test_allocations_are_locked_only_always_and_unlocked_with_their_buffer(fake: Fake) -> None:
    _run_steps(local=True)
    assert fake.counts()[0]["pins"] == 1  # %a only: %l does not last the run
    fake.log.unlink()
    fake.stats.unlink()
    fake.set("DHIR_GPU_PIN", "always")
    _run_steps(local=True)
    # %a once for the run, %l on each step while its device buffer lives.
    assert fake.counts()[0]["pins"] == 1 + 3
    assert len(fake.calls("cuMemHostUnregister")) == 1 + 3


def test_a_refused_lock_leaves_the_copies_pageable(fake: Fake) -> None:
    fake.set("FAKE_CUDA_FAIL", "cuMemHostRegister_v2")
    _run_steps()
    assert fake.counts()[0]["pins"] == 0
    assert len(fake.calls("cuMemHostRegister_v2")) == 2  # each tried once
    assert fake.calls("cuMemHostUnregister") == []


def test_a_bad_pin_setting_is_a_clear_error(fake: Fake) -> None:
    fake.set("DHIR_GPU_PIN", "sometimes")
    with pytest.raises(DhirError, match="DHIR_GPU_PIN=sometimes: expected auto, always or never"):
        _run_steps()


# --- the trace's GPU track -----------------------------------------------------------


def test_the_trace_shows_what_the_gpu_ran_inside_its_task(fake: Fake, tmp_path: Path) -> None:
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    trace = tmp_path / "trace.json"
    dhir.run(_chain(1), a, b, ranks=2, placement="round-robin", timeout=120, trace=trace)
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
    assert (1, "GPU") in tracks and (0, "GPU") not in tracks
    gpu = [e for e in events if e.get("cat") == "gpu"]
    copies = sorted((e["args"]["direction"], e["args"]["bytes"]) for e in gpu if e["args"])
    assert [e["name"] for e in gpu if not e["args"]] == ["task0_kernel0"]
    assert copies == [("d2h", 256), ("h2d", 256), ("h2d", 256)]
    (task,) = [e for e in events if e.get("cat") == "task" and e["pid"] == 1]
    # The host waits for the GPU before the task ends: its GPU work lies within it.
    for e in gpu:
        assert e["pid"] == 1 and e["tid"] == 3 and e["dur"] >= 0
        assert task["ts"] - 50 <= e["ts"] and e["ts"] + e["dur"] <= task["ts"] + task["dur"] + 50


def test_no_trace_times_nothing_on_the_gpu(fake: Fake) -> None:
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    _run(_chain(1), a, b)
    assert fake.calls("cuEventElapsedTime") == []


@pytest.mark.parametrize("how", ["peer", "staged"])
def test_the_trace_tells_device_messages_from_the_programs(
    fake: Fake, tmp_path: Path, how: str
) -> None:
    # %b goes 1 -> 0 device to device, then to the host; the program's messages of %b
    # (tag 1 too) must not be paired with the device ones.
    fake.set("DHIR_GPU_MESSAGES", how)
    a, b = np.zeros(64, np.int32), np.full(64, 5, np.int32)
    trace = tmp_path / "trace.json"
    dhir.run(_chain(1, 0), a, b, ranks=2, placement="round-robin", timeout=120, trace=trace)
    events = json.loads(trace.read_text())["traceEvents"]
    mpi = [e for e in events if e.get("cat") == "mpi"]
    device = {(e["name"], e["args"]["tag"]) for e in mpi if e["name"].startswith("device ")}
    sent = {("device isend to 0", 1), ("device recv from 1", 1)}
    # The receiver's word back that it has copied, and the sender taking it.
    word = 1 + (1 << 14)
    done = {("device isend to 1", word), ("device word back from 0", word)}
    assert device == sent | (done if how == "peer" else set())
    starts = {e["id"]: e["pid"] for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e["pid"] for e in events if e.get("ph") == "f"}
    assert starts.keys() == ends.keys() and all(starts[k] != ends[k] for k in starts)
    # One arrow per receive that took a message: the program's, the device one, and the
    # word back (from rank 0's isend to rank 1, ending within rank 1's wait that took it).
    receives = [e for e in mpi if "recv from" in e["name"] or "word back" in e["name"]]
    assert len(starts) == len(receives)
    if how == "peer":
        flows = [e for e in events if e.get("cat") == "message"]
        (took,) = [e for e in mpi if "word back" in e["name"]]
        (arrow,) = [e for e in flows if e["ph"] == "f" and e["pid"] == 1 and e["ts"] == took["ts"]]
        (start,) = [e for e in flows if e["ph"] == "s" and e["id"] == arrow["id"]]
        (isend,) = [e for e in mpi if e["name"] == "device isend to 1"]
        assert start["pid"] == 0 and isend["ts"] <= start["ts"] <= isend["ts"] + isend["dur"]
        waits = [e for e in mpi if e["pid"] == 1 and e["name"] == "wait"]
        assert any(w["ts"] <= took["ts"] <= w["ts"] + w["dur"] for w in waits), waits


TALL = """
func.func @main(%a: memref<600000x2xi8>) {
  dhir.schedule %a {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %a attributes {name = "tall"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %n = arith.constant 600000 : index
      %one = arith.constant 1 : i8
      scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c2) step (%c1, %c1) {
        memref.store %one, %a[%i, %j] : memref<600000x2xi8>
      }
    }
  }
  return
}
"""


def test_a_grid_past_cudas_limits_is_a_clear_error(fake: Fake) -> None:
    # 600000 rows in tiles of 8 need 75000 blocks in y; CUDA allows 65535.
    with pytest.raises(DhirError, match=r'"tall".*1 x 75000 x 1 blocks; CUDA allows at most'):
        _run(TALL, np.zeros((600000, 2), np.int8), ranks=1)
    assert fake.calls("cuLaunchKernel") == []
