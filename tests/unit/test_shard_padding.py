"""The choice of each float argument's padding (dhir/toolchain/shard_padding.py): a
system of parities over GF(2), checked against every assignment of signs."""

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from dhir.toolchain.shard_padding import _positive  # pyright: ignore[reportPrivateUsage]

ARGUMENTS = 5
conditions = st.lists(st.tuples(st.integers(0, 2**ARGUMENTS - 1), st.integers(0, 1)), max_size=7)


def _holds(negative: tuple[int, ...], mask: int, parity: int) -> bool:
    return sum(negative[a] for a in range(ARGUMENTS) if mask >> a & 1) % 2 == parity


@settings(max_examples=300, deadline=None)
@given(conditions)
def test_the_signs_chosen_meet_every_condition_and_exist_whenever_some_do(
    signs: list[tuple[int, int]],
) -> None:
    chosen = _positive(signs)
    some = [
        negative
        for negative in product([0, 1], repeat=ARGUMENTS)
        if all(_holds(negative, mask, parity) for mask, parity in signs)
    ]
    assert (chosen is None) == (not some)
    if chosen is not None:
        negative = tuple(int(a not in chosen) for a in range(ARGUMENTS))
        assert all(_holds(negative, mask, parity) for mask, parity in signs)


def test_arguments_no_condition_names_are_padded_with_negative_zero() -> None:
    assert _positive([]) == set()
    assert _positive([(0b011, 1)]) == {1}  # A * B: one of them +0.0, the other -0.0 (free)
    assert _positive([(0b001, 1), (0b011, 1)]) == {1}
    assert _positive([(0b001, 1), (0b010, 1), (0b011, 1)]) is None
