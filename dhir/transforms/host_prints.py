"""`dhir-host-prints`: a `vector.print` in the entry's host code prints once, on rank 0,
as the sequential program prints it once.

Host code runs on every rank alike (docs/semantics.md), so a reduction's result printed
after its schedule was printed by each rank: `499500` three times on 3 ranks, the values
and their newlines interleaved by mpirun (`499500499500499500` and three empty lines),
where the interpreter printed it once. Each such print now runs under `rank == 0`: the
value it prints is every rank's alike (host code reads only data valid on every rank).
The rank is asked once, at the head of the entry block, which dominates every print, so
that no MPI call lands in a host parallel loop. Prints in tasks (each task runs on one
rank) and in the program's other functions (a task may call one, and then only its rank
runs it) are left as they are, as is the user's C that host code calls.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from dhir.dialects import arith, func, mpi, scf, vector
from dhir.dialects.dhir import TaskOp
from dhir.dialects.gpu import in_device_code
from dhir.ir.walk import enclosing, find_ops


@dataclass(frozen=True)
class HostPrintsPass(ModulePass):
    """Guard each `vector.print` of the entry's host code with `rank == 0`.

    So that a program's print runs once over all ranks, as in the sequential program
    (`ranks` > 1)."""

    name = "dhir-host-prints"
    needs: ClassVar[tuple[type[Operation], ...]] = (vector.PrintOp,)

    entry: str = "main"
    ranks: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        function = SymbolTable.lookup_symbol(op, self.entry)
        if self.ranks <= 1 or not isinstance(function, func.FuncOp) or function.is_declaration:
            return
        prints = [p for p in find_ops(function, vector.PrintOp) if _in_host_code(p)]
        if not prints:
            return
        first = _rank_zero(function)
        for print_ in prints:
            _guard(print_, first)


def _in_host_code(op: Operation) -> bool:
    return enclosing(op, TaskOp) is None and not in_device_code(op)


def _rank_zero(function: func.FuncOp) -> SSAValue:
    """`rank == 0`, made at the head of `function`'s entry block."""
    comm = mpi.CommWorldOp()
    rank = mpi.CommRankOp(comm.comm)
    zero = arith.ConstantOp.from_int_and_width(0, i32)
    first = arith.CmpiOp(rank.rank, zero, "eq")
    first.result.name_hint = "rank0"
    Rewriter.insert_op([comm, rank, zero, first], InsertPoint.at_start(function.body.blocks[0]))
    return first.result


def _guard(print_: vector.PrintOp, condition: SSAValue) -> None:
    """`print_` moved into `scf.if condition`."""
    guard = scf.IfOp(condition, [], [scf.YieldOp()])
    Rewriter.insert_op(guard, InsertPoint.before(print_))
    print_.detach()
    then = guard.true_region.block
    assert then.last_op is not None
    then.insert_op_before(print_, then.last_op)
