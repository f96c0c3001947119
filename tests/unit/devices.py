"""Devices as placement sees a rank's device, for tests: no name, any arch unless given."""

from dhir.machine.description import Device
from dhir.targets import DeviceKind


def rank_device(
    kind: DeviceKind,
    arch: str | None = None,
    peak_gflops: float = 20.0,
    mem_bw_gbs: float = 30.0,
    memory_bytes: int | None = None,
    launch_overhead_s: float | None = None,
    **fields: object,
) -> Device:
    return Device(
        "",
        arch,
        peak_gflops,
        mem_bw_gbs,
        memory_bytes,
        launch_overhead_s=launch_overhead_s,
        kind=kind,
        **fields,  # type: ignore[arg-type]
    )


# A CPU of typical rates, for comparisons.
LOCAL_CPU = rank_device(DeviceKind.CPU)
