"""Random programs for partitioned storage (docs/semantics.md, "Partitioned storage"), for
tests/unit/test_random_partitions.py.

Every buffer is an argument of the entry, a `memref<RxCxT>` (i32 or f64; one C for all
or one each) whose rows may be narrow or a page wide and more, so that an interleaved
placement (round-robin, or tasks pinned with `dhir.rank`) leaves a rank ranges of rows
that are kept apart or joined. A schedule is a list of phases; a phase cuts some or all
rows of one buffer into tasks (blocks of rows, every K-th row, or a task per row, perhaps
on rank row mod R), each writing a few columns of its rows from another buffer (or the
same one) a row above or below, so that messages carry halos and a later phase
overwrites what an earlier one sent. A task reaches its rows through global subscripts,
a `memref.subview` of its rows, a rank-reducing subview of each row at the loop's row, a
`memref.reinterpret_cast` to its rows, the buffer collapsed, cast to one dimension, cast
to rows of another width or expanded to pairs of rows, a `linalg.add` or a `memref.copy`
of subviews, `vector.load`/`store` of a row's columns, an `scf.parallel` run on threads
or cut by dhir-split into pieces, or a row read only in odd time steps. Schedules sit at
the top level or in an `scf.for` time loop (its trip count a constant or an argument,
0 included), with host code that reads a buffer between them (the buffer must then be
assembled first) and a second schedule. The interpreter is the oracle.
"""

from dataclasses import dataclass, replace

import numpy as np
from hypothesis import strategies as st

# What partitioned storage bounds (a task using a cast of the whole buffer keeps it whole)
BOUNDED = ("scf", "subview", "rowview", "linalg", "split", "parallel", "moving", "vector", "copy")
STYLES = (*BOUNDED, "cast", "flat", "flatcast", "recast", "expand")


@dataclass(frozen=True)
class Part:
    """w[i, j] = f(r[i + shift, j], w[i, j], seed) for i in range(lo, hi, step), j in
    range(c0, c1), reached as `style` says."""

    write: int
    read: int
    lo: int
    hi: int
    step: int
    c0: int
    c1: int
    shift: int
    style: str
    rank: int | None
    seed: int


@dataclass(frozen=True)
class Host:
    """buf[dst] = buf[src] + 1, in host code (between or after schedules)."""

    src: tuple[int, int, int]
    dst: tuple[int, int, int]


@dataclass(frozen=True)
class Sched:
    parts: tuple[Part, ...]


Phase = Sched | Host


@dataclass(frozen=True)
class Program:
    dtype: str
    rows: int
    cols: tuple[int, ...]  # of each buffer
    buffers: int
    steps: int  # 0: no time loop
    loop: tuple[Phase, ...]
    after: tuple[Phase, ...]
    # the time loop's trip count as an argument %n of the entry (0 runs none), not `steps`
    trips: int | None = None

    def inputs(self, seed: int) -> list[object]:
        rng = np.random.default_rng(seed)
        dtype = np.int32 if self.dtype == "i32" else np.float64
        out = [rng.integers(-50, 50, (self.rows, c)).astype(dtype) for c in self.cols]
        return [*out, *([np.int64(self.trips)] if self.trips is not None else [])]

    def text(self) -> str:
        return _Writer(self).program()


class _Writer:
    def __init__(self, p: Program) -> None:
        self.p = p
        self.n = 0

    def tp(self, buf: int) -> str:
        return f"memref<{self.p.rows}x{self.p.cols[buf]}x{self.p.dtype}>"

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"%{stem}{self.n}"

    def program(self) -> str:
        p = self.p
        args = ", ".join(f"%a{b}: {self.tp(b)}" for b in range(p.buffers))
        if p.trips is not None:
            args += ", %n: index"
        out = [f"func.func @main({args}) {{"]
        out += ["  %c0 = arith.constant 0 : index", "  %c1 = arith.constant 1 : index"]
        if p.steps:
            out.append(f"  %cs = arith.constant {p.steps} : index")
            bound = "%cs" if p.trips is None else "%n"
            out.append(f"  scf.for %t = %c0 to {bound} step %c1 {{")
            for phase in p.loop:
                out += self.phase(phase, "    ", True)
            out.append("  }")
        else:
            for phase in p.loop:
                out += self.phase(phase, "  ", False)
        for phase in p.after:
            out += self.phase(phase, "  ", False)
        out += ["  return", "}"]
        return "\n".join(out) + "\n"

    def phase(self, phase: Phase, pad: str, timed: bool) -> list[str]:
        if isinstance(phase, Host):
            return [pad + line for line in self.host(phase)]
        used = sorted({b for part in phase.parts for b in (part.write, part.read)})
        names = ", ".join(f"%a{b}" for b in used)
        out = [f"{pad}dhir.schedule {names} {{"]
        out.append(f'{pad}  %cpu = dhir.target {{kind = "cpu"}}')
        out.append(f'{pad}  %any = dhir.target {{kind = "any"}}')
        for part in phase.parts:
            out += [pad + "  " + line for line in self.task(part, timed)]
        out.append(f"{pad}}}")
        return out

    def host(self, h: Host) -> list[str]:
        (sb, si, sj), (db, di, dj) = h.src, h.dst
        v, w, one = self.fresh("h"), self.fresh("h"), self.fresh("one")
        ci, cj, di_, dj_ = (self.fresh("hc") for _ in range(4))
        lit = "1.0" if self.p.dtype == "f64" else "1"
        add = "arith.addf" if self.p.dtype == "f64" else "arith.addi"
        return [
            f"{ci} = arith.constant {si} : index",
            f"{cj} = arith.constant {sj} : index",
            f"{di_} = arith.constant {di} : index",
            f"{dj_} = arith.constant {dj} : index",
            f"{one} = arith.constant {lit} : {self.p.dtype}",
            f"{v} = memref.load %a{sb}[{ci}, {cj}] : {self.tp(sb)}",
            f"{w} = {add} {v}, {one} : {self.p.dtype}",
            f"memref.store {w}, %a{db}[{di_}, {dj_}] : {self.tp(db)}",
        ]

    # -- tasks

    def task(self, part: Part, timed: bool) -> list[str]:
        used = sorted({part.write, part.read})
        names = ", ".join(f"%a{b}" for b in used)
        attrs = []
        if part.rank is not None:
            attrs.append(f"dhir.rank = {part.rank} : i64")
        target = "%cpu"
        if part.style == "moving" and not timed:
            part = replace(part, style="scf")
        widths = self.p.cols[part.read] != self.p.cols[part.write]
        if part.style in ("flat", "flatcast", "recast", "expand") and widths:
            part = replace(part, style="scf")
        if part.style == "split":
            target = "%any"
            attrs.append(f"dhir.split = {min(4, len(range(part.lo, part.hi, part.step)))} : i64")
        attr = f" attributes {{{', '.join(attrs)}}}" if attrs else ""
        out = [f"dhir.task {target}, {names}{attr} {{"]
        body: list[str] = []
        seed = self.seed(part, timed, body)
        body += getattr(self, "style_" + part.style)(part, seed)
        out += ["  " + line for line in body]
        out.append("}")
        return out

    def seed(self, part: Part, timed: bool, out: list[str]) -> str:
        seed = self.fresh("seed")
        if not timed:
            value = f"{part.seed}.0" if self.p.dtype == "f64" else str(part.seed)
            out.append(f"{seed} = arith.constant {value} : {self.p.dtype}")
            return seed
        k, s = self.fresh("k"), self.fresh("s")
        out.append(f"{k} = arith.constant {part.seed} : index")
        out.append(f"{s} = arith.addi %t, {k} : index")
        if self.p.dtype == "i32":
            out.append(f"{seed} = arith.index_cast {s} : index to i32")
        else:
            wide = self.fresh("w")
            out.append(f"{wide} = arith.index_cast {s} : index to i64")
            out.append(f"{seed} = arith.sitofp {wide} : i64 to f64")
        return seed

    def const(self, value: int, out: list[str]) -> str:
        name = self.fresh("c")
        out.append(f"{name} = arith.constant {value} : index")
        return name

    def mix(self, x: str, y: str, seed: str, out: list[str]) -> str:
        return self.mix_as(x, y, seed, self.p.dtype, out)

    def loops2(
        self, rows: tuple[int, int, int], cols: tuple[int, int], out: list[str]
    ) -> tuple[str, str]:
        lo, hi, step = (self.const(x, out) for x in rows)
        c0, c1 = (self.const(x, out) for x in cols)
        i, j = self.fresh("i"), self.fresh("j")
        out.append(f"scf.for {i} = {lo} to {hi} step {step} {{")
        out.append(f"  scf.for {j} = {c0} to {c1} step %c1 {{")
        return i, j

    def style_scf(self, part: Part, seed: str) -> list[str]:
        out: list[str] = []
        i, j = self.loops2((part.lo, part.hi, part.step), (part.c0, part.c1), out)
        body: list[str] = []
        k = self.const(part.shift, body) if part.shift else None
        ir = i
        if k is not None:
            ir = self.fresh("ir")
            body.append(f"{ir} = arith.addi {i}, {k} : index")
        x, y = self.fresh("x"), self.fresh("y")
        body.append(f"{x} = memref.load %a{part.read}[{ir}, {j}] : {self.tp(part.read)}")
        body.append(f"{y} = memref.load %a{part.write}[{i}, {j}] : {self.tp(part.write)}")
        v = self.mix(x, y, seed, body)
        body.append(f"memref.store {v}, %a{part.write}[{i}, {j}] : {self.tp(part.write)}")
        return out + ["    " + line for line in body] + ["  }", "}"]

    def count(self, part: Part) -> int:
        return len(range(part.lo, part.hi, part.step))

    def view_type(self, part: Part, buf: int, lo: int) -> str:
        cols = self.p.cols[buf]
        offset = lo * cols + part.c0
        n, m = self.count(part), part.c1 - part.c0
        return f"memref<{n}x{m}x{self.p.dtype}, strided<[{cols * part.step}, 1], offset: {offset}>>"

    def views(self, part: Part, cast: bool, out: list[str]) -> tuple[str, str, str, str]:
        n, m = self.count(part), part.c1 - part.c0
        made = []
        for buf, lo in ((part.read, part.lo + part.shift), (part.write, part.lo)):
            v = self.fresh("view")
            type_ = self.view_type(part, buf, lo)
            if cast:
                offset = lo * self.p.cols[buf] + part.c0
                out.append(
                    f"{v} = memref.reinterpret_cast %a{buf} to offset: [{offset}], sizes: "
                    f"[{n}, {m}], strides: [{self.p.cols[buf] * part.step}, 1] : {self.tp(buf)} to {type_}"
                )
            else:
                out.append(
                    f"{v} = memref.subview %a{buf}[{lo}, {part.c0}] [{n}, {m}] "
                    f"[{part.step}, 1] : {self.tp(buf)} to {type_}"
                )
            made.append((v, type_))
        (rv, rt), (wv, wt) = made
        return rv, rt, wv, wt

    def view_loops(self, part: Part, seed: str, cast: bool) -> list[str]:
        out: list[str] = []
        rv, rt, wv, wt = self.views(part, cast, out)
        i, j = self.loops2((0, self.count(part), 1), (0, part.c1 - part.c0), out)
        body: list[str] = []
        x, y = self.fresh("x"), self.fresh("y")
        body.append(f"{x} = memref.load {rv}[{i}, {j}] : {rt}")
        body.append(f"{y} = memref.load {wv}[{i}, {j}] : {wt}")
        v = self.mix(x, y, seed, body)
        body.append(f"memref.store {v}, {wv}[{i}, {j}] : {wt}")
        return out + ["    " + line for line in body] + ["  }", "}"]

    def style_subview(self, part: Part, seed: str) -> list[str]:
        return self.view_loops(part, seed, cast=False)

    def style_cast(self, part: Part, seed: str) -> list[str]:
        return self.view_loops(part, seed, cast=True)

    def flat_loops(self, part: Part, seed: str, cast: bool) -> list[str]:
        out: list[str] = []
        size = self.p.rows * self.p.cols[part.write]
        flat_t = f"memref<{size}x{self.p.dtype}>"
        flats = {}
        for buf in sorted({part.read, part.write}):
            f = self.fresh("flat")
            if cast:
                out.append(
                    f"{f} = memref.reinterpret_cast %a{buf} to offset: [0], sizes: [{size}], "
                    f"strides: [1] : {self.tp(buf)} to {flat_t}"
                )
            else:
                out.append(
                    f"{f} = memref.collapse_shape %a{buf} [[0, 1]] : {self.tp(buf)} into {flat_t}"
                )
            flats[buf] = f
        width = self.const(self.p.cols[part.write], out)
        i, j = self.loops2((part.lo, part.hi, part.step), (part.c0, part.c1), out)
        body: list[str] = []
        row = self.fresh("row")
        body.append(f"{row} = arith.muli {i}, {width} : index")
        at = self.fresh("at")
        body.append(f"{at} = arith.addi {row}, {j} : index")
        src = at
        if part.shift:
            k = self.const(part.shift * self.p.cols[part.write], body)
            src = self.fresh("src")
            body.append(f"{src} = arith.addi {at}, {k} : index")
        x, y = self.fresh("x"), self.fresh("y")
        body.append(f"{x} = memref.load {flats[part.read]}[{src}] : {flat_t}")
        body.append(f"{y} = memref.load {flats[part.write]}[{at}] : {flat_t}")
        v = self.mix(x, y, seed, body)
        body.append(f"memref.store {v}, {flats[part.write]}[{at}] : {flat_t}")
        return out + ["    " + line for line in body] + ["  }", "}"]

    def style_flat(self, part: Part, seed: str) -> list[str]:
        return self.flat_loops(part, seed, cast=False)

    def style_flatcast(self, part: Part, seed: str) -> list[str]:
        return self.flat_loops(part, seed, cast=True)

    def style_recast(self, part: Part, seed: str) -> list[str]:
        """The buffer cast to rows of another width (a divisor of its size)."""
        size = self.p.rows * self.p.cols[part.write]
        width = next(w for w in (2 * self.p.cols[part.write], 3, 2, 1) if size % w == 0)
        type_ = f"memref<{size // width}x{width}x{self.p.dtype}>"
        return self.reshaped(part, seed, width, type_, "cast")

    def style_expand(self, part: Part, seed: str) -> list[str]:
        """The buffer's rows in pairs (`memref.expand_shape`, rows even), else collapsed."""
        if self.p.rows % 2:
            return self.flat_loops(part, seed, cast=False)
        cols = self.p.cols[part.write]
        type_ = f"memref<{self.p.rows // 2}x2x{cols}x{self.p.dtype}>"
        return self.reshaped(part, seed, cols, type_, "expand")

    def reshaped(self, part: Part, seed: str, width: int, type_: str, how: str) -> list[str]:
        out: list[str] = []
        size = self.p.rows * self.p.cols[part.write]
        names = {}
        for buf in sorted({part.read, part.write}):
            f = self.fresh("re")
            if how == "cast":
                out.append(
                    f"{f} = memref.reinterpret_cast %a{buf} to offset: [0], sizes: "
                    f"[{size // width}, {width}], strides: [{width}, 1] : {self.tp(buf)} to {type_}"
                )
            else:
                out.append(
                    f"{f} = memref.expand_shape %a{buf} [[0, 1], [2]] output_shape "
                    f"[{self.p.rows // 2}, 2, {self.p.cols[buf]}] : {self.tp(buf)} into {type_}"
                )
            names[buf] = f
        cols = self.const(self.p.cols[part.write], out)
        wide = self.const(width, out)
        two = self.const(2, out)
        i, j = self.loops2((part.lo, part.hi, part.step), (part.c0, part.c1), out)
        body: list[str] = []

        def subscripts(row: str) -> str:
            if how == "cast":
                flat, at = self.fresh("fl"), self.fresh("at")
                body.append(f"{flat} = arith.muli {row}, {cols} : index")
                body.append(f"{at} = arith.addi {flat}, {j} : index")
                q, r = self.fresh("q"), self.fresh("r")
                body.append(f"{q} = arith.divui {at}, {wide} : index")
                body.append(f"{r} = arith.remui {at}, {wide} : index")
                return f"{q}, {r}"
            q, r = self.fresh("q"), self.fresh("r")
            body.append(f"{q} = arith.divui {row}, {two} : index")
            body.append(f"{r} = arith.remui {row}, {two} : index")
            return f"{q}, {r}, {j}"

        ir = i
        if part.shift:
            k = self.const(part.shift, body)
            ir = self.fresh("ir")
            body.append(f"{ir} = arith.addi {i}, {k} : index")
        x, y = self.fresh("x"), self.fresh("y")
        body.append(f"{x} = memref.load {names[part.read]}[{subscripts(ir)}] : {type_}")
        at = subscripts(i)
        body.append(f"{y} = memref.load {names[part.write]}[{at}] : {type_}")
        v = self.mix(x, y, seed, body)
        body.append(f"memref.store {v}, {names[part.write]}[{at}] : {type_}")
        return out + ["    " + line for line in body] + ["  }", "}"]

    def style_linalg(self, part: Part, seed: str) -> list[str]:
        # w = r + w over the views (read != write: no overlap but the same point)
        out: list[str] = []
        rv, rt, wv, wt = self.views(part, False, out)
        out.append(f"linalg.add ins({rv}, {wv} : {rt}, {wt}) outs({wv} : {wt})")
        return out

    def style_rowview(self, part: Part, seed: str) -> list[str]:
        """A rank-reducing subview of each row (at the loop's row, a dynamic offset) and
        of a subview of its columns."""
        out: list[str] = []
        lo, hi, step = (self.const(x, out) for x in (part.lo, part.hi, part.step))
        m = part.c1 - part.c0
        c0, cm = self.const(part.c0, out), self.const(m, out)
        i, j = self.fresh("i"), self.fresh("j")
        out.append(f"scf.for {i} = {lo} to {hi} step {step} {{")
        body: list[str] = []
        ir = i
        if part.shift:
            k = self.const(part.shift, body)
            ir = self.fresh("ir")
            body.append(f"{ir} = arith.addi {i}, {k} : index")
        cols_t = f"memref<{m}x{self.p.dtype}, strided<[1], offset: ?>>"
        views = []
        for buf, at in ((part.read, ir), (part.write, i)):
            row, cut = self.fresh("row"), self.fresh("cut")
            row_t = f"memref<{self.p.cols[buf]}x{self.p.dtype}, strided<[1], offset: ?>>"
            body.append(
                f"{row} = memref.subview %a{buf}[{at}, 0] [1, {self.p.cols[buf]}] [1, 1] : "
                f"{self.tp(buf)} to {row_t}"
            )
            body.append(f"{cut} = memref.subview {row}[{c0}] [{m}] [1] : {row_t} to {cols_t}")
            views.append(cut)
        body.append(f"scf.for {j} = %c0 to {cm} step %c1 {{")
        inner: list[str] = []
        x, y = self.fresh("x"), self.fresh("y")
        inner.append(f"{x} = memref.load {views[0]}[{j}] : {cols_t}")
        inner.append(f"{y} = memref.load {views[1]}[{j}] : {cols_t}")
        v = self.mix(x, y, seed, inner)
        inner.append(f"memref.store {v}, {views[1]}[{j}] : {cols_t}")
        body += ["  " + line for line in inner] + ["}"]
        return out + ["  " + line for line in body] + ["}"]

    def style_vector(self, part: Part, seed: str) -> list[str]:
        """The columns of each row as one vector.load and vector.store."""
        out: list[str] = []
        lo, hi, step = (self.const(x, out) for x in (part.lo, part.hi, part.step))
        c0 = self.const(part.c0, out)
        vt = f"vector<{part.c1 - part.c0}x{self.p.dtype}>"
        i = self.fresh("i")
        out.append(f"scf.for {i} = {lo} to {hi} step {step} {{")
        body: list[str] = []
        ir = i
        if part.shift:
            k = self.const(part.shift, body)
            ir = self.fresh("ir")
            body.append(f"{ir} = arith.addi {i}, {k} : index")
        x, y, s = self.fresh("x"), self.fresh("y"), self.fresh("vs")
        body.append(f"{x} = vector.load %a{part.read}[{ir}, {c0}] : {self.tp(part.read)}, {vt}")
        body.append(f"{y} = vector.load %a{part.write}[{i}, {c0}] : {self.tp(part.write)}, {vt}")
        body.append(f"{s} = vector.broadcast {seed} : {self.p.dtype} to {vt}")
        v = self.mix_as(x, y, s, vt, body)
        body.append(f"vector.store {v}, %a{part.write}[{i}, {c0}] : {self.tp(part.write)}, {vt}")
        return out + ["  " + line for line in body] + ["}"]

    def mix_as(self, x: str, y: str, seed: str, type_: str, out: list[str]) -> str:
        """x * k + y + seed, of scalars (`type_` the element type) or vectors."""
        a, b, c, k = (self.fresh("v") for _ in range(4))
        integer = self.p.dtype == "i32"
        factor = "3" if integer else "0.5"
        if type_ != self.p.dtype:
            factor = f"dense<{factor}>"
        kind = "i" if integer else "f"
        out.append(f"{k} = arith.constant {factor} : {type_}")
        out.append(f"{a} = arith.mul{kind} {x}, {k} : {type_}")
        out.append(f"{b} = arith.add{kind} {a}, {y} : {type_}")
        out.append(f"{c} = arith.add{kind} {b}, {seed} : {type_}")
        return c

    def style_copy(self, part: Part, seed: str) -> list[str]:
        """memref.copy from the view of the rows read to that of the rows written (or
        the other way round where they are the same buffer and the rows overlap)."""
        out: list[str] = []
        rv, rt, wv, wt = self.views(part, False, out)
        out.append(f"memref.copy {rv}, {wv} : {rt} to {wt}")
        return out

    def style_parallel(self, part: Part, seed: str) -> list[str]:
        return self.style_split(part, seed)

    def style_moving(self, part: Part, seed: str) -> list[str]:
        """As scf, the row read `shift` away only in odd time steps."""
        out: list[str] = []
        i, j = self.loops2((part.lo, part.hi, part.step), (part.c0, part.c1), out)
        body: list[str] = []
        two, k = self.const(2, body), self.const(part.shift, body)
        odd, by, ir = self.fresh("odd"), self.fresh("by"), self.fresh("ir")
        body.append(f"{odd} = arith.remui %t, {two} : index")
        body.append(f"{by} = arith.muli {odd}, {k} : index")
        body.append(f"{ir} = arith.addi {i}, {by} : index")
        x, y = self.fresh("x"), self.fresh("y")
        body.append(f"{x} = memref.load %a{part.read}[{ir}, {j}] : {self.tp(part.read)}")
        body.append(f"{y} = memref.load %a{part.write}[{i}, {j}] : {self.tp(part.write)}")
        v = self.mix(x, y, seed, body)
        body.append(f"memref.store {v}, %a{part.write}[{i}, {j}] : {self.tp(part.write)}")
        return out + ["    " + line for line in body] + ["  }", "}"]

    def style_split(self, part: Part, seed: str) -> list[str]:
        out: list[str] = []
        lo, hi, step = (self.const(x, out) for x in (part.lo, part.hi, part.step))
        c0, c1 = (self.const(x, out) for x in (part.c0, part.c1))
        i, j = self.fresh("i"), self.fresh("j")
        out.append(f"scf.parallel ({i}) = ({lo}) to ({hi}) step ({step}) {{")
        out.append(f"  scf.for {j} = {c0} to {c1} step %c1 {{")
        body: list[str] = []
        ir = i
        if part.shift:
            k = self.const(part.shift, body)
            ir = self.fresh("ir")
            body.append(f"{ir} = arith.addi {i}, {k} : index")
        x, y = self.fresh("x"), self.fresh("y")
        body.append(f"{x} = memref.load %a{part.read}[{ir}, {j}] : {self.tp(part.read)}")
        body.append(f"{y} = memref.load %a{part.write}[{i}, {j}] : {self.tp(part.write)}")
        v = self.mix(x, y, seed, body)
        body.append(f"memref.store {v}, %a{part.write}[{i}, {j}] : {self.tp(part.write)}")
        return out + ["    " + line for line in body] + ["  }", "}"]


# --- strategies ----------------------------------------------------------------------


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in `n` draws (st.integers leans to its bounds)."""
    return st.sampled_from((True, *(False,) * (n - 1)))


@st.composite
def phase_parts(
    draw: st.DrawFn,
    rows: int,
    cols: tuple[int, ...],
    buffers: int,
    ranks: int,
    wide: bool,
    styles: tuple[str, ...],
) -> tuple[Part, ...]:
    """One phase: the rows of one buffer cut into tasks."""
    write = draw(st.integers(0, buffers - 1))
    read = draw(st.integers(0, buffers - 1))
    # the rows the phase writes: all of them, or a range (the others keep their values)
    first, end = 0, rows
    if draw(one_in(4)):
        first = draw(st.integers(0, rows - 1))
        end = draw(st.integers(first + 1, rows))
    tasks = draw(st.integers(1, min(end - first, 12)))
    how = draw(st.sampled_from(("blocks", "strided", "rows"))) if tasks > 1 else "blocks"
    # "rows": a task per row, pinned to rank row mod `ranks` (an interleaved placement)
    pinned = how == "rows" and draw(st.booleans())
    if how == "strided":
        blocks = [(first + k, end, tasks) for k in range(tasks)]
    elif how == "rows":
        blocks = [(r, r + 1, 1) for r in range(first, end)]
    else:
        inner = st.integers(first + 1, end - 1)
        cuts = sorted(draw(st.sets(inner, max_size=tasks - 1))) if end - first > 1 else []
        edges = [first, *cuts, end]
        blocks = [(a, b, 1) for a, b in zip(edges, edges[1:])]
    # a few columns of wide rows (the interpreter is slow), any of narrow ones
    narrow = min(cols[write], cols[read])
    c0 = draw(st.integers(0, narrow - 1))
    c1 = draw(st.integers(c0 + 1, min(narrow, c0 + (3 if wide else narrow))))
    parts = []
    for lo, hi, step in blocks:
        shift = draw(st.sampled_from((-1, 0, 0, 1)))
        first = lo
        while first < hi and not (0 <= first + shift < rows):
            first += step
        last = [x for x in range(first, hi, step) if 0 <= x + shift < rows]
        if not last:
            shift, last = 0, list(range(lo, hi, step))
            first = lo
        if not last:
            continue
        hi_ = last[-1] + 1
        style = draw(st.sampled_from(styles))
        if style in ("linalg", "copy") and read == write:
            style = "subview"
        if style in ("split", "parallel") and read == write and shift != 0:
            style = "scf"
        rank = lo % ranks if pinned else draw(st.none() | st.integers(0, ranks - 1))
        seed = draw(st.integers(1, 9))
        parts.append(Part(write, read, first, hi_, step, c0, c1, shift, style, rank, seed))
    return tuple(parts)


@st.composite
def programs(draw: st.DrawFn, ranks: int) -> Program:
    dtype = draw(st.sampled_from(("i32", "f64")))
    wide = draw(st.booleans())
    if wide:
        page = 4096 // (4 if dtype == "i32" else 8)
        width = st.sampled_from((page // 2, page, page + 3, 2 * page))
    else:
        width = st.integers(1, 6)
    rows = draw(st.integers(2, 24))
    buffers = draw(st.integers(1, 4))
    # one width for every buffer, or one each
    same = draw(st.booleans())
    first = draw(width)
    cols = tuple(first if same or b == 0 else draw(width) for b in range(buffers))
    steps = draw(st.sampled_from((0, 0, 1, 2, 3)))
    styles = STYLES if draw(one_in(3)) else BOUNDED

    def sched() -> Sched:
        phases = draw(st.integers(1, 4))
        parts: list[Part] = []
        for _ in range(phases):
            parts += draw(phase_parts(rows, cols, buffers, ranks, wide, styles))
        return Sched(tuple(parts))

    def host() -> Host:
        def at() -> tuple[int, int, int]:
            buf = draw(st.integers(0, buffers - 1))
            return (buf, draw(st.integers(0, rows - 1)), draw(st.integers(0, cols[buf] - 1)))

        return Host(at(), at())

    loop: list[Phase] = [sched()]
    # mostly one schedule alone, which partitioned storage can split
    shape = draw(st.sampled_from((0, 0, 0, 0, 0, 1, 2, 3)))
    if shape == 1:
        loop.append(host())
    elif shape == 2:
        loop += [host(), sched()]
    elif shape == 3:
        loop.append(sched())
    after: list[Phase] = []
    if draw(one_in(6)):
        after.append(host())
    if draw(one_in(6)):
        after.append(sched())
    trips = draw(st.none() | st.integers(0, 3)) if steps else None
    return Program(dtype, rows, cols, buffers, steps, tuple(loop), tuple(after), trips)
