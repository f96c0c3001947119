"""A watchdog that ends a run's processes when dhir itself dies without cleaning up.

SIGKILL (the OOM killer, `kill -9`, a CI job's hard stop) gives dhir no chance to run
the clean-up of dhir/toolchain/launch.py: mpirun and the ranks, in sessions of their own,
would run on, rank 0 perhaps spinning in an MPI wait for good. So each run starts a
small shell script of its own, which waits on a pipe whose only writer is dhir. Once the
run has cleaned up, dhir kills the watchdog (at once: telling it so would wait for it to
have started, some 0.1 s on a busy machine); end of file on the pipe means dhir is gone,
and the watchdog kills every process that carries the run's DHIR_RUN_ID and removes the
run's folder. A shell, not Python: Python's start-up cost each run ~34 ms of CPU, taken
from mpirun's and the ranks' start on a machine of two cores (a cached `dhir run` is to
stay within 0.2 s of its executable under mpirun), the shell's ~2 ms.

A pipe rather than a parent-death signal (prctl PR_SET_PDEATHSIG): that signal fires
when the *thread* that started the child ends, not the process (dhir.run may be called
from a worker thread), reaches only mpirun and not its proxies and ranks, and needs a
hook in the child before exec, which is not safe in a process with threads.
"""

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The watchdog, `sh -c _WATCHDOG dhir-watchdog MARKER FOLDER` with the pipe on its
# standard input: `read` returns non-zero at the end of file, dhir's death (dhir writes
# nothing). It then kills the marked processes (`grep -z`: environ's entries end in NUL,
# `-x`: a whole entry) and looks again, every 0.05 s up to 100 times, for one that was
# being started meanwhile, until none is left; then it removes the run's folder.
_SHELL = "/bin/sh"
_WATCHDOG = """
while read -r _; do :; done
looks=0
while [ "$looks" -lt 100 ]; do
    found=$(grep -lzxF -e "DHIR_RUN_ID=$1" /proc/[0-9]*/environ 2>/dev/null)
    [ -n "$found" ] || break
    for path in $found; do
        pid=${path#/proc/}
        kill -9 "${pid%/environ}" 2>/dev/null
    done
    looks=$((looks + 1))
    sleep 0.05
done
rm -rf -- "$2"
"""


@contextmanager
def watched(marker: str, folder: Path) -> Iterator[None]:
    """While inside, should this process die, the processes whose environment has
    DHIR_RUN_ID=`marker` are killed and `folder` is removed. Where the watchdog cannot
    start (no /bin/sh this user may run), nothing watches: the run goes on, cleaning up
    after itself on every signal but SIGKILL."""
    watchdog = _start(marker, folder)
    if watchdog is None:
        yield
        return
    process, writer = watchdog
    try:
        yield
    finally:
        process.kill()  # before the pipe's end closes, which would set it off
        process.wait()
        os.close(writer)


def _start(marker: str, folder: Path) -> "tuple[subprocess.Popen[bytes], int] | None":
    """The watchdog, and the end of its pipe to hold; None where it cannot start."""
    reader, writer = os.pipe()  # not inherited by mpirun: only the watchdog gets `reader`
    try:
        # A session of its own, as mpirun's: Ctrl-C and a closed terminal, which dhir
        # handles, do not reach it. Not marked itself, or it would kill itself.
        env = {key: value for key, value in os.environ.items() if key != "DHIR_RUN_ID"}
        process = subprocess.Popen(
            [_SHELL, "-c", _WATCHDOG, "dhir-watchdog", marker, str(folder)],
            stdin=reader,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    except OSError:
        os.close(writer)
        return None
    except BaseException:
        os.close(writer)
        raise
    finally:
        os.close(reader)
    return process, writer


def kill_marked(marker: str) -> int:
    """SIGKILL to every process (of ours) whose environment has DHIR_RUN_ID=`marker`;
    how many there were. By the marker: by process group would miss the ranks, which
    both MPIs put in groups of their own, and a group id may belong to someone else."""
    needle = f"DHIR_RUN_ID={marker}".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            pass  # gone already, or not ours to read
    return killed
