"""`dhir-float-atomics`: `memref.generic_atomic_rmw` on floats as a load, the body and a
store; `memref.atomic_rmw` `mulf` and `muli`, which MLIR 22 does not lower, and `maxnumf`
and `minnumf`, which it lowers to LLVM's `atomicrmw fmax`/`fmin` (either zero of opposite
signs: x86 code kept -0.0 against +0.0), as `generic_atomic_rmw` first (in host code),
the latter two with the interpreter's order of zeros (`order_zeros`).

MLIR 22's memref-to-llvm lowering emits `llvm.cmpxchg` on the float itself, which the LLVM
dialect rejects (cmpxchg takes integers and pointers only). Host code of a rank runs on one
thread unless its parallel loops run on OpenMP, and the native backend keeps those loops
sequential in a module with such an op (see `openmp_safe`), so nothing can run between the
load and the store. Device code (kernels in `gpu.module`s, and `gpu.launch` bodies
before they are outlined) is left alone: it runs on many threads.
"""

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dhir.dialects import arith, memref
from dhir.dialects.gpu import in_device_code
from dhir.dialects.memref import ATOMIC_RMW_KINDS, AtomicYieldOp, GenericAtomicRMWOp
from dhir.ir.walk import find_ops
from dhir.transforms.accurate_math import order_zeros

# atomic_rmw kinds made generic_atomic_rmw in host code, and the op each applies: MLIR 22's
# memref-to-llvm lowering leaves the first two, and lowers the others to LLVM's maxnum.
_Applied = arith.MulfOp | arith.MuliOp | arith.MaxnumfOp | arith.MinnumfOp
_AS_GENERIC: dict[str, type[_Applied]] = {
    "mulf": arith.MulfOp,
    "muli": arith.MuliOp,
    "maxnumf": arith.MaxnumfOp,
    "minnumf": arith.MinnumfOp,
}


def _kind(op: memref.AtomicRMWOp) -> str:
    return ATOMIC_RMW_KINDS[op.kind.value.data]


def float_atomics(module: ModuleOp) -> list[GenericAtomicRMWOp]:
    """The host code's `generic_atomic_rmw`s on floats."""
    return _host_floats(find_ops(module, GenericAtomicRMWOp))


def _host_floats(ops: list[GenericAtomicRMWOp]) -> list[GenericAtomicRMWOp]:
    return [op for op in ops if isinstance(op.result.type, AnyFloat) and not in_device_code(op)]


@dataclass(frozen=True)
class FloatAtomicsPass(ModulePass):
    """Float memref.generic_atomic_rmw outside GPU code becomes a load, its body, a store.

    MLIR 22 lowers it to an llvm.cmpxchg on floats, which LLVM rejects; the plain form is
    right because a rank's host code runs on one thread (see `openmp_safe`)."""

    name = "dhir-float-atomics"
    needs: ClassVar[tuple[type[Operation], ...]] = (memref.AtomicRMWOp, GenericAtomicRMWOp)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        found = find_ops(op, (memref.AtomicRMWOp, GenericAtomicRMWOp))
        rewritten = False
        for update in found:
            if isinstance(update, memref.AtomicRMWOp):
                if _kind(update) in _AS_GENERIC and not in_device_code(update):
                    _as_generic(update)
                    rewritten = True
        # The generic ones the walk met are all there are, unless some were made just now.
        generic = [g for g in found if isinstance(g, GenericAtomicRMWOp)]
        for atomic in float_atomics(op) if rewritten else _host_floats(generic):
            _unfold(atomic)


def _as_generic(op: memref.AtomicRMWOp) -> None:
    """`op` as a generic_atomic_rmw applying its kind's arith op to the value read."""
    body = Block(arg_types=[op.result.type])
    applied = _AS_GENERIC[_kind(op)](body.args[0], op.value)
    body.add_ops([applied, AtomicYieldOp(operands=[applied.result])])
    generic = GenericAtomicRMWOp(
        operands=[op.memref, list(op.indices)],
        result_types=[op.result.type],
        regions=[Region(body)],
    )
    generic.location = op.location
    Rewriter.replace_op(op, generic)
    if isinstance(applied, arith.MaxnumfOp | arith.MinnumfOp):
        order_zeros(applied)


def _unfold(op: GenericAtomicRMWOp) -> None:
    # The load and store keep the op's location: --runtime-checks reports their bounds
    # checks at it.
    load = memref.LoadOp.get(op.memref, op.indices)
    load.location = op.location
    Rewriter.insert_op(load, InsertPoint.before(op))
    block = op.atomic_body.block
    done = block.last_op
    assert done is not None
    new_value = done.operands[0]
    Rewriter.erase_op(done)
    Rewriter.inline_block(block, InsertPoint.before(op), [load.res])
    store = memref.StoreOp.get(new_value, op.memref, op.indices)
    store.location = op.location
    Rewriter.insert_op(store, InsertPoint.before(op))
    Rewriter.replace_op(op, [], [load.res])
