"""Element-wise linalg.generics that no contraction's loops sit beside: the optimizer
writes them as their loops, the rows one scf.parallel (which the rank's threads share,
as they shared the linalg op) and the last index an scf.for inside (which LLVM
vectorises; the build's own lowering made one collapsed OpenMP loop of divisions and
remainders, which it did not). Bit for bit the interpreter's."""

import shutil
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dhir
from dhir import parse_string
from dhir.backends.native import compile_native
from dhir.dialects import linalg, scf
from dhir.ir.walk import find_ops
from dhir.runner import drop_code
from dhir.toolchain.options import RunOptions
from dhir.transforms.generic_sweeps import CHUNK, THREADED_ATTR
from dhir.transforms.optimize_bodies import optimize_bodies

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# Bodies of `out = f(x, y, out)`, on inputs that are never 0 (standard normal draws).
BODIES = {
    "axpy": ["%p = arith.mulf %s, %c : {t}", "%r = arith.addf %p, %x : {t}"],
    "ratio": ["%d = arith.subf %x, %y : {t}", "%r = arith.divf %d, %s : {t}"],
    "max": ["%m = arith.maximumf %x, %y : {t}", "%r = arith.addf %m, %c : {t}"],
    "neg": ["%p = arith.mulf %x, %y : {t}", "%r = arith.negf %p : {t}"],
}


@dataclass(frozen=True)
class Elementwise:
    """`C = f(A, B, C)` as a linalg.generic over `shape`, every map the identity; A read
    through a view at offset 1 in every dimension of a larger array where `viewed`."""

    shape: tuple[int, ...]
    body: str = "axpy"
    dtype: str = "f64"
    viewed: bool = False
    in_place: bool = False  # x is C itself: `ins(%C, %B) outs(%C)`

    def kinds(self) -> list[str]:
        big = tuple(d + 1 for d in self.shape) if self.viewed else self.shape
        return [self._memref(big), self._memref(self.shape), self._memref(self.shape)]

    def _memref(self, shape: tuple[int, ...]) -> str:
        return "memref<" + "".join(f"{d}x" for d in shape) + f"{self.dtype}>"

    def text(self) -> str:
        t, rank = self.dtype, len(self.shape)
        a, b, c = self.kinds()
        dims = ", ".join(f"d{k}" for k in range(rank))
        identity = f"affine_map<({dims}) -> ({dims})>"
        lines = [
            f"func.func @main(%A: {a}, %B: {b}, %C: {c}) {{",
            f"  %s = arith.constant 1.2 : {t}",
        ]
        x = "%A"
        if self.viewed:
            strides, stride = [], 1
            for d in reversed(self.shape):
                strides.insert(0, stride)
                stride *= d + 1
            layout = f"strided<[{', '.join(map(str, strides))}], offset: {sum(strides)}>"
            view = "memref<" + "".join(f"{d}x" for d in self.shape) + f"{t}, {layout}>"
            ones, sizes = ", ".join(["1"] * rank), ", ".join(map(str, self.shape))
            lines.append(f"  %V = memref.subview %A[{ones}] [{sizes}] [{ones}] : {a} to {view}")
            x, a = "%V", view
        if self.in_place:
            x, a = "%C", c
        parallel = ", ".join(['"parallel"'] * rank)
        lines += [
            f"  linalg.generic {{indexing_maps = [{', '.join([identity] * 3)}],",
            f"                  iterator_types = [{parallel}]}}",
            f"      ins({x}, %B : {a}, {b}) outs(%C : {c}) {{",
            f"  ^bb0(%x: {t}, %y: {t}, %c: {t}):",
            *(f"    {line.format(t=t)}" for line in BODIES[self.body]),
            f"    linalg.yield %r : {t}",
            "  }",
            "  return",
            "}",
            "",
        ]
        return "\n".join(lines)

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        kind = np.float64 if self.dtype == "f64" else np.float32
        shapes = [
            tuple(d + 1 for d in self.shape) if self.viewed else self.shape,
            self.shape,
            self.shape,
        ]
        return [rng.standard_normal(s).astype(kind) for s in shapes]


def _optimized(program: Elementwise):
    module = parse_string(program.text())
    drop_code(module, "main")
    decisions = optimize_bodies(module, 256)
    return module, decisions


def test_an_elementwise_generic_alone_becomes_rows_in_parallel_and_a_column_loop() -> None:
    """`C = 1.2 C + A` alone (no contraction beside it, so it kept the build's lowering
    and its OpenMP threads before): one scf.parallel over the rows, marked, an scf.for
    over the columns inside, no linalg op left and no line (it is rewritten)."""
    module, decisions = _optimized(Elementwise((6, 40)))
    assert not find_ops(module, linalg.GenericOp)
    assert decisions == []
    (rows,) = find_ops(module, scf.ParallelOp)
    assert THREADED_ATTR in rows.attributes and len(rows.body.block.args) == 1
    assert len(find_ops(rows, scf.ForOp)) == 1  # the columns, innermost


def test_a_long_vector_runs_in_chunks_in_parallel_then_its_leftover() -> None:
    """A 1-D generic of more than two chunks: one scf.parallel over blocks of CHUNK
    elements, each an scf.for, then an scf.for over the leftover."""
    module, _ = _optimized(Elementwise((2 * CHUNK + 7,)))
    (blocks,) = find_ops(module, scf.ParallelOp)
    assert len(find_ops(blocks, scf.ForOp)) == 1
    assert len(find_ops(module, scf.ForOp)) == 2


@needs_llvm
def test_an_elementwise_generic_alone_keeps_its_threads() -> None:
    """Its build keeps OpenMP (the rows share the rank's threads, as the linalg op's
    loops did), and gives the interpreter's bits on 2 threads."""
    program = Elementwise((9, 33))
    module = parse_string(program.text())
    drop_code(module, "main")
    exe, _ = compile_native(module, "main", RunOptions(threads=2))
    assert b"__kmpc_fork_call" in exe.read_bytes()
    _assert_exact(program, 2)


def _assert_exact(program: Elementwise, threads: int) -> None:
    inputs = program.inputs(sum(program.shape))
    want = dhir.run(program.text(), *inputs, backend="interp", ranks=1)
    got = dhir.run(program.text(), *inputs, backend="native", ranks=1, threads=threads)
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(np.signbit(got[2]), np.signbit(want[2]))


@st.composite
def programs(draw: st.DrawFn) -> Elementwise:
    rank = draw(st.integers(1, 3))
    if rank == 1:
        shape: tuple[int, ...] = (
            draw(st.sampled_from([1, 7, CHUNK, 2 * CHUNK, 2 * CHUNK + 3, 3 * CHUNK - 1])),
        )
    else:
        shape = tuple(draw(st.integers(1, 9 if rank == 2 else 5)) for _ in range(rank))
    body = draw(st.sampled_from(sorted(BODIES)))
    dtype = draw(st.sampled_from(["f32", "f64"]))
    return Elementwise(shape, body, dtype, draw(st.booleans()), draw(st.booleans()))


@needs_llvm
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(), threads=st.integers(1, 2))
@example(program=Elementwise((2 * CHUNK + 3,), "ratio", "f32", True), threads=2)
@example(program=Elementwise((3, 4, 5), "max", "f64", True), threads=2)
@example(program=Elementwise((7, 600), "axpy", "f64", False, True), threads=2)
def test_elementwise_generics_as_threaded_loops_are_exact(
    program: Elementwise, threads: int
) -> None:
    """Any rank, odd sizes, chunks and a leftover, an input read through a shifted view,
    the output read as an input too (`C = f(C, B)`), f32 or f64, 1 or 2 threads: the
    native result is the interpreter's, bit for bit."""
    module, _ = _optimized(program)
    assert not find_ops(module, linalg.GenericOp)
    _assert_exact(program, threads)


def test_an_elementwise_generic_reading_its_output_as_an_input_becomes_loops() -> None:
    """`ins(%C, %B) outs(%C)`: each element of C is read only where it is written, so
    any order of elements computes it; it was left ("writes an array that an input may
    share") to the collapsed OpenMP loop."""
    module, decisions = _optimized(Elementwise((6, 40), in_place=True))
    assert not find_ops(module, linalg.GenericOp) and decisions == []


SHIFTED = """
func.func @main(%C: memref<5x7xf64>) {
  %in = memref.subview %C[1, 1] [4, 6] [1, 1] : memref<5x7xf64> to memref<4x6xf64, strided<[7, 1], offset: 8>>
  %out = memref.subview %C[0, 0] [4, 6] [1, 1] : memref<5x7xf64> to memref<4x6xf64, strided<[7, 1]>>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%in : memref<4x6xf64, strided<[7, 1], offset: 8>>) outs(%out : memref<4x6xf64, strided<[7, 1]>>) {
  ^bb0(%x: f64, %y: f64):
    %r = arith.negf %x : f64
    linalg.yield %r : f64
  }
  return
}
"""


def test_a_generic_reading_its_output_shifted_is_left() -> None:
    """An input that is a shifted view of the output (`C[i, j] = -C[i + 1, j + 1]`) would
    see the order of the elements: it is left, and says so."""
    module = parse_string(SHIFTED)
    drop_code(module, "main")
    (decision,) = optimize_bodies(module, 256)
    assert decision.text.endswith("writes an array that an input may share"), decision.text
