"""`dhir-copy-checks`: a host `memref.copy` whose source and target may be views that share
an element, as dhir cannot tell before the run, stops the run at its op when they do, as
the interpreter does.

MLIR leaves such a copy undefined; where dhir proves the overlap it refuses the program
before either backend starts (dhir.backends.parallel_loops.check_copies). Where a view's
offset is known at run time only (a loop's variable, a value read from memory) or the
views come from a function's arguments (a caller may pass two views of one buffer),
native code copied in an order of its own and exited 0. Before each such copy this pass
compares the two views' byte ranges (a few index ops, from their descriptors) and, where
they meet, asks the runtime's `dhir_rt_copy_overlaps` whether the views share an element,
element by element in the time of one pass over the source (the target's strides nest,
as a subview's do; other views sort the target's elements first): views that interleave
without sharing one (the even and the odd elements) copy. A `cf.assert` then stops the
rank with the copy's location, as a failed `--runtime-checks` check does.

Not checked: copies that dhir's analysis decides (one view onto itself, buffers allocated
apart, views of one buffer at offsets that are numbers: dhir.analysis.regions.copy_decided),
copies in device code (it cannot call the runtime), and memrefs of elements whose layout
dhir does not know (dhir.ir.layout.element_bytes).
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.regions import copy_decided
from dhir.dialects import arith, func, memref, scf
from dhir.dialects.gpu import in_device_code
from dhir.ir.layout import element_bytes
from dhir.ir.walk import find_ops
from dhir.transforms.building import declare, put
from dhir.transforms.vector_checks import CheckBuilder

OVERLAPS = "dhir_rt_copy_overlaps"
# What a failed check prints (dhir.toolchain.failure reads it, with the copy's location).
OVERLAPPING_VIEWS = (
    "memref.copy copies between views that overlap (they share an element and are not "
    "the same view), which MLIR leaves undefined: the result would depend on the order "
    "the elements are copied in. Copy through a buffer of its own (memref.alloc, a copy "
    "into it, then one out of it), or make the views apart"
)


@dataclass(frozen=True)
class CopyChecksPass(ModulePass):
    """Host memref.copy ops whose views may overlap check at run time that they do not."""

    name = "dhir-copy-checks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        checked = False
        for copy in list(find_ops(op, memref.CopyOp)):
            if in_device_code(copy) or copy_decided(copy):
                continue
            checked = _check(copy) or checked
        if checked:
            declare(op, OVERLAPS, [i64, i64, i64], [i64], owner="dhir's runtime")


@dataclass(frozen=True)
class _View:
    """A memref's descriptor at run time: its first element's address in bytes (its
    offset counted in), sizes and strides."""

    start: SSAValue
    sizes: list[SSAValue]
    strides: list[SSAValue]


def _check(copy: memref.CopyOp) -> bool:
    """Put the check before `copy`; False where the elements' layout is not known."""
    kind = copy.source.type
    if not isinstance(kind, MemRefType) or not isinstance(copy.destination.type, MemRefType):
        return False
    bytes_ = element_bytes(kind.element_type)
    if bytes_ is None:
        return False
    check = CheckBuilder(copy, OVERLAPPING_VIEWS)
    views = [_view(check, value, bytes_) for value in (copy.source, copy.destination)]
    meet = _ranges_meet(check, views, bytes_)
    body = Block()
    found = _ask_runtime(body, views, bytes_)
    put(body, scf.YieldOp(found))
    other = Block()
    put(other, scf.YieldOp(put(other, arith.ConstantOp.from_int_and_width(0, 1)).result))
    overlaps = check.add(scf.IfOp(meet, [found.type], Region(body), Region(other)))
    check.assert_(check.add(arith.XOrIOp(overlaps, check.flag(True))))
    return True


def _view(check: CheckBuilder, value: SSAValue, bytes_: int) -> _View:
    metadata = memref.ExtractStridedMetaDataOp(value)
    put(check.block, metadata)
    pointer = check.add(memref.ExtractAlignedPointerAsIndexOp(value))
    offset = check.add(arith.MuliOp(metadata.offset, check.index(bytes_)))
    start = check.add(arith.AddiOp(pointer, offset))
    return _View(start, list(metadata.sizes), list(metadata.strides))


def _ranges_meet(check: CheckBuilder, views: list[_View], bytes_: int) -> SSAValue:
    """Whether both views have elements and the bytes from the lowest of each to the end of
    its highest overlap: only then may they share an element."""
    zero, one = check.index(0), check.index(1)
    ends: list[tuple[SSAValue, SSAValue]] = []
    full: list[SSAValue] = []
    for view in views:
        low, high = view.start, view.start
        for size, stride in zip(view.sizes, view.strides, strict=True):
            full.append(check.cmp(size, zero, "sgt"))
            last = check.add(arith.MuliOp(check.add(arith.SubiOp(size, one)), stride))
            step = check.add(arith.MuliOp(last, check.index(bytes_)))
            low = check.add(arith.AddiOp(low, check.add(arith.MinSIOp(step, zero))))
            high = check.add(arith.AddiOp(high, check.add(arith.MaxSIOp(step, zero))))
        ends.append((low, check.add(arith.AddiOp(high, check.index(bytes_)))))
    (low, high), (other_low, other_high) = ends
    apart = [check.cmp(high, other_low, "sle"), check.cmp(other_high, low, "sle")]
    return check.all([*full, check.add(arith.XOrIOp(check.any(apart), check.flag(True)))])


def _ask_runtime(body: Block, views: list[_View], bytes_: int) -> SSAValue:
    """The runtime's answer (an i1), given the views' starts, sizes and strides in a buffer
    on the stack, freed when it returns (the copy may be in a loop)."""
    rank = len(views[0].sizes)
    words = [views[0].start, views[1].start]
    for view in views:
        words += [*view.sizes, *view.strides]
    scope = Block()
    index = IndexType()
    buffer = put(scope, memref.AllocaOp.get(i64, shape=[len(words)])).memref
    for at, word in enumerate(words):
        place = put(scope, arith.ConstantOp.from_int_and_width(at, index)).result
        wide = put(scope, arith.IndexCastOp(word, i64)).result
        put(scope, memref.StoreOp.get(wide, buffer, [place]))
    pointer = put(scope, memref.ExtractAlignedPointerAsIndexOp(buffer)).aligned_pointer
    address = put(scope, arith.IndexCastOp(pointer, i64)).result
    rank_value = put(scope, arith.ConstantOp.from_int_and_width(rank, 64)).result
    size_value = put(scope, arith.ConstantOp.from_int_and_width(bytes_, 64)).result
    call = put(scope, func.CallOp(OVERLAPS, [address, rank_value, size_value], [i64]))
    zero = put(scope, arith.ConstantOp.from_int_and_width(0, 64)).result
    found = put(scope, arith.CmpiOp(call.res[0], zero, "ne")).result
    put(scope, memref.AllocaScopeReturnOp.build(operands=[[found]]))
    made = memref.AllocaScopeOp.build(result_types=[[found.type]], regions=[Region(scope)])
    return put(body, made).results[0]
