"""`dhir schedule`: place tasks on devices and print when each task runs (its synopsis:
docs/commands.md).

A program's schedules are placed as `dhir run` would place them (dhir/placement/from_ir.py:
one device per rank, costs estimated from the IR; a plain @main goes through CodeDrop
first, and tasks are split as dhir-split cuts them); a task graph in JSON (the format in
dhir/placement/graph.py) is placed as it is. For a program, the memory each rank holds
and the part its tasks touch follow (dhir/analysis/footprint.py).
"""

import argparse
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from dhir.analysis.dependences import TaskGraph as DependenceGraph
from dhir.analysis.dependences import task_graph as dependence_graph
from dhir.analysis.footprint import Footprint, MemrefFootprint, Whole, footprint
from dhir.analysis.outputs import remembered
from dhir.analysis.partition import Partition, Storage, equal_runs
from dhir.analysis.profile import load_profile
from dhir.api import diagnosed
from dhir.choices import MAX_RANKS
from dhir.cli.common import (
    add_constraints,
    add_quiet,
    check_output_file,
    checked,
    output_file,
    path,
    read_stdin,
)
from dhir.cli.names import COMMANDS
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.dialects.func import FuncOp
from dhir.ir.diagnostics import (
    DhirError,
    Diagnostic,
    UsageError,
    decode_source,
    parse_json,
    read_file,
)
from dhir.ir.file_lines import EntryError, locate
from dhir.ir.tasks import task_ids
from dhir.ir.text import parse_file, parse_string
from dhir.ir.walk import find_ops
from dhir.machine.description import REFERENCE_GPU, Device, System
from dhir.machine.detect import load_local_system, local_system_file
from dhir.machine.dlti import attach, system_of
from dhir.machine.files import read_system
from dhir.placement.as_built import (
    Timeline,
    as_built_makespan,
    as_built_timeline,
    place_program,
)
from dhir.placement.constraints import Constraints, read_constraints, violations
from dhir.placement.cost_model import CostModel
from dhir.placement.from_ir import (
    END_TASK,
    device_name,
    end_as_built,
    has_machine,
    machine_for,
    rank_of_device,
    task_graph,
)
from dhir.placement.graph import FORMAT, Placement, TaskGraph
from dhir.placement.list_scheduling import ALGORITHMS, DEFAULT_ALGORITHM
from dhir.placement.memory import MemoryLimits, held_in_part, program_storage, resident
from dhir.placement.render import FORMATS, Arrow, dot, gantt
from dhir.placement.residency import fitting, oversized_task, peak_resident
from dhir.placement.simulate import Network, SharedNic, Simulation, simulate
from dhir.runner import drop_code, on_tensors
from dhir.toolchain.build import Timing
from dhir.toolchain.entry import find_entry
from dhir.toolchain.options import (
    DEFAULT_TARGET,
    RunOptions,
    decimal_integer,
    rank_count,
    target_name,
)
from dhir.toolchain.rank_splits import RankSplits
from dhir.toolchain.tensors import bufferize
from dhir.transforms.annotate_dependences import check_annotations
from dhir.transforms.optimize_bodies import Decision, decision_lines
from dhir.transforms.place import (
    PlacePass,
    carried_at,
    constraints_of,
    drop_unmatched,
    entry_storage,
    memory_limits,
    rank_facts,
)
from dhir.transforms.shard_collectives import SPMD
from dhir.transforms.split_tasks import SplitChoice, SplitPlan
from dhir.units import byte_size


@dataclass(frozen=True)
class AsBuilt:
    """A program's schedule as the native backend builds it (dhir.placement.as_built)."""

    schedule: ScheduleOp
    graph: TaskGraph
    devices: list[Device]
    model: CostModel
    limits: MemoryLimits | None = None  # shared by the program's schedules, placed in order
    storage: Callable[[], Storage | None] | None = None  # how the ranks hold the memrefs
    # The outputs each rank writes itself (placement.memory.held_in_part): no message in
    # the replay shown.
    in_part: frozenset[SSAValue] = frozenset()
    deps: DependenceGraph | None = None  # the schedule's, found once for all of these

    def place(self, algorithm: str) -> Placement:
        """As dhir-place places it: `best` takes, of its candidates, the fastest as built;
        what each rank holds fits its device's memory."""
        return place_program(
            self.schedule,
            self.graph,
            self.devices,
            self.model,
            algorithm,
            self.deps,
            limits=self.limits,
            storage=self.storage,
        )

    def makespan(self, assignment: Mapping[str, str]) -> float:
        return as_built_makespan(
            self.schedule,
            self.graph,
            assignment,
            self.devices,
            self.model,
            in_part=self.in_part,
            deps=self.deps,
        )

    def timeline(self, assignment: Mapping[str, str]) -> Timeline:
        return as_built_timeline(
            self.schedule,
            self.graph,
            assignment,
            self.devices,
            self.model,
            in_part=self.in_part,
            deps=self.deps,
        )

    def shown(self, placement: Placement) -> Placement:
        """The plan as shown: its end without the messages to rank 0 that a partitioned
        run never sends (the outputs in `in_part`), as the replay has it."""
        return end_as_built(
            self.schedule, self.graph, placement, self.devices, self.model, self.in_part
        )


# Says how a placement of a schedule's graph breaks the user's constraints (none: all hold).
Checker = Callable[[TaskGraph, Placement], list[str]]


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "schedule",
        help=COMMANDS["schedule"],
        description="Place the tasks of each schedule of a dhir program (FILE), or of a task "
        "graph in JSON (--graph), on devices and print each task's device, start and finish, "
        "and the predicted makespan; optionally replay it in a simulator (--simulate) and draw "
        "it (--gantt, --dot). A program's tasks get one device per rank, from --system, or "
        "the machine description the program's module carries (as dhir run reads it), or "
        "from -n alike ranks of this machine (rank r with its GPU r mod count for GPU tasks), "
        "or else from this machine's description "
        "(dhir calibrate's file, or what dhir detects). For a program, it then prints the bytes "
        "each rank holds and those its tasks touch (memory per rank). The JSON format: " + FORMAT,
    )
    parser.add_argument(
        "program",
        nargs="?",
        type=path,
        metavar="FILE",
        help="a dhir program (.mlir; - for standard input)",
    )
    parser.add_argument("--graph", type=path, metavar="G.json", help="a task graph (JSON)")
    parser.add_argument("--entry", help="with FILE: the entry function (default: main)")
    parser.add_argument(
        "--no-codedrop",
        action="store_true",
        help="a program whose entry has no dhir.schedule is not wrapped by CodeDrop "
        "(then there is nothing to place)",
    )
    parser.add_argument(
        "--target",
        metavar="ARCH|cpu|gpu|any",
        type=checked(target_name, str, "a target"),
        help="with FILE: where the tasks CodeDrop makes may run: an arch (x86_64, sm_90, "
        "...), cpu, gpu, or any (the default: any device)",
    )
    parser.add_argument(
        "--no-optimize",
        action="store_true",
        help="with FILE: place the tasks as `dhir run --no-optimize` builds them (time loops "
        "not run in bands of steps by dhir-time-tiles)",
    )
    parser.add_argument(
        "--costs",
        type=path,
        metavar="FILE",
        help="with FILE: task times measured by dhir run --profile, used instead of estimates",
    )
    add_constraints(parser)
    parser.add_argument(
        "--system",
        type=path,
        metavar="FILE",
        help="with FILE: the machine description (TOML or JSON, see docs/machine.md)",
    )
    parser.add_argument(
        "-n",
        "--ranks",
        type=checked(rank_count, decimal_integer, "a whole number"),
        metavar="N",
        help=f"with FILE: the number of ranks, 1 to {MAX_RANKS} (default: the machine "
        "description's)",
    )
    # --algorithm: the option's earlier name, kept so that old command lines still work.
    parser.add_argument(
        "--algorithm", choices=tuple(ALGORITHMS), default=DEFAULT_ALGORITHM, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--placement",
        dest="algorithm",
        choices=tuple(ALGORITHMS),
        default=DEFAULT_ALGORITHM,
        metavar="ALGO",
        help="how tasks are placed on ranks: round-robin, heft, peft, or best, a portfolio "
        "plus local search, never worse than heft and peft (default: best)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print JSON: for a program, {"schedules": [{"schedule": name, "makespan": m, '
        '"assignment": {...}, "start": {...}, "finish": {...}, "as_built_makespan": m}, '
        '...], "memory": {...}, "split": [{"task": t, "pieces": k, "how": ..., "detail": '
        '...}, ...]} ("hosts" first where a machine description places the ranks; '
        '"memory", what each rank holds and touches, where the program has its entry '
        'function; "split", what dhir-split did with each task it might have cut; '
        '"time_tiles", what dhir-time-tiles did with each time loop; '
        '"constraints_broken" in each schedule with --constraints); for a '
        '--graph, {"makespan": m, "assignment": {...}, "start": {...}, "finish": {...}}; '
        'with --simulate, each placement also has "simulated_makespan" (docs/commands.md)',
    )
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="also replay the placement in the discrete-event simulator (each device runs "
        "its tasks in the placement's order; transfers contend for links) and print its "
        "makespan beside the scheduler's",
    )
    parser.add_argument(
        "--node-size",
        type=checked(_devices_per_node, decimal_integer, "a whole number"),
        metavar="K",
        help="with --simulate: every K consecutive devices (in the graph's order) form a node "
        "whose transfers to other nodes share one network link, one at a time (default: "
        "every transfer has a link of its own, the schedulers' model)",
    )
    parser.add_argument(
        "--gantt",
        type=output_file,
        metavar="PATH",
        help="draw the placement as a Gantt chart: PATH if it ends in .png or .svg, else "
        "both PATH.png and PATH.svg; a program's as built (each rank runs its tasks in "
        "program order, messages as arrows), a --graph's as planned",
    )
    add_quiet(parser)
    parser.add_argument(
        "--gantt-plan",
        action="store_true",
        help="with --gantt and a program FILE: draw its placement as its algorithm planned "
        "it, not as built (a --graph is always drawn as planned)",
    )
    parser.add_argument(
        "--dot",
        type=output_file,
        metavar="PATH",
        help="write the task graph with the placement in Graphviz DOT to PATH",
    )


def run(args: argparse.Namespace) -> int:
    stages = Timing()  # for the terminal's status line (dhir.toolchain.progress)
    _check_node_size(args)
    _check_input(args)
    legend, hosts, check = "", {}, None
    plan = SplitPlan()  # what dhir-split did with each task, and why
    tiles: list[Decision] = []  # what dhir-time-tiles did with each time loop
    if args.graph is not None:
        graphs: Sequence[tuple[str, TaskGraph, AsBuilt | None]] = [
            ("", read_graph(args.graph), None)
        ]
    else:
        with stages.stage("reading the program and its task graphs"):
            legend, hosts, graphs, check = program_graphs(
                args.program,
                args.system,
                args.ranks,
                codedrop=not args.no_codedrop,
                entry=args.entry,
                target=args.target or DEFAULT_TARGET,
                costs=args.costs,
                constraints=args.constraints,
                algorithm=args.algorithm,
                plan=plan,
                tiles=None if args.no_optimize else tiles,
            )
    if args.graph is None and not graphs:
        return _host_code_only(args, legend)
    with remembered():  # placing changes nothing in the program
        results = []
        for number, (name, graph, as_built) in enumerate(graphs):
            with stages.stage(f"placing schedule {number} ({len(graph.tasks)} tasks)"):
                if as_built is None:
                    placement = fitting(ALGORITHMS[args.algorithm])(graph)
                else:
                    placement = as_built.place(args.algorithm)
            replay = None
            if args.simulate:
                with stages.stage("simulating"):
                    replay = simulate(graph, placement, _network(graph, args.node_size))
            built = as_built.makespan(placement.assignment) if as_built is not None else None
            broken = check(graph, placement) if check is not None else None
            if as_built is not None:
                placement = as_built.shown(placement)
            suffix = f".{number}" if len(graphs) > 1 else ""
            with stages.stage("drawing"):
                _draw(args, graph, placement, suffix, as_built)
            results.append((name, graph, placement, replay, built, broken))
        placed = [(built, result[2]) for (_, _, built), result in zip(graphs, results)]
        memory = _footprint(placed, args.entry or "main")
    if args.json:
        print(_json_output(results, args.graph is not None, hosts, memory, plan, tiles))
    else:
        if legend:
            print(legend)
        shown = hosts if len(set(hosts.values())) > 1 else {}
        texts = [_text_output(result, args.node_size, shown) for result in results]
        if tiles:
            texts.append("\n".join(f"time tiles: {line}" for line in decision_lines(tiles)))
        if plan.choices:
            head, *items = plan.lines()
            texts.append("\n".join([head, *(f"  {item}" for item in items)]))
        if memory is not None:
            texts.append(memory_text(memory))
        print("\n\n".join(texts))
    return 0


def _host_code_only(args: argparse.Namespace, legend: str) -> int:
    """What `dhir schedule` shows of a program with no schedule, which `dhir run` runs as
    host code on every rank alike: that there is no task to place (or chart to draw)."""
    named = "<stdin>" if str(args.program) == "-" else args.program  # as the parser names it
    why = "(--no-codedrop)" if args.no_codedrop else "and CodeDrop made no task"
    said = (
        f"{named}: @{args.entry or 'main'} has no dhir.schedule {why}: it runs as host code, "
        "the same on every rank, so there is no task to place"
    )
    if args.gantt is not None or args.dot is not None:
        raise _error(f"{said}, and no chart to draw; leave out --gantt and --dot")
    print(json.dumps({"schedules": []}) if args.json else f"{legend}\n{said}")
    return 0


@dataclass(frozen=True)
class Memory:
    """What each rank's tasks touch of each memref argument of @main (`touched`), the
    rows of it each rank holds (`partition`) and the bytes it holds (`held`)."""

    touched: Footprint
    partition: Partition
    held: list[int]
    capacity: list[int | None]  # each rank's device's memory_bytes (None: not given)
    sharing: list[int]  # how many ranks share each rank's device


def _footprint(placed: Sequence[tuple[AsBuilt | None, Placement]], entry: str) -> Memory | None:
    """What each rank's tasks touch and hold of each memref argument of the entry, placed
    as shown (dhir.analysis.footprint, dhir.placement.memory); None for a task graph, or a
    program without the entry."""
    built = [as_built for as_built, _ in placed if as_built is not None]
    if not placed or len(built) != len(placed):
        return None
    module = built[0].schedule.get_toplevel_object()
    assert isinstance(module, ModuleOp)
    ids = task_ids(module)  # once: each schedule's names read the whole module
    ranks: dict[TaskOp, int] = {}
    for as_built, (_, placement) in zip(built, placed, strict=True):
        for task in as_built.schedule.tasks():
            ranks[task] = rank_of_device(placement.assignment[ids[task]])
    function = _function(module, entry)
    if function is None:
        return None
    as_built = built[0]
    count = len(as_built.devices)
    stored = program_storage(function, count, entry)
    touched = footprint(function, count, ranks)
    devices = as_built.devices
    capacity = [d.memory_bytes for d in devices]
    users = Counter(id(d) for d in devices)  # ranks on one device share it
    sharing = [users[id(d)] for d in devices]
    return Memory(touched, stored.partition(ranks), resident(stored, ranks), capacity, sharing)


def _check_input(args: argparse.Namespace) -> None:
    if (args.program is None) == (args.graph is None):
        raise _usage("give either a program FILE or --graph G.json (one of the two)")
    if args.graph is not None and (args.system is not None or args.ranks is not None):
        raise _usage("--system and -n describe where a program runs; a --graph names its devices")
    if args.graph is not None and args.costs is not None:
        raise _usage("--costs gives a program's measured task times; a --graph has its own")
    if args.graph is not None and args.constraints is not None:
        raise _usage("--constraints steer the placement of a program's tasks; give the program")
    program_only = {
        "--entry": args.entry,
        "--target": args.target,
        "--no-codedrop": args.no_codedrop,
        "--no-optimize": args.no_optimize,
    }
    given = [name for name, value in program_only.items() if value]
    if args.graph is not None and given:
        raise _usage(f"{given[0]} says how to read a program FILE; a --graph is read as it is")
    if args.gantt_plan and args.gantt is None:
        raise _usage("--gantt-plan says which chart --gantt draws; give --gantt PATH too")
    if args.gantt_plan and args.graph is not None:
        raise _usage(
            "--gantt-plan draws a program's plan, not as built; a --graph is always "
            "drawn as planned: leave --gantt-plan out"
        )
    # Before placing: --gantt DIR would draw DIR.png and DIR.svg beside the folder.
    for option, named in (("--gantt", args.gantt), ("--dot", args.dot)):
        if named is not None and named.is_dir():
            raise _error(f"{option} {named} is a folder; name the file to write")
        if named is not None:
            check_output_file(named)  # said after placing (and printing), else


def program_graphs(
    path: Path,
    system_file: Path | None,
    ranks: int | None,
    codedrop: bool = True,
    entry: str | None = None,
    target: str = DEFAULT_TARGET,
    costs: Path | None = None,
    constraints: Path | None = None,
    algorithm: str = DEFAULT_ALGORITHM,
    plan: SplitPlan | None = None,
    tiles: list[Decision] | None = None,
) -> tuple[str, dict[str, str], list[tuple[str, TaskGraph, AsBuilt]], Checker | None]:
    """Which device each rank is, the host each rank (a device of the graphs, `rank0`)
    runs on when a machine description says (else none), and per schedule of the
    program: its task graph, as `dhir run` places them (with the task times measured in
    `costs`, a profile, where given), and the makespan of a placement as the native
    backend runs it (dhir.placement.as_built). With `constraints`, the tasks they name
    are first given the ranks `algorithm` and the constraints settle on (dhir-place), and
    the last result checks a placement against them. An `entry` named must be one of the
    module's functions, as for `dhir run`; None: @main's memory, where there is a @main
    (every schedule is placed either way). A `plan` learns what dhir-split did with each
    task, and why. With `tiles` (a list), time loops first run in bands of steps as
    `dhir run` runs them (dhir-time-tiles, unless --no-optimize), and `tiles` learns what
    became of each; None: as written."""
    module, entry = _prepared(path, entry, ranks, codedrop, target)
    system, ranks = _system_and_ranks(module, system_file, ranks)
    splits = RankSplits(ranks, plan)  # as `dhir run` splits the tasks
    splits.devices(module)
    tiled = splits.tasks(module, tiles=tiles is not None)
    if tiles is not None:
        tiles += tiled
    profile = load_profile(str(costs)) if costs is not None else None
    if profile is not None:
        drop_unmatched(profile, module, str(costs))
    # A file replaces the module's own constraints, as `dhir run` attaches it.
    rules = read_constraints(constraints) if constraints is not None else _carried(module)
    place = PlacePass(ranks, algorithm, str(costs) if costs is not None else None, entry)
    place.follow_shardings(module)  # as dhir-place does for `dhir run`
    if rules is not None:
        with diagnosed():  # an error about the module's own constraints is at its line
            place.pin_constrained(module, rules)
    devices, model = machine_for(module, ranks, profile)
    legend = _rank_legend(system, ranks, devices)
    hosts = rank_hosts(system) if system is not None else {}
    schedules = [op for op in module.walk() if isinstance(op, ScheduleOp)]
    named = "<stdin>" if str(path) == "-" else path  # as the parser names it
    if not schedules and any(SPMD in f.attributes for f in find_ops(module, FuncOp)):
        raise _error(
            f"{named} is a shard program: each rank runs its device's part, so there is no "
            "task to place"
        )
    if not schedules:  # dhir run runs it as host code: say so, not fail (run() does)
        return legend, hosts, [], None
    graphs = _graphs(module, schedules, ranks, entry, devices, model, plan)
    if rules is None:
        return legend, hosts, graphs, None
    return legend, hosts, graphs, _checker(module, rules, devices)


def _prepared(
    path: Path, entry: str | None, ranks: int | None, codedrop: bool, target: str
) -> tuple[ModuleOp, str]:
    """The program in `path` and its entry as `dhir run` takes them: bufferized where the
    entry is on tensors, a plain entry given its schedules."""
    module = _read_program(path)
    check_annotations(module.walk())  # as `dhir run` refuses them (a dhir.after it ignores)
    if entry is not None:  # named: the module must have it; else @main, where there is one
        find_entry(module, entry)  # dhir run's error for an entry it lacks
    entry = entry or "main"
    if on_tensors(module, entry):  # bufferized first, as `dhir run` does
        module = bufferize(module, entry, ranks)
    # A plain entry: schedules as `dhir run` makes them.
    drop_code(module, entry, RunOptions(codedrop=codedrop, target=target))
    return module, entry


def _system_and_ranks(
    module: ModuleOp, system_file: Path | None, ranks: int | None
) -> tuple[System | None, int]:
    """The machine description, as `dhir run` reads it (None where it reads none), and
    the ranks: `ranks`, else the description's."""
    system = None
    if system_file is None and has_machine(module):  # as `dhir run` reads it
        system = system_of(module)  # errors at its line in the file
    elif system_file is not None or ranks is None:
        system = _system(system_file)
        file = system_file if system_file is not None else local_system_file()
        attach(module, system, None if file is None else str(file))  # errors name it
    if ranks is None:
        assert system is not None
        ranks = len(system.rank_devices())
    return system, ranks


def _graphs(
    module: ModuleOp,
    schedules: list[ScheduleOp],
    ranks: int,
    entry: str,
    devices: list[Device],
    model: CostModel,
    plan: SplitPlan | None,
) -> list[tuple[str, TaskGraph, AsBuilt]]:
    """Each schedule's name, task graph and makespans as built."""
    graphs = []
    with remembered():  # nothing changes the program from here on
        limits = memory_limits(module, ranks, entry, devices)
        storage = cache(partial(entry_storage, module, ranks, entry))
        in_part = held_in_part(module, entry, storage, model.nodes(devices))
        ids = task_ids(module)  # once: each schedule's names read the whole module
        if plan is not None:
            plan.name(ids)
        for number, schedule in enumerate(schedules):
            names = [ids[task] for task in schedule.tasks()]
            deps = dependence_graph(schedule)
            graph = task_graph(schedule, devices, model, deps=deps, names=names)
            built = AsBuilt(schedule, graph, list(devices), model, limits, storage, in_part, deps)
            graphs.append((_schedule_name(schedule, number), graph, built))
    return graphs


def _checker(module: ModuleOp, rules: Constraints, devices: list[Device]) -> Checker:
    """The constraints' violations of a placement."""
    facts = rank_facts(module, devices)

    def check(graph: TaskGraph, placement: Placement) -> list[str]:
        tasks = [t for t in graph.tasks if t in placement.assignment and t != END_TASK]
        where = [rank_of_device(placement.assignment[t]) for t in tasks]
        with diagnosed(), carried_at(module, rules):
            return violations(rules, tasks, where, facts)

    return check


def _carried(module: ModuleOp) -> Constraints | None:
    """The constraints `module` carries itself (`dhir.constraints`), which dhir-place
    follows in `dhir run`."""
    with diagnosed():
        return constraints_of(module)


def _read_program(path: Path) -> ModuleOp:
    """The program in `path`, or in standard input for `-` (as dhir run and compile read it)."""
    if str(path) == "-":
        return parse_string(read_stdin(), "<stdin>")
    return parse_file(path)


def _rank_legend(system: System | None, ranks: int, devices: list[Device]) -> str:
    """Which device and node each rank (a device of the task graph) stands for."""
    if system is None:
        legend = (
            f"ranks: {ranks} alike CPUs of this machine (rank0 .. rank{ranks - 1})"
            if ranks > 1
            else "ranks: 1 (rank0), on this machine's CPU"
        )
        gpus = {id(d.gpu): d.gpu for d in devices if d.gpu is not None}
        if not gpus:
            return legend
        if list(gpus.values()) == [REFERENCE_GPU]:
            return legend + ", each with an assumed GPU for GPU tasks (none found here)"
        return legend + f", rank r with GPU r mod {len(gpus)} for GPU tasks"
    parts = [
        f"rank{rank} = {device.name} ({device.arch}) on {_node_and_host(system, device)}"
        for rank, device in enumerate(system.rank_devices())
    ]
    return "ranks: " + ", ".join(parts)


def _node_and_host(system: System, device: Device) -> str:
    node = system.node_of(device)
    return node.name if node.host == node.name else f"{node.name} (host {node.host})"


def rank_hosts(system: System) -> dict[str, str]:
    """The host (`Node.host`, the name mpirun reaches it by) of each rank's node, by the
    rank's name in the task graphs."""
    devices = system.rank_devices()
    return {device_name(rank): system.node_of(d).host for rank, d in enumerate(devices)}


def _system(path: Path | None) -> System:
    if path is None:
        return load_local_system()
    return read_system(path)


def _schedule_name(schedule: ScheduleOp, number: int) -> str:
    function = schedule.parent_op()
    while function is not None and not isinstance(function, FuncOp):
        function = function.parent_op()
    owner = function.sym_name.data if function is not None else "module"
    return f"schedule #{number} (in @{owner})"


def _draw(
    args: argparse.Namespace,
    graph: TaskGraph,
    placement: Placement,
    suffix: str,
    as_built: AsBuilt | None,
) -> None:
    if args.gantt is not None:
        drawn, arrows, kind = placement, [], "plan"
        if as_built is not None and not args.gantt_plan:
            timeline = as_built.timeline(placement.assignment)
            drawn = _with_end(timeline.placement, timeline.makespan)
            arrows = [
                Arrow(t.source, t.target, t.begin, t.end, t.nbytes) for t in timeline.transfers
            ]
            kind = "as built"
        for path in gantt_paths(_suffixed(args.gantt, suffix)):
            gantt(graph, drawn, path, title=args.algorithm, arrows=arrows, kind=kind)
    if args.dot is not None:
        _write(_suffixed(args.dot, suffix), dot(graph, placement))


def _with_end(placement: Placement, end: float) -> Placement:
    """`placement` with the schedule's end (END_TASK, on rank 0) at `end`."""
    return Placement(
        placement.assignment | {END_TASK: device_name(0)},
        placement.start | {END_TASK: end},
        placement.finish | {END_TASK: end},
    )


def _suffixed(path: Path, suffix: str) -> Path:
    """PATH for one schedule; NAME.K.EXT for schedule K when there are several."""
    if not suffix:
        return path
    if path.suffix:
        return path.with_name(f"{path.stem}{suffix}{path.suffix}")
    return Path(f"{path}{suffix}")


def _text_output(result: tuple[Any, ...], node_size: int | None, hosts: Mapping[str, str]) -> str:
    name, graph, placement, replay, built, broken = result
    lines = [name] if name else []
    # A program's times are seconds; a --graph's are in its own units, left bare.
    unit = "s" if built is not None else ""
    lines.append(table(graph, placement, hosts, unit))
    if graph.memory and graph.capacity and built is None:  # a program has "memory per rank"
        lines.append(_resident_line(graph, peak_resident(graph, placement)))
    if built is not None:
        lines.append(
            f"as built: {built:g} s (each rank runs its tasks in program order; a receive "
            "waits for the task that wrote its data)"
        )
    if replay is not None:
        lines.append(_simulated_line(replay, node_size, unit))
        if replay.overflow is not None:
            over = replay.overflow
            lines.append(
                f"simulated memory: {over.device} holds {over.held:g} bytes at {over.time:g}, "
                f"more than its capacity {over.capacity:g}"
            )
    if broken is not None:
        lines.append(
            "constraints broken: " + "; ".join(broken) if broken else "constraints: all hold"
        )
    return "\n".join(lines)


def _resident_line(graph: TaskGraph, peaks: Mapping[str, float]) -> str:
    """Each device's most resident bytes beside its capacity (dhir.placement.residency)."""
    shown = [
        f"{d} {peaks.get(d, 0.0):g}"
        + (f" of {graph.capacity[d]:g}" if d in graph.capacity else " (no limit)")
        for d in graph.devices
    ]
    return "peak resident bytes: " + ", ".join(shown)


def _function(module: object, name: str) -> FuncOp | None:
    if not isinstance(module, ModuleOp):
        return None
    functions = (op for op in module.body.block.ops if isinstance(op, FuncOp))
    return next((f for f in functions if f.sym_name.data == name), None)


def _json_output(
    results: list[tuple[Any, ...]],
    plain_graph: bool,
    hosts: Mapping[str, str],
    memory: Memory | None = None,
    plan: SplitPlan | None = None,
    tiles: Sequence[Decision] = (),
) -> str:
    if plain_graph:
        _, graph, placement, replay, _, _ = results[0]
        out = json.loads(to_json(placement, replay))
        if graph.memory and graph.capacity:
            out["peak_resident"] = peak_resident(graph, placement)
            out["capacity"] = graph.capacity
        return json.dumps(out)
    schedules = []
    for name, _, placement, replay, built, broken in results:
        entry = json.loads(to_json(placement, replay))
        schedules.append({"schedule": name, **entry, "as_built_makespan": built})
        if broken is not None:
            schedules[-1]["constraints_broken"] = broken
    out: dict[str, Any] = {"hosts": dict(hosts)} if hosts else {}
    out["schedules"] = schedules
    if memory is not None:
        out["memory"] = memory_json(memory)
    if plan is not None and plan.choices:  # every task: a program reads it whole
        out["split"] = [_choice_json(choice) for choice in plan.choices]
    if tiles:
        out["time_tiles"] = [
            {"at": str(d.loc) if d.loc is not None else None, "done": d.done, "text": d.text}
            for d in tiles
        ]
    return json.dumps(out)


def _choice_json(choice: SplitChoice) -> dict[str, Any]:
    """A task dhir-split saw; `devices` only for dhir-split-devices' pieces."""
    out = asdict(choice)
    if not choice.devices:
        del out["devices"]
    return out


# --- memory per rank ------------------------------------------------------------------


def memory_text(memory: Memory) -> str:
    """Per rank, the bytes it holds and those its tasks touch; then each memref: the rows
    each rank holds, or why every rank holds it whole."""
    lines = ["memory per rank (the rows of each memref a rank's tasks touch, where dhir "
             "partitions it; else all of it):"]  # fmt: skip
    touched = memory.touched
    per_rank = []
    for rank in range(touched.ranks):
        held, used = byte_size(memory.held[rank]), byte_size(touched.touched(rank))
        room = memory.capacity[rank]
        shared = f", shared by {memory.sharing[rank]} ranks" if memory.sharing[rank] > 1 else ""
        of = f" of its device's {byte_size(room)}{shared}" if room is not None else ""
        per_rank.append(f"holds {held}{of}, its tasks touch {used}")
    for first, last, line in equal_runs(per_rank):
        who = (
            device_name(first)
            if first == last
            else f"{device_name(first)}-{device_name(last)} (each)"
        )
        lines.append(f"  {who}: {line}")
    names = {m.index: m.name for m in touched.memrefs}
    unsized = {m.index for m in touched.memrefs if m.size is None}
    for index, line in zip(sorted(names), memory.partition.lines(names), strict=True):
        lines.append(f"  {line}{'; not counted above' if index in unsized else ''}")
    return "\n".join(lines)


def memory_json(memory: Memory) -> dict[str, Any]:
    """`memory_text` as data: bytes per rank, and per memref its boxes on each rank
    (each box [[lo, hi] per dimension], hi exclusive) or the reason it stays whole, and
    the rows each rank holds ([lo, hi] pairs) or null when it is whole."""
    touched = memory.touched
    ranks = {
        device_name(r): {
            "held_bytes": memory.held[r],
            "touched_bytes": touched.touched(r),
            "device_memory_bytes": memory.capacity[r],
        }
        for r in range(touched.ranks)
    }
    bands = memory.partition.bands
    memrefs = []
    for memref in touched.memrefs:
        entry = _memref_json(memref)
        rows = bands.get(memref.index)
        entry["rows"] = (
            {device_name(r): [list(band) for band in mine] for r, mine in enumerate(rows)}
            if rows is not None
            else None
        )
        if rows is None:
            entry["whole"] = memory.partition.whole[memref.index].reason
        memrefs.append(entry)
    return {"partitioned": bool(bands), "ranks": ranks, "memrefs": memrefs}


def _memref_json(memref: MemrefFootprint) -> dict[str, Any]:
    whole = memref.whole
    boxes = None
    if whole is None:
        boxes = {
            device_name(rank): [
                [[lo, hi] for lo, hi in zip(box.lo, box.hi, strict=True)] for box in part
            ]
            for rank, part in enumerate(memref.parts)
            if not isinstance(part, Whole)
        }
    return {
        "name": memref.name,
        "shape": list(memref.shape) if memref.shape is not None else None,
        "element_bytes": memref.element_bytes,
        "bytes": memref.size,
        "whole": whole.reason if whole is not None else None,
        "boxes": boxes,
    }


def _devices_per_node(value: object) -> int:
    assert isinstance(value, int)
    if value < 1:
        raise _error(f"must be at least 1 (devices per node), got {value}")
    return value


def _check_node_size(args: argparse.Namespace) -> None:
    if args.node_size is None:
        return
    if not args.simulate:
        raise _usage("--node-size describes the simulated network: add --simulate")


def _network(graph: TaskGraph, node_size: int | None) -> Network | None:
    """None (the simulator's default, no contention) unless nodes share a link."""
    return None if node_size is None else SharedNic.grouped(graph.devices, node_size)


def gantt_paths(path: Path) -> list[Path]:
    """PATH itself when it names a PNG or SVG file; otherwise PATH.png and PATH.svg."""
    if path.suffix.lower() in FORMATS:
        return [path]
    return [Path(f"{path}{suffix}") for suffix in FORMATS]


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as error:
        raise _error(f"cannot write {path}: {error.strerror or error}") from None


def _simulated_line(replay: Simulation, node_size: int | None, unit: str = "") -> str:
    unit = f" {unit}" if unit else ""
    if node_size is None:
        return (
            f"simulated makespan: {replay.makespan:g}{unit} (every transfer on a link of its own)"
        )
    return (
        f"simulated makespan: {replay.makespan:g}{unit} (nodes of {node_size} devices sharing "
        f"one network link; transfers waited {replay.link_wait:g}{unit} in all)"
    )


def to_json(placement: Placement, replay: Simulation | None = None) -> str:
    out: dict[str, Any] = {
        "makespan": placement.makespan,
        "assignment": placement.assignment,
        "start": placement.start,
        "finish": placement.finish,
    }
    if replay is not None:
        out["simulated_makespan"] = replay.makespan
    return json.dumps(out)


def table(
    graph: TaskGraph,
    placement: Placement,
    hosts: Mapping[str, str] | None = None,
    unit: str = "",
) -> str:
    """One row per task by start: its device and times (in `unit`, named in the heading and
    after the makespan where given), and its device's host when `hosts` (device -> host)
    has any."""
    hosts = hosts or {}
    start, finish = (f"start ({unit})", f"finish ({unit})") if unit else ("start", "finish")
    width = max((len(t) for t in graph.tasks), default=4)
    dev_width = max((len(d) for d in graph.devices), default=6)
    host_width = max((len(h) for h in hosts.values()), default=0)
    host_head = f"  {'host':<{host_width}}" if hosts else ""
    rows = [f"{'task':<{width}}  {'device':<{dev_width}}{host_head}  {start:>10}  {finish:>10}"]
    by_start = sorted(graph.tasks, key=lambda t: (placement.start[t], placement.finish[t]))
    for task in by_start:
        device = placement.assignment[task]
        host = f"  {hosts.get(device, ''):<{host_width}}" if hosts else ""
        rows.append(
            f"{task:<{width}}  {device:<{dev_width}}{host}  "
            f"{placement.start[task]:>10g}  {placement.finish[task]:>10g}"
        )
    rows.append(f"makespan: {placement.makespan:g}" + (f" {unit}" if unit else ""))
    return "\n".join(rows)


# --- reading the JSON -------------------------------------------------------------------


def read_graph(path: Path) -> TaskGraph:
    try:
        text = decode_source(read_file(path), str(path), bom=True)
    except OSError as error:
        raise _error(f"cannot read {path}: {error.strerror}") from None
    try:
        return graph_from_json(parse_json(text, str(path)), str(path))
    except EntryError as error:
        raise locate(error, text, json_format=True) from None


def graph_from_json(data: object, where: str = "graph") -> TaskGraph:
    """The checked graph (see `TaskGraph.from_json`); errors name `where`. A graph whose
    memory cannot fit whatever the placement is refused here, where the file is known."""
    graph = TaskGraph.from_json(data, where)
    too_big = oversized_task(graph)
    if too_big is not None:  # at the task's memory (else the task), where a file is read
        raise EntryError(where, too_big[1], ("tasks", too_big[0]), "memory", at_value=True)
    return graph


def _error(message: str) -> DhirError:
    return DhirError([Diagnostic(message)])


def _usage(message: str) -> UsageError:
    """Options that conflict or lack another: exit status 2 (dhir.cli.common.guarded)."""
    return UsageError([Diagnostic(message)])
