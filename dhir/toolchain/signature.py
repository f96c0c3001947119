"""The entry function's arguments as data: what a backend needs to pass inputs in
and bring results out, and the checks that give users clear errors (dhir.toolchain.entry
reads them from a module; this module needs no xDSL, for `dhir run`'s cached path)."""

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dhir.ir.diagnostics import DhirError, Diagnostic

DYNAMIC = -1


# What an argument of the built entry is to the user (an entry on tensors is bufferized:
# its tensor arguments become memrefs, and each result a memref argument after them).
ARG, INPUT, RESULT = "arg", "input", "result"


@dataclass(frozen=True)
class ArgSpec:
    """One entry argument: a memref (shape, DYNAMIC for `?`) or a scalar (shape None), and
    its name in the program (`%A`: "A"), when it has one. `role`: ARG, a memref or scalar
    argument whose final value is a result too; INPUT, a tensor argument (read, never
    written back); RESULT, where the entry's result number `result` goes (the user gives
    no input for it)."""

    index: int
    mlir_type: str
    dtype: np.dtype
    shape: tuple[int, ...] | None
    name: str | None = None
    role: str = ARG
    result: int | None = None

    @property
    def is_memref(self) -> bool:
        return self.shape is not None

    @property
    def given(self) -> bool:
        """Whether the user gives this argument's value (all but results)."""
        return self.role != RESULT

    @property
    def written(self) -> bool:
        """Whether its final value is one of the run's results."""
        return self.is_memref and self.role != INPUT


@dataclass(frozen=True)
class EntrySignature:
    name: str
    args: tuple[ArgSpec, ...]


def given_args(signature: EntrySignature) -> list[ArgSpec]:
    """The arguments the user gives values for, in order."""
    return [spec for spec in signature.args if spec.given]


def with_results(signature: EntrySignature, inputs: list[object]) -> list[object]:
    """`inputs` (one per given argument) with a zero array put in for each result."""
    if len(inputs) != len(given_args(signature)):
        return inputs  # check_inputs says what is wrong
    given = iter(inputs)
    return [
        next(given) if spec.given else np.zeros(spec.shape or (), spec.dtype)
        for spec in signature.args
    ]


def check_inputs(signature: EntrySignature, inputs: list[object]) -> list[np.ndarray]:
    """Inputs as arrays (0-d for scalars) of the right dtype and shape, or a DhirError."""
    if len(inputs) != len(signature.args):
        raise DhirError(
            [
                Diagnostic(
                    f"@{signature.name} takes {len(signature.args)} arguments, {len(inputs)} given"
                )
            ]
        )
    return [
        _check_input(spec, value, signature.name) for spec, value in zip(signature.args, inputs)
    ]


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
    return np.array(value, order="C", copy=True)


def scalar_range(dtype: np.dtype) -> tuple[int, int] | None:
    """The values an integer (or i1) scalar of `dtype` holds, lowest and highest; None
    for floats."""
    if dtype.kind == "b":
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return None


def _check_scalar(spec: ArgSpec, value: object, where: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise DhirError(
                [Diagnostic(f"{where} is a scalar, but an array of shape {value.shape} was given")]
            )
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    bounds = scalar_range(spec.dtype)
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
                        f"{where}: {value} is out of range for {spec.mlir_type}, which holds "
                        f"{low}..{high}"
                    )
                ]
            )
        return np.asarray(value, dtype=spec.dtype)
    try:
        number = float(value)  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError, OverflowError):
        raise DhirError(
            [Diagnostic(f"{where}: cannot use {value!r} as {spec.mlir_type}")]
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


# In a results directory: the files the last run wrote there, one name a line.
WRITTEN = ".dhir-results"


def output_names(signature: EntrySignature) -> list[list[str]]:
    """Per written argument (`ArgSpec.written`), the files its value goes to: `argK.npy`,
    and `NAME.npy` after its name in the program where that name is a plain one (letters,
    digits, `_`), not of the form argK, and no other argument's; for result K of an entry
    on tensors, `resK.npy`."""
    memrefs = [spec for spec in signature.args if spec.written]
    names = [spec.name for spec in memrefs]
    files = []
    for spec in memrefs:
        if spec.role == RESULT:
            files.append([f"res{spec.result}.npy"])
            continue
        these = [f"arg{spec.index}.npy"]
        name = spec.name
        if name and _PLAIN.fullmatch(name) and not _ARGK.fullmatch(name) and names.count(name) == 1:
            these.append(f"{name}.npy")
        files.append(these)
    return files


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARGK = re.compile(r"arg[0-9]+")


def clear_outputs(signature: EntrySignature, directory: Path) -> None:
    """Remove, before a run starts, the result files it is about to write to DIR and
    those the last run wrote there (listed in DIR/.dhir-results): left there, they would
    look like this run's results if it fails, or like results of this program."""
    try:
        earlier = (directory / WRITTEN).read_text().split("\n")
    except OSError:
        earlier = []
    try:
        for name in [*earlier, *(n for names in output_names(signature) for n in names)]:
            if name and "/" not in name:
                (directory / name).unlink(missing_ok=True)
        (directory / WRITTEN).unlink(missing_ok=True)
    except OSError as error:
        message = f"cannot remove earlier results from {directory}: {error}"
        raise DhirError([Diagnostic(message)]) from None


def _list_written(directory: Path, names: list[str]) -> None:
    """DIR/.dhir-results: `names`, so that the next run into DIR removes them."""
    temporary = directory / f".{WRITTEN}.{uuid.uuid4().hex}.tmp"
    try:
        temporary.write_text("".join(f"{name}\n" for name in names))
        os.replace(temporary, directory / WRITTEN)
    finally:
        temporary.unlink(missing_ok=True)


def save_outputs(results: list[np.ndarray], signature: EntrySignature, directory: Path) -> None:
    """Memref argument K's final value to DIR/argK.npy (and DIR/NAME.npy; result K of an
    entry on tensors to DIR/resK.npy: see `output_names`), as rank 0 does natively, and
    their list to DIR/.dhir-results. Each is written under a temporary name in DIR and
    renamed when all are complete, so a run that fails or is killed never leaves a partial
    file that looks complete; a run stopped between two renames (an error, Ctrl-C,
    SIGTERM) takes back those renamed."""
    written: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    memrefs = [array for spec, array in zip(signature.args, results, strict=True) if spec.written]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for names, array in zip(output_names(signature), memrefs, strict=True):
            for name in names:
                final = directory / name
                temporary = directory / f".{final.name}.{uuid.uuid4().hex}.tmp"
                # Made as open() makes files, 0666 less the umask (mkstemp's are 0600).
                with open(temporary, "xb") as file:
                    written.append((temporary, final))
                    np.save(file, array)
        for temporary, final in written:
            placed.append(final)  # first: a signal may come between the two
            os.replace(temporary, final)
        _list_written(directory, [final.name for _, final in written])
        placed = []  # all in place, and listed: they stay
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot write results to {directory}: {error}")]) from None
    finally:
        for path in [temporary for temporary, _ in written] + placed:
            path.unlink(missing_ok=True)
