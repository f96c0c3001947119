"""The Python API: parse, verify, run passes, print — what dhir-opt does. Parsing and
printing live in dhir.ir.text (every stage uses them); passes are run from here."""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException

from dhir.context import make_context
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of
from dhir.ir.text import check_module, parse_file, parse_string, print_module
from dhir.ir.verifier import verify_module
from dhir.ir.walk import any_of, op_kinds
from dhir.transforms import all_passes
from dhir.transforms.nesting import parse_nested


def parse_pipeline(
    spec: str,
    callback: PassPipelineCallbackType | None = None,
    inner_callback: PassPipelineCallbackType | None = None,
    available: dict[str, Callable[[], type[ModulePass]]] | None = None,
) -> PassPipeline:
    """`pass-a,pass-b{opt=val}`, or nested as mlir-opt writes it
    (`builtin.module(func.func(cse),pass-b)`), into a pipeline; unknown names are a
    DhirError. `callback` runs between the outermost passes, `inner_callback` between
    those nested under an op (dhir.transforms.nesting). `available`: the passes by name
    (default: dhir.transforms.all_passes())."""
    available = all_passes() if available is None else available
    try:
        return parse_nested(available, spec, callback, inner_callback)
    # xDSL raises bare Exception/ValueError kinds here, and a BaseException for bad syntax.
    except (Exception, ArgSpecParseError) as error:
        message = f"bad pass pipeline '{spec}': {error}"
        if str(error).startswith("unknown pass"):  # the list helps only then
            message += f". Available passes: {', '.join(sorted(available))}"
        raise DhirError([Diagnostic(message)]) from None


def run_pipeline(
    module: ModuleOp,
    pipeline: str | PassPipeline,
    *,
    ctx: Context | None = None,
    verify_each: bool = True,
) -> ModuleOp:
    """Run passes on `module` in place, verifying after each (unless `verify_each` is
    False; a PassPipeline's own callback runs first); return it."""
    check_module(module, "run_pipeline")
    if not isinstance(pipeline, str | PassPipeline):
        message = f"run_pipeline takes passes by name (str), not {type(pipeline).__name__}"
        raise DhirError([Diagnostic(message)])
    if not isinstance(verify_each, bool):  # verify_each="no" would verify
        raise DhirError([Diagnostic(f"verify_each takes True or False, got {verify_each!r}")])
    if ctx is not None and not isinstance(ctx, Context):  # passes read it, or ignore it
        message = f"ctx takes an xdsl Context (or None for dhir's), not {type(ctx).__name__}"
        raise DhirError([Diagnostic(message)])
    ctx = ctx if ctx is not None else make_context()

    def check(_prev: ModulePass | None, mod: ModuleOp, _next: ModulePass | None) -> None:
        if verify_each and _prev is not None:
            verify_module(mod)

    if isinstance(pipeline, str):
        pipeline = parse_pipeline(pipeline, check)
    elif verify_each:  # a PassPipeline of the caller's: verified after each pass too
        pipeline = PassPipeline(pipeline.passes, _then(pipeline.callback, check))
    with diagnosed():
        pipeline.apply(ctx, module)
    return module


def run_found(module: ModuleOp, passes: Sequence[ModulePass]) -> None:
    """Run `passes` on `module` in order, unverified, as `run_pipeline` does, but for
    each pass that declares `needs` (the kinds of op without which it changes nothing)
    when the module holds none of them. The kinds the module holds are found in one walk
    (`op_kinds`), found again after a pass that ran, which may have made ops of any kind:
    the check passes after dhir-lower-to-mpi each walked every piece of a large build,
    most of them finding nothing (docs/performance.md). A skipped pass checks nothing of
    its options either: its callers check theirs first."""
    ctx = make_context()
    present: set[type[Operation]] | None = None
    with diagnosed():
        for each in passes:
            needs: tuple[type[Operation], ...] | None = getattr(each, "needs", None)
            if needs is not None:
                if present is None:
                    present = op_kinds(module)
                if not any_of(present, needs):
                    continue
            each.apply(ctx, module)
            present = None


def _then(
    first: PassPipelineCallbackType | None, second: PassPipelineCallbackType
) -> PassPipelineCallbackType:
    """A pipeline callback that calls `first` (when there is one), then `second`."""

    def both(prev: ModulePass | None, mod: ModuleOp, after: ModulePass | None) -> None:
        if first is not None:
            first(prev, mod, after)
        second(prev, mod, after)

    return both


@contextmanager
def diagnosed() -> Iterator[None]:
    """A pass's DiagnosticException, raised inside, as a DhirError at the op it blames."""
    try:
        yield
    except DiagnosticException as error:
        message = str(error.args[0]) if error.args else str(error)
        culprit = getattr(error, "op", None)
        loc = loc_of(culprit) if isinstance(culprit, Operation) else None
        raise DhirError([Diagnostic(message, loc)]) from None


__all__ = ["parse_file", "parse_pipeline", "parse_string", "print_module", "run_pipeline"]
