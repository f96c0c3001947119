"""dhir.ir.collections: fewer collections while IR is built, the caller's settings back
afterwards, and the objects that existed before out of the collector's sight meanwhile."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from dhir.ir.collections import fewer_collections, settle_young


def test_outer_block_freezes_and_restores() -> None:
    before = gc.get_threshold()
    existing = [object() for _ in range(3)]  # untracked, but the list is tracked
    with fewer_collections():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert gc.get_threshold()[0] >= 100_000
        with fewer_collections():  # a parse inside a build: nothing more frozen
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen  # the inner block unfroze nothing
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    assert existing


def test_cycles_made_meanwhile_are_collected_after() -> None:
    class Node:
        other: "Node"

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
    gc.collect()
    assert not any(type(o) is Node for o in gc.get_objects())


def test_an_error_inside_restores() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise ValueError
    except ValueError:
        pass
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_ir_built_inside_is_scanned_by_no_young_collection() -> None:
    """Building issue 25's program makes ~0.7 million tracked objects a block, nearly
    all alive: a young collection every 100,000 scanned them for nothing (~0.4 s), and
    the first one after the block scanned what was left."""
    with _collections_started() as generations:
        with fewer_collections():
            kept = [[k] for k in range(500_000)]
        pending = gc.get_count()[0]
    assert generations == []
    assert pending == 0  # what the block made is no young collection's to scan
    assert len(kept) == 500_000


def test_a_small_build_leaves_its_objects_young() -> None:
    """Dropped IR of a small build (a test's program, in a process making many) is
    freed by the young collections, as before: the first one after the block scans
    what it made."""
    with _collections_started() as generations:
        with fewer_collections():
            kept = [[k] for k in range(5_000)]
        more = [[k] for k in range(10)]
    assert generations[:1] == [0]
    assert len(kept) + len(more) == 5_010


def test_large_builds_dropped_one_after_another_are_freed() -> None:
    """Each block's objects go to the oldest generation unscanned, where CPython's rule
    for a full collection does not count them: without a full collection now and then,
    a process building large programs one after another would keep every one."""

    class Node:
        other: "Node"

    gc.collect()
    for _ in range(12):  # 12 x 500,000 objects: over the 4 million that start one
        with fewer_collections():
            a, b = Node(), Node()
            a.other, b.other = b, a
            built = [[k, a] for k in range(500_000)]
        del a, b, built  # the cycle is garbage now, in the oldest generation
    assert sum(type(o) is Node for o in gc.get_objects()) < 2 * 9


def test_a_build_larger_than_the_threshold_that_settles_meets_no_young_collection() -> None:
    """Parsing issue 25's program (10,000 tasks) made about 2 million objects, past the
    young threshold twice: two young collections scanned a million live objects each
    (0.4 s). The parser settles them as it goes (`settle_young`, once per task)."""
    with _collections_started() as generations:
        with fewer_collections():
            kept: list[list[int]] = []
            for start in range(0, 1_200_000, 10_000):
                kept += [[k] for k in range(start, start + 10_000)]
                settle_young()
        settle_young()  # outside a block: nothing frozen
        frozen = gc.get_freeze_count()
    assert generations == []
    assert frozen == 0
    assert len(kept) == 1_200_000


@contextmanager
def _collections_started() -> Iterator[list[int]]:
    """The generation of each collection the collector starts inside (after a full one
    before, so that none is pending)."""
    generations: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        yield generations
    finally:
        gc.callbacks.remove(count)
