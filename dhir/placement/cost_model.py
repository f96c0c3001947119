"""The times placement weighs: each task's on each device (measured when a profile has
it, else the roofline's estimate of its counted work) and each transfer's between devices."""

from collections import Counter
from collections.abc import Callable, Sequence

from dhir.analysis.effects import Effects
from dhir.analysis.profile import Profile
from dhir.analysis.regions import Regions
from dhir.analysis.work import Work, task_work, touched_bytes, with_touched
from dhir.dialects.dhir import TaskOp
from dhir.machine.description import LOCAL_LINK, Device, Link
from dhir.machine.roofline import roofline_time

Transfer = Callable[[Device, Device, float], float]
# Each rank's class, and per pair of classes a transfer's latency and time per byte.
Matrix = tuple[tuple[float, ...], ...]
PairLinks = tuple[list[int], Matrix, Matrix]
# Beyond this many distinct rank devices, edges keep their means: a table of every pair
# would grow with the square of a large cluster's devices.
MOST_LINK_CLASSES = 64


class CostModel:
    """Task times (estimated, or measured when `profile` has them) and transfer times.

    `transfer(src, dst, nbytes)` gives a transfer's time between two devices (a machine
    description's `transfer_time`); without it every pair is joined by `link`. `node_of`
    names a device's node (a machine description's): with devices on several nodes,
    transfers inside a node and between nodes are told apart (`comm_times`)."""

    def __init__(
        self,
        profile: Profile | None = None,
        link: Link = LOCAL_LINK,
        transfer: Transfer | None = None,
        node_of: Callable[[Device], str] | None = None,
    ) -> None:
        self.profile = profile
        self.link = link
        self.transfer = transfer
        self.node_of = node_of
        self._work: dict[TaskOp, Work] = {}
        # Generated schedules repeat a task's work thousands of times: equal works are
        # kept as one object, whose estimates are then found by identity (hashing a Work
        # and a Device per task and device cost more than the estimate's look-up saved).
        self._alike: dict[Work, Work] = {}
        # By a counted body's identity, the bytes touched and the working set: its Work.
        self._touching: dict[tuple[int, int, int], tuple[Work, Work]] = {}
        self._estimates: dict[tuple[Work, Device, int | None], float] = {}
        self._by_identity: dict[tuple[int, int, int | None], tuple[Work, Device, float]] = {}
        self._link_cache: dict[tuple[tuple[Device, ...], str], tuple[float, float]] = {}

    def work(
        self,
        task: TaskOp,
        effects: Effects | None = None,
        working_set: int = 0,
        regions: Regions | None = None,
        body: Work | None = None,
    ) -> Work:
        """`task`'s work (`effects`, `regions`, `body`: its effects, access regions and
        dhir.analysis.work's `body_work`, when known), with `working_set` (see Work) the
        first time it is asked for."""
        found = self._work.get(task)
        if found is None:
            found = self._work[task] = self._found_work(task, effects, working_set, regions, body)
        return found

    def _found_work(
        self,
        task: TaskOp,
        effects: Effects | None,
        working_set: int,
        regions: Regions | None,
        body: Work | None,
    ) -> Work:
        if body is None:
            work = task_work(task, effects, regions, None, working_set)
            return self._alike.setdefault(work, work)
        # A shape's tasks share their counted body (dhir.placement.from_ir.task_graph)
        # and mostly touch as many bytes: one Work for them, made and hashed once.
        touched = touched_bytes(task, effects, regions)
        key = (id(body), touched, working_set)
        known = self._touching.get(key)
        if known is not None and known[0] is body:
            return known[1]
        work = with_touched(body, touched, working_set)
        work = self._alike.setdefault(work, work)
        self._touching[key] = (body, work)
        return work

    def task_time(self, task: TaskOp, name: str, device: Device, busy: int | None = None) -> float:
        """Measured, else estimated with `busy` of the device's ranks running at once
        (None: all of them; see `rates`)."""
        measured = None
        if self.profile is not None:
            measured = self.profile.seconds(name, str(device.kind), device.arch)
        if measured is not None:
            return measured
        work = self.work(task)
        known = self._by_identity.get((id(work), id(device), busy))
        if known is not None and known[0] is work and known[1] is device:
            return known[2]
        key = (work, device, busy)
        estimate = self._estimates.get(key)
        if estimate is None:
            estimate = self._estimates[key] = roofline_time(*key)
        self._by_identity[id(work), id(device), busy] = (work, device, estimate)
        return estimate

    def comm_time(self, nbytes: float, devices: Sequence[Device]) -> float:
        """A transfer's time between two distinct devices of `devices`, on average."""
        if self.transfer is None:
            return self.link.time(nbytes)
        latency, per_byte = self._mean_link(tuple(devices), "all")
        return latency + nbytes * per_byte

    def nodes(self, devices: Sequence[Device]) -> list[str] | None:
        """Each device's node, None when they are all on one (or nodes are not known)."""
        if self.node_of is None or self.transfer is None:
            return None
        names = [self.node_of(d) for d in devices]
        return names if len(set(names)) > 1 else None

    def comm_times(self, nbytes: float, devices: Sequence[Device]) -> tuple[float, float | None]:
        """A transfer's time between two distinct devices of `devices` on one node and
        between two on different nodes, on average; (`comm_time`, None) on one node."""
        if self.nodes(devices) is None:
            return self.comm_time(nbytes, devices), None
        inside = self._mean_link(tuple(devices), "inside")
        between = self._mean_link(tuple(devices), "between")
        return inside[0] + nbytes * inside[1], between[0] + nbytes * between[1]

    def pair_time(self, nbytes: float, source: Device, target: Device) -> float:
        """A transfer's time from rank device `source` to rank device `target`."""
        if self.transfer is None:
            return self.link.time(nbytes)
        return self._pair_time(source, target, nbytes)

    def pair_links(self, devices: Sequence[Device]) -> PairLinks | None:
        """The links between the ranks (`devices[r]`: rank r's) where pairs of ranks differ:
        each rank's class (its device, by identity), and from a rank of class a to
        another of class b a transfer's latency[a][b] and time per byte[a][b]. None when
        every pair of ranks has the same link (then the mean is every pair's time), when
        there is no description's `transfer`, or more than MOST_LINK_CLASSES devices."""
        if self.transfer is None or len(devices) < 2:
            return None
        number: dict[int, int] = {}
        of = [number.setdefault(id(d), len(number)) for d in devices]
        distinct = list({id(d): d for d in devices}.values())
        if len(distinct) > MOST_LINK_CLASSES:
            return None
        probe = 1e9
        latency = tuple(tuple(self._pair_time(a, b, 0.0) for b in distinct) for a in distinct)
        full = tuple(tuple(self._pair_time(a, b, probe) for b in distinct) for a in distinct)
        per_byte = tuple(
            tuple((f - t) / probe for f, t in zip(fs, ts)) for fs, ts in zip(full, latency)
        )
        ranks = Counter(of)
        used = {
            (latency[a][b], per_byte[a][b])
            for a in range(len(distinct))
            for b in range(len(distinct))
            if a != b or ranks[a] > 1
        }
        return (of, latency, per_byte) if len(used) > 1 else None

    def _mean_link(self, devices: tuple[Device, ...], which: str) -> tuple[float, float]:
        # Transfer times are affine in the size, so their mean is the mean latency
        # plus the mean time per byte: two probes per pair, once per device list.
        # `which`: all pairs, those "inside" a node or those "between" nodes.
        key = (devices, which)
        if key in self._link_cache:
            return self._link_cache[key]
        assert self.transfer is not None
        pairs = _rank_pairs(devices)
        if which != "all" and self.node_of is not None:
            node_of = self.node_of
            inside = which == "inside"
            chosen = [(a, b, n) for a, b, n in pairs if (node_of(a) == node_of(b)) == inside]
            pairs = chosen or pairs  # no such pair: the edge never pays it; keep a mean
        probe = 1e9
        count = max(sum(n for _, _, n in pairs), 1)
        latency = sum(n * self._pair_time(a, b, 0.0) for a, b, n in pairs) / count
        full = sum(n * self._pair_time(a, b, probe) for a, b, n in pairs) / count
        result = (latency, (full - latency) / probe)
        if len(self._link_cache) >= 8:
            self._link_cache.clear()  # device lists of other programs
        self._link_cache[key] = result
        return result

    def _pair_time(self, source: Device, target: Device, nbytes: float) -> float:
        # Two ranks of one device still exchange messages: over `link`.
        assert self.transfer is not None
        if source is target:
            return self.link.time(nbytes)
        return self.transfer(source, target, nbytes)


def _rank_pairs(devices: Sequence[Device]) -> list[tuple[Device, Device, int]]:
    """The ordered pairs of distinct ranks (`devices[r]`: rank r's), as pairs of devices
    with how many rank pairs each stands for: ranks share a device object, so this is
    quadratic in devices, not in ranks (65,536 ranks: 4e9 pairs)."""
    counts: dict[int, tuple[Device, int]] = {}
    for device in devices:
        _, seen = counts.get(id(device), (device, 0))
        counts[id(device)] = (device, seen + 1)
    groups = list(counts.values())
    pairs = [(a, b, m * (n - 1) if a is b else m * n) for a, m in groups for b, n in groups]
    return [pair for pair in pairs if pair[2]]
