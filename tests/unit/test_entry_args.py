"""Entry arguments and results: types parsed as types, 0-d memrefs, scalar ranges, input
files, the interpreter's timeout, located errors and results written whole."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import DhirError
from dhir.toolchain import signature as signature_module
from dhir.toolchain import values as values_module
from dhir.toolchain.entry import entry_signature
from dhir.toolchain.staging import parse_scalar
from dhir.toolchain.values import save_outputs

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dhir.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )


# --- 8: memref<4xindex> -------------------------------------------------------------------

INDEX_PROGRAM = """
func.func @main(%a: memref<4xindex>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a RANK1 {
      %c0 = arith.constant 0 : index
      %v = memref.load %a[%c0] : memref<4xindex>
      %w = arith.addi %v, %v : index
      memref.store %w, %a[%c0] : memref<4xindex>
    }
    %t1 = dhir.task %cpu, %a RANK0 {
      %c0 = arith.constant 0 : index
      %c3 = arith.constant 3 : index
      %v = memref.load %a[%c0] : memref<4xindex>
      memref.store %v, %a[%c3] : memref<4xindex>
    }
  }
  return
}
"""


def _placed(text: str, ranks: int) -> str:
    on = {1: "attributes {dhir.rank = 1}", 0: "attributes {dhir.rank = 0}"} if ranks > 1 else {}
    return text.replace("RANK1", on.get(1, "")).replace("RANK0", on.get(0, ""))


def _index_numpy(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a[0] *= 2
    a[3] = a[0]
    return a


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_index_memrefs_run_natively(ranks: int) -> None:
    program = _placed(INDEX_PROGRAM, ranks)
    a = np.array([21, 1, 2, 3], np.int64)
    native = dhir.run(program, a, ranks=ranks)[0]
    oracle = dhir.run(program, a, backend="interp")[0]
    np.testing.assert_array_equal(native, oracle)
    np.testing.assert_array_equal(native, _index_numpy(a))


# --- 9: 0-d memrefs -----------------------------------------------------------------------

ZERO_D_PROGRAM = """
func.func @main(%s: memref<f32>, %v: memref<4xf32>) {
  dhir.schedule %s, %v {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %s RANK1 {
      %x = memref.load %s[] : memref<f32>
      %k = arith.constant 2.5 : f32
      %y = arith.mulf %x, %k : f32
      memref.store %y, %s[] : memref<f32>
    }
    %t1 = dhir.task %cpu, %s, %v RANK0 {
      %c2 = arith.constant 2 : index
      %x = memref.load %s[] : memref<f32>
      memref.store %x, %v[%c2] : memref<4xf32>
    }
  }
  return
}
"""


def _zero_d_numpy(s: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = (s * np.float32(2.5)).astype(np.float32)
    v = v.copy()
    v[2] = s
    return s, v


def test_the_interpreter_keeps_0d_memrefs_0d(tmp_path: Path) -> None:
    s, v = np.array(1.5, np.float32), np.zeros(4, np.float32)
    results = dhir.run(ZERO_D_PROGRAM.replace("RANK1", "").replace("RANK0", ""), s, v,
                       backend="interp", output_dir=tmp_path)  # fmt: skip
    want_s, want_v = _zero_d_numpy(s, v)
    assert results[0].shape == () and np.load(tmp_path / "arg0.npy").shape == ()
    np.testing.assert_array_equal(results[0], want_s)
    np.testing.assert_array_equal(results[1], want_v)


@needs_llvm
@pytest.mark.parametrize("ranks", [1, 2])
def test_0d_memrefs_run_natively_like_the_interpreter_and_numpy(tmp_path: Path, ranks: int) -> None:
    program = _placed(ZERO_D_PROGRAM, ranks)  # on 2 ranks, rank 1 writes the 0-d memref
    s, v = np.array(1.5, np.float32), np.arange(4, dtype=np.float32)
    native = dhir.run(program, s, v, ranks=ranks, output_dir=tmp_path)
    oracle = dhir.run(program, s, v, backend="interp")
    for got, interp, want in zip(native, oracle, _zero_d_numpy(s, v)):
        assert got.shape == interp.shape == want.shape
        np.testing.assert_array_equal(got, interp)
        np.testing.assert_array_equal(got, want)
    assert np.load(tmp_path / "arg0.npy").shape == ()


# --- 12: the command line -----------------------------------------------------------------

SCALARS_PROGRAM = """
func.func @main(%b: i1, %c: i8, %u: ui8, %w: ui64, %x: index, %h: f16, %out: memref<3xi64>,
                %uo: memref<2xui64>) {
  dhir.schedule %out, %uo {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %out, %uo {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %bb = arith.extui %b : i1 to i64
      %cc = arith.extsi %c : i8 to i64
      %xx = arith.index_cast %x : index to i64
      memref.store %bb, %out[%c0] : memref<3xi64>
      memref.store %cc, %out[%c1] : memref<3xi64>
      memref.store %xx, %out[%c2] : memref<3xi64>
      memref.store %w, %uo[%c0] : memref<2xui64>
    }
  }
  return
}
"""


@pytest.fixture
def scalars(tmp_path: Path) -> Path:
    path = tmp_path / "scalars.mlir"
    path.write_text(SCALARS_PROGRAM)
    np.save(tmp_path / "out.npy", np.zeros(3, np.int64))
    np.save(tmp_path / "uo.npy", np.zeros(2, np.uint64))
    return path


def _scalar_inputs(path: Path, **given: str) -> list[str]:
    values = {"i1": "1", "i8": "-128", "ui8": "255", "ui64": str(2**64 - 1), "index": "-7"}
    values |= {"f16": "1.5", **given}
    words = [f"{t}={values[t]}" for t in ("i1", "i8", "ui8", "ui64", "index", "f16")]
    words += [str(path.parent / "out.npy"), str(path.parent / "uo.npy")]
    return [w for word in words for w in ("--input", word)]


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ({"i1": "2"}, "2 is out of range for i1, which holds 0..1"),
        ({"i1": "-1"}, "-1 is out of range for i1"),
        ({"i8": "300"}, "300 is out of range for i8, which holds -128..127"),
        ({"ui8": "256"}, "256 is out of range for ui8, which holds 0..255"),
        ({"ui8": "-1"}, "-1 is out of range for ui8"),
        ({"ui64": str(2**64)}, f"{2**64} is out of range for ui64"),
        ({"index": str(2**63)}, f"{2**63} is out of range for index"),
        ({"f16": "1e6"}, "1e+06 is out of range for f16"),
    ],
)
def test_scalars_out_of_range_are_refused(scalars: Path, given: dict[str, str], shown: str) -> None:
    result = cli("run", str(scalars), "--backend", "interp", *_scalar_inputs(scalars, **given))
    assert result.returncode == 1, result.stdout
    assert shown in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ({"i8": "1e3"}, "'1e3' is not an i8; give an integer written as one: 1000, -3, 0x7f"),
        ({"index": "7.0"}, "'7.0' is not an index; give an integer written as one"),
        ({"i1": "yes"}, "'yes' is not an i1; give 0, 1, true or false"),
        ({"f16": "1.8p1"}, "'1.8p1' is not an f16; give a number: 2.5, -1e-3, 0x1.8p1"),
        # Python's int() and float() take these: they ran as 3000, 3 and 10.5.
        ({"index": "3_000"}, "'3_000' is not an index; give an integer written as one"),
        ({"index": "\u0663"}, "'\u0663' is not an index; give an integer written as one"),
        ({"f16": "1_0.5"}, "'1_0.5' is not an f16; give a number"),
    ],
)
def test_scalars_not_written_as_their_type_say_how_to_write_it(
    scalars: Path, given: dict[str, str], shown: str
) -> None:
    result = cli("run", str(scalars), "--backend", "interp", *_scalar_inputs(scalars, **given))
    assert result.returncode == 1, result.stdout
    assert shown in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("3_000", "i"),
        ("\u0663", "i"),
        ("0x_7f", "i"),
        (" 3", "i"),
        ("\u0663", "b"),
        ("1_0.5", "f"),
        ("\u0661.5", "f"),
    ],
)
def test_scalars_are_read_in_ascii_alone(text: str, kind: str) -> None:
    # What the cached `dhir run` stages for the executable, as the full path reads it.
    with pytest.raises(ValueError):
        parse_scalar(text, kind)


def test_scalars_out_of_range_are_refused_by_the_api() -> None:
    with pytest.raises(DhirError, match="out of range for i1"):
        dhir.run(SCALARS_PROGRAM, 2, 2, 3, 4, 5, 1.0, np.zeros(3, np.int64),
                 np.zeros(2, np.uint64), backend="interp")  # fmt: skip
    with pytest.raises(DhirError, match="2.5 is not an integer"):
        dhir.run(SCALARS_PROGRAM, 2.5, 2, 3, 4, 5, 1.0, np.zeros(3, np.int64),
                 np.zeros(2, np.uint64), backend="interp")  # fmt: skip
    with pytest.raises(DhirError, match=r"give a number, not str '1.5'"):
        dhir.run(SCALARS_PROGRAM, 1, 2, 3, 4, 5, "1.5", np.zeros(3, np.int64),
                 np.zeros(2, np.uint64), backend="interp")  # fmt: skip
    with pytest.raises(DhirError, match=r"\.\.\.0* \(401 characters\) is out of range for i8"):
        dhir.run(SCALARS_PROGRAM, 1, 10**400, 3, 4, 5, 1.0, np.zeros(3, np.int64),
                 np.zeros(2, np.uint64), backend="interp")  # fmt: skip
    with pytest.raises(DhirError, match=r"cannot use 10*\.\.\.0* \(401 characters\) as f16$"):
        dhir.run(SCALARS_PROGRAM, 1, 2, 3, 4, 5, 10**400, np.zeros(3, np.int64),
                 np.zeros(2, np.uint64), backend="interp")  # fmt: skip


def _scalars_with(**given: object) -> list[object]:
    """SCALARS_PROGRAM's arguments, those named in `given` (b, c, u, w, x, h) replaced."""
    values: dict[str, object] = {"b": 1, "c": 2, "u": 3, "w": 4, "x": 5, "h": 1.0}
    values.update(given)
    return [*values.values(), np.zeros(3, np.int64), np.zeros(2, np.uint64)]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # `--input index=7.0` and `i32=1e3` are refused; 3.0 and True ran as 3 and 1.
        ({"x": 3.0}, r"argument #4 of @main \(index\): 3\.0 is not an integer \(it is a float\); "
         r"index needs one; give int\(3\.0\)"),
        ({"c": np.float64(2.0)}, r"argument #1 of @main \(i8\): 2\.0 is not an integer"),
        ({"w": np.array(1e3)}, r"argument #3 of @main \(ui64\): 1000\.0 is not an integer"),
        ({"b": 1.0}, r"argument #0 of @main \(i1\): 1\.0 is not an integer"),
        ({"x": True}, r"argument #4 of @main \(index\): True is a bool; index needs an integer"),
        ({"u": np.bool_(False)}, r"argument #2 of @main \(ui8\): False is a bool"),
        ({"h": True}, r"argument #5 of @main \(f16\): True is a bool; f16 needs a number"),
    ],
)  # fmt: skip
def test_scalars_of_another_kind_are_refused_as_dhir_run_refuses_them(
    given: dict[str, object], message: str
) -> None:
    with pytest.raises(DhirError, match=message):
        dhir.run(SCALARS_PROGRAM, *_scalars_with(**given), backend="interp")


def test_scalars_of_their_own_kind_are_taken() -> None:
    """An i1 takes a bool (`--input i1=true`), any scalar an int of Python or NumPy, a
    float type an int too (`--input f16=2`)."""
    given = _scalars_with(b=np.bool_(True), c=np.int8(-7), u=np.uint8(255), x=np.int64(9), h=2)
    results = dhir.run(SCALARS_PROGRAM, *given, backend="interp")
    np.testing.assert_array_equal(results[6], [1, -7, 9])
    assert results[5] == 2.0 and results[5].dtype == np.float16


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_scalars_at_the_ends_of_their_range_run(
    scalars: Path, tmp_path: Path, backend: str
) -> None:
    out = tmp_path / "results"
    inputs = _scalar_inputs(scalars, i1="true")
    result = cli("run", str(scalars), "-n", "2", "--backend", backend, *inputs,
                 "--output-dir", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out / "arg6.npy"), [1, -128, -7])
    np.testing.assert_array_equal(np.load(out / "arg7.npy"), np.array([2**64 - 1, 0], np.uint64))


@pytest.mark.parametrize("command", ["run", "compile"])
@pytest.mark.parametrize("ranks", ["0", "-1"])
def test_rank_counts_below_one_are_errors(tmp_path: Path, command: str, ranks: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_placed(INDEX_PROGRAM, 1))
    more = ["-o", str(tmp_path / "exe")] if command == "compile" else []
    result = cli(command, str(program), "-n", ranks, *more)
    assert result.returncode != 0
    assert f"the rank count must be at least 1, got {ranks}" in result.stderr


def test_the_api_refuses_zero_ranks_on_every_backend() -> None:
    for backend in ("interp", "native"):
        with pytest.raises(DhirError, match="at least 1, got 0"):
            dhir.run(INDEX_PROGRAM.replace("RANK1", "").replace("RANK0", ""),
                     np.zeros(4, np.int64), ranks=0, backend=backend)  # fmt: skip


ENDLESS_PROGRAM = """
func.func @main(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %true = arith.constant true
      %c0 = arith.constant 0 : index
      %r = scf.while (%i = %c0) : (index) -> index {
        scf.condition(%true) %i : index
      } do {
      ^bb0(%j: index):
        scf.yield %j : index
      }
    }
  }
  return
}
"""


def test_the_interpreter_honours_the_timeout(tmp_path: Path) -> None:
    program = tmp_path / "endless.mlir"
    program.write_text(ENDLESS_PROGRAM)
    np.save(tmp_path / "a.npy", np.zeros(4, np.float32))
    result = cli("run", str(program), "--backend", "interp", "--timeout", "1",
                 "--input", str(tmp_path / "a.npy"))  # fmt: skip
    assert result.returncode == 1
    assert "the interpreter timed out after 1 s" in result.stderr
    assert f"{program}:" in result.stderr and "Traceback" not in result.stderr
    # What to do: not only that it stopped.
    assert "; give it longer with --timeout S (timeout= in dhir.run)" in result.stderr
    with pytest.raises(DhirError, match="timed out after 0.5 s"):
        dhir.run(ENDLESS_PROGRAM, np.zeros(4, np.float32), backend="interp", timeout=0.5)


@needs_llvm
def test_a_native_run_past_its_timeout_says_one_rank() -> None:
    # A store in the loop: mlir-opt-22 removes a loop without effects, endless or not.
    storing = ENDLESS_PROGRAM.replace(
        "^bb0(%j: index):\n",
        "^bb0(%j: index):\n        %one = arith.constant 1.0 : f32\n"
        "        memref.store %one, %a[%c0] : memref<4xf32>\n",
    )
    with pytest.raises(DhirError, match="timed out after 1 s on 1 rank and was killed") as error:
        dhir.run(storing, np.zeros(4, np.float32), timeout=1)
    assert "; give it longer with --timeout S (timeout= in dhir.run)" in str(error.value)


def test_a_text_file_is_not_a_npy_file(tmp_path: Path) -> None:
    text = tmp_path / "values.txt"
    text.write_text("1 2 3 4\n")
    program = tmp_path / "p.mlir"
    program.write_text(ENDLESS_PROGRAM)
    result = cli("run", str(program), "--backend", "interp", "--input", str(text))
    assert result.returncode == 1
    assert f"'{text}' is not a .npy file" in result.stderr
    assert "pickle" not in result.stderr


def test_a_npy_file_of_objects_is_said_to_hold_objects(tmp_path: Path) -> None:
    """Its pickled bytes are fewer than its shape of pointers: the error said the file held
    fewer bytes than its header's shape needs."""
    objects = tmp_path / "objects.npy"
    np.save(objects, np.zeros(4, object), allow_pickle=True)
    program = tmp_path / "p.mlir"
    program.write_text(ENDLESS_PROGRAM)
    result = cli("run", str(program), "--backend", "interp", "--input", str(objects))
    assert result.returncode == 1
    assert f"'{objects}' holds Python objects (dtype object), not numbers" in result.stderr


def test_a_npy_file_with_a_damaged_header_says_so(tmp_path: Path) -> None:
    """The error ended in the tokenizer's `('EOF in multi-line statement', (2, 0))`."""
    np.save(tmp_path / "a.npy", np.zeros(4))
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "a.npy").write_bytes(data[:10] + b"{{{garbage" + data[20:])
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main(%a: memref<4xf64>) {\n  return\n}\n")
    result = cli("run", str(program), "--backend", "interp", "--input", str(tmp_path / "a.npy"))
    assert result.returncode == 1
    wanted = "its header is damaged (not the text numpy.save writes)"
    assert f"cannot read '{tmp_path / 'a.npy'}' as a .npy file: {wanted}" in result.stderr


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_a_big_endian_npy_is_converted_losslessly(tmp_path: Path, backend: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(ZERO_D_PROGRAM.replace("RANK1", "").replace("RANK0", ""))
    values = np.array([1.25, -2.0, 3.0e38, 7.0], dtype=">f4")
    np.save(tmp_path / "s.npy", np.array(4.0, ">f4"))
    np.save(tmp_path / "v.npy", values)
    out = tmp_path / "out"
    result = cli("run", str(program), "--backend", backend, "--input", str(tmp_path / "s.npy"),
                 "--input", str(tmp_path / "v.npy"), "--output-dir", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    want = values.astype(np.float32)
    want[2] = 10.0
    np.testing.assert_array_equal(np.load(out / "arg1.npy"), want)
    assert np.load(out / "arg1.npy").dtype == np.float32


BOOL_PROGRAM = """func.func @main(%a: memref<4xi1>, %b: memref<4xi1>, %c: memref<4xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %true = arith.constant true
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xi1>
    %y = arith.xori %x, %true : i1
    memref.store %y, %b[%i] : memref<4xi1>
    %z = arith.extui %x : i1 to i8
    memref.store %z, %c[%i] : memref<4xi8>
  }
  return
}
"""


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
def test_bool_arrays_with_other_true_bytes_run_as_numpy_reads_them(backend: str) -> None:
    """A uint8 array viewed as bool holds 2 and 255 for True: the native code read them as
    they were (not 2 = 3, extui 2 = 2), where NumPy and the interpreter see True."""
    a = np.array([0, 1, 2, 255], np.uint8).view(np.bool_)
    b, c = np.zeros(4, np.bool_), np.zeros(4, np.int8)
    _, not_a, widened = dhir.run(BOOL_PROGRAM, a, b, c, backend=backend)
    np.testing.assert_array_equal(not_a.view(np.uint8), [1, 0, 0, 0])
    np.testing.assert_array_equal(widened, [0, 1, 1, 1])


NAN_PROGRAM = """func.func @main(%h: f16, %s: f32, %d: f64, %hs: memref<1xf16>,
                 %ss: memref<1xf32>, %ds: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  memref.store %h, %hs[%c0] : memref<1xf16>
  memref.store %s, %ss[%c0] : memref<1xf32>
  memref.store %d, %ds[%c0] : memref<1xf64>
  return
}
"""

# NaNs by their bits (f16, f32, f64): signalling with a payload, then quiet ones with a
# payload and a sign. strtod reads every NaN as the one "nan" names.
NANS = {
    "signalling": (0x7C01, 0x7F80_0001, 0x7FF0_0000_0000_0001),
    "payload": (0xFE23, 0xFFC0_0456, 0xFFF8_0000_0000_0456),
}


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=needs_llvm)])
@pytest.mark.parametrize("kind", NANS)
def test_scalar_nans_keep_their_bits(backend: str, kind: str) -> None:
    """A NaN scalar reached native code as the NaN strtod makes of "nan" (its payload and
    signal lost), and the API quieted an f32 one that signals (item() converts it)."""
    dtypes = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)]
    raw = [np.array(bits, f"u{t.itemsize}") for bits, t in zip(NANS[kind], dtypes, strict=True)]
    scalars = [bits.view(t)[()] for bits, t in zip(raw, dtypes, strict=True)]
    stores = [np.zeros(1, t) for t in dtypes]
    results = dhir.run(NAN_PROGRAM, *scalars, *stores, backend=backend)
    for bits, given, stored in zip(raw, results[:3], results[3:], strict=True):
        assert given.view(bits.dtype) == bits  # the scalar given back as it was given
        assert stored.view(bits.dtype)[0] == bits


def test_float_scalars_in_cs_hex_form_run(tmp_path: Path) -> None:
    """The executable reads C's hex floats (strtod); `--input f32=0x1.8p1` was refused."""
    program = tmp_path / "p.mlir"
    program.write_text(NAN_PROGRAM)
    stores = []
    for k, dtype in enumerate((np.float16, np.float32, np.float64)):
        np.save(tmp_path / f"s{k}.npy", np.zeros(1, dtype))
        stores += ["--input", str(tmp_path / f"s{k}.npy")]
    scalars = ["f16=0x1.8p1", "f32=-0x1p-149", "f64=0x1.fffffffffffffp1023"]
    out = tmp_path / "out"
    result = cli("run", str(program), "--backend", "interp", "--output-dir", str(out),
                 *[w for s in scalars for w in ("--input", s)], *stores)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert np.load(out / "arg3.npy")[0] == 3.0
    assert np.load(out / "arg4.npy")[0] == -(2.0**-149)
    assert np.load(out / "arg5.npy")[0] == np.finfo(np.float64).max


GPU_HOST_PROGRAM = """func.func @main(%a: memref<16xf32>) {
  dhir.schedule %a {
    %gpu = dhir.target {kind = "gpu"}
    %t0 = dhir.task %gpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
        memref.store %one, %a[%i] : memref<16xf32>
      }
      %v = memref.load %a[%c0] : memref<16xf32>
    }
  }
  return
}
"""


@needs_llvm
def test_gpu_host_code_errors_point_at_the_users_line(tmp_path: Path) -> None:
    program = tmp_path / "gpu.mlir"
    program.write_text(GPU_HOST_PROGRAM)
    result = cli("compile", str(program), "-o", str(tmp_path / "exe"))
    assert result.returncode == 1
    assert f"{program}:12:12: error:" in result.stderr, result.stderr
    assert "uses %a in 'memref.load' outside a kernel" in result.stderr
    assert "<mlir-opt" not in result.stderr


# --- 13: results written whole --------------------------------------------------------------


def _two_results() -> tuple[list[np.ndarray], signature_module.EntrySignature]:
    module = dhir.parse_string(ZERO_D_PROGRAM.replace("RANK1", "").replace("RANK0", ""))
    results = [np.array(2.0, np.float32), np.arange(4, dtype=np.float32)]
    return results, entry_signature(module, "main")


def test_results_written_midway_leave_no_arg_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, signature = _two_results()
    real_save = np.save
    calls: list[int] = []

    def failing_save(file: object, array: np.ndarray) -> None:
        calls.append(1)
        if len(calls) == 2:  # the second result: part of it written, then the disk is full
            os.write(file.fileno(), b"\x93NUMPY")  # type: ignore[attr-defined]
            raise OSError(28, "No space left on device")
        real_save(file, array)  # type: ignore[arg-type]

    monkeypatch.setattr(values_module.np, "save", failing_save)
    with pytest.raises(DhirError, match="No space left"):
        save_outputs(results, signature, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_results_renamed_midway_leave_no_arg_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    # An error, Ctrl-C, SIGTERM or SIGHUP (signals.py) between two renames: none or all.
    results, signature = _two_results()
    real_replace = os.replace
    calls: list[int] = []

    def failing_replace(source: Path, destination: Path) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise error
        real_replace(source, destination)

    monkeypatch.setattr(signature_module.os, "replace", failing_replace)
    with pytest.raises((DhirError, KeyboardInterrupt)):
        save_outputs(results, signature, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_saved_results_are_complete_and_leave_no_temporary_files(tmp_path: Path) -> None:
    results, signature = _two_results()
    save_outputs(results, signature, tmp_path)
    files = ["arg0.npy", "s.npy", "arg1.npy", "v.npy"]  # by position and by name (%s, %v)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".dhir-results", *files])
    listed = (tmp_path / ".dhir-results").read_text().splitlines()
    assert [line.split("\t")[0] for line in listed] == files
    for k, array in enumerate(results):
        for name in (f"arg{k}.npy", files[2 * k + 1]):
            loaded = np.load(tmp_path / name)
            assert loaded.shape == array.shape
            np.testing.assert_array_equal(loaded, array)


def test_an_argument_named_like_a_result_file_is_saved_under_its_position_only(
    tmp_path: Path,
) -> None:
    """%res0 beside an entry's result 0: res0.npy held the result, not %res0's value."""
    program = """func.func @main(%res0: memref<4xf64>, %t: tensor<4xf64>) -> tensor<4xf64> {
  %c0 = arith.constant 0 : index
  %v = arith.constant 5.0 : f64
  memref.store %v, %res0[%c0] : memref<4xf64>
  %e = tensor.empty() : tensor<4xf64>
  %r = linalg.add ins(%t, %t : tensor<4xf64>, tensor<4xf64>) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  return %r : tensor<4xf64>
}
"""
    dhir.run(program, np.zeros(4), np.ones(4), backend="interp", output_dir=tmp_path)
    names = [".dhir-results", "arg0.npy", "res0.npy"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    np.testing.assert_array_equal(np.load(tmp_path / "arg0.npy"), [5.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.load(tmp_path / "res0.npy"), [2.0] * 4)
    listed = (tmp_path / ".dhir-results").read_text().splitlines()
    assert [line.split("\t")[0] for line in listed] == ["arg0.npy", "res0.npy"]


def test_an_earlier_result_the_user_has_replaced_is_not_removed(tmp_path: Path) -> None:
    """A later run removes what the last one wrote, but not a file the user saved since
    under the same name."""
    results, signature = _two_results()
    save_outputs(results, signature, tmp_path)
    np.save(tmp_path / "v.npy", np.arange(5.0))  # the user's own data now
    signature_module.clear_outputs(signature_module.EntrySignature("other", ()), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), np.arange(5.0))


def test_a_run_that_fails_midway_writes_no_results(tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(ENDLESS_PROGRAM)
    np.save(tmp_path / "a.npy", np.zeros(4, np.float32))
    out = tmp_path / "out"
    result = cli("run", str(program), "--backend", "interp", "--timeout", "0.5",
                 "--input", str(tmp_path / "a.npy"), "--output-dir", str(out))  # fmt: skip
    assert result.returncode == 1
    assert not out.exists() or list(out.iterdir()) == []
