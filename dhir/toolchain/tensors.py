"""An entry function on tensors, bufferized by mlir-opt-22 so that dhir runs it on memrefs.

`dhir run` and `dhir compile` take an entry whose arguments and results are ranked tensors
(linalg, tensor and arith on tensors, as MLIR writes them before bufferization). MLIR's
one-shot bufferization turns every tensor into a buffer, the function boundaries included
(identity layouts), and `buffer-results-to-out-params` turns each result into a memref
argument after the others, where the result is written (a result's buffer allocated in the
function becomes that argument). The memref program then goes through CodeDrop, placement
and the rest like any plain entry. The entry's signature as the user sees it (tensor
arguments given, results written to `resK.npy`) is dhir.toolchain.entry's.

A program with shard annotations is partitioned first (dhir.toolchain.shards), and its
collectives become calls of dhir's runtime once bufferized. dhir's own ops (`dhir.schedule`,
tasks) are written on memrefs already, and mlir-opt-22 does not know them.
"""

from xdsl.dialects.builtin import ModuleOp

from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.diagnostics import error_at
from dhir.ir.text import keep_argument_names, through_mlir_opt
from dhir.toolchain.shards import is_shard_program, partition
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.shard_collectives import lower_collectives

PIPELINE = (
    "builtin.module("
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{modify-public-functions hoist-static-allocs},"
    "canonicalize,"
    "ownership-based-buffer-deallocation,canonicalize,buffer-deallocation-simplification,"
    "bufferization-lower-deallocations,cse,canonicalize)"
)


def bufferize(module: ModuleOp, entry: str, ranks: int | None = None) -> ModuleOp:
    """`module` with its tensors turned into memrefs (see the module docstring); a shard
    program partitioned for its grid, whose device count must be `ranks` (None: any)."""
    for op in module.walk():
        if isinstance(op, (ScheduleOp, TaskOp)):
            raise error_at(
                op,
                f"@{entry} takes or returns tensors, so dhir bufferizes the program with "
                "mlir-opt-22, which does not know dhir's ops: write schedules on memrefs, "
                "or leave the tensor program without them (CodeDrop makes the tasks)",
            )
    if is_shard_program(module):
        module = partition(module, entry, ranks)
    bufferized = through_mlir_opt(
        module,
        str(find_llvm_tools().mlir_opt),
        PIPELINE,
        what=f"bufferize @{entry}",
        failed=f"bufferizing @{entry} (an entry on tensors) with mlir-opt-22 failed",
        locations=True,
    )
    keep_argument_names(module, bufferized, entry)
    lower_collectives(bufferized)
    return bufferized
