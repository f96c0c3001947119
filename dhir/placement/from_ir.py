"""A schedule as a `TaskGraph` for the list schedulers.

One graph device per MPI rank (`rank0`, `rank1`, ...), each rank running on one
`Device`. A task gets a cost on every device that can run its target (kind, and arch
when both name one) and, when it carries `dhir.rank = R`, on rank R's device only; a
device left out of a task's costs cannot run it. Tasks are named as `task_ids` names
them (`main.schedule0.task1`). Edges come from the dependences: a read-after-write or
write-after-write hazard carries the memref (a writer needs an up-to-date copy too,
as the lowering gives it one), a write-after-read hazard only orders.

A last node, `END_TASK`, pinned to rank 0, stands for the end of the schedule, as
dhir-lower-to-mpi lowers it: every memref the schedule writes is broadcast from its last
writer to every rank, except the entry function's outputs that nothing reads afterwards,
which are only sent to rank 0. Each last writer has an edge to `END_TASK`; the edge
carries the memrefs sent to rank 0 only (paid when the writer is another rank), and
`END_TASK`'s time is that of the broadcasts, which every rank waits for whoever wrote
the data (a binomial tree: ceil(log2(ranks)) transfers one after the other).

Task times depend on how many ranks run at once (`concurrency`): a chain of dependent
tasks keeps one rank busy at a time, which then has its device's whole memory bandwidth.
"""

import dataclasses
import math
import os
from collections.abc import Sequence, Set
from dataclasses import dataclass
from functools import lru_cache

import islpy as isl
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from dhir.analysis.counts import memref_bytes
from dhir.analysis.dependences import Hazard
from dhir.analysis.dependences import TaskGraph as DependenceGraph
from dhir.analysis.dependences import carried as carried_needs
from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.outputs import dead_after, loaded_regions, root_only, step_loop
from dhir.analysis.profile import Profile
from dhir.analysis.regions import count_elements
from dhir.analysis.threads import runs_on_threads, task_runs_on_threads
from dhir.analysis.validity import divisible
from dhir.analysis.work import (
    Work,
    body_work,
    region_bytes,
    unknown_allocated_bytes,
    unknown_touched_bytes,
)
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp, walk_outside_tasks
from dhir.ir.diagnostics import DhirError, Diagnostic, error_at
from dhir.ir.tasks import RANK_ATTR, is_gpu_task, rank_of, schedule_task_ids
from dhir.machine.description import REFERENCE_GPU, Device, Link, System, with_core_guesses
from dhir.machine.detect import load_local_system
from dhir.machine.dlti import at_description, described_at, system_of
from dhir.machine.files import SYSTEM_ENV, default_system_path
from dhir.placement.cost_model import CostModel, PairLinks
from dhir.placement.graph import Edge, Links, Placement, TaskGraph
from dhir.targets import DeviceKind, TargetInfo
from dhir.units import bytes_words

END_TASK = "(end)"
MACHINE_ATTR = "dhir.machine"  # as dhir.machine.dlti writes it


def local_devices(ranks: int, with_gpus: bool = False) -> list[Device]:
    """Without a machine description: `ranks` alike CPU ranks of this machine (its
    description, `local_system()`), sharing the node's CPU: its rates, cores and caches
    (the roofline shares the rates among those that run at once). `with_gpus`: each rank
    also drives one of the node's GPUs, rank r GPU r mod count, as the GPU runtime picks
    them (one assumed where none is found, so that the program places and its run says
    there is no GPU); ranks sharing a GPU are not modelled as slowing each other. No arch
    or name is stated, so that a program for another chip can still be placed (the native
    backend and the CUDA driver check it)."""
    if ranks < 1:
        raise DhirError([Diagnostic(f"the rank count must be at least 1, got {ranks}")])
    system = local_system()
    shared = dataclasses.replace(_anonymous(with_core_guesses(_local_cpu(system))), ranks=ranks)
    if not with_gpus:
        return [shared] * ranks
    overhead = REFERENCE_GPU.launch_overhead_s
    gpus = [
        dataclasses.replace(_anonymous(d), launch_overhead_s=overhead)
        for d in system.nodes[0].devices
        if d.kind == DeviceKind.GPU
    ]
    gpus = gpus or [REFERENCE_GPU]
    return [dataclasses.replace(shared, gpu=gpus[rank % len(gpus)]) for rank in range(ranks)]


def _anonymous(device: Device) -> Device:
    """`device` with no name or arch (any of its kind), and nothing guessed or linked."""
    return dataclasses.replace(device, name="", arch=None, guessed=(), host_link=None)


def has_gpu_tasks(module: ModuleOp) -> bool:
    return any(
        isinstance(op, TaskOp) and op.target_info().kind == DeviceKind.GPU
        for op in walk_outside_tasks(module)
    )


def local_link() -> Link:
    """How two ranks of this machine talk: its description's intra-node link."""
    return local_system().intra_node


def local_system() -> System:
    """This machine's description (`dhir.machine.load_local_system`: $DHIR_SYSTEM, else
    the calibrated file, else detection), loaded once per process and description:
    detection runs nvidia-smi."""
    calibrated = default_system_path()
    stamp = calibrated.stat().st_mtime_ns if calibrated.is_file() else None
    return _load_local_system(os.environ.get(SYSTEM_ENV) or None, str(calibrated), stamp)


@lru_cache(maxsize=4)
def _load_local_system(named: str | None, calibrated: str, stamp: int | None) -> System:
    # The arguments only key the cache: load_local_system reads the same places.
    return load_local_system()


def _local_cpu(system: System) -> Device:
    """The CPU of the description's first node (this machine's, for a one-node one)."""
    cpu = next((d for d in system.nodes[0].devices if d.kind == DeviceKind.CPU), None)
    assert cpu is not None  # every node has a CPU (the description checks it)
    return cpu


def has_machine(module: ModuleOp) -> bool:
    """Whether `module` carries a whole machine description (`dhir run --system`); a
    `dlti.target_system_spec` alone only names devices for `dhir.target {device = ...}`."""
    return MACHINE_ATTR in module.attributes


def machine_for(
    module: ModuleOp, ranks: int, profile: Profile | None = None
) -> tuple[list[Device], CostModel]:
    """Rank R's device (`devices[R]`) and the cost model: from the module's machine
    description when it has one, else alike CPU ranks of this machine joined by its
    intra-node link (`local_devices`)."""
    if not has_machine(module):
        devices = local_devices(ranks, with_gpus=has_gpu_tasks(module))
        return devices, CostModel(profile, link=local_link())
    system = system_of(module)
    # Per-core rates a description leaves out are guessed, once per device (ranks of one
    # device share it).
    filled = {d.name: with_core_guesses(d) for d in system.devices}
    devices = [filled[d.name] for d in system.rank_devices()]
    if len(devices) != ranks:
        with at_description(module):  # at the description's line, or naming its file
            count = len(devices)
            # Said for `dhir run` and the Python API alike: this layer knows neither.
            raise DhirError(
                [
                    Diagnostic(
                        f"the machine description runs {_ranks(count)}, but the program is "
                        f"placed on {ranks}; run it on {count}: -n {count} (ranks={count} in "
                        f"the API), or describe {_ranks(ranks)}"
                    )
                ]
            )
    # Ranks sharing a device still talk through MPI: over shared memory.
    model = CostModel(
        profile,
        link=system.intra_node,
        transfer=system.transfer_time,
        node_of=lambda device: system.node_of(device).name,
    )
    return devices, model


def _ranks(count: int) -> str:
    return f"{count} rank{'s' if count != 1 else ''}"


def device_name(rank: int) -> str:
    return f"rank{rank}"


@lru_cache(maxsize=4)
def device_names(count: int) -> tuple[str, ...]:
    """The graph devices of `count` ranks, named once (every task's costs name them)."""
    return tuple(device_name(rank) for rank in range(count))


def rank_of_device(name: str) -> int:
    return int(name.removeprefix("rank"))


def can_run(target: TargetInfo, device: Device) -> bool:
    """Whether `device` (arch None: any of its kind) can run a task bound to `target`."""
    if target.kind == DeviceKind.ANY:
        return True
    if device.kind != target.kind:
        return False
    return target.arch is None or device.arch is None or device.arch == target.arch


def task_graph(
    schedule: ScheduleOp,
    devices: Sequence[Device],
    costs: CostModel | None = None,
    entry: str = "main",
    deps: DependenceGraph | None = None,
    called: bool | None = None,
    names: Sequence[str] | None = None,
) -> TaskGraph:
    """`schedule` on one device per rank (`devices[R]` for rank R); `entry`: the program's
    entry function, whose outputs go to rank 0 only (as dhir-lower-to-mpi's); `deps`: its
    dependence graph, when known already; `called`: whether a function calls the entry
    (`dhir.analysis.outputs.entry_called`), when known already; `names`: the names
    `dhir.ir.tasks.task_ids` gives its tasks, when known already (finding them reads the
    whole module)."""
    costs = costs if costs is not None else CostModel()
    tasks = list(schedule.tasks())
    names = list(names) if names is not None else schedule_task_ids(schedule)
    deps = deps if deps is not None else dependence_graph(schedule)
    touched = set().union(*(effects.touches() for effects in deps.effects))
    working_set = sum(memref_bytes(value.type) for value in touched)
    shapes = deps.shapes or list(range(-len(tasks), 0))  # unknown: a shape each
    bodies: dict[int, Work] = {}  # the counted body of each shape, found once
    module = schedule.get_toplevel_object()
    # On threads as the native backend builds it (the answer dhir-split sized pieces by).
    threads = isinstance(module, ModuleOp) and runs_on_threads(module)
    for task, effects, regions, shape in zip(
        tasks, deps.effects, deps.regions, shapes, strict=True
    ):
        if shape not in bodies:
            bodies[shape] = _threaded(body_work(task), task, threads)
        costs.work(task, effects, working_set, regions, bodies[shape])  # reuses what was found
    graph_devices = tuple(device_name(rank) for rank in range(len(devices)))
    busy = concurrency(deps)
    cost = task_costs(tasks, names, devices, costs, busy)
    edges = _edges(deps, names, devices, costs)
    outputs = root_only(schedule, entry, called), dead_after(schedule, schedule.args)
    ends, broadcasts = _ends(deps, names, devices, costs, *outputs)
    if step_loop(schedule) is not None:
        # Its data stays distributed between iterations and is assembled once after
        # the loop (docs/semantics.md, "Time loops"): each step pays only for bringing
        # the elements the loop's host code loads to every rank (what a task needs of
        # the step before is no edge of this graph: the replay as built counts it).
        ends = [Edge(e.source, e.target, 0.0) for e in ends]
        broadcasts = sum(
            broadcast_time(nbytes, devices, costs)
            for writes in _shared(deps, _loaded(schedule, deps)).values()
            for _, nbytes in writes
        )
    order = tuple(names)
    if len(devices) > 1 and ends:
        cost[END_TASK] = {device_name(0): broadcasts}
        order += (END_TASK,)
        edges += ends
    memory = _memory(tasks, names, deps, shapes, costs)
    capacity = {
        device_name(rank): float(d.memory_bytes)
        for rank, d in enumerate(devices)
        if d.memory_bytes is not None
    }
    nodes = dict(zip(graph_devices, costs.nodes(devices) or ()))
    _check_room(schedule, names, memory, cost, capacity, devices)
    links = _links(graph_devices, costs.pair_links(devices))
    return TaskGraph(graph_devices, order, cost, tuple(edges), memory, capacity, nodes, links)


@dataclass(frozen=True)
class StepFacts:
    """What one step of a time loop around a schedule (`step_loop`) moves between ranks
    besides its tasks' dependences, as dhir-lower-to-mpi builds it: `shared`, per memref
    the loop's host code loads, each last writer's task and the bytes of the loaded
    elements (`loaded_regions`) it wrote, which then go to every rank; `carried`, per
    task, the elements it needs that a later task wrote a step before: (that task, the
    memref, bytes), sent from the writer's rank where it is another."""

    shared: dict[SSAValue, list[tuple[int, int]]]
    carried: list[list[tuple[int, SSAValue, int]]]


def step_facts(schedule: ScheduleOp, deps: DependenceGraph) -> StepFacts | None:
    """`schedule`'s `StepFacts`; None where no time loop holds it (`step_loop`): its data
    is then assembled at its end."""
    if step_loop(schedule) is None:
        return None
    loaded = _loaded(schedule, deps)
    carried = [
        [(i, value, region_bytes(value, n)) for i, value, n in needs if n != 0]
        for needs in carried_needs(deps, loaded)
    ]
    return StepFacts(_shared(deps, loaded), carried)


def _loaded(schedule: ScheduleOp, deps: DependenceGraph) -> dict[SSAValue, isl.Set]:
    """`loaded_regions(schedule)` in the spaces of `deps`' regions. It gives a memref of a
    dynamic shape as the one point `{ [] }` that validity tracks it by, which isl would
    not meet with a task's region of its elements (a time loop's host load of a
    memref<?xi32> made dhir-place's cost model raise): such a memref is loaded whole."""
    loaded = loaded_regions(schedule)
    for value, region in loaded.items():
        writes = deps.final_writes.get(value)
        if divisible(value.type) or not writes:
            continue
        space = writes[0][1].get_space()
        loaded[value] = isl.Set.empty(space) if region.is_empty() else isl.Set.universe(space)
    return loaded


def _shared(
    deps: DependenceGraph, loaded: dict[SSAValue, isl.Set]
) -> dict[SSAValue, list[tuple[int, int]]]:
    """`StepFacts.shared` of the `loaded` elements (`loaded_regions`)."""
    shared: dict[SSAValue, list[tuple[int, int]]] = {}
    for value, region in loaded.items():
        writes = deps.final_writes.get(value, [])
        found = [(k, count_elements(written & region)) for k, written in writes]
        shared[value] = [(k, region_bytes(value, n)) for k, n in found if n != 0]
    return shared


def _threaded(body: Work, task: TaskOp, threads: bool) -> Work:
    """`body` (a CPU task's) on its rank's threads where it runs on them
    (`task_runs_on_threads`: a parallel loop or a linalg op, in a module built with
    OpenMP), else on one core; a GPU task's as counted."""
    if is_gpu_task(task):
        return body
    return dataclasses.replace(body, parallel=task_runs_on_threads(task, threads))


def _links(names: tuple[str, ...], found: PairLinks | None) -> Links | None:
    if found is None:
        return None
    of, latency, per_byte = found
    return Links(dict(zip(names, of, strict=True)), latency, per_byte)


def _memory(
    tasks: Sequence[TaskOp],
    names: Sequence[str],
    deps: DependenceGraph,
    shapes: Sequence[int],
    costs: CostModel,
) -> dict[str, float]:
    """Each task's bytes for the memory check: its footprint less what the footprint
    guesses for memrefs of unknown size (memory.py's docstring: those are not counted)."""
    allocated: dict[int, int] = {}  # once per shape, as body_work
    memory = {}
    for task, name, effects, regions, shape in zip(
        tasks, names, deps.effects, deps.regions, shapes, strict=True
    ):
        if shape not in allocated:
            allocated[shape] = unknown_allocated_bytes(task)
        guessed = unknown_touched_bytes(effects, regions) + allocated[shape]
        memory[name] = float(costs.work(task).footprint - guessed)
    return memory


def _check_room(
    schedule: ScheduleOp,
    names: Sequence[str],
    memory: dict[str, float],
    cost: dict[str, dict[str, float]],
    capacity: dict[str, float],
    devices: Sequence[Device],
) -> None:
    """Refuse a task whose data fits on no rank that can run it, naming where the machine
    description gives those ranks' memory_bytes (the list scheduler's own refusal, for
    any task graph, names no file)."""
    module = schedule.get_toplevel_object()
    if not isinstance(module, ModuleOp) or not has_machine(module):
        return  # alike ranks of this machine: the list scheduler says it
    diagnostics = []
    for name in names:
        able = list(cost.get(name, {}))
        if not able or any(d not in capacity or memory[name] <= capacity[d] for d in able):
            continue
        room = ", ".join(f"{d}: {bytes_words(capacity[d])}" for d in able)
        described = dict.fromkeys(devices[rank_of_device(d)].name for d in able)
        where = ", ".join(
            f"'{device}'" + (f" at {at}" if at is not None else "")
            for device in described
            for at in [described_at(module, device, "memory_bytes")]
        )
        diagnostics.append(
            Diagnostic(
                f"task '{name}' needs {bytes_words(memory[name])} of memory, more than any device "
                f"that can run it has ({room}: the memory_bytes of {where} in the machine "
                f"description '{system_of(module).name}'). Run on devices with more memory, "
                "or on smaller arrays"
            )
        )
    if diagnostics:
        raise DhirError(diagnostics)


def concurrency(deps: DependenceGraph) -> int:
    """How many tasks of the schedule may run at the same time, as a first model: the most
    tasks at one depth of the dependence graph (depth: the longest chain of dependences
    before a task). 1 for a chain, the width for independent tasks."""
    counts: dict[int, int] = {}
    for level in depths(deps):
        counts[level] = counts.get(level, 0) + 1
    return max(counts.values(), default=1)


def depths(deps: DependenceGraph) -> list[int]:
    """Each task's depth: the longest chain of dependences before it."""
    depth: list[int] = [0] * len(deps.effects)
    for dep in sorted(deps.dependences, key=lambda d: d.after):
        depth[dep.after] = max(depth[dep.after], depth[dep.before] + 1)
    return depth


def task_costs(
    tasks: Sequence[TaskOp],
    names: Sequence[str],
    devices: Sequence[Device],
    costs: CostModel,
    busy: int,
) -> dict[str, dict[str, float]]:
    """Each task's time on each rank that can run it, with `busy` ranks running at once
    (`task_graph` gives them for the schedule's own `concurrency`)."""
    targets = _Targets()
    ranks = _RankDevices(devices)
    return {
        name: _costs(task, name, ranks, costs, targets, busy)
        for task, name in zip(tasks, names, strict=True)
    }


class _RankDevices:
    """The devices of the ranks (`devices[r]`: rank r's), each distinct one (by identity:
    ranks of one device share its object) listed once, and each rank's among them. A
    task's costs are judged once per distinct device, not per rank (65,536 ranks may
    share one)."""

    def __init__(self, devices: Sequence[Device]) -> None:
        self.devices = devices
        self.names = device_names(len(devices))
        number: dict[int, int] = {}
        self.index = [number.setdefault(id(d), len(number)) for d in devices]
        self.distinct = list({id(d): d for d in devices}.values())


def _costs(
    task: TaskOp,
    name: str,
    ranks: _RankDevices,
    costs: CostModel,
    targets: "_Targets",
    busy: int | None = None,
) -> dict[str, float]:
    target, wanted = targets.of(task)
    explicit = rank_of(task)
    devices, names = ranks.devices, ranks.names
    if explicit is not None and not 0 <= explicit < len(devices):
        raise error_at(
            task,
            f"task is placed on rank {explicit} ({RANK_ATTR}), but the program runs on "
            f"{len(devices)} rank{'s' if len(devices) != 1 else ''}",
        )
    if explicit is not None:
        runner = _runner(devices[explicit], target)
        time = _time_on(task, name, runner, costs, target, wanted, busy)
        found = {names[explicit]: time} if time is not None else {}
    else:
        times = [
            _time_on(task, name, _runner(device, target), costs, target, wanted, busy)
            for device in ranks.distinct
        ]
        if _host_code(task, target, wanted, ranks.distinct):
            on_cpus = [
                t if d.kind != DeviceKind.GPU else None for t, d in zip(times, ranks.distinct)
            ]
            times = on_cpus if any(t is not None for t in on_cpus) else times
        only = times[0] if len(times) == 1 else None
        if only is not None:  # the common case: every rank on one device
            found = dict.fromkeys(names, only)
        else:
            pairs = zip(names, ranks.index, strict=True)
            found = {n: t for n, i in pairs if (t := times[i]) is not None}
    if not found:
        raise error_at(task, _cannot_run(target, devices, explicit, wanted))
    return found


def _host_code(
    task: TaskOp, target: TargetInfo, wanted: str | None, devices: Sequence[Device]
) -> bool:
    """Whether `task` is bound to any device with no GPU code (and no device named) while
    some of `devices` are GPUs: a GPU rank would run it on its host, not at its GPU's
    rates, and the description gives that host no rates, so the CPU ranks run it."""
    if target.kind != DeviceKind.ANY or wanted is not None:
        return False
    return any(d.kind == DeviceKind.GPU for d in devices) and not is_gpu_task(task)


def _time_on(
    task: TaskOp,
    name: str,
    device: Device,
    costs: CostModel,
    target: TargetInfo,
    wanted: str | None,
    busy: int | None,
) -> float | None:
    """`task`'s time on `device` (the rank's runner), None where it cannot run there."""
    if not can_run(target, device) or (
        wanted is not None and device.name and device.name != wanted
    ):
        return None
    return costs.task_time(task, name, device, busy)


def runs_on(task: TaskOp, device: Device) -> bool:
    """Whether a rank on `device` can run `task`, as `task_graph` gives it costs there
    (its `dhir.rank` aside)."""
    target = task.target_info()
    runner = _runner(device, target)
    wanted = _named_device(task)
    named = wanted is None or not runner.name or runner.name == wanted
    return can_run(target, runner) and named and not _host_code(task, target, wanted, [runner])


def _runner(device: Device, target: TargetInfo) -> Device:
    """The device of a rank that runs a task bound to `target`: the GPU a CPU rank drives
    (`Device.gpu`) for a GPU task, else the rank's own."""
    gpu = device.gpu
    return gpu if gpu is not None and target.kind == DeviceKind.GPU else device


class _Targets:
    """Each task's target and the device it names, resolved once per dhir.target."""

    def __init__(self) -> None:
        self._known: dict[object, tuple[TargetInfo, str | None]] = {}

    def of(self, task: TaskOp) -> tuple[TargetInfo, str | None]:
        inline = task.properties.get("target")  # `dhir.task target = "cpu"`
        key = inline if inline is not None else task.operands[0]
        if key not in self._known:
            self._known[key] = (task.target_info(), _named_device(task))
        return self._known[key]


def _named_device(task: TaskOp) -> str | None:
    """The device a task's `dhir.target {device = "gpu0"}` names, if it names one."""
    target = task.target.owner if task.target is not None else None
    if isinstance(target, TargetOp) and target.device is not None:
        return target.device.data
    return None


def _cannot_run(
    target: TargetInfo, devices: Sequence[Device], explicit: int | None, wanted: str | None
) -> str:
    if wanted is not None:
        where = f"rank {explicit} ({RANK_ATTR})" if explicit is not None else "no rank"
        return f'task targets device "{wanted}", but {where} runs on it'
    if explicit is not None:
        device = _describe(devices[explicit])
        return f"task targets {target}, but rank {explicit} ({RANK_ATTR}) runs on {device}"
    have = ", ".join(sorted({_describe(d) for d in devices})) or "nothing"
    return f"task targets {target}, but no rank runs on such a device (the ranks have: {have})"


def _describe(device: Device) -> str:
    return device.arch if device.arch is not None else f"a {device.kind}"


def _edges(
    deps: DependenceGraph, names: list[str], devices: Sequence[Device], costs: CostModel
) -> list[Edge]:
    """Edges between tasks, carrying the elements the later task needs of what the
    earlier one wrote."""
    carried: dict[tuple[int, int], dict[SSAValue, int]] = {}
    for dep in deps.dependences:
        moved = carried.setdefault((dep.before, dep.after), {})
        if dep.hazard != Hazard.WAR:
            nbytes = region_bytes(dep.memref, dep.elements)
            moved[dep.memref] = max(moved.get(dep.memref, 0), nbytes)
    return [
        _edge(names[before], names[after], sum(values.values()), devices, costs)
        for (before, after), values in sorted(carried.items())
    ]


def _ends(
    deps: DependenceGraph,
    names: list[str],
    devices: Sequence[Device],
    costs: CostModel,
    to_root: set[SSAValue],
    dead: set[SSAValue],
    in_part: Set[SSAValue] = frozenset(),
) -> tuple[list[Edge], float]:
    """Edges from the tasks whose writes stand at the end to END_TASK (carrying what goes
    to rank 0 only), and the seconds of the broadcasts of the rest but the `dead`
    buffers, which go nowhere (dhir.analysis.outputs.dead_after). An output `in_part`,
    which each rank writes itself, is sent nowhere: its writers' edges only order."""
    to_end: dict[int, int] = {}
    broadcast = 0.0
    for value, writes in deps.final_counts().items():
        if value in dead:
            continue
        for k, count in writes:
            nbytes = region_bytes(value, count)
            if value in to_root and value not in in_part:
                to_end[k] = to_end.get(k, 0) + nbytes
            else:
                to_end.setdefault(k, 0)
                if value not in to_root:
                    broadcast += broadcast_time(nbytes, devices, costs)
    ends = [
        _edge(names[k], END_TASK, nbytes, devices, costs) for k, nbytes in sorted(to_end.items())
    ]
    return ends, broadcast


def end_as_built(
    schedule: ScheduleOp,
    graph: TaskGraph,
    placement: Placement,
    devices: Sequence[Device],
    costs: CostModel,
    in_part: Set[SSAValue],
    entry: str = "main",
) -> Placement:
    """`placement` with END_TASK timed as if the outputs `in_part` were not sent to rank 0:
    a partitioned run has each rank write its part of them itself, as the as-built replay
    has it (dhir.placement.as_built). For display only: the list schedules keep the
    message in their model (`best` judges its candidates as built, without it, up to
    as_built.JUDGED_UNSENT tasks). The other tasks keep their times;
    the end starts once its inputs are on rank 0, in the first gap of rank 0 it fits."""
    if END_TASK not in placement.assignment or not in_part or step_loop(schedule) is not None:
        return placement
    deps = dependence_graph(schedule)
    names = list(graph.tasks[: len(deps.effects)])
    outputs = root_only(schedule, entry), dead_after(schedule, schedule.args)
    ends, _ = _ends(deps, names, devices, costs, *outputs, in_part)
    rank0 = device_name(0)
    ready = 0.0
    for edge in ends:
        there = placement.assignment[edge.source]
        arrival = placement.finish[edge.source] + graph.comm_between(edge, there, rank0)
        ready = max(ready, arrival)
    duration = placement.finish[END_TASK] - placement.start[END_TASK]
    busy = sorted(
        (placement.start[t], placement.finish[t])
        for t, device in placement.assignment.items()
        if device == rank0 and t != END_TASK
    )
    begin = ready
    for start, finish in busy:  # by start: past each one it would overlap
        if finish > begin and (start < begin + duration or start <= begin):
            begin = finish
    return Placement(
        placement.assignment,
        placement.start | {END_TASK: begin},
        placement.finish | {END_TASK: begin + duration},
    )


def broadcast_time(nbytes: int, devices: Sequence[Device], costs: CostModel) -> float:
    """One MPI_Bcast of `nbytes` to every rank: a binomial tree, ceil(log2(ranks)) rounds
    of one transfer each."""
    if len(devices) < 2:
        return 0.0
    rounds = math.ceil(math.log2(len(devices)))
    return rounds * costs.comm_time(nbytes, devices)


def _edge(
    source: str, target: str, nbytes: int, devices: Sequence[Device], costs: CostModel
) -> Edge:
    """An edge moving `nbytes`: its time inside a node, and between nodes where the
    devices span several."""
    if not nbytes or len(devices) < 2:
        return Edge(source, target, 0.0)
    inside, between = costs.comm_times(nbytes, devices)
    return Edge(source, target, inside, between, float(nbytes))
