"""Fewer garbage collections while dhir builds large IR.

Parsing and lowering a large schedule allocates millions of small objects that stay
alive (ops, uses, attributes); CPython's default collector then runs a full scan over
all of them again and again (docs/performance.md). Raising the
young-generation threshold while IR is built keeps the collector's protection against
cycles and restores the caller's settings afterwards.

The objects that exist when the outermost such block starts (the parsed module a build
lowers) are moved out of the collector's sight with `gc.freeze` until it ends: they were
still in the younger generations, and each of their scans cost more than the young
objects' own. A cycle among them that becomes garbage meanwhile is freed after the block,
not during it.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_YOUNG_THRESHOLD = 100_000
_depth = 0  # blocks open: only the outermost freezes and unfreezes


@contextmanager
def fewer_collections() -> Iterator[None]:
    global _depth
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _YOUNG_THRESHOLD), *before[1:])
    if _depth == 0:
        gc.freeze()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.unfreeze()
        gc.set_threshold(*before)
