"""Tasks that touch *parts* of shared memrefs, native against the sequential oracle.

Random programs (tests/unit/region_programs.py) whose tasks read and write row blocks,
single rows and columns, strided ranges and stencil neighbourhoods of 1-D and 2-D memrefs,
through scf loops, affine.for/load/store, affine maps, subviews taken in the task and
linalg ops on them; tasks overlap or not, update partially or overwrite; schedules sit in
an scf.for time loop with host code between them and after the loop; tasks have random
`dhir.rank`s on 1-4 ranks, under both MPIs. Native runs must equal the interpreter bit for
bit (and the interpreter the program's plain-Python meaning); a run that hangs fails at
its timeout. Fixed cases below spell out the shapes region-based messages must get right.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import re
import shutil

import numpy as np
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st
from profiles import profile
from region_programs import Program, programs

import dhir
from dhir import DhirError

MPIS = ("mpich", "openmpi")
TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run

needs_mpi = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g, w)
        assert g.tobytes() == w.tobytes(), f"argument {k} differs:\n{g}\nwanted\n{w}"


def _native(
    text: str, inputs: list[object], ranks: int, mpi: str, placement: str = "round-robin"
) -> list[np.ndarray]:
    return dhir.run(
        text,
        *inputs,
        backend="native",
        ranks=ranks,
        mpi=mpi,
        placement=placement,
        timeout=TIMEOUT,
    )


LOCATED = re.compile(r"<string>:\d+:\d+: error: ")


# --- random programs ------------------------------------------------------------------


@profile(40, filtering=True)
@given(programs(ranks=4), st.integers(0, 2**16))
def test_random_region_programs_interp_equals_their_meaning(program: Program, seed: int) -> None:
    note(f"the program:\n{program.text()}")
    inputs = program.inputs(seed)
    _same(dhir.run(program.text(), *inputs, backend="interp"), program.reference(inputs))


@needs_mpi
@profile(100, filtering=True)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            programs(ranks=n),
            st.sampled_from(MPIS),
            st.sampled_from(("round-robin", "best")),
            st.integers(0, 2**16),
        )
    )
)
def test_random_region_programs_native_equals_interp(
    case: tuple[int, Program, str, str, int],
) -> None:
    ranks, program, mpi, placement, seed = case
    text = program.text()
    note(f"on {ranks} ranks with {mpi}, placement {placement}, the program:\n{text}")
    event(f"{ranks} ranks")
    inputs = program.inputs(seed)
    oracle = dhir.run(text, *inputs, backend="interp")
    _same(_native(text, inputs, ranks, mpi, placement), oracle)


@needs_mpi
@profile(15, filtering=True)
@given(st.integers(2, 3).flatmap(lambda n: st.tuples(st.just(n), programs(n, alias="both"))))
def test_random_aliasing_operands_run_right_or_are_refused_at_the_schedule(
    case: tuple[int, Program],
) -> None:
    """Issue 15's rule for schedule operands that are views of one buffer (%b0 and a
    memref.cast of it, both listed): either native equals the oracle, or the run is
    refused with a located error; never a wrong answer."""
    ranks, program = case
    text = program.text()
    note(f"on {ranks} ranks, the program:\n{text}")
    inputs = program.inputs(1)
    oracle = dhir.run(text, *inputs, backend="interp")
    try:
        got = _native(text, inputs, ranks, "mpich")
    except DhirError as error:
        event("refused")
        assert LOCATED.search(str(error)), str(error)
        assert "views of one buffer" in str(error)
        return
    event("ran")
    _same(got, oracle)


@needs_mpi
@profile(20, filtering=True)
@given(
    st.integers(2, 3).flatmap(
        lambda n: st.tuples(
            st.just(n), programs(n, host_views=True), st.sampled_from(MPIS), st.integers(0, 99)
        )
    )
)
def test_random_views_made_before_a_time_loop_read_by_its_host_code(
    case: tuple[int, Program, str, int],
) -> None:
    """Issue 23: host code in a time loop that reaches a schedule's buffers under other
    names (a cast or subview made before the loop, or the base of the view the schedule
    lists) must see each iteration's data, as in the oracle."""
    ranks, program, mpi, seed = case
    text = program.text()
    note(f"on {ranks} ranks with {mpi}, the program:\n{text}")
    inputs = program.inputs(seed)
    oracle = dhir.run(text, *inputs, backend="interp")
    _same(oracle, program.reference(inputs))
    _same(_native(text, inputs, ranks, mpi), oracle)


# --- fixed cases ------------------------------------------------------------------------

# A 3-point stencil down the rows of u (8x4 f64), the sweep split over two tasks by row
# halves (ranks 0 and 1), then copied back by halves; 4 steps of a time loop. Each half
# needs one halo row of the other's. Host code after the loop reads a corner.
STENCIL = """
#up = affine_map<(d0) -> (d0 - 1)>
#down = affine_map<(d0) -> (d0 + 1)>
func.func @main(%u: memref<8x4xf64>, %v: memref<8x4xf64>, %corner: memref<1xf64>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %u, %v {
      %cpu = dhir.target {kind = "cpu"}
      %top = dhir.task %cpu, %u, %v attributes {dhir.rank = 0 : i64} {
        %half = arith.constant 0.5 : f64
        affine.for %i = 1 to 4 {
          affine.for %j = 0 to 4 {
            %i0 = affine.apply #up(%i)
            %i2 = affine.apply #down(%i)
            %a = memref.load %u[%i0, %j] : memref<8x4xf64>
            %b = affine.load %u[%i, %j] : memref<8x4xf64>
            %c = memref.load %u[%i2, %j] : memref<8x4xf64>
            %s = arith.addf %a, %c : f64
            %h = arith.mulf %s, %half : f64
            %r = arith.addf %h, %b : f64
            %q = arith.mulf %r, %half : f64
            affine.store %q, %v[%i, %j] : memref<8x4xf64>
          }
        }
      }
      %bottom = dhir.task %cpu, %u, %v attributes {dhir.rank = 1 : i64} {
        %half = arith.constant 0.5 : f64
        affine.for %i = 4 to 7 {
          affine.for %j = 0 to 4 {
            %a = affine.load %u[%i - 1, %j] : memref<8x4xf64>
            %b = affine.load %u[%i, %j] : memref<8x4xf64>
            %c = affine.load %u[%i + 1, %j] : memref<8x4xf64>
            %s = arith.addf %a, %c : f64
            %h = arith.mulf %s, %half : f64
            %r = arith.addf %h, %b : f64
            %q = arith.mulf %r, %half : f64
            affine.store %q, %v[%i, %j] : memref<8x4xf64>
          }
        }
      }
      %back_top = dhir.task %cpu, %v, %u attributes {dhir.rank = 0 : i64} {
        %sv = memref.subview %v[1, 0] [3, 4] [1, 1] : memref<8x4xf64> to memref<3x4xf64, strided<[4, 1], offset: 4>>
        %su = memref.subview %u[1, 0] [3, 4] [1, 1] : memref<8x4xf64> to memref<3x4xf64, strided<[4, 1], offset: 4>>
        memref.copy %sv, %su : memref<3x4xf64, strided<[4, 1], offset: 4>> to memref<3x4xf64, strided<[4, 1], offset: 4>>
      }
      %back_bottom = dhir.task %cpu, %v, %u attributes {dhir.rank = 1 : i64} {
        %sv = memref.subview %v[4, 0] [3, 4] [1, 1] : memref<8x4xf64> to memref<3x4xf64, strided<[4, 1], offset: 16>>
        %su = memref.subview %u[4, 0] [3, 4] [1, 1] : memref<8x4xf64> to memref<3x4xf64, strided<[4, 1], offset: 16>>
        linalg.copy ins(%sv : memref<3x4xf64, strided<[4, 1], offset: 16>>) outs(%su : memref<3x4xf64, strided<[4, 1], offset: 16>>)
      }
    }
  }
  %c3 = arith.constant 3 : index
  %c6 = arith.constant 6 : index
  %x = memref.load %u[%c6, %c3] : memref<8x4xf64>
  memref.store %x, %corner[%c0] : memref<1xf64>
  return
}
"""


def _stencil(u: np.ndarray, v: np.ndarray, corner: np.ndarray, steps: int) -> list[np.ndarray]:
    u, v = u.copy(), v.copy()
    for _ in range(steps):
        v[1:7] = ((u[0:6] + u[2:8]) * 0.5 + u[1:7]) * 0.5
        u[1:7] = v[1:7]
    return [u, v, np.array([u[6, 3]]), np.array(steps)]


# C += A @ B (6x6 i32) as three tasks over row blocks of C, each reading all of A's rows
# it needs and all of B, on ranks 1, 0, 1; a last task on rank 0 reads all of C.
GEMM = """
func.func @main(%a: memref<6x6xi32>, %b: memref<6x6xi32>, %c: memref<6x6xi32>, %sum: memref<6xi32>) {
  dhir.schedule %a, %b, %c, %sum {
    %cpu = dhir.target {kind = "cpu"}
    BLOCKS
    %total = dhir.task %cpu, %c, %sum attributes {dhir.rank = 0 : i64} {
      %z = arith.constant 0 : i32
      linalg.fill ins(%z : i32) outs(%sum : memref<6xi32>)
      affine.for %i = 0 to 6 {
        affine.for %j = 0 to 6 {
          %x = affine.load %c[%i, %j] : memref<6x6xi32>
          %s = affine.load %sum[%j] : memref<6xi32>
          %n = arith.addi %s, %x : i32
          affine.store %n, %sum[%j] : memref<6xi32>
        }
      }
    }
  }
  return
}
"""

GEMM_BLOCK = """
    %blk{k} = dhir.task %cpu, %a, %b, %c attributes {{dhir.rank = {rank} : i64}} {{
      %lo = arith.constant {lo} : index
      %hi = arith.constant {hi} : index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      scf.for %i = %lo to %hi step %c1 {{
        scf.for %j = %c0 to %c6 step %c1 {{
          scf.for %k = %c0 to %c6 step %c1 {{
            %x = memref.load %a[%i, %k] : memref<6x6xi32>
            %y = memref.load %b[%k, %j] : memref<6x6xi32>
            %p = arith.muli %x, %y : i32
            %s = memref.load %c[%i, %j] : memref<6x6xi32>
            %n = arith.addi %s, %p : i32
            memref.store %n, %c[%i, %j] : memref<6x6xi32>
          }}
        }}
      }}
    }}"""

GEMM_PROGRAM = GEMM.replace(
    "    BLOCKS",
    "".join(
        GEMM_BLOCK.format(k=k, rank=rank, lo=lo, hi=hi)
        for k, (rank, lo, hi) in enumerate([(1, 0, 2), (0, 2, 4), (1, 4, 6)])
    ),
)


def _gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: np.ndarray) -> list[np.ndarray]:
    c = c + a @ b
    return [a, b, c, c.sum(axis=0).astype(np.int32)]


# Two tasks on different ranks write disjoint halves of x (the top half through a
# subview with a strided loop, the bottom half by affine maps `2*d0 + d1` into a 1-D
# memref), then one task on a third rank reads all of x and y.
HALVES = """
func.func @main(%x: memref<6x4xi32>, %y: memref<16xi32>, %out: memref<6x4xi32>) {
  dhir.schedule %x, %y, %out {
    %cpu = dhir.target {kind = "cpu"}
    %top = dhir.task %cpu, %x attributes {dhir.rank = 1 : i64} {
      %top = memref.subview %x[0, 0] [3, 4] [1, 1] : memref<6x4xi32> to memref<3x4xi32, strided<[4, 1]>>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %seven = arith.constant 7 : i32
      scf.for %i = %c0 to %c3 step %c1 {
        scf.for %j = %c0 to %c4 step %c1 {
          %v = memref.load %top[%i, %j] : memref<3x4xi32, strided<[4, 1]>>
          %w = arith.muli %v, %seven : i32
          memref.store %w, %top[%i, %j] : memref<3x4xi32, strided<[4, 1]>>
        }
      }
    }
    %bottom = dhir.task %cpu, %x, %y attributes {dhir.rank = 2 : i64} {
      affine.for %i = 3 to 6 {
        affine.for %j = 0 to 4 {
          %k = affine.apply affine_map<(d0, d1) -> (2 * d0 + d1 - 6)>(%i, %j)
          %v = memref.load %y[%k] : memref<16xi32>
          affine.store %v, %x[%i, %j] : memref<6x4xi32>
          %odd = affine.apply affine_map<(d0, d1) -> (d0 * 2 + d1 - 5)>(%i, %j)
          %m = arith.constant -1 : i32
          memref.store %m, %y[%odd] : memref<16xi32>
        }
      }
    }
    %all = dhir.task %cpu, %x, %y, %out attributes {dhir.rank = 0 : i64} {
      affine.for %i = 0 to 6 {
        affine.for %j = 0 to 4 {
          %v = affine.load %x[%i, %j] : memref<6x4xi32>
          %w = affine.load %y[%i * 2 + %j] : memref<16xi32>
          %s = arith.addi %v, %w : i32
          affine.store %s, %out[%i, %j] : memref<6x4xi32>
        }
      }
    }
  }
  return
}
"""


def _halves(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> list[np.ndarray]:
    x, y = x.copy(), y.copy()
    x[0:3] *= 7
    for i in range(3, 6):
        for j in range(4):
            x[i, j] = y[2 * i + j - 6]
            y[2 * i + j - 5] = -1
    out = x + np.array([[y[2 * i + j] for j in range(4)] for i in range(6)], np.int32)
    return [x, y, out]


# Rank 1 updates rows 0-2 of m (read-modify-write) and leaves row 3 alone; rank 0 then
# overwrites row 3 only (every element, step 1) and column 1 of rows 0-1 (a strided
# partial write through a column subview), so neither rank holds all of m up to date;
# a task on rank 1 then reads all of m. Runs twice in a time loop with host code
# between iterations that writes one element of m on every rank.
PARTIAL = """
func.func @main(%m: memref<4x3xi32>, %seen: memref<4x3xi32>, %steps: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %m, %seen {
      %cpu = dhir.target {kind = "cpu"}
      %update = dhir.task %cpu, %m attributes {dhir.rank = 1 : i64} {
        %ten = arith.constant 10 : i32
        affine.for %i = 0 to 3 {
          affine.for %j = 0 to 3 {
            %v = affine.load %m[%i, %j] : memref<4x3xi32>
            %w = arith.addi %v, %ten : i32
            affine.store %w, %m[%i, %j] : memref<4x3xi32>
          }
        }
      }
      %overwrite = dhir.task %cpu, %m attributes {dhir.rank = 0 : i64} {
        %ti = arith.index_cast %t : index to i32
        %base = arith.constant 100 : i32
        %x = arith.addi %base, %ti : i32
        %row = memref.subview %m[3, 0] [1, 3] [1, 1] : memref<4x3xi32> to memref<1x3xi32, strided<[3, 1], offset: 9>>
        linalg.fill ins(%x : i32) outs(%row : memref<1x3xi32, strided<[3, 1], offset: 9>>)
        %col = memref.subview %m[0, 1] [2, 1] [1, 1] : memref<4x3xi32> to memref<2x1xi32, strided<[3, 1], offset: 1>>
        %y = arith.constant -5 : i32
        linalg.fill ins(%y : i32) outs(%col : memref<2x1xi32, strided<[3, 1], offset: 1>>)
      }
      %read = dhir.task %cpu, %m, %seen attributes {dhir.rank = 1 : i64} {
        %c0_ = arith.constant 0 : index
        %c1_ = arith.constant 1 : index
        %c3 = arith.constant 3 : index
        %c4 = arith.constant 4 : index
        scf.for %i = %c0_ to %c4 step %c1_ {
          scf.for %j = %c0_ to %c3 step %c1_ {
            %v = memref.load %m[%i, %j] : memref<4x3xi32>
            %s = memref.load %seen[%i, %j] : memref<4x3xi32>
            %n = arith.addi %s, %v : i32
            memref.store %n, %seen[%i, %j] : memref<4x3xi32>
          }
        }
      }
    }
    %c2 = arith.constant 2 : index
    %h = memref.load %m[%c2, %c2] : memref<4x3xi32>
    %d = arith.constant 1000 : i32
    %hn = arith.addi %h, %d : i32
    memref.store %hn, %m[%c2, %c2] : memref<4x3xi32>
  }
  return
}
"""


def _partial(m: np.ndarray, seen: np.ndarray, steps: int) -> list[np.ndarray]:
    m, seen = m.copy(), seen.copy()
    for t in range(steps):
        m[0:3] += 10
        m[3] = 100 + t
        m[0:2, 1] = -5
        seen += m
        m[2, 2] += 1000
    return [m, seen, np.array(steps)]


def _ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-20, 20, shape).astype(np.int32)


FIXED = {
    "stencil-in-a-time-loop": (
        STENCIL,
        lambda rng: [
            rng.integers(-8, 8, (8, 4)).astype(np.float64),
            np.zeros((8, 4)),
            np.zeros(1),
            4,
        ],
        _stencil,
    ),
    "gemm-row-blocks": (
        GEMM_PROGRAM,
        lambda rng: [_ints(rng, 6, 6), _ints(rng, 6, 6), _ints(rng, 6, 6), _ints(rng, 6)],
        _gemm,
    ),
    "disjoint-halves-then-read-all": (
        HALVES,
        lambda rng: [_ints(rng, 6, 4), _ints(rng, 16), np.zeros((6, 4), np.int32)],
        _halves,
    ),
    "partial-overwrite-stale-copy": (
        PARTIAL,
        lambda rng: [_ints(rng, 4, 3), np.zeros((4, 3), np.int32), 2],
        _partial,
    ),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_region_programs_interp_equals_numpy(name: str) -> None:
    text, make, reference = FIXED[name]
    inputs = make(np.random.default_rng(5))
    _same(dhir.run(text, *inputs, backend="interp"), reference(*inputs))


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_region_programs_native_equals_interp(name: str, mpi: str) -> None:
    text, make, _ = FIXED[name]
    inputs = make(np.random.default_rng(6))
    oracle = dhir.run(text, *inputs, backend="interp")
    _same(_native(text, inputs, 3, mpi), oracle)


# --- views made before a schedule as its operands (issue 15, "aliases") -----------------

VIEW_OPERAND = """
func.func @main(%a: memref<6x4xi32>, %b: memref<6x4xi32>) {
  VIEW
  dhir.schedule OPERANDS {
    %cpu = dhir.target {kind = "cpu"}
    %w = dhir.task %cpu, WRITTEN attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %x = arith.constant 42 : i32
      memref.store %x, WRITTEN[%c1, %c2] : TYPE
    }
    %r = dhir.task %cpu, READ, %b attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %x = memref.load READ[%c1, %c2] : TYPE
      memref.store %x, %b[%c0, %c0] : memref<6x4xi32>
    }
  }
  %c3 = arith.constant 3 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %y = memref.load HOST[%c1, %c2] : TYPE
  memref.store %y, %b[%c3, %c3] : memref<6x4xi32>
  return
}
"""

DYN = "memref<?x4xi32>"
SUB = "memref<3x4xi32, strided<[4, 1], offset: 8>>"
CAST = f"%v = memref.cast %a : memref<6x4xi32> to {DYN}"
SUBVIEW = f"%v = memref.subview %a[2, 0] [3, 4] [1, 1] : memref<6x4xi32> to {SUB}"

# name: (the view, schedule operands, written, read, read after, type, may be refused)
VIEW_CASES = {
    # the cast alone stands for %a: it must run
    "cast-instead-of-the-buffer": (CAST, "%v, %b", "%v", "%v", "%v", DYN, False),
    # the host reads the new value through the base buffer after the schedule
    "cast-read-after-through-the-base": (CAST, "%v, %b", "%v", "%v", "%a", DYN, False),
    # both listed, the write through one and the read through the other
    "cast-and-its-buffer": (CAST, "%a, %v, %b", "%v", "%a", "%v", DYN, True),
    # a strided (non-default layout) view as an operand
    "subview-operand": (SUBVIEW, "%v, %b", "%v", "%v", "%v", SUB, True),
    "subview-and-its-buffer": (SUBVIEW, "%a, %v, %b", "%v", "%a", "%a", SUB, True),
}


def _view_case(name: str) -> str:
    view, operands, written, read, host, type_, _ = VIEW_CASES[name]
    text = VIEW_OPERAND.replace("VIEW", view).replace("OPERANDS", operands)
    text = text.replace("%w = dhir.task %cpu, WRITTEN", f"%w = dhir.task %cpu, {written}")
    text = text.replace("WRITTEN[", f"{written}[").replace("READ, %b", f"{read}, %b")
    text = text.replace("READ[", f"{read}[").replace("HOST[", f"{host}[").replace("TYPE", type_)
    # a read through %a uses %a's own type and subscripts of the same element
    lines = []
    for line in text.splitlines():
        if "memref.load %a[" in line:
            line = line.replace(type_, "memref<6x4xi32>")
            if type_ == SUB:
                line = line.replace("%a[%c1, %c2]", "%a[%c3b, %c2]")
                lines.append("      %c3b = arith.constant 3 : index")
        lines.append(line)
    return "\n".join(lines) + "\n"


@needs_mpi
@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("name", sorted(VIEW_CASES))
def test_view_operands_run_right_or_are_refused_with_a_located_error(name: str, mpi: str) -> None:
    text = _view_case(name)
    inputs = [np.arange(24, dtype=np.int32).reshape(6, 4), np.zeros((6, 4), np.int32)]
    oracle = dhir.run(text, *inputs, backend="interp")
    assert oracle[1][0, 0] == 42 and oracle[1][3, 3] == 42  # the program means what it says
    may_refuse = VIEW_CASES[name][-1]
    try:
        got = _native(text, inputs, 2, mpi)
    except DhirError as error:
        assert may_refuse, str(error)
        assert LOCATED.search(str(error)), str(error)
        return
    _same(got, oracle)
