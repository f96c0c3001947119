"""An entry function on tensors, bufferized by mlir-opt-22 so that dhir runs it on memrefs.

`dhir run` and `dhir compile` take an entry whose arguments and results are ranked tensors
(linalg, tensor and arith on tensors, as MLIR writes them before bufferization). Elementwise
arith and math ops on tensors become linalg.generic ops first (one-shot bufferization has no
rule for them); then MLIR's one-shot bufferization turns every tensor into a buffer, the
function boundaries included (identity layouts), and `buffer-results-to-out-params` turns
each result into a memref argument after the others, where the result is written (a
result's buffer allocated in the function becomes that argument). The memref program then
goes through CodeDrop, placement and the rest like any plain entry. The entry's signature
as the user sees it (tensor arguments given, results written to `resK.npy`) is
dhir.toolchain.entry's.

An argument of dynamic shape (`tensor<?x14xf32>`) takes the shape of the input it is given
(`specialise`): results are allocated before the run, so their shapes must follow from the
inputs'. mlir-opt-22's canonicalization carries the static shapes through the ops (it folds
`tensor.cast`s into them); through `shard.shard`, which it does not, dhir carries them.

A program with shard annotations is partitioned first (dhir.toolchain.shards), and its
collectives become calls of dhir's runtime once bufferized. dhir's own ops (`dhir.schedule`,
tasks) are written on memrefs already, and mlir-opt-22 does not know them.
"""

import math
import operator
from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    ShapedType,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.traits import SymbolTable

from dhir.dialects import arith, func, shard
from dhir.dialects import math as math_dialect
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.dialects.linalg import BroadcastOp, FillOp, LinalgStructuredOperation
from dhir.dialects.memref import TENSOR_DIMS_ATTR, dim_location
from dhir.dialects.tensor import (
    CastOp,
    CollapseShapeOp,
    ConcatOp,
    DimOp,
    EmptyOp,
    ExpandShapeOp,
    ExtractSliceOp,
    FromElementsOp,
    GenerateOp,
    InsertSliceOp,
    PadOp,
    ReshapeOp,
    SplatOp,
)
from dhir.ir.diagnostics import error_at
from dhir.ir.text import keep_argument_names, through_mlir_opt
from dhir.ir.walk import find_ops
from dhir.toolchain.shards import is_shard_program, partition
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.shard_collectives import lower_collectives

PIPELINE = (
    "builtin.module("
    "func.func(convert-elementwise-to-linalg),"
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{modify-public-functions hoist-static-allocs},"
    "canonicalize,"
    "ownership-based-buffer-deallocation,canonicalize,buffer-deallocation-simplification,"
    "bufferization-lower-deallocations,cse,canonicalize)"
)


def bufferize(module: ModuleOp, entry: str, ranks: int | None = None) -> ModuleOp:
    """`module` with its tensors turned into memrefs (see the module docstring); a shard
    program partitioned for its grid, whose device count must be `ranks` (None: any)."""
    for op in module.walk():
        if isinstance(op, (ScheduleOp, TaskOp)):
            raise error_at(
                op,
                f"@{entry} takes or returns tensors, so dhir bufferizes the program with "
                "mlir-opt-22, which does not know dhir's ops: write schedules on memrefs, "
                "or leave the tensor program without them (CodeDrop makes the tasks)",
            )
    for function in find_ops(module, func.FuncOp):  # else mlir-opt-22's error, or none
        check_agreeing_shapes(function, {})
    if is_shard_program(module):
        module = partition(module, entry, ranks)
    pipeline = PIPELINE
    if _returns_a_value_twice(module, entry):
        # mlir-opt-22's hoisting crashes on a function returning one buffer twice.
        pipeline = PIPELINE.replace(" hoist-static-allocs", "")
    if find_ops(module, (PadOp, SplatOp)):
        # They bufferize to linalg.map, made linalg.generic: the form dhir's analyses and
        # the body optimizer were first written for.
        pipeline = pipeline.removesuffix(")") + ",func.func(linalg-generalize-named-ops))"
    bufferized = through_mlir_opt(
        module,
        str(find_llvm_tools().mlir_opt),
        pipeline,
        what=f"bufferize @{entry}",
        failed=f"bufferizing @{entry} (an entry on tensors) with mlir-opt-22 failed",
        locations=True,
    )
    keep_argument_names(module, bufferized, entry)
    _mark_written_dims(module, bufferized)
    _name_results(module, bufferized, entry)
    lower_collectives(bufferized)
    return bufferized


def _mark_written_dims(source: ModuleOp, made: ModuleOp) -> None:
    """Note on `made` where `source` had tensor.dims, which the checks of the memref.dims
    made of them then name (a dimension past the rank was "'memref.dim' asks for ...
    memref" in both backends, an op the user never wrote)."""
    written = {where for op in find_ops(source, DimOp) if (where := dim_location(op))}
    if written:
        made.attributes[TENSOR_DIMS_ATTR] = ArrayAttr([StringAttr(w) for w in sorted(written)])


def _name_results(source: ModuleOp, made: ModuleOp, entry: str) -> None:
    """Name the memref arguments that bufferizing gave `entry` for its results `res0`,
    ..., as the run prints and saves them: mlir-opt numbers them (`%arg2`), a name the
    user never wrote that messages and --timing then used."""
    before, after = SymbolTable.lookup_symbol(source, entry), SymbolTable.lookup_symbol(made, entry)
    if not isinstance(before, func.FuncOp) or not isinstance(after, func.FuncOp):
        return
    count = len(before.function_type.inputs.data)
    for j, arg in enumerate(after.body.blocks[0].args[count:] if after.body.blocks else ()):
        arg.name_hint = f"res{j}"


def _returns_a_value_twice(module: ModuleOp, entry: str) -> bool:
    function = SymbolTable.lookup_symbol(module, entry)
    if not isinstance(function, func.FuncOp):
        return False
    returns = find_ops(function, func.ReturnOp)
    return any(len(set(r.operands)) < len(r.operands) for r in returns)


# Elementwise arith on tensors made linalg first: canonicalize carries static shapes through
# linalg ops, not through arith's.
REFINE = "builtin.module(func.func(convert-elementwise-to-linalg),canonicalize)"


def specialise(module: ModuleOp, entry: str, inputs: Sequence[object]) -> ModuleOp:
    """`module` with the tensor arguments of `entry` that have dynamic shapes given the
    shapes of their `inputs`, and the types that follow refined (see the module
    docstring); `module` itself where no argument or result has a dynamic shape (a
    result's may follow from static arguments through casts), an input does not
    fit its type, or the results' shapes do not all follow (the signature check says
    so), and for a shard program, where a cast would be left between its ops."""
    function = _function(module, entry)
    types = function.function_type.inputs.data
    shapes = {
        k: tuple(getattr(inputs[k], "shape", ()))
        for k, t in enumerate(types)
        if _dynamic(t) and k < len(inputs) and _fits(t, getattr(inputs[k], "shape", None))
    }
    outputs = function.function_type.outputs.data
    # Else mlir-opt names no argument, and sizes that scalar arguments give go unchecked
    # (native code reshapes or casts by the types alone).
    check_agreeing_shapes(function, shapes, _scalars(types, inputs))
    if not shapes and not any(_dynamic(t) for t in outputs):
        return module
    refined = module.clone()
    function = _function(refined, entry)
    for k, shape in shapes.items():
        _give_shape(function, k, shape)
    _fill_dynamic_splats(refined)
    # Each round moves the casts past every shard op they reach: one round per shard op
    # at most.
    for _ in range(1 + len(find_ops(refined, shard.ShardOp))):
        refined = through_mlir_opt(
            refined,
            str(find_llvm_tools().mlir_opt),
            REFINE,
            what=f"give @{entry}'s arguments their inputs' shapes",
            failed=f"refining @{entry}'s types to its inputs' shapes with mlir-opt-22 failed",
            locations=True,
        )
        if not _through_shards(refined):
            break
    function = _function(refined, entry)
    _return_static(function)
    if any(_dynamic(t) for t in function.function_type.outputs.data) or (
        is_shard_program(refined) and _casts(refined) > _casts(module)
    ):
        return module  # not every shape follows (the signature check says which result)
    keep_argument_names(module, refined, entry)
    return refined


# A tensor's dimension, or a linalg op's loop; an extent and where it was found: an
# argument's index and dimension (its input's shape), or None (a type).
_Node = tuple[SSAValue | Operation, int]
_Extent = tuple[int, tuple[int, int] | None]


def _scalars(types: Sequence[Attribute], inputs: Sequence[object]) -> dict[int, int]:
    """The values of the integer and index arguments among `inputs`, by argument."""
    scalars: dict[int, int] = {}
    for k, (type_, value) in enumerate(zip(types, inputs)):
        if isinstance(type_, (IndexType, IntegerType)) and getattr(value, "shape", ()) == ():
            try:
                scalars[k] = operator.index(value)  # pyright: ignore[reportArgumentType]
            except TypeError:
                continue  # the signature check says what is wrong with it
    return scalars


def check_agreeing_shapes(
    function: func.FuncOp,
    shapes: dict[int, tuple[int, ...]],
    scalars: dict[int, int] | None = None,
) -> None:
    """Refuse inputs `shapes` (by argument) of the entry `function` whose extents its
    ops need otherwise (`tensor<?x4xf64>` arrays of 3 and 5 rows added), naming the
    argument, its shape and what the op needs, as a DhirError at the op: a dimension that
    a linalg op's map gives as a loop's takes that loop's extent, as MLIR's verifier holds
    (a broadcast's input dimension its init's), and an elementwise arith or math op's
    operands and results have the same extents; a
    `tensor.cast`'s result has its source's extents, so a static one that an input does
    not have is refused at the cast (mlir-opt folds the cast away and fails at a later op,
    or at the `return`); a `tensor.concat`'s result has its operands' extents but along
    its dimension, where it has their sum; a reshape keeps the count of elements
    (expand_shape's and collapse_shape's in each group of dimensions); a slice with
    offsets, sizes and strides known before the run stays inside its tensor. Extents that
    only static types give and disagree (through casts) are refused at the op too, naming
    no argument: with no `shapes`, this checks a program's static shapes. The values of
    integer arguments, `scalars`, give the sizes they are (an expand_shape's output_shape,
    a tensor.empty's, splat's or generate's sizes, a slice's, a pad's amounts, a reshape's
    shape), which must agree as the extents do. Other ops' needs are left to mlir-opt's
    refinement."""
    found = _Extents(function, shapes, scalars or {})
    later: list[Operation] = []  # checked once every extent the ops join is known
    for op in function.walk():
        if isinstance(op, CastOp):
            _join_cast(found, op)
        elif isinstance(op, ConcatOp):
            _join_concat(found, op)
        elif isinstance(op, (ExpandShapeOp, CollapseShapeOp)):
            _join_reshape(found, op)
        elif type(op) in _ELEMENTWISE:
            _join_elementwise(found, op)
        elif isinstance(op, LinalgStructuredOperation):
            _join_linalg(found, op)
        elif isinstance(op, BroadcastOp):
            _join_broadcast(found, op)
        _give_sizes(found, op)
        if isinstance(op, _CHECKED_LATER):
            later.append(op)
    for op in later:
        _CHECKS[type(op)](found, op)


def _give_sizes(found: "_Extents", op: Operation) -> None:
    """Give each dimension of `op`'s result the size its operands say, where they do."""
    for dim, size in enumerate(_sizes(found, op)):
        if size is not None:
            found.give((op.results[0], dim), size, op)


def _sizes(found: "_Extents", op: Operation) -> list["_Extent | None"]:
    """The extents of `op`'s result that its size operands give, where they do (and
    constants and inputs give them); none for an op of other kinds."""
    if isinstance(op, ExpandShapeOp):
        return _mixed(found, op.static_output_shape, op.dynamic_output_shape)
    if isinstance(op, ReshapeOp):
        return _shape_operand(found, op.shape, _rank(op.result))
    if isinstance(op, EmptyOp):
        return _dynamic_sizes(found, op.tensor, op.dynamic_sizes)
    if isinstance(op, SplatOp):
        return _dynamic_sizes(found, op.result, op.dynamicSizes)
    if isinstance(op, GenerateOp):
        return _dynamic_sizes(found, op.result, op.dynamic_extents)
    if isinstance(op, ExtractSliceOp) and _rank(op.result) == len(op.static_sizes):
        return _mixed(found, op.static_sizes, op.sizes)
    if isinstance(op, PadOp):
        return _padded(found, op)
    return []


def _dynamic_sizes(
    found: "_Extents", result: SSAValue, sizes: Sequence[SSAValue]
) -> list["_Extent | None"]:
    """The extents `sizes` give the dynamic dimensions of `result`, in turn."""
    assert isinstance(result.type, ShapedType)
    values = iter(sizes)
    return [
        _index(found, next(values)) if n == DYNAMIC_INDEX else None for n in result.type.get_shape()
    ]


def _padded(found: "_Extents", op: PadOp) -> list["_Extent | None"]:
    """Each extent of a pad's result: its source's and the amounts before and after."""
    low = _mixed(found, op.static_low, op.low)
    high = _mixed(found, op.static_high, op.high)
    extents: list[_Extent | None] = []
    for dim, (before, after) in enumerate(zip(low, high)):
        source = found.known((op.source, dim))
        if source is None or before is None or after is None:
            extents.append(None)
            continue
        given = [e[1] for e in (after, before, source) if e[1] is not None]
        extents.append((source[0] + before[0] + after[0], given[0] if given else None))
    return extents


def _join_linalg(found: "_Extents", op: LinalgStructuredOperation) -> None:
    maps = [m.data for m in op.get_indexing_maps()]
    for value, map_ in zip(op.operands, maps):
        for dim, expr in enumerate(map_.results):
            if isinstance(expr, AffineDimExpr):
                found.join((value, dim), (op, expr.position), op)
    for result, init in zip(op.results, op.outputs):
        for dim in range(_rank(result)):
            found.join((result, dim), (init, dim), op)


def _join_broadcast(found: "_Extents", op: BroadcastOp) -> None:
    """Join each dimension of `op`'s input to the init's it is not added beside, and the
    result's to the init's (xDSL's broadcast gives no indexing maps)."""
    added = set(op.dimensions.get_values())
    kept = [d for d in range(_rank(op.init)) if d not in added]
    for dim, to in zip(range(_rank(op.input)), kept):
        found.join((op.input, dim), (op.init, to), op)
    for result in op.result:
        for dim in range(_rank(result)):
            found.join((result, dim), (op.init, dim), op)


# Ops mlir-opt-22's convert-elementwise-to-linalg makes linalg.generic: every arith and
# math op but a constant.
_ELEMENTWISE = frozenset(
    {*arith.Arith.operations, *math_dialect.Math.operations} - {arith.ConstantOp}
)


def _join_elementwise(found: "_Extents", op: Operation) -> None:
    """Join each dimension of `op`'s tensor operands and results (of one shape, as MLIR's
    verifier holds, their condition too for a select)."""
    tensors = [v for v in (*op.operands, *op.results) if isinstance(v.type, TensorType)]
    for value in tensors[1:]:
        if _rank(value) == _rank(tensors[0]):
            for dim in range(_rank(value)):
                found.join((tensors[0], dim), (value, dim), op)


def _join_cast(found: "_Extents", op: CastOp) -> None:
    """Join each dimension of `op`'s result to its source's (an unranked side has none)."""
    rank = _rank(op.source)
    if isinstance(op.source.type, TensorType) and rank == _rank(op.dest):
        for dim in range(rank):
            found.join((op.source, dim), (op.dest, dim), op)


def _join_concat(found: "_Extents", op: ConcatOp) -> None:
    """Join the dimensions of `op`'s operands and result that are not concatenated."""
    along = op.dim.value.data
    for value in op.inputs:
        for dim in range(_rank(value)):
            if dim != along:
                found.join((value, dim), (op.result, dim), op)


def _check_concat(found: "_Extents", op: Operation) -> None:
    """Refuse a concat whose result's extent along its dimension is not its operands'
    sum, where all are known and one comes from an input (static ones alone are the
    verifier's)."""
    assert isinstance(op, ConcatOp)
    along = op.dim.value.data
    sizes = [found.known((value, along)) for value in op.inputs]
    total = found.known((op.result, along))
    if total is None or any(size is None for size in sizes):
        return
    known = [size for size in sizes if size is not None]
    if sum(size[0] for size in known) == total[0]:
        return
    given = [size[1] for size in (*known, total) if size[1] is not None]
    parts = [size[0] for size in known]
    raise found.refuse(
        given[-1] if given else None,
        op,
        f"joins operands of {' + '.join(map(str, parts))} = {sum(parts)} along "
        f"dimension {along} into a result of {total[0]} there",
    )


def _groups(op: ExpandShapeOp | CollapseShapeOp) -> list[list[int]]:
    """The expanded dimensions of each collapsed one."""
    return [[d.value.data for d in group] for group in op.reassociation]


def _collapsed_expanded(op: ExpandShapeOp | CollapseShapeOp) -> tuple[SSAValue, SSAValue]:
    if isinstance(op, ExpandShapeOp):
        return op.src, op.result
    return op.result, op.src


def _join_reshape(found: "_Extents", op: ExpandShapeOp | CollapseShapeOp) -> None:
    """Join each collapsed dimension that is one expanded dimension to it."""
    collapsed, expanded = _collapsed_expanded(op)
    for dim, group in enumerate(_groups(op)):
        if len(group) == 1:
            found.join((collapsed, dim), (expanded, group[0]), op)


def _check_reshape_groups(found: "_Extents", op: Operation) -> None:
    """Refuse an expand_shape or collapse_shape whose collapsed dimension's extent is not
    the product of its expanded dimensions', where all are known and one comes from an
    input."""
    assert isinstance(op, (ExpandShapeOp, CollapseShapeOp))
    collapsed, expanded = _collapsed_expanded(op)
    sizes: list[_Extent | None] = [found.known((expanded, d)) for d in range(_rank(expanded))]
    if isinstance(op, ExpandShapeOp):  # its output_shape gives what the type leaves dynamic
        given = _mixed(found, op.static_output_shape, op.dynamic_output_shape)
        sizes = [size if size is not None else g for size, g in zip(sizes, given)]
        _check_not_negative(found, op, sizes)
    for dim, group in enumerate(_groups(op)):
        whole = found.known((collapsed, dim))
        parts = [sizes[d] for d in group]
        given = _mismatch([p for p in parts if p is not None], whole, len(parts))
        if given is None:
            continue
        assert whole is not None
        numbers = [p[0] for p in parts if p is not None]
        product = _product(numbers)
        dims = ", ".join(map(str, group))
        if isinstance(op, ExpandShapeOp):
            what = f"splits dimension {dim} of its operand, of {whole[0]}, into dimensions {dims}"
            what += f" of {product}"
        else:
            what = f"joins dimensions {dims} of its operand, of {product}, into dimension {dim}"
            what += f" of its result, of {whole[0]}"
        raise found.refuse(given[-1] if given else None, op, what)


def _check_not_negative(found: "_Extents", op: Operation, sizes: list["_Extent | None"]) -> None:
    """Refuse a negative size of `op`'s result that an integer argument gives: the arrays'
    shapes cannot be what is wrong (a mismatch named the array instead)."""
    for dim, size in enumerate(sizes):
        if size is not None and size[0] < 0 and size[1] is not None:
            what = f"the size of dimension {dim} of its result, which must be >= 0"
            raise found.refuse_size(size[1][0], size[0], op, what)


def _product(numbers: list[int]) -> str:
    """`2 x 3 = 6`, or `6` alone."""
    if len(numbers) == 1:
        return str(numbers[0])
    return f"{' x '.join(map(str, numbers))} = {math.prod(numbers)}"


def _mismatch(
    parts: list["_Extent"], whole: "_Extent | None", count: int
) -> list[tuple[int, int]] | None:
    """The arguments' dimensions that gave `parts` and `whole`, where all `count` parts
    and the whole are known and the parts' product is not the whole; None where it is."""
    if whole is None or len(parts) != count or math.prod(p[0] for p in parts) == whole[0]:
        return None
    return [e[1] for e in (*parts, whole) if e[1] is not None]


def _check_reshape(found: "_Extents", op: Operation) -> None:
    """Refuse a `tensor.reshape` whose result has not its operand's count of elements,
    where both are known (the result's shape from its type, or a constant shape operand)
    and an input gave one of them."""
    assert isinstance(op, ReshapeOp)
    source = [found.known((op.source, d)) for d in range(_rank(op.source))]
    shape = _shape_operand(found, op.shape, _rank(op.result))
    result = [found.known((op.result, d)) for d in range(_rank(op.result))]
    result = [r if r is not None else s for r, s in zip(result, shape)]
    if any(e is None for e in (*source, *result)):
        return
    elements = [e for e in source if e is not None]
    into = [e for e in result if e is not None]
    count = math.prod(e[0] for e in into)
    given = _mismatch(elements, (count, None), len(elements))
    if given is None:
        return
    numbers = [e[0] for e in elements]
    raise found.refuse(
        given[-1] if given else None,
        op,
        f"reshapes its operand of {_product(numbers)} "
        f"elements into a result of shape {tuple(e[0] for e in into)} ({count} elements)",
    )


def _shape_operand(found: "_Extents", shape: SSAValue, rank: int) -> list["_Extent | None"]:
    """The `rank` extents a reshape's shape operand gives, where a constant or
    `tensor.from_elements` does."""
    op = shape.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, DenseIntOrFPElementsAttr):
        numbers = [a.value.data for a in op.value.get_attrs() if isinstance(a, IntegerAttr)]
        numbers = numbers * rank if len(numbers) == 1 else numbers  # a splat
        if len(numbers) == rank:
            return [(n, None) for n in numbers]
    if isinstance(op, FromElementsOp) and len(op.elements) == rank:
        return [_index(found, v) for v in op.elements]
    return [None] * rank


def _check_slice(found: "_Extents", op: Operation) -> None:
    """Refuse a slice that runs past its tensor, where its offset, size and stride in a
    dimension and that dimension's extent are known and an input gave one of them."""
    assert isinstance(op, (ExtractSliceOp, InsertSliceOp))
    whole, of = (
        (op.source, "operand") if isinstance(op, ExtractSliceOp) else (op.dest, "destination")
    )
    offsets = _mixed(found, op.static_offsets, op.offsets)
    sizes = _mixed(found, op.static_sizes, op.sizes)
    strides = _mixed(found, op.static_strides, op.strides)
    for dim, (offset, size, stride) in enumerate(zip(offsets, sizes, strides)):
        extent = found.known((whole, dim))
        if offset is None or size is None or stride is None or extent is None or size[0] == 0:
            continue
        last = offset[0] + (size[0] - 1) * stride[0]
        if 0 <= offset[0] and 0 <= last < extent[0]:
            continue
        given = [e[1] for e in (extent, offset, size, stride) if e[1] is not None]
        reads = "takes" if isinstance(op, ExtractSliceOp) else "writes"
        raise found.refuse(
            given[0] if given else None,
            op,
            f"{reads} elements {offset[0]} to {last} of dimension {dim} of its {of}, "
            f"which has {extent[0]}",
        )


def _mixed(
    found: "_Extents", static: DenseArrayBase[IntegerType], dynamic: Sequence[SSAValue]
) -> list["_Extent | None"]:
    """The values of a list of static ones where those marked dynamic are `dynamic`'s, in
    turn; None for one the run gives."""
    values = iter(dynamic)
    return [
        (n, None) if n != DYNAMIC_INDEX else _index(found, next(values))
        for n in static.get_values()
    ]


# Index arithmetic that _index folds; a division rounds as the op does.
_FOLDS: dict[type[Operation], Callable[[int, int], int]] = {
    arith.AddiOp: operator.add,
    arith.SubiOp: operator.sub,
    arith.MuliOp: operator.mul,
    arith.DivUIOp: operator.floordiv,
    arith.FloorDivSIOp: operator.floordiv,
    arith.DivSIOp: lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    arith.CeilDivUIOp: lambda a, b: -(-a // b),
    arith.CeilDivSIOp: lambda a, b: -(-a // b),
}


def _index(found: "_Extents", value: SSAValue) -> "_Extent | None":
    """`value`, an index that constants and the extents `found` knows give, with the
    argument's dimension that gave one of them; None where only the run gives it."""
    op = value.owner
    if not isinstance(op, Operation):
        return found.scalar(value)  # a block's argument: an input, or the run gives it
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data, None
    if isinstance(op, DimOp):
        dim = _index(found, op.index)
        if dim is None or not 0 <= dim[0] < _rank(op.source):
            return None
        return found.known((op.source, dim[0]))
    fold = _FOLDS.get(type(op))
    if fold is None:
        return None
    lhs, rhs = (_index(found, v) for v in op.operands)
    if lhs is None or rhs is None:
        return None
    try:
        number = fold(lhs[0], rhs[0])
    except ZeroDivisionError:
        return None
    return number, lhs[1] if lhs[1] is not None else rhs[1]


_CHECKS: dict[type[Operation], Callable[["_Extents", Operation], None]] = {
    ConcatOp: _check_concat,
    ExpandShapeOp: _check_reshape_groups,
    CollapseShapeOp: _check_reshape_groups,
    ReshapeOp: _check_reshape,
    ExtractSliceOp: _check_slice,
    InsertSliceOp: _check_slice,
}
_CHECKED_LATER = tuple(_CHECKS)


def _rank(value: SSAValue) -> int:
    type_ = value.type
    return len(type_.get_shape()) if isinstance(type_, ShapedType) else 0


_FIX = "make the program's static shapes agree"


class _Extents:
    """Dimensions found equal, in classes, each with its extent where one is known."""

    def __init__(
        self, function: func.FuncOp, shapes: dict[int, tuple[int, ...]], scalars: dict[int, int]
    ) -> None:
        self.function = function
        self.shapes = shapes
        self.scalars = scalars
        self.parent: dict[_Node, _Node] = {}
        self.extent: dict[_Node, _Extent] = {}

    def find(self, node: _Node) -> _Node:
        if node not in self.parent:
            self.parent[node] = node
            known = self._known(node)
            if known is not None:
                self.extent[node] = known
        while self.parent[node] != node:
            node = self.parent[node]
        return node

    def _known(self, node: _Node) -> _Extent | None:
        value, dim = node
        if not isinstance(value, SSAValue) or not isinstance(value.type, ShapedType):
            return None
        arg = self._argument(value)
        if arg is not None and arg in self.shapes:
            return self.shapes[arg][dim], (arg, dim)
        size = value.type.get_shape()[dim]
        return (size, None) if size != DYNAMIC_INDEX else None

    def _argument(self, value: SSAValue) -> int | None:
        if isinstance(value, BlockArgument) and value.block is self.function.body.block:
            return value.index
        return None

    def scalar(self, value: SSAValue) -> _Extent | None:
        """The input `value` is given, where it is an integer argument's."""
        arg = self._argument(value)
        if arg is None or arg not in self.scalars:
            return None
        return self.scalars[arg], (arg, 0)

    def given(self, arg: int) -> str:
        """What argument `arg` of the entry is given, in words."""
        if arg in self.scalars:
            return str(self.scalars[arg])
        return f"an array of shape {self.shapes[arg]}"

    def give(self, node: _Node, extent: _Extent, op: Operation) -> None:
        """Give `node`'s class `extent`, which `op` says it has: refused where the class has
        another. Extents from the types alone are the verifier's."""
        root = self.find(node)
        had = self.extent.get(root)
        if had is None:
            self.extent[root] = extent
        elif had[0] != extent[0] and (had[1] is not None or extent[1] is not None):
            raise self._disagree(had, extent, op)

    def known(self, node: _Node) -> _Extent | None:
        """The extent of `node`'s class, where one is known."""
        return self.extent.get(self.find(node))

    def refuse(self, blamed: tuple[int, int] | None, op: Operation, what: str) -> Exception:
        """The error for `op`, which `what` (it "joins ...") with the input of argument
        `blamed` (an index and a dimension), or with the program's static shapes (None)."""
        if blamed is None:
            return error_at(op, f"'{op.name}' here {what}, as the program's types say; {_FIX}")
        arg, _dim = blamed
        type_ = self.function.function_type.inputs.data[arg]
        return error_at(
            op,
            f"argument #{arg} of @{self.function.sym_name.data} ({type_}) is given "
            f"{self.given(arg)}, where '{op.name}' here {what}; {self._fix(arg)}",
        )

    def join(self, a: _Node, b: _Node, op: Operation) -> None:
        first, second = self.find(a), self.find(b)
        if first == second:
            return
        one, other = self.extent.get(first), self.extent.get(second)
        if one is not None and other is not None and one[0] != other[0]:
            raise self._disagree(one, other, op)
        self.parent[second] = first
        if one is None and other is not None:
            self.extent[first] = other

    def _disagree(self, one: _Extent, other: _Extent, op: Operation) -> Exception:
        """The error for extents `one` and `other` that `op` needs equal, naming an
        argument: the later one given, where both are."""
        blamed, need = sorted((one, other), key=lambda e: -1 if e[1] is None else e[1][0])[::-1]
        if blamed[1] is None:  # types that only casts between them make disagree
            return error_at(
                op,
                f"'{op.name}' here needs extents {one[0]} and {other[0]} equal, as the "
                f"program's types say; {_FIX}",
            )
        arg, dim = blamed[1]
        if arg in self.scalars:
            return self._size_disagrees(arg, blamed[0], need, op)
        given = self.shapes[arg]
        wanted = tuple(need[0] if k == dim else n for k, n in enumerate(given))
        type_ = self.function.function_type.inputs.data[arg]
        if need[1] is not None:
            source = f"argument #{need[1][0]}'s is ({self.given(need[1][0])})"
        elif isinstance(op, CastOp):
            source = "the cast's result type says"
        else:
            source = "a static type of the op's operands says"
        return error_at(
            op,
            f"argument #{arg} of @{self.function.sym_name.data} ({type_}) is given an array "
            f"of shape {given}, where '{op.name}' here needs shape {wanted}: its dimension "
            f"{dim} must be {need[0]}, as {source}; give arrays whose shapes agree as the "
            "program's ops use them",
        )

    def refuse_size(self, arg: int, size: int, op: Operation, what: str) -> Exception:
        """The error for a `size` that the integer argument `arg` gives, which `op` takes
        as `what`."""
        type_ = self.function.function_type.inputs.data[arg]
        value = self.scalars[arg]
        makes = f" (which makes a size of {size})" if size != value else ""
        return error_at(
            op,
            f"argument #{arg} of @{self.function.sym_name.data} ({type_}) is given "
            f"{value}{makes}, where '{op.name}' here takes it as {what}; {self._fix(arg)}",
        )

    def _size_disagrees(self, arg: int, size: int, need: _Extent, op: Operation) -> Exception:
        """The error for a `size` that the integer argument `arg` gives, where `op` needs
        `need`."""
        type_ = self.function.function_type.inputs.data[arg]
        if need[1] is not None:
            source = f"argument #{need[1][0]} is given {self.given(need[1][0])}"
        else:
            source = "the program's types say"
        value = self.scalars[arg]
        makes = f" (which makes a size of {size})" if size != value else ""
        return error_at(
            op,
            f"argument #{arg} of @{self.function.sym_name.data} ({type_}) is given "
            f"{value}{makes}, where '{op.name}' here needs a size of {need[0]}, as {source}; "
            f"{self._fix(arg)}",
        )

    def _fix(self, arg: int) -> str:
        if arg in self.scalars:
            return "give sizes that agree with the inputs' shapes as the program's ops use them"
        return "give arrays whose shapes agree as the program's ops use them"


def _casts(module: ModuleOp) -> int:
    """The `tensor.cast`s in `module`: mlir-opt-22's shard passes refuse them."""
    return sum(isinstance(op, CastOp) for op in module.walk())


def _function(module: ModuleOp, entry: str) -> func.FuncOp:
    function = SymbolTable.lookup_symbol(module, entry)
    assert isinstance(function, func.FuncOp), f"@{entry} is checked before it is specialised"
    return function


def _dynamic(type_: Attribute) -> bool:
    return isinstance(type_, TensorType) and DYNAMIC_INDEX in type_.get_shape()


def _fits(type_: Attribute, shape: object) -> bool:
    if not isinstance(type_, TensorType) or not isinstance(shape, tuple):
        return False
    wanted = type_.get_shape()
    return len(wanted) == len(shape) and all(w in (DYNAMIC_INDEX, n) for w, n in zip(wanted, shape))


def _give_shape(function: func.FuncOp, index: int, shape: tuple[int, ...]) -> None:
    """Argument `index` of `function` as a tensor of `shape`, cast back to its type for
    its users."""
    block = function.body.blocks[0]
    old = block.args[index]
    assert isinstance(old.type, TensorType)
    new = block.insert_arg(TensorType(old.type.element_type, shape), index)
    back = CastOp(new, old.type)
    if block.first_op is None:
        block.add_op(back)
    else:
        block.insert_op_before(back, block.first_op)
    old.replace_all_uses_with(back.dest)
    new.name_hint = old.name_hint
    block.erase_arg(old)
    function.update_function_type()


def _fill_dynamic_splats(module: ModuleOp) -> None:
    """Each `tensor.splat` of dynamic shape as a `linalg.fill` of a `tensor.empty` of its
    sizes: mlir-opt-22's canonicalize gives the empty tensor the static shape its sizes
    fold to, where it leaves a splat's type as written."""
    for op in find_ops(module, SplatOp):
        if not op.dynamicSizes:
            continue
        empty = EmptyOp(list(op.dynamicSizes), op.result.type)
        fill = FillOp([op.input], [empty.tensor])
        empty.location = fill.location = op.location
        parent = op.parent_block()
        assert parent is not None
        parent.insert_ops_before([empty, fill], op)
        op.result.replace_all_uses_with(fill.results[0])
        parent.erase_op(op)


def _through_shards(module: ModuleOp) -> bool:
    """Each `shard.shard` of a cast from a static shape annotates the static tensor
    instead, cast after it (a shard op's result has its operand's type); whether any."""
    moved = False
    for op in find_ops(module, shard.ShardOp):
        source = op.src.owner
        if not isinstance(source, CastOp) or _dynamic(source.source.type):
            continue
        if op.result.type != source.dest.type:
            continue
        made = shard.ShardOp.create(
            operands=[source.source, *op.operands[1:]],
            result_types=[source.source.type],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        made.location = op.location
        back = CastOp(made.result, op.result.type)
        parent = op.parent_block()
        assert parent is not None
        parent.insert_ops_before([made, back], op)
        op.result.replace_all_uses_with(back.dest)
        parent.erase_op(op)
        moved = True
    return moved


def _return_static(function: func.FuncOp) -> None:
    """Each result that is a cast from a static shape returned uncast, and the function's
    type to match."""
    returned = function.get_return_op()
    if returned is None:
        return
    for k, value in enumerate(returned.operands):
        source = value.owner
        if isinstance(source, CastOp) and _dynamic(value.type) and not _dynamic(source.source.type):
            returned.operands[k] = source.source
            if not source.dest.uses:
                source.detach()
                source.erase()
    function.update_function_type()
