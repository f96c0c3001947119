"""dhir.ir.walk.find_ops finds what a filtered `walk()` finds, in the same order; holds_op
whether it finds any; find_outside those not inside device code; dhir.dialects.dhir.walk_outside_tasks what `walk()` finds outside
task bodies."""

from pathlib import Path
from typing import cast

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region

from dhir import parse_string
from dhir.dialects import arith, func, gpu, memref, scf
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.dialects.gpu import DEVICE_CODE
from dhir.ir import walk
from dhir.ir.walk import enclosing, find_ops, find_outside, holds_op

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.mlir"))
KINDS: list[tuple[type[Operation], ...]] = [
    (TaskOp,),
    (ScheduleOp, TaskOp),
    (func.CallOp, memref.LoadOp, memref.StoreOp),
    (arith.ConstantOp, scf.ForOp),
    (Operation,),
]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_find_ops_matches_walk(path: Path) -> None:
    module = parse_string(path.read_text())
    assert isinstance(module, ModuleOp)
    for kinds in KINDS:
        want = [op for op in module.walk() if isinstance(op, kinds)]
        assert find_ops(module, kinds) == want
        assert holds_op(module, kinds) == bool(want)
        for op in module.body.block.ops:
            assert holds_op(op, kinds) == any(isinstance(o, kinds) for o in op.walk())
    inner = next(iter(module.body.block.ops))
    assert find_ops(inner, Operation) == list(inner.walk())


# Several blocks in a region, empty ones, ops of two regions, nested (the examples have
# one block a region).
BLOCKS = """
func.func @f(%c: i1, %m: memref<4xf32>) -> f32 {
  %i = arith.constant 0 : index
  cf.cond_br %c, ^a, ^b
^a:
  %x = scf.if %c -> (f32) {
    %y = memref.load %m[%i] : memref<4xf32>
    scf.yield %y : f32
  } else {
    %z = scf.if %c -> (f32) {
      %w = memref.load %m[%i] : memref<4xf32>
      scf.yield %w : f32
    } else {
      %v = arith.constant 1.0 : f32
      scf.yield %v : f32
    }
    scf.yield %z : f32
  }
  cf.br ^c(%x : f32)
^b:
  scf.execute_region {
    scf.yield
  }
  %u = arith.constant 2.0 : f32
  cf.br ^c(%u : f32)
^c(%r: f32):
  func.return %r : f32
}
func.func private @g()
"""


def test_find_ops_in_blocks_and_regions() -> None:
    module = parse_string(BLOCKS)
    for kinds in [*KINDS, (scf.IfOp, scf.ExecuteRegionOp)]:
        for root in [module, *module.walk()]:
            assert find_ops(root, kinds) == [o for o in root.walk() if isinstance(o, kinds)]


def test_find_ops_reads_no_links_through_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each property read is a call: reading the links of tens of thousands of ops
    through them took 40% of a walk."""
    module = parse_string(BLOCKS)
    want = list(module.walk())
    reads: list[str] = []
    links = [(Operation, "next_op"), (Operation, "prev_op"), (Block, "first_op")]
    links += [(Block, "last_op"), (Block, "next_block"), (Region, "blocks")]
    for cls, name in links:
        read = cast(property, getattr(cls, name)).fget
        assert read is not None
        counted = property(lambda node, read=read, name=name: reads.append(name) or read(node))
        monkeypatch.setattr(cls, name, counted)
    assert find_ops(module, Operation) == want
    assert reads == []


def test_find_ops_asks_each_class_once_across_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many walks are of a few ops each (a task's body): whether a class is of the kinds
    asked for is kept from one walk to the next."""
    module = parse_string(BLOCKS)
    kinds = (scf.IfOp, memref.LoadOp)
    asked: list[type] = []

    def counted(kind: type, of: object) -> bool:
        asked.append(kind)
        return issubclass(kind, of)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(walk, "issubclass", counted, raising=False)
    first = find_ops(module, kinds)
    classes = {type(op) for op in module.walk()}
    assert len(asked) <= len(classes)
    asked.clear()
    for op in module.walk():
        assert find_ops(op, kinds) == [o for o in op.walk() if isinstance(o, kinds)]
    assert find_ops(module, kinds) == first
    assert asked == []


def _counted_links(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the links between ops and blocks read through xDSL's properties."""
    reads: list[str] = []
    links = [(Operation, "next_op"), (Operation, "prev_op"), (Block, "first_op")]
    links += [(Block, "last_op"), (Block, "ops")]
    for cls, name in links:
        read = cast(property, getattr(cls, name)).fget
        assert read is not None
        counted = property(lambda node, read=read, name=name: reads.append(name) or read(node))
        monkeypatch.setattr(cls, name, counted)
    return reads


def _outside_tasks(op: Operation) -> list[Operation]:
    found = [op]
    if not isinstance(op, TaskOp):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    found += _outside_tasks(inner)
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_walks_outside_tasks_read_no_links_through_properties(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some twenty passes walk a module so; `list(block.ops)` went through a schedule's
    tasks twice (`len` counted them first), a property read and an iterator call a step."""
    module = parse_string(path.read_text())
    want = _outside_tasks(module)
    schedules = [op for op in want if isinstance(op, ScheduleOp)]
    tasks = [[op for op in s.body.block.ops if isinstance(op, TaskOp)] for s in schedules]
    reads = _counted_links(monkeypatch)
    assert list(walk_outside_tasks(module)) == want
    assert [list(schedule.tasks()) for schedule in schedules] == tasks
    assert reads == []


def test_schedule_tasks_may_move_as_they_come() -> None:
    module = parse_string(EXAMPLES[0].read_text())
    schedule = find_ops(module, ScheduleOp)[0]
    want = [op for op in schedule.body.block.ops if isinstance(op, TaskOp)]
    assert len(want) >= 2
    tasks = schedule.tasks()
    moved = []
    for task in tasks:
        task.detach()
        moved.append(task)
    assert moved == want


# Loads in a gpu.launch's body and a gpu.module's function, and on the host around them.
DEVICE = """
func.func @main(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %h = memref.load %m[%c0] : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %d = memref.load %m[%tx] : memref<4xf32>
    memref.store %d, %m[%c0] : memref<4xf32>
    gpu.terminator
  }
  memref.store %h, %m[%c1] : memref<4xf32>
  func.return
}
gpu.module @kernels {
  gpu.func @k(%n: memref<4xf32>) kernel {
    %i = arith.constant 0 : index
    %e = memref.load %n[%i] : memref<4xf32>
    gpu.return
  }
}
"""


@pytest.mark.parametrize("text", [DEVICE, BLOCKS, *(p.read_text() for p in EXAMPLES)])
def test_find_outside_skips_what_enclosing_finds(text: str) -> None:
    module = parse_string(text)
    kinds_list = [*KINDS, (gpu.LaunchOp, memref.LoadOp), (gpu.ModuleOp, gpu.FuncOp)]
    for kinds in kinds_list:
        for root in [module, *module.body.block.ops]:
            want = [o for o in find_ops(root, kinds) if enclosing(o, DEVICE_CODE) is None]
            assert find_outside(root, kinds, DEVICE_CODE) == want


def test_find_outside_leaves_device_code() -> None:
    module = parse_string(DEVICE)
    found = find_outside(module, (memref.LoadOp, memref.StoreOp), DEVICE_CODE)
    assert [o.name for o in found] == ["memref.load", "memref.store"]
    assert len(find_ops(module, (memref.LoadOp, memref.StoreOp))) == 5
