"""The arith dialect with the ops MLIR 22 has and xDSL 0.74 lacks."""

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, base, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure

from dhir.dialects import with_replaced_ops


@irdl_op_definition
class IndexCastUIOp(IRDLOperation):
    """`arith.index_cast` that zero-extends where `arith.index_cast` sign-extends."""

    name = "arith.index_castui"

    input = operand_def(base(IntegerType) | base(IndexType))
    result = result_def(base(IntegerType) | base(IndexType))

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"


Arith: Dialect = with_replaced_ops(arith.Arith, IndexCastUIOp)
