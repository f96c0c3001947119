"""Plain questions about a task or schedule, asked by every stage after parsing: its
stable name, the rank it was placed on, whether it runs on a GPU, how messages name it,
which functions reach a schedule."""

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation, SSAValue

from dhir.dialects import affine, func, scf
from dhir.dialects.dhir import RANK_ATTR, ScheduleOp, TaskOp, walk_outside_tasks
from dhir.dialects.linalg import LinalgStructuredOperation
from dhir.ir.calls import callers_of, through_callers
from dhir.ir.diagnostics import loc_of
from dhir.ir.walk import holds_op
from dhir.targets import DeviceKind

# The ops whose iterations a device spreads over its threads: a CPU rank runs them on its
# OpenMP threads when the native backend builds with OpenMP (the rest of a task runs on one
# core), and dhir-gpu-kernels makes GPU kernels of them, so dhir-split-devices cuts only
# these for a GPU. One set: the cost model's rates (dhir-split and dhir-split-devices size
# pieces by them) assume the threads a kernel or OpenMP gives exactly these ops.
PARALLEL_LOOPS = (scf.ParallelOp, affine.ParallelOp)
THREADED_KINDS = (*PARALLEL_LOOPS, LinalgStructuredOperation)

# dhir-split marks each piece of a task it cut as `dhir.piece = [T, k]`: piece k of the
# schedule's task number T (counted before the cut), so that later tasks keep their names.
PIECE_ATTR = "dhir.piece"
# dhir-split-devices marks each GPU piece with the rows of each memref it must copy in
# and out, found while its body is still a loop (a kernel's accesses are not analysed):
# `dhir.rows`, one entry per listed memref, `[]` untouched, else `[in0, in1, out0, out1]`:
# rows [in0, in1) copied in, [out0, out1) out; an empty range copies nothing, -1 all rows.
ROWS_ATTR = "dhir.rows"
# dhir-gpu-kernels marks each GPU task whose loops it makes kernels with the rows of each
# memref whose current values it needs (reads, or may write without surely writing) and
# the rows it may write, found while its body is still loops: `dhir.gpu_rows`, entries as
# `dhir.rows`'s, `[need0, need1, write0, write1]` (dhir.transforms.gpu_rows).
GPU_ROWS_ATTR = "dhir.gpu_rows"
Span = tuple[int, int] | None  # rows [first, end) along the first dimension; None: all


@dataclass(frozen=True)
class PieceRows:
    copy_in: Span
    copy_out: Span


def set_rows(task: TaskOp, rows: dict[SSAValue, PieceRows], attr: str = ROWS_ATTR) -> None:
    """Record `rows` on `task` as `attr` (`ROWS_ATTR`, `GPU_ROWS_ATTR`)."""
    entries: list[ArrayAttr[IntegerAttr]] = []
    for m in task.memrefs:
        found = rows.get(m)
        spans = () if found is None else (found.copy_in, found.copy_out)
        values = [v for span in spans for v in (span if span is not None else (-1, -1))]
        entries.append(ArrayAttr([IntegerAttr(v, i64) for v in values]))
    task.attributes[attr] = ArrayAttr(entries)


def rows_of(task: TaskOp, name: str = ROWS_ATTR) -> dict[SSAValue, PieceRows] | None:
    """The rows `set_rows` recorded on `task` as `name`, if it did."""
    attr = task.attributes.get(name)
    if not isinstance(attr, ArrayAttr):
        return None
    found: dict[SSAValue, PieceRows] = {}
    for m, entry in zip(task.memrefs, attr.data, strict=True):
        assert isinstance(entry, ArrayAttr)
        v = [x.value.data for x in entry.data if isinstance(x, IntegerAttr)]
        if len(v) == 4:
            spans = [None if v[k] < 0 else (v[k], v[k + 1]) for k in (0, 2)]
            found[m] = PieceRows(spans[0], spans[1])
    return found


def rank_of(task: TaskOp) -> int | None:
    """The rank `task` is placed on (`RANK_ATTR`, an integer: the verifier refuses
    anything else), if placement (or the user) has said."""
    attr = task.attributes.get(RANK_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def is_gpu_task(task: TaskOp) -> bool:
    """Bound to a GPU, or to any device with GPU code in its body."""
    kind = task.target_info().kind
    if kind == DeviceKind.GPU:
        return True
    return kind == DeviceKind.ANY and any(op.dialect_name() == "gpu" for op in task.body.walk())


def task_label(task: TaskOp, number: str | None = None) -> str:
    """How messages name a GPU task: its name (`name` attribute or SSA name), else its number in its
    schedule (`number`, as `task_numbers` gives it; found when not given), and where it is."""
    if number is None:
        parent = task.parent_op()
        if isinstance(parent, ScheduleOp):
            number = task_numbers(parent)[list(parent.tasks()).index(task)]
        else:
            number = "0"
    given = user_name(task)
    what = f'"{given}"' if given is not None else f"#{number}"
    loc = loc_of(task)
    return f"GPU task {what}" + (f" at {loc}" if loc is not None else "")


def task_numbers(schedule: ScheduleOp) -> list[str]:
    """Each task's number in its schedule, as its name ends (`3`, `3.piece1`): positions
    counted as they were before dhir-split cut any task."""
    return [suffix.removeprefix("task") for suffix in _task_suffixes(schedule)]


def task_ids(module: ModuleOp) -> dict[TaskOp, str]:
    """Every task's name, in program order: its `name` attribute, else its SSA name
    (`%smooth`), else its path `<function>.schedule<S>.task<T>`; a piece of a task that
    dhir-split cut adds `.piece<k>`. A name that more than one schedule uses is prefixed
    by its schedule's path (`main.schedule1.smooth`), so every name is the module's own.
    Within `names_kept`, found once per module."""
    kept = _KEPT.get()
    if kept is None:
        return _found_ids(module)
    found = kept.get(id(module))
    if found is None or found[0] is not module:
        found = kept[id(module)] = (module, _found_ids(module))
    return dict(found[1])  # the caller's own, as outside


@contextmanager
def names_kept() -> Iterator[None]:
    """Within it, `task_ids` reads each module once and answers again from what it found:
    for callers whose passes meanwhile add, remove, reorder or rename no task or schedule
    and change no task's `name`, `dhir.piece` or SSA name (the native backend, around
    dhir-place, dhir-instrument and dhir-track-tasks, which change attributes and task
    bodies only). Within another, a new one: what that one found is not trusted here."""
    token = _KEPT.set({})
    try:
        yield
    finally:
        _KEPT.reset(token)


# Per module (by identity, with the module kept to tell a reused id apart): its names.
_KEPT: ContextVar[dict[int, tuple[ModuleOp, dict[TaskOp, str]]] | None] = ContextVar(
    "dhir_task_ids", default=None
)


def _found_ids(module: ModuleOp) -> dict[TaskOp, str]:
    named: list[tuple[TaskOp, str, str | None, str]] = []
    for op in module.body.block.ops:
        owner = _owner(op)
        # Outside task bodies, which hold no schedule (the verifier refuses one there)
        # and most of a large schedule's ops.
        for s, schedule in enumerate(_schedules(op)):
            where = f"{owner}.schedule{s}"
            for task, suffix in zip(schedule.tasks(), _task_suffixes(schedule), strict=True):
                named.append((task, where, user_name(task), suffix))
    schedules_of: dict[str, set[str]] = {}
    for _, where, given, _ in named:
        if given is not None:
            schedules_of.setdefault(given, set()).add(where)
    names = {
        task: _name(where, given, suffix, len(schedules_of.get(given or "", ())) > 1)
        for task, where, given, suffix in named
    }
    # A `name` attribute equal to another task's SSA name: those keep their paths.
    counts = Counter(names.values())
    for task, where, _, suffix in named:
        if counts[names[task]] > 1:
            names[task] = f"{where}.{suffix}"
    return names


def user_name(task: TaskOp) -> str | None:
    """The name the user gave `task`: its `name` attribute, else its SSA name."""
    attr = task.attributes.get("name")
    if isinstance(attr, StringAttr) and attr.data:
        return attr.data
    return task.token.name_hint


def _name(where: str, given: str | None, suffix: str, shared: bool) -> str:
    if given is None:
        return f"{where}.{suffix}"
    piece = suffix.partition(".")[2]
    name = f"{given}.{piece}" if piece else given
    return f"{where}.{name}" if shared else name


def duplicate_names(schedule: ScheduleOp) -> list[tuple[TaskOp, str]]:
    """Tasks of `schedule` (not pieces) whose `name` another task of it has already."""
    seen: set[str] = set()
    out: list[tuple[TaskOp, str]] = []
    for task in schedule.tasks():
        given = user_name(task)
        if given is None or _piece(task) not in (None, 0):
            continue
        if given in seen:
            out.append((task, given))
        seen.add(given)
    return out


def schedule_ids(module: ModuleOp) -> dict[ScheduleOp, str]:
    """Every schedule's stable name, `<function>.schedule<S>`, in program order (the
    prefix of its tasks' names)."""
    names: dict[ScheduleOp, str] = {}
    for op in module.body.block.ops:
        for s, schedule in enumerate(_schedules(op)):
            names[schedule] = f"{_owner(op)}.schedule{s}"
    return names


def schedule_task_ids(schedule: ScheduleOp) -> list[str]:
    """The names `task_ids` gives the tasks of `schedule`."""
    top: Operation = schedule
    while (parent := top.parent_op()) is not None:
        top = parent
    if isinstance(top, ModuleOp):
        names = task_ids(top)
        return [names[task] for task in schedule.tasks()]
    number = next(s for s, op in enumerate(_schedules(top)) if op is schedule)
    where = f"{_owner(top)}.schedule{number}"
    return [
        _name(where, user_name(task), suffix, False)
        for task, suffix in zip(schedule.tasks(), _task_suffixes(schedule), strict=True)
    ]


def _task_suffixes(schedule: ScheduleOp) -> list[str]:
    """`task<T>` for each task, `task<T>.piece<k>` for the pieces dhir-split made: a
    task's number counts the tasks before it as they were before any was cut."""
    out: list[str] = []
    number = 0
    for task in schedule.tasks():
        piece = _piece(task)
        if piece is not None and piece > 0 and out:
            out.append(f"task{number - 1}.piece{piece}")
            continue
        out.append(f"task{number}" + (f".piece{piece}" if piece is not None else ""))
        number += 1
    return out


def _piece(task: TaskOp) -> int | None:
    attr = task.attributes.get(PIECE_ATTR)
    if isinstance(attr, ArrayAttr) and len(attr.data) == 2:
        k = attr.data[1]
        if isinstance(k, IntegerAttr):
            return k.value.data
    return None


def _owner(top: Operation) -> str:
    return top.sym_name.data if isinstance(top, func.FuncOp) else "module"


def _schedules(top: Operation) -> list[ScheduleOp]:
    return [s for s in walk_outside_tasks(top) if isinstance(s, ScheduleOp)]


def reaching_schedules(module: ModuleOp) -> set[str]:
    """The names of the functions that hold a schedule or task, or call one that does,
    directly or through other calls."""
    return functions_reaching(module, lambda f: holds_op(f, (ScheduleOp, TaskOp)))


def functions_reaching(module: ModuleOp, holds: Callable[[func.FuncOp], bool]) -> set[str]:
    """The names of the functions for which `holds` is true, or that call one of them,
    directly or through other calls."""
    functions = [f for f in module.body.block.ops if isinstance(f, func.FuncOp)]
    found = dict.fromkeys(f.sym_name.data for f in functions if holds(f))
    return set(through_callers(found, callers_of(module)))
