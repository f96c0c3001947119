"""linalg structured ops on memrefs."""

from itertools import product

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    ReturnedValues,
)
from xdsl.ir import BlockArgument, Operation
from xdsl.ir.affine import AffineDimExpr, AffineMap

from dhir.backends.interp.core import Named, Returned, Values, assign, fail, handles, register
from dhir.backends.interp.memref import checked_index, load, state, store
from dhir.backends.interp.written import (
    copy_flags,
    copy_unwritten_one,
    is_written_one,
    mark_one,
)

# Loaded before registering: the implementations also go to dhir's subclasses.
from dhir.dialects import linalg as dhir_linalg
from dhir.dialects import linalg as linalg
from dhir.dialects import linalg as linalg_base


def _concrete_subclasses(base: type[Operation]) -> list[type[Operation]]:
    found: list[type[Operation]] = []
    for sub in base.__subclasses__():
        if getattr(sub, "name", None) and not getattr(sub, "__abstractmethods__", None):
            found.append(sub)
        found += _concrete_subclasses(sub)
    return list(dict.fromkeys(found))


_STRUCTURED = [
    t
    for t in _concrete_subclasses(linalg_base.LinalgStructuredOperation)
    # and dhir's own named ops (batch_matmul, dot, ...)
    if t.__module__.startswith("xdsl.dialects.linalg") or t.__module__ == dhir_linalg.__name__
]
# linalg.map is a structured op by registration only (its operands are not xDSL's).
_STRUCTURED.append(dhir_linalg.MapOp)


@register
class LinalgImpls(InterpreterFunctions):
    @handles(*_STRUCTURED)
    def run_structured(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        assert isinstance(op, linalg_base.LinalgStructuredOperation)
        if op.res:
            fail(op, "on tensors is not supported by the interpreter (memrefs only)")
        maps = [m.data for m in op.get_indexing_maps()]
        shapes = [d for a in args if isinstance(a, np.ndarray) for d in a.shape]
        try:
            ranges = op.get_shapes_to_loops_map().eval(shapes, [])
        except NotImplementedError:
            fail(op, "has indexing maps the interpreter cannot invert into loop bounds")
        _check_sizes(op, args, maps, ranges)
        n_inputs = len(op.inputs)
        outputs = args[n_inputs:]
        reads, copied = _reads_and_copies(op, args)
        indices = state(interp).linalg_indices
        for point in product(*map(range, ranges)):
            places = [m.eval(point, ()) for m in maps]
            scalars = tuple(
                _element(op, a, where, read) if isinstance(a, np.ndarray) else a
                for a, where, read in zip(args, places, reads)
            )
            indices.append(point)
            values = interp.run_ssacfg_region(op.body, scalars, op.name)
            indices.pop()
            # Before the stores: an output may yield its own element unchanged.
            unwritten = [s is not None and not is_written_one(args[s], places[s]) for s in copied]
            for k, (array, value) in enumerate(zip(outputs, values)):
                where = places[n_inputs + k]
                source = copied[k]
                if unwritten[k] and source is not None:  # a copy of an element nothing wrote
                    copy_unwritten_one(op, args[source], places[source], array, where)
                store(op, array, where, value)
                if unwritten[k]:
                    mark_one(array, where, False)
        return ()

    @handles(linalg.BroadcastOp)
    def run_broadcast(self, interp: Interpreter, op: linalg.BroadcastOp, args: Values) -> Values:
        if op.result:
            fail(op, "on tensors is not supported by the interpreter (memrefs only)")
        source, out = args
        added = tuple(op.dimensions.get_values())
        copied = np.broadcast_to(np.expand_dims(source, added), out.shape)
        copy_flags(op, copied, out)  # a copy: the flags go along
        assign(out, copied)
        return ()

    @handles(linalg.YieldOp)
    def run_yield(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    @handles(linalg.IndexOp)
    def run_index(self, interp: Interpreter, op: linalg.IndexOp, args: Values) -> Values:
        indices = state(interp).linalg_indices
        if not indices:
            fail(op, "runs outside a linalg op")
        return (indices[-1][op.dim.value.data],)


def _check_sizes(
    op: Operation, args: Values, maps: list[AffineMap], ranges: tuple[int, ...]
) -> None:
    """Each operand dimension a loop runs along alone is the loop's size (the loops'
    sizes are those of the first operand dimensions that give them): MLIR requires it,
    and its --runtime-checks stop a linalg op whose operands disagree, which native code
    otherwise runs over the first one's size."""
    for k, (array, mapping) in enumerate(zip(args, maps)):
        if not isinstance(array, np.ndarray):
            continue
        for d, expr in enumerate(mapping.results):
            if isinstance(expr, AffineDimExpr) and array.shape[d] != ranges[expr.position]:
                fail(
                    op,
                    f"operand #{k}'s dimension {d} has size {array.shape[d]}, where its "
                    f"loop d{expr.position} runs {ranges[expr.position]} times (from "
                    "another operand): the sizes must agree",
                    _named(op, maps, (k, d), expr.position),
                )


def _named(
    op: Operation, maps: list[AffineMap], at: tuple[int, int], loop: int
) -> tuple[Named, ...]:
    """Dimension `at` of an operand, and the first operand dimension that gives `loop`
    its size, as native code's check names them."""
    (k, d), given = at, []
    for j, mapping in enumerate(maps):
        for e, expr in enumerate(mapping.results):
            if isinstance(expr, AffineDimExpr) and expr.position == loop:
                given.append((j, e))
    if not given:
        return ()
    j, e = given[0]
    return (("it has ", op.operands[k], d), ("the loop runs ", op.operands[j], e))


def _reads_and_copies(op: Operation, args: Values) -> tuple[list[bool], list[int | None]]:
    """Which operands the body reads (its block argument has a use but the yield), and
    for each output the memref operand it copies (yielded unchanged), if any: a copy
    carries whether its element was written, as memref.copy does."""
    block = op.regions[0].block
    terminator = block.last_op
    reads = [any(use.operation is not terminator for use in arg.uses) for arg in block.args]
    copied: list[int | None] = []
    for value in terminator.operands if terminator is not None else ():
        index = value.index if isinstance(value, BlockArgument) and value.block is block else None
        copied.append(index if index is not None and isinstance(args[index], np.ndarray) else None)
    return reads, copied


def _element(op: Operation, array: np.ndarray, where: tuple[int, ...], read: bool) -> object:
    if read:
        return load(op, array, where)
    return array.item(checked_index(op, array, where))  # copied or unused: not read
