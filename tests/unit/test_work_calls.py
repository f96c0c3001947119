"""Counting a task's work through its calls: each function is counted once per task, a
recursion once for all its functions."""

import pytest
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, Region
from xdsl.traits import SymbolOpInterface

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


_MAIN = """func.func @main(%m: memref<4xf64>) {
  dhir.schedule %m {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %m {
      func.call @f0(%m) : (memref<4xf64>) -> ()
    }
  }
  return
}"""


def _function(name: str, callees: list[str], adds: int = 1) -> str:
    """@name adds `adds` times, then calls each of `callees`."""
    adds_ = [f"  %w{k} = arith.addf %v, %v : f64" for k in range(adds)]
    calls = [f"  func.call @{callee}(%m) : (memref<4xf64>) -> ()" for callee in callees]
    return "\n".join(
        [
            f"func.func @{name}(%m: memref<4xf64>) {{",
            "  %c0 = arith.constant 0 : index",
            "  %v = memref.load %m[%c0] : memref<4xf64>",
            *adds_,
            *calls,
            "  return",
            "}",
        ]
    )


def _ring(length: int) -> str:
    """Each @fk adds k + 1 times and calls @f(k+1) twice, the last @f0: one recursion."""
    ring = [_function(f"f{k}", [f"f{(k + 1) % length}"] * 2, k + 1) for k in range(length)]
    return "\n".join([*ring, _MAIN])


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Region]:
    """The regions `work._Counter` counts, from now on."""
    counted: list[Region] = []
    region = work._Counter.region  # pyright: ignore[reportPrivateUsage]

    def counting(self: object, body: Region) -> work.Work:
        counted.append(body)
        return region(self, body)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(work._Counter, "region", counting)  # pyright: ignore[reportPrivateUsage]
    return counted


def _task_work(text: str) -> work.Work:
    module = parse_string(text, "prog.mlir")
    return work.body_work(next(op for op in module.walk() if isinstance(op, TaskOp)))


def test_a_ring_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ring of functions that each call the next twice was counted 2**length times:
    every count in it was cut by the recursion and none was kept. A recursion counts each
    of its functions' bodies once."""
    counted = _counting(monkeypatch)
    assert _task_work(_ring(16)).flops == sum(range(1, 17))
    assert len(counted) <= 2 * 16


def test_a_recursion_below_other_calls_is_counted_once() -> None:
    """A chain calling twice into a mutual recursion: the recursion's functions once each,
    then multiplied by the calls of the chain, as a non-recursive callee is."""
    functions = [
        _function("f0", ["f1", "f1"], 1),
        _function("f1", ["g", "g"], 2),
        _function("g", ["h"], 4),
        _function("h", ["g", "h"], 8),
    ]
    assert _task_work("\n".join([*functions, _MAIN])).flops == 1 + 2 * (2 + 2 * (4 + 8))


def test_a_long_call_chain_is_counted() -> None:
    """Counting a callee inside its caller's count nested Python calls as deep as the
    call chain: RecursionError for a chain of 300 functions."""
    chain = [_function(f"f{k}", [f"f{k + 1}"]) for k in range(300)]
    text = "\n".join([*chain, _function("f300", []), _MAIN])
    assert _task_work(text).flops == 301


def test_each_callee_is_looked_up_in_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """xDSL's lookup_symbol reads the name of every op of the module, at every call: a
    chain of a thousand functions took a minute per task. The module's names are read
    once per task."""
    chain = [_function(f"f{k}", [f"f{k + 1}"]) for k in range(100)]
    text = "\n".join([*chain, _function("f100", []), _MAIN])
    read: list[Operation] = []
    name = SymbolOpInterface.get_sym_attr_name

    def reading(self: SymbolOpInterface, op: Operation) -> StringAttr | None:
        read.append(op)
        return name(self, op)

    module = parse_string(text, "prog.mlir")
    monkeypatch.setattr(SymbolOpInterface, "get_sym_attr_name", reading)
    task = next(op for op in module.walk() if isinstance(op, TaskOp))
    assert work.body_work(task).flops == 101
    assert len(read) <= 2 * len(module.body.block.ops)


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
