"""What every dhir command shares: turning failures into messages and exit codes."""

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from dhir.cli.interrupt import interruptible
from dhir.ir.diagnostics import DhirError, Diagnostic, UsageError, decode_source, read_all
from dhir.toolchain.options import unwritable
from dhir.toolchain.signals import Terminated, ending_cleanly

EXIT_USER_ERROR = 1
EXIT_USAGE_ERROR = 2  # a malformed command line, as argparse exits for one
EXIT_INTERNAL_ERROR = 70


def guarded(main: Callable[[], int]) -> int:
    """Run `main`; user errors become a message, bugs a short report, never a traceback
    (unless DHIR_DEBUG=1, for us). SIGTERM and SIGHUP stop the run cleanly, as Ctrl-C does,
    and exit with 128 + the signal's number, as shells report a command a signal ended."""
    return interruptible(lambda: _reported(main))


def _reported(main: Callable[[], int]) -> int:
    """`main`'s exit status; each error but Ctrl-C (see `guarded`) reported and mapped."""
    try:
        with ending_cleanly():
            return main()
    except UsageError as error:
        print(error.render(), file=sys.stderr)
        return EXIT_USAGE_ERROR
    except DhirError as error:
        print(error.render(), file=sys.stderr)
        return EXIT_USER_ERROR
    except Terminated as ended:
        print(f"dhir: {ended}", file=sys.stderr)
        return 128 + ended.signum
    except BrokenPipeError:
        return 0
    except Exception as error:  # a bug in dhir, not in the user's input
        if os.environ.get("DHIR_DEBUG"):
            traceback.print_exc()
        print(
            f"dhir: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in dhir, not in your input; please report it with the input "
            "file (set DHIR_DEBUG=1 for the Python traceback).",
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR


def checked(
    rule: Callable[[object], object], kind: Callable[[str], object], noun: str
) -> Callable[[str], object]:
    """An argparse type: the text read as `kind`, then held to `rule` (RunOptions' own, say),
    so that a bad value is a malformed command line (exit status 2) with the rule's message."""

    def check(text: str) -> object:
        try:
            return rule(kind(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {noun}") from None
        except DhirError as error:
            message = "; ".join(d.message for d in error.diagnostics)
            raise argparse.ArgumentTypeError(message) from None

    return check


def path(text: str) -> Path:
    """An argparse type for a file or folder named on the command line. An empty word is
    refused: Path("") is the current folder, so `--output-dir ""` wrote the results there
    and `--trace ""` failed after the whole run with "cannot write the trace ."."""
    return Path(path_text(text))


def output_file(text: str) -> Path:
    """`path`, for a file to write: a name that ends in / is a folder's, which Path() drops,
    so `--gantt out/` drew out.png and out.svg beside a folder out that was not there."""
    if text.endswith(os.sep) or (os.altsep is not None and text.endswith(os.altsep)):
        raise argparse.ArgumentTypeError(
            f"'{text}' names a folder (it ends in {text[-1]}); name the file to write"
        )
    return path(text)


def output_file_text(text: str) -> str:
    """`output_file`, kept as the word given (dhir-opt's -o, which xDSL's driver opens)."""
    output_file(text)
    return text


def check_output_file(file: Path) -> None:
    """Before the work whose result goes to `file`: a DhirError where it cannot be written
    (said only after the work, else): its folder is not there, or, for a new file, is
    read-only or another user's, or the file there may not be written over (one that
    may, as /dev/null, needs no writable folder)."""
    reason = unwritable(file)
    if reason is not None:
        raise DhirError([Diagnostic(f"cannot write {file}: {reason}")])


def path_text(text: str) -> str:
    """`path`, kept as the word given (dhir-opt's files, which xDSL's driver reads)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path; name a file or folder")
    return text


def add_constraints(parser: argparse.ArgumentParser) -> None:
    """`--constraints FILE` (dhir.placement.constraints), for run, compile and schedule."""
    parser.add_argument(
        "--constraints",
        type=path,
        metavar="FILE",
        help="placement constraints: a TOML or JSON file of [[pin]], [[apart]] and [[together]] "
        'entries naming tasks by glob (docs/commands.md, "Steering placement")',
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """`-q`: no status line (dhir.toolchain.progress)."""
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no status line (on a terminal, a stage that takes more than a second shows "
        "which it is and for how long)",
    )


def read_stdin() -> str:
    """Standard input as text; bytes that are not UTF-8 are an error, as they are in a
    file (Python's text stdin would pass them on as characters the parser calls
    "Unexpected character: \\udcff")."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a text stream put there by a caller (io.StringIO): its text
        return sys.stdin.read()
    return decode_source(read_all(binary, "<stdin>"), "<stdin>")
