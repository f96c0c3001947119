"""Functions of several blocks (`cf.br`, `cf.cond_br`) with schedules in any block, and plain
nests in branches that CodeDrop turns into schedules there: native equals the interpreter bit
for bit, on 1 and 2 ranks, whichever way the branch goes."""

import numpy as np
import pytest

import dhir

pytestmark = [pytest.mark.mlir, pytest.mark.mpi]
TIMEOUT = 90

# a[j] = 3 a[j] + j, then b[j] += a[j] (two tasks, which round robin puts on two ranks).
_SCHEDULE = """
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    %t0 = dhir.task %cpu, %a {
      %z = arith.constant 0 : index
      %one = arith.constant 1 : index
      %n = arith.constant 8 : index
      %three = arith.constant 3 : i32
      scf.for %j = %z to %n step %one {
        %v = memref.load %a[%j] : memref<8xi32>
        %x = arith.index_cast %j : index to i32
        %w = arith.muli %v, %three : i32
        %y = arith.addi %w, %x : i32
        memref.store %y, %a[%j] : memref<8xi32>
      }
    }
    %t1 = dhir.task %cpu, %a, %b {
      %z = arith.constant 0 : index
      %one = arith.constant 1 : index
      %n = arith.constant 8 : index
      scf.for %j = %z to %n step %one {
        %v = memref.load %a[%j] : memref<8xi32>
        %u = memref.load %b[%j] : memref<8xi32>
        %y = arith.addi %u, %v : i32
        memref.store %y, %b[%j] : memref<8xi32>
      }
    }
  }
"""


def _nest(target: str, op: str, source: str) -> str:
    """for j: target[j] = target[j] op source[j], a plain loop nest."""
    return f"""
  scf.for %j = %c0 to %c8 step %c1 {{
    %v = memref.load %{target}[%j] : memref<8xi32>
    %u = memref.load %{source}[%j] : memref<8xi32>
    %y = arith.{op} %v, %u : i32
    memref.store %y, %{target}[%j] : memref<8xi32>
  }}
"""


_HEAD = """
func.func @main(%a: memref<8xi32>, %b: memref<8xi32>, %flag: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0 : i32
  %f = memref.load %flag[%c0] : memref<1xi32>
  %p = arith.cmpi sgt, %f, %zero : i32
"""

# A schedule after `cf.br ^next`, plain nests in both branches of a `cf.cond_br`, and a
# schedule alone in a time loop after they join.
SCHEDULES = f"""{_HEAD}
  cf.br ^next
^next:
{_SCHEDULE}
  cf.cond_br %p, ^yes, ^no
^yes:
{_nest("b", "muli", "a")}
  cf.br ^end
^no:
{_nest("a", "subi", "b")}
  cf.br ^end
^end:
  scf.for %t = %c0 to %c3 step %c1 {{
{_SCHEDULE}
  }}
  return
}}
"""

# No schedule: CodeDrop makes one of each branch's nests, in that branch's block.
PLAIN = f"""{_HEAD}
{_nest("a", "addi", "b")}
  cf.cond_br %p, ^yes, ^no
^yes:
{_nest("b", "muli", "a")}
{_nest("a", "addi", "b")}
  cf.br ^end
^no:
{_nest("a", "subi", "b")}
{_nest("b", "xori", "a")}
  cf.br ^end
^end:
  return
}}
"""


def _inputs(flag: int) -> list[np.ndarray]:
    rng = np.random.default_rng(flag + 7)
    return [
        rng.integers(-9, 9, 8).astype(np.int32),
        rng.integers(-9, 9, 8).astype(np.int32),
        np.array([flag], np.int32),
    ]


@pytest.mark.parametrize("flag", [1, -1])
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("program", ["schedules", "plain"])
def test_several_blocks_equal_the_interpreter(program: str, ranks: int, flag: int) -> None:
    text = SCHEDULES if program == "schedules" else PLAIN
    inputs = _inputs(flag)
    oracle = dhir.run(text, *inputs, backend="interp")
    native = dhir.run(text, *inputs, ranks=ranks, placement="round-robin", timeout=TIMEOUT)
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()


def test_several_blocks_with_openmpi() -> None:
    inputs = _inputs(1)
    oracle = dhir.run(SCHEDULES, *inputs, backend="interp")
    native = dhir.run(
        SCHEDULES, *inputs, ranks=2, mpi="openmpi", placement="round-robin", timeout=TIMEOUT
    )
    for got, want in zip(native, oracle, strict=True):
        assert got.tobytes() == want.tobytes()
