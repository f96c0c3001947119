"""What neither backend runs, refused at its line before either starts: an address that
one task takes (`memref.extract_aligned_pointer_as_index`) and stores into a memref,
passed to linked code (a function declared without a body) from a value loaded out of
that memref elsewhere, by another task or by host code. Each task may run on another
rank, a process of its own, where the address points nowhere (natively the run died of
SIGSEGV; the interpreter, one process, ran it).

Only what the IR shows is found: the address reaches the store, and the load reaches the
call, through arithmetic alone (casts, adds), and the store and the load name one memref
of the schedule. An address that travels otherwise (through linked code, a function with
a body, a view) is not, and dhir cannot see it in general.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from dhir.analysis.sharing import address_use_in_task
from dhir.dialects import func
from dhir.dialects.access import Kind, facts
from dhir.dialects.dhir import TaskOp, defined_inside
from dhir.dialects.memref import ExtractAlignedPointerAsIndexOp
from dhir.ir.diagnostics import error_at, loc_of
from dhir.ir.walk import enclosing, find_among, find_ops


@dataclass(frozen=True)
class _Stored:
    """A store of an address that `task` took into a memref from outside it."""

    task: TaskOp
    store: Operation


def check_addresses(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first task that uses an address taken outside any task (as
    dhir-lower-to-mpi does natively, so that the interpreter does too), then the first
    call of linked code that is passed an address another task took."""
    taken = find_among(module, ExtractAlignedPointerAsIndexOp, ops)
    for op in taken:
        found = address_use_in_task(op)
        if found is not None:
            raise error_at(*found)
    declared = {
        op.sym_name.data
        for op in module.body.block.ops
        if isinstance(op, func.FuncOp) and op.is_declaration
    }
    if not declared or not taken:
        return  # no walk of the tasks (a large schedule's costs 50 ms)
    stored = _stored_addresses(module)
    if not stored:
        return
    for call in find_ops(module, func.CallOp):
        if call.callee.string_value() not in declared:
            continue
        for argument in call.arguments:
            for memref in _loaded_from(argument):
                for found in stored.get(memref, ()):
                    if not found.task.is_ancestor(call):
                        raise error_at(call, _message(call, memref, found))


def _stored_addresses(module: ModuleOp) -> dict[SSAValue, list[_Stored]]:
    """Per memref from outside a task, the stores of addresses that the task took."""
    stored: dict[SSAValue, list[_Stored]] = {}
    for task in find_ops(module, TaskOp):
        for op in task.body.walk():
            found = facts(op)
            if found is None or found.kind is not Kind.STORE:
                continue
            for access in found.accesses:
                value, memref = access.value, access.memref
                if value is None or defined_inside(memref, task) or not _an_address(value, task):
                    continue
                if enclosing(op, TaskOp) is task:  # not a task nested in it (refused)
                    stored.setdefault(memref, []).append(_Stored(task, op))
    return stored


def _an_address(value: SSAValue, task: TaskOp) -> bool:
    """Whether `value` is computed in `task` from an address taken there, through
    arithmetic alone."""
    todo, seen = [value], set[SSAValue]()
    while todo:
        current = todo.pop()
        owner = current.owner
        if current in seen or not isinstance(owner, Operation) or not task.is_ancestor(owner):
            continue
        seen.add(current)
        if isinstance(owner, ExtractAlignedPointerAsIndexOp):
            return True
        if _arithmetic(owner):
            todo.extend(owner.operands)
    return False


def _loaded_from(value: SSAValue) -> list[SSAValue]:
    """The memrefs whose loaded elements `value` is computed from, through arithmetic."""
    todo, seen, memrefs = [value], set[SSAValue](), list[SSAValue]()
    while todo:
        current = todo.pop()
        owner = current.owner
        if current in seen or not isinstance(owner, Operation):
            continue
        seen.add(current)
        found = facts(owner)
        if found is not None and found.kind is Kind.LOAD:
            memrefs += [a.memref for a in found.accesses if not a.whole]
        elif _arithmetic(owner):
            todo.extend(owner.operands)
    return memrefs


def _arithmetic(op: Operation) -> bool:
    found = facts(op)
    return found is not None and found.kind is Kind.PURE and not op.regions


def _message(call: func.CallOp, memref: SSAValue, found: _Stored) -> str:
    name = memref.name_hint
    where = loc_of(found.store)
    stored = f" at {where}" if where is not None else ""
    task = found.task.token.name_hint
    taker = f"task %{task}" if task is not None else "another task"
    return (
        f"@{call.callee.string_value()} is passed an address that {taker} took and "
        f"stored into {f'%{name}' if name is not None else 'a memref'}{stored}: an address "
        "is only good in the task that takes it (each task may run on another rank, a "
        "process of its own, where it points nowhere). Take it in the task that passes "
        "it: memref.extract_aligned_pointer_as_index of the memref there (listed by that "
        "task), then arith.index_cast to i64"
    )
