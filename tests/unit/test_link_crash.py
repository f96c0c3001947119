"""Linked code that crashes, ends its process or never returns, called from the interpreter:
it runs in a child process (dhir.backends.interp.apart), whose death is reported with the
function, the task and the signal, as the native backend reports a rank's, and no results."""

import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.ir.diagnostics import DhirError

DATA = Path(__file__).parent / "data" / "link"
# Declares sum_plain (a memref's fields in, f64 out) called in task %t0 at 9:5, and twice.
SCALARS = DATA / "scalars.mlir"
AT_T0 = r"scalars.mlir:10:12: .*the call of @sum_plain in task t0 at \S*scalars.mlir:9:11"

BODIES = {
    "segfault": "volatile double *p = 0; return *p;",
    "sigfpe": "volatile int zero = 0; return 1 / zero;",
    "abort": "abort();",
    "exit": "exit(3);",
    "spin": 'printf("spinning %d\\n", getpid()); fflush(stdout); for (;;) {}',
    "sum": "double t = 0; for (int64_t i = 0; i < n; i++) t += b[off + i * s]; return t;",
}
SIGNALS = {"segfault": "SIGSEGV (signal 11)", "sigfpe": "SIGFPE (signal 8)"}
SIGNALS["abort"] = "SIGABRT (signal 6)"
# x86-64 traps an integer division by zero; AArch64 returns 0.
TRAPS_DIVISION = platform.machine() in ("x86_64", "AMD64")


def kernel(folder: Path, name: str) -> Path:
    """An object defining scalars.mlir's functions, sum_plain doing BODIES[name]."""
    source = f"""#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
double sum_plain(double *a, double *b, int64_t off, int64_t n, int64_t s) {{ {BODIES[name]} }}
int twice(int x) {{ return 2 * x; }}
"""
    c_file = folder / f"{name}.c"
    c_file.write_text(source)
    obj = c_file.with_suffix(".o")
    subprocess.run(["clang-22", "-O0", "-fPIC", "-c", c_file, "-o", obj], check=True)
    return obj


def inputs() -> list[np.ndarray]:
    return [np.arange(16, dtype=np.float64), np.zeros(1), np.array([-21], np.int32)]


def dhir_run(*words: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dhir.cli.main", "run", *map(str, words)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.mlir
@pytest.mark.parametrize(
    "crash",
    [
        "segfault",
        pytest.param("sigfpe", marks=pytest.mark.skipif(not TRAPS_DIVISION, reason="no trap")),
        "abort",
    ],
)
def test_a_crash_in_linked_code_names_the_call_the_task_and_the_signal(
    tmp_path: Path, crash: str
) -> None:
    """It used to kill dhir's own process without a word (`dhir run` died of the
    signal, `dhir.run` took its caller with it)."""
    obj = kernel(tmp_path, crash)
    args = inputs()
    with pytest.raises(DhirError, match=f"{AT_T0} died of {re.escape(SIGNALS[crash])}") as failed:
        dhir.run(str(SCALARS), *args, backend="interp", link=[obj])
    assert "wrote no results" in str(failed.value)
    assert_equal(args, inputs())  # the caller's arrays are untouched
    # This process lives on, and a run of code that works still gives its results.
    fine = dhir.run(str(SCALARS), *args, backend="interp", link=[kernel(tmp_path, "sum")])
    assert fine[1][0] == 120.0 and fine[2][0] == -42


@pytest.mark.mlir
def test_the_command_line_fails_with_status_1_and_writes_no_results(tmp_path: Path) -> None:
    files: list[str | Path] = []
    for k, array in enumerate(inputs()):
        np.save(tmp_path / f"in{k}.npy", array)
        files += ["--input", tmp_path / f"in{k}.npy"]
    out = tmp_path / "out"
    common = [SCALARS, "--backend", "interp", *files, "--output-dir", out]
    done = dhir_run(*common, "--link", kernel(tmp_path, "sum"))
    assert done.returncode == 0, done.stderr
    assert np.load(out / "arg1.npy")[0] == 120.0
    failed = dhir_run(*common, "--link", kernel(tmp_path, "segfault"))
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr and "Fatal Python error" not in failed.stderr
    assert "@sum_plain in task t0" in failed.stderr and "SIGSEGV (signal 11)" in failed.stderr
    assert sorted(out.iterdir()) == []  # the earlier results are gone, no new ones


@pytest.mark.mlir
def test_linked_code_that_ends_its_process_is_reported(tmp_path: Path) -> None:
    obj = kernel(tmp_path, "exit")
    message = f"{AT_T0} ended with exit status 3 .linked code ended its process."
    with pytest.raises(DhirError, match=message):
        dhir.run(str(SCALARS), *inputs(), backend="interp", link=[obj])


CALLED_FROM_A_FUNCTION = """
func.func private @sum_plain(memref<16xf64>) -> f64
func.func @helper(%b: memref<16xf64>) -> f64 {
  %s = func.call @sum_plain(%b) : (memref<16xf64>) -> f64
  return %s : f64
}
func.func @main(%b: memref<16xf64>, %out: memref<1xf64>, %n: memref<1xi32>) {
  dhir.schedule %b, %out {
    %cpu = dhir.target {kind = "cpu"}
    %sums = dhir.task %cpu, %b, %out {
      %s = func.call @helper(%b) : (memref<16xf64>) -> f64
      %c0 = arith.constant 0 : index
      memref.store %s, %out[%c0] : memref<1xf64>
    }
  }
  return
}
"""


@pytest.mark.mlir
def test_a_call_in_a_function_a_task_calls_names_that_task(tmp_path: Path) -> None:
    obj = kernel(tmp_path, "segfault")
    program = dhir.parse_string(CALLED_FROM_A_FUNCTION, "helper.mlir")
    message = r"helper.mlir:4:8: .*@sum_plain in task sums at helper.mlir:10:13 died of SIGSEGV"
    with pytest.raises(DhirError, match=message):
        dhir.run(program, *inputs(), backend="interp", link=[obj])


ARMS = """
func.func private @arm()
func.func @main(%x: memref<1xi64>) {
  dhir.schedule %x {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %x {
      func.call @arm() : () -> ()
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 100000000 : index
      %one = arith.constant 1 : i64
      scf.for %i = %c0 to %n step %c1 {
        %v = memref.load %x[%c0] : memref<1xi64>
        %w = arith.addi %v, %one : i64
        memref.store %w, %x[%c0] : memref<1xi64>
      }
    }
  }
  return
}
"""
# A thread that kills its process a moment after @arm returned: code that did harm
# outside its call (as one writing memory it was not passed may).
ARM_C = """#include <pthread.h>
#include <signal.h>
#include <unistd.h>
static void *later(void *unused) { usleep(200000); kill(getpid(), SIGSEGV); return unused; }
void arm(void) { pthread_t thread; pthread_create(&thread, 0, later, 0); }
"""


@pytest.mark.mlir
def test_a_death_after_the_call_returned_names_that_call(tmp_path: Path) -> None:
    (tmp_path / "arm.c").write_text(ARM_C)
    obj = tmp_path / "arm.o"
    subprocess.run(["clang-22", "-fPIC", "-c", tmp_path / "arm.c", "-o", obj], check=True)
    program = dhir.parse_string(ARMS, "arms.mlir")
    message = r"arms.mlir:7:7: .*died of SIGSEGV \(signal 11\) after the call of @arm in task t"
    with pytest.raises(DhirError, match=message + r" at arms.mlir:6:10 returned"):
        dhir.run(program, np.zeros(1, np.int64), backend="interp", link=[obj], timeout=60)


@pytest.mark.mlir
@pytest.mark.slow
def test_linked_code_that_never_returns_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    """Natively the rank is killed at the timeout; the interpreter, which checks it between
    ops, never got back from the call (and SIGTERM could not stop it either)."""
    with spinning(tmp_path, "--timeout", "1") as running:
        _, stderr = running.communicate(timeout=60)
    assert running.returncode == 1, stderr
    message = r"scalars.mlir:10:12: .*timed out after 1 s in the call of @sum_plain in task t0"
    assert re.search(message + ".*which had not returned", stderr), stderr
    assert "Traceback" not in stderr


@pytest.mark.mlir
def test_ctrl_c_stops_linked_code_that_never_returns(tmp_path: Path) -> None:
    """`interrupted`, 130, as for any run; the process running the call is gone."""
    with spinning(tmp_path) as running:
        assert running.stdout is not None
        line = running.stdout.readline()  # the call has started
        assert line.startswith("spinning"), running.communicate()
        os.killpg(running.pid, signal.SIGINT)  # as Ctrl-C sends it, to the whole group
        _, stderr = running.communicate(timeout=30)
    assert running.returncode == 130 and stderr.strip() == "interrupted", stderr
    assert _is_gone(int(line.split()[1]))


@pytest.mark.mlir
def test_linked_code_dies_with_a_dhir_killed_outright(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, `kill -9`) runs no clean-up of dhir's: the process running
    the call must not spin on without it (it dies of its parent's death, apart.py)."""
    with spinning(tmp_path) as running:
        assert running.stdout is not None
        line = running.stdout.readline()  # the call has started
        assert line.startswith("spinning"), running.communicate()
        running.send_signal(signal.SIGKILL)  # to dhir's process alone, as `kill -9` sends it
        running.wait()
        assert _is_gone(int(line.split()[1]), zombies=True)


# The interpreter called directly, as a program or a test does (not through dhir.run).
_DIRECT = """
import sys
import numpy as np
from dhir.api import parse_file
from dhir.backends.interp import run_interp
from dhir.toolchain.linking import LinkInputs
args = [np.arange(16, dtype=np.float64), np.zeros(1), np.array([-21], np.int32)]
run_interp(parse_file(sys.argv[1]), "main", args, 600, LinkInputs((sys.argv[2],)))
"""


@pytest.mark.mlir
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_a_direct_caller_leaves_no_linked_library(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """run_interp's folder for the linked library was left in the temporary folder when a
    caller that handles no SIGTERM (a test runner, a script) died of one mid-run."""
    obj = kernel(tmp_path, "spin")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    running = subprocess.Popen(
        [sys.executable, "-c", _DIRECT, str(SCALARS), str(obj)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TMPDIR=str(scratch)),
        start_new_session=True,
    )
    try:
        assert running.stdout is not None
        line = running.stdout.readline()  # the call has started, the library is linked
        assert line.startswith("spinning"), running.communicate()
        running.send_signal(signum)  # to dhir's process alone, as `kill` sends it
        _, stderr = running.communicate(timeout=30)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)
        running.communicate()
    assert running.returncode == -signum, stderr  # the caller's disposition: death
    assert not list(scratch.iterdir()), "the run's temporary folder is left"
    assert _is_gone(int(line.split()[1]))


@contextmanager
def spinning(
    folder: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`dhir run` of a call that never returns, in a process group of its own (as a
    terminal's job is), killed whole at the end whatever happened."""
    files: list[str] = []
    for k, array in enumerate(inputs()):
        np.save(folder / f"in{k}.npy", array)
        files += ["--input", str(folder / f"in{k}.npy")]
    obj = kernel(folder, "spin")
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(SCALARS), "--backend", "interp"]
    running = subprocess.Popen(
        [*command, *files, "--link", str(obj), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    try:
        yield running
    finally:
        with suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)
        running.communicate()


def _is_gone(pid: int, zombies: bool = False) -> bool:
    """Whether `pid` ends within 5 s; with `zombies`, dead but not reaped counts as gone
    (an orphan waits for whoever reaps it, not always soon in a container)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if zombies and state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_program_that_calls_no_c_runs_without_a_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", no_fork)
    program = (DATA / "scalars.mlir").read_text()
    program = program.replace("func.func private @sum_plain(memref<16xf64>) -> f64\n", "")
    program = program.replace("func.func private @twice(i32) -> i32\n", "")
    program = program.replace(
        "%s = func.call @sum_plain(%b) : (memref<16xf64>) -> f64", "%s = arith.constant 2.5 : f64"
    )
    program = program.replace(
        "%y = func.call @twice(%x) : (i32) -> i32", "%y = arith.addi %x, %x : i32"
    )
    got = dhir.run(program, *inputs(), backend="interp")
    assert got[1][0] == 2.5 and got[2][0] == -42


LIBM = """func.func private @pow(f64, f64) -> f64
func.func private @sqrtf(f32) -> f32

func.func @main(%x: memref<2xf64>, %y: memref<1xf32>) {
  dhir.schedule %x, %y {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %x, %y {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %a = memref.load %x[%c0] : memref<2xf64>
      %b = memref.load %x[%c1] : memref<2xf64>
      %p = func.call @pow(%a, %b) : (f64, f64) -> f64
      memref.store %p, %x[%c0] : memref<2xf64>
      %v = memref.load %y[%c0] : memref<1xf32>
      %r = func.call @sqrtf(%v) : (f32) -> f32
      memref.store %r, %y[%c0] : memref<1xf32>
    }
  }
  return
}
"""


def test_a_program_that_calls_only_c_math_runs_without_a_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_fork() -> int:
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", no_fork)
    got = dhir.run(LIBM, np.array([2.0, 10.0]), np.array([2.0], np.float32), backend="interp")
    assert got[0][0] == 1024.0 and got[1][0] == np.sqrt(np.float32(2.0))


def test_a_c_math_name_with_a_c_interface_still_runs_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forks: list[None] = []
    real_fork = os.fork

    def counted_fork() -> int:
        forks.append(None)
        return real_fork()

    monkeypatch.setattr(os, "fork", counted_fork)
    program = LIBM.replace(
        "@sqrtf(f32) -> f32", "@sqrtf(f32) -> f32 attributes {llvm.emit_c_interface}"
    )
    with pytest.raises(DhirError, match="sqrtf"):
        dhir.run(program, np.array([2.0, 10.0]), np.array([2.0], np.float32), backend="interp")
    assert forks


def assert_equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("timeout", [math.inf, 1e10])
def test_a_timeout_of_ever_waits_for_linked_code(timeout: float) -> None:
    """`--timeout inf` (wait for ever) stopped a program calling libm in the interpreter
    with an internal error: select() refuses waits past about 292 years."""
    program = """
    func.func private @cos(f64) -> f64
    func.func @main(%a: memref<1xf64>) {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<1xf64>
      %y = func.call @cos(%x) : (f64) -> f64
      memref.store %y, %a[%c0] : memref<1xf64>
      return
    }
    """
    (got,) = dhir.run(program, np.zeros(1), backend="interp", timeout=timeout)
    assert got.tolist() == [1.0]


# Ctrl-C while os.fork runs its hooks in the parent (as logging's, on a busy machine,
# while the child has already started): the hook here sends it at that moment.
INTERRUPTED_IN_FORK = """
import os, signal, sys
import numpy as np
import dhir
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
program = '''
func.func private @labs(i64) -> i64
func.func @main(%a: memref<1xi64>) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<1xi64>
  %y = func.call @labs(%x) : (i64) -> i64
  memref.store %y, %a[%c0] : memref<1xi64>
  return
}
'''
try:
    dhir.run(program, np.array([-5]), backend="interp")
except KeyboardInterrupt:
    sys.exit("interrupted")
sys.exit("finished")
"""


def test_ctrl_c_during_the_fork_stops_the_run() -> None:
    """It arrived in os.fork's hooks in the parent, whose exceptions Python prints and
    drops (`Exception ignored in: <function _releaseLock ...>`): the run went on and
    finished as if Ctrl-C had never been pressed."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_FORK], capture_output=True, text=True, timeout=120
    )
    assert done.stderr.strip() == "interrupted", done.stderr


@pytest.mark.mlir
def test_a_run_killed_outright_leaves_no_folder(tmp_path: Path) -> None:
    """The library the interpreter links the files into lay in a temporary folder for
    the whole run, which a SIGKILL (a test runner's timeout, the OOM killer) left behind."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    with spinning(tmp_path, env={**os.environ, "TMPDIR": str(temporary)}) as running:
        assert running.stdout is not None
        line = running.stdout.readline()  # the call has started
        assert line.startswith("spinning"), running.communicate()
        os.killpg(running.pid, signal.SIGKILL)
        running.communicate(timeout=30)
    assert not list(temporary.glob("dhir-interp-link-*"))
