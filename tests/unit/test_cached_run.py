"""`dhir run`'s cached path (dhir/cli/cached_run.py): a program run again with the same
options launches its recorded executable without loading xDSL, and anything that could
change the build takes the full path."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dhir.cli import cached_run
from dhir.toolchain import symbols
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tools import whole_elf

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """\
func.func @main(%a: memref<8xf64>, %b: memref<8xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %k = arith.constant FACTOR : f64
      scf.for %i = %c0 to %c8 step %c1 {
        %x = memref.load %a[%i] : memref<8xf64>
        %y = arith.mulf %x, %k : f64
        memref.store %y, %b[%i] : memref<8xf64>
      }
    }
  }
  return
}
"""
# Runs `dhir run` in a fresh interpreter and says whether it loaded NumPy and xDSL.
_DRIVER = """
import sys
from dhir.cli.main import main
status = main(sys.argv[1:])
print("NUMPY" if "numpy" in sys.modules else "NO-NUMPY", file=sys.stderr)
print("XDSL" if "xdsl" in sys.modules else "NO-XDSL", file=sys.stderr)
sys.exit(status)
"""

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def dhir_run(cache: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`dhir run ARGS...`, and whether it took the cached path (xDSL never loaded)."""
    env = dict(os.environ, DHIR_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, "run", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    return done, done.stderr.rstrip().endswith("NO-XDSL")


def program(tmp_path: Path, factor: str = "2.0") -> Path:
    path = tmp_path / "scale.mlir"
    path.write_text(PROGRAM.replace("FACTOR", factor))
    return path


def inputs(tmp_path: Path, seed: int) -> tuple[list[str], np.ndarray]:
    a = np.random.default_rng(seed).random(8)
    np.save(tmp_path / f"a{seed}.npy", a)
    np.save(tmp_path / "b.npy", np.zeros(8))
    return ["--input", str(tmp_path / f"a{seed}.npy"), "--input", str(tmp_path / "b.npy")], a


@needs_llvm
@pytest.mark.mpi
def test_a_second_run_takes_the_cached_path_with_new_inputs(cache: Path, tmp_path: Path) -> None:
    path = program(tmp_path)
    given, a = inputs(tmp_path, 1)
    first, cached = dhir_run(
        cache, str(path), "-n", "2", *given, "--output-dir", str(tmp_path / "o1")
    )
    assert first.returncode == 0, first.stderr
    assert not cached
    given, a = inputs(tmp_path, 2)  # other inputs and outputs: still the same build
    second, cached = dhir_run(
        cache, str(path), "-n", "2", *given, "--output-dir", str(tmp_path / "o2"), "-q"
    )
    assert second.returncode == 0, second.stderr
    assert cached and "NO-NUMPY" in second.stderr  # .npy files in and out without NumPy
    np.testing.assert_array_equal(np.load(tmp_path / "o2" / "arg1.npy"), a * 2.0)
    np.testing.assert_array_equal(np.load(tmp_path / "o2" / "b.npy"), a * 2.0)
    printed, cached = dhir_run(cache, str(path), "-n", "2", *given, "--print")
    assert cached and "arg1: memref<8xf64> =" in printed.stdout
    np.save(tmp_path / "big.npy", a.astype(">f8"))  # converted: NumPy's part of this path
    given[1] = str(tmp_path / "big.npy")
    third, cached = dhir_run(
        cache, str(path), "-n", "2", *given, "--output-dir", str(tmp_path / "o3")
    )
    assert third.returncode == 0 and cached and "NO-NUMPY" not in third.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o3" / "arg1.npy"), a * 2.0)
    # Beside the inputs, result b.npy would replace input b.npy: refused on this path too.
    fourth, cached = dhir_run(cache, str(path), "-n", "2", *given, "--output-dir", str(tmp_path))
    assert fourth.returncode == 1 and cached and "would be written over --input" in fourth.stderr


@needs_llvm
@pytest.mark.mpi
def test_a_cached_run_keeps_its_input_that_the_last_run_wrote(cache: Path, tmp_path: Path) -> None:
    """A cached run removes the last run's results from its output directory before it
    starts, but not one it takes as an input."""
    one = tmp_path / "one.mlir"
    one.write_text("func.func @main(%v: memref<8xf64>) {\n  return\n}\n")
    given, a = inputs(tmp_path, 4)
    recorded, _ = dhir_run(cache, str(one), "--input", given[3], "-q")
    assert recorded.returncode == 0, recorded.stderr
    out = tmp_path / "out"
    first, _ = dhir_run(cache, str(program(tmp_path)), *given, "--output-dir", str(out))
    assert first.returncode == 0, first.stderr
    second, cached = dhir_run(
        cache, str(one), "--input", str(out / "b.npy"), "--output-dir", str(out)
    )
    assert second.returncode == 0 and cached, second.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dhir-results", "arg0.npy", "b.npy", "v.npy"]
    np.testing.assert_array_equal(np.load(out / "b.npy"), a * 2.0)
    np.testing.assert_array_equal(np.load(out / "v.npy"), a * 2.0)


@needs_llvm
@pytest.mark.mpi
def test_an_edited_program_or_other_options_take_the_full_path(cache: Path, tmp_path: Path) -> None:
    path = program(tmp_path)
    given, a = inputs(tmp_path, 3)
    out = ["--output-dir", str(tmp_path / "out")]
    done, _ = dhir_run(cache, str(path), "-n", "2", *given, *out)
    assert done.returncode == 0, done.stderr
    program(tmp_path, "3.0")  # same file, new text
    done, cached = dhir_run(cache, str(path), "-n", "2", *given, *out)
    assert done.returncode == 0 and not cached
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "arg1.npy"), a * 3.0)
    done, cached = dhir_run(cache, str(path), "-n", "1", *given, *out)  # another rank count
    assert done.returncode == 0 and not cached
    done, cached = dhir_run(cache, str(path), "-n", "1", *given, *out, "--timing")
    assert done.returncode == 0 and not cached  # --timing is not for this path
    done, cached = dhir_run(cache, str(path), "-n", "1", *given, *out)
    assert done.returncode == 0 and cached


@needs_llvm
@pytest.mark.mpi
def test_a_broken_record_or_a_lost_executable_takes_the_full_path(
    cache: Path, tmp_path: Path
) -> None:
    path = program(tmp_path, "5.0")
    given, a = inputs(tmp_path, 4)
    out = ["--output-dir", str(tmp_path / "out")]
    done, _ = dhir_run(cache, str(path), *given, *out)
    assert done.returncode == 0, done.stderr
    records = sorted((cache / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
    record = records[-1]
    entry = json.loads(record.read_text())
    record.write_text(json.dumps(entry | {"exe": str(tmp_path / "gone")}))
    done, cached = dhir_run(cache, str(path), *given, *out)
    assert done.returncode == 0 and not cached
    record.write_text("{not json")
    done, cached = dhir_run(cache, str(path), *given, *out)
    assert done.returncode == 0 and not cached
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "arg1.npy"), a * 5.0)


@needs_llvm
@pytest.mark.mpi
def test_files_of_the_cache_cut_short_are_built_again(tmp_path: Path) -> None:
    """An executable or object of the cache cut short (a full disk, a crash) was taken as
    built: every later run died of SIGSEGV, as if the program had crashed, or failed to
    link ("file format not recognized"), until the cache was removed by hand."""
    cache = tmp_path / "cache"  # of this program's files alone: each one is rebuilt
    path = program(tmp_path, "6.0")
    given, a = inputs(tmp_path, 7)
    out = ["--output-dir", str(tmp_path / "out")]
    done, _ = dhir_run(cache, str(path), *given, *out)
    assert done.returncode == 0, done.stderr
    records = sorted((cache / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
    exe = Path(json.loads(records[-1].read_text())["exe"])
    objects = [exe, *(cache / "modules").glob("*/program.o"), *cache.glob("*.o")]
    assert len(objects) >= 4  # the executable, a module's, the runtime's, the harness's
    sizes = {}
    for built in objects:
        sizes[built] = built.stat().st_size
        os.truncate(built, sizes[built] // 2)
    done, cached = dhir_run(cache, str(path), *given, *out)
    assert done.returncode == 0 and not cached, done.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "arg1.npy"), a * 6.0)
    assert {built: built.stat().st_size for built in objects} == sizes
    done, cached = dhir_run(cache, str(path), *given, *out)
    assert done.returncode == 0 and cached, done.stderr


def test_a_compiled_executable_cut_short_is_refused(cache: Path, tmp_path: Path) -> None:
    """`dhir run EXE` of a `dhir compile` output cut short ran it: a SIGSEGV blamed on the
    program."""
    exe = tmp_path / "program"
    whole = Path(sys.executable).resolve().read_bytes()
    exe.write_bytes(whole[: len(whole) // 2])
    exe.chmod(0o755)
    (tmp_path / "program.dhir.json").write_text(
        '{"entry": "main", "ranks": 1, "mpi": "mpich", "args": []}'
    )
    done, _ = dhir_run(cache, str(exe))
    assert done.returncode == 1
    assert f"error: {exe} is an executable cut short" in done.stderr
    assert "dhir compile" in done.stderr and "Traceback" not in done.stderr


@needs_llvm
@pytest.mark.mpi
def test_mistakes_on_the_cached_path_read_as_on_the_full_one(cache: Path, tmp_path: Path) -> None:
    path = program(tmp_path, "7.0")
    given, _ = inputs(tmp_path, 5)
    done, _ = dhir_run(cache, str(path), *given)
    assert done.returncode == 0, done.stderr
    assert "the results were not kept" in done.stderr
    done, cached = dhir_run(cache, str(path), *given[:2])  # one input of two
    assert done.returncode == 1 and cached
    assert "@main takes 2 arguments" in done.stderr and "Traceback" not in done.stderr
    done, cached = dhir_run(cache, str(path), *given, "--timeout", "0")
    assert done.returncode == 2 and not cached  # the full parser reports it


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["-"],
        ["-n", "2", "p.mlir"],  # options before the file
        ["p.mlir", "--trace", "t.json"],
        ["p.mlir", "--backend", "interp"],
        ["p.mlir", "--link", "f.c"],
        ["p.mlir", "-n"],  # a value missing
        ["p.mlir", "--input", "--print"],
        ["p.mlir", "--print=yes"],
        ["p.mlir", "--timeout", "-1"],
        ["p.mlir", "-n2"],
        ["p.mlir", "--output-dir", "a", "--output-dir", "b"],  # the full parser refuses it
        ["p.mlir", "--timeout", "5", "--timeout", "6"],
        ["p.mlir", "--output-dir", ""],  # Path("") would be the current folder
        ["p.mlir", "--output-dir="],
    ],
)
def test_command_lines_this_path_leaves_to_the_full_one(argv: list[str]) -> None:
    assert cached_run.recorder(argv) is None


def test_run_only_options_are_left_out_of_the_key(tmp_path: Path) -> None:
    path = program(tmp_path)
    plain = cached_run._read_command([str(path), "-n", "2"])
    fed = cached_run._read_command(
        [str(path), "-n=2", "--input", "x.npy", "--output-dir=o", "--print", "-q", "--timeout", "9"]
    )
    assert plain is not None and fed is not None
    assert fed.inputs == ["x.npy"] and fed.output_dir == Path("o") and fed.print
    assert cached_run.run_key(path, plain.keyed) == cached_run.run_key(path, fed.keyed)
    other = cached_run._read_command([str(path), "-n", "3"])
    assert other is not None
    assert cached_run.run_key(path, other.keyed) != cached_run.run_key(path, plain.keyed)


def test_words_that_are_not_utf8_are_keyed_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file name, an option or a DHIR_ variable in bytes that are not UTF-8 (Python's
    surrogate escapes, as `dhir run $'\\xff.mlir'` gives them) stopped every `dhir run`
    with a UnicodeEncodeError's traceback."""
    odd = os.fsdecode(b"\xff")
    path = tmp_path / f"p{odd}.mlir"
    path.write_text(PROGRAM)  # a file the key can read (else the full path's to report)
    command = cached_run._read_command([str(path), "--cpu", odd])
    assert command is not None
    plain = cached_run.run_key(path, command.keyed)
    monkeypatch.setenv("DHIR_NOTE", odd)
    assert cached_run.run_key(path, command.keyed) != plain


def test_the_files_keyed_options_name_are_keyed_by_content(tmp_path: Path) -> None:
    path = program(tmp_path)
    costs = tmp_path / "costs.json"
    costs.write_text("{}")
    before = cached_run._read_command([str(path), "--costs", str(costs)])
    costs.write_text('{"tasks": {}}')
    after = cached_run._read_command([str(path), "--costs", str(costs)])
    assert before is not None and after is not None
    assert cached_run.run_key(path, before.keyed) != cached_run.run_key(path, after.keyed)


@needs_llvm
@pytest.mark.mpi
def test_an_executable_from_dhir_compile_takes_the_cached_path(cache: Path, tmp_path: Path) -> None:
    path = program(tmp_path, "4.0")
    exe = tmp_path / "scale"
    compiled = subprocess.run(
        [sys.executable, "-m", "dhir", "compile", str(path), "-n", "2", "-q", "-o", str(exe)],
        capture_output=True,
        text=True,
        env=dict(os.environ, DHIR_CACHE_DIR=str(cache)),
    )
    assert compiled.returncode == 0, compiled.stderr
    given, a = inputs(tmp_path, 6)
    out = ["--output-dir", str(tmp_path / "out")]
    done, cached = dhir_run(cache, str(exe), *given, *out)
    assert done.returncode == 0 and cached, done.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "arg1.npy"), a * 4.0)
    done, cached = dhir_run(cache, str(exe), "--timing", *given, *out)
    assert done.returncode == 0 and not cached, done.stderr
    assert "  run\n" in done.stderr and "rank 1 sent" in done.stderr  # its run and traffic
    done, cached = dhir_run(cache, str(exe), "-n", "3", *given, *out)
    assert done.returncode == 1 and not cached  # the full path says why
    assert "was built for 2 ranks" in done.stderr


@needs_llvm
@pytest.mark.mpi
def test_a_cached_run_says_again_what_codedrop_made(cache: Path, tmp_path: Path) -> None:
    """README: a plain program's run prints CodeDrop's line; the second run, from the
    cache, printed nothing of it."""
    path = tmp_path / "plain.mlir"
    lines = PROGRAM.replace("FACTOR", "3.0").splitlines()
    path.write_text("\n".join([lines[0], *lines[4:-4], *lines[-2:]]))  # no dhir ops
    given, a = inputs(tmp_path, 7)
    said = "dhir: no dhir.schedule in @main; CodeDrop made 1 task in 1 schedule"
    for run in ("full", "cached"):
        done, cached = dhir_run(cache, str(path), *given, "--output-dir", str(tmp_path / run))
        assert done.returncode == 0 and cached == (run == "cached"), done.stderr
        assert said in done.stderr, (run, done.stderr)
        np.testing.assert_array_equal(np.load(tmp_path / run / "arg1.npy"), a * 3.0)


@pytest.mark.parametrize("edited", ["program", "costs"])
def test_a_file_edited_during_the_build_leaves_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: str
) -> None:
    """The key is made before the build reads the files and checked after: an edit saved
    in between filed the old program's executable under the new text's key."""
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    path = program(tmp_path)
    costs = tmp_path / "costs.json"
    costs.write_text('{"tasks": {}}')
    argv = [str(path), "--costs", str(costs)]
    signature = EntrySignature("main", ())
    record = cached_run.recorder(argv)
    assert record is not None
    if edited == "program":
        path.write_text(PROGRAM.replace("FACTOR", "3.0"))
    else:
        costs.write_text('{"tasks": {"t": 1.0}}')
    record(tmp_path / "exe", signature, RunOptions())
    assert not (tmp_path / "cache" / "runs").exists() or not any(
        (tmp_path / "cache" / "runs").iterdir()
    )
    record = cached_run.recorder(argv)  # unchanged since: recorded
    assert record is not None
    record(tmp_path / "exe", signature, RunOptions())
    assert len(list((tmp_path / "cache" / "runs").iterdir())) == 1


@pytest.mark.parametrize("threads", [0, -1, 10**6, "two", [1]])
def test_a_record_with_a_thread_count_out_of_range_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: object
) -> None:
    """A record whose thread count RunOptions refuses (garbled, or written by hand) ended
    every later `dhir run` of the program in a traceback of that DhirError."""
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    argv = [str(program(tmp_path))]
    record = cached_run.recorder(argv)
    assert record is not None
    record(Path(sys.executable).resolve(), EntrySignature("main", ()), RunOptions(threads=1))
    command = cached_run._read_command(argv)
    assert command is not None
    key = cached_run.run_key(command.program, command.keyed)
    assert cached_run._lookup(key) is not None  # whole: taken
    stored = cached_run._record_path(key)
    stored.write_text(json.dumps(json.loads(stored.read_text()) | {"threads": threads}))
    assert cached_run._lookup(key) is None


def test_a_fifo_or_a_hostfile_changed_in_the_cache_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_block: None
) -> None:
    """A FIFO in place of a run's record or its executable (`mkfifo`) blocked every later
    `dhir run` of the program for good; a hostfile cut short placed its ranks wrongly; an
    executable written over by another (whole) one was launched as the program."""
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    argv = [str(program(tmp_path))]
    command = cached_run._read_command(argv)
    record = cached_run.recorder(argv)
    assert command is not None and record is not None
    key = cached_run.run_key(command.program, command.keyed)
    exe = tmp_path / "exe"
    os.mkfifo(exe)
    assert not whole_elf(exe)
    record(exe, EntrySignature("main", ()), RunOptions())
    assert cached_run._lookup(key) is None
    stored = cached_run._record_path(key)
    stored.unlink()
    os.mkfifo(stored)
    assert cached_run._lookup(key) is None
    exe.unlink()
    shutil.copy(Path(sys.executable).resolve(), exe)
    hostfile = tmp_path / "hosts-6d3f3a3d5f2d3b08.mpich"  # not what its name says
    hostfile.write_text("h0:1\n")
    record(exe, EntrySignature("main", ()), RunOptions(hostfile=hostfile))
    assert cached_run._lookup(key) is None
    digest = hashlib.sha256(b"h0:1\n").hexdigest()[:16]
    hostfile = hostfile.rename(tmp_path / f"hosts-{digest}.mpich")
    record(exe, EntrySignature("main", ()), RunOptions(hostfile=hostfile))
    assert cached_run._lookup(key) is not None  # all whole: taken
    shutil.copy(Path("/bin/sh").resolve(), exe)  # another program's executable, whole
    assert cached_run._lookup(key) is None


def test_a_fifo_or_garbage_for_the_system_symbols_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_block: None
) -> None:
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path))
    nm = tmp_path / "nm"  # names one symbol of any file
    nm.write_text('#!/bin/sh\necho "$7: printf T 0 0"\n')
    nm.chmod(0o755)
    library = tmp_path / "lib" / "libc.so.6"
    library.parent.mkdir()
    library.write_text("")
    assert symbols.system_names(str(nm), (str(library.parent),)) == {"printf": "the C library"}
    for kept in ("[1, 2]", '{"printf": 3}', "fifo"):
        symbols._system_names.cache_clear()
        for old in tmp_path.glob("system-symbols-*.json"):
            old.unlink()
            if kept == "fifo":
                os.mkfifo(old)
            else:
                old.write_text(kept)
        names = symbols.system_names(str(nm), (str(library.parent),))
        assert names == {"printf": "the C library"}, kept


def test_the_tools_a_build_would_use_are_keyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run recorded with one mlir-opt-22, clang-22, MPI or ptxas was launched again after
    PATH named other tools, or they were upgraded in place: the old tools' executable,
    where the full path (whose build cache keys them) builds with the new ones."""
    path = program(tmp_path)
    keys = {cached_run.run_key(path, [])}
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("mlir-opt-22", "mlir-translate-22", "clang-22"):
        shadow = tools / name
        shadow.write_text("#!/bin/sh\n")
        shadow.chmod(0o755)
        keys.add(cached_run.run_key(path, []))  # found first on PATH
        shadow.write_text("#!/bin/sh\n# upgraded\n")
        keys.add(cached_run.run_key(path, []))  # the same path, another binary
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    keys.add(cached_run.run_key(path, []))
    for name in ("ptxas", "fatbinary"):
        (cuda / "bin" / name).write_text("#!/bin/sh\n")
        keys.add(cached_run.run_key(path, []))  # installed where CUDA_HOME says
        (cuda / "bin" / name).write_text("#!/bin/sh\n# upgraded\n")
        keys.add(cached_run.run_key(path, []))  # upgraded in place
    mpi = tmp_path / "mpich"
    (mpi / "include").mkdir(parents=True)
    monkeypatch.setenv("DHIR_MPICH_PREFIX", str(mpi))
    (mpi / "include" / "mpi.h").write_text("#define MPICH_VERSION 4\n")
    keys.add(cached_run.run_key(path, []))
    (mpi / "include" / "mpi.h").write_text("#define MPICH_VERSION 5.0\n")
    keys.add(cached_run.run_key(path, []))  # upgraded where it was
    assert len(keys) == 14


def test_the_cpu_is_keyed_and_not_its_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An executable built for this host's CPU (`--cpu native`) was launched on another
    CPU behind the same host name (a container, a VM moved to another instance type),
    where its instructions may not exist."""
    info = tmp_path / "cpuinfo"

    def stamp(mhz: str, flags: str) -> str:
        block = f"processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: {mhz}\nflags\t\t: {flags}\n"
        info.write_text(f"{block}\nprocessor\t: 1\nflags\t\t: other\n")
        return cached_run._cpu_stamp(info)

    assert stamp("2000.1", "sse2 avx2") == stamp("2450.9", "sse2 avx2")
    assert stamp("2000.1", "sse2 avx2") != stamp("2000.1", "sse2 avx2 avx512f")
    path = program(tmp_path)
    plain = cached_run.run_key(path, [])
    monkeypatch.setattr(cached_run, "_cpu_stamp", lambda: "another CPU")
    assert cached_run.run_key(path, []) != plain


def test_a_package_installed_or_upgraded_is_keyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `pip install -U xdsl numpy` the cached run launched what the old packages
    built, linked to an OpenBLAS that may be gone."""
    site = tmp_path / "site-packages"
    (site / "xdsl-0.74.dist-info").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    path = program(tmp_path)
    before = cached_run.run_key(path, [])
    (site / "xdsl-0.74.dist-info").rename(site / "xdsl-0.75.dist-info")
    os.utime(site, ns=(0, site.stat().st_mtime_ns + 1))  # a coarse clock could hide it
    assert cached_run.run_key(path, []) != before


def test_xdsl_and_dhir_outside_site_packages_are_keyed_by_their_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xDSL from PYTHONPATH (a checkout) was not in the key: after an edit there the
    cached run launched what the old xDSL had printed. dhir's own files are keyed
    wherever it is imported from."""
    checkout = tmp_path / "checkout"
    (checkout / "xdsl" / "printer").mkdir(parents=True)
    (checkout / "xdsl" / "__init__.py").write_text("")
    printer = checkout / "xdsl" / "printer" / "text.py"
    printer.write_text("SEP = ','\n")
    monkeypatch.delitem(sys.modules, "xdsl", raising=False)  # found as a new process would
    monkeypatch.setattr(sys, "path", [str(checkout), *sys.path])
    path = program(tmp_path)
    before = cached_run.run_key(path, [])
    printer.write_text("SEP = ', '\n")
    assert cached_run.run_key(path, []) != before
    dhir = tmp_path / "dhir"
    (dhir / "transforms").mkdir(parents=True)
    (dhir / "transforms" / "pass.py").write_text("A = 1\n")
    monkeypatch.setattr(cached_run, "_PACKAGE", dhir)
    before = cached_run.run_key(path, [])
    (dhir / "transforms" / "pass.py").write_text("A = 12\n")
    assert cached_run.run_key(path, []) != before


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_the_cores_this_process_may_use_are_keyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `taskset -c 0` the full path detects one core, places and threads for it;
    the cached run launched what was built and recorded for all of them."""
    path = program(tmp_path)
    plain = cached_run.run_key(path, [])
    other = {0} if len(os.sched_getaffinity(0)) > 1 else {0, 1}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: other)
    assert cached_run.run_key(path, []) != plain


def _pipe(text: str) -> tuple[int, str]:
    """A pipe holding `text` (its writer closed), and the path that reads it."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    return read, f"/dev/fd/{read}"


@pytest.mark.parametrize("option", [None, "--costs", "--system"])
def test_a_file_given_as_a_pipe_is_left_to_the_build(tmp_path: Path, option: str | None) -> None:
    """`dhir run <(make-program)`: the key read the pipe's bytes and the build found none
    left ("the module defines no functions"; `--costs <(...)`: "it is not JSON")."""
    read, piped = _pipe('{"tasks": {}}')
    try:
        argv = [piped] if option is None else [str(program(tmp_path)), option, piped]
        assert cached_run._read_command(argv) is None
        assert cached_run.recorder(argv) is None
        assert os.read(read, 100) == b'{"tasks": {}}'  # all there for the build
    finally:
        os.close(read)


@needs_llvm
@pytest.mark.mpi
def test_a_program_from_a_pipe_runs(cache: Path, tmp_path: Path) -> None:
    given, a = inputs(tmp_path, 8)
    out = tmp_path / "out"
    read, piped = _pipe(PROGRAM.replace("FACTOR", "9.0"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dhir", "run", piped, *given, "--output-dir", str(out)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, DHIR_CACHE_DIR=str(cache)),
            pass_fds=(read,),
            timeout=300,
        )
    finally:
        os.close(read)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(out / "arg1.npy"), a * 9.0)


# A loop to a's size, known at run time only, writing b: b's size is checked with each
# run's inputs (dhir.analysis.bounds.given_bounds), which the cached path cannot do.
SIZED_BY_INPUT = """\
func.func @main(%a: memref<?xf64>, %b: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %a, %c0 : memref<?xf64>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<?xf64>
    memref.store %x, %b[%i] : memref<?xf64>
  }
  return
}
"""


@needs_llvm
@pytest.mark.mpi
def test_a_program_whose_inputs_decide_its_bounds_is_checked_each_run(
    cache: Path, tmp_path: Path
) -> None:
    path = tmp_path / "sized.mlir"
    path.write_text(SIZED_BY_INPUT)
    for name, size in (("a", 4), ("b", 4), ("small", 2)):
        np.save(tmp_path / f"{name}.npy", np.arange(float(size)))
    a = ["--input", str(tmp_path / "a.npy")]
    first, _ = dhir_run(cache, str(path), "-n", "1", *a, "--input", str(tmp_path / "b.npy"))
    assert first.returncode == 0, first.stderr
    # Before, the second run took the recorded executable and wrote past b, exit 0.
    second, cached = dhir_run(
        cache, str(path), "-n", "1", *a, "--input", str(tmp_path / "small.npy")
    )
    assert not cached
    assert second.returncode != 0
    assert f"{path}:7:5: error: 'memref.store' accesses index 2 of dimension 0" in second.stderr
