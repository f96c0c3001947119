"""The layouts `memref.expand_shape` and `memref.collapse_shape` give, as MLIR 22 computes
them: strides in elements, None where only the run time knows one (and for the offset)."""

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, NoneAttr, StridedLayoutAttr
from xdsl.utils.exceptions import VerifyException

Layout = tuple[list[int | None], int | None]


def strides_and_offset(memref: MemRefType) -> Layout:
    """A memref type's strides and offset (an identity layout's are row-major and 0)."""
    strides = memref.get_strides()
    if strides is None:  # an affine map: not a strided layout
        raise VerifyException(f"{memref} has no strided layout, which a reshape needs")
    layout = memref.layout
    offset = layout.get_offset() if isinstance(layout, StridedLayoutAttr) else 0
    return list(strides), offset


def _times(a: int | None, b: int) -> int | None:
    return None if a is None or b == DYNAMIC_INDEX else a * b


def expanded_layout(source: MemRefType, groups: list[list[int]], shape: Sequence[int]) -> Layout:
    """The layout of `source` expanded to `shape`: in each group, the innermost dimension
    keeps the source dimension's stride, and each other one is the next one's times its
    size."""
    strides, offset = strides_and_offset(source)
    out: list[int | None] = [None] * len(shape)
    for dim, group in enumerate(groups):
        stride = strides[dim]
        for d in reversed(group):
            out[d] = stride
            stride = _times(stride, shape[d])
    if isinstance(source.layout, NoneAttr):
        return list(MemRefType.strides_for_shape(shape)), 0
    return out, offset


def collapsed_layout(source: MemRefType, groups: list[list[int]]) -> Layout:
    """The layout of `source` collapsed by `groups`: each group takes the stride of its
    innermost dimension not of size 1 (unknown if that size is); the dimensions of a
    group must be contiguous where their strides are known."""
    shape = source.get_shape()
    strides, offset = strides_and_offset(source)
    out: list[int | None] = []
    for group in groups:
        if not group:
            continue
        kept = list(group)
        while len(kept) > 1 and shape[kept[-1]] == 1:
            kept.pop()
        static = shape[kept[-1]] != DYNAMIC_INDEX or len(kept) == 1
        out.append(strides[kept[-1]] if static else None)
        _check_contiguous(shape, strides, group, out[-1])
    if isinstance(source.layout, NoneAttr):
        return list(MemRefType.strides_for_shape([_size(shape, g) for g in groups])), 0
    return out, offset


def _check_contiguous(
    shape: Sequence[int], strides: Sequence[int | None], group: list[int], inner: int | None
) -> None:
    stride = inner
    for d in reversed(group[1:]):
        stride = _times(stride, shape[d])
        outer = strides[d - 1]
        if shape[d - 1] != 1 and None not in (stride, outer) and stride != outer:
            raise VerifyException(
                f"dimensions {group} are not contiguous in the source (stride {outer} of "
                f"dimension {d - 1}, not {stride}); collapse only contiguous dimensions"
            )


def _size(shape: Sequence[int], group: list[int]) -> int:
    size = 1
    for d in group:
        if shape[d] == DYNAMIC_INDEX:
            return DYNAMIC_INDEX
        size *= shape[d]
    return size
