"""`dhir.run` as a program calls it: what it takes (a parsed module, a path, MLIR text, an
output folder named by a string) and what it leaves as it was."""

from pathlib import Path

import numpy as np

import dhir

EXAMPLES = Path(__file__).parents[2] / "examples"


def vector_add_inputs() -> list[np.ndarray]:
    return [np.arange(20, dtype=np.int32), np.full(20, 3, np.int32), np.zeros(20, np.int32)]


def test_an_output_folder_named_by_a_string(tmp_path: Path) -> None:
    inputs = vector_add_inputs()
    out = tmp_path / "out"
    results = dhir.run(EXAMPLES / "vector_add.mlir", *inputs, backend="interp", output_dir=str(out))
    assert sorted(p.name for p in out.iterdir()) == ["arg0.npy", "arg1.npy", "arg2.npy"]
    assert np.array_equal(np.load(out / "arg0.npy"), results[0])
