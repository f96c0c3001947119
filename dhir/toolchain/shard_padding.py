"""Uneven shards as even shards of padded arrays.

MLIR 22's `shard-partition` partitions only splits that the devices divide: a split
dimension of 6 over 4 devices, or shards given by `sharded_dims_offsets`, come out wrong
(every device gets 6 / 4 = 1 row) or crash it. Where a program allows it, dhir pads such
a dimension instead: each device's shard (MLIR's layout, where the last `n mod d` shards
are one element longer, or the offsets given) becomes a block of the longest shard's
length, its real elements first and then padding, and the program is partitioned evenly
on the padded size. Each device then holds exactly the shard the sharding names (plus
padding), and its read and write of the shard at the entry's boundary take the real
elements only (`Padding`, dhir_rt_shard_read_box).

Padding must never change a real element. So a dimension is padded only where every op
that touches it is one whose real elements depend on real elements alone: `shard.shard`,
`tensor.empty`, the return, and structured linalg ops in which the dimension is a
parallel loop indexed as itself in every operand (no `linalg.index` of it, no shifted or
strided access) and whose body only computes (arith and math, no integer division, which
traps on a zero divisor), or a reduction loop that only sums entry arguments, whose padding makes
each term the sum's identity: zeros for integers; for floats a signed zero per argument,
-0.0 or +0.0, chosen so that each term (a product's sign being its factors' parity) is
-0.0 (`_sums_padding`, `_positive`). Dimensions are
linked through those ops (union find), so every array the padded dimension reaches is
padded alike. Anything else touching it (another reduction, a slice, a reshape, a halo, a
call) leaves the program to the caller, which runs it unsharded (`dhir.toolchain.shards`).
"""

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.rewriter import Rewriter

from dhir.analysis.shard_layout import Padding, mlir_layout
from dhir.dialects import arith, func, linalg, shard, tensor
from dhir.ir.diagnostics import Diagnostic, error_at, loc_of, warn
from dhir.ir.walk import find_ops
from dhir.transforms.shard_collectives import grid_shapes


@dataclass
class Padded:
    """The entry padded, per argument (result) index the padding of each dimension that
    has one, and the float arguments padded with +0.0 rather than -0.0."""

    module: ModuleOp
    arguments: dict[int, dict[int, Padding]] = field(default_factory=dict[int, dict[int, Padding]])
    results: dict[int, dict[int, Padding]] = field(default_factory=dict[int, dict[int, Padding]])
    positive: set[int] = field(default_factory=set[int])


_Dim = tuple[SSAValue, int] | tuple[Operation, int]  # a tensor's dimension; an op's loop
_Sign = tuple[int, int]  # a mask of entry arguments and the parity of their signs


class _Links:
    """Union-find over dimensions and loops, with the classes that must not be padded."""

    def __init__(self) -> None:
        self.parent: dict[_Dim, _Dim] = {}
        self.unsafe: set[_Dim] = set()
        self.signs: list[tuple[_Dim, _Sign]] = []

    def find(self, node: _Dim) -> _Dim:
        self.parent.setdefault(node, node)
        while (up := self.parent[node]) != node:
            self.parent[node] = self.parent[up]
            node = up
        return node

    def link(self, a: _Dim, b: _Dim) -> None:
        self.parent[self.find(a)] = self.find(b)

    def forbid(self, node: _Dim) -> None:
        self.unsafe.add(node)

    def constrain(self, node: _Dim, sign: _Sign | None) -> None:
        """`node` is summed over on the condition `sign` (see _sums_padding), or
        forbidden where there is none."""
        if sign is None:
            self.forbid(node)
        else:
            self.signs.append((node, sign))

    def safe(self, node: _Dim) -> bool:
        root = self.find(node)
        return not any(self.find(u) == root for u in self.unsafe)


def pad(module: ModuleOp, entry: str) -> Padded | str:
    """`module` with its uneven shards padded (see the module docstring), or why not."""
    module = module.clone()
    function = next(f for f in find_ops(module, func.FuncOp) if f.sym_name.data == entry)
    links = _Links()
    for op in function.walk():
        _link(op, links)
        if op is not function:  # a loop's tensors in its body: nothing ties them to its own
            _forbid([a for r in op.regions for b in r.blocks for a in b.args], links)
    wanted = _wanted(function, links, grid_shapes(module))
    if isinstance(wanted, str):
        return wanted
    positive = _positive([sign for node, sign in links.signs if links.find(node) in wanted])
    if positive is None:
        return (
            "its float sums over uneven dimensions multiply arguments so that no padding "
            "with signed zeros leaves every sum as it is"
        )
    padded = Padded(module, positive=positive)
    for argument in function.body.blocks[0].args:
        if dims := _paddings(argument, links, wanted):
            padded.arguments[argument.index] = dims
    returned = function.body.blocks[-1].last_op
    assert isinstance(returned, func.ReturnOp)
    for index, value in enumerate(returned.operands):
        if dims := _paddings(value, links, wanted):
            padded.results[index] = dims
    _rewrite(function, links, wanted)
    return padded


def _dims(value: SSAValue) -> range:
    return range(len(value.type.get_shape())) if isinstance(value.type, TensorType) else range(0)


def _forbid(values: Sequence[SSAValue], links: _Links) -> None:
    for value in values:
        for d in _dims(value):
            links.forbid((value, d))


def _link(op: Operation, links: _Links) -> None:
    """The dimensions `op` ties together; those it may mix padding into, forbidden."""
    if isinstance(op, shard.ShardOp):
        for d in _dims(op.src):
            links.link((op.src, d), (op.result, d))
    elif isinstance(op, linalg.LinalgStructuredOperation):
        _link_structured(op, links)
    elif not isinstance(op, tensor.EmptyOp | func.ReturnOp | shard.ShardingOp):
        _forbid([*op.operands, *op.results], links)


# Integer divisions trap on a zero divisor (SIGFPE), which padding with zeros would be.
_TRAPS = (
    arith.DivSIOp,
    arith.DivUIOp,
    arith.RemSIOp,
    arith.RemUIOp,
    arith.CeilDivSIOp,
    arith.CeilDivUIOp,
    arith.FloorDivSIOp,
)


def _safe_on_padding(body: Region) -> bool:
    """Whether a body computes a value from any operands without trapping or touching
    memory: arith and math ops but integer divisions. Padding flows only into such
    bodies; their values at the padding are dropped."""
    for op in body.walk():
        if isinstance(op, linalg.YieldOp | linalg.IndexOp):
            continue
        if isinstance(op, _TRAPS) or op.dialect_name() not in ("arith", "math"):
            return False
    return True


def _link_structured(op: linalg.LinalgStructuredOperation, links: _Links) -> None:
    if not _safe_on_padding(op.regions[0]):
        _forbid([*op.operands, *op.results], links)
        return
    try:
        maps = [m.data for m in op.get_indexing_maps()]
        kinds = [k.data.value for k in op.get_iterator_types()]
    except Exception:  # an op whose maps xDSL cannot give: nothing of it is padded
        maps, kinds = [], []
    inputs, operands = list(op.inputs), list(op.operands)
    if len(maps) != len(operands):
        _forbid([*operands, *op.results], links)
        return
    for loop, kind in enumerate(kinds):
        indexed = [
            any(isinstance(e, AffineDimExpr) and e.position == loop for e in m.results)
            for m in maps[: len(inputs)]
        ]
        if kind == "parallel":
            continue
        sign = _sums_padding(op.regions[0], inputs) if all(indexed) else None
        links.constrain((op, loop), sign)
    for index in find_ops(op, linalg.IndexOp):
        links.forbid((op, index.dim.value.data))
    for value, affine in zip(operands, maps):
        for d, expr in zip(_dims(value), affine.results):
            if isinstance(expr, AffineDimExpr):
                links.link((value, d), (op, expr.position))
            else:
                links.forbid((value, d))
                for loop in expr.used_dims():
                    links.forbid((op, loop))
    for result, output in zip(op.results, op.outputs):
        for d in _dims(result):
            links.link((result, d), (output, d))


def _sums_padding(body: Region, inputs: Sequence[SSAValue]) -> _Sign | None:
    """Whether a reduction whose `body` combines `inputs` is one that the padding leaves
    as it is, and on what condition: each input is an entry argument (through
    annotations), padded with zeros (integers) or a signed zero (floats), and the body
    yields the accumulator plus (or minus) a term that the padding makes the sum's
    identity. For integers (plus, or, xor, minus) the term is zero where every input is:
    an input, a product of such terms, an extension of one. For floats, x + -0.0 and
    x - +0.0 are x for every x, -0.0 included, so the term must be -0.0 (+0.0): an input,
    an extension or a negation of one, or a product, whose sign is the parity of its
    factors'. The condition: the arguments of `mask` hold -0.0 in an odd number iff
    `parity` (always true for integers, mask 0 and parity 0); None where none holds."""
    arguments = [_entry_argument(value) for value in inputs]
    if not body.blocks or None in arguments:
        return None
    block = body.blocks[0]
    yielded = block.last_op
    if yielded is None or len(yielded.operands) != 1 or len(block.args) != len(inputs) + 1:
        return None
    combined, accumulator = yielded.operands[0].owner, block.args[-1]
    if not isinstance(
        combined,
        arith.AddiOp | arith.OrIOp | arith.XOrIOp | arith.AddfOp | arith.SubiOp | arith.SubfOp,
    ):
        return None
    lhs, rhs = combined.operands
    term = rhs if lhs is accumulator else None
    if rhs is accumulator and not isinstance(combined, arith.SubiOp | arith.SubfOp):
        term = lhs
    if term is None:
        return None
    leaves: dict[SSAValue, int] = {a: 1 << cast(int, i) for a, i in zip(block.args, arguments)}
    if not isinstance(combined, arith.AddfOp | arith.SubfOp):
        return (0, 0) if _zero_at_padding(term, leaves) else None
    sign = _float_sign(term, leaves)
    if sign is None:
        return None
    mask, parity = sign[0], sign[1] ^ isinstance(combined, arith.AddfOp)
    return None if not mask and parity else (mask, parity)


def _zero_at_padding(value: SSAValue, leaves: dict[SSAValue, int]) -> bool:
    """Whether the integer `value` is zero where every value of `leaves` is."""
    if value in leaves:
        return True
    op = value.owner
    if isinstance(op, arith.MuliOp):
        return all(_zero_at_padding(o, leaves) for o in op.operands)
    if isinstance(op, arith.ExtSIOp | arith.ExtUIOp):
        return _zero_at_padding(op.operands[0], leaves)
    return False


def _float_sign(value: SSAValue, leaves: dict[SSAValue, int]) -> _Sign | None:
    """Where each value of `leaves` is a signed zero, `value` is one too, negative iff
    the returned mask of them holds an odd number of -0.0 xor the returned parity; None
    where `value` is not a signed zero."""
    if value in leaves:
        return leaves[value], 0
    op = value.owner
    if isinstance(op, arith.ExtFOp | arith.NegfOp):
        inner = _float_sign(op.operands[0], leaves)
        return None if inner is None else (inner[0], inner[1] ^ isinstance(op, arith.NegfOp))
    if isinstance(op, arith.MulfOp):
        a, b = (_float_sign(o, leaves) for o in op.operands)
        return None if a is None or b is None else (a[0] ^ b[0], a[1] ^ b[1])
    return None


def _entry_argument(value: SSAValue) -> int | None:
    """The index of the entry argument `value` is, through annotations."""
    while isinstance(value.owner, shard.ShardOp):
        value = value.owner.src
    block = value.block if isinstance(value, BlockArgument) else None
    if block is None or not isinstance(block.parent_op(), func.FuncOp):
        return None
    assert isinstance(value, BlockArgument)
    return value.index


def _positive(signs: Sequence[_Sign]) -> set[int] | None:
    """The entry arguments to pad with +0.0 rather than -0.0 so that every condition of
    `signs` holds (see _sums_padding), or None where none does: Gaussian elimination
    over GF(2), each argument a bit, those left free padded with -0.0."""
    rows: dict[int, _Sign] = {}  # by its leading bit
    for mask, parity in signs:
        for lead in sorted(rows, reverse=True):
            if mask >> lead & 1:
                mask, parity = mask ^ rows[lead][0], parity ^ rows[lead][1]
        if mask:
            rows[mask.bit_length() - 1] = (mask, parity)
        elif parity:
            return None
    negative: dict[int, int] = {}
    for lead in sorted(rows):
        mask, parity = rows[lead]
        for bit in range(lead):
            if mask >> bit & 1:
                parity ^= negative.get(bit, 1)
        negative[lead] = parity
    return {bit for bit, sign in negative.items() if not sign}


@dataclass(frozen=True)
class _Split:
    """A dimension `op` splits over `devices`, each holding `counts` of it as named."""

    op: shard.ShardOp
    dim: int
    devices: int
    counts: tuple[int, ...]


def _wanted(
    function: func.FuncOp, links: _Links, grids: dict[str, tuple[int, ...]]
) -> dict[_Dim, Padding] | str:
    """Each padded class (by its root) and its padding, from the uneven shardings; or
    why the program cannot be padded."""
    splits: dict[_Dim, list[_Split]] = {}
    uneven: list[_Dim] = []
    for op in find_ops(function, shard.ShardOp):
        made = op.sharding.owner
        if isinstance(made, shard.ShardingOp) and (
            made.dynamic_sharded_dims_offsets or made.dynamic_halo_sizes
        ):
            return "a sharding gives its offsets or halos as values"
        for d, devices, counts in _splits(op, grids):
            root = links.find((op.src, d))
            size = op.src.type.get_shape()[d]  # pyright: ignore[reportAttributeAccessIssue]
            named = counts or (size // devices,) * devices
            splits.setdefault(root, []).append(_Split(op, d, devices, named))
            if counts is None:
                continue
            if not links.safe((op.src, d)):
                return (
                    f"dimension {d} of {op.src.type} is split unevenly and an op mixes its "
                    "elements (a reduction over it, a slice, a shift, an integer division or an "
                    "op dhir does not know), so dhir cannot pad its shards"
                )
            uneven.append(root)
    wanted: dict[_Dim, Padding] = {}
    for root in dict.fromkeys(uneven):  # each class once, in program order
        padding = _padding(splits[root])
        if isinstance(padding, str):
            return padding
        wanted[root] = padding
    for op in find_ops(function, shard.ShardOp):
        made = op.sharding.owner
        halos = isinstance(made, shard.ShardingOp) and made.static_halo_sizes.get_values()
        if halos and any(links.find((op.src, d)) in wanted for d in _dims(op.src)):
            return f"{op.src.type} has halos and a dimension split unevenly"
    return wanted


def _padding(splits: Sequence[_Split]) -> Padding | str:
    """The padding of a dimension split as `splits` say: the layout of the split over
    the most devices; each other split then holds the real elements of its even blocks of
    the padded size, with a warning where those are not the ones its sharding names."""
    finest = max(splits, key=lambda s: s.devices)
    padding = Padding(finest.counts)
    for split in splits:
        what = f"dimension {split.dim} of {split.op.src.type}"
        if padding.size % split.devices:
            return (
                f"{what} is split over {finest.devices} and over {split.devices} devices, "
                f"and no padding divides over both"
            )
        held = padding.held(split.devices)
        if held != split.counts:
            warn(
                Diagnostic(
                    f"dhir pads {what} for its split over {finest.devices} devices, so "
                    f"split over {split.devices} its devices hold {list(held)} elements of it "
                    f"where the sharding names {list(split.counts)}; the results are the same",
                    loc_of(split.op),
                    "warning",
                )
            )
    return padding


def _splits(
    op: shard.ShardOp, grids: dict[str, tuple[int, ...]]
) -> Iterator[tuple[int, int, tuple[int, ...] | None]]:
    """Per dimension `op` splits: the dimension, its devices, and each device's share
    where they are uneven (None where the devices divide it evenly)."""
    made = op.sharding.owner
    if not isinstance(made, shard.ShardingOp) or not isinstance(op.src.type, TensorType):
        return
    grid = grids.get(made.grid.root_reference.data, ())
    shape = op.src.type.get_shape()
    offsets = list(made.static_sharded_dims_offsets.get_values())
    for d, axes in enumerate(a.get_values() for a in made.split_axes.axes.data):
        if not axes or d >= len(shape):
            continue
        devices = math.prod(grid[a] for a in axes if a < len(grid))
        if offsets:
            ends, offsets = offsets[: devices + 1], offsets[devices + 1 :]
            yield d, devices, _given(made, ends, shape[d], devices)
        elif shape[d] % devices:
            yield d, devices, mlir_layout(shape[d], devices)
        else:
            yield d, devices, None


def _given(made: shard.ShardingOp, ends: Sequence[int], size: int, devices: int) -> tuple[int, ...]:
    if (
        len(ends) != devices + 1
        or ends[0] != 0
        or ends[-1] != size
        or any(b < a for a, b in zip(ends, ends[1:]))
    ):
        raise error_at(
            made,
            f"sharded_dims_offsets must give each split dimension {devices + 1} offsets "
            f"from 0 to its size ({size}), none smaller than the one before",
        )
    return tuple(b - a for a, b in zip(ends, ends[1:]))


def _paddings(value: SSAValue, links: _Links, wanted: dict[_Dim, Padding]) -> dict[int, Padding]:
    return {d: p for d in _dims(value) if (p := wanted.get(links.find((value, d)))) is not None}


def _rewrite(function: func.FuncOp, links: _Links, wanted: dict[_Dim, Padding]) -> None:
    """Every tensor of a padded class takes the padded size; the shardings lose their
    offsets (the padded shards are even)."""
    values: list[SSAValue] = [*function.body.blocks[0].args]
    values += [r for op in function.walk() for r in op.results]
    for value in values:
        paddings = _paddings(value, links, wanted)
        if not paddings:
            continue
        assert isinstance(value.type, TensorType)
        shape = [
            paddings[d].size if d in paddings else n for d, n in enumerate(value.type.get_shape())
        ]
        Rewriter.replace_value_with_new_type(value, TensorType(value.type.element_type, shape))
    for made in find_ops(function, shard.ShardingOp):
        if made.static_sharded_dims_offsets.get_values():
            made.properties["static_sharded_dims_offsets"] = DenseArrayBase.from_list(i64, [])
    function.update_function_type()


def padded(value: SSAValue, dims: dict[int, Padding], negative: bool = True) -> list[Operation]:
    """Ops that make the whole `value` padded along `dims`, the last one's result the
    padded tensor: each block's real elements moved to its start, the padding zeros, for
    floats -0.0 (`negative`) or +0.0 (see _sums_padding)."""
    ops: list[Operation] = []
    for d, padding in sorted(dims.items()):
        ops += _moved(value, d, padding.size, padding.blocks(), zero=-0.0 if negative else 0.0)
        value = ops[-1].results[0]
    return ops


def unpadded(value: SSAValue, dims: dict[int, Padding]) -> list[Operation]:
    """Ops that take the real elements of the padded `value` (see `padded`)."""
    ops: list[Operation] = []
    for d, padding in sorted(dims.items()):
        blocks = [(padded, real, n) for real, padded, n in padding.blocks()]
        ops += _moved(value, d, sum(padding.counts), blocks)
        value = ops[-1].results[0]
    return ops


def _moved(
    value: SSAValue,
    dim: int,
    size: int,
    blocks: Sequence[tuple[int, int, int]],
    zero: float | None = None,
) -> list[Operation]:
    """A new tensor of `size` along `dim` (filled with `zero`, or `int(zero)` for
    integers, where given), holding each block (from, to, length) of `value` along
    `dim`."""
    assert isinstance(value.type, TensorType)
    shape = list(value.type.get_shape())
    element = value.type.element_type
    made = tensor.EmptyOp([], TensorType(element, [*shape[:dim], size, *shape[dim + 1 :]]))
    ops: list[Operation] = [made]
    into: SSAValue = made.tensor
    if zero is not None:
        constant = arith.ConstantOp(
            FloatAttr(zero, element) if isinstance(element, AnyFloat) else IntegerAttr(0, element)
        )
        filled = linalg.FillOp([constant.result], [into], [made.tensor.type])
        ops += [constant, filled]
        into = filled.results[0]
    for source, target, length in blocks:
        if not length:
            continue
        sizes = [*shape[:dim], length, *shape[dim + 1 :]]
        starts = [0] * len(shape)
        taken = tensor.ExtractSliceOp.from_static_parameters(value, _at(starts, dim, source), sizes)
        put = tensor.InsertSliceOp.from_static_parameters(
            taken, into, _at(starts, dim, target), sizes
        )
        ops += [taken, put]
        into = put.result
    return ops


def _at(starts: list[int], dim: int, at: int) -> list[int]:
    return [*starts[:dim], at, *starts[dim + 1 :]]
