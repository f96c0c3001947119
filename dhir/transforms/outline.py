"""Move a run of ops into a new private function and call it in their place."""

from collections.abc import Sequence

from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.traits import Pure

from dhir.analysis.lift import follows
from dhir.dialects import arith, func
from dhir.dialects.access import is_pure
from dhir.dialects.arith import scalar_int_width
from dhir.ir.build import move_ops
from dhir.ir.walk import find_ops


def outline(
    ops: Sequence[Operation], name: str, after: Operation
) -> tuple[func.CallOp, func.FuncOp]:
    """Replace `ops` (consecutive, in one block) by a call to `@name`, a new function
    placed after `after` (an op of the module's body). Values the ops use from outside
    become its arguments, except those `_rematerializable` makes, which are cloned
    inside."""
    # One walk: the moved ops and those nested in them, in order (find_ops: a lowered
    # schedule's steps are thousands of ops).
    moved = [nested for op in ops for nested in find_ops(op, Operation)]
    inside = {id(op) for op in moved}  # by id: IR objects hash in Python
    passed, cloned = _passed_and_cloned(_free_values(moved, inside))
    block = Block(arg_types=[v.type for v in passed])
    for arg, value in zip(block.args, passed):
        arg.name_hint = value.name_hint
    mapping: dict[SSAValue, SSAValue] = dict(zip(passed, block.args))
    for value in cloned:
        clone = value.owner.clone(value_mapper=mapping)  # type: ignore[union-attr]
        block.add_op(clone)
        mapping[value] = clone.results[0]
    by_id = {id(value): inner for value, inner in mapping.items()}
    call = func.CallOp(name, passed, [])
    parent = ops[0].parent
    assert parent is not None
    parent.insert_op_before(call, ops[0])
    # Moved rather than cloned: cloning cost more than the rest of the lowering.
    move_ops(ops, block, None)
    # Through the moved ops, not the values' use lists: values such as the rank guards
    # are used by every step, so scanning their uses would be quadratic.
    for nested in moved:
        operands = nested.operands
        for index, operand in enumerate(nested._operands):  # pyright: ignore[reportPrivateUsage]
            if (inner := by_id.get(id(operand))) is not None:
                operands[index] = inner
    block.add_op(func.ReturnOp())
    function = func.FuncOp(name, ([v.type for v in passed], []), Region(block), "private")
    module_block = after.parent
    assert module_block is not None
    module_block.insert_op_after(function, after)
    return call, function


def _free_values(moved: Sequence[Operation], inside: set[int]) -> list[SSAValue]:
    """The values the ops of `moved` use that none of the ops whose ids are `inside`
    defines, in order of use."""
    free: dict[int, SSAValue] = {}
    for op in moved:
        for value in op._operands:  # pyright: ignore[reportPrivateUsage]
            if id(value) not in free and not _defined_in(value, inside):
                free[id(value)] = value
    return list(free.values())


def _passed_and_cloned(free: Sequence[SSAValue]) -> tuple[list[SSAValue], list[SSAValue]]:
    """The values to pass as arguments for `free`, and those to clone inside, each
    after the values it is made of."""
    passed: dict[SSAValue, None] = {}
    cloned: dict[SSAValue, None] = {}
    for value in free:
        stack = [(value, False)]
        while stack:
            top, ready = stack.pop()
            if top in passed or top in cloned:
                continue
            if ready:
                cloned[top] = None
            elif _rematerializable(top):
                stack.append((top, True))
                stack += [(v, False) for v in top.owner.operands]  # type: ignore[union-attr]
            else:
                passed[top] = None
    return list(passed), list(cloned)


def _defined_in(value: SSAValue, inside: set[int]) -> bool:
    if isinstance(value, BlockArgument):
        return id(value.block.parent_op()) in inside
    return id(value.owner) in inside


def _rematerializable(value: SSAValue) -> bool:
    """Whether the function computes `value` itself: a constant or other pure op without
    operands, or pure integer arithmetic the lifter reads (dhir.analysis.lift), of what
    is passed or computed so. Passed whole, `3 * n` was a number to dhir-wrap-checks,
    which let the 64-bit product wrap where the analysis before outlining, taking it
    exact, proved a loop's iterations independent (a race, exit 0). Purity is dhir's
    rule (`is_pure`): xDSL marks neither affine.min nor arith.extsi Pure."""
    owner = value.owner
    if not isinstance(owner, Operation) or owner.regions or len(owner.results) != 1:
        return False
    if not owner.operands:
        return isinstance(owner, arith.ConstantOp) or owner.has_trait(Pure)
    return (
        is_pure(owner)
        and follows(owner)
        and all(scalar_int_width(v.type) is not None for v in (*owner.operands, value))
    )
