"""Schedule operands that are contiguous views (`strided<[4, 1], offset: ?>`: the
identity's strides at any offset) travel between ranks like whole buffers, from the
view's first element; views of other strides stay refused. Native on 2 and 3 ranks
against the interpreter, with a run-time offset that is not 0 and messages both ways."""

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr, i32
from xdsl.passes import PassPipeline

import dhir
from dhir.api import run_pipeline
from dhir.dialects.layouts import is_contiguous_layout
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import PlacePass

# @f's tasks hand values on between ranks 1, 0 and LAST, and each reads what the one before
# wrote; @main passes @f a view of %a at the run-time offset %o.
PROGRAM = """
func.func private @f(%x: VIEW) {
  dhir.schedule %x {
    %t0 = dhir.task target = "cpu", %x attributes {dhir.rank = 1 : i64} {
      %k0 = arith.constant 0 : index
      %k1 = arith.constant 1 : index
      %k3 = arith.constant 3 : index
      %v = memref.load %x[FIRST] : VIEW
      %w = arith.addi %v, %v : i32
      memref.store %w, %x[SECOND] : VIEW
    }
    %t1 = dhir.task target = "cpu", %x attributes {dhir.rank = 0 : i64} {
      %k0 = arith.constant 0 : index
      %k1 = arith.constant 1 : index
      %k3 = arith.constant 3 : index
      %v = memref.load %x[SECOND] : VIEW
      %w = arith.muli %v, %v : i32
      memref.store %w, %x[THIRD] : VIEW
    }
    %t2 = dhir.task target = "cpu", %x attributes {dhir.rank = LAST : i64} {
      %k0 = arith.constant 0 : index
      %k1 = arith.constant 1 : index
      %k3 = arith.constant 3 : index
      %v = memref.load %x[THIRD] : VIEW
      %w = arith.addi %v, %v : i32
      memref.store %w, %x[FIRST] : VIEW
    }
  }
  func.return
}
func.func @main(%a: BUFFER, %o: index) {
  %s = memref.subview %a[OFFSETS] [SIZES] [STEPS] : BUFFER to VIEW
  func.call @f(%s) : (VIEW) -> ()
  func.return
}
"""

CASES = {
    "rank-1": dict(
        VIEW="memref<4xi32, strided<[1], offset: ?>>",
        BUFFER="memref<10xi32>",
        OFFSETS="%o",
        SIZES="4",
        STEPS="1",
        FIRST="%k0",
        SECOND="%k3",
        THIRD="%k1",
    ),
    "rank-2": dict(
        VIEW="memref<2x4xi32, strided<[4, 1], offset: ?>>",
        BUFFER="memref<4x4xi32>",
        OFFSETS="%o, 0",
        SIZES="2, 4",
        STEPS="1, 1",
        FIRST="%k0, %k1",
        SECOND="%k1, %k3",
        THIRD="%k0, %k3",
    ),
    # one row of 4 of rows of 8: its row stride is never stepped along
    "one-row": dict(
        VIEW="memref<1x4xi32, strided<[8, 1], offset: ?>>",
        BUFFER="memref<4x8xi32>",
        OFFSETS="%o, 2",
        SIZES="1, 4",
        STEPS="1, 1",
        FIRST="%k0, %k1",
        SECOND="%k0, %k3",
        THIRD="%k0, %k0",
    ),
    # not contiguous: every other element, and rows of 4 of 8
    "every-other": dict(
        VIEW="memref<4xi32, strided<[2], offset: ?>>",
        BUFFER="memref<10xi32>",
        OFFSETS="%o",
        SIZES="4",
        STEPS="2",
        FIRST="%k0",
        SECOND="%k3",
        THIRD="%k1",
    ),
    "part-rows": dict(
        VIEW="memref<2x4xi32, strided<[8, 1], offset: ?>>",
        BUFFER="memref<4x8xi32>",
        OFFSETS="%o, 0",
        SIZES="2, 4",
        STEPS="1, 1",
        FIRST="%k0, %k1",
        SECOND="%k1, %k3",
        THIRD="%k0, %k3",
    ),
}


def _program(name: str, ranks: int) -> str:
    text = PROGRAM.replace("LAST", str(ranks - 1))
    for key, value in CASES[name].items():
        text = text.replace(key, value)
    return text


def _inputs(name: str) -> list[np.ndarray]:
    shape = {"rank-1": (10,), "rank-2": (4, 4), "one-row": (4, 8)}[name]
    return [np.arange(1, 33, dtype=np.int32)[: np.prod(shape)].reshape(shape), np.int64(1)]


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("name", ["rank-1", "rank-2", "one-row"])
def test_contiguous_views_travel_from_their_offset(name: str, ranks: int) -> None:
    text, inputs = _program(name, ranks), _inputs(name)
    oracle = dhir.run(text, *inputs, backend="interp")
    assert not np.array_equal(oracle[0], inputs[0])  # the tasks wrote into the view
    got = dhir.run(text, *inputs, backend="native", ranks=ranks, timeout=120)
    for g, w in zip(got, oracle, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g, w)


@pytest.mark.parametrize("name", ["every-other", "part-rows"])
def test_strided_views_stay_refused(name: str) -> None:
    module = dhir.parse_string(_program(name, 2))
    passes = (PlacePass(2, "round-robin"), LowerToMPIPass(2))
    with pytest.raises(Exception, match="has a strided layout; the native backend sends"):
        run_pipeline(module, PassPipeline(passes))


@pytest.mark.parametrize(
    ("strides", "offset", "contiguous"),
    [
        ([4, 1], None, True),
        ([4, 1], 3, True),
        ([4, 1], 0, True),
        ([8, 1], None, False),
        ([4, 2], 0, False),
        ([None, 1], 0, False),
        ([1, 2], 0, False),
        ([5, 1], 0, False),
    ],
)
def test_contiguous_layouts(
    strides: list[int | None], offset: int | None, contiguous: bool
) -> None:
    type_ = MemRefType(i32, [2, 4], StridedLayoutAttr(strides, offset))
    assert is_contiguous_layout(type_) is contiguous
    assert is_contiguous_layout(MemRefType(i32, [2, 4]))


@pytest.mark.parametrize(
    ("shape", "strides", "contiguous"),
    [
        ([1, 4], [8, 1], True),
        ([1, 4], [None, 1], True),
        ([2, 1, 4], [4, 99, 1], True),
        ([1, 4], [8, 2], False),
        ([2, 4], [8, 1], False),
    ],
)
def test_a_dimension_of_size_1_may_have_any_stride(
    shape: list[int], strides: list[int | None], contiguous: bool
) -> None:
    type_ = MemRefType(i32, shape, StridedLayoutAttr(strides, None))
    assert is_contiguous_layout(type_) is contiguous
