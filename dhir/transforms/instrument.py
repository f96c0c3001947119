"""`dhir-instrument`: time every task on the rank that runs it.

Each task body is wrapped in `func.call @dhir_rt_task_begin(%id)` and
`func.call @dhir_rt_task_end(%id)`, where `%id` (i64) is the task's position in
`task_ids` order (program order over the whole module). The calls take no memref, so
they change no task's effects. dhir's runtime sums the time (CLOCK_MONOTONIC) and the
runs per id on each rank; when the environment variable `DHIR_PROFILE` names a file,
every rank sends its sums to rank 0 at finalize, which writes them there as
{"ranks": N, "tasks": {"<id>": {"seconds": total, "calls": runs, "rank": R}},
"schedules": {"<id>": {"seconds": total, "calls": runs}}}.

Each schedule is wrapped too, outside it (every rank runs that host code), in
`dhir_rt_schedule_begin(%id)` and `dhir_rt_schedule_end(%id)`, `%id` its position in
`schedule_ids` order. Begin is a barrier, so the ranks start the schedule together; a
schedule's time is the slowest rank's, from that barrier to the rank's end of the
schedule (for rank 0, once the results have reached it): the makespan a placement
predicts. `profile_report` turns the sums into the profile `dhir run --profile` writes.
"""

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import UNKNOWN_LOC, IntegerAttr, ModuleOp, SymbolRefAttr, UnitAttr, i64
from xdsl.passes import ModulePass

from dhir.analysis.profile import FORMAT as PROFILE_FORMAT
from dhir.dialects import arith, func
from dhir.dialects.dhir import HOOK_ATTR, ScheduleOp, TaskOp
from dhir.ir.build import insert_new, integer_attr, new_op
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.ir.tasks import schedule_ids, task_ids
from dhir.machine.description import Device
from dhir.placement.from_ir import machine_for
from dhir.targets import host_arch

BEGIN = "dhir_rt_task_begin"
END = "dhir_rt_task_end"
SCHEDULE_BEGIN = "dhir_rt_schedule_begin"
SCHEDULE_END = "dhir_rt_schedule_end"
PROFILE_ENV = "DHIR_PROFILE"


@dataclass(frozen=True)
class InstrumentPass(ModulePass):
    """Time every task and schedule with dhir_rt_*_begin/end calls, for --profile.

    dhir_rt_task_begin/end go around each task's body, dhir_rt_schedule_begin/end around
    each schedule."""

    name = "dhir-instrument"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        tasks = list(task_ids(op))
        for number, task in enumerate(tasks):
            if not _instrumented(task):
                wrap_task(task, number, BEGIN, END)
        schedules = list(schedule_ids(op))
        for number, schedule in enumerate(schedules):
            if not _schedule_instrumented(schedule):
                _wrap_schedule(schedule, number)
        if tasks or schedules:
            _declare(op)


def _instrumented(task: TaskOp) -> bool:
    calls = [o for o in task.body.block.ops if isinstance(o, func.CallOp)]
    return any(call.callee.string_value() == BEGIN for call in calls[:1])


def wrap_task(task: TaskOp, number: int, before: str, after: str) -> None:
    """Call `before(number)` first in the task's body and `after(number)` last."""
    block = task.body.block
    # `new_op` skips the constructors' checks of their arguments and `create`'s generic
    # steps, which cost more than the rest of this, run for every task of every build
    # (docs/performance.md).
    ident = new_op(
        arith.ConstantOp, (), [i64], {"value": integer_attr(number, i64)}, {}, UNKNOWN_LOC
    )
    ident.result.name_hint = f"task{number}"
    begin, end = (
        new_op(func.CallOp, [ident.result], (), {"callee": _symbol(name)}, {}, UNKNOWN_LOC)
        for name in (before, after)
    )
    # Linked in without xDSL's walk up to the module for each op (`insert_new`).
    insert_new([ident, begin], block, block.first_op)
    terminator = block.last_op
    assert terminator is not None  # at least the dhir.yield, or the ops just added
    insert_new([end], block, terminator if terminator.name == "dhir.yield" else None)


@cache
def _symbol(name: str) -> SymbolRefAttr:
    # Attributes are immutable: the calls of all tasks share one (its checks cost 20 us).
    return SymbolRefAttr(name)


def _schedule_instrumented(schedule: ScheduleOp) -> bool:
    before = schedule.prev_op
    return isinstance(before, func.CallOp) and before.callee.string_value() == SCHEDULE_BEGIN


def _wrap_schedule(schedule: ScheduleOp, number: int) -> None:
    block = schedule.parent
    assert block is not None  # the verifier keeps schedules inside functions
    ident = arith.ConstantOp(IntegerAttr(number, i64))
    ident.result.name_hint = f"schedule{number}"
    begin = func.CallOp(SCHEDULE_BEGIN, [ident.result], [])
    end = func.CallOp(SCHEDULE_END, [ident.result], [])
    for call in (begin, end):
        # So that a time loop around the schedule still keeps its data distributed.
        call.attributes[HOOK_ATTR] = UnitAttr()
    block.insert_ops_before([ident, begin], schedule)
    block.insert_op_after(end, schedule)


def _declare(module: ModuleOp) -> None:
    present = {f.sym_name.data for f in module.body.block.ops if isinstance(f, func.FuncOp)}
    for name in (BEGIN, END, SCHEDULE_BEGIN, SCHEDULE_END):
        if name not in present:
            module.body.block.add_op(func.FuncOp.external(name, [i64], []))


def profile_report(
    raw: dict[str, object],
    names: Sequence[str],
    devices: Sequence[Device],
    cpu_arch: str | None = None,
    schedules: Sequence[str] = (),
    on_gpu: Sequence[bool] = (),
) -> dict[str, object]:
    """The profile (see dhir.analysis.profile.Profile) from the runtime's sums: seconds
    per run of each task that ran, with the rank and the device it ran on (`cpu_arch`
    for a CPU whose arch the devices do not say; for a GPU task, by number in `on_gpu`,
    the GPU its rank drives), and the wall time per run of each schedule (named by
    `schedules`) that ran."""
    tasks: dict[str, float] = {}
    calls: dict[str, int] = {}
    where: dict[str, dict[str, object]] = {}
    entries = raw.get("tasks", {})
    assert isinstance(entries, dict)
    for key, entry in entries.items():
        number = int(key)
        if not 0 <= number < len(names) or not entry.get("calls"):
            continue
        name = names[number]
        calls[name] = int(entry["calls"])
        tasks[name] = float(entry["seconds"]) / calls[name]
        rank = int(entry["rank"])
        device = devices[rank] if 0 <= rank < len(devices) else None
        if device is not None and number < len(on_gpu) and on_gpu[number]:
            device = device.gpu or device  # a rank of the CPU runs its GPU tasks there
        kind = str(device.kind) if device is not None else "cpu"
        arch = device.arch if device is not None else None
        arch = arch or (cpu_arch if kind == "cpu" else None)
        where[name] = {"rank": rank, "kind": kind, "arch": arch}
        if device is not None and device.name:
            where[name]["device"] = device.name
    return {
        "format": PROFILE_FORMAT,
        "ranks": raw.get("ranks"),
        "tasks": tasks,
        "calls": calls,
        "devices": where,
        "schedules": _per_run(raw.get("schedules", {}), schedules),
    }


def _per_run(entries: object, names: Sequence[str]) -> dict[str, float]:
    """Seconds per run of each named entry that ran."""
    assert isinstance(entries, dict)
    times: dict[str, float] = {}
    for key, entry in entries.items():
        number = int(key)
        if 0 <= number < len(names) and entry.get("calls"):
            times[names[number]] = float(entry["seconds"]) / int(entry["calls"])
    return times


def write_profile(
    raw_path: Path,
    names: Sequence[str],
    devices: Sequence[Device],
    destination: Path,
    schedules: Sequence[str] = (),
    on_gpu: Sequence[bool] = (),
) -> None:
    """Turn the runtime's file into the profile at `destination`."""
    try:
        raw = json.loads(raw_path.read_text())
    except (OSError, ValueError) as error:
        raise DhirError(
            [Diagnostic(f"the run wrote no readable task profile ({raw_path}): {error}")]
        ) from None
    report = profile_report(raw, names, devices, host_arch(), schedules, on_gpu)
    try:
        destination.write_text(json.dumps(report, indent=1) + "\n")
    except OSError as error:
        raise DhirError(
            [Diagnostic(f"cannot write the profile {destination}: {error.strerror}")]
        ) from None


class ProfileRecorder:
    """What turning a run's sums into a profile needs: each rank's device and the
    schedule names, taken before the module is lowered, and the task names, which
    the build gives (`name_tasks`) once dhir-split has cut tasks into pieces and
    dhir-instrument has numbered them."""

    def __init__(self, module: ModuleOp, ranks: int, destination: Path) -> None:
        self.names: list[str] = []
        self.on_gpu: list[bool] = []
        self.schedules = list(schedule_ids(module).values())
        self.devices, _ = machine_for(module, ranks)
        self.destination = Path(destination)

    def name_tasks(self, table: Sequence[str]) -> None:
        """Take the task names and whether each runs on a GPU from dhir-track-tasks'
        table (`name<TAB>location<TAB>schedule<TAB>kind` per id), whose ids are
        dhir-instrument's: both number `task_ids` of one module."""
        rows = [line.split("\t") for line in table]
        self.names = [row[0] for row in rows]
        self.on_gpu = [row[-1] == "gpu" for row in rows]


@contextmanager
def recording(recorder: ProfileRecorder | None) -> Iterator[None]:
    """Around a run of an instrumented executable: point DHIR_PROFILE at a scratch
    file (the ranks inherit it), and write the profile once the run has succeeded."""
    if recorder is None:
        yield
        return
    destination = Path(recorder.destination)
    if destination.is_file():  # an earlier run's: a failed run must not leave it
        destination.unlink()
    with tempfile.TemporaryDirectory(prefix="dhir-profile-") as scratch:
        raw = Path(scratch) / "tasks.json"
        previous = os.environ.get(PROFILE_ENV)
        os.environ[PROFILE_ENV] = str(raw)
        try:
            yield
        finally:
            if previous is None:
                del os.environ[PROFILE_ENV]
            else:
                os.environ[PROFILE_ENV] = previous
        write_profile(
            raw,
            recorder.names,
            recorder.devices,
            recorder.destination,
            recorder.schedules,
            recorder.on_gpu,
        )
