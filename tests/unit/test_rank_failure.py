"""A rank that dies mid-run, killed from outside (SIGKILL) or crashing: `dhir run` (and
the Python API) fails within seconds, naming the rank and the task it was running, and
leaves neither processes nor results behind. On both MPIs."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from test_toolchain import need
from xdsl.dialects import func

import dhir
from dhir.api import parse_file, run_pipeline
from dhir.ir.diagnostics import DhirError
from dhir.toolchain.failure import RankState, explain, first_dead, read_states
from dhir.transforms.track_tasks import task_table

PROGRAM = Path(__file__).parent / "data" / "rank_failure.mlir"
# The task on rank 1 (the `%dies` task, line 15), as `dhir schedule` names it.
DIES = f"task dies at {PROGRAM}:15:13"
MPIS = ("mpich", "openmpi")
# The rank number each MPI gives its processes in their environment.
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")
SLEEP, ABORT, DIVIDE, EXIT = 1, 2, 3, 4


def start(mpi: str, mode: int, arg: int, tmp_path: Path, marker: str) -> subprocess.Popen[str]:
    """`dhir run` of the program on 2 ranks; every process it starts inherits `marker`."""
    np.save(tmp_path / "a.npy", np.zeros(4, np.int32))
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(PROGRAM), "-n", "2"]
    command += ["--mpi", mpi, "--input", str(tmp_path / "a.npy")]
    command += ["--input", f"i32={mode}", "--input", f"i32={arg}", "--timeout", "120"]
    command += ["--output-dir", str(tmp_path / "out")]
    return launch(command, marker)


def start_api(mpi: str, mode: int, arg: int, tmp_path: Path, marker: str) -> subprocess.Popen[str]:
    """The same run through `dhir.run`, in a Python process of its own."""
    script = (
        "import sys, numpy as np, dhir\nfrom pathlib import Path\n"
        "a = np.zeros(4, np.int32)\n"
        "dhir.run(sys.argv[1], a, np.int32(int(sys.argv[3])), np.int32(int(sys.argv[4])),\n"
        "         ranks=2, mpi=sys.argv[2], timeout=120, output_dir=Path(sys.argv[5]))\n"
    )
    command = [sys.executable, "-c", script, str(PROGRAM), mpi, str(mode), str(arg)]
    return launch([*command, str(tmp_path / "out")], marker)


def launch(command: list[str], marker: str) -> subprocess.Popen[str]:
    env = dict(os.environ, FAILURE_TEST_MARKER=marker)
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def environment(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, _, value in pairs}


def marked(marker: str) -> list[int]:
    """Live processes (not zombies) that carry `marker`: mpirun, its proxies, the ranks."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if environment(int(entry.name)).get("FAILURE_TEST_MARKER") != marker:
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def rank_in_task(marker: str, rank: int, deadline: float) -> int:
    """The pid of `rank` once its state file says it is running the task that sleeps."""
    while time.monotonic() < deadline:
        for pid in marked(marker):
            env = environment(pid)
            if not any(env.get(name) == str(rank) for name in RANK_VARIABLES):
                continue
            states = read_states(Path(env.get("DHIR_STATE_DIR", "/nonexistent")))
            if rank in states and states[rank].pid == pid:
                if states[rank].doing() == f"running {DIES}":
                    return pid
        time.sleep(0.05)
    raise AssertionError(f"rank {rank} never started the task that sleeps")


# Well before the runs' --timeout (120 s) and the sleeping task's 100 s: a run that
# waited for either would not have seen the death or the signal. About 2 s on a quiet machine; up to 14 s measured under a load of 20 on two
# vCPUs, so the bound is not tighter.
FAILS_WITHIN = 45


def check_failed(run: subprocess.Popen[str], since: float, marker: str, tmp_path: Path) -> str:
    """The run's error output, once it has failed within FAILS_WITHIN seconds of `since`
    and left no process and no result behind."""
    _, stderr = run.communicate(timeout=100)
    elapsed = time.monotonic() - since
    assert run.returncode != 0, stderr
    assert elapsed < FAILS_WITHIN, f"the run took {elapsed:.1f} s to fail"
    assert "Traceback" not in stderr
    assert not marked(marker), "processes of the run are left"
    out = tmp_path / "out"
    assert not out.exists() or not list(out.iterdir()), "a failed run wrote results"
    return stderr


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_a_rank_killed_from_outside(mpi: str, tmp_path: Path) -> None:
    need(mpi)
    marker = uuid.uuid4().hex
    run = start(mpi, SLEEP, 100, tmp_path, marker)
    try:
        pid = rank_in_task(marker, 1, time.monotonic() + 120)
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        stderr = check_failed(run, killed, marker, tmp_path)
    finally:
        run.kill()
        run.wait()
    assert f"rank 1 died while running {DIES}" in stderr
    assert "SIGKILL" in stderr
    assert "rank 0 was in a receive (dhir_rt_recv) with rank 1" in stderr


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(
    ("mode", "arg", "how"),
    [
        (ABORT, 0, "SIGABRT"),
        (DIVIDE, 0, "SIGFPE"),
        (EXIT, 3, "exited with status 3"),
        (EXIT, 0, "exited with status 0"),  # MPICH's mpirun took it as success
    ],
    ids=["abort", "divide-by-zero", "exit-3", "exit-0"],
)
def test_a_rank_that_crashes_mid_run(
    mpi: str, mode: int, arg: int, how: str, tmp_path: Path
) -> None:
    need(mpi)
    marker = uuid.uuid4().hex
    began = time.monotonic()
    run = start(mpi, mode, arg, tmp_path, marker)
    try:
        stderr = check_failed(run, began, marker, tmp_path)
    finally:
        run.kill()
        run.wait()
    assert f"rank 1 died while running {DIES}" in stderr
    assert how in stderr


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("how", ["cli", "api"])
def test_a_run_ended_by_a_signal_leaves_nothing(
    mpi: str, signum: signal.Signals, how: str, tmp_path: Path
) -> None:
    # What `timeout`, `scancel` and Slurm's time limit (SIGTERM) or a closed terminal
    # (SIGHUP) do: every process of the run ends, its directory goes, no result is written.
    need(mpi)
    marker = uuid.uuid4().hex
    run = (start if how == "cli" else start_api)(mpi, SLEEP, 100, tmp_path, marker)
    try:
        pid = rank_in_task(marker, 1, time.monotonic() + 120)
        work = Path(environment(pid)["DHIR_STATE_DIR"]).parent
        assert work.name.startswith("dhir-run-") and work.is_dir()
        sent = time.monotonic()
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=60)
        elapsed = time.monotonic() - sent
    finally:
        run.kill()
        run.wait()
    left = marked(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "processes of the run are left"
    assert not work.exists(), f"the run directory {work} is left"
    out = tmp_path / "out"
    assert not out.exists() or not list(out.iterdir()), "an ended run wrote results"
    assert elapsed < FAILS_WITHIN, f"the run took {elapsed:.1f} s to end"
    assert "Traceback" not in stderr
    # The CLI exits as shells report a command a signal ended; the API's process dies of it.
    assert run.returncode == (128 + signum if how == "cli" else -signum), stderr


# Within this of dhir's death every process of the run is gone: about 0.1 s on a quiet
# machine (the watchdog wakes at once); generous for a loaded one.
REAPED_WITHIN = 20


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("mpi", MPIS)
def test_a_run_whose_dhir_is_killed_leaves_nothing(mpi: str, tmp_path: Path) -> None:
    # The OOM killer, `kill -9` or a CI job's hard stop: no handler of dhir's runs, yet
    # mpirun, its proxies and the ranks (rank 0 waits on rank 1 for good) must not
    # outlive it, nor the run's folder.
    need(mpi)
    marker = uuid.uuid4().hex
    run = start(mpi, SLEEP, 100, tmp_path, marker)
    try:
        pid = rank_in_task(marker, 1, time.monotonic() + 120)
        work = Path(environment(pid)["DHIR_STATE_DIR"]).parent
        run.kill()
        run.wait()
        deadline = time.monotonic() + REAPED_WITHIN
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        run.kill()
        run.communicate()
    left = marked(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "processes of the run outlived dhir"
    while work.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not work.exists(), f"the run directory {work} is left"


# The launcher called directly, as a program or a test does (not through dhir.run).
_DIRECT = """
import sys
from pathlib import Path
import numpy as np
from dhir.api import parse_file
from dhir.backends.native import compile_native
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions
options = RunOptions(ranks=2, mpi=sys.argv[2], timeout=120)
exe, signature = compile_native(parse_file(Path(sys.argv[1])), "main", options)
args = [np.zeros(4, np.int32), np.int32(int(sys.argv[3])), np.int32(int(sys.argv[4]))]
run_executable(exe, signature, args, options)
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_signal_to_a_direct_caller_leaves_nothing(tmp_path: Path) -> None:
    """run_executable called by a program that handles no SIGTERM: the program died of
    it at once, leaving mpirun and the ranks running and the run's folder behind."""
    need("mpich")
    marker = uuid.uuid4().hex
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, "-c", _DIRECT, str(PROGRAM), "mpich", str(SLEEP), "100"]
    run = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, FAILURE_TEST_MARKER=marker, TMPDIR=str(scratch)),
    )
    try:
        rank_in_task(marker, 1, time.monotonic() + 120)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
        run.wait()
    left = marked(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "processes of the run are left"
    assert not list(scratch.iterdir()), "the run's temporary folder is left"
    assert run.returncode == -signal.SIGTERM, stderr


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("how", ["timeout", "crash"])
def test_a_timed_out_or_failed_run_leaves_no_temporary_folder(tmp_path: Path, how: str) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    np.save(tmp_path / "a.npy", np.zeros(4, np.int32))
    mode = ["--input", "i32=1", "--input", "i32=100", "--timeout", "2"]
    if how == "crash":
        mode = ["--input", f"i32={ABORT}", "--input", "i32=0"]
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(PROGRAM), "-n", "2"]
    command += ["--input", str(tmp_path / "a.npy"), *mode]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TMPDIR=str(scratch)),
    )
    assert done.returncode == 1, done.stderr
    assert ("timed out" if how == "timeout" else "SIGABRT") in done.stderr
    assert not list(scratch.iterdir()), "the run's temporary folder is left"


@pytest.mark.mlir
@pytest.mark.mpi
def test_the_python_api_names_the_task(tmp_path: Path) -> None:
    need("mpich")
    a = np.zeros(4, np.int32)
    with pytest.raises(DhirError, match=f"rank 1 died while running {DIES}"):
        dhir.run(PROGRAM, a, np.int32(DIVIDE), np.int32(0), ranks=2, output_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
    # The same program, when no rank dies, runs to the end.
    result = dhir.run(PROGRAM, a, np.int32(0), np.int32(0), ranks=2, output_dir=tmp_path)
    assert result[0].tolist() == [1, 2, 3, 0]


def test_track_tasks_numbers_tasks_as_their_names() -> None:
    module = parse_file(PROGRAM)
    run_pipeline(module, "dhir-track-tasks,dhir-track-tasks")  # a second run adds nothing
    calls = [op.callee.string_value() for op in module.walk() if isinstance(op, func.CallOp)]
    assert calls.count("dhir_rt_task_enter") == 3 and calls.count("dhir_rt_task_leave") == 3
    table = task_table(module)
    assert [line.split("\t")[0] for line in table] == ["first", "dies", "last"]
    assert table[1].split("\t")[1] == f"{PROGRAM}:15:13"
    assert "dhir.task_table" not in module.attributes


def state(rank: int, pid: int) -> RankState:
    return RankState(rank, pid, 1, 0, 0, -1, ("main.schedule0.task0\tf.mlir:3:5",))


@pytest.mark.parametrize(
    ("log", "dead"),
    [
        ("=   PID 202 RUNNING AT vm\n=   EXIT CODE: 9", 2),  # MPICH names the pid
        ("prterun noticed that process rank 1 with PID 201 on node vm exited on", 1),
        ("", 0),  # neither: the first rank seen gone
    ],
    ids=["mpich", "openmpi", "vanished"],
)
def test_the_dead_rank_from_what_the_mpi_says(log: str, dead: int) -> None:
    states = {r: state(r, 200 + r) for r in range(3)}
    assert first_dead("", log, [0, 2], states) == dead
    assert first_dead("dhir: error on rank 2: the rank died", log, [0], states) == 2
    first, others = explain(states, dead)
    assert first == f"rank {dead} died while running task main.schedule0.task0 at f.mlir:3:5"
    assert len(others) == 2


def test_a_rank_that_lost_its_peer_names_the_peer() -> None:
    # Over TCP rank 0, in a receive from rank 1, fails first when rank 1 is killed.
    waiting = RankState(0, 200, 3, 0, 1, 1, ("main.schedule0.task0\tf.mlir:3:5",))
    states = {0: waiting, 1: state(1, 201)}
    aborted = "An error occurred in Socket closed\nexited due to process rank 0 with PID 0 on node h calling"
    assert first_dead("", aborted, [0, 1], states) == 1
    assert first_dead("", aborted.replace("Socket closed", "MPI_Recv"), [0, 1], states) == 0
    assert first_dead("", "", [1, 0], states) == 1
    # mpirun ended both before the launcher looked, and MPICH named the waiting rank.
    assert first_dead("", "PID 200 RUNNING AT h\n", [], states) == 1
    assert first_dead("", "PID 200 RUNNING AT h\n", [0], states) == 0
    first, _ = explain({0: waiting}, 1)
    assert first == "rank 1 died before it told where it was (no state file)"


def test_a_rank_past_its_messages_without_tasks_is_not_starting() -> None:
    table = ("main.schedule0.task0\tf.mlir:3:5",)
    passed = RankState(0, 200, 2, -1, 4, 1, table)  # had a broadcast, runs no task
    assert passed.doing() == "in host code, past its first messages, before its first task"
    root = RankState(1, 201, 3, 0, 4, 1, table)  # in its own broadcast, as the root
    assert root.doing().startswith("in a broadcast (dhir_rt_bcast) as its root, after task")
    assert root.waiting_on() is None
    assert RankState(0, 200, 3, -1, 4, 1, table).waiting_on() == 1


def test_a_rank_the_table_gives_no_task_is_said_to_have_none() -> None:
    """A rank with no task (more ranks than tasks) was said to be "before its first task"."""
    table = ("t0\tf.mlir:3:5\tmain.schedule0\tcpu\t1", "t1\tf.mlir:4:5\tmain.schedule0\tcpu\t1")
    assert RankState(0, 200, 2, -1, 4, 1, table).doing() == (
        "in host code, past its first messages, with no task of its own"
    )
    assert RankState(2, 202, 3, -1, 6, -1, table).doing() == (
        "in a barrier (dhir_rt_barrier), with no task of its own"
    )
    assert RankState(1, 201, 3, -1, 5, 0, table).doing().endswith(", before its first task")
    assert RankState(1, 201, 3, 1, 5, 0, table).doing().endswith(", after task t1 at f.mlir:4:5")


HOST_DIVIDES = """func.func @main(%a: memref<4xi32>, %d: i32) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 5 : i32
      memref.store %v, %a[%c0] : memref<4xi32>
    }
  }
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xi32>
  %q = arith.divsi %x, %d : i32
  memref.store %q, %a[%c0] : memref<4xi32>
  return
}
"""


def test_a_rank_that_ran_no_task_dies_in_host_code_after_its_messages() -> None:
    need("mpich")
    module = dhir.parse_string(HOST_DIVIDES, "p.mlir")
    with pytest.raises(DhirError) as caught:
        dhir.run(module, np.zeros(4, np.int32), np.int32(0), ranks=2, timeout=120)
    message = str(caught.value)
    # Its task is rank 1's: rank 0 has none to be before.
    died = "rank 0 died while in host code, past its first messages, with no task of its own;"
    assert died in message, message
