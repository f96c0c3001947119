"""`dhir-linalg-sizes`: a linalg op of host code whose operands' sizes are known only at
run time checks, as it runs, that each operand dimension a loop runs along alone has the
loop's size, and stops the rank at the op where one has not.

MLIR requires it and checks it only under `--generate-runtime-verification`, without
the sizes; native code runs each loop over the first operand dimension that gives it
(the interpreter's rule too, which refuses the op): an elementwise `arith.addf` of
`tensor<?x3xf64>` inputs of 2 and 1 rows, compiled, read past the second and exited 0
with a NaN in its result, and a `linalg.matmul` whose operands' inner sizes differ did
the same. Where a check fails, `dhir_rt_loop_size(operand, dim, size, extent)` writes
the numbers before a `cf.assert` with MLIR's message for it stops the rank. Runs after
the OpenMP passes, as dhir-bounds-checks: its call must not make a parallel loop
sequential.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, ModuleOp, i64
from xdsl.ir import Operation
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass

from dhir.analysis.arg_origins import ArgOrigins, note
from dhir.dialects.gpu import in_device_code
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.walk import find_ops
from dhir.transforms.building import declare
from dhir.transforms.pass_options import named_entry
from dhir.transforms.vector_checks import CheckBuilder, report_unless

# MLIR's words for the check of a linalg op's operand sizes.
INCOMPATIBLE = "dimension #{dim} of input/output operand #{operand} is incompatible"
LOOP_SIZE = "dhir_rt_loop_size"

# An operand's index and dimension.
_Dim = tuple[int, int]


@dataclass(frozen=True)
class LinalgSizesPass(ModulePass):
    """Host linalg ops check that their operands' run-time sizes agree with their loops'.

    A failure names the arguments of `entry` that the sizes are, where the IR says which."""

    name = "dhir-linalg-sizes"
    needs: ClassVar[tuple[type[Operation], ...]] = (LinalgStructuredOperation,)

    entry: str | None = None  # None: `main`, where the module has it

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pending = [
            (linalg, pairs)
            for linalg in find_ops(op, LinalgStructuredOperation)
            if not in_device_code(linalg) and (pairs := unequal_dims(linalg))
        ]
        origins = ArgOrigins(op, named_entry(self.name, op, self.entry))
        for linalg, pairs in pending:
            for dim, source in pairs:
                _check(linalg, dim, source, _named(origins, linalg, dim, source))
        if pending:
            declare(op, LOOP_SIZE, [i64] * 4, [], owner="dhir's runtime")


def unequal_dims(op: LinalgStructuredOperation) -> list[tuple[_Dim, _Dim]]:
    """Each memref operand dimension that a loop runs along alone, with the first one
    that gives that loop its size, where either size is known at run time only."""
    try:
        maps = [m.data for m in op.get_indexing_maps()]
    except Exception:  # noqa: BLE001 - xDSL raises several kinds for odd ops
        return []
    operands = list(op.operands)
    if len(maps) != len(operands):
        return []
    first: dict[int, _Dim] = {}
    found: list[tuple[_Dim, _Dim]] = []
    for k, (value, amap) in enumerate(zip(operands, maps, strict=True)):
        if not isinstance(value.type, MemRefType):
            continue
        for d, expr in enumerate(amap.results):
            if not isinstance(expr, AffineDimExpr):
                continue
            source = first.setdefault(expr.position, (k, d))
            if source != (k, d) and DYNAMIC_INDEX in (_size(op, source), _size(op, (k, d))):
                found.append(((k, d), source))
    return found


def _size(op: LinalgStructuredOperation, at: _Dim) -> int:
    kind = op.operands[at[0]].type
    assert isinstance(kind, MemRefType)
    return kind.get_shape()[at[1]]


def _named(origins: ArgOrigins, op: LinalgStructuredOperation, at: _Dim, source: _Dim) -> str:
    """The arguments that dimension `at` of an operand and dimension `source`, which
    gives the loop its size, are, as the end of a failure's message."""
    (k, d), (j, e) = at, source
    size, extent = origins.size(op.operands[k], d), origins.size(op.operands[j], e)
    return note(("it has ", size), ("the loop runs ", extent))


def _check(op: LinalgStructuredOperation, at: _Dim, source: _Dim, named: str) -> None:
    """At `op`: dimension `at` of an operand has the size of dimension `source`, which
    gives the loop along both its size; `named` ends the failure's message."""
    (k, d), (j, e) = at, source
    check = CheckBuilder(op, INCOMPATIBLE.format(dim=d, operand=k) + named)
    size = check.size(op.operands[k], d)
    extent = check.size(op.operands[j], e)
    ok = check.cmp(size, extent, "eq")
    report_unless(check.block, ok, LOOP_SIZE, [k, d, size, extent])
    check.assert_(ok)
