"""xDSL's tensor dialect, with the `tensor.generate` xDSL 0.74 lacks and MLIR's verifiers
of `tensor.reshape`, `tensor.collapse_shape` and `tensor.pad` (xDSL's refuses a valid
reshape from a dynamic shape and a pad by run-time amounts whose result type is static,
and has none for collapse_shape): the rest of dhir reaches it through this
module, as it reaches every dialect through dhir.dialects."""

import math

from xdsl.dialects import tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    IndexType,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils.reshape_ops_utils import (
    ContiguousArrayOfIntArray,
    verify_reshape_like_types,
)
from xdsl.ir import Dialect
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from dhir.dialects import with_replaced_ops

# isort: off
from xdsl.dialects.tensor import (
    CastOp as CastOp,
    ConcatOp as ConcatOp,
    DimOp as DimOp,
    EmptyOp as EmptyOp,
    ExpandShapeOp as ExpandShapeOp,
    ExtractOp as ExtractOp,
    ExtractSliceOp as ExtractSliceOp,
    FromElementsOp as FromElementsOp,
    InsertSliceOp as InsertSliceOp,
    SplatOp as SplatOp,
    YieldOp as YieldOp,
)
# isort: on


@irdl_op_definition
class GenerateOp(IRDLOperation):
    """`%t = tensor.generate %n... { ^bb0(%i: index, ...): ... tensor.yield %e : T } :
    tensor<...>`: a tensor whose element at each index is what the body yields for it,
    with a size operand for each dynamic dimension. xDSL 0.74 lacks this op; dhir only
    hands it to mlir-opt-22's bufferization (entries on tensors), which makes it a
    `linalg.map` over a new buffer."""

    name = "tensor.generate"

    dynamic_extents = var_operand_def(IndexType)
    body = region_def("single_block")
    result = result_def(TensorType)

    traits = traits_def(Pure(), RecursiveMemoryEffect())

    def verify_(self) -> None:
        type_ = self.result.type
        assert isinstance(type_, TensorType)
        shape = type_.get_shape()
        if shape.count(DYNAMIC_INDEX) != len(self.dynamic_extents):
            raise VerifyException("expected a size operand for each dynamic dimension")
        block = self.body.block
        if len(block.args) != len(shape) or any(
            not isinstance(arg.type, IndexType) for arg in block.args
        ):
            raise VerifyException(f"expected the body to take {len(shape)} index arguments")
        last = block.last_op
        if not isinstance(last, YieldOp) or [v.type for v in last.operands] != [type_.element_type]:
            raise VerifyException(f"expected the body to yield one {type_.element_type}")

    @classmethod
    def parse(cls, parser: Parser) -> "GenerateOp":
        sizes = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        )
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_ = parser.parse_type()
        operands = [parser.resolve_operand(s, IndexType()) for s in sizes or []]
        return cls.create(operands=operands, result_types=[type_], regions=[body], attributes=attrs)

    def print(self, printer: Printer) -> None:
        if self.dynamic_extents:
            printer.print_string(" ")
            printer.print_list(self.dynamic_extents, printer.print_operand)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class ReshapeOp(tensor.ReshapeOp):
    """xDSL's `tensor.reshape`, verified as MLIR does: xDSL's multiplied a dynamic extent
    in and refused `tensor<?xf64>` reshaped to `tensor<2x3xf64>`."""

    source = operand_def(TensorType)
    shape = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = None  # the parent's, which its parse and print read

    def verify_(self) -> None:
        source, shape, result = self.source.type, self.shape.type, self.result.type
        assert isinstance(source, TensorType) and isinstance(shape, TensorType)
        assert isinstance(result, TensorType)
        if source.element_type != result.element_type:
            raise VerifyException(
                "element types of source and result tensor types should be the same"
            )
        if len(shape.get_shape()) != 1:
            raise VerifyException("shape tensor must have a rank one")
        static = DYNAMIC_INDEX not in (*source.get_shape(), *result.get_shape())
        if static and math.prod(source.get_shape()) != math.prod(result.get_shape()):
            raise VerifyException(
                "source and result tensor should have the same number of elements"
            )
        if shape.get_shape()[0] != len(result.get_shape()):
            raise VerifyException("length of shape operand differs from the result's tensor rank")


@irdl_op_definition
class CollapseShapeOp(tensor.CollapseShapeOp):
    """xDSL's `tensor.collapse_shape`, verified as MLIR does (xDSL's has no verifier: a
    `tensor<?x3xf64>` collapsed into `tensor<6xf64>` failed later, in mlir-opt-22)."""

    src = operand_def(TensorType)
    result = result_def(TensorType)
    reassociation = prop_def(ContiguousArrayOfIntArray())

    assembly_format = None  # the parent's, which its parse and print read

    def verify_(self) -> None:
        source, result = self.src.type, self.result.type
        assert isinstance(source, TensorType) and isinstance(result, TensorType)
        verify_reshape_like_types(
            collapsed_type=result, expanded_type=source, reassociation=self.reassociation
        )


@irdl_op_definition
class PadOp(tensor.PadOp):
    """xDSL's `tensor.pad`, verified as MLIR does: a result's dimension may be static where
    a pad amount is given at run time (mlir-opt-22's canonicalize makes it so, from a
    cast of the result), where xDSL's refused it."""

    source = operand_def(TensorType)
    low = var_operand_def(IndexType)
    high = var_operand_def(IndexType)
    static_low = prop_def(DenseArrayBase.constr(i64))
    static_high = prop_def(DenseArrayBase.constr(i64))
    nofold = opt_prop_def(UnitAttr)
    region = region_def("single_block")
    result = result_def(TensorType)

    assembly_format = None  # the parent's, which its parse and print read

    def verify_(self) -> None:
        source = self.source.type
        assert isinstance(source, TensorType)
        shape = source.get_shape()
        low, high = self.static_low.get_values(), self.static_high.get_values()
        if not len(low) == len(high) == len(shape):
            raise VerifyException(
                f"expected {len(shape)} pad amounts before and after, one for each dimension "
                f"of the source, got {len(low)} and {len(high)}"
            )
        inferred = [
            DYNAMIC_INDEX if DYNAMIC_INDEX in sizes else sum(sizes)
            for sizes in zip(shape, low, high)
        ]
        result = self.result.type.get_shape()
        if len(result) != len(inferred) or any(
            n != DYNAMIC_INDEX and r != n for r, n in zip(result, inferred)
        ):
            raise VerifyException(
                f"specified type {self.result.type} does not match the inferred shape "
                f"({', '.join('?' if n == DYNAMIC_INDEX else str(n) for n in inferred)})"
            )
        if len(self.region.block.args) != len(shape):
            raise VerifyException("expected an index argument of the body for each dimension")


Tensor: Dialect = with_replaced_ops(tensor.Tensor, GenerateOp, ReshapeOp, CollapseShapeOp, PadOp)
