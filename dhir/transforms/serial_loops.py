"""`dhir-serial-loops`: parallel loops that must not or cannot run on OpenMP threads
become sequential loops.

With OpenMP, mlir-opt-22's convert-scf-to-openmp runs every `scf.parallel` (and every
`affine.parallel`, lowered to one first) on threads. A loop around a schedule, or around
a call of a function holding one, would then send and receive MPI messages from several
threads at once, which dhir's MPI (`MPI_THREAD_FUNNELED`) and runtime do not allow: runs
crashed, hung, or gave wrong results. Such a loop, and any other that reaches MPI or
dhir's runtime (dhir/analysis/communication.py), becomes a nest of `scf.for` (or
`affine.for`) with the same bounds and steps, running its iterations in lexicographic
order; reductions fold each iteration's values into their initial value (the reduction's
identity for `affine.parallel`, as mlir-opt-22's --lower-affine starts from) in that
order, with the loop's own combining ops. That is exactly what the interpreter does, and
a valid order of a parallel loop. An `scf.parallel` with a reduction that
convert-scf-to-openmp cannot make an OpenMP one of (it stops the build on it), and any
parallel loop reducing integers of a width LLVM's atomics do not take (i1, i17), becomes
such a nest too. So does a loop marked `dhir.in_order`: the native backend marks those
whose iterations it cannot prove independent (dhir.analysis.overlaps), which threads
could otherwise run in another order than the interpreter's. Other loops stay parallel.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.analysis.communication import communicates, communicating_functions
from dhir.dialects import affine, arith, scf
from dhir.dialects import affine as dhir_affine
from dhir.dialects import scf as dhir_scf
from dhir.dialects.affine import REDUCTION_COMBINERS, REDUCTION_IDENTITIES
from dhir.dialects.gpu import in_device_code
from dhir.ir.pass_failure import PassFailedAt

# A unit attribute on a parallel loop to run its iterations in order.
IN_ORDER = "dhir.in_order"

# The integer combining ops convert-scf-to-openmp makes OpenMP reductions of, and the
# compares of a min/max (arith.cmpi's predicates slt, sle, sgt, sge, ult, ule, ugt, uge).
_OPENMP_COMBINE = (arith.AddiOp, arith.MuliOp, arith.AndIOp, arith.OrIOp, arith.XOrIOp)
_ORDERINGS = frozenset({2, 3, 4, 5, 6, 7, 8, 9})
# The integer widths of OpenMP's reductions (llvm.atomicrmw takes whole bytes, powers of 2).
_ATOMIC_WIDTHS = frozenset({8, 16, 32, 64})

# Appends to a block the ops folding the body's values into the accumulators; the new ones.
_Fold = Callable[[Block, Sequence[SSAValue]], list[SSAValue]]


@dataclass(frozen=True)
class SerialLoopsPass(ModulePass):
    """Run serially the parallel loops that reach MPI, OpenMP cannot reduce, or so marked.

    `scf.parallel`/`affine.parallel` loops that reach MPI or dhir's runtime, whose
    reductions OpenMP cannot make, or marked `dhir.in_order`, become sequential loop
    nests (run it last before OpenMP sees the loops)."""

    name = "dhir-serial-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        loops = [
            o
            for o in op.walk()
            if isinstance(o, scf.ParallelOp | affine.ParallelOp) and not in_device_code(o)
        ]
        if not loops:
            return
        functions = communicating_functions(op)
        for loop in loops:  # outer loops first; inner ones move along, unchanged
            in_order = IN_ORDER in loop.attributes
            if in_order or communicates(loop, functions) or not _openmp_reduces(loop):
                serialize(loop)


def _openmp_reduces(loop: Operation) -> bool:
    """Whether convert-scf-to-openmp can make OpenMP reductions of the loop's: each an
    integer (not index) reduction whose body is one known op of the two arguments in
    order, or a compare of them and a select of one (min/max; dhir-openmp-reductions
    writes integer min/max so). On anything else it stops ("unconverted operation
    found"). affine.parallel's integer kinds lower to such bodies. The integers must
    also be of a width LLVM's atomics take: on i1 or i17 the build stops at
    'llvm.atomicrmw'."""
    if not isinstance(loop, scf.ParallelOp):
        return all(_atomic_width(type_) for type_ in loop.result_types)
    reduce = loop.body.block.last_op
    assert isinstance(reduce, scf.ReduceOp)
    return all(
        _atomic_width(value.type) and _known_reduction(region.block)
        for value, region in zip(reduce.args, reduce.reductions)
    )


def _atomic_width(type_: Attribute) -> bool:
    return isinstance(type_, IntegerType) and type_.width.data in _ATOMIC_WIDTHS


def _known_reduction(block: Block) -> bool:
    ops = list(block.ops)
    args = list(block.args)
    returned = ops[-1].operands[0] if ops and ops[-1].operands else None
    if len(ops) == 2:
        combine = ops[0]
        return (
            isinstance(combine, _OPENMP_COMBINE)
            and list(combine.operands) == args
            and returned == combine.results[0]
        )
    if len(ops) == 3:
        compare, select = ops[0], ops[1]
        return (
            isinstance(compare, arith.CmpiOp)
            and compare.predicate.value.data in _ORDERINGS
            and list(compare.operands) == args
            and isinstance(select, arith.SelectOp)
            and select.cond == compare.result
            and [select.lhs, select.rhs] in (args, args[::-1])
            and returned == select.result
        )
    return False


def serialize(loop: Operation) -> None:
    """Replace a parallel loop by the sequential nest of the same iterations."""
    if isinstance(loop, scf.ParallelOp):
        _serialize_scf(loop)
    elif isinstance(loop, dhir_affine.ParallelOp):
        _serialize_affine(loop)
    else:
        raise PassFailedAt(loop, f"'{loop.name}' is not one dhir can run sequentially")


def _serialize_scf(loop: scf.ParallelOp) -> None:
    reduce = loop.body.block.last_op
    assert isinstance(reduce, scf.ReduceOp)

    def fold(block: Block, accumulators: Sequence[SSAValue]) -> list[SSAValue]:
        return [
            _inline(region, [acc, value], block)
            for region, acc, value in zip(reduce.reductions, accumulators, reduce.args)
        ]

    dims = [
        _scf_level(lower, upper, step)
        for lower, upper, step in zip(loop.lowerBound, loop.upperBound, loop.step)
    ]
    _nest(loop, dims, list(loop.initVals), fold)


def _serialize_affine(loop: dhir_affine.ParallelOp) -> None:
    kinds = loop.reduction_kinds()
    types = list(loop.result_types)
    identities: list[Operation] = []
    for kind, type_ in zip(kinds, types):
        if kind not in REDUCTION_IDENTITIES:
            raise PassFailedAt(
                loop,
                f'the reduction "{kind}" of this affine.parallel cannot be run (mlir-opt-22 '
                "cannot lower it)",
            )
        identities.append(_constant(REDUCTION_IDENTITIES[kind], type_))
    Rewriter.insert_op(identities, InsertPoint.before(loop))
    yield_op = loop.body.block.last_op
    assert yield_op is not None

    def fold(block: Block, accumulators: Sequence[SSAValue]) -> list[SSAValue]:
        out: list[SSAValue] = []
        for kind, acc, value in zip(kinds, accumulators, yield_op.operands):
            combined = REDUCTION_COMBINERS[kind].create(
                operands=[acc, value], result_types=[acc.type]
            )
            block.add_op(combined)
            out.append(combined.results[0])
        return out

    lower_map, upper_map = loop.lowerBoundsMap.data, loop.upperBoundsMap.data
    lower_count = lower_map.num_dims + lower_map.num_symbols
    lower_operands = list(loop.map_operands[:lower_count])
    upper_operands = list(loop.map_operands[lower_count:])
    lowers = _groups(lower_map, loop.lowerBoundsGroups.get_values())
    uppers = _groups(upper_map, loop.upperBoundsGroups.get_values())
    steps = [s.value.data for s in loop.steps]
    dims = [
        _affine_level(lower, lower_operands, upper, upper_operands, step)
        for lower, upper, step in zip(lowers, uppers, steps)
    ]
    _nest(loop, dims, [o.results[0] for o in identities], fold)


# One level of a nest: given its body (block args: the counter, then the accumulators)
# and initial values, the loop op.
_Level = Callable[[Region, Sequence[SSAValue]], Operation]


def _scf_level(lower: SSAValue, upper: SSAValue, step: SSAValue) -> _Level:
    return lambda body, inits: dhir_scf.ForOp(lower, upper, step, inits, body)


def _affine_level(
    lower: AffineMap,
    lower_operands: list[SSAValue],
    upper: AffineMap,
    upper_operands: list[SSAValue],
    step: int,
) -> _Level:
    def make(body: Region, inits: Sequence[SSAValue]) -> Operation:
        return affine.ForOp.from_region(
            lower_operands,
            upper_operands,
            inits,
            [v.type for v in inits],
            AffineMapAttr(lower),
            AffineMapAttr(upper),
            body,
            step,
        )

    return make


def _nest(loop: Operation, dims: list[_Level], inits: list[SSAValue], fold: _Fold) -> None:
    """Put in the loop's place the nest of `dims` (outermost first) around the loop's body,
    whose counters replace the loop's, with the reductions folded after it. Each level
    passes the accumulators on as its iteration arguments."""
    body = loop.regions[0].block
    terminator = body.last_op
    assert terminator is not None
    types = [v.type for v in inits]
    blocks = [Block(arg_types=[counter.type, *types]) for counter in body.args]
    for counter, block in zip(body.args, blocks):
        counter.replace_all_uses_with(block.args[0])
    # Zero dimensions: the body runs once, in the loop's place.
    innermost = blocks[-1] if blocks else Block()
    accumulators = list(innermost.args[1:]) if blocks else inits
    for op in list(body.ops):
        if op is not terminator:
            op.detach()
            innermost.add_op(op)
    results = fold(innermost, accumulators)
    Rewriter.erase_op(terminator)
    is_affine = isinstance(loop, affine.ParallelOp)
    for level in range(len(dims) - 1, -1, -1):
        blocks[level].add_op(_yield(is_affine, results))
        starts = list(blocks[level - 1].args[1:]) if level > 0 else inits
        made = dims[level](Region(blocks[level]), starts)
        # Each level is the user's loop: its run-time checks (dhir-loop-steps) name it.
        made.location = loop.location
        results = list(made.results)
        if level > 0:
            blocks[level - 1].add_op(made)
        else:
            innermost = Block([made])
    ops = list(innermost.ops)
    for op in ops:
        op.detach()
    Rewriter.replace_op(loop, ops, results)


def _yield(is_affine: bool, values: Sequence[SSAValue]) -> Operation:
    return affine.YieldOp.get(*values) if is_affine else scf.YieldOp(*values)


def _inline(region: Region, args: list[SSAValue], block: Block) -> SSAValue:
    """The ops of a one-block `region` cloned at the end of `block`, its arguments
    bound to `args`; the value its terminator returns."""
    mapping: dict[SSAValue, SSAValue] = dict(zip(region.block.args, args))
    returned: SSAValue | None = None
    for op in region.block.ops:
        if op is region.block.last_op:
            returned = mapping.get(op.operands[0], op.operands[0])
            break
        clone = op.clone(value_mapper=mapping)
        block.add_op(clone)
        mapping.update(zip(op.results, clone.results))
    assert returned is not None
    return returned


def _groups(amap: AffineMap, sizes: Sequence[int]) -> list[AffineMap]:
    """The map of each dimension's bound group (a max or min of its results)."""
    out: list[AffineMap] = []
    start = 0
    for size in sizes:
        results = amap.results[start : start + int(size)]
        out.append(AffineMap(amap.num_dims, amap.num_symbols, tuple(results)))
        start += int(size)
    return out


def _constant(value: float | int, type_: Attribute) -> arith.ConstantOp:
    if isinstance(type_, AnyFloat):
        return arith.ConstantOp(FloatAttr(float(value), type_))
    return arith.ConstantOp(IntegerAttr(int(value), type_))  # type: ignore[arg-type]
