"""`dhir-assert-locations`: a program's own `cf.assert` outside GPU code carries its
location in its message, in the form MLIR's runtime checks print, so that one failing
natively is reported at its op as the interpreter reports it.

MLIR 22 lowers `cf.assert` to a print of its message and `abort()`: the run failed as a
rank that died of SIGABRT, named by its task, the message only in mpirun's output. With
the message `ERROR: Runtime op verification failed`, `^ 'cf.assert' failed: MESSAGE` and
`Location: loc("p.mlir":9:7)`, dhir.toolchain.failure reads it as it reads a failed
check: `p.mlir:9:7: error: 'cf.assert' failed: MESSAGE; the program failed on ...`.
Asserts dhir's checks made already carry that form and are left alone; so are those in
device code, which cannot print.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dhir.dialects import cf
from dhir.dialects.gpu import in_device_code
from dhir.ir.walk import find_ops
from dhir.transforms.vector_checks import CHECK_MESSAGE, location_text

# What the interpreter says of a failed assert, before its message.
ASSERT_FAILED = "'cf.assert' failed: "


@dataclass(frozen=True)
class AssertLocationsPass(ModulePass):
    """Each cf.assert outside GPU code whose message is the program's gets its location.

    The message becomes MLIR's runtime-check form around `'cf.assert' failed: MESSAGE`
    and the assert's `loc(...)`, which a failed run's report reads as the op's place."""

    name = "dhir-assert-locations"
    needs: ClassVar[tuple[type[Operation], ...]] = (cf.AssertOp,)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        prefix = CHECK_MESSAGE.split("{", 1)[0]
        for check in find_ops(op, cf.AssertOp):
            message = check.msg.data
            if message.startswith(prefix) or in_device_code(check):
                continue
            where = location_text(check)
            text = CHECK_MESSAGE.format(what=ASSERT_FAILED + message, where=where)
            check.properties["msg"] = StringAttr(text)
