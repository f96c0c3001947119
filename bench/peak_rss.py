"""Runs one command and reports its peak resident memory and lifetime: the launcher that
bench/memory.py puts in front of each MPI rank.

    python -S bench/peak_rss.py REPORT_DIR COMMAND [ARG ...]

It forks, execs COMMAND, waits with os.wait4 and writes REPORT_DIR/<rank>.json (the rank
from the MPI's environment, else `pid<N>`) holding:

- `peak_kib`: the child's ru_maxrss. Linux keeps it across the child's exec as the larger
  of the child's resident set before the exec (its copy of this launcher's pages) and the
  command's own high-water mark (VmHWM) until it exits. A max, not a sum: when the command
  peaks above this launcher, the figure is the command's own peak, exactly.
- `floor_kib`: this launcher's own peak when it forked, which bounds the child's resident
  set before its exec; a `peak_kib` not above it says only that the command peaked at
  most this high (`exact` is false). The launcher imports as little as it can, and
  `python -S` skips site-packages, to keep this floor low (about 9 MB).
- `seconds`: from fork to the child's exit (MPI_Init to MPI_Finalize and what lies
  around them, but not mpirun's own start).
- `status`: the child's wait status.

It exits as the child did (the same code, or the same signal) and passes SIGTERM, SIGINT
and SIGHUP on to it. Only the standard library, so that `python -S` can run it; the
modules only the reports need (json) load after the child is gone."""

import os
import resource
import signal
import sys
import time

# The variables MPICH's Hydra, OpenMPI and PMIx set to each rank's number.
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Report:
    """What one run of a command left: see the module's docstring."""

    def __init__(self, peak_kib: int, floor_kib: int, seconds: float, status: int) -> None:
        self.peak_kib = peak_kib
        self.floor_kib = floor_kib
        self.seconds = seconds
        self.status = status

    @property
    def exact(self) -> bool:
        """Whether `peak_kib` is the command's own peak, not a bound from this launcher."""
        return self.peak_kib > self.floor_kib

    @property
    def peak_mb(self) -> float:
        return self.peak_kib * 1024 / 1e6

    def fields(self) -> dict[str, float]:
        return {
            "peak_kib": self.peak_kib,
            "floor_kib": self.floor_kib,
            "seconds": self.seconds,
            "status": self.status,
        }

    def __repr__(self) -> str:
        return f"Report({self.fields()})"


def measure(command: list[str]) -> Report:
    """Run `command` (its first word a path, or a name on PATH) as a child of this process."""
    floor = own_high_water()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as error:
            print(f"peak_rss: cannot run {command[0]}: {error}", file=sys.stderr)
        os._exit(127)
    previous = {
        sig: signal.signal(sig, lambda number, _: os.kill(pid, number)) for sig in FORWARDED
    }
    try:
        _, status, usage = os.wait4(pid, 0)  # retried by Python when a signal interrupts it
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return Report(usage.ru_maxrss, floor, time.perf_counter() - began, status)


def own_high_water() -> int:
    """This process's own peak resident set (KiB): VmHWM, its memory's high-water mark
    since its exec. Not ru_maxrss, which also holds what the process that started this
    one had resident when it forked (all of pytest's memory, say), kept across the exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rank_name() -> str:
    for variable in RANK_VARIABLES:
        if variable in os.environ:
            return os.environ[variable]
    return f"pid{os.getpid()}"


def write_report(folder: str, name: str, report: Report) -> None:
    import json

    with open(os.path.join(folder, f"{name}.json"), "w") as file:
        json.dump(report.fields(), file)


def read_reports(folder: str) -> dict[str, Report]:
    """The reports a run left in `folder`, by rank name (a rank's number as text)."""
    import json

    reports: dict[str, Report] = {}
    for entry in sorted(os.listdir(folder)):
        if entry.endswith(".json"):
            with open(os.path.join(folder, entry)) as file:
                fields = json.load(file)
            reports[entry.removesuffix(".json")] = Report(
                int(fields["peak_kib"]),
                int(fields["floor_kib"]),
                float(fields["seconds"]),
                int(fields["status"]),
            )
    return reports


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: peak_rss.py REPORT_DIR COMMAND [ARG ...]", file=sys.stderr)
        return 2
    report = measure(argv[1:])
    write_report(argv[0], rank_name(), report)
    if os.WIFSIGNALED(report.status):
        number = os.WTERMSIG(report.status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    return os.waitstatus_to_exitcode(report.status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
