"""Checks of the options several passes take, as pass errors (dhir-opt reports them as
`error: <pass>: ...`), with the limits `dhir run` holds its options to."""

from xdsl.utils.exceptions import PassFailedException

from dhir.choices import MAX_RANKS


def check_ranks(pass_name: str, ranks: int, what: str = "ranks", least: int = 1) -> None:
    """`ranks` (or another count of ranks or pieces, `what`) from `least` to MAX_RANKS:
    a larger count would make placement and the lowering run for minutes or overflow."""
    if ranks < least:
        raise PassFailedException(f"{pass_name}: {what} must be at least {least}, got {ranks}")
    if ranks > MAX_RANKS:
        raise PassFailedException(f"{pass_name}: {what} must be at most {MAX_RANKS}, got {ranks}")
