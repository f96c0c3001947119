"""Which subscripts of an access are proven in bounds before the run: the native backend
checks the others as they run (dhir-bounds-checks), unless the user asks for no checks.

A subscript is proven when some lower bound of it is at least 0 and some upper bound of
it (plus the lanes a vector moves along that dimension, less one) is below the
dimension's size. The bounds come from dhir.analysis.lift's reading of the subscript:
each loop variable it holds is replaced by its loop's bounds (`scf.for`, `scf.parallel`,
`affine.for`, `affine.parallel`: lower bound <= variable <= upper bound - 1 in every
iteration that runs, whatever the positive step), innermost first, so that the bounds of
triangular and tiled nests (`j < min(ii + 32, n)`) meet the size they are checked
against. A size is a number (static), or for a dynamic one the value `memref.dim`
measures (the same leaf for every `memref.dim` of that memref and dimension) or the
allocation's operand. A subscript the lifter cannot read (one loaded from memory, a
call's result), a loop variable of a `scf.while`, a guard of an `scf.if`: not proven,
so checked; the analysis never proves what may not hold (a wrong answer with exit 0
is the worst bug).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from xdsl.dialects.builtin import DYNAMIC_INDEX, AnyFloat, MemRefType, VectorType
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from dhir.analysis.lift import (
    DIVISIONS,
    REMAINDERS,
    Affine,
    Atom,
    Div,
    Extreme,
    Leaf,
    Lifted,
    Lifter,
    Mod,
    constant,
    divided,
    divided_by_constant,
    leaf,
)
from dhir.dialects import affine, arith, func, memref, scf
from dhir.dialects.affine import parallel_bounds
from dhir.ir.calls import CallSites, call_sites

_DIVISIONS = (*DIVISIONS, *REMAINDERS)
# arith.cmpi's signed predicates (and eq, ne), by number: whether `left - right` in
# [least, most] surely makes it true, and whether it surely makes it false.
_Decide = Callable[[int, int], bool]
_SIGNED_ORDER: dict[int, tuple[_Decide, _Decide]] = {
    0: (lambda lo, hi: lo == hi == 0, lambda lo, hi: lo > 0 or hi < 0),  # eq
    1: (lambda lo, hi: lo > 0 or hi < 0, lambda lo, hi: lo == hi == 0),  # ne
    2: (lambda lo, hi: hi < 0, lambda lo, hi: lo >= 0),  # slt
    3: (lambda lo, hi: hi <= 0, lambda lo, hi: lo > 0),  # sle
    4: (lambda lo, hi: lo > 0, lambda lo, hi: hi <= 0),  # sgt
    5: (lambda lo, hi: lo >= 0, lambda lo, hi: hi < 0),  # sge
}
# The most bounds followed for one subscript: each `min` of an upper bound doubles them.
MOST_CANDIDATES = 32


@dataclass
class InBounds:
    """Proves subscripts of `module` in bounds; `module` must not change meanwhile. Each
    value is lifted when a question first reaches it (Reader): a `memref.dim` at a
    constant dimension as its memref's size, a division by a positive constant as the
    lifter's Div where it is one (the loops dhir-optimize-bodies makes end at
    `(n divui 4) * 4`), a select whose condition the bounds decide as the value it picks,
    and each other 64-bit value the lifter cannot read (a call's, a load's, a division
    by a run-time value) as a leaf of its own."""

    module: Operation
    lifter: Lifter = field(init=False)
    _sizes: dict[tuple[SSAValue, int], str] = field(default_factory=dict[tuple[SSAValue, int], str])
    # The calls of each function, and the functions named otherwise than by a call: found
    # when first needed.
    _calls: CallSites | None = None
    _following: set[BlockArgument] = field(default_factory=set[BlockArgument])
    # Each loop variable's bounds, asked again by every subscript that holds it: they
    # read only the lifter's values, which it keeps.
    _variables: dict[tuple[BlockArgument, bool], tuple[Affine, ...]] = field(
        default_factory=dict[tuple[BlockArgument, bool], tuple[Affine, ...]]
    )

    def __post_init__(self) -> None:
        self.lifter = Lifter(reader=self, named_unknowns=True)

    def inputs(self, op: Operation) -> Sequence[SSAValue]:
        """The values `read` lifts first (Reader)."""
        if isinstance(op, _DIVISIONS):
            return op.operands[:2]
        if isinstance(op, arith.SelectOp) and isinstance(op.cond.owner, arith.CmpiOp):
            return op.cond.owner.operands
        return ()

    def read(self, value: OpResult) -> Lifted | None:
        """What `value` is, where this knows more than the lifter (Reader)."""
        op = value.op
        if isinstance(op, memref.DimOp):
            dim = self.lifter.constant(op.index)
            return None if dim is None else Lifted.at(leaf(self._size_name(op.source, dim)))
        if isinstance(op, _DIVISIONS):
            return self._divide(op)
        if isinstance(op, arith.SelectOp):
            return self._select(op)
        return None

    def _call_sites(self) -> CallSites:
        if self._calls is None:
            self._calls = call_sites(self.module)
        return self._calls

    def _select(self, op: arith.SelectOp) -> Lifted | None:
        """A select whose condition the bounds decide is the value it picks (the
        allocation of a packed block sized `select(lb < ub, ub - lb, 0)`)."""
        picked = self._decided(op.cond)
        if picked is None:
            return None
        return self.lifter.value(op.lhs if picked else op.rhs)

    def _decided(self, condition: SSAValue) -> bool | None:
        """What an `arith.cmpi` of signed integers or index is wherever it runs, where its
        operands' bounds decide it; None otherwise."""
        op = condition.owner
        if not isinstance(op, arith.CmpiOp) or op.predicate.value.data not in _SIGNED_ORDER:
            return None
        left, right = (self.lifter.value(v) for v in (op.lhs, op.rhs))
        if left is None or right is None:
            return None
        highs = _numbers(self.bounds(left.high - right.low, upper=True))
        lows = _numbers(self.bounds(left.low - right.high, upper=False))
        if not highs or not lows:
            return None
        least, most = max(lows), min(highs)  # of left - right
        holds, fails = _SIGNED_ORDER[op.predicate.value.data]
        if holds(least, most):
            return True
        if fails(least, most):
            return False
        return None

    def _divide(self, op: Operation) -> Lifted | None:
        return divided_by_constant(self.lifter, op, self.not_negative)

    def proven(self, memory: SSAValue, dim: int, index: Lifted | None, lanes: int = 1) -> bool:
        """Whether `index` (and the `lanes` - 1 elements after it) lies in dimension `dim`
        of `memory` wherever the access runs."""
        if not self.not_negative(index):
            return False
        assert index is not None
        size = self.size(memory, dim)
        if size is None:
            return False
        for high in self.bounds(index.high, upper=True):
            gap = (high + constant(lanes) - size).number
            if gap is not None and gap <= 0:
                return True
        return False

    def not_negative(self, index: Lifted | None) -> bool:
        """Whether `index` is 0 or more wherever it is computed."""
        if index is None:
            return False
        low = self.bounds(index.low, upper=False)
        return any(b.number is not None and b.number >= 0 for b in low)

    def size(self, memory: SSAValue, dim: int) -> Affine | None:
        """Dimension `dim` of `memory`'s type, as a number or the leaf of its size."""
        kind = memory.type
        if not isinstance(kind, MemRefType) or not 0 <= dim < kind.get_num_dims():
            return None
        extent = kind.get_shape()[dim]
        if extent != DYNAMIC_INDEX:
            return constant(extent)
        allocated = _allocated_size(memory, dim)
        if allocated is not None:
            # At least its least value: an index below that is inside.
            found = self.lifter.value(allocated)
            if found is not None:
                return found.low
        return leaf(self._size_name(memory, dim))

    def bounds(self, expr: Affine, upper: bool) -> list[Affine]:
        """Upper (or lower) bounds of `expr`, with the loop variables, extremes, divisions
        and remainders it holds replaced by their bounds where known."""
        found: list[Affine] = []
        self._bounds(expr, upper, found, frozenset())
        return found

    def _bounds(
        self, expr: Affine, upper: bool, found: list[Affine], opaque: frozenset[Atom]
    ) -> None:
        if len(found) >= MOST_CANDIDATES:
            return
        picked = _next_atom(expr, opaque)
        if picked is None:
            found.append(expr)
            return
        atom, k = picked
        # A positive coefficient takes the atom's bound the same way; a negative one the other.
        replacements = self._atom_bounds(atom, upper == (k > 0))
        if not replacements:
            self._bounds(expr, upper, found, opaque | {atom})
            return
        rest = expr - Affine.of(atom).scaled(k)
        for bound in replacements:
            self._bounds(rest + bound.scaled(k), upper, found, opaque)

    def _atom_bounds(self, atom: Atom, upper: bool) -> list[Affine]:
        """Bounds of `atom` (upper or lower); empty when none is known."""
        if isinstance(atom, Leaf):
            if not isinstance(atom.key, BlockArgument):
                return []
            return self._variable_bounds(atom.key, upper) or self._argument_bounds(atom.key, upper)
        if isinstance(atom, Mod):
            return [constant(atom.divisor - 1 if upper else 0)]
        if isinstance(atom, Div):
            numbers = _numbers(self.bounds(atom.arg, upper))
            if not numbers:
                return []
            value = min(numbers) if upper else max(numbers)
            rounded = -(-value // atom.divisor) if atom.ceil else value // atom.divisor
            return [constant(rounded)]
        # min is at most each of its arguments, max at least each; the other way round, it
        # is bounded only through every argument's bound.
        if upper != atom.greatest:
            return list(atom.args)
        numbers = [_numbers(self.bounds(arg, upper)) for arg in atom.args]
        if not all(numbers):
            return []
        pick = max if upper else min
        return [constant(pick(min(n) if upper else max(n) for n in numbers))]

    def _variable_bounds(self, variable: BlockArgument, upper: bool) -> list[Affine]:
        """The bounds of a loop's variable where its body runs; none for another value."""
        key = (variable, upper)
        if key not in self._variables:
            self._variables[key] = tuple(self._new_variable_bounds(variable, upper))
        return list(self._variables[key])

    def _new_variable_bounds(self, variable: BlockArgument, upper: bool) -> list[Affine]:
        op = variable.block.parent_op()
        at = variable.index
        if isinstance(op, scf.ForOp) and at == 0:
            lows, highs = self._scf_bounds(op.lb), self._scf_bounds(op.ub)
            step = self.lifter.constant(op.step)
        elif isinstance(op, scf.ParallelOp) and at < len(op.lowerBound):
            lows, highs = self._scf_bounds(op.lowerBound[at]), self._scf_bounds(op.upperBound[at])
            step = self.lifter.constant(op.step[at])
        elif isinstance(op, affine.ForOp) and at == 0:
            lows = self._affine_bounds(op.lowerBoundMap.data, op.lowerBoundOperands)
            highs = self._affine_bounds(op.upperBoundMap.data, op.upperBoundOperands)
            step = op.step.value.data
        elif isinstance(op, affine.ParallelOp) and at < len(op.steps):
            (low_map, low_args), (high_map, high_args), step = parallel_bounds(op, at)
            lows = self._affine_bounds(low_map, low_args)
            highs = self._affine_bounds(high_map, high_args)
        else:
            return []
        # The variable is at least each lower bound and below each upper bound; with a
        # step s > 1 from an exact lower bound lb, at most lb + s * floor((ub - 1 - lb) / s)
        # (an unrolled body's i + 3 stays below ub when ub - lb is a multiple of 4).
        if not upper:
            return [low for low, _ in lows]
        found = [high - constant(1) for _, high in highs]
        if step is None or step <= 1:
            return found
        if len(lows) == 1 and lows[0][0] == lows[0][1]:
            first = lows[0][0]
            for _, high in highs:
                last = high - constant(1) - first
                found.append(first + divided(last, step, False).scaled(step))
        # Every value is congruent to the lower bound modulo the step: the last one below
        # an upper bound congruent to it is a whole step below it (chunks of a parallel
        # loop that dhir-optimize-bodies cuts into vectors: `i < min(lb + chunk, n)`).
        starts = {self.residue(low, step) for low, high in lows if low == high}
        start = starts.pop() if len(starts) == 1 and all(a == b for a, b in lows) else None
        if start is None:
            return found
        for _, high in highs:
            end = self.residue(high, step)
            if end is not None:
                found.append(high - constant(1 + (end - 1 - start) % step))
        return found

    def residue(self, expr: Affine, modulus: int) -> int | None:
        """`expr` modulo `modulus` (> 0) wherever it is computed, where its terms say. Only
        for a power of 2 (or a number): 64-bit arithmetic that wraps keeps those residues."""
        if expr.number is not None:
            return expr.number % modulus
        if modulus & (modulus - 1):
            return None
        total = expr.constant
        for atom, k in expr.terms:
            if k % modulus == 0:
                continue
            found = self._atom_residue(atom, modulus)
            if found is None:
                return None
            total += k * found
        return total % modulus

    def _atom_residue(self, atom: Atom, modulus: int) -> int | None:
        if isinstance(atom, Extreme):
            found = {self.residue(arg, modulus) for arg in atom.args}
            return found.pop() if len(found) == 1 else None
        if isinstance(atom, Mod):
            return self.residue(atom.arg, modulus) if atom.divisor % modulus == 0 else None
        if isinstance(atom, Leaf) and isinstance(atom.key, BlockArgument):
            return self._variable_residue(atom.key, modulus)
        return None

    def _variable_residue(self, variable: BlockArgument, modulus: int) -> int | None:
        """A loop variable modulo `modulus`, where its step is a multiple of it: its
        lower bound's."""
        op = variable.block.parent_op()
        at = variable.index
        if isinstance(op, scf.ForOp) and at == 0:
            low, step = self.lifter.value(op.lb), self.lifter.value(op.step)
        elif isinstance(op, scf.ParallelOp) and at < len(op.lowerBound):
            low, step = self.lifter.value(op.lowerBound[at]), self.lifter.value(op.step[at])
        else:
            return None
        if low is None or step is None or not low.exact or not step.exact:
            return None
        if self.residue(step.low, modulus) != 0:
            return None
        return self.residue(low.low, modulus)

    def _argument_bounds(self, argument: BlockArgument, upper: bool) -> list[Affine]:
        """The bound of a private function's argument over every call of it in the module
        (a numbers each call's bounds give): the step of a schedule that
        dhir-lower-to-mpi outlines takes the time loop's variable so. Private, it has no
        caller elsewhere; named otherwise than by a call (a pointer to it), it is not
        followed."""
        function = argument.block.parent_op()
        if (
            not isinstance(function, func.FuncOp)
            or argument.block is not function.body.blocks.first
            or function.sym_visibility is None
            or function.sym_visibility.data != "private"
            or argument in self._following
        ):
            return []
        name = function.sym_name.data
        sites = self._call_sites()
        calls = sites.of(name)
        if not calls or name in sites.named:
            return []
        self._following.add(argument)  # a recursive call says nothing more
        try:
            found = [self._call_bound(call, argument.index, upper) for call in calls]
        finally:
            self._following.discard(argument)
        if any(f is None for f in found):
            return []
        numbers = [f for f in found if f is not None]
        return [constant(max(numbers) if upper else min(numbers))]

    def _call_bound(self, call: func.CallOp, position: int, upper: bool) -> int | None:
        if position >= len(call.arguments):
            return None
        lifted = self.lifter.value(call.arguments[position])
        if lifted is None:
            return None
        numbers = _numbers(self.bounds(lifted.high if upper else lifted.low, upper))
        if not numbers:
            return None
        return min(numbers) if upper else max(numbers)

    def _scf_bounds(self, value: SSAValue) -> list[tuple[Affine, Affine]]:
        lifted = self.lifter.value(value)
        return [] if lifted is None else [(lifted.low, lifted.high)]

    def _affine_bounds(
        self, amap: object, operands: Sequence[SSAValue]
    ) -> list[tuple[Affine, Affine]]:
        results = self.lifter.map_each(amap, operands)  # pyright: ignore[reportArgumentType]
        return [(r.low, r.high) for r in results if r is not None]

    def _size_name(self, memory: SSAValue, dim: int) -> str:
        root = _uncast(memory)
        key = (root, dim)
        if key not in self._sizes:
            self._sizes[key] = f"size{len(self._sizes)}.{dim}"
        return self._sizes[key]


_T = TypeVar("_T")
_Op = TypeVar("_Op", bound=Operation)
_LOOPS = (scf.ForOp, scf.ParallelOp, affine.ForOp, affine.ParallelOp)
# Past this many ops defining one value from outside a nest, that value is keyed by itself.
_CONE_DEPTH = 64


def shared_decisions(ops: Sequence[_Op], decide: Callable[[_Op], _T]) -> list[_T]:
    """`decide(op)` for each of `ops` (in walk order), asked once per shape of loop nest:
    an op in an outermost loop whose key (`_NestKey`) equals an earlier nest's, at the
    same place in it, takes the decision of the op there. For a decision that reads only
    `InBounds` proofs: what they read of an op in a nest is the nest and the values it
    uses from outside, which the key holds up to identity (a memref argument of its
    function by its type only, as its sizes are its type's or leaves of its own), and a
    function's other arguments as themselves, as their bounds come from the calls
    (generated tasks repeat a nest with other memrefs hundreds of times)."""
    groups: dict[Operation | None, list[int]] = {}
    for k, nest in enumerate(_outermost_loops(ops)):
        groups.setdefault(nest, []).append(k)
    found: list[_T | None] = [None] * len(ops)
    # By the key's hash, computed once: a key of a large nest costs to hash.
    seen: dict[int, list[tuple[object, list[_T]]]] = {}
    for nest, members in groups.items():
        key = _NestKey(nest, {ops[k]: None for k in members}).key() if nest else None
        try:
            hashed = hash(key)
        except TypeError:  # an attribute that cannot be hashed: decided on its own
            key = None
            hashed = 0
        alike = seen.setdefault(hashed, []) if key is not None else []
        known = next((decided for other, decided in alike if other == key), None)
        decided = known if known is not None else [decide(ops[k]) for k in members]
        if key is not None and known is None:
            alike.append((key, decided))
        for k, decision in zip(members, decided, strict=True):
            found[k] = decision
    return found  # pyright: ignore[reportReturnType]


def _outermost_loops(ops: Sequence[Operation]) -> list[Operation | None]:
    """The outermost loop around each of `ops`, found once per op holding them: tasks
    repeat one deep nest thousands of times, and walking up from every op was a third
    of the compile time of the 10,000-task benchmark."""
    found: dict[int, Operation | None] = {}
    is_loop: dict[type, bool] = {}

    def outermost(holder: Operation | None) -> Operation | None:
        path: list[Operation] = []
        while holder is not None and id(holder) not in found:
            path.append(holder)
            holder = holder.parent_op()
        outer = found[id(holder)] if holder is not None else None
        for op in reversed(path):
            kind = type(op)
            if kind not in is_loop:
                is_loop[kind] = issubclass(kind, _LOOPS)
            if outer is None and is_loop[kind]:
                outer = op
            found[id(op)] = outer
        return outer

    return [outermost(op.parent_op()) for op in ops]


class _NestKey:
    """The key of a loop nest for `shared_decisions`: each op of it (class, operands,
    result types, properties, attributes, regions and block arguments) in walk order,
    where each of `wanted` is, and each value from outside by the ops that make it (a
    numbered list, so that one value used twice differs from two alike)."""

    def __init__(self, nest: Operation, wanted: dict[Operation, None]) -> None:
        self.nest = nest
        self.wanted = wanted
        self.inside: dict[SSAValue, int] = {}
        self.unread: set[SSAValue] = set()  # made by ops left out of the key
        self.outside: dict[SSAValue, int] = {}
        self.cone: list[object] = []
        self.parts: list[object] = []

    def key(self) -> object:
        self._op(self.nest)
        return (tuple(self.parts), tuple(self.cone))

    def _op(self, op: Operation) -> None:
        if _unread(op) and op not in self.wanted:
            for result in op.results:  # no subscript, size or bound: left out
                self.unread.add(result)
            return
        operands = tuple([self._ref(value) for value in op.operands])
        self.parts.append(
            (
                type(op),
                operands,
                tuple([r.type for r in op.results]),
                tuple(op.properties.items()),
                tuple(op.attributes.items()),
                len(op.successors),
                len(op.regions),
                op in self.wanted,
            )
        )
        for result in op.results:
            self.inside[result] = len(self.inside)
        for region in op.regions:
            self.parts.append(("region", len(region.blocks)))
            for block in region.blocks:
                self.parts.append(("block", tuple(arg.type for arg in block.args)))
                for arg in block.args:
                    self.inside[arg] = len(self.inside)
                for inner in block.ops:
                    self._op(inner)

    def _ref(self, value: SSAValue) -> object:
        at = self.inside.get(value)
        if at is not None:
            return ("in", at)
        if value in self.unread or isinstance(value.type, AnyFloat | VectorType):
            return ("unread", value.type)  # never lifted: by its type
        return ("out", self._outer(value, 0))

    def _outer(self, value: SSAValue, depth: int) -> int:
        number = self.outside.get(value)
        if number is not None:
            return number
        self.cone.append(self._made(value, depth))
        self.outside[value] = len(self.outside)
        return self.outside[value]

    def _made(self, value: SSAValue, depth: int) -> object:
        if isinstance(value, BlockArgument):
            owner = value.block.parent_op()
            entry = isinstance(owner, func.FuncOp) and value.block is owner.body.blocks.first
            if entry and isinstance(value.type, MemRefType):
                return ("memref argument", value.type)
            return ("itself", value)
        op = value.owner
        assert isinstance(op, Operation)
        if op.regions or op.successors or depth >= _CONE_DEPTH:
            return ("itself", value)
        assert isinstance(value, OpResult)
        operands = tuple([self._outer(v, depth + 1) for v in op.operands])
        return (
            type(op),
            value.index,
            operands,
            tuple([r.type for r in op.results]),
            tuple(op.properties.items()),
            tuple(op.attributes.items()),
        )


def _unread(op: Operation) -> bool:
    """Whether no proof reads what `op` makes: results, floats and vectors only (lanes
    are never lifted), and no regions. Ops of no result stay: a counted while's bounds
    are read from its terminators."""
    if op.regions or op.successors or not op.results:
        return False
    return all(isinstance(r.type, AnyFloat | VectorType) for r in op.results)


def _next_atom(expr: Affine, opaque: frozenset[Atom]) -> tuple[Atom, int] | None:
    """The atom of `expr` to replace next: one that is not a leaf, else the variable of
    the innermost loop (its bounds hold only outer loops' variables); none of `opaque`."""
    best: tuple[Atom, int] | None = None
    depth = -1
    for atom, k in expr.terms:
        if atom in opaque:
            continue
        if not isinstance(atom, Leaf):
            return atom, k
        level = _loop_depth(atom.key)
        if level > depth:
            best, depth = (atom, k), level
    return best


def _numbers(exprs: Sequence[Affine]) -> list[int]:
    return [e.number for e in exprs if e.number is not None]


def _loop_depth(key: object) -> int:
    """How deep the loop whose variable `key` is lies; 0 for a function's argument
    (replaced last, by its calls' bounds), -1 for any other value."""
    if not isinstance(key, BlockArgument):
        return -1
    op = key.block.parent_op()
    if isinstance(op, func.FuncOp):
        return 0
    if not isinstance(op, scf.ForOp | scf.ParallelOp | affine.ForOp | affine.ParallelOp):
        return -1
    depth = 0
    while op is not None:
        op = op.parent_op()
        depth += 1
    return depth


def _uncast(memory: SSAValue) -> SSAValue:
    """`memory` through the `memref.cast` ops that make it (they keep its sizes)."""
    while isinstance(memory.owner, memref.CastOp):
        memory = memory.owner.source
    return memory


def _allocated_size(memory: SSAValue, dim: int) -> SSAValue | None:
    """The operand an allocation gives dimension `dim` of dynamic extent."""
    op = memory.owner
    if not isinstance(op, memref.AllocOp | memref.AllocaOp):
        return None
    kind = memory.type
    assert isinstance(kind, MemRefType)
    shape = kind.get_shape()
    position = sum(1 for d in shape[:dim] if d == DYNAMIC_INDEX)
    sizes = op.dynamic_sizes
    return sizes[position] if position < len(sizes) else None
