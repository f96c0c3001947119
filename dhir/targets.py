"""The architectures dhir knows, and what kind of device each one is.

Shared by the dialect's verifier, placement and lowering: one table, one place.
"""

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
        return self.arch if self.arch is not None else f"any {self.kind}"


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


def parse_target_string(text: str) -> TargetInfo:
    """A kind ("cpu", "gpu", "any") or an arch ("x86_64", "sm_90")."""
    if text in tuple(DeviceKind):
        return TargetInfo(DeviceKind(text))
    return TargetInfo(kind_of_arch(text), text)
