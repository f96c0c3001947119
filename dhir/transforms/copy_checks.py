"""`dhir-copy-checks`: a host `memref.copy` whose source and target may be views that share
an element, as dhir cannot tell before the run, stops the run at its op when they do, as
the interpreter does.

MLIR leaves such a copy undefined; where dhir proves the overlap it refuses the program
before either backend starts (dhir.backends.parallel_loops.check_copies). Where a view's
offset is known at run time only (a loop's variable, a value read from memory) or the
views come from a function's arguments (a caller may pass two views of one buffer),
native code copied in an order of its own and exited 0. Before each such copy this pass
compares the two views' byte ranges (a few index ops, from their descriptors) and, where
they meet, asks the runtime (`dhir_rt_copy_views`, `dhir_rt_copy_dim` for each dimension,
then `dhir_rt_copy_overlaps`) whether the views share an element: row against row where
both views' strides nest, as subviews' do (each pair of rows two arithmetic progressions,
solved by Euclid's algorithm), else element by element. Views that interleave without
sharing one (the even and the odd elements) copy. A `cf.assert` then stops the
rank with the copy's location, as a failed `--runtime-checks` check does.

Elements are counted at their size in memory (dhir.ir.layout.stored_bytes: f80, complex
numbers and vectors too), and a copy of unranked memrefs through the ranked views they are
casts of. A copy that cannot be checked so (elements of a layout dhir does not know, such
as a scalable vector's; an unranked memref that is no cast; more than 64 dimensions) is
refused at the copy, before the run: unchecked it would run memmove's answer where the
interpreter refuses.

Not checked: copies that dhir's analysis decides (one view onto itself, buffers allocated
apart, an allocation and an argument of the function that makes it, views of one buffer at
offsets that are numbers: dhir.analysis.regions.copy_decided), and
copies of GPU tasks (kernels cannot call the runtime; the host part copies device memory):
the native backend refuses those the analysis does not decide before the build
(`refuse_undecided_gpu_copies`).
"""

from dataclasses import dataclass
from typing import ClassVar, cast

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp, i64
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.regions import Copy, copy_decided, copy_ends, view_chain
from dhir.dialects import arith, func, gpu, memref, scf
from dhir.dialects.dhir import TaskOp
from dhir.dialects.gpu import in_device_code
from dhir.ir.diagnostics import error_at
from dhir.ir.layout import stored_bytes
from dhir.ir.tasks import is_gpu_task
from dhir.ir.walk import enclosing, find_ops
from dhir.transforms.building import declare, put
from dhir.transforms.vector_checks import CheckBuilder

VIEWS, DIM, OVERLAPS = "dhir_rt_copy_views", "dhir_rt_copy_dim", "dhir_rt_copy_overlaps"
# The highest rank the runtime checks (DHIR_RT_COPY_RANKS in dhir_rt.h).
MOST_DIMS = 64
# What a failed check prints (dhir.toolchain.failure reads it, with the copy's location).
OVERLAPPING_VIEWS = (
    f"{memref.CopyOp.name} copies between views that overlap (they share an element and are not "
    "the same view), which MLIR leaves undefined: the result would depend on the order "
    "the elements are copied in. Copy through a buffer of its own (memref.alloc, a copy "
    "into it, then one out of it), or make the views apart"
)


@dataclass(frozen=True)
class CopyChecksPass(ModulePass):
    """Host memref.copy ops whose views may overlap check at run time that they do not."""

    name = "dhir-copy-checks"
    needs: ClassVar[tuple[type[Operation], ...]] = (memref.CopyOp,)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        checked = False
        for copy in list(find_ops(op, memref.CopyOp)):
            if in_device_code(copy) or copy_decided(copy):
                continue
            _check(copy)
            checked = True
        if checked:
            declare(op, VIEWS, [i64] * 4, [], owner="dhir's runtime")
            declare(op, DIM, [i64] * 5, [], owner="dhir's runtime")
            declare(op, OVERLAPS, [], [i64], owner="dhir's runtime")


@dataclass(frozen=True)
class _View:
    """A memref's descriptor at run time: its first element's address in bytes (its
    offset counted in), sizes and strides."""

    start: SSAValue
    sizes: list[SSAValue]
    strides: list[SSAValue]


def _check(copy: memref.CopyOp) -> None:
    """Put the check before `copy`, or refuse it where dhir cannot check it when it runs
    (unchecked, it would run memmove's answer where the interpreter refuses)."""
    values = [_ranked(copy.source), _ranked(copy.destination)]
    source, target = values
    if source is None or target is None:
        raise error_at(copy, _unchecked(copy, "the rank of a view is not known"))
    kind = cast(MemRefType[Attribute], source.type)
    bytes_ = stored_bytes(kind.element_type)
    if bytes_ is None:
        why = f"the layout of its elements ({kind.element_type}) is not known to dhir"
        raise error_at(copy, _unchecked(copy, why))
    dims = kind.get_num_dims()
    if dims > MOST_DIMS or cast(MemRefType[Attribute], target.type).get_num_dims() != dims:
        why = f"it has more than {MOST_DIMS} dimensions, or views of different ranks"
        raise error_at(copy, _unchecked(copy, why))
    check = CheckBuilder(copy, OVERLAPPING_VIEWS)
    views = [_view(check, value, bytes_) for value in (source, target)]
    meet = _ranges_meet(check, views, bytes_)
    body = Block()
    found = _ask_runtime(body, views, bytes_)
    put(body, scf.YieldOp(found))
    other = Block()
    put(other, scf.YieldOp(put(other, arith.ConstantOp.from_int_and_width(0, 1)).result))
    overlaps = check.add(scf.IfOp(meet, [found.type], Region(body), Region(other)))
    check.assert_(check.add(arith.XOrIOp(overlaps, check.flag(True))))


def _ranked(value: SSAValue) -> SSAValue | None:
    """`value`, or the ranked memref an unranked one is a cast of; else None."""
    if isinstance(value.type, MemRefType):
        return value
    if isinstance(value.owner, memref.CastOp) and isinstance(value.owner.source.type, MemRefType):
        return value.owner.source
    return None


def _unchecked(copy: memref.CopyOp, why: str) -> str:
    return (
        f"this {copy.name} may copy between views that overlap, which MLIR leaves undefined, "
        f"and dhir cannot check it when it runs: {why}. Copy through a buffer of its own "
        "(memref.alloc, a copy into it, then one out of it), or between views of buffers "
        "allocated apart"
    )


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
    """The runtime's answer (an i1), told the views by calls of scalars: a buffer on the
    stack would need a scope of its own, which the OpenMP lowering cannot take inside a
    loop's scf.if."""
    rank = len(views[0].sizes)

    def wide(value: SSAValue) -> SSAValue:
        return put(body, arith.IndexCastOp(value, i64)).result

    def number(value: int) -> SSAValue:
        return put(body, arith.ConstantOp.from_int_and_width(value, 64)).result

    starts = [wide(view.start) for view in views]
    put(body, func.CallOp(VIEWS, [number(rank), number(bytes_), *starts], []))
    source, target = views
    for dim in range(rank):
        sizes = [source.sizes[dim], source.strides[dim], target.sizes[dim], target.strides[dim]]
        put(body, func.CallOp(DIM, [number(dim), *map(wide, sizes)], []))
    answer = put(body, func.CallOp(OVERLAPS, [], [i64])).res[0]
    return put(body, arith.CmpiOp(answer, number(0), "ne")).result


# What a copy of GPU code that dhir cannot decide is refused with.
UNDECIDED_ON_GPU = (
    f"this {memref.CopyOp.name} runs in a GPU task, where dhir cannot check when it runs "
    "whether its source and target share an element (the check calls the runtime on the "
    "host), and it cannot tell before the run: a view's offset or stride is known at run "
    "time only, or the views' buffer is not known. MLIR leaves a copy between views that "
    "overlap undefined, and the GPU would copy in an order of its own. Copy between "
    "views of different buffers, or at offsets and strides that are numbers, or run the "
    "copy in a CPU task"
)


def refuse_undecided_gpu_copies(module: ModuleOp, entry: str | None = None) -> None:
    """Refuse, at the copy, the first copy on a GPU whose overlap dhir cannot decide before
    the run: a memref.copy of a GPU task (its kernels, and what of it runs on the host), or
    any gpu.memcpy. dhir-copy-checks cannot check them when they run (kernels cannot call
    the runtime, and the host's copies on a GPU are of device memory). Views of two
    arguments of `entry` are apart: the harness gives each argument a buffer of its own."""
    if entry is not None and any(
        call.callee.string_value() == entry for call in find_ops(module, func.CallOp)
    ):
        entry = None  # a caller may pass it views of one buffer
    for copy in find_ops(module, (memref.CopyOp, gpu.MemcpyOp)):
        task = enclosing(copy, TaskOp)
        on_gpu = (
            isinstance(copy, gpu.MemcpyOp)
            or in_device_code(copy)
            or (task is not None and is_gpu_task(task))
        )
        if on_gpu and not copy_decided(copy) and not _arguments_apart(copy, task, entry):
            raise error_at(
                copy, UNDECIDED_MEMCPY if isinstance(copy, gpu.MemcpyOp) else UNDECIDED_ON_GPU
            )


UNDECIDED_MEMCPY = (
    f"this {gpu.MemcpyOp.name} copies between views whose overlap dhir cannot tell before "
    "the run (a view's offset or stride is known at run time only, or the views' buffer "
    "is not known), and it cannot check it when the copy runs: the copy is the GPU "
    "runtime's, not dhir's. MLIR leaves a copy between views that overlap undefined. Copy "
    "between views of different buffers (a gpu.alloc of its own, say), or at offsets and "
    "strides that are numbers"
)


def _arguments_apart(copy: Copy, task: TaskOp | None, entry: str | None) -> bool:
    """Whether the copy's views are of two different arguments of the function whose
    schedule holds `task`, or of the entry function: distinct buffers, since the native
    backend refuses schedule operands that alias where a task writes
    (dhir.analysis.sharing), and the harness allocates each entry argument apart."""
    function = enclosing(task if task is not None else copy, func.FuncOp)
    if function is None or (task is None and function.sym_name.data != entry):
        return False
    bases = [view_chain(value)[1] for value in copy_ends(copy)]
    if bases[0] is bases[1]:
        return False
    arguments = function.body.block.args
    return all(isinstance(base, BlockArgument) and base in arguments for base in bases)
