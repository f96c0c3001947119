"""The `mpi` dialect as defined by upstream MLIR 22.1.8.

xDSL ships an older `mpi` dialect of its own (`mpi.comm.rank`, no `!mpi.comm`)
that mlir-opt rejects. This one follows upstream's op names, operands, results,
properties, types and custom syntax, so IR can travel between dhir and
`mlir-opt-22` in either direction and in either form (custom or generic).

Upstream stores the reduction kind of `mpi.allreduce` as a plain `i32`
property (`<{op = 3 : i32}>` in generic form, `MPI_SUM` in custom form), while
the error class of `mpi.retval_check` is a dialect attribute
(`#mpi.errclass<MPI_SUCCESS>`, printed `<MPI_SUCCESS>` inside the op).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I32, IntegerAttr, MemRefType, i1, i32
from xdsl.dialects.mpi import RequestType, StatusType  # as upstream's: no shadow needed
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum  # xDSL's enum helpers are typed against it

from dhir.choices import MPI_IMPLEMENTATIONS
from dhir.dialects.format import AngleBracketEnum

# What op constructors accept as an operand: a value, or a one-result op.
Value = SSAValue | Operation

# ---------------------------------------------------------------------------
# Enums. Upstream numbers the cases in declaration order, starting at 0; the
# integer is what `mpi.allreduce` stores and what lowerings compare against.
# ---------------------------------------------------------------------------


class ReductionKind(StrEnum):
    """MPI's predefined reduction operations (`MPI_ReductionOpEnum`)."""

    OP_NULL = "MPI_OP_NULL"
    MAX = "MPI_MAX"
    MIN = "MPI_MIN"
    SUM = "MPI_SUM"
    PROD = "MPI_PROD"
    LAND = "MPI_LAND"
    BAND = "MPI_BAND"
    LOR = "MPI_LOR"
    BOR = "MPI_BOR"
    LXOR = "MPI_LXOR"
    BXOR = "MPI_BXOR"
    MINLOC = "MPI_MINLOC"
    MAXLOC = "MPI_MAXLOC"
    REPLACE = "MPI_REPLACE"

    @property
    def code(self) -> int:
        return _REDUCTION_CODES[self]

    @staticmethod
    def from_code(code: int) -> ReductionKind:
        if not 0 <= code < len(_REDUCTIONS):
            raise ValueError(f"no MPI reduction has code {code}")
        return _REDUCTIONS[code]


_REDUCTIONS: tuple[ReductionKind, ...] = tuple(ReductionKind)
_REDUCTION_CODES: dict[ReductionKind, int] = {r: i for i, r in enumerate(_REDUCTIONS)}


class ErrorClass(StrEnum):
    """MPI 4.0 error classes (`MPI_ErrorClassEnum`)."""

    SUCCESS = "MPI_SUCCESS"
    ERR_ACCESS = "MPI_ERR_ACCESS"
    ERR_AMODE = "MPI_ERR_AMODE"
    ERR_ARG = "MPI_ERR_ARG"
    ERR_ASSERT = "MPI_ERR_ASSERT"
    ERR_BAD_FILE = "MPI_ERR_BAD_FILE"
    ERR_BASE = "MPI_ERR_BASE"
    ERR_BUFFER = "MPI_ERR_BUFFER"
    ERR_COMM = "MPI_ERR_COMM"
    ERR_CONVERSION = "MPI_ERR_CONVERSION"
    ERR_COUNT = "MPI_ERR_COUNT"
    ERR_DIMS = "MPI_ERR_DIMS"
    ERR_DISP = "MPI_ERR_DISP"
    ERR_DUP_DATAREP = "MPI_ERR_DUP_DATAREP"
    ERR_ERRHANDLER = "MPI_ERR_ERRHANDLER"
    ERR_FILE = "MPI_ERR_FILE"
    ERR_FILE_EXISTS = "MPI_ERR_FILE_EXISTS"
    ERR_FILE_IN_USE = "MPI_ERR_FILE_IN_USE"
    ERR_GROUP = "MPI_ERR_GROUP"
    ERR_INFO = "MPI_ERR_INFO"
    ERR_INFO_KEY = "MPI_ERR_INFO_KEY"
    ERR_INFO_NOKEY = "MPI_ERR_INFO_NOKEY"
    ERR_INFO_VALUE = "MPI_ERR_INFO_VALUE"
    ERR_IN_STATUS = "MPI_ERR_IN_STATUS"
    ERR_INTERN = "MPI_ERR_INTERN"
    ERR_IO = "MPI_ERR_IO"
    ERR_KEYVAL = "MPI_ERR_KEYVAL"
    ERR_LOCKTYPE = "MPI_ERR_LOCKTYPE"
    ERR_NAME = "MPI_ERR_NAME"
    ERR_NO_MEM = "MPI_ERR_NO_MEM"
    ERR_NO_SPACE = "MPI_ERR_NO_SPACE"
    ERR_NO_SUCH_FILE = "MPI_ERR_NO_SUCH_FILE"
    ERR_NOT_SAME = "MPI_ERR_NOT_SAME"
    ERR_OP = "MPI_ERR_OP"
    ERR_OTHER = "MPI_ERR_OTHER"
    ERR_PENDING = "MPI_ERR_PENDING"
    ERR_PORT = "MPI_ERR_PORT"
    ERR_PROC_ABORTED = "MPI_ERR_PROC_ABORTED"
    ERR_QUOTA = "MPI_ERR_QUOTA"
    ERR_RANK = "MPI_ERR_RANK"
    ERR_READ_ONLY = "MPI_ERR_READ_ONLY"
    ERR_REQUEST = "MPI_ERR_REQUEST"
    ERR_RMA_ATTACH = "MPI_ERR_RMA_ATTACH"
    ERR_RMA_CONFLICT = "MPI_ERR_RMA_CONFLICT"
    ERR_RMA_FLAVOR = "MPI_ERR_RMA_FLAVOR"
    ERR_RMA_RANGE = "MPI_ERR_RMA_RANGE"
    ERR_RMA_SHARED = "MPI_ERR_RMA_SHARED"
    ERR_RMA_SYNC = "MPI_ERR_RMA_SYNC"
    ERR_ROOT = "MPI_ERR_ROOT"
    ERR_SERVICE = "MPI_ERR_SERVICE"
    ERR_SESSION = "MPI_ERR_SESSION"
    ERR_SIZE = "MPI_ERR_SIZE"
    ERR_SPAWN = "MPI_ERR_SPAWN"
    ERR_TAG = "MPI_ERR_TAG"
    ERR_TOPOLOGY = "MPI_ERR_TOPOLOGY"
    ERR_TRUNCATE = "MPI_ERR_TRUNCATE"
    ERR_TYPE = "MPI_ERR_TYPE"
    ERR_UNKNOWN = "MPI_ERR_UNKNOWN"
    ERR_UNSUPPORTED_DATAREP = "MPI_ERR_UNSUPPORTED_DATAREP"
    ERR_UNSUPPORTED_OPERATION = "MPI_ERR_UNSUPPORTED_OPERATION"
    ERR_VALUE_TOO_LARGE = "MPI_ERR_VALUE_TOO_LARGE"
    ERR_WIN = "MPI_ERR_WIN"
    ERR_LASTCODE = "MPI_ERR_LASTCODE"

    @property
    def code(self) -> int:
        return _ERROR_CODES[self]


_ERROR_CODES: dict[ErrorClass, int] = {e: i for i, e in enumerate(ErrorClass)}


# ---------------------------------------------------------------------------
# Types and attributes
# ---------------------------------------------------------------------------


@irdl_attr_definition
class CommType(ParametrizedAttribute, TypeAttribute):
    """`!mpi.comm`: an MPI communicator handle. xDSL 0.74 lacks this type."""

    name = "mpi.comm"


@irdl_attr_definition
class RetvalType(ParametrizedAttribute, TypeAttribute):
    """`!mpi.retval`: the return code of an MPI call. xDSL 0.74 lacks this type."""

    name = "mpi.retval"


@irdl_attr_definition
class ErrorClassAttr(AngleBracketEnum, EnumAttribute[ErrorClass]):
    """`#mpi.errclass<MPI_SUCCESS>`; inside `mpi.retval_check` only `<...>`. xDSL 0.74 lacks
    this attribute."""

    # Upstream's parameter syntax carries the angle brackets, so the stripped
    # form used in the op's custom syntax is `<MPI_SUCCESS>`, not `MPI_SUCCESS`.
    name = "mpi.errclass"


def reduction_attr(kind: ReductionKind | str) -> IntegerAttr[I32]:
    """The `i32` property upstream stores for a reduction kind."""
    return IntegerAttr(ReductionKind(kind).code, i32)


@irdl_custom_directive
class ReductionKeyword(CustomDirective):
    """Prints the `i32` reduction property as its keyword (`MPI_SUM`)."""

    op: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        kind = parser.parse_str_enum(ReductionKind)
        self.op.set(state, reduction_attr(kind))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.op.get(op)
        assert isinstance(attr, IntegerAttr)
        printer.print_string(ReductionKind.from_code(attr.value.data).value)


# ---------------------------------------------------------------------------
# Ops. Every MPI call may return an optional `!mpi.retval`; when present it is
# the first result.
# ---------------------------------------------------------------------------


def _retval_types(with_retval: bool) -> list[Attribute]:
    return [RetvalType()] if with_retval else []


def _name_results(op: IRDLOperation) -> None:
    # Upstream names the results of some ops after their definitions
    # (%rank, %req, ...); do the same for ops built in Python.
    for name, _ in type(op).get_irdl_definition().results:
        value: SSAValue | None = getattr(op, name)
        if value is not None:
            value.name_hint = name


class _NoArgumentOp(IRDLOperation):
    """A call with no arguments: only the optional retval."""

    retval = opt_result_def(RetvalType)

    assembly_format = "attr-dict (`:` type($retval)^)?"

    def __init__(self, with_retval: bool = False) -> None:
        super().__init__(result_types=[_retval_types(with_retval)])


@irdl_op_definition
class InitOp(_NoArgumentOp):
    """`MPI_Init(NULL, NULL)`. xDSL 0.74's op of this name belongs to its older mpi dialect,
    which mlir-opt rejects."""

    name = "mpi.init"


@irdl_op_definition
class FinalizeOp(_NoArgumentOp):
    """`MPI_Finalize()`. xDSL 0.74's op of this name belongs to its older mpi dialect, which
    mlir-opt rejects."""

    name = "mpi.finalize"


@irdl_op_definition
class CommWorldOp(IRDLOperation):
    """`MPI_COMM_WORLD`. xDSL 0.74 lacks this op."""

    name = "mpi.comm_world"

    comm = result_def(CommType)

    traits = traits_def(Pure())

    assembly_format = "attr-dict `:` type(results)"

    def __init__(self) -> None:
        super().__init__(result_types=[CommType()])


class _CommQueryOp(IRDLOperation):
    """A query of a communicator giving an `i32` (the retval and result are declared by
    each op)."""

    comm = operand_def(CommType)

    traits = traits_def(Pure())

    assembly_format = "`(` $comm `)` attr-dict `:` type(results)"

    def __init__(self, comm: Value, with_retval: bool = False) -> None:
        super().__init__(operands=[comm], result_types=[_retval_types(with_retval), i32])
        _name_results(self)


@irdl_op_definition
class CommRankOp(_CommQueryOp):
    """`MPI_Comm_rank(comm, &rank)`. xDSL 0.74 lacks this op."""

    name = "mpi.comm_rank"

    retval = opt_result_def(RetvalType)
    rank = result_def(i32)


@irdl_op_definition
class CommSizeOp(_CommQueryOp):
    """`MPI_Comm_size(comm, &size)`. xDSL 0.74 lacks this op."""

    name = "mpi.comm_size"

    retval = opt_result_def(RetvalType)
    size = result_def(i32)


@irdl_op_definition
class CommSplitOp(IRDLOperation):
    """`MPI_Comm_split(comm, color, key, &newcomm)`. xDSL 0.74 lacks this op."""

    name = "mpi.comm_split"

    comm = operand_def(CommType)
    color = operand_def(i32)
    key = operand_def(i32)

    retval = opt_result_def(RetvalType)
    newcomm = result_def(CommType)

    traits = traits_def(Pure())

    assembly_format = "`(` $comm `,` $color `,` $key `)` attr-dict `:` type(results)"

    def __init__(self, comm: Value, color: Value, key: Value, with_retval: bool = False) -> None:
        super().__init__(
            operands=[comm, color, key],
            result_types=[_retval_types(with_retval), CommType()],
        )
        _name_results(self)


def _p2p_format(peer: str, results: str) -> str:
    return (
        f"`(` $ref `,` $tag `,` ${peer} `,` $comm `)` attr-dict `:` "
        f"type($ref) `,` type($tag) `,` type(${peer}) {results}"
    )


# Upstream's `AnyMemRef` admits ranked memrefs only; `memref<*xf32>` is rejected.


class _PointToPointOp(IRDLOperation):
    """A send or receive of `ref` with a peer rank: built from (buf, tag, peer, comm); the
    nonblocking ones also give a request."""

    GIVES_REQUEST: ClassVar[bool] = False

    def __init__(
        self,
        buf: Value,
        tag: Value,
        peer: Value,
        comm: Value,
        with_retval: bool = False,
    ) -> None:
        request = [RequestType()] if self.GIVES_REQUEST else []
        super().__init__(
            operands=[buf, tag, peer, comm],
            result_types=[_retval_types(with_retval), *request],
        )
        if self.GIVES_REQUEST:
            _name_results(self)


# Each op declares its results; the operands, which follow them in a definition, come from
# these bases.
class _ToPeerOp(_PointToPointOp):
    ref = operand_def(MemRefType)
    tag = operand_def(i32)
    dest = operand_def(i32)
    comm = operand_def(CommType)


class _FromPeerOp(_PointToPointOp):
    ref = operand_def(MemRefType)
    tag = operand_def(i32)
    source = operand_def(i32)
    comm = operand_def(CommType)


@irdl_op_definition
class SendOp(_ToPeerOp):
    """`MPI_Send(buf, count, dtype, dest, tag, comm)`. xDSL 0.74's op of this name belongs to
    its older mpi dialect, which mlir-opt rejects."""

    name = "mpi.send"

    retval = opt_result_def(RetvalType)

    assembly_format = _p2p_format("dest", "(`->` type($retval)^)?")


@irdl_op_definition
class RecvOp(_FromPeerOp):
    """`MPI_Recv(buf, count, dtype, source, tag, comm, MPI_STATUS_IGNORE)`. xDSL 0.74's op of
    this name belongs to its older mpi dialect, which mlir-opt rejects."""

    name = "mpi.recv"

    retval = opt_result_def(RetvalType)

    assembly_format = _p2p_format("source", "(`->` type($retval)^)?")


@irdl_op_definition
class ISendOp(_ToPeerOp):
    """`MPI_Isend(buf, count, dtype, dest, tag, comm, &req)`. xDSL 0.74's op of this name
    belongs to its older mpi dialect, which mlir-opt rejects."""

    name = "mpi.isend"

    retval = opt_result_def(RetvalType)
    req = result_def(RequestType)

    GIVES_REQUEST: ClassVar[bool] = True

    assembly_format = _p2p_format("dest", "`->` type(results)")


@irdl_op_definition
class IRecvOp(_FromPeerOp):
    """`MPI_Irecv(buf, count, dtype, source, tag, comm, &req)`. xDSL 0.74's op of this name
    belongs to its older mpi dialect, which mlir-opt rejects."""

    name = "mpi.irecv"

    retval = opt_result_def(RetvalType)
    req = result_def(RequestType)

    GIVES_REQUEST: ClassVar[bool] = True

    assembly_format = _p2p_format("source", "`->` type(results)")


@irdl_op_definition
class WaitOp(IRDLOperation):
    """`MPI_Wait(&req, MPI_STATUS_IGNORE)`. xDSL 0.74's op of this name belongs to its older mpi
    dialect, which mlir-opt rejects."""

    name = "mpi.wait"

    req = operand_def(RequestType)

    retval = opt_result_def(RetvalType)

    assembly_format = "`(` $req `)` attr-dict `:` type($req) (`->` type($retval)^)?"

    def __init__(self, req: Value, with_retval: bool = False) -> None:
        super().__init__(operands=[req], result_types=[_retval_types(with_retval)])


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`MPI_Barrier(comm)`. xDSL 0.74 lacks this op."""

    name = "mpi.barrier"

    comm = operand_def(CommType)

    retval = opt_result_def(RetvalType)

    assembly_format = "`(` $comm `)` attr-dict (`->` type($retval)^)?"

    def __init__(self, comm: Value, with_retval: bool = False) -> None:
        super().__init__(operands=[comm], result_types=[_retval_types(with_retval)])


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """`MPI_Allreduce(sendbuf, recvbuf, count, dtype, op, comm)`. xDSL 0.74's op of this name
    belongs to its older mpi dialect, which mlir-opt rejects."""

    name = "mpi.allreduce"

    sendbuf = operand_def(MemRefType)
    recvbuf = operand_def(MemRefType)
    comm = operand_def(CommType)

    op = prop_def(IntegerAttr[I32])

    retval = opt_result_def(RetvalType)

    custom_directives = (ReductionKeyword,)

    assembly_format = (
        "`(` $sendbuf `,` $recvbuf `,` custom<ReductionKeyword>($op) `,` $comm `)` "
        "attr-dict `:` type($sendbuf) `,` type($recvbuf) (`->` type($retval)^)?"
    )

    def __init__(
        self,
        sendbuf: Value,
        recvbuf: Value,
        op: ReductionKind | str,
        comm: Value,
        with_retval: bool = False,
    ) -> None:
        super().__init__(
            operands=[sendbuf, recvbuf, comm],
            properties={"op": reduction_attr(op)},
            result_types=[_retval_types(with_retval)],
        )

    @property
    def reduction(self) -> ReductionKind:
        return ReductionKind.from_code(self.op.value.data)

    def verify_(self) -> None:
        # Upstream rejects integers outside the enum when converting properties.
        if not 0 <= self.op.value.data < len(_REDUCTIONS):
            raise VerifyException(
                f"'op' must be an MPI reduction (0..{len(_REDUCTIONS) - 1}), "
                f"got {self.op.value.data}"
            )


@irdl_op_definition
class RetvalCheckOp(IRDLOperation):
    """Compares an `!mpi.retval` with an error class; yields `i1`. xDSL 0.74 lacks this op."""

    name = "mpi.retval_check"

    val = operand_def(RetvalType)

    errclass = prop_def(ErrorClassAttr)

    res = result_def(i1)

    assembly_format = "$val `=` $errclass attr-dict `:` type($res)"

    def __init__(self, val: Value, errclass: ErrorClass | str) -> None:
        super().__init__(
            operands=[val],
            properties={"errclass": ErrorClassAttr(ErrorClass(errclass))},
            result_types=[i1],
        )


@irdl_op_definition
class ErrorClassOp(IRDLOperation):
    """`MPI_Error_class(val, &errclass)`. xDSL 0.74 lacks this op."""

    name = "mpi.error_class"

    val = operand_def(RetvalType)

    errclass = result_def(RetvalType)

    assembly_format = "$val attr-dict `:` type($val)"

    def __init__(self, val: Value) -> None:
        super().__init__(operands=[val], result_types=[RetvalType()])


# The DLTI entry upstream's MPI lowering reads to pick an ABI, and its value for each
# MPI dhir builds with: what dhir-lower-to-mpi writes and the build checks.
IMPLEMENTATION_KEY = "MPI:Implementation"
IMPLEMENTATIONS = MPI_IMPLEMENTATIONS

MPI = Dialect(
    "mpi",
    [
        InitOp,
        FinalizeOp,
        CommWorldOp,
        CommRankOp,
        CommSizeOp,
        CommSplitOp,
        SendOp,
        RecvOp,
        ISendOp,
        IRecvOp,
        WaitOp,
        BarrierOp,
        AllReduceOp,
        RetvalCheckOp,
        ErrorClassOp,
    ],
    [
        CommType,
        RetvalType,
        RequestType,
        StatusType,
        ErrorClassAttr,
    ],
)
