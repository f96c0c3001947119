"""Memrefs of memrefs (dhir/backends/element_types.py): refused at their line by both
backends before either starts. The interpreter refused them only where it allocated
one; native builds ran some and failed inside mlir-opt or at run time on others."""

from pathlib import Path

import numpy as np
import pytest
from refused_compile import compile_refusal

import dhir
from dhir.ir.diagnostics import DhirError

TASK = """func.func @main(%a: memref<4xf32>) {{
  dhir.schedule %a {{
    %cpu = dhir.target {{kind = "cpu"}}
    %t = dhir.task %cpu, %a {{
      {body}
    }}
  }}
  return
}}
"""

CASES = {
    "alloc": (
        TASK.format(
            body="""%c0 = arith.constant 0 : index
      %m = memref.alloca() : memref<2xmemref<4xf32>>
      memref.store %a, %m[%c0] : memref<2xmemref<4xf32>>"""
        ),
        6,
    ),
    "declaration": (
        "func.func private @keep(memref<?xmemref<4xf32>>)\n" + TASK.format(body=""),
        1,
    ),
    "global": (
        'memref.global "private" @g : memref<2xmemref<*xf32>> = uninitialized\n'
        + TASK.format(body=""),
        1,
    ),
}


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_memrefs_of_memrefs_are_refused_at_their_line(
    tmp_path: Path, backend: str, case: str
) -> None:
    text, line = CASES[case]
    program = tmp_path / "p.mlir"
    program.write_text(text)
    where = rf"p\.mlir:{line}:\d+: error: memref<.*> is a memref of memrefs"
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), np.zeros(4, np.float32), backend=backend)


@pytest.mark.mlir
def test_dhir_compile_refuses_them_at_their_line_too(tmp_path: Path) -> None:
    text, line = CASES["alloc"]
    stderr = compile_refusal(tmp_path, text)
    assert f"p.mlir:{line}:" in stderr and "is a memref of memrefs" in stderr
