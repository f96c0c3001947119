"""Ranks on two "hosts" talking over TCP (tests/unit/two_hosts.py): `dhir run --system`
with a two-node description, on MPICH and OpenMPI, against the interpreter. The hosts are
network namespaces where they can be made, else loopback addresses (DHIR_TWO_HOSTS forces
one); a few tests always run on the loopback hosts too, so that way cannot rot."""

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import test_rank_failure as failing
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from strategies import CPU_TARGETS, RandomSchedule, schedules
from two_hosts import (
    Loopback,
    TwoHosts,
    Unavailable,
    opened_for,
    skip_where_it_hangs,
    system_toml,
)

import dhir

EXAMPLES = Path(__file__).parents[2] / "examples"
MPIS = ("mpich", "openmpi")
TIMEOUT = 120  # seconds per run: a hang is a failure, not a stuck test run
HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22"),
]


@pytest.fixture(scope="module")
def hosts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoHosts]:
    """Namespaces where they can be made, else loopback; DHIR_TWO_HOSTS forces one."""
    yield from opened_for(request, tmp_path_factory, None, "")


@pytest.fixture(scope="module")
def loopback(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoHosts]:
    yield from opened_for(request, tmp_path_factory, "loopback", "")


def _run_over(
    hosts: TwoHosts,
    program: Path,
    inputs: list[np.ndarray],
    mpi: str,
    ranks_per_node: int,
    work: Path,
    placement: str = "round-robin",
    timeout: int = TIMEOUT,
) -> list[np.ndarray]:
    """`dhir run PROGRAM --system` on the first host; rank 0's results."""
    system = work / "two.toml"
    system.write_text(system_toml(hosts, ranks_per_node))
    paths = []
    for index, array in enumerate(inputs):
        paths += ["--input", str(work / f"in{index}.npy")]
        np.save(work / f"in{index}.npy", array)
    out = work / "out"
    command = [str(Path(".venv/bin/dhir").absolute()), "run", str(program), "--system"]
    command += [str(system), "--mpi", mpi, "--placement", placement, "--output-dir", str(out)]
    done = hosts.run(
        hosts.hosts[0], [*command, "--timeout", str(timeout), *paths], mpi, timeout + 80
    )
    assert done.returncode == 0, f"dhir run failed:\n{done.stdout}\n{done.stderr}"
    return [np.load(out / f"arg{index}.npy") for index in range(len(inputs))]


def _equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for native, oracle in zip(got, want):
        assert native.dtype == oracle.dtype and native.tobytes() == oracle.tobytes()


def _example_inputs(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    ints = lambda n, t: rng.integers(-1000, 1000, n).astype(t)  # noqa: E731
    return {
        "vector_add": lambda: [ints(20, np.int32), ints(20, np.int32), ints(20, np.int32)],
        "hazards": lambda: [rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)],
        "host_between": lambda: [ints(6, np.int64), ints(6, np.int64)],
    }[name]()


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(
    ("name", "ranks_per_node"),
    [("vector_add", 1), ("hazards", 1), ("host_between", 1), ("vector_add", 2), ("hazards", 2)],
)
def test_examples_over_tcp_equal_the_interpreter(
    hosts: TwoHosts, tmp_path: Path, name: str, ranks_per_node: int, mpi: str
) -> None:
    skip_where_it_hangs(hosts, mpi)
    program = EXAMPLES / f"{name}.mlir"
    inputs = _example_inputs(name, np.random.default_rng(ranks_per_node))
    oracle = dhir.run(program, *inputs, backend="interp")
    _equal(_run_over(hosts, program, inputs, mpi, ranks_per_node, tmp_path), oracle)


# The second task runs on the other host, so the array crosses the link there and back.
ACROSS = """
func.func @main(%a: memref<262144xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %add = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 262144 : index
      %one = arith.constant 1.0 : f32
      scf.for %i = %c0 to %n step %c1 {
        %x = memref.load %a[%i] : memref<262144xf32>
        %y = arith.addf %x, %one : f32
        memref.store %y, %a[%i] : memref<262144xf32>
      }
    }
    %double = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 262144 : index
      %two = arith.constant 2.0 : f32
      scf.for %i = %c0 to %n step %c1 {
        %x = memref.load %a[%i] : memref<262144xf32>
        %y = arith.mulf %x, %two : f32
        memref.store %y, %a[%i] : memref<262144xf32>
      }
    }
  }
  return
}
"""


def _check_the_link_carries_the_array(
    hosts: TwoHosts, work: Path, mpi: str, timeout: int = TIMEOUT
) -> None:
    # Over shared memory, or with both ranks on one host, the link would carry only the
    # launchers' few kilobytes, not the 1 MiB array each way.
    program = work / "across.mlir"
    program.write_text(ACROSS)
    a = np.random.default_rng(7).standard_normal(262144).astype(np.float32)
    try:
        sent, received = hosts.link_bytes()
    except Unavailable as error:
        pytest.skip(str(error))
    results = _run_over(hosts, program, [a], mpi, 1, work, "heft", timeout)
    sent_now, received_now = hosts.link_bytes()
    _equal(results, [(a + np.float32(1)) * np.float32(2)])
    assert sent_now - sent >= a.nbytes
    assert received_now - received >= a.nbytes


@pytest.mark.parametrize("mpi", MPIS)
def test_messages_between_hosts_cross_the_link(hosts: TwoHosts, tmp_path: Path, mpi: str) -> None:
    skip_where_it_hangs(hosts, mpi)
    _check_the_link_carries_the_array(hosts, tmp_path, mpi)


# The loopback hosts, whatever DHIR_TWO_HOSTS says: one example and the link check per MPI.
@pytest.mark.parametrize("mpi", MPIS)
def test_an_example_over_loopback_equals_the_interpreter(
    loopback: TwoHosts, tmp_path: Path, mpi: str
) -> None:
    skip_where_it_hangs(loopback, mpi)
    program = EXAMPLES / "hazards.mlir"
    inputs = _example_inputs("hazards", np.random.default_rng(3))
    oracle = dhir.run(program, *inputs, backend="interp")
    _equal(_run_over(loopback, program, inputs, mpi, 2, tmp_path), oracle)


@pytest.mark.parametrize(
    "mpi",
    [
        "mpich",
        pytest.param(
            "openmpi",
            marks=pytest.mark.xfail(
                strict=True,
                reason="OpenMPI over loopback hosts hangs on a 1 MiB message between them "
                "(ob1/TCP, UCX alike); over namespaces it does not",
            ),
        ),
    ],
)
def test_messages_over_loopback_cross_tcp(loopback: TwoHosts, tmp_path: Path, mpi: str) -> None:
    _check_the_link_carries_the_array(loopback, tmp_path, mpi, timeout=20)


def _random_inputs(program: RandomSchedule, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-50, 50, program.size).astype(np.int32) for _ in range(program.buffers)]


@settings(
    max_examples=50 if HEAVY else 5,
    derandomize=not HEAVY,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    st.sampled_from([1, 2]).flatmap(
        lambda per_node: st.tuples(
            st.just(per_node),
            schedules(max_tasks=12, max_buffers=4, targets=CPU_TARGETS, ranks=2 * per_node),
            st.integers(0, 2**16),
        )
    )
)
@pytest.mark.parametrize("mpi", MPIS)
def test_random_schedules_over_tcp_equal_the_interpreter(
    hosts: TwoHosts, tmp_path: Path, mpi: str, case: tuple[int, RandomSchedule, int]
) -> None:
    skip_where_it_hangs(hosts, mpi)
    per_node, program, seed = case
    note(f"{per_node} ranks per host with {mpi}, the program:\n{program.text()}")
    inputs = _random_inputs(program, seed)
    oracle = dhir.run(program.text(), *inputs, backend="interp")
    work = tmp_path / f"case-{seed}-{per_node}"
    work.mkdir(exist_ok=True)
    source = work / "program.mlir"
    source.write_text(program.text())
    _equal(_run_over(hosts, source, inputs, mpi, per_node, work, placement="heft"), oracle)


def _start_failing(
    hosts: TwoHosts, mpi: str, mode: int, arg: int, work: Path, marker: str
) -> subprocess.Popen[str]:
    """`dhir run` of rank_failure.mlir on the first host, rank 1 on the second; every
    process it starts inherits `marker`."""
    system = work / "two.toml"
    system.write_text(system_toml(hosts, 1))
    np.save(work / "a.npy", np.zeros(4, np.int32))
    command = [str(Path(".venv/bin/dhir").absolute()), "run", str(failing.PROGRAM)]
    command += ["--system", str(system), "--mpi", mpi, "--input", str(work / "a.npy")]
    command += ["--input", f"i32={mode}", "--input", f"i32={arg}", "--timeout", "120"]
    command += ["--output-dir", str(work / "out")]
    return hosts.start(hosts.hosts[0], command, mpi, {"FAILURE_TEST_MARKER": marker})


def _check_failed(
    hosts: TwoHosts, run: subprocess.Popen[str], since: float, marker: str, work: Path
) -> str:
    """As test_rank_failure.check_failed, and nothing is left running on either host."""
    try:
        stderr = failing.check_failed(run, since, marker, work)
    finally:
        run.kill()
        run.wait()
    for host in hosts.hosts:
        assert not hosts.pids(host), f"processes are left on {host}"
    return stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_a_rank_killed_on_the_second_host(hosts: TwoHosts, tmp_path: Path, mpi: str) -> None:
    skip_where_it_hangs(hosts, mpi)
    marker = uuid.uuid4().hex
    run = _start_failing(hosts, mpi, failing.SLEEP, 100, tmp_path, marker)
    try:
        pid = failing.rank_in_task(marker, 1, time.monotonic() + TIMEOUT)
        assert pid in hosts.pids(hosts.hosts[1]) or isinstance(hosts, Loopback)
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
    except BaseException:
        run.kill()
        run.wait()
        raise
    stderr = _check_failed(hosts, run, killed, marker, tmp_path)
    assert f"rank 1 died while running {failing.DIES}" in stderr
    # OpenMPI's rank 0 often fails first (its socket to rank 1 closed): then prterun
    # reports that abort, and no MPI says which signal rank 1 died of.
    assert "SIGKILL" in stderr or mpi == "openmpi"


@pytest.mark.parametrize("mpi", MPIS)
def test_a_rank_that_aborts_on_the_second_host(hosts: TwoHosts, tmp_path: Path, mpi: str) -> None:
    skip_where_it_hangs(hosts, mpi)
    marker = uuid.uuid4().hex
    began = time.monotonic()
    run = _start_failing(hosts, mpi, failing.ABORT, 0, tmp_path, marker)
    stderr = _check_failed(hosts, run, began, marker, tmp_path)
    assert f"rank 1 died while running {failing.DIES}" in stderr
    assert "SIGABRT" in stderr
