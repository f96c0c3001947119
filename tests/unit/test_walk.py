"""dhir.ir.walk.find_ops finds what a filtered `walk()` finds, in the same order; holds_op
whether it finds any."""

from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir import parse_string
from dhir.dialects import arith, func, memref, scf
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.walk import find_ops, holds_op

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
