"""Where ranks run: the mpirun hostfile and thread count for a machine description.

Ranks fill the nodes in order, as many on each as its devices run (`Node.ranks`), which is
how both MPICH (`host:slots`, `-f FILE`) and OpenMPI (`host slots=N`, `--hostfile FILE`)
place consecutive ranks when given a hostfile. A one-node run needs no hostfile.
"""

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic, warn
from dhir.machine.description import Node, System
from dhir.machine.files import device_loc
from dhir.targets import DeviceKind


@dataclass(frozen=True)
class LaunchPlan:
    system: System
    ranks: int
    hostfile: Path | None  # None: every rank on the local node
    threads: int  # OpenMP threads per rank


def rank_slots(system: System, ranks: int) -> list[tuple[Node, int]]:
    """(node, ranks on it) for the first `ranks` ranks of `system`, nodes in order."""
    if ranks < 1:
        raise DhirError([Diagnostic(f"the rank count must be at least 1, got {ranks}")])
    if ranks > system.rank_count:
        raise DhirError(
            [
                Diagnostic(
                    f"the machine description '{system.name}' runs {_ranks(system.rank_count)} "
                    f"({_per_node(system)}); {_ranks(ranks)} do not fit. Ask for at most "
                    f"{system.rank_count} with -n, or describe more devices or ranks"
                )
            ]
        )
    slots = []
    left = ranks
    for node in system.nodes:
        if left == 0:
            break
        taken = min(node.ranks, left)
        slots.append((node, taken))
        left -= taken
    return slots


def hostfile_text(system: System, ranks: int, mpi: str) -> str:
    """The hostfile placing the first `ranks` ranks of `system`, in `mpi`'s syntax."""
    return slots_text([(node.host, n) for node, n in rank_slots(system, ranks)], mpi)


def slots_text(slots: Sequence[tuple[str, int]], mpi: str) -> str:
    """A hostfile giving each (host, count) of `slots` that many ranks, in order, in
    `mpi`'s syntax."""
    line = "{host}:{n}" if mpi == "mpich" else "{host} slots={n}"
    return "".join(line.format(host=host, n=n) + "\n" for host, n in slots)


def threads_per_rank(system: System, ranks: int) -> int:
    """The cores of each node shared among the ranks placed on it; the smallest share, since
    every rank gets the same OMP_NUM_THREADS."""
    return min(max(1, node.cores // n) for node, n in rank_slots(system, ranks))


def launch_plan(
    system: System, ranks: int | None, mpi: str, directory: Path, source: str | None = None
) -> LaunchPlan:
    """How to run all of `system`'s ranks (`ranks`, when given, must be their number: the
    program is placed on the whole description). With more than one node, a hostfile is
    written to `directory` (named by its content); one node is this one, reached with -n.
    `source`: the file `system` was read from, which errors name. The one check of
    `ranks` for `dhir run --system` and `dhir.run(system=...)`: its words serve both."""
    count = system.rank_count
    if ranks is not None and ranks != count:
        named = f"'{system.name}'" + (f" ({source})" if source is not None else "")
        raise DhirError(
            [
                Diagnostic(
                    f"the machine description {named} runs {_ranks(count)} "
                    f"({_per_node(system)}), not {ranks}: a program runs on all of them. Leave "
                    f"out -n (ranks= in the API), or give -n {count} (ranks={count} in the "
                    f"API); build an executable for {_ranks(count)}; or describe {_ranks(ranks)}"
                )
            ]
        )
    for node in system.nodes:
        _warn_if_crowded(node, source)
    threads = threads_per_rank(system, count)
    if len(system.nodes) == 1:
        return LaunchPlan(system, count, None, threads)
    text = hostfile_text(system, count, mpi)
    path = Path(directory) / f"hosts-{hashlib.sha256(text.encode()).hexdigest()[:16]}.{mpi}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not _holds(path, text):
            _write_aside(path, text)
    except OSError as error:
        raise DhirError(
            [Diagnostic(f"cannot write the hostfile {path}: {error.strerror}")]
        ) from None
    return LaunchPlan(system, count, path, threads)


def _warn_if_crowded(node: Node, source: str | None) -> None:
    """A warning, at the `ranks` of the node's device that runs most, where its ranks
    outnumber the cores its CPUs give (not guessed: a CPU without `cores` counts 1): each
    rank polls a core of its own while it waits, so the run will be slow."""
    cpus = [d for d in node.devices if d.kind == DeviceKind.CPU]
    if any(d.cores is None or "cores" in d.guessed for d in cpus):
        return
    if node.ranks <= node.cores:
        return
    busiest = max(node.devices, key=lambda d: d.ranks)
    loc = None
    if source is not None:
        loc = device_loc(Path(source), busiest.name, "ranks") or device_loc(
            Path(source), busiest.name
        )
    named = "" if loc is not None or source is None else f"{source}: "
    message = (
        f"{named}node '{node.name}' runs {_ranks(node.ranks)} on {node.cores} "
        f"core{'s' * (node.cores != 1)}: MPI ranks wait by polling, each on a core, so the "
        f"run will be slow; give its devices at most {node.cores} ranks in all"
    )
    warn(Diagnostic(message, loc, "warning"))


def _holds(path: Path, text: str) -> bool:
    """Whether `path` is a regular file of `text`: one cut short or edited by hand placed
    the ranks wrongly, and writing into a FIFO left there waited for a reader for good."""
    try:
        return path.is_file() and path.read_text() == text
    except (OSError, ValueError):
        return False


def _write_aside(path: Path, text: str) -> None:
    """`text` in `path`, whole (a concurrent run reads the old file or the new one)."""
    aside = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        aside.write_text(text)
        aside.replace(path)
    finally:
        aside.unlink(missing_ok=True)


def _per_node(system: System) -> str:
    return ", ".join(f"{node.name}: {node.ranks}" for node in system.nodes)


def _ranks(count: int) -> str:
    return f"{count} rank" if count == 1 else f"{count} ranks"
