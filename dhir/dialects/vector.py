"""The vector dialect with the ops MLIR 22 has and xDSL 0.74 lacks.

Most of them work on vector values only. Those that take a memref (gather, scatter,
expandload, compressstore) are not in dhir's table of memory accesses, so the dependence
analysis counts them as reading and writing all they reach; the ops under a
`vector.mask` are seen through its region."""

from collections.abc import Sequence
from typing import ClassVar, cast

from xdsl.dialects import vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FixedBitwidthType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    TensorType,
    VectorType,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, SingleBlockImplicitTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa
from xdsl.utils.str_enum import StrEnum

# What the rest of dhir uses of xDSL's vector dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.vector is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.vector import (
    BroadcastOp as BroadcastOp,
    CombiningKindAttr as CombiningKindAttr,
    CombiningKindFlag as CombiningKindFlag,
    CreateMaskOp as CreateMaskOp,
    ExtractOp as ExtractOp,
    FMAOp as FMAOp,
    InsertOp as InsertOp,
    MaskedLoadOp as MaskedLoadOp,
    MaskedStoreOp as MaskedStoreOp,
    ReductionOp as ReductionOp,
    ShuffleOp as ShuffleOp,
    TransferReadOp as TransferReadOp,
    TransferWriteOp as TransferWriteOp,
)
# isort: on

from dhir.dialects import with_replaced_ops
from dhir.dialects.format import (
    AngleBracketEnum,
    parse_type_pair,
    print_type_list,
    print_type_pair,
    split_properties,
)
from dhir.dialects.layouts import strided_layout

I64Array = ArrayAttr[IntegerAttr]


def _parse_i64_list(parser: Parser) -> DenseArrayBase:
    values = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
    return DenseArrayBase.from_list(i64, values)


def _print_i64_list(printer: Printer, values: DenseArrayBase) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in _i64s(values)) + "]")


def _i64s(values: DenseArrayBase) -> list[int]:
    assert isa(values, DenseArrayBase[IntegerType])
    return [int(v) for v in values.get_values()]


@irdl_op_definition
class ShapeCastOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.shape_cast"

    source = operand_def(VectorType)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"

    def verify_(self) -> None:
        # MLIR's checks (the interpreter reshapes by them).
        source, result = self.source.type, self.result.type
        assert isinstance(source, VectorType) and isinstance(result, VectorType)
        if source.element_count() != result.element_count():
            raise VerifyException(f"{source} and {result} hold different numbers of elements")
        if source.element_type != result.element_type:
            raise VerifyException(f"{source} and {result} have different element types")


@irdl_op_definition
class ExtractStridedSliceOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.extract_strided_slice"

    source = operand_def(VectorType)
    offsets = prop_def(I64Array)
    sizes = prop_def(I64Array)
    strides = prop_def(I64Array)
    result = result_def(VectorType)

    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"

    def verify_(self) -> None:
        # MLIR's checks: without them the interpreter's slices would quietly stop at
        # the vector's end, and mlir-opt-22 refuses the op at the printed program's line.
        source, result = self.source.type, self.result.type
        assert isinstance(source, VectorType) and isinstance(result, VectorType)
        offsets, sizes, strides = (_ints(a) for a in (self.offsets, self.sizes, self.strides))
        shape = source.get_shape()
        if not len(offsets) == len(sizes) == len(strides) <= len(shape):
            raise VerifyException(
                "expected as many offsets, sizes and strides, at most the source's rank"
            )
        _check_unit_strides(strides)
        for k, (offset, size, dim) in enumerate(zip(offsets, sizes, shape)):
            if not (0 <= offset < dim and 1 <= size and offset + size <= dim):
                raise VerifyException(
                    f"dimension {k}: offset {offset} and size {size} leave the source's [0, {dim})"
                )
        want = (*sizes, *shape[len(sizes) :])
        if tuple(result.get_shape()) != want or result.element_type != source.element_type:
            raise VerifyException(f"expected the result to have the shape {list(want)}")


def _ints(array: ArrayAttr[IntegerAttr]) -> list[int]:
    return [a.value.data for a in array.data]


def _check_unit_strides(strides: list[int]) -> None:
    if any(stride != 1 for stride in strides):
        raise VerifyException(f"expected strides of 1 (MLIR 22 takes no others), got {strides}")


@irdl_op_definition
class InsertStridedSliceOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.insert_strided_slice"

    source = operand_def(VectorType)
    dest = operand_def(VectorType)
    offsets = prop_def(I64Array)
    strides = prop_def(I64Array)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "InsertStridedSliceOp":
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dest = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        source_type, dest_type = parse_type_pair(parser, "into")
        source, dest = parser.resolve_operands([source, dest], [source_type, dest_type], parser.pos)
        props = {k: attrs.pop(k) for k in ("offsets", "strides") if k in attrs}
        return cls.create(
            operands=[source, dest],
            result_types=[dest_type],
            properties=props,
            attributes=attrs,
        )

    def verify_(self) -> None:
        source, dest = self.source.type, self.dest.type
        assert isinstance(source, VectorType) and isinstance(dest, VectorType)
        offsets, strides = _ints(self.offsets), _ints(self.strides)
        inner, outer = source.get_shape(), dest.get_shape()
        if len(offsets) != len(outer) or len(strides) != len(inner) or len(inner) > len(outer):
            raise VerifyException(
                "expected an offset for each dimension of the destination and a stride for "
                "each of the source, whose rank is at most the destination's"
            )
        _check_unit_strides(strides)
        lead = len(outer) - len(inner)
        sizes = (1,) * lead + tuple(inner)
        for k, (offset, size, dim) in enumerate(zip(offsets, sizes, outer)):
            if not (0 <= offset and offset + size <= dim):
                raise VerifyException(
                    f"dimension {k}: offset {offset} and size {size} leave the destination's "
                    f"[0, {dim})"
                )
        if self.result.type != dest or source.element_type != dest.element_type:
            raise VerifyException("expected the result and both elements of the destination's type")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(", ")
        printer.print_operand(self.dest)
        printer.print_op_attributes({**self.properties, **self.attributes})
        print_type_pair(printer, self.source.type, "into", self.dest.type)


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.transpose"

    vector = operand_def(VectorType)
    permutation = prop_def(DenseArrayBase)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    def verify_(self) -> None:
        source, result = self.vector.type, self.result.type
        assert isinstance(source, VectorType) and isinstance(result, VectorType)
        permutation = _i64s(self.permutation)
        shape = source.get_shape()
        if sorted(permutation) != list(range(len(shape))):
            raise VerifyException(f"{permutation} is no permutation of {len(shape)} dimensions")
        want = VectorType(source.element_type, [shape[k] for k in permutation])
        if result.element_type != source.element_type or result.get_shape() != want.get_shape():
            raise VerifyException(f"expected the result type {want}")

    @classmethod
    def parse(cls, parser: Parser) -> "TransposeOp":
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        permutation = _parse_i64_list(parser)
        attrs = parser.parse_optional_attr_dict()
        source_type, result_type = parse_type_pair(parser, "to")
        source = parser.resolve_operand(source, source_type)
        return cls.create(
            operands=[source],
            result_types=[result_type],
            properties={"permutation": permutation},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.vector)
        printer.print_string(", ")
        _print_i64_list(printer, self.permutation)
        printer.print_op_attributes(self.attributes)
        print_type_pair(printer, self.vector.type, "to", self.result.type)


@irdl_op_definition
class ConstantMaskOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.constant_mask"

    mask_dim_sizes = prop_def(DenseArrayBase)
    result = result_def(VectorType.constr(base(type(i1))))

    traits = traits_def(Pure())

    def verify_(self) -> None:
        # MLIR's checks (the interpreter builds the mask by them).
        result = self.result.type
        assert isinstance(result, VectorType)
        sizes = _i64s(self.mask_dim_sizes)
        shape = result.get_shape() or (1,)  # a 0-d mask has one size, 0 or 1
        if len(sizes) != len(shape):
            raise VerifyException(f"expected a size for each of the {len(shape)} dimensions")
        if any(not 0 <= size <= dim for size, dim in zip(sizes, shape)):
            raise VerifyException(f"expected sizes within the mask's shape {list(shape)}")
        if 0 in sizes and any(sizes):
            raise VerifyException("expected all sizes to be 0 when one is (MLIR's rule)")

    @classmethod
    def parse(cls, parser: Parser) -> "ConstantMaskOp":
        sizes = _parse_i64_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        return cls.create(
            result_types=[result_type],
            properties={"mask_dim_sizes": sizes},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_i64_list(printer, self.mask_dim_sizes)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


class Punctuation(StrEnum):
    NO_PUNCTUATION = "no_punctuation"
    NEWLINE = "newline"
    COMMA = "comma"
    OPEN = "open"
    CLOSE = "close"


@irdl_attr_definition
class PunctuationAttr(AngleBracketEnum, EnumAttribute[Punctuation]):
    """`#vector.punctuation<newline>`: what `vector.print` prints after its value. xDSL 0.74
    lacks this attribute."""

    name = "vector.punctuation"


_NEWLINE = PunctuationAttr(Punctuation.NEWLINE)


@irdl_op_definition
class PrintOp(IRDLOperation):
    """`vector.print (%value : T)? (punctuation <p>)? | str "text"`: prints from the
    host (a side effect, on values only). xDSL 0.74 lacks the `punctuation` and `str` forms."""

    name = "vector.print"

    source = opt_operand_def()
    punctuation = prop_def(PunctuationAttr, default_value=_NEWLINE)
    stringLiteral = opt_prop_def(StringAttr)  # noqa: N815 - MLIR's name

    @classmethod
    def parse(cls, parser: Parser) -> "PrintOp":
        operands: list[SSAValue] = []
        props: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("str"):
            props["stringLiteral"] = StringAttr(parser.parse_str_literal())
        else:
            name = parser.parse_optional_unresolved_operand()
            if name is not None:
                parser.parse_punctuation(":")
                operands.append(parser.resolve_operand(name, parser.parse_type()))
            if parser.parse_optional_keyword("punctuation"):
                props["punctuation"] = PunctuationAttr(PunctuationAttr.parse_parameter(parser))
        attrs = parser.parse_optional_attr_dict()
        return cls.create(operands=operands, properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        if self.stringLiteral is not None:
            printer.print_string(" str ")
            printer.print_attribute(self.stringLiteral)
        if self.source is not None:
            printer.print_string(" ")
            printer.print_operand(self.source)
            printer.print_string(" : ")
            printer.print_attribute(self.source.type)
        # A bare `vector.print` would take the next line's result as its operand in
        # MLIR's parser (`%f = ...`: "expected ':'"): say the punctuation there.
        bare = self.source is None and self.stringLiteral is None
        if self.punctuation != _NEWLINE or bare:
            printer.print_string(" punctuation ")
            self.punctuation.print_parameter(printer)
        printer.print_op_attributes(self.attributes)


_ADD = vector.CombiningKindAttr(vector.CombiningKindFlag.ADD)


def _outer_product_type(lhs: Attribute, rhs: Attribute) -> Attribute:
    """`lhs` x `rhs` as MLIR's outerproduct gives it (`lhs`'s type for a scalar `rhs`)."""
    if not isinstance(lhs, VectorType) or not isinstance(rhs, VectorType):
        return lhs
    scalable = (*lhs.scalable_dims.data, *rhs.scalable_dims.data)
    shape = (*lhs.get_shape(), *rhs.get_shape())
    return VectorType(lhs.element_type, shape, ArrayAttr(scalable))


@irdl_op_definition
class OuterProductOp(IRDLOperation):
    """`vector.outerproduct %lhs, %rhs (, %acc)? attr-dict : T, U`: the outer product
    of two 1-d vectors (or a vector and a scalar), added to `%acc` if given.
    xDSL 0.74 lacks this op."""

    name = "vector.outerproduct"

    lhs = operand_def(VectorType)
    rhs = operand_def()
    acc = opt_operand_def(VectorType)
    kind = prop_def(vector.CombiningKindAttr, default_value=_ADD)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "OuterProductOp":
        pos = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        lhs_type = parser.parse_type()
        parser.parse_punctuation(",")
        rhs_type = parser.parse_type()
        if len(names) not in (2, 3):
            parser.raise_error("expected two or three operands", pos, parser.pos)
        result_type = _outer_product_type(lhs_type, rhs_type)
        types = [lhs_type, rhs_type, result_type][: len(names)]
        operands = parser.resolve_operands(names, types, pos)
        props = {"kind": attrs.pop("kind")} if "kind" in attrs else {}
        return cls.create(
            operands=operands, result_types=[result_type], properties=props, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        operands = (self.lhs, self.rhs) if self.acc is None else (self.lhs, self.rhs, self.acc)
        printer.print_list(operands, printer.print_operand)
        shown = dict(self.attributes)
        if self.kind != _ADD:
            shown = {"kind": self.kind, **shown}
        printer.print_op_attributes(shown)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)
        printer.print_string(", ")
        printer.print_attribute(self.rhs.type)


class IteratorType(StrEnum):
    PARALLEL = "parallel"
    REDUCTION = "reduction"


@irdl_attr_definition
class IteratorTypeAttr(AngleBracketEnum, EnumAttribute[IteratorType]):
    """`#vector.iterator_type<parallel>`: one dimension of a `vector.contract`. xDSL 0.74 lacks
    this attribute."""

    name = "vector.iterator_type"


def _iterator_types(value: Attribute, parser: Parser, pos: int) -> ArrayAttr[IteratorTypeAttr]:
    """The trait's `iterator_types`: MLIR writes them as strings in the custom form."""
    if not isinstance(value, ArrayAttr):
        parser.raise_error("expected an array of iterator types", pos, parser.pos)
    found: list[IteratorTypeAttr] = []
    for item in cast(ArrayAttr[Attribute], value).data:
        if isinstance(item, IteratorTypeAttr):
            found.append(item)
        elif isinstance(item, StringAttr) and item.data in set(IteratorType):
            found.append(IteratorTypeAttr(IteratorType(item.data)))
        else:
            parser.raise_error(f"{item} is not 'parallel' or 'reduction'", pos, parser.pos)
    return ArrayAttr(found)


@irdl_op_definition
class ContractionOp(IRDLOperation):
    """`vector.contract {indexing_maps = [...], iterator_types = [...], kind = ...}
    %lhs, %rhs, %acc attr-dict : L, R into A`: a generalized matrix product.
    xDSL 0.74 lacks this op."""

    name = "vector.contract"

    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    acc = operand_def()
    indexing_maps = prop_def(ArrayAttr[AffineMapAttr])
    iterator_types = prop_def(ArrayAttr[IteratorTypeAttr])
    kind = prop_def(vector.CombiningKindAttr, default_value=_ADD)
    result = result_def()

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "ContractionOp":
        pos = parser.pos
        trait = parser.parse_attribute()
        if not isinstance(trait, DictionaryAttr):
            parser.raise_error("expected the contraction's trait dictionary", pos, parser.pos)
        entries = dict(trait.data)
        if "indexing_maps" not in entries or "iterator_types" not in entries:
            parser.raise_error("the trait needs indexing_maps and iterator_types", pos)
        entries["iterator_types"] = _iterator_types(entries["iterator_types"], parser, pos)
        names_pos = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        entries.update(parser.parse_optional_attr_dict())
        parser.parse_punctuation(":")
        lhs_type = parser.parse_type()
        parser.parse_punctuation(",")
        rhs_type = parser.parse_type()
        parser.parse_keyword("into")
        acc_type = parser.parse_type()
        operands = parser.resolve_operands(names, [lhs_type, rhs_type, acc_type], names_pos)
        props, attrs = split_properties(cls, entries)
        return cls.create(
            operands=operands, result_types=[acc_type], properties=props, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        names = [StringAttr(t.data) for t in self.iterator_types.data]
        trait = {"indexing_maps": self.indexing_maps, "iterator_types": ArrayAttr(names)}
        printer.print_string(" ")
        printer.print_attr_dict({**trait, "kind": self.kind})
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)
        printer.print_string(", ")
        printer.print_attribute(self.rhs.type)
        printer.print_string(" into ")
        printer.print_attribute(self.acc.type)

    def verify_(self) -> None:
        maps = [m.data for m in self.indexing_maps.data]
        if len(maps) != 3:
            raise VerifyException("expected an indexing map for each of lhs, rhs and acc")
        loops = len(self.iterator_types.data)
        if any(m.num_dims != loops or m.num_symbols for m in maps):
            raise VerifyException(f"expected indexing maps of {loops} dimensions, no symbols")
        reduced = [str(t.data) == "reduction" for t in self.iterator_types.data]
        sizes: dict[int, int] = {}
        dims: list[list[int]] = []
        for index, (map_, operand) in enumerate(zip(maps, self.operands)):
            shape = operand.type.get_shape() if isinstance(operand.type, VectorType) else ()
            found = [e.position for e in map_.results if isinstance(e, AffineDimExpr)]
            if len(map_.results) != len(shape):
                raise VerifyException(
                    f"expected indexing map {index} to have {len(shape)} number of outputs"
                )
            if len(found) != len(shape) or len(set(found)) != len(found):
                raise VerifyException(
                    f"expected indexing map {index} to be a projected permutation of its inputs"
                )
            dims.append(found)
            for dim, size in zip(found, shape):
                if index < 2 and sizes.setdefault(dim, size) != size:
                    which = "contracting" if reduced[dim] else "batch"
                    raise VerifyException(f"invalid {which} dimension map")
        lhs, rhs = set(dims[0]), set(dims[1])
        if not any(reduced[d] for d in lhs & rhs):
            raise VerifyException("expected at least one contracting dimension pair")
        if len(lhs | rhs) != loops:
            raise VerifyException("expected all dimensions to be either a LHS or a RHS dimension")
        acc = self.acc.type
        acc_shape = list(acc.get_shape()) if isinstance(acc, VectorType) else []
        if acc_shape != [sizes[d] for d in dims[2]]:
            raise VerifyException("invalid accumulator/result vector shape")
        # MLIR counts a dimension not reduced along both operands as one of the result's,
        # even a reduced one: with any, the result must be a vector.
        unpaired = sorted((lhs | rhs) - {d for d in lhs & rhs if reduced[d]})
        if not isinstance(acc, VectorType) and unpaired:
            raise VerifyException(
                f"invalid accumulator/result vector shape: dimension {unpaired[0]} is not "
                "reduced along both operands, so MLIR expects a vector result; broadcast the "
                "other operand along it (vector.broadcast) to make it a contracting pair"
            )


def lone_reductions(op: ContractionOp) -> tuple[list[int], list[int]]:
    """The dimensions `op` reduces, of size above 1, that only its left operand has (first
    list) or only its right one (second), in order. MLIR 22's lowering unrolls a dimension
    of one operand only into the result's, or where it has size 1, so it leaves such a
    contraction in place; dhir-mlir22-workarounds broadcasts the other operand along
    them, and the interpreter does the same."""
    reduced = [str(t.data) == "reduction" for t in op.iterator_types.data]
    found: list[dict[int, int]] = []
    for map_, operand in zip(op.indexing_maps.data[:2], (op.lhs, op.rhs)):
        shape = cast(VectorType, operand.type).get_shape()
        dims = [cast(AffineDimExpr, e).position for e in map_.data.results]
        found.append(dict(zip(dims, shape)))
    left, right = found
    lone = [
        sorted(d for d, size in mine.items() if reduced[d] and d not in other and size != 1)
        for mine, other in ((left, right), (right, left))
    ]
    return lone[0], lone[1]


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`vector.yield (%values : T...)?`: ends the region of a `vector.mask`. xDSL 0.74 lacks
    this op."""

    name = "vector.yield"

    values = var_operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(MaskOp), Pure()))

    assembly_format = "attr-dict ($values^ `:` type($values))?"


@irdl_op_definition
class MaskOp(IRDLOperation):
    """`vector.mask %mask (, %passthru)? { op } attr-dict : M (-> T...)?`: runs one
    maskable op under `%mask`; the region yields its results. xDSL 0.74 lacks this op."""

    name = "vector.mask"

    mask = operand_def(VectorType.constr(base(type(i1))))
    passthru = opt_operand_def()
    body = region_def("single_block")
    outputs = var_result_def()

    traits = traits_def(SingleBlockImplicitTerminator(YieldOp))

    @classmethod
    def parse(cls, parser: Parser) -> "MaskOp":
        pos = parser.pos
        names = [parser.parse_unresolved_operand()]
        if parser.parse_optional_punctuation(","):
            names.append(parser.parse_unresolved_operand())
        body = parser.parse_region()
        _ensure_yield(body)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types: list[Attribute] = [parser.parse_type()]
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->"):
            result_types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
        if len(names) == 2:
            if not result_types:
                parser.raise_error("a passthru value needs a result type", pos, parser.pos)
            types.append(result_types[0])
        operands = parser.resolve_operands(names, types, pos)
        return cls.create(
            operands=operands, result_types=result_types, regions=[body], attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.mask.type)
        if self.outputs:
            printer.print_string(" -> ")
            print_type_list(printer, self.outputs.types)

    def verify_(self) -> None:
        yielded = self.body.block.last_op
        assert yielded is not None  # SingleBlockImplicitTerminator checked it
        if [*yielded.operand_types] != [*self.outputs.types]:
            raise VerifyException("the region must yield values of the result types")
        if self.passthru is not None and (
            not self.outputs or self.passthru.type != self.outputs.types[0]
        ):
            raise VerifyException("the passthru value must have the result's type")


def _ensure_yield(body: Region) -> None:
    """As MLIR does: an empty region yields nothing, one op alone yields its results."""
    if not body.blocks:
        body.add_block(Block())
    block = body.block
    last = block.last_op
    if last is None:
        block.add_op(YieldOp.create())
    elif not last.has_trait(IsTerminator):
        block.add_op(YieldOp.create(operands=list(last.results)))


_MEMREF_OR_TENSOR = base(MemRefType) | base(TensorType)


@irdl_op_definition
class GatherOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.gather"

    base_ = operand_def(_MEMREF_OR_TENSOR)
    offsets = var_operand_def(IndexType)
    index_vec = operand_def(VectorType)
    mask = operand_def(VectorType)
    pass_thru = operand_def(VectorType)
    alignment = opt_prop_def(IntegerAttr)
    result = result_def(VectorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$base_ `[` $offsets `]` `[` $index_vec `]` `,` $mask `,` $pass_thru attr-dict"
        " `:` type($base_) `,` type($index_vec) `,` type($mask) `,` type($pass_thru)"
        " `into` type($result)"
    )


@irdl_op_definition
class ScatterOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.scatter"

    base_ = operand_def(_MEMREF_OR_TENSOR)
    offsets = var_operand_def(IndexType)
    index_vec = operand_def(VectorType)
    mask = operand_def(VectorType)
    valueToStore = operand_def(VectorType)  # noqa: N815 - MLIR's name
    alignment = opt_prop_def(IntegerAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$base_ `[` $offsets `]` `[` $index_vec `]` `,` $mask `,` $valueToStore attr-dict"
        " `:` type($base_) `,` type($index_vec) `,` type($mask) `,` type($valueToStore)"
    )


@irdl_op_definition
class ExpandLoadOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.expandload"

    base_ = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    mask = operand_def(VectorType)
    pass_thru = operand_def(VectorType)
    alignment = opt_prop_def(IntegerAttr)
    result = result_def(VectorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$base_ `[` $indices `]` `,` $mask `,` $pass_thru attr-dict"
        " `:` type($base_) `,` type($mask) `,` type($pass_thru) `into` type($result)"
    )


@irdl_op_definition
class CompressStoreOp(IRDLOperation):
    """xDSL 0.74 lacks this op."""

    name = "vector.compressstore"

    base_ = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    mask = operand_def(VectorType)
    valueToStore = operand_def(VectorType)  # noqa: N815 - MLIR's name
    alignment = opt_prop_def(IntegerAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$base_ `[` $indices `]` `,` $mask `,` $valueToStore attr-dict"
        " `:` type($base_) `,` type($mask) `,` type($valueToStore)"
    )


def _parse_kind_and_operands(
    parser: Parser,
) -> tuple[vector.CombiningKindAttr, int, list[UnresolvedOperand]]:
    """`<kind>, %a, %b` of the reductions: the kind, where the operands start, the operands."""
    kind = vector.CombiningKindAttr(vector.CombiningKindAttr.parse_parameter(parser))
    parser.parse_punctuation(",")
    pos = parser.pos
    first = parser.parse_unresolved_operand()
    parser.parse_punctuation(",")
    return kind, pos, [first, parser.parse_unresolved_operand()]


def _print_kind_and_operands(
    printer: Printer, kind: vector.CombiningKindAttr, operands: Sequence[SSAValue]
) -> None:
    printer.print_string(" ")
    kind.print_parameter(printer)
    printer.print_string(", ")
    printer.print_list(operands, printer.print_operand)


@irdl_op_definition
class MultiDimReductionOp(IRDLOperation):
    """`vector.multi_reduction <kind>, %source, %acc [dims] : S to A`. xDSL 0.74 lacks this op."""

    name = "vector.multi_reduction"

    source = operand_def(VectorType)
    acc = operand_def()
    kind = prop_def(vector.CombiningKindAttr)
    reduction_dims = prop_def(DenseArrayBase)
    dest = result_def()

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "MultiDimReductionOp":
        kind, pos, (source, acc) = _parse_kind_and_operands(parser)
        attrs = parser.parse_optional_attr_dict()
        dims = _parse_i64_list(parser)
        source_type, dest_type = parse_type_pair(parser, "to")
        operands = parser.resolve_operands([source, acc], [source_type, dest_type], pos)
        return cls.create(
            operands=operands,
            result_types=[dest_type],
            properties={"kind": kind, "reduction_dims": dims},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        _print_kind_and_operands(printer, self.kind, self.operands)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        _print_i64_list(printer, self.reduction_dims)
        print_type_pair(printer, self.source.type, "to", self.dest.type)


@irdl_op_definition
class ScanOp(IRDLOperation):
    """`vector.scan <kind>, %source, %init {reduction_dim = D, inclusive = B} : S, I`:
    prefix sums along one dimension, and the last of them. xDSL 0.74 lacks this op."""

    name = "vector.scan"

    source = operand_def(VectorType)
    initial_value = operand_def(VectorType)
    kind = prop_def(vector.CombiningKindAttr)
    reduction_dim = prop_def(IntegerAttr)
    inclusive = prop_def(BoolAttr)
    dest = result_def(VectorType)
    accumulated_value = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "ScanOp":
        kind, pos, (source, init) = _parse_kind_and_operands(parser)
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_punctuation(",")
        init_type = parser.parse_type()
        operands = parser.resolve_operands([source, init], [source_type, init_type], pos)
        return cls.create(
            operands=operands,
            result_types=[source_type, init_type],
            properties={"kind": kind, **props},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        _print_kind_and_operands(printer, self.kind, self.operands)
        shown = {"reduction_dim": self.reduction_dim, "inclusive": self.inclusive}
        printer.print_op_attributes({**shown, **self.attributes})
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(", ")
        printer.print_attribute(self.initial_value.type)


@irdl_op_definition
class VectorScaleOp(IRDLOperation):
    """`vector.vscale`: the runtime multiple of scalable vector sizes. xDSL 0.74 lacks this op."""

    name = "vector.vscale"

    result = result_def(IndexType)

    traits = traits_def(Pure())

    assembly_format = "attr-dict"


def _parse_position(parser: Parser) -> IntegerAttr:
    parser.parse_punctuation("[")
    pos = parser.parse_integer()
    parser.parse_punctuation("]")
    return IntegerAttr(pos, i64)


@irdl_op_definition
class ScalableInsertOp(IRDLOperation):
    """`vector.scalable.insert %value, %dest[pos] : V into D`. xDSL 0.74 lacks this op."""

    name = "vector.scalable.insert"

    valueToStore = operand_def(VectorType)  # noqa: N815 - MLIR's name
    dest = operand_def(VectorType)
    pos = prop_def(IntegerAttr)
    res = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "ScalableInsertOp":
        start = parser.pos
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dest = parser.parse_unresolved_operand()
        pos = _parse_position(parser)
        attrs = parser.parse_optional_attr_dict()
        value_type, dest_type = parse_type_pair(parser, "into")
        operands = parser.resolve_operands([value, dest], [value_type, dest_type], start)
        return cls.create(
            operands=operands, result_types=[dest_type], properties={"pos": pos}, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.valueToStore)
        printer.print_string(", ")
        printer.print_operand(self.dest)
        printer.print_string(f"[{self.pos.value.data}]")
        printer.print_op_attributes(self.attributes)
        print_type_pair(printer, self.valueToStore.type, "into", self.dest.type)

    def verify_(self) -> None:
        _verify_scalable_part(self.valueToStore.type, self.dest.type, self.pos)


def _verify_scalable_part(part: Attribute, whole: Attribute, pos: IntegerAttr) -> None:
    """scalable.insert/extract: 1-d vectors, the whole one scalable, `pos` a multiple of
    the part's (minimum) length."""
    assert isa(part, VectorType) and isa(whole, VectorType)
    if part.get_num_dims() != 1 or whole.get_num_dims() != 1:
        raise VerifyException("expected 1-d vectors")
    if not whole.get_scalable_dims()[0]:
        raise VerifyException(f"expected a scalable vector, not {whole}")
    if pos.value.data % part.get_shape()[0]:
        raise VerifyException("the position must be a multiple of the part's length")


@irdl_op_definition
class ScalableExtractOp(IRDLOperation):
    """`vector.scalable.extract %source[pos] : R from S`. xDSL 0.74 lacks this op."""

    name = "vector.scalable.extract"

    source = operand_def(VectorType)
    pos = prop_def(IntegerAttr)
    res = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "ScalableExtractOp":
        start = parser.pos
        source = parser.parse_unresolved_operand()
        pos = _parse_position(parser)
        attrs = parser.parse_optional_attr_dict()
        result_type, source_type = parse_type_pair(parser, "from")
        operand = parser.resolve_operands([source], [source_type], start)
        return cls.create(
            operands=operand, result_types=[result_type], properties={"pos": pos}, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(f"[{self.pos.value.data}]")
        printer.print_op_attributes(self.attributes)
        print_type_pair(printer, self.res.type, "from", self.source.type)

    def verify_(self) -> None:
        _verify_scalable_part(self.res.type, self.source.type, self.pos)


@irdl_op_definition
class InterleaveOp(IRDLOperation):
    """`vector.interleave %lhs, %rhs : V -> R`: the lanes of both, alternating.
    xDSL 0.74 lacks this op."""

    name = "vector.interleave"

    T: ClassVar = VarConstraint("T", base(VectorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(VectorType)

    traits = traits_def(Pure())

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def verify_(self) -> None:
        _verify_halves(self.lhs.type, self.result.type)


def _verify_halves(half: Attribute, whole: Attribute) -> None:
    """interleave/deinterleave: `whole` is `half` with its last dimension doubled."""
    assert isa(half, VectorType) and isa(whole, VectorType)
    shape = [*half.get_shape()]
    shape = [*shape[:-1], 2 * shape[-1]] if shape else [2]
    scalable = half.get_scalable_dims() or (False,)
    if whole.element_type != half.element_type or [*whole.get_shape()] != shape:
        raise VerifyException(f"{whole} is not {half} with its last dimension doubled")
    if whole.get_scalable_dims()[-1:] != scalable[-1:]:
        raise VerifyException(f"{whole} and {half} differ in scalability")


@irdl_op_definition
class DeinterleaveOp(IRDLOperation):
    """`%even, %odd = vector.deinterleave %source : S -> R`: the inverse of interleave.
    xDSL 0.74 lacks this op."""

    name = "vector.deinterleave"

    T: ClassVar = VarConstraint("T", base(VectorType))
    source = operand_def(VectorType)
    res1 = result_def(T)
    res2 = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($res1)"

    def verify_(self) -> None:
        _verify_halves(self.res1.type, self.source.type)


@irdl_op_definition
class StepOp(IRDLOperation):
    """`vector.step : vector<Nxindex>`: the lanes 0, 1, ..., N-1. xDSL 0.74 lacks this op."""

    name = "vector.step"

    result = result_def(VectorType)

    traits = traits_def(Pure())

    assembly_format = "attr-dict `:` type($result)"

    def verify_(self) -> None:
        type_ = self.result.type
        assert isa(type_, VectorType)
        if type_.get_num_dims() != 1 or not isinstance(type_.element_type, IndexType):
            raise VerifyException(f"expected a 1-d vector of index, not {type_}")


def _fixed_vector(type_: Attribute) -> VectorType:
    if not isa(type_, VectorType) or any(type_.get_scalable_dims()):
        raise VerifyException(f"expected a fixed-length vector, not {type_}")
    return type_


def _check_elements(vector_type: Attribute, elements: Sequence[SSAValue]) -> None:
    """from_elements/to_elements: one scalar of the element type per lane, row-major."""
    type_ = _fixed_vector(vector_type)
    if len(elements) != type_.element_count():
        raise VerifyException(f"{type_} has {type_.element_count()} elements, not {len(elements)}")
    for element in elements:
        if element.type != type_.element_type:
            raise VerifyException(f"expected elements of {type_.element_type}, not {element.type}")


@irdl_op_definition
class FromElementsOp(IRDLOperation):
    """`vector.from_elements %a, %b, ... : V`: a vector of the scalars, row-major.
    xDSL 0.74 lacks this op."""

    name = "vector.from_elements"

    elements = var_operand_def()
    dest = result_def(VectorType)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "FromElementsOp":
        start = parser.pos
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_ = parser.parse_type()
        if not isa(type_, VectorType):
            parser.raise_error(f"expected a vector type, not {type_}", start, parser.pos)
        elements = parser.resolve_operands(names, [type_.element_type] * len(names), start)
        return cls.create(operands=elements, result_types=[type_], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.elements, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.dest.type)

    def verify_(self) -> None:
        _check_elements(self.dest.type, self.elements)


@irdl_op_definition
class ToElementsOp(IRDLOperation):
    """`%e:N = vector.to_elements %v : V`: the vector's lanes, row-major.
    xDSL 0.74 lacks this op."""

    name = "vector.to_elements"

    source = operand_def(VectorType)
    elements = var_result_def()

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "ToElementsOp":
        start = parser.pos
        source = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_ = parser.parse_type()
        if not isa(type_, VectorType) or any(type_.get_scalable_dims()):
            parser.raise_error(f"expected a fixed-length vector type, not {type_}", start)
        operand = parser.resolve_operands([source], [type_], start)
        results = [type_.element_type] * type_.element_count()
        return cls.create(operands=operand, result_types=results, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)

    def verify_(self) -> None:
        _check_elements(self.source.type, self.elements)


def _bits(element: Attribute) -> int | None:
    """An element's width as vector.bitcast counts it (index is 64 bits, as in MLIR)."""
    if isinstance(element, IndexType):
        return 64
    return element.bitwidth if isinstance(element, FixedBitwidthType) else None


class BitcastOp(vector.BitcastOp):
    """xDSL's op refuses index elements, which MLIR takes as 64 bits wide."""

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isa(source, VectorType) and isa(result, VectorType)
        source_shape, result_shape = source.get_shape(), result.get_shape()
        if source_shape[:-1] != result_shape[:-1]:
            raise VerifyException("all but the last dimension must be equal")
        source_bits, result_bits = _bits(source.element_type), _bits(result.element_type)
        if source_bits is None or result_bits is None:
            raise VerifyException("expected elements of a known width")
        last = (source_shape[-1:] or (1,))[0] * source_bits
        if last != (result_shape[-1:] or (1,))[0] * result_bits:
            raise VerifyException("the last dimensions must hold the same number of bits")


def _verify_memory_type(memory: Attribute, result: Attribute) -> None:
    """vector.load/store: a memref of scalars gives vectors of the same element type, a
    memref of vectors gives that vector type (xDSL 0.74 knows only the first)."""
    assert isa(memory, MemRefType) and isa(result, VectorType)
    element = memory.element_type
    if isinstance(element, VectorType):
        if element != result:
            raise VerifyException("the vector type must be the memref's element type")
    elif element != result.element_type:
        raise VerifyException("MemRef element type should match the Vector element type.")


class LoadOp(vector.LoadOp):
    """xDSL 0.74 refuses memrefs of vectors, and takes memrefs whose innermost stride is
    not 1, which MLIR 22 refuses."""

    def verify_(self) -> None:
        _verify_memory_type(self.base.type, self.result.type)
        if cast(MemRefType, self.base.type).get_num_dims() != len(self.indices):
            raise VerifyException("Expected an index for each dimension.")
        _verify_unit_innermost_stride(self.name, cast(MemRefType, self.base.type))


class StoreOp(vector.StoreOp):
    """xDSL 0.74 refuses memrefs of vectors, and takes memrefs whose innermost stride is
    not 1, which MLIR 22 refuses."""

    def verify_(self) -> None:
        _verify_memory_type(self.base.type, self.vector.type)
        if cast(MemRefType, self.base.type).get_num_dims() != len(self.indices):
            raise VerifyException("Expected an index for each dimension.")
        _verify_unit_innermost_stride(self.name, cast(MemRefType, self.base.type))


def _verify_unit_innermost_stride(name: str, memory: MemRefType) -> None:
    """MLIR 22's vector.load and vector.store read consecutive elements: the memref's
    innermost stride must be a static 1 (a rank-0 memref has none)."""
    layout = strided_layout(memory)
    if memory.get_num_dims() and (layout is None or layout[0][-1] != 1):
        raise VerifyException(
            f"'{name}' needs a memref whose innermost stride is 1, not {memory}; use "
            "vector.transfer_read/transfer_write or vector.gather/scatter for strided "
            "elements"
        )


_ops = with_replaced_ops(
    vector.Vector,
    ShapeCastOp,
    ExtractStridedSliceOp,
    InsertStridedSliceOp,
    TransposeOp,
    ConstantMaskOp,
    PrintOp,
    OuterProductOp,
    ContractionOp,
    YieldOp,
    MaskOp,
    GatherOp,
    ScatterOp,
    ExpandLoadOp,
    CompressStoreOp,
    MultiDimReductionOp,
    ScanOp,
    VectorScaleOp,
    ScalableInsertOp,
    ScalableExtractOp,
    InterleaveOp,
    DeinterleaveOp,
    StepOp,
    FromElementsOp,
    ToElementsOp,
    BitcastOp,
    LoadOp,
    StoreOp,
)

Vector: Dialect = Dialect(
    _ops.name, list(_ops.operations), [*_ops.attributes, PunctuationAttr, IteratorTypeAttr]
)
