"""Random schedules of many tasks on 1-4 ranks (pinned or placed) among which one reads
subscripts from an input and may fail a run-time check: a load or store past the end, a
subview, reinterpret_cast, vector.load or vector.transfer_read out of bounds, a
memref.cast to a size the view has not, a memref.dim past the rank, a failed cf.assert,
an allocation of a negative size. The native build runs the checks after the lowering
only on the pieces that hold their kinds of op (dhir.api.run_found): the tasks around
the faulty one hold none of them. Native must stop where the interpreter stops (the same
line:col, never exit 0), or run to the same bits.

DHIR_HYPOTHESIS=heavy also writes schedules of over 1,000 tasks, which the native build
cuts into pieces built while the rest is lowered (dhir.toolchain.split).
"""

import random
import shutil

import numpy as np
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from profiles import HEAVY, profile

import dhir
from dhir.ir.diagnostics import DhirError

TIMEOUT = 120  # seconds per native run: a hang is a failure, not a stuck test run
N = 64
A = f"memref<{N}xf64>"
VIEW = "memref<4xf64, strided<[1], offset: ?>>"
SLICE = "memref<?xf64, strided<[1], offset: 1>>"
STORE = f"memref.store %x, %b[%c0] : {A}"


def _fault(kind: str) -> list[str]:
    """The lines of the faulty task after it reads %d, an index from the input."""
    faults = {
        "load": [f"%x = memref.load %a[%d] : {A}", STORE],
        "store": [f"%x = memref.load %a[%c1] : {A}", f"memref.store %x, %b[%d] : {A}"],
        "subview": [
            f"%s = memref.subview %a[%d] [4] [1] : {A} to {VIEW}",
            f"%x = memref.load %s[%c1] : {VIEW}",
            STORE,
        ],
        "reinterpret": [
            f"%s = memref.reinterpret_cast %a to offset: [%d], sizes: [4], strides: [1]"
            f" : {A} to {VIEW}",
            f"%x = memref.load %s[%c1] : {VIEW}",
            STORE,
        ],
        "vector": [
            f"%v = vector.load %a[%d] : {A}, vector<4xf64>",
            f"vector.store %v, %b[%c0] : {A}, vector<4xf64>",
        ],
        "transfer": [
            "%pad = arith.constant 0.0 : f64",
            f"%v = vector.transfer_read %a[%d], %pad {{in_bounds = [true]}} : {A}, vector<4xf64>",
            f"vector.transfer_write %v, %b[%c0] {{in_bounds = [true]}} : vector<4xf64>, {A}",
        ],
        "dim": [
            f"%n = memref.dim %a, %d : {A}",
            "%ni = arith.index_cast %n : index to i64",
            "%x = arith.sitofp %ni : i64 to f64",
            STORE,
        ],
        "assert": [
            f"%ok = arith.cmpi ult, %d, %c{N} : index",
            'cf.assert %ok, "subscript too big"',
            f"%x = memref.load %a[%c2] : {A}",
            STORE,
        ],
        "cast": [
            f"%s = memref.subview %a[1] [%d] [1] : {A} to {SLICE}",
            f"%t = memref.cast %s : {SLICE} to {SLICE.replace('?', '4', 1)}",
            f"%x = memref.load %t[%c1] : {SLICE.replace('?', '4', 1)}",
            STORE,
        ],
        "alloc": [
            "%m = memref.alloc(%d) : memref<?xf64>",
            "%x = arith.constant 2.5 : f64",
            "memref.store %x, %m[%c0] : memref<?xf64>",
            STORE,
            "memref.dealloc %m : memref<?xf64>",
        ],
    }
    return faults[kind]


# Per kind, the inputs the faulty task runs with, and some it stops at.
INSIDE = {
    "load": range(N),
    "store": range(N),
    "subview": range(N - 3),
    "reinterpret": range(N - 3),
    "vector": range(N - 3),
    "transfer": range(N - 3),
    "dim": range(1),
    "assert": range(N),
    "cast": range(4, 5),
    "alloc": range(1, 100),
}
OUTSIDE = (N, N - 1, N - 3, 100, -1, -5, 2**40, -(2**62), 0, 3)
# Not 2**40 elements: the interpreter cannot hold them (native code allocates them lazily).
ALLOC_OUTSIDE = (-1, -5, -(2**62), 0)


def program(rng: random.Random, tasks: int, ranks: int, kind: str) -> str:
    faulty = rng.randrange(tasks)
    lines = [f"func.func @main(%a: {A}, %b: {A}, %idx: memref<2xi64>) {{"]
    lines += [f"%c{k} = arith.constant {k} : index" for k in (*range(8), N)]
    lines += ["dhir.schedule %a, %b, %idx {", '%cpu = dhir.target {kind = "cpu"}']
    for t in range(tasks):
        pin = rng.choice([None, *range(ranks)])
        attrs = "" if pin is None else f" attributes {{dhir.rank = {pin}}}"
        lines.append(f"%t{t} = dhir.task %cpu, %a, %b, %idx{attrs} {{")
        if t == faulty:
            lines.append(f"%di = memref.load %idx[%c{rng.randrange(2)}] : memref<2xi64>")
            lines.append("%d = arith.index_cast %di : i64 to index")
            lines += _fault(kind)
        else:
            lines.append(f"%x = memref.load %a[%c{rng.randrange(8)}] : {A}")
            lines.append("%y = arith.addf %x, %x : f64")
            lines.append(f"memref.store %y, %b[%c{rng.randrange(8)}] : {A}")
        lines.append("}")
    return "\n".join([*lines, "}", "return", "}"])


def _verdict(run: object) -> tuple[str, object]:
    """("ran", the arrays' bytes) or ("stopped", line and column)."""
    try:
        arrays = run()  # pyright: ignore[reportCallIssue]
    except DhirError as error:
        loc = error.diagnostics[0].loc
        assert loc is not None, str(error)
        return "stopped", (loc.line, loc.col)
    return "ran", [np.asarray(a).tobytes() for a in arrays]  # pyright: ignore[reportGeneralTypeIssues, reportUnknownVariableType]


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
@pytest.mark.mpi
@profile(2)
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(sorted(INSIDE)),
    ranks=st.integers(1, 4),
    big=st.booleans() if HEAVY else st.just(False),
)
@example(seed=3, kind="reinterpret", ranks=2, big=False)  # a piece of no subview
def test_a_faulty_task_among_many_stops_native_where_the_interpreter_stops(
    seed: int, kind: str, ranks: int, big: bool
) -> None:
    rng = random.Random(seed)
    tasks = rng.randint(1000, 1100) if big else rng.randint(1, 12)
    text = program(rng, tasks, ranks, kind)
    note(f"{kind} on {ranks} ranks, {tasks} tasks:\n{text}")
    for inside in (True, False):
        pool = INSIDE[kind] if inside else ALLOC_OUTSIDE if kind == "alloc" else OUTSIDE
        idx = np.array([rng.choice(pool) for _ in range(2)], dtype=np.int64)
        inputs = [np.arange(N, dtype=np.float64) * 0.5, np.zeros(N), idx]
        note(f"idx {idx.tolist()}")
        want = _verdict(lambda: dhir.run(text, *inputs, backend="interp"))
        got = _verdict(lambda: dhir.run(text, *inputs, ranks=ranks, timeout=TIMEOUT))
        assert got == want
