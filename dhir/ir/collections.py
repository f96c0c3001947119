"""Fewer garbage collections while dhir builds large IR.

Parsing and lowering a large schedule allocates millions of small objects that stay
alive (ops, uses, attributes); CPython's default collector then runs a full scan over
all of them again and again (docs/performance.md). Raising the
young-generation threshold while IR is built keeps the collector's protection against
cycles and restores the caller's settings afterwards.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_YOUNG_THRESHOLD = 100_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
