"""`dhir-user-names`: the program's own functions get names no library has.

The lowered program is linked with libc, libm, MPI and OpenMP, and calls some of them by
name: a function the user wrote as `@exp`, `@write` or `@qsort` took the place of the
library's (math.exp called the user's @exp; MPI's own calls of write and qsort reached the
user's, which hung or crashed). Just before the build, each function the program defines
(with a body), other than the entry the harness calls, is renamed `dhir_user$NAME`, with
every call of it; dhir's own functions (the runtime's, the schedules' parts) keep theirs.
It runs after everything that names functions in messages or task names. The `$` is in no
C library's names and is one PTX takes: a function a GPU kernel calls is copied into its
`gpu.module` under the new name (`dhir_user.NAME` stopped ptxas: "syntax error"). For the
same reason every byte of NAME other than a letter, a digit or `_` is written `$XX`, in
hex (`@my.helper` is `dhir_user$my$2Ehelper`: ptxas stopped at its `.`), which keeps two
names two.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, SymbolRefAttr
from xdsl.passes import ModulePass

from dhir.dialects import func
from dhir.ir.walk import find_ops

PREFIX = "dhir_user$"
_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def built_name(name: str) -> str:
    """The name the build gives the program's function `name`: one C's and PTX's
    identifiers can take, and no other function's."""
    return PREFIX + "".join(
        chr(byte) if byte in _PLAIN else f"${byte:02X}" for byte in name.encode()
    )


def user_functions(module: ModuleOp, entry: str) -> frozenset[str]:
    """The functions `module` defines, other than `entry`: those to rename."""
    return frozenset(
        op.sym_name.data
        for op in find_ops(module, func.FuncOp)  # `walk()`: 0.1 s at 10,000 tasks
        if not op.is_declaration and op.sym_name.data != entry
    )


@dataclass(frozen=True)
class UserNamesPass(ModulePass):
    """Rename the functions in `names` (and their calls and declarations) `built_name`'s way."""

    name = "dhir-user-names"

    names: frozenset[str] = frozenset()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not self.names:
            return
        for found in op.walk():
            if isinstance(found, func.FuncOp) and found.sym_name.data in self.names:
                found.sym_name = StringAttr(built_name(found.sym_name.data))
            elif isinstance(found, func.CallOp) and found.callee.string_value() in self.names:
                found.callee = SymbolRefAttr(built_name(found.callee.string_value()))
