"""Byte counts, written one way by every report and error (dhir.units)."""

import pytest

from dhir.units import byte_size, bytes_words


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1950, "1.9 KiB"),
        (3 << 30, "3 GiB"),
        (int(1.25 * (1 << 20)), "1.25 MiB"),
        (123_456_789, "118 MiB"),
        (1020 << 10, "1020 KiB"),  # dhir schedule's before: 1.02e+03 KiB
        (999_900, "976 KiB"),
        ((1 << 20) - 1, "1024 KiB"),
        (1 << 70, "1024 EiB"),
    ],
)
def test_byte_size(count: int, text: str) -> None:
    assert byte_size(count) == text


def test_bytes_words_keeps_small_counts_in_bytes() -> None:
    assert bytes_words(130.0) == "130 bytes"
    assert bytes_words(8e14) == "728 TiB"
