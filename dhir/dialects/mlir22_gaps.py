"""The ops MLIR 22 has that dhir cannot read yet (xDSL 0.74, which dhir parses MLIR with,
lacks them and dhir has no version of its own), each with what to write instead where MLIR
has an equivalent dhir reads. The parser's error for an op it does not know says so.

tests/unit/test_mlir22_gaps.py checks that each is an op of MLIR 22 and that dhir still
cannot read it (an op dhir learns to read must leave this table)."""

import difflib
from collections.abc import Iterable

_GENERIC = "write it as a linalg.generic"
_COPY = "copy with memref.copy"

# Of the dialects dhir reads; the rest of MLIR's dialects dhir does not read at all.
MLIR22_ONLY: dict[str, str] = {
    "affine.dma_start": _COPY,
    "affine.dma_wait": _COPY,
    "arith.scaling_extf": "arith.extf the value and the scale, then arith.mulf them",
    "arith.scaling_truncf": "arith.divf the value by the scale, then arith.truncf it",
    "bufferization.dealloc": "memref.dealloc each buffer",
    "bufferization.dealloc_tensor": "",
    "complex.powi": "",
    "func.call_indirect": "call the function by its name with func.call",
    "func.constant": "call the function by its name with func.call",
    "gpu.cluster_block_id": "",
    "gpu.cluster_dim": "",
    "gpu.cluster_dim_blocks": "",
    "gpu.cluster_id": "",
    "gpu.dynamic_shared_memory": "allocate the shared memory with memref.alloca in a "
    "gpu.func's workgroup attribution",
    "gpu.subgroup_broadcast": "",
    "linalg.batch_vecmat": _GENERIC,
    "linalg.conv_1d": _GENERIC,
    "linalg.conv_2d": _GENERIC,
    "linalg.conv_2d_nchw_fchw_q": _GENERIC,
    "linalg.conv_2d_nhwgc_gfhwc_q": _GENERIC,
    "linalg.conv_3d": _GENERIC,
    "linalg.conv_3d_ndhwc_dhwcf_q": _GENERIC,
    "linalg.fill_rng_2d": _GENERIC,
    "linalg.quantized_batch_matmul": _GENERIC,
    "linalg.softmax": "write it as linalg.generic ops: the maximum, exp of the difference, "
    "the sum, the quotient",
    "linalg.winograd_filter_transform": _GENERIC,
    "linalg.winograd_input_transform": _GENERIC,
    "linalg.winograd_output_transform": _GENERIC,
    "memref.distinct_objects": "use its operands in place of its results (it only states "
    "that they do not alias)",
    "tensor.bitcast": "",
    "tensor.gather": "",
    "tensor.parallel_insert_slice": "",
    "tensor.rank": "",
    "tensor.scatter": "",
    "vector.type_cast": "vector.load the vector from the memref",
}
"""Each op of MLIR 22 that dhir cannot read, with what to write instead ("" where MLIR has
nothing dhir reads that computes the same)."""


# The dialects whose every MLIR 22 op is either read by dhir or in MLIR22_ONLY.
SURVEYED = frozenset(
    "affine arith bufferization cf complex func gpu index linalg math memref scf tensor "
    "vector".split()
)


def unknown_op_message(name: str, known: Iterable[str]) -> str:
    """What to tell a user whose program names op `name`, which dhir cannot read; `known`
    are the ops dhir reads, for a close name to suggest."""
    instead = MLIR22_ONLY.get(name)
    if instead is not None:
        message = (
            f"'{name}' is an op of MLIR 22 that dhir cannot read yet (xDSL 0.74, which dhir "
            "reads MLIR with, lacks it)"
        )
        return f"{message}; instead: {instead}" if instead else message
    close = difflib.get_close_matches(name, [*known, *MLIR22_ONLY], n=1, cutoff=0.75)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    if name.split(".")[0] in SURVEYED:
        return f"unknown op '{name}': neither MLIR 22 nor dhir has an op of this name{hint}"
    return f"unknown op '{name}': {NO_SUCH_OP}{hint}"


# What an unknown op of a dialect MLIR 22 lacks is told (dhir-opt adds its flag for them).
NO_SUCH_OP = "dhir reads no op of this name"
