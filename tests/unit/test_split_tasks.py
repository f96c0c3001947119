"""dhir-split (dhir/transforms/split_tasks.py): random one-loop tasks, and tasks of one
linalg op (matmul, transposed matmul, generic), cut into K pieces give bit-identical
interpreter results to the whole task; loops whose iterations depend on each other, and
linalg ops that cannot be cut by rows of d0, stay whole; native runs of the pieces on 1-4
ranks equal the interpreter."""

import functools
import itertools
from dataclasses import dataclass, replace
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import profile
from xdsl.dialects import arith, memref, scf

import dhir
from dhir import parse_string
from dhir.analysis.lift import Lifter
from dhir.analysis.regions import task_regions
from dhir.api import run_pipeline
from dhir.cli.main import main
from dhir.dialects.dhir import TaskOp
from dhir.ir.diagnostics import DhirError
from dhir.ir.tasks import task_ids
from dhir.ir.text import print_module
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach

ROWS, COLS = 9, 3
LOOPS = ("scf.for", "scf.parallel", "affine.for", "affine.parallel")
MPIS = ("mpich", "openmpi")
SPREAD = "round-robin"  # piece k on rank k mod N: tiny pieces would all stay on one rank


@dataclass(frozen=True)
class OneLoop:
    """One task: for i in [lo, hi) step `step` (hi: the entry's %n when `dynamic`), for j:
    buf[dst][i, j] = buf[src][i + shift, j] * 3 + i (i32), or * 0.5 + 1 (f64). An scf.for's
    counter, bounds and %n are of type `counter` (index or i32)."""

    loop: str
    lo: int
    hi: int
    step: int
    dst: int
    src: int
    shift: int
    floats: bool
    dynamic: bool
    pieces: int
    counter: str = "index"

    @property
    def carried(self) -> bool:
        # With a step of 2 or 3 and known bounds, the row 1 away is no iteration's own.
        return self.dst == self.src and self.shift != 0 and (self.step == 1 or self.dynamic)

    def text(self) -> str:
        elem = "f64" if self.floats else "i32"
        mem = f"memref<{ROWS}x{COLS}x{elem}>"
        value = (
            "%h = arith.constant 0.5 : f64\n %o = arith.constant 1.0 : f64\n"
            " %m = arith.mulf %x, %h : f64\n %y = arith.addf %m, %o : f64"
            if self.floats
            else "%three = arith.constant 3 : i32\n %ii = arith.index_cast %i : index to i32\n"
            " %m = arith.muli %x, %three : i32\n %y = arith.addi %m, %ii : i32"
        )
        high = "%n" if self.dynamic else "%chi"
        if self.loop == "affine.for":
            head = f"affine.for %i = {self.lo} to {self.hi} step {self.step} {{"
        elif self.loop == "affine.parallel":
            head = f"affine.parallel (%i) = ({self.lo}) to ({self.hi}) step ({self.step}) {{"
        elif self.loop == "scf.for" and self.counter != "index":
            head = (
                f"scf.for %i0 = %clo to {high} step %cstep : {self.counter} {{\n"
                f" %i = arith.index_cast %i0 : {self.counter} to index"
            )
        elif self.loop == "scf.for":
            head = f"scf.for %i = %clo to {high} step %cstep {{"
        else:
            head = f"scf.parallel (%i) = (%clo) to ({high}) step (%cstep) {{"
        split = f" attributes {{dhir.split = {self.pieces}}}"
        return f"""
func.func @main(%b0: {mem}, %b1: {mem}, %n: {self.counter}) {{
  dhir.schedule %b0, %b1, %n {{
    %t = dhir.task target = "cpu", %b0, %b1{split} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cols = arith.constant {COLS} : index
      %clo = arith.constant {self.lo} : {self.counter}
      %chi = arith.constant {self.hi} : {self.counter}
      %cstep = arith.constant {self.step} : {self.counter}
      %shift = arith.constant {self.shift} : index
      {head}
        scf.for %j = %c0 to %cols step %c1 {{
          %r = arith.addi %i, %shift : index
          %x = memref.load %b{self.src}[%r, %j] : {mem}
          {value}
          memref.store %y, %b{self.dst}[%i, %j] : {mem}
        }}
      }}
    }}
  }}
  return
}}
"""

    def inputs(self) -> list[object]:
        rng = np.random.default_rng(self.lo * 31 + self.hi)
        dtype = np.float64 if self.floats else np.int32
        bufs = [rng.integers(-50, 50, (ROWS, COLS)).astype(dtype) for _ in range(2)]
        return [*bufs, np.int32(self.hi) if self.counter == "i32" else self.hi]


@st.composite
def one_loops(draw: st.DrawFn, loops: tuple[str, ...] = LOOPS) -> OneLoop:
    loop = draw(st.sampled_from(loops))
    shift = draw(st.sampled_from((-1, 0, 1)))
    lo = draw(st.integers(max(0, -shift), ROWS - 1))
    hi = draw(st.integers(lo, ROWS - max(0, shift)))
    dst, src = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    if loop.endswith("parallel") and dst == src and shift != 0:
        src = 1 - dst  # a parallel loop whose iterations race is the user's error
    return OneLoop(
        loop=loop,
        lo=lo,
        hi=hi,
        step=draw(st.integers(1, 3)),
        dst=dst,
        src=src,
        shift=shift,
        floats=draw(st.booleans()),
        dynamic=loop.startswith("scf") and draw(st.booleans()),
        pieces=draw(st.integers(1, 5)),
        counter=draw(st.sampled_from(("index", "i32"))) if loop == "scf.for" else "index",
    )


def _split(text: str, ranks: int = 1) -> tuple[str, list[str]]:
    module = parse_string(text)
    run_pipeline(module, f"dhir-split{{ranks={ranks}}}")
    return print_module(module), list(task_ids(module).values())


def _interp(text: str, inputs: list[object]) -> list[np.ndarray]:
    return dhir.run(text, *inputs, backend="interp", ranks=1)


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), f"argument {k}:\n{g}\n{w}"


@profile(60)
@given(one_loops())
def test_split_loops_give_the_whole_tasks_results_bit_for_bit(case: OneLoop) -> None:
    text = case.text()
    split, tasks = _split(text)
    trips = len(range(case.lo, case.hi, case.step))
    may_split = not case.carried and case.pieces > 1 and (case.dynamic or trips > 1)
    if may_split:
        assert len(tasks) == (case.pieces if case.dynamic else min(case.pieces, trips))
    else:
        assert len(tasks) == 1, split
    _same(_interp(split, case.inputs()), _interp(text, case.inputs()))


@pytest.mark.parametrize(
    ("loop", "counter"), [("scf.for", "index"), ("scf.for", "i32"), ("scf.parallel", "index")]
)
@pytest.mark.parametrize("step", [2, 3])
def test_schedule_scalar_bounds_with_a_step_split_at_values_the_loop_takes(
    loop: str, counter: str, step: int
) -> None:
    """b0[i] = b0[i] * 3 + i, which an iteration run twice or skipped would change, to a
    run-time %n (below, at and beyond the lower bound) in K pieces: each piece starts at
    a value the loop takes (before: whole, "its step is not 1")."""
    for lo, hi, pieces in itertools.product((0, 1, 2), (0, 2, 5, 9), (2, 3, 4)):
        case = OneLoop(loop, lo, hi, step, 0, 0, 0, False, True, pieces, counter)
        split, tasks = _split(case.text())
        assert len(tasks) == pieces, split
        _same(_interp(split, case.inputs()), _interp(case.text(), case.inputs()))


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_schedule_scalar_bounds_with_a_step_run_natively_as_the_interpreter_does(
    ranks: int,
) -> None:
    case = OneLoop("scf.for", 1, ROWS, 2, 0, 0, 0, True, True, 1)
    text = case.text().replace(" attributes {dhir.split = 1}", "")
    assert len(_split(text, ranks=ranks)[1]) == ranks
    got = dhir.run(text, *case.inputs(), backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, case.inputs()))


def test_ranks_give_one_piece_each_and_split_one_keeps_a_task_whole() -> None:
    case = OneLoop("scf.for", 0, ROWS, 1, 1, 0, 0, False, False, 1)
    text = case.text().replace(" attributes {dhir.split = 1}", "")
    assert len(_split(text, ranks=4)[1]) == 4
    assert len(_split(case.text(), ranks=4)[1]) == 1
    names = _split(text, ranks=2)[1]
    assert names == ["t.piece0", "t.piece1"]


def test_a_call_in_the_loop_keeps_the_task_whole() -> None:
    text = OneLoop("scf.for", 0, ROWS, 1, 1, 0, 0, False, False, 3).text()
    text = text.replace("memref.store %y", "func.call @g() : () -> ()\n memref.store %y")
    text = text.replace("  return\n}", "  return\n}\nfunc.func private @g()")
    assert len(_split(text)[1]) == 1


@pytest.mark.mlir
@settings(max_examples=6, derandomize=True, deadline=None, print_blob=True)
@given(one_loops(), st.integers(1, 4), st.sampled_from(MPIS))
def test_split_tasks_run_natively_as_the_interpreter_does(
    case: OneLoop, ranks: int, mpi: str
) -> None:
    text = case.text().replace(f" attributes {{dhir.split = {case.pieces}}}", "")
    got = dhir.run(text, *case.inputs(), backend="native", ranks=ranks, mpi=mpi, placement=SPREAD)
    _same(got, _interp(text, case.inputs()))


@pytest.mark.mlir
@pytest.mark.parametrize("mpi", MPIS)
def test_rows_of_one_task_on_three_ranks_equal_the_interpreter(mpi: str) -> None:
    case = OneLoop("scf.for", 0, ROWS, 1, 1, 0, 0, False, False, 1)
    text = case.text().replace(" attributes {dhir.split = 1}", "")
    assert len(_split(text, ranks=3)[1]) == 3
    got = dhir.run(text, *case.inputs(), backend="native", ranks=3, mpi=mpi, placement=SPREAD)
    _same(got, _interp(text, case.inputs()))


def _i32_rows(bounds: str, form: str) -> str:
    """b1[i] = b0[i] * 3 + i over rows i in [1, 9) of an scf.for on i32, whose bounds are
    constants or the entry's %lo and %n, in a task or as plain code (CodeDrop's)."""
    low, high = ("%c1i", "%c9i") if bounds == "constant" else ("%lo", "%n")
    mem = f"memref<{ROWS}x{COLS}xi32>"
    loop = f"""
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cols = arith.constant {COLS} : index
      %c1i = arith.constant 1 : i32
      %c9i = arith.constant 9 : i32
      %three = arith.constant 3 : i32
      scf.for %i = {low} to {high} step %c1i : i32 {{
        %r = arith.index_cast %i : i32 to index
        scf.for %j = %c0 to %cols step %c1 {{
          %x = memref.load %b0[%r, %j] : {mem}
          %m = arith.muli %x, %three : i32
          %y = arith.addi %m, %i : i32
          memref.store %y, %b1[%r, %j] : {mem}
        }}
      }}"""
    if form == "task":
        loop = f"""
  dhir.schedule %b0, %b1, %lo, %n {{
    %t = dhir.task target = "cpu", %b0, %b1 {{{loop}
    }}
  }}"""
    return f"""
func.func @main(%b0: {mem}, %b1: {mem}, %lo: i32, %n: i32) {{{loop}
  return
}}
"""


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("form", ["task", "plain"])
@pytest.mark.parametrize("bounds", ["constant", "scalar"])
def test_i32_loops_split_and_run_natively_as_the_interpreter_does(
    bounds: str, form: str, ranks: int
) -> None:
    """The pieces' bounds keep the loop's type (i32, not index), which mlir-opt checks."""
    text = _i32_rows(bounds, form)
    if form == "task":
        assert len(_split(text, ranks=ranks)[1]) == ranks
    rng = np.random.default_rng(ranks)
    inputs = [rng.integers(-50, 50, (ROWS, COLS)).astype(np.int32) for _ in range(2)]
    inputs += [np.int32(1), np.int32(ROWS)]
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, inputs))


def _row_ranges(text: str, ranks: int, system: System) -> list[tuple[int, int]]:
    module = parse_string(text)
    attach(module, system)
    run_pipeline(module, f"dhir-split{{ranks={ranks}}}")
    out = []
    for loop in (op for op in module.walk() if isinstance(op, scf.ForOp)):
        low, high = (v.owner for v in (loop.lb, loop.ub))
        if isinstance(low, arith.ConstantOp) and loop.body.block.args[0].uses:
            if any(u.operation.name == "arith.addi" for u in loop.body.block.args[0].uses):
                assert isinstance(high, arith.ConstantOp)
                out.append((low.value.value.data, high.value.value.data))  # type: ignore[union-attr]
    return out


def test_pieces_follow_the_devices_rates_in_a_machine_description() -> None:
    fast = replace(guess_device("fast", "x86_64", cores=8), peak_gflops=100.0)
    slow = replace(guess_device("slow", "x86_64", cores=8), peak_gflops=50.0)
    system = System((Node("n0", (fast, slow)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)
    case = OneLoop("scf.for", 0, ROWS, 1, 1, 0, 0, False, False, 1)
    text = case.text().replace(" attributes {dhir.split = 1}", "")
    assert _row_ranges(text, 2, system) == [(0, 6), (6, 9)]
    shared = replace(fast, ranks=2)
    even = System((Node("n0", (shared,)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)
    assert _row_ranges(text, 2, even) == [(0, 4), (4, 9)]


def test_dhir_schedule_shows_the_pieces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = OneLoop("scf.for", 0, ROWS, 1, 1, 0, 0, False, False, 1)
    path = tmp_path / "one.mlir"
    path.write_text(case.text().replace(" attributes {dhir.split = 1}", ""))
    assert main(["schedule", str(path), "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "t.piece0" in out and "t.piece1" in out


def test_affine_parallel_regions_are_the_rows_it_runs_over() -> None:
    case = OneLoop("affine.parallel", 2, 8, 2, 1, 0, 0, False, False, 1)
    module = parse_string(case.text())
    task = next(op for op in module.walk() if isinstance(op, TaskOp))
    written = task_regions(task).written(task.memrefs[1])
    rows = "(x0 = 2 or x0 = 4 or x0 = 6)"
    assert written == isl.Set(f"{{ [x0, x1] : {rows} and 0 <= x1 < {COLS} }}")


def _row_halves(tasks: int) -> str:
    """A 8x4 copy as `tasks` tasks over row ranges (1: one task over every row)."""
    rows = 8 // tasks
    body = "".join(
        f"""
    %t{k} = dhir.task %cpu, %a, %b {{
      %lo = arith.constant {k * rows} : index
      %hi = arith.constant {(k + 1) * rows} : index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %lo to %hi step %c1 {{
        scf.for %j = %c0 to %c4 step %c1 {{
          %x = memref.load %a[%i, %j] : memref<8x4xi32>
          memref.store %x, %b[%i, %j] : memref<8x4xi32>
        }}
      }}
    }}"""
        for k in range(tasks)
    )
    return f"""
func.func @main(%a: memref<8x4xi32>, %b: memref<8x4xi32>) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
    {body}
  }}
  return
}}
"""


@pytest.mark.parametrize(("tasks", "pieces"), [(1, 2), (2, 0)])
def test_by_default_only_schedules_with_fewer_independent_tasks_than_ranks_split(
    tasks: int, pieces: int
) -> None:
    """One task on two ranks becomes two pieces; two independent tasks (cut by hand)
    already keep both ranks busy and stay as written."""
    from dhir.api import run_pipeline

    module = parse_string(_row_halves(tasks))
    run_pipeline(module, "dhir-split{ranks=2}")
    assert str(module).count("dhir.piece") == pieces


@pytest.mark.parametrize("count", ["0", "65537", "9223372036854775807"])
def test_a_split_outside_one_to_max_ranks_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: str
) -> None:
    """Below 1, or more pieces than ranks may be: 2**63 - 1 was a MemoryError (an
    internal error) building the pieces' weights."""
    from dhir.cli.dhir_opt import main as dhir_opt

    program = tmp_path / "bad.mlir"
    forced = f"dhir.task %cpu, %a, %b attributes {{dhir.split = {count}}} {{"
    program.write_text(_row_halves(1).replace("dhir.task %cpu, %a, %b {", forced))
    assert dhir_opt([str(program), "-p", "dhir-split{ranks=2}"]) == 1
    err = capsys.readouterr().err
    assert f"{program}:6:11:" in err and "dhir.split must be an integer from 1 to 65536" in err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("count", ["0", "65537"])
def test_the_interpreter_refuses_a_split_the_build_refuses(tmp_path: Path, count: str) -> None:
    """`--backend interp` ran a task with `dhir.split = 0` and exited 0, where the native
    build stops at the task."""
    program = tmp_path / "bad.mlir"
    forced = f"dhir.task %cpu, %a, %b attributes {{dhir.split = {count}}} {{"
    program.write_text(_row_halves(1).replace("dhir.task %cpu, %a, %b {", forced))
    inputs = [np.zeros((8, 4), np.int32), np.zeros((8, 4), np.int32)]
    with pytest.raises(DhirError) as caught:
        dhir.run(program, *inputs, backend="interp", ranks=2)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.loc is not None and (diagnostic.loc.line, diagnostic.loc.col) == (6, 11)
    assert "dhir.split must be an integer from 1 to 65536" in diagnostic.message


_KEEP = """
func.func private @keep(%m: memref<8x4xi32>, %i: index, %j: index, %x: i32) {
  memref.store %x, %m[%i, %j] : memref<8x4xi32>
  return
}
"""


def test_a_split_that_cannot_be_made_says_so_at_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dhir.split = K on a task it cannot cut: one warning line, the task stays whole."""
    from dhir.cli.dhir_opt import main as dhir_opt

    forced = "dhir.task %cpu, %a, %b attributes {dhir.split = 2} {"
    whole = _row_halves(1).replace("dhir.task %cpu, %a, %b {", forced)
    carried = whole.replace("memref.store %x, %b[%i, %j]", "memref.store %x, %a[%j, %i]")
    one_row = whole.replace("arith.constant 8 : index", "arith.constant 1 : index")
    on_gpu = whole.replace('{kind = "cpu"}', '{kind = "gpu"}')
    # A parallel loop that calls a function: the call, not the loop, keeps it whole.
    calls = (
        whole.replace(
            "scf.for %i = %lo to %hi step %c1 {", "scf.parallel (%i) = (%lo) to (%hi) step (%c1) {"
        ).replace(
            "memref.store %x, %b[%i, %j] : memref<8x4xi32>",
            "func.call @keep(%b, %i, %j, %x) : (memref<8x4xi32>, index, index, i32) -> ()",
        )
        + _KEEP
    )
    assert "scf.parallel" in calls and "func.call" in calls
    for text, why in [
        (carried, "its scf.for's iterations are not proven to touch disjoint elements"),
        (calls, "its loop calls a function or reaches a global"),
        (one_row, "its loop has too few iterations to cut into 2 pieces"),
        (on_gpu, "GPU tasks are not split"),
        (whole, None),
    ]:
        program = tmp_path / "forced.mlir"
        program.write_text(text)
        out = tmp_path / "out.mlir"
        assert dhir_opt([str(program), "-p", "dhir-split{ranks=2}", "-o", str(out)]) == 0
        err = capsys.readouterr().err
        pieces = out.read_text().count("dhir.piece")
        if why is None:
            assert err == "" and pieces == 2
        else:
            assert f"{program}:6:11: warning: dhir.split = 2 on t0 " in err
            assert why in err and "the task stays whole" in err and pieces == 0


# --- linalg ops ------------------------------------------------------------------------

INNER = 4  # the matmul's k and the generic's second loop


@dataclass(frozen=True)
class LinalgTask:
    """One task whose work is one linalg op over `rows` values of d0, on i32 or f64:
    - `matmul`: C[rows x 3] += A[rows x INNER] * B[INNER x 3];
    - `matmul_t`: the same with A stored transposed (INNER x rows, `indexing_maps`);
    - `generic`: O = X * Y^T + v (X: rows x INNER, Y: INNER x rows, v: INNER, a row
      every d0 reads), O stored as rows x INNER, or transposed when `column_out`."""

    kind: str
    rows: int
    floats: bool
    column_out: bool
    pieces: int

    def shapes(self) -> list[tuple[int, ...]]:
        if self.kind == "matmul":
            return [(self.rows, INNER), (INNER, 3), (self.rows, 3)]
        if self.kind == "matmul_t":
            return [(INNER, self.rows), (INNER, 3), (self.rows, 3)]
        out = (INNER, self.rows) if self.column_out else (self.rows, INNER)
        return [(self.rows, INNER), (INNER, self.rows), (INNER,), out]

    def text(self) -> str:
        elem = "f64" if self.floats else "i32"
        types = [f"memref<{'x'.join(map(str, s))}x{elem}>" for s in self.shapes()]
        names = [f"%m{k}" for k in range(len(types))]
        args = ", ".join(f"{n}: {t}" for n, t in zip(names, types, strict=True))
        ins, outs = ", ".join(names[:-1]), names[-1]
        typed = f"ins({ins} : {', '.join(types[:-1])}) outs({outs} : {types[-1]})"
        if self.kind.startswith("matmul"):
            maps = ""
            if self.kind == "matmul_t":
                maps = (
                    "indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, "
                    "affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>] "
                )
            work = f"linalg.matmul {maps}{typed}"
        else:
            mul, add = ("arith.mulf", "arith.addf") if self.floats else ("arith.muli", "arith.addi")
            out = "(d1, d0)" if self.column_out else "(d0, d1)"
            work = f"""linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
          affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d1)>,
          affine_map<(d0, d1) -> {out}>], iterator_types = ["parallel", "parallel"]}}
          {typed} {{
      ^bb0(%x: {elem}, %y: {elem}, %v: {elem}, %o: {elem}):
        %p = {mul} %x, %y : {elem}
        %s = {add} %p, %v : {elem}
        linalg.yield %s : {elem}
      }}"""
        return f"""
func.func @main({args}) {{
  dhir.schedule {", ".join(names)} {{
    %t = dhir.task target = "cpu", {", ".join(names)} attributes {{dhir.split = {self.pieces}}} {{
      {work}
    }}
  }}
  return
}}
"""

    def unforced(self) -> str:
        return self.text().replace(f" attributes {{dhir.split = {self.pieces}}}", "")

    def inputs(self) -> list[object]:
        rng = np.random.default_rng(self.rows * 7 + self.pieces)
        dtype = np.float64 if self.floats else np.int32
        return [rng.standard_normal(s).astype(dtype) * 9 for s in self.shapes()]


@st.composite
def linalg_tasks(draw: st.DrawFn) -> LinalgTask:
    return LinalgTask(
        kind=draw(st.sampled_from(("matmul", "matmul_t", "generic"))),
        rows=draw(st.integers(1, 7)),
        floats=draw(st.booleans()),
        column_out=draw(st.booleans()),
        pieces=draw(st.integers(1, 5)),
    )


@profile(40)
@given(linalg_tasks())
def test_split_linalg_ops_give_the_whole_tasks_results_bit_for_bit(case: LinalgTask) -> None:
    split, tasks = _split(case.text())
    assert len(tasks) == (min(case.pieces, case.rows) if case.pieces > 1 else 1), split
    if len(tasks) > 1:
        assert "memref.subview" in split
    _same(_interp(split, case.inputs()), _interp(case.text(), case.inputs()))


def test_linalg_pieces_write_disjoint_rows() -> None:
    """The region analysis follows the pieces' subviews: each piece of a matmul writes
    its own rows of C, and together they write all of C."""
    case = LinalgTask("matmul_t", 7, True, False, 3)
    module = parse_string(case.text())
    run_pipeline(module, "dhir-split")
    pieces = [op for op in module.walk() if isinstance(op, TaskOp)]
    written = [task_regions(p).written(p.memrefs[2]) for p in pieces]
    bounds = [(0, 2), (2, 4), (4, 7)]
    for region, (low, high) in zip(written, bounds, strict=True):
        assert region == isl.Set(f"{{ [x0, x1] : {low} <= x0 < {high} and 0 <= x1 < 3 }}")
    read_a = [task_regions(p).read(p.memrefs[0]) for p in pieces]
    for region, (low, high) in zip(read_a, bounds, strict=True):
        assert region == isl.Set(f"{{ [x0, x1] : 0 <= x0 < {INNER} and {low} <= x1 < {high} }}")


_KEPT_WHOLE = {
    # d0 is a reduction: its pieces would add partial sums in another order.
    "reduction outermost": (
        '["reduction", "parallel"]',
        "(d0, d1) -> (d0, d1)",
        "(d0, d1) -> (d1)",
        "%s = arith.addf %b, %a : f64",
    ),
    # The same with rows of the output tagged as a reduction: taken at its word.
    "reduction outermost writing rows": (
        '["reduction", "parallel"]',
        "(d0, d1) -> (d0, d1)",
        "(d0, d1) -> (d0, d1)",
        "%s = arith.addf %b, %a : f64",
    ),
    # d0 inside an expression: the rows a piece reads are not a block of d0.
    "d0 in an expression": (
        '["parallel", "parallel"]',
        "(d0, d1) -> (d0 + d1, d1)",
        "(d0, d1) -> (d0, d1)",
        "%s = arith.addf %a, %a : f64",
    ),
    # linalg.index of d0 counts from the piece's first row, not the op's.
    "linalg.index": (
        '["parallel", "parallel"]',
        "(d0, d1) -> (d0, d1)",
        "(d0, d1) -> (d0, d1)",
        "%i = linalg.index 0 : index\n %f = arith.index_cast %i : index to i64\n"
        " %g = arith.sitofp %f : i64 to f64\n %s = arith.addf %a, %g : f64",
    ),
}


@pytest.mark.parametrize("name", sorted(_KEPT_WHOLE))
def test_linalg_ops_that_cannot_be_cut_by_rows_stay_whole(name: str) -> None:
    iterators, read, write, body = _KEPT_WHOLE[name]
    x = "memref<11x4xf64>" if "+" in read else "memref<8x4xf64>"  # rows d0 + d1 reaches
    out, kind = ("%r", "memref<4xf64>") if write.endswith("(d1)") else ("%o", "memref<8x4xf64>")
    text = f"""
func.func @main(%x: {x}, %o: memref<8x4xf64>, %r: memref<4xf64>) {{
  dhir.schedule %x, %o, %r {{
    %t = dhir.task target = "cpu", %x, %o, %r attributes {{dhir.split = 2}} {{
      linalg.generic {{indexing_maps = [affine_map<{read}>, affine_map<{write}>],
          iterator_types = {iterators}}} ins(%x : {x}) outs({out} : {kind}) {{
      ^bb0(%a: f64, %b: f64):
        {body}
        linalg.yield %s : f64
      }}
    }}
  }}
  return
}}
"""
    split, tasks = _split(text)
    assert len(tasks) == 1 and "memref.subview" not in split, split


@pytest.mark.mlir
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("kind", ["matmul_t", "generic"])
def test_split_linalg_ops_run_natively_as_the_interpreter_does(
    kind: str, ranks: int, mpi: str
) -> None:
    case = LinalgTask(kind, 7, True, kind == "generic", 1)
    text = case.unforced()
    assert len(_split(text, ranks=ranks)[1]) == ranks
    got = dhir.run(text, *case.inputs(), backend="native", ranks=ranks, mpi=mpi, placement=SPREAD)
    _same(got, _interp(text, case.inputs()))


# Named ops: (op with {0}, {1}, ... for operands and {t0}, ... for their types, operand
# shapes, pieces with dhir.split = 2: 1 where d0 is a reduction).
_NAMED: dict[str, tuple[str, list[tuple[int, ...]], int]] = {
    "copy": ("linalg.copy ins({0} : {t0}) outs({1} : {t1})", [(5, 3), (5, 3)], 2),
    "add": ("linalg.add ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})", [(5, 3)] * 3, 2),
    "transpose": (
        "linalg.transpose ins({0} : {t0}) outs({1} : {t1}) permutation = [1, 0]",
        [(3, 5), (5, 3)],
        2,
    ),
    "batch_matmul": (
        "linalg.batch_matmul ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})",
        [(3, 2, 4), (3, 4, 5), (3, 2, 5)],
        2,
    ),
    "matvec": (
        "linalg.matvec ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})",
        [(5, 4), (4,), (5,)],
        2,
    ),
    "vecmat": (
        "linalg.vecmat ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})",
        [(4,), (4, 5), (5,)],
        2,
    ),
    "dot": ("linalg.dot ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})", [(4,), (4,), ()], 1),
    "conv_2d_nhwc_hwcf": (
        "linalg.conv_2d_nhwc_hwcf ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})",
        [(3, 5, 5, 2), (2, 2, 2, 3), (3, 4, 4, 3)],
        2,
    ),
    "pooling_nhwc_sum": (
        "linalg.pooling_nhwc_sum ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})",
        [(3, 5, 5, 2), (2, 2), (3, 4, 4, 2)],
        2,
    ),
    "mmt4d": (
        "linalg.mmt4d ins({0}, {1} : {t0}, {t1}) outs({2} : {t2})",
        [(3, 2, 2, 2), (4, 2, 2, 2), (3, 4, 2, 2)],
        2,
    ),
}


def _named(name: str, split: int | None) -> tuple[str, list[object]]:
    op, shapes, _ = _NAMED[name]
    names = [f"%m{k}" for k in range(len(shapes))]
    types = [f"memref<{''.join(f'{d}x' for d in s)}f64>" for s in shapes]
    work = op.format(*names, **{f"t{k}": t for k, t in enumerate(types)})
    forced = f" attributes {{dhir.split = {split}}}" if split else ""
    text = f"""
func.func @main({", ".join(f"{n}: {t}" for n, t in zip(names, types, strict=True))}) {{
  dhir.schedule {", ".join(names)} {{
    %t = dhir.task target = "cpu", {", ".join(names)}{forced} {{
      {work}
    }}
  }}
  return
}}
"""
    rng = np.random.default_rng(len(name))
    return text, [rng.integers(-5, 5, s).astype(np.float64) for s in shapes]


@pytest.mark.parametrize("name", sorted(_NAMED))
def test_named_linalg_ops_split_by_d0_equal_the_whole_op(name: str) -> None:
    text, inputs = _named(name, 2)
    split, tasks = _split(text)
    assert len(tasks) == _NAMED[name][2], split
    _same(_interp(split, inputs), _interp(text, inputs))


@pytest.mark.mlir
@pytest.mark.parametrize("name", sorted(_NAMED))
def test_named_linalg_op_pieces_run_natively_as_the_interpreter_does(name: str) -> None:
    text, inputs = _named(name, None)
    assert len(_split(text, ranks=2)[1]) == _NAMED[name][2]
    got = dhir.run(text, *inputs, backend="native", ranks=2, placement=SPREAD)
    _same(got, _interp(text, inputs))


def test_linalg_pieces_follow_the_devices_rates_in_a_machine_description() -> None:
    fast = replace(guess_device("fast", "x86_64", cores=8), peak_gflops=100.0)
    slow = replace(guess_device("slow", "x86_64", cores=8), peak_gflops=50.0)
    system = System((Node("n0", (fast, slow)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)
    module = parse_string(LinalgTask("matmul", 9, True, False, 1).unforced())
    attach(module, system)
    run_pipeline(module, "dhir-split{ranks=2}")
    views = [op for op in module.walk() if isinstance(op, memref.SubviewOp)]
    rows = [(v.static_offsets.get_values()[0], v.static_sizes.get_values()[0]) for v in views]
    assert rows == [(0, 6), (0, 6), (6, 3), (6, 3)]  # A's and C's rows, piece by piece


def _integer_loop(high: str) -> str:
    """Rows [1, high) of %b from %a's, by an i64 loop (index_cast of it a subscript)."""
    return f"""
func.func @main(%a: memref<{ROWS}x{COLS}xi32>, %b: memref<{ROWS}x{COLS}xi32>, %n: index) {{
  dhir.schedule %a, %b, %n {{
    %t = dhir.task target = "cpu", %a, %b attributes {{dhir.split = 2}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cols = arith.constant {COLS} : index
      %lo = arith.constant 1 : i64
      %nn = arith.index_cast %n : index to i64
      %one = arith.constant 1 : i64
      %hi = {high}
      scf.for %i = %lo to %hi step %one : i64 {{
        %r = arith.index_cast %i : i64 to index
        scf.for %j = %c0 to %cols step %c1 {{
          %x = memref.load %a[%r, %j] : memref<{ROWS}x{COLS}xi32>
          memref.store %x, %b[%r, %j] : memref<{ROWS}x{COLS}xi32>
        }}
      }}
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize(
    ("high", "pieces"), [(f"arith.constant {ROWS} : i64", 2), ("arith.addi %nn, %one : i64", 2)]
)
def test_an_integer_loop_splits_into_pieces_of_its_own_type(high: str, pieces: int) -> None:
    """The pieces' bounds are of the loop's type (i64, not index): constants, or cuts
    between unknown bounds made on index casts and cast back."""
    text = _integer_loop(high)
    split, tasks = _split(text)
    assert len(tasks) == pieces, split
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-9, 9, (ROWS, COLS)).astype(np.int32) for _ in range(2)] + [ROWS - 1]
    _same(_interp(split, inputs), _interp(text, inputs))


TRIANGLE = """
func.func @main(%c: memref<100x100xf64>) {
  dhir.schedule %c {
    %t = dhir.task target = "cpu", %c {
      %z = arith.constant 0 : index
      %u = arith.constant 1 : index
      %n = arith.constant 100 : index
      %x = arith.constant 2.0 : f64
      scf.for %i = %z to %n step %u {
        %end = arith.addi %i, %u : index
        scf.for %j = %z to %end step %u {
          %v = memref.load %c[%i, %j] : memref<100x100xf64>
          %w = arith.mulf %v, %x : f64
          memref.store %w, %c[%i, %j] : memref<100x100xf64>
        }
      }
    }
  }
  return
}
"""


def _outer_ranges(text: str, ranks: int) -> list[tuple[int, int]]:
    module = parse_string(text)
    run_pipeline(module, f"dhir-split{{ranks={ranks}}}")
    ranges = []
    for task in (op for op in module.walk() if isinstance(op, TaskOp)):
        loop = next(op for op in task.body.block.ops if isinstance(op, scf.ForOp))
        ranges.append(tuple(Lifter().constant(v) for v in (loop.lb, loop.ub)))
    return ranges  # type: ignore[return-value]


def test_a_triangle_is_cut_into_pieces_of_equal_work() -> None:
    # Row i does i + 1 iterations: the first half of the work ends at row 71, not 50.
    assert _outer_ranges(TRIANGLE, 2) == [(0, 71), (71, 100)]
    upper = TRIANGLE.replace("scf.for %j = %z to %end", "scf.for %j = %i to %n")
    assert _outer_ranges(upper, 2) == [(0, 30), (30, 100)]
    pieces = _outer_ranges(TRIANGLE, 4)
    assert [b for _, b in pieces] == [50, 71, 87, 100]
    c = np.arange(10_000, dtype=np.float64).reshape(100, 100)
    module = parse_string(TRIANGLE)
    run_pipeline(module, "dhir-split{ranks=3}")
    _same(_interp(print_module(module), [c]), _interp(TRIANGLE, [c]))


def test_a_long_triangle_is_weighed_in_blocks() -> None:
    rows = 1 << 16
    text = TRIANGLE.replace("100x100", f"{rows}x8").replace("constant 100 :", f"constant {rows} :")
    ((_, cut), _) = _outer_ranges(text, 2)
    assert abs(cut - rows / 2**0.5) <= rows // 1024  # blocks of 64 rows


def test_a_rectangle_is_cut_by_iteration_count() -> None:
    text = TRIANGLE.replace("scf.for %j = %z to %end", "scf.for %j = %z to %n")
    assert _outer_ranges(text, 2) == [(0, 50), (50, 100)]


# --- tiled loops ------------------------------------------------------------------------

TILED_ROWS = 13


@dataclass(frozen=True)
class TiledLoop:
    """One task as loop tiling writes it: for ii in [lo, hi) step `tile`, for i in
    [ii, min(ii + tile, hi)), for j: b[dst][i, j] = b[src][i + shift, j] * 0.5 + 1; the
    tiles an `affine.for` with a `min` map, or an `scf.for` with `arith.minsi`."""

    form: str
    lo: int
    hi: int
    tile: int
    shift: int
    same: bool
    pieces: int

    @property
    def carried(self) -> bool:
        return self.same and self.shift != 0

    def text(self) -> str:
        mem = f"memref<{TILED_ROWS}x{COLS}xf64>"
        src = "%b1" if self.same else "%b0"
        if self.form == "affine":
            tiles = f"affine.for %ii = {self.lo} to {self.hi} step {self.tile} {{"
            rows = (
                f"affine.for %i = affine_map<(d0) -> (d0)>(%ii) to "
                f"min affine_map<(d0) -> (d0 + {self.tile}, {self.hi})>(%ii) {{"
            )
        else:
            tiles = "scf.for %ii = %clo to %chi step %ctile {"
            rows = (
                "%e = arith.addi %ii, %ctile : index\n"
                " %end = arith.minsi %e, %chi : index\n"
                " scf.for %i = %ii to %end step %c1 {"
            )
        return f"""
func.func @main(%b0: {mem}, %b1: {mem}) {{
  dhir.schedule %b0, %b1 {{
    %t = dhir.task target = "cpu", %b0, %b1 attributes {{dhir.split = {self.pieces}}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cols = arith.constant {COLS} : index
      %clo = arith.constant {self.lo} : index
      %chi = arith.constant {self.hi} : index
      %ctile = arith.constant {self.tile} : index
      %shift = arith.constant {self.shift} : index
      %h = arith.constant 0.5 : f64
      %o = arith.constant 1.0 : f64
      {tiles}
        {rows}
          scf.for %j = %c0 to %cols step %c1 {{
            %r = arith.addi %i, %shift : index
            %x = memref.load {src}[%r, %j] : {mem}
            %m = arith.mulf %x, %h : f64
            %y = arith.addf %m, %o : f64
            memref.store %y, %b1[%i, %j] : {mem}
          }}
        }}
      }}
    }}
  }}
  return
}}
"""

    def unforced(self) -> str:
        return self.text().replace(f" attributes {{dhir.split = {self.pieces}}}", "")

    def inputs(self) -> list[object]:
        rng = np.random.default_rng(self.lo * 31 + self.hi * 7 + self.tile)
        return [rng.standard_normal((TILED_ROWS, COLS)) for _ in range(2)]


@st.composite
def tiled_loops(draw: st.DrawFn) -> TiledLoop:
    shift = draw(st.sampled_from((-1, 0, 1)))
    lo = draw(st.integers(max(0, -shift), TILED_ROWS - 1))
    hi = draw(st.integers(lo, TILED_ROWS - max(0, shift)))
    return TiledLoop(
        form=draw(st.sampled_from(("affine", "scf"))),
        lo=lo,
        hi=hi,
        tile=draw(st.integers(1, 6)),
        shift=shift,
        same=draw(st.booleans()),
        pieces=draw(st.integers(1, 5)),
    )


def _written(text: str, pipeline: str) -> list[isl.Set]:
    """What each task of `text` writes of %b1, after `pipeline`."""
    module = parse_string(text)
    run_pipeline(module, pipeline)
    tasks = [op for op in module.walk() if isinstance(op, TaskOp)]
    return [task_regions(t).written(t.memrefs[1]) for t in tasks]


@profile(60)
@given(tiled_loops())
def test_tiled_loops_split_by_tiles_and_give_the_whole_tasks_results(case: TiledLoop) -> None:
    """Tiles whose rows do not overlap are independent iterations of the tile loop, though
    two values of its variable closer than a tile would overlap: they are never both taken."""
    text = case.text()
    split, tasks = _split(text)
    trips = len(range(case.lo, case.hi, case.tile))
    if not case.carried and case.pieces > 1 and trips > 1:
        assert len(tasks) == min(case.pieces, trips), split
        pieces, (whole,) = _written(text, "dhir-split"), _written(text, "")
        for k, region in enumerate(pieces):
            assert all((region & other).is_empty() for other in pieces[k + 1 :])
        assert functools.reduce(isl.Set.union, pieces) == whole
    else:
        assert len(tasks) == 1, split
    _same(_interp(split, case.inputs()), _interp(text, case.inputs()))


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("form", ["affine", "scf"])
def test_tiled_loop_pieces_run_natively_as_the_interpreter_does(form: str, ranks: int) -> None:
    case = TiledLoop(form, 1, TILED_ROWS, 4, 0, False, 1)
    text = case.unforced()
    assert len(_split(text, ranks=ranks)[1]) == ranks
    got = dhir.run(text, *case.inputs(), backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, case.inputs()))


# --- linalg ops on views made in the task ---------------------------------------------

VIEWED = (10, 6)  # the shape of the memrefs viewed


def _view(name: str, offsets: tuple[int, int], sizes: tuple[int, int], rows: int) -> str:
    """`memref.subview` of %name (VIEWED, f64) at `offsets`, of `sizes`, `rows` apart."""
    kind = f"memref<{sizes[0]}x{sizes[1]}xf64, strided<[{VIEWED[1] * rows}, 1], offset: "
    kind += f"{offsets[0] * VIEWED[1] + offsets[1]}>>"
    whole = f"memref<{VIEWED[0]}x{VIEWED[1]}xf64>"
    return (
        f"%s{name} = memref.subview %{name}[{offsets[0]}, {offsets[1]}] "
        f"[{sizes[0]}, {sizes[1]}] [{rows}, 1] : {whole} to {kind}"
    ), kind


@dataclass(frozen=True)
class ViewedOp:
    """One task making views of %x and %o (as dhir-codedrop makes again the views host
    code made) and running a linalg.generic on them: O = X * 2 + v, X the h x w block of
    %x at (xr, xc) of every `stride`-th row, O the block of %o at (orow, oc), h x w, or
    w x h written transposed when `column_out`; v (w values) the row of %v that each d0
    reads whole."""

    h: int
    w: int
    xr: int
    xc: int
    stride: int
    orow: int
    oc: int
    column_out: bool
    pieces: int

    def text(self) -> str:
        x, xkind = _view("x", (self.xr, self.xc), (self.h, self.w), self.stride)
        out = (self.w, self.h) if self.column_out else (self.h, self.w)
        o, okind = _view("o", (self.orow, self.oc), out, 1)
        omap = "(d1, d0)" if self.column_out else "(d0, d1)"
        whole = f"memref<{VIEWED[0]}x{VIEWED[1]}xf64>"
        return f"""
func.func @main(%x: {whole}, %o: {whole}, %v: memref<{self.w}xf64>) {{
  dhir.schedule %x, %o, %v {{
    %t = dhir.task target = "cpu", %x, %o, %v attributes {{dhir.split = {self.pieces}}} {{
      {x}
      {o}
      linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
          affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> {omap}>],
          iterator_types = ["parallel", "parallel"]}}
          ins(%sx, %v : {xkind}, memref<{self.w}xf64>) outs(%so : {okind}) {{
      ^bb0(%a: f64, %b: f64, %c: f64):
        %two = arith.constant 2.0 : f64
        %p = arith.mulf %a, %two : f64
        %s = arith.addf %p, %b : f64
        linalg.yield %s : f64
      }}
    }}
  }}
  return
}}
"""

    def unforced(self) -> str:
        return self.text().replace(f" attributes {{dhir.split = {self.pieces}}}", "")

    def inputs(self) -> list[object]:
        rng = np.random.default_rng(self.h * 13 + self.w)
        return [rng.standard_normal(VIEWED), rng.standard_normal(VIEWED), rng.random(self.w)]


@st.composite
def viewed_ops(draw: st.DrawFn) -> ViewedOp:
    stride = draw(st.integers(1, 3))
    h = draw(st.integers(1, (VIEWED[0] - 1) // stride + 1))
    w = draw(st.integers(1, VIEWED[1]))
    column_out = draw(st.booleans())
    orows, ocols = (w, h) if column_out else (h, w)
    if orows > VIEWED[0] or ocols > VIEWED[1]:
        column_out, orows, ocols = False, h, w
    return ViewedOp(
        h=h,
        w=w,
        xr=draw(st.integers(0, VIEWED[0] - 1 - (h - 1) * stride)),
        xc=draw(st.integers(0, VIEWED[1] - w)),
        stride=stride,
        orow=draw(st.integers(0, VIEWED[0] - orows)),
        oc=draw(st.integers(0, VIEWED[1] - ocols)),
        column_out=column_out,
        pieces=draw(st.integers(1, 5)),
    )


def _regions(text: str, pipeline: str, which: int) -> list[tuple[isl.Set, isl.Set]]:
    """What each task of `text` reads and writes of its memref number `which`."""
    module = parse_string(text)
    run_pipeline(module, pipeline)
    tasks = [op for op in module.walk() if isinstance(op, TaskOp)]
    regions = [(task_regions(t), t.memrefs[which]) for t in tasks]
    return [(r.read(m), r.written(m)) for r, m in regions]


@profile(40)
@given(viewed_ops())
def test_linalg_ops_on_views_made_in_the_task_split_by_rows(case: ViewedOp) -> None:
    """Each piece views its rows of the task's views: it reads and writes exactly its
    part of what the whole task does."""
    text = case.text()
    split, tasks = _split(text)
    assert len(tasks) == (min(case.pieces, case.h) if case.pieces > 1 else 1), split
    if len(tasks) > 1:
        for which in (0, 1):
            pieces = _regions(text, "dhir-split", which)
            (whole,) = _regions(text, "", which)
            for kind in (0, 1):  # reads, then writes
                parts = [p[kind] for p in pieces]
                for k, part in enumerate(parts):
                    assert all((part & other).is_empty() for other in parts[k + 1 :])
                assert functools.reduce(isl.Set.union, parts) == whole[kind]
    _same(_interp(split, case.inputs()), _interp(text, case.inputs()))


def test_a_linalg_op_on_a_view_of_a_run_time_offset_stays_whole() -> None:
    """The view's type has no offset to cut rows from."""
    kind = "memref<4x6xf64, strided<[6, 1], offset: ?>>"
    text = f"""
func.func @main(%x: memref<10x6xf64>, %o: memref<4x6xf64>, %k: index) {{
  dhir.schedule %x, %o, %k {{
    %t = dhir.task target = "cpu", %x, %o attributes {{dhir.split = 2}} {{
      %sx = memref.subview %x[%k, 0] [4, 6] [1, 1] : memref<10x6xf64> to {kind}
      linalg.copy ins(%sx : {kind}) outs(%o : memref<4x6xf64>)
    }}
  }}
  return
}}
"""
    split, tasks = _split(text)
    assert len(tasks) == 1, split


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("column_out", [False, True])
def test_linalg_pieces_on_views_run_natively_as_the_interpreter_does(
    column_out: bool, ranks: int
) -> None:
    case = ViewedOp(4, 3, 1, 2, 2, 3, 1, column_out, 1)
    text = case.unforced()
    assert len(_split(text, ranks=ranks)[1]) == ranks
    got = dhir.run(text, *case.inputs(), backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, case.inputs()))


def _loop_over_views(carried: bool) -> str:
    """Rows [1, 9) of %o viewed from row 1, written by an scf.for from rows of a view of
    %x at a run-time offset (%c2, a constant the task makes), or from the next row of
    the same view of %o when `carried`."""
    x = "memref<4x6xf64, strided<[6, 1], offset: ?>>"
    o = "memref<8x6xf64, strided<[6, 1], offset: 6>>"
    load = f"%e = memref.load %sx[%i, %j] : {x}"
    if carried:
        load = f"%n = arith.addi %i, %c1 : index\n %e = memref.load %so[%n, %j] : {o}"
    return f"""
func.func @main(%x: memref<10x6xf64>, %o: memref<10x6xf64>) {{
  dhir.schedule %x, %o {{
    %t = dhir.task target = "cpu", %x, %o attributes {{dhir.split = 2}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c6 = arith.constant 6 : index
      %sx = memref.subview %x[%c2, 0] [4, 6] [1, 1] : memref<10x6xf64> to {x}
      %so = memref.subview %o[1, 0] [8, 6] [1, 1] : memref<10x6xf64> to {o}
      scf.for %i = %c0 to %c4 step %c1 {{
        scf.for %j = %c0 to %c6 step %c1 {{
          {load}
          memref.store %e, %so[%i, %j] : {o}
        }}
      }}
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize("carried", [False, True])
def test_a_loop_over_views_the_task_makes_splits_where_its_rows_are_apart(
    carried: bool,
) -> None:
    """Its iterations are compared through the views made before it: row i of the view of
    %o read by iteration i - 1 keeps the loop whole; rows of %x read at an offset the
    view takes from a constant are cut, each piece reading and writing its rows."""
    text = _loop_over_views(carried)
    split, tasks = _split(text)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(VIEWED) for _ in range(2)]
    _same(_interp(split, inputs), _interp(text, inputs))
    if carried:
        assert len(tasks) == 1, split
        return
    assert len(tasks) == 2, split
    (read, _), _ = _regions(text, "dhir-split", 0)
    assert read == isl.Set(f"{{ [x0, x1] : 2 <= x0 <= 3 and 0 <= x1 < {VIEWED[1]} }}")
    written = [w for _, w in _regions(text, "dhir-split", 1)]
    assert written == [
        isl.Set(f"{{ [x0, x1] : {low} <= x0 <= {low + 1} and 0 <= x1 < {VIEWED[1]} }}")
        for low in (1, 3)
    ]


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [2, 3])
def test_loop_pieces_over_views_run_natively_as_the_interpreter_does(ranks: int) -> None:
    text = _loop_over_views(False).replace(" attributes {dhir.split = 2}", "")
    assert len(_split(text, ranks=ranks)[1]) == ranks
    rng = np.random.default_rng(ranks)
    inputs = [rng.standard_normal(VIEWED) for _ in range(2)]
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, inputs))


def test_a_tiled_nest_in_plain_code_becomes_one_task_cut_between_tiles() -> None:
    """dhir-codedrop took the tile loop for a time loop (a schedule per tile, each
    tile's task too small to cut); it now compares the values the loop takes, as
    dhir-split does, so the nest is one task, cut into one piece per rank."""
    case = TiledLoop("affine", 1, TILED_ROWS, 4, 0, False, 1)
    task = case.unforced()
    body = task[task.index("%c0 = ") : task.rindex("    }\n  }\n  return")]
    text = f"""
func.func @main(%b0: memref<{TILED_ROWS}x{COLS}xf64>, %b1: memref<{TILED_ROWS}x{COLS}xf64>) {{
  {body}
  return
}}
"""
    module = parse_string(text)
    run_pipeline(module, "dhir-codedrop,dhir-split{ranks=2}")
    split = print_module(module)
    assert split.count("dhir.schedule") == 1 and len(task_ids(module)) == 2, split
    _same(_interp(split, case.inputs()), _interp(text, case.inputs()))


# --- loops bounded by a memref's size, and why a task stays whole ------------------------


def _measured(shape: str, where: str) -> str:
    """The 8x4 copy of `_row_halves(1)` on memrefs of `shape` ("8x4" or "?x4") whose rows
    run to `memref.dim %a, 0`: measured in the task, or (`where` = "plain") in plain
    code, which dhir-codedrop makes a task of."""
    text = _row_halves(1).replace(
        "%hi = arith.constant 8 : index",
        "%z = arith.constant 0 : index\n      %hi = memref.dim %a, %z : memref<8x4xi32>",
    )
    if where == "plain":
        body = text[text.index("%lo = ") : text.rindex("    }\n  }\n  return")]
        text = (
            "func.func @main(%a: memref<8x4xi32>, %b: memref<8x4xi32>) {\n"
            f"  {body}\n  return\n}}\n"
        )
    return text.replace("8x4xi32", f"{shape}xi32")


def _rows_in(text: str, pipeline: str) -> list[isl.Set]:
    """What each task of `text` reads of %a, writes and surely writes of %b, after
    `pipeline`."""
    module = parse_string(text)
    run_pipeline(module, pipeline)
    out: list[isl.Set] = []
    for task in (op for op in module.walk() if isinstance(op, TaskOp)):
        found = task_regions(task)
        a, b = task.memrefs
        out.extend((found.read(a), found.written(b), found.must_written(b)))
    return out


@pytest.mark.parametrize("where", ["task", "plain"])
def test_a_loop_to_a_static_size_splits_into_exact_rows(where: str) -> None:
    """`memref.dim` of a static extent is that constant: the pieces' bounds are constants
    and their regions exactly their rows (before: in a task, "not one parallel loop";
    in plain code, pieces that may write every row, run one after the other)."""
    text = _measured("8x4", where)
    pipeline = "dhir-codedrop,dhir-split{ranks=2}"
    module = parse_string(text)
    run_pipeline(module, pipeline)
    assert len(task_ids(module)) == 2, print_module(module)
    rows = [
        isl.Set(f"{{ [x0, x1] : {lo} <= x0 < {hi} and 0 <= x1 < 4 }}")
        for lo, hi in ((0, 4), (4, 8))
    ]
    assert _rows_in(text, pipeline) == [rows[0]] * 3 + [rows[1]] * 3
    inputs = [np.arange(32, dtype=np.int32).reshape(8, 4), np.zeros((8, 4), np.int32)]
    _same(_interp(print_module(module), inputs), _interp(text, inputs))


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_loop_to_a_static_size_runs_natively_as_the_interpreter_does(ranks: int) -> None:
    text = _measured("8x4", "task")
    inputs = [np.arange(32, dtype=np.int32).reshape(8, 4), np.zeros((8, 4), np.int32)]
    assert len(_split(text, ranks=ranks)[1]) == ranks
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, inputs))


_FORCED = "dhir.task %cpu, %a, %b attributes {dhir.split = 2} {"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            ("%hi = arith.constant 8 : index", "%z = arith.constant 0 : index\n"
             "%hi = memref.dim %a, %z : memref<8x4xi32>"),
            "besides its loop it measures a dynamic size (memref.dim)",
        ),
        (
            ("%c4 = arith.constant 4 : index", "%c4 = arith.constant 4 : index\n"
             "%y = memref.load %a[%lo, %lo] : memref<8x4xi32>\n"
             "memref.store %y, %b[%lo, %lo] : memref<8x4xi32>"),
            "besides its loop it has ops with effects (memref.load, memref.store)",
        ),
        (
            ("scf.for %i = %lo to %hi step %c1 {", "scf.for %i = %lo to %hi step %c1 {}\n"
             "scf.for %i = %lo to %hi step %c1 {"),
            "its body has 2 loops or other ops with regions, not one",
        ),
        (
            ("scf.for %i = %lo to %hi step %c1 {\n", "%r = scf.for %i = %lo to %hi step %c1 "
             "iter_args(%s = %lo) -> (index) {\n"),
            "its scf.for carries values (iter_args: reductions need dhir.reassociate)",
        ),
    ],
)  # fmt: skip
def test_a_task_left_whole_is_told_why(
    change: tuple[str, str], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each reason is the one that holds (all were "its work is not one parallel loop")."""
    from dhir.cli.dhir_opt import main as dhir_opt

    text = _row_halves(1).replace("dhir.task %cpu, %a, %b {", _FORCED).replace(*change)
    if "iter_args" in change[1]:
        text = text.replace(
            "      }\n    }\n  }", "        scf.yield %s : index\n      }\n    }\n  }"
        )
    if "memref.dim" in change[1]:
        text = text.replace("8x4xi32", "?x4xi32")
    program = tmp_path / "whole.mlir"
    program.write_text(text)
    assert dhir_opt([str(program), "-p", "dhir-split{ranks=2}", "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert f"has no effect: {why}" in err and err.count("\n") == 1, err


def _guarded(otherwise: str = "") -> str:
    """b = a * 2 over the 8x4 rows, under `scf.if %k > 0` (with `otherwise`: an else
    branch)."""
    return f"""
func.func @main(%a: memref<8x4xi32>, %b: memref<8x4xi32>, %k: index) {{
  dhir.schedule %a, %b, %k {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %a, %b attributes {{dhir.split = 2}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %go = arith.cmpi sgt, %k, %c0 : index
      scf.if %go {{
        %two = arith.constant 2 : i32
        scf.for %i = %c0 to %c8 step %c1 {{
          scf.for %j = %c0 to %c4 step %c1 {{
            %x = memref.load %a[%i, %j] : memref<8x4xi32>
            %y = arith.muli %x, %two : i32
            memref.store %y, %b[%i, %j] : memref<8x4xi32>
          }}
        }}
      }}{otherwise}
    }}
  }}
  return
}}
"""


def _guarded_inputs(k: int) -> list[object]:
    return [np.arange(32, dtype=np.int32).reshape(8, 4), np.full((8, 4), 7, np.int32), k]


@pytest.mark.parametrize("k", [0, 1])
def test_a_loop_under_an_scf_if_splits_into_its_rows(k: int) -> None:
    """Each piece tests the condition again and runs its rows; its regions are exactly
    them (may-writes: the condition may be false). Before: "its work is not one
    parallel loop", the task whole."""
    text = _guarded()
    split, tasks = _split(text)
    assert tasks == ["t.piece0", "t.piece1"], split
    rows = [isl.Set(f"{{ [x0, x1] : {lo} <= x0 < {lo + 4} and 0 <= x1 < 4 }}") for lo in (0, 4)]
    empty = isl.Set("{ [x0, x1] : false }")
    assert _rows_in(text, "dhir-split") == [rows[0], rows[0], empty, rows[1], rows[1], empty]
    _same(_interp(split, _guarded_inputs(k)), _interp(text, _guarded_inputs(k)))


def test_a_loop_under_an_scf_if_with_an_else_branch_stays_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = " else {\n        memref.store %c0i, %b[%c0, %c0] : memref<8x4xi32>\n      }"
    text = _guarded(other).replace("%go = ", "%c0i = arith.constant 0 : i32\n      %go = ")
    assert _split(text)[1] == ["t"]
    assert "has no effect: its scf.if has results or an else branch" in capsys.readouterr().err


def _under_if(text: str) -> str:
    """`text` (a OneLoop's) with its loop under an `scf.if` that is true."""
    loop = text.index("      %shift = ")
    text = f"{text[:loop]}      %go = arith.cmpi ule, %c0, %c1 : index\n      scf.if %go {{\n{text[loop:]}"
    end = "\n      }\n    }\n  }\n  return"
    return text.replace(end, "\n      }\n      }" + end[8:])


@profile(30)
@given(one_loops())
def test_loops_under_an_scf_if_split_as_they_do_alone(case: OneLoop) -> None:
    """Bounds, steps, carried rows, loop kinds and counter types: under an scf.if, a
    loop becomes as many pieces as alone, with the same results bit for bit."""
    text = _under_if(case.text())
    split, tasks = _split(text)
    assert "scf.if" in split and len(tasks) == len(_split(case.text())[1]), split
    _same(_interp(split, case.inputs()), _interp(text, case.inputs()))


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_a_loop_under_an_scf_if_runs_natively_as_the_interpreter_does(ranks: int) -> None:
    text = _guarded().replace(" attributes {dhir.split = 2}", "")
    assert len(_split(text, ranks=ranks)[1]) == ranks
    for k in (0, 1):
        got = dhir.run(text, *_guarded_inputs(k), backend="native", ranks=ranks, placement=SPREAD)
        _same(got, _interp(text, _guarded_inputs(k)))


_TRAILING = """
func.func @main(%x: memref<8xf32>) {
  dhir.schedule %x {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %x attributes {dhir.split = 3} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %two = arith.constant 2.0 : f32
      scf.for %i = %c0 to %c8 step %c1 {
        %v = memref.load %x[%i] : memref<8xf32>
        %w = arith.mulf %v, %two : f32
        memref.store %w, %x[%i] : memref<8xf32>
      }
      %first = memref.load %x[%c0] : memref<8xf32>
      %c7 = arith.constant 7 : index
      memref.store %first, %x[%c7] : memref<8xf32>
    }
  }
  return
}
"""


def test_ops_after_the_loop_run_in_the_last_piece_only() -> None:
    """x *= 2, then x[7] = x[0] (examples/hazards.mlir's t2 has such a store): the last
    piece runs what follows the loop, after its rows, and its regions say so (before:
    whole, "its work is not one parallel loop")."""
    split, tasks = _split(_TRAILING)
    assert tasks == ["t.piece0", "t.piece1", "t.piece2"], split
    assert split.count("memref.store %first") == 1
    regions = []
    for task in (op for op in parse_string(split).walk() if isinstance(op, TaskOp)):
        found = task_regions(task)
        regions.append((found.read(task.memrefs[0]), found.must_written(task.memrefs[0])))
    last = isl.Set("{ [x0] : 5 <= x0 <= 7 or x0 = 0 }")
    assert regions[2] == (last, isl.Set("{ [x0] : 5 <= x0 <= 7 }"))
    inputs: list[object] = [np.arange(1, 9, dtype=np.float32)]
    _same(_interp(split, inputs), _interp(_TRAILING, inputs))


def test_a_call_after_the_loop_keeps_the_task_whole(capsys: pytest.CaptureFixture[str]) -> None:
    text = _TRAILING.replace(
        "memref.store %first, %x[%c7] : memref<8xf32>", "func.call @g() : () -> ()"
    ).replace("  return\n}\n", "  return\n}\nfunc.func private @g()\n")
    assert _split(text)[1] == ["t"]
    assert "has no effect: after its loop it calls a function" in capsys.readouterr().err


@pytest.mark.mlir
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_ops_after_the_loop_run_natively_as_the_interpreter_does(ranks: int) -> None:
    text = _TRAILING.replace(" attributes {dhir.split = 3}", "")
    assert len(_split(text, ranks=ranks)[1]) == ranks
    inputs: list[object] = [np.arange(1, 9, dtype=np.float32)]
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, placement=SPREAD)
    _same(got, _interp(text, inputs))
