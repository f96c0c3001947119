"""`dhir cache`: show what the build cache holds, and remove what is no longer needed.

dhir cache [--prune] [--unused-for DAYS] [--clear]
"""

import argparse
import math
from typing import Any

from dhir.cli.common import checked
from dhir.cli.names import COMMANDS
from dhir.ir.diagnostics import DhirError, Diagnostic, UsageError
from dhir.toolchain.build import writing_cache
from dhir.toolchain.cache import Entry, entries, prune, summary
from dhir.toolchain.options import real_number
from dhir.toolchain.tools import cache_root
from dhir.units import byte_size


def days(value: object) -> object:
    """--unused-for's rule: a finite number of days, not negative."""
    if not isinstance(value, float) or not math.isfinite(value) or value < 0:
        raise ValueError(value)
    return value


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "cache",
        help=COMMANDS["cache"],
        description="Show where the build cache is ($DHIR_CACHE_DIR, else ~/.cache/dhir), "
        "how large it is and what it holds; with --prune or --clear, remove entries. Files "
        "the cache does not name as its own are shown and never removed.",
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="remove failed builds and builds left unfinished by a dhir that was killed "
        "(untouched for an hour)",
    )
    parser.add_argument(
        "--unused-for",
        type=checked(days, real_number, "a number of days >= 0"),
        metavar="DAYS",
        help="with --prune: also remove every entry not read or written for DAYS days (as "
        "the file system's access times tell: to a day where it is mounted relatime)",
    )
    parser.add_argument(
        "--clear",
        action="store_true",
        help="remove every entry of dhir's (a build running meanwhile fails, saying so)",
    )


def run(args: argparse.Namespace) -> int:
    if args.unused_for is not None and not args.prune:
        raise UsageError([Diagnostic("--unused-for says what --prune removes; give --prune too")])
    if args.prune and args.clear:
        raise UsageError([Diagnostic("give --prune or --clear, not both")])
    root = cache_root()
    if root.exists() and not root.is_dir():
        raise DhirError([Diagnostic(f"the cache {root} is a file, not a directory")])
    if args.prune or args.clear:
        with writing_cache(root):
            gone = prune(root, args.unused_for, everything=args.clear)
        _show(
            f"removed {len(gone)} entries ({byte_size(sum(e.size for e in gone))}) from {root}:",
            gone,
            "removed nothing",
        )
    found = list(entries(root))
    _show(
        f"{root}: {byte_size(sum(e.size for e in found))} in {len(found)} entries",
        found,
        f"{root}: empty",
    )
    return 0


def _show(heading: str, found: list[Entry], empty: str) -> None:
    """`heading` and a line per kind of `found`, or `empty` when nothing was found."""
    print("\n".join([heading, *summary(found)]) if found else empty)
