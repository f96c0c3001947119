"""dhir-time-tiles: a time loop of stencil sweeps run as skewed bands of steps on one rank,
so that each band reads its arrays from memory once instead of once a step.

It takes a host `scf.for` (the time loop) whose body is one `dhir.schedule` of CPU tasks,
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
half the core's L2 cache, or, where not even two would, a quarter of the L3. The pass
runs for one rank only (the schedule becomes one task): with several ranks, the
distributed time loop exchanges halos each step instead (issue 27 leaves w-wide halos).
"""

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.counts import constant_int
from dhir.analysis.sharing import may_alias, memory_of
from dhir.dialects import arith, memref, scf
from dhir.dialects.access import is_pure
from dhir.dialects.dhir import ScheduleOp, TargetOp, TaskOp, YieldOp, walk_outside_tasks
from dhir.ir.diagnostics import loc_of
from dhir.ir.tasks import is_gpu_task
from dhir.transforms.building import const_index, inside, put
from dhir.transforms.optimize_bodies import Decision
from dhir.transforms.triangles import lift

_L2, _L3 = 512 * 1024, 16 * 1024 * 1024  # when the system does not say
MAX_STEPS = 64


class _Left(Exception):
    """A time loop left as written, and why."""


@dataclass(frozen=True)
class TimeTilesPass(ModulePass):
    """Time loops of row statements as skewed bands (module docstring); `steps`: the
    steps in a band (0: as the caches allow)."""

    name = "dhir-time-tiles"
    steps: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        time_tiles(op, self.steps)


def time_tiles(module: ModuleOp, steps: int = 0) -> list[Decision]:
    """Rewrite every time loop it can (see the module docstring); what it did and left."""
    decisions: list[Decision] = []
    for loop, schedule in list(_time_loops(module)):
        try:
            text = _Band.of(loop, schedule, steps).rewrite()
            decisions.append(Decision(loc_of(loop), True, text))
        except _Left as why:
            decisions.append(Decision(loc_of(loop), False, f"time loop left as written: {why}"))
    return decisions


def _time_loops(module: ModuleOp) -> Iterator[tuple[scf.ForOp, ScheduleOp]]:
    for op in walk_outside_tasks(module):
        if isinstance(op, scf.ForOp) and not op.iter_args:
            ops = [o for o in op.body.block.ops if not isinstance(o, scf.YieldOp)]
            if len(ops) == 1 and isinstance(ops[0], ScheduleOp):
                yield op, ops[0]


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
        row = _row(op.indices[0], statement, scope)
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


def _row(index: SSAValue, statement: _Statement, scope: Operation) -> _Row:
    if statement.row is None:
        value = constant_int(index)
        if value is None and inside(index, scope):
            raise _Left("a row index varies inside a task without a row loop")
        return _Row(at=value)
    loop = statement.row.owner.parent_op()
    assert isinstance(loop, scf.ForOp)
    bound = lift(index, loop)
    if bound is None or bound.coef not in (0, 1):
        raise _Left("a row index is not the row plus a constant")
    if bound.coef == 0:
        return _Row()
    if bound.terms:
        raise _Left("a row index is the row plus a value that is not a constant")
    return _Row(offset=bound.const)


@dataclass
class _Band:
    loop: scf.ForOp
    schedule: ScheduleOp
    statements: list[_Statement]
    stages: list[list[_Statement]]  # statements run as one stage (_stages)
    skew: int
    steps: int

    @staticmethod
    def of(loop: scf.ForOp, schedule: ScheduleOp, steps: int) -> "_Band":
        outer = set(schedule.args)
        others = [op for op in schedule.body.block.ops if not isinstance(op, TaskOp | YieldOp)]
        if any(not isinstance(op, TargetOp) for op in others):
            raise _Left("the schedule holds more than targets and tasks")
        tasks = list(schedule.tasks())
        if not tasks:
            raise _Left("the schedule has no task")
        if len({task.target for task in tasks}) != 1:
            raise _Left("its tasks name different targets")
        statements = [_statement(task, outer) for task in tasks]
        skew = _skew(statements)
        band = _Band(loop, schedule, statements, _stages(statements), skew, 0)
        band.steps = steps if steps > 0 else band.fitting_steps()
        if band.steps < 2:
            raise _Left("not even two steps' rows fit the core's caches")
        return band

    def fitting_steps(self) -> int:
        row_bytes = sum(_row_bytes(m) for m in {m for s in self.statements for m in _touched(s)})
        per_step = self.skew * len(self.stages) * max(row_bytes, 1)
        l2, l3 = _cache_bytes()
        steps = (l2 // 2) // per_step
        if steps < 2:
            steps = (l3 // 4) // per_step
        return min(steps, MAX_STEPS)

    def rewrite(self) -> str:
        schedule, loop = self.schedule, self.loop
        target = next(schedule.tasks()).target
        assert target is not None and isinstance(target.owner, TargetOp)
        body = Block()
        made = put(body, target.owner.clone())
        memrefs: list[SSAValue] = []
        for statement in self.statements:
            for value in statement.task.memrefs:
                if value not in memrefs:
                    memrefs.append(value)
        task_body = Block()
        self._bands(task_body)
        put(body, TaskOp(made.results[0], memrefs, Region(task_body)))
        fused = ScheduleOp(list(schedule.args), Region(body))
        parent = loop.parent_block()
        assert parent is not None
        parent.insert_op_before(fused, loop)
        parent.erase_op(loop)
        count, stages = len(self.statements), len(self.stages)
        return (
            f"time loop of {count} row statements ({stages} stages a step) run in skewed "
            f"bands of {self.steps} steps (rows {self.skew} apart per stage) on one rank, exact"
        )

    def _bands(self, block: Block) -> None:
        """for tb in [lb, ub) step steps*step { for w { for tt { stages } } }"""
        loop, count = self.loop, len(self.stages)
        index = IndexType()
        span = put(block, arith.MuliOp(loop.step, const_index(block, self.steps))).result
        band = Block(arg_types=[index])
        start = band.args[0]
        end = put(band, arith.MinSIOp(put(band, arith.AddiOp(start, span)).result, loop.ub))
        length = put(band, arith.SubiOp(end.result, start)).result
        taken = put(band, arith.CeilDivSIOp(length, loop.step)).result
        stages = put(band, arith.MuliOp(taken, const_index(band, count))).result
        first = min(s.lo for s in self.statements)
        last = max(s.hi for s in self.statements)
        # w = i + skew * q for i in [first, last), q in [0, stages)
        tail = put(band, arith.SubiOp(stages, const_index(band, 1))).result
        reach = put(band, arith.MuliOp(tail, const_index(band, self.skew))).result
        w_end = put(band, arith.AddiOp(reach, const_index(band, last))).result
        front = Block(arg_types=[index])
        self._front(front, front.args[0], start, taken)
        put(front, scf.YieldOp())
        one = const_index(band, 1)
        put(band, scf.ForOp(const_index(band, first), w_end, one, [], Region(front)))
        put(band, scf.YieldOp())
        put(block, scf.ForOp(loop.lb, loop.ub, span, [], Region(band)))

    def _front(self, block: Block, w: SSAValue, start: SSAValue, taken: SSAValue) -> None:
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
            for statement in stage:
                self._instance(body, statement, i, t)
        put(body, scf.YieldOp())
        put(block, scf.ForOp(const_index(block, 0), taken, const_index(block, 1), [], Region(body)))

    def _instance(self, body: Block, statement: _Statement, i: SSAValue, t: SSAValue) -> None:
        """Statement `statement` for row `i` at time `t`, when it has that row."""
        # Row i when the statement has it: a loop of at most one row, which LLVM
        # vectorises inside as it does the row loop as written (not so under an if).
        low = put(body, arith.MaxSIOp(i, const_index(body, statement.lo))).result
        after = put(body, arith.AddiOp(i, const_index(body, 1))).result
        high = put(body, arith.MinSIOp(after, const_index(body, statement.hi))).result
        then = Block(arg_types=[IndexType()])
        mapper: dict[SSAValue, SSAValue] = {self.loop.body.block.args[0]: t}
        if statement.row is not None:
            mapper[statement.row] = then.args[0]
        for op in statement.ops:
            put(then, op.clone(value_mapper=mapper))
        put(then, scf.YieldOp())
        put(body, scf.ForOp(low, high, const_index(body, 1), [], Region(then)))


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


def _cache_bytes() -> tuple[int, int]:
    """This machine's L2 and L3 sizes (per core and in all), or common ones."""
    sizes: list[int] = []
    for name, default in (("SC_LEVEL2_CACHE_SIZE", _L2), ("SC_LEVEL3_CACHE_SIZE", _L3)):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            size = 0
        sizes.append(size if size > 0 else default)
    return sizes[0], sizes[1]
