"""What dhir-annotate-dependences writes on a task is for reading: a program that
carries it into a run is refused at the task, not silently run without it."""

from pathlib import Path

import pytest

from dhir.cli.main import main
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string
from dhir.runner import check_runnable
from dhir.transforms.annotate_dependences import ANNOTATIONS

PROGRAM = """func.func @main(%a: memref<4xi32>) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t0 = dhir.task %cpu, %a {{
      %c0 = arith.constant 0 : index
      %v = arith.constant 1 : i32
      memref.store %v, %a[%c0] : memref<4xi32>
    }}
    %t1 = dhir.task %cpu, %a attributes {{{attrs}}} {{
      %c1 = arith.constant 1 : index
      %v = arith.constant 2 : i32
      memref.store %v, %a[%c1] : memref<4xi32>
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("dhir.after", "array<i64: 5>"),
        ("dhir.id", "7 : i64"),
        ("dhir.reads", "array<i64>"),
        ("dhir.writes", "array<i64: 0>"),
        ("dhir.read_regions", "[]"),
        ("dhir.write_regions", '["must { [i0] : i0 = 1 }"]'),
    ],
)
def test_an_annotation_written_by_hand_is_refused_at_its_task(name: str, value: str) -> None:
    """Before: `dhir.after = array<i64: 5>` (no task 5) ran with exit 0, ignored."""
    module = parse_string(PROGRAM.format(attrs=f"{name} = {value}"), "p.mlir")
    with pytest.raises(DhirError, match=rf"^p.mlir:9:11: error: {name} on this task is"):
        check_runnable(module, "main")


def test_every_annotation_is_checked() -> None:
    assert set(ANNOTATIONS) == {
        "dhir.id",
        "dhir.reads",
        "dhir.writes",
        "dhir.read_regions",
        "dhir.write_regions",
        "dhir.after",
    }


def test_attributes_dhir_reads_still_run() -> None:
    module = parse_string(PROGRAM.format(attrs='name = "second", dhir.rank = 0 : i64'), "p.mlir")
    check_runnable(module, "main")


def test_dhir_schedule_refuses_them_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`dhir schedule` showed the order dhir keeps, with the hand-written dhir.after unread."""
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM.format(attrs="dhir.after = array<i64: 5>"))
    assert main(["schedule", str(path), "-n", "2"]) == 1
    assert f"{path}:9:11: error: dhir.after on this task is" in capsys.readouterr().err
