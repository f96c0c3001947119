"""A cluster as dhir sees it: nodes, the devices on each, and the links between them.

Ranks: each device runs `ranks` MPI ranks (a GPU one; a CPU one unless the description says
more). Ranks are numbered node by node, device by device, in the order the description lists
them, which is also the order mpirun fills the hosts of a hostfile.

Rates are peaks: `peak_gflops` counts single-precision (f32) fused multiply-adds as two
flops; `mem_bw_gbs` and link bandwidths are in GB/s (1e9 bytes per second); latencies in
microseconds. A value nobody measured is a guess, listed in `guessed` so that cost models
and users know how far to trust it.

A CPU also has per-core rates, for code that runs on one core (or a few threads):
`core_gflops` and `core_mem_bw_gbs` (one core streaming a triad as generated code does),
and two cache levels with the bandwidth one core gets from them: `core_cache_bytes` /
`core_cache_bw_gbs` (the largest cache private to a core, L2 on most CPUs) and `llc_bytes`
/ `llc_bw_gbs` (the last-level cache, shared by the cores); `core_loop_gflops`, one core's
rate on float arithmetic in a plain loop built as dhir builds code its optimizer does not
block (f64 adds and multiplies of a row stencil from the first-level cache: loads, not the
FMA units, bound it), and `fp_latency_ns`, how long a float add or multiply takes before an
op that needs its result can start (what each step of a loop-carried chain costs). Files
without them get guesses.
`dhir calibrate` also measures `core_bw_curve`: one core's triad bandwidth (GB/s) by
footprint (bytes), from well inside its own cache to well beyond the last level, since
what a footprint gets depends on the caches' effective sizes, which detection cannot see
(in a VM, other guests share the last level); the cost model prefers it to the two levels.
"""

import math
import re
from dataclasses import dataclass, field, replace

from dhir.choices import MAX_RANKS
from dhir.targets import DeviceKind, UnknownArchError, kind_of_arch

# Names end up in hostfiles and DLTI keys: keep them to characters both take as they are.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]*")
NAME_RULE = "letters, digits and _ . : + - (not starting with . : + -)"
_CPU = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
CPU_RULE = "an LLVM CPU name (letters, digits and _ . + -, as clang's -march takes) or native"
MAX_INT = 2**63 - 1  # TOML integers and DLTI's i64 entries are signed 64-bit

# CPU fields for one core and its caches: optional in files (guessed when left out), absent
# on GPUs.
CORE_FIELDS = (
    "core_gflops", "core_mem_bw_gbs", "core_cache_bytes", "core_cache_bw_gbs", "llc_bytes",
    "llc_bw_gbs", "core_loop_gflops", "fp_latency_ns",
)  # fmt: skip
CACHE_SIZES = ("core_cache_bytes", "llc_bytes")
CPU_ONLY = (*CORE_FIELDS, "core_bw_curve", "cpu")
CURVE_RULE = "a list of at least 2 [footprint bytes, GB/s] pairs, footprints increasing"
CORE_RATES = tuple(name for name in CORE_FIELDS if name not in CACHE_SIZES)
# Device fields whose value may be a guess rather than a measurement or a given fact.
GUESSABLE = ("peak_gflops", "mem_bw_gbs", "memory_bytes", "cores", *CORE_FIELDS)


def valid_cpu(name: object) -> bool:
    """Whether `name` can be a CPU name (clang says later whether it knows it)."""
    return isinstance(name, str) and _CPU.fullmatch(name) is not None


class DescriptionError(ValueError):
    """A description that cannot stand; the readers add the file it came from. `key`: the
    field at fault, where one is (for the file readers to point at its line); `at_value`:
    at its value rather than its key."""

    def __init__(self, message: str, key: str | None = None, at_value: bool = False) -> None:
        super().__init__(message)
        self.key = key
        self.at_value = at_value


@dataclass(frozen=True)
class Link:
    """A connection between devices: the time to move n bytes is latency + n / bandwidth."""

    latency_us: float
    bandwidth_gbs: float
    guessed: bool = False

    def __post_init__(self) -> None:
        _check_number("latency_us", self.latency_us, "link", allow_zero=True)
        _check_number("bandwidth_gbs", self.bandwidth_gbs, "link")

    def time(self, nbytes: float) -> float:
        """Seconds to move `nbytes` over this link."""
        return self.latency_us * 1e-6 + nbytes / (self.bandwidth_gbs * 1e9)


@dataclass(frozen=True)
class Device:
    """One CPU (all cores of a node, or a socket) or one GPU: as a description lists it,
    or as placement sees the device a rank runs on.

    A description's devices are complete (`Node` checks it). Placement without a
    description also uses partial ones: no name (""), no arch (None: any arch of `kind`,
    which must then be given), memory or cores unknown (None)."""

    name: str
    arch: str | None
    peak_gflops: float
    mem_bw_gbs: float
    memory_bytes: int | None
    cores: int | None = None  # CPUs only
    ranks: int = 1
    host_link: Link | None = None  # GPUs only: host memory <-> device memory
    guessed: tuple[str, ...] = ()  # which of GUESSABLE are guesses
    # CPUs only (None on GPUs): one core's rates and its caches (see the module docstring).
    core_gflops: float | None = None
    core_mem_bw_gbs: float | None = None
    core_cache_bytes: int | None = None
    core_cache_bw_gbs: float | None = None
    llc_bytes: int | None = None
    llc_bw_gbs: float | None = None
    # One core's float arithmetic in loops that are not register-blocked (GFLOP/s), and
    # the latency of one float add or multiply (ns): see the module docstring.
    core_loop_gflops: float | None = None
    fp_latency_ns: float | None = None
    core_bw_curve: tuple[tuple[int, float], ...] | None = None  # (footprint bytes, GB/s)
    # CPUs only: the CPU to build its ranks' code for (clang's -march/-mcpu name, or
    # "native"); None: dhir.toolchain.cpu decides.
    cpu: str | None = None
    # GPUs: seconds to start a kernel (None: dhir.machine.roofline's default). Not in files.
    launch_overhead_s: float | None = None
    # A CPU rank that also drives a GPU (ranks without a machine description: the GPU
    # runtime gives local rank r the node's GPU r mod count): its GPU tasks run there.
    gpu: "Device | None" = None
    # Given only with no arch; otherwise the arch's kind.
    kind: DeviceKind = DeviceKind.ANY

    def __post_init__(self) -> None:
        what = f"device '{self.name}'"
        if self.name:
            _check_name(self.name, "device", "name")
        kind = self._check_kind(what)
        for name in ("peak_gflops", "mem_bw_gbs"):
            _check_number(name, getattr(self, name), what)
        if self.memory_bytes is not None:
            _check_int("memory_bytes", self.memory_bytes, what)
        _check_int("ranks", self.ranks, what)
        if kind == DeviceKind.CPU:
            self._check_cpu(what)
        else:
            self._check_gpu(what)
        unknown = sorted(set(self.guessed) - set(GUESSABLE))
        if unknown:
            raise DescriptionError(
                f"{what}: guessed lists {', '.join(unknown)}; it may list only "
                f"{', '.join(GUESSABLE)}",
                "guessed",
            )
        # One spelling per meaning, so that equal descriptions compare equal.
        object.__setattr__(self, "guessed", tuple(g for g in GUESSABLE if g in self.guessed))

    def _check_kind(self, what: str) -> DeviceKind:
        if self.arch is None:
            if self.kind == DeviceKind.ANY:
                raise DescriptionError(f"{what}: give its arch, or its kind (cpu or gpu)")
            return self.kind
        try:
            kind = kind_of_arch(self.arch)
        except UnknownArchError as error:
            raise DescriptionError(f"{what}: {error}") from None
        if self.kind not in (DeviceKind.ANY, kind):
            raise DescriptionError(
                f"{what}: arch {self.arch} is a {kind}, not a {self.kind}", "kind"
            )
        object.__setattr__(self, "kind", kind)
        return kind

    def check_complete(self) -> None:
        """What a description needs besides valid values: a name, an arch, the memory, a
        CPU's cores, a GPU's host link."""
        what = f"device '{self.name}'"
        if not self.name or self.arch is None:
            raise DescriptionError(f"{what}: a described device needs a name and an arch")
        if self.memory_bytes is None:
            raise DescriptionError(
                f"{what}: memory_bytes must be a positive whole number", "memory_bytes"
            )
        if self.kind == DeviceKind.CPU and self.cores is None:
            raise DescriptionError(f"{what}: a CPU needs its number of cores")
        if self.kind == DeviceKind.GPU and self.host_link is None:
            raise DescriptionError(f"{what}: a GPU needs its host_link (latency, bandwidth)")

    def _check_cpu(self, what: str) -> None:
        if self.cores is not None:
            _check_int("cores", self.cores, what)
        if self.host_link is not None:
            raise DescriptionError(f"{what}: host_link is for GPUs; a CPU is the host", "host_link")
        for name in CORE_RATES:
            if getattr(self, name) is not None:
                _check_number(name, getattr(self, name), what)
        for name in CACHE_SIZES:
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), what)
        if self.core_bw_curve is not None:
            _check_curve(self.core_bw_curve, what)
        if self.cpu is not None and not valid_cpu(self.cpu):
            raise DescriptionError(f"{what}: cpu must be {CPU_RULE}, got {self.cpu!r}", "cpu")

    def _check_gpu(self, what: str) -> None:
        if self.cores is not None:
            raise DescriptionError(f"{what}: cores is for CPUs; leave it out for a GPU", "cores")
        if self.ranks != 1:
            raise DescriptionError(f"{what}: a GPU runs one rank, not {self.ranks}", "ranks")
        given = [name for name in CPU_ONLY if getattr(self, name) is not None]
        if given:
            raise DescriptionError(
                f"{what}: {', '.join(given)} are for CPUs; leave them out", given[0]
            )


@dataclass(frozen=True)
class Node:
    """One machine of the cluster; `host` is the name mpirun reaches it by."""

    name: str
    devices: tuple[Device, ...]
    host: str = ""  # defaults to the node's name

    def __post_init__(self) -> None:
        _check_name(self.name, "node", "name")
        object.__setattr__(self, "devices", tuple(self.devices))
        for device in self.devices:
            device.check_complete()
        if not self.host:
            object.__setattr__(self, "host", self.name)
        _check_name(self.host, f"node '{self.name}': host", "host")
        if not self.devices:
            raise DescriptionError(f"node '{self.name}' has no devices; list at least one")
        if not any(d.kind == DeviceKind.CPU for d in self.devices):
            raise DescriptionError(f"node '{self.name}' has no CPU; every node needs a host CPU")

    @property
    def ranks(self) -> int:
        return sum(device.ranks for device in self.devices)

    @property
    def cores(self) -> int:
        return sum(device.cores or 0 for device in self.devices)


@dataclass(frozen=True)
class System:
    """A whole cluster: its nodes, the network between them, and how ranks on one node talk."""

    nodes: tuple[Node, ...]
    network: Link  # node <-> node, rank to rank
    intra_node: Link  # rank <-> rank on one node (MPI over shared memory)
    name: str = "system"
    _by_name: dict[str, tuple[Node, Device]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes:
            raise DescriptionError("the description has no nodes; list at least one")
        _check_unique([n.name for n in self.nodes], "node")
        hosts = [n.host for n in self.nodes]
        for host in {h for h in hosts if hosts.count(h) > 1}:
            raise DescriptionError(
                f"two nodes have host '{host}'; mpirun places ranks by host, so each node "
                "needs a host of its own"
            )
        _check_unique([d.name for n in self.nodes for d in n.devices], "device")
        self._by_name.update({d.name: (n, d) for n in self.nodes for d in n.devices})
        if self.rank_count > MAX_RANKS:
            raise DescriptionError(
                f"the description runs {self.rank_count} ranks (the sum of its devices' "
                f"ranks); dhir runs at most {MAX_RANKS}"
            )

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(d for n in self.nodes for d in n.devices)

    @property
    def rank_count(self) -> int:
        return sum(node.ranks for node in self.nodes)

    def device(self, name: str) -> Device:
        return self._lookup(name)[1]

    def node_of(self, device: Device | str) -> Node:
        return self._lookup(_name(device))[0]

    def rank_devices(self) -> tuple[Device, ...]:
        """The device of each rank: rank r runs on rank_devices()[r]."""
        return tuple(d for d in self.devices for _ in range(d.ranks))

    def ranks_of(self, device: Device | str) -> range:
        """The ranks that run on `device`."""
        name = _name(device)
        first = 0
        for d in self.devices:
            if d.name == name:
                return range(first, first + d.ranks)
            first += d.ranks
        raise self._unknown(name)

    def transfer_time(self, src: Device | str, dst: Device | str, nbytes: float) -> float:
        """Seconds to move `nbytes` from `src`'s memory to `dst`'s: out of the source GPU,
        between the ranks (same node or over the network), into the destination GPU, one
        stage after the other. Zero on one device."""
        source, target = self._lookup(_name(src)), self._lookup(_name(dst))
        if source[1].name == target[1].name:
            return 0.0
        between = self.intra_node if source[0].name == target[0].name else self.network
        stages = [source[1].host_link, between, target[1].host_link]
        return sum(link.time(nbytes) for link in stages if link is not None)

    def with_device(self, device: Device) -> "System":
        """A copy with the device of the same name replaced by `device`."""
        nodes = tuple(
            replace(n, devices=tuple(device if d.name == device.name else d for d in n.devices))
            for n in self.nodes
        )
        return replace(self, nodes=nodes)

    def _lookup(self, name: str) -> tuple[Node, Device]:
        try:
            return self._by_name[name]
        except KeyError:
            raise self._unknown(name) from None

    def _unknown(self, name: str) -> DescriptionError:
        known = ", ".join(self._by_name)
        return DescriptionError(f"no device named '{name}' in the description; it has {known}")


def _name(device: Device | str) -> str:
    return device if isinstance(device, str) else device.name


def _check_name(name: object, what: str, key: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        message = f"{what} name {name!r} is not a valid name; use {NAME_RULE}"
        raise DescriptionError(message, key, at_value=True)


def _check_number(name: str, value: object, what: str, allow_zero: bool = False) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        if value > 0 or (allow_zero and value == 0):
            return
    need = "a non-negative" if allow_zero else "a positive"
    raise DescriptionError(f"{what}: {name} must be {need} number, got {value!r}", name.split()[0])


def check_field(name: str, value: object, what: str) -> None:
    """The check a Device makes of its rate or count `name` (`value` a number): the one
    of a description's fields that needs no other field."""
    if name in ("peak_gflops", "mem_bw_gbs", *CORE_RATES):
        _check_number(name, value, what)
    elif name in ("memory_bytes", "cores", "ranks", *CACHE_SIZES):
        _check_int(name, value, what)


def _check_curve(curve: object, what: str) -> None:
    pairs = curve if isinstance(curve, tuple) else ()
    if len(pairs) < 2 or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
        raise DescriptionError(f"{what}: core_bw_curve must be {CURVE_RULE}", "core_bw_curve")
    for size, rate in pairs:
        _check_int("core_bw_curve footprint", size, what)
        _check_number("core_bw_curve GB/s", rate, what)
    sizes = [size for size, _ in pairs]
    if any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise DescriptionError(f"{what}: core_bw_curve must be {CURVE_RULE}", "core_bw_curve")


def _check_int(name: str, value: object, what: str) -> None:
    count = value if isinstance(value, int) and not isinstance(value, bool) else None
    if count is not None and 0 < count <= MAX_INT:
        return
    # Not "must be a positive whole number" of a positive whole number too large.
    too_large = count is not None and count > 0
    most = f" at most {MAX_INT} (a signed 64-bit integer)" if too_large else ""
    raise DescriptionError(
        f"{what}: {name} must be a positive whole number{most}, got {value!r}", name.split()[0]
    )


def _check_unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DescriptionError(f"two {what}s are named '{name}'; {what} names must differ")
        seen.add(name)


# --- typical values, for what nobody measured or wrote down (marked as guesses) -------

GUESSED_NETWORK = Link(2.0, 12.5, guessed=True)  # a 100 Gb/s InfiniBand or Ethernet class
GUESSED_INTRA_NODE = Link(1.0, 5.0, guessed=True)  # MPI over shared memory
GUESSED_HOST_LINK = Link(10.0, 25.0, guessed=True)  # PCIe 4.0 x16, one cudaMemcpy
# Ranks of one machine without a description talk through shared memory (MPICH/OpenMPI's
# shm transport).
LOCAL_LINK = Link(2.0, 5.0)
CPU_GFLOPS_PER_CORE = 40.0  # 2.5 GHz x 16 f32 FMA lanes x 2 flops / 2 threads per core
CPU_MEM_BW_PER_CORE = 5.0
CPU_MEM_BW_CAP = 400.0
CPU_MEMORY_PER_CORE = 4 << 30
GIB = 1 << 30
MIB = 1 << 20
# One core: a scalar or 128-bit loop streams ~10 GB/s from memory on current x86 and Arm
# server cores; a cache private to a core (L2) ~1 MiB, the shared last level ~2 MiB per
# core. Caches serve one core several times faster than memory.
CPU_CORE_MEM_BW = 10.0
CPU_CORE_CACHE_BYTES = 1 * MIB
CPU_LLC_PER_CORE = 2 * MIB
CPU_CORE_CACHE_SPEEDUP = 4.0
CPU_LLC_SPEEDUP = 2.0
# A loop the optimizer does not block runs f64 (half the f32 lanes), adds and multiplies
# apart (half an FMA's flops) and about one op per load (half the issue rate): an eighth
# of the core's f32 FMA peak (docs/costs.md, "Blocked nests and chains").
CPU_LOOP_SHARE = 1 / 8
# A float add or multiply: 3 to 4 cycles at 3 to 4 GHz on current x86-64 and Arm cores
# (docs/costs.md).
CPU_FP_LATENCY_NS = 0.85

# One typical NVIDIA part per compute capability: f32 GFLOP/s, memory GB/s, memory bytes.
GPU_GUESSES: dict[int, tuple[float, float, int]] = {
    50: (1_600.0, 88.0, 4 * GIB),  # GTX 750 Ti class
    52: (6_800.0, 288.0, 12 * GIB),  # M40
    53: (500.0, 25.0, 4 * GIB),  # Jetson Nano
    60: (10_600.0, 732.0, 16 * GIB),  # P100
    61: (11_800.0, 346.0, 24 * GIB),  # P40
    62: (750.0, 60.0, 8 * GIB),  # Jetson TX2
    70: (15_700.0, 900.0, 32 * GIB),  # V100
    72: (1_400.0, 137.0, 32 * GIB),  # Jetson Xavier
    75: (8_100.0, 320.0, 16 * GIB),  # T4
    80: (19_500.0, 2_039.0, 80 * GIB),  # A100 80 GB
    86: (31_200.0, 600.0, 24 * GIB),  # A10
    87: (5_300.0, 205.0, 64 * GIB),  # Jetson Orin
    89: (91_600.0, 864.0, 48 * GIB),  # L40S
    90: (67_000.0, 3_350.0, 80 * GIB),  # H100 SXM
    100: (80_000.0, 8_000.0, 180 * GIB),  # B200
    101: (8_000.0, 273.0, 128 * GIB),  # Jetson Thor (sm_101 before CUDA 13)
    103: (80_000.0, 8_000.0, 270 * GIB),  # B300
    110: (8_000.0, 273.0, 128 * GIB),  # Jetson Thor
    120: (105_000.0, 1_792.0, 32 * GIB),  # RTX 5090 class
    121: (31_000.0, 273.0, 128 * GIB),  # DGX Spark (GB10)
}


def guess_device(name: str, arch: str, **given: object) -> Device:
    """A device with the `given` fields as they are and typical values for the rest (CPUs:
    per core; GPUs: per compute capability), each of those listed in `guessed`."""
    try:
        kind = kind_of_arch(arch)
    except UnknownArchError as error:
        raise DescriptionError(f"device '{name}': {error}") from None
    guesses = _cpu_guesses(given) if kind == DeviceKind.CPU else _gpu_guesses(arch)
    guessed = set(given.pop("guessed", ()) or ())  # type: ignore[call-overload]
    guessed |= {key for key in guesses if key not in given and key in GUESSABLE}
    values = {**guesses, **given}
    if kind == DeviceKind.GPU and values.get("host_link") is None:
        values["host_link"] = GUESSED_HOST_LINK
    return Device(name=name, arch=arch, guessed=tuple(guessed), **values)  # type: ignore[arg-type]


def _cpu_guesses(given: dict[str, object]) -> dict[str, object]:
    cores = given.get("cores")
    # A count the checks refuse guesses for one core, so that the error names cores, not
    # a guessed memory_bytes too large to hold.
    count = 1
    if isinstance(cores, int) and not isinstance(cores, bool) and 0 < cores <= MAX_INT:
        count = cores
    node = {
        "cores": count,
        "peak_gflops": CPU_GFLOPS_PER_CORE * count,
        "mem_bw_gbs": min(CPU_MEM_BW_PER_CORE * count, CPU_MEM_BW_CAP),
        "memory_bytes": min(CPU_MEMORY_PER_CORE * count, MAX_INT),
    }
    return node


def with_core_guesses(device: Device) -> Device:
    """A CPU with the per-core fields it lacks guessed (and listed in `guessed`) from its
    node rates: a core gets its share of the compute and up to CPU_CORE_MEM_BW of the
    memory bandwidth; its caches serve it CPU_CORE_CACHE_SPEEDUP and CPU_LLC_SPEEDUP times
    faster; its loops that are not blocked run at CPU_LOOP_SHARE of its f32 FMA rate, and
    a float op takes CPU_FP_LATENCY_NS. Descriptions written before these fields existed
    leave them out; readers keep them out (a file reads back as written), users of the
    rates fill them here. A GPU is returned as it is."""
    if device.kind != DeviceKind.CPU:
        return device
    cores = device.cores or 1
    core_bw = device.core_mem_bw_gbs or min(device.mem_bw_gbs, CPU_CORE_MEM_BW)
    guesses: dict[str, float | int] = {
        "core_gflops": device.peak_gflops / cores,
        "core_mem_bw_gbs": core_bw,
        "core_cache_bytes": CPU_CORE_CACHE_BYTES,
        "core_cache_bw_gbs": core_bw * CPU_CORE_CACHE_SPEEDUP,
        "llc_bytes": CPU_LLC_PER_CORE * cores,
        "llc_bw_gbs": core_bw * CPU_LLC_SPEEDUP,
        "core_loop_gflops": (device.core_gflops or device.peak_gflops / cores) * CPU_LOOP_SHARE,
        "fp_latency_ns": CPU_FP_LATENCY_NS,
    }
    missing = {key: value for key, value in guesses.items() if getattr(device, key) is None}
    if not missing:
        return device
    return replace(device, **missing, guessed=(*device.guessed, *missing))  # type: ignore[arg-type]


def _gpu_guesses(arch: str) -> dict[str, object]:
    sm = int(arch[3:].rstrip("af"))
    nearest = max((k for k in GPU_GUESSES if k <= sm), default=min(GPU_GUESSES))
    gflops, bandwidth, memory = GPU_GUESSES[nearest]
    return {"peak_gflops": gflops, "mem_bw_gbs": bandwidth, "memory_bytes": memory}


# A data-centre GPU, for comparisons and for placing GPU tasks where no GPU is found
# (H100-class: FP32 without tensor cores, HBM3); any chip.
REFERENCE_GPU = Device(
    "",
    None,
    peak_gflops=60_000.0,
    mem_bw_gbs=3_000.0,
    memory_bytes=None,
    launch_overhead_s=5e-6,
    kind=DeviceKind.GPU,
)
