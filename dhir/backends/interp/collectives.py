"""What `gpu.all_reduce`, `gpu.subgroup_reduce` and `gpu.shuffle` give each thread, once
every thread that takes part has brought its value (dhir.backends.interp.phases gathers
them), combined in the order MLIR 22's NVVM lowering combines them on the GPU, so that
floats round as native code rounds them.

A subgroup is a warp of 32 lanes: every chip dhir targets is an NVIDIA sm_* chip, whose
warps have 32 threads, and MLIR 22's lowerings of these ops shuffle across 32 lanes.
The lanes of a block are its threads in order, x fastest: lane `k` of subgroup `w` is
thread `32 * w + k` of that order."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from xdsl.dialects.builtin import AnyFloat, VectorType
from xdsl.ir import Attribute, Operation

from dhir.backends.interp.core import element, fail, put
from dhir.backends.interp.scalars import combine, lane_type
from dhir.dialects import gpu

SUBGROUP_SIZE = 32

# gpu.all_reduce's operations, as the combining kind of arith.atomic_rmw (scalars.combine)
# for floats and for integers.
_KINDS: dict[str, tuple[str | None, str | None]] = {
    "add": ("addf", "addi"), "mul": ("mulf", "muli"),
    "minui": (None, "minu"), "minsi": (None, "mins"), "maxui": (None, "maxu"),
    "maxsi": (None, "maxs"), "and": (None, "andi"), "or": (None, "ori"), "xor": (None, "xori"),
    "minnumf": ("minnumf", None), "maxnumf": ("maxnumf", None),
    "minimumf": ("minimumf", None), "maximumf": ("maximumf", None),
}  # fmt: skip

Combine = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Meeting:
    """What a thread brings to a collective op: its value, and, for the ops of a
    subgroup, how many lanes from lane 0 must meet there (`lanes`, 0 for a block-wide
    op); `settle` gives each thread that met there its result, in the order given."""

    offer: Any
    lanes: int
    settle: Callable[[Sequence[tuple[int, Any]]], list[Any]]


def combiner(op: Operation, kind: str, type_: Attribute) -> Combine:
    """`a kind b` for values of `type_` (a vector lane by lane), or the op refused where
    the kind does not apply to the type (the verifier of MLIR 22 refuses it too)."""
    lane = lane_type(type_)
    floats, ints = _KINDS[kind]
    name = floats if isinstance(lane, AnyFloat) else ints
    if name is None:
        fail(op, f"cannot combine values of type {lane} with '{kind}'")

    def scalar(a: Any, b: Any) -> Any:
        return combine(op, name, a, b, lane)

    if not isinstance(type_, VectorType):
        return scalar

    def lanewise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.array(a)
        for index in np.ndindex(*out.shape):
            x, y = cast(np.generic, a[index]), cast(np.generic, b[index])
            put(out, index, scalar(element(x), element(y)))
        out.flags.writeable = False
        return out

    return lanewise


def butterfly(values: list[Any], offsets: Sequence[int], add: Combine) -> list[Any]:
    """Each lane's value after an xor shuffle at each of `offsets` in turn, combined as
    own value first: a lane whose partner lies beyond the lanes there are keeps its
    value (the shuffle's `valid` is false)."""
    for offset in offsets:
        values = [
            add(v, values[k ^ offset]) if k ^ offset < len(values) else v
            for k, v in enumerate(values)
        ]
    return values


def block_reduce(values: list[Any], add: Combine) -> Any:
    """gpu.all_reduce as MLIR 22 lowers it (convert-gpu-to-nvvm): each subgroup's lanes
    combined by a butterfly (offsets 1, 2, 4, 8, 16); lane 0 of each puts its value in
    workgroup memory; after a barrier, the first lanes of subgroup 0 combine those the
    same way; every thread reads lane 0's value."""
    offsets = (1, 2, 4, 8, 16)
    firsts = [
        butterfly(values[start : start + SUBGROUP_SIZE], offsets, add)[0]
        for start in range(0, len(values), SUBGROUP_SIZE)
    ]
    return butterfly(firsts, offsets, add)[0]


def all_reduce(add: Combine) -> Callable[[Sequence[tuple[int, Any]]], list[Any]]:
    def settle(offers: Sequence[tuple[int, Any]]) -> list[Any]:
        total = block_reduce([value for _, value in offers], add)
        return [total] * len(offers)

    return settle


def subgroup_reduce(
    op: gpu.SubgroupReduceOp, add: Combine
) -> Callable[[Sequence[tuple[int, Any]]], list[Any]]:
    """As MLIR 22 expands it to shuffles (its only lowering to NVVM for most types,
    `gpu-lower-subgroup-reduce` with expand-to-shuffles): xor shuffles of width 32 at
    offsets `stride`, `2 * stride`, ... below `stride * size`, each lane combining its
    own value with its partner's."""
    stride = op.cluster_stride.value.data
    size = op.cluster_size.value.data if op.cluster_size is not None else SUBGROUP_SIZE
    offsets = [stride << step for step in range(size.bit_length() - 1)]

    def settle(offers: Sequence[tuple[int, Any]]) -> list[Any]:
        return butterfly([value for _, value in offers], offsets, add)

    return settle


def shuffle(op: gpu.ShuffleOp) -> Callable[[Sequence[tuple[int, Any]]], list[Any]]:
    """Each lane's (value, valid) as MLIR 22's NVVM lowering computes it: a
    `shfl.sync` of the lanes below `width`, whose source lane out of range gives
    `valid` false and the lane's own value (MLIR's definition leaves that value
    unspecified)."""
    mode = cast(gpu.ShuffleModeAttr, op.mode).data

    def settle(offers: Sequence[tuple[int, Any]]) -> list[Any]:
        widths = {width for _, (_, _, width) in offers}
        if len(widths) != 1:
            fail(op, f"has widths {sorted(widths)} in one subgroup: give every lane the same")
        (width,) = widths
        for lane, _ in offers:
            if lane >= width:
                fail(
                    op,
                    f"runs in lane {lane} with width {width}: MLIR 22's lowering leaves the "
                    "lanes from the width out of the shuffle, which PTX leaves undefined for "
                    "a lane that runs it; run it in the lanes below the width only",
                )
        values = {lane: value for lane, (value, _, _) in offers}
        return [_shuffled(mode, values, lane, offset) for lane, (_, offset, _) in offers]

    return settle


def shuffle_width(op: gpu.ShuffleOp, width: int, offset: int) -> None:
    """Refuse what MLIR 22's lowering leaves undefined or computes otherwise than the
    op's definition."""
    if not 1 <= width <= SUBGROUP_SIZE:
        fail(
            op,
            f"has width {width}; a subgroup has {SUBGROUP_SIZE} lanes: give a width from 1 to "
            f"{SUBGROUP_SIZE} (MLIR 22's lowering leaves others undefined)",
        )
    if not 0 <= offset < SUBGROUP_SIZE:
        fail(
            op,
            f"has offset {offset}; give one from 0 to {SUBGROUP_SIZE - 1} (MLIR 22's "
            "lowering keeps only its low 5 bits, where the op's definition takes it whole)",
        )


def _shuffled(
    mode: gpu.ShuffleMode, values: dict[int, Any], lane: int, offset: int
) -> tuple[Any, int]:
    width = len(values)
    source = {
        gpu.ShuffleMode.XOR: lane ^ offset,
        gpu.ShuffleMode.DOWN: lane + offset,
        gpu.ShuffleMode.UP: lane - offset,
        gpu.ShuffleMode.IDX: offset,
    }[mode]
    if 0 <= source < width:
        return values[source], 1
    return values[lane], 0
