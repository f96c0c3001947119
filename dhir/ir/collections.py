"""Fewer garbage collections while dhir builds large IR.

Parsing and lowering a large schedule allocates millions of small objects that stay
alive (ops, uses, attributes); CPython's default collector then runs a full scan over
all of them again and again (docs/performance.md). Raising the
young-generation threshold while IR is built keeps the collector's protection against
cycles and restores the caller's settings afterwards.

The objects that exist when the outermost such block starts (the parsed module a build
lowers) are moved out of the collector's sight with `gc.freeze` until it ends: they were
still in the younger generations, and each of their scans cost more than the young
objects' own. When it ends after a large build, they and the objects made meanwhile
(mostly the IR built, alive) go to the oldest generation unscanned, as if they had
survived the young collections: the first young collection after the block would
otherwise scan everything the block made since its last one (0.03 s after parsing issue
25's program, 0.1 s after building it). A cycle among them that becomes garbage is
freed by the next full collection, which CPython's own rule (a quarter more objects in
the oldest generation than it last found there) does not see them towards: so once
blocks have moved more than a few large builds' objects there, the next outermost block
starts with a full collection, and a process that builds many large programs, one after
another, and drops them does not keep them all. After a small build (parsing a test's
program) the young objects stay young, as they were.

A build that makes more than the young threshold's worth (parsing issue 25's program:
about 2 million) met young collections all the same, each scanning a million live
objects for nothing; a builder that makes IR in a loop calls `settle_young` now and then,
which moves what was made so far out of the young generation unscanned, as the block's
end would.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# A young collection scans every tracked object made since the last one, and nearly all
# of them are the IR being built, alive: each collection costs in proportion to what
# it scans and frees next to nothing. Building issue 25's program (10,000 tasks) makes
# ~0.7 million of them in parsing and as many again in the build: at this threshold it
# meets no collection (at 100,000, 14 of them, ~0.4 s); a larger one still scans each
# object once, as before.
_YOUNG_THRESHOLD = 1_000_000
# Made by a block since its last collection, at least: moved out of the young generation
# unscanned at the block's end. (At 100,000, a block met a young collection before.)
_LARGE_BUILD = 100_000
# Moved to the oldest generation unscanned since the last full collection, at most: about
# three builds of issue 25's program, so that one build meets no full collection.
_FULL_AFTER = 4_000_000
_depth = 0  # blocks open: only the outermost freezes and unfreezes
_unscanned = 0  # moved to the oldest generation unscanned since the last full collection


@contextmanager
def fewer_collections() -> Iterator[None]:
    global _depth, _unscanned
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _YOUNG_THRESHOLD), *before[1:])
    if _depth == 0:
        if _unscanned >= _FULL_AFTER:
            gc.collect()  # what earlier builds left, dropped since
            _unscanned = 0
        gc.freeze()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            if (made := gc.get_count()[0]) >= _LARGE_BUILD:
                gc.freeze()  # the young objects too, and no collection pending
                _unscanned += made
            gc.unfreeze()  # all into the oldest generation
        gc.set_threshold(*before)


def settle_young() -> None:
    """Inside the outermost block, once a large build's worth of objects was made since
    the last collection (or this call), move them out of the young generation unscanned,
    as the block's end does: cheap enough to call once per task a parser builds."""
    global _unscanned
    if _depth and (made := gc.get_count()[0]) >= _LARGE_BUILD:
        gc.freeze()
        _unscanned += made
