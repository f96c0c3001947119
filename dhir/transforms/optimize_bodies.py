"""dhir-optimize-bodies: contraction-like loop nests in CPU tasks, blocked in registers and
vectorised along their columns, with each element computed exactly as written.

The nests it takes sit in a row loop `i` whose iterations are independent (every memref
it writes is written and read only at row `i`, and may alias nothing else it touches), or
in no loop (then they are one row):

- memory form, `for k { for j { OUT[.., j] = f(OUT[.., j], ...) } }` (gemm in i-k-j order);
- carried form, `for j { init; s = for k iter_args(acc = init) {...}; OUT[.., j] = g(s) }`
  (k innermost, the sum in a register); `linalg.matmul` is first written as this, and
  so is an innermost loop that adds into one memory element (loaded before, stored after).

Each is rewritten for R rows and U vectors of V columns at once: the R*U accumulators
stay in vector registers across the whole `k` loop, a value that does not vary along `j`
(A[i, k], alpha) is computed once per row and broadcast, B[k, j..j+V) is loaded once for
R rows. Where column blocks run outer (below), such a value computed by arithmetic
(alpha * A[i, k]) would be computed again for each column block: it is computed once
into a table (row, k) before them, and the kernel broadcasts it from memory, which keeps
the floating-point pipes for the multiplies and adds (gemm LARGE 164-168 -> 149-151 ms
on a Zen 3 core). Where the row loop can be cut in three (what comes before the nest, the nest, what
follows), column blocks run outer and row blocks inner, so that B's panel stays in the
core's cache. A carried nest that cannot be vectorised along its columns (A x: the sums
run along the rows) runs 8 rows' sums side by side instead. Every element still takes the
same operations in the same order (`k` ascending, the expression as written), so the
result is bit for bit the program's; columns and rows left over run the original loops.
The blocks of rows (or, where column blocks run outer, of columns) write disjoint
elements, so they run as `scf.parallel`: a rank's OpenMP threads share them (the row
loop as written, `scf.for`, ran on one thread).
Where every add and multiply allows reordering (`reassoc`, `contract`), a matrix product
calls BLAS instead (dhir.transforms.blas). What it leaves alone, it says why (`--timing`).
Nests of `affine.for` are first made scf as --lower-affine makes them (the build lowers
them so anyway: the same semantics), after the lowering's facts of the task are kept;
one holding an affine.parallel or affine.prefetch stays, saying why. A column loop whose
whole body is an affine.if bounding its counter (a triangle written as a condition in a
square) first takes the condition as its bounds, and is cut where the condition has an
else branch (dhir.transforms.condition_bounds).
"""

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    UnknownLoc,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dhir.analysis.handoff import keep_facts
from dhir.analysis.sharing import may_alias, memory_of
from dhir.dialects import affine, arith, func, linalg, memref, scf, vector
from dhir.dialects.dhir import ScheduleOp, TaskOp, defined_inside, walk_outside_tasks
from dhir.ir.diagnostics import REPORT_ENV, SourceLoc, loc_of, report_everything
from dhir.ir.tasks import is_gpu_task
from dhir.ir.walk import find_ops, holds_op
from dhir.transforms.affine_scope import in_affine_loop, lower_nest, unlowerable
from dhir.transforms.blas import (
    Corner,
    allows_any_order,
    as_allowed,
    common_flags,
    count,
    emit_gemm,
    flags_allowing,
    holds_negative_zero,
    keeps_signed_zeros,
)
from dhir.transforms.building import (
    declare,
    injective,
    insert_before,
    int_constant,
    put,
    replace_by,
    rows_contiguous,
)
from dhir.transforms.condition_bounds import fold_conditions
from dhir.transforms.contractions import CALLED, KINDS, Contraction, rewrite_contraction
from dhir.transforms.counted_whiles import as_for_loops
from dhir.transforms.generic_sweeps import threaded_loops, write_as_loops
from dhir.transforms.shard_collectives import SPMD
from dhir.transforms.triangles import RowBound, lift, only_bounds, pack_panels, transposable

_Body = TaskOp | func.FuncOp  # a CPU task, or an SPMD entry
_AFFINE_LOOPS = (affine.ForOp, affine.ParallelOp)
_Affine = affine.ForOp | affine.ParallelOp
ROWS = 4  # rows blocked in registers
# A single row's k steps per pass over its column blocks, and the fewest bytes of each row
# a stripe of its columns spans (docstring of _Nest._kernel).
K_CHUNK = 8
PAGE_BYTES = 4096
THREADS_HOOK = "dhir_rt_threads"
# Float ops that may work on vectors: lane by lane they round as the scalar op does.
_LANEWISE = (
    arith.AddfOp,
    arith.SubfOp,
    arith.MulfOp,
    arith.DivfOp,
    arith.NegfOp,
    arith.MaximumfOp,
    arith.MinimumfOp,
)
# Ops on values that do not vary along the columns (indices, scalars).
_SCALAR = (arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, *_LANEWISE)

Lanes = tuple[SSAValue, ...]  # a value along the columns: one vector per U
Env = dict[SSAValue, SSAValue | Lanes]


@dataclass(frozen=True)
class Decision:
    """What the optimizer did with one loop nest, or why it left it."""

    loc: SourceLoc | None
    done: bool
    text: str

    def line(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        return f"{where}{self.text}"


_SHOWN = 3  # places named per text in a summary line


def decision_lines(decisions: Sequence[Decision], every: bool | None = None) -> list[str]:
    """A line per decision, a nest that several tasks hold (the pieces of a split task)
    once with their count; a text that more than a few nests share takes one line, with
    the number and the first few places, unless `every` (default: `DHIR_REPORT=all`)."""
    every = report_everything() if every is None else every
    groups: dict[str, Counter[str]] = {}
    for decision in decisions:
        where = str(decision.loc) if decision.loc is not None else ""
        groups.setdefault(decision.text, Counter())[where] += 1
    lines: list[str] = []
    for text, places in groups.items():
        if every or len(places) <= _SHOWN + 1:
            lines += [f"{_at(where)}{text}{_times(n)}" for where, n in places.items()]
            continue
        shown = ", ".join(
            f"{where or '?'}{_times(n)}" for where, n in list(places.items())[:_SHOWN]
        )
        more = len(places) - _SHOWN
        lines.append(
            f"{text} ({sum(places.values())} nests: {shown} and {more} more places; "
            f"{REPORT_ENV}=all lists each)"
        )
    return lines


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def _times(count: int) -> str:
    return f" (in {count} tasks)" if count > 1 else ""


class _Left(Exception):
    """A nest left as written, and why."""


@dataclass(frozen=True)
class OptimizeBodiesPass(ModulePass):
    """Block contraction nests of CPU tasks in registers and vectorise them, exactly.

    Module docstring; `vector_bits`: the width of the CPU's vector registers."""

    name = "dhir-optimize-bodies"
    vector_bits: int = 256

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.vector_bits not in (128, 256, 512):
            raise PassFailedException(
                f"dhir-optimize-bodies: vector_bits must be 128, 256 or 512, got {self.vector_bits}"
            )
        optimize_bodies(op, self.vector_bits)


def optimize_bodies(
    module: ModuleOp, vector_bits: int, bodies: Sequence["_Body"] | None = None
) -> list[Decision]:
    """Optimize every CPU task's contraction nests in place, and a shard program's
    device part's (an SPMD entry: each rank runs all of it); what was done and left.
    `bodies`: those only (copies of some, for a dry run: dhir.transforms.blocked_nests),
    with the functions the rewrites call declared in `module`."""
    decisions: list[Decision] = []
    todo = _todo(module) if bodies is None else _todo_of(bodies)
    # The rewritten bodies touch the same elements, but their index arithmetic (blocks,
    # leftovers, affine maps made arith) is bounded less tightly: the lowering gets the
    # facts found now, found together, once per body shape.
    keep_facts([task for task, *_ in todo if isinstance(task, TaskOp)])
    # Contractions first: where one became loops, the element-wise ops become theirs.
    made = {id(task): _contractions(task, matmuls, module) for task, matmuls, *_ in todo}
    looped = any(loops for _, loops in made.values())
    for task, matmuls, nests, affines, whiles in todo:
        lowered: list[Operation] = []
        for loop in affines:
            why = _affine_kept(loop, task)
            if why is not None:
                decisions.append(Decision(loc_of(loop), False, f"left as written: {why}"))
                continue
            lowered.append(lower_nest(fold_conditions(loop)))
            nests = True
        decisions += made[id(task)][0]
        for op in (op for op in matmuls if _elementwise(op)):
            why = _elementwise_kept(cast(linalg.GenericOp, op), task, looped)
            if why is not None:
                decisions.append(Decision(loc_of(op), False, f"left as written: {why}"))
        if whiles:
            nests = _counted_loops(task) or nests
        if nests:
            _carried_accumulations(task)
        hints = _take_hints(task) if nests else []
        found = list(_candidates(task))
        decisions += _unmatched(lowered, [nest for _, nest in found])
        for row, nest in found:
            try:
                _check_in_place(row, nest, task)
                allowed = flags_allowing(nest.walk())  # before the rewrite replaces it
                with _located_at(task, nest):
                    text = _optimize_nest(row, nest, vector_bits, module)
                text = as_allowed(text, allowed)
                decisions.append(Decision(loc_of(nest), True, text))
            except _Left as why:
                decisions.append(Decision(loc_of(nest), False, f"left as written: {why}"))
        _put_hints_back(hints)
    return decisions


def bodies_with_work(module: ModuleOp) -> list["_Body"]:
    """The CPU bodies of `module` that `optimize_bodies` has something to look at in (in
    its order): a dry run copies these only (a copy of 10,000 tasks costs a second)."""
    return [task for task, *_ in _todo(module)]


def _todo(module: ModuleOp) -> list[tuple[_Body, list[Contraction], bool, list[_Affine], bool]]:
    return _todo_of(list(_bodies(module)))


def _todo_of(
    bodies: Sequence["_Body"],
) -> list[tuple[_Body, list[Contraction], bool, list[_Affine], bool]]:
    """The CPU bodies with something for the optimizer, with what `_interesting` found."""
    found = [(task, *_interesting(task)) for task in bodies]
    return [
        (task, matmuls, nests, affines, whiles)
        for task, matmuls, nests, affines, whiles in found
        if (matmuls or nests or affines or whiles)
        and not (isinstance(task, TaskOp) and is_gpu_task(task))
    ]


def linalg_left(module: ModuleOp) -> bool:
    """Whether a linalg op of `module` stays one after `optimize_bodies`, or an
    element-wise one becomes a parallel loop (asked before it runs, on a copy:
    dhir.analysis.threads' decision): its contractions and element-wise generics are
    rewritten as `optimize_bodies` rewrites them, which does not depend on the vector
    width."""
    if not holds_op(module, linalg.LinalgStructuredOperation):
        return False
    if not any(matmuls for _, matmuls, *_ in _todo(module)):
        return True  # no copy: nothing would be rewritten
    copy = module.clone()
    todo = [
        (task, _interesting(task)[0])
        for task in _bodies(copy)
        if not (isinstance(task, TaskOp) and is_gpu_task(task))
    ]
    made = [_contractions(task, matmuls, copy)[1] for task, matmuls in todo]
    looped = any(made)
    for task, matmuls in todo:
        for op in (op for op in matmuls if _elementwise(op)):
            _elementwise_kept(cast(linalg.GenericOp, op), task, looped)
    return threaded_work_left(copy)


def threaded_work_left(root: Operation) -> bool:
    """Whether `root`, rewritten, holds a linalg op, or a parallel loop that an
    element-wise one became (which keeps the threads the op had)."""
    return holds_op(root, linalg.LinalgStructuredOperation) or threaded_loops(root)


def _contractions(
    task: "_Body", ops: Sequence[Contraction], module: ModuleOp
) -> tuple[list[Decision], bool]:
    """Each contraction of `task` rewritten or left, and said so; whether one became
    loops."""
    decisions: list[Decision] = []
    looped = False
    for op in (op for op in ops if not _elementwise(op)):
        loc = loc_of(op)
        with _located_at(task, op):
            why = rewrite_contraction(op, module)
        looped = looped or why is None
        if why is None:
            continue
        done = why.startswith(CALLED)
        decisions.append(Decision(loc, done, why if done else f"left as written: {why}"))
    return decisions, looped


def _elementwise(op: Contraction) -> bool:
    return isinstance(op, linalg.GenericOp) and all(
        str(kind.data.value) == "parallel" for kind in op.get_iterator_types()
    )


def _elementwise_kept(op: linalg.GenericOp, task: "_Body", looped: bool) -> str | None:
    """Why the element-wise `op` stays a linalg op, or None once it is its loops (the
    build's own lowering, in another order of elements, each computed alone: exact).
    Where a contraction of the module became loops (`looped`), plain `scf.for` loops, so
    that the kernel is the loops its scf form writes by hand (and is built as they are:
    see compile_native's OpenMP decision); otherwise its rows one `scf.parallel`, which
    the rank's threads share where the linalg op's loops were shared, its columns an
    `scf.for` that LLVM vectorises (dhir.transforms.generic_sweeps)."""
    with _located_at(task, op):
        why = write_as_loops(op, threaded=not looped)
    return None if why is None else f"{op.name} that {why}"


@contextmanager
def _located_at(task: "_Body", op: Operation) -> Iterator[None]:
    """The ops that a rewrite of `op` makes in `task` get `op`'s location (or its nearest
    located ancestor's), so that what reports at them (a failed --runtime-checks check,
    dhir-vector-checks') names the user's line."""
    located: Operation | None = op
    while located is not None and isinstance(located.location, UnknownLoc):
        located = located.parent_op()
    if located is None:
        yield
        return
    known = set(task.walk())
    yield
    for made in task.walk():
        if made not in known and isinstance(made.location, UnknownLoc):
            made.location = located.location


def _in_row_blocks(
    row: scf.ForOp,
    nest: Operation,
    rows: int,
    middle: Callable[[Block, list[Env]], None],
    parallel: bool = True,
) -> None:
    """Blocks of `rows` rows before `row`, each running for its rows in turn what the row
    loop holds before `nest`, then `middle` (given the block and each row's values), then
    what it holds after; `row` keeps the rows left over. The blocks run as one parallel
    loop unless `middle` makes its own (`parallel` false)."""
    block = Block()
    i_end = _block_end(block, row.lb, row.ub, rows)
    step = put(block, arith.ConstantOp.from_int_and_width(rows, IndexType())).result
    body = Block(arg_types=[IndexType()])
    envs = _row_envs(body, body.args[0], _iv(row), rows)
    ops = _body_ops(row)
    at = ops.index(nest)
    for env in envs:
        _clone_into(body, ops[:at], env)
    middle(body, envs)
    for env in envs:
        _clone_into(body, ops[at + 1 :], env)
    if parallel:
        put(block, _parallel(row.lb, i_end, step, body))
    else:
        put(body, scf.YieldOp())
        put(block, scf.ForOp(row.lb, i_end, step, [], Region(body)))
    insert_before(block, row)
    row.operands[0] = i_end


def _parallel(lb: SSAValue, ub: SSAValue, step: SSAValue, body: Block) -> scf.ParallelOp:
    """A loop over blocks of rows or columns that touch disjoint elements (the rows are
    independent, checked; the columns always are): a rank's OpenMP threads share it."""
    put(body, scf.ReduceOp())
    return scf.ParallelOp([lb], [ub], [step], Region(body))


def _row_envs(block: Block, i0: SSAValue, row_iv: SSAValue, rows: int) -> list[Env]:
    """Per row of a block of `rows` starting at `i0`: its index for `row_iv`, made in
    `block`."""
    envs: list[Env] = []
    for r in range(rows):
        offset = put(block, arith.ConstantOp.from_int_and_width(r, IndexType())).result
        envs.append({row_iv: put(block, arith.AddiOp(i0, offset)).result})
    return envs


SUM_ROWS = 8  # rows whose sums run side by side


def _carried_accumulations(task: _Body) -> None:
    """Innermost loops that add into one memory element, turned into loops that carry the
    element in a register: `for j { s = M[x]; ...; M[x] = v }` with `x` fixed in the loop
    becomes `s0 = M[x]; r = for j iter_args(s = s0) {...; yield v}; M[x] = r`. Each
    iteration reads what the one before stored, so the values are the same; what the
    kernels take next (k innermost) or the row sums."""
    for loop in [op for op in task.body.walk() if isinstance(op, scf.ForOp)]:
        target = _accumulated(loop)
        if target is not None:
            _carry(loop, *target)


def _accumulated(loop: scf.ForOp) -> tuple[memref.LoadOp, memref.StoreOp] | None:
    """The load and store of the one element `loop` accumulates into, if it does just that:
    no iter_args, no nested regions, one store, to indices fixed in the loop, one load of
    that element before it, and no other access that may reach its memref."""
    ops = _body_ops(loop)
    if loop.iter_args or any(op.regions for op in ops) or _threaded(loop):
        return None
    stores = [op for op in ops if isinstance(op, memref.StoreOp)]
    if len(stores) != 1 or any(defined_inside(i, loop) for i in stores[0].indices):
        return None
    store = stores[0]
    target = memory_of([store.memref])
    loads = [op for op in ops if isinstance(op, memref.LoadOp) and may_alias(op.memref, target)]
    if len(loads) != 1 or loads[0].memref is not store.memref:
        return None
    load = loads[0]
    if list(load.indices) != list(store.indices) or ops.index(load) > ops.index(store):
        return None
    if not _runs(loop):
        # Carried, a loop of no iterations would still load and store the element, which
        # the program does not touch there: out of its memref, or out of the rows its rank
        # holds (partitioned storage reserves only the rows a task touches).
        return None
    if not all(isinstance(op, (memref.LoadOp, memref.StoreOp, *_SCALAR)) for op in ops):
        return None
    return load, store


def _runs(loop: scf.ForOp) -> bool:
    """Whether `loop` surely runs at least once wherever it is reached: its step is a
    positive constant and `ub - lb` is a constant at least 1, or a constant multiple of
    the counter of the scf.for around it (of constant bounds) plus a constant, at least 1
    at that loop's first and last counts (`for j in [0, i)` under `for i in [1, n)`)."""
    step = int_constant(loop.step)
    if step is None or step <= 0:
        return False
    lb, ub = int_constant(loop.lb), int_constant(loop.ub)
    if lb is not None and ub is not None:
        return lb < ub
    outer = loop.parent_op()
    if not isinstance(outer, scf.ForOp):
        return False
    low, high = lift(loop.lb, outer), lift(loop.ub, outer)
    first, end = int_constant(outer.lb), int_constant(outer.ub)
    if low is None or high is None or low.terms or high.terms or first is None or end is None:
        return False
    if first >= end:
        return True  # the loop around never runs, nor does this one
    coef, const = high.coef - low.coef, high.const - low.const
    return all(coef * i + const >= 1 for i in (first, end - 1))


def _threaded(op: Operation) -> bool:
    """Whether `op` is inside a loop whose iterations may run at once: there, storing an
    element back where the program touched none (a loop of no iterations) could overwrite
    another thread's store."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, TaskOp):
        if isinstance(parent, (scf.ParallelOp, scf.ForallOp, affine.ParallelOp)):
            return True
        parent = parent.parent_op()
    return False


def _carry(loop: scf.ForOp, load: memref.LoadOp, store: memref.StoreOp) -> None:
    block = loop.parent_block()
    assert block is not None
    start = memref.LoadOp.get(load.memref, list(load.indices))
    block.insert_op_before(start, loop)
    body = Block(arg_types=[_iv(loop).type, load.res.type])
    mapper: dict[SSAValue, SSAValue] = {_iv(loop): body.args[0], load.res: body.args[1]}
    for op in _body_ops(loop):
        if op is load:
            continue
        if op is store:
            body.add_op(scf.YieldOp(mapper.get(store.value, store.value)))
            continue
        body.add_op(op.clone(value_mapper=mapper))
    carried = scf.ForOp(loop.lb, loop.ub, loop.step, [start.res], Region(body))
    block.insert_op_before(carried, loop)
    block.insert_op_before(
        memref.StoreOp.get(carried.res[0], store.memref, list(store.indices)), loop
    )
    block.erase_op(loop)


def _row_sums(row: scf.ForOp, red: scf.ForOp, bits: int) -> str:
    """The carried loop `red` in the row loop run for several rows side by side: their
    sums are independent chains, so the core overlaps them instead of waiting for each add
    in turn. In vector lanes where it can (_RowLanes), else SUM_ROWS rows as scalars. Each
    row's operations, in its order: exact."""
    _check_index_counters(row, red)
    _check_rows_independent(row)
    if any(op.regions or not isinstance(op, (memref.LoadOp, *_SCALAR)) for op in _body_ops(red)):
        raise _Left("the reduction's body holds more than loads and arithmetic")
    for bound in red.operands[:3]:
        if defined_inside(bound, row) or bound is _iv(row):
            raise _Left("the reduction's bounds vary with the row")
    try:
        return _RowLanes.of(row, red, bits).rewrite()
    except _Left:
        pass

    def sums(body: Block, envs: list[Env]) -> None:
        inits = [_scalar(v, env) for env in envs for v in red.iter_args]
        loop_body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        carried = iter(loop_body.args[1:])
        for env in envs:
            env[_iv(red)] = loop_body.args[0]
            env.update((arg, next(carried)) for arg in red.body.block.args[1:])
        for op in _body_ops(red):
            for env in envs:
                _clone_into(loop_body, [op], env)
        end = red.body.block.last_op
        assert isinstance(end, scf.YieldOp)
        loop_body.add_op(scf.YieldOp(*(_scalar(v, env) for env in envs for v in end.operands)))
        loop = put(body, scf.ForOp(red.lb, red.ub, red.step, inits, Region(loop_body)))
        results = iter(loop.res)
        for env in envs:
            env.update((result, next(results)) for result in red.res)

    _in_row_blocks(row, red, SUM_ROWS, sums)
    return f"sums of {SUM_ROWS} rows run side by side (k innermost, each in its order), exact"


@dataclass
class _RowLanes:
    """A row loop's sums along `k` (`for i { s = for k iter_args(acc) { acc = f(acc,
    A[i, k], x[k]) } }`: A x) with one row per vector lane: V rows' rows of A are loaded V
    steps of `k` at a time, as V vectors, and transposed in registers, so that step c of
    `k` has each row's A[i, k + c] in its lane; x[k] is broadcast. Each lane computes its
    row's sum with the row's own operations in the order of `k`: exact. The steps of `k`
    left over load A lane by lane. The reads may lead with subscripts fixed in the row
    loop (a batch's `A[b, i, k]`, `x[b, k]`: batch_matvec): each such read is then one
    matrix's or vector's, as above."""

    row: scf.ForOp
    red: scf.ForOp
    kind: VectorType
    rows_of: list["_Rows"]  # what is read at [..., i, k]
    # The body's values made outside the loops: each row's value of what it takes from
    # outside the sums, its constants; as vectors, once per block of rows (_sums).
    outside: dict[SSAValue, SSAValue] = field(default_factory=dict)

    @property
    def lanes(self) -> int:
        return self.kind.get_shape()[0]

    @staticmethod
    def of(row: scf.ForOp, red: scf.ForOp, bits: int) -> "_RowLanes":
        types = {arg.type for arg in red.iter_args}
        element = types.pop() if len(types) == 1 else None
        if not isinstance(element, AnyFloat) or element.bitwidth not in (32, 64):
            raise _Left("its sums are not all f32 or all f64")
        if int_constant(red.step) != 1 or bits // element.bitwidth < 2:
            raise _Left("its k steps by more than 1")
        i, k = _iv(row), _iv(red)
        rows_of: list[_Rows] = []
        for op in _body_ops(red):
            if isinstance(op, memref.LoadOp):
                if op.res.type != element:
                    raise _Left(f"it loads {op.res.type} beside sums of {element}")
                fixed, last = list(op.indices[:-1]), op.indices[-1] if op.indices else None
                if any(defined_inside(v, row) for v in fixed[:-1]) or last is not k:
                    raise _Left("it loads other than A[i, k] and x[k]")
                rows = _Rows(op.memref, tuple(fixed[:-1]))
                if fixed and fixed[-1] is i and _row_major(op.memref):
                    rows_of += [rows] if rows not in rows_of else []
                elif fixed and defined_inside(fixed[-1], row):
                    raise _Left("it loads other than A[i, k] and x[k]")
            elif not isinstance(op, _LANEWISE) and not (
                isinstance(op, arith.ConstantOp) and isinstance(op.result.type, AnyFloat)
            ):
                raise _Left(f"its body holds {op.name}")
        return _RowLanes(row, red, VectorType(element, [bits // element.bitwidth]), rows_of)

    def rewrite(self) -> str:
        _in_row_blocks(self.row, self.red, self.lanes, self._sums)
        return (
            f"sums of {self.lanes} rows run in vector lanes ({self.lanes} steps of k "
            "transposed in registers, each row in its order), exact"
        )

    def _sums(self, block: Block, envs: list[Env]) -> None:
        red = self.red
        self._make_outside(block, envs)
        accs = [self._across(block, v, envs) for v in red.iter_args]
        lb, ub = _scalar(red.lb, envs[0]), _scalar(red.ub, envs[0])
        end = _block_end(block, lb, ub, self.lanes)
        step = put(block, arith.ConstantOp.from_int_and_width(self.lanes, IndexType())).result
        accs = self._loop(block, envs, (lb, end, step), accs, self._transposed_steps)
        one = put(block, arith.ConstantOp.from_int_and_width(1, IndexType())).result
        accs = self._loop(block, envs, (end, ub, one), accs, self._step_by_lanes)
        for r, env in enumerate(envs):
            for result, acc in zip(red.res, accs):
                env[result] = put(block, vector.ExtractOp(acc, [r], self.kind.element_type)).result

    def _loop(
        self,
        block: Block,
        envs: list[Env],
        bounds: tuple[SSAValue, SSAValue, SSAValue],
        accs: list[SSAValue],
        steps: Callable[[Block, list[Env], SSAValue, list[SSAValue]], list[SSAValue]],
    ) -> list[SSAValue]:
        body = Block(arg_types=[IndexType(), *(self.kind for _ in accs)])
        ends = steps(body, envs, body.args[0], list(body.args[1:]))
        put(body, scf.YieldOp(*ends))
        return list(put(block, scf.ForOp(*bounds, accs, Region(body))).results)

    def _transposed_steps(
        self, block: Block, envs: list[Env], k: SSAValue, accs: list[SSAValue]
    ) -> list[SSAValue]:
        index = IndexType()
        rows = [_scalar(_iv(self.row), env) for env in envs]
        columns = {
            m: _transpose(
                block,
                [
                    put(block, vector.LoadOp(m.memref, [*m.fixed, i, k], self.kind)).result
                    for i in rows
                ],
            )
            for m in self.rows_of
        }
        for c in range(self.lanes):
            offset = put(block, arith.ConstantOp.from_int_and_width(c, index)).result
            at = put(block, arith.AddiOp(k, offset)).result
            accs = self._step(block, envs, at, accs, {m: cols[c] for m, cols in columns.items()})
        return accs

    def _step_by_lanes(
        self, block: Block, envs: list[Env], k: SSAValue, accs: list[SSAValue]
    ) -> list[SSAValue]:
        rows = [_scalar(_iv(self.row), env) for env in envs]
        loaded = {
            m: _vector_of(
                block,
                [put(block, memref.LoadOp.get(m.memref, [*m.fixed, i, k])).res for i in rows],
                self.kind,
            )
            for m in self.rows_of
        }
        return self._step(block, envs, k, accs, loaded)

    def _step(
        self,
        block: Block,
        envs: list[Env],
        k: SSAValue,
        accs: list[SSAValue],
        rows_at_k: "dict[_Rows, SSAValue]",
    ) -> list[SSAValue]:
        """One step of `k`: the body's ops on vectors of the rows."""
        red = self.red
        lanes = {**self.outside, **dict(zip(red.body.block.args[1:], accs))}
        row = _iv(self.row)
        for op in _body_ops(red):
            fixed = tuple(op.indices[:-2]) if isinstance(op, memref.LoadOp) else ()
            if isinstance(op, memref.LoadOp) and op.indices[-2:-1] == (row,):
                lanes[op.res] = rows_at_k[_Rows(op.memref, fixed)]
            elif isinstance(op, memref.LoadOp):
                scalar = put(block, memref.LoadOp.get(op.memref, [*op.indices[:-1], k])).res
                lanes[op.res] = put(block, vector.BroadcastOp(scalar, self.kind)).vector
            elif not isinstance(op, arith.ConstantOp):
                made = type(op).create(
                    operands=[lanes[v] for v in op.operands],
                    result_types=[self.kind],
                    properties=dict(op.properties),
                    attributes=dict(op.attributes),
                )
                lanes[op.results[0]] = put(block, made).results[0]
        end = red.body.block.last_op
        assert isinstance(end, scf.YieldOp)
        return [lanes[v] for v in end.operands]

    def _make_outside(self, block: Block, envs: list[Env]) -> None:
        """`outside`, made at the end of `block`: before the loops, not once a step (the
        loads' operands are addresses, not lanes)."""
        red = self.red
        made_inside: set[SSAValue] = set(red.body.block.args)
        for op in red.body.block.ops:
            if isinstance(op, arith.ConstantOp):
                scalar = put(block, op.clone()).results[0]
                self.outside[op.result] = put(block, vector.BroadcastOp(scalar, self.kind)).vector
            for value in [] if isinstance(op, memref.LoadOp) else op.operands:
                if value not in made_inside and value not in self.outside:
                    self.outside[value] = self._across(block, value, envs)
            made_inside.update(op.results)

    def _across(self, block: Block, value: SSAValue, envs: list[Env]) -> SSAValue:
        """`value` (defined outside the sums) as a vector of each row's."""
        return _vector_of(block, [_scalar(value, env) for env in envs], self.kind)


@dataclass(frozen=True)
class _Rows:
    """A memref read along the rows and `k`, at the subscripts `fixed` before those (none
    for `A[i, k]`; a batch's `b` for `A[b, i, k]`), which the row loop does not change."""

    memref: SSAValue
    fixed: tuple[SSAValue, ...]


def _vector_of(block: Block, scalars: list[SSAValue], kind: VectorType) -> SSAValue:
    """A vector whose lane r is scalars[r] (a broadcast where all are one value)."""
    vec = put(block, vector.BroadcastOp(scalars[0], kind)).vector
    if all(s is scalars[0] for s in scalars):
        return vec
    for r, scalar in enumerate(scalars[1:], start=1):
        vec = put(block, vector.InsertOp(scalar, vec, [r])).result
    return vec


def _transpose(block: Block, rows: list[SSAValue]) -> list[SSAValue]:
    """The columns of the square matrix whose rows are the vectors `rows` (a power of two
    of them): log2(n) rounds of two-vector shuffles, each swapping one bit of the row
    index with the same bit of the column index."""
    n, kind = len(rows), rows[0].type
    assert isinstance(kind, VectorType)
    half = 1
    while half < n:
        low = [c if c & half == 0 else n + (c ^ half) for c in range(n)]
        high = [c ^ half if c & half == 0 else n + c for c in range(n)]
        out = list(rows)
        for r in range(n):
            if r & half == 0:
                a, b = rows[r], rows[r | half]
                for target, mask in ((r, low), (r | half, high)):
                    shuffle = vector.ShuffleOp(
                        a, b, DenseArrayBase.from_list(i64, mask), result_type=kind
                    )
                    out[target] = put(block, shuffle).result
        rows = out
        half *= 2
    return rows


def _bodies(module: ModuleOp) -> Iterator[_Body]:
    for op in walk_outside_tasks(module):
        if isinstance(op, ScheduleOp):
            yield from op.tasks()
        elif isinstance(op, func.FuncOp) and SPMD in op.attributes:
            yield op


def _interesting(task: _Body) -> tuple[list[Contraction], bool, list[_Affine], bool]:
    """The task's linalg contractions, whether it has a loop right in a loop, its
    outermost affine loops, and whether it has an scf.while (one walk: most tasks have
    none, and a walk of 10,000 tasks is felt)."""
    matmuls: list[Contraction] = []
    nested = whiles = False
    affines: list[_Affine] = []
    # The task itself is no kind. find_ops: `walk()` and isinstance per op took 60%.
    for op in find_ops(task, (*KINDS, scf.ForOp, scf.WhileOp, *_AFFINE_LOOPS)):
        if isinstance(op, _AFFINE_LOOPS):
            if not in_affine_loop(op, task, _AFFINE_LOOPS):
                affines.append(op)
        elif isinstance(op, scf.WhileOp):
            whiles = True
        elif not isinstance(op, scf.ForOp):
            matmuls.append(op)
        elif isinstance(op.parent_op(), scf.ForOp):
            nested = True
    return matmuls, nested, affines, whiles


def _counted_loops(task: _Body) -> bool:
    """Each scf.while of `task` that counts made the scf.for that counts the same (which
    the recognisers read; dhir.transforms.counted_whiles). Whether it made a loop in a
    loop."""
    return any(
        isinstance(new.parent_op(), scf.ForOp) or len(find_ops(new, scf.ForOp)) > 1
        for new in as_for_loops(task)
    )


def _affine_kept(loop: _Affine, task: _Body) -> str | None:
    """Why the affine nest `loop` is not made scf (the form the recognisers read) before
    the optimizer looks at it, or None: lowered as --lower-affine would lower it, it
    computes the same, so only what that form cannot hold keeps it."""
    kept = unlowerable(loop)
    if kept is None:
        return None
    kinds = ", ".join(kept.reduction_kinds())
    return f"an affine nest holding an affine.parallel reducing with {kinds}, which has no scf form"


def _unmatched(lowered: Sequence[Operation], nests: Sequence[scf.ForOp]) -> list[Decision]:
    """A line for each affine nest made scf that holds a loop in a loop but none of the
    forms the kernels take: the optimizer looked at it, and says so."""
    left: list[Decision] = []
    for root in lowered:
        if any(nest is root or _holds(root, nest) for nest in nests) or not _loop_in_loop(root):
            continue
        left.append(Decision(loc_of(root), False, f"left as written: {_NO_FORM}"))
    return left


_NO_FORM = (
    "no loop in it is a contraction nest (for k { for j { store } }, or for j { for k "
    "iter_args }, with the inner body free of regions)"
)


def _holds(root: Operation, op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not root:
        parent = parent.parent_op()
    return parent is root


def _loop_in_loop(root: Operation) -> bool:
    loops = (scf.ForOp, scf.ParallelOp)
    return any(isinstance(op.parent_op(), loops) for op in find_ops(root, loops) if op is not root)


_Hint = tuple[list[Operation], Operation]


def _take_hints(task: _Body) -> list[_Hint]:
    """The task's memref.prefetch ops in loops, detached with the index arithmetic only
    they use, each with the op it preceded: hints to the cache, which change no result,
    and which the kernels, whose order of accesses is their own, do without."""
    hints: list[_Hint] = []
    for op in find_ops(task, memref.PrefetchOp):
        after = op.next_op
        if after is None or not isinstance(op.parent_op(), (scf.ForOp, scf.ParallelOp)):
            continue
        ops = _feeding(op)
        for made in ops:
            made.detach()
        hints.append((ops, after))
    return hints


def _feeding(hint: Operation) -> list[Operation]:
    """`hint` and the index arithmetic before it in its block whose results only it (or
    such arithmetic) uses, in their order."""
    taken = [hint]
    todo = [v.owner for v in hint.operands]
    while todo:
        op = todo.pop()
        if (
            not isinstance(op, _SCALAR + (affine.ApplyOp,))
            or op.parent_block() is not hint.parent_block()
            or op in taken
            or any(use.operation not in taken for r in op.results for use in r.uses)
        ):
            continue
        taken.append(op)
        todo += [v.owner for v in op.operands]
    block = hint.parent_block()
    assert block is not None
    order = {op: k for k, op in enumerate(block.ops)}
    return sorted(taken, key=order.__getitem__)


def _put_hints_back(hints: Sequence[_Hint]) -> None:
    """Each hint back before the op it preceded, where that op is still in a loop the
    optimizer left (a rewritten loop's ops are gone); the others are dropped."""
    for ops, after in hints:
        block = after.parent_block()
        if block is not None and _in_task(after):
            block.insert_ops_before(ops, after)
            continue
        for op in reversed(ops):
            op.erase()


def _in_task(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, (TaskOp, func.FuncOp)):
        parent = parent.parent_op()
    return parent is not None


def _candidates(task: _Body) -> Iterator[tuple[scf.ForOp | None, scf.ForOp]]:
    """(row loop, nest) pairs: a loop nest of one of the two forms, right in a loop, or
    (None, nest) for one in no loop."""
    for op in task.body.walk():
        if not isinstance(op, scf.ForOp) or op.iter_args:
            continue
        if _memory_form(op) or _carried_form(op):
            row = op.parent_op()
            yield (row if isinstance(row, scf.ForOp) else None), op


def _check_in_place(row: scf.ForOp | None, nest: scf.ForOp, task: _Body) -> None:
    """Raise _Left unless `nest` is still where it was found (a rewrite of an earlier nest
    replaces their row loop), and its row loop carries no values."""
    if row is not None and row.iter_args:
        raise _Left("its row loop carries values (iter_args)")
    op = nest.parent_op()
    while op is not None and op is not task:
        op = op.parent_op()
    if op is None or (row is not None and nest.parent_op() is not row):
        raise _Left("an earlier nest in its row loop was rewritten with the loop")


def _optimize_nest(row: scf.ForOp | None, nest: scf.ForOp, bits: int, module: ModuleOp) -> str:
    """What was done with `nest` (raising _Left when nothing): its kernel, a nest in no row
    loop as one of a single row, else, for a reduction nest, its rows' sums side by side."""
    alone = row is None
    row = _wrap(nest) if row is None else row
    try:
        return _Nest.of(row, nest, bits, 1 if alone else ROWS).rewrite(module)
    except _Left as why:
        if alone:
            _unwrap(row, nest)
        red = _carried_form(nest)
        if red is None:
            raise
        try:
            return _row_sums(nest, red, bits)
        except _Left:
            raise why from None


def _wrap(nest: scf.ForOp) -> scf.ForOp:
    """`nest` in a loop of one iteration, as the row loop of a single row."""
    block = nest.parent_block()
    assert block is not None
    zero = arith.ConstantOp.from_int_and_width(0, IndexType())
    one = arith.ConstantOp.from_int_and_width(1, IndexType())
    body = Block(arg_types=[IndexType()])
    row = scf.ForOp(zero, one, one, [], Region(body))
    block.insert_ops_before([zero, one, row], nest)
    nest.detach()
    body.add_ops([nest, scf.YieldOp()])
    return row


def _unwrap(row: scf.ForOp, nest: scf.ForOp) -> None:
    block = row.parent_block()
    assert block is not None
    nest.detach()
    block.insert_op_before(nest, row)
    bounds = [row.lb.owner, row.ub.owner]
    block.erase_op(row)
    for bound in bounds:
        assert isinstance(bound, Operation)
        block.erase_op(bound)


def _body_ops(loop: scf.ForOp) -> list[Operation]:
    return _body_ops_of(loop.body.block)


def _body_ops_of(block: Block) -> list[Operation]:
    return [op for op in block.ops if not isinstance(op, scf.YieldOp)]


def _memory_form(loop: scf.ForOp) -> scf.ForOp | None:
    """The column loop of `for k { for j {...} }` whose inner body holds no region (`k`'s
    body may also compute `j`'s bounds)."""
    ops = _body_ops(loop)
    loops = [op for op in ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1 or loops[0].iter_args:
        return None
    inner = loops[0]
    if len(ops) > 1 and not only_bounds([op for op in ops if op is not inner], inner):
        return None
    if any(op.regions for op in _body_ops(inner)):
        return None
    return inner if any(isinstance(op, memref.StoreOp) for op in _body_ops(inner)) else None


def _carried_form(loop: scf.ForOp) -> scf.ForOp | None:
    """The reduction loop of `for j {...; for k iter_args {...}; ...}`."""
    loops = [op for op in _body_ops(loop) if op.regions]
    if len(loops) != 1 or not isinstance(loops[0], scf.ForOp) or not loops[0].iter_args:
        return None
    inner = loops[0]
    return None if any(op.regions for op in _body_ops(inner)) else inner


def _row_major(value: SSAValue) -> bool:
    """Whether `value` is a memref with the default (row-major, contiguous) layout."""
    kind = value.type
    return isinstance(kind, MemRefType) and isinstance(kind.layout, NoneAttr)


def _iv(loop: scf.ForOp) -> SSAValue:
    return loop.body.block.args[0]


def _single(row: scf.ForOp) -> bool:
    """A loop of one iteration (a nest in no row loop, wrapped as one row)."""
    lb, ub = int_constant(row.lb), int_constant(row.ub)
    return lb is not None and ub is not None and ub - lb == 1


def _check_index_counters(*loops: scf.ForOp) -> None:
    """Raise _Left unless every loop of `loops` counts in index: the kernels make their
    blocks' loops and bounds in index."""
    for loop in loops:
        counter = _iv(loop).type
        if not isinstance(counter, IndexType):
            raise _Left(f"a loop of the nest counts in {counter}, not index")


_DIVIDED = (
    "a loop bound is a division (floordiv, ceildiv or mod, as a condition `2 * j <= i` "
    "makes one): the kernels take only bounds that add multiples of the row's counter"
)


_MAPS = (affine.ApplyOp, affine.MinOp, affine.MaxOp)


def _divides(op: Operation) -> bool:
    """Whether `op` applies an affine map holding a division to make a loop's bound."""
    if not isinstance(op, _MAPS):
        return False
    kinds = (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.CeilDiv, AffineBinaryOpKind.Mod)
    return _bounds_a_loop(op) and any(
        isinstance(part, AffineBinaryOpExpr) and part.kind in kinds
        for result in op.map.data.results
        for part in result.dfs()
    )


def _bounds_a_loop(op: Operation) -> bool:
    """Whether `op`'s result is a loop's bound, directly or through other maps."""
    return any(
        (isinstance(use.operation, scf.ForOp) and use.index in (0, 1))
        or (isinstance(use.operation, _MAPS) and _bounds_a_loop(use.operation))
        for use in op.results[0].uses
    )


def _check_rows_independent(row: scf.ForOp) -> None:
    """Raise _Left unless the iterations of `row` touch disjoint memory (module docstring)."""
    if int_constant(row.step) != 1:
        raise _Left("the row loop's step is not the constant 1")
    accesses: list[tuple[SSAValue, Sequence[SSAValue], bool]] = []
    for op in row.body.walk():
        if isinstance(op, memref.LoadOp):
            accesses.append((op.memref, op.indices, False))
        elif isinstance(op, memref.StoreOp):
            accesses.append((op.memref, op.indices, True))
        elif _divides(op):
            raise _Left(_DIVIDED)
        elif not isinstance(op, (*_SCALAR, scf.ForOp, scf.YieldOp)):
            raise _Left(f"the row loop holds {op.name}, which this optimizer does not model")
    written = {m for m, _, store in accesses if store}
    used = {m for m, _, _ in accesses}
    for target in written:
        if not injective(target.type):
            raise _Left("a memref it writes is a view whose rows may overlap")
        others = memory_of([target])
        if any(m is not target and may_alias(m, others) for m in used):
            raise _Left("a memref it writes may share memory with another it uses")
        rows = [
            {p for p, index in enumerate(indices) if index is _iv(row)}
            for m, indices, _ in accesses
            if m is target
        ]
        if not _single(row) and not set.intersection(*rows):
            raise _Left("an iteration touches other rows of a memref the loop writes")


@dataclass
class _Nest:
    """One nest to rewrite: the row loop, the column loop, the reduction loop."""

    row: scf.ForOp
    nest: scf.ForOp  # the op right in the row loop (the k loop, or the j loop)
    cols: scf.ForOp
    red: scf.ForOp
    memory: bool  # memory form (else carried)
    lanes: int
    unroll: int
    out: memref.StoreOp
    acc_load: memref.LoadOp | None  # memory form: the load of the element stored
    element: AnyFloat = field(init=False)
    rows: int = field(init=False, default=ROWS)  # rows blocked in registers
    bounds: tuple[RowBound, RowBound] = field(init=False)  # the columns', by the row
    transposed: list[memref.LoadOp] = field(init=False, default_factory=list)
    # Where the transposed reads read in the kernel: each source's panels, and the column
    # the panels start at.
    panels: dict[SSAValue, SSAValue] = field(init=False, default_factory=dict)
    panels_from: SSAValue | None = field(init=False, default=None)
    # Values of each (row, k) that the kernel broadcasts along the columns, computed once
    # before the column blocks into a table (row - first row, k - first k): a value's
    # table, and the first row.
    tables: dict[SSAValue, SSAValue] = field(init=False, default_factory=dict)
    tables_from: SSAValue | None = field(init=False, default=None)
    module: ModuleOp | None = field(init=False, default=None)  # for declarations

    @property
    def triangle(self) -> bool:
        """Whether the columns' bounds move with the row."""
        return any(bound.coef for bound in self.bounds)

    @staticmethod
    def of(row: scf.ForOp, nest: scf.ForOp, vector_bits: int, rows: int = ROWS) -> "_Nest":
        memory_cols = _memory_form(nest)
        if memory_cols is not None:
            cols, red = memory_cols, nest
        else:
            red = _carried_form(nest)
            assert red is not None
            cols = nest
        _check_index_counters(row, cols, red)
        _check_rows_independent(row)
        stores = [op for op in cols.body.walk() if isinstance(op, memref.StoreOp)]
        if len(stores) != 1:
            raise _Left("the column loop must write one element")
        out = stores[0]
        element = cast(MemRefType, out.memref.type).element_type
        if not isinstance(element, AnyFloat) or element.bitwidth not in (32, 64):
            raise _Left(f"it writes {element}, not f32 or f64")
        lanes = vector_bits // element.bitwidth
        unroll = 4 if vector_bits >= 512 else 2
        acc_load = _accumulator(cols, out) if memory_cols is not None else None
        nest_ = _Nest(row, nest, cols, red, memory_cols is not None, lanes, unroll, out, acc_load)
        nest_.element = element
        nest_.rows = rows
        nest_.check()
        return nest_

    # --- what may be rewritten -----------------------------------------------------------

    def check(self) -> None:
        if int_constant(self.cols.step) != 1:
            raise _Left("the column loop's step is not the constant 1")
        for bound in self.red.operands[:3]:
            if defined_inside(bound, self.row) or bound is _iv(self.row):
                raise _Left("its reduction's bounds vary with the row")
        lb, ub = lift(self.cols.lb, self.row), lift(self.cols.ub, self.row)
        if lb is None or ub is None:
            raise _Left("its columns' bounds are not the row times a constant plus a value")
        if lb.coef < 0 or ub.coef < 0:
            raise _Left("its columns' bounds fall as the row grows")
        self.bounds = (lb, ub)
        j = _iv(self.cols)
        if self.out.indices[-1] is not j or any(i is j for i in self.out.indices[:-1]):
            raise _Left("the element it writes is not at the column index, last")
        for index in self.out.indices[:-1]:
            if defined_inside(index, self.red) or defined_inside(index, self.cols):
                raise _Left("the row it writes varies inside the nest")
        for op in self.cols.body.walk():
            self._check_op(op)
        if self.transposed and self.rows == 1:
            # A panel read by one row is read once: copying it first only adds traffic.
            raise _Left(f"it reads {_names(self.transposed)} down a column, in no row loop")
        if self.transposed and (lb.coef or not self._row_splits()):
            raise _Left(
                f"it reads {_names(self.transposed)} down a column, which needs columns "
                "that start where the row loop starts and a row loop that can be cut in three"
            )

    def _check_op(self, op: Operation) -> None:
        j = _iv(self.cols)
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            if isinstance(op, memref.LoadOp) and self._down_a_column(op):
                self.transposed.append(op)
                return
            if any(i is j for i in op.indices[:-1]):
                raise _Left("the column index is not the last subscript of an access")
            if op.indices and op.indices[-1] is j:
                self._check_contiguous(op.memref)
                if isinstance(op, memref.LoadOp) and op.res.type != self.element:
                    # Loaded as vectors of the element type; an index read along the
                    # columns would subscript another load lane by lane (a gather).
                    raise _Left(f"it reads {op.res.type} along the columns, not {self.element}")
            if isinstance(op, memref.LoadOp) and op.memref is self.out.memref:
                same = list(op.indices) == list(self.out.indices)
                if not same or (self.memory and op is not self.acc_load):
                    raise _Left("it reads the memref it writes elsewhere than the element")
                if not self.memory and defined_inside(op.res, self.red):
                    raise _Left("it reads the element it writes inside the reduction")
            return
        if op is self.red or isinstance(op, scf.YieldOp):
            return
        if not isinstance(op, _SCALAR):
            raise _Left(f"its body holds {op.name}")
        if any(operand is j for operand in op.operands):
            raise _Left("the column index is used in arithmetic")
        for result in op.results:
            if isinstance(op, _LANEWISE) and result.type != self.element:
                raise _Left(f"it computes in {result.type} beside {self.element}")

    def _down_a_column(self, load: memref.LoadOp) -> bool:
        """A read of X[j, k] (`j` the column index, `k` the reduction's) that a transposed
        copy can serve: X is not what the nest writes, and holds its element type."""
        kind = load.memref.type
        return (
            transposable(load, _iv(self.cols), _iv(self.red))
            and load.memref is not self.out.memref
            and isinstance(kind, MemRefType)
            and kind.element_type == self.element
            and _row_major(load.memref)
        )

    @staticmethod
    def _check_contiguous(value: SSAValue) -> None:
        if not rows_contiguous(value.type):
            raise _Left("a memref read along the columns has a layout other than row-major")

    # --- the rewrite ---------------------------------------------------------------------

    def rewrite(self, module: ModuleOp) -> str:
        """Rewrite the nest: a BLAS call where the program allows it, else the kernel."""
        self.module = module
        product = None if self.triangle or self.transposed else self._blas_product()
        if product is not None:
            return self._call_blas(module, *product)
        packed = ""
        if self.transposed:
            packed = f"; {_names(self.transposed)} read down columns, copied into panels first"
        return self._blocked() + packed

    # --- BLAS, where the program allows any order of sums --------------------------------

    def _blas_product(self) -> tuple[memref.LoadOp, memref.LoadOp, list[SSAValue]] | None:
        """(X[i, k], Y[k, j], scalar factors) when the nest is C[i, j] += product of them
        and nothing else, every add and multiply may be reordered, and what follows the
        nest in the row loop uses nothing computed before it there; else None."""
        row_iv, j, k = _iv(self.row), _iv(self.cols), _iv(self.red)
        load, out = self.acc_load, self.out
        if not self.memory or load is None or int_constant(self.red.step) != 1:
            return None
        ops = _body_ops(self.cols)
        total = out.value.owner
        if list(out.indices) != [row_iv, j] or not allows_any_order(ops):
            return None
        if not isinstance(total, arith.AddfOp) or list(total.operands).count(load.res) != 1:
            return None
        used: set[Operation] = {total, load, out}
        leaves: list[SSAValue] = []
        pending = [v for v in total.operands if v is not load.res]
        while pending:
            value = pending.pop()
            owner = value.owner
            if isinstance(owner, arith.MulfOp) and owner.parent_block() is self.cols.body.block:
                used.add(owner)
                pending += [owner.lhs, owner.rhs]
            else:
                leaves.append(value)
        found = self._factors(leaves, (row_iv, k), (k, j))
        if found is None:
            return None
        # Besides the product, only loads and arithmetic whose values nothing uses.
        extra = [op for op in ops if op not in used and op not in found[:2]]
        if any(not isinstance(op, (memref.LoadOp, *_SCALAR)) for op in extra):
            return None
        if any(result.uses for op in extra for result in op.results):
            return None
        return found if self._row_splits() else None

    def _factors(
        self, leaves: list[SSAValue], left: tuple[SSAValue, ...], right: tuple[SSAValue, ...]
    ) -> tuple[memref.LoadOp, memref.LoadOp, list[SSAValue]] | None:
        """The leaves as X[left], Y[right] (row-major 2-D memrefs) and scalars from outside
        the row loop."""
        x = y = None
        scalars: list[SSAValue] = []
        for leaf in leaves:
            owner = leaf.owner
            if isinstance(owner, memref.LoadOp) and tuple(owner.indices) == left and x is None:
                x = owner
            elif isinstance(owner, memref.LoadOp) and tuple(owner.indices) == right and y is None:
                y = owner
            elif not defined_inside(leaf, self.row) and leaf.type == self.element:
                scalars.append(leaf)
            else:
                return None
        if x is None or y is None:
            return None
        for operand in (x.memref, y.memref, self.out.memref):
            kind = operand.type
            if not _row_major(operand) or not isinstance(kind, MemRefType):
                return None
            if kind.get_num_dims() != 2 or kind.element_type != self.element:
                return None
            if any(size < 0 for size in kind.get_shape()):
                return None  # BLAS is told each row's length, a constant of the type
        return x, y, scalars

    def _row_splits(self) -> bool:
        """Whether the row loop may run as three: what is before the nest for every row,
        the nest for every row, what follows for every row (the rows are independent; the
        parts must not share values computed in the row)."""
        before = _body_ops(self.row)[: _body_ops(self.row).index(self.nest)]
        before = before[: len(before) - len(self._prelude())]
        made = {r for op in before for inner in op.walk() for r in inner.results}
        later = [inner for op in _body_ops(self.row)[len(before) :] for inner in op.walk()]
        return not any(operand in made for op in later for operand in op.operands)

    def _prelude(self) -> list[Operation]:
        """The index arithmetic just before the nest in the row loop that only the nest's
        bounds use (a triangle's `i + 1`, where the affine lowering leaves it): it goes
        with the nest wherever the row loop is cut."""
        ops = _body_ops(self.row)
        at = start = ops.index(self.nest)
        while start > 0 and only_bounds(ops[start - 1 : at], self.nest):
            start -= 1
        return ops[start:at]

    def _call_blas(
        self, module: ModuleOp, x: memref.LoadOp, y: memref.LoadOp, scalars: list[SSAValue]
    ) -> str:
        row, red = self.row, self.red
        block = Block()
        ops = _body_ops(row)
        at = ops.index(self.nest)
        if at:
            put(block, self._row_loop(ops[:at]))
        one = put(block, arith.ConstantOp(FloatAttr(1.0, self.element))).result
        alpha = scalars[0] if scalars else one
        allowed = common_flags(_body_ops(self.cols))  # the program's, no more
        for factor in scalars[1:]:
            alpha = put(block, arith.MulfOp(alpha, factor, allowed)).result
        j_lb, j_ub = (bound.at(block, row.lb) for bound in self.bounds)
        sizes = (count(block, row.lb, row.ub), count(block, j_lb, j_ub))
        depth = count(block, red.lb, red.ub)
        a = Corner(x.memref, row.lb, red.lb)
        b = Corner(y.memref, red.lb, j_lb)
        c = Corner(self.out.memref, row.lb, j_lb)
        checks = self._finite(block, alpha) if scalars else []
        what = f"nest (i-k-j) as {CALLED} gemm (reassoc allows its order of sums)"
        if keeps_signed_zeros(_body_ops(self.cols)):
            what += " where no element of C's block is -0, else the exact kernel"
            # BLAS's +0 where the exact sum is -0 needs nsz (dhir.transforms.blas).
            found = holds_negative_zero(block, c.memref, [(row.lb, row.ub), (j_lb, j_ub)])
            true = put(block, arith.ConstantOp.from_int_and_width(1, i1)).result
            checks.append(put(block, arith.XOrIOp(found, true)).result)
        self._gemm_where(block, (a, b, c), (*sizes, depth), alpha, checks)
        if ops[at + 1 :]:
            put(block, self._row_loop(ops[at + 1 :]))
        replace_by(row, block)
        return what

    def _finite(self, block: Block, alpha: SSAValue) -> list[SSAValue]:
        """At the end of `block`, i1s that hold where the product of the scalar factors
        `alpha` is finite and not 0. gemm scales the sum of the products by alpha once:
        for 0, OpenBLAS returns at once and an infinity or NaN of A or B never reaches C;
        for an infinity, inf * (sum) is an infinity where the program's terms
        inf * (a * b) of both signs add up to NaN. reassoc allows another order of the
        sums, not either."""
        element = self.element
        zero = put(block, arith.ConstantOp(FloatAttr(0.0, element))).result
        inf = put(block, arith.ConstantOp(FloatAttr(float("inf"), element))).result
        ninf = put(block, arith.ConstantOp(FloatAttr(float("-inf"), element))).result
        # Ordered comparisons: a NaN alpha (every product NaN either way) takes the loops.
        return [
            put(block, arith.CmpfOp(alpha, zero, "one")).result,
            put(block, arith.CmpfOp(alpha, inf, "olt")).result,
            put(block, arith.CmpfOp(alpha, ninf, "ogt")).result,
        ]

    def _gemm_where(
        self,
        block: Block,
        corners: tuple[Corner, Corner, Corner],
        sizes: tuple[SSAValue, SSAValue, SSAValue],
        alpha: SSAValue,
        checks: list[SSAValue],
    ) -> None:
        """At the end of `block`, the gemm where all `checks` hold (at once with none),
        else the exact kernel for every row."""
        assert self.module is not None
        if not checks:
            emit_gemm(block, self.module, *corners, sizes, alpha)
            return
        allowed = checks[0]
        for check in checks[1:]:
            allowed = put(block, arith.AndIOp(allowed, check)).result
        call = Block()
        emit_gemm(call, self.module, *corners, sizes, alpha)
        put(call, scf.YieldOp())
        rows = self._row_loop([self.nest])
        exact = Block([rows, scf.YieldOp()])
        put(block, scf.IfOp(allowed, [], Region(call), Region(exact)))
        self._exact_kernel(rows)

    def _exact_kernel(self, rows: scf.ForOp) -> None:
        """`rows` (a row loop holding a clone of the nest) as the kernel that
        `--fast-math=none` gives, not the scalar loops on one thread: its adds and
        multiplies lose their flags (always allowed), so it gives the interpreter's bits."""
        nest = _body_ops(rows)[-1]
        assert isinstance(nest, scf.ForOp)
        for op in nest.walk():
            if isinstance(op, arith.AddfOp | arith.MulfOp):
                op.properties["fastmath"] = arith.FastMathFlagsAttr("none")
        bits = self.lanes * self.element.bitwidth
        try:
            exact = _Nest.of(rows, nest, bits, self.rows)
        except _Left:
            return  # the nest as written, its flags dropped, is exact too
        exact.module = self.module
        exact._blocked()

    def _row_loop(
        self,
        ops: list[Operation],
        rows: tuple[SSAValue, SSAValue] | None = None,
        cols_from: SSAValue | None = None,
    ) -> scf.ForOp:
        """A loop over the rows (all, or `rows`) with clones of `ops`; with `cols_from`,
        `ops` is the nest, its columns from there on."""
        body = Block(arg_types=[IndexType()])
        ops = [*self._prelude(), *ops] if ops == [self.nest] else ops
        _clone_into(body, ops, {_iv(self.row): body.args[0]})
        if cols_from is not None:
            nest = _body_ops_of(body)[-1]
            assert isinstance(nest, scf.ForOp)
            self._columns_from(nest, cols_from)
        put(body, scf.YieldOp())
        lb, ub = rows if rows is not None else (self.row.lb, self.row.ub)
        return scf.ForOp(lb, ub, self.row.step, [], Region(body))

    # --- the register-blocked kernel -----------------------------------------------------

    def _blocked(self) -> str:
        split = self._row_splits() and not self.bounds[0].coef and not self.chunked
        if split:
            self._panels()
        else:
            self._row_blocks()
        form = "i-k-j" if self.memory else "k innermost"
        if self.triangle:
            form += ", columns bounded by the row"
        width = self.lanes * self.unroll
        order = ", column blocks outer" if split else ""
        order += f", k in chunks of {K_CHUNK}" if self.chunked else ""
        rows = f"{self.rows} rows" if self.rows > 1 else "1 row"
        tables = f", {len(self.tables)} value(s) per row and k in a table" if self.tables else ""
        return (
            f"nest ({form}) blocked {rows} x {width} columns ({self.unroll} vectors of "
            f"{self.lanes} x {self.element}) in registers{order}{tables}, exact"
        )

    def _panels(self) -> None:
        """The row loop as three (_row_splits), the nest's blocks with columns outer and
        rows inner: a column block's panel of B (k x columns) stays in the core's cache
        while every row block uses it, instead of coming from memory for each. Where the
        columns end with the row (a lower triangle), a column block runs for the row
        blocks that have all of its columns."""
        row, width = self.row, self.lanes * self.unroll
        ops = _body_ops(row)
        at = ops.index(self.nest)
        block = Block()
        if at:
            put(block, self._row_loop(ops[:at]))
        i_end = _block_end(block, row.lb, row.ub, self.rows)
        j_lb = self.bounds[0].at(block, row.lb)
        one = put(block, arith.ConstantOp.from_int_and_width(1, IndexType())).result
        last = put(block, arith.SubiOp(i_end, one)).result
        j_end = _block_end(block, j_lb, self.bounds[1].at(block, last), width)
        freed = self._pack(block, (row.lb, i_end), (j_lb, j_end))
        freed += self._tabulate(block, (row.lb, i_end))
        index = IndexType()
        rstep = put(block, arith.ConstantOp.from_int_and_width(self.rows, index)).result
        cstep = put(block, arith.ConstantOp.from_int_and_width(width, index)).result
        columns = Block(arg_types=[index])
        first = self._first_row_block(columns, columns.args[0], i_end)
        rows = Block(arg_types=[index])
        envs = _row_envs(rows, rows.args[0], _iv(row), self.rows)
        widen = _Widen(self, columns.args[0], rows)
        if self.memory:
            widen.memory_kernel(envs)
        else:
            widen.carried_kernel(envs)
        put(rows, scf.YieldOp())
        put(columns, scf.ForOp(first, i_end, rstep, [], Region(rows)))
        put(block, _parallel(j_lb, j_end, cstep, columns))
        rest = Block(arg_types=[index])
        envs = _row_envs(rest, rest.args[0], _iv(row), self.rows)
        ubs = [self.bounds[1].at(rest, _scalar(_iv(row), env)) for env in envs]
        self._rest(
            rest, envs, ([j_lb] * len(envs), ubs), j_lb, _block_end(rest, j_lb, ubs[0], width)
        )
        put(block, _parallel(row.lb, i_end, rstep, rest))
        put(block, self._row_loop([self.nest], (i_end, row.ub)))
        if ops[at + 1 :]:
            put(block, self._row_loop(ops[at + 1 :]))
        block.add_ops(freed)
        replace_by(row, block)

    def _pack(
        self, block: Block, rows: tuple[SSAValue, SSAValue], columns: tuple[SSAValue, SSAValue]
    ) -> list[Operation]:
        """Panels of what the kernel reads down columns, for the column blocks in
        `columns` (all of which the last of the blocked `rows` has: none when there are
        no such rows); the ops that free them."""
        if not self.transposed:
            return []
        some = put(block, arith.CmpiOp(rows[0], rows[1], "slt")).result
        end = put(block, arith.SelectOp(some, columns[1], columns[0])).result
        sources = [load.memref for load in self.transposed]
        width = self.lanes * self.unroll
        self.panels, freed = pack_panels(block, sources, self.red, (columns[0], end), width)
        self.panels_from = columns[0]
        return freed

    def _tabulate(self, block: Block, rows: tuple[SSAValue, SSAValue]) -> list[Operation]:
        """Tables of the values the kernel would compute for each row and k, once per
        column block (`_broadcasts`), computed here once for the blocked `rows`; the ops
        that free them. Each value takes the same ops on the same operands as in the
        nest, so it is the same value."""
        roots = self._broadcasts()
        if not roots:
            return []
        index = IndexType()
        red_lb, red_ub = self.red.lb, self.red.ub
        nrows = put(block, arith.SubiOp(rows[1], rows[0])).result
        nks = put(block, arith.SubiOp(red_ub, red_lb)).result
        some = put(block, arith.CmpiOp(rows[0], rows[1], "slt")).result
        zero = put(block, arith.ConstantOp.from_int_and_width(0, index)).result
        nrows = put(block, arith.SelectOp(some, nrows, zero)).result
        nks = put(block, arith.MaxSIOp(nks, zero)).result
        freed: list[Operation] = []
        for root in roots:
            kind = MemRefType(root.type, [DYNAMIC_INDEX, DYNAMIC_INDEX])
            table = put(block, memref.AllocOp([nrows, nks], [], kind)).memref
            self.tables[root] = table
            freed.append(memref.DeallocOp.get(table))
        one = put(block, arith.ConstantOp.from_int_and_width(1, index)).result
        ks = Block(arg_types=[index])
        rows_body = Block(arg_types=[index])
        env: dict[SSAValue, SSAValue] = {
            _iv(self.row): rows_body.args[0],
            _iv(self.red): ks.args[0],
        }
        for op in self._chain(roots):
            clone = put(ks, op.clone(value_mapper=env))
            env.update(zip(op.results, clone.results))
        r = put(ks, arith.SubiOp(rows_body.args[0], rows[0])).result
        k = put(ks, arith.SubiOp(ks.args[0], red_lb)).result
        for root, table in self.tables.items():
            put(ks, memref.StoreOp.get(env[root], table, [r, k]))
        put(ks, scf.YieldOp())
        # Only for a row that has columns: the nest reads nothing in one that has none
        # (`for j in [0, i - 4)`: rows 0..4), where a read may fall outside the memref or
        # the rows its rank holds. The kernel reads no entry of such a row.
        lo, hi = (bound.at(rows_body, rows_body.args[0]) for bound in self.bounds)
        some = put(rows_body, arith.CmpiOp(lo, hi, "slt")).result
        then = Block()
        put(then, scf.ForOp(red_lb, red_ub, one, [], Region(ks)))
        put(then, scf.YieldOp())
        put(rows_body, scf.IfOp(some, [], Region(then)))
        put(rows_body, scf.YieldOp())
        put(block, scf.ForOp(rows[0], rows[1], one, [], Region(rows_body)))
        self.tables_from = rows[0]
        return freed

    def _innermost(self) -> Block:
        """The block the kernel widens: the column loop's (memory form), the reduction's."""
        return self.cols.body.block if self.memory else self.red.body.block

    def _broadcasts(self) -> list[SSAValue]:
        """Scalars of the innermost body that are broadcast along the columns (an operand
        of a float op whose other operand varies along them), computed there from the row,
        `k`, values from outside the nest and reads of memrefs the nest does not write, by
        at least one arithmetic op (a plain read is broadcast straight from memory)."""
        if int_constant(self.red.step) != 1:
            return []
        varying: set[SSAValue] = {_iv(self.cols)}
        body = self._innermost()
        if not self.memory:
            varying.update(body.args[1:])
        found: list[SSAValue] = []
        for op in body.ops:
            if any(v in varying for v in op.operands):
                varying.update(op.results)
                if isinstance(op, _LANEWISE):
                    found += [v for v in op.operands if v not in varying and v not in found]
        return [v for v in found if self._tabulable(v, varying)]

    def _tabulable(self, value: SSAValue, varying: set[SSAValue]) -> bool:
        op = value.owner
        if not isinstance(op, Operation) or op.parent_block() is not self._innermost():
            return False
        chain = self._chain([value])
        if not any(isinstance(o, _LANEWISE) for o in chain):
            return False
        for o in chain:
            if any(v in varying for v in o.operands) or not isinstance(
                o, (*_SCALAR, memref.LoadOp)
            ):
                return False
            if isinstance(o, memref.LoadOp) and may_alias(o.memref, memory_of([self.out.memref])):
                return False
            for v in o.operands:
                defined = v.owner
                local = (
                    isinstance(defined, Operation) and defined.parent_block() is self._innermost()
                )
                if (
                    not local
                    and defined_inside(v, self.row)
                    and v not in (_iv(self.row), _iv(self.red))
                ):
                    return False
        return True

    def _chain(self, roots: Sequence[SSAValue]) -> list[Operation]:
        """The ops of the innermost body that compute `roots`, in body order."""
        body = self._innermost()
        needed: set[Operation] = set()
        work = [v.owner for v in roots]
        while work:
            op = work.pop()
            if not isinstance(op, Operation) or op in needed or op.parent_block() is not body:
                continue
            needed.add(op)
            work += [v.owner for v in op.operands]
        return [op for op in body.ops if op in needed]

    def _first_row_block(self, block: Block, j0: SSAValue, i_end: SSAValue) -> SSAValue:
        """The first row block (of those from the row loop's start) whose first row has
        every column of the block starting at `j0`: the row loop's start for rectangles."""
        row, ub = self.row, self.bounds[1]
        if not ub.coef:
            return row.lb
        index = IndexType()
        width = self.lanes * self.unroll
        zero = put(block, arith.ConstantOp.from_int_and_width(0, index)).result
        offset = ub.at(block, zero)
        span = put(block, arith.ConstantOp.from_int_and_width(width, index)).result
        need = put(block, arith.AddiOp(j0, span)).result
        need = put(block, arith.SubiOp(need, offset)).result
        coef = put(block, arith.ConstantOp.from_int_and_width(ub.coef, index)).result
        need = put(block, arith.CeilDivSIOp(need, coef)).result  # ub(i) >= j0 + width
        rows = put(block, arith.ConstantOp.from_int_and_width(self.rows, index)).result
        blocks = put(block, arith.CeilDivUIOp(count(block, row.lb, need), rows)).result
        start = put(block, arith.MuliOp(blocks, rows)).result
        start = put(block, arith.AddiOp(row.lb, start)).result
        return put(block, arith.MinSIOp(start, i_end)).result

    def _row_blocks(self) -> None:
        """Blocks of rows, each running what the row loop holds for its rows in turn: the
        statements before the nest, the nest's kernel, the statements after."""
        _in_row_blocks(self.row, self.nest, self.rows, self._kernel, not self.chunked)

    def _kernel(self, block: Block, envs: list[Env]) -> None:
        """The blocked column loop for the rows of `envs` over the columns they all have,
        then, row by row, the columns left over on either side. The bounds grow with the
        row (check), so the first row has the fewest columns on the right, the last the
        fewest on the left.

        A single row in memory form (A^T x: `for k { for j { y[j] += A[k, j] * x[k] } }`)
        reuses nothing of B across rows, and a column block walking all of `k` reads B
        down a column, a new page every step, which the core's prefetchers and TLB serve
        badly (atax: 7 GB/s). So its columns are cut in one stripe per thread of the rank
        (at least a page of each row), and a stripe's column blocks run over K_CHUNK steps
        of `k` at a time, reading that many rows of B side by side, and keep their sums in
        `y` between chunks: each element still takes its adds in the order of `k`. So one
        thread streams whole rows."""
        width = self.lanes * self.unroll
        lbs = [self.bounds[0].at(block, _scalar(_iv(self.row), env)) for env in envs]
        ubs = [self.bounds[1].at(block, _scalar(_iv(self.row), env)) for env in envs]
        j_lb, j_ub = lbs[-1], ubs[0]
        j_end = _block_end(block, j_lb, j_ub, width)
        step = put(block, arith.ConstantOp.from_int_and_width(width, IndexType())).result
        inner, columns, k_bounds = block, (j_lb, j_end), None
        if self.chunked:
            inner, columns, k_bounds = self._k_chunks(block, envs[0], columns)
        body = Block(arg_types=[IndexType()])
        widen = _Widen(self, body.args[0], body, k_bounds)
        if self.memory:
            widen.memory_kernel(envs)
        else:
            widen.carried_kernel(envs)
        put(body, scf.YieldOp())
        put(inner, scf.ForOp(*columns, step, [], Region(body)))
        if k_bounds is not None:
            put(inner, scf.YieldOp())
        self._rest(block, envs, (lbs, ubs), j_lb, j_end)

    @property
    def chunked(self) -> bool:
        """Whether the kernel runs `k` in chunks (_kernel)."""
        return self.memory and self.rows == 1

    def _k_chunks(
        self, block: Block, env: Env, columns: tuple[SSAValue, SSAValue]
    ) -> tuple[Block, tuple[SSAValue, SSAValue], tuple[SSAValue, SSAValue]]:
        """At the end of `block`, a parallel loop over stripes of `columns` (_stripe: the
        rank's threads share them), each a loop over chunks of K_CHUNK steps of `k`: the
        chunk loop's body, the stripe's columns and the chunk's `k` there."""
        index, red = IndexType(), self.red
        size = self._stripe(block, columns)
        stripe = Block(arg_types=[index])
        stripe_end = put(stripe, arith.AddiOp(stripe.args[0], size)).result
        stripe_end = put(stripe, arith.MinSIOp(stripe_end, columns[1])).result
        ub = _scalar(red.ub, env)
        steps = put(block, arith.ConstantOp.from_int_and_width(K_CHUNK, index)).result
        span = put(block, arith.MuliOp(steps, red.step)).result
        chunk = Block(arg_types=[index])
        end = put(chunk, arith.AddiOp(chunk.args[0], span)).result
        end = put(chunk, arith.MinSIOp(end, ub)).result
        put(stripe, scf.ForOp(_scalar(red.lb, env), ub, span, [], Region(chunk)))
        put(block, _parallel(columns[0], columns[1], size, stripe))
        return chunk, (stripe.args[0], stripe_end), (chunk.args[0], end)

    def _stripe(self, block: Block, columns: tuple[SSAValue, SSAValue]) -> SSAValue:
        """The columns of a stripe, at the end of `block`: the rank's threads' shares of
        `columns` (dhir_rt_threads at run time), in whole column blocks, at least a page.
        One thread then streams whole rows, K_CHUNK side by side."""
        index, width = IndexType(), self.lanes * self.unroll
        page = max(1, PAGE_BYTES // (self.element.bitwidth // 8) // width) * width
        assert self.module is not None
        declare(self.module, THREADS_HOOK, [], [i64], "dhir's runtime function")
        threads = put(block, func.CallOp(THREADS_HOOK, [], [i64])).res[0]
        threads = put(block, arith.IndexCastOp(threads, index)).result
        span = put(block, arith.SubiOp(columns[1], columns[0])).result
        share = put(block, arith.CeilDivSIOp(span, threads)).result
        block_size = put(block, arith.ConstantOp.from_int_and_width(width, index)).result
        blocks = put(block, arith.CeilDivSIOp(share, block_size)).result
        share = put(block, arith.MuliOp(blocks, block_size)).result
        least = put(block, arith.ConstantOp.from_int_and_width(page, index)).result
        return put(block, arith.MaxSIOp(share, least)).result

    def _rest(
        self,
        block: Block,
        envs: list[Env],
        bounds: tuple[list[SSAValue], list[SSAValue]],
        j_lb: SSAValue,
        j_end: SSAValue,
    ) -> None:
        """Each row's columns that the kernel, over [j_lb, j_end), left: on the left
        where the columns start with the row, and on the right."""
        for env, lb, ub in zip(envs, *bounds):
            mapper = {k: v for k, v in env.items() if isinstance(v, SSAValue)}
            if self.bounds[0].coef:
                end = put(block, arith.MinSIOp(j_lb, ub)).result
                left = put(block, self.nest.clone(value_mapper=mapper))
                self._columns(left, lb, end)
            rest = put(block, self.nest.clone(value_mapper=mapper))
            self._columns(rest, j_end, ub)

    def _columns_from(self, nest: scf.ForOp, start: SSAValue) -> None:
        """Start the column loop of `nest` (a clone of the nest) at `start`."""
        columns = self._column_loop(nest)
        columns.operands[0] = start

    def _columns(self, nest: scf.ForOp, start: SSAValue, end: SSAValue) -> None:
        """Run the column loop of `nest` (a clone of the nest) over [start, end)."""
        columns = self._column_loop(nest)
        columns.operands[0] = start
        columns.operands[1] = end

    def _column_loop(self, nest: scf.ForOp) -> scf.ForOp:
        if not self.memory:
            return nest
        (columns,) = [op for op in _body_ops(nest) if isinstance(op, scf.ForOp)]
        return columns


def _names(loads: Sequence[memref.LoadOp]) -> str:
    names = {f"%{load.memref.name_hint}" for load in loads if load.memref.name_hint}
    return ", ".join(sorted(names)) or "a memref"


def _accumulator(cols: scf.ForOp, out: memref.StoreOp) -> memref.LoadOp:
    loads = [
        op for op in _body_ops(cols) if isinstance(op, memref.LoadOp) and op.memref is out.memref
    ]
    if len(loads) != 1 or list(loads[0].indices) != list(out.indices):
        raise _Left("it does not read the element it writes, once")
    ops = _body_ops(cols)
    if ops.index(loads[0]) > ops.index(out):
        raise _Left("it reads the element after writing it")
    return loads[0]


def _block_end(block: Block, lb: SSAValue, ub: SSAValue, width: int) -> SSAValue:
    """lb + (max(ub - lb, 0) // width) * width, at the end of `block`: where whole blocks
    of `width` end."""
    size = put(block, arith.ConstantOp.from_int_and_width(width, IndexType())).result
    blocks = put(block, arith.DivUIOp(count(block, lb, ub), size)).result
    return put(block, arith.AddiOp(lb, put(block, arith.MuliOp(blocks, size)).result)).result


def _clone_into(block: Block, ops: Sequence[Operation], env: Env) -> None:
    """Clone `ops` at the end of `block`, scalars mapped by `env` (which learns theirs)."""
    mapper = {k: v for k, v in env.items() if isinstance(v, SSAValue)}
    for op in ops:
        put(block, op.clone(value_mapper=mapper))
    env.update(mapper)


class _Widen:
    """Ops of the nest cloned for each row and, along the columns, as U vectors."""

    def __init__(
        self,
        nest: _Nest,
        j0: SSAValue,
        block: Block,
        k_bounds: tuple[SSAValue, SSAValue] | None = None,
    ) -> None:
        self.nest = nest
        self.k_bounds = k_bounds  # the reduction loop's, where not its own
        self.kind = VectorType(nest.element, [nest.lanes])
        self.block = block
        self._loaded: dict[tuple[object, ...], SSAValue] = {}
        index = IndexType()
        self.columns: list[SSAValue] = []
        self.offsets: list[SSAValue] = []
        for u in range(nest.unroll):
            offset = put(block, arith.ConstantOp.from_int_and_width(u * nest.lanes, index))
            self.offsets.append(offset.result)
            self.columns.append(put(block, arith.AddiOp(j0, offset.result)).result)
        self.panel = None
        if nest.panels_from is not None:
            width = nest.lanes * nest.unroll
            size = put(block, arith.ConstantOp.from_int_and_width(width, index)).result
            start = put(block, arith.SubiOp(j0, nest.panels_from)).result
            self.panel = put(block, arith.DivUIOp(start, size)).result

    def memory_kernel(self, envs: list[Env]) -> None:
        """Load the block's sums, run `k` over them, store them back: only where `k`
        runs at all. The program touches no element of the block when `k` has no step
        (bounds known at run time: `[0, t)` from t = 0, a memref's size of 0); loaded and
        stored back, an element may lie outside the rows its rank holds (a fault)."""
        nest = self.nest
        load = nest.acc_load
        assert load is not None
        outer, some = self.block, None
        if self.k_bounds is None and not _runs(nest.red):  # chunks are never empty
            lb, ub = (_scalar(bound, envs[0]) for bound in (nest.red.lb, nest.red.ub))
            some = put(outer, arith.CmpiOp(lb, ub, "slt")).result
            self.block = Block()
        envs = [dict(env) for env in envs]
        for env in envs:
            self._op(load, env)
        inits = [v for env in envs for v in cast(Lanes, env[load.res])]
        ops = [op for op in _body_ops(nest.cols) if op is not load and op is not nest.out]
        value = nest.out.value
        self._vector_loop(nest.red, inits, envs, [load.res], ops, [value], [value])
        for env in envs:
            self._op(nest.out, env)
        if some is not None:
            put(self.block, scf.YieldOp())
            put(outer, scf.IfOp(some, [], Region(self.block)))
            self.block = outer

    def carried_kernel(self, envs: list[Env]) -> None:
        nest = self.nest
        envs = [dict(env) for env in envs]
        for op in _body_ops(nest.cols):
            if op is not nest.red:
                for env in envs:
                    self._op(op, env)
                continue
            red = nest.red
            inits = [v for env in envs for init in red.iter_args for v in self._lanes(init, env)]
            end = red.body.block.last_op
            assert isinstance(end, scf.YieldOp)
            carried = red.body.block.args[1:]
            self._vector_loop(red, inits, envs, carried, _body_ops(red), end.operands, red.res)

    def _vector_loop(
        self,
        red: scf.ForOp,
        inits: list[SSAValue],
        envs: list[Env],
        carried: Sequence[SSAValue],
        ops: Sequence[Operation],
        yields: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
    ) -> None:
        """The reduction loop `red` over vectors: `carried` (per row, U vectors each, from
        `inits`) go round the loop, `ops` are widened in it, `yields` go to the next
        iteration, and `outputs` stand for what the loop ends with."""
        unroll = self.nest.unroll
        loop_body = Block(arg_types=[IndexType(), *(self.kind for _ in inits)])
        self.block, outer = loop_body, self.block
        accs = iter(loop_body.args[1:])
        for env in envs:
            env[_iv(red)] = loop_body.args[0]
            for value in carried:
                env[value] = tuple(next(accs) for _ in range(unroll))
        for op in ops:
            for env in envs:
                self._op(op, env)
        lanes = [v for env in envs for value in yields for v in self._lanes(value, env)]
        put(loop_body, scf.YieldOp(*lanes))
        self.block = outer
        lb, ub = self.k_bounds or (_scalar(red.lb, envs[0]), _scalar(red.ub, envs[0]))
        loop = put(outer, scf.ForOp(lb, ub, red.step, inits, Region(loop_body)))
        results = iter(loop.results)
        for env in envs:
            for value in outputs:
                env[value] = tuple(next(results) for _ in range(unroll))

    def _op(self, op: Operation, env: Env) -> None:
        j = _iv(self.nest.cols)
        if isinstance(op, memref.LoadOp) and op in self.nest.transposed:
            assert self.panel is not None
            source = self.nest.panels[op.memref]
            k = _scalar(op.indices[1], env)
            env[op.res] = tuple(
                self._vector_load(source, [self.panel, k, offset]) for offset in self.offsets
            )
        elif isinstance(op, memref.LoadOp) and op.indices and op.indices[-1] is j:
            indices = self._scalars(op.indices[:-1], env)
            env[op.res] = tuple(self._vector_load(op.memref, [*indices, c]) for c in self.columns)
        elif isinstance(op, memref.StoreOp):
            indices = self._scalars(op.indices[:-1], env)
            for value, col in zip(self._lanes(op.value, env), self.columns):
                put(self.block, vector.StoreOp(value, op.memref, [*indices, col]))
        elif any(isinstance(env.get(v), tuple) for v in op.operands):
            assert isinstance(op, _LANEWISE)
            per_u = [self._lanes(v, env) for v in op.operands]
            env[op.results[0]] = tuple(
                put(
                    self.block,
                    type(op).create(
                        operands=[lanes[u] for lanes in per_u],
                        result_types=[self.kind],
                        properties=dict(op.properties),
                        attributes=dict(op.attributes),
                    ),
                ).results[0]
                for u in range(self.nest.unroll)
            )
        elif op.results and op.results[0] in self.nest.tables:
            table, first = self.nest.tables[op.results[0]], self.nest.tables_from
            assert first is not None
            r = put(self.block, arith.SubiOp(_scalar(_iv(self.nest.row), env), first)).result
            k = put(self.block, arith.SubiOp(_scalar(_iv(self.nest.red), env), self.nest.red.lb))
            load = put(self.block, memref.LoadOp.get(table, [r, k.result]))
            env[op.results[0]] = load.res
        else:
            mapper = {k: v for k, v in env.items() if isinstance(v, SSAValue)}
            clone = put(self.block, op.clone(value_mapper=mapper))
            env.update(zip(op.results, clone.results))

    def _vector_load(self, source: SSAValue, indices: list[SSAValue]) -> SSAValue:
        """A vector load, shared by the rows that load the same vector in one block (B[k,
        j..] for all of them), unless the nest writes the memref (then a later load may
        see a store)."""
        key = (self.block, source, *indices)
        if source is self.nest.out.memref or key not in self._loaded:
            load = put(self.block, vector.LoadOp(source, indices, self.kind))
            self._loaded[key] = load.result
        return self._loaded[key]

    def _scalars(self, values: Sequence[SSAValue], env: Env) -> list[SSAValue]:
        return [_scalar(v, env) for v in values]

    def _lanes(self, value: SSAValue, env: Env) -> Lanes:
        mapped = env.get(value, value)
        if isinstance(mapped, tuple):
            return mapped
        wide = put(self.block, vector.BroadcastOp(mapped, self.kind)).vector
        return tuple(wide for _ in range(self.nest.unroll))


def _scalar(value: SSAValue, env: Env) -> SSAValue:
    mapped = env.get(value, value)
    assert isinstance(mapped, SSAValue)
    return mapped
