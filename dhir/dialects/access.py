"""What each op dhir understands does to memory: the one place analyses and transforms
ask (dhir/analysis/effects.py, regions.py, work.py, reuse.py, footprint.py, sharing.py,
dhir/transforms/codedrop.py, split_reductions.py, gpu_kernels.py).

`facts(op)` says which memrefs an op reads and writes, at which subscripts (SSA index
operands, maybe through an affine map, maybe widened by the lanes of a vector) or
anywhere in them, and whether a write overwrites every element it names; which results
point into the memory of its operands (views, the base buffer of
`extract_strided_metadata`, whatever pure arithmetic makes of an address); and what kind
of op it is. Dispatch is on op classes (xDSL's, which dhir's own versions subclass, and
dhir's where it defines an op xDSL lacks), never on names. An op without facts (a call,
`memref.dealloc`, `memref.realloc`, an op of a dialect dhir does not list) is unknown:
callers take it to read and write all it can reach, and its results to point there too.

xDSL's memory-effect traits are not used as a fallback: they name no subscripts, and
xDSL marks some ops of dialects dhir does not model as pure, which would let codedrop
and dhir-split move or copy them.
"""

from collections.abc import Callable
from enum import Enum, auto
from typing import NamedTuple

from xdsl.dialects import affine, arith, gpu, math, memref, vector
from xdsl.dialects.builtin import VectorType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap

from dhir.dialects import affine as daffine
from dhir.dialects import arith as darith
from dhir.dialects import index as dindex
from dhir.dialects import math as dmath
from dhir.dialects import memref as dmemref


class Kind(Enum):
    """What an op with facts is, for the callers that treat kinds apart."""

    LOAD = auto()  # reads one element or vector (memref/affine/vector load, transfer_read)
    STORE = auto()  # writes one element or vector
    COPY = auto()  # reads one whole memref, overwrites another (memref.copy, gpu.memcpy)
    ATOMIC = auto()  # reads and writes one element (atomic_rmw, generic_atomic_rmw)
    STRUCTURED = auto()  # a linalg structured op: reads its inputs, updates its outputs
    VIEW = auto()  # its result points into operand 0's memory; touches no data
    SHAPE = auto()  # reads the descriptor only (dim, rank, extract_strided_metadata)
    ALLOC = auto()  # its result is a new buffer (alloc, alloca, gpu.alloc)
    PURE = auto()  # computes values from values, touches no memory (arith, math, affine.apply)


class ViewKind(Enum):
    """How a view's indices map to its source's, for region analysis."""

    SAME = auto()  # the same elements at the same indices (cast, memory_space_cast, ...)
    SUBVIEW = auto()  # offsets, sizes and strides (memref.subview)
    TRANSPOSE = auto()  # a permutation of the dimensions (memref.transpose)
    OTHER = auto()  # anything else (reinterpret_cast, reshapes, view, an address)


class Access(NamedTuple):
    """One memref operand an op reads or writes.

    `indices` are the op's subscript operands (the operands of `map` for affine ops);
    when `whole` is set they do not say which elements are touched (a copy, a
    transfer_read that may be masked, a linalg operand): any element may be. `lanes`:
    the vector moved, which widens the trailing dimensions. `exact`: a write that
    overwrites every element it names. `value`: what a load yields or a store stores."""

    memref: SSAValue
    read: bool = False
    write: bool = False
    indices: tuple[SSAValue, ...] = ()
    map: AffineMap | None = None
    lanes: VectorType | None = None
    whole: bool = False
    exact: bool = False
    value: SSAValue | None = None


class Facts(NamedTuple):
    """What an op does to memory: its accesses, the results that may point where its
    operands point (`derived`), and its kind (`view` for views)."""

    # Named tuples: the analyses ask for the facts of every op of every task.
    kind: Kind
    accesses: tuple[Access, ...] = ()
    derived: tuple[SSAValue, ...] = ()
    view: ViewKind | None = None

    def memrefs(self) -> tuple[SSAValue, ...]:
        """The operands the op takes as memory (accessed, viewed or measured)."""
        return tuple(a.memref for a in self.accesses)


# --- the facts, by op class ------------------------------------------------------------


def _load(op: Operation) -> Facts:
    memref, *indices = op.operands
    access = Access(memref, True, False, tuple(indices), value=op.results[0])
    return Facts(Kind.LOAD, (access,))


def _store(op: Operation) -> Facts:
    value, memref, *indices = op.operands
    access = Access(memref, False, True, tuple(indices), exact=True, value=value)
    return Facts(Kind.STORE, (access,))


def _affine_move(read: bool, lanes: bool) -> Callable[[Operation], Facts]:
    """The facts of an affine load (`read`) or store, of one element or (`lanes`) of a
    vector."""

    def facts_of(op: Operation) -> Facts:
        if read:
            (memref, *indices), value = op.operands, op.results[0]
        else:
            value, memref, *indices = op.operands
        kind_ = Kind.LOAD if read else Kind.STORE
        return Facts(kind_, (_affine(op, memref, indices, value, lanes, read),))

    return facts_of


def _affine(
    op: Operation,
    memref: SSAValue,
    indices: list[SSAValue],
    value: SSAValue,
    lanes: bool,
    read: bool,
) -> Access:
    """An affine load's or store's access: its map's results are the subscripts, and a
    vector one's `value` covers lanes (a plain one may move a vector element whole)."""
    data = getattr(op.properties.get("map"), "data", None)
    if not isinstance(data, AffineMap):
        return Access(memref, read, not read, tuple(indices), whole=True)
    vector_ = _lanes(value) if lanes else None
    return Access(memref, read, not read, tuple(indices), data, vector_, False, not read, value)


def _vector_load(op: Operation) -> Facts:
    memref, *indices = op.operands
    value = op.results[0]
    access = Access(memref, True, False, tuple(indices), None, _lanes(value), value=value)
    return Facts(Kind.LOAD, (access,))


def _vector_store(op: Operation) -> Facts:
    value, memref, *indices = op.operands
    access = Access(memref, False, True, tuple(indices), None, _lanes(value), False, True, value)
    return Facts(Kind.STORE, (access,))


def _lanes(value: SSAValue) -> VectorType | None:
    type_ = value.type
    return type_ if isinstance(type_, VectorType) else None


def _transfer_read(op: Operation) -> Facts:
    # A permutation map, a mask and out-of-bounds lanes: which elements is not modelled.
    assert isinstance(op, vector.TransferReadOp)
    access = Access(op.source, read=True, indices=tuple(op.indices), whole=True, value=op.result)
    return Facts(Kind.LOAD, (access,))


def _transfer_write(op: Operation) -> Facts:
    assert isinstance(op, vector.TransferWriteOp)
    access = Access(op.source, write=True, indices=tuple(op.indices), whole=True, value=op.vector)
    return Facts(Kind.STORE, (access,))


def _copy(op: Operation) -> Facts:
    return _copy_of(op.operands[0], op.operands[1])


def _memcpy(op: Operation) -> Facts:
    # operands: async dependencies..., dst, src
    return _copy_of(op.operands[-1], op.operands[-2])


def _copy_of(source: SSAValue, target: SSAValue) -> Facts:
    read = Access(source, read=True, whole=True)
    written = Access(target, write=True, whole=True, exact=True)
    return Facts(Kind.COPY, (read, written))


def _atomic_rmw(op: Operation) -> Facts:
    access = Access(
        op.operands[1], read=True, write=True, indices=tuple(op.operands[2:]), exact=True
    )
    return Facts(Kind.ATOMIC, (access,))


def _generic_atomic_rmw(op: Operation) -> Facts:
    access = Access(
        op.operands[0], read=True, write=True, indices=tuple(op.operands[1:]), exact=True
    )
    return Facts(Kind.ATOMIC, (access,))


def _structured(op: Operation) -> Facts:
    assert isinstance(op, LinalgStructuredOperation)
    # Outputs are read too: a matmul accumulates, a generic may read its outs (region
    # analysis refines this from the body).
    reads = tuple(Access(v, read=True, whole=True) for v in op.inputs)
    updates = tuple(Access(v, read=True, write=True, whole=True) for v in op.outputs)
    return Facts(Kind.STRUCTURED, reads + updates, derived=tuple(op.results))


def _view(kind: ViewKind) -> Callable[[Operation], Facts]:
    def facts_of(op: Operation) -> Facts:
        return Facts(Kind.VIEW, derived=tuple(op.results), view=kind)

    return facts_of


def _shape(op: Operation) -> Facts:
    return Facts(Kind.SHAPE)


def _strided_metadata(op: Operation) -> Facts:
    # Reads no data, but its first result is the base buffer.
    return Facts(Kind.SHAPE, derived=tuple(op.results[:1]))


def _alloc(op: Operation) -> Facts:
    return Facts(Kind.ALLOC)


def _pure(op: Operation) -> Facts:
    # What pure ops make of a pointer (an address as an integer, an arith.select of two
    # memrefs) still points there.
    return Facts(Kind.PURE, derived=tuple(op.results))


_Classes = type[Operation] | tuple[type[Operation], ...]
_Builder = Callable[[Operation], Facts]

_BY_CLASS: tuple[tuple[_Classes, Kind, _Builder], ...] = (
    (affine.VectorLoadOp, Kind.LOAD, _affine_move(read=True, lanes=True)),
    (affine.VectorStoreOp, Kind.STORE, _affine_move(read=False, lanes=True)),
    (affine.LoadOp, Kind.LOAD, _affine_move(read=True, lanes=False)),
    (affine.StoreOp, Kind.STORE, _affine_move(read=False, lanes=False)),
    (memref.LoadOp, Kind.LOAD, _load),
    (memref.StoreOp, Kind.STORE, _store),
    (vector.LoadOp, Kind.LOAD, _vector_load),
    (vector.StoreOp, Kind.STORE, _vector_store),
    (vector.TransferReadOp, Kind.LOAD, _transfer_read),
    (vector.TransferWriteOp, Kind.STORE, _transfer_write),
    (memref.CopyOp, Kind.COPY, _copy),
    (gpu.MemcpyOp, Kind.COPY, _memcpy),
    (memref.AtomicRMWOp, Kind.ATOMIC, _atomic_rmw),
    (dmemref.GenericAtomicRMWOp, Kind.ATOMIC, _generic_atomic_rmw),
    (LinalgStructuredOperation, Kind.STRUCTURED, _structured),
    (
        (memref.CastOp, memref.MemorySpaceCastOp, memref.AssumeAlignmentOp),
        Kind.VIEW,
        _view(ViewKind.SAME),
    ),
    (memref.SubviewOp, Kind.VIEW, _view(ViewKind.SUBVIEW)),
    (dmemref.TransposeOp, Kind.VIEW, _view(ViewKind.TRANSPOSE)),
    (
        (
            memref.ReinterpretCastOp,
            memref.CollapseShapeOp,
            memref.ExpandShapeOp,
            memref.ViewOp,
            memref.ExtractAlignedPointerAsIndexOp,
        ),
        Kind.VIEW,
        _view(ViewKind.OTHER),
    ),
    ((memref.DimOp, memref.RankOp), Kind.SHAPE, _shape),
    (memref.ExtractStridedMetaDataOp, Kind.SHAPE, _strided_metadata),
    ((memref.AllocOp, memref.AllocaOp, gpu.AllocOp), Kind.ALLOC, _alloc),
    ((affine.ApplyOp, affine.MinOp, daffine.MaxOp), Kind.PURE, _pure),
    ((daffine.DelinearizeIndexOp, daffine.LinearizeIndexOp), Kind.PURE, _pure),
)

# Whole dialects of pure ops: arith, math and index compute values only (no op of theirs
# has a region or touches memory).
_PURE_DIALECTS = (arith.Arith, darith.Arith, math.Math, dmath.Math, dindex.Index)
_PURE_CLASSES: frozenset[type[Operation]] = frozenset(
    op for dialect in _PURE_DIALECTS for op in dialect.operations
)

# Per op class: its kind and facts builder, or None (looked up once per class: the
# analyses ask for every op of every task).
_by_type: dict[type[Operation], tuple[Kind, _Builder] | None] = {}


def _entry(cls: type[Operation]) -> tuple[Kind, _Builder] | None:
    try:
        return _by_type[cls]
    except KeyError:
        pass
    found: tuple[Kind, _Builder] | None = None
    for classes, kind_, build in _BY_CLASS:
        if issubclass(cls, classes):
            found = (kind_, build)
            break
    if found is None and cls in _PURE_CLASSES:
        found = (Kind.PURE, _pure)
    _by_type[cls] = found
    return found


def facts(op: Operation) -> Facts | None:
    """What `op` does to memory, or None when dhir does not know (the worst case: it may
    read and write all it can reach, and its results may point there)."""
    entry = _entry(type(op))
    return entry[1](op) if entry is not None else None


def kind(op: Operation) -> Kind | None:
    """The kind of `op`, None when it has no facts (cheaper than `facts`)."""
    entry = _entry(type(op))
    return entry[0] if entry is not None else None


def accesses(op: Operation) -> tuple[Access, ...] | None:
    """The memrefs `op` reads and writes; None when unknown."""
    found = facts(op)
    return found.accesses if found is not None else None


def is_pure(op: Operation) -> bool:
    """Whether `op` computes values from values and touches no memory (arith, math, index,
    affine.apply/min/max, affine.(de)linearize_index): the one purity rule."""
    return kind(op) is Kind.PURE


def is_arithmetic(op: Operation) -> bool:
    """Whether `op` is an arith, math or index op: what the work count takes as flops."""
    return type(op) in _PURE_CLASSES


def is_view(op: Operation) -> bool:
    return kind(op) is Kind.VIEW


def is_shape_query(op: Operation) -> bool:
    return kind(op) is Kind.SHAPE


def is_alloc(op: Operation) -> bool:
    return kind(op) is Kind.ALLOC


def is_dealloc(op: Operation) -> bool:
    """memref.dealloc: it has no facts (freeing counts as touching), but the work and
    reuse counts take it to cost nothing."""
    return isinstance(op, memref.DeallocOp)


def scalar_access(op: Operation) -> Access | None:
    """The access of a load or store of one element (memref or affine), else None."""
    access = moved(op)
    if access is None:
        return None
    return None if access.whole or access.lanes is not None else access


def moved(op: Operation) -> Access | None:
    """The access of a load or a store (of an element or a vector), else None."""
    entry = _entry(type(op))
    if entry is None or entry[0] not in _MOVES:
        return None
    return entry[1](op).accesses[0]


_MOVES = (Kind.LOAD, Kind.STORE)


def memref_position(op: Operation) -> int | None:
    """Where the memref of a memref.load (0) or a memref.store (1) is among its operands,
    its subscripts after it; None for any other op. What `scalar_access` says of these
    two, without building their facts: asked of every access of every task."""
    entry = _entry(type(op))
    if entry is None:
        return None
    return 0 if entry[1] is _load else 1 if entry[1] is _store else None


def subscripts(op: Operation) -> tuple[SSAValue, ...]:
    """The operands of `op` that choose elements: the subscripts of its accesses, the
    offsets, sizes and strides of a subview."""
    if kind(op) in (None, Kind.PURE, Kind.ALLOC, Kind.SHAPE):
        return ()
    found = facts(op)
    assert found is not None
    if found.view is ViewKind.SUBVIEW:
        return tuple(op.operands[1:])
    return tuple(v for a in found.accesses for v in a.indices)


def view_source(op: Operation) -> SSAValue | None:
    """The memref a view op shows part of, or None when `op` is no view."""
    if not is_view(op) or not op.operands:
        return None
    return op.operands[0]


# The ops `global_name` names a global for: what a search of a whole module looks for.
GLOBAL_USES: tuple[type[Operation], ...] = (memref.GetGlobalOp,)


def global_name(op: Operation) -> str | None:
    """The symbol a `memref.get_global` takes, or None for any other op."""
    if not isinstance(op, memref.GetGlobalOp):
        return None
    return op.name_.string_value()


def is_global(op: Operation) -> bool:
    """Whether `op` defines a `memref.global`."""
    return isinstance(op, memref.GlobalOp)
