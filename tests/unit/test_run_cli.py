"""`dhir run` and `dhir compile` as users run them."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dhir as dhir_api
from dhir import DhirError

EXAMPLES = Path(__file__).parents[2] / "examples"
needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def dhir(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.fixture
def call_inputs(tmp_path: Path) -> list[str]:
    m = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.save(tmp_path / "m.npy", m)
    np.save(tmp_path / "out.npy", np.zeros(4, np.float32))
    return [
        "--input",
        str(tmp_path / "m.npy"),
        "--input",
        str(tmp_path / "out.npy"),
        "--input",
        "f32=2.0",
    ]


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_run_writes_and_prints_results(
    tmp_path: Path, call_inputs: list[str], backend: str
) -> None:
    out = tmp_path / "results"
    result = dhir(
        "run",
        str(EXAMPLES / "call.mlir"),
        "-n",
        "2",
        "--backend",
        backend,
        *call_inputs,
        "--output-dir",
        str(out),
        "--print",
    )
    assert result.returncode == 0, result.stderr
    m = np.arange(16, dtype=np.float32).reshape(4, 4) * 2
    np.testing.assert_array_equal(np.load(out / "arg0.npy"), m)
    np.testing.assert_array_equal(np.load(out / "arg1.npy"), m.sum(axis=1))
    assert not (out / "arg2.npy").exists()  # scalars are not written
    assert "arg1: memref<4xf32> =" in result.stdout


@needs_llvm
def test_compile_then_run_the_executable(tmp_path: Path, call_inputs: list[str]) -> None:
    exe = tmp_path / "call.exe"
    fresh_cache = {"DHIR_CACHE_DIR": str(tmp_path / "cache")}
    built = dhir(
        "compile",
        str(EXAMPLES / "call.mlir"),
        "-n",
        "3",
        "-o",
        str(exe),
        "--timing",
        env=fresh_cache,
    )
    assert built.returncode == 0, built.stderr
    for stage in ("parse + verify", "dhir passes", "mlir-opt", "mlir-translate", "Total"):
        assert stage in built.stderr
    ran = dhir("run", str(exe), *call_inputs, "--print")
    assert ran.returncode == 0, ran.stderr
    assert "[ 12.  44.  76. 108.]" in ran.stdout  # row sums of 2 * arange(16)
    wrong = dhir("run", str(exe), "-n", "2", *call_inputs)
    assert wrong.returncode == 1 and "built for 3 ranks" in wrong.stderr
    wrong = dhir("run", str(exe), "--backend", "interp", *call_inputs)
    assert wrong.returncode == 1 and "the interpreter runs the .mlir program" in wrong.stderr
    # What the build fixed is refused, not ignored; a value equal to the built one is fine.
    refused = {
        ("--entry", "foo"): "built to run @main; rebuild it with dhir compile --entry foo",
        ("--mpi", "openmpi"): "built with mpich; rebuild it with dhir compile --mpi openmpi",
        ("--no-codedrop",): "--no-codedrop cannot change an executable",
        ("--gpu-fallback", "cpu"): "--gpu-fallback cannot change an executable",
        ("--profile", "p.json"): "built without timers; run the .mlir program with --profile",
    }
    for option, message in refused.items():
        wrong = dhir("run", str(exe), *option, *call_inputs)
        assert wrong.returncode == 1 and message in wrong.stderr, (option, wrong.stderr)
    assert "give them to dhir compile" not in dhir("run", str(exe), "--profile", "p").stderr
    same = dhir("run", str(exe), "--mpi", "mpich", "--entry", "main", "-n", "3", *call_inputs)
    assert same.returncode == 0, same.stderr


def test_timing_counts_the_interpreter(call_inputs: list[str]) -> None:
    program = str(EXAMPLES / "call.mlir")
    result = dhir("run", program, "--backend", "interp", *call_inputs, "--timing", "-q")
    assert result.returncode == 0, result.stderr
    assert "parse + verify" in result.stderr and "the interpreter" in result.stderr


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([], "takes 3 arguments"),
        (["--input", "{m}", "--input", "{out}", "--input", "i32=2"], "must be f32=VALUE"),
        (["--input", "{m}", "--input", "{out}", "--input", "f32=abc"], "'abc' is not an f32"),
        (
            ["--input", "{out}", "--input", "{out}", "--input", "f32=1"],
            "needs an array of shape (4, 4)",
        ),
        (["--input", "/nonexistent.npy", "--input", "{out}", "--input", "f32=1"], "cannot read"),
    ],
)
def test_bad_inputs_are_clear_errors(
    tmp_path: Path, call_inputs: list[str], inputs: list[str], message: str
) -> None:
    paths = {"m": call_inputs[1], "out": call_inputs[3]}
    args = [a.format(**paths) for a in inputs]
    result = dhir("run", str(EXAMPLES / "call.mlir"), "--backend", "interp", *args)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--placement", "heft"], "--placement needs --backend native"),
        (["--placement", "heft", "--costs", "c.json"], "--placement and --costs need --backend"),
        (["--trace", "t.json"], "--trace records what MPI ranks did; use it with --backend"),
        (["--keep-build", "kb"], "--keep-build keeps what the build made, and the interpreter"),
        (["--profile", "p.json"], "--profile times tasks on MPI ranks; use it with --backend"),
        # These ran as if not given.
        (["--threads", "2"], "--threads sets the OpenMP threads of a rank, and the interpreter"),
        (["--cpu", "native"], "--cpu chooses the CPU to build for, and the interpreter builds"),
        (["--mpi", "mpich"], "--mpi chooses the MPI to run with, and the interpreter runs none"),
        (["--gpu-fallback", "cpu"], "--gpu-fallback chooses where GPU tasks run, and the"),
        (["--target", "cpu"], "--target binds the tasks CodeDrop makes, and the interpreter"),
    ],
)
def test_the_interpreter_refuses_native_options_as_a_malformed_command_line(
    option: list[str], message: str
) -> None:
    result = dhir("run", "never-read.mlir", "--backend", "interp", *option)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_unknown_entry_and_bad_program(tmp_path: Path) -> None:
    result = dhir("run", str(EXAMPLES / "call.mlir"), "--entry", "nope", "--backend", "interp")
    assert result.returncode == 1 and "no function @nope" in result.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        'func.func @main() {\n  dhir.schedule {\n    %t = dhir.target {arch = "z80"}\n  }\n  return\n}\n'
    )
    result = dhir("run", str(bad))
    assert result.returncode == 1 and f"{bad}:3:10: error: unknown arch" in result.stderr


def test_a_program_of_no_function_is_told_to_write_one(tmp_path: Path) -> None:
    """An empty file said "defines no functions (choose one with --entry ...)": there was
    none to choose."""
    empty = tmp_path / "empty.mlir"
    empty.write_text("// nothing yet\n")
    result = dhir("run", str(empty), "--backend", "interp")
    assert result.returncode == 1
    assert "no function @main to run; the module defines no function with a body" in result.stderr
    assert "(write one: func.func @main(...) { ... })" in result.stderr
    assert "--entry" not in result.stderr
    declared = "func.func private @f()\n"  # a declaration is no function to run
    with pytest.raises(DhirError, match=r"defines no function with a body \(write one"):
        dhir_api.run(declared, entry="g", backend="interp")


@needs_llvm
def test_a_rank_that_crashes_is_reported(tmp_path: Path) -> None:
    program = tmp_path / "crash.mlir"
    program.write_text(
        """
func.func private @abort()
func.func @main(%a: memref<2xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      func.call @abort() : () -> ()
    }
  }
  return
}
"""
    )
    np.save(tmp_path / "a.npy", np.zeros(2, np.int32))
    result = dhir(
        "run", str(program), "-n", "2", "--input", str(tmp_path / "a.npy"), "--timeout", "60"
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "error" in result.stderr


@pytest.mark.parametrize(
    "sidecar",
    [
        "not json",
        '{"entry": "main", "ranks": "two", "mpi": "mpich", "args": []}',
        '{"entry": "main", "ranks": 2, "mpi": "lam", "args": []}',
        '{"entry": "main", "ranks": 2, "mpi": "mpich", "args": [{"type": "f32"}]}',
        '{"entry": "main", "ranks": 2, "mpi": "mpich"}',
        '{"entry": "main", "ranks": 2, "mpi": "mpich", "args": [], "report": ["a", 1]}',
    ],
)
def test_a_damaged_executable_description_is_a_clear_error(tmp_path: Path, sidecar: str) -> None:
    exe = tmp_path / "prog"
    shutil.copy(sys.executable, exe)  # any ELF file
    (tmp_path / "prog.dhir.json").write_text(sidecar)
    result = dhir("run", str(exe))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "is not a description dhir compile wrote" in result.stderr


def test_a_damaged_description_quotes_its_values_as_json(tmp_path: Path) -> None:
    """Not as Python prints them: `ranks True, mpi None`."""
    exe = tmp_path / "prog"
    shutil.copy(sys.executable, exe)
    (tmp_path / "prog.dhir.json").write_text(
        '{"entry": "main", "ranks": true, "mpi": null, "args": []}'
    )
    result = dhir("run", str(exe))
    assert result.returncode == 1, result.stderr
    assert "(ranks true, mpi null)" in result.stderr


ABORTS = """
func.func private @abort()
func.func @main(%m: memref<4x4xf32>, %out: memref<4xf32>, %s: f32) {
  dhir.schedule %m, %out {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %m, %out {
      func.call @abort() : () -> ()
    }
  }
  return
}
"""


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_failed_run_leaves_no_earlier_results(
    tmp_path: Path, call_inputs: list[str], backend: str
) -> None:
    out = tmp_path / "results"
    common = ["-n", "2", "--backend", backend, *call_inputs, "--output-dir", str(out)]
    first = dhir("run", str(EXAMPLES / "call.mlir"), *common)
    assert first.returncode == 0, first.stderr
    assert (out / "arg0.npy").exists() and (out / "arg1.npy").exists()
    program = tmp_path / "aborts.mlir"
    program.write_text(ABORTS)
    failed = dhir("run", str(program), *common, "--timeout", "60")
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr and "error" in failed.stderr
    # The interpreter resolves libc's names, as native code does, and calls abort() in a
    # process of its own, whose death it reports.
    assert backend == "native" or "call of @abort in task t" in failed.stderr
    assert backend == "native" or "died of SIGABRT (signal 6)" in failed.stderr
    assert sorted(p.name for p in out.iterdir()) == []


@needs_llvm
@pytest.mark.parametrize(
    "where",
    ["in-proc", "a-file", "under-a-file", "a-file-in-it", "read-only", "a-link-loop", "a-link"],
)
def test_an_unwritable_cache_directory_is_a_clear_error(
    tmp_path: Path, call_inputs: list[str], where: str
) -> None:
    cache = {
        "in-proc": Path("/proc/dhir-cache"),  # cannot be made, even by root
        "a-file": tmp_path / "file",
        "under-a-file": tmp_path / "file" / "cache",
        "a-file-in-it": tmp_path / "cache",  # where the build puts its modules' objects
        "read-only": tmp_path / "cache",
        "a-link-loop": tmp_path / "loop",
        "a-link": tmp_path / "link",  # to a folder gone
    }[where]
    (tmp_path / "file").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    if where == "a-file-in-it":
        cache.mkdir()
        (cache / "modules").write_text("")
    if where == "read-only":
        cache.mkdir(mode=0o500)
        # Root writes to a read-only directory, but not to an immutable one.
        if os.geteuid() == 0 and subprocess.run(["chattr", "+i", cache]).returncode != 0:
            pytest.skip("root writes to a read-only directory, and chattr +i failed")
    try:
        result = dhir(
            "run", str(EXAMPLES / "call.mlir"), *call_inputs, env={"DHIR_CACHE_DIR": str(cache)}
        )
    finally:
        if where == "read-only" and os.geteuid() == 0:
            subprocess.run(["chattr", "-i", cache])
    assert result.returncode == 1, result.stderr
    assert f"cannot write to dhir's cache directory {cache}" in result.stderr
    assert "choose another with DHIR_CACHE_DIR=DIR" in result.stderr
    assert "internal error" not in result.stderr
    if where.startswith("a-link"):  # not mkdir's "File exists"
        assert f"{cache}: it is a symbolic link to nothing (a loop, or a path gone);" in (
            result.stderr
        )
    if where == "a-file":
        assert f"{cache}: it is a file, not a directory;" in result.stderr


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_results_are_named_after_the_arguments_and_a_reused_directory_is_cleaned(
    tmp_path: Path, call_inputs: list[str], backend: str
) -> None:
    """examples/call.mlir's memrefs are %m and %out: m.npy and out.npy beside arg0.npy and
    arg1.npy. A second program run into the same directory leaves none of the first's."""
    out = tmp_path / "results"
    first = dhir("run", str(EXAMPLES / "call.mlir"), "--backend", backend, *call_inputs,
                 "--output-dir", str(out))  # fmt: skip
    assert first.returncode == 0, first.stderr
    for k, name in ((0, "m"), (1, "out")):
        np.testing.assert_array_equal(np.load(out / f"{name}.npy"), np.load(out / f"arg{k}.npy"))
    program = tmp_path / "one.mlir"
    program.write_text("func.func @main(%v: memref<4xf32>) {\n  return\n}\n")
    np.save(tmp_path / "v.npy", np.ones(4, np.float32))
    second = dhir("run", str(program), "--backend", backend, "--input", str(tmp_path / "v.npy"),
                  "--output-dir", str(out))  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dhir-results", "arg0.npy", "v.npy"]


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_result_of_the_last_run_given_as_an_input_is_kept(
    tmp_path: Path, call_inputs: list[str], backend: str
) -> None:
    """Runs chained through one directory: the next program takes the last one's out.npy
    as its input. The last run's other results go, but not that file (it was removed
    as a leftover before the run, the user's data lost)."""
    out = tmp_path / "results"
    first = dhir("run", str(EXAMPLES / "call.mlir"), "--backend", backend, *call_inputs,
                 "--output-dir", str(out))  # fmt: skip
    assert first.returncode == 0, first.stderr
    kept = np.load(out / "out.npy")
    program = tmp_path / "one.mlir"
    program.write_text("func.func @main(%v: memref<4xf32>) {\n  return\n}\n")
    second = dhir("run", str(program), "--backend", backend, "--input", str(out / "out.npy"),
                  "--output-dir", str(out))  # fmt: skip
    assert second.returncode == 0, second.stderr
    names = [".dhir-results", "arg0.npy", "out.npy", "v.npy"]
    assert sorted(p.name for p in out.iterdir()) == names
    np.testing.assert_array_equal(np.load(out / "out.npy"), kept)
    np.testing.assert_array_equal(np.load(out / "v.npy"), kept)
    # Not listed as this run's, so the next run into the directory keeps it too.
    third = dhir("run", str(program), "--backend", backend, "--input", str(out / "v.npy"),
                 "--output-dir", str(tmp_path / "other"))  # fmt: skip
    assert third.returncode == 0, third.stderr
    listed = (out / ".dhir-results").read_text().splitlines()
    assert [line.split("\t")[0] for line in listed] == ["arg0.npy", "v.npy"]


def test_a_misspelt_dhir_io_is_an_error_in_any_program(tmp_path: Path) -> None:
    """DHIR_IO was checked only where a rank read a file by rows: a dynamic shape is
    held whole, and `DHIR_IO=rank-0` went unsaid. Then only by the program as it
    started, after the whole build: it is refused first, as a bad option is."""
    program = tmp_path / "whole.mlir"
    program.write_text("func.func @main(%v: memref<?xf32>) {\n  return\n}\n")
    np.save(tmp_path / "v.npy", np.ones(4, np.float32))
    cache = tmp_path / "cache"
    result = dhir("run", str(program), "-n", "2", "--input", str(tmp_path / "v.npy"),
                  env={"DHIR_IO": "rank-0", "DHIR_CACHE_DIR": str(cache)})  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "DHIR_IO is 'rank-0'; it takes rank0" in result.stderr
    assert not cache.exists() or not any(cache.rglob("program")), "it was built first"
    # The interpreter reads no file by rows: DHIR_IO is no concern of its.
    interp = dhir("run", str(program), "--backend", "interp", "--input",
                  str(tmp_path / "v.npy"), env={"DHIR_IO": "rank-0"})  # fmt: skip
    assert interp.returncode == 0, interp.stderr


@pytest.mark.parametrize("chunk", ["0", "abc", "-4096"])
def test_a_bad_message_chunk_size_is_refused_before_the_build(tmp_path: Path, chunk: str) -> None:
    """DHIR_MESSAGE_CHUNK_BYTES was read only by rank 0 of the program as it started,
    after the whole build: it is refused first, as a misspelt DHIR_IO is."""
    program = tmp_path / "whole.mlir"
    program.write_text("func.func @main(%v: memref<?xf32>) {\n  return\n}\n")
    np.save(tmp_path / "v.npy", np.ones(4, np.float32))
    cache = tmp_path / "cache"
    result = dhir("run", str(program), "-n", "2", "--input", str(tmp_path / "v.npy"),
                  env={"DHIR_MESSAGE_CHUNK_BYTES": chunk, "DHIR_CACHE_DIR": str(cache)})  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"DHIR_MESSAGE_CHUNK_BYTES: '{chunk}' is not an integer in [1, 2147483647]" in (
        result.stderr
    )
    assert not cache.exists() or not any(cache.rglob("program")), "it was built first"


@needs_llvm
def test_a_misspelt_dhir_io_is_refused_before_an_executable_runs(tmp_path: Path) -> None:
    """On every path that launches one: the cached path (no xDSL) and the full one."""
    exe = tmp_path / "call"
    built = dhir("compile", str(EXAMPLES / "call.mlir"), "-o", str(exe))
    assert built.returncode == 0, built.stderr
    np.save(tmp_path / "m.npy", np.zeros((4, 4), np.float32))
    np.save(tmp_path / "o.npy", np.zeros(4, np.float32))
    inputs = ["--input", str(tmp_path / "m.npy"), "--input", str(tmp_path / "o.npy")]
    for more in ([], ["--timing"]):  # --timing takes the full path
        result = dhir("run", str(exe), *inputs, "--input", "f32=2.0", *more,
                      env={"DHIR_IO": "Rank0"})  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert "DHIR_IO is 'Rank0'; it takes rank0" in result.stderr


def test_a_run_that_keeps_no_results_says_so(tmp_path: Path, call_inputs: list[str]) -> None:
    result = dhir("run", str(EXAMPLES / "call.mlir"), "--backend", "interp", *call_inputs)
    assert result.returncode == 0, result.stderr
    assert "the results were not kept: --output-dir DIR saves them" in result.stderr


@pytest.mark.parametrize(
    ("header", "message"),
    [
        # 2^40 floats claimed, 16 bytes given: NumPy would try to allocate 4 TiB.
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", "fewer bytes"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (-20,, }", "cannot read"),
    ],
)
def test_a_npy_file_with_a_lying_or_broken_header_is_an_error(
    tmp_path: Path, header: str, message: str
) -> None:
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main(%x: memref<?xf32>) {\n  return\n}\n")
    text = header.ljust(117) + "\n"
    npy = tmp_path / "x.npy"
    npy.write_bytes(
        b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode() + bytes(16)
    )
    result = dhir("run", str(program), "--backend", "interp", "--input", str(npy))
    assert result.returncode == 1 and message in result.stderr
    assert "internal error" not in result.stderr


def test_compile_will_not_overwrite_its_program_or_write_into_a_folder(tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text((EXAMPLES / "call.mlir").read_text())
    result = dhir("compile", str(program), "-n", "2", "-o", str(program))
    assert result.returncode == 1 and "is the program itself" in result.stderr
    assert program.read_text() == (EXAMPLES / "call.mlir").read_text()
    result = dhir("compile", str(program), "-n", "2", "-o", str(tmp_path))
    assert result.returncode == 1 and "is a directory" in result.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--output-dir", "{dir}"], "--output-dir {dir} (its m.npy) would be written over "
         "--input {dir}/m.npy"),
        (["--trace", "{dir}/m.npy"], "--trace {dir}/m.npy would be written over --input"),
        (["--trace", "{dir}/t.json", "--profile", "{dir}/t.json"],
         "--profile {dir}/t.json would be written over --trace {dir}/t.json"),
    ],
)  # fmt: skip
def test_results_trace_and_profile_are_never_written_over_inputs_or_each_other(
    tmp_path: Path, call_inputs: list[str], options: list[str], message: str
) -> None:
    """Results are named after the arguments, as inputs often are: --output-dir beside
    the inputs would replace them (and a second run would read the results)."""
    before = [(tmp_path / name).read_bytes() for name in ("m.npy", "out.npy")]
    given = [option.format(dir=tmp_path) for option in options]
    result = dhir("run", str(EXAMPLES / "call.mlir"), *call_inputs, *given)
    assert result.returncode == 1, result.stderr
    assert message.format(dir=tmp_path) in result.stderr
    assert [(tmp_path / name).read_bytes() for name in ("m.npy", "out.npy")] == before


def test_a_scalar_past_the_largest_f64_is_an_error(tmp_path: Path) -> None:
    """float('1e309') is inf; only inf spelt out is."""
    program = tmp_path / "p.mlir"
    program.write_text(
        "func.func @main(%x: f64, %o: memref<1xf64>) {\n  %c0 = arith.constant 0 : index\n"
        "  memref.store %x, %o[%c0] : memref<1xf64>\n  return\n}\n"
    )
    out = tmp_path / "o.npy"
    np.save(out, np.zeros(1))
    result = dhir(
        "run", str(program), "--backend", "interp", "--input", "f64=1e309", "--input", str(out)
    )
    assert result.returncode == 1 and "'1e309' is not an f64" in result.stderr
    result = dhir(
        "run",
        str(program),
        "--backend",
        "interp",
        "--input",
        "f64=-inf",
        "--input",
        str(out),
        "--print",
    )
    assert result.returncode == 0 and "-inf" in result.stdout


@pytest.mark.parametrize("option", [["--placement", "heft"], ["--costs", "/nonexistent.json"]])
def test_placement_options_with_the_interpreter_are_errors(option: list[str]) -> None:
    result = dhir("run", str(EXAMPLES / "call.mlir"), "--backend", "interp", *option)
    assert result.returncode == 2 and "the interpreter places no task" in result.stderr


def test_an_executable_is_never_installed_beside_an_old_description(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compile that could not replace the description replaced the executable anyway:
    `dhir run` then read the new program's results with the old types (exit 0)."""
    from dhir.cli import commands

    new, exe = tmp_path / "new", tmp_path / "prog"
    new.write_bytes(b"new executable")
    exe.write_bytes(b"old executable")
    beside = tmp_path / "prog.dhir.json"
    beside.write_text('{"old": true}')
    real_unlink = Path.unlink

    def unlink(path: Path, missing_ok: bool = False) -> None:
        if path == beside:
            raise PermissionError(1, "Operation not permitted", str(path))
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(DhirError, match="cannot write .*prog.dhir.json: Operation not permitted"):
        commands._install(new, exe, {"new": True})
    assert exe.read_bytes() == b"old executable"
    monkeypatch.setattr(Path, "unlink", real_unlink)
    commands._install(new, exe, {"new": True})
    assert exe.read_bytes() == b"new executable" and beside.read_text() == '{"new": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "prog", "prog.dhir.json"]


def test_an_executable_into_a_read_only_folder_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dhir compile -o` into a read-only folder built the whole program, then ended in an
    internal error (exit 70): the clean-up's unlink of its temporary file failed too."""
    import errno

    from dhir.cli import commands

    new, exe = tmp_path / "new", tmp_path / "prog"
    new.write_bytes(b"new executable")

    def unlink(path: Path, missing_ok: bool = False) -> None:  # what a read-only mount says
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    with monkeypatch.context() as patched:
        patched.setattr(Path, "unlink", unlink)
        with pytest.raises(DhirError, match="cannot write .*prog.dhir.json: Read-only file"):
            commands._install(new, exe, {"new": True})
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main() {\n  return\n}\n")
    real_access = os.access
    writable = {tmp_path / "ro": False}
    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(os, "access", lambda p, m: writable.get(Path(p), real_access(p, m)))
    with pytest.raises(DhirError, match=f"cannot write -o {tmp_path}/ro/x: the folder .* is not"):
        commands._check_output(program, tmp_path / "ro" / "x")  # before the build
    commands._check_output(program, tmp_path / "x")


@needs_llvm
def test_a_failed_run_leaves_no_earlier_trace_or_profile(
    tmp_path: Path, call_inputs: list[str]
) -> None:
    """An earlier run's --trace and --profile files stayed, looking like this run's; the
    trace now is what the ranks recorded up to the failure, marked partial, and the error
    says so."""
    program = tmp_path / "aborts.mlir"
    program.write_text(ABORTS)
    trace, profile = tmp_path / "t.json", tmp_path / "p.json"
    trace.write_text("{}")
    profile.write_text("{}")
    failed = dhir("run", str(program), "-n", "2", *call_inputs, "--trace", str(trace),
                  "--profile", str(profile), "--timeout", "60")  # fmt: skip
    assert failed.returncode == 1, failed.stderr
    assert not profile.exists()
    # Rank 0 crashed in task t: its events up to the crash, t's bar ending there.
    data = json.loads(trace.read_text())
    assert data["otherData"]["partial"].startswith("the run failed (a rank failed)")
    assert "rank 0 (it crashed)" in data["otherData"]["partial"]
    assert ("t", 0) in {(e["name"], e["pid"]) for e in data["traceEvents"] if e["ph"] == "X"}
    assert f"note: a partial trace was written to {trace}: the run failed" in failed.stderr


def test_a_scalar_given_for_a_memref_says_so(tmp_path: Path, call_inputs: list[str]) -> None:
    """`--input f32=2.0` where a memref is due read as a missing file: "cannot read
    'f32=2.0' as a .npy file: No such file or directory"."""
    program = str(EXAMPLES / "call.mlir")
    result = dhir("run", program, "--backend", "interp", "--input", "f32=2.0", *call_inputs[2:])
    assert result.returncode == 1
    wanted = (
        "error: --input for argument #0 (memref<4x4xf32>): 'f32=2.0' is a scalar's "
        "TYPE=VALUE, but the argument is a memref: give a .npy file of its array"
    )
    assert wanted in result.stderr
    (tmp_path / "f32=2.0").write_bytes((tmp_path / "m.npy").read_bytes())  # a file so named
    named = str(tmp_path / "f32=2.0")
    result = dhir("run", program, "--backend", "interp", "--input", named, *call_inputs[2:])
    assert result.returncode == 0, result.stderr


def test_file_errors_say_what_is_wrong_in_words(tmp_path: Path, call_inputs: list[str]) -> None:
    """Not Python's "[Errno 17] File exists: 'x'" and the like."""
    from dhir.toolchain import trace
    from dhir.toolchain.build import keep_build
    from dhir.toolchain.launch import _ranks  # pyright: ignore[reportPrivateUsage]

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    program = str(EXAMPLES / "call.mlir")
    result = dhir("run", program, "--backend", "interp", *call_inputs, "--output-dir", str(a_file))
    assert result.returncode == 1
    assert f"the output directory {a_file} is a file; name a directory" in result.stderr
    missing = ["--input", "missing.npy", *call_inputs[2:]]
    result = dhir("run", program, "--backend", "interp", *missing)
    assert "cannot read 'missing.npy' as a .npy file: No such file or directory" in result.stderr
    with pytest.raises(DhirError, match="in .*a_file: it is a file, not a directory$"):
        keep_build(a_file, a_file)
    with pytest.raises(DhirError, match=f"cannot write the trace {tmp_path}: Is a directory$"):
        trace.write_chrome_trace(tmp_path, 0, tmp_path)
    assert (_ranks(1), _ranks(2)) == ("1 rank", "2 ranks")


def test_a_scalar_type_takes_the_article_it_is_said_with() -> None:
    from dhir.cli.arguments import _article  # pyright: ignore[reportPrivateUsage]

    words = {"index": "an", "i8": "an", "f32": "an", "i1": "an", "bf16": "a"}
    assert {word: _article(word) for word in words} == words


def test_a_process_whose_name_is_not_utf8_is_seen_alive(tmp_path: Path) -> None:
    """/proc/PID/stat names the executable: `dhir run` of an executable whose file name
    was not UTF-8 stopped with an internal error (UnicodeDecodeError) while it watched
    the ranks."""
    from dhir.toolchain.launch import _alive  # pyright: ignore[reportPrivateUsage]

    sleep = shutil.which("sleep")
    assert sleep is not None
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/sl\xff"))
    odd.symlink_to(sleep)
    process = subprocess.Popen([odd, "30"])
    try:
        assert _alive(process.pid)
    finally:
        process.kill()
        process.wait()


def _build_lines(stderr: str) -> list[str]:
    """--timing's lines about the build (not each rank's traffic)."""
    tags = ("split: ", "optimizer: ", "time tiles: ", "memory: ", "in order: ")
    return [line.strip() for line in stderr.splitlines() if line.strip().startswith(tags)]


@needs_llvm
def test_an_executable_s_timing_shows_what_its_build_did(tmp_path: Path) -> None:
    gemm = EXAMPLES / "plain_gemm.mlir"
    for name in "ABC":
        np.save(tmp_path / f"{name}.npy", np.ones((64, 64)))
    inputs = [f"--input={tmp_path / name}.npy" for name in "ABC"]
    direct = dhir("run", str(gemm), "-n", "2", *inputs, "--timing")
    assert direct.returncode == 0, direct.stderr
    want = _build_lines(direct.stderr)
    assert any(line.startswith("optimizer: ") for line in want), want
    assert any(line.startswith("split: ") for line in want), want
    exe = tmp_path / "gemm"
    built = dhir("compile", str(gemm), "-n", "2", "-o", str(exe))  # no --timing
    assert built.returncode == 0, built.stderr
    ran = dhir("run", str(exe), *inputs, "--timing")
    assert ran.returncode == 0, ran.stderr
    assert _build_lines(ran.stderr) == want
    assert "sent" in ran.stderr.splitlines()[-1]  # the run's own lines come after
    # An executable whose description records no report says so, and how to see it.
    description = tmp_path / "gemm.dhir.json"
    older = json.loads(description.read_text())
    del older["report"]
    description.write_text(json.dumps(older))
    ran = dhir("run", str(exe), *inputs, "--timing")
    assert ran.returncode == 0, ran.stderr
    assert _build_lines(ran.stderr) == []
    assert "the build's report (split:, optimizer:, time tiles: lines) is not recorded" in (
        ran.stderr
    )
    assert "`dhir compile --timing` prints it" in ran.stderr


HANGS = """
func.func private @sleep(i32) -> i32
func.func @main(%m: memref<4x4xf32>, %out: memref<4xf32>, %s: f32) {
  dhir.schedule %m, %out {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %m, %out {
      %c = arith.constant 100 : i32
      %r = func.call @sleep(%c) : (i32) -> i32
    }
  }
  return
}
"""


@needs_llvm
def test_a_run_that_times_out_leaves_a_partial_trace(
    tmp_path: Path, call_inputs: list[str]
) -> None:
    """The trace a user debugging a hang needs: every rank's events up to the timeout, the
    task and the MPI call under way ended there, marked partial in the file and by
    dhir gantt."""
    program = tmp_path / "hangs.mlir"
    program.write_text(HANGS)
    trace = tmp_path / "t.json"
    failed = dhir("run", str(program), "-n", "2", *call_inputs, "--trace", str(trace),
                  "--timeout", "5")  # fmt: skip
    assert failed.returncode == 1 and "timed out after 5 s" in failed.stderr, failed.stderr
    assert f"note: a partial trace was written to {trace}" in failed.stderr
    data = json.loads(trace.read_text())
    partial = data["otherData"]["partial"]
    assert partial.startswith("the run failed (timed out)"), partial
    assert "rank 0 (stopped at the timeout), rank 1 (stopped at the timeout)" in partial
    bars = {(e["name"], e["pid"]): e for e in data["traceEvents"] if e["ph"] == "X"}
    assert bars[("t", 0)]["dur"] > 1e6  # the sleeping task, from its start to the timeout
    waits = [e for (name, pid), e in bars.items() if pid == 1 and name == "barrier"]
    assert any(e["dur"] > 1e6 for e in waits)  # rank 1 waiting for rank 0
    drawn = dhir("gantt", str(trace), "-o", str(tmp_path / "chart.svg"))
    assert drawn.returncode == 0, drawn.stderr
    assert f"dhir gantt: {trace} is a partial trace: the run failed (timed out)" in drawn.stderr
    assert "(partial: the run failed)" in (tmp_path / "chart.svg").read_text()


def test_dhir_run_finds_a_memref_entry_s_signature_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: once to read the inputs and once more to check them, each walking the
    entry; the runner's later one reuses check_runnable's bounds."""
    import dhir.cli.commands as commands
    from dhir.cli.main import main

    program = tmp_path / "p.mlir"
    program.write_text("func.func @main(%a: memref<4xf32>) {\n  return\n}\n")
    given = tmp_path / "a.npy"
    np.save(given, np.ones(4, np.float32))
    found: list[str] = []
    original = commands.entry_signature

    def counted(*args: object, **kwargs: object) -> object:
        found.append(str(args[1]))
        return original(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(commands, "entry_signature", counted)
    assert main(["run", str(program), "--backend", "interp", "--input", str(given)]) == 0
    assert found == ["main"]
