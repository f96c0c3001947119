"""What `dhir run` reads and writes on the command line, loaded without xDSL (for its
cached path, dhir/cli/cached_run.py): inputs (`--input`), printed results (`--print`),
and the description `dhir compile` writes beside an executable."""

import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError
from typing import TYPE_CHECKING

from dhir.ir.diagnostics import DhirError, Diagnostic, as_written
from dhir.toolchain.npy import MAGIC, read_header
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import (
    ARG,
    INPUT,
    RESULT,
    ArgSpec,
    EntrySignature,
    given_args,
    output_names,
    spare_inputs,
)
from dhir.toolchain.staging import parse_scalar

if TYPE_CHECKING:
    import numpy as np

INPUT_HELP = (
    "one per entry argument, in order: a .npy file for a memref or tensor argument, "
    "TYPE=VALUE for a scalar (f32=2.5, i64=7, index=3)"
)


def read_inputs(values: list[str], signature: EntrySignature) -> list[object]:
    """The values of the arguments the user gives (an entry on tensors: its arguments, not
    where its results go), read from `--input`s."""
    given = given_args(signature)
    if len(values) != len(given):
        need = ", ".join(spec.mlir_type for spec in given) or "none"
        noun = "argument" if len(given) == 1 else "arguments"
        raise DhirError(
            [
                Diagnostic(
                    f"@{signature.name} takes {len(given)} {noun} ({need}); "
                    f"{len(values)} --input given; give {INPUT_HELP}"
                )
            ]
        )
    return [_read_input(text, spec) for text, spec in zip(values, given)]


def check_apart(
    inputs: list[str],
    signature: EntrySignature,
    output_dir: Path | None,
    others: dict[str, Path | None] | None = None,
) -> None:
    """Refuse a run that would write its results, or the files `others` name (option:
    path, e.g. --trace), over an input file or over each other: the user's data would
    be lost without a word (results are named after the arguments, as inputs often are).
    Input files that the last run into `output_dir` wrote are kept from the removal of
    its results (`spare_inputs`)."""
    seen: dict[Path, str] = {}
    files = [text for text, spec in zip(inputs, given_args(signature)) if spec.is_memref]
    for text in files:
        seen.setdefault(Path(text).resolve(), f"--input {text}")
    written: list[tuple[str, Path]] = []
    if output_dir is not None:
        names = [name for these in output_names(signature) for name in these]
        written += [(f"--output-dir {output_dir} (its {f})", output_dir / f) for f in names]
    others = others or {}
    written += [(f"{option} {path}", path) for option, path in others.items() if path is not None]
    for option, path in written:
        key = path.resolve()
        if key in seen:
            raise DhirError(
                [Diagnostic(f"{option} would be written over {seen[key]}; choose another path")]
            )
        seen[key] = option
    if output_dir is not None:
        spare_inputs([Path(text) for text in files], output_dir)


# How a scalar's --input starts (i32=, f64=, index=, ...).
_SCALAR_GIVEN = re.compile(r"(index|[su]?i[0-9]+|f[0-9]+|bf16|tf32)=")


def _read_input(text: str, spec: ArgSpec) -> object:
    where = f"--input for argument #{spec.index} ({spec.mlir_type})"
    if not spec.is_memref:
        prefix, sep, value = text.partition("=")
        if not sep or prefix != spec.mlir_type:
            raise DhirError([Diagnostic(f"{where} must be {spec.mlir_type}=VALUE, got '{text}'")])
        # The range is checked with the API's inputs (check_inputs).
        return _parse_scalar(value, spec, where)
    if _SCALAR_GIVEN.match(text) and not Path(text).exists():  # not a file of that name
        raise DhirError(
            [
                Diagnostic(
                    f"{where}: '{text}' is a scalar's TYPE=VALUE, but the argument is a "
                    f"{spec.array_kind}: give a .npy file of its array (numpy.save)"
                )
            ]
        )
    try:
        with open(text, "rb") as file:
            magic = file.read(len(MAGIC))
            if magic != MAGIC:
                raise DhirError(
                    [
                        Diagnostic(
                            f"{where}: '{text}' is not a .npy file (it does not start with "
                            "NumPy's header); save the array with numpy.save"
                        )
                    ]
                )
            file.seek(0)
            import numpy as np  # only here: the cached path reads .npy files itself

            _check_size(Path(text), where)
            return np.load(file, allow_pickle=False)
    except (OSError, ValueError, SyntaxError, TokenError, MemoryError) as error:
        # An OSError's own words, not Python's "[Errno 2] ...: 'name'"; for a header that
        # is not Python's syntax, what that means, not the tokenizer's tuple.
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        if isinstance(error, SyntaxError | TokenError):
            reason = "its header is damaged (not the text numpy.save writes)"
        raise DhirError(
            [Diagnostic(f"{where}: cannot read '{text}' as a .npy file: {reason}")]
        ) from None


def _parse_scalar(value: str, spec: ArgSpec, where: str) -> int | float:
    try:
        return parse_scalar(value, spec.kind)
    except ValueError:
        noun = f"{_article(spec.mlir_type)} {spec.mlir_type}"
        hint = _WRITTEN.get(spec.kind, _WRITTEN["i"])
        raise DhirError([Diagnostic(f"{where}: '{value}' is not {noun}; {hint}")]) from None


# How a scalar `--input`'s value is written, by NumPy's kind of its type.
_WRITTEN = {
    "f": "give a number: 2.5, -1e-3, 0x1.8p1, inf or nan",
    "b": "give 0, 1, true or false",
    "i": "give an integer written as one: 1000, -3, 0x7f, 0o17, 0b101 (not 1e3 or 7.0)",
}


def _article(type_name: str) -> str:
    """ "an" before a vowel sound: an index, an i8, an f32 (said "ef"); a bf16."""
    said_with_a_vowel = type_name[:1] in "aeiou" or (
        type_name[:1] in "fhlmnrsx" and type_name[1:2].isdigit()
    )
    return "an" if said_with_a_vowel else "a"


def report_results(
    results: "list[np.ndarray]", signature: EntrySignature, printing: bool, output_dir: Path | None
) -> None:
    """`--print`, or a word on where the results went."""
    if printing:
        print_results(results, signature)
    elif output_dir is None and any(spec.written for spec in signature.args):
        print(
            "dhir run: the results were not kept: --output-dir DIR saves them (argK.npy, and "
            "NAME.npy after the argument's name), --print prints them",
            file=sys.stderr,
        )


def print_results(results: "list[np.ndarray]", signature: EntrySignature) -> None:
    import numpy as np

    for spec, array in zip(signature.args, results):
        if spec.written:
            label = f"res{spec.result}" if spec.role == RESULT else f"arg{spec.index}"
            print(f"{label}: {spec.mlir_type} =")
            print(np.array2string(array, threshold=10_000))


# --- executables built by `dhir compile` carry a JSON description beside them ---------


def sidecar(exe: Path) -> Path:
    return exe.with_name(exe.name + ".dhir.json")


def describe(
    signature: EntrySignature, options: RunOptions, report: Sequence[str] = ()
) -> dict[str, object]:
    """What `dhir compile` writes beside an executable; `report`: the build's lines of
    `--timing` (`split: ...`, `optimizer: ...`), which `dhir run EXE --timing` prints."""
    args = [
        {
            "type": s.mlir_type,
            "dtype": s.code,
            "shape": s.shape,
            "name": s.name,
            "role": s.role,
            "result": s.result,
            "needs": [list(need) for need in s.needs],
        }
        for s in signature.args
    ]
    return {
        "entry": signature.name,
        "ranks": options.ranks,
        "mpi": options.mpi,
        "args": args,
        "report": list(report),
    }


@dataclass(frozen=True)
class Built:
    """What `dhir compile` wrote beside an executable."""

    signature: EntrySignature
    ranks: int
    mpi: str
    # The build's --timing lines; None: an older dhir compile recorded none.
    report: tuple[str, ...] | None = None


def built_from(meta: dict[str, object]) -> Built:
    """The description `describe` wrote, read back; ValueError, TypeError or KeyError
    when it is not one."""
    args = tuple(
        ArgSpec(
            k,
            str(a["type"]),
            _code(a["dtype"]),
            tuple(int(n) for n in a["shape"]) if a["shape"] is not None else None,
            str(a["name"]) if a.get("name") is not None else None,
            _role(a.get("role", ARG)),
            int(a["result"]) if a.get("result") is not None else None,
            _needs(a.get("needs", [])),
        )
        for k, a in enumerate(meta["args"])  # pyright: ignore[reportArgumentType]
    )
    ranks, mpi = meta["ranks"], meta["mpi"]
    try:
        RunOptions(ranks=ranks, mpi=mpi)  # pyright: ignore[reportArgumentType]
    except DhirError:
        raise ValueError(f"ranks {as_written(ranks)}, mpi {as_written(mpi)}") from None
    report = _report(meta.get("report"))
    return Built(EntrySignature(str(meta["entry"]), args), ranks, mpi, report)  # pyright: ignore[reportArgumentType]


def _report(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(line, str) for line in value):  # pyright: ignore[reportUnknownVariableType]
        raise ValueError(f"report {as_written(value)}")
    return tuple(value)  # pyright: ignore[reportUnknownArgumentType]


_CODE = re.compile(r"[<>|=][fiub][1-8]")


def _needs(value: object) -> tuple[tuple[int, int, str], ...]:
    if not isinstance(value, list):
        raise TypeError(f"needs {as_written(value)}")
    return tuple((int(dim), int(size), str(why)) for dim, size, why in value)  # pyright: ignore[reportUnknownVariableType]


def _code(value: object) -> str:
    if not isinstance(value, str) or _CODE.fullmatch(value) is None:
        raise ValueError(f"dtype {as_written(value)}")
    return value


def _role(value: object) -> str:
    if value not in (ARG, INPUT, RESULT):
        raise ValueError(f"role {as_written(value)}")
    return str(value)


def read_sidecar(exe: Path) -> Built:
    try:
        return built_from(json.loads(sidecar(exe).read_text()))
    except OSError:
        raise DhirError(
            [
                Diagnostic(
                    f"{exe} is an executable without its description {sidecar(exe).name}; "
                    "build it with dhir compile (it writes both)"
                )
            ]
        ) from None
    except (ValueError, TypeError, KeyError) as error:
        raise DhirError(
            [
                Diagnostic(
                    f"{sidecar(exe)} is not a description dhir compile wrote ({error}); "
                    "rebuild the executable with dhir compile"
                )
            ]
        ) from None


def _check_size(path: Path, where: str) -> None:
    """Refuse a .npy file that holds fewer bytes than its header says, before NumPy
    allocates them (a header can claim terabytes)."""
    import numpy as np

    header = read_header(path)
    try:
        dtype = np.dtype(header.code) if header is not None else None
    except TypeError:
        dtype = None
    if header is None or dtype is None:
        return  # NumPy's reader says what is wrong with it
    if dtype.hasobject:  # pickled, in fewer bytes than its shape of pointers
        raise DhirError(
            [
                Diagnostic(
                    f"{where}: '{path}' holds Python objects (dtype object), not numbers; "
                    "save an array of numbers with numpy.save"
                )
            ]
        )
    need = math.prod(header.shape) * dtype.itemsize
    if path.stat().st_size - header.offset < need:
        raise DhirError(
            [
                Diagnostic(
                    f"{where}: '{path}' holds fewer bytes than its header's shape "
                    f"{header.shape} needs; save the array with numpy.save"
                )
            ]
        )


def is_executable(path: Path) -> bool:
    """Whether `path` is an ELF file; a pipe (`dhir run <(make-program)`) is not looked
    into, since the bytes read here would be gone from the program read next."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as file:
            return file.read(4) == b"\x7fELF"
    except OSError:
        return False
