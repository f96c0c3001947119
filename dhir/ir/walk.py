"""Finding ops of given kinds in a module, the cheap way.

`Operation.walk` nests one generator per level of regions, and `isinstance` on IRDL
classes is slow; passes that look for a few kinds of ops in a whole lowered module (tens
of thousands of ops) spend most of their time there. `find_ops` walks with one explicit
stack and asks `issubclass` once per class, which finds the same ops, in the same order,
at less than half the cost (docs/performance.md).
"""

from collections.abc import Iterator, Sequence
from typing import TypeVar

from xdsl.ir import Operation

_Op = TypeVar("_Op", bound=Operation)


def find_ops(root: Operation, kinds: type[_Op] | tuple[type[_Op], ...]) -> list[_Op]:
    """The ops nested in `root`, `root` included, that are instances of `kinds`, in the
    pre-order of `root.walk()`."""
    return list(_found(root, kinds))


def find_among(
    root: Operation,
    kinds: type[_Op] | tuple[type[_Op], ...],
    ops: Sequence[Operation] | None = None,
) -> list[_Op]:
    """`find_ops(root, kinds)`; from `ops`, every op of `root` in that order
    (`find_ops(root, Operation)`), when the caller has walked `root` already and changed
    nothing since: one walk for several checks of a module (dhir.runner.check_runnable)."""
    if ops is None:
        return find_ops(root, kinds)
    wanted = _wanted(kinds)
    out: list[_Op] = []
    for op in ops:
        kind = type(op)
        hit = wanted.get(kind)
        if hit is None:
            hit = wanted[kind] = issubclass(kind, kinds)
        if hit:
            out.append(op)  # pyright: ignore[reportArgumentType]
    return out


def find_outside(
    root: Operation,
    kinds: type[_Op] | tuple[type[_Op], ...],
    outside: tuple[type[Operation], ...],
) -> list[_Op]:
    """`find_ops(root, kinds)` but for the ops nested in an op of `outside` (`root` or
    below it; `enclosing(op, outside)` is None for each op found), whose regions are not
    walked: one walk, not a walk up from each op found (dhir-bounds-checks' accesses
    outside device code)."""
    return list(_found(root, kinds, outside))


def holds_op(root: Operation, kinds: type[Operation] | tuple[type[Operation], ...]) -> bool:
    """Whether `root`, or an op nested in it, is an instance of `kinds`: `find_ops`, but
    stopping at the first found."""
    return next(_found(root, kinds), None) is not None


# Per kinds asked for, whether each op class is one of them: kept across walks, since
# many are of a few ops each (a task's body) and `issubclass` on IRDL classes is slow.
_WANTED: dict[type[Operation] | tuple[type[Operation], ...], dict[type[Operation], bool]] = {}


def _found(
    root: Operation,
    kinds: type[_Op] | tuple[type[_Op], ...],
    outside: tuple[type[Operation], ...] = (),
) -> Iterator[_Op]:
    """`find_ops`'s ops, one at a time: each op's class is asked once, not each op; the
    regions of the ops of `outside` (`root` among them) are not walked.

    The stack holds the first op of each run of siblings still to walk: an op without
    regions (most of them) is never pushed, and the links between ops and blocks are
    read as xDSL 0.74 stores them (`_next_op`, ...), not through its properties, which
    took 40% of a walk (tests/unit/test_walk.py checks the order against `walk()`)."""
    wanted, skipped = _wanted(kinds), _wanted(outside)
    pending: list[Operation] = []
    kind = type(root)
    hit = wanted.get(kind)
    if hit is None:
        hit = wanted[kind] = issubclass(kind, kinds)
    if hit:
        yield root  # pyright: ignore[reportReturnType]
    if not (outside and issubclass(kind, outside)):
        _push_blocks(root, pending)
    while pending:
        op = pending.pop()
        while op is not None:
            kind = type(op)
            hit = wanted.get(kind)
            if hit is None:
                hit = wanted[kind] = issubclass(kind, kinds)
            if hit:
                yield op  # pyright: ignore[reportReturnType]
            if op.regions:
                # Its blocks come first, then the ops after it.
                if op._next_op is not None:  # pyright: ignore[reportPrivateUsage]
                    pending.append(op._next_op)  # pyright: ignore[reportPrivateUsage]
                skip = False
                if outside:
                    skip = skipped.get(kind)
                    if skip is None:
                        skip = skipped[kind] = issubclass(kind, outside)
                if not skip:
                    _push_blocks(op, pending)
                break
            op = op._next_op  # pyright: ignore[reportPrivateUsage]


def op_kinds(root: Operation) -> set[type[Operation]]:
    """The classes of the ops nested in `root`, `root` included: one walk, which tells
    the passes that look for a few kinds whether they would find any."""
    kinds: set[type[Operation]] = {type(root)}
    pending: list[Operation] = []
    _push_blocks(root, pending)
    while pending:
        op = pending.pop()
        while op is not None:
            kinds.add(type(op))
            if op.regions:
                if op._next_op is not None:  # pyright: ignore[reportPrivateUsage]
                    pending.append(op._next_op)  # pyright: ignore[reportPrivateUsage]
                _push_blocks(op, pending)
                break
            op = op._next_op  # pyright: ignore[reportPrivateUsage]
    return kinds


def any_of(present: set[type[Operation]], kinds: tuple[type[Operation], ...]) -> bool:
    """Whether a class of `present` (`op_kinds`) is one of `kinds` or derives from one."""
    wanted = _wanted(kinds)
    for kind in present:
        hit = wanted.get(kind)
        if hit is None:
            hit = wanted[kind] = issubclass(kind, kinds)
        if hit:
            return True
    return False


def _wanted(
    kinds: type[Operation] | tuple[type[Operation], ...],
) -> dict[type[Operation], bool]:
    wanted = _WANTED.get(kinds)
    if wanted is None:
        wanted = _WANTED[kinds] = {}
    return wanted


def _push_blocks(op: Operation, pending: list[Operation]) -> None:
    """Push the first op of each block of `op`, last to first, so that they come off
    the stack in order."""
    for region in reversed(op.regions):
        block = region._last_block  # pyright: ignore[reportPrivateUsage]
        while block is not None:
            if block._first_op is not None:  # pyright: ignore[reportPrivateUsage]
                pending.append(block._first_op)  # pyright: ignore[reportPrivateUsage]
            block = block._prev_block  # pyright: ignore[reportPrivateUsage]


def enclosing(op: Operation, kinds: type[_Op] | tuple[type[_Op], ...]) -> _Op | None:
    """The nearest op around `op` (not `op` itself) that is an instance of `kinds`."""
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, kinds):
            return parent
        parent = parent.parent_op()
    return None
