"""Which of its listed memrefs a task reads and writes, found from its body.

What each op reads and writes is dhir.dialects.access's answer (xDSL's memory-effect
interface is silent for affine, linalg, gpu and func.call). Every value that may point
into a listed memref is followed: views (subview, cast, ...), the base buffer of
`extract_strided_metadata`, addresses (`extract_aligned_pointer_as_index`) and what pure
arithmetic makes of them. An op without facts that takes such a value (a call, an
unknown op) counts as reading and writing every memref it can reach, and what it returns
may point into them too, so the answer is never smaller than the truth.
"""

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from dhir.analysis.shapes import at_positions, by_position
from dhir.dialects.access import Facts, Kind, facts, kind
from dhir.dialects.dhir import TaskOp


@dataclass(frozen=True)
class Effects:
    """Task operands (the schedule's memrefs) read and written by a task."""

    reads: frozenset[SSAValue]
    writes: frozenset[SSAValue]

    def touches(self) -> frozenset[SSAValue]:
        return self.reads | self.writes


def derived_results(op: Operation) -> tuple[SSAValue, ...]:
    """The results of `op` that may point into memory its operands point into: those
    its facts name (views, pure arithmetic, the base buffer of
    `extract_strided_metadata`; none for loads, stores and shape queries), every result
    of an op without facts."""
    found = facts(op)
    return tuple(op.results) if found is None else found.derived


def task_effects(task: TaskOp) -> Effects:
    reads, writes = memory_effects(task.body.block.ops, {m: frozenset([m]) for m in task.memrefs})
    return Effects(frozenset(reads), frozenset(writes))


def shared_effects(tasks: Sequence[TaskOp], shapes: Sequence[int]) -> list[Effects]:
    """Each task's effects, found once per shape (`shapes`: each task's shape number,
    see dhir.analysis.shapes)."""
    found: dict[int, tuple[frozenset[int], frozenset[int]]] = {}
    out: list[Effects] = []
    for task, shape in zip(tasks, shapes, strict=True):
        memrefs = task.memrefs
        positions = found.get(shape)
        if positions is None:
            effects = task_effects(task)
            reads, writes = effects.reads, effects.writes
            found[shape] = (by_position(reads, memrefs), by_position(writes, memrefs))
            out.append(effects)
            continue
        reads, writes = (at_positions(p, memrefs) for p in positions)
        out.append(Effects(reads, writes))
    return out


def memory_effects(
    ops: Iterable[Operation], roots: dict[SSAValue, frozenset[SSAValue]]
) -> tuple[set[SSAValue], set[SSAValue]]:
    """The roots that `ops` (and the ops nested in them) read and write; `roots` maps
    each value known to point into memory to the roots it may point into, and grows
    with every value derived from them."""
    # Called for every task by dhir-place and again by dhir-lower-to-mpi: kept lean.
    reads: set[SSAValue] = set()
    writes: set[SSAValue] = set()
    for op in _walk(ops):
        what = kind(op)
        if what is None or what is Kind.PURE:
            reached = _reached(op.operands, roots)
            if not reached:
                continue
            if what is None:
                # Unknown ops read and write all they can reach, and may hand it out again.
                reads |= reached
                writes |= reached
            for result in op.results:
                roots[result] = reached
            continue
        found = facts(op)
        assert found is not None
        for access in found.accesses:
            if access.read:
                reads.update(_reached([access.memref], roots))
            if access.write:
                writes.update(_reached([access.memref], roots))
        if found.kind is not Kind.VIEW:
            # A view's other operands are sizes and offsets, and what it makes is its
            # result (a pointer, an address): followed below.
            _escape(op, found, roots, reads, writes)
        if found.derived:
            reached = _reached(op.operands, roots)
            if reached:
                for result in found.derived:
                    roots[result] = reached
    return reads, writes


def _reached(
    values: Iterable[SSAValue], roots: dict[SSAValue, frozenset[SSAValue]]
) -> frozenset[SSAValue]:
    reached: frozenset[SSAValue] = frozenset()
    for value in values:
        found = roots.get(value)
        if found:
            reached |= found
    return reached


def _escape(
    op: Operation,
    found: Facts,
    roots: dict[SSAValue, frozenset[SSAValue]],
    reads: set[SSAValue],
    writes: set[SSAValue],
) -> None:
    """A pointer in an operand that is not what the op accesses (an address stored as
    data, a memref stored into a memref of memrefs) may be used anywhere later: count
    all it reaches as read and written. The facts account for every memref an op
    accesses, and a shape query reads no data."""
    accessed = {access.memref for access in found.accesses}
    shape = found.kind is Kind.SHAPE
    rest = _reached(
        (
            v
            for v in op.operands
            if v not in accessed and not (shape and isinstance(v.type, MemRefType))
        ),
        roots,
    )
    if rest:
        reads |= rest
        writes |= rest


def _walk(ops: Iterable[Operation]) -> Iterator[Operation]:
    """Every op in `ops` and nested in them, in pre-order (xDSL's walk, without its
    layers of generators)."""
    for op in ops:
        yield op
        for region in op.regions:
            for block in region.blocks:
                yield from _walk(block.ops)
