"""The entry function's arguments as data: what a backend needs to pass inputs in and
bring results out, and where the results go (dhir.toolchain.entry reads the arguments
from a module; dhir.toolchain.values checks values against them). This module loads
neither xDSL nor NumPy, for `dhir run`'s cached path."""

import os
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from dhir.ir.diagnostics import DhirError, Diagnostic

if TYPE_CHECKING:
    import numpy as np

DYNAMIC = -1


# What an argument of the built entry is to the user (an entry on tensors is bufferized:
# its tensor arguments become memrefs, and each result a memref argument after them).
ARG, INPUT, RESULT = "arg", "input", "result"


@dataclass(frozen=True)
class ArgSpec:
    """One entry argument: a memref (shape, DYNAMIC for `?`) or a scalar (shape None) of
    elements `code` (NumPy's dtype string, "<f8"), and its name in the program (`%A`:
    "A"), when it has one. `role`: ARG, a memref or scalar argument whose final value is
    a result too; INPUT, a tensor argument (read, never written back); RESULT, where the
    entry's result number `result` goes (the user gives no input for it). `needs`: the
    least sizes of its dimensions of dynamic size that its inputs must have."""

    index: int
    mlir_type: str
    code: str
    shape: tuple[int, ...] | None
    name: str | None = None
    role: str = ARG
    result: int | None = None
    # (dimension, size, why): a dimension of dynamic size must hold at least size
    # elements, as an access the program surely runs needs (dhir.analysis.bounds).
    needs: tuple[tuple[int, int, str], ...] = ()

    @property
    def array_kind(self) -> str:
        """What errors call an argument given an array: "tensor" or "memref"."""
        return "tensor" if self.mlir_type.startswith("tensor") else "memref"

    @property
    def dtype(self) -> "np.dtype":
        import numpy as np  # only here: the cached path reads `kind` and `itemsize`

        return np.dtype(self.code)

    @property
    def kind(self) -> str:
        """NumPy's kind of the elements: "f", "i", "u" or "b"."""
        return self.code[1]

    @property
    def itemsize(self) -> int:
        return int(self.code[2:])

    @property
    def integer_range(self) -> tuple[int, int] | None:
        """The values an integer (or i1) element holds, lowest and highest; None for
        floats."""
        bits = 8 * self.itemsize
        if self.kind == "b":
            return 0, 1
        if self.kind == "u":
            return 0, 2**bits - 1
        if self.kind == "i":
            return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return None

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


# In a results directory: the files the last run wrote there, one name a line.
WRITTEN = ".dhir-results"


def output_names(signature: EntrySignature) -> list[list[str]]:
    """Per written argument (`ArgSpec.written`), the files its value goes to: `argK.npy`,
    and `NAME.npy` after its name in the program where that name is a plain one (letters,
    digits, `_`), not of the form argK or resK, and no other argument's; for result K of an
    entry on tensors, `resK.npy`."""
    memrefs = [spec for spec in signature.args if spec.written]
    names = [spec.name for spec in memrefs]
    files = []
    for spec in memrefs:
        if spec.role == RESULT:
            files.append([f"res{spec.result}.npy"])
            continue
        these = [f"arg{spec.index}.npy"]
        name = spec.name
        plain = name and _PLAIN.fullmatch(name) and not _NUMBERED.fullmatch(name)
        if plain and names.count(name) == 1:
            these.append(f"{name}.npy")
        files.append(these)
    return files


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The names of the files by position: an argument named %arg1 or %res0 would take one.
_NUMBERED = re.compile(r"(arg|res)[0-9]+")


def clear_outputs(signature: EntrySignature, directory: Path) -> None:
    """Remove, before a run starts, the result files it is about to write to DIR and
    those the last run wrote there (listed in DIR/.dhir-results): left there, they would
    look like this run's results if it fails, or like results of this program."""
    if directory.exists() and not directory.is_dir():
        raise DhirError(
            [Diagnostic(f"the output directory {directory} is a file; name a directory")]
        )
    try:  # made now: a folder that cannot be made would lose the results after the run
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        message = f"cannot write results to {directory}: {error.strerror or error}"
        raise DhirError([Diagnostic(message)]) from None
    _check_writable(directory)
    try:
        earlier = (directory / WRITTEN).read_text().split("\n")
    except OSError:
        earlier = []
    # An earlier result goes only if it is as that run left it: a file the user has put
    # there since, under the same name, stays.
    kept = [name for name, _, stamp in (line.partition("\t") for line in earlier)
            if stamp and _stamp(directory / name) != stamp]  # fmt: skip
    try:
        for line in [*earlier, *(n for names in output_names(signature) for n in names)]:
            name = line.partition("\t")[0]
            if name and "/" not in name and name not in kept:
                (directory / name).unlink(missing_ok=True)
        (directory / WRITTEN).unlink(missing_ok=True)
    except OSError as error:
        message = f"cannot remove earlier results from {directory}: {error.strerror or error}"
        raise DhirError([Diagnostic(message)]) from None


def _check_writable(directory: Path) -> None:
    """Refuse a folder that takes no file (read-only, another user's, sysfs) now: its
    results would be lost after the run. A file is made to find out, as permissions
    alone do not say (root passes them, a read-only mount does not)."""
    probe = directory / f".dhir-probe.{uuid.uuid4().hex}.tmp"
    try:
        with open(probe, "xb"):
            pass
        probe.unlink()
    except OSError as error:
        message = (
            f"cannot write results to {directory}: {error.strerror or error}; choose a "
            "folder you may write to"
        )
        raise DhirError([Diagnostic(message)]) from None


def spare_inputs(inputs: Sequence[Path], directory: Path) -> None:
    """Take this run's input files off DIR/.dhir-results, so that `clear_outputs` keeps
    them: a result of the last run that the user feeds to this one (a chain of runs
    through one directory) is their data now, not a leftover."""
    listing = directory / WRITTEN
    try:
        lines = listing.read_text().split("\n")
    except OSError:
        return  # no list, nothing is removed as listed
    given = {path.resolve() for path in inputs}
    kept = [line for line in lines if (directory / line.partition("\t")[0]).resolve() not in given]
    if len(kept) == len(lines):
        return
    temporary = directory / f".{WRITTEN}.{uuid.uuid4().hex}.tmp"
    try:
        temporary.write_text("\n".join(kept))
        os.replace(temporary, listing)
    except OSError as error:
        message = f"cannot update {listing}: {error.strerror or error}"
        raise DhirError([Diagnostic(message)]) from None
    finally:
        temporary.unlink(missing_ok=True)


def _stamp(path: Path) -> str:
    """A file's size and modification time ("" if it is not there)."""
    try:
        status = path.stat()
    except OSError:
        return ""
    return f"{status.st_size}:{status.st_mtime_ns}"


def _list_written(directory: Path, names: list[str]) -> None:
    """DIR/.dhir-results: `names`, each with its stamp, so that the next run into DIR
    removes them if they are still as written."""
    temporary = directory / f".{WRITTEN}.{uuid.uuid4().hex}.tmp"
    try:
        temporary.write_text("".join(f"{name}\t{_stamp(directory / name)}\n" for name in names))
        os.replace(temporary, directory / WRITTEN)
    finally:
        temporary.unlink(missing_ok=True)


def write_outputs(
    writers: Sequence[Callable[[BinaryIO], None]], signature: EntrySignature, directory: Path
) -> None:
    """Each written argument's final value (`ArgSpec.written`, in order; `writers` put
    one into an open .npy file) to its files in DIR (`output_names`), and their list to
    DIR/.dhir-results. Each is written under a temporary name in DIR and renamed when all
    are complete, so a run that fails or is killed never leaves a partial file that looks
    complete; a run stopped between two renames (an error, Ctrl-C, SIGTERM) takes back
    those renamed."""
    written: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for names, write in zip(output_names(signature), writers, strict=True):
            for name in names:
                final = directory / name
                temporary = directory / f".{final.name}.{uuid.uuid4().hex}.tmp"
                # Made as open() makes files, 0666 less the umask (mkstemp's are 0600).
                with open(temporary, "xb") as file:
                    written.append((temporary, final))
                    write(file)
        for temporary, final in written:
            placed.append(final)  # first: a signal may come between the two
            os.replace(temporary, final)
        _list_written(directory, [final.name for _, final in written])
        placed = []  # all in place, and listed: they stay
    except OSError as error:
        message = f"cannot write results to {directory}: {error.strerror or error}"
        raise DhirError([Diagnostic(message)]) from None
    finally:
        for path in [temporary for temporary, _ in written] + placed:
            path.unlink(missing_ok=True)
