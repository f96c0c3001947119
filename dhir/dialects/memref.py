"""The memref dialect with MLIR 22's custom syntax for the ops xDSL 0.74 prints only
generically (copy, cast, global, memory_space_cast, rank, atomic_rmw, alloca_scope,
extract_aligned_pointer_as_index), load/store reporting a wrong index count as a
verification error rather than a crash, copies of unranked memrefs, dma_start/dma_wait
with MLIR's flat operand lists, and the ops xDSL lacks (generic_atomic_rmw, realloc,
reshape, prefetch, transpose). dhir's effect analysis does not list realloc, reshape, prefetch or
the dma ops: it takes them to read and write all their operands reach.
"""

from collections.abc import Callable, Sequence
from typing import TypeVar

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    BoolAttr,
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    UnrankedMemRefType,
    i1,
    i32,
    i64,
)
from xdsl.dialects.utils import verify_dynamic_index_list
from xdsl.dialects.utils.reshape_ops_utils import (
    ArrayOfIntArrayAttr,
    verify_reshape_like_types,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    OperandDef,
    ParsePropInAttrDict,
    irdl_op_definition,
    irdl_to_attr_constraint,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, is_side_effect_free
from xdsl.utils.exceptions import VerifyException

# What the rest of dhir uses of xDSL's memref dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.memref is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.memref import (
    AllocOp as AllocOp,
    AllocaOp as AllocaOp,
    AssumeAlignmentOp as AssumeAlignmentOp,
    DeallocOp as DeallocOp,
    DimOp as DimOp,
    ExtractStridedMetaDataOp as ExtractStridedMetaDataOp,
    GetGlobalOp as GetGlobalOp,
    ViewOp as ViewOp,
)
# isort: on

from dhir.dialects import with_replaced_ops
from dhir.dialects.format import (
    custom_format,
    has_terminator,
    optional_property,
    parse_type_pair,
    print_type_list,
    print_type_pair,
    redefine,
    redefine_operands,
    split_properties,
)
from dhir.dialects.layouts import (
    collapsed_layout,
    expanded_layout,
    is_identity_layout,
    out_of_bounds,
    reduces_to,
    strided_layout,
    strides_and_offset,
    subview_layout,
)

OpT = TypeVar("OpT", bound=type[IRDLOperation])


# --- ops ----------------------------------------------------------------------------


def _reraise_as_verify_error(verify: Callable[[], None]) -> None:
    try:
        verify()
    except VerifyException:
        raise
    except Exception as error:  # xDSL 0.74 raises a bare Exception on a bad index count
        raise VerifyException(str(error)) from error


class LoadOp(memref.LoadOp):
    """xDSL 0.74 crashes on a wrong index count instead of failing verification."""

    def verify_(self) -> None:
        _reraise_as_verify_error(super().verify_)


class StoreOp(memref.StoreOp):
    """xDSL 0.74 crashes on a wrong index count instead of failing verification."""

    def verify_(self) -> None:
        _reraise_as_verify_error(super().verify_)


class ExpandShapeOp(memref.ExpandShapeOp):
    """MLIR's checks, which xDSL 0.74 lacks: the groups and sizes agree with both types,
    `output_shape` with the result's sizes, and the result's layout is the expansion of
    the source's."""

    def verify_(self) -> None:
        source, result = self.src.type, self.result.type
        assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
        _check_groups(source, result, self.reassociation)
        given = self.static_output_shape.get_values()
        if list(given) != list(result.get_shape()):
            raise VerifyException(
                f"output_shape {_shape_text(given)} does not match the result's sizes "
                f"{_shape_text(result.get_shape())} (a run-time size where the type has ?)"
            )
        _same_layout(result, *expanded_layout(source, _groups(self), result.get_shape()))
        _same_form(source, result)


class SubviewOp(memref.SubviewOp):
    """MLIR's checks, which xDSL 0.74 lacks: static offsets and sizes stay inside the
    source, and the result type is the view's layout (dimensions of size 1 may be
    dropped)."""

    @staticmethod
    def from_static_parameters(
        source: SSAValue | Operation,
        source_type: MemRefType,
        offsets: Sequence[int],
        sizes: Sequence[int],
        strides: Sequence[int],
        reduce_rank: bool = False,
    ) -> "SubviewOp":
        """xDSL's constructor of a static subview, building this class (xDSL's builds its
        own, which the interpreter, keyed on classes, would not know)."""
        result = memref.SubviewOp.infer_result_type(
            source_type, offsets, sizes, strides, reduce_rank=reduce_rank
        )
        return SubviewOp(SSAValue.get(source), [], [], [], offsets, sizes, strides, result)

    def verify_(self) -> None:
        super().verify_()
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
        offsets = self.static_offsets.get_values()
        sizes = self.static_sizes.get_values()
        strides = self.static_strides.get_values()
        if not len(offsets) == len(sizes) == len(strides) == len(source.get_shape()):
            raise VerifyException(
                f"a subview of a rank-{len(source.get_shape())} memref takes that many "
                "offsets, sizes and strides"
            )
        why = out_of_bounds(source.get_shape(), offsets, sizes, strides)
        if why is not None:
            raise VerifyException(f"subview out of bounds: {why}")
        if strided_layout(source) is None:
            raise VerifyException(
                f"the source type {source} is not strided (MLIR reads no strides and "
                "offset from its layout map): a subview needs them"
            )
        if source.memory_space != result.memory_space:
            raise VerifyException(
                f"the result type {result} must be in the source's memory space "
                f"({source.memory_space})"
            )
        expected = subview_layout(source, offsets, sizes, strides)
        if not reduces_to(expected, result, sizes):
            shape, layout, offset = expected
            wanted = MemRefType(source.element_type, shape, StridedLayoutAttr(layout, offset))
            raise VerifyException(
                f"the result type must be {wanted} or that with dimensions of size 1 "
                f"dropped, not {result}"
            )


@custom_format(
    "$source `to` `offset` `` `:` custom<DynamicIndexList>($offsets, $static_offsets) `` `,` "
    "`sizes` `` `:` custom<DynamicIndexList>($sizes, $static_sizes) `` `,` "
    "`strides` `` `:` custom<DynamicIndexList>($strides, $static_strides) "
    "attr-dict `:` type($source) `to` type($result)"
)
@redefine_operands({"source": OperandDef(irdl_to_attr_constraint(MemRefType | UnrankedMemRefType))})
class ReinterpretCastOp(memref.ReinterpretCastOp):
    """MLIR 22's checks: xDSL 0.74 lacks those of the layout (a result type's static
    offset or stride, an identity layout's included, must be the op's: a run-time one needs
    `strided<[...], offset: ?>`), of the element type and memory space, and of negative
    offsets and sizes, and wrongly refuses a dynamic result size for a static one. The
    source may be unranked (`memref<*xf32>`), as in MLIR; xDSL refuses it."""

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType | UnrankedMemRefType)
        assert isinstance(result, MemRefType)
        offsets = self.static_offsets.get_values()
        sizes = self.static_sizes.get_values()
        strides = self.static_strides.get_values()
        rank = len(result.get_shape())
        for what, values, count in (
            ("offset", offsets, 1),
            ("size", sizes, rank),
            ("stride", strides, rank),
        ):
            if len(values) != count:
                raise VerifyException(f"expected {count} {what} values, got {len(values)}")
        for what, values, dynamic in (
            ("offset", offsets, self.offsets),
            ("size", sizes, self.sizes),
            ("stride", strides, self.strides),
        ):
            verify_dynamic_index_list(values, dynamic, DYNAMIC_INDEX, f" in the {what} arguments")
        for what, values in (("offsets", offsets), ("sizes", sizes)):
            if any(v < 0 and v != DYNAMIC_INDEX for v in values):
                bad = next(v for v in values if v < 0 and v != DYNAMIC_INDEX)
                raise VerifyException(f"expected {what} to be non-negative, but got {bad}")
        if (source.memory_space, source.element_type) != (
            result.memory_space,
            result.element_type,
        ):
            raise VerifyException(
                f"the source {source} and result {result} must have the same element type "
                "and memory space"
            )
        for dim, (got, given) in enumerate(zip(result.get_shape(), sizes)):
            if got != DYNAMIC_INDEX and got != given:
                raise VerifyException(
                    f"the result type has size {got} in dimension {dim}, where the op gives "
                    f"{_index_text(given)}"
                )
        layout = strided_layout(result)
        if layout is None:
            raise VerifyException(f"the result type {result} has no strided layout")
        _check_cast_layout(result, *layout, strides, offsets[0])


def _check_cast_layout(
    result: MemRefType,
    result_strides: Sequence[int | None],
    result_offset: int | None,
    strides: Sequence[int],
    offset: int,
) -> None:
    """A static offset or stride of the result type must be the reinterpret_cast's."""
    open_layout = StridedLayoutAttr(
        [None if given == DYNAMIC_INDEX else got for got, given in zip(result_strides, strides)],
        None if offset == DYNAMIC_INDEX else result_offset,
    )
    open_type = MemRefType(
        result.element_type, result.get_shape(), open_layout, result.memory_space
    )
    fix = f"; a run-time one needs a result type that leaves it open: {open_type}"
    if result_offset is not None and result_offset != offset:
        raise VerifyException(
            f"the result type has offset {result_offset}, where the op gives "
            f"{_index_text(offset)}{fix if offset == DYNAMIC_INDEX else ''}"
        )
    for dim, (got, given) in enumerate(zip(result_strides, strides)):
        if got is not None and got != given:
            raise VerifyException(
                f"the result type has stride {got} in dimension {dim}, where the op gives "
                f"{_index_text(given)}{fix if given == DYNAMIC_INDEX else ''}"
            )


def _index_text(value: int) -> str:
    return "a run-time value" if value == DYNAMIC_INDEX else str(value)


class CollapseShapeOp(memref.CollapseShapeOp):
    """MLIR's checks, which xDSL 0.74 lacks: the groups and sizes agree with both types,
    each group's dimensions are contiguous in the source, and the result's layout is the
    collapse of the source's."""

    def verify_(self) -> None:
        source, result = self.src.type, self.result.type
        assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
        _check_groups(result, source, self.reassociation)
        _same_layout(result, *collapsed_layout(source, _groups(self)))
        _same_form(source, result)


def _same_form(source: MemRefType, result: MemRefType) -> None:
    """MLIR 22 builds a reshape's result type with the identity layout where the source's
    is the identity map (none, `strided<[1]>` of one dimension), else with a strided one,
    and wants the result type to be exactly that: `strided<[4, 1]>` is not
    `memref<4x4xf32>`'s layout to it, though its strides are the same."""
    identity = _identity_map(source)
    written = (
        is_identity_layout(result) if identity else isinstance(result.layout, StridedLayoutAttr)
    )
    if not written:
        strides, offset = strides_and_offset(result)
        wanted = (
            MemRefType(result.element_type, result.get_shape(), NoneAttr(), result.memory_space)
            if identity
            else MemRefType(
                result.element_type,
                result.get_shape(),
                StridedLayoutAttr(strides, offset),
                result.memory_space,
            )
        )
        raise VerifyException(f"the result type must be written {wanted}, not {result}")


def _identity_map(memref: MemRefType) -> bool:
    """Whether MLIR takes `memref`'s layout as the identity map: none, or a strided one of
    offset 0 with at most one dimension, of stride 1."""
    layout = memref.layout
    if is_identity_layout(memref):
        return True
    strides, offset = strides_and_offset(memref)
    return isinstance(layout, StridedLayoutAttr) and offset == 0 and strides in ([], [1])


def _check_groups(collapsed: MemRefType, expanded: MemRefType, groups: ArrayOfIntArrayAttr) -> None:
    # xDSL's check wants a group per dimension; MLIR also reshapes a rank-0 memref to and
    # from dimensions of size 1, with no group.
    if collapsed.get_shape() or not all(d == 1 for d in expanded.get_shape()):
        verify_reshape_like_types(collapsed, expanded, groups)


def _groups(op: memref.AlterShapeOperation) -> list[list[int]]:
    return [[d.value.data for d in group] for group in op.reassociation]


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join("?" if d == DYNAMIC_INDEX else str(d) for d in shape) + "]"


def _same_layout(result: MemRefType, strides: Sequence[int | None], offset: int | None) -> None:
    declared, at = strides_and_offset(result)
    if (list(declared), at) != (list(strides), offset):
        wanted = StridedLayoutAttr(list(strides), offset)
        raise VerifyException(f"the result's layout must be {wanted}, not {result.layout}")


@custom_format("$source `,` $destination attr-dict `:` type($source) `to` type($destination)")
@redefine_operands(
    {
        name: OperandDef(irdl_to_attr_constraint(MemRefType | UnrankedMemRefType))
        for name in ("source", "destination")
    }
)
class CopyOp(memref.CopyOp):
    """xDSL 0.74 has only the generic form, and no copies of unranked memrefs."""

    def verify_(self) -> None:
        # As MLIR: shapes need only be compatible (a dynamic size matches any size;
        # an unranked memref any shape), so a static buffer copies to a dynamic one.
        source, dest = self.source.type, self.destination.type
        if isinstance(source, MemRefType) and isinstance(dest, MemRefType):
            shapes = source.get_shape(), dest.get_shape()
            if len(shapes[0]) != len(shapes[1]) or any(
                a != b and a != DYNAMIC_INDEX and b != DYNAMIC_INDEX for a, b in zip(*shapes)
            ):
                raise VerifyException(
                    f"memref.copy needs compatible shapes, got {source} and {dest}"
                )
        if _element_type(source) != _element_type(dest):
            raise VerifyException(
                "memref.copy needs source and destination of the same element type"
            )


def _element_type(memref_type: Attribute) -> Attribute | None:
    if isinstance(memref_type, MemRefType | UnrankedMemRefType):
        return memref_type.element_type
    return None


@custom_format("$source attr-dict `:` type($source) `to` type($dest)")
class CastOp(memref.CastOp):
    """xDSL 0.74 has only the generic form, and checks nothing of the two types: MLIR 22
    casts only between the same element type and memory space, shapes whose static
    sizes agree, and layouts whose static strides and offsets agree (a run-time one on
    either side agrees with any); not unranked to unranked."""

    # xDSL's factory (`get`) builds xDSL's class.
    def __init__(self, source: SSAValue | Operation, result_type: Attribute):
        super().__init__(operands=[source], result_types=[result_type])

    def verify_(self) -> None:
        source, result = self.source.type, self.dest.type
        why = _cast_incompatible(source, result)
        if why is not None:
            raise VerifyException(f"cannot cast {source} to {result}: {why}")


def _cast_incompatible(source: Attribute, result: Attribute) -> str | None:
    """Why MLIR 22's memref.cast refuses to cast `source` to `result` (None: it does not)."""
    if isinstance(source, UnrankedMemRefType) and isinstance(result, UnrankedMemRefType):
        return "a cast from an unranked memref to an unranked one is not supported"
    if not isinstance(source, MemRefType | UnrankedMemRefType) or not isinstance(
        result, MemRefType | UnrankedMemRefType
    ):
        return "both must be memrefs"
    if source.element_type != result.element_type:
        return "the element types differ"
    if source.memory_space != result.memory_space:
        return "the memory spaces differ"
    if not isinstance(source, MemRefType) or not isinstance(result, MemRefType):
        return None
    if source.layout != result.layout:
        mine, theirs = strided_layout(source), strided_layout(result)
        if mine is None or theirs is None:
            return "a layout is not strided"
        if len(mine[0]) != len(theirs[0]):
            return "the ranks differ"
        pairs = [("offsets", mine[1], theirs[1])]
        pairs += [("strides", a, b) for a, b in zip(mine[0], theirs[0])]
        for what, a, b in pairs:
            if a is not None and b is not None and a != b:
                return f"the static {what} differ ({a} and {b})"
    shapes = source.get_shape(), result.get_shape()
    if len(shapes[0]) != len(shapes[1]):
        return "the ranks differ"
    if any(DYNAMIC_INDEX not in (a, b) and a != b for a, b in zip(*shapes)):
        return "the static sizes differ"
    return None


@custom_format("$source attr-dict `:` type($source) `to` type($dest)")
class MemorySpaceCastOp(memref.MemorySpaceCastOp):
    """xDSL 0.74 has only the generic form."""


@custom_format("$source attr-dict `:` type($source)")
@redefine_operands({"source": OperandDef(irdl_to_attr_constraint(MemRefType | UnrankedMemRefType))})
class RankOp(memref.RankOp):
    """xDSL 0.74 has only the generic form, and no rank of an unranked memref (what the
    op is for)."""

    def __init__(self, source: SSAValue | Operation):
        super().__init__(operands=[source], result_types=[IndexType()])


@custom_format("$source attr-dict `:` type($source) `->` type($aligned_pointer)")
class ExtractAlignedPointerAsIndexOp(memref.ExtractAlignedPointerAsIndexOp):
    """xDSL 0.74 has only the generic form."""

    def __init__(self, source: SSAValue | Operation):
        super().__init__(operands=[source], result_types=[IndexType()])


@custom_format("attr-dict ($ops^ `:` type($ops))?")
class AllocaScopeReturnOp(memref.AllocaScopeReturnOp):
    """xDSL 0.74 has only the generic form."""


class AllocaScopeOp(memref.AllocaScopeOp):
    """`memref.alloca_scope (-> (types))? region attr-dict`; like MLIR, the return is
    implicit (neither parsed nor printed) when the scope has no results.
    xDSL 0.74 has only the generic form."""

    def print(self, printer: Printer) -> None:
        if self.res:
            printer.print_string(" -> (")
            print_type_list(printer, self.res.types)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.scope, print_block_terminators=bool(self.res))
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "AllocaScopeOp":
        types: list[Attribute] = []
        if parser.parse_optional_punctuation("->"):
            listed: list[Attribute] | None = parser.parse_optional_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_type
            )
            types = listed or [parser.parse_type()]
        region = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        if not region.blocks:
            region.add_block(Block())
        block = region.blocks[-1]
        if not has_terminator(block):
            block.add_op(AllocaScopeReturnOp.build(operands=[[]]))
        return cls.build(result_types=[types], regions=[region], attributes=attrs)


# The ids of arith.atomic_rmw_kind, as `mlir-opt-22 --mlir-print-op-generic` shows them.
ATOMIC_RMW_KINDS = (
    "addf", "addi", "andi", "assign", "maximumf", "maxnumf", "maxs", "maxu",
    "minimumf", "minnumf", "mins", "minu", "mulf", "muli", "ori", "xori",
)  # fmt: skip


_FLOAT_KINDS = ("addf", "maximumf", "maxnumf", "minimumf", "minnumf", "mulf")


class AtomicRMWOp(memref.AtomicRMWOp):
    """`memref.atomic_rmw kind %value, %memref[%i] attr-dict : (T, memref) -> T`. xDSL 0.74 has
    only the generic form."""

    def verify_(self) -> None:
        super().verify_()
        if not 0 <= self.kind.value.data < len(ATOMIC_RMW_KINDS):
            raise VerifyException(f"unknown atomic_rmw kind {self.kind.value.data}")
        # As MLIR 22: the kind says whether the value is a float or an integer.
        kind = ATOMIC_RMW_KINDS[self.kind.value.data]
        value = self.value.type
        if kind in _FLOAT_KINDS and not isinstance(value, AnyFloat):
            raise VerifyException(f"atomic_rmw {kind} takes a float, not {value}")
        if kind not in _FLOAT_KINDS and kind != "assign" and not isinstance(value, IntegerType):
            raise VerifyException(f"atomic_rmw {kind} takes an integer, not {value}")

    def print(self, printer: Printer) -> None:
        kind = self.kind.value.data
        # Invalid IR is printed in diagnostics too: show the number, don't crash.
        name = ATOMIC_RMW_KINDS[kind] if 0 <= kind < len(ATOMIC_RMW_KINDS) else kind
        printer.print_string(f" {name} ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        printer.print_operand(self.memref)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_operand)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        print_type_list(printer, (self.value.type, self.memref.type))
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> "AtomicRMWOp":
        kind = ATOMIC_RMW_KINDS.index(parser.parse_keyword_in(ATOMIC_RMW_KINDS))
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        target = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        if len(types) != 2:
            parser.raise_error("expected (value type, memref type)", pos, parser.pos)
        operands = parser.resolve_operands([value, target], types, pos)
        index = [parser.resolve_operand(i, IndexType()) for i in indices]
        return cls.build(
            operands=[operands[0], operands[1], index],
            result_types=[result_type],
            properties={"kind": IntegerAttr(kind, i64)},
            attributes=attrs,
        )


@irdl_op_definition
class AtomicYieldOp(IRDLOperation):
    """`memref.atomic_yield %v : type`: the value a `generic_atomic_rmw` stores. xDSL 0.74 lacks
    this op."""

    name = "memref.atomic_yield"

    result = operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GenericAtomicRMWOp)))

    assembly_format = "$result attr-dict `:` type($result)"


@irdl_op_definition
class GenericAtomicRMWOp(IRDLOperation):
    """`%r = memref.generic_atomic_rmw %m[%i, ...] : memref-type region attr-dict`: reads
    `%m[%i, ...]`, runs the region on that value and stores what it yields, atomically;
    the result is the value read. xDSL 0.74 lacks this op."""

    name = "memref.generic_atomic_rmw"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def()
    atomic_body = region_def("single_block")

    def verify_(self) -> None:
        memref_type = self.memref.type
        assert isinstance(memref_type, MemRefType)
        element = memref_type.element_type
        if self.result.type != element:
            raise VerifyException(
                f"memref.generic_atomic_rmw result {self.result.type} is not the "
                f"element type {element} of its memref"
            )
        if len(self.indices) != memref_type.get_num_dims():
            raise VerifyException(
                f"memref.generic_atomic_rmw needs {memref_type.get_num_dims()} indices, "
                f"got {len(self.indices)}"
            )
        block = self.atomic_body.block
        if [a.type for a in block.args] != [element]:
            raise VerifyException(
                f"memref.generic_atomic_rmw body needs one block argument of type {element}"
            )
        last = block.last_op
        if not isinstance(last, AtomicYieldOp) or last.result.type != element:
            raise VerifyException(
                f"memref.generic_atomic_rmw body must end with memref.atomic_yield of {element}"
            )
        for op in block.ops:
            if op is not last and not is_side_effect_free(op):
                raise VerifyException(
                    f"body of memref.generic_atomic_rmw holds {op.name}, which may have "
                    "side effects; only side-effect free ops are allowed"
                )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.memref)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_operand)
        printer.print_string("] : ")
        printer.print_attribute(self.memref.type)
        printer.print_string(" ")
        printer.print_region(self.atomic_body)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "GenericAtomicRMWOp":
        target = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(":")
        pos = parser.pos
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error("expected a memref type", pos, parser.pos)
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict()
        return cls.build(
            operands=[
                parser.resolve_operand(target, memref_type),
                [parser.resolve_operand(i, IndexType()) for i in indices],
            ],
            result_types=[memref_type.element_type],
            regions=[body],
            attributes=attrs,
        )


@redefine(
    # MLIR lets both be absent: a public global, an external declaration.
    properties={
        "sym_visibility": optional_property(StringAttr),
        "initial_value": optional_property(AnyAttr()),
    }
)
class GlobalOp(memref.GlobalOp):
    """`memref.global "private"? constant? @name : type (= value|uninitialized)?
    attr-dict`; the value's tensor type is implied by the memref type.
    xDSL 0.74 has only the generic form."""

    def verify_(self) -> None:
        if self.alignment is not None:
            alignment = self.alignment.value.data
            if alignment <= 0 or alignment & (alignment - 1):
                raise VerifyException(f"alignment {alignment} is not a power of 2")

    def print(self, printer: Printer) -> None:
        if self.sym_visibility is not None:
            printer.print_string(" ")
            printer.print_string_literal(self.sym_visibility.data)
        if self.constant is not None:
            printer.print_string(" constant")
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" : ")
        printer.print_attribute(self.type)
        self._print_initial_value(printer)
        reserved = ("sym_visibility", "constant", "sym_name", "type", "initial_value")
        extra = {k: v for k, v in self.properties.items() if k not in reserved}
        printer.print_op_attributes(extra | self.attributes)

    def _print_initial_value(self, printer: Printer) -> None:
        value = self.initial_value
        if value is None:
            return
        printer.print_string(" = ")
        if isinstance(value, UnitAttr):
            printer.print_string("uninitialized")
        elif isinstance(value, DenseIntOrFPElementsAttr) and value.type == _tensor_of(self.type):
            print_elements(value, printer)
        else:
            printer.print_attribute(value)

    @classmethod
    def parse(cls, parser: Parser) -> "GlobalOp":
        props: dict[str, Attribute] = {}
        if (visibility := parser.parse_optional_str_literal()) is not None:
            props["sym_visibility"] = StringAttr(visibility)
        if parser.parse_optional_keyword("constant"):
            props["constant"] = UnitAttr()
        props["sym_name"] = parser.parse_symbol_name()
        parser.parse_punctuation(":")
        pos = parser.pos
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error("expected a memref type", pos, parser.pos)
        props["type"] = memref_type
        if parser.parse_optional_punctuation("="):
            props["initial_value"] = _parse_initial_value(parser, memref_type)
        more_props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        return cls.build(properties=props | more_props, attributes=attrs)


def print_elements(value: DenseIntOrFPElementsAttr, printer: Printer) -> None:
    """`dense<...>` without its type, as MLIR reads it. xDSL writes more than 100 elements
    as the hex of its own storage, a byte per element for i1, where MLIR reads i1 hex as
    packed bits (mlir-opt: "elements hex data size is invalid for provided type"): those
    are written as a list of `true` and `false`."""
    length = len(value)
    if value.get_element_type() != i1 or length <= 100 or value.is_splat():
        value.print_without_type(printer)
        return
    shape = value.get_shape() if value.shape_is_complete else None
    words = ["true" if bit else "false" for bit in value.get_values()]
    printer.print_string(f"dense<{_nested(words, shape or (length,))}>")


def _nested(words: Sequence[str], shape: Sequence[int]) -> str:
    """`words` as MLIR's nested list of `shape` (no dimension of size 0)."""
    if len(shape) <= 1:
        return f"[{', '.join(words)}]"
    step = len(words) // shape[0]
    rows = (_nested(words[at : at + step], shape[1:]) for at in range(0, len(words), step))
    return f"[{', '.join(rows)}]"


def _tensor_of(memref_type: MemRefType) -> TensorType[Attribute]:
    return TensorType(memref_type.element_type, memref_type.shape)


def _parse_initial_value(parser: Parser, memref_type: MemRefType) -> Attribute:
    if parser.parse_optional_keyword("uninitialized"):
        return UnitAttr()
    if parser.parse_optional_keyword("dense"):
        tensor = _tensor_of(memref_type)
        return parser.parse_dense_int_or_fp_elements_attr(tensor)  # pyright: ignore
    return parser.parse_attribute()


# --- ops xDSL 0.74 lacks ---------------------------------------------------------------


@irdl_op_definition
class ReallocOp(IRDLOperation):
    """`memref.realloc %src (`(` %size `)`)? attr-dict : type to type`: a buffer of the
    new size holding the old one's data; the old buffer is freed. xDSL 0.74 lacks this op."""

    name = "memref.realloc"

    source = operand_def(MemRefType)
    dynamic_result_size = opt_operand_def(IndexType)
    result = result_def(MemRefType)
    alignment = opt_prop_def(IntegerAttr[IntegerType])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$source (`(` $dynamic_result_size^ `)`)? attr-dict `:` type($source) `to` type($result)"
    )

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
        if source.get_num_dims() != 1 or result.get_num_dims() != 1:
            raise VerifyException("memref.realloc works on 1-d memrefs")
        if source.element_type != result.element_type:
            raise VerifyException("memref.realloc keeps the element type")
        dynamic = result.get_shape()[0] == DYNAMIC_INDEX
        if dynamic != (self.dynamic_result_size is not None):
            raise VerifyException(
                "memref.realloc needs a size exactly when the result's is dynamic"
            )


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """`memref.reshape %src(%shape) attr-dict : (src-type, shape-type) -> type`: a view
    of `%src` with the shape held in the 1-d memref `%shape`. xDSL 0.74 lacks this op."""

    name = "memref.reshape"

    source = operand_def(MemRefType | UnrankedMemRefType)
    shape = operand_def(MemRefType)
    result = result_def(MemRefType | UnrankedMemRefType)

    assembly_format = "$source `(` $shape `)` attr-dict `:` functional-type(operands, results)"


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """`memref.transpose %src (d0, d1) -> (d1, d0) attr-dict : type to type`: a view of
    `%src` whose dimension k is the source's dimension given by result k of the
    permutation; the result type is the source's with its sizes and strides permuted.
    xDSL 0.74 lacks this op."""

    name = "memref.transpose"

    source = operand_def(MemRefType)
    result = result_def(MemRefType)
    permutation = prop_def(AffineMapAttr)

    traits = traits_def(Pure())

    def axes(self) -> list[int]:
        """For each result dimension, the source dimension it is."""
        return [e.position for e in self.permutation.data.results if isinstance(e, AffineDimExpr)]

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
        amap, rank = self.permutation.data, source.get_num_dims()
        if amap.num_symbols or sorted(self.axes()) != list(range(amap.num_dims)):
            raise VerifyException(f"memref.transpose expects a permutation map, got {amap}")
        if amap.num_dims != rank:
            raise VerifyException(
                f"memref.transpose expects a permutation of {rank} dimensions, got {amap}"
            )
        want = _transposed(source, self.axes())
        same = (source.element_type, source.memory_space) == (
            result.element_type,
            result.memory_space,
        )
        if want is None or not same or _strided(want) != _strided(result):
            raise VerifyException(
                f"memref.transpose: the result type {result} is not the source's with its "
                f"sizes and strides permuted: {want or 'a strided layout'} is expected"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(f" {self.permutation.data}")
        printer.print_op_attributes(self.attributes)
        print_type_pair(printer, self.source.type, "to", self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> "TransposeOp":
        source = parser.parse_unresolved_operand()
        permutation = AffineMapAttr(parser.parse_affine_map())
        attrs = parser.parse_optional_attr_dict()
        source_type, result_type = parse_type_pair(parser, "to")
        return cls.build(
            operands=[parser.resolve_operand(source, source_type)],
            result_types=[result_type],
            properties={"permutation": permutation},
            attributes=attrs,
        )


_Strided = tuple[tuple[int, ...], tuple[int | None, ...], int | None]


def _strided(kind: MemRefType) -> _Strided | None:
    """A memref type's shape, strides and offset (None: dynamic) as MLIR 22 reads them,
    when it is strided."""
    layout = strided_layout(kind)
    if layout is None:
        return None
    strides, offset = layout
    return tuple(kind.get_shape()), tuple(strides), offset


def _transposed(source: MemRefType, axes: Sequence[int]) -> MemRefType | None:
    """The type of the view of `source` whose dimension k is the source's axes[k], when
    the source's layout is strided."""
    found = _strided(source)
    if found is None:
        return None
    shape, strides, offset = found
    layout = StridedLayoutAttr([strides[a] for a in axes], offset)
    return MemRefType(source.element_type, [shape[a] for a in axes], layout, source.memory_space)


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`memref.prefetch %m[%i, ...], read|write, locality<0..3>, data|instr : type`: a
    hint to the cache, without effect on the program's results. xDSL 0.74 lacks this op."""

    name = "memref.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    isWrite = prop_def(BoolAttr)
    localityHint = prop_def(IntegerAttr[IntegerType])
    isDataCache = prop_def(BoolAttr)

    def verify_(self) -> None:
        memref_type = self.memref.type
        assert isinstance(memref_type, MemRefType)
        if len(self.indices) != memref_type.get_num_dims():
            raise VerifyException(
                f"memref.prefetch needs {memref_type.get_num_dims()} indices, "
                f"got {len(self.indices)}"
            )
        if not 0 <= self.localityHint.value.data <= 3:
            raise VerifyException("memref.prefetch locality must be 0 to 3")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.memref)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_operand)
        printer.print_string("]")
        hints = self.isWrite.value.data, self.localityHint.value.data, self.isDataCache.value.data
        print_prefetch_hints(printer, self, *hints)

    @classmethod
    def parse(cls, parser: Parser) -> "PrefetchOp":
        target = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        hints, attrs, memref_type = parse_prefetch_hints(parser)
        return cls.build(
            operands=[
                parser.resolve_operand(target, memref_type),
                [parser.resolve_operand(i, IndexType()) for i in indices],
            ],
            properties=hints,
            attributes=attrs,
        )


def parse_prefetch_hints(
    parser: Parser,
) -> tuple[dict[str, Attribute], dict[str, Attribute], MemRefType]:
    """`, read|write, locality<0..3>, data|instr attr-dict : type` of memref.prefetch and
    affine.prefetch: their properties, attributes and memref type."""
    parser.parse_punctuation(",")
    is_write = parser.parse_keyword_in(("read", "write")) == "write"
    parser.parse_punctuation(",")
    parser.parse_keyword("locality")
    parser.parse_punctuation("<")
    locality = parser.parse_integer(allow_boolean=False, allow_negative=False)
    parser.parse_punctuation(">")
    parser.parse_punctuation(",")
    is_data = parser.parse_keyword_in(("data", "instr")) == "data"
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error("expected a memref type", pos, parser.pos)
    hints: dict[str, Attribute] = {
        "isWrite": BoolAttr.from_bool(is_write),
        "localityHint": IntegerAttr(locality, i32),
        "isDataCache": BoolAttr.from_bool(is_data),
    }
    return hints, attrs, memref_type


def print_prefetch_hints(
    printer: Printer, op: Operation, is_write: int, locality: int, is_data: int
) -> None:
    """What parse_prefetch_hints reads, then `op`'s attributes and its memref's type."""
    printer.print_string(f", {'write' if is_write else 'read'}, locality<{locality}>, ")
    printer.print_string("data" if is_data else "instr")
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_attribute(op.operands[0].type)


def _parse_indexed(parser: Parser) -> tuple[UnresolvedOperand, list[UnresolvedOperand]]:
    """`%m[%i, ...]`."""
    target = parser.parse_unresolved_operand()
    indices = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, parser.parse_unresolved_operand
    )
    return target, indices


def _print_indexed(printer: Printer, target: SSAValue, indices: Sequence[SSAValue]) -> None:
    printer.print_operand(target)
    printer.print_string("[")
    printer.print_list(indices, printer.print_operand)
    printer.print_string("]")


def _rank(value: SSAValue) -> int:
    kind = value.type
    return kind.get_num_dims() if isinstance(kind, MemRefType) else 0


@irdl_op_definition
class DmaStartOp(IRDLOperation):
    """`memref.dma_start %src[...], %dst[...], %count, %tag[...] (, %stride, %per_stride)?
    : src-type, dst-type, tag-type`. As in MLIR, the operands are one flat list (xDSL
    0.74's op has segment sizes and wants an i32 tag, so it misreads MLIR's generic form)."""

    name = "memref.dma_start"

    args = var_operand_def()

    def parts(self) -> list[list[SSAValue]]:
        """[source, its indices...], [destination, ...], [count], [tag, ...], [strides]."""
        values = list(self.args)
        groups: list[list[SSAValue]] = []
        for memref_first in (True, True, False, True):
            if not values:
                break
            count = 1 + _rank(values[0]) if memref_first else 1
            groups.append(values[:count])
            values = values[count:]
        return [*groups, values]

    def verify_(self) -> None:
        parts = self.parts()
        buffers = [parts[i][0] for i in (0, 1, 3) if i < len(parts) - 1]
        if len(parts) != 5 or any(not isinstance(b.type, MemRefType) for b in buffers):
            raise VerifyException("memref.dma_start needs a source, a destination and a tag")
        source, dest, count, tag, strides = parts
        if len(strides) not in (0, 2):
            raise VerifyException("memref.dma_start takes a stride with an element count or none")
        for value in (*source[1:], *dest[1:], *count, *tag[1:], *strides):
            if not isinstance(value.type, IndexType):
                raise VerifyException("memref.dma_start indices and counts are index values")

    def print(self, printer: Printer) -> None:
        source, dest, count, tag, strides = self.parts()
        printer.print_string(" ")
        _print_indexed(printer, source[0], source[1:])
        printer.print_string(", ")
        _print_indexed(printer, dest[0], dest[1:])
        printer.print_string(", ")
        printer.print_operand(count[0])
        printer.print_string(", ")
        _print_indexed(printer, tag[0], tag[1:])
        for stride in strides:
            printer.print_string(", ")
            printer.print_operand(stride)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        print_type_list(printer, (source[0].type, dest[0].type, tag[0].type))

    @classmethod
    def parse(cls, parser: Parser) -> "DmaStartOp":
        source = _parse_indexed(parser)
        parser.parse_punctuation(",")
        dest = _parse_indexed(parser)
        parser.parse_punctuation(",")
        count = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        tag = _parse_indexed(parser)
        strides: list[UnresolvedOperand] = []
        while parser.parse_optional_punctuation(","):
            strides.append(parser.parse_unresolved_operand())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) != 3:
            parser.raise_error("expected the source, destination and tag types", pos, parser.pos)
        index = IndexType()
        values: list[SSAValue] = []
        for (buffer, indices), kind in zip((source, dest, tag), types):
            group = [parser.resolve_operand(buffer, kind)]
            group += [parser.resolve_operand(i, index) for i in indices]
            if buffer is tag[0]:
                values.append(parser.resolve_operand(count, index))
            values += group
        values += [parser.resolve_operand(s, index) for s in strides]
        return cls.build(operands=[values], attributes=attrs)


@irdl_op_definition
class DmaWaitOp(IRDLOperation):
    """`memref.dma_wait %tag[...], %count : tag-type` (operands one flat list, as in MLIR). xDSL
    0.74 splits MLIR's flat operand list into segments."""

    name = "memref.dma_wait"

    args = var_operand_def()

    def verify_(self) -> None:
        if not self.args or not isinstance(self.args[0].type, MemRefType):
            raise VerifyException("memref.dma_wait needs a tag memref")
        if len(self.args) != _rank(self.args[0]) + 2:
            raise VerifyException("memref.dma_wait needs the tag's indices and a count")

    def print(self, printer: Printer) -> None:
        tag, *rest = self.args
        printer.print_string(" ")
        _print_indexed(printer, tag, rest[:-1])
        printer.print_string(", ")
        printer.print_operand(rest[-1])
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(tag.type)

    @classmethod
    def parse(cls, parser: Parser) -> "DmaWaitOp":
        tag, indices = _parse_indexed(parser)
        parser.parse_punctuation(",")
        count = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        kind = parser.parse_type()
        index = IndexType()
        values = [parser.resolve_operand(tag, kind)]
        values += [parser.resolve_operand(i, index) for i in indices]
        values.append(parser.resolve_operand(count, index))
        return cls.build(operands=[values], attributes=attrs)


MemRef: Dialect = with_replaced_ops(
    memref.MemRef,
    AllocaScopeOp,
    AllocaScopeReturnOp,
    AtomicRMWOp,
    CollapseShapeOp,
    ExpandShapeOp,
    ReinterpretCastOp,
    SubviewOp,
    CastOp,
    AtomicYieldOp,
    CopyOp,
    DmaStartOp,
    DmaWaitOp,
    ExtractAlignedPointerAsIndexOp,
    GenericAtomicRMWOp,
    GlobalOp,
    LoadOp,
    MemorySpaceCastOp,
    PrefetchOp,
    RankOp,
    ReallocOp,
    ReshapeOp,
    StoreOp,
    TransposeOp,
)


# The locations ("file:line:col") of the user's tensor.dims that bufferizing made
# memref.dims (dhir.toolchain.tensors), on the module: mlir-opt keeps a module's
# attribute, and xDSL prints a memref.dim's own attributes where mlir-opt cannot read them.
TENSOR_DIMS_ATTR = "dhir.tensor_dims"
TENSOR_DIM = "tensor.dim"


def dim_written(op: Operation) -> str:
    """The op the user wrote that the memref.dim `op` is: a tensor.dim bufferized, or
    `op` itself."""
    top: Operation = op
    while (parent := top.parent_op()) is not None:
        top = parent
    dims = top.attributes.get(TENSOR_DIMS_ATTR)
    where = dim_location(op)
    found = isinstance(dims, ArrayAttr) and where is not None and StringAttr(where) in dims.data
    return TENSOR_DIM if found else op.name


def dim_location(op: Operation) -> str | None:
    """`op`'s own location as `TENSOR_DIMS_ATTR` holds it."""
    loc = op.location
    if not isinstance(loc, FileLineColLoc):
        return None
    return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
