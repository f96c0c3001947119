"""`dhir run` of a program it ran before with the same options: its executable at once.

A native run of a .mlir file records, in dhir's cache (`runs/KEY.json`), the executable it
built, the entry's signature, how the ranks were launched and the notes it printed about
the program (CodeDrop's line), which the cached run prints again. KEY hashes everything that
shaped the build: the program's text, the command line less the options that only feed
the run (`--input`, `--output-dir`, `--print`, `-q`, `--timeout`), the content of every
file the kept options name (`--system`, `--costs`), dhir's own files (by size and time),
the Python, its packages, the LLVM tools and MPIs a build would use (by place, size and
time), this host's name, CPU and cores, the DHIR_* environment and _KEYED_ENV's
variables, the machine description $DHIR_SYSTEM names and the calibrated one. A later
`dhir run` with the same key reads its inputs and launches the recorded executable
without loading xDSL, the passes or (unless an input needs converting, or `--print` is
given) NumPy: what is left of its start-up is mostly Python's (docs/performance.md has
the figures).

An executable that `dhir compile` built (with its description beside it) takes the same
path when only such run options are given.

Only the options listed here take this path; any other (`--trace`, `--profile`,
`--timing`, `--link`, the interpreter, standard input, ...) takes the full one, which
checks, builds (from its own cache) and runs as always.
"""

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dhir.cli.arguments import (
    Built,
    built_from,
    check_apart,
    describe,
    read_inputs,
    read_sidecar,
    report_results,
)
from dhir.cli.common import guarded
from dhir.ir.diagnostics import DhirError
from dhir.machine.files import SYSTEM_ENV, default_system_path
from dhir.toolchain.options import RunOptions, real_number, timeout_seconds
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tools import (
    LLVM_VERSION,
    MPI_CHOICES,
    cache_root,
    cuda_homes,
    keep_json,
    libdevice,
    mpi_prefix,
    read_regular,
    whole_elf,
)

# Options that shape the build or the launch: part of the key.
_KEYED_VALUES = (
    "-n",
    "--ranks",
    "--entry",
    "--mpi",
    "--placement",
    "--fast-math",
    "--cpu",
    "--target",
    "--system",
    "--costs",
    "--threads",
    "--gpu-fallback",
    "--backend",
)
_FILE_VALUES = ("--system", "--costs")  # their files' content is keyed too
_KEYED_FLAGS = ("--no-optimize", "--no-codedrop", "--runtime-checks", "--no-runtime-checks")
# Options that only feed the run: read here, left out of the key.
_RUN_VALUES = ("--input", "--output-dir", "--timeout")
_RUN_FLAGS = ("--print", "-q", "--quiet")
_PACKAGE = Path(__file__).resolve().parents[1]
# Variables outside DHIR_* that change what a build makes or where it runs.
_KEYED_ENV = ("XDG_CONFIG_HOME", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")
_LLVM_TOOLS = tuple(f"{tool}-{LLVM_VERSION}" for tool in ("mlir-opt", "mlir-translate", "clang"))
# The lines of /proc/cpuinfo that name the CPU and what it can run (x86, then Arm); not
# the clock, which changes from one reading to the next.
_CPU_FIELDS = frozenset(
    ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    + ("Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part")
)


@dataclass
class _Command:
    """A `dhir run` command line as this path reads it."""

    program: Path
    keyed: list[str]
    inputs: list[str]
    output_dir: Path | None = None
    timeout: str | None = None
    print: bool = False


def run_cached(argv: list[str]) -> int | None:
    """`dhir run ARGV...` from a recorded executable: its exit status, or None when this
    path does not apply (the caller then runs the full command)."""
    command = _read_command(argv)
    if command is None:
        return None
    record = _compiled(command) or _lookup(run_key(command.program, command.keyed))
    if record is None:
        return None
    built, exe, options, notes = record
    return guarded(lambda: _run(command, built, exe, options, notes))


def _compiled(command: _Command) -> tuple[Built, Path, RunOptions, tuple[str, ...]] | None:
    """An executable from `dhir compile` run with options that only feed the run: its
    description, and how it runs (on the ranks it was built for, their share of the
    cores each); None otherwise (the full path checks the other options)."""
    if command.keyed or not whole_elf(command.program):  # the full path says why not
        return None
    try:
        built = read_sidecar(command.program)
    except DhirError:
        return None  # the full path says what is wrong
    options = RunOptions(ranks=built.ranks, mpi=built.mpi)
    # No notes: `dhir compile` said them when it built the executable.
    return built, command.program, replace(options, threads=options.threads_per_rank()), ()


def _run(
    command: _Command, built: Built, exe: Path, options: RunOptions, notes: tuple[str, ...]
) -> int:
    from dhir.toolchain.launch import run_executable, run_npy_files  # after the lookup

    for line in notes:  # what the full path said of the program (CodeDrop's line)
        print(line, file=sys.stderr)

    if command.timeout is not None:
        options = replace(options, timeout=timeout_seconds(real_number(command.timeout)))
    signature, output_dir = built.signature, command.output_dir
    check_apart(command.inputs, signature, output_dir)
    if not command.print and run_npy_files(exe, signature, command.inputs, options, output_dir):
        report_results([], signature, False, output_dir)
        return 0
    from dhir.toolchain.values import with_results  # NumPy's path: it converts, or says why not

    inputs = with_results(signature, read_inputs(command.inputs, signature))
    results = run_executable(exe, signature, inputs, options, output_dir=output_dir)
    report_results(results, signature, command.print, output_dir)
    return 0


def recorder(
    argv: list[str],
) -> Callable[[Path, EntrySignature, RunOptions, tuple[str, ...]], None] | None:
    """For the full `dhir run ARGV...`: what records its build for this path, or None when
    a later run with these options could not take it. Call it before reading the program
    and the files its options name."""
    command = _read_command(argv)
    if command is None:
        return None
    key = run_key(command.program, command.keyed)

    def record(
        exe: Path, signature: EntrySignature, options: RunOptions, notes: tuple[str, ...] = ()
    ) -> None:
        # The key was made before the build read its files (the caller makes it first)
        # and is made again now: a file edited in between could have been built under
        # the other text's key, and a later run would take the wrong executable.
        again = _read_command(argv)
        if again is None or run_key(again.program, again.keyed) != key:
            return
        entry = describe(signature, options) | {
            "exe": str(exe),
            "exe_stamp": _stat_stamp(exe),
            "threads": options.threads,
            "hostfile": None if options.hostfile is None else str(options.hostfile),
            "notes": list(notes),
        }
        keep_json(_record_path(key), entry)  # not kept: the next run takes the full path

    return record


def _read_command(argv: list[str]) -> _Command | None:
    """The command line split into what keys the build and what feeds the run; None for
    anything this path does not take."""
    if not argv or argv[0] in ("-", "") or argv[0].startswith("-"):
        return None
    if not _rereadable(argv[0]):
        return None
    command = _Command(Path(argv[0]), [], [])
    tokens = iter(argv[1:])
    for token in tokens:
        name, equals, attached = token.partition("=")
        takes_value = name in _KEYED_VALUES or name in _RUN_VALUES
        if equals and not takes_value:
            return None
        value = attached if equals else next(tokens, None) if takes_value else None
        # An empty value (`--output-dir ""`) is the full parser's to refuse.
        if takes_value and (not value or (not equals and value.startswith("--"))):
            return None
        if not _take(command, name, value):
            return None
    return command


def _take(command: _Command, name: str, value: str | None) -> bool:
    if name in ("--output-dir", "--timeout") and _given(command, name):
        return False  # given twice: the full parser refuses it (dhir.cli.parser)
    if name in _FILE_VALUES and not _rereadable(str(value)):
        return False
    if name in _KEYED_FLAGS:
        command.keyed.append(name)
    elif name == "--backend" and value != "native":
        return False
    elif name in _KEYED_VALUES:
        assert value is not None
        command.keyed += [
            name,
            value,
            _file_digest(value) if name in ("--system", "--costs") else "",
        ]
    elif name == "--input":
        command.inputs.append(str(value))
    elif name == "--output-dir":
        command.output_dir = Path(str(value))
    elif name == "--timeout":
        try:  # a bad value is the full parser's to report
            timeout_seconds(real_number(str(value)))
        except (ValueError, DhirError):
            return False
        command.timeout = value
    elif name == "--print":
        command.print = True
    elif name not in _RUN_FLAGS:
        return False
    return True


def _rereadable(path: str) -> bool:
    """Whether `path` is a regular file, which the key and then the build can both read:
    a pipe (`dhir run <(make-program)`, /dev/stdin) gives its bytes once, and the key took
    them from the build, which read nothing ("the module defines no functions")."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # the full path says what is wrong with it


def _given(command: _Command, name: str) -> bool:
    value = command.output_dir if name == "--output-dir" else command.timeout
    return value is not None


def run_key(program: Path, keyed: list[str]) -> str:
    # Bytes as the OS gave them: a file name, an option or a variable that is not UTF-8
    # (Python's surrogate escapes) made str.encode() fail with a traceback.
    digest = hashlib.sha256()
    stamps = (_package_stamp(), platform.node(), *_toolchain_stamps(), _cpu_stamp(), _cores())
    for part in (_file_digest(str(program)), *keyed, *stamps):
        digest.update(os.fsencode(part) + b"\0")
    for name in sorted(os.environ):
        if name.startswith("DHIR_") or name in _KEYED_ENV:
            digest.update(os.fsencode(f"{name}={os.environ[name]}\0"))
    digest.update(os.fsencode(_stat_stamp(default_system_path())))
    digest.update(os.fsencode(_file_digest(os.environ.get(SYSTEM_ENV, ""))))
    return digest.hexdigest()[:32]


def _file_digest(path: str) -> str:
    if not _rereadable(path):  # a pipe gives its bytes once, /dev/zero never ends
        return f"not a file {path}"
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return f"unreadable {path}"


def _package_stamp() -> str:
    """dhir's own code and runtime sources, and xDSL's code where it is not an installed
    package, by size and modification time."""
    parts = _tree_stamp(_PACKAGE, (".py", ".c", ".h", ".cu"))
    xdsl = _outside_site_packages("xdsl")
    if xdsl is not None:
        # xDSL from PYTHONPATH or installed editable (a checkout): an edit there changes
        # what dhir prints for LLVM, and no site-packages folder sees it.
        parts += [str(xdsl), *_tree_stamp(xdsl, (".py",))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _tree_stamp(folder: Path, suffixes: tuple[str, ...], prefix: str = "") -> list[str]:
    """Each file under `folder` with one of `suffixes`, by its place, size and time
    (os.scandir: half of Path.rglob's time, which the cached run's start-up pays)."""
    parts = []
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return [f"{prefix}: unreadable"]
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                parts += _tree_stamp(Path(entry.path), suffixes, f"{prefix}{entry.name}/")
            elif entry.name.endswith(suffixes):
                status = entry.stat()
                parts.append(f"{prefix}{entry.name}:{status.st_size}:{status.st_mtime_ns}")
        except OSError:
            parts.append(f"{prefix}{entry.name}: absent")
    return parts


def _outside_site_packages(package: str) -> Path | None:
    """The folder `package` would be imported from, when no site-packages folder holds
    it; None when one does (keyed by the folder's time: see _toolchain_stamps) or it is
    not found. Found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    places = [] if spec is None else list(spec.submodule_search_locations or [])
    if not places:
        return None
    folder = Path(places[0])
    sites = [Path(p) for p in sys.path if p.endswith("site-packages")]
    return None if any(site in folder.parents for site in sites) else folder


def _toolchain_stamps() -> list[str]:
    """The Python and venv running dhir, its packages, and the LLVM tools and MPIs a build
    would use, by where they are and their files' size and time: a tool found elsewhere
    on PATH, or upgraded in place, builds another executable (as the build cache's key
    says too)."""
    stamps = [sys.executable, sys.prefix]
    # A package installed, upgraded or removed (xDSL, NumPy and the OpenBLAS an executable
    # may link) adds or removes its entries there, and so changes the folder's time.
    stamps += [f"{p}:{_stat_stamp(Path(p))}" for p in sys.path if p.endswith("site-packages")]
    for tool in _LLVM_TOOLS:
        found = shutil.which(tool)
        real = Path(os.path.realpath(found)) if found is not None else None
        stamps.append(f"{tool} {real}:{'absent' if real is None else _stat_stamp(real)}")
    for mpi in MPI_CHOICES:
        prefix = mpi_prefix(mpi)
        for part in (prefix / "include" / "mpi.h", prefix / "lib" / "libmpi.so"):
            stamps.append(f"{part}:{_stat_stamp(part)}")
    # The CUDA tools a GPU build would take (dhir.toolchain.gpu.find_cuda_tools), every
    # place it looks: ptxas upgraded in place builds other cubins.
    for home in cuda_homes():
        for part in (home / "bin" / "ptxas", home / "bin" / "fatbinary", libdevice(home)):
            stamps.append(f"{part}:{_stat_stamp(part)}")
    stamps.append(f"fatbinary {shutil.which('fatbinary')}")
    return stamps


def _cpu_stamp(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The first CPU's name and features: an executable built for this machine's CPU
    (`--cpu native`, the default) may not run on another one behind the same host name
    (a container, or a VM moved to another instance type)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as file:
            lines = []
            for line in file:
                if not line.strip():
                    break  # the first processor's block is enough
                lines.append(line)
    except OSError:
        return "no cpuinfo"
    kept = [line for line in lines if line.split(":")[0].strip() in _CPU_FIELDS]
    return "".join(kept)


def _cores() -> str:
    """The cores there are and those this process may use (taskset, a container, a batch
    job's share): the default threads per rank and the description dhir detects, which
    placement reads, follow them."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on every OS
        allowed = None
    return f"cores {os.cpu_count()} {allowed}"


def _stat_stamp(path: Path) -> str:
    try:
        status = path.stat()
    except OSError:
        return "absent"
    return f"{status.st_size}:{status.st_mtime_ns}"


def _record_path(key: str) -> Path:
    return cache_root() / "runs" / f"{key}.json"


def _lookup(key: str) -> tuple[Built, Path, RunOptions, tuple[str, ...]] | None:
    """The recorded build, if it is whole and its files are still there."""
    try:
        entry = json.loads(read_regular(_record_path(key)))
        built = built_from(entry)
        threads = entry["threads"]
        hostfile = None if entry["hostfile"] is None else Path(entry["hostfile"])
        options = RunOptions(
            ranks=built.ranks,
            mpi=built.mpi,
            threads=None if threads is None else int(threads),
            hostfile=hostfile,
        )
        exe = Path(entry["exe"])
        stamp = entry["exe_stamp"]
        listed = entry["notes"]  # a record from before notes were kept: built again
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            return None
        notes = tuple(listed)
    # DhirError: a count out of range (RunOptions checks it), as a garbled record gives.
    except (OSError, ValueError, TypeError, KeyError, DhirError):
        return None
    # An executable cut short (a full disk, a crash) is built again by the full path; one
    # written over since it was recorded (another program's, copied there) is not this
    # program's, and would run as if it were.
    if _stat_stamp(exe) != stamp or not os.access(exe, os.X_OK) or not whole_elf(exe):
        return None
    if hostfile is not None and not _whole_hostfile(hostfile):
        return None
    return built, exe, options, notes


def _whole_hostfile(path: Path) -> bool:
    """Whether the hostfile `path` holds what its name says (`hosts-DIGEST.MPI`, by
    dhir.machine.layout): one cut short or edited placed the ranks on other hosts."""
    try:
        text = read_regular(path)
    except (OSError, ValueError):
        return False
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return path.name.startswith(f"hosts-{digest}.")
