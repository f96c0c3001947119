"""`dhir-agree-calls`: every rank takes rank 0's results of the user's code that host code
calls, so that the ranks make the same decisions.

Host code runs on every rank, and so does a call of a function the program declares
without a body (the user's C, a library) in it. Such a function may answer each rank
differently: a clock (`time`, `MPI_Wtime`), the rank read from the environment, a file
each node has its own copy of. A time loop whose step count or condition came from it ran
other step counts on other ranks: the ranks' messages no longer met, and the run hung or
exited 0 with a result no sequential run gives (a loop of 3 steps on rank 0 and 8 on
rank 1). The program means one call and one answer; rank 0's is that answer. Each scalar
result (an integer, index or float, moved as its 64 bits) of such a call in the entry's
host code, outside its tasks, is replaced by rank 0's (`dhir_rt_agree`, one MPI_Bcast of
8 bytes a result: a call in a time loop's condition pays one each step). The call still
runs on every rank, with its effects (a `printf` prints on each). Calls in the program's
own functions are left as they are: one reached from a task runs on one rank, where a
broadcast would wait for the others for ever.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    ModuleOp,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from dhir.dialects import affine, arith, func, scf
from dhir.dialects.dhir import TaskOp
from dhir.ir.walk import enclosing, find_ops
from dhir.transforms.building import declare

AGREE = "dhir_rt_agree"
# dhir's own runtimes, whose answers are each rank's by design (`dhir_rt_comm_rank`).
_DHIRS = ("dhir_", "mgpu")
_FLOATS = (Float16Type, Float32Type, Float64Type)


@dataclass(frozen=True)
class AgreeCallsPass(ModulePass):
    """Give every rank rank 0's scalar results of the user's code that host code calls.

    Each result of such a call in the entry, outside tasks, is replaced by rank 0's on
    every rank (`ranks` > 1)."""

    name = "dhir-agree-calls"

    entry: str = "main"
    ranks: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        function = SymbolTable.lookup_symbol(op, self.entry)
        if self.ranks <= 1 or not isinstance(function, func.FuncOp):
            return
        calls = [call for call in find_ops(function, func.CallOp) if _agreed(op, call)]
        for call in calls:
            for result in call.results:
                _agree(result, call)
        if calls:
            declare(op, AGREE, [i64], [i64], "dhir's runtime")


def _agreed(module: ModuleOp, call: func.CallOp) -> bool:
    """Whether `call` is host code's call of the user's code with a scalar result."""
    name = call.callee.string_value()
    callee = SymbolTable.lookup_symbol(module, name)
    return (
        isinstance(callee, func.FuncOp)
        and callee.is_declaration
        and not name.startswith(_DHIRS)
        # In a task, one rank runs it; in a parallel loop, threads may (a broadcast
        # there would be a collective of threads, which MPI does not allow).
        and enclosing(call, (TaskOp, scf.ParallelOp, affine.ParallelOp)) is None
        and any(_bits(r.type) is not None for r in call.results)
    )


def _bits(type_: Attribute) -> int | None:
    """The width of a scalar `dhir_rt_agree` moves; None for any other type."""
    if isinstance(type_, IndexType):
        return 64
    if isinstance(type_, IntegerType) and type_.width.data <= 64:
        return type_.width.data
    if isinstance(type_, _FLOATS):
        return type_.bitwidth
    return None


def _agree(result: SSAValue, call: Operation) -> None:
    """`result`'s uses take rank 0's value: its bits widened to an i64, broadcast, and
    narrowed back (exact: the bits are moved, not the number)."""
    bits = _bits(result.type)
    if bits is None or not result.uses:
        return
    uses = list(result.uses)  # before the ops below use it too
    widened = _widened(result, bits)
    agreed = func.CallOp(AGREE, [_last(widened, result)], [i64])
    narrowed = _narrowed(agreed.results[0], result.type, bits)
    Rewriter.insert_op([*widened, agreed, *narrowed], InsertPoint.after(call))
    back = _last(narrowed, agreed.results[0])
    for use in uses:
        use.operation.operands[use.index] = back


def _widened(value: SSAValue, bits: int) -> list[Operation]:
    """The ops making `value`'s bits an i64 (none for an i64)."""
    made: list[Operation] = []
    if isinstance(value.type, _FLOATS):
        made.append(arith.BitcastOp(value, IntegerType(bits)))
    if isinstance(value.type, IndexType):
        made.append(arith.IndexCastOp(value, i64))
    elif bits < 64:
        made.append(arith.ExtUIOp(_last(made, value), i64))
    return made


def _narrowed(value: SSAValue, type_: Attribute, bits: int) -> list[Operation]:
    """The ops making the i64 `value` a `type_` of `bits` bits again (`_widened` undone)."""
    made: list[Operation] = []
    if isinstance(type_, IndexType):
        made.append(arith.IndexCastOp(value, IndexType()))
    elif bits < 64:
        made.append(arith.TruncIOp(value, IntegerType(bits)))
    if isinstance(type_, _FLOATS):
        made.append(arith.BitcastOp(_last(made, value), type_))
    return made


def _last(made: list[Operation], value: SSAValue) -> SSAValue:
    """The result of the last op of `made`; `value` where it is empty."""
    return made[-1].results[0] if made else value
