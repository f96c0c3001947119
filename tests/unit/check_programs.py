"""Random programs whose subscripts depend on their inputs, for the default run-time checks
(tests/unit/test_random_checks.py): loads and stores through an index array, subviews and
reinterpret_casts at offsets read from an input, memref.casts of views of sizes read from
one to static sizes and layouts (right or wrong), index arithmetic (i * a + b, divisions,
remainders, min and max, through 32 bits and past 64) of loaded values or loop
variables, nests of loops with steps, loops between numbers read from an input, counted
scf.while loops (of constant or input bounds, their subscripts past 64 bits too),
scf.if guards, scf.parallel loops, private functions that load, affine loads,
vector.load, vector.store, vector.transfer_read and transfer_write (masked or not, at
indices up to 2**63 past a row's end), reinterpret_casts of a size read from an input.

A program has one or two bodies: the first reads %a and writes %b, the second reads %b
and writes %c, as two dependent tasks of a schedule or (plain) one after the other in
@main for CodeDrop. `proven` programs take their subscripts from loop variables and
numbers only (through min, max, divisions and remainders by numbers), in bounds by
construction: the native build must check none of them.
"""

import random
from dataclasses import dataclass, field

import numpy as np

ROWS, COLS, INDICES, PARAMS = 6, 8, 16, 4
LANES = 4
F64 = f"memref<{ROWS}x{COLS}xf64>"
ARRAYS = ("a", "b", "c")


@dataclass
class Body:
    """The lines of one body, its index constants (put first) and fresh names."""

    prefix: str
    lines: list[str] = field(default_factory=list[str])
    constants: dict[int, str] = field(default_factory=dict[int, str])
    params: dict[int, str] = field(default_factory=dict[int, str])
    narrow: dict[int, str] = field(default_factory=dict[int, str])
    count: int = 0
    depth: int = 0
    functions: list[str] = field(default_factory=list[str])

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{self.prefix}{stem}{self.count}"

    def const(self, value: int) -> str:
        if value not in self.constants:
            self.constants[value] = f"%{self.prefix}c{value}".replace("-", "m")
        return self.constants[value]

    def const32(self, value: int) -> str:
        if value not in self.narrow:
            self.narrow[value] = f"%{self.prefix}i32c{value}".replace("-", "m")
        return self.narrow[value]

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def param(self, k: int) -> str:
        """Element k of %p as an index (loaded once, at the body's start)."""
        if k not in self.params:
            self.params[k] = f"%{self.prefix}p{k}"
        return self.params[k]

    def text(self, indent: str) -> str:
        positions = {k: self.const(k) for k in self.params}
        head = [f"{name} = arith.constant {v} : index" for v, name in self.constants.items()]
        head += [f"{name} = arith.constant {v} : i32" for v, name in self.narrow.items()]
        for k, name in self.params.items():
            head.append(f"{name}_raw = memref.load %p[{positions[k]}] : memref<{PARAMS}xi64>")
            head.append(f"{name} = arith.index_cast {name}_raw : i64 to index")
        return "".join(f"{indent}{line}\n" for line in head + self.lines)


_BINARY = ("arith.muli", "arith.addi", "arith.subi")
_DIVIDING = (
    "arith.floordivsi", "arith.ceildivsi", "arith.divsi", "arith.remsi", "arith.divui",
    "arith.remui", "arith.ceildivui",
)  # fmt: skip
_EXTREMES = ("arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui")


def expression(rng: random.Random, body: Body, value: str, params: bool) -> str:
    """`value` through 0-3 random steps of index arithmetic."""
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        kind = rng.random()
        out = body.fresh("e")
        if kind < 0.07:  # through 32 bits, which wrap
            narrow, wide = body.fresh("n"), body.fresh("w")
            body.emit(f"{narrow} = arith.index_cast {value} : index to i32")
            big = rng.choice([2**31 - 1, 2**31 - 3, -(2**31), 5])
            body.emit(f"{wide} = arith.addi {narrow}, {body.const32(big)} : i32")
            body.emit(f"{out} = arith.index_cast{rng.choice(['', 'ui'])} {wide} : i32 to index")
        elif kind < 0.45:
            op = rng.choice(_BINARY)
            k = rng.choice([-1, 1, 2, 3]) if op == "arith.muli" else rng.randint(-3, 4)
            if rng.random() < 0.08:  # past 64 bits
                k = rng.choice([2**62, 2**63 - 4, -(2**63), 2**63 - 1])
            other = body.param(rng.randrange(PARAMS)) if params and rng.random() < 0.3 else None
            body.emit(f"{out} = {op} {value}, {other or body.const(k)} : index")
        elif kind < 0.75:
            op = rng.choice(_DIVIDING)
            body.emit(f"{out} = {op} {value}, {body.const(rng.choice([2, 3, 4, 8]))} : index")
        else:
            op = rng.choice(_EXTREMES)
            other = body.param(rng.randrange(PARAMS)) if params and rng.random() < 0.5 else None
            k = rng.randint(-1, COLS)
            body.emit(f"{out} = {op} {value}, {other or body.const(k)} : index")
        value = out
    return value


@dataclass
class Loops:
    row: str
    col: str
    parallel: bool
    closers: int


def open_loops(rng: random.Random, body: Body, col_step: int | None = None) -> Loops:
    """A nest over rows and columns (the columns below COLS): one scf.for, a nest of two,
    or an scf.parallel over both, with random steps."""
    step = col_step or rng.choice([1, 1, 2, 3])
    low = 0 if col_step else rng.randint(0, 2)
    high = COLS if col_step else rng.randint(low + 1, COLS)
    shape = rng.choice(["one", "nest", "parallel"])
    row, col = body.fresh("r"), body.fresh("i")
    if shape == "parallel":
        rstep = rng.choice([1, 2])
        body.emit(
            f"scf.parallel ({row}, {col}) = ({body.const(0)}, {body.const(low)}) to "
            f"({body.const(ROWS)}, {body.const(high)}) step ({body.const(rstep)}, "
            f"{body.const(step)}) {{"
        )
        body.depth += 1
        return Loops(row, col, True, 1)
    closers = 1
    if shape == "nest":
        rlow, rstep = rng.randint(0, 2), rng.choice([1, 2, 3])
        body.emit(
            f"scf.for {row} = {body.const(rlow)} to {body.const(ROWS)} step {body.const(rstep)} {{"
        )
        body.depth += 1
        closers = 2
    else:
        row = body.const(rng.randrange(ROWS))
    body.emit(f"scf.for {col} = {body.const(low)} to {body.const(high)} step {body.const(step)} {{")
    body.depth += 1
    return Loops(row, col, False, closers)


def close(body: Body, count: int) -> None:
    for _ in range(count):
        body.depth -= 1
        body.emit("}")


def loaded(body: Body, at: str) -> str:
    raw, value = body.fresh("k"), body.fresh("j")
    body.emit(f"{raw} = memref.load %idx[{at}] : memref<{INDICES}xi64>")
    body.emit(f"{value} = arith.index_cast {raw} : i64 to index")
    return value


def in_range(rng: random.Random, body: Body, col: str, top: int) -> str:
    """Of a column `col` in [0, COLS), a subscript in [0, top] that the proof rules
    (bounds of loop variables, min and max, divisions and remainders by numbers) show."""
    out = body.fresh("e")
    form = rng.randrange(6)
    if form == 0:
        half = body.fresh("h")
        body.emit(f"{half} = arith.floordivsi {col}, {body.const(2)} : index")
        body.emit(f"{out} = arith.addi {half}, {body.const(top - (COLS - 1) // 2)} : index")
    elif form == 1:
        body.emit(f"{out} = arith.remsi {col}, {body.const(top + 1)} : index")
    elif form == 2:
        double = body.fresh("h")
        body.emit(f"{double} = arith.muli {col}, {body.const(2)} : index")
        body.emit(f"{out} = arith.minsi {double}, {body.const(top)} : index")
    elif form == 3:
        less = body.fresh("h")
        body.emit(f"{less} = arith.subi {col}, {body.const(3)} : index")
        body.emit(f"{out} = arith.maxsi {less}, {body.const(0)} : index")
        clamped = body.fresh("e")
        body.emit(f"{clamped} = arith.minsi {out}, {body.const(top)} : index")
        return clamped
    elif form == 4:
        body.emit(f"{out} = arith.divui {col}, {body.const(2)} : index")
    else:
        return col  # a vector's column steps by its lanes from 0
    return out


def _subscript(rng: random.Random, body: Body, loops: Loops, proven: bool) -> str:
    """A column subscript: of a loaded index, of the loop's column (and params)."""
    if proven:
        return in_range(rng, body, loops.col, COLS - 1)
    if rng.random() < 0.6:
        return expression(rng, body, loaded(body, loops.col), params=True)
    return expression(rng, body, loops.col, params=True)


def gather(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    loops = open_loops(rng, body)
    j = _subscript(rng, body, loops, proven)
    x = body.fresh("x")
    if rng.random() < 0.25 and not proven:  # the row is the input's
        body.emit(f"{x} = memref.load %{src}[{j}, {loops.col}] : {F64}")
    else:
        body.emit(f"{x} = memref.load %{src}[{loops.row}, {j}] : {F64}")
    body.emit(f"memref.store {x}, %{dst}[{loops.row}, {loops.col}] : {F64}")
    close(body, loops.closers)


def scatter(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    loops = open_loops(rng, body)
    if loops.parallel:  # iterations would write the same elements
        j = loops.col
    else:
        j = _subscript(rng, body, loops, proven)
    x = body.fresh("x")
    body.emit(f"{x} = memref.load %{src}[{loops.row}, {loops.col}] : {F64}")
    body.emit(f"memref.store {x}, %{dst}[{loops.row}, {j}] : {F64}")
    close(body, loops.closers)


def guarded(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    loops = open_loops(rng, body)
    j = _subscript(rng, body, loops, proven)
    below = body.fresh("lt")
    body.emit(
        f"{below} = arith.cmpi slt, {j}, {body.const(rng.choice([COLS, COLS, COLS + 1, 4]))} : index"
    )
    ok = below
    if rng.random() < 0.6:
        above, ok = body.fresh("ge"), body.fresh("ok")
        body.emit(f"{above} = arith.cmpi sge, {j}, {body.const(rng.choice([0, 0, -1]))} : index")
        body.emit(f"{ok} = arith.andi {below}, {above} : i1")
    x = body.fresh("x")
    body.emit(f"scf.if {ok} {{")
    body.emit(f"  {x} = memref.load %{src}[{loops.row}, {j}] : {F64}")
    body.emit(f"  memref.store {x}, %{dst}[{loops.row}, {loops.col}] : {F64}")
    body.emit("}")
    close(body, loops.closers)


def vectors(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    loops = open_loops(rng, body, col_step=LANES)
    if proven:
        j = in_range(rng, body, loops.col, COLS - LANES)
    else:
        j = _subscript(rng, body, loops, proven)
    v = body.fresh("v")
    kind = rng.choice(["load", "load", "read", "read-in", "store", "masked", "write"])
    vector = f"vector<{LANES}xf64>"
    mask = ""
    if kind in ("masked", "write") and not proven:
        if rng.random() < 0.5:  # far past the end: lanes counted in 32 bits, or j + k wrapped
            far = body.fresh("e")
            big = rng.choice([2**31, 2**32 + 2, 2**63 - 2, 2**63 - COLS])
            body.emit(f"{far} = arith.addi {j}, {body.const(big)} : index")
            j = far
        if rng.random() < 0.7:  # lanes as a loaded mask sets them (checked lane by lane)
            flags = [rng.choice(["true", "false"]) for _ in range(LANES)]
            mask = body.fresh("m")
            body.emit(f"{mask} = arith.constant dense<[{', '.join(flags)}]> : vector<{LANES}xi1>")
    if kind == "write" and not loops.parallel:  # a padded write: lanes past the end skipped
        body.emit(f"{v} = vector.load %{src}[{loops.row}, {loops.col}] : {F64}, {vector}")
        masked = f", {mask}" if mask else ""
        body.emit(
            f"vector.transfer_write {v}, %{dst}[{loops.row}, {j}]{masked} "
            f"{{in_bounds = [false]}} : {vector}, {F64}"
        )
        close(body, loops.closers)
        return
    if kind == "store" and not loops.parallel:
        body.emit(f"{v} = vector.load %{src}[{loops.row}, {loops.col}] : {F64}, {vector}")
        body.emit(f"vector.store {v}, %{dst}[{loops.row}, {j}] : {F64}, {vector}")
        close(body, loops.closers)
        return
    if kind == "load" or kind == "store":
        body.emit(f"{v} = vector.load %{src}[{loops.row}, {j}] : {F64}, {vector}")
    else:
        pad = body.fresh("pad")
        body.emit(f"{pad} = arith.constant -1.5 : f64")
        flag = "true" if kind == "read-in" else "false"
        masked = f", {mask}" if mask else ""
        body.emit(
            f"{v} = vector.transfer_read %{src}[{loops.row}, {j}], {pad}{masked} "
            f"{{in_bounds = [{flag}]}} : {F64}, {vector}"
        )
    body.emit(f"vector.store {v}, %{dst}[{loops.row}, {loops.col}] : {F64}, {vector}")
    close(body, loops.closers)


def viewed(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    """A subview or reinterpret_cast of rows x cols at an offset (of params, or a
    number inside), read or written element by element over its shape."""
    rows, cols = rng.randint(1, ROWS), rng.randint(1, COLS)
    strided = rng.random() < 0.3
    step = 2 if strided else 1
    if proven:
        row0 = rng.randint(0, ROWS - rows)
        col0 = rng.randint(0, COLS - 1 - (cols - 1) * step) if (cols - 1) * step < COLS else 0
        if (cols - 1) * step >= COLS:
            cols = 1
        off_r, off_c = body.const(row0), body.const(col0)
    else:
        off_r = expression(rng, body, body.param(0), params=False)
        off_c = expression(rng, body, body.param(1), params=True)
    through = f"%{src}" if rng.random() < 0.5 else f"%{dst}"
    view = body.fresh("s")
    if rng.random() < 0.5:
        kind = f"memref<{rows}x{cols}xf64, strided<[{COLS}, {step}], offset: ?>>"
        body.emit(
            f"{view} = memref.subview {through}[{off_r}, {off_c}] [{rows}, {cols}] "
            f"[1, {step}] : {F64} to {kind}"
        )
    else:
        kind = f"memref<{rows}x{cols}xf64, strided<[{COLS}, {step}], offset: ?>>"
        flat = body.fresh("o")
        scaled = body.fresh("rs")
        body.emit(f"{scaled} = arith.muli {off_r}, {body.const(COLS)} : index")
        body.emit(f"{flat} = arith.addi {scaled}, {off_c} : index")
        width = str(cols)
        if not proven and rng.random() < 0.3:  # columns read from %p (-1 among them)
            kind = kind.replace(f"x{cols}xf64", "x?xf64")
            width = body.param(3)
        body.emit(
            f"{view} = memref.reinterpret_cast {through} to offset: [{flat}], "
            f"sizes: [{rows}, {width}], strides: [{COLS}, {step}] : {F64} to {kind}"
        )
        if width != str(cols):  # walked to its measured end, at most COLS columns
            measured, cols_name = body.fresh("n"), body.fresh("n")
            body.emit(f"{measured} = memref.dim {view}, {body.const(1)} : {kind}")
            body.emit(f"{cols_name} = arith.minsi {measured}, {body.const(COLS)} : index")
            return _walk(rng, body, src, dst, view, kind, rows, cols_name, through)
    _walk(rng, body, src, dst, view, kind, rows, body.const(cols), through)


def _walk(
    rng: random.Random,
    body: Body,
    src: str,
    dst: str,
    view: str,
    kind: str,
    rows: int,
    cols: str,
    through: str,
) -> None:
    """Each element of the view `view` read into `dst` or written from `src`."""
    row, col = body.fresh("r"), body.fresh("i")
    if rng.random() < 0.4 and through == f"%{src}":
        body.emit(
            f"scf.parallel ({row}, {col}) = ({body.const(0)}, {body.const(0)}) to "
            f"({body.const(rows)}, {cols}) step ({body.const(1)}, {body.const(1)}) {{"
        )
        body.depth += 1
        closers = 1
    else:
        body.emit(f"scf.for {row} = {body.const(0)} to {body.const(rows)} step {body.const(1)} {{")
        body.emit(f"  scf.for {col} = {body.const(0)} to {cols} step {body.const(1)} {{")
        body.depth += 2
        closers = 2
    x = body.fresh("x")
    if through == f"%{src}":
        body.emit(f"{x} = memref.load {view}[{row}, {col}] : {kind}")
        body.emit(f"memref.store {x}, %{dst}[{row}, {col}] : {F64}")
    else:
        body.emit(f"{x} = memref.load %{src}[{row}, {col}] : {F64}")
        body.emit(f"memref.store {x}, {view}[{row}, {col}] : {kind}")
    close(body, closers)


def whiled(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    """A counted scf.while over the columns of a row (dhir makes it an scf.for)."""
    low = body.const(rng.randint(0, 2))
    high = body.param(2) if rng.random() < 0.3 and not proven else body.const(rng.randint(1, COLS))
    step = body.const(rng.choice([1, 1, 2, 3]))
    predicate = rng.choice(["slt", "slt", "sle", "ne", "ult"]) if not proven else "slt"
    row = body.const(rng.randrange(ROWS))
    state, col, go, after = body.fresh("w"), body.fresh("i"), body.fresh("go"), body.fresh("i")
    body.emit(f"{state} = scf.while ({col} = {low}) : (index) -> index {{")
    body.emit(f"  {go} = arith.cmpi {predicate}, {col}, {high} : index")
    body.emit(f"  scf.condition({go}) {col} : index")
    body.emit("} do {")
    body.emit(f"^bb0({after}: index):")
    body.depth += 1
    j = after
    if not proven and rng.random() < 0.25:  # past 64 bits: checked at a loop of run-time
        # bounds, no exact value at all in one of constant bounds (the range of its for)
        big = rng.choice([2**62, 2**63 - 4, 2**63 - 1])
        j = body.fresh("e")
        body.emit(
            f"{j} = {rng.choice(['arith.addi', 'arith.muli'])} {after}, {body.const(big)} : index"
        )
    if not proven:
        j = expression(rng, body, j, params=True)
    x, following = body.fresh("x"), body.fresh("next")
    body.emit(f"{x} = memref.load %{src}[{row}, {j}] : {F64}")
    body.emit(f"memref.store {x}, %{dst}[{row}, {after}] : {F64}")
    body.emit(f"{following} = arith.addi {after}, {step} : index")
    body.emit(f"scf.yield {following} : index")
    close(body, 1)


def bounded(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    """A loop over columns from and to numbers read from %p, clamped (or not) by max
    and min: src[row, i] and dst[row, i - low]."""
    low, high = body.param(0), body.param(3)
    if rng.random() < 0.7:
        clamped = body.fresh("lo")
        body.emit(f"{clamped} = arith.maxsi {low}, {body.const(rng.choice([0, 0, -1]))} : index")
        low = clamped
    if rng.random() < 0.7:
        clamped = body.fresh("hi")
        bound = rng.choice([COLS, COLS, COLS + 1])
        body.emit(f"{clamped} = arith.minsi {high}, {body.const(bound)} : index")
        high = clamped
    row, col = body.const(rng.randrange(ROWS)), body.fresh("i")
    step = body.const(rng.choice([1, 2]))
    body.emit(f"scf.for {col} = {low} to {high} step {step} {{")
    body.depth += 1
    shifted, x = body.fresh("d"), body.fresh("x")
    body.emit(f"{shifted} = arith.subi {col}, {low} : index")
    body.emit(f"{x} = memref.load %{src}[{row}, {col}] : {F64}")
    body.emit(f"memref.store {x}, %{dst}[{row}, {shifted}] : {F64}")
    close(body, 1)


def recast(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    """A subview of a row at an offset and of a size read from %p, cast to a static size
    or offset (right or wrong) or left dynamic, read to the view's measured end."""
    at = rng.randrange(ROWS)
    row = body.const(at)
    offset, size = body.param(1), body.param(2)
    dynamic = f"memref<1x?xf64, strided<[{COLS}, 1], offset: ?>>"
    view, cast = body.fresh("s"), body.fresh("t")
    body.emit(
        f"{view} = memref.subview %{src}[{row}, {offset}] [1, {size}] [1, 1] : {F64} to {dynamic}"
    )
    target = rng.choice(
        [
            f"memref<1x{rng.randint(1, 4)}xf64, strided<[{COLS}, 1], offset: ?>>",
            "memref<?x?xf64, strided<[?, ?], offset: ?>>",
            f"memref<1x?xf64, strided<[{COLS}, 1], offset: {at * COLS + rng.randint(0, 2)}>>",
        ]
    )
    body.emit(f"{cast} = memref.cast {view} : {dynamic} to {target}")
    end, col, x = body.fresh("n"), body.fresh("i"), body.fresh("x")
    body.emit(f"{end} = memref.dim {cast}, {body.const(1)} : {target}")
    body.emit(f"scf.for {col} = {body.const(0)} to {end} step {body.const(1)} {{")
    body.emit(f"  {x} = memref.load {cast}[{body.const(0)}, {col}] : {target}")
    body.emit(f"  memref.store {x}, %{dst}[{row}, {col}] : {F64}")
    body.emit("}")


def called(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    """Elements read by a private function @pick_PREFIX, called with loop variables (and,
    not proven, a loaded index)."""
    loops = open_loops(rng, body)
    j = _subscript(rng, body, loops, proven)
    x = body.fresh("x")
    body.functions.append(body.prefix)
    body.emit(
        f"{x} = func.call @pick_{body.prefix}(%{src}, {loops.row}, {j}) : ({F64}, index, index) -> f64"
    )
    body.emit(f"memref.store {x}, %{dst}[{loops.row}, {loops.col}] : {F64}")
    close(body, loops.closers)


def picker(prefix: str) -> str:
    return (
        f"func.func private @pick_{prefix}(%m: {F64}, %r: index, %j: index) -> f64 {{\n"
        f"  %x = memref.load %m[%r, %j] : {F64}\n"
        f"  return %x : f64\n"
        f"}}\n"
    )


def affined(rng: random.Random, body: Body, src: str, dst: str, proven: bool) -> None:
    """An affine.for nest reading src[r, f(i)] for an affine f of the column."""
    step = rng.choice([1, 2, 3])
    low, high = rng.randint(0, 2), rng.randint(3, COLS)
    a, b = rng.choice([1, 2, -1]), rng.randint(-2, 3)
    d = rng.choice([2, 3, 4])
    form = rng.choice(
        [
            f"d1 * {a} + {b}",
            f"d1 floordiv {d} + {b}",
            f"d1 mod {d} + {b}",
            f"(d1 + {b}) ceildiv {d}",
        ]
    )
    row, col, x = body.fresh("r"), body.fresh("i"), body.fresh("x")
    bound = f"min affine_map<() -> ({high}, {COLS})>()" if rng.random() < 0.3 else f"{high}"
    body.emit(f"affine.for {row} = 0 to {ROWS} {{")
    body.emit(f"  affine.for {col} = {low} to {bound} step {step} {{")
    subscript = col if proven else form.replace("d1", col)
    body.emit(f"    {x} = affine.load %{src}[{row}, {subscript}] : {F64}")
    body.emit(f"    affine.store {x}, %{dst}[{row}, {col}] : {F64}")
    body.emit("  }")
    body.emit("}")


STATEMENTS = {
    "whiled": whiled,
    "bounded": bounded,
    "recast": recast,
    "called": called,
    "affined": affined,
    "gather": gather,
    "scatter": scatter,
    "guarded": guarded,
    "vectors": vectors,
    "viewed": viewed,
}


@dataclass
class Case:
    text: str
    shape: str  # "plain", or "tasks" (run on 1 or 2 ranks)
    statements: list[str]
    parallel: bool

    def inputs(self, rng: random.Random, inside: bool) -> list[np.ndarray]:
        """%idx, %p, %a, %b, %c: indices and params mostly small (all of them inside
        [0, COLS) where `inside`), arrays of distinct numbers."""
        if inside:
            idx = [rng.randrange(COLS) for _ in range(INDICES)]
            params = [rng.randrange(3) for _ in range(PARAMS)]
        else:
            idx = [rng.randrange(COLS) for _ in range(INDICES)]
            for _ in range(rng.randint(1, 3)):
                idx[rng.randrange(INDICES)] = rng.choice([-1, -3, COLS, COLS + 1, 2 * COLS, 40])
            params = [rng.choice([0, 1, 2, 3, 5, 7, -1, 9]) for _ in range(PARAMS)]
        base = np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS)
        return [
            np.array(idx, np.int64),
            np.array(params, np.int64),
            base + 0.25,
            np.zeros((ROWS, COLS)),
            np.zeros((ROWS, COLS)) - 1.0,
        ]


ARGS = f"%idx: memref<{INDICES}xi64>, %p: memref<{PARAMS}xi64>, %a: {F64}, %b: {F64}, %c: {F64}"


# Those whose subscripts, views and loop bounds a proven program takes from loop
# variables and numbers only (the others read %p).
PROVEN = sorted(set(STATEMENTS) - {"bounded", "recast"})


def case(rng: random.Random, proven: bool = False) -> Case:
    """A random program; `proven`: one whose every access and view is in bounds by
    construction, from loop variables and numbers."""
    shape = rng.choice(["plain", "tasks", "tasks"])
    menu = PROVEN if proven else sorted(STATEMENTS)
    kinds = [rng.choice(menu) for _ in range(rng.choice([1, 2]))]
    bodies: list[Body] = []
    for k, kind in enumerate(kinds):
        body = Body(f"t{k}_")
        STATEMENTS[kind](rng, body, ARRAYS[k], ARRAYS[k + 1], proven)
        bodies.append(body)
    parallel = any("scf.parallel" in line for b in bodies for line in b.lines)
    lines = [f"func.func @main({ARGS}) {{"]
    if shape == "plain":
        lines += [b.text("  ") for b in bodies]
    else:
        lines.append("  dhir.schedule %idx, %p, %a, %b, %c {")
        lines.append('    %cpu = dhir.target {kind = "cpu"}')
        for k, b in enumerate(bodies):
            lines.append(f"    %t{k} = dhir.task %cpu, %idx, %p, %{ARRAYS[k]}, %{ARRAYS[k + 1]} {{")
            lines.append(b.text("      ").rstrip("\n"))
            lines.append("    }")
        lines.append("  }")
    lines += ["  return", "}"]
    lines += [picker(prefix) for b in bodies for prefix in sorted(set(b.functions))]
    lines.append("")
    text = "\n".join(line.rstrip("\n") for line in lines)
    return Case(text, shape, kinds, parallel)
