"""Task profiles: `dhir run --profile` measures, `--costs` feeds the times back."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dhir.analysis.profile import FORMAT, load_profile, profile_from_json, unmatched, why_unmatched
from dhir.api import parse_file, parse_string, print_module, run_pipeline
from dhir.cli.main import main
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.diagnostics import DhirError
from dhir.ir.tasks import task_ids
from dhir.placement.constraints import Constraints, Pin
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import local_devices, task_graph
from dhir.transforms.instrument import profile_report
from dhir.transforms.place import attach_constraints, drop_unmatched

EXAMPLES = Path(__file__).parents[2] / "examples"
VECTOR_ADD = EXAMPLES / "vector_add.mlir"
TASKS = ["add", "double"]  # vector_add.mlir's tasks, by their SSA names
needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def dhir(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DHIR_PROFILE": ""},
    )


def vector_inputs(folder: Path) -> list[str]:
    words = []
    for name in "abc":
        np.save(folder / f"{name}.npy", np.arange(20, dtype=np.int32))
        words += ["--input", str(folder / f"{name}.npy")]
    return words


@needs_llvm
@pytest.mark.parametrize(("ranks", "mpi"), [(2, "mpich"), (3, "openmpi")])
def test_profile_times_every_task_and_feeds_back(tmp_path: Path, ranks: int, mpi: str) -> None:
    inputs = vector_inputs(tmp_path)
    profile = tmp_path / "profile.json"
    common = [str(VECTOR_ADD), "-n", str(ranks), "--mpi", mpi, *inputs]
    result = dhir("run", *common, "--placement", "round-robin", "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    data = json.loads(profile.read_text())
    assert data["ranks"] == ranks
    # Both tasks are cut into one piece per rank: an entry per piece, on its rank.
    where = _scheduled(VECTOR_ADD, ranks)
    pieces = sorted(where)
    assert pieces == [f"{t}.piece{k}" for t in TASKS for k in range(ranks)]
    assert sorted(data["tasks"]) == pieces
    assert all(seconds > 0 for seconds in data["tasks"].values())
    assert data["calls"] == dict.fromkeys(pieces, 1)
    assert {t: data["devices"][t]["rank"] for t in pieces} == where
    assert {data["devices"][t]["kind"] for t in pieces} == {"cpu"}
    # The schedule's wall time: it holds both tasks, so it lasts at least as long as each.
    assert list(data["schedules"]) == ["main.schedule0"]
    assert data["schedules"]["main.schedule0"] >= max(data["tasks"].values()) > 0
    assert load_profile(profile).schedules == data["schedules"]

    # The measured times replace the estimates in the task graph...
    module = parse_file(VECTOR_ADD)
    run_pipeline(module, f"dhir-split{{ranks={ranks}}}")
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    devices = local_devices(ranks)
    estimated = task_graph(schedule, devices)
    measured = task_graph(schedule, devices, CostModel(load_profile(profile)))
    for task in pieces:
        assert set(measured.cost[task].values()) == {data["tasks"][task]}
        assert measured.cost[task] != estimated.cost[task]

    # ...and a run placed with them gives the same results.
    out = tmp_path / "out"
    result = dhir("run", *common, "--costs", str(profile), "--output-dir", str(out))
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    a = np.arange(20, dtype=np.int32)
    np.testing.assert_array_equal(np.load(out / "arg0.npy"), (a + a) * 2)


@needs_llvm
def test_profile_and_costs_do_not_apply_to_built_executables(tmp_path: Path) -> None:
    exe = tmp_path / "vector_add"
    result = dhir("compile", str(VECTOR_ADD), "-o", str(exe), "-n", "2", "--placement", "peft")
    assert result.returncode == 0, result.stderr
    inputs = vector_inputs(tmp_path)
    result = dhir("run", str(exe), *inputs, "--profile", str(tmp_path / "p.json"))
    assert result.returncode == 1
    assert "--profile cannot change an executable" in result.stderr


def test_profile_needs_the_native_backend(tmp_path: Path) -> None:
    inputs = vector_inputs(tmp_path)
    result = dhir(
        "run", str(VECTOR_ADD), "--backend", "interp", *inputs, "--profile", str(tmp_path / "p")
    )
    assert result.returncode == 2
    assert "use it with --backend native" in result.stderr


def test_bad_costs_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"tasks": 3}')
    result = dhir(
        "compile", str(VECTOR_ADD), "-o", str(tmp_path / "x"), "-n", "2", "--costs", str(bad)
    )
    assert result.returncode == 1
    assert 'needs a "tasks" object' in result.stderr


def test_report_averages_runs_and_names_tasks() -> None:
    raw = {
        "ranks": 2,
        "tasks": {
            "0": {"seconds": 3.0, "calls": 3, "rank": 1},
            "1": {"seconds": 0.0, "calls": 0, "rank": -1},  # never ran: left out
            "7": {"seconds": 1.0, "calls": 1, "rank": 0},  # not a task of this module
        },
    }
    report = profile_report(
        raw, ["f.schedule0.task0", "f.schedule0.task1"], local_devices(2), "x86_64"
    )
    assert report["tasks"] == {"f.schedule0.task0": 1.0}
    assert report["calls"] == {"f.schedule0.task0": 3}
    assert report["devices"] == {"f.schedule0.task0": {"rank": 1, "kind": "cpu", "arch": "x86_64"}}
    assert report["ranks"] == 2


def test_report_names_schedules_and_gives_seconds_per_run() -> None:
    raw = {
        "ranks": 2,
        "tasks": {"0": {"seconds": 1.0, "calls": 2, "rank": 0}},
        "schedules": {
            "0": {"seconds": 3.0, "calls": 2},
            "1": {"seconds": 0.0, "calls": 0},  # never ran: left out
            "5": {"seconds": 1.0, "calls": 1},  # not a schedule of this module
        },
    }
    names = ["f.schedule0", "f.schedule1"]
    report = profile_report(raw, ["f.schedule0.task0"], local_devices(2), "x86_64", names)
    assert report["schedules"] == {"f.schedule0": 1.5}
    assert profile_report({"tasks": {}}, [], [])["schedules"] == {}


TWO_SCHEDULES = """
func.func @main(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    dhir.schedule %a {
      %cpu = dhir.target {kind = "cpu"}
      %t = dhir.task %cpu, %a {
        %x = memref.load %a[%c0] : memref<4xf32>
        memref.store %x, %a[%c1] : memref<4xf32>
      }
    }
  }
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %x = memref.load %a[%c1] : memref<4xf32>
      memref.store %x, %a[%c0] : memref<4xf32>
    }
  }
  return
}
"""


def test_instrument_wraps_every_schedule_once() -> None:
    module = parse_string(TWO_SCHEDULES)
    run_pipeline(module, "dhir-instrument,dhir-instrument")  # a second run adds nothing
    text = print_module(module)
    assert text.count("func.call @dhir_rt_schedule_begin") == 2
    assert text.count("func.call @dhir_rt_schedule_end") == 2
    assert text.count("func.call @dhir_rt_task_begin") == 2
    assert "func.func private @dhir_rt_schedule_begin(i64)" in text
    # Around each schedule, outside it (host code every rank runs), with its number.
    schedules = [op for op in module.walk() if isinstance(op, ScheduleOp)]
    for number, schedule in enumerate(schedules):
        before, after = schedule.prev_op, schedule.next_op
        assert before is not None and after is not None
        assert before.callee.string_value() == "dhir_rt_schedule_begin"  # type: ignore[attr-defined]
        assert after.callee.string_value() == "dhir_rt_schedule_end"  # type: ignore[attr-defined]
        ident = before.operands[0].owner
        assert ident.value.value.data == number  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tasks": {"t": None}}, 'task "t" has time null;'),
        ({"tasks": {"t": True}}, 'task "t" has time true;'),
        ({"tasks": {}, "schedules": {"s": "1"}}, 'schedule "s" has time "1";'),
        ({"tasks": {"t": 1}, "devices": {"t": {"kind": None}}}, 'task "t" has kind null;'),
        ({"tasks": {"t": 1}, "devices": {"t": {"arch": False}}}, 'task "t" has arch false;'),
    ],
)
def test_bad_profile_values_are_quoted_as_json(data: object, message: str) -> None:
    """They were quoted as Python prints them: `has time None`."""
    with pytest.raises(DhirError, match=re.escape(message)):
        profile_from_json(data)


def test_profile_schedules_are_optional_but_checked() -> None:
    assert profile_from_json({"tasks": {}}).schedules == {}
    read = profile_from_json({"tasks": {}, "schedules": {"main.schedule0": 0.5}})
    assert read.schedules == {"main.schedule0": 0.5}
    with pytest.raises(DhirError, match='schedule "main.schedule0" has time -1'):
        profile_from_json({"tasks": {}, "schedules": {"main.schedule0": -1}})
    with pytest.raises(DhirError, match='"schedules" must be an object'):
        profile_from_json({"tasks": {}, "schedules": [1]})


def test_a_profile_of_another_format_is_refused() -> None:
    report = profile_report({"ranks": 1, "tasks": {}}, [], local_devices(1), "x86_64")
    assert report["format"] == FORMAT  # what dhir run --profile writes, this dhir reads
    assert profile_from_json(report).tasks == {}
    assert profile_from_json({"tasks": {"t": 1.0}}).tasks["t"].seconds == 1.0  # by hand
    for other, shown in ((99, "99"), ("banana", '"banana"'), (True, "true")):
        with pytest.raises(DhirError, match=f"it is a profile of format {shown}; this dhir reads"):
            profile_from_json({"format": other, "tasks": {}})


def test_schedule_refuses_costs_of_another_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    costs = tmp_path / "p.json"
    costs.write_text('{"format": 99, "tasks": {}}')
    program = str(EXAMPLES / "time_loop.mlir")
    assert main(["schedule", program, "-n", "2", "--costs", str(costs)]) == 1
    _, err = capsys.readouterr()
    assert f"{costs}:1:12: error: cannot use it as task costs: it is a profile of format 99" in err


# Task 0 is one loop dhir-split cuts into one piece per rank; task 1 stays whole.
SPLIT = """
func.func @main(%a: memref<64xf64>, %b: memref<64xf64>) {
  dhir.schedule %a, %b {
    %t0 = dhir.task target = "cpu", %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      %f = arith.constant 2.0 : f64
      scf.for %i = %c0 to %n step %c1 {
        %x = memref.load %a[%i] : memref<64xf64>
        %y = arith.mulf %x, %f : f64
        memref.store %y, %a[%i] : memref<64xf64>
      }
    }
    %t1 = dhir.task target = "cpu", %b attributes {dhir.split = 1} {
      %c0 = arith.constant 0 : index
      %f = arith.constant 1.0 : f64
      memref.store %f, %b[%c0] : memref<64xf64>
    }
  }
  return
}
"""


def _scheduled(path: Path, ranks: int) -> dict[str, int]:
    """Each task's rank as `dhir schedule --placement round-robin` prints it."""
    result = dhir("schedule", str(path), "-n", str(ranks), "--placement", "round-robin")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    placed = [r for r in rows if len(r) == 4 and r[1].startswith("rank") and r[0] != "(end)"]
    return {r[0]: int(r[1].removeprefix("rank")) for r in placed}


@needs_llvm
def test_a_profile_after_split_has_one_entry_per_piece_where_it_ran(tmp_path: Path) -> None:
    """Named as `dhir schedule` names the pieces, each with the rank that ran it."""
    program = tmp_path / "split.mlir"
    program.write_text(SPLIT)
    for name in "ab":
        np.save(tmp_path / f"{name}.npy", np.arange(64.0))
    inputs = ["--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy")]
    profile = tmp_path / "profile.json"
    placed = "--placement", "round-robin"
    result = dhir("run", str(program), "-n", "3", *placed, *inputs, "--profile", str(profile))
    assert result.returncode == 0, result.stderr
    data = json.loads(profile.read_text())
    where = _scheduled(program, 3)
    assert sorted(where) == [f"t0.piece{k}" for k in range(3)] + ["t1"]
    assert sorted(data["tasks"]) == sorted(where)
    assert data["calls"] == dict.fromkeys(where, 1)
    assert {name: data["devices"][name]["rank"] for name in where} == where
    # Fed back for the same rank count, every entry names a task: no warning.
    result = dhir("run", str(program), "-n", "3", *inputs, "--costs", str(profile))
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def test_costs_entries_that_describe_no_task_warn_and_are_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name no task has, a task measured whole that is now cut, and the pieces of a
    task cut into another number of pieces (measured on 2 ranks, placed on 3)."""
    costs = tmp_path / "costs.json"
    stale = ["t0", "t0.piece0", "t0.piece1", "main.schedule3.task0", "t1x"]
    costs.write_text(json.dumps({"tasks": {**dict.fromkeys(stale, 1.0), "t1": 2.0}}))
    module = parse_string(SPLIT)
    run_pipeline(
        module, f'dhir-split{{ranks=3}},dhir-place{{ranks=3 algorithm=heft costs="{costs}"}}'
    )
    warning = capsys.readouterr().err
    assert warning.startswith(f"warning: {costs} has times that describe no task"), warning
    assert "t0 is cut into 3 pieces now: t0, t0.piece0, t0.piece1\n" in warning, warning
    # A misspelt name says what it may mean.
    assert "no task has these names: main.schedule3.task0, t1x (did you mean 't1'?)\n" in warning
    assert "t1" not in warning.replace("task", "").replace("t1x (did you mean 't1'?)", "")
    profile = profile_from_json(json.loads(costs.read_text()))
    assert unmatched(profile, task_ids(module).values()) == stale
    drop_unmatched(profile, module, str(costs))
    assert list(profile.tasks) == ["t1"]


def test_costs_that_describe_no_task_warn_once_with_constraints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Constraints place the program twice (once to learn where tasks would rather run):
    the warning came once from each placement."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"tasks": {"t1x": 1.0, "t1": 2.0}}))
    module = parse_string(SPLIT)
    pin = Pin(("t1",), "rank", 0, "[[pin]] #1")
    attach_constraints(module, Constraints((pin,), (), "c.toml"))
    run_pipeline(module, f'dhir-place{{ranks=2 algorithm=heft costs="{costs}"}}')
    assert capsys.readouterr().err.count("has times that describe no task") == 1


def test_stale_entries_are_grouped_by_why() -> None:
    tasks = ["a.piece0", "a.piece1", "a.piece2", "b", "c"]
    stale = ["a.piece0", "b.piece1", "b.piece0", "gone"]
    assert why_unmatched(stale, tasks) == {
        "a is cut into 3 pieces now": ["a.piece0"],
        "b runs whole now": ["b.piece1", "b.piece0"],
        "no task has these names": ["gone"],
    }


@needs_llvm
def test_a_profiled_time_loop_sends_what_an_unprofiled_one_does(tmp_path: Path) -> None:
    """The timers around a schedule in a time loop are dhir's own hooks: the loop still
    keeps its data distributed between steps, so the profile times the program that runs
    without it."""
    from dhir.backends.native import compile_native
    from dhir.toolchain.launch import run_executable
    from dhir.toolchain.options import RunOptions
    from dhir.transforms.instrument import ProfileRecorder

    u = np.linspace(0.0, 1.0, 16)
    inputs = [u, np.zeros(16), np.array(5)]
    sent, results = [], []
    for profiled in (False, True):
        module = parse_file(EXAMPLES / "time_loop.mlir")
        recorder = ProfileRecorder(module, 2, tmp_path / "p.json") if profiled else None
        exe, signature = compile_native(module, "main", RunOptions(ranks=2), profile=recorder)
        traffic: list[str] = []
        results.append(run_executable(exe, signature, inputs, RunOptions(ranks=2), traffic=traffic))
        sent.append([line.split(", took")[0] for line in traffic])
    assert sent[0] == sent[1], sent
    for plain, timed in zip(*results, strict=True):
        np.testing.assert_array_equal(plain, timed)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"tasks": {}, "schedule": {"main.schedule0": 1.0}},
            'a profile has the unknown key "schedule"',
        ),
        (
            {"tasks": {"t": 1.0}, "device": {"t": {"kind": "gpu"}}},
            "a profile has the unknown key \"device\" (did you mean 'devices'?); it may have "
            "format, ranks, tasks, calls",
        ),
        (
            {"tasks": {"t": 1.0}, "devices": {"t": {"kinds": "gpu"}}},
            'the devices entry of task "t" has the unknown key "kinds" (did you mean \'kind\'?); '
            "it may have kind, arch, rank, device",
        ),
    ],
)
def test_a_profile_with_a_key_it_does_not_have_is_refused(
    data: dict[str, object], message: str
) -> None:
    """Ignored, a misspelt "devices" took a GPU task's time as a CPU's."""
    with pytest.raises(DhirError, match=re.escape(message)):
        profile_from_json(data)


def test_a_profile_run_on_a_described_machine_reads_back() -> None:
    """Its devices entries name the device too: every key dhir writes, dhir reads."""
    from dhir.machine.description import guess_device

    devices = [guess_device("n0.cpu", "x86_64", cores=2)]
    raw = {"ranks": 1, "tasks": {"0": {"seconds": 2.0, "calls": 2, "rank": 0}}}
    report = profile_report(raw, ["t"], devices, "x86_64")
    assert report["devices"]["t"]["device"] == "n0.cpu"  # pyright: ignore[reportIndexIssue]
    assert profile_from_json(report).tasks["t"].seconds == 1.0


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_gpu_task_is_profiled_on_the_gpu_its_rank_drives(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a machine description every rank is the node's CPU and drives the node's
    GPU for GPU tasks: the profile said the GPU task ran on the CPU (`"kind": "cpu",
    "arch": "x86_64"`), so `--costs` took its GPU time as the CPU's."""
    import dhir

    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))  # the fake CUDA driver
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    path = tmp_path / "p.json"
    inputs = [np.arange(20, dtype=np.int32) for _ in range(3)]
    dhir.run(EXAMPLES / "proposal.mlir", *inputs, ranks=2, placement="round-robin", profile=path)
    devices = json.loads(path.read_text())["devices"]
    # %task1 (x86_64), cut by dhir-split into a piece per rank, and %task3 (sm_90)
    assert {name: entry["kind"] for name, entry in devices.items()} == {
        "task1.piece0": "cpu",
        "task1.piece1": "cpu",
        "task3": "gpu",
    }
    assert profile_from_json(json.loads(path.read_text())).tasks["task3"].kind == "gpu"
