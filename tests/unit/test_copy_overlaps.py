"""A memref.copy between two views of one buffer that share an element, not being the same
view: MLIR leaves it undefined and the interpreter refuses it, while native code copied
in an order of its own and exited 0 (a copy of a[0:4] into a[3:7] gave a[3:7] = 100,
101, 102, 100: memmove's answer, not an error). Where dhir proves the overlap
(dhir.analysis.regions.copy_overlap), both backends refuse it at the copy before either
starts; copies it cannot prove overlapping run as before."""

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import dhir
from dhir.analysis.regions import copy_overlap
from dhir.dialects import memref
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string

TASK = """func.func @main(%a: memref<8xi32>, %n: index) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %a {{
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      {views}
      memref.copy %x, %y : {x} to {y}
    }}
  }}
  return
}}
"""

V0 = "memref<4xi32, strided<[1]>>"
V3 = "memref<4xi32, strided<[1], offset: 3>>"
VD = "memref<4xi32, strided<[1], offset: ?>>"
V2 = "memref<4xi32, strided<[2]>>"
V21 = "memref<4xi32, strided<[2], offset: 1>>"

# Each: the views (%x, %y), their types, and the element both hold (None: they share
# none, or that is not proven).
CASES = {
    "shifted subviews": (
        f"""%x = memref.subview %a[0] [4] [1] : memref<8xi32> to {V0}
      %y = memref.subview %a[3] [4] [1] : memref<8xi32> to {V3}""",
        V0,
        V3,
        (3,),
    ),
    "a dynamic offset that is a number": (
        f"""%x = memref.subview %a[%c2] [4] [1] : memref<8xi32> to {VD}
      %y = memref.subview %a[3] [4] [1] : memref<8xi32> to {V3}""",
        VD,
        V3,
        (3,),
    ),
    "a reinterpret_cast and a cast": (
        f"""%r = memref.reinterpret_cast %a to offset: [1], sizes: [4], strides: [1]
          : memref<8xi32> to memref<4xi32, strided<[1], offset: 1>>
      %x = memref.cast %r : memref<4xi32, strided<[1], offset: 1>> to {VD}
      %y = memref.subview %a[3] [4] [1] : memref<8xi32> to {V3}""",
        VD,
        V3,
        (3,),
    ),
    "even and odd elements": (
        f"""%x = memref.subview %a[0] [4] [2] : memref<8xi32> to {V2}
      %y = memref.subview %a[1] [4] [2] : memref<8xi32> to {V21}""",
        V2,
        V21,
        None,
    ),
    "apart": (
        f"""%x = memref.subview %a[0] [4] [1] : memref<8xi32> to {V0}
      %y = memref.subview %a[4] [4] [1] : memref<8xi32> to memref<4xi32, strided<[1], offset: 4>>""",
        V0,
        "memref<4xi32, strided<[1], offset: 4>>",
        None,
    ),
    "one view and its cast": (
        f"""%x = memref.subview %a[3] [4] [1] : memref<8xi32> to {V3}
      %y = memref.cast %x : {V3} to {VD}""",
        V3,
        VD,
        None,
    ),
    "an offset known at run time only": (
        f"""%x = memref.subview %a[%n] [4] [1] : memref<8xi32> to {VD}
      %y = memref.subview %a[3] [4] [1] : memref<8xi32> to {V3}""",
        VD,
        V3,
        None,
    ),
}


def _text(name: str) -> str:
    views, x, y, _ = CASES[name]
    return TASK.format(views=views, x=x, y=y)


def _copy(text: str) -> memref.CopyOp:
    return next(op for op in parse_string(text).walk() if isinstance(op, memref.CopyOp))


@pytest.mark.parametrize("name", sorted(CASES))
def test_copy_overlap_is_found_where_proven(name: str) -> None:
    found = copy_overlap(_copy(_text(name)))
    element = CASES[name][3]
    assert (found.element if found is not None else None) == element
    if found is not None:
        assert found.memref.name_hint == "a"


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_an_overlapping_copy_is_refused_at_the_copy_by_both_backends(backend: str) -> None:
    with pytest.raises(
        DhirError,
        match=r"p.mlir:9:7: error: this memref.copy copies between views that overlap \(%a\[3\] is in both",
    ):
        dhir.run(
            parse_string(_text("shifted subviews"), "p.mlir"),
            np.arange(8, dtype=np.int32),
            np.int64(0),
            backend=backend,
            ranks=2,
        )


def test_a_copy_between_interleaved_views_still_runs_natively() -> None:
    a = np.arange(8, dtype=np.int32)
    text = _text("even and odd elements")
    want = dhir.run(text, a, np.int64(0), backend="interp")
    got = dhir.run(text, a, np.int64(0), backend="native", ranks=2)
    assert got[0].tobytes() == want[0].tobytes()
    assert list(want[0]) == [0, 0, 2, 2, 4, 4, 6, 6]


# --- random views of a 6x8 buffer ------------------------------------------------------

SHAPE = (6, 8)


def _type(shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> str:
    at = f", offset: {offset}" if offset else ""
    return f"memref<{'x'.join(map(str, shape))}xf32, strided<[{', '.join(map(str, strides))}]{at}>>"


def _subview(
    draw: st.DrawFn, index: np.ndarray, shape: tuple[int, ...] | None
) -> tuple[list[int], list[int], list[int]]:
    """Offsets, sizes and strides of a subview of `index` (of `shape` when given)."""
    starts, sizes, steps = [], [], []
    for d, extent in enumerate(index.shape):
        size = shape[d] if shape is not None else draw(st.integers(1, extent))
        step = draw(st.integers(1, max(1, (extent - 1) // max(1, size - 1))))
        starts.append(draw(st.integers(0, extent - 1 - (size - 1) * step)))
        sizes.append(size)
        steps.append(step)
    return starts, sizes, steps


@st.composite
def _view(
    draw: st.DrawFn, name: str, shape: tuple[int, ...] | None = None
) -> tuple[str, str, np.ndarray]:
    """A chain of subviews and transposes of %b, the last named %{name}: its ops, its
    type, and the element numbers of %b it holds (as NumPy's views take them). With
    `shape`: one subview of that shape, of %b or of its transpose."""
    index = np.arange(48).reshape(SHAPE)
    lines: list[str] = []
    current, type_ = "%b", "memref<6x8xf32>"
    strides, offset = (8, 1), 0
    if shape is None:
        kinds = draw(st.lists(st.sampled_from(["subview", "transpose"]), min_size=1, max_size=3))
    else:
        fits = all(n <= extent for n, extent in zip(shape, SHAPE, strict=True))
        kinds = ["subview"] if fits else ["transpose", "subview"]
    for step, kind in enumerate(kinds):
        new = f"%{name}" if step == len(kinds) - 1 else f"%{name}{step}"
        if kind == "transpose":
            index, strides = index.T, strides[::-1]
            view = _type(index.shape, strides, offset)
            lines.append(
                f"{new} = memref.transpose {current} (d0, d1) -> (d1, d0) : {type_} to {view}"
            )
        else:
            starts, sizes, steps = _subview(draw, index, shape)
            offset += sum(s * k for s, k in zip(starts, strides, strict=True))
            strides = tuple(s * k for s, k in zip(strides, steps, strict=True))
            cut = zip(starts, sizes, steps, strict=True)
            index = index[tuple(slice(o, o + (n - 1) * k + 1, k) for o, n, k in cut)]
            view = _type(index.shape, strides, offset)
            lines.append(
                f"{new} = memref.subview {current}[{', '.join(map(str, starts))}] "
                f"[{', '.join(map(str, sizes))}] [{', '.join(map(str, steps))}] "
                f": {type_} to {view}"
            )
        current, type_ = new, view
    return "\n  ".join(lines), type_, index


@st.composite
def _pair(draw: st.DrawFn) -> tuple[str, np.ndarray, np.ndarray]:
    """A copy from one random chain of views of %b into a subview of %b of its shape,
    and the element numbers of each."""
    x_ops, x_type, x = draw(_view("x"))
    y_ops, y_type, y = draw(_view("y", x.shape))
    text = f"""func.func @main(%b: memref<6x8xf32>) {{
  {x_ops}
  {y_ops}
  memref.copy %x, %y : {x_type} to {y_type}
  return
}}"""
    return text, x, y


@settings(max_examples=150, deadline=None)
@given(_pair())
def test_copy_overlap_of_random_views_is_numpys(pair: tuple[str, np.ndarray, np.ndarray]) -> None:
    """Views of constant offsets and strides overlap exactly where their element numbers
    meet without being the same, element for element; the first shared element is the
    least such number."""
    text, x, y = pair
    note(text)
    found = copy_overlap(_copy(text))
    shared = np.intersect1d(x, y)
    if np.array_equal(x, y) or shared.size == 0:
        assert found is None
    else:
        assert found is not None
        assert found.element == tuple(int(k) for k in np.unravel_index(shared.min(), SHAPE))
