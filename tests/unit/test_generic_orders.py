"""linalg.generic contractions whose dimensions come in any order (gemm as (j, k, i), a
batch with the batch inside, a matrix-vector product with the reduction first), and the
named contractions (matmul, batch_matmul, matvec, vecmat, dot) as their generic forms:
the optimizer writes each as the loops its kernels take, and the native result is the
interpreter's, bit for bit."""

import itertools
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dhir
from dhir import parse_string
from dhir.runner import drop_code
from dhir.transforms.optimize_bodies import optimize_bodies

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# Each kind's operands as the dimensions they pick: two inputs, then the output. "spread"
# sums over j too although it calls j parallel: its output does not pick j.
KINDS = {
    "gemm": (("i", "k"), ("k", "j"), ("i", "j")),
    "batch": (("b", "i", "k"), ("b", "k", "j"), ("b", "i", "j")),
    "matvec": (("i", "k"), ("k",), ("i",)),
    "vecmat": (("k",), ("k", "j"), ("j",)),
    "spread": (("i", "k"), ("k", "j"), ("i",)),
    # Two reductions, k and l: each element's updates run up (k, l) in the order the
    # generic lists them, as the interpreter runs them.
    "gemm2": (("i", "k", "l"), ("l", "k", "j"), ("i", "j")),
    "sum2": (("k", "i", "l"), ("l",), ("i",)),
}
REDUCTIONS = ("k", "l")
# The named ops, by the kind of generic each one is.
NAMED = {
    "gemm": "matmul",
    "batch": "batch_matmul",
    "matvec": "matvec",
    "vecmat": "vecmat",
    "dot": "dot",
}
SUBSCRIPTS = {**KINDS, "dot": (("k",), ("k",), ())}
BODIES = {
    "add": ["%p = arith.mulf %a, %b : {t}", "%s = arith.addf %c, %p : {t}"],
    "sub": ["%p = arith.mulf %a, %b : {t}", "%s = arith.subf %c, %p : {t}"],
    "alpha": [
        "%q = arith.mulf %alpha, %a : {t}",
        "%p = arith.mulf %q, %b : {t}",
        "%s = arith.addf %p, %c : {t}",
    ],
    "max": ["%p = arith.mulf %a, %b : {t}", "%s = arith.maximumf %c, %p : {t}"],
}


@dataclass(frozen=True)
class Product:
    """A linalg.generic contraction: its kind, its dimensions in the order it lists them,
    their sizes, which operands are stored transposed (their subscripts reversed), its
    body and its element type; or, `named`, the named op of its kind (NAMED), whose
    dimensions, operands and body are its own."""

    kind: str
    order: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    transposed: tuple[bool, bool, bool] = (False, False, False)
    body: str = "add"
    dtype: str = "f64"
    named: bool = False

    def subscripts(self) -> list[tuple[str, ...]]:
        return [
            tuple(reversed(picks)) if flip else picks
            for picks, flip in zip(SUBSCRIPTS[self.kind], self.transposed, strict=True)
        ]

    def shapes(self) -> list[tuple[int, ...]]:
        size = dict(self.sizes)
        return [tuple(size[d] for d in picks) for picks in self.subscripts()]

    def text(self) -> str:
        t = self.dtype
        dims = ", ".join(self.order)
        types = ["memref<" + "x".join([*map(str, s), t]) + ">" for s in self.shapes()]
        maps = [f"affine_map<({dims}) -> ({', '.join(p)})>" for p in self.subscripts()]
        kinds = ", ".join('"reduction"' if d in REDUCTIONS else '"parallel"' for d in self.order)
        body = [line.format(t=t) for line in BODIES[self.body]]
        operands = f"ins(%A, %B : {types[0]}, {types[1]}) outs(%C : {types[2]})"
        op = (
            [f"  linalg.{NAMED[self.kind]} {operands}"]
            if self.named
            else [
                f"  linalg.generic {{indexing_maps = [{', '.join(maps)}],",
                f"                  iterator_types = [{kinds}]}}",
                f"      {operands} {{",
                f"  ^bb0(%a: {t}, %b: {t}, %c: {t}):",
                *(f"    {line}" for line in body),
                f"    linalg.yield %s : {t}",
                "  }",
            ]
        )
        return "\n".join(
            [
                f"func.func @main(%A: {types[0]}, %B: {types[1]}, %C: {types[2]}) {{",
                f"  %alpha = arith.constant 1.5 : {t}",
                *op,
                "  return",
                "}",
                "",
            ]
        )

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        kind = np.float64 if self.dtype == "f64" else np.float32
        return [rng.standard_normal(s).astype(kind) for s in self.shapes()]


def _decisions(product: Product) -> list[str]:
    module = parse_string(product.text())
    drop_code(module, "main")
    return [d.text for d in optimize_bodies(module, 256)]


@st.composite
def products(draw: st.DrawFn) -> Product:
    kind = draw(st.sampled_from(sorted(KINDS)))
    dims = sorted({d for picks in KINDS[kind] for d in picks})
    order = tuple(draw(st.permutations(dims)))
    limits = {"b": (1, 3), "i": (1, 9), "j": (1, 40), "k": (0, 5), "l": (0, 4)}
    sizes = tuple((d, draw(st.integers(*limits[d]))) for d in dims)
    flips = draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    body = draw(st.sampled_from(sorted(BODIES)))
    dtype = draw(st.sampled_from(["f32", "f64"]))
    return Product(kind, order, sizes, flips, body, dtype)


@needs_llvm
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(product=products())
@example(product=Product("spread", ("k", "i", "j"), (("i", 3), ("j", 5), ("k", 2))))
@example(
    product=Product(
        "gemm2", ("l", "j", "k", "i"), (("i", 5), ("j", 9), ("k", 3), ("l", 2)), body="sub"
    )
)
@example(product=Product("sum2", ("i", "l", "k"), (("i", 6), ("k", 3), ("l", 4)), body="max"))
@example(
    product=Product("gemm", ("k", "j", "i"), (("i", 5), ("j", 9), ("k", 3)), (False, True, True))
)
def test_a_generic_in_any_order_of_dimensions_is_exact(product: Product) -> None:
    """Whatever order the generic lists its dimensions in, whichever operands are
    transposed, with one reduction or two, the loops the optimizer picks give each
    element its updates up the reductions, as the interpreter does: the native result is
    the interpreter's."""
    inputs = product.inputs(sum(s for _, s in product.sizes))
    want = dhir.run(product.text(), *inputs, backend="interp", ranks=1)
    got = dhir.run(product.text(), *inputs, backend="native", ranks=1)
    np.testing.assert_array_equal(got[2], want[2])
    numbers = ~np.isnan(want[2])
    np.testing.assert_array_equal(np.signbit(got[2][numbers]), np.signbit(want[2][numbers]))


GEMM_SIZES = (("i", 9), ("j", 37), ("k", 5))
BLOCKED = "blocked 4 rows x 8 columns (2 vectors of 4 x f64) in registers"


@pytest.mark.parametrize("order", list(itertools.permutations("ijk")))
def test_gemm_in_every_order_of_its_dimensions_gets_the_kernel(order: tuple[str, ...]) -> None:
    """gemm as a generic in each of the 6 orders of (i, j, k) takes the i-k-j kernel:
    the rows of C outer, the reduction, C's columns innermost. Before, only (i, j, k) and
    (i, k, j) did; (j, k, i) and (k, j, i) ran as written, 24-44x NumPy's time."""
    (text,) = _decisions(Product("gemm", order, GEMM_SIZES))
    assert text.startswith(f"nest (i-k-j) {BLOCKED}"), text


@pytest.mark.parametrize(
    ("kind", "order", "want"),
    [
        ("batch", ("k", "b", "i", "j"), f"nest (i-k-j) {BLOCKED}"),
        ("batch", ("i", "b", "j", "k"), f"nest (i-k-j) {BLOCKED}"),
        ("matvec", ("k", "i"), "sums of 4 rows run in vector lanes"),
        ("vecmat", ("j", "k"), "nest (i-k-j) blocked 1 row x 8 columns"),
    ],
)
def test_batches_and_matrix_vector_products_in_any_order_get_a_kernel(
    kind: str, order: tuple[str, ...], want: str
) -> None:
    """A batch with the batch inside or the reduction first runs batch by batch with the
    i-k-j kernel; A x with the reduction first runs its rows' sums side by side (it was
    left: "it reads %A down a column"); x A with the reduction last runs as x's rows
    of A added in turn (i-k-j), reading A along its rows, not down its columns."""
    sizes = (("b", 2), ("i", 9), ("j", 37), ("k", 13))
    (text,) = _decisions(Product(kind, order, tuple(s for s in sizes if s[0] in order)))
    assert text.startswith(want), text


def test_a_generic_whose_output_skips_a_parallel_dimension_keeps_its_order() -> None:
    """An output that does not pick a dimension called parallel (j) takes several
    iterations' updates in the generic's order of (k, j): its loops stay in that order,
    which no kernel takes."""
    product = Product("spread", ("k", "i", "j"), (("i", 9), ("j", 37), ("k", 5)))
    (text,) = _decisions(product)
    assert text == "left as written: an iteration touches other rows of a memref the loop writes"


@needs_llvm
def test_timing_says_a_gemm_generic_with_its_columns_outer_was_blocked(tmp_path: Path) -> None:
    """`dhir run --timing` names the generic's line and the kernel it got."""
    product = Product("gemm", ("j", "k", "i"), GEMM_SIZES)
    program = tmp_path / "gemm_jki.mlir"
    program.write_text(product.text())
    given: list[str] = []
    for name, value in zip("ABC", product.inputs(1), strict=True):
        np.save(tmp_path / f"{name}.npy", value)
        given += ["--input", str(tmp_path / f"{name}.npy")]
    done = subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", "run", str(program), "-n", "1"]
        + [*given, "--timing", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = [s for s in map(str.strip, done.stderr.splitlines()) if s.startswith("optimizer: ")]
    assert len(lines) == 1, done.stderr
    assert "gemm_jki.mlir:3:3: nest (i-k-j) blocked 4 rows x " in lines[0], lines


# Odd sizes: no dimension a whole number of the kernels' 4 rows or 8 columns.
NAMED_SIZES = (("b", 3), ("i", 7), ("j", 21), ("k", 11))


def _named(kind: str) -> Product:
    dims = sorted({d for picks in SUBSCRIPTS[kind] for d in picks})
    return Product(kind, tuple(dims), tuple(s for s in NAMED_SIZES if s[0] in dims), named=True)


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("kind", sorted(NAMED))
def test_a_named_contraction_is_exact(kind: str, dtype: str, ranks: int) -> None:
    """Each named contraction, its loops now in the order the optimizer picks for its
    generic form (the reduction before the columns for matmul, batch_matmul and vecmat),
    gives each element its updates up the reduction, as the interpreter does, on 1 rank
    and on 2 (a task's rows split in pieces)."""
    product = replace(_named(kind), dtype=dtype)
    inputs = product.inputs(7)
    want = dhir.run(product.text(), *inputs, backend="interp", ranks=1)
    got = dhir.run(product.text(), *inputs, backend="native", ranks=ranks)
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(np.signbit(got[2]), np.signbit(want[2]))


@pytest.mark.parametrize(
    ("kind", "want"),
    [
        ("gemm", f"nest (i-k-j) {BLOCKED}, column blocks outer, exact"),
        ("batch", f"nest (i-k-j) {BLOCKED}, column blocks outer, exact"),
        ("matvec", "sums of 4 rows run in vector lanes (4 steps of k transposed in registers"),
        ("vecmat", "nest (i-k-j) blocked 1 row x 8 columns (2 vectors of 4 x f64) in registers, k in chunks of 8"),
    ],
)  # fmt: skip
def test_a_named_contraction_gets_the_kernel_of_its_generic_form(kind: str, want: str) -> None:
    """matmul, batch_matmul and vecmat run the reduction before the columns, as their
    generic forms do (they ran k innermost: vecmat read its matrix down the columns);
    matvec, whose matrix the columns index along its rows, keeps k innermost, its rows'
    sums side by side. The same line as the generic form's."""
    sizes = (("b", 2), ("i", 9), ("j", 37), ("k", 13))
    named = _named(kind)
    named = Product(kind, named.order, tuple(s for s in sizes if s[0] in named.order), named=True)
    (text,) = _decisions(named)
    assert text.startswith(want), text
    assert _decisions(Product(kind, named.order, named.sizes)) == [text]


def test_a_named_dot_gets_no_line() -> None:
    """dot has no parallel dimension: its sum runs in a register, as before, and makes no
    nest the optimizer reports."""
    assert _decisions(_named("dot")) == []


# The batched products the optimizer took last (their operands' shapes at b, i, j, k) and
# the kernel each takes: batch_matvec's rows' sums, batch_reduce_matmul's i-k-j nest, its
# batch outermost (an element's updates run up the batch, then up k, as the interpreter's
# order of dimensions (b, i, j, k) runs them).
BATCHED = {
    "batch_matvec": (lambda b, i, j, k: [(b, i, k), (b, k), (b, i)], "sums of "),
    "batch_reduce_matmul": (lambda b, i, j, k: [(b, i, k), (b, k, j), (i, j)], "nest (i-k-j) "),
}


def _batched_text(name: str, shapes: list[tuple[int, ...]], dtype: str) -> str:
    kinds = ["memref<" + "".join(f"{d}x" for d in shape) + f"{dtype}>" for shape in shapes]
    return (
        f"func.func @main(%A: {kinds[0]}, %B: {kinds[1]}, %C: {kinds[2]}) {{\n"
        f"  linalg.{name} ins(%A, %B : {kinds[0]}, {kinds[1]}) outs(%C : {kinds[2]})\n"
        "  return\n}\n"
    )


@needs_llvm
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(BATCHED)),
    sizes=st.tuples(*(st.sampled_from([0, 1, 2, 3, 5, 7, 13]) for _ in range(4))),
    dtype=st.sampled_from(["f32", "f64"]),
    ranks=st.integers(1, 2),
)
@example(name="batch_reduce_matmul", sizes=(3, 7, 21, 11), dtype="f32", ranks=2)
@example(name="batch_matvec", sizes=(3, 13, 1, 7), dtype="f64", ranks=1)
@example(name="batch_reduce_matmul", sizes=(0, 5, 3, 2), dtype="f64", ranks=1)
def test_batch_matvec_and_batch_reduce_matmul_are_exact(
    name: str, sizes: tuple[int, int, int, int], dtype: str, ranks: int
) -> None:
    """linalg.batch_matvec and batch_reduce_matmul, which the optimizer left to the
    build's lowering, take the kernels of matvec and matmul (with odd sizes, 0 and 1
    included, where there are rows and columns for them) and give the interpreter's bits,
    signs of zeros too, on 1 and 2 ranks."""
    shapes_of, kernel = BATCHED[name]
    shapes = shapes_of(*sizes)
    text = _batched_text(name, shapes, dtype)
    module = parse_string(text)
    drop_code(module, "main")
    rng = np.random.default_rng(sum(sizes))
    kind = np.float64 if dtype == "f64" else np.float32
    inputs = [np.asarray(rng.standard_normal(s)).astype(kind) for s in shapes]
    want = dhir.run(text, *inputs, backend="interp", ranks=1)[2]
    got = dhir.run(text, *inputs, backend="native", ranks=ranks)[2]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    decisions = [d.text for d in optimize_bodies(module, 256)]
    assert not any(d.startswith("left") for d in decisions), decisions
    assert any(d.startswith(kernel) and d.endswith("exact") for d in decisions), decisions


def test_batch_matvec_gets_the_row_lanes_of_matvec() -> None:
    """Each matrix of linalg.batch_matvec runs its rows' sums in vector lanes, as matvec's
    do (its reads `A[b, i, k]` and `x[b, k]` lead with the batch, which the row loop does
    not change); it ran 8 rows' sums as scalars before."""
    lanes = "sums of 4 rows run in vector lanes (4 steps of k transposed in registers"
    for name, shapes in (
        ("matvec", [(13, 7), (7,), (13,)]),
        ("batch_matvec", [(3, 13, 7), (3, 7), (3, 13)]),
    ):
        module = parse_string(_batched_text(name, shapes, "f64"))
        drop_code(module, "main")
        (decision,) = [d.text for d in optimize_bodies(module, 256)]
        assert decision.startswith(lanes), decision


# Row sums written by hand whose reads lead with subscripts the row loop does not
# change: each operand's leading subscript, none, the batch `b`, or a constant.
_LEADS = {"none": "", "b": "%b, ", "const": "%c1, "}


def _led_row_sums(lead_a: str, lead_x: str, rows: int, depth: int, dtype: str) -> str:
    t = dtype
    batch = 3
    shape_a = ("" if lead_a == "none" else f"{batch}x") + f"{rows}x{depth}x{t}"
    shape_x = ("" if lead_x == "none" else f"{batch}x") + f"{depth}x{t}"
    return "\n".join(
        [
            f"func.func @main(%A: memref<{shape_a}>, %X: memref<{shape_x}>,"
            f" %Y: memref<{batch}x{rows}x{t}>) {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            f"  %nb = arith.constant {batch} : index",
            f"  %ni = arith.constant {rows} : index",
            f"  %nk = arith.constant {depth} : index",
            "  scf.for %b = %c0 to %nb step %c1 {",
            "    scf.for %i = %c0 to %ni step %c1 {",
            f"      %y0 = memref.load %Y[%b, %i] : memref<{batch}x{rows}x{t}>",
            f"      %s = scf.for %k = %c0 to %nk step %c1 iter_args(%acc = %y0) -> ({t}) {{",
            f"        %a = memref.load %A[{_LEADS[lead_a]}%i, %k] : memref<{shape_a}>",
            f"        %x = memref.load %X[{_LEADS[lead_x]}%k] : memref<{shape_x}>",
            f"        %p = arith.mulf %a, %x : {t}",
            f"        %q = arith.subf %acc, %p : {t}",
            f"        scf.yield %q : {t}",
            "      }",
            f"      memref.store %s, %Y[%b, %i] : memref<{batch}x{rows}x{t}>",
            "    }",
            "  }",
            "  return",
            "}",
            "",
        ]
    )


@needs_llvm
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lead_a=st.sampled_from(sorted(_LEADS)),
    lead_x=st.sampled_from(sorted(_LEADS)),
    rows=st.sampled_from([1, 4, 9, 17]),
    depth=st.sampled_from([0, 1, 3, 8, 11]),
    dtype=st.sampled_from(["f32", "f64"]),
)
@example(lead_a="b", lead_x="const", rows=9, depth=11, dtype="f64")
def test_row_lanes_with_leading_fixed_subscripts_are_exact(
    lead_a: str, lead_x: str, rows: int, depth: int, dtype: str
) -> None:
    """Row sums whose reads of A lead with a batch index or a constant take the vector
    lanes; every form gives the interpreter's bits, signs of zeros too."""
    text = _led_row_sums(lead_a, lead_x, rows, depth, dtype)
    module = parse_string(text)
    drop_code(module, "main")
    decisions = [d.text for d in optimize_bodies(module, 256)]
    # With `A[i, k]` and `x[b, k]` the batch may be the rows and `i` the columns instead.
    if lead_a != "none":
        assert any("run in vector lanes" in d for d in decisions), decisions
    rng = np.random.default_rng(rows * 100 + depth)
    kind = np.float64 if dtype == "f64" else np.float32
    batch = 3
    shapes = [
        (rows, depth) if lead_a == "none" else (batch, rows, depth),
        (depth,) if lead_x == "none" else (batch, depth),
        (batch, rows),
    ]
    inputs = [np.asarray(rng.standard_normal(s)).astype(kind) for s in shapes]
    want = dhir.run(text, *inputs, backend="interp", ranks=1)[2]
    got = dhir.run(text, *inputs, backend="native", ranks=1)[2]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize(
    ("kind", "order", "want"),
    [
        ("gemm2", ("i", "j", "k", "l"), "nest (i-k-j) "),
        ("gemm2", ("l", "k", "j", "i"), "nest (i-k-j) "),
        ("sum2", ("k", "i", "l"), "sums of 4 rows run in vector lanes"),
    ],
)
def test_a_generic_with_two_reductions_gets_a_kernel(
    kind: str, order: tuple[str, ...], want: str
) -> None:
    """A generic summing over two dimensions is written as its loops (the first
    reduction outermost, so that each element's updates run up both in the generic's
    order) and takes a kernel; it was left to MLIR's lowering ("without exactly one
    output and one reduction dimension")."""
    sizes = (("i", 9), ("j", 37), ("k", 3), ("l", 5))
    product = Product(kind, order, tuple(s for s in sizes if s[0] in order))
    (decision,) = _decisions(product)
    assert decision.startswith(want) and decision.endswith("exact"), decision
