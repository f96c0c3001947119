"""The ledger of dhir's shadow dialects: each op (or attribute) dhir/dialects defines in
place of xDSL's, or adds to it, covers a gap of plain xDSL 0.74, and the tests here
show each gap is still there. When an xDSL release closes one, its test fails with
"xDSL fixed this: delete dhir's shadow of ...", so a pin bump shows what can go.

An op xDSL lacks is checked by name. An op xDSL has but gets wrong is checked on
samples: each op of the syntax corpus (data/syntax, filecheck/dialects/*/ops.mlir),
cut out into a function of its own with the values it uses as arguments (or with its
enclosing ops, where it needs them), plus the samples below for gaps the corpus does not
show. Plain xDSL gets a sample wrong when it fails on what dhir reads (or crashes where
dhir reports an error), or reads it but prints it differently (custom or generic form).
docs/upstream-bugs.md describes the gaps worth reporting, with reproducers."""

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from io import StringIO
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import ParseError, VerifyException

import dhir
from dhir.context import all_dialects, make_context
from dhir.ir.parser import LocatedParser

PACKAGE = Path(dhir.__file__).parent
SHADOWED = (
    "affine",
    "arith",
    "cf",
    "gpu",
    "linalg",
    "math",
    "memref",
    "mpi",
    "scf",
    "tensor",
    "vector",
)
UNIT = Path(__file__).parent
CORPUS = [
    *sorted((UNIT / "data" / "syntax").glob("*.mlir")),
    *sorted((UNIT.parent / "filecheck" / "dialects").glob("*/ops.mlir")),
]


def _func(args: str, body: str) -> str:
    return f"func.func @sample({args}) {{\n{body}\n  return\n}}\n"


# xDSL 0.74 requires these (MLIR: optional); given, its convolutions read the text.
STRIDES = "dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>"

# Samples for gaps the corpus does not show (its uses of these ops are ones xDSL reads).
SAMPLES: dict[str, list[str]] = {
    # MLIR takes a reshape from a dynamic shape; xDSL multiplies the dynamic marker in
    "tensor.reshape": [
        _func(
            "%a: tensor<?xf64>, %s: tensor<2xindex>",
            "  %r = tensor.reshape %a(%s) : (tensor<?xf64>, tensor<2xindex>) -> tensor<2x3xf64>",
        )
    ],
    # MLIR refuses a static extent collapsed from a dynamic one; xDSL verifies nothing
    "tensor.collapse_shape": [
        _func(
            "%a: tensor<?x3xf64>",
            "  %r = tensor.collapse_shape %a [[0, 1]] : tensor<?x3xf64> into tensor<6xf64>",
        )
    ],
    # MLIR accepts a pad by a run-time amount into a static type; xDSL refuses it
    "tensor.pad": [
        _func(
            "%a: tensor<3xf64>, %n: index",
            "  %z = arith.constant 0.0 : f64\n"
            "  %p = tensor.pad %a low[%n] high[1] {\n"
            "  ^bb0(%i: index):\n"
            "    tensor.yield %z : f64\n"
            "  } : tensor<3xf64> to tensor<6xf64>",
        )
    ],
    # named elementwise ops short of inputs: xDSL crashes or reads a body that does nothing
    **{
        f"linalg.{name}": [_func("%b: memref<4xf32>", f"  linalg.{name} outs(%b : memref<4xf32>)")]
        for name in ("add", "sub", "mul", "max", "min", "select", "exp", "log", "sqrt", "copy")
    },
    # a loop variable is no valid symbol: MLIR refuses it as one
    "affine.apply": [
        _func(
            "%n: index",
            "  affine.for %i = 0 to 4 {\n"
            "    %x = affine.apply affine_map<()[s0] -> (s0 + 1)>()[%i]\n  }",
        )
    ],
    # an iteration argument is no valid dimension: MLIR refuses it as a bound operand
    "affine.for": [
        _func(
            "%n: index",
            "  %r = affine.for %i = 0 to 4 iter_args(%a = %n) -> (index) {\n"
            "    affine.for %j = 0 to affine_map<(d0) -> (d0)>(%a) {\n    }\n"
            "    affine.yield %a : index\n  }",
        )
    ],
    "affine.vector_load": [
        _func(
            "%m: memref<8xf32>",
            "  affine.for %i = 0 to 4 {\n"
            "    %w = affine.vector_load %m[%i] : memref<8xf32>, vector<4xf32>\n  }",
        )
    ],
    "affine.vector_store": [
        _func(
            "%m: memref<8xf32>, %w: vector<4xf32>",
            "  affine.for %i = 0 to 4 {\n"
            "    affine.vector_store %w, %m[%i] : memref<8xf32>, vector<4xf32>\n  }",
        )
    ],
    "gpu.all_reduce_op": [
        _func(
            "%x: i32",
            "  %r = gpu.all_reduce minsi %x uniform {\n  } : (i32) -> i32",
        )
    ],
    "linalg.index": [
        _func(
            "%a: memref<4xf32>, %b: memref<4xf32>",
            "  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],"
            ' iterator_types = ["parallel"]} ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {\n'
            "  ^bb0(%x: f32, %y: f32):\n    %i = linalg.index 1 : index\n"
            "    linalg.yield %x : f32\n  }",
        )
    ],
    "linalg.yield": [
        _func(
            "%a: memref<4xf32>, %b: memref<4xf32>",
            "  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],"
            ' iterator_types = ["parallel"]} ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {\n'
            "  ^bb0(%x: f32, %y: f32):\n    linalg.yield %x, %y : f32, f32\n  }",
        )
    ],
    "linalg.generic": [
        # Several results in parentheses, as xDSL and MLIR print them.
        _func(
            "%a: tensor<4xf32>",
            "  %e = tensor.empty() : tensor<4xf32>\n"
            "  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, "
            "affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = "
            '["parallel"]} ins(%a : tensor<4xf32>) outs(%e, %e : tensor<4xf32>, '
            "tensor<4xf32>) {\n  ^bb0(%x: f32, %o: f32, %p: f32):\n"
            "    linalg.yield %x, %x : f32, f32\n  } -> (tensor<4xf32>, tensor<4xf32>)",
        ),
        # An attribute of the leading dictionary, which xDSL drops.
        _func(
            "%m: memref<4xf32>",
            "  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = "
            '["parallel"], tag = 1 : i64} outs(%m : memref<4xf32>) {\n'
            "  ^bb0(%o: f32):\n    linalg.yield %o : f32\n  }",
        ),
    ],
    "linalg.fill": [
        _func(
            "%v: vector<4xf32>, %m: memref<8xvector<4xf32>>",
            "  linalg.fill ins(%v : vector<4xf32>) outs(%m : memref<8xvector<4xf32>>)",
        )
    ],
    "linalg.pooling_nchw_max": [
        _func(
            "%i: memref<1x1x4x4xf32>, %w: memref<2x2xf32>, %o: memref<1x1x3x3xf32>",
            f"  linalg.pooling_nchw_max {{{STRIDES}}} ins(%i, %w : memref<1x1x4x4xf32>, "
            "memref<2x2xf32>) "
            "outs(%o : memref<1x1x3x3xf32>)",
        )
    ],
    **{
        f"linalg.conv_2d_{layout}": [
            _func(
                f"%i: memref<{image}xf32>, %f: memref<{filter_}xf32>, %o: memref<{out}xf32>",
                f"  linalg.conv_2d_{layout} {{{STRIDES}}} ins(%i, %f : memref<{image}xf32>, "
                f"memref<{filter_}xf32>) outs(%o : memref<{out}xf32>)",
            )
        ]
        for layout, image, filter_, out in [
            ("nchw_fchw", "1x2x4x4", "3x2x2x2", "1x3x3x3"),
            ("nhwc_hwcf", "1x4x4x2", "2x2x2x3", "1x3x3x3"),
            ("nhwc_fhwc", "1x4x4x2", "3x2x2x2", "1x3x3x3"),
            ("ngchw_fgchw", "1x2x2x4x4", "3x2x2x2x2", "1x2x3x3x3"),
            ("ngchw_gfchw", "1x2x2x4x4", "2x3x2x2x2", "1x2x3x3x3"),
            ("nhwgc_gfhwc", "1x4x4x2x2", "2x3x2x2x2", "1x3x3x2x3"),
        ]
    },
    "memref.load": [
        _func("%m: memref<4x4xf32>, %i: index", "  %v = memref.load %m[%i] : memref<4x4xf32>")
    ],
    "memref.store": [
        _func(
            "%m: memref<4x4xf32>, %i: index, %v: f32",
            "  memref.store %v, %m[%i] : memref<4x4xf32>",
        )
    ],
    "memref.dma_start": [
        _func(
            "%src: memref<16xf32>, %dst: memref<16xf32, 1>, %tag: memref<1xi32>, %n: index",
            "  %c0 = arith.constant 0 : index\n"
            "  memref.dma_start %src[%c0], %dst[%c0], %n, %tag[%c0] : memref<16xf32>, "
            "memref<16xf32, 1>, memref<1xi32>",
        )
    ],
    "memref.dma_wait": [
        _func(
            "%tag: memref<1xi32>, %n: index",
            "  %c0 = arith.constant 0 : index\n  memref.dma_wait %tag[%c0], %n : memref<1xi32>",
        )
    ],
    "memref.expand_shape": [
        _func(
            "%m: memref<12xf64>",
            "  %e = memref.expand_shape %m [[0, 1]] output_shape [3, 5] "
            ": memref<12xf64> into memref<3x5xf64>",
        )
    ],
    "memref.collapse_shape": [
        _func(
            "%m: memref<3x4xf64, strided<[8, 1]>>",
            "  %c = memref.collapse_shape %m [[0, 1]] "
            ": memref<3x4xf64, strided<[8, 1]>> into memref<12xf64>",
        )
    ],
    "memref.reinterpret_cast": [
        _func(
            "%m: memref<16xf32>, %o: index",
            "  %r = memref.reinterpret_cast %m to offset: [%o], sizes: [4, 4], strides: [4, 1] "
            ": memref<16xf32> to memref<4x4xf32>",
        )
    ],
    "memref.subview": [
        _func(
            "%m: memref<8xf32>",
            "  %s = memref.subview %m[6] [3] [1] : memref<8xf32> to memref<3xf32, "
            "strided<[1], offset: 6>>",
        )
    ],
    "cf.switch": [
        _func(
            "%i: index",
            "  cf.switch %i : index, [\n    default: ^a\n  ]\n^a:",
        )
    ],
    "scf.index_switch": [
        _func("%k: index", "  scf.index_switch %k\n  case 2 {\n  }\n  default {\n  }")
    ],
    "scf.if": [
        "func.func @sample(%c: i1, %a: i32, %b: i32) -> i32 {\n"
        "  %r = scf.if %c -> i32 {\n    scf.yield %a : i32\n  } else {\n"
        "    scf.yield %b : i32\n  }\n  return %r : i32\n}\n"
    ],
    "scf.for": [
        "func.func @sample(%n: index, %a: f32) -> f32 {\n"
        "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
        "  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %a) -> f32 {\n"
        "    scf.yield %x : f32\n  }\n  return %r : f32\n}\n"
    ],
}


@cache
def _plain_xdsl() -> Context:
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


@cache
def _dhir() -> Context:
    return make_context(allow_unregistered=True)


@dataclass(frozen=True)
class Shadow:
    name: str
    ours: type[Operation] | type[Attribute]
    theirs: type[Operation] | type[Attribute] | None  # None: xDSL lacks it

    def __str__(self) -> str:
        return self.name


def _shadows() -> list[Shadow]:
    found = []
    theirs_by_dialect, ours_by_dialect = get_all_dialects(), all_dialects()
    for dialect in SHADOWED:
        theirs, ours = theirs_by_dialect[dialect](), ours_by_dialect[dialect]()
        known = {d.name: d for d in (*theirs.operations, *theirs.attributes)}
        for definition in (*ours.operations, *ours.attributes):
            if known.get(definition.name) is not definition:
                found.append(Shadow(definition.name, definition, known.get(definition.name)))
    return found


SHADOWS = _shadows()
SHADOW_NAMES = {s.name for s in SHADOWS}


def _show(op: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def _defined_inside(value: SSAValue, op: Operation) -> bool:
    owner = value.owner
    node = owner.parent_op() if isinstance(owner, Block) else owner
    while node is not None and node is not op:
        node = node.parent_op()
    return node is op


def _cut_out(op: Operation, module: ModuleOp) -> ModuleOp:
    """`op` alone: in `module` if it sits there, else in a function taking as arguments
    the values it uses from outside."""
    if op.parent_op() is module:
        alone = ModuleOp([op.clone()])
        alone.attributes.update(module.attributes)
        return alone
    outside: list[SSAValue] = []
    for inner in op.walk():
        outside += [v for v in inner.operands if not _defined_inside(v, op) and v not in outside]
    func = FuncOp("sample", ([v.type for v in outside], []))
    mapper = dict(zip(outside, func.body.block.args))
    func.body.block.add_ops([op.clone(value_mapper=mapper), ReturnOp()])
    return ModuleOp([func])


def _alone_in_parent(op: Operation, module: ModuleOp) -> ModuleOp | None:
    """`op` in a copy of its parent (an op of `module`, such as a gpu.module) that holds
    nothing else but terminators."""
    parent, block = op.parent_op(), op.parent_block()
    if parent is None or parent.parent_op() is not module or block is None:
        return None
    index = list(block.ops).index(op)
    copy = parent.clone()
    for region, original in zip(copy.regions, parent.regions):
        for kept, old in zip(region.blocks, original.blocks):
            for i, inner in reversed(list(enumerate(kept.ops))):
                if not (old is block and i == index) and not inner.has_trait(IsTerminator):
                    kept.erase_op(inner, safe_erase=False)
    alone = ModuleOp([copy])
    alone.attributes.update(module.attributes)
    return alone


def _corpus_samples(name: str) -> Iterator[str]:
    """The corpus's uses of op `name`, each cut out with as little around it as dhir
    still verifies, kept if no other shadowed op (but terminators) is in it, so that a
    gap found is this op's."""
    for path in CORPUS:
        module = _parsed(path)
        for op in module.walk():
            if op.name != name:
                continue
            nodes = [op, *(a for a in _ancestors(op) if a is not module)]
            tries = (c(node, module) for node in nodes for c in (_cut_out, _alone_in_parent))
            for cut in tries:
                if cut is None:
                    continue
                text = _show(cut)
                if _reads(_dhir(), text) is None:
                    around = {a.name for a in _ancestors(op)}
                    others = {
                        o.name
                        for o in _parse(_dhir(), text).walk()
                        if not o.has_trait(IsTerminator)
                    }
                    if others & SHADOW_NAMES <= {name} | around:
                        yield text
                    break


def _ancestors(op: Operation) -> Iterator[Operation]:
    node = op.parent_op()
    while node is not None:
        yield node
        node = node.parent_op()


@cache
def _parsed(path: Path) -> ModuleOp:
    return LocatedParser(_dhir(), path.read_text(), str(path)).parse_module()


def _parse(ctx: Context, text: str) -> ModuleOp:
    if ctx is _dhir():
        module = LocatedParser(ctx, text, "<sample>").parse_module()
    else:
        module = Parser(ctx, text).parse_module()
    module.verify()
    return module


def _reads(ctx: Context, text: str) -> Exception | None:
    """None if `ctx` reads and verifies `text`, else the exception it raised."""
    try:
        _parse(ctx, text)
    except Exception as error:  # noqa: BLE001 -- a crash is one of the gaps
        return error
    return None


REPORTED = (ParseError, VerifyException, dhir.DhirError)


def _gap(text: str) -> str | None:
    """How plain xDSL gets `text` wrong where dhir gets it right; None if it doesn't."""
    ours, theirs = _reads(_dhir(), text), _reads(_plain_xdsl(), text)
    assert ours is None or isinstance(ours, REPORTED), f"dhir crashed on the sample: {ours!r}"
    if ours is None and theirs is not None:
        return f"xDSL fails where dhir reads it: {type(theirs).__name__}: {theirs}"
    if ours is not None and not isinstance(theirs, REPORTED):
        return f"xDSL does not report dhir's error ({ours}): it gives {theirs!r}"
    if ours is None:
        for generic in (False, True):
            mine = _show(_parse(_dhir(), text), generic)
            if _show(_parse(_plain_xdsl(), text), generic) != mine:
                return f"xDSL prints the {'generic' if generic else 'custom'} form differently"
    return None


def test_every_shadow_notes_its_xdsl_gap() -> None:
    silent = [s.name for s in SHADOWS if "xDSL" not in (s.ours.__dict__.get("__doc__") or "")]
    assert not silent, f"shadow ops without a note of the xDSL gap they cover: {silent}"


def test_every_sample_names_a_shadow() -> None:
    assert set(SAMPLES) <= SHADOW_NAMES


@pytest.mark.parametrize("shadow", [s for s in SHADOWS if s.theirs is None], ids=str)
def test_xdsl_lacks(shadow: Shadow) -> None:
    dialect = get_all_dialects()[shadow.name.split(".")[0]]()
    names = {d.name for d in (*dialect.operations, *dialect.attributes)}
    assert shadow.name not in names, (
        f"xDSL fixed this: delete dhir's shadow of {shadow.name} (xDSL now defines it; "
        "check that it reads and prints MLIR 22's syntax)"
    )


@pytest.mark.parametrize("shadow", [s for s in SHADOWS if s.theirs is not None], ids=str)
def test_xdsl_gets_wrong(shadow: Shadow) -> None:
    samples = [*SAMPLES.get(shadow.name, []), *_corpus_samples(shadow.name)]
    assert samples, f"no sample shows what xDSL gets wrong about {shadow.name}"
    gaps = [gap for gap in map(_gap, samples) if gap is not None]
    assert gaps, (
        f"xDSL fixed this: delete dhir's shadow of {shadow.name} (plain xDSL reads, "
        f"verifies and prints all {len(samples)} samples as dhir does)"
    )


def _xdsl_dialect_imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        for module in modules:
            if module.startswith("xdsl.dialects") and module != "xdsl.dialects.builtin":
                yield f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {module}"


def test_only_dhir_dialects_import_xdsl_dialects() -> None:
    """dhir/dialects is the one door to xDSL's dialects, so that no module picks xDSL's op
    where dhir has its own (builtin's types and attributes, never shadowed, excepted)."""
    found = [
        line
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "dialects"
        for line in _xdsl_dialect_imports(path)
    ]
    assert not found, "import these from dhir.dialects instead:\n" + "\n".join(found)
