"""bench/polybench's kernels stay correct: each one, at a tiny size with K = 2 tasks per
statement, run by the interpreter (and a few natively on 2 ranks, and as plain C) equals
its NumPy reference; so does each one written as plain MLIR, without dhir ops."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func, scf

import dhir
from dhir.toolchain.tools import find_llvm_tools

sys.path.insert(0, str(Path(__file__).parents[2] / "bench" / "polybench"))
import kernels  # noqa: E402
from kernels import RTOL, Mismatch, check  # noqa: E402

NAMES = list(kernels.SIZES)


def _outputs(name: str, sizes: dict[str, int], results: list[np.ndarray]) -> dict[str, np.ndarray]:
    return dict(zip(kernels.inputs(name, sizes), results))


def _varied(name: str, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """heat-3d's PolyBench start is linear, which its stencil leaves unchanged: a test
    would not see a program that does nothing, so it starts from random values."""
    if name != "heat-3d":
        return values
    start = np.random.default_rng(3).random(values["A"].shape)
    return {"A": start, "B": start.copy()}


@pytest.mark.parametrize("name", NAMES)
def test_kernel_interp_equals_numpy(name: str) -> None:
    sizes = kernels.tiny_sizes(name)
    values = _varied(name, kernels.inputs(name, sizes))
    text = kernels.program(name, sizes, 2, timed=False)
    assert text.count("dhir.task") >= 2 * len(kernels.kernel(name, sizes).statements) - 1
    results = dhir.run(text, *values.values(), backend="interp")
    want = kernels.reference(name, sizes, values)
    check(f"interp {name}", _outputs(name, sizes, results), want)
    # The kernel changes its outputs: a program that did nothing would not pass.
    assert any(not np.allclose(values[k], want[k], rtol=RTOL) for k in want)


@pytest.mark.mlir
@pytest.mark.parametrize("name", ["gemm", "jacobi-2d"])
def test_kernel_native_two_ranks_equals_numpy(name: str) -> None:
    sizes = kernels.tiny_sizes(name)
    values = kernels.inputs(name, sizes)
    text = kernels.program(name, sizes, 2, timed=True)
    results = dhir.run(
        text, *values.values(), np.zeros(1), ranks=2, placement="round-robin", threads=1
    )
    check(
        f"native {name}",
        _outputs(name, sizes, results[:-1]),
        kernels.reference(name, sizes, values),
    )
    assert results[-1][0] > 0.0  # the schedule's time, from MPI_Wtime


@pytest.mark.mlir
@pytest.mark.parametrize("name", ["syr2k", "fdtd-2d"])
def test_kernel_c_equals_numpy(name: str, tmp_path: Path) -> None:
    sizes = kernels.tiny_sizes(name)
    values = kernels.inputs(name, sizes)
    source = tmp_path / "k.c"
    source.write_text(kernels.c_program(name, sizes))
    exe = tmp_path / "k"
    subprocess.run([str(find_llvm_tools().clang), "-O2", "-o", str(exe), str(source)], check=True)
    for key, array in values.items():
        array.tofile(tmp_path / f"{key}.raw")
    seconds = subprocess.run(
        [str(exe), str(tmp_path), str(tmp_path)], check=True, capture_output=True, text=True
    ).stdout
    got = {k: np.fromfile(tmp_path / f"{k}.raw").reshape(v.shape) for k, v in values.items()}
    check(f"C {name}", got, kernels.reference(name, sizes, values))
    assert float(seconds) >= 0.0


@pytest.mark.mlir
@pytest.mark.parametrize("name", ["gemm", "2mm"])
def test_c_over_a_row_range_computes_those_rows_only(name: str, tmp_path: Path) -> None:
    """The 2-rank ceiling in run.py runs the C loops as two processes over row halves."""
    sizes = kernels.tiny_sizes(name)
    values = kernels.inputs(name, sizes)
    lo, hi = 1, sizes["ni"] - 1
    source = tmp_path / "k.c"
    source.write_text(kernels.c_program(name, sizes, (lo, hi)))
    exe = tmp_path / "k"
    subprocess.run([str(find_llvm_tools().clang), "-O2", "-o", str(exe), str(source)], check=True)
    for key, array in values.items():
        array.tofile(tmp_path / f"{key}.raw")
    subprocess.run([str(exe), str(tmp_path), str(tmp_path)], check=True, capture_output=True)
    want = kernels.reference(name, sizes, values)
    for key in want:
        got = np.fromfile(tmp_path / f"{key}.raw").reshape(values[key].shape)
        check(f"C {name} rows {lo}..{hi}", {key: got[lo:hi]}, {key: want[key][lo:hi]})
        np.testing.assert_array_equal(got[:lo], values[key][:lo])
        np.testing.assert_array_equal(got[hi:], values[key][hi:])


@pytest.mark.parametrize("name", NAMES)
def test_plain_kernel_interp_equals_numpy(name: str) -> None:
    sizes = kernels.tiny_sizes(name)
    values = _varied(name, kernels.inputs(name, sizes))
    text = kernels.plain_program(name, sizes, timed=False)
    results = dhir.run(text, *values.values(), backend="interp")
    want = kernels.reference(name, sizes, values)
    check(f"interp plain {name}", _outputs(name, sizes, results), want)
    assert any(not np.allclose(values[k], want[k], rtol=RTOL) for k in want)


@pytest.mark.parametrize("name", NAMES)
def test_plain_kernel_is_one_loop_nest_per_statement(name: str) -> None:
    """No dhir op anywhere; the function's loops (the stencils': its time loop's) are
    exactly the statements' nests, over all rows."""
    sizes = kernels.tiny_sizes(name)
    kernel = kernels.kernel(name, sizes)
    module = dhir.parse_string(kernels.plain_program(name, sizes))
    assert not [op.name for op in module.walk() if op.name.startswith("dhir.")]
    main = next(
        op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main"
    )
    block = main.body.block
    if kernel.steps:
        (time_loop,) = [op for op in block.ops if isinstance(op, scf.ForOp)]
        block = time_loop.body.block
    nests = [op for op in block.ops if isinstance(op, scf.ForOp)]
    wanted = [node for s in kernel.statements for node in s.body(s.lo, s.hi)]
    assert len(nests) == len(wanted)


@pytest.mark.mlir
@pytest.mark.parametrize("name", ["gemm", "jacobi-2d"])
def test_plain_kernel_native_two_ranks_equals_numpy(name: str) -> None:
    sizes = kernels.tiny_sizes(name)
    values = kernels.inputs(name, sizes)
    text = kernels.plain_program(name, sizes, timed=True)
    results = dhir.run(
        text, *values.values(), np.zeros(1), ranks=2, placement="round-robin", threads=1
    )
    check(
        f"native plain {name}",
        _outputs(name, sizes, results[:-1]),
        kernels.reference(name, sizes, values),
    )
    assert results[-1][0] > 0.0


def test_check_fails_loudly_on_a_mismatch() -> None:
    want = {"C": np.ones((3, 3))}
    got = {"C": np.ones((3, 3))}
    got["C"][1, 2] += 1e-6
    with pytest.raises(Mismatch, match="MISMATCH"):
        check("test", got, want)


def test_blocks_cover_rows_once() -> None:
    from loops import blocks

    for lo, hi, k in [(0, 10, 3), (1, 9, 2), (0, 1, 4), (0, 5, 5)]:
        cut = blocks(lo, hi, k)
        assert cut[0][0] == lo and cut[-1][1] == hi
        assert all(a[1] == b[0] for a, b in zip(cut, cut[1:]))
        assert len(cut) == min(k, hi - lo)
