"""Lowered MLIR to an MPI executable: mlir-opt-22, mlir-translate-22, clang-22, with a cache.

The cache key covers everything that shapes the executable (MLIR text, harness, runtime,
flags, tool binaries, MPI), so a hit can skip every stage safely.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from dhir.backends.signature import EntrySignature
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.runtime import RUNTIME_DIR, RUNTIME_HEADER, RUNTIME_SOURCE
from dhir.toolchain.harness import generate_harness
from dhir.toolchain.tools import LlvmTools, MpiInstall, find_llvm_tools, find_mpi

if TYPE_CHECKING:
    from dhir.toolchain.gpu import GpuBuild

# Order matters: expand-strided-metadata and linalg-to-loops emit affine.apply, lower-affine
# emits scf, scf-to-cf also turns scf.parallel into sequential loops; math ops without an
# LLVM intrinsic go to libm; convert-to-llvm is the only pass that lowers the mpi dialect.
MLIR_OPT_PIPELINE: tuple[str, ...] = (
    "--convert-linalg-to-loops",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
    "--arith-expand",
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
)
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
CLANG_FLAGS: tuple[str, ...] = ("-O2",)
C_FLAGS: tuple[str, ...] = ("-std=gnu11", "-Wall")  # for the runtime and the harness
CACHE_FORMAT = 1

# What MLIR 22's convert-to-llvm lowers; anything else it leaves in place without a word.
LOWERED_MPI_OPS = frozenset(
    {"init", "finalize", "comm_world", "comm_rank", "comm_split", "send", "recv", "allreduce"}
)
RUNTIME_REPLACEMENTS = {"comm_size": "dhir_rt_comm_size", "barrier": "dhir_rt_barrier"}
# MLIR 22 names OpenMPI's predefined reductions `ompi_mpi_<op>`; libmpi exports `ompi_mpi_op_<op>`.
_OPENMPI_OPS = re.compile(
    r"@ompi_mpi_(sum|prod|max|min|maxloc|minloc|land|band|lor|bor|lxor|bxor|replace|no_op)\b"
)
_MAIN_SYMBOL = re.compile(r"@main(?![\w.$-])")
_MPI_OP = re.compile(r'(?<![\w.!$@#-])"?mpi\.(\w+)')
_MPI_IMPLEMENTATION = re.compile(r'"MPI:Implementation"\s*=\s*"(\w+)"')
_UNIT_STRIDE = re.compile(r"\s*strided<\[1\](, offset: [?\d]+)?>")
_BUFFER_OPS = frozenset({"send", "recv", "isend", "irecv", "allreduce"})


class Timing:
    """Wall time per stage, printed like `mlir-opt -mlir-timing`."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, float]] = []

    def add(self, name: str, seconds: float) -> None:
        self.stages.append((name, seconds))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

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
        return "\n".join(lines)

    __str__ = report


def cache_root() -> Path:
    configured = os.environ.get("DHIR_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "dhir"


def build_executable(
    lowered_mlir: str | Sequence[str],
    signature: EntrySignature,
    ranks: int,
    mpi: str = "mpich",
    timing: Timing | None = None,
    extra_mlir_opt_passes: Sequence[str] = (),
    openmp: bool = False,
    gpu: "GpuBuild | None" = None,
) -> Path:
    """An executable running `signature`'s entry of `lowered_mlir` on `ranks` MPI ranks.
    `lowered_mlir` may be several modules (dhir/toolchain/split.py), built at the same time
    and linked together.

    `extra_mlir_opt_passes` (e.g. `"--canonicalize"`) run before the standard pipeline;
    `openmp` runs scf.parallel loops on OpenMP threads (see run_executable's `threads`);
    `gpu` compiles GPU kernels and links the GPU runtime (dhir/toolchain/gpu.py).
    """
    if ranks < 1:
        raise DhirError([Diagnostic(f"the rank count must be at least 1, got {ranks}")])
    timing = timing if timing is not None else Timing()
    tools = find_llvm_tools()
    mpi_install = find_mpi(mpi)
    pieces = [lowered_mlir] if isinstance(lowered_mlir, str) else list(lowered_mlir)
    for piece in pieces:
        _check_mpi_use(piece, mpi_install)
    passes = (*(OPENMP_PASSES if openmp else ()), *extra_mlir_opt_passes, *MLIR_OPT_PIPELINE)
    if gpu is not None:
        passes = tuple(gpu.mlir_opt_args(passes))
    clang_flags = (*CLANG_FLAGS, *(("-fopenmp",) if openmp else ()))
    root = cache_root()
    with timing.stage("harness, cache lookup"):
        harness = generate_harness(signature, ranks)
        mlir = pieces[0] if len(pieces) == 1 else "\n// piece\n".join(pieces)
        key = _cache_key(mlir, harness, passes, clang_flags, tools, mpi_install, gpu)
        final = root / key[:24]
        exe = final / "program"
        hit = exe.is_file()
    if hit:
        return exe
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        _build(work, pieces, harness, passes, clang_flags, tools, mpi_install, timing, gpu)
    except DhirError as error:
        # Kept for a look at the stage's input; one per key, so failures do not pile up.
        failed = root / f"failed-{key[:24]}"
        shutil.rmtree(failed, ignore_errors=True)
        os.replace(work, failed)
        moved = [Diagnostic(d.message.replace(str(work), str(failed))) for d in error.diagnostics]
        raise DhirError(moved) from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    try:
        os.replace(work, final)  # atomic: a concurrent build of the same key wins or loses whole
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        if not exe.is_file():
            raise
    return exe


def _build(
    work: Path,
    pieces: Sequence[str],
    harness: str,
    passes: Sequence[str],
    clang_flags: Sequence[str],
    tools: LlvmTools,
    mpi: MpiInstall,
    timing: Timing,
    gpu: "GpuBuild | None" = None,
) -> None:
    (work / "harness.c").write_text(harness)
    compile_piece = partial(
        _compile_piece, work, passes=passes, clang_flags=clang_flags, tools=tools, mpi=mpi, gpu=gpu
    )
    harness_command = [tools.clang, *clang_flags, *C_FLAGS, f"-I{RUNTIME_DIR}", "-c", "harness.c"]
    harness_command += ["-o", "harness.o"]
    if len(pieces) == 1:
        objects = [compile_piece("program", pieces[0], timing)]
        runtime = _runtime_object(work.parent, clang_flags, tools, mpi, timing)
        _run(timing, "clang (harness)", work, harness_command)
    else:
        jobs = min(len(pieces) + 2, os.cpu_count() or 1)
        stage = f"mlir-opt..clang ({len(pieces)} pieces)"  # with the runtime and harness
        with timing.stage(stage), ThreadPoolExecutor(jobs) as pool:
            # Each job's stages are timed apart and dropped: they overlap.
            started = pool.submit(_runtime_object, work.parent, clang_flags, tools, mpi, Timing())
            harness_run = pool.submit(_run, Timing(), "clang (harness)", work, harness_command)
            runs = [
                pool.submit(compile_piece, f"program{k}", text, Timing())
                for k, text in enumerate(pieces)
            ]
            objects = [run.result() for run in runs]
            runtime = started.result()
            harness_run.result()
    runner_utils = sorted(tools.lib_dir.glob("libmlir_c_runner_utils.so.*"))
    gpu_link: list[object] = []
    if gpu is not None:
        flags = (*clang_flags, *C_FLAGS)
        run = lambda cwd, argv: _run(timing, "clang (GPU runtime)", cwd, argv)  # noqa: E731
        gpu_link = [gpu.runtime_object(work.parent, tools.clang, flags, run), *gpu.link_flags]
    _run(
        timing,
        "link",
        work,
        [
            tools.clang,
            *clang_flags,
            *objects,
            "harness.o",
            runtime,
            *gpu_link,
            "-o",
            "program",
            *mpi.link_flags,
            "-lm",
            # memref.copy between strided memrefs calls memrefCopy from MLIR's runner utils.
            *(
                ["-Wl,--as-needed", runner_utils[-1], f"-Wl,-rpath,{tools.lib_dir}"]
                if runner_utils
                else []
            ),
        ],
    )


def _compile_piece(
    work: Path,
    stem: str,
    mlir: str,
    timing: Timing,
    *,
    passes: Sequence[str],
    clang_flags: Sequence[str],
    tools: LlvmTools,
    mpi: MpiInstall,
    gpu: "GpuBuild | None",
) -> Path:
    """`stem`.o from the lowered module `mlir`, in `work`."""
    (work / f"{stem}.mlir").write_text(mlir)
    lowered = f"{stem}.llvm.mlir"
    _run(timing, "mlir-opt", work, [tools.mlir_opt, *passes, f"{stem}.mlir", "-o", lowered])
    _check_lowered(work / lowered)
    if gpu is not None:
        gpu.check_lowered(work / lowered)
    ll = work / f"{stem}.ll"
    _run(
        timing,
        "mlir-translate",
        work,
        [tools.mlir_translate, "--mlir-to-llvmir", lowered, "-o", ll.name],
    )
    ll.write_text(_patch_llvm_ir(ll.read_text(), mpi))
    command = [tools.clang, *clang_flags, "-Wno-override-module", "-c", ll.name, "-o", f"{stem}.o"]
    _run(timing, "clang (program)", work, command)
    return work / f"{stem}.o"


def _runtime_object(
    root: Path, clang_flags: Sequence[str], tools: LlvmTools, mpi: MpiInstall, timing: Timing
) -> Path:
    """dhir_rt.o for this MPI and these flags, compiled once (mpi.h alone takes ~0.1 s)."""
    key = _digest(
        {
            "format": CACHE_FORMAT,
            "runtime": [RUNTIME_SOURCE.read_text(), RUNTIME_HEADER.read_text()],
            "flags": [*clang_flags, *C_FLAGS],
            "clang": _identity(tools.clang),
            "mpi": [mpi.name, str(mpi.prefix), mpi.version],
        }
    )
    target = root / f"dhir_rt-{key[:24]}.o"
    if not target.is_file():
        partial = Path(tempfile.mkdtemp(prefix="runtime-", dir=root))
        try:
            _run(
                timing,
                "clang (runtime)",
                partial,
                [
                    tools.clang,
                    *clang_flags,
                    *C_FLAGS,
                    *mpi.compile_flags,
                    "-c",
                    RUNTIME_SOURCE,
                    "-o",
                    "dhir_rt.o",
                ],
            )
            os.replace(partial / "dhir_rt.o", target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return target


def _run(timing: Timing, stage: str, cwd: Path, command: Sequence[object]) -> None:
    argv = [str(word) for word in command]
    with timing.stage(stage):
        result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    problem = "failed DLTI query" in result.stderr  # mlir-opt says so, yet exits 0
    if result.returncode != 0 or problem:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-30:])
        detail = (
            'the module needs `dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">` '
            '(or "OpenMPI") to lower mpi ops; '
            if problem
            else ""
        )
        raise DhirError(
            [
                Diagnostic(
                    f"build stage '{stage}' failed (exit status {result.returncode}); {detail}"
                    f"command: {' '.join(argv)}\nin {cwd}\n{tail}"
                )
            ]
        )


def _patch_llvm_ir(ll: str, mpi: MpiInstall) -> str:
    # The harness's C `main` calls the entry; an MLIR function named main would clash with it.
    ll = _MAIN_SYMBOL.sub("@dhir_mlir_main", ll)
    return _OPENMPI_OPS.sub(r"@ompi_mpi_op_\1", ll) if mpi.name == "openmpi" else ll


def _check_mpi_use(mlir: str, mpi: MpiInstall) -> None:
    """Refuse, with the reason, what MLIR 22 would lower wrongly or not at all."""
    used = {match.group(1) for match in _MPI_OP.finditer(mlir)}
    if not used:
        return
    problems: list[str] = []
    declared = _MPI_IMPLEMENTATION.search(mlir)
    if declared is None:
        problems.append(
            f"the module uses mpi ops but declares no MPI; add `dlti.map = #dlti.map<"
            f'"MPI:Implementation" = "{mpi.dlti_name}">` to its attributes'
        )
    elif declared.group(1) != mpi.dlti_name:
        problems.append(
            f'the module is lowered for MPI:Implementation "{declared.group(1)}" but is being '
            f'built with {mpi.name} ("{mpi.dlti_name}"); their ABIs differ, so lower it again '
            "for this MPI"
        )
    unsupported = sorted(used - LOWERED_MPI_OPS)
    if unsupported:
        instead = [
            f"mpi.{op} -> {RUNTIME_REPLACEMENTS[op]}()"
            for op in unsupported
            if op in RUNTIME_REPLACEMENTS
        ]
        problems.append(
            f"MLIR 22 cannot lower {', '.join('mpi.' + op for op in unsupported)} "
            "(it leaves them in "
            "place); call dhir's runtime instead" + (f": {', '.join(instead)}" if instead else "")
        )
    owned = sorted(used & {"init", "finalize"})
    if owned:
        problems.append(
            f"the module calls {', '.join('mpi.' + op for op in owned)}, but dhir's generated main "
            "initialises and finalises MPI around the entry; remove these ops"
        )
    if mpi.name == "openmpi" and "comm_split" in used:
        problems.append(
            "mpi.comm_split crashes with OpenMPI in MLIR 22 (it loads the "
            'communicator as i32); build with mpi="mpich"'
        )
    problems += _check_buffers(mlir)
    if problems:
        raise DhirError([Diagnostic(p) for p in problems])


def _check_buffers(mlir: str) -> list[str]:
    """MLIR 22 sends sizes[0] elements from the base pointer: only contiguous 1-D is right."""
    problems = []
    for line in mlir.splitlines():
        match = _MPI_OP.search(line)
        if match is None or match.group(1) not in _BUFFER_OPS:
            continue
        for type_ in _memref_types(line):
            shape, _, layout = type_[len("memref<") : -1].partition(",")
            dims = shape.split("x")[:-1]
            if len(dims) != 1 or (layout and not _UNIT_STRIDE.fullmatch(layout)):
                problems.append(
                    f"mpi.{match.group(1)} on {type_}: MLIR 22 transfers only sizes[0] contiguous "
                    "elements, so buffers must be contiguous 1-D memrefs (collapse them with "
                    f"memref.collapse_shape first): {line.strip()}"
                )
    return problems


def _memref_types(text: str) -> list[str]:
    found = []
    start = text.find("memref<")
    while start >= 0:
        depth, end = 0, start
        for end in range(start + len("memref"), len(text)):
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            if depth == 0:
                break
        found.append(text[start : end + 1])
        start = text.find("memref<", end)
    return found


def _check_lowered(path: Path) -> None:
    text = path.read_text()
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


def _cache_key(
    mlir: str,
    harness: str,
    passes: Sequence[str],
    clang_flags: Sequence[str],
    tools: LlvmTools,
    mpi: MpiInstall,
    gpu: "GpuBuild | None" = None,
) -> str:
    gpu_parts = {"gpu": gpu.key()} if gpu is not None else {}
    return _digest(
        {
            **gpu_parts,
            "format": CACHE_FORMAT,
            "mlir": mlir,
            "harness": harness,
            "runtime": [RUNTIME_SOURCE.read_text(), RUNTIME_HEADER.read_text()],
            "passes": list(passes),
            "flags": [*clang_flags, *C_FLAGS],
            "tools": [_identity(p) for p in (tools.mlir_opt, tools.mlir_translate, tools.clang)],
            "mpi": [mpi.name, str(mpi.prefix), mpi.version],
        }
    )


def _identity(tool: Path) -> list[object]:
    """Stands for the tool's version: an upgrade replaces the binary."""
    real = tool.resolve()
    info = real.stat()
    return [str(real), info.st_size, info.st_mtime_ns]


def _digest(parts: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
