"""Random dhir programs that mix the kinds of task a distributed run must keep in order,
for tests/unit/test_random_mixed.py.

Every buffer is a `memref<Nxi32>`. A task is one of: a loop (scf.for, or an scf.parallel
that dhir-split may cut, `{kind = "any"}` with `dhir.split = K`) over a strided range of
elements reading shifted elements of other buffers; a loop over strided `memref.subview`s;
a `memref.copy` between views of two buffers; a `linalg.add` or `linalg.fill` on views; a
call of a function that updates its (view) argument in place, or copies one view into
another. Schedules sit at the top level or in a time loop: an scf.for (bounds from
constants or the entry's %n, steps other than 1, zero trips) or an scf.while counting
the same way, with host stores between schedules. Each task's seed adds the time step,
so that steps differ. Tasks may carry a `dhir.rank`. The interpreter is the oracle.

`programs(newer=True)` (tests/unit/test_random_dist.py) also writes reductions (an
scf.parallel's or an scf.for's iter_arg, with `dhir.split = K` and `dhir.reassociate`),
schedules whose operands are contiguous views of the buffers at a run-time offset (made
once, or in the time loop from its step), buffers 0 and 1 ping-ponged through the time
loop's iter_args, and @update and @twice as the user's C code (LINKED_C, `--link`).
"""

import re
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

FUNCTIONS = """
func.func private @update(%m: memref<?xi32, strided<[?], offset: ?>>, %seed: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : i32
  %n = memref.dim %m, %c0 : memref<?xi32, strided<[?], offset: ?>>
  scf.for %j = %c0 to %n step %c1 {
    %v = memref.load %m[%j] : memref<?xi32, strided<[?], offset: ?>>
    %ji = arith.index_cast %j : index to i32
    %a = arith.muli %v, %c3 : i32
    %b = arith.addi %a, %seed : i32
    %c = arith.addi %b, %ji : i32
    memref.store %c, %m[%j] : memref<?xi32, strided<[?], offset: ?>>
  }
  return
}
func.func private @twice(%src: memref<?xi32, strided<[?], offset: ?>>, %dst: memref<?xi32, strided<[?], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : i32
  %n = memref.dim %src, %c0 : memref<?xi32, strided<[?], offset: ?>>
  scf.for %j = %c0 to %n step %c1 {
    %v = memref.load %src[%j] : memref<?xi32, strided<[?], offset: ?>>
    %a = arith.muli %v, %c2 : i32
    %b = arith.addi %a, %c2 : i32
    memref.store %b, %dst[%j] : memref<?xi32, strided<[?], offset: ?>>
  }
  return
}
"""
DYN = "memref<?xi32, strided<[?], offset: ?>>"
# FUNCTIONS as the user's own code (`Program.linked`): declared, and defined in C (LINKED_C)
DECLARED = f"""
func.func private @update({DYN}, i32)
func.func private @twice({DYN}, {DYN})
"""
LINKED_C = """#include <stdint.h>
/* FUNCTIONS' @update and @twice, a memref passed as its descriptor's fields; i32 sums
   wrap, as arith's do. */
void update(int32_t *allocated, int32_t *aligned, int64_t offset, int64_t size,
            int64_t stride, int32_t seed) {
  for (int64_t j = 0; j < size; ++j) {
    int32_t *at = aligned + offset + j * stride;
    *at = (int32_t)((uint32_t)*at * 3u + (uint32_t)seed + (uint32_t)j);
  }
}
void twice(int32_t *sa, int32_t *src, int64_t so, int64_t ssize, int64_t sstride,
           int32_t *da, int32_t *dst, int64_t doff, int64_t dsize, int64_t dstride) {
  for (int64_t j = 0; j < ssize; ++j)
    dst[doff + j * dstride] = (int32_t)((uint32_t)src[so + j * sstride] * 2u + 2u);
}
"""
PAD = 3  # the elements a viewed program's buffers have beyond its views


@dataclass(frozen=True)
class View:
    buf: int
    offset: int
    size: int
    stride: int
    room: int = 0  # > 0: the offset is offset + (the time step, or %n) mod room

    def type(self) -> str:
        offset = "?" if self.room else self.offset
        return f"memref<{self.size}xi32, strided<[{self.stride}], offset: {offset}>>"


@dataclass(frozen=True)
class Loop:
    """w[i] = mix(seed, r[i + d] for (r, d) in reads) for i in [lo, hi) step step;
    `parallel`: an scf.parallel (reads of w only at d = 0), `split` its dhir.split."""

    write: int
    reads: tuple[tuple[int, int], ...]
    lo: int
    hi: int
    step: int
    parallel: bool = False
    split: int | None = None


@dataclass(frozen=True)
class ViewLoop:
    write: View
    reads: tuple[View, ...]


@dataclass(frozen=True)
class Copy:
    src: View
    dst: View


@dataclass(frozen=True)
class Linalg:
    out: View
    ins: tuple[View, ...]  # two: linalg.add; none: linalg.fill with the seed


@dataclass(frozen=True)
class Call:
    views: tuple[View, ...]  # one: @update in place; two: @twice from the first into the second
    whole: bool = False  # @update of the whole buffer (a cast of it)


@dataclass(frozen=True)
class Reduce:
    """w[at] = seed <op> r[i + d] over i in [lo, hi) step `step`, an scf.parallel's
    reduction or an scf.for's iter_arg; `split`: its dhir.split, with dhir.reassociate."""

    write: int
    at: int
    read: int
    d: int
    lo: int
    hi: int
    step: int
    op: str  # addi, xori, maxsi, muli
    parallel: bool
    split: int | None


Body = Loop | ViewLoop | Copy | Linalg | Call | Reduce


@dataclass(frozen=True)
class Task:
    body: Body
    rank: int | None
    any_kind: bool


@dataclass(frozen=True)
class Host:
    """Host code: buf[at] = the time step, or (`src` given) buf[at] * 3 + src[src_at]."""

    buf: int
    at: int
    src: int | None = None
    src_at: int = 0


@dataclass(frozen=True)
class Guarded:
    """A schedule under `scf.if buf[at] > 0`, read on the host."""

    buf: int
    at: int
    tasks: tuple[Task, ...]


Phase = tuple[Task, ...] | Host | Guarded


@dataclass(frozen=True)
class Program:
    size: int
    buffers: int
    scalar: int  # %n, an index argument
    time: str  # none | for | while
    lo: int
    hi: int | None  # None: %n
    step: int
    phases: tuple[Phase, ...]
    after: tuple[Task, ...]
    # the while loop also stops once buffer `watch`[0] is divisible by 4 (data of the tasks)
    watch: int | None = None
    dynamic: bool = False  # the buffers are memref<?xi32>
    # Schedules and host code use contiguous views of the buffers (`strided<[1], offset:
    # ?>`), `size` elements from %n mod (PAD + 1); the buffers have PAD elements more.
    viewed: bool = False
    # The time loop (an scf.for) carries buffers 0 and 1 as iter_args, swapped each step.
    pingpong: bool = False
    # With `viewed`: the time loop's body makes its own views, from %t mod (PAD + 1)
    moving: bool = False
    linked: bool = False  # @update and @twice are the user's C code (LINKED_C)

    def inputs(self, seed: int) -> list[object]:
        rng = np.random.default_rng(seed)
        length = self.size + (PAD if self.viewed else 0)
        bufs = [rng.integers(-50, 50, length).astype(np.int32) for _ in range(self.buffers)]
        return [*bufs, self.scalar]

    def text(self, plain: bool = False) -> str:
        """The program; `plain`: without dhir ops, each task's body written where the task
        stands (what CodeDrop cuts into tasks again)."""
        return _Writer(self, plain).program()


class _Writer:
    def __init__(self, program: Program, plain: bool = False) -> None:
        self.p = program
        self.plain = plain
        self.lines: list[str] = []
        self.count = 0
        self.step = "%n"  # what moves views of a run-time offset
        # each buffer's name where the writer stands: the argument, its view, an iter_arg
        self.names = [f"%b{k}" for k in range(program.buffers)]

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def arg(self) -> str:
        """The type of the entry's buffers."""
        if self.p.dynamic:
            return "memref<?xi32>"
        return f"memref<{self.p.size + (PAD if self.p.viewed else 0)}xi32>"

    def mem(self) -> str:
        """The type of what the tasks and host code use as the buffers."""
        if self.p.viewed:
            return f"memref<{self.p.size}xi32, strided<[1], offset: ?>>"
        return self.arg()

    def vtype(self, v: View) -> str:
        if self.p.viewed:  # a view of a view of a run-time offset
            return f"memref<{v.size}xi32, strided<[{v.stride}], offset: ?>>"
        return v.type()

    def views(self) -> None:
        if not self.p.viewed:
            return
        self.lines += [
            f"  %pad = arith.constant {PAD + 1} : index",
            "  %o = arith.remui %n, %pad : index",
        ]
        for k in range(self.p.buffers):
            self.lines.append(
                f"  %vw{k} = memref.subview %b{k}[%o] [{self.p.size}] [1]"
                f" : {self.arg()} to {self.mem()}"
            )
            self.names[k] = f"%vw{k}"

    def moved(self, phases: tuple[Phase, ...]) -> None:
        """`phases` in the time loop, on views that move with %t (`Program.moving`)."""
        if not self.p.moving:
            self.phases(phases, "%t")
            return
        outside = list(self.names)
        self.lines.append("    %tm = arith.remui %t, %pad : index")
        for k in range(self.p.buffers):
            self.lines.append(
                f"    %mvw{k} = memref.subview %b{k}[%tm] [{self.p.size}] [1]"
                f" : {self.arg()} to {self.mem()}"
            )
            self.names[k] = f"%mvw{k}"
        self.phases(phases, "%t")
        self.names = outside

    def program(self) -> str:
        p = self.p
        args = ", ".join([*(f"%b{k}: {self.arg()}" for k in range(p.buffers)), "%n: index"])
        self.lines += [DECLARED if p.linked else FUNCTIONS, f"func.func @main({args}) {{"]
        self.lines += [f"  %k{c} = arith.constant {c} : index" for c in range(4)]
        hi = "%n" if p.hi is None else "%hi"
        if p.hi is not None:
            self.lines.append(f"  %hi = arith.constant {p.hi} : index")
        self.lines += [
            f"  %lo = arith.constant {p.lo} : index",
            f"  %st = arith.constant {p.step} : index",
        ]
        self.views()
        if p.time == "for" and p.pingpong:
            self.pingpong(hi)
        elif p.time == "for":
            self.lines.append(f"  scf.for %t = %lo to {hi} step %st {{")
            self.moved(p.phases)
            self.lines.append("  }")
        elif p.time == "while":
            self.lines += [
                "  %w = scf.while (%u = %lo) : (index) -> index {",
                f"    %more = arith.cmpi slt, %u, {hi} : index",
                *self.watch(),
                "    scf.condition(%go) %u : index",
                "  } do {",
                "  ^bb0(%t: index):",
            ]
            self.moved(p.phases)
            self.lines += [
                "    %next = arith.addi %t, %st : index",
                "    scf.yield %next : index",
                "  }",
            ]
        else:
            self.phases(p.phases, None)
        if p.after:
            self.schedule(p.after, None)
        self.lines += ["  return", "}"]
        return "\n".join(self.lines) + "\n"

    def pingpong(self, hi: str) -> None:
        outside, m = list(self.names), self.mem()
        self.lines += [
            f"  %r:2 = scf.for %t = %lo to {hi} step %st iter_args(%pp0 = {outside[0]},"
            f" %pp1 = {outside[1]}) -> ({m}, {m}) {{"
        ]
        self.names[:2] = ["%pp0", "%pp1"]
        self.phases(self.p.phases, "%t")
        self.lines += [f"    scf.yield %pp1, %pp0 : {m}, {m}", "  }"]
        self.names = outside

    def watch(self) -> list[str]:
        if self.p.watch is None:
            return ["    %go = arith.andi %more, %more : i1"]
        return [
            f"    %seen = memref.load {self.names[self.p.watch]}[%k0] : {self.mem()}",
            "    %four = arith.constant 4 : i32",
            "    %zero = arith.constant 0 : i32",
            "    %left = arith.remsi %seen, %four : i32",
            "    %odd = arith.cmpi ne, %left, %zero : i32",
            "    %go = arith.andi %more, %odd : i1",
        ]

    def phases(self, phases: tuple[Phase, ...], t: str | None) -> None:
        for phase in phases:
            if isinstance(phase, Host):
                self.host(phase, t)
            elif isinstance(phase, Guarded):
                seen, zero, positive = self.fresh("g"), self.fresh("z"), self.fresh("p")
                at = self.const(phase.at)
                self.lines += [
                    f"    {seen} = memref.load {self.names[phase.buf]}[{at}] : {self.mem()}",
                    f"    {zero} = arith.constant 0 : i32",
                    f"    {positive} = arith.cmpi sgt, {seen}, {zero} : i32",
                    f"    scf.if {positive} {{",
                ]
                self.schedule(phase.tasks, t)
                self.lines.append("    }")
            else:
                self.schedule(phase, t)

    def const(self, value: int) -> str:
        name = self.fresh("at")
        self.lines.append(f"    {name} = arith.constant {value} : index")
        return name

    def host(self, phase: Host, t: str | None) -> None:
        value = self.fresh("h")
        step = "%k0" if t is None else t
        at = self.const(phase.at)
        if phase.src is None:
            self.lines += [f"    {value} = arith.index_cast {step} : index to i32"]
        else:
            src_at = self.const(phase.src_at)
            old, new, three, mixed = (self.fresh(x) for x in ("old", "new", "c", "m"))
            self.lines += [
                f"    {old} = memref.load {self.names[phase.buf]}[{at}] : {self.mem()}",
                f"    {new} = memref.load {self.names[phase.src]}[{src_at}] : {self.mem()}",
                f"    {three} = arith.constant 3 : i32",
                f"    {mixed} = arith.muli {old}, {three} : i32",
                f"    {value} = arith.addi {mixed}, {new} : i32",
            ]
        self.lines.append(f"    memref.store {value}, {self.names[phase.buf]}[{at}] : {self.mem()}")

    def schedule(self, tasks: tuple[Task, ...], t: str | None) -> None:
        if self.plain:
            for k, task in enumerate(tasks):
                start = len(self.lines)
                self.task(k, task, t)
                body = self.lines[start + 1 : -1]
                self.count += 1
                del self.lines[start:]
                self.lines += [_renamed(line, f"_p{self.count}")[4:] for line in body]
            return
        names = ", ".join([*self.names, "%n"])
        self.lines += [
            f"    dhir.schedule {names} {{",
            '      %cpu = dhir.target {kind = "cpu"}',
            '      %any = dhir.target {kind = "any"}',
        ]
        for k, task in enumerate(tasks):
            self.task(k, task, t)
        self.lines.append("    }")

    def task(self, k: int, task: Task, t: str | None) -> None:
        self.step = "%n" if t is None else t
        used = sorted(_buffers(task.body))
        header = ", ".join(["%any" if task.any_kind else "%cpu", *(self.names[b] for b in used)])
        attrs = []
        if task.rank is not None:
            attrs.append(f"dhir.rank = {task.rank} : i64")
        if isinstance(task.body, Loop) and task.body.split is not None:
            attrs.append(f"dhir.split = {task.body.split} : i64")
        if isinstance(task.body, Reduce) and task.body.split is not None:
            attrs += [f"dhir.split = {task.body.split} : i64", "dhir.reassociate"]
        attr_text = f" attributes {{{', '.join(attrs)}}}" if attrs else ""
        self.lines.append(f"      %t{k} = dhir.task {header}{attr_text} {{")
        self.lines += [
            f"        %seed0 = arith.constant {k + 1} : i32",
            "        %three = arith.constant 3 : i32",
        ]
        if t is None:
            self.lines.append("        %seed = arith.addi %seed0, %seed0 : i32")
        else:
            self.lines += [
                f"        %ts = arith.index_cast {t} : index to i32",
                "        %seed = arith.addi %seed0, %ts : i32",
            ]
        body = task.body
        if isinstance(body, Loop):
            self.loop(body)
        elif isinstance(body, Reduce):
            self.reduce(body)
        elif isinstance(body, ViewLoop):
            self.view_loop(body)
        elif isinstance(body, Copy):
            src, dst = self.view(body.src), self.view(body.dst)
            self.lines.append(
                f"        memref.copy {src}, {dst} : {self.vtype(body.src)} to {self.vtype(body.dst)}"
            )
        elif isinstance(body, Linalg):
            out = self.view(body.out)
            if body.ins:
                a, b = (self.view(v) for v in body.ins)
                types = f"{self.vtype(body.ins[0])}, {self.vtype(body.ins[1])}"
                self.lines.append(
                    f"        linalg.add ins({a}, {b} : {types}) outs({out} : {self.vtype(body.out)})"
                )
            else:
                self.lines.append(
                    f"        linalg.fill ins(%seed : i32) outs({out} : {self.vtype(body.out)})"
                )
        else:
            self.call(body)
        self.lines.append("      }")

    def view(self, v: View) -> str:
        name = self.fresh("v")
        offset = str(v.offset)
        if v.room:
            offset, room, base, moved = (self.fresh(x) for x in ("o", "room", "base", "mv"))
            self.lines += [
                f"        {room} = arith.constant {v.room} : index",
                f"        {base} = arith.constant {v.offset} : index",
                f"        {moved} = arith.remui {self.step}, {room} : index",
                f"        {offset} = arith.addi {base}, {moved} : index",
            ]
        self.lines.append(
            f"        {name} = memref.subview {self.names[v.buf]}[{offset}] [{v.size}]"
            f" [{v.stride}] : {self.mem()} to {self.vtype(v)}"
        )
        return name

    def dynamic(self, name: str, ty: str) -> str:
        cast = self.fresh("d")
        self.lines.append(f"        {cast} = memref.cast {name} : {ty} to {DYN}")
        return cast

    def call(self, c: Call) -> None:
        if c.whole:
            b = c.views[0].buf
            cast = self.dynamic(self.names[b], self.mem())
            self.lines.append(f"        func.call @update({cast}, %seed) : ({DYN}, i32) -> ()")
            return
        casts = [self.dynamic(self.view(v), self.vtype(v)) for v in c.views]
        if len(casts) == 1:
            self.lines.append(f"        func.call @update({casts[0]}, %seed) : ({DYN}, i32) -> ()")
        else:
            self.lines.append(
                f"        func.call @twice({casts[0]}, {casts[1]}) : ({DYN}, {DYN}) -> ()"
            )

    def loop(self, body: Loop) -> None:
        m = self.mem()
        self.lines += [
            f"        %lo_ = arith.constant {body.lo} : index",
            f"        %hi_ = arith.constant {body.hi} : index",
            f"        %st_ = arith.constant {body.step} : index",
            *(
                f"        %d{d} = arith.constant {d} : index"
                for d in sorted({d for _, d in body.reads})
            ),
        ]
        if body.parallel:
            self.lines.append("        scf.parallel (%i) = (%lo_) to (%hi_) step (%st_) {")
        else:
            self.lines.append("        scf.for %i = %lo_ to %hi_ step %st_ {")
        acc = "%seed"
        for b, d in body.reads:
            at, r, s, a = (self.fresh(x) for x in ("at", "r", "s", "a"))
            self.lines += [
                f"          {at} = arith.addi %i, %d{d} : index",
                f"          {r} = memref.load {self.names[b]}[{at}] : {m}",
                f"          {s} = arith.muli {acc}, %three : i32",
                f"          {a} = arith.addi {s}, {r} : i32",
            ]
            acc = a
        self.lines += [f"          memref.store {acc}, {self.names[body.write]}[%i] : {m}"]
        self.lines += ["          scf.reduce", "        }"] if body.parallel else ["        }"]

    def reduce(self, body: Reduce) -> None:
        m, r = self.mem(), self.fresh("red")
        self.lines += [
            f"        %lo_ = arith.constant {body.lo} : index",
            f"        %hi_ = arith.constant {body.hi} : index",
            f"        %st_ = arith.constant {body.step} : index",
            f"        %d_ = arith.constant {body.d} : index",
            f"        %w_ = arith.constant {body.at} : index",
        ]
        load = [
            "          %at_ = arith.addi %i, %d_ : index",
            f"          %x_ = memref.load {self.names[body.read]}[%at_] : {m}",
        ]
        if body.parallel:
            self.lines += [
                f"        {r} = scf.parallel (%i) = (%lo_) to (%hi_) step (%st_) init (%seed)"
                " -> i32 {",
                *load,
                "          scf.reduce(%x_ : i32) {",
                "          ^bb0(%l_: i32, %v_: i32):",
                f"            %s_ = arith.{body.op} %l_, %v_ : i32",
                "            scf.reduce.return %s_ : i32",
                "          }",
                "        }",
            ]
        else:
            self.lines += [
                f"        {r} = scf.for %i = %lo_ to %hi_ step %st_ iter_args(%acc_ = %seed)"
                " -> (i32) {",
                *load,
                f"          %s_ = arith.{body.op} %acc_, %x_ : i32",
                "          scf.yield %s_ : i32",
                "        }",
            ]
        self.lines.append(f"        memref.store {r}, {self.names[body.write]}[%w_] : {m}")

    def view_loop(self, body: ViewLoop) -> None:
        w = self.view(body.write)
        reads = [self.view(v) for v in body.reads]
        self.lines += [
            "        %c0_ = arith.constant 0 : index",
            "        %c1_ = arith.constant 1 : index",
            f"        %n_ = arith.constant {body.write.size} : index",
            "        scf.for %j = %c0_ to %n_ step %c1_ {",
        ]
        acc = "%seed"
        for v, name in zip(body.reads, reads, strict=True):
            r, s, a = (self.fresh(x) for x in ("r", "s", "a"))
            self.lines += [
                f"          {r} = memref.load {name}[%j] : {self.vtype(v)}",
                f"          {s} = arith.muli {acc}, %three : i32",
                f"          {a} = arith.addi {s}, {r} : i32",
            ]
            acc = a
        self.lines += [
            f"          memref.store {acc}, {w}[%j] : {self.vtype(body.write)}",
            "        }",
        ]


SHARED = re.compile(r"%(b\d+|n|t|tm|vw\d+|mvw\d+|pp\d+)$")


def _renamed(line: str, suffix: str) -> str:
    """`line` with every SSA name but the buffers, %n and %t suffixed."""
    return re.sub(
        r"%[A-Za-z_][\w]*",
        lambda m: m.group(0) if SHARED.match(m.group(0)) else m.group(0) + suffix,
        line,
    )


def _buffers(body: Body) -> set[int]:
    if isinstance(body, Loop):
        return {body.write, *(b for b, _ in body.reads)}
    if isinstance(body, Reduce):
        return {body.write, body.read}
    if isinstance(body, ViewLoop):
        return {body.write.buf, *(v.buf for v in body.reads)}
    if isinstance(body, Copy):
        return {body.src.buf, body.dst.buf}
    if isinstance(body, Linalg):
        return {body.out.buf, *(v.buf for v in body.ins)}
    return {v.buf for v in body.views}


# --- strategies ------------------------------------------------------------------------


@st.composite
def views(draw: st.DrawFn, buf: int, size: int, length: int | None = None) -> View:
    n = length if length is not None else draw(st.integers(1, size))
    stride = draw(st.sampled_from((1, 1, 2, 3)))
    if (n - 1) * stride > size - 1:
        stride = 1
    last = size - 1 - (n - 1) * stride
    offset = draw(st.integers(0, last))
    room = draw(st.integers(0, last - offset + 1)) if draw(st.integers(0, 3)) == 0 else 0
    return View(buf, offset, n, stride, room)


@st.composite
def bodies(draw: st.DrawFn, size: int, buffers: int, ranks: int, newer: bool = False) -> Body:
    buf = st.integers(0, buffers - 1)
    kind = draw(st.sampled_from(("loop", "loop", "split", "view", "copy", "linalg", "call")))
    if newer and draw(st.integers(0, 5)) == 0:
        lo = draw(st.integers(0, size - 1))
        hi = draw(st.integers(lo, size))
        return Reduce(
            draw(buf), draw(st.integers(0, size - 1)), draw(buf), draw(st.integers(0, size - hi)),
            lo, hi, draw(st.sampled_from((1, 1, 2, 3))),
            draw(st.sampled_from(("addi", "xori", "maxsi", "muli"))), draw(st.booleans()),
            draw(st.none() | st.integers(2, ranks + 1)),
        )  # fmt: skip
    if kind in ("loop", "split"):
        parallel = kind == "split"
        lo = draw(st.integers(0, size - 1))
        hi = draw(st.integers(lo + 1, size))
        step = draw(st.sampled_from((1, 1, 2, 3)))
        w = draw(buf)
        reads = []
        for _ in range(draw(st.integers(0, 2))):
            b = draw(buf)
            d = 0 if parallel and b == w else draw(st.integers(0, 3))
            d = min(d, size - hi)
            reads.append((b, d))
        split = draw(st.none() | st.integers(2, ranks + 1)) if parallel else None
        return Loop(w, tuple(reads), lo, hi, step, parallel, split)
    n = draw(st.integers(1, (size + 1) // 2))
    if kind == "view":
        w = draw(views(draw(buf), size, n))
        reads = tuple(draw(views(draw(buf), size, n)) for _ in range(draw(st.integers(0, 2))))
        return ViewLoop(w, reads)
    if kind in ("copy", "linalg") and buffers < 2:
        kind = "call"
    if kind == "copy":
        src, dst = draw(st.permutations(range(buffers)))[:2]
        return Copy(draw(views(src, size, n)), draw(views(dst, size, n)))
    if kind == "linalg":
        out, *ins = draw(st.permutations(range(buffers)))
        if draw(st.booleans()) or not ins:
            return Linalg(draw(views(out, size, n)), ())
        a = draw(st.sampled_from(ins))
        b = draw(st.sampled_from(ins))
        return Linalg(draw(views(out, size, n)), (draw(views(a, size, n)), draw(views(b, size, n))))
    if buffers >= 2 and draw(st.booleans()):
        src, dst = draw(st.permutations(range(buffers)))[:2]
        return Call((draw(views(src, size, n)), draw(views(dst, size, n))))
    whole = draw(st.booleans())
    return Call((draw(views(draw(buf), size, n)),), whole)


@st.composite
def programs(draw: st.DrawFn, ranks: int, newer: bool = False) -> Program:
    """`newer`: also contiguous views as the schedules' operands and buffers ping-ponged
    through the time loop's iter_args."""
    size = draw(st.integers(4, 12))
    buffers = draw(st.integers(2 if newer else 1, 4))
    scalar = draw(st.integers(0, 4))

    def task() -> st.SearchStrategy[Task]:
        return st.builds(
            Task,
            bodies(size, buffers, ranks, newer),
            st.none() | st.integers(0, ranks - 1),
            st.booleans(),
        )

    def schedule() -> tuple[Task, ...]:
        return tuple(draw(st.lists(task(), min_size=1, max_size=5)))

    buf = st.integers(0, buffers - 1)
    at = st.integers(0, size - 1)
    phases: list[Phase] = [schedule()]
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            src = draw(st.none() | buf)
            phases.append(Host(draw(buf), draw(at), src, draw(at)))
        if draw(st.integers(0, 3)) == 0:
            phases.append(Guarded(draw(buf), draw(at), schedule()))
        else:
            phases.append(schedule())
    times = ("none", "for", "for", "for", "while") if newer else ("none", "for", "for", "while")
    time = draw(st.sampled_from(times))
    watch = draw(st.none() | buf) if time == "while" else None
    lo = draw(st.integers(0, 2))
    hi = draw(st.none() | st.integers(0, 4))
    step = draw(st.sampled_from((1, 1, 2, 3)))
    after = schedule() if draw(st.integers(0, 3)) == 0 else ()
    dynamic = draw(st.integers(0, 3)) == 0
    viewed = newer and draw(st.booleans())
    linked = newer and draw(st.integers(0, 2)) == 0
    pingpong = newer and time == "for" and draw(st.integers(0, 2)) > 0
    moving = viewed and not pingpong and time != "none" and draw(st.booleans())
    return Program(
        size, buffers, scalar, time, lo, hi, step, tuple(phases), after, watch, dynamic,
        viewed=viewed, pingpong=pingpong, moving=moving, linked=linked,
    )  # fmt: skip
