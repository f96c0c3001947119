"""Running a built executable under mpirun, with NumPy arrays in and out, or (for
`dhir run`'s cached path, which does not load NumPy) .npy files."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from dhir.ir.diagnostics import DhirError, Diagnostic, warn
from dhir.toolchain.failure import (
    explain,
    failed_check,
    first_dead,
    located_report,
    read_pids,
    read_states,
)
from dhir.toolchain.harness import command_line_args
from dhir.toolchain.options import (
    TIMEOUT_HINT,
    RunOptions,
    check_runtime_environment,
    crowding,
)
from dhir.toolchain.reaper import kill_marked, watched
from dhir.toolchain.signals import ending_cleanly
from dhir.toolchain.signature import ArgSpec, EntrySignature, clear_outputs, write_outputs
from dhir.toolchain.staging import check_result, result_writers, stage_inputs
from dhir.toolchain.tools import SETUP_HINT, MpiInstall, find_mpi

if TYPE_CHECKING:
    import numpy as np

OUTPUT_TAIL_LINES = 40
# How MPICH ("... (signal 11)") and OpenMPI ("exited on\nsignal 11 (...)") report a dead rank.
_SIGNAL_REPORT = re.compile(r"\bsignal\s+(\d+)\b")
# MPICH's report of a dead rank; the only one when the rank ran on another host.
_MPICH_EXIT = re.compile(r"^=\s+EXIT CODE: (\d+)$", re.M)
# How dhir's runtime reports a rank dying of a signal: "the rank died of SIGFPE (...)".
_RANK_DIED = re.compile(r"the rank died of (SIG[A-Z]+)")
# How a program's own cf.assert that failed reads (dhir-assert-locations), as the
# interpreter words it.
_OWN_ASSERT = "'cf.assert' failed: "
# The signals a rank's own code dies of (not one sent from outside, as SIGKILL), which
# the interpreter finds at their op: a division by zero, an access out of bounds, ...
_CRASHES = {"SIGFPE", "SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT"}
CRASH_HINT = (
    "to find the op (or the call of linked code) that fails, run the program with "
    '--backend interp (backend="interp" in dhir.run), which stops there'
)
# mpirun forwards SIGTERM to its ranks and cleans up; this is how long it gets before SIGKILL.
TERMINATE_GRACE_S = 3.0
# How long a timed-out traced run's ranks get to write what they recorded (from memory).
PARTIAL_TRACE_WAIT_S = 2.0
# How often the launcher looks for ranks that have died while mpirun runs, at most.
WATCH_S = 0.05
# Each look waits this many times as long as the last look took: a look reads each rank's
# /proc entry, and over many ranks looking every 50 ms holds a core the ranks need.
LOOK_SHARE = 20


def _remove_earlier(path: Path) -> None:
    """An earlier run's file at `path`, which this run is to write again."""
    if path.is_file():
        path.unlink(missing_ok=True)


def run_executable(
    exe: Path,
    signature: EntrySignature,
    inputs: Sequence[object],
    options: RunOptions | None = None,
    output_dir: Path | None = None,
    traffic: list[str] | None = None,
) -> "list[np.ndarray]":
    """Run `exe` (from build_executable) on `options.ranks` ranks of `options.mpi`; one
    array per entry argument: each memref's final contents on rank 0, and each scalar
    input (0-d) unchanged. With `output_dir`, memref argument K is also saved there as
    `argK.npy`. With `options.hostfile` (see dhir.machine.layout), ranks run on the hosts
    it lists, else all on this one; with `options.threads`, each runs that many OpenMP
    threads (None: the launcher sets no count). With `traffic`, the bytes and messages
    each rank sent are appended to it, one line per rank (the runtime's DHIR_RT_STATS
    report), then, where rank 0 did the others' file I/O, one per rank that sent files.
    With `options.trace`, a Chrome trace of the run is written there. SIGTERM or SIGHUP
    stop every process of the run and remove its folder first (see `ending_cleanly`), as
    Ctrl-C does, whoever calls."""
    from dhir.toolchain.values import check_inputs, save_outputs

    options = options if options is not None else RunOptions()
    check_runtime_environment()
    arrays = check_inputs(signature, list(inputs), copy=False)  # only saved to files
    crowded = crowding(options)
    if crowded is not None:  # said before the launch, which may run for minutes silently
        warn(Diagnostic(crowded, severity="warning"))
    if output_dir is not None:
        clear_outputs(signature, Path(output_dir))
    # A caller that does not turn SIGTERM into an exception itself (dhir.run and the
    # commands do) died of it here, leaving mpirun, the ranks and this folder behind.
    with ending_cleanly(redeliver=True), _run_folder("dhir-run-") as (work, marker):
        paths: dict[int, str] = {}
        for spec, array in zip(signature.args, arrays):
            if spec.is_memref:
                path = work / f"in{spec.index}.raw"
                array.astype(array.dtype.newbyteorder("<"), copy=False).tofile(path)
                paths[spec.index] = str(path)
        values = [_value(spec, array) for spec, array in zip(signature.args, arrays)]
        words = command_line_args(signature, paths, values)
        out = _run_in(work, marker, exe, words, options, traffic)
        results = [
            _read_result(out / f"arg{spec.index}.raw", array) if spec.is_memref else array
            for spec, array in zip(signature.args, arrays)
        ]
    if output_dir is not None:
        save_outputs(results, signature, Path(output_dir))
    return results


def _value(spec: ArgSpec, array: "np.ndarray") -> tuple[int, ...] | float | int | bytes:
    """What `command_line_args` takes for a checked input: a memref's shape, a scalar's
    value; a float's little-endian bytes, whose NaN keeps its payload (item() would
    give a float, and an f32 or f16 that signals would come back quiet)."""
    if spec.is_memref:
        return array.shape
    if spec.kind == "f":
        return array.astype(array.dtype.newbyteorder("<")).tobytes()
    return array.item()


def run_npy_files(
    exe: Path,
    signature: EntrySignature,
    inputs: list[str],
    options: RunOptions,
    output_dir: Path | None = None,
) -> bool:
    """`run_executable` for `dhir run`'s `--input`s (.npy files, TYPE=VALUE scalars),
    without loading NumPy: the results go to `output_dir` as `run_executable` saves them.
    False, with nothing run, when an input needs NumPy (dhir.toolchain.staging):
    `run_executable` then reads it, and says what is wrong with it."""
    check_runtime_environment()
    with ending_cleanly(redeliver=True), _run_folder("dhir-run-") as (work, marker):
        staged = stage_inputs(signature, inputs, work)
        if staged is None:
            return False
        if output_dir is not None:
            clear_outputs(signature, output_dir)
        words = command_line_args(signature, staged.paths, staged.values)
        out = _run_in(work, marker, exe, words, options, None)
        writers = result_writers(out, signature, staged)
        if output_dir is not None:
            write_outputs(writers, signature, output_dir)
    return True


@contextmanager
def _run_folder(prefix: str) -> Iterator[tuple[Path, str]]:
    """A run's temporary folder, and the marker (DHIR_RUN_ID) its processes are to
    inherit. Should dhir die inside (SIGKILL), a watchdog kills those processes and
    removes the folder (dhir.toolchain.reaper)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    marker = uuid.uuid4().hex
    try:
        with watched(marker, work):
            try:
                yield work, marker
            finally:
                # While still watched: dhir killed now still leaves no folder.
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # also when the watchdog did not start


def _run_in(
    work: Path,
    marker: str,
    exe: Path,
    words: list[str],
    options: RunOptions,
    traffic: list[str] | None,
) -> Path:
    """Run `exe` with the inputs staged in `work` (`words` after OUTDIR), its processes
    marked with `marker`: OUTDIR."""
    ranks, threads = options.ranks, options.threads
    install = find_mpi(options.mpi, to_build=False)
    out = work / "out"
    out.mkdir()
    command = [*_mpirun(install, ranks, threads, options.hostfile), str(Path(exe).resolve())]
    command += [str(out), *words]
    errors = work / "errors"
    errors.mkdir()
    # Every process of this run inherits the marker, so stragglers can be found by it.
    env = dict(os.environ, DHIR_RUN_ID=marker, DHIR_ERROR_DIR=str(errors))
    # Where each rank keeps its state (failure.py), in the same directory as its errors.
    env["DHIR_STATE_DIR"] = str(errors)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    env.update(crowded_env(options, install.name, env))
    # OpenBLAS (the calls --fast-math=reassoc makes) takes every core by default:
    # each rank gets its own share, or what the caller set for it.
    if threads is not None or "OPENBLAS_NUM_THREADS" not in env:
        env["OPENBLAS_NUM_THREADS"] = str(options.threads_per_rank())
    if traffic is not None:
        env["DHIR_RT_STATS"] = "1"
    if options.trace is not None:
        (work / "trace").mkdir()
        env["DHIR_TRACE_DIR"] = str(work / "trace")
        _remove_earlier(Path(options.trace))  # a failed run must not leave it looking new
    try:
        _launch(command, env, options.timeout, work / "output.log", ranks, errors, options.hostfile)
    except DhirError as error:
        if options.trace is None:
            raise
        note = _failed_trace(work / "trace", ranks, Path(options.trace), error)
        raise DhirError([*error.diagnostics, note], error.sources) from None
    if options.trace is not None:
        from dhir.toolchain.trace import write_chrome_trace  # only for traced runs

        write_chrome_trace(work / "trace", ranks, options.trace)
    log = (work / "output.log").read_text(errors="replace")
    if traffic is not None:
        traffic += sorted(_TRAFFIC.findall(log), key=lambda line: int(line.split()[2]))
        traffic += sorted(_FILE_TRAFFIC.findall(log), key=lambda line: int(line.split()[6]))
        log = _TRAFFIC_LINE.sub("", log)  # --timing reports them
    _show(log)
    return out


# MPICH's settings that make a waiting rank give its core up (sched_yield, and a usleep
# now and then while its progress engine finds nothing): for more ranks than cores.
CROWDED_MPICH = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1"}


def crowded_env(options: RunOptions, mpi: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables that keep a crowded MPICH run (`crowding`) from polling every core
    away, but for those `env` sets already (the user's choice stands)."""
    if mpi != "mpich" or crowding(options) is None:
        return {}
    return {name: value for name, value in CROWDED_MPICH.items() if name not in env}


class TimedOut(DhirError):
    """A run that did not end within its timeout, and was killed."""


def _failed_trace(directory: Path, ranks: int, trace: Path, error: DhirError) -> Diagnostic:
    """What a failed run's --trace holds: what the ranks recorded up to the failure, marked
    partial, or nothing (an earlier run's was removed before it) when no rank could write."""
    from dhir.toolchain.trace import write_partial_trace  # only for traced runs

    why = "timed out" if isinstance(error, TimedOut) else "a rank failed"
    try:
        written = write_partial_trace(directory, ranks, trace, why)
    except DhirError as failed:  # the run's error leads; this says why there is no trace
        return Diagnostic(f"no trace was written: {failed.diagnostics[0].message}", severity="note")
    if written is None:
        return Diagnostic(
            f"no trace was written to {trace}: no rank could write what it recorded (a rank "
            "killed outright writes nothing)",
            severity="note",
        )
    return Diagnostic(f"a partial trace was written to {trace}: {written}", severity="note")


def _show(output: str) -> None:
    """What the ranks printed (linked code's printf, DHIR_RT_STATS=1, ...), which mpirun
    wrote to the run's log with their standard error: on dhir's standard output once the
    run has ended well, as the interpreter lets it through (a failed run shows its tail
    in the error)."""
    if output:
        sys.stdout.write(output)
        sys.stdout.flush()


def run_mpi_program(exe: Path, args: Sequence[str], options: RunOptions | None = None) -> str:
    """Run a plain MPI program (no dhir entry, no inputs) on `options.ranks` ranks, local
    ones or where `options.hostfile` puts them, with the same mpirun, flags and clean-up
    as dhir's programs; its output (stdout and stderr)."""
    options = options if options is not None else RunOptions()
    install = find_mpi(options.mpi, to_build=False)
    with ending_cleanly(redeliver=True), _run_folder("dhir-mpi-") as (work, marker):
        env = dict(os.environ, DHIR_RUN_ID=marker, DHIR_ERROR_DIR=str(work))
        env["DHIR_STATE_DIR"] = str(work)
        launcher = _mpirun(install, options.ranks, None, options.hostfile)
        command = [*launcher, str(Path(exe).resolve()), *args]
        try:
            _launch(command, env, options.timeout, work / "output.log", options.ranks)
        except DhirError as error:
            raise _unstarted(error, work, options.hostfile) from None
        return (work / "output.log").read_text(errors="replace")


def _unstarted(error: DhirError, work: Path, hostfile: Path | None) -> DhirError:
    """`error`, of a plain MPI program launched with `hostfile`, saying which hosts to check
    where no rank marked itself started (`rank<R>.started` in DHIR_STATE_DIR, written
    after MPI_Init: dhir_calibrate's ping-pong); `error` itself otherwise."""
    if hostfile is None or any(work.glob("rank*.started")) or len(error.diagnostics) != 1:
        return error
    head, _, rest = error.diagnostics[0].message.partition("\n")
    told = "\n".join(part for part in (head, _unreached(hostfile), rest) if part)
    return type(error)([Diagnostic(told)])


def _mpirun(
    install: MpiInstall, ranks: int, threads: int | None, hostfile: Path | None = None
) -> list[str]:
    command = [str(install.mpirun), *install.mpirun_flags, "-n", str(ranks)]
    if hostfile is not None:
        command += ["-f" if install.name == "mpich" else "--hostfile", str(hostfile)]
    if hostfile is not None and install.name == "openmpi":
        # PRRTE maps 2 ranks or fewer by core, filling the first node's cores before the
        # hostfile's next node: by slot, each node gets the ranks its line gives it.
        command += ["--map-by", "slot"]
    if threads is not None and install.name == "openmpi":
        # OpenMPI's default binding (to a core, when not oversubscribed) would stack a rank's
        # threads on one core; -x exports the variable to remote nodes too.
        command += ["--bind-to", "none", "-x", "OMP_NUM_THREADS"]
    if install.name == "openmpi":
        command += ["-x", "DHIR_RUN_ID", "-x", "DHIR_ERROR_DIR", "-x", "DHIR_STATE_DIR"]
    return command


# OpenMPI's launcher now and then fails to start its PMIx server, a transient failure
# before any rank runs: nothing ran, so mpirun is started again, up to _STARTS times.
_LAUNCHER_FAILED = re.compile(r"The PMIx server's listener thread failed to start")
_STARTS = 3

_TRAFFIC = re.compile(
    r"^dhir: rank \d+ sent \d+ bytes in \d+ messages, took \d+ bytes of inputs$", re.M
)
# Where rank 0 does the other ranks' file I/O (DHIR_IO=rank0), what each rank sent of it.
_FILE_TRAFFIC = re.compile(
    r"^dhir: files through rank 0: rank \d+ sent \d+ bytes in \d+ messages$", re.M
)
_TRAFFIC_LINE = re.compile(f"(?:{_TRAFFIC.pattern}|{_FILE_TRAFFIC.pattern})\n?", re.M)


def _run_once(
    command: list[str],
    env: dict[str, str],
    timeout: float,
    log: Path,
    ranks: int,
    errors: Path | None,
    hostfile: Path | None,
) -> tuple[int, "_Watch"]:
    """Start mpirun, wait for it within `timeout`, and clean up after it: its status."""
    # Output goes to a file, not a pipe: a stray rank holding a pipe open would block reading it.
    watch = _Watch(errors)
    process: subprocess.Popen[bytes] | None = None
    with open(log, "wb") as sink:
        try:
            # A session of its own: its process group is mpirun and what stays in it. The
            # ranks, which both MPIs put in groups of their own, are found by the DHIR_RUN_ID
            # marker (also mpirun, should a signal's Terminated cut Popen short).
            process = _start(command, sink, env)
            status = watch.wait(process, timeout)
        except subprocess.TimeoutExpired:
            assert process is not None  # only waiting on it times out
            if "DHIR_TRACE_DIR" in env and errors is not None:
                _stop_traced_ranks(errors, Path(env["DHIR_TRACE_DIR"]))
            _terminate(process)
            lines = _where(errors, "", "", None) + _not_started(errors, log, hostfile)
            where = "".join(line + "\n" for line in lines)
            raise TimedOut(
                [
                    Diagnostic(
                        f"the program timed out after {timeout:g} s on {_ranks(ranks)} and was "
                        f"killed; {TIMEOUT_HINT}\n{where}{_tail(log, errors)}"
                    )
                ]
            ) from None
        except BaseException:  # Ctrl-C, or SIGTERM and SIGHUP (signals.py)
            if process is not None:
                _terminate(process)
            raise
        finally:
            # What outlived mpirun (proxies, ranks), found by the marker.
            if (marker := env.get("DHIR_RUN_ID")) is not None:
                kill_marked(marker)
    return status, watch


def _start(command: list[str], sink: BinaryIO, env: dict[str, str]) -> "subprocess.Popen[bytes]":
    """mpirun started; one the OS cannot start (not executable, not a program for this
    machine, cut short) is a DhirError that says what to do."""
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except OSError as error:
        raise DhirError(
            [
                Diagnostic(
                    f"cannot start {command[0]}: {error.strerror}; reinstall its MPI "
                    f"({SETUP_HINT}), or point DHIR_MPICH_PREFIX or DHIR_OPENMPI_PREFIX "
                    "at a working one"
                )
            ]
        ) from None


def _launch(
    command: list[str],
    env: dict[str, str],
    timeout: float,
    log: Path,
    ranks: int,
    errors: Path | None = None,
    hostfile: Path | None = None,
) -> None:
    status, watch = _run_once(command, env, timeout, log, ranks, errors, hostfile)
    for _ in range(_STARTS - 1):
        if status == 0 or not _LAUNCHER_FAILED.search(log.read_text(errors="replace")):
            break
        status, watch = _run_once(command, env, timeout, log, ranks, errors, hostfile)
    if status != 0:
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        # The ranks' own reports first (dhir_rt.c): mpirun's names whichever death it saw.
        reports = sorted(errors.glob("rank*.err")) if errors is not None else []
        text = "".join(path.read_text(errors="replace") for path in reports)
        output = log.read_text(errors="replace")
        reported = _RANK_DIED.search(text)
        died = _SIGNAL_REPORT.search(output)
        if reported is not None:
            number = int(signal.Signals[reported.group(1)])
            how += f"; a rank died of {reported.group(1)} (signal {number})"
        elif died is not None:
            number = int(died.group(1))
            how += f"; a rank died of {_signal_name(number)} (signal {number})"
        elif (code := _MPICH_EXIT.search(output)) and "dhir: error" not in text + output:
            # A rank that exits early or crashes reports itself; one killed on another host
            # is known only by MPICH's exit code, which for a signal is its number.
            number = int(code.group(1))
            how += f"; MPICH reports exit code {number}, as for a rank killed by "
            how += f"{_signal_name(number)} (signal {number})"
        where = _where(errors, text, output, watch) + _not_started(errors, log, hostfile)
        # The dead rank and its task lead: what the user needs first.
        lead = f": {where.pop(0)}" if where and not where[0].startswith(" ") else ""
        rest = "".join(line + "\n" for line in where)
        # A failed --runtime-checks check is the cause, at the user's op: it leads; so does
        # the runtime's report of an op (a loop's step, an allocation), at the op.
        check = failed_check(output, text)
        found = f"a runtime check failed: {check.what}; " if check is not None else ""
        if check is not None and check.what.startswith(_OWN_ASSERT):
            found = f"{check.what}; "  # the program's own check, not one of dhir's
        if check is None and errors is not None:
            check = located_report(text + output, read_states(errors))
            found = f"{check.what}; " if check is not None else ""
        if check is None and reported is not None and reported.group(1) in _CRASHES:
            how += f"; {CRASH_HINT}"
        raise DhirError(
            [
                Diagnostic(
                    f"{found}the program failed on {_ranks(ranks)}{lead}; mpirun {how}\n"
                    f"{rest}{_tail(log, errors)}",
                    check.loc if check is not None else None,
                )
            ]
        )


def _where(errors: Path | None, text: str, output: str, watch: "_Watch | None") -> list[str]:
    """What the ranks' state files (failure.py) say: which rank died first and what it was
    running, then where each other rank was. Empty when the ranks left no state."""
    if errors is None:
        return []
    states = read_states(errors)
    dead = first_dead(text, output, watch.vanished, states) if watch else None
    first, others = explain(states, dead)
    return [first] * bool(first) + ["  " + line for line in others]


def _not_started(errors: Path | None, log: Path, hostfile: Path | None) -> list[str]:
    """A line saying that no rank got past MPI_Init, where no rank left a state file nor
    reported itself (dhir_rt.c writes both only after it): mpirun had not started them,
    which with a hostfile is most often a host it cannot reach (mpirun then waits, or
    quotes ssh). Empty otherwise."""
    if errors is None or read_states(errors):
        return []
    reports = "".join(p.read_text(errors="replace") for p in sorted(errors.glob("rank*.err")))
    if "dhir: error" in reports + log.read_text(errors="replace"):
        return []
    if hostfile is None:
        return ["  no rank got past MPI_Init (mpirun had not started the ranks)"]
    return [_unreached(hostfile)]


def _unreached(hostfile: Path) -> str:
    """The line saying that mpirun had not started the ranks on `hostfile`'s hosts."""
    hosts = ", ".join(_hostfile_hosts(hostfile))
    return (
        f"  no rank got past MPI_Init: mpirun had not started the ranks on the hostfile's "
        f"hosts ({hosts}); check that this host reaches each without a password (`ssh "
        'HOST true`) or through the batch system (docs/machine.md, "Running on a cluster")'
    )


def _hostfile_hosts(hostfile: Path) -> list[str]:
    """The hosts of a hostfile as dhir.machine.layout writes it, in order: `host:N`
    (MPICH) or `host slots=N` (OpenMPI)."""
    try:
        lines = hostfile.read_text(errors="replace").split("\n")
    except OSError:
        return [str(hostfile)]
    words = [line.split()[0] for line in lines if line.strip()]
    return [word.rpartition(":")[0] if ":" in word else word for word in words]


class _Watch:
    """Waits for mpirun, noting the order in which the ranks' processes vanish (the first
    to go is the one that died, when neither the runtime nor the MPI says which)."""

    def __init__(self, states: Path | None) -> None:
        self._states = states
        self._pids: dict[int, int] = {}
        self._seen: set[int] = set()
        self.vanished: list[int] = []

    def wait(self, process: subprocess.Popen[bytes], timeout: float) -> int:
        deadline = time.monotonic() + timeout
        pause = WATCH_S
        while True:
            try:
                return process.wait(timeout=min(pause, max(deadline - time.monotonic(), 0)))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                began = time.monotonic()
                self._look()
                pause = max(WATCH_S, LOOK_SHARE * (time.monotonic() - began))

    def _look(self) -> None:
        if self._states is None:
            return
        if len(self._pids) < len(list(self._states.glob("rank*.state"))):
            # Only the files not read yet: 1000 ranks start over many looks.
            known = {f"rank{rank}.state" for rank in self._pids}
            self._pids.update(read_pids(self._states, known))
        gone = []
        for rank, pid in self._pids.items():
            # Only a process once seen alive here: a rank on another host is not ours to see.
            if _alive(pid):
                self._seen.add(rank)
            elif rank in self._seen and rank not in self.vanished:
                gone.append(rank)
        if len(gone) > 1:
            # Gone in one look: a rank blocked in an MPI call on another went after it.
            states = read_states(self._states)
            gone.sort(key=lambda rank: rank in states and states[rank].waiting_on() in gone)
        self.vanished += gone


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        # Bytes: the name in parentheses is the executable's, which need not be UTF-8.
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rpartition(b")")[2].split()[:1] != [b"Z"]


def _stop_traced_ranks(errors: Path, traces: Path) -> None:
    """Ask each rank still running to write what it recorded (SIGUSR1: dhir_rt.c's partial
    trace) and wait, a short while, for their files."""
    pids = read_pids(errors)
    for rank, pid in pids.items():
        if not (traces / f"rank{rank}.trace").exists():
            with suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + PARTIAL_TRACE_WAIT_S
    while time.monotonic() < deadline:
        if all((traces / f"rank{rank}.trace").exists() for rank in pids):
            return
        time.sleep(0.02)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "an unknown signal"


def _signal_group(group: int, signum: signal.Signals) -> None:
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(log: Path, errors: Path | None) -> str:
    """dhir's own error messages first (from the ranks' files: mpirun's copy may be lost),
    then the end of mpirun's output."""
    lines = log.read_text(errors="replace").splitlines()
    tail = lines[-OUTPUT_TAIL_LINES:]
    reported = (
        []
        if errors is None
        else [
            line
            for path in sorted(errors.glob("rank*.err"))
            for line in path.read_text(errors="replace").splitlines()
        ]
    )
    shown = [line for line in reported if line not in tail][:8]
    shown += [line for line in lines[:-OUTPUT_TAIL_LINES] if line.startswith("dhir: error")][:3]
    parts = [*shown]
    if tail:
        parts += [f"output (last {len(tail)} lines):", *["  " + line for line in tail]]
    return "\n".join(parts) if parts else "(no output)"


def _read_result(path: Path, like: "np.ndarray") -> "np.ndarray":
    import numpy as np

    check_result(path, like.size, like.dtype.itemsize)
    data = np.fromfile(path, dtype=like.dtype.newbyteorder("<"))
    # In the input's own dtype, as the interpreter's results are: astype() keeps one
    # that only names the byte order ('<f8', whose byteorder is '<', not '=').
    same = data.dtype == like.dtype
    return (data.view(like.dtype) if same else data.astype(like.dtype)).reshape(like.shape)


def _ranks(count: int) -> str:
    return "1 rank" if count == 1 else f"{count} ranks"
