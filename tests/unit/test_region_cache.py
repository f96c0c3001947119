"""The parser's cache of task bodies (dhir/ir/region_cache.py): a cloned body must be
exactly the IR, locations included, that parsing its text gives."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import (
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
)

from dhir.api import parse_string, print_module
from dhir.context import make_context
from dhir.ir.diagnostics import DhirError
from dhir.ir.parser import LocatedParser
from dhir.ir.verifier import verify_module

NAMES = ("%a", "%buffer_with_a_long_name", "%m7", "%x2")
BODIES = (
    # {0}, {1}: the task's operands; %s: an f32 from outside the schedule; {2}: an
    # index literal, {3}: a float literal, {4}: an i8 literal (may be out of range).
    "%i = arith.constant {2} : index\n      %v = memref.load {0}[%i] : memref<8xf32>\n"
    "      memref.store %v, {1}[%i] : memref<8xf32>",
    "%i = arith.constant 1 : index\n      %v = memref.load {0}[%i] : memref<8xf32>\n"
    "      %w = arith.addf %v, %s : f32\n      memref.store %w, {1}[%i] : memref<8xf32>",
    "%f = arith.constant {3} : f32\n      %k = arith.constant {4} : i8\n"
    "      %i = arith.constant {2} : index\n      %v = memref.load {0}[%i] : memref<8xf32>\n"
    "      %w = arith.mulf %v, %f : f32\n      memref.store %w, {1}[%i] : memref<8xf32>",
    "%c0 = arith.constant 0 : index\n      %c8 = arith.constant 8 : index\n"
    "      %c1 = arith.constant 1 : index\n      scf.for %i = %c0 to %c8 step %c1 {{\n"
    "        %v = memref.load {1}[%i] : memref<8xf32>\n"
    "        %w = arith.mulf %v, %s : f32\n        memref.store %w, {0}[%i] : memref<8xf32>\n"
    "      }}",
)


INDEX_LITERALS = ("0", "7", "-3", "12345678901")
FLOAT_LITERALS = ("0.1", "-2.5e3", "1.", "3.0E-2", "7")
I8_LITERALS = ("0", "-128", "255", "127")

Task = tuple[int, int, int, int, int, int]  # body, operands, literals (by position)


def program(tasks: list[Task]) -> str:
    args = ", ".join(f"{name}: memref<8xf32>" for name in NAMES)
    lines = [
        f"func.func @main({args}, %s: f32) {{",
        f"  dhir.schedule {', '.join(NAMES)} {{",
        '    %cpu = dhir.target {kind = "cpu"}',
    ]
    for k, (body, first, second, index, real, small) in enumerate(tasks):
        a, b = NAMES[first], NAMES[second]
        operands = a if a == b else f"{a}, {b}"
        lines.append(f"    %t{k} = dhir.task %cpu, {operands} {{")
        literals = INDEX_LITERALS[index], FLOAT_LITERALS[real], I8_LITERALS[small]
        lines.append("      " + BODIES[body].format(a, b, *literals))
        lines.append("    }")
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)


def parse(text: str, cache: bool) -> tuple[str, int]:
    parser = LocatedParser(make_context(), text, "t.mlir")
    if not cache:
        parser.task_bodies = None  # type: ignore[assignment]
    module = parser.parse_module()
    verify_module(module, parser.task_bodies.cloned if cache else None)
    clones = len(parser.task_bodies.cloned) if cache else 0
    return print_module(module, generic=True, debuginfo=True), clones


task_lists = st.lists(
    st.tuples(
        st.integers(0, len(BODIES) - 1),
        st.integers(0, len(NAMES) - 1),
        st.integers(0, len(NAMES) - 1),
        st.integers(0, len(INDEX_LITERALS) - 1),
        st.integers(0, len(FLOAT_LITERALS) - 1),
        st.integers(0, len(I8_LITERALS) - 1),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, deadline=None)
@given(task_lists)
def test_clones_equal_parsed_ir_with_locations(tasks: list[Task]) -> None:
    text = program(tasks)
    cached, clones = parse(text, cache=True)
    plain, _ = parse(text, cache=False)
    assert cached == plain
    # Literals are not part of a body's key, but their kind (integer or not) is.
    shapes = {
        (body, first == second, "{3}" in BODIES[body] and FLOAT_LITERALS[real] != "7")
        for body, first, second, _, real, _ in tasks
    }
    assert clones == len(tasks) - len(shapes)


def test_a_prototype_that_lists_an_operand_twice() -> None:
    # The second body's key equals the first's (it uses only its first operand), but
    # its clone must read %a, not the operand listed second.
    task = """    %t{k} = dhir.task %cpu, {operands} {{
      %i = arith.constant 0 : index
      %v = memref.load {used}[%i] : memref<8xf32>
      memref.store %v, {used}[%i] : memref<8xf32>
    }}"""
    text = "\n".join(
        [
            "func.func @main(%a: memref<8xf32>, %b: memref<8xf32>) {",
            "  dhir.schedule %a, %b {",
            '    %cpu = dhir.target {kind = "cpu"}',
            task.format(k=0, operands="%b, %b", used="%b"),
            task.format(k=1, operands="%a, %b", used="%a"),
            "  }",
            "  return",
            "}",
            "",
        ]
    )
    cached, clones = parse(text, cache=True)
    assert clones == 1
    assert cached == parse(text, cache=False)[0]


def test_clone_errors_point_at_the_clone() -> None:
    # The same body under a CPU target: the error is in the second task's body.
    text = """func.func @main(%a: memref<8xf32>, %bb: memref<8xf32>) {
  dhir.schedule %a, %bb {
    %gpu = dhir.target {kind = "gpu"}
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %gpu, %a {
      %c1 = arith.constant 1 : index
      gpu.launch blocks(%x, %y, %z) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%u, %v, %w) in (%tx = %c1, %ty = %c1, %tz = %c1) {
        gpu.terminator
      }
    }
    %t1 = dhir.task %cpu, %bb {
      %c1 = arith.constant 1 : index
      gpu.launch blocks(%x, %y, %z) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%u, %v, %w) in (%tx = %c1, %ty = %c1, %tz = %c1) {
        gpu.terminator
      }
    }
  }
  return
}
"""  # noqa: E501
    with pytest.raises(DhirError) as error:
        parse_string(text, "t.mlir")
    assert "t.mlir:13:7" in str(error.value)


def test_outer_value_of_another_type_is_parsed_not_cloned() -> None:
    body = "%v = arith.addf %s, %s : f32"
    text = f"""func.func @f(%a: memref<8xf32>, %s: f32) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t0 = dhir.task %cpu, %a {{
      {body}
    }}
  }}
  return
}}
func.func @g(%a: memref<8xf32>, %s: f64) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t0 = dhir.task %cpu, %a {{
      {body}
    }}
  }}
  return
}}
"""
    with pytest.raises(DhirError) as error:
        parse_string(text, "t.mlir")
    assert "t.mlir:14:" in str(error.value)  # the f64 use, parsed for real


def test_outer_value_that_does_not_dominate_a_clone() -> None:
    task = """  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %i = arith.constant 0 : index
      memref.store %s, %a[%i] : memref<8xf32>
    }
  }"""
    text = f"""func.func @f(%a: memref<8xf32>, %c: i1) {{
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  %s = arith.constant 1.0 : f32
{task}
  cf.br ^bb2
^bb2:
{task}
  return
}}
"""
    with pytest.raises(DhirError) as error:
        parse_string(text, "t.mlir")
    assert "does not dominate" in str(error.value)
    assert "t.mlir:18:7" in str(error.value)  # the store in the second schedule's task


def test_clone_with_a_literal_out_of_range_is_parsed_and_reported() -> None:
    body = "%k = arith.constant {} : i8\n      memref.store %s, %a[%i] : memref<8xf32>"
    tasks = "\n".join(
        f"    %t{k} = dhir.task %cpu, %a {{\n      {body.format(literal)}\n    }}"
        for k, literal in enumerate(("1", "2", "300"))
    )
    text = f"""func.func @f(%a: memref<8xf32>, %s: f32, %i: index) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
{tasks}
  }}
  return
}}
"""
    with pytest.raises(DhirError) as error:
        parse_string(text, "t.mlir")
    assert "t.mlir:13:12:" in str(error.value)
    assert "300" in str(error.value)


def test_locations_equal_those_the_constructor_makes() -> None:
    text = "func.func @f() {\n  %c = arith.constant 1 : i32\n  return\n}\n"
    parser = LocatedParser(make_context(), text, "t.mlir", line_offset=4)
    fast = parser.location_at(text.index("%c"))
    made = FileLineColLoc(StringAttr("t.mlir"), IntAttr(6), IntAttr(3))
    assert fast == made and hash(fast) == hash(made)
    assert (fast.filename, fast.line, fast.column) == (made.filename, made.line, made.column)
    assert str(fast) == str(made)


def _uses(module: ModuleOp) -> list[list[tuple[str, int]]]:
    """Every value's uses, in their list's order, as (user's location, operand index)."""
    values = [arg for op in module.walk() for r in op.regions for b in r.blocks for arg in b.args]
    values += [result for op in module.walk() for result in op.results]
    return [[(str(use.operation.location), use.index) for use in value.uses] for value in values]


def _program(body: str) -> str:
    tasks = "\n".join(
        f"    %t{k} = dhir.task %cpu, {m} {{\n      {body.format(k=k, m=m)}\n    }}"
        for k, m in enumerate(("%a", "%b", "%a"))
    )
    return f"""func.func @main(%a: memref<8xf32>, %b: memref<8xf32>) {{
  dhir.schedule %a, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
{tasks}
  }}
  return
}}
"""


def _parse_both(text: str) -> tuple[ModuleOp, ModuleOp]:
    """(with the cache, without it), unverified."""
    parser = LocatedParser(make_context(), text, "t.mlir")
    cached = parser.parse_module()
    assert len(parser.task_bodies.cloned) == 2
    plain_parser = LocatedParser(make_context(), text, "t.mlir")
    plain_parser.task_bodies = None  # type: ignore[assignment]
    plain = plain_parser.parse_module()
    generic = [print_module(m, generic=True, debuginfo=True) for m in (cached, plain)]
    assert generic[0] == generic[1]
    return cached, plain


def test_clones_keep_block_names_and_every_use_in_order() -> None:
    # A region of two named blocks with arguments and a branch between them. The
    # prototype kept for cloning must not hold uses of %a and %b.
    body = """%c0 = arith.constant {k} : index
      %v = memref.load {m}[%c0] : memref<8xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, {m}[%c0] : memref<8xf32>
      scf.execute_region {{
        cf.br ^next(%v : f32)
      ^next(%x: f32):
        memref.store %x, {m}[%c0] : memref<8xf32>
        scf.yield
      }}"""
    cached, plain = _parse_both(_program(body))
    assert _uses(cached) == _uses(plain)


def test_clones_with_a_use_before_its_definition() -> None:
    # The parser takes it (the verifier rejects it): cloned, it is the same IR.
    body = """%w = arith.addf %v, %v : f32
      %c0 = arith.constant {k} : index
      %v = memref.load {m}[%c0] : memref<8xf32>
      memref.store %w, {m}[%c0] : memref<8xf32>"""
    _parse_both(_program(body))


def test_clones_keep_names_with_two_number_suffixes() -> None:
    """`%i_1_2` is kept as "i_1" by the parser; a clone kept it as "i" (its name set
    again through the setter, which takes `_N` off once more), and printed otherwise."""
    task = """    %t{n} = dhir.task %cpu, %a {{
      %i_1_2 = arith.constant {n} : index
      %x_1_2 = memref.load %a[%i_1_2] : memref<4xf32>
      memref.store %x_1_2, %a[%i_1_2] : memref<4xf32>
    }}
"""
    text = (
        "func.func @main(%a: memref<4xf32>) {\n  dhir.schedule %a {\n"
        '    %cpu = dhir.target {kind = "cpu"}\n'
        + "".join(task.format(n=n) for n in range(2))
        + "  }\n  return\n}"
    )
    parser = LocatedParser(make_context(), text, "t.mlir")
    module = parser.parse_module()
    assert len(parser.task_bodies.cloned) == 1
    names = [
        [r.name_hint for op in body.walk() for r in op.results]
        for body in parser.task_bodies.cloned
    ]
    assert names == [["i_1", "x_1"]]
    assert print_module(module).count("%i_1_1 = arith.constant 1") == 1


def test_clone_using_a_value_from_outside_its_function() -> None:
    """The verifier reads only the outer values a clone lists for func.func's isolation
    check: @other's clones of @main's task use the module's %s, not an argument."""
    task = """    %t{n} = dhir.task %cpu, %a {{
      %i = arith.constant {n} : index
      %x = memref.load %a[%i] : memref<4xf32>
      %y = arith.addf %x, %s : f32
      memref.store %y, %a[%i] : memref<4xf32>
    }}
"""

    def function(name: str, args: str) -> str:
        tasks = "".join(task.format(n=n) for n in range(2))
        head = f'func.func @{name}({args}) {{\n  dhir.schedule %a {{\n    %cpu = dhir.target {{kind = "cpu"}}\n'
        return head + tasks + "  }\n  return\n}\n"

    text = (
        function("main", "%a: memref<4xf32>, %s: f32")
        + '%s = "arith.constant"() <{value = 1.0 : f32}> : () -> f32\n'
        + function("other", "%a: memref<4xf32>")
    )
    parser = LocatedParser(make_context(), text, "t.mlir")
    parser.parse_module()
    assert len(parser.task_bodies.cloned) == 3
    with pytest.raises(DhirError, match="IsolatedFromAbove") as error:
        parse_string(text, "t.mlir")
    assert "t.mlir:20:1" in str(error.value)


def test_cloned_literals_are_built_without_the_constructors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A generated schedule's literals are mostly distinct: each through IntegerAttr's or
    FloatAttr's constructor cost 20-30 us (docs/performance.md). Only the prototype's
    are the parser's own; the clones' equal what parsing gives (the tests above)."""
    built: list[str] = []
    for cls in (IntegerAttr, FloatAttr):
        original = cls.__init__

        def counted(self: object, *args: object, _original: object = original) -> None:
            built.append(type(self).__name__)
            _original(self, *args)  # pyright: ignore[reportCallIssue]

        monkeypatch.setattr(cls, "__init__", counted)
    body = (
        "%i = arith.constant {k} : index\n      %s = arith.constant {k}.5 : f32\n"
        "      %v = memref.load {m}[%i] : memref<8xf32>\n      %w = arith.mulf %v, %s : f32\n"
        "      memref.store %w, {m}[%i] : memref<8xf32>"
    )
    parse_string(_program(body), "t.mlir")  # three tasks: a prototype and two clones
    assert sorted(built) == ["FloatAttr", "IntegerAttr"]
