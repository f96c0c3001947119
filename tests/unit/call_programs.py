"""Random dhir programs whose tasks and host code call the program's own functions, for
tests/unit/test_random_calls.py.

The entry takes grids %A0, %A1, ... (`memref<RxWxf64>`). The module's functions: @scale
(`d = d * 0.5 + s * k` over two 2-D views of dynamic sizes and offsets), @sweep (rows
[lo, hi) of a whole grid from the rows above and below in another grid, an
`scf.parallel`), @poke (one element of a grid through a 1-D reinterpret_cast of it),
@total (the sum of a view, a result), @chain (calls @sweep, then @poke on the grid it
read), @column (a column of a grid, a rank-reducing view), @fill (writes a view, reads
nothing) and @cond (writes row i whole where i < lim, else updates one element; called
from a loop over rows). @sweep and @poke may be the user's C code (LINKED_C, `--link`).
A task calls one of them on views it makes (or on views made before its schedule), or is
a loop of its own (an `scf.parallel` that dhir-split may cut, or an `scf.for`). Schedules (1-3, one after another, in a time
loop or not) have host code between them that calls the functions too; one of them may
run only where an element of a grid is not negative. `plain` writes
the same program without schedules: CodeDrop makes the tasks. The values start as
multiples of 1/4 and are scaled by multiples of 1/16: few ops round, so that fast-math
modes may be compared with the interpreter too.
"""

import random
from dataclasses import dataclass

import numpy as np

KINDS = ("loop", "scale", "sweep", "poke", "total", "chain", "column", "cond", "fill")
DYN2 = "memref<?x?xf64, strided<[?, 1], offset: ?>>"
DYN1 = "memref<?xf64, strided<[?], offset: ?>>"


@dataclass(frozen=True)
class Call:
    kind: str
    dst: int  # a grid
    src: int  # a grid
    lo: int = 1  # rows [lo, hi)
    hi: int = 2
    c0: int = 0  # columns [c0, c1)
    c1: int = 1
    shift: int = 0  # rows of src below (+) or above (-) those of dst (scale, loop)
    parallel: bool = True
    split: int = 0  # dhir.split of a loop task
    rank: int | None = None
    at: int = 0  # poke: the element (row-major); total: where the sum goes
    outside: bool = False  # scale: its views made before the schedule (operands of the task)
    k: float = 0.25


@dataclass(frozen=True)
class Program:
    rows: int
    width: int
    grids: int
    phases: tuple[tuple[str, tuple[Call, ...]], ...]  # ("task", calls) | ("host", calls)
    steps: int = 0  # a time loop of this many steps around the phases (0: none)
    linked: bool = False  # @sweep and @poke are the user's C code (LINKED_C, `--link`)
    # (phase, grid, element): that phase runs only where the grid's element (row-major)
    # is not negative, an scf.if of host code
    guard: tuple[int, int, int] | None = None

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.integers(-8, 8, (self.rows, self.width)) * 0.25 for _ in range(self.grids)]

    def text(self, ranks: int = 1, plain: bool = False) -> str:
        return _Writer(self, ranks, plain).program()


class _Writer:
    def __init__(self, p: Program, ranks: int, plain: bool) -> None:
        self.p, self.ranks, self.plain = p, ranks, plain
        self.grid = f"memref<{p.rows}x{p.width}xf64>"
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def program(self) -> str:
        p = self.p
        args = ", ".join(f"%A{k}: {self.grid}" for k in range(p.grids))
        lines = [*self.functions(), f"func.func @main({args}) {{"]
        body: list[str] = []
        for n, (kind, calls) in enumerate(p.phases):
            phase: list[str] = []
            if kind == "task" and not self.plain:
                phase += self.schedule(calls)
            else:
                for call in calls:
                    phase += self.call(call)
            body += self.guarded(n, phase)
        if p.steps:
            lines += [
                "  %tl0 = arith.constant 0 : index",
                "  %tl1 = arith.constant 1 : index",
                f"  %tln = arith.constant {p.steps} : index",
                "  scf.for %t = %tl0 to %tln step %tl1 {",
                *("    " + line for line in body),
                "  }",
            ]
        else:
            lines += ["  " + line for line in body]
        lines += ["  return", "}", ""]
        return "\n".join(lines)

    def guarded(self, n: int, phase: list[str]) -> list[str]:
        """`phase` (the n-th), in an scf.if where the program's guard names it."""
        if self.p.guard is None or self.p.guard[0] != n:
            return phase
        _, grid, at = self.p.guard
        row, col = divmod(at, self.p.width)
        g = self.fresh("g")
        return [
            f"{g}_r = arith.constant {row} : index",
            f"{g}_c = arith.constant {col} : index",
            f"{g}_v = memref.load %A{grid}[{g}_r, {g}_c] : {self.grid}",
            f"{g}_z = arith.constant 0.0 : f64",
            f"{g}_go = arith.cmpf oge, {g}_v, {g}_z : f64",
            f"scf.if {g}_go {{",
            *("  " + line for line in phase),
            "}",
        ]

    def functions(self) -> list[str]:
        g = self.grid
        return f"""func.func @scale(%d: {DYN2}, %s: {DYN2}, %k: f64) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %half = arith.constant 0.5 : f64
  %n = memref.dim %d, %c0 : {DYN2}
  %m = memref.dim %d, %c1 : {DYN2}
  scf.for %i = %c0 to %n step %c1 {{
    scf.for %j = %c0 to %m step %c1 {{
      %a = memref.load %d[%i, %j] : {DYN2}
      %b = memref.load %s[%i, %j] : {DYN2}
      %x = arith.mulf %a, %half : f64
      %y = arith.mulf %b, %k : f64
      %z = arith.addf %x, %y : f64
      memref.store %z, %d[%i, %j] : {DYN2}
    }}
  }}
  return
}}
{self.sweep_and_poke()}
func.func @total(%s: {DYN2}) -> f64 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %n = memref.dim %s, %c0 : {DYN2}
  %m = memref.dim %s, %c1 : {DYN2}
  %t = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {{
    %u = scf.for %j = %c0 to %m step %c1 iter_args(%bcc = %acc) -> (f64) {{
      %a = memref.load %s[%i, %j] : {DYN2}
      %b = arith.addf %bcc, %a : f64
      scf.yield %b : f64
    }}
    scf.yield %u : f64
  }}
  return %t : f64
}}
func.func @chain(%d: {g}, %s: {g}, %lo: index, %hi: index, %e: index, %k: f64) {{
  func.call @sweep(%d, %s, %lo, %hi, %k) : ({g}, {g}, index, index, f64) -> ()
  func.call @poke(%s, %e, %k) : ({g}, index, f64) -> ()
  return
}}
func.func @cond(%d: {g}, %i: index, %lim: index, %at: index, %v: f64) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cw = arith.constant {self.p.width} : index
  %q = arith.constant 0.25 : f64
  %below = arith.cmpi slt, %i, %lim : index
  scf.if %below {{
    scf.for %j = %c0 to %cw step %c1 {{
      %ji = arith.index_cast %j : index to i64
      %jf = arith.sitofp %ji : i64 to f64
      %x = arith.mulf %jf, %q : f64
      %y = arith.addf %x, %v : f64
      memref.store %y, %d[%i, %j] : {g}
    }}
  }} else {{
    %a = memref.load %d[%at, %c0] : {g}
    %y = arith.addf %a, %v : f64
    memref.store %y, %d[%at, %c0] : {g}
  }}
  return
}}
func.func @fill(%d: {DYN2}, %v: f64) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %q = arith.constant 0.25 : f64
  %n = memref.dim %d, %c0 : {DYN2}
  %m = memref.dim %d, %c1 : {DYN2}
  scf.for %i = %c0 to %n step %c1 {{
    %ii = arith.index_cast %i : index to i64
    %f = arith.sitofp %ii : i64 to f64
    %x = arith.mulf %f, %q : f64
    %y = arith.addf %x, %v : f64
    scf.for %j = %c0 to %m step %c1 {{
      memref.store %y, %d[%i, %j] : {DYN2}
    }}
  }}
  return
}}
func.func @column(%d: {DYN1}, %k: f64) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %d, %c0 : {DYN1}
  scf.for %i = %c0 to %n step %c1 {{
    %a = memref.load %d[%i] : {DYN1}
    %ii = arith.index_cast %i : index to i64
    %f = arith.sitofp %ii : i64 to f64
    %x = arith.mulf %f, %k : f64
    %y = arith.addf %a, %x : f64
    memref.store %y, %d[%i] : {DYN1}
  }}
  return
}}
""".splitlines()

    def sweep_and_poke(self) -> str:
        r, w, g = self.p.rows, self.p.width, self.grid
        flat = f"memref<{r * w}xf64>"
        if self.p.linked:
            return (
                f"func.func private @sweep({g}, {g}, index, index, f64)\n"
                f"func.func private @poke({g}, index, f64)"
            )
        return f"""func.func @sweep(%d: {g}, %s: {g}, %lo: index, %hi: index, %k: f64) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cw = arith.constant {w} : index
  %half = arith.constant 0.5 : f64
  scf.parallel (%i, %j) = (%lo, %c0) to (%hi, %cw) step (%c1, %c1) {{
    %up = arith.subi %i, %c1 : index
    %dn = arith.addi %i, %c1 : index
    %a = memref.load %s[%up, %j] : {g}
    %b = memref.load %s[%dn, %j] : {g}
    %x = arith.addf %a, %b : f64
    %y = arith.mulf %x, %half : f64
    %z = arith.addf %y, %k : f64
    memref.store %z, %d[%i, %j] : {g}
    scf.reduce
  }}
  return
}}
func.func @poke(%d: {g}, %e: index, %v: f64) {{
  %f = memref.reinterpret_cast %d to offset: [0], sizes: [{r * w}], strides: [1] : {g} to {flat}
  %half = arith.constant 0.5 : f64
  %a = memref.load %f[%e] : {flat}
  %x = arith.mulf %a, %half : f64
  %y = arith.addf %x, %v : f64
  memref.store %y, %f[%e] : {flat}
  return
}}"""

    def schedule(self, calls: tuple[Call, ...]) -> list[str]:
        names = [f"%A{k}" for k in range(self.p.grids)]
        before: list[str] = []
        views: dict[Call, tuple[str, str]] = {}
        for call in calls:
            if call.kind == "scale" and call.outside:
                ops, dv, sv = self.scale_views(call, cast=False)
                before += ops
                views[call] = (dv, sv)
        viewed = {f"%A{g}" for c in views for g in (c.dst, c.src)}
        operands = [n for n in names if n not in viewed] + [v for p in views.values() for v in p]
        lines = [*before, f"dhir.schedule {', '.join(operands)} {{"]
        lines.append('  %cpu = dhir.target {kind = "any"}')
        for call in calls:
            lines += ["  " + line for line in self.task(call, views.get(call))]
        lines.append("}")
        return lines

    def task(self, call: Call, views: tuple[str, str] | None) -> list[str]:
        attrs = []
        if call.rank is not None:
            attrs.append(f"dhir.rank = {call.rank % self.ranks} : i64")
        if call.split and call.kind == "loop":
            attrs.append(f"dhir.split = {call.split} : i64")
        used = sorted({f"%A{call.dst}", f"%A{call.src}"})
        if views is not None:
            used = list(views)
        head = f"{self.fresh('task')} = dhir.task %cpu, {', '.join(used)}"
        if attrs:
            head += f" attributes {{{', '.join(attrs)}}}"
        if views is not None:
            vt = self.view(call.hi - call.lo, self.p.width, call.lo, 0)
            vs = self.view(call.hi - call.lo, self.p.width, call.lo + call.shift, 0)
            body = [
                f"%k = arith.constant {call.k} : f64",
                f"%dd = memref.cast {views[0]} : {vt} to {DYN2}",
                f"%sd = memref.cast {views[1]} : {vs} to {DYN2}",
                f"func.call @scale(%dd, %sd, %k) : ({DYN2}, {DYN2}, f64) -> ()",
            ]
        else:
            body = self.call(call)
        return [head + " {", *("  " + line for line in body), "}"]

    def scale_views(self, call: Call, cast: bool = True) -> tuple[list[str], str, str]:
        """Views of rows [lo, hi) of dst and of src shifted, `cast` to DYN2; else (views
        made before a schedule, which moves contiguous ones only) of whole rows."""
        dv, sv = self.fresh("dv"), self.fresh("sv")
        n, m = call.hi - call.lo, call.c1 - call.c0
        c0 = call.c0
        if not cast:
            c0, m = 0, self.p.width
        ops = []
        for name, grid, row in ((dv, call.dst, call.lo), (sv, call.src, call.lo + call.shift)):
            vt = self.view(n, m, row, c0)
            made = f"{name}_s" if cast else name
            ops.append(
                f"{made} = memref.subview %A{grid}[{row}, {c0}] [{n}, {m}] [1, 1] : "
                f"{self.grid} to {vt}"
            )
            if cast:
                ops.append(f"{name} = memref.cast {name}_s : {vt} to {DYN2}")
        return ops, dv, sv

    def view(self, n: int, m: int, row: int, col: int) -> str:
        w = self.p.width
        return f"memref<{n}x{m}xf64, strided<[{w}, 1], offset: {row * w + col}>>"

    def k(self, call: Call) -> tuple[list[str], str]:
        """%k: the call's constant, plus the time step / 16 in a time loop."""
        k = self.fresh("k")
        if not self.p.steps:
            return [f"{k} = arith.constant {call.k} : f64"], k
        return [
            f"{k}_c = arith.constant {call.k} : f64",
            f"{k}_i = arith.index_cast %t : index to i64",
            f"{k}_f = arith.sitofp {k}_i : i64 to f64",
            f"{k}_q = arith.constant 0.0625 : f64",
            f"{k}_m = arith.mulf {k}_f, {k}_q : f64",
            f"{k} = arith.addf {k}_c, {k}_m : f64",
        ], k

    def call(self, call: Call) -> list[str]:
        kops, k = self.k(call)
        g = self.grid
        d, s = f"%A{call.dst}", f"%A{call.src}"
        c = self.fresh("c")
        idx = [
            f"{c}_one = arith.constant 1 : index",
            f"{c}_lo = arith.constant {call.lo} : index",
            f"{c}_hi = arith.constant {call.hi} : index",
        ]
        if call.kind == "scale":
            ops, dv, sv = self.scale_views(call)
            return [*kops, *ops, f"func.call @scale({dv}, {sv}, {k}) : ({DYN2}, {DYN2}, f64) -> ()"]
        if call.kind == "sweep":
            return [
                *kops,
                *idx,
                f"func.call @sweep({d}, {s}, {c}_lo, {c}_hi, {k}) : ({g}, {g}, index, index, f64) -> ()",
            ]
        if call.kind == "poke":
            return [
                *kops,
                f"{c}_e = arith.constant {call.at} : index",
                f"func.call @poke({d}, {c}_e, {k}) : ({g}, index, f64) -> ()",
            ]
        if call.kind == "chain":
            return [
                *kops,
                *idx,
                f"{c}_e = arith.constant {call.at} : index",
                f"func.call @chain({d}, {s}, {c}_lo, {c}_hi, {c}_e, {k}) : "
                f"({g}, {g}, index, index, index, f64) -> ()",
            ]
        if call.kind == "fill":  # writes a view of dst, reads nothing
            n, m = call.hi - call.lo, call.c1 - call.c0
            vt = self.view(n, m, call.lo, call.c0)
            return [
                *kops,
                f"{c}_v = memref.subview {d}[{call.lo}, {call.c0}] [{n}, {m}] [1, 1] : {g} to {vt}",
                f"{c}_d = memref.cast {c}_v : {vt} to {DYN2}",
                f"func.call @fill({c}_d, {k}) : ({DYN2}, f64) -> ()",
            ]
        if call.kind == "total":
            n, m = call.hi - call.lo, call.c1 - call.c0
            row, col = divmod(call.at, self.p.width)
            vt = self.view(n, m, call.lo, call.c0)
            return [
                f"{c}_v = memref.subview {s}[{call.lo}, {call.c0}] [{n}, {m}] [1, 1] : {g} to {vt}",
                f"{c}_d = memref.cast {c}_v : {vt} to {DYN2}",
                f"{c}_t = func.call @total({c}_d) : ({DYN2}) -> f64",
                f"{c}_r = arith.constant {row} : index",
                f"{c}_c = arith.constant {col} : index",
                f"memref.store {c}_t, {d}[{c}_r, {c}_c] : {g}",
            ]
        if call.kind == "column":
            n = call.hi - call.lo
            vt = f"memref<{n}xf64, strided<[{self.p.width}], offset: {call.lo * self.p.width + call.c0}>>"
            return [
                *kops,
                f"{c}_v = memref.subview {d}[{call.lo}, {call.c0}] [{n}, 1] [1, 1] : {g} to {vt}",
                f"{c}_d = memref.cast {c}_v : {vt} to {DYN1}",
                f"func.call @column({c}_d, {k}) : ({DYN1}, f64) -> ()",
            ]
        if call.kind == "cond":  # rows [lo, lim) written whole, an element at `at` else
            row = call.at // self.p.width
            return [
                *kops,
                *idx,
                f"{c}_lim = arith.constant {call.lo + call.shift} : index",
                f"{c}_at = arith.constant {row} : index",
                f"scf.for {c}_i = {c}_lo to {c}_hi step {c}_one {{",
                f"  func.call @cond({d}, {c}_i, {c}_lim, {c}_at, {k}) : "
                f"({g}, index, index, index, f64) -> ()",
                "}",
            ]
        return [*kops, *self.loop(call, k)]

    def loop(self, call: Call, k: str) -> list[str]:
        """dst[i, j] = src[i + shift, j] * 0.5 + k over rows [lo, hi), columns [c0, c1)."""
        g = self.grid
        c = self.fresh("l")
        head = (
            f"scf.parallel (%i, %j) = ({c}_lo, {c}_c0) to ({c}_hi, {c}_c1) step ({c}_1, {c}_1) {{"
            if call.parallel
            else f"scf.for %i = {c}_lo to {c}_hi step {c}_1 {{"
        )
        inner = [] if call.parallel else [f"  scf.for %j = {c}_c0 to {c}_c1 step {c}_1 {{"]
        pad = "  " if call.parallel else "    "
        body = [
            f"{pad}%r = arith.addi %i, {c}_sh : index",
            f"{pad}%a = memref.load %A{call.src}[%r, %j] : {g}",
            f"{pad}%x = arith.mulf %a, {c}_h : f64",
            f"{pad}%y = arith.addf %x, {k} : f64",
            f"{pad}memref.store %y, %A{call.dst}[%i, %j] : {g}",
        ]
        tail = ["  scf.reduce", "}"] if call.parallel else ["  }", "}"]
        return [
            f"{c}_lo = arith.constant {call.lo} : index",
            f"{c}_hi = arith.constant {call.hi} : index",
            f"{c}_c0 = arith.constant {call.c0} : index",
            f"{c}_c1 = arith.constant {call.c1} : index",
            f"{c}_1 = arith.constant 1 : index",
            f"{c}_sh = arith.constant {call.shift} : index",
            f"{c}_h = arith.constant 0.5 : f64",
            head,
            *inner,
            *body,
            *tail,
        ]


def _call(rng: random.Random, rows: int, width: int, grids: int, host: bool) -> Call:
    kinds = KINDS[1:] if host else KINDS
    kind = rng.choice(kinds)
    dst = rng.randrange(grids)
    src = rng.randrange(grids)
    if kind in ("sweep", "chain") or (kind == "loop" and rng.random() < 0.8):
        src = rng.choice([g for g in range(grids) if g != dst])  # a parallel loop reads apart
    lo = rng.randrange(1, rows - 1)
    hi = rng.randrange(lo + 1, rows)
    c0 = rng.randrange(width)
    c1 = rng.randrange(c0 + 1, width + 1)
    shift = rng.randrange(1 - lo, rows - hi + 1) if kind in ("scale", "loop") else 0
    if kind == "cond":  # the rows [lo, lo + shift) of [lo, hi) are written whole
        shift = rng.randrange(0, hi - lo + 2)
    if kind == "loop" and dst == src:
        shift = 0
    return Call(
        kind,
        dst,
        src,
        lo,
        hi,
        c0,
        c1,
        shift,
        parallel=rng.random() < 0.7,
        split=rng.choice((0, 0, 2, 3)),
        rank=rng.choice((None, None, 0, 1, 2, 3)),
        at=rng.randrange(rows * width),
        outside=not host and kind == "scale" and dst != src and rng.random() < 0.3,
        k=rng.choice((0.25, -0.5, 0.75, 1.0)),
    )


def generate(seed: int, big: bool = False) -> Program:
    """Program `seed`; `big`: of 12-40 rows rather than 4-10."""
    rng = random.Random(seed)
    rows, width = rng.randrange(4, 11), rng.randrange(1, 6)
    if big:
        rows = rng.randrange(12, 41)
    grids = rng.randrange(2, 4)
    phases: list[tuple[str, tuple[Call, ...]]] = []
    for n in range(rng.randrange(1, 4)):
        if n and rng.random() < 0.6:
            host = tuple(_call(rng, rows, width, grids, True) for _ in range(rng.randrange(1, 3)))
            phases.append(("host", host))
        tasks = [_call(rng, rows, width, grids, False) for _ in range(rng.randrange(1, 5))]
        # A view made before its schedule is refused next to its buffer: alone, it is not.
        phases += [("task", (t,)) for t in tasks if t.outside]
        if any(not t.outside for t in tasks):
            phases.append(("task", tuple(t for t in tasks if not t.outside)))
    steps = rng.choice((0, 0, 2, 3))
    linked = rng.random() < 0.25
    guard = None
    if rng.random() < 0.3:
        guard = (rng.randrange(len(phases)), rng.randrange(grids), rng.randrange(rows * width))
    return Program(rows, width, grids, tuple(phases), steps, linked, guard)


# @sweep and @poke as the user's C code: a memref passed as its descriptor's fields.
LINKED_C = """#include <stdint.h>
void sweep(double *da, double *d, int64_t doff, int64_t dn, int64_t dm, int64_t ds0,
           int64_t ds1, double *sa, double *s, int64_t soff, int64_t sn, int64_t sm,
           int64_t ss0, int64_t ss1, int64_t lo, int64_t hi, double k) {
  for (int64_t i = lo; i < hi; ++i)
    for (int64_t j = 0; j < dm; ++j) {
      double a = s[soff + (i - 1) * ss0 + j * ss1], b = s[soff + (i + 1) * ss0 + j * ss1];
      double x = a + b;
      double y = x * 0.5;
      d[doff + i * ds0 + j * ds1] = y + k;
    }
}
void poke(double *da, double *d, int64_t doff, int64_t dn, int64_t dm, int64_t ds0,
          int64_t ds1, int64_t e, double v) {
  double *at = d + doff + e;
  double x = *at * 0.5;
  *at = x + v;
}
"""


def linked_object(folder: str) -> str:
    """LINKED_C compiled into `folder`: the object's path."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    source, obj = os.path.join(folder, "linked.c"), os.path.join(folder, "linked.o")
    with open(source, "w") as f:
        f.write(LINKED_C)
    subprocess.run(["clang-22", "-O2", "-fPIC", "-c", source, "-o", obj], check=True)
    return obj
