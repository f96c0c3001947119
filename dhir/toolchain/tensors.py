"""An entry function on tensors, bufferized by mlir-opt-22 so that dhir runs it on memrefs.

`dhir run` and `dhir compile` take an entry whose arguments and results are ranked tensors
(linalg, tensor and arith on tensors, as MLIR writes them before bufferization). MLIR's
one-shot bufferization turns every tensor into a buffer, the function boundaries included
(identity layouts), and `buffer-results-to-out-params` turns each result into a memref
argument after the others, where the result is written (a result's buffer allocated in the
function becomes that argument). The memref program then goes through CodeDrop, placement
and the rest like any plain entry. The entry's signature as the user sees it (tensor
arguments given, results written to `resK.npy`) is dhir.toolchain.entry's.

Only plain programs are bufferized: dhir's own ops (`dhir.schedule`, tasks) are written on
memrefs already, and mlir-opt-22 does not know them.
"""

from xdsl.dialects.builtin import ModuleOp

from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.dialects.shard import is_shard_op
from dhir.ir.diagnostics import error_at
from dhir.ir.text import through_mlir_opt
from dhir.toolchain.tools import find_llvm_tools

PIPELINE = (
    "builtin.module("
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{modify-public-functions hoist-static-allocs},"
    "canonicalize)"
)


def bufferize(module: ModuleOp, entry: str) -> ModuleOp:
    """`module` with its tensors turned into memrefs (see the module docstring)."""
    for op in module.walk():
        if is_shard_op(op):
            raise error_at(
                op,
                "programs with shard annotations (shard.grid, shard.shard, collectives) "
                "are not supported yet: dhir does not partition them; drop the annotations "
                "to run the program on its global tensors, which dhir places itself",
            )
        if isinstance(op, (ScheduleOp, TaskOp)):
            raise error_at(
                op,
                f"@{entry} takes or returns tensors, so dhir bufferizes the program with "
                "mlir-opt-22, which does not know dhir's ops: write schedules on memrefs, "
                "or leave the tensor program without them (CodeDrop makes the tasks)",
            )
    return through_mlir_opt(
        module,
        str(find_llvm_tools().mlir_opt),
        PIPELINE,
        what=f"bufferize @{entry}",
        failed=f"bufferizing @{entry} (an entry on tensors) with mlir-opt-22 failed",
        locations=True,
    )
