"""dhir-optimize-bodies: what it rewrites, what it leaves and why, and that a rewritten nest
computes bit for bit what the interpreter (the sequential oracle) computes."""

import re
from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region

import dhir
from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.dialects import affine, arith, func, linalg, scf, vector
from dhir.ir.walk import find_ops
from dhir.toolchain.build import Timing
from dhir.toolchain.cpu import cpu_facts
from dhir.toolchain.options import RunOptions
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.blas import SYMBOLS
from dhir.transforms.condition_bounds import fold_conditions
from dhir.transforms.optimize_bodies import optimize_bodies

# --- random contraction nests -------------------------------------------------------------

OPS = ("addf", "subf", "mulf", "divf", "maximumf")
# How a generated program ends: the row loop, the task, the schedule, the function.
END = ["      }", "    }", "  }", "  return", "}"]
# `inner` is computed in the row loop, before the nest: the row loop then cannot be cut
# in three, and the kernel runs row block by row block.
# `t` is T[j, k], read down a column: the optimizer copies T transposed first.
LEAVES = ("acc", "a", "b", "d", "alpha", "inner")
# Scalars as written in each type: -0.0 keeps its sign through the program's adds only where
# the kernel adds as the program does; inf and NaN make infinities and NaNs the kernel must
# carry to the same elements.
SCALARS = {
    "1.5": ("1.5", "1.5"),
    "-0.0": ("-0.0", "-0.0"),
    "0.0": ("0.0", "0.0"),
    "inf": ("0x7FF0000000000000", "0x7F800000"),
    "nan": ("0x7FF8000000000000", "0x7FC00000"),
}
SPECIAL = (np.nan, np.inf, -np.inf, -0.0, 0.0)
NEST_LEAVES = (*LEAVES, "t")


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0, leaves: tuple[str, ...] = LEAVES) -> object:
    if depth >= 3 or (depth > 0 and draw(st.booleans())):
        return draw(st.sampled_from(leaves))
    op = draw(st.sampled_from(OPS))
    return (op, draw(expressions(depth + 1, leaves)), draw(expressions(depth + 1, leaves)))


@dataclass(frozen=True)
class Nest:
    """A row loop over C's rows holding a contraction nest, and what may come with it."""

    dtype: str
    ni: int
    nj: int
    nk: int
    i_lo: int
    j_lo: int
    k_lo: int
    k_step: int
    carried: bool
    expr: object
    scale_first: bool  # a loop scaling row i of C before the nest
    add_after: bool  # a loop adding row i of D to C's after it
    init: str  # carried form: the accumulator's start: "c", "zero", "scaled"
    # Column bounds that move with the row: j from i + lo_row, to slope * i + hi_row (a
    # triangle; a trapezoid widening with the row where slope is 2).
    lo_row: int | None = None
    hi_row: int | None = None
    slope: int = 1
    # The scalars alpha and zero (a key of SCALARS), and whether the inputs hold NaNs,
    # infinities and zeros of both signs.
    alpha: str = "1.5"
    zero: str = "0.0"
    special: bool = False
    # Written with affine.for, affine.load and affine.store (the column bounds as maps of
    # the row): what PolyBench's programs hold.
    affine: bool = False
    # Affine only: the row loop as written by a user who tiles or parallelises it ("for";
    # "tiles": tiles of 3 rows, each `%i = %ii to min(%ii + 3, ni)`; "parallel": an
    # affine.parallel), and an affine.prefetch of B's next row in the column loop.
    rows: str = "for"
    prefetch: bool = False
    # Affine only, with column bounds that move with the row: the columns written as the
    # square [0, nj) whose body runs under an affine.if of those bounds.
    guarded: bool = False
    # Guarded only: each bound's negation as a condition with an empty body, the rest in
    # its else branch (`if (j < lo) {} else { if (j > hi) {} else {...} }`).
    negated: bool = False
    # scf only: each loop without iter_args written as an scf.while that counts.
    whiles: bool = False

    def text(self) -> str:
        t, ni, nj, nk = self.dtype, self.ni, self.nj, self.nk
        lines = [
            f"func.func @main(%C: memref<{ni}x{nj}x{t}>, %A: memref<{ni}x{nk}x{t}>, "
            f"%B: memref<{nk}x{nj}x{t}>, %D: memref<{ni}x{nj}x{t}>, "
            f"%T: memref<{nj}x{nk}x{t}>) {{",
            "  dhir.schedule %C, %A, %B, %D, %T {",
            '    %cpu = dhir.target {kind = "cpu"}',
            "    %task = dhir.task %cpu, %C, %A, %B, %D, %T {",
            "      %c0 = arith.constant 0 : index",
            "      %c1 = arith.constant 1 : index",
            f"      %ilo = arith.constant {self.i_lo} : index",
            f"      %jlo = arith.constant {self.j_lo} : index",
            f"      %klo = arith.constant {self.k_lo} : index",
            f"      %kstep = arith.constant {self.k_step} : index",
            f"      %ni = arith.constant {ni} : index",
            f"      %nj = arith.constant {nj} : index",
            f"      %nk = arith.constant {nk} : index",
            f"      %alpha = arith.constant {self._scalar(self.alpha)} : {t}",
            f"      %zero = arith.constant {self._scalar(self.zero)} : {t}",
            f"      %clo = arith.constant {self.lo_row or 0} : index",
            f"      %chi = arith.constant {self.hi_row or 0} : index",
            f"      %slope = arith.constant {self.slope} : index",
            *self._rows(),
            f"        %inner = arith.mulf %alpha, %alpha : {t}",
            *(self._row_loop("mulf", "%alpha") if self.scale_first else []),
            *(self._carried() if self.carried else self._memory()),
            *(self._row_loop("addf", "%dv") if self.add_after else []),
            *(["      }"] if self.affine and self.rows == "tiles" else []),
            *END,
        ]
        text = "\n".join(lines)
        if self.whiles and not self.affine:
            text = _as_whiles(text)
        if self.affine:
            text = text.replace("memref.load", "affine.load").replace(
                "memref.store", "affine.store"
            )
            text = text.replace("scf.yield", "affine.yield")
        return text

    def _for(self, indent: str, iv: str, lo: str, hi: str, step: str, carry: str = "") -> str:
        """A loop header, in the nest's form: an affine.for takes its constant bounds and
        step written out, and the column bounds as maps of the row."""
        if not self.affine:
            return f"{indent}scf.for %{iv} = {lo} to {hi} step {step}{carry} {{"
        constants = {
            "%c0": 0, "%c1": 1, "%ilo": self.i_lo, "%jlo": self.j_lo, "%klo": self.k_lo,
            "%kstep": self.k_step, "%ni": self.ni, "%nj": self.nj, "%nk": self.nk,
        }  # fmt: skip
        maps = {
            "%jl": f"affine_map<(d0) -> (d0 + {self.lo_row})>(%i)",
            "%jh": f"affine_map<(d0) -> (d0 * {self.slope} + {self.hi_row})>(%i)",
        }
        bound = {**{k: str(v) for k, v in constants.items()}, **maps}
        return f"{indent}affine.for %{iv} = {bound[lo]} to {bound[hi]} step {constants[step]}{carry} {{"

    def _rows(self) -> list[str]:
        row = self._for("      ", "i", "%ilo", "%ni", "%c1")
        if not self.affine or self.rows == "for":
            return [row]
        if self.rows == "parallel":
            return [f"      affine.parallel (%i) = ({self.i_lo}) to ({self.ni}) {{"]
        tile = "affine_map<(d0) -> (d0)>(%ii) to min affine_map<(d0) -> (d0 + 3, "
        return [
            f"      affine.for %ii = {self.i_lo} to {self.ni} step 3 {{",
            f"      affine.for %i = {tile}{self.ni})>(%ii) {{",
        ]

    def _hint(self, indent: str) -> list[str]:
        if not (self.affine and self.prefetch):
            return []
        kind = f"memref<{self.nk}x{self.nj}x{self.dtype}>"
        return [f"{indent}affine.prefetch %B[%k + 1, %j], read, locality<3>, data : {kind}"]

    def _scalar(self, name: str) -> str:
        return SCALARS[name][0 if self.dtype == "f64" else 1]

    def _row_loop(self, op: str, operand: str) -> list[str]:
        t, nj = self.dtype, self.nj
        return [
            self._for("        ", "jr", "%c0", "%nj", "%c1"),
            f"          %cv = memref.load %C[%i, %jr] : memref<{self.ni}x{nj}x{t}>",
            f"          %dv = memref.load %D[%i, %jr] : memref<{self.ni}x{nj}x{t}>",
            f"          %nv = arith.{op} %cv, {operand} : {t}",
            f"          memref.store %nv, %C[%i, %jr] : memref<{self.ni}x{nj}x{t}>",
            "        }",
        ]

    def _loads(self, indent: str) -> list[str]:
        t, ni, nj, nk = self.dtype, self.ni, self.nj, self.nk
        down = [f"{indent}%t = memref.load %T[%j, %k] : memref<{nj}x{nk}x{t}>"]
        return [
            f"{indent}%a = memref.load %A[%i, %k] : memref<{ni}x{nk}x{t}>",
            f"{indent}%b = memref.load %B[%k, %j] : memref<{nk}x{nj}x{t}>",
            f"{indent}%d = memref.load %D[%i, %j] : memref<{ni}x{nj}x{t}>",
            *(down if _uses(self.expr, "t") else []),
        ]

    def _columns(self, indent: str) -> tuple[list[str], str]:
        """The column loop's bounds (computed where they are used) and its header."""
        lines, lo, hi = [], "%jlo", "%nj"
        if self.affine and self._guard():
            lo = "%c0" if self.lo_row is not None else lo
            return [], f"{self._for(indent, 'j', lo, hi, '%c1')}\n{self._guard()}"
        if self.affine:
            lo = "%jl" if self.lo_row is not None else lo
            hi = "%jh" if self.hi_row is not None else hi
            return [], self._for(indent, "j", lo, hi, "%c1")
        if self.lo_row is not None:
            lines.append(f"{indent}%jl = arith.addi %i, %clo : index")
            lo = "%jl"
        if self.hi_row is not None:
            row = "%i"
            if self.slope != 1:
                lines.append(f"{indent}%js = arith.muli %i, %slope : index")
                row = "%js"
            lines.append(f"{indent}%jh = arith.addi %chi, {row} : index")
            hi = "%jh"
        return lines, f"{indent}scf.for %j = {lo} to {hi} step %c1 {{"

    def _guard(self) -> str:
        """The guarded columns' affine.if (empty where the columns are not guarded), or
        the nested ones of their negations."""
        bounds = []
        if self.lo_row is not None:
            bounds.append((f"d1 - d0 - {self.lo_row} >= 0", f"d0 + {self.lo_row - 1} - d1 >= 0"))
        if self.hi_row is not None:
            bound = f"d0 * {self.slope} + {self.hi_row - 1} - d1 >= 0"
            bounds.append((bound, f"d1 - d0 * {self.slope} - {self.hi_row} >= 0"))
        if not (self.guarded and self.affine and bounds):
            return ""
        if self.negated:
            return "\n".join(
                f"affine.if affine_set<(d0, d1) : ({negation})>(%i, %j) {{\n}} else {{"
                for _, negation in bounds
            )
        held = ", ".join(bound for bound, _ in bounds)
        return f"affine.if affine_set<(d0, d1) : ({held})>(%i, %j) {{"

    def _unguard(self, indent: str) -> list[str]:
        """The lines closing `_guard`'s conditions."""
        return [f"{indent}}}"] * self._guard().count("affine.if")

    def _expr(self, indent: str, lines: list[str]) -> str:
        counter = [0]

        def emit(node: object) -> str:
            if isinstance(node, str):
                return f"%{node}"
            op, left, right = node  # type: ignore[misc]
            first, second = emit(left), emit(right)
            counter[0] += 1
            lines.append(f"{indent}%e{counter[0]} = arith.{op} {first}, {second} : {self.dtype}")
            return f"%e{counter[0]}"

        return emit(self.expr)

    def _memory(self) -> list[str]:
        t, ni, nj = self.dtype, self.ni, self.nj
        bounds, header = self._columns("          ")
        lines = [
            self._for("        ", "k", "%klo", "%nk", "%kstep"),
            *bounds,
            header,
            f"            %acc = memref.load %C[%i, %j] : memref<{ni}x{nj}x{t}>",
            *self._hint("            "),
            *self._loads("            "),
        ]
        result = self._expr("            ", lines)
        lines += [
            f"            memref.store {result}, %C[%i, %j] : memref<{ni}x{nj}x{t}>",
            *self._unguard("          "),
            "          }",
            "        }",
        ]
        return lines

    def _carried(self) -> list[str]:
        t, ni, nj = self.dtype, self.ni, self.nj
        start = {"c": "%c_ij", "zero": "%zero", "scaled": "%scaled"}[self.init]
        bounds, header = self._columns("        ")
        lines = [
            *bounds,
            header,
            f"          %c_ij = memref.load %C[%i, %j] : memref<{ni}x{nj}x{t}>",
            f"          %scaled = arith.mulf %c_ij, %alpha : {t}",
            self._for(
                "          %s = ",
                "k",
                "%klo",
                "%nk",
                "%kstep",
                f" iter_args(%acc = {start}) -> ({t})",
            ),
            *self._hint("            "),
            *self._loads("            "),
        ]
        result = self._expr("            ", lines)
        lines += [
            f"            scf.yield {result} : {t}",
            "          }",
            f"          %out = arith.addf %s, %c_ij : {t}",
            f"          memref.store %out, %C[%i, %j] : memref<{ni}x{nj}x{t}>",
            *self._unguard("        "),
            "        }",
        ]
        return lines

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        shapes = [(self.ni, self.nj), (self.ni, self.nk), (self.nk, self.nj), (self.ni, self.nj)]
        shapes.append((self.nj, self.nk))
        kind = np.float64 if self.dtype == "f64" else np.float32
        arrays = [rng.standard_normal(shape).astype(kind) for shape in shapes]
        if self.special:
            for array in arrays:
                planted = rng.random(array.shape) < 0.15
                array[planted] = rng.choice(SPECIAL, size=int(planted.sum()))
        return arrays


@st.composite
def nests(draw: st.DrawFn) -> Nest:
    nk = draw(st.integers(0, 6))
    ni = draw(st.integers(1, 10))
    lo_row = draw(st.none() | st.integers(0, 2))
    hi_row = draw(st.none() | st.integers(0, 3))
    slope = draw(st.integers(1, 2)) if hi_row is not None else 1
    nj = draw(st.integers(1, 72))
    if hi_row is not None:
        nj = max(nj, slope * (ni - 1) + hi_row)
    # An update of the accumulator, on either side, by an expression of the rest.
    expr = draw(
        st.tuples(st.sampled_from(OPS), expressions(1, NEST_LEAVES)).flatmap(
            lambda pair: st.sampled_from([(pair[0], "acc", pair[1]), (pair[0], pair[1], "acc")])
        )
    )
    if _uses(expr, "t"):
        # Reads down a column take columns that start with the row loop, and a row loop
        # that can be cut in three (no value from before the nest used in it).
        lo_row, expr = None, _renamed(expr, "inner", "alpha")
    # Such reads are copied into panels by the row block; a parallel or tiled row loop
    # runs each row (or tile) alone.
    shapes = ["for"] if _uses(expr, "t") else ["for", "tiles", "parallel"]
    return Nest(
        dtype=draw(st.sampled_from(["f64", "f32"])),
        ni=ni,
        nj=nj,
        nk=nk,
        i_lo=draw(st.integers(0, 2)),
        j_lo=draw(st.integers(0, 3)),
        k_lo=draw(st.integers(0, 1)),
        k_step=draw(st.integers(1, 2)),
        carried=draw(st.booleans()),
        expr=expr,
        scale_first=draw(st.booleans()),
        add_after=draw(st.booleans()),
        init=draw(st.sampled_from(["c", "zero", "scaled"])),
        lo_row=lo_row,
        hi_row=hi_row,
        slope=slope,
        alpha=draw(st.sampled_from(sorted(SCALARS))),
        zero=draw(st.sampled_from(["0.0", "-0.0"])),
        special=draw(st.booleans()),
        affine=draw(st.booleans()),
        rows=draw(st.sampled_from(shapes)),
        prefetch=draw(st.booleans()),
        guarded=draw(st.booleans()),
        negated=draw(st.booleans()),
        whiles=draw(st.booleans()),
    )


def _as_whiles(text: str) -> str:
    """Each `scf.for` of `text` without iter_args as an `scf.while` counting the same."""
    lines = text.split("\n")
    for at in reversed(range(len(lines))):
        found = re.match(r"^(\s*)scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+) \{$", lines[at])
        if not found:
            continue
        pad, iv, lo, hi, step = found.groups()
        end = lines.index(pad + "}", at)
        name = f"%w{at}"
        lines[at : end + 1] = [
            f"{pad}{name} = scf.while ({name}_i = {lo}) : (index) -> index {{",
            f"{pad}  {name}_c = arith.cmpi slt, {name}_i, {hi} : index",
            f"{pad}  scf.condition({name}_c) {name}_i : index",
            f"{pad}}} do {{",
            f"{pad}^bb0({iv}: index):",
            *lines[at + 1 : end],
            f"{pad}  {name}_n = arith.addi {iv}, {step} : index",
            f"{pad}  scf.yield {name}_n : index",
            f"{pad}}}",
        ]
    return "\n".join(lines)


def _uses(expr: object, leaf: str) -> bool:
    if isinstance(expr, str):
        return expr == leaf
    return any(_uses(part, leaf) for part in expr[1:])  # type: ignore[index]


def _renamed(expr: object, old: str, new: str) -> object:
    if isinstance(expr, str):
        return new if expr == old else expr
    op, left, right = expr  # type: ignore[misc]
    return (op, _renamed(left, old, new), _renamed(right, old, new))


def _decisions(text: str, bits: int = 512) -> list[str]:
    return [d.line() for d in optimize_bodies(parse_string(text), bits) if d.done]


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    nest=nests(),
    ranks=st.integers(1, 2),
    cpu=st.sampled_from(["native", "haswell", "x86-64"]),
    seed=st.integers(0, 2**16),
    threads=st.sampled_from([1, 3]),
)
def test_optimized_nests_equal_the_interpreter(
    nest: Nest, ranks: int, cpu: str, seed: int, threads: int
) -> None:
    """Random nests (both forms, bounds, steps, expressions, statements around them, f32
    and f64, vectors of 128 to 512 bits, scalars and inputs with NaNs, infinities and
    zeros of both signs): rewritten, and bit for bit what the interpreter computes (NaNs
    where it has NaNs), whether the rank's threads share the blocks or one runs them all."""
    text = nest.text()
    assert _decisions(text), "the generated nest must be one the optimizer rewrites"
    inputs = nest.inputs(seed)
    _assert_native_equals_interp(text, inputs, ranks, cpu, threads)


def _assert_native_equals_interp(
    text: str, inputs: list[np.ndarray], ranks: int, cpu: str, threads: int
) -> None:
    """The native build of `text` on `ranks` ranks of `threads` threads gives what the
    interpreter gives, bit for bit."""
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, cpu=cpu, threads=threads)
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)
        # assert_array_equal takes -0.0 for 0.0; a NaN's sign and payload are not the
        # program's to say (the interpreter's and the CPU's NaNs differ), a zero's sign is.
        numbers = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[numbers]), np.signbit(expected[numbers]))


# --- what it rewrites and what it leaves --------------------------------------------------

GEMM = Nest(
    "f64", 9, 37, 5, 0, 0, 0, 1, False, ("addf", "acc", ("mulf", "a", "b")), True, False, "c"
)


def test_rewrites_gemm_in_both_forms_for_the_vector_width() -> None:
    for carried in (False, True):
        text = Nest(**{**GEMM.__dict__, "carried": carried}).text()
        (wide,) = _decisions(text, 512)
        assert "4 rows x 32 columns (4 vectors of 8 x f64)" in wide
        (narrow,) = _decisions(text, 256)
        assert "4 rows x 8 columns (2 vectors of 4 x f64)" in narrow


def test_affine_nests_are_rewritten_as_their_scf_forms() -> None:
    """An i-k-j gemm and a k-innermost one (iter_args), with columns bounded by the row
    or not, written with affine.for, affine.load and affine.store: made scf first (as
    --lower-affine makes them), then rewritten as the same nests written with scf.for."""
    for carried, lo_row, hi_row in [(False, None, None), (True, None, None), (False, 1, 2)]:
        written = replace(GEMM, carried=carried, lo_row=lo_row, hi_row=hi_row)
        want = [d.text for d in optimize_bodies(parse_string(written.text()), 256)]
        got = optimize_bodies(parse_string(replace(written, affine=True).text()), 256)
        assert want and [d.text for d in got] == want
        assert all(d.done for d in got)


def test_a_triangle_written_as_a_condition_in_a_square_is_the_triangle() -> None:
    """Columns bounded by the row written as a square whose body runs under an affine.if
    (syr2k's `j <= i` as PolyBench users write it): the condition becomes the column
    loop's bounds, the nest is rewritten as the triangle written with bounds is, and the
    result is the interpreter's bit for bit on 1 and 2 ranks."""
    for carried, lo_row, hi_row, rows in [
        (False, None, 1, "for"),
        (True, None, 1, "for"),
        (False, 1, 2, "tiles"),
        (True, 0, 3, "parallel"),
    ]:
        bounded = replace(GEMM, carried=carried, lo_row=lo_row, hi_row=hi_row, affine=True)
        bounded = replace(bounded, rows=rows)
        want = [d.text for d in optimize_bodies(parse_string(bounded.text()), 256)]
        # The bounds written as conditions, or as their negations with the body in the
        # else branches.
        guarded = replace(bounded, guarded=True, negated=carried)
        assert "affine.if" in guarded.text()
        got = optimize_bodies(parse_string(guarded.text()), 256)
        assert want and [d.text for d in got] == want
        assert all(d.done for d in got), got
        for ranks in (1, 2):
            _assert_native_equals_interp(guarded.text(), guarded.inputs(7), ranks, "native", 1)


def _guarded_square(columns: str, condition: str, otherwise: bool = False) -> str:
    """A square over C whose body runs under `condition`, and (`otherwise`) another body
    in its else branch."""
    other = """
      } else {
        %e = affine.load %C[%i, %j] : memref<10x12xf64>
        %f = arith.mulf %e, %e : f64
        affine.store %f, %C[%i, %j] : memref<10x12xf64>"""
    return f"""
func.func @main(%C: memref<10x12xf64>) {{
  %c1 = arith.constant 1 : index
  %n = memref.dim %C, %c1 : memref<10x12xf64>
  affine.for %i = 0 to 10 {{
    affine.for %j = {columns} {{
      affine.if affine_set<{condition}>(%i, %j)[%n] {{
        %c = affine.load %C[%i, %j] : memref<10x12xf64>
        %d = arith.addf %c, %c : f64
        affine.store %d, %C[%i, %j] : memref<10x12xf64>{other if otherwise else ""}
      }}
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize(
    ("columns", "condition", "header"),
    [
        # Implied bounds dropped: i + 1 <= 12 for every i < 10; i + 2 >= 0.
        ("0 to 12", "(d0, d1)[s0] : (d0 - d1 >= 0)", "(0)>(%i) to affine_map<(d0) -> ((d0 + 1))>"),
        (
            "0 to 12",
            "(d0, d1)[s0] : (d1 - d0 - 2 >= 0)",
            "((d0 + 2))>(%i) to affine_map<(d0) -> (12)>",
        ),
        # Not implied (i + 1 > 5 for i >= 5; n is not known): kept, as a min or max.
        ("0 to 5", "(d0, d1)[s0] : (d0 - d1 >= 0)", "min affine_map<(d0) -> (5, (d0 + 1))>"),
        ("0 to 12", "(d0, d1)[s0] : (s0 - d1 - 1 >= 0)", "min affine_map<(d0) -> (12, d0)>"),
        ("0 to 12", "(d0, d1)[s0] : (d1 - d0 + 3 >= 0)", "max affine_map<(d0) -> (0, (d0 + -3))>"),
        # An equality: both bounds.
        ("0 to 12", "(d0, d1)[s0] : (d1 - d0 == 0)", "(d0)>(%i) to affine_map<(d0) -> ((d0 + 1))>"),
        # A coefficient other than 1: the bound divided, rounded inward.
        ("0 to 12", "(d0, d1)[s0] : (d0 - d1 * 2 >= 0)", "(12, ((d0 floordiv 2) + 1))>"),
        ("0 to 12", "(d0, d1)[s0] : (d1 * 3 - d0 + 1 >= 0)", "max affine_map<(d0) -> (0, ("),
        # Left: a step of 2, a constraint free of j.
        ("0 to 12 step 2", "(d0, d1)[s0] : (d0 - d1 >= 0)", None),
        ("0 to 12", "(d0, d1)[s0] : (d0 - d1 >= 0, d0 - 3 >= 0)", None),
    ],
)
def test_a_condition_on_the_column_becomes_its_bounds_only_where_exact(
    columns: str, condition: str, header: str | None
) -> None:
    """The affine.if that is a loop's whole body becomes its bounds where every
    constraint bounds the loop's counter and the step is 1 (a bound another always
    implies is dropped; one not implied is kept; a coefficient other than 1 or -1 divides
    the bound); otherwise the condition stays. Either way the result is the interpreter's
    bit for bit."""
    text = _guarded_square(columns, condition)
    module = parse_string(text)
    outer = next(op for op in module.walk() if isinstance(op, affine.ForOp))
    fold_conditions(outer)
    printed = str(module)
    assert ("affine.if" in printed) == (header is None), printed
    if header is not None:
        (line,) = [line for line in printed.split("\n") if "affine.for %j" in line]
        assert header in line, line
    inputs = [np.random.default_rng(1).standard_normal((10, 12))]
    _assert_native_equals_interp(text, inputs, 1, "native", 1)


@pytest.mark.parametrize(
    ("condition", "headers"),
    [
        # The condition's run [0, i + 1), then the else body's [i + 1, 12).
        ("(d0 - d1 >= 0)", ["(0)>(%i) to affine_map<(d0) -> ((d0 + 1))>", "((d0 + 1))>(%i) to"]),
        # Else before the run, the run, else after it: the bounds both sides.
        (
            "(d1 - d0 - 2 >= 0, d0 + 4 - d1 >= 0)",
            [
                "(0)>(%i) to affine_map<(d0) -> ((d0 + 2))>",
                "((d0 + 2))>(%i) to min affine_map<(d0) -> (12, (d0 + 5))>",
                "((d0 + 5))>(%i) to affine_map<(d0) -> (12)>",
            ],
        ),
        (
            "(d1 - d0 == 0)",
            [
                "(0)>(%i) to affine_map<(d0) -> (d0)>",
                "(d0)>(%i) to affine_map<(d0) -> ((d0 + 1))>",
                "((d0 + 1))>(%i) to affine_map<(d0) -> (12)>",
            ],
        ),
        ("(d0 - d1 * 2 >= 0)", ["floordiv 2) + 1))>", "max affine_map<(d0) -> (0, ((d0"]),
        # Two bounds on one side: no single run's ends to cut at.
        ("(d1 - d0 >= 0, d1 - 3 >= 0)", None),
    ],
)
def test_a_condition_with_an_else_branch_cuts_the_loop_at_its_ends(
    condition: str, headers: list[str] | None
) -> None:
    """An affine.if with an else branch that is a loop's whole body: the loop runs the
    else body before the condition's run of counters, the condition's body in it, the
    else body after it (one loop each, in order), bit for bit the interpreter's."""
    text = _guarded_square("0 to 12", f"(d0, d1)[s0] : {condition}", otherwise=True)
    module = parse_string(text)
    outer = next(op for op in module.walk() if isinstance(op, affine.ForOp))
    fold_conditions(outer)
    printed = str(module)
    lines = [line for line in printed.split("\n") if "affine.for %j" in line]
    if headers is None:
        assert "affine.if" in printed and len(lines) == 1, printed
    else:
        assert "affine.if" not in printed and len(lines) == len(headers), printed
        for line, header in zip(lines, headers, strict=True):
            assert header in line, printed
    inputs = [np.random.default_rng(1).standard_normal((10, 12))]
    _assert_native_equals_interp(text, inputs, 1, "native", 1)


def test_an_outermost_loop_is_cut_by_its_condition_only_into_one() -> None:
    """A nest's own loop stays one op: its condition with a body on both sides stays;
    one whose then body is empty takes the else body's run as its bounds."""
    for then, header in [(ONE_STORE, None), ("", "affine.for %j = 0 to 5 {")]:
        text = f"""
func.func @main(%C: memref<12xf64>) {{
  affine.for %j = 0 to 12 {{
    affine.if affine_set<(d0) : (d0 - 5 >= 0)>(%j) {{{then}
    }} else {{
      %v = affine.load %C[%j] : memref<12xf64>
      %w = arith.mulf %v, %v : f64
      affine.store %w, %C[%j] : memref<12xf64>
    }}
  }}
  return
}}
"""
        module = parse_string(text)
        loop = next(op for op in module.walk() if isinstance(op, affine.ForOp))
        folded = fold_conditions(loop)
        assert ("affine.if" in str(module)) == (header is None), str(module)
        assert header is None or header in str(folded), str(folded)
        inputs = [np.random.default_rng(2).standard_normal(12)]
        _assert_native_equals_interp(text, inputs, 1, "native", 1)


ONE_STORE = """
      %x = arith.constant 1.0 : f64
      affine.store %x, %C[%j] : memref<12xf64>"""


def test_a_condition_scaling_the_column_says_why_its_nest_is_left() -> None:
    """A triangle written as `2 j <= i` in a square: the condition becomes a bound that
    divides (`i floordiv 2 + 1`), which the i-k-j kernel does not take, and `--timing`
    says so; the nest in either form computes what the interpreter computes."""
    for carried in (False, True):
        nest = replace(GEMM, carried=carried, hi_row=1, affine=True, guarded=True)
        text = nest.text().replace("(d0 * 1 + 0 - d1 >= 0)", "(d0 - d1 * 2 >= 0)")
        assert "d1 * 2" in text
        lines = [d.text for d in optimize_bodies(parse_string(text), 256)]
        assert carried or (len(lines) == 1 and "a loop bound is a division" in lines[0]), lines
        for ranks in (1, 2):
            _assert_native_equals_interp(text, nest.inputs(3), ranks, "native", 1)


AFFINE_TILES = """
func.func @main(%A: memref<10x6xf64>, %B: memref<6x12xf64>, %C: memref<10x12xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C {
      affine.for %ii = 0 to 10 step 4 {
        affine.for %i = affine_map<(d0) -> (d0)>(%ii) to min affine_map<(d0) -> (d0 + 4, 10)>(%ii) {
          affine.for %k = 0 to 6 {
            affine.for %j = max affine_map<(d0) -> (0, d0 - 3)>(%i) to 12 {
              %a = affine.load %A[%i, %k] : memref<10x6xf64>
              %b = affine.load %B[%k, (%j * 5 + 1) mod 6] : memref<6x12xf64>
              %c = affine.load %C[%i, %j] : memref<10x12xf64>
              %m = arith.mulf %a, %b : f64
              %s = arith.addf %c, %m : f64
              affine.if affine_set<(d0, d1) : (d1 - d0 >= 0)>(%i, %j) {
                affine.store %s, %C[%i, %j] : memref<10x12xf64>
              } else {
                %n = arith.subf %c, %m : f64
                affine.store %n, %C[%i, %j] : memref<10x12xf64>
              }
            }
          }
        }
      }
      affine.for %i = 0 to 10 {
        affine.for %k = 0 to 6 {
          affine.for %j = affine_map<(d0) -> (d0)>(%i) to 12 {
            %a = affine.load %A[%i, %k] : memref<10x6xf64>
            %b = affine.load %B[%k, %j] : memref<6x12xf64>
            %c = affine.load %C[%i, %j] : memref<10x12xf64>
            %m = arith.mulf %a, %b : f64
            %s = arith.addf %c, %m : f64
            affine.store %s, %C[%i, %j] : memref<10x12xf64>
          }
        }
      }
    }
  }
  return
}
"""


def test_affine_nests_of_maps_sets_and_divisions_stay_exact() -> None:
    """Tiled bounds (min, max), a subscript taken modulo, an affine.if: made scf as
    --lower-affine makes them, what the optimizer then rewrites (the triangle) or leaves
    computes bit for bit what the interpreter computes from the affine form."""
    decisions = optimize_bodies(parse_string(AFFINE_TILES), 256)
    assert [d.done for d in decisions] == [False, True], decisions
    # The tiled nest is looked at and left (its inner body holds a branch), and says so.
    assert (
        decisions[0]
        .line()
        .startswith("<string>:6:7: left as written: no loop in it is a contraction nest")
    )
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(shape) for shape in [(10, 6), (6, 12), (10, 12)]]
    _assert_native_equals_interp(AFFINE_TILES, inputs, 1, "native", 1)


AFFINE_HINTS = """
func.func @main(%A: memref<10x6xf64>, %B: memref<6x12xf64>, %C: memref<10x12xf64>, %N: memref<10xi64>) {
  dhir.schedule %A, %B, %C, %N {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C {
      affine.parallel (%i) = (0) to (10) {
        affine.for %k = 0 to 6 {
          affine.prefetch %B[%k + 1, 0], read, locality<3>, data : memref<6x12xf64>
          affine.for %j = 0 to 12 {
            %a = affine.load %A[%i, %k] : memref<10x6xf64>
            %b = affine.load %B[%k, %j] : memref<6x12xf64>
            %c = affine.load %C[%i, %j] : memref<10x12xf64>
            %m = arith.mulf %a, %b : f64
            %s = arith.addf %c, %m : f64
            affine.store %s, %C[%i, %j] : memref<10x12xf64>
          }
        }
      }
    }
    %u = dhir.task %cpu, %A, %B, %C {
      affine.for %i = 0 to 10 {
        affine.for %k = 0 to 6 {
          affine.for %j = 0 to 12 {
            affine.prefetch %B[%k, %j + 4], read, locality<3>, data : memref<6x12xf64>
            %a = affine.load %A[%i, %k] : memref<10x6xf64>
            %b = affine.load %B[%k, %j] : memref<6x12xf64>
            %c = affine.load %C[%i, %j] : memref<10x12xf64>
            %m = arith.mulf %a, %b : f64
            %s = arith.addf %c, %m : f64
            affine.store %s, %C[%i, %j] : memref<10x12xf64>
          }
        }
      }
    }
    %v = dhir.task %cpu, %N {
      affine.for %i = 0 to 10 {
        %r = affine.parallel (%j) = (0) to (%i + 1) reduce ("addi") -> (i64) {
          %x = arith.index_cast %j : index to i64
          %y = arith.muli %x, %x : i64
          affine.yield %y : i64
        }
        affine.store %r, %N[%i] : memref<10xi64>
      }
    }
  }
  return
}
"""


def test_affine_nests_holding_parallel_loops_and_prefetches_are_optimized_exactly() -> None:
    """An affine.parallel row loop, affine.prefetch hints in the nest, and an
    affine.parallel with an integer reduction: made scf.parallel and memref.prefetch as
    --lower-affine makes them; the gemms are blocked (the hints dropped where the kernel
    runs), the reduction's nest says why it is left, and each result is the
    interpreter's bit for bit on 1 and 2 ranks, on threads."""
    module = parse_string(AFFINE_HINTS)
    decisions = optimize_bodies(module, 256)
    assert [d.done for d in decisions] == [True, True, False], decisions
    assert decisions[2].text.startswith("left as written: no loop in it is a contraction nest")
    assert "affine." not in str(module)
    rng = np.random.default_rng(4)
    shapes = [(10, 6), (6, 12), (10, 12)]
    inputs = [*(rng.standard_normal(s) for s in shapes), np.zeros(10, np.int64)]
    for ranks in (1, 2):
        _assert_native_equals_interp(AFFINE_HINTS, inputs, ranks, "native", 2)


def test_an_affine_parallel_without_an_scf_form_says_why_its_nest_stays() -> None:
    """A reduction --lower-affine cannot lower (no identity to start from) keeps its nest
    affine, and the optimizer says so at it."""
    text = AFFINE_HINTS.replace('reduce ("addi")', 'reduce ("assign")')
    decisions = optimize_bodies(parse_string(text), 256)
    assert decisions[2].line() == (
        "<string>:36:7: left as written: an affine nest holding an affine.parallel reducing "
        "with assign, which has no scf form"
    )


GENERICS = """
#ik = affine_map<(i, j, k) -> (i, k)>
#kj = affine_map<(i, j, k) -> (k, j)>
#ij3 = affine_map<(i, j, k) -> (i, j)>
#ij = affine_map<(i, j) -> (i, j)>
#i = affine_map<(i, j) -> (i)>
#j = affine_map<(i, j) -> (j)>
func.func @main(%A: memref<10x6xf64>, %B: memref<6x12xf64>, %C: memref<10x12xf64>,
                %x: memref<12xf64>, %y: memref<10xf64>, %z: memref<12xf64>) {
  %alpha = arith.constant 1.5 : f64
  linalg.generic {indexing_maps = [#ik, #kj, #ij3],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<10x6xf64>, memref<6x12xf64>) outs(%C : memref<10x12xf64>) {
  ^bb0(%a: f64, %b: f64, %c: f64):
    %s = arith.mulf %alpha, %a : f64
    %p = arith.mulf %s, %b : f64
    %t = arith.addf %c, %p : f64
    linalg.yield %t : f64
  }
  linalg.generic {indexing_maps = [#ij, #j, #i], iterator_types = ["parallel", "reduction"]}
      ins(%C, %x : memref<10x12xf64>, memref<12xf64>) outs(%y : memref<10xf64>) {
  ^bb0(%c: f64, %v: f64, %acc: f64):
    %p = arith.mulf %c, %v : f64
    %t = arith.addf %acc, %p : f64
    linalg.yield %t : f64
  }
  linalg.generic {indexing_maps = [#ij, #i, #j], iterator_types = ["reduction", "parallel"]}
      ins(%C, %y : memref<10x12xf64>, memref<10xf64>) outs(%z : memref<12xf64>) {
  ^bb0(%c: f64, %v: f64, %acc: f64):
    %p = arith.mulf %c, %v : f64
    %t = arith.subf %acc, %p : f64
    linalg.yield %t : f64
  }
  linalg.generic {indexing_maps = [#ij], iterator_types = ["parallel", "parallel"]}
      outs(%C : memref<10x12xf64>) {
  ^bb0(%c: f64):
    %t = arith.mulf %c, %alpha : f64
    linalg.yield %t : f64
  }
  return
}
"""


def test_counted_while_loops_are_read_as_for_loops() -> None:
    """A task's loops written as scf.while loops that count (`while (i < n) {...; i = i +
    1}`) are rewritten as their scf.for twins are, bit for bit the interpreter's."""
    for carried in (False, True):
        written = replace(GEMM, carried=carried, scale_first=True, add_after=True)
        want = [d.text for d in optimize_bodies(parse_string(written.text()), 256)]
        text = replace(written, whiles=True).text()
        assert "scf.while" in text
        assert want and [d.text for d in optimize_bodies(parse_string(text), 256)] == want
    _assert_native_equals_interp(text, written.inputs(6), 2, "native", 1)


def test_generic_contractions_are_optimized_exactly() -> None:
    """A linalg.generic with one reduction dimension (a gemm scaling A by alpha, a row
    sum, a column sum with the reduction outermost) is written as its loops, each
    element's updates in ascending order as the interpreter runs them, and rewritten like
    linalg.matmul; the elementwise one then becomes its loops too (read as nests are:
    this one is left), so that no linalg op is left; alone, it becomes loops whose rows
    are one parallel loop, and says nothing. Bit for bit the interpreter's on 1 and 2
    ranks."""
    module = _host_module(GENERICS)
    decisions = optimize_bodies(module, 256)
    assert [d.done for d in decisions] == [True, True, True, False], decisions
    assert decisions[3].text == "left as written: the row it writes varies inside the nest"
    assert not find_ops(module, linalg.GenericOp)
    start = GENERICS.index("  linalg.generic {indexing_maps = [#ik")
    alone = GENERICS[:start] + GENERICS[GENERICS.index("  linalg.generic {indexing_maps = [#ij]") :]
    module = _host_module(alone)
    assert optimize_bodies(module, 256) == []
    assert not find_ops(module, linalg.GenericOp) and find_ops(module, scf.ParallelOp)
    rng = np.random.default_rng(5)
    shapes = [(10, 6), (6, 12), (10, 12), (12,), (10,), (12,)]
    inputs = [rng.standard_normal(shape) for shape in shapes]
    for ranks in (1, 2):
        _assert_native_equals_interp(GENERICS, inputs, ranks, "native", 1)


def _host_module(text: str, fast_math: str = "none") -> ModuleOp:
    """`text`, a function without schedules, as the native backend hands it to the
    optimizer: its nests and linalg ops wrapped in tasks by CodeDrop, relaxed as asked."""
    from dhir.runner import drop_code
    from dhir.transforms.fast_math import relax

    module = parse_string(text)
    drop_code(module, "main")
    if fast_math != "none":
        relax(module, fast_math)
    return module


def _left(text: str) -> str:
    (decision,) = optimize_bodies(parse_string(text), 256)
    assert not decision.done
    return decision.text


def test_values_computed_per_row_and_k_go_into_a_table_once() -> None:
    """alpha * A[i, k] is computed once per row and k, not once per column block."""
    scaled = Nest(
        **{**GEMM.__dict__, "expr": ("addf", "acc", ("mulf", ("mulf", "alpha", "a"), "b"))}
    )
    (decision,) = _decisions(scaled.text(), 256)
    assert "column blocks outer, 1 value(s) per row and k in a table" in decision
    (plain,) = _decisions(GEMM.text(), 256)
    assert "table" not in plain  # A[i, k] alone is broadcast from A itself
    inputs = scaled.inputs(5)
    want = dhir.run(scaled.text(), *inputs, backend="interp")
    got = dhir.run(scaled.text(), *inputs, ranks=2, cpu="haswell")
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)


def test_leaves_a_nest_writing_other_rows() -> None:
    text = GEMM.text().replace("memref.store %e2, %C[%i, %j]", "memref.store %e2, %C[%c0, %j]")
    assert "other rows" in _left(text)


def test_leaves_a_nest_whose_column_index_is_arithmetic() -> None:
    text = GEMM.text().replace(
        "%b = memref.load %B[%k, %j]",
        "%jj = arith.addi %j, %c0 : index\n%b = memref.load %B[%k, %jj]",
    )
    assert "column index" in _left(text)


def test_leaves_integer_nests() -> None:
    text = GEMM.text().replace("f64", "i64").replace("1.5 : i64", "3 : i64")
    text = text.replace("0.0 : i64", "0 : i64").replace("arith.mulf", "arith.muli")
    text = text.replace("arith.addf", "arith.addi")
    assert "not f32 or f64" in _left(text)


def test_leaves_columns_that_shrink_as_the_row_grows() -> None:
    text = GEMM.text().replace(
        "scf.for %j = %jlo to %nj",
        "%back = arith.subi %nj, %i : index\nscf.for %j = %jlo to %back",
    )
    assert "fall as the row grows" in _left(text)


def test_reads_down_a_column_copy_panels_in_a_triangle() -> None:
    down = ("addf", "acc", ("mulf", "a", "t"))
    nest = Nest(**{**GEMM.__dict__, "expr": down, "hi_row": 1, "nj": 12})
    (done,) = _decisions(nest.text(), 256)
    assert "columns bounded by the row" in done and "%T read down columns" in done
    inputs = nest.inputs(3)
    want = dhir.run(nest.text(), *inputs, backend="interp", ranks=1)
    got = dhir.run(nest.text(), *inputs, backend="native", ranks=1)
    np.testing.assert_array_equal(got[0], want[0])


def test_a_carried_triangle_reading_down_a_column_gets_panels_in_either_form() -> None:
    """syr2k with k innermost in iter_args, written with affine.for (bounds lowered to
    `i + 1` computed in the row loop, before the nest) or as a condition in a square:
    the row loop is cut in three with that bound going with the nest, so the reads down
    a column are copied into panels as in the i-k-j form, and the result stays the
    interpreter's bit for bit."""
    down = ("addf", "acc", ("mulf", "a", "t"))
    for guarded in (False, True):
        nest = replace(GEMM, expr=down, hi_row=1, nj=13, carried=True, affine=True, guarded=guarded)
        nest = replace(nest, scale_first=True, add_after=True)
        (done,) = _decisions(nest.text(), 256)
        assert "k innermost, columns bounded by the row" in done, done
        assert "%T read down columns, copied into panels" in done, done
        for ranks in (1, 2):
            _assert_native_equals_interp(nest.text(), nest.inputs(11), ranks, "native", 3)


def test_leaves_reads_down_a_column_where_columns_start_with_the_row() -> None:
    down = ("addf", "acc", ("mulf", "a", "t"))
    text = Nest(**{**GEMM.__dict__, "expr": down, "lo_row": 0}).text()
    assert "down a column" in _left(text)


def test_leaves_columns_bounded_by_a_product_of_indices() -> None:
    text = GEMM.text().replace(
        "scf.for %j = %jlo to %nj",
        "%sq = arith.muli %i, %i : index\nscf.for %j = %jlo to %sq",
    )
    assert "bounds are not the row times a constant" in _left(text)


def test_leaves_views_of_one_buffer() -> None:
    text = """
func.func @main(%M: memref<8x16xf64>) {
  dhir.schedule %M {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %M {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %top = memref.subview %M[0, 0] [4, 16] [1, 1] : memref<8x16xf64> to memref<4x16xf64, strided<[16, 1]>>
      %low = memref.subview %M[4, 0] [4, 16] [1, 1] : memref<8x16xf64> to memref<4x16xf64, strided<[16, 1], offset: 64>>
      scf.for %i = %c0 to %c4 step %c1 {
        scf.for %k = %c0 to %c4 step %c1 {
          scf.for %j = %c0 to %c8 step %c1 {
            %acc = memref.load %top[%i, %j] : memref<4x16xf64, strided<[16, 1]>>
            %b = memref.load %low[%k, %j] : memref<4x16xf64, strided<[16, 1], offset: 64>>
            %s = arith.addf %acc, %b : f64
            memref.store %s, %top[%i, %j] : memref<4x16xf64, strided<[16, 1]>>
          }
        }
      }
    }
  }
  return
}
"""
    assert "share memory" in _left(text)


def test_vector_width_of_named_cpus() -> None:
    clang = find_llvm_tools().clang
    assert cpu_facts(clang, "x86-64").vector_bits == 128
    assert cpu_facts(clang, "haswell").vector_bits == 256
    assert cpu_facts(clang, "skylake-avx512").vector_bits == 512


def test_a_build_for_a_named_cpu_uses_its_vector_width() -> None:
    """Built for haswell (AVX2), the kernel's vectors are 4 doubles wide in the LLVM IR
    and nothing touches a 512-bit register; built for skylake-avx512, 8 wide."""
    for cpu, lanes in (("haswell", 4), ("skylake-avx512", 8)):
        timing = Timing()
        options = RunOptions(ranks=1, cpu=cpu)
        exe, _ = compile_native(parse_string(GEMM.text()), "main", options, timing)
        (note,) = [n for n in timing.notes if n.startswith("optimizer:")]
        assert f"vectors of {lanes} x f64" in note
        llvm_ir = (exe.parent / "program.ll").read_text()
        assert f"<{lanes} x double>" in llvm_ir


@pytest.mark.parametrize("optimize", [True, False])
def test_gemm_equal_with_and_without_the_optimizer(optimize: bool) -> None:
    inputs = GEMM.inputs(7)
    want = dhir.run(GEMM.text(), *inputs, backend="interp", ranks=1)
    options = RunOptions(ranks=2, optimize=optimize)
    exe, signature = compile_native(parse_string(GEMM.text()), "main", options)
    from dhir.toolchain.launch import run_executable

    got = run_executable(exe, signature, inputs, options)
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 9),
    n=st.integers(1, 40),
    k=st.integers(0, 5),
    dtype=st.sampled_from(["f32", "f64"]),
    cpu=st.sampled_from(["native", "haswell"]),
)
def test_linalg_matmul_becomes_the_kernel_and_stays_exact(
    m: int, n: int, k: int, dtype: str, cpu: str
) -> None:
    text = f"""
func.func @main(%A: memref<{m}x{k}x{dtype}>, %B: memref<{k}x{n}x{dtype}>, %C: memref<{m}x{n}x{dtype}>) {{
  linalg.matmul ins(%A, %B : memref<{m}x{k}x{dtype}>, memref<{k}x{n}x{dtype}>) outs(%C : memref<{m}x{n}x{dtype}>)
  return
}}
"""
    (decision,) = optimize_bodies(_host_module(text), 256)
    assert decision.done and "(i-k-j)" in decision.text
    rng = np.random.default_rng(m * 100 + n)
    kind = np.float64 if dtype == "f64" else np.float32
    inputs = [rng.standard_normal(s).astype(kind) for s in ((m, k), (k, n), (m, n))]
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    got = dhir.run(text, *inputs, backend="native", ranks=1, cpu=cpu)
    np.testing.assert_array_equal(got[2], want[2])


def test_leaves_a_matmul_writing_into_its_input() -> None:
    text = """
func.func @main(%A: memref<4x4xf64>) {
  linalg.matmul ins(%A, %A : memref<4x4xf64>, memref<4x4xf64>) outs(%A : memref<4x4xf64>)
  return
}
"""
    (decision,) = optimize_bodies(_host_module(text), 256)
    assert "may share memory with an input" in decision.text


@st.composite
def products(draw: st.DrawFn) -> object:
    """acc + a product of A[i, k], B[k, j] and 0 to 2 scalars, in any order and shape."""
    factors: list[object] = draw(
        st.permutations(["a", "b", *(["alpha"] * draw(st.integers(0, 2)))])
    )
    while len(factors) > 1:
        at = draw(st.integers(0, len(factors) - 2))
        factors[at : at + 2] = [("mulf", factors[at], factors[at + 1])]
    return draw(st.sampled_from([("addf", "acc", factors[0]), ("addf", factors[0], "acc")]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nest=nests(),
    product=products(),
    ranks=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
def test_reassoc_products_call_blas_within_tolerance(
    nest: Nest, product: object, ranks: int, seed: int
) -> None:
    """With --fast-math=reassoc, C[i, j] += products in i-k-j order become OpenBLAS gemm
    calls (the row loop cut around them), within a tolerance of the exact interpreter."""
    rectangle = {"lo_row": None, "hi_row": None, "slope": 1}
    # Within a tolerance of finite sums: no NaNs or infinities (test below for those).
    rectangle |= {"alpha": "1.5", "special": False}
    # BLAS takes the rows of a row loop (a parallel or tiled one runs each row or tile
    # alone: the exact kernels, tested above).
    rectangle |= {"rows": "for"}
    nest = Nest(**{**nest.__dict__, "carried": False, "expr": product, "k_step": 1, **rectangle})
    text = nest.text()
    module = parse_string(text)
    from dhir.transforms.fast_math import relax

    relax(module, "reassoc")
    (decision,) = optimize_bodies(module, 256)
    assert decision.done and "OpenBLAS" in decision.text, decision.text
    inputs = nest.inputs(seed)
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, fast_math="reassoc")
    _, a, b, _, _ = inputs
    # Each element: a sum of nk products of A, B and alpha (1.5) up to 2.25.
    scale = 2.25 * np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    scale = scale + np.abs(want[0].astype(np.float64)) + 1.0
    tolerance = 1e-12 if nest.dtype == "f64" else 1e-4
    assert np.max(np.abs(got[0] - want[0]) / scale) < tolerance
    for expected, actual in zip(want[1:], got[1:]):
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("alpha", ["0.0", "inf"])
def test_reassoc_products_with_a_zero_or_infinite_factor_keep_nans(alpha: str) -> None:
    """C[i, j] += alpha * A[i, k] * B[k, j] under reassoc, with an inf and a NaN in A. The
    gemm call scales the sum of the products by alpha once: for alpha = 0 OpenBLAS returned
    at once and left C as it was, where the program's products (0 * inf, 0 * NaN) make
    NaNs; for alpha = inf it made infinities where the program's terms, infinities of both
    signs, add up to NaN. reassoc allows another order of the sums, neither of these:
    where the factor is 0 or infinite the nest runs as the exact kernel."""
    product = ("addf", "acc", ("mulf", ("mulf", "alpha", "a"), "b"))
    nest = Nest("f64", 5, 7, 3, 0, 0, 0, 1, False, product, False, False, "c", alpha=alpha)
    text = nest.text()
    module = parse_string(text)
    from dhir.transforms.fast_math import relax

    relax(module, "reassoc")
    (decision,) = optimize_bodies(module, 256)
    assert decision.done and "OpenBLAS" in decision.text, decision.text
    inputs = nest.inputs(3)
    inputs[1][1, 2], inputs[1][3, 0] = np.inf, np.nan
    want = dhir.run(text, *inputs, backend="interp", ranks=1)
    assert np.isnan(want[0][[1, 3]]).all() and np.isnan(want[0]).sum() >= 14
    got = dhir.run(text, *inputs, backend="native", ranks=1, fast_math="reassoc")
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)


def test_linalg_matmul_with_reassoc_calls_blas() -> None:
    text = """
func.func @main(%A: memref<33x17xf64>, %B: memref<17x29xf64>, %C: memref<33x29xf64>) {
  linalg.matmul ins(%A, %B : memref<33x17xf64>, memref<17x29xf64>) outs(%C : memref<33x29xf64>)
  return
}
"""
    # Where C holds a -0, the loops instead (no nsz): the i-k-j nest of matmul's generic
    # form, without flags, which the kernel takes as --fast-math=none gives it.
    decision, loops = optimize_bodies(_host_module(text, "reassoc"), 512)
    assert decision.done and "OpenBLAS gemm" in decision.text and "is -0" in decision.text
    assert loops.done and loops.loc == decision.loc
    assert loops.text.startswith("nest (i-k-j) blocked 4 rows x 32 columns"), loops.text
    assert loops.text.endswith(", exact"), loops.text
    rng = np.random.default_rng(11)
    a, b, c = (rng.standard_normal(s) for s in ((33, 17), (17, 29), (33, 29)))
    want = c + a @ b
    for ranks in (1, 2):
        got = dhir.run(text, a, b, c, ranks=ranks, fast_math="reassoc")[2]
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def _blas_calls(root: Operation | Region) -> list[str]:
    return [
        op.callee.root_reference.data
        for op in root.walk()
        if isinstance(op, func.CallOp) and op.callee.root_reference.data in SYMBOLS
    ]


@pytest.mark.parametrize(
    ("name", "shapes"),
    [
        ("matmul", [(7, 11), (11, 21), (7, 21)]),
        ("batch_matmul", [(3, 7, 11), (3, 11, 21), (3, 7, 21)]),
        ("vecmat", [(11,), (11, 21), (21,)]),
    ],
)
def test_the_loops_behind_a_named_ops_blas_call_are_not_taken_for_one_again(
    name: str, shapes: list[tuple[int, ...]]
) -> None:
    """Under reassoc without nsz a named product calls BLAS where its output holds no -0,
    else runs its loops. Those loops kept the flags: the optimizer took them for an i-k-j
    product again and put a second scan for -0 and a gemm call behind the first scan,
    a call that never ran (the scan finds the -0 that chose the loops), or blocked them
    with the flags (FMAs allowed). They are now the exact kernel: one call, one scan,
    and a fallback whose adds and multiplies carry no flags."""
    module = _host_module(_named_text(name, shapes, "f64"), "reassoc")
    call, loops = optimize_bodies(module, 256)
    assert "OpenBLAS" in call.text and "else the exact loops" in call.text, call.text
    assert loops.done and "OpenBLAS" not in loops.text and loops.text.endswith(", exact")
    assert len(_blas_calls(module)) == 1, _blas_calls(module)
    assert sum(isinstance(op, arith.BitcastOp) for op in module.walk()) == 1
    (loops_region,) = [
        region
        for op in module.walk()
        if isinstance(op, scf.IfOp) and op.false_region.blocks
        for region, other in ((op.true_region, op.false_region), (op.false_region, op.true_region))
        if _blas_calls(other) and not _blas_calls(region)
    ]
    flagged = [op for op in loops_region.walk() if isinstance(op, arith.AddfOp | arith.MulfOp)]
    assert flagged and all(set(op.fastmath.data) <= {"none"} for op in flagged)


OTHER_BODIES = {
    "out - in0 * in1": ("mulf %a, %b", "subf %c, %p"),
    "out + in0 * in0": ("mulf %a, %a", "addf %c, %p"),
    "out + in0 + in1": ("addf %a, %b", "addf %c, %p"),
    "out * (in0 * in1)": ("mulf %a, %b", "mulf %c, %p"),
}


@pytest.mark.parametrize("body", OTHER_BODIES)
def test_a_matmul_with_another_body_keeps_it_under_reassoc(body: str) -> None:
    """linalg.matmul written in generic form with a body other than out + in0 * in1: the
    interpreter runs that body, and under reassoc the build called OpenBLAS's gemm, which
    computes C + A B (for out - in0 * in1, elements off by up to 6). Only the named op's
    own body goes to BLAS; others run as loops of their body."""
    first, second = OTHER_BODIES[body]
    text = f"""
func.func @main(%A: memref<6x5xf64>, %B: memref<5x7xf64>, %C: memref<6x7xf64>) {{
  "linalg.matmul"(%A, %B, %C) ({{
  ^bb0(%a: f64, %b: f64, %c: f64):
    %p = arith.{first} : f64
    %s = arith.{second} : f64
    linalg.yield %s : f64
  }}) {{operandSegmentSizes = array<i32: 2, 1>}} : (memref<6x5xf64>, memref<5x7xf64>, memref<6x7xf64>) -> ()
  return
}}
"""
    decisions = optimize_bodies(_host_module(text, "reassoc"), 256)
    assert not any("OpenBLAS" in d.text for d in decisions), [d.text for d in decisions]
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(s) for s in ((6, 5), (5, 7), (6, 7)))
    want = dhir.run(text, a, b, c, backend="interp", ranks=1)[2]
    got = dhir.run(text, a, b, c, ranks=1, fast_math="reassoc")[2]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


DOT_WITH_A_DECLARATION = """
func.func private @scipy_cblas_ddot64_(TYPES) -> f64
func.func @main(%x: memref<5xf64>, %y: memref<5xf64>, %z: memref<f64>) {
  linalg.dot ins(%x, %y : memref<5xf64>, memref<5xf64>) outs(%z : memref<f64>)
  return
}
"""


def test_a_declaration_of_a_blas_name_with_other_types_is_an_error_at_it() -> None:
    """The program's own @scipy_cblas_ddot64_, declared with index arguments, was taken
    for OpenBLAS's: mlir-opt then failed on the reassoc build's call ("operand type
    mismatch"). It is an error at the declaration; one with OpenBLAS's types is used."""
    other = DOT_WITH_A_DECLARATION.replace("TYPES", "i64, index, i64, index, i64")
    with pytest.raises(dhir.DhirError, match=r":2:1: error: @scipy_cblas_ddot64_ is declared"):
        optimize_bodies(_host_module(other, "reassoc"), 512)
    same = DOT_WITH_A_DECLARATION.replace("TYPES", "i64, i64, i64, i64, i64")
    (decision,) = optimize_bodies(_host_module(same, "reassoc"), 512)
    assert decision.done


def test_an_empty_dot_under_reassoc_leaves_minus_zero() -> None:
    """linalg.dot of empty vectors adds nothing: out stays -0, as in the interpreter
    (the BLAS call's 0 was added to it, which gives +0)."""
    text = _named_text("dot", [(0,), (0,), ()], "f64")
    args = [np.zeros(0), np.zeros(0), np.array(-0.0)]
    got = dhir.run(text, *args, fast_math="reassoc")[2]
    want = dhir.run(text, *args, backend="interp", fast_math="reassoc")[2]
    assert np.signbit(got) and np.signbit(want)


def _ikj_text(m: int, n: int, k: int, scaled: bool) -> str:
    """C[i, j] += A[i, k] * B[k, j] in i-k-j order (times s[0] * s[1] where `scaled`)."""
    product = "%r = arith.mulf %a, %b : f64"
    if scaled:
        product = (
            "%p = arith.mulf %alpha, %a : f64\n"
            "        %q = arith.mulf %p, %beta : f64\n"
            "        %r = arith.mulf %q, %b : f64"
        )
    return f"""
func.func @main(%A: memref<{m}x{k}xf64>, %B: memref<{k}x{n}xf64>, %C: memref<{m}x{n}xf64>, %s: memref<2xf64>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = arith.constant {m} : index
  %n = arith.constant {n} : index
  %k = arith.constant {k} : index
  %alpha = memref.load %s[%c0] : memref<2xf64>
  %beta = memref.load %s[%c1] : memref<2xf64>
  scf.for %i = %c0 to %m step %c1 {{
    scf.for %l = %c0 to %k step %c1 {{
      scf.for %j = %c0 to %n step %c1 {{
        %a = memref.load %A[%i, %l] : memref<{m}x{k}xf64>
        %b = memref.load %B[%l, %j] : memref<{k}x{n}xf64>
        %c = memref.load %C[%i, %j] : memref<{m}x{n}xf64>
        {product}
        %t = arith.addf %c, %r : f64
        memref.store %t, %C[%i, %j] : memref<{m}x{n}xf64>
      }}
    }}
  }}
  return
}}
"""


SIGNED = (
    "matmul",
    "matvec",
    "vecmat",
    "dot",
    "batch_matmul",
    "batch_matvec",
    "batch_reduce_matmul",
    "ikj",
    "ikj scaled",
)


def _signed_case(name: str, sizes: tuple[int, int, int, int]) -> tuple[str, list[tuple[int, ...]]]:
    """A program computing out += x . y as `name` says, and its arguments' shapes (the
    output third)."""
    b, m, n, k = sizes
    if name.startswith("ikj"):
        shapes = [(m, k), (k, n), (m, n), (2,)]
        return _ikj_text(m, n, k, name.endswith("scaled")), shapes
    shapes = [(m, k), (k, n), (m, n)] if name == "matmul" else _named_shapes(name, b, m, n, k)
    return _named_text(name, shapes, "f64"), shapes


@pytest.mark.parametrize("name", SIGNED)
def test_blas_under_reassoc_keeps_an_exact_minus_zero(name: str) -> None:
    """Under reassoc (no nsz), an output of -0 plus products that are all -0 is -0, as
    in the interpreter; OpenBLAS starts its sums at +0 and gave +0 for every element. The
    call runs where no output element is -0; else the exact kernel. With nsz (fast),
    which allows the +0, BLAS is called with no scan (whether it then gives +0 differs
    between OpenBLAS's kernels: its gemv with A transposed gave -0 here)."""
    text, shapes = _signed_case(name, (2, 3, 4, 5))
    ones = [np.ones(shapes[0]), np.full(shapes[1], -0.0), np.full(shapes[2], -0.0)]
    args = [*ones, np.array([1.5, 2.0])][: len(shapes)]
    want = dhir.run(text, *args, backend="interp", fast_math="reassoc")[2]
    got = dhir.run(text, *args, fast_math="reassoc")[2]
    assert np.signbit(want).all() and np.signbit(got).all()
    module = _host_module(text, "fast")
    decisions = optimize_bodies(module, 256)
    assert any("OpenBLAS" in d.text for d in decisions), [d.text for d in decisions]
    assert not any(isinstance(op, arith.BitcastOp) for op in module.walk())


def _fallbacks(module: ModuleOp) -> list[scf.IfOp]:
    """The scf.ifs whose then branch calls BLAS and that have an else branch."""
    return [
        op
        for op in module.walk()
        if isinstance(op, scf.IfOp)
        and op.false_region.blocks
        and any(isinstance(inner, func.CallOp) for inner in op.true_region.walk())
    ]


@pytest.mark.parametrize(
    ("fast_math", "scaled"), [("reassoc", False), ("reassoc", True), ("fast", True)]
)
def test_blas_fallback_is_the_exact_kernel(fast_math: str, scaled: bool) -> None:
    """Where the run-time checks keep an i-k-j nest from gemm (a -0 in C's block under
    reassoc, the scalars' product 0 or not finite), it runs as the blocked kernel that
    --fast-math=none gives, its adds and multiplies without flags, not as the loops as
    written (scalar, on one thread). Random values with one -0 in C: the native result
    has the interpreter's bits."""
    text = _ikj_text(13, 21, 7, scaled)
    module = _host_module(text, fast_math)
    (decision,) = optimize_bodies(module, 256)
    assert "gemm" in decision.text, decision.text
    (fallback,) = _fallbacks(module)
    ops = list(fallback.false_region.walk())
    assert any(isinstance(op, vector.StoreOp) for op in ops)
    assert any(isinstance(op, scf.ParallelOp) for op in ops)
    flagged = [op for op in ops if isinstance(op, arith.AddfOp | arith.MulfOp)]
    assert flagged and all(set(op.fastmath.data) <= {"none"} for op in flagged)
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((13, 7)), rng.standard_normal((7, 21))]
    out = rng.standard_normal((13, 21))
    out[3, 4] = -0.0
    args += [out, np.array([1.5, -0.75])]
    want = dhir.run(text, *args, backend="interp", fast_math="reassoc")[2]
    got = dhir.run(text, *args, fast_math="reassoc")[2]
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


SMALL = (-1.0, -0.0, 0.0, 1.0, 2.0)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(SIGNED),
    sizes=st.tuples(*(st.integers(0, 5) for _ in range(4))),
    fast_math=st.sampled_from(["reassoc", "fast"]),
    minus_zeros=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_blas_signs_of_zero_equal_the_interpreters(
    name: str, sizes: tuple[int, int, int, int], fast_math: str, minus_zeros: bool, seed: int
) -> None:
    """Small integers, +0 and -0, whose sums are exact in any order: under reassoc the
    results equal the interpreter's bit for bit, signs of zeros too (the call where the
    output holds no -0, else the exact kernel); under fast (nsz) up to the signs of zeros."""
    text, shapes = _signed_case(name, sizes)
    rng = np.random.default_rng(seed)
    args = [np.asarray(rng.choice(SMALL, size=shape)) for shape in shapes]
    if not minus_zeros:
        args[2] = np.asarray(args[2] + 0.0)  # -0 + +0 is +0: BLAS is called
    want = dhir.run(text, *args, backend="interp", fast_math=fast_math)[2]
    got = dhir.run(text, *args, fast_math=fast_math)[2]
    np.testing.assert_array_equal(got, want)
    if fast_math == "reassoc":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_blas_calls_add_with_the_programs_flags_only() -> None:
    """The add after a dot call and the product of a gemm's scalar factors take the flags
    the program's ops have (reassoc, contract), not `fast` (whose nsz lets -0 + 0 be
    either zero)."""
    dot = _host_module(_named_text("dot", [(5,), (5,), ()], "f64"), "reassoc")
    (decision,) = optimize_bodies(dot, 512)
    assert decision.done
    # The loops where the output holds a -0 add exactly, without flags.
    loops = {
        op
        for check in dot.walk()
        if isinstance(check, scf.IfOp) and check.false_region.blocks
        for op in check.true_region.walk()
    }
    adds = [op for op in dot.walk() if isinstance(op, arith.AddfOp)]
    assert all(set(op.fastmath.data) <= {"none"} for op in adds if op in loops)
    adds = [op for op in adds if op not in loops]
    assert adds and all(set(op.fastmath.data) == {"reassoc", "contract"} for op in adds)
    scaled = _host_module(SCALED_GEMM, "reassoc")
    (decision,) = optimize_bodies(scaled, 512)
    assert "gemm" in decision.text
    exact = {op for fallback in _fallbacks(scaled) for op in fallback.false_region.walk()}
    products = [op for op in scaled.walk() if isinstance(op, arith.MulfOp) and op not in exact]
    assert products and all(set(op.fastmath.data) == {"reassoc", "contract"} for op in products)


SCALED_GEMM = """
func.func @main(%A: memref<8x4xf64>, %B: memref<4x8xf64>, %C: memref<8x8xf64>, %s: memref<2xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %alpha = memref.load %s[%c0] : memref<2xf64>
  %beta = memref.load %s[%c1] : memref<2xf64>
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %k = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c8 step %c1 {
        %a = memref.load %A[%i, %k] : memref<8x4xf64>
        %b = memref.load %B[%k, %j] : memref<4x8xf64>
        %c = memref.load %C[%i, %j] : memref<8x8xf64>
        %p = arith.mulf %alpha, %a : f64
        %q = arith.mulf %p, %beta : f64
        %r = arith.mulf %q, %b : f64
        %t = arith.addf %c, %r : f64
        memref.store %t, %C[%i, %j] : memref<8x8xf64>
      }
    }
  }
  return
}
"""


def _named_shapes(name: str, b: int, m: int, n: int, k: int) -> list[tuple[int, ...]]:
    """The shapes of a named contraction's two inputs and its output."""
    return {
        "matvec": [(m, k), (k,), (m,)],
        "vecmat": [(k,), (k, n), (n,)],
        "dot": [(k,), (k,), ()],
        "batch_matmul": [(b, m, k), (b, k, n), (b, m, n)],
        "batch_matvec": [(b, m, k), (b, k), (b, m)],
        "batch_reduce_matmul": [(b, m, k), (b, k, n), (m, n)],
    }[name]


def _named_text(name: str, shapes: list[tuple[int, ...]], dtype: str) -> str:
    kinds = ["memref<" + "".join(f"{d}x" for d in shape) + f"{dtype}>" for shape in shapes]
    return (
        f"func.func @main(%x: {kinds[0]}, %y: {kinds[1]}, %out: {kinds[2]}) {{\n"
        f"  linalg.{name} ins(%x, %y : {kinds[0]}, {kinds[1]}) outs(%out : {kinds[2]})\n"
        "  return\n}\n"
    )


NAMED_OPS = ["matvec", "vecmat", "dot", "batch_matmul", "batch_matvec", "batch_reduce_matmul"]


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(NAMED_OPS),
    sizes=st.tuples(*(st.integers(0, 11) for _ in range(4))),
    dtype=st.sampled_from(["f32", "f64"]),
    relaxed=st.booleans(),
    ranks=st.integers(1, 2),
)
def test_named_contractions_equal_the_interpreter(
    name: str, sizes: tuple[int, int, int, int], dtype: str, relaxed: bool, ranks: int
) -> None:
    """matvec, vecmat, dot, batch_matmul, batch_matvec and batch_reduce_matmul: as loops
    the kernels take, bit for bit the interpreter's; with --fast-math=reassoc, OpenBLAS
    calls, within rounding of it."""
    shapes = _named_shapes(name, *sizes)
    text = _named_text(name, shapes, dtype)
    decisions = optimize_bodies(_host_module(text, "reassoc" if relaxed else "none"), 256)
    called = [d for d in decisions if "OpenBLAS" in d.text]
    assert len(called) == (1 if relaxed else 0), [d.text for d in decisions]
    kind = np.float64 if dtype == "f64" else np.float32
    rng = np.random.default_rng(sum(sizes))
    inputs = [np.asarray(rng.standard_normal(shape)).astype(kind) for shape in shapes]
    want = dhir.run(text, *inputs, backend="interp", ranks=1)[2]
    fast_math = "reassoc" if relaxed else "none"
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, fast_math=fast_math)[2]
    if not relaxed:
        np.testing.assert_array_equal(got, want)
        return
    x, y = (v.astype(np.float64) for v in inputs[:2])
    # Each element: its start plus a sum of products; rounding scales with their sizes.
    bound = np.abs(inputs[2].astype(np.float64)) + np.abs(_reference(name, np.abs(x), np.abs(y)))
    tolerance = (1e-12 if dtype == "f64" else 1e-4) * (bound + 1.0)
    assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= tolerance)


@pytest.mark.parametrize(
    ("name", "routine"), [("batch_matvec", "gemv"), ("batch_reduce_matmul", "gemm")]
)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_batched_products_call_blas_per_batch_under_reassoc(
    name: str, routine: str, dtype: str
) -> None:
    """batch_matvec and batch_reduce_matmul under reassoc: a call per matrix of the batch,
    each at its matrix and vectors (batch_reduce_matmul's all adding into its one
    output), within rounding of the exact sums."""
    shapes = _named_shapes(name, 3, 7, 21, 11)
    text = _named_text(name, shapes, dtype)
    decisions = optimize_bodies(_host_module(text, "reassoc"), 256)
    assert decisions[0].text.startswith(f"a call to OpenBLAS {routine} per batch"), decisions
    kind = np.float64 if dtype == "f64" else np.float32
    rng = np.random.default_rng(3)
    inputs = [np.asarray(rng.standard_normal(shape)).astype(kind) for shape in shapes]
    got = dhir.run(text, *inputs, fast_math="reassoc")[2]
    x, y, out = (v.astype(np.float64) for v in inputs)
    bound = np.abs(out) + np.abs(_reference(name, np.abs(x), np.abs(y))) + 1.0
    tolerance = 1e-12 if dtype == "f64" else 1e-5
    want = out + _reference(name, x, y)
    assert np.all(np.abs(got - want) <= tolerance * bound)


def _reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if name == "dot":
        return np.asarray(np.dot(x, y))
    if name == "batch_matvec":
        return np.einsum("bik,bk->bi", x, y)
    if name == "batch_reduce_matmul":
        return np.einsum("bik,bkj->ij", x, y)
    return np.matmul(x, y)


@dataclass(frozen=True)
class Sums:
    """T[i] accumulating along j, in memory: `for i { [T[i] = 0]; for j { T[i] = f(T[i],
    A[i, j] or A[j, i], x[j]) } }` (atax's and mvt's products with a vector)."""

    dtype: str
    ni: int
    nj: int
    i_lo: int
    j_step: int
    down: bool  # A[j, i]: the column of A, contiguous along i
    zero_first: bool
    expr: object

    def text(self) -> str:
        t, ni, nj = self.dtype, self.ni, self.nj
        shape = f"{nj}x{ni}" if self.down else f"{ni}x{nj}"
        at = "%j, %i" if self.down else "%i, %j"
        lines = [
            f"func.func @main(%T: memref<{ni}x{t}>, %A: memref<{shape}x{t}>, %x: memref<{nj}x{t}>) {{",
            "  dhir.schedule %T, %A, %x {",
            '    %cpu = dhir.target {kind = "cpu"}',
            "    %t = dhir.task %cpu, %T, %A, %x {",
            "      %c0 = arith.constant 0 : index",
            "      %c1 = arith.constant 1 : index",
            f"      %ilo = arith.constant {self.i_lo} : index",
            f"      %jstep = arith.constant {self.j_step} : index",
            f"      %ni = arith.constant {ni} : index",
            f"      %nj = arith.constant {nj} : index",
            f"      %alpha = arith.constant 1.5 : {t}",
            f"      %zero = arith.constant 0.0 : {t}",
            "      scf.for %i = %ilo to %ni step %c1 {",
            *(
                [f"        memref.store %zero, %T[%i] : memref<{ni}x{t}>"]
                if self.zero_first
                else []
            ),
            "        scf.for %j = %c0 to %nj step %jstep {",
            f"          %acc = memref.load %T[%i] : memref<{ni}x{t}>",
            f"          %a = memref.load %A[{at}] : memref<{shape}x{t}>",
            f"          %b = memref.load %x[%j] : memref<{nj}x{t}>",
            "          %d = arith.addf %a, %alpha : " + t,
            "          %inner = arith.mulf %b, %b : " + t,
        ]
        body: list[str] = []
        result = Nest._expr(self, "          ", body)  # type: ignore[arg-type]
        lines += [
            *body,
            f"          memref.store {result}, %T[%i] : memref<{ni}x{t}>",
            "        }",
            *END,
        ]
        return "\n".join(lines)

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        kind = np.float64 if self.dtype == "f64" else np.float32
        shape = (self.nj, self.ni) if self.down else (self.ni, self.nj)
        return [rng.standard_normal(s).astype(kind) for s in ((self.ni,), shape, (self.nj,))]


@st.composite
def sums(draw: st.DrawFn) -> Sums:
    return Sums(
        dtype=draw(st.sampled_from(["f64", "f32"])),
        ni=draw(st.integers(1, 40)),
        nj=draw(st.integers(0, 40)),
        i_lo=draw(st.integers(0, 2)),
        j_step=draw(st.integers(1, 2)),
        down=draw(st.booleans()),
        zero_first=draw(st.booleans()),
        expr=draw(
            st.tuples(st.sampled_from(OPS), expressions(1)).flatmap(
                lambda pair: st.sampled_from([(pair[0], "acc", pair[1]), (pair[0], pair[1], "acc")])
            )
        ),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nest=sums(),
    ranks=st.integers(1, 2),
    cpu=st.sampled_from(["native", "haswell"]),
    seed=st.integers(0, 2**16),
    threads=st.sampled_from([1, 3]),
)
def test_row_sums_and_single_rows_equal_the_interpreter(
    nest: Sums, ranks: int, cpu: str, seed: int, threads: int
) -> None:
    """Sums along rows (rows in vector lanes where k steps by 1, else 8 rows side by side)
    and along columns (a nest in no row loop, vectorised along i): rewritten, and bit for
    bit the interpreter's."""
    text = nest.text()
    decisions = optimize_bodies(parse_string(text), 512)
    # Over no columns the sum is not carried in a register (it would touch T[i], which
    # the program does not), and the nest stays as written (reported as left, or not at
    # all where zeroing T[i] first leaves no nest the optimizer recognises).
    if nest.nj == 0:
        assert not any(decision.done for decision in decisions), decisions
    else:
        (decision,) = decisions
        assert decision.done, decision.text
        if not nest.down:
            lanes = nest.j_step == 1
            assert ("in vector lanes" in decision.text) == lanes, decision.text
    inputs = nest.inputs(seed)
    _assert_native_equals_interp(text, inputs, ranks, cpu, threads)


@dataclass(frozen=True)
class Columns:
    """A nest in no row loop, adding into a vector along its columns in memory: `for k {
    for j { y[j] = f(y[j], A[k, j], x[k]) } }` (atax's A^T tmp), whose kernel runs `k` in
    chunks and its columns in one stripe per thread, at least a page (so several stripes
    on 3 threads from 514 f64 columns)."""

    dtype: str
    nj: int
    nk: int
    j_lo: int
    k_lo: int
    k_step: int
    expr: object

    def text(self) -> str:
        t, nj, nk = self.dtype, self.nj, self.nk
        lines = [
            f"func.func @main(%y: memref<{nj}x{t}>, %A: memref<{nk}x{nj}x{t}>, "
            f"%x: memref<{nk}x{t}>) {{",
            "  dhir.schedule %y, %A, %x {",
            '    %cpu = dhir.target {kind = "cpu"}',
            "    %t = dhir.task %cpu, %y, %A, %x {",
            f"      %jlo = arith.constant {self.j_lo} : index",
            f"      %klo = arith.constant {self.k_lo} : index",
            f"      %kstep = arith.constant {self.k_step} : index",
            f"      %nj = arith.constant {nj} : index",
            f"      %nk = arith.constant {nk} : index",
            "      %c1 = arith.constant 1 : index",
            f"      %alpha = arith.constant 1.5 : {t}",
            # A parallel loop in the program: the build runs OpenMP, so the kernel's
            # stripes go to the rank's threads.
            "      scf.parallel (%q) = (%c1) to (%c1) step (%c1) {",
            "      }",
            "      scf.for %k = %klo to %nk step %kstep {",
            "        scf.for %j = %jlo to %nj step %c1 {",
            f"          %acc = memref.load %y[%j] : memref<{nj}x{t}>",
            f"          %a = memref.load %A[%k, %j] : memref<{nk}x{nj}x{t}>",
            f"          %b = memref.load %x[%k] : memref<{nk}x{t}>",
            f"          %d = arith.addf %a, %alpha : {t}",
            f"          %inner = arith.mulf %b, %b : {t}",
        ]
        body: list[str] = []
        result = Nest._expr(self, "          ", body)  # type: ignore[arg-type]
        lines += [*body, f"          memref.store {result}, %y[%j] : memref<{nj}x{t}>", "        }"]
        return "\n".join([*lines, *END])

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        kind = np.float64 if self.dtype == "f64" else np.float32
        shapes = ((self.nj,), (self.nk, self.nj), (self.nk,))
        return [rng.standard_normal(s).astype(kind) for s in shapes]


@st.composite
def columns(draw: st.DrawFn) -> Columns:
    expr = draw(expressions(leaves=LEAVES))
    if not _uses(expr, "acc"):
        expr = ("addf", "acc", expr)
    return Columns(
        dtype=draw(st.sampled_from(["f64", "f32"])),
        nj=draw(st.one_of(st.integers(0, 70), st.integers(500, 1100))),
        nk=draw(st.integers(0, 30)),
        j_lo=draw(st.integers(0, 3)),
        k_lo=draw(st.integers(0, 2)),
        k_step=draw(st.integers(1, 2)),
        expr=expr,
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nest=columns(),
    ranks=st.integers(1, 2),
    cpu=st.sampled_from(["native", "haswell", "x86-64"]),
    seed=st.integers(0, 2**16),
    threads=st.sampled_from([1, 3]),
)
def test_single_rows_in_chunks_of_k_equal_the_interpreter(
    nest: Columns, ranks: int, cpu: str, seed: int, threads: int
) -> None:
    """A nest in no row loop adding along its columns: its kernel runs `k` in chunks and
    its columns in stripes shared by the rank's threads, bit for bit the interpreter's."""
    text = nest.text()
    (decision,) = optimize_bodies(parse_string(text), 512)
    assert decision.done and "k in chunks of" in decision.text, decision.text
    inputs = nest.inputs(seed)
    _assert_native_equals_interp(text, inputs, ranks, cpu, threads)


def test_sums_in_parallel_loops_stay_in_memory() -> None:
    """In a parallel loop, a sum into memory is not carried in a register: with no
    iterations it would store back an element another thread may write. (The task's other
    nest makes the optimizer look at its loops.)"""
    text = """
func.func @main(%T: memref<8xf64>, %A: memref<8x4xf64>, %n: index) {
  dhir.schedule %T, %A {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %T, %A {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      scf.for %r = %c0 to %c1 step %c1 {
        scf.for %q = %c0 to %c1 step %c1 {
        }
      }
      scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
        scf.for %j = %c0 to %n step %c1 {
          %acc = memref.load %T[%i] : memref<8xf64>
          %a = memref.load %A[%i, %j] : memref<8x4xf64>
          %s = arith.addf %acc, %a : f64
          memref.store %s, %T[%i] : memref<8xf64>
        }
        scf.reduce
      }
    }
  }
  return
}
"""
    module = parse_string(text)
    optimize_bodies(module, 512)
    assert not any(isinstance(op, scf.ForOp) and op.iter_args for op in module.walk())


SUM_AT = """
func.func @main(%T: memref<8x3xf64>, %A: memref<8x4xf64>, %n: index) {
  dhir.schedule %T, %A {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %T, %A {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %cK = arith.constant K : index
      scf.for %i = %c0 to %c8 step %c1 {
        scf.for %j = %c0 to N step %c1 {
          %acc = memref.load %T[%i, %cK] : memref<8x3xf64>
          %a = memref.load %A[%i, %j] : memref<8x4xf64>
          %s = arith.addf %acc, %a : f64
          memref.store %s, %T[%i, %cK] : memref<8x3xf64>
        }
      }
    }
  }
  return
}
"""


@pytest.mark.parametrize(
    ("column", "count", "carried"),
    [("2", "%n", False), ("5", "%c1", True), ("5", "%n", False), ("5", "%c0", False)],
)
def test_a_sum_is_carried_only_where_its_element_is_surely_touched(
    column: str, count: str, carried: bool
) -> None:
    """Carried in a register, a sum is loaded before its loop and stored after it, even
    where the loop runs no iteration: only where the loop surely runs may it be. Column 5
    of 3 is out of bounds, and even column 2 may lie outside the rows a rank holds of a
    partitioned memref, harmless only while no iteration touches it."""
    module = parse_string(SUM_AT.replace("K :", f"{column} :").replace("N step", f"{count} step"))
    optimize_bodies(module, 512)
    assert any(isinstance(op, scf.ForOp) and op.iter_args for op in module.walk()) == carried


# A row sum over the columns before the row (a lower triangle without its diagonal): row
# FIRST's loop runs no iteration when FIRST is 0. Task t2 touches rows 1..63 of %y only,
# and on its own rank; with partitioned storage that rank reserves just those rows.
TRIANGLE_SUM = """
func.func @main(%A: memref<64x64xf64>, %y: memref<64x512xf64>) {
  dhir.schedule %A, %y {
    %cpu = dhir.target {kind = "cpu"}
    %t1 = dhir.task %cpu, %y attributes {dhir.rank = 0} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 5.0 : f64
      memref.store %v, %y[%c0, %c0] : memref<64x512xf64>
    }
    %t2 = dhir.task %cpu, %y, %A attributes {dhir.rank = 1} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %first = arith.constant FIRST : index
      %n = arith.constant 64 : index
      scf.for %i = %first to %n step %c1 {
        scf.for %j = %c0 to %i step %c1 {
          %s = memref.load %y[%i, %c0] : memref<64x512xf64>
          %a = memref.load %A[%i, %j] : memref<64x64xf64>
          %r = arith.addf %s, %a : f64
          memref.store %r, %y[%i, %c0] : memref<64x512xf64>
        }
      }
    }
  }
  return
}
"""


@pytest.mark.parametrize(("first", "carried"), [(0, False), (1, True)])
def test_a_triangles_sum_is_carried_only_where_every_row_runs_its_loop(
    first: int, carried: bool
) -> None:
    """`for j in [0, i)` runs for every row of `for i in [1, 64)`, not of `[0, 64)`."""
    module = parse_string(TRIANGLE_SUM.replace("FIRST :", f"{first} :"))
    optimize_bodies(module, 512)
    assert any(isinstance(op, scf.ForOp) and op.iter_args for op in module.walk()) == carried


def test_a_carried_sum_touches_no_row_its_rank_does_not_hold() -> None:
    """Row 0 of the triangle's sum runs no iteration: carried, it would load and store
    y[0, 0], a page below the rows rank 1 reserves for y (a segmentation fault)."""
    text = TRIANGLE_SUM.replace("FIRST :", "0 :")
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((64, 64)), rng.standard_normal((64, 512))]
    _assert_native_equals_interp(text, inputs, 2, "native", 1)


# C += A B for rows [t, 8) and k in [0, t): at t = 0 the rows start at 0 but `k` runs no
# step, so the program never touches row 0 of %C in task t2, and its rank (1) reserves
# rows 1..7 only. A row of 4096 f64 is 8 pages: row 0 lies well below them.
EMPTY_K = """
func.func @main(%A: memref<8x2xf64>, %B: memref<2x4096xf64>, %C: memref<8x4096xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t1 = dhir.task %cpu, %C attributes {dhir.rank = 0} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 5.0 : f64
      memref.store %v, %C[%c0, %c0] : memref<8x4096xf64>
    }
    %t2 = dhir.task %cpu, %C, %A, %B attributes {dhir.rank = 1} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %n = arith.constant 4096 : index
      scf.for %t = %c0 to %c2 step %c1 {
        scf.for %i = %t to %c8 step %c1 {
          scf.for %k = %c0 to %t step %c1 {
            scf.for %j = %c0 to %n step %c1 {
              %acc = memref.load %C[%i, %j] : memref<8x4096xf64>
              %a = memref.load %A[%i, %k] : memref<8x2xf64>
              %b = memref.load %B[%k, %j] : memref<2x4096xf64>
              %p = arith.mulf %a, %b : f64
              %s = arith.addf %acc, %p : f64
              memref.store %s, %C[%i, %j] : memref<8x4096xf64>
            }
          }
        }
      }
    }
  }
  return
}
"""


def test_a_blocks_sums_stay_in_memory_where_k_runs_no_step() -> None:
    """The memory-form kernel loads a block's sums before `k` and stores them after:
    where `k` runs no step (t = 0), it did so for rows 0..3 of %C, and rank 1 holds no
    row 0 (a segmentation fault). It touches the block only where `k` runs."""
    (decision,) = _decisions(EMPTY_K, 256)
    assert "nest (i-k-j) blocked 4 rows" in decision
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(shape) for shape in ((8, 2), (2, 4096), (8, 4096))]
    _assert_native_equals_interp(EMPTY_K, inputs, 2, "haswell", 1)


# Rows 0..4 have no columns, and read no A[i - 4, k]: A has no row i - 4 for them.
TABLE_ROWS = """
func.func @main(%C: memref<20x16xf64>, %A: memref<16x16xf64>, %B: memref<16x16xf64>) {
  dhir.schedule %C, %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %C, %A, %B {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c16 = arith.constant 16 : index
      %c20 = arith.constant 20 : index
      %alpha = arith.constant 1.5 : f64
      scf.for %i = %c0 to %c20 step %c1 {
        scf.for %k = %c0 to %c16 step %c1 {
          %jh = arith.subi %i, %c4 : index
          scf.for %j = %c0 to %jh step %c1 {
            %c = memref.load %C[%i, %j] : memref<20x16xf64>
            %im = arith.subi %i, %c4 : index
            %a = memref.load %A[%im, %k] : memref<16x16xf64>
            %b = memref.load %B[%k, %j] : memref<16x16xf64>
            %s = arith.mulf %a, %alpha : f64
            %p = arith.mulf %s, %b : f64
            %r = arith.addf %c, %p : f64
            memref.store %r, %C[%i, %j] : memref<20x16xf64>
          }
        }
      }
    }
  }
  return
}
"""


def test_a_table_holds_only_rows_that_have_columns() -> None:
    """alpha * A[i - 4, k] goes into a table per row and k; rows without columns read
    nothing, and computing theirs read A[-4, k]: out of bounds, which --runtime-checks
    stopped at (a fault, or rows the rank does not hold, unchecked)."""
    (decision,) = _decisions(TABLE_ROWS, 256)
    assert "1 value(s) per row and k in a table" in decision
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(shape) for shape in ((20, 16), (16, 16), (16, 16))]
    want = dhir.run(TABLE_ROWS, *inputs, backend="interp", ranks=1)
    got = dhir.run(TABLE_ROWS, *inputs, ranks=1, cpu="haswell", runtime_checks=True)
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)


def test_the_optimizer_keeps_what_each_rank_holds() -> None:
    """The lowering bounds each rank's rows by the facts found before the rewrite: the
    blocked loops' index arithmetic would be bounded less tightly (every row, whole)."""
    text = Nest(**{**GEMM.__dict__, "ni": 16, "nj": 40}).text()
    held = []
    for optimize in (False, True):
        timing = Timing()
        options = RunOptions(ranks=2, optimize=optimize, placement="round-robin")
        compile_native(parse_string(text), "main", options, timing)
        held.append([note for note in timing.notes if note.startswith("memory:")])
    assert any("%C: partitioned" in note for note in held[0]), held[0]
    assert held[1] == held[0]


SPLIT_MATMUL = """
func.func @main(%A: memref<37x19xf64>, %B: memref<19x23xf64>, %C: memref<37x23xf64>) {
  dhir.schedule %A, %B, %C {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B, %C attributes {dhir.split = 3 : i64} {
      linalg.matmul ins(%A, %B : memref<37x19xf64>, memref<19x23xf64>)
                    outs(%C : memref<37x23xf64>)
    }
  }
  return
}
"""


@pytest.mark.parametrize("fast_math", ["none", "reassoc"])
def test_matmul_pieces_on_views_of_rows_become_the_kernel(fast_math: str) -> None:
    """dhir-split's pieces run linalg.matmul on views of rows (a strided layout with an
    offset): the kernel takes them as it takes whole matrices; BLAS, which takes no
    offset, does not, so with reassoc they keep the loops (whose sums LLVM may reorder)."""
    module = parse_string(SPLIT_MATMUL)
    from dhir.api import run_pipeline
    from dhir.transforms.fast_math import relax

    run_pipeline(module, "dhir-split{ranks=3}")
    relax(module, fast_math)
    decisions = optimize_bodies(module, 256)
    assert len(decisions) == 3
    assert all(d.done and "blocked" in d.text for d in decisions), [d.text for d in decisions]
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(s) for s in ((37, 19), (19, 23), (37, 23))]
    want = dhir.run(SPLIT_MATMUL, *inputs, backend="interp")
    got = dhir.run(SPLIT_MATMUL, *inputs, ranks=3, fast_math=fast_math)
    if fast_math == "none":
        np.testing.assert_array_equal(got[2], want[2])
    else:  # reassoc lets LLVM reorder the sums
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)


# --- what the optimizer must not assume ----------------------------------------------------

# C += A B with its row loop; VIEW makes %C from %buf, ROW the row loop's extra parts.
IKJ = """
func.func @main(%buf: BUF, %A: memref<8x5xf64>, %B: memref<5x16xf64>) {
  dhir.schedule %buf, %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %buf, %A, %B {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c5 = arith.constant 5 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f64
      VIEW
      %rows = scf.for %i = %c0 to %c8 step %c1 ROW {
        NEST
        NEST
        YIELD
      }
    }
  }
  return
}
"""
NEST = """scf.for %k = %c0 to %c5 step %c1 {
          scf.for %j = %c0 to %c16 step %c1 {
            %acc = memref.load %C[%i, %j] : CT
            %a = memref.load %A[%i, %k] : memref<8x5xf64>
            %b = memref.load %B[%k, %j] : memref<5x16xf64>
            %p = arith.mulf %a, %b : f64
            %s = arith.subf %p, %acc : f64
            memref.store %s, %C[%i, %j] : CT
          }
        }"""


def _ikj(
    view: str = "", ct: str = "memref<8x16xf64>", nests: int = 1, carried: bool = False
) -> str:
    text = IKJ.replace("NEST\n        NEST", "\n        ".join([NEST] * nests))
    buf = "memref<8x16xf64>" if not view else "memref<128xf64>"
    text = text.replace(
        "VIEW", view or "%C = memref.cast %buf : memref<8x16xf64> to memref<8x16xf64>"
    )
    if carried:  # the row loop sums A's first column as it goes
        text = text.replace("ROW", "iter_args(%sum = %zero) -> (f64)")
        text = text.replace(
            "YIELD",
            "%x = memref.load %A[%i, %c0] : memref<8x5xf64>\n"
            "        %more = arith.addf %sum, %x : f64\n        scf.yield %more : f64",
        )
    else:
        text = text.replace("%rows = ", "").replace("ROW", "").replace("YIELD", "")
    return text.replace("BUF", buf).replace("CT", ct)


def _ikj_inputs(text: str) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    size = 128 if "memref<128xf64>" in text else (8, 16)
    return [rng.standard_normal(size), rng.standard_normal((8, 5)), rng.standard_normal((5, 16))]


def test_leaves_a_nest_writing_a_view_whose_rows_overlap() -> None:
    """Rows 8 elements apart of 16 each: rows i and i + 1 share 8 elements, so their
    order matters, and the kernel would run 4 rows at once."""
    view = (
        "%C = memref.reinterpret_cast %buf to offset: [0], sizes: [8, 16], strides: [8, 1]"
        " : memref<128xf64> to memref<8x16xf64, strided<[8, 1]>>"
    )
    text = _ikj(view, "memref<8x16xf64, strided<[8, 1]>>")
    assert "rows may overlap" in _left(text)
    _assert_native_equals_interp(text, _ikj_inputs(text), 1, "native", 1)


def test_a_second_nest_in_a_row_loop_the_first_rewrote_is_left() -> None:
    text = _ikj(nests=2)
    done, left = optimize_bodies(parse_string(text), 256)
    assert done.done and "rewritten with the loop" in left.text
    _assert_native_equals_interp(text, _ikj_inputs(text), 1, "native", 1)


def test_leaves_a_nest_whose_row_loop_carries_values() -> None:
    text = _ikj(carried=True)
    assert "carries values" in _left(text)
    _assert_native_equals_interp(text, _ikj_inputs(text), 1, "native", 1)


# A loop counting in i32 whose counter the body does not use: `k` repeating an update of
# C's row (I32_SWEEPS), `j` multiplying T[i] (I32_POWERS, an accumulation into one element).
I32_SWEEPS = """
func.func @main(%C: memref<5x13xf64>, %B: memref<5x13xf64>) {
  dhir.schedule %C, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %C, %B {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c5 = arith.constant 5 : index
      %c13 = arith.constant 13 : index
      %z = arith.constant 0 : i32
      %o = arith.constant 1 : i32
      %n = arith.constant 3 : i32
      %h = arith.constant 1.5 : f64
      scf.for %i = %c0 to %c5 step %c1 {
        scf.for %k = %z to %n step %o : i32 {
          scf.for %j = %c0 to %c13 step %c1 {
            %c = memref.load %C[%i, %j] : memref<5x13xf64>
            %b = memref.load %B[%i, %j] : memref<5x13xf64>
            %p = arith.mulf %c, %h : f64
            %s = arith.addf %p, %b : f64
            memref.store %s, %C[%i, %j] : memref<5x13xf64>
          }
        }
      }
    }
  }
  return
}
"""
I32_POWERS = """
func.func @main(%T: memref<4xf64>) {
  dhir.schedule %T {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %T {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %z = arith.constant 0 : i32
      %o = arith.constant 1 : i32
      %n = arith.constant 5 : i32
      %h = arith.constant 1.5 : f64
      scf.for %i = %c0 to %c4 step %c1 {
        scf.for %j = %z to %n step %o : i32 {
          %acc = memref.load %T[%i] : memref<4xf64>
          %s = arith.mulf %acc, %h : f64
          memref.store %s, %T[%i] : memref<4xf64>
        }
      }
    }
  }
  return
}
"""


def test_leaves_nests_whose_loops_count_in_other_than_index() -> None:
    """The kernels make their loops in index: a nest with a loop counting in i32 is left
    (it was rewritten into loops mixing i32 and index, which mlir-opt rejected), and an
    accumulation into one element carried in a register keeps its loop's counter type."""
    rng = np.random.default_rng(3)
    for text, shapes in ((I32_SWEEPS, [(5, 13), (5, 13)]), (I32_POWERS, [(4,)])):
        assert "counts in i32, not index" in _left(text)
        inputs = [rng.standard_normal(shape) for shape in shapes]
        _assert_native_equals_interp(text, inputs, 1, "native", 1)


GATHER = """
func.func @main(%C: memref<5x13xf64>, %A: memref<5x3xf64>, %B: memref<3x13xf64>) {
  dhir.schedule %C, %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %C, %A, %B {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c5 = arith.constant 5 : index
      %c12 = arith.constant 12 : index
      %c13 = arith.constant 13 : index
      %idx = memref.alloca() : memref<13xindex>
      scf.for %q = %c0 to %c13 step %c1 {
        %r = arith.subi %c12, %q : index
        memref.store %r, %idx[%q] : memref<13xindex>
      }
      scf.for %i = %c0 to %c5 step %c1 {
        scf.for %k = %c0 to %c3 step %c1 {
          scf.for %j = %c0 to %c13 step %c1 {
            %v = memref.load %idx[%j] : memref<13xindex>
            %a = memref.load %A[%i, %k] : memref<5x3xf64>
            %b = memref.load %B[%k, %v] : memref<3x13xf64>
            %c = memref.load %C[%i, %j] : memref<5x13xf64>
            %p = arith.mulf %a, %b : f64
            %s = arith.addf %c, %p : f64
            memref.store %s, %C[%i, %j] : memref<5x13xf64>
          }
        }
      }
    }
  }
  return
}
"""


def test_leaves_a_nest_reading_indices_along_its_columns() -> None:
    """B[k, idx[j]]: the kernel loads along the columns as vectors of the element type,
    and a gather is no such load (it failed an assertion)."""
    assert "it reads index along the columns, not f64" in _left(GATHER)
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal(shape) for shape in ((5, 13), (5, 3), (3, 13))]
    _assert_native_equals_interp(GATHER, inputs, 1, "native", 1)


def test_reassoc_leaves_blas_to_nests_of_static_shapes() -> None:
    """BLAS is told each row's length, which a memref<?x?xf64> gives only at run time:
    such a nest gets the exact kernel."""
    text = _ikj(ct="memref<?x?xf64>").replace("arith.subf %p, %acc", "arith.addf %acc, %p")
    text = text.replace(
        "%C = memref.cast %buf : memref<8x16xf64> to memref<8x16xf64>",
        "%C = memref.cast %buf : memref<8x16xf64> to memref<?x?xf64>",
    )
    inputs = _ikj_inputs(text)
    c, a, b = inputs
    got = dhir.run(text, *inputs, fast_math="reassoc")[0]
    want = c.copy()
    for i in range(8):
        for k in range(5):
            want[i] = want[i] + a[i, k] * b[k]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@settings(max_examples=300, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    strides=st.lists(st.integers(0, 13), min_size=3, max_size=3),
)
def test_injective_layouts_address_each_element_once(shape: list[int], strides: list[int]) -> None:
    """`injective` says yes only where every index has its own element (checked by
    enumerating them), and to every row-major layout."""
    from itertools import product

    from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr, f64

    from dhir.transforms.building import injective

    strides = strides[: len(shape)]
    kind = MemRefType(f64, shape, StridedLayoutAttr(strides, None))
    places = [sum(i * s for i, s in zip(index, strides)) for index in product(*map(range, shape))]
    if injective(kind):
        assert len(set(places)) == len(places)
    row_major = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]
    assert injective(MemRefType(f64, shape, StridedLayoutAttr(row_major, None)))


def test_leaves_a_matmul_writing_a_view_whose_elements_overlap() -> None:
    text = """
func.func @main(%A: memref<4x4xf64>, %buf: memref<16xf64>) {
  %C = memref.reinterpret_cast %buf to offset: [0], sizes: [4, 4], strides: [2, 1]
      : memref<16xf64> to memref<4x4xf64, strided<[2, 1]>>
  linalg.matmul ins(%A, %A : memref<4x4xf64>, memref<4x4xf64>)
                outs(%C : memref<4x4xf64, strided<[2, 1]>>)
  return
}
"""
    (decision,) = optimize_bodies(_host_module(text), 256)
    assert "whose output is a view whose elements may overlap" in decision.text
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((4, 4)), rng.standard_normal(16)]
    _assert_native_equals_interp(text, inputs, 1, "native", 1)


def _mvt(generic: bool) -> str:
    """PolyBench's mvt (x1 += A y1; x2 += A^T y2, the second with the reduction outermost)
    as scf loops or as linalg.generic ops, each statement on the same line in both."""
    head = """func.func @main(%A: memref<24x24xf64>, %y1: memref<24xf64>, %y2: memref<24xf64>,
                %x1: memref<24xf64>, %x2: memref<24xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 24 : index
"""
    if not generic:
        loops = [
            ("%i", "%j", "%x1[%i]", "%A[%i, %j]", "%y1[%j]"),
            ("%j", "%i", "%x2[%i]", "%A[%j, %i]", "%y2[%j]"),
        ]
        body = "".join(
            f"  scf.for {outer} = %c0 to %n step %c1 {{\n"
            f"    scf.for {inner} = %c0 to %n step %c1 {{\n"
            f"      %a = memref.load {out} : memref<24xf64>\n"
            f"      %b = memref.load {a} : memref<24x24xf64>\n"
            f"      %c = memref.load {y} : memref<24xf64>\n"
            "      %p = arith.mulf %b, %c : f64\n"
            "      %s = arith.addf %a, %p : f64\n"
            f"      memref.store %s, {out} : memref<24xf64>\n"
            "    }\n"
            "  }\n"
            for outer, inner, out, a, y in loops
        )
        return head + body + "  return\n}\n"
    kinds = ['"parallel", "reduction"', '"reduction", "parallel"']
    body = "".join(
        "  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,"
        f" affine_map<(d0, d1) -> ({y})>, affine_map<(d0, d1) -> ({x})>], iterator_types ="
        f" [{kind}]}}\n"
        f"      ins(%A, {vector} : memref<24x24xf64>, memref<24xf64>)"
        f" outs({out} : memref<24xf64>) {{\n"
        "  ^bb0(%b: f64, %c: f64, %a: f64):\n"
        "    %p = arith.mulf %b, %c : f64\n"
        "    %s = arith.addf %a, %p : f64\n"
        "    linalg.yield %s : f64\n"
        "  }\n\n\n\n"
        for kind, y, x, vector, out in zip(
            kinds, ("d1", "d0"), ("d0", "d1"), ("%y1", "%y2"), ("%x1", "%x2"), strict=True
        )
    )
    return head + body + "  return\n}\n"


def test_a_generic_summing_over_its_outer_dimension_gets_its_scf_forms_kernel() -> None:
    """mvt's A^T y2 as a linalg.generic whose reduction is its outer dimension is written
    as its loops in that order (the scf form's nest, i-k-j), not with the reduction
    innermost, which read A down its columns; with its rows made loops, nothing is left to
    run on threads: the executable is the scf form's, byte for byte, without OpenMP.
    Bit for bit the interpreter's."""
    notes: list[list[str]] = []
    built: list[bytes] = []
    for generic in (False, True):
        timing = Timing()
        exe, _ = compile_native(_host_module(_mvt(generic)), "main", RunOptions(), timing)
        notes.append([n for n in timing.notes if n.startswith("optimizer")])
        built.append(exe.read_bytes())
    assert any("nest (i-k-j)" in note for note in notes[0]), notes
    assert notes[1] == notes[0]
    assert b"__kmpc_" not in built[1]
    assert built[1] == built[0]
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(shape) for shape in ((24, 24), *[(24,)] * 4)]
    _assert_native_equals_interp(_mvt(True), inputs, 1, "native", 1)


def _filled_row_sums(generic: bool) -> str:
    """atax's first statement, tmp = 0 then tmp += A x, as scf loops or linalg.generic
    ops, each statement on the same line in both."""
    head = """func.func @main(%A: memref<24x20xf64>, %x: memref<20xf64>, %tmp: memref<24xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = arith.constant 24 : index
  %n = arith.constant 20 : index
  %zero = arith.constant 0.0 : f64
"""
    if not generic:
        return head + (
            "  scf.for %i = %c0 to %m step %c1 {\n"
            "    memref.store %zero, %tmp[%i] : memref<24xf64>\n"
            "  }\n\n\n"
            "  scf.for %i = %c0 to %m step %c1 {\n"
            "    scf.for %j = %c0 to %n step %c1 {\n"
            "      %a = memref.load %tmp[%i] : memref<24xf64>\n"
            "      %b = memref.load %A[%i, %j] : memref<24x20xf64>\n"
            "      %c = memref.load %x[%j] : memref<20xf64>\n"
            "      %p = arith.mulf %b, %c : f64\n"
            "      %s = arith.addf %a, %p : f64\n"
            "      memref.store %s, %tmp[%i] : memref<24xf64>\n"
            "    }\n"
            "  }\n"
            "  return\n}\n"
        )
    return head + (
        "  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>],"
        ' iterator_types = ["parallel"]}\n'
        "      outs(%tmp : memref<24xf64>) {\n"
        "  ^bb0(%t: f64):\n"
        "    linalg.yield %zero : f64\n"
        "  }\n"
        "  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,"
        " affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>],"
        ' iterator_types = ["parallel", "reduction"]}\n'
        "      ins(%A, %x : memref<24x20xf64>, memref<20xf64>) outs(%tmp : memref<24xf64>) {\n"
        "  ^bb0(%b: f64, %c: f64, %a: f64):\n"
        "    %p = arith.mulf %b, %c : f64\n"
        "    %s = arith.addf %a, %p : f64\n"
        "    linalg.yield %s : f64\n"
        "  }\n\n\n\n\n\n"
        "  return\n}\n"
    )


def test_a_fill_beside_a_generic_contraction_is_built_as_its_scf_form() -> None:
    """The element-wise fill of a linalg.generic row sum becomes its loops as the
    contraction does (it said "left as written" and kept OpenMP's threads for the fill
    alone): the executable is the scf form's, byte for byte, without OpenMP, and the
    optimizer says what it says of the scf form. Bit for bit the interpreter's."""
    notes: list[list[str]] = []
    built: list[bytes] = []
    for generic in (False, True):
        timing = Timing()
        module = _host_module(_filled_row_sums(generic))
        exe, _ = compile_native(module, "main", RunOptions(), timing)
        notes.append([n for n in timing.notes if n.startswith("optimizer")])
        built.append(exe.read_bytes())
    assert notes[1] == notes[0] and notes[0], notes
    assert b"__kmpc_" not in built[1]
    assert built[1] == built[0]
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal(shape) for shape in ((24, 20), (20,), (24,))]
    _assert_native_equals_interp(_filled_row_sums(True), inputs, 1, "native", 1)
