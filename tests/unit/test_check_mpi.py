"""dhir-check-mpi (dhir/transforms/check_mpi.py): the mpi ops MLIR 22 would lower wrongly
or not at all are refused on the IR, at their ops, before anything is printed or built;
lowered MLIR handed to the build as text is read back and checked the same way."""

from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.api import run_pipeline
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string
from dhir.toolchain import build as build_module
from dhir.toolchain.build import build_executable
from dhir.toolchain.cpu import NATIVE, cpu_facts
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tools import find_llvm_tools, find_mpi
from dhir.transforms.check_mpi import check_mpi_use, mpi_problems


def module(body: str, mpi: str = "MPICH", arg: str = "memref<4x5xf32>") -> str:
    return (
        f'module attributes {{dlti.map = #dlti.map<"MPI:Implementation" = "{mpi}">}} {{\n'
        f"  func.func @main(%a: {arg}) {{\n"
        "    %comm = mpi.comm_world : !mpi.comm\n"
        "    %t = arith.constant 0 : i32\n"
        f"{body}"
        "    return\n  }\n}\n"
    )


def send(type_: str) -> str:
    return f"    mpi.send(%a, %t, %t, %comm) : {type_}, i32, i32\n"


def problems(text: str, mpi: str = "mpich") -> list[str]:
    return [d.render() for d in mpi_problems(parse_string(text, "prog.mlir"), mpi)]


def test_each_problem_is_reported_at_its_op() -> None:
    [found] = problems(module(send("memref<4x5xf32>")))
    assert found.startswith("prog.mlir:5:5: error: mpi.send on memref<4x5xf32>: ")
    assert "contiguous 1-D" in found
    [found] = problems(module("    mpi.barrier(%comm)\n"))
    assert found.startswith("prog.mlir:5:5: error: MLIR 22 cannot lower mpi.barrier")
    assert "mpi.barrier -> dhir_rt_barrier()" in found
    [found] = problems(module("    mpi.init\n"))
    assert found.startswith("prog.mlir:5:5: error: the module calls mpi.init, but dhir's")
    [found] = problems(module(""), "openmpi")
    assert found.startswith("prog.mlir:3:13: error: the module is lowered for MPI:Impl")
    [found] = problems(module("").replace('"MPI:Implementation"', '"other"'))
    assert found.startswith("prog.mlir:3:13: error: the module uses mpi ops but declares no MPI")


def test_no_mpi_op_no_problem_and_a_lowered_module_passes() -> None:
    assert problems("func.func @main() {\n  return\n}\n") == []
    assert problems(module(send("memref<20xf32>"), arg="memref<20xf32>")) == []


@pytest.mark.parametrize(
    ("type_", "why"),
    [
        ("memref<4x4xf32>", "contiguous 1-D"),
        ("memref<8xf32, strided<[2]>>", "contiguous 1-D"),
        ("memref<f32>", "contiguous 1-D"),
        ("memref<4xf16>", "no MPI datatype for f16"),
        ("memref<4xi1>", "no MPI datatype for i1"),
        ("memref<?xindex>", "no MPI datatype for index"),
        (f"memref<{2**31}xi8>", f"its {2**31} elements overflow"),
    ],
)
def test_buffers_are_read_as_types(type_: str, why: str) -> None:
    [found] = problems(module(send(type_), arg=type_))
    assert f"mpi.send on {type_}: " in found and why in found


def test_contiguous_buffers_pass() -> None:
    for type_ in ("memref<4xi32>", "memref<?xf64, strided<[1], offset: ?>>"):
        assert problems(module(send(type_), arg=type_)) == [], type_


def test_the_pass_runs_in_a_pipeline_and_checks_its_option() -> None:
    text = module("    mpi.barrier(%comm)\n")
    with pytest.raises(
        DhirError, match=r"prog\.mlir:5:5: error: MLIR 22 cannot lower mpi\.barrier"
    ):
        run_pipeline(parse_string(text, "prog.mlir"), "dhir-check-mpi{mpi=mpich}")
    with pytest.raises(DhirError, match="mpi must be mpich or openmpi, got lam"):
        run_pipeline(parse_string(text, "prog.mlir"), "dhir-check-mpi{mpi=lam}")
    check_mpi_use(parse_string(module(""), "prog.mlir"), "mpich")


def no_tools(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"a tool ran: {args}")


def test_lowered_text_is_checked_as_ir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The build read lowered text line by line with regular expressions: a type alias or a
    type on the next line hid a 2-D buffer (MLIR 22 would send its first row only), and
    "mpi.barrier" in a string was taken for the op."""
    try:
        find_mpi("mpich")
    except DhirError as error:
        pytest.skip(f"mpich is not installed: {error}")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    # What this CPU has is asked of clang once per process (cached): ask it first, so that
    # the test passes alone as in the suite.
    cpu_facts(find_llvm_tools().clang, NATIVE)
    monkeypatch.setattr(build_module.subprocess, "run", no_tools)
    sig = EntrySignature("main", ())
    aliased = "!rows = memref<4x5xf32>\n" + module(send("!rows"), arg="!rows")
    next_line = module("    mpi.send(%a, %t, %t, %comm)\n        : memref<4x5xf32>, i32, i32\n")
    for text in (aliased, next_line):
        with pytest.raises(DhirError, match=r"program\.mlir:\d+:5: error: mpi\.send on memref<4x5"):
            build_executable(text, sig, RunOptions(ranks=2))
    noted = module("").replace(
        ") {\n    %comm", ') attributes {note = "no mpi.barrier"} {\n    %comm'
    )
    assert "mpi.barrier" in noted
    with pytest.raises(AssertionError, match="a tool ran"):  # past the check
        build_executable(noted, sig, RunOptions(ranks=2))


def test_the_native_backend_refuses_mpi_ops_at_their_source_line() -> None:
    text = (
        "func.func @main(%a: memref<4xf32>) {\n"
        "  %comm = mpi.comm_world : !mpi.comm\n"
        "  mpi.barrier(%comm)\n"
        "  return\n}\n"
    )
    with pytest.raises(
        DhirError, match=r"^prog\.mlir:3:3: error: MLIR 22 cannot lower mpi\.barrier"
    ):
        dhir.run(parse_string(text, "prog.mlir"), np.zeros(4, np.float32), ranks=2)
