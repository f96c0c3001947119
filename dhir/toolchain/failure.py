"""What the ranks of a failed run were doing, and which of them died first.

Every rank keeps its state in a file mapped into its memory (dhir_rt.c, "where each rank
is"): its rank and pid, whether it is running a task (and which), between tasks, in an MPI
call, or done, and the table of task names. The file outlives the rank, even one killed
with SIGKILL, so the launcher reads the files once mpirun has ended.
"""

import re
import struct
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dhir.ir.diagnostics import SourceLoc

# The header dhir_rt.c writes: magic, then int64 rank, pid, phase, task, call, peer.
_HEADER = struct.Struct("=8s6q")
_MAGIC = b"DHIRST01"
_TABLE_AT = 4096
# Phases and calls as dhir_rt.c numbers them.
_TASK, _BETWEEN, _MPI, _DONE, _INPUTS, _RESULTS = 1, 2, 3, 4, 5, 6
_CALLS = {
    1: "a receive (dhir_rt_recv)",
    2: "a send (dhir_rt_send)",
    3: "waiting for its sends (dhir_rt_wait)",
    4: "a broadcast (dhir_rt_bcast)",
    5: "a gather (dhir_rt_allgatherv/gatherv)",
    6: "a barrier (dhir_rt_barrier)",
}
# How the runtime names a rank in trouble ("dhir: error on rank 1: ..."), MPICH's report of
# a dead rank (by pid: "PID 4242 RUNNING AT host" / "EXIT CODE: 9"), and OpenMPI's
# ("process rank 1 with PID 4242 on node host exited on signal 9").
_RUNTIME_REPORT = re.compile(r"dhir: error on rank (\d+):")
_MPICH_REPORT = re.compile(r"\bPID (\d+) RUNNING AT ")
_OPENMPI_REPORT = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on")
# How the MPIs' TCP transports fail a rank whose peer's process is gone.
_LOST_PEER = re.compile(r"Socket closed|Connection reset by peer|connection closed", re.I)
# OpenMPI's report of a rank that aborted (its own MPI error handler, e.g. a socket closed).
_OPENMPI_ABORT = re.compile(r"due to process rank (\d+) with PID \d+ on node \S+ calling")
# How a note of dhir.analysis.arg_origins ends a check's message ("... (the size of
# @main's argument %a, dimension 0)"): the numbers the check found go before it. Here,
# not there, so that the cached path's failures read without loading xDSL. The note runs
# from its first words to the end: an entry's name may hold parentheses (`@"f(x)"`).
_NOTE = re.compile(
    r"(.*?)( \((?:dimension \d+: |it has |the index (?:along dimension \d+ )?is )?"
    r"the (?:size|value) of @.*'s argument .*\))",
    re.DOTALL,
)
# What a failed check of --runtime-checks prints (MLIR's cf.assert, verbose-level=0; see
# dhir.toolchain.build.RUNTIME_CHECKS): what is wrong, then the checked op's location.
_FAILED_CHECK = re.compile(
    r"Runtime op verification failed\r?\n\^ ([^\r\n]*)\r?\n"
    r'Location: loc\((?:"((?:[^"\\]|\\.)*)":(\d+):(\d+)|[^\r\n]*)\)'
)

# What dhir-bounds-checks' call writes before its check stops the rank: the numbers the
# check's message does not hold (dhir_rt_out_of_bounds).
_BOUNDS_DETAIL = re.compile(
    r"dhir: out-of-bounds access on rank \d+: (index -?\d+ of dimension \d+, whose size is \d+)"
)
OUT_OF_BOUNDS = "out-of-bounds access"
# What dhir-cast-sizes' call writes before its check ("size mismatch of dim D") stops the
# rank (dhir_rt_cast_size).
_SIZE_DETAIL = re.compile(
    r"dhir: size mismatch on rank \d+: dimension (\d+) of the cast's operand has (-?\d+), "
    r"where its type says (\d+)"
)
_SIZE_MISMATCH = re.compile(r"size mismatch of dim (\d+)")
# dhir-linalg-sizes' (dhir_rt_loop_size), before MLIR's words for a linalg op's check.
_LOOP_DETAIL = re.compile(
    r"dhir: size mismatch on rank \d+: dimension (\d+) of operand #(\d+) has (-?\d+), "
    r"where the loop along it runs (-?\d+) times"
)
_INCOMPATIBLE = re.compile(r"dimension #(\d+) of input/output operand #(\d+) is incompatible.*")
# dhir-cast-checks' (dhir_rt_cast_layout, dhir_rt_subview_numbers, dhir_rt_expand_sizes),
# before its words for a memref.cast's offset or stride, a subview, an expand_shape.
_OFFSET_DETAIL = re.compile(
    r"dhir: layout mismatch on rank \d+: the cast's operand has offset (-?\d+), "
    r"where its type says (-?\d+)"
)
_STRIDE_DETAIL = re.compile(
    r"dhir: layout mismatch on rank \d+: dimension (\d+) of the cast's operand has stride "
    r"(-?\d+), where its type says (-?\d+)"
)
_SUBVIEW_DETAIL = re.compile(
    r"dhir: subview out of bounds on rank \d+: dimension (\d+) has offset (-?\d+), "
    r"size (-?\d+) and stride (-?\d+) in a source of (-?\d+)"
)
_EXPAND_DETAIL = re.compile(
    r"dhir: size mismatch on rank \d+: expand_shape's sizes for dimension (\d+) "
    r"multiply to (-?\d+), where its source has (-?\d+)"
)
# The checks' words (dhir.transforms.cast_checks), each with the report that fills it.
_VIEW_DETAILS = (
    (
        re.compile(r"offset mismatch"),
        _OFFSET_DETAIL,
        ": the cast's operand has offset {}, where its type says {}",
    ),
    (
        re.compile(r"stride mismatch of dim (\d+)"),
        _STRIDE_DETAIL,
        ": the cast's operand has stride {} there, where its type says {}",
    ),
    (
        re.compile(r"subview runs out-of-bounds along dimension (\d+)"),
        _SUBVIEW_DETAIL,
        ": offset {}, size {} and stride {} in a dimension of {}",
    ),
    (
        re.compile(r"expand_shape's sizes do not multiply to dimension (\d+) of its source"),
        _EXPAND_DETAIL,
        ": they multiply to {}, where it has {}",
    ),
)


@dataclass(frozen=True)
class FailedCheck:
    """A runtime check that stopped a rank: what it found, where the op it checks is."""

    what: str
    loc: SourceLoc | None


def failed_check(output: str, errors: str = "") -> FailedCheck | None:
    """The first runtime check the ranks' `output` says failed (None: none did), with the
    index and size of an out-of-bounds access where `output` or the ranks' error files
    (`errors`) hold them."""
    match = _FAILED_CHECK.search(output)
    if match is None:
        return None
    what, named = _words(match.group(1))
    detail = _BOUNDS_DETAIL.search(errors + output) if what == OUT_OF_BOUNDS else None
    if detail is not None:
        what += f": {detail.group(1)}"
    text = errors + output
    what += _size_detail(what, text) + _loop_detail(what, text) + _view_detail(what, text) + named
    file, line, column = match.group(2, 3, 4)
    if file is None:  # an op without a location: dhir made it
        return FailedCheck(what, None)
    return FailedCheck(what, SourceLoc(_unescaped(file), int(line), int(column)))


def _words(message: str) -> tuple[str, str]:
    """A check's message as its words and the note that ends it, naming the entry's
    argument a size is (dhir.analysis.arg_origins; empty where it has none): the numbers
    the check found go between them."""
    found = _NOTE.fullmatch(message)
    return (message, "") if found is None else (found.group(1), found.group(2))


# What dhir_rt.c's reports of an op write of it: "the loop at line 7, column 3 runs where
# ...", "the allocation at line 7, column 12 of 728 TiB failed: ...".
_LOCATED_REPORT = re.compile(
    r"dhir: error on rank \d+: ([^\n]*?) at line (\d+), column (\d+)([^\n]*)"
)


def located_report(text: str, states: Mapping[int, "RankState"]) -> FailedCheck | None:
    """The first report of the ranks' runtime (`text`) that names an op by its line and
    column, as the op's `file:line:col`: the file is the program's, which the task table
    names with each task. None where no report names one, or no task has a location."""
    match = _LOCATED_REPORT.search(text)
    if match is None:
        return None
    file = _program_file(states)
    if file is None:
        return None
    what, line, column, rest = match.groups()
    return FailedCheck(what + rest, SourceLoc(file, int(line), int(column)))


def _program_file(states: Mapping[int, "RankState"]) -> str | None:
    """The file of the first located task in the ranks' task table (its entries are
    "name<TAB>file:line:col<TAB>...")."""
    for state in states.values():
        for task in state.tasks:
            fields = task.split("\t")
            where = fields[1] if len(fields) > 1 else ""
            file, _, rest = where.rpartition(":")
            file, _, line = file.rpartition(":")
            if file and line.isdigit() and rest.isdigit():
                return file
    return None


def _size_detail(what: str, text: str) -> str:
    """The sizes a failed check of a cast's dimension found, where `text` holds them."""
    return _detail(
        _SIZE_MISMATCH.fullmatch(what),
        _SIZE_DETAIL.findall(text),
        ": the cast's operand has {} there, where its type says {}",
    )


def _loop_detail(what: str, text: str) -> str:
    """The sizes a failed check of a linalg op's operand found, where `text` holds them."""
    return _detail(
        _INCOMPATIBLE.fullmatch(what),
        _LOOP_DETAIL.findall(text),
        ": it has {}, where the loop along it runs {} times",
    )


def _view_detail(what: str, text: str) -> str:
    """The numbers a failed check of a cast's layout, a subview or an expand_shape found,
    where `text` holds them."""
    for words, report, filled in _VIEW_DETAILS:
        check = words.fullmatch(what)
        if check is not None:
            return _detail(check, report.findall(text), filled)
    return ""


def _detail(check: re.Match[str] | None, found: list[tuple[str, ...]], words: str) -> str:
    """`words` filled with the numbers of the first runtime report in `found` whose
    leading fields are the failed `check`'s groups (the dimension, the operand)."""
    if check is None:
        return ""
    keys = check.groups()
    for numbers in found:
        if numbers[: len(keys)] == keys:
            return words.format(*numbers[len(keys) :])
    return ""


def _unescaped(text: str) -> str:
    """The text of a string MLIR printed: `\\XX` is the byte XX (a UTF-8 name's too),
    `\\\\` a backslash."""
    parts = re.split(r"\\([0-9A-Fa-f]{2}|\\)", text)
    data = b"".join(
        (b"\\" if part == "\\" else bytes.fromhex(part)) if index % 2 else part.encode()
        for index, part in enumerate(parts)
    )
    return data.decode(errors="replace")


@dataclass(frozen=True)
class RankState:
    rank: int
    pid: int
    phase: int
    task: int
    call: int
    peer: int
    # "name<TAB>location<TAB>schedule<TAB>kind<TAB>rank", by task id (dhir-track-tasks'
    # table, the rank added by the native backend; older tables lack it)
    tasks: tuple[str, ...]

    def task_name(self) -> str | None:
        if not 0 <= self.task < len(self.tasks):
            return None
        name, where, *_ = [*self.tasks[self.task].split("\t"), ""]
        return f"task {name}" + (f" at {where}" if where else "")

    def has_no_task(self) -> bool:
        """Whether the table says no task runs on this rank (False where it does not say:
        a table without ranks)."""
        ranks = [line.split("\t")[4:5] for line in self.tasks]
        return all(ranks) and str(self.rank) not in (r for [r] in ranks)

    def waiting_on(self) -> int | None:
        """The rank this one was in an MPI call with, if any."""
        mine = self.peer == self.rank  # the root of its own broadcast or gather
        return self.peer if self.phase == _MPI and self.peer >= 0 and not mine else None

    def doing(self) -> str:
        """What the rank was doing, as a phrase."""
        task = self.task_name()
        if self.phase == _TASK:
            return f"running {task}" if task else "running a task"
        if self.phase == _DONE:
            return "finishing, after its last task"
        after = f", after {task}" if task else ", before its first task"
        if self.has_no_task():  # more ranks than tasks, or placement left it none
            after = ", with no task of its own"
        if self.phase == _MPI:
            call = _CALLS.get(self.call, "an MPI call")
            return f"in {call}{self._peer()}{after}"
        if self.phase == _INPUTS:
            return f"reading its part of the inputs{after}"
        if self.phase == _RESULTS:
            return f"writing the results through rank 0{after}"
        if self.phase != _BETWEEN:
            return f"starting{after}"
        return f"between tasks{after}" if task else f"in host code, past its first messages{after}"

    def _peer(self) -> str:
        if self.peer < 0:
            return ""
        return " as its root" if self.peer == self.rank else f" with rank {self.peer}"


def read_states(directory: Path) -> dict[int, RankState]:
    """Every rank's last state, by rank (ranks that never got to write one are missing)."""
    states: dict[int, RankState] = {}
    for path in sorted(directory.glob("rank*.state")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if len(data) < _HEADER.size or data[:8] != _MAGIC:
            continue
        _, rank, pid, phase, task, call, peer = _HEADER.unpack_from(data)
        table = data[_TABLE_AT:].decode(errors="replace").splitlines()
        states[rank] = RankState(rank, pid, phase, task, call, peer, tuple(table))
    return states


def read_pids(directory: Path, known: Collection[str] = ()) -> dict[int, int]:
    """Each rank's pid, from the headers alone (the launcher looks while the ranks run);
    files named in `known` are not read again."""
    pids: dict[int, int] = {}
    for path in directory.glob("rank*.state"):
        if path.name in known:
            continue
        try:
            with open(path, "rb") as file:
                data = file.read(_HEADER.size)
        except OSError:
            continue
        if len(data) == _HEADER.size and data[:8] == _MAGIC:
            _, rank, pid, *_ = _HEADER.unpack(data)
            pids[rank] = pid
    return pids


def first_dead(
    reports: str, log: str, vanished: Iterable[int], states: Mapping[int, RankState]
) -> int | None:
    """The rank that died first: the one whose runtime reported the error, else the one
    the MPI names (MPICH by its pid), else the first whose process was seen gone. Over
    TCP a rank waiting on one that died may fail first (its socket closed) and be named:
    then the peer it waited on, if that was seen gone before it, died first."""
    vanished = list(vanished)
    lost = _LOST_PEER.search(reports + log) is not None
    for text in (reports, log):
        match = _RUNTIME_REPORT.search(text)
        if match is not None:
            return _waited_on(int(match.group(1)), lost, vanished, states)
    match = _OPENMPI_REPORT.search(log) or _OPENMPI_ABORT.search(log)
    if match is not None:
        return _waited_on(int(match.group(1)), lost, vanished, states)
    by_pid = {state.pid: rank for rank, state in states.items()}
    for match in _MPICH_REPORT.finditer(log):
        if int(match.group(1)) in by_pid:
            return _waited_on(by_pid[int(match.group(1))], lost, vanished, states)
    return next((r for r in vanished if r not in states or states[r].phase != _DONE), None)


def _waited_on(named: int, lost: bool, vanished: list[int], states: Mapping[int, RankState]) -> int:
    """`named`, or the peer it was in an MPI call with when it failed for having lost its
    connection to that peer, or when that peer was seen gone before it, or when neither
    was seen go (mpirun ended both between two looks, and MPICH may then name either:
    the rank waiting on the other is the likelier casualty)."""
    peer = states[named].waiting_on() if named in states else None
    if peer is None or lost:
        return named if peer is None else peer
    if named not in vanished and peer not in vanished:
        return peer
    if peer not in vanished or (named in vanished and vanished.index(named) < vanished.index(peer)):
        return named
    return peer


def explain(states: Mapping[int, RankState], dead: int | None) -> tuple[str, list[str]]:
    """Which rank died and what it was running (empty when unknown), and a line for
    where each other rank was."""
    first = ""
    if dead is not None:
        if dead in states:
            first = f"rank {dead} died while {states[dead].doing()}"
        else:
            # Before its first task, or on a node that does not see the run's directory.
            first = f"rank {dead} died before it told where it was (no state file)"
    others = [f"rank {r} was {states[r].doing()}" for r in sorted(states) if r != dead]
    return first, others
