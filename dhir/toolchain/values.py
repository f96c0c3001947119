"""The entry's argument values as NumPy arrays: each checked against its ArgSpec (the
API's and `--input`'s values), and the results saved as .npy files."""

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain.signature import DYNAMIC, ArgSpec, EntrySignature, given_args, write_outputs


def with_results(signature: EntrySignature, inputs: list[object]) -> list[object]:
    """`inputs` (one per given argument) with a zero array put in for each result."""
    check_given_count(signature, inputs)
    given = iter(inputs)
    return [
        next(given) if spec.given else np.zeros(spec.shape or (), spec.dtype)
        for spec in signature.args
    ]


def check_given_count(signature: EntrySignature, inputs: list[object]) -> None:
    """A DhirError unless there is one input per argument the user gives."""
    _check_count(signature, given_args(signature), inputs)


def check_inputs(signature: EntrySignature, inputs: list[object]) -> list[np.ndarray]:
    """Inputs as arrays (0-d for scalars) of the right dtype and shape, or a DhirError."""
    _check_count(signature, signature.args, inputs)
    return [
        _check_input(spec, value, signature.name) for spec, value in zip(signature.args, inputs)
    ]


def _check_count(
    signature: EntrySignature, wanted: Sequence[ArgSpec], inputs: list[object]
) -> None:
    """A DhirError unless there is one input per spec of `wanted`, naming their types as
    `dhir run` does: an entry on tensors counts its arguments, not where its results go."""
    if len(inputs) != len(wanted):
        need = ", ".join(spec.mlir_type for spec in wanted) or "none"
        raise DhirError(
            [
                Diagnostic(
                    f"@{signature.name} takes {len(wanted)} arguments ({need}); {len(inputs)} given"
                )
            ]
        )


def _check_input(spec: ArgSpec, value: object, entry: str) -> np.ndarray:
    where = f"argument #{spec.index} of @{entry} ({spec.mlir_type})"
    if not spec.is_memref:
        return _check_scalar(spec, value, where)
    if not isinstance(value, np.ndarray):
        raise DhirError(
            [Diagnostic(f"{where} is a memref; give a NumPy array, not {type(value).__name__}")]
        )
    assert spec.shape is not None
    if value.dtype != spec.dtype and value.dtype.newbyteorder("=") == spec.dtype:
        # Another byte order (a big-endian .npy): the same values, converted losslessly.
        value = value.astype(spec.dtype)
    shape_ok = len(value.shape) == len(spec.shape) and all(
        want in (DYNAMIC, got) for want, got in zip(spec.shape, value.shape)
    )
    if not shape_ok or value.dtype != spec.dtype:
        want_shape = "x".join("?" if d == DYNAMIC else str(d) for d in spec.shape)
        raise DhirError(
            [
                Diagnostic(
                    f"{where} needs an array of shape ({want_shape}) and dtype {spec.dtype}, "
                    f"got shape {value.shape} and dtype {value.dtype}"
                )
            ]
        )
    # A C-ordered copy that keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-D).
    array = np.array(value, order="C", copy=True)
    if array.dtype == np.bool_:
        # NumPy takes any non-zero byte as True (a uint8 array viewed as bool); compiled
        # i1 code reads the byte as it is, so 2 would stay 2 through xori and extui.
        raw = array.view(np.uint8)
        np.minimum(raw, 1, out=raw)
    return array


def _check_scalar(spec: ArgSpec, value: object, where: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise DhirError(
                [Diagnostic(f"{where} is a scalar, but an array of shape {value.shape} was given")]
            )
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, int | float):  # float("1.5") would take a string too
        raise DhirError(
            [Diagnostic(f"{where}: give a number, not {type(value).__name__} {_short(value)}")]
        )
    bounds = spec.integer_range
    if bounds is not None:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):  # bool is an int
            raise DhirError(
                [Diagnostic(f"{where}: {value!r} is not an integer; {spec.mlir_type} needs one")]
            )
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
