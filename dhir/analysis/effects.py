"""Which of its listed memrefs a task reads and writes, found from its body.

xDSL's memory-effect interface is silent for affine, linalg, gpu and func.call, so
dhir keeps its own table. Anything not in the table that takes a memref (a call, an
unknown op) counts as reading and writing every memref it can reach, so the answer
is never smaller than the truth. Views (subview, cast, ...) alias their source.
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
    # operands: async dependencies..., dst, src
    "gpu.memcpy": lambda op: ([op.operands[-1]], [op.operands[-2]]),
    # Shape queries read no data.
    "memref.dim": lambda op: ([], []),
    "memref.extract_strided_metadata": lambda op: ([], []),
}

# Ops whose memref result is a view of their first operand.
_VIEWS = frozenset(
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
    }
)


def task_effects(task: TaskOp) -> Effects:
    # Called for every task by dhir-place and again by dhir-lower-to-mpi: kept lean.
    roots: dict[SSAValue, frozenset[SSAValue]] = {m: frozenset([m]) for m in task.memrefs}
    reads: set[SSAValue] = set()
    writes: set[SSAValue] = set()
    for op in _walk(task.body.block.ops):
        name = op.name
        access = _ACCESSES.get(name)
        if access is not None:
            read, written = access(op)
            for value in read:
                reads.update(roots.get(value, ()))
            for value in written:
                writes.update(roots.get(value, ()))
        elif name in _VIEWS:
            if op.operands:
                for result in op.results:
                    roots[result] = roots.get(op.operands[0], frozenset())
        elif isinstance(op, LinalgStructuredOperation):
            # Outputs are read too: matmul accumulates, generic may read its outs.
            for value in (*op.inputs, *op.outputs):
                reads.update(roots.get(value, ()))
            for value in op.outputs:
                writes.update(roots.get(value, ()))
        else:
            # Unknown ops read and write every memref they are given (only memrefs
            # have roots), and may hand them out again.
            reached: set[SSAValue] = set()
            for value in op.operands:
                reached.update(roots.get(value, ()))
            if reached:
                reads |= reached
                writes |= reached
                for result in op.results:
                    if isinstance(result.type, MemRefType):
                        roots[result] = frozenset(reached)
    return Effects(frozenset(reads), frozenset(writes))


def _walk(ops: Iterable[Operation]) -> Iterator[Operation]:
    """Every op in `ops` and nested in them, in pre-order (xDSL's walk, without its
    layers of generators)."""
    for op in ops:
        yield op
        for region in op.regions:
            for block in region.blocks:
                yield from _walk(block.ops)
