"""Move a run of ops into a new private function and call it in their place."""

from collections.abc import Sequence

from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.traits import Pure

from dhir.dialects import arith, func
from dhir.ir.build import move_ops


def outline(
    ops: Sequence[Operation], name: str, after: Operation
) -> tuple[func.CallOp, func.FuncOp]:
    """Replace `ops` (consecutive, in one block) by a call to `@name`, a new function
    placed after `after` (an op of the module's body). Values the ops use from outside
    become its arguments, except constants and other pure ops without operands, which
    are cloned inside."""
    # One walk: the moved ops and those nested in them, in order.
    moved = [nested for op in ops for nested in op.walk()]
    inside = set(moved)
    free = _free_values(moved, inside)
    passed = [v for v in free if not _rematerializable(v)]
    block = Block(arg_types=[v.type for v in passed])
    for arg, value in zip(block.args, passed):
        arg.name_hint = value.name_hint
    mapping: dict[SSAValue, SSAValue] = dict(zip(passed, block.args))
    for value in free:
        if value not in mapping:
            clone = value.owner.clone()  # type: ignore[union-attr]
            block.add_op(clone)
            mapping[value] = clone.results[0]
    call = func.CallOp(name, passed, [])
    parent = ops[0].parent
    assert parent is not None
    parent.insert_op_before(call, ops[0])
    # Moved rather than cloned: cloning cost more than the rest of the lowering.
    move_ops(ops, block, None)
    # Through the moved ops, not the values' use lists: values such as the rank guards
    # are used by every step, so scanning their uses would be quadratic.
    for nested in moved:
        for index, operand in enumerate(nested.operands):
            if operand in mapping:
                nested.operands[index] = mapping[operand]
    block.add_op(func.ReturnOp())
    function = func.FuncOp(name, ([v.type for v in passed], []), Region(block), "private")
    module_block = after.parent
    assert module_block is not None
    module_block.insert_op_after(function, after)
    return call, function


def _free_values(moved: Sequence[Operation], inside: set[Operation]) -> list[SSAValue]:
    """The values the ops of `moved` use that none of `inside` defines, in order of use."""
    free: dict[SSAValue, None] = {}
    for op in moved:
        for value in op.operands:
            if not _defined_in(value, inside):
                free[value] = None
    return list(free)


def _defined_in(value: SSAValue, inside: set[Operation]) -> bool:
    if isinstance(value, BlockArgument):
        return value.block.parent_op() in inside
    return value.owner in inside


def _rematerializable(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, Operation)
        and not owner.operands
        and not owner.regions
        and len(owner.results) == 1
        and (isinstance(owner, arith.ConstantOp) or owner.has_trait(Pure))
    )
