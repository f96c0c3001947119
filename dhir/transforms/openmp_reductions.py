"""`dhir-openmp-reductions`: integer min/max in `scf.reduce` bodies as a compare and a select.

MLIR 22's convert-scf-to-openmp turns a reduction into an OpenMP one only when it knows its
combining op: `addi`, `muli`, `andi`, `ori`, `xori`, `addf`, `mulf`, or a compare feeding a
select. It stops with "unconverted operation found: scf.reduce.return" on `maxsi`, `minsi`,
`maxui` and `minui`. For integers `select(cmpi(sgt, x, y), x, y)` is `maxsi(x, y)` exactly,
so this rewrite changes no result. (Float min/max reductions never reach OpenMP: a module
reducing floats runs its loops sequentially, see `dhir.backends.native.openmp_safe`.)
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dhir.dialects import arith, scf

_PREDICATES = {
    arith.MaxSIOp: "sgt",
    arith.MinSIOp: "slt",
    arith.MaxUIOp: "ugt",
    arith.MinUIOp: "ult",
}


@dataclass(frozen=True)
class OpenMPReductionsPass(ModulePass):
    """Integer min/max in `scf.reduce` bodies become cmpi + select, which OpenMP reduces.

    `arith.cmpi` + `arith.select` is the form convert-scf-to-openmp makes an OpenMP
    reduction of; it stops on `arith.maxsi` and the others."""

    name = "dhir-openmp-reductions"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for reduce in [o for o in op.walk() if isinstance(o, scf.ReduceOp)]:
            for region in reduce.regions:
                for inner in list(region.walk()):
                    predicate = _PREDICATES.get(type(inner))
                    if predicate is not None:
                        assert isinstance(inner, arith.SignlessIntegerBinaryOperation)
                        _as_select(inner, predicate)


def _as_select(op: arith.SignlessIntegerBinaryOperation, predicate: str) -> None:
    compare = arith.CmpiOp(op.lhs, op.rhs, predicate)
    select = arith.SelectOp(compare, op.lhs, op.rhs)
    Rewriter.replace_op(op, [compare, select])
