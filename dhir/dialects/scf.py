"""The scf dialect with MLIR 22's custom syntax for `scf.parallel` and `scf.reduce`,
which xDSL 0.74 prints generically (`scf.parallel`) or with regions MLIR cannot read
(`scf.reduce` without the `,` between its regions)."""

from collections.abc import Sequence

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    opt_prop_def,
    prop_def,
    region_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsTerminator,
    NoTerminator,
    SingleBlockImplicitTerminator,
    ensure_terminator,
)
from xdsl.utils.exceptions import VerifyException

# What the rest of dhir uses of xDSL's scf dialect as it is (the ops dhir does not
# shadow), so that dhir.dialects.scf is the whole dialect as dhir uses it.
# isort: off
from xdsl.dialects.scf import (
    ConditionOp as ConditionOp,
    ReduceReturnOp as ReduceReturnOp,
    YieldOp as YieldOp,
)
# isort: on

from dhir.dialects import with_replaced_ops
from dhir.dialects.arith import signed
from dhir.dialects.format import (
    has_terminator,
    optional_property,
    print_type_list,
    redefine,
    split_properties,
)

_SEGMENTS = "operandSegmentSizes"
_UNSIGNED_FOR = (
    "'scf.for unsigned' (unsignedCmp) is not supported by dhir: its loops compare signed; "
    "write the loop as an scf.while with arith.cmpi ult"
)
_NO_INLINE = "no_inline"


class ReduceOp(scf.ReduceOp):
    """`scf.reduce ((%v, ... : types))? region (, region)* attr-dict`. xDSL 0.74 prints its
    regions without the `,` MLIR needs between them."""

    def print(self, printer: Printer) -> None:
        if self.args:
            printer.print_string("(")
            printer.print_list(self.args, printer.print_operand)
            printer.print_string(" : ")
            print_type_list(printer, self.args.types)
            printer.print_string(")")
        for i, region in enumerate(self.reductions):
            printer.print_string(", " if i else " ")
            printer.print_region(region)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "ReduceOp":
        args: Sequence[SSAValue] = []
        if parser.parse_optional_punctuation("("):
            names = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(":")
            pos = parser.pos
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            parser.parse_punctuation(")")
            args = parser.resolve_operands(names, types, pos)
        regions: list[Region] = []
        if (region := parser.parse_optional_region()) is not None:
            regions.append(region)
            while parser.parse_optional_punctuation(","):
                regions.append(parser.parse_region())
        attrs = parser.parse_optional_attr_dict()
        return cls.build(operands=[args], regions=[regions], attributes=attrs)


class ParallelOp(scf.ParallelOp):
    """`scf.parallel (%i, ...) = (lbs) to (ubs) step (steps) (init (vals))? (-> types)?
    region attr-dict`. Like MLIR, parsing adds the `scf.reduce` terminator when it is
    missing, and printing always shows it. xDSL 0.74 has only the generic form."""

    def verify_(self) -> None:
        _check_steps("scf.parallel", self.step)
        super().verify_()

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(
            self.body.block.args,
            lambda arg: printer.print_block_argument(arg, print_type=False),
        )
        for keyword, values in (
            (") = (", self.lowerBound),
            (") to (", self.upperBound),
            (") step (", self.step),
        ):
            printer.print_string(keyword)
            printer.print_list(values, printer.print_operand)
        printer.print_string(")")
        if self.initVals:
            printer.print_string(" init (")
            printer.print_list(self.initVals, printer.print_operand)
            printer.print_string(")")
        _print_arrow_types(printer, self.res.types)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes, reserved_attr_names=(_SEGMENTS,))

    @classmethod
    def parse(cls, parser: Parser) -> "ParallelOp":
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        parser.parse_punctuation("=")
        lower = _parse_index_list(parser)
        parser.parse_keyword("to")
        upper = _parse_index_list(parser)
        parser.parse_keyword("step")
        steps = _parse_index_list(parser)
        init_names: list[UnresolvedOperand] = []
        if parser.parse_optional_keyword("init"):
            init_names = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            )
        pos = parser.pos
        result_types = _parse_arrow_types(parser)
        inits = parser.resolve_operands(init_names, result_types, pos)
        body = parser.parse_region([iv.resolve(IndexType()) for iv in ivs])
        attrs = parser.parse_optional_attr_dict()
        attrs.pop(_SEGMENTS, None)
        _ensure_reduce(body)
        return cls.build(
            operands=[lower, upper, steps, inits],
            result_types=[result_types],
            regions=[body],
            attributes=attrs,
        )


@redefine(properties={_NO_INLINE: optional_property(UnitAttr)})
class ExecuteRegionOp(scf.ExecuteRegionOp):
    """`scf.execute_region (-> types)? no_inline? region attr-dict`. MLIR prints every
    terminator: xDSL 0.74 left them out when the op has no results, which loses the
    `scf.yield` of each block of a region with several, and dropped the attributes."""

    def print(self, printer: Printer) -> None:
        _print_arrow_types(printer, self.outs.types)
        printer.print_string(" ")
        if _NO_INLINE in self.properties:
            printer.print_string("no_inline ")
        printer.print_region(self.region, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if self.region.first_block is None:
            raise VerifyException("scf.execute_region needs a region with at least one block")

    @classmethod
    def parse(cls, parser: Parser) -> "ExecuteRegionOp":
        result_types = _parse_arrow_types(parser)
        no_inline = parser.parse_optional_keyword(_NO_INLINE) is not None
        region = parser.parse_region()
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        if no_inline:
            props[_NO_INLINE] = UnitAttr()
        return cls.build(
            result_types=[result_types], regions=[region], properties=props, attributes=attrs
        )


class ForOp(scf.ForOp):
    """`scf.for %i = %lb to %ub step %s (iter_args(%a = %v, ...) -> types)? (: type)?
    region attr-dict`; MLIR writes a single iter_args type without parentheses.
    xDSL 0.74 cannot read a single iter_args type without parentheses."""

    @classmethod
    def parse(cls, parser: Parser) -> "ForOp":
        start = parser.pos
        if parser.parse_optional_keyword("unsigned"):
            parser.raise_error(_UNSIGNED_FOR, start, parser.pos)
        indvar = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        bounds = [parser.parse_unresolved_operand()]
        for keyword in ("to", "step"):
            parser.parse_keyword(keyword)
            bounds.append(parser.parse_unresolved_operand())
        pos = parser.pos
        pairs: list[tuple[Parser.UnresolvedArgument, UnresolvedOperand]] = []
        types: list[Attribute] = []
        if parser.parse_optional_keyword("iter_args"):
            pairs = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: _parse_assignment(parser)
            )
            types = _parse_arrow_types(parser)
            if len(types) != len(pairs):
                parser.raise_error(
                    f"{len(pairs)} iter_args but {len(types)} types", pos, parser.pos
                )
        inits = parser.resolve_operands([v for _, v in pairs], types, pos)
        iv_type = parser.parse_type() if parser.parse_optional_punctuation(":") else IndexType()
        lb, ub, step = (parser.resolve_operand(b, iv_type) for b in bounds)
        args = [indvar.resolve(iv_type), *(a.resolve(t) for (a, _), t in zip(pairs, types))]
        body = parser.parse_region(args)
        attrs = parser.parse_optional_attr_dict()
        if not pairs and body.blocks and not has_terminator(body.blocks[-1]):
            body.blocks[-1].add_op(scf.YieldOp())
        op = cls.build(
            operands=[lb, ub, step, inits], result_types=[types], regions=[body], attributes=attrs
        )
        return op

    def verify_(self) -> None:
        # MLIR reads an `unsignedCmp` attribute as the loop's own: native code would
        # compare unsigned where dhir's passes and the interpreter compare signed.
        if "unsignedCmp" in self.attributes:
            raise VerifyException(_UNSIGNED_FOR)
        _check_steps("scf.for", [self.step])
        super().verify_()


class IfOp(scf.IfOp):
    """`scf.if %c (-> types)? region (else region)? attr-dict`; MLIR writes a single
    result type without parentheses.
    xDSL 0.74 cannot read a single result type without parentheses."""

    @classmethod
    def parse(cls, parser: Parser) -> "IfOp":
        cond = parser.parse_operand(i1)
        result_types = _parse_arrow_types(parser)
        then_region = cls.parse_region_with_yield(parser)
        else_region = (
            cls.parse_region_with_yield(parser)
            if parser.parse_optional_keyword("else")
            else Region()
        )
        attrs = parser.parse_optional_attr_dict()
        return cls(cond, result_types, then_region, else_region, attrs)


class WhileOp(scf.WhileOp):
    """`scf.while ((%a = %v, ...))? : function-type region do region attr-dict-with-keyword`.
    xDSL 0.74 cannot read a loop without arguments."""

    def print(self, printer: Printer) -> None:
        if self.arguments:
            printer.print_string(" (")
            printer.print_list(
                zip(self.before_region.block.args, self.arguments, strict=True),
                lambda pair: self._print_pair(printer, pair),
            )
            printer.print_string(")")
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)
        printer.print_string(" ")
        printer.print_region(self.before_region, print_entry_block_args=False)
        printer.print_string(" do ")
        printer.print_region(self.after_region)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)

    @classmethod
    def parse(cls, parser: Parser) -> "WhileOp":
        pairs: list[tuple[Parser.UnresolvedArgument, UnresolvedOperand]] = (
            parser.parse_optional_comma_separated_list(
                parser.Delimiter.PAREN, lambda: _parse_assignment(parser)
            )
            or []
        )
        parser.parse_punctuation(":")
        pos = parser.pos
        signature = parser.parse_function_type()
        inputs = signature.inputs.data
        if len(pairs) != len(inputs):
            parser.raise_error(
                f"{len(pairs)} arguments but {len(inputs)} operand types", pos, parser.pos
            )
        operands = [parser.resolve_operand(v, t) for (_, v), t in zip(pairs, inputs)]
        before = parser.parse_region([a.resolve(t) for (a, _), t in zip(pairs, inputs)])
        parser.parse_keyword("do")
        after = parser.parse_region()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        return cls.build(
            operands=[operands],
            result_types=[signature.outputs.data],
            regions=[before, after],
            attributes=attrs.data if attrs is not None else {},
        )


# MLIR's marker for a bound given by an operand in the static bound arrays.
_DYNAMIC = -(2**63)
_STATIC_NAMES = ("staticLowerBound", "staticUpperBound", "staticStep")


@irdl_op_definition
class InParallelOp(IRDLOperation):
    """`scf.forall.in_parallel region attr-dict`: ends an `scf.forall` body; its region
    holds the parallel inserts into the shared outputs (empty for memrefs).
    xDSL 0.74 lacks this op."""

    name = "scf.forall.in_parallel"

    body = region_def("single_block")

    traits = lazy_traits_def(lambda: (IsTerminator(), NoTerminator(), HasParent(ForallOp)))

    def __init__(self, body: Region | None = None) -> None:
        super().__init__(regions=[body if body is not None else Region(Block())])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "InParallelOp":
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        op = cls(body)
        op.attributes.update(parser.parse_optional_attr_dict())
        return op


@irdl_op_definition
class ForallOp(IRDLOperation):
    """`scf.forall (%i, ...) in (ubs)` or `scf.forall (%i, ...) = (lbs) to (ubs) step
    (steps)`, then `(shared_outs(%o = %v, ...) -> (types))? region attr-dict`; each
    bound is an integer or an index value. Like MLIR, parsing adds the
    `scf.forall.in_parallel` terminator when it is missing, and printing shows it only
    when the loop has shared outputs. xDSL 0.74 lacks this op."""

    name = "scf.forall"

    dynamicLowerBound = var_operand_def(IndexType)
    dynamicUpperBound = var_operand_def(IndexType)
    dynamicStep = var_operand_def(IndexType)
    outputs = var_operand_def()
    staticLowerBound = prop_def(DenseArrayBase.constr(i64))
    staticUpperBound = prop_def(DenseArrayBase.constr(i64))
    staticStep = prop_def(DenseArrayBase.constr(i64))
    mapping = opt_prop_def(ArrayAttr)
    res = var_result_def()
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def bounds(self) -> tuple[list[int | SSAValue], list[int | SSAValue], list[int | SSAValue]]:
        """Lower bounds, upper bounds and steps, each an integer or an index value."""
        lower, upper, step = (
            _mixed(static, dynamic)
            for static, dynamic in (
                (self.staticLowerBound, self.dynamicLowerBound),
                (self.staticUpperBound, self.dynamicUpperBound),
                (self.staticStep, self.dynamicStep),
            )
        )
        return lower, upper, step

    def rank(self) -> int:
        return len(self.staticUpperBound.get_values())

    def verify_(self) -> None:
        rank = self.rank()
        for name, static, dynamic in (
            ("lower bound", self.staticLowerBound, self.dynamicLowerBound),
            ("upper bound", self.staticUpperBound, self.dynamicUpperBound),
            ("step", self.staticStep, self.dynamicStep),
        ):
            values = static.get_values()
            if len(values) != rank:
                raise VerifyException(f"scf.forall needs {rank} {name}s, got {len(values)}")
            if sum(v == _DYNAMIC for v in values) != len(dynamic):
                raise VerifyException(f"scf.forall has a wrong number of dynamic {name}s")
        if any(0 >= s != _DYNAMIC for s in self.staticStep.get_values()):
            raise VerifyException("scf.forall needs positive constant steps")
        _check_steps("scf.forall", self.dynamicStep)
        if self.mapping is not None and len(self.mapping) != rank:
            raise VerifyException(
                f"scf.forall has {len(self.mapping)} mapping entries for {rank} loops"
            )
        if self.res.types != self.outputs.types:
            raise VerifyException("scf.forall needs a result of each shared output's type")
        args = self.body.block.args
        want = (*[IndexType()] * rank, *self.outputs.types)
        if tuple(a.type for a in args) != want:
            raise VerifyException(
                f"scf.forall needs block arguments of types ({', '.join(map(str, want))})"
            )
        if not isinstance(self.body.block.last_op, InParallelOp):
            raise VerifyException("scf.forall body must end with scf.forall.in_parallel")

    def print(self, printer: Printer) -> None:
        lower, upper, step = self.bounds()
        rank = self.rank()
        ivs = self.body.block.args[:rank]
        printer.print_string(" (")
        printer.print_list(ivs, lambda arg: printer.print_block_argument(arg, print_type=False))
        printer.print_string(")")
        if all(v == 0 for v in lower) and all(v == 1 for v in step):
            _print_mixed(printer, " in ", upper)
        else:
            _print_mixed(printer, " = ", lower)
            _print_mixed(printer, " to ", upper)
            _print_mixed(printer, " step ", step)
        if self.outputs:
            printer.print_string(" shared_outs(")
            printer.print_list(
                zip(self.body.block.args[rank:], self.outputs, strict=True),
                lambda pair: _print_assignment(printer, *pair),
            )
            printer.print_string(") -> (")
            print_type_list(printer, self.res.types)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.body, print_entry_block_args=False, print_block_terminators=bool(self.res)
        )
        extra = {"mapping": self.mapping} if self.mapping is not None else {}
        printer.print_op_attributes(extra | self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "ForallOp":
        ivs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        pos = parser.pos
        if parser.parse_optional_keyword("in"):
            upper = _parse_mixed(parser)
            lower: list[int | SSAValue] = [0] * len(upper)
            step: list[int | SSAValue] = [1] * len(upper)
        else:
            parser.parse_punctuation("=")
            lower = _parse_mixed(parser)
            parser.parse_keyword("to")
            upper = _parse_mixed(parser)
            parser.parse_keyword("step")
            step = _parse_mixed(parser)
        if not len(ivs) == len(lower) == len(upper) == len(step):
            parser.raise_error(f"expected {len(ivs)} bounds of each kind", pos, parser.pos)
        pairs: list[tuple[Parser.UnresolvedArgument, UnresolvedOperand]] = []
        types: list[Attribute] = []
        pos = parser.pos
        if parser.parse_optional_keyword("shared_outs"):
            pairs = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: _parse_assignment(parser)
            )
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
            if len(types) != len(pairs):
                parser.raise_error(
                    f"{len(pairs)} shared_outs but {len(types)} types", pos, parser.pos
                )
        outputs = parser.resolve_operands([v for _, v in pairs], types, pos)
        args = [iv.resolve(IndexType()) for iv in ivs]
        args += [a.resolve(t) for (a, _), t in zip(pairs, types)]
        body = parser.parse_region(args)
        if not body.blocks:
            body.add_block(Block())
        if not has_terminator(body.blocks[-1]):
            body.blocks[-1].add_op(InParallelOp())
        props, attrs = split_properties(cls, parser.parse_optional_attr_dict())
        for name, values in zip(_STATIC_NAMES, (lower, upper, step)):
            props[name] = DenseArrayBase.from_list(
                i64, [v if isinstance(v, int) else _DYNAMIC for v in values]
            )
        dynamic = [[v for v in values if not isinstance(v, int)] for values in (lower, upper, step)]
        return cls.build(
            operands=[*dynamic, outputs],
            result_types=[types],
            regions=[body],
            properties=props,
            attributes=attrs,
        )


def _check_steps(name: str, steps: Sequence[SSAValue]) -> None:
    """Refuse a loop step that is a constant of 0 or less. MLIR 22 leaves such loops
    undefined: native code runs an `scf.for` stepping down from above its upper bound
    zero times, one stepping down from below it until memory faults, one of step 0
    forever, where the interpreter stops at the loop. Steps known only when the loop
    runs are checked by the interpreter alone."""
    for step in steps:
        value = _signed_constant(step)
        if value is not None and value <= 0:
            raise VerifyException(
                f"'{name}' has the constant step {value}; MLIR 22 leaves a loop whose step "
                "is not positive undefined: count up with a positive step (a loop that "
                "counts down can count i up and use last - i as its index)"
            )


def _signed_constant(value: SSAValue) -> int | None:
    """The integer an `arith.constant` holds, read signed as scf loops compare."""
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, IntegerAttr):
        return None
    number = owner.value.value.data
    width = getattr(owner.value.type, "width", None)
    return signed(number, width.data) if isinstance(width, IntAttr) else number


def _mixed(
    static: DenseArrayBase[IntegerType], dynamic: Sequence[SSAValue]
) -> list[int | SSAValue]:
    values = iter(dynamic)
    return [next(values) if v == _DYNAMIC else v for v in static.get_values()]


def _print_mixed(printer: Printer, keyword: str, values: Sequence[int | SSAValue]) -> None:
    printer.print_string(keyword + "(")
    printer.print_list(
        values,
        lambda v: printer.print_string(str(v)) if isinstance(v, int) else printer.print_operand(v),
    )
    printer.print_string(")")


def _parse_mixed(parser: Parser) -> list[int | SSAValue]:
    def entry() -> int | SSAValue:
        value = parser.parse_optional_integer(allow_boolean=False)
        return value if value is not None else parser.parse_operand(IndexType())

    return parser.parse_comma_separated_list(parser.Delimiter.PAREN, entry)


def _print_assignment(printer: Printer, arg: SSAValue, value: SSAValue) -> None:
    printer.print_operand(arg)
    printer.print_string(" = ")
    printer.print_operand(value)


def _parse_assignment(parser: Parser) -> tuple[Parser.UnresolvedArgument, UnresolvedOperand]:
    arg = parser.parse_argument(expect_type=False)
    parser.parse_punctuation("=")
    return arg, parser.parse_unresolved_operand()


def _parse_index_list(parser: Parser) -> list[SSAValue]:
    return parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
    )


def _ensure_reduce(body: Region) -> None:
    if not body.blocks:
        body.add_block(Block())
    block = body.blocks[-1]
    if not has_terminator(block):
        block.add_op(ReduceOp())


def _print_arrow_types(printer: Printer, types: Sequence[Attribute]) -> None:
    """MLIR's optional arrow type list: nothing, `-> t` or `-> (t, u)`."""
    if not types:
        return
    printer.print_string(" -> ")
    # A lone function type needs parentheses to be read back.
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        printer.print_attribute(types[0])
        return
    printer.print_string("(")
    print_type_list(printer, types)
    printer.print_string(")")


def _parse_arrow_types(parser: Parser) -> list[Attribute]:
    if not parser.parse_optional_punctuation("->"):
        return []
    types: list[Attribute] | None = parser.parse_optional_comma_separated_list(
        parser.Delimiter.PAREN, parser.parse_type
    )
    return [parser.parse_type()] if types is None else types


class IndexSwitchOp(scf.IndexSwitchOp):
    """MLIR prints a region that yields nothing without its scf.yield (`default {` then
    `}`); xDSL 0.74 read that as a region of no blocks, which failed to verify."""

    @classmethod
    def parse(cls, parser: Parser) -> "IndexSwitchOp":
        op = super().parse(parser)
        trait = op.get_trait(SingleBlockImplicitTerminator)
        assert trait is not None
        ensure_terminator(op, trait)
        return op


SCF: Dialect = with_replaced_ops(
    scf.Scf,
    IndexSwitchOp,
    ParallelOp,
    ReduceOp,
    ExecuteRegionOp,
    ForOp,
    IfOp,
    WhileOp,
    ForallOp,
    InParallelOp,
)
