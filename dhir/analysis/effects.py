"""Which of its listed memrefs a task reads and writes, found from its body.

xDSL's memory-effect interface is silent for affine, linalg, gpu and func.call, so
dhir keeps its own table. Every value that may point into a listed memref is followed:
views (subview, cast, ...), the base buffer of `extract_strided_metadata`, addresses
(`extract_aligned_pointer_as_index`) and what arith makes of them. Anything not in the
table that takes such a value (a call, an unknown op) counts as reading and writing
every memref it can reach, and what it returns may point into them too, so the answer
is never smaller than the truth.
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Operation, SSAValue

from dhir.dialects.dhir import TaskOp


@dataclass(frozen=True)
class Effects:
    """Task operands (the schedule's memrefs) read and written by a task."""

    reads: frozenset[SSAValue]
    writes: frozenset[SSAValue]

    def touches(self) -> frozenset[SSAValue]:
        return self.reads | self.writes


# op name -> (operands read, operands written), by operand position.
_Access = Callable[[Operation], tuple[Iterable[SSAValue], Iterable[SSAValue]]]

_ACCESSES: dict[str, _Access] = {
    "memref.load": lambda op: ([op.operands[0]], []),
    "affine.load": lambda op: ([op.operands[0]], []),
    "vector.load": lambda op: ([op.operands[0]], []),
    "vector.transfer_read": lambda op: ([op.operands[0]], []),
    "memref.store": lambda op: ([], [op.operands[1]]),
    "affine.store": lambda op: ([], [op.operands[1]]),
    "vector.store": lambda op: ([], [op.operands[1]]),
    "vector.transfer_write": lambda op: ([], [op.operands[1]]),
    "memref.copy": lambda op: ([op.operands[0]], [op.operands[1]]),
    "memref.generic_atomic_rmw": lambda op: ([op.operands[0]], [op.operands[0]]),
    # operands: async dependencies..., dst, src
    "gpu.memcpy": lambda op: ([op.operands[-1]], [op.operands[-2]]),
    # Shape queries read no data.
    "memref.dim": lambda op: ([], []),
    "memref.rank": lambda op: ([], []),
    # Reads no data, but its first result is the base buffer: see derived_results.
    "memref.extract_strided_metadata": lambda op: ([], []),
}

# Ops whose results point into the memory of their operands, without touching it.
VIEW_OPS = frozenset(
    {
        "memref.subview",
        "memref.cast",
        "memref.reinterpret_cast",
        "memref.collapse_shape",
        "memref.expand_shape",
        "memref.transpose",
        "memref.view",
        "memref.memory_space_cast",
        "memref.assume_alignment",
        "memref.extract_aligned_pointer_as_index",
    }
)

# Dialects of pure computations: what they make of a pointer (an address cast to an
# integer, an arith.select of two memrefs) still points there, but they touch nothing.
_PURE_DIALECTS = frozenset({"arith", "index"})


def derived_results(op: Operation) -> tuple[SSAValue, ...]:
    """The results of `op` that may point into memory its operands point into: none
    for the loads and shape queries of the table, the base buffer only for
    `extract_strided_metadata`, every result for anything else."""
    if op.name == "memref.extract_strided_metadata":
        return tuple(op.results[:1])
    if op.name in _ACCESSES:
        return ()
    return tuple(op.results)


def is_known(op: Operation) -> bool:
    """Whether this module knows all `op` does with the memory its operands point into
    (it neither stores a pointer away nor hands it to code it cannot see)."""
    return (
        op.name in _ACCESSES
        or op.name in VIEW_OPS
        or isinstance(op, LinalgStructuredOperation)
        or op.dialect_name() in _PURE_DIALECTS
    )


def task_effects(task: TaskOp) -> Effects:
    reads, writes = memory_effects(task.body.block.ops, {m: frozenset([m]) for m in task.memrefs})
    return Effects(frozenset(reads), frozenset(writes))


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
        name = op.name
        access = _ACCESSES.get(name)
        if access is not None:
            read, written = access(op)
            reads.update(_reached(read, roots))
            writes.update(_reached(written, roots))
            _escape(op, roots, reads, writes)
            if name == "memref.extract_strided_metadata":
                roots[op.results[0]] = _reached(op.operands, roots)
        elif name in VIEW_OPS:
            reached = _reached(op.operands, roots)
            if reached:
                for result in op.results:
                    roots[result] = reached
        elif isinstance(op, LinalgStructuredOperation):
            # Outputs are read too: matmul accumulates, generic may read its outs.
            reads.update(_reached((*op.inputs, *op.outputs), roots))
            writes.update(_reached(op.outputs, roots))
            _escape(op, roots, reads, writes)
        else:
            reached = _reached(op.operands, roots)
            if not reached:
                continue
            if op.dialect_name() not in _PURE_DIALECTS:
                # Unknown ops read and write all they can reach, and may hand it out again.
                reads |= reached
                writes |= reached
            for result in op.results:
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
    roots: dict[SSAValue, frozenset[SSAValue]],
    reads: set[SSAValue],
    writes: set[SSAValue],
) -> None:
    """A pointer in an operand that is no memref (an address stored as data, say) may
    be used anywhere later: count all it reaches as read and written. The table
    accounts for every memref operand of its ops (a shape query reads no data)."""
    rest = _reached((v for v in op.operands if not isinstance(v.type, MemRefType)), roots)
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
