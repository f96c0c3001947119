"""The linalg dialect with the named ops whose syntax or body xDSL 0.74 gets wrong.

- `linalg.matmul indexing_maps = [...]`, MLIR's form of a transposed or broadcast
  matmul, ended in an internal error; its body added `mul + out` where MLIR adds
  `out + mul` (same value, but a different generic form).
- `linalg.pooling_nchw_max`'s body took the maximum of the input and the *window*
  operand, which holds only the window's shape; MLIR's takes the maximum of the
  output and the input.
"""

from collections.abc import Sequence

from xdsl.dialects import arith, linalg
from xdsl.dialects.builtin import AnyFloat, ArrayAttr
from xdsl.dialects.linalg import ops as linalg_ops
from xdsl.ir import Block, Dialect, Region, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.hints import isa

from dhir.dialects import with_replaced_ops


def _require_operands(parser: Parser, name: str, inputs: int, outputs: int) -> None:
    if inputs == 0 or outputs == 0:
        parser.raise_error(f"{name} needs `ins(...)` and `outs(...)` operands")


class MatmulOp(linalg_ops.MatmulOp):
    """`linalg.matmul (indexing_maps = [maps])? attr-dict ins(...) outs(...) (-> types)?`."""

    @classmethod
    def parse(cls, parser: Parser) -> "MatmulOp":
        maps = None
        if parser.parse_optional_keyword("indexing_maps"):
            parser.parse_punctuation("=")
            pos = parser.pos
            maps = parser.parse_attribute()
            if not isinstance(maps, ArrayAttr):
                parser.raise_error("expected an array of affine maps", pos, parser.pos)
        op = super().parse(parser)
        assert isinstance(op, MatmulOp)
        _require_operands(parser, cls.name, len(op.inputs), len(op.outputs))
        if maps is not None:
            op.properties["indexing_maps"] = maps
        return op

    def print(self, printer: Printer) -> None:
        default = type(self).get_irdl_definition().properties["indexing_maps"].default_value
        if self.indexing_maps != default:
            printer.print_string(" indexing_maps = ")
            printer.print_attribute(self.indexing_maps)
        super().print(printer)

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = cls.body_arg_types((*inputs, *outputs))
        if not arg_types:
            return Region()
        is_float = isa(arg_types[-1], AnyFloat)
        add, mul = (arith.AddfOp, arith.MulfOp) if is_float else (arith.AddiOp, arith.MuliOp)

        block = Block(arg_types=arg_types)
        args = block.args
        product = mul(args[0], args[1])
        total = add(args[2], product)
        block.add_ops([product, total, linalg_ops.YieldOp(total)])
        return Region(block)


class PoolingNchwMaxOp(linalg_ops.PoolingNchwMaxOp):
    @classmethod
    def parse(cls, parser: Parser) -> "PoolingNchwMaxOp":
        op = super().parse(parser)
        assert isinstance(op, PoolingNchwMaxOp)
        _require_operands(parser, cls.name, len(op.inputs), len(op.outputs))
        return op

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = cls.body_arg_types((*inputs, *outputs))
        if not arg_types:
            return Region()
        is_float = isa(arg_types[-1], AnyFloat)
        maximum = arith.MaximumfOp if is_float else arith.MaxSIOp

        block = Block(arg_types=arg_types)
        # (input element, window element, output element): the window operand only
        # gives the window's shape.
        result = maximum(block.args[2], block.args[0])
        block.add_ops([result, linalg_ops.YieldOp(result)])
        return Region(block)


Linalg: Dialect = with_replaced_ops(linalg.Linalg, MatmulOp, PoolingNchwMaxOp)
