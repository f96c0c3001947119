"""Hypothesis strategies that write random, valid dhir programs as text."""

from dataclasses import dataclass

from hypothesis import strategies as st

TARGETS = ('{arch = "x86_64"}', '{arch = "aarch64"}', '{arch = "sm_90"}', '{kind = "cpu"}',
           '{kind = "gpu"}', '{kind = "any"}')  # fmt: skip


@dataclass(frozen=True)
class RandomTask:
    target: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]


@dataclass(frozen=True)
class RandomSchedule:
    buffers: int
    size: int
    targets: tuple[str, ...]
    tasks: tuple[RandomTask, ...]

    def text(self) -> str:
        args = ", ".join(f"%m{i}: memref<{self.size}xf32>" for i in range(self.buffers))
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
        lines = [f"    %t{k} = dhir.task {header} {{", "      %c0 = arith.constant 0 : index"]
        lines.append("      %acc0 = arith.constant 1.0 : f32")
        for j, b in enumerate(task.reads):
            lines.append(f"      %r{j} = memref.load %m{b}[%c0] : memref<{self.size}xf32>")
            lines.append(f"      %acc{j + 1} = arith.addf %acc{j}, %r{j} : f32")
        for b in task.writes:
            lines.append(
                f"      memref.store %acc{len(task.reads)}, %m{b}[%c0] : memref<{self.size}xf32>"
            )
        lines.append("    }")
        return lines


@st.composite
def schedules(draw: st.DrawFn, max_tasks: int = 12, max_buffers: int = 5) -> RandomSchedule:
    buffers = draw(st.integers(1, max_buffers))
    targets = tuple(draw(st.lists(st.sampled_from(TARGETS), min_size=1, max_size=3)))
    buffer_ids = st.integers(0, buffers - 1)
    task = st.builds(
        RandomTask,
        st.integers(0, len(targets) - 1),
        st.lists(buffer_ids, max_size=3).map(tuple),
        st.lists(buffer_ids, max_size=2).map(tuple),
    )
    tasks = tuple(draw(st.lists(task, min_size=0, max_size=max_tasks)))
    return RandomSchedule(buffers, draw(st.integers(1, 64)), targets, tasks)
