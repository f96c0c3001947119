"""The native backend: place, lower to MPI, build with LLVM 22, run under mpirun."""

import os
import platform
from pathlib import Path

import numpy as np
from xdsl.dialects import affine, func, scf
from xdsl.dialects.builtin import AnyFloat, ModuleOp, UnitAttr
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation

from dhir.api import print_module, run_pipeline
from dhir.backends.signature import EntrySignature, check_inputs, entry_signature
from dhir.dialects.dhir import TaskOp
from dhir.ir.diagnostics import DhirError, Diagnostic, loc_of
from dhir.targets import DeviceKind
from dhir.toolchain.build import Timing, build_executable
from dhir.toolchain.launch import run_executable


def compile_native(
    module: ModuleOp,
    entry: str = "main",
    ranks: int = 1,
    mpi: str = "mpich",
    timing: Timing | None = None,
) -> tuple[Path, EntrySignature]:
    """Build an executable for `ranks` ranks; `module` is lowered in place. Parallel
    loops run on OpenMP threads (see `openmp_safe`)."""
    if ranks < 1:
        raise DhirError([Diagnostic(f"the rank count must be at least 1, got {ranks}")])
    timing = timing if timing is not None else Timing()
    signature = entry_signature(module, entry)
    _check_targets(module)
    _mark_entry(module, entry)
    openmp = openmp_safe(module)
    with timing.stage("dhir passes"):
        # Not re-verified after each pass: that would cost more than the passes, and
        # mlir-opt-22 verifies the lowered module in full next (dhir-opt and the lit
        # tests verify after every pass).
        run_pipeline(
            module,
            f"dhir-place{{ranks={ranks}}},"
            f"dhir-lower-to-mpi{{ranks={ranks} mpi={mpi} entry={entry}}}",
            verify_each=False,
        )
    with timing.stage("print"):
        text = print_module(module)
    exe = build_executable(text, signature, ranks, mpi, timing=timing, openmp=openmp)
    return exe, signature


def openmp_safe(module: ModuleOp) -> bool:
    """Whether to run parallel loops on threads: when there are any, and none reduces
    floats, whose sum would then depend on the thread count. (Results must equal the
    sequential interpreter's bit for bit; such modules run their loops sequentially.)"""
    parallel = False
    for op in module.walk():
        if isinstance(op, scf.ParallelOp):
            parallel = True
            if any(isinstance(v.type, AnyFloat) for v in op.initVals):
                return False
        elif isinstance(op, affine.ParallelOp | LinalgStructuredOperation):
            parallel = True
    return parallel


def default_threads(ranks: int) -> int:
    """The node's cores shared among its ranks (all ranks run on this node so far)."""
    return max(1, (os.cpu_count() or 1) // ranks)


def run_native(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    ranks: int = 1,
    mpi: str = "mpich",
    output_dir: Path | None = None,
    timeout: float = 300.0,
    timing: Timing | None = None,
    threads: int | None = None,
) -> list[np.ndarray]:
    """Build (or reuse) and run; `threads` per rank for parallel loops (default: the
    cores divided among the ranks)."""
    timing = timing if timing is not None else Timing()
    signature = entry_signature(module, entry)
    arrays = check_inputs(signature, inputs)
    exe, signature = compile_native(module, entry, ranks, mpi, timing)
    if threads is not None and threads < 1:
        raise DhirError([Diagnostic(f"the thread count must be at least 1, got {threads}")])
    with timing.stage("run"):
        return run_executable(
            exe,
            signature,
            ranks,
            arrays,
            mpi=mpi,
            output_dir=output_dir,
            timeout=timeout,
            threads=threads if threads is not None else default_threads(ranks),
        )


def _check_targets(module: ModuleOp) -> None:
    """The native backend runs CPU tasks on this machine's kind of CPU, so far."""
    local = _local_arch()
    for task in module.walk():
        if not isinstance(task, TaskOp):
            continue
        info = task.target_info()
        if info.kind == DeviceKind.GPU:
            raise DhirError(
                [
                    Diagnostic(
                        f"this task targets {info}, a GPU; the native backend does not run GPU "
                        "tasks yet (run it with --backend interp, or bind it to a CPU target)",
                        loc_of(task),
                    )
                ]
            )
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


def _local_arch() -> str:
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


def _mark_entry(module: ModuleOp, entry: str) -> None:
    for op in module.walk():
        if isinstance(op, func.FuncOp) and op.sym_name.data == entry:
            # The harness calls the entry through MLIR's C interface.
            op.attributes["llvm.emit_c_interface"] = UnitAttr()
