"""The interpreter in a process of its own, for a program that may call C: the functions it
declares without a body, from the files it links or from libc and libm
(dhir.backends.interp.external), run in the process that calls them.

Code that crashes (SIGSEGV, SIGFPE, abort()), ends the process (exit()) or never returns
would take dhir with it without a word. So such a run forks: the child interprets the
program on arrays in memory shared with dhir's process, writes which call of linked code
and which task it is in to a `CallRecord` in shared memory before each call, and says
through a pipe how the run ended (nothing more: the results are in the shared arrays).
A child that dies is reported as the native backend reports a rank that died: the
signal, the function and the task, with no results. A child still running at the
deadline (a call that never returns) is killed, as is one whose parent is interrupted.

A program that declares no such function runs in dhir's own process, with no fork.
"""

import contextlib
import ctypes
import faulthandler
import gc
import mmap
import os
import pickle
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any, NoReturn

import numpy as np

from dhir.backends.interp.external import CallRecord, RecordedCall
from dhir.ir.diagnostics import DhirError, Diagnostic, error_at, loc_of
from dhir.toolchain.options import TIMEOUT_HINT

# How long the parent waits past the run's deadline, by which the child stops itself at
# the op it was about to run, before it kills a child stuck in a call.
GRACE_S = 1.0
# How often the parent looks whether the child has ended where the system has no pidfd
# to say so (the pipe's end does not: a process the child started may hold it open).
_POLL_S = 0.1
# The longest wait given to select() at once: it takes at most about 292 years (in
# nanoseconds, 64 bits), so a longer timeout (`--timeout inf` above all) is waited in pieces.
_LONGEST_WAIT_S = 86400.0
_CHUNK = 1 << 16
_OK, _ERROR, _RAISED = "ok", "error", "raised"
# The exit status of a child that could not say how its run ended.
_CHILD_FAILED = 70
_NOT_RAN = "; the run stopped and wrote no results"
_KILLED = "its process was killed and the run wrote no results"
# The signals that stop a run (Ctrl-C, and SIGTERM and SIGHUP: dhir.toolchain.signals).
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def shared_copy(array: np.ndarray) -> np.ndarray:
    """A copy of `array` in memory a child forked later shares (C order, as the
    interpreter's inputs are)."""
    memory = mmap.mmap(-1, max(array.nbytes, 1))
    copy = np.ndarray(array.shape, array.dtype, buffer=memory)
    copy[...] = array
    return copy


def run_apart(work: Callable[[], None], record: CallRecord, timeout: float | None) -> None:
    """Run `work` in a child process. A DhirError it raises is raised here; the child
    dying, or still running `timeout` seconds (and the grace) from now, is a DhirError
    at the call `record` last saw. Interrupted (Ctrl-C, SIGTERM), the child is killed."""
    deadline = time.monotonic() + timeout + GRACE_S if timeout is not None else None
    _flush()  # else what is buffered would be written twice, by both processes
    reader, writer = os.pipe()
    parent = os.getpid()
    # The child's garbage collector then leaves the objects of now alone: looking through
    # them would copy most of dhir's memory (100 ms and more). Not where the caller froze
    # some: unfreezing would free theirs.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    # Ctrl-C, SIGTERM and SIGHUP wait until the fork is over: arriving during os.fork's
    # hooks (logging's, run in the parent after the fork), the exception their handler
    # raises was printed and dropped, and the run went on; the child must not die of
    # Python's handlers either, which it still has until _detach.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    try:
        pid = os.fork()
    except OSError as error:  # out of memory or processes
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if freeze:
            gc.unfreeze()
        os.close(reader)
        os.close(writer)
        message = f"the interpreter cannot start the process it calls linked code in: {error}"
        raise DhirError([Diagnostic(message)]) from None
    if pid == 0:
        os.close(reader)
        _child(work, writer, parent, blocked)
    if freeze:
        gc.unfreeze()
    os.close(writer)
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a signal held back: raised here
        ended = _wait(pid, reader, deadline)
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(reader)
    if ended is None:
        _kill(pid)
        raise _timed_out(record.read(), timeout)
    data, status = ended
    code = os.waitstatus_to_exitcode(status)
    if code == -signal.SIGINT:
        # Ctrl-C, sent to the child as to dhir, which may see the child end before its
        # own KeyboardInterrupt is raised.
        raise KeyboardInterrupt
    outcome = _outcome(data) if code == 0 else None
    if outcome is None:
        raise _died(record.read(), code)
    if outcome[0] == _ERROR:
        kind, diagnostics, sources = outcome[1:]
        raise kind(diagnostics, sources)
    if outcome[0] == _RAISED:
        raise outcome[1]


def _child(work: Callable[[], None], writer: int, parent: int, mask: Iterable[int]) -> NoReturn:
    code = _CHILD_FAILED
    try:
        _detach(parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # those held back now kill it
        try:
            work()
            outcome: tuple[Any, ...] = (_OK,)
        except DhirError as error:
            outcome = (_ERROR, type(error), error.diagnostics, error.sources)
        except BaseException as error:  # a bug of dhir's: raised again in the parent
            outcome = (_RAISED, error)
        try:
            data = pickle.dumps(outcome)
        except Exception:
            data = pickle.dumps((_RAISED, RuntimeError(repr(outcome[1]))))
        _flush()
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view) :]
        code = 0
    finally:
        os._exit(code)  # never back into the caller's code (a test runner, the CLI)


def _detach(parent: int) -> None:
    """The child dies of what the parent would be stopped by (not of Python's handlers,
    which raise inside), says nothing of a crash (faulthandler, enabled by pytest or
    PYTHONFAULTHANDLER, would print Python's stack: the parent reports it), and dies
    with its parent."""
    faulthandler.disable()
    for signum in _STOPPING:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        _this_program().prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() != parent:  # it died before that
            os._exit(_CHILD_FAILED)


def _wait(pid: int, reader: int, deadline: float | None) -> tuple[bytes, int] | None:
    """What the child wrote and its wait status once it has ended, or None at
    `deadline`. Where the system has no pidfd (Linux < 5.3, macOS), whether it has ended
    is looked at every _POLL_S."""
    chunks: list[bytes] = []
    with _pidfd(pid) as ended:
        watched = [reader] if ended is None else [reader, ended]
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if ended is None:
                wait = _POLL_S if wait is None else min(_POLL_S, wait)
            if wait is not None and wait <= 0:
                return None
            piece = None if wait is None else min(wait, _LONGEST_WAIT_S)
            ready, _, _ = select.select(watched, [], [], piece)
            if reader in ready:
                chunk = os.read(reader, _CHUNK)
                chunks.append(chunk)
                if not chunk:
                    watched.remove(reader)
            if ended is None or ended in ready:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    if reader in watched:
                        chunks += _available(reader)
                    return b"".join(chunks), status


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int | None]:
    """A descriptor that becomes readable when process `pid` ends, where Linux has them."""
    try:
        descriptor = os.pidfd_open(pid)
    except (AttributeError, OSError):
        yield None
        return
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def _available(reader: int) -> list[bytes]:
    chunks: list[bytes] = []
    while select.select([reader], [], [], 0)[0]:
        chunk = os.read(reader, _CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
    return chunks


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _outcome(data: bytes) -> tuple[Any, ...] | None:
    try:
        outcome = pickle.loads(data)
    except Exception:
        return None
    return outcome if isinstance(outcome, tuple) and outcome else None  # pyright: ignore[reportUnknownVariableType]


def _died(seen: RecordedCall, code: int) -> DhirError:
    """The child ended with exit code `code` (-N: killed by signal N) before saying how
    its run went."""
    if code < 0:
        how = f"died of {_signal_name(-code)}"
    else:
        how = f"ended with exit status {code}"
    if seen.call is None:
        return DhirError([Diagnostic(f"the interpreter's process {how}{_NOT_RAN}")])
    callee = f"@{seen.call.callee.string_value()}"
    where = _task(seen)
    if seen.under_way:
        why = " (linked code ended its process)" if code >= 0 else ""
        message = f"the call of {callee}{where} {how}{why}: the interpreter runs linked code"
        message += f" in a process of its own{_NOT_RAN}"
    else:
        message = f"the interpreter's process {how} after the call of {callee}{where}"
        message += " returned: linked code may have written memory it was not passed"
        message += _NOT_RAN
    return error_at(seen.call, message)


def _timed_out(seen: RecordedCall, timeout: float | None) -> DhirError:
    after = f" after {timeout:g} s" if timeout is not None else ""
    if seen.call is None or not seen.under_way:
        message = f"the interpreter timed out{after}; {_KILLED}; {TIMEOUT_HINT}"
        return DhirError([Diagnostic(message)])
    callee = f"@{seen.call.callee.string_value()}"
    message = f"the interpreter timed out{after} in the call of {callee}{_task(seen)}, "
    message += f"which had not returned; {_KILLED}; {TIMEOUT_HINT}"
    return error_at(seen.call, message)


def _task(seen: RecordedCall) -> str:
    if seen.task is None:
        return ""
    loc = loc_of(seen.task)
    return f" in task {seen.task_name}" + (f" at {loc}" if loc is not None else "")


def _signal_name(number: int) -> str:
    """As the native backend names a rank's: `SIGSEGV (signal 11)`."""
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def _flush() -> None:
    """Python's buffered output and C's (stdio, which linked code may write with)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    _this_program().fflush(None)


@cache
def _this_program() -> ctypes.CDLL:
    """The symbols of the running program, libc's among them."""
    return ctypes.CDLL(None)
