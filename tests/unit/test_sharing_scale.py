"""`buffers` (which buffers a value may point into) on long and branching chains of
values: each value is followed once, and a long chain does not overflow Python's stack."""

import pytest
from xdsl.ir import Operation, SSAValue

from dhir import parse_string
from dhir.analysis import sharing
from dhir.analysis.sharing import buffers


def _function(lines: list[str], last: str) -> str:
    return "\n".join(
        [
            "func.func @main(%a: memref<64xf64>, %b: memref<64xf64>, %p: i1) {",
            *lines,
            "  %c0 = arith.constant 0 : index",
            f"  %v = memref.load {last}[%c0] : memref<64xf64>",
            "  return",
            "}",
        ]
    )


def _values(text: str) -> dict[str, SSAValue]:
    found: dict[str, SSAValue] = {}
    for op in parse_string(text, "prog.mlir").walk():
        for result in op.results:
            if result.name_hint:
                found[result.name_hint] = result
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    if arg.name_hint:
                        found[arg.name_hint] = arg
    return found


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Operation]:
    """The ops whose derived results `buffers` asks for, in order."""
    asked: list[Operation] = []
    derived = sharing.derived_results

    def counted(op: Operation) -> tuple[SSAValue, ...]:
        asked.append(op)
        return derived(op)

    monkeypatch.setattr(sharing, "derived_results", counted)
    return asked


def _selects(length: int) -> str:
    """`length` views, each an arith.select of the last one twice."""
    lines = ["  %m0 = arith.select %p, %a, %b : memref<64xf64>"]
    lines += [
        f"  %m{k} = arith.select %p, %m{k - 1}, %m{k - 1} : memref<64xf64>"
        for k in range(1, length + 1)
    ]
    return _function(lines, f"%m{length}")


def test_each_value_is_followed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain of values that each use the last twice took 2**length steps (dhir-opt
    with dhir-lower-to-mpi{partition=true} hung on a chain of 30 in host code)."""
    values = _values(_selects(16))
    asked = _counted(monkeypatch)
    assert buffers(values["m16"]) == {values["a"], values["b"]}
    assert len(asked) <= 17


def test_answers_are_kept_between_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """With `known`, asking for every value of a chain follows each value once (not
    once per question: quadratic in the chain's length)."""
    values = _values(_selects(16))
    asked = _counted(monkeypatch)
    known: dict[SSAValue, frozenset[object]] = {}
    for k in range(17):
        assert buffers(values[f"m{k}"], known) == {values["a"], values["b"]}
    assert len(asked) <= 17


def test_a_long_chain_of_views_does_not_overflow_the_stack() -> None:
    """Each cast was a Python call: 500 of them were a RecursionError (exit status 70)."""
    types = ("memref<64xf64>", "memref<?xf64>")
    lines = [
        f"  %m{k} = memref.cast %m{k - 1} : {types[k % 2]} to {types[(k + 1) % 2]}"
        for k in range(1, 2001)
    ]
    text = _function(["  %m0 = memref.cast %a : memref<64xf64> to memref<?xf64>", *lines], "%m2000")
    values = _values(text.replace("%m2000[%c0] : memref<64xf64>", "%m2000[%c0] : memref<?xf64>"))
    assert buffers(values["m2000"]) == {values["a"]}


def test_a_cycle_cuts_only_its_own_path() -> None:
    """A loop handing on a view of what it carries: the view's answer found with the
    loop's argument on its path is not kept for later questions."""
    text = "\n".join(
        [
            "func.func @main(%a: memref<64xf64>) {",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            "  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%m = %a) -> (memref<64xf64>) {",
            "    %w = memref.cast %m : memref<64xf64> to memref<64xf64>",
            "    scf.yield %w : memref<64xf64>",
            "  }",
            "  return",
            "}",
        ]
    )
    values = _values(text)
    known: dict[SSAValue, frozenset[object]] = {}
    first = buffers(values["r"], known)
    assert first == {values["a"]}
    assert buffers(values["w"], known) == {values["a"]}
    assert buffers(values["r"], known) == first


def test_host_code_is_followed_once_for_the_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which arguments stay whole asks for each value of the host code: a chain of
    additions took steps quadratic in its length (2000: 15 s of dhir-lower-to-mpi)."""
    from dhir.analysis import footprint
    from dhir.dialects import func

    lines = ["  %c0 = arith.constant 0 : index", "  %x0 = arith.addi %c0, %c0 : index"]
    lines += [f"  %x{k} = arith.addi %x{k - 1}, %c0 : index" for k in range(1, 201)]
    text = "\n".join(
        [
            "func.func @main(%a: memref<64xf64>) {",
            *lines,
            "  %v = memref.load %a[%x200] : memref<64xf64>",
            "  return",
            "}",
        ]
    )
    main = next(op for op in parse_string(text, "prog.mlir").walk() if isinstance(op, func.FuncOp))
    asked = _counted(monkeypatch)
    reasons = footprint._whole_reasons(main, list(main.args))  # pyright: ignore[reportPrivateUsage]
    assert list(reasons) == [main.args[0]]  # the load outside a schedule
    assert len(asked) <= 5 * 200
