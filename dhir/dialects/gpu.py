"""The gpu dialect with MLIR 22's custom syntax (xDSL 0.74 prints every gpu op
generically) and MLIR 22's definitions where xDSL's differ:

- `gpu.func`'s kernel marker is the `gpu.kernel` attribute (xDSL: a `kernel`
  property, which mlir-opt drops silently); it also has `arg_attrs`/`res_attrs` and
  workgroup/private attributions;
- `gpu.launch` may have clusters, attributions and `module`/`function` names;
- `gpu.dealloc` and `gpu.memcpy` have no `operandSegmentSizes` (xDSL demands one, so
  it could not read mlir-opt's generic output);
- the id ops take an optional `upper_bound`; `gpu.all_reduce` knows MLIR 22's
  operations (`minsi`, `maxnumf`, ...); `#gpu.address_space<...>` exists.
"""

from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar, cast

from xdsl.dialects import gpu
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    i1,
    i32,
    i64,
)
from xdsl.dialects.gpu import DimensionAttr as DimensionAttr
from xdsl.dialects.gpu import DimensionEnum as DimensionEnum
from xdsl.dialects.utils import EnumAttribute
from xdsl.dialects.utils.format import parse_assignment, print_func_argument
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    IRDLOperation,
    OptAttributeDef,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    irdl_to_attr_constraint,
    operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.declarative_assembly_format import (
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    IsTerminator,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from dhir.dialects import with_replaced_ops
from dhir.dialects.format import (
    AngleBracketEnum,
    OpT,
    custom_format,
    optional_property,
    print_type_list,
    redefine,
    split_properties,
)
from dhir.ir.walk import enclosing

_SEGMENTS = "operandSegmentSizes"
_NUM_WORKGROUP = "workgroup_attributions"
_TOKEN = gpu.AsyncTokenType()
T = TypeVar("T")

# --- attributes -----------------------------------------------------------------------


class AddressSpace(StrEnum):
    GLOBAL = "global"
    WORKGROUP = "workgroup"
    PRIVATE = "private"


@irdl_attr_definition
class AddressSpaceAttr(AngleBracketEnum, EnumAttribute[AddressSpace]):
    """`#gpu.address_space<workgroup>`, the memory space of shared/local buffers. xDSL 0.74
    lacks this attribute."""

    name = "gpu.address_space"


class AllReduceOperation(StrEnum):
    ADD = "add"
    MUL = "mul"
    MINUI = "minui"
    MINSI = "minsi"
    MINNUMF = "minnumf"
    MAXUI = "maxui"
    MAXSI = "maxsi"
    MAXNUMF = "maxnumf"
    AND = "and"
    OR = "or"
    XOR = "xor"
    MINIMUMF = "minimumf"
    MAXIMUMF = "maximumf"


@irdl_attr_definition
class AllReduceOperationAttr(EnumAttribute[AllReduceOperation], SpacedOpaqueSyntaxAttribute):
    """`#gpu<all_reduce_op add>` with MLIR 22's operations (xDSL has the old names)."""

    name = "gpu.all_reduce_op"


class ShuffleMode(StrEnum):
    XOR = "xor"
    UP = "up"
    DOWN = "down"
    IDX = "idx"


@irdl_attr_definition
class ShuffleModeAttr(EnumAttribute[ShuffleMode], SpacedOpaqueSyntaxAttribute):
    """`#gpu<shuffle_mode xor>`. xDSL 0.74 lacks this attribute."""

    name = "gpu.shuffle_mode"


# --- shared syntax pieces -----------------------------------------------------------


def parse_async(parser: Parser) -> tuple[bool, list[SSAValue]]:
    """MLIR's `custom<AsyncDependencies>`: `async`? (`[` tokens `]`)?."""
    is_async = parser.parse_optional_keyword("async") is not None
    deps: list[SSAValue] | None = parser.parse_optional_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parser.parse_operand(_TOKEN)
    )
    return is_async, deps or []


def print_async(printer: Printer, token: SSAValue | None, deps: Sequence[SSAValue]) -> None:
    if token is not None:
        printer.print_string(" async")
    if deps:
        printer.print_string(" [")
        printer.print_list(deps, printer.print_operand)
        printer.print_string("]")


def _token_types(is_async: bool) -> list[Attribute]:
    return [_TOKEN] if is_async else []


def _parse_symbol(parser: Parser) -> SymbolRefAttr:
    pos = parser.pos
    attr = parser.parse_attribute()
    if not isinstance(attr, SymbolRefAttr):
        parser.raise_error("expected a symbol reference", pos, parser.pos)
    return attr


def _print_typed_args(printer: Printer, args: Sequence[SSAValue]) -> None:
    """`%a : t, %b : u`, as MLIR prints attributions and kernel operands."""

    def one(arg: SSAValue) -> None:
        printer.print_operand(arg)
        printer.print_string(" : ")
        printer.print_attribute(arg.type)

    printer.print_list(args, one)


def _parse_attributions(parser: Parser, keyword: str) -> list[Parser.Argument]:
    if not parser.parse_optional_keyword(keyword):
        return []
    return parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)


def _print_attributions(printer: Printer, keyword: str, args: Sequence[BlockArgument]) -> None:
    if args:
        printer.print_string(f" {keyword}(")
        _print_typed_args(printer, args)
        printer.print_string(")")


def _print_async_pair(
    printer: Printer, op: "gpu.MemcpyOp | MemsetOp", operands: tuple[SSAValue, SSAValue]
) -> None:
    """`async? [deps]? %a, %b : A, B attr-dict`, as gpu.memcpy and gpu.memset print."""
    print_async(printer, op.asyncToken, op.asyncDependencies)
    printer.print_string(" ")
    printer.print_list(operands, printer.print_operand)
    printer.print_string(" : ")
    print_type_list(printer, (value.type for value in operands))
    printer.print_op_attributes(op.attributes)


def workgroup_count(op: gpu.LaunchOp | gpu.FuncOp) -> int:
    """How many of `op`'s attributions are workgroup memory (one buffer per block)."""
    attr = op.attributes.get(_NUM_WORKGROUP)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


# --- simple ops -----------------------------------------------------------------------

_UPPER_BOUND = {"upper_bound": optional_property(IntegerAttr[IndexType])}
_DIMENSION = "$dimension (`upper_bound` $upper_bound^)? attr-dict"
_SUBGROUP = "(`upper_bound` $upper_bound^)? attr-dict `:` type($result)"


def _bounded(assembly_format: str) -> Callable[[OpT], OpT]:
    """An id op's syntax, with MLIR 22's optional `upper_bound` property."""

    def apply(cls: OpT) -> OpT:
        return custom_format(assembly_format)(redefine(properties=_UPPER_BOUND)(cls))

    return apply


@_bounded(_DIMENSION)
class ThreadIdOp(gpu.ThreadIdOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@_bounded(_DIMENSION)
class BlockIdOp(gpu.BlockIdOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@_bounded(_DIMENSION)
class BlockDimOp(gpu.BlockDimOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@_bounded(_DIMENSION)
class GridDimOp(gpu.GridDimOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@_bounded(_DIMENSION)
class GlobalIdOp(gpu.GlobalIdOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@_bounded("(`upper_bound` $upper_bound^)? attr-dict")
class LaneIdOp(gpu.LaneIdOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@_bounded(_SUBGROUP)
class NumSubgroupsOp(gpu.NumSubgroupsOp):
    """xDSL 0.74 has only the generic form."""


@_bounded(_SUBGROUP)
class SubgroupIdOp(gpu.SubgroupIdOp):
    """xDSL 0.74 has only the generic form."""


@_bounded(_SUBGROUP)
class SubgroupSizeOp(gpu.SubgroupSizeOp):
    """xDSL 0.74 has only the generic form, without `upper_bound`."""


@custom_format("attr-dict")
class BarrierOp(gpu.BarrierOp):
    """xDSL 0.74 has only the generic form."""


@custom_format("attr-dict")
class TerminatorOp(gpu.TerminatorOp):
    """xDSL 0.74 has only the generic form."""


@custom_format("attr-dict ($args^ `:` type($args))?")
class ReturnOp(gpu.ReturnOp):
    """xDSL 0.74 has only the generic form."""


@custom_format("attr-dict ($values^ `:` type($values))?")
class YieldOp(gpu.YieldOp):
    """xDSL 0.74 has only the generic form."""

    def verify_(self) -> None:
        # In gpu.warp_execute_on_lane_0 the region yields whole values and the op
        # returns each lane's part: the shapes differ.
        if not isinstance(self.parent_op(), WarpExecuteOnLane0Op):
            super().verify_()


@custom_format("$value attr-dict `:` type($value)")
class HostRegisterOp(gpu.HostRegisterOp):
    """xDSL 0.74 has only the generic form."""


@custom_format("$value attr-dict `:` type($value)")
class HostUnregisterOp(gpu.HostUnregisterOp):
    """xDSL 0.74 has only the generic form."""


@custom_format("attr-dict $devIndex")
class SetDefaultDeviceOp(gpu.SetDefaultDeviceOp):
    """xDSL 0.74 has only the generic form."""


# --- memory and synchronisation -----------------------------------------------------


class AllocOp(gpu.AllocOp):
    """`gpu.alloc async? [deps]? host_shared? (sizes) ([symbols])? attr-dict : type`. xDSL 0.74
    has only the generic form."""

    def print(self, printer: Printer) -> None:
        print_async(printer, self.asyncToken, self.asyncDependencies)
        if self.hostShared is not None:
            printer.print_string(" host_shared")
        printer.print_string(" (")
        printer.print_list(self.dynamicSizes, printer.print_operand)
        printer.print_string(")")
        if self.symbolOperands:
            printer.print_string("[")
            printer.print_list(self.symbolOperands, printer.print_operand)
            printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> "AllocOp":
        is_async, deps = parse_async(parser)
        host_shared = parser.parse_optional_keyword("host_shared") is not None
        index = IndexType()
        sizes = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_operand(index)
        )
        symbols = parser.parse_optional_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_operand(index)
        )
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        props.pop(_SEGMENTS, None)
        if host_shared:
            props["hostShared"] = UnitAttr()
        parser.parse_punctuation(":")
        memref_type = parser.parse_type()
        return cls.build(
            operands=[deps, sizes, symbols or []],
            result_types=[memref_type, _token_types(is_async)],
            properties=props,
            attributes=attrs,
        )


@redefine(drop_segment_sizes=True)
class DeallocOp(gpu.DeallocOp):
    """`gpu.dealloc async? [deps]? %memref attr-dict : type`. xDSL 0.74 has only the generic
    form, with an operandSegmentSizes MLIR does not write."""

    def print(self, printer: Printer) -> None:
        print_async(printer, self.asyncToken, self.asyncDependencies)
        printer.print_string(" ")
        printer.print_operand(self.buffer)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> "DeallocOp":
        is_async, deps = parse_async(parser)
        buffer = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        buffer_type = parser.parse_type()
        return cls.build(
            operands=[deps, parser.resolve_operand(buffer, buffer_type)],
            result_types=[_token_types(is_async)],
            attributes=attrs,
        )


@redefine(drop_segment_sizes=True)
class MemcpyOp(gpu.MemcpyOp):
    """`gpu.memcpy async? [deps]? %dst, %src : dst_type, src_type attr-dict`. xDSL 0.74 has only
    the generic form, with an operandSegmentSizes MLIR does not write."""

    def verify_(self) -> None:
        # As MLIR: the memory spaces may differ (that is the point of a copy), the
        # element types and shapes may not.
        src, dst = self.src.type, self.dst.type
        assert isinstance(src, MemRefType) and isinstance(dst, MemRefType)
        if src.element_type != dst.element_type or src.get_shape() != dst.get_shape():
            raise VerifyException(
                f"gpu.memcpy source type {src} and destination type {dst} differ in "
                "element type or shape"
            )

    def print(self, printer: Printer) -> None:
        _print_async_pair(printer, self, (self.dst, self.src))

    @classmethod
    def parse(cls, parser: Parser) -> "MemcpyOp":
        is_async, deps = parse_async(parser)
        pos = parser.pos
        names = [parser.parse_unresolved_operand()]
        parser.parse_punctuation(",")
        names.append(parser.parse_unresolved_operand())
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        parser.parse_punctuation(",")
        types.append(parser.parse_type())
        dst, src = parser.resolve_operands(names, types, pos)
        attrs = parser.parse_optional_attr_dict()
        return cls.build(
            operands=[deps, dst, src],
            result_types=[_token_types(is_async)],
            attributes=attrs,
        )


class WaitOp(gpu.WaitOp):
    """`gpu.wait async? [deps]? attr-dict`. xDSL 0.74 has only the generic form."""

    def print(self, printer: Printer) -> None:
        print_async(printer, self.asyncToken, self.asyncDependencies)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "WaitOp":
        is_async, deps = parse_async(parser)
        attrs = parser.parse_optional_attr_dict()
        return cls.build(operands=[deps], result_types=[_token_types(is_async)], attributes=attrs)


@redefine(properties={"op": optional_property(AllReduceOperationAttr)})
class AllReduceOp(gpu.AllReduceOp):
    """`gpu.all_reduce op? %value uniform? region attr-dict : (T) -> T`. xDSL 0.74 has only the
    generic form and lacks MLIR 22's operations."""

    def verify_(self) -> None:
        if self.result.type != self.operand.type:
            raise VerifyException("gpu.all_reduce result type must match its operand")
        if (self.op is None) == (not self.body.blocks):
            raise VerifyException(
                "gpu.all_reduce needs either an operation or a non-empty body, not both"
            )

    def print(self, printer: Printer) -> None:
        op = cast(AllReduceOperationAttr | None, self.op)
        if op is not None:
            printer.print_string(f" {op.data.value}")
        printer.print_string(" ")
        printer.print_operand(self.operand)
        if self.uniform is not None:
            printer.print_string(" uniform")
        printer.print_string(" ")
        printer.print_region(self.body)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        signature = FunctionType.from_lists([self.operand.type], [self.result.type])
        printer.print_attribute(signature)

    @classmethod
    def parse(cls, parser: Parser) -> "AllReduceOp":
        props: dict[str, Attribute] = {}
        if (op := parser.parse_optional_str_enum(AllReduceOperation)) is not None:
            props["op"] = AllReduceOperationAttr(op)
        value = parser.parse_unresolved_operand()
        if parser.parse_optional_keyword("uniform"):
            props["uniform"] = UnitAttr()
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        signature = parser.parse_function_type()
        inputs, outputs = signature.inputs.data, signature.outputs.data
        if len(inputs) != 1 or len(outputs) != 1:
            parser.raise_error("expected a type like (T) -> T", pos, parser.pos)
        return cls.build(
            operands=[parser.resolve_operand(value, inputs[0])],
            result_types=[outputs[0]],
            regions=[body],
            properties=props,
            attributes=attrs,
        )


@irdl_op_definition
class SubgroupReduceOp(IRDLOperation):
    """`gpu.subgroup_reduce op %value uniform? (cluster(size = N (, stride = M)?))?
    attr-dict : (T) -> T`: a reduction across a subgroup's lanes (values only).
    xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_reduce"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    op = prop_def(AllReduceOperationAttr)
    uniform = opt_prop_def(UnitAttr)
    cluster_size = opt_prop_def(IntegerAttr)
    cluster_stride = prop_def(IntegerAttr, default_value=IntegerAttr(1, i32))
    result = result_def(T)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {cast(AllReduceOperationAttr, self.op).data.value} ")
        printer.print_operand(self.value)
        if self.uniform is not None:
            printer.print_string(" uniform")
        if self.cluster_size is not None:
            printer.print_string(f" cluster(size = {self.cluster_size.value.data}")
            if self.cluster_stride.value.data != 1:
                printer.print_string(f", stride = {self.cluster_stride.value.data}")
            printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(FunctionType.from_lists([self.value.type], [self.result.type]))

    @classmethod
    def parse(cls, parser: Parser) -> "SubgroupReduceOp":
        props: dict[str, Attribute] = {
            "op": AllReduceOperationAttr(parser.parse_str_enum(AllReduceOperation))
        }
        value = parser.parse_unresolved_operand()
        if parser.parse_optional_keyword("uniform"):
            props["uniform"] = UnitAttr()
        if parser.parse_optional_keyword("cluster"):
            parser.parse_punctuation("(")
            parser.parse_keyword("size")
            parser.parse_punctuation("=")
            props["cluster_size"] = IntegerAttr(parser.parse_integer(), i32)
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("stride")
                parser.parse_punctuation("=")
                props["cluster_stride"] = IntegerAttr(parser.parse_integer(), i32)
            parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        signature = parser.parse_function_type()
        inputs, outputs = signature.inputs.data, signature.outputs.data
        if len(inputs) != 1 or len(outputs) != 1:
            parser.raise_error("expected a type like (T) -> T", pos, parser.pos)
        return cls.create(
            operands=[parser.resolve_operand(value, inputs[0])],
            result_types=[outputs[0]],
            properties=props,
            attributes=attrs,
        )


@irdl_op_definition
class PrintfOp(IRDLOperation):
    """`gpu.printf "format" (, %args : types)? attr-dict`: prints from each thread. xDSL 0.74
    lacks this op."""

    name = "gpu.printf"

    format = prop_def(StringAttr)
    args = var_operand_def()

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.format)
        printer.print_op_attributes(self.attributes)
        if self.args:
            printer.print_string(", ")
            printer.print_list(self.args, printer.print_operand)
            printer.print_string(" : ")
            print_type_list(printer, [a.type for a in self.args])

    @classmethod
    def parse(cls, parser: Parser) -> "PrintfOp":
        text = StringAttr(parser.parse_str_literal())
        attrs = parser.parse_optional_attr_dict()
        args: Sequence[SSAValue] = []
        if parser.parse_optional_punctuation(","):
            pos = parser.pos
            names = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            args = parser.resolve_operands(names, types, pos)
        return cls.create(operands=args, properties={"format": text}, attributes=attrs)


@irdl_op_definition
class ShuffleOp(IRDLOperation):
    """`gpu.shuffle mode %value, %offset, %width attr-dict : T`: a value from another
    lane of the subgroup, and whether that lane was in range (values only).
    xDSL 0.74 lacks this op."""

    name = "gpu.shuffle"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    offset = operand_def(i32)
    width = operand_def(i32)
    mode = prop_def(ShuffleModeAttr)
    shuffle_result = result_def(T)
    valid = result_def(i1)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {cast(ShuffleModeAttr, self.mode).data.value} ")
        printer.print_list((self.value, self.offset, self.width), printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)

    @classmethod
    def parse(cls, parser: Parser) -> "ShuffleOp":
        mode = ShuffleModeAttr(parser.parse_str_enum(ShuffleMode))
        pos = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_ = parser.parse_type()
        if len(names) != 3:
            parser.raise_error("expected a value, an offset and a width", pos, parser.pos)
        operands = parser.resolve_operands(names, [type_, i32, i32], pos)
        return cls.create(
            operands=operands,
            result_types=[type_, i1],
            properties={"mode": mode},
            attributes=attrs,
        )


# --- kernels and launches -----------------------------------------------------------


@redefine(
    properties={
        "targets": optional_property(ArrayAttr),
        "offloadingHandler": optional_property(AnyAttr()),
    }
)
class ModuleOp(gpu.ModuleOp):
    """`gpu.module @name (<handler>)? ([targets])? (attributes {...})? region`. xDSL 0.74 has
    only the generic form."""

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        _print_handler(printer, self.properties.get("offloadingHandler"))
        targets = self.properties.get("targets")
        if isinstance(targets, ArrayAttr):
            printer.print_string(" [")
            printer.print_list(targets.data, printer.print_attribute)
            printer.print_string("]")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser) -> "ModuleOp":
        props: dict[str, Attribute] = {"sym_name": parser.parse_symbol_name()}
        if parser.parse_optional_punctuation("<"):
            props["offloadingHandler"] = parser.parse_attribute()
            parser.parse_punctuation(">")
        targets = parser.parse_optional_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_attribute
        )
        if targets is not None:
            props["targets"] = ArrayAttr(targets)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        return cls.build(
            properties=props,
            attributes=attrs.data if attrs else {},
            regions=[body],
        )


_DICTS = ArrayAttr[DictionaryAttr]


@redefine(
    properties={
        "arg_attrs": optional_property(_DICTS),
        "res_attrs": optional_property(_DICTS),
    },
    attributes={"gpu.kernel": OptAttributeDef(irdl_to_attr_constraint(UnitAttr))},
    drop=("kernel",),
)
class FuncOp(gpu.FuncOp):
    """`gpu.func @name(%a: T {attrs}, ...) (-> results)? (workgroup(...))?
    (private(...))? kernel? (attributes {...})? region`; attributions are the entry
    block's arguments after the function's, `workgroup_attributions` counts the first
    kind. xDSL 0.74 has only the generic form; its kernel marker is a property mlir-opt drops."""

    _RESERVED = ("sym_name", "gpu.kernel", _NUM_WORKGROUP)

    def __init__(
        self,
        name: str,
        function_type: FunctionType | tuple[Sequence[Attribute], Sequence[Attribute]],
        region: Region | type[Region.DEFAULT] = Region.DEFAULT,
        kernel: bool | None = None,
        known_block_size: Sequence[int] | None = None,
        known_grid_size: Sequence[int] | None = None,
    ):
        # xDSL's constructor would store `kernel` as a property.
        super().__init__(name, function_type, region, None, known_block_size, known_grid_size)
        if kernel:
            self.attributes["gpu.kernel"] = UnitAttr()

    def verify_(self) -> None:
        inputs = self.function_type.inputs.data
        if self.body.blocks and self.body.blocks[0].arg_types[: len(inputs)] != inputs:
            raise VerifyException(
                "gpu.func entry block arguments must start with the function's inputs"
            )
        if self.kernel is not None and self.function_type.outputs.data:
            raise VerifyException("a gpu.func kernel must not return values")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        args = self.body.blocks[0].args if self.body.blocks else ()
        inputs = len(self.function_type.inputs)
        arg_attrs = _dicts(self.properties.get("arg_attrs"), inputs)
        printer.print_string("(")
        printer.print_list(
            zip(args[:inputs], arg_attrs), lambda a: print_func_argument(printer, *a)
        )
        printer.print_string(")")
        self._print_results(printer)
        workgroup = inputs + workgroup_count(self)
        _print_attributions(printer, "workgroup", args[inputs:workgroup])
        _print_attributions(printer, "private", args[workgroup:])
        if self.kernel is not None:
            printer.print_string(" kernel")
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=self._RESERVED, print_keyword=True
        )
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    def _print_results(self, printer: Printer) -> None:
        outputs = self.function_type.outputs.data
        if not outputs:
            return
        res_attrs = self.properties.get("res_attrs")
        printer.print_string(" -> ")
        if res_attrs is None and len(outputs) == 1:
            printer.print_attribute(outputs[0])
            return

        def one(pair: tuple[Attribute, DictionaryAttr | None]) -> None:
            printer.print_attribute(pair[0])
            if pair[1] is not None:
                printer.print_op_attributes(pair[1].data)

        printer.print_string("(")
        printer.print_list(zip(outputs, _dicts(res_attrs, len(outputs))), one)
        printer.print_string(")")

    @classmethod
    def parse(cls, parser: Parser) -> "FuncOp":
        name = parser.parse_symbol_name()
        args = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN,
            lambda: _parse_func_argument(parser),
        )
        results = _parse_results(parser)
        workgroup = _parse_attributions(parser, "workgroup")
        private = _parse_attributions(parser, "private")
        attrs: dict[str, Attribute] = {
            "sym_name": name,
            _NUM_WORKGROUP: IntegerAttr(len(workgroup), i64),
        }
        if parser.parse_optional_keyword("kernel"):
            attrs["gpu.kernel"] = UnitAttr()
        if (extra := parser.parse_optional_attr_dict_with_keyword()) is not None:
            attrs |= extra.data
        entry = [arg for arg, _ in args] + workgroup + private
        body = parser.parse_region(entry)
        signature = FunctionType.from_lists([arg.type for arg, _ in args], [t for t, _ in results])
        props: dict[str, Attribute] = {"function_type": signature}
        _set_dicts(props, "arg_attrs", [a for _, a in args])
        _set_dicts(props, "res_attrs", [a for _, a in results])
        return cls.build(properties=props, attributes=attrs, regions=[body])


def _parse_func_argument(parser: Parser) -> tuple[Parser.Argument, dict[str, Attribute]]:
    """`%a: T {attrs}? loc(...)?`: the location print_func_argument writes under
    --mlir-print-debuginfo, which mlir-opt reads too."""
    arg, attrs = _parse_with_attrs(parser, parser.parse_argument)
    if (location := parser.parse_optional_location()) is not None:
        arg.location = location
    return arg, attrs


def _parse_with_attrs(parser: Parser, parse: Callable[[], T]) -> tuple[T, dict[str, Attribute]]:
    item = parse()
    return item, parser.parse_optional_dictionary_attr_dict()


def _parse_results(
    parser: Parser,
) -> list[tuple[Attribute, dict[str, Attribute]]]:
    if not parser.parse_optional_punctuation("->"):
        return []
    results: list[tuple[Attribute, dict[str, Attribute]]] | None = (
        parser.parse_optional_comma_separated_list(
            parser.Delimiter.PAREN, lambda: _parse_with_attrs(parser, parser.parse_type)
        )
    )
    return [(parser.parse_type(), {})] if results is None else results


def _dicts(attr: Attribute | None, count: int) -> list[DictionaryAttr | None]:
    if isinstance(attr, ArrayAttr) and len(attr) == count:
        return [d if isinstance(d, DictionaryAttr) and d.data else None for d in attr]
    return [None] * count


def _set_dicts(props: dict[str, Attribute], name: str, dicts: list[dict[str, Attribute]]) -> None:
    # Like MLIR, omitted when no entry has attributes.
    if any(dicts):
        props[name] = ArrayAttr(DictionaryAttr(d) for d in dicts)


@redefine(
    properties={
        "module": optional_property(SymbolRefAttr),
        "function": optional_property(SymbolRefAttr),
    }
)
class LaunchOp(gpu.LaunchOp):
    """`gpu.launch async? [deps]? (clusters(ids) in (sizes))? blocks(ids) in (sizes)
    threads(ids) in (sizes) (dynamic_shared_memory_size %s)? (module(@m))?
    (function(@f))? (workgroup(...))? (private(...))? region attr-dict`.

    The body's arguments: block ids, thread ids, grid sizes, block sizes (3 each), then
    cluster ids and cluster sizes when clustered, then the attributions.
    xDSL 0.74 has only the generic form, without clusters or attributions."""

    def verify_(self) -> None:
        if not any(b.ops for b in self.body.blocks):
            raise VerifyException("gpu.launch requires a non-empty body")
        count = self._num_dims()
        types = self.body.blocks[0].arg_types[:count]
        if types != (IndexType(),) * count:
            raise VerifyException(
                f"gpu.launch's body must start with {count} index arguments "
                "(block and thread ids, grid and block sizes, cluster ids and sizes)"
            )

    def _num_dims(self) -> int:
        return 18 if self.clusterSizeX is not None else 12

    def print(self, printer: Printer) -> None:
        args = self.body.blocks[0].args if self.body.blocks else ()
        if len(args) < self._num_dims():  # invalid op: print what is there
            printer.print_op_with_default_format(self)
            return
        print_async(printer, self.asyncToken, self.asyncDependencies)
        if self.clusterSizeX is not None:
            sizes = (self.clusterSizeX, self.clusterSizeY, self.clusterSizeZ)
            _print_dims(printer, "clusters", args[12:15], args[15:18], sizes)
        grid = (self.gridSizeX, self.gridSizeY, self.gridSizeZ)
        _print_dims(printer, "blocks", args[0:3], args[6:9], grid)
        block = (self.blockSizeX, self.blockSizeY, self.blockSizeZ)
        _print_dims(printer, "threads", args[3:6], args[9:12], block)
        if self.dynamicSharedMemorySize is not None:
            printer.print_string(" dynamic_shared_memory_size ")
            printer.print_operand(self.dynamicSharedMemorySize)
        for keyword in ("module", "function"):
            if (symbol := self.properties.get(keyword)) is not None:
                printer.print_string(f" {keyword}(")
                printer.print_attribute(symbol)
                printer.print_string(")")
        workgroup = self._num_dims() + workgroup_count(self)
        _print_attributions(printer, "workgroup", args[self._num_dims() : workgroup])
        _print_attributions(printer, "private", args[workgroup:])
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=(_NUM_WORKGROUP, _SEGMENTS)
        )

    @classmethod
    def parse(cls, parser: Parser) -> "LaunchOp":
        is_async, deps = parse_async(parser)
        clusters = _if_keyword(parser, "clusters", lambda: _parse_dims(parser))
        blocks = _parse_dims(parser, "blocks")
        threads = _parse_dims(parser, "threads")
        shared = _parse_shared_memory_size(parser)
        props: dict[str, Attribute] = {}
        for keyword in ("module", "function"):
            symbol = _if_keyword(parser, keyword, lambda: _parse_in_parens(parser))
            if symbol is not None:
                props[keyword] = symbol
        workgroup = _parse_attributions(parser, "workgroup")
        private = _parse_attributions(parser, "private")
        index = IndexType()
        dims = blocks[0] + threads[0] + blocks[1] + threads[1]
        if clusters is not None:
            dims += clusters[0] + clusters[1]
        entry = [d.resolve(index) for d in dims] + workgroup + private
        body = parser.parse_region(entry)
        attrs = parser.parse_optional_attr_dict()
        attrs.pop(_SEGMENTS, None)
        attrs[_NUM_WORKGROUP] = IntegerAttr(len(workgroup), i64)
        cluster_sizes = [[v] for v in clusters[2]] if clusters else [[], [], []]
        return cls.build(
            operands=[deps, *blocks[2], *threads[2], *cluster_sizes, shared],
            result_types=[_token_types(is_async)],
            regions=[body],
            properties=props,
            attributes=attrs,
        )


_Dims = tuple[list[Parser.UnresolvedArgument], list[Parser.UnresolvedArgument], list[SSAValue]]


def _if_keyword(parser: Parser, keyword: str, parse: Callable[[], T]) -> T | None:
    return parse() if parser.parse_optional_keyword(keyword) else None


def _parse_shared_memory_size(parser: Parser) -> list[SSAValue]:
    size = _if_keyword(parser, "dynamic_shared_memory_size", lambda: parser.parse_operand(i32))
    return [] if size is None else [size]


def _parse_in_parens(parser: Parser) -> SymbolRefAttr:
    parser.parse_punctuation("(")
    symbol = _parse_symbol(parser)
    parser.parse_punctuation(")")
    return symbol


def _parse_dims(parser: Parser, keyword: str | None = None) -> _Dims:
    """`keyword? (%x, %y, %z) in (%sx = %a, %sy = %b, %sz = %c)`: (ids, sizes,
    values)."""
    if keyword is not None:
        parser.parse_keyword(keyword)
    ids = _parse_triple(parser, lambda: parser.parse_argument(expect_type=False))
    parser.parse_keyword("in")
    pairs = _parse_triple(parser, lambda: parse_assignment(parser))
    values: list[SSAValue] = [parser.resolve_operand(value, IndexType()) for _, value in pairs]
    return ids, [size for size, _ in pairs], values


def _parse_triple(parser: Parser, parse: Callable[[], T]) -> list[T]:
    pos = parser.pos
    items = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parse)
    if len(items) != 3:
        parser.raise_error("expected three values (x, y, z)", pos, parser.pos)
    return items


def _print_dims(
    printer: Printer,
    keyword: str,
    ids: Sequence[BlockArgument],
    sizes: Sequence[BlockArgument],
    values: Sequence[SSAValue | None],
) -> None:
    printer.print_string(f" {keyword}(")
    printer.print_list(ids, printer.print_operand)
    printer.print_string(") in (")

    def one(pair: tuple[BlockArgument, SSAValue | None]) -> None:
        printer.print_operand(pair[0])
        printer.print_string(" = ")
        if pair[1] is not None:
            printer.print_operand(pair[1])

    printer.print_list(zip(sizes, values), one)
    printer.print_string(")")


class LaunchFuncOp(gpu.LaunchFuncOp):
    """`gpu.launch_func async? [deps]? (<%obj : T>)? @module::@kernel
    (clusters in (x, y, z))? blocks in (x, y, z) threads in (x, y, z) (: type)?
    (dynamic_shared_memory_size %s)? (args(%a : T, ...))? attr-dict`; all sizes share
    one type, index unless given. xDSL 0.74 has only the generic form."""

    def print(self, printer: Printer) -> None:
        print_async(printer, self.asyncToken, self.asyncDependencies)
        if self.asyncObject is not None:
            printer.print_string(" <")
            _print_typed_args(printer, [self.asyncObject])
            printer.print_string(">")
        printer.print_string(" ")
        printer.print_attribute(self.kernel)
        if self.clusterSizeX is not None:
            clusters = (self.clusterSizeX, self.clusterSizeY, self.clusterSizeZ)
            _print_sizes(printer, "clusters", clusters)
        grid = (self.gridSizeX, self.gridSizeY, self.gridSizeZ)
        _print_sizes(printer, "blocks", grid)
        block = (self.blockSizeX, self.blockSizeY, self.blockSizeZ)
        _print_sizes(printer, "threads", block)
        if not isinstance(self.gridSizeX.type, IndexType):
            printer.print_string(" : ")
            printer.print_attribute(self.gridSizeX.type)
        if self.dynamicSharedMemorySize is not None:
            printer.print_string(" dynamic_shared_memory_size ")
            printer.print_operand(self.dynamicSharedMemorySize)
        if self.kernelOperands:
            printer.print_string(" args(")
            _print_typed_args(printer, self.kernelOperands)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes, reserved_attr_names=(_SEGMENTS,))

    @classmethod
    def parse(cls, parser: Parser) -> "LaunchFuncOp":
        is_async, deps = parse_async(parser)
        async_object: list[SSAValue] = []
        if parser.parse_optional_punctuation("<"):
            async_object.append(_parse_typed_operand(parser))
            parser.parse_punctuation(">")
        kernel = _parse_symbol(parser)
        clusters = _if_keyword(parser, "clusters", lambda: _parse_sizes(parser))
        grid = _parse_sizes(parser, "blocks")
        block = _parse_sizes(parser, "threads")
        size_type: Attribute = IndexType()
        if parser.parse_optional_punctuation(":"):
            size_type = parser.parse_type()

        def resolve(names: Sequence[UnresolvedOperand]) -> list[SSAValue]:
            return [parser.resolve_operand(n, size_type) for n in names]

        shared = _parse_shared_memory_size(parser)
        args = _if_keyword(
            parser,
            "args",
            lambda: parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: _parse_typed_operand(parser)
            ),
        )
        attrs = parser.parse_optional_attr_dict()
        attrs.pop(_SEGMENTS, None)
        cluster_sizes = [[v] for v in resolve(clusters)] if clusters else [[], [], []]
        return cls.build(
            operands=[
                deps,
                *resolve(grid),
                *resolve(block),
                *cluster_sizes,
                shared,
                args or [],
                async_object,
            ],  # fmt: skip
            result_types=[_token_types(is_async)],
            properties={"kernel": kernel},
            attributes=attrs,
        )


def _parse_typed_operand(parser: Parser) -> SSAValue:
    name = parser.parse_unresolved_operand()
    parser.parse_punctuation(":")
    return parser.resolve_operand(name, parser.parse_type())


def _parse_sizes(parser: Parser, keyword: str | None = None) -> list[UnresolvedOperand]:
    """`keyword? in (%x, %y, %z)`."""
    if keyword is not None:
        parser.parse_keyword(keyword)
    parser.parse_keyword("in")
    return _parse_triple(parser, parser.parse_unresolved_operand)


def _print_sizes(printer: Printer, keyword: str, values: Sequence[SSAValue | None]) -> None:
    printer.print_string(f" {keyword} in (")
    printer.print_list((v for v in values if v is not None), printer.print_operand)
    printer.print_string(")")


def _print_handler(printer: Printer, handler: Attribute | None) -> None:
    if handler is not None:
        printer.print_string(" <")
        printer.print_attribute(handler)
        printer.print_string(">")


@irdl_op_definition
class BinaryOp(IRDLOperation):
    """`gpu.binary @name (<handler>)? attr-dict [objects]`: compiled GPU code. dhir keeps
    it as read (its attributes are of dialects dhir does not define). xDSL 0.74 lacks this op."""

    name = "gpu.binary"

    sym_name = prop_def(StringAttr)
    offloadingHandler = opt_prop_def(AnyAttr())
    objects = prop_def(ArrayAttr)

    traits = traits_def(SymbolOpInterface())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        _print_handler(printer, self.offloadingHandler)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" [")
        printer.print_list(self.objects.data, printer.print_attribute)
        printer.print_string("]")

    @classmethod
    def parse(cls, parser: Parser) -> "BinaryOp":
        props: dict[str, Attribute] = {"sym_name": parser.parse_symbol_name()}
        if parser.parse_optional_punctuation("<"):
            props["offloadingHandler"] = parser.parse_attribute()
            parser.parse_punctuation(">")
        else:
            # MLIR's parser sets the default handler; it is an attribute of a dialect dhir
            # does not define, made as the parser makes it.
            props["offloadingHandler"] = Parser(parser.ctx, "#gpu.select_object").parse_attribute()
        attrs = parser.parse_optional_attr_dict()
        objects = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_attribute)
        props["objects"] = ArrayAttr(objects)
        return cls.create(properties=props, attributes=attrs)


@irdl_op_definition
class RotateOp(IRDLOperation):
    """`gpu.rotate %value, offset, width attr-dict : T`: a value from the lane `offset`
    further round a group of `width` lanes, and whether that lane was in range.
    xDSL 0.74 lacks this op."""

    name = "gpu.rotate"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    offset = prop_def(IntegerAttr)
    width = prop_def(IntegerAttr)
    rotate_result = result_def(T)
    valid = result_def(i1)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(f", {self.offset.value.data}, {self.width.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)

    @classmethod
    def parse(cls, parser: Parser) -> "RotateOp":
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        offset = IntegerAttr(parser.parse_integer(), i32)
        parser.parse_punctuation(",")
        width = IntegerAttr(parser.parse_integer(), i32)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_ = parser.parse_type()
        return cls.create(
            operands=[parser.resolve_operand(value, type_)],
            result_types=[type_, i1],
            properties={"offset": offset, "width": width},
            attributes=attrs,
        )


@irdl_op_definition
class MemsetOp(IRDLOperation):
    """`gpu.memset async? [deps]? %dst, %value : memref_type, value_type attr-dict`. xDSL 0.74
    lacks this op."""

    name = "gpu.memset"

    asyncDependencies = var_operand_def(_TOKEN)
    dst = operand_def(MemRefType)
    value = operand_def()
    asyncToken = opt_result_def(_TOKEN)

    def print(self, printer: Printer) -> None:
        _print_async_pair(printer, self, (self.dst, self.value))

    @classmethod
    def parse(cls, parser: Parser) -> "MemsetOp":
        is_async, deps = parse_async(parser)
        pos = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(names) != 2 or len(types) != 2:
            parser.raise_error("expected a memref and a value, and their types", pos, parser.pos)
        dst, value = parser.resolve_operands(names, types, pos)
        attrs = parser.parse_optional_attr_dict()
        return cls.create(
            operands=[*deps, dst, value],
            result_types=_token_types(is_async),
            attributes=attrs,
        )

    def verify_(self) -> None:
        dst = self.dst.type
        assert isinstance(dst, MemRefType)
        if dst.element_type != self.value.type:
            raise VerifyException(f"gpu.memset writes {dst.element_type}, given {self.value.type}")


@irdl_op_definition
class WarpExecuteOnLane0Op(IRDLOperation):
    """`gpu.warp_execute_on_lane_0(%lane)[size] (args(%v : types))? (-> (types))? region
    attr-dict`: a region run by lane 0 of a warp, its values distributed over the lanes.
    xDSL 0.74 lacks this op."""

    name = "gpu.warp_execute_on_lane_0"

    laneid = operand_def(IndexType())
    args = var_operand_def()
    warp_size = prop_def(IntegerAttr)
    # Not `results`: that name is Operation's.
    outputs = var_result_def()
    warpRegion = region_def()

    traits = traits_def(SingleBlockImplicitTerminator(gpu.YieldOp), RecursiveMemoryEffect())

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        printer.print_operand(self.laneid)
        printer.print_string(f")[{self.warp_size.value.data}]")
        if self.args:
            printer.print_string(" args(")
            _print_typed_args(printer, self.args)
            printer.print_string(")")
        if self.outputs:
            printer.print_string(" -> (")
            print_type_list(printer, self.result_types)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.warpRegion,
            print_entry_block_args=bool(self.warpRegion.block.args),
            print_block_terminators=bool(self.outputs),
        )
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "WarpExecuteOnLane0Op":
        parser.parse_punctuation("(")
        lane = parser.parse_operand(IndexType())
        parser.parse_punctuation(")")
        parser.parse_punctuation("[")
        size = IntegerAttr(parser.parse_integer(), i64)
        parser.parse_punctuation("]")
        args: list[SSAValue] = []
        if parser.parse_optional_keyword("args"):
            args = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: _parse_typed_operand(parser)
            )
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->"):
            result_types = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_type
            )
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        block = region.blocks[-1]
        last = block.last_op
        if last is None or not last.has_trait(IsTerminator, value_if_unregistered=False):
            block.add_op(YieldOp.create())
        attrs = parser.parse_optional_attr_dict()
        return cls.create(
            operands=[lane, *args],
            result_types=result_types,
            properties={"warp_size": size},
            attributes=attrs,
            regions=[region],
        )


# --- matrix-multiply-accumulate (MMA) ops -------------------------------------------


@irdl_attr_definition
class MMAMatrixType(ParametrizedAttribute, TypeAttribute):
    """`!gpu.mma_matrix<16x16xf16, "AOp">`: a matrix spread over a subgroup's lanes. xDSL 0.74
    lacks this type."""

    name = "gpu.mma_matrix"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    operand: StringAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("".join(f"{d.data}x" for d in self.shape))
            printer.print_attribute(self.element_type)
            printer.print_string(", ")
            printer.print_attribute(self.operand)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[Attribute, ...]:
        with parser.in_angle_brackets():
            shape, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            operand = StringAttr(parser.parse_str_literal())
        return ArrayAttr(IntAttr(d) for d in shape), element_type, operand


class MMAElementwise(StrEnum):
    ADDF = "addf"
    MULF = "mulf"
    SUBF = "subf"
    MAXF = "maxf"
    MINF = "minf"
    DIVF = "divf"
    ADDI = "addi"
    MULI = "muli"
    SUBI = "subi"
    DIVS = "divs"
    DIVU = "divu"
    NEGATEF = "negatef"
    NEGATES = "negates"
    EXTF = "extf"


@irdl_attr_definition
class MMAElementwiseAttr(EnumAttribute[MMAElementwise], SpacedOpaqueSyntaxAttribute):
    """`#gpu<mma_element_wise addf>`. xDSL 0.74 lacks this attribute."""

    name = "gpu.mma_element_wise"


_MATRIX = base(MMAMatrixType)
_INDEX = IndexType()


@irdl_op_definition
class SubgroupMmaLoadMatrixOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_load_matrix"

    srcMemref = operand_def(MemRefType)
    indices = var_operand_def(_INDEX)
    leadDimension = prop_def(IntegerAttr[IndexType])
    transpose = opt_prop_def(UnitAttr)
    res = result_def(_MATRIX)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$srcMemref `[` $indices `]` attr-dict `:` type($srcMemref) `->` type($res)"


@irdl_op_definition
class SubgroupMmaStoreMatrixOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_store_matrix"

    src = operand_def(_MATRIX)
    dstMemref = operand_def(MemRefType)
    indices = var_operand_def(_INDEX)
    leadDimension = prop_def(IntegerAttr[IndexType])
    transpose = opt_prop_def(UnitAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = (
        "$src `,` $dstMemref `[` $indices `]` attr-dict `:` type($src) `,` type($dstMemref)"
    )


@irdl_op_definition
class SubgroupMmaConstantMatrixOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_constant_matrix"

    value = operand_def()
    res = result_def(_MATRIX)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.res.type)

    @classmethod
    def parse(cls, parser: Parser) -> "SubgroupMmaConstantMatrixOp":
        value = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        matrix = parser.parse_type()
        if not isinstance(matrix, MMAMatrixType):
            parser.raise_error("expected a !gpu.mma_matrix type", pos, parser.pos)
        # The value's type is the matrix's element type, as MLIR infers it.
        operand = parser.resolve_operand(value, matrix.element_type)
        return cls.create(operands=[operand], result_types=[matrix], attributes=attrs)


@irdl_op_definition
class SubgroupMmaElementwiseOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_elementwise"

    args = var_operand_def(_MATRIX)
    opType = prop_def(MMAElementwiseAttr)
    res = result_def(_MATRIX)

    assembly_format = "$opType $args attr-dict `:` functional-type($args, $res)"


@irdl_op_definition
class SubgroupMmaComputeOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_compute"

    opA = operand_def(_MATRIX)
    opB = operand_def(_MATRIX)
    C: ClassVar = VarConstraint("C", _MATRIX)
    opC = operand_def(C)
    a_transpose = opt_prop_def(UnitAttr)
    b_transpose = opt_prop_def(UnitAttr)
    res = result_def(C)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = (
        "$opA `,` $opB `,` $opC attr-dict `:` type($opA) `,` type($opB) `->` type($res)"
    )


@irdl_op_definition
class SubgroupMmaExtractThreadLocalOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_extract_thread_local"

    matrix = operand_def(_MATRIX)
    indices = var_operand_def(_INDEX)
    res = result_def()

    assembly_format = "$matrix `[` $indices `]` attr-dict `:` type($matrix) `->` type($res)"


@irdl_op_definition
class SubgroupMmaInsertThreadLocalOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "gpu.subgroup_mma_insert_thread_local"

    value = operand_def()
    matrix = operand_def(_MATRIX)
    indices = var_operand_def(_INDEX)
    res = result_def(_MATRIX)

    assembly_format = (
        "$value `,` $matrix `[` $indices `]` attr-dict `:` type($value) `,` type($matrix)"
        " `->` type($res)"
    )


MMA_OPS: tuple[type[IRDLOperation], ...] = (
    SubgroupMmaLoadMatrixOp,
    SubgroupMmaStoreMatrixOp,
    SubgroupMmaConstantMatrixOp,
    SubgroupMmaElementwiseOp,
    SubgroupMmaComputeOp,
    SubgroupMmaExtractThreadLocalOp,
    SubgroupMmaInsertThreadLocalOp,
)


# --- sparse linear algebra (cuSPARSE) ops -------------------------------------------


@irdl_attr_definition
class SpMatHandleType(ParametrizedAttribute, TypeAttribute):
    """`!gpu.sparse.spmat_handle`: a sparse matrix known to the sparse library. xDSL 0.74 lacks
    this attribute."""

    name = "gpu.sparse.spmat_handle"


@irdl_attr_definition
class DnTensorHandleType(ParametrizedAttribute, TypeAttribute):
    """`!gpu.sparse.dntensor_handle`: a dense tensor known to the sparse library. xDSL 0.74
    lacks this type."""

    name = "gpu.sparse.dntensor_handle"


@irdl_attr_definition
class SpGEMMOpHandleType(ParametrizedAttribute, TypeAttribute):
    """`!gpu.sparse.spgemmop_handle`: the state of a sparse matrix product. xDSL 0.74 lacks this
    attribute."""

    name = "gpu.sparse.spgemmop_handle"


class TransposeMode(StrEnum):
    NON_TRANSPOSE = "NON_TRANSPOSE"
    TRANSPOSE = "TRANSPOSE"
    CONJUGATE_TRANSPOSE = "CONJUGATE_TRANSPOSE"


@irdl_attr_definition
class TransposeModeAttr(EnumAttribute[TransposeMode], SpacedOpaqueSyntaxAttribute):
    """`#gpu<mat_transpose_mode TRANSPOSE>`. xDSL 0.74 lacks this attribute."""

    name = "gpu.mat_transpose_mode"


class Prune2To4(StrEnum):
    NONE = "NONE"
    PRUNE_ONLY = "PRUNE_ONLY"
    PRUNE_AND_CHECK = "PRUNE_AND_CHECK"


@irdl_attr_definition
class Prune2To4Attr(EnumAttribute[Prune2To4], SpacedOpaqueSyntaxAttribute):
    """`#gpu<prune_2to4_spmat_flag PRUNE_AND_CHECK>`. xDSL 0.74 lacks this attribute."""

    name = "gpu.prune_2to4_spmat_flag"


class SpGEMMKind(StrEnum):
    WORK_ESTIMATION = "WORK_ESTIMATION"
    COMPUTE = "COMPUTE"


@irdl_attr_definition
class SpGEMMKindAttr(EnumAttribute[SpGEMMKind], SpacedOpaqueSyntaxAttribute):
    """`#gpu<spgemm_work_estimation_or_compute_kind COMPUTE>`. xDSL 0.74 lacks this attribute."""

    name = "gpu.spgemm_work_estimation_or_compute_kind"


@irdl_custom_directive
class AsyncDependencies(CustomDirective):
    """MLIR's `custom<AsyncDependencies>(type($asyncToken), $asyncDependencies)`."""

    token: TypeDirective
    deps: VariadicOperandVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        is_async = parser.parse_optional_keyword("async") is not None
        names = parser.parse_optional_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        self.token.set(state, _token_types(is_async))
        self.deps.set(state, names or [])
        self.deps.set_types(state, [_TOKEN] * len(names or []))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        # The token, when there is one, is the op's last result.
        token = op.results[-1] if self.token.get(op) else None
        print_async(printer, token, self.deps.get(op))


_ASYNC = "custom<AsyncDependencies>(type($asyncToken), $asyncDependencies)"
_SPMAT = SpMatHandleType()
_DNTENSOR = DnTensorHandleType()
_SPGEMM = SpGEMMOpHandleType()
_ANY_MEMREF = base(MemRefType)


# A transpose mode is `NON_TRANSPOSE` when left out (and then not printed).
_NON_TRANSPOSE = TransposeModeAttr(TransposeMode.NON_TRANSPOSE)


class _SparseOp(IRDLOperation):
    """Every sparse op may run asynchronously: after the tokens it is given (its first
    operands, declared by each op to come first), giving one (its last result)."""

    asyncToken = opt_result_def(_TOKEN)
    custom_directives = (AsyncDependencies,)


def _mode() -> TransposeModeAttr:
    return prop_def(TransposeModeAttr, default_value=_NON_TRANSPOSE)


# Properties are listed (and defaults filled in) in declaration order, each class's own
# before its bases': each set of modes is declared in one class, in MLIR's order.
class _OneModeOp(_SparseOp):
    """A sparse computation with a transposable first matrix, in a given element type."""

    modeA = _mode()
    computeType = prop_def(TypeAttribute)


class _TwoModesOp(_SparseOp):
    """A sparse computation with two transposable matrices, in a given element type."""

    modeA = _mode()
    modeB = _mode()
    computeType = prop_def(TypeAttribute)


@irdl_op_definition
class CreateDnTensorOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_dn_tensor"

    asyncDependencies = var_operand_def(_TOKEN)
    memref = operand_def(_ANY_MEMREF)
    dims = var_operand_def(_INDEX)
    dnTensor = result_def(_DNTENSOR)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = f"{_ASYNC} $memref `,` $dims attr-dict `:` type($dims) `into` type($memref)"


@irdl_op_definition
class DestroyDnTensorOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.destroy_dn_tensor"

    asyncDependencies = var_operand_def(_TOKEN)
    dnTensor = operand_def(_DNTENSOR)
    assembly_format = f"{_ASYNC} $dnTensor attr-dict"


@irdl_op_definition
class DestroySpMatOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.destroy_sp_mat"

    asyncDependencies = var_operand_def(_TOKEN)
    spmat = operand_def(_SPMAT)
    assembly_format = f"{_ASYNC} $spmat attr-dict"


def _sizes_and_arrays(sizes: Sequence[str], arrays: Sequence[str]) -> str:
    """`%size, ..., %array, ... attr-dict : array types` (the sizes are indices)."""
    operands = " `,` ".join(f"${name}" for name in (*sizes, *arrays))
    types = " `,` ".join(f"type(${name})" for name in arrays)
    return f"{_ASYNC} {operands} attr-dict `:` {types}"


@irdl_op_definition
class CreateCooOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_coo"

    asyncDependencies = var_operand_def(_TOKEN)
    rows = operand_def(_INDEX)
    cols = operand_def(_INDEX)
    nnz = operand_def(_INDEX)
    rowIdxs = operand_def(_ANY_MEMREF)
    colIdxs = operand_def(_ANY_MEMREF)
    values = operand_def(_ANY_MEMREF)
    spmat = result_def(_SPMAT)

    assembly_format = _sizes_and_arrays(("rows", "cols", "nnz"), ("rowIdxs", "colIdxs", "values"))


@irdl_op_definition
class CreateCooAoSOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_coo_aos"

    asyncDependencies = var_operand_def(_TOKEN)
    rows = operand_def(_INDEX)
    cols = operand_def(_INDEX)
    nnz = operand_def(_INDEX)
    idxs = operand_def(_ANY_MEMREF)
    values = operand_def(_ANY_MEMREF)
    spmat = result_def(_SPMAT)

    assembly_format = _sizes_and_arrays(("rows", "cols", "nnz"), ("idxs", "values"))


@irdl_op_definition
class CreateCsrOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_csr"

    asyncDependencies = var_operand_def(_TOKEN)
    rows = operand_def(_INDEX)
    cols = operand_def(_INDEX)
    nnz = operand_def(_INDEX)
    rowPos = operand_def(_ANY_MEMREF)
    colIdxs = operand_def(_ANY_MEMREF)
    values = operand_def(_ANY_MEMREF)
    spmat = result_def(_SPMAT)

    assembly_format = _sizes_and_arrays(("rows", "cols", "nnz"), ("rowPos", "colIdxs", "values"))


@irdl_op_definition
class CreateCscOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_csc"

    asyncDependencies = var_operand_def(_TOKEN)
    rows = operand_def(_INDEX)
    cols = operand_def(_INDEX)
    nnz = operand_def(_INDEX)
    colPos = operand_def(_ANY_MEMREF)
    rowIdxs = operand_def(_ANY_MEMREF)
    values = operand_def(_ANY_MEMREF)
    spmat = result_def(_SPMAT)

    assembly_format = _sizes_and_arrays(("rows", "cols", "nnz"), ("colPos", "rowIdxs", "values"))


@irdl_op_definition
class CreateBsrOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_bsr"

    asyncDependencies = var_operand_def(_TOKEN)
    brows = operand_def(_INDEX)
    bcols = operand_def(_INDEX)
    bnnz = operand_def(_INDEX)
    rBlockSize = operand_def(_INDEX)
    cBlockSize = operand_def(_INDEX)
    bRowPos = operand_def(_ANY_MEMREF)
    bColIdxs = operand_def(_ANY_MEMREF)
    values = operand_def(_ANY_MEMREF)
    spmat = result_def(_SPMAT)

    assembly_format = _sizes_and_arrays(
        ("brows", "bcols", "bnnz", "rBlockSize", "cBlockSize"), ("bRowPos", "bColIdxs", "values")
    )


@irdl_op_definition
class Create2To4SpMatOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.create_2to4_spmat"

    asyncDependencies = var_operand_def(_TOKEN)
    rows = operand_def(_INDEX)
    cols = operand_def(_INDEX)
    memref = operand_def(_ANY_MEMREF)
    pruneFlag = prop_def(Prune2To4Attr)
    spMat = result_def(_SPMAT)

    assembly_format = (
        f"{_ASYNC} `{{` $pruneFlag `}}` $rows `,` $cols `,` $memref attr-dict `:` type($memref)"
    )


@irdl_op_definition
class SpMatGetSizeOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spmat_get_size"

    asyncDependencies = var_operand_def(_TOKEN)
    spmat = operand_def(_SPMAT)
    rows = result_def(_INDEX)
    cols = result_def(_INDEX)
    nnz = result_def(_INDEX)

    assembly_format = f"{_ASYNC} $spmat attr-dict"


@irdl_op_definition
class SetCsrPointersOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.set_csr_pointers"

    asyncDependencies = var_operand_def(_TOKEN)
    spmat = operand_def(_SPMAT)
    positions = operand_def(_ANY_MEMREF)
    coordinates = operand_def(_ANY_MEMREF)
    values = operand_def(_ANY_MEMREF)

    assembly_format = (
        f"{_ASYNC} $spmat `,` $positions `,` $coordinates `,` $values attr-dict"
        " `:` type($positions) `,` type($coordinates) `,` type($values)"
    )


_A = "$spmatA (`{` $modeA^ `}`)?"
_DN_AB = "$dnmatA (`{` $modeA^ `}`)? `,` $dnmatB (`{` $modeB^ `}`)?"


@irdl_op_definition
class SpMVBufferSizeOp(_OneModeOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spmv_buffer_size"

    asyncDependencies = var_operand_def(_TOKEN)
    spmatA = operand_def(_SPMAT)
    dnX = operand_def(_DNTENSOR)
    dnY = operand_def(_DNTENSOR)
    bufferSz = result_def(_INDEX)

    assembly_format = f"{_ASYNC} {_A} `,` $dnX `,` $dnY attr-dict `into` $computeType"


@irdl_op_definition
class SpMVOp(_OneModeOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spmv"

    asyncDependencies = var_operand_def(_TOKEN)
    spmatA = operand_def(_SPMAT)
    dnX = operand_def(_DNTENSOR)
    dnY = operand_def(_DNTENSOR)
    buffer = operand_def(_ANY_MEMREF)

    assembly_format = (
        f"{_ASYNC} {_A} `,` $dnX `,` $dnY `,` $buffer attr-dict `:` type($buffer)"
        " `into` $computeType"
    )


@irdl_op_definition
class SpMMBufferSizeOp(_TwoModesOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spmm_buffer_size"

    asyncDependencies = var_operand_def(_TOKEN)
    spmatA = operand_def(_SPMAT)
    dnmatB = operand_def(_DNTENSOR)
    dnmatC = operand_def(_DNTENSOR)
    bufferSzs = var_result_def(_INDEX)
    # Redeclared after bufferSzs: the result order is MLIR's.
    asyncToken = opt_result_def(_TOKEN)
    irdl_options = (AttrSizedResultSegments(as_property=True),)

    assembly_format = (
        f"{_ASYNC} {_A} `,` $dnmatB (`{{` $modeB^ `}}`)? `,` $dnmatC attr-dict"
        " `:` type($bufferSzs) `into` $computeType"
    )


@irdl_op_definition
class SpMMOp(_TwoModesOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spmm"

    asyncDependencies = var_operand_def(_TOKEN)
    spmatA = operand_def(_SPMAT)
    dnmatB = operand_def(_DNTENSOR)
    dnmatC = operand_def(_DNTENSOR)
    buffers = var_operand_def(_ANY_MEMREF)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        f"{_ASYNC} {_A} `,` $dnmatB (`{{` $modeB^ `}}`)? `,` $dnmatC `,` $buffers attr-dict"
        " `:` type($buffers) `into` $computeType"
    )


@irdl_op_definition
class SDDMMBufferSizeOp(_TwoModesOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.sddmm_buffer_size"

    asyncDependencies = var_operand_def(_TOKEN)
    dnmatA = operand_def(_DNTENSOR)
    dnmatB = operand_def(_DNTENSOR)
    spmatC = operand_def(_SPMAT)
    bufferSz = result_def(_INDEX)

    assembly_format = f"{_ASYNC} {_DN_AB} `,` $spmatC attr-dict `into` $computeType"


@irdl_op_definition
class SDDMMOp(_TwoModesOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.sddmm"

    asyncDependencies = var_operand_def(_TOKEN)
    dnmatA = operand_def(_DNTENSOR)
    dnmatB = operand_def(_DNTENSOR)
    spmatC = operand_def(_SPMAT)
    buffer = operand_def(_ANY_MEMREF)

    assembly_format = (
        f"{_ASYNC} {_DN_AB} `,` $spmatC `,` $buffer attr-dict `:` type($buffer) `into` $computeType"
    )


@irdl_op_definition
class SpGEMMCreateDescrOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spgemm_create_descr"

    asyncDependencies = var_operand_def(_TOKEN)
    desc = result_def(_SPGEMM)
    assembly_format = f"{_ASYNC} attr-dict"


@irdl_op_definition
class SpGEMMDestroyDescrOp(_SparseOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spgemm_destroy_descr"

    asyncDependencies = var_operand_def(_TOKEN)
    desc = operand_def(_SPGEMM)
    assembly_format = f"{_ASYNC} $desc attr-dict"


_SPGEMM_AB = "$spmatA (`{` $modeA^ `}`)? `,` $spmatB (`{` $modeB^ `}`)?"


@irdl_op_definition
class SpGEMMWorkEstimationOrComputeOp(_TwoModesOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spgemm_work_estimation_or_compute"

    asyncDependencies = var_operand_def(_TOKEN)
    desc = operand_def(_SPGEMM)
    spmatA = operand_def(_SPMAT)
    spmatB = operand_def(_SPMAT)
    spmatC = operand_def(_SPMAT)
    bufferSz = operand_def(_INDEX)
    buffer = operand_def(_ANY_MEMREF)
    kind = prop_def(SpGEMMKindAttr)
    bufferSzNew = result_def(_INDEX)

    assembly_format = (
        f"{_ASYNC} `{{` $kind `}}` {_SPGEMM_AB} `,` $spmatC `,` $desc `,` $bufferSz `,` $buffer"
        " attr-dict `:` $computeType `into` type($buffer)"
    )


@irdl_op_definition
class SpGEMMCopyOp(_TwoModesOp):
    """xDSL 0.74 lacks this op."""

    name = "gpu.spgemm_copy"

    asyncDependencies = var_operand_def(_TOKEN)
    desc = operand_def(_SPGEMM)
    spmatA = operand_def(_SPMAT)
    spmatB = operand_def(_SPMAT)
    spmatC = operand_def(_SPMAT)

    assembly_format = f"{_ASYNC} {_SPGEMM_AB} `,` $spmatC `,` $desc attr-dict `:` $computeType"


SPARSE_OPS: tuple[type[IRDLOperation], ...] = (
    CreateDnTensorOp,
    DestroyDnTensorOp,
    DestroySpMatOp,
    CreateCooOp,
    CreateCooAoSOp,
    CreateCsrOp,
    CreateCscOp,
    CreateBsrOp,
    Create2To4SpMatOp,
    SpMatGetSizeOp,
    SetCsrPointersOp,
    SpMVBufferSizeOp,
    SpMVOp,
    SpMMBufferSizeOp,
    SpMMOp,
    SDDMMBufferSizeOp,
    SDDMMOp,
    SpGEMMCreateDescrOp,
    SpGEMMDestroyDescrOp,
    SpGEMMWorkEstimationOrComputeOp,
    SpGEMMCopyOp,
)


# The ops whose regions are compiled for the device. xDSL's classes, which dhir's
# subclass, so that ops built with either count.
# The ops whose bodies are compiled for the device (`in_device_code`).
DEVICE_CODE = (gpu.ModuleOp, gpu.FuncOp, gpu.LaunchOp)


def in_device_code(op: Operation) -> bool:
    """Whether `op` is compiled for the device: inside a `gpu.module` or `gpu.func`, or
    inside a `gpu.launch` body (which gpu-kernel-outlining moves into a `gpu.module`).
    The one rule for "is this GPU code"."""
    return enclosing(op, DEVICE_CODE) is not None


_ops = with_replaced_ops(
    gpu.GPU,
    AllocOp,
    AllReduceOp,
    BarrierOp,
    BlockDimOp,
    BlockIdOp,
    DeallocOp,
    FuncOp,
    GlobalIdOp,
    GridDimOp,
    HostRegisterOp,
    HostUnregisterOp,
    LaneIdOp,
    LaunchFuncOp,
    LaunchOp,
    MemcpyOp,
    ModuleOp,
    NumSubgroupsOp,
    ReturnOp,
    SetDefaultDeviceOp,
    SubgroupIdOp,
    SubgroupSizeOp,
    TerminatorOp,
    ThreadIdOp,
    WaitOp,
    YieldOp,
    SubgroupReduceOp,
    PrintfOp,
    ShuffleOp,
    BinaryOp,
    RotateOp,
    MemsetOp,
    WarpExecuteOnLane0Op,
    *MMA_OPS,
    *SPARSE_OPS,
)

GPU: Dialect = Dialect(
    _ops.name,
    list(_ops.operations),
    [
        *(a for a in _ops.attributes if a.name != AllReduceOperationAttr.name),
        AllReduceOperationAttr,
        AddressSpaceAttr,
        ShuffleModeAttr,
        MMAMatrixType,
        MMAElementwiseAttr,
        SpMatHandleType,
        DnTensorHandleType,
        SpGEMMOpHandleType,
        TransposeModeAttr,
        Prune2To4Attr,
        SpGEMMKindAttr,
    ],
)
