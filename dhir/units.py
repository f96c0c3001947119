"""Byte counts as dhir's reports and errors write them, one way everywhere."""

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def byte_size(count: int) -> str:
    """`count` bytes in the largest binary unit that keeps it at least 1, to three
    significant digits: `512 B`, `1.9 KiB`, `3 GiB`, `1020 KiB` (not `1.02e+03 KiB`)."""
    if count < 1024:
        return f"{count} B"
    power = 1
    while count >= 1024 ** (power + 1) and power < len(_UNITS):
        power += 1
    value, unit = count / 1024**power, _UNITS[power - 1]
    text = f"{value:.3g}"
    return f"{value:.0f} {unit}" if "e" in text else f"{text} {unit}"


def bytes_words(count: float) -> str:
    """A byte count that a model holds as a float, for errors: `130 bytes` below 1 KiB,
    else as `byte_size` writes it (`728 TiB`, not `8e+14`)."""
    whole = round(count)
    return f"{whole} bytes" if whole < 1024 else byte_size(whole)
