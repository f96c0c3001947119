"""Kernels whose threads wait for each other at `gpu.barrier` (dhir.backends.interp.phases):
the interpreter runs a block's threads in phases between barriers, as CUDA does, and
refuses a barrier that not every thread of the block reaches. It used to refuse every
kernel with a barrier ("threads cannot wait for each other"), so a kernel using workgroup
memory could not be checked against it at all. Natively (tests/gpu_fake/fake_cuda.c,
which runs no kernel) such kernels are built and launched as any other; on a real GPU
(test_gpu_real.py) they equal the interpreter."""

import threading
from pathlib import Path

import numpy as np
import pytest

import dhir
from dhir import DhirError
from dhir.backends.interp import run_interp
from dhir.ir.text import parse_string

# C = A x B, 8 x 8, in tiles of 4 x 4 staged in workgroup memory: a grid of 2 x 2 blocks
# of 4 x 4 threads, each thread one element of C. Barriers in a loop: after a tile is
# staged, and before the next one overwrites it.
MATMUL = """func.func @main(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  dhir.schedule %a, %b, %c {
    %gpu = dhir.target {arch = "sm_90"}
    %t = dhir.task %gpu, %a, %b, %c {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c2, %gz = %c1)
          threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c4, %sz = %c1)
          workgroup(%sa : memref<4x4xf32, #gpu.address_space<workgroup>>,
                    %sb : memref<4x4xf32, #gpu.address_space<workgroup>>) {
        %row = affine.apply affine_map<(b, t) -> (b * 4 + t)>(%by, %ty)
        %col = affine.apply affine_map<(b, t) -> (b * 4 + t)>(%bx, %tx)
        %zero = arith.constant 0.0 : f32
        %sum = scf.for %k0 = %c0 to %c2 step %c1 iter_args(%acc = %zero) -> (f32) {
          %ac = affine.apply affine_map<(k, x) -> (k * 4 + x)>(%k0, %tx)
          %br = affine.apply affine_map<(k, y) -> (k * 4 + y)>(%k0, %ty)
          %va = memref.load %a[%row, %ac] : memref<8x8xf32>
          memref.store %va, %sa[%ty, %tx] : memref<4x4xf32, #gpu.address_space<workgroup>>
          %vb = memref.load %b[%br, %col] : memref<8x8xf32>
          memref.store %vb, %sb[%ty, %tx] : memref<4x4xf32, #gpu.address_space<workgroup>>
          gpu.barrier
          %part = scf.for %k = %c0 to %c4 step %c1 iter_args(%p = %acc) -> (f32) {
            %x = memref.load %sa[%ty, %k] : memref<4x4xf32, #gpu.address_space<workgroup>>
            %y = memref.load %sb[%k, %tx] : memref<4x4xf32, #gpu.address_space<workgroup>>
            %m = arith.mulf %x, %y : f32
            %s = arith.addf %p, %m : f32
            scf.yield %s : f32
          }
          gpu.barrier
          scf.yield %part : f32
        }
        memref.store %sum, %c[%row, %col] : memref<8x8xf32>
        gpu.terminator
      }
    }
  }
  return
}
"""

# Each block of 16 threads sums its 16 elements of %x in workgroup memory, halving the
# active threads at each step (a barrier after each, outside the condition), into %out.
REDUCTION = """module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @sum(%x: memref<32xf32>, %out: memref<2xf32>)
        workgroup(%s : memref<16xf32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %g = gpu.global_id x
      %v = memref.load %x[%g] : memref<32xf32>
      memref.store %v, %s[%t] : memref<16xf32, #gpu.address_space<workgroup>>
      func.call @wait() : () -> ()
      %first = arith.cmpi eq, %t, %c0 : index
      %steps = STEPS
      scf.for %i = %c0 to %steps step %c1 {
        %stride = arith.shrui %c8, %i : index
        %active = arith.cmpi ult, %t, %stride : index
        scf.if %active {
          %j = arith.addi %t, %stride : index
          %l = memref.load %s[%t] : memref<16xf32, #gpu.address_space<workgroup>>
          %r = memref.load %s[%j] : memref<16xf32, #gpu.address_space<workgroup>>
          %w = arith.addf %l, %r : f32
          memref.store %w, %s[%t] : memref<16xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
      }
      scf.if %first {
        %total = memref.load %s[%c0] : memref<16xf32, #gpu.address_space<workgroup>>
        memref.store %total, %out[%b] : memref<2xf32>
      }
      gpu.return
    }
    func.func @wait() {
      gpu.barrier
      return
    }
  }
  func.func @main(%x: memref<32xf32>, %out: memref<2xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    gpu.launch_func @kernels::@sum blocks in (%c2, %c1, %c1) threads in (%c16, %c1, %c1)
        args(%x : memref<32xf32>, %out : memref<2xf32>)
    return
  }
}
"""
STEPS = "arith.constant 4 : index"


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _reduce(src: str, x: np.ndarray | None = None, timeout: float | None = None) -> np.ndarray:
    x = np.ones(32, np.float32) if x is None else x
    module = dhir.parse_string(src.replace("STEPS", STEPS), "p.mlir")
    inputs: list[object] = [x, np.zeros(2, np.float32)]
    return run_interp(module, "main", inputs, timeout=timeout)[1]  # type: ignore[arg-type]


def _reduce_error(src: str) -> str:
    with pytest.raises(DhirError) as caught:
        _reduce(src)
    return str(caught.value)


def test_a_tiled_matmul_in_workgroup_memory_equals_numpy() -> None:
    """Through dhir.run, whose race check accepts the kernel first: each element's sum
    runs over k in order, products rounded, as the loop below computes it."""
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    got = dhir.run(parse_string(MATMUL), a, b, np.zeros((8, 8), np.float32), backend="interp")
    want = np.zeros((8, 8), np.float32)
    for k in range(8):
        want = want + np.outer(a[:, k], b[k, :])
    _same_bits(got[2], want)


def test_blocks_reuse_the_python_threads_of_the_block_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The matmul's 4 blocks of 16 threads start 16 Python threads, not 64 (starting one
    costs more than running a short kernel's thread), and end them all."""
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    a = np.ones((8, 8), np.float32)
    dhir.run(parse_string(MATMUL), a, a, a, backend="interp")
    assert len(started) == 16
    assert not any(thread.is_alive() for thread in started)


def test_a_block_reduction_in_workgroup_memory_equals_numpy() -> None:
    """A gpu.launch_func, with a barrier in a called function and one in a loop."""
    x = np.random.default_rng(2).standard_normal(32).astype(np.float32)
    want = x.reshape(2, 16).copy()
    for stride in (8, 4, 2, 1):
        want[:, :stride] = want[:, :stride] + want[:, stride : 2 * stride]
    _same_bits(_reduce(REDUCTION, x), want[:, 0])


# Where the reduction's loop runs 4 times in thread 0 only, or in every thread but 0.
UNEVEN = {
    "thread 0 loops longer": "arith.select %first, %c4, %c1 : index",
    "thread 0 loops less": "arith.select %first, %c1, %c4 : index",
}


@pytest.mark.parametrize(
    ("steps", "waiting", "other"),
    [
        (UNEVEN["thread 0 loops longer"], "thread (0, 0, 0) of block (0, 0, 0)", "(1, 0, 0)"),
        (UNEVEN["thread 0 loops less"], "thread (1, 0, 0) of block (0, 0, 0)", "(0, 0, 0)"),
    ],
)
def test_a_barrier_in_a_loop_of_uneven_trips_is_refused(
    steps: str, waiting: str, other: str
) -> None:
    assert _reduce_error(REDUCTION.replace("STEPS", steps)).startswith(
        f"p.mlir:27:9: error: 'gpu.barrier' is reached by {waiting} but not by thread "
        f"{other} of that block, which returns from the kernel. Every thread of a block "
        "must reach each gpu.barrier together"
    )


def test_a_barrier_under_a_condition_that_differs_is_refused() -> None:
    """Threads 0-7 wait at a barrier in an scf.if, the others go on to the loop's."""
    src = REDUCTION.replace(
        "      func.call @wait() : () -> ()\n",
        """      %low = arith.cmpi ult, %t, %c8 : index
      scf.if %low {
        gpu.barrier
      }
""",
    )
    assert _reduce_error(src).startswith(
        "p.mlir:16:9: error: 'gpu.barrier' is reached by thread (0, 0, 0) of block (0, 0, 0) "
        "but not by thread (8, 0, 0) of that block, which waits at another gpu.barrier at "
        "p.mlir:30:9"
    )


def _two_calls(condition: str) -> str:
    """REDUCTION with its call of @wait (which holds a barrier) made from one of two call
    sites, by `condition`."""
    return REDUCTION.replace(
        "      func.call @wait() : () -> ()\n",
        f"""      %low = {condition}
      scf.if %low {{
        func.call @wait() : () -> ()
      }} else {{
        func.call @wait() : () -> ()
      }}
""",
    )


def test_a_barrier_reached_through_different_calls_is_refused() -> None:
    """Threads 0-7 call @wait at one place, 8-15 at another: on a GPU (after inlining)
    they wait at two different barriers, and the block hangs or goes on. The interpreter
    took them as at one barrier and summed 16 in each block; now it refuses, naming both
    threads' calls."""
    error = _reduce_error(_two_calls("arith.cmpi ult, %t, %c8 : index"))
    assert error.startswith(
        "p.mlir:41:7: error: 'gpu.barrier' is reached by thread (0, 0, 0) of block (0, 0, 0) "
        "but not by thread (8, 0, 0) of that block, which waits at this gpu.barrier through "
        "other calls (through the call at p.mlir:18:9, where thread (0, 0, 0) of block "
        "(0, 0, 0) came through the call at p.mlir:16:9)"
    ), error


def test_a_barrier_every_thread_of_a_block_reaches_through_one_call_runs() -> None:
    """Block 0 calls @wait at one place, block 1 at the other: all threads of a block wait
    at one barrier, as on a GPU, so the reduction runs."""
    _same_bits(_reduce(_two_calls("arith.cmpi eq, %b, %c0 : index")), np.full(2, 16, np.float32))


def test_an_error_between_barriers_is_located_and_leaves_no_thread_behind() -> None:
    """Thread 1 reads past the workgroup buffer after the first barrier, while thread 0
    waits at the next: the error is thread 1's, and thread 0 is ended."""
    before = threading.active_count()
    src = REDUCTION.replace(
        "%j = arith.addi %t, %stride : index", "%j = arith.muli %t, %c8 : index"
    )
    assert _reduce_error(src).startswith(
        "p.mlir:23:16: error: 'memref.load' accesses index 16 of dimension 0"
    )
    assert threading.active_count() == before


@pytest.mark.slow
def test_an_endless_loop_after_a_barrier_times_out() -> None:
    before = threading.active_count()
    src = REDUCTION.replace(
        "      scf.if %first {\n        %total",
        """      %five = arith.cmpi eq, %t, %c4 : index
      scf.while : () -> () {
        scf.condition(%five)
      } do {
        scf.yield
      }
      scf.if %first {
        %total""",
    )
    # Stopped at an op of the loop (lines 30-34): thread 4 loops, on a Python thread.
    with pytest.raises(DhirError, match=r"p\.mlir:3[0-4]:\d+: error: the interpreter timed out"):
        _reduce(src, timeout=1)
    assert threading.active_count() == before


def test_a_barrier_outside_a_kernel_is_a_located_error() -> None:
    src = REDUCTION.replace("    gpu.launch_func", "    gpu.barrier\n    gpu.launch_func")
    assert _reduce_error(src).startswith(
        "p.mlir:44:5: error: 'gpu.barrier' runs outside a GPU kernel"
    )


@pytest.mark.mlir
def test_the_tiled_matmul_is_built_and_launched_natively(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the fake CUDA driver, which runs no kernel: the race check lets the kernel
    through, and it is launched with its grid and blocks."""
    log = tmp_path / "cuda.log"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    a = np.ones((8, 8), np.float32)
    dhir.run(parse_string(MATMUL), a, a, a, ranks=1, timeout=120)
    launches = [line for line in log.read_text().splitlines() if line.startswith("cuLaunch")]
    assert launches == ["cuLaunchKernel task0_kernel0 grid=2x2x1 block=4x4x1"]


def _dynamic(size: int) -> str:
    """MATMUL asking for `size` bytes of dynamic shared memory besides its two 64-byte
    tiles (dhir reads no gpu.dynamic_shared_memory, so nothing uses them)."""
    return MATMUL.replace(
        "      gpu.launch", f"      %dynamic = arith.constant {size} : i32\n      gpu.launch"
    ).replace(
        "(%sx = %c4, %sy = %c4, %sz = %c1)",
        "(%sx = %c4, %sy = %c4, %sz = %c1) dynamic_shared_memory_size %dynamic",
    )


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (-1, "asks for -1 bytes of dynamic shared memory: give a size from 0"),
        (
            49025,
            "needs 49153 bytes of shared memory a block (128 of workgroup attributions, 49025 "
            "dynamic); CUDA gives a block at most 49152 unless the kernel opts in",
        ),
    ],
)
def test_more_shared_memory_than_cuda_gives_a_block_is_refused(size: int, expected: str) -> None:
    """The interpreter ignored dynamic_shared_memory_size, and ran launches a GPU refuses."""
    a = np.ones((8, 8), np.float32)
    with pytest.raises(DhirError) as caught:
        dhir.run(parse_string(_dynamic(size), "p.mlir"), a, a, a, backend="interp")
    assert str(caught.value).startswith(f"p.mlir:10:7: error: 'gpu.launch' {expected}")
    ones = dhir.run(parse_string(_dynamic(49024), "p.mlir"), a, a, a, backend="interp")
    np.testing.assert_array_equal(ones[2], np.full((8, 8), 8, np.float32))


@pytest.mark.mlir
def test_dynamic_shared_memory_is_passed_to_the_launch_and_checked(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Natively the size reaches cuLaunchKernel, and one CUDA refuses (the driver takes it
    unsigned: -1 is 4 GiB) stops the run with the task's name, before the launch."""
    log = tmp_path / "cuda.log"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_driver))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
    monkeypatch.delenv("DHIR_CUDA_DRIVER", raising=False)
    a = np.ones((8, 8), np.float32)
    dhir.run(parse_string(_dynamic(1024)), a, a, a, ranks=1, timeout=120)
    launches = [line for line in log.read_text().splitlines() if line.startswith("cuLaunch")]
    assert launches == ["cuLaunchKernel task0_kernel0 grid=2x2x1 block=4x4x1 shared=1024"]
    log.unlink()
    with pytest.raises(DhirError, match=r"asks for -1 bytes of dynamic shared memory"):
        dhir.run(parse_string(_dynamic(-1)), a, a, a, ranks=1, timeout=120)
    assert "cuLaunchKernel" not in log.read_text()
