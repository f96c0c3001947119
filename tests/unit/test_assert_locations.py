"""dhir-assert-locations: a program's own `cf.assert` that fails natively is reported at
its `file:line:col`, with its message, as the interpreter reports it."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dhir.api import parse_string, print_module, run_pipeline

needs_llvm = pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")

PROGRAM = """func.func @main(%a: memref<4xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a attributes {name = "checker"} {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xi32>
      %z = arith.constant 0 : i32
      %ok = arith.cmpi sgt, %x, %z : i32
      cf.assert %ok, "a[0] must be positive"
      memref.store %x, %a[%c0] : memref<4xi32>
    }
  }
  return
}
"""


def test_an_assert_says_where_it_is_in_its_message() -> None:
    module = parse_string(PROGRAM, "p.mlir")
    run_pipeline(module, "dhir-assert-locations")
    text = print_module(module)
    expected = (
        "\"ERROR: Runtime op verification failed\\0A^ 'cf.assert' failed: a[0] must be "
        'positive\\0ALocation: loc(\\22p.mlir\\22:9:7)"'
    )
    assert expected in text, text
    # Run twice, the message is not wrapped twice.
    run_pipeline(module, "dhir-assert-locations")
    assert print_module(module) == text


@needs_llvm
def test_a_failed_assert_of_a_native_run_is_at_its_op(tmp_path: Path) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(PROGRAM)
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.int32))
    command = [sys.executable, "-m", "dhir.cli.main", "run", str(program), "-n", "2", "-q"]
    command += ["--input", str(tmp_path / "a.npy"), "--timeout", "60"]
    failed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert failed.returncode == 1, failed.stderr
    first = failed.stderr.splitlines()[0]
    assert first.startswith(f"{program}:9:7: error: 'cf.assert' failed: a[0] must be positive; ")
    assert "the program failed on 2 ranks" in first, first
