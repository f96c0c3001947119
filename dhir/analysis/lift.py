"""What an index or integer SSA value is, as a quasi-affine expression: the one reading of
index arithmetic that the access regions (isl), the reuse count (linear forms), the
trip counts (constants) and dhir-split (constant bounds) share.

`Lifter.value` follows `arith` constants, `addi`/`subi`/`muli` (a product needs a
constant side), the integer casts (`index_cast`, `index_castui`, `extsi`, `extui`,
`trunci`), `minsi`/`maxsi`/`minui`/`maxui`, `select`, `affine.apply`/`min`/`max`, and
the index dialect's ops that compute the same (`constant`, `add`, `sub`, `mul`, `mins`,
`maxs`, `minu`, `maxu`, `casts`, `castu`) and `memref.dim` of a static extent (a
constant), down to block arguments (loop variables, function arguments), which are its
leaves.
What it gives is a `Lifted`: bounds `low <= value <= high` over the leaves, exact when
both are the same expression. Anything else is unknown (None), and every caller must
take unknown as the worst case (any value at all). A caller that knows more of some ops
gives a `Reader`, asked first as each value is lifted, on demand (dhir.analysis.
proven_bounds reads divisions and dynamic sizes so).

The semantics, made explicit:
- index and 64-bit values are exact integers: their arithmetic is taken not to overflow,
  unless it provably may. MLIR's `addi`, `subi` and `muli` wrap at 64 bits as at any
  width, so a result whose range (from the loop variables' constant ranges) leaves the
  signed 64-bit range, or with a constant or coefficient past it, is unknown: `i + C + C`
  with `C = 2**63 - 1` is `i - 2`, not `i + 2**64 - 2`.
- A narrower iN value has no sign of its own and its arithmetic wraps: the lifter knows
  it modulo 2**N (an expression congruent to its bits). An op that reads it as a number
  reads it with the op's signedness: `index_cast`, `extsi`, `minsi`, an `scf.for`'s
  bounds signed, `((e + 2**(N-1)) mod 2**N) - 2**(N-1)`; `index_castui`, `extui`,
  `minui` unsigned, `e mod 2**N`. Both are exact (quasi-affine); an unsigned read of a
  value that may be negative is NOT the value itself. A truncation keeps the bits.
- min and max are exact (isl reads `min`/`max`); a `select` lies between its choices (a
  range, never exact). A range that a narrow op may wrap widens to the whole range of
  its type; a range through an op that needs an exact operand (a product of two
  ranges, a wider-than-64-bit cast) is unknown.

Views of the result: `isl_text` (for isl sets), `Lifter.linear` (coefficients of the
leaves, mods that cannot wrap dropped, from the loop variables' constant ranges),
`evaluate`/`Lifter.constant` (the number, given values of the leaves).
"""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from dhir.analysis.counted_whiles import counted_bounds
from dhir.dialects import affine, arith, index, memref, scf
from dhir.dialects import affine as dhir_affine
from dhir.dialects.affine import parallel_bounds
from dhir.dialects.arith import INDEX_WIDTH, IntCast, int_cast, scalar_int_width

# --- expressions ----------------------------------------------------------------------

# What a leaf stands for: a block argument, or a name a caller chose.
Key = SSAValue | str


def _kept_hash(expr: object, fields: tuple[object, ...]) -> int:
    """The hash of an expression, kept on it: parts are shared, and hashing each anew
    walked every path through them (2**length for values that each floor-divide and
    take the remainder of the last one)."""
    found = expr.__dict__.get("_hash")
    if found is None:
        found = hash(fields)
        object.__setattr__(expr, "_hash", found)
    return found


@dataclass(frozen=True)
class Leaf:
    """A value the lifter does not look through: a block argument, or a name a caller
    chose (a linalg op's loop variable)."""

    key: "Key"


@dataclass(frozen=True)
class Div:
    """floor(arg / divisor), or ceil with `ceil`; divisor > 0."""

    arg: "Affine"
    divisor: int
    ceil: bool = False

    def __hash__(self) -> int:
        return _kept_hash(self, (self.arg, self.divisor, self.ceil))


@dataclass(frozen=True)
class Mod:
    """arg mod divisor, in [0, divisor); divisor > 0."""

    arg: "Affine"
    divisor: int

    def __hash__(self) -> int:
        return _kept_hash(self, (self.arg, self.divisor))


@dataclass(frozen=True)
class Extreme:
    """The least (or with `greatest`, the greatest) of two or more expressions."""

    args: tuple["Affine", ...]
    greatest: bool

    def __hash__(self) -> int:
        return _kept_hash(self, (self.args, self.greatest))


Atom = Leaf | Div | Mod | Extreme


@dataclass(frozen=True)
class Affine:
    """sum(coefficient * atom) + constant: a quasi-affine expression, kept flat so that a
    long chain of additions stays one level deep."""

    terms: tuple[tuple[Atom, int], ...] = ()
    constant: int = 0

    def __hash__(self) -> int:
        return _kept_hash(self, (self.terms, self.constant))

    @staticmethod
    def of(atom: Atom) -> "Affine":
        return Affine(((atom, 1),))

    @property
    def number(self) -> int | None:
        """The constant this is, when it has no terms."""
        return None if self.terms else self.constant

    def __add__(self, other: "Affine") -> "Affine":
        merged = dict(self.terms)
        for atom, k in other.terms:
            merged[atom] = merged.get(atom, 0) + k
        terms = tuple((atom, k) for atom, k in merged.items() if k)
        return Affine(terms, self.constant + other.constant)

    def __sub__(self, other: "Affine") -> "Affine":
        return self + other.scaled(-1)

    def scaled(self, factor: int) -> "Affine":
        if factor == 0:
            return Affine()
        return Affine(tuple((a, k * factor) for a, k in self.terms), self.constant * factor)


def leaves_of(expr: Affine) -> Iterator[Key]:
    """The leaves `expr` holds, inside divisions, remainders and extremes too (a leaf
    may come more than once)."""
    for atom, _ in expr.terms:
        if isinstance(atom, Leaf):
            yield atom.key
        elif isinstance(atom, Extreme):
            for arg in atom.args:
                yield from leaves_of(arg)
        else:
            yield from leaves_of(atom.arg)


def constant(value: int) -> Affine:
    return Affine((), value)


def leaf(key: Key) -> Affine:
    return Affine.of(Leaf(key))


def divided(arg: Affine, divisor: int, ceil: bool) -> Affine:
    """`arg` divided by `divisor` (> 0), rounded down, or up with `ceil`."""
    known = arg.number
    if known is not None:
        return constant(-(-known // divisor) if ceil else known // divisor)
    return arg if divisor == 1 else Affine.of(Div(arg, divisor, ceil))


def modulo(arg: Affine, divisor: int) -> Affine:
    """`arg` modulo `divisor` (> 0), as floor division leaves it."""
    known = arg.number
    if known is not None:
        return constant(known % divisor)
    return constant(0) if divisor == 1 else Affine.of(Mod(arg, divisor))


def _extreme(args: Iterable[Affine], greatest: bool) -> Affine:
    """min (or max) of `args`, nested ones of the same kind flattened, constants folded."""
    flat: list[Affine] = []
    numbers: list[int] = []
    for arg in args:
        atom = arg.terms[0][0] if len(arg.terms) == 1 else None
        nested = (
            isinstance(atom, Extreme)
            and atom.greatest == greatest
            and arg.terms[0][1] == 1
            and arg.constant == 0
        )
        for part in atom.args if nested and isinstance(atom, Extreme) else (arg,):
            if part.number is not None:
                numbers.append(part.number)
            elif part not in flat:
                flat.append(part)
    if numbers:
        flat.append(constant(max(numbers) if greatest else min(numbers)))
    return flat[0] if len(flat) == 1 else Affine.of(Extreme(tuple(flat), greatest))


@dataclass(frozen=True)
class Lifted:
    """A value's bounds: low <= value <= high, over the leaves; exact when they are the
    same expression."""

    low: Affine
    high: Affine

    @staticmethod
    def at(expr: Affine) -> "Lifted":
        return Lifted(expr, expr)

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @property
    def number(self) -> int | None:
        """The constant the value is, when both bounds are that constant."""
        low = self.low.number
        return low if low is not None and low == self.high.number else None


# --- views ----------------------------------------------------------------------------


# The most atoms an expression written out for isl may hold. Shared parts are written
# once each time they occur: values that each floor-divide and take the remainder of
# the last one double the text at each step, which isl then takes seconds to read.
ISL_ATOMS = 10_000


def isl_text(expr: Affine, names: Mapping[SSAValue, str]) -> str | None:
    """`expr` as isl's quasi-affine text, each leaf by its name in `names` (a leaf keyed
    by a string is that name); None when a leaf has no name, or when the text would
    hold more than ISL_ATOMS atoms."""
    if _written_size(expr, {}) > ISL_ATOMS:
        return None
    return _text(expr, names)


def _written_size(expr: Affine, sizes: dict[int, int]) -> int:
    """How many atoms `expr` holds written out, each shared part counted where it
    occurs; `sizes` keeps each atom's (by identity: hashing one walks all of it)."""
    total = 0
    for atom, _ in expr.terms:
        size = sizes.get(id(atom))
        if size is None:
            if isinstance(atom, Leaf):
                size = 1
            elif isinstance(atom, Extreme):
                size = 1 + sum(_written_size(a, sizes) for a in atom.args)
            else:
                size = 1 + _written_size(atom.arg, sizes)
            sizes[id(atom)] = size
        total += size
        if total > ISL_ATOMS:
            break
    return total


def _text(expr: Affine, names: Mapping[SSAValue, str]) -> str | None:
    parts: list[str] = []
    for atom, k in expr.terms:
        text = _atom_text(atom, names)
        if text is None:
            return None
        if not isinstance(atom, Leaf):  # a name needs no parentheses
            text = f"({text})"
        parts.append(text if k == 1 else f"{k}*{text}")
    if expr.constant or not parts:
        parts.append(str(expr.constant))
    return " + ".join(parts)


def _atom_text(atom: Atom, names: Mapping[SSAValue, str]) -> str | None:
    if isinstance(atom, Leaf):
        return atom.key if isinstance(atom.key, str) else names.get(atom.key)
    if isinstance(atom, Extreme):
        texts = [_text(a, names) for a in atom.args]
        if any(t is None for t in texts):
            return None
        word = "max" if atom.greatest else "min"
        out = texts[0]
        for text in texts[1:]:  # isl's min and max take two arguments
            out = f"{word}({out}, {text})"
        return out
    inner = _text(atom.arg, names)
    if inner is None:
        return None
    if isinstance(atom, Mod):
        return f"({inner}) mod {atom.divisor}"
    return f"{'ceil' if atom.ceil else 'floor'}(({inner})/{atom.divisor})"


def number(lifted: Lifted | None, env: Mapping[SSAValue, int]) -> int | None:
    """The number `lifted` is when each leaf has the value `env` gives, when its bounds
    agree on one."""
    if lifted is None:
        return None
    low = evaluate(lifted.low, env)
    if low is None or lifted.exact:
        return low
    return low if low == evaluate(lifted.high, env) else None


def evaluate(expr: Affine, env: Mapping[SSAValue, int]) -> int | None:
    """The number `expr` is when each leaf has the value `env` gives; None when a leaf
    has none."""
    total = expr.constant
    for atom, k in expr.terms:
        value = _atom_value(atom, env)
        if value is None:
            return None
        total += k * value
    return total


def _atom_value(atom: Atom, env: Mapping[SSAValue, int]) -> int | None:
    if isinstance(atom, Leaf):
        return None if isinstance(atom.key, str) else env.get(atom.key)
    if isinstance(atom, Extreme):
        values = [evaluate(a, env) for a in atom.args]
        if any(v is None for v in values):
            return None
        known = [v for v in values if v is not None]
        return max(known) if atom.greatest else min(known)
    inner = evaluate(atom.arg, env)
    if inner is None:
        return None
    if isinstance(atom, Mod):
        return inner % atom.divisor
    return -(-inner // atom.divisor) if atom.ceil else inner // atom.divisor


Interval = tuple[int, int]


def interval(
    expr: Affine,
    ranges: Callable[[Key], Interval | None],
    memo: dict[int, Interval | None] | None = None,
) -> Interval | None:
    """The least and greatest values of `expr` when each leaf lies in the interval
    `ranges` gives; None when a leaf's is unknown. Each shared atom is bounded once
    (`memo`, by identity): following every path took 2**length steps."""
    memo = {} if memo is None else memo
    low = high = expr.constant
    for atom, k in expr.terms:
        if id(atom) in memo:
            found = memo[id(atom)]
        else:
            found = memo[id(atom)] = _atom_interval(atom, ranges, memo)
        if found is None:
            return None
        a, b = found[0] * k, found[1] * k
        low, high = low + min(a, b), high + max(a, b)
    return low, high


def _atom_interval(
    atom: Atom, ranges: Callable[[Key], Interval | None], memo: dict[int, Interval | None]
) -> Interval | None:
    if isinstance(atom, Leaf):
        return ranges(atom.key)
    if isinstance(atom, Extreme):
        found = [interval(a, ranges, memo) for a in atom.args]
        known = [f for f in found if f is not None]
        if len(known) < len(found):
            return None
        pick = max if atom.greatest else min
        return pick(f[0] for f in known), pick(f[1] for f in known)
    inner = interval(atom.arg, ranges, memo)
    if isinstance(atom, Mod):
        fits = inner is not None and 0 <= inner[0] and inner[1] < atom.divisor
        return inner if fits and inner is not None else (0, atom.divisor - 1)
    if inner is None:
        return None
    low, high = (divided(constant(v), atom.divisor, atom.ceil).constant for v in inner)
    return low, high


# --- the lifter -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """What the lifter knows of one value: bounds of its signed value, or, when
    `wrapped` (a narrow value's arithmetic), an exact expression congruent to its bits
    modulo 2**width."""

    lifted: Lifted
    wrapped: bool = False


class Reader(Protocol):
    """What a caller knows of some ops' results beyond the lifter's own reading (a
    `memref.dim` of a dynamic extent as its memref's size): asked first, as each value is
    lifted."""

    def inputs(self, op: Operation) -> Sequence[SSAValue]:
        """The values `read` lifts for `op`'s results: lifted first, so that a long chain
        of such ops needs no recursion."""
        ...

    def read(self, value: OpResult) -> Lifted | None:
        """`value`'s bounds where this knows them; None for the lifter's own reading."""
        ...


class Lifter:
    """Lifts SSA values, remembering each value it has lifted: one per analysis of IR
    that does not change meanwhile.

    A `reader` is asked first for each op's result (Reader). With `named_unknowns`, each
    64-bit result that neither reads is a leaf of its own (a call's, a load's): a number
    with no known bounds, the same wherever it is used, so that `32 * ceildiv(x, 32)` is
    a multiple of 32 and `x - x` is 0."""

    def __init__(self, reader: Reader | None = None, named_unknowns: bool = False) -> None:
        self._memo: dict[SSAValue, _Entry | None] = {}
        self._ranges: dict[Key, Interval | None] = {}
        self._reader = reader
        self._named_unknowns = named_unknowns
        self._unknowns = 0
        self._reading: set[SSAValue] = set()  # the reader's, being read

    # --- public ---------------------------------------------------------------------

    def name(self, value: SSAValue, name: str) -> None:
        """Lift the index value `value` as the leaf `name`, whatever defines it (a
        constant that a caller fixes later)."""
        self._memo[value] = _Entry(Lifted.at(leaf(name)))

    def define(self, value: SSAValue, lifted: Lifted | None) -> None:
        """Lift the index value `value` as `lifted` (None: unknown), whatever defines it
        (a GPU thread's id, a kernel's argument as its launch passes it)."""
        self._memo[value] = None if lifted is None else _Entry(lifted)

    def value(self, value: SSAValue) -> Lifted | None:
        """`value` (index or integer) as a number: a narrow integer read signed."""
        width = scalar_int_width(value.type)
        if width is None:
            return None
        return self._read(self._entry(value), width, unsigned=False)

    def exact(self, value: SSAValue) -> Affine | None:
        """The expression `value` is, when it is exactly one."""
        lifted = self.value(value)
        return lifted.low if lifted is not None and lifted.exact else None

    def constant(self, value: SSAValue, env: Mapping[SSAValue, int] | None = None) -> int | None:
        """The number `value` holds (its leaves valued by `env`), when that fixes it."""
        return number(self.value(value), env or {})

    def map(self, amap: AffineMap, operands: Sequence[SSAValue]) -> list[Lifted] | None:
        """The results of an affine map applied to `operands` (dims, then symbols); None
        when one is unknown."""
        results = self.map_each(amap, operands)
        found = [r for r in results if r is not None]
        return found if len(found) == len(results) == len(amap.results) else None

    def map_each(self, amap: AffineMap, operands: Sequence[SSAValue]) -> list[Lifted | None]:
        """Each result of an affine map applied to `operands`, None where unknown."""
        if len(operands) != amap.num_dims + amap.num_symbols:
            return [None] * len(amap.results)
        args = [self.value(v) for v in operands]
        return [
            self._unwrapped(apply(e, args[: amap.num_dims], args[amap.num_dims :]))
            for e in amap.results
        ]

    def linear(self, lifted: Lifted | None) -> dict[SSAValue, int] | None:
        """The coefficient of each leaf in `lifted` (its constant dropped), when it is
        exact and linear once the mods that provably do not wrap are dropped."""
        if lifted is None or not lifted.exact:
            return None
        simple = self.simplified(lifted.low)
        out: dict[SSAValue, int] = {}
        for atom, k in simple.terms:
            if not isinstance(atom, Leaf) or isinstance(atom.key, str):
                return None
            out[atom.key] = k
        return out

    def simplified(self, expr: Affine) -> Affine:
        """`expr` without the mods whose argument provably lies in [0, divisor)."""
        out = constant(expr.constant)
        for atom, k in expr.terms:
            out = out + self._simple_atom(atom).scaled(k)
        return out

    def interval(self, expr: Affine) -> Interval | None:
        """The range of `expr` from the constant ranges of loop variables."""
        return interval(expr, self.leaf_range)

    def leaf_range(self, key: Key) -> Interval | None:
        """The values a leaf takes: for the variable of a loop with constant bounds and
        a positive step, its first and last; else None."""
        if key not in self._ranges:
            self._ranges[key] = None  # a loop's bounds do not depend on its own variable
            if isinstance(key, BlockArgument):
                self._ranges[key] = self._loop_range(key)
        return self._ranges[key]

    # --- lifting --------------------------------------------------------------------

    def _entry(self, value: SSAValue) -> _Entry | None:
        """What the lifter knows of `value`: its inputs first, without recursion (a
        chain of additions may be long)."""
        if value in self._memo:
            return self._memo[value]
        stack = [value]
        expanded: set[SSAValue] = set()
        while stack:
            top = stack[-1]
            if top in self._memo:
                stack.pop()
                continue
            if top not in expanded:
                expanded.add(top)
                # An input already expanded but not lifted is a cycle (IR that breaks
                # dominance): it stays unknown.
                inputs = self._inputs(top)
                stack.extend(v for v in inputs if v not in self._memo and v not in expanded)
                continue
            stack.pop()
            self._memo[top] = self._step(top)
        return self._memo[value]

    def _inputs(self, value: SSAValue) -> Sequence[SSAValue]:
        """The values lifting `value` needs first."""
        found = _inputs(value)
        op = value.owner
        if self._reader is None or not isinstance(op, Operation):
            return found
        return (*found, *self._reader.inputs(op))

    def _step(self, value: SSAValue) -> _Entry | None:
        width = scalar_int_width(value.type)
        if width is None:
            return None
        if not isinstance(value, OpResult):
            return _Entry(Lifted.at(leaf(value)))
        if value in self._reading:
            return None  # its reader's reading reaches it (IR that breaks dominance)
        read = self._read_first(value)
        if read is not None:
            return _Entry(read)
        found = self._own_step(value, width)
        if found is None and self._named_unknowns and width == INDEX_WIDTH:
            self._unknowns += 1
            return _Entry(Lifted.at(leaf(f"value{self._unknowns}")))
        return found

    def _read_first(self, value: OpResult) -> Lifted | None:
        """The reader's reading of `value`; None where it has none."""
        if self._reader is None:
            return None
        self._reading.add(value)
        try:
            return self._reader.read(value)
        finally:
            self._reading.discard(value)

    def _own_step(self, value: OpResult, width: int) -> _Entry | None:
        op = value.op
        if isinstance(op, arith.ConstantOp | index.ConstantOp):
            attr = op.value
            if not isinstance(attr, IntegerAttr):
                return None
            return _Entry(Lifted.at(constant(attr.value.data)), wrapped=width < INDEX_WIDTH)
        cast = int_cast(op)
        if cast is not None:
            return self._cast(cast, self._memo.get(op.operands[0]))
        step = _STEPS.get(type(op)) or next(
            (s for kind, s in _STEPS.items() if isinstance(op, kind)), None
        )
        return None if step is None else step(self, op, width)

    def _read(self, entry: _Entry | None, width: int, unsigned: bool) -> Lifted | None:
        """The number a value of `width` bits that `entry` describes is, read signed or
        unsigned."""
        if entry is None:
            return None
        lifted = entry.lifted
        if width >= INDEX_WIDTH:
            if not unsigned:
                return lifted
            # 64 bits read unsigned: the same number only when it is not negative.
            found = self.interval(lifted.low)
            return lifted if found is not None and found[0] >= 0 else None
        size = 1 << width
        if entry.wrapped:
            if unsigned:
                return Lifted.at(modulo(lifted.low, size))
            half = size >> 1
            return Lifted.at(modulo(lifted.low + constant(half), size) - constant(half))
        if not unsigned:
            return lifted
        if lifted.exact:
            return Lifted.at(modulo(lifted.low, size))
        found = self.interval(lifted.low)
        return lifted if found is not None and found[0] >= 0 else _domain(width, unsigned=True)

    def _fit(self, lifted: Lifted, width: int) -> Lifted:
        """A range of signed values of `width` bits, computed without wrapping: itself
        when it provably fits, else the type's whole range."""
        if width >= INDEX_WIDTH:
            return lifted
        half = 1 << (width - 1)
        low, high = self.interval(lifted.low), self.interval(lifted.high)
        if low is not None and high is not None and low[0] >= -half and high[1] < half:
            return lifted
        return _domain(width, unsigned=False)

    def _cast(self, cast: IntCast, entry: _Entry | None) -> _Entry | None:
        if entry is None or max(cast.bits_in, cast.bits_out) > INDEX_WIDTH:
            return None
        if cast.bits_out > cast.bits_in:
            read = self._read(entry, cast.bits_in, cast.unsigned)
            return None if read is None else _Entry(read)
        narrower = cast.bits_out < cast.bits_in
        if entry.lifted.exact:  # truncation keeps the bits
            wraps = cast.bits_out < INDEX_WIDTH and (entry.wrapped or narrower)
            return _Entry(entry.lifted, wrapped=wraps)
        return _Entry(self._fit(entry.lifted, cast.bits_out)) if narrower else entry

    def _arith(self, op: Operation, width: int) -> _Entry | None:
        left, right = (self._memo.get(v) for v in op.operands[:2])
        if left is None or right is None:
            return None
        if left.lifted.exact and right.lifted.exact:
            found = _combine(op, left.lifted.low, right.lifted.low)
            if found is None:
                return None
            if width < INDEX_WIDTH:
                return _Entry(Lifted.at(found), wrapped=True)
            exact = self._unwrapped(Lifted.at(found))
            return None if exact is None else _Entry(exact)
        a, b = (self._read(e, width, unsigned=False) for e in (left, right))
        if a is None or b is None:
            return None
        if isinstance(op, _ADDS):
            found = Lifted(a.low + b.low, a.high + b.high)
        elif isinstance(op, _SUBTRACTIONS):
            found = Lifted(a.low - b.high, a.high - b.low)
        else:
            factor, other = (a.number, b) if a.number is not None else (b.number, a)
            if factor is None:
                return None
            low, high = other.low.scaled(factor), other.high.scaled(factor)
            found = Lifted(low, high) if factor >= 0 else Lifted(high, low)
        if width < INDEX_WIDTH:
            return _Entry(self._fit(found, width))
        unwrapped = self._unwrapped(found)
        return None if unwrapped is None else _Entry(unwrapped)

    def _unwrapped(self, lifted: Lifted | None) -> Lifted | None:
        """`lifted`, a 64-bit result computed without wrapping, when that is the value the
        op gives; None where it may have wrapped."""
        if lifted is None:
            return None
        known = lifted.number
        if known is not None:  # a number wraps as the op wraps it
            return Lifted.at(constant((known + _HALF_64) % (2 * _HALF_64) - _HALF_64))
        for bound in (lifted.low, lifted.high):
            found = self.interval(bound)
            if found is None and not _representable(bound):
                return None
            if found is not None and not (-_HALF_64 <= found[0] and found[1] < _HALF_64):
                return None
        return lifted

    def _min_max(self, op: Operation, width: int) -> _Entry | None:
        greatest = isinstance(op, arith.MaxSIOp | arith.MaxUIOp | index.MaxSOp | index.MaxUOp)
        unsigned = isinstance(op, arith.MinUIOp | arith.MaxUIOp | index.MinUOp | index.MaxUOp)
        reads = [self._read(self._memo.get(v), width, unsigned) for v in op.operands[:2]]
        known = [r for r in reads if r is not None]
        if len(known) < 2:
            return None
        found = _bounds_of(known, greatest)
        if not unsigned or width >= INDEX_WIDTH:
            return _Entry(found)
        if found.exact:  # an unsigned number's bits
            return _Entry(found, wrapped=True)
        return _Entry(self._fit(found, width))

    def _select(self, op: Operation, width: int) -> _Entry | None:
        if op.operands[1] is op.operands[2]:
            return self._memo.get(op.operands[1])
        reads = [self._read(self._memo.get(v), width, False) for v in op.operands[1:3]]
        known = [r for r in reads if r is not None]
        if len(known) < 2:
            return None
        if known[0] == known[1]:
            return _Entry(known[0])
        lows = _extreme((r.low for r in known), greatest=False)
        highs = _extreme((r.high for r in known), greatest=True)
        return _Entry(Lifted(lows, highs))

    def _affine(self, op: Operation, width: int) -> _Entry | None:
        amap = getattr(op.properties.get("map"), "data", None)
        if not isinstance(amap, AffineMap):
            return None
        results = self.map(amap, op.operands)
        if not results:
            return None
        if isinstance(op, affine.ApplyOp):
            return _Entry(results[0]) if len(results) == 1 else None
        return _Entry(_bounds_of(results, greatest=isinstance(op, dhir_affine.MaxOp)))

    def _dim(self, op: Operation, width: int) -> _Entry | None:
        """A static extent that `memref.dim` measures at a constant dimension."""
        assert isinstance(op, memref.DimOp)
        kind, at = op.source.type, self._memo.get(op.index)
        dim = at.lifted.number if at is not None else None
        if not isinstance(kind, MemRefType) or dim is None or not 0 <= dim < kind.get_num_dims():
            return None  # a dimension out of range is undefined behaviour: unknown
        extent = kind.get_shape()[dim]
        return None if extent == DYNAMIC_INDEX else _Entry(Lifted.at(constant(extent)))

    def _simple_atom(self, atom: Atom) -> Affine:
        if isinstance(atom, Mod):
            arg = self.simplified(atom.arg)
            found = self.interval(arg)
            if found is not None and 0 <= found[0] and found[1] < atom.divisor:
                return arg
            return modulo(arg, atom.divisor)
        return Affine.of(atom)

    def _loop_range(self, variable: BlockArgument) -> Interval | None:
        op = variable.block.parent_op()
        index = variable.index
        if isinstance(op, scf.ForOp) and index == 0:
            bounds = [self.constant(v) for v in (op.lb, op.ub, op.step)]
        elif isinstance(op, scf.ParallelOp) and index < len(op.lowerBound):
            bounds = [self.constant(g[index]) for g in (op.lowerBound, op.upperBound, op.step)]
        elif isinstance(op, affine.ForOp) and index == 0:
            lows = self.map(op.lowerBoundMap.data, op.lowerBoundOperands)
            highs = self.map(op.upperBoundMap.data, op.upperBoundOperands)
            bounds = [
                _picked(lows, max),
                _picked(highs, min),
                op.step.value.data,
            ]
        elif isinstance(op, affine.ParallelOp) and index < len(op.steps):
            (low_map, low_args), (high_map, high_args), step = parallel_bounds(op, index)
            lows, highs = self.map(low_map, low_args), self.map(high_map, high_args)
            bounds = [_picked(lows, max), _picked(highs, min), step]
        elif isinstance(op, scf.WhileOp) and index == 0 and variable.block is op.after_region.block:
            # A counted while's counter takes the values of the scf.for native code makes
            # of it (dhir.analysis.counted_whiles), the range that loop's variable has.
            counted = counted_bounds(op)
            if counted is None:
                return None
            bounds = [self.constant(op.arguments[0]), self.constant(counted[0]), counted[1]]
        else:
            return None
        low, high, step = bounds
        if low is None or high is None or step is None or step <= 0:
            return None
        if high <= low:
            return low, low  # the body never runs: any range is true of it
        return low, low + step * ((high - 1 - low) // step)


_HALF_64 = 1 << (INDEX_WIDTH - 1)


def _representable(expr: Affine) -> bool:
    """Whether `expr`'s constant and coefficients are 64-bit numbers (one past them is
    the sum or product of numbers that wrapped)."""
    numbers = [expr.constant, *(k for _, k in expr.terms)]
    return all(-_HALF_64 <= n < _HALF_64 for n in numbers)


def _picked(results: list[Lifted] | None, pick: Callable[[Iterable[int]], int]) -> int | None:
    numbers = [r.number for r in results or []]
    known = [n for n in numbers if n is not None]
    return pick(known) if known and len(known) == len(numbers) else None


def _domain(width: int, unsigned: bool) -> Lifted:
    """Every number of `width` bits, signed or unsigned."""
    if unsigned:
        return Lifted(constant(0), constant((1 << width) - 1))
    half = 1 << (width - 1)
    return Lifted(constant(-half), constant(half - 1))


def _bounds_of(values: Sequence[Lifted], greatest: bool) -> Lifted:
    """The bounds of the least (or greatest) of `values`."""
    low = _extreme((v.low for v in values), greatest)
    high = _extreme((v.high for v in values), greatest)
    return Lifted(low, high)


def _combine(op: Operation, a: Affine, b: Affine) -> Affine | None:
    if isinstance(op, _ADDS):
        return a + b
    if isinstance(op, _SUBTRACTIONS):
        return a - b
    for factor, other in ((a.number, b), (b.number, a)):
        if factor is not None:
            return other.scaled(factor)
    return None  # a product of two variables is not affine


def apply(
    expr: AffineExpr, dims: Sequence[Lifted | None], symbols: Sequence[Lifted | None]
) -> Lifted | None:
    """An affine expression of `dims` and `symbols` (xDSL's form, as in a map); None
    (unknown) operands make only the results that use them unknown."""
    if isinstance(expr, AffineConstantExpr):
        return Lifted.at(constant(expr.value))
    if isinstance(expr, AffineDimExpr):
        return dims[expr.position] if expr.position < len(dims) else None
    if isinstance(expr, AffineSymExpr):
        return symbols[expr.position] if expr.position < len(symbols) else None
    if not isinstance(expr, AffineBinaryOpExpr):
        return None
    lhs, rhs = apply(expr.lhs, dims, symbols), apply(expr.rhs, dims, symbols)
    if lhs is None or rhs is None:
        return None
    kind = expr.kind
    if kind == AffineBinaryOpKind.Add:
        return Lifted(lhs.low + rhs.low, lhs.high + rhs.high)
    if kind == AffineBinaryOpKind.Mul:
        factor, other = (rhs.number, lhs) if rhs.number is not None else (lhs.number, rhs)
        if factor is None:
            return None
        low, high = other.low.scaled(factor), other.high.scaled(factor)
        return Lifted(low, high) if factor >= 0 else Lifted(high, low)
    divisor = rhs.number
    if divisor is None or divisor <= 0:
        return None
    if kind == AffineBinaryOpKind.Mod:
        if lhs.exact:
            return Lifted.at(modulo(lhs.low, divisor))
        return Lifted(constant(0), constant(divisor - 1))
    ceil = kind == AffineBinaryOpKind.CeilDiv
    return Lifted(divided(lhs.low, divisor, ceil), divided(lhs.high, divisor, ceil))


_Step = Callable[[Lifter, Operation, int], _Entry | None]
_ADDS = (arith.AddiOp, index.AddOp)
_SUBTRACTIONS = (arith.SubiOp, index.SubOp)

# How each op the lifter follows is lifted (integer casts: dhir.dialects.arith.int_cast).
_STEPS: dict[type[Operation], _Step] = {
    arith.AddiOp: Lifter._arith,
    arith.SubiOp: Lifter._arith,
    arith.MuliOp: Lifter._arith,
    arith.MinSIOp: Lifter._min_max,
    arith.MaxSIOp: Lifter._min_max,
    arith.MinUIOp: Lifter._min_max,
    arith.MaxUIOp: Lifter._min_max,
    arith.SelectOp: Lifter._select,
    affine.ApplyOp: Lifter._affine,
    memref.DimOp: Lifter._dim,
    affine.MinOp: Lifter._affine,
    dhir_affine.MaxOp: Lifter._affine,
    # The index dialect's ops that compute what these arith ops compute on index values.
    index.AddOp: Lifter._arith,
    index.SubOp: Lifter._arith,
    index.MulOp: Lifter._arith,
    index.MinSOp: Lifter._min_max,
    index.MaxSOp: Lifter._min_max,
    index.MinUOp: Lifter._min_max,
    index.MaxUOp: Lifter._min_max,
}

_STEP_KINDS = tuple(_STEPS)


def follows(op: Operation) -> bool:
    """Whether the lifter reads `op`'s result from its operands."""
    return int_cast(op) is not None or isinstance(op, _STEP_KINDS)


def _inputs(value: SSAValue) -> Sequence[SSAValue]:
    """The values lifting `value` needs first."""
    op = value.owner
    if not isinstance(op, Operation):
        return ()
    if isinstance(op, arith.SelectOp):
        return op.operands[1:3]
    return op.operands if follows(op) else ()


# Index divisions by a positive constant that `divided_by_constant` reads; the signed
# floor and ceiling divisions are exact whatever the dividend's sign.
SIGNED_ROUNDING = (arith.FloorDivSIOp, arith.CeilDivSIOp)
DIVISIONS = (*SIGNED_ROUNDING, arith.DivSIOp, arith.DivUIOp, arith.CeilDivUIOp)
REMAINDERS = (arith.RemUIOp, arith.RemSIOp)


def divided_by_constant(
    lifter: Lifter, op: Operation, not_negative: Callable[[Lifted], bool]
) -> Lifted | None:
    """What `op`, one of DIVISIONS or REMAINDERS on index values, is where its divisor is
    a positive constant: the others than SIGNED_ROUNDING only where `not_negative` says
    the dividend is (truncation, an unsigned read of it); a remainder only of an exact
    dividend. None otherwise."""
    if scalar_int_width(op.results[0].type) != INDEX_WIDTH:
        return None
    divisor = lifter.constant(op.operands[1])
    dividend = lifter.value(op.operands[0])
    if divisor is None or divisor <= 0 or dividend is None:
        return None
    if not isinstance(op, SIGNED_ROUNDING) and not not_negative(dividend):
        return None
    if isinstance(op, REMAINDERS):
        return Lifted.at(modulo(dividend.low, divisor)) if dividend.exact else None
    ceil = isinstance(op, arith.CeilDivSIOp | arith.CeilDivUIOp)
    return Lifted(divided(dividend.low, divisor, ceil), divided(dividend.high, divisor, ceil))
