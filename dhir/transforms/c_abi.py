"""`dhir-c-abi`: narrow integer arguments of functions declared without a body are
extended the way C's callers extend them.

A declared function is C code (the user's `--link` files, libc, dhir's runtime). C's
x86-64 and AArch64 ABIs leave the widening of an argument narrower than `int` to its
caller, and clang compiles the callee to rely on it; LLVM widens only arguments marked
`signext` or `zeroext`, so an unmarked `i8` -1 reached `int64_t f(int8_t)` as 255. Each
declaration's i1 arguments are marked `llvm.zeroext` (C's `bool`), its i8 and i16 ones
`llvm.signext` (`int8_t`, `int16_t`): func-to-llvm carries the marks to the LLVM declaration
(and to `_mlir_ciface_` ones). Results stay unmarked: then the caller widens them itself,
whatever the callee did (GCC does not widen them). The interpreter passes them alike:
ctypes' c_bool, c_int8 and c_int16 (dhir.backends.interp.external).
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerType, ModuleOp, UnitAttr
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from dhir.dialects import func

SIGNEXT = "llvm.signext"
ZEROEXT = "llvm.zeroext"


def extension(type_: Attribute) -> str | None:
    """How C widens an argument of `type_`: `bool` by zeros, `int8_t` and `int16_t` by
    their sign; None for what is passed as it is."""
    if not isinstance(type_, IntegerType):
        return None
    width = type_.width.data
    if width == 1:
        return ZEROEXT
    return SIGNEXT if width in (8, 16) else None


def mark_arguments(declaration: func.FuncOp) -> None:
    """Mark `declaration`'s narrow integer arguments as `extension` says."""
    inputs = declaration.function_type.inputs.data
    marks = [extension(type_) for type_ in inputs]
    if not any(marks):
        return
    given = declaration.arg_attrs
    old = [d.data for d in given.data] if given is not None else [{} for _ in inputs]
    new: list[DictionaryAttr] = []
    for attrs, mark in zip(old, marks, strict=True):
        kept = {k: v for k, v in attrs.items() if k not in (SIGNEXT, ZEROEXT)}
        new.append(DictionaryAttr({**kept, mark: UnitAttr()} if mark else kept))
    declaration.arg_attrs = ArrayAttr(new)


@dataclass(frozen=True)
class CAbiPass(ModulePass):
    """Mark the narrow integer arguments of every declaration for C (see the module)."""

    name = "dhir-c-abi"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for found in op.body.block.ops:
            if isinstance(found, func.FuncOp) and found.is_declaration:
                mark_arguments(found)
