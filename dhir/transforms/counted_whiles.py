"""Counted `scf.while` loops made the `scf.for` loops they are.

`while (i < ub) { body(i); i = i + c }` written as an scf.while whose before region is
only `arith.cmpi slt, %i, %ub` and `scf.condition(%cmp) %i`, whose after region ends by
yielding `%i + c` (used by nothing else), with `i` of type index and the loop's first
value, `ub` defined outside the loop, `c` a constant above 0 and the count the loop
gives used nowhere, runs the iterations of `scf.for %i = init to ub step c`: scf.for too
runs while its counter is below the bound (signed), adding the step after each body.
Other loop values that the condition passes on as they came are the for loop's
`iter_args`: both give their inits when no iteration runs, and the last yield's after.
One difference is left: where `i + c` passes the largest index after the last iteration,
the while loop's counter wraps below `ub` and the loop runs on, while dhir stops an
scf.for that would (docs/semantics.md). So a loop is made a for loop only where that
cannot happen: `c` is 1 (`i < ub` gives `i + 1 <= ub`), or `ub` is a constant with
`ub - 1 + c` an index. Every other while loop (another predicate, a condition read from
memory or with an effect, a step of 0, below 0 or known only at run time, values the
condition changes) stays.

dhir-optimize-bodies reads a task's loops so, and dhir-codedrop a plain function's, so
that loops written either way become the same tasks and the same kernels.
"""

from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.dialects import arith, scf
from dhir.ir.walk import find_ops
from dhir.transforms.building import inside, int_constant

_SLT = 2  # arith.cmpi's predicate number of "slt"
_INDEX_TOP = 2**63 - 1  # dhir's index is 64 bits wide


def as_for_loops(root: Operation) -> list[scf.ForOp]:
    """Each counted scf.while in `root` (module docstring) made its scf.for; the loops made."""
    made: list[scf.ForOp] = []
    for loop in find_ops(root, scf.WhileOp):
        counted = counted_step(loop)
        if counted is not None:
            made.append(_as_for(loop, *counted))
    return made


def counted_step(loop: scf.WhileOp) -> tuple[int, arith.AddiOp] | None:
    """The step of `loop` and the op adding it where `loop` counts as the module docstring
    says, so that it runs as an scf.for; else None."""
    compare = _compare(loop)
    after = loop.after_region.blocks
    if compare is None or len(after) != 1:
        return None
    end = after[0].last_op
    advance = end.operands[0].owner if isinstance(end, scf.YieldOp) and end.operands else None
    if (
        not isinstance(advance, arith.AddiOp)
        or advance.lhs is not after[0].args[0]
        or advance.result.uses.get_length() != 1
    ):
        return None
    step = int_constant(advance.rhs)
    if step is None or step <= 0 or not _stays_below_top(compare.rhs, step):
        return None
    return step, advance


def _compare(loop: scf.WhileOp) -> arith.CmpiOp | None:
    """The before region's `cmpi slt, %i, %ub` where that region is only it and the
    condition passing its values on as they came, `%i` the loop's first value, an index
    whose result is unused, `%ub` defined outside."""
    before = loop.before_region.blocks
    if (
        len(before) != 1
        or not loop.arguments
        or not isinstance(loop.arguments[0].type, IndexType)
        or loop.res[0].uses
    ):
        return None
    ops = list(before[0].ops)
    if len(ops) != 2:
        return None
    compare, condition = ops
    if (
        not isinstance(compare, arith.CmpiOp)
        or compare.predicate.value.data != _SLT
        or compare.lhs is not before[0].args[0]
        or inside(compare.rhs, loop)
        or not isinstance(condition, scf.ConditionOp)
        or condition.condition is not compare.result
        or list(condition.args) != list(before[0].args)
    ):
        return None
    return compare


def _stays_below_top(bound: SSAValue, step: int) -> bool:
    """Whether a counter below `bound` plus `step` is an index (never wraps)."""
    if step == 1:
        return True
    top = int_constant(bound)
    return top is not None and top - 1 + step <= _INDEX_TOP


def _as_for(loop: scf.WhileOp, step: int, advance: arith.AddiOp) -> scf.ForOp:
    compare = _compare(loop)
    assert compare is not None
    by = advance.rhs
    if inside(by, loop):  # a constant made in the body: made again before the loop
        made = arith.ConstantOp(IntegerAttr(step, IndexType()))
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
        compare.rhs,
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


__all__ = ["as_for_loops", "counted_step"]
