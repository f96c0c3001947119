"""GPU kernels two of whose threads surely touch one element, one writing it, with no
barrier between them (dhir/analysis/overlaps.py, `kernel_overlap`): refused at the launch
by both backends and `dhir compile` before either starts. On a GPU such threads run at
once and the result depends on their timing; the interpreter ran them one after another
and gave one answer (a kernel adding each thread's id into a[0] gave 56, exit code 0).
Kernels whose race is not proven run as before. Parallel loops of GPU tasks, which dhir
maps to blocks x threads, go through the loops' check (test_parallel_overlaps.py) before
they become kernels."""

from pathlib import Path

import numpy as np
import pytest
from refused_compile import compile_refusal

import dhir
from dhir.analysis.overlaps import kernel_overlap
from dhir.dialects import gpu
from dhir.ir.diagnostics import DhirError
from dhir.ir.text import parse_string

TASK = """func.func @main(%a: memref<16xi64>, %b: memref<16xi64>, %n: index) {{
  dhir.schedule %a, %b, %n {{
    %gpu = dhir.target {{arch = "sm_90"}}
    %t = dhir.task %gpu, %a, %b {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %one = arith.constant 1 : i64
      gpu.launch blocks(%bx, %by, %bz) in (%gx = {grid}, %gy = %c1, %gz = %c1)
          threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {workgroup}{{
        {body}
        gpu.terminator
      }}
    }}
  }}
  return
}}
"""

# Each: the kernel's body, its grid size (blocks of 8 threads), and the first two threads
# found, each (block x, y, z, thread x, y, z), with the element and whether it is a read.
REFUSED = {
    # Every thread adds into a[0].
    "same element": (
        """%v = memref.load %a[%c0] : memref<16xi64>
        %x = arith.index_cast %tx : index to i64
        %w = arith.addi %v, %x : i64
        memref.store %w, %a[%c0] : memref<16xi64>""",
        "%c1",
        ((0, 0, 0, 0, 0, 0), (0, 0, 0, 1, 0, 0), (0,), False),
    ),
    # Thread t reads a[t + 1], which thread t + 1 writes.
    "read of a neighbour's write": (
        """%j = arith.addi %tx, %c1 : index
        %v = memref.load %a[%j] : memref<16xi64>
        memref.store %v, %a[%tx] : memref<16xi64>""",
        "%c1",
        ((0, 0, 0, 1, 0, 0), (0, 0, 0, 0, 0, 0), (1,), True),
    ),
    # Subscripts of the thread id alone: thread t of each block writes a[t].
    "blocks write the same elements": (
        "memref.store %one, %a[%tx] : memref<16xi64>",
        "%c2",
        ((0, 0, 0, 0, 0, 0), (1, 0, 0, 0, 0, 0), (0,), False),
    ),
    # A barrier orders the threads of one block, not blocks: block 0's thread 7 reads
    # a[8], which block 1's thread 0 writes.
    "a barrier does not order blocks": (
        """%g = gpu.global_id x
        %j = arith.addi %g, %c1 : index
        %v = memref.load %a[%j] : memref<16xi64>
        gpu.barrier
        memref.store %v, %a[%g] : memref<16xi64>""",
        "%c2",
        ((1, 0, 0, 0, 0, 0), (0, 0, 0, 7, 0, 0), (8,), True),
    ),
    # Every thread writes b[0 .. 3] in a loop.
    "inner loop": (
        """scf.for %k = %c0 to %c4 step %c1 {
          memref.store %one, %b[%k] : memref<16xi64>
        }""",
        "%c1",
        ((0, 0, 0, 0, 0, 0), (0, 0, 0, 1, 0, 0), (0,), False),
    ),
    # The id ops read the launch's ids and sizes: thread t writes a[7 - t] and a[t].
    "id ops": (
        """%t = gpu.thread_id x
        %s = gpu.block_dim x
        %k = arith.subi %s, %t : index
        %h = arith.subi %k, %c1 : index
        memref.store %one, %a[%h] : memref<16xi64>
        memref.store %one, %a[%t] : memref<16xi64>""",
        "%c1",
        ((0, 0, 0, 0, 0, 0), (0, 0, 0, 7, 0, 0), (0,), False),
    ),
}

ACCEPTED = {
    "own element": (
        """%g = gpu.global_id x
        %v = memref.load %a[%g] : memref<16xi64>
        %w = arith.addi %v, %one : i64
        memref.store %w, %a[%g] : memref<16xi64>""",
        "%c2",
    ),
    "ids of the body's arguments": (
        """%k = arith.muli %bx, %c8 : index
        %g = arith.addi %k, %tx : index
        memref.store %one, %a[%g] : memref<16xi64>""",
        "%c2",
    ),
    # Only reads overlap.
    "shared reads": (
        """%v = memref.load %b[%c0] : memref<16xi64>
        memref.store %v, %a[%tx] : memref<16xi64>""",
        "%c1",
    ),
    # Atomic updates are a way to combine threads.
    "atomic": (
        "%r = memref.atomic_rmw addi %one, %a[%c0] : (i64, memref<16xi64>) -> i64",
        "%c2",
    ),
    # Only thread 0 writes: a condition is not proven to hold in two threads.
    "conditional": (
        """%z = arith.cmpi eq, %tx, %c0 : index
        scf.if %z {
          memref.store %one, %a[%c0] : memref<16xi64>
        }""",
        "%c1",
    ),
    # A barrier orders the read of a neighbour's element before its write, in one block.
    "barrier between a read and a write": (
        """%j = arith.addi %tx, %c1 : index
        %v = memref.load %a[%j] : memref<16xi64>
        gpu.barrier
        memref.store %v, %a[%tx] : memref<16xi64>""",
        "%c1",
    ),
    # A loop that holds a barrier may order what is before it and after it.
    "barrier in a loop": (
        """%j = arith.addi %tx, %c1 : index
        %v = memref.load %a[%j] : memref<16xi64>
        scf.for %k = %c0 to %c2 step %c1 {
          gpu.barrier
        }
        memref.store %v, %a[%tx] : memref<16xi64>""",
        "%c1",
    ),
    # With %n blocks: one block (n = 1) does not race, so no race is proven.
    "run-time grid": (
        "memref.store %one, %a[%tx] : memref<16xi64>",
        "%n",
    ),
    # A subscript loaded from memory: not proven.
    "loaded subscript": (
        """%v = memref.load %b[%tx] : memref<16xi64>
        %k = arith.index_cast %v : i64 to index
        memref.store %one, %a[%k] : memref<16xi64>""",
        "%c1",
    ),
}


def _program(body: str, grid: str, workgroup: str = "") -> str:
    return TASK.format(body=body, grid=grid, workgroup=workgroup)


def _launch(text: str) -> gpu.LaunchOp | gpu.LaunchFuncOp:
    launches = [
        op for op in parse_string(text).walk() if isinstance(op, gpu.LaunchOp | gpu.LaunchFuncOp)
    ]
    assert len(launches) == 1
    return launches[0]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_proven_races_are_found(case: str) -> None:
    body, grid, expected = REFUSED[case]
    found = kernel_overlap(_launch(_program(body, grid)))
    assert found is not None
    assert (found.first, found.second, found.element, found.read) == expected


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_kernels_without_a_proven_race_pass(case: str) -> None:
    assert kernel_overlap(_launch(_program(*ACCEPTED[case]))) is None


WORKGROUP = "workgroup(%s : memref<8xi64, #gpu.address_space<workgroup>>) "


def test_workgroup_memory_races_within_a_block_only() -> None:
    """Each block has its own workgroup buffer: threads of one block writing %s[0] race,
    blocks writing their own buffers' %s[t] do not."""
    shared = "memref.store %one, %s[%c0] : memref<8xi64, #gpu.address_space<workgroup>>"
    found = kernel_overlap(_launch(_program(shared, "%c2", WORKGROUP)))
    assert found is not None
    assert (found.first, found.second, found.element) == ((0,) * 6, (0, 0, 0, 1, 0, 0), (0,))
    own = "memref.store %one, %s[%tx] : memref<8xi64, #gpu.address_space<workgroup>>"
    assert kernel_overlap(_launch(_program(own, "%c2", WORKGROUP))) is None


# The usual shared-memory pattern: each thread fills its element, waits, then reads its
# neighbour's.
ROTATE = """%x = arith.index_cast %tx : index to i64
        memref.store %x, %s[%tx] : memref<8xi64, #gpu.address_space<workgroup>>
        {barrier}
        %k = affine.apply affine_map<(t) -> ((t + 1) mod 8)>(%tx)
        %v = memref.load %s[%k] : memref<8xi64, #gpu.address_space<workgroup>>
        %g = gpu.global_id x
        memref.store %v, %a[%g] : memref<16xi64>"""


def test_a_barrier_orders_a_blocks_workgroup_memory() -> None:
    ordered = _program(ROTATE.format(barrier="gpu.barrier"), "%c2", WORKGROUP)
    assert kernel_overlap(_launch(ordered)) is None
    found = kernel_overlap(_launch(_program(ROTATE.format(barrier=""), "%c2", WORKGROUP)))
    assert found is not None
    # Thread 7 reads %s[0], which thread 0 writes.
    assert (found.first, found.second, found.element, found.read) == (
        (0,) * 6,
        (0, 0, 0, 7, 0, 0),
        (0,),
        True,
    )


@pytest.mark.parametrize("case", ["barrier between a read and a write", "barrier in a loop"])
def test_kernels_a_barrier_orders_run_in_the_interpreter(case: str) -> None:
    """What the check accepts because a barrier orders it, the interpreter runs as a GPU
    does (in phases between barriers): each thread t reads a[t + 1] before any writes."""
    a = np.arange(16, dtype=np.int64)
    text = _program(*ACCEPTED[case])
    results = dhir.run(parse_string(text), a, a, np.int64(0), backend="interp")
    np.testing.assert_array_equal(results[0], np.concatenate([a[1:9], a[8:]]))


def test_a_barrier_orders_a_blocks_workgroup_memory_in_the_interpreter() -> None:
    """Each thread reads its neighbour's element of workgroup memory, which one after
    another (the interpreter before barriers ran) it reads before the neighbour writes."""
    a = np.zeros(16, np.int64)
    text = _program(ROTATE.format(barrier="gpu.barrier"), "%c2", WORKGROUP)
    results = dhir.run(parse_string(text), a, a, np.int64(0), backend="interp")
    np.testing.assert_array_equal(results[0], np.tile(np.roll(np.arange(8), -1), 2))


def test_a_kernel_in_a_host_loop_races_at_every_step() -> None:
    """A time loop around the launch: each step's threads write a[i]."""
    text = _program("memref.store %one, %a[%i] : memref<16xi64>", "%c1")
    text = text.replace("gpu.launch", "scf.for %i = %c0 to %c4 step %c1 {\n      gpu.launch")
    text = text.replace("gpu.terminator\n      }", "gpu.terminator\n      }\n      }")
    found = kernel_overlap(_launch(text))
    assert found is not None
    assert (found.first, found.second, found.element) == ((0,) * 6, (0, 0, 0, 1, 0, 0), (0,))


LAUNCH_FUNC = """module attributes {{gpu.container_module}} {{
  gpu.module @kernels {{
    gpu.func @k(%m: memref<32xf32>, %at: index) kernel {{
      %t = gpu.thread_id x
      %v = memref.load %m[%t] : memref<32xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %m[{subscript}] : memref<32xf32>
      gpu.return
    }}
  }}
  func.func @main(%a: memref<32xf32>) {{
    dhir.schedule %a {{
      %gpu = dhir.target {{arch = "sm_90"}}
      %t0 = dhir.task %gpu, %a {{
        %c1 = arith.constant 1 : index
        %c3 = arith.constant 3 : index
        %c32 = arith.constant 32 : index
        gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%a : memref<32xf32>, %c3 : index)
      }}
    }}
    return
  }}
}}
"""


def test_launch_func_kernels_are_checked_at_their_launch() -> None:
    """A gpu.func's arguments are what the launch passes: %at is 3, so every thread
    writes a[3], which thread 3 reads."""
    assert kernel_overlap(_launch(LAUNCH_FUNC.format(subscript="%t"))) is None
    found = kernel_overlap(_launch(LAUNCH_FUNC.format(subscript="%at")))
    assert found is not None
    assert found.memref.name_hint == "a"
    assert (found.first, found.second, found.element, found.read) == (
        (0,) * 6,
        (0, 0, 0, 1, 0, 0),
        (3,),
        False,
    )


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_racing_kernels_are_refused_at_their_line(tmp_path: Path, backend: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(_program(*REFUSED["read of a neighbour's write"][:2]))
    where = (
        r"p\.mlir:11:7: error: threads of this gpu\.launch race: thread \(1, 0, 0\) of "
        r"block \(0, 0, 0\) writes %a\[1\], which thread \(0, 0, 0\) of block \(0, 0, 0\) "
        r"reads too\. A GPU runs a launch's threads at once .*memref\.atomic_rmw.* "
        r"put a gpu\.barrier between the write and the read"
    )
    arrays = np.zeros(16, np.int64), np.zeros(16, np.int64), np.int64(0)
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), *arrays, backend=backend)


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_racing_launch_funcs_are_refused_at_their_launch(tmp_path: Path, backend: str) -> None:
    program = tmp_path / "p.mlir"
    program.write_text(LAUNCH_FUNC.format(subscript="%at"))
    where = (
        r"p\.mlir:18:9: error: threads of this gpu\.launch_func of @kernels::@k race: "
        r"thread \(0, 0, 0\) of block \(0, 0, 0\) writes %a\[3\]"
    )
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), np.zeros(32, np.float32), backend=backend)


def test_dhir_compile_refuses_them_too(tmp_path: Path) -> None:
    stderr = compile_refusal(tmp_path, _program(*REFUSED["blocks write the same elements"][:2]))
    assert (
        "p.mlir:11:7: error: threads of this gpu.launch race: thread (0, 0, 0) of block "
        "(0, 0, 0) writes %a[0], which thread (0, 0, 0) of block (1, 0, 0) writes too"
    ) in stderr
    assert "split the kernel in two launches" in stderr


def test_unproven_kernels_run_as_before_in_the_interpreter() -> None:
    """A barrier-free kernel whose threads keep to their own elements."""
    text = _program(*ACCEPTED["own element"])
    a = np.arange(16, dtype=np.int64)
    results = dhir.run(parse_string(text), a, np.zeros(16, np.int64), np.int64(0), backend="interp")
    np.testing.assert_array_equal(results[0], a + 1)


@pytest.mark.mlir
def test_a_kernel_a_barrier_orders_is_built_and_launched(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Natively, against the fake CUDA driver (tests/gpu_fake/fake_cuda.c, which runs no
    kernel): the check lets the kernel through, and it is launched as before."""
    log = tmp_path / "cuda.log"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    text = _program(*ACCEPTED["barrier between a read and a write"])
    a = np.arange(16, dtype=np.int64)
    results = dhir.run(parse_string(text), a, a, np.int64(0), ranks=1, timeout=120)
    np.testing.assert_array_equal(results[0], a)  # the fake ran no kernel
    launches = [line for line in log.read_text().splitlines() if line.startswith("cuLaunch")]
    assert launches == ["cuLaunchKernel task0_kernel0 grid=1x1x1 block=8x1x1"]


GPU_LOOP = """func.func @main(%a: memref<16xi64>) {
  dhir.schedule %a {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %one = arith.constant 1 : i64
      scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
        %v = memref.load %a[%c0] : memref<16xi64>
        %w = arith.addi %v, %one : i64
        memref.store %w, %a[%c0] : memref<16xi64>
      }
    }
  }
  return
}
"""


@pytest.mark.mlir
@pytest.mark.parametrize("backend", ["interp", "native"])
def test_loops_of_gpu_tasks_are_refused_before_they_become_kernels(
    tmp_path: Path, backend: str
) -> None:
    """dhir maps a GPU task's parallel loop to blocks x threads: an overlap of its
    iterations is refused as a CPU loop's is, with what a GPU task can do instead (it
    runs neither an scf.for nor an scf.reduce)."""
    program = tmp_path / "p.mlir"
    program.write_text(GPU_LOOP)
    where = (
        r"p\.mlir:9:7: error: iterations of this scf\.parallel overlap: iteration \(0\) "
        r"writes %a\[0\], which iteration \(1\) writes too\. Its iterations must be "
        r"independent: a GPU runs them at once on its threads .* Combine their values with "
        r"an atomic update \(memref\.atomic_rmw\), or run the loop as scf\.for or with "
        r"scf\.reduce in a CPU task"
    )
    with pytest.raises(DhirError, match=where):
        dhir.run(str(program), np.zeros(16, np.int64), backend=backend)
