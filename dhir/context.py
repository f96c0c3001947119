"""The xDSL context holding every dialect dhir understands."""

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect

from dhir.dialects import get_all_dialects


def _dhir_dialects() -> dict[str, Callable[[], Dialect]]:
    # Imported lazily: start-up time matters for a command-line compiler.
    def dhir() -> Dialect:
        from dhir.dialects.dhir import DHIR

        return DHIR

    def scf() -> Dialect:
        from dhir.dialects.scf import SCF

        return SCF

    def gpu() -> Dialect:
        from dhir.dialects.gpu import GPU

        return GPU

    def memref() -> Dialect:
        from dhir.dialects.memref import MemRef

        return MemRef

    def arith() -> Dialect:
        from dhir.dialects.arith import Arith

        return Arith

    def affine() -> Dialect:
        from dhir.dialects.affine import Affine

        return Affine

    def linalg() -> Dialect:
        from dhir.dialects.linalg import Linalg

        return Linalg

    def math() -> Dialect:
        from dhir.dialects.math import Math

        return Math

    def vector() -> Dialect:
        from dhir.dialects.vector import Vector

        return Vector

    def mpi() -> Dialect:
        from dhir.dialects.mpi import MPI

        return MPI

    def shard() -> Dialect:
        from dhir.dialects.shard import Shard

        return Shard

    def cf() -> Dialect:
        from dhir.dialects.cf import Cf

        return Cf

    def func() -> Dialect:
        from dhir.dialects.func import Func

        return Func

    def index() -> Dialect:
        from dhir.dialects.index import Index

        return Index

    def tensor() -> Dialect:
        from dhir.dialects.tensor import Tensor

        return Tensor

    return {
        "dhir": dhir,
        "scf": scf,
        "gpu": gpu,
        "memref": memref,
        "arith": arith,
        "affine": affine,
        "linalg": linalg,
        "math": math,
        "vector": vector,
        "mpi": mpi,
        "shard": shard,
        "cf": cf,
        "tensor": tensor,
        "index": index,
        "func": func,
    }


def all_dialects() -> dict[str, Callable[[], Dialect]]:
    """xDSL's dialects, with dhir's versions where dhir has its own."""
    dialects = dict(get_all_dialects())
    dialects.update(_dhir_dialects())
    return dialects


def make_context(allow_unregistered: bool = False) -> Context:
    ctx = Context(allow_unregistered=allow_unregistered)
    for name, factory in all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
