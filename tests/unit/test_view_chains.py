"""The access regions of writes through random chains of views (subviews with constant or
dynamic offsets, rank-reducing ones, transposes, casts to dynamic layouts) against the
elements NumPy's views of the same offsets and strides hold: what a task may write holds
every element it writes, what it surely writes none it does not, and a chain of views
the region walker maps exactly (no condition, no dropped dimension) is written surely,
element for element. The messages between ranks rest on both bounds."""

import random

import islpy as isl
import numpy as np
from hypothesis import given, note, settings
from hypothesis import strategies as st

from dhir.analysis.regions import task_regions
from dhir.dialects.dhir import TaskOp
from dhir.ir.text import parse_string

SHAPES = ((6, 8), (4, 5, 6), (24,))


def _type(shape: list[int], strides: list[int], offset: int, dynamic: tuple[bool, bool]) -> str:
    dims = "".join(f"{n}x" for n in shape)
    if dynamic[1]:
        return f"memref<{dims}i32, strided<[{', '.join('?' for _ in shape)}], offset: ?>>"
    at = ", offset: ?" if dynamic[0] else (f", offset: {offset}" if offset else "")
    return f"memref<{dims}i32, strided<[{', '.join(map(str, strides))}]{at}>>"


class _Chain:
    """A chain of views of %a, built step by step, with the element numbers of %a that
    each index of the last view holds (`index`)."""

    def __init__(self, rng: random.Random, shape: tuple[int, ...]) -> None:
        self.rng = rng
        self.index = np.arange(int(np.prod(shape))).reshape(shape)
        self.strides = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]
        self.offset = 0
        self.dynamic = (False, False)
        self.value, self.type = "%a", f"memref<{'x'.join(map(str, shape))}xi32>"
        self.lines: list[str] = []
        self.dropped = False

    def step(self, k: int) -> None:
        kind = self.rng.choice(["subview", "subview", "transpose", "cast"])
        if kind == "subview":
            self._subview(k)
        elif kind == "transpose" and self.index.ndim == 2:
            self.index = self.index.T
            self.strides = self.strides[::-1]
            self._add(k, "memref.transpose {v} (d0, d1) -> (d1, d0)")
        elif kind == "cast" and not self.dynamic[1]:
            self.dynamic = (True, self.rng.random() < 0.5)
            self._add(k, "memref.cast {v}")

    def _subview(self, k: int) -> None:
        rng = self.rng
        sizes, steps, starts = [], [], []
        for extent in self.index.shape:
            size = rng.randint(1, extent)
            step = rng.randint(1, max(1, (extent - 1) // (size - 1))) if size > 1 else 1
            sizes.append(size)
            steps.append(step)
            starts.append(rng.randint(0, extent - 1 - (size - 1) * step))
        cut = zip(starts, sizes, steps, strict=True)
        index = self.index[tuple(slice(o, o + (n - 1) * s + 1, s) for o, n, s in cut)]
        strides = [a * b for a, b in zip(self.strides, steps, strict=True)]
        self.offset += sum(o * s for o, s in zip(starts, self.strides, strict=True))
        kept = list(range(index.ndim))
        if 1 in sizes and index.ndim > 1 and rng.random() < 0.3:
            kept = [d for d, n in enumerate(sizes) if n != 1] or kept
            self.dropped = self.dropped or len(kept) < index.ndim
        self.index = index.reshape([index.shape[d] for d in kept])
        self.strides = [strides[d] for d in kept]
        offsets = [str(o) for o in starts]
        if rng.random() < 0.3:
            self.dynamic = (True, self.dynamic[1])
            for d, o in enumerate(starts):
                self.lines.append(f"%o{k}_{d} = arith.constant {o} : index")
                offsets[d] = f"%o{k}_{d}"
        sizes_text = ", ".join(map(str, sizes))
        steps_text = ", ".join(map(str, steps))
        self._add(k, f"memref.subview {{v}}[{', '.join(offsets)}] [{sizes_text}] [{steps_text}]")

    def _add(self, k: int, op: str) -> None:
        view = _type(list(self.index.shape), self.strides, self.offset, self.dynamic)
        self.lines.append(f"%v{k} = {op.format(v=self.value)} : {self.type} to {view}")
        self.value, self.type = f"%v{k}", view


def _program(chain: _Chain, shape: tuple[int, ...], condition: bool) -> str:
    variables = [f"%i{d}" for d in range(chain.index.ndim)]
    loops = "".join(
        f"%n{d} = arith.constant {n} : index\n      scf.for %i{d} = %c0 to %n{d} step %c1 {{\n"
        for d, n in enumerate(chain.index.shape)
    )
    store = f"memref.store %k, {chain.value}[{', '.join(variables)}] : {chain.type}"
    if condition:
        store = (
            "%r = arith.remui %i0, %c2 : index\n      %p = arith.cmpi eq, %r, %c0 : index\n"
            f"      scf.if %p {{ {store} }}"
        )
    views = "\n      ".join(chain.lines)
    return f"""func.func @main(%a: memref<{"x".join(map(str, shape))}xi32>) {{
  dhir.schedule %a {{
    %t = dhir.task target = "cpu", %a {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %k = arith.constant 7 : i32
      {views}
      {loops}{store}
      {"}" * chain.index.ndim}
    }}
  }}
  return
}}"""


def _elements(region: isl.Set, shape: tuple[int, ...]) -> set[int]:
    found: list[int] = []

    def add(point: isl.Point) -> None:
        at = [
            int(point.get_coordinate_val(isl.dim_type.set, d).to_python())
            for d in range(len(shape))
        ]
        found.append(int(np.ravel_multi_index(at, shape)))

    region.foreach_point(add)
    return set(found)


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(SHAPES), st.booleans())
def test_writes_through_random_view_chains(
    rng: random.Random, shape: tuple[int, ...], condition: bool
) -> None:
    chain = _Chain(rng, shape)
    for k in range(rng.randint(1, 4)):
        chain.step(k)
    text = _program(chain, shape, condition)
    note(text)
    task = next(op for op in parse_string(text).walk() if isinstance(op, TaskOp))
    regions = task_regions(task)
    (a,) = task.memrefs
    index = chain.index
    written = index[::2] if condition else index
    actual = {int(k) for k in written.ravel()}
    may = _elements(regions.written(a), shape)
    must = _elements(regions.must_written(a), shape)
    assert actual <= may
    assert must <= actual
    if not condition and not chain.dropped:
        assert must == actual == may
