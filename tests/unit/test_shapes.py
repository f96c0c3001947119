"""Tasks of one body shape share their effects, counted work and access regions
(dhir.analysis.shapes): what dhir-place finds per shape equals what it finds per task,
and is found once per shape."""

import dataclasses
from collections.abc import Callable

import islpy as isl
import pytest
from devices import rank_device
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation
from xdsl.traits import SymbolOpInterface

from dhir import parse_string
from dhir.analysis import effects as effects_module
from dhir.analysis import regions as regions_module
from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.effects import task_effects
from dhir.analysis.regions import Regions, task_regions
from dhir.analysis.shapes import shape_ids
from dhir.analysis.work import task_work
from dhir.dialects.dhir import ScheduleOp
from dhir.placement import from_ir
from dhir.placement.cost_model import CostModel
from dhir.targets import DeviceKind

CPU = rank_device(DeviceKind.CPU, "x86_64", memory_bytes=1 << 30)

_MEMREFS = "%a: memref<16xf32>, %b: memref<17xf32>, %c: memref<16xf32>"
_TYPES = {"%a": "memref<16xf32>", "%b": "memref<17xf32>", "%c": "memref<16xf32>"}


def _neighbours(k: int, src: str, dst: str) -> list[str]:
    """dst[k] = src[k] + src[k+1]: literals only in subscripts (and one unused)."""
    return [
        "%unused = arith.constant 2.5 : f32",
        f"%i = arith.constant {k} : index",
        f"%j = arith.constant {k + 1} : index",
        f"%x = memref.load {src}[%i] : {_TYPES[src]}",
        f"%y = memref.load {src}[%j] : {_TYPES[src]}",
        "%s = arith.addf %x, %y : f32",
        f"memref.store %s, {dst}[%i] : {_TYPES[dst]}",
    ]


def _strided(n: int, stride: int, src: str, dst: str) -> list[str]:
    """A loop of `n` trips reading src[i * stride]: the trip count and the multiplier
    change the work and the reuse count."""
    return [
        "%c0 = arith.constant 0 : index",
        "%c1 = arith.constant 1 : index",
        f"%n = arith.constant {n} : index",
        f"%s = arith.constant {stride} : index",
        "scf.for %i = %c0 to %n step %c1 {",
        "  %j = arith.muli %i, %s : index",
        f"  %x = memref.load {src}[%j] : {_TYPES[src]}",
        f"  memref.store %x, {dst}[%i] : {_TYPES[dst]}",
        "}",
    ]


def _stored(k: int, value: float, dst: str) -> list[str]:
    """A literal stored, and one used both as a subscript and as a value."""
    return [
        f"%k = arith.constant {k} : index",
        f"%v = arith.constant {value} : f32",
        f"memref.store %v, {dst}[%k] : {_TYPES[dst]}",
        "%w = arith.index_cast %k : index to i32",
        "%f = arith.sitofp %w : i32 to f32",
        f"memref.store %f, {dst}[%k] : {_TYPES[dst]}",
    ]


def _scaled(k: int, scale: float, src: str, dst: str) -> list[str]:
    """dst[k] = src[k] * scale, then a store where the scale, cast to an index, says: a
    float literal's value moves no region the analyses can see (the cast is unknown)."""
    return [
        f"%i = arith.constant {k} : index",
        f"%s = arith.constant {scale} : f32",
        f"%x = memref.load {src}[%i] : {_TYPES[src]}",
        "%y = arith.mulf %x, %s : f32",
        f"memref.store %y, {dst}[%i] : {_TYPES[dst]}",
        "%w = arith.fptosi %s : f32 to i32",
        "%j = arith.index_cast %w : i32 to index",
        f"memref.store %y, {dst}[%j] : {_TYPES[dst]}",
    ]


def _local(size: int, k: int, src: str) -> list[str]:
    """A buffer of its own: its size is the task's footprint."""
    return [
        f"%t = memref.alloc() : memref<{size}xf32>",
        f"%i = arith.constant {k} : index",
        f"%x = memref.load {src}[%i] : {_TYPES[src]}",
        f"memref.store %x, %t[%i] : memref<{size}xf32>",
        f"memref.dealloc %t : memref<{size}xf32>",
    ]


_MEMREF = st.sampled_from(["%a", "%b", "%c"])
_BODIES = st.one_of(
    st.builds(_neighbours, st.integers(0, 14), _MEMREF, _MEMREF),
    st.builds(_strided, st.integers(1, 5), st.integers(1, 3), _MEMREF, _MEMREF),
    st.builds(_stored, st.integers(0, 15), st.sampled_from([0.5, 2.5]), _MEMREF),
    st.builds(_local, st.sampled_from([16, 32]), st.integers(0, 15), _MEMREF),
    st.builds(_scaled, st.integers(0, 15), st.sampled_from([0.5, 2.5, 7.0]), _MEMREF, _MEMREF),
)
# Which memrefs a task lists, in which order (a listed memref may repeat).
_LISTS = st.sampled_from(["%a, %b, %c", "%c, %b, %a", "%a, %a, %b, %c", "%b, %c, %a"])


def _program(tasks: list[tuple[list[str], str]]) -> str:
    lines = [f"func.func @main({_MEMREFS}) {{", "  dhir.schedule %a, %b, %c {"]
    lines.append('    %cpu = dhir.target {kind = "cpu"}')
    for number, (body, listed) in enumerate(tasks):
        lines.append(f"    %t{number} = dhir.task %cpu, {listed} {{")
        lines += [f"      {line}" for line in body]
        lines.append("    }")
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)


def _schedule(text: str) -> ScheduleOp:
    module = parse_string(text)
    return next(op for op in module.walk() if isinstance(op, ScheduleOp))


def _assert_shared_equal_per_task(schedule: ScheduleOp) -> None:
    deps = dependence_graph(schedule)
    costs = CostModel()
    from_ir.task_graph(schedule, [CPU, CPU], costs, deps=deps, called=False)
    tasks = list(schedule.tasks())
    for task, effects, regions in zip(tasks, deps.effects, deps.regions, strict=True):
        assert effects == task_effects(task)
        _assert_same_regions(regions, task_regions(task))
        shared = dataclasses.replace(costs.work(task), working_set=0)
        assert shared == task_work(task, effects, regions)


def _assert_same_regions(shared: Regions, own: Regions) -> None:
    for table, expected in (
        (shared.reads, own.reads),
        (shared.writes, own.writes),
        (shared.must_writes, own.must_writes),
    ):
        assert table.keys() == expected.keys()
        for memref, region in table.items():
            assert region.is_equal(expected[memref]), (region, expected[memref])
    for memref in {*own.reads, *own.writes}:
        for written in (False, True):
            assert shared.boxes(memref, written) == own.boxes(memref, written)


_SEVERAL_SHAPES = [
    (_neighbours(0, "%b", "%a"), "%a, %b, %c"),
    (_neighbours(5, "%b", "%a"), "%a, %b, %c"),
    (_neighbours(5, "%b", "%a"), "%b, %a, %c"),
    (_neighbours(7, "%a", "%a"), "%a, %a, %b, %c"),
    (_strided(4, 1, "%b", "%c"), "%a, %b, %c"),
    (_strided(4, 3, "%b", "%c"), "%a, %b, %c"),
    (_strided(2, 3, "%b", "%c"), "%a, %b, %c"),
    (_stored(1, 0.5, "%c"), "%a, %b, %c"),
    (_stored(9, 2.5, "%c"), "%a, %b, %c"),
    (_local(16, 3, "%b"), "%a, %b, %c"),
    (_local(32, 3, "%b"), "%a, %b, %c"),
    (_scaled(2, 0.5, "%b", "%c"), "%a, %b, %c"),
    (_scaled(4, 7.0, "%b", "%c"), "%a, %b, %c"),
]


def test_shared_analyses_equal_per_task_ones() -> None:
    _assert_shared_equal_per_task(_schedule(_program(_SEVERAL_SHAPES)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.tuples(_BODIES, _LISTS), min_size=1, max_size=8))
def test_shared_analyses_equal_per_task_ones_random(tasks: list[tuple[list[str], str]]) -> None:
    _assert_shared_equal_per_task(_schedule(_program(tasks)))


def test_shapes_tell_apart_what_the_analyses_see() -> None:
    ids = shape_ids(list(_schedule(_program(_SEVERAL_SHAPES)).tasks()))
    # Subscript literals alone differ: one shape; listed in another order, another.
    assert ids[0] == ids[1] != ids[2]
    assert ids[3] != ids[0]  # the same memref twice
    assert len({ids[4], ids[5], ids[6]}) == 3  # a multiplier, a trip count
    assert ids[7] != ids[8]  # a stored literal
    assert ids[9] != ids[10]  # the type of a local buffer
    assert ids[11] == ids[12]  # float literals (and subscript literals) alone differ


def test_each_shape_is_analysed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = _schedule(_program(_SEVERAL_SHAPES * 3))
    expected = len(set(shape_ids(list(schedule.tasks()))))
    calls = {"effects": 0, "work": 0}

    def counted(name: str, function: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(effects_module, "task_effects", counted("effects", task_effects))
    monkeypatch.setattr(from_ir, "body_work", counted("work", from_ir.body_work))
    from_ir.task_graph(schedule, [CPU, CPU], CostModel(), called=False)
    assert expected == 11
    assert calls == {"effects": expected, "work": expected}


def test_equal_regions_of_a_shape_are_fixed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task that writes what it must write had its writes and its must-writes fixed
    to its constants apart, though the shape's regions are one set: a third of the
    fixing (docs/performance.md). Equal template regions are fixed once per task."""
    schedule = _schedule(_program([(_neighbours(k, "%b", "%a"), "%a, %b, %c") for k in range(6)]))
    fixed = regions_module._fixed  # pyright: ignore[reportPrivateUsage]
    calls: list[object] = []

    def counted(*args: object) -> object:
        calls.append(args)
        return fixed(*args)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(regions_module, "_fixed", counted)
    deps = dependence_graph(schedule)
    assert len(calls) == 2 * 6  # what each task reads of %b, and writes of %a
    for task, regions in zip(schedule.tasks(), deps.regions, strict=True):
        _assert_same_regions(regions, task_regions(task))


def test_constants_are_found_in_a_region_once_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixing a task's regions looked each constant's parameter up by name in each of
    them, for every task (5% of dhir-place at 10,000 tasks); the positions are found once
    per template region, and the regions stay those each task has of its own."""
    schedule = _schedule(_program([(_neighbours(k, "%b", "%a"), "%a, %b, %c") for k in range(6)]))
    fixing = regions_module._fixing  # pyright: ignore[reportPrivateUsage]
    calls: list[object] = []

    def counted(*args: object) -> object:
        calls.append(args)
        return fixing(*args)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(regions_module, "_fixing", counted)
    deps = dependence_graph(schedule)
    assert len(calls) == 2  # the shape's two regions: what it reads of %b, writes of %a
    for task, regions in zip(schedule.tasks(), deps.regions, strict=True):
        _assert_same_regions(regions, task_regions(task))


def test_untouched_memrefs_have_no_boxes_to_find(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dependence graph asks for the boxes of what each task reads and writes of
    each memref it touches; one it only reads has no writes for isl to look at."""
    schedule = _schedule(_program([(_neighbours(k, "%b", "%a"), "%a, %b, %c") for k in range(6)]))
    boxes = regions_module.piece_boxes
    asked: list[object] = []

    def counted(region: object) -> object:
        asked.append(region)
        return boxes(region)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(regions_module, "piece_boxes", counted)
    deps = dependence_graph(schedule)
    assert len(asked) == 2 * 6  # what each reads of %b, and writes of %a
    memrefs = list(schedule.tasks())[0].memrefs
    assert deps.regions[0].boxes(memrefs[0], False) == ()  # reads nothing of %a
    assert deps.regions[0].boxes(memrefs[1], True) == ()  # writes nothing of %b


def test_tasks_alike_in_constants_and_memrefs_share_their_regions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tasks of one shape with equal constants on the same memrefs have equal regions:
    found and boxed once for all of them (generated schedules repeat such bodies), while
    others of the shape keep theirs."""
    bodies = [(_neighbours(k, "%b", "%a"), "%a, %b, %c") for k in (3, 3, 4, 3, 4, 3)]
    bodies.append((_neighbours(3, "%c", "%a"), "%a, %c, %b"))  # other memrefs: its own
    schedule = _schedule(_program(bodies))
    boxes = regions_module.piece_boxes
    asked: list[object] = []

    def counted(region: object) -> object:
        asked.append(region)
        return boxes(region)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(regions_module, "piece_boxes", counted)
    deps = dependence_graph(schedule)
    found = deps.regions
    assert found[0] is found[1] is found[3] is found[5]
    assert found[2] is found[4] and found[2] is not found[0]
    assert found[6] is not found[0]
    assert len(asked) == 2 * 3  # what each of 3 reads of %b (or %c), and writes of %a
    for task, regions in zip(schedule.tasks(), found, strict=True):
        _assert_same_regions(regions, task_regions(task))


@pytest.mark.parametrize(
    ("text", "read_off"),
    [
        ("{ [x0] : x0 = 5 }", True),
        ("{ [x0, x1] : x0 = 5 and x1 = -3 }", True),
        ("{ [x0, x1] : x1 = 2x0 and x0 = 3 }", True),
        ("{ [x0, x1] : x0 = x1 and 0 <= x0 < 1 }", True),  # fixed once simplified
        ("{ [x0] : x0 = 92233720368547758070 }", True),  # past 64 bits
        ("{ [x0, x1] : x0 = 5 and 0 <= x1 < 3 }", False),  # one dimension only
        ("{ [x0] : 0 < x0 <= 2 }", False),
        ("{ [x0, x1] : exists (e : x0 = 2e and 3 <= x0 <= 4) and x1 = 0 }", False),
    ],
)
def test_boxes_of_single_elements_are_read_off_their_constraints(
    monkeypatch: pytest.MonkeyPatch, text: str, read_off: bool
) -> None:
    """The box of a region of one element (a scalar access: every dimension fixed by the
    constraints) is read off them, where isl solved two linear programs per dimension
    (the dependence graph asks for each task's); any other region is bounded by isl, and
    both give the same box."""
    region = isl.Set(text).coalesce()
    expected = regions_module._bounding(region)  # pyright: ignore[reportPrivateUsage]
    solved: list[object] = []
    bounding = regions_module._bounding  # pyright: ignore[reportPrivateUsage]

    def counted(piece: isl.Set) -> object:
        solved.append(piece)
        return bounding(piece)

    monkeypatch.setattr(regions_module, "_bounding", counted)
    assert regions_module.piece_boxes(region) == (expected,)
    assert solved == ([] if read_off else [region])


def test_callees_are_found_in_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task's call looked its callee up with xDSL's lookup_symbol, which reads the
    name of every op of the module: tasks x functions reads (1000 tasks calling 300
    functions: 3.8 s of a compile). The names are read once for all the tasks."""
    leaves = [
        f"""func.func @f{k}(%m: memref<4xf64>) {{
  %c0 = arith.constant 0 : index
  %v = memref.load %m[%c0] : memref<4xf64>
  memref.store %v, %m[%c0] : memref<4xf64>
  return
}}"""
        for k in range(50)
    ]
    tasks = [
        f"""    %t{k} = dhir.task %cpu, %m {{
      func.call @f{k % 50}(%m) : (memref<4xf64>) -> ()
    }}"""
        for k in range(100)
    ]
    main = [
        "func.func @main(%m: memref<4xf64>) {",
        "  dhir.schedule %m {",
        '    %cpu = dhir.target {kind = "cpu"}',
        *tasks,
        "  }",
        "  return",
        "}",
    ]
    module = parse_string("\n".join([*leaves, *main]), "prog.mlir")
    read: list[Operation] = []
    name = SymbolOpInterface.get_sym_attr_name

    def reading(self: SymbolOpInterface, op: Operation) -> StringAttr | None:
        read.append(op)
        return name(self, op)

    monkeypatch.setattr(SymbolOpInterface, "get_sym_attr_name", reading)
    schedule = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    ids = shape_ids(list(schedule.tasks()))
    assert ids == [k % 50 for k in range(100)]
    assert len(read) <= 2 * len(module.body.block.ops)


def _index_stores(tasks: list[tuple[str, str]]) -> str:
    """A task per (stored, subscript) pair of lines, on a memref of indices: the stored
    value and the subscript are constants of one type."""
    lines = ["func.func @main(%a: memref<8xindex>) {", "  dhir.schedule %a {"]
    lines.append('    %cpu = dhir.target {kind = "cpu"}')
    for number, (stored, subscript) in enumerate(tasks):
        lines.append(f"    %t{number} = dhir.task %cpu, %a {{")
        lines += [f"      {stored}", f"      {subscript}"]
        lines += ["      memref.store %v, %a[%i] : memref<8xindex>", "    }"]
    lines += ["  }", "  return", "}", ""]
    return "\n".join(lines)


def test_a_stored_literal_is_no_subscript() -> None:
    """A constant a memref.store stores is part of the key (only its subscripts' are left
    out), also where the memref holds indices, as subscripts are."""
    text = _index_stores(
        [
            ("%v = arith.constant 5 : index", "%i = arith.constant 1 : index"),
            ("%v = arith.constant 6 : index", "%i = arith.constant 2 : index"),
            ("%v = arith.constant 5 : index", "%i = arith.constant 3 : index"),
        ]
    )
    ids = shape_ids(list(_schedule(text).tasks()))
    assert ids[0] != ids[1]
    assert ids[0] == ids[2]
