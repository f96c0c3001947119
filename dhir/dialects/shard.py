"""xDSL's shard dialect (MLIR's `shard`, formerly `mesh`), which dhir takes as it is: the
rest of dhir reaches it through this module, as it reaches every dialect through
dhir.dialects."""

# isort: off
from xdsl.dialects.shard import (
    Shard as Shard,
)
# isort: on


_OPS = tuple(Shard.operations)


def is_shard_op(op: object) -> bool:
    """Whether `op` is one of the shard dialect's ops (grids, shardings, collectives)."""
    return isinstance(op, _OPS)
