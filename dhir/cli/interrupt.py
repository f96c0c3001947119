"""Ctrl-C before a command's own handling starts: the same message and exit status.

A command loads xDSL, NumPy and the passes first (up to a second or more); Ctrl-C then
would otherwise end in Python's traceback of whichever import it cut short. This module
loads nothing, so that the entry points can catch it around those imports.
"""

import sys
from collections.abc import Callable

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command Ctrl-C ended


def interruptible(main: Callable[[], int]) -> int:
    """Run `main` (which does its imports inside); Ctrl-C becomes `interrupted`, 130."""
    try:
        return main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
