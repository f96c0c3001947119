"""The user's own code and libraries a program links: object files, static and shared
libraries, and `-l NAME` / `-L DIR` as a C compiler takes them (docs/commands.md, "Calling
your own code").

Every rank's executable links them; a shared library is found at run time through an
rpath to its folder, so ranks on other nodes find it where this one does (the same path
must hold it there). A library named with `-l` is looked for where the linker would
look for it (the `-L` folders first, then clang's own), when the options are made, so
that a missing one is an error before any work, and its contents are part of the
build's cache key as a named file's are.
"""

import hashlib
import os
import re
import subprocess
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain.symbols import check_linked, defined_names, entry_owner, undefined_names
from dhir.toolchain.tools import find_llvm_tools

# MLIR's C interface: a function declared with this unit attribute is called as
# `_mlir_ciface_NAME`, with pointers to its memrefs' descriptors.
C_INTERFACE = "llvm.emit_c_interface"
C_INTERFACE_PREFIX = "_mlir_ciface_"
# The libraries each backend links after the user's files, as its messages name them.
NATIVE_SYSTEM = "MPI's library, libm, MLIR's runner utils and libc"
INTERP_SYSTEM = "libm, MLIR's runner utils and libc"
# MLIR's runner utils, as both backends link them after libm: the versioned files, as
# Debian ships them without libmlir-22-dev.
RUNNER_UTILS = ("libmlir_c_runner_utils.so.*", "libmlir_float16_utils.so.*")
# What the linker takes: objects, static archives, shared libraries (libfoo.so.1.2 too).
_KINDS = re.compile(r".*(\.o|\.a|\.so(\.\d+)*)$")
_SHARED = re.compile(r".*\.so(\.\d+)*")
_NAME = re.compile(r"[A-Za-z0-9_.+\-]+")
_HINT = "pass object files (.o), static libraries (.a) or shared libraries (.so)"


@dataclass(frozen=True)
class LinkInputs:
    """What a program links besides dhir's own objects: `files` (in order), then the
    libraries `names` (`-l NAME`), looked for in `dirs` (`-L DIR`) before the linker's
    own folders. Made from command-line words by `from_words`."""

    files: tuple[Path, ...] = ()
    names: tuple[str, ...] = ()
    dirs: tuple[Path, ...] = ()
    found: tuple[Path, ...] = field(default=(), init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", _once(tuple(_file(path) for path in self.files)))
        object.__setattr__(self, "dirs", tuple(_folder(path) for path in self.dirs))
        object.__setattr__(self, "found", tuple(self._library(name) for name in self.names))

    @classmethod
    def from_words(cls, words: Iterable[str | os.PathLike[str]]) -> "LinkInputs":
        """`-lNAME` and `-LDIR` as a C compiler reads them; any other word names a file."""
        files: list[Path] = []
        names: list[str] = []
        dirs: list[Path] = []
        for word in words:
            text = os.fspath(word)
            if text.startswith("-l"):
                names.append(text[2:])
            elif text.startswith("-L"):
                dirs.append(Path(text[2:]))
            else:
                files.append(Path(text))
        return cls(tuple(files), tuple(names), tuple(dirs))

    def __bool__(self) -> bool:
        return bool(self.files or self.names)

    def flags(self) -> list[str]:
        """The linker's arguments, after the program's objects: the files, the folders and
        the libraries, with an rpath to every folder a shared library was found in."""
        shared = [path for path in (*self.files, *self.found) if is_shared(path)]
        folders = dict.fromkeys(str(path.parent) for path in shared)
        rpaths = [f"-Wl,-rpath,{folder}" for folder in folders if folder not in _linker_dirs()]
        return [
            *(str(path) for path in self.files),
            *(f"-L{folder}" for folder in self.dirs),
            *(f"-l{name}" for name in self.names),
            *rpaths,
        ]

    def check_names(self) -> None:
        """Refuse an object file or static library that defines a name of libc's, libm's,
        MPI's or dhir's (dhir.toolchain.symbols): before any work, in both backends."""
        static = [path for path in (*self.files, *self.found) if not is_shared(path)]
        if static:
            check_linked(static, _linker_dirs())

    def undefined(self, among: Collection[str]) -> dict[str, str]:
        """The names of `among` that the linked files use, that none of them, no library
        they load and no library dhir links defines, to the file that uses each."""
        static = [p for p in (*self.files, *self.found) if not is_shared(p)]
        shared = [p for p in (*self.files, *self.found) if is_shared(p)]
        used = undefined_names(static, shared, _linker_dirs())
        wanted = {name: where for name, where in used.items() if name in among}
        if not wanted:  # most programs: no library's names read
            return wanted
        defined = defined_names(static, shared)
        return {name: where for name, where in wanted.items() if name not in defined}

    def searched(self) -> tuple[str, ...]:
        """The files the program's declarations are looked for in, in order: those given,
        then the libraries -l found."""
        return tuple(str(path) for path in (*self.files, *self.found))

    def digest(self) -> list[object]:
        """What the executable depends on: each file and library found, by its contents."""
        return [[str(path), _contents(path)] for path in (*self.files, *self.found)]

    def _library(self, name: str) -> Path:
        library_name(name)
        folders = [*self.dirs, *(Path(d) for d in _linker_dirs())]
        for folder in folders:
            for candidate in (f"lib{name}.so", f"lib{name}.a"):
                if (folder / candidate).is_file():
                    return (folder / candidate).resolve()
        where = ", ".join(str(folder) for folder in folders)
        raise _error(
            f"cannot find -l{name}: no lib{name}.so or lib{name}.a in {where}; "
            "add its folder with -L DIR, or pass the library's file itself"
        )


def entry_clash(entry: str) -> str | None:
    """What is wrong with `entry` as the native entry function's name, when a library the
    program links, MPI or dhir's runtime has that name too (a `write` of the program's took
    the C library's place for MPI, which failed); None when nothing is."""
    owner = entry_owner(entry, _linker_dirs())
    if owner is None:
        return None
    return (
        f"the entry function is named `{entry}`, {owner}: native "
        "code defines the entry under its name, so the C library, MPI and dhir's runtime "
        "would call it in place of their own. Rename the entry (e.g. "
        f"@my_{entry.lstrip('_')}) and pass that name with --entry (dhir.run: entry=...)"
    )


def blas_library() -> Path:
    """OpenBLAS as NumPy's wheel ships it (dhir.transforms.blas calls it)."""
    import numpy

    folder = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
    found = sorted(folder.glob("libscipy_openblas*.so*"))
    if not found:
        raise _error(
            f"no OpenBLAS in {folder} (NumPy's wheel ships libscipy_openblas64_ there), "
            "which the program's matrix products call where every add and multiply of one "
            "carries reassoc and contract (--fast-math reassoc or fast gives them to all); "
            "install NumPy from its wheel (`bash scripts/setup.sh`), or build with "
            "--fast-math none or contract"
        )
    return found[0]


def position_independent_hint(linker_output: str) -> str:
    """What to do when the linker refuses an object that is not position-independent: it
    says "recompile with -fPIC" linking a shared library (the interpreter's), "-fPIE" an
    executable (native code's); objects built with -fPIC link into both."""
    if "recompile with -fPIC" in linker_output or "recompile with -fPIE" in linker_output:
        return " (compile objects with -fPIC)"
    return ""


# What a linker or loader says of a symbol of C++'s runtime library: operator new and
# delete, std:: (mangled as St, or Sa, Sb, Ss, Si, So, Sd), the ABI's __cxa_ functions and
# the typeinfo and vtables of std:: and __cxxabiv1:: (mangled, or as linkers demangle
# them). Not any mangled name: a C++ function of the user's that no file defines is not
# the library's. Then gfortran's.
_UNDEFINED_SYMBOL = r"undefined (?:reference to (?:symbol )?|symbol: )[`']?"
_CXX_RUNTIME = re.compile(
    _UNDEFINED_SYMBOL + r"(?:_Z(?:n[wa]|d[la]|T[VIS]N10__cxxabiv1|(?:T[VIS])?N?K?S[abdiost])"
    r"|operator (?:new|delete)|std::|__cxa_|__gxx_"
    r"|(?:vtable|typeinfo(?: name)?) for (?:std::|__cxxabiv1::))"
)
_FORTRAN_RUNTIME = re.compile(_UNDEFINED_SYMBOL + "_gfortran_")


def runtime_library_hint(linker_output: str) -> str:
    """What to add when linked code needs a language's runtime library, which neither
    backend links on its own: C++'s, gfortran's."""
    if _CXX_RUNTIME.search(linker_output):
        return (
            " (linked C++ code needs C++'s library: add -l stdc++, or -l c++ for code built "
            "with libc++)"
        )
    if _FORTRAN_RUNTIME.search(linker_output):
        return " (linked Fortran code needs gfortran's library: add -l gfortran)"
    return ""


# A symbol a linker (GNU ld: `undefined reference to `NAME'`, lld) or the loader
# (`undefined symbol: NAME`) did not find.
_UNDEFINED_NAME = re.compile(
    r"undefined reference to (?:symbol )?[`']([^'@\n]+)|undefined symbol: ([^\n]+)"
)


def missing_symbol_hint(linker_output: str) -> str:
    """What to do when linked code uses a symbol that no linked file defines (the
    program's own calls get `undefined_function`'s message instead)."""
    found = [(a or b).strip() for a, b in _UNDEFINED_NAME.findall(linker_output)]
    names = list(dict.fromkeys(found))
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (
        f" (linked code uses {shown}, which no file the program links defines: pass the "
        "object file or library that does with --link FILE or -l NAME)"
    )


def undefined_function(
    name: str,
    task: str | None,
    searched: Sequence[str],
    system: str = NATIVE_SYSTEM,
    c_interface: bool = False,
) -> str:
    """What to say of a call to `name` (in `task`) that no linked file defines: both
    backends say it alike, naming the files they looked in (`searched`, in order) and
    then the libraries they link on their own (`system`). `c_interface`: the declaration
    has llvm.emit_c_interface, so the symbol looked for is `_mlir_ciface_NAME`; where a
    file defines the name in the other form, the fix is to the declaration."""
    where = f" in task {task}" if task is not None else ""
    symbol = f" (as {C_INTERFACE_PREFIX}{name}, for {C_INTERFACE})" if c_interface else ""
    looked = (
        f"looked in {', '.join(searched)}, then {system}"
        if searched
        else f"no file of yours is linked; looked in {system}"
    )
    fix = _other_form(name, c_interface, searched) or (
        "pass the object file or library that does with --link FILE or -l NAME (dhir.run: "
        'link=[...]; docs/commands.md, "Calling your own code")'
    )
    return f"calls {name}{symbol}{where}, which no file the program links defines ({looked}); {fix}"


def _other_form(name: str, c_interface: bool, searched: Sequence[str]) -> str | None:
    """How to declare `name` where a linked file (`searched`) defines it in the other
    form than the declaration calls: with MLIR's C interface or without."""
    paths = [Path(path) for path in searched]
    static = [path for path in paths if not is_shared(path)]
    defined = defined_names(static, [path for path in paths if is_shared(path)])
    if c_interface and name in defined:
        return (
            f"a linked file defines {name} itself, without MLIR's C interface: remove "
            f"{C_INTERFACE} from @{name}'s declaration (each memref then passes as its "
            'descriptor\'s fields; docs/commands.md, "Calling your own code")'
        )
    if not c_interface and f"{C_INTERFACE_PREFIX}{name}" in defined:
        return (
            f"a linked file defines {C_INTERFACE_PREFIX}{name}, MLIR's C interface to it: "
            f"declare @{name} with attributes {{{C_INTERFACE}}}"
        )
    return None


def is_shared(path: Path) -> bool:
    """Whether `path` names a shared library (`libfoo.so`, `libfoo.so.1.2`)."""
    return _SHARED.fullmatch(path.name) is not None


def _file(path: Path) -> Path:
    path = Path(path)
    if path.is_dir():
        raise _error(f"cannot link {path}: it is a directory; {_HINT} (-L DIR adds a folder)")
    if not path.is_file():
        raise _error(f"cannot link {path}: no such file; {_HINT}")
    if not _KINDS.fullmatch(path.name):
        raise _error(f"cannot link {path}: not a kind of file dhir links; {_HINT}")
    return path.resolve()


def _once(files: tuple[Path, ...]) -> tuple[Path, ...]:
    """`files`, unless it names an object twice: the linker would take its definitions
    twice and fail (a library given twice it takes once)."""
    objects = [path for path in files if path.suffix == ".o"]
    for path in objects:
        if objects.count(path) > 1:
            raise _error(f"cannot link {path}: given twice; pass each object file once")
    return files


def _folder(path: Path) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise _error(f"-L{path}: no such folder")
    return path.resolve()


def _contents(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise _error(f"cannot read {path}: {error.strerror}") from None


@cache
def _linker_dirs() -> tuple[str, ...]:
    """The folders clang's linker looks for `-l` libraries in (without -L)."""
    try:
        clang = find_llvm_tools().clang
        out = subprocess.run(
            [clang, "-print-search-dirs"], capture_output=True, text=True, check=True
        ).stdout
    except (DhirError, OSError, subprocess.CalledProcessError):
        return ("/usr/local/lib", "/usr/lib", "/lib")
    line = next((line for line in out.splitlines() if line.startswith("libraries: =")), "")
    folders = [os.path.normpath(d) for d in line.removeprefix("libraries: =").split(":") if d]
    return tuple(dict.fromkeys(d for d in folders if os.path.isdir(d)))


def library_name(name: object) -> str:
    """`name` as the NAME of `-lNAME`, in form (the folders say later whether it is there)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _error(f"-l{name} is not a library name (-lNAME links libNAME.so or .a)")
    return name


def _error(message: str) -> DhirError:
    return DhirError([Diagnostic(message)])
