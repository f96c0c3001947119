"""`dhir-place`: give every task an MPI rank (`dhir.rank`), keeping ranks already given.

Algorithms: `round-robin` (task k of a schedule on rank k mod N; the pass's default,
so that hand-written expectations stay put), and the cost-driven list schedulers of
`dhir.placement.list_scheduling` (`heft`, `peft`, `best`) on each schedule's task graph
(`dhir.placement.from_ir`): task times estimated from the IR (`dhir.placement.cost_model`),
or measured ones from a profile (`costs=FILE`, as `dhir run --profile FILE` writes
it). `best` takes, of its candidate placements, the one whose makespan as the native
backend runs it is the shortest (`dhir.placement.as_built.fastest_as_built`). `dhir run`
and `dhir compile` use `best` unless told otherwise.

Constraints the user declared (`--constraints FILE`, dhir.placement.constraints) live in
the module as `dhir.constraints` (their JSON, a string), so that dhir-opt pipelines see
them too: the program is placed once without them, `settle` fixes a rank for each task
they name, nearest where it went, and the program is placed again around those ranks.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, partial

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.handoff import hand_over, keep_facts
from dhir.analysis.outputs import entry_called, remembered
from dhir.analysis.partition import Storage
from dhir.analysis.profile import NO_TASK, Profile, load_profile, unmatched, why_unmatched
from dhir.analysis.regions import Regions
from dhir.dialects.dhir import ScheduleOp, TaskOp, walk_outside_tasks
from dhir.dialects.func import FuncOp
from dhir.ir.diagnostics import DhirError, Diagnostic, collected_warnings, warn
from dhir.ir.file_lines import did_you_mean
from dhir.ir.pass_failure import PassFailedAt
from dhir.ir.tasks import RANK_ATTR, rank_of, task_ids
from dhir.machine.description import Device
from dhir.machine.dlti import described_at, system_of
from dhir.placement.as_built import place_program
from dhir.placement.constraints import Constraints, RankFacts, settle
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import (
    has_machine,
    local_devices,
    machine_for,
    rank_of_device,
    runs_on,
    task_graph,
)
from dhir.placement.hints import hinted_ranks
from dhir.placement.list_scheduling import ALGORITHMS
from dhir.placement.memory import MemoryLimits, program_storage
from dhir.placement.round_robin import round_robin
from dhir.targets import DeviceKind
from dhir.transforms.pass_options import check_entry, check_ranks

# Where the module keeps the user's placement constraints: their JSON (Constraints.to_json).
CONSTRAINTS_ATTR = "dhir.constraints"
# The text of the file each JSON attached in this process was read from (the latest), so
# that `dhir run --constraints FILE` reports errors at that file's lines; a module read
# from disk carries JSON no file gave here, and its errors are at the module's line.
_file_texts: dict[str, str] = {}


@dataclass(frozen=True)
class PlacePass(ModulePass):
    """Give every task an MPI rank (`dhir.rank`), keeping ranks already given."""

    name = "dhir-place"

    ranks: int = 1
    algorithm: str = "round-robin"
    costs: str | None = None  # a profile whose measured task times replace the estimates
    # The function whose memref arguments a rank may hold in part; default: @main, where
    # there is one (a name given must be a function of the module).
    entry: str | None = None

    @property
    def entry_name(self) -> str:
        """`entry`, or main where none is named."""
        return self.entry or "main"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_ranks(self.name, self.ranks)
        check_entry(self.name, op, self.entry)
        with remembered():  # placing changes only the tasks' attributes
            self.follow_shardings(op)
            constraints = constraints_of(op)
            if constraints is not None:
                self.pin_constrained(op, constraints)
            self._place(op)

    def follow_shardings(self, op: ModuleOp) -> None:
        """Give the tasks that a schedule's shardings place (dhir.placement.hints) their
        rank, where they have none yet and can run there."""
        schedules = [s for s in walk_outside_tasks(op) if isinstance(s, ScheduleOp)]
        hinted = [(t, r) for s in schedules for t, r in hinted_ranks(s, self.ranks).items()]
        if not hinted:
            return
        profile = load_profile(self.costs) if self.costs else None
        devices, _ = machine_for(op, self.ranks, profile)
        for task, rank in hinted:
            if rank_of(task) is None and runs_on(task, devices[rank]):
                task.attributes[RANK_ATTR] = IntegerAttr(rank, i64)

    def pin_constrained(self, op: ModuleOp, constraints: Constraints) -> None:
        """Give each task `constraints` name the rank `settle` chooses for it (placing the
        program once to learn where the tasks would rather run), and take the ranks that
        placement gave the others away again."""
        schedules = [s for s in walk_outside_tasks(op) if isinstance(s, ScheduleOp)]
        tasks = [t for s in schedules for t in s.tasks()]
        fixed = [rank_of(t) for t in tasks]
        with collected_warnings():  # the placement that follows warns, once
            self._place(op)
        preferred = [rank_of(t) for t in tasks]
        profile = load_profile(self.costs) if self.costs else None
        devices, _ = machine_for(op, self.ranks, profile)
        names = task_ids(op)
        with carried_at(op, constraints):
            chosen = settle(
                constraints,
                [names[t] for t in tasks],
                [{r for r, d in enumerate(devices) if runs_on(t, d)} for t in tasks],
                fixed,
                [r if r is not None else 0 for r in preferred],
                rank_facts(op, devices),
            )
        for task, given, rank in zip(tasks, fixed, chosen, strict=True):
            settled = given if given is not None else rank
            if settled is None:
                del task.attributes[RANK_ATTR]
            else:
                task.attributes[RANK_ATTR] = IntegerAttr(settled, i64)

    def _place(self, op: ModuleOp) -> None:
        if self.algorithm not in ALGORITHMS:
            raise PassFailedException(
                f"dhir-place: unknown algorithm '{self.algorithm}'; known: {', '.join(ALGORITHMS)}"
            )
        schedules = [s for s in walk_outside_tasks(op) if isinstance(s, ScheduleOp)]
        profile = load_profile(self.costs) if self.costs else None  # checked in any case
        if profile is not None:
            drop_unmatched(profile, op, str(self.costs))
        if self.algorithm == "round-robin":
            limits = memory_limits(op, self.ranks, self.entry_name)
            for schedule in schedules:
                place_schedule(schedule, self.ranks, limits=limits)
            return
        devices, model = machine_for(op, self.ranks, profile)
        limits = memory_limits(op, self.ranks, self.entry_name, devices)
        # Each placed schedule's task regions (its dependence graph's), for the storage.
        found: dict[TaskOp, Regions] = {}
        storage = cache(partial(entry_storage, op, self.ranks, self.entry_name, found))
        names = task_ids(op)  # once: a schedule's names read the whole module
        for schedule in schedules:
            place_schedule(
                schedule,
                self.ranks,
                self.algorithm,
                model,
                devices,
                limits,
                storage,
                found,
                self.entry_name,
                names,
            )


def constraints_of(module: ModuleOp) -> Constraints | None:
    """The constraints `module` carries (CONSTRAINTS_ATTR), if any."""
    attr = module.attributes.get(CONSTRAINTS_ATTR)
    if attr is None:
        return None
    if not isinstance(attr, StringAttr):
        raise PassFailedAt(module, f"dhir-place: {CONSTRAINTS_ATTR} must be a string of JSON")
    try:
        found = Constraints.from_json(attr.data)
    except ValueError as error:
        raise PassFailedAt(
            module, f"dhir-place: {CONSTRAINTS_ATTR} is not constraints dhir wrote ({error})"
        ) from None
    return replace(found, text=_file_texts.get(attr.data))


def attach_constraints(module: ModuleOp, constraints: Constraints) -> None:
    written = constraints.to_json()
    module.attributes[CONSTRAINTS_ATTR] = StringAttr(written)
    if constraints.text is not None:
        _file_texts[written] = constraints.text


@contextmanager
def carried_at(module: ModuleOp, constraints: Constraints) -> Iterator[None]:
    """Within: an error about `constraints`, where `module` carries them with no file
    read here, at the module's line, saying which file the entry came from (a file of
    that name where the module is used may be missing, or another)."""
    try:
        yield
    except DhirError as error:
        if constraints.text is not None:
            raise
        prefix = f"{constraints.source}: "
        said = "; ".join(d.message.removeprefix(prefix) for d in error.diagnostics)
        message = f"dhir-place: {CONSTRAINTS_ATTR} (constraints from {constraints.source}): {said}"
        raise PassFailedAt(module, message) from None


def rank_facts(module: ModuleOp, devices: Sequence[Device]) -> list[RankFacts]:
    """What a pin can name about each rank: its node (from the machine description),
    its device's name and whether it drives a GPU."""
    system = system_of(module) if has_machine(module) else None
    facts = []
    for device in devices:
        node = system.node_of(device).name if system is not None else None
        gpu = device.kind == DeviceKind.GPU or device.gpu is not None
        name = device.name or (device.gpu.name if device.gpu is not None else "")
        facts.append(RankFacts(node, name, "gpu" if gpu else "cpu"))
    return facts


def entry_storage(
    module: ModuleOp,
    ranks: int,
    entry: str = "main",
    regions: Mapping[TaskOp, Regions] | None = None,
) -> Storage | None:
    """How the ranks hold the memref arguments of `entry` (None without it), for `best`
    to prefer, of placements it finds as fast, the one whose fullest rank holds least.
    `regions`: tasks' access regions, where already found."""
    function = SymbolTable.lookup_symbol(module, entry)
    if not isinstance(function, FuncOp):
        return None
    return program_storage(function, ranks, entry, regions)


def memory_limits(
    module: ModuleOp, ranks: int, entry: str = "main", devices: Sequence[Device] | None = None
) -> MemoryLimits | None:
    """What each rank of the machine description of `module` may hold (None without a
    description giving memory_bytes, or whose rank count is not `ranks`, or without the
    entry function). `devices`: its ranks' devices, when known already."""
    if not has_machine(module):
        return None
    function = SymbolTable.lookup_symbol(module, entry)
    if not isinstance(function, FuncOp):
        return None
    system = system_of(module)
    if devices is None:
        if system.rank_count != ranks:
            return None
        devices, _ = machine_for(module, ranks)

    def where(device: Device) -> str:
        at = described_at(module, device.name, "memory_bytes")
        return f"'{system.name}'" + (f", {at}" if at is not None else "")

    return MemoryLimits.of(function, devices, where, entry)


def drop_unmatched(profile: Profile, module: ModuleOp, path: str) -> None:
    """Warn about the profile's entries that describe no task of `module` (a name from
    another program, a task measured whole that is now cut, or cut otherwise), and
    leave them out: those tasks keep their estimates."""
    names = list(task_ids(module).values())
    stale = unmatched(profile, names)
    if not stale:
        return
    for name in stale:
        del profile.tasks[name]
    reasons = why_unmatched(stale, names)
    lines = [
        f"  {reason}: {_some(entries, names if reason == NO_TASK else None)}"
        for reason, entries in reasons.items()
    ]
    message = (
        f"{path} has times that describe no task of this program; they are not used (the "
        "names are those `dhir schedule` prints; a task is cut by the rank count and "
        "dhir.split):\n" + "\n".join(lines)
    )
    warn(Diagnostic(message, severity="warning"))


def _some(names: list[str], known: list[str] | None = None) -> str:
    """At most 8 of `names`; each with the name of `known` it may misspell, if any."""
    shown = ", ".join(name + did_you_mean(name, known or ()) for name in names[:8])
    return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def place_schedule(
    schedule: ScheduleOp,
    ranks: int,
    algorithm: str = "round-robin",
    model: CostModel | None = None,
    devices: Sequence[Device] | None = None,
    limits: MemoryLimits | None = None,
    storage: Callable[[], Storage | None] | None = None,
    regions: dict[TaskOp, Regions] | None = None,
    entry: str = "main",
    names: Mapping[TaskOp, str] | None = None,
) -> None:
    """Write `dhir.rank` on every task of `schedule`. `devices[R]` is rank R's device
    (default: alike local CPUs); `model` gives the costs (default: estimates); `limits`:
    each device's memory, which what its ranks hold must fit (dhir.placement.memory).
    `regions`: where the tasks' access regions found on the way are recorded. `entry`:
    the program's entry function, whose outputs go to rank 0 only. `names`: the tasks'
    names (dhir.ir.tasks.task_ids), when known already."""
    for task in schedule.tasks():
        _check_explicit(task, ranks)
    if algorithm == "round-robin":
        # It needs no facts, but the lowering does, and finds them faster here, where the
        # tasks are alike, than after dhir-track-tasks tells each task's body apart.
        keep_facts(list(schedule.tasks()))
        chosen = round_robin(schedule, ranks)
        if limits is not None:
            chosen = limits.settle(schedule, chosen, _runs_on(schedule, limits.devices))
    else:
        chosen = _by_cost(
            schedule, ranks, algorithm, model, devices, limits, storage, regions, entry, names
        )
    # One attribute per rank, shared by its tasks (attributes are immutable): building
    # one per task cost 0.05 s at 10,000 tasks (docs/performance.md).
    by_rank = {rank: IntegerAttr(rank, i64) for rank in dict.fromkeys(chosen)}
    for task, rank in zip(schedule.tasks(), chosen, strict=True):
        task.attributes[RANK_ATTR] = by_rank[rank]


def _by_cost(
    schedule: ScheduleOp,
    ranks: int,
    algorithm: str,
    model: CostModel | None,
    devices: Sequence[Device] | None,
    limits: MemoryLimits | None,
    storage: Callable[[], Storage | None] | None = None,
    regions: dict[TaskOp, Regions] | None = None,
    entry: str = "main",
    names: Mapping[TaskOp, str] | None = None,
) -> list[int]:
    tasks = list(schedule.tasks())
    if ranks == 1:
        chosen = [0] * len(tasks)  # nothing to choose: skip the analysis
        if limits is not None:
            limits.settle(schedule, chosen, lambda k, rank: rank == 0)
        return chosen
    devices = devices if devices is not None else local_devices(ranks)
    model = model if model is not None else CostModel()
    deps = dependence_graph(schedule)
    hand_over(tasks, deps.effects, deps.regions)
    if regions is not None:
        regions.update(zip(tasks, deps.regions, strict=True))
    # Both the graph and the replay ask it (as root_only would): one walk, not two.
    function = schedule.parent_op()
    module = function.parent_op() if function is not None else None
    called = isinstance(module, ModuleOp) and entry_called(module, entry)
    ids = [names[task] for task in tasks] if names is not None else None
    graph = task_graph(schedule, devices, model, entry, deps=deps, called=called, names=ids)
    placed = place_program(
        schedule, graph, devices, model, algorithm, deps, limits, storage, called, entry
    )
    return [rank_of_device(placed.assignment[name]) for name in graph.tasks[: len(tasks)]]


def _runs_on(schedule: ScheduleOp, devices: Sequence[Device]) -> Callable[[int, int], bool]:
    """Whether task k of `schedule` may run on rank R: its `dhir.rank` if it has one, and
    a device that can run its target."""
    tasks = list(schedule.tasks())

    def runs(k: int, rank: int) -> bool:
        explicit = rank_of(tasks[k])
        return explicit in (None, rank) and runs_on(tasks[k], devices[rank])

    return runs


def _check_explicit(task: TaskOp, ranks: int) -> None:
    rank = rank_of(task)
    if rank is not None and not 0 <= rank < ranks:
        raise PassFailedAt(
            task,
            f"task is placed on rank {rank} ({RANK_ATTR}), but the program runs "
            f"on {ranks} rank{'s' if ranks != 1 else ''} (ranks 0..{ranks - 1})",
        )
