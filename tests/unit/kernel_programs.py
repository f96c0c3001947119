"""Random contraction loop nests in any loop order, for tests/unit/test_kernel_fuzz.py:
gemm, batch gemm, matrix-vector and vector-matrix products and dot products written as
`scf.for` or `affine.for` nests whose loops come in a random order, with the update in
memory (`OUT[..] = OUT[..] + A[..] * B[..]`, loaded and stored in the innermost loop) or
in registers (the reduction `k` innermost, carried by iter_args), on sizes at the edges
of the register blocks (0, 1, 7, 9, 33, 65), with triangular bounds, scalar factors
(constants, or loaded from memory: an argument, or an element the nest writes), operands
that are strided views, or views of the output's own buffer (`C = A * C`, `y = A * y`),
memrefs of dynamic sizes bounding the loops by memref.dim, loops of step 2, shifted reads
(`B[k, j + 1]`), a sum of two products, inputs read along other subscripts (`A[k, i]`,
`B[k, k]`), in f64, f32 and i32.

Values stay small integers (or halves) often enough that a sum's order does not matter,
and sometimes not, so that a reordering shows; integer products may wrap (alike on both
sides).
"""

import random
from dataclasses import dataclass, field

import numpy as np
from native_programs import Case

# Each kind's operands as the dimensions they pick: two inputs, then the output.
KINDS = {
    "gemm": (("i", "k"), ("k", "j"), ("i", "j")),
    "batch": (("b", "i", "k"), ("b", "k", "j"), ("b", "i", "j")),
    "matvec": (("i", "k"), ("k",), ("i",)),
    "vecmat": (("k",), ("k", "j"), ("j",)),
    "dot": (("k",), ("k",), ()),
    "outer": (("i",), ("j",), ("i", "j")),
}
NP = {"f64": np.float64, "f32": np.float32, "i32": np.int32}
SIZES = (0, 1, 1, 2, 3, 4, 5, 7, 8, 9, 17, 33, 65)


@dataclass
class _Text:
    lines: list[str] = field(default_factory=list)
    depth: int = 1
    count: int = 0
    consts: dict[str, str] = field(default_factory=dict)

    def name(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def put(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def index(self, value: int) -> str:
        v = f"%c{value}".replace("-", "m")
        self.consts[v] = f"  {v} = arith.constant {value} : index"
        return v


@dataclass
class Nest:
    """One generated program, with what it is (for notes)."""

    kind: str
    order: tuple[str, ...]
    sizes: dict[str, int]
    t: str
    affine: bool
    carried: bool
    label: list[str] = field(default_factory=list)
    dynamic: bool = False  # memrefs of dynamic sizes, loops to their memref.dim
    steps: dict[str, int] = field(default_factory=dict)
    shifts: dict[str, tuple[int, int]] = field(default_factory=dict)  # name: (subscript, +c)
    two: bool = False  # the sum of two products
    sized: set[str] = field(default_factory=set)  # dims bounded by a memref.dim


def _data(rng: random.Random, t: str, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    if t == "i32":
        pool = [-3, -2, -1, 0, 1, 2, 3, 5]
        if rng.random() < 0.15:
            pool += [2**20, -(2**20), 2**31 - 1, -(2**31)]
        return np.array([rng.choice(pool) for _ in range(size)], np.int64).astype(
            np.int32).reshape(shape)  # fmt: skip
    if rng.random() < 0.5:
        values = [rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 3.0, 0.0]) for _ in range(size)]
    else:
        values = [rng.uniform(-3, 3) for _ in range(size)]
        if rng.random() < 0.15:
            values = [rng.choice([v, 1e30, -1e30, -0.0, 1e-40]) for v in values]
    with np.errstate(over="ignore"):
        return np.array(values, np.float64).astype(NP[t]).reshape(shape)


def _strided(shape: tuple[int, ...], step: int, extra: list[int], off: list[int]) -> str:
    big = [s * step + e for s, e in zip(shape, extra, strict=True)]
    strides, acc = [], 1
    for d in reversed(big):
        strides.append(acc)
        acc *= d
    strides.reverse()
    offset = sum(o * s for o, s in zip(off, strides, strict=True))
    inner = ", ".join(str(s * step) for s in strides)
    return f"strided<[{inner}], offset: {offset}>"


def _memref(shape: tuple[int | str, ...], t: str, layout: str = "") -> str:
    dims = "".join(f"{s}x" for s in shape)
    return f"memref<{dims}{t}{', ' + layout if layout else ''}>"


@dataclass
class _Args:
    t: str
    params: list[str] = field(default_factory=list)
    inputs: list[np.ndarray] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)

    def plain(
        self, rng: random.Random, name: str, shape: tuple[int, ...], dynamic: bool = False
    ) -> None:
        typ = _memref(shape, self.t) if not dynamic else _memref(("?",) * len(shape), self.t)
        self.params.append(f"%{name}: {typ}")
        self.inputs.append(_data(rng, self.t, shape))
        self.types[name] = typ

    def view(self, rng: random.Random, name: str, shape: tuple[int, ...]) -> None:
        """`%name` as a (possibly strided) view of a larger argument."""
        if 0 in shape or not shape:  # an empty view: its offsets are out of bounds
            return self.plain(rng, name, shape)
        step = rng.choice([1, 2])
        extra = [rng.randint(0, 2) for _ in shape]
        big = tuple(s * step + e for s, e in zip(shape, extra, strict=True))
        off = [rng.randint(0, e) for e in extra]
        layout = _strided(shape, step, extra, off)
        typ = _memref(shape, self.t, layout)
        self.params.append(f"%{name}big: {_memref(big, self.t)}")
        self.inputs.append(_data(rng, self.t, big))
        self.views.append(
            f"  %{name} = memref.subview %{name}big[{', '.join(map(str, off))}]"
            f" [{', '.join(map(str, shape))}] [{', '.join(str(step) for _ in shape)}]"
            f" : {_memref(big, self.t)} to {typ}"
        )
        self.types[name] = typ

    def shared(
        self, rng: random.Random, names: tuple[str, str], shapes: tuple[tuple[int, ...], ...]
    ) -> None:
        """Two operands of the same rank as unit-stride views of one buffer, at random
        offsets (disjoint or overlapping, or the very same view)."""
        rank = len(shapes[0])
        big = tuple(max(a, b) + rng.randint(0, 2) for a, b in zip(*shapes, strict=True))
        same = shapes[0] == shapes[1] and rng.random() < 0.4
        self.params.append(f"%buf: {_memref(big, self.t)}")
        self.inputs.append(_data(rng, self.t, big))
        offs = [[rng.randint(0, b - s) for b, s in zip(big, shape, strict=True)]
                for shape in shapes]  # fmt: skip
        if same:
            offs[1] = offs[0]
        for name, shape, off in zip(names, shapes, offs, strict=True):
            layout = _strided(shape, 1, [b - s for b, s in zip(big, shape, strict=True)], off)
            typ = _memref(shape, self.t, layout)
            self.views.append(
                f"  %{name} = memref.subview %buf[{', '.join(map(str, off))}]"
                f" [{', '.join(map(str, shape))}] [{', '.join('1' for _ in range(rank))}]"
                f" : {_memref(big, self.t)} to {typ}"
            )
            self.types[name] = typ


def _op(x: _Text, t: str, kind: str, a: str, b: str) -> str:
    v = x.name("v")
    x.put(f"{v} = arith.{kind}{'i' if t == 'i32' else 'f'} {a}, {b} : {t}")
    return v


def _load(x: _Text, nest: Nest, args: _Args, name: str, at: list[str]) -> str:
    if name in nest.shifts:
        q, c = nest.shifts[name]
        at = list(at)
        if nest.affine:
            at[q] = f"{at[q]} + {c}"
        else:
            v = x.name("x")
            x.put(f"{v} = arith.addi {at[q]}, {x.index(c)} : index")
            at[q] = v
    v = x.name("l")
    op = "affine.load" if nest.affine else "memref.load"
    x.put(f"{v} = {op} %{name}[{', '.join(at)}] : {args.types[name]}")
    return v


def _store(x: _Text, nest: Nest, args: _Args, value: str, name: str, at: list[str]) -> None:
    op = "affine.store" if nest.affine else "memref.store"
    x.put(f"{op} {value}, %{name}[{', '.join(at)}] : {args.types[name]}")


def _bounds(rng: random.Random, d: str, outer: list[str], nest: Nest) -> tuple[str, str]:
    """[lo, hi) of loop `d`: its whole size, or (sometimes) a triangle under an outer
    loop of no larger size."""
    n = nest.sizes[d]
    hi = f"%n_{d}" if d in nest.sized else str(n)
    under = [o for o in outer if o != "b" and nest.sizes[o] <= n]
    if under and rng.random() < 0.3:
        o = rng.choice(under)
        return rng.choice([("0", f"%{o} + 1"), ("0", f"%{o}"), (f"%{o}", hi)])
    return "0", hi


def _affine_bound(s: str) -> str:
    if not s.startswith("%"):
        return s
    var, _, c = s.partition(" + ")
    return f"affine_map<(d0) -> (d0 + {c or 0})>({var})"


def _open(x: _Text, nest: Nest, d: str, lo: str, hi: str, carry: str = "", head: str = "") -> None:
    if nest.affine:
        step = f" step {nest.steps[d]}" if nest.steps.get(d, 1) > 1 else ""
        x.put(f"{head}affine.for %{d} = {_affine_bound(lo)} to {_affine_bound(hi)}{step}"
              f"{carry} {{")  # fmt: skip
    else:

        def value(s: str) -> str:
            if s.lstrip("-").isdigit():
                return x.index(int(s))
            if " + " not in s:
                return s
            var, _, c = s.partition(" + ")
            v = x.name("x")
            x.put(f"{v} = arith.addi {var}, {x.index(int(c))} : index")
            return v

        lo_v, hi_v = value(lo), value(hi)
        step = x.index(nest.steps.get(d, 1))
        x.put(f"{head}scf.for %{d} = {lo_v} to {hi_v} step {step}{carry} {{")
    x.depth += 1


def _close(x: _Text, line: str = "") -> None:
    if line:
        x.put(line)
    x.depth -= 1
    x.put("}")


def kernel_case(rng: random.Random) -> tuple[Case, Nest]:
    kind = rng.choice(sorted(KINDS))
    picks = KINDS[kind]
    dims = sorted({d for p in picks for d in p})
    if rng.random() < 0.2:  # inputs read along other subscripts: A[k, i], B[i, j], B[k, k]
        picks = (*(tuple(rng.choice(dims) for _ in range(rng.randint(1, 2))) for _ in "AB"),
                 picks[2])  # fmt: skip
        kind += " wild"
    sizes = {d: rng.choice(SIZES) for d in dims}
    if "b" in sizes:
        sizes["b"] = rng.randint(0, 3)
    while int(np.prod(list(sizes.values()))) > 30000:
        big = max(sizes, key=lambda d: sizes[d])
        sizes[big] = rng.choice(SIZES[:8])
    t = rng.choice(["f64", "f64", "f64", "f32", "f32", "i32"])
    order = list(dims)
    rng.shuffle(order)
    if rng.random() < 0.5:  # rows outermost, as the optimizer's kernels take them
        order = [d for d in "bi" if d in dims] + [d for d in order if d in "jk"]
    carried = "k" in dims and rng.random() < 0.35
    if carried:  # k innermost, its sum in a register
        order.remove("k")
        order.append("k")
    nest = Nest(kind, tuple(order), sizes, t, rng.random() < 0.3, carried)
    nest.dynamic = rng.random() < 0.25
    nest.steps = {d: 2 if rng.random() < 0.1 else 1 for d in dims}
    nest.two = rng.random() < 0.15 and kind != "outer"
    args = _Args(t)
    shapes = [tuple(sizes[d] for d in p) for p in picks]
    names = ("A", "B", "C")
    for n, name in enumerate(("A", "B")):
        if shapes[n] and rng.random() < 0.15:  # B[k, j + 1]: a shifted read
            at, c = rng.randrange(len(shapes[n])), rng.randint(1, 2)
            nest.shifts[name] = (at, c)
            shapes[n] = tuple(s + c if q == at else s for q, s in enumerate(shapes[n]))
            nest.label.append(f"{name}-shifted")
    alias = rng.random() < 0.25 and not nest.dynamic
    # An input that is a view of the output's own buffer (C = A * C) where ranks agree.
    partner = [n for n, s in zip(names[:2], shapes[:2], strict=True) if len(s) == len(shapes[2])]
    shared = rng.choice(partner) if alias and partner and shapes[2] else None
    if shared and 0 in shapes[2] + shapes[names.index(shared)]:
        shared = None
    for name, shape in zip(names, shapes, strict=True):
        if shared and name in (shared, "C"):
            continue
        if nest.dynamic:
            args.plain(rng, name, shape, True)
        else:
            (args.view if rng.random() < 0.3 else args.plain)(rng, name, shape)
    if nest.two:
        for name, shape in (("D", shapes[0]), ("E", shapes[1])):
            args.plain(rng, name, shape, nest.dynamic)
        nest.label.append("two-products")
    if shared:
        args.shared(rng, (shared, "C"), (shapes[names.index(shared)], shapes[2]))
        nest.label.append(f"{shared}-shares-C")
    x = _Text()
    if nest.dynamic:
        _sizes(x, nest, args, picks)
    alpha_kind = rng.choice(["none", "none", "const", "memory", "out"])
    alpha = ""
    if alpha_kind == "const":
        alpha = x.name("alpha")
        value = rng.choice(["2", "-1", "3"] if t == "i32" else ["1.5", "-1.0", "0.5", "3.0"])
        x.put(f"{alpha} = arith.constant {value} : {t}")
    elif alpha_kind == "memory":
        args.plain(rng, "S", (1,))
    nest.label.append(f"alpha:{alpha_kind}")
    _body(rng, x, nest, args, picks, alpha, alpha_kind)
    text = "\n".join([
        f"func.func @main({', '.join(args.params)}) {{",
        *args.views,
        *sorted(x.consts.values()),
        *x.lines,
        "  return",
        "}",
    ]) + "\n"  # fmt: skip
    label = (f"{kind} {t} order {''.join(order)} sizes {sizes} "
             f"{'affine' if nest.affine else 'scf'} {'carried' if carried else 'memory'} "
             + " ".join(nest.label))  # fmt: skip
    return Case(text, args.inputs, label), nest


def _sizes(x: _Text, nest: Nest, args: _Args, picks: tuple[tuple[str, ...], ...]) -> None:
    """%n_d: the size of each loop d, a memref.dim of an operand that has it unshifted
    (where none has it, its loops keep a constant bound)."""
    nest.label.append("dynamic")
    for d in nest.sizes:
        name, at = next(((nm, p.index(d)) for nm, p in reversed(list(zip("ABC", picks)))
                         if d in p and nest.shifts.get(nm, (-1,))[0] != p.index(d)),
                        ("", 0))  # fmt: skip
        if name:
            nest.sized.add(d)
            x.put(f"%n_{d} = memref.dim %{name}, {x.index(at)} : {args.types[name]}")


def _scalar(
    rng: random.Random, x: _Text, nest: Nest, args: _Args, kind: str, out_at: list[str]
) -> str:
    """alpha where it is read: a load of S[0], or of an element of C (its first, or
    the one this iteration writes)."""
    if kind == "memory":
        return _load(x, nest, args, "S", [x.index(0) if not nest.affine else "0"])
    if kind == "out":
        zero = "0" if nest.affine else x.index(0)
        at = [zero for _ in out_at] if rng.random() < 0.5 else out_at
        if not at:
            return _load(x, nest, args, "C", [])
        nest.label.append("alpha-from-C")
        return _load(x, nest, args, "C", at)
    return ""


def _body(
    rng: random.Random,
    x: _Text,
    nest: Nest,
    args: _Args,
    picks: tuple[tuple[str, ...], ...],
    alpha: str,
    alpha_kind: str,
) -> None:
    t = nest.t
    a_at, b_at, c_at = ([f"%{d}" for d in p] for p in picks)
    outer = list(nest.order[:-1]) if nest.carried else list(nest.order)
    opened: list[str] = []
    for d in outer:
        lo, hi = _bounds(rng, d, opened, nest)
        _open(x, nest, d, lo, hi)
        opened.append(d)
    if nest.carried:
        init_kind = rng.choice(["load", "zero", "scaled"])
        if init_kind == "zero":
            init = x.name("z")
            x.put(f"{init} = arith.constant {'0' if t == 'i32' else '0.0'} : {t}")
        else:
            init = _load(x, nest, args, "C", c_at)
            if init_kind == "scaled":
                beta = x.name("beta")
                x.put(f"{beta} = arith.constant {'2' if t == 'i32' else '-0.5'} : {t}")
                init = _op(x, t, "mul", beta, init)
        nest.label.append(f"init:{init_kind}")
        lo, hi = _bounds(rng, "k", opened, nest)
        s = x.name("s")
        _open(x, nest, "k", lo, hi, f" iter_args(%acc = {init}) -> ({t})", f"{s} = ")
        prod = _product(rng, x, nest, args, a_at, b_at, c_at, alpha, alpha_kind)
        acc = _op(x, t, "add", "%acc", prod) if rng.random() < 0.8 else _op(
            x, t, "add", prod, "%acc")  # fmt: skip
        _close(x, ("affine.yield" if nest.affine else "scf.yield") + f" {acc} : {t}")
        out = s
        if rng.random() < 0.2:
            out = _op(x, t, "mul", s, s)
            nest.label.append("square-after")
        _store(x, nest, args, out, "C", c_at)
    else:
        prod = _product(rng, x, nest, args, a_at, b_at, c_at, alpha, alpha_kind)
        c = _load(x, nest, args, "C", c_at)
        form = rng.choice(["add", "add", "swap", "sub"])
        new = _op(x, t, "sub", c, prod) if form == "sub" else (
            _op(x, t, "add", c, prod) if form == "add" else _op(x, t, "add", prod, c))  # fmt: skip
        _store(x, nest, args, new, "C", c_at)
    for _ in outer:
        _close(x)


def _product(
    rng: random.Random,
    x: _Text,
    nest: Nest,
    args: _Args,
    a_at: list[str],
    b_at: list[str],
    c_at: list[str],
    alpha: str,
    alpha_kind: str,
) -> str:
    t = nest.t
    a = _load(x, nest, args, "A", a_at)
    b = _load(x, nest, args, "B", b_at)
    scalar = alpha or _scalar(rng, x, nest, args, alpha_kind, c_at)
    where = rng.choice(["alpha_a", "ab_alpha"]) if scalar else "ab"
    if where == "alpha_a":
        prod = _op(x, t, "mul", _op(x, t, "mul", scalar, a), b)
    else:
        prod = _op(x, t, "mul", a, b)
        prod = _op(x, t, "mul", prod, scalar) if where == "ab_alpha" else prod
    if nest.two:  # D and E are A and B without their shifts
        d = _load(x, nest, args, "D", a_at)
        e = _load(x, nest, args, "E", b_at)
        prod = _op(x, t, "add", prod, _op(x, t, "mul", e, d))
    return prod
