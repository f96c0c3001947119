"""`dhir-cast-checks`: a `memref.reinterpret_cast` of host code stops the run at its op
when its view reaches outside the buffer it views; so do a `memref.view` and, by default,
a `memref.subview`.

MLIR 22's `--generate-runtime-verification` makes no check for `reinterpret_cast`, and
the accesses through the view are checked only against the view's own sizes: a view
past its buffer read and wrote outside it and exited 0, where the interpreter stops at
the cast. The offset is counted from the start of the buffer (MLIR's base pointer), so
the check needs the buffer's size, which a memref does not carry: the cast's source is
followed back through views (`subview`, `cast`, `reinterpret_cast`, `expand_shape`,
`collapse_shape`, `transpose`, `assume_alignment`, `memory_space_cast`,
`extract_strided_metadata`) to the `memref.alloc`, `alloca` or `get_global` of an
identity layout that made it, or to a function's argument of an identity layout that
is all of its buffer (dhir.analysis.sharing: no call passes it a view; the entry's, as
the harness passes them, the whole arrays, also where a rank holds only its rows, whose
descriptor keeps the global sizes and subscripts). The view's lowest and highest
elements must then lie in it (a view of no element may start anywhere up to its end).
A cast of another ranked memref (an argument some call passes a view, a call's result, a
loop's) must lie inside its source view, whose lowest and highest elements lie in the
buffer: native code read past the buffer there with exit status 0, where the
interpreter stops at the cast. One that reaches past its view into the rest of the
buffer, which the interpreter runs, stops too, saying so. So must a cast of an unranked
memref that a `memref.cast` made of a ranked one (the same pointer and offset), inside
that ranked view. Other casts of unranked memrefs of unknown buffer are refused at the
cast; device code is not checked.

With `undecided` (the default build's mode; MLIR checks them under "all"), a
`memref.cast` to a static size, offset or stride its source's type leaves dynamic is
checked at the cast too: native code read the view by the type's with exit status 0,
where the interpreter stops at the cast.

MLIR 22 checks no `memref.view` either: its bytes, from its shift on, must lie in its
source (a 1-D memref of i8 of the identity layout, whose size its descriptor has), as
the interpreter requires.

A `memref.expand_shape` of run-time sizes is checked in both modes: each group's sizes
must multiply to its source dimension's, as the interpreter requires. MLIR's lowering
takes the run-time size from the source's instead (8 elements as `[%n, 3]`, %n = 2,
read 2 x 3 of them and exited 0), and MLIR checks only that the static sizes divide it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StridedLayoutAttr,
    UnrankedMemRefType,
    i64,
)
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.arg_origins import ArgOrigins, note
from dhir.analysis.lift import Lifted, constant
from dhir.analysis.proven_bounds import InBounds
from dhir.analysis.sharing import CastReach
from dhir.dialects import arith, func, memref
from dhir.dialects.gpu import in_device_code
from dhir.dialects.layouts import is_identity_layout, strided_layout
from dhir.dialects.memref import TransposeOp
from dhir.ir.diagnostics import error_at
from dhir.ir.walk import find_ops
from dhir.transforms.building import declare, put
from dhir.transforms.pass_options import named_entry
from dhir.transforms.vector_checks import CheckBuilder, report_unless

# What a failed check prints (MLIR's later versions check the cast with these words).
OUTSIDE_ITS_BUFFER = "result of reinterpret_cast is out-of-bounds of the base memref"
# A reinterpret_cast whose buffer dhir cannot follow is held to its source view.
OUTSIDE_ITS_SOURCE = (
    "result of reinterpret_cast is out-of-bounds of its source view, whose buffer's size "
    "is not known where it is cast: cast the buffer itself to reach past the view"
)
VIEW_OUTSIDE = "result of view is out-of-bounds of the source memref"
NEGATIVE_SIZE = "reinterpret_cast has a negative size along dimension {dim}"
SUBVIEW_OUTSIDE = "subview runs out-of-bounds along dimension {dim}"  # MLIR's words
# MLIR's words for a memref.cast to a static size, offset or stride the view has not.
SIZE_MISMATCH = "size mismatch of dim {dim}"
OFFSET_MISMATCH = "offset mismatch"
STRIDE_MISMATCH = "stride mismatch of dim {dim}"
RANK_MISMATCH = "rank mismatch"
# A memref.expand_shape whose run-time sizes do not multiply to its source's (MLIR checks
# only that the static ones divide it, under "all").
EXPAND_MISMATCH = "expand_shape's sizes do not multiply to dimension {dim} of its source"

i128 = IntegerType(128)
CAST_SIZE = "dhir_rt_cast_size"
# What a failed check of a memref.cast's layout, a subview or an expand_shape found,
# written before its assert stops the rank (MLIR's words carry no numbers).
CAST_LAYOUT = "dhir_rt_cast_layout"
SUBVIEW_NUMBERS = "dhir_rt_subview_numbers"
EXPAND_SIZES = "dhir_rt_expand_sizes"
_REPORTS = {CAST_LAYOUT: 3, SUBVIEW_NUMBERS: 5, EXPAND_SIZES: 3}

# Ops whose result views the buffer of their first operand.
_VIEWS = (
    memref.SubviewOp,
    memref.CastOp,
    memref.ReinterpretCastOp,
    memref.ExpandShapeOp,
    memref.CollapseShapeOp,
    TransposeOp,
    memref.AssumeAlignmentOp,
    memref.MemorySpaceCastOp,
    memref.ExtractStridedMetaDataOp,
)
_BUFFERS = (memref.AllocOp, memref.AllocaOp, memref.GetGlobalOp)


@dataclass(frozen=True)
class CastChecksPass(ModulePass):
    """Host reinterpret_casts and memref.views check that they stay in their buffer.

    A reinterpret_cast is checked where its buffer is an allocation or a whole argument
    (its size known at run time); a memref.view, against its source; an expand_shape of
    run-time sizes, against its source's sizes; subviews not proven inside their source,
    and memref.casts to a layout their source's type leaves dynamic, in both modes. With
    `undecided`, only the casts and views not proven inside."""

    name = "dhir-cast-checks"
    needs: ClassVar[tuple[type[Operation], ...]] = (
        memref.SubviewOp,
        memref.CastOp,
        memref.ReinterpretCastOp,
        memref.ViewOp,
        memref.ExpandShapeOp,
    )

    undecided: bool = False
    entry: str | None = None  # None: `main`, where the module has it

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        reach = CastReach(op)
        proof = InBounds(op)
        # All decided first, on the module as it is: the checks add ops the lifter would read.
        # In both modes: MLIR checks subviews and casts under "all" too, but its words
        # hold no number; with no check, a view cast to a size or layout it has not was
        # read by the type's, with exit status 0.
        subviews = _undecided_subviews(op, proof)
        memref_casts = _undecided_casts(op)
        host = [c for c in find_ops(op, memref.ReinterpretCastOp) if not in_device_code(c)]
        buffers = [(cast, _buffer(cast.source, reach)) for cast in host]
        casts = [
            (cast, buffer)
            for cast, buffer in buffers
            if buffer is not None and not (self.undecided and _cast_proven(cast, buffer, proof))
        ]
        # Native code read past such a view's buffer with exit status 0, where the
        # interpreter stopped at the cast.
        unknown = _in_ranked_sources(cast for cast, buffer in buffers if buffer is None)
        # One walk for both: a large build runs this pass on every piece.
        shaped = find_ops(op, (memref.ViewOp, memref.ExpandShapeOp))
        views = [
            view
            for view in shaped
            if isinstance(view, memref.ViewOp)
            and not in_device_code(view)
            and not (self.undecided and _view_proven(view, proof))
        ]
        expands = _undecided_expands(e for e in shaped if isinstance(e, memref.ExpandShapeOp))
        origins = ArgOrigins(op, named_entry(self.name, op, self.entry))
        for view, dims in subviews:
            _check_subview(view, dims, origins)
        for cast, claims in memref_casts:
            _check_cast(cast, claims)
        for cast, buffer in casts:
            _check(cast, buffer)
        for cast, source in unknown:
            _check_in_source(cast, source)
        for view in views:
            _check_view(view)
        for expand, groups in expands:
            _check_expand(expand, groups, origins)
        called = {CAST_LAYOUT: memref_casts, SUBVIEW_NUMBERS: subviews, EXPAND_SIZES: expands}
        for callee, made in called.items():
            if made:
                declare(op, callee, [i64] * _REPORTS[callee], [], owner="dhir's runtime")


def _undecided_subviews(
    module: ModuleOp, proof: InBounds
) -> list[tuple[memref.SubviewOp, list[int]]]:
    """The subviews of host code not proven inside their source, with the dimensions
    along which they are not."""
    return [
        (view, dims)
        for view in find_ops(module, memref.SubviewOp)
        if not in_device_code(view) and (dims := undecided_subview_dims(view, proof))
    ]


def _undecided_casts(module: ModuleOp) -> list[tuple[memref.CastOp, "Claims"]]:
    """The memref.casts of host code that claim of their source what its type does not
    say, with what each claims."""
    return [
        (cast, claims)
        for cast in find_ops(module, memref.CastOp)
        if not in_device_code(cast) and (claims := undecided_cast_claims(cast))
    ]


def undecided_subview_dims(view: memref.SubviewOp, proof: InBounds) -> list[int]:
    """The dimensions of its source along which `view` is not proven inside it."""
    offsets = _lifted(proof, view.static_offsets.get_values(), view.offsets)
    sizes = _lifted(proof, view.static_sizes.get_values(), view.sizes)
    strides = view.static_strides.get_values()
    found: list[int] = []
    for dim, (offset, size, stride) in enumerate(zip(offsets, sizes, strides, strict=True)):
        if not _subview_dim_proven(proof, view.source, dim, offset, size, stride):
            found.append(dim)
    return found


@dataclass(frozen=True)
class Claims:
    """What a memref.cast's result type says of its view and the source's type does not:
    the static sizes, by dimension, the offset and the strides."""

    sizes: dict[int, int]
    offset: int | None
    strides: dict[int, int]
    rank: int | None = None  # of the result, where the source is unranked

    def __bool__(self) -> bool:
        claims = (self.sizes, self.offset is not None, self.strides, self.rank is not None)
        return any(claims)


def undecided_cast_claims(cast: memref.CastOp) -> Claims:
    """What `cast`'s result type says that its source's does not: a static offset or
    stride where the source's is dynamic; from an unranked memref, the rank and all
    that is static, sizes too (a ranked source's sizes are dhir-cast-sizes')."""
    source, result = cast.source.type, cast.dest.type
    empty = Claims({}, None, {})
    if isinstance(source, UnrankedMemRefType) and isinstance(result, MemRefType):
        layout = strided_layout(result)
        if layout is None:
            return empty
        static = enumerate(result.get_shape())
        sizes = {dim: size for dim, size in static if size != DYNAMIC_INDEX}
        strides = {dim: stride for dim, stride in enumerate(layout[0]) if stride is not None}
        return Claims(sizes, layout[1], strides, result.get_num_dims())
    if not isinstance(source, MemRefType) or not isinstance(result, MemRefType):
        return empty
    had, got = strided_layout(source), strided_layout(result)
    if had is None or got is None or source.get_num_dims() != result.get_num_dims():
        return empty
    # Its sizes are dhir-cast-sizes' (which runs under "all" too and names them).
    (had_strides, had_offset), (strides, offset) = had, got
    claimed = {
        dim: stride
        for dim, (was, stride) in enumerate(zip(had_strides, strides, strict=True))
        if was is None and stride is not None
    }
    return Claims({}, offset if had_offset is None else None, claimed)


def _check_cast(cast: memref.CastOp, claims: Claims) -> None:
    """At `cast`: the source has each size its result claims; where it has elements, the
    offset too, and each stride of a dimension of more than one element (the interpreter
    refuses the same)."""
    source = cast.source
    if claims.rank is not None:
        check = CheckBuilder(cast, RANK_MISMATCH)
        rank = check.add(memref.RankOp(source))
        check.assert_(check.cmp(rank, check.index(claims.rank), "eq"))
        source = _ranked(cast, claims.rank)
    for dim, size in claims.sizes.items():
        check = CheckBuilder(cast, SIZE_MISMATCH.format(dim=dim))
        check.assert_(check.cmp(check.size(source, dim), check.index(size), "eq"))
    if claims.offset is None and not claims.strides:
        return
    kind = source.type
    assert isinstance(kind, MemRefType)
    layouts = [(OFFSET_MISMATCH, None, claims.offset)] if claims.offset is not None else []
    layouts += [(STRIDE_MISMATCH.format(dim=d), d, s) for d, s in claims.strides.items()]
    for what, dim, want in layouts:
        check = CheckBuilder(cast, what)
        zero, one = check.index(0), check.index(1)
        sizes = [check.size(source, d) for d in range(kind.get_num_dims())]
        metadata = put(check.block, memref.ExtractStridedMetaDataOp(source))
        have = metadata.offset if dim is None else metadata.strides[dim]
        fine = [check.cmp(have, check.index(want), "eq")]
        fine += [check.cmp(size, zero, "eq") for size in sizes]
        if dim is not None:
            fine.append(check.cmp(sizes[dim], one, "sle"))
        ok = check.any(fine)
        report_unless(check.block, ok, CAST_LAYOUT, [-1 if dim is None else dim, have, want])
        check.assert_(ok)


def _ranked(cast: memref.CastOp, rank: int) -> SSAValue:
    """`cast`'s unranked source cast to `rank` dimensions of any size and layout, before
    `cast` (after the check of its rank)."""
    source = cast.source.type
    assert isinstance(source, UnrankedMemRefType)
    layout = StridedLayoutAttr([None] * rank, None)
    kind = MemRefType(source.element_type, [DYNAMIC_INDEX] * rank, layout, source.memory_space)
    ranked = memref.CastOp(cast.source, kind)
    block = cast.parent_block()
    assert block is not None
    block.insert_op_before(ranked, cast)
    return ranked.dest


def _subview_dim_proven(
    proof: InBounds,
    source: SSAValue,
    dim: int,
    offset: Lifted | None,
    size: Lifted | None,
    stride: int,
) -> bool:
    """Whether elements offset, offset + stride, ... (size of them) lie in dimension `dim`
    of `source`, or there are none."""
    if size is None or offset is None:
        return False
    if size.number == 0:
        return True
    if size.number == 1:
        return proof.proven(source, dim, offset)
    if stride == DYNAMIC_INDEX or stride < 1:
        return False
    # The last element is at offset + (size - 1) * stride: at most this high.
    last = Lifted(offset.low, offset.high + size.high.scaled(stride) - constant(stride))
    return proof.proven(source, dim, last)


def _lifted(
    proof: InBounds, static: Sequence[int], dynamic: Sequence[SSAValue]
) -> list[Lifted | None]:
    given = iter(dynamic)
    return [
        proof.lifter.value(next(given)) if value == DYNAMIC_INDEX else Lifted.at(constant(value))
        for value in static
    ]


def _numbers(proof: InBounds, static: Sequence[int], dynamic: Sequence[SSAValue]) -> list[int]:
    """The values of a view's offsets, sizes or strides; empty unless all are known."""
    found = [lifted.number if lifted else None for lifted in _lifted(proof, static, dynamic)]
    return [n for n in found if n is not None] if None not in found else []


def _cast_proven(cast: memref.ReinterpretCastOp, buffer: SSAValue, proof: InBounds) -> bool:
    """Whether `cast`'s numbers and its buffer's sizes are known before the run and keep
    its elements inside the buffer, where its source is that buffer."""
    kind = buffer.type
    if buffer is not cast.source or not isinstance(kind, MemRefType):
        return False  # a view's offset counts from its buffer's start, not its own
    shape = kind.get_shape()
    offsets = _numbers(proof, cast.static_offsets.get_values(), cast.offsets)
    sizes = _numbers(proof, cast.static_sizes.get_values(), cast.sizes)
    strides = _numbers(proof, cast.static_strides.get_values(), cast.strides)
    if DYNAMIC_INDEX in shape or not offsets or not sizes or len(strides) != len(sizes):
        return False
    if any(size < 0 for size in sizes):
        return False  # the run stops at the cast
    if 0 in sizes:
        return 0 <= offsets[0] <= prod(shape)
    steps = [(size - 1) * stride for size, stride in zip(sizes, strides, strict=True)]
    low = offsets[0] + sum(min(step, 0) for step in steps)
    high = offsets[0] + sum(max(step, 0) for step in steps)
    return low >= 0 and high < prod(shape)


def _view_proven(view: memref.ViewOp, proof: InBounds) -> bool:
    """Whether `view`'s shift and sizes are known before the run and keep its bytes inside
    its source of static size."""
    kind, source = view.result.type, view.source.type
    assert isinstance(kind, MemRefType) and isinstance(source, MemRefType)
    element = _view_element_bytes(kind)
    shift = proof.lifter.constant(view.byte_shift)
    sizes = _numbers(proof, kind.get_shape(), view.sizes)
    if element is None or shift is None or len(sizes) != kind.get_num_dims():
        return False
    (total,) = source.get_shape()
    return total != DYNAMIC_INDEX and shift >= 0 and shift + element * prod(sizes) <= total


def _check_subview(view: memref.SubviewOp, dims: list[int], origins: ArgOrigins) -> None:
    """At `view`, along each of `dims`, what the interpreter asks: a size, stride and
    offset of 0 or more, the offset at most the source's extent and, where the view has
    elements, its last one inside; in 128 bits, so that an offset near 2**63 cannot wrap
    past the check. A failure writes the numbers, and its message names the argument the
    source's extent is."""
    offsets = view.static_offsets.get_values()
    sizes = view.static_sizes.get_values()
    strides = view.static_strides.get_values()
    for dim in dims:
        named = note(("", origins.size(view.source, dim)))
        check = CheckBuilder(view, SUBVIEW_OUTSIDE.format(dim=dim) + named)
        (given,) = _values(check, [offsets[dim]], _dynamic_at(view.offsets, offsets, dim))
        (count,) = _values(check, [sizes[dim]], _dynamic_at(view.sizes, sizes, dim))
        (step,) = _values(check, [strides[dim]], _dynamic_at(view.strides, strides, dim))
        offset, size, stride = (_wide(check, v) for v in (given, count, step))
        whole = check.size(view.source, dim)
        extent = _wide(check, whole)
        zero, one = _wide_number(check, 0), _wide_number(check, 1)
        last = check.add(arith.MuliOp(check.add(arith.SubiOp(size, one)), stride))
        last = check.add(arith.AddiOp(offset, last))
        ok = [check.cmp(v, zero, "sge") for v in (size, stride, offset)]
        ok.append(check.cmp(offset, extent, "sle"))
        ok.append(check.any([check.cmp(size, zero, "eq"), check.cmp(last, extent, "slt")]))
        fine = check.all(ok)
        report_unless(check.block, fine, SUBVIEW_NUMBERS, [dim, given, count, step, whole])
        check.assert_(fine)


def _wide(check: CheckBuilder, value: SSAValue) -> SSAValue:
    """`value`, an index, as a signed 128-bit integer: the sums and products of a view's
    numbers cannot wrap there (at offset 2**63 - 9 a view of 16 elements ended at a
    negative one in 64 bits, and passed)."""
    return check.add(arith.ExtSIOp(check.add(arith.IndexCastOp(value, i64)), i128))


def _wide_number(check: CheckBuilder, value: int) -> SSAValue:
    return check.add(arith.ConstantOp(IntegerAttr(value, i128)))


def _dynamic_at(dynamic: Sequence[SSAValue], static: Sequence[int], dim: int) -> list[SSAValue]:
    """The operand of entry `dim` of a view's `static` numbers, where it is dynamic."""
    if static[dim] != DYNAMIC_INDEX:
        return []
    return [dynamic[sum(1 for value in static[:dim] if value == DYNAMIC_INDEX)]]


def _buffer(value: SSAValue, reach: CastReach) -> SSAValue | None:
    """The allocation or whole argument of identity layout `value` views, where it can
    be followed."""
    while isinstance(value, OpResult):
        made = value.op
        if isinstance(made, _BUFFERS):
            return value if _identity(value) else None
        if not isinstance(made, _VIEWS):
            return None
        value = made.operands[0]
    if not isinstance(value, BlockArgument) or not _identity(value):
        return None
    return (
        value if isinstance(value.owner.parent_op(), func.FuncOp) and reach.whole(value) else None
    )


def _identity(value: SSAValue) -> bool:
    kind = value.type
    return isinstance(kind, MemRefType) and is_identity_layout(kind)


def _check_sizes(cast: memref.ReinterpretCastOp) -> None:
    """At `cast`: each size given at run time is 0 or more, as a memref's sizes are (a
    negative one is no view of nothing that may start anywhere: the interpreter stops
    at it)."""
    dynamic = iter(cast.sizes)
    for dim, static in enumerate(cast.static_sizes.get_values()):
        if static == DYNAMIC_INDEX:
            sized = CheckBuilder(cast, NEGATIVE_SIZE.format(dim=dim))
            sized.assert_(sized.cmp(next(dynamic), sized.index(0), "sge"))


@dataclass(frozen=True)
class _Reach:
    """A view's offset, its lowest and highest elements, and whether it has none: 128-bit
    values of a check (with its 0)."""

    offset: SSAValue
    low: SSAValue
    high: SSAValue
    empty: SSAValue
    zero: SSAValue


def _reach(
    check: CheckBuilder, offset: SSAValue, sizes: Sequence[SSAValue], strides: Sequence[SSAValue]
) -> _Reach:
    """The elements a view of `offset`, `sizes` and `strides` (indices) reaches, counted
    from its buffer's start, in 128 bits."""
    offset = _wide(check, offset)
    zero, one = _wide_number(check, 0), _wide_number(check, 1)
    low, high = offset, offset
    empty: list[SSAValue] = []
    for size, stride in zip(sizes, strides, strict=True):
        size, stride = _wide(check, size), _wide(check, stride)
        empty.append(check.cmp(size, zero, "eq"))
        last = check.add(arith.MaxSIOp(check.add(arith.SubiOp(size, one)), zero))
        step = check.add(arith.MuliOp(last, stride))
        low = check.add(arith.AddiOp(low, check.add(arith.MinSIOp(step, zero))))
        high = check.add(arith.AddiOp(high, check.add(arith.MaxSIOp(step, zero))))
    return _Reach(offset, low, high, check.any(empty), zero)


def _cast_reach(check: CheckBuilder, cast: memref.ReinterpretCastOp) -> _Reach:
    (offset,) = _values(check, cast.static_offsets.get_values(), cast.offsets)
    sizes = _values(check, cast.static_sizes.get_values(), cast.sizes)
    strides = _values(check, cast.static_strides.get_values(), cast.strides)
    return _reach(check, offset, sizes, strides)


def _check(cast: memref.ReinterpretCastOp, buffer: SSAValue) -> None:
    """In 128 bits, as a subview's: the view's lowest and highest elements lie in the
    buffer, or it has none and starts at most at the buffer's end; first, that each size
    given at run time is 0 or more."""
    _check_sizes(cast)
    check = CheckBuilder(cast, OUTSIDE_ITS_BUFFER)
    kind = buffer.type
    assert isinstance(kind, MemRefType)
    total = _wide_number(check, 1)
    for dim in range(kind.get_num_dims()):
        total = check.add(arith.MuliOp(total, _wide(check, check.size(buffer, dim))))
    view = _cast_reach(check, cast)
    zero = view.zero
    inside = check.all([check.cmp(view.low, zero, "sge"), check.cmp(view.high, total, "slt")])
    nothing = check.all([view.empty, check.cmp(view.offset, zero, "sge")])
    nothing = check.all([nothing, check.cmp(view.offset, total, "sle")])
    check.assert_(check.any([inside, nothing]))


def _ranked_source(value: SSAValue) -> SSAValue | None:
    """`value` where it is ranked; for an unranked memref that a `memref.cast` made of a
    ranked one, that one (the same pointer and offset); None otherwise."""
    while isinstance(value.type, UnrankedMemRefType):
        owner = value.owner
        if not isinstance(owner, memref.CastOp):
            return None
        value = owner.source
    return value if isinstance(value.type, MemRefType) else None


def _in_ranked_sources(
    casts: Iterable[memref.ReinterpretCastOp],
) -> list[tuple[memref.ReinterpretCastOp, SSAValue]]:
    """Each of `casts`, whose buffer is not known, with the ranked view that bounds it
    (`_ranked_source`); one that none bounds is refused (native code read past the
    buffer through such a cast with exit status 0)."""
    found: list[tuple[memref.ReinterpretCastOp, SSAValue]] = []
    for cast in casts:
        source = _ranked_source(cast.source)
        if source is None:
            raise error_at(
                cast,
                "a memref.reinterpret_cast of an unranked memref whose buffer is not "
                "known here (it is no memref.cast of a ranked memref in this function) "
                "cannot be checked in native code: a cast past the buffer would read "
                "outside it. Pass the ranked memref and cast that, or run it with "
                "--backend interp (which checks the cast), or build with "
                "--no-runtime-checks to take the risk",
            )
        found.append((cast, source))
    return found


def _check_in_source(cast: memref.ReinterpretCastOp, ranked: SSAValue) -> None:
    """Where `cast`'s buffer is not known (a view some call passes, a call's result), its
    view must lie inside its source view's reach, which lies in the buffer: its lowest
    and highest elements between the source's, or it has none and starts where the
    source does or inside its reach (one past its highest element at most). A cast the
    interpreter accepts (inside the buffer, outside the source) stops here too, with
    words that say why: the run never reads outside the buffer unchecked."""
    _check_sizes(cast)
    check = CheckBuilder(cast, OUTSIDE_ITS_SOURCE)
    metadata = put(check.block, memref.ExtractStridedMetaDataOp(ranked))
    source = _reach(check, metadata.offset, metadata.sizes, metadata.strides)
    view = _cast_reach(check, cast)
    full = check.add(arith.XOrIOp(source.empty, check.flag(True)))
    past = check.add(arith.AddiOp(source.high, _wide_number(check, 1)))
    inside = [full, check.cmp(view.low, source.low, "sge")]
    inside.append(check.cmp(view.high, source.high, "sle"))
    within = [full, check.cmp(view.offset, source.low, "sge")]
    within.append(check.cmp(view.offset, past, "sle"))
    start = check.any([check.all(within), check.cmp(view.offset, source.offset, "eq")])
    check.assert_(check.any([check.all(inside), check.all([view.empty, start])]))


def _undecided_expands(
    expands: Iterable[memref.ExpandShapeOp],
) -> list[tuple[memref.ExpandShapeOp, list[int]]]:
    """Those of `expands` in host code, with the source dimensions whose group of result
    sizes is not all static, or whose own size is not (the verifier holds static ones to
    agree)."""
    found: list[tuple[memref.ExpandShapeOp, list[int]]] = []
    for expand in expands:
        source = expand.src.type
        if in_device_code(expand) or not isinstance(source, MemRefType):
            continue
        sizes = expand.static_output_shape.get_values()
        groups = [
            dim
            for dim, group in enumerate(_expand_groups(expand))
            if DYNAMIC_INDEX in (source.get_shape()[dim], *(sizes[r] for r in group))
        ]
        if groups:
            found.append((expand, groups))
    return found


def _expand_groups(expand: memref.ExpandShapeOp) -> list[list[int]]:
    return [[d.value.data for d in group] for group in expand.reassociation]


def _check_expand(expand: memref.ExpandShapeOp, dims: list[int], origins: ArgOrigins) -> None:
    """At `expand`: along each source dimension of `dims`, its group's result sizes are 0
    or more and multiply to the dimension's size, as the interpreter requires; in 128
    bits, the product held at most 2**64 as it grows, so that sizes near 2**63 cannot
    wrap to it."""
    groups = _expand_groups(expand)
    static = expand.static_output_shape.get_values()
    for dim in dims:
        named = note(("", origins.size(expand.src, dim)))
        check = CheckBuilder(expand, EXPAND_MISMATCH.format(dim=dim) + named)
        sizes = _values(check, static, expand.output_shape)
        zero, most = _wide_number(check, 0), _wide_number(check, 2**64)
        product, ok = _wide_number(check, 1), []
        for size in (_wide(check, sizes[r]) for r in groups[dim]):
            ok.append(check.cmp(size, zero, "sge"))
            product = check.add(arith.MuliOp(product, size))
            product = check.add(arith.MinSIOp(product, most))
        size = check.size(expand.src, dim)
        ok.append(check.cmp(product, _wide(check, size), "eq"))
        fine = check.all(ok)
        # Held in 64 bits for the report: a product past 2**63 - 1 is written as that.
        low, high = _wide_number(check, -(2**63)), _wide_number(check, 2**63 - 1)
        held = check.add(arith.MaxSIOp(check.add(arith.MinSIOp(product, high)), low))
        report_unless(
            check.block, fine, EXPAND_SIZES, [dim, check.add(arith.TruncIOp(held, i64)), size]
        )
        check.assert_(fine)


def _view_element_bytes(kind: MemRefType) -> int | None:
    """Bytes of an element of the view `kind` where they are 1, 2, 4 or 8 (the
    interpreter runs no view of others); None otherwise."""
    element = kind.element_type
    width = 64 if isinstance(element, IndexType) else getattr(element, "bitwidth", None)
    if not isinstance(width, int) or width < 8 or width & (width - 1):
        return None
    return width // 8


def _check_view(view: memref.ViewOp) -> None:
    """The view's bytes, from its shift on, lie in its source; for elements of 1, 2, 4 or
    8 bytes (the interpreter runs no view of others). In 128 bits, as a subview's."""
    kind = view.result.type
    assert isinstance(kind, MemRefType)
    element = _view_element_bytes(kind)
    if element is None:
        return
    check = CheckBuilder(view, VIEW_OUTSIDE)
    zero = _wide_number(check, 0)
    sizes = [_wide(check, size) for size in _values(check, kind.get_shape(), view.sizes)]
    shift = _wide(check, view.byte_shift)
    ok = [check.cmp(shift, zero, "sge")]
    end = _wide_number(check, element)
    for size in sizes:
        ok.append(check.cmp(size, zero, "sge"))
        end = check.add(arith.MuliOp(end, size))
    end = check.add(arith.AddiOp(shift, end))
    ok.append(check.cmp(end, _wide(check, check.size(view.source, 0)), "sle"))
    check.assert_(check.all(ok))


def _values(
    check: CheckBuilder, static: Sequence[int], dynamic: Sequence[SSAValue]
) -> list[SSAValue]:
    given = iter(dynamic)
    return [next(given) if value == DYNAMIC_INDEX else check.index(value) for value in static]


@dataclass(frozen=True)
class CastSizesPass(ModulePass):
    """Host memref.casts to a static size check that the run-time size they are given is it.

    A failure names the argument of `entry` that the size is, where the IR says which."""

    name = "dhir-cast-sizes"
    needs: ClassVar[tuple[type[Operation], ...]] = (memref.CastOp,)

    entry: str | None = None  # None: `main`, where the module has it

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        casts = [
            (cast, dims)
            for cast in find_ops(op, memref.CastOp)
            if not in_device_code(cast) and (dims := made_static(cast))
        ]
        origins = ArgOrigins(op, named_entry(self.name, op, self.entry))
        for cast, dims in casts:
            for dim in dims:
                _check_size(cast, dim, note(("", origins.size(cast.source, dim))))
        if casts:
            declare(op, CAST_SIZE, [i64, i64, i64], [], owner="dhir's runtime")


def made_static(cast: memref.CastOp) -> list[int]:
    """The dimensions of run-time size that `cast` gives a static size (none where either
    side is unranked)."""
    source, result = cast.source.type, cast.dest.type
    if not isinstance(source, MemRefType) or not isinstance(result, MemRefType):
        return []
    pairs = zip(source.get_shape(), result.get_shape(), strict=True)
    return [d for d, (s, r) in enumerate(pairs) if s == DYNAMIC_INDEX and r != DYNAMIC_INDEX]


def _check_size(cast: memref.CastOp, dim: int, named: str) -> None:
    """At `cast`: dimension `dim` of its source has the size its result's type says;
    `named`, the argument that size is, ends the failure's message."""
    check = CheckBuilder(cast, SIZE_MISMATCH.format(dim=dim) + named)
    result = cast.dest.type
    assert isinstance(result, MemRefType)
    needed = result.get_shape()[dim]
    size = check.size(cast.source, dim)
    ok = check.cmp(size, check.index(needed), "eq")
    report_unless(check.block, ok, CAST_SIZE, [dim, size, needed])
    check.assert_(ok)
