"""`dhir-check-mpi`: refuse, before the build, the mpi ops MLIR 22 would lower wrongly or
not at all, each at its op.

MLIR 22's convert-to-llvm lowers init, finalize, comm_world, comm_rank, comm_split, send,
recv and allreduce, and leaves the others in place without a word (mlir-translate fails on
them later). It needs the module's `dlti.map` to say which MPI, whose ABI it lowers for.
It sends `sizes[0]` elements from a buffer's base pointer, as a 32-bit count, with the MPI
datatypes of i8/i16/i32/i64/f32/f64 only. dhir's generated main initialises and finalises
MPI around the entry. OpenMPI's communicator is loaded as i32 by its comm_split (a crash).
The build checks what mlir-opt gives back as text too (dhir/toolchain/build.py), a safety
net for ops it left.
"""

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Float32Type,
    Float64Type,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    UnrankedMemRefType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.dialects import mpi
from dhir.dialects.dlti import DLTIEntryMap
from dhir.dialects.mpi import IMPLEMENTATION_KEY, IMPLEMENTATIONS
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of
from dhir.ir.walk import find_ops

# What MLIR 22's convert-to-llvm lowers; anything else it leaves in place without a word.
LOWERED: tuple[type[Operation], ...] = (
    mpi.InitOp,
    mpi.FinalizeOp,
    mpi.CommWorldOp,
    mpi.CommRankOp,
    mpi.CommSplitOp,
    mpi.SendOp,
    mpi.RecvOp,
    mpi.AllReduceOp,
)
RUNTIME_REPLACEMENTS: dict[type[Operation], str] = {
    mpi.CommSizeOp: "dhir_rt_comm_size",
    mpi.BarrierOp: "dhir_rt_barrier",
}
# The ops that dhir's generated main runs around the entry.
_OWNED = (mpi.InitOp, mpi.FinalizeOp)
# The ops whose memref operands MPI sends or receives.
_BUFFER_OPS = (mpi.SendOp, mpi.RecvOp, mpi.ISendOp, mpi.IRecvOp, mpi.AllReduceOp)
_MPI_OPS = tuple(mpi.MPI.operations)


@dataclass(frozen=True)
class CheckMpiPass(ModulePass):
    """Refuse, each at its op, the mpi ops MLIR 22 lowers wrongly or not at all.

    `mpi`: the MPI the build is for (mpich or openmpi). The module is not changed."""

    name = "dhir-check-mpi"
    needs: ClassVar[tuple[type[Operation], ...]] = _MPI_OPS

    mpi: str = "mpich"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mpi not in IMPLEMENTATIONS:
            raise PassFailedException(
                f"dhir-check-mpi: mpi must be mpich or openmpi, got {self.mpi}"
            )
        check_mpi_use(op, self.mpi)


def check_mpi_use(module: ModuleOp, mpi_name: str) -> None:
    """Raise a DhirError with every problem of `module`'s mpi ops for a build with
    `mpi_name` (mpich or openmpi)."""
    problems = mpi_problems(module, mpi_name)
    if problems:
        raise DhirError(problems)


def mpi_problems(module: ModuleOp, mpi_name: str) -> list[Diagnostic]:
    ops = find_ops(module, _MPI_OPS)
    if not ops:
        return []
    dlti = IMPLEMENTATIONS[mpi_name]
    problems = _implementation_problems(ops, mpi_name, dlti)
    problems += _unlowered(ops)
    owned = [op for op in ops if isinstance(op, _OWNED)]
    if owned:
        problems.append(
            _at(
                owned[0],
                f"the module calls {_names(owned)}, but dhir's generated main initialises and "
                "finalises MPI around the entry; remove these ops",
            )
        )
    split = [op for op in ops if isinstance(op, mpi.CommSplitOp)]
    if mpi_name == "openmpi" and split:
        problems.append(
            _at(
                split[0],
                "mpi.comm_split crashes with OpenMPI in MLIR 22 (it loads the communicator "
                'as i32); build with mpi="mpich"',
            )
        )
    for op in ops:
        problems += _buffer_problems(op)
    return problems


def _implementation_problems(ops: list[Operation], mpi_name: str, dlti: str) -> list[Diagnostic]:
    """The MPI each op is lowered for (the nearest `dlti.map` that names one, as MLIR's
    DLTI query finds it) must be the one the build uses."""
    missing: list[Operation] = []
    other: dict[str, Operation] = {}
    for op in ops:
        declared = declared_mpi(op)
        if declared is None:
            missing.append(op)
        elif declared != dlti:
            other.setdefault(declared, op)
    problems: list[Diagnostic] = []
    if missing:
        problems.append(
            _at(
                missing[0],
                f"the module uses mpi ops but declares no MPI; add `dlti.map = #dlti.map<"
                f'"{IMPLEMENTATION_KEY}" = "{dlti}">` to its attributes',
            )
        )
    for declared, op in other.items():
        problems.append(
            _at(
                op,
                f'the module is lowered for {IMPLEMENTATION_KEY} "{declared}" but is being '
                f'built with {mpi_name} ("{dlti}"); their ABIs differ, so lower it again '
                "for this MPI",
            )
        )
    return problems


def declared_mpi(op: Operation) -> str | None:
    """The MPI implementation the nearest enclosing DLTI map names for `op`."""
    key = StringAttr(IMPLEMENTATION_KEY)
    current: Operation | None = op
    while current is not None:
        for attr in current.attributes.values():
            if isinstance(attr, DLTIEntryMap):
                for entry in attr.entries:
                    if entry.key == key and isinstance(entry.value, StringAttr):
                        return entry.value.data
        current = current.parent_op()
    return None


def _unlowered(ops: list[Operation]) -> list[Diagnostic]:
    left = [op for op in ops if not isinstance(op, LOWERED)]
    if not left:
        return []
    kinds = {type(op): op for op in left}
    instead = [
        f"{kind.name} -> {RUNTIME_REPLACEMENTS[kind]}()"
        for kind in sorted(kinds, key=lambda k: k.name)
        if kind in RUNTIME_REPLACEMENTS
    ]
    return [
        _at(
            left[0],
            f"MLIR 22 cannot lower {_names(left)} (it leaves them in place); call dhir's "
            "runtime instead" + (f": {', '.join(instead)}" if instead else ""),
        )
    ]


def _buffer_problems(op: Operation) -> Iterator[Diagnostic]:
    if not isinstance(op, _BUFFER_OPS):
        return
    for buffer in _buffers(op):
        type_ = buffer.type
        if not _contiguous_1d(type_):
            yield _at(
                op,
                f"{op.name} on {type_}: MLIR 22 transfers only sizes[0] contiguous elements, "
                "so buffers must be contiguous 1-D memrefs (collapse them with "
                "memref.collapse_shape first)",
            )
        why = _element_problem(type_)
        if why is not None:
            yield _at(
                op,
                f"{op.name} on {type_}: {why}; send the buffer as bytes with dhir's runtime "
                "instead: dhir_rt_send(ptr, bytes, dest, tag) and dhir_rt_recv(ptr, bytes, "
                "source, tag)",
            )


def _buffers(op: Operation) -> list[SSAValue]:
    return [v for v in op.operands if isinstance(v.type, MemRefType | UnrankedMemRefType)]


def _contiguous_1d(type_: Attribute) -> bool:
    if not isinstance(type_, MemRefType) or len(type_.get_shape()) != 1:
        return False
    layout = type_.layout
    return isinstance(layout, NoneAttr) or (
        isinstance(layout, StridedLayoutAttr) and layout.get_strides() == (1,)
    )


def _element_problem(type_: Attribute) -> str | None:
    """MLIR 22 passes the element count as a 32-bit int and knows MPI datatypes for a few
    element types only; dhir's runtime sends any buffer as bytes."""
    if not isinstance(type_, MemRefType):
        return None  # unranked: the contiguity check reports it
    element = type_.get_element_type()
    if not _has_mpi_datatype(element):
        return f"MLIR 22 has no MPI datatype for {element}"
    count = math.prod(size for size in type_.get_shape() if size != DYNAMIC_INDEX)
    if count >= 2**31:
        return f"its {count} elements overflow MLIR 22's 32-bit count"
    return None


def _has_mpi_datatype(element: Attribute) -> bool:
    if isinstance(element, IntegerType):
        return element.width.data in (8, 16, 32, 64)
    return isinstance(element, Float32Type | Float64Type)


def _names(ops: Sequence[Operation]) -> str:
    return ", ".join(sorted({op.name for op in ops}))


def _at(op: Operation, message: str) -> Diagnostic:
    return Diagnostic(message, loc_of(op))
