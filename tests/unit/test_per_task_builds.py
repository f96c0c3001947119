"""What a build makes for every task of a large schedule, counted, not timed
(docs/performance.md): cloned task bodies and dhir-track-tasks' calls build no op
through xDSL's `Operation.__init__` (dhir.ir.build.new_op makes the same op, without
its generic steps), and dhir-place builds one rank attribute per rank."""

import sys
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    AnyFloat,
    BFloat16Type,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    SymbolRefAttr,
    f16,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region

from dhir import parse_string
from dhir.api import print_module
from dhir.context import make_context
from dhir.dialects import arith, func, scf
from dhir.dialects import dhir as dhir_dialect
from dhir.dialects.dhir import TargetType, TaskOp, TokenType, YieldOp
from dhir.ir.build import float_attr, insert_new, integer_attr, move_ops, new_op
from dhir.ir.parser import LocatedParser
from dhir.transforms.lower_to_mpi import LowerToMPIPass
from dhir.transforms.place import RANK_ATTR, PlacePass
from dhir.transforms.track_tasks import TrackTasksPass

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import programs  # noqa: E402  # pyright: ignore[reportMissingImports]


def _inits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the ops built through xDSL's `Operation.__init__` (which `create` calls)."""
    built: list[str] = []
    original = Operation.__init__

    def counted(self: Operation, *args: object, **kw: object) -> None:
        built.append(self.name)
        original(self, *args, **kw)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(Operation, "__init__", counted)
    return built


def _fields(op: Operation) -> dict[str, object]:
    """What an op holds, comparable between two ops (values by their types, uses by
    their index, regions by their blocks' ops)."""
    return {
        "class": type(op),
        "own fields": sorted(vars(op)),
        "operands": [value.type for value in op.operands],
        "uses": [[(use.operation is op, use.index) for use in value.uses] for value in op.operands],
        "results": [(r.type, r.op is op, r.index, r.name_hint) for r in op.results],
        "properties": op.properties,
        "attributes": op.attributes,
        "location": op.location,
        "successors": tuple(op.successors),
        "regions": [(r.parent is op, [list(b.ops) for b in r.blocks]) for r in op.regions],
        "parent": (op.parent, op.next_op, op.prev_op),
        "text": str(op),
    }


def test_new_op_holds_what_create_makes() -> None:
    def built(maker: str) -> list[Operation]:
        value = arith.ConstantOp(IntegerAttr(3, i64)).result
        bound = arith.ConstantOp(IntegerAttr(4, i64)).result
        constant = {"value": IntegerAttr(7, i64)}
        call = {"callee": SymbolRefAttr("f")}
        loop = Region(Block(arg_types=[i64]))
        if maker == "create":
            return [
                arith.ConstantOp.create(result_types=[i64], properties=constant),
                func.CallOp.create(operands=[value, value], properties=call),
                scf.ForOp.create(operands=[value, bound, value], regions=[loop]),
            ]
        return [
            new_op(arith.ConstantOp, (), [i64], constant, {}, UNKNOWN_LOC),
            new_op(func.CallOp, [value, value], (), call, {}, UNKNOWN_LOC),
            new_op(scf.ForOp, [value, bound, value], (), {}, {}, UNKNOWN_LOC, [loop]),
        ]

    created, new = built("create"), built("new_op")
    assert [_fields(op) for op in created] == [_fields(op) for op in new]


def test_a_task_holds_what_create_makes() -> None:
    """dhir.task's constructor, which sets what xDSL's `Operation.__init__` would."""

    def built(maker: str) -> list[Operation]:
        target, memref = Block(arg_types=[TargetType(), MemRefType(f32, [4])]).args
        if maker == "init":
            return [TaskOp(target, [memref], Region(Block())), TaskOp("cpu", [memref], Region())]
        return [
            TaskOp.create(
                operands=[target, memref],
                result_types=[TokenType()],
                properties={"operandSegmentSizes": DenseArrayBase.from_list(i32, [1, 1])},
                regions=[Region(Block([YieldOp()]))],
            ),
            TaskOp.create(
                operands=[memref],
                result_types=[TokenType()],
                properties={
                    "operandSegmentSizes": DenseArrayBase.from_list(i32, [0, 1]),
                    "target": StringAttr("cpu"),
                },
                regions=[Region(Block([YieldOp()]))],
            ),
        ]

    def fields(op: Operation) -> dict[str, object]:
        # Each body holds a dhir.yield of its own.
        return {**_fields(op), "regions": [[o.name for o in r.walk()] for r in op.regions]}

    assert [fields(op) for op in built("create")] == [fields(op) for op in built("init")]


def test_cloned_bodies_build_no_op_through_xdsl_init(monkeypatch: pytest.MonkeyPatch) -> None:
    text = programs.neighbour_tasks(30)
    parser = LocatedParser(make_context(), text, "t.mlir")
    built = _inits(monkeypatch)
    parser.parse_module()
    assert len(parser.task_bodies.cloned) == 29
    # Not even the tasks (dhir.task's constructor sets what `new_op` does); the body
    # ops of the first task only (then cloned).
    assert built.count("dhir.task") == 0
    assert len([name for name in built if name not in ("dhir.task", "func.func")]) < 30


def test_track_tasks_builds_no_op_through_xdsl_init(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_string(programs.neighbour_tasks(30))
    assert isinstance(module, ModuleOp)
    built = _inits(monkeypatch)
    TrackTasksPass().apply(Context(), module)
    # The two declarations only; 3 ops per task with `create`.
    assert built == ["func.func", "func.func"]
    text = print_module(module)
    assert text.count("call @dhir_rt_task_enter") == 30


def _integer_attrs_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the IntegerAttrs built through their constructor."""
    built: list[int] = []
    original = IntegerAttr.__init__

    def counted(self: IntegerAttr, value: object, *args: object, **kw: object) -> None:
        built.append(1)
        original(self, value, *args, **kw)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(IntegerAttr, "__init__", counted)
    return built


def test_track_tasks_builds_no_integer_attribute_through_its_constructor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = parse_string(programs.neighbour_tasks(30))
    assert isinstance(module, ModuleOp)
    built = _integer_attrs_built(monkeypatch)
    TrackTasksPass().apply(Context(), module)
    assert built == []
    text = print_module(module)
    assert "arith.constant 29 : i64" in text and text.count(": i64") >= 30


@pytest.mark.parametrize(
    "type_",
    [
        i64,
        i32,
        i1,
        IntegerType(8, Signedness.SIGNED),
        IntegerType(8, Signedness.UNSIGNED),
        IndexType(),
    ],
)
@pytest.mark.parametrize(
    "value", [0, 1, 127, 128, 255, 256, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -1, 2**70]
)
def test_integer_attr_is_the_constructors(type_: IntegerType | IndexType, value: int) -> None:
    """Equal to the constructor's attribute, or refused as it refuses: values it would
    normalize (2**31 in i32 is -2**31) or refuse go through it."""
    try:
        expected: object = IntegerAttr(value, type_)
    except Exception as error:  # noqa: BLE001  # the constructor's refusal, whatever its kind
        expected = type(error)
    try:
        got: object = integer_attr(value, type_)
    except Exception as error:  # noqa: BLE001
        got = type(error)
    assert got == expected
    if isinstance(expected, IntegerAttr):
        assert isinstance(got, IntegerAttr)
        assert (str(got), hash(got), got.value.data) == (
            str(expected),
            hash(expected),
            expected.value.data,
        )


@pytest.mark.parametrize("algorithm", ["round-robin", "best"])
def test_place_builds_one_rank_attribute_per_rank(
    monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    module = parse_string(programs.neighbour_tasks(30))
    assert isinstance(module, ModuleOp)
    built: list[int] = []
    original = IntegerAttr.__init__

    def counted(self: IntegerAttr, value: object, *args: object) -> None:
        built.append(1)
        original(self, value, *args)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(IntegerAttr, "__init__", counted)
    PlacePass(2, algorithm).apply(Context(), module)
    ranks = [task.attributes[RANK_ATTR] for task in module.walk() if task.name == "dhir.task"]
    assert len(ranks) == 30 and {str(rank) for rank in ranks} <= {"0 : i64", "1 : i64"}
    assert len(built) <= 2


def test_tasks_join_their_guards_out_of_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """dhir-lower-to-mpi puts a task's ops (and its messages) in the `scf.if` of its
    rank that was emitted last, when there is one: xDSL walks up from the block an op
    is inserted into to the module, so that guard is out of its block meanwhile."""
    module = parse_string(programs.neighbour_tasks(40))
    PlacePass(2, "best").apply(Context(), module)
    joined: list[str] = []
    original = Block._attach_op  # pyright: ignore[reportPrivateUsage]

    def counted(block: Block, op: Operation) -> None:
        guard = block.parent_op()
        if isinstance(guard, scf.IfOp) and guard.parent is not None:
            joined.append(op.name)
        original(block, op)

    monkeypatch.setattr(Block, "_attach_op", counted)
    before = print_module(module)
    LowerToMPIPass(2).apply(Context(), module)
    assert print_module(module) != before
    guards = [op for op in module.walk() if isinstance(op, scf.IfOp)]
    assert len(guards) < 40  # tasks did join guards (40 tasks, each of 6 body ops)
    assert joined == []


@pytest.mark.parametrize("ranks", [1, 2])
def test_task_bodies_move_into_place_at_once(monkeypatch: pytest.MonkeyPatch, ranks: int) -> None:
    """dhir-lower-to-mpi moves each task's body under its guard, and each run of steps
    into its part function, as one run of linked ops (dhir.ir.build.move_run): xDSL's
    inserts walk up from the block to the module for each op."""
    module = parse_string(programs.neighbour_tasks(40))
    PlacePass(ranks, "best").apply(Context(), module)
    attached = _attached(monkeypatch)
    LowerToMPIPass(ranks).apply(Context(), module)
    text = print_module(module)
    assert text.count("arith.addf") == 40 and text.count("memref.store") == 40
    assert [name for name in attached if name in ("memref.load", "arith.addf")] == []


def test_track_tasks_links_its_calls_in_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_string(programs.neighbour_tasks(30))
    assert isinstance(module, ModuleOp)
    attached = _attached(monkeypatch)
    TrackTasksPass().apply(Context(), module)
    assert attached == ["func.func", "func.func"]  # the two declarations only
    text = print_module(module)
    assert text.count("call @dhir_rt_task_enter") == 30


def _attached(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the ops xDSL's inserts attach to a block, one by one."""
    attached: list[str] = []
    original = Block._attach_op  # pyright: ignore[reportPrivateUsage]

    def counted(block: Block, op: Operation) -> None:
        attached.append(op.name)
        original(block, op)

    monkeypatch.setattr(Block, "_attach_op", counted)
    return attached


def _linked(block: Block) -> list[Operation]:
    """The block's ops, read forward, once checked against reading it backward and
    against their parents."""
    forward = list(block.ops)
    backward: list[Operation] = []
    op = block.last_op
    while op is not None:
        backward.append(op)
        op = op.prev_op
    assert backward[::-1] == forward
    assert all(op.parent is block for op in forward)
    return forward


def _constants(count: int) -> list[Operation]:
    return [arith.ConstantOp(IntegerAttr(k, i64)) for k in range(count)]


@pytest.mark.parametrize("where", [0, 1, 3])
def test_moved_runs_leave_both_blocks_linked(where: int) -> None:
    moved, kept = _constants(5), _constants(3)
    source, dest = Block(moved), Block(kept)
    move_ops([moved[0], moved[1], moved[3]], dest, kept[where] if where < 3 else None)
    assert _linked(source) == [moved[2], moved[4]]
    assert _linked(dest) == [*kept[:where], moved[0], moved[1], moved[3], *kept[where:]]
    move_ops([moved[2], moved[4]], dest, None)  # the whole block
    assert _linked(source) == []
    assert _linked(dest)[-2:] == [moved[2], moved[4]]


@pytest.mark.parametrize("where", [0, 1, 2])
def test_new_ops_inserted_leave_the_block_linked(where: int) -> None:
    made, kept = _constants(2), _constants(2)
    block = Block(kept)
    insert_new(made, block, kept[where] if where < 2 else None)
    assert _linked(block) == [*kept[:where], *made, *kept[where:]]
    empty = Block()
    insert_new(_constants(2), empty, None)
    assert len(_linked(empty)) == 2


def test_plain_task_headers_are_read_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`%cpu, %a, %b` is read from the text in one match, not operand by operand."""
    read: list[object] = []
    original = dhir_dialect._parse_defined_operand  # pyright: ignore[reportPrivateUsage]

    def counted(parser: object) -> object:
        read.append(parser)
        return original(parser)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(dhir_dialect, "_parse_defined_operand", counted)
    parse_string(programs.neighbour_tasks(30))
    assert read == []


SCHEDULE = """func.func @main(%a: memref<4xf32>, %b: memref<4xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task HEADER {
      %i = arith.constant 0 : index
      %x = memref.load %b[%i] : memref<4xf32>
      memref.store %x, %a[%i] : memref<4xf32>
    }
  }
  return
}"""


@pytest.mark.parametrize(
    "header",
    ["%cpu,%a,%b", "%cpu ,\n %a , %b", "%cpu, // the inputs\n %a, %b", "%cpu#0, %a, %b"],
)
def test_task_headers_written_otherwise_read_alike(header: str) -> None:
    plain = parse_string(SCHEDULE.replace("HEADER", "%cpu, %a, %b"))
    assert print_module(parse_string(SCHEDULE.replace("HEADER", header))) == print_module(plain)


@pytest.mark.parametrize("value", [0.1, -2.5e3, 1e39, -0.0, 7.0, 1e-50, float("inf")])
@pytest.mark.parametrize("kind", [f32, f64, f16, BFloat16Type()])
def test_float_attr_is_the_constructors(value: float, kind: AnyFloat) -> None:
    """Rounded as the constructor rounds (0.1 as an f32), refused alike (1e39)."""
    try:
        made: object = FloatAttr(value, kind)
    except OverflowError:
        with pytest.raises(OverflowError):
            float_attr(value, kind)
        return
    fast = float_attr(value, kind)
    assert fast == made and str(fast) == str(made) and hash(fast) == hash(made)
