"""An address one task takes and stores into a memref, passed to linked code from a load
elsewhere (dhir/backends/addresses.py): refused at the call by both backends before
either starts. Natively the run died of SIGSEGV on 2 ranks (the address was another
process's), while the interpreter, one process, ran it."""

from pathlib import Path

import numpy as np
import pytest
from refused_compile import compile_refusal

import dhir
from dhir.backends.addresses import check_addresses
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string

PROGRAM = """func.func private @add_one(i64, i64)

func.func @main(%b: memref<16xf64>, %p: memref<1xi64>) {{
  dhir.schedule %b, %p {{
    %cpu = dhir.target {{kind = "cpu"}}
    %take = dhir.task %cpu, %b, %p {{
      %c0 = arith.constant 0 : index
      %a = memref.extract_aligned_pointer_as_index %b : memref<16xf64> -> index
      %i = arith.index_cast %a : index to i64
      {stored}
      {same}
    }}
    %use = dhir.task %cpu, %b, %p {{
      %c0 = arith.constant 0 : index
      %n = arith.constant 16 : i64
      {other}
    }}
  }}
  {host}
  return
}}
"""

STORE = "memref.store %i, %p[%c0] : memref<1xi64>"
CALL = """%l = memref.load %p[%c0] : memref<1xi64>
      %eight = arith.constant 8 : i64
      %x = arith.addi %l, %eight : i64
      %m = arith.constant 15 : i64
      func.call @add_one(%x, %m) : (i64, i64) -> ()"""
HOST = """%h0 = arith.constant 0 : index
  %hl = memref.load %p[%h0] : memref<1xi64>
  %hn = arith.constant 16 : i64
  func.call @add_one(%hl, %hn) : (i64, i64) -> ()"""


def _program(stored: str = STORE, same: str = "", other: str = "", host: str = "") -> str:
    return PROGRAM.format(stored=stored, same=same, other=other, host=host)


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_an_address_another_task_took_is_refused_at_the_call(tmp_path: Path, backend: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_program(other=CALL))
    where = (
        r"p\.mlir:20:7: error: @add_one is passed an address that task %take took and "
        r"stored into %p at .*p\.mlir:10:7: .* Take it in the task that passes it"
    )
    arrays = np.zeros(16), np.zeros(1, np.int64)
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), *arrays, backend=backend)


def test_host_code_passing_such_an_address_is_refused() -> None:
    with pytest.raises(DhirError, match=r"<string>:22:3: error: @add_one is passed an address"):
        check_addresses(parse_string(_program(host=HOST)))


ACCEPTED = {
    # The task that takes the address passes it, through memory of its own too.
    "same task": _program(same=CALL),
    # The usual way: each task takes the address it passes.
    "taken where passed": _program(
        stored="",
        other="""%a = memref.extract_aligned_pointer_as_index %b : memref<16xf64> -> index
      %i = arith.index_cast %a : index to i64
      func.call @add_one(%i, %n) : (i64, i64) -> ()""",
    ),
    # Another task stores a number that is no address.
    "not an address": _program(
        stored="""%k = arith.constant 3 : i64
      memref.store %k, %p[%c0] : memref<1xi64>""",
        other=CALL,
    ),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_addresses_used_where_they_were_taken_pass(case: str) -> None:
    check_addresses(parse_string(ACCEPTED[case]))


def test_dhir_compile_refuses_them_too(tmp_path: Path) -> None:
    stderr = compile_refusal(tmp_path, _program(other=CALL))
    assert "p.mlir:20:7: error: @add_one is passed an address" in stderr


HOST_TAKEN = """func.func @main(%b: memref<4xf64>, %c: memref<4xi64>) {
  %p = memref.extract_aligned_pointer_as_index %b : memref<4xf64> -> index
  %q = arith.index_cast %p : index to i64
  dhir.schedule %b, %c {
    %t = dhir.task target = "cpu", %b, %c {
      %c0 = arith.constant 0 : index
      memref.store %q, %c[%c0] : memref<4xi64>
    }
  }
  func.return
}
"""


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_an_address_taken_outside_any_task_is_refused_by_both_backends(
    tmp_path: Path, backend: str
) -> None:
    """dhir-lower-to-mpi refused it natively; the interpreter ran it. The task lists %b
    here, which the message no longer denies."""
    program = tmp_path / "p.mlir"
    program.write_text(HOST_TAKEN)
    where = (
        r"p\.mlir:7:7: error: this op uses %q, an address in %b taken outside its task; "
        r".*own copy of %b, which need not hold the task's data"
    )
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), np.zeros(4), np.zeros(4, np.int64), backend=backend)
