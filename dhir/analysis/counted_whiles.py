"""Which `scf.while` loops count as the `scf.for` loops they are.

`while (i < ub) { body(i); i = i + c }` written as an scf.while whose before region is
only `arith.cmpi slt, %i, %ub` (or `sgt, %ub, %i`) and `scf.condition(%cmp) %i`, whose
after region ends by yielding `%i + c` (or `c + %i`, used by nothing else), with `i` the
loop's first value, an index or a signless integer (i8, i32, i64, ...), `ub` defined
outside the loop, `c` a constant above 0 and the count the loop gives used nowhere, runs
the iterations of `scf.for %i = init to ub step c` (of `i`'s type): scf.for too runs
while its counter is below the bound (signed), adding the step after each body.
Other loop values that the condition passes on as they came are the for loop's
`iter_args`: both give their inits when no iteration runs, and the last yield's after.
One difference is left: where `i + c` passes the largest value of its type after the last
iteration (2^31 - 1 for an i32, 2^63 - 1 for an index), the while loop's counter wraps
below `ub` and the loop runs on, while dhir stops an scf.for that would
(docs/semantics.md). So a loop is made a for loop only where that cannot happen: `c` is
1 (`i < ub` gives `i + 1 <= ub`), or `ub` is a constant with `ub - 1 + c` of the type.
Every other while loop (another predicate, a condition read from memory or with an
effect, a step of 0, below 0 or known only at run time, values the condition changes)
stays.

dhir-optimize-bodies reads a task's loops so, and dhir-codedrop a plain function's, so
that loops written either way become the same tasks and the same kernels
(dhir.transforms.counted_whiles); dhir.analysis.wrap_checks takes such a loop's counter
as a loop variable, so that both backends check its index arithmetic at the loop's
entry whether native code made it an scf.for or not.
"""

from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, Signedness
from xdsl.ir import Attribute, SSAValue

from dhir.dialects import arith, scf
from dhir.dialects.dhir import defined_inside

_SLT = 2  # arith.cmpi's predicate numbers of "slt" and "sgt"
_SGT = 4
_INDEX_BITS = 64  # dhir's index is 64 bits wide


def counted_step(loop: scf.WhileOp) -> tuple[int, arith.AddiOp] | None:
    """The step of `loop` and the op adding it where `loop` counts as the module docstring
    says, so that it runs as an scf.for; else None."""
    counted = _counted(loop)
    return None if counted is None else counted[1:]


def counted_bounds(loop: scf.WhileOp) -> tuple[SSAValue, int] | None:
    """The upper bound and the step of `loop` where it counts as the module docstring
    says (its counter, the after region's first argument, then takes the values of
    `scf.for %i = init to ub step c`); else None."""
    counted = _counted(loop)
    return None if counted is None else counted[:2]


def _counted(loop: scf.WhileOp) -> tuple[SSAValue, int, arith.AddiOp] | None:
    """The upper bound, the step and the op adding it where `loop` counts; else None."""
    bound = while_bound(loop)
    after = loop.after_region.blocks
    if bound is None or len(after) != 1:
        return None
    end = after[0].last_op
    advance = end.operands[0].owner if isinstance(end, scf.YieldOp) and end.operands else None
    if not isinstance(advance, arith.AddiOp) or advance.result.uses.get_length() != 1:
        return None
    by = other_operand(advance, after[0].args[0])
    bits = _bits(loop.arguments[0].type)
    if by is None or bits is None:  # bits: known by _bound
        return None
    step = _signed(by, bits)
    if step is None or step <= 0 or not _stays_below_top(bound, step, bits):
        return None
    return bound, step, advance


def other_operand(op: arith.CmpiOp | arith.AddiOp, value: SSAValue) -> SSAValue | None:
    """The operand of `op` beside `value` (either side), or None where it has none."""
    if op.lhs is value:
        return op.rhs
    if op.rhs is value:
        return op.lhs
    return None


def _bits(type_: Attribute) -> int | None:
    """The width of a counter of `type_`: an index or a signless integer wider than i1;
    None for any other type."""
    if isinstance(type_, IndexType):
        return _INDEX_BITS
    if (
        isinstance(type_, IntegerType)
        and type_.signedness.data == Signedness.SIGNLESS
        and type_.width.data > 1
    ):
        return type_.width.data
    return None


def _signed(value: SSAValue, bits: int) -> int | None:
    """The constant `value` read as a signed number of `bits` bits (an i32 constant may
    be stored as 4294967295 or -1); None where it is no integer constant."""
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, IntegerAttr):
        return None
    return arith.signed(owner.value.value.data, bits)


def while_bound(loop: scf.WhileOp) -> SSAValue | None:
    """`%ub` of the before region's `cmpi slt, %i, %ub` (or `sgt, %ub, %i`) where that
    region is only it and the condition passing its values on as they came, `%i` the
    loop's first value, a counter (`_bits`) whose result is unused, `%ub` defined outside."""
    before = loop.before_region.blocks
    if (
        len(before) != 1
        or not loop.arguments
        or _bits(loop.arguments[0].type) is None
        or loop.res[0].uses
    ):
        return None
    ops = list(before[0].ops)
    if len(ops) != 2:
        return None
    compare, condition = ops
    if (
        not isinstance(compare, arith.CmpiOp)
        or not isinstance(condition, scf.ConditionOp)
        or condition.condition is not compare.result
        or list(condition.args) != list(before[0].args)
    ):
        return None
    counter = before[0].args[0]
    predicate = compare.predicate.value.data
    if predicate == _SLT and compare.lhs is counter:
        bound = compare.rhs
    elif predicate == _SGT and compare.rhs is counter:
        bound = compare.lhs
    else:
        return None
    return None if defined_inside(bound, loop) else bound


def _stays_below_top(bound: SSAValue, step: int, bits: int) -> bool:
    """Whether a counter of `bits` bits below `bound` plus `step` stays of its type
    (never wraps)."""
    if step == 1:
        return True
    top = _signed(bound, bits)
    return top is not None and top - 1 + step <= 2 ** (bits - 1) - 1


__all__ = ["counted_bounds", "counted_step", "other_operand", "while_bound"]
