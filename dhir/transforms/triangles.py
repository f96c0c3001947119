"""Helpers of dhir-optimize-bodies for nests that are not rectangles or read down columns.

- Column bounds that move with the row (`for j in [0, i + 1)`: syrk, syr2k, trmm): a
  bound is taken as `coef * row + terms`, the terms fixed in the row loop, and made again
  for any row where the kernel needs it.
- Reads down a column (`A[j, k]` with `j` the column index): the elements the kernel
  reads are first copied into panels, a strip of the kernel's columns per `k`, so that
  it loads vectors along `j` from memory it walks in order. A copy changes no value, so
  the result stays exact.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, MemRefType
from xdsl.ir import Block, Operation, Region, SSAValue

from dhir.dialects import affine, arith, memref, scf
from dhir.dialects.dhir import defined_inside
from dhir.transforms.building import const_index, int_constant, put

# Integer ops whose results may serve as bounds of the column loop.
INDEX_OPS = (arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp)
# What may compute a loop's bounds in the loop around it: index arithmetic, and the
# bounds of a tiled affine loop as --lower-affine makes them (a min or max of maps).
_BOUND_OPS = (*INDEX_OPS, affine.MinOp, affine.MaxOp, affine.ApplyOp)


@dataclass(frozen=True)
class RowBound:
    """A loop bound as `coef * row + const + sum(sign * term)`, each term fixed in the row
    loop."""

    coef: int
    const: int = 0
    terms: tuple[tuple[int, SSAValue], ...] = ()

    def __add__(self, other: "RowBound") -> "RowBound":
        return RowBound(self.coef + other.coef, self.const + other.const, self.terms + other.terms)

    def scaled(self, factor: int) -> "RowBound":
        terms = tuple((sign * factor, term) for sign, term in self.terms)
        return RowBound(self.coef * factor, self.const * factor, terms)

    def at(self, block: Block, row: SSAValue) -> SSAValue:
        """The bound for the row `row`, computed at the end of `block`."""
        value = const_index(block, self.const)
        if self.coef:
            scaled = row if self.coef == 1 else _mul(block, row, self.coef)
            value = put(block, arith.AddiOp(value, scaled)).result
        for sign, term in self.terms:
            scaled = term if sign == 1 else _mul(block, term, sign)
            value = put(block, arith.AddiOp(value, scaled)).result
        return value


def lift(value: SSAValue, row: scf.ForOp) -> RowBound | None:
    """`value` as a RowBound of `row`'s index, or None where it is not one (a value
    computed in the row loop other than by adding, subtracting or scaling by constants)."""
    iv = row.body.block.args[0]
    if value is iv:
        return RowBound(1)
    known = int_constant(value)
    if known is not None:
        return RowBound(0, known)
    if not defined_inside(value, row):
        return RowBound(0, 0, ((1, value),))
    owner = value.owner
    if isinstance(owner, arith.AddiOp | arith.SubiOp):
        lhs, rhs = lift(owner.lhs, row), lift(owner.rhs, row)
        if lhs is None or rhs is None:
            return None
        return lhs + (rhs if isinstance(owner, arith.AddiOp) else rhs.scaled(-1))
    if isinstance(owner, arith.MuliOp):
        lhs, rhs = lift(owner.lhs, row), lift(owner.rhs, row)
        if lhs is None or rhs is None:
            return None
        for scaled, factor in ((lhs, rhs), (rhs, lhs)):
            if factor.coef == 0 and not factor.terms:
                return scaled.scaled(factor.const)
    return None


def only_bounds(ops: Sequence[Operation], loop: scf.ForOp) -> bool:
    """Whether `ops` (beside `loop` in one block) are index arithmetic whose results only
    feed each other and `loop`'s bounds."""
    allowed = set(ops)
    for op in ops:
        if not isinstance(op, _BOUND_OPS) or not isinstance(op.results[0].type, IndexType):
            return False
        for use in op.results[0].uses:
            if use.operation not in allowed and not (use.operation is loop and use.index in (0, 1)):
                return False
    return True


def transposable(load: memref.LoadOp, column: SSAValue, depth: SSAValue) -> bool:
    """Whether `load` reads `X[column, depth]` from a 2-D row-major memref."""
    kind = load.memref.type
    return (
        isinstance(kind, MemRefType)
        and kind.get_num_dims() == 2
        and list(load.indices) == [column, depth]
    )


def pack_panels(
    block: Block,
    sources: Sequence[SSAValue],
    red: scf.ForOp,
    columns: tuple[SSAValue, SSAValue],
    width: int,
) -> tuple[dict[SSAValue, SSAValue], list[Operation]]:
    """At the end of `block`, copy each of `sources` (X, read as `X[j, k]` with `j` the
    column index and `k` `red`'s) for the columns [lo, hi) (`columns`, `hi - lo` a
    multiple of `width`) into panels `P[b, k, c] = X[lo + b * width + c, k]`: a kernel's
    column block then reads one contiguous strip per `k`. The panels by source, and the
    ops that free them. The copy reads only elements the nest reads, when the caller
    gives columns every row of it covers."""
    lo, hi = columns
    size = const_index(block, width)
    blocks = put(block, arith.DivUIOp(put(block, arith.SubiOp(hi, lo)).result, size)).result
    zero = const_index(block, 0)
    depth = put(block, arith.MaxSIOp(red.ub, zero)).result
    panels: dict[SSAValue, SSAValue] = {}
    for source in sources:
        if source not in panels:
            panels[source] = _panel(block, source, (lo, blocks), red, (depth, width))
    return panels, [memref.DeallocOp.get(panel) for panel in panels.values()]


def _panel(
    block: Block,
    source: SSAValue,
    columns: tuple[SSAValue, SSAValue],
    red: scf.ForOp,
    sizes: tuple[SSAValue, int],
) -> SSAValue:
    kind = source.type
    assert isinstance(kind, MemRefType)
    lo, blocks = columns
    depth, width = sizes
    panel = put(
        block,
        memref.AllocOp.get(
            kind.element_type,
            shape=[DYNAMIC_INDEX, DYNAMIC_INDEX, width],
            dynamic_sizes=[blocks, depth],
        ),
    ).memref
    outer = Block(arg_types=[IndexType()])
    middle = Block(arg_types=[IndexType()])
    inner = Block(arg_types=[IndexType()])
    b, k, c = outer.args[0], middle.args[0], inner.args[0]
    first = put(outer, arith.MuliOp(b, const_index(outer, width))).result
    first = put(outer, arith.AddiOp(lo, first)).result
    j = put(inner, arith.AddiOp(first, c)).result
    value = put(inner, memref.LoadOp.get(source, [j, k])).res
    put(inner, memref.StoreOp.get(value, panel, [b, k, c]))
    put(inner, scf.YieldOp())
    one = const_index(block, 1)
    put(middle, scf.ForOp(const_index(block, 0), const_index(block, width), one, [], Region(inner)))
    put(middle, scf.YieldOp())
    put(outer, scf.ForOp(red.lb, red.ub, red.step, [], Region(middle)))
    put(outer, scf.YieldOp())
    put(block, scf.ForOp(const_index(block, 0), blocks, one, [], Region(outer)))
    return panel


def _mul(block: Block, value: SSAValue, factor: int) -> SSAValue:
    return put(block, arith.MuliOp(value, const_index(block, factor))).result
