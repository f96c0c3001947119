"""The cost model times what the build runs: a nest dhir-optimize-bodies blocks in
registers at the core's peak (its own dry run says which), a loop-carried float chain at
the FP latency (docs/costs.md, "Blocked nests and chains"). Predicted times only, compared
between programs: nothing here runs or times a program."""

from dataclasses import replace

import pytest
from devices import rank_device
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir.analysis.counts import BLOCKED_ATTR
from dhir.analysis.threads import runs_on_threads
from dhir.analysis.work import task_work
from dhir.api import parse_string
from dhir.ir.tasks import task_ids
from dhir.machine.description import CPU_LOOP_SHARE, Device, with_core_guesses
from dhir.machine.roofline import BLOCKED_EFFICIENCY, FP_LATENCY_S, roofline_time
from dhir.targets import DeviceKind
from dhir.toolchain import rank_splits
from dhir.toolchain.rank_splits import RankSplits
from dhir.transforms import blocked_nests
from dhir.transforms.blocked_nests import dry_run, forget_blocked, mark_blocked
from dhir.transforms.optimize_bodies import Decision

# One core of a CPU whose caches are far slower than its arithmetic: a nest timed by its
# loads, not its flops, shows it.
CORE = rank_device(
    DeviceKind.CPU,
    peak_gflops=32.0,
    mem_bw_gbs=10.0,
    cores=1,
    core_gflops=32.0,
    core_mem_bw_gbs=10.0,
    core_cache_bytes=1 << 20,
    core_cache_bw_gbs=40.0,
    llc_bytes=32 << 20,
    llc_bw_gbs=20.0,
)


def gemm(n: int, element: str = "f64") -> str:
    """C = C + alpha A B as loops i, k, j (PolyBench's order), in one CPU task."""
    t = f"memref<{n}x{n}x{element}>"
    return f"""func.func @main(%C: {t}, %A: {t}, %B: {t}) {{
  dhir.schedule %C, %A, %B {{
    %cpu = dhir.target {{kind = "cpu"}}
    %g = dhir.task %cpu, %C, %A, %B {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {n} : index
      %alpha = arith.constant 1.5 : {element}
      scf.for %i = %c0 to %n step %c1 {{
        scf.for %k = %c0 to %n step %c1 {{
          scf.for %j = %c0 to %n step %c1 {{
            %c = memref.load %C[%i, %j] : {t}
            %a = memref.load %A[%i, %k] : {t}
            %b = memref.load %B[%k, %j] : {t}
            %aa = arith.mulf %alpha, %a : {element}
            %p = arith.mulf %aa, %b : {element}
            %s = arith.addf %c, %p : {element}
            memref.store %s, %C[%i, %j] : {t}
          }}
        }}
      }}
    }}
  }}
  return
}}
"""


def recurrence(n: int, ops: int, carried: str = "register") -> str:
    """x[i] = s with s = s * a + b[i] (`ops` 2) or s = (s * a + b[i]) * a + b[i] (4): each
    step waits for the last. `carried`: in iter_args ("register"), in acc[0] ("memory"),
    or not at all ("none": s = b[i] * a + b[i] ..., independent steps)."""
    t = f"memref<{n}xf64>"
    start = {"register": "%acc", "memory": "%old", "none": "%bi"}[carried]
    lines = [f"%m0 = arith.mulf {start}, %a : f64", "%v0 = arith.addf %m0, %bi : f64"]
    if ops == 4:
        lines += ["%m1 = arith.mulf %v0, %a : f64", "%v1 = arith.addf %m1, %bi : f64"]
    last = "%v1" if ops == 4 else "%v0"
    body = "\n".join(f"        {line}" for line in lines)
    if carried == "register":
        loop = f"""      %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {{
        %bi = memref.load %b[%i] : {t}
{body}
        memref.store {last}, %x[%i] : {t}
        scf.yield {last} : f64
      }}"""
    else:
        loop = f"""      scf.for %i = %c0 to %n step %c1 {{
        %bi = memref.load %b[%i] : {t}
        %old = memref.load %x[%c0] : {t}
{body}
        memref.store {last}, %x[{"%c0" if carried == "memory" else "%i"}] : {t}
      }}"""
    return f"""func.func @main(%x: {t}, %b: {t}) {{
  dhir.schedule %x, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
    %r = dhir.task %cpu, %x, %b {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {n} : index
      %a = arith.constant 0.5 : f64
      %zero = arith.constant 0.0 : f64
{loop}
    }}
  }}
  return
}}
"""


def predicted(text: str, optimize: bool = True) -> float:
    """Seconds the cost model gives the program's tasks on CORE, as `dhir run` splits
    them for 1 rank (`optimize`: with dhir-optimize-bodies, as by default)."""
    module = parse_string(text)
    splits = RankSplits(1)
    splits.devices(module)
    splits.tasks(module, tiles=optimize, vector_bits=256)
    return sum(roofline_time(task_work(task), CORE, 1) for task in task_ids(module))


def test_a_nest_the_optimizer_blocks_is_timed_at_the_blocked_rate() -> None:
    n = 600
    blocked = predicted(gemm(n))
    as_written = predicted(gemm(n), optimize=False)
    # 2 n^3 f64 flops (alpha A[i, k] once per k, not per j), each worth two f32 ones,
    # at the efficiency of the core's peak.
    at_peak = 2 * n**3 * 2 / (BLOCKED_EFFICIENCY * 32e9)
    assert blocked == pytest.approx(at_peak, rel=0.02)
    # The loops as written are timed by B's rows, fetched again for every row of C.
    assert as_written > 2 * blocked


def test_blocked_nests_are_timed_by_their_element_width() -> None:
    assert predicted(gemm(400, "f64")) == pytest.approx(2 * predicted(gemm(400, "f32")), rel=0.02)


def test_the_dry_run_marks_the_nest_and_the_build_drops_the_marks() -> None:
    module = parse_string(gemm(64))
    assert mark_blocked(module, 256) == 1
    marked = [op for op in module.walk() if BLOCKED_ATTR in op.attributes]
    assert [op.name for op in marked] == ["scf.for"]  # the k loop, the nest it blocks
    forget_blocked(module)
    assert not any(BLOCKED_ATTR in op.attributes for op in module.walk())


def test_a_nest_it_leaves_is_not_marked() -> None:
    # x[i] = s ... is no contraction: the optimizer says why it leaves it.
    module = parse_string(recurrence(64, 2))
    assert mark_blocked(module, 256) == 0


@pytest.mark.parametrize("carried", ["register", "memory"])
def test_a_loop_carried_chain_is_timed_at_the_fp_latency(carried: str) -> None:
    n = 100_000
    two = predicted(recurrence(n, 2, carried))
    four = predicted(recurrence(n, 4, carried))
    assert two == pytest.approx(2 * n * FP_LATENCY_S, rel=0.02)
    assert four == pytest.approx(2 * two, rel=0.02)
    # The same arithmetic on independent steps is bound by its traffic, far less.
    assert predicted(recurrence(n, 4, "none")) < four / 2


def stencil_rows(n: int) -> str:
    """B[i][j] = 0.2 (A[i][j-1] + A[i][j] + A[i][j+1] + A[i-1][j] + A[i+1][j]): a loop
    nest the optimizer leaves as written."""
    t = f"memref<{n}x{n}xf64>"
    return f"""func.func @main(%A: {t}, %B: {t}) {{
  dhir.schedule %A, %B {{
    %cpu = dhir.target {{kind = "cpu"}}
    %s = dhir.task %cpu, %A, %B {{
      %c1 = arith.constant 1 : index
      %last = arith.constant {n - 1} : index
      %w = arith.constant 0.2 : f64
      scf.for %i = %c1 to %last step %c1 {{
        scf.for %j = %c1 to %last step %c1 {{
          %l = arith.subi %j, %c1 : index
          %r = arith.addi %j, %c1 : index
          %u = arith.subi %i, %c1 : index
          %d = arith.addi %i, %c1 : index
          %v0 = memref.load %A[%i, %j] : {t}
          %v1 = memref.load %A[%i, %l] : {t}
          %v2 = memref.load %A[%i, %r] : {t}
          %v3 = memref.load %A[%u, %j] : {t}
          %v4 = memref.load %A[%d, %j] : {t}
          %s1 = arith.addf %v0, %v1 : f64
          %s2 = arith.addf %s1, %v2 : f64
          %s3 = arith.addf %s2, %v3 : f64
          %s4 = arith.addf %s3, %v4 : f64
          %s5 = arith.mulf %w, %s4 : f64
          memref.store %s5, %B[%i, %j] : {t}
        }}
      }}
    }}
  }}
  return
}}
"""


def on(device: Device, text: str) -> float:
    """Seconds the cost model gives the program's tasks on `device` (no optimizer)."""
    module = parse_string(text)
    return sum(roofline_time(task_work(task), device, 1) for task in task_ids(module))


def test_loops_it_does_not_block_run_at_the_loop_rate() -> None:
    """A stencil (in the core's cache) is timed by its flops at the core's
    `core_loop_gflops`, or CPU_LOOP_SHARE of its f32 FMA rate where a description leaves
    it out (placement fills it): not at that FMA rate, 4 to 10 times what such loops
    reach. A hand-made device without the per-core fields keeps the FMA rate."""
    n = 200
    flops = 5 * (n - 2) ** 2
    module = parse_string(stencil_rows(n))
    assert mark_blocked(module, 256) == 0
    guessed = with_core_guesses(replace(CORE, guessed=()))
    assert on(guessed, stencil_rows(n)) == pytest.approx(flops / (32e9 * CPU_LOOP_SHARE))
    given = replace(CORE, core_loop_gflops=2.0)
    assert on(given, stencil_rows(n)) == pytest.approx(flops / 2e9)
    assert on(CORE, stencil_rows(n)) < on(guessed, stencil_rows(n))  # its traffic, here


@pytest.mark.parametrize("carried", ["register", "memory"])
def test_a_chain_is_timed_at_the_devices_fp_latency(carried: str) -> None:
    n = 100_000
    slow = replace(CORE, fp_latency_ns=2.0)
    assert on(slow, recurrence(n, 2, carried)) == pytest.approx(2 * n * 2e-9, rel=0.02)


def shifted(n: int, back: int) -> str:
    """x[i] = x[i - back] * a + b[i] for i from 2: with back > 0 each step waits for the
    one `back` before; with back < 0 it reads an element not yet written (no chain)."""
    t = f"memref<{n}xf64>"
    return f"""func.func @main(%x: {t}, %b: {t}) {{
  dhir.schedule %x, %b {{
    %cpu = dhir.target {{kind = "cpu"}}
    %r = dhir.task %cpu, %x, %b {{
      %c2 = arith.constant 2 : index
      %back = arith.constant {back} : index
      %n = arith.constant {n - 2} : index
      %c1 = arith.constant 1 : index
      %a = arith.constant 0.5 : f64
      scf.for %i = %c2 to %n step %c1 {{
        %j = arith.subi %i, %back : index
        %old = memref.load %x[%j] : {t}
        %bi = memref.load %b[%i] : {t}
        %m = arith.mulf %old, %a : f64
        %v = arith.addf %m, %bi : f64
        memref.store %v, %x[%i] : {t}
      }}
    }}
  }}
  return
}}
"""


@pytest.mark.parametrize(("back", "chain"), [(1, 2.0), (2, 1.0), (-1, 0.0)])
def test_a_recurrence_through_the_last_element_is_a_chain(back: int, chain: float) -> None:
    n = 10_004
    (task,) = task_ids(parse_string(shifted(n, back)))
    assert task_work(task).chain == pytest.approx(chain * (n - 4))


def matmuls(tasks: int, kinds: int = 1) -> str:
    """`tasks` tasks, each a linalg.matmul of 16x16 f32 buffers; task k of `kinds` bodies
    (the k % kinds-th adds another matmul)."""
    t = "memref<16x16xf32>"
    lines = []
    for k in range(tasks):
        extra = f"\n      linalg.matmul ins(%b, %a : {t}, {t}) outs(%c : {t})" * (k % kinds)
        lines.append(
            f"""    %t{k} = dhir.task %cpu, %a, %b, %c {{
      linalg.matmul ins(%a, %b : {t}, {t}) outs(%c : {t}){extra}
    }}"""
        )
    body = "\n".join(lines)
    return f"""func.func @main(%a: {t}, %b: {t}, %c: {t}) {{
  dhir.schedule %a, %b, %c {{
    %cpu = dhir.target {{kind = "cpu"}}
{body}
  }}
  return
}}
"""


def test_the_dry_run_optimizes_one_copy_per_body_and_marks_every_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = parse_string(matmuls(6, kinds=2))
    copied: list[int] = []
    real = blocked_nests.optimize_bodies

    def counting(scratch: ModuleOp, bits: int, bodies: list[Operation]) -> list[Decision]:
        copied.append(len(bodies))
        return real(scratch, bits, bodies)

    monkeypatch.setattr(blocked_nests, "optimize_bodies", counting)
    monkeypatch.setattr(ModuleOp, "clone", None)  # no copy of the whole module
    found = dry_run(module, 256)
    assert copied == [2]  # two bodies among six tasks
    assert found.marked == 9  # every matmul of every task
    assert found.linalg_left is False  # all of them are loops now


def test_the_dry_run_leaves_the_module_as_it_was_but_for_the_marks() -> None:
    module = parse_string(matmuls(3, kinds=2))
    before = str(module)
    args = module.body.block.first_op.body.blocks[0].args  # pyright: ignore[reportAttributeAccessIssue, reportOptionalMemberAccess]
    uses = [len(list(arg.uses)) for arg in args]
    assert dry_run(module, 256).marked == 4
    assert [len(list(arg.uses)) for arg in args] == uses
    forget_blocked(module)
    assert str(module) == before


def test_the_threads_decision_takes_the_dry_runs_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing but linalg ops makes the module threaded: whether one is left is asked of
    # the one dry run, not of a second copy.
    monkeypatch.setattr(rank_splits, "linalg_left", None)
    module = parse_string(matmuls(2))
    splits = RankSplits(1)
    splits.devices(module)
    splits.tasks(module, vector_bits=256)
    assert not runs_on_threads(module)
