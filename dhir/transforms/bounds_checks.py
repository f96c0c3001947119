"""`dhir-bounds-checks`: each load, store and atomic update of host code whose subscripts
dhir does not prove in bounds (dhir.analysis.proven_bounds) checks them as it runs, and
stops the rank at its op when one is out of its memref, as the interpreter does.

Without it, native code ran such an access unchecked unless the user asked for
`--runtime-checks`: `A[idx[i]]` with an index past A's end read other memory, or wrote
over it, and the run exited 0. The native backend runs this pass by default (the
runtime-checks mode `undecided`); `--runtime-checks` (all) checks every access through
MLIR's generate-runtime-verification instead, and `--runtime-checks=none` checks none.
Accesses proven in bounds (every polybench kernel's) get no check and cost nothing.

Per subscript not proven, `index < size` unsigned (so a negative index fails too) before
the access; where it fails, `dhir_rt_out_of_bounds(dim, index, size)` writes the numbers
(to standard error and the rank's error file, which dhir.toolchain.failure reads), then a
`cf.assert` stops the rank with the message MLIR's own checks give, at the op's location:
the run fails with `file:line:col: error: a runtime check failed: out-of-bounds access:
index 9 of dimension 0, whose size is 8`. The check runs after the OpenMP passes: its call
writes only its line, and must not make a parallel loop sequential. `affine.load` and
`affine.store` that need a check become the `memref.load` and `store` --lower-affine
would make. A `memref.dim` whose index is not a constant below its memref's rank (any
of an unranked memref, whose rank is read as it runs) checks that it is (MLIR 22 takes a
larger one as undefined: native code returned a number, exit status 0, where the
interpreter stopped). Device code is left alone: it cannot print.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, ModuleOp, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.arg_origins import ArgOrigins, access_note
from dhir.analysis.proven_bounds import InBounds, shared_decisions
from dhir.dialects import affine, memref
from dhir.dialects.access import memref_position
from dhir.dialects.gpu import DEVICE_CODE
from dhir.ir.walk import find_outside
from dhir.transforms.affine_scope import lower_access
from dhir.transforms.building import declare, int_constant
from dhir.transforms.pass_options import named_entry
from dhir.transforms.vector_checks import OUT_OF_BOUNDS as OUT_OF_BOUNDS_WORDS
from dhir.transforms.vector_checks import CheckBuilder, report_unless, run_unless

OUT_OF_BOUNDS = "dhir_rt_out_of_bounds"

_SCALAR = (memref.LoadOp, memref.StoreOp, memref.AtomicRMWOp, memref.GenericAtomicRMWOp)
_AFFINE = (affine.LoadOp, affine.StoreOp)


@dataclass(frozen=True)
class BoundsChecksPass(ModulePass):
    """Host loads and stores whose subscripts are not proven in bounds check them as they run.

    A failure names the argument of `entry` that the memref's size is, where the IR says
    which."""

    name = "dhir-bounds-checks"
    needs: ClassVar[tuple[type[Operation], ...]] = (*_SCALAR, *_AFFINE, memref.DimOp)

    entry: str | None = None  # None: `main`, where the module has it

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        proof = InBounds(op)
        # Decided first, on the module as it is: the checks add ops the lifter would read.
        # A nest that generated tasks repeat is proven once.
        accesses = find_outside(op, (*_SCALAR, *_AFFINE), DEVICE_CODE)
        found = shared_decisions(accesses, lambda access: undecided_dims(access, proof))
        pending = [(access, dims) for access, dims in zip(accesses, found) if dims]
        dimensions = [
            dim
            for dim in find_outside(op, memref.DimOp, DEVICE_CODE)
            if not _dimension_in_range(dim)
        ]
        for dim in dimensions:
            _check_dimension(dim)
        origins = ArgOrigins(op, named_entry(self.name, op, self.entry))
        for access, dims in pending:
            if isinstance(access, _AFFINE):
                access = lower_access(access)
            _check(access, dims, _named(origins, access, dims))
        if pending:
            declare(op, OUT_OF_BOUNDS, [i64, i64, i64], [], owner="dhir's runtime")


def undecided_dims(op: Operation, proof: InBounds) -> list[int]:
    """The dimensions along which `op`, a scalar access, is not proven in bounds."""
    position = memref_position(op)
    if position is not None:  # a memref.load or store: asked first, without IRDL accessors
        operands = op.operands
        memory: SSAValue = operands[position]
        indices: list[SSAValue] = list(operands[position + 1 :])
    elif isinstance(op, _AFFINE):
        lifted = proof.lifter.map_each(op.map.data, list(op.indices))
        return [d for d, index in enumerate(lifted) if not proof.proven(op.memref, d, index)]
    else:
        indices = list(op.indices)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType]
        memory = op.memref  # pyright: ignore[reportAttributeAccessIssue]
    assert isinstance(memory, SSAValue)
    extents = memory.type.get_shape() if isinstance(memory.type, MemRefType) else None
    undecided: list[int] = []
    for d, index in enumerate(indices):
        # A literal subscript of a dimension of known size (generated tasks' accesses,
        # thousands of them) is decided as the proof would decide it, without lifting.
        number = int_constant(index) if extents is not None and d < len(extents) else None
        if number is not None and extents is not None and extents[d] != DYNAMIC_INDEX:
            inside = 0 <= number < extents[d]
        else:
            inside = proof.proven(memory, d, proof.lifter.value(index))
        if not inside:
            undecided.append(d)
    return undecided


def _dimension_in_range(op: memref.DimOp) -> bool:
    """Whether `op` surely asks for a dimension its memref has: a constant below its rank
    (an unranked memref's rank is known only as it runs: even dimension 0 is checked, as a
    rank-0 memref lacks it)."""
    kind = op.source.type
    if not isinstance(kind, MemRefType):
        return False
    number = int_constant(op.index)
    return number is not None and 0 <= number < kind.get_num_dims()


def _check_dimension(op: memref.DimOp) -> None:
    kind = op.source.type
    # Named as the user wrote it: a tensor.dim is bufferized to a memref.dim.
    name = memref.dim_written(op)
    what = "memref" if name == op.name else "tensor"
    if isinstance(kind, MemRefType):
        rank = kind.get_num_dims()
        check = CheckBuilder(op, f"'{name}' asks for a dimension a rank-{rank} {what} lacks")
        check.assert_(check.cmp(op.index, check.index(rank), "ult"))
        return
    check = CheckBuilder(op, f"'{name}' asks for a dimension past its unranked {what}'s rank")
    rank = check.add(memref.RankOp(op.source))
    check.assert_(check.cmp(op.index, rank, "ult"))


def _named(origins: ArgOrigins, op: Operation, dims: list[int]) -> str:
    """The arguments the sizes of `op`'s memref along `dims` and its indices there are,
    as the end of a failure's message."""
    memory: SSAValue = op.memref  # pyright: ignore[reportAttributeAccessIssue]
    indices: list[SSAValue] = list(op.indices)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType]
    return access_note(origins, memory, dims, indices)


def _check(op: Operation, dims: list[int], named: str) -> None:
    memory: SSAValue = op.memref  # pyright: ignore[reportAttributeAccessIssue]
    indices: list[SSAValue] = list(op.indices)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType]
    check = CheckBuilder(op, OUT_OF_BOUNDS_WORDS + named)
    found = [(d, indices[d], check.size(memory, d)) for d in dims]
    inside = [check.cmp(index, size, "ult") for _, index, size in found]
    ok = check.all(inside)
    if len(found) == 1:
        ((d, index, size),) = found
        report_unless(check.block, ok, OUT_OF_BOUNDS, [d, index, size])
    else:
        # Which dimensions failed, each reported, where any did.
        report = Block()
        for (d, index, size), fits in zip(found, inside, strict=True):
            report_unless(report, fits, OUT_OF_BOUNDS, [d, index, size])
        run_unless(check.block, ok, report)
    check.assert_(ok)
