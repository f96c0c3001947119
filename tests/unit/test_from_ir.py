"""Schedules as task graphs for the list schedulers, and dhir-place driven by them."""

import dataclasses
import json
from pathlib import Path

import pytest
from devices import rank_device
from hypothesis import HealthCheck, given, settings
from strategies import CPU_TARGETS, RandomSchedule, schedules

from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.outputs import root_only
from dhir.analysis.profile import Measurement as Measured
from dhir.analysis.profile import Profile
from dhir.api import parse_string, print_module, run_pipeline
from dhir.dialects.dhir import ScheduleOp
from dhir.ir.diagnostics import DhirError
from dhir.ir.tasks import rank_of
from dhir.machine.description import REFERENCE_GPU, Link
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import (
    END_TASK,
    concurrency,
    local_devices,
    local_link,
    machine_for,
    runs_on,
    task_graph,
)
from dhir.placement.list_scheduling import ALGORITHMS
from dhir.targets import DeviceKind

CPU = rank_device(DeviceKind.CPU, "x86_64", memory_bytes=1 << 30)
GPU = rank_device(DeviceKind.GPU, "sm_90", 60_000.0, 3_000.0, 80 << 30, 5e-6)

# This machine, as the tests see it: a fixed description rather than whatever the user's
# calibrated file or detection say, so that local placements do not vary between machines.
LOCAL_SYSTEM = {
    "name": "testbox",
    "links": {"intra_node": {"latency_us": 3.0, "bandwidth_gbs": 4.0}},
    "nodes": [
        {
            "name": "testbox",
            "devices": [
                {
                    "name": "cpu0",
                    "arch": "x86_64",
                    "peak_gflops": 80.0,
                    "mem_bw_gbs": 24.0,
                    "memory_bytes": 1 << 34,
                    "cores": 4,
                },
                {
                    "name": "gpu0",
                    "arch": "sm_90",
                    "host_link": {"latency_us": 9.0, "bandwidth_gbs": 20.0},
                },
            ],
        }
    ],
}


@pytest.fixture(autouse=True)
def local_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "system.json"
    path.write_text(json.dumps(LOCAL_SYSTEM))
    monkeypatch.setenv("DHIR_SYSTEM", str(path))
    return path


PROGRAM = """
func.func @main(%a: memref<256xf32>, %b: memref<256xf32>, %c: memref<256xf32>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %gpu = dhir.target {arch = "sm_90"}
    %any = dhir.target {kind = "any"}
    %t0 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 256 : index
      %one = arith.constant 1.0 : f32
      scf.for %i = %c0 to %n step %c1 {
        memref.store %one, %a[%i] : memref<256xf32>
      }
    }
    %t1 = dhir.task %gpu, %a, %b {
      %c1 = arith.constant 1 : index
      %c256 = arith.constant 256 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
        %x = memref.load %a[%tx] : memref<256xf32>
        memref.store %x, %b[%tx] : memref<256xf32>
        gpu.terminator
      }
    }
    %t2 = dhir.task %any, %a, %c attributes {dhir.rank = 1 : i64} {
      memref.copy %a, %c : memref<256xf32> to memref<256xf32>
    }
    %t3 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      memref.store %zero, %a[%c0] : memref<256xf32>
    }
  }
  return
}
"""
NAMES = [f"t{k}" for k in range(4)]  # the tasks' SSA names


def schedule_of(text: str) -> ScheduleOp:
    module = parse_string(text)
    return next(op for op in module.walk() if isinstance(op, ScheduleOp))


def test_targets_and_explicit_ranks_decide_where_tasks_may_run() -> None:
    graph = task_graph(schedule_of(PROGRAM), [CPU, GPU, CPU])
    assert graph.devices == ("rank0", "rank1", "rank2")
    assert graph.tasks == (*NAMES, END_TASK)
    t0, t1, t2, t3 = (graph.cost[name] for name in NAMES)
    assert set(t0) == {"rank0", "rank2"}  # a CPU task: no cost on the GPU
    assert set(t1) == {"rank1"}  # an sm_90 task: no cost on a CPU
    assert set(t2) == {"rank1"}  # dhir.rank = 1 (its target runs anywhere)
    assert set(t3) == {"rank0", "rank2"}
    assert t0["rank0"] == pytest.approx(CostModel().task_time(_task(PROGRAM, 0), NAMES[0], CPU))
    assert graph.cost[END_TASK] == {"rank0": 0.0}


def test_a_task_bound_to_any_device_runs_its_cpu_code_on_cpu_ranks_only() -> None:
    # A GPU rank runs such a task on its host: it was costed at the GPU's rates (a
    # sequential loop of 4000 x 1000 elements: 24 us there, 7.2 ms on the CPU rank).
    text = PROGRAM.replace("%t0 = dhir.task %cpu", "%t0 = dhir.task %any")
    text = text.replace("%t1 = dhir.task %gpu", "%t1 = dhir.task %any")
    graph = task_graph(schedule_of(text), [CPU, GPU, CPU])
    t0, t1, t2 = (graph.cost[name] for name in NAMES[:3])
    assert set(t0) == {"rank0", "rank2"}  # CPU code: no cost on the GPU rank
    assert set(t1) == {"rank0", "rank1", "rank2"}  # GPU code: the GPU too
    assert set(t2) == {"rank1"}  # dhir.rank = 1 still puts CPU code on a GPU rank
    schedule = schedule_of(text)
    assert not runs_on(list(schedule.tasks())[0], GPU)
    assert runs_on(list(schedule.tasks())[0], CPU) and runs_on(list(schedule.tasks())[1], GPU)


def test_edges_carry_the_bytes_a_hazard_moves() -> None:
    link = Link(1.0, 1.0)
    graph = task_graph(schedule_of(PROGRAM), [CPU, GPU], CostModel(link=link))
    comm = {(e.source, e.target): e.comm for e in graph.edges}
    kb = 256 * 4
    assert comm[(NAMES[0], NAMES[1])] == pytest.approx(link.time(kb))  # RAW on %a
    assert comm[(NAMES[0], NAMES[2])] == pytest.approx(link.time(kb))
    # t3 writes a[0] after t1 and t2 read it (WAR: order only) and after t0 wrote it
    # (WAW): it surely overwrites the one element it writes, so it needs no copy.
    assert comm[(NAMES[1], NAMES[3])] == 0.0
    assert comm[(NAMES[2], NAMES[3])] == 0.0
    assert comm[(NAMES[0], NAMES[3])] == 0.0
    # The writes that stand at the end go to rank 0: %a[0] by t3 and the rest of %a by
    # t0, %b by t1, %c by t2.
    assert comm[(NAMES[3], END_TASK)] == pytest.approx(link.time(4))
    assert comm[(NAMES[0], END_TASK)] == pytest.approx(link.time(kb - 4))
    assert comm[(NAMES[1], END_TASK)] == pytest.approx(link.time(kb))
    assert comm[(NAMES[2], END_TASK)] == pytest.approx(link.time(kb))


def test_memory_and_capacity_fill_the_graph_when_it_has_them() -> None:
    graph = task_graph(schedule_of(PROGRAM), [CPU, GPU])
    if not hasattr(graph, "memory"):
        pytest.skip("TaskGraph has no memory field")
    assert graph.memory[NAMES[1]] == 2 * 256 * 4
    assert graph.capacity == {"rank0": 1 << 30, "rank1": 80 << 30}


def test_a_task_no_rank_can_run_is_an_error_at_the_task() -> None:
    with pytest.raises(DhirError, match=r"<string>:\d+:\d+: error: task targets sm_90, but no"):
        task_graph(schedule_of(PROGRAM), [CPU, CPU])
    wrong_rank = PROGRAM.replace(
        "%t1 = dhir.task %gpu, %a, %b {",
        "%t1 = dhir.task %gpu, %a, %b attributes {dhir.rank = 0 : i64} {",
    )
    with pytest.raises(DhirError, match=r"rank 0 \(dhir.rank\) runs on x86_64"):
        task_graph(schedule_of(wrong_rank), [CPU, GPU])


def test_one_rank_needs_no_end_node_and_no_transfers() -> None:
    text = PROGRAM.replace('{arch = "sm_90"}', '{kind = "any"}')
    text = text.replace("attributes {dhir.rank = 1 : i64} ", "")
    graph = task_graph(schedule_of(text), [CPU])
    assert graph.tasks == tuple(NAMES)
    assert all(edge.comm == 0.0 for edge in graph.edges)


def test_a_profile_changes_the_costs() -> None:
    measured = Profile({NAMES[0]: Measured(0.5, "cpu", "x86_64")})
    schedule = schedule_of(PROGRAM)
    estimated = task_graph(schedule, [CPU, GPU])
    profiled = task_graph(schedule, [CPU, GPU], CostModel(measured))
    assert profiled.cost[NAMES[0]] == {"rank0": 0.5}
    assert estimated.cost[NAMES[0]]["rank0"] != 0.5
    assert profiled.cost[NAMES[1]] == estimated.cost[NAMES[1]]


def test_named_devices_of_a_description_bind_tasks() -> None:
    description = pytest.importorskip("dhir.machine.description")
    gpus = [description.guess_device(f"gpu{k}", "sm_90") for k in range(2)]
    cpu = description.guess_device("cpu0", "x86_64", cores=4)
    text = PROGRAM.replace(
        '%gpu = dhir.target {arch = "sm_90"}', '%gpu = dhir.target {device = "gpu1"}'
    )
    text = "module attributes {dlti.target_system_spec = #dlti.target_system_spec<" + (
        '"gpu1" = #dlti.target_device_spec<"arch" = "sm_90">>} {' + text + "}"
    )
    graph = task_graph(schedule_of(text), [cpu, *gpus])
    assert set(graph.cost[NAMES[1]]) == {"rank2"}


def test_a_machine_description_in_the_module_gives_the_ranks_devices() -> None:
    dlti = pytest.importorskip("dhir.machine.dlti")
    description = pytest.importorskip("dhir.machine.description")
    cpu = description.guess_device("cpu0", "x86_64", cores=8, ranks=2)
    gpu = description.guess_device("gpu0", "sm_90")
    node = description.Node("n0", (cpu, gpu))
    system = description.System(
        (node,), description.GUESSED_NETWORK, description.GUESSED_INTRA_NODE
    )
    module = parse_string(PROGRAM)
    dlti.attach(module, system)
    devices, model = machine_for(module, 3)
    assert [d.name for d in devices] == ["cpu0", "cpu0", "gpu0"]
    run_pipeline(module, "dhir-place{ranks=3 algorithm=best}")
    ranks = [rank_of(t) for t in module.walk() if t.name == "dhir.task"]
    assert ranks[1] == 2 and ranks[2] == 1 and ranks[0] in (0, 1) and ranks[3] in (0, 1)
    with pytest.raises(DhirError, match="runs 3 ranks, but the program is placed on 2"):
        machine_for(module, 2)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_place_pass_runs_every_algorithm(algorithm: str) -> None:
    # Local ranks are CPUs: the GPU task may run anywhere here.
    module = parse_string(PROGRAM.replace('{arch = "sm_90"}', '{kind = "any"}'))
    run_pipeline(module, f"dhir-place{{ranks=2 algorithm={algorithm}}}")
    ranks = [rank_of(t) for t in module.walk() if t.name == "dhir.task"]
    assert all(r in (0, 1) for r in ranks) and ranks[2] == 1


def test_cost_driven_placement_spreads_big_independent_work() -> None:
    # Two independent tasks of ~1 ms each: running them on two ranks halves the time.
    task = """
    %t{k} = dhir.task %cpu, %{m} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 1000000 : index
      %one = arith.constant 1.0 : f32
      scf.for %i = %c0 to %n step %c1 {{
        %x = memref.load %{m}[%c0] : memref<4xf32>
        %y = arith.addf %x, %one : f32
        memref.store %y, %{m}[%c0] : memref<4xf32>
      }}
    }}"""
    text = (
        "func.func @main(%a: memref<4xf32>, %b: memref<4xf32>) {\n"
        '  dhir.schedule %a, %b {\n    %cpu = dhir.target {kind = "cpu"}'
        + task.format(k=0, m="a")
        + task.format(k=1, m="b")
        + "\n  }\n  return\n}\n"
    )
    module = parse_string(text)
    run_pipeline(module, "dhir-place{ranks=2 algorithm=best}")
    assert sorted(rank_of(t) for t in module.walk() if t.name == "dhir.task") == [0, 1]


def test_unknown_algorithm_and_bad_costs_file_are_errors() -> None:
    module = parse_string(PROGRAM)
    with pytest.raises(DhirError, match="unknown algorithm 'fastest'; known: round-robin, heft"):
        run_pipeline(module, "dhir-place{ranks=2 algorithm=fastest}")
    with pytest.raises(DhirError, match="cannot use /no/such.json as task costs"):
        run_pipeline(module, 'dhir-place{ranks=2 algorithm=heft costs="/no/such.json"}')


def test_the_cli_offers_the_pass_algorithms() -> None:
    from dhir.cli.main import build_parser

    parser = build_parser()
    for name in ALGORITHMS:
        args = parser.parse_args(["compile", "p.mlir", "-o", "exe", "--placement", name])
        assert args.placement == name
    with pytest.raises(SystemExit):
        parser.parse_args(["compile", "p.mlir", "-o", "exe", "--placement", "fastest"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(max_tasks=12, targets=CPU_TARGETS, ranks=3))
def test_random_schedules_place_within_range_keeping_explicit_ranks(
    program: RandomSchedule,
) -> None:
    for algorithm in ("heft", "best"):
        module = parse_string(program.text())
        run_pipeline(module, f"dhir-place{{ranks=3 algorithm={algorithm}}}")
        tasks = [t for t in module.walk() if t.name == "dhir.task"]
        for task, spec in zip(tasks, program.tasks, strict=True):
            assert rank_of(task) in (0, 1, 2)
            if spec.rank is not None:
                assert rank_of(task) == spec.rank
        assert "dhir.rank" in print_module(module) or not tasks


def _task(text: str, k: int) -> object:
    return list(schedule_of(text).tasks())[k]


def test_local_devices_are_alike_cpus() -> None:
    devices, model = machine_for(parse_string(_one_task("cpu")), 2)
    assert devices == [devices[0], devices[0]]
    assert devices[0].kind == DeviceKind.CPU and devices[0].arch is None
    assert model.profile is None
    assert REFERENCE_GPU.kind == DeviceKind.GPU


@pytest.mark.parametrize("ranks", [2, 3])  # PROGRAM pins a task to rank 1
def test_ranks_drive_the_nodes_gpu_for_gpu_tasks(ranks: int) -> None:
    # Every rank is the node's CPU and drives its GPU (the one GPU here) for GPU tasks, as
    # the runtime gives rank r GPU r mod count; no arch, so another chip still places.
    devices, _ = machine_for(parse_string(PROGRAM), ranks)
    assert all(d.kind == DeviceKind.CPU and d.gpu is not None for d in devices)
    gpu = devices[0].gpu
    assert gpu.kind == DeviceKind.GPU and gpu.arch is None and gpu.peak_gflops == 67_000.0
    graph = task_graph(schedule_of(PROGRAM), devices)
    assert set(graph.cost[NAMES[1]]) == {f"rank{r}" for r in range(ranks)}
    # Without GPU tasks the ranks drive none.
    cpu_only, _ = machine_for(parse_string(_one_task("cpu")), ranks)
    assert all(d.gpu is None for d in cpu_only)


def test_an_explicit_rank_runs_a_gpu_task_on_the_gpu_it_drives() -> None:
    pinned = PROGRAM.replace(
        "%t1 = dhir.task %gpu, %a, %b {",
        "%t1 = dhir.task %gpu, %a, %b attributes {dhir.rank = 1 : i64} {",
    )
    devices, _ = machine_for(parse_string(pinned), 2)
    assert set(task_graph(schedule_of(pinned), devices).cost[NAMES[1]]) == {"rank1"}


def test_a_node_without_gpus_assumes_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # So the program places, and its run says that there is no GPU, naming the task.
    bare = json.loads(json.dumps(LOCAL_SYSTEM))
    del bare["nodes"][0]["devices"][1]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(bare))
    monkeypatch.setenv("DHIR_SYSTEM", str(path))
    devices, _ = machine_for(parse_string(PROGRAM), 2)
    assert [d.gpu for d in devices] == [REFERENCE_GPU] * 2


def _one_task(kind: str) -> str:
    return """
func.func @main(%a: memref<8xf32>) {
  dhir.schedule %a {
    %target = dhir.target {kind = "KIND"}
    %t0 = dhir.task %target, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 8 : index
      %one = arith.constant 1.0 : f32
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
      }
    }
  }
  return
}
""".replace("KIND", kind)


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_local_devices_share_the_described_cpu(ranks: int) -> None:
    # The node's CPU, with all ranks on it (the roofline shares its rates among the busy
    # ones); its GPU is a rank only for programs with GPU tasks (gpu_ranks).
    devices = local_devices(ranks)
    assert len(devices) == ranks
    assert {(d.kind, d.peak_gflops, d.mem_bw_gbs, d.ranks, d.cores) for d in devices} == {
        (DeviceKind.CPU, 80.0, 24.0, ranks, 4)
    }
    assert devices[0].memory_bytes == 1 << 34
    # Per-core rates not in the file are guessed from the node's: 80 / 4 cores, 10 GB/s.
    assert (devices[0].core_gflops, devices[0].core_mem_bw_gbs) == (20.0, 10.0)


def test_local_transfers_take_the_described_intra_node_link() -> None:
    assert local_link() == Link(3.0, 4.0)
    _, model = machine_for(parse_string(PROGRAM), 2)
    assert model.link.time(4e9) == pytest.approx(3e-6 + 1.0)


def test_local_devices_follow_dhir_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    faster = json.loads(json.dumps(LOCAL_SYSTEM))
    faster["nodes"][0]["devices"][0]["peak_gflops"] = 160.0
    path = tmp_path / "faster.json"
    path.write_text(json.dumps(faster))
    monkeypatch.setenv("DHIR_SYSTEM", str(path))
    assert local_devices(2)[0].peak_gflops == 160.0


def test_local_devices_need_a_rank() -> None:
    with pytest.raises(DhirError, match="at least 1"):
        local_devices(0)


def _sweeps(buffers: list[str], n: int = 1024) -> str:
    """One task per entry of `buffers`, in order, each updating that buffer in place."""
    t = f"memref<{n}xf64>"
    tasks = []
    for k, name in enumerate(buffers):
        tasks.append(
            f"""    %t{k} = dhir.task %cpu, %{name} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {n} : index
      scf.for %i = %c0 to %n step %c1 {{
        %x = memref.load %{name}[%i] : {t}
        %y = arith.addf %x, %x : f64
        memref.store %y, %{name}[%i] : {t}
      }}
    }}"""
        )
    return "\n".join(tasks)


def _program(buffers: list[str], in_loop: bool = False, used_after: bool = False) -> str:
    t = "memref<1024xf64>"
    args = ", ".join(f"%{b}: {t}" for b in sorted(set(buffers)))
    listed = ", ".join(f"%{b}" for b in sorted(set(buffers)))
    schedule = f"""  dhir.schedule {listed} {{
    %cpu = dhir.target {{kind = "cpu"}}
{_sweeps(buffers)}
  }}"""
    if in_loop:
        schedule = f"""  %z = arith.constant 0 : index
  %one = arith.constant 1 : index
  scf.for %s = %z to %one step %one {{
{schedule}
  }}"""
    after = f"  %c0 = arith.constant 0 : index\n  %v = memref.load %a[%c0] : {t}\n"
    return f"func.func @main({args}) {{\n{schedule}\n{after if used_after else ''}  return\n}}\n"


def test_concurrency_is_the_widest_level_of_the_dependences() -> None:
    assert concurrency(dependence_graph(schedule_of(_program(["a", "a", "a"])))) == 1
    assert concurrency(dependence_graph(schedule_of(_program(["a", "b", "c", "a"])))) == 3


def test_a_chain_gets_the_whole_node_and_independent_tasks_share_it() -> None:
    node = rank_device(DeviceKind.CPU, peak_gflops=100.0, mem_bw_gbs=20.0, ranks=2, cores=2)
    node = dataclasses.replace(node, core_gflops=50.0, core_mem_bw_gbs=15.0)
    chain = task_graph(schedule_of(_program(["a", "a"])), [node, node])
    fork = task_graph(schedule_of(_program(["a", "b"])), [node, node])
    # 1024 elements x 16 bytes (12 as STREAM counts): at one core's 15 GB/s alone, at
    # 20 / 2 GB/s when shared.
    assert chain.cost["t0"]["rank0"] == pytest.approx(12288 / 15e9)
    assert fork.cost["t0"]["rank0"] == pytest.approx(12288 / 10e9)


def test_entry_outputs_go_to_rank_0_and_everything_else_is_broadcast() -> None:
    link = Link(1.0, 1.0)
    kb8 = 1024 * 8
    plain = schedule_of(_program(["a", "b"]))
    assert {v.name_hint for v in root_only(plain)} == {"a", "b"}
    graph = task_graph(plain, [CPU, CPU], CostModel(link=link))
    assert graph.cost[END_TASK] == {"rank0": 0.0}
    comm = {(e.source, e.target): e.comm for e in graph.edges}
    assert comm[("t0", END_TASK)] == pytest.approx(link.time(kb8))
    # %a is read after the schedule: broadcast; %b still goes to rank 0 only.
    used = schedule_of(_program(["a", "b"], used_after=True))
    assert {v.name_hint for v in root_only(used)} == {"b"}
    graph = task_graph(used, [CPU, CPU], CostModel(link=link))
    assert graph.cost[END_TASK] == {"rank0": pytest.approx(link.time(kb8))}
    comm = {(e.source, e.target): e.comm for e in graph.edges}
    assert comm[("t0", END_TASK)] == 0.0  # in END_TASK's time
    assert comm[("t1", END_TASK)] == pytest.approx(link.time(kb8))
    # In a function other than the entry, everything is broadcast: on 4 ranks, two
    # rounds of a binomial tree each.
    assert root_only(plain, entry="other") == set()
    graph = task_graph(plain, [CPU] * 4, CostModel(link=link), entry="other")
    assert graph.cost[END_TASK] == {"rank0": pytest.approx(2 * 2 * link.time(kb8))}
    # A schedule alone in a loop's body keeps its data distributed between iterations
    # and is assembled once after the loop: nothing to pay at each iteration's end.
    looped = schedule_of(_program(["a", "b"], in_loop=True))
    assert root_only(looped) == set()
    graph = task_graph(looped, [CPU] * 4, CostModel(link=link))
    assert graph.cost[END_TASK] == {"rank0": 0.0}


def test_a_description_of_other_ranks_than_the_program_is_reported_at_its_line() -> None:
    text = (
        "module attributes {\n"
        "  dlti.target_system_spec = #dlti.target_system_spec<\n"
        '    "cpu0" = #dlti.target_device_spec<"arch" = "x86_64">>,\n'
        '  dhir.machine = {name = "one"}\n'
        "} {\n"
        "}\n"
    )
    with pytest.raises(DhirError) as raised:
        machine_for(parse_string(text, "p.mlir"), 3)
    (diagnostic,) = raised.value.diagnostics
    assert str(diagnostic.loc) == "p.mlir:2:3"
    assert diagnostic.message.endswith(
        "runs 1 rank, but the program is placed on 3; run it on 1: -n 1 (ranks=1 in the API), "
        "or describe 3 ranks"
    )
    with pytest.raises(DhirError) as raised:
        machine_for(parse_string(text.replace('"x86_64">', '"x86_64", "ranks" = 5 : i64>')), 1)
    assert raised.value.diagnostics[0].message.endswith(
        "runs 5 ranks, but the program is placed on 1; run it on 5: -n 5 (ranks=5 in the API), "
        "or describe 1 rank"
    )


# A time loop's host code loads an element of a memref of a dynamic shape that a task
# writes: the loaded region came as validity's one point `{ [] }`, and isl refused to
# meet it with the task's `{ [x0 = 1] }` (an internal error of dhir-place).
DYNAMIC_LOAD_IN_TIME_LOOP = """
func.func @main(%b: memref<?xi32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %t = %c0 to %n step %c1 {
    %seen = memref.load %b[%c0] : memref<?xi32>
    dhir.schedule %b {
      %cpu = dhir.target {kind = "cpu"}
      %t0 = dhir.task %cpu, %b {
        memref.store %seen, %b[%c1] : memref<?xi32>
      }
    }
  }
  return
}
"""


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_time_loop_s_load_of_a_dynamic_memref_is_placed_by_cost(algorithm: str) -> None:
    module = parse_string(DYNAMIC_LOAD_IN_TIME_LOOP)
    run_pipeline(module, f"dhir-place{{ranks=2 algorithm={algorithm}}}")
    (task,) = [op for op in module.walk() if rank_of(op) is not None]
    assert rank_of(task) in (0, 1)
