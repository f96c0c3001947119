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
runs on every rank, with its effects (a `printf` prints on each).

The program's own functions (with a body) that only host code calls, the entry's or
theirs, run on every rank too: their calls of the user's code are agreed the same way
(before, a `@count` that returned `steps()` for the entry's time loop gave each rank its
own step count, and the run failed in a broadcast). A function of the program that a task
or a parallel loop calls as well runs on one rank or thread there, where a broadcast would
wait for the others for ever: its own calls are left alone, and its scalar results are
agreed at host code's calls of it instead, when it calls the user's code at all.
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

from dhir.analysis.communication import THREAD_SAFE_EXTERNALS
from dhir.dialects import affine, arith, func, scf
from dhir.dialects.dhir import TaskOp
from dhir.ir.calls import call_sites, callers_of, through_callers
from dhir.ir.walk import enclosing, find_ops
from dhir.transforms.building import declare

AGREE = "dhir_rt_agree"
# dhir's own runtimes, whose answers are each rank's by design (`dhir_rt_comm_rank`).
_DHIRS = ("dhir_", "mgpu")
_FLOATS = (Float16Type, Float32Type, Float64Type)


@dataclass(frozen=True)
class AgreeCallsPass(ModulePass):
    """Give every rank rank 0's scalar results of the user's code that host code calls.

    Each result of such a call outside tasks, in the entry or in a function that only
    such host code calls, is replaced by rank 0's on every rank (`ranks` > 1)."""

    name = "dhir-agree-calls"

    entry: str = "main"
    ranks: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        function = SymbolTable.lookup_symbol(op, self.entry)
        if self.ranks <= 1 or not isinstance(function, func.FuncOp):
            return
        reaching = _reaching_users(op, function)
        hosts = _host_functions(op, function, reaching)
        calls = [
            call
            for host in op.ops
            if host in hosts
            for call in find_ops(host, func.CallOp)
            if _agreed(op, call, hosts, reaching)
        ]
        for call in calls:
            for result in call.results:
                _agree(result, call)
        if calls:
            declare(op, AGREE, [i64], [i64], "dhir's runtime")


# In a task, one rank runs a call; in a parallel loop, threads may (a broadcast there
# would be a collective of threads, which MPI does not allow).
_NOT_HOST = (TaskOp, scf.ParallelOp, affine.ParallelOp)


def _agreed(
    module: ModuleOp, call: func.CallOp, hosts: set[func.FuncOp], reaching: set[str]
) -> bool:
    """Whether `call` is host code's call, with a scalar result, of the user's code or of
    a function of the program that calls it and that not only host code calls (`hosts`:
    those that only host code calls, whose own calls are agreed; `reaching`: the
    functions that call the user's code, `_reaching_users`)."""
    name = call.callee.string_value()
    callee = SymbolTable.lookup_symbol(module, name)
    return (
        isinstance(callee, func.FuncOp)
        and (_users(callee) if callee.is_declaration else callee not in hosts)
        and (callee.is_declaration or name in reaching)
        and enclosing(call, TaskOp) is None  # one rank runs it there
        and _in_order(call, name)
        and any(_bits(r.type) is not None for r in call.results)
    )


def _in_order(call: func.CallOp, name: str) -> bool:
    """Whether `call` runs on one thread of each rank, in the same order on every rank:
    outside parallel loops, or in one and of code that may reach MPI (not the C math
    library's: dhir.analysis.communication), which dhir-serial-loops runs in order, as it
    would the broadcast. (A host scf.parallel storing C's answer gave rank 1's to a task
    on rank 1, exit 0.) The math library's answers are every rank's alike: their loops
    stay on their threads."""
    if name in THREAD_SAFE_EXTERNALS:
        return enclosing(call, (scf.ParallelOp, affine.ParallelOp)) is None
    return True


def _users(function: func.FuncOp) -> bool:
    """Whether the bodiless `function` is the user's code, not dhir's runtime's (whose
    answers are each rank's by design: `dhir_rt_comm_rank`)."""
    return not function.sym_name.data.startswith(_DHIRS)


def _reaching_users(module: ModuleOp, entry: func.FuncOp) -> set[str]:
    """The names of the program's functions with a body that call the user's code,
    directly or through others. Empty where the entry is the only one (the calls of the
    others are then not walked for: at 10,000 tasks the entry is most of the module)."""
    functions = [f for f in module.ops if isinstance(f, func.FuncOp)]
    if not any(not f.is_declaration and f is not entry for f in functions):
        return set()
    users = {f.sym_name.data: f for f in functions if f.is_declaration and _users(f)}
    reached = through_callers(users, callers_of(module))
    return {name for name in reached if name not in users}


def _host_functions(module: ModuleOp, entry: func.FuncOp, reaching: set[str]) -> set[func.FuncOp]:
    """`entry` and the functions of the program that only host code calls: theirs or the
    entry's, outside tasks and parallel loops, by a `func.call` (a function named
    anywhere else may run anywhere); every rank runs each of them whole."""
    hosts = {f for f in module.ops if isinstance(f, func.FuncOp) and not f.is_declaration}
    # Only a function that reaches the user's code can need agreeing: without one, the
    # walk over every op below (a tenth of a second at 10,000 tasks) is not needed.
    if not reaching.difference([entry.sym_name.data]):
        return {entry}
    sites = call_sites(module)
    changed = True
    while changed:
        changed = False
        for function in list(hosts):
            name = function.sym_name.data
            if function is entry:
                continue
            calls = sites.of(name)
            if name in sites.named or not calls or not all(_from(c, hosts) for c in calls):
                hosts.discard(function)
                changed = True
    return hosts


def _from(call: func.CallOp, hosts: set[func.FuncOp]) -> bool:
    """Whether `call` is in host code of one of `hosts`."""
    caller = enclosing(call, func.FuncOp)
    return caller in hosts and enclosing(call, _NOT_HOST) is None


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
