"""The run/build options (dhir.toolchain.options.RunOptions): a bad value is refused with
a clear DhirError when the options are made, before any work, from the Python API and the
command line alike; the options reach the backends as given; the API's defaults are the
CLI's."""

import inspect
import json
import math
import os
import re
import stat
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import runner
from dhir.backends import interp
from dhir.cli import commands as cli  # the commands, which `dhir` (dhir.cli.main) runs
from dhir.ir.diagnostics import DhirError
from dhir.placement.list_scheduling import DEFAULT_ALGORITHM
from dhir.toolchain.linking import LinkInputs
from dhir.toolchain.options import RunOptions, message_chunk_bytes

EXAMPLES = Path(__file__).parents[2] / "examples"
VECTOR_ADD = EXAMPLES / "vector_add.mlir"
EMPTY_PROGRAM = "func.func @main() {\n  return\n}\n"

# Each bad option, and what its message says.
BAD = [
    ({"ranks": 0}, r"the rank count must be at least 1, got 0"),
    ({"ranks": -3}, r"the rank count must be at least 1, got -3"),
    ({"ranks": 2.5}, r"the rank count must be a whole number, got 2\.5"),
    ({"ranks": 65537}, r"the rank count must be at most 65536, got 65537"),
    ({"ranks": 10**20}, r"the rank count must be at most 65536, got 100000000000000000000"),
    ({"timeout": 0}, r"the timeout must be more than 0 seconds, got 0"),
    ({"timeout": -1.5}, r"the timeout must be more than 0 seconds, got -1\.5"),
    ({"timeout": math.nan}, r"the timeout must be more than 0 seconds, got nan"),
    ({"timeout": "60"}, r"the timeout must be a number of seconds, got '60'"),
    ({"threads": 0}, r"the thread count must be at least 1, got 0"),
    ({"threads": 4097}, r"the thread count must be at most 4096, got 4097"),
    ({"mpi": "lam"}, r"unknown MPI 'lam'; choose one of mpich, openmpi"),
    ({"gpu_fallback": "gpu"}, r"unknown GPU fallback 'gpu'; choose one of none, cpu"),
    ({"placement": "fastest"}, r"unknown placement 'fastest'; choose one of round-robin"),
    ({"target": "bogus"}, r"unknown target 'bogus'; give cpu, gpu, any or an arch \(CPU: x86_64"),
    ({"target": 5}, r"the target must be a str, got 5"),
]


@pytest.mark.parametrize(("keywords", "message"), BAD)
def test_bad_options_are_refused_when_made(keywords: dict[str, object], message: str) -> None:
    with pytest.raises(DhirError, match=message):
        RunOptions(**keywords)  # pyright: ignore[reportArgumentType]


def test_the_largest_counts_are_taken() -> None:
    options = RunOptions(ranks=65536, threads=4096)
    assert (options.ranks, options.threads) == (65536, 4096)


PASSES_WITH_RANKS = [
    "dhir-place",
    "dhir-lower-to-mpi",
    "dhir-split",
    "dhir-split-devices",
    "dhir-gpu-data",
    "dhir-time-tiles",
]


@pytest.mark.parametrize("name", PASSES_WITH_RANKS)
def test_passes_refuse_more_ranks_than_the_options_take(name: str) -> None:
    """dhir-opt's pass options are held to `-n`'s limit: a pass error, not minutes of
    placement or an overflow."""
    module = dhir.parse_file(VECTOR_ADD)
    with pytest.raises(DhirError, match=f"{name}: ranks must be at most 65536, got 9999"):
        dhir.run_pipeline(module, f"{name}{{ranks=99999999999999999999}}")


def test_dhir_split_refuses_too_many_pieces() -> None:
    module = dhir.parse_file(VECTOR_ADD)
    with pytest.raises(DhirError, match="dhir-split: pieces must be at most 65536, got 70000"):
        dhir.run_pipeline(module, "dhir-split{pieces=70000}")


def test_whole_numbers_of_other_kinds_are_taken() -> None:
    options = RunOptions(ranks=np.int64(3), threads=np.int32(2), timeout=np.float32(1.5))  # pyright: ignore[reportArgumentType]
    assert (options.ranks, options.threads, options.timeout) == (3, 2, 1.5)
    assert type(options.ranks) is int and type(options.timeout) is float


def test_numpy_bools_are_taken_as_bools() -> None:
    # What a comparison of arrays gives (np.all(a == b)): a bool, if not Python's own.
    options = RunOptions(optimize=np.bool_(False), runtime_checks=np.bool_(True))  # pyright: ignore[reportArgumentType]
    assert options.optimize is False and options.runtime_checks == "all"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7", 7),
        ("+7", 7),
        (" \t7", 7),  # strtoll skips white space before the number, not after
        ("0x10", 16),
        ("010", 8),  # octal, as strtoll in base 0 reads it
        ("2147483647", 2**31 - 1),
        ("0", None),
        ("-1", None),
        ("2147483648", None),
        ("abc", None),
        ("7 ", None),
        ("08", None),
        ("0x", None),
        ("1e3", None),
        ("1_000", None),  # Python's int() takes these three; strtoll does not
        ("0o7", None),
        ("0b1", None),
    ],
)
def test_message_chunk_bytes_are_read_as_the_runtime_reads_them(
    text: str, value: int | None
) -> None:
    assert message_chunk_bytes(text) == value


def _must_not_run(*_args: object, **_keywords: object) -> list[np.ndarray]:
    raise AssertionError("a backend ran with bad options")


@pytest.mark.parametrize("backend", ["interp", "native"])
@pytest.mark.parametrize(("keywords", "message"), BAD)
def test_the_api_refuses_bad_options_before_running(
    keywords: dict[str, object], message: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On either backend, whether or not that backend uses the option."""
    monkeypatch.setattr(interp, "run_interp", _must_not_run)
    monkeypatch.setattr(runner, "run_native", _must_not_run)
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    with pytest.raises(DhirError, match=message):
        dhir.run(VECTOR_ADD, *arrays, backend=backend, **keywords)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("keywords", "named"),
    [({"placement": "heft"}, "placement needs"), ({"costs": "c.json"}, "costs needs"),
     ({"placement": "best"}, "placement needs"),
     ({"placement": "peft", "costs": Path("c.json")}, "placement and costs need the")],
)  # fmt: skip
def test_the_interpreter_refuses_placement_options_as_dhir_run_does(
    keywords: dict[str, object], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(interp, "run_interp", _must_not_run)
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    message = f"the interpreter places no task (it runs them in program order): {named}"
    with pytest.raises(DhirError, match=re.escape(message)):
        dhir.run(VECTOR_ADD, *arrays, backend="interp", **keywords)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("keywords", "named"),
    [({"threads": 2}, "threads: OpenMP threads"), ({"threads": 1}, "threads: OpenMP"),
     ({"cpu": "native"}, "cpu: the interpreter builds no code"),
     ({"mpi": "openmpi"}, "mpi: the interpreter runs no MPI"),
     ({"gpu_fallback": "cpu"}, "gpu_fallback: the interpreter runs every task"),
     ({"target": "cpu"}, "target: the target binds the tasks CodeDrop makes"),
     # Refused after output_dir's last results were removed.
     ({"profile": "p.json"}, "profile: a profile times tasks on MPI ranks")],
)  # fmt: skip
def test_the_interpreter_refuses_native_options_it_would_ignore(
    keywords: dict[str, object], named: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """They ran as if not given; refused before anything is parsed or removed."""
    monkeypatch.setattr(interp, "run_interp", _must_not_run)
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    (tmp_path / "arg0.npy").write_bytes(b"last run's")
    with pytest.raises(DhirError, match=re.escape(named)) as raised:
        dhir.run(VECTOR_ADD, *arrays, backend="interp", output_dir=tmp_path, **keywords)  # pyright: ignore[reportArgumentType]
    assert "(backend 'interp'); use it with the native backend" in str(raised.value)
    assert (tmp_path / "arg0.npy").exists()


def test_the_interpreter_takes_the_options_it_honours() -> None:
    """Its results are every rank count's and exact; it checks every access and runs the
    entry as written; the native-only options at their defaults are not refused."""
    arrays = [np.arange(20, dtype=np.int32) for _ in range(3)]
    results = dhir.run(VECTOR_ADD, *arrays, backend="interp", ranks=3, timeout=60,
                       fast_math="fast", runtime_checks=True, optimize=False, codedrop=False,
                       threads=None, cpu=None, mpi="mpich", gpu_fallback="none", target="any")  # fmt: skip
    np.testing.assert_array_equal(results[2], 2 * arrays[0])


def test_the_api_hands_its_keywords_to_the_backend_as_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[RunOptions] = []

    def native(_module: object, _entry: str, _inputs: object, options: RunOptions, *_: object):  # noqa: ANN202
        seen.append(options)
        return []

    monkeypatch.setattr(runner, "run_native", native)
    costs = tmp_path / "costs.json"
    dhir.run(EMPTY_PROGRAM, mpi="openmpi", timeout=7, threads=2, placement="heft",
             costs=str(costs), gpu_fallback="cpu", target="cpu", ranks=2)  # fmt: skip
    want = RunOptions(ranks=2, mpi="openmpi", timeout=7.0, threads=2, placement="heft",
                      costs=costs, gpu_fallback="cpu", target="cpu")  # fmt: skip
    # A target is refused with codedrop=False (no task would take it): given apart.
    dhir.run(EMPTY_PROGRAM, codedrop=False)
    assert seen == [want, RunOptions(codedrop=False)]


def test_the_cli_hands_its_flags_to_the_backend_as_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[RunOptions] = []

    def run_module(*_args: object, **keywords: object) -> list[np.ndarray]:
        seen.append(_args[4])  # pyright: ignore[reportArgumentType]
        return []

    monkeypatch.setattr(cli, "run_module", run_module)
    program = tmp_path / "p.mlir"
    program.write_text(EMPTY_PROGRAM)
    status = cli.main(["run", str(program), "-n", "3", "--mpi", "openmpi", "--timeout", "7",
                       "--threads", "2", "--placement", "heft", "--gpu-fallback", "cpu",
                       "--no-codedrop", "--target", "cpu"])  # fmt: skip
    assert status == 0
    assert seen == [RunOptions(ranks=3, mpi="openmpi", timeout=7.0, threads=2, placement="heft",
                               gpu_fallback="cpu", codedrop=False, target="cpu")]  # fmt: skip


# A bad flag is a malformed command line (exit status 2), refused before the program is read.
BAD_FLAGS = [
    (["-n", "0"], "the rank count must be at least 1, got 0"),
    (["-n", "two"], "'two' is not a whole number"),
    (["--timeout", "0"], "the timeout must be more than 0 seconds, got 0"),
    (["--timeout", "-5"], "the timeout must be more than 0 seconds, got -5"),
    (["--timeout", "nan"], "the timeout must be more than 0 seconds, got nan"),
    (["--timeout", "soon"], "'soon' is not a number"),
    # Python's int() and float() take these; they were run as 2 ranks, 10 s and 3 threads:
    (["-n", "\u0662"], "'\u0662' is not a whole number"),
    (["-n", "2_0"], "'2_0' is not a whole number"),
    (["-n", " 2"], "' 2' is not a whole number"),
    (["--timeout", "1_0"], "'1_0' is not a number"),
    (["--timeout", "\u0661\u0660"], "is not a number"),
    (["--threads", "\u0663"], "'\u0663' is not a whole number"),
    (["--threads", "0"], "the thread count must be at least 1, got 0"),
    (["-n", "99999999999999999999"], "the rank count must be at most 65536, got 9999"),
    (["--threads", "100000"], "the thread count must be at most 4096, got 100000"),
    (["--mpi", "lam"], "invalid choice: 'lam'"),
    (["--gpu-fallback", "gpu"], "invalid choice: 'gpu'"),
    (["--placement", "fastest"], "invalid choice: 'fastest'"),
    (["--target", "bogus"], "argument --target: unknown target 'bogus'; give cpu, gpu, any"),
    # These two were exit status 1, unlike every other malformed value:
    (["--cpu", ""], "argument --cpu: bad CPU '': give an LLVM CPU name"),
    (["--cpu", "x86-64 v3"], "argument --cpu: bad CPU 'x86-64 v3': give an LLVM CPU name"),
    (["-l", ""], "argument -l: -l is not a library name (-lNAME links libNAME.so or .a)"),
    (["-l", "../m"], "argument -l: -l../m is not a library name"),
]


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS)
def test_the_cli_refuses_bad_flags(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", str(VECTOR_ADD), "--backend", "interp", *flags])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", str(VECTOR_ADD), "--output-dir", ""],
        ["run", str(VECTOR_ADD), "--trace", ""],
        ["run", ""],
        ["compile", str(VECTOR_ADD), "-o", ""],
        ["schedule", str(VECTOR_ADD), "--gantt", ""],
        ["calibrate", "-o", ""],
        ["gantt", "t.json", "-o", ""],
    ],
)
def test_an_empty_path_is_refused(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Path("") is the current folder: `--output-dir ""` wrote the results there, and
    `--gantt ""` drew `..png` and `..svg`."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert "an empty path; name a file or folder" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "argv",
    [
        ["run", str(VECTOR_ADD), "--trace", "out/"],
        ["run", str(VECTOR_ADD), "--profile", "out/"],
        ["compile", str(VECTOR_ADD), "-o", "out/"],
        ["schedule", str(VECTOR_ADD), "--gantt", "out/"],
        ["schedule", str(VECTOR_ADD), "--dot", "out/"],
        ["calibrate", "-o", "out/"],
        ["gantt", "t.json", "-o", "out/"],
    ],
)
def test_a_file_to_write_named_as_a_folder_is_refused(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Path("out/") is Path("out"): `--gantt out/`, with no folder out, drew out.png and
    out.svg, and `--trace out/` wrote a file out."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert "'out/' names a folder (it ends in /); name the file to write" in (
        capsys.readouterr().err
    )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # Both were said only after the whole build.
        (["compile", str(VECTOR_ADD), "-o", "none/exe"], "there is no folder none; make it"),
        (["compile", str(VECTOR_ADD), "-o", "exe", "--keep-build", "file"], "file: it is a file"),
        # Not "a .toml or .json file, not 'no suffix'; rename it".
        (["schedule", str(VECTOR_ADD), "--system", "folder"], "folder is a folder; name a .toml"),
        (["calibrate", "-o", "folder"], "folder is a folder; name a .toml or .json file"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DHIR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "file").write_text("mine")
    (tmp_path / "folder").mkdir()
    assert cli.main(argv) == 1
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]  # no cache


def test_an_empty_entry_is_not_main(capsys: pytest.CaptureFixture[str]) -> None:
    """`--entry ""` named no function, and main ran."""
    argv = ["run", str(VECTOR_ADD), "--backend", "interp", "--entry", ""]
    assert cli.main(argv) == 1
    assert 'no function @"" to run' in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", str(VECTOR_ADD), "-o", "x1", "-o", "x2"],
        ["run", str(VECTOR_ADD), "--output-dir", "a", "--output-dir", "b"],
        ["run", str(VECTOR_ADD), "-n", "2", "--ranks", "2"],
        ["schedule", str(VECTOR_ADD), "--algorithm", "heft", "--placement", "peft"],
    ],
)
def test_an_option_of_one_value_given_twice_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse would keep the last and drop the others without a word."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert "given more than once: it takes one value, so give it once" in capsys.readouterr().err


def test_dhir_opt_refuses_two_pipelines(capsys: pytest.CaptureFixture[str]) -> None:
    """`-p cse -p dce` ran only dce; mlir-opt refuses it too."""
    from dhir.cli import dhir_opt

    with pytest.raises(SystemExit) as exit_:
        dhir_opt.main([str(VECTOR_ADD), "-p", "cse", "-p", "dce"])
    assert exit_.value.code == 2
    assert "argument -p/--passes/--pass-pipeline: given more than once" in capsys.readouterr().err


def test_options_meant_to_repeat_still_do() -> None:
    args = cli.build_parser().parse_args(
        ["run", "p.mlir", "--input", "a.npy", "--input", "b.npy", "--print", "--print",
         "-l", "m", "-l", "blas"]
    )  # fmt: skip
    assert args.input == ["a.npy", "b.npy"] and args.libraries == ["m", "blas"] and args.print
    assert not [name for name in vars(args) if name.startswith("_")]  # no note left behind


def test_the_cli_exits_2_with_the_message() -> None:
    """As a user runs it: the status and the message, no traceback."""
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(VECTOR_ADD), "--timeout", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "the timeout must be more than 0 seconds, got 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_api_defaults_are_the_cli_defaults() -> None:
    """dhir.run, dhir run, dhir compile and RunOptions agree on every default, the rank
    count (1) included."""
    parser = cli.build_parser()
    run = cli._options(parser.parse_args(["run", "p.mlir"]))  # pyright: ignore[reportPrivateUsage]
    compile_ = cli._options(parser.parse_args(["compile", "p.mlir", "-o", "exe"]))  # pyright: ignore[reportPrivateUsage]
    assert run == compile_ == RunOptions()
    api = inspect.signature(dhir.run).parameters
    shared = [field.name for field in fields(RunOptions) if field.name in api]
    assert len(shared) == len(fields(RunOptions)) - 1  # all but the hostfile (--system)
    for name in shared:
        want = getattr(run, name)
        default = api[name].default
        # dhir.run takes the words --link, -l and -L take: none by default.
        default = LinkInputs.from_words(default) if name == "link" else default
        # None, to tell a placement named (refused by the interpreter) from the default.
        default = DEFAULT_ALGORITHM if name == "placement" and default is None else default
        # None: 1, or the count of ranks a machine description (`system`) gives.
        default = 1 if name == "ranks" and default is None else default
        assert default == want, name
    args = parser.parse_args(["run", "p.mlir"])
    # --entry is None when not given (an executable checks one given): the function is main.
    assert args.entry is None and api["entry"].default == cli.DEFAULT_ENTRY
    assert api["backend"].default == args.backend


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-n", "0"], "the rank count must be at least 1, got 0"),
        (["-n", "two"], "'two' is not a whole number"),
        (["-n", "\u0662"], "'\u0662' is not a whole number"),
        (["--simulate", "--node-size", "1_0"], "'1_0' is not a whole number"),
        (["-n", "100000"], "the rank count must be at most 65536, got 100000"),
        (["--simulate", "--node-size", "0"], "must be at least 1 (devices per node), got 0"),
        (["--target", "sm_9"], "argument --target: unknown target 'sm_9'"),
    ],
)
def test_dhir_schedule_refuses_bad_flags_as_dhir_run_does(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same mistake, the same exit status: a malformed command line (2)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["schedule", str(VECTOR_ADD), *flags])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("keyword", "where", "reason"),
    [
        ("trace", ".", "it is a folder; name a file"),
        ("profile", "missing/p.json", "there is no folder {tmp}/missing; make it first"),
        ("trace", "a_file/t.json", "{tmp}/a_file is not a folder"),
    ],
)
def test_a_trace_or_profile_that_cannot_be_written_is_refused_before_the_build(
    keyword: str, where: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They are written after the run: it failed then, its results lost."""
    from dhir.backends import native

    monkeypatch.setattr(native, "compile_native", _must_not_run)
    (tmp_path / "a_file").write_text("x")
    path = tmp_path / where
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    message = f"cannot write the {keyword} {path}: {reason.format(tmp=tmp_path)}"
    with pytest.raises(DhirError, match=re.escape(message)):
        dhir.run(VECTOR_ADD, *arrays, **{keyword: path})  # pyright: ignore[reportArgumentType]


def _as_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.access as it answers a user other than root, whom a file's modes do not stop
    (the tests may run as root): no write where the owner may not write."""
    real = os.access

    def access(path: str | Path, mode: int) -> bool:
        if mode & os.W_OK and not Path(path).stat().st_mode & stat.S_IWUSR:
            return False
        return real(path, mode)

    monkeypatch.setattr(os, "access", access)


@pytest.mark.parametrize(
    ("keyword", "where", "message"),
    [
        (
            "trace",
            "ro/t.json",
            "cannot write the trace {path}: the folder {tmp}/ro is not writable",
        ),
        ("profile", "ro/p.json", "cannot write the profile {path}: the folder {tmp}/ro is not"),
        ("profile", "old.json", "cannot write the profile {path}: the file is not writable"),
        ("keep_build", "ro/a/b", "cannot keep the build in {path}: the folder {tmp}/ro is not"),
        ("keep_build", "old.json/a", "cannot keep the build in {path}: {tmp}/old.json is not a"),
    ],
)
def test_an_output_path_this_user_cannot_write_is_refused_before_the_build(
    keyword: str, where: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only folder (or profile) was said only after the whole build and run."""
    from dhir.backends import native

    monkeypatch.setattr(native, "compile_native", _must_not_run)
    _as_a_user(monkeypatch)
    (tmp_path / "old.json").write_text("{}")
    (tmp_path / "old.json").chmod(0o444)
    (tmp_path / "ro").mkdir(mode=0o555)
    path = tmp_path / where
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    expected = message.format(path=path, tmp=tmp_path)
    try:
        with pytest.raises(DhirError, match=re.escape(expected)):
            dhir.run(VECTOR_ADD, *arrays, **{keyword: path})  # pyright: ignore[reportArgumentType]
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_a_file_that_may_be_written_over_needs_no_writable_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As /dev/null, in a folder only root may write to: a profile or trace is written
    over, unlike an earlier trace (a file), which is removed first."""
    from dhir.toolchain.options import check_written_files

    _as_a_user(monkeypatch)
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "kept.json").write_text("{}")
    os.mkfifo(folder / "pipe")
    folder.chmod(0o555)
    try:
        check_written_files(RunOptions(profile=folder / "kept.json"))
        check_written_files(RunOptions(trace=folder / "pipe"))
        with pytest.raises(DhirError, match="the folder .* is not writable"):
            check_written_files(RunOptions(trace=folder / "kept.json"))
    finally:
        folder.chmod(0o755)


def test_a_built_executable_refuses_a_trace_it_cannot_write_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    exe = tmp_path / "exe"
    exe.write_bytes(b"\x7fELF")
    (tmp_path / "exe.dhir.json").write_text(
        '{"entry": "main", "ranks": 1, "mpi": "mpich", "args": []}'
    )
    monkeypatch.setattr(cli, "run_executable", _must_not_run)
    assert cli.main(["run", str(exe), "--trace", str(tmp_path)]) == 1
    assert (
        f"cannot write the trace {tmp_path}: it is a folder; name a file" in capsys.readouterr().err
    )


@pytest.mark.parametrize(("built", "described"), [(2, 1), (1, 3)])
def test_a_machine_description_of_other_ranks_names_the_executable(
    built: int,
    described: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not "Leave out -n (or give -n 1)" to a user who gave no -n."""
    exe = tmp_path / "exe"
    exe.write_bytes(b"\x7fELF")
    (tmp_path / "exe.dhir.json").write_text(
        json.dumps({"entry": "main", "ranks": built, "mpi": "mpich", "args": []})
    )
    system = tmp_path / "one.toml"
    system.write_text(
        f"[[nodes]]\nname = 'n'\n[[nodes.devices]]\nname = 'c'\narch = 'x86_64'\nranks = {described}\n"
    )
    monkeypatch.setattr(cli, "run_executable", _must_not_run)
    assert cli.main(["run", str(exe), "--system", str(system)]) == 1
    ranks = {1: "1 rank", 2: "2 ranks", 3: "3 ranks"}
    assert (
        f"{exe} was built for {ranks[built]} and --system {system} runs {ranks[described]}; "
        f"rebuild it with dhir compile --system {system}, or give a description of {ranks[built]}"
    ) in capsys.readouterr().err


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was made after the run, which failed then with Python's "[Errno 2] ..."."""
    monkeypatch.setattr(interp, "run_interp", _must_not_run)
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    message = "cannot write results to /proc/dhir-no-such/out: No such file or directory"
    with pytest.raises(DhirError, match=f"{re.escape(message)}$"):
        dhir.run(VECTOR_ADD, *arrays, backend="interp", output_dir="/proc/dhir-no-such/out")


@pytest.mark.skipif(not os.path.isdir("/sys"), reason="needs Linux's /sys")
def test_an_output_folder_that_takes_no_file_is_refused_before_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A folder that is there but takes no file (sysfs refuses even root; a read-only one)
    failed only after the run, its results lost: `cannot write results to /sys: ...`
    once the program had run to its end."""
    monkeypatch.setattr(interp, "run_interp", _must_not_run)
    arrays = [np.zeros(20, np.int32) for _ in range(3)]
    message = "cannot write results to /sys: Permission denied; choose a folder you may write to"
    with pytest.raises(DhirError, match=f"{re.escape(message)}$"):
        dhir.run(VECTOR_ADD, *arrays, backend="interp", output_dir="/sys")


def test_many_more_ranks_than_cores_are_said_before_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`dhir run -n 1000` on 2 cores ran for minutes saying nothing: a rank count (times
    --threads) over 4 a core of this host is warned of, naming -n; ranks a hostfile sends
    to other hosts, and counts within 4 a core, are not."""
    from dhir.toolchain.options import RunOptions, crowding

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    said = crowding(RunOptions(ranks=1000))
    assert said is not None
    assert "1000 ranks" in said and "2 cores" in said and "-n 8" in said, said
    assert crowding(RunOptions(ranks=8)) is None
    assert crowding(RunOptions(ranks=9)) is not None
    assert crowding(RunOptions(ranks=4, threads=4)) is not None
    assert "--threads" in (crowding(RunOptions(ranks=4, threads=4)) or "")
    assert crowding(RunOptions(ranks=4, threads=2)) is None
    assert crowding(RunOptions(ranks=1000, hostfile=Path("hosts"))) is None


def test_run_executable_warns_of_crowded_ranks_before_the_launch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dhir.toolchain.launch as launch
    from dhir.toolchain.options import RunOptions
    from dhir.toolchain.signature import EntrySignature

    def launched(*_: object) -> Path:
        print("launched", file=sys.stderr)
        raise RuntimeError("not run")

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(launch, "_run_in", launched)
    signature = EntrySignature("main", ())
    with pytest.raises(RuntimeError, match="not run"):
        launch.run_executable(Path("exe"), signature, [], RunOptions(ranks=1000))
    err = capsys.readouterr().err
    assert err.startswith("warning: 1000 ranks on this host's 2 cores"), err
    assert err.count("warning:") == 1 and err.endswith("launched\n"), err


def test_a_crowded_mpich_run_yields_its_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """MPICH ranks poll while they wait: on 2 cores, 200 ranks of vector_add.mlir took 42 s,
    25 s with MPICH's yield settings, which crowded MPICH runs now get."""
    from dhir.toolchain.launch import CROWDED_MPICH, crowded_env
    from dhir.toolchain.options import RunOptions

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert crowded_env(RunOptions(ranks=200), "mpich", {}) == CROWDED_MPICH
    assert crowded_env(RunOptions(ranks=2), "mpich", {}) == {}
    assert crowded_env(RunOptions(ranks=200), "openmpi", {}) == {}
    mine = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "0"}
    assert crowded_env(RunOptions(ranks=200), "mpich", mine) == {
        "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1"
    }


def test_the_launcher_looks_at_the_ranks_less_often_when_a_look_is_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each look reads every rank's /proc entry; at 50 ms apart over many ranks it held a
    core the ranks needed. The wait after a look is LOOK_SHARE times the look."""
    import subprocess

    import dhir.toolchain.launch as launch

    clock = [0.0]
    waits: list[float] = []

    class Process:
        def wait(self, timeout: float) -> int:
            waits.append(timeout)
            if len(waits) == 3:
                return 0
            clock[0] += timeout
            raise subprocess.TimeoutExpired("mpirun", timeout)

    def look(_: object) -> None:
        clock[0] += 0.1  # a long look

    monkeypatch.setattr(launch.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(launch._Watch, "_look", look)
    watch = launch._Watch(None)
    assert watch.wait(Process(), 100.0) == 0  # type: ignore[arg-type]
    assert waits[0] == launch.WATCH_S
    assert waits[1] == pytest.approx(launch.LOOK_SHARE * 0.1)
