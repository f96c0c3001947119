"""GPU tasks in the native backend: loops mapped to kernels, the kernel pipeline, CUDA tools.

Before placement, `prepare_gpu_tasks` turns each GPU task written as parallel loops
(`scf.parallel`, `affine.parallel`, linalg) into kernels with mlir-opt-22: linalg and affine
become `scf.parallel`, each loop nest is tiled (a block of threads per tile, never one thread
per block) and mapped to a grid of blocks x threads (`gpu.launch`). Tasks written as an
explicit `gpu.launch` keep it. Every kernel is then named after its task and put in the
`gpu.module` of its chip (`dhir_sm_90`, ...), so one program may hold tasks for several
chips; each chip gets its own binary, loaded only when one of its kernels first runs.

`GpuBuild` says how the build lowers the kernels: the chips, the PTX level of each
(dhir/targets.py), and the format: `fatbin` (SASS for the chip plus PTX) when the CUDA
toolkit's ptxas, fatbinary and libdevice are found, else `isa` (PTX, compiled by the driver
when the program loads it), and what linking the GPU runtime (dhir/runtime/dhir_gpu_rt.c,
compiled by the build like dhir's C runtime) needs.
"""

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects import affine, func, scf
from xdsl.dialects.builtin import IndexType, ModuleOp, SymbolRefAttr
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from dhir.dialects import gpu as dgpu
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.diagnostics import DhirError, Diagnostic, error_at
from dhir.runtime import GPU_RUNTIME_SOURCE
from dhir.targets import UnknownArchError, ptx_feature
from dhir.transforms.gpu_data import is_gpu_task, task_label

DEFAULT_CHIP = "sm_80"  # when no GPU is visible to pick one (see default_chip)
FORMATS = ("fatbin", "isa", "bin")
INSTALL_HINT = "pip install 'dhir[cuda]'"

# Threads per block along each mapped dimension, by loop depth; the first dimension is the
# innermost (contiguous) one, see _reverse_dims.
TILE_SIZES: dict[int, tuple[int, ...]] = {1: (256,), 2: (32, 8), 3: (32, 4, 2)}
_VIEW_OPS = frozenset(
    {
        "memref.subview",
        "memref.cast",
        "memref.reinterpret_cast",
        "memref.collapse_shape",
        "memref.expand_shape",
        "memref.transpose",
        "memref.view",
        "memref.assume_alignment",
    }
)
# Ops a GPU task's host code may apply to its memrefs (now device buffers): they only read
# the descriptor, or hand the buffer to the device.
_HOST_OK = _VIEW_OPS | {"memref.dim", "memref.rank", "memref.extract_strided_metadata"}
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    homes = list(_toolkit_candidates())
    toolkit = next((h for h in homes if _libdevice(h).is_file()), None)
    return CudaTools(_tool("ptxas", homes), _tool("fatbinary", homes), toolkit)


def _toolkit_candidates() -> Iterator[Path]:
    for variable in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if value := os.environ.get(variable):
            yield Path(value)
    for site in _site_dirs():
        yield site / "nvidia" / "cu13"
        yield site / "nvidia" / "cuda_nvcc"
    yield Path("/usr/local/cuda")
    yield from sorted(Path("/usr/local").glob("cuda-*"), reverse=True)
    on_path = shutil.which("ptxas")
    if on_path is not None:
        yield Path(on_path).resolve().parent.parent


def _site_dirs() -> list[Path]:
    return [Path(p) for p in sys.path if p.endswith("site-packages")]


def _libdevice(home: Path) -> Path:
    return home / "nvvm" / "libdevice" / "libdevice.10.bc"


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


@functools.cache
def default_chip() -> str:
    """The chip for `{kind = "gpu"}` tasks: $DHIR_GPU_CHIP, else the first GPU's compute
    capability from nvidia-smi, else sm_80."""
    configured = os.environ.get("DHIR_GPU_CHIP")
    if configured:
        return configured
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            result = subprocess.run(
                [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return DEFAULT_CHIP
        first = result.stdout.strip().splitlines()[:1]
        if result.returncode == 0 and first and re.fullmatch(r"\d+\.\d+", first[0].strip()):
            return "sm_" + first[0].strip().replace(".", "")
    return DEFAULT_CHIP


def chip_of(task: TaskOp) -> str:
    arch = task.target_info().arch
    return arch if arch is not None and arch.startswith("sm_") else default_chip()


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

    def key(self) -> list[str]:
        """What shapes the executable besides the pass pipeline."""
        tools = [str(p) for p in (self.tools.ptxas, self.tools.fatbinary, self.tools.toolkit)]
        return [GPU_RUNTIME_SOURCE.read_text(), *tools]

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


def module_name(chip: str) -> str:
    return f"dhir_{chip}"


def _as_pipeline_element(flag: str) -> str:
    """`--name` -> `name`, `--name=a=1 b=2` -> `name{a=1 b=2}`."""
    name, _, options = flag.removeprefix("--").partition("=")
    return f"{name}{{{options}}}" if options else name


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


# --- loops to kernels ------------------------------------------------------------------


def prepare_gpu_tasks(module: ModuleOp, mlir_opt: Path) -> GpuBuild | None:
    """Map GPU tasks' loops to kernels, check their bodies and name their kernels by chip;
    how to build them (None when the module has no GPU task)."""
    tasks = [t for t in module.walk() if isinstance(t, TaskOp) and is_gpu_task(t)]
    if not tasks:
        return None
    position = {
        task: k
        for schedule in {t.parent_op() for t in tasks}
        if isinstance(schedule, ScheduleOp)
        for k, task in enumerate(schedule.tasks())
    }
    labels = {task: task_label(task, position.get(task)) for task in tasks}
    loops = [task for task in tasks if _needs_mapping(task, labels[task])]
    if loops:
        _map_loops(loops, labels, mlir_opt)
    chips: set[str] = set()
    for number, task in enumerate(tasks):
        _check_host_code(task, labels[task])
        chip = chip_of(task)
        try:
            ptx_feature(chip)
        except UnknownArchError as error:
            raise error_at(task, f"{labels[task]}: {error}") from None
        chips.add(chip)
        _name_kernels(task, chip, number)
    ordered = tuple(sorted(chips))
    tools = find_cuda_tools()
    return GpuBuild(ordered, choose_format(ordered, tools), tools)


def _is_loop(op: Operation) -> bool:
    return isinstance(op, scf.ParallelOp | affine.ParallelOp | LinalgStructuredOperation)


def _needs_mapping(task: TaskOp, label: str) -> bool:
    launches = [op for op in task.body.walk() if isinstance(op, dgpu.LaunchOp)]
    outside = [op for op in _host_ops(task.body.block) if _is_loop(op)]
    if launches and outside:
        raise error_at(
            outside[0],
            f"{label} mixes parallel loops with an explicit gpu.launch; write its body either "
            "as parallel loops (dhir maps them to the GPU) or as gpu.launch ops",
        )
    for op in outside:
        if _reduces(op):
            raise error_at(
                op,
                f"{label}: this parallel loop reduces (init/scf.reduce), which dhir cannot "
                "map to the GPU yet; compute the reduction in a CPU task, or write the kernel "
                "as a gpu.launch",
            )
    if launches or outside:
        return bool(outside)
    raise error_at(
        task,
        f"{label} has no parallel loop (scf.parallel, affine.parallel, linalg) or gpu.launch "
        "to run on the GPU; write its work as one of those, or bind it to a CPU target",
    )


def _reduces(op: Operation) -> bool:
    if isinstance(op, scf.ParallelOp):
        return bool(op.initVals)
    reductions = op.properties.get("reductions")
    return isinstance(op, affine.ParallelOp) and bool(getattr(reductions, "data", ()))


def _host_ops(block: Block) -> Iterator[Operation]:
    """Ops of a task body, not looking inside kernels."""
    for op in block.ops:
        yield op
        if isinstance(op, dgpu.LaunchOp):
            continue
        for region in op.regions:
            for inner in region.blocks:
                yield from _host_ops(inner)


def _check_host_code(task: TaskOp, label: str) -> None:
    listed = set(task.memrefs)
    for op in _host_ops(task.body.block):
        if op.name in _HOST_OK or isinstance(op, dgpu.LaunchOp):
            continue
        used = [v for v in op.operands if v in listed]
        if used:
            name = f"%{used[0].name_hint}" if used[0].name_hint else "a listed memref"
            raise error_at(
                op,
                f"{label} uses {name} in '{op.name}' outside a kernel; a GPU task's memrefs "
                "live on the device, so move this into the parallel loop (or the gpu.launch), "
                "or into a CPU task",
            )


def _name_kernels(task: TaskOp, chip: str, number: int) -> None:
    name = task.attributes.get("name")
    text = getattr(name, "data", "")
    base = text if isinstance(text, str) and _SIMPLE_NAME.fullmatch(text) else "task"
    launches = [op for op in task.body.walk() if isinstance(op, dgpu.LaunchOp)]
    for k, launch in enumerate(launches):
        launch.properties["module"] = SymbolRefAttr(module_name(chip))
        launch.properties["function"] = SymbolRefAttr(f"{base}{number}_kernel{k}")


def _map_loops(tasks: Sequence[TaskOp], labels: dict[TaskOp, str], mlir_opt: Path) -> None:
    functions = [_to_function(task, f"dhir_gpu_task{k}") for k, task in enumerate(tasks)]
    module = ModuleOp([f for f, _ in functions])
    if any(isinstance(op, affine.ParallelOp | LinalgStructuredOperation) for op in module.walk()):
        module = _mlir_opt(
            module,
            "builtin.module(func.func(convert-linalg-to-parallel-loops),lower-affine)",
            mlir_opt,
            labels,
        )
    mapped: dict[str, func.FuncOp] = {}
    for depth, group in _by_depth(module).items():
        sizes = ",".join(str(s) for s in TILE_SIZES[depth])
        # Fixed-size tiles with a bounds check inside: a loop shorter than one tile still
        # gets a block of threads, which canonicalizing min/max bounds would fold away.
        # No canonicalization before mapping: it would fold a one-iteration loop into
        # host code.
        pipeline = (
            "builtin.module(func.func(scf-parallel-loop-tiling{"
            f"parallel-loop-tile-sizes={sizes} no-min-max-bounds=true}},gpu-map-parallel-loops,"
            "convert-parallel-loops-to-gpu,canonicalize))"
        )
        result = _mlir_opt(ModuleOp(group), pipeline, mlir_opt, labels)
        mapped.update({f.sym_name.data: f for f in result.ops if isinstance(f, func.FuncOp)})
    for k, (task, (_, free)) in enumerate(zip(tasks, functions)):
        _take_back(task, mapped[f"dhir_gpu_task{k}"], free, labels[task])


def _to_function(task: TaskOp, name: str) -> tuple[func.FuncOp, list[SSAValue]]:
    """Move the task's body into a function of the values it uses from outside."""
    ops = list(task.body.block.ops)[:-1]  # all but dhir.yield
    inside = {nested for op in ops for nested in op.walk()}
    free: dict[SSAValue, None] = {}
    for op in inside:
        for value in op.operands:
            if not _defined_in(value, inside):
                free[value] = None
    block = Block(arg_types=[v.type for v in free])
    mapping = dict(zip(free, block.args))
    for op in ops:
        op.detach()
        block.add_op(op)
    for op in inside:
        for index, value in enumerate(op.operands):
            if value in mapping:
                op.operands[index] = mapping[value]
    for loop in [op for op in block.ops if isinstance(op, scf.ParallelOp)]:
        _reverse_dims(loop)
    block.add_op(func.ReturnOp())
    types = ([v.type for v in free], [])
    return func.FuncOp(name, types, Region(block), "private"), list(free)


def _defined_in(value: SSAValue, inside: set[Operation]) -> bool:
    if isinstance(value, BlockArgument):
        return value.block.parent_op() in inside
    return value.owner in inside


def _reverse_dims(loop: scf.ParallelOp) -> None:
    """Make the innermost (contiguous, in row-major memrefs) dimension the first, which
    gpu-map-parallel-loops gives to thread x: neighbouring threads then touch
    neighbouring elements. The iteration space is the same."""
    n = len(loop.lowerBound)
    if n < 2 or loop.initVals:
        return
    bounds = [list(loop.lowerBound), list(loop.upperBound), list(loop.step)]
    loop.operands = [*(v for group in bounds for v in reversed(group))]
    block = loop.body.block
    old = list(block.args)
    new = [block.insert_arg(IndexType(), len(block.args)) for _ in range(n)]
    for i, arg in enumerate(old):
        arg.replace_all_uses_with(new[n - 1 - i])
    for arg in old:
        block.erase_arg(arg)


def _by_depth(module: ModuleOp) -> dict[int, list[func.FuncOp]]:
    """Functions grouped by the deepest of their outermost parallel loops (1 to 3)."""
    groups: dict[int, list[func.FuncOp]] = {}
    for function in [f for f in module.ops if isinstance(f, func.FuncOp)]:
        depths = [
            len(op.lowerBound)
            for op in function.walk()
            if isinstance(op, scf.ParallelOp) and not _inside_parallel(op)
        ]
        depth = min(3, max(depths, default=1))
        function.detach()
        groups.setdefault(depth, []).append(function)
    return groups


def _inside_parallel(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, scf.ParallelOp):
            return True
        parent = parent.parent_op()
    return False


def _mlir_opt(
    module: ModuleOp, pipeline: str, mlir_opt: Path, labels: dict[TaskOp, str]
) -> ModuleOp:
    from dhir.api import parse_string, print_module

    result = subprocess.run(
        [str(mlir_opt), f"--pass-pipeline={pipeline}", "--mlir-print-op-generic", "-"],
        input=print_module(module),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-20:])
        names = "; ".join(labels.values())
        raise DhirError(
            [Diagnostic(f"mapping GPU tasks' loops to kernels failed ({names}):\n{tail}")]
        )
    return parse_string(result.stdout, "<mlir-opt: GPU loops>", verify=False)


def _take_back(task: TaskOp, function: func.FuncOp, free: list[SSAValue], label: str) -> None:
    """The mapped body back into the task, using the task's values again."""
    block = function.body.block
    mapping = dict(zip(block.args, free))
    ops = list(block.ops)[:-1]  # all but func.return
    for op in ops:
        for nested in op.walk():
            for index, value in enumerate(nested.operands):
                if value in mapping:
                    nested.operands[index] = mapping[value]
            if isinstance(nested, scf.ParallelOp) and not _inside_launch(nested):
                raise error_at(
                    task,
                    f"{label}: a parallel loop could not be mapped to the GPU; write the "
                    "kernel as a gpu.launch",
                )
    yield_op = task.body.block.last_op
    assert yield_op is not None
    for op in ops:
        op.detach()
        task.body.block.insert_op_before(op, yield_op)


def _inside_launch(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, dgpu.LaunchOp):
            return True
        parent = parent.parent_op()
    return False
