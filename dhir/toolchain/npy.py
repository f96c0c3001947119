"""NumPy's .npy files read and written without NumPy, for `dhir run`'s cached path:
importing NumPy would take a third of its start-up budget (docs/performance.md). Only
what that path needs: a file's header, and a header for raw data. Any file this reader
does not take goes to NumPy's reader, which says what is wrong with it."""

import ast
import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"\x93NUMPY"
# Header lengths are 2 bytes in version 1, 4 in versions 2 and 3.
_LENGTHS = {1: "<H", 2: "<I", 3: "<I"}
# NumPy starts the data at a multiple of this, padding the header with spaces.
_ALIGN = 64


@dataclass(frozen=True)
class Header:
    """A .npy file's header: the elements' dtype string ("<f8"), whether the data is in
    Fortran order, the array's shape, and where the data starts in the file."""

    code: str
    fortran: bool
    shape: tuple[int, ...]
    offset: int


def read_header(path: Path) -> Header | None:
    """`path`'s header, or None when it is not a .npy file with a header of the three
    documented fields."""
    try:
        with open(path, "rb") as file:
            start = file.read(len(MAGIC) + 2)
            length_format = _LENGTHS.get(start[len(MAGIC)]) if len(start) == 8 else None
            if start[: len(MAGIC)] != MAGIC or length_format is None:
                return None
            size = struct.calcsize(length_format)
            (length,) = struct.unpack(length_format, file.read(size))
            text = file.read(length).decode("utf-8")
        fields = ast.literal_eval(text)
    except (OSError, ValueError, SyntaxError, struct.error, UnicodeDecodeError):
        return None
    return _header(fields, len(start) + size + length)


def _header(fields: object, offset: int) -> Header | None:
    if not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}:
        return None
    code, fortran, shape = fields["descr"], fields["fortran_order"], fields["shape"]
    if not isinstance(code, str) or not isinstance(fortran, bool) or not isinstance(shape, tuple):
        return None
    if not all(type(n) is int and n >= 0 for n in shape):
        return None
    return Header(code, fortran, shape, offset)


def header_bytes(code: str, shape: tuple[int, ...]) -> bytes:
    """A version 1 header for C-ordered data of dtype string `code` and `shape`."""
    text = f"{{'descr': {code!r}, 'fortran_order': False, 'shape': {shape!r}, }}"
    used = len(MAGIC) + 2 + 2 + len(text) + 1  # the trailing newline
    text += " " * (-used % _ALIGN) + "\n"
    return MAGIC + b"\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin-1")
