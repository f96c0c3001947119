"""Hypothesis strategies that write random, valid dhir programs as text.

Each task k combines what it reads element by element, `acc = acc * 3 + r[i]` in i32
(wrapping), starting from k + 1, and stores the result into what it writes over a
range [lo, hi) of elements: partial writes, so a backend that loses an earlier
writer's elements, or runs tasks out of order, gives different numbers.
"""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

TARGETS = ('{arch = "x86_64"}', '{arch = "aarch64"}', '{arch = "sm_90"}', '{kind = "cpu"}',
           '{kind = "gpu"}', '{kind = "any"}')  # fmt: skip
CPU_TARGETS = ('{kind = "cpu"}', '{arch = "x86_64"}', '{kind = "any"}')


@dataclass(frozen=True)
class RandomTask:
    target: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    lo: int = 0
    hi: int = 1
    rank: int | None = None


@dataclass(frozen=True)
class RandomSchedule:
    buffers: int
    size: int
    targets: tuple[str, ...]
    tasks: tuple[RandomTask, ...]

    def memref(self) -> str:
        return f"memref<{self.size}xi32>"

    def text(self) -> str:
        args = ", ".join(f"%m{i}: {self.memref()}" for i in range(self.buffers))
        names = ", ".join(f"%m{i}" for i in range(self.buffers))
        lines = [f"func.func @main({args}) {{", f"  dhir.schedule {names} {{"]
        for i, target in enumerate(self.targets):
            lines.append(f"    %tg{i} = dhir.target {target}")
        for k, task in enumerate(self.tasks):
            lines.extend(self._task_lines(k, task))
        lines += ["  }", "  func.return", "}"]
        return "\n".join(lines) + "\n"

    def _task_lines(self, k: int, task: RandomTask) -> list[str]:
        touched = sorted(set(task.reads) | set(task.writes))
        header = ", ".join([f"%tg{task.target}", *(f"%m{b}" for b in touched)])
        attrs = f" attributes {{dhir.rank = {task.rank} : i64}}" if task.rank is not None else ""
        t = self.memref()
        lines = [
            f"    %t{k} = dhir.task {header}{attrs} {{",
            f"      %lo = arith.constant {task.lo} : index",
            f"      %hi = arith.constant {task.hi} : index",
            "      %one = arith.constant 1 : index",
            "      %three = arith.constant 3 : i32",
            f"      %seed = arith.constant {k + 1} : i32",
            "      scf.for %i = %lo to %hi step %one {",
        ]
        acc = "%seed"
        for j, b in enumerate(task.reads):
            lines.append(f"        %r{j} = memref.load %m{b}[%i] : {t}")
            lines.append(f"        %s{j} = arith.muli {acc}, %three : i32")
            lines.append(f"        %a{j} = arith.addi %s{j}, %r{j} : i32")
            acc = f"%a{j}"
        for b in task.writes:
            lines.append(f"        memref.store {acc}, %m{b}[%i] : {t}")
        lines += ["      }", "    }"]
        return lines

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """What running the tasks one by one gives, computed with NumPy."""
        bufs = [a.copy() for a in inputs]
        with np.errstate(over="ignore"):
            for k, task in enumerate(self.tasks):
                span = slice(task.lo, task.hi)
                acc = np.full(task.hi - task.lo, k + 1, dtype=np.int32)
                for b in task.reads:
                    acc = acc * np.int32(3) + bufs[b][span]
                for b in task.writes:
                    bufs[b][span] = acc
        return bufs


@st.composite
def schedules(
    draw: st.DrawFn,
    max_tasks: int = 12,
    max_buffers: int = 5,
    targets: tuple[str, ...] = TARGETS,
    ranks: int | None = None,
) -> RandomSchedule:
    """Random schedules; with `ranks`, every task gets a random explicit rank < ranks
    (or none, leaving it to placement)."""
    buffers = draw(st.integers(1, max_buffers))
    size = draw(st.integers(1, 16))
    chosen = tuple(draw(st.lists(st.sampled_from(targets), min_size=1, max_size=3)))
    buffer_ids = st.integers(0, buffers - 1)

    @st.composite
    def task(draw_task: st.DrawFn) -> RandomTask:
        lo = draw_task(st.integers(0, size - 1))
        hi = draw_task(st.integers(lo + 1, size))
        rank = None if ranks is None else draw_task(st.none() | st.integers(0, ranks - 1))
        return RandomTask(
            draw_task(st.integers(0, len(chosen) - 1)),
            tuple(draw_task(st.lists(buffer_ids, max_size=3))),
            tuple(draw_task(st.lists(buffer_ids, max_size=2))),
            lo,
            hi,
            rank,
        )

    tasks = tuple(draw(st.lists(task(), min_size=0, max_size=max_tasks)))
    return RandomSchedule(buffers, size, chosen, tasks)


def ranked_cases(
    ranks: tuple[int, int], max_tasks: int, max_buffers: int, targets: tuple[str, ...]
) -> st.SearchStrategy[tuple[int, RandomSchedule, int]]:
    """A rank count from `ranks` (lowest, highest), a random schedule whose tasks may be
    pinned to those ranks, and a seed for its inputs (`random_inputs`)."""
    return st.integers(*ranks).flatmap(
        lambda n: st.tuples(
            st.just(n),
            schedules(max_tasks=max_tasks, max_buffers=max_buffers, targets=targets, ranks=n),
            st.integers(0, 2**16),
        )
    )


def random_inputs(program: RandomSchedule, seed: int) -> list[np.ndarray]:
    """One i32 array per buffer of `program`, drawn from `seed`."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-50, 50, program.size).astype(np.int32) for _ in range(program.buffers)]
