"""dhir-opt: parse, verify, run passes and print, in the manner of xdsl-opt/mlir-opt."""

import argparse
import re
import sys
from collections.abc import Iterator
from importlib.metadata import version

from dhir.api import parse_pipeline, run_pipeline
from dhir.cli.common import EXIT_USER_ERROR, guarded
from dhir.context import make_context
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.ir.text import parse_string, print_module
from dhir.transforms import all_passes, dhir_passes

_SPLIT_MARKER = re.compile(r"^// -----.*$", re.MULTILINE)


def _pass_help() -> str:
    ours = dhir_passes()
    others = sorted(set(all_passes()) - set(ours))
    lines = ["dhir passes:"]
    for name, factory in sorted(ours.items()):
        doc = (factory().__doc__ or "").strip().splitlines()
        lines.append(f"  {name:32} {doc[0] if doc else ''}")
    if not ours:
        lines.append("  (none yet)")
    lines.append("general passes from xDSL: " + ", ".join(others))
    lines.append("pass options: -p 'name{option=value other=value},next-pass'")
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def format_help(self) -> str:
        # The pass list imports every pass; only --help needs it.
        self.epilog = _pass_help()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dhir-opt",
        description="Parse, verify, transform and print MLIR that uses the dhir dialect.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input", nargs="?", default="-", help="input file, or - for stdin (default)"
    )
    parser.add_argument("-p", "--passes", default="", help="comma-separated pass pipeline")
    parser.add_argument("-o", "--output-file", help="write the result here instead of stdout")
    parser.add_argument(
        "--split-input-file",
        action="store_true",
        help="treat each '// -----'-separated chunk as its own module",
    )
    parser.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="print parse and verification errors to stdout and exit 0 (for tests)",
    )
    parser.add_argument(
        "--print-op-generic",
        "--mlir-print-op-generic",
        action="store_true",
        help="print every op in the generic form",
    )
    parser.add_argument(
        "--print-debuginfo", action="store_true", help="print source locations (loc(...))"
    )
    parser.add_argument(
        "--allow-unregistered-dialect",
        action="store_true",
        help="accept ops of dialects dhir does not know",
    )
    parser.add_argument(
        "--disable-verify", action="store_true", help="skip verification (debugging only)"
    )
    parser.add_argument("--version", action="version", version=f"dhir-opt {version('dhir')}")
    return parser


def _chunks(text: str, split: bool) -> Iterator[tuple[str, int]]:
    """(chunk text, line offset of its first line)."""
    if not split:
        yield text, 0
        return
    start, line = 0, 0
    for marker in _SPLIT_MARKER.finditer(text):
        chunk = text[start : marker.start()]
        yield chunk, line
        line += chunk.count("\n") + 1
        start = marker.end() + 1
    yield text[start:], line


def _read_input(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as file:
            return file.read(), path
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot read {path}: {error.strerror}")]) from None
    except UnicodeDecodeError:
        raise DhirError([Diagnostic(f"{path} is not UTF-8 text")]) from None


def _process(args: argparse.Namespace) -> int:
    text, name = _read_input(args.input)
    pipeline = parse_pipeline(args.passes) if args.passes else None
    outputs: list[str] = []
    failed = False
    for chunk, offset in _chunks(text, args.split_input_file):
        try:
            outputs.append(_process_chunk(args, chunk, name, offset, pipeline is not None))
        except DhirError as error:
            if args.verify_diagnostics:
                outputs.append(error.render() + "\n")
            else:
                print(error.render(), file=sys.stderr)
                failed = True
    _write_output(args.output_file, "// -----\n".join(outputs))
    return EXIT_USER_ERROR if failed else 0


def _process_chunk(
    args: argparse.Namespace, chunk: str, name: str, offset: int, has_passes: bool
) -> str:
    ctx = make_context(args.allow_unregistered_dialect)
    module = parse_string(chunk, name, ctx=ctx, verify=not args.disable_verify, line_offset=offset)
    if has_passes:
        try:
            run_pipeline(module, args.passes, ctx=ctx, verify_each=not args.disable_verify)
        except DhirError as error:
            raise DhirError(error.diagnostics, {name: _padded(chunk, offset)}) from None
    return print_module(module, generic=args.print_op_generic, debuginfo=args.print_debuginfo)


def _padded(chunk: str, line_offset: int) -> str:
    """The chunk where its lines stand in the whole file, for quoting source lines."""
    return "\n" * line_offset + chunk


def _write_output(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot write {path}: {error.strerror}")]) from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return guarded(lambda: _process(args))


if __name__ == "__main__":
    sys.exit(main())
