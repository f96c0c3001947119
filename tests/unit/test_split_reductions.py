"""dhir-split on reductions the user lets it reassociate (`dhir.reassociate`,
dhir/transforms/split_reductions.py): pieces compute partials from the combining op's
identity and one task combines them; results equal the whole task's in the interpreter
(bit for bit for integer and min/max reductions, within rounding for float sums and
products) and natively on 2 and 3 ranks; a task it cannot split stays whole with a
warning, and without the attribute nothing changes."""

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dhir
from dhir import parse_string
from dhir.api import run_pipeline
from dhir.cli.main import main
from dhir.ir.tasks import task_ids
from dhir.ir.text import print_module

N = 12
SPREAD = "round-robin"  # piece k on rank k mod N: tiny pieces would all stay on one rank
# op -> (element type, initial value): reductions whose result is exact in any order,
# and float sums and products, which are only close.
EXACT = {
    "addi": ("i32", "5"),
    "muli": ("i64", "3"),
    "andi": ("i32", "-1"),
    "ori": ("i64", "16"),
    "xori": ("i32", "9"),
    "maxsi": ("i32", "-7"),
    "minsi": ("i64", "7"),
    "maxui": ("i32", "3"),
    "minui": ("i32", "-3"),
    "maximumf": ("f64", "-2.5"),
    "minimumf": ("f64", "2.5"),
    "maxnumf": ("f64", "0.0"),
    "minnumf": ("f64", "0.0"),
}
CLOSE = {"addf": ("f64", "0.25"), "mulf": ("f64", "1.5")}


@dataclass(frozen=True)
class Reduction:
    """One task: out[0] = init <op> f(a[i]) over i in [lo, hi) step `step`, then
    out[1] = out[0] (code after the loop), with `dhir.split = pieces`; an scf.for's counter
    and bounds are of type `counter` (index or i32)."""

    op: str
    lo: int
    hi: int
    step: int
    pieces: int
    reassociate: bool = True
    loop: str = "scf.parallel"
    counter: str = "index"

    @property
    def elem(self) -> str:
        return {**EXACT, **CLOSE}[self.op][0]

    def text(self) -> str:
        elem, init = {**EXACT, **CLOSE}[self.op]
        attrs = f"dhir.split = {self.pieces}" + (", dhir.reassociate" if self.reassociate else "")
        return f"""
func.func @main(%a: memref<{N}x{elem}>, %out: memref<2x{elem}>) {{
  dhir.schedule %a, %out {{
    %t = dhir.task target = "cpu", %a, %out attributes {{{attrs}}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %lo = arith.constant {self.lo} : {self.counter}
      %hi = arith.constant {self.hi} : {self.counter}
      %step = arith.constant {self.step} : {self.counter}
      %init = arith.constant {init} : {elem}
      {self._loop(elem)}
      memref.store %r, %out[%c0] : memref<2x{elem}>
      %again = memref.load %out[%c0] : memref<2x{elem}>
      memref.store %again, %out[%c1] : memref<2x{elem}>
    }}
  }}
  return
}}
"""

    def _loop(self, elem: str) -> str:
        if self.loop == "scf.for":
            typed, at, cast = "", "%i", ""
            if self.counter != "index":
                typed, at = f" : {self.counter}", "%ii"
                cast = f"%ii = arith.index_cast %i : {self.counter} to index\n        "
            return f"""%r = scf.for %i = %lo to %hi step %step iter_args(%acc = %init) -> ({elem}){typed} {{
        {cast}%x = memref.load %a[{at}] : memref<{N}x{elem}>
        %s = arith.{self.op} %acc, %x : {elem}
        scf.yield %s : {elem}
      }}"""
        return f"""%r = scf.parallel (%i) = (%lo) to (%hi) step (%step) init (%init) -> {elem} {{
        %x = memref.load %a[%i] : memref<{N}x{elem}>
        scf.reduce(%x : {elem}) {{
        ^bb0(%l: {elem}, %v: {elem}):
          %s = arith.{self.op} %l, %v : {elem}
          scf.reduce.return %s : {elem}
        }}
      }}"""

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed + self.lo * 31 + self.hi)
        if self.elem == "f64":
            scale = 1.0 if self.op == "mulf" else 1e3
            a = rng.standard_normal(N) * scale + (1.0 if self.op == "mulf" else 0.0)
            if self.op in ("maxnumf", "minnumf"):
                a[rng.random(N) < 0.4] = math.nan
            return [a, np.zeros(2)]
        dtype = np.int32 if self.elem == "i32" else np.int64
        a = rng.integers(-(2**20), 2**20, N).astype(dtype)
        if self.op == "muli":
            a = rng.integers(-9, 9, N).astype(dtype)  # the products wrap: still exact
        return [a, np.zeros(2, dtype)]

    def counted_by(self, counter: str) -> "Reduction":
        """This reduction with an scf.for's counter of type `counter` (scf.parallel: index)."""
        return replace(self, counter=counter if self.loop == "scf.for" else "index")

    @property
    def trips(self) -> int:
        return len(range(self.lo, self.hi, self.step))


@st.composite
def reductions(draw: st.DrawFn) -> Reduction:
    lo = draw(st.integers(0, N - 1))
    return Reduction(
        op=draw(st.sampled_from(sorted({**EXACT, **CLOSE}))),
        lo=lo,
        hi=draw(st.integers(lo, N)),
        step=draw(st.integers(1, 3)),
        pieces=draw(st.integers(2, 5)),
        loop=draw(st.sampled_from(("scf.parallel", "scf.for"))),
    ).counted_by(draw(st.sampled_from(("index", "i32"))))


def _split(text: str, ranks: int = 1) -> tuple[str, list[str]]:
    module = parse_string(text)
    run_pipeline(module, f"dhir-split{{ranks={ranks}}}")
    return print_module(module), list(task_ids(module).values())


def _interp(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return dhir.run(text, *[a.copy() for a in inputs], backend="interp", ranks=1)


def _agree(case: Reduction, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        if case.op in CLOSE:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-9)
        else:
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), f"{g}\n{w}"


@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(reductions())
def test_split_reductions_give_the_whole_tasks_results(case: Reduction) -> None:
    text = case.text()
    split, tasks = _split(text)
    pieces = min(case.pieces, case.trips)
    # K pieces and the task combining their partials, or the task whole.
    assert len(tasks) == (pieces + 1 if pieces > 1 else 1), split
    if pieces > 1:
        # Each piece reduces its own range.
        assert split.count("init (%" if case.loop == "scf.parallel" else "iter_args(") == pieces
        assert tasks[-1] == f"t.piece{pieces}"  # %t
    _agree(case, _interp(split, case.inputs()), _interp(text, case.inputs()))


def test_float_partials_are_summed_per_piece() -> None:
    """Each piece starts from -0.0 and stores its own partial; the last task adds the
    initial value and the partials in piece order: the sum is reassociated, so it may
    differ from the sequential one in the last bits only."""
    case = Reduction("addf", 0, N, 1, 3)
    split, tasks = _split(case.text())
    assert tasks == [f"t.piece{k}" for k in range(4)]
    assert split.count("arith.constant -0.000000e+00 : f64") == 3
    assert split.count("memref.store %r") == 3 and "memref.alloc() : memref<3xf64>" in split
    a = np.array([1e16, 1.0, -1e16, 1.0] * 3)
    got = _interp(split, [a, np.zeros(2)])
    partials = [-0.0 + a[4 * k] + a[4 * k + 1] + a[4 * k + 2] + a[4 * k + 3] for k in range(3)]
    assert got[1][0] == 0.25 + partials[0] + partials[1] + partials[2]
    whole = _interp(case.text(), [a, np.zeros(2)])
    assert abs(got[1][0] - whole[1][0]) <= 4.0  # the same sum, in another order
    assert got[1][1] == got[1][0]


def test_without_the_attribute_a_reduction_stays_whole() -> None:
    case = Reduction("addi", 0, N, 1, 3, reassociate=False)
    split, tasks = _split(case.text(), ranks=3)
    assert len(tasks) == 1 and "memref.alloc" not in split


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("arith.addi %l, %v", "arith.subi %l, %v"), "'arith.subi' on i32 has no exact identity"),
        (("arith.addi %l, %v", "arith.addi %l, %v overflow<nsw>"), "overflow flags"),
        (
            ("memref.store %r, %out[%c0]", "scf.for %j = %c0 to %c1 step %c1 {\n}\n"
             "memref.store %r, %out[%c0]"),
            "'scf.for' after the loop",
        ),
        (("init (%init) -> i32", "init (%init) -> i32"), None),
    ],
)  # fmt: skip
def test_a_task_it_cannot_split_stays_whole_with_a_warning(
    change: tuple[str, str], why: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    text = Reduction("addi", 0, N, 1, 3).text().replace(*change)
    _, tasks = _split(text)
    err = capsys.readouterr().err
    if why is None:
        assert len(tasks) == 4 and err == ""
        return
    assert len(tasks) == 1
    assert err.count("\n") == 1 and err.startswith("<string>:4:10: warning: dhir.reassociate on")
    assert "on t has no effect" in err
    assert why in err and "stays whole" in err


def test_the_warning_names_the_tasks_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dhir.cli.dhir_opt import main as dhir_opt

    program = tmp_path / "sub.mlir"
    program.write_text(Reduction("addi", 0, N, 1, 3).text().replace("arith.addi", "arith.subi"))
    assert dhir_opt([str(program), "-p", "dhir-split{ranks=2}"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{program}:4:10: warning: dhir.reassociate on t ")


def test_dhir_schedule_shows_the_pieces_and_the_combining_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sum.mlir"
    path.write_text(Reduction("addf", 0, N, 1, 2).text().replace("dhir.split = 2, ", ""))
    assert main(["schedule", str(path), "-n", "3"]) == 0
    out = capsys.readouterr().out
    for k in range(4):
        assert f"t.piece{k}" in out
    assert "piece4" not in out


NATIVE = [
    Reduction("addf", 0, N, 1, 2),
    Reduction("xori", 1, N, 2, 3),
    Reduction("minnumf", 0, N, 1, 3),
    Reduction("muli", 0, N - 1, 1, 2),
    Reduction("addf", 1, N, 1, 2, loop="scf.for"),
    Reduction("minsi", 0, N, 1, 2, loop="scf.for"),
    Reduction("addi", 1, N, 1, 2, loop="scf.for", counter="i32"),
]


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("case", NATIVE, ids=lambda c: f"{c.loop}-{c.counter}-{c.op}")
def test_split_reductions_run_natively_as_the_interpreter_does(case: Reduction, ranks: int) -> None:
    text = case.text().replace(f"dhir.split = {case.pieces}, ", "")
    assert len(_split(text, ranks)[1]) == ranks + 1  # one piece per rank, and the combining task
    got = dhir.run(text, *case.inputs(1), backend="native", ranks=ranks, placement=SPREAD)
    _agree(case, got, _interp(text, case.inputs(1)))


@pytest.mark.mlir
def test_a_split_sum_runs_on_openmpi() -> None:
    case = Reduction("addf", 0, N, 1, 2)
    text = case.text().replace(f"dhir.split = {case.pieces}, ", "")
    assert len(_split(text, 2)[1]) == 3
    got = dhir.run(
        text, *case.inputs(2), backend="native", ranks=2, mpi="openmpi", placement=SPREAD
    )
    _agree(case, got, _interp(text, case.inputs(2)))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            ("scf.yield %s", "%j = arith.addi %i, %c1 : index\n"
             "memref.store %x, %a[%j] : memref<12xi32>\nscf.yield %s"),
            "iterations are not proven independent",
        ),
        (
            ("scf.yield %s", "%twice = arith.addi %s, %acc : i32\nscf.yield %twice"),
            "not used by exactly one combining op",
        ),
        (("arith.addi %acc, %x", "arith.addi %acc, %acc"), "not used by exactly one"),
    ],
)  # fmt: skip
def test_an_scf_for_that_is_not_a_plain_accumulation_stays_whole(
    change: tuple[str, str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = Reduction("addi", 0, N - 1, 1, 3, loop="scf.for").text()
    assert len(_split(text)[1]) == 4
    _, tasks = _split(text.replace(*change))
    err = capsys.readouterr().err
    assert len(tasks) == 1 and why in err and err.count("\n") == 1


def _odd_rows_copied(text: str, at: str) -> str:
    """`text`'s scf.for also storing a[i] into a[i + 1] (`at`: i as an index)."""
    store = f"%j = arith.addi {at}, %c1 : index\nmemref.store %x, %a[%j] : memref<12xi32>\n"
    return text.replace("scf.yield %s", store + "scf.yield %s")


@pytest.mark.parametrize("counter", ["index", "i32"])
def test_an_scf_for_of_step_two_is_compared_at_the_values_it_takes(counter: str) -> None:
    """a[i + 1] = a[i] for even i: the odd rows written are no iteration's reads, though
    i = 0 and i = 1 would clash (as dhir-split compares a loop without iter_args)."""
    case = Reduction("addi", 0, N, 2, 3, loop="scf.for", counter=counter)
    text = _odd_rows_copied(case.text(), "%i" if counter == "index" else "%ii")
    split, tasks = _split(text)
    assert tasks == [f"t.piece{k}" for k in range(4)], split
    _agree(case, _interp(split, case.inputs()), _interp(text, case.inputs()))


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_split_scf_for_of_step_two_runs_natively_as_the_interpreter_does(ranks: int) -> None:
    case = Reduction("maxsi", 0, N, 2, 1, loop="scf.for")
    text = _odd_rows_copied(case.text().replace("dhir.split = 1, ", ""), "%i")
    assert len(_split(text, ranks)[1]) == (1 if ranks == 1 else ranks + 1)
    got = dhir.run(text, *case.inputs(), backend="native", ranks=ranks, placement=SPREAD)
    _agree(case, got, _interp(text, case.inputs()))


TIME_LOOP = """
func.func @main(%a: memref<12xf64>, %s: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %t = %c0 to %c3 step %c1 {
    dhir.schedule %a, %s {
      %sum = dhir.task target = "cpu", %a, %s attributes {dhir.reassociate} {
        %z = arith.constant 0 : index
        %one = arith.constant 1 : index
        %n = arith.constant 12 : index
        %init = memref.load %s[%z] : memref<1xf64>
        %r = scf.parallel (%i) = (%z) to (%n) step (%one) init (%init) -> f64 {
          %x = memref.load %a[%i] : memref<12xf64>
          scf.reduce(%x : f64) {
          ^bb0(%l: f64, %v: f64):
            %y = arith.addf %l, %v : f64
            scf.reduce.return %y : f64
          }
        }
        memref.store %r, %s[%z] : memref<1xf64>
      }
      %scale = dhir.task target = "cpu", %a, %s {
        %z = arith.constant 0 : index
        %one = arith.constant 1 : index
        %n = arith.constant 12 : index
        %h = arith.constant 0.5 : f64
        scf.for %i = %z to %n step %one {
          %x = memref.load %a[%i] : memref<12xf64>
          %y = arith.mulf %x, %h : f64
          memref.store %y, %a[%i] : memref<12xf64>
        }
      }
    }
  }
  return
}
"""


@pytest.mark.mlir
def test_a_split_sum_in_a_time_loop_runs_natively_as_the_interpreter_does() -> None:
    """s[0] += sum(a); a *= 0.5, three times: the initial value is loaded before the loop,
    and the partials buffer is allocated and freed around the schedule in each iteration."""
    split, tasks = _split(TIME_LOOP, 2)
    assert tasks[:3] == [f"sum.piece{k}" for k in range(3)]
    assert split.count("memref.alloc") == 1
    assert split.index("memref.alloc") > split.index("scf.for %t")
    inputs = [np.random.default_rng(4).standard_normal(12), np.array([2.0])]
    got = dhir.run(TIME_LOOP, *inputs, backend="native", ranks=2, placement=SPREAD)
    want = _interp(TIME_LOOP, inputs)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_array_equal(got[0], want[0])


def test_a_load_before_the_loop_of_a_memref_the_loop_writes_keeps_it_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The combining task would read s[0] after the pieces wrote it."""
    store = "scf.reduce(%x"
    writes = "memref.store %x, %s[%z] : memref<1xf64>\n          scf.reduce(%x"
    text = TIME_LOOP.replace(store, writes)
    assert "sum.piece2" in _split(TIME_LOOP, 2)[1]
    assert "sum" in _split(text, 2)[1]
    assert "its loop may write %s, which a load before it reads" in capsys.readouterr().err
