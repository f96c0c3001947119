"""A memref.copy between two views of one buffer that share an element, not being the same
view: MLIR leaves it undefined and the interpreter refuses it, while native code copied
in an order of its own and exited 0 (a copy of a[0:4] into a[3:7] gave a[3:7] = 100,
101, 102, 100: memmove's answer, not an error). Where dhir proves the overlap
(dhir.analysis.regions.copy_overlap), both backends refuse it at the copy before either
starts. Where it cannot decide before the run (an offset known at run time only), native
code checks the copy when it runs (dhir-copy-checks) and stops at it where the views share
an element, as the interpreter does."""

import shutil

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import dhir
from dhir.analysis.regions import copy_overlap
from dhir.dialects import func, memref
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string
from dhir.runner import check_runnable
from dhir.transforms.copy_checks import (
    DIM,
    OVERLAPS,
    VIEWS,
    CopyChecksPass,
    refuse_undecided_gpu_copies,
)

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


# --- views known at run time only: native code checks them when it copies ----------------

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

LOOP = """func.func @main(%a: memref<16xi32>, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    %s = memref.subview %a[%i] [4] [2] : memref<16xi32> to memref<4xi32, strided<[2], offset: ?>>
    %j = arith.addi %i, %k : index
    %t = memref.subview %a[%j] [4] [2] : memref<16xi32> to memref<4xi32, strided<[2], offset: ?>>
    memref.copy %s, %t : memref<4xi32, strided<[2], offset: ?>> to memref<4xi32, strided<[2], offset: ?>>
  }
  return
}
"""


def _both(text: str, *inputs: object, ranks: int) -> list[np.ndarray]:
    """The interpreter's results, after checking that native code gives the same bits."""
    want = dhir.run(parse_string(text, "p.mlir"), *inputs, backend="interp")
    got = dhir.run(parse_string(text, "p.mlir"), *inputs, backend="native", ranks=ranks)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g, w)
    return want


def _refused_by_both(text: str, *inputs: object, ranks: int, where: str) -> None:
    """Both backends stop at the copy, at `where` (line:col of p.mlir)."""
    for backend in ("interp", "native"):
        with pytest.raises(DhirError) as caught:
            dhir.run(parse_string(text, "p.mlir"), *inputs, backend=backend, ranks=ranks)
        message = str(caught.value)
        assert message.startswith(f"p.mlir:{where}: error: "), message
        assert "copies between views that overlap" in message, message


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_views_of_a_loop_variable_that_overlap_stop_native_code_at_the_copy(ranks: int) -> None:
    """Offsets i and i + 2 of stride-2 views share elements; native code copied them and
    exited 0 where the interpreter refuses the copy."""
    a = np.arange(16, dtype=np.int32)
    _refused_by_both(LOOP, a, np.int64(2), ranks=ranks, where="9:5")


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_views_of_a_loop_variable_that_interleave_or_are_apart_copy(ranks: int) -> None:
    """Offsets i and i + 1 of stride-2 views interleave (no element in both), i and i + 7
    are apart too, i and i + 0 are the same view: each copies as the interpreter does."""
    for k in (1, 7, 0):
        a = np.arange(16, dtype=np.int32)
        want = np.copy(a)
        for i in range(3):
            want[i + k : i + k + 8 : 2] = want[i : i + 8 : 2].copy()
        assert _both(LOOP, a, np.int64(k), ranks=ranks)[0].tolist() == want.tolist()


PARALLEL = """func.func @main(%a: memref<64xi32>, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %o = arith.muli %i, %c8 : index
    %s = memref.subview %a[%o] [4] [2] : memref<64xi32> to memref<4xi32, strided<[2], offset: ?>>
    %p = arith.addi %o, %k : index
    %t = memref.subview %a[%p] [4] [2] : memref<64xi32> to memref<4xi32, strided<[2], offset: ?>>
    memref.copy %s, %t : memref<4xi32, strided<[2], offset: ?>> to memref<4xi32, strided<[2], offset: ?>>
    scf.reduce
  }
  return
}
"""


@needs_llvm
def test_views_in_a_parallel_loop_are_checked_on_its_threads() -> None:
    """The check builds and runs in an OpenMP loop (each thread tells the runtime its own
    views): iterations whose views interleave copy, those whose views share elements stop
    at the copy."""
    a = np.arange(64, dtype=np.int32)
    _refused_by_both(PARALLEL, a, np.int64(2), ranks=1, where="11:5")
    _both(PARALLEL, a, np.int64(1), ranks=1)


ARGUMENT = """func.func @main(%a: memref<16xi32>, %n: index) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %x = memref.subview %a[%n] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: ?>>
      %y = memref.subview %a[8] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: 8>>
      memref.copy %x, %y : memref<4xi32, strided<[1], offset: ?>> to memref<4xi32, strided<[1], offset: 8>>
    }
  }
  return
}
"""


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_an_offset_from_an_argument_is_checked_when_the_copy_runs(ranks: int) -> None:
    """A task's copy of a[n:n+4] into a[8:12]: refused for n = 5 (a[8] in both), copied
    for n = 4 (apart) and n = 8 (the same view)."""
    a = np.arange(16, dtype=np.int32)
    _refused_by_both(ARGUMENT, a, np.int64(5), ranks=ranks, where="7:7")
    assert list(_both(ARGUMENT, a, np.int64(4), ranks=ranks)[0][8:12]) == [4, 5, 6, 7]
    _both(ARGUMENT, a, np.int64(8), ranks=ranks)


# One program for every pair of views: 2x3 subviews of %a and of its transpose, their
# offsets and strides read from %p when the copy runs.
DYNAMIC = """func.func @main(%a: memref<6x8xi32>, %p: memref<8xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %o0 = memref.load %p[%c0] : memref<8xindex>
  %o1 = memref.load %p[%c1] : memref<8xindex>
  %s0 = memref.load %p[%c2] : memref<8xindex>
  %s1 = memref.load %p[%c3] : memref<8xindex>
  %q0 = memref.load %p[%c4] : memref<8xindex>
  %q1 = memref.load %p[%c5] : memref<8xindex>
  %t0 = memref.load %p[%c6] : memref<8xindex>
  %t1 = memref.load %p[%c7] : memref<8xindex>
  %x = memref.subview %a[%o0, %o1] [2, 3] [%s0, %s1]
    : memref<6x8xi32> to memref<2x3xi32, strided<[?, ?], offset: ?>>
  %b = memref.transpose %a (d0, d1) -> (d1, d0)
    : memref<6x8xi32> to memref<8x6xi32, strided<[1, 8]>>
  %y = memref.subview %TARGET[%q0, %q1] [2, 3] [%t0, %t1]
    : SOURCE to memref<2x3xi32, strided<[?, ?], offset: ?>>
  memref.copy %x, %y : memref<2x3xi32, strided<[?, ?], offset: ?>>
    to memref<2x3xi32, strided<[?, ?], offset: ?>>
  return
}
"""


def _dynamic(transposed: bool) -> str:
    if transposed:
        return DYNAMIC.replace("%TARGET", "%b").replace(
            "SOURCE", "memref<8x6xi32, strided<[1, 8]>>"
        )
    return DYNAMIC.replace("%TARGET", "%a").replace("SOURCE", "memref<6x8xi32>")


@st.composite
def _placement(draw: st.DrawFn, extents: tuple[int, int]) -> list[int]:
    """Offsets and strides of a 2x3 view inside `extents`."""
    steps = [draw(st.integers(1, (extents[0] - 1))), draw(st.integers(1, (extents[1] - 1) // 2))]
    starts = [
        draw(st.integers(0, extents[0] - 1 - steps[0])),
        draw(st.integers(0, extents[1] - 1 - 2 * steps[1])),
    ]
    return [*starts, *steps]


@needs_llvm
@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.data())
def test_random_views_known_at_run_time_copy_or_stop_as_in_the_interpreter(
    transposed: bool, data: st.DataObject
) -> None:
    """Random 2x3 views of one 6x8 buffer (the target maybe of its transpose), their
    offsets and strides known at run time only: native code refuses exactly the copies
    the interpreter refuses, at the copy, and makes the same bits of the others."""
    source = data.draw(_placement((6, 8)))
    target = data.draw(_placement((8, 6) if transposed else (6, 8)))
    text = _dynamic(transposed)
    a = np.arange(48, dtype=np.int32).reshape(6, 8)
    p = np.array([*source, *target], dtype=np.int64)
    note(f"transposed={transposed} p={p.tolist()}")
    x = a[source[0] :: source[2], source[1] :: source[3]][:2, :3]
    base = a.T if transposed else a
    y = base[target[0] :: target[2], target[1] :: target[3]][:2, :3]
    overlaps = bool(np.intersect1d(x, y).size) and not np.array_equal(x, y)
    if overlaps:
        _refused_by_both(text, a, p, ranks=1, where="24:3")
    else:
        _both(text, a, p, ranks=1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_only_copies_the_analysis_leaves_open_are_checked_when_they_run(name: str) -> None:
    """dhir-copy-checks puts the runtime's check before a copy only where the analysis
    does not decide whether its views share an element (an offset known at run time)."""
    module = parse_string(_text(name))
    CopyChecksPass().apply(Context(), module)
    calls = [op for op in module.walk() if isinstance(op, func.CallOp)]
    open_ = name == "an offset known at run time only"
    callees = [call.callee.string_value() for call in calls]
    assert callees == [VIEWS, DIM, OVERLAPS] * open_


# Views of any strides (reinterpret_casts): strides that do not nest (2 and 3: the source's
# elements 0, 3, 6, 2, 5, 8) are checked element by element.
CASTS = """func.func @main(%a: memref<48xi32>, %p: memref<6xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %o = memref.load %p[%c0] : memref<6xindex>
  %s0 = memref.load %p[%c1] : memref<6xindex>
  %s1 = memref.load %p[%c2] : memref<6xindex>
  %q = memref.load %p[%c3] : memref<6xindex>
  %t0 = memref.load %p[%c4] : memref<6xindex>
  %t1 = memref.load %p[%c5] : memref<6xindex>
  %x = memref.reinterpret_cast %a to offset: [%o], sizes: [2, 3], strides: [%s0, %s1]
    : memref<48xi32> to memref<2x3xi32, strided<[?, ?], offset: ?>>
  %y = memref.reinterpret_cast %a to offset: [%q], sizes: [2, 3], strides: [%t0, %t1]
    : memref<48xi32> to memref<2x3xi32, strided<[?, ?], offset: ?>>
  memref.copy %x, %y : memref<2x3xi32, strided<[?, ?], offset: ?>>
    to memref<2x3xi32, strided<[?, ?], offset: ?>>
  return
}
"""


def _elements(offset: int, strides: tuple[int, int]) -> np.ndarray:
    return offset + strides[0] * np.arange(2)[:, None] + strides[1] * np.arange(3)[None, :]


@st.composite
def _cast(draw: st.DrawFn, distinct: bool) -> list[int]:
    """Offset and strides of a 2x3 view of 48 elements; with `distinct`, one whose
    elements are all different (a copy into it then writes each once)."""
    strides = (draw(st.integers(0, 12)), draw(st.integers(0, 8)))
    if distinct:
        assume(np.unique(_elements(0, strides)).size == 6)
    offset = draw(st.integers(0, 47 - strides[0] - 2 * strides[1]))
    return [offset, *strides]


@needs_llvm
@settings(max_examples=40, deadline=None)
@given(_cast(False), _cast(True))
def test_random_views_of_any_strides_copy_or_stop_as_in_the_interpreter(
    source: list[int], target: list[int]
) -> None:
    """Random 2x3 views of one buffer, of any strides, known at run time only: native code
    refuses exactly the copies the interpreter refuses and copies the others alike."""
    a = np.arange(48, dtype=np.int32)
    p = np.array([*source, *target], dtype=np.int64)
    note(f"p={p.tolist()}")
    x, y = (
        _elements(source[0], (source[1], source[2])),
        _elements(target[0], (target[1], target[2])),
    )
    same = source[0] == target[0] and source[1:] == target[1:]
    if np.intersect1d(x, y).size and not same:
        _refused_by_both(CASTS, a, p, ranks=1, where="18:3")
    else:
        _both(CASTS, a, p, ranks=1)


# --- elements the interpreter does not run, and unranked views -------------------------

TYPED = """func.func @main(%n: index) {{
  %a = memref.alloc() : memref<16x{t}>
  %x = memref.subview %a[%n] [4] [2] : memref<16x{t}> to memref<4x{t}, strided<[2], offset: ?>>
  %y = memref.subview %a[1] [4] [2] : memref<16x{t}> to memref<4x{t}, strided<[2], offset: 1>>
  memref.copy %x, %y : memref<4x{t}, strided<[2], offset: ?>> to memref<4x{t}, strided<[2], offset: 1>>
  memref.dealloc %a : memref<16x{t}>
  return
}}
"""


@needs_llvm
@pytest.mark.parametrize(
    "element", ["f80", "complex<f32>", "complex<f64>", "vector<3xf32>", "vector<2x3xi8>"]
)
def test_views_of_elements_of_any_layout_are_checked_by_their_size(element: str) -> None:
    """Elements whose layout dhir.ir.layout.element_bytes does not give (f80, complex
    numbers, vectors) were not checked: native code copied views that share elements and
    exited 0. Now they are checked at their size in memory (a vector<3xf32> takes 16 bytes,
    not 12): offsets 0 and 1 of stride-2 views interleave, 8 and 1 are apart (both copy),
    3 and 1 share three elements (refused at the copy)."""
    text = TYPED.format(t=element)
    for n in (0, 8):
        dhir.run(parse_string(text, "p.mlir"), np.int64(n), backend="native")
    with pytest.raises(DhirError, match=r"^p.mlir:5:3: error: .*copies between views that overlap"):
        dhir.run(parse_string(text, "p.mlir"), np.int64(3), backend="native")


def test_a_copy_of_elements_of_unknown_layout_is_refused_before_the_run() -> None:
    """A scalable vector's size is known only when the program runs: a copy of such
    elements that may overlap is refused, at the copy, rather than left unchecked."""
    text = TYPED.format(t="vector<[4]xf32>")
    module = parse_string(text, "p.mlir")
    with pytest.raises(DhirError, match=r"^p.mlir:5:3: error: .*dhir cannot check it when it runs"):
        CopyChecksPass().apply(Context(), module)


UNRANKED = """func.func @main(%a: memref<16xi32>, %n: index) {
  %x = memref.subview %a[%n] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: ?>>
  %y = memref.subview %a[8] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: 8>>
  %u = memref.cast %x : memref<4xi32, strided<[1], offset: ?>> to memref<*xi32>
  %v = memref.cast %y : memref<4xi32, strided<[1], offset: 8>> to memref<*xi32>
  memref.copy %u, %v : memref<*xi32> to memref<*xi32>
  return
}
"""


@needs_llvm
def test_a_copy_of_unranked_casts_is_checked_through_the_casts() -> None:
    """A copy of unranked memrefs was not checked (native code copied a[5:9] into a[8:12],
    memmove's answer, exit 0); it is checked with the ranked views they are casts of."""
    a = np.arange(16, dtype=np.int32)
    _refused_by_both(UNRANKED, a, np.int64(5), ranks=1, where="6:3")
    assert list(_both(UNRANKED, a, np.int64(4), ranks=1)[0][8:12]) == [4, 5, 6, 7]


# --- GPU tasks: no check runs there, so what dhir cannot decide is refused before --------

GPU_TASK = """func.func @main(%a: memref<16xi64>, %b: memref<16xi64>, %n: index) {{
  dhir.schedule %a, %b {{
    %gpu = dhir.target {{arch = "sm_90"}}
    %t = dhir.task %gpu, %a, %b {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      {copy_at_host}
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
          threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {{
        {copy_in_kernel}
        gpu.terminator
      }}
    }}
  }}
  return
}}
"""

GPU_COPY = """%x = memref.subview %a[{at}] [4] [1] : memref<16xi64> to memref<4xi64, strided<[1], offset: ?>>
        %y = memref.subview %{target}[8] [4] [1] : memref<16xi64> to memref<4xi64, strided<[1], offset: 8>>
        memref.copy %x, %y : memref<4xi64, strided<[1], offset: ?>> to memref<4xi64, strided<[1], offset: 8>>"""


def _gpu_task(where: str, at: str = "%n", target: str = "a") -> str:
    copy = GPU_COPY.format(at=at, target=target)
    return GPU_TASK.format(
        copy_at_host=copy if where == "host" else "",
        copy_in_kernel=copy if where == "kernel" else "",
    )


@pytest.mark.parametrize(("where", "line"), [("kernel", "12:9"), ("host", "9:9")])
def test_a_gpu_tasks_copy_dhir_cannot_decide_is_refused_before_the_run(
    where: str, line: str
) -> None:
    """A kernel cannot call the runtime's check, and a GPU task's host part copies device
    memory: native code ran such a copy unchecked (on a GPU, memmove's answer and exit 0
    where the interpreter refuses a[5:9] into a[8:12]). It is refused at the copy, before
    the build, whatever %n is; the interpreter still checks it when it runs."""
    text = _gpu_task(where)
    inputs = np.arange(16, dtype=np.int64), np.zeros(16, np.int64), np.int64(4)
    with pytest.raises(
        DhirError,
        match=rf"^p.mlir:{line}: error: this memref.copy runs in a GPU task, where dhir cannot check",
    ):
        dhir.run(parse_string(text, "p.mlir"), *inputs, backend="native")
    got = dhir.run(parse_string(text, "p.mlir"), *inputs, backend="interp")
    assert list(got[0][8:12]) == [4, 5, 6, 7]
    with pytest.raises(
        DhirError, match=rf"^p.mlir:{line}: error: 'memref.copy' copies between views that overlap"
    ):
        dhir.run(parse_string(text, "p.mlir"), inputs[0], inputs[1], np.int64(5), backend="interp")


@pytest.mark.parametrize("where", ["kernel", "host"])
@pytest.mark.parametrize(("at", "target"), [("%n", "b"), ("%c1", "a")])
def test_a_gpu_tasks_copy_dhir_decides_is_let_through(where: str, at: str, target: str) -> None:
    """Views of two of the schedule's buffers (which must not alias), and views of one
    buffer at offsets that are numbers, are decided before the run: not refused."""
    module = parse_string(_gpu_task(where, at, target), "p.mlir")
    refuse_undecided_gpu_copies(module)


GPU_MEMCPY = """%c5 = arith.constant 5 : index
      %x = memref.subview %a[{at}] [4] [1] : memref<16xi64> to memref<4xi64, strided<[1], offset: ?>>
      %y = memref.subview %{target}[8] [4] [1] : memref<16xi64> to memref<4xi64, strided<[1], offset: 8>>
      gpu.memcpy %y, %x : memref<4xi64, strided<[1], offset: 8>>, memref<4xi64, strided<[1], offset: ?>>"""


def _gpu_memcpy(at: str, target: str = "a") -> ModuleOp:
    copy = GPU_MEMCPY.format(at=at, target=target)
    return parse_string(GPU_TASK.format(copy_at_host=copy, copy_in_kernel=""), "p.mlir")


def test_a_gpu_memcpy_between_views_that_overlap_is_refused_by_both_backends() -> None:
    """gpu.memcpy a[5:9] into a[8:12]: the checks before the run (both backends) looked at
    memref.copy only, and native code handed the GPU runtime a copy MLIR leaves undefined."""
    with pytest.raises(
        DhirError,
        match=r"^p.mlir:10:7: error: this gpu.memcpy copies between views that overlap \(%a\[8\]",
    ):
        check_runnable(_gpu_memcpy("%c5"), "main")


def test_a_gpu_memcpy_dhir_cannot_decide_is_refused_before_the_build() -> None:
    """At an offset known at run time only: dhir-copy-checks checks only memref.copy on
    the host, so native code ran it unchecked (the interpreter refuses an overlap)."""
    with pytest.raises(
        DhirError, match=r"^p.mlir:10:7: error: this gpu.memcpy copies between views whose overlap"
    ):
        refuse_undecided_gpu_copies(_gpu_memcpy("%n"))


@pytest.mark.parametrize(("at", "target"), [("%n", "b"), ("%c1", "a")])
def test_a_gpu_memcpy_dhir_decides_is_let_through(at: str, target: str) -> None:
    module = _gpu_memcpy(at, target)
    check_runnable(module, "main")
    refuse_undecided_gpu_copies(module)


HOST_MEMCPY = """func.func @main(%a: memref<16xi64>, %b: memref<16xi64>, %n: index) {
  %x = memref.subview %a[%n] [4] [1] : memref<16xi64> to memref<4xi64, strided<[1], offset: ?>>
  %y = memref.subview %b[8] [4] [1] : memref<16xi64> to memref<4xi64, strided<[1], offset: 8>>
  gpu.memcpy %y, %x : memref<4xi64, strided<[1], offset: 8>>, memref<4xi64, strided<[1], offset: ?>>
  return
}
"""


@pytest.mark.parametrize(
    ("entry", "caller"), [("main", ""), ("other", ""), ("main", "func.call @main")]
)
def test_a_gpu_memcpy_between_two_arguments_is_apart_only_in_an_entry_no_one_calls(
    entry: str, caller: str
) -> None:
    """The harness gives each entry argument a buffer of its own; another function's
    arguments, or an entry the program also calls, may be views of one buffer."""
    calling = (
        "func.func @f(%a: memref<16xi64>, %n: index) {\n"
        f"  {caller}(%a, %a, %n) : (memref<16xi64>, memref<16xi64>, index) -> ()\n"
        "  return\n}\n"
        if caller
        else ""
    )
    module = parse_string(HOST_MEMCPY + calling, "p.mlir")
    if entry == "main" and not caller:
        refuse_undecided_gpu_copies(module, entry)
        return
    with pytest.raises(DhirError, match=r"^p.mlir:4:3: error: this gpu.memcpy copies between"):
        refuse_undecided_gpu_copies(module, entry)


# --- views of bytes: a memref.view is a buffer of its own -------------------------------

BYTES = """func.func @main(%raw: memref<32xi8>, %p: memref<2xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.load %p[%c0] : memref<2xindex>
  %o = memref.load %p[%c1] : memref<2xindex>
  %u = memref.view %raw[%c0][] : memref<32xi8> to memref<16xi8>
  %w = memref.view %raw[%s][] : memref<32xi8> to memref<16xi8>
  %x = memref.reinterpret_cast %u to offset: [4], sizes: [4], strides: [1]
    : memref<16xi8> to memref<4xi8, strided<[1], offset: 4>>
  %y = memref.reinterpret_cast %w to offset: [%o], sizes: [4], strides: [1]
    : memref<16xi8> to memref<4xi8, strided<[1], offset: ?>>
  memref.copy %x, %y : memref<4xi8, strided<[1], offset: 4>> to memref<4xi8, strided<[1], offset: ?>>
  return
}
"""


@needs_llvm
def test_a_reinterpret_cast_of_a_view_of_bytes_starts_at_the_views_first_byte() -> None:
    """The interpreter took a reinterpret_cast of an i8 memref.view of i8 bytes from the
    bytes' first byte, not the view's: the copy of bytes 4-7 into offset 6 of the view at
    byte 1 (bytes 7-10, overlapping) ran, and offset 8 (bytes 9-12, apart) wrote bytes
    8-11, where native code refuses the first and writes bytes 9-12."""
    raw = np.arange(32, dtype=np.int8)
    _refused_by_both(BYTES, raw, np.array([1, 6], np.int64), ranks=1, where="12:3")
    got = _both(BYTES, raw, np.array([1, 8], np.int64), ranks=1)[0]
    assert list(got[8:14]) == [8, 4, 5, 6, 7, 13]
