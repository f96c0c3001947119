"""Random dhir programs whose tasks touch *parts* of shared memrefs, for the region tests
(tests/unit/test_random_regions.py).

A program is a list of loop-nest statements grouped into tasks, schedules and host code,
inside an `scf.for` time loop. Every statement runs over a box of iteration points
(lo, hi, step per loop; hi a constant or an index argument of the entry) and, at each
point in lexicographic order, combines what it reads into a value and stores it:
`mix` is `acc = acc * 3 + r` in i32 (wrapping) or `acc * 0.5 + r` in f64, from a seed
(k + 1, plus the time step where the statement sits in the time loop); `copy` stores its
one read, `fill` the seed. Every subscript is affine in the loop variables (`i + 1`,
`2*i + j - 1`, a row or a column), so the statement can be written as scf loops with
arith, affine.for with affine.load/store, affine.apply of an affine map, or as loops over
(or a linalg op on) memref.subviews taken inside the task, loads and stores through the
memref.transpose of such subviews (their dimensions reversed). `Program.reference` computes
what the program means with plain Python, so the oracle itself is checked too.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import strategies as st

Handles = Callable[[int], tuple[str, str]]  # a buffer -> the name and type to use
BOX_STYLES = ("subview", "transposed", "linalg")  # every access is a strided box of its memref
# How the time loop is written. A host parallel loop means its iterations in lexicographic
# order too (as the interpreter runs it): they hold schedules, so the native backend must
# not run them on threads. Host code in it that stores one element in every step breaks
# its promise of independent iterations, and both backends refuse the program.
TIME_LOOPS = {
    "scf.for": "scf.for %t = %c0 to %steps step %c1 {",
    "scf.parallel": "scf.parallel (%t) = (%c0) to (%steps) step (%c1) {",
    "affine.parallel": "affine.parallel (%t) = (0) to (symbol(%steps)) {",
}


@dataclass(frozen=True)
class Loop:
    lo: int
    hi: int  # exclusive
    step: int = 1
    bound: int | None = None  # the index argument %n<bound> (whose value is hi) as bound
    # hi - back + t in step t of the time loop (a bound that is a loop value); hi is the
    # bound in the last step, so every access stays in bounds
    back: int | None = None

    def points(self, t: int | None = None) -> range:
        if self.back is not None and t is not None:
            return range(self.lo, self.hi - self.back + t, self.step)
        return range(self.lo, self.hi, self.step)

    def last(self) -> int:
        return self.points()[-1]


@dataclass(frozen=True)
class Access:
    """buffer[sum(coeffs[d][v] * var_v) + consts[d] for each dim d]."""

    buf: int
    coeffs: tuple[tuple[int, ...], ...]
    consts: tuple[int, ...]

    def at(self, point: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(
            sum(c * x for c, x in zip(row, point)) + k for row, k in zip(self.coeffs, self.consts)
        )

    def choices(self) -> tuple[int, ...]:
        """The buffers the access may reach (see Chosen)."""
        return (self.buf,)

    def pick(self, t: int, scalars: tuple[int, ...]) -> int:
        """The buffer it reaches in time step `t`."""
        return self.buf


@dataclass(frozen=True)
class Stmt:
    loops: tuple[Loop, ...]
    reads: tuple[Access, ...]
    write: Access
    style: str = "scf"
    combine: str = "mix"  # mix | copy | fill
    seed: int = 1
    timed: bool = False  # the seed adds the time loop's step

    def points(self, t: int | None = None) -> Iterator[tuple[int, ...]]:
        def walk(prefix: tuple[int, ...], rest: tuple[Loop, ...]) -> Iterator[tuple[int, ...]]:
            if not rest:
                yield prefix
                return
            for x in rest[0].points(t):
                yield from walk((*prefix, x), rest[1:])

        return walk((), self.loops)

    def buffers(self) -> set[int]:
        return {b for a in (*self.reads, self.write) for b in a.choices()}


@dataclass(frozen=True)
class Task:
    stmts: tuple[Stmt, ...]
    rank: int | None = None
    # per buffer the alias mode allows a choice for: True = use the view (%v), else %b
    through_view: bool = False


@dataclass(frozen=True)
class Schedule:
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class Host:
    stmt: Stmt


Phase = Schedule | Host


@dataclass(frozen=True)
class Program:
    dtype: str  # i32 | f64
    shapes: tuple[tuple[int, ...], ...]
    scalars: tuple[int, ...]  # values of the index arguments %n0, %n1, ...
    steps: int
    loop: tuple[Phase, ...]  # the body of the time loop (or the top level if not timed)
    after: tuple[Phase, ...]
    timed: bool = True
    # How buffer 0 reaches the schedules: "none" (%b0 itself), "cast" (%v0 = a cast of
    # %b0 to a dynamic shape, listed instead of %b0) or "both" (%b0 and %v0 listed:
    # operands that alias, which the compiler may refuse with a located error).
    alias: str = "none"
    # How host code reaches each buffer, when not as the schedules do: "base" (%b<k>),
    # "cast" or "subview" (%h<k>, a view of %b<k> made before the time loop). With
    # alias "cast", the schedules then list a cast %v<k> of every buffer.
    host_views: tuple[str, ...] = ()
    time_loop: str = "scf.for"  # or a host parallel loop: a key of TIME_LOOPS

    # --- what it means ----------------------------------------------------------------

    def inputs(self, seed: int) -> list[object]:
        rng = np.random.default_rng(seed)
        arrays: list[object] = [
            rng.integers(-50, 50, shape).astype(np.int32 if self.dtype == "i32" else np.float64)
            for shape in self.shapes
        ]
        return [*arrays, *self.scalars, self.steps]

    def reference(self, inputs: list[object]) -> list[np.ndarray]:
        bufs = [np.array(a).copy() for a in inputs[: len(self.shapes)]]
        for t in range(self.steps if self.timed else 1):
            for phase in self.loop:
                self._run_phase(phase, bufs, t)
        for phase in self.after:
            self._run_phase(phase, bufs, 0)
        return [*bufs, *(np.array(x) for x in inputs[len(self.shapes) :])]

    def _run_phase(self, phase: Phase, bufs: list[np.ndarray], t: int) -> None:
        stmts = (
            [phase.stmt] if isinstance(phase, Host) else [s for k in phase.tasks for s in k.stmts]
        )
        for stmt in stmts:
            self._run_stmt(stmt, bufs, t)

    def _run_stmt(self, stmt: Stmt, bufs: list[np.ndarray], t: int) -> None:
        seed = stmt.seed + (t if stmt.timed else 0)
        step = t if stmt.timed else 0  # the %t a statement's code sees (0 when untimed)
        out = bufs[stmt.write.pick(step, self.scalars)]
        ins = [bufs[a.pick(step, self.scalars)] for a in stmt.reads]
        for point in stmt.points(t):
            values = [b[a.at(point)] for a, b in zip(stmt.reads, ins)]
            if self.dtype == "i32":
                acc = seed
                if stmt.combine == "copy":
                    acc = int(values[0])
                elif stmt.combine == "mix":
                    for r in values:
                        acc = _wrap32(acc * 3 + int(r))
                out[stmt.write.at(point)] = acc
            else:
                facc = np.float64(seed)
                if stmt.combine == "copy":
                    facc = np.float64(values[0])
                elif stmt.combine == "mix":
                    for r in values:
                        facc = facc * np.float64(0.5) + np.float64(r)
                out[stmt.write.at(point)] = facc

    # --- how it is written ----------------------------------------------------------------

    def text(self) -> str:
        return _Writer(self).program()


def _wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


@dataclass
class _Writer:
    program_: Program
    lines: list[str] = field(default_factory=list)
    counter: int = 0

    @property
    def p(self) -> Program:
        return self.program_

    def fresh(self, stem: str = "x") -> str:
        self.counter += 1
        return f"%{stem}{self.counter}"

    def elem(self) -> str:
        return self.p.dtype

    def static_type(self, buf: int) -> str:
        dims = "x".join(str(n) for n in self.p.shapes[buf])
        return f"memref<{dims}x{self.elem()}>"

    def dynamic_type(self, buf: int) -> str:
        shape = self.p.shapes[buf]
        dims = "x".join(["?", *(str(n) for n in shape[1:])])
        return f"memref<{dims}x{self.elem()}>"

    def handle(self, buf: int, view: bool) -> tuple[str, str]:
        """The name and type that reach the schedules for `buf`."""
        if buf == 0 and self.p.alias == "cast" or buf == 0 and self.p.alias == "both" and view:
            return "%v0", self.dynamic_type(0)
        if self.p.host_views and self.p.alias == "cast":  # every buffer through its cast
            return f"%v{buf}", self.dynamic_type(buf)
        return f"%b{buf}", self.static_type(buf)

    def host_handle(self, buf: int) -> tuple[str, str]:
        """The name and type host code uses for `buf` (see Program.host_views)."""
        kind = self.p.host_views[buf] if self.p.host_views else None
        if kind == "cast":
            return f"%h{buf}", self.dynamic_type(buf)
        if kind == "subview":
            return f"%h{buf}", self.full_subview_type(buf)
        if kind == "base":
            return f"%b{buf}", self.static_type(buf)
        return self.handle(buf, False)

    def full_subview_type(self, buf: int) -> str:
        shape = self.p.shapes[buf]
        dims = "x".join(str(n) for n in shape)
        strides = ", ".join(str(int(np.prod(shape[d + 1 :]))) for d in range(len(shape)))
        return f"memref<{dims}x{self.elem()}, strided<[{strides}]>>"

    def host_view_lines(self) -> list[str]:
        out = []
        for buf, kind in enumerate(self.p.host_views):
            shape, static = self.p.shapes[buf], self.static_type(buf)
            if buf > 0 and self.p.alias == "cast":
                out.append(
                    f"  %v{buf} = memref.cast %b{buf} : {static} to {self.dynamic_type(buf)}"
                )
            if kind == "cast":
                out.append(
                    f"  %h{buf} = memref.cast %b{buf} : {static} to {self.dynamic_type(buf)}"
                )
            elif kind == "subview":
                zeros, ones = ", ".join("0" for _ in shape), ", ".join("1" for _ in shape)
                sizes = ", ".join(str(n) for n in shape)
                out.append(
                    f"  %h{buf} = memref.subview %b{buf}[{zeros}] [{sizes}] [{ones}] : "
                    f"{static} to {self.full_subview_type(buf)}"
                )
        return out

    def operands(self) -> list[str]:
        names = [self.handle(b, False)[0] for b in range(len(self.p.shapes))]
        if self.p.alias == "both":
            names.insert(1, "%v0")
        return names

    # -- program

    def program(self) -> str:
        p = self.p
        args = [f"%b{b}: {self.static_type(b)}" for b in range(len(p.shapes))]
        args += [f"%n{k}: index" for k in range(len(p.scalars))] + ["%steps: index"]
        out = [f"func.func @main({', '.join(args)}) {{"]
        out += ["  %c0 = arith.constant 0 : index", "  %c1 = arith.constant 1 : index"]
        if p.alias != "none":
            out.append(f"  %v0 = memref.cast %b0 : {self.static_type(0)} to {self.dynamic_type(0)}")
        out += self.host_view_lines()
        if p.timed:
            out.append("  " + TIME_LOOPS[p.time_loop])
            for phase in p.loop:
                out += self.phase(phase, "    ")
            out.append("  }")
        else:
            for phase in p.loop:
                out += self.phase(phase, "  ")
        for phase in p.after:
            out += self.phase(phase, "  ")
        out += ["  func.return", "}"]
        return "\n".join(out) + "\n"

    def phase(self, phase: Phase, pad: str) -> list[str]:
        if isinstance(phase, Host):
            return [pad + line for line in self.stmt(phase.stmt, self.host_handle)]
        out = [f"{pad}dhir.schedule {', '.join(self.operands())} {{"]
        cpu = self.fresh("cpu")
        out.append(f'{pad}  {cpu} = dhir.target {{kind = "cpu"}}')
        for task in phase.tasks:
            out += [pad + "  " + line for line in self.task(task, cpu)]
        out.append(f"{pad}}}")
        return out

    def task(self, task: Task, cpu: str) -> list[str]:
        touched = sorted(set().union(*(s.buffers() for s in task.stmts)))
        names = [self.handle(b, task.through_view)[0] for b in touched]
        attrs = f" attributes {{dhir.rank = {task.rank} : i64}}" if task.rank is not None else ""
        out = [f"{self.fresh('task')} = dhir.task {', '.join([cpu, *names])}{attrs} {{"]
        for stmt in task.stmts:
            out += [
                "  " + line for line in self.stmt(stmt, lambda b: self.handle(b, task.through_view))
            ]
        out.append("}")
        return out

    # -- statements

    def stmt(self, stmt: Stmt, handle_of: Handles) -> list[str]:
        out: list[str] = []
        seed = self.seed(stmt, out)
        if stmt.style in BOX_STYLES:
            return out + self.box_stmt(stmt, handle_of, seed)
        names = {b: self.local(b, handle_of, out, static=False) for b in stmt.buffers()}
        affine = stmt.style in ("affine", "affine-map")
        if stmt.style == NARROW_LOOPS:
            ivs, body, close = self.narrow_loops(stmt.loops, out)
        else:
            ivs, body, close = self.loops(stmt.loops, affine, out)
        values = []
        for a in stmt.reads:
            name, type_ = self.memref_of(a, names, handle_of, stmt, out)
            v = self.fresh("r")
            if stmt.style == "affine":
                body.append(f"{v} = affine.load {name}[{self.affine_subscripts(a, ivs)}] : {type_}")
            else:
                subs = self.index_subscripts(a, ivs, body, stmt.style == "affine-map")
                subs = self.cast_subscripts(a, subs, stmt, body)
                body.append(f"{v} = memref.load {name}[{subs}] : {type_}")
            values.append(v)
        result = self.combine(stmt, seed, values, body)
        name, type_ = self.memref_of(stmt.write, names, handle_of, stmt, out)
        if stmt.style == "affine":
            subs = self.affine_subscripts(stmt.write, ivs)
            body.append(f"affine.store {result}, {name}[{subs}] : {type_}")
        else:
            subs = self.index_subscripts(stmt.write, ivs, body, stmt.style == "affine-map")
            subs = self.cast_subscripts(stmt.write, subs, stmt, body)
            body.append(f"memref.store {result}, {name}[{subs}] : {type_}")
        return out + self.nest(body, close)

    def seed(self, stmt: Stmt, out: list[str]) -> str:
        seed = self.fresh("seed")
        if not stmt.timed:
            value = f"{stmt.seed}.0" if self.elem() == "f64" else str(stmt.seed)
            out.append(f"{seed} = arith.constant {value} : {self.elem()}")
            return seed
        k = self.fresh("k")
        s = self.fresh("s")
        out.append(f"{k} = arith.constant {stmt.seed} : index")
        out.append(f"{s} = arith.addi %t, {k} : index")
        if self.elem() == "i32":
            out.append(f"{seed} = arith.index_cast {s} : index to i32")
        else:
            wide = self.fresh("w")
            out.append(f"{wide} = arith.index_cast {s} : index to i64")
            out.append(f"{seed} = arith.sitofp {wide} : i64 to f64")
        return seed

    def local(self, buf: int, handle_of: Handles, out: list[str], static: bool) -> tuple[str, str]:
        name, type_ = handle_of(buf)
        if static and type_ != self.static_type(buf):
            cast = self.fresh("st")
            out.append(f"{cast} = memref.cast {name} : {type_} to {self.static_type(buf)}")
            return cast, self.static_type(buf)
        return name, type_

    def loops(
        self, loops: tuple[Loop, ...], affine: bool, out: list[str]
    ) -> tuple[list[str], list[str], int]:
        ivs = []
        for loop in loops:
            iv = self.fresh("i")
            hi = f"%n{loop.bound}" if loop.bound is not None else None
            if loop.back is not None:
                assert not affine  # %t is no affine symbol
                hi = self.fresh("hi")
                out.append(f"{hi} = arith.addi %t, {self.const(loop.hi - loop.back, out)} : index")
            if affine:
                step = f" step {loop.step}" if loop.step != 1 else ""
                out.append(f"affine.for {iv} = {loop.lo} to {hi or loop.hi}{step} {{")
            else:
                lo, st_ = self.const(loop.lo, out), self.const(loop.step, out)
                hi = hi or self.const(loop.hi, out)
                out.append(f"scf.for {iv} = {lo} to {hi} step {st_} {{")
            ivs.append(iv)
        return ivs, [], len(loops)

    def nest(self, body: list[str], close: int) -> list[str]:
        # `loops` left the opening lines in `out`; indent the body and close the nest.
        return ["  " * close + line for line in body] + [
            "  " * (close - 1 - k) + "}" for k in range(close)
        ]

    def const(self, value: int, out: list[str]) -> str:
        name = self.fresh("c")
        out.append(f"{name} = arith.constant {value} : index")
        return name

    def affine_subscripts(self, a: Access, ivs: list[str]) -> str:
        return ", ".join(_affine_expr(row, k, ivs) for row, k in zip(a.coeffs, a.consts))

    def index_subscripts(self, a: Access, ivs: list[str], body: list[str], use_map: bool) -> str:
        subs = []
        for row, k in zip(a.coeffs, a.consts):
            name = self.fresh("ix")
            if use_map:
                dims = ", ".join(f"d{v}" for v in range(len(ivs)))
                expr = _affine_expr(row, k, [f"d{v}" for v in range(len(ivs))])
                body.append(
                    f"{name} = affine.apply affine_map<({dims}) -> ({expr})>({', '.join(ivs)})"
                )
            else:
                acc = self.const(k, body)
                for c, iv in zip(row, ivs):
                    if c == 0:
                        continue
                    term = iv
                    if c != 1:
                        factor = self.const(c, body)
                        term = self.fresh("m")
                        body.append(f"{term} = arith.muli {iv}, {factor} : index")
                    summed = self.fresh("a")
                    body.append(f"{summed} = arith.addi {acc}, {term} : index")
                    acc = summed
                body.append(f"{name} = arith.addi {acc}, %c0 : index")
            subs.append(name)
        return ", ".join(subs)

    def combine(self, stmt: Stmt, seed: str, values: list[str], body: list[str]) -> str:
        if stmt.combine == "copy":
            return values[0]
        acc = seed
        if stmt.combine == "fill":
            return acc
        mul, add, factor = (
            ("arith.muli", "arith.addi", "3 : i32")
            if self.elem() == "i32"
            else ("arith.mulf", "arith.addf", "0.5 : f64")
        )
        k = self.fresh("f")
        body.append(f"{k} = arith.constant {factor}")
        for v in values:
            m, a = self.fresh("mul"), self.fresh("acc")
            body.append(f"{m} = {mul} {acc}, {k} : {self.elem()}")
            body.append(f"{a} = {add} {m}, {v} : {self.elem()}")
            acc = a
        return acc

    # -- subviews and linalg

    def view(
        self,
        a: Access,
        sizes: tuple[int, ...],
        handle_of: Handles,
        out: list[str],
        transposed: bool = False,
    ) -> tuple[str, str]:
        """A subview of the box `a` (its dimensions reversed by memref.transpose when
        `transposed`)."""
        name, type_ = self.local(a.buf, handle_of, out, static=True)
        shape = self.p.shapes[a.buf]
        strides = [a.coeffs[d][d] for d in range(len(shape))]
        base = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]
        offset = sum(k * b for k, b in zip(a.consts, base))
        layout = ", ".join(str(s * b) for s, b in zip(strides, base))
        dims = "x".join(str(n) for n in sizes)
        vtype = f"memref<{dims}x{self.elem()}, strided<[{layout}], offset: {offset}>>"
        v = self.fresh("view")
        out.append(
            f"{v} = memref.subview {name}[{', '.join(map(str, a.consts))}] "
            f"[{', '.join(map(str, sizes))}] [{', '.join(map(str, strides))}] : {type_} to {vtype}"
        )
        if not transposed:
            return v, vtype
        rank = len(sizes)
        dims = [f"d{d}" for d in range(rank)]
        layout = ", ".join(str(s * b) for s, b in reversed(list(zip(strides, base))))
        dims_t = "x".join(str(n) for n in reversed(sizes))
        ttype = f"memref<{dims_t}x{self.elem()}, strided<[{layout}], offset: {offset}>>"
        t = self.fresh("t")
        out.append(
            f"{t} = memref.transpose {v} ({', '.join(dims)}) -> ({', '.join(reversed(dims))}) "
            f": {vtype} to {ttype}"
        )
        return t, ttype

    def box_stmt(self, stmt: Stmt, handle_of: Handles, seed: str) -> list[str]:
        out: list[str] = []
        sizes = tuple(len(loop.points()) for loop in stmt.loops)
        turned = stmt.style == "transposed"
        views = {
            a: self.view(a, sizes, handle_of, out, turned)
            for a in dict.fromkeys((*stmt.reads, stmt.write))
        }
        wname, wtype = views[stmt.write]
        if stmt.style in ("subview", "transposed"):
            ivs, body, close = self.loops(stmt.loops, False, out)
            ivs = ivs[::-1] if turned else ivs
            values = []
            for a in stmt.reads:
                name, type_ = views[a]
                v = self.fresh("r")
                body.append(f"{v} = memref.load {name}[{', '.join(ivs)}] : {type_}")
                values.append(v)
            result = self.combine(stmt, seed, values, body)
            body.append(f"memref.store {result}, {wname}[{', '.join(ivs)}] : {wtype}")
            return out + self.nest(body, close)
        if stmt.combine == "fill":
            out.append(f"linalg.fill ins({seed} : {self.elem()}) outs({wname} : {wtype})")
            return out
        if stmt.combine == "copy":
            rname, rtype = views[stmt.reads[0]]
            out.append(f"linalg.copy ins({rname} : {rtype}) outs({wname} : {wtype})")
            return out
        ins = [a for a in dict.fromkeys(stmt.reads) if a != stmt.write]
        rank = len(sizes)
        dims = ", ".join(f"d{v}" for v in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        maps = ", ".join([ident] * (len(ins) + 1))
        iters = ", ".join(['"parallel"'] * rank)
        head = f"linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}"
        if ins:
            head += f" ins({', '.join(views[a][0] for a in ins)} : {', '.join(views[a][1] for a in ins)})"
        out.append(f"{head} outs({wname} : {wtype}) {{")
        args = {a: self.fresh("in") for a in ins}
        out_arg = self.fresh("out")
        block = ", ".join(
            [*(f"{args[a]}: {self.elem()}" for a in ins), f"{out_arg}: {self.elem()}"]
        )
        out.append(f"^bb0({block}):")
        body: list[str] = []
        values = [out_arg if a == stmt.write else args[a] for a in stmt.reads]
        result = self.combine(stmt, seed, values, body)
        out += ["  " + line for line in body]
        out += [f"  linalg.yield {result} : {self.elem()}", "}"]
        return out

    # -- integer casts and memrefs chosen by arith.select (issue 23)

    def memref_of(
        self,
        a: Access,
        names: dict[int, tuple[str, str]],
        handle_of: Handles,
        stmt: Stmt,
        out: list[str],
    ) -> tuple[str, str]:
        """The memref `a` accesses: its buffer, or (Chosen) an arith.select of two."""
        if not isinstance(a, Chosen):
            return names[a.buf]
        first, type_ = self.local(a.buf, handle_of, out, static=True)
        second, _ = self.local(a.other, handle_of, out, static=True)
        cond = self.fresh("cond")
        if a.scalar is None:
            t = "%t" if stmt.timed else self.const(0, out)
            two, parity = self.const(2, out), self.fresh("par")
            out.append(f"{parity} = arith.remui {t}, {two} : index")
            value = self.const(a.value, out)
            out.append(f"{cond} = arith.cmpi eq, {parity}, {value} : index")
        else:
            value = self.const(a.value, out)
            out.append(f"{cond} = arith.cmpi slt, %n{a.scalar}, {value} : index")
        chosen = self.fresh("sel")
        out.append(f"{chosen} = arith.select {cond}, {first}, {second} : {type_}")
        return chosen, type_

    def narrow_loops(
        self, loops: tuple[Loop, ...], out: list[str]
    ) -> tuple[list[str], list[str], int]:
        """scf loops over iN (N: the fewest bits, at least 3, that hold hi + step, so
        that the variable never wraps) from lo - 2^(N-1) to hi - 2^(N-1); each variable,
        plus 2^(N-1) in iN (wrapping), read unsigned is the loop's index again."""
        ivs = []
        for loop in loops:
            bits = max(3, narrow_bits(loop.hi + loop.step))
            half, ty = 1 << (bits - 1), f"i{bits}"
            lo, hi, step = (self.fresh("nb") for _ in range(3))
            out.append(f"{lo} = arith.constant {loop.lo - half} : {ty}")
            out.append(f"{hi} = arith.constant {loop.hi - half} : {ty}")
            out.append(f"{step} = arith.constant {loop.step} : {ty}")
            k, shift, wrapped, iv = (self.fresh(x) for x in ("k", "h", "w", "i"))
            out.append(f"scf.for {k} = {lo} to {hi} step {step} : {ty} {{")
            out.append(f"{shift} = arith.constant {-half} : {ty}")
            out.append(f"{wrapped} = arith.addi {k}, {shift} : {ty}")
            out.append(f"{iv} = arith.index_castui {wrapped} : {ty} to index")
            ivs.append(iv)
        return ivs, [], len(loops)

    def cast_subscripts(self, a: Access, subs: str, stmt: Stmt, body: list[str]) -> str:
        """Each subscript through a chain of narrow integer casts that gives it back
        (style CAST_SUBSCRIPTS; the chain varies with the dimension and the seed)."""
        if stmt.style != CAST_SUBSCRIPTS:
            return subs
        out = []
        for d, name in enumerate(subs.split(", ")):
            chain = CAST_CHAINS[(d + stmt.seed) % len(CAST_CHAINS)]
            out.append(self.cast_chain(name, self.p.shapes[a.buf][d], chain, body))
        return ", ".join(out)

    def cast_chain(self, e: str, extent: int, chain: str, body: list[str]) -> str:
        """`e` (0 <= e < extent) through `chain`, a value equal to it."""
        bits = narrow_bits(2 * extent if chain == "extsi" else extent)
        ty = f"i{bits}"
        n, r = self.fresh("nw"), self.fresh("cx")
        if chain == "castui":  # e - 2^N truncated to iN, read unsigned
            shifted = self.fresh("sh")
            body.append(f"{shifted} = arith.subi {e}, {self.const(1 << bits, body)} : index")
            body.append(f"{n} = arith.index_cast {shifted} : index to {ty}")
            body.append(f"{r} = arith.index_castui {n} : {ty} to index")
        elif chain == "extsi":  # e in iN (N - 1 bits hold it), sign-extended to i32
            wide = self.fresh("ws")
            body.append(f"{n} = arith.index_cast {e} : index to {ty}")
            body.append(f"{wide} = arith.extsi {n} : {ty} to i32")
            body.append(f"{r} = arith.index_cast {wide} : i32 to index")
        elif chain == "extui":  # e + 2^N truncated to iN, zero-extended to i16
            shifted, wide = self.fresh("sh"), self.fresh("wu")
            body.append(f"{shifted} = arith.addi {e}, {self.const(1 << bits, body)} : index")
            body.append(f"{n} = arith.index_cast {shifted} : index to {ty}")
            body.append(f"{wide} = arith.extui {n} : {ty} to i16")
            body.append(f"{r} = arith.index_castui {wide} : i16 to index")
        else:  # trunci: e + 3 * 2^N in i32, truncated to iN, read unsigned
            shifted, wide = self.fresh("sh"), self.fresh("wt")
            body.append(f"{shifted} = arith.addi {e}, {self.const(3 << bits, body)} : index")
            body.append(f"{wide} = arith.index_cast {shifted} : index to i32")
            body.append(f"{n} = arith.trunci {wide} : i32 to {ty}")
            body.append(f"{r} = arith.index_castui {n} : {ty} to index")
        return r


def _identity(rank: int, buf: int) -> Access:
    return Access(
        buf, tuple(tuple(int(v == d) for v in range(rank)) for d in range(rank)), (0,) * rank
    )


def _affine_expr(row: tuple[int, ...], k: int, names: list[str]) -> str:
    terms = [n if c == 1 else f"{n} * {c}" for c, n in zip(row, names) if c != 0]
    if not terms:
        return str(k)
    expr = " + ".join(terms)
    if k > 0:
        expr += f" + {k}"
    elif k < 0:
        expr += f" - {-k}"
    return expr


# --- strategies ------------------------------------------------------------------------


@st.composite
def loops_over(
    draw: st.DrawFn, shape: tuple[int, ...], scalars: tuple[int, ...], steps: int | None = None
) -> tuple[Loop, ...]:
    """A box of `shape` (a row block, one row or column, a strided range...), hi bounded
    by an index argument where one has a fitting value, or (given the time loop's
    `steps`) by the time step plus a constant."""
    out = []
    for extent in shape:
        lo = draw(st.integers(0, extent - 1))
        hi = draw(st.integers(lo + 1, extent))
        step = draw(st.sampled_from((1, 1, 1, 2, 3)))
        fits = [k for k, n in enumerate(scalars) if lo < n <= extent]
        bound = draw(st.none() | st.sampled_from(fits)) if fits else None
        if bound is not None:
            hi = scalars[bound]
        back = (
            steps - 1
            if steps is not None and bound is None and draw(st.integers(0, 3)) == 0
            else None
        )
        out.append(Loop(lo, hi, step, bound, back))
    return tuple(out)


@st.composite
def access(draw: st.DrawFn, buf: int, shape: tuple[int, ...], loops: tuple[Loop, ...]) -> Access:
    """An in-bounds affine access: each subscript one or two loop variables (coefficient
    1 or 2) plus a constant (halos: -1, +1, ...), or a constant (one row or column)."""
    rows, consts = [], []
    nvars = len(loops)
    for extent in shape:
        row = [0] * nvars
        if nvars and draw(st.integers(0, 4)) > 0:
            v = draw(st.integers(0, nvars - 1))
            row[v] = draw(st.sampled_from((1, 1, 1, 2)))
            if nvars > 1 and draw(st.integers(0, 5)) == 0:
                row[1 - v] += 1
        low = sum(c * loop.lo for c, loop in zip(row, loops))
        high = sum(c * loop.last() for c, loop in zip(row, loops))
        if high - low > extent - 1:
            row = [0] * nvars
            low = high = 0
        k = draw(st.integers(-low, extent - 1 - high))
        rows.append(tuple(row))
        consts.append(k)
    return Access(buf, tuple(rows), tuple(consts))


def _written(loops: tuple[Loop, ...], buf: int, consts: tuple[int, ...]) -> Access:
    return Access(buf, _identity(len(loops), buf).coeffs, consts)


@st.composite
def loop_stmt(
    draw: st.DrawFn,
    shapes: tuple[tuple[int, ...], ...],
    scalars: tuple[int, ...],
    timed: bool,
    steps: int | None = None,
) -> Stmt:
    """A loop nest over part of a memref, written in scf, affine or affine-map style;
    scf loops may be bounded by the time step (`steps` given)."""
    style = draw(st.sampled_from(("scf", "affine", "affine-map")))
    w = draw(st.integers(0, len(shapes) - 1))
    loops = draw(loops_over(shapes[w], scalars, steps if style == "scf" and timed else None))
    write = _written(loops, w, (0,) * len(loops))
    combine = draw(st.sampled_from(("mix", "mix", "mix", "copy", "fill")))
    count = 0 if combine == "fill" else draw(st.integers(1 if combine == "copy" else 0, 3))
    reads = tuple(
        draw(st.integers(0, len(shapes) - 1).flatmap(lambda b: access(b, shapes[b], loops)))
        for _ in range(count)
    )
    if combine == "mix" and draw(st.booleans()):
        reads = (*reads, write)  # read-modify-write: a partial update of what is there
    return Stmt(
        loops, reads, write, style, combine, draw(st.integers(1, 9)), timed and draw(st.booleans())
    )


@st.composite
def box_stmt(draw: st.DrawFn, shapes: tuple[tuple[int, ...], ...], timed: bool) -> Stmt | None:
    """Loads and stores through memref.subviews taken in the task, or a linalg op on
    them: every access a strided box of the same sizes, of memrefs of one rank."""
    rank = draw(st.sampled_from(sorted({len(s) for s in shapes})))
    same = [b for b, s in enumerate(shapes) if len(s) == rank]
    w = draw(st.sampled_from(same))
    style = draw(st.sampled_from(BOX_STYLES))
    combine = draw(st.sampled_from(("mix", "mix", "copy", "fill")))
    sizes = [
        draw(st.integers(1, max(1, min(s[d] for s in (shapes[b] for b in same)) // 2 + 1)))
        for d in range(rank)
    ]

    def box(buf: int) -> Access:
        strides, offsets = [], []
        for d, n in enumerate(sizes):
            extent = shapes[buf][d]
            stride = draw(st.sampled_from((1, 1, 2, 3)))
            if (n - 1) * stride > extent - 1:
                stride = 1
            if n > extent:
                raise _Unfit
            strides.append(stride)
            offsets.append(draw(st.integers(0, extent - 1 - (n - 1) * stride)))
        coeffs = tuple(tuple(strides[d] if v == d else 0 for v in range(rank)) for d in range(rank))
        return Access(buf, coeffs, tuple(offsets))

    try:
        write = box(w)
        reads: tuple[Access, ...] = ()
        if combine != "fill":
            # linalg reads of the written memref only through the written box itself: a
            # parallel op whose input overlaps its output differently has no fixed order.
            others = [b for b in same if b != w] if style == "linalg" else same
            count = draw(st.integers(1 if combine == "copy" else 0, 2))
            reads = tuple(box(draw(st.sampled_from(others))) for _ in range(count if others else 0))
            if combine == "copy" and not reads:
                combine = "fill"
            if combine == "mix" and draw(st.booleans()):
                reads = (*reads, write)
    except _Unfit:
        return None
    loops = tuple(Loop(0, n) for n in sizes)
    return Stmt(
        loops, reads, write, style, combine, draw(st.integers(1, 9)), timed and draw(st.booleans())
    )


class _Unfit(Exception):
    pass


@st.composite
def stmt(
    draw: st.DrawFn,
    shapes: tuple[tuple[int, ...], ...],
    scalars: tuple[int, ...],
    timed: bool,
    steps: int,
) -> Stmt:
    if draw(st.integers(0, 3)) == 0:
        found = draw(box_stmt(shapes, timed))
        if found is not None:
            return found
    return draw(integer_shapes(draw(loop_stmt(shapes, scalars, timed, steps)), shapes, scalars))


@st.composite
def programs(
    draw: st.DrawFn,
    ranks: int,
    alias: str | None = None,
    host_views: bool = False,
    time_loops: tuple[str, ...] = (),
    partitionable: bool = False,
) -> Program:
    """`host_views`: one schedule in a time loop, with host code before or after it in
    the loop that reaches the buffers under other names (Program.host_views).
    `partitionable`: one schedule (in a time loop or not), no host code, no views: what
    partitioned storage (dhir/analysis/partition.py) can split.
    `time_loops`: the ways to write the time loop to draw from (TIME_LOOPS' keys; the
    program then always has one); by default an scf.for, when drawn."""
    dtype = draw(st.sampled_from(("i32", "i32", "f64")))
    rows = draw(st.integers(2, 9))
    cols = draw(st.integers(1, 5))
    buffers = draw(st.integers(1, 4))
    shapes = tuple(
        (rows, cols) if draw(st.integers(0, 3)) > 0 else (draw(st.integers(rows, 2 * rows + cols)),)
        for _ in range(buffers)
    )
    scalars = tuple(draw(st.lists(st.integers(1, 2 * rows + cols), min_size=1, max_size=2)))
    timed = host_views or draw(st.integers(0, 4)) > 0
    steps = draw(st.integers(1, 3))
    time_loop = draw(st.sampled_from(time_loops)) if time_loops else "scf.for"
    timed = timed or bool(time_loops)

    def task() -> st.SearchStrategy[Task]:
        return st.builds(
            Task,
            st.lists(stmt(shapes, scalars, timed, steps), min_size=1, max_size=2).map(tuple),
            st.none() | st.integers(0, ranks - 1),
            st.booleans(),
        )

    def schedule() -> Schedule:
        return Schedule(tuple(draw(st.lists(task(), min_size=1, max_size=5))))

    def host(in_loop: bool, reads: bool = False) -> Host:
        made = loop_stmt(shapes, scalars, timed and in_loop, steps)
        s = draw(made.filter(lambda s: bool(s.reads)) if reads else made)
        return Host(Stmt(s.loops, s.reads, s.write, "scf", s.combine, s.seed, s.timed))

    loop: list[Phase] = [schedule()]
    for _ in range(0 if host_views or partitionable else draw(st.integers(0, 2))):
        if draw(st.booleans()):
            loop.append(host(True))
        loop.append(schedule())
    if host_views:
        where = draw(st.sampled_from(("before", "after", "both")))
        loop = [*([host(True, reads=True)] if where != "after" else []), *loop]
        loop += [host(True, reads=True)] if where != "before" else []
    after: list[Phase] = []
    if not partitionable and draw(st.booleans()):
        after.append(host(False))
    if not partitionable and draw(st.integers(0, 3)) == 0:
        after.append(Schedule((draw(task().map(lambda k: k)),)))
    kinds = ("none", "cast", "cast") if host_views else ("none", "none", "cast")
    kinds = ("none",) if partitionable else kinds
    chosen = alias if alias is not None else draw(st.sampled_from(kinds))
    views: tuple[str, ...] = ()
    if host_views:
        # "base" only where the schedules list a view: else the host uses what they list
        kinds = ("cast", "subview", "base") if chosen == "cast" else ("cast", "subview")
        views = tuple(draw(st.sampled_from(kinds)) for _ in shapes)
    return Program(
        dtype,
        shapes,
        scalars,
        steps,
        tuple(loop),
        _untimed(after),
        timed,
        chosen,
        views,
        time_loop,
    )


def _untimed(phases: list[Phase]) -> tuple[Phase, ...]:
    """Code after the time loop has no time step for its seeds and loop bounds."""

    def fix(s: Stmt) -> Stmt:
        loops = tuple(Loop(x.lo, x.hi, x.step, x.bound) for x in s.loops)
        return Stmt(loops, s.reads, s.write, s.style, s.combine, s.seed, False)

    out: list[Phase] = []
    for phase in phases:
        if isinstance(phase, Host):
            out.append(Host(fix(phase.stmt)))
        else:
            out.append(
                Schedule(
                    tuple(
                        Task(tuple(map(fix, k.stmts)), k.rank, k.through_view) for k in phase.tasks
                    )
                )
            )
    return tuple(out)


# --- integer casts and memrefs chosen by arith.select (issue 23) ----------------------

CAST_SUBSCRIPTS = "scf-casts"  # scf style, every subscript through narrow integer casts
NARROW_LOOPS = "scf-narrow"  # scf style, loops over narrow integers read unsigned
CAST_CHAINS = ("castui", "extsi", "extui", "trunci")


def narrow_bits(values: int) -> int:
    """The fewest bits (at least 1) whose unsigned values count `values` or more."""
    return max(1, (values - 1).bit_length())


@dataclass(frozen=True)
class Chosen(Access):
    """An access through `arith.select %cond, %b<buf>, %b<other>` (one shape): `buf`
    when the condition holds, else `other`. The condition: the time step's parity is
    `value` (`scalar` None; %t is 0 in untimed code), or %n<scalar> < `value`."""

    other: int = 0
    scalar: int | None = None
    value: int = 0

    def choices(self) -> tuple[int, ...]:
        return (self.buf, self.other)

    def pick(self, t: int, scalars: tuple[int, ...]) -> int:
        holds = t % 2 == self.value if self.scalar is None else scalars[self.scalar] < self.value
        return self.buf if holds else self.other


@st.composite
def integer_shapes(
    draw: st.DrawFn, s: Stmt, shapes: tuple[tuple[int, ...], ...], scalars: tuple[int, ...]
) -> Stmt:
    """`s` (a loop statement) with issue 23's shapes: an scf one may take its subscripts
    through casts of narrow and unsigned integers, or loop over narrow integers (constant
    bounds only); any access may reach a memref chosen by arith.select."""
    style = s.style
    if style == "scf":
        fixed = all(loop.bound is None and loop.back is None for loop in s.loops)
        style = draw(st.sampled_from(("scf", CAST_SUBSCRIPTS, *((NARROW_LOOPS,) if fixed else ()))))

    def chosen(a: Access) -> Access:
        others = [b for b, shape in enumerate(shapes) if shape == shapes[a.buf] and b != a.buf]
        if not others or draw(st.integers(0, 2)) > 0:
            return a
        other = draw(st.sampled_from(others))
        if draw(st.booleans()):
            return Chosen(a.buf, a.coeffs, a.consts, other, None, draw(st.integers(0, 1)))
        scalar = draw(st.integers(0, len(scalars) - 1))
        value = draw(st.integers(scalars[scalar] - 1, scalars[scalar] + 1))
        return Chosen(a.buf, a.coeffs, a.consts, other, scalar, value)

    write = chosen(s.write)
    reads = tuple(write if a is s.write else chosen(a) for a in s.reads)
    return replace(s, reads=reads, write=write, style=style)
