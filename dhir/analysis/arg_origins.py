"""Which argument of the entry a run-time size is, where the IR says so before the run.

A failed run-time check (a cast's size, a linalg op's operand sizes, an access past its
memref) reports the numbers it found, but the user gives arguments, not sizes: where a
size is a dimension of an entry's memref argument or the value of an index or integer
argument (followed through `memref.dim`, `arith.index_cast`, the views that keep a
dimension's size, an allocation's or view's run-time sizes, and the arguments of private
functions every call of which passes the same one: the schedule's outlined steps), the
check's message names that argument (an access's index too, where it is an index
argument's value; the interpreter's messages of the same failures name them alike).
Anything else (a size loaded from an array, computed, or passed differently by two
calls) names none: the note is never a guess.
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import BlockArgument, OpResult, SSAValue
from xdsl.traits import SymbolTable

from dhir.analysis.counts import constant_int
from dhir.dialects import arith, func, memref
from dhir.ir.calls import CallSites, call_sites

# How many views, casts and calls a size is followed through: a recursive function's
# arguments would lead round forever.
_MOST_STEPS = 32


@dataclass(frozen=True)
class ArgOrigin:
    """Argument `arg` (its name in the program `name`, where it has one) of the entry
    `entry`: its size along `dim`, or with `dim` None its value."""

    entry: str
    arg: int
    name: str | None
    dim: int | None

    def phrase(self) -> str:
        """`the size of @main's argument %a, dimension 0` or `the value of ... %n`."""
        argument = f"%{self.name}" if self.name else f"#{self.arg}"
        who = f"@{symbol(self.entry)}'s argument {argument}"
        if self.dim is None:
            return f"the value of {who}"
        return f"the size of {who}, dimension {self.dim}"


class ArgOrigins:
    """The entry's arguments that sizes in `module` are; `entry`'s calls and the other
    functions' callers are looked up once, when a size first leads to an argument."""

    def __init__(self, module: ModuleOp, entry: str) -> None:
        self._module = module
        self._entry = entry
        self._calls: CallSites | None = None

    def size(self, memory: SSAValue, dim: int, steps: int = _MOST_STEPS) -> ArgOrigin | None:
        """The argument whose size or value dimension `dim` of `memory` has, if known."""
        kind = memory.type
        if steps <= 0 or not isinstance(kind, MemRefType) or not 0 <= dim < kind.get_num_dims():
            return None
        if kind.get_shape()[dim] != DYNAMIC_INDEX:
            return None  # a number the program gives, no argument
        if isinstance(memory, BlockArgument):
            return self._argument(memory, dim, lambda v: self.size(v, dim, steps - 1))
        assert isinstance(memory, OpResult)
        made, less = memory.op, steps - 1
        if isinstance(made, memref.CastOp | memref.MemorySpaceCastOp):
            return self.size(made.source, dim, less)
        if isinstance(made, memref.AssumeAlignmentOp):
            return self.size(made.memref, dim, less)
        if isinstance(made, memref.AllocOp | memref.AllocaOp):
            return self._given(kind.get_shape(), made.dynamic_sizes, dim, less)
        if isinstance(made, memref.ReinterpretCastOp | memref.SubviewOp):
            sizes = made.static_sizes.get_values()
            if len(sizes) != kind.get_num_dims():
                return None  # a subview that drops dimensions
            return self._given(sizes, made.sizes, dim, less)
        if isinstance(made, memref.ExpandShapeOp):
            given = made.static_output_shape.get_values()
            return self._given(given, made.output_shape, dim, less)
        return None

    def value(self, value: SSAValue, steps: int = _MOST_STEPS) -> ArgOrigin | None:
        """The argument whose value or size `value`, an index or integer, is, if known."""
        if steps <= 0:
            return None
        if isinstance(value, BlockArgument):
            if not _whole_number(value.type):
                return None
            return self._argument(value, None, lambda v: self.value(v, steps - 1))
        assert isinstance(value, OpResult)
        made = value.op
        if isinstance(made, arith.IndexCastOp) and _widens(made.input.type, made.result.type):
            return self.value(made.input, steps - 1)
        if isinstance(made, memref.DimOp):
            dim = constant_int(made.index)
            return None if dim is None else self.size(made.source, dim, steps - 1)
        return None

    def _given(
        self, static: tuple[int, ...], dynamic: object, dim: int, steps: int
    ) -> ArgOrigin | None:
        """Where the `dim`th of a view's or allocation's sizes is a run-time operand of
        `dynamic`, the argument it is."""
        if static[dim] != DYNAMIC_INDEX:
            return None
        operands = list(dynamic)  # pyright: ignore[reportArgumentType, reportUnknownArgumentType]
        position = sum(1 for size in static[:dim] if size == DYNAMIC_INDEX)
        return self.value(operands[position], steps)  # pyright: ignore[reportUnknownArgumentType]

    def _argument(
        self,
        value: BlockArgument,
        dim: int | None,
        through: Callable[[SSAValue], ArgOrigin | None],
    ) -> ArgOrigin | None:
        """The entry's argument `value` is (of a function's entry block: through every
        call of it, `through` following each call's operand)."""
        function = value.owner.parent_op()
        if not isinstance(function, func.FuncOp) or value.owner is not function.body.blocks[0]:
            return None  # a loop's or a region's argument
        name = function.sym_name.data
        sites = self._call_sites()
        calls = sites.of(name)
        if name == self._entry:
            if calls or name in sites.named:
                return None  # called again inside: its arguments are not the run's
            return ArgOrigin(name, value.index, value.name_hint, dim)
        if function.sym_visibility is None or function.sym_visibility.data != "private":
            return None  # called from outside the module, perhaps
        if not calls or name in sites.named:
            return None  # a pointer to it may be called with anything
        found = {
            through(call.arguments[value.index]) if value.index < len(call.arguments) else None
            for call in calls
        }
        return found.pop() if len(found) == 1 else None

    def _call_sites(self) -> CallSites:
        """The module's call sites; none in a piece of a large build without the entry,
        which has no calls to follow."""
        if self._calls is None:
            entry = SymbolTable.lookup_symbol(self._module, self._entry)
            self._calls = (
                call_sites(self._module) if isinstance(entry, func.FuncOp) else CallSites()
            )
        return self._calls


# A name MLIR writes bare after `@`; any other it quotes.
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def symbol(name: str) -> str:
    """`name` as MLIR writes it after `@`: where it is no bare identifier, quoted, with
    `"`, `\\` and the bytes of characters that do not print as `\\XX` (a newline in the
    note cut the line of the failed check that the runtime prints)."""
    if _BARE.fullmatch(name):
        return name
    text = "".join(
        char if char.isprintable() and char not in '"\\' else _escaped(char) for char in name
    )
    return f'"{text}"'


def _escaped(char: str) -> str:
    return "".join(f"\\{byte:02X}" for byte in char.encode())


def _whole_number(kind: object) -> bool:
    """An index, or an integer that an index cast keeps as it is (not an i1: true is -1)."""
    return isinstance(kind, IndexType) or (
        isinstance(kind, IntegerType) and 1 < kind.width.data <= 64
    )


def _widens(source: object, result: object) -> bool:
    """Whether an index cast from `source` to `result` keeps every value."""
    if isinstance(result, IndexType):
        return _whole_number(source)
    return isinstance(result, IntegerType) and result.width.data == 64


def access_note(
    origins: ArgOrigins,
    memory: SSAValue,
    dims: Sequence[int],
    indices: Sequence[SSAValue] | None = None,
) -> str:
    """The note of a failed access of `memory` along `dims`: the arguments its sizes there
    are and, given `indices`, the arguments its indices there are (each after its
    dimension where there are several)."""
    alone = len(dims) == 1
    parts: list[tuple[str, ArgOrigin | None]] = []
    for d in dims:
        parts.append(("" if alone else f"dimension {d}: ", origins.size(memory, d)))
        if indices is not None:
            where = "the index is " if alone else f"the index along dimension {d} is "
            parts.append((where, origins.value(indices[d])))
    return note(*parts)


def note(*origins: tuple[str, ArgOrigin | None]) -> str:
    """` (WORDS the size of @main's argument %a, dimension 0; ...)` for each origin known,
    each after its words; empty where none is."""
    known = [f"{words}{origin.phrase()}" for words, origin in origins if origin is not None]
    return f" ({'; '.join(known)})" if known else ""
