"""A memref.expand_shape whose run-time sizes do not multiply to its source's stops the
native run at the op (dhir-cast-checks), as the interpreter does: natively it read the
first n * 3 elements of a longer source, with exit status 0, by default and under
--runtime-checks alike (MLIR checks only that the static sizes divide the source's)."""

from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir.ir.diagnostics import DhirError, SourceLoc
from dhir.ir.text import parse_string as parse_module
from dhir.transforms.cast_checks import CastChecksPass

# %a seen as n x 3 (n read from %p; the expand_shape at line 8), copied out row by row.
EXPAND = """\
func.func @main(%a: memref<?xf64>, %b: memref<6xf64>, %p: memref<1xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %q = memref.load %p[%c0] : memref<1xi64>
  %n = arith.index_cast %q : i64 to index
  %e = memref.expand_shape %a [[0, 1]] output_shape [%n, 3] : memref<?xf64> into memref<?x3xf64>
  %f = memref.cast %e : memref<?x3xf64> to memref<2x3xf64>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      %x = memref.load %f[%i, %j] : memref<2x3xf64>
      %k = arith.muli %i, %c3 : index
      %l = arith.addi %k, %j : index
      memref.store %x, %b[%l] : memref<6xf64>
    }
  }
  return
}
"""
STATIC = """\
func.func @main(%a: memref<6xf64>) {
  %e = memref.expand_shape %a [[0, 1]] output_shape [2, 3] : memref<6xf64> into memref<2x3xf64>
  return
}
"""


def test_only_expand_shapes_of_run_time_sizes_are_checked() -> None:
    module = parse_module(STATIC)
    CastChecksPass(undecided=True).apply(None, module)  # pyright: ignore[reportArgumentType]
    assert "cf.assert" not in str(module)
    module = parse_module(EXPAND)
    CastChecksPass(undecided=True).apply(None, module)  # pyright: ignore[reportArgumentType]
    assert str(module).count("expand_shape's sizes do not multiply to dimension 0") == 1


@pytest.mark.mlir
@pytest.mark.mpi
@pytest.mark.parametrize("checks", ["undecided", "all"])
def test_an_expand_shape_of_other_sizes_stops_the_run(tmp_path: Path, checks: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(EXPAND)
    fits = (np.arange(6.0), np.zeros(6), np.array([2], np.int64))
    want = dhir.run(program, *fits, backend="interp")
    got = dhir.run(program, *fits, runtime_checks=checks)
    assert want[1].tolist() == got[1].tolist() == list(range(6))
    # 9 elements as 2 x 3 (3 divides 9), 8 as 2**62 x 3 (wraps to 8 in 64 bits: no),
    # 6 as -2 x 3.
    for size, rows in ((9, 2), (8, 2**62), (6, -2)):
        given = (np.arange(float(size)), np.zeros(6), np.array([rows], np.int64))
        with pytest.raises(DhirError, match="'memref.expand_shape' reshapes"):
            dhir.run(program, *given, backend="interp")
        with pytest.raises(DhirError) as caught:
            dhir.run(program, *given, runtime_checks=checks)
        (diagnostic, *_) = caught.value.diagnostics
        assert diagnostic.loc == SourceLoc(str(program), 8, 8), (size, rows)
        assert "expand_shape's sizes do not multiply to dimension 0" in diagnostic.message
