"""What the build cache holds, by kind, and the removal of entries (`dhir cache`).

The cache (tools.cache_root()) only grows as programs change: every build keys its
executable, module objects and C objects by content. An entry is recognised by its name
alone, as build.py and the others write it; a file the cache does not name as its own (a
folder given as DHIR_CACHE_DIR that holds other things) is shown and never removed.
"""

import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dhir.units import byte_size

# An unfinished build younger than this may still be running in another process.
UNFINISHED_AGE_S = 3600.0

_KEY = r"[0-9a-f]{24}"
# mkdtemp's folders: a prefix, then 8 letters, digits or underscores.
_TEMPORARY = r"[a-z_]+-[a-z0-9_]{8}"
# Each kind: a pattern of names at the cache's top level, or in its folder "runs" or
# "modules", and what the kind is called.
_KINDS: list[tuple[str, str, str]] = [
    ("", _KEY, "executables"),
    ("modules", _KEY, "module objects"),
    ("", rf"[a-z_]+-{_KEY}\.o", "C objects"),
    ("runs", r"[0-9a-f]{32}\.json", "run records"),
    ("", r"hosts-[0-9a-f]{16}\.[a-z]+", "hostfiles"),
    ("", rf"system-symbols-{_KEY}\.json", "symbol lists"),
    ("", r"failed-[0-9a-f]+", "failed builds"),
    ("", _TEMPORARY, "unfinished builds"),
    ("", r"\..+\.tmp|.+\.[0-9]+\.tmp", "unfinished builds"),
    ("runs", r".+\.[0-9]+\.tmp", "unfinished builds"),
]
KINDS = list(dict.fromkeys(kind for _, _, kind in _KINDS))
OTHER = "other files (not dhir's: kept)"


@dataclass(frozen=True)
class Entry:
    """One thing in the cache: a file or a folder, what kind it is, its size in bytes
    and when it was last used (read or written, as the file system's times tell)."""

    path: Path
    kind: str
    size: int
    used: float


def entries(root: Path) -> Iterator[Entry]:
    """Everything in the cache `root` (nothing if it is not there), sorted by name."""
    for folder in ("", "runs", "modules"):
        directory = root / folder
        try:
            names = sorted(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            if not folder and name in ("runs", "modules") and (root / name).is_dir():
                continue
            kind = _kind(folder, name)
            path = directory / name
            size, used = _size_and_use(path)
            yield Entry(path, kind, size, used)


def _kind(folder: str, name: str) -> str:
    for where, pattern, kind in _KINDS:
        if where == folder and re.fullmatch(pattern, name):
            return kind
    return OTHER


def _size_and_use(path: Path) -> tuple[int, float]:
    """Bytes under `path` and the latest access or change of anything in it (symbolic
    links are counted, not followed)."""
    try:
        status = path.lstat()
    except OSError:  # removed meanwhile by a build
        return 0, 0.0
    size, used = 0, max(status.st_atime, status.st_mtime)
    if not stat.S_ISDIR(status.st_mode):
        return status.st_size, used
    try:
        with os.scandir(path) as children:
            for child in children:
                more, child_used = _size_and_use(Path(child.path))
                size, used = size + more, max(used, child_used)
    except OSError:
        pass
    return size, used


def removable(entry: Entry, unused_days: float | None, now: float) -> bool:
    """Whether pruning removes `entry`: a failed build; an unfinished one (left by a dhir
    that was killed) not touched for an hour; with `unused_days`, any entry of dhir's
    not used for that long."""
    age = now - entry.used
    if entry.kind == OTHER:
        return False
    if entry.kind == "failed builds":
        return True
    if entry.kind == "unfinished builds":
        return age > UNFINISHED_AGE_S
    return unused_days is not None and age > unused_days * 86400.0


def prune(root: Path, unused_days: float | None, everything: bool = False) -> list[Entry]:
    """Remove what `removable` says (or, with `everything`, every entry of dhir's) and
    return what was removed."""
    now = time.time()
    gone = []
    for entry in entries(root):
        if entry.kind != OTHER and (everything or removable(entry, unused_days, now)):
            if entry.path.is_dir() and not entry.path.is_symlink():
                shutil.rmtree(entry.path)
            else:
                entry.path.unlink(missing_ok=True)
            gone.append(entry)
    return gone


def summary(found: list[Entry]) -> list[str]:
    """A line per kind: how many and how large, in KINDS' order."""
    lines = []
    for kind in [*KINDS, OTHER]:
        chosen = [e for e in found if e.kind == kind]
        if chosen:
            size = byte_size(sum(e.size for e in chosen))
            lines.append(f"  {len(chosen):6d}  {size:>10}  {kind}")
    return lines
