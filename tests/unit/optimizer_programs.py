"""Random loop nests aimed at what dhir-optimize-bodies recognises, and near misses it must
leave alone, as text with their inputs (a `native_programs.Case`).

`contraction_case` writes one nest in the memory form (`for i, k, j: C[i, j] op= ...`) or
the carried form (`for i, j: s = for k iter_args(...)`), with sizes at the edges of the
register blocks (1, 2, 3, 7, 17 and sometimes 65), triangular bounds (`j <= i`, `j < i`,
`i <= j + c`), scalar factors (`alpha * A * B + beta * C` in different association
orders), an extra read in between an accumulation, A and C as views of one buffer,
strided subviews, transposed operands, conditions on a column inside the nest, in f64,
f32, f16 and i32. Integer programs keep their values small so that nothing wraps
differently; float programs use values whose products and sums are exact or not, as the
optimizer must keep each element's operations in order either way.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from native_programs import Case

SIZES = (1, 2, 3, 7, 17)
_At = Callable[[str, str], list[str]]  # an operand's subscripts from two loop variables
TYPES = ("f64", "f64", "f32", "f32", "f16", "i32")
NP = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i32": np.int32}


@dataclass
class _Gen:
    rng: random.Random
    t: str
    lines: list[str] = field(default_factory=list)
    count: int = 0
    depth: int = 1
    top: list[str] = field(default_factory=list)
    constants: list[str] = field(default_factory=list)

    def name(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def put(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def index(self, expr: str) -> str:
        """An index value for `expr`: a constant (made at the top), a loop variable, or
        `var + c` (arith.addi, as affine.apply in a row loop is a near miss of its own)."""
        expr = expr.strip()
        if expr.lstrip("-").isdigit():
            v = f"%c_{expr.replace('-', 'm')}"
            if v not in self.constants:
                self.constants.append(v)
                self.top.append(f"  {v} = arith.constant {expr} : index")
            return v
        if " " not in expr:
            return expr
        var, _, c = expr.partition(" + ")
        v = self.name("x")
        self.put(f"{v} = arith.addi {var}, {self.index(c)} : index")
        return v

    def op(self, kind: str, a: str, b: str) -> str:
        """`a kind b` with kind in add, sub, mul, for the element type."""
        suffix = "i" if self.t == "i32" else "f"
        v = self.name("v")
        self.put(f"{v} = arith.{kind}{suffix} {a}, {b} : {self.t}")
        return v

    def const(self, value: float) -> str:
        v = self.name("k")
        text = str(int(value)) if self.t == "i32" else repr(float(value))
        self.put(f"{v} = arith.constant {text} : {self.t}")
        return v


@dataclass
class _Arrays:
    """Memref arguments (or views of them) and their types."""

    t: str
    types: dict[str, str] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)
    inputs: list[np.ndarray] = field(default_factory=list)
    views: list[str] = field(default_factory=list)


def _data(rng: random.Random, t: str, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape))
    if t == "i32":
        pool = [-3, -2, -1, 0, 1, 2, 3, 5]
        if rng.random() < 0.2:
            pool += [2**20, -(2**20), 2**31 - 1, -(2**31)]  # products wrap: both sides alike
        values = [rng.choice(pool) for _ in range(size)]
        return np.array(values, np.int64).astype(np.int32).reshape(shape)
    if rng.random() < 0.6:
        values = [
            rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 3.0, 0.25, 0.0]) for _ in range(size)
        ]
    else:
        values = [rng.uniform(-3, 3) for _ in range(size)]
        if rng.random() < 0.2:
            values = [rng.choice([v, 1e30, -1e30, 6e4, -0.0, 1e-40]) for v in values]
    with np.errstate(over="ignore"):
        return np.array(values, np.float64).astype(NP[t]).reshape(shape)


def _argument(
    rng: random.Random, arrays: _Arrays, name: str, shape: tuple[int, int], allow_view: bool
) -> None:
    """`%name` of `shape`: an argument, or a (possibly strided) view of a larger one."""
    t = arrays.t
    if allow_view and rng.random() < 0.35:
        step = rng.choice([1, 1, 2])
        extra = (rng.randint(0, 2), rng.randint(0, 3))
        big = (shape[0] * step + extra[0], shape[1] * step + extra[1])
        off = (rng.randint(0, extra[0]), rng.randint(0, extra[1]))
        offset = off[0] * big[1] + off[1]
        layout = f"strided<[{big[1] * step}, {step}], offset: {offset}>"
        typ = f"memref<{shape[0]}x{shape[1]}x{t}, {layout}>"
        arrays.params.append(f"%{name}big: memref<{big[0]}x{big[1]}x{t}>")
        arrays.inputs.append(_data(rng, t, big))
        arrays.views.append(
            f"  %{name} = memref.subview %{name}big[{off[0]}, {off[1]}] [{shape[0]}, {shape[1]}]"
            f" [{step}, {step}] : memref<{big[0]}x{big[1]}x{t}> to {typ}"
        )
        arrays.types[name] = typ
        return
    typ = f"memref<{shape[0]}x{shape[1]}x{t}>"
    arrays.params.append(f"%{name}: {typ}")
    arrays.inputs.append(_data(rng, t, shape))
    arrays.types[name] = typ


def _shared(rng: random.Random, arrays: _Arrays, shapes: dict[str, tuple[int, int]]) -> None:
    """A and C as views of one buffer %AC, side by side (disjoint) or overlapping."""
    t = arrays.t
    (ma, ka), (mc, nc) = shapes["A"], shapes["C"]
    rows = max(ma, mc) + rng.randint(0, 2)
    overlap = rng.random() < 0.5
    cols = max(ka, nc) + rng.randint(0, 2) if overlap else ka + nc + rng.randint(0, 2)
    a_off = (rng.randint(0, rows - ma), rng.randint(0, cols - ka - (0 if overlap else nc)))
    c_col = rng.randint(0, cols - nc) if overlap else rng.randint(a_off[1] + ka, cols - nc)
    c_off = (rng.randint(0, rows - mc), c_col)
    arrays.params.append(f"%AC: memref<{rows}x{cols}x{t}>")
    arrays.inputs.append(_data(rng, t, (rows, cols)))
    for name, (m, n), off in (("A", (ma, ka), a_off), ("C", (mc, nc), c_off)):
        typ = f"memref<{m}x{n}x{t}, strided<[{cols}, 1], offset: {off[0] * cols + off[1]}>>"
        arrays.views.append(
            f"  %{name} = memref.subview %AC[{off[0]}, {off[1]}] [{m}, {n}] [1, 1]"
            f" : memref<{rows}x{cols}x{t}> to {typ}"
        )
        arrays.types[name] = typ


def _size(rng: random.Random, big: bool) -> int:
    """Rows (not `big`) or columns and reductions: the register blocks take 4 rows and
    32 (f64) or 64 (f32) columns, so sizes around those reach the kernel and its edges."""
    if big and rng.random() < 0.5:
        return rng.choice((33, 64, 65, 67, 97))
    if not big and rng.random() < 0.4:
        return rng.choice((4, 5, 8, 9))
    return rng.choice(SIZES)


def _bounds(rng: random.Random, outer: str, n: int, m: int) -> tuple[str, str, str]:
    """Bounds of a loop under `outer` (< m) over [0, n): (lower, upper, what it is)."""
    r = rng.random()
    if r < 0.45 or n < m:
        return "0", str(n), "square"
    if r < 0.6:
        return "0", f"{outer} + 1", "j <= i"
    if r < 0.72:
        return "0", outer, "j < i"
    if r < 0.84:
        return outer, str(n), "j >= i"
    c = rng.randint(0, max(0, n - m))
    return f"{outer} + {c}" if c else outer, str(n), f"j >= i + {c}"


def _combine(g: _Gen, rng: random.Random, c: str, prod: str, scalars: list[str]) -> str:
    """The update of C by `prod` with alpha, beta in one of several association orders."""
    alpha, beta = scalars
    form = rng.choice(["plain", "alpha_ab", "a_alpha_b", "ab_alpha", "beta_c", "sub", "swap"])
    if form == "plain":
        return g.op("add", c, prod)
    if form == "swap":
        return g.op("add", prod, c)
    if form == "sub":
        return g.op("sub", c, prod)
    if form == "beta_c":
        return g.op("add", g.op("mul", beta, c), g.op("mul", alpha, prod))
    return g.op(
        "add", c, g.op("mul", alpha, prod) if form != "ab_alpha" else g.op("mul", prod, alpha)
    )


def contraction_case(rng: random.Random) -> Case:
    t = rng.choice(TYPES)
    m, n, k = _size(rng, False), _size(rng, True), _size(rng, True)
    if m * n * k > 20000:
        k = rng.choice(SIZES[:4])
    g = _Gen(rng, t)
    arrays = _Arrays(t)
    trans_a, trans_b = rng.random() < 0.2, rng.random() < 0.2
    shapes = {"A": (k, m) if trans_a else (m, k), "B": (n, k) if trans_b else (k, n), "C": (m, n)}
    share = rng.random() < 0.15 and not trans_a
    if share:
        _shared(rng, arrays, shapes)
    for name in ("A", "B", "C") if not share else ("B",):
        _argument(rng, arrays, name, shapes[name], True)
    _argument(rng, arrays, "D", (m, n), False)
    a_at: _At = (lambda i, kk: [kk, i]) if trans_a else (lambda i, kk: [i, kk])
    b_at: _At = (lambda kk, j: [j, kk]) if trans_b else (lambda kk, j: [kk, j])
    alpha = g.const(rng.choice([1.5, -1.0, 2.0, 0.5] if t != "i32" else [3, -2, 1]))
    beta = g.const(rng.choice([1.0, -0.5, 1.2] if t != "i32" else [2, -1, 1]))
    g.top.append("  %c1 = arith.constant 1 : index")
    carried = rng.random() < 0.45
    note: list[str] = []
    if carried:
        _carried(g, rng, arrays, m, n, k, a_at, b_at, [alpha, beta], note)
    else:
        _memory(g, rng, arrays, m, n, k, a_at, b_at, [alpha, beta], note)
    text = "\n".join([
        f"func.func @main({', '.join(arrays.params)}) {{",
        *arrays.views,
        *g.top,
        *g.lines,
        "  return",
        "}",
    ]) + "\n"  # fmt: skip
    label = f"contraction {t} m{m} n{n} k{k} {'carried' if carried else 'memory'} {' '.join(note)}"
    return Case(text, arrays.inputs, label)


def _load(g: _Gen, arrays: _Arrays, name: str, at: list[str]) -> str:
    v = g.name("l")
    idx = [g.index(a) for a in at]
    g.put(f"{v} = memref.load %{name}[{', '.join(idx)}] : {arrays.types[name]}")
    return v


def _store(g: _Gen, arrays: _Arrays, value: str, name: str, at: list[str]) -> None:
    idx = [g.index(a) for a in at]
    g.put(f"memref.store {value}, %{name}[{', '.join(idx)}] : {arrays.types[name]}")


def _for(g: _Gen, var: str, lo: str, hi: str, head: str = "", carry: str = "") -> None:
    lo_v, hi_v = g.index(lo), g.index(hi)
    g.put(f"{head}scf.for {var} = {lo_v} to {hi_v} step %c1{carry} {{")
    g.depth += 1


def _end(g: _Gen, line: str = "") -> None:
    if line:
        g.put(line)
    g.depth -= 1
    g.put("}")


def _memory(
    g: _Gen,
    rng: random.Random,
    arrays: _Arrays,
    m: int,
    n: int,
    k: int,
    a_at: _At,
    b_at: _At,
    scalars: list[str],
    note: list[str],
) -> None:
    near = rng.random()
    right, down = near < 0.14 and n > 1, 0.14 <= near < 0.2 and m > 1
    _for(g, "%i", "0", str(m - 1 if down else m))
    if rng.random() < 0.3:  # beta * C row first, as gemm does
        _for(g, "%j0", "0", str(n))
        c = _load(g, arrays, "C", ["%i", "%j0"])
        _store(g, arrays, g.op("mul", c, scalars[1]), "C", ["%i", "%j0"])
        _end(g)
        note.append("beta-row")
    k_lo, k_hi, kk = _bounds(rng, "%i", k, m) if rng.random() < 0.2 else ("0", str(k), "square")
    _for(g, "%k", k_lo, k_hi)
    j_lo, j_hi, jj = _bounds(rng, "%i", n, m) if not right else ("0", str(n - 1), "square")
    note += [f"k:{kk}", f"j:{jj}"]
    _for(g, "%j", j_lo, j_hi)
    cond = rng.random() < 0.15
    if cond:
        lim = g.index(str(rng.randint(0, n)))
        p = g.name("p")
        g.put(f"{p} = arith.cmpi {rng.choice(['slt', 'sge', 'ne'])}, %j, {lim} : index")
        g.put(f"scf.if {p} {{")
        g.depth += 1
        note.append("if-column")
    a = _load(g, arrays, "A", a_at("%i", "%k"))
    b = _load(g, arrays, "B", b_at("%k", "%j"))
    target = "C" if rng.random() < 0.9 else "D"
    c = _load(g, arrays, target, ["%i", "%j"])
    if near < 0.08:  # a factor from the row's first element, which j = 0 updates
        a = g.op("mul", a, _load(g, arrays, target, ["%i", "0"]))
        note.append("factor-C[i,0]")
    elif right:  # the element right of the one written: it is read before updated
        a = g.op("add", a, _load(g, arrays, target, ["%i", "%j + 1"]))
        note.append("read-right")
    elif down:  # the row below, which a later row updates
        a = g.op("add", a, _load(g, arrays, target, ["%i + 1", "%j"]))
        note.append("read-down")
    if rng.random() < 0.15:
        d = _load(g, arrays, "D", ["%i", "%j"])
        prod = g.op("mul", g.op("mul", a, b), d)
        note.append("triple")
    else:
        prod = g.op("mul", a, b)
    new = _combine(g, rng, c, prod, scalars)
    _store(g, arrays, new, target, ["%i", "%j"])
    if cond:
        g.depth -= 1
        g.put("}")
    _end(g)
    _end(g)
    _end(g)


def _carried(
    g: _Gen,
    rng: random.Random,
    arrays: _Arrays,
    m: int,
    n: int,
    k: int,
    a_at: _At,
    b_at: _At,
    scalars: list[str],
    note: list[str],
) -> None:
    _for(g, "%i", "0", str(m))
    j_lo, j_hi, jj = _bounds(rng, "%i", n, m)
    _for(g, "%j", j_lo, j_hi)
    init_kind = rng.choice(["load", "zero", "scaled"])
    if init_kind == "zero":
        init = g.const(0)
    else:
        init = _load(g, arrays, "C", ["%i", "%j"])
        if init_kind == "scaled":
            init = g.op("mul", scalars[1], init)
    k_lo, k_hi, kk = _bounds(rng, "%i", k, m) if rng.random() < 0.2 else ("0", str(k), "square")
    note += [f"j:{jj}", f"k:{kk}", f"init:{init_kind}"]
    s = g.name("s")
    _for(g, "%k", k_lo, k_hi, f"{s} = ", f" iter_args(%acc = {init}) -> ({g.t})")
    a = _load(g, arrays, "A", a_at("%i", "%k"))
    extra = rng.random() < 0.2
    if extra:  # a read of C in between: the sum is not C's element's alone
        c_now = _load(g, arrays, "C", ["%i", "%j"])
        a = g.op("add", a, c_now)
        note.append("extra-read")
    b = _load(g, arrays, "B", b_at("%k", "%j"))
    if rng.random() < 0.1:  # C[i, 0], stored once j = 0 is done: it varies along j
        b = g.op("mul", b, _load(g, arrays, "C", ["%i", "0"]))
        note.append("factor-C[i,0]")
    prod = g.op("mul", a, b)
    if rng.random() < 0.3:
        prod = g.op("mul", scalars[0], prod)
        note.append("alpha-in")
    acc = g.op("add", "%acc", prod) if rng.random() < 0.8 else g.op("add", prod, "%acc")
    if rng.random() < 0.1:  # a store in the k loop: a near miss
        _store(g, arrays, acc, rng.choice(["D", "C"]), ["%i", "%j"])
        note.append("store-in-k")
    _end(g, f"scf.yield {acc} : {g.t}")
    out = s
    if rng.random() < 0.3:
        out = g.op("mul", scalars[0], s)
    _store(g, arrays, out, "C", ["%i", "%j"])
    _end(g)
    _end(g)
