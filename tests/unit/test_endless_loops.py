"""An `scf.while` that never ends and writes nothing: the sequential program never
finishes, so neither backend may (docs/semantics.md, "Where MLIR leaves the result
open"). MLIR erased such a loop when nothing used its results, and native code exited 0
with the arguments unchanged, where the interpreter ran until --timeout."""

import shutil

import numpy as np
import pytest

import dhir
from dhir import DhirError

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

# x stays 0, so x >= 0 holds for ever; nothing reads %r.
ENDLESS = """
func.func @main(%a: memref<4xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %one = arith.constant 1 : i32
      %zero = arith.constant 0 : i32
      %r = scf.while (%x = %zero) : (i32) -> i32 {
        %go = arith.cmpi sge, %x, %zero : i32
        scf.condition(%go) %x : i32
      } do {
      ^bb0(%y: i32):
        %n = arith.addi %y, %one : i32
        %m = arith.andi %n, %zero : i32
        scf.yield %m : i32
      }
    }
  }
  return
}
"""

# A loop of the same shape that ends (x halves from 65536 to 1), which no analysis of
# dhir's counts: nothing uses what it computes either.
ENDING = (
    ENDLESS.replace(
        "%go = arith.cmpi sge, %x, %zero : i32",
        "%go = arith.cmpi ne, %x, %one : i32",
    )
    .replace(
        "%m = arith.andi %n, %zero : i32",
        "%m = arith.shrui %y, %one : i32",
    )
    .replace("%zero = arith.constant 0 : i32", "%zero = arith.constant 65536 : i32")
)


def _run(src: str, backend: str) -> list[np.ndarray]:
    module = dhir.parse_string(src, "prog.mlir")
    a = np.arange(4, dtype=np.int32)
    return dhir.run(module, a, backend=backend, ranks=1, timeout=3)


@needs_llvm
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_a_loop_that_never_ends_never_finishes(backend: str) -> None:
    with pytest.raises(DhirError, match="timed out"):
        _run(ENDLESS, backend)


@needs_llvm
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_a_loop_that_ends_still_finishes(backend: str) -> None:
    (a,) = _run(ENDING, backend)
    assert a.tolist() == [0, 1, 2, 3]


# The loop of ENDLESS in a GPU task's parallel loop, and in an explicit gpu.launch.
_LOOP = """
        %r = scf.while (%x = %zero) : (i32) -> i32 {
          %go = arith.cmpi sge, %x, %zero : i32
          scf.condition(%go) %x : i32
        } do {
        ^bb0(%y: i32):
          %m = arith.andi %y, %zero : i32
          scf.yield %m : i32
        }
        memref.store %zero, %a[%i] : memref<4xi32>"""
ON_GPU = f"""
func.func @main(%a: memref<4xi32>) {{
  dhir.schedule %a {{
    %gpu = dhir.target {{kind = "gpu"}}
    %t = dhir.task %gpu, %a {{
      %zero = arith.constant 0 : i32
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.parallel (%i) = (%c0) to (%c4) step (%c1) {{{_LOOP}
        scf.reduce
      }}
    }}
    %u = dhir.task %gpu, %a {{
      %zero = arith.constant 0 : i32
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%i, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {{{_LOOP}
        gpu.terminator
      }}
    }}
  }}
  return
}}
"""


@needs_llvm
def test_a_gpu_kernels_loop_that_may_never_end_is_kept() -> None:
    """dhir-gpu-kernels' mapping pipeline canonicalized the loop away: the kernel's PTX
    stored and returned, where the sequential program never ends."""
    from dhir.api import run_pipeline
    from dhir.dialects import gpu, llvm, scf

    module = dhir.parse_string(ON_GPU, "prog.mlir")
    run_pipeline(module, "dhir-gpu-kernels")
    launches = [op for op in module.walk() if isinstance(op, gpu.LaunchOp)]
    assert len(launches) == 2
    for launch in launches:
        (loop,) = [op for op in launch.walk() if isinstance(op, scf.WhileOp)]
        assert isinstance(loop.before_region.block.first_op, llvm.InlineAsmOp)
