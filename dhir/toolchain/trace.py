"""`dhir run --trace FILE.json`: what each rank's runtime recorded (dhir/runtime/dhir_rt.c,
"the trace") as one Chrome trace-event file, which Perfetto (ui.perfetto.dev) and
chrome://tracing open.

Each rank is a process ("rank R") with three tracks: its tasks (each run of a task, under
its name, with its location and how many times it had run before in `args`), its MPI calls
(sends, receives, waits, broadcasts, gathers, barriers, with the peer rank and bytes) and
its I/O (reading each input, writing each result); a rank that used its GPU has a fourth,
"GPU": each kernel under its name and each copy with its direction and bytes, as the GPU
timed them. A message is also an arrow from the
send (blocking or not) to the receive that took it (from the send's start to the receive's
end, where the data had arrived; for a device message a non-blocking receive took, a peer
copy's word back, to the instant in the wait that found it done): the k-th send from rank A
to rank B
with tag T meets the k-th receive on B from A with tag T, as MPI's ordering promises.
Times are microseconds from the barrier every rank passed at start. A run that fails leaves
what its ranks recorded up to the failure, marked partial in `otherData` (with why), which
`dhir gantt` says.
"""

import json
import math
import os
import uuid
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic, read_file
from dhir.placement.graph import Placement, TaskGraph
from dhir.placement.render import Arrow, Span

TASK, RECV, SEND, WAIT, BCAST, GATHER, BARRIER, ISEND, READ, WRITE, KERNEL, COPY, TOOK = range(13)
_CALLS = {
    RECV: "recv",
    SEND: "send",
    WAIT: "wait",
    BCAST: "broadcast",
    GATHER: "gather",
    BARRIER: "barrier",
    ISEND: "isend",
}
_PEER_WORD = {RECV: "from", SEND: "to", ISEND: "to"}
DEVICE_TAG = 1 << 30  # added to device messages' tags (DEVICE_TRACE_TAG in dhir_rt.c)
_TRACKS = {"tasks": 0, "MPI": 1, "I/O": 2}
GPU_TRACK = 3
_DIRECTIONS = ("h2d", "d2h", "d2d")  # a copy's peer field


@dataclass(frozen=True)
class Event:
    rank: int
    kind: int
    begin: int  # ns from the common origin
    end: int
    id: int  # a task's id, an isend's slot, an input's or result's argument index
    peer: int
    bytes: int
    tag: int


@dataclass(frozen=True)
class RankTrace:
    rank: int
    tasks: dict[int, tuple[str, ...]]  # id -> (name, location, schedule, device kind)
    events: list[Event]
    kernels: dict[int, str] = field(default_factory=dict)  # id -> a GPU kernel's name
    # Why the rank wrote what it had recorded before the run ended ("error", "crash",
    # "stopped": dhir_rt.c's partial trace); None: it finished.
    partial: str | None = None


def read_rank(path: Path, rank: int) -> RankTrace:
    """One rank's `rank<R>.trace`."""
    tasks: dict[int, tuple[str, ...]] = {}
    kernels: dict[int, str] = {}
    events: list[Event] = []
    partial = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("T "):
            _, number, rest = line.split(" ", 2)
            tasks[int(number)] = tuple(rest.split("\t"))
        elif line.startswith("K "):
            _, number, name = line.split(" ", 2)
            kernels[int(number)] = name
        elif line.startswith("E "):
            values = [int(v) for v in line.split()[1:]]
            events.append(Event(rank, *values))
        elif line.startswith("P "):
            partial = line[2:]
    return RankTrace(rank, tasks, events, kernels, partial)


def read_ranks(directory: Path, ranks: int) -> list[RankTrace]:
    """Every rank's trace in `directory`; an error naming the ranks that wrote none."""
    missing = [r for r in range(ranks) if not (directory / f"rank{r}.trace").exists()]
    if missing:
        raise DhirError(
            [
                Diagnostic(
                    f"no trace from rank{'s' * (len(missing) > 1)} "
                    f"{', '.join(map(str, missing))}: the run ended before writing it"
                )
            ]
        )
    return [read_rank(directory / f"rank{r}.trace", r) for r in range(ranks)]


def chrome_trace(traces: list[RankTrace], partial: str | None = None) -> dict[str, object]:
    """The trace-event JSON object of every rank's events; `partial`: why the run's trace
    is not complete (in `otherData`, which `dhir gantt` reads)."""
    out: list[dict[str, object]] = []
    for trace in traces:
        out.append(_meta("process_name", trace.rank, 0, f"rank {trace.rank}"))
        out.append(_meta("process_sort_index", trace.rank, 0, trace.rank))
        for track, tid in _TRACKS.items():
            out.append(_meta("thread_name", trace.rank, tid, track))
        if any(e.kind in (KERNEL, COPY) for e in trace.events):
            out.append(_meta("thread_name", trace.rank, GPU_TRACK, "GPU"))
        runs: dict[int, int] = defaultdict(int)
        for event in trace.events:
            out.append(_complete(event, trace, runs))
    out += _flows([e for t in traces for e in t.events])
    other: dict[str, object] = {"producer": "dhir"}
    if partial is not None:
        other["partial"] = partial
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": other}


def write_partial_trace(directory: Path, ranks: int, destination: Path, why: str) -> str | None:
    """After a failed run (`why`): what the ranks in `directory` recorded up to the failure,
    as a Chrome trace marked partial, written as `write_chrome_trace` writes; None (and no
    file) when no rank wrote any. Otherwise, what was written, for the run's error."""
    found = [r for r in range(ranks) if (directory / f"rank{r}.trace").exists()]
    if not found:
        return None
    traces = [read_rank(directory / f"rank{r}.trace", r) for r in found]
    stopped = [f"rank {t.rank} ({_STOPPED.get(t.partial, t.partial)})" for t in traces if t.partial]
    finished = [t.rank for t in traces if t.partial is None]
    missing = sorted(set(range(ranks)) - set(found))
    parts = [f"the run failed ({why})"]
    if stopped:
        parts.append("recorded up to the failure: " + ", ".join(stopped))
    if finished:
        parts.append(f"finished: {_ranks_list(finished)}")
    if missing:
        parts.append(f"no events from {_ranks_list(missing)} (killed before writing them)")
    text = "; ".join(parts)
    _write_atomically(json.dumps(chrome_trace(traces, text)), destination)
    return text


_STOPPED = {
    "error": "it reported an error",
    "crash": "it crashed",
    "stopped": "stopped at the timeout",
}


def _ranks_list(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def write_chrome_trace(directory: Path, ranks: int, destination: Path) -> None:
    """Turn the ranks' traces in `directory` into the Chrome trace `destination`. A file is
    written under a temporary name beside it and renamed when complete: a full disk, Ctrl-C
    or another run writing the same path never leaves a trace cut short or two runs' bytes
    mixed. What is no file (/dev/null, a pipe) is written as it is."""
    _write_atomically(json.dumps(chrome_trace(read_ranks(directory, ranks))), destination)


def _write_atomically(text: str, destination: Path) -> None:
    """`text` to `destination` under a temporary name, renamed when complete."""
    special = destination.exists() and not destination.is_file()
    temporary = destination.with_name(f".{destination.name}.{uuid.uuid4().hex}.tmp")
    try:
        if special:
            destination.write_text(text)
            return
        # Made as open() makes files, 0666 less the umask (mkstemp's are 0600).
        with open(temporary, "x") as file:
            file.write(text)
        os.replace(temporary, destination)
    except OSError as error:
        reason = error.strerror or str(error)  # not Python's "[Errno 21] ..."
        raise DhirError([Diagnostic(f"cannot write the trace {destination}: {reason}")]) from None
    finally:
        with suppress(OSError):  # a read-only folder refuses even this (EROFS)
            temporary.unlink(missing_ok=True)


@dataclass(frozen=True)
class TraceChart:
    graph: TaskGraph
    placement: Placement
    arrows: list[Arrow]
    partial: str | None  # why the trace is of a run that failed, as it says; None: whole
    io: list[Span] = field(default_factory=list)  # each input read and result write


def trace_chart(path: Path) -> TraceChart:
    """A trace `dhir run --trace` wrote, as a Gantt chart's rows (one per rank), bars (each
    run of a task: its name, ` #K` for its K-th run after the first) and arrows (each
    message, from its send to its receive), and whether it is partial. An error naming the
    file, and the event where one is at fault, for anything that is not such a trace."""
    try:
        events, partial = _trace_events(path)
        graph, placement, arrows = _chart(events)
        return TraceChart(graph, placement, arrows, partial, _io(events, graph.devices))
    except _NotATrace as problem:
        raise DhirError(
            [
                Diagnostic(
                    f"cannot read the trace {path}: {problem} "
                    "(dhir gantt draws what dhir run --trace wrote)"
                )
            ]
        ) from None


class _NotATrace(Exception):
    """What in a file makes it no trace of dhir's (the message says where and why)."""


def _trace_events(path: Path) -> tuple[list[object], str | None]:
    """The file's `traceEvents` list, and why it is partial (None: it is not)."""
    try:
        text = read_file(path).decode()  # bounded: a pipe or device that never ends
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot read the trace {path}: {error.strerror}")]) from None
    except ValueError:  # UnicodeDecodeError
        raise _NotATrace("it is not text") from None
    if not text.strip():
        raise _NotATrace("it is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise _NotATrace(_json_fault(text, error)) from None
    except (ValueError, RecursionError):  # a number of too many digits, nesting too deep
        raise _NotATrace("it is not JSON") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise _NotATrace("it has no list 'traceEvents'")
    _check_producer(data)
    partial = data["otherData"].get("partial")
    if partial is not None and not isinstance(partial, str):
        raise _NotATrace(f"its otherData's 'partial' is {_show(partial)}, not a string")
    return events, partial


def _check_producer(data: dict[str, object]) -> None:
    """dhir's traces say they are dhir's (otherData.producer, in every trace it wrote):
    another tool's (a browser's, Perfetto's) was drawn as an empty run of ranks named after
    its process ids, exit status 0."""
    other = data.get("otherData")
    producer = other.get("producer") if isinstance(other, dict) else None
    if producer is None:
        raise _NotATrace('it is another tool\'s trace: its otherData has no "producer": "dhir"')
    if producer != "dhir":
        raise _NotATrace(f"it is another tool's trace: its producer is {_show(producer)}")


def _json_fault(text: str, error: json.JSONDecodeError) -> str:
    """What is wrong with `text` as JSON, and where: a file cut short (a full disk, a copy
    stopped early) says so, since json's 'Expecting value' does not."""
    where = f"line {error.lineno}, column {error.colno}"
    if error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated string"):
        return f"it ends before its JSON does ({where}): was it cut short?"
    return f"it is not JSON ({where}: {error.msg})"


def _chart(events: list[object]) -> tuple[TaskGraph, Placement, list[Arrow]]:
    """`trace_chart` of the trace's events; _NotATrace where they are not what dhir writes."""
    read = [_Read.of(index, e) for index, e in enumerate(events)]
    for event in read:  # one of no kind dhir writes would be left out of the chart
        event.check_kind()
    ranks = sorted({e.natural("pid") for e in read if e.get("ph") == "M"})
    devices = tuple(f"rank{r}" for r in ranks)
    runs = sorted(_TaskRun.of(e, devices) for e in read if e.get("cat") == "task")
    if not devices:
        raise _NotATrace("it names no rank")
    # A run whose work all stayed host code ran no task: its ranks' rows are empty.
    _check_one_bar_each(runs)
    assignment = {run.name: run.device for run in runs}
    start = {run.name: run.start for run in runs}
    finish = {run.name: run.finish for run in runs}
    tasks = tuple(assignment)
    cost = {t: {assignment[t]: finish[t] - start[t]} for t in tasks}
    graph = TaskGraph(devices, tasks, cost, ())
    return graph, Placement(assignment, start, finish), _arrows(read, devices)


@dataclass(frozen=True)
class _Read:
    """One event of the file, read field by field with checks."""

    index: int
    event: dict[str, object]

    @staticmethod
    def of(index: int, event: object) -> "_Read":
        if not isinstance(event, dict):
            raise _NotATrace(f"event {index} is {_show(event)}, not an object")
        return _Read(index, event)

    def get(self, key: str, default: object = None) -> object:
        return self.event.get(key, default)

    def fault(
        self, key: str, value: object, wanted: str, within: dict[str, object] | None = None
    ) -> _NotATrace:
        """What is wrong with the field `key` (of `within`, this event's args, if given)."""
        name = self.get("name")
        which = f"event {self.index}" + (f" ({_show(name)})" if name is not None else "")
        if key not in (self.event if within is None else within):
            whose = "it has" if within is None else "its args have"
            return _NotATrace(f"{which}: {whose} no '{key}' ({wanted})")
        return _NotATrace(f"{which}: '{key}' is {_show(value)}, not {wanted}")

    def natural(
        self, key: str, default: object = None, within: dict[str, object] | None = None
    ) -> int:
        """The field `key` of this event (or of `within`, its args): a whole number >= 0."""
        value = (self.event if within is None else within).get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fault(key, value, "a whole number >= 0", within)
        return value

    def time(self, key: str) -> float:
        """The field `key` in microseconds, as seconds: a finite number >= 0 (times count
        from the barrier at start; a bar before it would be off the chart)."""
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fault(key, value, "a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fault(key, value, "a finite number")
        if isinstance(value, int) and value > 1e300:  # would be inf as a float
            raise self.fault(key, value, "a number within a float's range")
        if value < 0:
            raise self.fault(key, value, "a number >= 0")
        return value / 1e6

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise self.fault(key, value, "a string")
        return value

    def args(self, required: bool) -> dict[str, object]:
        value = self.get("args", None if required else {})
        if not isinstance(value, dict):
            raise self.fault("args", value, "an object")
        return value

    def check_kind(self) -> None:
        """That this is metadata or an event of a kind dhir writes, with its phase."""
        if self.get("ph") == "M":
            return
        cat = self.get("cat")
        if cat not in _PHASES:
            wanted = f"one dhir writes ({_KIND_LIST})" if "cat" in self.event else _KIND_LIST
            raise self.fault("cat", cat, wanted)
        phases = _PHASES[str(cat)]
        if self.get("ph") not in phases:
            wanted = " or ".join(f'"{p}"' for p in phases)
            raise self.fault("ph", self.get("ph"), f"{wanted} (an {cat} event)")

    def rank(self, devices: tuple[str, ...]) -> str:
        """The row of the rank this event ran on, which the metadata must name."""
        device = f"rank{self.natural('pid')}"
        if device not in devices:
            raise self.fault("pid", self.get("pid"), "a rank the trace's metadata names")
        return device


# The phases of each category of event dhir writes (besides metadata, "M").
_PHASES = {"task": ("X",), "io": ("X",), "gpu": ("X",), "mpi": ("X", "i"), "message": ("s", "f")}
_KIND_LIST = "task, io, gpu, mpi or message"


@dataclass(frozen=True, order=True)
class _TaskRun:
    start: float
    finish: float
    name: str
    device: str
    index: int = field(compare=False)  # the event's, for errors

    @staticmethod
    def of(event: _Read, devices: tuple[str, ...]) -> "_TaskRun":
        name, device = event.text("name"), event.rank(devices)
        run = event.natural("run", 0, within=event.args(required=True))
        start, length = event.time("ts"), event.time("dur")
        shown = name if run == 0 else f"{name} #{run}"
        return _TaskRun(start, start + length, shown, device, event.index)


def _check_one_bar_each(runs: list[_TaskRun]) -> None:
    """dhir names each run of a task once (task names are the module's own): two runs of
    one name would share a bar, and the chart would show one of them."""
    seen: dict[str, int] = {}
    for run in runs:
        if run.name in seen:
            first, second = sorted((seen[run.name], run.index))
            raise _NotATrace(f"events {first} and {second} are both the task run {_show(run.name)}")
        seen[run.name] = run.index


def _io(events: list[object], devices: tuple[str, ...]) -> list[Span]:
    """Each input read and result write (the `I/O` track), under its name."""
    spans = []
    for index, event in enumerate(events):
        e = _Read.of(index, event)
        if e.get("cat") == "io" and e.get("ph") == "X":
            begin = e.time("ts")
            spans.append(Span(e.rank(devices), begin, begin + e.time("dur"), e.text("name")))
    return spans


def _arrows(read: list[_Read], devices: tuple[str, ...]) -> list[Arrow]:
    """An arrow per message the trace's flow events pair: from its send to its receive."""
    flows: dict[int, dict[str, tuple[str, float, _Read]]] = defaultdict(dict)
    for e in read:
        if e.get("cat") == "message" and e.get("ph") in ("s", "f"):
            ends = flows[e.natural("id")]
            end = e.text("ph")
            if end in ends:  # a third end: which two belong together is anyone's guess
                raise e.fault("id", e.get("id"), "a message with one start and one end")
            ends[end] = (e.rank(devices), e.time("ts"), e)
    arrows = []
    for number, ends in flows.items():
        if len(ends) == 1:  # dhir writes both ends of each message it pairs
            ((end, (_, _, event)),) = ends.items()
            which = f"event {event.index} ({_show(event.get('name'))})"
            half = "a start and no end" if end == "s" else "an end and no start"
            raise _NotATrace(f"{which}: message {number} has {half}")
        if "s" in ends and "f" in ends:
            (source, begin, send), (target, end, _) = ends["s"], ends["f"]
            nbytes = send.natural("bytes", 0, within=send.args(required=False))
            arrows.append(Arrow(source, target, begin, end, nbytes, source, target))
    return arrows


def _show(value: object) -> str:
    """A value as the file writes it (JSON: NaN, Infinity, true), cut short."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _meta(name: str, pid: int, tid: int, value: object) -> dict[str, object]:
    key = "sort_index" if name.endswith("sort_index") else "name"
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {key: value}}


def _us(ns: int) -> float:
    return ns / 1000.0


def _complete(event: Event, trace: RankTrace, runs: dict[int, int]) -> dict[str, object]:
    base: dict[str, object] = {
        "ph": "X",
        "pid": event.rank,
        "ts": _us(event.begin),
        "dur": _us(max(0, event.end - event.begin)),
    }
    if event.kind == TASK:
        name, *more = trace.tasks.get(event.id, (f"task {event.id}",))
        args: dict[str, object] = {"run": runs[event.id]}
        args |= {k: v for k, v in zip(("location", "schedule", "device"), more, strict=False) if v}
        runs[event.id] += 1
        return {**base, "name": name, "cat": "task", "tid": _TRACKS["tasks"], "args": args}
    if event.kind == KERNEL:
        name = trace.kernels.get(event.id, f"kernel {event.id}")
        return {**base, "name": name, "cat": "gpu", "tid": GPU_TRACK, "args": {}}
    if event.kind == COPY:
        direction = _DIRECTIONS[event.peer] if 0 <= event.peer < 3 else "copy"
        args = {"bytes": event.bytes, "direction": direction}
        return {**base, "name": f"copy {direction}", "cat": "gpu", "tid": GPU_TRACK, "args": args}
    if event.kind == TOOK:  # a moment inside the wait that saw it (dhir_rt.c)
        return _took(event)
    if event.kind in (READ, WRITE):
        what = "read input" if event.kind == READ else "write result"
        args = {"argument": event.id}
        if event.bytes:  # a result each rank writes rows of: its size is not kept
            args["bytes"] = event.bytes
        name = f"{what} #{event.id}"
        return {**base, "name": name, "cat": "io", "tid": _TRACKS["I/O"], "args": args}
    name = _CALLS.get(event.kind, f"call {event.kind}")
    args = {"bytes": event.bytes}
    if event.peer >= 0:
        args["peer"] = event.peer
        name += f" {_PEER_WORD.get(event.kind, 'root')} {event.peer}"
    if event.tag >= DEVICE_TAG:  # between GPU tasks' device buffers (docs/gpu.md)
        name = f"device {name}"
        args["tag"] = event.tag - DEVICE_TAG
    elif event.tag >= 0:
        args["tag"] = event.tag
    return {**base, "name": name, "cat": "mpi", "tid": _TRACKS["MPI"], "args": args}


def _took(event: Event) -> dict[str, object]:
    """A device message a non-blocking receive took (a peer copy's word back): an instant
    on the MPI track, inside the wait that found it done, where its arrow ends."""
    args = {"bytes": event.bytes, "peer": event.peer, "tag": event.tag - DEVICE_TAG}
    return {
        "ph": "i",
        "s": "t",
        "pid": event.rank,
        "tid": _TRACKS["MPI"],
        "ts": _us(event.begin),
        "name": f"device word back from {event.peer}",
        "cat": "mpi",
        "args": args,
    }


def _flows(events: list[Event]) -> list[dict[str, object]]:
    """An arrow from each point-to-point send to the receive that took it."""
    sends: dict[tuple[int, int, int], list[Event]] = defaultdict(list)
    recvs: dict[tuple[int, int, int], list[Event]] = defaultdict(list)
    for event in sorted(events, key=lambda e: e.begin):
        if event.kind in (SEND, ISEND):
            sends[(event.rank, event.peer, event.tag)].append(event)
        elif event.kind in (RECV, TOOK):
            recvs[(event.peer, event.rank, event.tag)].append(event)
    out: list[dict[str, object]] = []
    number = 0
    for key, started in sends.items():
        for send, recv in zip(started, recvs.get(key, [])):
            number += 1
            common = {
                "name": "message",
                "cat": "message",
                "id": number,
                "args": {"bytes": send.bytes},
            }
            start, end = _message_ends(send, recv)
            out.append({**common, "ph": "s", "pid": send.rank, "tid": _TRACKS["MPI"], "ts": start})
            out.append(
                {**common, "ph": "f", "bp": "e", "pid": recv.rank, "tid": _TRACKS["MPI"], "ts": end}
            )
    return out


def _message_ends(send: Event, recv: Event) -> tuple[float, float]:
    """Where a message's arrow starts and ends (us): at its send's start and at its
    receive's end, where the data had arrived. (The slices' middles pointed backwards
    when the receive was posted long before the send.) A nanosecond inside each slice
    that is long enough, so that viewers bind the ends to them; and never backwards,
    though ranks on other hosts may disagree on the time by the start barrier's skew."""
    start = send.begin + (1 if send.end - send.begin >= 2 else 0)
    end = recv.end - (1 if recv.end - recv.begin >= 2 else 0)
    return _us(start), _us(max(start, end))
