"""dhir-time-tiles: a time loop of stencil sweeps run as skewed bands of steps on one rank,
so that each band reads its arrays from memory once instead of once a step.

It takes a host `scf.for` or `affine.for` (the time loop; affine loops in it are read as
the scf loops --lower-affine makes of them, and element-wise `linalg.generic` sweeps
over views as their loops over the arrays (dhir.transforms.generic_sweeps), which
replace them where the loop is rewritten) whose body is one `dhir.schedule` of CPU tasks,
each a *row statement*: a loop over rows `i` (step 1, constant bounds) whose body stores
only to row `i` of the memrefs it writes and loads rows `i + c` (`c` constant) of the
memrefs any task writes; or a body storing to one constant row. Memrefs no task writes
may be read anywhere. Consecutive statements that do not touch what the others write
(a sweep cut into row blocks) make one stage; in program order, stage `q` is stage
`q mod m` of step `q div m`. Instance (q, i) touches rows within `r` of `i`, so with
`s = max(r, 1)` every instance that must come before (q, i) (an earlier stage, a row
within `r`) has `w = i + s * q` no larger than its own. The band runs `w` ascending and,
for each, the stages in order: every instance still sees what it saw in program order
and computes its values with the same operations, so the result is bit for bit the
program's.

Bands hold as many steps as fit their rows (`s * m * steps` rows of every array) in
half the core's private cache, or, where not even two would, a quarter of the last-level
cache: those of the CPU the machine description attached to the module gives rank 0,
else this machine's.

On one rank the schedule becomes one task. On R ranks the rows become R blocks, one task
per rank (`dhir.rank`), in a schedule per band: a host loop of bands. Each task copies
the rows its block needs at the band's start (`halo = s * m * steps` more on each side)
into buffers of its own, runs the band there on rows that shrink by `s` each stage (so
that every instance it computes sees only rows it computed or copied), and copies its
block's rows back. Ghost rows are computed on both sides, by the same operations, so the
result stays the program's bit for bit; the ranks exchange `halo`-wide halos once a band
instead of thin ones every step, but for the first band: each rank holds its first ghost
rows from the input, and dhir-lower-to-mpi sends nothing its receiver holds on a time
loop's first iteration. A memref that each step rewrites before reading it
(every element a stage reads that some statement writes, an earlier stage of the step
surely wrote) needs no halo: its copy holds from the first band the elements no
statement writes, and the band computes the rest of its ghost rows before reading them.
Bands are kept short enough that the ghost rows cost at most about an eighth more work,
and within a quarter of that length, of the one that sends the fewest halo rows over the
loop (the first band's none), the longest of those that tie, each length made as even as
its number of bands allows (9 steps under 4: bands of 3, not 4, 4 and 1). A last,
shorter band still sends a whole halo: the lowering sends a band's halo as the same
message in every band after the first, and a last band after the loop, its own schedule,
makes the loop's end assemble the arrays instead (more bytes, not fewer). A loop of
fewer steps than a band runs them in one, whose halo reaches only as far as they need;
where not even two steps are, the loop is left. So is a loop whose rows, cut in blocks,
fit half of each core's share of the last-level cache: each rank's sweeps already run
from cache.
"""

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import cast

import islpy as isl
from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.counts import constant_int
from dhir.analysis.regions import Bounds, Regions, empty, piece_boxes, task_regions, whole
from dhir.analysis.sharing import may_alias, memory_of
from dhir.analysis.validity import Box
from dhir.dialects import affine, arith, linalg, memref, scf
from dhir.dialects.access import is_pure
from dhir.dialects.dhir import (
    RANK_ATTR,
    ScheduleOp,
    TargetOp,
    TaskOp,
    YieldOp,
    defined_inside,
    walk_outside_tasks,
)
from dhir.ir.diagnostics import loc_of
from dhir.ir.tasks import is_gpu_task
from dhir.ir.walk import find_ops
from dhir.machine.description import DeviceKind
from dhir.machine.detect import local_caches
from dhir.machine.dlti import SYSTEM_ATTR, system_of
from dhir.transforms.affine_scope import in_affine_loop, kept_in, lower_nest
from dhir.transforms.blas import as_allowed, flags_allowing
from dhir.transforms.building import const_index, insert_before, put, replace_by
from dhir.transforms.generic_sweeps import write_as_loops
from dhir.transforms.optimize_bodies import Decision
from dhir.transforms.pass_options import check_ranks
from dhir.transforms.triangles import lift
from dhir.units import byte_size

_L2, _L3 = 512 * 1024, 16 * 1024 * 1024  # when the system does not say
MAX_STEPS = 64
# Ghost rows on R ranks: a band's halo is at most 1/GHOSTS of a block (module docstring).
GHOSTS = 8


class _Left(Exception):
    """A time loop left as written, and why."""


@dataclass(frozen=True)
class TimeTilesPass(ModulePass):
    """Run stencil time loops of row statements in skewed bands of steps, exactly.

    Module docstring; `steps`: the steps in a band (0: as the caches allow; on several
    ranks at most that many, as even as the loop's steps allow); `ranks`: the ranks the
    loop runs on."""

    name = "dhir-time-tiles"
    steps: int = 0
    ranks: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.steps < 0:
            raise PassFailedException(
                f"dhir-time-tiles: steps must be at least 0 (0: as the caches allow), "
                f"got {self.steps}"
            )
        check_ranks(self.name, self.ranks)
        time_tiles(op, self.steps, self.ranks)


def time_tiles(module: ModuleOp, steps: int = 0, ranks: int = 1) -> list[Decision]:
    """Rewrite every time loop it can (see the module docstring); what it did and left."""
    loops = list(_time_loops(module))
    if not loops:
        return []
    caches = _caches(module)
    decisions: list[Decision] = []
    for written, schedule in loops:
        held, where = None, loc_of(written)
        try:
            if _holds_affine(written) or find_ops(written, linalg.GenericOp):
                held = _as_scf(written)
                loop = cast(scf.ForOp, held.last_op)
                schedule = cast(ScheduleOp, loop.body.block.first_op)
            else:
                loop = cast(scf.ForOp, written)
            band = _Band.of(loop, schedule, steps, ranks, caches)
            allowed = flags_allowing(o for s in band.statements for op in s.ops for o in op.walk())
            if held is not None:
                replace_by(written, held)  # the scf form stands for the loop written
            text = band.rewrite() if ranks == 1 else band.rewrite_parts()
            decisions.append(Decision(where, True, as_allowed(text, allowed)))
        except _Left as why:
            if held is not None:
                _drop(held)
            decisions.append(Decision(where, False, f"time loop left as written: {why}"))
    return decisions


def _time_loops(module: ModuleOp) -> Iterator[tuple[scf.ForOp | affine.ForOp, ScheduleOp]]:
    for op in walk_outside_tasks(module):
        if isinstance(op, scf.ForOp | affine.ForOp) and not op.results:
            end = op.body.block.last_op
            ops = [o for o in op.body.block.ops if o is not end]
            if len(ops) == 1 and isinstance(ops[0], ScheduleOp):
                yield op, ops[0]


def _holds_affine(loop: scf.ForOp | affine.ForOp) -> bool:
    return isinstance(loop, affine.ForOp) or bool(find_ops(loop, affine.ForOp))


def _as_scf(loop: scf.ForOp | affine.ForOp) -> Block:
    """A copy of `loop` with its affine loops and the ops in them made scf, as
    --lower-affine makes them (the same semantics), and its linalg.generic sweeps made
    their loops, alone in a block with the constants its bounds take: the form the pass
    reads. Raises _Left where one cannot be made so."""
    copy = loop.clone()
    block = Block([copy])
    kept = kept_in(copy) if isinstance(copy, affine.ForOp) else None
    nests = [nest for task in find_ops(copy, TaskOp) for nest in _outermost(task)]
    for nest in nests:
        kept = kept or kept_in(nest)
    if kept is not None:
        _drop(block)
        raise _Left(f"an affine loop holds {kept.name}, which this pass does not model")
    for nest in nests:  # first: their bounds' constants stay in their tasks
        lower_nest(nest)
    if isinstance(copy, affine.ForOp):
        lower_nest(copy)
    # `copy` itself, where affine, was replaced by its scf form.
    for sweep in [op for top in block.ops for op in find_ops(top, linalg.GenericOp)]:
        why = write_as_loops(sweep)
        if why is not None:
            _drop(block)
            raise _Left(f"a task's linalg.generic {why}: no sweep of rows")
    return block


def _outermost(task: TaskOp) -> list[affine.ForOp]:
    """The affine loops of `task` in no other affine loop of it."""
    return [op for op in find_ops(task, affine.ForOp) if not in_affine_loop(op, task)]


def _drop(held: Block) -> None:
    for op in reversed(list(held.ops)):
        op.detach()
        op.erase()


@dataclass
class _Statement:
    """A task as a row statement: rows [lo, hi), its body ops, the row index they use
    (None when they store to one constant row), what it writes and reads (memref, row
    offset; None for a row that does not follow `i`)."""

    task: TaskOp
    lo: int
    hi: int
    ops: list[Operation]
    row: SSAValue | None
    writes: set[SSAValue]
    reads: list[tuple[SSAValue, int | None]]


def _statement(task: TaskOp, outer: set[SSAValue]) -> _Statement:
    if is_gpu_task(task):
        raise _Left("a task runs on a GPU")
    ops = [op for op in task.body.block.ops if op is not task.body.block.last_op]
    loops = [op for op in ops if op.regions]
    if any(not is_pure(op) for op in ops if not op.regions):
        raise _Left("a task touches memory outside its row loop")
    if len(loops) == 1 and isinstance(loops[0], scf.ForOp) and _is_row_loop(loops[0]):
        loop = loops[0]
        if loop.iter_args:
            raise _Left("a row loop carries values from row to row (iter_args)")
        lo, hi = constant_int(loop.lb), constant_int(loop.ub)
        if lo is None or hi is None or constant_int(loop.step) != 1:
            raise _Left("a row loop's bounds are not constants with step 1")
        body = [op for op in ops if op is not loop]
        body += [op for op in loop.body.block.ops if not isinstance(op, scf.YieldOp)]
        statement = _Statement(task, lo, hi, body, loop.body.block.args[0], set(), [])
        _accesses(statement, loop, outer)
        return statement
    statement = _Statement(task, 0, 0, ops, None, set(), [])
    _accesses(statement, task, outer)
    return statement


def _is_row_loop(loop: scf.ForOp) -> bool:
    """Whether every store in `loop` writes the row of its index."""
    iv = loop.body.block.args[0]
    stores = [op for op in loop.body.walk() if isinstance(op, memref.StoreOp)]
    return bool(stores) and all(op.indices and op.indices[0] is iv for op in stores)


def _accesses(statement: _Statement, scope: Operation, outer: set[SSAValue]) -> None:
    """The memrefs `statement` writes and the rows it reads, relative to its row."""
    rows: set[int] = set()
    reads: list[tuple[SSAValue, _Row]] = []
    for op in scope.walk():
        if op is scope or isinstance(op, scf.ForOp | scf.YieldOp | YieldOp) or is_pure(op):
            continue
        if not isinstance(op, memref.LoadOp | memref.StoreOp):
            raise _Left(f"a task holds {op.name}, which this pass does not model")
        if op.memref not in outer or not op.indices:
            raise _Left("a task accesses a memref that is not a schedule operand, or a 0-D one")
        row = _row(op.indices[0], statement, scope, isinstance(op, memref.StoreOp))
        if isinstance(op, memref.LoadOp):
            reads.append((op.memref, row))
            continue
        if statement.row is None and row.at is not None:
            rows.add(row.at)
        elif row.offset != 0:
            raise _Left("a task stores elsewhere than its row")
        statement.writes.add(op.memref)
    if statement.row is None:
        if len(rows) != 1:
            raise _Left("a task without a row loop stores to more than one row")
        (at,) = rows
        statement.lo, statement.hi = at, at + 1
        statement.reads = [(m, None if r.at is None else r.at - at) for m, r in reads]
    else:
        statement.reads = [(m, r.offset) for m, r in reads]


@dataclass(frozen=True)
class _Row:
    """A first subscript: the statement's row plus `offset`, the constant row `at`, or
    (both None) a row that does not follow the statement's."""

    offset: int | None = None
    at: int | None = None


def _row(index: SSAValue, statement: _Statement, scope: Operation, store: bool) -> _Row:
    """The row `index` names; a load's row that follows neither the statement's row nor a
    constant is any row (`_Row()`): harmless in a memref no statement writes (`_skew`)."""
    if statement.row is None:
        value = constant_int(index)
        if value is None and defined_inside(index, scope):
            if not store:
                return _Row()
            raise _Left("a row index varies inside a task without a row loop")
        return _Row(at=value)
    loop = statement.row.owner.parent_op()
    assert isinstance(loop, scf.ForOp)
    bound = lift(index, loop)
    if bound is not None and bound.coef == 0:
        return _Row()
    if bound is not None and bound.coef == 1 and not bound.terms:
        return _Row(offset=bound.const)
    if not store:
        return _Row()
    if bound is None or bound.coef != 1:
        raise _Left("a row index is not the row plus a constant")
    raise _Left("a row index is the row plus a value that is not a constant")


@dataclass
class _Band:
    loop: scf.ForOp
    schedule: ScheduleOp
    statements: list[_Statement]
    stages: list[list[_Statement]]  # statements run as one stage (_stages)
    skew: int
    caches: "_Caches"
    steps: int = 0
    parts: list["_Part"] = field(default_factory=list["_Part"])  # one per rank, none on one

    @staticmethod
    def of(
        loop: scf.ForOp, schedule: ScheduleOp, steps: int, ranks: int, caches: "_Caches"
    ) -> "_Band":
        counter = loop.body.block.args[0].type
        if not isinstance(counter, IndexType):
            raise _Left(f"its counter is an {counter}, not an index")
        outer = set(schedule.args)
        others = [op for op in schedule.body.block.ops if not isinstance(op, TaskOp | YieldOp)]
        if any(not isinstance(op, TargetOp) for op in others):
            raise _Left("the schedule holds more than targets and tasks")
        tasks = list(schedule.tasks())
        if not tasks:
            raise _Left("the schedule has no task")
        if len({task.target for task in tasks}) != 1:
            raise _Left("its tasks name different targets")
        if ranks > 1 and any(RANK_ATTR in task.attributes for task in tasks):
            raise _Left(f"its tasks are placed by hand ({RANK_ATTR})")
        statements = [_statement(task, outer) for task in tasks]
        skew = _skew(statements)
        band = _Band(loop, schedule, statements, _stages(statements), skew, caches)
        if steps == 1:  # asked for: no cache too small for two steps' rows
            raise _Left("steps=1 asks for bands of one step, which are the loop as written")
        band.steps = steps if steps > 0 else band.fitting_steps()
        if band.steps < 2:
            raise _Left("not even two steps' rows fit the core's caches")
        if ranks > 1:
            band.cut(ranks, steps > 0)
        return band

    def cut(self, ranks: int, fixed: bool) -> None:
        """One block of rows per rank, and bands short enough for its ghost rows."""
        first, last = self._rows()
        rows = last - first
        per_step = self.skew * len(self.stages)
        if rows < ranks:
            held = "no row" if rows == 0 else f"{rows} row{'s' * (rows != 1)}"
            raise _Left(
                f"its statements run on {held}, fewer than its {ranks} ranks: a block of "
                "rows each would leave a rank none"
            )
        if not fixed:
            self._worth_it(rows // ranks)
            self.steps = self._fewest_halo_rows(
                min(self.steps, rows // ranks // (GHOSTS * per_step))
            )
        if self.steps < 2:
            raise _Left(
                f"blocks of {rows // ranks} rows on {ranks} ranks are too thin for bands "
                f"of two steps (their ghost rows, {2 * per_step} a side, would add more "
                f"than 1/{GHOSTS} to a block's work): the ranks exchange halos every step"
            )
        if any(not _static(m) for s in self.statements for m in s.writes):
            raise _Left("a memref the tasks write has a dynamic shape")
        trips = self._trips()
        if trips is not None and trips > 0:
            # As many bands, as even as they go: the lowering sends a band's halo as the
            # same message in every band, so a short last band's shrinks only with all.
            self.steps = _even(trips, self.steps)
        bounds = [first + rows * k // ranks for k in range(ranks + 1)]
        halo = per_step * self.steps
        self.parts = [_Part(lo, hi, halo) for lo, hi in zip(bounds, bounds[1:])]

    def _rows(self) -> tuple[int, int]:
        """The rows [first, last) the statements run on; a statement of no rows (an empty
        row loop, whatever its bounds) runs on none."""
        ranges = [(s.lo, s.hi) for s in self.statements if s.lo < s.hi] or [(0, 0)]
        return min(lo for lo, _ in ranges), max(hi for _, hi in ranges)

    def _fewest_halo_rows(self, longest: int) -> int:
        """The band length, within a quarter below `longest` and made as even as its
        number of bands allows (`_even`), that sends the fewest halo rows over the loop
        (`_halo_rows_sent`); the longest of those that tie."""
        trips = self._trips()
        if longest < 2 or trips is None or trips <= 0:
            return longest
        shortest = max(2, -(-3 * longest // 4))
        lengths = (_even(trips, k) for k in range(longest, shortest - 1, -1))
        return min(lengths, key=lambda k: _halo_rows_sent(trips, k))

    def _trips(self) -> int | None:
        """How many steps the time loop runs, where its bounds are constants."""
        loop = self.loop
        bounds = [constant_int(v) for v in (loop.lb, loop.ub, loop.step)]
        if any(b is None for b in bounds):
            return None
        lower, upper, step = cast(list[int], bounds)
        return -(-(upper - lower) // step) if step > 0 else 0

    def _band_steps(self) -> str:
        """The steps a band runs, as said: a loop of fewer steps than a band runs them all
        in one (it said "bands of 15 steps" for a loop of 9)."""
        trips = self._trips()
        steps = self.steps if trips is None else max(1, min(self.steps, trips))
        return f"{steps} step{'s' * (steps != 1)}"

    def _worth_it(self, block: int) -> None:
        """Leave the loop where a rank's rows of every array already fit half its share
        of the L3: its sweeps then run from cache, and ghost rows would only add work."""
        share = self.caches.llc // self.caches.cores
        held = block * self._row_bytes()
        if held <= share // 2:
            raise _Left(
                f"a rank's {block} rows ({byte_size(held)}) fit half its share of the L3 "
                f"({byte_size(share // 2)} of {byte_size(share)}): its sweeps run from cache, "
                "halos every step"
            )

    def _row_bytes(self) -> int:
        return sum(_row_bytes(m) for m in {m for s in self.statements for m in _touched(s)})

    def fitting_steps(self) -> int:
        per_step = self.skew * len(self.stages) * max(self._row_bytes(), 1)
        steps = (self.caches.core // 2) // per_step
        if steps < 2:
            steps = (self.caches.llc // 4) // per_step
        return min(steps, MAX_STEPS)

    def rewrite(self) -> str:
        schedule, loop = self.schedule, self.loop
        body = Block()
        made = put(body, self._target().clone())
        task_body = Block()
        self._bands(task_body)
        put(body, TaskOp(made.results[0], self._memrefs(), Region(task_body)))
        fused = ScheduleOp(list(schedule.args), Region(body))
        parent = loop.parent_block()
        assert parent is not None
        parent.insert_op_before(fused, loop)
        parent.erase_op(loop)
        count, stages = len(self.statements), len(self.stages)
        return (
            f"time loop of {count} row statements ({stages} stages a step) run in skewed "
            f"bands of {self._band_steps()} (rows {self.skew} apart per stage) on one "
            "rank, exact"
        )

    def rewrite_parts(self) -> str:
        """Copies of each rank's rows; for tb { schedule { per rank: the rows it needs
        (all of them in the first band, else its ghost rows), the band; per rank: its
        edge rows (its whole block after the last band) } }"""
        loop = self.loop
        parent = loop.parent_block()
        assert parent is not None
        outside, written = Block(), self._written()
        kept = self._kept(written)
        for part in self.parts:
            for value in written:
                part.make(outside, value)
        copies = [copy for part in self.parts for copy in part.buffers]
        span = put(outside, arith.MuliOp(loop.step, const_index(outside, self.steps))).result
        host = Block(arg_types=[IndexType()])
        start = host.args[0]
        body = Block()
        made = put(body, self._target().clone()).results[0]
        # Every rank takes the rows it needs from the others before any gives its own
        # edge rows: its copies carry the band's values from the first task to the second.
        for rank, part in enumerate(self.parts):
            block = Block()
            first = put(block, arith.CmpiOp(start, loop.lb, "eq")).result
            put(block, _start_copies(first, part, written, kept))
            self._band(block, start, span, part)
            self._task(body, made, rank, part, block)
        for rank, part in enumerate(self.parts):
            block = Block()
            after = put(block, arith.AddiOp(start, span)).result
            last = put(block, arith.CmpiOp(after, loop.ub, "sge")).result
            put(block, _end_copies(last, part, written, kept))
            self._task(body, made, rank, part, block)
        put(host, ScheduleOp([*self.schedule.args, *copies], Region(body)))
        put(host, scf.YieldOp())
        put(outside, scf.ForOp(loop.lb, loop.ub, span, [], Region(host)))
        for copy in copies:
            put(outside, memref.DeallocOp.get(copy))
        insert_before(outside, loop)
        parent.erase_op(loop)
        count, stages, ranks = len(self.statements), len(self.stages), len(self.parts)
        return (
            f"time loop of {count} row statements ({stages} stages a step) run in skewed "
            f"bands of {self._band_steps()} on {ranks} ranks, a block of rows each, with "
            f"halos of {self.parts[0].halo} rows once a band, exact"
        )

    def _target(self) -> TargetOp:
        target = next(self.schedule.tasks()).target
        assert target is not None and isinstance(target.owner, TargetOp)
        return target.owner

    def _task(self, body: Block, target: SSAValue, rank: int, part: "_Part", block: Block) -> None:
        task = TaskOp(target, [*self._memrefs(), *part.buffers], Region(block))
        task.attributes[RANK_ATTR] = IntegerAttr(rank, i64)
        put(body, task)

    def _memrefs(self) -> list[SSAValue]:
        memrefs: list[SSAValue] = []
        for statement in self.statements:
            for value in statement.task.memrefs:
                if value not in memrefs:
                    memrefs.append(value)
        return memrefs

    def _written(self) -> list[SSAValue]:
        return [m for m in self._memrefs() if any(m in s.writes for s in self.statements)]

    def _kept(self, written: list[SSAValue]) -> dict[SSAValue, "_Kept"]:
        """The written memrefs whose ghost rows need no refreshing (`_reads_old`), with
        the boxes of the elements statements write and of those none writes."""
        kept: dict[SSAValue, _Kept] = {}
        regions = {id(s): task_regions(s.task) for s in self.statements}
        for value in written:
            writes = [regions[id(s)].written(value) for s in self.statements]
            try:
                ever = reduce(isl.Set.union, writes, empty(value.type))
                if self._reads_old(value, ever, regions):
                    continue
                boxes = _exact_boxes(ever), _exact_boxes(whole(value.type).subtract(ever))
            except isl.Error:
                continue  # regions over different parameters: assume the worst
            if boxes[0] is not None and boxes[1] is not None:
                kept[value] = _Kept(boxes[0], boxes[1])
        return kept

    def _reads_old(self, value: SSAValue, ever: isl.Set, regions: dict[int, Regions]) -> bool:
        """Whether some statement may read an element of `value` that some statement
        writes (`ever`) and no earlier stage of the same step surely has: a value from an
        earlier step, which a band's ghost rows must bring from the rank finishing it.
        Otherwise a band reads there only elements it computed itself first (the rows a
        stage computes lie within those of every earlier stage, a skew inside) or that
        no statement writes, which the first band's copy holds for good. (heat-3d's and
        jacobi-2d's second arrays: each step rewrites their rows before reading them, but
        for the edges of each row, which no sweep writes.)"""
        before = empty(value.type)
        for stage in self.stages:
            for statement in stage:
                read = regions[id(statement)].read(value)
                if not (read & ever).is_subset(before):
                    return True
            for statement in stage:
                before = before | regions[id(statement)].must_written(value)
        return False

    def _bands(self, block: Block) -> None:
        """for tb in [lb, ub) step steps*step { for w { for tt { stages } } }"""
        span = put(block, arith.MuliOp(self.loop.step, const_index(block, self.steps))).result
        band = Block(arg_types=[IndexType()])
        self._band(band, band.args[0], span, None)
        put(band, scf.YieldOp())
        put(block, scf.ForOp(self.loop.lb, self.loop.ub, span, [], Region(band)))

    def _band(self, band: Block, start: SSAValue, span: SSAValue, part: "_Part | None") -> None:
        """The band of steps from `start` (`span` = steps * step): for w { for tt {
        stages } }; with `part`, only the wavefronts that reach its rows."""
        loop, count = self.loop, len(self.stages)
        end = put(band, arith.MinSIOp(put(band, arith.AddiOp(start, span)).result, loop.ub))
        length = put(band, arith.SubiOp(end.result, start)).result
        taken = put(band, arith.CeilDivSIOp(length, loop.step)).result
        stages = put(band, arith.MuliOp(taken, const_index(band, count))).result
        first, last = self._rows()
        # w = i + skew * q for i in [first, last), q in [0, stages)
        tail = put(band, arith.SubiOp(stages, const_index(band, 1))).result
        reach = put(band, arith.MuliOp(tail, const_index(band, self.skew))).result
        w_end = put(band, arith.AddiOp(reach, const_index(band, last))).result
        if part is not None:  # its last stage's rows: w < hi + halo - skew
            edge = const_index(band, part.hi + part.halo - self.skew)
            w_end = put(band, arith.MinSIOp(w_end, edge)).result
            first = max(first, part.lo - part.halo + self.skew)
        front = Block(arg_types=[IndexType()])
        self._front(front, front.args[0], start, taken, part)
        put(front, scf.YieldOp())
        one = const_index(band, 1)
        put(band, scf.ForOp(const_index(band, first), w_end, one, [], Region(front)))

    def _front(
        self, block: Block, w: SSAValue, start: SSAValue, taken: SSAValue, part: "_Part | None"
    ) -> None:
        """The instances of one wavefront `w`, step by step, statement by statement."""
        loop, count = self.loop, len(self.stages)
        body = Block(arg_types=[IndexType()])
        tt = body.args[0]
        later = put(body, arith.MuliOp(tt, loop.step)).result
        t = put(body, arith.AddiOp(start, later)).result
        first = put(body, arith.MuliOp(tt, const_index(body, count))).result
        for s, stage in enumerate(self.stages):
            q = put(body, arith.AddiOp(first, const_index(body, s))).result
            back = put(body, arith.MuliOp(q, const_index(body, self.skew))).result
            i = put(body, arith.SubiOp(w, back)).result
            rows = part.rows(body, back, self.skew) if part is not None else None
            for statement in stage:
                self._instance(body, statement, i, t, rows, part)
        put(body, scf.YieldOp())
        put(block, scf.ForOp(const_index(block, 0), taken, const_index(block, 1), [], Region(body)))

    def _instance(
        self,
        body: Block,
        statement: _Statement,
        i: SSAValue,
        t: SSAValue,
        rows: tuple[SSAValue, SSAValue] | None,
        part: "_Part | None",
    ) -> None:
        """Statement `statement` for row `i` at time `t`, when it has that row (and, on
        several ranks, when the stage's `rows` hold it)."""
        # Row i when the statement has it: a loop of at most one row, which LLVM
        # vectorises inside as it does the row loop as written (not so under an if).
        low = put(body, arith.MaxSIOp(i, const_index(body, statement.lo))).result
        after = put(body, arith.AddiOp(i, const_index(body, 1))).result
        high = put(body, arith.MinSIOp(after, const_index(body, statement.hi))).result
        if rows is not None:
            low = put(body, arith.MaxSIOp(low, rows[0])).result
            high = put(body, arith.MinSIOp(high, rows[1])).result
        then = Block(arg_types=[IndexType()])
        mapper: dict[SSAValue, SSAValue] = {self.loop.body.block.args[0]: t}
        if statement.row is not None:
            mapper[statement.row] = then.args[0]
        if part is not None:
            mapper.update({m: copy for m, (copy, _) in part.copies.items()})
        for op in statement.ops:
            # Constants before the row's loop, as a user writes them outside it (a swept
            # linalg.generic's or an affine nest's bounds): the optimizer reads a row loop
            # whose body computes only its nest's bounds.
            at = body if isinstance(op, arith.ConstantOp) else then
            made = put(at, op.clone(value_mapper=mapper))
            if part is not None:
                part.shift(made)
        put(then, scf.YieldOp())
        put(body, scf.ForOp(low, high, const_index(body, 1), [], Region(then)))


@dataclass
class _Part:
    """Rows [lo, hi) that one rank finishes each band, from copies of rows [lo - halo,
    hi + halo) of what the statements write; `copies`: each memref's copy and the row
    of the memref where the copy starts."""

    lo: int
    hi: int
    halo: int
    copies: dict[SSAValue, tuple[SSAValue, int]] = field(default_factory=dict)

    @property
    def buffers(self) -> list[SSAValue]:
        return [copy for copy, _ in self.copies.values()]

    def make(self, block: Block, value: SSAValue) -> None:
        """The copy of `value`'s rows this part needs, allocated in `block`."""
        shape = _shape(value)
        first, end = max(0, self.lo - self.halo), min(shape[0], self.hi + self.halo)
        if first < end:
            element = cast(MemRefType, value.type).element_type
            copy = put(block, memref.AllocOp.get(element, 64, [end - first, *shape[1:]]))
            self.copies[value] = (copy.memref, first)

    def fill(self, block: Block, value: SSAValue) -> None:
        """All the rows of the copy, from the memref."""
        if value in self.copies:
            first, end = self._extent(value)
            self._copy(block, value, first, end, inward=True)

    def fill_except(self, block: Block, value: SSAValue, unwritten: Sequence[Bounds]) -> None:
        """The block's rows and, of the ghost rows, the elements in the boxes `unwritten`
        (inclusive bounds): the band computes the others before it reads them."""
        if value not in self.copies:
            return
        first, end = self._extent(value)
        self._copy(block, value, max(first, self.lo), min(end, self.hi), inward=True)
        for box in unwritten:
            for rows in ((first, min(self.lo, end)), (max(self.hi, first), end)):
                self._copy_box(block, value, box, rows, inward=True)

    def give_boxes(self, block: Block, value: SSAValue, boxes: Sequence[Bounds]) -> None:
        """The elements of the block's rows in `boxes` (inclusive bounds), to the memref."""
        if value not in self.copies:
            return
        rows = self._held(value)
        for box in boxes:
            self._copy_box(block, value, box, rows, inward=False)

    def _copy_box(
        self, block: Block, value: SSAValue, box: Bounds, rows: tuple[int, int], inward: bool
    ) -> None:
        """The part of `box` (inclusive bounds) of `value` in rows [rows[0], rows[1])
        into its copy (`inward`) or back; nothing where they do not meet."""
        (lo, hi), copy_of = box, self.copies[value]
        top, bottom = max(lo[0], rows[0]), min(hi[0] + 1, rows[1])
        if top >= bottom:
            return
        corner = (top, *lo[1:])
        sizes = (bottom - top, *(b - a + 1 for a, b in zip(lo[1:], hi[1:], strict=True)))
        copy, first = copy_of
        inner = (corner[0] - first, *corner[1:])
        outer, mine = (_box(block, v, c, sizes) for v, c in ((value, corner), (copy, inner)))
        put(block, memref.CopyOp(outer, mine) if inward else memref.CopyOp(mine, outer))

    def refresh(self, block: Block, value: SSAValue) -> None:
        """The ghost rows, which other ranks finish, from the memref."""
        if value in self.copies:
            first, end = self._extent(value)
            self._copy(block, value, first, min(self.lo, end), inward=True)
            self._copy(block, value, max(self.hi, first), end, inward=True)

    def give_edges(self, block: Block, value: SSAValue) -> None:
        """The rows of the block within `halo` of its ends, which other ranks' ghost
        rows are, to the memref."""
        if value in self.copies:
            lo, hi = self._held(value)
            if hi - lo <= 2 * self.halo:
                self._copy(block, value, lo, hi, inward=False)
                return
            self._copy(block, value, lo, lo + self.halo, inward=False)
            self._copy(block, value, hi - self.halo, hi, inward=False)

    def give_block(self, block: Block, value: SSAValue) -> None:
        """The block's rows, to the memref."""
        if value in self.copies:
            self._copy(block, value, *self._held(value), inward=False)

    def _held(self, value: SSAValue) -> tuple[int, int]:
        """The block's rows that `value` has: a statement may run on rows outside the
        memref where its columns are empty there (`for j in [0, i + 1)` from i = -2)."""
        return max(self.lo, 0), min(self.hi, _shape(value)[0])

    def _extent(self, value: SSAValue) -> tuple[int, int]:
        copy, first = self.copies[value]
        return first, first + _shape(copy)[0]

    def _copy(self, block: Block, value: SSAValue, lo: int, hi: int, inward: bool) -> None:
        """Rows [lo, hi) of `value` into its copy (`inward`) or back."""
        if lo >= hi:
            return
        copy, first = self.copies[value]
        outer, inner = _rows(block, value, lo, hi), _rows(block, copy, lo - first, hi - first)
        put(block, memref.CopyOp(outer, inner) if inward else memref.CopyOp(inner, outer))

    def rows(self, block: Block, back: SSAValue, skew: int) -> tuple[SSAValue, SSAValue]:
        """The rows stage q computes, `back` = skew * q: [lo - halo + skew * (q + 1),
        hi + halo - skew * (q + 1))."""
        low = put(block, arith.AddiOp(back, const_index(block, self.lo - self.halo + skew)))
        high = put(block, arith.SubiOp(const_index(block, self.hi + self.halo - skew), back))
        return low.result, high.result

    def shift(self, op: Operation) -> None:
        """Loads and stores in `op` that use a copy: their row from the memref's to the
        copy's."""
        firsts = {copy: first for copy, first in self.copies.values()}
        for access in op.walk():
            if not isinstance(access, memref.LoadOp | memref.StoreOp):
                continue
            first = firsts.get(access.memref)
            if not first:
                continue
            at = len(access.operands) - len(access.indices)
            ops = Block()
            row = put(ops, arith.SubiOp(access.indices[0], const_index(ops, first))).result
            insert_before(ops, access)
            access.operands[at] = row


@dataclass(frozen=True)
class _Kept:
    """A memref whose ghost rows a band never refreshes: the boxes (inclusive bounds) of
    its elements some statement writes, and of those none does. Its copies move only the
    first: the others never change, so no rank's copy of them goes stale, and no halo
    carries them."""

    written: tuple[Bounds, ...]
    unwritten: tuple[Bounds, ...]


def _start_copies(
    first: SSAValue, part: "_Part", written: list[SSAValue], kept: dict[SSAValue, _Kept]
) -> scf.IfOp:
    """scf.if first { fill the copies } else { refresh their ghost rows }; a memref in
    `kept` is filled with its block's rows and its ghost rows' unwritten elements, and
    never refreshed."""
    fill, refresh = Block(), Block()
    for value in written:
        if value in kept:
            part.fill_except(fill, value, kept[value].unwritten)
            continue
        part.fill(fill, value)
        part.refresh(refresh, value)
    return _if(first, fill, refresh)


def _end_copies(
    last: SSAValue, part: "_Part", written: list[SSAValue], kept: dict[SSAValue, _Kept]
) -> scf.IfOp:
    """scf.if last { the block's rows back } else { its edge rows back }; of a memref in
    `kept`, only its block's written elements after the last band (no rank reads its
    edge rows from the memref)."""
    block, edges = Block(), Block()
    for value in written:
        if value in kept:
            part.give_boxes(block, value, kept[value].written)
            continue
        part.give_block(block, value)
        part.give_edges(edges, value)
    return _if(last, block, edges)


def _if(condition: SSAValue, then: Block, other: Block) -> scf.IfOp:
    """scf.if condition { then } else { other }, each block ended by its yield."""
    for block in (then, other):
        put(block, scf.YieldOp())
    return scf.IfOp(condition, [], Region(then), Region(other))


def _exact_boxes(region: isl.Set) -> tuple[Bounds, ...] | None:
    """`region` as boxes, when each of its pieces is one (None when not, or with
    parameters)."""
    if region.dim(isl.dim_type.param) > 0:
        return None
    boxes = piece_boxes(region)
    if boxes is None:
        return None
    for lo, hi in boxes:
        box = Box(lo, tuple(h + 1 for h in hi)).as_set()
        if not box.is_subset(region):
            return None
    return boxes


def _shape(value: SSAValue) -> list[int]:
    kind = value.type
    assert isinstance(kind, MemRefType)
    return list(kind.get_shape())


def _box(block: Block, value: SSAValue, corner: Sequence[int], sizes: Sequence[int]) -> SSAValue:
    """The box of `value` at `corner` of `sizes`, as a view appended to `block`."""
    kind = cast(MemRefType, value.type)
    ones = [1] * len(sizes)
    view = memref.SubviewOp.from_static_parameters(value, kind, list(corner), list(sizes), ones)
    return put(block, view).result


def _rows(block: Block, value: SSAValue, first: int, end: int) -> SSAValue:
    """Rows [first, end) of `value`, as a view appended to `block`."""
    kind = cast(MemRefType, value.type)
    shape = _shape(value)
    offsets, sizes = [first] + [0] * (len(shape) - 1), [end - first, *shape[1:]]
    view = memref.SubviewOp.from_static_parameters(value, kind, offsets, sizes, [1] * len(shape))
    return put(block, view).result


def _static(value: SSAValue) -> bool:
    kind = value.type
    return isinstance(kind, MemRefType) and all(n >= 0 for n in kind.get_shape())


def _stages(statements: Sequence[_Statement]) -> list[list[_Statement]]:
    """Runs of consecutive statements that may share a stage: none reads a row another
    writes, and those writing one memref have rows apart (a sweep cut into row blocks)."""
    stages: list[list[_Statement]] = []
    for statement in statements:
        if stages and all(_apart(statement, other) for other in stages[-1]):
            stages[-1].append(statement)
        else:
            stages.append([statement])
    return stages


def _apart(a: _Statement, b: _Statement) -> bool:
    if _reads_what_writes(a, b) or _reads_what_writes(b, a):
        return False
    return not (a.writes & b.writes) or a.hi <= b.lo or b.hi <= a.lo


def _reads_what_writes(reader: _Statement, writer: _Statement) -> bool:
    """Whether `reader` reads a row `writer` writes (any row, where it reads rows that
    do not follow its own)."""
    for source, offset in reader.reads:
        if source not in writer.writes or reader.lo >= reader.hi:
            continue
        if offset is None:
            return True
        if reader.lo + offset < writer.hi and writer.lo < reader.hi + offset:
            return True
    return False


def _skew(statements: Sequence[_Statement]) -> int:
    """The farthest row (at least 1) any statement reads of a memref some statement
    writes; raise _Left where that does not bound the dependences."""
    written = {m for s in statements for m in s.writes}
    reach = 0
    for statement in statements:
        for source, offset in statement.reads:
            if source not in written:
                continue
            if offset is None:
                raise _Left("a task reads a row of a written memref that does not follow its own")
            if source in statement.writes and offset != 0:
                raise _Left("a task reads other rows of a memref it writes")
            reach = max(reach, abs(offset))
    touched = {m for s in statements for m in _touched(s)}
    for target in written:
        others = memory_of([target])
        if any(m is not target and may_alias(m, others) for m in touched):
            raise _Left("a memref the tasks write may share memory with another they use")
    return max(reach, 1)


def _touched(statement: _Statement) -> set[SSAValue]:
    return statement.writes | {m for m, _ in statement.reads}


def _row_bytes(value: SSAValue) -> int:
    kind = value.type
    assert isinstance(kind, MemRefType)
    size = 1
    for extent in kind.get_shape()[1:]:
        size *= max(extent, 1)
    element = kind.element_type
    width = getattr(element, "bitwidth", 64)
    return size * max(width // 8, 1)


@dataclass(frozen=True)
class _Caches:
    """A core's private cache and the last-level cache, in bytes, and the cores sharing
    the latter."""

    core: int
    llc: int
    cores: int


def _caches(module: ModuleOp) -> _Caches:
    """The caches of the CPU rank 0 runs on: the machine description's attached to
    `module`, else this machine's (sysfs), else common sizes."""
    core = llc = None
    cores = os.cpu_count() or 1
    if SYSTEM_ATTR in module.attributes:
        kinds = (d for d in system_of(module).rank_devices() if d.kind == DeviceKind.CPU)
        cpu = next(kinds, None)
        if cpu is not None:
            core, llc, cores = cpu.core_cache_bytes, cpu.llc_bytes, cpu.cores or cores
    if core is None or llc is None:
        local = local_caches()
        core, llc = core or local[0], llc or local[1]
    return _Caches(core or _L2, llc or _L3, cores)


def _halo_rows_sent(trips: int, steps: int) -> int:
    """The halo rows a loop of `trips` steps in bands of `steps` sends, in steps' rows:
    every band's halo but the first's (the ranks read it from the input), a last,
    shorter band's a whole one (each band's halo is the same message)."""
    return (-(-trips // steps) - 1) * steps


def _even(trips: int, longest: int) -> int:
    """The shortest band that runs `trips` steps in as many bands as `longest` does."""
    return -(-trips // -(-trips // longest))
