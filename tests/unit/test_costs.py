"""Static cost estimates: trip counts x ops on hand-written tasks, and the roofline."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from devices import LOCAL_CPU, rank_device

from dhir.analysis.counts import DEFAULT_TRIP_COUNT, trip_count
from dhir.analysis.profile import Measurement, load_profile, profile_from_json
from dhir.analysis.work import Work, body_work, task_work
from dhir.api import parse_string
from dhir.dialects.dhir import TaskOp
from dhir.ir.diagnostics import DhirError
from dhir.ir.tasks import task_ids
from dhir.machine.description import REFERENCE_GPU, Link
from dhir.machine.roofline import STREAM_COUNTED, cold_bytes, curve_rate, rates, roofline_time
from dhir.placement import cost_model
from dhir.placement.cost_model import CostModel
from dhir.targets import DeviceKind

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import programs  # noqa: E402  # pyright: ignore[reportMissingImports]


def tasks_of(text: str) -> list[TaskOp]:
    return list(task_ids(parse_string(text)))


def one_task(args: str, operands: str, body: str, target: str = '{kind = "cpu"}') -> TaskOp:
    names = ", ".join(a.split(":")[0].strip() for a in args.split(",")) if args else ""
    text = f"""
func.func @main({args}) {{
  dhir.schedule {names} {{
    %t = dhir.target {target}
    %k = dhir.task %t{", " + operands if operands else ""} {{
{body}
    }}
  }}
  return
}}
"""
    (task,) = tasks_of(text)
    return task


def test_constant_loop_counts_each_iteration() -> None:
    # 0..10 step 3: i = 0, 3, 6, 9. Per iteration: a load, a mulf, an addf, a store.
    task = one_task(
        "%a: memref<16xf32>",
        "%a",
        """
      %c0 = arith.constant 0 : index
      %c3 = arith.constant 3 : index
      %c10 = arith.constant 10 : index
      %two = arith.constant 2.0 : f32
      scf.for %i = %c0 to %c10 step %c3 {
        %x = memref.load %a[%i] : memref<16xf32>
        %y = arith.mulf %x, %two : f32
        %z = arith.addf %y, %two : f32
        memref.store %z, %a[%i] : memref<16xf32>
      }""",
    )
    work = task_work(task)
    assert (work.flops, work.bytes, work.launches) == (8.0, 32.0, 0.0)
    assert work.footprint == 64


def test_nested_loops_multiply_and_index_arithmetic_is_free() -> None:
    task = one_task(
        "%a: memref<8x16xf64>",
        "%a",
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %n = arith.muli %c4, %c4 : index
      %m = arith.addi %c4, %c4 : index
      scf.for %i = %c0 to %m step %c1 {
        scf.for %j = %c0 to %n step %c1 {
          %k = arith.addi %i, %j : index
          %x = memref.load %a[%i, %j] : memref<8x16xf64>
          %y = arith.negf %x : f64
          memref.store %y, %a[%i, %j] : memref<8x16xf64>
        }
      }""",
    )
    work = task_work(task)
    assert work.flops == 8 * 16  # the negf; index adds are free
    assert work.bytes == 8 * 16 * 16


def test_parallel_and_affine_loops() -> None:
    task = one_task(
        "%a: memref<64xi32>",
        "%a",
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c6 = arith.constant 6 : index
      %one = arith.constant 1 : i32
      scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c6) step (%c1, %c2) {
        %x = memref.load %a[%i] : memref<64xi32>
        %y = arith.addi %x, %one : i32
        memref.store %y, %a[%j] : memref<64xi32>
      }
      affine.for %i = 0 to 10 {
        %x = affine.load %a[%i] : memref<64xi32>
        %y = arith.muli %x, %one : i32
        affine.store %y, %a[%i] : memref<64xi32>
      }
      "affine.parallel"() <{lowerBoundsGroups = dense<1> : vector<2xi32>,
          lowerBoundsMap = affine_map<() -> (0, 0)>, reductions = [], steps = [1, 1],
          upperBoundsGroups = dense<1> : vector<2xi32>,
          upperBoundsMap = affine_map<() -> (4, 5)>}> ({
      ^bb0(%i: index, %j: index):
        %x = affine.load %a[%i + %j] : memref<64xi32>
        affine.store %x, %a[%i] : memref<64xi32>
        affine.yield
      }) : () -> ()""",
    )
    work = task_work(task)
    assert work.flops == 4 * 3 + 10
    assert work.bytes == (4 * 3 + 10 + 4 * 5) * 8


def test_linalg_matmul_iteration_space_from_shapes() -> None:
    task = one_task(
        "%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>",
        "%a, %b, %c",
        """
      linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>)
                    outs(%c : memref<8x4xf32>)""",
    )
    work = task_work(task)
    iterations = 8 * 4 * 16
    assert work.flops == 2 * iterations  # a multiply and an add
    assert work.bytes == 4 * 4 * iterations  # a, b, c read; c written
    assert work.footprint == (8 * 16 + 16 * 4 + 8 * 4) * 4


def test_unknown_bounds_use_the_default_guess() -> None:
    task = one_task(
        "%a: memref<?xf32>, %n: index",
        "%a",
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      scf.for %i = %c0 to %n step %c1 {
        %x = memref.load %a[%i] : memref<?xf32>
        %y = arith.addf %x, %x : f32
        memref.store %y, %a[%i] : memref<?xf32>
      }""",
    )
    work = task_work(task)
    assert work.flops == DEFAULT_TRIP_COUNT
    assert work.footprint == DEFAULT_TRIP_COUNT * 4
    assert trip_count(0, None, 1) == DEFAULT_TRIP_COUNT
    assert trip_count(0, 10, 0) == DEFAULT_TRIP_COUNT
    assert trip_count(5, 2, 1) == 0


def test_gpu_launch_counts_threads_and_one_launch() -> None:
    task = one_task(
        "%a: memref<64xf32>",
        "%a",
        """
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c32 = arith.constant 32 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
        %x = memref.load %a[%tx] : memref<64xf32>
        %y = arith.mulf %x, %x : f32
        memref.store %y, %a[%tx] : memref<64xf32>
        gpu.terminator
      }""",
        target='{arch = "sm_90"}',
    )
    work = task_work(task)
    assert (work.flops, work.bytes, work.launches) == (64.0, 64 * 8.0, 1.0)


def test_calls_count_the_callee_and_if_its_costlier_branch() -> None:
    text = """
func.func private @scale(%v: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%i] : memref<4xf32>
    %y = arith.mulf %x, %x : f32
    memref.store %y, %v[%i] : memref<4xf32>
  }
  func.call @scale(%v) : (memref<4xf32>) -> ()
  return
}
func.func @main(%a: memref<4xf32>, %flag: i1) {
  dhir.schedule %a, %flag {
    %t = dhir.target {kind = "cpu"}
    %k = dhir.task %t, %a {
      func.call @scale(%a) : (memref<4xf32>) -> ()
      scf.if %flag {
        %c0 = arith.constant 0 : index
        %x = memref.load %a[%c0] : memref<4xf32>
        %y = arith.addf %x, %x : f32
        %z = arith.addf %y, %x : f32
        memref.store %z, %a[%c0] : memref<4xf32>
      }
    }
  }
  return
}
"""
    (task,) = tasks_of(text)
    work = task_work(task)
    assert work.flops == 4 + 2  # the callee once (its recursion is not followed), the then
    assert work.bytes == 4 * 8 + 8


def test_vector_ops_count_lanes() -> None:
    task = one_task(
        "%a: memref<16xf32>",
        "%a",
        """
      %c0 = arith.constant 0 : index
      %v = vector.load %a[%c0] : memref<16xf32>, vector<8xf32>
      %w = arith.mulf %v, %v : vector<8xf32>
      vector.store %w, %a[%c0] : memref<16xf32>, vector<8xf32>""",
    )
    work = task_work(task)
    assert (work.flops, work.bytes) == (8.0, 64.0)


def test_roofline_picks_the_slower_bound_and_gpus_pay_launches() -> None:
    device = rank_device(DeviceKind.CPU, peak_gflops=1.0, mem_bw_gbs=2.0)
    assert roofline_time(Work(flops=3e9, bytes=2e9), device) == pytest.approx(3.0)
    # STREAM's counts are 3/4 of a CPU's traffic; stores to new elements read them first.
    assert roofline_time(Work(flops=1e9, bytes=8e9), device) == pytest.approx(3.0)
    assert roofline_time(Work(bytes=6e9, allocated=2e9), device) == pytest.approx(3.0)
    assert roofline_time(Work(bytes=6e9, allocated=2e9), REFERENCE_GPU) == pytest.approx(
        6e9 / 3e12 + 5e-6
    )
    shared = rank_device(DeviceKind.CPU, peak_gflops=1.0, mem_bw_gbs=2.0)
    object.__setattr__(shared, "ranks", 2)  # a machine description's CPU running 2 ranks
    assert roofline_time(Work(flops=1e9), shared) == pytest.approx(2.0)
    gpu = rank_device(DeviceKind.GPU, peak_gflops=1e3, mem_bw_gbs=1e3, launch_overhead_s=1e-5)
    assert roofline_time(Work(), gpu) == pytest.approx(1e-5)  # at least one kernel
    assert roofline_time(Work(launches=3), gpu) == pytest.approx(3e-5)


MATMUL = """
func.func @main(%a: memref<{n}x{n}xf32>, %b: memref<{n}x{n}xf32>, %c: memref<{n}x{n}xf32>) {{
  dhir.schedule %a, %b, %c {{
    %t = dhir.target {{kind = "any"}}
    %k = dhir.task %t, %a, %b, %c {{
      linalg.matmul ins(%a, %b : memref<{n}x{n}xf32>, memref<{n}x{n}xf32>)
                    outs(%c : memref<{n}x{n}xf32>)
    }}
  }}
  return
}}
"""


def test_big_work_is_faster_on_a_gpu_and_tiny_work_on_a_cpu() -> None:
    model = CostModel()
    (big,) = tasks_of(MATMUL.format(n=512))
    (tiny,) = tasks_of(MATMUL.format(n=2))
    name = "main.schedule0.task0"
    assert model.task_time(big, name, REFERENCE_GPU) < model.task_time(big, name, LOCAL_CPU)
    assert model.task_time(tiny, name, LOCAL_CPU) < model.task_time(tiny, name, REFERENCE_GPU)


def test_links_and_transfers() -> None:
    assert Link(1.0, 2.0).time(4e9) == pytest.approx(2.000001)
    model = CostModel(link=Link(1.0, 1.0))
    assert model.comm_time(1e9, [LOCAL_CPU, LOCAL_CPU]) == pytest.approx(1.000001)

    def transfer(src: object, dst: object, nbytes: float) -> float:
        return 1.0 + nbytes * (1.0 if src is LOCAL_CPU else 3.0)

    other = rank_device(DeviceKind.CPU)
    described = CostModel(link=Link(0.0, 1e9), transfer=transfer)
    # Mean of the two directions, affine in the size.
    assert described.comm_time(10.0, [LOCAL_CPU, other]) == pytest.approx(1.0 + 20.0)


def test_mean_links_are_found_per_device_not_per_rank_pair() -> None:
    """Ranks of one device share its object: the means weigh each device pair by its
    rank pairs, as a walk over all rank pairs would (quadratic in ranks: 65,536 ranks of
    a machine description took minutes)."""
    one, two = rank_device(DeviceKind.CPU), rank_device(DeviceKind.CPU)
    three = replace(two, name="other")
    calls = []

    def transfer(src: object, dst: object, nbytes: float) -> float:
        calls.append((src, dst))
        return (1.0 if src is one else 2.0) + nbytes * (3.0 if dst is three else 5.0)

    def node_of(device: object) -> str:
        return "a" if device is one else "b"

    link = Link(0.5, 1.0)
    ranks = [one] * 2 + [two] * 3 + [three] * 4
    model = CostModel(link=link, transfer=transfer, node_of=node_of)
    inside, between = model.comm_times(100.0, ranks)
    assert len(calls) <= 9 * 2 * 3  # 9 device pairs, two probes, three means

    def mean(pairs: list[tuple[object, object]]) -> float:
        times = [link.time(100.0) if a is b else transfer(a, b, 100.0) for a, b in pairs]
        return sum(times) / len(times)

    pairs = [(a, b) for i, a in enumerate(ranks) for j, b in enumerate(ranks) if i != j]
    assert inside == pytest.approx(mean([(a, b) for a, b in pairs if node_of(a) == node_of(b)]))
    assert between == pytest.approx(mean([(a, b) for a, b in pairs if node_of(a) != node_of(b)]))
    assert model.comm_time(100.0, ranks) == pytest.approx(mean(pairs))
    many = CostModel(link=link, transfer=transfer, node_of=node_of)
    calls.clear()
    many.comm_times(100.0, [one] * 3000 + [three] * 3000)
    assert len(calls) <= 4 * 2 * 2  # 4 device pairs, two probes, two means


def test_task_ids_name_schedules_and_tasks_in_program_order() -> None:
    text = """
func.func @f(%a: memref<2xf32>) {
  dhir.schedule %a { dhir.task target = "cpu", %a {} dhir.task target = "cpu", %a {} }
  dhir.schedule %a { dhir.task target = "cpu", %a {} }
  return
}
func.func @g(%a: memref<2xf32>) {
  dhir.schedule %a { dhir.task target = "cpu", %a {} }
  return
}
"""
    names = list(task_ids(parse_string(text)).values())
    assert names == [
        "f.schedule0.task0",
        "f.schedule0.task1",
        "f.schedule1.task0",
        "g.schedule0.task0",
    ]


def test_measured_times_replace_estimates_on_their_kind_of_device(tmp_path: Path) -> None:
    (task,) = tasks_of(MATMUL.format(n=4))
    name = "main.schedule0.task0"
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"tasks": {name: 0.25}, "devices": {name: {"kind": "cpu", "arch": "x86_64"}}})
    )
    model = CostModel(load_profile(path))
    assert model.task_time(task, name, LOCAL_CPU) == 0.25  # LOCAL_CPU: any CPU arch
    assert model.task_time(task, name, rank_device(DeviceKind.CPU, "x86_64")) == 0.25
    estimate = CostModel().task_time(task, name, rank_device(DeviceKind.CPU, "aarch64"))
    assert model.task_time(task, name, rank_device(DeviceKind.CPU, "aarch64")) == estimate
    assert model.task_time(task, name, REFERENCE_GPU) == CostModel().task_time(
        task, name, REFERENCE_GPU
    )
    assert model.task_time(task, "main.schedule0.task9", LOCAL_CPU) != 0.25


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("not json", "p.json:1:1: error: cannot use it as task costs: not valid JSON"),
        ("[1, 2]", 'needs a "tasks" object'),
        ('{"tasks": {"t": -1}}', "need seconds >= 0"),
        ('{"tasks": {"t": "fast"}}', "need seconds >= 0"),
        ('{"tasks": {"t": NaN}}', "need seconds >= 0"),
        ('{"tasks": {"t": 1e308, "u": 1e308}}', "at most 1e.30"),  # their sum is inf
    ],
)
def test_bad_profiles_are_clear_errors(tmp_path: Path, content: str, complaint: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(DhirError, match=complaint):
        load_profile(path)
    with pytest.raises(DhirError, match="cannot read it"):
        load_profile(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("devices", "complaint"),
    [
        ({"t": {"kind": "gpux"}}, 'task "t" has kind "gpux"; it must be "cpu" or "gpu"'),
        ({"t": {"kind": "cpu", "arch": 5}}, 'task "t" has arch 5; it must be a string'),
        ({"t": {"kind": "cpu", "arch": "sm_90"}}, 'task "t" has arch "sm_90", a gpu arch, but'),
        ({"t": {"kind": "gpu", "arch": "x86_64"}}, 'task "t" has arch "x86_64", a cpu arch, but'),
        ([1], '"devices" must be an object'),
        ({"t": "x"}, 'devices of task "t" must be an object'),
    ],
)
def test_a_malformed_devices_section_is_an_error_naming_the_file_and_task(
    tmp_path: Path, devices: object, complaint: str
) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"tasks": {"t": 1.0}, "devices": devices}))
    with pytest.raises(DhirError) as error:
        load_profile(path)
    # At the entry's key or value in the file (tests/unit/test_config_lines.py).
    assert str(error.value).startswith(f"{path}:1:")
    assert f"error: cannot use it as task costs: {complaint}" in str(error.value)


def test_a_devices_entry_may_name_an_arch_dhir_does_not_know() -> None:
    read = profile_from_json(
        {"tasks": {"t": 1.0}, "devices": {"t": {"kind": "cpu", "arch": "s390x"}}}
    )
    assert read.tasks["t"] == Measurement(1.0, "cpu", "s390x")


# --- per-core rates, threads, caches and shared bandwidth --------------------------------

# A node of 4 cores running 2 ranks: 2 threads per rank. Rates in GFLOP/s and GB/s.
NODE = rank_device(
    DeviceKind.CPU,
    peak_gflops=400.0,
    mem_bw_gbs=40.0,
    ranks=2,
    cores=4,
    core_gflops=100.0,
    core_mem_bw_gbs=15.0,
    core_cache_bytes=1 << 20,
    core_cache_bw_gbs=60.0,
    llc_bytes=8 << 20,
    llc_bw_gbs=30.0,
)
BIG = 64 << 20  # a footprint beyond every cache


def test_a_task_without_parallel_loops_runs_on_one_core() -> None:
    work = Work(flops=1e9, bytes=3e9, footprint=BIG, allocated=1e9)
    # Memory: one core's 15 GB/s, under the node's 40 / 2 busy ranks; compute 100 GFLOP/s.
    # The 4e9 bytes moved are 3e9 as STREAM counts them.
    assert rates(work, NODE) == (100.0, 15.0)
    assert roofline_time(work, NODE) == pytest.approx(0.2)
    assert roofline_time(Work(flops=1e12, footprint=BIG), NODE) == pytest.approx(10.0)


def test_parallel_loops_use_the_ranks_threads_within_the_shared_node() -> None:
    work = Work(bytes=3e9, footprint=BIG, parallel=True)
    # 2 threads x 15 = 30 GB/s, capped at 40 / 2 busy ranks = 20; alone on the node: 30.
    assert rates(work, NODE)[1] == 20.0
    assert rates(work, NODE, busy=1)[1] == 30.0
    assert rates(Work(flops=1.0, parallel=True), NODE, busy=1)[0] == 200.0
    # More busy ranks than the device runs count as all of them.
    assert rates(work, NODE, busy=8)[1] == 20.0


def test_footprints_that_fit_a_cache_stream_from_it() -> None:
    core = Work(bytes=6e9, footprint=1 << 20)
    shared = Work(bytes=6e9, footprint=4 << 20)
    assert rates(core, NODE)[1] == 60.0
    assert rates(shared, NODE)[1] == 30.0  # 4 MiB fits the LLC's half of 8 MiB
    assert rates(Work(bytes=1.0, footprint=6 << 20), NODE)[1] == 15.0  # not with 2 busy
    assert rates(Work(bytes=1.0, footprint=6 << 20), NODE, busy=1)[1] == 30.0
    # With 2 threads, each holds half of the footprint in its own cache.
    assert rates(Work(bytes=1.0, footprint=2 << 20, parallel=True), NODE)[1] == 120.0
    # From a cache, accesses bound the time: allocated lines cost nothing more.
    assert roofline_time(Work(bytes=6e9, allocated=2e9, footprint=1 << 20), NODE) == 0.1


CURVE = ((1 << 20, 80.0), (4 << 20, 60.0), (16 << 20, 20.0))
MEASURED = replace(NODE, core_bw_curve=CURVE, core_mem_bw_gbs=20.0)


def test_a_measured_curve_is_read_between_its_points_by_the_footprints_logarithm() -> None:
    assert curve_rate(CURVE, 1) == 80.0  # flat beyond the ends
    assert curve_rate(CURVE, 1 << 30) == 20.0
    assert curve_rate(CURVE, 4 << 20) == 60.0
    assert curve_rate(CURVE, 2 << 20) == pytest.approx(70.0)  # halfway, logarithmically
    assert curve_rate(CURVE, 8 << 20) == pytest.approx(40.0)


def test_a_measured_curve_replaces_the_two_cache_levels() -> None:
    # One thread alone: the curve at its footprint, whatever the described caches say.
    assert rates(Work(bytes=1.0, footprint=4 << 20), MEASURED, busy=1)[1] == 60.0
    # Two busy ranks share the last-level cache: each footprint counts twice.
    assert rates(Work(bytes=1.0, footprint=2 << 20), MEASURED)[1] == 60.0
    # Beyond the caches, the node's memory is shared: 40 / 2 busy ranks = 20.
    assert rates(Work(bytes=1.0, footprint=BIG, parallel=True), MEASURED)[1] == 20.0
    # Two threads whose halves fit their cores' own caches each stream from them ...
    assert rates(Work(bytes=1.0, footprint=1 << 20, parallel=True), MEASURED, busy=1)[1] == 160.0
    # ... but the last-level cache's part of the rate is shared: 40 + (60 - 20).
    shared = Work(bytes=1.0, footprint=4 << 20, parallel=True)
    assert rates(shared, MEASURED, busy=1)[1] == 80.0


def test_larger_footprints_are_never_faster_on_a_falling_curve() -> None:
    sizes = [1 << k for k in range(16, 30)]
    for parallel in (False, True):
        times = [
            roofline_time(Work(bytes=1e9, allocated=1e8, footprint=s, parallel=parallel), MEASURED)
            for s in sizes
        ]
        assert times == sorted(times)


def test_a_working_set_beyond_the_caches_makes_the_first_pass_come_from_memory() -> None:
    # 4 MiB swept 4 times: cached (60 GB/s on the curve) once the first pass is done.
    base = Work(bytes=16 << 20, footprint=4 << 20)
    assert cold_bytes(base, MEASURED, busy=1) == 0.0  # working set unknown: all cached
    small = replace(base, working_set=1 << 20)  # the schedule's data stays at 80 GB/s
    assert cold_bytes(small, MEASURED, busy=1) == 0.0
    assert roofline_time(small, MEASURED, busy=1) == roofline_time(base, MEASURED, busy=1)
    large = replace(base, working_set=1 << 30)  # far beyond: the footprint starts cold
    assert cold_bytes(large, MEASURED, busy=1) == 4 << 20
    # A quarter of the traffic from memory at 20 GB/s (line-counted), the rest as before.
    first = (4 << 20) * STREAM_COUNTED / 20e9
    warm = roofline_time(base, MEASURED, busy=1)
    assert roofline_time(large, MEASURED, busy=1) == pytest.approx(first + 0.75 * warm)
    between = replace(base, working_set=8 << 20)  # 40 GB/s: a third of the way to 80
    assert cold_bytes(between, MEASURED, busy=1) == pytest.approx((4 << 20) * 2 / 3)
    # Never more than the traffic, and more working set is never faster.
    assert cold_bytes(replace(large, bytes=1 << 20), MEASURED, busy=1) == 1 << 20
    times = [
        roofline_time(replace(base, working_set=1 << k), MEASURED, busy=1) for k in range(18, 32)
    ]
    assert times == sorted(times)


def test_a_device_without_core_rates_shares_its_whole_rates() -> None:
    old = rank_device(DeviceKind.CPU, peak_gflops=40.0, mem_bw_gbs=20.0, ranks=2)
    assert rates(Work(bytes=1.0), old) == (20.0, 10.0)
    assert rates(Work(bytes=1.0), old, busy=1) == (40.0, 20.0)


def test_parallel_loops_and_repeated_loads_are_counted() -> None:
    task = one_task(
        "%a: memref<64xf64>, %b: memref<64xf64>",
        "%a, %b",
        """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        %x = memref.load %a[%i] : memref<64xf64>
        %y = memref.load %a[%i] : memref<64xf64>
        %s = arith.addf %x, %y : f64
        memref.store %s, %b[%i] : memref<64xf64>
        %z = memref.load %b[%i] : memref<64xf64>
        memref.store %z, %a[%i] : memref<64xf64>
        scf.reduce
      }""",
    )
    work = task_work(task)
    # The second load of a[i] reuses the first, the load of b[i] the value stored; the
    # store to b[i] reads its line first (not loaded), the one to a[i] does not.
    assert work.parallel and work.flops == 64
    assert (work.bytes, work.allocated) == (64 * 3 * 8, 64 * 8)
    sequential = one_task("%a: memref<4xf64>", "%a", "")
    assert not task_work(sequential).parallel


def test_constants_through_casts_are_read_with_their_own_signedness() -> None:
    """-2 : i3 is 6 read unsigned; trunci keeps the low bits; extsi sign-extends."""
    from dhir.analysis.counts import constant_int

    module = parse_string(
        """
func.func @main() {
  %c = arith.constant -2 : i3
  %u = arith.index_castui %c : i3 to index
  %s = arith.index_cast %c : i3 to index
  %z = arith.extui %c : i3 to i8
  %w = arith.constant 13 : i32
  %t = arith.trunci %w : i32 to i3
  %e = arith.extsi %t : i3 to i64
  return
}
"""
    )
    values = {
        v.name_hint: constant_int(v) for op in module.walk() for v in op.results if v.name_hint
    }
    assert values == {"c": -2, "u": 6, "s": -2, "z": 6, "w": 13, "t": -3, "e": -3}


def test_narrow_integer_arithmetic_wraps_in_constants_and_trip_counts() -> None:
    """100 + 100 in i8 is -56 (as regions and the interpreter read it), so an i8 loop
    from 0 to it runs no iteration, not 200."""
    from dhir.analysis.counts import LoopTrips, constant_int

    module = parse_string(
        """
func.func @main() {
  %c0 = arith.constant 0 : i8
  %c1 = arith.constant 1 : i8
  %h = arith.constant 100 : i8
  %top = arith.addi %h, %h : i8
  scf.for %i = %c0 to %top step %c1 : i8 {
  }
  return
}
"""
    )
    (top,) = (v for op in module.walk() for v in op.results if v.name_hint == "top")
    assert constant_int(top) == -56
    (loop,) = (op for op in module.walk() if op.name == "scf.for")
    assert LoopTrips().of(loop) == [0]


def test_tasks_of_equal_work_share_one_work_and_its_estimates() -> None:
    # Generated schedules repeat a task's work thousands of times: each estimate is then
    # found by the shared work's identity, not by hashing a Work per task and device.
    module = parse_string(
        """
        func.func @main(%a: memref<4xf32>) {
          dhir.schedule %a {
            %cpu = dhir.target {kind = "cpu"}
            %t0 = dhir.task %cpu, %a {
              %i = arith.constant 0 : index
              %v = arith.constant 1.0 : f32
              memref.store %v, %a[%i] : memref<4xf32>
            }
            %t1 = dhir.task %cpu, %a {
              %i = arith.constant 1 : index
              %v = arith.constant 1.0 : f32
              memref.store %v, %a[%i] : memref<4xf32>
            }
            %t2 = dhir.task %cpu, %a {
              %i = arith.constant 2 : index
              %v = arith.constant 1.0 : f32
              memref.store %v, %a[%i] : memref<4xf32>
              memref.store %v, %a[%i] : memref<4xf32>
            }
          }
          return
        }
        """
    )
    t0, t1, t2 = (op for op in module.walk() if isinstance(op, TaskOp))
    costs = CostModel()
    assert costs.work(t0, working_set=16) is costs.work(t1, working_set=16)
    assert costs.work(t2, working_set=16) != costs.work(t0)
    assert costs.work(t0).working_set == 16
    fresh = CostModel()  # each task's estimates found anew, by value
    for task in (t0, t1, t2):
        fresh.work(task, working_set=16)
    for busy in (1, 2):
        for task in (t0, t1, t2):
            expected = fresh.task_time(task, "t", LOCAL_CPU, busy)
            assert costs.task_time(task, "t", LOCAL_CPU, busy) == expected


def test_tasks_of_one_shape_share_one_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shape's tasks touching as many bytes get one Work, made once (10,000 generated
    tasks made and hashed one each); a task touching other bytes gets its own."""
    module = parse_string(programs.many_tasks(6, buffers=2))
    tasks = list(task_ids(module))
    made: list[Work] = []
    original = cost_model.with_touched

    def counted(body: Work, touched: int, working_set: int | None = None) -> Work:
        made.append(body)
        return original(body, touched, working_set)

    monkeypatch.setattr(cost_model, "with_touched", counted)
    costs = CostModel()
    body = body_work(tasks[0])
    works = [costs.work(task, working_set=64, body=body) for task in tasks]
    assert len(made) == 1
    assert all(work is works[0] for work in works)
    assert works[0] == task_work(tasks[0], body=body, working_set=64)
    assert costs.work(tasks[0]) is works[0]  # asked again: as found
    other = CostModel().work(tasks[1], working_set=128, body=body)
    assert other == replace(works[0], working_set=128)
