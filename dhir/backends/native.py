"""The native backend: place, lower to MPI, build with LLVM 22, run under mpirun."""

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute
from xdsl.passes import ModulePass, PassPipeline
from xdsl.traits import SymbolTable

from dhir.analysis.bounds import EntryBounds
from dhir.analysis.footprint import Whole, memref_name
from dhir.analysis.handoff import handing_over
from dhir.analysis.partition import Partition, Rows
from dhir.analysis.threads import forget_threads, openmp_safe, runs_on_threads
from dhir.api import diagnosed, run_found, run_pipeline
from dhir.backends.function_names import check_linked_callers
from dhir.backends.parallel_loops import mark_unproven_loops
from dhir.dialects import func, memref
from dhir.dialects.dhir import TargetOp, TaskOp, walk_outside_tasks
from dhir.ir.collections import fewer_collections
from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc, error_at, loc_of
from dhir.ir.tasks import is_gpu_task, names_kept, rank_of, task_ids, task_label
from dhir.ir.text import print_module
from dhir.ir.walk import enclosing, find_ops
from dhir.machine.dlti import SYSTEM_ATTR, at_description, device_key_loc, system_of
from dhir.placement.constraints import read_constraints
from dhir.targets import host_arch
from dhir.toolchain.build import (
    Callers,
    EarlyRuntime,
    Timing,
    build_executable,
    keep_build,
    start_builds,
)
from dhir.toolchain.cpu import DeviceKeyError, cpu_facts, cpu_for
from dhir.toolchain.entry import entry_signature
from dhir.toolchain.gpu import gpu_build
from dhir.toolchain.harness import generate_harness
from dhir.toolchain.launch import run_executable
from dhir.toolchain.linking import C_INTERFACE, blas_library, entry_clash
from dhir.toolchain.options import RunOptions, check_runtime_environment, check_written_files
from dhir.toolchain.rank_splits import RankSplits
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.split import StepPieces, piece_count, unmark_steps
from dhir.toolchain.tools import find_llvm_tools
from dhir.toolchain.values import check_inputs
from dhir.transforms.accurate_math import AccurateMathPass
from dhir.transforms.agree_calls import AgreeCallsPass
from dhir.transforms.alloc_sizes import AllocSizesPass
from dhir.transforms.assert_locations import AssertLocationsPass
from dhir.transforms.blas import SYMBOLS
from dhir.transforms.blocked_nests import forget_blocked
from dhir.transforms.bounds_checks import BoundsChecksPass
from dhir.transforms.c_abi import CAbiPass
from dhir.transforms.cast_checks import CastChecksPass, CastSizesPass
from dhir.transforms.check_mpi import CheckMpiPass
from dhir.transforms.copy_checks import CopyChecksPass, refuse_undecided_gpu_copies
from dhir.transforms.endless_loops import EndlessLoopsPass
from dhir.transforms.fast_math import relax
from dhir.transforms.float_atomics import FloatAtomicsPass
from dhir.transforms.gpu_data import GpuDataPass
from dhir.transforms.gpu_kernels import GpuKernelsPass
from dhir.transforms.gpu_row_copies import GpuRowCopiesPass
from dhir.transforms.host_prints import HostPrintsPass
from dhir.transforms.instrument import InstrumentPass, ProfileRecorder, recording
from dhir.transforms.linalg_sizes import LinalgSizesPass
from dhir.transforms.loop_steps import LoopStepsPass
from dhir.transforms.lower_to_mpi import BANDS, WHOLE, LowerToMPIPass, part_count
from dhir.transforms.mlir22_workarounds import Mlir22WorkaroundsPass
from dhir.transforms.openmp_reductions import OpenMPReductionsPass
from dhir.transforms.optimize_bodies import decision_lines, optimize_bodies
from dhir.transforms.packed_vectors import PackedVectorsPass
from dhir.transforms.place import PlacePass, attach_constraints
from dhir.transforms.serial_loops import SerialLoopsPass
from dhir.transforms.shard_collectives import SHARD_BANDS
from dhir.transforms.split_tasks import SplitPlan
from dhir.transforms.track_tasks import TrackTasksPass, task_table
from dhir.transforms.user_names import UserNamesPass, user_functions
from dhir.transforms.vector_checks import VectorChecksPass
from dhir.transforms.vector_rows import VectorRowsPass
from dhir.transforms.wrap_checks import WrapChecksPass


@fewer_collections()
def compile_native(
    module: ModuleOp,
    entry: str = "main",
    options: RunOptions | None = None,
    timing: Timing | None = None,
    profile: ProfileRecorder | None = None,
    bounds: EntryBounds | None = None,
) -> tuple[Path, EntrySignature]:
    """Build an executable for `options.ranks` ranks of `options.mpi`; `module` is
    lowered in place. Parallel loops run on OpenMP threads (see dhir.analysis.threads). Tasks are
    placed by `options.placement` (see dhir-place), with measured task times from the
    profile `options.costs`. With a `profile` recorder, every task is timed (see
    dhir-instrument) and the recorder learns the names of the tasks as they were
    numbered: after dhir-split, pieces by their own names. GPU tasks run on the ranks'
    GPUs (see docs/gpu.md); with `options.gpu_fallback="cpu"`, those written as loops run
    on the CPU. Floating-point ops take the relaxations `options.fast_math` allows
    (dhir-fast-math). `bounds`: `check_runnable`'s, found on `module` as given or before
    CodeDrop (None: found anew)."""
    options = _with_cpu(module, options if options is not None else RunOptions())
    options.link.check_names()  # a linked file defining libc's `write`: before any work
    _check_entry_name(module, entry)
    check_linked_callers(module, entry, options.link)
    ranks, costs = options.ranks, options.costs
    timing = timing if timing is not None else Timing()
    relax(module, options.fast_math)
    if options.constraints is not None:
        attach_constraints(module, read_constraints(options.constraints))
    # Fast-math flags and constraints change no load or store: `bounds` still holds.
    signature = entry_signature(module, entry, bounds=bounds)
    plan = SplitPlan() if timing.reported else None  # found only to be printed
    splits = RankSplits(ranks, plan, timing)
    splits.devices(module, split=not options.cpu_fallback)
    on_gpu = _check_targets(module, options.cpu_fallback)
    # Before the kernels are made, at the user's lines: no check can run in GPU code.
    refuse_undecided_gpu_copies(module, entry)
    _check_wide_integers(module)
    _mark_entry(module, entry)
    names = user_functions(module, entry)
    gpu = None
    if on_gpu:
        with timing.stage("GPU loops to kernels"):
            run_pipeline(
                module,
                PassPipeline((GpuKernelsPass(str(find_llvm_tools().mlir_opt)),)),
                verify_each=False,
            )
            gpu = gpu_build(module)
    openmp = openmp_safe(module)
    # Marked before the optimizer and the time tiles change the loops; noted once the
    # decision is final (below).
    in_order = mark_unproven_loops(module) if openmp else []
    runtime = EarlyRuntime(options, openmp)
    callers = external_callers(module)
    # Not re-verified after each pass: that would cost more than the passes, and
    # mlir-opt-22 verifies the lowered module in full next (dhir-opt and the lit tests
    # verify after every pass).
    place = PlacePass(ranks, options.placement, str(costs) if costs is not None else None, entry)
    timed = (InstrumentPass(),) if profile is not None else ()
    data = (GpuDataPass(ranks, entry),) if gpu is not None else ()
    lower = LowerToMPIPass(ranks, options.mpi, entry, partition=True)
    # dhir-place's task facts stay right for dhir-lower-to-mpi when only dhir-instrument,
    # dhir-track-tasks, the optimizer and dhir-gpu-data run between the two: the calls the
    # first two add take no memref, the third reads and writes the same elements, so none
    # changes a task's effects or regions, and the fourth drops the facts of the GPU tasks
    # it gives copies. (Before dhir-place, they would hide a loop nest's reuse from the cost model.)
    track = TrackTasksPass()  # so that a rank that dies can be named with its task
    with handing_over():
        # dhir-split before placement, so that it places the pieces.
        assert options.cpu is not None
        bits = cpu_facts(find_llvm_tools().clang, options.cpu).vector_bits
        tiled = splits.tasks(module, tiles=options.optimize, safe=openmp, vector_bits=bits)
        timing.notes += [f"time tiles: {line}" for line in decision_lines(tiled)]
        # The passes in between change attributes and task bodies only: the tasks'
        # names are found once for the plan and the three passes.
        with timing.stage("dhir passes"), names_kept():
            if plan is not None:
                plan.name(task_ids(module))
            agree = AgreeCallsPass(entry, ranks)
            prints = HostPrintsPass(entry, ranks)
            passes = (agree, prints, place, *timed, track)
            run_pipeline(module, PassPipeline(passes), verify_each=False)
            tasks = task_table(module)
            ranked = _with_ranks(tasks, module)
        if plan is not None:
            timing.notes += [f"split: {line}" for line in plan.lines()]
        if options.optimize:
            options = _optimize(module, options, timing)
        if openmp and not runs_on_threads(module):
            # Decided after the time tiles, with the optimizer in view, as the cost
            # model and dhir-split timed the tasks (dhir.analysis.threads): the linalg
            # ops that made it say yes are loops now (a time-tiled sweep, a contraction
            # and its fills), built as their loops written by hand are, without OpenMP.
            openmp, runtime = False, EarlyRuntime(options, False)
        forget_threads(module)
        forget_blocked(module)
        timing.notes += in_order if openmp else []
        after = _after_passes(options, openmp, gpu is not None, names, entry)
        if profile is not None:
            profile.name_tasks(tasks)
        # GPU builds stay whole: their kernels' module is compiled with the host code.
        steps = part_count(len(tasks))
        count = piece_count(steps, os.cpu_count() or 1) if gpu is None else 1
        if count >= 2:
            build = _Build(options, signature, timing, openmp, runtime, ranked, callers)
            # A piece holds steps, not the entry, whose name the checks would not find.
            pieces = _after_passes(options, openmp, gpu is not None, names)
            lowered = build.lowering(module, lower, (pieces, after), -(-steps // count))
            return lowered, signature
        with timing.stage("dhir passes"):
            run_pipeline(module, PassPipeline((*data, lower)), verify_each=False)
            run_found(module, after)
            bands = _take_bands(module, entry, ranks, timing)
    with timing.stage("print"):
        text = print_module(module, debuginfo=options.all_checks)
    exe = build_executable(
        text,
        signature,
        options,
        timing=timing,
        openmp=openmp,
        gpu=gpu,
        tasks=ranked,
        bands=bands,
        mpi_checked=True,
        early_runtime=runtime,
        callers=callers,
    )
    return exe, signature


def _with_ranks(table: list[str], module: ModuleOp) -> list[str]:
    """dhir-track-tasks' `table` with each task's rank added as a last field, for the
    launcher to tell a rank that runs no task from one before its first (the table as
    it is where a task has no rank)."""
    ranks = [rank_of(task) for task in task_ids(module)]
    if len(ranks) != len(table) or None in ranks:
        return table
    return [f"{line}\t{rank}" for line, rank in zip(table, ranks, strict=True)]


def _after_passes(
    options: RunOptions,
    openmp: bool,
    kernels: bool,
    names: frozenset[str],
    entry: str | None = None,
) -> tuple[ModulePass, ...]:
    """The passes after dhir-lower-to-mpi, in their order (`kernels`: the build has GPU
    kernels): what mlir-opt-22 does not lower, or would lower wrongly, and the runtime
    checks the options ask for, whose failures name `entry`'s arguments (None: a module
    without the entry, named `main` if it has one)."""
    # Parallel loops that reach MPI or the runtime, or reduce in a way OpenMP does not
    # know, run sequentially.
    threaded = (OpenMPReductionsPass(), SerialLoopsPass()) if openmp else ()
    rows = VectorRowsPass()  # n-D vector.load/store, which mlir-opt does not lower
    # Last: what MLIR 22 would lower wrongly or not at all is refused at its op.
    copies = (GpuRowCopiesPass(),) if kernels else ()
    # MLIR 22 checks no vector access nor reinterpret_cast: these are checked here, after
    # the optimizer made its own, and before packed vectors turns some into gathers of
    # the lanes in bounds. By default only the accesses not proven in bounds are checked,
    # scalar ones after the OpenMP passes (their report calls the runtime), and the views
    # not proven inside their source (MLIR checks every subview under "all").
    modes: dict[str, tuple[ModulePass, ...]] = {
        "all": (VectorChecksPass(entry=entry), CastChecksPass(entry=entry)),
        "undecided": (
            VectorChecksPass(undecided=True, entry=entry),
            CastChecksPass(undecided=True, entry=entry),
        ),
        "none": (),
    }
    vector_checks = modes[options.runtime_checks]
    undecided = options.runtime_checks == "undecided"
    scalar_checks = (BoundsChecksPass(entry),) if undecided else ()
    # MLIR checks casts and linalg ops under "all" too, but without the sizes it found.
    sized = (CastSizesPass(entry), LinalgSizesPass(entry))
    size_checks = sized if options.runtime_checks != "none" else ()
    return (
        AssertLocationsPass(),  # first: the program's own asserts, not the checks' below
        AccurateMathPass(),
        rows,
        *vector_checks,
        PackedVectorsPass(),  # after rows: the 1-D loads and stores it makes, too
        Mlir22WorkaroundsPass(),
        FloatAtomicsPass(),
        *copies,
        *threaded,
        CopyChecksPass(),  # after too, for the same reason
        *scalar_checks,  # after, for the same reason
        *size_checks,  # after, for the same reason
        LoopStepsPass(),  # after: its calls would keep the loops around from threads
        WrapChecksPass(),  # after, for the same reason
        AllocSizesPass(),  # after, for the same reason
        EndlessLoopsPass(),  # after the checks: their calls keep a loop already
        CheckMpiPass(options.mpi),
        UserNamesPass(names),
        CAbiPass(),  # C callees rely on their callers widening i1, i8, i16
    )


@dataclass(frozen=True)
class _Build:
    """A build whose pieces LLVM builds while the rest of the program is lowered."""

    options: RunOptions
    signature: EntrySignature
    timing: Timing
    openmp: bool
    runtime: EarlyRuntime
    tasks: list[str]
    callers: Callers

    def lowering(
        self,
        module: ModuleOp,
        lower: LowerToMPIPass,
        after: tuple[Sequence[ModulePass], Sequence[ModulePass]],
        per_piece: int,
    ) -> Path:
        """The executable of `module`, lowered by `lower` and `after` (the passes for
        the pieces, then those for what is left): each run of `per_piece` parts is cut off
        as a piece (dhir.toolchain.split.StepPieces), takes its passes, and is printed and
        handed to LLVM while the rest is lowered."""
        timing = self.timing
        pieces = StepPieces(module, per_piece)
        with start_builds(self.options, timing, self.openmp, self.runtime) as builds:
            parts = lower.lower(module)
            while True:
                with timing.stage("dhir passes"), diagnosed():
                    piece = _next_piece(parts, pieces)
                    if piece is not None:
                        run_found(piece, after[0])
                if piece is None:
                    break
                with timing.stage("print"):
                    builds.add(print_module(piece, debuginfo=self.options.all_checks))
            with timing.stage("dhir passes"):
                run_found(module, after[1])
                bands = _take_bands(module, lower.entry_name, self.options.ranks, timing)
                unmark_steps(module)
            with timing.stage("print"):
                builds.add(print_module(module, debuginfo=self.options.all_checks))
            with timing.stage("harness, cache lookup"):
                harness = generate_harness(self.signature, self.options.ranks, self.tasks, bands)
            return builds.finish(harness, self.callers)


# Told, after a run, the executable, its signature, the options it ran with and the notes
# the run printed before the build (CodeDrop's), which a run from the cache prints again.
OnBuilt = Callable[[Path, EntrySignature, RunOptions, tuple[str, ...]], None]


def external_callers(module: ModuleOp) -> Callers:
    """Where `module` first calls each function it declares without a body, and in which
    task (by the name a profile gives it)."""
    declared = {
        op.sym_name.data
        for op in module.body.block.ops
        if isinstance(op, func.FuncOp) and op.is_declaration
    }
    callers: dict[str, tuple[SourceLoc | None, str | None]] = {}
    if not declared:
        return callers  # no walk (a large schedule's costs 50 ms)
    names: dict[TaskOp, str] = {}
    for call in find_ops(module, func.CallOp):
        name = call.callee.string_value()
        if name in declared and name not in callers:
            task = enclosing(call, TaskOp)
            if task is not None and not names:
                names = task_ids(module)
            callers[name] = (loc_of(call), names.get(task) if task is not None else None)
    return callers


def _next_piece(parts: Iterator[func.FuncOp], pieces: StepPieces) -> ModuleOp | None:
    """The next piece `pieces` cuts off as `parts` come; the parts left once they end."""
    for part in parts:
        piece = pieces.add(part)
        if piece is not None:
            return piece
    return pieces.flush()


def _take_bands(
    module: ModuleOp, entry: str, ranks: int, timing: Timing
) -> dict[int, tuple[Rows, ...]]:
    """The rows each rank holds of each partitioned memref argument, from the entry's
    `dhir.bands` (dhir-lower-to-mpi), which leaves the module; what stayed whole and why
    goes to `timing`'s notes (`--timing`)."""
    function = SymbolTable.lookup_symbol(module, entry)
    assert isinstance(function, func.FuncOp)
    bands = _read_bands(function.attributes.pop(BANDS, None))
    whole_attr = function.attributes.pop(WHOLE, None)
    whole = {}
    if isinstance(whole_attr, DictionaryAttr):
        pairs = whole_attr.data.items()
        whole = {int(k): Whole(v.data) for k, v in pairs if isinstance(v, StringAttr)}
    # A shard program's arguments sliced by rows (dhir.toolchain.shards): each rank loads
    # the rows of its device's shard. Results no rank holds: each writes its shard.
    shards = _read_bands(function.attributes.pop(SHARD_BANDS, None))
    for k, rows in shards.items():
        bands[k] = rows
        whole.pop(k, None)
    names = {a.index: memref_name(a) for a in function.body.blocks[0].args}
    written = {k for k, rows in shards.items() if not any(rows)}
    found = Partition(ranks, {k: v for k, v in bands.items() if k not in written}, whole)
    timing.notes += [f"memory: {line}" for line in found.lines(names)]
    timing.notes += [
        f"memory: {names.get(k, f'arg{k}')}: held by no rank, each reads or writes its shard"
        for k in sorted(written)
    ]
    return bands


def _read_bands(attr: Attribute | None) -> dict[int, tuple[Rows, ...]]:
    """Bands as `dhir.bands` holds them: argument position to each rank's row ranges."""
    bands: dict[int, tuple[Rows, ...]] = {}
    if isinstance(attr, DictionaryAttr):
        for key, per_rank in attr.data.items():
            assert isinstance(per_rank, ArrayAttr)
            arrays = cast(tuple[DenseArrayBase[IntegerType], ...], per_rank.data)
            bands[int(key)] = tuple(_pairs(array) for array in arrays)
    return bands


def _pairs(array: DenseArrayBase[IntegerType]) -> Rows:
    words = list(array.iter_values())
    return tuple(zip(words[::2], words[1::2], strict=True))


def run_native(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    options: RunOptions | None = None,
    output_dir: Path | None = None,
    timing: Timing | None = None,
    on_built: OnBuilt | None = None,
    bounds: EntryBounds | None = None,
    notes: tuple[str, ...] = (),
) -> list[np.ndarray]:
    """Build (or reuse) and run, as `options` say (see compile_native and
    run_executable), with `options.threads_per_rank()` threads per rank for parallel
    loops; `options.profile`: write the measured time of every task there (see
    dhir-instrument). After the run, `on_built` (if given) is told the executable, its
    signature, the options it ran with and `notes`, the lines the caller printed about
    the program. `bounds`: as compile_native takes them."""
    options = options if options is not None else RunOptions()
    reporting = timing is not None  # `dhir run --timing` also prints each rank's traffic
    timing = timing if timing is not None else Timing()
    signature = entry_signature(module, entry, bounds=bounds)
    arrays = check_inputs(signature, inputs, copy=False)  # saved to files, not written
    check_written_files(options)
    check_runtime_environment()
    profile = options.profile
    recorder = ProfileRecorder(module, options.ranks, profile) if profile is not None else None
    exe, signature = compile_native(module, entry, options, timing, recorder, bounds)
    if options.keep_build is not None:
        keep_build(exe, options.keep_build)
    threaded = replace(options, threads=options.threads_per_rank())
    with timing.stage("run"), recording(recorder):
        results = run_executable(
            exe,
            signature,
            arrays,
            threaded,
            output_dir=output_dir,
            traffic=timing.notes if reporting else None,
        )
    if on_built is not None:
        on_built(exe, signature, threaded, notes)
    return results


def _optimize(module: ModuleOp, options: RunOptions, timing: Timing) -> RunOptions:
    """dhir-optimize-bodies for the CPU the code is built for, its decisions noted for
    --timing; `options` with OpenBLAS linked where it made calls to it. Between dhir-place
    and the lowering: it changes no task's effects or regions (the same elements read and
    written; a BLAS call's addresses count as reaching all of its memrefs), so placement's
    facts stay right."""
    assert options.cpu is not None
    bits = cpu_facts(find_llvm_tools().clang, options.cpu).vector_bits
    with timing.stage("dhir optimizer"):
        decisions = optimize_bodies(module, bits)
    timing.notes += [f"optimizer: {line}" for line in decision_lines(decisions)]
    if any(SymbolTable.lookup_symbol(module, symbol) for symbol in SYMBOLS):
        link = options.link
        options = replace(options, link=replace(link, files=(*link.files, blas_library())))
    return options


def _with_cpu(module: ModuleOp, options: RunOptions) -> RunOptions:
    """`options` with the CPU to build for: the one given, or the machine description's in
    `module`, or this machine's."""
    clang = find_llvm_tools().clang
    if options.cpu is not None:
        cpu_facts(clang, options.cpu)  # a CPU clang does not know stops here
        return options
    if SYSTEM_ATTR not in module.attributes:
        return replace(options, cpu=cpu_for(None))
    # What is wrong with the description's CPUs is reported at the description: at the
    # key of the device at fault in the file it was read from.
    with at_description(module):
        system = system_of(module)
        try:
            cpu = cpu_for(system)
        except DeviceKeyError as error:
            raise _at_key(module, error, error.device, error.key) from None
        try:
            cpu_facts(clang, cpu)
        except DhirError as error:
            named = [d.name for node in system.nodes for d in node.devices if d.cpu == cpu]
            if not named:  # this machine's CPU or the arch's baseline: no device's key
                raise
            raise _at_key(module, error, named[0], "cpu", f"device '{named[0]}': ") from None
    return replace(options, cpu=cpu)


def _at_key(
    module: ModuleOp, error: DhirError, device: str, key: str, prefix: str = ""
) -> DhirError:
    """`error`, about `device`'s `key` in `module`'s machine description, at that key's
    line (quoted) in the file the description was read from; as it was where that is
    not known."""
    loc = device_key_loc(module, device, key)
    try:
        text = None if loc is None else Path(loc.file).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        text = None
    if loc is None or text is None:
        return error
    located = [Diagnostic(f"{prefix}{d.message}", loc) for d in error.diagnostics]
    return DhirError(located, {loc.file: text})


def _check_wide_integers(module: ModuleOp) -> None:
    """Memrefs of integers wider than i128: MLIR 22 and LLVM lay their elements out at
    different strides (i129 and wider crashed at run time)."""
    for op in find_ops(module, (memref.AllocOp, memref.AllocaOp, memref.GlobalOp)):
        kind = op.memref.type if not isinstance(op, memref.GlobalOp) else op.type
        element = getattr(kind, "element_type", None)
        if isinstance(element, IntegerType) and element.width.data > 128:
            raise error_at(
                op,
                f"memrefs of {element} are not supported by the native backend (MLIR 22 "
                "and LLVM lay out integers wider than 128 bits differently); use i128 or "
                "narrower",
            )


def _check_targets(module: ModuleOp, cpu_fallback: bool = False) -> bool:
    """The native backend runs CPU tasks on this machine's kind of CPU, so far; GPU
    tasks on the ranks' GPUs or, with the CPU fallback, as CPU tasks. Whether any task
    runs on a GPU."""
    local = host_arch()
    on_gpu = False
    for task in (t for t in walk_outside_tasks(module) if isinstance(t, TaskOp)):
        info = task.target_info()
        if is_gpu_task(task):
            if cpu_fallback:
                _check_runs_on_cpu(task)
                _retarget_to_cpu(task)
            on_gpu |= not cpu_fallback
            continue
        if info.arch is not None and info.arch != local:
            raise DhirError(
                [
                    Diagnostic(
                        f"this task needs an {info.arch} CPU, but the ranks run on {local}; "
                        f'bind it to {{kind = "cpu"}} or {{arch = "{local}"}}',
                        loc_of(task),
                    )
                ]
            )
    return on_gpu


def _check_runs_on_cpu(task: TaskOp) -> None:
    kernel = next((op for op in task.body.walk() if op.dialect_name() == "gpu"), None)
    if kernel is not None:
        raise DhirError(
            [
                Diagnostic(
                    f"{task_label(task)} is written with '{kernel.name}', which only a "
                    "GPU runs, so --gpu-fallback=cpu cannot run it on the CPU; write its work "
                    "as parallel loops (scf.parallel, affine.parallel, linalg), or run it on a "
                    "machine with a GPU",
                    loc_of(kernel),
                )
            ]
        )


def _retarget_to_cpu(task: TaskOp) -> None:
    """Bind the task to `{kind = "cpu"}`, so that placement and lowering treat it as the
    CPU task it now is."""
    if task.target is None:
        task.properties["target"] = StringAttr("cpu")
        return
    block = task.parent
    assert block is not None
    cpu = TargetOp(kind="cpu")
    block.insert_op_before(cpu, task)
    task.operands[0] = cpu.result


def _check_entry_name(module: ModuleOp, entry: str) -> None:
    function = SymbolTable.lookup_symbol(module, entry)
    if not isinstance(function, func.FuncOp):
        return  # entry_signature says so
    clash = entry_clash(entry)
    if clash is not None:
        raise error_at(function, clash)


def _mark_entry(module: ModuleOp, entry: str) -> None:
    for op in walk_outside_tasks(module):
        if isinstance(op, func.FuncOp) and op.sym_name.data == entry:
            # The harness calls the entry through MLIR's C interface.
            op.attributes[C_INTERFACE] = UnitAttr()
