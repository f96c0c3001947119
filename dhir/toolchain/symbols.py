"""Names the user's linked code must not define: those of the C and math libraries, MPI,
OpenMP and dhir's own runtime and harness (docs/commands.md, "Calling your own code").

The program, dhir's runtime and MPI call such names themselves: an object file or static
library that defines one takes the library's place for all of them. A `sqrt` of the
user's was treated by LLVM as libm's builtin, an `exp` was called by dhir's math.exp, a
`write` by MPI (the run hung), and a `dhir_rt_` name stopped the link with a
multiple-definition error. Both backends refuse such files before any work, naming the
file, the symbol and the fix. Shared libraries are not looked into for that: they may
well be the library itself (`-lm`), and their names are bound as the loader orders them;
only the names they need are read, for dhir.backends.function_names.

The global symbols a file defines are read with `nm` (binutils', which holds the `ld`
that links the program, or LLVM's); without one no file is checked. The C and math
libraries' names are read once and kept in dhir's cache, keyed by the libraries' files.
"""

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain.tools import LLVM_VERSION, cache_root, keep_json, read_regular

# The libraries every program links, by the file the loader takes, and what to call them.
SYSTEM_LIBRARIES = {"libc.so.6": "the C library", "libm.so.6": "the math library (libm)"}
# Name prefixes taken by MPI's and OpenMP's interfaces, dhir's runtime (dhir_rt_), its
# harness (dhir_mlir_main) and its GPU runtime (mgpu*).
RESERVED_PREFIXES = {
    "MPI_": "MPI",
    "PMPI_": "MPI",
    "MPIX_": "MPI",
    "omp_": "OpenMP",
    "__kmpc_": "OpenMP",
    "dhir_": "dhir's runtime",
    "mgpu": "dhir's GPU runtime",
}
# Names dhir's harness and runtime define: the harness's `main`, the runtime's bf16 roundings.
RESERVED_NAMES = {
    "main": "dhir's harness",
    "__truncsfbf2": "dhir's runtime",
    "__truncdfbf2": "dhir's runtime",
}
_CACHE_FORMAT = 1


def check_linked(paths: Iterable[Path], system_dirs: Iterable[str]) -> None:
    """Refuse the object files and static libraries `paths` if one defines a name
    reserved for a library or for dhir; the C and math libraries are looked for in
    `system_dirs` (the linker's folders)."""
    nm = _nm()
    if nm is None:
        return
    owners: dict[str, str] | None = None
    problems: list[Diagnostic] = []
    for path in paths:
        if path.name in ("libc.a", "libm.a"):  # the library itself
            continue
        defined = _defined(nm, path, *_stamp(path))
        if not defined:
            continue
        if owners is None:
            owners = system_names(nm, tuple(system_dirs))
        problems += [_clash(where, name, owner) for where, name, owner in _clashes(defined, owners)]
    if problems:
        raise DhirError(problems)


def entry_owner(name: str, system_dirs: Iterable[str]) -> str | None:
    """Whose `name` is (as `reserved_owner` says it) when the entry function has it: the
    native build defines the entry under its name, where it would take a library's place
    as linked code would. `main` is left to the build, which renames it for the harness's
    own; without `nm`, only the reserved prefixes and names count."""
    if name == "main":
        return None
    nm = _nm()
    return reserved_owner(name, system_names(nm, tuple(system_dirs)) if nm is not None else {})


def reserved_owner(name: str, system: dict[str, str]) -> str | None:
    """Whose `name` is, as the message says it: a system library's (`system`: name to
    library), dhir's or a library's by its prefix; None if no one's."""
    if name in RESERVED_NAMES:
        return f"which {RESERVED_NAMES[name]} defines too"
    if name in system:
        return f"which {system[name]} defines too"
    for prefix, who in RESERVED_PREFIXES.items():
        if name.startswith(prefix):
            return f"a name reserved for {who} (`{prefix}...`)"
    return None


def _clashes(
    defined: list[tuple[str, str]], system: dict[str, str]
) -> Iterable[tuple[str, str, str]]:
    for where, name in defined:
        owner = reserved_owner(name, system)
        if owner is not None:
            yield where, name, owner


def _clash(where: str, name: str, owner: str) -> Diagnostic:
    return Diagnostic(
        f"cannot link {where}: it defines `{name}`, {owner}; the program, dhir's runtime "
        "and MPI call that name, so yours would take their function's place or clash with "
        f"it. Rename yours (e.g. `my_{name.lstrip('_')}`) in your code and in the "
        "program's func.func declaration"
    )


def system_names(nm: str, folders: tuple[str, ...]) -> dict[str, str]:
    """The dynamic symbols the C and math libraries in `folders` define, to who defines
    them; from dhir's cache when these files were read before."""
    found = [(_find(name, folders), who) for name, who in SYSTEM_LIBRARIES.items()]
    libraries = [(path, who) for path, who in found if path is not None]
    key = [_CACHE_FORMAT, *((str(path), *_stamp(path)) for path, _ in libraries)]
    return _system_names(nm, json.dumps(key), tuple(libraries))


@cache
def _system_names(nm: str, key: str, libraries: tuple[tuple[Path, str], ...]) -> dict[str, str]:
    stored = cache_root() / f"system-symbols-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    try:
        kept = json.loads(read_regular(stored))
    except (OSError, ValueError):
        kept = None
    # Anything but names to their libraries (edited by hand, garbled) is read again.
    if isinstance(kept, dict) and all(isinstance(v, str) for v in kept.values()):
        return kept
    names: dict[str, str] = {}
    for path, who in reversed(libraries):  # the C library's word wins
        names.update(dict.fromkeys((name for _, name in _read(nm, path, dynamic=True)), who))
    keep_json(stored, names)  # not kept: read again next time
    return names


def undefined_names(
    static: Iterable[Path], shared: Iterable[Path], system_dirs: Iterable[str]
) -> dict[str, str]:
    """The names the object files and static libraries `static` and the shared libraries
    `shared` use and do not define (a shared library's weak ones left out: they may stay
    unbound), to the file (and archive member) that uses each first, less those the C and
    math libraries in `system_dirs`, MPI, OpenMP or dhir define; none without `nm`."""
    nm = _nm()
    if nm is None:
        return {}
    found: dict[str, str] = {}
    for path in static:
        for where, name in _undefined(nm, path, *_stamp(path)):
            found.setdefault(name, where)
    for path in shared:
        for where, name in _needed(nm, path, *_stamp(path)):
            found.setdefault(name, where)
    if not found:
        return found
    system = system_names(nm, tuple(system_dirs))
    return {name: where for name, where in found.items() if reserved_owner(name, system) is None}


def defined_names(static: Iterable[Path], shared: Iterable[Path]) -> set[str]:
    """The global names the object files and static libraries `static` and the shared
    libraries `shared` define, with those the libraries `shared` load define; none
    without `nm`."""
    nm = _nm()
    if nm is None:
        return set()
    names: set[str] = set()
    for path in static:
        names.update(name for _, name in _defined(nm, path, *_stamp(path)))
    for path in shared:
        for file in (path, *_loaded(path, *_stamp(path))):
            names.update(name for _, name in _exported(nm, file, *_stamp(file)))
    return names


@cache
def _needed(nm: str, path: Path, mtime: int, size: int) -> list[tuple[str, str]]:
    del mtime, size
    return _read(nm, path, dynamic=True, undefined=True, strong=True)


@cache
def _exported(nm: str, path: Path, mtime: int, size: int) -> list[tuple[str, str]]:
    del mtime, size
    return _read(nm, path, dynamic=True)


@cache
def _loaded(path: Path, mtime: int, size: int) -> tuple[Path, ...]:
    """The shared libraries the loader loads with the shared library `path`, as `ldd`
    finds them; none when it cannot tell."""
    del mtime, size
    try:
        done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
    except OSError:
        return ()
    found = (line.partition("=> ")[2].rpartition(" (")[0] for line in done.stdout.splitlines())
    return tuple(Path(file) for file in found if file.startswith("/"))


@cache
def _undefined(nm: str, path: Path, mtime: int, size: int) -> list[tuple[str, str]]:
    """(where, name) of each symbol `path` uses and does not define; as `_defined`."""
    del mtime, size
    return _read(nm, path, dynamic=False, undefined=True)


@cache
def _defined(nm: str, path: Path, mtime: int, size: int) -> list[tuple[str, str]]:
    """(where, name) of each global symbol `path` defines; `where` names the archive's
    member too. `mtime` and `size` key the cache."""
    del mtime, size
    return _read(nm, path, dynamic=False)


def _read(
    nm: str, path: Path, dynamic: bool, undefined: bool = False, strong: bool = False
) -> list[tuple[str, str]]:
    """(where, name) of the global symbols `path` defines (`undefined`: uses and does not
    define; `strong`: not weakly), from its dynamic table when `dynamic`."""
    flags = ["-D"] if dynamic else []
    only = "--undefined-only" if undefined else "--defined-only"
    command = [nm, "-A", "-g", only, "-P", *flags, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found: list[tuple[str, str]] = []
    # A file nm cannot read (LLVM bitcode, to binutils' nm) is left to the linker.
    for line in done.stdout.splitlines():
        where, _, rest = line.rpartition(": ")
        words = rest.split()
        if not words:
            continue
        if undefined and strong:
            if len(words) >= 2 and words[1] == "U":
                found.append((where, words[0].split("@")[0]))
        elif undefined or (len(words) >= 2 and words[1] not in ("A", "U", "w", "v")):
            found.append((where, words[0].split("@")[0]))
    return found


@cache
def _nm() -> str | None:
    for tool in (f"llvm-nm-{LLVM_VERSION}", "nm", "llvm-nm"):
        found = shutil.which(tool)
        if found is not None:
            return found
    return None


def _find(name: str, folders: tuple[str, ...]) -> Path | None:
    return next((Path(d) / name for d in folders if (Path(d) / name).is_file()), None)


def _stamp(path: Path) -> tuple[int, int]:
    try:
        status = path.stat()
    except OSError:
        return (0, 0)
    return (status.st_mtime_ns, status.st_size)
