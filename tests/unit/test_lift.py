"""The index lifter (dhir.analysis.lift): each op it follows, the signedness of every
cast, min/max/select as bounds, unknown as None, and a property test that the concrete
value of random index expressions lies within what the lifter says."""

import sys
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.ir import Operation, OpResult, SSAValue

from dhir.analysis.lift import Lifted, Lifter, divided, evaluate, isl_text
from dhir.api import parse_string
from dhir.dialects import arith


def values(body: str, args: str = "") -> dict[str, SSAValue]:
    """Every named value of `body` (in a function taking `args`), by name."""
    module = parse_string(f"func.func @f({args}) {{\n{body}\n  return\n}}\n")
    found: dict[str, SSAValue] = {}
    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                found.update({a.name_hint: a for a in block.args if a.name_hint})
        found.update({v.name_hint: v for v in op.results if v.name_hint})
    return found


def text(lifted: Lifted | None, names: dict[str, str] | None = None) -> object:
    """`lifted` as isl text over leaves named after their SSA names (or `names`)."""
    if lifted is None:
        return None
    named = _Names(names or {})
    low, high = isl_text(lifted.low, named), isl_text(lifted.high, named)
    return low if lifted.exact else (low, high)


class _Names(dict[object, str]):
    """Leaf names: an SSA value by its name hint."""

    def __init__(self, extra: dict[str, str]) -> None:
        super().__init__()
        self.extra = extra

    def get(self, key: object, default: object = None) -> str | None:  # type: ignore[override]
        hint = getattr(key, "name_hint", None)
        return self.extra.get(hint, hint) if isinstance(hint, str) else None


def number(body: str, name: str, args: str = "") -> int | None:
    return Lifter().constant(values(body, args)[name])


def test_constants_and_arithmetic_fold() -> None:
    body = """
  %a = arith.constant 7 : index
  %b = arith.constant -3 : index
  %s = arith.addi %a, %b : index
  %d = arith.subi %a, %b : index
  %m = arith.muli %s, %d : index
"""
    assert [number(body, n) for n in "sdm"] == [4, 10, 40]


def test_narrow_arithmetic_wraps_and_is_read_signed() -> None:
    """100 + 100 in i8 is -56: an i8 value is its bits, read signed as a number."""
    body = """
  %a = arith.constant 100 : i8
  %s = arith.addi %a, %a : i8
  %u = arith.index_castui %s : i8 to index
  %x = arith.index_cast %s : i8 to index
"""
    assert (number(body, "s"), number(body, "u"), number(body, "x")) == (-56, 200, -56)


def test_64_bit_arithmetic_wraps_and_what_may_wrap_is_unknown() -> None:
    """MLIR's addi and muli wrap at 64 bits too: 2 + C + C with C = 2**63 - 1 is 0, and
    i + C + C for i in [2, 8] is i - 2, not an index past 2**64 (a region of nothing)."""
    body = """
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c9 = arith.constant 9 : index
  %big = arith.constant 9223372036854775807 : index
  %a = arith.addi %c2, %big : index
  %b = arith.addi %a, %big : index
  %m = arith.muli %big, %c2 : index
  %near = arith.constant 9223372036854775799 : index
  scf.for %i = %c2 to %c9 step %c1 {
    %n = arith.addi %i, %near : index
    %x = arith.addi %i, %big : index
    %y = arith.addi %x, %big : index
    %z = affine.apply affine_map<(d0) -> (d0 * 4611686018427387904 + 4611686018427387904)>(%i)
    %w = arith.addi %i, %c1 : index
  }
"""
    found = values(body)
    lift = Lifter()
    assert (number(body, "b"), number(body, "m")) == (0, -2)
    assert lift.value(found["n"]) is not None  # at most 2**63 - 1
    assert lift.value(found["x"]) is None
    assert lift.value(found["y"]) is None
    assert lift.value(found["z"]) is None
    assert text(lift.value(found["w"])) == "i + 1"


def test_casts_read_with_their_own_signedness() -> None:
    body = """
  %n = arith.index_cast %i : index to i8
  %u = arith.index_castui %n : i8 to index
  %s = arith.index_cast %n : i8 to index
  %z = arith.extui %n : i8 to i32
  %e = arith.extsi %n : i8 to i32
  %zi = arith.index_cast %z : i32 to index
  %ei = arith.index_cast %e : i32 to index
  %w = arith.index_cast %i : index to i64
  %wu = arith.index_castui %w : i64 to index
"""
    found = values(body, "%i: index")
    lift = Lifter()
    assert text(lift.value(found["u"])) == "((i) mod 256)"
    assert text(lift.value(found["zi"])) == "((i) mod 256)"
    signed = "((i + 128) mod 256) + -128"
    assert text(lift.value(found["s"])) == signed
    assert text(lift.value(found["ei"])) == signed
    # Same width: the same bits, the same index.
    assert text(lift.value(found["wu"])) == "i"


def test_an_unsigned_read_of_a_maybe_negative_value_is_not_the_value() -> None:
    """index_castui of an i8 loop variable from -8 to 8 is i mod 256, not i: its linear
    form is unknown; from 0 to 100 it is i."""
    body = """
  %lo = arith.constant {lo} : i8
  %hi = arith.constant {hi} : i8
  %one = arith.constant 1 : i8
  scf.for %i = %lo to %hi step %one : i8 {{
    %u = arith.index_castui %i : i8 to index
    %s = arith.index_cast %i : i8 to index
    func.call @use(%u, %s) : (index, index) -> ()
  }}
"""
    for lo, hi, unsigned in ((-8, 8, None), (0, 100, 1)):
        module = parse_string(
            "func.func private @use(index, index)\nfunc.func @f() {\n"
            + body.format(lo=lo, hi=hi)
            + "  return\n}\n"
        )
        call = next(op for op in module.walk() if op.name == "func.call")
        lift = Lifter()
        u, s = (lift.linear(lift.value(v)) for v in call.operands)
        variable = call.parent_block().args[0]  # type: ignore[union-attr]
        assert u == (None if unsigned is None else {variable: 1})
        assert s == {variable: 1}


def test_trunci_keeps_the_bits() -> None:
    body = """
  %a = arith.constant 300 : i32
  %t = arith.trunci %a : i32 to i8
  %u = arith.index_castui %t : i8 to index
  %b = arith.constant 13 : i32
  %t3 = arith.trunci %b : i32 to i3
"""
    assert (number(body, "t"), number(body, "u"), number(body, "t3")) == (44, 44, -3)


def test_a_product_of_two_variables_and_other_ops_are_unknown() -> None:
    body = """
  %m = arith.muli %i, %j : index
  %d = arith.divsi %i, %j : index
  %r = arith.remsi %i, %j : index
  %f = arith.constant 1.0 : f32
"""
    found = values(body, "%i: index, %j: index")
    lift = Lifter()
    assert [lift.value(found[n]) for n in "mdrf"] == [None] * 4


def test_min_and_max_are_exact() -> None:
    body = """
  %c3 = arith.constant 3 : index
  %m = arith.minsi %i, %c3 : index
  %x = arith.maxsi %i, %j : index
  %a = affine.min affine_map<(d0)[s0] -> (d0 + 1, s0)>(%i)[%j]
  %b = affine.max affine_map<(d0) -> (d0, 5)>(%i)
"""
    found = values(body, "%i: index, %j: index")
    lift = Lifter()
    assert text(lift.value(found["m"])) == "(min(i, 3))"
    assert text(lift.value(found["x"])) == "(max(i, j))"
    assert text(lift.value(found["a"])) == "(min(i + 1, j))"
    assert text(lift.value(found["b"])) == "(max(i, 5))"


def test_unsigned_min_reads_unsigned() -> None:
    """minui(-1, 5) in i8 is 5 (-1 is 255); minsi is -1."""
    body = """
  %a = arith.constant -1 : i8
  %b = arith.constant 5 : i8
  %u = arith.minui %a, %b : i8
  %s = arith.minsi %a, %b : i8
  %x = arith.maxui %a, %b : i8
"""
    assert [number(body, n) for n in "usx"] == [5, -1, -1]


def test_minui_of_maybe_negative_index_values_is_unknown() -> None:
    found = values("  %u = arith.minui %i, %j : index\n", "%i: index, %j: index")
    assert Lifter().value(found["u"]) is None


def test_the_index_dialect_is_read_as_arith() -> None:
    """Index-dialect arithmetic was unknown: a subscript a[i + 4] made with index.add
    was taken as any element of a."""
    body = """
  %c4 = index.constant 4
  %a = index.add %i, %c4
  %s = index.sub %a, %j
  %m = index.mul %s, %c4
  %lo = index.mins %m, %j
  %hi = index.maxu %c4, %c4
  %n = index.castu %i : index to i8
  %w = index.casts %n : i8 to index
  %d = index.divs %i, %c4
  %x = index.shl %i, %c4
"""
    found = values(body, "%i: index, %j: index")
    lift = Lifter()
    assert [text(lift.value(found[n])) for n in ("a", "s", "m", "lo", "hi")] == [
        "i + 4", "i + -1*j + 4", "4*i + -4*j + 16", "(min(4*i + -4*j + 16, j))", "4",
    ]  # fmt: skip
    assert text(lift.value(found["w"])) == "((i + 128) mod 256) + -128"  # i's low 8 bits, signed
    assert [lift.value(found[n]) for n in "dx"] == [None, None]


def test_select_is_a_range_between_its_choices() -> None:
    body = """
  %c1 = arith.constant 1 : index
  %p = arith.addi %i, %c1 : index
  %s = arith.select %c, %i, %p : index
  %same = arith.select %c, %i, %i : index
  %k = arith.constant 4 : index
  %k2 = arith.constant 9 : index
  %sk = arith.select %c, %k, %k2 : index
"""
    found = values(body, "%i: index, %c: i1")
    lift = Lifter()
    assert text(lift.value(found["s"])) == ("(min(i, i + 1))", "(max(i, i + 1))")
    assert text(lift.value(found["same"])) == "i"
    assert text(lift.value(found["sk"])) == ("4", "9")
    assert lift.constant(found["sk"]) is None
    assert lift.linear(lift.value(found["s"])) is None


def test_a_narrow_range_that_may_wrap_widens_to_its_type() -> None:
    """A select of two i8 values plus 100 may wrap: any i8 value."""
    body = """
  %a = arith.constant 10 : i8
  %b = arith.constant 50 : i8
  %s = arith.select %c, %a, %b : i8
  %h = arith.constant 100 : i8
  %t = arith.addi %s, %h : i8
  %n = arith.addi %s, %a : i8
  %u = arith.extui %s : i8 to i32
"""
    found = values(body, "%c: i1")
    lift = Lifter()
    assert text(lift.value(found["t"])) == ("-128", "127")
    assert text(lift.value(found["n"])) == ("20", "60")
    assert text(lift.value(found["u"])) == ("10", "50")


def test_affine_apply_follows_the_map() -> None:
    body = """
  %a = affine.apply affine_map<(d0)[s0] -> (d0 * 2 + s0 floordiv 3 - (d0 mod 4))>(%i)[%j]
  %k = arith.constant 10 : index
  %b = affine.apply affine_map<(d0) -> (d0 ceildiv 4)>(%k)
"""
    found = values(body, "%i: index, %j: index")
    lift = Lifter()
    assert text(lift.value(found["a"])) == "2*i + (floor((j)/3)) + -1*((i) mod 4)"
    assert lift.constant(found["b"]) == 3


def test_leaves_are_block_arguments_named_by_the_caller() -> None:
    found = values("  %s = arith.addi %i, %j : index\n", "%i: index, %j: index")
    lift = Lifter()
    lifted = lift.value(found["s"])
    assert lifted is not None
    assert isl_text(lifted.low, {found["i"]: "x"}) is None  # j has no name: unknown
    assert isl_text(lifted.low, {found["i"]: "x", found["j"]: "y"}) == "x + y"
    assert evaluate(lifted.low, {found["i"]: 2, found["j"]: 5}) == 7


def test_a_long_chain_needs_no_deep_recursion() -> None:
    steps = max(sys.getrecursionlimit(), 1000) + 500
    lines = ["  %c1 = arith.constant 1 : index", "  %v0 = arith.addi %i, %c1 : index"]
    lines += [f"  %v{k} = arith.addi %v{k - 1}, %c1 : index" for k in range(1, steps)]
    found = values("\n".join(lines), "%i: index")
    lift = Lifter()
    lifted = lift.value(found[f"v{steps - 1}"])
    assert text(lifted) == f"i + {steps}"


def test_loop_variables_have_the_ranges_of_constant_bounds() -> None:
    body = """
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c10 = arith.constant 10 : index
  scf.for %i = %c2 to %c10 step %c3 {
    affine.for %j = 1 to 5 {
    }
  }
"""
    found = values(body)
    lift = Lifter()
    assert lift.leaf_range(found["i"]) == (2, 8)
    assert lift.leaf_range(found["j"]) == (1, 4)


# --- property: the concrete value lies within the lifted bounds ---------------------------

WIDTHS = {"index": 64, "i64": 64, "i32": 32, "i8": 8, "i3": 3}


def _bits(value: int, width: int) -> int:
    return value % (1 << width)


def _signed(value: int, width: int) -> int:
    low = _bits(value, width)
    return low - (1 << width) if low >> (width - 1) else low


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, list[tuple[str, int, str]], dict[str, int]]:
    """A random straight-line program over two index arguments: its text, its values
    (name, concrete signed value, type), and the arguments' values."""
    args = {"i": draw(st.integers(-40, 40)), "j": draw(st.integers(-40, 40))}
    pool: list[tuple[str, int, str]] = [("i", args["i"], "index"), ("j", args["j"], "index")]
    numbers: set[str] = set()  # values made of constants alone, whose 64-bit sums may wrap
    lines: list[str] = []
    for k in range(draw(st.integers(1, 12))):
        name = f"v{k}"
        kind = draw(st.sampled_from(_KINDS))
        a_name, a, a_type = draw(st.sampled_from(pool))
        b_name, b, b_type = draw(st.sampled_from([p for p in pool if p[2] == a_type]))
        width = WIDTHS[a_type]
        if kind == "constant":
            value, ty = draw(st.integers(-300, 300)), draw(st.sampled_from(list(WIDTHS)))
            if WIDTHS[ty] == 64 and draw(st.booleans()):
                value = draw(st.sampled_from(_NEAR_64)) + value  # sums past 2**63 wrap
            value = _signed(value, WIDTHS[ty])
            lines.append(f"%{name} = arith.constant {value} : {ty}")
            pool.append((name, value, ty))
            numbers.add(name)
        elif kind in ("addi", "subi", "muli"):
            exact = {"addi": a + b, "subi": a - b, "muli": a * b}[kind]
            both = a_name in numbers and b_name in numbers
            if abs(exact) >= 1 << 40 and not both:
                # 64-bit arithmetic of unbounded leaves is taken not to overflow: keep
                # far from it (of loops of constant bounds it is checked: test above)
                continue
            lines.append(f"%{name} = arith.{kind} %{a_name}, %{b_name} : {a_type}")
            pool.append((name, _signed(exact, width), a_type))
            if both:
                numbers.add(name)
        elif kind in ("minsi", "maxsi", "minui", "maxui"):
            unsigned = kind.endswith("ui")
            x, y = (_bits(v, width) if unsigned else v for v in (a, b))
            picked = max(x, y) if kind.startswith("max") else min(x, y)
            lines.append(f"%{name} = arith.{kind} %{a_name}, %{b_name} : {a_type}")
            pool.append((name, _signed(picked, width), a_type))
        elif kind == "select":
            cond = draw(st.booleans())
            flag = "true" if cond else "false"
            lines.append(f"%c{name} = arith.constant {flag}")
            # The lifter must not read the condition: hide it behind a call's result.
            lines.append(f"%h{name} = func.call @hide(%c{name}) : (i1) -> i1")
            lines.append(f"%{name} = arith.select %h{name}, %{a_name}, %{b_name} : {a_type}")
            pool.append((name, a if cond else b, a_type))
        elif kind == "apply" and a_type == "index":
            c1, c2 = draw(st.integers(-3, 3)), draw(st.integers(1, 5))
            m = draw(st.sampled_from(["floordiv", "ceildiv", "mod"]))
            expr = f"d0 * {c1} + (s0 {m} {c2})" if c1 >= 0 else f"d0 * ({c1}) + (s0 {m} {c2})"
            amap = f"affine_map<(d0)[s0] -> ({expr})>"
            lines.append(f"%{name} = affine.apply {amap}(%{a_name})[%{b_name}]")
            part = {"floordiv": b // c2, "ceildiv": -(-b // c2), "mod": b % c2}[m]
            if abs(a * c1 + part) >= 1 << 40 and not (a_name in numbers and b_name in numbers):
                lines.pop()
                continue
            pool.append((name, _signed(a * c1 + part, 64), "index"))
        else:  # a cast to another width
            ty = draw(st.sampled_from(list(WIDTHS)))
            out = WIDTHS[ty]
            if a_type == ty or (a_type != "index" and ty != "index" and out == width):
                continue
            if "index" in (a_type, ty):
                op = draw(st.sampled_from(["index_cast", "index_castui"]))
            else:
                op = draw(st.sampled_from(["extsi", "extui"])) if out > width else "trunci"
            unsigned = op in ("index_castui", "extui")
            read = _bits(a, width) if unsigned and out > width else a
            lines.append(f"%{name} = arith.{op} %{a_name} : {a_type} to {ty}")
            pool.append((name, _signed(read, out), ty))
    return "\n".join(f"  {line}" for line in lines), pool, args


# Constants near the ends of the 64-bit range, to which small ones are added.
_NEAR_64 = (2**63 - 1, -(2**63), 2**62, -(2**62))

# Casts weigh more: each reads with its own signedness, and narrow values come from them.
_KINDS = ("constant", "constant", "addi", "subi", "muli", "minsi", "maxsi", "minui", "maxui",
          "select", "apply", "cast", "cast", "cast", "cast", "cast")  # fmt: skip


@settings(max_examples=150, deadline=None, derandomize=True)
@given(programs())
def test_random_expressions_lie_within_their_lifted_bounds(
    program: tuple[str, list[tuple[str, int, str]], dict[str, int]],
) -> None:
    body, pool, args = program
    module = parse_string(
        "func.func private @hide(i1) -> i1\n"
        f"func.func @f(%i: index, %j: index) {{\n{body}\n  return\n}}\n"
    )
    found: dict[str, SSAValue] = {}
    for op in module.walk():
        found.update({v.name_hint: v for v in op.results if v.name_hint})
        for region in op.regions:
            for block in region.blocks:
                found.update({a.name_hint: a for a in block.args if a.name_hint})
    env = {found[n]: v for n, v in args.items()}
    lift = Lifter()
    for name, concrete, _ in pool:
        lifted = lift.value(found[name])
        if lifted is None:
            continue
        low, high = evaluate(lifted.low, env), evaluate(lifted.high, env)
        assert low is not None and high is not None
        assert low <= concrete <= high, (name, body)
        if lifted.exact:
            assert low == concrete, (name, body)


class _Floors:
    """A reader of `arith.floordivsi` by a constant, as the lifter's floor division."""

    def __init__(self) -> None:
        self.lifter = Lifter(reader=self)

    def inputs(self, op: Operation) -> Sequence[SSAValue]:
        return op.operands if isinstance(op, arith.FloorDivSIOp) else ()

    def read(self, value: OpResult) -> Lifted | None:
        op = value.op
        if not isinstance(op, arith.FloorDivSIOp):
            return None
        dividend, divisor = self.lifter.exact(op.lhs), self.lifter.constant(op.rhs)
        if dividend is None or divisor is None or divisor <= 0:
            return None
        return Lifted.at(divided(dividend, divisor, ceil=False))


def test_a_reader_s_long_chain_is_lifted_without_recursion() -> None:
    steps = 300  # five frames a step, were the reader's inputs lifted as it reads
    lines = ["  %c2 = arith.constant 2 : index", "  %d0 = arith.addi %n, %c2 : index"]
    lines += [f"  %d{k + 1} = arith.floordivsi %d{k}, %c2 : index" for k in range(steps)]
    found = values("\n".join(lines), "%n: index")
    lifter = _Floors().lifter
    assert lifter.value(found[f"d{steps}"]) is not None
    assert lifter.constant(found[f"d{steps}"], {found["n"]: 3 * 2**steps - 2}) == 3


def test_unknown_results_are_leaves_of_their_own_only_when_asked() -> None:
    body = """
  %c0 = arith.constant 0 : index
  %x = memref.load %m[%c0] : memref<2xindex>
  %y = memref.load %m[%c0] : memref<2xindex>
  %d = arith.subi %x, %x : index
  %e = arith.subi %x, %y : index
"""
    found = values(body, "%m: memref<2xindex>")
    named = Lifter(named_unknowns=True)
    assert text(named.value(found["d"])) == "0"
    assert named.value(found["e"]) is not None
    assert named.constant(found["e"]) is None  # two different unknowns
    assert Lifter().value(found["d"]) is None
