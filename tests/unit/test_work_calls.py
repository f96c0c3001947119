"""Counting a task's work through its calls: each function is counted once per task."""

import pytest
from xdsl.ir import Region

from dhir import parse_string
from dhir.analysis import work
from dhir.dialects.dhir import TaskOp


def _calls_twice(length: int) -> str:
    """A task calling @f0; each @fk calls @f(k+1) twice; the last adds and stores."""
    functions = [
        "\n".join(
            [
                f"func.func @f{k}(%m: memref<4xf64>) {{",
                f"  func.call @f{k + 1}(%m) : (memref<4xf64>) -> ()",
                f"  func.call @f{k + 1}(%m) : (memref<4xf64>) -> ()",
                "  return",
                "}",
            ]
        )
        for k in range(length)
    ]
    last = f"""func.func @f{length}(%m: memref<4xf64>) {{
  %c0 = arith.constant 0 : index
  %v = memref.load %m[%c0] : memref<4xf64>
  %w = arith.addf %v, %v : f64
  memref.store %w, %m[%c0] : memref<4xf64>
  return
}}"""
    main = """func.func @main(%m: memref<4xf64>) {
  dhir.schedule %m {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %m {
      func.call @f0(%m) : (memref<4xf64>) -> ()
    }
  }
  return
}"""
    return "\n".join([*functions, last, main])


def test_each_callee_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Functions that each call the next twice were counted 2**length times (`dhir
    schedule` on a chain of 20 did not end in a minute); the flops are still every
    call's."""
    counted: list[Region] = []
    region = work._Counter.region  # pyright: ignore[reportPrivateUsage]

    def counting(self: object, body: Region) -> work.Work:
        counted.append(body)
        return region(self, body)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(work._Counter, "region", counting)  # pyright: ignore[reportPrivateUsage]
    module = parse_string(_calls_twice(16), "prog.mlir")
    task = next(op for op in module.walk() if isinstance(op, TaskOp))
    assert work.body_work(task).flops == 2**16
    assert len(counted) <= 17
