"""Lowered MLIR to an MPI executable: mlir-opt-22, mlir-translate-22, clang-22, with a cache.

The cache key covers everything that shapes the executable (MLIR text, harness, runtime,
flags, tool binaries, MPI), so a hit can skip every stage safely. Each lowered module's
object is cached as well (`modules/<key>/`, with its stages' files), so a program built in
pieces rebuilds only the pieces that changed.
"""

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic, SourceLoc
from dhir.ir.text import parse_string
from dhir.runtime import GPU_RUNTIME_SOURCE, RUNTIME_DIR, RUNTIME_HEADER, RUNTIME_SOURCE
from dhir.toolchain import llvm_text, progress
from dhir.toolchain.cpu import NATIVE, CpuFacts, cpu_facts, cpu_flags
from dhir.toolchain.gpu import GpuBuild
from dhir.toolchain.harness import generate_harness
from dhir.toolchain.linking import (
    C_INTERFACE_PREFIX,
    RUNNER_UTILS,
    LinkInputs,
    missing_symbol_hint,
    position_independent_hint,
    runtime_library_hint,
    undefined_function,
)
from dhir.toolchain.llvm_text import patch_llvm_ir
from dhir.toolchain.options import RunOptions
from dhir.toolchain.signature import EntrySignature
from dhir.toolchain.tools import (
    LlvmTools,
    MpiInstall,
    cache_root,
    cannot_run,
    file_identity,
    find_llvm_tools,
    find_mpi,
    whole_elf,
)
from dhir.transforms.check_mpi import mpi_problems

# Order matters: expand-strided-metadata, linalg-to-loops and vector-to-scf (which splits
# n-D vector transfers into loops of 1-D ones) emit affine.apply, lower-affine emits scf,
# scf-to-cf also turns scf.parallel into sequential loops. math-to-funcs outlines
# math.ipowi, which nothing else lowers, and fpowi with an exponent wider than the C int
# LLVM's powi takes (dhir-accurate-math widens narrower ones). Math ops without an LLVM
# intrinsic go to libm; vector-to-llvm lowers the 1-D transfers that convert-to-llvm
# leaves; convert-to-llvm is the only pass that lowers the mpi dialect. (LLVM computes
# bf16 in f32 and rounds each result with __truncsfbf2, which dhir's runtime defines:
# MLIR's bf16 emulation would skip roundings between ops.) arith-to-llvm comes before
# arith-expand, which leaves it only what LLVM has no instruction for (ceildivsi, ...):
# its maximumf and minimumf ignore the sign of zero (docs/upstream-bugs.md). Both come
# after the dialect passes, which then see the same module whether or not they are
# skipped (a conversion pass folds the LLVM constants it meets).
MLIR_OPT_PIPELINE: tuple[str, ...] = (
    "--convert-linalg-to-loops",
    "--convert-vector-to-scf",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
    "--convert-math-to-funcs=min-width-of-fpowi-exponent=33",
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    "--convert-vector-to-llvm=force-32bit-vector-indices=false",
    "--convert-arith-to-llvm",
    "--arith-expand",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
)
# The passes of MLIR_OPT_PIPELINE that lower linalg, vector and math ops, which a module
# without those words holds none of: it skips them all (at 10,000 tasks of scalar code, a
# quarter of mlir-opt's time). A module with any of them runs them all: a conversion
# pass also tidies the control flow that math-to-funcs makes, so one skipped alone can
# change the output.
_DIALECT_PASSES = frozenset(
    {
        "--convert-linalg-to-loops",
        "--convert-vector-to-scf",
        "--convert-math-to-funcs",
        "--convert-math-to-llvm",
        "--convert-math-to-libm",
        "--convert-vector-to-llvm",
    }
)
_DIALECT_WORDS = ("linalg.", "vector", "math.")
# scf.parallel becomes OpenMP instead of a sequential loop; linalg keeps its parallel loops,
# and affine.parallel is lowered to scf.parallel first so that it is threaded too. The
# memref lowering must come right after: scf-to-openmp wraps each loop body in a
# memref.alloca_scope, which rejects the blocks scf-to-cf would make of a loop inside it.
OPENMP_PASSES: tuple[str, ...] = (
    "--lower-affine",
    "--convert-linalg-to-parallel-loops",
    "--convert-scf-to-openmp",
    "--expand-strided-metadata",
    "--finalize-memref-to-llvm",
)
# `--runtime-checks`: a cf.assert before each memref access, cast and view that it stays
# in its memref, first, while the ops are still there to check. Its message is the op's
# location (verbose-level=0, not the op as mlir-opt prints it: one string per access),
# which is the user's file:line:col when the module is printed with its locations. Its
# memref.subview check builds scf.if without loading scf, which crashes mlir-opt-22 in a
# pipeline where no pass loads it (docs/upstream-bugs.md, 26): lower-affine, always in
# MLIR_OPT_PIPELINE, does. The pass makes no check for affine.load and affine.store:
# lower-affine runs before it too, making them the memref.load and store it checks, at
# their locations (it lowers what later passes make of affine.apply again).
RUNTIME_CHECKS: tuple[str, ...] = (
    "--lower-affine",
    "--generate-runtime-verification=verbose-level=0",
)
# No contraction of a * b + c in C (the runtime's and the harness's): dhir's results are
# the sequential program's, rounding by rounding. (Ops whose fastmath flags allow
# contraction are still fused: the flag on the instruction decides. So is llvm.fmuladd,
# which MLIR makes of vector.fma and of a float vector.outerproduct with an accumulator,
# whatever this flag says, on CPUs with FMA: the interpreter refuses both ops.)
# No SLP vectoriser: dhir-optimize-bodies vectorises the nests it can, the loop vectoriser
# the other loops, and SLP turned the independent row sums the optimizer makes into slow
# gathers (mvt 3.8 -> 8.2 ms) and took a third of clang's time on the loop-free pieces
# of many small tasks (docs/performance.md, "Task bodies").
CLANG_FLAGS: tuple[str, ...] = ("-O2", "-ffp-contract=off", "-fno-slp-vectorize")
C_FLAGS: tuple[str, ...] = ("-std=gnu11", "-Wall")  # for the runtime and the harness
# Where a program first calls each function it declares without defining it, by name: the
# call's location and the task it is in (None: host code).
Callers = Mapping[str, tuple[SourceLoc | None, str | None]]
CACHE_FORMAT = 3  # 3: modules lowered to bytecode, program.llvm.mlirbc
LLVM_TEXT_SOURCE = Path(llvm_text.__file__)
# This module's own source: it picks the passes a module needs and writes the commands
# (an edit of dhir's, under PYTHONPATH, built the old way from the cache).
BUILD_SOURCE = Path(__file__)
# What mlir-opt-22 lowers a module to: MLIR bytecode (`mlir-opt-22 FILE` prints it as
# text), or text for GPU builds.
_LOWERED_BYTECODE = "program.llvm.mlirbc"
_LOWERED_TEXT = "program.llvm.mlir"

# The name that diagnostics give a lowered module handed over as text.
LOWERED_NAME = "program.mlir"
# An mpi op in mlir-opt's output (text: reading it back into xDSL would cost more than the
# build); `!mpi.` types are looked for apart.
_MPI_OP = re.compile(r'(?<![\w.!$@#-])"?mpi\.(\w+)')


class Timing:
    """Wall time per stage, printed like `mlir-opt -mlir-timing`."""

    def __init__(self, reported: bool = False) -> None:
        # Printed (`--timing`): notes that cost work to find are found only then.
        self.reported = reported
        self.stages: list[tuple[str, float]] = []
        # Lines the run itself reported (each rank's bytes sent), printed after the stages.
        self.notes: list[str] = []

    def add(self, name: str, seconds: float) -> None:
        """Stages of one name add up, in the place of the first (modules printed one at a
        time, the build's cache lookups)."""
        for index, (known, before) in enumerate(self.stages):
            if known == name:
                self.stages[index] = (name, before + seconds)
                return
        self.stages.append((name, seconds))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        shown = progress.listener()  # a terminal's status line (dhir.toolchain.progress)
        if shown is not None:
            shown.begin(name)
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)
            if shown is not None:
                shown.end(name)

    @property
    def total(self) -> float:
        return sum(seconds for _, seconds in self.stages)

    def report(self) -> str:
        rule = "===" + "-" * 73 + "==="
        total = self.total
        lines = [
            rule,
            "dhir execution time report".center(79).rstrip(),
            rule,
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            "  ----Wall Time----  ----Name----",
        ]
        for name, seconds in [*self.stages, ("Total", total)]:
            share = 100.0 * seconds / total if total > 0 else 0.0
            lines.append(f"  {seconds:8.4f} ({share:5.1f}%)  {name}")
        if self.notes:
            lines += ["", *(f"  {note}" for note in self.notes)]
        return "\n".join(lines)

    __str__ = report


_FULL = (errno.ENOSPC, errno.EDQUOT)  # a full disk, or the user's quota on it


@contextmanager
def writing_cache(root: Path) -> Iterator[None]:
    """An OSError on the cache directory `root` or a file in it (read-only, not a
    directory, a full disk) becomes a DhirError that names it and says how to choose
    another; other OSErrors pass."""
    try:
        yield
    except OSError as error:
        # subprocess names its `cwd` as given: a Path.
        names = [
            n for n in (error.filename, error.filename2) if isinstance(n, str | bytes | os.PathLike)
        ]
        paths = [Path(os.path.abspath(os.fsdecode(name))) for name in names]
        where = Path(os.path.abspath(root))
        # A write that fills the disk names no file (write() has none to name); what is
        # written in here goes to the cache.
        full = error.errno in _FULL
        if not (full and not paths) and not any(
            p == where or where in p.parents or p in where.parents for p in paths
        ):
            raise
        detail = f" ({paths[0]})" if paths and paths[0] != where else ""
        reason, fix = error.strerror, "make it a writable directory"
        # os.path's tests: Path.exists raises for a name too long (ENAMETOOLONG).
        if os.path.exists(root) and not os.path.isdir(root):  # mkdir says only "File exists"
            reason, detail = "it is a file, not a directory", ""
        elif os.path.islink(root) and not os.path.exists(root):  # mkdir: "File exists" too
            reason, detail = "it is a symbolic link to nothing (a loop, or a path gone)", ""
            fix = "point it at a directory"
        elif full:
            fix = "free space on its disk"
        elif error.errno == errno.ENOENT:
            reason = f"it or a folder in it was removed while dhir was building there{detail}"
            detail, fix = "", "run again"
        raise DhirError(
            [
                Diagnostic(
                    f"cannot write to dhir's cache directory {root}: {reason}{detail}; "
                    f"{fix}, or choose another with DHIR_CACHE_DIR=DIR"
                )
            ]
        ) from None


def build_executable(
    lowered_mlir: str | Iterable[str],
    signature: EntrySignature,
    options: RunOptions | None = None,
    timing: Timing | None = None,
    extra_mlir_opt_passes: Sequence[str] = (),
    openmp: bool = False,
    gpu: GpuBuild | None = None,
    tasks: Sequence[str] = (),
    bands: Mapping[int, Sequence[Sequence[tuple[int, int]]]] | None = None,
    mpi_checked: bool = False,
    early_runtime: "EarlyRuntime | None" = None,
    callers: Callers | None = None,
) -> Path:
    """An executable running `signature`'s entry of `lowered_mlir` on `options.ranks`
    ranks of `options.mpi`.

    `lowered_mlir` may be several modules (dhir/toolchain/split.py), each built on a core
    of its own and linked together; given as an iterator (of modules being printed), each
    is built as soon as it comes, while the next ones print, and the time spent pulling
    them is the "print" stage. Each module's object is cached on its own, the executable
    by all of them.

    `extra_mlir_opt_passes` (e.g. `"--canonicalize"`) run before the standard pipeline;
    `openmp` runs scf.parallel loops on OpenMP threads (see run_executable's `threads`);
    `gpu` compiles GPU kernels and links the GPU runtime (dhir/toolchain/gpu.py);
    `tasks` names the tasks dhir-track-tasks numbered, `bands` the rows of each memref
    argument each rank holds (see generate_harness). `mpi_checked`: the modules passed
    dhir-check-mpi as IR before they were printed (as the native backend does); else each
    one with mpi ops is read back and checked here. `early_runtime`: the runtime's object
    as it was started before (used when it was compiled with the same flags and MPI).
    `callers`: where the program first calls each function it declares without defining
    it (by symbol), so that a link that finds no definition says where it is called.
    """
    callers = callers if callers is not None else {}
    options = options if options is not None else RunOptions()
    timing = timing if timing is not None else Timing()
    recipe = _recipe(options, openmp, gpu, extra_mlir_opt_passes)
    with writing_cache(recipe.root):
        recipe.root.mkdir(parents=True, exist_ok=True)
        with timing.stage("harness, cache lookup"):
            harness = generate_harness(signature, options.ranks, tasks, bands)
        runtime = partial(_runtime_object, recipe, early_runtime)
        linking = _Linking(recipe, harness, runtime, timing, not mpi_checked, callers)
        if isinstance(lowered_mlir, str):
            return linking.whole(lowered_mlir)
        if isinstance(lowered_mlir, Sequence) and len(lowered_mlir) == 1:
            return linking.whole(lowered_mlir[0])
        return linking.pieces(_Modules(lowered_mlir, timing))


def keep_build(exe: Path, folder: Path) -> None:
    """Copy what built `exe` into `folder`: the executable, the harness's C source and each
    module's stages (program.mlir as dhir lowered it, program.llvm.mlir or .llvm.mlirbc
    after mlir-opt, program.ll after mlir-translate; programK.* for several modules)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path in sorted(exe.parent.iterdir()):
            if path.is_file():  # links to the modules' stages are followed
                shutil.copyfile(path, folder / path.name)
                shutil.copymode(path, folder / path.name)
    except FileExistsError:  # mkdir's answer when `folder` is a file
        raise DhirError(
            [Diagnostic(f"cannot keep the build in {folder}: it is a file, not a directory")]
        ) from None
    except OSError as error:
        where = f"{folder}: {error.strerror}" if error.strerror else f"{folder}: {error}"
        raise DhirError([Diagnostic(f"cannot keep the build in {where}")]) from None


def _recipe(
    options: RunOptions, openmp: bool, gpu: GpuBuild | None, extra_mlir_opt_passes: Sequence[str]
) -> "_Recipe":
    tools = find_llvm_tools()
    mpi_install = find_mpi(options.mpi)
    checks = RUNTIME_CHECKS if options.all_checks else ()
    passes = (
        *checks,
        *(OPENMP_PASSES if openmp else ()),
        *extra_mlir_opt_passes,
        *MLIR_OPT_PIPELINE,
    )
    if gpu is not None:
        passes = tuple(gpu.mlir_opt_args(passes))
    cpu = cpu_facts(tools.clang, options.cpu if options.cpu is not None else NATIVE)
    clang_flags = (*CLANG_FLAGS, *cpu_flags(cpu.cpu), *(("-fopenmp",) if openmp else ()))
    return _Recipe(
        cache_root(), tuple(passes), clang_flags, cpu, tools, mpi_install, gpu, options.link
    )


class EarlyRuntime:
    """dhir_rt.o compiled on a thread of its own from now on, for build_executable's
    `early_runtime`: the dhir passes run on one core and leave the others idle, so a build
    that starts them after this one finds its runtime ready."""

    def __init__(self, options: RunOptions, openmp: bool) -> None:
        pool = ThreadPoolExecutor(1)
        self._job = pool.submit(self._build, options, openmp)
        pool.shutdown(wait=False)

    @staticmethod
    def _build(options: RunOptions, openmp: bool) -> tuple[tuple[object, ...], Path]:
        recipe = _recipe(options, openmp, None, ())
        with writing_cache(recipe.root):
            recipe.root.mkdir(parents=True, exist_ok=True)
            return recipe.runtime_inputs, recipe.runtime_object(Timing())

    def object_for(self, recipe: "_Recipe") -> Path | None:
        """The object, once compiled, when `recipe` would compile the same one; else None."""
        inputs, target = self._job.result()
        return target if inputs == recipe.runtime_inputs else None


def _runtime_object(recipe: "_Recipe", early: EarlyRuntime | None, timing: Timing) -> Path:
    if early is not None:
        with timing.stage("clang (runtime)"):
            made = early.object_for(recipe)
        if made is not None:
            return made
    return recipe.runtime_object(timing)


class _Modules:
    """The lowered modules, timed as they are pulled (printed) when they are not ready."""

    def __init__(self, modules: Iterable[str], timing: Timing) -> None:
        self._modules = iter(modules)
        self._printing = not isinstance(modules, Sequence)
        self._timing = timing

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if not self._printing:
            return next(self._modules)
        with self._timing.stage("print"):
            return next(self._modules)


@dataclass(frozen=True)
class _Recipe:
    """How modules become objects and objects an executable, and where they are cached."""

    root: Path
    passes: tuple[str, ...]
    clang_flags: tuple[str, ...]
    cpu: CpuFacts  # what the flags build for ("native" is this machine's CPU)
    tools: LlvmTools
    mpi: MpiInstall
    gpu: GpuBuild | None
    linked: LinkInputs  # the user's code and libraries, linked into the executable

    @property
    def runtime_inputs(self) -> tuple[object, ...]:
        """What runtime_object's result depends on."""
        return (self.root, self.clang_flags, self.cpu, self.tools, self.mpi)

    @cached_property
    def settings(self) -> str:
        """The digest of everything but the modules and the harness."""
        return _digest(
            {
                **({"gpu": self.gpu.key()} if self.gpu is not None else {}),
                "format": CACHE_FORMAT,
                "runtime": [RUNTIME_SOURCE.read_text(), RUNTIME_HEADER.read_text()],
                "llvm text": LLVM_TEXT_SOURCE.read_text(),
                "build": BUILD_SOURCE.read_text(),
                "passes": list(self.passes),
                "flags": [*self.clang_flags, *C_FLAGS],
                "cpu": self.cpu.digest,
                "tools": [
                    file_identity(p)
                    for p in (self.tools.mlir_opt, self.tools.mlir_translate, self.tools.clang)
                ],
                "mpi": [self.mpi.name, str(self.mpi.prefix), self.mpi.version],
            }
        )

    def module_key(self, mlir: str) -> str:
        return _digest({"settings": self.settings, "mlir": mlir})

    def executable(self, module_keys: Sequence[str], harness: str) -> Path:
        parts = {"settings": self.settings, "modules": list(module_keys), "harness": harness}
        if self.linked:
            parts["linked"] = self.linked.digest()
        return self.root / _digest(parts)[:24] / "program"

    def module_object(self, mlir: str, key: str, timing: Timing) -> Path:
        """program.o of the lowered module `mlir` (whose key is `key`), built once."""
        final = self.root / "modules" / key[:24]
        if not whole_elf(final / "program.o"):
            final.parent.mkdir(exist_ok=True)
            self._in_work_dir(final, partial(self._compile_module, mlir=mlir, timing=timing))
        return final / "program.o"

    def runtime_object(self, timing: Timing) -> Path:
        """dhir_rt.o for this MPI and these flags, compiled once (mpi.h is slow to compile)."""
        return self._c_object(
            "dhir_rt",
            RUNTIME_SOURCE.read_text(),
            [*self.clang_flags, *C_FLAGS, f"-I{RUNTIME_DIR}", *self.mpi.compile_flags],
            [self.mpi.name, str(self.mpi.prefix), self.mpi.version],
            "clang (runtime)",
            timing,
        )

    def harness_object(self, harness: str, timing: Timing) -> Path:
        flags = [*self.clang_flags, *C_FLAGS, f"-I{RUNTIME_DIR}"]
        return self._c_object("harness", harness, flags, [], "clang (harness)", timing)

    def gpu_runtime_object(self, timing: Timing) -> Path:
        """dhir_gpu_rt.o, for programs with GPU tasks (dhir/toolchain/gpu.py)."""
        source = GPU_RUNTIME_SOURCE.read_text()
        flags = [*self.clang_flags, *C_FLAGS, f"-I{RUNTIME_DIR}"]
        return self._c_object("dhir_gpu_rt", source, flags, [], "clang (GPU runtime)", timing)

    def link(
        self,
        exe: Path,
        modules: Sequence[Path],
        others: Sequence[Path],
        harness: str,
        timing: Timing,
        callers: Callers,
    ) -> Path:
        """The modules' objects and `others` (the harness's, the runtime's) linked into `exe`,
        with the harness's source beside it for a look. `callers`: see build_executable."""
        link = partial(self._link, modules=modules, others=others, harness=harness, timing=timing)
        try:
            self._in_work_dir(exe.parent, link)
        except DhirError as error:
            undefined = _undefined_functions(error, callers, self.linked.searched())
            raise undefined or _with_link_hint(error) from None
        return exe

    def _compile_module(self, work: Path, *, mlir: str, timing: Timing) -> None:
        tools = self.tools
        (work / "program.mlir").write_text(mlir)
        # mlir-translate reads MLIR bytecode in 60% of the time it takes to read text, and
        # mlir-opt writes it faster; GPU builds keep text for GpuBuild.check_lowered.
        lowered = _LOWERED_TEXT if self.gpu is not None else _LOWERED_BYTECODE
        passes = needed_passes(self.passes, mlir)
        bytecode = ["--emit-bytecode"] if self.gpu is None else []
        command = [tools.mlir_opt, *passes, *bytecode, "program.mlir", "-o", lowered]
        run_stage(timing, "mlir-opt", work, command)
        if self.gpu is not None:
            _check_lowered(work / lowered)
            self.gpu.check_lowered(work / lowered)
        command = [tools.mlir_translate, "--mlir-to-llvmir", lowered, "-o", "program.ll"]
        try:
            run_stage(timing, "mlir-translate", work, command)
        except DhirError:
            if self.gpu is None:
                self._explain_translation_failure(work)
            raise
        ll = work / "program.ll"
        ll.write_text(patch_llvm_ir(ll.read_text(), self.mpi))
        command = [tools.clang, *self.clang_flags, "-Wno-override-module", "-c", ll.name]
        run_stage(timing, "clang (program)", work, [*command, "-o", "program.o"])

    def _explain_translation_failure(self, work: Path) -> None:
        """The lowered bytecode as text beside it, for a look; when mlir-opt left mpi ops
        in it (it exits 0 doing so), that is the error; else mlir-translate's on the text,
        which names the op it refuses (on bytecode, only the op's dialect)."""
        command = [self.tools.mlir_opt, _LOWERED_BYTECODE, "-o", _LOWERED_TEXT]
        run_stage(Timing(), "mlir-opt (bytecode to text)", work, command)
        _check_lowered(work / _LOWERED_TEXT)
        command = [self.tools.mlir_translate, "--mlir-to-llvmir", _LOWERED_TEXT, "-o", "program.ll"]
        run_stage(Timing(), "mlir-translate", work, command)

    def _link(
        self,
        work: Path,
        *,
        modules: Sequence[Path],
        others: Sequence[Path],
        harness: str,
        timing: Timing,
    ) -> None:
        (work / "harness.c").write_text(harness)
        self._show_modules(work, [module.parent for module in modules])
        tools = self.tools
        runner_utils = sorted(tools.lib_dir.glob(RUNNER_UTILS[0]))
        float16_utils = sorted(tools.lib_dir.glob(RUNNER_UTILS[1]))
        gpu_link: list[object] = []
        if self.gpu is not None:
            gpu_link = [self.gpu_runtime_object(timing), *self.gpu.link_flags]
        command = [tools.clang, *self.clang_flags, *modules, *others, *gpu_link, "-o", "program"]
        command += [*self.linked.flags(), *self.mpi.link_flags, "-lm"]
        if runner_utils:
            # rtclock, printF64 and the like, which a program may call; memrefCopy (a
            # strided memref.copy) is dhir's runtime's, so most programs need none of it.
            command += ["-Wl,--as-needed", runner_utils[-1], f"-Wl,-rpath,{tools.lib_dir}"]
            # vector.print of f16 and bf16 calls printF16 and printBF16, defined there.
            command += float16_utils[-1:]
        run_stage(timing, "link", work, command)
        if not whole_elf(work / "program"):
            # GNU ld exits 0 when the disk fills as it writes the executable's last page.
            raise DhirError(
                [
                    Diagnostic(
                        f"build stage 'link' wrote an executable cut short ({work / 'program'}:"
                        " its headers name bytes past its end); the disk that holds dhir's "
                        f"cache ({work.parent}) is likely full: free space on it, or choose "
                        "another cache with DHIR_CACHE_DIR=DIR"
                    )
                ]
            )

    def _show_modules(self, work: Path, modules: Sequence[Path]) -> None:
        """Links to each module's stages (program.mlir, .llvm.mlirbc or .llvm.mlir, .ll)
        beside the executable, for a look at what was built: programK.* when there are
        several."""
        for number, folder in enumerate(modules):
            stem = "program" if len(modules) == 1 else f"program{number}"
            for suffix in (".mlir", ".llvm.mlir", ".llvm.mlirbc", ".ll"):
                if (folder / f"program{suffix}").is_file():
                    target = os.path.relpath(folder / f"program{suffix}", work)
                    (work / f"{stem}{suffix}").symlink_to(target)

    def _c_object(
        self,
        stem: str,
        source: str,
        flags: Sequence[str],
        more_key: list[str],
        stage: str,
        timing: Timing,
    ) -> Path:
        key = _digest(
            {
                "format": CACHE_FORMAT,
                "source": [source, RUNTIME_HEADER.read_text()],
                "build": BUILD_SOURCE.read_text(),
                "flags": list(flags),
                "cpu": self.cpu.digest,
                "clang": file_identity(self.tools.clang),
                "more": more_key,
            }
        )
        target = self.root / f"{stem}-{key[:24]}.o"
        if not whole_elf(target):  # cut short: compiled again, and replaced
            work = Path(tempfile.mkdtemp(prefix=f"{stem}-", dir=self.root))
            try:
                (work / f"{stem}.c").write_text(source)
                command = [self.tools.clang, *flags, "-c", f"{stem}.c", "-o", f"{stem}.o"]
                run_stage(timing, stage, work, command)
                os.replace(work / f"{stem}.o", target)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return target

    def _in_work_dir(self, final: Path, build: Callable[[Path], None]) -> None:
        """Run `build` in a new folder and move it to `final` (atomic: a concurrent build of
        the same key wins or loses whole); when it fails, the folder is kept for a look at
        the failed stage's input, one per key, so failures do not pile up."""
        work = Path(tempfile.mkdtemp(prefix="build-", dir=self.root))
        try:
            build(work)
        except DhirError as error:
            failed = self.root / f"failed-{final.name}"
            shutil.rmtree(failed, ignore_errors=True)
            try:
                os.replace(work, failed)
            except OSError:  # a concurrent build of the key failed too, and kept its folder
                shutil.rmtree(work, ignore_errors=True)
            moved = [
                Diagnostic(d.message.replace(str(work), str(failed)), d.loc)
                for d in error.diagnostics
            ]
            raise DhirError(moved) from None
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        try:
            os.replace(work, final)
        except OSError:
            if not final.is_dir():
                shutil.rmtree(work, ignore_errors=True)
                raise
            if _complete(final):  # a concurrent build of the same key won
                shutil.rmtree(work, ignore_errors=True)
                return
            # Left incomplete (a crash, a full disk, a hand): it would be taken as built.
            shutil.rmtree(final, ignore_errors=True)
            os.replace(work, final)


def _complete(folder: Path) -> bool:
    """Whether a build folder holds, whole, what its build makes (a module's object or a
    program)."""
    return whole_elf(folder / "program.o") or whole_elf(folder / "program")


@dataclass(frozen=True)
class _Linking:
    """What build_executable builds its modules with, however many there are."""

    recipe: _Recipe
    harness: str
    runtime_object: Callable[[Timing], Path]
    timing: Timing
    check: bool  # the modules' mpi ops, before building them
    callers: Callers

    def whole(self, mlir: str) -> Path:
        """One module: its stages run one after the other, each timed."""
        recipe, timing = self.recipe, self.timing
        with timing.stage("harness, cache lookup"):
            if self.check:
                _check_mpi_use(mlir, recipe.mpi)
            key = recipe.module_key(mlir)
            exe = recipe.executable([key], self.harness)
            if whole_elf(exe):
                return exe
        program = recipe.module_object(mlir, key, timing)
        runtime = self.runtime_object(timing)
        others = [recipe.harness_object(self.harness, timing), runtime]
        return recipe.link(exe, [program], others, self.harness, timing, self.callers)

    def pieces(self, modules: "_Modules") -> Path:
        """Several modules, each built on a core of its own as soon as it is printed."""
        with ModuleBuilds(self.recipe, self.timing, self.check, self.runtime_object) as builds:
            for text in modules:
                builds.add(text)
            return builds.finish(self.harness, self.callers)


class ModuleBuilds:
    """Lowered modules built as they are added, each on a core of its own, and linked into
    one executable by `finish`: a caller adds each module as soon as it has it, and LLVM
    builds it while the caller makes the next (start_builds; build_executable, with
    modules being printed). Each module's mpi ops are checked first with `check`. Used
    as a context: leaving it by an exception cancels the builds not started."""

    def __init__(
        self,
        recipe: _Recipe,
        timing: Timing,
        check: bool,
        runtime_object: Callable[[Timing], Path],
    ) -> None:
        self._recipe = recipe
        self._timing = timing
        self._check = check
        with writing_cache(recipe.root):
            recipe.root.mkdir(parents=True, exist_ok=True)
        cores = os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(cores)
        # While the caller works, it keeps a core busy: the modules wait for the others.
        self._cores = threading.Semaphore(max(1, cores - 1))
        # Each job's stages are timed apart and dropped: they overlap.
        self._runtime = self._pool.submit(runtime_object, Timing())
        self._keys: list[str] = []
        self._built: list[Future[Path]] = []

    def __enter__(self) -> "ModuleBuilds":
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._pool.shutdown(cancel_futures=kind is not None)

    def add(self, mlir: str) -> None:
        recipe = self._recipe
        if self._check:
            _check_mpi_use(mlir, recipe.mpi)
        self._keys.append(recipe.module_key(mlir))
        self._built.append(self._pool.submit(self._build, mlir, self._keys[-1]))

    def _build(self, mlir: str, key: str) -> Path:
        with self._cores:
            return self._recipe.module_object(mlir, key, Timing())

    def finish(self, harness: str, callers: Callers | None = None) -> Path:
        """The executable of the modules added and `harness`, once they are built;
        `callers`: see build_executable."""
        recipe = self._recipe
        self._cores.release()  # the caller's core is free now
        with writing_cache(recipe.root):
            harness_job = self._pool.submit(recipe.harness_object, harness, Timing())
            # What is left once the caller is done: the stage its work did not hide.
            with self._timing.stage(f"mlir-opt..clang, {len(self._keys)} pieces"):
                modules = [job.result() for job in self._built]
                objects = [self._runtime.result(), harness_job.result()]
            exe = recipe.executable(self._keys, harness)
            if whole_elf(exe):
                return exe
            return recipe.link(exe, modules, objects, harness, self._timing, callers or {})


def start_builds(
    options: RunOptions,
    timing: Timing,
    openmp: bool = False,
    early_runtime: EarlyRuntime | None = None,
) -> ModuleBuilds:
    """Builds of modules for `options` (as build_executable's), added one by one: for
    modules whose mpi ops passed dhir-check-mpi as IR; see ModuleBuilds."""
    recipe = _recipe(options, openmp, None, ())
    return ModuleBuilds(recipe, timing, False, partial(_runtime_object, recipe, early_runtime))


# What the linker says of a symbol no object defines: GNU ld, then lld.
_UNDEFINED = re.compile(r"undefined reference to `([^']+)'|undefined symbol: (\S+)")


def _undefined_functions(
    error: DhirError, callers: Callers, searched: Sequence[str]
) -> DhirError | None:
    """A failed link's error as one error per function of the program's that no linked
    file defines, at its first call; None when the linker names none, or names a symbol
    that is not such a function (dhir's own, a library's)."""
    text = "\n".join(d.message for d in error.diagnostics)
    found = [m.group(1) or m.group(2) for m in _UNDEFINED.finditer(text)]
    symbols = list(dict.fromkeys(found))
    names = [symbol.removeprefix(C_INTERFACE_PREFIX) for symbol in symbols]
    if not names or not all(name in callers for name in names):
        return None
    diagnostics = []
    for symbol, name in zip(symbols, names, strict=True):
        loc, task = callers[name]
        c_interface = symbol != name
        message = undefined_function(name, task, searched, c_interface=c_interface)
        diagnostics.append(Diagnostic(message, loc))
    return DhirError(diagnostics)


def _with_link_hint(error: DhirError) -> DhirError:
    """A failed link's error with what to do when it refused an object that is not
    position-independent, linked code needs a language's runtime library or uses a
    symbol no linked file defines (the interpreter's link and load say the same)."""
    text = "\n".join(d.message for d in error.diagnostics)
    hint = (
        position_independent_hint(text) or runtime_library_hint(text) or missing_symbol_hint(text)
    )
    if not hint:
        return error
    first, *rest = error.diagnostics
    head, _, tail = first.message.partition(";")
    message = f"{head}{hint};{tail}" if tail else f"{first.message}{hint}"
    return DhirError([replace(first, message=message), *rest], error.sources)


def needed_passes(passes: Sequence[str], mlir: str) -> list[str]:
    """`passes` without the dialect passes when the module `mlir` needs none of them."""
    if any(word in mlir for word in _DIALECT_WORDS):
        return list(passes)
    return [flag for flag in passes if flag.split("=", 1)[0] not in _DIALECT_PASSES]


_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device", as the tools say it


def run_stage(timing: Timing, stage: str, cwd: Path, command: Sequence[object]) -> None:
    """Run one build stage's command in `cwd`, timed as `stage`; a failure is a DhirError
    with the command and the end of its output."""
    argv = [str(word) for word in command]
    with timing.stage(stage):
        try:
            result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
        except OSError as error:
            if error.filename != argv[0]:  # the cache's folder: writing_cache's to say
                raise
            raise cannot_run(argv[0], error) from None
    problem = "failed DLTI query" in result.stderr  # mlir-opt says so, yet exits 0
    if result.returncode != 0 and not cwd.is_dir():
        # Removed while the tool ran (the cache, by hand): not the tool's failure, and
        # its output ("cannot open input file") would not say so.
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(cwd))
    if result.returncode != 0 or problem:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-30:])
        detail = (
            'the module needs `dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">` '
            '(or "OpenMPI") to lower mpi ops; '
            if problem
            else ""
        )
        if _NO_SPACE in result.stderr or _NO_SPACE in result.stdout:
            # Else read as a failure of the tool's, with the cause on the last line.
            detail = (
                f"the disk that holds dhir's cache ({cwd.parent}) is full: free space on it, "
                "or choose another cache with DHIR_CACHE_DIR=DIR; "
            )
        raise DhirError(
            [
                Diagnostic(
                    f"build stage '{stage}' failed (exit status {result.returncode}); {detail}"
                    f"command: {' '.join(argv)}\nin {cwd}\n{tail}"
                )
            ]
        )


def _check_mpi_use(mlir: str, mpi: MpiInstall) -> None:
    """Refuse, with the reason, what MLIR 22 would lower wrongly or not at all
    (dhir-check-mpi, on the module read back from `mlir`). Text without "mpi." holds no
    mpi op, and is not read."""
    if "mpi." not in mlir:
        return
    module = parse_string(mlir, LOWERED_NAME, verify=False)
    problems = mpi_problems(module, mpi.name)
    if problems:
        raise DhirError(problems, {LOWERED_NAME: mlir})


def _check_lowered(path: Path) -> None:
    text = path.read_text()
    if "mpi." not in text:  # what most modules hold: the regex would take 20 times longer
        return
    left = [f"mpi.{op}" for op in sorted({m.group(1) for m in _MPI_OP.finditer(text)})]
    left += ["!mpi types"] if "!mpi." in text else []
    if left:
        raise DhirError(
            [
                Diagnostic(
                    f"mlir-opt-22 left mpi ops unlowered in {path}: {', '.join(left)}; "
                    "dhir cannot build this module"
                )
            ]
        )


def _digest(parts: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
