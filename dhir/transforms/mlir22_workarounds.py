"""`dhir-mlir22-workarounds`: valid ops that mlir-opt-22 cannot lower, made into ones it can.

- `vector.insert`/`vector.extract` at a run-time position in a dimension of a vector other
  than its innermost: `convert-vector-to-llvm` crashes on an inserted sub-vector and leaves
  the others in place without a word (mlir-translate then fails). The position becomes each
  of the dimension's static ones in turn, the op's results chosen with `arith.select`; an
  out-of-range position, undefined in MLIR, leaves the vector as it was.
- `memref.expand_shape` with two or more run-time sizes in one group: `expand-strided-metadata`
  crashes. It becomes `memref.reinterpret_cast` of the source's base buffer, with the
  source's offset and the strides an expansion gives (each output dimension's stride is the
  source dimension's times the sizes of the output dimensions after it in its group).
- `memref.alloca_scope` around a loop or any other op with regions: `convert-scf-to-cf`
  makes blocks of the loop inside the scope, which then fails to verify ("expects region
  #0 to have 0 or 1 blocks"). The scope's body moves out between `llvm.intr.stacksave`
  and `llvm.intr.stackrestore`, as `finalize-memref-to-llvm` would lower it: the stack
  its allocas take is still given back at the scope's end.

- `memref.subview` dropping fewer dimensions than it has of size 1, where MLIR's
  getDroppedDims, which matches the *source's* strides against the result's, finds no
  set to drop (`[2, 0] [1, 1] [1, 2] : memref<8x8xf32> to memref<1xf32, strided<[2],
  offset: 16>>`): `expand-strided-metadata` crashes; or finds another set than the
  verifier, which matches the view's strides: the lowering then makes an invalid
  `reinterpret_cast`. It becomes the subview without
  dropping, then a subview of that at offset 0 and stride 1 that drops them (matched
  against the view's own strides, as the verifier does).

- `scf.index_switch`: `convert-scf-to-cf` casts the index to i32 for its `cf.switch`, so
  case 4294967296 matched 0, and cases equal in their low 32 bits made an invalid switch.
  It becomes a chain of `scf.if`, comparing the whole index with each case in order.

- `affine.for` whose bounds are constants giving no iterations: around an `affine.for`
  with a `max` lower bound, canonicalization (also in `expand-strided-metadata`) folds
  the inner bound map to `() -> ()`, which fails to verify. The loop that never runs
  goes, its results replaced by its initial values.

- `math.clampf`: no pass of mlir-opt-22 lowers it but `math-expand-ops`, which takes the
  operands in the wrong order (`maximumf(minimumf(value, min), max)`: 0.5 clamped to
  [0, 1] gave 1). It becomes MLIR's definition, `maximumf(minimumf(value, max), min)`.

- `math.ipowi` on `index` (or vectors of it): `convert-math-to-funcs` makes its power
  function for integer types only, and mlir-opt-22 then fails to legalize the op. It
  becomes `math.ipowi` on i64 between `arith.index_cast`s, the same bits (index is 64
  bits wide on every target dhir builds for).

- `math.isinf` and `math.isnormal`: no pass of mlir-opt-22 lowers them (`convert-math-to-llvm`
  lowers `math.isnan` and `math.isfinite` only). isinf becomes `isfinite == isnan` (both
  false for an infinity only); isnormal `isfinite(x) and absf(x) >= ` the type's smallest
  normal number. Each tests the same class of floats.

- `arith.truncf` and `arith.extf` with fast-math flags: `convert-to-llvm` copies the flags
  onto `llvm.fptrunc`/`llvm.fpext` as an `#arith.fastmath` attribute, which mlir-translate
  rejects ("attribute created with unregistered dialect"). The flags go: a conversion
  rounds alike with and without them.

- `arith.truncf` with a rounding mode: MLIR 22 lowers it to
  `llvm.intr.experimental.constrained.fptrunc`, whose mode only tells LLVM how the CPU is
  set (natively `downward` rounded to nearest), and which for f64 to bf16 calls
  `__truncdfbf2` with the wrong return register. `to_nearest_even` goes (the plain
  truncation rounds so); another mode becomes the truncation to nearest, moved to the
  float beside it where the mode rounds the other way.

- `vector.contract` with a dimension reduced along one operand only (of size above 1):
  the lowering unrolls a dimension of one operand only into the result's, so it left the
  contraction in place. The other operand is broadcast along that dimension (a leading
  one), making it a contracting pair: the same products, summed as the interpreter sums.

- `index.ceildivs` and `index.floordivs`: `convert-to-llvm` computes both of two quotients
  and selects one, and the one it drops may overflow: `ceildivs(INT64_MAX, -1)` and
  `floordivs(INT64_MIN + 1, -1)` died of SIGFPE, `ceildivs(INT64_MIN, 2)` gave 2**62.
  They become `arith.ceildivsi` and `arith.floordivsi`, whose lowering (arith-expand)
  divides once.

- `gpu.subgroup_size`, `gpu.subgroup_id` and `gpu.num_subgroups`: `convert-gpu-to-nvvm`
  lowers none of them. They become 32 (a warp of every sm_* chip), the thread's place in
  its block (x fastest) divided by 32, and the block's threads divided by 32 rounding up:
  what the interpreter gives.
- `gpu.subgroup_reduce`: `convert-gpu-to-nvvm` lowers it only as `redux.sync` (uniform,
  i32, a chip option dhir does not pass). It becomes MLIR's own expansion to shuffles (the
  one its test pass `test-gpu-subgroup-reduce-lowering` makes): xor shuffles of width 32
  at offsets `stride`, `2 * stride`, ... below `stride * size`, each lane combining its
  own value with its partner's, the order the interpreter combines in.
- `gpu.shuffle up`: `convert-gpu-to-nvvm` passes `32 - width` as `shfl.sync`'s clamp, not
  as its segment mask, so below width 32 no lane was valid. It becomes an `idx` shuffle
  from lane `k - offset`, valid where that is not below 0, the op's definition.
- `gpu.all_reduce` without `uniform`, and collectives on values other than i32, f32, i64
  and f64 (`nvvm.shfl.sync` takes 32-bit values; the lowering splits 64-bit ones; a
  `subgroup_reduce` of vectors is not expanded): `convert-gpu-to-nvvm` stops at them.
  They are refused at the op.

Ops no pass of the CPU pipeline lowers are refused at the op, before mlir-opt-22 and
mlir-translate stop at the printed program's line: `vector.multi_reduction`, `vector.scan`,
`vector.contract` of a kind other than add, with operands of another element type than
its accumulator's, or with a parallel dimension of size above 1 the result does not have,
`vector.mask` around anything but a `vector.reduction` (`Dialect vector not found`),
`memref.realloc`, `memref.dma_start` and `memref.dma_wait`, `memref.reshape` to a type with
run-time sizes (or no rank), `vector.vscale`, and `vector.step` of a scalable vector
(x86 has no scalable vectors; clang stops at `llvm.vscale`, or crashes).

docs/upstream-bugs.md sections 13, 15, 17, 21, 23, 25, 27, 28 and 29 have the reproducers.
Each rewrite addresses the same elements as the op it replaces (clampf: computes the op's
definition), so results are exact.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StridedLayoutAttr,
    VectorType,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.dialects import affine, arith, gpu, memref, scf, vector
from dhir.dialects import index as indexd
from dhir.dialects import math as mathd
from dhir.dialects.layouts import dropped_dims, strided_layout, subview_layout
from dhir.dialects.llvm import StackRestoreOp, StackSaveOp
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.walk import find_ops
from dhir.transforms.building import int_constant

_Position = SSAValue | int


@dataclass(frozen=True)
class Mlir22WorkaroundsPass(ModulePass):
    """Rewrite valid ops mlir-opt-22 crashes on or leaves unlowered into ones it lowers.

    Run-time positions in outer vector dimensions become static ones; expand_shape with
    several run-time sizes in a group becomes a reinterpret_cast; alloca_scope around
    loops becomes an explicit stack save and restore."""

    name = "dhir-mlir22-workarounds"

    @property
    def needs(self) -> tuple[type[Operation], ...]:
        return _REWRITTEN

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # One walk finds every kind; no rewrite makes ops of the later kinds, so a kind
        # that walk did not meet needs no walk of its own (most modules have none of them).
        first = find_ops(op, _REWRITTEN)
        met = {type(found) for found in first}
        work: list[Operation] = [
            f for f in first if isinstance(f, vector.InsertOp | vector.ExtractOp)
        ]
        while work:  # each rewrite makes ops with one run-time position fewer
            found = work.pop()
            if isinstance(found, vector.InsertOp | vector.ExtractOp):
                work += _static_position(found)
        if _any(met, memref.ExpandShapeOp):
            for found in find_ops(op, (memref.ExpandShapeOp,)):
                if _crashes(found):
                    _reinterpret(found)
        if _any(met, memref.SubviewOp):
            for found in find_ops(op, (memref.SubviewOp,)):
                if _drops_other_dims(found):
                    _in_two_steps(found)
        if _any(met, scf.IndexSwitchOp):
            for found in find_ops(op, (scf.IndexSwitchOp,)):
                _as_ifs(found)
        if _any(met, affine.ForOp):
            for loop in list(find_ops(op, (affine.ForOp,))):
                if loop.parent is not None and _never_runs(loop):
                    Rewriter.replace_op(loop, [], list(loop.inits))
        for index, found in enumerate(first):
            if isinstance(found, vector.ContractionOp) and _lone_on_cpu(found):
                first[index] = _pair_lone_reductions(found)
        for found in first:
            if isinstance(found, _UNLOWERED) and not _lowered(found):
                raise PassFailedAt(found, _unlowered(found))
        for found in first:
            if isinstance(found, arith.TruncFOp | arith.ExtFOp):
                found.properties.pop("fastmath", None)
            if isinstance(found, arith.TruncFOp) and found.rounding not in _NEAREST:
                _round_directed(found)
            elif isinstance(found, arith.TruncFOp):
                found.properties.pop("roundingmode", None)
        if _any(met, mathd.ClampFOp):
            for clamp in find_ops(op, (mathd.ClampFOp,)):
                _clamp(clamp)
        if _any(met, mathd.FloatClassOp):
            for test in find_ops(op, (mathd.IsInfOp, mathd.IsNormalOp)):
                _classify_by_lowered_ops(test)
        if _any(met, mathd.IPowIOp):
            for power in find_ops(op, (mathd.IPowIOp,)):
                if isinstance(_lane(power.result.type), IndexType):
                    _ipowi_on_i64(power)
        for found in first:
            if isinstance(found, indexd.CeilDivSOp | indexd.FloorDivSOp):
                _divide_once(found)
        if _any(met, memref.AllocaScopeOp):
            for scope in list(find_ops(op, (memref.AllocaScopeOp,))):
                if _holds_regions(scope) and not gpu.in_device_code(scope):
                    _save_and_restore_stack(scope)
        for found in first:
            if isinstance(found, _SUBGROUPS):
                _subgroup_op(found)


# The ops no pass of the CPU pipeline lowers (some masks excepted: see `_lowered`).
_UNLOWERED = (
    vector.MultiDimReductionOp,
    vector.ScanOp,
    vector.MaskOp,
    vector.VectorScaleOp,
    vector.StepOp,
    vector.ContractionOp,
    memref.ReallocOp,
    memref.DmaStartOp,
    memref.DmaWaitOp,
    memref.ReshapeOp,
)
# The GPU ops convert-gpu-to-nvvm cannot lower (some all_reduces and shuffles excepted).
_SUBGROUPS = (
    gpu.SubgroupSizeOp,
    gpu.SubgroupIdOp,
    gpu.NumSubgroupsOp,
    gpu.SubgroupReduceOp,
    gpu.AllReduceOp,
    gpu.ShuffleOp,
)
# The kinds of op the workarounds rewrite (or refuse).
_REWRITTEN = (
    *_SUBGROUPS,
    vector.InsertOp,
    vector.ExtractOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
    scf.IndexSwitchOp,
    affine.ForOp,
    memref.AllocaScopeOp,
    mathd.ClampFOp,
    mathd.IPowIOp,
    mathd.IsInfOp,
    mathd.IsNormalOp,
    arith.ExtFOp,
    arith.TruncFOp,
    indexd.CeilDivSOp,
    indexd.FloorDivSOp,
    *_UNLOWERED,
)


def _divide_once(op: indexd.CeilDivSOp | indexd.FloorDivSOp) -> None:
    """The index division as arith's, which computes the same on index values."""
    kind = arith.CeilDivSIOp if isinstance(op, indexd.CeilDivSOp) else arith.FloorDivSIOp
    Rewriter.replace_op(op, kind(op.lhs, op.rhs, IndexType()))


def _lowered(op: Operation) -> bool:
    """Whether MLIR 22's CPU pipeline lowers `op`, one of `_UNLOWERED`: a mask around a
    reduction only (convert-vector-to-llvm folds the mask into it), a reshape to static
    sizes only; or code for a GPU."""
    if isinstance(op, vector.StepOp):
        return not any(cast(VectorType, op.result.type).get_scalable_dims())
    if gpu.in_device_code(op):
        return True
    if isinstance(op, memref.ReshapeOp):
        result = op.result.type
        return isinstance(result, MemRefType) and DYNAMIC_INDEX not in result.get_shape()
    if isinstance(op, vector.ContractionOp):
        return contraction_unlowered(op) is None
    if not isinstance(op, vector.MaskOp):
        return False
    return any(isinstance(inner, vector.ReductionOp) for inner in op.body.block.ops)


def contraction_unlowered(op: vector.ContractionOp) -> str | None:
    """Why MLIR 22's CPU lowering leaves `op` in place (its ContractionOpLowering takes
    only these), or None where it lowers it."""
    acc = op.acc.type
    element = acc.element_type if isinstance(acc, VectorType) else acc
    kind = str(op.kind.data.value)
    if kind != "add":
        return f"MLIR 22 lowers contractions of kind add only, not {kind}"
    if any(cast(VectorType, o.type).element_type != element for o in (op.lhs, op.rhs)):
        return "MLIR 22 lowers contractions whose operands have the accumulator's element type only"
    maps = [m.data for m in op.indexing_maps.data]
    kept = {cast(AffineDimExpr, e).position for e in maps[2].results}
    for map_, operand in zip(maps, (op.lhs, op.rhs)):
        shape = cast(VectorType, operand.type).get_shape()
        for expr, size in zip(map_.results, shape):
            dim = cast(AffineDimExpr, expr).position
            parallel = str(op.iterator_types.data[dim].data) == "parallel"
            if parallel and dim not in kept and size != 1:
                return (
                    f"MLIR 22 lowers a parallel dimension of size above 1 only where the "
                    f"result has it, and dimension {dim} (of size {size}) is not in the "
                    "result; make it a reduction or give the result that dimension"
                )
    return None


def _lone_on_cpu(op: vector.ContractionOp) -> bool:
    return any(vector.lone_reductions(op)) and not gpu.in_device_code(op)


def _pair_lone_reductions(op: vector.ContractionOp) -> vector.ContractionOp:
    """The contraction with each operand broadcast along the reduced dimensions only the
    other has (`vector.lone_reductions`), as leading dimensions: the same sum of products,
    now with dimensions MLIR 22 lowers, in the order the interpreter uses."""
    left_only, right_only = vector.lone_reductions(op)
    maps = [m.data for m in op.indexing_maps.data]
    sizes: dict[int, int] = {}
    for map_, operand in zip(maps, (op.lhs, op.rhs)):
        shape = cast(VectorType, operand.type).get_shape()
        sizes.update((cast(AffineDimExpr, e).position, n) for e, n in zip(map_.results, shape))
    operands: list[SSAValue] = []
    for index, (operand, lead) in enumerate(((op.lhs, right_only), (op.rhs, left_only))):
        if lead:
            old = cast(VectorType, operand.type)
            wide = VectorType(old.element_type, [sizes[d] for d in lead] + list(old.get_shape()))
            broadcast = vector.BroadcastOp(operand, wide)
            Rewriter.insert_op(broadcast, InsertPoint.before(op))
            operand = broadcast.vector
            dims = tuple(AffineExpr.dimension(d) for d in lead)
            maps[index] = AffineMap(maps[index].num_dims, 0, dims + maps[index].results)
        operands.append(operand)
    paired = vector.ContractionOp.create(
        operands=[*operands, op.acc],
        result_types=[op.result.type],
        properties={
            **op.properties,
            "indexing_maps": ArrayAttr([AffineMapAttr(m) for m in maps]),
        },
        attributes=dict(op.attributes),
    )
    Rewriter.replace_op(op, paired)
    return paired


def _unlowered(op: Operation) -> str:
    if isinstance(op, vector.ContractionOp):
        why = contraction_unlowered(op)
    elif isinstance(op, vector.VectorScaleOp | vector.StepOp):
        why = "the CPUs dhir builds for have no scalable vectors"
    else:
        why = "MLIR 22's CPU lowering leaves it in place"
    hint = {
        vector.MultiDimReductionOp: "; write a vector.reduction of each row",
        vector.MaskOp: "; give the transfer its mask operand, or use vector.maskedload/maskedstore",
        memref.ReallocOp: "; allocate the new buffer and copy into it (memref.alloc, memref.copy)",
        memref.DmaStartOp: "; use memref.copy",
        memref.DmaWaitOp: "; use memref.copy",
        memref.ReshapeOp: " to run-time sizes; give the sizes in its type",
    }.get(type(op), "")
    return f"'{op.name}' is not supported by the native backend: {why}{hint}"


_NEAREST = (None, "to_nearest_even")


def _round_directed(op: arith.TruncFOp) -> None:
    """The truncation rounded to nearest even, then moved to the float on the value's
    other side where the mode rounds that way: the nearest is one of the two floats
    around the value, so its neighbour (its bits plus or minus one) is the other."""
    value, type_ = op.input, op.result.type
    nearest = arith.TruncFOp.create(operands=[value], result_types=[type_])
    back = arith.ExtFOp(nearest.result, value.type)
    lane = cast(AnyFloat, _lane(type_))
    ints = _shaped_like(type_, IntegerType(32 if lane.bitwidth == 32 else 16))
    bits = arith.BitcastOp(nearest.result, ints)
    one, zero = _splat(ints, 1), _splat(ints, 0)
    away_ints = arith.AddiOp(bits.result, one.result)
    nearer_ints = arith.SubiOp(bits.result, one.result)
    away = arith.BitcastOp(away_ints.result, type_)  # one float further from zero
    nearer = arith.BitcastOp(nearer_ints.result, type_)
    ops: list[Operation] = [nearest, back, bits, one, zero, away_ints, nearer_ints, away, nearer]
    mode = op.rounding
    if mode in ("downward", "upward"):
        down = mode == "downward"
        beyond = arith.CmpfOp(back.result, value, "ogt" if down else "olt")
        negative = arith.CmpiOp(bits.result, zero.result, "slt")
        # Toward -inf is away from zero for a negative float, toward it for a positive one.
        step = arith.SelectOp(negative.result, *((away, nearer) if down else (nearer, away)))
        ops += [beyond, negative, step]
        chosen = arith.SelectOp(beyond.result, step.result, nearest.result)
    else:
        size, back_size = mathd.AbsFOp(value), mathd.AbsFOp(back.result)
        ops += [size, back_size]
        if mode == "toward_zero":
            beyond = arith.CmpfOp(back_size.result, size.result, "ogt")
            ops.append(beyond)
            chosen = arith.SelectOp(beyond.result, nearer.result, nearest.result)
        else:  # to_nearest_away: a tie the even float below took goes away from zero
            wide = arith.ExtFOp(away.result, value.type)
            other = mathd.AbsFOp(wide.result)
            short = arith.CmpfOp(size.result, back_size.result, "ogt")
            # Exact: both floats lie within a factor two of the value (Sterbenz).
            below = arith.SubfOp(size.result, back_size.result)
            above = arith.SubfOp(other.result, size.result)
            tie = arith.CmpfOp(below.result, above.result, "oeq")
            away_tie = arith.AndIOp(short.result, tie.result)
            ops += [wide, other, short, below, above, tie, away_tie]
            chosen = arith.SelectOp(away_tie.result, away.result, nearest.result)
    Rewriter.replace_op(op, [*ops, chosen], [chosen.result])


def _shaped_like(type_: Attribute, lane: Attribute) -> Attribute:
    if isinstance(type_, VectorType):
        return VectorType(lane, type_.get_shape(), type_.scalable_dims)
    return lane


def _splat(type_: Attribute, number: int) -> arith.ConstantOp:
    if isinstance(type_, VectorType):
        return arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(type_, [number]))
    return arith.ConstantOp(IntegerAttr(number, cast(IntegerType, type_)))


def _clamp(op: mathd.ClampFOp) -> None:
    below = arith.MinimumfOp(op.value, op.max, op.fastmath)
    above = arith.MaximumfOp(below.result, op.min, op.fastmath)
    Rewriter.replace_op(op, [below, above], [above.result])


# The smallest positive normal number of each float type, by its width in bits (bf16 has
# f32's exponent).
_SMALLEST_NORMAL = {16: 2.0**-14, 32: 2.0**-126, 64: 2.0**-1022}


def _classify_by_lowered_ops(op: mathd.FloatClassOp) -> None:
    """isinf or isnormal of the ops mlir-opt-22 lowers: no flags, so each is exact."""
    finite = mathd.IsFiniteOp.create(operands=[op.operand], result_types=[op.result.type])
    nan = mathd.IsNaNOp.create(operands=[op.operand], result_types=[op.result.type])
    if isinstance(op, mathd.IsInfOp):
        same = arith.CmpiOp(finite.result, nan.result, "eq")
        Rewriter.replace_op(op, [finite, nan, same], [same.result])
        return
    type_ = op.operand.type
    lane = _lane(type_)
    assert isinstance(lane, AnyFloat)
    width = 32 if isinstance(lane, BFloat16Type) else lane.bitwidth
    if width not in _SMALLEST_NORMAL:
        raise PassFailedAt(op, f"'{op.name}' is not supported by the native backend on {lane}")
    smallest = FloatAttr(_SMALLEST_NORMAL[width], lane)
    threshold = arith.ConstantOp(
        DenseIntOrFPElementsAttr.from_list(type_, [smallest.value.data])
        if isinstance(type_, VectorType)
        else smallest
    )
    magnitude = mathd.AbsFOp(op.operand)
    large = arith.CmpfOp(magnitude.result, threshold.result, "oge")
    both = arith.AndIOp(finite.result, large.result)
    Rewriter.replace_op(op, [finite, threshold, magnitude, large, both], [both.result])


def _lane(type_: Attribute) -> Attribute:
    return type_.element_type if isinstance(type_, VectorType) else type_


def _ipowi_on_i64(op: mathd.IPowIOp) -> None:
    index_type = op.result.type
    wide: Attribute = i64
    if isinstance(index_type, VectorType):
        wide = VectorType(i64, index_type.get_shape(), index_type.scalable_dims)
    base, power = (arith.IndexCastOp(v, wide) for v in op.operands)
    on_i64 = mathd.IPowIOp(base.result, power.result)
    back = arith.IndexCastOp(on_i64.result, index_type)
    Rewriter.replace_op(op, [base, power, on_i64, back], [back.result])


def _any(met: Iterable[type[Operation]], kind: type[Operation]) -> bool:
    return any(issubclass(found, kind) for found in met)


def _never_runs(loop: affine.ForOp) -> bool:
    """Bounds of constants only, the lower not below the upper (the body never runs)."""
    n_lower = len(loop.lowerBoundOperands)
    lower = _constant_bound(loop.lowerBoundMap.data, loop.operands[:n_lower], max)
    upper_operands = loop.operands[n_lower : n_lower + len(loop.upperBoundOperands)]
    upper = _constant_bound(loop.upperBoundMap.data, upper_operands, min)
    return lower is not None and upper is not None and lower >= upper


def _constant_bound(
    amap: AffineMap, operands: Sequence[SSAValue], pick: Callable[..., int]
) -> int | None:
    values = [int_constant(v) for v in operands]
    if None in values or not amap.results:
        return None
    known = cast(list[int], values)
    return pick(amap.eval(known[: amap.num_dims], known[amap.num_dims :]))


def _holds_regions(scope: memref.AllocaScopeOp) -> bool:
    blocks = scope.scope.blocks
    return len(blocks) == 1 and any(inner.regions for inner in blocks[0].ops)


def _save_and_restore_stack(scope: memref.AllocaScopeOp) -> None:
    block = scope.scope.block
    returned = block.last_op
    assert isinstance(returned, memref.AllocaScopeReturnOp)
    values = list(returned.operands)
    Rewriter.erase_op(returned)
    save = StackSaveOp()
    Rewriter.insert_op(save, InsertPoint.before(scope))
    Rewriter.inline_block(block, InsertPoint.before(scope))
    Rewriter.insert_op(StackRestoreOp(save.res), InsertPoint.before(scope))
    Rewriter.replace_op(scope, [], values)


def _outer_dynamic(positions: Sequence[_Position], rank: int) -> int | None:
    """The first position given at run time in a dimension other than the innermost."""
    return next(
        (d for d, p in enumerate(positions) if isinstance(p, SSAValue) and d < rank - 1), None
    )


def _static_position(op: vector.InsertOp | vector.ExtractOp) -> list[Operation]:
    """Rewrite `op` if it has a run-time position in an outer dimension; the new inserts
    and extracts (which may have more), else nothing."""
    whole = op.dest.type if isinstance(op, vector.InsertOp) else op.vector.type
    assert isinstance(whole, VectorType)
    positions = op.get_mixed_position()
    dim = _outer_dynamic(positions, whole.get_num_dims())
    if dim is None:
        return []
    index = positions[dim]
    assert isinstance(index, SSAValue)
    made: list[Operation] = []
    ops: list[Operation] = []
    chosen: SSAValue | None = op.dest if isinstance(op, vector.InsertOp) else None
    for value in range(whole.get_shape()[dim]):
        at = [*positions[:dim], value, *positions[dim + 1 :]]
        if isinstance(op, vector.InsertOp):
            one = vector.InsertOp(op.source, op.dest, at, op.result.type)
        else:
            one = vector.ExtractOp(op.vector, at, op.result.type)
        made.append(one)
        ops.append(one)
        if chosen is None:
            chosen = one.result
            continue
        constant = arith.ConstantOp(IntegerAttr(value, IndexType()))
        equal = arith.CmpiOp(index, constant.result, "eq")
        select = arith.SelectOp(equal.result, one.result, chosen)
        ops += [constant, equal, select]
        chosen = select.result
    assert chosen is not None
    Rewriter.replace_op(op, ops, [chosen])
    return made


def _crashes(op: memref.ExpandShapeOp) -> bool:
    """Whether one of the op's groups has two or more run-time output sizes."""
    shape = op.result.type.get_shape()
    return any(sum(shape[d] == DYNAMIC_INDEX for d in group) >= 2 for group in _groups(op))


def _drops_other_dims(op: memref.SubviewOp) -> bool:
    """Whether the subview drops dimensions and MLIR 22's getDroppedDims, matching the
    source's strides against the result's, finds none to drop (it then crashes) or
    others than the verifier, which matches the view's (the lowering then fails)."""
    source, result = op.source.type, op.result.type
    assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
    if len(result.get_shape()) == len(source.get_shape()):
        return False
    mine, theirs = strided_layout(source), strided_layout(result)
    if mine is None or theirs is None:
        return False
    offsets = op.static_offsets.get_values()
    sizes = op.static_sizes.get_values()
    _, view, _ = subview_layout(source, offsets, sizes, op.static_strides.get_values())
    found = dropped_dims(mine[0], theirs[0], sizes)
    return found is None or found != dropped_dims(view, theirs[0], sizes)


def _in_two_steps(op: memref.SubviewOp) -> None:
    """The subview without dropping a dimension, then a subview of all of that (offset 0,
    stride 1) that drops them: the same view."""
    source = op.source.type
    assert isinstance(source, MemRefType)
    offsets = op.static_offsets.get_values()
    sizes = op.static_sizes.get_values()
    steps = op.static_strides.get_values()
    shape, strides, offset = subview_layout(source, offsets, sizes, steps)
    layout = StridedLayoutAttr(strides, offset)
    whole_type = MemRefType(source.element_type, shape, layout, source.memory_space)
    whole = memref.SubviewOp(
        op.source, op.offsets, op.sizes, op.strides, offsets, sizes, steps, whole_type
    )
    rank = len(shape)
    part = memref.SubviewOp(
        whole.result, [], op.sizes, [], [0] * rank, sizes, [1] * rank, op.result.type
    )
    Rewriter.replace_op(op, [whole, part])


def _groups(op: memref.ExpandShapeOp) -> list[list[int]]:
    return [[d.value.data for d in group] for group in op.reassociation]


def _reinterpret(op: memref.ExpandShapeOp) -> None:
    result = op.result.type
    assert isinstance(result, MemRefType)
    meta = memref.ExtractStridedMetaDataOp(op.src)
    ops: list[Operation] = [meta]
    given = iter(op.output_shape)
    sizes: list[_Position] = [
        next(given) if n == DYNAMIC_INDEX else n for n in op.static_output_shape.get_values()
    ]
    strides: list[SSAValue] = [meta.offset] * len(sizes)
    for d, group in enumerate(_groups(op)):
        stride = meta.strides[d]
        for out in reversed(group[1:]):
            strides[out] = stride
            times = arith.MuliOp(stride, _value(sizes[out], ops))
            ops.append(times)
            stride = times.result
        strides[group[0]] = stride
    wanted = result.get_strides()
    assert wanted is not None
    offset = result.layout.get_offset() if isinstance(result.layout, StridedLayoutAttr) else 0
    cast = memref.ReinterpretCastOp(
        meta.base_buffer,
        *_split([_given(offset, meta.offset), *map(_given, wanted, strides)], len(sizes), sizes),
        result_type=result,
    )
    Rewriter.replace_op(op, [*ops, cast])


def _given(static: int | None, value: SSAValue) -> _Position:
    """The static value where the result type has one (the cast must then say it), else
    the computed one."""
    return value if static is None or static == DYNAMIC_INDEX else static


def _value(position: _Position, ops: list[Operation]) -> SSAValue:
    if isinstance(position, SSAValue):
        return position
    constant = arith.ConstantOp(IntegerAttr(position, IndexType()))
    ops.append(constant)
    return constant.result


def _split(
    offset_strides: list[_Position], rank: int, sizes: Sequence[_Position]
) -> tuple[list[SSAValue], list[SSAValue], list[SSAValue], list[int], list[int], list[int]]:
    """ReinterpretCastOp's dynamic offsets, sizes, strides, then their static lists."""
    parts = (offset_strides[:1], sizes, offset_strides[1 : rank + 1])
    dynamic = [[p for p in part if isinstance(p, SSAValue)] for part in parts]
    static = [[DYNAMIC_INDEX if isinstance(p, SSAValue) else p for p in part] for part in parts]
    return dynamic[0], dynamic[1], dynamic[2], static[0], static[1], static[2]


def _as_ifs(op: scf.IndexSwitchOp) -> None:
    """`op` as `scf.if (arg == case0) {...} else { scf.if (arg == case1) ... else default }`."""
    types = list(op.output.types)
    cases = list(op.cases.get_values())
    regions = [_taken(r) for r in op.case_regions]
    chosen = _taken(op.default_region)
    before: list[Operation] = []
    if not cases:  # only the default: taken always
        cases, regions = [0], [chosen.clone()]
        before.append(arith.ConstantOp(IntegerAttr(0, IndexType())))
        key = before[0].results[0]
    else:
        key = op.arg
    tests: list[SSAValue] = []
    for value in cases:
        constant = arith.ConstantOp(IntegerAttr(value, IndexType()))
        equal = arith.CmpiOp(key, constant.result, "eq")
        before += [constant, equal]
        tests.append(equal.result)
    for test, region in reversed(list(zip(tests, regions))):
        choice = scf.IfOp(test, types, region, chosen)
        # The switch's line: a check dhir-wrap-checks puts in a case names it.
        choice.location = op.location
        chosen = Region(Block([choice, scf.YieldOp(*choice.results)]))
    outer = chosen.block.first_op
    assert isinstance(outer, scf.IfOp)
    outer.detach()
    Rewriter.replace_op(op, [*before, outer])


def _taken(region: Region) -> Region:
    """`region`'s blocks, moved into a region of their own."""
    taken = Region()
    region.move_blocks(taken)
    return taken


# --- GPU subgroups ----------------------------------------------------------------------

_WARP = 32
# The types nvvm.shfl.sync moves (64-bit ones in two halves).
_SHUFFLED = (i32, f32, i64, f64)
# gpu.all_reduce's operations as the arith ops that combine two values: for floats, for
# integers.
_COMBINE: dict[str, tuple[type[Operation] | None, type[Operation] | None]] = {
    "add": (arith.AddfOp, arith.AddiOp), "mul": (arith.MulfOp, arith.MuliOp),
    "minui": (None, arith.MinUIOp), "minsi": (None, arith.MinSIOp),
    "maxui": (None, arith.MaxUIOp), "maxsi": (None, arith.MaxSIOp),
    "and": (None, arith.AndIOp), "or": (None, arith.OrIOp), "xor": (None, arith.XOrIOp),
    "minnumf": (arith.MinnumfOp, None), "maxnumf": (arith.MaxnumfOp, None),
    "minimumf": (arith.MinimumfOp, None), "maximumf": (arith.MaximumfOp, None),
}  # fmt: skip


def _subgroup_op(op: Operation) -> None:
    """Rewrite or refuse `op`, one of `_SUBGROUPS`, as the module docstring says."""
    if isinstance(op, gpu.AllReduceOp | gpu.ShuffleOp | gpu.SubgroupReduceOp):
        value = op.operands[0].type
        if value not in _SHUFFLED:
            raise PassFailedAt(
                op,
                f"'{op.name}' cannot be built for an NVIDIA GPU on values of type {value}: MLIR 22 "
                "shuffles i32, f32, i64 and f64 only (the interpreter runs it)",
            )
    if isinstance(op, gpu.AllReduceOp) and op.uniform is None:
        raise PassFailedAt(
            op,
            f"'{op.name}' cannot be built for an NVIDIA GPU without `uniform`: MLIR 22 "
            "lowers only a "
            "gpu.all_reduce that every thread of the block reaches. Add `uniform` (the "
            "interpreter asks every thread to reach it either way)",
        )
    if isinstance(op, gpu.SubgroupReduceOp):
        _reduce_by_shuffles(op)
    elif isinstance(op, gpu.ShuffleOp) and cast(gpu.ShuffleModeAttr, op.mode).data == "up":
        _up_by_index(op)
    elif isinstance(op, gpu.SubgroupSizeOp | gpu.SubgroupIdOp | gpu.NumSubgroupsOp):
        _subgroup_id(op)


def _reduce_by_shuffles(op: gpu.SubgroupReduceOp) -> None:
    kind = cast(gpu.AllReduceOperationAttr, op.op).data.value
    floats, ints = _COMBINE[kind]
    combine = floats if isinstance(op.value.type, AnyFloat) else ints
    if combine is None:
        raise PassFailedAt(
            op, f"'{op.name}' cannot combine values of type {op.value.type} with '{kind}'"
        )
    stride = op.cluster_stride.value.data
    size = op.cluster_size.value.data if op.cluster_size is not None else _WARP
    width = arith.ConstantOp.from_int_and_width(_WARP, i32)
    made: list[Operation] = [width]
    value: SSAValue = op.value
    for step in range(size.bit_length() - 1):
        offset = arith.ConstantOp.from_int_and_width(stride << step, i32)
        shuffle = gpu.ShuffleOp.create(
            operands=[value, offset.result, width.result],
            result_types=[value.type, i1],
            properties={"mode": gpu.ShuffleModeAttr(gpu.ShuffleMode.XOR)},
        )
        combined = combine.create(operands=[value, shuffle.results[0]], result_types=[value.type])
        made += [offset, shuffle, combined]
        value = combined.results[0]
    Rewriter.replace_op(op, made, [value])


def _up_by_index(op: gpu.ShuffleOp) -> None:
    """The shuffle up as its definition says: lane `k` reads lane `k - offset`, valid
    where that is not below 0 (an `idx` shuffle, whose lowering is right in any width),
    else keeps its own value."""
    lane = gpu.LaneIdOp()
    lane32 = arith.IndexCastOp(lane.result, i32)
    source = arith.SubiOp(lane32.result, op.offset)
    zero = arith.ConstantOp.from_int_and_width(0, i32)
    # A lane below 0 is read as lane 0 (idx would take its low 5 bits), then dropped.
    clamped = arith.MaxSIOp(source.result, zero.result)
    shuffle = gpu.ShuffleOp.create(
        operands=[op.value, clamped.result, op.width],
        result_types=[op.value.type, i1],
        properties={"mode": gpu.ShuffleModeAttr(gpu.ShuffleMode.IDX)},
    )
    above = arith.CmpiOp(source.result, zero.result, "sge")
    valid = arith.AndIOp(shuffle.results[1], above.result)
    value = arith.SelectOp(valid.result, shuffle.results[0], op.value)
    made = [lane, lane32, source, zero, clamped, shuffle, above, valid, value]
    Rewriter.replace_op(op, made, [value.result, valid.result])


def _subgroup_id(op: gpu.SubgroupSizeOp | gpu.SubgroupIdOp | gpu.NumSubgroupsOp) -> None:
    warp = arith.ConstantOp.from_int_and_width(_WARP, IndexType())
    if isinstance(op, gpu.SubgroupSizeOp):
        Rewriter.replace_op(op, warp)
        return
    made: list[Operation] = [warp]

    def read(kind: type[gpu.ThreadIdOp | gpu.BlockDimOp], axis: str) -> SSAValue:
        made.append(kind(gpu.DimensionAttr(gpu.DimensionEnum(axis))))
        return made[-1].results[0]

    def apply(kind: type[Operation], a: SSAValue, b: SSAValue) -> SSAValue:
        made.append(kind.create(operands=[a, b], result_types=[IndexType()]))
        return made[-1].results[0]

    sizes = [read(gpu.BlockDimOp, axis) for axis in "xyz"]
    if isinstance(op, gpu.SubgroupIdOp):
        tx, ty, tz = (read(gpu.ThreadIdOp, axis) for axis in "xyz")
        inner = apply(arith.AddiOp, ty, apply(arith.MuliOp, sizes[1], tz))
        place = apply(arith.AddiOp, tx, apply(arith.MuliOp, sizes[0], inner))
        apply(arith.DivUIOp, place, warp.result)
    else:
        threads = apply(arith.MuliOp, apply(arith.MuliOp, sizes[0], sizes[1]), sizes[2])
        apply(arith.CeilDivUIOp, threads, warp.result)
    Rewriter.replace_op(op, made)
