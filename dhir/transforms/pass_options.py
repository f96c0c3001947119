"""Checks of the options several passes take, as pass errors (dhir-opt reports them as
`error: <pass>: ...`), with the limits `dhir run` holds its options to."""

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from dhir.choices import MAX_RANKS
from dhir.dialects import func


def check_ranks(pass_name: str, ranks: int, what: str = "ranks", least: int = 1) -> None:
    """`ranks` (or another count of ranks or pieces, `what`) from `least` to MAX_RANKS:
    a larger count would make placement and the lowering run for minutes or overflow."""
    if ranks < least:
        raise PassFailedException(f"{pass_name}: {what} must be at least {least}, got {ranks}")
    if ranks > MAX_RANKS:
        raise PassFailedException(f"{pass_name}: {what} must be at most {MAX_RANKS}, got {ranks}")


def check_entry(pass_name: str, module: ModuleOp, entry: str | None) -> None:
    """An `entry` named (None: none) must be a function of `module` with a body: a pass
    given a name no function has would otherwise skip what it does for the entry."""
    if entry is None:
        return
    functions = [f for f in module.body.block.ops if isinstance(f, func.FuncOp) and f.body.blocks]
    if any(f.sym_name.data == entry for f in functions):
        return
    raise PassFailedException(
        f"{pass_name}: the module has no function @{entry} with a body; "
        f"name one of: {', '.join('@' + f.sym_name.data for f in functions) or 'none'}"
    )


def named_entry(pass_name: str, module: ModuleOp, entry: str | None) -> str:
    """The entry whose arguments a check pass's failures name: `entry` where given, which
    must then be a function of `module` with a body; else `main`, which a module may lack
    (a piece of a large build holds no entry)."""
    check_entry(pass_name, module, entry)
    return "main" if entry is None else entry
