"""`dhir.run` (dhir.runner.run): one call from a program and NumPy inputs to the results."""

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.traits import SymbolTable

from dhir.analysis.bounds import EntryBounds, check_bounds, check_given_bounds, open_arguments
from dhir.backends.addresses import check_addresses
from dhir.backends.element_types import check_memref_elements
from dhir.backends.function_names import check_function_names
from dhir.backends.native import OnBuilt, run_native
from dhir.backends.parallel_loops import check_copies, check_kernels, check_parallel_loops
from dhir.dialects.func import FuncOp
from dhir.ir.diagnostics import DhirError, Diagnostic, UsageError
from dhir.ir.text import parse_file, parse_string
from dhir.ir.verifier import verify_module
from dhir.ir.walk import find_ops
from dhir.machine.dlti import attach, check_description
from dhir.machine.files import read_system
from dhir.machine.layout import launch_plan
from dhir.placement.list_scheduling import DEFAULT_ALGORITHM
from dhir.toolchain.build import Timing
from dhir.toolchain.entry import entry_signature
from dhir.toolchain.entry import on_tensors as entry_on_tensors
from dhir.toolchain.linking import LinkInputs
from dhir.toolchain.options import (
    DEFAULT_CHECKS,
    DEFAULT_GPU_FALLBACK,
    DEFAULT_MPI,
    DEFAULT_RANKS,
    DEFAULT_TARGET,
    DEFAULT_TIMEOUT_S,
    RunOptions,
    check_mode,
)
from dhir.toolchain.shards import is_shard_program, partition, strip
from dhir.toolchain.signals import ending_cleanly
from dhir.toolchain.signature import DYNAMIC, INPUT, EntrySignature, clear_outputs, spare_inputs
from dhir.toolchain.tensors import bufferize, specialise
from dhir.toolchain.tools import cache_root
from dhir.toolchain.values import check_given_count, check_inputs, save_outputs, with_results
from dhir.transforms.annotate_dependences import check_annotations
from dhir.transforms.codedrop import auto_codedrop
from dhir.transforms.split_tasks import check_splits

BACKENDS = ("native", "interp")
DEFAULT_BACKEND = "native"


def load_program(program: str | os.PathLike[str] | ModuleOp) -> ModuleOp:
    """A module from a ModuleOp (verified, as text is when parsed, and copied: running
    lowers it, and the caller's stays as it was), a path to a .mlir file, or MLIR text
    (see `names_a_file`)."""
    if isinstance(program, ModuleOp):
        # One built or changed by the caller, or parsed with verify=False, may not verify:
        # the interpreter ran a function without its return, mlir-opt stopped the build.
        verify_module(program)
        return program.clone()
    if not isinstance(program, str | os.PathLike):
        hint = "; decode bytes first (program.decode())" if isinstance(program, bytes) else ""
        raise DhirError(
            [
                Diagnostic(
                    "the program must be a path (str or os.PathLike), MLIR text (str) or a "
                    f"parsed ModuleOp, not {type(program).__name__}{hint}"
                )
            ]
        )
    text = os.fspath(program)
    if not text.strip() and not os.path.exists(text):  # Path("") is the folder "."
        raise DhirError(
            [Diagnostic("the program is empty; give a .mlir file's path, MLIR text or a ModuleOp")]
        )
    if isinstance(program, os.PathLike) or names_a_file(program):
        return parse_file(Path(program))  # which says so when there is no such file
    return parse_string(program)


# Every MLIR program with a function has some: `func.func @main(%a: ...) {`.
_MLIR_MARKS = frozenset('{(%@"')


def names_a_file(program: str) -> bool:
    """Whether a str given as the program is a file's path rather than MLIR text: one line
    that names an existing file, ends in .mlir (no MLIR text does), or has none of the
    characters every MLIR program with a function has. A missing file is then an error
    that says so, not a parse error on its name."""
    if "\n" in program:
        return False
    text = program.strip()
    return os.path.isfile(program) or text.endswith(".mlir") or not _MLIR_MARKS & set(text)


def run(
    program: str | os.PathLike[str] | ModuleOp,
    *args: object,
    entry: str = "main",
    ranks: int | None = None,  # as `dhir run`'s -n: 1, or the count `system` describes
    backend: str = DEFAULT_BACKEND,
    mpi: str = DEFAULT_MPI,
    timeout: float = DEFAULT_TIMEOUT_S,
    output_dir: str | Path | None = None,
    threads: int | None = None,
    placement: str | None = None,  # None: DEFAULT_ALGORITHM
    costs: str | Path | None = None,
    profile: str | Path | None = None,
    gpu_fallback: str = DEFAULT_GPU_FALLBACK,
    codedrop: bool = True,
    target: str = DEFAULT_TARGET,
    link: Sequence[str | os.PathLike[str]] = (),
    cpu: str | None = None,
    optimize: bool = True,
    fast_math: str = "none",
    runtime_checks: bool | str = DEFAULT_CHECKS,
    trace: str | Path | None = None,
    keep_build: str | Path | None = None,
    constraints: str | Path | None = None,
    system: str | Path | None = None,
) -> list[np.ndarray]:
    """Run `entry` of `program` on `args` (NumPy arrays for memrefs, numbers for
    scalars); return one array per argument: the final contents of each memref, a
    0-d array for each scalar. The inputs themselves are not modified. `threads`: OpenMP
    threads per rank for parallel loops (native; default: the cores divided among ranks).
    Native only: `placement` picks the ranks' tasks (round-robin, heft, peft, best), with
    the measured task times of the profile `costs`; `profile` names a file to write the
    measured time of every task to (see docs/costs.md). `gpu_fallback="cpu"` runs GPU
    tasks written as loops on the CPU (native; see docs/gpu.md). An entry without a
    `dhir.schedule` goes through CodeDrop first (native; `codedrop=False` runs it as
    written), its tasks bound to `target` (an arch, cpu, gpu or any). SIGTERM or SIGHUP
    during the call stop every process of the run first, then take their usual effect.
    `link` (native): object files, static and shared libraries, `-lNAME` and `-LDIR`, as a
    C compiler takes them, linked for tasks that call their functions (docs/commands.md,
    "Calling your own code"). `cpu` (native): the CPU to build for, clang's -march name or
    "native" (default: this machine's; docs/machine.md); `optimize=False` builds task
    bodies as written (no dhir-optimize-bodies); `fast_math` (native): the floating-point
    relaxations the program allows, "contract", "reassoc" or "fast" (see dhir-fast-math;
    the interpreter stays exact). `runtime_checks` (native): which memref accesses are
    checked as they run, so that one out of its memref stops the run with a DhirError at
    its line, as the interpreter always does: "undecided" (the default) those whose
    subscripts dhir does not prove in bounds (and every cast to a static size, and linalg
    op, of run-time sizes), "all" (or True) every access, cast and view, "none" none
    (docs/commands.md, "Runtime checks").
    `trace` (native): a file to write a Chrome trace of the
    run to (each rank's tasks, messages, input reads and result writes; see
    docs/commands.md, "Seeing a run"). `keep_build` (native): a folder to copy what the
    build made into (lowered MLIR, LLVM IR, the harness, the executable). `constraints`
    (native): a TOML or JSON file of placement constraints, `[[pin]]`, `[[apart]]` and
    `[[together]]` (docs/commands.md, "Steering placement"). `system` (native): a machine
    description, TOML or JSON, that placement and the cost models read and whose ranks
    the run takes, laid out on its nodes (`dhir run --system`; docs/machine.md); `ranks`,
    if given, must be their count, and `threads` defaults to its cores per rank. Bad options
    are refused before any work (see RunOptions), as are, with `backend="interp"`, the
    native ones it would ignore (`_check_nothing_placed`, `_check_native_only`)."""
    if not isinstance(entry, str):  # None would reach xDSL's symbol lookup as a bare error
        raise DhirError(
            [Diagnostic(f"entry takes a function's name (str), not {type(entry).__name__}")]
        )
    check_backend(backend)
    description = _path(system, "system")
    options = RunOptions(
        ranks=ranks if ranks is not None else DEFAULT_RANKS,
        mpi=mpi,
        timeout=timeout,
        threads=threads,
        placement=placement if placement is not None else DEFAULT_ALGORITHM,
        costs=_path(costs, "costs"),
        profile=_path(profile, "profile"),
        gpu_fallback=gpu_fallback,
        codedrop=codedrop,
        target=target,
        link=LinkInputs.from_words(_link_words(link)),
        cpu=cpu,
        optimize=optimize,
        fast_math=fast_math,
        runtime_checks=check_mode(runtime_checks),
        trace=_path(trace, "trace"),
        keep_build=_path(keep_build, "keep_build"),
        constraints=_path(constraints, "constraints"),
    )
    if backend == "interp":  # before `output_dir`'s last results are removed
        _check_nothing_placed(options, placement is not None, description is not None)
        _check_native_only(options)
    with ending_cleanly(redeliver=True):
        module = load_program(program)
        if description is not None:
            options = _on_system(module, description, ranks, options)
        return run_module(
            module,
            entry,
            list(args),
            backend,
            options,
            output_dir=_path(output_dir, "output_dir"),
        )


def check_backend(backend: object) -> None:
    """A DhirError unless `backend` names one: before the run's other work, which with
    `output_dir` removes the last run's results there."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise DhirError(
            [Diagnostic(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")]
        )


def _path(value: object, name: str) -> Path | None:
    """A path keyword of `run` as a Path; a DhirError for a value of another type, which
    Path() would report as a bare TypeError, and for "", which Path() reads as the
    current folder (`output_dir=""` wrote the results there)."""
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise DhirError(
            [Diagnostic(f"{name} takes a path (str or os.PathLike), not {type(value).__name__}")]
        )
    if not os.fspath(value):
        raise DhirError([Diagnostic(f"{name} is an empty path; name a file or folder")])
    return Path(value)


def _link_words(link: object) -> list[str | os.PathLike[str]]:
    """`link` as a list of words; a lone str is refused, not read one character a word."""
    wanted = 'link takes a list of words as a C compiler does (["rows.o", "-lm", "-L/opt/lib"])'
    if isinstance(link, str | os.PathLike):
        raise DhirError([Diagnostic(f"{wanted}, not a single path: give link=[{link!r}]")])
    if not isinstance(link, Iterable):
        raise DhirError([Diagnostic(f"{wanted}; got {type(link).__name__} (give () for none)")])
    words = list(link)  # pyright: ignore[reportUnknownArgumentType]
    for word in words:
        if not isinstance(word, str | os.PathLike):
            raise DhirError([Diagnostic(f"{wanted}; got a word {word!r}, not a str or path")])
    return words


def _check_native_only(options: RunOptions) -> None:
    """Refuse what the interpreter would ignore, named as `run`'s keywords: a path, or a
    value other than the default (`dhir run` refuses the flag given at all)."""
    native_only = {
        "profile": (options.profile, "a profile times tasks on MPI ranks"),
        "trace": (options.trace, "a trace records what MPI ranks did"),
        "constraints": (options.constraints, "constraints steer placement on MPI ranks"),
        "keep_build": (options.keep_build, "the interpreter builds nothing to keep"),
        "threads": (
            options.threads is not None,
            "OpenMP threads run a rank's parallel loops, and the interpreter runs them one "
            "iteration at a time",
        ),
        "cpu": (options.cpu is not None, "the interpreter builds no code for a CPU"),
        "mpi": (options.mpi != DEFAULT_MPI, "the interpreter runs no MPI"),
        "gpu_fallback": (
            options.gpu_fallback != DEFAULT_GPU_FALLBACK,
            "the interpreter runs every task, GPU tasks too, itself",
        ),
        "target": (
            options.target != DEFAULT_TARGET,
            "the target binds the tasks CodeDrop makes, and the interpreter runs the entry "
            "as written",
        ),
    }
    for name, (value, why) in native_only.items():
        if value:
            raise UsageError(
                [Diagnostic(f"{name}: {why} (backend 'interp'); use it with the native backend")]
            )


def _on_system(module: ModuleOp, path: Path, ranks: int | None, options: RunOptions) -> RunOptions:
    """`options` for a run on the machine description at `path`, which is attached to
    `module` for placement and the cost models, as `dhir run --system` does: its ranks,
    their hostfile, and its cores per rank unless `threads` was given."""
    check_description(module)  # the program's own, before the file's replaces it
    described = read_system(path)
    plan = launch_plan(described, ranks, options.mpi, cache_root(), str(path))
    attach(module, plan.system, str(path))
    threads = options.threads if options.threads is not None else plan.threads
    return replace(options, ranks=plan.ranks, threads=threads, hostfile=plan.hostfile)


def _check_nothing_placed(
    options: RunOptions, placement_given: bool = False, system_given: bool = False
) -> None:
    """Refuse placement options on the interpreter, as `dhir run` does: it would ignore them.
    `placement_given`: whether the caller named a placement, the default one included;
    `system_given`: whether a machine description was given."""
    placing = [
        name
        for name, given in (
            ("placement", placement_given or options.placement != DEFAULT_ALGORITHM),
            ("costs", options.costs is not None),
            ("system", system_given),
        )
        if given
    ]
    if placing:
        raise UsageError(
            [
                Diagnostic(
                    "the interpreter places no task (it runs them in program order): "
                    f"{' and '.join(placing)} {'needs' if len(placing) == 1 else 'need'} "
                    "the native backend"
                )
            ]
        )


def drop_code(module: ModuleOp, entry: str, options: RunOptions | None = None) -> str | None:
    """CodeDrop on an entry without schedules (dhir-codedrop) as `options` say, saying so
    on stderr; the line said, if any."""
    options = options if options is not None else RunOptions()
    if not options.codedrop:
        if options.target != DEFAULT_TARGET:
            raise UsageError(
                [
                    Diagnostic(
                        f"the target {options.target} is for the tasks CodeDrop makes, and "
                        "--no-codedrop (codedrop=False) makes none: drop one of the two"
                    )
                ]
            )
        return None
    line = auto_codedrop(module, entry, options.target)
    if line is not None:
        print(line, file=sys.stderr)
    return line


def check_runnable(module: ModuleOp, entry: str) -> EntryBounds:
    """Refuse, at its line, what neither backend runs as the program means it: a
    function named as dhir's own or MPI's, memrefs of memrefs, parallel loops whose
    iterations overlap, GPU kernels whose threads race,
    copies between overlapping views, addresses passed to C from another task, a machine
    description that cannot stand, dhir-annotate-dependences' marks written on a task
    (which dhir would not read), a load or store of `entry` that surely runs out of its
    memref's bounds.
    `dhir run`, `dhir.run` and `dhir compile` check alike. The accesses of `entry` found
    surely run (`entry_bounds`), which `entry_signature` takes (`bounds`) while the
    module is this one (see `run_module`)."""
    check_description(module)
    ops = find_ops(module, Operation)  # one walk for the checks, which change nothing
    check_annotations(ops)
    check_function_names(module, ops)
    check_memref_elements(module, ops)
    check_parallel_loops(module, ops)
    check_kernels(module, ops)
    check_copies(module, ops)
    check_addresses(module, ops)
    return check_bounds(module, entry)


def check_inputs_bounds(
    module: ModuleOp, entry: str, signature: EntrySignature, inputs: list[object]
) -> bool:
    """Refuse, at its line, an access that surely runs outside its memref with these
    inputs: loops bounded by an argument's extent or a scalar argument are then known
    exactly (`given_bounds`). Nothing is walked again for an entry whose arguments
    decide no bound (`open_arguments`); inputs that do not fit the signature are refused
    as `check_inputs` says, first. Whether the inputs were walked with."""
    open_ = open_arguments(module, entry)
    if not open_:
        return False
    arrays = check_inputs(signature, inputs, copy=False)
    given = {spec.index: (spec, array) for spec, array in zip(signature.args, arrays, strict=True)}
    # Every extent given: an argument that bounds no loop may be the one written past.
    shapes = {
        k: array.shape
        for k, (spec, array) in given.items()
        if spec.is_memref and spec.shape is not None and DYNAMIC in spec.shape
    }
    scalars = {k: int(given[k][1]) for k in open_ if not given[k][0].is_memref}
    check_given_bounds(module, entry, shapes, scalars)
    return True


def run_module(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    backend: str = DEFAULT_BACKEND,
    options: RunOptions | None = None,
    *,
    output_dir: Path | None = None,
    timing: Timing | None = None,
    on_built: OnBuilt | None = None,
) -> list[np.ndarray]:
    """Run `module` on the chosen backend, as `options` say: what `dhir.run` and `dhir
    run` share. One array per argument of the entry as built (its signature's), that is,
    for an entry on tensors, its arguments as given and then its results. Rank 0's results
    are written to `output_dir` (argK.npy, resK.npy) when given. After a native run,
    `on_built` is told the executable, its signature and how it was run."""
    check_backend(backend)
    options = options if options is not None else RunOptions()
    with (timing if timing is not None else Timing()).stage("checks"):
        bounds: EntryBounds | None = check_runnable(module, entry)
        if backend == "interp":  # the native build refuses them in dhir-split
            check_splits(module)
    tensors = on_tensors(module, entry)
    if tensors:  # arguments of dynamic shape take their inputs'
        # First: a wrong count, shape or dtype is said with the types as written, not as
        # specialised (an input that fits no shape left the result's shape unknown).
        given = entry_signature(module, entry, given_only=True, bounds=bounds)
        check_given_count(given, inputs)
        check_inputs(given, inputs, copy=False)
        module = specialise(module, entry, inputs)
        bounds = None  # a module of other shapes
    signature = entry_signature(module, entry, bounds=bounds)
    # The interpreter and --runtime-checks check each access as it runs.
    if not tensors and backend == "native" and not options.all_checks:
        with (timing if timing is not None else Timing()).stage("checks"):
            if check_inputs_bounds(module, entry, signature, inputs):
                # Other inputs must be checked again: not for `dhir run`'s cached path,
                # which runs the executable without the program.
                on_built = None
    if output_dir is not None:
        spare_inputs(_mapped_files(inputs), output_dir)
        # Before building too: a build that fails leaves no earlier results behind.
        clear_outputs(signature, output_dir)
    sharded = is_shard_program(module)
    if sharded and backend == "interp":
        module = strip(module)  # what the shardings distribute, run whole
        bounds = None
    elif sharded and not on_tensors(module, entry):
        module = partition(module, entry, options.ranks)  # a program per device on memrefs
        bounds = None
    if on_tensors(module, entry):
        module = bufferize(module, entry, options.ranks)
        # Checked against the entry as written, so errors name its tensor types; not
        # copied: each backend copies what it writes into.
        with_zeros = with_results(signature, inputs)
        full: list[object] = list(check_inputs(signature, with_zeros, copy=False))
        _check_bufferized_bounds(module, entry, full, backend, options, sharded)
        # Where the results go: the interpreter checks that the entry writes all of them.
        places = {spec.index: spec.result for spec in signature.args if spec.result is not None}
        results = _run_on(module, entry, full, backend, options, None, timing, None, None, places)
        # Tensors are values: an argument comes back as it was given.
        results = [
            np.array(given) if spec.role == INPUT else result
            for spec, given, result in zip(signature.args, full, results, strict=True)
        ]
        if output_dir is not None:
            save_outputs(results, signature, output_dir)
        return results
    return _run_on(module, entry, inputs, backend, options, output_dir, timing, on_built, bounds)


def _check_bufferized_bounds(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    backend: str,
    options: RunOptions,
    sharded: bool,
) -> None:
    """Refuse, at its line, an access of the bufferized entry `module` that surely runs
    out of bounds (a `tensor.extract` past its input's extent, a slice past it at an
    index a scalar argument gives), as a program on memrefs is refused: before the build, on both
    backends; with these `inputs` (all of the bufferized entry's arguments) too where
    native code runs unchecked, but for a shard program (`sharded`), whose entry takes a
    device's shards of them. The tensor entry was checked before it had buffers."""
    check_bounds(module, entry)
    if backend == "native" and not options.all_checks and not sharded:
        check_inputs_bounds(module, entry, entry_signature(module, entry), inputs)


def _mapped_files(inputs: list[object]) -> list[Path]:
    """The files inputs are memory-mapped from (`np.load(path, mmap_mode="r")`): where one
    is a result of the last run into the output directory, it is the caller's input now."""
    return [Path(a.filename) for a in inputs if isinstance(a, np.memmap) and a.filename]


def on_tensors(module: ModuleOp, entry: str) -> bool:
    """Whether the entry `entry` of `module` takes or returns tensors."""
    function = SymbolTable.lookup_symbol(module, entry)
    return isinstance(function, FuncOp) and entry_on_tensors(function)


def _run_on(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    backend: str,
    options: RunOptions,
    output_dir: Path | None,
    timing: Timing | None,
    on_built: OnBuilt | None,
    bounds: EntryBounds | None = None,
    results: Mapping[int, int] | None = None,
) -> list[np.ndarray]:
    """The run on `backend`; `bounds`: `check_runnable`'s, found on this module (None:
    found anew); `results`: which arguments are an entry on tensors' results
    (run_interp's)."""
    if backend == "interp":
        _check_nothing_placed(options)
        _check_native_only(options)
        # Here, not at the top: a native build or run never loads the interpreter (and
        # xDSL's interpreters under it), a third of `dhir compile`'s imports.
        from dhir.backends.interp import run_interp

        # A stage of the caller's --timing report, and the terminal's status line.
        with (timing if timing is not None else Timing()).stage("the interpreter"):
            arrays = run_interp(
                module, entry, inputs, options.timeout, options.link, results, bounds
            )
        if output_dir is not None:
            save_outputs(arrays, entry_signature(module, entry, bounds=bounds), output_dir)
        return arrays
    # The native backend (run_module checked the name). CodeDrop moves the entry's ops
    # into tasks run once in order: the same loads and stores surely run at the same
    # subscripts, so `bounds` stays the module's.
    said = drop_code(module, entry, options)
    notes = () if said is None else (said,)  # for `dhir run`'s cached path to say again
    return run_native(module, entry, inputs, options, output_dir, timing, on_built, bounds, notes)
