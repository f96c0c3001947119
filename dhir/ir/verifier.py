"""Verify a module and report the first failure at its source location.

xDSL's `Operation.verify` reports failures by printing the whole module; dhir
verifies op by op instead, so each error names the op's `file:line:col`, and adds
the SSA dominance check that xDSL lacks.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import cast

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AnyFloat,
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneType,
    Signedness,
    StridedLayoutAttr,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    TupleType,
    UnrankedMemRefType,
    UnrankedTensorType,
    VectorType,
)
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.traits import (
    IsolatedFromAbove,
    NoTerminator,
    SingleBlockImplicitTerminator,
    SymbolTable,
)
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.type import get_element_type_or_self

from dhir.dialects import func, memref, shard, vector
from dhir.dialects.arith import other_kind
from dhir.dialects.dhir import TaskOp, checked_task_bodies
from dhir.dialects.linalg import BroadcastOp, LinalgStructuredOperation
from dhir.dialects.llvm import LLVMArrayType, LLVMPointerType, LLVMStructType
from dhir.dialects.scf import ExecuteRegionOp
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of, refused_type_message
from dhir.ir.dominance import DominanceInfo, has_trait
from dhir.ir.region_cache import ClonedBody
from dhir.ir.symbols import Symbols
from dhir.ir.tasks import functions_reaching, reaching_schedules
from dhir.ir.walk import enclosing, find_ops
from dhir.targets import DeviceKind

# The functions MLIR 22's memref lowering calls, with the type it declares them with
# (`index` is i64 there): memref.alloc calls malloc or aligned_alloc, memref.dealloc free,
# a strided memref.copy memrefCopy (dhir's runtime defines it; MLIR's runner utils too).
LOWERING_FUNCTIONS = {
    "malloc": "(i64) -> !llvm.ptr",
    "aligned_alloc": "(i64, i64) -> !llvm.ptr",
    "free": "(!llvm.ptr) -> ()",
    "memrefCopy": "(i64, !llvm.ptr, !llvm.ptr) -> ()",
}

# C's math functions that MLIR's math lowering (convert-math-to-libm) calls or a program
# commonly declares, by their double-precision name and argument count; the `f` name
# takes and returns float. A declaration of another type passes values in the wrong
# registers: native and interpreted calls alike then read garbage.
_LIBM_ARITY = dict.fromkeys(
    "acos acosh asin asinh atan atanh cbrt ceil cos cosh erf erfc exp exp2 expm1 fabs "
    "floor log log10 log1p log2 nearbyint rint round roundeven sin sinh sqrt tan tanh "
    "trunc".split(),
    1,
) | dict.fromkeys("atan2 copysign fmax fmin fmod hypot pow".split(), 2)


# C library functions that take a variable number of arguments. A func.func declares fixed
# arguments only, and a float passed as a fixed one is not where a variadic callee reads
# it: C promotes float to double there, and on x86-64 the caller says in %al how many
# vector registers it used, which a fixed call leaves unset (printf then read whatever
# %al held). Integers and pointers arrive as C passes them.
VARIADIC_FUNCTIONS = frozenset(
    "printf fprintf dprintf sprintf snprintf asprintf scanf fscanf sscanf syslog open "
    "openat fcntl ioctl execl execle execlp prctl err errx warn warnx error "
    "error_at_line".split()
)


def libm_type(name: str) -> str | None:
    """The type a declaration of C's math function `name` must have, if it is one."""
    for base, arity in _LIBM_ARITY.items():
        for suffix, type_ in (("", "f64"), ("f", "f32")):
            if name == base + suffix:
                return f"({', '.join([type_] * arity)}) -> {type_}"
    return None


def _verify_variadic(op: func.FuncOp) -> None:
    """Refuse a declaration of C's variadic `op` that passes a float: see
    VARIADIC_FUNCTIONS."""
    name = op.sym_name.data
    floats = [t for t in op.function_type.inputs.data if isinstance(t, AnyFloat | VectorType)]
    if not floats or "llvm.emit_c_interface" in op.attributes:  # then it is not C's
        return
    why = (
        f"@{name} is the C library's variadic {name}, declared with an argument of type "
        f"{floats[0]}: a call through a declaration of fixed arguments does not pass a float where "
        f"{name} reads it (C promotes float to double, and on x86-64 tells the callee in "
        "%al how many vector registers it used), so it would read garbage. Call it from a "
        "C function of fixed arguments (`int print_value(const char *format, double x) "
        "{ return printf(format, x); }`), linked with --link, and declare that one"
    )
    raise DhirError([Diagnostic(why, loc_of(op))])


def verify_module(module: Operation, cloned: Mapping[Region, ClonedBody] | None = None) -> None:
    """Raise a DhirError for the first op (in pre-order) that does not verify.

    `cloned`: regions the parser cloned from a body it parsed and this call verifies
    (dhir/ir/region_cache.py): their ops are not verified again (nor, where that
    follows, checked again by their dhir.task, whose generic IRDL checks hold by
    construction), but the values they use from outside must dominate the region's op.
    """
    cloned = cloned or {}
    dominance = DominanceInfo()
    pending = [module]
    bodies = (region for region, body in cloned.items() if body.checked)
    # Verifying changes no symbol: each call and memref.get_global finds what it names
    # in one table of them (xDSL's lookup_symbol reads every name of the module).
    symbols = Symbols()
    with (
        checked_task_bodies(bodies),
        func.callees_found_by(symbols.lookup),
        _isolation_known(cloned),
    ):
        while pending:
            op = pending.pop()
            _verify_op(op, dominance, cloned, symbols)
            for region in reversed(op.regions):
                if region in cloned:
                    _verify_outer_uses(op, cloned[region].free, dominance)
                    continue
                for block in reversed(region.blocks):
                    pending.extend(reversed(list(block.ops)))
    if isinstance(module, ModuleOp):
        _verify_declared_functions(module)
        _verify_task_calls(module)


# The regions the parser cloned, while verify_module runs (see _verify_isolated).
_CLONED: ContextVar[Mapping[Region, ClonedBody] | None] = ContextVar("cloned", default=None)
_verify_isolated_fully = IsolatedFromAbove.verify


@contextmanager
def _isolation_known(cloned: Mapping[Region, ClonedBody]) -> Iterator[None]:
    token = _CLONED.set(cloned)
    try:
        yield
    finally:
        _CLONED.reset(token)


def _verify_isolated(self: IsolatedFromAbove, op: Operation) -> None:
    """xDSL's check that no op inside `op` uses a value defined outside it, which reads
    every operand of the function that holds a schedule: a cloned body (see
    verify_module) uses from outside only its task's operands, which the check reads at
    the task, and the values its ClonedBody lists, so only those are read for it. Where
    one is defined outside `op`, xDSL's own check runs, to report what it reports."""
    cloned = _CLONED.get()
    if not cloned:
        _verify_isolated_fully(self, op)
        return
    regions = list(op.regions)
    while regions:
        region = regions.pop()
        body = cloned.get(region)
        if body is not None:
            if any(not op.is_ancestor(v.owner) or v.owner is op for v in body.free):
                _verify_isolated_fully(self, op)
            continue
        for block in region.blocks:
            for child in block.ops:
                for operand in child.operands:
                    if not op.is_ancestor(operand.owner) or operand.owner is op:
                        _verify_isolated_fully(self, op)
                        return
                if not child.has_trait(IsolatedFromAbove):
                    regions += child.regions


IsolatedFromAbove.verify = _verify_isolated


def _verify_declared_functions(module: ModuleOp) -> None:
    """A declaration of one of C's math functions must have its C type. A function of the
    program named as one MLIR's memref lowering calls must be a
    declaration of the type it declares: mlir-opt-22 leaves a memref.alloc it cannot call
    another `malloc` with unlowered (mlir-translate then fails far from the cause), and
    renames its own function for a definition (the link then fails). The interpreter, which
    would run such a program, refuses it too, so that both backends agree."""
    for op in module.ops:
        if isinstance(op, ModuleOp):
            _verify_declared_functions(op)
            continue
        if not isinstance(op, func.FuncOp):
            continue
        name = op.sym_name.data
        if op.is_declaration and (libm := libm_type(name)) and str(op.function_type) != libm:
            why = (
                f"@{name} is declared as {op.function_type}, but it is the C library's "
                f"{name}, of type {libm} (a double is f64, a float f32); declare it so"
            )
            raise DhirError([Diagnostic(why, loc_of(op))])
        if op.is_declaration and name in VARIADIC_FUNCTIONS:
            _verify_variadic(op)
        if name not in LOWERING_FUNCTIONS:
            continue
        wanted = LOWERING_FUNCTIONS[name]
        if not op.is_declaration:
            why = (
                f"the program defines @{name}, which MLIR's lowering of memref ops calls "
                f"(as {wanted}) and the C library, MLIR's runner utils, dhir's runtime or "
                "MPI define or call; rename yours"
            )
        elif str(op.function_type).replace("index", "i64") != wanted:
            why = (
                f"@{name} is declared as {op.function_type}, but MLIR's lowering of memref "
                f"ops (memref.alloc, dealloc, copy: the program's and those dhir adds) "
                f"calls it as {wanted}; declare it with that type, or call your own "
                "function by another name"
            )
        else:
            continue
        raise DhirError([Diagnostic(why, loc_of(op))])


def _verify_task_calls(module: ModuleOp) -> None:
    """A task may not call a function that holds a schedule (it would run inside one task,
    on one rank, while the others waited for it: a hang), nor, from a CPU task, one that
    uses GPU ops; directly or through other calls."""
    calls = [(c, t) for c in find_ops(module, func.CallOp) if (t := enclosing(c, TaskOp))]
    if not calls:
        return
    schedules = reaching_schedules(module)
    gpu = functions_reaching(module, lambda f: any(o.dialect_name() == "gpu" for o in f.walk()))
    for call, task in calls:
        name = call.callee.string_value()
        if name in schedules:
            why = (
                f"this task calls @{name}, which holds a dhir.schedule (or calls a function "
                "that does); a schedule cannot run inside a task: call it outside the "
                "schedule, or make its tasks tasks of this schedule"
            )
        elif name in gpu and task.target_info().kind == DeviceKind.CPU:
            why = (
                f"this task runs on a CPU but calls @{name}, which uses GPU ops (or calls a "
                "function that does); bind the task to a GPU target"
            )
        else:
            continue
        raise DhirError([Diagnostic(why, loc_of(call))])


def _verify_outer_uses(
    op: Operation, values: tuple[SSAValue, ...], dominance: DominanceInfo
) -> None:
    for value in values:
        if dominance.value_dominates(value, op):
            continue
        for user in op.walk():
            if value in user.operands:
                raise DhirError([_dominance_error(user, list(user.operands).index(value))])


def _verify_op(
    op: Operation,
    dominance: DominanceInfo,
    cloned: Mapping[Region, ClonedBody],
    symbols: Symbols,
) -> None:
    if has_trait(op, SymbolTable):
        _verify_unique_symbols(op)
    try:
        if isinstance(op, BroadcastOp):
            _verify_broadcast_dimensions(op)  # before xDSL's check, which fails on them
        if isinstance(op, TaskOp) and op.regions and op.body in cloned:
            op.verify_task()  # IRDL's checks hold by construction: see verify_task
        else:
            op.verify(verify_nested_ops=False)
        _verify_blocks_not_empty(op)
        _verify_index_attributes(op)
        if op.name.startswith("arith."):
            _verify_signless(op)
        if isinstance(op, vector.ExtractOp | vector.InsertOp):
            _verify_static_position(op)
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            _verify_layout_symbols(op)
        _verify_memref_types(op)
        if isinstance(op, memref.GetGlobalOp):
            _verify_global_reference(op, symbols)
        if shard.is_shard_op(op):
            _verify_grid_axes(op, symbols)
        if isinstance(op, LinalgStructuredOperation):
            _verify_linalg_shapes(op)
        if isinstance(op, memref.DimOp) and _rank(op.source.type) == 0:
            raise DiagnosticException(f"'{op.name}' of a rank-0 memref: it has no dimension")
        if isinstance(op, memref.AssumeAlignmentOp):
            alignment = op.alignment.value.data
            if alignment <= 0 or alignment & (alignment - 1):
                raise DiagnosticException(
                    f"'{op.name}' alignment must be a power of 2, not {alignment}"
                )
    except (DiagnosticException, ValueError) as error:
        # Ops may blame a nested op (e.g. a task, the load that uses an unlisted memref).
        culprit = getattr(error, "op", op)
        name = culprit.name if isinstance(culprit, Operation) else op.name
        message = refused_type_message(name, _first_line(error), other_kind(name))
        if message.endswith(_NOT_A_TERMINATOR):
            message = _missing_terminator(culprit if isinstance(culprit, Operation) else op)
        raise DhirError([Diagnostic(message, loc_of(culprit))]) from None
    for index, operand in enumerate(op.operands):
        if not dominance.value_dominates(operand, op):
            raise DhirError([_dominance_error(op, index)])


def _verify_unique_symbols(table: Operation) -> None:
    """A symbol defined twice in one table, at its second definition with a note at the
    first, as MLIR 22 reports it. xDSL's check blames the table: for the implicit module
    of a file, which has no location, the error named no line."""
    first: dict[str, Operation] = {}
    for op in table.regions[0].ops if len(table.regions) == 1 else ():
        name = op.properties.get("sym_name", op.attributes.get("sym_name"))
        if not isinstance(name, StringAttr):
            continue
        if name.data not in first:
            first[name.data] = op
            continue
        note = Diagnostic("the first definition of it is here", loc_of(first[name.data]), "note")
        why = f"@{name.data} is defined twice in one module; rename or remove one of them"
        raise DhirError([Diagnostic(why, loc_of(op), notes=[note])])


# MLIR 22 parses an `index` constant as a signed 64-bit integer; xDSL takes any size.
_INDEX_RANGE = range(-(2**63), 2**63)


def _verify_index_attributes(op: Operation) -> None:
    """An `index` attribute (`arith.constant 99999999999999999999 : index`) outside the
    range MLIR 22's parser takes: the interpreter computed with it, and the native build
    then failed in mlir-opt-22, at a line of the build file rather than the program's."""
    for attr in (*op.properties.values(), *op.attributes.values()):
        if not isinstance(attr, IntegerAttr) or not isinstance(attr.type, IndexType):
            continue
        value = attr.value.data
        if value not in _INDEX_RANGE:
            raise DiagnosticException(
                f"'{op.name}': the index constant {value} is out of range: MLIR reads an "
                f"index constant as a signed 64-bit integer, from {_INDEX_RANGE.start} to "
                f"{_INDEX_RANGE.stop - 1}"
            )


def _verify_signless(op: Operation) -> None:
    """MLIR's arith ops take signless integers (`i8`; the op says how to read the sign),
    xDSL's take `ui8` and `si8` too; the interpreter then fails at run time and
    mlir-opt-22 at the build file. `arith.select` chooses between values of any type."""
    values = op.operands[:1] if op.name == "arith.select" else [*op.results, *op.operands]
    for value in values:
        element = get_element_type_or_self(value.type)
        if isinstance(element, IntegerType) and element.signedness.data != Signedness.SIGNLESS:
            signless = IntegerType(element.width.data)
            raise DiagnosticException(
                f"'{op.name}' takes signless integers, not {element}: write {signless} (the "
                "op, such as divsi or divui, extsi or extui, says how to read the sign)"
            )


def _verify_static_position(op: vector.ExtractOp | vector.InsertOp) -> None:
    """MLIR's verifier refuses a constant position outside its dimension (xDSL's does
    not): the interpreter then failed at run time, and the native build in mlir-opt-22."""
    kind = op.vector.type if isinstance(op, vector.ExtractOp) else op.dest.type
    assert isinstance(kind, VectorType)
    for dimension, (at, size) in enumerate(zip(op.static_position.get_values(), kind.get_shape())):
        if at != DYNAMIC_INDEX and at != -1 and not 0 <= at < size:
            raise DiagnosticException(
                f"'{op.name}' position {at} is outside dimension {dimension} of {kind}, "
                f"whose size is {size}: use 0 to {size - 1} (or -1, poison)"
            )


def _verify_memref_types(op: Operation) -> None:
    """The memref types MLIR 22's parser refuses and xDSL's takes, in what `op` makes or
    declares (its results, its blocks' arguments, a function's signature)."""
    kinds: list[Attribute] = [*op.result_types]
    kinds += [arg.type for region in op.regions for block in region.blocks for arg in block.args]
    for prop in op.properties.values():
        if isinstance(prop, FunctionType):
            kinds += [*prop.inputs, *prop.outputs]
    for kind in kinds:
        problem = _memref_type_problem(kind)
        if problem is not None:
            raise DiagnosticException(f"'{op.name}': {problem}")


# Element types MLIR refuses in a memref (xDSL takes any type).
_NOT_ELEMENTS = (
    TensorType,
    UnrankedTensorType,
    NoneType,
    FunctionType,
    TupleType,
    LLVMPointerType,
    LLVMStructType,
    LLVMArrayType,
)


def _memref_type_problem(kind: Attribute) -> str | None:
    if not isinstance(kind, MemRefType | UnrankedMemRefType):
        return None
    if isinstance(kind.element_type, _NOT_ELEMENTS):
        return (
            f"{kind} is not a memref type MLIR takes: its elements may be integers, index, "
            "floats, complex numbers, vectors or memrefs"
        )
    if isinstance(kind, UnrankedMemRefType):
        return None
    rank, layout = len(kind.get_shape()), kind.layout
    if isinstance(layout, StridedLayoutAttr) and len(layout.strides) != rank:
        return f"{kind} has {len(layout.strides)} strides for its {rank} dimensions"
    if isinstance(layout, AffineMapAttr) and layout.data.num_dims != rank:
        return f"{kind} has a layout map of {layout.data.num_dims} dimensions for its {rank}"
    return None


def _verify_global_reference(op: memref.GetGlobalOp, symbols: Symbols) -> None:
    """As MLIR 22 checks it (xDSL does not): the name is a memref.global of the type."""
    name = op.name_.string_value()
    found = symbols.lookup(op, op.name_)
    if not isinstance(found, memref.GlobalOp):
        raise DiagnosticException(f"'{op.name}': @{name} is no memref.global")
    if found.type != op.memref.type:
        raise DiagnosticException(f"'{op.name}': @{name} is a {found.type}, not a {op.memref.type}")


def _verify_grid_axes(op: Operation, symbols: Symbols) -> None:
    """As MLIR 22 checks it (xDSL does not): a shard op's grid is a shard.grid, and the
    axes it names (`grid_axes`, `axes`) are that grid's, each once. dhir's partitioning
    indexes the grid's shape with them: an axis past its rank was an internal error."""
    grid = op.properties.get("grid")
    if not isinstance(grid, SymbolRefAttr):
        return
    name = grid.root_reference.data
    found = symbols.lookup(op, grid)
    if not isinstance(found, shard.GridOp):
        raise DiagnosticException(f"'{op.name}' names the grid @{name}, which is no shard.grid")
    axes = op.properties.get("grid_axes", op.properties.get("axes"))
    if not isinstance(axes, DenseArrayBase):
        return
    rank, values = len(found.shape.get_values()), axes.get_values()
    for axis in values:
        if not 0 <= axis < rank:
            raise DiagnosticException(
                f"'{op.name}' names grid axis {axis}, but the grid @{name} has {rank} "
                f"axes: name axes 0 to {rank - 1}"
            )
    if len(set(values)) != len(values):
        raise DiagnosticException(f"'{op.name}' names a grid axis twice: name each once")


def _verify_linalg_shapes(op: LinalgStructuredOperation) -> None:
    """As MLIR 22 checks a structured op with static shapes (xDSL does not): the loop
    ranges, read from the operands' shapes through the indexing maps, reach each
    dimension of each operand exactly (or, through a sum such as a convolution's, within
    it). A matmul of 4x3 by 4x3 ran in the interpreter, reading past a row, and the
    native build failed in mlir-opt-22, at a line of the build file."""
    maps = [attr.data for attr in op.get_indexing_maps()]
    ranges = _loop_ranges(op, maps)
    if ranges is None:
        return
    ends = [size - 1 for size in ranges]
    for number, (operand, indexing) in enumerate(zip(op.operands, maps)):
        if not isinstance(operand.type, MemRefType | TensorType) or indexing.num_symbols:
            continue
        firsts, lasts = indexing.eval([0] * len(ends), []), indexing.eval(ends, [])
        for dim, size in enumerate(operand.type.get_shape()):
            if size in (DYNAMIC_INDEX, 0):
                continue
            low, high = sorted((firsts[dim], lasts[dim]))
            reached = 0 if low < 0 else high + 1  # below 0: a loop of no iterations
            exact = isinstance(indexing.results[dim], AffineDimExpr)
            if reached != size if exact else not 0 < reached <= size:
                wanted = reached if exact else f"at least {reached}"
                raise DiagnosticException(
                    f"'{op.name}': operand #{number} has {size} elements in its dimension "
                    f"#{dim}, where the other operands' shapes make the loops reach "
                    f"{wanted}; give the operands shapes that agree"
                )


def _verify_broadcast_dimensions(op: BroadcastOp) -> None:
    """Each dimension linalg.broadcast adds is named once. xDSL's verifier indexed past
    the input's shape on `dimensions = [0, 0]` (an internal error); MLIR 22's reads
    past it (its message shows garbage)."""
    added = op.dimensions.get_values()
    if len(set(added)) != len(added):
        raise DiagnosticException(
            f"'{op.name}' names an added dimension twice (dimensions = {list(added)}): "
            "name each dimension of the init that the input lacks once"
        )


def _loop_ranges(op: Operation, maps: list[AffineMap]) -> list[int] | None:
    """Each loop's range, as MLIR reads it: the size of the first operand dimension its
    maps give as the loop itself (a convolution's input, indexed by sums, gives none);
    None where a range is not static or not given."""
    if not maps or len(maps) != len(op.operands):
        return None
    ranges: list[int | None] = [None] * maps[0].num_dims
    for operand, indexing in zip(op.operands, maps):
        kind = operand.type
        shape = kind.get_shape() if isinstance(kind, MemRefType | TensorType) else ()
        for expr, size in zip(indexing.results, shape):
            if isinstance(expr, AffineDimExpr) and ranges[expr.position] is None:
                ranges[expr.position] = size
    if any(size is None or size == DYNAMIC_INDEX for size in ranges):
        return None
    return cast(list[int], ranges)


def _rank(kind: Attribute) -> int | None:
    return len(kind.get_shape()) if isinstance(kind, MemRefType) else None


def _verify_layout_symbols(op: memref.AllocOp | memref.AllocaOp) -> None:
    """MLIR gives an allocation one symbol operand (`[%s]`) per run-time value of its
    type's layout (a `?` stride or offset, a symbol of a layout map); xDSL checks none,
    and mlir-opt-22 then refused the build file."""
    kind = op.memref.type
    assert isinstance(kind, MemRefType)
    layout = kind.layout
    if isinstance(layout, StridedLayoutAttr):
        strides, offset = layout.get_strides(), layout.get_offset()
        wanted = sum(s is None for s in strides) + (offset is None)
    elif isinstance(layout, AffineMapAttr):
        wanted = layout.data.num_symbols
    else:
        wanted = 0
    given = len(op.symbol_operands)
    if given != wanted:
        raise DiagnosticException(
            f"'{op.name}' of {kind} takes {wanted} symbol operand(s) in `[...]` after its "
            f"sizes, one per run-time stride or offset of the layout, not {given}"
        )


def _verify_blocks_not_empty(op: Operation) -> None:
    if has_trait(op, NoTerminator):
        return
    for region in op.regions:
        if any(block.first_op is None for block in region.blocks):
            if isinstance(op, ExecuteRegionOp) and isinstance(op.parent_op(), TaskOp):
                # The task's blocks, as dhir holds a body of several (dhir.dialects.dhir).
                raise DiagnosticException(
                    "'dhir.task' has an empty block: in a task body of several blocks, "
                    "end each with a terminator (`dhir.yield` to leave the task, or a "
                    "`cf.br`/`cf.cond_br`)"
                )
            raise DiagnosticException(
                f"'{op.name}' has an empty block in a region that needs a terminator"
            )


def _dominance_error(op: Operation, index: int) -> Diagnostic:
    operand = op.operands[index]
    diagnostic = Diagnostic(
        f"operand #{index} of '{op.name}' does not dominate this use "
        "(it is defined later, or in a region that does not enclose this op)",
        loc_of(op),
    )
    owner = operand.owner
    if isinstance(owner, Operation):
        diagnostic.notes.append(Diagnostic("operand defined here", loc_of(owner), "note"))
    return diagnostic


# How xDSL ends its message for the last op of a block that needs a terminator.
_NOT_A_TERMINATOR = "region but is not a terminator"


def _missing_terminator(last: Operation) -> str:
    """What to tell a user whose block ends with `last`, which is no terminator: the op
    whose body it is, and the terminator to add where that op names one."""
    parent = last.parent_op()
    if parent is None:
        return f"'{last.name}' ends a block that must end with its terminator; add one after it"
    symbol = parent.attributes.get("sym_name") or parent.properties.get("sym_name")
    named = f" @{symbol.data}" if isinstance(symbol, StringAttr) else ""
    where = (
        f"'{last.name}' ends the body of '{parent.name}'{named}, which must end with its terminator"
    )
    if isinstance(parent, func.FuncOp):
        return f"{where}: add {func.ReturnOp.name} (`return`) after it"
    implicit = parent.get_trait(SingleBlockImplicitTerminator)
    if implicit is not None:
        return f"{where}: add {implicit.op_type.name} after it"
    return f"{where}: add it after this op"


def _first_line(error: Exception) -> str:
    # xDSL appends the whole printed module as a note; the message is what matters.
    text = str(error.args[0]) if error.args else str(error)
    return text.removeprefix("Operation does not verify: ")
