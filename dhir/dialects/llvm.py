"""The ops of xDSL's llvm dialect that dhir writes before the lowering (the lowering itself
is mlir-opt-22's), and the types its verifier refuses as memref elements, taken as they
are: the rest of dhir reaches them through this module."""

# isort: off
from xdsl.dialects.llvm import (
    InlineAsmOp as InlineAsmOp,
    LLVMArrayType as LLVMArrayType,
    LLVMPointerType as LLVMPointerType,
    LLVMStructType as LLVMStructType,
    StackRestoreOp as StackRestoreOp,
    StackSaveOp as StackSaveOp,
)
# isort: on
