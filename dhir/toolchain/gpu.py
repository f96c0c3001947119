"""Building GPU kernels: the kernel pipeline, the CUDA tools, what the executable links.

`dhir-gpu-kernels` (dhir/transforms/gpu_kernels.py) has already turned each GPU task into
kernels in the `gpu.module` of its chip. `GpuBuild` says how the build lowers them: the
chips, the PTX level of each (dhir/targets.py), and the format: `fatbin` (SASS for the chip
plus PTX) when the CUDA toolkit's ptxas, fatbinary and libdevice are found, else `isa` (PTX,
compiled by the driver when the program loads it), and what linking the GPU runtime
(dhir/runtime/dhir_gpu_rt.c, compiled by the build like dhir's C runtime) needs. Each chip
gets its own binary, loaded only when one of its kernels first runs.
"""

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.runtime import GPU_RUNTIME_SOURCE
from dhir.targets import ptx_feature
from dhir.toolchain.tools import cuda_homes, file_identity, libdevice
from dhir.transforms.gpu_kernels import kernel_chips, module_name

FORMATS = ("fatbin", "isa", "bin")
INSTALL_HINT = "pip install 'dhir[cuda]'"

# --- CUDA tools ------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaTools:
    """What was found of the CUDA toolkit (any part may be missing)."""

    ptxas: Path | None
    fatbinary: Path | None
    toolkit: Path | None  # a directory holding nvvm/libdevice/libdevice.10.bc

    @property
    def libdevice(self) -> bool:
        return self.toolkit is not None


@functools.cache
def find_cuda_tools() -> CudaTools:
    """ptxas, fatbinary and libdevice: from $CUDA_HOME (or CUDA_PATH, CUDA_ROOT), the
    NVIDIA wheels of `dhir[cuda]` (nvidia/cu13, nvidia/cuda_nvcc), /usr/local/cuda*, or
    ptxas on PATH."""
    homes = list(cuda_homes())
    toolkit = next((h for h in homes if libdevice(h).is_file()), None)
    return CudaTools(_tool("ptxas", homes), _tool("fatbinary", homes), toolkit)


def _tool(name: str, homes: Sequence[Path]) -> Path | None:
    for home in homes:
        if (home / "bin" / name).is_file():
            return home / "bin" / name
    found = shutil.which(name)
    return Path(found) if found is not None else None


@functools.cache
def ptxas_supports(ptxas: Path, chip: str) -> bool:
    """Whether this ptxas assembles for `chip` (CUDA 13 dropped sm_70 and older)."""
    version = ptx_feature(chip).removeprefix("+ptx")
    ptx = f".version {version[:-1]}.{version[-1]}\n.target {chip}\n.address_size 64\n"
    with tempfile.TemporaryDirectory(prefix="dhir-ptxas-") as tmp:
        source = Path(tmp) / "probe.ptx"
        source.write_text(ptx)
        result = subprocess.run(
            [str(ptxas), f"-arch={chip}", str(source), "-o", str(Path(tmp) / "probe.cubin")],
            capture_output=True,
            check=False,
        )
    return result.returncode == 0


# --- the build -------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuBuild:
    """How kernels are compiled and what the executable links for them."""

    chips: tuple[str, ...]
    format: str
    tools: CudaTools

    def passes(self) -> list[str]:
        """Kernels go first: outlined per chip, lowered to NVVM and serialized, before the
        host pipeline (OpenMP included) sees the module. Host-side GPU ops are made
        asynchronous on a stream (gpu-async-region), which the host waits for before any
        op with side effects (an MPI message, a copy's reader)."""
        kernel = ",".join(
            (
                "expand-strided-metadata",
                "lower-affine",
                "convert-scf-to-cf",
                "convert-arith-to-llvm",
                "arith-expand",
                "convert-gpu-to-nvvm",
                "canonicalize",
                "cse",
                "reconcile-unrealized-casts",
            )
        )
        toolkit = f" toolkit={self.tools.toolkit}" if self.tools.toolkit is not None else ""
        return [
            "gpu-kernel-outlining",
            "func.func(gpu-async-region)",
            *(
                f"nvvm-attach-target{{module=^{module_name(c)}$ chip={c} "
                f"features={ptx_feature(c)} O=3}}"
                for c in self.chips
            ),
            f"gpu.module({kernel})",
            f"gpu-module-to-binary{{format={self.format}{toolkit}}}",
        ]

    def mlir_opt_args(self, host_passes: Sequence[str]) -> list[str]:
        """One `--pass-pipeline` for mlir-opt: the kernel passes, then `host_passes`
        (mlir-opt flags such as `--lower-affine`), with the host-side lowering of the GPU
        ops (gpu-to-llvm) before convert-to-llvm."""
        host = [_as_pipeline_element(flag) for flag in host_passes]
        where = host.index("convert-to-llvm") if "convert-to-llvm" in host else len(host)
        host.insert(where, "gpu-to-llvm")
        return [f"--pass-pipeline=builtin.module({','.join([*self.passes(), *host])})"]

    @property
    def link_flags(self) -> tuple[str, ...]:
        return ("-ldl",)  # the runtime loads the CUDA driver with dlopen

    def key(self) -> list[object]:
        """What shapes the executable besides the pass pipeline: the CUDA tools by their
        files (a toolkit upgraded in place reused the old ptxas's cubins), not their
        places alone."""
        tools = self.tools
        files = (
            tools.ptxas,
            tools.fatbinary,
            None if tools.toolkit is None else libdevice(tools.toolkit),
        )
        return [
            GPU_RUNTIME_SOURCE.read_text(),
            *(None if p is None else file_identity(p) for p in files),
        ]

    def check_lowered(self, lowered: Path) -> None:
        """PTX left calling libdevice (`__nv_expf`, ...) would fail when the driver loads
        it; say so now."""
        if self.tools.libdevice or "__nv_" not in lowered.read_text():
            return
        raise DhirError(
            [
                Diagnostic(
                    "a GPU kernel calls math functions (math.exp, ...), which need NVIDIA's "
                    "libdevice from the CUDA toolkit, and none was found; install it with "
                    f"`{INSTALL_HINT}` (or set CUDA_HOME to a CUDA toolkit)"
                )
            ]
        )


def _as_pipeline_element(flag: str) -> str:
    """`--name` -> `name`, `--name=a=1 b=2` -> `name{a=1 b=2}`."""
    name, _, options = flag.removeprefix("--").partition("=")
    return f"{name}{{{options}}}" if options else name


def gpu_build(module: ModuleOp) -> GpuBuild | None:
    """How to build the kernels of `module` (after dhir-gpu-kernels); None without GPU
    tasks."""
    chips = kernel_chips(module)
    if not chips:
        return None
    tools = find_cuda_tools()
    return GpuBuild(chips, choose_format(chips, tools), tools)


def choose_format(chips: Sequence[str], tools: CudaTools) -> str:
    """fatbin when the toolkit can build it for every chip, else PTX; DHIR_GPU_FORMAT
    (fatbin, isa or bin) overrides."""
    forced = os.environ.get("DHIR_GPU_FORMAT")
    if forced:
        if forced not in FORMATS:
            raise DhirError(
                [Diagnostic(f"DHIR_GPU_FORMAT={forced}: choose one of {', '.join(FORMATS)}")]
            )
        if forced != "isa" and (tools.ptxas is None or tools.fatbinary is None):
            raise DhirError(
                [
                    Diagnostic(
                        f"DHIR_GPU_FORMAT={forced} needs the CUDA toolkit's ptxas and fatbinary, "
                        f"which were not found; install them with `{INSTALL_HINT}` (or set "
                        "CUDA_HOME), or use DHIR_GPU_FORMAT=isa"
                    )
                ]
            )
        return forced
    ptxas = tools.ptxas
    if ptxas is None or tools.fatbinary is None or not tools.libdevice:
        return "isa"
    return "fatbin" if all(ptxas_supports(ptxas, c) for c in chips) else "isa"
