"""Random programs, as text with their inputs, for running natively against the interpreter.

Each generator takes a `random.Random` and gives a `Case`: a program whose @main takes
memrefs only, and NumPy inputs for them. The programs avoid undefined behaviour (divisors
are made nonzero, shift amounts masked, float-to-int conversions guarded), so the
interpreter runs them; whatever native code computes must equal it bit for bit.

- `scalar_case`: element-wise arithmetic mixing i1/i8/i16/i32/i64/index/f32/f64 values
  at their edges (wrapping, signed and unsigned division, shifts, casts, NaN, infinities,
  -0, min/max, select, math rounding ops).
- `control_case`: scf.while with iter_args, scf.if yielding values, and calls of functions
  taking memrefs and scalars.
- `view_case`: subviews with offsets and strides, reinterpret_cast, collapse_shape,
  expand_shape and memref.cast to dynamic shapes, read and written through.
- `affine_case`: affine maps with floordiv, mod and ceildiv of negative values, in
  affine.apply, loop bounds and affine.if.
- `nest_case`: loop nests the optimizer may rewrite (contractions with their indices
  permuted, in-place updates carrying dependences, reductions), and linalg.generic ops
  with unusual indexing maps.
"""

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

INTS = ("i8", "i16", "i32", "i64")
FLOATS = ("f32", "f64")
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}
DTYPES: dict[str, type] = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
                           "f32": np.float32, "f64": np.float64, "index": np.int64}  # fmt: skip


@dataclass
class Case:
    text: str
    inputs: list[np.ndarray]
    family: str = ""


@dataclass
class _Body:
    """SSA lines of one loop body, with the values made so far by type."""

    rng: random.Random
    lines: list[str] = field(default_factory=list)
    values: dict[str, list[str]] = field(default_factory=dict)
    count: int = 0

    def new(self, type_: str, line: str) -> str:
        name = f"%v{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {line}")
        self.values.setdefault(type_, []).append(name)
        return name

    def pick(self, type_: str) -> str:
        have = self.values.get(type_)
        if have and self.rng.random() < 0.85:
            return self.rng.choice(have)
        return self.constant(type_)

    def constant(self, type_: str) -> str:
        if type_ in FLOATS:
            value = self.rng.choice(
                ["0.0", "-0.0", "1.0", "-1.5", "0.5", "2.5", "-2.5", "3.0e+09", "1.0e+20",
                 "0x7FC00000" if type_ == "f32" else "0x7FF8000000000000",
                 "0x7F800000" if type_ == "f32" else "0x7FF0000000000000",
                 "0xFF800000" if type_ == "f32" else "0xFFF0000000000000",
                 "0x00000001" if type_ == "f32" else "0x0000000000000001",
                 "4.2949673e+09", "-2.1474836e+09", "127.5", "-128.5", "65535.5"]
            )  # fmt: skip
        elif type_ == "i1":
            value = self.rng.choice(["true", "false"])
        else:
            bits = BITS[type_]
            value = str(
                self.rng.choice(
                    [0, 1, -1, 2, 3, -3, 7, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1,
                     self.rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)]
                )
            )  # fmt: skip
        if type_ == "i1":
            return self.new(type_, f"arith.constant {value}")
        return self.new(type_, f"arith.constant {value} : {type_}")


def int_edges(rng: random.Random, dtype: type, n: int) -> np.ndarray:
    info = np.iinfo(dtype)
    pool = [0, 1, -1, 2, -2, 3, 7, -8, info.min, info.max, info.min + 1, info.max - 1]
    out = [rng.choice(pool) if rng.random() < 0.6 else rng.randint(info.min, info.max)
           for _ in range(n)]  # fmt: skip
    return np.array(out, dtype)


def float_edges(rng: random.Random, dtype: type, n: int) -> np.ndarray:
    pool = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan,
            3e9, -3e9, 1e20, -1e20, 5e-324, 1e-40, 2147483647.0, -2147483648.0, 4294967295.0,
            127.5, -128.5, 255.5, 32767.5, 65535.0, 9.3e18, -9.3e18, 1.8e19]  # fmt: skip
    out = [rng.choice(pool) if rng.random() < 0.6 else rng.uniform(-300, 300) for _ in range(n)]
    with np.errstate(over="ignore"):
        return np.array(out, np.float64).astype(dtype)


# --- scalar arithmetic -------------------------------------------------------------------

_INT_BINARY = ("addi", "subi", "muli", "andi", "ori", "xori", "maxsi", "minsi", "maxui", "minui")
_SIGNED_DIV = ("divsi", "remsi", "floordivsi", "ceildivsi")
_UNSIGNED_DIV = ("divui", "remui", "ceildivui")
_SHIFTS = ("shli", "shrsi", "shrui")
_FLOAT_BINARY = ("addf", "subf", "mulf", "divf", "maximumf", "minimumf", "maxnumf", "minnumf",
                 "remf")  # fmt: skip
_FLOAT_MATH = ("math.absf", "math.floor", "math.ceil", "math.round", "math.roundeven",
               "math.trunc", "math.sqrt", "arith.negf")  # fmt: skip
_CMPI = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_CMPF = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
         "ule", "une", "uno", "true")  # fmt: skip


def _nonzero(body: _Body, type_: str, value: str) -> str:
    zero = body.new(type_, f"arith.constant 0 : {type_}")
    one = body.new(type_, f"arith.constant 1 : {type_}")
    is_zero = body.new("i1", f"arith.cmpi eq, {value}, {zero} : {type_}")
    return body.new(type_, f"arith.select {is_zero}, {one}, {value} : {type_}")


def _no_overflow(body: _Body, type_: str, x: str, y: str) -> str:
    """y, made 1 where it is 0 or where x / y overflows (x the least value, y = -1)."""
    y = _nonzero(body, type_, y)
    least = -(2 ** (BITS[type_] - 1))
    low = body.new(type_, f"arith.constant {least} : {type_}")
    minus = body.new(type_, f"arith.constant -1 : {type_}")
    one = body.new(type_, f"arith.constant 1 : {type_}")
    a = body.new("i1", f"arith.cmpi eq, {x}, {low} : {type_}")
    b = body.new("i1", f"arith.cmpi eq, {y}, {minus} : {type_}")
    both = body.new("i1", f"arith.andi {a}, {b} : i1")
    return body.new(type_, f"arith.select {both}, {one}, {y} : {type_}")


def _int_op(body: _Body, type_: str) -> None:
    rng = body.rng
    x, y = body.pick(type_), body.pick(type_)
    kind = rng.random()
    if kind < 0.35:
        op = rng.choice(_INT_BINARY)
        body.new(type_, f"arith.{op} {x}, {y} : {type_}")
    elif kind < 0.5:
        op = rng.choice(_SIGNED_DIV)
        y = _no_overflow(body, type_, x, y)
        body.new(type_, f"arith.{op} {x}, {y} : {type_}")
    elif kind < 0.6:
        op = rng.choice(_UNSIGNED_DIV)
        y = _nonzero(body, type_, y)
        body.new(type_, f"arith.{op} {x}, {y} : {type_}")
    elif kind < 0.75:
        op = rng.choice(_SHIFTS)
        mask = body.new(type_, f"arith.constant {BITS[type_] - 1} : {type_}")
        y = body.new(type_, f"arith.andi {y}, {mask} : {type_}")
        body.new(type_, f"arith.{op} {x}, {y} : {type_}")
    elif kind < 0.9:
        p = body.new("i1", f"arith.cmpi {rng.choice(_CMPI)}, {x}, {y} : {type_}")
        body.new(type_, f"arith.select {p}, {x}, {y} : {type_}")
    else:
        body.new(type_, f"arith.{rng.choice(('addi', 'muli', 'subi'))} {x}, {y} : {type_}")


_INDEX_PLAIN = ("add", "sub", "mul", "maxs", "maxu", "mins", "minu", "and", "or", "xor")
_INDEX_DIV = ("divs", "ceildivs", "floordivs", "rems")
_INDEX_DIVU = ("divu", "ceildivu", "remu")


def _index_op(body: _Body) -> None:
    """An op of the index dialect, its divisor made safe as for arith."""
    rng = body.rng
    x, y = body.pick("index"), body.pick("index")
    kind = rng.random()
    if kind < 0.4:
        body.new("index", f"index.{rng.choice(_INDEX_PLAIN)} {x}, {y}")
    elif kind < 0.6:
        y = _no_overflow(body, "index", x, y)
        body.new("index", f"index.{rng.choice(_INDEX_DIV)} {x}, {y}")
    elif kind < 0.7:
        y = _nonzero(body, "index", y)
        body.new("index", f"index.{rng.choice(_INDEX_DIVU)} {x}, {y}")
    elif kind < 0.8:
        mask = body.new("index", "arith.constant 63 : index")
        y = body.new("index", f"arith.andi {y}, {mask} : index")
        body.new("index", f"index.{rng.choice(('shl', 'shrs', 'shru'))} {x}, {y}")
    elif kind < 0.9:
        t = rng.choice(("i8", "i32", "i64"))
        op = rng.choice(("casts", "castu"))
        if rng.random() < 0.5:
            body.new(t, f"index.{op} {x} : index to {t}")
        else:
            body.new("index", f"index.{op} {body.pick(t)} : {t} to index")
    else:
        p = rng.choice(("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"))
        c = body.new("i1", f"index.cmp {p}({x}, {y})")
        body.new("index", f"arith.select {c}, {x}, {y} : index")


def _float_op(body: _Body, type_: str) -> None:
    rng = body.rng
    x, y = body.pick(type_), body.pick(type_)
    kind = rng.random()
    if kind < 0.45:
        body.new(type_, f"arith.{rng.choice(_FLOAT_BINARY)} {x}, {y} : {type_}")
    elif kind < 0.7:
        body.new(type_, f"{rng.choice(_FLOAT_MATH)} {x} : {type_}")
    elif kind < 0.8:
        body.new(type_, f"math.copysign {x}, {y} : {type_}")
    elif kind < 0.88:
        z = body.pick(type_)
        body.new(type_, f"math.fma {x}, {y}, {z} : {type_}")
    else:
        p = body.new("i1", f"arith.cmpf {rng.choice(_CMPF)}, {x}, {y} : {type_}")
        body.new(type_, f"arith.select {p}, {x}, {y} : {type_}")


def _float_to_int(body: _Body, source: str, target: str, signed: bool) -> None:
    """fptosi/fptoui, the operand made 0 where the result would not fit (NaN too)."""
    bits = BITS[target]
    low, high = (-(2.0 ** (bits - 1)) - 1.0, 2.0 ** (bits - 1)) if signed else (-1.0, 2.0**bits)
    x = body.pick(source)
    lo = body.new(source, f"arith.constant {low:.17e} : {source}")
    hi = body.new(source, f"arith.constant {high:.17e} : {source}")
    zero = body.new(source, f"arith.constant 0.0 : {source}")
    a = body.new("i1", f"arith.cmpf ogt, {x}, {lo} : {source}")
    b = body.new("i1", f"arith.cmpf olt, {x}, {hi} : {source}")
    ok = body.new("i1", f"arith.andi {a}, {b} : i1")
    safe = body.new(source, f"arith.select {ok}, {x}, {zero} : {source}")
    op = "fptosi" if signed else "fptoui"
    body.new(target, f"arith.{op} {safe} : {source} to {target}")


def _cast(body: _Body) -> None:
    rng = body.rng
    kind = rng.random()
    if kind < 0.3:
        a, b = rng.sample(INTS, 2)
        x = body.pick(a)
        if BITS[a] < BITS[b]:
            body.new(b, f"arith.{rng.choice(('extsi', 'extui'))} {x} : {a} to {b}")
        else:
            body.new(b, f"arith.trunci {x} : {a} to {b}")
    elif kind < 0.45:
        a = rng.choice(INTS)
        op = rng.choice(("index_cast", "index_castui"))
        if rng.random() < 0.5:
            body.new("index", f"arith.{op} {body.pick(a)} : {a} to index")
        else:
            body.new(a, f"arith.{op} {body.pick('index')} : index to {a}")
    elif kind < 0.6:
        a, f = rng.choice(INTS), rng.choice(FLOATS)
        op = rng.choice(("sitofp", "uitofp"))
        body.new(f, f"arith.{op} {body.pick(a)} : {a} to {f}")
    elif kind < 0.8:
        _float_to_int(body, rng.choice(FLOATS), rng.choice(INTS), rng.random() < 0.5)
    elif kind < 0.9:
        if rng.random() < 0.4:
            body.new("f64", f"arith.extf {body.pick('f32')} : f32 to f64")
        else:
            mode = rng.choice(["", "", " to_nearest_even", " downward", " upward", " toward_zero",
                               " to_nearest_away"])  # fmt: skip
            body.new("f32", f"arith.truncf {body.pick('f64')}{mode} : f64 to f32")
    else:
        a = rng.choice(INTS)
        body.new(a, f"arith.extui {body.pick('i1')} : i1 to {a}")


def scalar_case(rng: random.Random, ops: int = 40) -> Case:
    n = rng.randint(1, 8)
    body = _Body(rng)
    types = [*INTS, *FLOATS]
    for t in types:
        body.new(t, f"memref.load %in_{t}[%i] : memref<{n}x{t}>")
    body.new("index", "arith.addi %i, %i : index")
    for _ in range(ops):
        choice = rng.random()
        if choice < 0.1:
            _index_op(body)
        elif choice < 0.4:
            _int_op(body, rng.choice([*INTS, "index"]))
        elif choice < 0.7:
            _float_op(body, rng.choice(FLOATS))
        else:
            _cast(body)
    stores: list[str] = []
    outs = {t: rng.sample(body.values[t], min(3, len(body.values[t]))) for t in types}
    for t in types:
        for k, v in enumerate(outs[t]):
            stores.append(f"memref.store {v}, %out_{t}[%c{k}, %i] : memref<3x{n}x{t}>")
    ins = ", ".join(f"%in_{t}: memref<{n}x{t}>" for t in types)
    outs_text = ", ".join(f"%out_{t}: memref<3x{n}x{t}>" for t in types)
    lines = [
        f"func.func @main({ins}, {outs_text}) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        "  %c2 = arith.constant 2 : index",
        f"  %n = arith.constant {n} : index",
        "  scf.for %i = %c0 to %n step %c1 {",
        *("    " + line for line in body.lines + stores),
        "  }",
        "  return",
        "}",
    ]
    inputs: list[np.ndarray] = []
    for t in types:
        dtype = DTYPES[t]
        make = int_edges if t in INTS else float_edges
        inputs.append(make(rng, dtype, n))
    inputs += [np.zeros((3, n), DTYPES[t]) for t in types]
    return Case("\n".join(lines) + "\n", inputs, "scalar")


FAMILIES: dict[str, Callable[[random.Random], Case]] = {"scalar": scalar_case}


# --- loop nests the optimizer rewrites ----------------------------------------------------


def _expr(
    rng: random.Random, leaves: list[str], type_: str, depth: int = 0
) -> tuple[str, list[str]]:
    """A random float expression over `leaves`: its result name and its lines."""
    if depth > 2 or rng.random() < 0.3:
        return rng.choice(leaves), []
    lines: list[str] = []
    a, la = _expr(rng, leaves, type_, depth + 1)
    name = f"%e{rng.randrange(10**9)}"
    if rng.random() < 0.1:
        return name, [*la, f"{name} = arith.negf {a} : {type_}"]
    b, lb = _expr(rng, leaves, type_, depth + 1)
    op = rng.choice(("addf", "addf", "mulf", "mulf", "subf", "divf", "maximumf", "minimumf"))
    lines = [*la, *lb, f"{name} = arith.{op} {a}, {b} : {type_}"]
    return name, lines


@dataclass
class _Nest:
    """Text of one loop nest over memrefs named in `shapes`, in scf or affine form."""

    rng: random.Random
    affine: bool
    type_: str
    shapes: dict[str, tuple[int, ...]]
    lines: list[str] = field(default_factory=list)
    depth: int = 1
    # memrefs that are views of larger arguments: name -> (the argument's shape, offsets)
    views: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

    def put(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def open(
        self, var: str, lo: str, hi: str, step: int = 1, carry: str = "", result: str = ""
    ) -> None:
        """A loop; `lo`, `hi` are affine expressions of outer loop variables."""
        head = f"{result} = " if result else ""
        if self.affine:
            lo_b, hi_b = self._bound(lo), self._bound(hi)
            self.put(f"{head}affine.for {var} = {lo_b} to {hi_b} step {step}{carry} {{")
        else:
            lo_v, hi_v = self._value(lo), self._value(hi)
            step_v = self._value(str(step))
            self.put(f"{head}scf.for {var} = {lo_v} to {hi_v} step {step_v}{carry} {{")
        self.depth += 1

    def close(self, line: str = "") -> None:
        if line:
            self.put(line)
        self.depth -= 1
        self.put("}")

    def _bound(self, expr: str) -> str:
        names = sorted(set(_VAR.findall(expr)))
        if not names:
            return expr
        dims = ", ".join(f"d{k}" for k in range(len(names)))
        body = expr
        for k, n in enumerate(names):
            body = body.replace(n, f"d{k}")
        return f"affine_map<({dims}) -> ({body})>({', '.join(names)})"

    def _value(self, expr: str) -> str:
        """An index value for an affine expression of loop variables, in scf form."""
        names = sorted(set(_VAR.findall(expr)))
        name = f"%x{self.rng.randrange(10**9)}"
        if not names:
            self.put(f"{name} = arith.constant {expr} : index")
            return name
        dims = ", ".join(f"d{k}" for k in range(len(names)))
        body = expr
        for k, n in enumerate(names):
            body = body.replace(n, f"d{k}")
        self.put(f"{name} = affine.apply affine_map<({dims}) -> ({body})>({', '.join(names)})")
        return name

    def load(self, memref: str, subscripts: list[str]) -> str:
        name = f"%l{self.rng.randrange(10**9)}"
        self.put(f"{name} = {self._access('load', memref, subscripts)} : {self._type(memref)}")
        return name

    def store(self, value: str, memref: str, subscripts: list[str]) -> None:
        self.put(f"{self._access('store', memref, subscripts, value)} : {self._type(memref)}")

    def _type(self, memref: str) -> str:
        shape = "x".join(map(str, self.shapes[memref]))
        if memref not in self.views:
            return f"memref<{shape}x{self.type_}>"
        big, offsets = self.views[memref]
        strides = _row_major(big)
        offset = sum(o * t for o, t in zip(offsets, strides))
        layout = f"strided<[{', '.join(map(str, strides))}], offset: {offset}>"
        return f"memref<{shape}x{self.type_}, {layout}>"

    def view_lines(self) -> list[str]:
        lines = []
        for name, (big, offsets) in self.views.items():
            shape = self.shapes[name]
            big_t = f"memref<{'x'.join(map(str, big))}x{self.type_}>"
            lines.append(
                f"  %{name} = memref.subview %{name}big[{', '.join(map(str, offsets))}]"
                f" [{', '.join(map(str, shape))}] [{', '.join('1' for _ in shape)}]"
                f" : {big_t} to {self._type(name)}"
            )
        return lines

    def _access(self, kind: str, memref: str, subscripts: list[str], value: str = "") -> str:
        what = f"{value}, " if value else ""
        if self.affine:
            return f"affine.{kind} {what}%{memref}[{', '.join(subscripts)}]"
        values = [s if _VAR.fullmatch(s) else self._value(s) for s in subscripts]
        return f"memref.{kind} {what}%{memref}[{', '.join(values)}]"


_VAR = re.compile(r"%[a-z]\w*")


def _leaves(nest: _Nest, reads: list[tuple[str, list[str]]], type_: str) -> list[str]:
    leaves = [nest.load(m, s) for m, s in reads]
    c = f"%k{nest.rng.randrange(10**9)}"
    nest.put(
        f"{c} = arith.constant {nest.rng.choice(['1.5', '-0.5', '2.0', '0.0', '-0.0'])} : {type_}"
    )
    return [*leaves, c]


def nest_case(rng: random.Random) -> Case:
    type_ = rng.choice(FLOATS)
    m, n, k = rng.randint(1, 9), rng.randint(1, 37), rng.randint(1, 7)
    square = max(m, n, k)
    shapes = {"A": (m, k), "B": (k, n), "C": (m, n), "D": (m, n), "x": (square,), "y": (square,),
              "S": (square, square)}  # fmt: skip
    nest = _Nest(rng, rng.random() < 0.5, type_, shapes)
    if rng.random() < 0.35:
        for name in rng.sample(["A", "B", "C", "D", "S"], rng.randint(1, 3)):
            extra = [rng.randint(0, 3) for _ in shapes[name]]
            big = tuple(s + e for s, e in zip(shapes[name], extra))
            nest.views[name] = (big, tuple(rng.randint(0, e) for e in extra))
    form = rng.choice(("ikj", "ikj", "kinner", "kinner", "rowsum", "memory", "norow", "square"))
    getattr(_NestForms, form)(nest, m, n, k, square)
    params, inputs = [], []
    for name, shape in shapes.items():
        if name in nest.views:
            big = nest.views[name][0]
            params.append(f"%{name}big: memref<{'x'.join(map(str, big))}x{type_}>")
            inputs.append(_float_data(rng, DTYPES[type_], big))
        else:
            params.append(f"%{name}: {nest._type(name)}")
            inputs.append(_float_data(rng, DTYPES[type_], shape))
    text = "\n".join(
        [
            f"func.func @main({', '.join(params)}) {{",
            *nest.view_lines(),
            *nest.lines,
            "  return",
            "}",
        ]
    )
    return Case(text + "\n", inputs, "nest")


def _float_data(rng: random.Random, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape))
    if rng.random() < 0.7:
        values = [rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 3.0, 0.25]) for _ in range(size)]
    else:
        values = list(float_edges(rng, np.float64, size))
    return np.array(values, np.float64).astype(dtype).reshape(shape)


def _columns(rng: random.Random, i: str, m: int, n: int) -> tuple[str, str]:
    """Bounds of a column loop under row `i` (rows < m, columns < n)."""
    choice = rng.random()
    if choice < 0.5 or n < m:
        lo = rng.choice(["0", "0", "1", str(n // 2)])
        return lo, str(n) if int(lo) < n else str(n)
    if choice < 0.75:
        return "0", f"{i} + 1"
    if choice < 0.9:
        return i, str(n)
    return f"{i} * 2" if 2 * m <= n else "0", str(n)


class _NestForms:
    @staticmethod
    def ikj(nest: _Nest, m: int, n: int, k: int, square: int) -> None:
        rng = nest.rng
        t = nest.type_
        row_lo = rng.choice(["0", "0", "1"]) if m > 1 else "0"
        nest.open("%i", row_lo, str(m))
        shift = rng.choice(["", "", "", " - 1"]) if row_lo == "1" else ""
        if rng.random() < 0.2:
            v = nest.load("C", ["%i", "0"])
            nest.store(v, "D", ["%i", "0"])
        k_hi = str(k) if rng.random() < 0.8 or k < m else "%i + 1"
        nest.open("%k", "0", k_hi, rng.choice([1, 1, 1, 2]))
        lo, hi = _columns(rng, "%i", m, n)
        nest.open("%j", lo, hi)
        a = ("A", ["%i", "%k"]) if rng.random() < 0.8 else ("x", ["%k"])
        b = ("B", ["%k", "%j"]) if rng.random() < 0.8 else ("D", ["%i", "%j"])
        c_row = "%i" + shift
        reads = [("C", [c_row, "%j"]), a, b]
        if rng.random() < 0.3:
            reads.append(("D", ["%i", "%j"]))
        leaves = _leaves(nest, reads, t)
        value, lines = _expr(rng, leaves, t)
        for line in lines:
            nest.put(line)
        if rng.random() < 0.7:  # a plain update keeps the nest a contraction
            value = _mul_into(nest, leaves[0], leaves[1], leaves[2], ("addf", "subf"))
        target = rng.choice(["C", "C", "C", "D"])
        nest.store(value, target, ["%i", "%j"])
        nest.close()
        nest.close()
        if rng.random() < 0.2:
            v = nest.load("C", ["%i", "0"])
            nest.store(v, "D", ["%i", "0"])
        nest.close()

    @staticmethod
    def kinner(nest: _Nest, m: int, n: int, k: int, square: int) -> None:
        rng = nest.rng
        t = nest.type_
        nest.open("%i", "0", str(m))
        lo, hi = _columns(rng, "%i", m, n)
        nest.open("%j", lo, hi)
        init = nest.load("C", ["%i", "%j"]) if rng.random() < 0.5 else _zero(nest, t)
        acc = "%acc"
        k_lo = rng.choice(["0", "0", "1"]) if k > 1 else "0"
        carry = f" iter_args({acc} = {init}) -> ({t})"
        res = f"%s{rng.randrange(10**9)}"
        nest.open("%k", k_lo, str(k), 1, carry, res)
        b = ("B", ["%k", "%j"]) if rng.random() < 0.8 else ("S", ["%j", "%k"])
        leaves = _leaves(nest, [("A", ["%i", "%k"]), b], t)
        value, lines = _expr(rng, [*leaves, acc], t)
        for line in lines:
            nest.put(line)
        if rng.random() < 0.7:
            value = _mul_into(nest, acc, leaves[0], leaves[1], ("addf",))
        nest.close(f"{'affine' if nest.affine else 'scf'}.yield {value} : {t}")
        out = res
        if rng.random() < 0.4:
            old = nest.load("C", ["%i", "%j"])
            out2 = f"%o{rng.randrange(10**9)}"
            nest.put(f"{out2} = arith.{rng.choice(['addf', 'mulf'])} {old}, {res} : {t}")
            out = out2
        nest.store(out, "C", ["%i", "%j"])
        nest.close()
        nest.close()

    @staticmethod
    def rowsum(nest: _Nest, m: int, n: int, k: int, square: int) -> None:
        rng = nest.rng
        t = nest.type_
        nest.open("%i", rng.choice(["0", "1"]) if m > 1 else "0", str(m))
        lo, hi = _columns(rng, "%i", m, n) if rng.random() < 0.5 or n < m else ("0", "%i")
        nest.open("%j", lo, hi)
        old = nest.load("x", ["%i"])
        a = nest.load("C", ["%i", "%j"])
        v = nest.load("y", ["%j"] if rng.random() < 0.8 else ["%i"])
        extra, lines = _expr(rng, [a, v, old], t)
        for line in lines:
            nest.put(line)
        p = f"%p{rng.randrange(10**9)}"
        nest.put(f"{p} = arith.mulf {a}, {v} : {t}")
        s = f"%q{rng.randrange(10**9)}"
        nest.put(f"{s} = arith.addf {old}, {p if rng.random() < 0.7 else extra} : {t}")
        nest.store(s, "x", ["%i"])
        nest.close()
        nest.close()

    @staticmethod
    def memory(nest: _Nest, m: int, n: int, k: int, square: int) -> None:
        """y[j] op= C[k, j] * x[k], C's rows outside."""
        loops = [("%k", m), ("%j", n)]
        _vector_update(nest, ("y", "%j"), ("x", "%k"), loops, ("addf", "subf", "maximumf"))

    @staticmethod
    def norow(nest: _Nest, m: int, n: int, k: int, square: int) -> None:
        """x[i] += C[j, i] * y[j], C's columns outside."""
        _vector_update(nest, ("x", "%i"), ("y", "%j"), [("%i", n), ("%j", m)], ("addf",))

    @staticmethod
    def square(nest: _Nest, m: int, n: int, k: int, square: int) -> None:
        """In place on one square array: S[i, j] updated from other rows of S."""
        rng = nest.rng
        t = nest.type_
        nest.open("%i", "1", str(square))
        nest.open("%k", "0", rng.choice(["%i", str(square)]))
        nest.open("%j", "0", rng.choice(["%i", str(square), "%i + 1"]))
        leaves = _leaves(
            nest,
            [
                ("S", ["%i", "%j"]),
                ("S", ["%i", "%k"]),
                ("S", [rng.choice(["%k", "%i - 1", "%j"]), "%j"]),
            ],
            t,
        )
        upd = _mul_into(nest, leaves[0], leaves[1], leaves[2], ("subf",))
        nest.store(upd, "S", ["%i", "%j"])
        nest.close()
        nest.close()
        nest.close()


def _mul_into(nest: _Nest, acc: str, x: str, y: str, ops: tuple[str, ...]) -> str:
    """`acc OP x * y`, put in the nest, with OP one of `ops` (drawn only from several);
    the result's name."""
    product = f"%p{nest.rng.randrange(10**9)}"
    nest.put(f"{product} = arith.mulf {x}, {y} : {nest.type_}")
    result = f"%u{nest.rng.randrange(10**9)}"
    op = ops[0] if len(ops) == 1 else nest.rng.choice(ops)
    nest.put(f"{result} = arith.{op} {acc}, {product} : {nest.type_}")
    return result


def _vector_update(
    nest: _Nest,
    out: tuple[str, str],
    vector: tuple[str, str],
    loops: list[tuple[str, int]],
    ops: tuple[str, ...],
) -> None:
    """`out[o] = out[o] OP C[v, o] * vector[v]` in two loops from 0 (`loops`: variable and
    end, outer first), where `out` and `vector` are (memref, its loop variable)."""
    for var, end in loops:
        nest.open(var, "0", str(end))
    (name, o), (vector_name, v) = out, vector
    old = nest.load(name, [o])
    a = nest.load("C", [v, o])
    x = nest.load(vector_name, [v])
    nest.store(_mul_into(nest, old, a, x, ops), name, [o])
    nest.close()
    nest.close()


def _zero(nest: _Nest, type_: str) -> str:
    name = f"%z{nest.rng.randrange(10**9)}"
    nest.put(f"{name} = arith.constant 0.0 : {type_}")
    return name


FAMILIES["nest"] = nest_case


# --- affine maps of negative values -------------------------------------------------------


def _affine_expr(rng: random.Random, names: list[str], depth: int = 0) -> str:
    if depth > 2 or rng.random() < 0.3:
        return rng.choice([*names, str(rng.randint(-9, 9))])
    a = _affine_expr(rng, names, depth + 1)
    choice = rng.random()
    if choice < 0.4:
        return f"({a} {rng.choice(['floordiv', 'ceildiv', 'mod'])} {rng.randint(1, 7)})"
    if choice < 0.6:
        return f"({a} * {rng.randint(-4, 4)})"
    b = _affine_expr(rng, names, depth + 1)
    return f"({a} {rng.choice(['+', '-'])} {b})"


def affine_case(rng: random.Random) -> Case:
    span = rng.randint(1, 12)
    n = 2 * span
    outs = rng.randint(1, 6)
    lines = [
        f"func.func @main(%a: index, %b: index, %o: memref<{outs}x{n}xi64>) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  affine.for %i = {-span} to {span} {{",
        f"    %at = affine.apply affine_map<(d0) -> (d0 + {span})>(%i)",
    ]
    names = ["d0", "d1", "s0"]
    operands = "(%i, %a)[%b]"
    for r in range(outs):
        kind = rng.random()
        if kind < 0.4:
            e = _affine_expr(rng, names)
            lines.append(f"    %r{r} = affine.apply affine_map<(d0, d1)[s0] -> ({e})>{operands}")
        elif kind < 0.6:
            op = rng.choice(["min", "max"])
            es = ", ".join(_affine_expr(rng, names) for _ in range(rng.randint(1, 3)))
            lines.append(f"    %r{r} = affine.{op} affine_map<(d0, d1)[s0] -> ({es})>{operands}")
        elif kind < 0.8:
            # a loop whose bounds are maps of the values: a sum of its counter's values
            lo = ", ".join(_affine_expr(rng, names) for _ in range(rng.randint(1, 2)))
            hi = ", ".join(_affine_expr(rng, names) for _ in range(rng.randint(1, 2)))
            step = rng.randint(1, 3)
            mod = rng.randint(1, 5)
            lines += [
                f"    %r{r} = affine.for %t = max affine_map<(d0, d1)[s0] -> ({lo})>{operands}"
                f" to min affine_map<(d0, d1)[s0] -> ({hi})>{operands} step {step}"
                " iter_args(%s = %c0) -> (index) {",
                f"      %u = affine.apply affine_map<(d0, d1) -> (d0 * 3 + d1 mod {mod})>(%s, %t)",
                "      affine.yield %u : index",
                "    }",
            ]
        else:
            e1, e2 = _affine_expr(rng, names), _affine_expr(rng, names)
            cmp = rng.choice([">= 0", "== 0"])
            e3 = _affine_expr(rng, ["d0", "s0"])
            lines += [
                f"    %r{r} = affine.if affine_set<(d0, d1)[s0] : ({e1} {cmp}, {e2} >= 0)>"
                f"{operands} -> index {{",
                "      affine.yield %c1 : index",
                "    } else {",
                f"      %e{r} = affine.apply affine_map<(d0)[s0] -> ({e3})>(%i)[%b]",
                f"      affine.yield %e{r} : index",
                "    }",
            ]
        lines += [
            f"    %q{r} = arith.index_cast %r{r} : index to i64",
            f"    affine.store %q{r}, %o[{r}, %at] : memref<{outs}x{n}xi64>",
        ]
    lines += ["  }", "  return", "}"]
    a, b = rng.randint(-25, 25), rng.randint(-25, 25)
    return Case("\n".join(lines) + "\n", [a, b, np.zeros((outs, n), np.int64)], "affine")


FAMILIES["affine"] = affine_case


# --- memref views -------------------------------------------------------------------------


@dataclass
class _View:
    name: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dynamic_offset: bool = False  # the offset is known only at run time

    def type_(self, elem: str) -> str:
        shape = "x".join(map(str, self.sizes))
        if self.strides == _row_major(self.sizes) and self.offset == 0:
            if not self.dynamic_offset:
                return f"memref<{shape}x{elem}>"
        strides = ", ".join(map(str, self.strides))
        offset = "?" if self.dynamic_offset else self.offset
        return f"memref<{shape}x{elem}, strided<[{strides}], offset: {offset}>>"

    def dynamic_type(self, elem: str) -> str:
        shape = "x".join("?" for _ in self.sizes)
        strides = ", ".join("?" for _ in self.sizes)
        return f"memref<{shape}x{elem}, strided<[{strides}], offset: ?>>"


def _row_major(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, run = [], 1
    for size in reversed(sizes):
        strides.append(run)
        run *= size
    return tuple(reversed(strides))


def _subview(rng: random.Random, view: _View, name: str, elem: str) -> tuple[_View, str]:
    offsets, sizes, steps = [], [], []
    for size in view.sizes:
        step = rng.choice([1, 1, 2, 3])
        off = rng.randint(0, size - 1) if rng.random() < 0.5 else rng.randint(0, 1) % size
        most = (size - 1 - off) // step + 1
        count = most if rng.random() < 0.5 else rng.randint(1, most)
        offsets.append(off)
        sizes.append(count)
        steps.append(step)
    new = _View(
        name,
        tuple(sizes),
        tuple(s * t for s, t in zip(view.strides, steps)),
        view.offset + sum(o * s for o, s in zip(offsets, view.strides)),
    )
    line = (
        f"{name} = memref.subview {view.name}[{', '.join(map(str, offsets))}]"
        f" [{', '.join(map(str, sizes))}] [{', '.join(map(str, steps))}]"
        f" : {view.type_(elem)} to {new.type_(elem)}"
    )
    return new, line


def _reinterpret(rng: random.Random, base: _View, name: str, elem: str) -> tuple[_View, str]:
    total = base.sizes[0] * base.sizes[1]
    rank = rng.choice([1, 2])
    while True:
        if rank == 1:
            step = rng.choice([1, 2, 3])
            size = rng.randint(1, total)
            strides: tuple[int, ...] = (step,)
            sizes: tuple[int, ...] = (size,)
        else:
            sizes = (rng.randint(1, 4), rng.randint(1, 4))
            strides = (rng.choice([1, 2, 3, 4, 5]), rng.choice([0, 1, 2]))
        extent = sum((s - 1) * t for s, t in zip(sizes, strides))
        if extent < total:
            break
        rank = 1
    offset = rng.randint(0, total - 1 - extent)
    new = _View(name, sizes, strides, offset)
    line = (
        f"{name} = memref.reinterpret_cast {base.name} to offset: [{offset}],"
        f" sizes: [{', '.join(map(str, sizes))}], strides: [{', '.join(map(str, strides))}]"
        f" : {base.type_(elem)} to {new.type_(elem)}"
    )
    return new, line


def _loop_over(view_type: str, rank: int, dims: list[str], body: list[str]) -> list[str]:
    lines: list[str] = []
    for d in range(rank):
        lines.append("  " * d + f"scf.for %j{d} = %c0 to {dims[d]} step %c1 {{")
    lines += ["  " * rank + line for line in body]
    lines += ["  " * d + "}" for d in reversed(range(rank))]
    return lines


def view_case(rng: random.Random) -> Case:
    elem = rng.choice(["i32", "f64"])
    rows, cols = rng.randint(1, 6), rng.randint(1, 7)
    base = _View("%base", (rows, cols), (cols, 1), 0)
    lines: list[str] = []
    offsets = [0, 0]  # the run-time offsets, where a subview takes them so
    chain = rng.choice(["sub", "subsub", "rc", "rcsub", "collapse", "expand", "sub", "row", "col"])
    if chain in ("row", "col"):  # a subview dropping a dimension of size 1
        keep = 1 if chain == "row" else 0
        fixed = rng.randint(0, base.sizes[1 - keep] - 1)
        step = rng.choice([1, 2])
        off = rng.randint(0, base.sizes[keep] - 1)
        count = rng.randint(1, (base.sizes[keep] - 1 - off) // step + 1)
        offsets = [fixed, off] if chain == "row" else [off, fixed]
        sizes = [1, count] if chain == "row" else [count, 1]
        steps = [1, step] if chain == "row" else [step, 1]
        view = _View("%v1", (count,), (base.strides[keep] * step,),
                     sum(o * t for o, t in zip(offsets, base.strides)))  # fmt: skip
        lines.append(
            f"%v1 = memref.subview %base[{offsets[0]}, {offsets[1]}] [{sizes[0]}, {sizes[1]}]"
            f" [{steps[0]}, {steps[1]}] : {base.type_(elem)} to {view.type_(elem)}"
        )
    elif chain.startswith("sub"):
        view, line = _subview(rng, base, "%v1", elem)
        if chain == "sub" and rng.random() < 0.5:  # offsets read at run time
            where = divmod(view.offset, cols)
            offsets[:] = list(where)
            static = f"%base[{where[0]}, {where[1]}]"
            view = _View(view.name, view.sizes, view.strides, view.offset, True)
            line = line.replace(static, "%base[%d0, %d1]").split(" : ")[0]
            line += f" : {base.type_(elem)} to {view.type_(elem)}"
            lines += [f"%e{d} = memref.load %offsets[%c{d}] : memref<2xi64>" for d in range(2)]
            lines += [f"%d{d} = arith.index_cast %e{d} : i64 to index" for d in range(2)]
        lines.append(line)
        if chain == "subsub":
            view, line = _subview(rng, view, "%v2", elem)
            lines.append(line)
    elif chain.startswith("rc"):
        view, line = _reinterpret(rng, base, "%v1", elem)
        lines.append(line)
        if chain == "rcsub":
            view, line = _subview(rng, view, "%v2", elem)
            lines.append(line)
    else:
        flat = _View("%flat", (rows * cols,), (1,), 0)
        lines.append(
            f"%flat = memref.collapse_shape %base [[0, 1]] : {base.type_(elem)} into {flat.type_(elem)}"
        )
        view = flat
        if chain == "expand":
            view, line = _subview(rng, flat, "%v1", elem)
            lines.append(line)
            size = view.sizes[0]
            split = rng.choice([d for d in range(1, size + 1) if size % d == 0])
            sizes = (size // split, split)
            expanded = _View("%v2", sizes, (split * view.strides[0], view.strides[0]), view.offset)
            lines.append(
                f"%v2 = memref.expand_shape {view.name} [[0, 1]] output_shape [{sizes[0]}, {sizes[1]}]"
                f" : {view.type_(elem)} into {expanded.type_(elem)}"
            )
            view = expanded
    rank = len(view.sizes)
    out_shape = "x".join(map(str, view.sizes))
    one = "arith.constant 3 : i32" if elem == "i32" else "arith.constant 3.0 : f64"
    mul = "arith.muli" if elem == "i32" else "arith.mulf"
    add = "arith.addi" if elem == "i32" else "arith.addf"
    idx = ", ".join(f"%j{d}" for d in range(rank))
    use_call = rng.random() < 0.4
    vt = view.dynamic_type(elem) if use_call or rng.random() < 0.3 else view.type_(elem)
    if vt != view.type_(elem):
        lines.append(f"%dyn = memref.cast {view.name} : {view.type_(elem)} to {vt}")
        target = "%dyn"
    else:
        target = view.name
    body = [
        f"%x = memref.load %V[{idx}] : {vt}",
        f"%o = memref.load %out[{idx}] : memref<{out_shape}x{elem}>",
        f"%three = {one}",
        f"%y = {mul} %x, %three : {elem}",
        f"%z = {add} %y, %o : {elem}",
        f"memref.store %x, %out[{idx}] : memref<{out_shape}x{elem}>",
        f"memref.store %z, %V[{idx}] : {vt}",
    ]
    dims = []
    if "?" in vt:
        dims = [f"%dim{d}" for d in range(rank)]
        head = [f"%dim{d} = memref.dim %V, %k{d} : {vt}" for d in range(rank)]
        consts = [f"%k{d} = arith.constant {d} : index" for d in range(rank)]
        loop = consts + head + _loop_over(vt, rank, dims, body)
    else:
        loop = [f"%n{d} = arith.constant {s} : index" for d, s in enumerate(view.sizes)]
        loop += _loop_over(vt, rank, [f"%n{d}" for d in range(rank)], body)
    out_t = f"memref<{out_shape}x{elem}>"
    consts = ["%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index"]
    if use_call:
        callee = [f"func.func @update(%V: {vt}, %out: {out_t}) {{", *("  " + c for c in consts),
                  *("  " + line for line in loop), "  return", "}"]  # fmt: skip
        main_body = [*lines, f"func.call @update({target}, %out) : ({vt}, {out_t}) -> ()"]
    else:
        callee = []
        main_body = [*lines, *(line.replace("%V", target) for line in loop)]
    text = "\n".join([
        *callee,
        f"func.func @main(%base: {base.type_(elem)}, %out: {out_t}, %offsets: memref<2xi64>) {{",
        *("  " + c for c in consts),
        *("  " + line for line in main_body),
        "  return",
        "}",
    ]) + "\n"  # fmt: skip
    dtype = DTYPES[elem]
    data = np.array([rng.randint(-9, 9) for _ in range(rows * cols)], dtype).reshape(rows, cols)
    out = np.array([rng.randint(-9, 9) for _ in range(int(np.prod(view.sizes)))], dtype)
    where = np.array(offsets, np.int64)
    return Case(text, [data, out.reshape(view.sizes), where], "view")


FAMILIES["view"] = view_case


# --- control flow -------------------------------------------------------------------------


def _while(rng: random.Random, r: int, x: str) -> list[str]:
    """A counting scf.while from `x` (an i32 in [-60, 60]), carrying a sum; its counter in
    a random integer type, stepping by a constant to a bound, perhaps wrapping in i8."""
    t = rng.choice(["i8", "i16", "i32", "i64", "index"])
    step = rng.randint(1, 9)
    top = 2 ** (BITS[t] - 1) - 1
    # Near an i8's largest value the counter may wrap: an odd step reaches every value, so
    # one at or above the bound; an even one only every other, so the bound is kept where
    # the counter surely reaches it without wrapping.
    below = rng.randint(1, 12) if step % 2 else rng.randint(step - 1, 12)
    bound = rng.choice([rng.randint(-30, 60), top - below if t == "i8" else 70])
    if t == "index":
        start = [f"%s{r} = arith.index_cast {x} : i32 to index"]
    elif BITS[t] > 32:
        start = [f"%s{r} = arith.extsi {x} : i32 to {t}"]
    elif BITS[t] < 32:
        start = [f"%s{r} = arith.trunci {x} : i32 to {t}"]
    else:
        start = [f"%s{r} = arith.addi {x}, %zero : i32"]
    cond = (f"arith.cmpi slt, %p{r}, %b{r} : {t}" if rng.random() < 0.7
            else f"arith.cmpi sgt, %b{r}, %p{r} : {t}")  # fmt: skip
    if t == "index":
        widen = f"%w{r} = arith.index_cast %p2{r} : index to i32"
    elif BITS[t] > 32:
        widen = f"%w{r} = arith.trunci %p2{r} : {t} to i32"
    elif BITS[t] < 32:
        widen = f"%w{r} = arith.extsi %p2{r} : {t} to i32"
    else:
        widen = f"%w{r} = arith.addi %p2{r}, %zero : i32"
    step_first = rng.random() < 0.5
    add = f"arith.addi %st{r}, %p2{r} : {t}" if step_first else f"arith.addi %p2{r}, %st{r} : {t}"
    variant = rng.choice(["plain", "plain", "pre", "count", "swap"])
    before = [f"  %cond{r} = {cond}", f"  scf.condition(%cond{r}) %p{r}, %q{r} : {t}, i32"]
    after_next = f"  %next{r} = {add}"
    yielded = f"  scf.yield %next{r}, %n{r} : {t}, i32"
    if variant == "pre":  # the step taken in the condition's region
        before = [f"  %cond{r} = {cond}", f"  %pp{r} = arith.addi %p{r}, %st{r} : {t}",
                  f"  scf.condition(%cond{r}) %pp{r}, %q{r} : {t}, i32"]  # fmt: skip
        after_next = f"  %next{r} = arith.addi %p2{r}, %zero{r} : {t}"
    elif variant == "swap":  # a carried value changed on its way
        before = [f"  %cond{r} = {cond}", f"  %qt{r} = arith.trunci %q{r} : i32 to i8",
                  f"  %qx{r} = arith.extsi %qt{r} : i8 to i32",
                  f"  scf.condition(%cond{r}) %p{r}, %qx{r} : {t}, i32"]  # fmt: skip
    out = f"%out{r} = arith.addi %res{r}#1, %zero : i32"
    if variant == "count":  # the counter's last value used
        out = widen.replace(f"%w{r}", f"%out{r}").replace(f"%p2{r}", f"%res{r}#0")
    return [
        *start,
        f"%b{r} = arith.constant {bound} : {t}",
        f"%st{r} = arith.constant {step} : {t}",
        f"%zero{r} = arith.constant 0 : {t}",
        f"%res{r}:2 = scf.while (%p{r} = %s{r}, %q{r} = %seed) : ({t}, i32) -> ({t}, i32) {{",
        *before,
        "} do {",
        f"^bb0(%p2{r}: {t}, %q2{r}: i32):",
        f"  {widen}",
        f"  %m{r} = arith.muli %q2{r}, %three : i32",
        f"  %n{r} = arith.addi %m{r}, %w{r} : i32",
        after_next,
        yielded,
        "}",
        out,
    ]


def _if(rng: random.Random, r: int, x: str) -> list[str]:
    p = rng.choice(["slt", "sge", "eq", "ne", "ult"])
    c = rng.randint(-10, 10)
    inner = rng.random() < 0.5
    lines = [
        f"%k{r} = arith.constant {c} : i32",
        f"%cnd{r} = arith.cmpi {p}, {x}, %k{r} : i32",
        f"%if{r}:2 = scf.if %cnd{r} -> (i32, f32) {{",
        f"  %a{r} = arith.muli {x}, %three : i32",
        f"  %f{r} = arith.sitofp %a{r} : i32 to f32",
        f"  scf.yield %a{r}, %f{r} : i32, f32",
        "} else {",
    ]
    if inner:
        lines += [
            f"  %cnd2{r} = arith.cmpi sgt, {x}, %zero : i32",
            f"  %in{r} = scf.if %cnd2{r} -> (i32) {{",
            f"    %d{r} = arith.subi %zero, {x} : i32",
            f"    scf.yield %d{r} : i32",
            "  } else {",
            f"    scf.yield %k{r} : i32",
            "  }",
        ]
    else:
        lines.append(f"  %in{r} = arith.addi {x}, %k{r} : i32")
    lines += [
        f"  %g{r} = arith.constant -2.5 : f32",
        f"  scf.yield %in{r}, %g{r} : i32, f32",
        "}",
        f"%fi{r} = arith.fptosi %if{r}#1 : f32 to i32",
        f"%out{r} = arith.addi %if{r}#0, %fi{r} : i32",
    ]
    return lines


def _call(rng: random.Random, r: int, x: str, n: int) -> list[str]:
    return [
        f"%at{r} = arith.index_cast {x} : i32 to index",
        f"%clamped{r} = arith.remui %at{r}, %n : index",
        f"%out{r} = func.call @visit(%a, %clamped{r}, {x}) : (memref<{n}xi32>, index, i32) -> i32",
    ]


_VISIT = """func.func @visit(%m: memref<NNxi32>, %at: index, %x: i32) -> i32 {
  %v = memref.load %m[%at] : memref<NNxi32>
  %s = func.call @twice(%m, %at, %v) : (memref<?xi32>, index, i32) -> i32
  %r = arith.xori %s, %x : i32
  return %r : i32
}
func.func @twice(%m: memref<?xi32>, %at: index, %v: i32) -> i32 {
  %two = arith.constant 2 : i32
  %w = arith.muli %v, %two : i32
  %c0 = arith.constant 0 : index
  %first = memref.load %m[%c0] : memref<?xi32>
  %s = arith.addi %w, %first : i32
  return %s : i32
}
"""


def control_case(rng: random.Random) -> Case:
    n = rng.randint(1, 8)
    k = rng.randint(1, 5)
    body: list[str] = [f"%x = memref.load %a[%i] : memref<{n}xi32>"]
    for r in range(k):
        kind = rng.choice(["while", "while", "if", "call"])
        if kind == "while":
            body += _while(rng, r, "%x")
        elif kind == "if":
            body += _if(rng, r, "%x")
        else:
            body += _call(rng, r, "%x", n)
        body += [f"%kk{r} = arith.constant {r} : index",
                 f"memref.store %out{r}, %o[%kk{r}, %i] : memref<{k}x{n}xi32>"]  # fmt: skip
    visit = _VISIT.replace("NNxi32>, %at", f"{n}xi32>, %at").replace(
        "memref<NNxi32>", f"memref<{n}xi32>"
    )
    visit = visit.replace("@twice(%m, %at, %v)", "@twice(%mc, %at, %v)").replace(
        "  %s = func.call @twice",
        f"  %mc = memref.cast %m : memref<{n}xi32> to memref<?xi32>\n  %s = func.call @twice",
    )
    text = "\n".join([
        visit,
        f"func.func @main(%a: memref<{n}xi32>, %o: memref<{k}x{n}xi32>) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %n = arith.constant {n} : index",
        "  %zero = arith.constant 0 : i32",
        "  %three = arith.constant 3 : i32",
        "  %seed = arith.constant 7 : i32",
        "  scf.for %i = %c0 to %n step %c1 {",
        *("    " + line for line in body),
        "  }",
        "  return",
        "}",
    ]) + "\n"  # fmt: skip
    a = np.array([rng.randint(-60, 60) for _ in range(n)], np.int32)
    return Case(text, [a, np.zeros((k, n), np.int32)], "control")


FAMILIES["control"] = control_case


# --- linalg.generic -----------------------------------------------------------------------


def generic_case(rng: random.Random) -> Case:
    elem = rng.choice(["f64", "f32", "i32"])
    dims = rng.randint(2, 3)
    sizes = [rng.randint(1, 6) for _ in range(dims)]
    kinds = [rng.choice(["parallel", "parallel", "reduction"]) for _ in range(dims)]
    parallel = [d for d in range(dims) if kinds[d] == "parallel"]
    if not parallel:
        kinds[0], parallel = "parallel", [0]
    out_dims = parallel[:]
    rng.shuffle(out_dims)
    operands: list[tuple[list[str], list[int]]] = []  # (map results, shape)
    for _ in range(rng.randint(1, 2)):
        pick = rng.sample(range(dims), rng.randint(1, dims))
        results, shape = [], []
        for d in pick:
            if rng.random() < 0.2 and dims > 1:
                e = rng.choice([x for x in range(dims) if x != d])
                results.append(f"d{d} + d{e}")
                shape.append(sizes[d] + sizes[e] - 1)
            else:
                results.append(f"d{d}")
                shape.append(sizes[d])
        operands.append((results, shape))
    seen = {int(r[1:]) for results, _ in operands for r in results if "+" not in r}
    seen |= set(out_dims)
    missing = [d for d in range(dims) if d not in seen]
    if missing:
        operands.append(([f"d{d}" for d in missing], [sizes[d] for d in missing]))
    ds = ", ".join(f"d{d}" for d in range(dims))
    maps = [f"affine_map<({ds}) -> ({', '.join(r)})>" for r, _ in operands]
    maps.append(f"affine_map<({ds}) -> ({', '.join(f'd{d}' for d in out_dims)})>")
    out_shape = [sizes[d] for d in out_dims]

    def mt(shape: list[int]) -> str:
        return f"memref<{'x'.join(map(str, shape))}x{elem}>"

    ins = ", ".join(f"%in{k}" for k in range(len(operands)))
    in_types = ", ".join(mt(s) for _, s in operands)
    args = [f"%a{k}: {elem}" for k in range(len(operands))] + [f"%acc: {elem}"]
    is_float = elem != "i32"
    mul = "arith.mulf" if is_float else "arith.muli"
    combine = rng.choice(
        ["arith.addf", "arith.addf", "arith.maximumf", "arith.subf", "arith.minnumf"]
        if is_float
        else ["arith.addi", "arith.addi", "arith.maxsi", "arith.xori", "arith.subi"]  # fmt: skip
    )
    body = []
    value = "%a0"
    for k in range(1, len(operands)):
        body.append(f"    %m{k} = {mul} {value}, %a{k} : {elem}")
        value = f"%m{k}"
    body.append(f"    %r = {combine} %acc, {value} : {elem}")
    iters = ", ".join(f'"{k}"' for k in kinds)
    params = ", ".join([*(f"%in{k}: {mt(s)}" for k, (_, s) in enumerate(operands)),
                        f"%out: {mt(out_shape)}"])  # fmt: skip
    text = "\n".join([
        f"func.func @main({params}) {{",
        f"  linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iters}]}}",
        f"      ins({ins} : {in_types}) outs(%out : {mt(out_shape)}) {{",
        f"  ^bb0({', '.join(args)}):",
        *body,
        f"    linalg.yield %r : {elem}",
        "  }",
        "  return",
        "}",
    ]) + "\n"  # fmt: skip
    inputs = []
    for _, shape in [*operands, ([], out_shape)]:
        if is_float:
            inputs.append(_float_data(rng, DTYPES[elem], tuple(shape)))
        else:
            size = int(np.prod(shape))
            inputs.append(
                np.array([rng.randint(-9, 9) for _ in range(size)], np.int32).reshape(shape)
            )
    return Case(text, inputs, "generic")


FAMILIES["generic"] = generic_case


# --- parallel loops with reductions -------------------------------------------------------

_REDUCE_INT = ("addi", "muli", "maxsi", "minui", "xori", "andi", "ori")
_REDUCE_FLOAT = ("addf", "mulf", "maximumf", "minimumf", "maxnumf", "minnumf")


def parallel_case(rng: random.Random) -> Case:
    elem = rng.choice(["i32", "i64", "f32", "f64"])
    is_float = elem in FLOATS
    rows, cols = rng.randint(1, 9), rng.randint(1, 40)
    op = rng.choice(_REDUCE_FLOAT if is_float else _REDUCE_INT)
    two_d = rng.random() < 0.5
    mt = f"memref<{rows}x{cols}x{elem}>"
    init = rng.choice(["0.0", "-0.0", "1.0", "0xFF800000" if elem == "f32" else "-1.0"]) if is_float \
        else str(rng.choice([0, 1, -1, 5]))  # fmt: skip
    affine = rng.random() < 0.4 and op in _AFFINE_KINDS
    lines = [
        f"func.func @main(%a: {mt}, %r: memref<{rows}x{elem}>, %s: memref<1x{elem}>) {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %rows = arith.constant {rows} : index",
        f"  %cols = arith.constant {cols} : index",
        f"  %init = arith.constant {init} : {elem}",
    ]
    reduction = _affine_reduction if affine else _scf_reduction
    if two_d:
        both = f"(%i, %j) = (0, 0) to ({rows}, {cols})" if affine else _scf_range(2)
        lines += _indented(reduction("%tot", both, mt, elem, op), 1)
    elif affine:
        lines += [
            f"  affine.parallel (%i) = (0) to ({rows}) {{",
            *_indented(reduction("%row", f"(%j) = (0) to ({cols})", mt, elem, op), 2),
            f"    affine.store %row, %r[%i] : memref<{rows}x{elem}>",
            "  }",
            f"  %tot = affine.load %r[0] : memref<{rows}x{elem}>",
        ]
    else:
        lines += [
            "  scf.parallel (%i) = (%c0) to (%rows) step (%c1) {",
            *_indented(reduction("%row", _scf_range(1, "%j", "%cols"), mt, elem, op), 2),
            f"    memref.store %row, %r[%i] : memref<{rows}x{elem}>",
            "    scf.reduce",
            "  }",
            f"  %tot = memref.load %r[%c0] : memref<{rows}x{elem}>",
        ]
    lines += [f"  memref.store %tot, %s[%c0] : memref<1x{elem}>", "  return", "}"]
    if is_float:
        a = _float_data(rng, DTYPES[elem], (rows, cols))
    else:
        a = np.array([rng.choice([1, -1, 2, 3, 0, -7, 2**20]) for _ in range(rows * cols)],
                     DTYPES[elem]).reshape(rows, cols)  # fmt: skip
    zeros = [np.zeros(rows, DTYPES[elem]), np.zeros(1, DTYPES[elem])]
    return Case("\n".join(lines) + "\n", [a, *zeros], "parallel")


# The kinds of affine.parallel reductions MLIR 22 lowers (their names are the ops').
_AFFINE_KINDS = ("addi", "muli", "andi", "ori", "addf", "mulf", "maximumf", "minimumf")


def _scf_range(dims: int, ivs: str = "%i, %j", ends: str = "%rows, %cols") -> str:
    zeros, ones = ", ".join(["%c0"] * dims), ", ".join(["%c1"] * dims)
    return f"({ivs}) = ({zeros}) to ({ends}) step ({ones})"


def _scf_reduction(result: str, loop: str, mt: str, elem: str, op: str) -> list[str]:
    """`result`, the `op` of %a's elements over `loop` in an scf.parallel from %init."""
    return [
        f"{result} = scf.parallel {loop} init (%init) -> {elem} {{",
        f"  %v = memref.load %a[%i, %j] : {mt}",
        f"  scf.reduce(%v : {elem}) {{",
        f"  ^bb0(%x: {elem}, %y: {elem}):",
        f"    %new = arith.{op} %x, %y : {elem}",
        f"    scf.reduce.return %new : {elem}",
        "  }",
        "}",
    ]


def _affine_reduction(result: str, loop: str, mt: str, elem: str, op: str) -> list[str]:
    """`result`, the `op` of %a's elements over `loop` in an affine.parallel."""
    return [
        f'{result} = affine.parallel {loop} reduce ("{op}") -> ({elem}) {{',
        f"  %v = affine.load %a[%i, %j] : {mt}",
        f"  affine.yield %v : {elem}",
        "}",
    ]


def _indented(lines: list[str], depth: int) -> list[str]:
    return ["  " * depth + line for line in lines]


FAMILIES["parallel"] = parallel_case


# --- views of one buffer, read and written together ----------------------------------------


def alias_case(rng: random.Random) -> Case:
    """Two views of one buffer (which may overlap) in a loop nest that reads one and
    writes the other, directly or in a called function that cannot see they alias."""
    elem = rng.choice(["f64", "f32"])
    m, n, k = rng.randint(1, 6), rng.randint(1, 20), rng.randint(1, 4)
    rows = m + rng.randint(0, 4)
    cols = max(n, k) + rng.randint(0, 3)
    base_t = f"memref<{rows}x{cols}x{elem}>"
    out_off = (rng.randint(0, rows - m), rng.randint(0, cols - n))
    in_off = (rng.randint(0, rows - m), rng.randint(0, cols - k))
    out_v = _View("%vo", (m, n), (cols, 1), out_off[0] * cols + out_off[1])
    in_v = _View("%vi", (m, k), (cols, 1), in_off[0] * cols + in_off[1])
    b_t = f"memref<{k}x{n}x{elem}>"
    lines = [
        f"%vo = memref.subview %base[{out_off[0]}, {out_off[1]}] [{m}, {n}] [1, 1] : {base_t} to {out_v.type_(elem)}",
        f"%vi = memref.subview %base[{in_off[0]}, {in_off[1]}] [{m}, {k}] [1, 1] : {base_t} to {in_v.type_(elem)}",
    ]
    form = rng.choice(["ikj", "kinner", "copy"])
    nest = [
        "%c0 = arith.constant 0 : index",
        "%c1 = arith.constant 1 : index",
        f"%m = arith.constant {m} : index",
        f"%n = arith.constant {n} : index",
        f"%k = arith.constant {k} : index",
    ]
    ot, it = "OT", "IT"
    if form == "ikj":
        nest += [
            "scf.for %i = %c0 to %m step %c1 {",
            "  scf.for %kk = %c0 to %k step %c1 {",
            "    scf.for %j = %c0 to %n step %c1 {",
            f"      %a = memref.load %I[%i, %kk] : {it}",
            f"      %b = memref.load %B[%kk, %j] : {b_t}",
            f"      %c = memref.load %O[%i, %j] : {ot}",
            f"      %p = arith.mulf %a, %b : {elem}",
            f"      %s = arith.addf %c, %p : {elem}",
            f"      memref.store %s, %O[%i, %j] : {ot}",
            "    }",
            "  }",
            "}",
        ]
    elif form == "kinner":
        nest += [
            "scf.for %i = %c0 to %m step %c1 {",
            "  scf.for %j = %c0 to %n step %c1 {",
            f"    %init = memref.load %O[%i, %j] : {ot}",
            f"    %sum = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %init) -> ({elem}) {{",
            f"      %a = memref.load %I[%i, %kk] : {it}",
            f"      %b = memref.load %B[%kk, %j] : {b_t}",
            f"      %p = arith.mulf %a, %b : {elem}",
            f"      %s = arith.addf %acc, %p : {elem}",
            f"      scf.yield %s : {elem}",
            "    }",
            f"    memref.store %sum, %O[%i, %j] : {ot}",
            "  }",
            "}",
        ]
    else:
        nest += [
            "scf.for %i = %c0 to %m step %c1 {",
            "  scf.for %j = %c0 to %k step %c1 {",
            f"    %a = memref.load %I[%i, %j] : {it}",
            f"    %two = arith.constant 2.0 : {elem}",
            f"    %p = arith.mulf %a, %two : {elem}",
            "    %jj = arith.remui %j, %n : index",
            f"    memref.store %p, %O[%i, %jj] : {ot}",
            "  }",
            "}",
        ]
    call = rng.random() < 0.5
    if call:
        ot_d, it_d = out_v.dynamic_type(elem), in_v.dynamic_type(elem)
        callee = [f"func.func @kernel(%O: {ot_d}, %I: {it_d}, %B: {b_t}) {{",
                  *("  " + x.replace("OT", ot_d).replace("IT", it_d) for x in nest),
                  "  return", "}"]  # fmt: skip
        lines += [
            f"%do = memref.cast %vo : {out_v.type_(elem)} to {ot_d}",
            f"%di = memref.cast %vi : {in_v.type_(elem)} to {it_d}",
            f"func.call @kernel(%do, %di, %B) : ({ot_d}, {it_d}, {b_t}) -> ()",
        ]
    else:
        callee = []
        lines += [
            x.replace("%O[", "%vo[").replace("%I[", "%vi[")
            .replace("OT", out_v.type_(elem)).replace("IT", in_v.type_(elem))
            for x in nest
        ]  # fmt: skip
    text = "\n".join([
        *callee,
        f"func.func @main(%base: {base_t}, %B: {b_t}) {{",
        *("  " + x for x in lines),
        "  return",
        "}",
    ]) + "\n"  # fmt: skip
    dtype = DTYPES[elem]
    base = np.array([rng.choice([1.0, -2.0, 0.5, 3.0, -0.25]) for _ in range(rows * cols)], dtype)
    b = np.array([rng.choice([1.0, -1.0, 0.5, 2.0]) for _ in range(k * n)], dtype)
    return Case(text, [base.reshape(rows, cols), b.reshape(k, n)], "alias")


FAMILIES["alias"] = alias_case
