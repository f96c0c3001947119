"""What dhir-split says it did with each task (`dhir schedule`, `dhir run --timing`): the
loop and piece sizes of each task it cut, the reason for each it left whole, and a few
lines for many tasks."""

import json
from pathlib import Path

import pytest

from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.cli.main import main
from dhir.ir.diagnostics import REPORT_ENV
from dhir.ir.tasks import task_ids
from dhir.toolchain.build import Timing
from dhir.toolchain.options import RunOptions
from dhir.transforms.split_tasks import SplitPlan, SplitTasksPass

_LOOP = """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cn = arith.constant {n} : index
      %one = arith.constant 1.0 : f64
      scf.for %i = %c0 to %cn step %c1 {{
        memref.store %one, %{m}[%i] : memref<16xf64>
      }}"""

# Tasks each left whole for another reason (on 4 ranks, with at most 3 running at once).
KINDS = (
    """
func.func @main(%a: memref<16xf64>, %b: memref<16xf64>, %s: memref<2xf64>, %t: memref<16xf64>) {
  dhir.schedule %a, %b, %s, %t {
    %cpu = dhir.target {kind = "cpu"}
    %carried = dhir.task %cpu, %b {
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      scf.for %i = %c1 to %c16 step %c1 {
        %j = arith.subi %i, %c1 : index
        %v = memref.load %b[%j] : memref<16xf64>
        memref.store %v, %b[%i] : memref<16xf64>
      }
    }
    %noloop = dhir.task %cpu, %s {
      %c1 = arith.constant 1 : index
      %two = arith.constant 2.0 : f64
      memref.store %two, %s[%c1] : memref<2xf64>
    }
    %pinned = dhir.task %cpu, %t attributes {dhir.rank = 1} {"""
    + _LOOP.format(n=16, m="t")
    + """
    }
    %sum = dhir.task %cpu, %a, %s {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f64
      %r = scf.parallel (%i) = (%c0) to (%c16) step (%c1) init (%zero) -> f64 {
        %v = memref.load %a[%i] : memref<16xf64>
        scf.reduce(%v : f64) {
        ^bb0(%x: f64, %y: f64):
          %z = arith.addf %x, %y : f64
          scf.reduce.return %z : f64
        }
      }
      memref.store %r, %s[%c0] : memref<2xf64>
    }
    %one = dhir.task %cpu, %a attributes {dhir.split = 1} {"""
    + _LOOP.format(n=16, m="a")
    + """
    }
  }
  return
}
"""
)


def _tasks(loops: dict[str, int], target: str = 'kind = "cpu"', apart: bool = False) -> str:
    """A schedule of one task per entry, each storing to %m in a loop of that many
    iterations (0: no loop), one after the other (`apart`: each to a memref of its own,
    all at once)."""
    names = list(loops)
    memrefs = [f"%{n}m" if apart else "%m" for n in names]
    listed = ", ".join(dict.fromkeys(memrefs))
    args = ", ".join(f"{m}: memref<16xf64>" for m in dict.fromkeys(memrefs))
    bodies = []
    for (name, count), m in zip(loops.items(), memrefs, strict=True):
        body = (
            _LOOP.format(n=count, m=m[1:])
            if count
            else (
                f"\n      %c0 = arith.constant 0 : index\n      %one = arith.constant 1.0 : f64"
                f"\n      memref.store %one, {m}[%c0] : memref<16xf64>"
            )
        )
        bodies.append(f"    %{name} = dhir.task %dev, {m} {{{body}\n    }}")
    return (
        f"func.func @main({args}) {{\n  dhir.schedule {listed} {{\n"
        f"    %dev = dhir.target {{{target}}}\n" + "\n".join(bodies) + "\n  }\n  return\n}\n"
    )


def _plan(text: str, ranks: int) -> SplitPlan:
    plan, module = SplitPlan(), parse_string(text, "p.mlir")
    SplitTasksPass(ranks).split(module, plan)
    plan.name(task_ids(module))
    return plan


def _lines(text: str, ranks: int, every: bool | None = None) -> list[str]:
    return _plan(text, ranks).lines(every)


def test_each_task_left_whole_says_why() -> None:
    head, *lines = _lines(KINDS, 4)
    assert head == "dhir-split on 4 ranks: 0 tasks cut into pieces, 5 left whole"
    assert lines == [
        "carried: whole: its scf.for's iterations are not proven to touch disjoint "
        "elements; at p.mlir:8:7, two of them may touch one element of %b",
        "noloop: whole: it has no loop",
        "pinned: whole: it is placed by hand (dhir.rank)",
        "sum: whole: its scf.parallel reduces (reductions need dhir.reassociate); at p.mlir:33:12",
        "one: whole: dhir.split = 1 on it",
    ]


def test_each_task_cut_says_its_loop_and_piece_sizes() -> None:
    lines = _lines(_tasks({"even": 16, "uneven": 6, "three": 3, "small": 1}), 4)
    assert lines == [
        "dhir-split on 4 ranks: 3 tasks cut into pieces, 1 left whole",
        "even: cut into 4 pieces (over the scf.for at p.mlir:9:7, 4 iterations each)",
        "uneven: cut into 4 pieces (over the scf.for at p.mlir:18:7, 1, 2, 1, 2 iterations)",
        "three: cut into 3 pieces (over the scf.for at p.mlir:27:7, 1 iteration each)",
        "small: whole: its loop has too few iterations to cut into 2 pieces or more; "
        "at p.mlir:36:7, 1 iteration",
    ]


def test_enough_tasks_at_once_keep_theirs_whole() -> None:
    lines = _lines(_tasks({"p": 16, "q": 16}, apart=True), 2)
    assert lines[1:] == [
        f"{t}: whole: its schedule already has enough tasks that can run at once to keep "
        "every rank busy; 2 at once, 2 ranks"
        for t in "pq"
    ]


def test_a_gpu_task_stays_whole() -> None:
    lines = _lines(_tasks({"g": 16}, 'kind = "gpu"'), 2)
    assert lines[1:] == ["g: whole: it is a GPU task (dhir-split cuts CPU tasks)"]


def test_one_rank_has_nothing_to_say() -> None:
    assert _lines(_tasks({"p": 16}), 1) == []


def test_many_tasks_alike_take_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _tasks({f"t{k}": 0 for k in range(10)} | {"u": 16})
    monkeypatch.delenv(REPORT_ENV, raising=False)
    assert _lines(text, 2) == [
        "dhir-split on 2 ranks: 1 task cut into pieces, 10 left whole",
        "u: cut into 2 pieces (over the scf.for at p.mlir:59:7, 8 iterations each)",
        f"whole: it has no loop (10 tasks): t0, t1, t2 and 7 more ({REPORT_ENV}=all lists each)",
    ]
    monkeypatch.setenv(REPORT_ENV, "all")
    lines = _lines(text, 2)
    assert len(lines) == 12 and lines[-1] == "t9: whole: it has no loop"


def test_dhir_schedule_prints_the_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_tasks({"a": 16, "b": 0}))
    assert main(["schedule", str(program), "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert (
        "\n\ndhir-split on 2 ranks: 1 task cut into pieces, 1 left whole\n"
        f"  a: cut into 2 pieces (over the scf.for at {program}:9:7, 8 iterations each)\n"
        "  b: whole: it has no loop\n"
    ) in out


def test_dhir_schedule_json_has_every_task(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_tasks({"a": 16} | {f"t{k}": 0 for k in range(6)}))
    assert main(["schedule", str(program), "-n", "2", "--json"]) == 0
    split = json.loads(capsys.readouterr().out)["split"]
    assert split[0] == {
        "task": "a",
        "pieces": 2,
        "how": "cut into 2 pieces",
        "detail": f"over the scf.for at {program}:9:7, 8 iterations each",
    }
    assert [s["task"] for s in split[1:]] == [f"t{k}" for k in range(6)]
    assert {s["how"] for s in split[1:]} == {"whole: it has no loop"}


def test_timing_says_what_dhir_split_did_only_when_printed() -> None:
    text = _tasks({"a": 16, "b": 0})
    printed, unprinted = Timing(reported=True), Timing()
    compile_native(parse_string(text, "p.mlir"), "main", RunOptions(ranks=2), printed)
    assert [n for n in printed.notes if n.startswith("split: ")] == [
        "split: dhir-split on 2 ranks: 1 task cut into pieces, 1 left whole",
        "split: a: cut into 2 pieces (over the scf.for at p.mlir:9:7, 8 iterations each)",
        "split: b: whole: it has no loop",
    ]
    # `dhir compile` and `dhir run` without --timing: no plan is made.
    compile_native(parse_string(text, "p.mlir"), "main", RunOptions(ranks=2), unprinted)
    assert not [n for n in unprinted.notes if n.startswith("split: ")]


REDUCTION = """
func.func @main(%a: memref<16xf64>, %s: memref<1xf64>) {
  dhir.schedule %a, %s {
    %cpu = dhir.target {kind = "cpu"}
    %sum = dhir.task %cpu, %a, %s attributes {dhir.reassociate} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f64
      %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> f64 {
        %v = memref.load %a[%i] : memref<16xf64>
        %n = arith.addf %acc, %v : f64
        scf.yield %n : f64
      }
      memref.store %r, %s[%c0] : memref<1xf64>
    }
    %max = dhir.task %cpu, %a, %s attributes {dhir.reassociate} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f64
      %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> f64 {
        %v = memref.load %a[%i] : memref<16xf64>
        memref.store %v, %a[%c0] : memref<16xf64>
        %n = arith.maximumf %acc, %v : f64
        scf.yield %n : f64
      }
      memref.store %r, %s[%c0] : memref<1xf64>
    }
  }
  return
}
"""


def test_a_reduction_cut_or_left_says_so() -> None:
    assert _lines(REDUCTION, 2)[1:] == [
        "sum: cut into 2 pieces (over the scf.for at p.mlir:10:12, 8 iterations each)",
        "max: whole: its reduction cannot be split: its scf.for's iterations are not proven "
        "independent",
    ]
