"""dhir's printer (dhir.api.print_module) writes exactly what xDSL's Printer writes, in
both forms, with and without locations: it only takes a shorter way to the stream."""

from io import StringIO
from pathlib import Path

import pytest
from xdsl.printer import Printer

from dhir.api import parse_string, print_module

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.mlir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("debuginfo", [False, True])
def test_same_text_as_xdsls_printer(path: Path, generic: bool, debuginfo: bool) -> None:
    module = parse_string(path.read_text(), str(path))
    out = StringIO()
    Printer(stream=out, print_generic_format=generic, print_debuginfo=debuginfo).print_op(module)
    out.write("\n")
    assert print_module(module, generic=generic, debuginfo=debuginfo) == out.getvalue()


def _xdsl_text(module: object) -> str:
    out = StringIO()
    Printer(stream=out).print_op(module)  # type: ignore[arg-type]
    out.write("\n")
    return out.getvalue()


CONSTANTS = """
func.func @main(%a: memref<8xf32>, %b: memref<2x3xf64>, %h: memref<4xf16>) {
  %i = arith.constant 3 : index
  %j = arith.constant -1 : i8
  %t = arith.constant true
  %f = arith.constant 0x7F800000 : f32
  %g = arith.constant -2.5e-300 : f64
  %q = arith.constant 1.5 : f16
  %v = arith.constant dense<[1.0, 2.0]> : vector<2xf32>
  %x = memref.load %a[%i] : memref<8xf32>
  %y = arith.addf %x, %f fastmath<fast> : f32
  %z = arith.mulf %x, %y : f32
  %w = arith.divf %z, %x : f32
  %s = arith.subf %w, %z {tag} : f32
  memref.store %s, %a[%i] {nontemporal = true} : memref<8xf32>
  memref.store %s, %a[%i] : memref<8xf32>
  %d = memref.load %b[%i, %i] : memref<2x3xf64>
  %e = arith.addf %d, %g : f64
  memref.store %e, %b[%i, %i] : memref<2x3xf64>
  %k = memref.load %h[%i] {nontemporal = false} : memref<4xf16>
  %m = arith.mulf %k, %q : f16
  memref.store %m, %h[%i] : memref<4xf16>
  func.call @none() : () -> ()
  %r = func.call @one(%i, %x) : (index, f32) -> i32
  %p:2 = func.call @two(%a) : (memref<8xf32>) -> (f32, f32)
  %u = func.call @"odd name"(%i) {tag} : (index) -> f32
  %o = func.call @fn() : () -> ((i32) -> i32)
  return
}
func.func private @none()
func.func private @one(index, f32) -> i32
func.func private @two(memref<8xf32>) -> (f32, f32)
func.func private @"odd name"(index) -> f32
func.func private @fn() -> ((i32) -> i32)
"""


def test_plain_forms_print_as_xdsl_does() -> None:
    """Constants of every kind, loads and stores of any rank, float arithmetic, calls
    with no, one and two results, and the same ops with flags or attributes, which
    xDSL prints itself."""
    module = parse_string(CONSTANTS)
    assert print_module(module) == _xdsl_text(module)


@pytest.mark.parametrize("literals", [False, True])
def test_a_lowered_schedule_prints_as_xdsl_does(literals: bool) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    import programs

    from dhir.api import run_pipeline

    module = parse_string(programs.many_tasks(200, literals=literals))
    run_pipeline(module, "dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}")
    assert print_module(module) == _xdsl_text(module)
