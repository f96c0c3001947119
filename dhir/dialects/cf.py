"""xDSL's cf dialect, with `cf.switch` checked as MLIR checks it: its flag is a signless
integer (xDSL 0.74 also takes index, which mlir-opt-22 refuses). The rest of dhir reaches
it through this module, as it reaches every dialect through dhir.dialects."""

from xdsl.dialects import cf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Dialect
from xdsl.utils.exceptions import VerifyException

from dhir.dialects import with_replaced_ops

# isort: off
from xdsl.dialects.cf import AssertOp as AssertOp
from xdsl.dialects.cf import BranchOp as BranchOp
from xdsl.dialects.cf import ConditionalBranchOp as ConditionalBranchOp
# isort: on


class SwitchOp(cf.SwitchOp):
    """`cf.switch` on signless integers only, as MLIR defines it; xDSL 0.74 also takes an
    index flag, which mlir-opt-22 refuses."""

    def verify_(self) -> None:
        super().verify_()
        if isinstance(self.flag.type, IndexType):
            raise VerifyException(
                "'cf.switch' takes a signless integer flag, not index (as in MLIR); "
                "cast it first: arith.index_cast %i : index to i64"
            )


Cf: Dialect = with_replaced_ops(cf.Cf, SwitchOp)
