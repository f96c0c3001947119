"""Reuse-aware memory traffic (dhir.analysis.reuse) and how the roofline prices it."""

from dataclasses import replace

import pytest
from devices import rank_device
from single_task import single_task

from dhir.analysis.work import Work, task_work
from dhir.dialects.dhir import TaskOp
from dhir.machine.description import Device
from dhir.machine.roofline import STREAM_COUNTED, roofline_time
from dhir.targets import DeviceKind

LINE = 64


def task(args: str, body: str) -> TaskOp:
    """One task whose body has %c0 and %c1 (index constants) before `body`."""
    constants = "      %c0 = arith.constant 0 : index\n      %c1 = arith.constant 1 : index\n"
    return single_task(args, constants + body)


def gemm(n: int) -> Work:
    """C += A * B, n x n in f64, loops i, k, j (PolyBench's order)."""
    t = f"memref<{n}x{n}xf64>"
    return task_work(
        task(
            f"%C: {t}, %A: {t}, %B: {t}",
            f"""
      %n = arith.constant {n} : index
      scf.for %i = %c0 to %n step %c1 {{
        scf.for %k = %c0 to %n step %c1 {{
          scf.for %j = %c0 to %n step %c1 {{
            %c = memref.load %C[%i, %j] : {t}
            %a = memref.load %A[%i, %k] : {t}
            %b = memref.load %B[%k, %j] : {t}
            %p = arith.mulf %a, %b : f64
            %s = arith.addf %c, %p : f64
            memref.store %s, %C[%i, %j] : {t}
          }}
        }}
      }}""",
        )
    )


def stream(n: int, sweeps: int = 1) -> Work:
    """a[i] = b[i] + c[i] over n f64, `sweeps` times."""
    t = f"memref<{n}xf64>"
    return task_work(
        task(
            f"%a: {t}, %b: {t}, %c: {t}",
            f"""
      %n = arith.constant {n} : index
      %s = arith.constant {sweeps} : index
      scf.for %r = %c0 to %s step %c1 {{
        scf.for %i = %c0 to %n step %c1 {{
          %x = memref.load %b[%i] : {t}
          %y = memref.load %c[%i] : {t}
          %z = arith.addf %x, %y : f64
          memref.store %z, %a[%i] : {t}
        }}
      }}""",
        )
    )


def moved(work: Work, cache: float) -> float:
    bytes_moved = work.moved(cache)
    assert bytes_moved is not None
    return bytes_moved


def cpu(llc_bytes: int) -> Device:
    return rank_device(
        DeviceKind.CPU,
        peak_gflops=1000.0,
        mem_bw_gbs=10.0,
        cores=1,
        ranks=1,
        core_gflops=1000.0,
        core_mem_bw_gbs=10.0,
        core_cache_bytes=64 << 10,
        core_cache_bw_gbs=80.0,
        llc_bytes=llc_bytes,
        llc_bw_gbs=40.0,
    )


def test_gemm_moves_b_once_per_row_unless_b_fits_the_cache() -> None:
    n = 128
    work = gemm(n)
    row, matrix = n * 8, n * n * 8
    # Every array once (C read and written back), when the cache holds the whole nest.
    assert moved(work, 1 << 30) == pytest.approx((2 * matrix + matrix + matrix) * STREAM_COUNTED)
    # A cache that holds a k iteration (rows of B and C) but not B: B, A's row and C's
    # row again for every i.
    again = n * (matrix + row + 2 * row) * STREAM_COUNTED
    assert moved(work, 96 << 10) == pytest.approx(again)
    # The count of one access per load and store is far above both.
    assert work.bytes == n**3 * 4 * 8


def test_gemm_is_priced_by_the_level_that_feeds_the_missing_reuse() -> None:
    work = gemm(128)
    small, large = cpu(96 << 10), cpu(1 << 20)  # B (128 KiB) fits only the large LLC
    # B comes from memory for every row ...
    assert roofline_time(work, small) == pytest.approx(moved(work, 96 << 10) / 10e9)
    # ... or from the last-level cache, which keeps it: each byte touched once (counted
    # by access, as from a cache), plus what the core's cache fetches again.
    touched = moved(work, 1 << 30)
    once = work.bytes * touched / ((work.bytes + work.allocated) * STREAM_COUNTED)
    again = moved(work, 64 << 10) - touched
    assert roofline_time(work, large) == pytest.approx((once + again) / 40e9)
    # Without the reuse count, every access went at the cache's rate.
    assert roofline_time(replace(work, reuse=()), large) == pytest.approx(work.bytes / 40e9)
    assert roofline_time(work, large) < roofline_time(replace(work, reuse=()), large) / 3


def test_a_stream_has_no_reuse() -> None:
    n = 1 << 20  # 8 MiB per array: beyond every cache of the device
    work = stream(n)
    # a is read (write-allocate) and written back, b and c read: STREAM's 24 bytes each.
    for cache in (LINE * 3, 32 << 10, 1 << 20, 1 << 30):
        assert moved(work, cache) == pytest.approx(24 * n)
    device = cpu(4 << 20)
    assert roofline_time(work, device) == pytest.approx(24 * n / 10e9)
    assert roofline_time(work, device) == pytest.approx(
        roofline_time(replace(work, reuse=()), device)
    )


def test_a_repeated_sweep_that_fits_the_cache_comes_from_it() -> None:
    n, sweeps = 1 << 12, 50  # 32 KiB per array, 96 KiB in all
    work = stream(n, sweeps)
    assert moved(work, 1 << 20) == pytest.approx(24 * n)  # once, when 1 MiB holds them
    assert moved(work, 32 << 10) == pytest.approx(24 * n * sweeps)  # every sweep otherwise
    device = cpu(1 << 20)
    # From the last-level cache at 40 GB/s, not once per sweep from memory (the first
    # sweep's bytes counted by access, as from a cache: 24 per element as well).
    once = 24 * n
    assert roofline_time(work, device) == pytest.approx((once + 24 * n * (sweeps - 1)) / 40e9)


def test_stencil_neighbours_share_their_lines() -> None:
    n = 256
    t = f"memref<{n}x{n}xf64>"
    work = task_work(
        task(
            f"%A: {t}, %B: {t}",
            f"""
      %m = arith.constant {n - 1} : index
      scf.for %i = %c1 to %m step %c1 {{
        scf.for %j = %c1 to %m step %c1 {{
          %up = arith.subi %i, %c1 : index
          %down = arith.addi %i, %c1 : index
          %left = arith.subi %j, %c1 : index
          %a = memref.load %A[%up, %j] : {t}
          %b = memref.load %A[%down, %j] : {t}
          %c = memref.load %A[%i, %left] : {t}
          %s = arith.addf %a, %b : f64
          %r = arith.addf %s, %c : f64
          memref.store %r, %B[%i, %j] : {t}
        }}
      }}""",
        )
    )
    inner = n - 2
    # A once and B twice (allocated, written back), not A three times.
    once = (inner * n * 8 + 2 * inner * n * 8) * STREAM_COUNTED
    assert moved(work, 1 << 30) == pytest.approx(once, rel=0.02)


def test_a_triangular_loop_counts_its_mean_trips() -> None:
    n = 100
    t = f"memref<{n}x{n}xf64>"
    work = task_work(
        task(
            f"%A: {t}",
            f"""
      %n = arith.constant {n} : index
      scf.for %i = %c0 to %n step %c1 {{
        %top = arith.addi %i, %c1 : index
        scf.for %j = %c0 to %top step %c1 {{
          %x = memref.load %A[%i, %j] : {t}
          %y = arith.mulf %x, %x : f64
          memref.store %y, %A[%i, %j] : {t}
        }}
      }}""",
        )
    )
    assert work.flops == pytest.approx(n * (n + 1) / 2, rel=0.02)


def test_an_unsigned_cast_of_a_maybe_negative_subscript_is_not_the_signed_one() -> None:
    """Over an i8 loop from -8 to 8, A[index_castui i] (rows 248-255 and 0-7) and
    A[(index_cast i) + 8] (rows 0-15) touch different lines: reading the unsigned cast
    as signed put them in one group, as if they shared their lines."""
    t = "memref<256xf64>"
    loop = """
      %lo = arith.constant -8 : i8
      %hi = arith.constant 8 : i8
      %one = arith.constant 1 : i8
      %c8 = arith.constant 8 : index
      scf.for %i = %lo to %hi step %one : i8 {{
{loads}
      }}"""
    unsigned = (
        f"        %u = arith.index_castui %i : i8 to index\n        %x = memref.load %A[%u] : {t}"
    )
    signed = (
        "        %s = arith.index_cast %i : i8 to index\n"
        "        %p = arith.addi %s, %c8 : index\n"
        f"        %y = memref.load %B[%p] : {t}"
    )
    args = f"%A: {t}, %B: {t}"
    apart = [
        moved(task_work(task(args, loop.format(loads=part))), 0) for part in (unsigned, signed)
    ]
    together = task_work(
        task(args, loop.format(loads=unsigned + "\n" + signed.replace("%B", "%A")))
    )
    assert moved(together, 0) == pytest.approx(sum(apart))
