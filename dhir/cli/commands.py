"""The commands of `dhir` (dhir/cli/main.py is its entry point): run, compile and gantt
here, schedule, calibrate and cache in their own modules. Their synopses are in docs/commands.md
and README.md, which tests/unit/test_synopses.py holds to these parsers.
"""

import argparse
import json
import os
import shutil
import sys
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dhir.analysis.bounds import EntryBounds, check_bounds
from dhir.backends.native import compile_native
from dhir.choices import MAX_RANKS, MAX_THREADS
from dhir.cli import cache, calibrate, schedule
from dhir.cli.arguments import (
    INPUT_HELP,
    Built,
    check_apart,
    describe,
    is_executable,
    read_inputs,
    read_sidecar,
    report_results,
    sidecar,
)
from dhir.cli.cached_run import recorder
from dhir.cli.common import (
    add_constraints,
    add_quiet,
    check_output_file,
    checked,
    guarded,
    output_file,
    path,
    read_stdin,
)
from dhir.cli.names import COMMANDS, DESCRIPTION
from dhir.cli.parser import Parser
from dhir.ir.diagnostics import DhirError, Diagnostic, UsageError
from dhir.ir.text import parse_string
from dhir.machine.dlti import attach, check_description
from dhir.machine.files import read_system
from dhir.machine.layout import LaunchPlan, launch_plan
from dhir.placement.list_scheduling import ALGORITHMS, DEFAULT_ALGORITHM
from dhir.placement.render import FORMATS as CHART_FORMATS
from dhir.runner import (
    BACKENDS,
    DEFAULT_BACKEND,
    check_runnable,
    drop_code,
    load_program,
    on_tensors,
    run_module,
)
from dhir.toolchain.build import Timing, keep_build
from dhir.toolchain.entry import entry_signature
from dhir.toolchain.launch import run_executable
from dhir.toolchain.linking import LinkInputs, library_name
from dhir.toolchain.options import (
    DEFAULT_CHECKS,
    DEFAULT_GPU_FALLBACK,
    DEFAULT_MPI,
    DEFAULT_RANKS,
    DEFAULT_TARGET,
    DEFAULT_TIMEOUT_S,
    GPU_FALLBACKS,
    RunOptions,
    check_runtime_environment,
    check_written_files,
    cpu_name,
    decimal_integer,
    rank_count,
    real_number,
    target_name,
    thread_count,
    timeout_seconds,
)
from dhir.toolchain.progress import status_line
from dhir.toolchain.shards import is_shard_program, partition
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tensors import bufferize, specialise
from dhir.toolchain.tools import MPI_CHOICES, cache_root, whole_elf
from dhir.toolchain.values import check_inputs, with_results
from dhir.transforms.fast_math import MODES
from dhir.version import __version__

DEFAULT_ENTRY = "main"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="dhir",
        description=DESCRIPTION,
    )
    parser.add_argument("--version", action="version", version=f"dhir {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help=COMMANDS["run"],
        description="Run the entry function of a dhir program on N MPI ranks; rank 0 "
        "writes the final memref arguments.",
    )
    run.add_argument(
        "file",
        type=path,
        help="a .mlir program (- for standard input), or an executable from dhir compile",
    )
    _add_build_options(run)
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        default=DEFAULT_BACKEND,
        help="native: MPI + LLVM (default); interp: the sequential reference interpreter",
    )
    run.add_argument("--input", action="append", default=[], metavar="X", help=INPUT_HELP)
    run.add_argument(
        "--output-dir",
        type=path,
        metavar="DIR",
        help="write memref argument K's final value to DIR/argK.npy (and to NAME.npy after "
        "its name; an entry's tensor result K to DIR/resK.npy)",
    )
    run.add_argument(
        "--print",
        action="store_true",
        help="print the final memref arguments (and an entry's tensor results)",
    )
    run.add_argument(
        "--profile",
        type=output_file,
        metavar="FILE",
        help="time every task on its rank and write the times to FILE (JSON; for --costs; "
        "native backend, .mlir programs)",
    )
    run.add_argument(
        "--trace",
        type=output_file,
        metavar="FILE",
        help="write a Chrome trace (JSON, for Perfetto or chrome://tracing) of what every rank "
        "did: tasks, messages, input reads, result writes (native backend; dhir gantt draws it)",
    )
    run.add_argument(
        "--threads",
        type=checked(thread_count, decimal_integer, "a whole number"),
        metavar="T",
        help=f"OpenMP threads per rank for parallel loops, 1 to {MAX_THREADS} (default: "
        "cores / ranks)",
    )
    run.add_argument(
        "--system",
        type=path,
        metavar="FILE",
        help="a machine description (.toml/.json, docs/machine.md) to place tasks on; runs "
        "its ranks (-n must agree), laid out on its nodes with an mpirun hostfile",
    )
    run.add_argument(
        "--timeout",
        type=checked(timeout_seconds, real_number, "a number"),
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help="give up (and kill every rank) after S seconds, more than 0; inf waits for ever "
        f"(default {DEFAULT_TIMEOUT_S:g})",
    )

    compile_ = commands.add_parser(
        "compile",
        help=COMMANDS["compile"],
        description="Build an executable that `dhir run EXE` (or mpirun) runs later.",
    )
    compile_.add_argument("file", type=path, help="a .mlir program (- for standard input)")
    compile_.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file,
        metavar="EXE",
        help="the executable to write, with its description EXE.dhir.json beside it",
    )
    compile_.add_argument(
        "--system",
        type=path,
        metavar="FILE",
        help="a machine description (.toml/.json, docs/machine.md) to place tasks on; builds "
        "for its ranks (-n must agree); `dhir run EXE --system FILE` lays them out",
    )
    _add_build_options(compile_)
    schedule.add_parser(commands)
    calibrate.add_parser(commands)
    chart = commands.add_parser(
        "gantt",
        help=COMMANDS["gantt"],
        description="Draw a run's trace (dhir run --trace FILE.json) as a Gantt chart like "
        "dhir schedule --gantt's: a row per rank, a bar per run of each task, each message an "
        "arrow from its send to its receive, each input read and result write in grey, "
        "times from the run's start; the time axis shows the tasks and messages.",
    )
    chart.add_argument("trace", type=path, help="a trace that dhir run --trace wrote")
    chart.add_argument(
        "-o",
        "--output",
        required=True,
        type=_chart_file,
        metavar="PATH",
        help="the chart: a .png or .svg file",
    )
    chart.add_argument(
        "--whole",
        action="store_true",
        help="show the whole run from its start (reading inputs included), not only the "
        "tasks and messages",
    )
    cache.add_parser(commands)
    for command in commands.choices.values():  # for `main` to report an unknown option
        command.set_defaults(command_parser=command)
    return parser


def _add_build_options(parser: argparse.ArgumentParser) -> None:
    # --entry, --mpi and --gpu-fallback: None when not given, so that running an
    # executable can tell a value given (checked against how it was built) from the default.
    parser.add_argument("--entry", help=f"the function to run (default: {DEFAULT_ENTRY})")
    add_quiet(parser)
    parser.add_argument(
        "--keep-build",
        type=path,
        metavar="DIR",
        help="copy what the build made into DIR: the lowered MLIR (program.mlir), the LLVM "
        "dialect as MLIR bytecode (program.llvm.mlirbc; as text, program.llvm.mlir, for a "
        "GPU build), LLVM IR (program.ll), the harness (harness.c) and the executable "
        "(program); programK.* for each module of a build split into several",
    )
    parser.add_argument(
        "-n",
        "--ranks",
        type=checked(rank_count, decimal_integer, "a whole number"),
        default=None,  # None: not given (an executable's own count, or DEFAULT_RANKS)
        help=f"MPI ranks, 1 to {MAX_RANKS} (default {DEFAULT_RANKS}; an executable's own count)",
    )
    parser.add_argument(
        "--mpi",
        choices=MPI_CHOICES,
        help=f"the MPI to build and run with (default: {DEFAULT_MPI})",
    )
    parser.add_argument(
        "--timing",
        action="store_true",
        help="print the time of each stage (dhir run on the native backend: also the bytes "
        "each rank sent)",
    )
    parser.add_argument(
        "--gpu-fallback",
        choices=GPU_FALLBACKS,
        help="cpu: run GPU tasks written as loops on the CPU (no GPU needed); none: run them "
        "on the ranks' GPUs (default)",
    )
    parser.add_argument(
        "--placement",
        choices=tuple(ALGORITHMS),
        default=None,  # None: not given (an executable refuses it), DEFAULT_ALGORITHM
        metavar="ALGO",
        help=f"how tasks are placed on ranks: {', '.join(ALGORITHMS)} "
        f"(default: {DEFAULT_ALGORITHM})",
    )
    parser.add_argument(
        "--costs",
        type=path,
        metavar="FILE",
        help="task times measured by --profile, used by the placement instead of estimates",
    )
    add_constraints(parser)
    parser.add_argument(
        "--no-codedrop",
        action="store_true",
        help="run an entry without dhir.schedule as written, on every rank (by default "
        "CodeDrop wraps its loop nests, linalg ops and calls in tasks; docs/commands.md)",
    )
    parser.add_argument(
        "--link",
        action="append",
        default=[],
        type=path,
        metavar="FILE",
        help="link an object file (.o), static (.a) or shared library (.so) into every rank's "
        "executable, for tasks that call its functions (repeatable; docs/commands.md, "
        '"Calling your own code")',
    )
    parser.add_argument(
        "-l",
        action="append",
        default=[],
        dest="libraries",
        type=checked(library_name, str, "a library name"),
        metavar="NAME",
        help="link the library libNAME.so or libNAME.a, as a C compiler does (repeatable)",
    )
    parser.add_argument(
        "-L",
        action="append",
        default=[],
        dest="library_dirs",
        type=path,
        metavar="DIR",
        help="look for -l libraries in DIR first (repeatable)",
    )
    parser.add_argument(
        "--cpu",
        metavar="NAME",
        type=checked(cpu_name, str, "a CPU name"),
        help="build each rank's code for this CPU: clang's -march name (znver4, "
        "x86-64-v3, ...) or native (default: the --system description's, else this "
        "machine's; docs/machine.md)",
    )
    parser.add_argument(
        "--fast-math",
        choices=MODES,
        default="none",
        help="floating-point relaxations the whole program allows: contract (fused "
        "multiply-adds), reassoc (also sums in another order), fast (all of LLVM's); "
        "default none: every result as the program's operations round it",
    )
    checks = parser.add_mutually_exclusive_group()
    checks.add_argument(
        "--runtime-checks",
        action="store_const",
        const="all",
        help="check every memref access, cast and view as it runs, stopping the run at "
        "the line of the first out of its memref (as the interpreter does); slower. By "
        "default only the accesses dhir does not prove in bounds are checked",
    )
    checks.add_argument(
        "--no-runtime-checks",
        dest="runtime_checks",
        action="store_const",
        const="none",
        help="check no access as it runs, not even those dhir does not prove in bounds "
        "(one out of its memref then reads or writes other memory)",
    )
    parser.add_argument(
        "--no-optimize",
        action="store_true",
        help="build task bodies' loop nests as written (by default dhir-optimize-bodies "
        "blocks and vectorises contraction nests, and dhir-time-tiles runs stencil time "
        "loops in skewed bands, with halos once a band on several ranks, exactly; --timing "
        "says which)",
    )
    parser.add_argument(
        "--target",
        metavar="ARCH|cpu|gpu|any",
        type=checked(target_name, str, "a target"),
        help="where the tasks CodeDrop makes may run: an arch (x86_64, sm_90, ...), cpu, gpu, "
        "or any (the default: any device)",
    )


def _options(args: argparse.Namespace) -> RunOptions:
    """The options `args` give (`dhir compile` has no --timeout, --threads, --profile)."""
    return RunOptions(
        ranks=args.ranks if args.ranks is not None else DEFAULT_RANKS,
        mpi=args.mpi or DEFAULT_MPI,
        timeout=getattr(args, "timeout", DEFAULT_TIMEOUT_S),
        threads=getattr(args, "threads", None),
        placement=args.placement or DEFAULT_ALGORITHM,
        costs=args.costs,
        constraints=args.constraints,
        profile=getattr(args, "profile", None),
        trace=getattr(args, "trace", None),
        keep_build=args.keep_build,
        gpu_fallback=args.gpu_fallback or DEFAULT_GPU_FALLBACK,
        codedrop=not args.no_codedrop,
        target=args.target or DEFAULT_TARGET,
        link=LinkInputs(tuple(args.link), tuple(args.libraries), tuple(args.library_dirs)),
        cpu=args.cpu,
        optimize=not args.no_optimize,
        fast_math=args.fast_math,
        runtime_checks=args.runtime_checks or DEFAULT_CHECKS,
    )


def _entry(args: argparse.Namespace) -> str:
    """--entry's function; `--entry ""` names none (it is not the default, main)."""
    return args.entry if args.entry is not None else DEFAULT_ENTRY


def _cmd_compile(args: argparse.Namespace) -> int:
    _check_output(Path(args.file), Path(args.output))
    # Reported either way: its notes, the build's report, go beside the executable for
    # `dhir run EXE --timing`.
    timing = Timing(reported=True)
    options = _options(args)
    check_written_files(options)  # --keep-build
    entry = _entry(args)
    module = _load_timed(Path(args.file), timing)
    with timing.stage("checks"):
        bounds: EntryBounds | None = check_runnable(module, entry)  # as `dhir run` does
    plan = _launch_plan(args, args.ranks, options.mpi)
    if plan is not None:
        attach(module, plan.system, str(args.system))  # placement and cost models read it there
        options = replace(options, ranks=plan.ranks)
    # As the user gives it (tensors too); a machine description changes no access.
    given = entry_signature(module, entry, bounds=bounds)
    if on_tensors(module, entry):
        module = bufferize(module, entry, options.ranks)
        bounds = None  # another module
        check_bounds(module, entry)  # its accesses (a `tensor.extract`'s) have buffers now
    elif is_shard_program(module):  # a program per device on memrefs
        module = partition(module, entry, options.ranks)
        bounds = None
    drop_code(module, entry, options)  # as run_module: `bounds` still holds
    exe, _ = compile_native(module, entry, options, timing, bounds=bounds)
    if options.keep_build is not None:
        keep_build(exe, options.keep_build)
    _install(exe, Path(args.output), describe(given, options, timing.notes))
    if args.timing:
        print(timing.report(), file=sys.stderr)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    if args.backend == "native":
        check_runtime_environment()  # before the program is read and built
    timing = Timing(reported=True) if args.timing else None
    path = Path(args.file)
    if is_executable(path):
        results, signature = _run_built(path, args, timing)
    else:
        results, signature = _run_program(path, args, timing)
    report_results(results, signature, args.print, args.output_dir)
    if timing is not None:
        print(timing.report(), file=sys.stderr)
    return 0


def _load_timed(path: Path, timing: Timing | None) -> ModuleOp:
    # A stage even when not timed, for the terminal's status line.
    with (timing if timing is not None else Timing()).stage("parse + verify"):
        return _load(path)


def _load(path: Path) -> ModuleOp:
    """The program in `path`, or in standard input for `-`."""
    if str(path) == "-":
        return parse_string(read_stdin(), "<stdin>")
    return load_program(path)


def _run_program(
    path: Path, args: argparse.Namespace, timing: Timing | None
) -> tuple[list[np.ndarray], EntrySignature]:
    if args.backend == "interp":
        _check_interpretable(args)
    options = _options(args)
    entry = _entry(args)
    on_built = recorder(args.argv[1:])  # keyed on the files before they are read
    module = _load_timed(path, timing)
    if on_tensors(module, entry):  # arguments of dynamic shape take their inputs'
        inputs = read_inputs(args.input, entry_signature(module, entry, given_only=True))
        module = specialise(module, entry, inputs)
        signature = entry_signature(module, entry)
    else:  # found once: each walks the entry
        signature = entry_signature(module, entry)
        inputs = read_inputs(args.input, signature)
    check_apart(
        args.input, signature, args.output_dir, {"--trace": args.trace, "--profile": args.profile}
    )
    plan = _launch_plan(args, args.ranks, options.mpi) if args.backend == "native" else None
    if plan is not None:
        check_description(module)  # the program's own, before --system's replaces it
        attach(module, plan.system, str(args.system))  # placement and cost models read it there
        threads = options.threads if options.threads is not None else plan.threads
        options = replace(options, ranks=plan.ranks, threads=threads, hostfile=plan.hostfile)
    results = run_module(
        module,
        entry,
        inputs,
        args.backend,
        options,
        output_dir=args.output_dir,
        timing=timing,
        on_built=on_built,
    )
    return results, signature


# Options only the native backend has use for, and why.
_NATIVE_ONLY = {
    "profile": ("--profile", "times tasks on MPI ranks"),
    "trace": ("--trace", "records what MPI ranks did"),
    "keep_build": ("--keep-build", "keeps what the build made, and the interpreter builds nothing"),
    "constraints": ("--constraints", "steers the placement of tasks on MPI ranks"),
    "threads": ("--threads", "sets the OpenMP threads of a rank, and the interpreter runs one"),
    "cpu": ("--cpu", "chooses the CPU to build for, and the interpreter builds nothing"),
    "mpi": ("--mpi", "chooses the MPI to run with, and the interpreter runs none"),
    "gpu_fallback": (
        "--gpu-fallback",
        "chooses where GPU tasks run, and the interpreter runs every task itself",
    ),
    "target": (
        "--target",
        "binds the tasks CodeDrop makes, and the interpreter runs the entry as written",
    ),
}


def _check_interpretable(args: argparse.Namespace) -> None:
    """Refuse, before the program is read, the options the interpreter would ignore."""
    placing = [f"--{name}" for name in ("placement", "costs", "system") if getattr(args, name)]
    if placing:
        verb = "needs" if len(placing) == 1 else "need"
        raise UsageError(
            [
                Diagnostic(
                    "the interpreter places no task (it runs them in program order): "
                    f"{' and '.join(placing)} {verb} --backend native"
                )
            ]
        )
    for name, (option, why) in _NATIVE_ONLY.items():
        if getattr(args, name):
            raise UsageError([Diagnostic(f"{option} {why}; use it with --backend native")])


def _launch_plan(
    args: argparse.Namespace, ranks: int | None, mpi: str, exe: Path | None = None
) -> LaunchPlan | None:
    """With --system: the description, its rank count, hostfile and threads. `exe`: the
    executable, built for `ranks`, that the description must run (-n was not given)."""
    if args.system is None:
        return None
    system = read_system(args.system)
    if exe is not None and system.rank_count != ranks:
        count = system.rank_count
        raise DhirError(
            [
                Diagnostic(
                    f"{exe} was built for {_ranks(ranks)} and --system {args.system} runs "
                    f"{_ranks(count)}; rebuild it with dhir compile --system {args.system}, "
                    f"or give a description of {_ranks(ranks)}"
                )
            ]
        )
    return launch_plan(system, ranks, mpi, cache_root(), str(args.system))


def _run_built(
    path: Path, args: argparse.Namespace, timing: Timing | None
) -> tuple[list[np.ndarray], EntrySignature]:
    if args.backend == "interp":
        raise DhirError(
            [Diagnostic(f"{path} is an executable; the interpreter runs the .mlir program")]
        )
    built = read_sidecar(path)
    signature, ranks = built.signature, built.ranks
    refused = _unchangeable(path, args, built)
    if refused:
        raise DhirError(refused)
    given = with_results(signature, read_inputs(args.input, signature))
    inputs = check_inputs(signature, given, copy=False)  # run_executable only saves them
    check_apart(args.input, signature, args.output_dir)
    plan = _launch_plan(args, ranks, built.mpi, path)
    hostfile = plan.hostfile if plan is not None else None
    options = replace(_options(args), ranks=ranks, mpi=built.mpi, hostfile=hostfile)
    check_written_files(options)
    if not whole_elf(path):  # last: what is said of the command line comes first
        raise DhirError(
            [
                Diagnostic(
                    f"{path} is an executable cut short (its headers name bytes past its "
                    "end: a full disk, a copy stopped halfway); build it again with "
                    "`dhir compile`"
                )
            ]
        )
    if options.threads is None:
        threads = plan.threads if plan is not None else options.threads_per_rank()
        options = replace(options, threads=threads)
    traffic = None
    if timing is not None:
        timing.notes += _build_report(path, built)
        traffic = timing.notes
    with (timing if timing is not None else Timing()).stage("run"):
        results = run_executable(
            path, signature, inputs, options, output_dir=args.output_dir, traffic=traffic
        )
    return results, signature


def _build_report(path: Path, built: Built) -> list[str]:
    """The --timing lines of the build of `path` that `dhir compile` recorded beside it
    (what dhir-split, the optimizer and dhir-time-tiles did), or a line saying that none
    were recorded."""
    if built.report is not None:
        return list(built.report)
    return [
        f"dhir: the build's report (split:, optimizer:, time tiles: lines) is not recorded "
        f"beside {path}, built by an earlier dhir compile; `dhir compile --timing` prints it, "
        "and a build by this dhir records it"
    ]


# What an executable fixed when it was built (dest names of the options given to change it).
_BUILD_OPTIONS = {
    "placement": "--placement",
    "costs": "--costs",
    "constraints": "--constraints",
    "target": "--target",
    "link": "--link",
    "libraries": "-l",
    "library_dirs": "-L",
    "cpu": "--cpu",
    "no_optimize": "--no-optimize",
    "runtime_checks": "--runtime-checks",
    "no_codedrop": "--no-codedrop",
    "gpu_fallback": "--gpu-fallback",
    "keep_build": "--keep-build",
}


def _unchangeable(path: Path, args: argparse.Namespace, built: Built) -> list[Diagnostic]:
    """Why the options given cannot apply to the executable `path` (none: they can)."""
    given = [option for name, option in _BUILD_OPTIONS.items() if getattr(args, name)]
    if args.runtime_checks == "none":
        given = ["--no-runtime-checks" if g == "--runtime-checks" else g for g in given]
    given += ["--fast-math"] if args.fast_math != "none" else []
    refused = []
    if given:
        refused.append(
            f"{' and '.join(given)} cannot change an executable, whose tasks were placed "
            "and code built and linked when it was built; give them to dhir compile, or run "
            "the .mlir program"
        )
    if args.profile is not None:  # dhir compile builds no timers into the tasks
        refused.append(
            "--profile cannot change an executable, whose tasks were built without timers; "
            "run the .mlir program with --profile"
        )
    rebuilt = {
        "-n": (args.ranks, built.ranks, f"for {_ranks(built.ranks)}"),
        "--entry": (args.entry, built.signature.name, f"to run @{built.signature.name}"),
        "--mpi": (args.mpi, built.mpi, f"with {built.mpi}"),
    }
    for option, (value, fixed, how) in rebuilt.items():
        if value is not None and value != fixed:
            refused.append(f"{path} was built {how}; rebuild it with dhir compile {option} {value}")
    return [Diagnostic(message) for message in refused]


def _ranks(count: int | None) -> str:
    return f"{count} rank" if count == 1 else f"{count} ranks"


def _check_output(source: Path, output: Path) -> None:
    """Before building: the executable must not replace the program, nor go into a
    folder (its description would go beside the folder, not beside it)."""
    if output.is_dir():
        raise DhirError([Diagnostic(f"-o {output} is a directory; name the executable's file")])
    if not output.parent.is_dir():  # said after the whole build, else
        raise DhirError(
            [
                Diagnostic(
                    f"cannot write -o {output}: there is no folder {output.parent}; make it first"
                )
            ]
        )
    if output.exists() and source.exists() and output.samefile(source):
        raise DhirError([Diagnostic(f"-o {output} is the program itself; name another file")])
    if not os.access(output.parent, os.W_OK | os.X_OK):  # read-only, or another user's
        raise DhirError(
            [
                Diagnostic(
                    f"cannot write -o {output}: the folder {output.parent} is not writable; "
                    "name a file in a folder you can write to"
                )
            ]
        )


def _install(exe: Path, destination: Path, description: dict[str, object]) -> None:
    """The executable to `destination` and its description beside it. The old description
    goes first: a new executable must never sit beside an old description, whose types
    `dhir run` would read its results with."""
    beside = sidecar(destination)
    temporary = beside.with_name(f".{beside.name}.{os.getpid()}.tmp")
    try:
        beside.unlink(missing_ok=True)
        shutil.copy2(exe, destination)
        temporary.write_text(json.dumps(description))
        os.replace(temporary, beside)
    except OSError as error:
        with suppress(OSError):  # a read-only folder refuses even this (EROFS)
            temporary.unlink(missing_ok=True)
        where = error.filename or destination
        raise DhirError([Diagnostic(f"cannot write {where}: {error.strerror}")]) from None


def _chart_file(text: str) -> Path:
    """`output_file`, named as a chart: an -o that cannot be one is a malformed command
    line, said before the trace is read (a folder: gantt() says what to name in it)."""
    chart = output_file(text)
    if chart.suffix.lower() not in CHART_FORMATS and not chart.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot draw a Gantt chart as '{chart.suffix or chart.name}': name a .png or .svg file"
        )
    return chart


def _cmd_gantt(args: argparse.Namespace) -> int:
    from dhir.placement.render import gantt
    from dhir.toolchain.trace import trace_chart

    if not args.output.is_dir():  # gantt() says what a folder is
        check_output_file(args.output)  # said after reading and drawing, else
    chart = trace_chart(args.trace)
    # The file's name as a title: bytes that are not UTF-8 shown as such (matplotlib
    # refuses Python's surrogate escapes: an internal error).
    title = os.fsencode(args.trace.name).decode(errors="replace")
    if chart.partial is not None:  # a failed run's: never to be taken for a whole one
        title += " (partial: the run failed)"
        print(f"dhir gantt: {args.trace} is a partial trace: {chart.partial}", file=sys.stderr)
    arrows = chart.arrows
    gantt(
        chart.graph,
        chart.placement,
        args.output,
        title=title,
        arrows=arrows,
        kind="as run",
        spans=chart.io,
        zoom=not args.whole,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # the command's usage, not the top level's that parse_args would show
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for dhir run's cached path
    command = {
        "run": _cmd_run,
        "compile": _cmd_compile,
        "schedule": schedule.run,
        "calibrate": calibrate.run,
        "gantt": _cmd_gantt,
        "cache": cache.run,
    }[args.command]
    quiet = getattr(args, "quiet", True)  # run, compile and schedule show a status line
    with status_line(f"dhir {args.command}", quiet):
        return guarded(lambda: command(args))


if __name__ == "__main__":
    sys.exit(main())
