"""The entry's argument values as NumPy arrays: each checked against its ArgSpec (the
API's and `--input`'s values), and the results saved as .npy files."""

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain.signature import (
    DYNAMIC,
    RESULT,
    ArgSpec,
    EntrySignature,
    given_args,
    write_outputs,
)
from dhir.units import byte_size


def with_results(signature: EntrySignature, inputs: list[object]) -> list[object]:
    """`inputs` (one per given argument) with a zero array put in for each result."""
    check_given_count(signature, inputs)
    given = iter(inputs)
    return [next(given) if spec.given else _zeros(spec, signature.name) for spec in signature.args]


def _zeros(spec: ArgSpec, entry: str) -> np.ndarray:
    """Where a result goes: zeros of its shape, or a DhirError naming it when they do
    not fit in memory (a `tensor<65536x65536x65536xf64>` result), not a MemoryError that
    `dhir run` reports as a bug in dhir."""
    shape = spec.shape or ()
    with _allocating(spec, entry, shape):
        return np.zeros(shape, spec.dtype)


@contextmanager
def _allocating(spec: ArgSpec, entry: str, shape: tuple[int, ...]) -> Iterator[None]:
    """A MemoryError inside as a DhirError naming argument `spec`, an array of `shape`."""
    try:
        yield
    except MemoryError:
        size = math.prod(shape) * spec.itemsize
        raise DhirError(
            [
                Diagnostic(
                    f"{_named(spec, entry)}: its {byte_size(size)} do not fit in this "
                    "machine's memory"
                )
            ]
        ) from None


def _named(spec: ArgSpec, entry: str) -> str:
    """`spec` as the user knows it: an argument, or a result of an entry on tensors."""
    if spec.role == RESULT:
        return f"result #{spec.result} of @{entry} ({spec.mlir_type})"
    return f"argument #{spec.index} of @{entry} ({spec.mlir_type})"


def check_given_count(signature: EntrySignature, inputs: list[object]) -> None:
    """A DhirError unless there is one input per argument the user gives."""
    _check_count(signature, given_args(signature), inputs)


def check_inputs(
    signature: EntrySignature, inputs: list[object], *, copy: bool = True
) -> list[np.ndarray]:
    """Inputs as arrays (0-d for scalars) of the right dtype and shape, C-ordered in the
    machine's byte order, or a DhirError. `copy`: each memref a fresh copy, for a caller
    that writes into them (the interpreter); without it, an input that already is such an
    array is itself, not to be written (a native run only saves them to files: a copy
    there held each input in memory twice more, once here and once in run_executable)."""
    _check_count(signature, signature.args, inputs)
    return [
        _check_input(spec, value, signature.name, copy)
        for spec, value in zip(signature.args, inputs)
    ]


def _check_count(
    signature: EntrySignature, wanted: Sequence[ArgSpec], inputs: list[object]
) -> None:
    """A DhirError unless there is one input per spec of `wanted`, naming their types as
    `dhir run` does: an entry on tensors counts its arguments, not where its results go."""
    if len(inputs) != len(wanted):
        need = ", ".join(spec.mlir_type for spec in wanted) or "none"
        noun = "argument" if len(wanted) == 1 else "arguments"
        raise DhirError(
            [
                Diagnostic(
                    f"@{signature.name} takes {len(wanted)} {noun} ({need}); {len(inputs)} given"
                )
            ]
        )


def _shape_text(dims: Sequence[str]) -> str:
    """A shape as NumPy writes one, `(20,)` or `(?, 4)`: the wanted shape reads like the
    given array's `.shape` printed beside it."""
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def _input_fix(dtype: np.dtype, shape_ok: bool, dtype_ok: bool) -> str:
    """What to do about an input array whose dtype or shape is not the argument's."""
    if shape_ok:
        return (
            f"convert it (array.astype('{dtype}')), or give the argument the array's element type"
        )
    if dtype_ok:
        return "give an array of that shape (array.reshape), or give the argument the array's shape"
    return "give an array of that shape and dtype, or give the argument the array's type"


def _check_input(spec: ArgSpec, value: object, entry: str, copy: bool) -> np.ndarray:
    where = _named(spec, entry)
    if not spec.is_memref:
        return _check_scalar(spec, value, where)
    if not isinstance(value, np.ndarray):
        raise DhirError(
            [
                Diagnostic(
                    f"{where} is a {spec.array_kind}; give a NumPy array, "
                    f"not {type(value).__name__}"
                )
            ]
        )
    _check_unmasked(value, where)
    assert spec.shape is not None
    shape_ok = len(value.shape) == len(spec.shape) and all(
        want in (DYNAMIC, got) for want, got in zip(spec.shape, value.shape)
    )
    # Another byte order (a big-endian .npy) holds the same values: converted below.
    dtype_ok = value.dtype.newbyteorder("=") == spec.dtype
    if not shape_ok or not dtype_ok:
        want_shape = _shape_text(["?" if d == DYNAMIC else str(d) for d in spec.shape])
        raise DhirError(
            [
                Diagnostic(
                    f"{where} needs an array of shape {want_shape} and dtype {spec.dtype}, "
                    f"got shape {value.shape} and dtype {value.dtype}; "
                    + _input_fix(spec.dtype, shape_ok, dtype_ok)
                )
            ]
        )
    _check_needs(spec, value.shape, where)
    # NumPy takes any non-zero byte as True (a uint8 array viewed as bool); compiled i1
    # code reads the byte as it is, so 2 would stay 2 through xori and extui: such bytes
    # are made 1, in a copy.
    copy = copy or (value.dtype == np.bool_ and bool((value.view(np.uint8) > 1).any()))
    with _allocating(spec, entry, value.shape):
        # C-ordered, keeping 0-d arrays 0-d (np.ascontiguousarray makes them 1-D), in the
        # machine's byte order: a big-endian .npy's values, converted losslessly.
        array = np.array(value, dtype=spec.dtype, order="C", copy=True if copy else None)
    if copy and array.dtype == np.bool_:
        raw = array.view(np.uint8)
        np.minimum(raw, 1, out=raw)
    return array


def _check_needs(spec: ArgSpec, shape: tuple[int, ...], where: str) -> None:
    """Refuse an input too small for an access the program surely runs, before the run
    rather than at the access (with --no-runtime-checks, native code would read or write
    other memory there)."""
    for dim, size, why in spec.needs:
        if shape[dim] < size:
            raise DhirError(
                [
                    Diagnostic(
                        f"{where} is given an array of shape {shape}, but {why}, out of "
                        f"bounds each time the program runs: give at least {size} elements "
                        f"along dimension {dim}, or fix the program's loop bounds"
                    )
                ]
            )


def _check_unmasked(value: np.ndarray, where: str) -> None:
    """Refuse a masked array with elements masked: the program would read the values
    under the mask, as if it had none (for a scalar, `numpy.ma.masked`, 0)."""
    if not (isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value)):
        return
    if value.ndim == 0:
        raise DhirError([Diagnostic(f"{where} is masked; give the value to use instead")])
    count = int(np.ma.count_masked(value))
    raise DhirError(
        [
            Diagnostic(
                f"{where} is a masked array with {count} masked "
                f"{'element' if count == 1 else 'elements'}, which the program would read "
                "as the values under the mask; give array.filled(VALUE) to choose them"
            )
        ]
    )


def _check_scalar(spec: ArgSpec, value: object, where: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise DhirError(
                [Diagnostic(f"{where} is a scalar, but an array of shape {value.shape} was given")]
            )
        _check_unmasked(value, where)
    if _exact_float(spec, value):
        # Its own bits, in either byte order: item() would quiet an f32 NaN that signals.
        return np.array(value, dtype=spec.dtype)
    if isinstance(value, np.ndarray):
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, int | float):  # float("1.5") would take a string too
        raise DhirError(
            [Diagnostic(f"{where}: give a number, not {type(value).__name__} {_short(value)}")]
        )
    _check_kind(spec, value, where)
    bounds = spec.integer_range
    if bounds is not None:
        assert isinstance(value, int)
        low, high = bounds
        if not low <= value <= high:
            raise DhirError(
                [
                    Diagnostic(
                        f"{where}: {_short(value)} is out of range for {spec.mlir_type}, which "
                        f"holds {low}..{high}"
                    )
                ]
            )
        return np.asarray(value, dtype=spec.dtype)
    try:
        number = float(value)  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError, OverflowError):
        raise DhirError(
            [Diagnostic(f"{where}: cannot use {_short(value)} as {spec.mlir_type}")]
        ) from None
    with np.errstate(over="ignore"):
        array = np.asarray(number, dtype=spec.dtype)
    if np.isinf(array) and np.isfinite(number):
        largest = float(np.finfo(spec.dtype).max)
        raise DhirError(
            [
                Diagnostic(
                    f"{where}: {number:g} is out of range for {spec.mlir_type}, whose largest "
                    f"finite value is {largest:g}"
                )
            ]
        )
    return array


def _check_kind(spec: ArgSpec, value: int | float, where: str) -> None:
    """Refuse a number of a kind `--input` refuses for the type: a float for an integer
    (`i32=1e3`, `index=7.0`: an integral one was truncated silently, and int(x) says
    what is meant), a bool for anything but an i1 (`True` ran as 1 in an index)."""
    if isinstance(value, bool) and spec.kind != "b":
        need = "an integer" if spec.integer_range is not None else "a number"
        raise DhirError(
            [Diagnostic(f"{where}: {value!r} is a bool; {spec.mlir_type} needs {need}")]
        )
    if isinstance(value, float) and spec.integer_range is not None:
        hint = f"; give int({value!r})" if value.is_integer() else ""
        raise DhirError(
            [
                Diagnostic(
                    f"{where}: {value!r} is not an integer (it is a float); "
                    f"{spec.mlir_type} needs one{hint}"
                )
            ]
        )


def _exact_float(spec: ArgSpec, value: object) -> bool:
    """Whether `value` is a NumPy float of the scalar `spec`'s own type, to be taken as
    it is, bit for bit (a NaN's payload too)."""
    if spec.kind != "f" or not isinstance(value, np.ndarray | np.generic):
        return False
    return value.dtype.newbyteorder("=") == spec.dtype


def _short(value: object) -> str:
    """`value` as written, cut to 40 characters (10**400 has 401 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]} ({len(text)} characters)"


def save_outputs(results: list[np.ndarray], signature: EntrySignature, directory: Path) -> None:
    """Memref argument K's final value to DIR/argK.npy (and DIR/NAME.npy; result K of an
    entry on tensors to DIR/resK.npy), as rank 0 does natively: see `write_outputs`."""
    memrefs = [array for spec, array in zip(signature.args, results, strict=True) if spec.written]
    writers = [lambda file, array=array: np.save(file, array) for array in memrefs]
    write_outputs(writers, signature, directory)
