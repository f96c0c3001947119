"""The Python API: parse, verify, run passes, print — what dhir-opt does."""

from collections.abc import Callable
from io import StringIO
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from dhir.context import make_context
from dhir.ir.collections import fewer_collections
from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc, loc_of
from dhir.ir.parser import LocatedParser
from dhir.ir.verifier import verify_module
from dhir.transforms import all_passes


@fewer_collections()
def parse_string(
    text: str,
    name: str = "<string>",
    *,
    ctx: Context | None = None,
    verify: bool = True,
    line_offset: int = 0,
) -> ModuleOp:
    """Parse (and by default verify) MLIR text; raise DhirError on bad input."""
    ctx = ctx or make_context()
    # Diagnostics quote source lines by their line number in the whole file.
    sources = {name: "\n" * line_offset + text}
    try:
        # Inside: the parser reads the first token as it starts, and it may be bad.
        parser = LocatedParser(ctx, text, name, line_offset)
        module = parser.parse_module()
    except ParseError as error:
        raise DhirError([_parse_diagnostic(error, line_offset)], sources) from None
    if verify:
        try:
            verify_module(module, parser.task_bodies.cloned)
        except DhirError as error:
            raise DhirError(error.diagnostics, sources) from None
    return module


def parse_file(path: str | Path, **kwargs: object) -> ModuleOp:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise DhirError([Diagnostic(f"cannot read {path}: {error.strerror}")]) from None
    return parse_string(text, str(path), **kwargs)  # type: ignore[arg-type]


def _parse_diagnostic(error: ParseError, line_offset: int) -> Diagnostic:
    loc = error.span.get_location()
    return Diagnostic(error.msg, SourceLoc(loc.file, loc.line + line_offset, loc.col))


def parse_pipeline(
    spec: str,
    callback: Callable[[ModulePass | None, ModuleOp, ModulePass | None], None] | None = None,
) -> PassPipeline:
    """`pass-a,pass-b{opt=val}` into a pipeline; unknown names are a DhirError."""
    available = all_passes()
    try:
        return PassPipeline.parse_spec(available, spec, callback)
    except Exception as error:  # xDSL raises bare Exception/ValueError kinds here
        names = ", ".join(sorted(available))
        raise DhirError(
            [Diagnostic(f"bad pass pipeline '{spec}': {error}. Available passes: {names}")]
        ) from None


def run_pipeline(
    module: ModuleOp,
    pipeline: str | PassPipeline,
    *,
    ctx: Context | None = None,
    verify_each: bool = True,
) -> ModuleOp:
    """Run passes on `module` in place, verifying after each; return it."""
    ctx = ctx or make_context()
    if isinstance(pipeline, str):

        def check(_prev: ModulePass | None, mod: ModuleOp, _next: ModulePass | None) -> None:
            if verify_each and _prev is not None:
                verify_module(mod)

        pipeline = parse_pipeline(pipeline, check)
    try:
        pipeline.apply(ctx, module)
    except DiagnosticException as error:
        message = str(error.args[0]) if error.args else str(error)
        culprit = getattr(error, "op", None)
        loc = loc_of(culprit) if isinstance(culprit, Operation) else None
        raise DhirError([Diagnostic(message, loc)]) from None
    return module


class _Printer(Printer):
    """xDSL's printer, writing text without line breaks straight to the stream: its own
    print_string calls print() for every token, a fifth of printing 10,000 tasks."""

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        if "\n" in text or self.stream is None:
            super().print_string(text, indent=indent)
            return
        self._current_column += len(text)
        self.stream.write(text)


def print_module(module: ModuleOp, *, generic: bool = False, debuginfo: bool = False) -> str:
    out = StringIO()
    printer = _Printer(stream=out, print_generic_format=generic, print_debuginfo=debuginfo)
    printer.print_op(module)
    out.write("\n")
    return out.getvalue()
