"""Counted `scf.while` loops made the `scf.for` loops they are (which loops count:
dhir.analysis.counted_whiles)."""

from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.analysis.counted_whiles import counted_step, other_operand, while_bound
from dhir.dialects import arith, scf
from dhir.dialects.dhir import defined_inside
from dhir.ir.walk import find_ops


def as_for_loops(root: Operation) -> list[scf.ForOp]:
    """Each counted scf.while in `root` (dhir.analysis.counted_whiles) made its scf.for;
    the loops made."""
    made: list[scf.ForOp] = []
    for loop in find_ops(root, scf.WhileOp):
        counted = counted_step(loop)
        if counted is not None:
            made.append(_as_for(loop, *counted))
    return made


def _as_for(loop: scf.WhileOp, step: int, advance: arith.AddiOp) -> scf.ForOp:
    bound = while_bound(loop)
    by = other_operand(advance, loop.after_region.block.args[0])
    assert bound is not None and by is not None
    if defined_inside(by, loop):  # a constant made in the body: made again before the loop
        counter = loop.arguments[0].type
        assert isinstance(counter, IndexType | IntegerType)
        made = arith.ConstantOp(IntegerAttr(step, counter))
        Rewriter.insert_op(made, InsertPoint.before(loop))
        by = made.result
    body = loop.after_region.block
    end = body.last_op
    assert end is not None
    carried = list(end.operands[1:])
    body.erase_op(end)  # the yield of the next count
    body.erase_op(advance)
    body.add_op(scf.YieldOp(*carried))
    new = scf.ForOp(
        loop.arguments[0],
        bound,
        by,
        loop.arguments[1:],
        loop.detach_region(loop.after_region),
    )
    new.location = loop.location
    Rewriter.insert_op(new, InsertPoint.before(loop))
    for old, value in zip(loop.res[1:], new.res, strict=True):
        old.replace_all_uses_with(value)
    Rewriter.erase_op(loop)  # its count, the first result, is used nowhere
    return new


__all__ = ["as_for_loops"]
