"""The program's function names that collide with dhir's, MPI's or a library's: refused at
the func.func by both backends, or built as the program's own."""

import math
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import DhirError

TASK_CALLING = """FUNCTION
func.func @main(%out: memref<4xi32>) {
  dhir.schedule %out {
    %t = dhir.task target = "cpu", %out {
      %c0 = arith.constant 0 : index
      CALL
      memref.store %r, %out[%c0] : memref<4xi32>
    }
  }
  return
}
"""
SEVEN = "%c = arith.constant 7 : i32\n  return %c : i32"

OWN_MPI = r"a task does no communication of its own \(MPI, dhir's runtime\)"
REFUSED = {
    # Natively the call reached dhir's runtime (the rank, 0), while the interpreter asked
    # for a file to link.
    "dhir_rt_comm_rank": (
        "func.func private @dhir_rt_comm_rank() -> i32",
        "%r = func.call @dhir_rt_comm_rank() : () -> i32",
        r"1:1: error: @dhir_rt_comm_rank declares a function of dhir's runtime and harness "
        r"\(`dhir_...`\), which is dhir's to call",
    ),
    # Not called at all: natively dhir's own calls of it (i64) stopped mlir-opt ("operand
    # type mismatch"), while the interpreter ran the program.
    "dhir_rt_task_enter of another type": (
        "func.func private @dhir_rt_task_enter(i32)",
        "%r = arith.constant 0 : i32",
        r"1:1: error: @dhir_rt_task_enter declares a function of dhir's runtime",
    ),
    # The declaration host code may make, called in a task: natively a barrier on one rank.
    "dhir_rt_barrier": (
        "func.func private @dhir_rt_barrier()",
        "func.call @dhir_rt_barrier() : () -> ()\n      %r = arith.constant 0 : i32",
        rf"6:7: error: this task calls @dhir_rt_barrier: {OWN_MPI}",
    ),
    "mgpu defined": (
        f"func.func @mgpuStreamCreate() -> i32 {{\n  {SEVEN}\n}}",
        "%r = func.call @mgpuStreamCreate() : () -> i32",
        r"1:1: error: the program defines @mgpuStreamCreate, a name reserved for dhir's GPU "
        r"runtime \(`mgpu...`\): it would stand in",
    ),
    # A task on one rank called MPI_Barrier: the run hung until --timeout on two ranks.
    "MPI_Barrier": (
        "func.func private @MPI_Barrier(i32) -> i32",
        "%w = arith.constant 1140850688 : i32\n"
        "      %r = func.call @MPI_Barrier(%w) : (i32) -> i32",
        rf"7:12: error: this task calls @MPI_Barrier: {OWN_MPI}",
    ),
    "PMPI_Allreduce through a function": (
        "func.func private @PMPI_Allreduce(i64, i64, i32, i32, i32, i32) -> i32\n"
        f"func.func @sum() -> i32 {{\n  {SEVEN}\n}}\n"
        "func.func @all() -> i32 {\n  %r = func.call @sum() : () -> i32\n"
        "  %z = arith.constant 0 : i64\n  %i = arith.constant 0 : i32\n"
        "  %e = func.call @PMPI_Allreduce(%z, %z, %i, %i, %i, %i) "
        ": (i64, i64, i32, i32, i32, i32) -> i32\n  return %r : i32\n}",
        "%r = func.call @all() : () -> i32",
        rf"17:12: error: this task calls @PMPI_Allreduce \(through @all\): {OWN_MPI}",
    ),
    # Natively each task stored the rank it was placed on ([0, 1] on two ranks, exit 0).
    "mpi dialect": (
        "",
        "%comm = mpi.comm_world : !mpi.comm\n      %r = mpi.comm_rank(%comm) : i32",
        rf"6:15: error: this task uses mpi.comm_world: {OWN_MPI}",
    ),
    "mpi dialect through a function": (
        "func.func @rank() -> i32 {\n  %comm = mpi.comm_world : !mpi.comm\n"
        "  %r = mpi.comm_rank(%comm) : i32\n  return %r : i32\n}",
        "%r = func.call @rank() : () -> i32",
        rf"10:12: error: this task calls @rank, which uses mpi.comm_world \(itself or through "
        rf"its calls\): {OWN_MPI}",
    ),
    # Both backends passed the memref field by field to C that, by MLIR's name, takes a
    # descriptor's address (the run wrote nothing, exit 0); beside a C-interface @scale,
    # mlir-opt stopped the build ("redefinition of symbol") and the interpreter's call died.
    "_mlir_ciface_": (
        "func.func private @_mlir_ciface_scale(memref<4xi32>)",
        "func.call @_mlir_ciface_scale(%out) : (memref<4xi32>) -> ()\n"
        "      %r = arith.constant 0 : i32",
        r"1:1: error: @_mlir_ciface_scale declares a function under the name MLIR gives the C "
        r"interface of @scale .* Declare @scale with attributes \{llvm.emit_c_interface\}",
    ),
    # Natively OpenMP's (the build links it for parallel loops), while the interpreter
    # asked for a file to link.
    "omp_get_thread_num": (
        "func.func private @omp_get_thread_num() -> i32",
        "%r = func.call @omp_get_thread_num() : () -> i32",
        r"1:1: error: @omp_get_thread_num declares a function of OpenMP's runtime: dhir runs",
    ),
    # GCC's entry point, which LLVM's libomp defines too: natively linked with OpenMP.
    "GOMP_barrier": (
        "func.func private @GOMP_barrier()",
        "func.call @GOMP_barrier() : () -> ()\n      %r = arith.constant 0 : i32",
        r"1:1: error: @GOMP_barrier declares a function of OpenMP's runtime",
    ),
    # Natively dhir's runtime's bf16 rounding, while the interpreter asked for a file.
    "__truncsfbf2": (
        "func.func private @__truncsfbf2(f32) -> bf16",
        "%x = arith.constant 1.5 : f32\n"
        "      %b = func.call @__truncsfbf2(%x) : (f32) -> bf16\n"
        "      %r = arith.constant 0 : i32",
        r"1:1: error: @__truncsfbf2 declares a function under a name C reserves for its "
        r"implementation \(`__...`, `_` and a capital\)",
    ),
    "_Unwind_Resume": (
        "func.func private @_Unwind_Resume(i64)",
        "%r = arith.constant 0 : i32",
        r"1:1: error: @_Unwind_Resume declares a function under a name C reserves",
    ),
    # Natively dhir's own lowering of mpi.comm_rank met a declaration of another type
    # ("'llvm.call' op operand type mismatch"); the interpreter asked for a file to link.
    "MPI_Comm_rank": (
        "func.func private @MPI_Comm_rank(i32, i64) -> i32",
        "%r = arith.constant 0 : i32",
        r"1:1: error: @MPI_Comm_rank declares a function of MPI that dhir's runtime and "
        r"MLIR's lowering of the mpi dialect call themselves",
    ),
    # Natively MPI refused a second start ("Cannot call MPI_INIT ... more than once").
    "MPI_Init": (
        "func.func private @MPI_Init(i64, i64) -> i32",
        "%r = arith.constant 0 : i32",
        r"1:1: error: @MPI_Init declares a function of MPI that dhir's runtime",
    ),
    "MPI_Wtime of another type": (
        "func.func private @MPI_Wtime() -> f32",
        "%r = arith.constant 0 : i32",
        r"1:1: error: @MPI_Wtime is declared as \(\) -> f32, but MPI's MPI_Wtime is of type",
    ),
    # Natively the build renamed it to the harness's name and the link failed ("undefined
    # reference to `dhir_mlir_main'"); the interpreter asked for a file to link.
    "main": (
        "func.func private @main() -> i32",
        "%r = func.call @main() : () -> i32",
        r"1:1: error: @main declares the C program's entry, which in a native build is dhir's "
        r"harness",
    ),
    # Two tasks placed on two ranks each drew rand's first number natively, where the
    # interpreter (and one rank) drew the first and the second: exit 0 on both.
    "rand": (
        "func.func private @rand() -> i32",
        "%r = func.call @rand() : () -> i32",
        r"1:1: error: @rand is C's, whose results come from state the C library keeps "
        r"between calls in each process, and a task calls it at line 6, column 12",
    ),
    # Through a function of the program.
    "random through a function": (
        "func.func private @random() -> i64\nfunc.func @draw() -> i32 {\n"
        "  %x = func.call @random() : () -> i64\n  %y = arith.trunci %x : i64 to i32\n"
        "  return %y : i32\n}",
        "%r = func.call @draw() : () -> i32",
        r"1:1: error: @random is C's, whose results come from state .* a task calls it "
        r"\(through @draw\) at line 11, column 12",
    ),
    # Natively the build held two functions of the name: mlir-opt's "redefinition of
    # symbol"; the interpreter ran it.
    "step": (
        f'func.func @"main.schedule0.part0"() -> i32 {{\n  {SEVEN}\n}}',
        '%r = func.call @"main.schedule0.part0"() : () -> i32',
        r"1:1: error: @main.schedule0.part0 is a name dhir gives the functions it makes of a "
        "schedule's",
    ),
}


@pytest.mark.parametrize("backend", ["native", "interp"])
@pytest.mark.parametrize("case", REFUSED)
def test_names_of_dhir_and_mpi_are_refused(case: str, backend: str) -> None:
    function, call, message = REFUSED[case]
    text = TASK_CALLING.replace("FUNCTION", function).replace("CALL", call)
    # The entry under another name, where the program declares one named main.
    text = text.replace("func.func @main(", "func.func @entry(")
    program = dhir.parse_string(text, "names.mlir")
    with pytest.raises(DhirError, match=rf"names.mlir:{message}"):
        dhir.run(
            program, np.zeros(4, np.int32), ranks=2, entry="entry", backend=backend, timeout=20
        )


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_mpi_clock_and_the_programs_own_mpi_named_function_run(backend: str) -> None:
    """MPI_Wtime only reads the clock (the benchmarks time with it), and a function the
    program defines is its own, whatever its name. The interpreter, which links no MPI,
    asked for a file to link at a call of MPI_Wtime or MPI_Wtick."""
    own = (
        "func.func private @MPI_Wtime() -> f64\nfunc.func private @MPI_Wtick() -> f64\n"
        f"func.func @MPI_Own() -> i32 {{\n  {SEVEN}\n}}"
    )
    call = (
        "%w = func.call @MPI_Wtime() : () -> f64\n"
        "      %k = func.call @MPI_Wtick() : () -> f64\n"
        "      %z = arith.constant 0.0 : f64\n"
        "      %ticks = arith.cmpf ogt, %k, %z : f64\n"
        "      %runs = arith.cmpf ogt, %w, %z : f64\n"
        "      %both = arith.andi %ticks, %runs : i1\n"
        "      %b = arith.extui %both : i1 to i32\n"
        "      %c1 = arith.constant 1 : index\n"
        "      memref.store %b, %out[%c1] : memref<4xi32>\n"
        "      %r = func.call @MPI_Own() : () -> i32"
    )
    text = TASK_CALLING.replace("FUNCTION", own).replace("CALL", call)
    program = dhir.parse_string(text, "names.mlir")
    got = dhir.run(program, np.zeros(4, np.int32), ranks=2, backend=backend, timeout=60)
    assert list(got[0]) == [7, 1, 0, 0]


HOST_CALLING = """func.func private @dhir_rt_comm_size() -> i32
func.func @main(%out: memref<4xi32>) {
  %n = func.call @dhir_rt_comm_size() : () -> i32
  dhir.schedule %out, %n {
    %t = dhir.task target = "cpu", %out {
      %c0 = arith.constant 0 : index
      memref.store %n, %out[%c0] : memref<4xi32>
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.mpi
def test_host_code_may_call_dhirs_runtime_natively() -> None:
    """Every rank runs host code: dhir-check-mpi points mpi.comm_size and mpi.barrier
    there to dhir_rt_comm_size and dhir_rt_barrier, which the check of tasks leaves be."""
    program = dhir.parse_string(HOST_CALLING, "host.mlir")
    got = dhir.run(program, np.zeros(4, np.int32), ranks=2, timeout=60)
    assert list(got[0]) == [2, 0, 0, 0]


CALLING_BACK = """func.func @NAME(%x: f64) -> f64 {
  %c = arith.constant 3.0 : f64
  %r = arith.addf %x, %c : f64
  return %r : f64
}
func.func private @apply(f64) -> f64
func.func @main(%out: memref<4xf64>) {
  dhir.schedule %out {
    %t = dhir.task target = "cpu", %out {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %x = arith.constant 0.5 : f64
      %a = func.call @apply(%x) : (f64) -> f64
      memref.store %a, %out[%c0] : memref<4xf64>
      %b = func.call @NAME(%x) : (f64) -> f64
      memref.store %b, %out[%c1] : memref<4xf64>
    }
  }
  return
}
"""


def _apply(tmp_path: Path, name: str, kind: str = ".o", flags: Sequence[str] = ()) -> Path:
    (tmp_path / "apply.c").write_text(
        f"double {name}(double x);\ndouble apply(double x) {{ return {name}(x); }}\n"
    )
    made = tmp_path / f"libapply{kind}"
    how = "-shared" if kind == ".so" else "-c"
    subprocess.run(["clang-22", "-fPIC", how, tmp_path / "apply.c", "-o", made, *flags], check=True)
    return made


@pytest.mark.mlir
@pytest.mark.parametrize("kind", [".o", ".so"])
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_linked_code_calling_the_programs_function_is_refused(
    tmp_path: Path, backend: str, kind: str
) -> None:
    """The build renames the program's functions: natively the link failed ("undefined
    reference to `twice'"), the interpreter could not load the code ("undefined symbol"),
    from an object file and a shared library alike."""
    program = dhir.parse_string(CALLING_BACK.replace("NAME", "twice"), "back.mlir")
    refused = rf"back.mlir:1:1: error: .*libapply{kind} calls `twice`, which is"
    with pytest.raises(DhirError, match=refused):
        dhir.run(program, np.zeros(4), link=[_apply(tmp_path, "twice", kind)], backend=backend)


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_a_shared_library_may_call_what_a_library_it_loads_defines(
    tmp_path: Path, backend: str
) -> None:
    """libapply.so's `twice` is libtwice.so's, which it loads: the program's @twice,
    renamed, takes nothing's place, and each caller gets its own."""
    (tmp_path / "twice.c").write_text("double twice(double x) { return 7 * x + 1; }\n")
    twice = tmp_path / "libtwice.so"
    subprocess.run(["clang-22", "-fPIC", "-shared", tmp_path / "twice.c", "-o", twice], check=True)
    flags = [f"-L{tmp_path}", "-ltwice", f"-Wl,-rpath,{tmp_path}"]
    program = dhir.parse_string(CALLING_BACK.replace("NAME", "twice"), "back.mlir")
    link = [_apply(tmp_path, "twice", ".so", flags)]
    got = dhir.run(program, np.zeros(4), link=link, backend=backend)
    assert list(got[0][:2]) == [4.5, 3.5]


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
def test_a_function_named_as_libms_is_the_programs_and_c_keeps_libms(
    tmp_path: Path, backend: str
) -> None:
    """The program's @exp is called by the program, libm's by the C it links."""
    program = dhir.parse_string(CALLING_BACK.replace("NAME", "exp"), "exp.mlir")
    got = dhir.run(program, np.zeros(4), ranks=2, link=[_apply(tmp_path, "exp")], backend=backend)
    assert list(got[0][:2]) == [math.exp(0.5), 3.5]


@pytest.mark.mlir
@pytest.mark.mpi
def test_a_function_whose_name_ends_in_c_builds() -> None:
    """`@calc` is built as `@"dhir_user$calc"`, whose `c"` was taken for the start of an
    LLVM string: the entry after it kept the name `main`, which the link found twice."""
    calc = f"func.func @calc() -> i32 {{\n  {SEVEN}\n}}"
    program = TASK_CALLING.replace("FUNCTION", calc).replace(
        "CALL", "%r = func.call @calc() : () -> i32"
    )
    assert dhir.run(program, np.zeros(4, np.int32))[0][0] == 7
