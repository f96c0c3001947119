"""MLIR 22's index dialect and vector.step/from_elements/to_elements, which xDSL 0.74
lacks (dhir/dialects/index.py, dhir/dialects/vector.py): read and printed as MLIR does,
interpreted bit for bit as native code computes them on edge values (1 and 2 ranks),
undefined cases refused, and index arithmetic in a subscript not taken for a known
region. The forms are in the syntax corpus (data/syntax/index.mlir,
vector_elements.mlir), read and printed as mlir-opt-22 does (test_syntax_mlir22)."""

import shutil

import numpy as np
import pytest

import dhir
from dhir.analysis.dependences import task_graph
from dhir.dialects.access import is_pure
from dhir.dialects.dhir import ScheduleOp

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1


EDGES = [0, 1, -1, 2, -2, 3, -7, 63, 64, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
EDGES += [INT_MAX, INT_MIN, INT_MIN + 1]
SIGNED_DIVISIONS = ("divs", "ceildivs", "floordivs", "rems")
BINARY = (
    "add sub mul divs divu ceildivs ceildivu floordivs rems remu maxs maxu mins minu "
    "shl shrs shru and or xor".split()
)
PREDICATES = "eq ne slt sle sgt sge ult ule ugt uge".split()
# index -> iN -> index, each cast of the pair: truncation, then sign or zero extension.
CASTS = [(kind, width) for kind in ("casts", "castu") for width in (1, 8, 32, 64)]


def _defined(op: str, a: int, b: int) -> bool:
    """Whether MLIR defines `op` on a and b (no division by 0, overflow or wide shift)."""
    if op in SIGNED_DIVISIONS or op in ("divu", "ceildivu", "remu"):
        return b != 0 and not (op in SIGNED_DIVISIONS and a == INT_MIN and b == -1)
    return not op.startswith("sh") or 0 <= b < 64


def _row(k: int, body: str) -> str:
    """A loop over row k of %a and %b, `body` making %r (index) of %x and %y (index)."""
    return f"""
  scf.for %j = %c0 to %cols step %c1 {{
    %xs = memref.load %a[%c{k}, %j] : memref<ROWSxCOLSxi64>
    %ys = memref.load %b[%c{k}, %j] : memref<ROWSxCOLSxi64>
    %x = index.casts %xs : i64 to index
    %y = index.castu %ys : i64 to index
{body}
    %rs = index.casts %r : index to i64
    memref.store %rs, %out[%c{k}, %j] : memref<ROWSxCOLSxi64>
  }}"""


def _cast_body(kind: str, width: int) -> str:
    return (
        f"    %n = index.{kind} %x : index to i{width}\n"
        f"    %r = index.{kind} %n : i{width} to index"
    )


def _edge_program() -> tuple[str, np.ndarray, np.ndarray]:
    """Each op on every defined pair of edge values, one row (loop) each: the program
    and its inputs; the last row holds constants and the vector ops."""
    bodies = [f"    %r = index.{op} %x, %y" for op in BINARY]
    bodies += [
        f"    %p = index.cmp {p}(%x, %y)\n    %r = index.castu %p : i1 to index" for p in PREDICATES
    ]
    bodies += [_cast_body(kind, width) for kind, width in CASTS if width < 64]
    bodies += ["    %r = index.casts %xs : i64 to index", "    %r = index.castu %ys : i64 to index"]
    ops = [
        *BINARY,
        *(["cmp"] * len(PREDICATES)),
        *(["cast"] * (len(bodies) - len(BINARY) - len(PREDICATES))),
    ]
    pairs = [(x, y) for x in EDGES for y in EDGES]
    a = np.ones((len(bodies) + 1, len(pairs)), np.int64)
    b = np.ones_like(a)
    a[-1, :2] = [5, -9]  # the vector ops' lanes
    for k, op in enumerate(ops):
        defined = [(x, y) for x, y in pairs if _defined(op, x, y)]
        a[k, : len(defined)] = [x for x, _ in defined]
        b[k, : len(defined)] = [y for _, y in defined]
    constants = [f"%c{k} = arith.constant {k} : index" for k in range(len(bodies) + 1)]
    text = "\n".join(
        [
            "func.func @main(%a: memref<ROWSxCOLSxi64>, %b: memref<ROWSxCOLSxi64>, "
            "%out: memref<ROWSxCOLSxi64>) {",
            *constants,
            "%cols = arith.constant COLS : index",
            *(_row(k, body) for k, body in enumerate(bodies)),
            LAST_ROW.replace("LAST", f"%c{len(bodies)}"),
            "  return",
            "}",
        ]
    )
    text = text.replace("ROWS", str(a.shape[0])).replace("COLS", str(a.shape[1]))
    return text, a, b


# Constants, sizeof and the vector ops, each lane stored to a column of the last row.
LAST_ROW = """
  %x0 = memref.load %a[LAST, %c0] : memref<ROWSxCOLSxi64>
  %x1 = memref.load %a[LAST, %c1] : memref<ROWSxCOLSxi64>
  %min = index.constant -9223372036854775808
  %t = index.bool.constant true
  %f = index.bool.constant false
  %size = index.sizeof
  %ti = index.castu %t : i1 to index
  %fi = index.casts %f : i1 to index
  %steps = vector.step : vector<4xindex>
  %s0, %s1, %s2, %s3 = vector.to_elements %steps : vector<4xindex>
  %w = vector.from_elements %x1, %x0, %x1, %x0 : vector<2x2xi64>
  %w0, %w1, %w2, %w3 = vector.to_elements %w : vector<2x2xi64>
  %one = vector.from_elements %x1 : vector<i64>
  %o = vector.to_elements %one : vector<i64>
  %all = vector.from_elements %min, %ti, %fi, %size, %s0, %s1, %s2, %s3 : vector<8xindex>
  %wide = arith.index_cast %all : vector<8xindex> to vector<8xi64>
  vector.store %wide, %out[LAST, %c0] : memref<ROWSxCOLSxi64>, vector<8xi64>
  %lanes = vector.from_elements %w0, %w1, %w2, %w3, %o : vector<5xi64>
  vector.store %lanes, %out[LAST, %c8] : memref<ROWSxCOLSxi64>, vector<5xi64>
"""


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_each_op_on_edge_values_natively_as_interpreted(ranks: int) -> None:
    """convert-to-llvm's ceildivs(INT64_MAX, -1) and floordivs(INT64_MIN + 1, -1) died of
    SIGFPE natively and its ceildivs(INT64_MIN, 2) gave 2**62."""
    text, a, b = _edge_program()
    want = dhir.run(text, a, b, np.zeros_like(a), backend="interp")[2]
    got = dhir.run(text, a, b, np.zeros_like(a), backend="native", ranks=ranks, timeout=300)[2]
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:10]


def test_the_interpreter_computes_what_mlir_defines() -> None:
    text, a, b = _edge_program()
    out = dhir.run(text, a, b, np.zeros_like(a), backend="interp")[2]

    def at(op: str, x: int, y: int) -> int:
        k = BINARY.index(op)
        j = next(j for j in range(a.shape[1]) if (a[k, j], b[k, j]) == (x, y))
        return int(out[k, j])

    assert at("ceildivs", INT_MIN, 2) == -(1 << 62)
    assert at("ceildivs", INT_MAX, -1) == -INT_MAX
    assert at("floordivs", INT_MIN + 1, -1) == INT_MAX
    assert (at("divs", -7, 2), at("floordivs", -7, 2), at("ceildivs", -7, 2)) == (-3, -4, -3)
    assert (at("rems", -7, 2), at("remu", -7, 2)) == (-1, 1)
    assert (at("divu", -1, 2), at("ceildivu", -1, 2)) == (INT_MAX, INT_MIN)
    assert (at("shrs", INT_MIN, 63), at("shru", INT_MIN, 63), at("shl", 1, 63)) == (-1, 1, INT_MIN)
    assert (at("maxu", -1, 1), at("mins", -1, 1), at("add", INT_MAX, 1)) == (-1, -1, INT_MIN)
    last = [int(v) for v in out[-1, :13]]
    assert last == [INT_MIN, 1, 0, 64, 0, 1, 2, 3, -9, 5, -9, 5, -9]


UNDEFINED = """func.func @main(%m: memref<2xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %xs = memref.load %m[%c0] : memref<2xi64>
  %ys = memref.load %m[%c1] : memref<2xi64>
  %x = index.casts %xs : i64 to index
  %y = index.casts %ys : i64 to index
  %r = index.OP %x, %y
  %rs = index.casts %r : index to i64
  memref.store %rs, %m[%c0] : memref<2xi64>
  return
}
"""


@pytest.mark.parametrize(
    "op, x, y, message",
    [
        ("divs", INT_MIN, -1, "overflows: -9223372036854775808 / -1 does not fit in i64"),
        ("ceildivs", INT_MIN, -1, "overflows"),
        ("floordivs", INT_MIN, -1, "overflows"),
        ("rems", INT_MIN, -1, "overflows"),
        ("divs", 5, 0, "divides by zero"),
        ("divu", 5, 0, "divides by zero"),
        ("ceildivu", 5, 0, "divides by zero"),
        ("remu", 5, 0, "divides by zero"),
        ("shl", 1, 64, "shifts an index by 64 bits (MLIR gives poison)"),
        ("shrs", 1, -1, "shifts an index by 18446744073709551615 bits"),
    ],
)
def test_undefined_cases_are_refused_at_the_op(op: str, x: int, y: int, message: str) -> None:
    program = dhir.parse_string(UNDEFINED.replace("OP", op), "prog.mlir")
    with pytest.raises(dhir.DhirError) as error:
        dhir.run(program, np.array([x, y]), backend="interp")
    assert str(error.value).startswith(f"prog.mlir:8:8: error: 'index.{op}' ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    "line, message",
    [
        ("%r = index.casts %a : index to index", "casts between index and an integer type"),
        ("%r = index.castu %i : i32 to i64", "casts between index and an integer type"),
        ("%r = index.constant 9223372036854775808", "integer constant out of range for index"),
        ("%r = index.cmp foo(%a, %a)", "Expected `eq`, `ne`, `slt`"),
        ("%r = vector.step : vector<4xi32>", "expected a 1-d vector of index"),
        ("%r = vector.step : vector<2x2xindex>", "expected a 1-d vector of index"),
        ("%r = vector.from_elements %x, %x : vector<4xf32>", "has 4 elements, not 2"),
        ("%r = vector.from_elements %x : vector<[1]xf32>", "expected a fixed-length vector"),
        ('%r = "vector.from_elements"(%i) : (i32) -> vector<1xf32>', "expected elements of f32"),
        ('%r:2 = "vector.to_elements"(%v) : (vector<4xf32>) -> (f32, f32)', "not 2"),
    ],
)
def test_malformed_ops_are_located_errors(line: str, message: str) -> None:
    text = (
        f"func.func @f(%a: index, %i: i32, %x: f32, %v: vector<4xf32>) {{\n  {line}\n  return\n}}\n"
    )
    with pytest.raises(dhir.DhirError) as error:
        dhir.parse_string(text, "prog.mlir")
    assert str(error.value).startswith("prog.mlir:2:"), str(error.value)
    assert message in str(error.value)


# Task 0 (rank 0) writes a[4..8) at index.add(i, 4); task 1 (rank 1) reads a[7 - i] for
# i in [0, 5), one element of which (a[3]) only the input wrote: the message from rank 0
# must carry a[4..8) (a subscript misread as a[i] would make the regions disjoint).
SUBSCRIPTS = """
func.func @main(%a: memref<8xi64>, %b: memref<8xi64>) {
  dhir.schedule %a, %b {
    %t0 = dhir.task target = "cpu", %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %j = index.add %i, %c4
        %v = index.casts %j : index to i64
        memref.store %v, %a[%j] : memref<8xi64>
      }
    }
    %t1 = dhir.task target = "cpu", %a, %b attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c5 = arith.constant 5 : index
      %c7 = index.constant 7
      scf.for %i = %c0 to %c5 step %c1 {
        %j = index.sub %c7, %i
        %v = memref.load %a[%j] : memref<8xi64>
        memref.store %v, %b[%i] : memref<8xi64>
      }
    }
  }
  return
}
"""


def test_index_arithmetic_in_subscripts_gives_the_elements_accessed() -> None:
    module = dhir.parse_string(SUBSCRIPTS)
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    graph = task_graph(schedule)
    assert [(d.before, d.after, d.memref.name_hint) for d in graph.dependences] == [(0, 1, "a")]
    written, read = (
        {v.name_hint: str(r) for v, r in regions.items()}
        for regions in (graph.regions[0].must_writes, graph.regions[1].reads)
    )
    assert written == {"a": "{ [x0] : 4 <= x0 <= 7 }"}
    assert read == {"a": "{ [x0] : 3 <= x0 <= 7 }"}
    assert all(is_pure(op) for op in module.walk() if op.name.startswith("index."))


@needs_llvm
def test_index_arithmetic_in_subscripts_runs_on_two_ranks_as_interpreted() -> None:
    a = np.arange(100, 108, dtype=np.int64)
    want = dhir.run(SUBSCRIPTS, a, np.zeros(8, np.int64), backend="interp")
    got = dhir.run(SUBSCRIPTS, a, np.zeros(8, np.int64), backend="native", ranks=2, timeout=300)
    assert [list(w) for w in want] == [list(g) for g in got]
    assert list(want[1]) == [7, 6, 5, 4, 103, 0, 0, 0]


SCALABLE_STEP = """func.func @main(%m: memref<8xi64>) {
  %c0 = arith.constant 0 : index
  %s = vector.step : vector<[4]xindex>
  %w = arith.index_cast %s : vector<[4]xindex> to vector<[4]xi64>
  %e = vector.extract %w[0] : i64 from vector<[4]xi64>
  memref.store %e, %m[%c0] : memref<8xi64>
  return
}
"""


@pytest.mark.parametrize(
    "backend, message",
    [
        ("interp", "'vector.step' of a scalable vector is not supported by the interpreter"),
        pytest.param(
            "native",
            "'vector.step' is not supported by the native backend: the CPUs dhir builds for "
            "have no scalable vectors",
            marks=needs_llvm,
        ),
    ],
)
def test_a_scalable_step_is_refused_at_the_op(backend: str, message: str) -> None:
    """Natively clang crashed on it."""
    program = dhir.parse_string(SCALABLE_STEP, "prog.mlir")
    with pytest.raises(dhir.DhirError) as error:
        dhir.run(program, np.zeros(8, np.int64), backend=backend, ranks=1)
    assert str(error.value).startswith(f"prog.mlir:3:8: error: {message}")
