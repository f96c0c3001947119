"""The CPU each rank's code is built for: clang's -march/-mcpu, and what it implies.

A build names one CPU (`RunOptions.cpu`): an LLVM CPU name ("znver4", "x86-64-v3",
"neoverse-v2") or "native", this machine's own. Without one, the machine description
decides (each CPU device's `cpu`; a device without one is "native" on this machine's own
node and the arch's baseline elsewhere), and without a description it is "native".

What a CPU implies is asked of clang itself: the macros it predefines for it tell its
vector width, and they go into the build cache's key, so that "native" on two different
machines never shares an object.
"""

import hashlib
import re
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dhir.ir.diagnostics import DhirError, Diagnostic, warn
from dhir.machine.description import Device, System
from dhir.targets import DeviceKind, host_arch
from dhir.toolchain.tools import cannot_run

NATIVE = "native"
# What a device without a `cpu` gets on a node other than this one: code every CPU of
# the arch runs.
BASELINE = {
    "x86_64": "x86-64",
    "aarch64": "generic",
    "riscv64": "generic-rv64",
    "ppc64le": "ppc64le",
}
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class DeviceKeyError(DhirError):
    """An error about one key of one device of a machine description, which the caller,
    knowing where the description was written, reports at that key."""

    def __init__(
        self,
        diagnostics: Iterable[Diagnostic],
        sources: Mapping[str, str] | None = None,
        *,
        device: str = "",
        key: str = "",
    ) -> None:
        super().__init__(diagnostics, sources)  # as DhirError takes them: remade by at_description
        self.device = device
        self.key = key


@dataclass(frozen=True)
class CpuFacts:
    """What clang knows of a CPU: its vector registers' width, and a digest of all it
    predefines (features included) for cache keys."""

    cpu: str
    vector_bits: int
    digest: str


# x86's instructions that convert f32 to bf16 (AVX512-BF16, AVX-NE-CONVERT) flush
# subnormals to zero; without them LLVM rounds in software, as the interpreter does.
# With AVX512-FP16, f16 maximumf/minimumf keep a signalling NaN that computing in f32,
# as the interpreter and every other CPU do, quiets: the same program's bits would
# depend on the node.
_X86_OFF = ("-mno-avx512bf16", "-mno-avxneconvert", "-mno-avx512fp16")


def cpu_flags(cpu: str, arch: str | None = None) -> tuple[str, ...]:
    """clang's flags for building for `cpu` on `arch` (this machine's by default)."""
    arch = arch if arch is not None else host_arch()
    return (f"-march={cpu}", *_X86_OFF) if arch == "x86_64" else (f"-mcpu={cpu}",)


@cache
def cpu_facts(clang: Path, cpu: str) -> CpuFacts:
    """Ask `clang` what `cpu` has; a CPU clang does not know is an error that lists the
    ones it does."""
    command = [str(clang), *cpu_flags(cpu), "-dM", "-E", "-x", "c", "/dev/null"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise cannot_run(clang, error) from None
    if done.returncode != 0:
        raise DhirError([Diagnostic(_unknown_cpu(cpu, done.stderr))])
    macros = set(done.stdout.split("\n"))
    digest = hashlib.sha256("\n".join(sorted(macros)).encode()).hexdigest()
    return CpuFacts(cpu, _vector_bits(macros), digest)


def _vector_bits(macros: set[str]) -> int:
    for bits, macro in ((512, "__AVX512F__"), (256, "__AVX__")):
        if f"#define {macro} 1" in macros:
            return bits
    return 128  # SSE2 (x86-64's baseline), NEON, and what else has vectors


def _unknown_cpu(cpu: str, stderr: str) -> str:
    known = re.search(r"valid target CPU values are: (.*)", stderr)
    listed = f"; clang knows: {known.group(1).strip()}" if known else ""
    lines = stderr.strip().splitlines()
    first = lines[0].removeprefix("error: ") if lines else "clang refused it"
    return f"cannot build for CPU '{cpu}': {first}{listed}. Give a CPU clang knows, or native"


def cpu_for(system: System | None) -> str:
    """The CPU to build for when none is given: from `system`'s devices that run ranks
    (see the module docstring); several different ones give the arch's baseline, with a
    warning, since one executable runs on every node."""
    if system is None:
        return NATIVE
    named: dict[str, list[str]] = {}
    for node in system.nodes:
        cpus = [d for d in node.devices if d.kind == DeviceKind.CPU]
        for device in cpus[:1] if cpus else ():
            _check_arch(device, node.name)
        # A GPU's rank runs its host code on the node's CPU.
        # One node is this one, whatever its host's name (dhir.machine.layout).
        local = len(system.nodes) == 1 or _is_this_host(node.host)
        cpu = _device_cpu(cpus[0] if cpus else None, local)
        named.setdefault(cpu, []).append(node.name)
    if len(named) <= 1:
        return next(iter(named), NATIVE)
    return _mixed(named, system)


def _check_arch(device: Device, node: str) -> None:
    if device.arch != host_arch():
        message = (
            f"node {node}'s CPU {device.name} is {device.arch}, this machine "
            f"{host_arch()}: dhir builds only for its own arch. Run dhir compile on "
            'a machine of that arch (docs/machine.md, "Building for other CPUs")'
        )
        raise DeviceKeyError([Diagnostic(message)], device=device.name, key="arch")


def _device_cpu(device: Device | None, local: bool) -> str:
    if device is not None and device.cpu is not None:
        return device.cpu
    return NATIVE if local else BASELINE.get(host_arch(), NATIVE)


def _is_this_host(host: str) -> bool:
    name = socket.gethostname()
    return host in _LOCAL_HOSTS or host in (name, name.split(".")[0], socket.getfqdn())


def _mixed(named: dict[str, list[str]], system: System) -> str:
    baseline = BASELINE.get(host_arch(), NATIVE)
    which = "; ".join(f"{cpu} on {', '.join(sorted(set(nodes)))}" for cpu, nodes in named.items())
    warn(
        Diagnostic(
            f"the nodes of '{system.name}' have different CPUs ({which}); one executable runs "
            f"on all of them, so it is built for {baseline}, which each can run. Give every "
            "CPU device the same `cpu` (the oldest of them) for faster code",
            severity="warning",
        )
    )
    return baseline
