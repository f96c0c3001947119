"""Effects and dependences against the reads and writes the random programs were
written with: every conflicting pair of tasks is ordered, and nothing else is."""

from hypothesis import given, settings
from strategies import RandomSchedule, schedules

from dhir import parse_string
from dhir.analysis.dependences import task_graph
from dhir.dialects.dhir import ScheduleOp


def _schedule(text: str) -> ScheduleOp:
    module = parse_string(text)
    return next(op for op in module.walk() if isinstance(op, ScheduleOp))


def _reachable(edges: set[tuple[int, int]], start: int, goal: int) -> bool:
    stack, seen = [start], {start}
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        for a, b in edges:
            if a == node and b not in seen:
                seen.add(b)
                stack.append(b)
    return False


@settings(max_examples=80, deadline=None)
@given(schedules(max_tasks=10))
def test_graph_orders_exactly_the_conflicting_pairs(program: RandomSchedule) -> None:
    schedule = _schedule(program.text())
    graph = task_graph(schedule)
    names = {value: int(value.name_hint[1:]) for value in schedule.args}  # %m3 -> 3
    for task, effects in zip(program.tasks, graph.effects, strict=True):
        assert {names[v] for v in effects.reads} == set(task.reads)
        assert {names[v] for v in effects.writes} == set(task.writes)

    edges = {(d.before, d.after) for d in graph.dependences}
    tasks = program.tasks
    for i in range(len(tasks)):
        for j in range(i + 1, len(tasks)):
            conflict = (set(tasks[i].writes) & (set(tasks[j].reads) | set(tasks[j].writes))) or (
                set(tasks[i].reads) & set(tasks[j].writes)
            )
            if conflict:
                assert _reachable(edges, i, j), (i, j)
            if (i, j) in edges:
                assert conflict, (i, j)
    assert all(a < b for a, b in edges)
