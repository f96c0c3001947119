"""`dhir.run` as a program calls it: what it takes (a parsed module, a path, MLIR text, an
output folder named by a string) and what it leaves as it was."""

import json
import os
import signal
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from test_toolchain import need
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

import dhir
from dhir import DhirError
from dhir.dialects import func
from dhir.machine.detect import detect
from dhir.machine.dlti import attach
from dhir.machine.files import write_system
from dhir.toolchain.signals import ending_cleanly

EXAMPLES = Path(__file__).parents[2] / "examples"
VECTOR_ADD = EXAMPLES / "vector_add.mlir"
# No dhir.schedule: the native backend runs CodeDrop on it first.
PLAIN = """
func.func @main(%a: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %two = arith.constant 2 : i32
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xi32>
    %y = arith.muli %x, %two : i32
    memref.store %y, %a[%i] : memref<8xi32>
  }
  return
}
"""


def vector_add_inputs() -> list[np.ndarray]:
    return [np.arange(20, dtype=np.int32), np.full(20, 3, np.int32), np.zeros(20, np.int32)]


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["native", "interp"])
@pytest.mark.parametrize("plain", [False, True], ids=["scheduled", "plain"])
def test_a_parsed_module_is_left_as_it_was(plain: bool, backend: str) -> None:
    # The native backend lowers the module it runs; it must be a copy of the caller's, which
    # a second call then runs again (a plain one: through CodeDrop, each time).
    need("mpich")
    text = PLAIN if plain else (EXAMPLES / "vector_add.mlir").read_text()
    inputs = [np.arange(8, dtype=np.int32)] if plain else vector_add_inputs()
    module = dhir.parse_string(text)
    before = dhir.print_module(module)
    first = dhir.run(module, *inputs, ranks=2, backend=backend, timeout=120)
    assert dhir.print_module(module) == before
    second = dhir.run(module, *inputs, ranks=2, backend=backend, timeout=120)
    assert dhir.print_module(module) == before
    oracle = dhir.run(text, *inputs, backend="interp")
    for got, again, want in zip(first, second, oracle, strict=True):
        assert got.tobytes() == want.tobytes() and again.tobytes() == want.tobytes()


def test_an_output_folder_named_by_a_string(tmp_path: Path) -> None:
    inputs = vector_add_inputs()
    out = tmp_path / "out"
    results = dhir.run(EXAMPLES / "vector_add.mlir", *inputs, backend="interp", output_dir=str(out))
    named = ["a.npy", "b.npy", "c.npy"]  # after %a, %b and %c
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".dhir-results", "arg0.npy", "arg1.npy", "arg2.npy", *named]
    )
    assert np.array_equal(np.load(out / "arg0.npy"), results[0])


def _two_rank_description(path: Path) -> Path:
    local = detect()
    write_system(local.with_device(replace(local.device("cpu0"), ranks=2)), path)
    return path


@pytest.mark.mlir
@pytest.mark.mpi
def test_run_takes_a_machine_description_and_its_ranks(tmp_path: Path) -> None:
    """`system=` is `dhir run --system`: dhir.run had no way to give a description."""
    system = _two_rank_description(tmp_path / "two.toml")
    profile = tmp_path / "profile.json"
    results = dhir.run(VECTOR_ADD, *vector_add_inputs(), system=system, profile=profile)
    oracle = dhir.run(VECTOR_ADD, *vector_add_inputs(), backend="interp")
    for got, want in zip(results, oracle, strict=True):
        assert got.tobytes() == want.tobytes()
    assert json.loads(profile.read_text())["ranks"] == 2  # the description's, not 1


def test_a_machine_description_of_other_ranks_or_for_the_interpreter_is_refused(
    tmp_path: Path,
) -> None:
    system = _two_rank_description(tmp_path / "two.toml")
    # One check for `dhir run -n` and `ranks=`, as launch_plan words it for both.
    with pytest.raises(DhirError) as error:
        dhir.run(VECTOR_ADD, *vector_add_inputs(), system=str(system), ranks=3)
    said = str(error.value)
    assert f"({system}) runs 2 ranks (" in said
    assert "), not 3: a program runs on all of them" in said
    assert "Leave out -n (ranks= in the API), or give -n 2 (ranks=2 in the API)" in said
    assert "or describe 3 ranks" in said
    with pytest.raises(DhirError, match="the interpreter places no task .*: system needs"):
        dhir.run(VECTOR_ADD, *vector_add_inputs(), system=system, backend="interp")
    with pytest.raises(DhirError, match="system takes a path .*, not int"):
        dhir.run(VECTOR_ADD, *vector_add_inputs(), system=2)


@pytest.mark.mlir
def test_a_program_s_own_description_of_other_ranks_is_refused_in_api_words() -> None:
    """A description in the module (dhir.machine.dlti.attach) runs 5 ranks: the default
    ranks=1 is refused, as -n 1 is, with the API's words too (it said only `-n 5`)."""
    five = detect()
    five = five.with_device(replace(five.device("cpu0"), ranks=5))
    module = dhir.parse_file(VECTOR_ADD)
    attach(module, five, "five.toml")
    with pytest.raises(DhirError) as error:
        dhir.run(module, *vector_add_inputs())
    assert "five.toml: the machine description runs 5 ranks, but the program is placed on 1; " in (
        str(error.value)
    )
    assert "run it on 5: -n 5 (ranks=5 in the API), or describe 1 rank" in str(error.value)


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=pytest.mark.mlir)])
def test_an_input_mapped_from_the_last_runs_result_is_kept(tmp_path: Path, backend: str) -> None:
    """An array np.load maps from c.npy, a result of the last run into the folder, given
    to the next run into it: c.npy was removed as that run's leftover."""
    dhir.run(VECTOR_ADD, *vector_add_inputs(), backend="interp", output_dir=tmp_path)
    c = np.load(tmp_path / "c.npy", mmap_mode="r")
    want = np.array(c)
    (result,) = dhir.run(PLAIN, c[:8], backend=backend, output_dir=tmp_path)
    np.testing.assert_array_equal(result, want[:8] * 2)
    names = [".dhir-results", "a.npy", "arg0.npy", "c.npy"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), want)


@pytest.mark.parametrize(
    "name", ["missing.mlir", "no/such/folder/prog.mlir", "results (copy).mlir", "prog", " x.mlir "]
)
def test_a_string_naming_a_missing_file_says_so(name: str, tmp_path: Path) -> None:
    # Not parsed as MLIR ("Operation missing.mlir is not registered").
    with pytest.raises(DhirError, match=r"cannot read .*: No such file or directory") as caught:
        dhir.run(str(tmp_path / name) if "/" in name else name, *vector_add_inputs(), ranks=2)
    assert "not registered" not in str(caught.value)


def test_a_string_naming_a_file_or_holding_mlir(tmp_path: Path) -> None:
    inputs = vector_add_inputs()
    text = (EXAMPLES / "vector_add.mlir").read_text()
    oracle = dhir.run(text, *inputs, backend="interp")
    (tmp_path / "program").write_text(text)  # a file, whatever its name
    by_path = dhir.run(str(tmp_path / "program"), *inputs, backend="interp")
    assert all(np.array_equal(a, b) for a, b in zip(by_path, oracle, strict=True))
    # MLIR text on one line is MLIR text.
    one_line = "func.func @main(%a: memref<2xi32>) { return }"
    assert dhir.run(one_line, np.ones(2, np.int32), backend="interp")[0].tolist() == [1, 1]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002], ids=["022", "077", "002"])
def test_result_files_honour_the_umask(tmp_path: Path, umask: int) -> None:
    # As any file a program writes: 0666 less the umask (a temporary file is 0600).
    out = tmp_path / "out"
    before = os.umask(umask)
    try:
        dhir.run(
            EXAMPLES / "vector_add.mlir", *vector_add_inputs(), backend="interp", output_dir=out
        )
    finally:
        os.umask(before)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in out.iterdir()}
    names = [f"arg{k}.npy" for k in range(3)] + ["a.npy", "b.npy", "c.npy", ".dhir-results"]
    assert modes == dict.fromkeys(names, 0o666 & ~umask)


def test_a_signal_in_a_call_reaches_the_programs_own_handler() -> None:
    # dhir.run cleans up first (Terminated unwinds it), then the caller's handler runs; the
    # run is over, so the call fails. A signal the program ignores stays ignored.
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, _: seen.append(signum))
    ignored = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(DhirError, match="the run was ended by SIGTERM"):
            with ending_cleanly(redeliver=True):
                os.kill(os.getpid(), signal.SIGHUP)
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler interrupts it
        assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGHUP, ignored)


@pytest.mark.parametrize(
    ("function", "args", "message"),
    [
        (dhir.parse_string, [b"x"], r"takes MLIR text \(str\), not bytes; decode bytes"),
        (dhir.parse_string, [None], r"parse_string takes MLIR text \(str\), not NoneType$"),
        (dhir.print_module, [None], r"print_module takes a module .*, not NoneType$"),
        (dhir.parse_file, [None], r"parse_file takes a path \(str or os.PathLike\), not NoneType$"),
        (dhir.parse_file, [3], r"parse_file takes a path .*, not int$"),
        (dhir.parse_file, [b"x.mlir"], r"not bytes; decode bytes first \(path.decode\(\)\)$"),
        (dhir.parse_file, [""], r"parse_file was given an empty path; name a .mlir file$"),
        (dhir.run_pipeline, ["func.func", "cse"], r"run_pipeline takes a module .*, not str$"),
        (dhir.run_pipeline, [None, "cse"], r"run_pipeline takes a module .*, not NoneType$"),
        # An AttributeError ('int' object has no attribute 'encode'), TypeErrors.
        (dhir.parse_string, ["", 5], r"name \(the file messages name\) takes a str, not int$"),
        (lambda: dhir.parse_string("", ctx=5), [], r"ctx takes an xdsl Context .*, not int$"),
        (lambda: dhir.parse_string("", line_offset="3"), [], r"line_offset takes .*got '3'$"),
        (lambda: dhir.parse_string("", line_offset=2.0), [], r"line_offset takes .*got 2\.0$"),
        # Lines numbered from -1: "<string>:0:7: error: ...".
        (lambda: dhir.parse_string("x", line_offset=-2), [], r"\(an int, 0 or more\), got -2$"),
        # "parse_string() got an unexpected keyword argument 'foo'".
        (lambda: dhir.parse_file(__file__, ctx=5), [], r"ctx takes an xdsl Context"),
    ],
)
def test_the_text_functions_refuse_arguments_of_a_wrong_type(
    function: Callable[..., object], args: list[object], message: str
) -> None:
    """They raised TypeError and AttributeError from inside xDSL (and pathlib; an empty
    path was the current folder: "cannot read .: Is a directory")."""
    with pytest.raises(DhirError, match=message):
        function(*args)


def test_parse_file_names_its_own_keywords() -> None:
    with pytest.raises(TypeError, match=r"parse_file\(\) got an unexpected keyword argument"):
        dhir.parse_file(__file__, foo=1)  # pyright: ignore[reportCallIssue]


def test_run_pipeline_refuses_passes_not_named_by_a_string() -> None:
    module: object = dhir.parse_string("")
    with pytest.raises(DhirError, match=r"by name \(str\), not NoneType$"):
        dhir.run_pipeline(module, None)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("function", "keyword"),
    [
        (dhir.print_module, "generic"),
        (dhir.print_module, "debuginfo"),
        (dhir.parse_string, "verify"),
    ],
)
@pytest.mark.parametrize("value", ["no", 0, None])
def test_the_text_functions_take_only_a_bool_to_a_flag(
    function: Callable[..., object], keyword: str, value: object
) -> None:
    """`generic="no"` printed the generic form, `verify=0` parsed without verifying."""
    argument = dhir.parse_string("") if function is dhir.print_module else ""
    with pytest.raises(DhirError, match=rf"{keyword} takes True or False, got {value!r}$"):
        function(argument, **{keyword: value})


@pytest.mark.parametrize("value", ["no", 0, None])
def test_run_pipeline_takes_only_a_bool_to_verify_each(value: object) -> None:
    module = dhir.parse_string("")
    with pytest.raises(DhirError, match=rf"verify_each takes True or False, got {value!r}$"):
        dhir.run_pipeline(module, "cse", verify_each=value)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("program", "keywords", "message"),
    [
        (None, {}, r"the program must be a path \(str or os.PathLike\), .* not NoneType$"),
        (b"func.func", {}, r"not bytes; decode bytes first \(program.decode\(\)\)"),
        (VECTOR_ADD, {"link": "rows.o"}, r"link takes a list .* give link=\['rows.o'\]"),
        (VECTOR_ADD, {"link": None}, r"link takes a list .*; got NoneType \(give \(\) for none\)"),
        (VECTOR_ADD, {"link": [3]}, r"link takes a list .*; got a word 3, not a str or path"),
        (VECTOR_ADD, {"costs": 5}, r"costs takes a path \(str or os.PathLike\), not int"),
        (VECTOR_ADD, {"output_dir": 1.5}, r"output_dir takes a path .* not float"),
        (VECTOR_ADD, {"entry": None}, r"entry takes a function's name \(str\), not NoneType$"),
        (VECTOR_ADD, {"codedrop": "no"}, r"codedrop takes True or False, got 'no'$"),
        (VECTOR_ADD, {"optimize": None}, r"optimize takes True or False, got None$"),
        (VECTOR_ADD, {"optimize": 1}, r"optimize takes True or False, got 1$"),
        (
            VECTOR_ADD,
            {"runtime_checks": 0.0},
            r'runtime_checks takes "none", "undecided" or "all" \(True for "all"\), got 0.0$',
        ),
        (
            VECTOR_ADD,
            {"codedrop": np.int64(0)},
            r"codedrop takes True or False, got np.int64\(0\)$",
        ),
    ],
)
def test_arguments_of_a_wrong_type_are_dhir_errors_saying_what_is_taken(
    program: object, keywords: dict[str, object], message: str
) -> None:
    with pytest.raises(DhirError, match=message):
        dhir.run(program, *vector_add_inputs(), backend="interp", **keywords)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("keyword", ["output_dir", "trace", "keep_build"])
def test_an_empty_path_is_refused(
    keyword: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path("") is the current folder: `output_dir=""` wrote the results there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DhirError, match=f"{keyword} is an empty path; name a file or folder"):
        dhir.run(VECTOR_ADD, *vector_add_inputs(), backend="interp", **{keyword: ""})  # pyright: ignore[reportArgumentType]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("backend", ["Interp", "interp ", None])
def test_an_unknown_backend_is_refused_before_any_work(backend: object, tmp_path: Path) -> None:
    """It was refused only as the run began: after parsing, and after the last run's
    results in `output_dir` were removed."""
    dhir.run(VECTOR_ADD, *vector_add_inputs(), backend="interp", output_dir=tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(DhirError, match=rf"unknown backend {backend!r}; choose one of native"):
        dhir.run(VECTOR_ADD, *vector_add_inputs(), backend=backend, output_dir=tmp_path)  # pyright: ignore[reportArgumentType]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(DhirError, match="unknown backend"):
        dhir.run("func.func @main() { %x = nonsense }", backend=backend)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("program", ["", "  ", "\n\t"])
def test_an_empty_program_is_refused(program: str) -> None:
    # "" was read as the current folder ("cannot read .: Is a directory"), "  " as a file.
    with pytest.raises(DhirError, match=r"the program is empty; give a .mlir file's path, MLIR"):
        dhir.run(program, backend="interp")


@pytest.mark.parametrize("ctx", [3, "builtin"])
def test_run_pipeline_takes_only_a_context_as_ctx(ctx: object) -> None:
    """Passes that do not read it ran as if it were one."""
    module = dhir.parse_string("")
    with pytest.raises(DhirError, match=r"ctx takes an xdsl Context \(or None for dhir's\), not"):
        dhir.run_pipeline(module, "canonicalize", ctx=ctx)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=pytest.mark.mlir)])
def test_a_module_that_does_not_verify_is_refused_at_its_line(backend: str) -> None:
    """A module parsed with verify=False (or built or changed by the caller) ran: the
    interpreter ran a function with no return, and mlir-opt stopped the native build."""
    text = "func.func @main(%a: memref<2xf64>) {\n  %c0 = arith.constant 0 : index\n}"
    module = dhir.parse_string(text, verify=False)
    with pytest.raises(DhirError, match=r"<string>:2:9: error: .* must end with its terminator"):
        dhir.run(module, np.zeros(2), backend=backend)


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=pytest.mark.mlir)])
def test_a_module_lowered_already_is_said_to_be(backend: str) -> None:
    """dhir.run of a module after run_pipeline's dhir-lower-to-mpi said to rename the
    steps the lowering made, as if they were the user's functions."""
    module = dhir.parse_file(VECTOR_ADD)
    dhir.run_pipeline(module, "dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}")
    with pytest.raises(DhirError, match=r"made: this module is lowered already, .* before dhir"):
        dhir.run(module, *vector_add_inputs(), backend=backend, ranks=2)


@pytest.mark.parametrize(
    ("entry", "shown"), [("", '@""'), ("main ", '@"main "'), ("nope", "@nope")]
)
def test_an_entry_the_module_lacks_is_named_as_mlir_writes_it(entry: str, shown: str) -> None:
    """An empty name was said as "no function @ to run", one with a blank as "@main  to
    run", and the way to choose pointed at --entry alone."""
    with pytest.raises(DhirError) as caught:
        dhir.run(VECTOR_ADD, *vector_add_inputs(), backend="interp", entry=entry)
    assert str(caught.value).strip() == (
        f"error: no function {shown} to run; the module defines @main (choose one with "
        "--entry, or entry= in dhir.run)"
    )


@dataclass(frozen=True)
class _DropReturns(ModulePass):
    """A pass that leaves every function without its terminator."""

    name = "drop-returns"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for ret in [o for o in op.walk() if isinstance(o, func.ReturnOp)]:
            ret.detach()
            ret.erase()


def test_a_pipeline_object_is_verified_after_each_pass_too() -> None:
    """Only a pipeline given by name was: a PassPipeline's broken module came back."""
    seen: list[str] = []
    pipeline = PassPipeline((_DropReturns(),), lambda prev, _m, _n: seen.append(str(prev)))
    module = dhir.parse_string("func.func @main() {\n  return\n}")
    with pytest.raises(DhirError, match=r"<string>:1:1: .*needs a terminator"):
        dhir.run_pipeline(module, pipeline)
    assert len(seen) == 2  # the caller's callback ran, before and after the pass
    unchecked = dhir.parse_string("func.func @main() {\n  return\n}")
    dhir.run_pipeline(unchecked, pipeline, verify_each=False)
