"""The upstream-MLIR-22 `mpi` dialect: building, printing, parsing, verifying."""

import shutil
import subprocess
from collections.abc import Callable
from io import StringIO

import pytest
from xdsl.dialects.builtin import MemRefType, ModuleOp, f32, i1, i32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from dhir.context import make_context
from dhir.dialects.mpi import (
    MPI,
    AllReduceOp,
    BarrierOp,
    CommRankOp,
    CommSizeOp,
    CommSplitOp,
    CommType,
    CommWorldOp,
    ErrorClass,
    ErrorClassAttr,
    ErrorClassOp,
    FinalizeOp,
    InitOp,
    IRecvOp,
    ISendOp,
    RecvOp,
    ReductionKind,
    RequestType,
    RetvalCheckOp,
    RetvalType,
    SendOp,
    StatusType,
    WaitOp,
)

BUF = MemRefType(f32, [16])


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def show(op: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def in_module(arg_types: list[Attribute], build: Callable[..., list[Operation]]) -> ModuleOp:
    """A module with one function whose body `build(block_args)` returns."""
    block = Block(arg_types=arg_types)
    ops: list[Operation] = build(*block.args)
    block.add_ops([*ops, ReturnOp()])
    func = FuncOp("f", (arg_types, []), Region(block))
    module = ModuleOp([func])
    module.verify()
    return module


def ops_of(module: ModuleOp) -> list[Operation]:
    return [op for op in module.walk() if op.dialect_name() == "mpi"]


def assert_round_trips(module: ModuleOp) -> str:
    text = show(module)
    assert show(parse(text)) == text
    assert show(parse(show(module, generic=True))) == text
    return text


# --- building ------------------------------------------------------------


def every_op(buf: SSAValue, tag: SSAValue, peer: SSAValue) -> list[Operation]:
    init = InitOp(with_retval=True)
    world = CommWorldOp()
    comm = world.comm
    rank = CommRankOp(comm)
    size = CommSizeOp(comm, with_retval=True)
    split = CommSplitOp(comm, tag, rank.rank)
    isend = ISendOp(buf, tag, peer, comm)
    irecv = IRecvOp(buf, tag, peer, comm, with_retval=True)
    check = RetvalCheckOp(init.results[0], ErrorClass.SUCCESS)
    return [
        init,
        world,
        rank,
        size,
        split,
        SendOp(buf, tag, peer, split.newcomm),
        RecvOp(buf, tag, peer, comm, with_retval=True),
        isend,
        irecv,
        WaitOp(isend.req),
        WaitOp(irecv.req, with_retval=True),
        BarrierOp(comm),
        AllReduceOp(buf, buf, ReductionKind.SUM, comm),
        AllReduceOp(buf, buf, "MPI_MAX", comm, with_retval=True),
        check,
        ErrorClassOp(init.results[0]),
        FinalizeOp(),
    ]


def test_every_op_builds_prints_and_round_trips() -> None:
    module = in_module([BUF, i32, i32], every_op)
    text = assert_round_trips(module)
    assert [op.name for op in ops_of(module)] == [
        "mpi.init",
        "mpi.comm_world",
        "mpi.comm_rank",
        "mpi.comm_size",
        "mpi.comm_split",
        "mpi.send",
        "mpi.recv",
        "mpi.isend",
        "mpi.irecv",
        "mpi.wait",
        "mpi.wait",
        "mpi.barrier",
        "mpi.allreduce",
        "mpi.allreduce",
        "mpi.retval_check",
        "mpi.error_class",
        "mpi.finalize",
    ]
    assert ", MPI_SUM, %" in text
    assert "-> !mpi.retval, !mpi.request" in text


def test_dialect_lists_upstream_ops_and_types() -> None:
    names = {op.name for op in MPI.operations}
    assert names == {
        "mpi.init",
        "mpi.finalize",
        "mpi.comm_world",
        "mpi.comm_rank",
        "mpi.comm_size",
        "mpi.comm_split",
        "mpi.send",
        "mpi.recv",
        "mpi.isend",
        "mpi.irecv",
        "mpi.wait",
        "mpi.barrier",
        "mpi.allreduce",
        "mpi.retval_check",
        "mpi.error_class",
    }
    attrs = {attr.name for attr in MPI.attributes}
    assert attrs == {
        "mpi.comm",
        "mpi.retval",
        "mpi.request",
        "mpi.status",
        "mpi.errclass",
    }


@pytest.mark.parametrize("with_retval", [False, True])
def test_optional_retval_comes_first(with_retval: bool) -> None:
    comm = parse("%c = mpi.comm_world : !mpi.comm").body.block.first_op
    assert isinstance(comm, CommWorldOp)
    rank = CommRankOp(comm.comm, with_retval=with_retval)
    assert (rank.retval is not None) == with_retval
    assert rank.rank.type == i32
    assert rank.results[-1] is rank.rank
    if with_retval:
        assert rank.results[0].type == RetvalType()


def test_results_named_like_upstream() -> None:
    def build(buf: SSAValue, tag: SSAValue) -> list[Operation]:
        world = CommWorldOp()
        rank = CommRankOp(world.comm, with_retval=True)
        send = ISendOp(buf, tag, rank.rank, world.comm)
        return [world, rank, CommSizeOp(world.comm), send, WaitOp(send.req)]

    text = show(in_module([BUF, i32], build))
    assert "%retval, %rank = mpi.comm_rank(" in text
    assert "%size = mpi.comm_size(" in text
    assert "%req = mpi.isend(" in text


def test_allreduce_stores_upstream_integer() -> None:
    def build(buf: SSAValue, comm: SSAValue) -> list[Operation]:
        return [AllReduceOp(buf, buf, ReductionKind.PROD, comm)]

    module = in_module([BUF, CommType()], build)
    (op,) = ops_of(module)
    assert isinstance(op, AllReduceOp)
    assert op.reduction is ReductionKind.PROD
    assert op.op.value.data == 4
    assert "<{op = 4 : i32}>" in show(module, generic=True)
    assert "MPI_PROD" in show(module)


def test_retval_check_attribute_syntax() -> None:
    def build(e: SSAValue) -> list[Operation]:
        return [RetvalCheckOp(e, "MPI_ERR_COMM")]

    module = in_module([RetvalType()], build)
    (op,) = ops_of(module)
    assert isinstance(op, RetvalCheckOp)
    assert op.errclass == ErrorClassAttr(ErrorClass.ERR_COMM)
    assert op.res.type == i1
    assert "= <MPI_ERR_COMM> : i1" in show(module)
    assert "<{errclass = #mpi.errclass<MPI_ERR_COMM>}>" in show(module, generic=True)


def test_enum_codes_follow_upstream_numbering() -> None:
    assert ReductionKind.OP_NULL.code == 0
    assert ReductionKind.SUM.code == 3
    assert ReductionKind.REPLACE.code == 13
    assert ReductionKind.from_code(10) is ReductionKind.BXOR
    assert ErrorClass.SUCCESS.code == 0
    assert ErrorClass.ERR_COMM.code == 8
    assert ErrorClass.ERR_LASTCODE.code == 62


def test_types_parse_and_print() -> None:
    module = parse(
        "func.func @f(%a: !mpi.comm, %b: !mpi.request, %c: !mpi.retval,"
        " %d: !mpi.status) { func.return }"
    )
    func = module.body.block.first_op
    assert isinstance(func, FuncOp)
    types = list(func.function_type.inputs)
    assert types == [CommType(), RequestType(), RetvalType(), StatusType()]
    assert "(%a: !mpi.comm, %b: !mpi.request, %c: !mpi.retval, %d: !mpi.status)" in (show(module))


def test_string_reduction_and_errclass_accepted() -> None:
    module = parse(
        """
        func.func @f(%b: memref<4xf32>, %c: !mpi.comm, %e: !mpi.retval) {
          mpi.allreduce(%b, %b, "MPI_MIN", %c) : memref<4xf32>, memref<4xf32>
          %ok = mpi.retval_check %e = <"MPI_ERR_ARG"> : i1
          func.return
        }
        """
    )
    text = show(module)
    assert "MPI_MIN, %c)" in text
    assert "= <MPI_ERR_ARG> : i1" in text


def test_inherent_attribute_in_attr_dict_becomes_property() -> None:
    # mlir-opt accepts the pre-properties spelling too.
    module = parse(
        wrap(
            '"mpi.allreduce"(%b, %b, %c) {op = 2 : i32} : '
            "(memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()",
            "%b: memref<4xf32>, %c: !mpi.comm",
        )
    )
    (op,) = ops_of(module)
    assert isinstance(op, AllReduceOp)
    assert op.reduction is ReductionKind.MIN


# --- malformed input -------------------------------------------------------


def wrap(body: str, args: str = "%c: !mpi.comm") -> str:
    return f"func.func @f({args}) {{\n{body}\nfunc.return\n}}"


@pytest.mark.parametrize(
    "body,args",
    [
        (
            "mpi.allreduce(%b, %b, MPI_AVG, %c) : memref<4xf32>, memref<4xf32>",
            "%b: memref<4xf32>, %c: !mpi.comm",
        ),
        ("%ok = mpi.retval_check %e = <MPI_ERR_NOPE> : i1", "%e: !mpi.retval"),
        ("%ok = mpi.retval_check %e = MPI_SUCCESS : i1", "%e: !mpi.retval"),
        ("%r = mpi.comm_rank %c : i32", "%c: !mpi.comm"),
        ("%c2 = mpi.comm_world", "%c: !mpi.comm"),
        ("mpi.barrier(%c) : !mpi.retval", "%c: !mpi.comm"),
        ("%x = mpi.comm_world : !mpi.communicator", "%c: !mpi.comm"),
    ],
)
def test_malformed_syntax_raises_parse_error(body: str, args: str) -> None:
    with pytest.raises(ParseError):
        parse(wrap(body, args))


@pytest.mark.parametrize(
    "body,args",
    [
        ('%r = "mpi.comm_rank"(%c) : (!mpi.comm) -> i64', "%c: !mpi.comm"),
        (
            '%a, %b = "mpi.comm_rank"(%c) : (!mpi.comm) -> (i32, i32)',
            "%c: !mpi.comm",
        ),
        (
            '"mpi.send"(%b, %t, %t, %c) : (memref<*xf32>, i32, i32, !mpi.comm) -> ()',
            "%b: memref<*xf32>, %t: i32, %c: !mpi.comm",
        ),
        (
            '"mpi.send"(%b, %t, %p, %c) : (memref<4xf32>, i64, i32, !mpi.comm) -> ()',
            "%b: memref<4xf32>, %t: i64, %p: i32, %c: !mpi.comm",
        ),
        (
            '"mpi.allreduce"(%b, %b, %c) <{op = 14 : i32}> : '
            "(memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()",
            "%b: memref<4xf32>, %c: !mpi.comm",
        ),
        (
            '"mpi.allreduce"(%b, %b, %c) : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()',
            "%b: memref<4xf32>, %c: !mpi.comm",
        ),
        (
            '%ok = "mpi.retval_check"(%e) <{errclass = #mpi.errclass<MPI_SUCCESS>}>'
            " : (!mpi.retval) -> i32",
            "%e: !mpi.retval",
        ),
        ('%e = "mpi.barrier"(%c) : (!mpi.comm) -> i32', "%c: !mpi.comm"),
        ('"mpi.wait"(%c) : (!mpi.comm) -> ()', "%c: !mpi.comm"),
        # xDSL checks types named in custom syntax while parsing, and reports
        # a mismatch as a VerifyException, not a ParseError.
        ("%r = mpi.comm_rank(%c) : i64", "%c: !mpi.comm"),
        ("%r, %s = mpi.comm_rank(%c) : i32, i32", "%c: !mpi.comm"),
    ],
)
def test_ill_typed_ir_raises_verify_exception(body: str, args: str) -> None:
    with pytest.raises(VerifyException):
        parse(wrap(body, args))


def test_verify_catches_python_built_mistakes() -> None:
    def build(buf: SSAValue, comm: SSAValue) -> list[Operation]:
        return [SendOp(buf, comm, comm, comm)]

    with pytest.raises(VerifyException):
        in_module([BUF, CommType()], build)


def test_unknown_reduction_name_rejected_in_python() -> None:
    with pytest.raises(ValueError):
        ReductionKind("MPI_AVG")


# --- interoperation with mlir-opt-22 -------------------------------------

MLIR_OPT = shutil.which("mlir-opt-22")


def mlir_opt(text: str, *flags: str) -> str:
    assert MLIR_OPT is not None
    done = subprocess.run(
        [MLIR_OPT, *flags], input=text, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.mlir
@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt-22 not on PATH")
@pytest.mark.parametrize("generic_in", [False, True])
@pytest.mark.parametrize("generic_out", [False, True])
def test_mlir_opt_accepts_and_returns_same_ir(generic_in: bool, generic_out: bool) -> None:
    module = in_module([BUF, i32, i32], every_op)
    flags = ["--mlir-print-op-generic"] if generic_out else []
    upstream = parse(mlir_opt(show(module, generic=generic_in), *flags))
    # mlir-opt renames values, so compare structure rather than text.
    assert upstream.is_structurally_equivalent(module)
