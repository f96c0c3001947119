"""`dhir run --trace` (dhir/runtime/dhir_rt.c's trace, dhir/toolchain/trace.py): a real run's
Chrome trace holds every run of every task on the rank that ran it, under its name, tracks
that never overlap themselves, each message as an arrow from its send to its receive, the
input reads and result writes; the converter pairs sends and receives in MPI's order."""

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import DhirError
from dhir.cli.main import main
from dhir.ir.diagnostics import Diagnostic
from dhir.toolchain.launch import TimedOut
from dhir.toolchain.trace import ISEND, RECV, SEND, TASK, Event, RankTrace, chrome_trace

ROOT = Path(__file__).parents[2]
TIME_LOOP = ROOT / "examples" / "time_loop.mlir"
STEPS = 5
native = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _inputs() -> list[object]:
    return [np.arange(16.0), np.zeros(16), STEPS]


def _events(path: Path) -> list[dict]:
    return json.loads(path.read_text())["traceEvents"]


@native
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_traced_run_shows_every_task_run_message_and_io(tmp_path: Path, ranks: int) -> None:
    trace = tmp_path / "run.json"
    want = dhir.run(TIME_LOOP, *_inputs(), backend="interp")
    # As written: dhir-time-tiles would run the 1-rank loop as one task. Round-robin:
    # `best` keeps this loop of nanoseconds a step on one rank, with no messages to see.
    got = dhir.run(TIME_LOOP, *_inputs(), ranks=ranks, trace=trace, optimize=False,
                   placement="round-robin")  # fmt: skip
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    events = _events(trace)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {f"rank {r}" for r in range(ranks)}
    tasks = [e for e in events if e.get("cat") == "task"]
    # Every task (or piece) runs once per step, on one rank, and says where it is written.
    runs = Counter(e["name"] for e in tasks)
    assert runs and set(runs.values()) == {STEPS}, runs
    assert all(e["args"]["location"].startswith(str(TIME_LOOP)) for e in tasks)
    assert {(e["args"]["schedule"], e["args"]["device"]) for e in tasks} == {
        ("main.schedule0", "cpu")
    }
    for name in runs:
        mine = sorted((e for e in tasks if e["name"] == name), key=lambda e: e["ts"])
        assert [e["args"]["run"] for e in mine] == list(range(STEPS))
    for rank in range(ranks):
        for tid in (0, 1, 2):
            track = sorted(
                (e for e in events if e["ph"] == "X" and e["pid"] == rank and e["tid"] == tid),
                key=lambda e: e["ts"],
            )
            assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in track)
            for a, b in zip(track, track[1:]):
                assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, (a, b)
    io = [e for e in events if e.get("cat") == "io"]
    assert {e["name"] for e in io} >= {"read input #0", "read input #1"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    recvs = [e for e in events if e.get("cat") == "mpi" and e["name"].startswith("recv")]
    assert len(ends) == len(recvs)
    if ranks > 1:
        assert recvs, "the steps' tasks share data across ranks"
    for number, start in starts.items():
        assert start["pid"] != ends[number]["pid"]


@native
def test_a_built_executable_is_traced_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exe, trace = tmp_path / "loop", tmp_path / "t.json"
    assert main(["compile", str(TIME_LOOP), "-n", "2", "-o", str(exe)]) == 0
    np.save(tmp_path / "u.npy", np.arange(16.0))
    np.save(tmp_path / "v.npy", np.zeros(16))
    args = ["--input", str(tmp_path / "u.npy"), "--input", str(tmp_path / "v.npy")]
    assert main(["run", str(exe), *args, "--input", "index=2", "--trace", str(trace)]) == 0
    assert Counter(e.get("cat") for e in _events(trace))["task"] >= 2


# Writes the trace of a rank's 2,000 task runs with files limited to 4 KiB (a full disk).
WRITE_ON_A_FULL_DISK = r"""
import resource, signal, sys
from pathlib import Path
from dhir import DhirError
from dhir.toolchain.trace import write_chrome_trace
folder = Path(sys.argv[1])
lines = [f"E 0 {10 * k} {10 * k + 5} 0 -1 0 -1" for k in range(2000)]
(folder / "rank0.trace").write_text("T 0 smooth\tf.mlir:3:5\n" + "\n".join(lines) + "\n")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_chrome_trace(folder, 1, folder / "run.json")
except DhirError as error:
    print(error.diagnostics[0].message)
"""


def test_a_trace_that_cannot_be_written_whole_leaves_no_file(tmp_path: Path) -> None:
    """The trace went straight to its path: a full disk, Ctrl-C while writing or another
    run writing the same path left a file cut short (or two runs' bytes mixed) that
    looked like a trace. It is written beside it and renamed once complete."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", WRITE_ON_A_FULL_DISK, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"cannot write the trace {tmp_path / 'run.json'}: File too large" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.trace"]


# Rank 0 sends to rank 1 as soon as it starts; rank 1 is already waiting, so the receive
# ends microseconds after the send starts, and any skew between the ranks' origins shows.
SEND_AT_ONCE = """
func.func @main(%a: memref<8xf64>, %b: memref<8xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a attributes {dhir.rank = 0} {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f64
      memref.store %x, %a[%c0] : memref<8xf64>
    }
    %t1 = dhir.task %cpu, %a, %b attributes {dhir.rank = 1} {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<8xf64>
      memref.store %x, %b[%c0] : memref<8xf64>
    }
  }
  return
}
"""


def _slice_at(events: list[dict], point: dict) -> dict:
    """The send or receive a flow's end `point` sits in (chrome_trace puts it at the
    middle)."""
    (call,) = [
        e
        for e in events
        if e["ph"] == "X"
        and e["pid"] == point["pid"]
        and e["tid"] == point["tid"]
        and e["name"].split()[0] in ("send", "isend", "recv")
        and e["ts"] <= point["ts"] <= e["ts"] + e["dur"]
    ]
    return call


@native
def test_ranks_on_one_host_share_the_traces_origin(tmp_path: Path) -> None:
    program = tmp_path / "send.mlir"
    program.write_text(SEND_AT_ONCE)
    for attempt in range(4):  # each rank taking its own origin failed 3 runs in 5
        trace = tmp_path / f"run{attempt}.json"
        dhir.run(program, np.zeros(8), np.zeros(8), ranks=2, trace=trace, optimize=False)
        events = _events(trace)
        starts = {e["id"]: e for e in events if e["ph"] == "s"}
        ends = {e["id"]: e for e in events if e["ph"] == "f"}
        assert starts and starts.keys() == ends.keys()
        for number, start in starts.items():
            send, recv = _slice_at(events, start), _slice_at(events, ends[number])
            assert recv["ts"] + recv["dur"] >= send["ts"], (attempt, send, recv)


def test_the_interpreter_has_no_trace(tmp_path: Path) -> None:
    with pytest.raises(DhirError, match="use it with the native backend"):
        dhir.run(TIME_LOOP, *_inputs(), backend="interp", trace=tmp_path / "t.json")


def test_sends_meet_receives_in_order_per_pair_and_tag() -> None:
    def event(rank: int, kind: int, begin: int, peer: int, tag: int) -> Event:
        return Event(rank, kind, begin, begin + 10, 0, peer, 8, tag)

    zero = [event(0, SEND, 0, 1, 7), event(0, ISEND, 100, 1, 7), event(0, SEND, 50, 1, 9)]
    one = [event(1, RECV, 20, 0, 9), event(1, RECV, 60, 0, 7), event(1, RECV, 200, 0, 7)]
    one.append(Event(1, TASK, 300, 400, 0, -1, 0, -1))
    traces = [RankTrace(0, {}, zero), RankTrace(1, {0: ("smooth", "f.mlir:3:5")}, one)]
    events = chrome_trace(traces)["traceEvents"]
    assert isinstance(events, list)
    arrows: dict[int, list[dict]] = {}
    for e in events:
        if e["ph"] in "sf":
            arrows.setdefault(e["id"], []).append(e)
    pairs = sorted((a["ts"], b["ts"]) for a, b in arrows.values())
    # tag 7: sends at 0 and 100 meet the receives at 60 and 200; tag 9: 50 meets 20 (each
    # from a nanosecond into its send to one before its receive's end, never backwards).
    assert pairs == [(0.001, 0.069), (0.051, 0.051), (0.101, 0.209)]
    (task,) = [e for e in events if e.get("cat") == "task"]
    assert task["name"] == "smooth" and task["args"] == {"run": 0, "location": "f.mlir:3:5"}


def test_a_message_arrow_never_points_backwards() -> None:
    """A receive posted long before its send: the arrow joined the slices' middles, so it
    went from the send's (105 ns) back to the receive's (60 ns). It goes from the send's
    start to the receive's end, each a nanosecond inside its slice (for viewers to bind)."""
    send = Event(0, SEND, 100, 110, 0, 1, 8, 3)
    recv = Event(1, RECV, 0, 120, 0, 0, 8, 3)
    instant = Event(0, SEND, 300, 300, 0, 1, 8, 4)  # a slice of no length: its own time
    late = Event(1, RECV, 290, 301, 0, 0, 8, 4)
    traces = [RankTrace(0, {}, [send, instant]), RankTrace(1, {}, [recv, late])]
    events = chrome_trace(traces)["traceEvents"]
    assert isinstance(events, list)
    ends = {(e["id"], e["ph"]): e["ts"] for e in events if e["ph"] in "sf"}
    assert ends == {(1, "s"): 0.101, (1, "f"): 0.119, (2, "s"): 0.3, (2, "f"): 0.3}


@native
def test_dhir_gantt_draws_a_recorded_trace(tmp_path: Path) -> None:
    trace, chart = tmp_path / "run.json", tmp_path / "run.svg"
    dhir.run(TIME_LOOP, *_inputs(), ranks=2, trace=trace, optimize=False)
    assert main(["gantt", str(trace), "-o", str(chart)]) == 0
    text = chart.read_text()
    assert "as run: makespan" in text and "time (" in text
    runs = [e for e in _events(trace) if e.get("cat") == "task"]
    io = [e for e in _events(trace) if e.get("cat") == "io"]
    # A bar per run of each task and per input read and result write, each with its
    # title; an arrow per message.
    assert io and text.count(" on rank") == len(runs) + len(io)
    assert text.count("bytes from rank") == sum(e["ph"] == "s" for e in _events(trace))


# Host code only: no loop nest, so CodeDrop makes no task and the run records none.
HOST_ONLY = """
func.func @main(%a: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<4xi32>
  %w = arith.addi %v, %v : i32
  memref.store %w, %a[%c0] : memref<4xi32>
  return
}
"""


@native
def test_dhir_gantt_draws_a_run_that_ran_no_task(tmp_path: Path) -> None:
    """Such a trace is what dhir run --trace wrote: its ranks' rows, empty (it was refused
    as 'no task runs to draw', as if it were no trace)."""
    trace, chart = tmp_path / "run.json", tmp_path / "run.svg"
    dhir.run(HOST_ONLY, np.arange(4, dtype=np.int32), ranks=2, trace=trace)
    assert not [e for e in _events(trace) if e.get("cat") == "task"]
    assert main(["gantt", str(trace), "-o", str(chart)]) == 0
    text = chart.read_text()
    assert "0 tasks on 2 devices, as run" in text and "rank1" in text


RUN = {"ph": "X", "cat": "task", "pid": 0, "ts": 1, "dur": 2, "name": "t", "args": {}}
RANK = {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "rank 0"}}


def _dhirs(events: list[object]) -> dict[str, object]:
    """A trace file's object, as dhir run --trace writes it, of `events`."""
    return {"traceEvents": events, "otherData": {"producer": "dhir"}}


@pytest.mark.parametrize(
    "trace",
    [
        {},
        {"traceEvents": 3},
        {"traceEvents": [3, "x", None]},
        _dhirs([]),  # no rank
        [{"ph": "X"}],
        _dhirs([RANK, {**RUN, "ts": "abc"}]),
        _dhirs([RANK, {**RUN, "args": None}]),
        _dhirs([RANK, {k: v for k, v in RUN.items() if k != "dur"}]),
        _dhirs([RANK, {**RUN, "dur": -5}]),
        _dhirs([RUN]),  # a run on a rank the trace does not name
        {"traceEvents": [RANK, RUN]},  # another tool's: no producer
    ],
)
def test_dhir_gantt_refuses_what_is_no_trace(
    trace: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(trace))
    assert main(["gantt", str(bad), "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert "cannot read the trace" in err and "internal error" not in err


# A browser's trace: its processes named, a task and a slice opened and closed.
BROWSER = [
    {"ph": "M", "name": "process_name", "pid": 4711, "tid": 0, "args": {"name": "Browser"}},
    {"ph": "X", "name": "RunTask", "cat": "toplevel", "pid": 4711, "tid": 7, "ts": 1, "dur": 3},
    {"ph": "B", "name": "Layout", "cat": "blink", "pid": 4711, "tid": 7, "ts": 5},
    {"ph": "E", "pid": 4711, "tid": 7, "ts": 9},
]


@pytest.mark.parametrize(
    ("other", "fault"),
    [
        ({}, 'its otherData has no "producer": "dhir"'),
        ({"otherData": {"producer": "chrome"}}, 'its producer is "chrome"'),
    ],
)
def test_dhir_gantt_refuses_another_tools_trace(
    other: dict[str, object], fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was drawn, exit status 0, as a run of one rank (rank4711) that ran no task."""
    trace, chart = tmp_path / "browser.json", tmp_path / "browser.svg"
    trace.write_text(json.dumps({"traceEvents": BROWSER, **other}))
    assert main(["gantt", str(trace), "-o", str(chart)]) == 1
    err = capsys.readouterr().err
    assert f"cannot read the trace {trace}: it is another tool's trace: {fault}" in err, err
    assert not chart.exists()


@pytest.mark.parametrize(("name", "shown"), [("chart.txt", ".txt"), ("chart", "chart")])
def test_dhir_gantt_refuses_a_chart_name_it_cannot_draw_before_the_trace(
    name: str, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o x.txt` was said (exit 1) only after the trace was read: a trace not there was
    reported instead."""
    with pytest.raises(SystemExit) as exit_:
        main(["gantt", str(tmp_path / "missing.json"), "-o", str(tmp_path / name)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (
        f"argument -o/--output: cannot draw a Gantt chart as '{shown}': name a .png or .svg file"
        in err
    ), err
    assert "missing.json" not in err and not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["charts", "chart.svg"])
def test_dhir_gantt_to_a_folder_says_it_is_one(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, folder = tmp_path / "run.json", tmp_path / name
    trace.write_text(json.dumps(_dhirs([RANK, RUN])))
    folder.mkdir()
    assert main(["gantt", str(trace), "-o", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"{folder}: it is a folder; name a .png or .svg file to write" in err, err
    assert str(folder / "chart.svg") in err and not any(folder.iterdir())


@pytest.mark.parametrize("how", ["missing", "read-only"])
def test_dhir_gantt_refuses_a_chart_it_cannot_write_before_drawing(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Said after reading the trace and drawing the chart, as the writer's error."""
    from dhir.toolchain import trace as tracing

    def must_not_run(*args: object) -> None:
        raise AssertionError("the trace was read")

    monkeypatch.setattr(tracing, "trace_chart", must_not_run)
    folder = tmp_path / "charts"
    if how == "read-only":
        folder.mkdir(mode=0o555)
        real = os.access  # as it answers a user other than root, whom modes do not stop

        def access(path: str | Path, mode: int) -> bool:
            return not (mode & os.W_OK and Path(path) == folder) and real(path, mode)

        monkeypatch.setattr(os, "access", access)
    trace = tmp_path / "run.json"
    trace.write_text(json.dumps(_dhirs([RANK, RUN])))
    chart = folder / "run.svg"
    assert main(["gantt", str(trace), "-o", str(chart)]) == 1
    reason = "there is no folder" if how == "missing" else "is not writable"
    assert f"cannot write {chart}: " in (err := capsys.readouterr().err) and reason in err


FLOW_START = {"ph": "s", "cat": "message", "name": "message", "id": 1, "pid": 0, "ts": 2}
FLOW_END = {**FLOW_START, "ph": "f", "bp": "e", "ts": 3}


GOOD = [RANK, RUN, FLOW_START, FLOW_END]


@pytest.mark.parametrize(
    ("index", "event", "fault"),
    [
        (1, {**RUN, "ts": float("inf")}, "event 1 (\"t\"): 'ts' is Infinity, not a finite number"),
        (1, {**RUN, "ts": float("nan")}, "event 1 (\"t\"): 'ts' is NaN, not a finite number"),
        (
            1,
            {**RUN, "dur": 10**400},
            "'dur' is 1000000000000000000000000000000000000..., not a number within a float's range",
        ),
        (1, {**RUN, "ts": True}, "'ts' is true, not a number"),
        (1, {**RUN, "ts": -1}, "'ts' is -1, not a number >= 0"),
        (1, {**RUN, "name": 12}, "event 1 (12): 'name' is 12, not a string"),
        (1, {**RUN, "args": {"run": "x"}}, "'run' is \"x\", not a whole number >= 0"),
        (1, {**RUN, "pid": "0"}, "'pid' is \"0\", not a whole number >= 0"),
        (1, None, "event 1 is null, not an object"),
        (2, {**FLOW_START, "pid": 7}, "event 2 (\"message\"): 'pid' is 7, not a rank the"),
        (2, {**FLOW_START, "ts": "5"}, "'ts' is \"5\", not a number"),
        (2, {**FLOW_START, "args": {"bytes": "x"}}, "'bytes' is \"x\", not a whole number >= 0"),
        (2, {**FLOW_START, "id": [1]}, "'id' is [1], not a whole number >= 0"),
        (4, FLOW_START, "'id' is 1, not a message with one start and one end"),
        (1, {k: v for k, v in RUN.items() if k != "dur"}, "event 1 (\"t\"): it has no 'dur'"),
        (2, {k: v for k, v in FLOW_START.items() if k != "id"}, "it has no 'id' (a whole"),
        (0, {"ph": "M"}, "event 0: it has no 'pid' (a whole number >= 0)"),
        (4, {**RUN, "ts": 0}, 'events 1 and 4 are both the task run "t"'),
    ],
)
def test_dhir_gantt_names_the_event_that_is_wrong(
    index: int, event: object, fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events: list[object] = [*GOOD]
    events[index : index + 1] = [event]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_dhirs(events)))
    assert main(["gantt", str(bad), "-o", str(tmp_path / "x.svg")]) == 1
    err = capsys.readouterr().err
    assert f"cannot read the trace {bad}: " in err and fault in err, err
    assert "internal error" not in err


@pytest.mark.parametrize(
    ("events", "fault"),
    [
        ([*GOOD, {}], "event 4: it has no 'cat' (task, io, gpu, mpi or message)"),
        (
            [*GOOD, {**RUN, "name": "u", "cat": "tasks"}],
            'event 4 ("u"): \'cat\' is "tasks", not one dhir writes (task, io, gpu, mpi or',
        ),
        ([*GOOD, {**RUN, "name": "u", "ph": "B"}], 'event 4 ("u"): \'ph\' is "B", not "X"'),
        (
            [*GOOD, {**FLOW_START, "cat": "io", "name": "read input #0"}],
            'event 4 ("read input #0"): \'ph\' is "s", not "X" (an io event)',
        ),
        ([RANK, RUN, FLOW_START], 'event 2 ("message"): message 1 has a start and no end'),
        ([RANK, RUN, FLOW_END], 'event 2 ("message"): message 1 has an end and no start'),
    ],
)
def test_dhir_gantt_refuses_events_it_would_leave_out(
    events: list[object], fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Events of no kind dhir writes (and half messages) were left out of the chart, exit
    status 0."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_dhirs(events)))
    assert main(["gantt", str(bad), "-o", str(tmp_path / "x.svg")]) == 1
    err = capsys.readouterr().err
    assert f"cannot read the trace {bad}: {fault}" in err, err
    assert not (tmp_path / "x.svg").exists()


@pytest.mark.parametrize(
    ("cut", "fault"),
    [
        (lambda t: t[:-40], "it ends before its JSON does (line 1, column "),
        (lambda t: t[: t.index('"name": "t"') + 5], "it ends before its JSON does (line 1,"),
        (lambda t: "", "it is empty"),
        (lambda t: t.replace(", ", " ", 1), "it is not JSON (line 1, column 29: Expecting ','"),
    ],
)
def test_dhir_gantt_says_where_a_trace_is_not_json(
    cut: Callable[[str], str], fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace cut short (a full disk, a copy stopped early) was 'not JSON', saying neither
    where nor that it ends too soon."""
    bad = tmp_path / "bad.json"
    bad.write_text(cut(json.dumps(_dhirs(GOOD))))
    assert main(["gantt", str(bad), "-o", str(tmp_path / "x.svg")]) == 1
    err = capsys.readouterr().err
    assert f"cannot read the trace {bad}: {fault}" in err, err
    assert "internal error" not in err and "Traceback" not in err


def test_dhir_gantt_draws_a_trace_with_its_message(tmp_path: Path) -> None:
    trace, chart = tmp_path / "t.json", tmp_path / "t.svg"
    other = {**RANK, "pid": 1, "args": {"name": "rank 1"}}
    trace.write_text(json.dumps(_dhirs([RANK, other, RUN, FLOW_START, {**FLOW_END, "pid": 1}])))
    assert main(["gantt", str(trace), "-o", str(chart)]) == 0
    text = chart.read_text()
    assert "t on rank0: 1 us to 3 us" in text and "0 bytes from rank0 to rank1" in text


def test_dhir_gantt_titles_a_trace_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """The title is the file's name: matplotlib refused Python's surrogate escapes, an
    internal error."""
    trace = Path(os.fsdecode(bytes(tmp_path) + b"/t\xff.json"))
    chart = tmp_path / "t.png"
    trace.write_text(json.dumps(_dhirs([RANK, RUN])))
    assert main(["gantt", str(trace), "-o", str(chart)]) == 0
    assert chart.read_bytes().startswith(b"\x89PNG")


@native
@pytest.mark.parametrize("optimize", [True, False])
def test_dhir_schedule_names_the_tasks_a_run_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], optimize: bool
) -> None:
    # On one rank dhir-time-tiles makes the time loop's two tasks one: the plan must be
    # of that task, not of the two the program writes.
    flags = [] if optimize else ["--no-optimize"]
    assert main(["schedule", str(TIME_LOOP), "-n", "1", "--json", *flags]) == 0
    planned = json.loads(capsys.readouterr().out)
    trace = tmp_path / "run.json"
    dhir.run(TIME_LOOP, *_inputs(), ranks=1, trace=trace, optimize=optimize)
    ran = {e["name"] for e in _events(trace) if e.get("cat") == "task"}
    assert set(planned["schedules"][0]["assignment"]) == ran
    assert len(ran) == (1 if optimize else 2)
    tiles = planned.get("time_tiles", [])
    assert [t["done"] for t in tiles] == ([True] if optimize else [])


def _failed_trace_note(tmp_path: Path, error: DhirError) -> str:
    from dhir.toolchain.launch import _failed_trace  # pyright: ignore[reportPrivateUsage]

    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank0.trace").write_text("T 0 t\tp.mlir:1:1\nE 0 10 500 0 -1 0 -1\nP stopped\n")
    return _failed_trace(ranks, 1, tmp_path / "run.json", error).message


def test_a_timed_out_run_s_trace_says_so_whatever_its_message(tmp_path: Path) -> None:
    """Told by the launcher's TimedOut, not by "timed out" in the error's first line."""
    error = TimedOut([Diagnostic("the program ran past its limit\nrank 0 was in t")])
    assert "the run failed (timed out)" in _failed_trace_note(tmp_path, error)


def test_a_failed_run_s_message_saying_timed_out_is_no_timeout(tmp_path: Path) -> None:
    """Before: a rank's own error that says "timed out" (an MPI connection's) made the
    trace say the run timed out."""
    said = "the program failed on 2 ranks: rank 1 exited: MPI_Recv: connection timed out"
    note = _failed_trace_note(tmp_path, DhirError([Diagnostic(said)]))
    assert "the run failed (a rank failed)" in note


def test_a_partial_trace_says_so_and_a_rank_cut_short_leaves_none(tmp_path: Path) -> None:
    from dhir.toolchain.trace import write_partial_trace

    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank0.trace").write_text("T 0 t\tp.mlir:1:1\nE 0 10 500 0 -1 0 -1\nP stopped\n")
    (ranks / "rank1.trace").write_text("T 0 t\tp.mlir:1:1\nE 0 10 20 0 -1 0 -1\n")
    # A rank killed while writing leaves only its temporary file: no events of it are read.
    (ranks / ".rank2.trace.tmp").write_text("T 0 t\tp.mlir:1:1\nE 0 1")
    out = tmp_path / "run.json"
    said = write_partial_trace(ranks, 3, out, "timed out")
    assert said == (
        "the run failed (timed out); recorded up to the failure: rank 0 (stopped at the "
        "timeout); finished: rank 1; no events from rank 2 (killed before writing them)"
    )
    data = json.loads(out.read_text())
    assert data["otherData"] == {"producer": "dhir", "partial": said}
    assert sorted(e["pid"] for e in data["traceEvents"] if e["ph"] == "X") == [0, 1]
    assert write_partial_trace(tmp_path / "empty", 2, tmp_path / "none.json", "x") is None
    assert not (tmp_path / "none.json").exists()


def test_dhir_gantt_draws_the_io_and_shows_the_tasks_unless_asked_for_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run reads its inputs for 150 ms and runs a task of 5 us: the chart's axis went
    from 0 to the end, the task was invisible, and the reading (the `I/O` track) was not
    drawn. Now the reading is drawn and named, the axis spans the task; --whole: all."""
    from matplotlib.figure import Figure

    limits: list[tuple[float, float]] = []
    save = Figure.savefig

    def saving(figure: Figure, *args: object, **kwargs: object) -> None:
        limits.append(figure.axes[0].get_xlim())
        save(figure, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", saving)
    read = {"ph": "X", "cat": "io", "pid": 0, "tid": 2, "ts": 0, "dur": 150000}
    read |= {"name": "read input #0", "args": {"argument": 0}}
    task = {**RUN, "ts": 150000, "dur": 5}
    trace, chart = tmp_path / "run.json", tmp_path / "run.svg"
    trace.write_text(json.dumps(_dhirs([RANK, read, task])))
    assert main(["gantt", str(trace), "-o", str(chart)]) == 0
    low, high = limits[0]  # ms
    assert 149.9 < low <= 150.0 and 150.005 <= high < 150.1
    assert "read input #0 on rank0: 0 ms to 150 ms" in chart.read_text()
    assert main(["gantt", str(trace), "-o", str(chart), "--whole"]) == 0
    assert limits[1][0] == 0.0 and limits[1][1] > 150.005


@native
def test_a_result_write_on_the_trace_leaves_out_the_wait_for_the_other_ranks(
    tmp_path: Path,
) -> None:
    """A rank that finished early waited at the barrier closing each result for the
    others, and its `write result` bar took that wait in: a chart showed it writing for
    as long as the other rank's task ran. The wait is the MPI track's barrier alone."""
    trace = tmp_path / "run.json"
    dhir.run(TIME_LOOP, *_inputs(), ranks=2, trace=trace, optimize=False)
    events = [e for e in _events(trace) if e["ph"] == "X"]
    barriers = [e for e in events if e.get("cat") == "mpi" and e["name"] == "barrier"]
    writes = [e for e in events if e.get("cat") == "io" and e["name"].startswith("write")]
    assert writes and barriers
    for write in writes:
        end = write["ts"] + write["dur"]
        inside = [
            b
            for b in barriers
            if b["pid"] == write["pid"] and write["ts"] <= b["ts"] and b["ts"] + b["dur"] <= end
        ]
        assert not inside, (write, inside)
