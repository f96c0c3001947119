"""Following a module's calls backwards: which functions reach, through calls, one that
has some property (holds a schedule, uses a mutable global, communicates); and each
function's call sites, for analyses that follow an argument to what its calls pass."""

from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Operation

from dhir.dialects import func
from dhir.ir.walk import find_ops

Why = TypeVar("Why")
Name = TypeVar("Name", bound=Hashable)


def through_callers(
    found: Mapping[Name, Why], callers: Mapping[Name, Iterable[Name]]
) -> dict[Name, Why]:
    """The functions of `found` (name -> why it has the property: an op, a name), and
    every function that calls one of them, directly or through other calls, each with
    the reason of one of `found` that it reaches by fewest calls. `callers`: callee name
    -> the names of the functions that call it. (Any graph's nodes will do for names:
    dhir.analysis.sharing follows function arguments passed on by calls.)

    Each function is reached once, from its callee: repeating over all functions until
    nothing changed took functions**2 steps on a chain of calls."""
    reached = dict(found)
    work = deque(reached)
    while work:
        callee = work.popleft()
        for caller in callers.get(callee, ()):
            if caller not in reached:
                reached[caller] = reached[callee]
                work.append(caller)
    return reached


def callers_of(module: ModuleOp) -> dict[str, dict[str, None]]:
    """Callee name -> the names of `module`'s functions whose bodies hold a `func.call` of
    it, in the order of their first such call: the `callers` of `through_callers`. A
    callee the module does not define is a key too."""
    callers: dict[str, dict[str, None]] = {}
    for function in module.body.block.ops:
        if isinstance(function, func.FuncOp):
            name = function.sym_name.data
            for call in find_ops(function, func.CallOp):
                callers.setdefault(call.callee.string_value(), {})[name] = None
    return callers


@dataclass(frozen=True)
class CallSites:
    """The `func.call`s of each function by name, and the names of the functions named
    otherwise than by a call (a pointer to one may be called with anything)."""

    calls: Mapping[str, list[func.CallOp]] = field(default_factory=dict[str, list[func.CallOp]])
    named: frozenset[str] = frozenset()

    def of(self, name: str) -> list[func.CallOp]:
        return self.calls.get(name, [])


def call_sites(module: Operation) -> CallSites:
    """`module`'s call sites, in one walk."""
    calls: dict[str, list[func.CallOp]] = {}
    named: set[str] = set()
    for op in module.walk():
        if isinstance(op, func.CallOp):
            calls.setdefault(op.callee.string_value(), []).append(op)
            continue
        named.update(_named(op))
    return CallSites(calls, frozenset(named))


def _named(op: Operation) -> Iterator[str]:
    """The symbols `op`'s attributes and properties name, at their top or in an array
    (a function named in a list is as much a pointer to it)."""
    values = [*op.properties.values(), *op.attributes.values()]
    while values:
        value = values.pop()
        if isinstance(value, SymbolRefAttr):
            yield value.root_reference.data
        elif isinstance(value, ArrayAttr):
            values.extend(value.data)
