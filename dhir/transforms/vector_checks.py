"""`dhir-vector-checks`: under `--runtime-checks`, every vector access of host code to a
memref stops the run at its op when it would reach outside the memref.

MLIR 22's `--generate-runtime-verification` checks `memref.load`/`store` but makes no check
for the vector dialect's accesses, the program's own or those dhir-optimize-bodies makes:
native code read or wrote past the memref and exited 0, where the interpreter stops. This
pass puts a `cf.assert` before each, with the message MLIR's checks give (verbose-level=0:
"out-of-bounds access" and the op's location), so that a failed one is reported at the
user's file:line:col as theirs are (dhir.toolchain.failure). The lanes checked are those
the interpreter (the oracle) touches:

- `vector.load`/`vector.store` (and `affine.vector_load`/`store`, lowered to them first as
  `--lower-affine` would): the indices, and the vector's extent along the memref's
  innermost dimensions from them;
- `vector.transfer_read`/`transfer_write`: each lane its mask sets, along the memref
  dimensions its permutation map names, and the indices of the others; along a dimension
  that is not `in_bounds`, lanes from the memref's end on are skipped (a read pads them),
  as native code does; a negative index is outside either way (native code reaches it);
- `vector.maskedload`/`maskedstore`: each lane the mask sets, along the innermost dimension;
- `vector.gather`/`scatter`: the offsets, and each set lane's element, counted in
  row-major order from them, where the memref is contiguous (an identity layout, or a
  strided view without gaps at run time: MLIR adds the lane to the offsets' address);
- `vector.expandload`/`compressstore`: as many elements along the innermost dimension
  from the indices as the mask sets lanes (the k-th set lane's is the index plus k).

A transfer masked by `vector.create_mask` or `vector.constant_mask` (or unmasked) and a
load or store check a few scalar compares, which LLVM hoists out of loops where it can;
other masks, gathers and scatters check their lanes as vectors. Not checked: ops under
`vector.mask`, the lanes of a gather or scatter of a view with gaps (they reach elements
outside it, and the interpreter refuses such a gather) or of a layout that is not strided,
gathers of tensors, device code (it cannot print the message).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr
from xdsl.passes import ModulePass

from dhir.analysis.arg_origins import ArgOrigins, access_note
from dhir.analysis.lift import Lifted
from dhir.analysis.proven_bounds import InBounds, shared_decisions
from dhir.dialects import affine, arith, cf, func, memref, scf, vector
from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import loc_of
from dhir.ir.walk import find_ops
from dhir.transforms.affine_scope import lower_access
from dhir.transforms.building import const_index, insert_before, put
from dhir.transforms.pass_options import named_entry

# What a failed check prints, as MLIR's own checks do (dhir.toolchain.failure reads it).
OUT_OF_BOUNDS = "out-of-bounds access"
CHECK_MESSAGE = "ERROR: Runtime op verification failed\n^ {what}\nLocation: {where}"

_CHECKED = (
    vector.LoadOp,
    vector.StoreOp,
    vector.TransferReadOp,
    vector.TransferWriteOp,
    vector.MaskedLoadOp,
    vector.MaskedStoreOp,
    vector.GatherOp,
    vector.ScatterOp,
    vector.ExpandLoadOp,
    vector.CompressStoreOp,
)
_AFFINE = (affine.VectorLoadOp, affine.VectorStoreOp)


@dataclass(frozen=True)
class VectorChecksPass(ModulePass):
    """Vector loads, stores, transfers, gathers and scatters check they stay in their memref."""

    name = "dhir-vector-checks"
    needs: ClassVar[tuple[type[Operation], ...]] = (*_CHECKED, *_AFFINE)

    # Only the accesses dhir does not prove in bounds (dhir.analysis.proven_bounds): the
    # native backend's default; else every one (--runtime-checks).
    undecided: bool = False
    # The entry whose arguments a failure names, where its memref's sizes are theirs.
    entry: str | None = None  # None: `main`, where the module has it

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        proof = InBounds(op)
        found_ops = [
            found
            for found in find_ops(op, (*_CHECKED, *_AFFINE))
            if not in_device_code(found) and not _under_mask(found)
        ]
        if self.undecided:
            # A nest that generated tasks repeat is proven once.
            proven = shared_decisions(found_ops, lambda found: vector_proven(found, proof))
            found_ops = [found for found, done in zip(found_ops, proven) if not done]
        origins = ArgOrigins(op, named_entry(self.name, op, self.entry))
        for found in found_ops:
            if isinstance(found, _AFFINE):
                found = lower_access(found)  # a vector.load or store, as --lower-affine
            _check(found, _named(origins, found))


def _named(origins: ArgOrigins, op: Operation) -> str:
    """The arguments the sizes of the memref `op` accesses are (each after its dimension
    where it has several), as dhir-bounds-checks names a scalar access's."""
    memories = [v for v in op.operands if isinstance(v.type, MemRefType)]
    if len(memories) != 1:
        return ""
    (memory,) = memories
    kind = memory.type
    assert isinstance(kind, MemRefType)
    return access_note(origins, memory, range(kind.get_num_dims()))


def vector_proven(op: Operation, proof: InBounds) -> bool:
    """Whether every lane the vector access `op` may touch is proven in its memref: a
    load or store (the vector along the innermost dimensions) or a transfer (its lanes
    along the dimensions its map moves along; along one not `in_bounds`, only the index
    from 0 on, as lanes past the end are skipped). Masks and gathers are not followed."""
    if isinstance(op, _AFFINE):
        indices = proof.lifter.map_each(op.map.data, list(op.indices))
        value = op.value if isinstance(op, affine.VectorStoreOp) else op.result
        return _contiguous_proven(op.memref, value.type, indices, proof)
    if isinstance(op, vector.LoadOp | vector.StoreOp):
        value = op.result if isinstance(op, vector.LoadOp) else op.vector
        indices = [proof.lifter.value(v) for v in op.indices]
        return _contiguous_proven(op.base, value.type, indices, proof)
    if isinstance(op, vector.TransferReadOp | vector.TransferWriteOp):
        return _transfer_proven(op, proof)
    return False


def _contiguous_proven(
    memory: SSAValue, value: Attribute, indices: Sequence[Lifted | None], proof: InBounds
) -> bool:
    kind = memory.type
    if not isinstance(kind, MemRefType) or not isinstance(value, VectorType):
        return False
    shape = () if isinstance(kind.element_type, VectorType) else tuple(value.get_shape())
    lead = len(indices) - len(shape)
    if lead < 0:
        return False
    return all(
        proof.proven(memory, d, index, shape[d - lead] if d >= lead else 1)
        for d, index in enumerate(indices)
    )


def _transfer_proven(op: vector.TransferReadOp | vector.TransferWriteOp, proof: InBounds) -> bool:
    memory = op.source
    value = op.result if isinstance(op, vector.TransferReadOp) else op.vector
    if not isinstance(memory.type, MemRefType) or not isinstance(value.type, VectorType):
        return False
    shape = list(value.type.get_shape())
    moved = _moved_dims(op, len(op.indices), len(shape))
    if moved is None:
        return False
    in_bounds = _in_bounds(op, len(shape))
    lane_of = {d: k for k, d in enumerate(moved) if d is not None}
    for d, index in enumerate(op.indices):
        lifted = proof.lifter.value(index)
        k = lane_of.get(d)
        if k is not None and not in_bounds[k]:
            if not proof.not_negative(lifted):
                return False
        elif not proof.proven(memory, d, lifted, shape[k] if k is not None else 1):
            return False
    return True


@dataclass
class _Dim:
    """One memref dimension of an access: its index, its size, and the lanes moving along
    it from the index (None: none do, the index is the element's)."""

    index: SSAValue
    size: SSAValue
    lanes: int | SSAValue | None = None  # how many, for a check by scalars
    positions: SSAValue | None = None  # each lane's offset from the index, a vector of index
    padded: bool = False  # lanes from the end on are skipped (a transfer not in_bounds)


def report_unless(
    block: Block, ok: SSAValue, callee: str, numbers: Sequence[SSAValue | int]
) -> None:
    """Appended to `block`: where `ok` is false, a call of the runtime's `callee` with
    `numbers` as i64 (index values cast, ints as constants, i64 values as they are),
    which writes what a failing check found before its assert stops the rank. The call
    is never made in a run that goes on."""
    report = Block()
    words = [
        put(report, arith.ConstantOp.from_int_and_width(n, 64)).result
        if isinstance(n, int)
        else n
        if n.type == i64
        else put(report, arith.IndexCastOp(n, i64)).result
        for n in numbers
    ]
    put(report, func.CallOp(callee, words, []))
    run_unless(block, ok, report)


def run_unless(block: Block, ok: SSAValue, body: Block) -> None:
    """Appended to `block`: `body` (ended here with its yield) run where `ok` is false."""
    put(body, scf.YieldOp())
    true = put(block, arith.ConstantOp.from_int_and_width(1, i1)).result
    failed = put(block, arith.XOrIOp(ok, true)).result
    put(block, scf.IfOp(failed, [], Region(body)))


class CheckBuilder:
    """The ops of one check of `op`, appended to a block put before it; `what` the
    failure's message says is wrong."""

    def __init__(self, op: Operation, what: str = OUT_OF_BOUNDS) -> None:
        self.op = op
        self.what = what
        self.block = Block()
        self._indices: dict[int, SSAValue] = {}

    def add(self, op: Operation) -> SSAValue:
        return put(self.block, op).results[0]

    def index(self, value: int) -> SSAValue:
        if value not in self._indices:
            self._indices[value] = const_index(self.block, value)
        return self._indices[value]

    def flag(self, value: bool) -> SSAValue:
        return self.add(arith.ConstantOp(IntegerAttr(int(value), i1), i1))

    def cmp(self, left: SSAValue, right: SSAValue, how: str) -> SSAValue:
        return self.add(arith.CmpiOp(left, right, how))

    def all(self, values: Sequence[SSAValue]) -> SSAValue:
        if not values:
            return self.flag(True)
        result = values[0]
        for value in values[1:]:
            result = self.add(arith.AndIOp(result, value))
        return result

    def any(self, values: Sequence[SSAValue]) -> SSAValue:
        if not values:
            return self.flag(False)
        result = values[0]
        for value in values[1:]:
            result = self.add(arith.OrIOp(result, value))
        return result

    def splat(self, value: SSAValue, lanes: int) -> SSAValue:
        return self.add(vector.BroadcastOp(value, VectorType(value.type, [lanes])))

    def reduce_or(self, lanes: SSAValue) -> SSAValue:
        return self._reduce(lanes, vector.CombiningKindFlag.OR, i1)

    def count(self, lanes: SSAValue, count: int) -> SSAValue:
        """How many of `count` lanes (a vector of i1) are set, as an index."""
        ones, zeros = self.splat(self.index(1), count), self.splat(self.index(0), count)
        each = self.add(arith.SelectOp(lanes, ones, zeros))
        return self._reduce(each, vector.CombiningKindFlag.ADD, IndexType())

    def _reduce(self, lanes: SSAValue, how: vector.CombiningKindFlag, kind: Attribute) -> SSAValue:
        reduction = vector.ReductionOp.create(
            operands=[lanes],
            result_types=[kind],
            properties={
                "kind": vector.CombiningKindAttr(how),
                "fastmath": arith.FastMathFlagsAttr("none"),
            },
        )
        return self.add(reduction)

    def size(self, memory: SSAValue, dim: int) -> SSAValue:
        kind = memory.type
        assert isinstance(kind, MemRefType)
        static = kind.get_shape()[dim]
        if static >= 0:
            return self.index(static)
        return self.add(memref.DimOp(memory, self.index(dim)))

    def assert_(self, ok: SSAValue) -> None:
        message = CHECK_MESSAGE.format(what=self.what, where=location_text(self.op))
        put(self.block, cf.AssertOp(ok, message))
        insert_before(self.block, self.op)


def _under_mask(op: Operation) -> bool:
    return isinstance(op.parent_op(), vector.MaskOp)


def _check(op: Operation, named: str) -> None:
    """The check of `op`'s lanes; `named`, the arguments its memref's sizes are, ends
    its failure's message."""
    what = OUT_OF_BOUNDS + named
    if isinstance(op, vector.LoadOp | vector.StoreOp):
        _check_contiguous(op, what)
    elif isinstance(op, vector.TransferReadOp | vector.TransferWriteOp):
        _check_transfer(op, what)
    elif isinstance(op, vector.MaskedLoadOp | vector.MaskedStoreOp):
        _check_masked(op, what)
    elif isinstance(op, vector.ExpandLoadOp | vector.CompressStoreOp):
        _check_packed(op, what)
    else:
        assert isinstance(op, vector.GatherOp | vector.ScatterOp)
        _check_gathered(op, what)


def _check_contiguous(op: vector.LoadOp | vector.StoreOp, what: str) -> None:
    """The vector covers the memref's innermost dimensions from the indices (a memref of
    vectors: one element)."""
    memory = op.base
    kind = memory.type
    value = op.result if isinstance(op, vector.LoadOp) else op.vector
    shape = value.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue]
    assert isinstance(kind, MemRefType)
    if not op.indices:
        return
    if isinstance(kind.element_type, VectorType):
        shape = ()
    if len(shape) > len(op.indices):
        return  # more dimensions than the memref: the interpreter refuses it
    check = CheckBuilder(op, what)
    lead = len(op.indices) - len(shape)
    dims = [
        _Dim(index, check.size(memory, d), shape[d - lead] if d >= lead else None)
        for d, index in enumerate(op.indices)
    ]
    _check_by_scalars(check, dims, ())


def _check_transfer(op: vector.TransferReadOp | vector.TransferWriteOp, what: str) -> None:
    memory = op.source
    if not isinstance(memory.type, MemRefType) or not op.indices:
        return
    value = op.result if isinstance(op, vector.TransferReadOp) else op.vector
    shape = list(value.type.get_shape())  # pyright: ignore[reportAttributeAccessIssue]
    moved = _moved_dims(op, len(op.indices), len(shape))
    if moved is None:
        return  # a map the verifier would refuse
    in_bounds = _in_bounds(op, len(shape))
    check = CheckBuilder(op, what)
    lane_of = {d: k for k, d in enumerate(moved) if d is not None}
    dims = [
        _Dim(
            index,
            check.size(memory, d),
            shape[lane_of[d]] if d in lane_of else None,
            padded=d in lane_of and not in_bounds[lane_of[d]],
        )
        for d, index in enumerate(op.indices)
    ]
    # The mask's dimensions are the memref dimensions the lanes move along, in order.
    masked = sorted(lane_of)
    extents = _mask_extents(check, op.mask, [shape[lane_of[d]] for d in masked])
    if extents is None:
        assert op.mask is not None
        _check_by_lanes(check, dims, masked, op.mask)
        return
    empty: list[SSAValue] = []
    for d, extent in zip(masked, extents, strict=True):
        dims[d].lanes = extent
        if isinstance(extent, SSAValue):
            empty.append(check.cmp(extent, check.index(0), "sle"))
    _check_by_scalars(check, dims, empty)


def _moved_dims(op: Operation, rank: int, vector_rank: int) -> list[int | None] | None:
    """The memref dimension each vector dimension moves along (None: broadcast)."""
    permutation = op.properties.get("permutation_map")
    if not isinstance(permutation, AffineMapAttr):
        return list(range(rank - vector_rank, rank))
    moved: list[int | None] = []
    for expr in permutation.data.results:
        if isinstance(expr, AffineDimExpr):
            moved.append(expr.position)
        elif isinstance(expr, AffineConstantExpr) and expr.value == 0:
            moved.append(None)
        else:
            return None
    return moved


def _in_bounds(op: Operation, vector_rank: int) -> list[bool]:
    found = op.properties.get("in_bounds") or op.attributes.get("in_bounds")
    if isinstance(found, ArrayAttr):
        return [isinstance(b, IntegerAttr) and bool(b.value.data) for b in found.data]
    return [False] * vector_rank


def _mask_extents(
    check: CheckBuilder, mask: SSAValue | None, shape: Sequence[int]
) -> list[int | SSAValue] | None:
    """How many lanes from the first `mask` sets along each of its dimensions, where it
    sets a box of them (none: all; create_mask, constant_mask); else None."""
    if mask is None:
        return list(shape)
    made = mask.owner
    if isinstance(made, vector.ConstantMaskOp):
        sizes = made.properties["mask_dim_sizes"]
        assert isinstance(sizes, DenseArrayBase)
        return [int(v) for v in sizes.get_values()]  # pyright: ignore[reportUnknownArgumentType, reportArgumentType]
    if isinstance(made, vector.CreateMaskOp):
        extents: list[int | SSAValue] = []
        for size, bound in zip(made.mask_dim_sizes, shape, strict=True):
            low = check.add(arith.MaxSIOp(size, check.index(0)))
            extents.append(check.add(arith.MinSIOp(low, check.index(bound))))
        return extents
    return None


def _check_by_scalars(check: CheckBuilder, dims: Sequence[_Dim], empty: Sequence[SSAValue]) -> None:
    """No lane reaches outside: along each dimension, the lanes from the index, the index
    alone where none move; none are touched when a mask sets none (`empty`) or a padded
    dimension starts at or past its end."""
    if any(isinstance(d.lanes, int) and d.lanes <= 0 for d in dims):
        return  # no lane
    zero = check.index(0)
    skipped = [*empty, *(check.cmp(d.index, d.size, "sge") for d in dims if d.padded)]
    inside = [check.cmp(d.index, zero, "sge") for d in dims]
    for d in dims:
        if d.lanes is None:
            inside.append(check.cmp(d.index, d.size, "slt"))
        elif not d.padded:
            lanes = d.lanes if isinstance(d.lanes, SSAValue) else check.index(d.lanes)
            # index <= size - lanes, not index + lanes <= size: that sum wrapped for an
            # index near 2**63 and passed. A size and a count of lanes cannot wrap.
            room = check.add(arith.SubiOp(d.size, lanes))
            inside.append(check.cmp(d.index, room, "sle"))
    check.assert_(check.any([*skipped, check.all(inside)]))


def _check_by_lanes(
    check: CheckBuilder, dims: list[_Dim], masked: Sequence[int], mask: SSAValue
) -> None:
    """A transfer under a mask set lane by lane: each mask dimension's lanes as vectors
    of positions over the flattened mask."""
    shape = mask.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue]
    count = 1
    for extent in shape:
        count *= extent
    flat = VectorType(i1, [count])
    lanes = mask if len(shape) == 1 else check.add(vector.ShapeCastOp.create(
        operands=[mask], result_types=[flat]
    ))  # fmt: skip
    coordinates = list(product(*map(range, shape)))
    for axis, d in enumerate(masked):
        steps = [point[axis] for point in coordinates]
        dims[d].positions = _index_vector(check, steps)
    _assert_lanes(check, dims, lanes, count)


def _check_masked(op: vector.MaskedLoadOp | vector.MaskedStoreOp, what: str) -> None:
    """Lane k of the mask at the innermost index plus k."""
    if (start := _along_innermost(op, op.base, op.indices, op.mask, what)) is None:
        return
    check, dims, count = start
    dims[-1].positions = _index_vector(check, range(count))
    _assert_lanes(check, dims, op.mask, count)


def _along_innermost(
    op: Operation, memory: SSAValue, indices: Sequence[SSAValue], mask: SSAValue, what: str
) -> "tuple[CheckBuilder, list[_Dim], int] | None":
    """The builder, the dimensions at `op`'s indices and the mask's lane count of an op
    whose lanes run along the innermost dimension of a memref of scalars; None for a
    0-d memref or one of vectors, which such an op does not check."""
    kind = memory.type
    assert isinstance(kind, MemRefType)
    if not indices or isinstance(kind.element_type, VectorType):
        return None
    count = mask.type.get_shape()[0]  # pyright: ignore[reportAttributeAccessIssue]
    check = CheckBuilder(op, what)
    dims = [_Dim(index, check.size(memory, d)) for d, index in enumerate(indices)]
    return check, dims, count


def _check_packed(op: vector.ExpandLoadOp | vector.CompressStoreOp, what: str) -> None:
    """As many elements as the mask sets lanes, along the innermost dimension from the
    indices: the k-th set lane's is the index plus k."""
    if (start := _along_innermost(op, op.base_, op.indices, op.mask, what)) is None:
        return
    check, dims, count = start
    total = check.count(op.mask, count)
    dims[-1].lanes = total
    _check_by_scalars(check, dims, [check.cmp(total, check.index(0), "sle")])


def _assert_lanes(check: CheckBuilder, dims: Sequence[_Dim], mask: SSAValue, count: int) -> None:
    """No lane the mask sets, and native code touches, is outside; nor the index of a
    dimension no lane moves along, where any lane is touched."""
    zero = check.index(0)
    live = [mask]
    outside: list[SSAValue] = []
    fixed: list[SSAValue] = []
    for d in dims:
        if d.positions is None:
            within = check.all([check.cmp(d.index, zero, "sge"), check.cmp(d.index, d.size, "slt")])
            fixed.append(check.add(arith.XOrIOp(within, check.flag(True))))
            continue
        # Lane k is below 0 where index < -k and at or past the end where
        # index >= size - k: index + k wrapped for an index near 2**63 (a padded lane
        # past the end was taken for a negative one and stopped a read the interpreter
        # pads). Neither -k nor size - k can wrap.
        at = check.splat(d.index, count)
        first = check.add(arith.SubiOp(check.splat(zero, count), d.positions))
        room = check.add(arith.SubiOp(check.splat(d.size, count), d.positions))
        outside.append(check.cmp(at, first, "slt"))
        if d.padded:
            live.append(check.cmp(at, room, "slt"))
        else:
            outside.append(check.cmp(at, room, "sge"))
    touched = check.all(live)
    bad = [check.reduce_or(check.all([touched, check.any(outside)]))] if outside else []
    if fixed:
        bad.append(check.all([check.any(fixed), check.reduce_or(touched)]))
    check.assert_(check.add(arith.XOrIOp(check.any(bad), check.flag(True))))


def _check_gathered(op: vector.GatherOp | vector.ScatterOp, what: str) -> None:
    """The offsets are in the memref, and each set lane's element, `index_vec` elements
    on from them in row-major order; of a strided view, where it is contiguous."""
    memory = op.base_
    kind = memory.type
    if not isinstance(kind, MemRefType) or not op.offsets:
        return
    if isinstance(kind.element_type, VectorType):
        return
    check = CheckBuilder(op, what)
    sizes = [check.size(memory, d) for d in range(len(op.offsets))]
    contiguous = _contiguous(check, memory, sizes)
    if contiguous is None:
        return  # a layout that is no strided one
    zero = check.index(0)
    inside: list[SSAValue] = []
    start = zero
    for index, size in zip(op.offsets, sizes, strict=True):
        inside += [check.cmp(index, zero, "sge"), check.cmp(index, size, "slt")]
        start = check.add(arith.AddiOp(check.add(arith.MuliOp(start, size)), index))
    total = check.index(1)
    for size in sizes:
        total = check.add(arith.MuliOp(total, size))
    shape = op.mask.type.get_shape()  # pyright: ignore[reportAttributeAccessIssue]
    count = 1
    for extent in shape:
        count *= extent
    lanes = _flattened(check, op.index_vec, count)
    element = lanes.type.element_type  # pyright: ignore[reportAttributeAccessIssue]
    if not isinstance(element, IndexType):
        lanes = check.add(arith.IndexCastOp(lanes, VectorType(IndexType(), [count])))
    at = check.add(arith.AddiOp(check.splat(start, count), lanes))
    below = check.cmp(at, check.splat(zero, count), "slt")
    past = check.cmp(at, check.splat(total, count), "sge")
    mask = _flattened(check, op.mask, count)
    bad = check.reduce_or(check.all([mask, check.any([below, past])]))
    bad = check.all([contiguous, bad])
    outside = check.add(arith.XOrIOp(bad, check.flag(True)))
    check.assert_(check.all([*inside, outside]))


def _contiguous(
    check: CheckBuilder, memory: SSAValue, sizes: Sequence[SSAValue]
) -> SSAValue | None:
    """Whether `memory`'s elements lie in row-major order one after the other, as NumPy's
    C-contiguous (a stride along a dimension of one element is any); None: its layout is
    no strided one.

    MLIR adds a gather's lanes to the address of its offsets: in a view with gaps, a lane
    reaches elements of the buffer outside the view, which the interpreter refuses to
    run at all, so such a view's lanes are left unchecked."""
    kind = memory.type
    assert isinstance(kind, MemRefType)
    if isinstance(kind.layout, NoneAttr):
        return check.flag(True)
    static = kind.get_strides()
    if static is None:
        return None
    strides: list[SSAValue] = []
    metadata = None
    for d, stride in enumerate(static):
        if stride is not None:
            strides.append(check.index(stride))
            continue
        if metadata is None:
            metadata = memref.ExtractStridedMetaDataOp(memory)
            put(check.block, metadata)
        strides.append(metadata.strides[d])
    ok: list[SSAValue] = []
    packed = check.index(1)
    for size, stride in reversed(list(zip(sizes, strides, strict=True))):
        one = check.cmp(size, check.index(1), "eq")
        ok.append(check.any([one, check.cmp(stride, packed, "eq")]))
        packed = check.add(arith.MuliOp(packed, size))
    return check.all(ok)


def _flattened(check: CheckBuilder, lanes: SSAValue, count: int) -> SSAValue:
    kind = lanes.type
    assert isinstance(kind, VectorType)
    if kind.get_num_dims() == 1:
        return lanes
    flat = VectorType(kind.element_type, [count])
    return check.add(vector.ShapeCastOp.create(operands=[lanes], result_types=[flat]))


def _index_vector(check: CheckBuilder, values: Sequence[int]) -> SSAValue:
    kind = VectorType(IndexType(), [len(values)])
    return check.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(kind, list(values))))


def location_text(op: Operation) -> str:
    """`op`'s location (or its nearest located ancestor's, for an op dhir made) as MLIR
    prints it in its checks' messages: `loc("file":line:col)`, the file's bytes outside
    printable ASCII (and `"`) as `\\XX`."""
    where = loc_of(op)
    if where is None:
        return "loc(unknown)"
    name = "".join(_escaped(byte) for byte in where.file.encode())
    return f'loc("{name}":{where.line}:{where.col})'


def _escaped(byte: int) -> str:
    if byte == ord("\\"):
        return "\\\\"
    if 0x20 <= byte < 0x7F and byte != ord('"'):
        return chr(byte)
    return f"\\{byte:02X}"
