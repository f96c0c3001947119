"""dhir.transforms.counted_whiles: an scf.while that counts as an scf.for does becomes that
scf.for; every other while loop (a condition read from memory or with an effect, another
predicate, a step of 0, a counter that may wrap past the largest index) stays as written."""

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dhir
from dhir.dialects import scf
from dhir.ir.text import parse_string
from dhir.transforms.codedrop import codedrop
from dhir.transforms.counted_whiles import as_for_loops
from dhir.transforms.optimize_bodies import optimize_bodies

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
TOP = 2**63 - 1


def _loop(
    head: str = "",
    before: str = "",
    predicate: str = "slt",
    start: str = "%c0",
    bound: str = "%n",
    step: str = "%c1",
    tail: str = "",
) -> str:
    """A function storing each counter value `i` at A[i mod 8], counting as written."""
    return f"""
func.func @main(%A: memref<8xindex>, %n: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
{head}
  %w = scf.while (%b = {start}) : (index) -> index {{
{before}
    %c = arith.cmpi {predicate}, %b, {bound} : index
    scf.condition(%c) %b : index
  }} do {{
  ^bb0(%i: index):
    %at = arith.remui %i, %c8 : index
    memref.store %i, %A[%at] : memref<8xindex>
{tail}
    %next = arith.addi %i, {step} : index
    scf.yield %next : index
  }}
  return
}}
"""


COUNTED = {
    "step 1, a bound given at run time": _loop(),
    "step 3 to a constant bound": _loop(
        head="  %c3 = arith.constant 3 : index\n  %c100 = arith.constant 100 : index",
        bound="%c100",
        step="%c3",
    ),
    "step 2 to the largest index less 1": _loop(
        head=f"  %c2 = arith.constant 2 : index\n  %top = arith.constant {TOP - 1} : index",
        bound="%top",
        step="%c2",
    ),
    "a step made in the body": _loop(tail="    %one = arith.constant 1 : index", step="%one"),
    "step 5 made in the body, a constant bound": _loop(
        tail="    %c5 = arith.constant 5 : index", step="%c5", bound="%c8"
    ),
}

LEFT = {
    "a condition read from memory": _loop(
        before="    %m = memref.load %A[%c0] : memref<8xindex>", bound="%m"
    ),
    "an effect before the condition": _loop(
        before="    memref.store %b, %A[%c1] : memref<8xindex>"
    ),
    "predicate ne": _loop(predicate="ne"),
    "predicate sle": _loop(predicate="sle"),
    "unsigned ult": _loop(predicate="ult"),
    "step 0": _loop(step="%c0"),
    "a step below 0": _loop(head="  %m1 = arith.constant -1 : index", step="%m1"),
    "a step known at run time": _loop(step="%n"),
    # From TOP - 3 step 2: TOP - 1 is below TOP, and the next count wraps to -2^63.
    "step 2 to the largest index": _loop(
        head=f"  %c2 = arith.constant 2 : index\n  %top = arith.constant {TOP} : index",
        bound="%top",
        step="%c2",
    ),
    "step 2 to a bound given at run time": _loop(
        head="  %c2 = arith.constant 2 : index", step="%c2"
    ),
}


@pytest.mark.parametrize("name", COUNTED)
def test_a_counted_while_becomes_its_for_loop(name: str) -> None:
    module = parse_string(COUNTED[name])
    made = as_for_loops(module)
    module.verify()
    assert len(made) == 1 and not any(isinstance(op, scf.WhileOp) for op in module.walk())
    step = made[0].step.owner
    assert made[0].lb.name_hint == "c0" and made[0].ub.owner is not None
    assert not any(op is step for op in made[0].walk())  # defined before the loop


@pytest.mark.parametrize("name", LEFT)
def test_other_while_loops_stay(name: str) -> None:
    module = parse_string(LEFT[name])
    assert as_for_loops(module) == []
    assert any(isinstance(op, scf.WhileOp) for op in module.walk())


def test_a_while_whose_count_is_used_stays() -> None:
    used = _loop().replace("  return\n", "  memref.store %w, %A[%c0] : memref<8xindex>\n  return\n")
    assert as_for_loops(parse_string(used)) == []


# Row sums, the sum carried by a counted while loop (as iter_args of an scf.for).
ROW_SUMS = """
func.func @main(%A: memref<6x5xf64>, %s: memref<6xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant -0.0 : f64
  scf.for %i = %c0 to %c6 step %c1 {
    %w:2 = scf.while (%b = %c0, %acc = %zero) : (index, f64) -> (index, f64) {
      %c = arith.cmpi slt, %b, %c5 : index
      scf.condition(%c) %b, %acc : index, f64
    } do {
    ^bb0(%k: index, %t: f64):
      %a = memref.load %A[%i, %k] : memref<6x5xf64>
      %u = arith.addf %t, %a : f64
      %next = arith.addi %k, %c1 : index
      scf.yield %next, %u : index, f64
    }
    memref.store %w#1, %s[%i] : memref<6xf64>
  }
  return
}
"""


def test_values_the_loop_carries_become_iter_args() -> None:
    module = parse_string(ROW_SUMS)
    (made,) = as_for_loops(module)
    module.verify()
    assert len(made.iter_args) == 1 and len(made.res) == 1 and made.res[0].uses
    a = np.random.default_rng(1).standard_normal((6, 5))
    want = dhir.run(ROW_SUMS, a, np.zeros(6), backend="interp", codedrop=False)
    assert want[1].tolist() == [sum(a[i, k] for k in range(5)) for i in range(6)]
    got = dhir.run(module, a, np.zeros(6), backend="interp", codedrop=False)
    assert got[1].tobytes() == want[1].tobytes()
    dropped = parse_string(ROW_SUMS)
    assert codedrop(dropped, "main").nests == 1
    decisions = optimize_bodies(dropped, 256)  # the for form's: sums of rows in lanes
    assert [d.done for d in decisions] == [True] and "sums of 4 rows" in decisions[0].text


def test_a_value_the_condition_changes_stays() -> None:
    swapped = ROW_SUMS.replace(
        "scf.condition(%c) %b, %acc : index, f64",
        "%acc2 = arith.addf %acc, %acc : f64\n      scf.condition(%c) %b, %acc2 : index, f64",
    )
    assert as_for_loops(parse_string(swapped)) == []


@needs_llvm
def test_carried_values_run_as_a_task_on_two_ranks() -> None:
    a = np.random.default_rng(2).standard_normal((6, 5))
    want = dhir.run(ROW_SUMS, a, np.zeros(6), backend="interp", codedrop=False)
    got = dhir.run(ROW_SUMS, a, np.zeros(6), ranks=2, timeout=120)
    assert got[1].tobytes() == want[1].tobytes()


# Loops that must keep their own meaning: each would count differently as an scf.for.
IRREGULAR = """
func.func @main(%A: memref<8xindex>, %B: memref<8xindex>, %C: memref<8xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %m8 = arith.constant -8 : index
  %c4 = arith.constant 4 : index
  // Unsigned: -8 is 2^64 - 8, not below 4, so this runs no iteration (slt would run 12).
  %u = scf.while (%b = %m8) : (index) -> index {
    %c = arith.cmpi ult, %b, %c4 : index
    scf.condition(%c) %b : index
  } do {
  ^bb0(%i: index):
    %at = arith.addi %i, %c8 : index
    %r = arith.remui %at, %c8 : index
    memref.store %i, %A[%r] : memref<8xindex>
    %next = arith.addi %i, %c1 : index
    scf.yield %next : index
  }
  // ne, step 2: 0, 2, 4, 6.
  %e = scf.while (%b = %c0) : (index) -> index {
    %c = arith.cmpi ne, %b, %c8 : index
    scf.condition(%c) %b : index
  } do {
  ^bb0(%i: index):
    memref.store %c7, %B[%i] : memref<8xindex>
    %next = arith.addi %i, %c2 : index
    scf.yield %next : index
  }
  // Data-dependent, an effect in the condition: follow C's links from 0 until one is 0,
  // counting the steps in C[7].
  %d = scf.while (%b = %c0) : (index) -> index {
    %k = memref.load %C[%c7] : memref<8xindex>
    %k1 = arith.addi %k, %c1 : index
    memref.store %k1, %C[%c7] : memref<8xindex>
    %link = memref.load %C[%b] : memref<8xindex>
    %c = arith.cmpi ne, %link, %c0 : index
    scf.condition(%c) %link : index
  } do {
  ^bb0(%i: index):
    %v = memref.load %A[%i] : memref<8xindex>
    %v1 = arith.addi %v, %c1 : index
    memref.store %v1, %A[%i] : memref<8xindex>
    scf.yield %i : index
  }
  return
}
"""


def _irregular_inputs() -> list[np.ndarray]:
    links = np.array([3, 0, 0, 5, 0, 2, 0, 0], dtype=np.int64)  # 0 -> 3 -> 5 -> 2 -> 0
    return [np.arange(8, dtype=np.int64) * 10, np.zeros(8, np.int64), links]


def _irregular_want() -> list[np.ndarray]:
    a, b, c = _irregular_inputs()
    a[[3, 5, 2]] += 1
    b[[0, 2, 4, 6]] = 7
    c[7] = 4  # the condition ran four times
    return [a, b, c]


def test_irregular_while_loops_stay_host_code() -> None:
    module = parse_string(IRREGULAR)
    assert codedrop(module, "main").nests == 0
    assert sum(isinstance(op, scf.WhileOp) for op in module.walk()) == 3
    for got, want in zip(
        dhir.run(IRREGULAR, *_irregular_inputs(), backend="interp"), _irregular_want()
    ):
        np.testing.assert_array_equal(got, want)


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_irregular_while_loops_give_their_result(ranks: int) -> None:
    got = dhir.run(IRREGULAR, *_irregular_inputs(), ranks=ranks, timeout=120)
    for g, want in zip(got, _irregular_want()):
        np.testing.assert_array_equal(g, want)


# A task's counted while loop whose step is made in its body: the scf.for made of it took
# that step from inside itself, and the build failed ("use of undeclared SSA value name").
STEP_IN_BODY = """
func.func @main(%A: memref<8x8xf64>, %B: memref<8x8xf64>) {
  dhir.schedule %A, %B {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %A, %B {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %w = scf.while (%b = %c0) : (index) -> index {
        %c = arith.cmpi slt, %b, %c8 : index
        scf.condition(%c) %b : index
      } do {
      ^bb0(%i: index):
        %c1 = arith.constant 1 : index
        scf.for %j = %c0 to %c8 step %c1 {
          %x = memref.load %A[%i, %j] : memref<8x8xf64>
          %y = arith.addf %x, %x : f64
          memref.store %y, %B[%i, %j] : memref<8x8xf64>
        }
        %n = arith.addi %i, %c1 : index
        scf.yield %n : index
      }
    }
  }
  return
}
"""


@needs_llvm
def test_a_task_loop_stepping_by_a_constant_of_its_body_builds() -> None:
    a = np.arange(64.0).reshape(8, 8)
    got = dhir.run(STEP_IN_BODY, a, np.zeros((8, 8)), timeout=120)
    np.testing.assert_array_equal(got[1], a + a)


def _counter(
    type_: str = "i32",
    start: int = 0,
    bound: int | None = None,
    step: int = 1,
    swapped_compare: bool = False,
    swapped_add: bool = False,
) -> str:
    """A function adding each value `i` of a counter of `type_` to A[i mod 8] (as i64) and
    counting the iterations in A[8], looping while `i < bound` (the argument %n where
    `bound` is None), `i = i + step`; the compare `bound > i`, the add `step + i` where
    swapped."""
    ub = "%n" if bound is None else "%ub"
    compare = f"sgt, {ub}, %b" if swapped_compare else f"slt, %b, {ub}"
    add = "%step, %i" if swapped_add else "%i, %step"
    if type_ == "index":
        wide = "%iw = arith.index_cast %i : index to i64"
        at = "%at = arith.remui %i, %c8 : index"
    else:
        wide = (
            f"%iw = arith.extsi %i : {type_} to i64"
            if type_ != "i64"
            else "%iw = arith.addi %i, %z : i64"
        )
        at = (
            f"%r = arith.remui %i, %c8t : {type_}\n    %at = arith.index_cast %r : {type_} to index"
        )
    return f"""
func.func @main(%A: memref<9xi64>, %n: {type_}) {{
  %c8 = arith.constant 8 : index
  %c8t = arith.constant 8 : {type_}
  %z = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %start = arith.constant {start} : {type_}
  %step = arith.constant {step} : {type_}
  %ub = arith.constant {bound if bound is not None else 0} : {type_}
  %w = scf.while (%b = %start) : ({type_}) -> {type_} {{
    %c = arith.cmpi {compare} : {type_}
    scf.condition(%c) %b : {type_}
  }} do {{
  ^bb0(%i: {type_}):
    {wide}
    {at}
    %old = memref.load %A[%at] : memref<9xi64>
    %new = arith.addi %old, %iw : i64
    memref.store %new, %A[%at] : memref<9xi64>
    %k = memref.load %A[%c8] : memref<9xi64>
    %k1 = arith.addi %k, %one : i64
    memref.store %k1, %A[%c8] : memref<9xi64>
    %next = arith.addi {add} : {type_}
    scf.yield %next : {type_}
  }}
  return
}}
"""


BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}


def _model(bits: int, start: int, bound: int, step: int) -> list[int]:
    """What `_counter`'s while loop leaves in A: its counter wraps as arith.addi does."""
    a = [0] * 9
    half = 2 ** (bits - 1)
    i = start
    while i < bound:
        at = (i % 2**bits) % 8
        a[at] = (a[at] + i + 2**63) % 2**64 - 2**63  # an i64 sum, which wraps
        a[8] += 1
        i = (i + step + half) % 2**bits - half
    return a


# Counters the conversion takes: other types, either order of compare and add, the last
# counter value of the type reached exactly (i32: 2^31 - 2 + 1 is 2^31 - 1).
TYPED = {
    "i32, bound > i, c + i": {"type_": "i32", "swapped_compare": True, "swapped_add": True},
    "i64, bound > i": {"type_": "i64", "swapped_compare": True},
    "i16, c + i, step 3": {"type_": "i16", "swapped_add": True, "step": 3, "bound": 40},
    "index, bound > i, step 2": {"type_": "index", "swapped_compare": True, "step": 2, "bound": 9},
    "i32, step 2 to the largest i32 less 1": {
        "type_": "i32", "start": 2**31 - 9, "bound": 2**31 - 2, "step": 2
    },
    "i8, step 100 to 28": {"type_": "i8", "start": -100, "bound": 28, "step": 100},
}  # fmt: skip

# Counters that wrap past their type's largest value: as an scf.for, dhir would stop them.
WRAPPING = {
    # 2^31 - 3 < 2^31 - 1, and 2^31 - 1 wraps to -2^31, still below the bound.
    "i32, step 2 to the largest i32": {
        "type_": "i32", "start": 2**31 - 5, "bound": 2**31 - 1, "step": 2
    },
    # 50, then 150 wraps to -106, ..., 82, 182 wraps to -74, 26: 11 iterations (as an
    # scf.for: one, then dhir stops it).
    "i8, step 100 to 100": {"type_": "i8", "start": 50, "bound": 100, "step": 100},
    "i16, step 2 to a bound given at run time": {"type_": "i16", "step": 2},
}  # fmt: skip


def _run_counter(
    program: object, keywords: dict[str, object], backend: str = "interp"
) -> list[int]:
    """A of `_counter`'s function run with the bound argument 13."""
    got = dhir.run(program, np.zeros(9, np.int64), 13, backend=backend, codedrop=False)  # pyright: ignore[reportArgumentType]
    return got[0].tolist()


def _want(keywords: dict[str, object]) -> list[int]:
    bound = keywords.get("bound")
    return _model(BITS[str(keywords["type_"])], int(keywords.get("start", 0)),  # pyright: ignore[reportArgumentType]
                  13 if bound is None else int(bound), int(keywords.get("step", 1)))  # pyright: ignore[reportArgumentType]  # fmt: skip


@pytest.mark.parametrize("name", TYPED)
def test_counters_of_other_types_and_orders_become_for_loops(name: str) -> None:
    keywords = TYPED[name]
    text = _counter(**keywords)  # pyright: ignore[reportArgumentType]
    module = parse_string(text)
    (made,) = as_for_loops(module)
    module.verify()
    assert str(made.lb.type) == str(made.step.type) == keywords["type_"]
    want = _want(keywords)
    assert want[8] > 0 and _run_counter(text, keywords) == want
    assert _run_counter(module, keywords) == want


@pytest.mark.parametrize("name", WRAPPING)
def test_counters_that_may_wrap_stay_while_loops(name: str) -> None:
    assert as_for_loops(parse_string(_counter(**WRAPPING[name]))) == []  # pyright: ignore[reportArgumentType]


def test_a_wrapping_i8_counter_runs_as_written() -> None:
    keywords = WRAPPING["i8, step 100 to 100"]
    want = _want(keywords)
    assert want[8] == 11 and _run_counter(_counter(**keywords), keywords) == want  # pyright: ignore[reportArgumentType]


@st.composite
def _counters(draw: st.DrawFn) -> dict[str, object]:
    """`_counter`'s keywords: a bound near its type's largest value or not, a start up to
    40 steps below it, either order of compare and add."""
    type_ = draw(st.sampled_from(sorted(BITS)))
    top = 2 ** (BITS[type_] - 1) - 1
    bound = draw(st.one_of(st.integers(top - 6, top), st.integers(-20, 100)))
    step = draw(st.integers(1, 5))
    start = max(bound - step * draw(st.integers(-2, 40)), -top - 1)
    keywords: dict[str, object] = {"type_": type_, "start": min(start, top), "step": step,
                                   "swapped_compare": draw(st.booleans()),
                                   "swapped_add": draw(st.booleans())}  # fmt: skip
    if draw(st.booleans()):
        keywords["bound"] = bound
    return keywords


@settings(max_examples=30, deadline=None)
@given(_counters())
def test_counters_become_for_loops_exactly_where_they_cannot_wrap(
    keywords: dict[str, object],
) -> None:
    """The rule (module docstring), and the for loop made runs as the while loop does."""
    text = _counter(**keywords)  # pyright: ignore[reportArgumentType]
    module = parse_string(text)
    made = as_for_loops(module)
    step, bound = int(keywords["step"]), keywords.get("bound")  # pyright: ignore[reportArgumentType]
    top = 2 ** (BITS[str(keywords["type_"])] - 1) - 1
    assert len(made) == (step == 1 or (bound is not None and int(bound) - 1 + step <= top))  # pyright: ignore[reportArgumentType]
    if made:
        module.verify()
        want = _want(keywords)
        assert _run_counter(text, keywords) == want and _run_counter(module, keywords) == want


@needs_llvm
@pytest.mark.parametrize("name", [*TYPED, "i8, step 100 to 100"])
def test_counters_run_natively_as_the_interpreter_runs_them(name: str) -> None:
    """Made a task by CodeDrop (the for loop) or left host code (the wrapping one)."""
    keywords = TYPED.get(name) or WRAPPING[name]
    text = _counter(**keywords)  # pyright: ignore[reportArgumentType]
    want = dhir.run(text, np.zeros(9, np.int64), 13, backend="interp")
    got = dhir.run(text, np.zeros(9, np.int64), 13, ranks=2, timeout=120)
    assert got[0].tolist() == want[0].tolist() == _want(keywords)
