"""`dhir-endless-loops`: host `scf.while` loops that write nothing run in native code
as they would in the sequential program, even when nothing uses what they compute.

MLIR takes an op whose regions touch no memory, or only read it, for dead when no result
of it is used, whether or not it ends: the greedy rewriter of `--expand-strided-metadata`
erased such a loop, and a task whose `scf.while` never ended returned at once and exited
0, where the interpreter ran until `--timeout` (docs/semantics.md, "Loops that never
end"). An empty `llvm.inline_asm has_side_effects` at the head of the before region
makes the loop one with an effect: no pass erases it, and LLVM, which takes no loop of
dhir's for one that surely ends (its functions are not `mustprogress`), keeps it too. The
asm emits no instruction. Loops that surely end (counted ones, dhir.analysis.
counted_whiles) and loops that store, copy, update atomically or call are left alone:
those are not erased. Device code gets its asm from dhir-gpu-kernels (keep_endless),
before the canonicalization of its mapping pipeline: that erased a kernel's loop, and a
kernel that would never end returned with outputs the program never computes.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dhir.analysis.counted_whiles import counted_step
from dhir.dialects import access, func, llvm, scf
from dhir.dialects.access import Kind
from dhir.dialects.gpu import in_device_code
from dhir.ir.walk import find_ops

# What MLIR never erases as dead: an op that writes memory or calls a function.
_KEPT = (Kind.STORE, Kind.COPY, Kind.ATOMIC, Kind.STRUCTURED)


@dataclass(frozen=True)
class EndlessLoopsPass(ModulePass):
    """Host `scf.while` loops that write nothing get an empty side effect, kept.

    So that native code runs them, ending or not, as the sequential program does."""

    name = "dhir-endless-loops"
    needs: ClassVar[tuple[type[Operation], ...]] = (scf.WhileOp,)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        keep_endless(op, device=False)


def keep_endless(root: Operation, device: bool = True) -> None:
    """The `scf.while` loops in `root` (with `device` False, outside device code) that
    may never end and write nothing, each with an empty side effect at its head."""
    for loop in find_ops(root, scf.WhileOp):
        if not device and in_device_code(loop):
            continue
        if counted_step(loop) is not None or _has_effect(loop):
            continue
        block = loop.before_region.block
        first = block.first_op
        assert first is not None  # scf.condition ends it
        block.insert_op_before(_barrier(), first)


def _barrier() -> Operation:
    return llvm.InlineAsmOp("", "", [], has_side_effects=True)


def _has_effect(loop: scf.WhileOp) -> bool:
    """Whether an op inside `loop` keeps it from being erased: a write or a call."""
    for inner in loop.walk():
        if isinstance(inner, (func.CallOp, llvm.InlineAsmOp)):
            return True
        if access.kind(inner) in _KEPT:
            return True
    return False
