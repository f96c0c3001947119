"""Random host code around schedules that calls the user's C (linked with `--link`), whose
answers differ from rank to rank: scalars of i1, i32, i64, index, f32 and f64 as a time
loop's step count, a while loop's condition, an if's condition and a task's input, read
from the results of the schedules before (host loads between them), in the entry or in
the program's own functions it calls. dhir-agree-calls gives every rank rank 0's answer:
native runs on 2 and 3 ranks equal the interpreter (which runs the C as rank 0 does) bit
for bit, and never hang.

DHIR_HYPOTHESIS=heavy runs many more random programs, with a fresh seed each time.
"""

import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from profiles import profile

import dhir

TIMEOUT = 90  # seconds per native run: a hang is a failure, not a stuck test run
N = 16
F64 = f"memref<{N}xf64>"

# Each answer depends on the rank (none in the interpreter: rank 0's).
RANKED_C = """
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
static int rank(void) {
  const char *r = getenv("PMI_RANK");
  if (r == NULL) r = getenv("OMPI_COMM_WORLD_RANK");
  return r == NULL ? 0 : atoi(r);
}
bool c_i1(int64_t t) { return (t + rank()) % 2 == 0; }
int32_t c_i32(void) { return 2 + rank(); }
int64_t c_i64(void) { return 1 + 2 * rank(); }
int64_t c_index(void) { return 3 - rank() % 2; }
float c_f32(void) { return 0.25f + (float)rank(); }
double c_f64(double x) { return x * 0.5 + rank(); }
bool c_more(int64_t t) { return t < 1 + rank(); }
"""

DECLARATIONS = """
func.func private @c_i1(i64) -> i1
func.func private @c_i32() -> i32
func.func private @c_i64() -> i64
func.func private @c_index() -> index
func.func private @c_f32() -> f32
func.func private @c_f64(f64) -> f64
func.func private @c_more(i64) -> i1
"""

# What a task computes from %u and %v, with the weight %w, over 1 .. N - 1.
TASK_BODIES = (
    ("u", "v", "%x = memref.load %u[%im] : {t}\n%y = arith.mulf %x, %w : f64\n"
     "memref.store %y, %v[%i] : {t}"),
    ("v", "u", "%x = memref.load %v[%i] : {t}\n%y = arith.addf %x, %w : f64\n"
     "memref.store %y, %u[%i] : {t}"),
    ("u", "u", "%x = memref.load %u[%i] : {t}\n%y = arith.subf %x, %w : f64\n"
     "memref.store %y, %u[%i] : {t}"),
    ("v", "v", "%x = memref.load %v[%im] : {t}\n%y = arith.addf %x, %w : f64\n"
     "memref.store %y, %v[%i] : {t}"),
)  # fmt: skip


@dataclass
class Host:
    """The lines of one function's host code, with fresh names."""

    ranks: int
    rng: random.Random
    plain: bool = False  # no schedules: the loops as CodeDrop takes them
    lines: list[str] = field(default_factory=list[str])
    count: int = 0
    tasks: int = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.extend(line.splitlines())

    def weight(self) -> str:
        """An f64 from C: a constant, c_f32's, or c_f64 of an element a schedule wrote."""
        pick = self.rng.choice(["const", "f32", "f64"])
        w = self.fresh("w")
        if pick == "const":
            self.emit(f"{w} = arith.constant 0.75 : f64")
        elif pick == "f32":
            narrow = self.fresh("wf")
            self.emit(f"{narrow} = func.call @c_f32() : () -> f32")
            self.emit(f"{w} = arith.extf {narrow} : f32 to f64")
        else:
            read = self.fresh("read")
            at = self.rng.randrange(N)
            array = self.rng.choice(["u", "v"])
            self.emit(f"{read} = memref.load %{array}[%c{at}] : {F64}")
            self.emit(f"{w} = func.call @c_f64({read}) : (f64) -> f64")
        return w

    def count_to(self) -> str:
        """A step count (index) from C of one of the integer types."""
        pick = self.rng.choice(["i32", "i64", "index"])
        n = self.fresh("n")
        got = self.fresh("got")
        if pick == "index":
            self.emit(f"{n} = func.call @c_index() : () -> index")
            return n
        self.emit(f"{got} = func.call @c_{pick}() : () -> {pick}")
        self.emit(f"{n} = arith.index_cast {got} : {pick} to index")
        return n

    def schedule(self, w: str) -> None:
        if not self.plain:
            self.emit("dhir.schedule %u, %v {")
            self.emit('%cpu = dhir.target {kind = "cpu"}')
        for _ in range(self.rng.randint(1, 3)):
            src, dst, body = self.rng.choice(TASK_BODIES)
            operands = ", ".join(dict.fromkeys([src, dst]))
            self.tasks += 1
            pin = self.rng.choice([None, *range(self.ranks)])
            attrs = "" if pin is None else f" attributes {{dhir.rank = {pin}}}"
            if not self.plain:
                task = f"%task{self.tasks} = dhir.task %cpu, %{operands.replace(', ', ', %')}"
                self.emit(f"{task}{attrs} {{")
            self.emit(f"scf.for %i = %c1 to %c{N - 1} step %c1 {{")
            self.emit("%im = arith.subi %i, %c1 : index")
            self.emit(body.format(t=F64).replace("%w", w))
            self.emit("}")
            if not self.plain:
                self.emit("}")
        if not self.plain:
            self.emit("}")

    def segment(self, depth: int) -> None:
        kind = self.rng.choice(["plain", "for", "while", "if"] if depth < 2 else ["plain"])
        if kind == "plain":
            self.schedule(self.weight())
        elif kind == "for":
            n = self.count_to()
            t = self.fresh("t")
            self.emit(f"scf.for {t} = %c0 to {n} step %c1 {{")
            self.segment(depth + 1)
            self.emit("}")
        elif kind == "while":
            s, go, more, cap, end = (self.fresh(x) for x in ("s", "go", "more", "cap", "end"))
            self.emit(f"{end} = scf.while ({s} = %z) : (i64) -> i64 {{")
            self.emit(f"{more} = func.call @c_more({s}) : (i64) -> i1")
            self.emit(f"{cap} = arith.cmpi slt, {s}, %four : i64")
            self.emit(f"{go} = arith.andi {more}, {cap} : i1")
            self.emit(f"scf.condition({go}) {s} : i64")
            self.emit("} do {")
            self.emit(f"^bb0({s}: i64):")
            self.segment(depth + 1)
            nxt = self.fresh("next")
            self.emit(f"{nxt} = arith.addi {s}, %one : i64")
            self.emit(f"scf.yield {nxt} : i64")
            self.emit("}")
        else:
            cond = self.fresh("cond")
            self.emit(f"{cond} = func.call @c_i1(%seven) : (i64) -> i1")
            self.emit(f"scf.if {cond} {{")
            self.segment(depth + 1)
            self.emit("} else {")
            self.segment(depth + 1)
            self.emit("}")


def _prologue() -> str:
    lines = [f"%c{k} = arith.constant {k} : index" for k in range(N)]
    lines += ["%z = arith.constant 0 : i64", "%one = arith.constant 1 : i64"]
    lines += ["%four = arith.constant 4 : i64", "%seven = arith.constant 7 : i64"]
    return "\n".join(lines)


def program(seed: int, ranks: int, plain: bool = False) -> str:
    """A random program: its host code in @main, or in @host that @main calls; with
    `plain`, loops where the tasks were (CodeDrop makes the tasks of those in @main)."""
    rng = random.Random(seed)
    host = Host(ranks, rng, plain)
    for _ in range(rng.randint(1, 3)):
        host.segment(0)
    body = "\n".join(host.lines)
    signature = f"(%u: {F64}, %v: {F64})"
    if rng.random() < 0.5:
        main = f"func.func @main{signature} {{\n{_prologue()}\n{body}\nreturn\n}}"
        return DECLARATIONS + main
    call = f"func.call @host(%u, %v) : ({F64}, {F64}) -> ()"
    main = f"func.func @main{signature} {{\n{call}\nreturn\n}}"
    helper = f"func.func private @host{signature} {{\n{_prologue()}\n{body}\nreturn\n}}"
    return DECLARATIONS + main + "\n" + helper


@pytest.fixture(scope="module")
def ranked_c(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ranked")
    (folder / "ranked.c").write_text(RANKED_C)
    obj = folder / "ranked.o"
    subprocess.run(["clang-22", "-fPIC", "-c", folder / "ranked.c", "-o", obj], check=True)
    return obj


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
@pytest.mark.mpi
@profile(2)
@given(seed=st.integers(0, 2**32 - 1), ranks=st.sampled_from([2, 3]), plain=st.booleans())
@example(seed=5, ranks=2, plain=False)  # host code in @host: rank 0 died in a broadcast
def test_ranks_take_rank_0_s_answers_of_random_host_code_s_c(
    ranked_c: Path, seed: int, ranks: int, plain: bool
) -> None:
    text = program(seed, ranks, plain)
    note(f"on {ranks} ranks:\n{text}")
    inputs = [np.arange(N, dtype=np.float64) % 5, np.zeros(N)]
    want = dhir.run(text, *inputs, backend="interp", link=[ranked_c])
    got = dhir.run(text, *inputs, ranks=ranks, link=[ranked_c], timeout=TIMEOUT)
    assert [g.tobytes() for g in got] == [np.asarray(w).tobytes() for w in want]


# A weight from C in the host code of a function @main calls: rank 1 ran its task with
# its own (1.5, not 0.5), exit 0.
HELPER_WEIGHT = (
    DECLARATIONS
    + f"""
func.func @main(%u: {F64}, %v: {F64}) {{
  func.call @helper(%u, %v) : ({F64}, {F64}) -> ()
  return
}}
func.func private @helper(%u: {F64}, %v: {F64}) {{
  %c1 = arith.constant 1 : index
  %c15 = arith.constant 15 : index
  %w = func.call @c_f32() : () -> f32
  dhir.schedule %u, %v {{
    %cpu = dhir.target {{kind = "cpu"}}
    %a = dhir.task %cpu, %u, %v attributes {{dhir.rank = 1}} {{
      scf.for %i = %c1 to %c15 step %c1 {{
        %x = memref.load %u[%i] : {F64}
        %wide = arith.extf %w : f32 to f64
        %m = arith.addf %x, %wide : f64
        memref.store %m, %v[%i] : {F64}
      }}
    }}
  }}
  return
}}
"""
)


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
@pytest.mark.mpi
def test_a_called_function_s_host_code_takes_rank_0_s_answer(ranked_c: Path) -> None:
    inputs = [np.arange(N, dtype=np.float64), np.zeros(N)]
    want = dhir.run(HELPER_WEIGHT, *inputs, backend="interp", link=[ranked_c])
    assert want[1][1] == 1.25  # rank 0's weight, 0.25
    got = dhir.run(HELPER_WEIGHT, *inputs, ranks=2, link=[ranked_c], timeout=TIMEOUT)
    assert [g.tobytes() for g in got] == [np.asarray(w).tobytes() for w in want]


# C's answer stored by a host scf.parallel, read by a task on rank 1: rank 1 stored its
# own (1.25, not 0.25), exit 0.
PARALLEL_STORE = (
    DECLARATIONS
    + f"""
func.func @main(%u: {F64}, %v: {F64}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant {N} : index
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {{
    %w = func.call @c_f32() : () -> f32
    %x = arith.extf %w : f32 to f64
    memref.store %x, %u[%i] : {F64}
  }}
  dhir.schedule %u, %v {{
    %cpu = dhir.target {{kind = "cpu"}}
    %a = dhir.task %cpu, %u, %v attributes {{dhir.rank = 1}} {{
      scf.for %i = %c0 to %c16 step %c1 {{
        %x = memref.load %u[%i] : {F64}
        memref.store %x, %v[%i] : {F64}
      }}
    }}
  }}
  return
}}
"""
)


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
@pytest.mark.mpi
def test_a_host_parallel_loop_takes_rank_0_s_answer(ranked_c: Path) -> None:
    inputs = [np.zeros(N), np.zeros(N)]
    want = dhir.run(PARALLEL_STORE, *inputs, backend="interp", link=[ranked_c])
    assert want[1][0] == 0.25  # rank 0's
    got = dhir.run(PARALLEL_STORE, *inputs, ranks=2, threads=2, link=[ranked_c], timeout=TIMEOUT)
    assert [g.tobytes() for g in got] == [np.asarray(w).tobytes() for w in want]
