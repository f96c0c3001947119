"""dhir-fast-math: floating-point relaxations a whole program allows, as `arith` fastmath
flags on every op that takes them (`--fast-math`, `fast_math=` in `dhir.run`).

MLIR's flags say what LLVM may do with an op; dhir adds them and LLVM does the rest:
`contract` lets a multiply and the add that takes its result become one fused
multiply-add (one rounding instead of two); `reassoc` lets sums be computed in another
order (vectorised reductions, and libraries that sum in their own order); `fast` allows
every relaxation LLVM has (no NaNs or infinities assumed, signed zeros ignored, reciprocals
and approximate functions). The modes include each other: `reassoc` allows `contract` too.
Flags a program already has stay; the interpreter ignores them all (it is the exact
oracle), so relaxed results are compared with it within a tolerance, not bit for bit.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from dhir.choices import FAST_MATH_MODES
from dhir.dialects.arith import FastMathFlag, FastMathFlagsAttr

MODES = FAST_MATH_MODES
# Flags as the parser makes them (FastMathFlag members, not strings: passes after this one
# read `flag.value`).
_FLAGS: dict[str, FastMathFlagsAttr] = {
    "none": FastMathFlagsAttr("none"),
    "contract": FastMathFlagsAttr([FastMathFlag.ALLOW_CONTRACT]),
    "reassoc": FastMathFlagsAttr([FastMathFlag.ALLOW_CONTRACT, FastMathFlag.REASSOC]),
    "fast": FastMathFlagsAttr("fast"),
}


def relax(module: ModuleOp, mode: str) -> int:
    """Add `mode`'s flags (one of MODES) to every op in `module` that has fastmath flags;
    how many ops."""
    added = _FLAGS[mode].data
    if not added:
        return 0
    count = 0
    for op in module.walk():
        current = getattr(op, "fastmath", None)
        if not isinstance(current, FastMathFlagsAttr):
            continue
        op.properties["fastmath"] = FastMathFlagsAttr(current.data | added)
        count += 1
    return count


@dataclass(frozen=True)
class FastMathPass(ModulePass):
    """Add the floating-point relaxations `mode` allows to every op's fastmath flags.

    `mode`: none, contract, reassoc or fast (module docstring)."""

    name = "dhir-fast-math"
    mode: str = "none"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mode not in MODES:
            raise VerifyException(f"dhir-fast-math: mode must be one of {', '.join(MODES)}")
        relax(op, self.mode)
