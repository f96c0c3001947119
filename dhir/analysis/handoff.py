"""Task facts (effects and access regions) that dhir-place found, handed on to
dhir-lower-to-mpi when one driver runs the two passes back to back.

Both passes need every task's effects and regions, and finding them twice is a large
share of their time on big schedules. A fact is only right for the IR it was found on,
so the hand-off is opened explicitly (`handing_over`) by a driver that runs nothing
between the two passes (the native backend); dhir-place records what it found there,
and dhir-lower-to-mpi takes each task's facts once. A pass in between that keeps the
elements each task touches may record the facts of the tasks it rewrites before it does
(`keep_facts`); one that changes what a task touches forgets its facts (`drop_facts`),
so that dhir-lower-to-mpi finds them again. Outside such a scope (dhir-opt, any other
pipeline) nothing is recorded and each pass finds its own.
"""

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from dhir.analysis.effects import Effects, shared_effects, task_effects
from dhir.analysis.regions import Regions, shared_regions, task_regions
from dhir.analysis.shapes import Shapes, shapes_of
from dhir.dialects.dhir import TaskOp

Facts = tuple[Effects, Regions]

_open: ContextVar[dict[TaskOp, Facts] | None] = ContextVar("task_facts", default=None)


@contextmanager
def handing_over() -> Iterator[None]:
    """Let dhir-place hand its task facts to dhir-lower-to-mpi while this lasts. Only
    around passes that leave the tasks' bodies as dhir-place found them in between."""
    token = _open.set({})
    try:
        yield
    finally:
        _open.reset(token)


@contextmanager
def not_handing_over() -> Iterator[None]:
    """Record nothing while this lasts: for a dry run on a copy of the module, whose
    tasks' facts no pass will take."""
    token = _open.set(None)
    try:
        yield
    finally:
        _open.reset(token)


def hand_over(
    tasks: Sequence[TaskOp], effects: Sequence[Effects], regions: Sequence[Regions]
) -> None:
    """Record each task's facts, if a hand-off is open."""
    facts = _open.get()
    if facts is not None:
        facts.update(zip(tasks, zip(effects, regions, strict=True), strict=True))


def keep_facts(tasks: Sequence[TaskOp]) -> None:
    """Record the facts of `tasks` as their bodies have them now, if a hand-off is open,
    for those with none recorded: for a pass that rewrites bodies so that they touch the
    same elements, but in a form the region analysis bounds less tightly
    (dhir-optimize-bodies), and for dhir-place's round-robin, which finds none itself."""
    facts = _open.get()
    if facts is not None:
        missing = [task for task in dict.fromkeys(tasks) if task not in facts]
        facts.update(zip(missing, found_facts(missing), strict=True))


def found_facts(tasks: Sequence[TaskOp]) -> list[Facts]:
    """Each task's facts: once per body shape (dhir.analysis.shapes) for a shape of
    several tasks, as dhir-place finds them, so that a thousand tasks alike cost one
    walk, not a thousand; a task of a shape of its own on its own (its constants as
    parameters would only cost more)."""
    shapes = shapes_of(tasks)
    counts = Counter(shapes.ids)
    alike = [k for k, shape in enumerate(shapes.ids) if counts[shape] > 1]
    out: list[Facts | None] = [None] * len(tasks)
    if alike:
        some = [tasks[k] for k in alike]
        ids = [shapes.ids[k] for k in alike]
        effects = shared_effects(some, ids)
        regions = shared_regions(some, Shapes(ids, [shapes.constants[k] for k in alike]))
        for k, facts in zip(alike, zip(effects, regions, strict=True), strict=True):
            out[k] = facts
    return [
        facts if facts is not None else (task_effects(task), task_regions(task))
        for task, facts in zip(tasks, out, strict=True)
    ]


def drop_facts(task: TaskOp) -> None:
    """Forget `task`'s facts, if a hand-off is open: for a pass that changes the elements
    its body touches (dhir-gpu-data's copies between host and device)."""
    facts = _open.get()
    if facts is not None:
        facts.pop(task, None)


def take(task: TaskOp) -> Facts | None:
    """The facts recorded for `task` (then forgotten), or None."""
    facts = _open.get()
    return facts.pop(task, None) if facts is not None else None


def take_all(tasks: Sequence[TaskOp]) -> list[Facts]:
    """Each task's facts: those recorded (then forgotten), the others found
    (`found_facts`, together)."""
    taken = [take(task) for task in tasks]
    missing = [task for task, facts in zip(tasks, taken, strict=True) if facts is None]
    found = iter(found_facts(missing))
    return [facts if facts is not None else next(found) for facts in taken]
