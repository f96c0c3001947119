"""The affine dialect with MLIR 22's subscripts for `affine.load`, `affine.store`,
`affine.vector_load` and `affine.vector_store`, and MLIR 22's custom syntax for
`affine.parallel` and `affine.if` (xDSL 0.74 only knows them generically).

In MLIR a bare SSA value in a subscript is a dimension of the access map and
`symbol(%v)` a symbol; xDSL 0.74 makes every value a symbol, so `%m[%i]` became
`()[s0] -> (s0)`, which MLIR rejects when `%i` is a loop variable (a loop variable is
not a valid symbol).
"""

import math
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

from xdsl.dialects import affine
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AffineSetAttr,
    AnyFloat,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    TensorType,
    UnitAttr,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineExpr, AffineMap
from xdsl.ir.affine.affine_expr import (
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineSymExpr,
)
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    PropertyDef,
    irdl_op_definition,
    irdl_to_attr_constraint,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.parser.affine_parser import AffineParser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa

# What the rest of dhir uses of xDSL's affine dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.affine is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.affine import (
    ApplyOp as ApplyOp,
    ForOp as ForOp,
    MinOp as MinOp,
    YieldOp as YieldOp,
)
# isort: on

from dhir.dialects import arith, with_replaced_ops
from dhir.dialects.format import print_type_list, redefine, split_properties
from dhir.dialects.memref import ATOMIC_RMW_KINDS, parse_prefetch_hints, print_prefetch_hints

_PRECEDENCE = {
    AffineBinaryOpKind.Add: 10,
    AffineBinaryOpKind.Mul: 20,
    AffineBinaryOpKind.Mod: 20,
    AffineBinaryOpKind.FloorDiv: 20,
    AffineBinaryOpKind.CeilDiv: 20,
}


class _SSAExprScope:
    """SSA values in affine expressions as MLIR's `parseAffineExprOfSSAIds` reads them:
    `%v` is a dimension and `symbol(%v)` a symbol, numbered in order of first use; a value
    seen before keeps the kind and position it got first (`[symbol(%n), %n]` is
    `()[s0] -> (s0, s0)`)."""

    def __init__(self, parser: Parser) -> None:
        self.parser = parser
        self.dims: list[UnresolvedOperand] = []
        self.syms: list[UnresolvedOperand] = []
        self.seen: dict[str, AffineExpr] = {}

    def _use(self, operand: UnresolvedOperand, symbol: bool) -> AffineExpr:
        key = f"{operand.operand_name}#{operand.index}"
        if key not in self.seen:
            table = self.syms if symbol else self.dims
            table.append(operand)
            position = len(table) - 1
            self.seen[key] = (
                AffineExpr.symbol(position) if symbol else AffineExpr.dimension(position)
            )
        return self.seen[key]

    def _parse_value(self) -> AffineExpr | None:
        parser = self.parser
        if parser.parse_optional_keyword("symbol"):
            parser.parse_punctuation("(")
            operand = parser.parse_unresolved_operand()
            parser.parse_punctuation(")")
            return self._use(operand, symbol=True)
        operand = parser.parse_optional_unresolved_operand()
        return None if operand is None else self._use(operand, symbol=False)

    def parse_expr(self) -> AffineExpr:
        # The affine-expression grammar is xDSL's; only the leaves differ.
        state = self.parser._parser_state  # pyright: ignore[reportPrivateUsage]
        return AffineParser(state)._parse_affine_expr(self._parse_value)  # pyright: ignore[reportPrivateUsage]

    def parse_list(self, delimiter: Parser.Delimiter) -> list[AffineExpr]:
        return self.parser.parse_comma_separated_list(delimiter, self.parse_expr)

    def operands(self) -> list[SSAValue]:
        index = IndexType()
        return [self.parser.resolve_operand(o, index) for o in (*self.dims, *self.syms)]


def parse_subscripts(parser: Parser) -> tuple[AffineMap, list[SSAValue]]:
    """`[expr, ...]` over `%v` (dimensions) and `symbol(%v)` (symbols): the map and its
    operands, dimensions first."""
    scope = _SSAExprScope(parser)
    exprs = scope.parse_list(parser.Delimiter.SQUARE)
    return AffineMap(len(scope.dims), len(scope.syms), tuple(exprs)), scope.operands()


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
    """`affine.load %memref[subscripts] attr-dict : memref-type`. xDSL 0.74 makes every
    subscript value a symbol, which MLIR rejects for loop variables."""

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

    def verify_(self) -> None:
        super().verify_()
        check_map_operands(self, self.indices, self.map.data.num_dims)


class StoreOp(affine.StoreOp):
    """`affine.store %value, %memref[subscripts] attr-dict : memref-type`. xDSL 0.74 makes every
    subscript value a symbol, which MLIR rejects for loop variables."""

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

    def verify_(self) -> None:
        super().verify_()
        check_map_operands(self, self.indices, self.map.data.num_dims)


class VectorLoadOp(affine.VectorLoadOp):
    """`affine.vector_load %memref[subscripts] : memref-type, vector-type`. xDSL 0.74 makes
    every subscript value a symbol, which MLIR rejects for loop variables."""

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

    def verify_(self) -> None:
        super().verify_()
        check_map_operands(self, self.indices, self.map.data.num_dims)


class VectorStoreOp(affine.VectorStoreOp):
    """`affine.vector_store %value, %memref[subscripts] : memref-type, vector-type`. xDSL 0.74
    makes every subscript value a symbol, which MLIR rejects for loop variables."""

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

    def verify_(self) -> None:
        super().verify_()
        check_map_operands(self, self.indices, self.map.data.num_dims)


def _parse_bound_list(parser: Parser, keyword: str) -> tuple[AffineMap, list[int], list[SSAValue]]:
    """`( item, ... )`, each item an expression or `max(expr, ...)` (`min` for upper
    bounds): the map of all expressions, the group sizes and the operands. As MLIR's
    `parseAffineMapWithMinMax`: each item is read on its own, then each kind of operand
    is deduplicated over all items, in order of first use."""
    dims: list[SSAValue] = []
    syms: list[SSAValue] = []
    exprs: list[AffineExpr] = []
    groups: list[int] = []

    def position(table: list[SSAValue], value: SSAValue) -> int:
        if value not in table:
            table.append(value)
        return table.index(value)

    def parse_item() -> None:
        scope = _SSAExprScope(parser)
        if parser.parse_optional_keyword(keyword):
            items = scope.parse_list(parser.Delimiter.PAREN)
        else:
            items = [scope.parse_expr()]
        values = scope.operands()
        new_dims = [AffineExpr.dimension(position(dims, v)) for v in values[: len(scope.dims)]]
        new_syms = [AffineExpr.symbol(position(syms, v)) for v in values[len(scope.dims) :]]
        exprs.extend(e.replace_dims_and_symbols(new_dims, new_syms) for e in items)
        groups.append(len(items))

    parser.parse_comma_separated_list(parser.Delimiter.PAREN, parse_item)
    return AffineMap(len(dims), len(syms), tuple(exprs)), groups, [*dims, *syms]


def _print_bound_list(
    printer: Printer,
    amap: AffineMap,
    groups: Sequence[int],
    operands: Sequence[SSAValue],
    keyword: str,
) -> None:
    def print_expr(expr: AffineExpr) -> None:
        _print_expr(printer, expr, amap, operands, 0)

    start = 0
    with printer.in_parens():
        for k, size in enumerate(groups):
            if k:
                printer.print_string(", ")
            exprs = amap.results[start : start + size]
            start += size
            if size == 1:
                print_expr(exprs[0])
            else:
                printer.print_string(keyword)
                with printer.in_parens():
                    printer.print_list(exprs, print_expr)


def _parse_arrow_types(parser: Parser) -> list[Attribute]:
    """MLIR's optional arrow type list: nothing, `-> T` or `-> (T, ...)`."""
    if not parser.parse_optional_punctuation("->"):
        return []
    if parser.parse_optional_punctuation("("):
        if parser.parse_optional_punctuation(")"):
            return []
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation(")")
        return list[Attribute](types)
    return [parser.parse_type()]


def _print_arrow_types(printer: Printer, types: Sequence[Attribute], parens: bool) -> None:
    if not types:
        return
    printer.print_string(" -> ")
    if parens or len(types) != 1:
        with printer.in_parens():
            print_type_list(printer, types)
    else:
        printer.print_attribute(types[0])


def _with_terminator(region: Region, arg_types: Sequence[Attribute] = ()) -> Region:
    """As MLIR's `ensureTerminator`: a block, ending in `affine.yield` unless it has a
    terminator."""
    if not region.blocks:
        region.add_block(Block(arg_types=arg_types))
    block = region.blocks[-1]
    last = block.last_op
    # As in MLIR, an op of no known dialect is not a terminator here (xDSL assumes it is).
    if last is None or not last.has_trait(IsTerminator, value_if_unregistered=False):
        block.add_op(affine.YieldOp.get())
    return region


def _yield_types(region: Region) -> tuple[Attribute, ...] | None:
    last = region.blocks[-1].last_op if region.blocks else None
    return tuple(last.operand_types) if isinstance(last, affine.YieldOp) else None


# Result types each reduction kind takes, as mlir-opt-22's verifier checks them
# (`isResultTypeMatchAtomicRMWKind`): it refuses maxnumf, minnumf, maxs, maxu, mins,
# minu and xori for every type.
_FLOAT_REDUCTIONS = frozenset({"addf", "mulf", "maximumf", "minimumf"})
_INT_REDUCTIONS = frozenset({"addi", "muli", "andi", "ori"})


# The value each reduction starts from, as mlir-opt-22's --lower-affine makes it
# (arith::getIdentityValueAttr); it refuses "assign", the other kinds fail to verify.
REDUCTION_IDENTITIES: dict[str, float | int] = {
    "addf": 0.0, "mulf": 1.0, "maximumf": -math.inf, "minimumf": math.inf,
    "addi": 0, "muli": 1, "andi": -1, "ori": 0,
}  # fmt: skip
# The op each reduction combines two values with (arith::getReductionOp).
REDUCTION_COMBINERS: dict[str, type[Operation]] = {
    "addf": arith.AddfOp, "mulf": arith.MulfOp, "maximumf": arith.MaximumfOp,
    "minimumf": arith.MinimumfOp, "addi": arith.AddiOp, "muli": arith.MuliOp,
    "andi": arith.AndIOp, "ori": arith.OrIOp,
}  # fmt: skip


def _reduction_fits(kind: str, type_: Attribute) -> bool:
    if kind == "assign":
        return True
    if kind in _FLOAT_REDUCTIONS:
        return isinstance(type_, AnyFloat)
    return kind in _INT_REDUCTIONS and isinstance(type_, IntegerType)


@redefine(properties={"reductions": PropertyDef(irdl_to_attr_constraint(ArrayAttr[IntegerAttr]))})
class ParallelOp(affine.ParallelOp):
    """`affine.parallel (%i, ...) = (lower bounds) to (upper bounds) (step (s, ...))?
    (reduce ("kind", ...) -> (types))? region attr-dict`, each bound an expression or a
    `max(...)`/`min(...)` group. As in MLIR 22, `reductions` holds the ids of
    arith.atomic_rmw_kind (xDSL 0.74 had strings, which MLIR does not read)."""

    @classmethod
    def parse(cls, parser: Parser) -> "ParallelOp":
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_punctuation("=")
        lower_map, lower_groups, lower_operands = _parse_bound_list(parser, "max")
        parser.parse_keyword("to")
        upper_map, upper_groups, upper_operands = _parse_bound_list(parser, "min")
        steps = [1] * len(ivs)
        if parser.parse_optional_keyword("step"):
            steps = cls._parse_steps(parser)
        reductions: list[int] = []
        if parser.parse_optional_keyword("reduce"):
            reductions = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: cls._parse_reduction(parser)
            )
        result_types = _parse_arrow_types(parser)
        index = IndexType()
        body = parser.parse_region([iv.resolve(index) for iv in ivs])
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        props |= {
            "reductions": ArrayAttr(IntegerAttr(r, 64) for r in reductions),
            "lowerBoundsMap": AffineMapAttr(lower_map),
            "lowerBoundsGroups": _groups_attr(lower_groups),
            "upperBoundsMap": AffineMapAttr(upper_map),
            "upperBoundsGroups": _groups_attr(upper_groups),
            "steps": ArrayAttr(IntegerAttr(s, 64) for s in steps),
        }
        return cls.build(
            operands=[[*lower_operands, *upper_operands]],
            result_types=[result_types],
            properties=props,
            attributes=attrs,
            regions=[_with_terminator(body, [index] * len(ivs))],
        )

    @staticmethod
    def _parse_steps(parser: Parser) -> list[int]:
        pos = parser.pos
        scope = _SSAExprScope(parser)
        steps = scope.parse_list(parser.Delimiter.PAREN)
        if not all(isinstance(s, AffineConstantExpr) for s in steps):
            parser.raise_error("steps must be constant integers", pos, parser.pos)
        return [s.value for s in steps if isinstance(s, AffineConstantExpr)]

    @staticmethod
    def _parse_reduction(parser: Parser) -> int:
        pos = parser.pos
        kind = parser.parse_str_literal()
        if kind not in ATOMIC_RMW_KINDS:
            parser.raise_error(
                f"invalid reduction value: {kind!r}; expected one of "
                + ", ".join(ATOMIC_RMW_KINDS),
                pos,
                parser.pos,
            )
        return ATOMIC_RMW_KINDS.index(kind)

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.body.block.args, lambda a: printer.print_block_argument(a, False))
        printer.print_string(") = ")
        lower_map, upper_map = self.lowerBoundsMap.data, self.upperBoundsMap.data
        split = lower_map.num_dims + lower_map.num_symbols
        lower_groups = [int(g) for g in self.lowerBoundsGroups.get_values()]
        upper_groups = [int(g) for g in self.upperBoundsGroups.get_values()]
        _print_bound_list(printer, lower_map, lower_groups, self.map_operands[:split], "max")
        printer.print_string(" to ")
        _print_bound_list(printer, upper_map, upper_groups, self.map_operands[split:], "min")
        steps = [s.value.data for s in self.steps]
        if any(s != 1 for s in steps):
            printer.print_string(f" step ({', '.join(map(str, steps))})")
        if self.res:
            printer.print_string(" reduce (")
            printer.print_list(self.reduction_kinds(), lambda k: printer.print_string(f'"{k}"'))
            printer.print_string(")")
            _print_arrow_types(printer, self.result_types, parens=True)
        printer.print_string(" ")
        printer.print_region(
            self.body, print_entry_block_args=False, print_block_terminators=bool(self.res)
        )
        printer.print_op_attributes(self.attributes)

    def reduction_kinds(self) -> list[str]:
        """The name of each reduction (its id where it has none: invalid IR is printed in
        diagnostics too)."""
        ids = [cast(IntegerAttr, r).value.data for r in self.reductions]
        return [ATOMIC_RMW_KINDS[i] if 0 <= i < len(ATOMIC_RMW_KINDS) else str(i) for i in ids]

    def verify_(self) -> None:
        self._verify_shape()
        lower_map = self.lowerBoundsMap.data
        n_lower = lower_map.num_dims + lower_map.num_symbols
        check_map_operands(self, self.map_operands[:n_lower], lower_map.num_dims)
        upper = self.map_operands[n_lower:]
        check_map_operands(self, upper, self.upperBoundsMap.data.num_dims)

    def _verify_shape(self) -> None:
        lower_map, upper_map = self.lowerBoundsMap.data, self.upperBoundsMap.data
        inputs = sum(m.num_dims + m.num_symbols for m in (lower_map, upper_map))
        if len(self.map_operands) != inputs:
            raise VerifyException(
                f"expected {inputs} operands (the inputs of both bound maps), got "
                f"{len(self.map_operands)}"
            )
        rank = len(self.body.block.args) if self.body.blocks else -1
        for name, groups, amap in (
            ("lower", self.lowerBoundsGroups, lower_map),
            ("upper", self.upperBoundsGroups, upper_map),
        ):
            sizes = [int(g) for g in groups.get_values()]
            if len(sizes) != rank or sum(sizes) != len(amap.results) or min(sizes, default=1) < 1:
                raise VerifyException(
                    f"{name} bound groups {sizes} do not split the {len(amap.results)} "
                    f"bounds among the {rank} loop variables"
                )
        if len(self.steps) != rank:
            raise VerifyException(f"expected {rank} steps, got {len(self.steps)}")
        kinds = self.reduction_kinds()
        if len(kinds) != len(self.res):
            raise VerifyException(
                f"has {len(self.res)} results but {len(kinds)} reductions; they must match"
            )
        for kind, type_ in zip(kinds, self.result_types):
            if not _reduction_fits(kind, type_):
                raise VerifyException(f'reduction "{kind}" cannot produce a result of type {type_}')
        if _yield_types(self.body) != tuple(self.result_types):
            raise VerifyException("its affine.yield must yield one value of each result type")


def parallel_bounds(
    op: affine.ParallelOp, dim: int
) -> tuple[tuple[AffineMap, list[SSAValue]], tuple[AffineMap, list[SSAValue]], int]:
    """Dimension `dim` of `op`: its lower bound's map (its group of the lower bounds'
    results, the greatest of which it starts from) and operands, its upper bound's (the
    least of which it stops below) and its step."""
    lower, upper = op.lowerBoundsMap.data, op.upperBoundsMap.data
    split = lower.num_dims + lower.num_symbols
    operands = list(op.map_operands)
    found: list[tuple[AffineMap, list[SSAValue]]] = []
    for amap, groups, args in (
        (lower, op.lowerBoundsGroups, operands[:split]),
        (upper, op.upperBoundsGroups, operands[split:]),
    ):
        sizes = [int(g) for g in groups.get_values()]
        start = sum(sizes[:dim])
        results = amap.results[start : start + sizes[dim]]
        found.append((AffineMap(amap.num_dims, amap.num_symbols, tuple(results)), args))
    return found[0], found[1], op.steps.data[dim].value.data


def _groups_attr(sizes: Sequence[int]) -> DenseIntElementsAttr:
    return DenseIntElementsAttr.from_list(TensorType(i32, [len(sizes)]), list(sizes))


class IfOp(affine.IfOp):
    """`affine.if set(dims)[symbols] (-> types)? region (else region)? attr-dict`, the
    set inline (`affine_set<...>`) or an alias. xDSL 0.74 has only the generic form."""

    @classmethod
    def parse(cls, parser: Parser) -> "IfOp":
        pos = parser.pos
        condition = parser.parse_attribute()
        if not isinstance(condition, AffineSetAttr):
            parser.raise_error(f"expected an integer set, got {condition}", pos, parser.pos)
        dims = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        syms = parser.parse_optional_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        syms = syms or []
        iset = condition.data
        if (len(dims), len(syms)) != (iset.num_dims, iset.num_symbols):
            parser.raise_error(
                f"the set takes {iset.num_dims} dimensions and {iset.num_symbols} symbols, "
                f"given {len(dims)} and {len(syms)}",
                pos,
                parser.pos,
            )
        operands = [parser.resolve_operand(o, IndexType()) for o in (*dims, *syms)]
        result_types = _parse_arrow_types(parser)
        then_region = _with_terminator(parser.parse_region())
        else_region = Region()
        if parser.parse_optional_keyword("else"):
            else_region = _with_terminator(parser.parse_region())
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        return cls.build(
            operands=[operands],
            result_types=[result_types],
            properties={**props, "condition": condition},
            attributes=attrs,
            regions=[then_region, else_region],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.condition)
        num_dims = self.condition.data.num_dims
        with printer.in_parens():
            printer.print_list(self.args[:num_dims], printer.print_ssa_value)
        if len(self.args) > num_dims:
            with printer.in_square_brackets():
                printer.print_list(self.args[num_dims:], printer.print_ssa_value)
        _print_arrow_types(printer, self.result_types, parens=False)
        printer.print_string(" ")
        terminators = bool(self.res)
        printer.print_region(
            self.then_region, print_entry_block_args=False, print_block_terminators=terminators
        )
        if self.else_region.blocks:
            printer.print_string(" else ")
            printer.print_region(
                self.else_region, print_entry_block_args=False, print_block_terminators=terminators
            )
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        self._verify_shape()
        check_map_operands(self, self.args, self.condition.data.num_dims)

    def _verify_shape(self) -> None:
        iset = self.condition.data
        if len(self.args) != iset.num_dims + iset.num_symbols:
            raise VerifyException(
                f"the set takes {iset.num_dims + iset.num_symbols} operands, given {len(self.args)}"
            )
        types = tuple(self.result_types)
        if _yield_types(self.then_region) != types:
            raise VerifyException("the then region must yield one value of each result type")
        if self.else_region.blocks and _yield_types(self.else_region) != types:
            raise VerifyException("the else region must yield one value of each result type")
        if types and not self.else_region.blocks:
            raise VerifyException("an affine.if with results must have an else region")


@irdl_op_definition
class MaxOp(IRDLOperation):
    """`affine.max map(dims)[symbols]`: the largest result of the map (xDSL 0.74 has
    only `affine.min`)."""

    name = "affine.max"

    arguments = var_operand_def(IndexType())
    result = result_def(IndexType())
    map = prop_def(AffineMapAttr)

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "MaxOp":
        pos = parser.pos
        amap = parser.parse_attribute()
        if not isinstance(amap, AffineMapAttr):
            parser.raise_error("expected an affine map", pos, parser.pos)
        dims = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
        )
        syms = parser.parse_optional_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
        )
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        return cls.create(
            operands=[*dims, *(syms or [])],
            result_types=[IndexType()],
            properties={**props, "map": amap},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.map)
        num_dims = self.map.data.num_dims
        with printer.in_parens():
            printer.print_list(self.arguments[:num_dims], printer.print_operand)
        if len(self.arguments) > num_dims:
            with printer.in_square_brackets():
                printer.print_list(self.arguments[num_dims:], printer.print_operand)
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        amap = self.map.data
        if len(self.arguments) != amap.num_dims + amap.num_symbols:
            raise VerifyException(
                f"the map takes {amap.num_dims + amap.num_symbols} operands, "
                f"given {len(self.arguments)}"
            )
        if not amap.results:
            raise VerifyException("the map must have at least one result")


def _parse_basis(parser: Parser) -> tuple[list[int], list[SSAValue]]:
    """`(4, %n, 8)`: the static basis (dynamic entries as DYNAMIC_INDEX) and the values."""
    static: list[int] = []
    dynamic: list[SSAValue] = []

    def entry() -> None:
        value = parser.parse_optional_integer()
        if value is None:
            dynamic.append(parser.parse_operand(IndexType()))
            static.append(DYNAMIC_INDEX)
        else:
            static.append(value)

    parser.parse_comma_separated_list(parser.Delimiter.PAREN, entry)
    return static, dynamic


def _print_basis(printer: Printer, static: Sequence[int], dynamic: Sequence[SSAValue]) -> None:
    values = iter(dynamic)

    def entry(size: int) -> None:
        if size == DYNAMIC_INDEX:
            printer.print_operand(next(values))
        else:
            printer.print_string(str(size))

    with printer.in_parens():
        printer.print_list(static, entry)


@irdl_op_definition
class DelinearizeIndexOp(IRDLOperation):
    """`affine.delinearize_index %i into (basis) attr-dict : types`. xDSL 0.74 lacks this op."""

    name = "affine.delinearize_index"

    linear_index = operand_def(IndexType())
    dynamic_basis = var_operand_def(IndexType())
    static_basis = prop_def(DenseArrayBase.constr(i64))
    multi_index = var_result_def(IndexType())

    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "DelinearizeIndexOp":
        index = parser.parse_operand(IndexType())
        parser.parse_keyword("into")
        static, dynamic = _parse_basis(parser)
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        return cls.create(
            operands=[index, *dynamic],
            result_types=types,
            properties={**props, "static_basis": DenseArrayBase.from_list(i64, static)},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.linear_index)
        printer.print_string(" into ")
        _print_basis(printer, self.static_basis.get_values(), self.dynamic_basis)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        print_type_list(printer, self.result_types)

    def verify_(self) -> None:
        static = self.static_basis.get_values()
        if len(self.dynamic_basis) != sum(s == DYNAMIC_INDEX for s in static):
            raise VerifyException("the basis has one value per dynamic entry")
        if len(self.multi_index) not in (len(static), len(static) + 1):
            raise VerifyException("there is one result per basis entry, or one more")


@irdl_op_definition
class LinearizeIndexOp(IRDLOperation):
    """`affine.linearize_index disjoint? [indices] by (basis) attr-dict : index`. xDSL 0.74
    lacks this op."""

    name = "affine.linearize_index"

    multi_index = var_operand_def(IndexType())
    dynamic_basis = var_operand_def(IndexType())
    static_basis = prop_def(DenseArrayBase.constr(i64))
    # Set, MLIR's generic form has `disjoint`, unset `disjoint = false`.
    disjoint = opt_prop_def(AnyAttr())
    linear_index = result_def(IndexType())

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    @classmethod
    def parse(cls, parser: Parser) -> "LinearizeIndexOp":
        props: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("disjoint"):
            props["disjoint"] = UnitAttr()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
        )
        parser.parse_keyword("by")
        static, dynamic = _parse_basis(parser)
        more, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        parser.parse_punctuation(":")
        result = parser.parse_type()
        props["static_basis"] = DenseArrayBase.from_list(i64, static)
        return cls.create(
            operands=[*indices, *dynamic],
            result_types=[result],
            properties={
                **more,
                **props,
                "operandSegmentSizes": DenseArrayBase.from_list(i32, [len(indices), len(dynamic)]),
            },
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        if isinstance(self.disjoint, UnitAttr) or self.disjoint == BoolAttr.from_bool(True):
            printer.print_string(" disjoint")
        printer.print_string(" ")
        with printer.in_square_brackets():
            printer.print_list(self.multi_index, printer.print_operand)
        printer.print_string(" by ")
        _print_basis(printer, self.static_basis.get_values(), self.dynamic_basis)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.linear_index.type)


# --- MLIR's valid dimensions and symbols ------------------------------------------------
# mlir-opt-22 refuses an affine map operand that is not a valid dimension or symbol
# ("operand cannot be used as a dimension id"); these are its rules (isValidDim and
# isValidSymbol in MLIR's AffineOps.cpp). A dhir.task counts as an affine scope, as a
# function does: its body becomes one, and what it takes from outside is an argument
# (on two ranks, its body goes under a rank guard, and dhir.transforms.affine_scope
# lowers the affine ops that only its scope made valid).


def _scope(op: Operation) -> Region | None:
    """The region of the nearest enclosing function or dhir.task (MLIR's affine scope)."""
    region = op.parent_region()
    while region is not None and region.parent is not None:
        owner = region.parent
        if owner.name in _SCOPE_OPS or owner.has_trait(IsolatedFromAbove):
            return region
        region = owner.parent_region()
    return region


_SCOPE_OPS = frozenset({"func.func", "gpu.func", "dhir.task", "builtin.module"})


def _defining_region(value: SSAValue) -> Region | None:
    if isinstance(value, BlockArgument):
        return value.block.parent
    return value.owner.parent_region() if isinstance(value.owner, Operation) else None


def _is_top_level(value: SSAValue, scope: Region | None) -> bool:
    """Defined directly in `scope`, or outside it (an argument of the scope)."""
    region = _defining_region(value)
    if scope is None or region is scope:
        return True
    while region is not None:  # inside the scope, at some depth?
        if region is scope:
            return False
        owner = region.parent
        region = owner.parent_region() if owner is not None else None
    return True


def _is_index(value: SSAValue) -> bool:
    return isinstance(value.type, IndexType)


def valid_symbol(value: SSAValue, scope: Region | None) -> bool:
    return _Judge(scope).symbol(value)


def valid_dim(value: SSAValue, scope: Region | None) -> bool:
    return _Judge(scope).dim(value)


class _Judge:
    """Whether values are valid symbols or dims of `scope`, each value judged once: a
    chain of ops that each use the last twice would otherwise be walked once per path,
    2**length times."""

    def __init__(self, scope: Region | None) -> None:
        self.scope = scope
        self.symbols: dict[SSAValue, bool] = {}
        self.dims: dict[SSAValue, bool] = {}

    def symbol(self, value: SSAValue) -> bool:
        if value not in self.symbols:
            self.symbols[value] = _valid_symbol(value, self.scope, self.symbol)
        return self.symbols[value]

    def dim(self, value: SSAValue) -> bool:
        if value not in self.dims:
            self.dims[value] = self.symbol(value) or _valid_dim(value, self.scope, self.dim)
        return self.dims[value]


def _valid_symbol(value: SSAValue, scope: Region | None, valid: Callable[[SSAValue], bool]) -> bool:
    if not _is_index(value):
        return False
    if _is_top_level(value, scope):
        return True
    op = value.owner
    if not isinstance(op, Operation):
        return False
    if op.has_trait(ConstantLike):
        return True
    if _pure(op) and all(valid(v) for v in op.operands):
        return True
    if op.name in _DIM_OPS:
        return _valid_dim_op_symbol(op, scope)
    return False


# MLIR 22 takes the result of any pure op (speculatable, without memory effects: its
# isPure) of valid symbols as a valid symbol, at any depth. Which ops are so is MLIR's
# word, not xDSL's traits (xDSL calls arith.remui and affine.min impure, arith.divui
# pure): all of arith and math but the divisions below, and these, each of which
# mlir-opt-22 took in a loop whose result bounds another (tests/unit/test_affine_operands.py
# checks those that can make an index of indices). An op missing here is refused where
# mlir-opt-22 takes it, never the other way round.
_PURE_DIALECTS = ("arith.", "math.")
_PURE = frozenset(
    {
        "affine.apply",
        "affine.min",
        "affine.max",
        "affine.delinearize_index",
        "affine.linearize_index",
        "affine.yield",
        "scf.yield",
        "ub.poison",
        "gpu.shuffle",
        # The index dialect's divisions and casts are not (whatever the divisor).
        *(
            f"index.{name}"
            for name in (
                "add sub mul maxs maxu mins minu shl shrs shru and or xor cmp constant "
                "bool.constant sizeof"
            ).split()
        ),
        *(
            f"vector.{name}"
            for name in (
                "broadcast",
                "extract",
                "insert",
                "extract_strided_slice",
                "insert_strided_slice",
                "shuffle",
                "fma",
                "reduction",
                "multi_reduction",
                "contract",
                "outerproduct",
                "transpose",
                "shape_cast",
                "bitcast",
                "from_elements",
                "step",
                "create_mask",
                "constant_mask",
                "interleave",
                "deinterleave",
            )
        ),
        *(
            f"tensor.{name}"
            for name in ("empty", "extract", "insert", "cast", "extract_slice", "expand_shape")
        ),
        "tensor.from_elements",
        *(
            f"memref.{name}"
            for name in (
                "cast",
                "subview",
                "reinterpret_cast",
                "expand_shape",
                "collapse_shape",
                "transpose",
                "memory_space_cast",
                "assume_alignment",
                "extract_aligned_pointer_as_index",
                "extract_strided_metadata",
                "rank",
            )
        ),
        *(
            f"gpu.{name}"
            for name in (
                "thread_id",
                "block_id",
                "block_dim",
                "grid_dim",
                "cluster_id",
                "cluster_dim",
                "cluster_block_id",
                "cluster_dim_blocks",
                "global_id",
                "lane_id",
                "subgroup_id",
                "num_subgroups",
                "subgroup_size",
            )
        ),
    }
)
# A division is speculatable only by a constant that is not 0 (UB), nor -1 when signed
# (the minimum divided by -1 overflows); arith.floordivsi, remsi and remui are pure.
_UNSIGNED_DIVISIONS = frozenset({"arith.divui", "arith.ceildivui"})
_SIGNED_DIVISIONS = frozenset({"arith.divsi", "arith.ceildivsi"})
_DIM_OPS = frozenset({"memref.dim", "tensor.dim"})


def _pure(op: Operation) -> bool:
    """MLIR 22's isPure: speculatable, and without memory effects; an op with regions
    (a loop of step 1, an if) is so when all the ops in them are (whatever values they
    use: MLIR checks only the op's own operands)."""
    name = op.name
    if name in _UNSIGNED_DIVISIONS or name in _SIGNED_DIVISIONS:
        divisor = _constant(op.operands[1])
        return divisor not in (None, 0) and not (name in _SIGNED_DIVISIONS and divisor == -1)
    if name in _DIM_OPS:  # speculatable when the dimension is a constant within the rank
        shape = getattr(op.operands[0].type, "get_shape", None)
        position = _constant(op.operands[1])
        return shape is not None and position is not None and 0 <= position < len(shape())
    if name in _PURE or name.startswith(_PURE_DIALECTS):
        return True
    if isinstance(op, affine.ForOp):
        steps_by_one = op.step.value.data == 1
    elif op.name == "scf.for":
        steps_by_one = _constant(op.operands[2]) == 1
    else:
        steps_by_one = op.name in ("affine.if", "affine.parallel", "scf.if")
    inner = (nested for region in op.regions for block in region.blocks for nested in block.ops)
    return steps_by_one and all(_pure(nested) for nested in inner)


def _valid_dim_op_symbol(op: Operation, scope: Region | None) -> bool:
    """memref.dim or tensor.dim: of a value from the top level, or a static size or
    valid symbol size of a memref allocated or viewed inside the scope (through any
    memref.cast of a ranked memref), as MLIR's isDimOpValidSymbol."""
    source, index = op.operands
    if _is_top_level(source, scope):
        return True
    position = _constant(index)
    if isinstance(source, BlockArgument) or position is None:
        return False
    made = source.owner
    while isinstance(made, Operation) and made.name == "memref.cast":
        if not isinstance(made.operands[0].type, MemRefType):
            return False
        made = made.operands[0].owner
    if not isinstance(made, Operation) or made.name not in _SIZED:
        return False
    shape = cast(MemRefType, made.results[0].type).get_shape()
    if not 0 <= position < len(shape):
        return False
    if shape[position] != DYNAMIC_INDEX:
        return True
    sizes = _SIZED[made.name](made)
    return valid_symbol(sizes[sum(n == DYNAMIC_INDEX for n in shape[:position])], scope)


# The ops whose sizes MLIR's isDimOpValidSymbol looks through (not memref.alloca), and
# their dynamic size operands.
_SIZED: dict[str, Callable[[Operation], Sequence[SSAValue]]] = {
    "memref.alloc": lambda op: op.operands[: len(op.operands) - _symbol_count(op)],
    "memref.view": lambda op: op.operands[2:],
    "memref.subview": lambda op: _segment(op, 2),
}


def _symbol_count(op: Operation) -> int:
    """How many of a memref.alloc's operands are layout symbols (after its sizes)."""
    segments = op.properties.get("operandSegmentSizes")
    if isinstance(segments, DenseArrayBase):
        return cast(int, segments.get_values()[1])
    return 0


def _segment(op: Operation, which: int) -> Sequence[SSAValue]:
    """The operands of variadic operand group `which` of `op` (by operandSegmentSizes)."""
    segments = op.properties.get("operandSegmentSizes")
    assert isinstance(segments, DenseArrayBase)
    counts = cast(list[int], segments.get_values())
    start = sum(counts[:which])
    return op.operands[start : start + counts[which]]


def _constant(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, Operation) and op.has_trait(ConstantLike):
        found = op.properties.get("value")
        if found is None:
            found = op.attributes.get("value")
        if isinstance(found, IntegerAttr):
            return found.value.data
    return None


def _valid_dim(value: SSAValue, scope: Region | None, valid: Callable[[SSAValue], bool]) -> bool:
    """A valid dim that is not a valid symbol."""
    if not _is_index(value):
        return False
    op = value.owner
    if isinstance(value, BlockArgument):
        return _is_induction_variable(value)
    if isinstance(op, affine.ApplyOp | DelinearizeIndexOp | LinearizeIndexOp):
        return all(valid(v) for v in op.operands)
    if isinstance(op, Operation) and op.name in _DIM_OPS:
        return _is_top_level(op.operands[0], scope)
    return False


def _is_induction_variable(value: BlockArgument) -> bool:
    owner = value.block.parent_op()
    if isinstance(owner, affine.ForOp):
        return value.index == 0
    return isinstance(owner, affine.ParallelOp)


def check_map_operands(op: Operation, operands: Sequence[SSAValue], num_dims: int) -> None:
    """As MLIR's verifiers: the first `num_dims` operands valid dimensions, the rest
    valid symbols."""
    scope = _scope(op)
    for position, operand in enumerate(operands):
        if position < num_dims and not valid_dim(operand, scope):
            raise VerifyException(
                f"operand {position} cannot be used as a dimension id (it is not a loop "
                "variable, a value from the top of the function or task, or affine "
                "arithmetic of these; mlir-opt-22 refuses it)"
            )
        if position >= num_dims and not valid_symbol(operand, scope):
            raise VerifyException(
                f"operand {position} cannot be used as a symbol (it is not a constant, a "
                "value from the top of the function or task, or a pure op such as "
                "arith.addi of such values; mlir-opt-22 refuses it)"
            )


_Rebuilt = TypeVar("_Rebuilt", bound=Operation)


def _rebuilt(cls: type[_Rebuilt], op: Operation) -> _Rebuilt:
    """`op`, as xDSL's parser builds it (xDSL's class), rebuilt as `cls`, its regions
    moved over."""
    return cls.create(
        operands=list(op.operands),
        result_types=list(op.result_types),
        properties=dict(op.properties),
        attributes=dict(op.attributes),
        regions=[op.detach_region(0) for _ in range(len(op.regions))],
    )


class _ForOp(affine.ForOp):
    """xDSL's affine.for, whose bound operands are also checked as MLIR checks them."""

    @classmethod
    def parse(cls, parser: Parser) -> "_ForOp":
        return _rebuilt(cls, affine.ForOp.parse(parser))

    def verify_(self) -> None:
        super().verify_()
        lower, upper = self.lowerBoundMap.data, self.upperBoundMap.data
        check_map_operands(self, self.lowerBoundOperands, lower.num_dims)
        check_map_operands(self, self.upperBoundOperands, upper.num_dims)


class _ApplyOp(affine.ApplyOp):
    """xDSL's affine.apply, which also refuses a loop variable (or other valid dimension
    that is no valid symbol) given as a symbol, as MLIR's verifier does."""

    @classmethod
    def parse(cls, parser: Parser) -> "_ApplyOp":
        return _rebuilt(cls, affine.ApplyOp.parse(parser))

    def verify_(self) -> None:
        super().verify_()
        scope = _scope(self)
        for operand in self.mapOperands[self.map.data.num_dims :]:
            if valid_dim(operand, scope) and not valid_symbol(operand, scope):
                raise VerifyException(
                    "dimensional operand cannot be used as a symbol (mlir-opt-22 refuses it)"
                )


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`affine.prefetch %m[subscripts], read|write, locality<0..3>, data|instr attr-dict
    : memref-type`: a hint to the cache at an affine access, without effect on the
    program's results (lower-affine makes it a memref.prefetch). xDSL 0.74 lacks this op.
    dhir's effect analysis does not list it: it takes it to read and write the memref."""

    name = "affine.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())
    isWrite = prop_def(BoolAttr)
    localityHint = prop_def(IntegerAttr[IntegerType])
    isDataCache = prop_def(BoolAttr)
    map = prop_def(AffineMapAttr)

    @classmethod
    def parse(cls, parser: Parser) -> "PrefetchOp":
        target = parser.parse_unresolved_operand()
        amap, indices = parse_subscripts(parser)
        hints, attrs, memref_type = parse_prefetch_hints(parser)
        return cls.build(
            operands=[parser.resolve_operand(target, memref_type), indices],
            properties={**hints, "map": AffineMapAttr(amap)},
            attributes=attrs,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.memref)
        print_subscripts(printer, self.map.data, self.indices)
        hints = self.isWrite.value.data, self.localityHint.value.data, self.isDataCache.value.data
        print_prefetch_hints(printer, self, *hints)

    def verify_(self) -> None:
        amap = self.map.data
        memref_type = cast(MemRefType, self.memref.type)
        if len(amap.results) != memref_type.get_num_dims():
            raise VerifyException(
                "'affine.prefetch' op affine.prefetch affine map num results must equal memref rank"
            )
        if len(self.indices) != amap.num_dims + amap.num_symbols:
            raise VerifyException("'affine.prefetch' op too few operands")
        if not 0 <= self.localityHint.value.data <= 3:
            raise VerifyException(
                "'affine.prefetch' op attribute 'localityHint' must be 0 to 3, got "
                f"{self.localityHint.value.data}"
            )
        check_map_operands(self, self.indices, amap.num_dims)


Affine: Dialect = with_replaced_ops(
    affine.Affine,
    _ApplyOp,
    _ForOp,
    LoadOp,
    StoreOp,
    VectorLoadOp,
    VectorStoreOp,
    ParallelOp,
    IfOp,
    MaxOp,
    DelinearizeIndexOp,
    LinearizeIndexOp,
    PrefetchOp,
)
