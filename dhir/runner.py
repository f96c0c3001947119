"""`dhir.run` (dhir.runner.run): one call from a program and NumPy inputs to the results."""

import os
import sys
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dhir.backends.interp import run_interp
from dhir.backends.native import run_native
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.ir.text import parse_file, parse_string
from dhir.placement.list_scheduling import DEFAULT_ALGORITHM
from dhir.toolchain.build import Timing
from dhir.toolchain.signals import ending_cleanly
from dhir.toolchain.signature import clear_outputs, entry_signature, save_outputs
from dhir.transforms.codedrop import auto_codedrop

BACKENDS = ("native", "interp")
DEFAULT_BACKEND = "native"


def load_program(program: str | os.PathLike[str] | ModuleOp) -> ModuleOp:
    """A module from a ModuleOp (a copy: running lowers it, and the caller's stays as it
    was), a path to a .mlir file, or MLIR text (see `names_a_file`)."""
    if isinstance(program, ModuleOp):
        return program.clone()
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
    ranks: int = 2,
    backend: str = DEFAULT_BACKEND,
    mpi: str = "mpich",
    timeout: float = 300.0,
    output_dir: str | Path | None = None,
    threads: int | None = None,
    placement: str = DEFAULT_ALGORITHM,
    costs: str | Path | None = None,
    profile: str | Path | None = None,
    gpu_fallback: str = "none",
    codedrop: bool = True,
    target: str = "any",
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
    during the call stop every process of the run first, then take their usual effect."""
    with ending_cleanly(redeliver=True):
        return run_module(
            load_program(program),
            entry,
            list(args),
            backend,
            ranks=ranks,
            mpi=mpi,
            timeout=timeout,
            output_dir=Path(output_dir) if output_dir is not None else None,
            threads=threads,
            placement=placement,
            costs=Path(costs) if costs is not None else None,
            profile=Path(profile) if profile is not None else None,
            gpu_fallback=gpu_fallback,
            codedrop=codedrop,
            target=target,
        )


def drop_code(module: ModuleOp, entry: str, enabled: bool = True, target: str = "any") -> None:
    """CodeDrop on an entry without schedules (dhir-codedrop), saying so on stderr."""
    if not enabled:
        return
    line = auto_codedrop(module, entry, target)
    if line is not None:
        print(line, file=sys.stderr)


def run_module(
    module: ModuleOp,
    entry: str,
    inputs: list[object],
    backend: str = DEFAULT_BACKEND,
    *,
    ranks: int = 1,
    mpi: str = "mpich",
    timeout: float = 300.0,
    output_dir: Path | None = None,
    timing: Timing | None = None,
    threads: int | None = None,
    placement: str = DEFAULT_ALGORITHM,
    costs: Path | None = None,
    profile: Path | None = None,
    hostfile: Path | None = None,
    gpu_fallback: str = "none",
    codedrop: bool = True,
    target: str = "any",
) -> list[np.ndarray]:
    """Run `module` on the chosen backend: what `dhir.run` and `dhir run` share. Rank 0's
    results are written to `output_dir` (argK.npy) when given."""
    if ranks < 1:
        raise DhirError([Diagnostic(f"the rank count must be at least 1, got {ranks}")])
    if output_dir is not None:
        # Before building too: a build that fails leaves no earlier results behind.
        clear_outputs(entry_signature(module, entry), output_dir)
    if backend == "interp":
        if profile is not None:
            raise DhirError(
                [Diagnostic("profiles time tasks on MPI ranks; use them with the native backend")]
            )
        results = run_interp(module, entry, inputs, timeout)
        if output_dir is not None:
            save_outputs(results, entry_signature(module, entry), output_dir)
        return results
    if backend == "native":
        drop_code(module, entry, codedrop, target)
        return run_native(
            module,
            entry,
            inputs,
            ranks,
            mpi,
            output_dir,
            timeout,
            timing,
            threads=threads,
            placement=placement,
            costs=costs,
            profile=profile,
            hostfile=hostfile,
            gpu_fallback=gpu_fallback,
        )
    raise DhirError(
        [Diagnostic(f"unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}")]
    )
