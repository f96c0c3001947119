"""Parallel loops (`scf.parallel`, `affine.parallel`) two of whose iterations surely
touch one element of a memref, one of them writing it with a plain store: the program
broke its loop's promise that the iterations are independent. The native backend runs
such iterations at once (OpenMP threads, GPU threads), so the result depends on their
timing, while the interpreter runs them in order.

Only what is proven counts (`dhir.analysis.regions.sure_accesses`): loads and stores
that run in every iteration, at subscripts affine in the loop variables, of memrefs
from outside the loop or views of them, made outside it or in the body, whose elements
are the memref's: subviews, casts, transposes, and where their sizes and strides are
numbers, `expand_shape`, `collapse_shape` and `reinterpret_cast` of a memref of the
identity layout (its offset and strides then name the memref's elements row-major).
Atomic updates and reductions are the ways to combine iterations, and never count.

Bounds, steps and subscripts may be run-time values, as affine expressions of values
defined outside the loop (an affine.parallel's symbols, an scf.parallel's operands, the
sizes `memref.dim` measures, one name for each memref and dimension wherever measured):
each such value is an isl parameter, the same in both iterations, and so is each
variable of the loops around (bounded as their loops bound them, or by nothing). The
overlap is proven when it occurs at EVERY value of these parameters at which the loop
has two iterations or more (and the loops around run): a loop of one iteration never
races, and a loop that races whenever it runs more than one is wrong as written,
whatever its inputs. A run-time step s is not affine in the iterations (i = first +
k*s), so of such a dimension only its first two values, first and first + s, are taken:
fewer pairs of iterations, still each a real one, so what is found stays proven; for
the loops around, whose every value must overlap, such a dimension counts all values
between its bounds, more than it takes.

`parallel_independence` proves the opposite, for the native backend to keep a loop on
threads: no two iterations may touch one element, one writing it.

`kernel_overlap` proves races between two threads of a GPU kernel (a `gpu.launch`, or a
`gpu.launch_func` of a `gpu.func`) alike, its threads being the iterations, except that a
`gpu.barrier` orders two threads of one block, and that workgroup memory is one buffer per
block.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import islpy as isl
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.traits import SymbolTable

from dhir.analysis.lift import Lifted, Lifter, isl_text, leaf, leaves_of
from dhir.analysis.regions import SureAccesses, empty, may_accesses, sure_accesses
from dhir.analysis.sharing import buffers, shared
from dhir.dialects import affine, func, gpu, scf
from dhir.dialects import memref as memref_dialect
from dhir.dialects.access import Access, Kind, ViewKind, facts, global_name
from dhir.dialects.arith import INDEX_WIDTH, scalar_int_width
from dhir.dialects.dhir import defined_inside
from dhir.dialects.layouts import is_identity_layout, strided_layout
from dhir.ir.diagnostics import value_name, value_names
from dhir.ir.walk import holds_op

# Per dimension of a loop, as isl text over the parameters (`_Names`): the expressions
# its variable is at least (it starts at the greatest), those it stays below, its step.
Range = tuple[tuple[str, ...], tuple[str, ...], str]


@dataclass(frozen=True)
class Overlap:
    """Iteration `first` writes element `element` of `memref`, which iteration `second`
    also writes, or reads when `read`; `values`: the run-time values the bounds are made
    of, as this overlap has them (each value's name, or None, and its number)."""

    memref: SSAValue
    element: tuple[int, ...]
    first: tuple[int, ...]
    second: tuple[int, ...]
    read: bool
    values: tuple[tuple[str | None, int], ...] = ()


# How many values back `_Names.sizes` looks for the sizes a value is computed from.
_SIZE_SEARCH = 64


class _Names:
    """The isl names of the values the bounds are made of, each the same in both
    iterations: the variables of the loops around (o0, o1, ...), and the other values
    defined outside the loop (p0, p1, ...)."""

    def __init__(self, lift: Lifter) -> None:
        self.lift = lift
        self.names: dict[SSAValue, str] = {}
        self.values: dict[str, SSAValue] = {}  # the p names
        self.dims: dict[tuple[SSAValue, object], str] = {}  # by memref and dimension

    def text(self, lifted: Lifted | None) -> str | None:
        """`lifted` as isl text over the names, naming its values as it goes; a number
        as itself. None when it is not one affine expression."""
        if lifted is None or not lifted.exact:
            return None
        if lifted.low.number is not None:
            return str(lifted.low.number)
        for key in leaves_of(lifted.low):
            if isinstance(key, str) and key in self.values:
                continue  # a value named as a whole (`opaque`)
            if not isinstance(key, SSAValue):
                return None
            if key not in self.names:
                name = f"p{len(self.values)}"
                self.names[key] = name
                self.values[name] = key
        text = isl_text(lifted.low, self.names)
        return None if text is None else f"({text})"

    def of(self, value: SSAValue) -> str | None:
        self.sizes(value)
        self.opaque([value])
        return self.text(self.lift.value(value))

    def sizes(self, value: SSAValue) -> None:
        """Name each size (`memref.dim`) that `value` is computed from, a few integer ops
        back, before the lifter reads them: two measures of one size are one name."""
        pending, seen = [value], set[SSAValue]()
        while pending and len(seen) < _SIZE_SEARCH:
            top = pending.pop()
            op = top.owner
            if top in seen or not isinstance(op, Operation):
                continue
            seen.add(top)
            if isinstance(op, memref_dialect.DimOp):
                self.size(op)
            elif scalar_int_width(top.type) is not None:
                pending += op.operands

    def size(self, op: "memref_dialect.DimOp") -> None:
        """Name the size `op` measures by its memref and dimension."""
        index = self.lift.constant(op.index)
        key = (op.source, index if index is not None else op.index)
        name = self.dims.get(key)
        if name is None:
            name = self.dims[key] = f"p{len(self.values)}"
            self.values[name] = op.result
        self.lift.name(op.result, name)

    def opaque(self, values: Sequence[SSAValue]) -> None:
        """Name each integer of `values` that the lifter does not follow (a loaded
        number, a memref's size) as a whole: it is the same in both iterations too."""
        for value in values:
            if scalar_int_width(value.type) is not None and self.lift.value(value) is None:
                name = f"p{len(self.values)}"
                self.lift.name(value, name)
                self.values[name] = value


def parallel_overlap(loop: Operation) -> Overlap | None:
    """A proven overlap between two iterations of `loop` (an scf.parallel or an
    affine.parallel), the first in lexicographic order (at the least values of the run-time
    values and the loops around); None when none is proven."""
    body = loop.regions[0].block
    roots, views = _outside_memrefs(loop, body)
    if not roots or _plainly_apart(body, roots):
        return None
    names, outer, ranges, bounded = _named_loop(loop, body, views)
    if ranges is None:
        return None
    firsts, seconds = _names(len(ranges))
    fixed = tuple([*outer, *names.values])
    params = [*firsts, *seconds, *fixed]
    one, other = (
        sure_accesses(
            set(roots.values()),
            body,
            dict(zip(body.args, own, strict=True)) | names.names,
            views,
            params,
            names.lift,
        )
        for own in (firsts, seconds)
    )
    apart = _apart(tuple(ranges), fixed)
    runs = _domain(tuple(r for _, r in bounded), tuple(n for n, _ in bounded), fixed)
    runs = runs.intersect(_project(apart, [*firsts, *seconds]))
    for read in (False, True):
        for memref, written in one.writes.items():
            touched = (other.reads if read else other.writes).get(memref)
            if touched is None:
                continue
            clash = (written & touched).intersect_params(apart)
            if _everywhere(clash, runs, [*firsts, *seconds]):
                clash = clash.intersect_params(runs)
                return _witness(clash, memref, firsts, seconds, outer, read, names)
    return None


def parallel_independence(loop: Operation) -> str | None:
    """Why `loop` (an scf.parallel or an affine.parallel) may have two iterations that
    touch one element of memory, one of them writing it other than atomically: what
    makes the proof fail, in words. None when that is proven never to happen, at any
    run-time value and any value of the loops around (the iterations may run at once).

    What one iteration may touch is its may-regions (`dhir.analysis.regions`): whatever
    is not followed widens them, so that only what is proven stays apart. Values defined
    outside the loop (bounds, offsets, sizes measured by `memref.dim`, variables of the
    loops around) are isl parameters, the same in both iterations. Two memrefs that may
    be views of one buffer (`dhir.analysis.sharing`) are not apart unless neither is
    written, nor is a memref whose layout may give two indices one address."""
    body = loop.regions[0].block
    hidden = _hidden_memory(loop)
    if hidden is not None:
        return hidden
    roots, views = _outside_memrefs(loop, body)
    if not roots:
        return None
    if _plainly_apart(body, roots, strict=True):
        written = {roots[m] for m in _stored(body, roots)}
        return _sharing(written, set(roots.values()))
    names, outer, ranges, bounded = _named_loop(loop, body, views)
    firsts, seconds = _names(len(body.args))
    fixed = tuple([*outer, *names.values])
    params = [*firsts, *seconds, *fixed]
    found = [
        may_accesses(
            set(roots.values()),
            body,
            dict(zip(body.args, own, strict=True)) | names.names,
            params,
            names.lift,
            views,
        )
        for own in (firsts, seconds)
    ]
    one, other = found
    written = set(one.writes) | set(one.atomics)
    shared = _sharing(written, set(one.reads) | written)
    if shared is not None:
        return shared
    apart = _apart_anywhere(tuple(ranges) if ranges is not None else None, len(body.args), fixed)
    runs = _domain(tuple(r for _, r in bounded), tuple(n for n, _ in bounded), fixed)
    for root in written:
        plain = _get(other.reads, root) | _get(other.writes, root)
        clash = _get(one.writes, root) & (plain | _get(other.atomics, root))
        clash = clash | (_get(one.atomics, root) & plain)
        if not clash.intersect_params(apart).intersect_params(runs).is_empty():
            return f"two of its iterations may touch one element of {_named(root)}"
    return None


def _named_loop(
    loop: Operation, body: Block, views: Sequence[Operation]
) -> tuple[_Names, list[str], list[Range] | None, list[tuple[str, Range]]]:
    """The names of `loop`'s proof: of the values from outside, of the loops around it
    (`o0`, `o1`, ...), its own ranges (None where not each a known range of positive
    step), and the ranges of the loops around whose bounds are known. A variable whose
    loop's bounds are unknown ranges over every number, so that an overlap must occur
    at each."""
    names = _Names(Lifter())
    around = _loops_around(loop)
    outer = [f"o{k}" for k in range(len(around))]
    names.names.update(zip(around, outer, strict=True))
    _name_invariants(loop, body, views, names)
    ranges = _ranges(loop, names)
    if ranges is not None and (len(ranges) != len(body.args) or not _stepping(ranges)):
        ranges = None
    bounded = [
        (name, r)
        for variable, name in zip(around, outer, strict=True)
        for r in [_around_range(variable, names)]
        if r is not None
    ]
    return names, outer, ranges, bounded


def _get(table: dict[SSAValue, isl.Set], root: SSAValue) -> isl.Set:
    found = table.get(root)
    return found if found is not None else empty(root.type)


def _named(value: SSAValue) -> str:
    return value_name(value, f"a {value.type}")


def _hidden_memory(loop: Operation) -> str | None:
    """What the loop's body touches that no memref from outside it shows: a global it
    takes itself, or through a function it calls, or raw addresses (llvm ops)."""
    module = loop.get_toplevel_object()
    seen: set[str] = set()
    pending: list[Operation] = [loop]
    while pending:
        for op in pending.pop().walk():
            name = global_name(op)
            if name is not None:
                return f"it uses the global @{name}"
            if op.name.startswith("llvm."):
                return f"it uses {op.name}"
            if isinstance(op, func.CallOp):
                callee = op.callee.string_value()
                found = (
                    SymbolTable.lookup_symbol(module, callee)
                    if isinstance(module, Operation)
                    else None
                )
                if isinstance(found, func.FuncOp) and callee not in seen:
                    seen.add(callee)
                    pending.append(found)
    return None


def _stored(body: Block, roots: dict[SSAValue, SSAValue]) -> set[SSAValue]:
    """The memrefs of `roots` that a store of `body` takes."""
    out: set[SSAValue] = set()
    for op in body.walk():
        found = facts(op)
        if found is not None and found.kind is Kind.STORE:
            out.update(a.memref for a in found.accesses if a.memref in roots)
    return out


def _sharing(written: set[SSAValue], touched: set[SSAValue]) -> str | None:
    """Why memrefs `written` (roots) may share memory with one another or with the
    others `touched`, or map two of their indices to one address; None when neither."""
    for root in written:
        if not _injective(root.type):
            return f"the layout of {_named(root)} may give two of its indices one address"
        for other in touched - {root}:
            if shared(buffers(root), buffers(other)):
                one, two = value_names(root, other, f"a {root.type}")
                return f"{one} and {two} may share memory"
    return None


def _injective(type_: Attribute) -> bool:
    """Whether distinct indices of a memref of `type_` are distinct addresses: strides
    that nest, each past the whole of the dimensions inside it."""
    if not isinstance(type_, MemRefType):
        return False
    if is_identity_layout(type_):
        return True
    layout = strided_layout(type_)
    if layout is None:
        return False
    pairs = [(s, n) for s, n in zip(layout[0], type_.get_shape(), strict=True) if n != 1]
    if any(s is None or s <= 0 for s, _ in pairs):
        return False
    pairs.sort(key=lambda p: -(p[0] or 0))
    for (outer, _), (inner, size) in zip(pairs, pairs[1:], strict=False):
        assert outer is not None and inner is not None
        if size == DYNAMIC_INDEX or outer < inner * size:
            return False
    return True


def _name_invariants(
    loop: Operation, body: Block, views: Sequence[Operation], names: _Names
) -> None:
    """Name as parameters the integers the body's ops (and the `views` outside it) take
    from outside the loop, and the sizes it measures (`memref.dim`) of memrefs from
    outside it: each is the same in every iteration."""
    for op in [*views, *body.walk()]:
        for value in op.operands:
            if scalar_int_width(value.type) is not None and not defined_inside(value, loop):
                names.of(value)
        if isinstance(op, memref_dialect.DimOp) and not any(
            defined_inside(v, loop) for v in op.operands
        ):
            names.size(op)


@cache
def _apart_anywhere(ranges: tuple[Range, ...] | None, rank: int, fixed: tuple[str, ...]) -> isl.Set:
    """Two distinct iterations, as `_apart`, but of every value between the bounds of a
    run-time step, not only its first two, and of any values when `ranges` is None."""
    firsts, seconds = _names(rank)
    conditions = [
        _within(r, v, exact=False)
        for r, a, b in zip(ranges or (), firsts, seconds, strict=False)
        for v in (a, b)
    ]
    differ = " or ".join(f"{a} != {b}" for a, b in zip(firsts, seconds, strict=True))
    names = ", ".join([*firsts, *seconds, *fixed])
    return isl.Set(f"[{names}] -> {{ : {' and '.join([*conditions, f'({differ})'])} }}")


def _project(region: isl.Set, names: list[str]) -> isl.Set:
    """`region`'s parameters without `names`."""
    params = isl.dim_type.param
    for name in names:
        at = region.find_dim_by_name(params, name)
        if at >= 0:
            region = region.project_out(params, at, 1)
    return region


def _everywhere(clash: isl.Set, runs: isl.Set, names: list[str]) -> bool:
    """Whether `clash` holds a point for every value of the parameters but `names` that
    `runs` allows (with none: whether it is not empty)."""
    if clash.is_empty():
        return False
    return runs.is_subset(_project(clash.params(), names))


def _loops_around(loop: Operation) -> list[SSAValue]:
    """The variables of the loops around `loop`, in its function."""
    found: list[SSAValue] = []
    parent = loop.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        if isinstance(parent, scf.ParallelOp | affine.ParallelOp | scf.ForOp | affine.ForOp):
            found += parent.regions[0].block.args
        parent = parent.parent_op()
    return found


def _around_range(variable: SSAValue, names: _Names) -> Range | None:
    """The range of the loop variable `variable`, when its loop's bounds are known."""
    assert isinstance(variable, BlockArgument)
    loop = variable.owner.parent_op()
    if isinstance(loop, scf.ForOp | affine.ForOp):
        found = _for_range(loop, names)
    else:
        assert loop is not None
        ranges = _ranges(loop, names)
        found = (
            ranges[variable.index] if ranges is not None and len(ranges) > variable.index else None
        )
    return found if found is not None and _stepping([found]) else None


def _stepping(ranges: list[Range]) -> bool:
    """Whether every constant step is positive (a step of 0 is an error at run time)."""
    return all(not _is_number(step) or int(step) > 0 for _, _, step in ranges)


def _is_number(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _for_range(loop: scf.ForOp | affine.ForOp, names: _Names) -> Range | None:
    if isinstance(loop, scf.ForOp):
        texts = [names.of(v) for v in (loop.lb, loop.ub, loop.step)]
        if any(t is None for t in texts):
            return None
        first, end, step = (t for t in texts if t is not None)
        return (first,), (end,), step
    props = loop.properties
    lower, upper = props.get("lowerBoundMap"), props.get("upperBoundMap")
    step = props.get("step")
    if not isinstance(lower, AffineMapAttr) or not isinstance(upper, AffineMapAttr):
        return None
    split = lower.data.num_dims + lower.data.num_symbols
    lows = _texts(names, lower, loop.operands[:split])
    highs = _texts(names, upper, loop.operands[split:])
    if not lows or not highs or not isinstance(step, IntegerAttr):
        return None
    return tuple(lows), tuple(highs), str(step.value.data)


@cache
def _domain(ranges: tuple[Range, ...], names: tuple[str, ...], fixed: tuple[str, ...]) -> isl.Set:
    """The values `names` take as the variables of loops of `ranges` (each value between
    its bounds), a set of the parameters `fixed`."""
    conditions = [_within(r, name, exact=False) for r, name in zip(ranges, names, strict=True)]
    return isl.Set(f"[{', '.join(fixed)}] -> {{ : {' and '.join(conditions) or 'true'} }}")


def _within(bounds: Range, name: str, exact: bool = True) -> str:
    """The values of a loop variable `name`, as isl text. Of a run-time step: its first
    two (`exact`), or every value between the bounds."""
    lows, highs, step = bounds
    first = lows[0]
    for low in lows[1:]:
        first = f"max({first}, {low})"
    parts = [f"{low} <= {name}" for low in lows] + [f"{name} < {high}" for high in highs]
    if not _is_number(step):
        parts.append(f"{step} >= 1")
        if exact:
            parts.append(f"({name} = {first} or {name} = {first} + {step})")
    elif step != "1":
        parts.append(f"({name} - {first}) mod {step} = 0")
    return " and ".join(parts)


def _ranges(loop: Operation, names: _Names) -> list[Range] | None:
    if isinstance(loop, scf.ParallelOp):
        found: list[Range] = []
        for low, high, step in zip(loop.lowerBound, loop.upperBound, loop.step, strict=True):
            texts = [names.of(v) for v in (low, high, step)]
            if any(t is None for t in texts):
                return None
            first, end, stride = (t for t in texts if t is not None)
            found.append(((first,), (end,), stride))
        return found
    if isinstance(loop, affine.ParallelOp):
        return _affine_ranges(loop, names)
    return None


def _affine_ranges(loop: affine.ParallelOp, names: _Names) -> list[Range] | None:
    props = loop.properties
    lower, upper = props.get("lowerBoundsMap"), props.get("upperBoundsMap")
    if not isinstance(lower, AffineMapAttr) or not isinstance(upper, AffineMapAttr):
        return None
    split = lower.data.num_dims + lower.data.num_symbols
    lows = _texts(names, lower, loop.operands[:split])
    highs = _texts(names, upper, loop.operands[split:])
    low_groups = _sizes(props.get("lowerBoundsGroups"))
    high_groups = _sizes(props.get("upperBoundsGroups"))
    steps = _sizes(props.get("steps"))
    if None in (lows, highs, low_groups, high_groups, steps):
        return None
    assert lows is not None and highs is not None
    assert low_groups is not None and high_groups is not None and steps is not None
    if not len(low_groups) == len(high_groups) == len(steps):
        return None
    found: list[Range] = []
    for low_group, high_group, step in zip(
        _split(lows, low_groups), _split(highs, high_groups), steps, strict=True
    ):
        if not low_group or not high_group:
            return None
        found.append((tuple(low_group), tuple(high_group), str(step)))
    return found


def _texts(names: _Names, amap: AffineMapAttr, operands: Sequence[SSAValue]) -> list[str] | None:
    names.opaque(operands)
    results = names.lift.map(amap.data, operands)
    if results is None:
        return None
    texts = [names.text(r) for r in results]
    return None if any(t is None for t in texts) else [t for t in texts if t is not None]


def _sizes(attr: Attribute | None) -> list[int] | None:
    """The integers of an affine.parallel's steps (an array of integers) or bound groups
    (dense integer elements)."""
    if isinstance(attr, ArrayAttr):
        values = [a.value.data if isinstance(a, IntegerAttr) else None for a in attr.data]
        return None if None in values else [v for v in values if v is not None]
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return [int(v) for v in attr.get_values()]
    return None


def _split(numbers: list[str], sizes: list[int]) -> list[list[str]]:
    out: list[list[str]] = []
    at = 0
    for size in sizes:
        out.append(numbers[at : at + size])
        at += size
    return out


def _outside_memrefs(
    loop: Operation, body: Block
) -> tuple[dict[SSAValue, SSAValue], list[Operation]]:
    """The ranked memrefs that `body` uses and that are defined outside `loop`, each with
    the memref it views (itself, when no view op outside the loop made it), and the view
    ops that lead from those to them, in order."""
    roots: dict[SSAValue, SSAValue] = {}
    views: dict[Operation, None] = {}
    for op in body.walk():
        for value in op.operands:
            if isinstance(value.type, MemRefType) and not defined_inside(value, loop):
                if value not in roots:
                    roots[value] = _root(value, views)
    return roots, list(views)


_FOLLOWED = (ViewKind.SAME, ViewKind.SUBVIEW, ViewKind.TRANSPOSE)
# Views whose indices the region walk maps to their source's where it knows the sizes and
# strides (dhir.analysis.regions, `reshapes`); elsewhere an access through one may be
# anywhere in the source.
_RESHAPES = (
    memref_dialect.ReinterpretCastOp,
    memref_dialect.ExpandShapeOp,
    memref_dialect.CollapseShapeOp,
)


def _root(memref: SSAValue, views: dict[Operation, None]) -> SSAValue:
    """The memref that `memref` is a view of, through ops whose elements map to their
    source's, adding those ops to `views` (each after the ops it needs)."""
    op = memref.owner
    if not isinstance(op, Operation) or not op.operands:
        return memref
    found = facts(op)
    source = op.operands[0]
    followed = found is not None and (found.view in _FOLLOWED or isinstance(op, _RESHAPES))
    if not followed or not isinstance(source.type, MemRefType):
        return memref
    root = _root(source, views)
    views[op] = None
    return root


def _plainly_apart(body: Block, roots: dict[SSAValue, SSAValue], strict: bool = False) -> bool:
    """Whether no two iterations touch one element of a memref that one of them stores
    into, seen without isl (most loops, so that a program of thousands of them is checked
    in little time): each memref stored into is only loaded and stored, each time at the
    same subscripts, which include every loop variable, no two of which are one address,
    and no other view of it is used, nor a view made in the body. `strict`: besides, no
    memref from outside is used by any other op (a call), and each stored into is its own
    root (no view's indices)."""
    places: dict[SSAValue, set[tuple[SSAValue, ...]]] = {}
    stored: set[SSAValue] = set()
    unclear: set[SSAValue] = set()  # used otherwise: isl decides
    through: dict[SSAValue, SSAValue] = {}  # the one value each root is used as
    for memref, root in roots.items():
        if through.setdefault(root, memref) is not memref:
            unclear.add(through[root])
            unclear.add(memref)
    for op in body.walk():
        found = facts(op)
        if found is not None and found.kind is Kind.VIEW and op.operands[0] in roots:
            return False  # accesses through a view made in the body: isl decides
        if found is None or found.kind not in (Kind.LOAD, Kind.STORE):
            unclear.update(v for v in op.operands if v in roots)
            continue
        for access in found.accesses:
            if access.memref not in roots:
                continue
            place = _place(access)
            if place is None:
                unclear.add(access.memref)
            else:
                places.setdefault(access.memref, set()).add(place)
            if found.kind is Kind.STORE:
                stored.add(access.memref)
    if strict and (unclear or any(roots[m] is not m for m in stored)):
        return False
    variables = set(body.args)
    for memref in stored:
        found_places = places.get(memref, set())
        if memref in unclear or len(found_places) != 1 or not _injective(memref.type):
            return False
        if not variables <= set(next(iter(found_places))):
            return False
    return True


def _place(access: Access) -> tuple[SSAValue, ...] | None:
    """The subscripts of a scalar load or store; None for a vector's lanes, an element
    the subscripts do not name, or an affine map other than the identity."""
    identity = access.map is None or access.map == AffineMap.identity(len(access.indices))
    if access.lanes is not None or access.whole or not identity:
        return None
    return access.indices


@cache
def _apart(ranges: tuple[Range, ...], fixed: tuple[str, ...]) -> isl.Set:
    """Two distinct iterations, each within `ranges`, as a set of parameters (`_names`,
    then `fixed`)."""
    firsts, seconds = _names(len(ranges))
    conditions = [
        _within(r, v) for r, a, b in zip(ranges, firsts, seconds, strict=True) for v in (a, b)
    ]
    differ = " or ".join(f"{a} != {b}" for a, b in zip(firsts, seconds, strict=True))
    names = ", ".join([*firsts, *seconds, *fixed])
    return isl.Set(f"[{names}] -> {{ : {' and '.join(conditions)} and ({differ}) }}")


def _names(rank: int) -> tuple[list[str], list[str]]:
    """The isl names of the first iteration's loop variables, and the second's."""
    return [f"ia{k}" for k in range(rank)], [f"ib{k}" for k in range(rank)]


def _least(points: isl.Set, count: int) -> isl.Point:
    """The least point of `points` with its first `count` dimensions (the run-time values
    and the variables of the loops around) not negative, or else not below -2^20 (lexmin
    needs a bounded least point: a loop around of unknown bounds bounds nothing); any
    point when neither has a least one."""
    for low in (0, -(1 << 20)):
        bounded = points
        for k in range(count):
            bounded = bounded.lower_bound_val(isl.dim_type.set, k, isl.Val(low))
        if not bounded.is_empty():
            try:
                return bounded.lexmin().sample_point()
            except isl.Error:
                continue
    return points.sample_point()


def _witness(
    clash: isl.Set,
    memref: SSAValue,
    firsts: list[str],
    seconds: list[str],
    outer: list[str],
    read: bool,
    names: _Names,
) -> Overlap:
    """The least point of `clash` (parameters: the run-time values, the outer loops'
    variables, then the two iterations), as an Overlap (`_least`)."""
    params = isl.dim_type.param
    rank = clash.dim(isl.dim_type.set)
    # The values the overlap depends on: a size named but not bounding it says nothing.
    values = [
        n
        for n in names.values
        if (at := clash.find_dim_by_name(params, n)) >= 0 and clash.involves_dims(params, at, 1)
    ]
    wanted = [*values, *outer, *firsts, *seconds]
    # The variables become the leading set dimensions, then lexmin picks one point.
    points = clash
    for name in reversed(wanted):
        at = points.find_dim_by_name(params, name)
        if at < 0:
            points = points.insert_dims(isl.dim_type.set, 0, 1)
        else:
            points = points.move_dims(isl.dim_type.set, 0, params, at, 1)
    points = points.project_out(params, 0, points.dim(params))
    point = _least(points, len(values) + len(outer))
    dims = range(len(wanted) + rank)
    numbers = [point.get_coordinate_val(isl.dim_type.set, k).to_python() for k in dims]
    start = len(values) + len(outer)
    middle = start + len(firsts)
    return Overlap(
        memref,
        tuple(numbers[len(wanted) :]),
        tuple(numbers[start:middle]),
        tuple(numbers[middle : len(wanted)]),
        read,
        tuple((names.values[n].name_hint, v) for n, v in zip(values, numbers, strict=False)),
    )


# --- GPU kernels --------------------------------------------------------------------


@dataclass(frozen=True)
class _Kernel:
    """What a launch runs: the kernel's entry block; the launch's grid and block sizes (x,
    y, z each); the values a thread's ids are (its block's x, y, z, then its own);
    each argument of the kernel with the value the launch passes it; the kernel's
    workgroup memory (a buffer per block, shared by the block's threads alone)."""

    body: Block
    sizes: tuple[SSAValue, ...]
    ids: tuple[SSAValue, ...]
    passed: dict[SSAValue, SSAValue]
    workgroup: tuple[SSAValue, ...]


def kernel_overlap(launch: Operation) -> Overlap | None:
    """A proven overlap between two threads of `launch` (a gpu.launch, or a gpu.launch_func
    of a gpu.func of the module): `first` and `second` are each a thread's block x, y, z
    and its own x, y, z; its memref is the launch's (the value it passes, for a
    gpu.launch_func). None when none is proven.

    Threads are a parallel loop's iterations, over the block ids (each below its grid
    size) and the thread ids (each below its block size), as `parallel_overlap` takes
    them, but two threads of one block are ordered by a `gpu.barrier` between their
    accesses: they overlap only within one stretch of the kernel's ops between barriers
    (an op that may hold a barrier, a loop around one or a call, belongs to no stretch).
    Threads of different blocks never wait for each other, and never share workgroup
    memory. Only what runs in every thread counts (`sure_accesses`), in the kernel's first
    block; a launch with clusters, or of a kernel that is not found, has none."""
    kernel = _kernel(launch)
    if kernel is None:
        return None
    names, outer, ranges, bounded = _named_kernel(launch, kernel)
    if ranges is None:
        return None
    roots, views = _kernel_memrefs(launch, kernel)
    memrefs = set(roots.values())
    firsts, seconds = _names(len(kernel.ids))
    fixed = tuple([*outer, *names.values])
    params = [*firsts, *seconds, *fixed]
    whole = _threads(kernel, memrefs, names, params, None, views)
    stretches = [
        _threads(kernel, memrefs, names, params, ops, [*views, *made])
        for ops, made in _stretches(kernel.body)
    ]
    apart = _apart(ranges, fixed)
    same = apart.intersect_params(_one_block(params))
    runs = _domain(tuple(r for _, r in bounded), tuple(n for n, _ in bounded), fixed)
    runs = runs.intersect(_project(apart, [*firsts, *seconds]))
    for read in (False, True):
        for root in memrefs:
            clash = empty(root.type)
            if root not in kernel.workgroup:
                clash = _clash(whole, root, read).intersect_params(apart.subtract(same))
            for pair in stretches:
                clash = clash | _clash(pair, root, read).intersect_params(same)
            if _everywhere(clash, runs, [*firsts, *seconds]):
                clash = clash.intersect_params(runs)
                shown = kernel.passed.get(root, root)
                return _witness(clash, shown, firsts, seconds, outer, read, names)
    return None


def _threads(
    kernel: _Kernel,
    memrefs: set[SSAValue],
    names: _Names,
    params: list[str],
    ops: list[Operation] | None,
    views: list[Operation],
) -> list[SureAccesses]:
    """What two threads (`_names`) surely touch of `memrefs` in `ops` of the kernel (all
    of them when None), through `views`."""
    return [
        sure_accesses(
            memrefs,
            kernel.body,
            dict(zip(kernel.ids, own, strict=True)) | names.names,
            views,
            params,
            names.lift,
            ops,
        )
        for own in _names(len(kernel.ids))
    ]


def _clash(pair: list[SureAccesses], root: SSAValue, read: bool) -> isl.Set:
    """The elements of `root` the first of `pair` writes and the second reads (`read`) or
    writes."""
    one, other = pair
    return _get(one.writes, root) & _get(other.reads if read else other.writes, root)


def _one_block(params: list[str]) -> isl.Set:
    """Two threads of one block, as a set of `params` (`_names`: the block ids first)."""
    firsts, seconds = _names(3)
    same = " and ".join(f"{a} = {b}" for a, b in zip(firsts, seconds, strict=True))
    return isl.Set(f"[{', '.join(params)}] -> {{ : {same} }}")


def _kernel(launch: Operation) -> _Kernel | None:
    if isinstance(launch, gpu.LaunchOp):
        if launch.clusterSizeX is not None or not launch.body.blocks:
            return None
        body = launch.body.blocks[0]
        sizes = (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ)
        sizes += (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)
        workgroup = body.args[12 : 12 + gpu.workgroup_count(launch)]
        passed = dict[SSAValue, SSAValue](zip(body.args[6:12], sizes, strict=True))
        return _Kernel(body, sizes, body.args[:6], passed, workgroup)
    if not isinstance(launch, gpu.LaunchFuncOp) or launch.clusterSizeX is not None:
        return None
    found = SymbolTable.lookup_symbol(launch, launch.kernel)
    if not isinstance(found, gpu.FuncOp) or not found.body.blocks:
        return None
    body = found.body.blocks[0]
    inputs = len(found.function_type.inputs)
    if len(launch.kernelOperands) != inputs:
        return None
    sizes = (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ)
    sizes += (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)
    # The ids have no values in a gpu.func: the arguments of a block of its own stand for them.
    ids = Block(arg_types=[IndexType()] * 6).args
    passed = dict[SSAValue, SSAValue](zip(body.args[:inputs], launch.kernelOperands, strict=True))
    workgroup = body.args[inputs : inputs + gpu.workgroup_count(found)]
    return _Kernel(body, sizes, ids, passed, workgroup)


def _named_kernel(
    launch: Operation, kernel: _Kernel
) -> tuple[_Names, list[str], tuple[Range, ...] | None, list[tuple[str, Range]]]:
    """The names of `kernel`'s proof, as `_named_loop` makes them, with the ranges of a
    thread's ids (None when a size is not known): the ids and sizes its ops read are
    lifted as the thread's and the launch's, its arguments as the values the launch
    passes."""
    names = _Names(Lifter())
    around = _loops_around(launch)
    outer = [f"o{k}" for k in range(len(around))]
    names.names.update(zip(around, outer, strict=True))
    sizes = [names.of(v) for v in kernel.sizes]
    lift = names.lift
    for arg, value in kernel.passed.items():
        if scalar_int_width(arg.type) == INDEX_WIDTH:
            names.of(value)
            lift.define(arg, lift.value(value))
    for op in kernel.body.walk():
        _name_id(op, kernel, lift)
    _name_invariants(kernel.body.parent_op() or launch, kernel.body, [], names)
    bounded = [
        (name, r)
        for variable, name in zip(around, outer, strict=True)
        for r in [_around_range(variable, names)]
        if r is not None
    ]
    known = [size for size in sizes if size is not None]
    ranges = tuple((("0",), (size,), "1") for size in known)
    return names, outer, ranges if len(known) == len(sizes) else None, bounded


_AXES = {"x": 0, "y": 1, "z": 2}


def _name_id(op: Operation, kernel: _Kernel, lift: Lifter) -> None:
    """Lift a gpu op that reads a thread's id or a launch's size as what it reads."""
    if not isinstance(
        op, gpu.ThreadIdOp | gpu.BlockIdOp | gpu.GlobalIdOp | gpu.BlockDimOp | gpu.GridDimOp
    ):
        return
    axis = _AXES[str(op.dimension.data)]
    block, thread = leaf(kernel.ids[axis]), leaf(kernel.ids[3 + axis])
    if isinstance(op, gpu.BlockIdOp):
        lift.define(op.result, Lifted.at(block))
    elif isinstance(op, gpu.ThreadIdOp):
        lift.define(op.result, Lifted.at(thread))
    elif isinstance(op, gpu.GridDimOp):
        lift.define(op.result, lift.value(kernel.sizes[axis]))
    elif isinstance(op, gpu.BlockDimOp):
        lift.define(op.result, lift.value(kernel.sizes[3 + axis]))
    else:
        # The global id is affine only in a block of known size.
        size = lift.constant(kernel.sizes[3 + axis])
        if size is not None:
            lift.define(op.result, Lifted.at(block.scaled(size) + thread))


def _kernel_memrefs(
    launch: Operation, kernel: _Kernel
) -> tuple[dict[SSAValue, SSAValue], list[Operation]]:
    """The memrefs a kernel's threads share, each with the memref it views, as
    `_outside_memrefs` finds them for a gpu.launch; for a gpu.func, its memref arguments,
    each its own. Its workgroup memory too."""
    if isinstance(launch, gpu.LaunchOp):
        roots, views = _outside_memrefs(launch, kernel.body)
    else:
        roots = {a: a for a in kernel.passed if isinstance(a.type, MemRefType)}
        views = []
    return roots | {w: w for w in kernel.workgroup}, views


def _stretches(body: Block) -> list[tuple[list[Operation], list[Operation]]]:
    """The ops of `body` between barriers (`_may_wait`), each stretch with the views
    made before it (ops of `body` that view a memref)."""
    found: list[tuple[list[Operation], list[Operation]]] = []
    ops: list[Operation] = []
    before: list[Operation] = []
    made: list[Operation] = []
    for op in body.ops:
        if _may_wait(op):
            found.append((ops, before))
            ops, before = [], list(made)
        else:
            ops.append(op)
        known = facts(op)
        if known is not None and known.kind is Kind.VIEW:
            made.append(op)
    found.append((ops, before))
    return [(ops, before) for ops, before in found if ops]


def _may_wait(op: Operation) -> bool:
    """Whether the threads of a block may wait for each other in `op`: a barrier, a
    reduction over threads, or a call or raw llvm op, which may hold either."""
    if holds_op(op, (gpu.BarrierOp, gpu.AllReduceOp, gpu.SubgroupReduceOp, func.CallOp)):
        return True
    return any(inner.name.startswith("llvm.") for inner in op.walk())
