"""The affine dialect with MLIR 22's subscripts for `affine.load`, `affine.store`,
`affine.vector_load` and `affine.vector_store`.

In MLIR a bare SSA value in a subscript is a dimension of the access map and
`symbol(%v)` a symbol; xDSL 0.74 makes every value a symbol, so `%m[%i]` became
`()[s0] -> (s0)`, which MLIR rejects when `%i` is a loop variable (a loop variable is
not a valid symbol).
"""

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType, VectorType
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineExpr, AffineMap
from xdsl.ir.affine.affine_expr import (
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineSymExpr,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.parser.affine_parser import AffineParser
from xdsl.printer import Printer
from xdsl.utils.hints import isa

from dhir.dialects import with_replaced_ops

_PRECEDENCE = {
    AffineBinaryOpKind.Add: 10,
    AffineBinaryOpKind.Mul: 20,
    AffineBinaryOpKind.Mod: 20,
    AffineBinaryOpKind.FloorDiv: 20,
    AffineBinaryOpKind.CeilDiv: 20,
}


def parse_subscripts(parser: Parser) -> tuple[AffineMap, list[SSAValue]]:
    """`[expr, ...]` over `%v` (dimensions) and `symbol(%v)` (symbols): the map and its
    operands, dimensions first, each value once per kind, in order of first use."""
    dims: dict[str, UnresolvedOperand] = {}
    syms: dict[str, UnresolvedOperand] = {}

    def position(table: dict[str, UnresolvedOperand], operand: UnresolvedOperand) -> int:
        key = f"{operand.operand_name}#{operand.index}"
        if key not in table:
            table[key] = operand
        return list(table).index(key)

    def parse_value() -> AffineExpr | None:
        if parser.parse_optional_keyword("symbol"):
            parser.parse_punctuation("(")
            operand = parser.parse_unresolved_operand()
            parser.parse_punctuation(")")
            return AffineExpr.symbol(position(syms, operand))
        operand = parser.parse_optional_unresolved_operand()
        if operand is None:
            return None
        return AffineExpr.dimension(position(dims, operand))

    # The affine-expression grammar is xDSL's; only the leaves differ.
    affine_parser = AffineParser(parser._parser_state)  # pyright: ignore[reportPrivateUsage]
    exprs = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE,
        lambda: affine_parser._parse_affine_expr(parse_value),  # pyright: ignore[reportPrivateUsage]
    )
    index = IndexType()
    operands: list[SSAValue] = [
        parser.resolve_operand(o, index) for o in (*dims.values(), *syms.values())
    ]
    return AffineMap(len(dims), len(syms), tuple(exprs)), operands


def print_subscripts(printer: Printer, amap: AffineMap, operands: Sequence[SSAValue]) -> None:
    with printer.in_square_brackets():
        printer.print_list(amap.results, lambda e: _print_expr(printer, e, amap, operands, 0))


def _print_expr(
    printer: Printer, expr: AffineExpr, amap: AffineMap, operands: Sequence[SSAValue], min_prec: int
) -> None:
    match expr:
        case AffineConstantExpr(value=value):
            printer.print_string(str(value))
        case AffineDimExpr(position=pos):
            printer.print_ssa_value(operands[pos])
        case AffineSymExpr(position=pos):
            printer.print_string("symbol(")
            printer.print_ssa_value(operands[amap.num_dims + pos])
            printer.print_string(")")
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            prec = _PRECEDENCE[kind]
            if prec < min_prec:
                printer.print_string("(")
            _print_expr(printer, lhs, amap, operands, prec)
            printer.print_string(f" {kind.get_token()} ")
            right = prec if kind == AffineBinaryOpKind.Add else prec + 1
            _print_expr(printer, rhs, amap, operands, right)
            if prec < min_prec:
                printer.print_string(")")
        case _:
            raise ValueError(f"unexpected affine expression {expr}")


_Access = tuple[SSAValue, AffineMapAttr, list[SSAValue], MemRefType, dict[str, Attribute]]


def _parse_access(parser: Parser) -> _Access:
    """`%memref[subscripts] attr-dict : memref-type`."""
    memref = parser.parse_unresolved_operand()
    amap, indices = parse_subscripts(parser)
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isa(memref_type, MemRefType):
        parser.raise_error("expected a memref type", pos, parser.pos)
    memref_value = parser.resolve_operand(memref, memref_type)
    return memref_value, AffineMapAttr(amap), indices, memref_type, attrs


def _print_access(
    printer: Printer,
    memref: SSAValue,
    amap: AffineMap,
    indices: Sequence[SSAValue],
    attrs: dict[str, Attribute],
) -> None:
    printer.print_ssa_value(memref)
    print_subscripts(printer, amap, indices)
    printer.print_op_attributes(attrs)
    printer.print_string(" : ")
    printer.print_attribute(memref.type)


def _parse_vector_type(parser: Parser, op_name: str) -> VectorType:
    pos = parser.pos
    vector_type = parser.parse_type()
    if not isa(vector_type, VectorType):
        parser.raise_error(f"{op_name} expects a vector type, got {vector_type}", pos, parser.pos)
    return vector_type


class LoadOp(affine.LoadOp):
    """`affine.load %memref[subscripts] attr-dict : memref-type`."""

    @classmethod
    def parse(cls, parser: Parser) -> "LoadOp":
        memref, amap, indices, memref_type, attrs = _parse_access(parser)
        result: Attribute = memref_type.get_element_type()
        return cls.build(
            operands=[memref, indices],
            result_types=[result],
            properties={"map": amap},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.map.data, self.indices, self.attributes)


class StoreOp(affine.StoreOp):
    """`affine.store %value, %memref[subscripts] attr-dict : memref-type`."""

    @classmethod
    def parse(cls, parser: Parser) -> "StoreOp":
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, amap, indices, memref_type, attrs = _parse_access(parser)
        stored = parser.resolve_operand(value, memref_type.get_element_type())
        return cls.build(
            operands=[stored, memref, indices], properties={"map": amap}, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        _print_access(printer, self.memref, self.map.data, self.indices, self.attributes)


class VectorLoadOp(affine.VectorLoadOp):
    """`affine.vector_load %memref[subscripts] : memref-type, vector-type`."""

    @classmethod
    def parse(cls, parser: Parser) -> "VectorLoadOp":
        memref, amap, indices, _, attrs = _parse_access(parser)
        parser.parse_punctuation(",")
        result = _parse_vector_type(parser, cls.name)
        return cls.build(
            operands=[memref, indices],
            result_types=[result],
            properties={"map": amap},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.map.data, self.indices, self.attributes)
        printer.print_string(", ")
        printer.print_attribute(self.result.type)


class VectorStoreOp(affine.VectorStoreOp):
    """`affine.vector_store %value, %memref[subscripts] : memref-type, vector-type`."""

    @classmethod
    def parse(cls, parser: Parser) -> "VectorStoreOp":
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, amap, indices, _, attrs = _parse_access(parser)
        parser.parse_punctuation(",")
        stored = parser.resolve_operand(value, _parse_vector_type(parser, cls.name))
        return cls.build(
            operands=[stored, memref, indices], properties={"map": amap}, attributes=attrs
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        _print_access(printer, self.memref, self.map.data, self.indices, self.attributes)
        printer.print_string(", ")
        printer.print_attribute(self.value.type)


Affine: Dialect = with_replaced_ops(affine.Affine, LoadOp, StoreOp, VectorLoadOp, VectorStoreOp)
