"""Out-of-bounds accesses found before a run: an access of the entry (or of a function it
calls) that surely runs (dhir.analysis.regions' `walk_sure_points`) at a subscript outside
its memref's static shape, or below 0, or through a view at an element outside the memref
it views; and for each dimension of dynamic size of an entry argument, the least size
that the accesses surely run need (`EntryBounds.needs`), which the inputs are checked
against before a run. Accesses the analysis cannot follow (under a condition on run-time
values, in a loop of bounds known at run time only, after what may not return, through a
view of run-time offsets) say nothing: they stay `--runtime-checks`' to check. Before a
run, the inputs' sizes and scalar values fix some of those bounds (`given_bounds`)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import islpy as isl
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.traits import SymbolTable

from dhir.analysis.regions import view_chain, walk_sure_points
from dhir.dialects.arith import INDEX_WIDTH, ConstantOp, scalar_int_width, signed
from dhir.dialects.func import FuncOp
from dhir.dialects.memref import DimOp
from dhir.ir.diagnostics import error_at, loc_of, value_name

_HALF_64 = 1 << (INDEX_WIDTH - 1)


@dataclass(frozen=True)
class OutOfBounds:
    """The first point (in the order the loops run) at which `op` accesses `memref` at
    `index`, outside it along dimension `dim`."""

    op: Operation
    memref: SSAValue
    index: tuple[int, ...]
    dim: int
    through: SSAValue | None = None  # the view of `memref` accessed, at indices mapped
    calls: tuple[Operation, ...] = ()  # the calls through which the entry reaches `op`
    given: tuple[int, ...] | None = None  # the shape of the input given for `memref`
    inputs: bool = False  # found with the inputs given to a run (`given_bounds`)


@dataclass(frozen=True)
class Need:
    """An entry argument's dimension of dynamic size must hold `size` elements: `op`
    surely accesses index size - 1 along it."""

    arg: int
    dim: int
    size: int
    op: Operation


@dataclass
class EntryBounds:
    outside: OutOfBounds | None = None  # the first found, in program order
    needs: dict[tuple[int, int], Need] = field(default_factory=dict[tuple[int, int], Need])
    entry: Block | None = None  # the entry's block, whose arguments `needs` numbers
    # The shapes of the inputs given for some of the entry's arguments (`given_bounds`):
    # accesses of these are checked against them, and need nothing more.
    given: dict[SSAValue, tuple[int, ...]] = field(default_factory=dict[SSAValue, tuple[int, ...]])
    # Each root's shape and, for one of dynamic size, its position among the entry's
    # arguments (`_root`): asked for every access of thousands of generated tasks. Kept
    # for one walk only (`entry_bounds` makes an EntryBounds per walk), during which no
    # type changes.
    _roots: dict[SSAValue, tuple[tuple[int, ...], int | None]] = field(
        default_factory=dict[SSAValue, tuple[tuple[int, ...], int | None]],
        repr=False,
        compare=False,
    )

    def element(
        self,
        op: Operation,
        root: SSAValue,
        index: tuple[int, ...],
        calls: tuple[Operation, ...] = (),
    ) -> None:
        """Record that `op` accesses `root` at `index` (`walk_sure_points`)."""
        shape, arg = self._root(root)
        if self.outside is None:
            for dim, (k, extent) in enumerate(zip(index, shape, strict=True)):
                if k < 0 or (extent != DYNAMIC_INDEX and k >= extent):
                    given = self.given.get(root)
                    self.outside = OutOfBounds(op, root, index, dim, calls=calls, given=given)
                    break
        if arg is None:
            return
        for dim, (k, extent) in enumerate(zip(index, shape, strict=True)):
            if extent == DYNAMIC_INDEX:
                self._grow(op, arg, dim, k + 1)

    def points(
        self,
        op: Operation,
        root: SSAValue,
        points: isl.Set,
        values: tuple[int, ...],
        at: tuple[int, ...],
        through: SSAValue | None = None,
        calls: tuple[Operation, ...] = (),
    ) -> None:
        """Record the points at which `op` accesses `root` (`walk_sure_points`): where
        its literals' `values` are among those that reach outside the memref, or where
        the memref, an entry argument, has a dimension of dynamic size."""
        shape, arg = self._root(root)
        if arg is None and (self.outside is not None or not _bad(points, at, shape).holds(values)):
            return
        points = _in_64_bits(_fixed(points, values), at)
        if points.is_empty():
            return
        if self.outside is None:
            self.outside = _outside(op, root, points, at, shape, through)
            if self.outside is not None and (calls or root in self.given):
                self.outside = replace(self.outside, calls=calls, given=self.given.get(root))
        if arg is not None:
            self._need(op, arg, points, at, shape)

    def _need(
        self, op: Operation, arg: int, points: isl.Set, at: tuple[int, ...], shape: tuple[int, ...]
    ) -> None:
        for dim, (pos, extent) in enumerate(zip(at, shape, strict=True)):
            if extent != DYNAMIC_INDEX:
                continue
            highest = points.dim_max_val(pos)
            if highest.is_int():
                self._grow(op, arg, dim, int(highest.to_python()) + 1)

    def _grow(self, op: Operation, arg: int, dim: int, size: int) -> None:
        known = self.needs.get((arg, dim))
        if size > 0 and (known is None or size > known.size):
            self.needs[(arg, dim)] = Need(arg, dim, size, op)

    def _root(self, root: SSAValue) -> tuple[tuple[int, ...], int | None]:
        """`root`'s shape, and its argument (`_argument`) when it has a dimension of
        dynamic size (None otherwise)."""
        found = self._roots.get(root)
        if found is None and root in self.given:
            found = self._roots[root] = (self.given[root], None)
        if found is None:
            shape = _shape(root)
            arg = self._argument(root) if DYNAMIC_INDEX in shape else None
            found = self._roots[root] = (shape, arg)
        return found

    def _argument(self, root: SSAValue) -> int | None:
        """`root`'s position among the entry's arguments; None for another buffer."""
        if isinstance(root, BlockArgument) and root.owner is self.entry:
            return root.index
        return None


@dataclass(frozen=True)
class _Bad:
    """The values of an access's literals for which some point is out of bounds, as
    integer constraints per piece (equalities, inequalities; the constant term last), or
    as an isl set where a piece has existentially quantified variables."""

    pieces: list[tuple[list[list[int]], list[list[int]]]] | None
    params: isl.Set

    def holds(self, values: tuple[int, ...]) -> bool:
        if self.pieces is None:
            return not _fixed(self.params, values).is_empty()
        point = [*values, 1]
        return any(
            all(_dot(eq, point) == 0 for eq in eqs)
            and all(_dot(ineq, point) >= 0 for ineq in ineqs)
            for eqs, ineqs in self.pieces
        )


def _dot(row: list[int], point: list[int]) -> int:
    return sum(c * v for c, v in zip(row, point, strict=True))


# By the id of the set (kept alive here): isl compares sets slowly.
_BAD: dict[tuple[int, tuple[int, ...], tuple[int, ...]], tuple[isl.Set, _Bad]] = {}


def _bad(points: isl.Set, at: tuple[int, ...], shape: tuple[int, ...]) -> _Bad:
    """Found once for all accesses of one text (`walk_sure_points` gives them one set)."""
    key = (id(points), at, shape)
    found = _BAD.get(key)
    if found is None:
        params = _outside_set(points, at, shape).params()
        found = _BAD[key] = (points, _Bad(_pieces(params), params))
    return found[1]


def _pieces(params: isl.Set) -> list[tuple[list[list[int]], list[list[int]]]] | None:
    out: list[tuple[list[list[int]], list[list[int]]]] = []
    n = params.dim(isl.dim_type.param)
    for piece in params.get_basic_sets():
        if piece.dim(isl.dim_type.div):
            return None
        eqs: list[list[int]] = []
        ineqs: list[list[int]] = []
        for constraint in piece.get_constraints():
            row = [
                int(constraint.get_coefficient_val(isl.dim_type.param, k).to_python())
                for k in range(n)
            ]
            row.append(int(constraint.get_constant_val().to_python()))
            (eqs if constraint.is_equality() else ineqs).append(row)
        out.append((eqs, ineqs))
    return out


def _fixed(region: isl.Set, values: Sequence[int]) -> isl.Set:
    """`region` with its parameters fixed to `values`, in order, and projected out."""
    params = isl.dim_type.param
    for k, value in enumerate(values):
        region = region.fix_val(params, k, isl.Val(str(value)))
    return region.project_out(params, 0, region.dim(params))


def _shape(memref: SSAValue) -> tuple[int, ...]:
    assert isinstance(memref.type, MemRefType)
    return tuple(memref.type.get_shape())


def _in_64_bits(points: isl.Set, at: tuple[int, ...]) -> isl.Set:
    """The points whose subscripts (at positions `at`) fit in signed 64 bits. At the
    others the analysis took index arithmetic that wraps as exact (a called function's
    `3 * k` of its caller's loop variable, from k = 6148914691236517206: index 2 runs,
    not 2^64 + 2), so they are not what runs."""
    set_dim = isl.dim_type.set
    for pos in at:
        points = points.lower_bound_val(set_dim, pos, isl.Val(str(-_HALF_64)))
        points = points.upper_bound_val(set_dim, pos, isl.Val(str(_HALF_64 - 1)))
    return points


def _outside_set(points: isl.Set, at: tuple[int, ...], shape: tuple[int, ...]) -> isl.Set:
    """The points whose subscripts (at positions `at`) lie outside `shape`."""
    set_dim = isl.dim_type.set
    outside = points.empty(points.get_space())
    for pos, extent in zip(at, shape, strict=True):
        outside = outside | points.upper_bound_val(set_dim, pos, isl.Val(-1))
        if extent != DYNAMIC_INDEX:
            outside = outside | points.lower_bound_val(set_dim, pos, isl.Val(str(extent)))
    return outside


def _outside(
    op: Operation,
    root: SSAValue,
    points: isl.Set,
    at: tuple[int, ...],
    shape: tuple[int, ...],
    through: SSAValue | None,
) -> OutOfBounds | None:
    set_dim = isl.dim_type.set
    outside = _outside_set(points, at, shape)
    if outside.is_empty():
        return None
    first = outside.lexmin().sample_point()
    index = tuple(int(first.get_coordinate_val(set_dim, pos).to_python()) for pos in at)
    dim = next(
        d
        for d, (k, extent) in enumerate(zip(index, shape, strict=True))
        if k < 0 or (extent != DYNAMIC_INDEX and k >= extent)
    )
    return OutOfBounds(op, root, index, dim, through)


def _entry_block(module: ModuleOp, entry: str) -> Block | None:
    """The block of `entry`, a function of one block; None for any other."""
    function = SymbolTable.lookup_symbol(module, entry)
    if not isinstance(function, FuncOp) or len(function.body.blocks) != 1:
        return None
    return function.body.blocks[0]


def entry_bounds(module: ModuleOp, entry: str) -> EntryBounds:
    """What the accesses of `entry` (run once, as the program's entry) surely reach; nothing
    for an entry that is not a function of one block."""
    block = _entry_block(module, entry)
    if block is None:
        return EntryBounds()
    found = EntryBounds(entry=block)
    roots = [arg for arg in block.args if isinstance(arg.type, MemRefType)]
    functions = {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp)}
    walk_sure_points(block.ops, roots, found, functions)
    return found


def open_arguments(module: ModuleOp, entry: str) -> tuple[int, ...]:
    """The entry's arguments whose inputs may decide accesses the analysis left open: a
    memref whose dynamic extent `memref.dim` measures in the entry, an integer or index
    scalar that something uses. Empty for an entry that is not a function of one block:
    then nothing given decides more (`given_bounds`)."""
    block = _entry_block(module, entry)
    if block is None:
        return ()
    return tuple(arg.index for arg in block.args if _measured(arg) or _counted(arg))


def _measured(arg: BlockArgument) -> bool:
    return (
        isinstance(arg.type, MemRefType)
        and DYNAMIC_INDEX in arg.type.get_shape()
        and any(isinstance(use.operation, DimOp) for use in arg.uses)
    )


def _counted(arg: BlockArgument) -> bool:
    return scalar_int_width(arg.type) is not None and bool(arg.uses)


def given_bounds(
    module: ModuleOp,
    entry: str,
    shapes: Mapping[int, tuple[int, ...]],
    scalars: Mapping[int, int],
) -> EntryBounds:
    """`entry_bounds` for a run with given inputs: the memref arguments numbered in
    `shapes` of those shapes, the integer arguments in `scalars` of those values (read as
    their type's signed numbers), so that loops bounded by them are known exactly."""
    block = _entry_block(module, entry)
    if block is None:
        return EntryBounds()
    function = block.parent_op()
    args = block.args
    found = EntryBounds(entry=block, given={args[k]: shape for k, shape in shapes.items()})
    known: dict[SSAValue, int] = {}
    for k, value in scalars.items():
        width = scalar_int_width(args[k].type)
        assert width is not None, "an input for an argument that is not an integer"
        known[args[k]] = signed(value, width)
    for k, shape in shapes.items():
        known.update(_extents(args[k], shape))
    roots = [arg for arg in args if isinstance(arg.type, MemRefType)]
    # Not the entry: a call of it would take other arguments than the numbers `known`
    # fixes for its body, so such a call is not followed (nothing after it surely runs).
    functions = {
        f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp) and f is not function
    }
    walk_sure_points(block.ops, roots, found, functions, known)
    return found


def _extents(arg: BlockArgument, shape: tuple[int, ...]) -> dict[SSAValue, int]:
    """What each `memref.dim` of `arg` at a constant dimension measures, given `shape`."""
    out: dict[SSAValue, int] = {}
    for use in arg.uses:
        op = use.operation
        if not isinstance(op, DimOp) or op.source is not arg:
            continue
        index = op.index.owner
        if isinstance(index, ConstantOp) and isinstance(index.value, IntegerAttr):
            dim = index.value.value.data
            if 0 <= dim < len(shape):
                out[op.result] = shape[dim]
    return out


def check_given_bounds(
    module: ModuleOp,
    entry: str,
    shapes: Mapping[int, tuple[int, ...]],
    scalars: Mapping[int, int],
) -> None:
    """Refuse, at its line, an access that surely runs outside its memref with these
    inputs (`given_bounds`)."""
    outside = given_bounds(module, entry, shapes, scalars).outside
    if outside is not None:
        raise error_at(outside.op, out_of_bounds_message(replace(outside, inputs=True)))


def check_bounds(module: ModuleOp, entry: str) -> EntryBounds:
    """Refuse an entry with an access that surely runs outside its memref, at its line:
    it would stop the run there, or with --no-runtime-checks read another array's
    elements or write over them. What was found, for `entry_signature`'s
    needs."""
    found = entry_bounds(module, entry)
    if found.outside is not None:
        raise error_at(found.outside.op, out_of_bounds_message(found.outside))
    return found


def out_of_bounds_message(found: OutOfBounds) -> str:
    return _access_words(found) + _called_words(found.calls)


def _called_words(calls: tuple[Operation, ...]) -> str:
    """Where the entry calls the function of the access from, innermost call first."""
    if not calls:
        return ""
    sites = [f"the '{call.name}' at {loc_of(call)}" for call in reversed(calls)]
    return f". The entry reaches it through {', called from '.join(sites)}"


def _access_words(found: OutOfBounds) -> str:
    type_ = found.memref.type
    assert isinstance(type_, MemRefType)
    shape = type_.get_shape()
    k = found.index[found.dim]
    extent = (found.given or shape)[found.dim]
    size = "below 0" if k < 0 else f"whose size is {extent}"
    runs = "each time the program runs" + (" with these inputs" if found.inputs else "")
    # Out of an input's shape, not of the type's: the input is named, and may be larger.
    # Decided by the inputs (a scalar argument's value): other inputs are a fix too.
    fix = "Give other inputs, or fix" if found.inputs else "Fix"
    if found.given is not None:
        runs += f" ({_argument_words(found.memref)} given an array of shape {found.given})"
        fix = "Give a larger array, or fix"
    written = "x".join("?" if d == DYNAMIC_INDEX else str(d) for d in shape)
    indices = ", ".join(map(str, found.index))
    # Not "native code does not check it": by default it does, and stops the run there.
    unchecked = f"{runs}."
    if found.through is not None:
        return (
            f"'{found.op.name}' accesses, through the view {_view_words(found.through)}, "
            f"index {k} of dimension {found.dim} of the memref it views, "
            f"{_named(found.memref)}, {size}, out of bounds (memref of shape {written}, "
            f"indices [{indices}]), {unchecked} {fix} the view's offset, sizes "
            f"and strides so that it stays within {_named(found.memref)}, or the loop bounds "
            "or subscripts"
        )
    chain, base = view_chain(found.memref)
    view = f" of the view {_named(found.memref)}" if chain else ""
    made = f"; {_view_words(found.memref)} views {_named(base)}" if chain else ""
    return (
        f"'{found.op.name}' accesses index {k} of dimension {found.dim}, {size}, out of "
        f"bounds{view} (memref of shape {written}, indices [{indices}]{made}), {unchecked} "
        f"{fix} the loop bounds or subscripts"
    )


def _argument_words(arg: SSAValue) -> str:
    """An entry argument as the input errors name it, with its name in the program."""
    assert isinstance(arg, BlockArgument)
    name = f" ({_named(arg)})" if arg.name_hint else ""
    return f"argument #{arg.index}{name}"


def _view_words(view: SSAValue) -> str:
    """`view`'s name, with the op that makes it and where."""
    op = view.owner
    if not isinstance(op, Operation):
        return _named(view)
    where = loc_of(op)
    at = f" at {where}" if where is not None else ""
    return f"{_named(view)} (the '{op.name}'{at})"


def _named(value: SSAValue) -> str:
    if value.name_hint:
        return value_name(value)
    owner = value.owner
    if isinstance(owner, Operation):
        return f"the result of '{owner.name}'"
    return f"argument #{value.index}" if isinstance(value, BlockArgument) else "a memref"


def need_message(need: Need) -> str:
    """Where and why an argument needs `need.size` elements, for the input check."""
    where = loc_of(need.op)
    at = f" at {where}" if where is not None else ""
    return f"'{need.op.name}'{at} accesses index {need.size - 1} of dimension {need.dim}"
