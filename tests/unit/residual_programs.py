"""Random dhir programs whose time loop is an `scf.while` testing a residual, for
tests/unit/test_random_residuals.py.

The entry takes grids %A0, %A1, ... (`memref<RxWxf64>`), a residual %C (f64, f32, i32
or i64; 1-D, 2-D or of a dynamic size) and %S, where the loop's count of steps is
stored after it. An `scf.while` runs one schedule a step until its condition fails: the
counter below a bound, and the sum of one or two loaded elements (of %C or of a grid, at
constant subscripts, or at the counter's, which dhir cannot know when compiling)
compared with a threshold (`tuned` picks one that stops the loop before its bound). The
schedule stands in the after region (`counted`) or before the loads in the before
region (`do`); a load before it may double the counter's step. Its tasks: row sweeps
(an `scf.parallel` that dhir-split may cut, or an `scf.for`) reading shifted rows of
another grid, element-wise `linalg.generic`s over views of the grids (shifted, or in
place `ins(%X) outs(%X)`), sums of a row of a grid into an element of %C, counts,
copies of a grid's element, an element-wise generic over all of %C, and sweeps scaled
by an element of %C (the ranks that run them need elements of %C that the condition
may not load). Tasks may carry a `dhir.rank`. Host code may store to %C before the
loop, between steps (which makes the loop no step loop) and after it; the loop may run
twice in an outer `scf.for`, and a second schedule may follow it. The interpreter is
the oracle: native runs must give its bits.
"""

import random
from dataclasses import dataclass, field, replace

import numpy as np

KINDS = ("sweep", "generic", "sum", "count", "cgeneric", "scaled", "copy")


@dataclass(frozen=True)
class Task:
    kind: str
    dst: int  # a grid, or the element of %C written (sum, count, copy)
    src: int  # a grid
    lo: int = 0  # rows [lo, hi) of dst
    hi: int = 0
    shift: int = 0  # rows of src read above (-1) or below (+1) the row written
    parallel: bool = True
    split: int = 0  # dhir.split, 0: none
    rank: int | None = None  # dhir.rank, taken modulo the ranks run on
    elem: int = 0  # an element of %C read (scaled) or a row/column read (sum, copy)
    in_place: bool = False  # generic: ins(dst view, ...) outs(dst view)
    seed: float = 0.5


@dataclass(frozen=True)
class Program:
    rows: int
    width: int
    grids: int
    size: int  # %C's elements
    loop: str  # counted | do
    # each condition load: (-1, k) is %C[k], k None: %C[%t mod size]; (g, k) is %A<g> at
    # its k-th element (row-major), k None: at the counter's row modulo the rows
    loads: tuple[tuple[int, int | None], ...]
    above: bool  # the condition asks the sum of the loads to stay below (else above)
    threshold: float
    limit: int  # the most steps
    tasks: tuple[Task, ...]
    host: tuple[int, int] | None = None  # %C[b] = %C[a] between steps, in the after region
    after: tuple[Task, ...] = field(default=())  # a schedule after the loop
    # host code before the loop (%C[b] = seed) and after it (%C[b] = %A<g>[r, 0])
    before: tuple[int, float] | None = None
    finally_: tuple[int, int, int] | None = None
    element: str = "f64"  # %C's element type: f64, f32, i32 or i64
    columns: int = 0  # %C is memref<(size / columns) x columns x element> where not 0
    dynamic: bool = False  # %C is memref<?xelement> (columns 0)
    # The counter steps by 2 where %C[k] > 1 at the step's start (a load in the loop
    # before the schedule), else by 1
    stride: int | None = None
    outer: bool = False  # the loop (and the host code before it) runs twice in an scf.for
    flat: bool = False  # a grid's element is loaded through a 1-D reinterpret_cast of it

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        grids = [rng.integers(-8, 8, (self.rows, self.width)) * 0.25 for _ in range(self.grids)]
        residual = rng.integers(0, 4, self.size) * (0.5 if self.element[0] == "f" else 1)
        kind = {"f64": np.float64, "f32": np.float32, "i32": np.int32, "i64": np.int64}
        residual = residual.astype(kind[self.element])
        if self.columns:
            residual = residual.reshape(self.size // self.columns, self.columns)
        return [*grids, residual, np.zeros(1, np.int64)]

    def text(self, ranks: int = 1) -> str:
        return _Writer(self, ranks).program()


class _Writer:
    def __init__(self, p: Program, ranks: int) -> None:
        self.p, self.ranks = p, ranks
        self.grid = f"memref<{p.rows}x{p.width}xf64>"
        shape = f"{p.size // p.columns}x{p.columns}" if p.columns else f"{p.size}"
        shape = "?" if p.dynamic else shape
        self.res = f"memref<{shape}x{p.element}>"
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def program(self) -> str:
        p = self.p
        args = [*(f"%A{k}: {self.grid}" for k in range(p.grids)), f"%C: {self.res}"]
        args.append("%S: memref<1xi64>")  # the steps the loop counted, last time it ran
        lines = [
            f"func.func @main({', '.join(args)}) {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            f"  %size = arith.constant {p.size} : index",
            f"  %rows = arith.constant {p.rows} : index",
            f"  %limit = arith.constant {p.limit} : index",
            f"  %thr = arith.constant {p.threshold} : f64",
        ]
        if p.outer:
            lines += [
                "  %two_o = arith.constant 2 : index",
                "  scf.for %outer = %c0 to %two_o step %c1 {",
            ]
        if p.before is not None:
            lines += [
                f"  %pre = arith.constant {p.before[0]} : index",
                f"  %prev = arith.constant {p.before[1]} : f64",
                *("  " + line for line in self.cstore("%pres", "%prev", "%pre")),
            ]
        lines.append("  %res = scf.while (%t = %c0) : (index) -> index {")
        if p.loop == "do":
            lines += self.stride()
            lines += self.schedule(p.tasks, "%t", "    ")
            lines += ["    %n = arith.addi %t, %by : index"]
            lines += self.condition("%n", "%t")
            lines += [
                "    scf.condition(%go) %n : index",
                "  } do {",
                "  ^bb0(%u: index):",
                *self.host(),
                "    scf.yield %u : index",
                "  }",
            ]
        else:
            lines += self.condition("%t", "%t")
            lines += [
                "    scf.condition(%go) %t : index",
                "  } do {",
                "  ^bb0(%u: index):",
                *self.stride(),
                *self.schedule(p.tasks, "%u", "    "),
                *self.host(),
                "    %n = arith.addi %u, %by : index",
                "    scf.yield %n : index",
                "  }",
            ]
        lines += [
            "  %steps = arith.index_cast %res : index to i64",
            "  memref.store %steps, %S[%c0] : memref<1xi64>",
        ]
        if p.outer:
            lines.append("  }")
        if p.after:
            lines += self.schedule(p.after, "%c1", "  ")
        if p.finally_ is not None:
            k, g, r = p.finally_
            lines += [
                f"  %fk = arith.constant {k} : index",
                f"  %fr = arith.constant {r} : index",
                f"  %fv = memref.load %A{g}[%fr, %c0] : {self.grid}",
                *("  " + line for line in self.cstore("%fs", "%fv", "%fk")),
            ]
        lines += ["  return", "}", ""]
        return "\n".join(lines)

    def condition(self, counter: str, moved: str) -> list[str]:
        p = self.p
        lines = [f"    %more = arith.cmpi slt, {counter}, %limit : index"]
        total = ""
        for k, (array, at) in enumerate(p.loads):
            lines += self.load(k, array, at, moved)
            if total:
                lines.append(f"    %s{k} = arith.addf {total}, %v{k} : f64")
                total = f"%s{k}"
            else:
                total = f"%v{k}"
        kind = "olt" if p.above else "ogt"
        lines += [
            f"    %ok = arith.cmpf {kind}, {total}, %thr : f64",
            "    %go = arith.andi %more, %ok : i1",
        ]
        return lines

    def load(self, k: int, array: int, at: int | None, moved: str) -> list[str]:
        if array < 0:
            index = f"    %at{k} = arith.remui {moved}, %size : index"
            if at is not None:
                index = f"    %at{k} = arith.constant {at} : index"
            return [index, *("    " + line for line in self.cload(f"%v{k}", f"%at{k}"))]
        rows, w = self.p.rows, self.p.width
        if self.p.flat and at is not None:  # through a 1-D view of the grid
            flat = f"memref<{rows * w}xf64>"
            return [
                f"    %fl{k} = memref.reinterpret_cast %A{array} to offset: [0], sizes: "
                f"[{rows * w}], strides: [1] : {self.grid} to {flat}",
                f"    %at{k} = arith.constant {at} : index",
                f"    %v{k} = memref.load %fl{k}[%at{k}] : {flat}",
            ]
        row = f"    %at{k} = arith.remui {moved}, %rows : index"
        if at is not None:
            row = f"    %at{k} = arith.constant {at // w % rows} : index"
        return [
            row,
            f"    %col{k} = arith.constant {(at or 0) % w} : index",
            f"    %v{k} = memref.load %A{array}[%at{k}, %col{k}] : {self.grid}",
        ]

    def at(self, name: str, index: str) -> tuple[list[str], str]:
        """%C's subscripts of its element `index` (an index value), and the ops for them."""
        if not self.p.columns:
            return [], index
        cols = self.p.columns
        return [
            f"{name}_n = arith.constant {cols} : index",
            f"{name}_r = arith.divui {index}, {name}_n : index",
            f"{name}_c = arith.remui {index}, {name}_n : index",
        ], f"{name}_r, {name}_c"

    def cload(self, name: str, index: str) -> list[str]:
        """`name` = %C's element `index` (an index value) as an f64."""
        ops, at = self.at(name, index)
        t = self.p.element
        if t == "f64":
            return [*ops, f"{name} = memref.load %C[{at}] : {self.res}"]
        ops.append(f"{name}_e = memref.load %C[{at}] : {self.res}")
        if t == "f32":
            return [*ops, f"{name} = arith.extf {name}_e : f32 to f64"]
        return [*ops, f"{name} = arith.sitofp {name}_e : {t} to f64"]

    def cstore(self, name: str, value: str, index: str) -> list[str]:
        """%C's element `index` = the f64 `value`."""
        ops, at = self.at(name, index)
        t = self.p.element
        if t == "f64":
            return [*ops, f"memref.store {value}, %C[{at}] : {self.res}"]
        if t == "f32":
            ops.append(f"{name}_v = arith.truncf {value} : f64 to f32")
        else:
            # Within an i32's range, however the grids grew (the interpreter stops at a
            # conversion that cannot hold its value).
            ops += [
                f"{name}_hi = arith.constant 1.0e6 : f64",
                f"{name}_lo = arith.constant -1.0e6 : f64",
                f"{name}_a = arith.minimumf {value}, {name}_hi : f64",
                f"{name}_b = arith.maximumf {name}_a, {name}_lo : f64",
                f"{name}_v = arith.fptosi {name}_b : f64 to {t}",
            ]
        return [*ops, f"memref.store {name}_v, %C[{at}] : {self.res}"]

    def stride(self) -> list[str]:
        if self.p.stride is None:
            return ["    %by = arith.addi %c1, %c0 : index"]
        return [
            f"    %sk = arith.constant {self.p.stride} : index",
            *("    " + line for line in self.cload("%sv", "%sk")),
            "    %one = arith.constant 1.0 : f64",
            "    %big = arith.cmpf ogt, %sv, %one : f64",
            "    %two = arith.constant 2 : index",
            "    %by = arith.select %big, %two, %c1 : index",
        ]

    def host(self) -> list[str]:
        if self.p.host is None:
            return []
        a, b = self.p.host
        return [
            f"    %ha = arith.constant {a} : index",
            f"    %hb = arith.constant {b} : index",
            *("    " + line for line in self.cload("%hv", "%ha")),
            *("    " + line for line in self.cstore("%hs", "%hv", "%hb")),
        ]

    def schedule(self, tasks: tuple[Task, ...], step: str, pad: str) -> list[str]:
        names = [*(f"%A{k}" for k in range(self.p.grids)), "%C"]
        lines = [f"{pad}dhir.schedule {', '.join(names)} {{"]
        lines.append(f'{pad}  %cpu = dhir.target {{kind = "any"}}')
        for task in tasks:
            lines += [pad + "  " + line for line in self.task(task, step)]
        lines.append(f"{pad}}}")
        return lines

    def task(self, task: Task, step: str) -> list[str]:
        attrs = []
        if task.rank is not None:
            attrs.append(f"dhir.rank = {task.rank % self.ranks} : i64")
        if task.split:
            attrs.append(f"dhir.split = {task.split} : i64")
        used = sorted({f"%A{task.src}", "%C"} | self._dsts(task))
        head = f"{self.fresh('task')} = dhir.task %cpu, {', '.join(used)}"
        if attrs:
            head += f" attributes {{{', '.join(attrs)}}}"
        body = getattr(self, "body_" + task.kind)(task)
        if task.kind == "sweep":  # its scale moves with the step, and the host's load
            body = body[:7] + self.moving(step) + body[7:]
            body = [line.replace("arith.mulf %a, %h", "arith.mulf %a, %hm") for line in body]
        return [head + " {", *("  " + line for line in body), "}"]

    def moving(self, step: str) -> list[str]:
        """%hm: a sweep's scale %h plus the step / 8, plus the element of %C that the host
        loaded before the schedule / 16 (in the loop, where it loads one)."""
        lines = [
            f"%ti = arith.index_cast {step} : index to i64",
            "%tf = arith.sitofp %ti : i64 to f64",
            "%eighth = arith.constant 0.125 : f64",
            "%tm = arith.mulf %tf, %eighth : f64",
            "%hm = arith.addf %h, %tm : f64",
        ]
        if self.p.stride is None or step == "%c1":
            return lines
        return [
            *lines[:-1],
            "%sixteenth = arith.constant 0.0625 : f64",
            "%sm = arith.mulf %sv, %sixteenth : f64",
            "%hh = arith.addf %h, %sm : f64",
            "%hm = arith.addf %hh, %tm : f64",
        ]

    def _dsts(self, task: Task) -> set[str]:
        if task.kind in ("sweep", "generic", "scaled"):
            return {f"%A{task.dst}"}
        return set()

    def consts(self, task: Task) -> list[str]:
        return [
            "%z = arith.constant 0 : index",
            "%e = arith.constant 1 : index",
            f"%lo = arith.constant {task.lo} : index",
            f"%hi = arith.constant {task.hi} : index",
            f"%w = arith.constant {self.p.width} : index",
            f"%h = arith.constant {task.seed} : f64",
            "%q = arith.constant 0.25 : f64",
        ]

    def body_sweep(self, task: Task, scale: str = "%h") -> list[str]:
        g = self.grid
        loop = (
            "scf.parallel (%i) = (%lo) to (%hi) step (%e) {"
            if task.parallel
            else "scf.for %i = %lo to %hi step %e {"
        )
        lines = [
            loop,
            "  scf.for %j = %z to %w step %e {",
            f"    %a = memref.load %A{task.src}[%i, %j] : {g}",
        ]
        if task.shift:
            op = "arith.addi" if task.shift > 0 else "arith.subi"
            lines += [
                f"    %i2 = {op} %i, %e : index",
                f"    %b = memref.load %A{task.src}[%i2, %j] : {g}",
            ]
        else:
            lines.append("    %b = arith.addf %a, %q : f64")
        lines += [
            f"    %m = arith.mulf %a, {scale} : f64",
            "    %n = arith.mulf %b, %q : f64",
            "    %s = arith.addf %m, %n : f64",
            f"    memref.store %s, %A{task.dst}[%i, %j] : {g}",
            "  }",
            "}",
        ]
        return self.consts(task) + lines

    def body_scaled(self, task: Task) -> list[str]:
        lines = [
            f"%ce = arith.constant {task.elem} : index",
            *self.cload("%cv", "%ce"),
            "%cs = arith.mulf %cv, %q : f64",
        ]
        body = self.body_sweep(task, "%cs")
        return body[:7] + lines + body[7:]

    def body_generic(self, task: Task) -> list[str]:
        """dst[lo:hi, :] = f(src[lo + shift:hi + shift, :], dst[lo:hi, :]) as a generic on
        views (the output read as an input in place where `in_place`)."""
        rows, w = task.hi - task.lo, self.p.width
        g = self.grid
        stride = f"strided<[{w}, 1], offset: {{}}>"
        out_t = f"memref<{rows}x{w}xf64, {stride.format(task.lo * w)}>"
        start = task.lo + task.shift
        in_t = f"memref<{rows}x{w}xf64, {stride.format(start * w)}>"
        ident = "affine_map<(i, j) -> (i, j)>"
        lines = [
            f"%h = arith.constant {task.seed} : f64",
            f"%vi = memref.subview %A{task.src}[{start}, 0] [{rows}, {w}] [1, 1] : {g} to {in_t}",
            f"%vo = memref.subview %A{task.dst}[{task.lo}, 0] [{rows}, {w}] [1, 1] : {g} to {out_t}",
        ]
        if task.in_place:
            ins, kinds, maps = "%vi, %vo", f"{in_t}, {out_t}", [ident] * 3
            block = "^bb0(%x: f64, %y: f64, %o: f64):"
        else:
            ins, kinds, maps = "%vi", in_t, [ident] * 2
            block = "^bb0(%x: f64, %o: f64):"
        mixed = "%y" if task.in_place else "%x"
        lines += [
            f"linalg.generic {{indexing_maps = [{', '.join(maps)}],"
            ' iterator_types = ["parallel", "parallel"]}',
            f"    ins({ins} : {kinds}) outs(%vo : {out_t}) {{",
            block,
            "  %m = arith.mulf %x, %h : f64",
            f"  %n = arith.addf %m, {mixed} : f64",
            "  linalg.yield %n : f64",
            "}",
        ]
        return lines

    def body_sum(self, task: Task) -> list[str]:
        """%C[dst] = %C[dst] * 0.5 + sum of |src[elem, :]| * 0.125."""
        g = self.grid
        return [
            "%z = arith.constant 0 : index",
            "%e = arith.constant 1 : index",
            f"%w = arith.constant {self.p.width} : index",
            f"%row = arith.constant {task.elem % self.p.rows} : index",
            f"%d = arith.constant {task.dst} : index",
            "%zero = arith.constant 0.0 : f64",
            "%half = arith.constant 0.5 : f64",
            "%eighth = arith.constant 0.125 : f64",
            "%acc = scf.for %j = %z to %w step %e iter_args(%x = %zero) -> (f64) {",
            f"  %a = memref.load %A{task.src}[%row, %j] : {g}",
            "  %b = math.absf %a : f64",
            "  %c = arith.addf %x, %b : f64",
            "  scf.yield %c : f64",
            "}",
            *self.cload("%old", "%d"),
            "%m = arith.mulf %old, %half : f64",
            "%s = arith.mulf %acc, %eighth : f64",
            "%n = arith.addf %m, %s : f64",
            *self.cstore("%st", "%n", "%d"),
        ]

    def body_count(self, task: Task) -> list[str]:
        return [
            f"%d = arith.constant {task.dst} : index",
            f"%h = arith.constant {task.seed} : f64",
            *self.cload("%old", "%d"),
            "%n = arith.addf %old, %h : f64",
            *self.cstore("%st", "%n", "%d"),
        ]

    def body_copy(self, task: Task) -> list[str]:
        return [
            f"%d = arith.constant {task.dst} : index",
            f"%r = arith.constant {task.elem % self.p.rows} : index",
            f"%c = arith.constant {task.lo % self.p.width} : index",
            f"%v = memref.load %A{task.src}[%r, %c] : {self.grid}",
            *self.cstore("%st", "%v", "%d"),
        ]

    def body_cgeneric(self, task: Task) -> list[str]:
        """%C = %C * 0.75 + seed, element-wise, in place (in its element type)."""
        t = self.p.element
        ident = "affine_map<(i, j) -> (i, j)>" if self.p.columns else "affine_map<(i) -> (i)>"
        iters = '"parallel", "parallel"' if self.p.columns else '"parallel"'
        if t[0] == "f":
            h, q, body = (
                f"{task.seed}",
                "0.75",
                ["  %m = arith.mulf %x, %q", "  %n = arith.addf %m, %h"],
            )
        else:
            h, q, body = (
                f"{int(task.seed * 4)}",
                "3",
                ["  %m = arith.muli %x, %q", "  %n = arith.addi %m, %h"],
            )
        return [
            f"%h = arith.constant {h} : {t}",
            f"%q = arith.constant {q} : {t}",
            f"linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = [{iters}]}}",
            f"    ins(%C : {self.res}) outs(%C : {self.res}) {{",
            f"^bb0(%x: {t}, %o: {t}):",
            *(f"{line} : {t}" for line in body),
            f"  linalg.yield %n : {t}",
            "}",
        ]


def _task(rng: random.Random, p_rows: int, grids: int, size: int) -> Task:
    kind = rng.choice(KINDS)
    seed = rng.choice((0.5, 0.75, 1.0, 1.25, -0.5))
    rank = rng.choice((None, None, None, 0, 1, 2, 3))
    src = rng.randrange(grids)
    if kind in ("sum", "count", "copy", "cgeneric"):
        return Task(
            kind,
            rng.randrange(size),
            src,
            lo=rng.randrange(8),
            elem=rng.randrange(p_rows),
            rank=rank,
            seed=seed,
        )
    dst = rng.choice([g for g in range(grids) if g != src] or [src])
    shift = rng.choice((-1, 0, 1))
    if kind == "generic" and dst == src:
        shift = 0
    if kind in ("sweep", "scaled") and dst == src:
        dst = (src + 1) % grids
    lo = rng.randrange(1, p_rows - 1)
    hi = rng.randrange(lo + 1, p_rows)
    split = rng.choice((0, 0, 2, 3))
    return Task(
        kind,
        dst,
        src,
        lo=lo,
        hi=hi,
        shift=shift,
        parallel=rng.random() < 0.7,
        split=split,
        rank=rank,
        elem=rng.randrange(size),
        in_place=rng.random() < 0.5,
        seed=seed,
    )


def generate(seed: int) -> Program:
    rng = random.Random(seed)
    rows, width = rng.randrange(4, 13), rng.randrange(1, 7)
    grids = rng.randrange(2, 4)
    size = rng.choice((1, 2, 3, 8))
    element = rng.choice(("f64", "f64", "f32", "i32", "i64"))
    columns = rng.choice([0, 0] + [c for c in (2, 4) if size % c == 0 and size > c])
    tasks = [_task(rng, rows, grids, size) for _ in range(rng.randrange(2, 6))]
    # Something writes the element the condition tests, most of the time.
    # Distinct elements of %C where it has them: each must reach every rank.
    elements = rng.sample(range(size), min(size, 3))
    loads: list[tuple[int, int | None]] = [(-1, k) for k in elements[: rng.choice((1, 2, 2, 3))]]
    if rng.random() < 0.15:
        loads[0] = (-1, None)
    if rng.random() < 0.3:
        at = rng.randrange(rows * width) if rng.random() < 0.8 else None
        loads.append((rng.randrange(grids), at))
    for array, at in loads:  # a task writes each element loaded, most of the time
        if at is not None and array < 0 and rng.random() < 0.8:
            kind = rng.choice(("sum", "count", "copy"))
            task = Task(
                kind,
                at,
                rng.randrange(grids),
                elem=rng.randrange(rows),
                rank=rng.choice((None, 0, 1, 2, 3)),
                seed=0.5,
            )
            tasks.append(task)
    rng.shuffle(tasks)
    host = (rng.randrange(size), rng.randrange(size)) if rng.random() < 0.25 else None
    after = tuple(_task(rng, rows, grids, size) for _ in range(rng.choice((0,) * 6 + (1, 2))))
    return Program(
        rows,
        width,
        grids,
        size,
        rng.choice(("counted", "do")),
        tuple(loads),
        rng.random() < 0.7,
        rng.choice((1.0, 2.0, 3.0, 5.0)),
        rng.randrange(2, 7),
        tuple(tasks),
        host,
        after,
        (rng.randrange(size), rng.choice((0.0, 1.5))) if rng.random() < 0.25 else None,
        (rng.randrange(size), rng.randrange(grids), rng.randrange(rows))
        if rng.random() < 0.25
        else None,
        element,
        columns,
        not columns and rng.random() < 0.2,
        rng.randrange(size) if rng.random() < 0.3 else None,
        rng.random() < 0.2,
        rng.random() < 0.5,
    )


THRESHOLDS = (0.5, 2.0, 5.0, 13.0, -1.0)


def tuned(program: Program, seed: int) -> Program:
    """`program` with the threshold and comparison that, on the inputs of `seed`, make the
    residual stop the loop after the most steps before its bound (the interpreter
    counts them): a loop that stops at once or only at its bound tests little."""
    import dhir  # noqa: PLC0415 (the generator itself needs no dhir)

    best, score = program, -1
    for above in (True, False):
        for threshold in THRESHOLDS:
            candidate = replace(program, above=above, threshold=threshold)
            try:
                out = dhir.run(candidate.text(), *candidate.inputs(seed), backend="interp")
            except dhir.DhirError:  # the interpreter stopped it: a worse candidate
                continue
            steps = int(out[-1][0])
            stopped = steps < program.limit
            value = steps * 2 + stopped if steps < program.limit else steps
            if value > score:
                best, score = candidate, value
    return best
