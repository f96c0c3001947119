"""Memory as a placement resource: the data each rank holds under a placement, against
its device's `memory_bytes` (docs/semantics.md, "Memory per rank").

A rank holds each memref argument of the entry whole, or only its rows when
dhir-lower-to-mpi partitions it (dhir.analysis.partition: the rows its tasks touch, halos
included; the bytes are those rows'). Ranks on one device share its memory: the bytes of
all of them must fit in its `memory_bytes`. A device without `memory_bytes` has no limit.

Schedules are placed one after the other, and a partitioned memref is listed by one
schedule: `MemoryLimits` keeps what the memrefs of the schedules placed so far (and the
memrefs every rank holds whole) take on each rank, and a schedule's placement must fit
beside it. When it does not, `settle` moves the tasks touching the schedule's partitioned
memrefs to the ranks that own their rows (the rows cut into equal blocks over the ranks
that can run each task, in rank order), which keeps each rank's rows few and apart; when
that does not fit either, the program is refused, naming the memrefs and their bytes.

Not counted: memrefs allocated inside the program, those of unknown size, and message
buffers; nor the lowering's own choices to keep a memref whole beyond those of
dhir.analysis.partition (a time loop that finds no fixed layout).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue
from xdsl.traits import SymbolTable

from dhir.analysis.footprint import Whole
from dhir.analysis.outputs import final_to_root
from dhir.analysis.partition import Rows, Storage, Stored, describe, storage
from dhir.analysis.regions import Regions
from dhir.dialects import func
from dhir.dialects.dhir import ScheduleOp, TaskOp
from dhir.ir.diagnostics import DhirError, Diagnostic
from dhir.machine.description import Device

# What a rank holds of one memref: its rows, or all of it.
Held = tuple[Stored, Rows | Whole]


@dataclass
class MemoryLimits:
    """The devices' memory and what the ranks hold so far (see the module docstring)."""

    storage: Storage
    devices: Sequence[Device]  # rank R's: devices[R]
    where: Callable[[Device], str]  # the machine description of a device, for messages
    held: list[list[Held]] = field(default_factory=list[list[Held]])  # per rank

    @staticmethod
    def of(
        function: func.FuncOp,
        devices: Sequence[Device],
        where: Callable[[Device], str],
        entry: str = "main",
    ) -> "MemoryLimits | None":
        """The limits for `function` (the entry) on ranks on `devices`; None when no
        device gives its `memory_bytes`. Refuses at once a memref held whole that does not
        fit."""
        if all(d.memory_bytes is None for d in devices):
            return None
        found = program_storage(function, len(devices), entry)
        whole = [(m, m.whole) for m in found.memrefs if m.whole is not None and m.size]
        limits = MemoryLimits(found, devices, where, [list(whole) for _ in devices])
        limits.check(limits.held)
        return limits

    def fits(self, schedule: ScheduleOp, placement: Mapping[TaskOp, int]) -> bool:
        return self.overflow(self.with_schedule(schedule, placement)) is None

    def settle(
        self,
        schedule: ScheduleOp,
        chosen: Sequence[int],
        runs_on: Callable[[int, int], bool],
    ) -> list[int]:
        """`chosen` (each task's rank, in the schedule's order) when what the ranks hold
        with it fits, else the tasks moved to the ranks owning their rows when that
        fits; `runs_on(k, R)`: whether task k may run on rank R. What the schedule's
        memrefs take is kept for the schedules after it. Raises DhirError when neither
        fits."""
        tasks = list(schedule.tasks())
        placed = list(chosen)
        held = self.with_schedule(schedule, dict(zip(tasks, placed, strict=True)))
        if self.overflow(held) is not None:
            placed = self._by_rows(schedule, tasks, placed, runs_on)
            held = self.with_schedule(schedule, dict(zip(tasks, placed, strict=True)))
            self.check(held)
        self.held = held
        return placed

    def with_schedule(
        self, schedule: ScheduleOp, placement: Mapping[TaskOp, int]
    ) -> list[list[Held]]:
        """What each rank holds with the partitioned memrefs of `schedule` placed so."""
        held = [list(mine) for mine in self.held]
        for memref in self._listed_by(schedule):
            found = self.storage.rows(memref, placement)
            for rank, mine in enumerate(held):
                rows = found if isinstance(found, Whole) else found[rank]
                if self.storage.held(memref, rows):
                    mine.append((memref, rows))
        return held

    def overflow(self, held: list[list[Held]]) -> tuple[Device, list[int], int] | None:
        """The first device whose ranks hold more than its memory: it, its ranks and
        their bytes."""
        by_device: dict[int, list[int]] = {}
        for rank, device in enumerate(self.devices):
            by_device.setdefault(id(device), []).append(rank)
        for ranks in by_device.values():
            device = self.devices[ranks[0]]
            total = sum(self._bytes(held[rank]) for rank in ranks)
            if device.memory_bytes is not None and total > device.memory_bytes:
                return device, ranks, total
        return None

    def check(self, held: list[list[Held]]) -> None:
        found = self.overflow(held)
        if found is not None:
            raise self._refusal(held, *found)

    def _bytes(self, held: list[Held]) -> int:
        return sum(self.storage.held(memref, rows) for memref, rows in held)

    def _listed_by(self, schedule: ScheduleOp) -> list[Stored]:
        return [m for m in self.storage.memrefs if m.whole is None and m.schedule is schedule]

    def _by_rows(
        self,
        schedule: ScheduleOp,
        tasks: list[TaskOp],
        chosen: list[int],
        runs_on: Callable[[int, int], bool],
    ) -> list[int]:
        """Each task touching a partitioned memref of `schedule` on the rank owning the
        middle of the rows it touches of the largest such memref, the rows cut into equal
        blocks over the ranks that can run it; the other tasks where they are."""
        mine = sorted(self._listed_by(schedule), key=lambda m: -(m.size or 0))
        placed = list(chosen)
        for k, task in enumerate(tasks):
            memref = next((m for m in mine if task in m.boxes and m.shape), None)
            if memref is None or memref.shape is None:
                continue
            boxes = memref.boxes[task]
            if not boxes:
                continue
            low, high = min(b.lo[0] for b in boxes), max(b.hi[0] for b in boxes)
            middle = (low + high) / 2 / max(memref.shape[0], 1)
            ranks = [r for r in range(len(self.devices)) if runs_on(k, r)]
            if ranks:
                placed[k] = ranks[min(int(middle * len(ranks)), len(ranks) - 1)]
        return placed

    def _refusal(
        self, held: list[list[Held]], device: Device, ranks: list[int], total: int
    ) -> DhirError:
        several = len(ranks) > 1
        parts = [
            _part(memref, rows, self.storage.held(memref, rows), rank if several else None)
            for rank in ranks
            for memref, rows in held[rank]
        ]
        on = f"rank {ranks[0]}" if not several else f"ranks {ranks[0]}..{ranks[-1]}"
        message = (
            f"the data {on} holds needs {total} bytes, more than the {device.memory_bytes} "
            f"bytes of device '{device.name}' (memory_bytes in the machine description "
            f"{self.where(device)}): {'; '.join(parts)}. Run on more ranks (devices), on "
            "devices with more memory, or on smaller arrays"
        )
        return DhirError([Diagnostic(message)])


def program_storage(
    function: func.FuncOp,
    ranks: int,
    entry: str,
    regions: Mapping[TaskOp, Regions] | None = None,
) -> Storage:
    """The storage of `function` (the entry) on `ranks` ranks as the native backend keeps
    it: partitioned where dhir.analysis.partition allows, in a build for GPUs too (a
    memref a whole GPU task uses stays whole there). `regions`: tasks' access regions,
    where already found."""
    return storage(function, ranks, final_to_root(function, entry), regions)


def held_in_part(
    module: Operation, entry: str, storage: Callable[[], Storage | None], nodes: list[str] | None
) -> frozenset[SSAValue]:
    """The memref arguments of `entry` the ranks may hold in part (Storage.in_part), whose
    results each rank writes to the result files itself, so no message takes them to
    rank 0. None where the ranks span several `nodes` (CostModel.nodes): a rank on
    another node usually cannot open rank 0's files and sends its part to rank 0
    (docs/semantics.md, "Partitioned storage")."""
    function = SymbolTable.lookup_symbol(module, entry)
    found = storage() if nodes is None else None
    if found is None or not isinstance(function, func.FuncOp):
        return frozenset()
    return found.in_part(function)


def resident(found: Storage, placement: Mapping[TaskOp, int]) -> list[int]:
    """The bytes each rank holds of the memrefs of `found` with tasks placed so."""
    out = [0] * found.ranks
    for memref in found.memrefs:
        rows = found.rows(memref, placement)
        for rank in range(found.ranks):
            out[rank] += found.held(memref, rows if isinstance(rows, Whole) else rows[rank])
    return out


def _part(memref: Stored, rows: Rows | Whole, nbytes: int, rank: int | None) -> str:
    where = f" on rank {rank}" if rank is not None else ""
    if isinstance(rows, Whole):
        return f"memref {memref.name} needs {nbytes} bytes{where}, whole ({rows.reason})"
    return f"memref {memref.name} needs {nbytes} bytes{where} (rows {describe(rows)})"
