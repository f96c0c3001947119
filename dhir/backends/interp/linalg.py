"""linalg structured ops on memrefs."""

from itertools import product

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    ReturnedValues,
)
from xdsl.ir import Operation

from dhir.backends.interp.core import Returned, Values, fail, handles, register
from dhir.backends.interp.memref import assign, load, state, store

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
        n_inputs = len(op.inputs)
        outputs = list(zip(args[n_inputs:], maps[n_inputs:]))
        indices = state(interp).linalg_indices
        for point in product(*map(range, ranges)):
            scalars = tuple(
                load(op, a, m.eval(point, ())) if isinstance(a, np.ndarray) else a
                for a, m in zip(args, maps)
            )
            indices.append(point)
            values = interp.run_ssacfg_region(op.body, scalars, op.name)
            indices.pop()
            for (array, output_map), value in zip(outputs, values):
                store(op, array, output_map.eval(point, ()), value)
        return ()

    @handles(linalg.BroadcastOp)
    def run_broadcast(self, interp: Interpreter, op: linalg.BroadcastOp, args: Values) -> Values:
        if op.result:
            fail(op, "on tensors is not supported by the interpreter (memrefs only)")
        source, out = args
        added = tuple(op.dimensions.get_values())
        assign(out, np.broadcast_to(np.expand_dims(source, added), out.shape))
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
