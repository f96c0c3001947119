"""The ops MLIR 22 has and dhir cannot read (dhir/dialects/mlir22_gaps.py): the parser's
error names them as such, with what to write instead; an op no dialect has is unknown."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import dhir
from dhir.context import make_context
from dhir.dialects.mlir22_gaps import MLIR22_ONLY, SURVEYED

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
LIBMLIR = Path("/usr/lib/llvm-22/lib/libMLIR.so.22.1")


def _error(src: str) -> str:
    with pytest.raises(dhir.DhirError) as raised:
        dhir.parse_string(src, "prog.mlir")
    return str(raised.value)


def _with_op(line: str) -> str:
    return f"func.func @f(%x: f32, %i: index) {{\n  {line}\n  return\n}}\n"


def test_an_mlir22_op_dhir_cannot_read_is_named_so_with_what_to_write() -> None:
    """The parser said only "Operation vector.type_cast is not registered", past the op's name."""
    error = _error(_with_op("%r = vector.type_cast %m : memref<4xf32> to memref<vector<4xf32>>"))
    assert "prog.mlir:2:8: error: 'vector.type_cast' is an op of MLIR 22 that dhir cannot" in error
    assert "xDSL 0.74" in error and "instead: vector.load the vector from the memref" in error


def test_the_generic_form_gets_the_same_message_at_its_quote() -> None:
    """At the quote that opens the name, as mlir-opt-22 says; it was one column past it."""
    error = _error(_with_op('%r = "func.constant"() {value = @f} : () -> (() -> ())'))
    assert "prog.mlir:2:8: error: 'func.constant' is an op of MLIR 22" in error
    assert "instead: call the function by its name with func.call" in error


def test_an_unknown_generic_op_is_located_at_its_quote() -> None:
    error = _error(_with_op('"math.isnam"(%x) : (f32) -> i1'))
    assert "prog.mlir:2:3: error: unknown op 'math.isnam'" in error


def test_an_op_no_dialect_has_is_unknown_with_a_close_name() -> None:
    error = _error(_with_op("%r = math.isnam %x : f32"))
    assert "prog.mlir:2:8: error: unknown op 'math.isnam': neither MLIR 22 nor dhir" in error
    assert "did you mean 'math.isnan'?" in error


def test_an_op_of_an_unsurveyed_dialect_is_unknown_to_dhir_only() -> None:
    error = _error(_with_op("%r = foo.bar %x : f32"))
    assert "unknown op 'foo.bar': dhir reads no op of this name" in error
    assert "did you mean" not in error


def test_dhir_still_cannot_read_the_ops_it_names_as_mlir22_only() -> None:
    ctx = make_context()
    readable = [name for name in MLIR22_ONLY if ctx.get_optional_op(name) is not None]
    assert not readable, f"dhir reads these now: take them out of MLIR22_ONLY: {readable}"


def _mlir22_ops(names: list[str]) -> set[str]:
    """Those of `names` that mlir-opt-22 knows as ops: each is given as an op without
    operands, which it reports as an unregistered op, or (an op it knows) as an invalid
    one, or prints as valid. Building some ops so crashes it, which an unknown name
    cannot do: the chunk after the last it reported is an op, and it goes on after it."""
    ops: set[str] = set()
    while names:
        run = subprocess.run(
            ["mlir-opt-22", "--split-input-file", "-"],
            input="// -----\n".join(f'"{name}"() : () -> ()\n' for name in names),
            capture_output=True,
            text=True,
            check=False,
        )
        reports = dict(re.findall(r"^<stdin>:(\d+):1: error: (.*)$", run.stderr, re.M))
        said = [reports.get(str(2 * k + 1), "") for k in range(len(names))]
        done = len(names)
        if run.returncode < 0:
            done = max((k for k, s in enumerate(said) if s), default=-1) + 2
        ops |= {n for n, s in zip(names[:done], said) if "unregistered operation" not in s}
        names = names[done:]
    return ops


@needs_llvm
def test_each_op_named_mlir22_only_is_an_op_of_mlir22() -> None:
    missing = set(MLIR22_ONLY) - _mlir22_ops(list(MLIR22_ONLY))
    assert not missing, f"MLIR 22 has no such op: {sorted(missing)}"


@needs_llvm
@pytest.mark.skipif(not LIBMLIR.exists(), reason="needs LLVM 22's libMLIR")
def test_every_op_of_the_surveyed_dialects_is_read_or_named() -> None:
    """The op names in MLIR 22's library, of the dialects whose every op dhir reads or
    names: an op MLIR adds must be read or named for the parser's message to be right."""
    dialects = "|".join(sorted(SURVEYED))
    # A whole string of the library: no printable character on either side.
    pattern = rb"(?<![ -~])((?:" + dialects.encode() + rb")\.[a-z0-9_.]+)(?![ -~])"
    found = sorted({m.decode() for m in re.findall(pattern, LIBMLIR.read_bytes())})
    ops = _mlir22_ops(found)
    assert {"arith.addf", "math.isnan", "vector.step", "scf.forall.in_parallel"} <= ops
    ctx = make_context()
    unread = [n for n in ops if ctx.get_optional_op(n) is None]
    unnamed = sorted(set(unread) - set(MLIR22_ONLY))
    assert not unnamed, f"MLIR 22 ops dhir neither reads nor names in MLIR22_ONLY: {unnamed}"
