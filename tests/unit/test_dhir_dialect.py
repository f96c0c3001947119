"""The dhir dialect through the Python API: build, verify, print, parse back."""

from typing import Any

import pytest
from hypothesis import given, settings
from strategies import RandomSchedule, schedules
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import DenseArrayBase, FileLineColLoc, MemRefType, ModuleOp, f32
from xdsl.ir import Block, Operation, Region
from xdsl.traits import NoTerminator, SymbolTable

from dhir import parse_string, print_module
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp
from dhir.ir import text
from dhir.ir.diagnostics import DhirError
from dhir.ir.verifier import verify_module
from dhir.targets import DeviceKind, TargetInfo


def _round_trip(text: str) -> str:
    printed = print_module(parse_string(text))
    assert print_module(parse_string(printed)) == printed
    generic = print_module(parse_string(printed), generic=True)
    assert print_module(parse_string(generic)) == printed
    return printed


@settings(max_examples=60, deadline=None)
@given(schedules())
def test_random_schedules_round_trip(schedule: RandomSchedule) -> None:
    printed = _round_trip(schedule.text())
    module = parse_string(printed)
    sched = next(op for op in module.walk() if isinstance(op, ScheduleOp))
    assert len(list(sched.tasks())) == len(schedule.tasks)


def _build_module() -> ModuleOp:
    memref = MemRefType(f32, [8])
    block = Block(arg_types=[memref, memref])
    a, b = block.args
    body = Block()
    target = TargetOp(arch="sm_90")
    task_body = Block()
    zero = arith.ConstantOp.from_int_and_width(0, 32)
    task_body.add_op(zero)
    task = TaskOp(target.result, [a, b], Region(task_body))
    body.add_ops([target, task])
    schedule = ScheduleOp([a, b], Region(body))
    block.add_ops([schedule, func.ReturnOp()])
    function = func.FuncOp("main", ((memref, memref), ()), Region(block))
    return ModuleOp([function])


def test_built_module_verifies_and_prints_canonically() -> None:
    module = _build_module()
    verify_module(module)
    text = print_module(module)
    assert 'dhir.target {arch = "sm_90"}' in text
    assert "dhir.yield" not in text  # implicit terminators stay implicit
    assert _round_trip(text) == text


def test_task_target_info_for_every_form() -> None:
    module = parse_string(
        """
module attributes {dlti.target_system_spec = #dlti.target_system_spec<
    "node0.gpu0" = #dlti.target_device_spec<"arch" = "sm_80">>} {
  func.func @f(%a: memref<4xf32>) {
    dhir.schedule %a {
      %x = dhir.target {arch = "aarch64"}
      %y = dhir.target {kind = "gpu"}
      %z = dhir.target {spec = #dlti.target_device_spec<"kind" = "cpu">}
      %w = dhir.target {device = "node0.gpu0"}
      %t0 = dhir.task %x, %a {}
      %t1 = dhir.task %y, %a {}
      %t2 = dhir.task %z, %a {}
      %t3 = dhir.task %w, %a {}
      %t4 = dhir.task target = "any", %a {}
    }
    func.return
  }
}
"""
    )
    infos = [op.target_info() for op in module.walk() if isinstance(op, TaskOp)]
    assert infos == [
        TargetInfo(DeviceKind.CPU, "aarch64"),
        TargetInfo(DeviceKind.GPU),
        TargetInfo(DeviceKind.CPU),
        TargetInfo(DeviceKind.GPU, "sm_80"),
        TargetInfo(DeviceKind.ANY),
    ]
    # As messages name them: `any` read "any any" in dhir-split's reasons and placement's.
    assert [str(info) for info in infos] == [
        "aarch64", "any GPU", "any CPU", "sm_80", "any device",
    ]  # fmt: skip


def test_proposal_duplicate_operands_and_explicit_yield() -> None:
    # The proposal lists a memref twice (%c, %d, %d) and ends bodies with dhir.yield.
    text = _round_trip(
        """
func.func @f(%c: memref<4xf32>, %d: memref<4xf32>) {
  dhir.schedule %c, %d {
    %gpu = dhir.target {arch = "sm_90"}
    %task3 = dhir.task %gpu, %c, %d, %d {
      dhir.yield
    }
    dhir.yield
  }
  func.return
}
"""
    )
    assert "%task3 = dhir.task %gpu, %c, %d, %d {" in text


def test_scalars_are_schedule_operands_and_captured_in_tasks() -> None:
    _round_trip(
        """
func.func @f(%a: memref<4xf32>, %s: f32, %n: index) {
  dhir.schedule %a, %s, %n {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      memref.store %s, %a[%c0] : memref<4xf32>
    }
  }
  func.return
}
"""
    )


def test_errors_carry_location_and_source_line() -> None:
    with pytest.raises(DhirError) as info:
        parse_string(
            'func.func @f() {\n  dhir.schedule {\n    %t = dhir.target {arch = "z80"}\n  }\n'
            "  func.return\n}\n",
            "prog.mlir",
        )
    rendered = info.value.render()
    assert rendered.startswith('prog.mlir:3:10: error: unknown arch "z80"')
    assert '    %t = dhir.target {arch = "z80"}\n         ^' in rendered


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("{arch = 5}", "dhir.target's arch must be a string, got 5 : i64; give it an arch ("),
        ("{kind = [1]}", "dhir.target's kind must be a string, got [1 : i64]; give it"),
        ("{device = 7}", "dhir.target's device must be a string, got 7 : i64; give it"),
        ('{spec = "gpu"}', "dhir.target's spec must be a #dlti.target_device_spec<...>, got"),
    ],
)
def test_a_target_property_of_the_wrong_kind_says_what_to_give(given: str, said: str) -> None:
    """`{arch = 5}` was xDSL's '5 : i64 should be of base attribute string', at the op."""
    with pytest.raises(DhirError) as info:
        parse_string(
            f"func.func @f() {{\n  dhir.schedule {{\n    %t = dhir.target {given}\n  }}\n"
            "  func.return\n}\n",
            "prog.mlir",
        )
    rendered = info.value.render()
    assert rendered.startswith(f"prog.mlir:3:22: error: {said}"), rendered


def _task_with(attributes: str) -> str:
    return (
        "func.func @f(%a: memref<4xf32>) {\n  dhir.schedule %a {\n"
        '    %cpu = dhir.target {kind = "cpu"}\n'
        f"    %t = dhir.task %cpu, %a attributes {attributes} {{\n    }}\n  }}\n"
        "  func.return\n}\n"
    )


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("{rank = 1}", "dhir.rank"),
        ("{split = 2}", "dhir.split"),
        ("{reassociate}", "dhir.reassociate"),
        ('{nmae = "init"}', "name"),
        ('{Name = "init"}', "name"),
        ('{names = "init"}', "name"),
    ],
)
def test_a_task_attribute_dhir_would_read_under_another_name_is_refused(
    given: str, meant: str
) -> None:
    """`{rank = 1}` placed the task anywhere and `{nmae = ...}` left it unnamed, silently."""
    with pytest.raises(DhirError) as info:
        parse_string(_task_with(given), "prog.mlir")
    rendered = info.value.render()
    key = given[1:].split(" ")[0].rstrip("}")
    assert rendered.startswith(
        f"prog.mlir:4:10: error: dhir.task has an attribute {key} that dhir does not read "
        f"(did you mean {meant}?)"
    ), rendered


@pytest.mark.parametrize("given", ['{note = "scale"}', '{name = "init"}', "{dhir.rank = 0}"])
def test_other_task_attributes_are_kept(given: str) -> None:
    parse_string(_task_with(given), "prog.mlir")


# Each op of this text and where mlir-opt-22 locates it (--mlir-print-debuginfo): at the
# op's name (for a generic op, the quote that opens it), whatever results come before it.
OP_COLUMNS = """\
func.func @f(%a: memref<4xi32>) {
  %c = arith.constant 0 : index
  %i = arith.constant 1 : i32
  %x:2 = "arith.addui_extended"(%i, %i) : (i32, i32) -> (i32, i1)
  %s, %o = arith.addui_extended %i, %x#0 : i32, i1
  %v = "memref.load"(%a, %c) : (memref<4xi32>, index) -> i32
      memref.store %v, %a[%c] : memref<4xi32>
  "memref.store"(%s, %a, %c) : (i32, memref<4xi32>, index) -> ()
  func.return
}
"""
OP_LOCATIONS = [(1, 1), (2, 8), (3, 8), (4, 10), (5, 12), (6, 8), (7, 7), (8, 3), (9, 3)]


def test_an_op_is_located_at_its_name_as_in_mlir() -> None:
    module = parse_string(OP_COLUMNS, "cols.mlir")
    located = [
        (op.location.line.data, op.location.column.data)
        for op in module.walk()
        if isinstance(op.location, FileLineColLoc)
    ]
    assert located == OP_LOCATIONS


def test_an_op_error_found_while_parsing_points_at_the_op_name() -> None:
    text = (
        "func.func @f(%a: memref<8xf32>, %f: f32) {\n  %c0 = arith.constant 0 : index\n"
        "  %v = vector.transfer_read %a[%c0], %f : memref<8xf32>, vector<2x4xf32>\n"
        "  return\n}\n"
    )
    with pytest.raises(DhirError) as info:
        parse_string(text, "read.mlir")
    rendered = info.value.render()
    assert rendered.startswith("read.mlir:3:8: error: Dimension mismatch")
    assert "  %v = vector.transfer_read %a[%c0]" in rendered
    assert "\n       ^" in rendered


def test_block_argument_dominance_across_blocks() -> None:
    text = """
func.func @f(%c: i1) -> i32 {
  cf.cond_br %c, ^a, ^b
^a:
  %x = arith.constant 1 : i32
  cf.br ^b
^b:
  %y = arith.addi %x, %x : i32
  func.return %y : i32
}
"""
    with pytest.raises(DhirError, match="does not dominate"):
        parse_string(text)
    ok = text.replace("cf.cond_br %c, ^a, ^b", "cf.br ^a")
    parse_string(ok)


def _schedule_of(count: int) -> str:
    tasks = "".join(
        f"    %t{k} = dhir.task %cpu, %a {{\n"
        f"      %i = arith.constant {k} : index\n"
        "      %v = memref.load %a[%i] : memref<64xf32>\n"
        "      memref.store %v, %a[%i] : memref<64xf32>\n    }\n"
        for k in range(count)
    )
    return (
        "func.func @main(%a: memref<64xf32>) {\n  dhir.schedule %a {\n"
        f'    %cpu = dhir.target {{kind = "cpu"}}\n{tasks}  }}\n  return\n}}\n'
    )


def _verify_counting(monkeypatch: pytest.MonkeyPatch, source: str) -> tuple[int, int]:
    """While `source`, parsed, is verified: how often an op class was asked whether it
    holds symbols or needs a terminator, and how often an array attribute was unpacked."""
    counts = [0, 0]
    verifying = [False]
    has_trait = Operation.has_trait.__func__  # pyright: ignore[reportFunctionMemberAccess]
    get_values = DenseArrayBase.get_values
    verify = text.verify_module

    def counted(cls: type[Operation], trait: object, **kwargs: bool) -> bool:
        counts[0] += verifying[0] and trait in (SymbolTable, NoTerminator)
        return has_trait(cls, trait, **kwargs)

    def counted_values(self: DenseArrayBase) -> tuple[int, ...] | tuple[float, ...]:
        counts[1] += verifying[0]
        return get_values(self)

    def counted_verify(*args: Any, **kwargs: Any) -> None:
        verifying[0] = True
        try:
            verify(*args, **kwargs)
        finally:
            verifying[0] = False

    with monkeypatch.context() as patch:
        patch.setattr(Operation, "has_trait", classmethod(counted))
        patch.setattr(DenseArrayBase, "get_values", counted_values)
        patch.setattr(text, "verify_module", counted_verify)
        parse_string(source)  # the later bodies cloned from the first
    return counts[0], counts[1]


def test_verifying_more_tasks_asks_no_more_traits_and_unpacks_no_segments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Verifying a schedule asks each op class once whether it holds symbols or needs a
    terminator, and reads a task's operand segments without unpacking their bytes: both
    were done again for each of a large schedule's tasks."""
    _verify_counting(monkeypatch, _schedule_of(1))  # the classes' answers, found once
    few = _verify_counting(monkeypatch, _schedule_of(10))
    assert _verify_counting(monkeypatch, _schedule_of(60)) == few
