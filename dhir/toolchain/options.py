"""How to build and run a program: one value that `dhir.run`, `dhir run` and `dhir compile`
make and that the native backend, the build and the launcher read. Each option has its
one default here, and a bad value is refused when the value is made, before any work."""

import math
import numbers
import operator
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from dhir.choices import FAST_MATH_MODES as MODES
from dhir.choices import MAX_RANKS, MAX_THREADS
from dhir.ir.diagnostics import DhirError, Diagnostic, UsageError
from dhir.machine.description import CPU_RULE, valid_cpu
from dhir.placement.list_scheduling import ALGORITHMS, DEFAULT_ALGORITHM
from dhir.targets import UnknownArchError, known_archs_text, parse_target_string
from dhir.toolchain.linking import LinkInputs
from dhir.toolchain.tools import DEFAULT_MPI, MPI_CHOICES

DEFAULT_RANKS = 1
DEFAULT_TIMEOUT_S = 300.0
GPU_FALLBACKS = ("none", "cpu")
DEFAULT_GPU_FALLBACK = "none"
DEFAULT_TARGET = "any"  # CodeDrop's tasks may run on any device
# What the native build checks as it runs (`RunOptions.runtime_checks`): nothing, the
# accesses dhir does not prove in bounds (the default), or every access, cast and view.
CHECK_MODES = ("none", "undecided", "all")
DEFAULT_CHECKS = "undecided"
# DHIR_IO's values (dhir_rt.c's io_by_rank0 reads it): who reads and writes the ranks' files.
IO_MODES = ("each", "rank0")


@dataclass(frozen=True)
class RunOptions:
    """`ranks` MPI ranks of the MPI `mpi`, killed after `timeout` seconds; `threads`
    OpenMP threads per rank (None: the launcher sets none, see `threads_per_rank`);
    ranks laid out by `hostfile` (None: all on this node). The native backend places
    tasks by `placement`, with the measured task times of the profile `costs`, writes
    the time of every task to `profile`, runs GPU tasks written as loops on the CPU with
    `gpu_fallback="cpu"`, and puts an entry without a schedule through CodeDrop
    (`codedrop`), its tasks bound to `target`. Every rank's executable links `link`, the
    user's own code and libraries, and is built for the CPU `cpu` (clang's -march name
    or "native"; None: as the machine description says, see dhir.toolchain.cpu), its task
    bodies' loop nests made fast by dhir-optimize-bodies (exact) unless `optimize` is
    False, with the floating-point relaxations `fast_math` allows (dhir-fast-math: none,
    contract, reassoc, fast). `runtime_checks` says which memref accesses are checked as
    they run (`check_mode`): by default ("undecided") those whose subscripts dhir does not
    prove in bounds (dhir-bounds-checks, and dhir-vector-checks for vector accesses),
    and casts to a static size and linalg ops of run-time sizes (dhir-cast-sizes,
    dhir-linalg-sizes);
    with "all" (or True), every memref access, cast and view (MLIR's
    generate-runtime-verification too); with "none", none. One out of its memref stops
    the run at its line, as the interpreter does. With `trace`, the run writes
    there a Chrome trace of what every rank did (dhir.toolchain.trace); `constraints`: a
    file of placement constraints (dhir.placement.constraints); with `keep_build`, what
    the build made (the lowered MLIR, LLVM IR, the harness, the executable) is copied into
    that folder."""

    ranks: int = DEFAULT_RANKS
    mpi: str = DEFAULT_MPI
    timeout: float = DEFAULT_TIMEOUT_S
    threads: int | None = None
    hostfile: Path | None = None
    placement: str = DEFAULT_ALGORITHM
    costs: Path | None = None
    profile: Path | None = None
    gpu_fallback: str = DEFAULT_GPU_FALLBACK
    codedrop: bool = True
    target: str = DEFAULT_TARGET
    link: LinkInputs = LinkInputs()
    cpu: str | None = None
    optimize: bool = True
    fast_math: str = "none"
    runtime_checks: str = DEFAULT_CHECKS
    trace: Path | None = None
    keep_build: Path | None = None
    constraints: Path | None = None

    def __post_init__(self) -> None:
        # Whole numbers of other kinds (NumPy's) are taken as the ints they are.
        object.__setattr__(self, "ranks", rank_count(self.ranks))
        object.__setattr__(self, "timeout", timeout_seconds(self.timeout))
        if self.threads is not None:
            object.__setattr__(self, "threads", thread_count(self.threads))
        for name in ("codedrop", "optimize"):
            object.__setattr__(self, name, flag(getattr(self, name), name))
        object.__setattr__(self, "runtime_checks", check_mode(self.runtime_checks))
        _choose("MPI", self.mpi, MPI_CHOICES)
        _choose("placement", self.placement, tuple(ALGORITHMS))
        _choose("GPU fallback", self.gpu_fallback, GPU_FALLBACKS)
        _choose("fast-math mode", self.fast_math, MODES)
        target_name(self.target)
        if self.cpu is not None:
            cpu_name(self.cpu)

    @property
    def all_checks(self) -> bool:
        """Whether every memref access, cast and view is checked as it runs."""
        return self.runtime_checks == "all"

    @property
    def cpu_fallback(self) -> bool:
        """Whether GPU tasks written as loops run on the CPU."""
        return self.gpu_fallback == "cpu"

    def threads_per_rank(self) -> int:
        """`threads`, or the node's cores shared among its ranks (all ranks run on this
        node when no hostfile says otherwise)."""
        return self.threads if self.threads is not None else default_threads(self.ranks)


def check_written_files(options: RunOptions) -> None:
    """Refuse, before the build, a `trace` or `profile` file that cannot be written where
    it is named (a folder, in a folder that is not there or that this user may not write
    to, a profile that may not be written over): it is written only after the run, which
    would fail then, its results lost. A `keep_build` folder that is a file, or that
    cannot be made or written to, is refused too: it was said only after the whole build."""
    if options.keep_build is not None:
        _check_keep_build(options.keep_build)
    for what, path in (("trace", options.trace), ("profile", options.profile)):
        if path is None:
            continue
        if path.is_dir():
            reason = "it is a folder; name a file"
        else:
            # An earlier trace is removed before the run (launch.py): made anew.
            made = what == "trace" and path.is_file()
            reason = unwritable(path, made)
        if reason is not None:
            raise DhirError([Diagnostic(f"cannot write the {what} {path}: {reason}")])


def unwritable(file: Path, made: bool = False) -> str | None:
    """Why `file` (not a folder) cannot be written, or None where it can: its folder is not
    there or not a folder, or, for a file made anew (one not there, or `made`), this user
    may not write to its folder, else may not write over the file (/dev/null may be, in a
    folder no user but root may write to)."""
    folder = file.parent
    if not folder.exists():
        return f"there is no folder {folder}; make it first"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if (made or not file.exists()) and not _writable(folder):
        return f"the folder {folder} is not writable; {_WRITABLE}"
    if not made and file.exists() and not os.access(file, os.W_OK):
        return "the file is not writable; make it so, or name another"
    return None


_WRITABLE = "name a path in a folder you can write to"


def _check_keep_build(folder: Path) -> None:
    if folder.is_file():
        reason = "it is a file; name a folder"
    else:
        # The folder, or the nearest folder above it that is there (it is made with
        # its parents): writable, or the whole build is for nothing.
        there = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
        if not there.is_dir():
            reason = f"{there} is not a folder"
        elif not _writable(there):
            reason = f"the folder {there} is not writable; {_WRITABLE}"
        else:
            return
    raise DhirError([Diagnostic(f"cannot keep the build in {folder}: {reason}")])


def _writable(folder: Path) -> bool:
    """Whether files can be made in `folder` (read-only, another user's: not; root may
    write anywhere but on a read-only file system)."""
    return os.access(folder, os.W_OK | os.X_OK)


def check_runtime_environment() -> None:
    """Refuse, before the build, a DHIR_IO, DHIR_RT_STATS or DHIR_MESSAGE_CHUNK_BYTES the
    runtime would stop the program for as it starts (dhir_rt.c checks them again for an
    executable run by hand): a bad value was said only after the whole build (or, for
    DHIR_RT_STATS, the whole run), as the program's failure."""
    mode = os.environ.get("DHIR_IO", "")
    if mode and mode not in IO_MODES:
        raise UsageError(
            [
                Diagnostic(
                    f"DHIR_IO is '{mode}'; it takes rank0 (rank 0 reads and writes for all "
                    "ranks) or each (every rank its own part, the default): set one, or unset it"
                )
            ]
        )
    stats = os.environ.get("DHIR_RT_STATS", "")
    if stats not in ("", "0", "1"):
        raise UsageError(
            [
                Diagnostic(
                    f"DHIR_RT_STATS is '{stats}'; it takes 1 (each rank prints the bytes and "
                    "messages it sent) or 0: set one, or unset it"
                )
            ]
        )
    chunk = os.environ.get("DHIR_MESSAGE_CHUNK_BYTES", "")
    if chunk and message_chunk_bytes(chunk) is None:
        raise UsageError(
            [
                Diagnostic(
                    f"DHIR_MESSAGE_CHUNK_BYTES: '{chunk}' is not an integer in [1, "
                    f"{CHUNK_BYTES_MAX}]; it is the largest piece a message is sent in, in "
                    "bytes (default 1 GiB): set one, or unset it"
                )
            ]
        )


# An integer as C's strtoll reads it in base 0 (in the C locale): leading white space, a
# sign, then hex (0x), octal (a leading 0) or decimal digits, and nothing after them.
_C_INTEGER = re.compile(r"[ \t\n\v\f\r]*([+-]?)(?:0[xX]([0-9a-fA-F]+)|(0[0-7]*)|([1-9][0-9]*))")
CHUNK_BYTES_MAX = 2**31 - 1  # INT_MAX, the runtime's bound


def message_chunk_bytes(text: str) -> int | None:
    """DHIR_MESSAGE_CHUNK_BYTES `text` as dhir_rt.c's set_chunk_bytes reads it
    (dhir_rt_parse_int: strtoll in base 0, from 1 to INT_MAX); None where it refuses it.
    The two must agree: a value taken here and refused there fails after the build."""
    match = _C_INTEGER.fullmatch(text)
    if match is None:
        return None
    sign, hexadecimal, octal, decimal = match.groups()
    if hexadecimal is not None:
        value = int(hexadecimal, 16)
    elif octal is not None:
        value = int(octal, 8)
    else:
        value = int(decimal)
    value = -value if sign == "-" else value
    return value if 1 <= value <= CHUNK_BYTES_MAX else None


# What a number on the command line or in a config value is written with: ASCII letters,
# digits, sign and point. Python's int() and float() also take "3_000", " 3 " and other
# scripts' digits ("٣"), which no one types meaning a number.
_NUMBER_CHARACTERS = re.compile(r"[0-9A-Za-z.+-]+")
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def ascii_number(text: str) -> str:
    """`text`, when it is written only with what a number is (`_NUMBER_CHARACTERS`); a
    ValueError otherwise."""
    if _NUMBER_CHARACTERS.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a number")
    return text


def decimal_integer(text: str) -> int:
    """`text` as an integer in ASCII decimal digits with an optional sign; a ValueError
    otherwise (what an argparse type raises for a value that is not one)."""
    if _DECIMAL.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a whole number")
    return int(text)


def real_number(text: str) -> float:
    """`text` as a float written in ASCII (`1.5`, `-2e3`, `inf`); a ValueError otherwise."""
    return float(ascii_number(text))


def flag(value: object, name: str) -> bool:
    """`value` as the bool option `name`: True or False, NumPy's too. Nothing else: a str
    is true, so codedrop="no" would drop code, and 1 or 0.0 says the user meant another
    option (optimize=1 for an -O level)."""
    numpy = sys.modules.get("numpy")  # a NumPy bool exists only once NumPy is loaded
    if isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_)):
        return bool(value)
    raise DhirError([Diagnostic(f"{name} takes True or False, got {value!r}")])


def check_mode(value: object) -> str:
    """`value` as a runtime-checks mode (CHECK_MODES). True is "all" and False the default
    "undecided", as they were when the option was a bool (False checked nothing then, but
    an access out of bounds with exit 0 is no mode to fall back to unasked): "none" says so."""
    numpy = sys.modules.get("numpy")
    if isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_)):
        return "all" if value else DEFAULT_CHECKS
    if isinstance(value, str) and value in CHECK_MODES:
        return value
    raise DhirError(
        [
            Diagnostic(
                f'runtime_checks takes "none", "undecided" or "all" (True for "all"), got {value!r}'
            )
        ]
    )


def cpu_name(value: object) -> str:
    """`value` as the CPU to build for, in form (clang says later whether it knows it)."""
    if not valid_cpu(value):
        raise DhirError([Diagnostic(f"bad CPU {value!r}: give {CPU_RULE}")])
    return str(value)


def target_name(value: object) -> str:
    """`value` as where CodeDrop's tasks may run: a kind (cpu, gpu, any) or a known arch.
    Checked here, as the other options are: CodeDrop reads it only for a program without
    schedules, so a misspelt target would otherwise go unnoticed on every other one."""
    if not isinstance(value, str):
        raise DhirError([Diagnostic(f"the target must be a str, got {value!r}")])
    try:
        parse_target_string(value)
    except UnknownArchError:
        raise DhirError(
            [
                Diagnostic(
                    f"unknown target '{value}'; give cpu, gpu, any or an arch "
                    f"({known_archs_text()})"
                )
            ]
        ) from None
    return value


# Ranks (times their threads) a core of this host runs before a run is said to be slow:
# MPI ranks wait for messages by polling, each busy on a core, so past a few a core every
# exchange waits for the ranks it needs to be scheduled (1000 ranks on 2 cores: minutes).
CROWDED = 4


def crowding(options: RunOptions) -> str | None:
    """A warning for a run whose ranks on this host (all of them, unless a hostfile sends
    them elsewhere: then the machine description chose) exceed `CROWDED` a core; None
    when they do not."""
    if options.hostfile is not None:
        return None
    cores = os.cpu_count() or 1
    threads = options.threads or 1
    if options.ranks * threads <= CROWDED * cores:
        return None
    most = max(1, CROWDED * cores // threads)
    each = f" of {threads} threads each" if threads > 1 else ""
    fewer = " (or fewer --threads)" if threads > 1 else ""
    return (
        f"{options.ranks} ranks{each} on this host's {cores} cores will run slowly (MPI "
        f"ranks wait by polling, each on a core); choose fewer ranks, -n {most} or "
        f"less{fewer}, or a --system description whose nodes share them"
    )


def default_threads(ranks: int) -> int:
    """The node's cores shared among `ranks` ranks."""
    return max(1, (os.cpu_count() or 1) // ranks)


def rank_count(value: object) -> int:
    """`value` as a rank count: a whole number from 1 to MAX_RANKS."""
    return _counted(value, "rank count", MAX_RANKS)


def thread_count(value: object) -> int:
    """`value` as a count of threads per rank: a whole number from 1 to MAX_THREADS."""
    return _counted(value, "thread count", MAX_THREADS)


def _counted(value: object, what: str, most: int) -> int:
    count = _whole(value, what)
    if count < 1:
        raise DhirError([Diagnostic(f"the {what} must be at least 1, got {count}")])
    if count > most:
        raise DhirError([Diagnostic(f"the {what} must be at most {most}, got {count}")])
    return count


# What a run that timed out says to do.
TIMEOUT_HINT = "give it longer with --timeout S (timeout= in dhir.run), or inf to wait for ever"


def timeout_seconds(value: object) -> float:
    """`value` as a timeout: a number of seconds more than 0 (NaN is not one; infinity
    waits for ever)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DhirError([Diagnostic(f"the timeout must be a number of seconds, got {value!r}")])
    seconds = float(value)
    if math.isnan(seconds) or seconds <= 0:
        raise DhirError([Diagnostic(f"the timeout must be more than 0 seconds, got {seconds:g}")])
    return seconds


def _whole(value: object, what: str) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)  # pyright: ignore[reportArgumentType]
    except TypeError:
        raise DhirError([Diagnostic(f"the {what} must be a whole number, got {value!r}")]) from None


def _choose(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise DhirError(
            [Diagnostic(f"unknown {what} '{value}'; choose one of {', '.join(choices)}")]
        )
