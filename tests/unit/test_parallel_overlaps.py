"""Parallel loops two of whose iterations surely touch one element, one writing it
(dhir/analysis/overlaps.py, dhir/backends/parallel_loops.py): refused at the loop by both
backends before either starts. Natively such iterations ran at once on OpenMP threads,
and a loop adding into a[0] from 64 iterations gave 55000000, 64000000 and 48000000 in
three runs on 4 threads, where the interpreter gives 64000000. Loops whose overlap is
not proven run as before."""

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from refused_compile import compile_refusal

import dhir
from dhir.analysis.overlaps import parallel_independence, parallel_overlap
from dhir.dialects import affine, scf
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string

TASK = """func.func @main(%a: memref<16xi64>, %b: memref<16xi64>) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %a, %b {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %one = arith.constant 1 : i64
      {body}
    }}
  }}
  return
}}
"""

LOOP = "scf.parallel (%i) = (%c0) to (%c8) step ({step}) {{\n{body}\n      }}"

# Each: the loop's body, and its step.
REFUSED = {
    # Every iteration adds into a[0].
    "same element": (
        """%v = memref.load %a[%c0] : memref<16xi64>
        %w = arith.addi %v, %one : i64
        memref.store %w, %a[%c0] : memref<16xi64>""",
        "%c1",
    ),
    # Iteration i writes a[i] and a[i + 1]: neighbours write one element.
    "neighbour writes": (
        """%j = arith.addi %i, %c1 : index
        memref.store %one, %a[%i] : memref<16xi64>
        memref.store %one, %a[%j] : memref<16xi64>""",
        "%c1",
    ),
    # Iteration i reads a[i + 1], which iteration i + 1 writes.
    "read of a neighbour's write": (
        """%j = arith.addi %i, %c1 : index
        %v = memref.load %a[%j] : memref<16xi64>
        memref.store %v, %a[%i] : memref<16xi64>""",
        "%c1",
    ),
    # Iteration i stores a[i .. i + 3]: its neighbours store some of them too.
    "vector lanes": (
        """%v = vector.broadcast %one : i64 to vector<4xi64>
        vector.store %v, %a[%i] : memref<16xi64>, vector<4xi64>""",
        "%c1",
    ),
    # In an inner loop of every iteration.
    "inner loop": (
        """scf.for %k = %c0 to %c2 step %c1 {
          memref.store %one, %b[%k] : memref<16xi64>
        }""",
        "%c1",
    ),
}

ACCEPTED = {
    "own element": (
        """%v = memref.load %a[%i] : memref<16xi64>
        %w = arith.addi %v, %one : i64
        memref.store %w, %a[%i] : memref<16xi64>""",
        "%c1",
    ),
    # Step 2: iteration i writes a[i] and a[i + 1], no other iteration does.
    "strided pairs": (
        """%j = arith.addi %i, %c1 : index
        memref.store %one, %a[%i] : memref<16xi64>
        memref.store %one, %a[%j] : memref<16xi64>""",
        "%c2",
    ),
    # Step 2, two lanes: a[i], a[i + 1] again.
    "vector lanes apart": (
        """%v = vector.broadcast %one : i64 to vector<2xi64>
        vector.store %v, %a[%i] : memref<16xi64>, vector<2xi64>""",
        "%c2",
    ),
    # Only reads overlap.
    "shared reads": (
        """%v = memref.load %b[%c0] : memref<16xi64>
        memref.store %v, %a[%i] : memref<16xi64>""",
        "%c1",
    ),
    # Atomic updates are a way to combine iterations.
    "atomic": (
        "%r = memref.atomic_rmw addi %one, %a[%c0] : (i64, memref<16xi64>) -> i64",
        "%c1",
    ),
    # A write under a condition may never run twice: not proven.
    "conditional": (
        """%z = arith.cmpi eq, %i, %c0 : index
        scf.if %z {
          memref.store %one, %a[%c0] : memref<16xi64>
        }""",
        "%c1",
    ),
    # A subscript dhir cannot follow (a loaded value): not proven.
    "loaded subscript": (
        """%v = memref.load %b[%i] : memref<16xi64>
        %k = arith.index_cast %v : i64 to index
        memref.store %one, %a[%k] : memref<16xi64>""",
        "%c1",
    ),
    # A buffer each iteration allocates is its own.
    "private buffer": (
        """%m = memref.alloca() : memref<1xi64>
        memref.store %one, %m[%c0] : memref<1xi64>""",
        "%c1",
    ),
}


def _program(body: str, step: str) -> str:
    return TASK.format(body=LOOP.format(step=step, body=f"        {body}"))


def _loop(text: str) -> scf.ParallelOp | affine.ParallelOp:
    loops = [
        op for op in parse_string(text).walk() if isinstance(op, scf.ParallelOp | affine.ParallelOp)
    ]
    assert len(loops) == 1
    return loops[0]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_proven_overlaps_are_found(case: str) -> None:
    assert parallel_overlap(_loop(_program(*REFUSED[case]))) is not None


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_loops_without_a_proven_overlap_pass(case: str) -> None:
    assert parallel_overlap(_loop(_program(*ACCEPTED[case]))) is None


def test_the_overlap_names_the_first_iterations_and_element() -> None:
    found = parallel_overlap(_loop(_program(*REFUSED["read of a neighbour's write"])))
    assert found is not None
    assert (found.first, found.second, found.element, found.read) == ((1,), (0,), (1,), True)


def test_two_dimensional_loops_overlap_on_a_shared_index() -> None:
    """Iterations (i, j) and (i, j') both write a[i]."""
    body = """scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c2) step (%c1, %c1) {
        %x = arith.index_cast %j : index to i64
        memref.store %x, %a[%i] : memref<16xi64>
      }"""
    found = parallel_overlap(_loop(TASK.format(body=body)))
    assert found is not None
    assert (found.first, found.second, found.element) == ((0, 0), (0, 1), (0,))


def test_affine_parallel_overlaps_are_found() -> None:
    body = """affine.parallel (%i) = (0) to (8) {
        affine.store %one, %a[0] : memref<16xi64>
      }"""
    assert parallel_overlap(_loop(TASK.format(body=body))) is not None
    own = """affine.parallel (%i) = (0) to (8) {
        affine.store %one, %a[%i] : memref<16xi64>
      }"""
    assert parallel_overlap(_loop(TASK.format(body=own))) is None


def test_a_loop_variable_around_the_loop_counts_as_the_same_in_both_iterations() -> None:
    """A matrix-vector product parallel along its sum: every j adds into y[i]."""
    body = """scf.for %i = %c0 to %c8 step %c1 {
        scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
          %y = memref.load %a[%i] : memref<16xi64>
          %x = memref.load %b[%j] : memref<16xi64>
          %s = arith.addi %y, %x : i64
          memref.store %s, %a[%i] : memref<16xi64>
        }
      }"""
    found = parallel_overlap(_loop(TASK.format(body=body)))
    assert found is not None
    assert (found.first, found.second, found.element) == ((0,), (1,), (0,))


def test_an_overlap_at_some_values_of_the_loops_around_only_is_not_proven() -> None:
    """For i < 8, a[i - 8] is outside the memref: those iterations overlap nowhere."""
    body = """%c16 = arith.constant 16 : index
      scf.for %i = %c0 to %c16 step %c1 {
        scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
          %k = arith.subi %i, %c8 : index
          memref.store %one, %a[%k] : memref<16xi64>
        }
      }"""
    assert parallel_overlap(_loop(TASK.format(body=body))) is None


def test_a_loop_of_step_zero_is_left_to_run_time() -> None:
    """The verifier refuses a constant step of 0 first; the check leaves it alone too."""
    body = """scf.parallel (%i) = (%c0) to (%c8) step (%c0) {
        memref.store %one, %a[%c0] : memref<16xi64>
      }"""
    loops = [
        op
        for op in parse_string(TASK.format(body=body), verify=False).walk()
        if isinstance(op, scf.ParallelOp)
    ]
    assert parallel_overlap(loops[0]) is None


def test_a_loop_of_one_iteration_has_no_overlap() -> None:
    body = """scf.parallel (%i) = (%c0) to (%c1) step (%c1) {
        memref.store %one, %a[%c0] : memref<16xi64>
      }"""
    assert parallel_overlap(_loop(TASK.format(body=body))) is None


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_overlapping_loops_are_refused_at_their_line(tmp_path: Path, backend: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_program(*REFUSED["same element"]))
    where = (
        r"p\.mlir:10:7: error: iterations of this scf\.parallel overlap: iteration \(0\) "
        r"writes %a\[0\], which iteration \(1\) writes too\. Its iterations must be "
        r"independent: the native backend runs them at once on threads .* Write the loop as "
        r"scf\.for"
    )
    arrays = np.zeros(16, np.int64), np.zeros(16, np.int64)
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), *arrays, backend=backend)


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_host_loops_without_schedules_are_refused_too(tmp_path: Path, backend: str) -> None:
    """A plain function (CodeDrop makes it tasks natively; the interpreter runs it)."""
    program = tmp_path / "p.mlir"
    program.write_text(
        """func.func @main(%a: memref<16xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  affine.parallel (%i) = (0) to (8) {
    %x = arith.index_cast %i : index to i64
    affine.store %x, %a[0] : memref<16xi64>
  }
  return
}
"""
    )
    where = r"p\.mlir:5:3: error: iterations of this affine\.parallel overlap.* affine\.for"
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), np.zeros(16, np.int64), backend=backend)


def test_dhir_compile_refuses_them_too(tmp_path: Path) -> None:
    stderr = compile_refusal(tmp_path, _program(*REFUSED["neighbour writes"]))
    assert "p.mlir:10:7: error: iterations of this scf.parallel overlap" in stderr


# Bounds, steps and subscripts of run-time values: an overlap is proven when it occurs at
# every value of them at which the loop has two iterations or more.
RUNTIME = """func.func @main(%a: memref<?xi64>, %n: index, %m: index, %s: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1 : i64
  {body}
  return
}}
"""

VIEW = "memref<4xi64, strided<[1], offset: {offset}>>"

RUNTIME_REFUSED = {
    "run-time upper bound": """scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %one, %a[%c0] : memref<?xi64>
  }""",
    "run-time step": """scf.parallel (%i) = (%c0) to (%c8) step (%s) {
    memref.store %one, %a[%c0] : memref<?xi64>
  }""",
    "run-time subscript": """scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %one, %a[%n] : memref<?xi64>
  }""",
    # A number the lifter does not follow counts as a whole.
    "bound of a memref's size": """%d = memref.dim %a, %c0 : memref<?xi64>
  scf.parallel (%i) = (%c0) to (%d) step (%c1) {
    memref.store %one, %a[%c0] : memref<?xi64>
  }""",
    # In a task dhir-split is told to cut (the check runs before it).
    "task to split": """dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a attributes {dhir.split = 2} {
      %z = arith.constant 0 : index
      %u = arith.constant 1 : index
      %d = memref.dim %a, %z : memref<?xi64>
      %x = arith.constant 1 : i64
      scf.parallel (%i) = (%z) to (%d) step (%u) {
        memref.store %x, %a[%z] : memref<?xi64>
      }
    }
  }""",
    "affine symbol bound": """affine.parallel (%i) = (0) to (symbol(%n)) {
    affine.store %one, %a[0] : memref<?xi64>
  }""",
    "affine least of a symbol and a number": """affine.parallel (%i) = (0) to (min(symbol(%n), 8)) {
    affine.store %one, %a[%i floordiv 2] : memref<?xi64>
  }""",
    "loop around of run-time bounds": """scf.for %k = %c0 to %n step %c1 {
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      memref.store %one, %a[%k] : memref<?xi64>
    }
  }""",
    # %k may be any number: the overlap at a[1] is at each.
    "loop around of unknown bounds": """%x = memref.load %a[%c0] : memref<?xi64>
  %t = arith.cmpi slt, %x, %one : i64
  %e = arith.select %t, %n, %m : index
  scf.for %k = %c0 to %e step %c1 {
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      memref.store %one, %a[%c1] : memref<?xi64>
    }
  }""",
    "bound of a loop around": """scf.for %k = %c0 to %c8 step %c1 {
    scf.parallel (%i) = (%c0) to (%k) step (%c1) {
      memref.store %one, %a[%k] : memref<?xi64>
    }
  }""",
    "subview of the memref": f"""%v = memref.subview %a[1] [4] [1] : memref<?xi64> to {VIEW.format(offset=1)}
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {{
    memref.store %one, %a[%i] : memref<?xi64>
    memref.store %one, %v[%i] : {VIEW.format(offset=1)}
  }}""",
    "read through a subview": f"""%v = memref.subview %a[1] [4] [1] : memref<?xi64> to {VIEW.format(offset=1)}
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {{
    %x = memref.load %v[%i] : {VIEW.format(offset=1)}
    memref.store %x, %a[%i] : memref<?xi64>
  }}""",
}

RUNTIME_ACCEPTED = {
    "own element": """scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %one, %a[%i] : memref<?xi64>
  }""",
    # At a step of 2, iteration i writes a[i] and a[i + 1] alone.
    "neighbours at a run-time step": """scf.parallel (%i) = (%c0) to (%c8) step (%s) {
    %j = arith.addi %i, %c1 : index
    memref.store %one, %a[%i] : memref<?xi64>
    memref.store %one, %a[%j] : memref<?xi64>
  }""",
    # Iterations below -1 write below a[0], which is no element: not at every %m.
    "run-time lower bound": """scf.parallel (%i) = (%m) to (%n) step (%c1) {
    %j = arith.addi %i, %c1 : index
    memref.store %one, %a[%i] : memref<?xi64>
    memref.store %one, %a[%j] : memref<?xi64>
  }""",
    "own element under a symbol": """affine.parallel (%i) = (0) to (symbol(%n)) {
    affine.store %one, %a[%i] : memref<?xi64>
  }""",
    # Only at %n < 4 do the iterations overlap.
    "overlap at some run-time values only": """scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %one, %a[%i] : memref<?xi64>
    %k = arith.addi %i, %n : index
    memref.store %one, %a[%k] : memref<?xi64>
  }""",
    "subview apart": f"""%v = memref.subview %a[4] [4] [1] : memref<?xi64> to {VIEW.format(offset=4)}
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {{
    memref.store %one, %a[%i] : memref<?xi64>
    memref.store %one, %v[%i] : {VIEW.format(offset=4)}
  }}""",
}


def _last_loop(text: str) -> scf.ParallelOp | affine.ParallelOp:
    loops = [
        op for op in parse_string(text).walk() if isinstance(op, scf.ParallelOp | affine.ParallelOp)
    ]
    return loops[-1]


@pytest.mark.parametrize("case", sorted(RUNTIME_REFUSED))
def test_overlaps_at_every_run_time_value_are_found(case: str) -> None:
    assert parallel_overlap(_last_loop(RUNTIME.format(body=RUNTIME_REFUSED[case]))) is not None


@pytest.mark.parametrize("case", sorted(RUNTIME_ACCEPTED))
def test_overlaps_not_at_every_run_time_value_are_not_proven(case: str) -> None:
    assert parallel_overlap(_last_loop(RUNTIME.format(body=RUNTIME_ACCEPTED[case]))) is None


def test_the_overlap_names_the_run_time_values_it_occurs_at() -> None:
    """The least %n at which the loop has two iterations."""
    found = parallel_overlap(_last_loop(RUNTIME.format(body=RUNTIME_REFUSED["run-time subscript"])))
    assert found is not None
    assert (found.first, found.second, found.element, found.values) == (
        (0,),
        (1,),
        (2,),
        (("n", 2),),
    )


def test_an_overlap_through_a_subview_names_the_memref_viewed() -> None:
    found = parallel_overlap(
        _last_loop(RUNTIME.format(body=RUNTIME_REFUSED["subview of the memref"]))
    )
    assert found is not None
    assert found.memref.name_hint == "a"
    assert (found.first, found.second, found.element) == ((0,), (1,), (1,))


@pytest.mark.mlir
def test_a_run_time_bound_overlap_is_refused_at_its_line(tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(
        """func.func @main(%a: memref<16xi64>, %n: memref<1xindex>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i64
  %m = memref.load %n[%c0] : memref<1xindex>
  affine.parallel (%i) = (0) to (symbol(%m)) {
    affine.store %one, %a[0] : memref<16xi64>
  }
  return
}
"""
    )
    where = (
        r"p\.mlir:5:3: error: iterations of this affine\.parallel overlap: iteration \(0\) "
        r"writes %a\[0\], which iteration \(1\) writes too, where %m = 2\."
    )
    inputs = np.zeros(16, np.int64), np.array([4], np.int64)
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), *inputs, backend="interp")


# --- random affine loops, against brute force -------------------------------------------

SIZE = 12  # the memref's elements


@st.composite
def affine_loops(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], bool, list[Any]]:
    """Dimensions (first, end, step), whether the first one ends at the symbol %n instead,
    and accesses (store or not, coefficients of the variables, of %n, constant)."""
    rank = draw(st.integers(1, 2))
    dims = []
    for _ in range(rank):
        first = draw(st.integers(0, 3))
        dims.append((first, draw(st.integers(first, first + 5)), draw(st.integers(1, 3))))
    symbolic = draw(st.booleans())
    coefficient = st.integers(-2, 2)
    accesses = draw(
        st.lists(
            st.tuples(
                st.booleans(),
                st.lists(coefficient, min_size=rank, max_size=rank),
                st.integers(-1, 1) if symbolic else st.just(0),
                st.integers(-3, SIZE),
            ),
            min_size=1,
            max_size=3,
        )
    )
    return dims, symbolic, accesses


def _affine_program(dims: list[tuple[int, int, int]], symbolic: bool, accesses: list[Any]) -> str:
    variables = [f"%i{k}" for k in range(len(dims))]
    ends = [str(end) for _, end, _ in dims]
    if symbolic:
        ends[0] = "symbol(%n)"
    lines = []
    for k, (store, factors, by_n, constant) in enumerate(accesses):
        terms = [f"{v} * {c}" for v, c in zip(variables, factors, strict=True)]
        terms += [f"symbol(%n) * {by_n}", str(constant)]
        place = f"%a[{' + '.join(terms)}] : memref<{SIZE}xi64>"
        lines.append(f"affine.store %one, {place}" if store else f"%v{k} = affine.load {place}")
    body = "\n    ".join(lines)
    return f"""func.func @main(%a: memref<{SIZE}xi64>, %n: index) {{
  %one = arith.constant 1 : i64
  affine.parallel ({", ".join(variables)}) = ({", ".join(str(f) for f, _, _ in dims)}) to ({
        ", ".join(ends)
    }) step ({", ".join(str(s) for _, _, s in dims)}) {{
    {body}
  }}
  return
}}
"""


def _brute_overlap(
    dims: list[tuple[int, int, int]], symbolic: bool, accesses: list[Any], n: int
) -> bool | None:
    """Whether two iterations at %n = n touch one element, one storing it; None when the
    loop has fewer than two iterations there."""
    ranges = [range(f, n if symbolic and k == 0 else e, s) for k, (f, e, s) in enumerate(dims)]
    points = list(itertools.product(*ranges))
    if len(points) < 2:
        return None

    def touched(point: tuple[int, ...], store: bool | None) -> set[int]:
        out = set()
        for stores, factors, by_n, constant in accesses:
            if store is None or stores == store:
                x = sum(c * v for c, v in zip(factors, point, strict=True)) + by_n * n + constant
                if 0 <= x < SIZE:
                    out.add(x)
        return out

    return any(touched(p, True) & touched(q, None) for p in points for q in points if p != q)


@settings(max_examples=150, deadline=None)
@given(affine_loops())
def test_random_affine_loops_against_brute_force(drawn: Any) -> None:
    """What the check refuses overlaps at every %n at which the loop has two iterations
    (tried up to 12); with constant bounds, what overlaps is refused."""
    dims, symbolic, accesses = drawn
    found = parallel_overlap(_loop_of(_affine_program(dims, symbolic, accesses)))
    note(f"found: {found}")
    tries = range(-2, 13) if symbolic else range(1)
    overlaps = [_brute_overlap(dims, symbolic, accesses, n) for n in tries]
    if found is not None:
        assert all(o is not False for o in overlaps)
    if not symbolic:
        assert (found is not None) == bool(overlaps[0])


def _loop_of(text: str) -> affine.ParallelOp:
    loops = [op for op in parse_string(text).walk() if isinstance(op, affine.ParallelOp)]
    return loops[0]


@settings(max_examples=150, deadline=None)
@given(affine_loops())
def test_random_affine_loops_proven_independent_never_overlap(drawn: Any) -> None:
    """What parallel_independence proves (the native backend then keeps the loop on
    threads) overlaps at no %n tried; with constant bounds, what does not overlap is
    proven."""
    dims, symbolic, accesses = drawn
    why = parallel_independence(_loop_of(_affine_program(dims, symbolic, accesses)))
    note(f"not proven: {why}")
    tries = range(-2, 13) if symbolic else range(1)
    overlaps = [_brute_overlap(dims, symbolic, accesses, n) for n in tries]
    if why is None:
        assert not any(overlaps)
    if not symbolic:
        assert (why is None) == (not overlaps[0])
