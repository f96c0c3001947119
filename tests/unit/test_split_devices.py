"""dhir-split-devices (dhir/transforms/split_devices.py): loops bound to any device cut
over a node's GPU and CPU ranks by their rates. The rewritten programs, with dhir-gpu-data's
row copies, run in the interpreter (each rank's device buffers are arrays of their own, so
a row not copied in or out shows) and give the whole task's results bit for bit; the GPU
runtime's copies are checked against the fake CUDA driver; dhir-gpu-row-copies turns the
row copies into runtime calls."""

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from test_gpu_data import _run_on_interp
from test_gpu_runtime import Fake
from test_split_tasks import LinalgTask, OneLoop, ViewedOp, linalg_tasks, one_loops
from xdsl.dialects.builtin import ModuleOp

import dhir
from dhir.backends.native import compile_native
from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import PIECE_ATTR, rank_of, rows_of, task_ids
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    Node,
    System,
    guess_device,
)
from dhir.machine.dlti import attach
from dhir.toolchain.build import Timing
from dhir.toolchain.launch import run_executable
from dhir.toolchain.options import RunOptions
from dhir.transforms.gpu_row_copies import COPY_HOOK
from dhir.transforms.split_devices import SplitDevicesPass
from dhir.transforms.split_tasks import SplitPlan, SplitTasksPass


def _node(cpu_ranks: int, cpu_rate: float, gpu_rate: float) -> System:
    cpu = replace(guess_device("n0.cpu", "x86_64", cores=8), peak_gflops=cpu_rate, ranks=cpu_ranks)
    gpu = replace(guess_device("n0.gpu0", "sm_90"), peak_gflops=gpu_rate)
    return System((Node("n0", (cpu, gpu)),), GUESSED_NETWORK, GUESSED_INTRA_NODE)


def _split(text: str, system: System) -> ModuleOp:
    module = dhir.parse_string(text)
    attach(module, system)
    ranks = len(system.rank_devices())
    dhir.run_pipeline(
        module,
        f"dhir-split-devices{{ranks={ranks}}},dhir-place{{ranks={ranks}}},"
        f"dhir-gpu-data{{ranks={ranks}}}",
    )
    return module


def _any(text: str) -> str:
    return text.replace('target = "cpu"', 'target = "any"')


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), f"argument {k}:\n{g}\n{w}"


def _tasks(module: ModuleOp) -> list[TaskOp]:
    return [op for op in module.walk() if isinstance(op, TaskOp)]


systems = st.builds(
    _node,
    st.integers(1, 3),
    st.sampled_from((50.0, 100.0)),
    st.sampled_from((30.0, 100.0, 200.0)),
)


@settings(max_examples=60, deadline=None)
@given(one_loops(("scf.parallel", "affine.parallel")), systems)
def test_parallel_loops_split_over_gpu_and_cpus_keep_their_results(
    case: OneLoop, system: System
) -> None:
    text = _any(case.text().replace(f" attributes {{dhir.split = {case.pieces}}}", ""))
    module = _split(text, system)
    note(dhir.print_module(module))
    event(f"{sum(rows_of(t) is not None for t in _tasks(module))} GPU pieces")
    want = dhir.run(text, *case.inputs(), backend="interp")
    _same(_run_on_interp(module, [np.asarray(a).copy() for a in case.inputs()]), want)


@settings(max_examples=40, deadline=None)
@given(linalg_tasks(), systems)
def test_linalg_ops_split_over_gpu_and_cpus_keep_their_results(
    case: LinalgTask, system: System
) -> None:
    text = _any(case.unforced())
    module = _split(text, system)
    note(dhir.print_module(module))
    event(f"{sum(rows_of(t) is not None for t in _tasks(module))} GPU pieces")
    want = dhir.run(text, *case.inputs(), backend="interp")
    _same(_run_on_interp(module, [np.asarray(a).copy() for a in case.inputs()]), want)


STENCIL = """
func.func @main(%a: memref<40x16xf64>, %b: memref<40x16xf64>) {
  dhir.schedule %a, %b {
    %any = dhir.target {kind = "any"}
    %t = dhir.task %any, %a, %b ATTRS {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %c39 = arith.constant 39 : index
      LOOP {
        %im = arith.subi %i, %c1 : index
        %ip = arith.addi %i, %c1 : index
        %x = memref.load %a[%im, %j] : memref<40x16xf64>
        %y = memref.load %a[%ip, %j] : memref<40x16xf64>
        %z = arith.addf %x, %y : f64
        memref.store %z, %b[%i, %j] : memref<40x16xf64>
      }
    }
  }
  return
}
"""
PARALLEL = "scf.parallel (%i, %j) = (%c1, %c0) to (%c39, %c16) step (%c1, %c1)"
SEQUENTIAL = "scf.for %i = %c1 to %c39 step %c1 { scf.for %j = %c0 to %c16 step %c1"


def _stencil(loop: str = PARALLEL, attrs: str = "") -> str:
    text = STENCIL.replace("LOOP", loop).replace("ATTRS", attrs)
    return (
        text.replace("      }\n    }\n  }", "      }}\n    }\n  }") if "scf.for" in loop else text
    )


def test_pieces_follow_the_rates_and_the_gpu_piece_copies_its_rows_only() -> None:
    module = _split(_stencil(), _node(1, 100.0, 300.0))
    cpu, gpu = _tasks(module)
    assert (rank_of(cpu), rank_of(gpu)) == (0, 1)
    assert cpu.target_info().kind.value == "cpu"
    assert gpu.target_info().arch == "sm_90"
    rows = rows_of(gpu)
    assert rows is not None
    a, b = gpu.memrefs
    # Rows 10..38 of %b are the GPU's (3 of 4 parts of 1..38); it reads %a's 9..39 and
    # writes all it copies back, so %b is not copied in.
    assert (rows[a].copy_in, rows[a].copy_out) == ((9, 40), (0, 0))
    assert (rows[b].copy_in, rows[b].copy_out) == ((0, 0), (10, 39))
    text = dhir.print_module(module)
    assert text.count("gpu.memcpy") == 2
    a0, b0 = np.random.default_rng(1).random((2, 40, 16))
    got = _run_on_interp(module, [a0.copy(), b0.copy()])
    want = b0.copy()
    want[1:39] = a0[0:38] + a0[2:40]
    np.testing.assert_array_equal(got[1], want)


@pytest.mark.parametrize(
    ("text", "system"),
    [
        (_stencil(attrs="attributes {dhir.rank = 0 : i64}"), _node(1, 100.0, 300.0)),
        (_stencil(attrs="attributes {dhir.split = 2 : i64}"), _node(1, 100.0, 300.0)),
        (_stencil(SEQUENTIAL), _node(1, 100.0, 300.0)),
        (_stencil().replace('kind = "any"', 'kind = "cpu"'), _node(1, 100.0, 300.0)),
        (_any(ViewedOp(8, 3, 1, 2, 1, 1, 1, False, 1).unforced()), _node(1, 100.0, 100.0)),
    ],
    ids=["pinned", "split-by-hand", "sequential-loop", "cpu-task", "views-in-the-task"],
)
def test_tasks_the_user_placed_or_a_kernel_cannot_run_stay_whole(text: str, system: System) -> None:
    module = dhir.parse_string(text)
    attach(module, system)
    dhir.run_pipeline(module, "dhir-split-devices{ranks=2}")
    assert not any(PIECE_ATTR in t.attributes for t in _tasks(module))


def test_without_gpus_and_cpus_in_the_description_nothing_is_split() -> None:
    module = dhir.parse_string(_stencil())
    dhir.run_pipeline(module, "dhir-split-devices{ranks=2}")
    assert len(_tasks(module)) == 1
    cpus = System(
        (Node("n0", (replace(guess_device("c", "x86_64", cores=2), ranks=2),)),),
        GUESSED_NETWORK,
        GUESSED_INTRA_NODE,
    )
    attach(module, cpus)
    dhir.run_pipeline(module, "dhir-split-devices{ranks=2}")
    assert len(_tasks(module)) == 1


def _split_plan(text: str, system: System) -> tuple[ModuleOp, SplitPlan]:
    """dhir-split-devices, then dhir-split, as the native backend runs them."""
    module = dhir.parse_string(text)
    attach(module, system)
    ranks = len(system.rank_devices())
    dhir.run_pipeline(module, f"dhir-split-devices{{ranks={ranks}}}")
    plan = SplitPlan()
    SplitTasksPass(ranks=ranks).split(module, plan)
    plan.name(task_ids(module))
    return module, plan


VIEWED = _any(ViewedOp(8, 3, 1, 2, 1, 1, 1, False, 1).unforced())


@pytest.mark.parametrize("text", [_stencil(SEQUENTIAL), VIEWED], ids=["sequential", "views"])
def test_a_loop_no_kernel_runs_is_not_cut_by_the_gpu_s_rate(text: str) -> None:
    # Left to dhir-split, these pieces are CPU code: sized by the GPU's rate (1 part in 4
    # on the CPU rank, 3 on the GPU rank, whose host would run them), they were pointless.
    module, plan = _split_plan(text, _node(1, 100.0, 300.0))
    assert not any(PIECE_ATTR in t.attributes for t in _tasks(module))
    (choice,) = plan.choices
    assert choice.pieces == 0 and "one CPU rank at most can run it" in choice.how


def test_a_cpu_task_beside_a_gpu_rank_stays_whole_and_says_its_target() -> None:
    # The target read "any cpu" (and `any` read "any any").
    text = _stencil(SEQUENTIAL).replace('kind = "any"', 'kind = "cpu"')
    _, plan = _split_plan(text, _node(1, 100.0, 300.0))
    (choice,) = plan.choices
    assert choice.line() == ("t: whole: the device of one rank at most can run it; target any CPU")


def test_a_sequential_loop_is_cut_over_the_cpu_ranks_alone_by_their_rates() -> None:
    # Before: 3 pieces of 5, 5 and 28 iterations (CPU ranks of 50 GFLOP/s each, the GPU's 300).
    module, plan = _split_plan(_stencil(SEQUENTIAL), _node(2, 100.0, 300.0))
    assert len(_tasks(module)) == 2
    (choice,) = plan.choices
    assert choice.line().endswith("19 iterations each)")
    a0, b0 = np.random.default_rng(4).random((2, 40, 16))
    want = dhir.run(_stencil(SEQUENTIAL), a0, b0, backend="interp")
    _same(_run_on_interp(module, [a0.copy(), b0.copy()]), want)


def _two_cpu_nodes() -> System:
    """Nodes of 1000 and 200 GFLOP/s: 20 and 4 cores of 50 GFLOP/s each, a rank each."""

    def cpu(name: str, cores: int) -> Node:
        device = replace(
            guess_device(f"{name}.cpu", "x86_64", cores=cores),
            peak_gflops=50.0 * cores,
            core_gflops=50.0,
        )
        return Node(name, (device,))

    return System((cpu("n0", 20), cpu("n1", 4)), GUESSED_NETWORK, GUESSED_INTRA_NODE)


@pytest.mark.parametrize(
    ("loop", "each"),
    [(SEQUENTIAL, "19 iterations each"), (PARALLEL, "31, 7 iterations")],
    ids=["one-core", "threads"],
)
def test_pieces_are_sized_by_the_rate_they_run_at(loop: str, each: str) -> None:
    # A sequential loop's piece runs on one core, as fast on either node: it was cut 5 : 1
    # by the nodes' whole rates (31 and 7 iterations). A parallel loop's runs on the
    # rank's threads: 20 cores against 4.
    text = _stencil(loop)
    module, plan = _split_plan(text, _two_cpu_nodes())
    (choice,) = plan.choices
    assert choice.line().endswith(f"{each})")
    a0, b0 = np.random.default_rng(5).random((2, 40, 16))
    want = dhir.run(text, a0, b0, backend="interp")
    _same(_run_on_interp(module, [a0.copy(), b0.copy()]), want)


def test_cpu_pieces_are_sized_by_the_threads_their_ranks_run(tmp_path: Path) -> None:
    # 8 cores of 12.5 GFLOP/s shared by 3 ranks: each runs its piece on 2 OpenMP threads
    # (cores // ranks), 25 GFLOP/s, as the cost model and dhir-split time it. The pieces
    # were sized by peak / ranks, 33 GFLOP/s: 3 iterations each beside the GPU's 29.
    system = _node(3, 100.0, 300.0)
    cpu, gpu = system.nodes[0].devices
    system = replace(system, nodes=(Node("n0", (replace(cpu, core_gflops=12.5), gpu)),))
    text = _stencil()
    module = dhir.parse_string(text)
    attach(module, system)
    plan = SplitPlan()
    SplitDevicesPass(ranks=4).split(module, plan)
    (choice,) = plan.choices
    assert [(d.kind, d.gflops, d.size) for d in choice.devices] == [
        ("cpu", 25.0, "2 iterations"), ("cpu", 25.0, "3 iterations"), ("cpu", 25.0, "2 iterations"),
        ("gpu", 300.0, "31 iterations"),
    ]  # fmt: skip
    a0, b0 = np.random.default_rng(6).random((2, 40, 16))
    want = dhir.run(text, a0, b0, backend="interp")
    _same(_run_on_interp(_split(text, system), [a0.copy(), b0.copy()]), want)


TWO_LOOPS = """
func.func @main(%a: memref<16xf64>, %b: memref<16xf64>) {
  dhir.schedule %a, %b {
    %any = dhir.target {kind = "any"}
    %t = dhir.task %any, %a {LOOP_A}
    %u = dhir.task %any, %b {LOOP_B}
  }
  return
}
"""
_FILL = """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %one = arith.constant 1.0 : f64
      scf.for %i = %c0 to %c16 step %c1 {
        memref.store %one, %M[%i] : memref<16xf64>
      }
    """


def test_tasks_that_keep_the_cpu_ranks_busy_are_not_cut_for_gpu_ranks() -> None:
    # Two independent tasks on 2 CPU ranks and a GPU rank: each was cut in 2 (2 tasks at
    # once, fewer than 3 ranks), 4 pieces for the 2 CPU ranks that run them.
    text = TWO_LOOPS.replace("LOOP_A", _FILL.replace("%M", "%a"))
    module, plan = _split_plan(
        text.replace("LOOP_B", _FILL.replace("%M", "%b")), _node(2, 100.0, 300.0)
    )
    assert len(_tasks(module)) == 2
    assert [c.line() for c in plan.choices] == [
        f"{name}: whole: its schedule already has enough tasks that can run at once to keep "
        "every rank busy; 2 at once, 2 of 3 ranks can run its pieces"
        for name in ("t", "u")
    ]


# --- row copies -------------------------------------------------------------------------

ROW_COPY = """
func.func @f(%h: memref<8x4xf32>, %d: memref<8x4xf32>) {
  %s = memref.subview %h[2, 0] [3, 4] [1, 1] : memref<8x4xf32> to VIEW
  %t = memref.subview %d[2, 0] [3, 4] [1, 1] : memref<8x4xf32> to VIEW
  gpu.memcpy %t, %s : VIEW, VIEW
  return
}
""".replace("VIEW", "memref<3x4xf32, strided<[4, 1], offset: 8>>")


def test_row_copies_become_runtime_calls_with_addresses_and_bytes() -> None:
    module = dhir.parse_string(ROW_COPY)
    dhir.run_pipeline(module, "dhir-gpu-row-copies")
    text = dhir.print_module(module)
    assert "gpu.memcpy" not in text
    assert f"func.call @{COPY_HOOK}" in text and f"func.func private @{COPY_HOOK}" in text
    assert "arith.constant 32 : i64" in text  # the offset, 8 elements of 4 bytes
    assert "arith.constant 48 : i64" in text  # 3 x 4 elements


def test_row_copies_count_the_bytes_llvm_gives_an_element() -> None:
    # LLVM stores an i24 in 4 bytes and an i1 in 1: 3 bytes (bits / 8) would copy short.
    for element in ("i24", "i1"):
        module = dhir.parse_string(ROW_COPY.replace("f32", element))
        dhir.run_pipeline(module, "dhir-gpu-row-copies")
        text = dhir.print_module(module)
        width = 4 if element == "i24" else 1
        assert f"arith.constant {8 * width} : i64" in text  # the offset, 8 elements
        assert f"arith.constant {12 * width} : i64" in text  # 3 x 4 elements


def test_a_copy_of_a_view_that_is_not_one_block_is_refused() -> None:
    text = ROW_COPY.replace("[3, 4] [1, 1]", "[3, 2] [1, 1]").replace(
        "memref<3x4xf32, strided<[4, 1], offset: 8>>",
        "memref<3x2xf32, strided<[4, 1], offset: 8>>",
    )
    module = dhir.parse_string(text)
    with pytest.raises(dhir.DhirError, match="not one contiguous block"):
        dhir.run_pipeline(module, "dhir-gpu-row-copies")


# --- the runtime, against the fake driver -------------------------------------------------


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_split_stencil_copies_the_gpu_rows_only(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Fake(fake_driver, tmp_path, monkeypatch)
    module = dhir.parse_string(_stencil())
    attach(module, _node(1, 100.0, 300.0))
    a0, b0 = np.random.default_rng(2).random((2, 40, 16))
    got = dhir.run(module, a0, b0, ranks=2, timeout=120)
    # The fake runs no kernel: rows 1..9 are the CPU's, computed; %b's GPU rows come back
    # from a device buffer nothing wrote, and the rest of %b is as it was.
    want = a0[0:9] + a0[2:11]
    np.testing.assert_array_equal(got[1][1:10], want)
    np.testing.assert_array_equal(got[1][39:], b0[39:])
    (counts,) = fake.counts()
    assert (counts["h2d"], counts["d2h"], counts["launches"]) == (1, 1, 1)
    log = fake.calls("cuMemcpyAsync")
    assert log == [f"cuMemcpyAsync {31 * 16 * 8}", f"cuMemcpyAsync {29 * 16 * 8}"]


def _stepped_stencil() -> str:
    """The split stencil run %steps times by a time loop around its schedule."""
    text = _stencil().replace(
        "func.func @main(%a: memref<40x16xf64>, %b: memref<40x16xf64>) {",
        "func.func @main(%a: memref<40x16xf64>, %b: memref<40x16xf64>, %steps: index) {\n"
        "  %s0 = arith.constant 0 : index\n  %s1 = arith.constant 1 : index\n"
        "  scf.for %step = %s0 to %steps step %s1 {",
    )
    return text.replace("  }\n  return", "  }\n  }\n  return")


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_split_in_a_time_loop_allocates_once_and_sends_only_after_the_loop(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The device buffers last every step, and each rank keeps its rows between steps:
    the bytes sent do not grow with the steps."""
    fake = Fake(fake_driver, tmp_path, monkeypatch)
    module = dhir.parse_string(_stepped_stencil())
    attach(module, _node(1, 100.0, 300.0))
    exe, signature = compile_native(module, "main", RunOptions(ranks=2))
    a0, b0 = np.random.default_rng(3).random((2, 40, 16))
    sent: dict[int, list[str]] = {}
    for steps in (1, 4):
        fake.stats.unlink(missing_ok=True)
        traffic: list[str] = []
        inputs = [a0.copy(), b0.copy(), np.array(steps)]
        got = run_executable(exe, signature, inputs, RunOptions(ranks=2), traffic=traffic)
        np.testing.assert_array_equal(got[1][1:10], a0[0:9] + a0[2:11])  # the CPU's rows
        (counts,) = fake.counts()
        assert (counts["allocs"], counts["frees"]) == (2, 2)
        assert (counts["h2d"], counts["d2h"], counts["launches"]) == (steps, steps, steps)
        sent[steps] = [line.split(", took")[0] for line in traffic]
    assert sent[1] == sent[4] and len(sent[1]) == 2


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_split_holds_and_locks_only_each_rank_s_rows(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memrefs of a split loop are partitioned like a CPU split's: each rank holds the
    rows its piece copies or touches, and the GPU rank page-locks just those."""
    fake = Fake(fake_driver, tmp_path, monkeypatch)
    fake.set("DHIR_GPU_PIN", "always")
    text = (
        _stencil()
        .replace("40x16", "512x64")
        .replace("%c16 = arith.constant 16", "%c16 = arith.constant 64")
        .replace("%c39 = arith.constant 39", "%c39 = arith.constant 511")
    )
    module = dhir.parse_string(text)
    attach(module, _node(1, 100.0, 300.0))
    timing = Timing()
    exe, signature = compile_native(module, "main", RunOptions(ranks=2), timing=timing)
    held = {}
    for line in timing.notes:
        found = re.match(
            r"memory: %(\w): partitioned, rank 0 rows \d+\.\.\d+; rank 1 rows (\d+)", line
        )
        if found:
            held[found[1]] = int(found[2])
    assert set(held) == {"a", "b"}, timing.notes
    a0, b0 = np.random.default_rng(5).random((2, 512, 64))
    got = run_executable(exe, signature, [a0, b0.copy()], RunOptions(ranks=2))
    cpu_rows = held["b"]  # rank 0 writes rows 1 .. up to rank 1's first row
    np.testing.assert_array_equal(got[1][1:cpu_rows], a0[0 : cpu_rows - 1] + a0[2 : cpu_rows + 1])
    locked = sorted(int(c.split()[1]) for c in fake.calls("cuMemHostRegister_v2"))
    # %b's rows from its first to the last it holds; %a's from its first to the end.
    assert locked == sorted([(511 - held["b"]) * 512, (512 - held["a"]) * 512])
    (counts,) = fake.counts()
    assert counts["pins"] == 2


GEMM_STEPS = """
func.func @main(%a: memref<24x24xf64>, %b: memref<24x24xf64>, %c: memref<24x24xf64>,
                %steps: index) {
  %s0 = arith.constant 0 : index
  %s1 = arith.constant 1 : index
  scf.for %step = %s0 to %steps step %s1 {
    dhir.schedule %a, %b, %c {
      %any = dhir.target {kind = "any"}
      %t = dhir.task %any, %a, %b, %c {
        linalg.matmul ins(%a, %b : memref<24x24xf64>, memref<24x24xf64>)
                      outs(%c : memref<24x24xf64>)
      }
    }
  }
  return
}
"""


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_a_split_gemm_in_a_time_loop_sends_nothing(
    fake_driver: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank keeps its rows of C between steps and writes them to the result: no
    message at all. (The CPU piece's optimized loops bound its rows less tightly than the
    piece did, which must not make the CPU rank hold or send the GPU's rows.)"""
    Fake(fake_driver, tmp_path, monkeypatch)
    module = dhir.parse_string(GEMM_STEPS)
    attach(module, _node(1, 100.0, 300.0))
    timing = Timing()
    exe, signature = compile_native(module, "main", RunOptions(ranks=2), timing=timing)
    rows = [n for n in timing.notes if n.startswith("memory: %c: partitioned, rank 0 rows 0..")]
    assert rows, timing.notes
    cpu_rows = int(rows[0].split("..")[1].split(";")[0]) + 1
    a0, b0, c0 = np.random.default_rng(4).random((3, 24, 24))
    traffic: list[str] = []
    inputs = [a0, b0, c0.copy(), np.array(3)]
    got = run_executable(exe, signature, inputs, RunOptions(ranks=2), traffic=traffic)
    assert [line.split(" sent ")[1].split(" in ")[0] for line in traffic] == ["0 bytes"] * 2
    want = c0[:cpu_rows].copy()
    for _ in range(3):
        want += a0[:cpu_rows] @ b0  # the fake runs no kernel: the CPU's rows only
    np.testing.assert_allclose(got[2][:cpu_rows], want, rtol=1e-12)


NODE_TOML = """
name = "gpu-node"
[[nodes]]
name = "n0"
[[nodes.devices]]
name = "n0.cpu"
kind = "cpu"
arch = "x86_64"
peak_gflops = 100.0
cores = 2
[[nodes.devices]]
name = "n0.gpu0"
kind = "gpu"
arch = "sm_90"
peak_gflops = 300.0
"""


def test_dhir_schedule_shows_the_pieces_on_the_gpu_and_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dhir.cli.main import main

    (tmp_path / "node.toml").write_text(NODE_TOML)
    (tmp_path / "stencil.mlir").write_text(_stencil())
    assert (
        main(["schedule", str(tmp_path / "stencil.mlir"), "--system", str(tmp_path / "node.toml")])
        == 0
    )
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    placed = {row[0]: row[1] for row in rows if len(row) == 4 and row[1].startswith("rank")}
    assert placed == {"t.piece0": "rank0", "t.piece1": "rank1", "(end)": "rank0"}


def _split_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if "dhir-split-devices" in line]
    return line


WANT_SPLIT = (
    "t: cut into 2 pieces over GPU and CPU ranks by their rates (dhir-split-devices) (over "
    "the scf.parallel at stencil.mlir:10:7, rank0 (cpu x86_64, 100 GFLOP/s): 9 iterations, "
    "rank1 (gpu sm_90, 300 GFLOP/s): 29 iterations)"
)


def test_dhir_schedule_reports_the_pieces_and_the_rates_that_sized_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dhir.cli.main import main

    (tmp_path / "node.toml").write_text(NODE_TOML)
    (tmp_path / "stencil.mlir").write_text(_stencil())
    monkeypatch.chdir(tmp_path)
    assert main(["schedule", "stencil.mlir", "--system", "node.toml"]) == 0
    assert _split_line(capsys.readouterr().out).strip() == WANT_SPLIT
    assert main(["schedule", "stencil.mlir", "--system", "node.toml", "--json"]) == 0
    (choice,) = json.loads(capsys.readouterr().out)["split"]
    assert (choice["task"], choice["pieces"]) == ("t", 2)
    assert choice["devices"] == [
        {"rank": 0, "name": "n0.cpu", "kind": "cpu", "arch": "x86_64", "gflops": 100.0,
         "size": "9 iterations"},
        {"rank": 1, "name": "n0.gpu0", "kind": "gpu", "arch": "sm_90", "gflops": 300.0,
         "size": "29 iterations"},
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs LLVM 22")
def test_dhir_run_timing_reports_the_pieces_as_dhir_schedule_does(
    fake_driver: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dhir.cli.main import main

    Fake(fake_driver, tmp_path, monkeypatch)
    (tmp_path / "node.toml").write_text(NODE_TOML)
    (tmp_path / "stencil.mlir").write_text(_stencil())
    a0, b0 = np.random.default_rng(2).random((2, 40, 16))
    np.save(tmp_path / "a.npy", a0)
    np.save(tmp_path / "b.npy", b0)
    monkeypatch.chdir(tmp_path)
    args = ["--input", "a.npy", "--input", "b.npy", "--system", "node.toml", "--timing"]
    assert main(["run", "stencil.mlir", *args]) == 0
    line = _split_line(capsys.readouterr().err)
    assert line.strip() == f"split: {WANT_SPLIT}"
