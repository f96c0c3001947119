"""Looking symbols up many times in IR that does not change meanwhile.

xDSL's `SymbolTable.lookup_symbol` reads the name of every op of the nearest symbol table
at each lookup, so following each call of a module of many functions is quadratic in
them (a chain of a thousand functions took a minute to cost, and as long to interpret).
`Symbols` reads each table's names once and answers as `lookup_symbol` does.
"""

from xdsl.dialects.builtin import SymbolRefAttr
from xdsl.ir import Operation
from xdsl.traits import SymbolOpInterface, SymbolTable


class Symbols:
    """`SymbolTable.lookup_symbol`, from a table of names made once per symbol table: for
    IR whose symbols do not change while it is used."""

    def __init__(self) -> None:
        self._tables: dict[Operation, dict[str, Operation]] = {}

    def lookup(self, op: Operation, name: SymbolRefAttr) -> Operation | None:
        """The op that `name` refers to, seen from `op` (None: no such symbol)."""
        table = op.parent_op()
        while table is not None and not table.has_trait(SymbolTable):
            table = table.parent_op()
        if table is None or name.nested_references.data:
            # No table (lookup_symbol says so), or @outer::@inner: rare, looked up.
            return SymbolTable.lookup_symbol(op, name)
        if (symbols := self._tables.get(table)) is None:
            symbols = self._tables[table] = _symbols(table)
        return symbols.get(name.root_reference.data)


def _symbols(table: Operation) -> dict[str, Operation]:
    """The ops of a symbol table by name; the first of a name, as lookup_symbol finds."""
    symbols: dict[str, Operation] = {}
    for op in table.regions[0].block.ops:
        interface = op.get_trait(SymbolOpInterface)
        name = interface.get_sym_attr_name(op) if interface is not None else None
        if name is not None:
            symbols.setdefault(name.data, op)
    return symbols
