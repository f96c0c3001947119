"""Cut a large program into pieces that LLVM builds while the rest is lowered.

mlir-opt, mlir-translate and clang each use one core, and for 10,000 tasks they take a
third of the compile. dhir-lower-to-mpi puts a large schedule's tasks into functions of a
few dozen tasks each (parts, `<function>.schedule<S>.part<K>`, called from `.group<K>`
functions when there are many), and hands each over as soon as it is finished
(LowerToMPIPass.lower). Parts call only external declarations (the runtime, MPI, the
user's): `StepPieces` moves them, in runs of about equal size, into modules of their own,
each printed and built at once on a free core while the rest is lowered; the module left
(the host code, the groups) is the last piece, and the linker joins the objects. Parts
are the functions dhir-lower-to-mpi marks `dhir.step` (their names are for people: a
user's function may look like one). A moved part is public (its dotted name cannot clash
with a C symbol) and leaves a declaration of itself behind. A part that refers to
anything else (a global, a function the module defines, whose private name could
clash) stays, with every later one.
"""

from collections.abc import Iterator

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, SymbolRefAttr
from xdsl.ir import Attribute, Operation, Region

from dhir.dialects import func
from dhir.ir.walk import find_ops
from dhir.transforms.lower_to_mpi import RUNTIME_FUNCTIONS, STEP, runtime_declaration

# Fewer steps than this are not worth another round of tool start-ups.
MIN_STEPS_PER_PIECE = 16
# mlir-opt's time grows faster than the functions in a module (convert-to-llvm: 0.06,
# 0.24 and 1.2 s for modules of 170, 340 and 1,000 steps), so a large program is cut
# into pieces of at most this many steps, more pieces than cores if need be (a
# multiple of them; docs/performance.md).
MAX_STEPS_PER_PIECE = 128


def piece_count(steps: int, cores: int) -> int:
    """How many pieces of parts `steps` parts make on `cores` cores; fewer than 2: the
    program is built whole (one core, or too few parts to pay for more tool starts)."""
    if cores < 2:
        return 1
    # A multiple of the cores, so that none is built alone at the end.
    rounds = -(-steps // (MAX_STEPS_PER_PIECE * cores))
    return min(cores * rounds, steps // MIN_STEPS_PER_PIECE)


class StepPieces:
    """Pieces cut off `module` while dhir-lower-to-mpi lowers it (LowerToMPIPass.lower):
    each part it finishes joins a run, and each run of `per_piece` parts becomes a piece
    at once, for LLVM to build while the rest is lowered. A part leaves a declaration of
    itself in its place (the lowering places the next step after it). A part that refers
    to anything but a declaration of `module` or the runtime (a function the module
    defines, a global, another step) stays in `module`, and so does every later one:
    `module` keeps the host code, the groups and what is left, the last piece."""

    def __init__(self, module: ModuleOp, per_piece: int) -> None:
        self._module = module
        self._per_piece = per_piece
        self._declarations = {
            op.sym_name.data: op
            for op in module.body.block.ops
            if isinstance(op, func.FuncOp) and op.is_declaration
        }
        # What a part may refer to and still move.
        self._known = self._declarations.keys() | RUNTIME_FUNCTIONS
        self._run: list[func.FuncOp] = []
        self._needed: set[str] = set()
        self._closed = False

    def add(self, part: func.FuncOp) -> ModuleOp | None:
        """Take `part`; the piece its run makes when the run is full, else None."""
        if self._closed:
            return None
        names = _references(part)
        if not names <= self._known:
            self._closed = True
            return None
        self._run.append(part)
        self._needed |= names
        return self.flush() if len(self._run) >= self._per_piece else None

    def flush(self) -> ModuleOp | None:
        """The parts taken since the last piece, as a piece (None when there are none)."""
        if not self._run:
            return None
        declarations = [
            self._declarations[name].clone()
            if name in self._declarations
            else runtime_declaration(name)
            for name in sorted(self._needed)
        ]
        piece = ModuleOp([d for d in declarations if d is not None])
        piece.attributes.update(self._module.attributes)  # the DLTI saying which MPI
        for part in self._run:
            piece.body.block.add_op(_moved(part))
        self._run, self._needed = [], set()
        return piece


def _moved(part: func.FuncOp) -> func.FuncOp:
    """A public copy of `part` that takes its body, leaving `part` a declaration."""
    part.attributes.pop(STEP, None)
    inputs, outputs = part.function_type.inputs.data, part.function_type.outputs.data
    moved = func.FuncOp(part.sym_name.data, (inputs, outputs), Region())
    part.body.move_blocks(moved.body)
    moved.attributes.update(part.attributes)
    part.attributes.clear()
    part.sym_visibility = StringAttr("private")
    return moved


def unmark_steps(module: ModuleOp) -> None:
    """Take the `dhir.step` marks off the steps left in `module` (nothing after the split
    needs them)."""
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp):
            op.attributes.pop(STEP, None)


def _references(function: func.FuncOp) -> set[str]:
    """The symbols `function` refers to."""
    names: set[str] = set()
    for op in find_ops(function, Operation):
        for attrs in (op.properties, op.attributes):
            for attr in attrs.values():
                if _HOLDS_SYMBOLS[type(attr)]:
                    names.update(_symbols(attr))
    return names


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
