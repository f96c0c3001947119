"""Which elements of the program's own buffers something has written: MLIR leaves an
element of a `memref.alloc`/`alloca`, a GPU buffer or an uninitialized `memref.global`
undefined until then, and native code reads whatever the memory held, so the
interpreter refuses such a read at the op that makes it.

A buffer the program allocates is an `Allocation` that carries one flag per element
(`written`, flat, in the buffer's row-major order) and the op that made it. Every view of
it (subview, cast, reinterpret_cast, view, reshapes, transposes) is a NumPy view, whose
chain of `base`s leads back to that array: the view's addresses, relative to it, pick its
flags. Arrays the program did not allocate (its arguments, read from files or passed by
the caller) carry none: all their elements count as written, but for where an entry on
tensors writes its results (`result_buffer`): nothing has written those at the start,
and the entry must write all of them (`check_result`).

Readers check (`check_read`), writers mark (`mark`); copies carry the flags across
(`copy_flags`), so that copying a buffer part of which nothing wrote stays legal until
something reads the copied elements.

Vector loads and transfers are copies too until the vector is used: one that reads an
element nothing wrote makes a `Partial` vector, whose lanes carry the flags (lanes
nothing wrote hold zeros). Stores and transfers put its flags back into memory, the ops
that only move lanes (shape casts, transposes, slices, shuffles...) and control flow
move them along, and any other op given it (arith, a reduction, a mask, a condition, a
scalar extracted from a lane nothing wrote) is refused (`check_uses`, which the
interpreter's listener calls before every op once a run has made a Partial vector).
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation

from dhir.backends.interp.core import Trap, assign, fail
from dhir.dialects import affine, cf, func, memref, scf, vector
from dhir.ir.diagnostics import loc_of


class Allocation(np.ndarray):
    """A buffer the program allocated: a view of a zero-filled array (the values of
    elements nothing wrote, which only copies may carry) that holds the flags."""

    written: np.ndarray | None = None  # one bool per element; None on copies of it
    made_by: Operation | None = None
    # On a view of it: the allocation and where the view starts in it, in bytes, found
    # at the first load or store through the view (a view never moves).
    place: "tuple[Allocation | None, int] | None" = None
    # Where each element nothing wrote that a copy put here came from (0 where it is this
    # buffer's own, else one more than a place in `origins`): the allocation, with its
    # flat index in `came_index`, or the words naming a vector's loads. Made at the
    # first such copy: nothing is kept, or paid, where no copy carries one.
    came_from: np.ndarray | None = None  # int32
    came_index: np.ndarray | None = None
    origins: "list[Allocation | str]"
    # What messages call it where it is not a buffer the program allocated: a result.
    named: str | None = None


def allocation(op: Operation, data: np.ndarray, made_by: Operation | None = None) -> np.ndarray:
    """`data` (a new array, zero-filled or a global's initial value) as a buffer nothing
    has written yet, made by `made_by` (else `op`)."""
    buffer = data.view(Allocation)
    buffer.written = np.zeros(data.size, np.bool_)
    buffer.made_by = made_by or op
    return buffer


def result_buffer(function: Operation, array: np.ndarray, name: str) -> np.ndarray:
    """`array` (where the entry `function` writes its result `name`, an argument once
    bufferized) as a buffer nothing has written yet: MLIR leaves a result's elements the
    entry does not write undefined."""
    buffer = array.view(Allocation)
    buffer.written = np.zeros(array.size, np.bool_)
    buffer.made_by, buffer.named = function, name
    return buffer


def check_result(op: Operation, buffer: np.ndarray) -> None:
    """Refuse, at `op` (where the entry ends), a result the entry has not written all of
    (`buffer`, a result_buffer)."""
    holder = _holder(buffer)
    assert holder is not None and holder.written is not None
    if bool(holder.written.all()):
        return
    element = int(np.argmin(holder.written))
    raise Trap(
        op,
        f"the entry ends with {_element(holder, element)} unwritten"
        f"{_came_from(holder, element)} (MLIR leaves it undefined; native code gives "
        "whatever the memory held); write every element of each result, e.g. fill the "
        "`tensor.empty` a result starts from (`linalg.fill`) before writing part of it",
    )


def is_allocation(array: np.ndarray) -> bool:
    """Whether `array` is a buffer the program allocated (not a view of one): MLIR's base
    buffer of its views (dhir.backends.interp.memref.base_array)."""
    return isinstance(array, Allocation) and array.written is not None


def _holder(array: np.ndarray) -> Allocation | None:
    """The allocation `array` is a view of, if any."""
    current: np.ndarray | None = array
    while current is not None:
        if isinstance(current, Allocation) and current.written is not None:
            return current
        current = parent_array(current)
    return None


def parent_array(array: np.ndarray) -> np.ndarray | None:
    """The array `array` is a NumPy view of, if any."""
    parent = array.base
    if parent is not None and not isinstance(parent, np.ndarray):
        # NumPy's as_strided (a reinterpret_cast) puts a DummyArray holding its source
        # between the view and the source.
        parent = getattr(parent, "base", None)
    return parent if isinstance(parent, np.ndarray) else None


def _start(holder: Allocation, array: np.ndarray) -> int:
    """Where `array`'s first element is in `holder`, in bytes."""
    return array.__array_interface__["data"][0] - holder.__array_interface__["data"][0]


def _flags(array: np.ndarray) -> tuple[Allocation, np.ndarray, bool] | None:
    """The flags of `array`'s elements, as a view of its allocation's (None where it has
    none): of `array`'s shape, or, where each element spans several of the allocation's
    (a memref.view of bytes), with one more dimension over those (`spans` is then True)."""
    holder = _holder(array)
    if holder is None:
        return None
    unit, start = holder.itemsize, _start(holder, array)
    if start % unit or array.itemsize % unit or any(s % unit for s in array.strides):
        return None  # not in whole elements: nothing the interpreter makes
    span = array.itemsize // unit
    shape = (*array.shape, span) if span > 1 else array.shape
    if array.size == 0:
        return holder, np.zeros(shape, np.bool_), span > 1
    steps = [s // unit for s in array.strides] + ([1] if span > 1 else [])
    assert holder.written is not None
    flags = np.lib.stride_tricks.as_strided(holder.written[start // unit :], shape, steps)
    return holder, flags, span > 1


def _place(array: np.ndarray) -> tuple[Allocation | None, int]:
    """`array`'s allocation (None if none) and where `array` starts in it, in bytes."""
    if isinstance(array, Allocation):
        if array.written is not None:
            return array, 0
        # A view NumPy made of one keeps the answer (the allocation itself must not:
        # a cycle would keep it alive until the garbage collector runs).
        if array.place is None:
            holder = _holder(array)
            array.place = (holder, _start(holder, array) if holder is not None else 0)
        return array.place
    if array.base is None:  # an argument
        return None, 0
    holder = _holder(array)
    return holder, _start(holder, array) if holder is not None else 0


def _one(array: np.ndarray, index: Sequence[int]) -> tuple[Allocation, int, int] | None:
    """The flags of one element of `array` (`index` in bounds): its allocation and the
    range of them, without the views `_flags` makes (loads and stores run often)."""
    holder, start = _place(array)
    if holder is None:
        return None
    start += sum(i * s for i, s in zip(index, array.strides))
    unit = holder.itemsize
    return holder, start // unit, (start + array.itemsize - 1) // unit + 1


def written(array: np.ndarray) -> np.ndarray | None:
    """Which of `array`'s elements are written (a new bool array of its shape), or None
    where all of them count as written."""
    found = _flags(array)
    if found is None:
        return None
    _, flags, spans = found
    return np.asarray(flags.all(axis=-1)) if spans else np.array(flags)


def check_read(op: Operation, array: np.ndarray) -> None:
    """Refuse `op` reading the elements of `array` where nothing wrote one of them."""
    found = _flags(array)
    if found is None:
        return
    holder, flags, _ = found
    if bool(flags.all()):
        return
    # The first in row-major order, as a flag of the allocation: by its address.
    first = np.unravel_index(int(np.argmin(flags)), flags.shape)
    address = flags.__array_interface__["data"][0]
    address += sum(i * s for i, s in zip(first, flags.strides))
    assert holder.written is not None
    _refuse(op, holder, address - holder.written.__array_interface__["data"][0])


def check_read_one(op: Operation, array: np.ndarray, index: Sequence[int]) -> None:
    """check_read of the element at `index` (in bounds)."""
    found = _one(array, index)
    if found is None:
        return
    holder, first, stop = found
    assert holder.written is not None
    for element in range(first, stop):
        if not holder.written[element]:
            _refuse(op, holder, element)


def is_written_one(array: np.ndarray, index: Sequence[int]) -> bool:
    found = _one(array, index)
    if found is None:
        return True
    holder, first, stop = found
    assert holder.written is not None
    return bool(holder.written[first:stop].all())


def mark(array: np.ndarray, values: Any = True) -> None:
    """Mark `array`'s elements written, or, with `values` (bools of its shape), as
    `values` says: what a copy carries."""
    found = _flags(array)
    if found is None:
        return
    _, flags, spans = found
    if spans:
        values = np.asarray(values)[..., np.newaxis]
    assign(flags, values)


def mark_one(array: np.ndarray, index: Sequence[int], value: bool = True) -> None:
    """mark of the element at `index` (in bounds)."""
    found = _one(array, index)
    if found is not None:
        holder, first, stop = found
        assert holder.written is not None
        holder.written[first:stop] = value


def copy_flags(op: Operation, source: np.ndarray, target: np.ndarray) -> None:
    """A copy of `source` into `target` (of one shape): the target's elements are as
    written as the source's were. Where the target keeps no flags (an argument: what the
    program hands back), an element nothing wrote is refused as read."""
    values = written(source)
    if _flags(target) is None:
        if values is not None:
            check_read(op, source)
        return
    mark(target, True if values is None else values)
    if values is not None and not bool(values.all()):
        _carry_origins(source, target, ~values)


def _flat(holder: Allocation, array: np.ndarray, where: tuple[np.ndarray, ...]) -> np.ndarray:
    """The flags (the first of those each spans) of `array`'s elements at `where` (as
    np.nonzero gives them)."""
    unit = holder.itemsize
    flat = np.full(len(where[0]), _start(holder, array) // unit, np.int64)
    for index, stride in zip(where, array.strides):
        flat += index * (stride // unit)
    return flat


def _origins(holder: Allocation) -> tuple[np.ndarray, np.ndarray]:
    """`holder`'s came_from and came_index, made at the first copy that needs them."""
    if holder.came_from is None or holder.came_index is None:
        size = holder.written.size if holder.written is not None else 0
        holder.came_from, holder.came_index = np.zeros(size, np.int32), np.zeros(size, np.int64)
        holder.origins = []
    return holder.came_from, holder.came_index


def _code(holder: Allocation, origin: "Allocation | str") -> int:
    """The number `holder`'s came_from gives `origin` (one more than its place in
    `holder.origins`)."""
    for k, known in enumerate(holder.origins):
        if known is origin:
            return k + 1
    holder.origins.append(origin)
    return len(holder.origins)


def _carry_origins(source: np.ndarray, target: np.ndarray, copied: np.ndarray) -> None:
    """Record where the elements nothing wrote that `source` gives `target` (where
    `copied`) came from: `source`'s own allocation, or where its copies came from."""
    holder, into = _holder(source), _holder(target)
    assert holder is not None and into is not None
    came_from, came_index = _origins(into)
    where = np.nonzero(np.atleast_1d(copied))
    index = _flat(holder, source, where)
    codes = np.full(index.size, _code(into, holder), np.int32)
    if holder.came_from is not None and holder.came_index is not None:
        before = holder.came_from[index]
        for code in np.unique(before[before != 0]):
            codes[before == code] = _code(into, holder.origins[int(code) - 1])
        index = np.where(before != 0, holder.came_index[index], index)
    into_index = _flat(into, target, where)
    came_from[into_index], came_index[into_index] = codes, index


def copied_from(target: np.ndarray, where: Sequence[int], origin: str) -> None:
    """Record that the element at `where` of `target`, which nothing wrote, is a copy
    of a lane `origin` names (a vector's loads)."""
    found = _one(target, where)
    if found is not None:
        holder, first, stop = found
        came_from, _ = _origins(holder)
        came_from[first:stop] = _code(holder, origin)


class Partial(np.ndarray):
    """A vector (read-only) some of whose lanes were loaded from elements nothing wrote:
    `lanes` says which lanes were written, `sources` where the others came from."""

    lanes: np.ndarray
    sources: tuple[str, ...] = ()


class _Made:
    """Whether this process has made a Partial vector: until then no op can be given
    one, and the listener checks nothing (the check costs on every op)."""

    partial = False


MADE = _Made()


def partial(value: np.ndarray, lanes: np.ndarray, sources: tuple[str, ...]) -> np.ndarray:
    """`value` (a read-only vector) with `lanes` (bools of its shape) saying which lanes
    were written: itself where all were, else a Partial."""
    if bool(np.all(lanes)):  # `value` may be a copy of a Partial one (vector.insert's)
        return value.view(np.ndarray) if type(value) is Partial else value
    result = value.view(Partial)
    result.lanes = np.asarray(lanes, np.bool_)
    result.sources = sources
    MADE.partial = True
    return result


def lanes_of(value: Any) -> np.ndarray | None:
    """Which lanes of `value` were written, or None where all were."""
    return value.lanes if type(value) is Partial else None


def source(op: Operation, array: np.ndarray, index: Sequence[int]) -> str:
    """Where the element at `index` of `array` (nothing wrote it) is, as `op` read it."""
    found = _one(array, index)
    assert found is not None
    holder, first, _ = found
    where = loc_of(op)
    at = f" at {where}" if where is not None else ""
    return f"'{op.name}'{at} read {_element(holder, first).rstrip(',')}"


def read_lanes(op: Operation, view: np.ndarray, value: np.ndarray) -> np.ndarray:
    """`value`, the vector `op` loaded from `view` (of one shape), as partial as the
    elements it copies: a vector load reads nothing until its vector is used."""
    found = _flags(view)
    if found is None:
        return value
    _, flags, spans = found
    if bool(flags.all()):
        return value
    lanes = np.asarray(flags.all(axis=-1)) if spans else np.array(flags)
    first = [int(i) for i in np.unravel_index(int(np.argmin(lanes)), lanes.shape)]
    return partial(value, lanes, (source(op, view, first),))


def write_lanes(op: Operation, view: np.ndarray, value: Any) -> None:
    """Mark `view`, into which `op` stored the vector `value`, as written as its lanes
    were. Where `view` keeps no flags (an argument: what the program hands back), a lane
    nothing wrote is refused as used."""
    lanes = lanes_of(value)
    if lanes is None:
        mark(view)
    elif _flags(view) is None:
        refuse_use(op, value)
    else:
        mark(view, lanes)
        for lane in np.ndindex(*lanes.shape):
            if not lanes[lane]:
                copied_from(view, lane, "; ".join(value.sources))


def write_lane(
    op: Operation, array: np.ndarray, index: Sequence[int], value: Any, lane: Any
) -> None:
    """write_lanes of lane `lane` of `value` into the element at `index` of `array`."""
    lanes = lanes_of(value)
    if lanes is None or lanes[lane]:
        mark_one(array, index)
    elif _one(array, index) is None:
        refuse_use(op, value, lane)
    else:
        mark_one(array, index, False)
        copied_from(array, index, "; ".join(value.sources))


def check_uses(op: Operation, args: Sequence[Any]) -> None:
    """Refuse `op` being given a Partial vector where it does more than move its lanes."""
    carried = _CARRIED.get(op.name)
    for k, arg in enumerate(args):
        if type(arg) is Partial and not (carried is not None and carried(k, len(args))):
            refuse_use(op, arg)


def _all(k: int, n: int) -> bool:
    return True


# The operands of each op that may be Partial vectors: the ops that store them (their
# stored value), move their lanes (added by carry_lanes; vector.bitcast reinterprets
# bits: not one of them), or pass them on (control flow). The value of arith.select is
# left out: picking undefined lanes is a use in LLVM only sometimes, and refusing is the
# clear rule.
_CARRIED: dict[str, Callable[[int, int], bool]] = {
    **dict.fromkeys(
        [op.name for op in (vector.StoreOp, affine.VectorStoreOp, vector.TransferWriteOp)],
        lambda k, n: k == 0,
    ),
    **dict.fromkeys(
        [op.name for op in (vector.MaskedStoreOp, vector.CompressStoreOp, vector.ScatterOp)],
        lambda k, n: k == n - 1,
    ),
    **dict.fromkeys(
        [
            op.name
            for op in (
                scf.YieldOp,
                affine.YieldOp,
                func.ReturnOp,
                func.CallOp,
                cf.BranchOp,
                scf.ForOp,
                affine.ForOp,
                scf.WhileOp,
                scf.ParallelOp,
                scf.ReduceOp,
            )
        ],
        _all,
    ),
    **dict.fromkeys([scf.ConditionOp.name, cf.ConditionalBranchOp.name], lambda k, n: k > 0),
}


def carry_lanes(op_type: type[Operation]) -> None:
    """Let `op_type`, whose implementation moves lanes and their flags along
    (dhir.backends.interp.vector), be given Partial vectors in any operand."""
    _CARRIED[op_type.name] = _all


def refuse_use(op: Operation, value: "Partial", lane: Any = None) -> None:
    """Refuse `op` using a lane (`lane`, else the first) nothing wrote of `value`."""
    if lane is None:
        lane = np.unravel_index(int(np.argmin(value.lanes)), value.lanes.shape)
    index = [int(i) for i in np.atleast_1d(lane)] if value.ndim else []
    fail(
        op,
        f"uses lane {index} of a vector loaded from elements nothing wrote "
        f"({'; '.join(value.sources)}; MLIR leaves them undefined, native code reads "
        "whatever the memory held); write every element the program uses",
    )


def _element(holder: Allocation, element: int) -> str:
    """'element [i, j] of the buffer allocated at ...' of flag `element` of `holder`."""
    index = [int(i) for i in np.unravel_index(element, holder.shape)] if holder.ndim else []
    made_by = holder.made_by
    where = loc_of(made_by) if made_by is not None else None
    at = f"at {where}" if where is not None else f"by '{made_by.name if made_by else '?'}'"
    if holder.named is not None:
        buffer = holder.named
    elif isinstance(made_by, memref.GlobalOp):
        without = (
            " without initial value"
            if made_by.initial_value is None or isinstance(made_by.initial_value, UnitAttr)
            else ""
        )
        buffer = f"@{made_by.sym_name.data}, the memref.global{without} declared {at},"
    else:
        buffer = f"the buffer allocated {at}"
    return f"element {index} of {buffer}"


def copy_unwritten_one(
    op: Operation, source: np.ndarray, index: Sequence[int], target: np.ndarray,
    where: Sequence[int],
) -> None:  # fmt: skip
    """A copy of the element at `index` of `source`, which nothing wrote, into the one at
    `where` of `target`: refused as a read where the target keeps no flags (an argument,
    as in copy_flags), else recorded as coming from the source; the caller marks the
    copy unwritten."""
    if _one(target, where) is None:
        check_read_one(op, source, index)
    else:  # 1x...x1 views of the two elements
        element = source[(*(slice(i, i + 1) for i in index), ...)]
        copy = target[(*(slice(i, i + 1) for i in where), ...)]
        _carry_origins(element.reshape(copy.shape), copy, np.ones(copy.shape, np.bool_))


def _came_from(holder: Allocation, element: int) -> str:
    """Where the element nothing wrote at flag `element` of `holder` was copied from."""
    if holder.came_from is None or holder.came_index is None:
        return ""
    code = int(holder.came_from[element])
    origin = holder.origins[code - 1] if code else None
    if isinstance(origin, Allocation):
        original = _element(origin, int(holder.came_index[element])).rstrip(",")
        return f": it is a copy of {original}, which nothing wrote either"
    if isinstance(origin, str):
        return f": it is a copy of a lane of a vector loaded from elements nothing wrote ({origin})"
    return ""


def _refuse(op: Operation, holder: Allocation, element: int) -> None:
    fail(
        op,
        f"reads {_element(holder, element)} before anything wrote it"
        f"{_came_from(holder, element)} (MLIR leaves it "
        "undefined; native code reads whatever the memory held); write every element "
        "the program reads",
    )
