"""Which functions reach one with some property through calls (dhir.ir.calls): found in
one step per call, not by repeating over every function until nothing changes."""

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import dhir.analysis.communication
import dhir.analysis.sharing
import dhir.ir.calls
import dhir.ir.tasks
from dhir import parse_string
from dhir.analysis.communication import communicating_functions
from dhir.analysis.sharing import CastReach, mutable_global_users
from dhir.dialects import func, memref
from dhir.ir.calls import callers_of, through_callers
from dhir.ir.tasks import functions_reaching
from dhir.ir.walk import find_ops

T = TypeVar("T")
N = 300
LAST = {
    "global": "  %g = memref.get_global @g : memref<4xf32>\n",
    "cast": "  %r = memref.reinterpret_cast %m to offset: [0], sizes: [8], strides: [1]"
    " : memref<4xf32> to memref<8xf32>\n",
    "external": "  func.call @ext() : () -> ()\n",
}
HEADER = 'memref.global "private" @g : memref<4xf32> = uninitialized\nfunc.func private @ext()\n'
# The modules whose lines count as the work of finding the functions.
COUNTED = {
    str(Path(m.__file__ or ""))
    for m in (dhir.ir.calls, dhir.ir.tasks, dhir.analysis.sharing, dhir.analysis.communication)
}


def _chain(n: int, last: str) -> str:
    """n functions, each calling the next; the last does `last`."""
    lines = [HEADER]
    for k in range(n):
        body = f"  func.call @f{k + 1}(%m) : (memref<4xf32>) -> ()\n" if k + 1 < n else last
        lines.append(f"func.func @f{k}(%m: memref<4xf32>) {{\n{body}  return\n}}\n")
    return "".join(lines)


def _lines_run(run: Callable[[], T]) -> tuple[int, T]:
    """How many lines of the COUNTED modules `run` runs, and what it returns."""
    lines = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        lines += event == "line"
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename in COUNTED else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        result = run()
    finally:
        sys.settrace(before)
    return lines, result


def test_through_callers_gives_the_nearest_reason() -> None:
    callers = {"a": ["b"], "b": ["c", "d"], "x": ["d"], "d": ["e"]}
    found = through_callers({"a": 1, "x": 2}, callers)
    assert found == {"a": 1, "x": 2, "b": 1, "c": 1, "d": 2, "e": 2}


def test_functions_reaching_a_chain_is_linear() -> None:
    """Before: one round over every function per function of the chain (functions**2)."""
    module = parse_string(_chain(N, ""), "chain.mlir")
    lines, found = _lines_run(
        lambda: functions_reaching(module, lambda f: f.sym_name.data == f"f{N - 1}")
    )
    assert found == {f"f{k}" for k in range(N)}
    assert lines <= 50 * N


def test_mutable_global_users_of_a_chain_is_linear() -> None:
    module = parse_string(_chain(N, LAST["global"]), "chain.mlir")
    lines, (mutable, users) = _lines_run(lambda: mutable_global_users(module))
    assert mutable == {"g"}
    assert users == {f"f{k}": "g" for k in range(N)}
    assert lines <= 50 * N


def test_stretching_functions_of_a_chain_is_linear() -> None:
    module = parse_string(_chain(N, LAST["cast"]), "chain.mlir")
    lines, stretching = _lines_run(lambda: CastReach(module).stretching())
    casts = [op for op in module.walk() if isinstance(op, memref.ReinterpretCastOp)]
    assert stretching == {f"f{k}": casts[0] for k in range(N)}
    assert lines <= 50 * N


def test_communicating_functions_of_a_chain() -> None:
    module = parse_string(_chain(N, LAST["external"]), "chain.mlir")
    lines, found = _lines_run(lambda: communicating_functions(module))
    assert found == {"ext", *(f"f{k}" for k in range(N))}
    assert lines <= 50 * N


VIEW = "memref<4xf32, strided<[1], offset: ?>>"


def _view_chain(n: int) -> str:
    """@f0 passes a view to @f1, which passes it on to @f2 ...; written callee first."""
    lines = []
    for k in reversed(range(1, n)):
        body = f"  func.call @f{k + 1}(%m) : ({VIEW}) -> ()\n" if k + 1 < n else ""
        lines.append(f"func.func @f{k}(%m: {VIEW}) {{\n{body}  return\n}}\n")
    lines.append(
        "func.func @f0(%a: memref<8xf32>) {\n"
        "  %v = memref.subview %a[2] [4] [1] : memref<8xf32> to "
        "memref<4xf32, strided<[1], offset: 2>>\n"
        f"  %w = memref.cast %v : memref<4xf32, strided<[1], offset: 2>> to {VIEW}\n"
        f"  func.call @f1(%w) : ({VIEW}) -> ()\n  return\n}}\n"
    )
    return "".join(lines)


def test_viewed_arguments_of_a_chain_is_linear() -> None:
    """Before: one round over every call per function of the chain (calls**2)."""
    module = parse_string(_view_chain(N), "chain.mlir")
    functions = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    called = [f.body.block.args[0] for f in functions if f.sym_name.data != "f0"]
    reach = CastReach(module)
    lines, whole = _lines_run(lambda: reach.whole(called[0]))  # finds them all, once
    assert not whole
    assert not any(reach.whole(a) for a in called)
    assert reach.whole(functions[-1].body.block.args[0])  # @f0's own %a
    assert lines <= 50 * N


def _global_chain(n: int) -> str:
    """@main passes global @g to @f0 as its %a and @h as its %b (another call), and each
    @fk passes both on to @f(k+1); written callee first."""
    two = "(memref<4xf32>, memref<4xf32>)"
    lines = [HEADER, 'memref.global "private" @h : memref<4xf32> = uninitialized\n']
    for k in reversed(range(n)):
        body = f"  func.call @f{k + 1}(%a, %b) : {two} -> ()\n" if k + 1 < n else ""
        lines.append(
            f"func.func @f{k}(%a: memref<4xf32>, %b: memref<4xf32>) {{\n{body}  return\n}}\n"
        )
    lines.append(
        "func.func @main(%m: memref<4xf32>) {\n"
        "  %g = memref.get_global @g : memref<4xf32>\n"
        "  %h = memref.get_global @h : memref<4xf32>\n"
        f"  func.call @f0(%g, %m) : {two} -> ()\n"
        f"  func.call @f0(%m, %h) : {two} -> ()\n  return\n}}\n"
    )
    return "".join(lines)


def test_passed_globals_of_a_chain_is_linear() -> None:
    """Before: one round over every call per function of the chain (calls**2)."""
    module = parse_string(_global_chain(N), "chain.mlir")
    calls = list(find_ops(module, func.CallOp))
    sharing = dhir.analysis.sharing
    lines, passed = _lines_run(lambda: sharing._passed_globals(calls, module))  # pyright: ignore[reportPrivateUsage]
    functions = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    for function in functions:
        if function.sym_name.data not in ("main", "ext"):
            a, b = function.body.block.args
            assert (passed[a], passed[b]) == ({"g"}, {"h"})
    assert len(passed) == 2 * N  # @main's %m gets none: no call passes it one
    assert lines <= 150 * N  # two arguments each (before: 4.8 million lines, 16,000 * N)


def test_callers_of_names_each_caller_once_per_callee() -> None:
    module = parse_string(
        "func.func private @ext()\n"
        "func.func @f() {\n  func.call @ext() : () -> ()\n  return\n}\n"
        "func.func @main() {\n"
        "  %c0 = arith.constant 0 : index\n  %c2 = arith.constant 2 : index\n"
        "  %c1 = arith.constant 1 : index\n"
        "  scf.for %i = %c0 to %c2 step %c1 {\n    func.call @f() : () -> ()\n  }\n"
        "  func.call @f() : () -> ()\n  func.call @ext() : () -> ()\n  return\n}\n",
        "calls.mlir",
    )
    callers = callers_of(module)
    assert {callee: list(names) for callee, names in callers.items()} == {
        "ext": ["f", "main"],
        "f": ["main"],
    }
