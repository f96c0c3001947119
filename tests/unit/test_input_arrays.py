"""The arrays a caller hands `dhir.run`: any layout (Fortran order, strided and reversed
views, transposes, read-only arrays, memory maps, the other byte order) is read by index as
NumPy reads it, one array passed twice is two buffers, the caller's arrays are left as
they were; what cannot be taken as it means (masked elements, an array too large to
copy) is refused naming the argument."""

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import DhirError
from dhir.toolchain.signature import RESULT, ArgSpec, EntrySignature
from dhir.toolchain.values import check_inputs, with_results

# b[i, j] = a[i, j] * 10 + i, then a[i, j] = -1: which element went where shows, and
# whether a and b are one buffer (b would read the -1s written through a).
SCALE = """func.func @main(%a: memref<?x?xf64>, %b: memref<?x?xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = memref.dim %a, %c0 : memref<?x?xf64>
      %m = memref.dim %a, %c1 : memref<?x?xf64>
      %ten = arith.constant 10.0 : f64
      %minus = arith.constant -1.0 : f64
      scf.for %i = %c0 to %n step %c1 {
        %fi = arith.index_cast %i : index to i64
        %row = arith.sitofp %fi : i64 to f64
        scf.for %j = %c0 to %m step %c1 {
          %x = memref.load %a[%i, %j] : memref<?x?xf64>
          %y = arith.mulf %x, %ten : f64
          %z = arith.addf %y, %row : f64
          memref.store %minus, %a[%i, %j] : memref<?x?xf64>
          memref.store %z, %b[%i, %j] : memref<?x?xf64>
        }
      }
    }
  }
  return
}
"""


def _layouts(tmp_path: Path) -> dict[str, np.ndarray]:
    """A 3x4 array of distinct values in each layout a caller may have it in."""
    base = np.arange(12.0).reshape(3, 4)
    read_only = base.copy()
    read_only.flags.writeable = False
    np.save(tmp_path / "base.npy", base)
    return {
        "C": base.copy(),
        "Fortran": np.asfortranarray(base),
        "transposed": np.ascontiguousarray(base.T).T,
        "every other column": np.arange(24.0).reshape(3, 8)[:, ::2],
        "reversed": base[::-1, ::-1],
        "read-only": read_only,
        "big-endian": base.astype(">f8"),
        "memory-mapped": np.load(tmp_path / "base.npy", mmap_mode="r"),
    }


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=pytest.mark.mlir)])
def test_every_layout_is_read_by_index_and_left_as_it_was(tmp_path: Path, backend: str) -> None:
    layouts = _layouts(tmp_path)
    # The native backend takes them all in one run: one build; the interpreter one by one.
    groups = [list(layouts)] if backend == "native" else [[name] for name in layouts]
    for names in groups:
        given = [layouts[name] for name in names]
        outputs = [np.zeros_like(array, dtype=np.float64) for array in given]
        kept = [np.array(array) for array in given]
        program = SCALE if len(names) == 1 else _many(len(names))
        args = [x for pair in zip(given, outputs, strict=True) for x in pair]
        results = dhir.run(program, *args, backend=backend)
        for k, name in enumerate(names):
            want = np.asarray(given[k], np.float64) * 10 + np.arange(3.0)[:, None]
            np.testing.assert_array_equal(results[2 * k + 1], want, err_msg=name)
            np.testing.assert_array_equal(results[2 * k], np.full((3, 4), -1.0), err_msg=name)
            np.testing.assert_array_equal(given[k], kept[k], err_msg=f"{name} was modified")


def _many(count: int) -> str:
    """SCALE on `count` pairs of arguments, a task each."""
    lines = SCALE.splitlines()
    task = "\n".join(lines[3:-3])  # from `%t = dhir.task` to its closing brace
    params = ", ".join(f"%a{k}: memref<?x?xf64>, %b{k}: memref<?x?xf64>" for k in range(count))
    operands = ", ".join(f"%a{k}, %b{k}" for k in range(count))
    tasks = "\n".join(
        task.replace("%t ", f"%t{k} ").replace("%a", f"%a{k}").replace("%b", f"%b{k}")
        for k in range(count)
    )
    return (
        f"func.func @main({params}) {{\n  dhir.schedule {operands} {{\n"
        f'    %cpu = dhir.target {{kind = "cpu"}}\n{tasks}\n  }}\n  return\n}}\n'
    )


@pytest.mark.parametrize("backend", ["interp", pytest.param("native", marks=pytest.mark.mlir)])
def test_one_array_passed_twice_is_two_buffers(backend: str) -> None:
    """An entry's memref arguments are distinct buffers (docs/semantics.md): each is a
    copy of what was passed, so b does not read the -1s written through a."""
    x = np.arange(12.0).reshape(3, 4)
    a, b = dhir.run(SCALE, x, x, backend=backend)
    np.testing.assert_array_equal(a, np.full((3, 4), -1.0))
    np.testing.assert_array_equal(b, x * 10 + np.arange(3.0)[:, None])
    np.testing.assert_array_equal(x, np.arange(12.0).reshape(3, 4))


@pytest.mark.mlir
def test_both_backends_give_results_of_one_dtype() -> None:
    """Native results came back as dtype('<f8'), whose byteorder is '<' where the
    interpreter's (and the input's) is '='."""
    x = np.arange(12.0).reshape(3, 4)
    interpreted = dhir.run(SCALE, x, x, backend="interp")
    native = dhir.run(SCALE, x, x, backend="native")
    for one, other in zip(interpreted, native, strict=True):
        assert (one.dtype.str, one.dtype.byteorder) == (other.dtype.str, other.dtype.byteorder)
        assert repr(other.dtype) == repr(x.dtype)


def test_a_masked_array_with_masked_elements_is_refused() -> None:
    """The program would have read the values under the mask as if there were none."""
    x = np.ma.masked_array(np.arange(12.0).reshape(3, 4), mask=np.arange(12) % 5 == 0)
    message = r"argument #0 of @main \(memref<\?x\?xf64>\) is a masked array with 3 masked"
    with pytest.raises(DhirError, match=message):
        dhir.run(SCALE, x, np.zeros((3, 4)), backend="interp")
    filled = x.filled(0.0)
    _, b = dhir.run(SCALE, np.ma.masked_array(filled), np.zeros((3, 4)), backend="interp")
    np.testing.assert_array_equal(b, filled * 10 + np.arange(3.0)[:, None])


# a[0] += k: whether k reached the program as given.
ADD_SCALAR = """func.func @main(%a: memref<2xf64>, %k: f64) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<2xf64>
  %y = arith.addf %x, %k : f64
  memref.store %y, %a[%c0] : memref<2xf64>
  return
}
"""


@pytest.mark.parametrize(
    "masked", [np.ma.masked, np.ma.masked_array(2.0, mask=True)], ids=["constant", "0-d"]
)
def test_a_masked_scalar_is_refused(masked: np.ma.MaskedArray) -> None:
    """numpy.ma.masked ran as 0, a masked 0-d array as the value under its mask."""
    with pytest.raises(DhirError, match=r"argument #1 of @main \(f64\) is masked; give the"):
        dhir.run(ADD_SCALAR, np.zeros(2), masked, backend="interp")
    a, k = dhir.run(ADD_SCALAR, np.ones(2), np.ma.masked_array(2.0), backend="interp")
    assert a[0] == 3.0 and k == 2.0


def test_an_input_too_large_to_copy_is_an_error_naming_it() -> None:
    """A view of one element as 2^59 of them: its copy raised a bare MemoryError."""
    huge = np.broadcast_to(np.float64(1.0), (2**31, 2**28))
    message = r"argument #1 of @main \(memref<\?x\?xf64>\): its 4 EiB do not fit"
    with pytest.raises(DhirError, match=message):
        dhir.run(SCALE, np.zeros((3, 4)), huge, backend="interp")


def test_a_result_too_large_to_allocate_is_an_error_naming_it() -> None:
    """An entry on tensors returning 2 PiB: `dhir run` called its MemoryError a bug in
    dhir (exit status 70)."""
    result = ArgSpec(1, "tensor<65536x65536x65536xf64>", "<f8", (65536,) * 3, role=RESULT, result=0)
    signature = EntrySignature("main", (ArgSpec(0, "tensor<4xf64>", "<f8", (4,)), result))
    message = r"result #0 of @main \(tensor<65536x65536x65536xf64>\): its 2 PiB do not fit"
    with pytest.raises(DhirError, match=message):
        check_inputs(signature, with_results(signature, [np.zeros(4)]))


@pytest.mark.mlir
def test_a_native_run_holds_no_copy_of_inputs_it_can_take_as_they_are() -> None:
    """The native backend only saves its inputs to files: it held two copies of each
    (384 MiB traced for two 64 MiB inputs and their results; now 128 MiB)."""
    a, b = np.ones((1024, 1024)), np.zeros((1024, 1024))  # 8 MiB each
    dhir.run(SCALE, a[:2, :2].copy(), b[:2, :2].copy())  # the build, cached
    tracemalloc.start()
    try:
        results = dhir.run(SCALE, a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(results[1], a * 10 + np.arange(1024.0)[:, None])
    np.testing.assert_array_equal(a, 1.0)  # the input itself, left as it was
    assert peak < 1.5 * (a.nbytes + b.nbytes), f"{peak / 2**20:.0f} MiB traced"
