"""The dialects dhir parses and prints.

Besides the `dhir` dialect itself, some of xDSL's dialects are replaced by versions
that accept the custom syntax users write (xDSL 0.74 only knows the generic form of
`scf.parallel`, the `gpu` ops and a few `memref` ops), and xDSL's legacy `mpi`
dialect is replaced by one that follows upstream MLIR 22.
"""

from xdsl.ir import Dialect, Operation


def with_replaced_ops(base: Dialect, *replacements: type[Operation]) -> Dialect:
    """`base` with each op whose name matches a replacement swapped for it."""
    by_name = {op.name: op for op in replacements}
    ops = [by_name.pop(op.name, op) for op in base.operations]
    ops.extend(by_name.values())
    return Dialect(base.name, ops, list(base.attributes))
