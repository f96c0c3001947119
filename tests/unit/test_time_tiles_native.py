"""Random stencil time loops banded by dhir-time-tiles and run natively on 1-4 ranks with
1 or 2 threads, against the interpreter running the loop as written, bit for bit.

test_time_tiles.py runs its 2-D sweeps natively on one rank and on several ranks in the
interpreter; test_optimizer_fuzz.py natively on several ranks with the default threads.
Here: 1-D stencils over f64, f32 and i32 (integer sums that wrap), arrays of different
lengths and element types (f32 read into f64 sums and stored back rounded), radius 1 to 3
on either side, boundary rows written by tasks of their own, statements writing two
arrays or rereading the element they wrote, time loops starting past 0, stepping by 2 or
3 or running to a bound given at run time (none, some or not a multiple of the band); the
2-D sweeps of test_time_tiles.py on several ranks with 2 threads; and the whole native
pipeline, which bands a loop itself where the machine description's caches are small.

A few programs by default; DHIR_HYPOTHESIS=heavy runs many more, with a fresh seed each
time.
"""

import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st
from test_native_fuzz import _same
from test_optimizer_fuzz import _sweep, stencil_case
from test_time_tiles import Program

import dhir
from dhir import parse_string, print_module
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach
from dhir.transforms.time_tiles import time_tiles

HEAVY = os.environ.get("DHIR_HYPOTHESIS") == "heavy"

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

NUMPY = {"f64": np.float64, "f32": np.float32, "i32": np.int32}


@dataclass(frozen=True)
class Line:
    """`dst[i] = c0 + sum of w * src[i + offset]` (+ F[t]) for rows [lo, hi), or for the
    one row `row`; `also` stores the sum times the first weight to a second array too,
    `reread` adds the first term to the element it has just stored."""

    dst: int
    reads: tuple[tuple[int, int], ...]  # (array, row offset)
    weights: tuple[float, ...]
    lo: int
    hi: int
    row: int | None = None
    forcing: bool = False
    also: int | None = None
    reread: bool = False


@dataclass(frozen=True)
class Stencil:
    """A time loop `for t = first to first + steps step by` of one schedule of Lines over
    1-D arrays; `kind` is the type sums are computed in, `types` each array's."""

    kind: str
    lengths: tuple[int, ...]
    types: tuple[str, ...]
    lines: tuple[Line, ...]
    steps: int
    first: int = 0
    by: int = 1
    dynamic: bool = False  # the loop's end an argument (`run_steps`), not a constant
    run_steps: int = 0
    seed: int = 0

    def text(self) -> str:
        names = [f"%M{a}" for a in range(len(self.lengths))]
        kinds = [f"memref<{n}x{t}>" for n, t in zip(self.lengths, self.types)]
        args = ", ".join(f"{n}: {k}" for n, k in zip(names, kinds))
        args += f", %F: memref<{self.steps + 4}x{self.kind}>"
        args += ", %steps: index" if self.dynamic else ""
        end = f"arith.constant {self.first + self.steps} : index"
        lines = [
            f"func.func @main({args}) {{",
            f"  %first = arith.constant {self.first} : index",
            f"  %by = arith.constant {self.by} : index",
            f"  %end = {'arith.addi %steps, %first : index' if self.dynamic else end}",
            "  scf.for %t = %first to %end step %by {",
            f"    dhir.schedule {', '.join(names)}, %F {{",
            '      %cpu = dhir.target {kind = "cpu"}',
        ]
        for s, line in enumerate(self.lines):
            lines += self._task(s, line, names, kinds)
        return "\n".join([*lines, "    }", "  }", "  return", "}"]) + "\n"

    def _task(self, s: int, line: Line, names: list[str], kinds: list[str]) -> list[str]:
        also = [] if line.also is None else [line.also]
        used = sorted({line.dst, *(a for a, _ in line.reads), *also})
        floats = self.kind != "i32"
        add, mul = ("arith.addf", "arith.mulf") if floats else ("arith.addi", "arith.muli")
        t = self.kind
        head = [
            f"      %s{s} = dhir.task %cpu, {', '.join(names[a] for a in used)}, %F {{",
            "        %k0 = arith.constant 0 : index",
            "        %k1 = arith.constant 1 : index",
        ]
        if line.row is None:
            head += [
                f"        %lo = arith.constant {line.lo} : index",
                f"        %hi = arith.constant {line.hi} : index",
                "        scf.for %i = %lo to %hi step %k1 {",
            ]
            at = "%i"
        else:  # a loop of one trip around the row: a boundary task of its own
            head += [
                f"        %row = arith.constant {line.row} : index",
                "        scf.for %once = %k0 to %k1 step %k1 {",
            ]
            at = "%row"
        zero = "0.5" if floats else "7"
        body = [f"%acc0 = arith.constant {zero} : {t}"]
        for n, ((array, offset), w) in enumerate(zip(line.reads, line.weights)):
            weight = repr(float(w)) if floats else str(int(w))
            body += [
                f"%o{n} = arith.constant {offset} : index",
                f"%r{n} = arith.addi {at}, %o{n} : index",
                f"%y{n} = memref.load {names[array]}[%r{n}] : {kinds[array]}",
            ]
            x = _convert(body, f"%x{n}", f"%y{n}", self.types[array], t)
            body += [
                f"%w{n} = arith.constant {weight} : {t}",
                f"%p{n} = {mul} {x}, %w{n} : {t}",
                f"%acc{n + 1} = {add} %acc{n}, %p{n} : {t}",
            ]
        total = f"%acc{len(line.reads)}"
        if line.forcing:
            body += [
                f"%f = memref.load %F[%t] : memref<{self.steps + 4}x{t}>",
                f"%forced = {add} {total}, %f : {t}",
            ]
            total = "%forced"
        out = _convert(body, "%out", total, t, self.types[line.dst])
        body.append(f"memref.store {out}, {names[line.dst]}[{at}] : {kinds[line.dst]}")
        if line.also is not None:
            body.append(f"%twice = {mul} {total}, %w0 : {t}")
            other = _convert(body, "%other", "%twice", t, self.types[line.also])
            body.append(f"memref.store {other}, {names[line.also]}[{at}] : {kinds[line.also]}")
        if line.reread:
            body.append(f"%back = memref.load {names[line.dst]}[{at}] : {kinds[line.dst]}")
            again = _convert(body, "%again", "%back", self.types[line.dst], t)
            body.append(f"%more = {add} {again}, %acc1 : {t}")
            kept = _convert(body, "%kept", "%more", t, self.types[line.dst])
            body.append(f"memref.store {kept}, {names[line.dst]}[{at}] : {kinds[line.dst]}")
        return [*head, *(f"          {b}" for b in body), "        }", "      }"]

    def inputs(self) -> list[object]:
        rng = np.random.default_rng(self.seed)
        arrays: list[object] = []
        for n, t in zip(self.lengths, self.types):
            if t == "i32":  # sums of these wrap
                arrays.append(rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32))
            else:
                arrays.append(rng.standard_normal(n).astype(NUMPY[t]))
        force = rng.standard_normal(self.steps + 4) * (3 if self.kind == "i32" else 1)
        arrays.append(force.astype(NUMPY[self.kind]))
        return [*arrays, self.run_steps] if self.dynamic else arrays


def _convert(body: list[str], name: str, value: str, have: str, want: str) -> str:
    """`value` (of type `have`) as a `want`: itself, or `name` made by extf or truncf."""
    if have == want:
        return value
    op = "arith.extf" if have == "f32" else "arith.truncf"
    body.append(f"{name} = {op} {value} : {have} to {want}")
    return name


def _line(rng: random.Random, kind: str, arrays: int, n: int) -> list[Line]:
    """A sweep (rows [3, n - 3) or part of them; sometimes cut in two row blocks, which
    share a stage) or a boundary row of its own."""
    dst = rng.randrange(arrays)
    others = [a for a in range(arrays) if a != dst]
    near = (-2, -1, 0, 1, 2) if rng.random() < 0.9 else (-3, 3)
    reads = [(rng.choice(others), rng.choice(near)) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.5:  # its own element, before it is written
        reads.insert(rng.randrange(len(reads) + 1), (dst, 0))
    pool = (0.25, 0.5, 1.0, -1.5, 0.3333, 3.0) if kind != "i32" else (1, 3, -2, 65537)
    weights = tuple(rng.choice(pool) for _ in reads)
    forcing = rng.random() < 0.4
    if rng.random() < 0.15:
        row = rng.choice([0, 1, n - 1, n - 2, rng.randrange(n)])
        reads = [(a, max(-row, min(n - 1 - row, o))) for a, o in reads]
        return [Line(dst, tuple(reads), weights, row, row + 1, row, forcing)]
    also = rng.choice(others) if rng.random() < 0.15 else None
    if any(a == also and o != 0 for a, o in reads):  # it would read rows it writes
        also = None
    reread = rng.random() < 0.2
    lo, hi = (3, n - 3) if rng.random() < 0.4 else sorted(rng.randint(3, n - 3) for _ in range(2))
    line = Line(dst, tuple(reads), weights, lo, hi, None, forcing, also, reread)
    if hi - lo >= 2 and rng.random() < 0.3:
        at = rng.randint(lo + 1, hi - 1)
        return [replace(line, hi=at), replace(line, lo=at)]
    return [line]


def stencil(seed: int) -> Stencil:
    rng = random.Random(seed)
    kind = rng.choice(["f64", "f64", "f32", "i32"])
    n, arrays = rng.randint(8, 90), rng.randint(2, 3)
    lengths = tuple(n + rng.choice([0, 0, 1, 3]) for _ in range(arrays))
    floats = ("f32", "f64")
    types = tuple(
        kind if kind == "i32" or rng.random() < 0.7 else rng.choice(floats) for _ in range(arrays)
    )
    lines = tuple(x for _ in range(rng.randint(1, 4)) for x in _line(rng, kind, arrays, n))
    steps = rng.randint(0, 17)
    dynamic = rng.random() < 0.25
    run = steps if rng.random() < 0.8 else -rng.randint(1, 3)  # no step at all
    return Stencil(kind, lengths, types, lines, steps, rng.choice([0, 0, 1, 2]),
                   rng.choice([1, 1, 1, 2, 3]), dynamic, run, seed % 2**16)  # fmt: skip


_F = TypeVar("_F", bound=Callable[..., Any])


def _fuzzed(heavy_examples: int) -> Callable[[_F], _F]:
    """One example on CI (derandomized); `heavy_examples` with DHIR_HYPOTHESIS=heavy."""
    return settings(
        max_examples=heavy_examples if HEAVY else 1,
        derandomize=not HEAVY,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )


def _compare(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(np.asarray(g), np.asarray(w), f"argument {k}")


@needs_llvm
@_fuzzed(300)
@given(
    seed=st.integers(0, 2**32 - 1),
    band=st.integers(2, 7),
    ranks=st.integers(1, 4),
    threads=st.sampled_from([1, 2]),
)
# f32 and f64 arrays of two lengths, radius 3, boundary rows, an element reread, t from 2 by 2:
@example(seed=123, band=3, ranks=3, threads=2)
# i32 sums that wrap, boundary rows, radius 3, t from 1 by 3:
@example(seed=145, band=4, ranks=2, threads=1)
def test_banded_1d_stencils_run_natively_as_the_interpreter_runs_them(
    seed: int, band: int, ranks: int, threads: int
) -> None:
    """Random 1-D stencils (the module docstring) in bands of 2-7 steps on 1-4 ranks of
    1 or 2 threads; a loop the pass leaves runs as written."""
    program = stencil(seed)
    text = program.text()
    module = parse_string(text)
    (decision,) = time_tiles(module, band, ranks)
    note(f"seed {seed}, bands of {band} on {ranks} ranks, {threads} threads: {decision.text}")
    note(text)
    inputs = program.inputs()
    want = dhir.run(text, *inputs, backend="interp")
    run = print_module(module) if decision.done else text
    _compare(dhir.run(run, *inputs, backend="native", ranks=ranks, threads=threads), want)


@needs_llvm
@_fuzzed(300)
@given(seed=st.integers(0, 2**32 - 1))
def test_banded_2d_sweeps_on_ranks_of_two_threads_run_as_the_interpreter_runs_them(
    seed: int,
) -> None:
    """test_optimizer_fuzz.py's 2-D and 3-D sweeps, banded for 1-4 ranks, natively with
    2 threads a rank."""
    program, band, ranks = stencil_case(random.Random(seed))
    text = program.text()
    module = parse_string(text)
    (decision,) = time_tiles(module, band if band > 1 else 0, ranks)
    note(f"seed {seed}, bands of {band} on {ranks} ranks: {decision.text}\n{text}")
    inputs = program.inputs(seed % 2**16)
    want = dhir.run(text, *inputs, backend="interp")
    run = print_module(module) if decision.done else text
    _compare(dhir.run(run, *inputs, backend="native", ranks=ranks, threads=2), want)


def _tiny_caches(ranks: int, core: int) -> System:
    """A node of `ranks` CPU ranks whose caches hold a few rows: the native backend
    bands time loops of a few hundred rows itself."""
    cpu = guess_device("n0.cpu", "x86_64", cores=2 * ranks, ranks=ranks)
    cpu = replace(cpu, core_cache_bytes=core, llc_bytes=4 * core)
    return System((Node("n0", (cpu,)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)


def _rows_to_band(rng: random.Random, ranks: int) -> Program:
    """Sweeps over enough rows that blocks of them are thick enough for bands on `ranks`."""
    rows = rng.randint(150 * ranks, 260 * ranks) if ranks > 1 else rng.randint(8, 40)
    arrays = rng.randint(2, 3)
    sweeps = [s for _ in range(rng.randint(1, 3)) for s in _sweep(rng, arrays, rows)]
    return Program(arrays, rng.randint(0, 12), tuple(sweeps), False, rng.random() < 0.4,
                   rng.random() < 0.3, rows)  # fmt: skip


@needs_llvm
@_fuzzed(200)
@given(seed=st.integers(0, 2**32 - 1), ranks=st.integers(1, 3), threads=st.sampled_from([1, 2]))
@example(seed=1, ranks=2, threads=2)  # bands of 4 steps on 2 ranks, chosen by the caches
def test_the_native_pipeline_bands_by_small_caches_as_the_interpreter_runs_them(
    seed: int, ranks: int, threads: int
) -> None:
    """The loop as written, with a machine description of caches of 2-32 KiB attached:
    the native backend picks the bands, then cuts and places the tasks."""
    rng = random.Random(seed)
    program = _rows_to_band(rng, ranks)
    module = parse_string(program.text())
    attach(module, _tiny_caches(ranks, rng.choice([2048, 4096, 8192, 32768])))
    text = print_module(module)
    decisions = time_tiles(parse_string(text), 0, ranks)
    note(f"seed {seed}, {ranks} ranks, {threads} threads: {decisions}\n{text}")
    inputs = program.inputs(seed % 2**16)
    want = dhir.run(program.text(), *inputs, backend="interp")
    _compare(dhir.run(text, *inputs, backend="native", ranks=ranks, threads=threads), want)
