"""Placement constraints (`--constraints FILE`, dhir.placement.constraints): the file's
form, `settle` against a brute-force oracle, dhir-place honouring them with every
algorithm, and native runs equal to the interpreter."""

import itertools
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from xdsl.passes import PassPipeline

import dhir
from dhir.api import run_pipeline
from dhir.cli.main import main
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.diagnostics import DhirError
from dhir.ir.tasks import rank_of, task_ids
from dhir.ir.text import parse_string
from dhir.placement.constraints import (
    Constraints,
    Group,
    Pin,
    RankFacts,
    base_name,
    constraints_from,
    matches,
    read_constraints,
    settle,
    violations,
)
from dhir.transforms.place import PlacePass, attach_constraints
from dhir.transforms.split_tasks import SplitTasksPass
from tests.unit.strategies import CPU_TARGETS, RandomSchedule, random_inputs, schedules

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

FILE = """\
[[pin]]
tasks = "load*"
rank = 2
[[pin]]
tasks = ["solve0"]
kind = "cpu"
[[apart]]
tasks = ["solve0", "solve1"]
[[together]]
tasks = ["solve2", "load0"]
"""


def test_a_toml_file_reads_as_a_json_one(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text(FILE)
    read = read_constraints(toml)
    assert read.pins == (
        Pin(("load*",), "rank", 2, "[[pin]] #1"),
        Pin(("solve0",), "kind", "cpu", "[[pin]] #2"),
    )
    assert read.groups == (
        Group("apart", ("solve0", "solve1"), "[[apart]] #1"),
        Group("together", ("solve2", "load0"), "[[together]] #1"),
    )
    as_json = tmp_path / "c.json"
    as_json.write_text(
        json.dumps(
            {
                "pin": [{"tasks": "load*", "rank": 2}, {"tasks": ["solve0"], "kind": "cpu"}],
                "apart": [{"tasks": ["solve0", "solve1"]}],
                "together": [{"tasks": ["solve2", "load0"]}],
            }
        )
    )
    other = read_constraints(as_json)
    assert (other.pins, other.groups) == (read.pins, read.groups)
    assert Constraints.from_json(read.to_json()) == read  # the module attribute's form


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "expected tables"),
        ({"pins": []}, "unknown section pins"),
        ({"pin": {"tasks": "a"}}, "must be a list of tables"),
        ({"pin": [{"tasks": "a"}]}, "must give one of rank, node, device or kind"),
        ({"pin": [{"tasks": "a", "rank": 1, "node": "n"}]}, "gives rank and node; give only one"),
        ({"pin": [{"tasks": "a", "rank": -1}]}, "rank must be a whole number"),
        ({"pin": [{"tasks": "a", "rank": True}]}, "rank must be a whole number >= 0, got true"),
        ({"pin": [{"tasks": "a", "rank": None}]}, "rank must be a whole number >= 0, got null"),
        ({"pin": [{"tasks": "a", "node": [None]}]}, r"node must be a string, got \[null\]"),
        ({"pin": [{"tasks": "a", "kind": "tpu"}]}, 'kind must be one of cpu, gpu, got "tpu"'),
        ({"pin": [{"tasks": "a", "node": 3}]}, "node must be a string"),
        ({"pin": [{"rank": 0}]}, "needs tasks"),
        ({"apart": [{"tasks": []}]}, "tasks is empty; give a glob or a list of globs"),
        ({"apart": [{"tasks": [1]}]}, "tasks must be a glob or a list of globs"),
        ({"together": [{"tasks": ["a"], "rank": 0}]}, "unknown key rank"),
        ({"together": ["a"]}, "must be a table"),
    ],
)
def test_malformed_files_are_refused_naming_the_entry(data: object, fragment: str) -> None:
    with pytest.raises(DhirError, match=fragment) as error:
        constraints_from(data, "c.toml")
    assert "c.toml" in str(error.value)


_TWO_TASKS = """
func.func @main(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %one = dhir.task %cpu, %a attributes {name = "one"} {}
    %two = dhir.task %cpu, %a attributes {name = "two"} {}
  }
  return
}
"""


def _pin_json(**changes: object) -> str:
    pin = {"tasks": ["one"], "key": "rank", "value": 1, "entry": "[[pin]] #1"} | changes
    return json.dumps({"pins": [pin], "groups": [], "source": "c.toml"})


def _group_json(**changes: object) -> str:
    group = {"kind": "apart", "tasks": ["one", "two"], "entry": "[[apart]] #1"} | changes
    return json.dumps({"pins": [], "groups": [group], "source": "c.toml"})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[" * 100_000, "nested too deeply"),
        ("{}", '"pins": \\[...\\], "groups"'),
        (_pin_json(key="bogus"), "a pin's key must be one of rank"),
        (_pin_json(tasks=[1]), "tasks must be a glob or a list of globs"),
        (_pin_json(value="x"), 'rank must be a whole number >= 0, got "x"'),
        (_pin_json(value=True), "rank must be a whole number >= 0, got true"),
        (_pin_json(key="kind", value="tpu"), 'kind must be one of cpu, gpu, got "tpu"'),
        (_group_json(kind="sideways"), "a group's kind must be apart or together"),
        (_group_json(tasks=7), "tasks must be a glob or a list of globs"),
    ],
)
def test_a_malformed_module_attribute_is_refused_at_the_module(text: str, fragment: str) -> None:
    # `dhir.constraints` may be written by hand: these were internal errors (RecursionError,
    # len() of an int, an AttributeError for the key) or were taken (kind "sideways", rank true).
    source = f"module attributes {{dhir.constraints = {json.dumps(text)}}} {{{_TWO_TASKS}}}"
    module = parse_string(source, "m.mlir")
    with pytest.raises(DhirError, match=fragment) as error:
        run_pipeline(module, PassPipeline((PlacePass(2),)))
    assert str(error.value).startswith("m.mlir:1:1: error: dhir-place: dhir.constraints is not")


_OTHER_FILE = (
    '# another c.toml\n[[pin]]\ntasks = "zzz"\nrank = 0\n[[pin]]\ntasks = "zzz"\nrank = 1\n'
)


@pytest.mark.parametrize(
    ("attr", "said"),
    [
        (_pin_json(value=5), "[[pin]] #1: rank 5 does not exist"),
        (_pin_json(tasks=["nope"]), "[[pin]] #1: 'nope' matches no task"),
        (
            json.dumps(
                {
                    "pins": [
                        {"tasks": ["one"], "key": "rank", "value": 0, "entry": "[[pin]] #1"},
                        {"tasks": ["one"], "key": "rank", "value": 1, "entry": "[[pin]] #2"},
                    ],
                    "groups": [],
                    "source": "c.toml",
                }
            ),
            "task one cannot be placed: [[pin]] #1, [[pin]] #2 leave it no rank in common",
        ),
    ],
)
@pytest.mark.parametrize("command", ["schedule", "compile"])
def test_errors_in_a_modules_constraints_are_at_the_module(
    attr: str,
    said: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # They named c.toml (`c.toml: [[pin]] #1: ...`), a file that may not exist where the
    # module is used, and quoted the lines of another c.toml in the current folder.
    monkeypatch.chdir(tmp_path)
    Path("c.toml").write_text(_OTHER_FILE)
    Path("m.mlir").write_text(
        f"module attributes {{dhir.constraints = {json.dumps(attr)}}} {{{_TWO_TASKS}}}"
    )
    args = ["-o", "m.out"] if command == "compile" else []
    assert main([command, "m.mlir", "-n", "2", *args]) == 1
    err = capsys.readouterr().err
    expected = f"m.mlir:1:1: error: dhir-place: dhir.constraints (constraints from c.toml): {said}"
    assert err.startswith(expected)
    assert "c.toml:" not in err and "zzz" not in err


@pytest.mark.parametrize("rank", [0, 1])
def test_dhir_schedule_follows_the_modules_own_constraints(
    rank: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `dhir run` follows them through dhir-place; `dhir schedule` showed a plan without them.
    program = tmp_path / "m.mlir"
    attr = json.dumps(_pin_json(tasks=["one", "two"], value=rank))
    program.write_text(f"module attributes {{dhir.constraints = {attr}}} {{{_TWO_TASKS}}}")
    assert main(["schedule", str(program), "-n", "2"]) == 0
    table = capsys.readouterr().out
    rows = {
        line.split()[0]: line.split()[1]
        for line in table.splitlines()
        if line.startswith(("one", "two"))
    }
    assert rows == {"one": f"rank{rank}", "two": f"rank{rank}"}
    assert "constraints: all hold" in table
    program.write_text(f'module attributes {{dhir.constraints = "{{}}"}} {{{_TWO_TASKS}}}')
    assert main(["schedule", str(program), "-n", "2"]) == 1
    assert f"{program}:1:1: error: dhir-place: dhir.constraints is not" in capsys.readouterr().err


def test_unreadable_and_unknown_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DhirError, match="cannot read the constraints file"):
        read_constraints(tmp_path / "missing.toml")
    (tmp_path / "c.yaml").write_text("")
    with pytest.raises(DhirError, match="a .toml or .json file"):
        read_constraints(tmp_path / "c.yaml")
    (tmp_path / "bad.toml").write_text("[[pin]\n")
    with pytest.raises(DhirError, match="bad.toml"):
        read_constraints(tmp_path / "bad.toml")


def test_globs_match_names_and_the_task_of_a_piece() -> None:
    assert matches("solve*", "solve0") and matches("solve", "solve.piece3")
    assert matches("solve.piece1", "solve.piece1") and not matches("solve.piece1", "solve.piece2")
    assert base_name("a.b.piece12") == "a.b" and base_name("piece1") == "piece1"


# --- settle against brute force --------------------------------------------------------

CPU, GPU = RankFacts(None, "", "cpu"), RankFacts(None, "gpu0", "gpu")


@st.composite
def problems(
    draw: st.DrawFn,
) -> tuple[list[str], list[set[int]], list[int | None], Constraints, list[RankFacts]]:
    ranks = draw(st.integers(1, 4))
    facts = draw(st.lists(st.sampled_from([CPU, GPU]), min_size=ranks, max_size=ranks))
    names: list[str] = []
    for t in range(draw(st.integers(1, 4))):
        pieces = draw(st.integers(0, 2))
        names += [f"t{t}"] if pieces == 0 else [f"t{t}.piece{k}" for k in range(pieces)]
    runnable = [
        set(draw(st.lists(st.integers(0, ranks - 1), min_size=1, max_size=ranks))) for _ in names
    ]
    fixed = [draw(st.none() | st.sampled_from(sorted(r))) for r in runnable]
    globs = st.sampled_from(sorted({base_name(n) for n in names} | set(names) | {"t*"}))
    pins = tuple(
        Pin(
            (draw(globs),),
            *draw(
                st.sampled_from(
                    [("rank", r) for r in range(ranks)] + [("kind", "cpu"), ("kind", "gpu")]
                )
            ),
            f"[[pin]] #{k + 1}",
        )
        for k in range(draw(st.integers(0, 2)))
    )
    groups = tuple(
        Group(kind, tuple(draw(st.lists(globs, min_size=1, max_size=3))), f"[[{kind}]] #{k + 1}")
        for k, kind in enumerate(draw(st.lists(st.sampled_from(["apart", "together"]), max_size=2)))
    )
    return names, runnable, fixed, Constraints(pins, groups, "c.toml"), facts


def holds(
    constraints: Constraints,
    names: list[str],
    facts: list[RankFacts],
    rank: list[int],
) -> bool:
    """Whether the ranks `rank` keep every constraint (a grouped task's pieces share one)."""
    for pin in constraints.pins:
        for k, name in enumerate(names):
            if any(matches(g, name) for g in pin.tasks):
                if pin.key == "rank" and rank[k] != pin.value:
                    return False
                if pin.key == "kind" and facts[rank[k]].kind != pin.value:
                    return False
    for group in constraints.groups:
        members = [k for k, n in enumerate(names) if any(matches(g, n) for g in group.tasks)]
        for a, b in itertools.combinations(members, 2):
            same_task = base_name(names[a]) == base_name(names[b])
            if (group.kind == "together" or same_task) and rank[a] != rank[b]:
                return False
            if group.kind == "apart" and not same_task and rank[a] == rank[b]:
                return False
    return True


def sets_pieces_apart(constraints: Constraints, names: list[str]) -> bool:
    """Whether an `apart` entry names a piece by its own name and another piece of its
    task, which `settle` refuses."""
    for group in constraints.groups:
        if group.kind != "apart":
            continue
        members = [n for n in names if any(matches(g, n) for g in group.tasks)]
        for a, b in itertools.permutations(members, 2):
            by_own_name = any(matches(g, a) and not matches(g, base_name(a)) for g in group.tasks)
            if base_name(a) == base_name(b) and a != base_name(a) and by_own_name:
                return True
    return False


@settings(max_examples=400, deadline=None)
@given(problems(), st.data())
def test_settle_keeps_every_satisfiable_set_and_refuses_the_rest(
    problem: tuple[list[str], list[set[int]], list[int | None], Constraints, list[RankFacts]],
    data: st.DataObject,
) -> None:
    names, runnable, fixed, constraints, facts = problem
    preferred = [data.draw(st.sampled_from(sorted(r))) for r in runnable]
    options = [sorted(r) if f is None else [f] for r, f in zip(runnable, fixed)]
    satisfiable = any(
        holds(constraints, names, facts, list(choice)) for choice in itertools.product(*options)
    )
    note(f"names {names}, runnable {runnable}, fixed {fixed}, {constraints}")
    try:
        chosen = settle(constraints, names, runnable, fixed, preferred, facts)
    except DhirError as error:
        assert not satisfiable or sets_pieces_apart(constraints, names), str(error)
        assert "c.toml" in str(error)
        return
    assert satisfiable and not sets_pieces_apart(constraints, names)
    final = [
        c if c is not None else (f if f is not None else p)
        for c, f, p in zip(chosen, fixed, preferred)
    ]
    assert all(r in allowed for r, allowed in zip(final, options))
    assert holds(constraints, names, facts, final)


@pytest.mark.parametrize(
    "globs", [("a.piece0", "a.piece1"), ("a.piece*",), ("a.piece0", "a"), ("*.piece1", "a.piece0")]
)
def test_apart_naming_pieces_of_one_task_is_refused(globs: tuple[str, ...]) -> None:
    names = ["a.piece0", "a.piece1", "b"]
    constraints = Constraints((), (Group("apart", globs, "[[apart]] #1"),), "c.toml")
    pattern = r"c\.toml: \[\[apart\]\] #1 names a\.piece[01] and a\.piece[01], pieces of the task a"
    with pytest.raises(DhirError, match=pattern):
        settle(constraints, names, [{0, 1}] * 3, [None] * 3, [0, 0, 1], [CPU, CPU])
    with pytest.raises(DhirError, match=pattern):
        violations(constraints, names, [0, 0, 1], [CPU, CPU])


def test_apart_naming_a_split_task_keeps_its_pieces_together() -> None:
    names = ["a.piece0", "a.piece1", "b"]
    constraints = Constraints((), (Group("apart", ("a", "b"), "[[apart]] #1"),), "c.toml")
    chosen = settle(constraints, names, [{0, 1}] * 3, [None] * 3, [0, 1, 0], [CPU, CPU])
    assert chosen[0] == chosen[1] != chosen[2]
    assert violations(constraints, names, [0, 1, 1], [CPU, CPU]) == [
        "[[apart]] #1: a, b share a rank"
    ]


def test_a_pinned_task_keeps_its_preferred_rank_where_the_pin_allows_it() -> None:
    names = ["a.piece0", "a.piece1", "a.piece2", "b"]
    constraints = Constraints((Pin(("a",), "kind", "cpu", "[[pin]] #1"),), (), "c.toml")
    facts = [CPU, GPU, CPU, CPU]
    runnable = [{0, 1, 2, 3}] * 4
    chosen = settle(constraints, names, runnable, [None] * 4, [2, 1, 3, 1], facts)
    assert chosen[0] == 2 and chosen[2] == 3 and chosen[1] in (0, 2, 3) and chosen[3] is None


# --- dhir-place ------------------------------------------------------------------------

ALGORITHMS = ("round-robin", "heft", "peft", "best")


def _constraints_for(program: RandomSchedule, ranks: int, draw: st.DrawFn) -> Constraints:
    names = [f"t{k}" for k in range(len(program.tasks))]
    pins = tuple(
        Pin(
            (draw(st.sampled_from(names)),),
            "rank",
            draw(st.integers(0, ranks - 1)),
            f"[[pin]] #{k + 1}",
        )
        for k in range(draw(st.integers(0, 2)))
    )
    groups = tuple(
        Group(
            kind,
            tuple(draw(st.lists(st.sampled_from(names), min_size=2, max_size=3))),
            f"[[{kind}]] #{k + 1}",
        )
        for k, kind in enumerate(draw(st.lists(st.sampled_from(["apart", "together"]), max_size=2)))
    )
    return Constraints(pins, groups, "c.toml")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            schedules(max_tasks=8, max_buffers=4, targets=CPU_TARGETS, ranks=n).filter(
                lambda p: len(p.tasks) >= 2
            ),
            st.sampled_from(ALGORITHMS),
        )
    ),
    st.data(),
)
def test_dhir_place_honours_the_constraints_with_every_algorithm(
    case: tuple[int, RandomSchedule, str], data: st.DataObject
) -> None:
    ranks, program, algorithm = case
    constraints = _constraints_for(program, ranks, data.draw)
    module = parse_string(program.text())
    attach_constraints(module, constraints)
    note(f"{algorithm} on {ranks} ranks, {constraints}, the program:\n{program.text()}")
    run_pipeline(module, PassPipeline((SplitTasksPass(ranks),)))
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    fixed = {k: rank_of(t) for k, t in enumerate(schedule.tasks())}
    try:
        run_pipeline(module, PassPipeline((PlacePass(ranks, algorithm),)))
    except DhirError as error:
        assert "c.toml" in str(error)
        _assert_unsatisfiable(constraints, program, ranks)
        return
    names = task_ids(module)
    tasks = list(schedule.tasks())
    ranks_of = [rank_of(t) for t in tasks]
    assert all(r is not None for r in ranks_of)
    assert holds(
        constraints, [names[t] for t in tasks], [CPU] * ranks, [int(r or 0) for r in ranks_of]
    )
    for k, given_rank in fixed.items():
        if given_rank is not None:
            assert rank_of(tasks[k]) == given_rank  # the IR's own pins are kept


def _assert_unsatisfiable(constraints: Constraints, program: RandomSchedule, ranks: int) -> None:
    names = [f"t{k}" for k in range(len(program.tasks))]
    options = [[t.rank] if t.rank is not None else list(range(ranks)) for t in program.tasks]
    assert not any(
        holds(constraints, names, [CPU] * ranks, list(choice))
        for choice in itertools.product(*options)
    )


# --- runs ------------------------------------------------------------------------------


@needs_mpi
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            schedules(max_tasks=8, max_buffers=4, targets=CPU_TARGETS).filter(
                lambda p: len(p.tasks) >= 2
            ),
            st.integers(0, 2**16),
        )
    ),
    st.data(),
)
def test_native_runs_with_constraints_equal_the_interpreter(
    case: tuple[int, RandomSchedule, int], data: st.DataObject
) -> None:
    ranks, program, seed = case
    constraints = _constraints_for(program, ranks, data.draw)
    note(f"on {ranks} ranks, {_as_file(constraints)}, the program:\n{program.text()}")
    inputs = random_inputs(program, seed)
    oracle = dhir.run(program.text(), *inputs, backend="interp")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.json"
        path.write_text(_as_file(constraints))
        try:
            native = dhir.run(program.text(), *inputs, ranks=ranks, constraints=path, timeout=120)
        except DhirError:
            _assert_unsatisfiable(constraints, program, ranks)
            return
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


def _as_file(constraints: Constraints) -> str:
    data: dict[str, list[dict[str, object]]] = {"pin": [], "apart": [], "together": []}
    for pin in constraints.pins:
        data["pin"].append({"tasks": list(pin.tasks), pin.key: pin.value})
    for group in constraints.groups:
        data[group.kind].append({"tasks": list(group.tasks)})
    return json.dumps(data)


PROGRAM = """\
func.func @main(%a: memref<16xf64>, %b: memref<16xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %load = dhir.task %cpu, %a attributes {name = "load0"} {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1.0 : f64
      memref.store %one, %a[%c0] : memref<16xf64>
    }
    %solve0 = dhir.task %cpu, %a, %b {
      %c1 = arith.constant 1 : index
      %x = memref.load %a[%c1] : memref<16xf64>
      memref.store %x, %b[%c1] : memref<16xf64>
    }
    %solve1 = dhir.task %cpu, %b {
      %c2 = arith.constant 2 : index
      %two = arith.constant 2.0 : f64
      memref.store %two, %b[%c2] : memref<16xf64>
    }
  }
  func.return
}
"""


def test_dhir_schedule_and_run_take_the_file_and_name_it_in_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(PROGRAM)
    good = tmp_path / "c.toml"
    good.write_text('[[pin]]\ntasks = "load*"\nrank = 2\n[[apart]]\ntasks = ["solve*"]\n')
    assert main(["schedule", str(program), "-n", "3", "--constraints", str(good)]) == 0
    table = capsys.readouterr().out
    rows = {
        line.split()[0]: line.split()[1]
        for line in table.splitlines()
        if line.startswith(("load", "solve"))
    }
    assert rows["load0"] == "rank2" and rows["solve0"] != rows["solve1"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[pin]]\ntasks = "nothing*"\nrank = 0\n')
    assert main(["schedule", str(program), "-n", "3", "--constraints", str(bad)]) == 1
    assert f"{bad}:2:9: error: [[pin]] #1: 'nothing*' matches no task" in capsys.readouterr().err
    args = ["run", str(program), "-n", "2", "--backend", "interp", "--constraints", str(good)]
    np.save(tmp_path / "x.npy", np.zeros(16))
    assert (
        main([*args, "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "x.npy")]) == 2
    )
    assert "--constraints steers the placement of tasks on MPI ranks" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "c.toml",
            '[[pin]]\ntasks = "load0"\nrank = 1\n\n[[pin]]\ntasks = "load*"\nrank = 2\n',
            [
                "c.toml:5:1: error: task load0 cannot be placed: [[pin]] #1, [[pin]] #2 leave "
                "it no rank in common",
                "c.toml:1:1: note: [[pin]] #1 is here",
            ],
        ),
        (
            "c.toml",
            '[[apart]]\ntasks = ["solve0", "solve1"]\n[[pin]]\ntasks = "solve0"\nrank = 0\n'
            '[[pin]]\ntasks = "solve1"\nrank = 0\n',
            [
                "c.toml:6:1: error: [[apart]] #1, [[pin]] #1, [[pin]] #2 cannot all hold: the "
                "tasks asked apart need more ranks",
                "c.toml:1:1: note: [[apart]] #1 is here",
                "c.toml:3:1: note: [[pin]] #1 is here",
            ],
        ),
        (
            "c.json",
            '{"together": [{"tasks": ["solve*"]}],\n "pin": [{"tasks": "solve0", "rank": 0},\n'
            '  {"tasks": "solve1", "rank": 1}]}',
            [
                "c.json:3:3: error: [[pin]] #1, [[pin]] #2, [[together]] #1 cannot all hold: "
                "solve0, solve1 must share a rank",
                "c.json:1:15: note: [[together]] #1 is here",
                "c.json:2:10: note: [[pin]] #1 is here",
            ],
        ),
    ],
)
def test_entries_that_cannot_all_hold_are_at_their_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, expected: list[str]
) -> None:
    """Constraints that broke only together named the file alone, not their entries' lines."""
    program = tmp_path / "p.mlir"
    program.write_text(PROGRAM)
    (tmp_path / name).write_text(text)
    args = ["schedule", str(program), "-n", "3", "--constraints", str(tmp_path / name)]
    assert main(args) == 1
    lines = [
        line
        for line in capsys.readouterr().err.splitlines()
        if ": note: " in line or ": error: " in line
    ]
    assert len(lines) == len(expected)
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(f"{tmp_path}/{start}")


def test_a_pin_conflict_names_the_task_the_user_wrote_not_its_piece() -> None:
    names = ["add.piece0", "add.piece1"]
    pins = (
        Pin(("add",), "rank", 0, "[[pin]] #1"),
        Pin(("add",), "rank", 1, "[[pin]] #2"),
    )
    constraints = Constraints(pins, (), "c.toml")
    said = r"task add \(piece add\.piece0\) cannot be placed: \[\[pin\]\] #1, \[\[pin\]\] #2"
    with pytest.raises(DhirError, match=said):
        settle(constraints, names, [{0, 1}] * 2, [None] * 2, [0, 1], [CPU, CPU])
