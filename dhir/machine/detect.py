"""Describe this machine without measuring anything: one node, its CPU (cores, memory, arch,
cache sizes) and its NVIDIA GPUs (from nvidia-smi, when installed). Rates and links are
typical values, listed as guesses; `dhir calibrate` measures them.
"""

import functools
import os
import re
import shutil
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.description import (
    GUESSED_INTRA_NODE,
    GUESSED_NETWORK,
    DescriptionError,
    Device,
    Node,
    System,
    guess_device,
    with_core_guesses,
)
from dhir.machine.files import SYSTEM_ENV, default_system_path, read_system
from dhir.targets import UnknownArchError, host_arch, kind_of_arch

NVIDIA_SMI_QUERY = (
    "--query-gpu=index,name,compute_cap,memory.total",
    "--format=csv,noheader,nounits",
)
NVIDIA_SMI_TIMEOUT_S = 20.0
MEMINFO = Path("/proc/meminfo")
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def detect(cores: int | None = None) -> System:
    """This machine as a one-node description (see the module's docstring); `cores`: as
    if its CPU had that many (to describe another machine of its kind)."""
    host = socket.gethostname() or "localhost"
    node_name = host.split(".")[0] or "node0"
    try:
        devices = (local_cpu(cores), *local_gpus())
        node = Node(node_name, devices, host=host)
    except DescriptionError as error:
        raise DhirError([Diagnostic(f"describing this machine: {error}")]) from None
    return System((node,), GUESSED_NETWORK, GUESSED_INTRA_NODE, name=node_name)


def load_local_system() -> System:
    """This machine's description: the file named by $DHIR_SYSTEM if set, else the one
    `dhir calibrate` wrote (default_system_path()) if there is one, else detect()."""
    if os.environ.get(SYSTEM_ENV):
        return _named_system(Path(os.environ[SYSTEM_ENV]))
    file = local_system_file()
    return read_system(file) if file is not None else detect()


def local_system_file() -> Path | None:
    """The file `load_local_system` reads (None: it detects), for errors about it."""
    named = os.environ.get(SYSTEM_ENV)
    if named:
        return Path(named)
    calibrated = default_system_path()
    return calibrated if calibrated.is_file() else None


def _named_system(path: Path) -> System:
    """The description $DHIR_SYSTEM names; its errors say where the name came from, as a
    command line that names no file would otherwise leave the user guessing."""
    try:
        return read_system(path)
    except DhirError as error:
        why = f"(named by ${SYSTEM_ENV})"
        told = [replace(d, message=f"{d.message} {why}") for d in error.diagnostics]
        raise DhirError(told, error.sources) from None


def local_cpu(cores: int | None = None) -> Device:
    arch = host_arch()
    try:
        kind_of_arch(arch)
    except UnknownArchError as error:
        raise DhirError(
            [Diagnostic(f"this machine's CPU is not one dhir knows: {error}")]
        ) from None
    given: dict[str, object] = {"cores": cores or local_cores()}
    memory = local_memory_bytes()
    if memory is not None:
        given["memory_bytes"] = memory
    core_cache, llc = local_caches()
    given |= {"core_cache_bytes": core_cache} if core_cache else {}
    given |= {"llc_bytes": llc} if llc else {}
    return with_core_guesses(guess_device("cpu0", arch, **given))


def local_caches(caches: Path = CPU_CACHES) -> tuple[int | None, int | None]:
    """(the largest cache private to a core, the last-level cache) in bytes, from sysfs (or
    getconf's L2 and L3 sizes); None where neither says. A CPU with one level of data
    cache has it as both."""
    levels: dict[int, int] = {}  # level -> bytes, data and unified caches
    for index in sorted(caches.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            levels[level] = size
    if not levels:
        levels = _getconf_caches()
    if not levels:
        return None, None
    ordered = sorted(levels)
    last = levels[ordered[-1]]
    private = levels[ordered[-2]] if len(ordered) > 1 else last
    return private, last


def _cache_size(text: str) -> int:
    """sysfs writes "48K", "2048K", "105M"."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _getconf_caches() -> dict[int, int]:
    levels: dict[int, int] = {}
    for level, name in ((2, "SC_LEVEL2_CACHE_SIZE"), (3, "SC_LEVEL3_CACHE_SIZE")):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if size > 0:
            levels[level] = size
    return levels


def local_cores() -> int:
    """The cores this process may run on (a container or taskset may allow fewer than exist)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_memory_bytes() -> int | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            key, _, value = line.partition(":")
            if key == "MemTotal":
                return int(value.split()[0]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def local_gpus() -> list[Device]:
    """The NVIDIA GPUs nvidia-smi lists, named gpu0, gpu1, ... by index; none without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        result = subprocess.run(
            [smi, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if result.returncode != 0:
        return []  # a driver problem: as good as no GPU for dhir
    return [gpu for line in result.stdout.splitlines() if (gpu := _gpu(line)) is not None]


def _gpu(line: str) -> Device | None:
    """One line of `index, name, compute_cap, memory.total (MiB)`; None for one dhir cannot
    use (an arch LLVM 22 does not know)."""
    parts = [part.strip() for part in line.split(",")]
    if len(parts) != 4:
        return None
    index, _, capability, memory_mib = parts
    major, _, minor = capability.partition(".")
    arch = f"sm_{major}{minor}"
    try:
        kind_of_arch(arch)
        memory = int(float(memory_mib)) << 20
    except (UnknownArchError, ValueError):
        return None
    given = {"memory_bytes": memory} if memory > 0 else {}
    return guess_device(f"gpu{index}", arch, **given)


DEFAULT_CHIP = "sm_80"  # when no GPU is visible to pick one (see default_chip)


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
