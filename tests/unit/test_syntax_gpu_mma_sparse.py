"""The gpu dialect's tensor-core (`gpu.subgroup_mma_*`) and sparse (`gpu.create_coo`,
`gpu.spmv`, ...) ops: dhir reads and prints them as mlir-opt-22 does (the corpus file
data/syntax/gpu_mma_sparse.mlir, checked by test_syntax_mlir22.py), and a task that uses
one stops at its line on both backends, which cannot run them."""

import numpy as np
import pytest
from roundtrip import parse
from xdsl.dialects.builtin import f16

import dhir
from dhir.dialects.gpu import MMAMatrixType, SpMMBufferSizeOp
from dhir.ir.text import parse_string

TASK = """func.func @main(%a: memref<16xf32>) {
  dhir.schedule %a {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
        %x = memref.load %a[%i] : memref<16xf32>
        OP
        memref.store %y, %a[%i] : memref<16xf32>
      }
    }
  }
  return
}
"""

MMA = (
    '%m = gpu.subgroup_mma_constant_matrix %x : !gpu.mma_matrix<16x16xf32, "COp">\n'
    '%y = gpu.subgroup_mma_extract_thread_local %m[%c0] : !gpu.mma_matrix<16x16xf32, "COp"> -> f32'
)
SPARSE = (
    "%d = gpu.create_dn_tensor %a, %c16 : index into memref<16xf32>\n"
    "gpu.destroy_dn_tensor %d\n%y = arith.addf %x, %x : f32"
)


def test_mma_matrix_type_keeps_shape_element_type_and_operand() -> None:
    text = 'func.func private @f(!gpu.mma_matrix<16x8xf16, "AOp">)'
    func = next(iter(parse(text).ops))
    matrix = func.properties["function_type"].inputs.data[0]  # pyright: ignore
    assert isinstance(matrix, MMAMatrixType)
    assert [d.data for d in matrix.shape] == [16, 8]
    assert (matrix.element_type, matrix.operand.data) == (f16, "AOp")


def test_spmm_buffer_size_has_a_result_per_buffer_then_the_token() -> None:
    text = """func.func @f(%s: !gpu.sparse.spmat_handle, %d: !gpu.sparse.dntensor_handle) {
      %b:2, %t = gpu.spmm_buffer_size async %s, %d, %d : index, index into f64
      return
    }"""
    op = next(op for op in parse(text).walk() if isinstance(op, SpMMBufferSizeOp))
    assert len(op.bufferSzs) == 2 and op.asyncToken is not None


@pytest.mark.parametrize("backend", ["interp", "native"])
@pytest.mark.parametrize(("ops", "name"), [(MMA, "gpu.subgroup_mma_constant_matrix"),
                                           (SPARSE, "gpu.create_dn_tensor")])  # fmt: skip
def test_a_task_using_one_stops_at_its_line(ops: str, name: str, backend: str) -> None:
    text = TASK.replace("        OP", "\n".join(f"        {line}" for line in ops.splitlines()))
    line = text.splitlines().index(next(s for s in text.splitlines() if name in s)) + 1
    with pytest.raises(dhir.DhirError) as error:
        dhir.run(
            parse_string(text, "prog.mlir"), np.zeros(16, np.float32), backend=backend, ranks=2
        )
    message = str(error.value)
    assert message.startswith(f"prog.mlir:{line}:"), message
    assert f"'{name}'" in message
