"""An executable's files without NumPy, for `dhir run`'s cached path: its inputs staged
from `--input`s (.npy files and TYPE=VALUE scalars), its results saved as .npy files.
Inputs that need NumPy to convert or to say what is wrong with them (another dtype or
byte order, Fortran order, not a .npy file, a scalar out of range) are left to
dhir.toolchain.values."""

import math
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain.npy import header_bytes, read_header
from dhir.toolchain.options import ascii_number
from dhir.toolchain.signature import DYNAMIC, ArgSpec, EntrySignature, given_args

_BOOLEANS = {"true": 1, "false": 0}
# struct's formats of the float widths, which round as NumPy's conversions do.
_FLOATS = {2: "<e", 4: "<f", 8: "<d"}


@dataclass(frozen=True)
class Staged:
    """The inputs as the executable takes them: each memref's file, and per argument
    a memref's shape or a scalar's value (what harness.command_line_args reads)."""

    paths: dict[int, str]
    values: list[tuple[int, ...] | float | int]


def parse_scalar(text: str, kind: str) -> int | float:
    """A scalar `--input`'s value (after `TYPE=`) for NumPy's kind `kind`; ValueError
    when it is not one (Python's int() and float() take "3_000" and "٣" too)."""
    if kind == "f":
        try:
            value = float(ascii_number(text))
        except ValueError:  # C's hex form, as the executable takes it: 0x1.8p1
            value = _from_hex(text)
        if math.isinf(value) and "inf" not in text.lower():
            raise ValueError(f"{text} is past the largest f64")  # 1e309 reads as inf
        return value
    if kind == "b" and text.strip().lower() in _BOOLEANS:
        return _BOOLEANS[text.strip().lower()]
    return int(ascii_number(text), 0)


def _from_hex(text: str) -> float:
    """A float in C's hex form; ValueError when it is not one, or is past the largest f64
    (float.fromhex raises OverflowError then)."""
    if "0x" not in text.lower():  # fromhex takes "1.8p1" too, which C does not
        raise ValueError(f"{text} is not a number")
    try:
        return float.fromhex(ascii_number(text))
    except OverflowError:
        raise ValueError(f"{text} is past the largest f64") from None


def stage_inputs(signature: EntrySignature, texts: list[str], work: Path) -> Staged | None:
    """The `--input`s `texts` staged in `work`; None when one needs NumPy."""
    given = given_args(signature)
    if len(texts) != len(given):
        return None
    text_of = {spec.index: text for spec, text in zip(given, texts)}
    paths: dict[int, str] = {}
    values: list[tuple[int, ...] | float | int] = []
    for spec in signature.args:
        path = work / f"in{spec.index}.raw"
        if spec.is_memref:
            value = _stage_array(text_of.get(spec.index), spec, path)
            paths[spec.index] = str(path)
        else:
            value = _scalar(text_of[spec.index], spec)
        if value is None:
            return None
        values.append(value)
    return Staged(paths, values)


def _stage_array(text: str | None, spec: ArgSpec, path: Path) -> tuple[int, ...] | None:
    """Its raw file at `path` from the .npy file `text` (zeros for a result): its shape."""
    assert spec.shape is not None
    if text is None:  # where a result goes: the executable gets zeros, as the API's path
        if DYNAMIC in spec.shape:
            return None
        with open(path, "wb") as file:
            file.truncate(math.prod(spec.shape) * spec.itemsize)
        return spec.shape
    header = read_header(Path(text))
    if header is None or header.code != spec.code or header.fortran:
        return None
    fits = len(header.shape) == len(spec.shape) and all(
        want in (DYNAMIC, got) for want, got in zip(spec.shape, header.shape)
    )
    size = math.prod(header.shape) * spec.itemsize
    try:
        if not fits or os.path.getsize(text) < header.offset + size:
            return None
        with open(text, "rb") as source, open(path, "wb") as target:
            copy = _copy_booleans if spec.kind == "b" else _copy
            copy(source, header.offset, size, target)
    except OSError:
        return None
    return header.shape


def _scalar(text: str, spec: ArgSpec) -> float | int | None:
    prefix, equals, value = text.partition("=")
    if not equals or prefix != spec.mlir_type:
        return None
    try:
        number = parse_scalar(value, spec.kind)
        if spec.kind == "f":
            (rounded,) = struct.unpack(
                _FLOATS[spec.itemsize], struct.pack(_FLOATS[spec.itemsize], number)
            )
            return rounded
    except (ValueError, OverflowError, KeyError):
        return None
    bounds = spec.integer_range
    assert bounds is not None
    return int(number) if bounds[0] <= number <= bounds[1] else None


def result_writers(
    out: Path, signature: EntrySignature, staged: Staged
) -> list[Callable[[BinaryIO], None]]:
    """For each written argument (`ArgSpec.written`), what writes its result file in
    `out` as a .npy file (see signature.write_outputs), once checked that it is whole."""
    writers = []
    for spec in signature.args:
        if spec.written:
            shape = staged.values[spec.index]
            assert isinstance(shape, tuple)
            path = out / f"arg{spec.index}.raw"
            check_result(path, math.prod(shape), spec.itemsize)
            writers.append(_writer(path, spec.code, shape))
    return writers


def _writer(path: Path, code: str, shape: tuple[int, ...]) -> Callable[[BinaryIO], None]:
    def write(file: BinaryIO) -> None:
        file.write(header_bytes(code, shape))
        file.flush()
        with open(path, "rb") as source:
            _copy(source, 0, os.path.getsize(path), file)

    return write


def check_result(path: Path, count: int, itemsize: int) -> None:
    """A DhirError unless the executable wrote `count` elements of `itemsize` bytes to
    `path`."""
    try:
        size = os.path.getsize(path)
    except OSError as error:
        raise DhirError(
            [Diagnostic(f"the program ended without writing {path.name}: {error}")]
        ) from None
    if size != count * itemsize:
        raise DhirError(
            [Diagnostic(f"{path.name} holds {size // itemsize} elements, expected {count}")]
        )


# Each byte of a bool array as the i1 it stands for: NumPy takes any non-zero byte as True.
_TRUTH = bytes([0] + [1] * 255)
_PIECE = 1 << 20


def _copy_booleans(source: BinaryIO, offset: int, size: int, target: BinaryIO) -> None:
    """`_copy` of a bool array's bytes, each made 0 or 1 (see `_TRUTH`): compiled i1 code
    reads a byte as it is, so 2 would stay 2 through xori and extui."""
    source.seek(offset)
    while size > 0:
        piece = source.read(min(size, _PIECE))
        if not piece:
            raise OSError(f"{source.name} ended early")
        target.write(piece.translate(_TRUTH))
        size -= len(piece)


def _copy(source: BinaryIO, offset: int, size: int, target: BinaryIO) -> None:
    """`size` bytes of `source` from `offset` appended to `target`, in the kernel."""
    while size > 0:
        sent = os.sendfile(target.fileno(), source.fileno(), offset, size)
        if sent == 0:
            raise OSError(f"{source.name} ended early")
        offset, size = offset + sent, size - sent
