"""Which loop nests and linalg ops dhir-optimize-bodies will turn into register-blocked
vector code, asked of the optimizer itself on copies of the bodies it looks at (a dry
run, which also answers dhir.analysis.threads whether linalg ops are left), and marked
on the module (`BLOCKED_ATTR`) for the cost model: dhir.analysis.work times a marked nest
at the rate that code reaches, not as the loops written (docs/costs.md, "Blocked nests and
chains").

Tasks whose bodies are one up to the memrefs they list (`body_shape` with every literal),
over memrefs that share memory alike, are optimized alike: one copy of each such body
goes through the dry run, and its answers hold for all of them (generated schedules
repeat a body thousands of times). The copies' ops get locations that number them (walk
order, which a copy keeps); the optimizer names each nest it blocked by its location, so
the number finds the nest in each task of that body. A nest it made itself (an affine
nest made scf, a linalg op written as loops) carries the location of the op it came from,
so that op is marked (a row loop at worst, where nothing nearer has one: its other
statements are then timed as blocked too). Anything the dry run cannot do leaves the
module unmarked: the cost model then times the loops as written.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from dhir.analysis.counts import BLOCKED_ATTR
from dhir.analysis.handoff import not_handing_over
from dhir.analysis.shapes import ShapeKey, body_shape
from dhir.analysis.sharing import buffers
from dhir.dialects import affine, func, scf
from dhir.dialects.dhir import TaskOp
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.diagnostics import DhirError
from dhir.ir.symbols import Symbols
from dhir.ir.walk import find_ops
from dhir.transforms.optimize_bodies import (
    bodies_with_work,
    linalg_left,
    optimize_bodies,
    threaded_work_left,
)

_NUMBERED = "<dhir dry run>"  # the file name of the copies' locations
_NESTS = (scf.ForOp, affine.ForOp, LinalgStructuredOperation)
_Body = TaskOp | func.FuncOp


@dataclass(frozen=True)
class DryRun:
    """What one dry run of dhir-optimize-bodies found: whether a linalg op of the module
    stays one (None where the dry run had nothing to run or failed: `linalg_left` then
    asks on its own, when the answer is wanted), and how many nests it marked."""

    linalg_left: bool | None
    marked: int


def mark_blocked(module: ModuleOp, vector_bits: int) -> int:
    """`dry_run`'s marks: how many nests it marked."""
    return dry_run(module, vector_bits).marked


def dry_run(module: ModuleOp, vector_bits: int) -> DryRun:
    """Mark each nest of `module` that dhir-optimize-bodies (for `vector_bits`-wide
    vectors) blocks in registers or hands to BLAS, and say whether a linalg op is left."""
    bodies = bodies_with_work(module)
    if not bodies:
        return DryRun(None, 0)
    groups = _alike(bodies)
    copies = [group[0].clone() for group in groups]
    outer = _outer_values(copies)
    try:
        return _run(module, bodies, groups, copies, vector_bits)
    finally:
        _drop_copies(module, copies, outer)


def _run(
    module: ModuleOp,
    bodies: Sequence[_Body],
    groups: Sequence[Sequence[_Body]],
    copies: Sequence[_Body],
    vector_bits: int,
) -> DryRun:
    name = StringAttr(_NUMBERED)
    places: list[tuple[int, int]] = []  # by number: the group, and the op's place in it
    for group, copy in enumerate(copies):
        for place, op in enumerate(copy.walk()):
            op.location = FileLineColLoc(name, IntAttr(len(places)), IntAttr(0))
            places.append((group, place))
    try:
        with not_handing_over():
            decisions = optimize_bodies(_symbols_of(module), vector_bits, copies)
    except (DhirError, DiagnosticException):
        # The build will say what is wrong; the cost model keeps the loops.
        return DryRun(None, 0)
    left = any(threaded_work_left(copy) for copy in copies)
    done: dict[int, set[int]] = {}  # by group: the places of the nests it blocked
    for decision in decisions:
        loc = decision.loc
        if decision.done and loc is not None and loc.file == _NUMBERED:
            group, place = places[loc.line]
            done.setdefault(group, set()).add(place)
    marked = 0
    for group, found in done.items():
        for ops in _walks(groups[group]):
            for op in (ops[place] for place in found):
                if isinstance(op, _NESTS) and BLOCKED_ATTR not in op.attributes:
                    op.attributes[BLOCKED_ATTR] = UnitAttr()
                    marked += 1
    return DryRun(left or _linalg_elsewhere(module, bodies), marked)


def _walks(group: Sequence[_Body]) -> Iterator[list[Operation]]:
    """The ops of each body of `group`, in walk order; a body whose walk is not the
    first's, op for op by kind, is left out (unmarked)."""
    first = list(group[0].walk())
    yield first
    kinds = [type(op) for op in first]
    for body in group[1:]:
        ops = list(body.walk())
        if [type(op) for op in ops] == kinds:
            yield ops


def _alike(bodies: Sequence[_Body]) -> list[list[_Body]]:
    """`bodies` in groups the optimizer treats alike, in the order of their first."""
    groups: dict[object, list[_Body]] = {}
    symbols = Symbols()
    for number, body in enumerate(bodies):
        key: object = number  # a body of its own
        if isinstance(body, TaskOp):
            key = (_body_key(body, symbols), _sharing_key(body))
        try:
            groups.setdefault(key, []).append(body)
        except TypeError:  # an attribute that cannot be hashed
            groups[number] = [body]
    return list(groups.values())


def _body_key(task: TaskOp, symbols: Symbols) -> ShapeKey:
    return body_shape(task, symbols=symbols, literals=True)


def _sharing_key(task: TaskOp) -> tuple[tuple[object, ...], ...]:
    """Which memory each of the task's memrefs may point into, each buffer named by its
    first appearance (the optimizer asks which memrefs may share memory), a global by
    its name."""
    names: dict[object, object] = {}
    out: list[tuple[object, ...]] = []
    for value in task.memrefs:
        named: list[object] = []
        for base in buffers(value):
            if isinstance(base, str):
                named.append(base)
            else:
                named.append(names.setdefault(base, (type(base).__name__, len(names))))
        out.append(tuple(sorted(named, key=repr)))
    return tuple(out)


def _outer_values(copies: Sequence[Operation]) -> set[SSAValue]:
    """The values the copies use that are defined outside them (the module's)."""
    inside: set[SSAValue] = set()
    used: set[SSAValue] = set()
    for copy in copies:
        for op in copy.walk():
            inside.update(op.results)
            used.update(op.operands)
            for region in op.regions:
                for block in region.blocks:
                    inside.update(block.args)
    return used - inside


def _drop_copies(module: ModuleOp, copies: Sequence[Operation], outer: set[SSAValue]) -> None:
    """Erase the copies, and whatever the dry run made or cut off from them that still
    uses the module's values: none of it stays among those values' uses. Those uses come
    first (a use is added at the front), before the module's own."""
    for copy in copies:
        copy.erase(safe_erase=False)
    for value in outer:
        use = value.first_use
        while use is not None and not _inside(use.operation, module):
            _top(use.operation).drop_all_references()
            use = value.first_use


def _inside(op: Operation, module: ModuleOp) -> bool:
    current: Operation | None = op
    while current is not None and current is not module:
        current = current.parent_op()
    return current is module


def _top(op: Operation) -> Operation:
    while (parent := op.parent_op()) is not None:
        op = parent
    return op


def _symbols_of(module: ModuleOp) -> ModuleOp:
    """A module holding what `module` defines at its top, as far as the rewrites'
    declarations (dhir.transforms.building.declare) ask: a function the program declares
    or defines by a name they use is an error there, as in the build."""
    out = ModuleOp([])
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp):
            kind = op.function_type
            body = Region() if op.is_declaration else Region(Block(arg_types=kind.inputs))
            out.body.block.add_op(func.FuncOp(op.sym_name.data, kind, body))
        elif not op.regions:
            out.body.block.add_op(op.clone())
    return out


def _linalg_elsewhere(module: ModuleOp, bodies: Sequence[_Body]) -> bool:
    """Whether `module` holds a linalg op outside `bodies` (which the optimizer leaves)."""
    looked_at = set(bodies)
    for op in find_ops(module, LinalgStructuredOperation):
        parent = op.parent_op()
        while parent is not None and parent not in looked_at:
            parent = parent.parent_op()
        if parent is None:
            return True
    return False


def forget_blocked(module: ModuleOp) -> None:
    """Drop the marks (before the module is lowered and printed for mlir-opt)."""
    for op in module.walk():
        op.attributes.pop(BLOCKED_ATTR, None)


__all__ = ["DryRun", "dry_run", "forget_blocked", "linalg_left", "mark_blocked"]
