"""The layouts of views (`memref.expand_shape`, `collapse_shape`, `subview`) as MLIR 22
computes them: strides in elements, None where only the run time knows one (and for the
offset)."""

from collections import Counter
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
)
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineMap
from xdsl.utils.exceptions import VerifyException

Layout = tuple[list[int | None], int | None]


def strides_and_offset(memref: MemRefType) -> Layout:
    """A memref type's strides and offset (an identity layout's are row-major and 0), as
    MLIR 22 reads them, from a layout map too; refused for a map that has none."""
    layout = strided_layout(memref)
    if layout is None:
        raise VerifyException(
            f"{memref} has no strided layout (MLIR reads no strides and offset from its "
            "map), which this view needs"
        )
    return layout


def strided_layout(memref: MemRefType) -> Layout | None:
    """A memref type's strides and offset as MLIR 22 reads them, also from a layout map
    of one sum of terms (`(d0, d1)[s0] -> (d0 * 4 + d1 + s0)`: a symbol's term makes the
    offset dynamic) or the identity map; None for a map MLIR takes as no strided layout
    (a `mod`, a division, several results)."""
    layout = memref.layout
    if is_identity_layout(memref):
        return identity_strides(memref.get_shape()), 0
    if isinstance(layout, AffineMapAttr):
        return _map_layout(layout.data)
    assert isinstance(layout, StridedLayoutAttr)
    return list(layout.get_strides()), layout.get_offset()


def identity_strides(shape: Sequence[int]) -> list[int | None]:
    """The row-major strides MLIR 22 reads from an identity layout: each dimension's is
    the product of the sizes inside it, unknown (None) outside a dynamic size or a size 0
    (`memref<3x0xf64>` has strides `[?, 1]`, so its transpose is `strided<[1, ?]>`)."""
    strides: list[int | None] = []
    stride: int | None = 1
    for size in reversed(shape):
        strides.append(stride)
        stride = None if stride is None or size == DYNAMIC_INDEX or size == 0 else stride * size
    return strides[::-1]


def is_identity_layout(memref: MemRefType) -> bool:
    """No layout, or the identity map (MLIR drops it: `memref<4x4xf32, affine_map<(d0,
    d1) -> (d0, d1)>>` is `memref<4x4xf32>`)."""
    layout = memref.layout
    if isinstance(layout, AffineMapAttr):
        rank = len(memref.get_shape())
        return layout.data == AffineMap.identity(rank)
    return isinstance(layout, NoneAttr)


def is_contiguous_layout(memref: MemRefType) -> bool:
    """The identity layout, or a `strided<...>` one whose strides are the identity's, all
    static, at any offset (`memref<4xi32, strided<[1], offset: ?>>`): the elements lie
    row-major in one run from the view's offset, as in a memref of the identity layout.
    A dimension of size 1 is never stepped along, so its stride may be any (one row of 4
    of rows of 8, `memref<1x4xi32, strided<[8, 1]>>`, is one run)."""
    if is_identity_layout(memref):
        return True
    layout = memref.layout
    if not isinstance(layout, StridedLayoutAttr):
        return False
    shape = memref.get_shape()
    pairs = zip(layout.get_strides(), identity_strides(shape), shape, strict=True)
    return all(size == 1 or (stride is not None and stride == row) for stride, row, size in pairs)


def _map_layout(map: AffineMap) -> Layout | None:
    if len(map.results) != 1:
        return None
    expr = map.results[0]
    linear = (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul)
    if any(isinstance(e, AffineBinaryOpExpr) and e.kind not in linear for e in expr.dfs()):
        return None
    # xDSL reads no product of two dimensions or symbols, so the map is linear in each.
    dims, symbols = [0] * map.num_dims, [0] * map.num_symbols
    offset = expr.eval(dims, symbols)
    strides: list[int | None] = []
    for d in range(map.num_dims):
        unit = [int(d == i) for i in range(map.num_dims)]
        strides.append(expr.eval(unit, symbols) - offset)
    for s in range(map.num_symbols):
        if expr.eval(dims, [int(s == i) for i in range(map.num_symbols)]) != offset:
            return strides, None
    return strides, offset


def _times(a: int | None, b: int) -> int | None:
    return None if a is None or b == DYNAMIC_INDEX else a * b


def expanded_layout(source: MemRefType, groups: list[list[int]], shape: Sequence[int]) -> Layout:
    """The layout of `source` expanded to `shape`: in each group, the innermost dimension
    keeps the source dimension's stride, and each other one is the next one's times its
    size."""
    strides, offset = strides_and_offset(source)
    # A rank-0 source has no groups: MLIR 22 gives its dimensions of size 1 stride 1.
    out: list[int | None] = [1] * len(shape) if not groups else [None] * len(shape)
    for dim, group in enumerate(groups):
        stride = strides[dim]
        for d in reversed(group):
            out[d] = stride
            stride = _times(stride, shape[d])
    if is_identity_layout(source):
        return identity_strides(shape), 0
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
    if is_identity_layout(source):
        return identity_strides([_size(shape, g) for g in groups]), 0
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


def subview_layout(
    source: MemRefType, offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> tuple[list[int], list[int | None], int | None]:
    """The shape, strides and offset of a subview of `source` (DYNAMIC_INDEX in the
    static lists: given at run time), before dropping dimensions. As in MLIR 22, a
    product with a static 0 is 0 even when the other factor is known only at run time."""
    old, offset = strides_and_offset(source)
    new = [_saturated_times(s, None if t == DYNAMIC_INDEX else t) for s, t in zip(old, strides)]
    for stride, start in zip(old, offsets):
        term = _saturated_times(stride, None if start == DYNAMIC_INDEX else start)
        offset = None if offset is None or term is None else offset + term
    return list(sizes), new, offset


def _saturated_times(a: int | None, b: int | None) -> int | None:
    if a == 0 or b == 0:
        return 0
    return None if a is None or b is None else a * b


def reduces_to(
    expected: tuple[list[int], list[int | None], int | None],
    got: MemRefType,
    sizes: Sequence[int],
) -> bool:
    """Whether `got` is the layout `expected` of a subview with static `sizes`
    (DYNAMIC_INDEX: given at run time), possibly with dimensions of size 1 dropped, as
    MLIR 22 checks it: the dropped dimensions are those `dropped_dims` finds."""
    shape, strides, offset = expected
    got_strides, got_offset = strides_and_offset(got)
    got_shape = list(got.get_shape())
    if got_offset != offset or _shape_reduction(shape, got_shape) is None:
        return False
    dropped = dropped_dims(strides, got_strides, sizes)
    if dropped is None:
        return False
    return [strides[d] for d in range(len(shape)) if d not in dropped] == got_strides


def _shape_reduction(shape: Sequence[int], reduced: Sequence[int]) -> set[int] | None:
    """The dimensions of size 1 dropped from `shape` to give `reduced`, matched from the
    outermost (MLIR's computeRankReductionMask); None when `reduced` is no such shape."""
    dropped: set[int] = set()
    kept = 0
    for d, size in enumerate(shape):
        if kept < len(reduced) and size == reduced[kept]:
            kept += 1
        elif size == 1:
            dropped.add(d)
        else:
            return None
    return dropped if kept == len(reduced) else None


def dropped_dims(
    strides: Sequence[int | None], reduced: Sequence[int | None], sizes: Sequence[int]
) -> set[int] | None:
    """The dimensions MLIR 22 takes a rank-reducing subview with static `sizes` to drop,
    given the strides of the type it reduces and those of the reduced type (its
    computeMemRefRankReductionMask): the dimensions of static size 1, when that is the
    number to drop; else, from the outermost, those whose stride occurs more often in
    `strides` (counting the ones not yet dropped) than in `reduced`. None where that does
    not drop the right number."""
    ones = {d for d, size in enumerate(sizes) if size == 1}
    if len(strides) == len(reduced):
        return set()
    if len(ones) + len(reduced) == len(strides):
        return ones
    left = Counter(strides)
    wanted = Counter(reduced)
    dropped: set[int] = set()
    for d in sorted(ones):
        stride = strides[d]
        if left[stride] > wanted[stride]:
            left[stride] -= 1
            dropped.add(d)
        elif left[stride] < wanted[stride]:
            return None
    return dropped if len(dropped) + len(reduced) == len(strides) else None


def out_of_bounds(
    shape: Sequence[int], offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> str | None:
    """Why a subview with these static values (DYNAMIC_INDEX: unknown) leaves `shape`, as
    MLIR 22 checks it (an offset must be within the dimension even for an empty slice)."""
    for d, (dim, start, size, step) in enumerate(zip(shape, offsets, sizes, strides)):
        if DYNAMIC_INDEX in (dim, start):
            continue
        if not 0 <= start < dim:
            return f"offset {start} is outside dimension {d} (size {dim})"
        if DYNAMIC_INDEX in (size, step) or size <= 0:
            continue
        last = start + (size - 1) * step
        if last >= dim:
            return f"the slice of dimension {d} reaches index {last}, outside its size {dim}"
    return None
