"""Element-wise `linalg.generic` sweeps over views written as the row loops they mean,
for dhir-time-tiles.

A user may write a stencil sweep (jacobi-2d's `B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] +
...)`) as one `linalg.generic` whose operands are views of the arrays shifted to each
neighbour (`memref.subview %A[1, 0] [n - 2, n - 2] [1, 1]`), every iterator parallel and
every map the identity. Its loops, as the build lowers it anyway (one loop a dimension,
in order, each element's inputs loaded and its body computed, then stored), are written
over the arrays themselves: `for i in [oi, oi + n - 2) { for j ... { B[i, j] = f(A[i, j],
A[i, j - 1], ...) } }`, each input at the output's indices plus the difference of the
views' offsets: the row statements the time tiles read. The views must take static
offsets and sizes, strides of 1, and the rank of the array they view; the output no
memory an input may share (the loops' order would then be seen), but for an input that
is the output itself at the same offsets (`C = f(C, A)`).
"""

from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import IndexType, MemRefType, NoneAttr, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap

from dhir.analysis.sharing import may_alias, memory_of
from dhir.dialects import arith, linalg, memref, scf
from dhir.transforms.building import const_index, put, replace_by

# Marks the parallel loop a threaded element-wise op became: the rank's threads share it
# as they shared the op (`threaded_loops`; dhir.analysis.threads' decision).
THREADED_ATTR = "dhir.elementwise"

# An operand read as an array and the offsets of the view of it.
_Viewed = tuple[SSAValue, tuple[int, ...]]


def write_as_loops(op: linalg.GenericOp, threaded: bool = False) -> str | None:
    """Replace `op` by its loops over the arrays it views (module docstring), or say why
    it is not such a sweep. `threaded`: its outer loops one `scf.parallel` (its rows; a
    vector's blocks of CHUNK elements), which a build with OpenMP shares among the rank's
    threads as it shared the linalg op's, and its last index an `scf.for` inside, which
    LLVM vectorises: the build's own parallel loops over all dimensions become one
    collapsed OpenMP loop whose subscripts are divisions and remainders of its counter,
    which it does not."""
    why = _refusal(op)
    if why is not None:
        return why
    viewed = [_viewed(v) for v in (*op.inputs, *op.outputs)]
    block = Block()
    _loops(op, cast(list[_Viewed], viewed), block, threaded)
    for made in block.walk():  # what reports at them names the user's line
        made.location = op.location
    views = [v.owner for v in (*op.inputs, *op.outputs) if isinstance(v.owner, memref.SubviewOp)]
    replace_by(op, block)
    for view in dict.fromkeys(views):
        if not view.results[0].uses:
            view.detach()
            view.erase()
    return None


def threaded_loops(root: Operation) -> bool:
    """Whether `root` holds a parallel loop that a threaded element-wise op became."""
    return any(
        isinstance(op, scf.ParallelOp) and THREADED_ATTR in op.attributes for op in root.walk()
    )


def _refusal(op: linalg.GenericOp) -> str | None:
    operands = [*op.inputs, *op.outputs]
    if op.res or len(op.outputs) != 1:
        return "has results or other than one output"
    if any(str(kind.data.value) != "parallel" for kind in op.get_iterator_types()):
        return "has a reduction dimension"
    shapes = {tuple(cast(MemRefType, v.type).get_shape()) for v in operands}
    rank = len(op.get_iterator_types())
    if len(shapes) != 1 or any(d < 0 for shape in shapes for d in shape):
        return "takes operands of different or dynamic shapes"
    if any(m.data != AffineMap.identity(rank) for m in op.get_indexing_maps()):
        return "has a map other than the identity"
    if any(isinstance(inner, linalg.IndexOp) for inner in op.body.walk()):
        return "takes its indices (linalg.index)"
    viewed = [_viewed(v) for v in operands]
    if any(v is None for v in viewed):
        return "takes an operand that is no view of static offsets and strides 1 of an array"
    *inputs, out = cast(list[_Viewed], viewed)
    # An input that is the output itself, at its offsets, is read at each element only
    # where that element is written (`C = f(C, A)`): any order of elements computes it.
    others = [array for array, offsets in inputs if (array, offsets) != out]
    if may_alias(out[0], memory_of(others)):
        return "writes an array that an input may share"
    return None


def _viewed(value: SSAValue) -> _Viewed | None:
    """`value` as (array, offsets): an array of the identity layout itself, or a view of
    one of static offsets and sizes, strides 1 and the same rank; None otherwise."""
    kind = value.type
    if not isinstance(kind, MemRefType):
        return None
    if isinstance(kind.layout, NoneAttr):
        return value, (0,) * kind.get_num_dims()
    view = value.owner
    if not isinstance(view, memref.SubviewOp) or view.offsets or view.sizes or view.strides:
        return None
    source = view.source.type
    if not isinstance(source, MemRefType) or not isinstance(source.layout, NoneAttr):
        return None
    offsets = tuple(view.static_offsets.get_values())
    strides = view.static_strides.get_values()
    if source.get_num_dims() != kind.get_num_dims() or any(s != 1 for s in strides):
        return None
    return view.source, offsets


# A vector's elements per block of its threaded loop: a page of f64s, enough for the
# vectorised loop inside to run at speed, few enough to give each thread some.
CHUNK = 512


def _loops(op: linalg.GenericOp, viewed: Sequence[_Viewed], block: Block, threaded: bool) -> None:
    """At the end of `block`: a loop per dimension over the output array's indices (the
    outer ones one `scf.parallel` where `threaded`), the body loading each input at its
    shifted indices, computing `op`'s body and storing."""
    shape = cast(MemRefType, op.outputs[0].type).get_shape()
    bounds = [(start, start + size) for start, size in zip(viewed[-1][1], shape, strict=True)]
    if threaded and len(bounds) == 1 and bounds[0][1] - bounds[0][0] >= 2 * CHUNK:
        _chunked(op, viewed, block, bounds[0])
        return
    here, ivs, opened = _nest(block, bounds, threaded and len(bounds) > 1)
    _body(op, viewed, here, ivs)
    _close(opened)


def _chunked(
    op: linalg.GenericOp, viewed: Sequence[_Viewed], block: Block, bounds: tuple[int, int]
) -> None:
    """A vector's loop as one `scf.parallel` over blocks of CHUNK elements, each an
    `scf.for`, then an `scf.for` over the elements left over (its size is static)."""
    low, high = bounds
    end = low + (high - low) // CHUNK * CHUNK
    lb, ub, step = const_index(block, low), const_index(block, end), const_index(block, CHUNK)
    outer = Block(arg_types=[IndexType()])
    loop = put(block, scf.ParallelOp([lb], [ub], [step], Region(outer)))
    loop.attributes[THREADED_ATTR] = UnitAttr()
    first = outer.args[0]
    last = put(outer, arith.AddiOp(first, const_index(outer, CHUNK))).result
    inner = Block(arg_types=[IndexType()])
    put(outer, scf.ForOp(first, last, const_index(outer, 1), [], Region(inner)))
    _body(op, viewed, inner, [inner.args[0]])
    _close([inner, outer])
    if end < high:
        here, ivs, opened = _nest(block, [(end, high)], False)
        _body(op, viewed, here, ivs)
        _close(opened)


def _nest(
    block: Block, bounds: Sequence[tuple[int, int]], threaded: bool
) -> tuple[Block, list[SSAValue], list[Block]]:
    """At the end of `block`: a loop per `(low, high)` of `bounds`, outermost first (all
    but the last one `scf.parallel` where `threaded`); the innermost body, the loops'
    indices, and their bodies, innermost first, for `_close` once filled."""
    # Every bound made first, in `block`, before the loops that use them.
    one = const_index(block, 1)
    made = [(const_index(block, low), const_index(block, high)) for low, high in bounds]
    ivs: list[SSAValue] = []
    opened: list[Block] = []
    here = block
    if threaded:
        outer, made = made[:-1], made[-1:]
        body = Block(arg_types=[IndexType()] * len(outer))
        lbs, ubs = [lo for lo, _ in outer], [hi for _, hi in outer]
        loop = put(block, scf.ParallelOp(lbs, ubs, [one] * len(outer), Region(body)))
        loop.attributes[THREADED_ATTR] = UnitAttr()
        ivs += body.args
        opened.insert(0, body)
        here = body
    for lo, hi in made:
        body = Block(arg_types=[IndexType()])
        put(here, scf.ForOp(lo, hi, one, [], Region(body)))
        ivs.append(body.args[0])
        opened.insert(0, body)
        here = body
    return here, ivs, opened


def _close(bodies: Sequence[Block]) -> None:
    """Each loop body its terminator: an `scf.parallel`'s `scf.reduce`, else `scf.yield`."""
    for body in bodies:
        parallel = isinstance(body.parent_op(), scf.ParallelOp)
        put(body, scf.ReduceOp() if parallel else scf.YieldOp())


def _body(
    op: linalg.GenericOp, viewed: Sequence[_Viewed], here: Block, ivs: Sequence[SSAValue]
) -> None:
    """At the end of `here`, the innermost loop's body at the output's indices `ivs`:
    each input loaded at its shifted indices, `op`'s body computed, the result stored."""
    out, at = viewed[-1]
    # Each input loaded where the body first uses it, as a user writes the loop (the
    # backend then keeps fewer values live); no store comes between, so the same values.
    sources: dict[SSAValue, _Viewed] = dict(zip(op.body.block.args, viewed, strict=True))
    mapper: dict[SSAValue, SSAValue] = {}

    def value(operand: SSAValue) -> SSAValue:
        if operand in sources and operand not in mapper:
            array, offsets = sources[operand]
            indices = [_shifted(here, iv, o - a) for iv, o, a in zip(ivs, offsets, at)]
            mapper[operand] = put(here, memref.LoadOp.get(array, indices)).res
        return mapper.get(operand, operand)

    for inner in op.body.block.ops:
        # Its regions' ops too: an input first used in a branch is loaded before it.
        operands = [value(operand) for nested in inner.walk() for operand in nested.operands]
        if isinstance(inner, linalg.YieldOp):
            put(here, memref.StoreOp.get(operands[0], out, list(ivs)))
        else:
            put(here, inner.clone(value_mapper=mapper))


def _shifted(block: Block, iv: SSAValue, by: int) -> SSAValue:
    """`iv + by`, computed at the end of `block` as a user writes it (`j - 1`, not
    `j + -1`: what the lowering knows of the sum's range follows the op)."""
    if by == 0:
        return iv
    if by < 0:
        return put(block, arith.SubiOp(iv, const_index(block, -by))).result
    return put(block, arith.AddiOp(iv, const_index(block, by))).result
