""".npy files without NumPy (dhir.toolchain.npy, dhir.toolchain.staging): `dhir run`'s
cached path must stage exactly the files and words NumPy's path stages, and decline
every input that path refuses or converts."""

import io
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dhir import DhirError
from dhir.cli.arguments import read_inputs
from dhir.toolchain.harness import command_line_args
from dhir.toolchain.npy import header_bytes, read_header
from dhir.toolchain.signature import DYNAMIC, ArgSpec, EntrySignature, write_outputs
from dhir.toolchain.staging import check_result, result_writers, stage_inputs
from dhir.toolchain.values import check_inputs, save_outputs, with_results

DTYPES = ["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "|u1", "|b1"]
TYPES = {
    "<f8": "f64", "<f4": "f32", "<f2": "f16", "<i8": "i64", "<i4": "i32", "<i2": "i16",
    "|i1": "i8", "<u8": "ui64", "<u4": "ui32", "|u1": "ui8", "|b1": "i1",
}  # fmt: skip
SLOW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("code", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 1, 4)])
def test_our_header_is_numpys_byte_for_byte(code: str, shape: tuple[int, ...]) -> None:
    file = io.BytesIO()
    np.save(file, np.zeros(shape, code))
    ours = header_bytes(code, shape)
    assert file.getvalue()[: len(ours)] == ours


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_headers_numpy_writes_are_read(
    tmp_path: Path, version: tuple[int, int], order: str
) -> None:
    array = np.asfortranarray(np.ones((3, 4), ">f4")) if order == "F" else np.ones((3, 4), ">f4")
    path = tmp_path / "a.npy"
    with open(path, "wb") as file:
        np.lib.format.write_array(file, array, version=version)
    header = read_header(path)
    assert header is not None
    assert (header.code, header.fortran, header.shape) == (">f4", order == "F", (3, 4))
    assert path.stat().st_size == header.offset + array.nbytes


@pytest.mark.parametrize(
    "content",
    [b"", b"plain text", b"\x93NUMPY\x01\x00\x05\x00{'a'}", b"\x93NUMPY\x09\x00\x00\x00",
     b"\x93NUMPY\x01\x00\x40\x00{'descr': '<f8', 'fortran_order': 0, 'shape': (2,), }" + b" " * 8],
)  # fmt: skip
def test_files_that_are_not_plain_npy_are_left_to_numpy(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.npy"
    path.write_bytes(content)
    assert read_header(path) is None
    assert read_header(tmp_path / "absent.npy") is None


# --- staging matches NumPy's path -----------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[EntrySignature, list[object]]:
    """A signature of memrefs and scalars, and for each given argument what the user
    gives: an array (sometimes of another dtype, byte order, layout or shape than the
    argument's) or a scalar's text (sometimes out of range or not a number)."""
    specs, values = [], []
    for index in range(draw(st.integers(1, 4))):
        code = draw(st.sampled_from(DTYPES))
        if draw(st.booleans()):
            shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
            role = draw(st.sampled_from(["arg", "arg", "input", "result"]))
            dynamic = role != "result" and draw(st.booleans())
            declared = tuple(DYNAMIC if dynamic and draw(st.booleans()) else n for n in shape)
            type_ = (
                f"memref<{'x'.join([*('?' if n < 0 else str(n) for n in declared), TYPES[code]])}>"
            )
            result = index if role == "result" else None
            specs.append(ArgSpec(index, type_, code, declared, f"v{index}", role, result))
            if role != "result":
                values.append(draw(arrays(code, shape)))
        else:
            specs.append(ArgSpec(index, TYPES[code], code, None, f"s{index}"))
            values.append(draw(scalar_texts(code)))
    return EntrySignature("main", tuple(specs)), values


@st.composite
def arrays(draw: st.DrawFn, code: str, shape: tuple[int, ...]) -> np.ndarray:
    """Mostly the argument's own kind of array: only those reach the comparison."""
    kind = draw(st.sampled_from(["same"] * 6 + ["swapped", "fortran", "other", "reshaped"]))
    array = (np.arange(math.prod(shape)) * 37 % 11).astype(code).reshape(shape)
    if kind == "swapped":
        return array.astype(array.dtype.newbyteorder(">" if code[0] == "<" else "<"))
    if kind == "fortran":
        return np.asfortranarray(array)
    if kind == "other":
        return array.astype("<f8" if code != "<f8" else "<i4")
    if kind == "reshaped":
        return array.reshape((*shape, 1))
    return array


def scalar_texts(code: str) -> st.SearchStrategy[str]:
    """Mostly numbers the type holds; sometimes just outside, or not numbers at all."""
    if code[1] == "f":
        fitting = st.floats(width=8 * int(code[2:])).map(repr)
    else:
        bits = 8 * int(code[2:])
        low, high = {"b": (0, 1), "u": (0, 2**bits - 1)}.get(
            code[1], (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
        edges = st.sampled_from([low - 1, low, high, high + 1])
        fitting = st.one_of(st.integers(low, high), edges).map(str)
    anything = st.one_of(
        st.integers(-(2**65), 2**65).map(str),
        st.floats(allow_nan=True).map(repr),
        st.sampled_from(["1e39", "65520", "65519.99", "-0.0", "inf", "0x7f", "true", "x", "2.5"]),
    )
    prefix = st.sampled_from([TYPES[code]] * 5 + ["f64"])
    return st.tuples(prefix, st.one_of(fitting, fitting, fitting, anything)).map("=".join)


def numpy_path(
    signature: EntrySignature, given: list[str], work: Path
) -> tuple[list[str], list[bytes]] | None:
    """What `dhir run`'s NumPy path stages: its words and its memrefs' raw files; None
    when it refuses the inputs."""
    try:
        arrays = check_inputs(signature, with_results(signature, read_inputs(given, signature)))
    except DhirError:
        return None
    values = [a.shape if s.is_memref else a.item() for s, a in zip(signature.args, arrays)]
    paths = {s.index: str(work / f"in{s.index}.raw") for s in signature.args if s.is_memref}
    raw = [arrays[s.index].astype(arrays[s.index].dtype.newbyteorder("<")).tobytes()
           for s in signature.args if s.is_memref]  # fmt: skip
    return command_line_args(signature, paths, values), raw


@SLOW
@given(cases())
def test_staging_stages_what_numpy_stages_or_declines(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[EntrySignature, list[object]]
) -> None:
    signature, values = case
    work = tmp_path_factory.mktemp("work")
    given_ = []
    for k, value in enumerate(values):
        if isinstance(value, np.ndarray):
            np.save(work / f"given{k}.npy", value)
            given_.append(str(work / f"given{k}.npy"))
        else:
            given_.append(str(value))
    agree(signature, given_, work)


@SLOW
@given(st.sampled_from(DTYPES).flatmap(lambda code: st.tuples(st.just(code), scalar_texts(code))))
def test_a_scalar_is_staged_as_numpy_stages_it_or_declined(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, str]
) -> None:
    code, text = case
    signature = EntrySignature("main", (ArgSpec(0, TYPES[code], code, None, "s"),))
    agree(signature, [text], tmp_path_factory.mktemp("work"))


def agree(signature: EntrySignature, given_: list[str], work: Path) -> None:
    """Staging gives NumPy's path's words and files, or declines."""
    expected = numpy_path(signature, given_, work)
    staged = stage_inputs(signature, given_, work)
    if staged is None:
        return  # NumPy's path runs instead: it converts the input, or says what is wrong
    assert expected is not None, "staged what NumPy's path refuses"
    words, raw = expected
    assert command_line_args(signature, staged.paths, staged.values) == words
    files = [Path(staged.paths[s.index]).read_bytes() for s in signature.args if s.is_memref]
    assert files == raw


def test_plain_inputs_are_staged_not_declined(tmp_path: Path) -> None:
    signature = EntrySignature(
        "main",
        (
            ArgSpec(0, "memref<?x3xf64>", "<f8", (DYNAMIC, 3), "a"),
            ArgSpec(1, "f32", "<f4", None, "x"),
            ArgSpec(2, "ui64", "<u8", None, "n"),
            ArgSpec(3, "memref<2xi32>", "<i4", (2,), None, "result", 0),
        ),
    )
    np.save(tmp_path / "a.npy", np.ones((4, 3)))
    staged = stage_inputs(signature, [str(tmp_path / "a.npy"), "f32=0.1", "ui64=2**64-1"], tmp_path)
    assert staged is None  # 2**64-1 is not a number the full path reads either
    given = [str(tmp_path / "a.npy"), "f32=0.1", f"ui64={2**64 - 1}"]
    staged = stage_inputs(signature, given, tmp_path)
    assert staged is not None
    words = command_line_args(signature, staged.paths, staged.values)
    assert words[1:] == ["4", float(np.float32(0.1)).hex(), "-1", staged.paths[3]]
    assert Path(staged.paths[3]).read_bytes() == bytes(8)


def test_bool_bytes_other_than_0_and_1_are_staged_as_true(tmp_path: Path) -> None:
    """NumPy takes any non-zero byte of a bool array as True; compiled i1 code would read
    2 as 2, so both paths stage each as 1."""
    signature = EntrySignature("main", (ArgSpec(0, "memref<5xi1>", "|b1", (5,), "m"),))
    array = np.array([0, 1, 2, 128, 255], np.uint8).view(np.bool_)
    np.save(tmp_path / "m.npy", array)
    staged = stage_inputs(signature, [str(tmp_path / "m.npy")], tmp_path)
    assert staged is not None
    assert Path(staged.paths[0]).read_bytes() == bytes([0, 1, 1, 1, 1])
    (checked,) = check_inputs(signature, [array])
    assert checked.view(np.uint8).tolist() == [0, 1, 1, 1, 1]
    agree(signature, [str(tmp_path / "m.npy")], tmp_path)


# --- results ----------------------------------------------------------------------------


def test_results_are_saved_as_numpy_saves_them(tmp_path: Path) -> None:
    signature = EntrySignature(
        "main",
        (
            ArgSpec(0, "memref<?x2xf32>", "<f4", (DYNAMIC, 2), "a"),
            ArgSpec(1, "memref<i64>", "<i8", (), "n"),
            ArgSpec(2, "memref<3xi8>", "|i1", (3,), "t", "input"),
        ),
    )
    arrays = [np.arange(6, dtype="<f4").reshape(3, 2), np.array(-5, "<i8"), np.zeros(3, "|i1")]
    given = []
    for k, array in enumerate(arrays):
        np.save(tmp_path / f"in{k}.npy", array)
        given.append(str(tmp_path / f"in{k}.npy"))
    work, out = tmp_path / "work", tmp_path / "work" / "out"
    out.mkdir(parents=True)
    staged = stage_inputs(signature, given, work)
    assert staged is not None
    for spec, array in zip(signature.args, arrays):
        (out / f"arg{spec.index}.raw").write_bytes((array * 3).tobytes())
    write_outputs(result_writers(out, signature, staged), signature, tmp_path / "ours")
    save_outputs([a * 3 for a in arrays], signature, tmp_path / "numpy")
    names = sorted(p.name for p in (tmp_path / "numpy").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "ours").iterdir())
    for name in names:
        ours, theirs = (tmp_path / side / name for side in ("ours", "numpy"))
        if name == ".dhir-results":  # the same files; their times differ
            assert _listed(ours) == _listed(theirs)
        else:
            assert ours.read_bytes() == theirs.read_bytes()


def _listed(path: Path) -> list[str]:
    return [line.split("\t")[0] for line in path.read_text().splitlines()]


def test_a_result_file_short_or_missing_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "arg0.raw").write_bytes(bytes(12))
    check_result(tmp_path / "arg0.raw", 3, 4)
    with pytest.raises(DhirError, match="arg0.raw holds 2 elements, expected 3"):
        check_result(tmp_path / "arg0.raw", 3, 6)
    with pytest.raises(DhirError, match="ended without writing arg1.raw"):
        check_result(tmp_path / "arg1.raw", 3, 4)


@pytest.mark.parametrize("code", DTYPES)
def test_integer_ranges_are_numpys(code: str) -> None:
    # Both paths check scalars against ArgSpec.integer_range; NumPy says what it must be.
    spec = ArgSpec(0, TYPES[code], code, None)
    dtype = np.dtype(code)
    if dtype.kind == "f":
        assert spec.integer_range is None
    elif dtype.kind == "b":
        assert spec.integer_range == (0, 1)
    else:
        assert spec.integer_range == (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
