"""Pass pipelines with nesting, as mlir-opt writes them:
`builtin.module(func.func(cse),dhir-place{ranks=2})`.

xDSL 0.74's pipeline parser reads flat lists only (`a,b{k=v}`, no parentheses). This
splits the text at its top-level commas, makes each `op.name(...)` element a pass that
runs the pipeline inside on each op of that name directly in the module, and leaves each
flat element (`name{options}`) to xDSL's parser.
"""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import NoneType
from typing import get_args, get_origin, get_type_hints

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline, PassPipelineCallbackType
from xdsl.utils.arg_spec import ArgSpec, PipelineLexer, SpecTokenKind
from xdsl.utils.arg_spec import parse_pipeline as parse_flat
from xdsl.utils.exceptions import ArgSpecParseError

from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of

MODULE = "builtin.module"
_ANCHOR = re.compile(r"\s*([A-Za-z_][\w.$-]*)\s*\((.*)\)\s*", re.DOTALL)
_CLOSING = {"(": ")", "{": "}", "[": "]"}

PassFactories = dict[str, Callable[[], type[ModulePass]]]


@dataclass(frozen=True)
class OnEach(ModulePass):
    """Runs `pipeline` on each op named `anchor` directly in the module's body. A nested
    `builtin.module` is run on as it is; any other op is run on in its module with the
    other ops of that module taken out for the while, so that its passes see it alone,
    as mlir-opt runs a pass nested under an op. Such passes may add ops next to it, but
    not change the module's attributes (that is an error: run the pass on the module)."""

    name = "on-each"

    anchor: str
    pipeline: PassPipeline

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for child in list(op.body.block.ops):
            if child.name != self.anchor:
                continue
            if isinstance(child, ModuleOp):
                self.pipeline.apply(ctx, child)
            else:
                self._apply_alone(ctx, op, child)

    def _apply_alone(self, ctx: Context, module: ModuleOp, child: Operation) -> None:
        block = module.body.block
        ops = list(block.ops)
        index = ops.index(child)
        before, after = ops[:index], ops[index + 1 :]
        attributes = dict(module.attributes)
        for other in before + after:
            other.detach()
        try:
            self.pipeline.apply(ctx, module)
        finally:
            first = block.first_op
            for other in before:
                if first is None:
                    block.add_op(other)
                else:
                    block.insert_op_before(other, first)
            block.add_ops(after)
        if module.attributes != attributes:
            changed = sorted(set(module.attributes.items()) ^ set(attributes.items()))
            names = ", ".join(sorted({name for name, _ in changed}))
            raise DhirError(
                [
                    Diagnostic(
                        f"passes nested under '{self.anchor}' changed the attributes of "
                        f"the module around it ({names}); run them on {MODULE} instead",
                        loc_of(child) if child.parent is not None else None,
                    )
                ]
            )


def parse_nested(
    available: PassFactories,
    spec: str,
    callback: PassPipelineCallbackType | None = None,
    inner_callback: PassPipelineCallbackType | None = None,
) -> PassPipeline:
    """A pipeline from `spec`, run on the module: a list of elements, or one element
    `builtin.module(...)` that names the module itself (mlir-opt's --pass-pipeline form).
    `callback` runs between the passes of the outermost list; `inner_callback` between
    passes nested under an op, while the module holds that op alone (so verifying the
    module then would find its calls' callees missing)."""
    elements = list(_split(spec))
    if len(elements) == 1 and (anchored := _ANCHOR.fullmatch(elements[0])) is not None:
        if anchored.group(1) == MODULE:
            elements = list(_split(anchored.group(2)))
    passes = tuple(_element(available, text, MODULE, inner_callback) for text in elements)
    return PassPipeline(passes, callback)


def _element(
    available: PassFactories,
    text: str,
    parent: str,
    callback: PassPipelineCallbackType | None,
) -> ModulePass:
    anchored = _ANCHOR.fullmatch(text)
    if anchored is None:
        return _flat_pass(available, text)
    anchor, inner = anchored.groups()
    if parent != MODULE:
        raise ValueError(
            f"'{anchor}(...)' is nested under '{parent}'; passes nest under an op name "
            f"only directly inside {MODULE}(...)"
        )
    passes = tuple(_element(available, part, anchor, callback) for part in _split(inner))
    return OnEach(anchor, PassPipeline(passes, callback))


def _flat_pass(available: PassFactories, text: str) -> ModulePass:
    specs = _parsed(text.strip())
    if len(specs) != 1:
        raise ValueError(f"expected one pass, got '{text}'")
    spec = specs[0]
    if spec.name not in available:
        raise ValueError(f"unknown pass '{spec.name}'")
    pass_class = available[spec.name]()
    _check_once(spec.name, text)
    _check_arguments(pass_class, spec)
    return pass_class.from_pass_spec(spec)


def _parsed(text: str) -> list[ArgSpec]:
    """xDSL's reading of `name{options}`, where a value it cannot read (`costs=P.json`:
    only "Unknown token" under a caret) says that such a value goes in quotes."""
    try:
        return list(parse_flat(text))
    except ArgSpecParseError as error:
        column = re.search(r"pass-pipeline:1:(\d+)\n", str(error))
        if "Unknown token" not in str(error) or column is None:
            raise
        at = text[int(column[1]) - 1 :]
        raise ValueError(
            f"cannot read '{text}' from '{at}': an option's value other than a word, a "
            'number or true/false (a path such as P.json) goes in double quotes: name="P.json"'
        ) from None


# What an option of each type takes, in words.
_KINDS: dict[object, str] = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a word",
}


def _check_once(pass_name: str, text: str) -> None:
    """Each option given once, as mlir-opt requires: xDSL keeps the last of
    `ranks=2 ranks=3` and says nothing, so a pipeline would run with a value its
    writer may not have meant (lists are one option with commas: `a=1,2`)."""
    seen: set[str] = set()
    lexer, previous = PipelineLexer(text.strip()), None
    while (token := lexer.lex()).kind is not SpecTokenKind.EOF:
        kind = token.kind
        is_name = previous in (SpecTokenKind.L_BRACE, SpecTokenKind.SPACE)
        if kind is SpecTokenKind.IDENT and is_name:
            if token.span.text in seen:
                raise ValueError(
                    f"{pass_name}: option {token.span.text} is given more than once: "
                    "it takes one value, so give it once"
                )
            seen.add(token.span.text)
        previous = kind


def _check_arguments(pass_class: type[ModulePass], spec: ArgSpec) -> None:
    """Each option's value of its type. xDSL would say "Incompatible types: given ('abc',),
    expected <class 'int'>", or take `true` for a number (a bool is an int)."""
    hints = get_type_hints(pass_class)
    for name, values in spec.parameters.items():
        hint = hints.get(name.replace("-", "_"))
        kinds = [k for k in get_args(hint) or (hint,) if k is not NoneType]
        if get_origin(hint) is tuple or not all(k in _KINDS for k in kinds):
            continue  # lists and other types: xDSL's own check
        if len(values) == 1 and any(_is(values[0], k) for k in kinds):
            continue
        wanted = " or ".join(_KINDS[k] for k in kinds)
        given = ",".join(_written(v) for v in values) or "no value"
        raise ValueError(f"{spec.name}: option {name} takes {wanted}, got {given}")


def _is(value: object, kind: object) -> bool:
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)  # pyright: ignore[reportArgumentType]


def _written(value: object) -> str:
    """As the pipeline wrote it."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"'{value}'" if isinstance(value, str) else str(value)


def _split(spec: str) -> Iterator[str]:
    """`spec`'s elements: its pieces between commas outside brackets and strings."""
    if not spec.strip():
        return
    start, expected = 0, list[str]()
    in_string = escaped = False
    for index, char in enumerate(spec):
        if in_string:
            escaped = char == "\\" and not escaped
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char in _CLOSING:
            expected.append(_CLOSING[char])
        elif char in ")}]":
            if not expected or expected.pop() != char:
                raise ValueError(f"unbalanced '{char}' at position {index + 1}")
        elif char == "," and not expected:
            yield _nonempty(spec[start:index], index)
            start = index + 1
    if expected or in_string:
        raise ValueError(f"missing '{expected[-1] if expected else chr(34)}' at the end")
    yield _nonempty(spec[start:], len(spec))


def _nonempty(element: str, end: int) -> str:
    if not element.strip():
        raise ValueError(f"empty pipeline element before position {end + 1}")
    return element
