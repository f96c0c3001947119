"""The linalg dialect with the named ops whose syntax or body xDSL 0.74 gets wrong, and
those it lacks.

- `linalg.matmul indexing_maps = [...]`, MLIR's form of a transposed or broadcast
  matmul, ended in an internal error; its body added `mul + out` where MLIR adds
  `out + mul` (same value, but a different generic form), and no body cast mixed
  element types to the output's as MLIR's do.
- The convolutions' bodies had the same order, and `linalg.pooling_nchw_max`'s body took
  the maximum of the input and the *window* operand, which holds only the window's shape;
  MLIR's takes the maximum of the output and the input.

Convolutions and poolings are one table of loops and accesses here (strides and
dilations optional, as in MLIR). Also added: the contractions `batch_matmul`,
`batch_reduce_matmul`, `contract`, `matvec`, `vecmat`, `dot`, `batch_matvec`, `mmt4d` and
`batch_mmt4d`, the elementwise ops xDSL lacks (`div`, `abs` ... `powf`), `fill` of
vectors, `linalg.pack` / `linalg.unpack`, `linalg.map`, `linalg.elementwise` (with
`#linalg.elementwise_kind`), the `cast` property (`#linalg.type_fn`) of matmul-like ops,
and `linalg.reduce` of several inputs. The structured ops all are
`LinalgStructuredOperation`s: dhir's effect analysis reads their inputs and reads and
writes their outputs, and the interpreter runs them by their maps and bodies.
"""

from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar, cast

from xdsl.dialects import arith, linalg, math
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    I64,
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    DenseIntElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ShapedType,
    StringAttr,
    TensorType,
    VectorType,
    i64,
)
from xdsl.dialects.linalg import ops as linalg_ops
from xdsl.dialects.linalg.abstract_ops import ElementwiseOperation, NamedOperation
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.utils import (
    EnumAttribute,
    parse_dynamic_index_list_without_types,
    print_dynamic_index_list,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    SameVariadicOperandSize,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum

# What the rest of dhir uses of xDSL's linalg dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.linalg is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.linalg.ops import (
    BroadcastOp as BroadcastOp,
    YieldOp as YieldOp,
)
from xdsl.dialects.linalg.abstract_ops import (
    LinalgStructuredOperation as LinalgStructuredOperation,
)
# isort: on

from dhir.dialects import arith as dhir_arith
from dhir.dialects import with_replaced_ops
from dhir.dialects.format import AngleBracketEnum, optional_property, redefine


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


# --- Casts as MLIR's named ops make them (OpDSL's `cast_signed` / `cast_unsigned`) ---


def _cast(ops: list[Operation], value: SSAValue, to: Attribute, unsigned: bool) -> SSAValue:
    """`value` converted to `to` the way a named op's body converts it: sign- (or zero-)
    extension, truncation, int <-> float conversion; the cast ops go to `ops`."""
    source = value.type
    if source == to:
        return value
    cast: Operation
    # dhir's casts, not xDSL's: the rest of dhir (the interpreter, the analyses) knows
    # an op by dhir's class where dhir has its own.
    if isinstance(source, IntegerType) and isinstance(to, IntegerType):
        widen = dhir_arith.ExtUIOp if unsigned else dhir_arith.ExtSIOp
        narrower = source.width.data > to.width.data
        cast = dhir_arith.TruncIOp(value, to) if narrower else widen(value, to)
    elif isinstance(source, IntegerType) and isa(to, AnyFloat):
        cast = (dhir_arith.UIToFPOp if unsigned else dhir_arith.SIToFPOp)(value, to)
    elif isa(source, AnyFloat) and isinstance(to, IntegerType):
        cast = (dhir_arith.FPToUIOp if unsigned else dhir_arith.FPToSIOp)(value, to)
    elif isa(source, AnyFloat) and isa(to, AnyFloat):
        narrower = source.bitwidth > to.bitwidth
        cast = dhir_arith.TruncFOp(value, to) if narrower else dhir_arith.ExtFOp(value, to)
    else:
        raise ValueError(f"cannot convert {source} to {to} in a named op's body")
    ops.append(cast)
    return cast.results[0]


def _body(
    arg_types: Sequence[Attribute], build: Callable[[Block, list[Operation]], SSAValue]
) -> Region:
    block = Block(arg_types=arg_types)
    ops: list[Operation] = []
    result = build(block, ops)
    block.add_ops([*ops, linalg_ops.YieldOp(result)])
    return Region(block)


def _combine(kind: str, out: Attribute) -> type[Operation]:
    """The arith op of a body's `kind` (add, mul, sub, max, min, max_unsigned, ...) for
    elements of type `out`."""
    is_float = isa(out, AnyFloat)
    table: dict[str, tuple[type[Operation], type[Operation]]] = {
        "add": (arith.AddfOp, arith.AddiOp),
        "sum": (arith.AddfOp, arith.AddiOp),
        "mul": (arith.MulfOp, arith.MuliOp),
        "sub": (arith.SubfOp, arith.SubiOp),
        "max": (arith.MaximumfOp, arith.MaxSIOp),
        "min": (arith.MinimumfOp, arith.MinSIOp),
        "max_unsigned": (arith.MaximumfOp, arith.MaxUIOp),
        "min_unsigned": (arith.MinimumfOp, arith.MinUIOp),
    }
    float_op, int_op = table[kind]
    if kind.endswith("_unsigned") and is_float:
        raise ValueError("unsigned pooling needs integer elements")
    return float_op if is_float else int_op


def _apply(ops: list[Operation], kind: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    op = _combine(kind, lhs.type)(lhs, rhs)  # pyright: ignore[reportCallIssue]
    ops.append(op)
    return op.results[0]


def _multiply_accumulate_body(
    arg_types: Sequence[Attribute], zero_points: bool = False, unsigned: bool = False
) -> Region:
    """`out + cast(lhs) * cast(rhs)` (minus the zero points `lhs_zp`, `rhs_zp` when the
    op has them: `out + (cast(lhs) - cast(lhs_zp)) * (cast(rhs) - cast(rhs_zp))`); the
    inputs taken as `unsigned` when asked."""

    def build(block: Block, ops: list[Operation]) -> SSAValue:
        args = block.args
        out = args[-1]
        lhs = _cast(ops, args[0], out.type, unsigned)
        if zero_points:
            lhs = _apply(ops, "sub", lhs, _cast(ops, args[2], out.type, False))
        rhs = _cast(ops, args[1], out.type, unsigned)
        if zero_points:
            rhs = _apply(ops, "sub", rhs, _cast(ops, args[3], out.type, False))
        return _apply(ops, "add", out, _apply(ops, "mul", lhs, rhs))

    return _body(arg_types, build)


class TypeFn(StrEnum):
    CAST_SIGNED = "cast_signed"
    CAST_UNSIGNED = "cast_unsigned"


@irdl_attr_definition
class TypeFnAttr(AngleBracketEnum, EnumAttribute[TypeFn]):
    """`#linalg.type_fn<cast_unsigned>`, how a matmul, batch_matmul or contract converts
    its inputs to the output's element type (its `cast` property; batch_reduce_matmul has
    the property but MLIR 22 ignores it, and its other named ops take it as an attribute
    without meaning). xDSL 0.74 lacks this attribute."""

    name = "linalg.type_fn"


_CAST = {"cast": optional_property(TypeFnAttr)}


def _cast_inputs(op: Operation) -> None:
    """Remake the body of a contraction whose `cast` property says its inputs are
    unsigned (the body parsed from the custom form converts them as signed)."""
    cast_ = op.properties.get("cast")
    if not isinstance(cast_, TypeFnAttr) or cast_.data is not TypeFn.CAST_UNSIGNED:
        return
    if getattr(op, "SIGNED_ALWAYS", False):
        return
    arg_types = _element_types(op.operands)
    if len(arg_types) == 3:
        op.detach_region(0)
        op.add_region(_multiply_accumulate_body(arg_types, unsigned=True))


def _multiply_accumulate(arg_types: Sequence[Attribute]) -> Region:
    """A contraction's body, `out + cast(lhs) * cast(rhs)`; empty (and refused by the
    verifier) unless the op has two inputs and one output."""
    return _multiply_accumulate_body(arg_types) if len(arg_types) == 3 else Region()


def _pooling_body(arg_types: Sequence[Attribute], kind: str) -> Region:
    """`kind(out, cast(in))`; the window operand only gives the window's shape."""

    def build(block: Block, ops: list[Operation]) -> SSAValue:
        out = block.args[-1]
        value = _cast(ops, block.args[0], out.type, kind.endswith("_unsigned"))
        return _apply(ops, kind, out, value)

    return _body(arg_types, build)


def _element_types(operands: Sequence[SSAValue]) -> list[Attribute]:
    types: list[Attribute] = []
    for operand in operands:
        kind = operand.type
        # A vector operand is one element (of a tensor of vectors, say).
        is_container = isinstance(kind, MemRefType | TensorType)
        types.append(kind.get_element_type() if is_container else kind)
    return types


class _Windowed(NamedOperation):
    """A convolution or pooling: loops named in `LOOPS`, one access per operand in
    `ACCESS` (`oh+kh` is `oh * stride + kh * dilation`, taking the next stride and
    dilation; an empty access is a scalar), loops that index the output parallel and the
    others reductions. `BODY` names the body: `mac`, `mac_q` (with zero points) or a
    pooling kind (`sum`, `max`, `min`, `max_unsigned`, `min_unsigned`)."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True
    LOOPS: ClassVar[str]
    ACCESS: ClassVar[tuple[str, ...]]
    BODY: ClassVar[str]

    strides = opt_prop_def(DenseIntElementsAttr)
    dilations = opt_prop_def(DenseIntElementsAttr)

    @classmethod
    def parse(cls, parser: Parser) -> "_Windowed":
        start = parser.pos
        op = super().parse(parser)
        _require_operands(parser, cls.name, len(op.inputs), len(op.outputs))
        if len(op.operands) != len(cls.ACCESS):
            parser.raise_error(
                f"{cls.name} takes {len(cls.ACCESS) - 1} inputs and one output", start, parser.pos
            )
        assert isinstance(op, _Windowed)
        return op

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = _element_types((*inputs, *outputs))
        if len(arg_types) != len(cls.ACCESS):
            return Region()
        if cls.BODY == "mac":
            return _multiply_accumulate_body(arg_types)
        if cls.BODY == "mac_q":
            return _multiply_accumulate_body(arg_types, zero_points=True)
        return _pooling_body(arg_types, cls.BODY)

    @classmethod
    def spatial_rank(cls) -> int:
        return cls.ACCESS[0].count("+")

    def _window(self, attr: DenseIntElementsAttr | None) -> tuple[int, ...]:
        if attr is None:
            return (1,) * self.spatial_rank()
        return tuple(int(v) for v in attr.get_values())

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        loops = self.LOOPS.split()
        dims = {name: AffineExpr.dimension(i) for i, name in enumerate(loops)}
        steps = iter(zip(self._window(self.strides), self._window(self.dilations)))
        maps: list[AffineMap] = []
        for access in self.ACCESS:
            results: list[AffineExpr] = []
            for term in filter(None, (t.strip() for t in access.split(","))):
                if "+" in term:
                    outer, inner = term.split("+")
                    stride, dilation = next(steps)
                    results.append(dims[outer] * stride + dims[inner] * dilation)
                else:
                    results.append(dims[term])
            maps.append(AffineMap(len(loops), 0, tuple(results)))
        return maps

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        parallel = set(self.ACCESS[-1].replace(",", " ").split())
        return ArrayAttr(
            IteratorTypeAttr.parallel() if loop in parallel else IteratorTypeAttr.reduction()
            for loop in self.LOOPS.split()
        )

    def verify_(self) -> None:
        rank = self.spatial_rank()
        for name, attr in (("strides", self.strides), ("dilations", self.dilations)):
            if attr is None:
                continue
            values = attr.get_values()
            if len(values) != rank or not isinstance(attr.get_element_type(), IntegerType):
                raise VerifyException(
                    f"'{self.name}' op attribute '{name}' must hold {rank} 64-bit integers"
                )
        super().verify_()


# The windowed ops xDSL 0.74 has, each with the body it gets wrong.
_XDSL_WRONG_BODY = {
    "linalg.pooling_nchw_max": "the maximum of the input and the window operand (MLIR: of "
    "the output and the input)",
    **{
        f"linalg.conv_2d_{layout}": "`mul + out` (MLIR: `out + mul`)"
        for layout in (
            "nchw_fchw",
            "nhwgc_gfhwc",
            "nhwc_hwcf",
            "ngchw_gfchw",
            "ngchw_fgchw",
            "nhwc_fhwc",
        )
    },
}


def _windowed(name: str, loops: str, access: tuple[str, ...], body: str) -> type[_Windowed]:
    wrong = _XDSL_WRONG_BODY.get(name)
    attributes = {
        "__doc__": (
            f"xDSL 0.74 requires strides and dilations, and its body computes {wrong}."
            if wrong
            else "xDSL 0.74 lacks this op."
        ),
        "name": name,
        "LOOPS": loops,
        "ACCESS": access,
        "BODY": body,
        "__module__": __name__,
        "__annotations__": {
            "LOOPS": ClassVar[str],
            "ACCESS": ClassVar[tuple],
            "BODY": ClassVar[str],
        },
    }
    class_name = "".join(part.title() for part in name.split(".")[1].split("_")) + "Op"
    return irdl_op_definition(type(class_name, (_Windowed,), attributes))


# (name, loops, accesses of input, filter or window (and zero points), output)
_CONV_2D_NGCHW = "n g f oh ow c kh kw"
_CONVOLUTIONS: list[tuple[str, str, tuple[str, ...]]] = [
    ("conv_1d_nwc_wcf", "n ow f kw c", ("n, ow+kw, c", "kw, c, f", "n, ow, f")),
    ("conv_1d_ncw_fcw", "n f ow c kw", ("n, c, ow+kw", "f, c, kw", "n, f, ow")),
    (
        "conv_2d_nhwc_hwcf",
        "n oh ow f kh kw c",
        ("n, oh+kh, ow+kw, c", "kh, kw, c, f", "n, oh, ow, f"),
    ),
    (
        "conv_2d_nhwc_fhwc",
        "n oh ow f kh kw c",
        ("n, oh+kh, ow+kw, c", "f, kh, kw, c", "n, oh, ow, f"),
    ),
    (
        "conv_2d_nchw_fchw",
        "n f oh ow c kh kw",
        ("n, c, oh+kh, ow+kw", "f, c, kh, kw", "n, f, oh, ow"),
    ),
    (
        "conv_2d_ngchw_fgchw",
        _CONV_2D_NGCHW,
        ("n, g, c, oh+kh, ow+kw", "f, g, c, kh, kw", "n, g, f, oh, ow"),
    ),
    (
        "conv_2d_ngchw_gfchw",
        _CONV_2D_NGCHW,
        ("n, g, c, oh+kh, ow+kw", "g, f, c, kh, kw", "n, g, f, oh, ow"),
    ),
    (
        "conv_2d_nhwgc_gfhwc",
        "n oh ow g f kh kw c",
        ("n, oh+kh, ow+kw, g, c", "g, f, kh, kw, c", "n, oh, ow, g, f"),
    ),
    (
        "conv_3d_ndhwc_dhwcf",
        "n od oh ow f kd kh kw c",
        ("n, od+kd, oh+kh, ow+kw, c", "kd, kh, kw, c, f", "n, od, oh, ow, f"),
    ),
    (
        "conv_3d_ncdhw_fcdhw",
        "n f od oh ow c kd kh kw",
        ("n, c, od+kd, oh+kh, ow+kw", "f, c, kd, kh, kw", "n, f, od, oh, ow"),
    ),
    ("depthwise_conv_1d_nwc_wc", "n ow ic kw", ("n, ow+kw, ic", "kw, ic", "n, ow, ic")),
    ("depthwise_conv_1d_ncw_cw", "n ow ic kw", ("n, ic, ow+kw", "ic, kw", "n, ic, ow")),
    (
        "depthwise_conv_1d_nwc_wcm",
        "n ow ic cm kw",
        ("n, ow+kw, ic", "kw, ic, cm", "n, ow, ic, cm"),
    ),
    (
        "depthwise_conv_2d_nhwc_hwc",
        "n oh ow ic kh kw",
        ("n, oh+kh, ow+kw, ic", "kh, kw, ic", "n, oh, ow, ic"),
    ),
    (
        "depthwise_conv_2d_nchw_chw",
        "n oh ow ic kh kw",
        ("n, ic, oh+kh, ow+kw", "ic, kh, kw", "n, ic, oh, ow"),
    ),
    (
        "depthwise_conv_2d_nhwc_hwcm",
        "n oh ow ic cm kh kw",
        ("n, oh+kh, ow+kw, ic", "kh, kw, ic, cm", "n, oh, ow, ic, cm"),
    ),
    (
        "depthwise_conv_3d_ndhwc_dhwc",
        "n od oh ow kd kh kw ic",
        ("n, od+kd, oh+kh, ow+kw, ic", "kd, kh, kw, ic", "n, od, oh, ow, ic"),
    ),
    (
        "depthwise_conv_3d_ncdhw_cdhw",
        "n od oh ow kd kh kw ic",
        ("n, ic, od+kd, oh+kh, ow+kw", "ic, kd, kh, kw", "n, ic, od, oh, ow"),
    ),
    (
        "depthwise_conv_3d_ndhwc_dhwcm",
        "n od oh ow cm kd kh kw ic",
        ("n, od+kd, oh+kh, ow+kw, ic", "kd, kh, kw, ic, cm", "n, od, oh, ow, ic, cm"),
    ),
]

# Convolutions with zero points: the two scalars follow the input and the filter.
_QUANTIZED = ["conv_2d_ngchw_gfchw", "conv_2d_nhwc_hwcf", "conv_2d_nhwc_fhwc"]
_QUANTIZED_DEPTHWISE = ["depthwise_conv_2d_nhwc_hwc", "depthwise_conv_2d_nhwc_hwcm"]

_POOLING_LAYOUTS: list[tuple[str, str, tuple[str, ...], list[str]]] = [
    (
        "nhwc",
        "n oh ow c kh kw",
        ("n, oh+kh, ow+kw, c", "kh, kw", "n, oh, ow, c"),
        ["sum", "max", "min", "max_unsigned", "min_unsigned"],
    ),
    ("nchw", "n c oh ow kh kw", ("n, c, oh+kh, ow+kw", "kh, kw", "n, c, oh, ow"), ["sum", "max"]),
    (
        "nwc",
        "n ow c kw",
        ("n, ow+kw, c", "kw", "n, ow, c"),
        ["sum", "max", "min", "max_unsigned", "min_unsigned"],
    ),
    ("ncw", "n c ow kw", ("n, c, ow+kw", "kw", "n, c, ow"), ["sum", "max"]),
    (
        "ndhwc",
        "n od oh ow c kd kh kw",
        ("n, od+kd, oh+kh, ow+kw, c", "kd, kh, kw", "n, od, oh, ow, c"),
        ["sum", "max", "min"],
    ),
]


def _windowed_ops() -> list[type[_Windowed]]:
    ops: list[type[_Windowed]] = []
    specs = {name: (loops, access) for name, loops, access in _CONVOLUTIONS}
    for name, (loops, access) in specs.items():
        ops.append(_windowed(f"linalg.{name}", loops, access, "mac"))
    for name in _QUANTIZED + _QUANTIZED_DEPTHWISE:
        loops, (image, filter_, out) = specs[name]
        ops.append(_windowed(f"linalg.{name}_q", loops, (image, filter_, "", "", out), "mac_q"))
    for layout, loops, access, kinds in _POOLING_LAYOUTS:
        for kind in kinds:
            ops.append(_windowed(f"linalg.pooling_{layout}_{kind}", loops, access, kind))
    return ops


_WINDOWED = _windowed_ops()


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
        return _multiply_accumulate(_element_types((*inputs, *outputs)))

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return self.MAPS

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        kinds = {"p": IteratorTypeAttr.parallel(), "r": IteratorTypeAttr.reduction()}
        return ArrayAttr(kinds[k] for k in self.ITERATORS)


class _MappedContraction(_Contraction):
    """A contraction whose maps the user may give: `indexing_maps = [...]` in front."""

    @classmethod
    def parse(cls, parser: Parser) -> "_MappedContraction":
        start = parser.pos
        maps = _parse_maps(parser)
        op = super().parse(parser)
        assert isinstance(op, _MappedContraction)
        if maps is not None:
            op.properties["indexing_maps"] = maps
        elif "indexing_maps" not in op.properties and cls.MAPS is None:
            parser.raise_error(f"{cls.name} needs `indexing_maps = [...]`", start, parser.pos)
        _cast_inputs(op)
        return op

    def user_maps(self) -> ArrayAttr[AffineMapAttr]:
        maps = self.properties.get("indexing_maps")
        if maps is None:
            maps = type(self).get_irdl_definition().properties["indexing_maps"].default_value
        assert isa(maps, ArrayAttr[AffineMapAttr])
        return maps

    def print(self, printer: Printer) -> None:
        _print_maps(self, self.user_maps(), printer)
        super().print(printer)

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return tuple(m.data for m in self.user_maps().data)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        return self.user_maps()


_BATCH_MATMUL_MAPS = _maps(4, lambda b, i, j, k: ((b, i, k), (b, k, j), (b, i, j)))
_BATCH_REDUCE_MATMUL_MAPS = _maps(4, lambda b, i, j, k: ((b, i, k), (b, k, j), (i, j)))


def _default_maps(maps: list[AffineMap]) -> ArrayAttr[AffineMapAttr]:
    return ArrayAttr(AffineMapAttr(m) for m in maps)


@irdl_op_definition
class BatchMatmulOp(_MappedContraction):
    """`linalg.batch_matmul (indexing_maps = [maps])? ins(a, b) outs(c)`: one matmul per
    leading index. xDSL 0.74 lacks this op."""

    name = "linalg.batch_matmul"

    indexing_maps = prop_def(
        ArrayAttr[AffineMapAttr], default_value=_default_maps(_BATCH_MATMUL_MAPS)
    )
    cast = opt_prop_def(TypeFnAttr)
    MAPS: ClassVar[list[AffineMap]] = _BATCH_MATMUL_MAPS
    ITERATORS: ClassVar[str] = "pppr"


@irdl_op_definition
class BatchReduceMatmulOp(_MappedContraction):
    """`linalg.batch_reduce_matmul`: the sum of the matmuls of a batch. xDSL 0.74 lacks this op."""

    name = "linalg.batch_reduce_matmul"

    indexing_maps = prop_def(
        ArrayAttr[AffineMapAttr], default_value=_default_maps(_BATCH_REDUCE_MATMUL_MAPS)
    )
    # MLIR 22 has the property but its body ignores it (inputs always signed), as here.
    cast = opt_prop_def(TypeFnAttr)
    SIGNED_ALWAYS: ClassVar[bool] = True
    MAPS: ClassVar[list[AffineMap]] = _BATCH_REDUCE_MATMUL_MAPS
    ITERATORS: ClassVar[str] = "rppr"


@irdl_op_definition
class ContractOp(_MappedContraction):
    """`linalg.contract indexing_maps = [...] ins(a, b) outs(c)`: loops that index the
    output are parallel, the others reductions. xDSL 0.74 lacks this op."""

    name = "linalg.contract"

    indexing_maps = prop_def(ArrayAttr[AffineMapAttr])
    cast = opt_prop_def(TypeFnAttr)
    MAPS: ClassVar[list[AffineMap] | None] = None  # pyright: ignore[reportIncompatibleVariableOverride]

    def print(self, printer: Printer) -> None:
        printer.print_string(" indexing_maps = ")
        printer.print_attribute(self.user_maps())
        _Contraction.print(self, printer)

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        maps = self.get_default_indexing_maps()
        parallel = {r.position for r in maps[-1].results if isinstance(r, AffineDimExpr)}
        return ArrayAttr(
            IteratorTypeAttr.parallel() if d in parallel else IteratorTypeAttr.reduction()
            for d in range(maps[-1].num_dims)
        )


@irdl_op_definition
class MatvecOp(_Contraction):
    """xDSL 0.74 lacks this op."""

    name = "linalg.matvec"
    MAPS: ClassVar[list[AffineMap]] = _maps(2, lambda i, k: ((i, k), (k,), (i,)))
    ITERATORS: ClassVar[str] = "pr"


@irdl_op_definition
class VecmatOp(_Contraction):
    """xDSL 0.74 lacks this op."""

    name = "linalg.vecmat"
    MAPS: ClassVar[list[AffineMap]] = _maps(2, lambda j, k: ((k,), (k, j), (j,)))
    ITERATORS: ClassVar[str] = "pr"


@irdl_op_definition
class BatchMatvecOp(_Contraction):
    """xDSL 0.74 lacks this op."""

    name = "linalg.batch_matvec"
    MAPS: ClassVar[list[AffineMap]] = _maps(3, lambda b, i, k: ((b, i, k), (b, k), (b, i)))
    ITERATORS: ClassVar[str] = "ppr"


@irdl_op_definition
class DotOp(_Contraction):
    """xDSL 0.74 lacks this op."""

    name = "linalg.dot"
    MAPS: ClassVar[list[AffineMap]] = _maps(1, lambda k: ((k,), (k,), ()))
    ITERATORS: ClassVar[str] = "r"


@irdl_op_definition
class DivOp(ElementwiseOperation):
    """`linalg.div ins(a, b) outs(c)`: elementwise `a / b` (signed for integers). xDSL 0.74
    lacks this op."""

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

    def verify_(self) -> None:
        super().verify_()
        _check_no_conversion(self)


@redefine(properties=_CAST)
class MatmulOp(linalg_ops.MatmulOp):
    """`linalg.matmul (indexing_maps = [maps])? attr-dict ins(...) outs(...) (-> types)?`.
    xDSL 0.74 fails on `indexing_maps`, and its body adds `mul + out` (MLIR: `out + mul`);
    it lacks the `cast` property (`{cast = #linalg.type_fn<cast_unsigned>}`)."""

    @classmethod
    def parse(cls, parser: Parser) -> "MatmulOp":
        maps = _parse_maps(parser)
        op = super().parse(parser)
        assert isinstance(op, MatmulOp)
        _require_operands(parser, cls.name, len(op.inputs), len(op.outputs))
        if maps is not None:
            op.properties["indexing_maps"] = maps
        _cast_inputs(op)
        return op

    def print(self, printer: Printer) -> None:
        _print_maps(self, self.indexing_maps, printer)
        super().print(printer)

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return _multiply_accumulate(_element_types((*inputs, *outputs)))


# --- Elementwise ops xDSL 0.74 lacks ---


def _unary_math(op: type[Operation]) -> Callable[[list[Operation], list[SSAValue]], SSAValue]:
    def build(ops: list[Operation], args: list[SSAValue]) -> SSAValue:
        ops.append(made := op(args[0]))  # pyright: ignore[reportCallIssue]
        return made.results[0]

    return build


def _binary(op: type[Operation]) -> Callable[[list[Operation], list[SSAValue]], SSAValue]:
    def build(ops: list[Operation], args: list[SSAValue]) -> SSAValue:
        ops.append(made := op(args[0], args[1]))  # pyright: ignore[reportCallIssue]
        return made.results[0]

    return build


def _reciprocal(ops: list[Operation], args: list[SSAValue]) -> SSAValue:
    element = args[0].type
    assert isa(element, AnyFloat)
    one = arith.ConstantOp(FloatAttr(1.0, element))
    quotient = arith.DivfOp(one, args[0])
    ops.extend([one, quotient])
    return quotient.result


def _square(ops: list[Operation], args: list[SSAValue]) -> SSAValue:
    product = arith.MulfOp(args[0], args[0])
    ops.append(product)
    return product.result


# name: (number of inputs, element kind the body needs, body)
_ELEMENTWISE: dict[str, tuple[int, str, Callable[[list[Operation], list[SSAValue]], SSAValue]]] = {
    "abs": (1, "float", _unary_math(math.AbsFOp)),
    "ceil": (1, "float", _unary_math(math.CeilOp)),
    "floor": (1, "float", _unary_math(math.FloorOp)),
    "negf": (1, "float", _unary_math(arith.NegfOp)),
    "reciprocal": (1, "float", _reciprocal),
    "round": (1, "float", _unary_math(math.RoundOp)),
    "rsqrt": (1, "float", _unary_math(math.RsqrtOp)),
    "square": (1, "float", _square),
    "tanh": (1, "float", _unary_math(math.TanhOp)),
    "erf": (1, "float", _unary_math(math.ErfOp)),
    "powf": (2, "float", _binary(math.PowFOp)),
    "div_unsigned": (2, "integer", _binary(arith.DivUIOp)),
}


class _Elementwise(ElementwiseOperation):
    """An elementwise op whose body `_ELEMENTWISE` gives by name."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True

    @classmethod
    def parse(cls, parser: Parser) -> "_Elementwise":
        start = parser.pos
        arity, kind, _ = _ELEMENTWISE[cls.name.split(".")[1]]
        op = super().parse(parser)
        assert isinstance(op, _Elementwise)
        if len(op.inputs) != arity or len(op.outputs) != 1:
            parser.raise_error(f"{cls.name} takes {arity} inputs and one output", start, parser.pos)
        if not op.body.blocks:
            parser.raise_error(f"{cls.name} needs {kind} elements", start, parser.pos)
        return op

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arity, kind, build = _ELEMENTWISE[cls.name.split(".")[1]]
        arg_types = _element_types((*inputs, *outputs))
        if kind == "float":
            fits = all(isa(t, AnyFloat) for t in arg_types)
        else:
            fits = all(isinstance(t, IntegerType) for t in arg_types)
        if len(arg_types) != arity + 1 or not fits:
            return Region()
        return _body(arg_types, lambda block, ops: build(ops, list(block.args)))

    def verify_(self) -> None:
        super().verify_()
        _check_no_conversion(self)


_LACKS = "xDSL 0.74 lacks this op."


def _elementwise(name: str) -> type[_Elementwise]:
    class_name = "".join(part.title() for part in name.split("_")) + "Op"
    return irdl_op_definition(
        type(
            class_name,
            (_Elementwise,),
            {"__doc__": _LACKS, "name": f"linalg.{name}", "__module__": __name__},
        )
    )


_ELEMENTWISE_OPS = [_elementwise(name) for name in _ELEMENTWISE]


def _check_no_conversion(op: NamedOperation, conditions: int = 0) -> None:
    """The elementwise named ops (`linalg.add`, `exp`, `div`, ...) convert no element type:
    MLIR 22 builds their bodies without casts and stopped the native build at no line
    (`'linalg.yield' op type of yield operand 1 ('f64') doesn't match the element type of
    the enclosing linalg.generic op ('f32')`), while the interpreter converted on the
    store. `conditions`: leading inputs of their own type (`linalg.select`'s i1)."""
    types = _element_types([*op.inputs[conditions:], *op.outputs])
    if len(set(types)) > 1:
        raise VerifyException(
            f"'{op.name}' op takes elements of one type, got {', '.join(map(str, types))}: "
            "it converts none, as in MLIR 22; convert first with linalg.copy (which casts) "
            "or write a linalg.generic"
        )


def _counted(base: type[NamedOperation], inputs: int) -> type[NamedOperation]:
    """xDSL's `base`, refusing at its line any operands but `inputs` inputs and one output.
    xDSL 0.74 builds the body from the operands' types: with too few inputs it failed
    (an IndexError: `linalg.max outs(%b ...)`), or made a body that the interpreter ran
    as nothing (`linalg.exp outs(%b ...)` left %b as it was)."""

    def parse(cls: type[NamedOperation], parser: Parser) -> NamedOperation:
        start = parser.pos
        op = super(counted, cls).parse(parser)  # pyright: ignore[reportArgumentType]
        if len(op.inputs) != inputs or len(op.outputs) != 1:
            plural = "s" if inputs != 1 else ""
            message = f"{cls.name} takes {inputs} input{plural} and one output"
            parser.raise_error(message, start, parser.pos)
        return op

    def get_hidden_region(
        cls: type[NamedOperation], ins: Sequence[SSAValue], outs: Sequence[SSAValue]
    ) -> Region:
        if len(ins) != inputs or len(outs) != 1:
            return Region()  # refused by parse
        return super(counted, cls).get_hidden_region(ins, outs)  # pyright: ignore[reportArgumentType]

    def verify_(self: NamedOperation) -> None:
        super(counted, self).verify_()  # pyright: ignore[reportArgumentType]
        if base is not linalg_ops.CopyOp:  # which casts, as MLIR's does
            _check_no_conversion(self, 1 if base is linalg_ops.SelectOp else 0)

    body = {
        "parse": classmethod(parse),
        "get_hidden_region": classmethod(get_hidden_region),
        "verify_": verify_,
        "__doc__": f"{base.__doc__ or base.name}\n\nxDSL 0.74 reads it with any count of "
        "operands, failing (an IndexError) or building a body that does nothing.",
        "__module__": __name__,
    }
    counted = type(base.__name__, (base,), body)
    return counted


# xDSL's elementwise ops, by their inputs (linalg.fill's count is FillOp's).
_COUNTED = [
    _counted(op, inputs)
    for op, inputs in (
        (linalg_ops.AddOp, 2),
        (linalg_ops.SubOp, 2),
        (linalg_ops.MulOp, 2),
        (linalg_ops.MaxOp, 2),
        (linalg_ops.MinOp, 2),
        (linalg_ops.ExpOp, 1),
        (linalg_ops.LogOp, 1),
        (linalg_ops.SqrtOp, 1),
        (linalg_ops.CopyOp, 1),
        (linalg_ops.SelectOp, 3),
    )
]


class FillOp(linalg_ops.FillOp):
    """`linalg.fill`, also of vectors (a tensor of vectors filled with one vector). xDSL 0.74
    fails on fills of vectors (an assertion), and read one without its value as a fill
    that the interpreter ran as nothing."""

    @classmethod
    def parse(cls, parser: Parser) -> "FillOp":
        start = parser.pos
        op = super().parse(parser)
        assert isinstance(op, FillOp)
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            parser.raise_error(f"{cls.name} takes 1 input and one output", start, parser.pos)
        return op

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        arg_types = _element_types((*inputs, *outputs))
        if len(arg_types) != 2:
            return Region()
        block = Block(arg_types=arg_types)
        block.add_op(linalg_ops.YieldOp(block.args[0]))
        return Region(block)

    def verify_(self) -> None:
        outputs = _element_types(self.outputs)
        for value in self.inputs:
            if isinstance(value.type, ShapedType) and not isinstance(value.type, VectorType):
                raise VerifyException(f"'linalg.fill' op fills with a scalar, not {value.type}")
            if outputs and value.type != outputs[0]:
                raise VerifyException(
                    f"'linalg.fill' op expected fill value type ({value.type}) to match "
                    f"output element type ({outputs[0]})"
                )


# --- Contractions with maps given by the op or by the user ---


@irdl_op_definition
class Mmt4dOp(_Contraction):
    """`linalg.mmt4d`: a matmul of tiled operands, the right-hand side transposed. xDSL 0.74
    lacks this op."""

    name = "linalg.mmt4d"
    MAPS: ClassVar[list[AffineMap]] = _maps(
        6, lambda m, n, k, m0, n0, k0: ((m, k, m0, k0), (n, k, n0, k0), (m, n, m0, n0))
    )
    ITERATORS: ClassVar[str] = "pprppr"


@irdl_op_definition
class BatchMmt4dOp(_Contraction):
    """xDSL 0.74 lacks this op."""

    name = "linalg.batch_mmt4d"
    MAPS: ClassVar[list[AffineMap]] = _maps(
        7,
        lambda b, m, n, k, m0, n0, k0: (
            (b, m, k, m0, k0),
            (b, n, k, n0, k0),
            (b, m, n, m0, n0),
        ),
    )
    ITERATORS: ClassVar[str] = "ppprppr"


# --- linalg.pack and linalg.unpack: relayouts between a tensor and its tiles ---


def _parse_int_list(parser: Parser) -> DenseArrayBase[IntegerType]:
    values = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer)
    return DenseArrayBase.from_list(i64, values)


def _print_int_list(printer: Printer, values: DenseArrayBase[IntegerType]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values.get_values()) + "]")


class _Relayout(IRDLOperation):
    """`linalg.pack` and `linalg.unpack`, on tensors only (as in MLIR 22): not structured
    ops, so dhir's effect analysis takes them to read and write all their operands
    reach."""

    PADDING: ClassVar[bool] = False

    def parts(self) -> tuple[SSAValue, SSAValue, SSAValue | None, Sequence[SSAValue]]:
        """Source, destination, padding value and dynamic tile sizes."""
        raise NotImplementedError

    def array(self, name: str) -> DenseArrayBase[IntegerType] | None:
        value = self.properties.get(name)
        assert value is None or isa(value, DenseArrayBase[IntegerType])
        return value

    @classmethod
    def parse(cls, parser: Parser) -> "_Relayout":
        source = parser.parse_unresolved_operand()
        padding: tuple[UnresolvedOperand, Attribute] | None = None
        if cls.PADDING and parser.parse_optional_keyword("padding_value"):
            parser.parse_punctuation("(")
            value = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            padding = (value, parser.parse_type())
            parser.parse_punctuation(")")
        properties: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("outer_dims_perm"):
            parser.parse_punctuation("=")
            properties["outer_dims_perm"] = _parse_int_list(parser)
        parser.parse_keyword("inner_dims_pos")
        parser.parse_punctuation("=")
        properties["inner_dims_pos"] = _parse_int_list(parser)
        parser.parse_keyword("inner_tiles")
        parser.parse_punctuation("=")
        tiles, static = parse_dynamic_index_list_without_types(parser, DYNAMIC_INDEX)
        properties["static_inner_tiles"] = DenseArrayBase.from_list(i64, static)
        parser.parse_keyword("into")
        dest = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        source_type = parser.parse_type()
        parser.parse_punctuation("->")
        dest_type = parser.parse_type()
        if not isinstance(source_type, TensorType) or not isinstance(dest_type, TensorType):
            parser.raise_error(f"{cls.name} works on ranked tensors", pos, parser.pos)
        operands: list[SSAValue | list[SSAValue]] = [
            parser.resolve_operand(source, source_type),
            parser.resolve_operand(dest, dest_type),
        ]
        if cls.PADDING:
            operands.append([parser.resolve_operand(*padding)] if padding else [])
        operands.append([parser.resolve_operand(t, IndexType()) for t in tiles])
        return cls.build(
            operands=operands,
            result_types=[dest_type],
            properties=properties,
            attributes=attributes,
        )

    def print(self, printer: Printer) -> None:
        source, dest, padding, tiles = self.parts()
        printer.print_string(" ")
        printer.print_ssa_value(source)
        if padding is not None:
            printer.print_string(" padding_value(")
            printer.print_ssa_value(padding)
            printer.print_string(" : ")
            printer.print_attribute(padding.type)
            printer.print_string(")")
        for name in ("outer_dims_perm", "inner_dims_pos"):
            if (values := self.array(name)) is not None:
                printer.print_string(f" {name} = ")
                _print_int_list(printer, values)
        printer.print_string(" inner_tiles = ")
        static = self.array("static_inner_tiles")
        sizes = static.get_values() if static is not None else ()
        print_dynamic_index_list(printer, DYNAMIC_INDEX, tiles, sizes)
        printer.print_string(" into ")
        printer.print_ssa_value(dest)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(source.type)
        printer.print_string(" -> ")
        printer.print_attribute(dest.type)


@irdl_op_definition
class PackOp(_Relayout):
    """`linalg.pack %src (padding_value(%p : t))? (outer_dims_perm = [..])?
    inner_dims_pos = [..] inner_tiles = [..] into %dest attr-dict : type -> type`.
    xDSL 0.74 lacks this op."""

    name = "linalg.pack"
    PADDING: ClassVar[bool] = True

    source = operand_def(TensorType)
    dest = operand_def(TensorType)
    padding_value = opt_operand_def()
    inner_tiles = var_operand_def(IndexType())
    result = result_def(TensorType)
    inner_dims_pos = prop_def(DenseArrayBase.constr(i64))
    outer_dims_perm = opt_prop_def(DenseArrayBase.constr(i64))
    static_inner_tiles = prop_def(DenseArrayBase.constr(i64))
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def parts(self) -> tuple[SSAValue, SSAValue, SSAValue | None, Sequence[SSAValue]]:
        return self.source, self.dest, self.padding_value, self.inner_tiles


@irdl_op_definition
class UnpackOp(_Relayout):
    """`linalg.unpack %src (outer_dims_perm = [..])? inner_dims_pos = [..]
    inner_tiles = [..] into %dest attr-dict : type -> type`. xDSL 0.74 lacks this op."""

    name = "linalg.unpack"

    source = operand_def(TensorType)
    dest = operand_def(TensorType)
    inner_tiles = var_operand_def(IndexType())
    result = result_def(TensorType)
    inner_dims_pos = prop_def(DenseArrayBase.constr(i64))
    outer_dims_perm = opt_prop_def(DenseArrayBase.constr(i64))
    static_inner_tiles = prop_def(DenseArrayBase.constr(i64))

    def parts(self) -> tuple[SSAValue, SSAValue, SSAValue | None, Sequence[SSAValue]]:
        return self.source, self.dest, None, self.inner_tiles


class GenericOp(linalg_ops.GenericOp):
    """`linalg.generic {attr-dict} ins(...)? outs(...)? (attrs = {...})? region (-> types)?`.
    xDSL 0.74 reads several result types only bare (`-> T, U`) but prints them, as MLIR
    does, in parentheses (`-> (T, U)`): its own output did not read back. It also dropped attributes
    of the leading dictionary other than its four properties."""

    _PROPERTIES = ("indexing_maps", "iterator_types", "doc", "library_call")

    @classmethod
    def parse(cls, parser: Parser) -> "GenericOp":
        start = parser.pos
        attributes = parser.parse_optional_attr_dict()
        given = {name: attributes.pop(name) for name in cls._PROPERTIES if name in attributes}
        for name in cls._PROPERTIES[:2]:
            if name not in given:
                parser.raise_error(f"Expected {name} for linalg.generic", start, parser.pos)
        inputs, outputs = _operand_list(parser, "ins"), _operand_list(parser, "outs")
        if parser.parse_optional_keyword("attrs"):
            parser.parse_punctuation("=")
            attributes |= parser.expect(parser.parse_optional_attr_dict, "expected attributes")
        body = parser.parse_region()
        results: Sequence[Attribute] = ()
        if parser.parse_optional_punctuation("->"):
            bracketed = parser.parse_optional_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_type
            )
            # Bare (`-> T, U`) as xDSL reads them: programs written for it still read.
            results = bracketed or parser.parse_comma_separated_list(
                Parser.Delimiter.NONE, parser.parse_type
            )
        op = cls(
            inputs,
            outputs,
            body,
            _checked(parser, given["indexing_maps"], AffineMapAttr, start),
            [
                _iterator(parser, kind, start)
                for kind in _checked(parser, given["iterator_types"], Attribute, start)
            ],
            results,
            _optional_string(parser, given.get("doc"), start),
            _optional_string(parser, given.get("library_call"), start),
        )
        op.attributes |= attributes
        return op


_A = TypeVar("_A", bound=Attribute)


def _operand_list(parser: Parser, keyword: str) -> list[SSAValue]:
    """`keyword(%a, %b : T, U)`, or nothing."""
    pos = parser.pos
    if not parser.parse_optional_characters(keyword):
        return []
    parser.parse_punctuation("(")
    names = parser.parse_comma_separated_list(
        Parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    return list(parser.resolve_operands(names, types, pos))


def _checked(parser: Parser, value: Attribute, kind: type[_A], start: int) -> list[_A]:
    if not isinstance(value, ArrayAttr) or not all(isinstance(v, kind) for v in value):
        parser.raise_error(f"linalg.generic: expected an array, got {value}", start, parser.pos)
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


def _iterator(parser: Parser, kind: Attribute, start: int) -> IteratorTypeAttr:
    if isinstance(kind, IteratorTypeAttr):
        return kind
    if not isinstance(kind, StringAttr) or kind.data not in {t.value for t in IteratorType}:
        parser.raise_error(f"Unknown iterator type {kind}", start, parser.pos)
    return IteratorTypeAttr(IteratorType(kind.data))


def _optional_string(parser: Parser, value: Attribute | None, start: int) -> StringAttr | None:
    if value is not None and not isinstance(value, StringAttr):
        parser.raise_error(f"linalg.generic: expected a string, got {value}", start, parser.pos)
    return value


# --- linalg.elementwise: one op of MLIR 22 for the elementwise kinds ---


class ElementwiseKind(StrEnum):
    EXP = "exp"
    LOG = "log"
    ABS = "abs"
    CEIL = "ceil"
    FLOOR = "floor"
    NEGF = "negf"
    RECIPROCAL = "reciprocal"
    ROUND = "round"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SQUARE = "square"
    TANH = "tanh"
    ERF = "erf"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    DIV_UNSIGNED = "div_unsigned"
    MAX_SIGNED = "max_signed"
    MIN_SIGNED = "min_signed"
    MAX_UNSIGNED = "max_unsigned"
    MIN_UNSIGNED = "min_unsigned"
    POWF = "powf"
    SELECT = "select"


@irdl_attr_definition
class ElementwiseKindAttr(AngleBracketEnum, EnumAttribute[ElementwiseKind]):
    """`#linalg.elementwise_kind<add>`. xDSL 0.74 lacks this attribute."""

    name = "linalg.elementwise_kind"


_Build = Callable[[list[Operation], list[SSAValue]], SSAValue]


def _float_or_int(float_op: type[Operation], int_op: type[Operation] | None) -> _Build:
    def build(ops: list[Operation], args: list[SSAValue]) -> SSAValue:
        if isa(args[-1].type, AnyFloat):
            return _binary(float_op)(ops, args)
        assert int_op is not None
        return _binary(int_op)(ops, args)

    return build


def _select(ops: list[Operation], args: list[SSAValue]) -> SSAValue:
    ops.append(made := dhir_arith.SelectOp(args[0], args[1], args[2]))
    return made.result


# kind: (number of inputs, elements it takes: float, integer or any, body), the bodies
# mlir-opt-22 makes (its generic form shows them). MLIR 22 crashes on the float-only
# kinds of integers (exp, log, round, square, erf) and of floats for the unsigned ones.
_KINDS: dict[str, tuple[int, str, _Build]] = {
    **{name: spec for name, spec in _ELEMENTWISE.items() if name in ("abs", "ceil", "floor")},
    "exp": (1, "float", _unary_math(math.ExpOp)),
    "log": (1, "float", _unary_math(math.LogOp)),
    "negf": _ELEMENTWISE["negf"],
    "reciprocal": _ELEMENTWISE["reciprocal"],
    "round": _ELEMENTWISE["round"],
    "sqrt": (1, "float", _unary_math(math.SqrtOp)),
    "rsqrt": _ELEMENTWISE["rsqrt"],
    "square": _ELEMENTWISE["square"],
    "tanh": _ELEMENTWISE["tanh"],
    "erf": _ELEMENTWISE["erf"],
    "add": (2, "any", _float_or_int(arith.AddfOp, arith.AddiOp)),
    "sub": (2, "any", _float_or_int(arith.SubfOp, arith.SubiOp)),
    "mul": (2, "any", _float_or_int(arith.MulfOp, arith.MuliOp)),
    "div": (2, "any", _float_or_int(arith.DivfOp, arith.DivSIOp)),
    "div_unsigned": (2, "integer", _binary(arith.DivUIOp)),
    "max_signed": (2, "any", _float_or_int(arith.MaximumfOp, arith.MaxSIOp)),
    "min_signed": (2, "any", _float_or_int(arith.MinimumfOp, arith.MinSIOp)),
    "max_unsigned": (2, "integer", _binary(arith.MaxUIOp)),
    "min_unsigned": (2, "integer", _binary(arith.MinUIOp)),
    "powf": (2, "float", _binary(math.PowFOp)),
    "select": (3, "any", _select),
}


def _elementwise_body(kind: str, operands: Sequence[SSAValue]) -> tuple[Region, str | None]:
    """The body of `linalg.elementwise` of `kind` on `operands` (inputs, then the
    output), or an empty region and what is wrong."""
    arity, elements, build = _KINDS[kind]
    if len(operands) != arity + 1:
        return Region(), f"takes {arity} input{'s' * (arity > 1)} and one output"
    types = _element_types(operands)
    values = types[1:] if kind == "select" else types
    if kind == "select" and types[0] != IntegerType(1):
        return Region(), f"selects by an i1 condition, not {types[0]}"
    if any(t != values[-1] for t in values):
        return Region(), (
            f"takes elements of one type, the output's ({values[-1]}); got "
            f"{', '.join(map(str, types))} (convert them with linalg.map or linalg.generic)"
        )
    fits = {"float": isa(values[-1], AnyFloat), "integer": isinstance(values[-1], IntegerType)}
    if not fits.get(elements, isa(values[-1], AnyFloat) or isinstance(values[-1], IntegerType)):
        return Region(), f"of kind {kind} needs {elements} elements, not {values[-1]}"
    return _body(types, lambda block, ops: build(ops, list(block.args[:arity]))), None


@irdl_op_definition
class ElementwiseOp(NamedOperation):
    """`linalg.elementwise kind=#linalg.elementwise_kind<K> (indexing_maps = [...])?
    attr-dict ins(...) outs(...) (-> type)?`: MLIR 22's one elementwise op, its body made
    from its kind, its maps the identity unless given (a broadcast input). xDSL 0.74 lacks
    this op and its attribute."""

    name = "linalg.elementwise"

    kind = prop_def(ElementwiseKindAttr)
    indexing_maps = prop_def(ArrayAttr[AffineMapAttr])

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        return Region()  # made from the kind, which this does not know

    @staticmethod
    def identity_maps(outputs: Sequence[SSAValue], count: int) -> ArrayAttr[AffineMapAttr]:
        out = outputs[0].type if outputs else None
        rank = len(out.get_shape()) if isinstance(out, ShapedType) else 0
        return ArrayAttr([AffineMapAttr(AffineMap.identity(rank))] * count)

    @classmethod
    def parse(cls, parser: Parser) -> "ElementwiseOp":
        start = parser.pos
        parser.parse_keyword("kind")
        parser.parse_punctuation("=")
        pos = parser.pos
        kind = parser.parse_attribute()
        if not isinstance(kind, ElementwiseKindAttr):
            parser.raise_error(
                "expected `#linalg.elementwise_kind<...>` after `kind=`", pos, parser.pos
            )
        maps = _parse_maps(parser)
        attributes = parser.parse_optional_attr_dict()
        inputs, outputs = _operand_list(parser, "ins"), _operand_list(parser, "outs")
        attributes |= parser.parse_optional_attr_dict()
        results: Sequence[Attribute] = ()
        if parser.parse_optional_punctuation("->"):
            results = parser.parse_optional_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_type
            ) or [parser.parse_type()]
        body, wrong = _elementwise_body(kind.data.value, [*inputs, *outputs])
        if wrong is not None:
            parser.raise_error(f"linalg.elementwise {wrong}", start, parser.pos)
        if maps is None:
            maps = cls.identity_maps(outputs, len(inputs) + len(outputs))
        return cls(
            inputs,
            outputs,
            results,
            properties={"kind": kind, "indexing_maps": maps},
            attributes=attributes,
            hidden_region=body,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" kind=")
        printer.print_attribute(self.kind)
        if self.indexing_maps != self.identity_maps(self.outputs, len(self.operands)):
            printer.print_string(" indexing_maps = ")
            printer.print_attribute(self.indexing_maps)
        printer.print_op_attributes(self.attributes)
        _print_operands(printer, "ins", self.inputs)
        _print_operands(printer, "outs", self.outputs)
        if self.res:
            printer.print_string(" -> ")
            printer.print_list([r.type for r in self.res], printer.print_attribute)

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return tuple(m.data for m in self.indexing_maps.data)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        return self.indexing_maps

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        loops = self.indexing_maps.data[0].data.num_dims if self.indexing_maps.data else 0
        return ArrayAttr([IteratorTypeAttr.parallel()] * loops)

    def verify_(self) -> None:
        _, wrong = _elementwise_body(self.kind.data.value, self.operands)
        if wrong is not None:
            raise VerifyException(f"'linalg.elementwise' op {wrong}")
        super().verify_()


# --- linalg.map and linalg.reduce: bodies the user writes, or one op named in braces ---


def _parse_payload(parser: Parser) -> tuple[str, dict[str, Attribute], int] | None:
    """MLIR's short form of a body, `{ dialect.op attr-dict }`, in front of `ins`."""
    pos = parser.pos
    if parser.parse_optional_punctuation("{") is None:
        return None
    name = parser.parse_identifier(" (the operation that makes the body)")
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation("}")
    return name, attributes, pos


def _payload_body(
    parser: Parser,
    payload: tuple[str, dict[str, Attribute], int],
    inputs: Sequence[SSAValue],
    outputs: Sequence[SSAValue],
    arguments: Callable[[Sequence[BlockArgument]], Sequence[SSAValue]],
) -> Region:
    """The body the short form stands for: one op applied to `arguments` of the block
    (which takes an element of each input and output), of the outputs' element types,
    its results yielded."""
    operands, results = [*inputs, *outputs], _element_types(outputs)
    name, attributes, pos = payload
    kind = parser.ctx.get_optional_op(name)
    if kind is None:
        parser.raise_error(f"unknown operation '{name}' as the body", pos, parser.pos)
    block = Block(arg_types=_element_types(operands))
    known = kind.get_irdl_definition().properties if issubclass(kind, IRDLOperation) else {}
    made = kind.create(
        operands=list(arguments(block.args)),
        result_types=list(results),
        properties={k: v for k, v in attributes.items() if k in known},
        attributes={k: v for k, v in attributes.items() if k not in known},
    )
    try:
        made.verify()
    except VerifyException as error:
        parser.raise_error(f"'{name}' as the body: {error}", pos, parser.pos)
    block.add_ops([made, linalg_ops.YieldOp(*made.results)])
    return Region(block)


def _payload_of(
    body: Region, arguments: Callable[[Sequence[BlockArgument]], Sequence[SSAValue]]
) -> Operation | None:
    """The op a body is, when the short form can show it as MLIR's printer does: the one
    op besides the yield, taking `arguments` of the block and yielding its results."""
    if len(body.blocks) != 1:
        return None
    block = body.block
    ops = list(block.ops)
    if len(ops) != 2 or ops[0].regions or not ops[0].operands:
        return None
    payload, end = ops
    if list(payload.operands) != list(arguments(block.args)):
        return None
    return payload if list(end.operands) == list(payload.results) else None


def _print_payload(printer: Printer, payload: Operation) -> None:
    attributes = payload.properties | payload.attributes
    if attributes.get("fastmath") == arith.FastMathFlagsAttr("none"):
        del attributes["fastmath"]
    printer.print_string(f" {{ {payload.name}")
    printer.print_op_attributes(attributes)
    printer.print_string(" }")


def _print_operands(printer: Printer, keyword: str, values: Sequence[SSAValue]) -> None:
    if not values:
        return
    printer.print_string(f" {keyword}(")
    printer.print_list(values, printer.print_ssa_value)
    printer.print_string(" : ")
    printer.print_list([v.type for v in values], printer.print_attribute)
    printer.print_string(")")


def _print_body(printer: Printer, body: Region) -> None:
    printer.print_string(" (")
    printer.print_list(body.block.args, printer.print_block_argument)
    printer.print_string(") ")
    printer.print_region(body, print_entry_block_args=False)


def _parse_body(parser: Parser) -> Region:
    arguments = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_argument)
    return parser.parse_region(arguments)


def _tensor_results(outputs: Sequence[SSAValue]) -> list[Attribute]:
    return [v.type for v in outputs if isinstance(v.type, TensorType)]


def _shape_text(type_: Attribute) -> str:
    shape = type_.get_shape() if isinstance(type_, ShapedType) else ()
    return "x".join("?" if d == DYNAMIC_INDEX else str(d) for d in shape)


def _identity_maps(op: Operation, count: int) -> ArrayAttr[AffineMapAttr]:
    init = op.operands[-1].type
    rank = len(init.get_shape()) if isinstance(init, ShapedType) else 0
    return ArrayAttr([AffineMapAttr(AffineMap.identity(rank))] * count)


@irdl_op_definition
class MapOp(IRDLOperation):
    """`linalg.map ({ op attr-dict })? ins(...)? outs(%init : T) attr-dict
    ((%in: t, ..., %init: t) region)?`: the body maps the elements of the inputs (and, in
    MLIR 22, of the init) at each index to the init's. xDSL 0.74 lacks this op.

    MLIR's operands are the inputs and one init, with no segment sizes in the generic
    form; a structured op of xDSL's has two variadic operand groups, which need them. So
    this op has its own operands, the queries of a structured op (`outputs`, indexing
    maps, loop ranges) and is registered as a virtual `LinalgStructuredOperation`: the
    analyses, the interpreter and the native build take it as one."""

    name = "linalg.map"

    inputs = var_operand_def(ShapedType)
    init = operand_def(ShapedType)
    res = var_result_def(TensorType)
    body = region_def("single_block")

    # A structured op's queries, xDSL's, over the maps and operands given here.
    get_num_loops = LinalgStructuredOperation.get_num_loops
    get_loops_to_shapes_map = LinalgStructuredOperation.get_loops_to_shapes_map
    get_shapes_to_loops_map = LinalgStructuredOperation.get_shapes_to_loops_map
    get_loop_bound_sources = LinalgStructuredOperation.get_loop_bound_sources
    get_static_shapes = LinalgStructuredOperation.get_static_shapes
    get_static_loop_ranges = LinalgStructuredOperation.get_static_loop_ranges

    @property
    def outputs(self) -> tuple[SSAValue, ...]:
        return (self.init,)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        return _identity_maps(self, len(self.operands))

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        init = self.init.type
        rank = len(init.get_shape()) if isinstance(init, ShapedType) else 0
        return ArrayAttr([IteratorTypeAttr.parallel()] * rank)

    @staticmethod
    def _payload_arguments(args: Sequence[BlockArgument]) -> Sequence[SSAValue]:
        return args[:-1]

    @classmethod
    def parse(cls, parser: Parser) -> "MapOp":
        start = parser.pos
        payload = _parse_payload(parser)
        inputs, outputs = _operand_list(parser, "ins"), _operand_list(parser, "outs")
        if len(outputs) != 1:
            parser.raise_error("linalg.map takes one init: `outs(%init : type)`", start, parser.pos)
        attributes = parser.parse_optional_attr_dict()
        if payload is None:
            body = _parse_body(parser)
        elif inputs:
            body = _payload_body(parser, payload, inputs, outputs, cls._payload_arguments)
        else:
            body = Region()  # as MLIR: refused by the verifier
        op = cls.build(
            operands=[inputs, outputs[0]],
            result_types=[_tensor_results(outputs)],
            regions=[body],
            attributes=attributes,
        )
        return op

    def print(self, printer: Printer) -> None:
        payload = _payload_of(self.body, self._payload_arguments)
        if payload is not None:
            _print_payload(printer, payload)
        _print_operands(printer, "ins", self.inputs)
        _print_operands(printer, "outs", self.outputs)
        printer.print_op_attributes(self.attributes)
        if payload is None:
            _print_body(printer, self.body)

    def verify_(self) -> None:
        if not self.body.blocks:
            raise VerifyException("'linalg.map' op needs a body")
        args = self.body.block.args
        if len(self.operands) != len(args):
            raise VerifyException(
                "'linalg.map' op expects number of operands to match the arity of mapper, "
                f"but got: {len(self.operands)} and {len(args)}"
            )
        for value, arg in zip(self.inputs, args):
            element = _element_types([value])[0]
            if element != arg.type:
                raise VerifyException(
                    f"'linalg.map' op expected element type of input '{element}' to match "
                    f"bbArg type '{arg.type}'"
                )
            if isinstance(value.type, ShapedType) and (
                value.type.get_shape() != cast(ShapedType, self.init.type).get_shape()
            ):
                raise VerifyException(
                    f"'linalg.map' op expected shape of input ({_shape_text(value.type)}) "
                    f"to match shape of output ({_shape_text(self.init.type)})"
                )
        if self.res and [r.type for r in self.res] != [self.init.type]:
            raise VerifyException("'linalg.map' op result type must be the init's type")
        LinalgStructuredOperation.verify_(cast(LinalgStructuredOperation, self))


LinalgStructuredOperation.register(MapOp)


@irdl_op_definition
class ReduceOp(LinalgStructuredOperation):
    """`linalg.reduce ({ op attr-dict })? ins(...) outs(...) dimensions = [..] attr-dict
    ((%in: t, ..., %init: t, ...) region)?`: the inits combined with every element of the
    inputs, the `dimensions` reduced. xDSL 0.74 reads one input and one init only
    ("Expected ':'" on more), not the short form, and insists that the init's element type
    be the input's (MLIR does not); nor is its op structured, so dhir's analyses took it as
    unknown. The generic form splits the operands in halves, as MLIR's does."""

    name = "linalg.reduce"

    inputs = var_operand_def(ShapedType)
    outputs = var_operand_def(ShapedType)
    res = var_result_def(TensorType)
    body = region_def("single_block")
    dimensions = prop_def(DenseArrayBase.constr(i64))

    irdl_options = (SameVariadicOperandSize(),)

    def _rank(self) -> int:
        first = self.inputs[0].type if self.inputs else None
        return len(first.get_shape()) if isinstance(first, ShapedType) else 0

    def reduced(self) -> tuple[int, ...]:
        return tuple(self.dimensions.get_values())

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        rank, reduced = self._rank(), set(self.reduced())
        kept = tuple(AffineExpr.dimension(d) for d in range(rank) if d not in reduced)
        into = AffineMapAttr(AffineMap(rank, 0, kept))
        identity = AffineMapAttr(AffineMap.identity(rank))
        return ArrayAttr([identity] * len(self.inputs) + [into] * len(self.outputs))

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        reduced = set(self.reduced())
        return ArrayAttr(
            IteratorTypeAttr.reduction() if d in reduced else IteratorTypeAttr.parallel()
            for d in range(self._rank())
        )

    @staticmethod
    def _payload_arguments(args: Sequence[BlockArgument]) -> Sequence[SSAValue]:
        # MLIR's short form combines the init with the input: `op %init, %in`.
        return [*args[1:], *args[:1]] if len(args) == 2 else ()

    @classmethod
    def parse(cls, parser: Parser) -> "ReduceOp":
        start = parser.pos
        payload = _parse_payload(parser)
        inputs, outputs = _operand_list(parser, "ins"), _operand_list(parser, "outs")
        if not inputs or len(inputs) != len(outputs):
            parser.raise_error(
                "linalg.reduce takes as many inits (`outs`) as inputs (`ins`), one or more",
                start,
                parser.pos,
            )
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dimensions = _parse_int_list(parser)
        attributes = parser.parse_optional_attr_dict()
        if payload is None:
            body = _parse_body(parser)
        elif len(inputs) == 1:
            body = _payload_body(parser, payload, inputs, outputs, cls._payload_arguments)
        else:
            parser.raise_error(
                "the short form `linalg.reduce { op }` takes one input and one init; "
                "write the body of several as a region",
                start,
                parser.pos,
            )
        return cls.build(
            operands=[inputs, outputs],
            result_types=[_tensor_results(outputs)],
            regions=[body],
            properties={"dimensions": dimensions},
            attributes=attributes,
        )

    def print(self, printer: Printer) -> None:
        payload = _payload_of(self.body, self._payload_arguments)
        if payload is not None:
            _print_payload(printer, payload)
        _print_operands(printer, "ins", self.inputs)
        _print_operands(printer, "outs", self.outputs)
        printer.print_string(" dimensions = ")
        _print_int_list(printer, self.dimensions)
        printer.print_op_attributes(self.attributes)
        if payload is None:
            _print_body(printer, self.body)

    def verify_(self) -> None:
        reduced = self.reduced()
        if list(reduced) != sorted(set(reduced)):
            raise VerifyException(
                "'linalg.reduce' op attribute 'dimensions' failed to satisfy constraint: "
                "i64 dense array attribute should be in increasing order"
            )
        self._verify_shapes(reduced)
        if not self.body.blocks or len(self.body.block.args) != len(self.operands):
            raise VerifyException(
                "'linalg.reduce' op mismatching number of operands and block arguments"
            )
        args = self.body.block.args
        for k, (value, arg) in enumerate(zip(self.operands, args)):
            element = _element_types([value])[0]
            if element != arg.type:
                side = "input" if k < len(self.inputs) else "output"
                raise VerifyException(
                    f"'linalg.reduce' op {side} element type '{element}' does not match "
                    f"corresponding block argument type '{arg.type}'"
                )
        super().verify_()

    def _verify_shapes(self, reduced: tuple[int, ...]) -> None:
        for side, values in (("inputs", self.inputs), ("outputs", self.outputs)):
            shapes = [cast(ShapedType, v.type).get_shape() for v in values]
            for k, shape in enumerate(shapes):
                if shape != shapes[0]:
                    raise VerifyException(
                        f"'linalg.reduce' op expects all {side} to have the same shapes. "
                        f"Shape at {side[:-1]}-index {k} is not equal to the shape at "
                        f"{side[:-1]}-index 0."
                    )
        shape = cast(ShapedType, self.inputs[0].type).get_shape()
        if any(not 0 <= d < len(shape) for d in reduced):
            raise VerifyException(
                "'linalg.reduce' op dimensions for reduction should be in the range "
                f"[0, {len(shape) - 1}]."
            )
        kept = [n for d, n in enumerate(shape) if d not in reduced]
        init = list(cast(ShapedType, self.outputs[0].type).get_shape())
        if kept != init:
            raise VerifyException(
                f"'linalg.reduce' op init dimensions [{', '.join(map(str, init))}] doesn't "
                f"match input dimensions after reduction [{', '.join(map(str, kept))}]"
            )


class _CheckedYieldOp(linalg_ops.YieldOp):
    """`linalg.yield` as written in a body: one value per output of the structured op it
    ends, of that output's element type. xDSL 0.74 checks neither (the interpreter then
    ran a body yielding two values for one output)."""

    def verify_(self) -> None:
        super().verify_()
        op = self.parent_op()
        if not isinstance(op, LinalgStructuredOperation):
            return
        wanted = [getattr(v.type, "element_type", v.type) for v in op.outputs]
        given = [v.type for v in self.operands]
        if given != wanted:
            raise VerifyException(
                f"'linalg.yield' yields ({', '.join(map(str, given))}) where '{op.name}' "
                f"has outputs of ({', '.join(map(str, wanted))})"
            )


@irdl_op_definition
class IndexOp(IRDLOperation):
    """`linalg.index DIM : index`, in the body of any structured op (MLIR: any op with the
    LinalgOp interface), of a dimension among its loops. xDSL 0.74 allows it in
    `linalg.generic` only (`linalg.map` and `linalg.reduce` may hold it too) and does not
    check the dimension."""

    name = "linalg.index"

    dim = prop_def(IntegerAttr[I64])
    result = result_def(IndexType())

    assembly_format = "$dim attr-dict `:` type($result)"

    def __init__(self, dim: int):
        super().__init__(properties={"dim": IntegerAttr(dim, i64)}, result_types=[IndexType()])

    def verify_(self) -> None:
        op = self.parent_op()
        if not isinstance(op, LinalgStructuredOperation):
            raise VerifyException("'linalg.index' op expected parent op with LinalgOp interface")
        loops = len(op.get_iterator_types())
        if not 0 <= self.dim.value.data < loops:
            raise VerifyException(
                f"'linalg.index' of dimension {self.dim.value.data}, but '{op.name}' "
                f"has {loops} loops"
            )


_OPS: Dialect = with_replaced_ops(
    linalg.Linalg,
    GenericOp,
    MatmulOp,
    FillOp,
    *_COUNTED,
    *_WINDOWED,
    *_ELEMENTWISE_OPS,
    BatchMatmulOp,
    BatchReduceMatmulOp,
    ContractOp,
    Mmt4dOp,
    BatchMmt4dOp,
    PackOp,
    UnpackOp,
    MatvecOp,
    VecmatOp,
    BatchMatvecOp,
    DotOp,
    DivOp,
    MapOp,
    ReduceOp,
    ElementwiseOp,
    _CheckedYieldOp,
    IndexOp,
)
Linalg: Dialect = Dialect(
    _OPS.name, list(_OPS.operations), [*_OPS.attributes, ElementwiseKindAttr, TypeFnAttr]
)
