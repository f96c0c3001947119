"""`dhir`: compile and run dhir programs (dhir/cli/commands.py has the commands).

`dhir`, `dhir --help` and `dhir --version` answer from dhir/cli/names.py alone, without
loading xDSL, NumPy and the passes (about a second), and `dhir run` of a program it ran
before with the same options launches the executable it recorded (dhir/cli/cached_run.py);
every other command loads them.
"""

import argparse
import atexit
import gc
import sys
from collections.abc import Sequence

from dhir.cli.interrupt import interruptible
from dhir.cli.names import COMMANDS, DESCRIPTION

_TOP_LEVEL = ([], ["-h"], ["--help"], ["--version"])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    _no_collection_at_exit()
    # The commands load xDSL and NumPy inside: Ctrl-C then ends as it does later on.
    return interruptible(lambda: _dispatch(args))


def _dispatch(args: list[str]) -> int:
    if args in _TOP_LEVEL:
        _top_level_parser().parse_args(args)  # prints and exits, as the full parser would
    if args[:1] == ["run"]:
        from dhir.cli.cached_run import run_cached

        status = run_cached(args[1:])
        if status is not None:
            return status
    from dhir.cli.commands import main as run_command

    return run_command(args)


def _no_collection_at_exit() -> None:
    """Move what is left out of the collector's sight as the process ends (gc.freeze):
    a large build's IR is garbage by then, in cycles, and the collection Python runs
    as it shuts down went over all of it (seconds after a 10,000-task `dhir compile`);
    the operating system frees the memory anyway. Registered once however often `main`
    runs in one process."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command and its options."""
    from dhir.cli.commands import build_parser as full

    return full()


def _top_level_parser() -> argparse.ArgumentParser:
    from dhir.version import __version__

    parser = argparse.ArgumentParser(prog="dhir", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"dhir {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        commands.add_parser(name, help=text)
    return parser


if __name__ == "__main__":
    sys.exit(main())
