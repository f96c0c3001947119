"""The dialects dhir parses and prints.

Besides the `dhir` dialect itself, some of xDSL's dialects are replaced by versions
that accept the custom syntax users write (xDSL 0.74 only knows the generic form of
`scf.parallel`, the `gpu` ops and a few `memref` ops), and xDSL's legacy `mpi`
dialect is replaced by one that follows upstream MLIR 22.

The rest of dhir reaches xDSL's dialects only through this package: `dhir.dialects.X`
is dialect X as dhir uses it (dhir's shadow ops and the xDSL ops it keeps), so no
module can pick xDSL's op where dhir has its own. Only `xdsl.dialects.builtin`, the
builtin types and attributes, which dhir does not shadow, is imported directly.
tests/unit/test_xdsl_gaps.py checks both.
"""

from xdsl.dialects import get_all_dialects as get_all_dialects
from xdsl.ir import Dialect, Operation


def with_replaced_ops(base: Dialect, *replacements: type[Operation]) -> Dialect:
    """`base` with each op whose name matches a replacement swapped for it."""
    by_name = {op.name: op for op in replacements}
    ops = [by_name.pop(op.name, op) for op in base.operations]
    ops.extend(by_name.values())
    return Dialect(base.name, ops, list(base.attributes))
