"""How a shard dialect sharding lays a dimension out over devices, where they do not
divide it: MLIR's default layout, and a padded one (dhir.toolchain.shard_padding) in
which each device's shard is a block of the longest shard's length, real elements first.
"""

from dataclasses import dataclass
from itertools import accumulate


@dataclass(frozen=True)
class Padding:
    """A dimension of `sum(counts)` elements held as `len(counts)` blocks of `block`
    elements, block `b` holding `counts[b]` real ones first."""

    counts: tuple[int, ...]

    @property
    def block(self) -> int:
        return max(1, *self.counts)

    @property
    def size(self) -> int:
        return self.block * len(self.counts)

    def blocks(self) -> list[tuple[int, int, int]]:
        """Per block, where its real elements start in the real dimension and in the
        padded one, and how many there are."""
        starts = [0, *accumulate(self.counts)]
        return [(starts[b], b * self.block, n) for b, n in enumerate(self.counts)]

    def segments(self, start: int, length: int) -> list[tuple[int, int, int]]:
        """The real elements among the padded ones [start, start + length): per block
        holding some, where they start in the real dimension, how far after `start`,
        and how many."""
        pieces: list[tuple[int, int, int]] = []
        for real, at, n in self.blocks():
            low, high = max(start, at), min(start + length, at + n)
            if high > low:
                pieces.append((real + low - at, low - start, high - low))
        return pieces

    def held(self, devices: int) -> tuple[int, ...]:
        """How many real elements each of `devices` even blocks of the padded size holds."""
        width = self.size // devices
        return tuple(
            sum(
                max(0, min((j + 1) * width, b * self.block + n) - max(j * width, b * self.block))
                for b, n in enumerate(self.counts)
            )
            for j in range(devices)
        )


def mlir_layout(size: int, devices: int) -> tuple[int, ...]:
    """Each device's share of `size` elements as MLIR's shard dialect lays them out: the
    last `size mod devices` devices hold one more."""
    base, extra = divmod(size, devices)
    return tuple(base + (d >= devices - extra) for d in range(devices))
