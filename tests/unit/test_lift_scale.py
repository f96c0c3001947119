"""Lifted expressions whose parts are shared: hashing one follows each part once, and
isl is not handed a text that doubles with each step."""

from dhir.analysis.lift import ISL_ATOMS, Affine, Div, Mod, interval, isl_text, leaf


class _Counted(str):
    """A leaf's name that counts how often it is hashed."""

    hashed = 0

    def __hash__(self) -> int:
        _Counted.hashed += 1
        return str.__hash__(self)


def _halves(length: int, name: str) -> Affine:
    """`length` values, each the last floor-divided by 2 plus the last mod 2."""
    x = leaf(name)
    for _ in range(length):
        x = Affine.of(Div(x, 2)) + Affine.of(Mod(x, 2))
    return x


def test_shared_parts_are_hashed_once() -> None:
    """Each step hashed every path through the last one: 2**length leaf hashes (the
    lowering of a chain of 20 such affine.apply did not end in a minute)."""
    _Counted.hashed = 0
    x = _halves(16, _Counted("i"))
    assert hash(x) == hash(x)
    assert _Counted.hashed <= 4


def test_a_text_too_long_for_isl_is_unknown() -> None:
    """Written out, the chain's text doubles with each step: past ISL_ATOMS atoms it is
    unknown (the worst case) rather than seconds of isl parsing."""
    assert 2**16 > ISL_ATOMS
    assert isl_text(_halves(16, "i"), {}) is None
    short = isl_text(_halves(2, "i"), {})
    assert short == (
        "(floor(((floor((i)/2)) + ((i) mod 2))/2)) + (((floor((i)/2)) + ((i) mod 2)) mod 2)"
    )


def test_shared_parts_are_bounded_once() -> None:
    """Bounding the chain asked for the leaf's range once per path: 2**length times (a
    chain of 32 such affine.apply hung `dhir schedule`)."""
    asked: list[object] = []

    def ranges(key: object) -> tuple[int, int]:
        asked.append(key)
        return 0, 63

    assert interval(_halves(16, "i"), ranges) is not None
    assert len(asked) == 1
