"""CodeDrop (dhir-codedrop): plain MLIR through CodeDrop on 1-4 ranks equals the
interpreter on the original program bit for bit; `dhir run`/`dhir compile` apply it to an
entry without schedules, say so, and obey --no-codedrop and --target."""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dhir
from dhir.ir.text import parse_string
from dhir.transforms.codedrop import auto_codedrop, codedrop

EXAMPLES = Path(__file__).parents[2] / "examples"
N = 8  # every buffer is memref<8xi32>; loops run over 1..N-2 so that i-1 and i+1 fit
TIMEOUT = 90
needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


@dataclass(frozen=True)
class Nest:
    """for i in 1..N-2: w[i] = mix(seed, reads), a read being buf[i + offset]."""

    # for | for32 (an scf.for on i32) | parallel | affine | nested (a 2-deep nest:
    # for i { for j in 0..1 }) | while (an scf.while counting as the for does) | while2
    # (the same, its step a constant made in its body)
    kind: str
    write: int
    reads: tuple[tuple[int, int], ...]
    seed: int


@dataclass(frozen=True)
class Host:
    """w[k] = r[k2], outside any loop."""

    write: int
    read: int
    k: int


@dataclass(frozen=True)
class TimeLoop:
    steps: int
    body: tuple["Nest | Host", ...]
    counted_while: bool = False  # written as an scf.while counting as the for does


Item = Nest | Host | TimeLoop


def _nests(buffers: int) -> st.SearchStrategy[Nest]:
    def build(kind: str, write: int, seed: int) -> st.SearchStrategy[Nest]:
        # A parallel loop reads no buffer it writes (that would be a race).
        choices = [b for b in range(buffers) if kind != "parallel" or b != write]
        read = st.tuples(st.sampled_from(choices), st.integers(-1, 1))
        return st.lists(read, min_size=1, max_size=3).map(
            lambda reads: Nest(kind, write, tuple(reads), seed)
        )

    return st.tuples(
        st.sampled_from(("for", "for32", "parallel", "affine", "nested", "while", "while2")),
        st.integers(0, buffers - 1),
        st.integers(1, 9),
    ).flatmap(lambda t: build(*t))


def _items(buffers: int) -> st.SearchStrategy[Item]:
    host = st.builds(
        Host, st.integers(0, buffers - 1), st.integers(0, buffers - 1), st.integers(0, N - 1)
    )
    plain = st.one_of(_nests(buffers), _nests(buffers), host)
    loop = st.builds(
        TimeLoop,
        st.integers(1, 3),
        st.lists(plain, min_size=1, max_size=3).map(tuple),
        st.booleans(),
    )
    return st.one_of(plain, plain, loop)


programs = st.integers(2, 3).flatmap(
    lambda b: st.tuples(st.just(b), st.lists(_items(b), min_size=1, max_size=5))
)


def _text(buffers: int, items: list[Item]) -> str:
    lines: list[str] = []
    counter = iter(range(10_000))

    def emit(item: Nest | Host | TimeLoop, indent: str) -> None:
        if isinstance(item, TimeLoop):
            t = f"%t{next(counter)}"
            if item.counted_while:
                _while_head(t, "%c0", f"%s{item.steps}", indent, lines)
            else:
                lines.append(f"{indent}scf.for {t} = %c0 to %s{item.steps} step %c1 {{")
            for inner in item.body:
                emit(inner, indent + "  ")
            if item.counted_while:
                _while_end(t, "%c1", indent, lines)
            lines.append(f"{indent}}}")
        elif isinstance(item, Host):
            v = f"%h{next(counter)}"
            lines.append(f"{indent}{v} = memref.load %b{item.read}[%k{item.k}] : {TYPE}")
            lines.append(f"{indent}memref.store {v}, %b{item.write}[%k{item.k}] : {TYPE}")
        else:
            _nest(item, indent, lines, next(counter))

    for item in items:
        emit(item, "  ")
    args = ", ".join(f"%b{b}: {TYPE}" for b in range(buffers))
    consts = [f"  %k{k} = arith.constant {k} : index" for k in range(N)]
    consts += [f"  %s{s} = arith.constant {s} : index" for s in (1, 2, 3)]
    consts += ["  %c0 = arith.constant 0 : index", "  %c1 = arith.constant 1 : index"]
    consts += [f"  %hi = arith.constant {N - 1} : index", "  %three = arith.constant 3 : i32"]
    consts += ["  %k1i = arith.constant 1 : i32", f"  %hii = arith.constant {N - 1} : i32"]
    body = "\n".join([*consts, *lines])
    return f"func.func @main({args}) {{\n{body}\n  return\n}}\n"


TYPE = f"memref<{N}xi32>"


def _nest(nest: Nest, indent: str, lines: list[str], n: int) -> None:
    i = f"%i{n}"
    inner = indent + "  "
    if nest.kind == "parallel":
        lines.append(f"{indent}scf.parallel ({i}) = (%k1) to (%hi) step (%c1) {{")
    elif nest.kind == "affine":
        lines.append(f"{indent}affine.for {i} = 1 to {N - 1} {{")
    elif nest.kind.startswith("while"):
        _while_head(i, "%k1", "%hi", indent, lines)
    elif nest.kind == "for32":
        lines.append(f"{indent}scf.for {i}w = %k1i to %hii step %k1i : i32 {{")
        lines.append(f"{indent}  {i} = arith.index_cast {i}w : i32 to index")
    else:
        lines.append(f"{indent}scf.for {i} = %k1 to %hi step %c1 {{")
    if nest.kind == "nested":  # the inner loop runs once more per row: i stays a subscript
        lines.append(f"{inner}scf.for %j{n} = %c0 to %c1 step %c1 {{")
        inner += "  "
    acc = f"%a{n}_s"
    lines.append(f"{inner}{acc} = arith.constant {nest.seed} : i32")
    for r, (buf, offset) in enumerate(nest.reads):
        at = f"%x{n}_{r}"
        lines.append(f"{inner}{at} = arith.addi {i}, %k{offset + 1} : index")
        lines.append(f"{inner}{at}m = arith.subi {at}, %c1 : index")
        lines.append(f"{inner}%v{n}_{r} = memref.load %b{buf}[{at}m] : {TYPE}")
        lines.append(f"{inner}%m{n}_{r} = arith.muli {acc}, %three : i32")
        acc = f"%a{n}_{r}"
        lines.append(f"{inner}{acc} = arith.addi %m{n}_{r}, %v{n}_{r} : i32")
    lines.append(f"{inner}memref.store {acc}, %b{nest.write}[{i}] : {TYPE}")
    if nest.kind == "nested":
        lines.append(f"{indent}  }}")
    if nest.kind == "parallel":
        lines.append(f"{indent}  scf.reduce")
    if nest.kind == "while2":
        lines.append(f"{indent}  {i}_one = arith.constant 1 : index")
    if nest.kind.startswith("while"):
        _while_end(i, f"{i}_one" if nest.kind == "while2" else "%c1", indent, lines)
    lines.append(f"{indent}}}")


def _while_head(counter: str, start: str, end: str, indent: str, lines: list[str]) -> None:
    """The head of `while (counter < end)`, counting from `start`; its after region's
    argument is `counter`."""
    lines += [
        f"{indent}{counter}_w = scf.while ({counter}_b = {start}) : (index) -> index {{",
        f"{indent}  {counter}_c = arith.cmpi slt, {counter}_b, {end} : index",
        f"{indent}  scf.condition({counter}_c) {counter}_b : index",
        f"{indent}}} do {{",
        f"{indent}^bb0({counter}: index):",
    ]


def _while_end(counter: str, step: str, indent: str, lines: list[str]) -> None:
    lines.append(f"{indent}  {counter}_n = arith.addi {counter}, {step} : index")
    lines.append(f"{indent}  scf.yield {counter}_n : index")


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), f"argument {k}:\n{g}\n{w}"


@needs_llvm
@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(programs, st.integers(1, 4), st.sampled_from(("round-robin", "best")), st.integers(0, 99))
def test_random_plain_programs_through_codedrop_equal_the_interpreter(
    program: tuple[int, list[Item]], ranks: int, placement: str, seed: int
) -> None:
    buffers, items = program
    text = _text(buffers, items)
    note(f"on {ranks} ranks, placement {placement}:\n{text}")
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-50, 50, N).astype(np.int32) for _ in range(buffers)]
    oracle = dhir.run(text, *inputs, backend="interp")
    got = dhir.run(text, *inputs, ranks=ranks, placement=placement, timeout=TIMEOUT)
    _same(got, oracle)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(programs)
def test_codedrop_wraps_every_nest_outside_time_loops(program: tuple[int, list[Item]]) -> None:
    """Every top-level nest becomes a task, every time loop keeps its nests in schedules
    (a loop around host statements only is a nest), and the interpreter gives the same result before and after."""
    buffers, items = program
    text = _text(buffers, items)
    module = parse_string(text)
    done = codedrop(module, "main")
    loops = [i for i in items if isinstance(i, TimeLoop)]
    nests = sum(isinstance(i, Nest) for i in items)
    # A loop around plain statements only is itself a (one-deep) nest.
    nests += sum(max(1, sum(isinstance(n, Nest) for n in loop.body)) for loop in loops)
    assert done.nests == nests, text
    inputs = [np.arange(N, dtype=np.int32) * (b + 1) for b in range(buffers)]
    _same(dhir.run(module, *inputs, backend="interp"), dhir.run(text, *inputs, backend="interp"))


# --- what stays host code -------------------------------------------------------------


def test_aliasing_views_written_stay_host_code() -> None:
    """Two views of one buffer, selected by arith.select, one of them written: a schedule
    would be refused, so the nest stays host code."""
    text = f"""
func.func @main(%a: {TYPE}, %b: {TYPE}, %p: i1) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant {N} : index
  %s = arith.select %p, %a, %b : {TYPE}
  scf.for %i = %c0 to %c8 step %c1 {{
    %v = memref.load %a[%i] : {TYPE}
    memref.store %v, %s[%i] : {TYPE}
  }}
  return
}}
"""
    module = parse_string(text)
    assert codedrop(module, "main").nests == 0


METADATA_ROW = """
func.func @main(%a: memref<4x6xf32>, %q: memref<3xf32>) {
  %sv = memref.subview %a[1, 2] [2, 3] [1, 1]
      : memref<4x6xf32> to memref<2x3xf32, strided<[6, 1], offset: 8>>
  %b, %off, %sz:2, %st:2 = memref.extract_strided_metadata %sv
      : memref<2x3xf32, strided<[6, 1], offset: 8>>
      -> memref<f32>, index, index, index, index, index
  %row = memref.reinterpret_cast %b to offset: [%off], sizes: [%sz#1], strides: [%st#1]
      : memref<f32> to memref<?xf32, strided<[?], offset: ?>>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %ten = arith.constant 10.0 : f32
  scf.for %i = %c0 to %c3 step %c1 {
    %x = memref.load %row[%i] : memref<?xf32, strided<[?], offset: ?>>
    %y = arith.addf %x, %ten : f32
    memref.store %y, %row[%i] : memref<?xf32, strided<[?], offset: ?>>
    memref.store %x, %q[%i] : memref<3xf32>
  }
  return
}
"""


def test_a_cast_past_a_listed_base_buffer_stays_host_code() -> None:
    """The task would list the metadata's base buffer (one element) and write a row of
    %a through a reinterpret_cast of it: dhir-lower-to-mpi refuses that (it would move
    only that element), so the nest stays host code."""
    assert codedrop(parse_string(METADATA_ROW), "main").nests == 0


@needs_llvm
def test_a_cast_past_a_listed_base_buffer_runs_as_host_code() -> None:
    inputs = [np.arange(24, dtype=np.float32).reshape(4, 6), np.zeros(3, np.float32)]
    want = dhir.run(METADATA_ROW, *inputs, backend="interp")
    assert want[0][1, 2:5].tolist() == [18.0, 19.0, 20.0]
    for got, oracle in zip(dhir.run(METADATA_ROW, *inputs, ranks=2, timeout=120), want):
        assert got.tobytes() == oracle.tobytes()


# --- dhir run / dhir compile ----------------------------------------------------------


def _dhir(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`dhir ARGS...`; with `cache`, in that cache rather than the user's."""
    env = None if cache is None else dict(os.environ, DHIR_CACHE_DIR=str(cache))
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture
def gemm_inputs(tmp_path: Path) -> list[str]:
    rng = np.random.default_rng(0)
    args: list[str] = []
    for name in "ABC":
        np.save(tmp_path / f"{name}.npy", rng.integers(-5, 5, (64, 64)).astype(np.float64))
        args += ["--input", str(tmp_path / f"{name}.npy")]
    return args


def _gemm_result(tmp_path: Path) -> np.ndarray:
    a, b, c = (np.load(tmp_path / f"{name}.npy") for name in "ABC")
    return c + a @ b


@needs_llvm
def test_dhir_run_applies_codedrop_and_says_so(tmp_path: Path, gemm_inputs: list[str]) -> None:
    out = tmp_path / "out"
    gemm = str(EXAMPLES / "plain_gemm.mlir")
    # A cache of its own: a run the user's cache recorded would take the cached path, which
    # prints only the run's own words (compiling's are the first run's).
    result = _dhir(
        "run", gemm, "-n", "2", *gemm_inputs, "--output-dir", str(out), cache=tmp_path / "cache"
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "CodeDrop" in line]
    assert lines == [
        "dhir: no dhir.schedule in @main; CodeDrop made 1 task in 1 schedule "
        "(--no-codedrop to run it as written)"
    ]
    np.testing.assert_array_equal(np.load(out / "arg2.npy"), _gemm_result(tmp_path))


@needs_llvm
def test_no_codedrop_runs_it_as_written(tmp_path: Path, gemm_inputs: list[str]) -> None:
    out = tmp_path / "out"
    gemm = str(EXAMPLES / "plain_gemm.mlir")
    result = _dhir("run", gemm, "-n", "2", *gemm_inputs, "--output-dir", str(out), "--no-codedrop")
    assert result.returncode == 0, result.stderr
    assert "CodeDrop" not in result.stderr
    np.testing.assert_array_equal(np.load(out / "arg2.npy"), _gemm_result(tmp_path))


@needs_llvm
def test_compile_applies_codedrop_with_the_target(tmp_path: Path) -> None:
    gemm = str(EXAMPLES / "plain_gemm.mlir")
    exe = tmp_path / "gemm"
    bad = _dhir("compile", gemm, "-o", str(exe), "--target", "x86_65")
    assert bad.returncode == 2 and "unknown target 'x86_65'" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    # A GPU target without the GPU fallback needs a GPU build; with it, the task runs on
    # the CPU: the target reached the task either way.
    result = _dhir("compile", gemm, "-o", str(exe), "--target", "gpu", "--gpu-fallback", "cpu")
    assert result.returncode == 0, result.stderr
    assert "CodeDrop made 1 task in 1 schedule" in result.stderr


def test_target_reaches_the_tasks() -> None:
    module = parse_string((EXAMPLES / "plain_gemm.mlir").read_text())
    codedrop(module, "main", "sm_90")
    assert 'dhir.target {arch = "sm_90"}' in dhir.print_module(module)


@pytest.mark.parametrize(
    ("program", "extra", "words"),
    [
        ("proposal.mlir", [], "holds a dhir.schedule, whose tasks keep the dhir.target"),
        ("shard_stencil.mlir", [], "is a shard program, which runs on the ranks' CPUs"),
        ("plain_gemm.mlir", ["--no-codedrop"], "--no-codedrop (codedrop=False) makes none"),
    ],
)
def test_a_target_no_task_can_take_is_refused(program: str, extra: list[str], words: str) -> None:
    """--target binds only the tasks CodeDrop makes: where it makes none, the target the
    user asked for would be dropped without a word (a shard program ran on the CPUs)."""
    result = _dhir("schedule", str(EXAMPLES / program), "-n", "4", "--target", "sm_90", *extra)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr
    module = parse_string((EXAMPLES / program).read_text())
    with pytest.raises(dhir.DhirError, match="is for the tasks CodeDrop makes"):
        inputs = [np.ones((64, 32))] if program.startswith("shard") else []
        dhir.run(module, *inputs, ranks=4, target="cpu", codedrop="--no-codedrop" not in extra)


def test_help_lists_the_flags() -> None:
    result = _dhir("run", "--help")
    assert "--no-codedrop" in result.stdout and "--target" in result.stdout


def test_a_nest_calling_a_function_with_a_schedule_stays_host_code() -> None:
    """A task cannot run a schedule: the loop calling @helper stays host code."""
    text = f"""
func.func @helper(%a: {TYPE}) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %a {{}}
  }}
  return
}}
func.func @main(%a: {TYPE}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant {N} : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {{
    func.call @helper(%a) : ({TYPE}) -> ()
    scf.reduce
  }}
  func.call @helper(%a) : ({TYPE}) -> ()
  return
}}
"""
    module = parse_string(text)
    assert codedrop(module, "main").nests == 0


@needs_llvm
def test_a_plain_linalg_matmul_uses_both_ranks(tmp_path: Path, gemm_inputs: list[str]) -> None:
    """CodeDrop makes the matmul a task and dhir-split cuts it into row blocks: one piece
    on each of the two ranks, and the result is the gemm's."""
    matmul = str(EXAMPLES / "plain_matmul.mlir")
    shown = _dhir("schedule", matmul, "-n", "2")
    assert shown.returncode == 0, shown.stderr
    placed = {line.split()[0]: line.split()[1] for line in shown.stdout.splitlines()[3:5]}
    assert placed == {
        "main.schedule0.task0.piece0": "rank0",
        "main.schedule0.task0.piece1": "rank1",
    }, shown.stdout
    out = tmp_path / "out"
    result = _dhir("run", matmul, "-n", "2", *gemm_inputs, "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out / "arg2.npy"), _gemm_result(tmp_path))


# --- loops written as counted scf.while -----------------------------------------------

JACOBI = """
func.func @main(%A: memref<12x12xf64>, %B: memref<12x12xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c11 = arith.constant 11 : index
  %fifth = arith.constant 0.2 : f64
  scf.for %t = %c0 to %c3 step %c1 {
    scf.for %i = %c1 to %c11 step %c1 {
      scf.for %j = %c1 to %c11 step %c1 {
        %im = arith.subi %i, %c1 : index
        %ip = arith.addi %i, %c1 : index
        %jm = arith.subi %j, %c1 : index
        %jp = arith.addi %j, %c1 : index
        %a0 = memref.load %A[%i, %j] : memref<12x12xf64>
        %a1 = memref.load %A[%i, %jm] : memref<12x12xf64>
        %a2 = memref.load %A[%i, %jp] : memref<12x12xf64>
        %a3 = memref.load %A[%ip, %j] : memref<12x12xf64>
        %a4 = memref.load %A[%im, %j] : memref<12x12xf64>
        %s1 = arith.addf %a0, %a1 : f64
        %s2 = arith.addf %s1, %a2 : f64
        %s3 = arith.addf %s2, %a3 : f64
        %s4 = arith.addf %s3, %a4 : f64
        %v = arith.mulf %fifth, %s4 : f64
        memref.store %v, %B[%i, %j] : memref<12x12xf64>
      }
    }
    scf.for %i2 = %c1 to %c11 step %c1 {
      scf.for %j2 = %c1 to %c11 step %c1 {
        %b = memref.load %B[%i2, %j2] : memref<12x12xf64>
        memref.store %b, %A[%i2, %j2] : memref<12x12xf64>
      }
    }
  }
  return
}
"""

_FOR_HEAD = re.compile(r"^(\s*)scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+) \{$")


def _as_whiles(text: str) -> str:
    """Each `scf.for` of `text` as the `scf.while` a user writes for it, counting the same."""
    lines = text.split("\n")
    for at in reversed(range(len(lines))):
        head = _FOR_HEAD.match(lines[at])
        if not head:
            continue
        pad, iv, start, end, step = head.groups()
        close = lines.index(pad + "}", at)
        made: list[str] = []
        _while_head(iv, start, end, pad, made)
        made += lines[at + 1 : close]
        _while_end(iv, step, pad, made)
        lines[at : close + 1] = [*made, pad + "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("name", ["gemm", "jacobi"])
def test_counted_while_nests_become_the_tasks_of_their_for_nests(name: str) -> None:
    written = (EXAMPLES / "plain_gemm.mlir").read_text() if name == "gemm" else JACOBI
    whiles = _as_whiles(written)
    assert "scf.for" not in whiles and "scf.while" in whiles
    want, got = parse_string(written), parse_string(whiles)
    assert codedrop(got, "main") == codedrop(want, "main")
    assert dhir.print_module(got) == dhir.print_module(want)


@needs_llvm
@pytest.mark.parametrize("name", ["gemm", "jacobi"])
def test_counted_while_nests_run_as_tasks(tmp_path: Path, name: str) -> None:
    """`dhir schedule` shows the tasks, and on 1 and 2 ranks the result is the
    interpreter's on the program as written."""
    written = (EXAMPLES / "plain_gemm.mlir").read_text() if name == "gemm" else JACOBI
    program = tmp_path / "whiles.mlir"
    program.write_text(_as_whiles(written))
    shown = _dhir("schedule", str(program), "-n", "2")
    assert shown.returncode == 0, shown.stderr
    made = "2 tasks in 1 schedule" if name == "jacobi" else "1 task in 1 schedule"
    assert f"CodeDrop made {made}" in shown.stderr, shown.stderr
    assert "main.schedule0.task0" in shown.stdout, shown.stdout
    rng = np.random.default_rng(3)
    shape = (64, 64) if name == "gemm" else (12, 12)
    inputs = [rng.standard_normal(shape) for _ in range(3 if name == "gemm" else 2)]
    oracle = dhir.run(program, *inputs, backend="interp", codedrop=False)
    for ranks in (1, 2):
        _same(dhir.run(program, *inputs, ranks=ranks, timeout=TIMEOUT), oracle)


CALLS_A_SCHEDULE = """
func.func private @f(%a: memref<4xf64>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %x = arith.constant 2.0 : f64
      memref.store %x, %a[%c0] : memref<4xf64>
    }
  }
  return
}
func.func @main(%a: memref<4xf64>) {
  func.call @f(%a) : (memref<4xf64>) -> ()
  return
}
"""


def test_an_entry_calling_a_schedule_is_not_called_host_code() -> None:
    """`dhir run` said "it runs as host code" of an entry whose only work is a call of a
    function holding a schedule, which runs as written."""
    assert auto_codedrop(parse_string(CALLS_A_SCHEDULE), "main") is None
    plain = CALLS_A_SCHEDULE.replace("func.call @f(%a) : (memref<4xf64>) -> ()\n", "")
    said = auto_codedrop(parse_string(plain), "main")
    assert said is not None and "runs as host code" in said


def test_every_function_leaves_the_functions_tasks_call_alone() -> None:
    """With no `entry`, CodeDrop rewrites every function without dhir ops, but not one a
    task calls (examples/call.mlir's @scale): a schedule made there would run inside
    the task, which the verifier refuses."""
    module = dhir.parse_file(EXAMPLES / "call.mlir")
    done = codedrop(module)
    module.verify()
    dhir.run_pipeline(module, "dhir-codedrop")  # verified after the pass
    assert done.nests == 0 and "dhir.schedule" not in dhir.print_module(module).split("@main")[0]
