"""A tiny loop language for the PolyBench kernels: one description of a kernel's loops
prints both the dhir program (tasks over row blocks, scf.for loops) and the plain C
version, so both run the same loops.

An index is a variable plus an offset (`Ix("i", -1)`) or a constant (`Ix(None, 3)`); an
expression is a float constant, a load or `+ - *` of two expressions; a loop's bounds
are indices (constants or enclosing loop values, for triangular loops)."""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Ix:
    var: str | None
    offset: int = 0


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Load:
    array: str
    index: tuple[Ix, ...]


@dataclass(frozen=True)
class Bin:
    op: str  # "+", "-", "*"
    left: "Expr"
    right: "Expr"


Expr = Num | Load | Bin


@dataclass(frozen=True)
class Store:
    array: str
    index: tuple[Ix, ...]
    value: Expr


@dataclass(frozen=True)
class For:
    var: str
    lo: Ix
    hi: Ix
    body: tuple["Node", ...]


Node = Store | For


def ix(spec: str | int) -> Ix:
    """`"i"`, `"i+1"`, `"j-1"` or a constant."""
    if isinstance(spec, int):
        return Ix(None, spec)
    for sign in "+-":
        if sign in spec:
            name, number = spec.split(sign)
            return Ix(name, int(number) if sign == "+" else -int(number))
    return Ix(spec)


def at(array: str, *index: str | int) -> Load:
    return Load(array, tuple(ix(i) for i in index))


def store(array: str, index: tuple[str | int, ...], value: Expr) -> Store:
    return Store(array, tuple(ix(i) for i in index), value)


def loop(var: str, lo: str | int, hi: str | int, *body: Node) -> For:
    return For(var, ix(lo), ix(hi), tuple(body))


def add(a: Expr, b: Expr) -> Bin:
    return Bin("+", a, b)


def sub(a: Expr, b: Expr) -> Bin:
    return Bin("-", a, b)


def _expr(x: Expr | float) -> Expr:
    return x if isinstance(x, Num | Load | Bin) else Num(float(x))


def mul(a: Expr | float, b: Expr | float) -> Bin:
    return Bin("*", _expr(a), _expr(b))


@dataclass(frozen=True)
class Statement:
    """One statement of a kernel: `body(lo, hi)` computes rows [lo, hi) of its output;
    the benchmark cuts [lo, hi) into K blocks, one task each."""

    lo: int
    hi: int
    body: Callable[[int, int], list[Node]]


@dataclass
class Kernel:
    name: str
    arrays: dict[str, tuple[int, ...]]  # every array, in argument order
    outputs: list[str]  # the arrays NumPy's result is compared on
    statements: list[Statement]
    steps: int = 0  # > 0: a time loop `t` around the statements
    inputs: dict[str, np.ndarray] = field(default_factory=dict[str, np.ndarray])


def blocks(lo: int, hi: int, k: int) -> list[tuple[int, int]]:
    """[lo, hi) cut into min(k, hi - lo) nearly equal row blocks."""
    k = max(1, min(k, hi - lo))
    cuts = [lo + (hi - lo) * b // k for b in range(k + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def arrays_of(nodes: list[Node] | tuple[Node, ...]) -> list[str]:
    """The arrays the nodes touch, in order of first appearance."""
    found: dict[str, None] = {}

    def expr(e: Expr) -> None:
        if isinstance(e, Load):
            found[e.array] = None
        elif isinstance(e, Bin):
            expr(e.left)
            expr(e.right)

    def walk(n: Node) -> None:
        if isinstance(n, Store):
            expr(n.value)
            found[n.array] = None
        else:
            for child in n.body:
                walk(child)

    for node in nodes:
        walk(node)
    return list(found)


def memref_type(shape: tuple[int, ...]) -> str:
    return "memref<" + "x".join(map(str, shape)) + "xf64>"


class _TaskBody:
    """Prints one task's body: SSA names numbered, constants defined once at the top."""

    def __init__(self, types: dict[str, str]) -> None:
        self.types = types
        self.constants: dict[str, str] = {}
        self.lines: list[str] = []
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def index_const(self, n: int) -> str:
        name = f"%ci{n}".replace("-", "m")
        self.constants.setdefault(name, f"{name} = arith.constant {n} : index")
        return name

    def float_const(self, x: float) -> str:
        name = f"%cf{len(self.constants)}"
        text = repr(float(x))
        for old, line in self.constants.items():
            if line.endswith(f"= arith.constant {text} : f64"):
                return old
        self.constants[name] = f"{name} = arith.constant {text} : f64"
        return name

    def index(self, i: Ix, pad: str) -> str:
        if i.var is None:
            return self.index_const(i.offset)
        var = i.var if i.var == "t" else f"iv_{i.var}"
        if i.offset == 0:
            return f"%{var}"
        name = self.fresh()
        op = "addi" if i.offset > 0 else "subi"
        step = self.index_const(abs(i.offset))
        self.lines.append(f"{pad}{name} = arith.{op} %{var}, {step} : index")
        return name

    def expr(self, e: Expr, pad: str) -> str:
        if isinstance(e, Num):
            return self.float_const(e.value)
        if isinstance(e, Load):
            subscripts = ", ".join(self.index(i, pad) for i in e.index)
            name = self.fresh()
            self.lines.append(
                f"{pad}{name} = memref.load %{e.array}[{subscripts}] : {self.types[e.array]}"
            )
            return name
        left, right = self.expr(e.left, pad), self.expr(e.right, pad)
        op = {"+": "addf", "-": "subf", "*": "mulf"}[e.op]
        name = self.fresh()
        self.lines.append(f"{pad}{name} = arith.{op} {left}, {right} : f64")
        return name

    def node(self, n: Node, pad: str) -> None:
        if isinstance(n, Store):
            value = self.expr(n.value, pad)
            subscripts = ", ".join(self.index(i, pad) for i in n.index)
            self.lines.append(
                f"{pad}memref.store {value}, %{n.array}[{subscripts}] : {self.types[n.array]}"
            )
            return
        lo, hi = self.index(n.lo, pad), self.index(n.hi, pad)
        one = self.index_const(1)
        self.lines.append(f"{pad}scf.for %iv_{n.var} = {lo} to {hi} step {one} {{")
        for child in n.body:
            self.node(child, pad + "  ")
        self.lines.append(f"{pad}}}")


def to_mlir(kernel: Kernel, tasks: int, timed: bool = True) -> str:
    """The kernel as dhir MLIR: `@main` takes every array (and, when `timed`, a
    memref<1xf64> the schedule's time in seconds is stored into, by MPI_Wtime)."""
    types = {name: memref_type(shape) for name, shape in kernel.arrays.items()}
    operands = ", ".join(f"%{name}" for name in kernel.arrays)
    args = ", ".join(f"%{name}: {types[name]}" for name in kernel.arrays)
    lines: list[str] = []
    if timed:
        lines.append("func.func private @MPI_Wtime() -> f64")
        args += ", %time: memref<1xf64>"
    lines.append(f"func.func @main({args}) {{")
    if timed:
        lines.append("  %start = func.call @MPI_Wtime() : () -> f64")
    pad = "  "
    if kernel.steps:
        lines += [
            "  %tc0 = arith.constant 0 : index",
            "  %tc1 = arith.constant 1 : index",
            f"  %tsteps = arith.constant {kernel.steps} : index",
            "  scf.for %t = %tc0 to %tsteps step %tc1 {",
        ]
        pad = "    "
    lines += [f"{pad}dhir.schedule {operands} {{", f'{pad}  %cpu = dhir.target {{kind = "cpu"}}']
    for s, statement in enumerate(kernel.statements):
        for b, (lo, hi) in enumerate(blocks(statement.lo, statement.hi, tasks)):
            nodes = statement.body(lo, hi)
            listed = ", ".join(f"%{name}" for name in arrays_of(nodes))
            body = _TaskBody(types)
            for node in nodes:
                body.node(node, pad + "    ")
            lines.append(f"{pad}  %s{s}_{b} = dhir.task %cpu, {listed} {{")
            lines += [f"{pad}    {line}" for line in body.constants.values()]
            lines += body.lines
            lines.append(f"{pad}  }}")
    lines.append(f"{pad}}}")
    if kernel.steps:
        lines.append("  }")
    if timed:
        lines += [
            "  %end = func.call @MPI_Wtime() : () -> f64",
            "  %seconds = arith.subf %end, %start : f64",
            "  %z = arith.constant 0 : index",
            "  memref.store %seconds, %time[%z] : memref<1xf64>",
        ]
    lines += ["  return", "}", ""]
    return "\n".join(lines)


def _c_index(i: Ix) -> str:
    if i.var is None:
        return str(i.offset)
    if i.offset == 0:
        return i.var
    return f"{i.var} {'+' if i.offset > 0 else '-'} {abs(i.offset)}"


def _c_expr(e: Expr) -> str:
    if isinstance(e, Num):
        return repr(float(e.value))
    if isinstance(e, Load):
        return e.array + "".join(f"[{_c_index(i)}]" for i in e.index)
    return f"({_c_expr(e.left)} {e.op} {_c_expr(e.right)})"


def _c_node(n: Node, pad: str) -> list[str]:
    if isinstance(n, Store):
        target = n.array + "".join(f"[{_c_index(i)}]" for i in n.index)
        return [f"{pad}{target} = {_c_expr(n.value)};"]
    lines = [
        f"{pad}for (long {n.var} = {_c_index(n.lo)}; {n.var} < {_c_index(n.hi)}; {n.var}++) {{"
    ]
    for child in n.body:
        lines += _c_node(child, pad + "  ")
    return [*lines, f"{pad}}}"]


def to_c(kernel: Kernel, rows: tuple[int, int] | None = None) -> str:
    """The same loops in plain C, one core: `prog IN_DIR OUT_DIR` reads NAME.raw for every
    array, runs the kernel (timed with clock_gettime), writes every array to OUT_DIR and
    prints the seconds. With `rows`, every statement runs over those of its rows only."""
    params = ", ".join(
        f"double {name}" + "".join(f"[{n}]" for n in shape) for name, shape in kernel.arrays.items()
    )
    body: list[str] = []
    pad = "  "
    if kernel.steps:
        body.append(f"  for (long t = 0; t < {kernel.steps}; t++) {{")
        pad = "    "
    for statement in kernel.statements:
        lo, hi = statement.lo, statement.hi
        if rows is not None:
            lo, hi = max(lo, rows[0]), min(hi, rows[1])
        for node in statement.body(lo, hi) if lo < hi else []:
            body += _c_node(node, pad)
    if kernel.steps:
        body.append("  }")
    io: list[str] = []
    for name, shape in kernel.arrays.items():
        count = int(np.prod(shape))
        io.append(f'  double *{name} = load(argv[1], "{name}", {count});')
    calls = ", ".join(f"(void *){name}" for name in kernel.arrays)
    saves = [
        f'  save(argv[2], "{name}", {name}, {int(np.prod(shape))});'
        for name, shape in kernel.arrays.items()
    ]
    return "\n".join(
        [
            "#include <stdio.h>",
            "#include <stdlib.h>",
            "#include <time.h>",
            "",
            "static double *load(const char *dir, const char *name, long count) {",
            "  char path[4096];",
            '  snprintf(path, sizeof path, "%s/%s.raw", dir, name);',
            '  FILE *f = fopen(path, "rb");',
            "  double *data = malloc(sizeof(double) * count);",
            "  if (!f || !data || fread(data, sizeof(double), count, f) != (size_t)count) {",
            '    fprintf(stderr, "cannot read %s\\n", path);',
            "    exit(1);",
            "  }",
            "  fclose(f);",
            "  return data;",
            "}",
            "",
            "static void save(const char *dir, const char *name, double *data, long count) {",
            "  char path[4096];",
            '  snprintf(path, sizeof path, "%s/%s.raw", dir, name);',
            '  FILE *f = fopen(path, "wb");',
            "  if (!f || fwrite(data, sizeof(double), count, f) != (size_t)count) {",
            '    fprintf(stderr, "cannot write %s\\n", path);',
            "    exit(1);",
            "  }",
            "  fclose(f);",
            "}",
            "",
            f"__attribute__((noinline)) static void kernel({params}) {{",
            *body,
            "}",
            "",
            "int main(int argc, char **argv) {",
            "  if (argc != 3) return 2;",
            *io,
            "  struct timespec a, b;",
            "  clock_gettime(CLOCK_MONOTONIC, &a);",
            f"  kernel({calls});",
            "  clock_gettime(CLOCK_MONOTONIC, &b);",
            *saves,
            '  printf("%.9f\\n", (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec));',
            "  return 0;",
            "}",
            "",
        ]
    )


def to_plain_mlir(kernel: Kernel, timed: bool = True) -> str:
    """The kernel as plain MLIR, without dhir ops, as a C front end would emit it: one
    `scf.for` nest per statement over all its rows, the stencils' statements inside an
    `scf.for` time loop, every constant at the top of the function (where MLIR's
    canonicalizer puts them). Same arguments and timing as `to_mlir`."""
    types = {name: memref_type(shape) for name, shape in kernel.arrays.items()}
    args = ", ".join(f"%{name}: {types[name]}" for name in kernel.arrays)
    body = _TaskBody(types)
    zero, one = body.index_const(0), body.index_const(1)  # the time loop's and the store's
    pad = "    " if kernel.steps else "  "
    for statement in kernel.statements:
        for node in statement.body(statement.lo, statement.hi):
            body.node(node, pad)
    lines: list[str] = []
    if timed:
        lines.append("func.func private @MPI_Wtime() -> f64")
        args += ", %time: memref<1xf64>"
    lines.append(f"func.func @main({args}) {{")
    lines += [f"  {line}" for line in body.constants.values()]
    if kernel.steps:
        lines.append(f"  %tsteps = arith.constant {kernel.steps} : index")
    if timed:
        lines.append("  %start = func.call @MPI_Wtime() : () -> f64")
    if kernel.steps:
        lines.append(f"  scf.for %t = {zero} to %tsteps step {one} {{")
    lines += body.lines
    if kernel.steps:
        lines.append("  }")
    if timed:
        lines += [
            "  %end = func.call @MPI_Wtime() : () -> f64",
            "  %seconds = arith.subf %end, %start : f64",
            f"  memref.store %seconds, %time[{zero}] : memref<1xf64>",
        ]
    lines += ["  return", "}", ""]
    return "\n".join(lines)
