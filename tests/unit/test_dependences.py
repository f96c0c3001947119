"""Effects, regions and dependences against the reads and writes the random programs
were written with: every conflicting pair of tasks (same memref, overlapping ranges) is
ordered, and nothing else is."""

import islpy as isl
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import RandomSchedule, schedules

from dhir import parse_string
from dhir.analysis.dependences import _Accesses, _Region, task_graph
from dhir.dialects.dhir import ScheduleOp


def _schedule(text: str) -> ScheduleOp:
    module = parse_string(text)
    return next(op for op in module.walk() if isinstance(op, ScheduleOp))


def _reachable(edges: set[tuple[int, int]], start: int, goal: int) -> bool:
    stack, seen = [start], {start}
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        for a, b in edges:
            if a == node and b not in seen:
                seen.add(b)
                stack.append(b)
    return False


@settings(max_examples=80, deadline=None)
@given(schedules(max_tasks=10))
def test_graph_orders_exactly_the_conflicting_pairs(program: RandomSchedule) -> None:
    schedule = _schedule(program.text())
    graph = task_graph(schedule)
    names = {value: int(value.name_hint[1:]) for value in schedule.args}  # %m3 -> 3
    for task, effects, regions in zip(program.tasks, graph.effects, graph.regions, strict=True):
        assert {names[v] for v in effects.reads} == set(task.reads)
        assert {names[v] for v in effects.writes} == set(task.writes)
        span = isl.Set(f"{{ [x0] : {task.lo} <= x0 < {task.hi} }}")
        for value in effects.reads:
            assert regions.read(value).is_equal(span)
        for value in effects.writes:
            assert regions.written(value).is_equal(span)
            assert regions.must_written(value).is_equal(span)

    edges = {(d.before, d.after) for d in graph.dependences}
    tasks = program.tasks
    for i in range(len(tasks)):
        for j in range(i + 1, len(tasks)):
            overlap = max(tasks[i].lo, tasks[j].lo) < min(tasks[i].hi, tasks[j].hi)
            conflict = overlap and (
                (set(tasks[i].writes) & (set(tasks[j].reads) | set(tasks[j].writes)))
                or (set(tasks[i].reads) & set(tasks[j].writes))
            )
            if conflict:
                assert _reachable(edges, i, j), (i, j)
            if (i, j) in edges:
                assert conflict, (i, j)
    assert all(a < b for a, b in edges)


EFFECTS = """
func.func private @touch(memref<8xf32>) -> memref<8xf32>
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>, %d: memref<8xf32>,
                %e: memref<4x2xf32>) {
  dhir.schedule %a, %b, %c, %d, %e {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %b, %c {
      %v = memref.subview %a[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
      %w = memref.cast %v : memref<4xf32, strided<[1], offset: 2>> to memref<4xf32, strided<[1], offset: ?>>
      %lb = arith.constant 0 : index
      %ub = arith.constant 4 : index
      %one = arith.constant 1 : index
      scf.for %i = %lb to %ub step %one {
        %x = memref.load %w[%i] : memref<4xf32, strided<[1], offset: ?>>
        memref.store %x, %b[%i] : memref<8xf32>
      }
      %n = memref.dim %c, %lb : memref<8xf32>
    }
    %t1 = dhir.task %cpu, %a, %b, %c {
      linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%c : memref<8xf32>)
    }
    %t2 = dhir.task %cpu, %a, %d {
      %r = func.call @touch(%a) : (memref<8xf32>) -> memref<8xf32>
      %s = memref.cast %r : memref<8xf32> to memref<?xf32>
      %zero = arith.constant 0 : index
      %x = memref.load %d[%zero] : memref<8xf32>
      memref.store %x, %s[%zero] : memref<?xf32>
    }
    %t3 = dhir.task %cpu, %c, %e {
      %flat = memref.collapse_shape %e [[0, 1]] : memref<4x2xf32> into memref<8xf32>
      memref.copy %flat, %c : memref<8xf32> to memref<8xf32>
    }
  }
  return
}
"""


def test_effects_follow_views_linalg_calls_and_nested_loops() -> None:
    schedule = _schedule(EFFECTS)
    names = {value: value.name_hint for value in schedule.args}
    found = [
        ({names[v] for v in e.reads}, {names[v] for v in e.writes})
        for e in task_graph(schedule).effects
    ]
    assert found == [
        ({"a"}, {"b"}),  # through a subview and a cast, in a loop; memref.dim reads no data
        ({"a", "b", "c"}, {"c"}),  # linalg's outputs are read too
        ({"a", "d"}, {"a"}),  # the call reads and writes %a; what it returns aliases %a
        ({"e"}, {"c"}),
    ]


VECTOR_EFFECTS = """
func.func @main(%a: memref<4x4xf32>, %b: memref<8xf32>, %c: memref<4x4xf32>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %c {
      %zero = arith.constant 0 : index
      %pad = arith.constant 0.0 : f32
      %v = vector.transfer_read %a[%zero, %zero], %pad : memref<4x4xf32>, vector<4x4xf32>
      %t = vector.transpose %v, [1, 0] : vector<4x4xf32> to vector<4x4xf32>
      %f = vector.shape_cast %t : vector<4x4xf32> to vector<16xf32>
      %g = vector.shape_cast %f : vector<16xf32> to vector<4x4xf32>
      %m = vector.constant_mask [2, 4] : vector<4x4xi1>
      %s = arith.select %m, %g, %v : vector<4x4xi1>, vector<4x4xf32>
      vector.transfer_write %s, %c[%zero, %zero] : vector<4x4xf32>, memref<4x4xf32>
    }
    %t1 = dhir.task %cpu, %b {
      %zero = arith.constant 0 : index
      %mask = vector.constant_mask [2] : vector<4xi1>
      %pass = arith.constant dense<0.0> : vector<4xf32>
      %x = vector.maskedload %b[%zero], %mask, %pass : memref<8xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
    }
  }
  return
}
"""


def test_vector_ops_on_values_touch_no_memory_and_unknown_ones_touch_all() -> None:
    schedule = _schedule(VECTOR_EFFECTS)
    names = {value: value.name_hint for value in schedule.args}
    found = [
        ({names[v] for v in e.reads}, {names[v] for v in e.writes})
        for e in task_graph(schedule).effects
    ]
    # vector.maskedload has no entry in dhir's table: it counts as reading and writing.
    assert found == [({"a"}, {"c"}), ({"b"}, {"b"})]


NAMED_LINALG_EFFECTS = """
func.func @main(%a: memref<2x3x4xf32>, %b: memref<2x4x5xf32>, %c: memref<2x3x5xf32>,
                %x: memref<4xf32>, %s: memref<f32>, %q: memref<4xf32>) {
  dhir.schedule %a, %b, %c, %x, %s, %q {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a, %b, %c {
      linalg.batch_matmul ins(%a, %b : memref<2x3x4xf32>, memref<2x4x5xf32>) outs(%c : memref<2x3x5xf32>)
    }
    %t1 = dhir.task %cpu, %x, %s, %q {
      linalg.dot ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%s : memref<f32>)
      linalg.div ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%q : memref<4xf32>)
    }
  }
  return
}
"""


def test_named_contractions_read_inputs_and_accumulate_into_outputs() -> None:
    schedule = _schedule(NAMED_LINALG_EFFECTS)
    names = {value: value.name_hint for value in schedule.args}
    found = [
        ({names[v] for v in e.reads}, {names[v] for v in e.writes})
        for e in task_graph(schedule).effects
    ]
    assert found == [({"a", "b", "c"}, {"c"}), ({"x", "s", "q"}, {"s", "q"})]


class _PairwiseAccesses:
    """`_Accesses` as it was, every stored region checked against every query: the
    reference for the indexed one."""

    def __init__(self) -> None:
        self.entries_: dict[object, tuple[_Region, list[int]]] = {}

    def add(self, region: _Region, task: int) -> None:
        if not region.empty:
            self.entries_.setdefault(region.key(), (region, []))[1].append(task)

    def overlapping(self, region: _Region) -> list[tuple[isl.Set, list[int]]]:
        return [(r.set, js) for r, js in self.entries_.values() if r.overlaps(region)]

    def trim(self, written: _Region) -> None:
        kept: dict[object, tuple[_Region, list[int]]] = {}
        for key, (region, tasks) in self.entries_.items():
            if region.may_overlap(written):
                region = _Region.of_set((region.set - written.set).coalesce())
                if region.empty:
                    continue
                key = region.key()
            kept.setdefault(key, (region, []))[1].extend(tasks)
        self.entries_ = kept

    def entries(self) -> list[tuple[isl.Set, list[int]]]:
        return [(r.set, js) for r, js in self.entries_.values()]


def _box(lo: tuple[int, int], size: tuple[int, int]) -> str:
    return " and ".join(f"{a} <= x{d} < {a + n}" for d, (a, n) in enumerate(zip(lo, size)))


@st.composite
def _regions(draw: st.DrawFn) -> _Region:
    """2-d regions: mostly boxes of all sizes (empty ones too), some unions of two boxes,
    some unbounded."""
    # Small coordinates, so that trims often leave regions equal to others (merged).
    corner = st.tuples(st.integers(-2, 10), st.integers(0, 2))
    size = st.tuples(st.integers(0, 4), st.integers(0, 2)) | st.tuples(
        st.integers(0, 40), st.integers(0, 4)
    )
    kind = draw(st.sampled_from(["box"] * 6 + ["union", "unbounded"]))
    text = _box(draw(corner), draw(size))
    if kind == "union":
        text = f"{text}; [x0, x1] : {_box(draw(corner), draw(size))}"
    elif kind == "unbounded":
        text = f"x0 >= {draw(st.integers(-2, 10))} and 0 <= x1 < 3"
    return _Region.of_set(isl.Set(f"{{ [x0, x1] : {text} }}").coalesce())


def _shown(found: list[tuple[isl.Set, list[int]]]) -> list[tuple[str, list[int]]]:
    return [(str(region), list(tasks)) for region, tasks in found]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["add", "find", "trim"]), _regions()), max_size=40))
def test_indexed_accesses_answer_as_checking_every_pair(
    steps: list[tuple[str, _Region]],
) -> None:
    """The box index finds the same regions, with the same tasks in the same order, as
    checking every stored region; trims leave the same entries in the same order."""
    indexed, pairwise = _Accesses(), _PairwiseAccesses()
    for task, (step, region) in enumerate(steps):
        if step == "add":
            indexed.add(region, task)
            pairwise.add(region, task)
        elif step == "find":
            assert _shown(indexed.overlapping(region)) == _shown(pairwise.overlapping(region))
        elif not region.empty:  # task_graph trims by non-empty writes only
            indexed.trim(region)
            pairwise.trim(region)
        assert _shown(indexed.entries()) == _shown(pairwise.entries())


@st.composite
def _scalar_program(draw: st.DrawFn) -> str:
    """Tasks of scalar accesses (one element each, as generated schedules' are), some
    stores under a condition (may-writes), on two small memrefs."""
    tasks: list[str] = []
    for t in range(draw(st.integers(1, 8))):
        ops = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["load", "store", "maybe"]),
                    st.integers(0, 1),
                    st.integers(0, 1),
                ),
                min_size=1,
                max_size=4,
            )
        )
        lines = ["%z = arith.constant 0.0 : f32"]
        for n, (kind, m, i) in enumerate(ops):
            lines.append(f"%i{n} = arith.constant {i} : index")
            if kind == "load":
                lines.append(f"%v{n} = memref.load %m{m}[%i{n}] : memref<3xf32>")
            elif kind == "store":
                lines.append(f"memref.store %z, %m{m}[%i{n}] : memref<3xf32>")
            else:
                lines += [
                    f"%c{n} = arith.cmpf ogt, %z, %z : f32",
                    f"scf.if %c{n} {{",
                    f"  memref.store %z, %m{m}[%i{n}] : memref<3xf32>",
                    "}",
                ]
        body = "\n      ".join(lines)
        tasks.append(f"    %t{t} = dhir.task %cpu, %m0, %m1 {{\n      {body}\n    }}")
    return (
        "func.func @main(%m0: memref<3xf32>, %m1: memref<3xf32>) {\n"
        '  dhir.schedule %m0, %m1 {\n    %cpu = dhir.target {kind = "cpu"}\n'
        + "\n".join(tasks)
        + "\n  }\n  return\n}\n"
    )


def _dependences(text: str) -> list[tuple[int, int, str, int | None]]:
    schedule = _schedule(text)
    names = {value: value.name_hint for value in schedule.args}
    graph = task_graph(schedule)
    return [(d.before, d.after, str(names[d.memref]), d.elements) for d in graph.dependences]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_scalar_program())
def test_single_elements_answer_as_isl_does(text: str) -> None:
    """The graph of scalar accesses, where single elements skip isl, is the one isl
    finds when every region is treated as a general set."""
    fast = _dependences(text)
    boxed = _Region.boxed

    def general(
        region: isl.Set, boxes: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None
    ) -> _Region:
        found = boxed(region, boxes)
        return _Region(found.set, found.box, found.empty)  # never a point

    try:
        _Region.boxed = staticmethod(general)  # pyright: ignore[reportAttributeAccessIssue]
        slow = _dependences(text)
    finally:
        _Region.boxed = staticmethod(boxed)  # pyright: ignore[reportAttributeAccessIssue]
    assert fast == slow
