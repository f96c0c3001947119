"""Which loop nests and linalg ops dhir-optimize-bodies will turn into register-blocked
vector code, asked of the optimizer itself on a copy of the module (a dry run, as
dhir.analysis.threads asks it whether linalg ops are left), and marked on the module
(`BLOCKED_ATTR`) for the cost model: dhir.analysis.work times a marked nest at the rate
that code reaches, not as the loops written (docs/costs.md, "Blocked nests and chains").

The copy's ops get locations that number them (walk order, which the copy keeps); the
optimizer names each nest it blocked by its location, so the number finds the nest in the
module. A nest it made itself (an affine nest made scf, a linalg op written as loops)
carries the location of the op it came from, so that op is marked (a row loop at worst,
where nothing nearer has one: its other statements are then timed as blocked too).
Anything the dry run cannot do leaves the module unmarked: the cost model then times the
loops as written.
"""

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.utils.exceptions import DiagnosticException

from dhir.analysis.counts import BLOCKED_ATTR
from dhir.analysis.handoff import not_handing_over
from dhir.dialects import affine, scf
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.diagnostics import DhirError
from dhir.transforms.optimize_bodies import finds_work, optimize_bodies

_NUMBERED = "<dhir dry run>"  # the file name of the copy's locations
_NESTS = (scf.ForOp, affine.ForOp, LinalgStructuredOperation)


def mark_blocked(module: ModuleOp, vector_bits: int) -> int:
    """Mark each nest of `module` that dhir-optimize-bodies (for `vector_bits`-wide
    vectors) blocks in registers or hands to BLAS; how many it marked."""
    if not finds_work(module):
        return 0
    ops = list(module.walk())
    copy = module.clone()
    numbered = list(copy.walk())
    if len(numbered) != len(ops):
        return 0
    name = StringAttr(_NUMBERED)
    for number, op in enumerate(numbered):
        op.location = FileLineColLoc(name, IntAttr(number), IntAttr(0))
    try:
        with not_handing_over():
            decisions = optimize_bodies(copy, vector_bits)
    except (DhirError, DiagnosticException):
        return 0  # the build will say what is wrong; the cost model keeps the loops
    marked = 0
    for decision in decisions:
        loc = decision.loc
        if not decision.done or loc is None or loc.file != _NUMBERED:
            continue
        op = ops[loc.line]
        if isinstance(op, _NESTS) and BLOCKED_ATTR not in op.attributes:
            op.attributes[BLOCKED_ATTR] = UnitAttr()
            marked += 1
    return marked


def forget_blocked(module: ModuleOp) -> None:
    """Drop the marks (before the module is lowered and printed for mlir-opt)."""
    for op in module.walk():
        op.attributes.pop(BLOCKED_ATTR, None)
