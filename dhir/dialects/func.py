"""xDSL's func dialect, as dhir uses it: xDSL's ops, but `func.call`, whose callee check
can find the callee in a table of the module's symbols. The rest of dhir reaches it
through this module, as it reaches every dialect through dhir.dialects."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from xdsl.dialects import func
from xdsl.dialects.builtin import SymbolRefAttr
from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.traits import SymbolUserOpInterface

from dhir.dialects import with_replaced_ops
from dhir.dialects.format import redefine

# isort: off
from xdsl.dialects.func import (
    FuncOp as FuncOp,
    ReturnOp as ReturnOp,
)
# isort: on

# Finds the op a symbol reference names, seen from an op (None: no such symbol), as
# `SymbolTable.lookup_symbol` does.
Lookup = Callable[[Operation, SymbolRefAttr], Operation | None]
_LOOKUP: ContextVar[Lookup | None] = ContextVar("callee_lookup", default=None)


@contextmanager
def callees_found_by(lookup: Lookup) -> Iterator[None]:
    """Within this, `func.call`'s verifier finds its callee with `lookup`: for IR whose
    symbols do not change meanwhile (dhir/ir/verifier.py gives a table of them)."""
    token = _LOOKUP.set(lookup)
    try:
        yield
    finally:
        _LOOKUP.reset(token)


class _CallsItsCallee(SymbolUserOpInterface):
    """xDSL's check that a call matches its callee, the callee found by the lookup
    `callees_found_by` gives; a call that does not match is checked by xDSL's own, so
    that its errors read as before."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, CallOp)
        lookup = _LOOKUP.get()
        if lookup is not None and _matches(op, lookup(op, op.callee)):
            return
        func.CallOpSymbolUserOpInterface().verify(op)


def _matches(call: "CallOp", callee: Operation | None) -> bool:
    if not isinstance(callee, FuncOp):
        return False
    kind = callee.function_type
    return kind.inputs.data == tuple(call.arguments.types) and kind.outputs.data == tuple(
        call.result_types
    )


@redefine(traits=traits_def(_CallsItsCallee()))
class CallOp(func.CallOp):
    """xDSL 0.74's `func.call` finds its callee by reading the name of every symbol of
    the module (`SymbolTable.lookup_symbol`): verifying a module was quadratic in its
    calls (parsing a chain of 2,000 functions, each calling the next, took 8.3 s of CPU,
    2.3 s now). This one finds it in the table `callees_found_by` gives, where one is
    given."""


Func = with_replaced_ops(func.Func, CallOp)
