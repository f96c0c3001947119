"""The linalg dialect with the named ops whose syntax or body xDSL 0.74 gets wrong.

- `linalg.matmul indexing_maps = [...]`, MLIR's form of a transposed or broadcast
  matmul, ended in an internal error; its body added `mul + out` where MLIR adds
  `out + mul` (same value, but a different generic form).
- `linalg.pooling_nchw_max`'s body took the maximum of the input and the *window*
  operand, which holds only the window's shape; MLIR's takes the maximum of the
  output and the input.

It also adds named ops xDSL 0.74 lacks: the contractions `batch_matmul`, `matvec`,
`vecmat`, `dot` and `batch_matvec`, and `linalg.div`. All are linalg structured ops,
so dhir's effect analysis reads their inputs and reads and writes their outputs.
"""

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects import arith, linalg
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, ArrayAttr
from xdsl.dialects.linalg import ops as linalg_ops
from xdsl.dialects.linalg.abstract_ops import ElementwiseOperation, NamedOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Block, Dialect, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.irdl import irdl_op_definition, prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.hints import isa

from dhir.dialects import with_replaced_ops


def _require_operands(parser: Parser, name: str, inputs: int, outputs: int) -> None:
    if inputs == 0 or outputs == 0:
        parser.raise_error(f"{name} needs `ins(...)` and `outs(...)` operands")


def _parse_maps(parser: Parser) -> ArrayAttr | None:
    """MLIR's optional `indexing_maps = [...]` in front of a matmul-like op."""
    if not parser.parse_optional_keyword("indexing_maps"):
        return None
    parser.parse_punctuation("=")
    pos = parser.pos
    maps = parser.parse_attribute()
    if not isinstance(maps, ArrayAttr):
        parser.raise_error("expected an array of affine maps", pos, parser.pos)
    return maps


def _print_maps(op: NamedOperation, maps: ArrayAttr, printer: Printer) -> None:
    default = type(op).get_irdl_definition().properties["indexing_maps"].default_value
    if maps != default:
        printer.print_string(" indexing_maps = ")
        printer.print_attribute(maps)


def _multiply_accumulate(arg_types: Sequence) -> Region:
    """MLIR's contraction body: `out + lhs * rhs`."""
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


def _maps(dims: int, build: Callable[..., tuple[tuple[AffineExpr, ...], ...]]) -> list[AffineMap]:
    results = build(*(AffineExpr.dimension(d) for d in range(dims)))
    return [AffineMap(dims, 0, tuple(r)) for r in results]


class _Contraction(NamedOperation):
    """A named op whose body multiplies its two inputs and adds the product to its
    output, with fixed indexing maps and iterators (`p`arallel, `r`eduction)."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True
    MAPS: ClassVar[list[AffineMap]]
    ITERATORS: ClassVar[str]

    @classmethod
    def parse(cls, parser: Parser) -> "_Contraction":
        op = super().parse(parser)
        _require_operands(parser, cls.name, len(op.inputs), len(op.outputs))
        return op

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return _multiply_accumulate(cls.body_arg_types((*inputs, *outputs)))

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return self.MAPS

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        kinds = {"p": IteratorTypeAttr.parallel(), "r": IteratorTypeAttr.reduction()}
        return ArrayAttr(kinds[k] for k in self.ITERATORS)


_BATCH_MATMUL_MAPS = _maps(4, lambda b, i, j, k: ((b, i, k), (b, k, j), (b, i, j)))


@irdl_op_definition
class BatchMatmulOp(_Contraction):
    """`linalg.batch_matmul (indexing_maps = [maps])? ins(a, b) outs(c)`: one matmul per
    leading index."""

    name = "linalg.batch_matmul"

    indexing_maps = prop_def(
        ArrayAttr[AffineMapAttr],
        default_value=ArrayAttr(AffineMapAttr(m) for m in _BATCH_MATMUL_MAPS),
    )
    MAPS: ClassVar[list[AffineMap]] = _BATCH_MATMUL_MAPS
    ITERATORS: ClassVar[str] = "pppr"

    @classmethod
    def parse(cls, parser: Parser) -> "BatchMatmulOp":
        maps = _parse_maps(parser)
        op = super().parse(parser)
        assert isinstance(op, BatchMatmulOp)
        if maps is not None:
            op.properties["indexing_maps"] = maps
        return op

    def print(self, printer: Printer) -> None:
        _print_maps(self, self.indexing_maps, printer)
        super().print(printer)

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return tuple(m.data for m in self.indexing_maps.data)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        return self.indexing_maps


@irdl_op_definition
class MatvecOp(_Contraction):
    name = "linalg.matvec"
    MAPS: ClassVar[list[AffineMap]] = _maps(2, lambda i, k: ((i, k), (k,), (i,)))
    ITERATORS: ClassVar[str] = "pr"


@irdl_op_definition
class VecmatOp(_Contraction):
    name = "linalg.vecmat"
    MAPS: ClassVar[list[AffineMap]] = _maps(2, lambda j, k: ((k,), (k, j), (j,)))
    ITERATORS: ClassVar[str] = "pr"


@irdl_op_definition
class BatchMatvecOp(_Contraction):
    name = "linalg.batch_matvec"
    MAPS: ClassVar[list[AffineMap]] = _maps(3, lambda b, i, k: ((b, i, k), (b, k), (b, i)))
    ITERATORS: ClassVar[str] = "ppr"


@irdl_op_definition
class DotOp(_Contraction):
    name = "linalg.dot"
    MAPS: ClassVar[list[AffineMap]] = _maps(1, lambda k: ((k,), (k,), ()))
    ITERATORS: ClassVar[str] = "r"


@irdl_op_definition
class DivOp(ElementwiseOperation):
    """`linalg.div ins(a, b) outs(c)`: elementwise `a / b` (signed for integers)."""

    name = "linalg.div"

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = cls.body_arg_types((*inputs, *outputs))
        if not arg_types:
            return Region()
        divide = arith.DivfOp if isa(arg_types[-1], AnyFloat) else arith.DivSIOp
        block = Block(arg_types=arg_types)
        quotient = divide(block.args[0], block.args[1])
        block.add_ops([quotient, linalg_ops.YieldOp(quotient)])
        return Region(block)


class MatmulOp(linalg_ops.MatmulOp):
    """`linalg.matmul (indexing_maps = [maps])? attr-dict ins(...) outs(...) (-> types)?`."""

    @classmethod
    def parse(cls, parser: Parser) -> "MatmulOp":
        maps = _parse_maps(parser)
        op = super().parse(parser)
        assert isinstance(op, MatmulOp)
        _require_operands(parser, cls.name, len(op.inputs), len(op.outputs))
        if maps is not None:
            op.properties["indexing_maps"] = maps
        return op

    def print(self, printer: Printer) -> None:
        _print_maps(self, self.indexing_maps, printer)
        super().print(printer)

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return _multiply_accumulate(cls.body_arg_types((*inputs, *outputs)))


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


Linalg: Dialect = with_replaced_ops(
    linalg.Linalg,
    MatmulOp,
    PoolingNchwMaxOp,
    BatchMatmulOp,
    MatvecOp,
    VecmatOp,
    BatchMatvecOp,
    DotOp,
    DivOp,
)
