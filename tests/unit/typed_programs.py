"""Random dhir programs over buffers of many element types and shapes, for
tests/unit/test_random_typed.py.

The entry takes buffers of i32, i64, index, f32 or f64: 0-d, 1-D (of 0 to 64 elements,
some of type `memref<?xT>`) or 2-D (a size may be 0). A schedule's operands are the
buffers themselves or contiguous views of them made before the schedules (a block of
rows, a `memref.reinterpret_cast` of a 1-D buffer as rows, a `memref.collapse_shape` of
a 2-D one); schedules may take different forms of one buffer, and with `alias` one
schedule may take two (the native backend must refuse that where a task writes one).

A task is one of: an scf.for nest over a box of its target writing it from reads of
other operands (at the same point, at a shifted point, or anywhere: (point * a + b) mod
size) and of itself (shifted: an in-place stencil in program order); the same writing
only where the value is even (or negative), or at (point * 5 + 1) mod size; an
scf.parallel (`{kind = "any"}`, maybe `dhir.split = K`) reading its target only where
it writes; a loop over a strided `memref.subview` taken in the task (in a time loop,
maybe at an offset that moves with the step); a call of a private function that updates
its (view) argument in place, or one that reads one view (of the target or of another
operand) and writes another view of the target (overlapping or not); a write through a
`memref.reinterpret_cast` taken in the task; an update of one element at constant
subscripts, often followed by the same task at other subscripts (one body shape:
dhir.analysis.shapes); an update of a 0-d operand. Reads of another type are converted:
integers by extension, truncation or index_cast, integers to floats by sitofp, floats to
integers by bitcast (never fptosi: out-of-range values would be poison). Integers
combine as `acc * 3 + r` (wrapping), floats as `acc * 0.5 + r`.

Schedules sit at the top level or in a time loop (an scf.for or an scf.while counting
to the entry's %n), the tasks in a loop adding its step to their seed, with host code
(a statement like a task's, run on every rank) after them. Tasks may carry a
`dhir.rank`, taken modulo the rank count when the program is written.
"""

import random
import re
from dataclasses import dataclass, field, replace

import numpy as np

ELEMENTS = ("i32", "i64", "index", "f32", "f64")
DTYPES = {"i32": np.int32, "i64": np.int64, "index": np.int64, "f32": np.float32,
          "f64": np.float64}  # fmt: skip
BITS = {"i32": 32, "i64": 64, "index": 64, "f32": 32, "f64": 64}
INTEGER_OF = {"f32": "i32", "f64": "i64"}  # a float's bits, for reads by integer tasks


def is_float(elem: str) -> bool:
    return elem in ("f32", "f64")


@dataclass(frozen=True)
class Operand:
    """A schedule operand: a buffer, or a contiguous view of one (`define` makes it)."""

    name: str
    elem: str
    shape: tuple[int, ...]
    layout: str = ""  # ", strided<...>" of a view
    base: int = 0  # the buffer it is (a view) of
    define: str = ""
    offset: int = 0  # of its first element in the buffer
    dynamic: bool = False  # its type's sizes are `?`

    def type(self) -> str:
        dims = "".join("?x" if self.dynamic else f"{d}x" for d in self.shape)
        return f"memref<{dims}{self.elem}{self.layout}>"

    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class Task:
    kind: str  # loop, par, view, call, mix, cast, scalar
    target: int  # index into the schedule's operands
    reads: tuple[int, ...]
    box: tuple[tuple[int, int, int], ...] = ()  # lo, hi, step per dimension of the target
    shift: tuple[int, int] = (1, 0)  # linear read index = point * a + b (mod size)
    view: tuple[int, int, int] = (0, 1, 1)  # offset, size, stride of a subview in the task
    other: tuple[int, int, int] = (0, 1, 1)  # the second view of a `mix` call
    split: int | None = None
    rank: int | None = None
    moving: bool = False  # its subview's offset moves with the time step %t
    extent: int = 0  # of the target's first dimension
    transposed: bool = False  # a 2-D scf.parallel whose first variable is the column


@dataclass(frozen=True)
class Schedule:
    operands: tuple[int, ...]  # into Program.operands
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class Phase:
    schedules: tuple[Schedule, ...]
    loop: str = ""  # "", "for", "while"
    step: int = 1
    host: tuple[Schedule, ...] = ()  # statements after the schedules, on every rank


@dataclass
class Program:
    buffers: tuple[tuple[str, tuple[int, ...]], ...]
    operands: tuple[Operand, ...]
    phases: tuple[Phase, ...]
    steps: int
    seed: int
    dynamic: frozenset[int] = frozenset()  # buffers whose types have sizes `?`
    lines: list[str] = field(default_factory=list)

    def inputs(self) -> list[object]:
        rng = np.random.default_rng(self.seed)
        arrays: list[object] = []
        for elem, shape in self.buffers:
            values = rng.integers(-50, 50, shape)
            if is_float(elem):
                arrays.append(np.array(values / 4, dtype=DTYPES[elem]))
            else:
                arrays.append(np.array(values, dtype=DTYPES[elem]))
        return [*arrays, self.steps]

    def text(self, ranks: int) -> str:
        args = [
            f"%b{k}: {Operand('', e, s, dynamic=k in self.dynamic).type()}"
            for k, (e, s) in enumerate(self.buffers)
        ]
        self.lines = [*self._functions(), f"func.func @main({', '.join(args)}, %n: index) {{"]
        self.lines += ["  %z0 = arith.constant 0 : index", "  %c0 = arith.constant 0 : index",
                       "  %c1 = arith.constant 1 : index"]  # fmt: skip
        self.lines += [o.define for o in self.operands if o.define]
        for p, phase in enumerate(self.phases):
            self._phase(p, phase, ranks)
        self.lines += ["  return", "}"]
        return "\n".join(self.lines) + "\n"

    def _functions(self) -> list[str]:
        lines: list[str] = []
        for elem in ELEMENTS:
            dyn = f"memref<?x{elem}, strided<[?], offset: ?>>"
            lines += [
                f"func.func private @upd_{elem}(%m: {dyn}, %s: {elem}) {{",
                "  %c0 = arith.constant 0 : index",
                "  %c1 = arith.constant 1 : index",
                f"  %n = memref.dim %m, %c0 : {dyn}",
                "  scf.for %j = %c0 to %n step %c1 {",
                f"    %v = memref.load %m[%j] : {dyn}",
                *_indent(_combine("%v", "%s", elem, "%r"), 4),
                f"    memref.store %r, %m[%j] : {dyn}",
                "  }",
                "  return",
                "}",
                f"func.func private @mix_{elem}(%a: {dyn}, %m: {dyn}, %s: {elem}) {{",
                "  %c0 = arith.constant 0 : index",
                "  %c1 = arith.constant 1 : index",
                f"  %n = memref.dim %m, %c0 : {dyn}",
                f"  %na = memref.dim %a, %c0 : {dyn}",
                "  %k = arith.minui %n, %na : index",
                "  scf.for %j = %c0 to %k step %c1 {",
                f"    %v = memref.load %a[%j] : {dyn}",
                *_indent(_combine("%s", "%v", elem, "%r"), 4),
                f"    memref.store %r, %m[%j] : {dyn}",
                "  }",
                "  return",
                "}",
            ]
        return lines

    def _phase(self, p: int, phase: Phase, ranks: int) -> None:
        step = f"%tstep{p}"
        if phase.loop == "for":
            self.lines += [
                f"  {step} = arith.constant {phase.step} : index",
                f"  scf.for %t = %z0 to %n step {step} {{",
            ]
        elif phase.loop == "while":
            self.lines += [
                f"  {step} = arith.constant {phase.step} : index",
                "  %w" + str(p) + " = scf.while (%u = %z0) : (index) -> index {",
                "    %more = arith.cmpi slt, %u, %n : index",
                "    scf.condition(%more) %u : index",
                "  } do {",
                "  ^bb0(%t: index):",
            ]
        for s, schedule in enumerate(phase.schedules):
            self._schedule(schedule, ranks, bool(phase.loop), f"{p}_{s}")
        for h, host in enumerate(phase.host):
            self._host(host, bool(phase.loop), f"h{p}_{h}")
        if phase.loop == "for":
            self.lines.append("  }")
        elif phase.loop == "while":
            self.lines += [
                f"    %next = arith.addi %t, {step} : index",
                "    scf.yield %next : index",
                "  }",
            ]

    def _schedule(self, schedule: Schedule, ranks: int, looped: bool, tag: str) -> None:
        ops = [self.operands[k] for k in schedule.operands]
        self.lines.append(f"  dhir.schedule {', '.join(o.name for o in ops)} {{")
        self.lines += [
            '    %cpu = dhir.target {kind = "cpu"}',
            '    %any = dhir.target {kind = "any"}',
        ]
        for k, task in enumerate(schedule.tasks):
            self._task(ops, task, k, ranks, looped, tag)
        self.lines.append("  }")

    def _host(self, host: Schedule, looped: bool, tag: str) -> None:
        ops = [self.operands[k] for k in host.operands]
        (task,) = host.tasks
        body = [*_zeros(), *_seed(len(self.lines) % 97, ops[task.target].elem, looped)]
        body += TASK_BODIES[task.kind](ops, task)
        free = {o.name for o in ops} | {"%t", "%c0", "%c1"}
        renamed = [
            re.sub(r"%[A-Za-z_]\w*", lambda m: m[0] if m[0] in free else f"%{tag}_{m[0][1:]}", line)
            for line in body
        ]
        self.lines += _indent(renamed, 4 if looped else 2)

    def _task(
        self, ops: list[Operand], task: Task, k: int, ranks: int, looped: bool, tag: str
    ) -> None:
        listed = sorted({task.target, *task.reads})
        names = ", ".join(ops[i].name for i in listed)
        attrs: list[str] = [f'name = "t{tag}_{k}"']
        if task.rank is not None:
            attrs.append(f"dhir.rank = {task.rank % ranks} : i64")
        if task.split is not None:
            attrs.append(f"dhir.split = {task.split} : i64")
        target = "%any" if task.kind == "par" else "%cpu"
        self.lines.append(
            f"    %t{tag}_{k} = dhir.task {target}, {names} attributes {{{', '.join(attrs)}}} {{"
        )
        dst = ops[task.target]
        body = [
            *_zeros(),
            *_seed(k + 1, dst.elem, looped),
        ]
        body += TASK_BODIES[task.kind](ops, task)
        self.lines += _indent(body, 6)
        self.lines.append("    }")


def _indent(lines: list[str], by: int) -> list[str]:
    return [" " * by + line for line in lines]


def _seed(value: int, elem: str, looped: bool) -> list[str]:
    """%seed: `value`, plus the time step %t in a time loop, of type `elem`."""
    lines = [f"%s0 = arith.constant {value} : i64"]
    if looped:
        lines += ["%ti = arith.index_cast %t : index to i64", "%s1 = arith.addi %s0, %ti : i64"]
    else:
        lines.append("%s1 = arith.addi %s0, %s0 : i64")
    return lines + _convert("%s1", "i64", elem, "%seed")


def _convert(value: str, src: str, dst: str, out: str) -> list[str]:
    """`out` = `value` of type `src` as type `dst` (see the module's docstring)."""
    if src == dst:
        return [f"{out} = {_identity(value, src)}"]
    if is_float(src) and is_float(dst):
        op = "extf" if BITS[dst] > BITS[src] else "truncf"
        return [f"{out} = arith.{op} {value} : {src} to {dst}"]
    if is_float(src):
        bits = INTEGER_OF[src]
        return [f"{out}_b = arith.bitcast {value} : {src} to {bits}",
                *_convert(f"{out}_b", bits, dst, out)]  # fmt: skip
    if is_float(dst):
        if src == "index":
            return [f"{out}_i = arith.index_cast {value} : index to i64",
                    f"{out} = arith.sitofp {out}_i : i64 to {dst}"]  # fmt: skip
        return [f"{out} = arith.sitofp {value} : {src} to {dst}"]
    if src == "index" or dst == "index":
        return [f"{out} = arith.index_cast {value} : {src} to {dst}"]
    op = "extsi" if BITS[dst] > BITS[src] else "trunci"
    return [f"{out} = arith.{op} {value} : {src} to {dst}"]


def _identity(value: str, elem: str) -> str:
    if is_float(elem):
        return f"arith.addf {value}, {_zero(elem)} : {elem}"
    return f"arith.addi {value}, {_zero(elem)} : {elem}"


def _zero(elem: str) -> str:
    return "%zf_" + elem if is_float(elem) else "%zi_" + elem


def _constant(value: str, elem: str, out: str) -> str:
    return f"{out} = arith.constant {value} : {elem}"


def _combine(acc: str, read: str, elem: str, out: str) -> list[str]:
    """`out` = acc * 3 + read (integers) or acc * 0.5 + read (floats)."""
    tag = out.lstrip("%")
    if is_float(elem):
        return [_constant("0.5", elem, f"%h_{tag}"),
                f"%m_{tag} = arith.mulf {acc}, %h_{tag} : {elem}",
                f"{out} = arith.addf %m_{tag}, {read} : {elem}"]  # fmt: skip
    return [_constant("3", elem, f"%h_{tag}"),
            f"%m_{tag} = arith.muli {acc}, %h_{tag} : {elem}",
            f"{out} = arith.addi %m_{tag}, {read} : {elem}"]  # fmt: skip


def _zeros() -> list[str]:
    return [_constant("0.0" if is_float(e) else "0", e, _zero(e)) for e in ELEMENTS]


def _point(names: list[str], op: Operand, out: str) -> list[str]:
    """`out` = the linear (row-major) index of the point `names` of `op`."""
    if not names:
        return [f"{out} = arith.addi %c0, %c0 : index"]
    if len(names) == 1:
        return [f"{out} = arith.addi {names[0]}, %c0 : index"]
    return [f"{out}_c = arith.constant {op.shape[1]} : index",
            f"{out}_r = arith.muli {names[0]}, {out}_c : index",
            f"{out} = arith.addi {out}_r, {names[1]} : index"]  # fmt: skip


def _read_at(op: Operand, linear: str, out: str) -> list[str]:
    """`out` = element `linear` mod size of `op` (size > 0)."""
    lines = [f"{out}_n = arith.constant {op.size()} : index",
             f"{out}_q = arith.remui {linear}, {out}_n : index"]  # fmt: skip
    if len(op.shape) == 0:
        return [*lines, f"{out} = memref.load {op.name}[] : {op.type()}"]
    if len(op.shape) == 1:
        return [*lines, f"{out} = memref.load {op.name}[{out}_q] : {op.type()}"]
    return lines + [
        f"{out}_c = arith.constant {op.shape[1]} : index",
        f"{out}_i = arith.divui {out}_q, {out}_c : index",
        f"{out}_j = arith.remui {out}_q, {out}_c : index",
        f"{out} = memref.load {op.name}[{out}_i, {out}_j] : {op.type()}",
    ]


def _reads(ops: list[Operand], task: Task, point: str, same: list[str]) -> list[str]:
    """The combination of the task's reads at the point, into %acc (of the target's type);
    `same`: the indices of the point in the target, for reads of the target itself in an
    scf.parallel (only where it writes)."""
    dst = ops[task.target]
    a, b = task.shift
    lines = [f"%sa = arith.constant {a} : index", f"%sb = arith.constant {b} : index",
             f"%sp = arith.muli {point}, %sa : index", "%lin = arith.addi %sp, %sb : index"]  # fmt: skip
    acc = "%seed"
    for j, r in enumerate(task.reads):
        src = ops[r]
        if src.size() == 0:
            continue
        exact = src.shape == dst.shape and task.shift[0] == 1 and len(same) == len(src.shape)
        c = _self_shift(task)
        if r == task.target and task.kind in ("loop", "scatter", "cond") and c is not None and same:
            lines += [f"%d{j} = arith.constant {c} : index",
                      f"%e{j} = arith.addi {same[0]}, %d{j} : index"]  # fmt: skip
            idx = ", ".join([f"%e{j}", *same[1:]])
            lines.append(f"%r{j} = memref.load {src.name}[{idx}] : {src.type()}")
        elif (task.kind == "par" and r == task.target) or exact:
            idx = ", ".join(same)
            lines.append(f"%r{j} = memref.load {src.name}[{idx}] : {src.type()}")
        elif r != task.target and _shifted(task, src, j) is not None and same:
            # another operand at (i + c, j): a part of it, which the regions map exactly
            lines += [f"%d{j} = arith.constant {_shifted(task, src, j)} : index",
                      f"%e{j} = arith.addi {same[0]}, %d{j} : index"]  # fmt: skip
            idx = ", ".join([f"%e{j}", *same[1:]])
            lines.append(f"%r{j} = memref.load {src.name}[{idx}] : {src.type()}")
        else:
            lines += _read_at(src, "%lin", f"%r{j}")
        lines += _convert(f"%r{j}", src.elem, dst.elem, f"%v{j}")
        lines += _combine(acc, f"%v{j}", dst.elem, f"%a{j}")
        acc = f"%a{j}"
    return [*lines, f"%acc = {_identity(acc, dst.elem)}"]


def _shifted(task: Task, src: Operand, j: int) -> int | None:
    """The shift c of a read of `src` at (i + c, j, ...) for each point (i, j, ...) of the
    task's box, where all stay inside `src`, else None."""
    if len(src.shape) != len(task.box) or not task.box or task.shift[0] != 2:
        return None
    c = task.shift[1] - 2 - j
    box = task.box[::-1] if task.transposed else task.box
    for d, (lo, hi, step) in enumerate(box):
        if hi <= lo:
            return None
        last = lo + (hi - lo - 1) // step * step
        move = c if d == 0 else 0
        if lo + move < 0 or last + move >= src.shape[d]:
            return None
    return c


def _self_shift(task: Task) -> int | None:
    """The shift c of a loop's read of its target at (i + c, ...), where every such read
    stays inside the box's first dimension's extent (an in-place stencil), else None."""
    if not task.box:
        return None
    lo, hi, step = task.box[0]
    if hi <= lo:
        return None
    last = lo + (hi - lo - 1) // step * step
    c = task.shift[1] - 2
    return c if lo + c >= 0 and last + c < task.extent else None


def _box_loops(task: Task, parallel: bool) -> tuple[list[str], list[str], list[str]]:
    """Loops over the task's box: the opening lines, the closing lines, the index names."""
    names = [f"%i{d}" for d in range(len(task.box))]
    consts: list[str] = []
    for d, (lo, hi, step) in enumerate(task.box):
        consts += [f"%lo{d} = arith.constant {lo} : index", f"%hi{d} = arith.constant {hi} : index",
                   f"%st{d} = arith.constant {step} : index"]  # fmt: skip
    if not names:
        return consts, [], []
    if parallel:
        lo = ", ".join(f"%lo{d}" for d in range(len(names)))
        hi = ", ".join(f"%hi{d}" for d in range(len(names)))
        st = ", ".join(f"%st{d}" for d in range(len(names)))
        head = f"scf.parallel ({', '.join(names)}) = ({lo}) to ({hi}) step ({st}) {{"
        return [*consts, head], ["  scf.reduce", "}"], names
    heads = [f"scf.for {n} = %lo{d} to %hi{d} step %st{d} {{" for d, n in enumerate(names)]
    return consts + heads, ["}"] * len(names), names


def _loop_body(ops: list[Operand], task: Task) -> list[str]:
    dst = ops[task.target]
    opening, closing, names = _box_loops(task, task.kind == "par")
    if task.transposed:  # the loops run over the target's dimensions reversed
        names = names[::-1]
    inner = _point(names, dst, "%pt") + _reads(ops, task, "%pt", names)
    idx = ", ".join(names)
    if task.kind in ("scatter", "cond") and dst.size() > 0:
        # at (point * 5 + 1) mod size: subscripts the region walker cannot map
        inner += ["%w5 = arith.constant 5 : index", "%wm = arith.muli %pt, %w5 : index",
                  "%wl = arith.addi %wm, %c1 : index"]  # fmt: skip
        inner += [line for line in _read_at(dst, "%wl", "%wx") if "memref.load" not in line]
        if len(dst.shape) == 1:
            idx = "%wx_q"
        elif len(dst.shape) == 2:
            idx = "%wx_i, %wx_j"
    store = f"memref.store %acc, {dst.name}[{idx}] : {dst.type()}"
    if task.kind == "cond":  # written only where the value is even (or negative)
        if is_float(dst.elem):
            inner += [f"%cz = arith.constant 0.0 : {dst.elem}",
                      f"%if = arith.cmpf olt, %acc, %cz : {dst.elem}"]  # fmt: skip
        else:
            inner += [f"%c2e = arith.constant 2 : {dst.elem}",
                      f"%rem = arith.remsi %acc, %c2e : {dst.elem}",
                      f"%cz = arith.constant 0 : {dst.elem}",
                      f"%if = arith.cmpi eq, %rem, %cz : {dst.elem}"]  # fmt: skip
        inner += ["scf.if %if {", f"  {store}", "}"]
    else:
        inner.append(store)
    return opening + _indent(inner, 2) + closing


def _scalar_body(ops: list[Operand], task: Task) -> list[str]:
    dst = ops[task.target]
    lines = [f"%old = memref.load {dst.name}[] : {dst.type()}"]
    lines += [*_reads(ops, task, "%c0", [])]
    lines += _combine("%old", "%acc", dst.elem, "%new")
    return [*lines, f"memref.store %new, {dst.name}[] : {dst.type()}"]


def _subview(
    op: Operand, spec: tuple[int, int, int], out: str, moving: bool = False
) -> tuple[list[str], str]:
    """A strided 1-D subview of `op` (of a 2-D one: along a row of it, rank-reduced), cast
    to the dynamic layout the functions take; `moving`: its offset (along the row) is
    (offset + %t) mod the offsets that keep it inside."""
    offset, size, stride = spec
    dyn = f"memref<?x{op.elem}, strided<[?], offset: ?>>"
    kind = f"memref<{size}x{op.elem}, strided<[{stride}], offset: {op.offset + offset}>>"
    if op.offset + offset == 0:
        kind = f"memref<{size}x{op.elem}, strided<[{stride}]>>"
    row, col = divmod(offset, op.shape[1]) if len(op.shape) == 2 else (0, offset)
    lines: list[str] = []
    at = str(col)
    if moving:
        kind = f"memref<{size}x{op.elem}, strided<[{stride}], offset: ?>>"
        span = op.shape[-1] - (size - 1) * stride
        lines += [f"{out}_c = arith.constant {col} : index",
                  f"{out}_s = arith.constant {span} : index",
                  f"{out}_a = arith.addi %t, {out}_c : index",
                  f"{out}_o = arith.remui {out}_a, {out}_s : index"]  # fmt: skip
        at = f"{out}_o"
    if len(op.shape) == 1:
        line = (
            f"{out}_v = memref.subview {op.name}[{at}] [{size}] [{stride}] : {op.type()} to {kind}"
        )
    else:
        line = (
            f"{out}_v = memref.subview {op.name}[{row}, {at}] [1, {size}] [1, {stride}] : "
            f"{op.type()} to {kind}"
        )
    return [*lines, line, f"{out} = memref.cast {out}_v : {kind} to {dyn}"], dyn


def _view_body(ops: list[Operand], task: Task) -> list[str]:
    dst = ops[task.target]
    lines, dyn = _subview(dst, task.view, "%sv", task.moving)
    lines += ["%vn = memref.dim %sv, %c0 : " + dyn, "scf.for %j = %c0 to %vn step %c1 {"]
    inner = [f"%old = memref.load %sv[%j] : {dyn}"]
    inner += _reads(ops, task, "%j", [])
    inner += _combine("%old", "%acc", dst.elem, "%new")
    inner.append(f"memref.store %new, %sv[%j] : {dyn}")
    return lines + _indent(inner, 2) + ["}"]


def _call_body(ops: list[Operand], task: Task) -> list[str]:
    dst = ops[task.target]
    lines, dyn = _subview(dst, task.view, "%sv", task.moving)
    return [*lines, f"func.call @upd_{dst.elem}(%sv, %seed) : ({dyn}, {dst.elem}) -> ()"]


def _mix_body(ops: list[Operand], task: Task) -> list[str]:
    """@mix reading a view of the target (or of the first read of the target's type and
    more than one element) and writing another view of the target."""
    dst = ops[task.target]
    source = dst
    for r in task.reads:
        if ops[r].elem == dst.elem and ops[r].size() > 1 and ops[r].shape:
            source = ops[r]
            break
    spec = task.other if source is dst else (task.other[0] % source.size(), 1, 1)
    if len(source.shape) == 2:
        spec = (spec[0] - spec[0] % source.shape[1], 1, 1)
    first, dyn = _subview(source, spec, "%sa")
    second, _ = _subview(dst, task.view, "%sv", task.moving)
    call = f"func.call @mix_{dst.elem}(%sa, %sv, %seed) : ({dyn}, {dyn}, {dst.elem}) -> ()"
    return [*first, *second, call]


def _cast_body(ops: list[Operand], task: Task) -> list[str]:
    """Rows of `cols` elements over a 1-D target, through a reinterpret_cast; one row (the
    view's offset) updated."""
    dst = ops[task.target]
    offset, rows, cols = task.view
    kind = f"memref<{rows}x{cols}x{dst.elem}, strided<[{cols}, 1], offset: {offset}>>"
    lines = [
        f"%rc = memref.reinterpret_cast {dst.name} to offset: [{offset}], sizes: [{rows}, {cols}],"
        f" strides: [{cols}, 1] : {dst.type()} to {kind}",
        f"%row = arith.constant {task.other[0] % rows} : index",
        f"%cols = arith.constant {cols} : index",
        "scf.for %j = %c0 to %cols step %c1 {",
    ]
    inner = [f"%old = memref.load %rc[%row, %j] : {kind}"]
    inner += _reads(ops, task, "%j", [])
    inner += _combine("%old", "%acc", dst.elem, "%new")
    inner.append(f"memref.store %new, %rc[%row, %j] : {kind}")
    return lines + _indent(inner, 2) + ["}"]


def _unravel(linear: int, op: Operand) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(linear % op.size(), op.shape)) if op.shape else ()


def _point_body(ops: list[Operand], task: Task) -> list[str]:
    """One element of the target from one element of each read, all at constant
    subscripts (tasks of one body shape but for those: see dhir.analysis.shapes)."""
    dst = ops[task.target]
    at = _unravel(task.view[0], dst)
    lines = [f"%pk{d} = arith.constant {i} : index" for d, i in enumerate(at)]
    here = ", ".join(f"%pk{d}" for d in range(len(at)))
    lines.append(f"%old = memref.load {dst.name}[{here}] : {dst.type()}")
    acc = "%old"
    for j, r in enumerate(task.reads):
        src = ops[r]
        if src.size() == 0:
            continue
        there = _unravel(task.shift[1] + 7 * j + task.view[1], src)
        lines += [f"%q{j}_{d} = arith.constant {i} : index" for d, i in enumerate(there)]
        names = ", ".join(f"%q{j}_{d}" for d in range(len(there)))
        lines.append(f"%r{j} = memref.load {src.name}[{names}] : {src.type()}")
        lines += _convert(f"%r{j}", src.elem, dst.elem, f"%v{j}")
        lines += _combine(acc, f"%v{j}", dst.elem, f"%a{j}")
        acc = f"%a{j}"
    lines += _combine(acc, "%seed", dst.elem, "%new")
    return [*lines, f"memref.store %new, {dst.name}[{here}] : {dst.type()}"]


TASK_BODIES = {
    "point": _point_body,
    "scatter": _loop_body,
    "cond": _loop_body,
    "loop": _loop_body,
    "par": _loop_body,
    "scalar": _scalar_body,
    "view": _view_body,
    "call": _call_body,
    "mix": _mix_body,
    "cast": _cast_body,
}


# ---------------------------------------------------------------- generation


def _buffer(rng: random.Random) -> tuple[str, tuple[int, ...]]:
    elem = rng.choice(ELEMENTS)
    dims = rng.choice((0, 1, 1, 1, 2, 2))
    if dims == 0:
        return elem, ()
    if dims == 1:
        return elem, (rng.choice((0, 1, 2, 5, 7, 8, 12, 33, 64)),)
    return elem, (rng.choice((0, 1, 2, 3, 4, 5, 6)), rng.choice((0, 1, 2, 3, 4, 5, 17)))


def _views(
    rng: random.Random, k: int, elem: str, shape: tuple[int, ...], m: int, dynamic: bool
) -> list[Operand]:
    """The buffer %bk as an operand, or a contiguous view of it (the m-th)."""
    whole = Operand(f"%b{k}", elem, shape, base=k, dynamic=dynamic)
    choice = rng.random()
    size = int(np.prod(shape, dtype=np.int64))
    if len(shape) == 1 and shape[0] >= 2 and choice < 0.25:
        n = shape[0]
        offset = rng.randint(0, n - 1)
        length = rng.randint(1, n - offset)
        layout = _layout("1", offset)
        view = Operand(f"%view{k}_{m}", elem, (length,), layout, k)
        define = f"  %view{k}_{m} = memref.subview %b{k}[{offset}] [{length}] [1] : {whole.type()} to {view.type()}"
        return [Operand(view.name, elem, view.shape, layout, k, define, offset)]
    if len(shape) == 1 and shape[0] >= 2 and choice < 0.35:
        offset = rng.randint(1, shape[0] - 1)  # one element, as a 0-d view
        layout = f", strided<[], offset: {offset}>"
        view = Operand(f"%view{k}_{m}", elem, (), layout, k)
        define = (
            f"  %view{k}_{m} = memref.subview %b{k}[{offset}] [1] [1] : "
            f"{whole.type()} to {view.type()}"
        )
        return [Operand(view.name, elem, (), layout, k, define, offset)]
    if len(shape) == 1 and shape[0] >= 2 and choice < 0.5:
        n = shape[0]
        offset = rng.randint(0, n - 2)
        cols = rng.randint(1, n - offset)
        rows = rng.randint(1, (n - offset) // cols)
        layout = _layout(f"{cols}, 1", offset)
        view = Operand(f"%view{k}_{m}", elem, (rows, cols), layout, k)
        define = (
            f"  %view{k}_{m} = memref.reinterpret_cast %b{k} to offset: [{offset}], sizes: [{rows}, "
            f"{cols}], strides: [{cols}, 1] : {whole.type()} to {view.type()}"
        )
        return [Operand(view.name, elem, view.shape, layout, k, define, offset)]
    if len(shape) == 2 and size > 0 and choice < 0.25:
        rows, cols = shape
        start = rng.randint(0, rows - 1)
        count = rng.randint(1, rows - start)
        layout = _layout(f"{cols}, 1", start * cols)
        view = Operand(f"%view{k}_{m}", elem, (count, cols), layout, k)
        define = (
            f"  %view{k}_{m} = memref.subview %b{k}[{start}, 0] [{count}, {cols}] [1, 1] : "
            f"{whole.type()} to {view.type()}"
        )
        return [Operand(view.name, elem, view.shape, layout, k, define, start * cols)]
    if len(shape) == 2 and choice < 0.4:
        view = Operand(f"%view{k}_{m}", elem, (size,), "", k, dynamic=dynamic)
        define = f"  %view{k}_{m} = memref.collapse_shape %b{k} [[0, 1]] : {whole.type()} into {view.type()}"
        return [Operand(view.name, elem, view.shape, "", k, define, dynamic=dynamic)]
    return [whole]


def _layout(strides: str, offset: int) -> str:
    return f", strided<[{strides}], offset: {offset}>" if offset else f", strided<[{strides}]>"


def _box(rng: random.Random, shape: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    box = []
    for d in shape:
        lo = rng.randint(0, max(d - 1, 0))
        hi = rng.randint(lo, d)
        box.append((lo, hi, rng.choice((1, 1, 2, 3))))
    return tuple(box)


def _spec(rng: random.Random, n: int) -> tuple[int, int, int]:
    """Offset, size and stride of a 1-D subview of n >= 1 elements."""
    offset = rng.randint(0, n - 1)
    stride = rng.choice((1, 1, 2, 3))
    size = rng.randint(1, (n - 1 - offset) // stride + 1)
    return offset, size, stride


def _row_spec(rng: random.Random, op: Operand) -> tuple[int, int, int]:
    """A subview along one row of a 2-D operand (or of a 1-D one), as _subview takes it."""
    if len(op.shape) == 1:
        return _spec(rng, op.shape[0])
    rows, cols = op.shape
    row = rng.randint(0, rows - 1)
    col, size, stride = _spec(rng, cols)
    return row * cols + col, size, stride


def _task(rng: random.Random, ops: list[Operand], ranks: int, looped: bool = False) -> Task:
    target = rng.randrange(len(ops))
    dst = ops[target]
    reads = tuple(rng.randrange(len(ops)) for _ in range(rng.randint(0, 3)))
    if not is_float(dst.elem):  # integers read no floats through arithmetic: see bitcast
        reads = tuple(r for r in reads if not is_float(ops[r].elem) or rng.random() < 0.5)
    rank = rng.randrange(8) if rng.random() < 0.4 else None
    shift = (rng.choice((1, 1, 2, 3)), rng.randint(0, 5))
    kinds = ["loop", "loop", "par"]
    if dst.size() > 0 and len(dst.shape) >= 1:
        kinds += ["view", "call", "mix"]
    if len(dst.shape) == 1 and dst.size() > 0 and not dst.layout:
        kinds.append("cast")
    if not dst.shape:
        kinds = ["scalar", "loop"]
    if dst.size() > 0:
        kinds += ["point", "point", "scatter", "cond"]
    kind = rng.choice(kinds)
    box = _box(rng, dst.shape)
    if kind in ("loop", "scatter", "cond") and dst.shape and rng.random() < 0.5:
        reads = (target, *reads)  # in place, shifted: see _self_shift
    if kind == "par" and len(dst.shape) == 2 and rng.random() < 0.4:
        box = _box(rng, dst.shape[::-1])
        split = rng.choice((None, 2, 3, ranks + 1))
        return Task(kind, target, reads, box, shift, split=split, transposed=True)
    if kind == "par":
        split = rng.choice((None, 2, 3, ranks + 1))
        return Task(
            kind, target, reads, box, shift, split=split, rank=rank if split is None else None
        )
    if kind in ("view", "call", "mix"):
        moving = looped and rng.random() < 0.5
        return Task(kind, target, reads, box, shift, _row_spec(rng, dst), _row_spec(rng, dst),
                    rank=rank, moving=moving)  # fmt: skip
    if kind == "cast":
        n = dst.size()  # a 1-D target
        offset = rng.randint(0, n - 1)
        cols = rng.randint(1, n - offset)
        rows = rng.randint(1, (n - offset) // cols)
        return Task(
            kind,
            target,
            reads,
            box,
            shift,
            (offset, rows, cols),
            (rng.randrange(4), 0, 0),
            rank=rank,
        )
    if kind == "point":
        return Task(
            kind, target, reads, box, shift, (rng.randrange(64), rng.randrange(64), 0), rank=rank
        )
    return Task(kind, target, reads, box, shift, rank=rank, extent=dst.shape[0] if dst.shape else 0)


def _sibling(rng: random.Random, task: Task) -> Task:
    """`task` again at other constant subscripts (and perhaps another rank)."""
    rank = rng.randrange(8) if rng.random() < 0.6 else None
    shift = (task.shift[0], rng.randint(0, 5))
    return replace(task, view=(rng.randrange(64), rng.randrange(64), 0), shift=shift, rank=rank)


def _schedule(
    rng: random.Random, forms: tuple[Operand, ...], ranks: int, alias: bool, looped: bool
) -> Schedule:
    """Tasks on one form of each of some buffers (with `alias`, maybe two of one)."""
    bases = sorted({o.base for o in forms})
    chosen: list[int] = []
    for base in rng.sample(bases, rng.randint(1, len(bases))):
        mine = [k for k, o in enumerate(forms) if o.base == base]
        chosen.append(rng.choice(mine))
        if alias and len(mine) > 1 and rng.random() < 0.3:
            chosen.append(rng.choice(mine))
    chosen = sorted(set(chosen))
    ops = [forms[k] for k in chosen]
    tasks: list[Task] = []
    for _ in range(rng.randint(1, 6)):
        if tasks and tasks[-1].kind == "point" and rng.random() < 0.6:
            tasks.append(_sibling(rng, tasks[-1]))
        else:
            tasks.append(_task(rng, ops, ranks, looped))
    return Schedule(tuple(chosen), tuple(tasks))


def _host(rng: random.Random, forms: tuple[Operand, ...]) -> Schedule:
    """Host code between schedules: one statement on a few forms, run on every rank."""
    chosen = sorted(set(rng.sample(range(len(forms)), rng.randint(1, min(3, len(forms))))))
    ops = [forms[k] for k in chosen]
    task = _task(rng, ops, 1)
    if task.kind in ("par", "mix", "cast"):
        box = task.box[::-1] if task.transposed else task.box
        task = Task("loop", task.target, task.reads, box, task.shift)
    return Schedule(tuple(chosen), (task,))


def program(rng: random.Random, ranks: int = 4, alias: bool = False) -> Program:
    """A random program; with `alias`, perhaps two views of one buffer in a schedule."""
    buffers = tuple(_buffer(rng) for _ in range(rng.randint(1, 4)))
    forms: list[Operand] = []
    dynamic = frozenset(k for k, (_, s) in enumerate(buffers) if len(s) == 1 and rng.random() < 0.3)
    for k, (elem, shape) in enumerate(buffers):
        mine = [Operand(f"%b{k}", elem, shape, base=k, dynamic=k in dynamic)]
        for m in range(rng.randint(0, 2)):
            mine += [o for o in _views(rng, k, elem, shape, m, k in dynamic) if o.define]
        if len(mine) > 1 and rng.random() < 0.6:
            mine = mine[1:]  # only views of it
        forms += mine
    frozen = tuple(forms)
    phases = []
    for _ in range(rng.randint(1, 3)):
        loop = rng.choice(("", "", "for", "while"))
        count = rng.randint(1, 2)
        schedules = tuple(_schedule(rng, frozen, ranks, alias, bool(loop)) for _ in range(count))
        host = tuple(_host(rng, frozen) for _ in range(rng.choice((0, 0, 1, 2))))
        phases.append(Phase(schedules, loop, rng.choice((1, 1, 2)), host))
    steps = rng.randint(0, 3)
    return Program(buffers, frozen, tuple(phases), steps, rng.randrange(2**16), dynamic)
