"""The architectures dhir knows, and what kind of device each one is.

Shared by the dialect's verifier, placement and lowering: one table, one place.
"""

import platform
import re
from dataclasses import dataclass
from enum import StrEnum


class DeviceKind(StrEnum):
    CPU = "cpu"
    GPU = "gpu"
    ANY = "any"


CPU_ARCHS = ("x86_64", "aarch64", "riscv64", "ppc64le")

# NVIDIA compute capabilities that LLVM 22's NVPTX back end accepts.
NVIDIA_SM = (
    50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121,
)  # fmt: skip

_SM_PATTERN = re.compile(r"sm_(\d+)([af]?)")


@dataclass(frozen=True)
class TargetInfo:
    """Where a task may run: a kind, and an arch when one is pinned."""

    kind: DeviceKind
    arch: str | None = None

    def __str__(self) -> str:
        """As messages name it: "sm_90", "any CPU", "any GPU", "any device"."""
        if self.arch is not None:
            return self.arch
        return "any device" if self.kind == DeviceKind.ANY else f"any {self.kind.upper()}"


class UnknownArchError(ValueError):
    pass


def known_archs_text() -> str:
    sms = ", ".join(f"sm_{n}" for n in NVIDIA_SM)
    return f"CPU: {', '.join(CPU_ARCHS)}; NVIDIA GPU: {sms} (optionally suffixed a/f)"


def kind_of_arch(arch: str) -> DeviceKind:
    """The device kind of `arch`; raises UnknownArchError listing the known ones."""
    if arch in CPU_ARCHS:
        return DeviceKind.CPU
    match = _SM_PATTERN.fullmatch(arch)
    if match is not None and int(match.group(1)) in NVIDIA_SM:
        return DeviceKind.GPU
    raise UnknownArchError(f'unknown arch "{arch}"; known archs are {known_archs_text()}')


def host_arch() -> str:
    """The arch of this machine's CPU, as dhir names archs (the native backend builds
    CPU tasks for it)."""
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


def parse_target_string(text: str) -> TargetInfo:
    """A kind ("cpu", "gpu", "any") or an arch ("x86_64", "sm_90")."""
    if text in tuple(DeviceKind):
        return TargetInfo(DeviceKind(text))
    return TargetInfo(kind_of_arch(text), text)


# The lowest PTX ISA version LLVM 22's NVPTX back end accepts for each chip, as
# `llc-22 -mcpu=sm_XY` reports it (the `.version` it emits by default): "+ptx78" for sm_90.
# Kernels are built at this level, so that their PTX also loads on the oldest driver that
# knows the chip. Variants: `a` (arch-specific) and `f` (family) need newer PTX on some chips.
PTX_MIN_VERSION: dict[str, int] = {
    "sm_50": 40, "sm_52": 41, "sm_53": 42, "sm_60": 50, "sm_61": 50, "sm_62": 50,
    "sm_70": 60, "sm_72": 61, "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_87": 74,
    "sm_89": 78, "sm_90": 78, "sm_90a": 80,
    "sm_100": 86, "sm_100a": 86, "sm_100f": 88, "sm_101": 86, "sm_101a": 86, "sm_101f": 88,
    "sm_103": 88, "sm_103a": 88, "sm_103f": 88, "sm_110": 90, "sm_110a": 90, "sm_110f": 90,
    "sm_120": 87, "sm_120a": 87, "sm_120f": 88, "sm_121": 88, "sm_121a": 88, "sm_121f": 88,
}  # fmt: skip


def ptx_feature(chip: str) -> str:
    """The NVPTX feature that selects `chip`'s PTX level: "+ptx78" for "sm_90"."""
    version = PTX_MIN_VERSION.get(chip)
    if version is None:
        known = ", ".join(PTX_MIN_VERSION)
        raise UnknownArchError(f'LLVM 22 cannot generate code for "{chip}"; it knows {known}')
    return f"+ptx{version}"
