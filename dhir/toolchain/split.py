"""Split a large lowered module into pieces that LLVM builds at the same time.

mlir-opt, mlir-translate and clang each use one core, and for 10,000 tasks they take a
quarter of the compile. dhir-lower-to-mpi already puts a large schedule's steps into
functions of a few dozen tasks each (`<function>.schedule<S>.part<K>`, called from
`.group<K>` functions when there are many), which call only external declarations (the
runtime, MPI) and each other: those functions move, in contiguous runs of about equal
size, into other modules, which are lowered and compiled at the same time on the cores
(a large program in more modules than cores: see MAX_STEPS_PER_PIECE); the linker
joins the objects. Steps are the functions dhir-lower-to-mpi marks `dhir.step`
(their names are for people: a user's function may look like one). Steps are made public
(their dotted names cannot clash with a C symbol) and each module declares the steps it
calls but does not hold. Anything else a step refers to keeps the module whole: a global,
or a function defined in the module, whose private name could clash.
"""

from collections.abc import Iterator

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Attribute, Operation

from dhir.dialects import func
from dhir.ir.walk import find_ops
from dhir.transforms.lower_to_mpi import STEP

# Fewer steps than this are not worth another round of tool start-ups.
MIN_STEPS_PER_PIECE = 16
# mlir-opt's time grows faster than the functions in a module (convert-to-llvm: 0.06,
# 0.24 and 1.2 s for modules of 170, 340 and 1,000 steps), so a large program is cut
# into pieces of at most this many steps, more pieces than cores if need be (a
# multiple of them; docs/performance.md).
MAX_STEPS_PER_PIECE = 128


def split_module(module: ModuleOp, pieces: int) -> list[ModuleOp]:
    """`module` (changed in place: the first piece, with the first run of steps) and
    new modules holding the other runs: `pieces` of them (the cores that build them),
    or a multiple of that when they would hold over MAX_STEPS_PER_PIECE steps each;
    [module] when `pieces` is 1, or the module is small or not splittable. The steps'
    `dhir.step` marks leave the module either way: nothing after this needs them."""
    steps = _take_steps(module)
    if pieces < 2:
        return [module]
    # A multiple of the cores: with one piece more than they build at once, the last
    # one is built alone while the other cores wait.
    rounds = -(-len(steps) // (MAX_STEPS_PER_PIECE * pieces))
    pieces *= rounds
    count = min(pieces, len(steps) // MIN_STEPS_PER_PIECE)
    if count < 2:
        return [module]
    declarations = {
        op.sym_name.data: op
        for op in module.body.block.ops
        if isinstance(op, func.FuncOp) and op.is_declaration
    }
    scans = {step: _scan(step) for step in steps}
    references = {step: names for step, (names, _) in scans.items()}
    allowed = declarations.keys() | {step.sym_name.data for step in steps}
    if not all(names <= allowed for names in references.values()):
        return [module]  # a step refers to a global, or to a function the module defines
    runs = _balanced_runs(module, steps, [size for _, size in scans.values()], count)
    for step in steps:
        step.sym_visibility = None  # public: other pieces may call it
    moved = [_piece(module, run, declarations, references) for run in runs[1:]]
    for piece, run in zip(moved, runs[1:], strict=True):
        _declare_other_steps(piece, run, references, steps)
    return [module, *moved]


def _take_steps(module: ModuleOp) -> list[func.FuncOp]:
    """The module's step functions, in order, their marks taken off."""
    steps: list[func.FuncOp] = []
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp) and op.attributes.pop(STEP, None) is not None:
            steps.append(op)
    return steps


def _balanced_runs(
    module: ModuleOp, steps: list[func.FuncOp], sizes: list[int], count: int
) -> list[list[func.FuncOp]]:
    """`count` contiguous runs of `steps` (of `sizes` ops) of about the same size (in ops,
    which LLVM's time follows), the first one sharing its piece with the host code."""
    chosen = set(steps)
    host = sum(_size(op) for op in module.body.block.ops if op not in chosen)
    total = host + sum(sizes)
    runs: list[list[func.FuncOp]] = [[]]
    filled = host
    for step, size in zip(steps, sizes, strict=True):
        if len(runs) < count and filled + size / 2 > total * len(runs) / count and runs[-1]:
            runs.append([])
        runs[-1].append(step)
        filled += size
    return runs


def _size(op: Operation) -> int:
    return len(find_ops(op, Operation))


def _piece(
    module: ModuleOp,
    steps: list[func.FuncOp],
    declarations: dict[str, func.FuncOp],
    references: dict[func.FuncOp, set[str]],
) -> ModuleOp:
    needed = sorted(set().union(*(references[step] for step in steps)) & declarations.keys())
    piece = ModuleOp([declarations[name].clone() for name in needed])
    piece.attributes.update(module.attributes)  # the DLTI saying which MPI, above all
    for step in steps:
        module.body.block.insert_op_before(_declaration(step), step)
        step.detach()
        piece.body.block.add_op(step)
    return piece


def _declare_other_steps(
    piece: ModuleOp,
    run: list[func.FuncOp],
    references: dict[func.FuncOp, set[str]],
    steps: list[func.FuncOp],
) -> None:
    """Declarations in `piece` of the steps its own steps call (a group calls its
    parts) that went to other modules."""
    inside = {step.sym_name.data for step in run}
    called = set().union(*(references[step] for step in run)) - inside
    first = piece.body.block.first_op
    for step in steps:
        if step.sym_name.data in called:
            stub = _declaration(step)
            if first is None:
                piece.body.block.add_op(stub)
            else:
                piece.body.block.insert_op_before(stub, first)


def _declaration(step: func.FuncOp) -> func.FuncOp:
    return func.FuncOp.external(
        step.sym_name.data, step.function_type.inputs.data, step.function_type.outputs.data
    )


def _scan(function: func.FuncOp) -> tuple[set[str], int]:
    """The symbols `function` refers to, and its size in ops, in one walk."""
    names: set[str] = set()
    ops = find_ops(function, Operation)
    for op in ops:
        for attrs in (op.properties, op.attributes):
            for attr in attrs.values():
                if _HOLDS_SYMBOLS[type(attr)]:
                    names.update(_symbols(attr))
    return names, len(ops)


class _HoldsSymbols(dict[type, bool]):
    """Whether an attribute class may hold a symbol reference, asked once per class: a
    step's attributes are mostly constants' values."""

    def __missing__(self, cls: type) -> bool:
        found = self[cls] = issubclass(cls, SymbolRefAttr | ArrayAttr | DictionaryAttr)
        return found


_HOLDS_SYMBOLS = _HoldsSymbols()


def _symbols(attr: Attribute) -> Iterator[str]:
    if isinstance(attr, SymbolRefAttr):
        yield attr.string_value()
    elif isinstance(attr, ArrayAttr):
        for item in attr.data:
            yield from _symbols(item)
    elif isinstance(attr, DictionaryAttr):
        for item in attr.data.values():
            yield from _symbols(item)
