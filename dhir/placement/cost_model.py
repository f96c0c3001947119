"""The times placement weighs: each task's on each device (measured when a profile has
it, else the roofline's estimate of its counted work) and each transfer's between devices."""

from collections.abc import Callable, Sequence
from dataclasses import replace

from dhir.analysis.effects import Effects
from dhir.analysis.profile import Profile
from dhir.analysis.regions import Regions
from dhir.analysis.work import Work, task_work
from dhir.dialects.dhir import TaskOp
from dhir.machine.description import LOCAL_LINK, Device, Link
from dhir.machine.roofline import roofline_time

Transfer = Callable[[Device, Device, float], float]


class CostModel:
    """Task times (estimated, or measured when `profile` has them) and transfer times.

    `transfer(src, dst, nbytes)` gives a transfer's time between two devices (a machine
    description's `transfer_time`); without it every pair is joined by `link`."""

    def __init__(
        self,
        profile: Profile | None = None,
        link: Link = LOCAL_LINK,
        transfer: Transfer | None = None,
    ) -> None:
        self.profile = profile
        self.link = link
        self.transfer = transfer
        self._work: dict[TaskOp, Work] = {}
        self._link_cache: tuple[tuple[Device, ...], tuple[float, float]] | None = None

    def work(
        self,
        task: TaskOp,
        effects: Effects | None = None,
        working_set: int = 0,
        regions: Regions | None = None,
    ) -> Work:
        """`task`'s work (`effects`, `regions`: its effects and access regions, when
        known), with `working_set` (see Work) the first time it is asked for."""
        if task not in self._work:
            work = task_work(task, effects, regions)
            self._work[task] = replace(work, working_set=working_set)
        return self._work[task]

    def task_time(self, task: TaskOp, name: str, device: Device, busy: int | None = None) -> float:
        """Measured, else estimated with `busy` of the device's ranks running at once
        (None: all of them; see `rates`)."""
        measured = None
        if self.profile is not None:
            measured = self.profile.seconds(name, str(device.kind), device.arch)
        if measured is not None:
            return measured
        return roofline_time(self.work(task), device, busy)

    def comm_time(self, nbytes: float, devices: Sequence[Device]) -> float:
        """A transfer's time between two distinct devices of `devices`, on average."""
        if self.transfer is None:
            return self.link.time(nbytes)
        latency, per_byte = self._mean_link(tuple(devices))
        return latency + nbytes * per_byte

    def _mean_link(self, devices: tuple[Device, ...]) -> tuple[float, float]:
        # Transfer times are affine in the size, so their mean is the mean latency
        # plus the mean time per byte: two probes per pair, once per device list.
        cached = self._link_cache
        if cached is not None and cached[0] == devices:
            return cached[1]
        assert self.transfer is not None
        pairs = [(a, b) for i, a in enumerate(devices) for j, b in enumerate(devices) if i != j]
        probe = 1e9
        latency = sum(self._pair_time(a, b, 0.0) for a, b in pairs) / max(len(pairs), 1)
        full = sum(self._pair_time(a, b, probe) for a, b in pairs) / max(len(pairs), 1)
        result = (latency, (full - latency) / probe)
        self._link_cache = (devices, result)
        return result

    def _pair_time(self, source: Device, target: Device, nbytes: float) -> float:
        # Two ranks of one device still exchange messages: over `link`.
        assert self.transfer is not None
        if source is target:
            return self.link.time(nbytes)
        return self.transfer(source, target, nbytes)
