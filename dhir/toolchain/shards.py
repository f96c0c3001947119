"""Programs with shard annotations (MLIR's `shard` dialect) on dhir's ranks.

A module with `shard.grid`s and `shard.shard`/`shard.sharding` annotations runs on as
many ranks as its grid has devices, rank R being device R (row-major); a grid axis written
`?` is sized so that the grid has one device per rank. mlir-opt-22
propagates the shardings (`sharding-propagation`) and partitions the entry into each
device's part (`shard-partition`), and dhir's passes turn its collectives into calls of
dhir's runtime (dhir/transforms/shard_collectives.py). Every rank runs the partitioned
entry as host code, on its own shard of each array.

A module without `shard.shard` annotations is taken as written per device already (its
collectives and process queries written by hand): every rank runs it as it is.

The entry keeps its global signature: before partitioning, each argument is made
replicated where it comes in (every rank gets the whole input, and `shard-partition`
slices out each device's shard), and each result where it goes out (the shards are
gathered). So inputs and results are the arrays the user gives and gets, whatever the
shardings inside. Where nothing else needs the whole, neither is made: the slices that
take an argument to its shard, and the gathers that take a result from its shard, are
marked (INPUT_PART, RESULT_PART), and dhir-shard-collectives turns them into each rank
reading (writing) its shard from (to) the file. Otherwise, an argument whose rows are split
is sliced by rows first, so that each rank loads only its rows.

With the interpreter the annotations are dropped: a shard program computes what its
function computes without them (`strip`), which is the oracle the native runs are tested
against.
"""

import math
from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    UnitAttr,
    i16,
    i64,
)
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from dhir.analysis.shard_layout import Padding
from dhir.dialects import arith, func, linalg, scf, shard, tensor
from dhir.dialects.shard import SHARD_OPS, is_shard_op
from dhir.ir.diagnostics import DhirError, Diagnostic, error_at, loc_of, warn
from dhir.ir.text import keep_argument_names, through_mlir_opt
from dhir.ir.walk import find_ops, holds_op
from dhir.machine.dlti import description_named
from dhir.toolchain import shard_padding
from dhir.toolchain.tools import find_llvm_tools
from dhir.transforms.shard_collectives import (
    INPUT_PART,
    RESULT_PART,
    SHARD_BANDS,
    SPMD,
    UNSIGNED,
    grid_shapes,
    stub_collectives,
)

PROPAGATE = "builtin.module(func.func(sharding-propagation))"
# lower-affine: the partition computes a device's linear index over several grid axes
# with a semi-affine map (s0 * s1 + s2), which xDSL cannot represent.
PARTITION = "builtin.module(func.func(shard-partition,lower-affine),canonicalize)"


def is_shard_program(module: ModuleOp) -> bool:
    # `holds_op`, not `walk()`: `dhir compile` and `dhir run` ask it of every program.
    return holds_op(module, SHARD_OPS)


def partition(module: ModuleOp, entry: str, ranks: int | None) -> ModuleOp:
    """`module` partitioned for its grid's devices, one per rank (`ranks`; None: not
    checked), its collectives calling dhir's runtime stubs (see the module docstring)."""
    _entry(module, entry)
    module = _sized_grids(module, ranks)
    if not find_ops(module, shard.ShardOp):  # written per device already: no shardings
        module = module.clone()
        stub_collectives(module)
        _entry(module, entry).attributes[SPMD] = UnitAttr()
        return module
    original, padded = module, None
    first = _uneven(module)
    if first is not None:
        padded = shard_padding.pad(module, entry)
        if isinstance(padded, str):
            return _unsharded(original, entry, first[0], f"{first[1]}; {padded}")
        module = padded.module
    mlir_opt = str(find_llvm_tools().mlir_opt)
    try:
        propagated = _annotated_in_full(module, entry) or through_mlir_opt(
            module,
            mlir_opt,
            PROPAGATE,
            what=f"partition @{entry} (a shard program)",
            failed=f"propagating the shardings of @{entry} with mlir-opt-22 failed",
            locations=True,
        )
    except DhirError as error:
        # Ops without MLIR 22's sharding interface (scf.for, tensor.extract_slice) and its
        # own bugs: as any sharding it cannot partition, the program runs unsharded.
        op = next(iter(find_ops(_entry(original, entry), shard.ShardOp)))
        why = f"mlir-opt-22 cannot propagate the shardings of @{entry} ({_first_line(error)})"
        return _unsharded(original, entry, op, why)
    uneven = _uneven(propagated)
    if uneven is not None:
        return _unsharded(original, entry, *uneven)
    _unsplit_written_out(propagated)
    _reshard_stepwise(_entry(propagated, entry))
    grids = grid_shapes(propagated)
    # Padded arrays never come in or go out whole: each rank reads and writes the real
    # part of its shard (shard_padding), by boxes rather than bands of rows.
    partitioned = _partitioned_either(propagated, entry, grids, mlir_opt, padded is None)
    if partitioned is None:
        op, why = first or (
            next(iter(find_ops(_entry(original, entry), shard.ShardOp))),
            f"mlir-opt-22 cannot partition @{entry} (its shard-partition fails or crashes on "
            "some reshardings: from halos, or over several grid axes at once)",
        )
        if padded is not None:
            why += "; mlir-opt-22 cannot partition it padded either"
        return _unsharded(original, entry, op, why)
    generic = _generic_reduction(_entry(partitioned, entry))
    if generic is not None:
        return _unsharded(original, entry, *generic)
    if padded is not None:
        _pad_boundary(_entry(partitioned, entry), padded, _entry(original, entry))
    keep_argument_names(module, partitioned, entry)
    stub_collectives(partitioned)
    _entry(partitioned, entry).attributes[SPMD] = UnitAttr()
    return partitioned


def _partitioned_either(
    propagated: ModuleOp,
    entry: str,
    grids: dict[str, tuple[int, ...]],
    mlir_opt: str,
    bands: bool,
) -> ModuleOp | None:
    """`propagated` partitioned with each argument reaching its own sharding first, so
    that one whose rows are split is sliced by rows first and (with `bands`) each rank
    loads only its rows; else from whole inputs, as some reshardings fail in MLIR 22 from
    one and not the other; None where both fail."""
    try:
        return _partitioned(propagated.clone(), entry, grids, mlir_opt, True, bands)
    except DhirError:
        pass
    try:
        return _partitioned(propagated, entry, grids, mlir_opt, False)
    except DhirError:
        return None


def _partitioned(
    module: ModuleOp,
    entry: str,
    grids: dict[str, tuple[int, ...]],
    mlir_opt: str,
    keep: bool,
    bands: bool = True,
) -> ModuleOp:
    """`module` (propagated) with its boundary replicated (see _replicate_boundary, which
    with `keep` reshards each argument to its own sharding first, and with `bands` too
    records the rows each rank loads), partitioned."""
    types = _entry(module, entry).function_type.outputs.data
    halos = _replicate_boundary(_entry(module, entry), grids, keep, bands)
    partitioned = through_mlir_opt(
        module,
        mlir_opt,
        PARTITION,
        what=f"partition @{entry} (a shard program)",
        failed=(
            f"partitioning @{entry} with mlir-opt-22 failed (its shard-partition cannot "
            "reshard between every two shardings: from halos to other shardings fails in "
            "MLIR 22, and its propagation gives linalg operands shardings without halos; "
            "write such steps per device with collectives instead)"
        ),
        locations=True,
    )
    got = _entry(partitioned, entry)
    _gather_halo_results(got, halos, types, grids)
    want = _entry(module, entry)
    if got.function_type != want.function_type:
        raise error_at(
            want,
            f"mlir-opt-22 partitioned @{entry} into a function of type {got.function_type} "
            f"for {want.function_type}: its shard-partition reshards some value wrongly; "
            "reshard one grid axis at a time",
        )
    _keep_true_bands(got, grids)
    _signed_partial_sums(got)
    _true_reductions(got)
    _tag_result_writes(got)
    _tag_input_reads(got)
    return partitioned


def strip(module: ModuleOp) -> ModuleOp:
    """`module` without its annotations (each `shard.shard` its operand): the function
    the annotations distribute. Collectives written by hand have no meaning there."""
    module = module.clone()
    for op in list(module.walk()):
        if isinstance(op, shard.ShardOp):
            op.result.replace_all_uses_with(op.src)
            op.detach()
            op.erase()
    for op in list(module.walk()):
        if isinstance(op, (shard.ShardingOp, shard.GridOp)) and not any(
            result.uses for result in op.results
        ):
            op.detach()
            op.erase()
    left = next((op for op in module.walk() if is_shard_op(op)), None)
    if left is not None:
        raise error_at(
            left,
            f"{left.name} has no meaning without partitioning, which the interpreter does "
            "not do; run the program with the native backend",
        )
    return module


def _entry(module: ModuleOp, entry: str) -> func.FuncOp:
    function = SymbolTable.lookup_symbol(module, entry)
    assert isinstance(function, func.FuncOp), f"@{entry} is checked before partitioning"
    return function


def _sized_grids(module: ModuleOp, ranks: int | None) -> ModuleOp:
    """`module` with each grid's one axis of unknown size (`?`) given the size that makes
    its devices `ranks` (a copy where one is); a located error for a grid without shard
    ops, one whose devices cannot be `ranks`, or (`ranks` None) one not fully sized."""
    grids = find_ops(module, shard.GridOp)
    if not grids:
        first = next(op for op in module.walk() if is_shard_op(op))
        raise error_at(first, f"{first.name} without a shard.grid: declare the grid it names")
    if any(n <= 0 for grid in grids for n in grid.shape.get_values()):
        module = module.clone()
        grids = find_ops(module, shard.GridOp)
    described = description_named(module)
    for grid in grids:
        shape = _sized(grid, ranks, described)
        if shape != list(grid.shape.get_values()):
            grid.properties["shape"] = DenseArrayBase.from_list(i64, shape)
        _check_devices(grid, math.prod(shape), ranks, described)
    return module


def _run_on(count: str, described: str | None) -> str:
    """What to do to run on `count` ranks ("4 ranks"): -n, or, where the machine
    description `described` sets the rank count (-n must agree with it), describe them."""
    if described is None:
        return f"run it on {count} (-n, ranks= in the API)"
    return f"describe {count} in the machine description {described}, whose ranks it runs on"


def _sized(grid: shard.GridOp, ranks: int | None, described: str | None) -> list[int]:
    """`grid`'s shape, its one unknown axis (if any) sized to make `ranks` devices."""
    shape = list(grid.shape.get_values())
    unknown = [axis for axis, n in enumerate(shape) if n <= 0]
    if not unknown:
        return shape
    written = "x".join("?" if n <= 0 else str(n) for n in shape)
    name = grid.sym_name.data
    if ranks is None:
        raise error_at(
            grid,
            f"the grid @{name} has a size that is not fixed ({written}) and no rank count "
            "is given: dhir sizes an axis written `?` by the rank count; give it with -n",
        )
    if len(unknown) > 1:
        raise error_at(
            grid,
            f"the grid @{name} has more than one axis whose size is not fixed ({written}): "
            "dhir sizes one axis written `?` by the rank count; give the others their sizes",
        )
    known = math.prod(n for n in shape if n > 0)
    if ranks % known:
        raise error_at(
            grid,
            f"the grid @{name} ({written}) cannot have {ranks} devices, one per rank: its "
            f"fixed axes make {known} devices, which do not divide {ranks}; "
            + _run_on(f"a multiple of {known} ranks", described),
        )
    shape[unknown[0]] = ranks // known
    return shape


def _check_devices(
    grid: shard.GridOp, devices: int, ranks: int | None, described: str | None
) -> None:
    if ranks is None or devices == ranks:
        return
    # With a machine description, -n must be its count: "-n 4" was refused in turn.
    told = (
        f"run it with -n {devices} (ranks={devices} in the API)"
        if described is None
        else _run_on(_counted(devices, "rank"), described)
    )
    raise error_at(
        grid,
        f"the grid @{grid.sym_name.data} has {_counted(devices, 'device')} and the "
        f"program runs on {_counted(ranks, 'rank')}: a shard program runs one device "
        f"per rank; {told}",
    )


def _counted(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _annotated_in_full(module: ModuleOp, entry: str) -> ModuleOp | None:
    """`module` with the inits of its structured ops annotated as their results are, where
    that leaves no tensor an op reads or writes without a sharding and some sharding has
    halos: such a program needs no propagation, and MLIR 22's would give the ops' operands
    shardings without halos, which its partition cannot reshard to (upstream's
    `ew_chain_with_halo`). None otherwise."""
    if not any(_halos(made) for made in find_ops(module, shard.ShardingOp)):
        return None
    done = module.clone()
    function = _entry(done, entry)
    for op in list(function.walk()):
        if isinstance(op, linalg.LinalgStructuredOperation):
            _annotate_inits(op)
    ops = [
        op for op in function.walk() if not is_shard_op(op) and not isinstance(op, func.ReturnOp)
    ]
    return done if all(_annotated(op) for op in ops) else None


def _halos(made: shard.ShardingOp) -> bool:
    return bool(made.static_halo_sizes.get_values() or made.dynamic_halo_sizes)


def _annotate_inits(op: linalg.LinalgStructuredOperation) -> None:
    """Each `tensor.empty` init of `op` annotated with the sharding its result is
    annotated with (the init is the result's storage)."""
    parent = op.parent_block()
    assert parent is not None
    for init, result in zip(op.outputs, op.results):
        uses = [use.operation for use in result.uses]
        if not isinstance(init.owner, tensor.EmptyOp) or len(uses) != 1:
            continue
        (user,) = uses
        if not isinstance(user, shard.ShardOp) or user.annotate_for_users is not None:
            continue
        made = _annotate(init, user.sharding, for_users=False)
        users = _annotate(made.result, user.sharding)
        parent.insert_ops_before([made, users], op)
        op.operands[op.operands.index(init)] = users.result


def _annotated(op: Operation) -> bool:
    """Whether every tensor `op` reads is annotated for its users and every tensor it
    makes is annotated (and used by nothing else)."""
    reads = all(
        isinstance(v.owner, shard.ShardOp) and v.owner.annotate_for_users is not None
        for v in op.operands
        if isinstance(v.type, TensorType)
    )
    makes = all(
        isinstance(use.operation, shard.ShardOp) and use.operation.annotate_for_users is None
        for r in op.results
        if isinstance(r.type, TensorType)
        for use in r.uses
    )
    return reads and makes


def _unsplit_written_out(module: ModuleOp) -> None:
    """`split_axes = [[]]` for the shardings propagation leaves with no list at all (those
    of 0-d tensors): mlir-opt-22 prints them as `[]`, which its own parser refuses."""
    for op in find_ops(module, shard.ShardingOp):
        if not op.split_axes.axes.data:
            op.properties["split_axes"] = _split_axes([])


def _uneven(module: ModuleOp) -> tuple[Operation, str] | None:
    """A `shard.shard` that mlir-opt-22's `shard-partition` gets wrong, and why: a split
    dimension that its devices do not divide (it emits mismatched casts) or uneven shards
    given by `sharded_dims_offsets` (it crashes); None when there is none."""
    grids = grid_shapes(module)
    for op in find_ops(module, shard.ShardOp):
        made = op.sharding.owner
        if not isinstance(made, shard.ShardingOp) or not isinstance(op.src.type, TensorType):
            continue
        if made.static_sharded_dims_offsets.get_values() or made.dynamic_sharded_dims_offsets:
            return op, "uneven shards (sharded_dims_offsets), which mlir-opt-22 cannot partition"
        shape = grids.get(made.grid.root_reference.data, ())
        for dim, (size, axes) in enumerate(zip(op.src.type.get_shape(), _split_of(op.sharding))):
            devices = math.prod(shape[a] for a in axes if a < len(shape))
            if axes and size % devices:
                return op, (
                    f"dimension {dim} of {op.src.type} ({size}) is split over {devices} "
                    f"devices (grid axes {list(axes)} of @{made.grid.root_reference.data}), "
                    "which do not divide it: uneven shards, which mlir-opt-22 cannot partition"
                )
    return None


def _first_line(error: DhirError) -> str:
    """The first error mlir-opt gave (through_mlir_opt puts its words after a line of
    dhir's), without its location in the text dhir gave it."""
    lines = str(error).splitlines()[1:]
    said = next((line for line in lines if "error:" in line), lines[0] if lines else "")
    return said.split("error:", 1)[-1].strip() or "it gave no reason"


def _unsharded(module: ModuleOp, entry: str, op: Operation, why: str) -> ModuleOp:
    """`module` without its annotations (`strip`), for a sharding that `shard-partition`
    cannot partition (`why`): the function the annotations distribute, which dhir then
    distributes itself (CodeDrop), with a warning. Collectives written by hand have no
    meaning there: then `why` is the error."""
    try:
        plain = strip(module)
    except DhirError:
        raise error_at(
            op,
            f"{why}, and @{entry} also has collectives written by hand, so dhir cannot run "
            "it as the function it computes without its shardings either; split "
            "dimensions that the devices divide",
        ) from None
    warn(
        Diagnostic(
            f"{why}; dhir runs @{entry} as the function it computes without its shardings, "
            "distributed by its own placement (CodeDrop); the results are the same, but the "
            "ranks do not hold the shards the shardings name",
            loc_of(op),
            "warning",
        )
    )
    return plain


def _pad_boundary(
    function: func.FuncOp, padded: shard_padding.Padded, original: func.FuncOp
) -> None:
    """The partitioned `function`'s padded arguments and results at their true types.
    Where each rank reads (writes) only its shard, the read (write) is told the padding;
    otherwise the argument is padded whole on every rank first, and the result cut to its
    real elements at the end."""
    types = original.function_type
    block = function.body.blocks[0]
    for index, dims in padded.arguments.items():
        argument, true = block.args[index], types.inputs.data[index]
        chain, negative = _slice_chain(argument), index not in padded.positive
        if _told(chain, INPUT_PART, dims, true, negative):
            Rewriter.replace_value_with_new_type(argument, true)
            continue
        whole = Rewriter.replace_value_with_new_type(argument, true)
        ops = shard_padding.padded(whole, dims, negative)
        block.insert_ops_before(ops, block.first_op)  # pyright: ignore[reportArgumentType]
        for use in [u for u in whole.uses if u.operation not in ops]:
            use.operation.operands[use.index] = ops[-1].results[0]
    returned = function.body.blocks[-1].last_op
    assert isinstance(returned, func.ReturnOp)
    for index, dims in padded.results.items():
        value, true = returned.operands[index], types.outputs.data[index]
        chain = _gather_chain(value)
        if _told(chain, RESULT_PART, dims, true):
            Rewriter.replace_value_with_new_type(chain[0].result, true)
            continue
        ops = shard_padding.unpadded(value, dims)
        function.body.blocks[-1].insert_ops_before(ops, returned)
        returned.operands[index] = ops[-1].results[0]
    function.update_function_type()


def _slice_chain(value: SSAValue) -> list[shard.AllSliceOp]:
    """The slices that alone take `value` on, each result used once, the first first."""
    chain: list[shard.AllSliceOp] = []
    while value.has_one_use() and isinstance(
        op := value.get_user_of_unique_use(), shard.AllSliceOp
    ):
        chain.append(op)
        value = op.result
    return chain


def _gather_chain(value: SSAValue) -> list[shard.AllGatherOp]:
    """The gathers that alone bring `value` about, each result used once, the last first."""
    chain: list[shard.AllGatherOp] = []
    while isinstance(op := value.owner, shard.AllGatherOp) and value.has_one_use():
        chain.append(op)
        value = op.input
    return chain


def _told(
    chain: Sequence[Operation],
    name: str,
    dims: dict[int, Padding],
    whole: Attribute,
    negative: bool = True,
) -> bool:
    """Whether the slices (gathers) `chain` between a padded argument (result) and its
    shard go direct (`name`): then the part next to the shard is told the whole's true
    shape, each dimension's padding and, for floats, whether it is -0.0 (`negative`) or
    +0.0."""
    if not chain or name not in chain[-1].attributes:
        return False
    assert isinstance(whole, TensorType)
    shape = whole.get_shape()
    part = chain[-1].attributes[name]
    assert isinstance(part, DictionaryAttr)
    counts = [list(dims[d].counts) if d in dims else [] for d in range(len(shape))]
    chain[-1].attributes[name] = DictionaryAttr(
        {
            **part.data,
            "whole": DenseArrayBase.from_list(i64, list(whole.get_shape())),
            "padding": ArrayAttr([DenseArrayBase.from_list(i64, c) for c in counts]),
            "negative": BoolAttr.from_bool(negative),
        }
    )
    return True


def _replicate_boundary(
    function: func.FuncOp, grids: dict[str, tuple[int, ...]], keep: bool, bands: bool = True
) -> dict[int, shard.ShardingOp]:
    """Each argument replicated where it comes in, each result where it goes out. Between
    replicated and an argument's (result's) sharding, one more (less) dimension is split
    at each step: `shard-partition` reshards one dimension at a time. With `keep`, each
    argument reaches the sharding it had before its users reshard it: one whose rows are
    split is then sliced by rows first, so each rank reads only its block of rows, which
    the entry records (SHARD_BANDS, with `bands`) for the harness to load alone. A result made with
    halos stays so (MLIR 22 cannot reshard from halos): returns its sharding by the
    result's position, for _gather_halo_results."""
    _replicate_arguments(function, grids, keep, bands)
    return _replicate_results(function)


def _replicate_arguments(
    function: func.FuncOp, grids: dict[str, tuple[int, ...]], keep: bool, bands: bool
) -> None:
    """`_replicate_boundary` for the arguments, and their bands (SHARD_BANDS)."""
    block = function.body.blocks[0]
    blocks: dict[int, list[tuple[int, int]]] = {}
    for argument in block.args:
        annotations = [u.operation for u in argument.uses if isinstance(u.operation, shard.ShardOp)]
        if not annotations:
            continue  # unannotated: replicated already
        producer = next((a for a in annotations if a.annotate_for_users is None), None)
        if producer is None:  # only what its users want: it comes in as the first says
            producer = _annotate(argument, annotations[0].sharding, for_users=False)
            block.insert_op_before(producer, annotations[0])
            argument.replace_all_uses_with(producer.result)
            producer.operands[0] = argument
        split = _split_of(producer.sharding)
        rows = _row_blocks(argument, split, _grid_of(producer.sharding, grids))
        if rows is not None and keep and bands:
            blocks[argument.index] = rows
        producer.operands[1] = _sharding(producer, producer.sharding, [])
        users = [u.operation for u in producer.result.uses]
        last, after = producer.result, producer
        for step in [*_steps(split), *([split] if keep else [])]:
            annotated = _annotate(last, _sharding(producer, producer.sharding, step))
            block.insert_op_after(annotated, after)
            last, after = annotated.result, annotated
        for user in users:
            for k, operand in enumerate(user.operands):
                if operand == producer.result:
                    user.operands[k] = last
    if blocks:
        function.attributes[SHARD_BANDS] = DictionaryAttr(
            {
                str(k): ArrayAttr([DenseArrayBase.from_list(i64, list(b)) for b in rows])
                for k, rows in blocks.items()
            }
        )


def _replicate_results(function: func.FuncOp) -> dict[int, shard.ShardingOp]:
    """`_replicate_boundary` for the results: the shardings of those made with halos."""
    block = function.body.blocks[0]
    returned = function.body.blocks[-1].last_op
    assert isinstance(returned, func.ReturnOp)
    halos: dict[int, shard.ShardingOp] = {}
    for index, value in enumerate(returned.operands):
        # What the users of a returned value ask for does not matter: it leaves whole.
        # From the sharding it is made with, one dimension is gathered at a time.
        while (
            isinstance(owner := value.owner, shard.ShardOp)
            and owner.annotate_for_users is not None
            and value.has_one_use()
            and isinstance(owner.src.owner, shard.ShardOp)
        ):
            value = returned.operands[index] = owner.src
            owner.detach()
            owner.erase()
        owner = value.owner
        if not isinstance(owner, shard.ShardOp):
            continue
        made = owner.sharding.owner
        if isinstance(made, shard.ShardingOp) and made.static_halo_sizes.get_values():
            annotated = _annotate(value, owner.sharding)
            block.insert_op_before(annotated, returned)
            returned.operands[index] = annotated.result
            halos[index] = made
            continue
        for step in [*reversed(_steps(_split_of(owner.sharding))), []]:
            annotated = _annotate(value, _sharding(returned, owner.sharding, step))
            block.insert_op_before(annotated, returned)
            value = annotated.result
        returned.operands[index] = value
    return halos


def _gather_halo_results(
    function: func.FuncOp,
    halos: dict[int, shard.ShardingOp],
    types: Sequence[Attribute],
    grids: dict[str, tuple[int, ...]],
) -> None:
    """Each result `halos` names, which the partitioned `function` returns with its halos,
    cut to the device's own block and gathered whole (one grid axis at a time, the last
    dimension's last axis first), so that the function returns `types` again."""
    returned = function.body.blocks[-1].last_op
    assert isinstance(returned, func.ReturnOp)
    for index, made in halos.items():
        value, whole = returned.operands[index], types[index]
        assert isinstance(value.type, TensorType) and isinstance(whole, TensorType)
        split = [axes.get_values() for axes in made.split_axes.axes.data]
        split += [()] * (len(whole.get_shape()) - len(split))
        widths = iter(made.static_halo_sizes.get_values())
        halo = [(next(widths), next(widths)) if axes else (0, 0) for axes in split]
        block = [n - lo - hi for n, (lo, hi) in zip(value.type.get_shape(), halo)]
        ops: list[Operation] = [
            tensor.ExtractSliceOp.from_static_parameters(value, [lo for lo, _ in halo], block)
        ]
        grid = grids[made.grid.root_reference.data]
        for dim in reversed(range(len(split))):
            for axis in reversed(split[dim]):
                block[dim] *= grid[axis]
                ops.append(_gather(ops[-1].results[0], made, axis, dim, list(block)))
        parent = returned.parent_block()
        assert parent is not None
        parent.insert_ops_before(ops, returned)
        returned.operands[index] = ops[-1].results[0]
    function.update_function_type()


def _gather(
    value: SSAValue, made: shard.ShardingOp, axis: int, dim: int, shape: list[int]
) -> shard.AllGatherOp:
    assert isinstance(value.type, TensorType)
    return shard.AllGatherOp.build(
        operands=[value],
        result_types=[TensorType(value.type.get_element_type(), shape)],
        properties={
            "grid": made.grid,
            "grid_axes": DenseArrayBase.from_list(i16, [axis]),
            "gather_axis": IntegerAttr(dim, IndexType()),
        },
    )


def _keep_true_bands(function: func.FuncOp, grids: dict[str, tuple[int, ...]]) -> None:
    """Drop the band of each argument (SHARD_BANDS) that the partitioned code uses other
    than through slices of those very rows: `canonicalize` folds a slice and the gather
    after it into the argument itself, which then must be whole."""
    bands = function.attributes.get(SHARD_BANDS)
    if not isinstance(bands, DictionaryAttr):
        return
    kept = {}
    for key, rows in bands.data.items():
        argument = function.body.blocks[0].args[int(key)]
        want = [
            tuple(cast(DenseArrayBase[IntegerType], b).get_values())
            for b in cast(ArrayAttr[Attribute], rows).data
        ]
        if all(_slices_rows(use.operation, argument, grids) == want for use in argument.uses):
            kept[key] = rows
    if kept:
        function.attributes[SHARD_BANDS] = DictionaryAttr(kept)
    else:
        del function.attributes[SHARD_BANDS]


def _signed_partial_sums(function: func.FuncOp) -> None:
    """Float partial sums that `shard-partition` starts at +0.0 on every device but the
    first start at -0.0: MLIR 22 takes +0.0 as the identity of `addf`, so a sum that is
    -0.0 unsharded came out +0.0, but x + -0.0 is x for every x."""
    for branch in find_ops(function, scf.IfOp):
        test = branch.cond.owner
        if not (
            isinstance(test, arith.CmpiOp)
            and test.predicate.value.data == 0  # eq
            and _of_device_index(test.lhs)
        ):
            continue
        for fill in branch.false_region.walk():
            zero = fill.operands[0].owner if isinstance(fill, linalg.FillOp) else None
            if (
                isinstance(zero, arith.ConstantOp)
                and isinstance(zero.value, FloatAttr)
                and math.copysign(1.0, zero.value.value.data) == 1.0
                and zero.value.value.data == 0.0
            ):
                signed = arith.ConstantOp(FloatAttr(-0.0, zero.value.type))
                Rewriter.insert_op(signed, InsertPoint.before(fill))
                fill.operands[0] = signed.result


# Combiners MLIR 22's shard-partition joins with the wrong reduction (its linalg sharding
# interface takes `andi` for a sum and `maxui`/`minui` for the signed max and min): the
# reduction it gives, the one each needs, and whether that compares unsigned.
_COMBINED = {
    "arith.andi": (shard.ReductionKind.SUM, shard.ReductionKind.BITWISE_AND, False),
    "arith.maxui": (shard.ReductionKind.MAX, shard.ReductionKind.MAX, True),
    "arith.minui": (shard.ReductionKind.MIN, shard.ReductionKind.MIN, True),
}


def _true_reductions(function: func.FuncOp) -> None:
    """Each collective that joins devices' partial reductions, with the reduction their
    combiner needs: an `andi` summed, or a `maxui` compared signed, was a wrong result."""
    for op in function.walk():
        if not isinstance(op, shard.AllReduceOp | shard.ReduceScatterOp):
            continue
        combiner = _combiner(op.input)
        if combiner not in _COMBINED:
            continue
        given, kind, unsigned = _COMBINED[combiner]
        if op.reduction.data != given:  # a partial sharding's own, as written
            continue
        op.reduction = shard.ReductionKindAttr(kind)
        if unsigned:
            op.attributes[UNSIGNED] = UnitAttr()


def _generic_reduction(function: func.FuncOp) -> tuple[Operation, str] | None:
    """The first collective by which `shard-partition` joins the devices' parts of a
    reduction as `generic`, which says nothing of how (for `arith.maxnumf`, or a body of
    several ops; at the reduction's location), and why dhir cannot run it."""
    for op in function.walk():
        if (
            isinstance(op, shard.AllReduceOp | shard.ReduceScatterOp)
            and op.reduction.data == shard.ReductionKind.GENERIC
        ):
            combiner = _combiner(op.input) or "its body"
            return op, (
                f"mlir-opt-22 joins the devices' parts of a reduction by {combiner} with a "
                "collective that does not say how (reduction = generic)"
            )
    return None


def _combiner(value: SSAValue) -> str | None:
    """The name of the op that combines the elements of `value`, a result of a linalg op
    whose body yields it (linalg.reduce, linalg.generic)."""
    producer = value.owner
    if not isinstance(producer, Operation) or not producer.regions or not _reduces(producer):
        return None
    block = producer.regions[0].block if producer.regions[0].blocks else None
    last = block.last_op if block is not None else None
    if not isinstance(last, linalg.YieldOp) or not isinstance(value, OpResult):
        return None
    yielded = last.operands[value.index].owner
    return yielded.name if isinstance(yielded, Operation) else None


def _reduces(op: Operation) -> bool:
    """Whether `op` is a linalg op with a reduction loop (an elementwise op's body
    combines nothing across devices)."""
    if isinstance(op, linalg.ReduceOp):
        return True
    iterators = op.properties.get("iterator_types")
    return isinstance(iterators, ArrayAttr) and any("reduction" in str(i) for i in iterators.data)


def _of_device_index(value: SSAValue) -> bool:
    """Whether `value` is computed by arithmetic from the device's index on the grid."""
    owner = value.owner
    if isinstance(owner, shard.ProcessMultiIndexOp | shard.ProcessLinearIndexOp):
        return True
    return (
        isinstance(owner, Operation)
        and owner.dialect_name() in ("arith", "index", "affine")
        and any(_of_device_index(operand) for operand in owner.operands)
    )


def _slices_rows(
    op: Operation, argument: SSAValue, grids: dict[str, tuple[int, ...]]
) -> list[tuple[int, ...]] | None:
    """Each rank's rows of `argument` that `op` slices out, if it slices rows."""
    if not isinstance(op, shard.AllSliceOp) or op.slice_axis.value.data != 0:
        return None
    grid = grids[op.grid.root_reference.data]
    rows = _row_blocks(argument, [op.grid_axes.get_values()], grid)
    return [tuple(pair) for pair in rows] if rows is not None else None


def _reshard_stepwise(function: func.FuncOp) -> None:
    """Between a value's sharding and a different one its users ask for, where more than
    one grid axis changes (other than one axis moving between dimensions, an all_to_all),
    annotations one axis apart: MLIR 22's shard-partition fails on the direct step."""
    for users in find_ops(function, shard.ShardOp):
        made = users.src.owner
        if users.annotate_for_users is None or not isinstance(made, shard.ShardOp):
            continue
        source, target = made.sharding.owner, users.sharding.owner
        if not (
            isinstance(source, shard.ShardingOp)
            and isinstance(target, shard.ShardingOp)
            and source.grid == target.grid
            and _plain(source)
            and _plain(target)
        ):
            continue
        value, block = users.src, users.parent_block()
        assert block is not None
        for step in _path(_split_of(made.sharding), _split_of(users.sharding)):
            annotated = _annotate(value, _sharding(users, users.sharding, step))
            block.insert_op_before(annotated, users)
            value = annotated.result
        users.operands[0] = value


def _plain(made: shard.ShardingOp) -> bool:
    return not (
        made.static_halo_sizes.get_values()
        or made.dynamic_halo_sizes
        or made.static_sharded_dims_offsets.get_values()
        or made.dynamic_sharded_dims_offsets
    )


def _path(
    source: list[tuple[int, ...]], target: list[tuple[int, ...]]
) -> list[list[tuple[int, ...]]]:
    """The shardings strictly between `source` and `target` one grid axis apart: each
    dimension's axes past what both share are gathered (the last dimension's last axis
    first), then the target's are sliced in. None where at most one axis changes, or one
    axis moves from a dimension split over it alone to one not split."""
    rank = max(len(source), len(target))
    source = [*source, *[()] * (rank - len(source))]
    target = [*target, *[()] * (rank - len(target))]
    shared = [_prefix(a, b) for a, b in zip(source, target)]
    removed = [(d, a) for d in reversed(range(rank)) for a in reversed(source[d][len(shared[d]) :])]
    added = [(d, a) for d in range(rank) for a in target[d][len(shared[d]) :]]
    if len(removed) + len(added) <= 1:
        return []
    if len(removed) == len(added) == 1 and removed[0][1] == added[0][1]:
        (old, axis), (new, _) = removed[0], added[0]
        if source[old] == target[new] == (axis,) and not source[new] and not target[old]:
            return []  # one axis from one dimension to another alone: MLIR's all_to_all
    current, steps = [list(axes) for axes in source], []
    for dim, _ in removed:
        current[dim].pop()
        steps.append([tuple(axes) for axes in current])
    for dim, axis in added:
        current[dim].append(axis)
        steps.append([tuple(axes) for axes in current])
    return steps[:-1]


def _prefix(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _tag_result_writes(function: func.FuncOp) -> None:
    """Mark the gathers that alone bring a result whole to the return (a chain of
    `all_gather`s, each value on it used once) with RESULT_PART: which result they
    gather, and on the first, how the shard it starts from is split (per dimension, the
    grid axes it is gathered over, the last gather's first)."""
    returned = function.body.blocks[-1].last_op
    assert isinstance(returned, func.ReturnOp)
    for index, value in enumerate(returned.operands):
        chain = _gather_chain(value)
        if chain and isinstance(shard_type := chain[-1].input.type, TensorType):
            _mark(chain, shard_type, RESULT_PART, "result", index)


def _tag_input_reads(function: func.FuncOp) -> None:
    """Mark the slices that alone take each argument to the shard the code uses (a
    chain of `all_slice`s, each value on it used once) with INPUT_PART: which argument
    they slice, and on the last, how the shard is split (per dimension, the grid axes it
    is sliced over, the first slice's first)."""
    for argument in function.body.blocks[0].args:
        chain = _slice_chain(argument)
        if chain and isinstance(argument.type, TensorType):
            _mark(chain, argument.type, INPUT_PART, "argument", argument.index)


def _mark(
    chain: Sequence[shard.AllGatherOp | shard.AllSliceOp],
    shard_type: TensorType,
    name: str,
    key: str,
    index: int,
) -> None:
    """Each op of `chain` marked `name` = {key = index}; the last (next to the shard)
    also with the shard's split: per dimension of `shard_type`, the grid axes the chain
    gathers or slices it over, in the chain's order (the outermost first)."""
    split: list[list[int]] = [[] for _ in shard_type.get_shape()]
    for op in chain:
        axis = op.gather_axis if isinstance(op, shard.AllGatherOp) else op.slice_axis
        split[axis.value.data] += op.grid_axes.get_values()
    mark = {key: IntegerAttr(index, i64)}
    for op in chain[:-1]:
        op.attributes[name] = DictionaryAttr(mark)
    axes = ArrayAttr([DenseArrayBase.from_list(i64, a) for a in split])
    chain[-1].attributes[name] = DictionaryAttr({**mark, "split": axes})


def _grid_of(sharding: SSAValue, grids: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    made = sharding.owner
    assert isinstance(made, shard.ShardingOp)
    return grids[made.grid.root_reference.data]


def _row_blocks(
    argument: SSAValue, split: list[tuple[int, ...]], grid: tuple[int, ...]
) -> list[tuple[int, int]] | None:
    """Per rank, the rows of `argument` its device's shard holds, when `split` splits
    its rows (over the grid axes `split[0]`, the group index row-major over them)."""
    if not split or not split[0] or not isinstance(argument.type, TensorType):
        return None
    axes = split[0]
    rows = argument.type.get_shape()[0] // math.prod(grid[a] for a in axes)
    blocks = []
    for rank in range(math.prod(grid)):
        coordinates = [rank // math.prod(grid[d + 1 :]) % grid[d] for d in range(len(grid))]
        index = 0
        for axis in axes:
            index = index * grid[axis] + coordinates[axis]
        blocks.append((index * rows, (index + 1) * rows))
    return blocks


def _split_of(sharding: SSAValue) -> list[tuple[int, ...]]:
    made = sharding.owner
    assert isinstance(made, shard.ShardingOp), "propagation makes every sharding an op"
    return [axes.get_values() for axes in made.split_axes.axes.data]


def _steps(split: list[tuple[int, ...]]) -> list[list[tuple[int, ...]]]:
    """The shardings strictly between replicated and `split`, splitting over one more
    grid axis at each step (dimension by dimension, each one's axes in order): MLIR 22's
    `shard-partition` crashes or errs on moving several axes at once."""
    total = sum(len(axes) for axes in split)
    steps: list[list[tuple[int, ...]]] = []
    for count in range(1, total):
        step: list[tuple[int, ...]] = []
        for axes in split:
            step.append(axes[:count])
            count -= len(step[-1])
        steps.append(step)
    return steps


def _sharding(before: Operation, like: SSAValue, split: list[tuple[int, ...]]) -> SSAValue:
    """A sharding on `like`'s grid splitting as `split` says, made before `before`."""
    made = like.owner
    assert isinstance(made, shard.ShardingOp)
    sharding = shard.ShardingOp.build(
        operands=[[], []],
        properties={"grid": made.grid, "split_axes": _split_axes(split)},
        result_types=[made.result.type],
    )
    parent = before.parent_block()
    assert parent is not None
    parent.insert_op_before(sharding, before)
    return sharding.result


def _split_axes(split: list[tuple[int, ...]]) -> shard.ShardAxesArrayAttr:
    """`split` as split axes, `[[]]` (replicated) when it has no dimension: MLIR 22 reads
    no shorter form."""
    axes = [DenseArrayBase.from_list(i16, list(a)) for a in split or [()]]
    return shard.ShardAxesArrayAttr(ArrayAttr(axes))


def _annotate(value: SSAValue, sharding: SSAValue, for_users: bool = True) -> shard.ShardOp:
    return shard.ShardOp.build(
        operands=[value, sharding],
        result_types=[value.type],
        properties={"annotate_for_users": UnitAttr()} if for_users else {},
    )
