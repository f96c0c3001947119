"""dhir-opt: parse, verify, run passes and print, on xDSL's xdsl-opt driver (xDSLOptMain)
with dhir's dialects, located parser (the frontend), printer (the target) and passes, and
the options mlir-opt users expect: nested pass pipelines, IR printed after each pass,
pass timing, and --verify-diagnostics that checks `expected-error {{...}}` annotations."""

import argparse
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from importlib.metadata import version
from io import StringIO
from pathlib import Path
from typing import IO, ClassVar, cast

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import VersionAction, xDSLOptMain

from dhir.api import parse_pipeline, run_pipeline
from dhir.cli.common import (
    EXIT_USER_ERROR,
    check_output_file,
    guarded,
    output_file_text,
    path_text,
    read_stdin,
)
from dhir.cli.expected_diagnostics import expectations, mismatches
from dhir.cli.parser import Parser
from dhir.cli.pass_timing import PassTiming
from dhir.context import all_dialects
from dhir.dialects.mlir22_gaps import NO_SUCH_OP
from dhir.ir.diagnostics import (
    DhirError,
    Diagnostic,
    UsageError,
    collected_warnings,
    decode_source,
    read_all,
)
from dhir.ir.text import parse_string, print_module
from dhir.ir.verifier import verify_module
from dhir.transforms import all_passes, dhir_passes
from dhir.transforms.nesting import OnEach

_SPLIT_MARKER = re.compile(r"^// -----.*$", re.MULTILINE)


@dataclass(frozen=True)
class DhirText(Target):
    """MLIR text as dhir prints it (dhir.ir.text.print_module), which mlir-opt-22 reads."""

    name: ClassVar[str] = "mlir"

    print_generic_format: bool = False
    print_debuginfo: bool = False

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        text = print_module(
            module, generic=self.print_generic_format, debuginfo=self.print_debuginfo
        )
        output.write(text)


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
    lines.append(
        "pipelines: -p 'name{option=value other=value},next-pass'; nested as mlir-opt "
        "writes them: -p 'builtin.module(func.func(cse),dhir-place{ranks=2})' runs cse "
        "on each func.func on its own (it sees that function alone)"
    )
    return "\n".join(lines)


class _Parser(Parser):
    def format_help(self) -> str:
        # The pass list imports every pass; only --help needs it.
        self.epilog = _pass_help()
        return super().format_help()


class DhirOptMain(xDSLOptMain):
    version_format: ClassVar[str] = f"dhir-opt {version('dhir')} (xDSL {{xdsl_version}})"

    def __init__(self, args: Sequence[str] | None = None) -> None:
        # xDSLOptMain.__init__ without what does not fit dhir: it would register xDSL's
        # versions of dialects dhir replaces, and --disable-verify would switch off the
        # checks of every attribute for the rest of the process.
        self.available_frontends = {}
        self.available_passes = {}
        self.available_targets = {}
        self.ctx = Context()
        self.register_all_dialects()
        self.register_all_frontends()
        self.register_all_passes()
        self.register_all_targets()
        self.args = build_parser().parse_args(args)
        self.ctx.allow_unregistered = self.args.allow_unregistered_dialect
        self.timing: PassTiming | None = None
        self.setup_pipeline()

    def register_all_dialects(self) -> None:
        for name, factory in all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_frontends(self) -> None:
        """None registered: dhir's located parser reads each chunk (`_transform`), with
        its line offset, which xDSL's frontends (a byte stream in) have no room for."""

    def register_all_passes(self) -> None:
        for name, factory in all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        self.available_targets["mlir"] = lambda: DhirText

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        _add_arguments(arg_parser)

    def setup_pipeline(self) -> None:
        try:
            self.pipeline = parse_pipeline(
                self.args.passes, self._after_pass, self._after_inner, self.available_passes
            )
        except DhirError as error:  # -p is malformed: exit status 2, as argparse's own
            raise UsageError(error.diagnostics) from None
        if self.args.time_passes:
            self.timing = PassTiming(self.pipeline)

    def _after_pass(
        self, previous: ModulePass | None, module: ModuleOp, following: ModulePass | None
    ) -> None:
        self._stop(previous)
        if previous is not None and not self.args.disable_verify:
            with self._phase("verify"):
                verify_module(module)
        if previous is not None and not isinstance(previous, OnEach):
            self._print_after(previous, module)
        self._start(following)

    def _after_inner(
        self, previous: ModulePass | None, module: ModuleOp, following: ModulePass | None
    ) -> None:
        # The module holds the op the passes run on alone: verified after them.
        self._stop(previous)
        if previous is not None:
            self._print_after(previous, module)
        self._start(following)

    def _stop(self, done: ModulePass | None) -> None:
        if self.timing is not None:
            self.timing.between(done, None)

    def _start(self, following: ModulePass | None) -> None:
        if self.timing is not None:
            self.timing.between(None, following)

    def _print_after(self, done: ModulePass, module: ModuleOp) -> None:
        if self.args.print_between_passes:
            sys.stderr.write(f"// -----// IR Dump After {done.name} //----- //\n")
            sys.stderr.write(self._printed(module))

    def _phase(self, name: str) -> AbstractContextManager[None]:
        return nullcontext() if self.timing is None else self.timing.phase(name)

    def run(self) -> int:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Each chunk parsed, transformed and printed; the exit status."""
        if self.args.output_file is not None:
            _check_output(Path(self.args.output_file))  # written after every pass, else
        text, name = _read_input(self.args.input)
        outputs: list[str] = []
        failed = False
        for chunk, offset in _chunks(text, self.args.split_input_file):
            try:
                output = self._process(chunk, name, offset)
            except DhirError as error:
                print(error.render(), file=sys.stderr)
                failed = True
                continue
            if output is not None:
                outputs.append(output)
        _write_output(self.args.output_file, "// -----\n".join(outputs))
        if self.timing is not None:
            print(self.timing.report(), file=sys.stderr)
        return EXIT_USER_ERROR if failed else 0

    def _process(self, chunk: str, name: str, offset: int) -> str | None:
        """The chunk's result; None where it failed as its annotations expected."""
        if not self.args.verify_diagnostics:
            return self._transform(chunk, name, offset)
        try:
            expected = expectations(chunk, name, offset)
        except DhirError as error:
            raise DhirError(error.diagnostics, {name: _padded(chunk, offset)}) from None
        output: str | None = None
        with collected_warnings() as warnings:
            try:
                output = self._transform(chunk, name, offset)
                produced: list[Diagnostic] = []
            except DhirError as error:
                produced = error.diagnostics
        problems = mismatches(expected, [*warnings, *produced])
        if problems:
            raise DhirError(problems, {name: _padded(chunk, offset)})
        return output

    def _transform(self, chunk: str, name: str, offset: int) -> str:
        ctx = self.ctx.clone()
        verify = not self.args.disable_verify
        with self._phase("parse"):
            try:
                module = parse_string(chunk, name, ctx=ctx, verify=verify, line_offset=offset)
            except DhirError as error:
                _hint_unregistered(error, self.ctx)
                raise
        if self.pipeline.passes:
            try:
                run_pipeline(module, self.pipeline, ctx=ctx)
            except DhirError as error:
                raise DhirError(error.diagnostics, {name: _padded(chunk, offset)}) from None
        with self._phase("print"):
            return self._printed(module)

    def _printed(self, module: ModuleOp) -> str:
        output = StringIO()
        # The registry's entries are old-style printers or Target factories; ours is one.
        target = cast(Callable[[], type[DhirText]], self.available_targets["mlir"])()
        target(self.args.print_op_generic, self.args.print_debuginfo).emit(self.ctx, module, output)
        return output.getvalue()


# dhir's words for an op of no dialect it knows (dhir.dialects.mlir22_gaps).
_NO_SUCH_OP = re.compile(rf"unknown op '(\w+)\.[^']*': {NO_SUCH_OP}")


def _hint_unregistered(error: DhirError, ctx: Context) -> None:
    """Where `error` names an op of a dialect `ctx` does not know, a note saying how
    dhir-opt reads it anyway, as mlir-opt's error does."""
    known = set(ctx.registered_dialect_names)
    for diagnostic in error.diagnostics:
        found = _NO_SUCH_OP.match(diagnostic.message)
        if found is None or found.group(1) in known:
            continue
        note = (
            f"dhir-opt knows no dialect '{found.group(1)}'; with --allow-unregistered-dialect "
            "it reads the dialect's ops as ops that no pass looks into"
        )
        diagnostic.notes.append(Diagnostic(note, severity="note"))


def build_parser() -> argparse.ArgumentParser:
    """dhir-opt's command line."""
    parser = _Parser(
        prog="dhir-opt",
        description="Parse, verify, transform and print MLIR that uses the dhir dialect.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    return parser


def _add_arguments(arg_parser: argparse.ArgumentParser) -> None:
    add = arg_parser.add_argument
    add(
        "input",
        nargs="?",
        default="-",
        type=path_text,
        help="input file, or - for stdin (default)",
    )
    add(
        "-p",
        "--passes",
        "--pass-pipeline",
        default="",
        metavar="PIPELINE",
        help="pass pipeline: comma-separated passes, nested under op names as "
        "mlir-opt writes them (see below)",
    )
    add(
        "-o",
        "--output-file",
        type=output_file_text,
        help="write the result here instead of stdout",
    )
    add(
        "--split-input-file",
        action="store_true",
        help="treat each '// -----'-separated chunk as its own module",
    )
    add(
        "--verify-diagnostics",
        action="store_true",
        help="check the errors and warnings against the input's "
        "'// expected-error {{message}}' annotations (@+N, @-N, @above, @below, "
        "@unknown), as mlir-opt does; exit 1 and say what differs when they disagree",
    )
    add(
        "--print-between-passes",
        "--mlir-print-ir-after-all",
        action="store_true",
        help="print the IR to standard error after each pass",
    )
    add(
        "--time-passes",
        "--mlir-timing",
        action="store_true",
        help="report the time parsing, each pass, verifying and printing took, on standard error",
    )
    add(
        "--print-op-generic",
        "--mlir-print-op-generic",
        action="store_true",
        help="print every op in the generic form",
    )
    add(
        "--print-debuginfo",
        "--mlir-print-debuginfo",
        action="store_true",
        help="print source locations (loc(...))",
    )
    add(
        "--allow-unregistered-dialect",
        action="store_true",
        help="accept ops of dialects dhir does not know",
    )
    add(
        "--disable-verify",
        action="store_true",
        help="skip verification of the input and after each pass (debugging only)",
    )
    add(
        "-v",
        "--version",
        action=VersionAction,
        version_format=DhirOptMain.version_format,
        help="print the versions of dhir-opt and xDSL, and exit",
    )


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
        return read_stdin(), "<stdin>"
    try:
        with open(path, "rb") as file:
            return decode_source(read_all(file, path), path), path
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot read {path}: {error.strerror}")]) from None


def _padded(chunk: str, line_offset: int) -> str:
    """The chunk where its lines stand in the whole file, for quoting source lines."""
    return "\n" * line_offset + chunk


def _check_output(path: Path) -> None:
    """A DhirError where `path` cannot be written (a folder, in a folder that is not there
    or that this user may not write to, a file that may not be written over)."""
    if path.is_dir():
        raise DhirError([Diagnostic(f"cannot write {path}: it is a folder; name a file")])
    check_output_file(path)


def _write_output(path: str | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot write {path}: {error.strerror}")]) from None


def run_opt(argv: list[str] | None = None) -> int:
    """dhir-opt ARGV...: its exit status (dhir/cli/dhir_opt.py is its entry point)."""
    return guarded(lambda: DhirOptMain(argv).run())
