"""dhir-optimize-bodies: contraction-like loop nests in CPU tasks, blocked in registers and
vectorised along their columns, with each element computed exactly as written.

The nests it takes sit in a row loop `i` whose iterations are independent (every memref
it writes is written and read only at row `i`, and may alias nothing else it touches):

- memory form, `for k { for j { OUT[.., j] = f(OUT[.., j], ...) } }` (gemm in i-k-j order);
- carried form, `for j { init; s = for k iter_args(acc = init) {...}; OUT[.., j] = g(s) }`
  (k innermost, the sum in a register).

Each is rewritten for R rows and U vectors of V columns at once: the R*U accumulators
stay in vector registers across the whole `k` loop, a value that does not vary along `j`
(A[i, k], alpha) is computed once per row and broadcast, B[k, j..j+V) is loaded once for
R rows. Every element still takes the same operations in the same order (`k` ascending,
the expression as written), so the result is bit for bit the program's; columns and rows
left over run the original loops. Anything else in the row loop runs before or after the
nest, row by row, as it did. What it leaves alone, it says why (`--timing`).
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    VectorType,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from dhir.analysis.sharing import may_alias, memory_of
from dhir.dialects import arith, linalg, memref, scf, vector
from dhir.dialects.dhir import TaskOp
from dhir.ir.diagnostics import SourceLoc, loc_of
from dhir.ir.tasks import is_gpu_task

ROWS = 4  # rows blocked in registers
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

_Op = TypeVar("_Op", bound=Operation)
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


class _Left(Exception):
    """A nest left as written, and why."""


@dataclass(frozen=True)
class OptimizeBodiesPass(ModulePass):
    """Register-blocked, vectorised contraction nests in CPU tasks (module docstring);
    `vector_bits`: the width of the CPU's vector registers."""

    name = "dhir-optimize-bodies"
    vector_bits: int = 256

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        optimize_bodies(op, self.vector_bits)


def optimize_bodies(module: ModuleOp, vector_bits: int) -> list[Decision]:
    """Optimize every CPU task's contraction nests in place; what was done and left."""
    decisions: list[Decision] = []
    for task in [t for t in module.walk() if isinstance(t, TaskOp) and not is_gpu_task(t)]:
        for matmul in [op for op in task.body.walk() if isinstance(op, linalg.MatmulOp)]:
            why = _matmul_as_loops(matmul)
            if why is not None:
                decisions.append(Decision(loc_of(matmul), False, f"left as written: {why}"))
        for row, nest in list(_candidates(task)):
            try:
                text = _Nest.of(row, nest, vector_bits).rewrite()
                decisions.append(Decision(loc_of(nest), True, text))
            except _Left as why:
                decisions.append(Decision(loc_of(nest), False, f"left as written: {why}"))
    return decisions


_MATMUL_MAPS = ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)")


def _matmul_as_loops(op: linalg.MatmulOp) -> str | None:
    """Replace `op` by the loops it means, the sum carried in a register along `k`
    (`for i { for j { s = for k iter_args(acc = C[i, j]) {...}; C[i, j] = s } }`), which
    the kernel takes next: each element as the interpreter computes it (`out + a * b`, `k`
    ascending). Why not, when it stays."""
    operands = [*op.inputs, *op.outputs]
    kinds = [v.type for v in operands]
    if op.res or not all(isinstance(t, MemRefType) for t in kinds):
        return "linalg.matmul on tensors"
    memrefs = cast(list[MemRefType], kinds)
    element = memrefs[0].element_type
    if any(t.element_type != element or not isinstance(t.layout, NoneAttr) for t in memrefs):
        return "linalg.matmul with mixed element types or a layout other than row-major"
    if not isinstance(element, AnyFloat) or element.bitwidth not in (32, 64):
        return f"linalg.matmul on {element}, not f32 or f64"
    if any(d < 0 for t in memrefs for d in t.get_shape()):
        return "linalg.matmul with dynamic sizes"
    maps = tuple(str(m.data).split(": ")[-1].strip() for m in op.get_indexing_maps())
    if maps != _MATMUL_MAPS:
        return "linalg.matmul with other indexing maps"
    out = op.outputs[0]
    if may_alias(out, memory_of(op.inputs)):
        return "linalg.matmul whose output may share memory with an input"
    (m, n), k = memrefs[2].get_shape(), memrefs[0].get_shape()[1]
    block = op.parent_block()
    assert block is not None
    loops = Block()
    bounds = [_put(loops, arith.ConstantOp.from_int_and_width(v, IndexType())).result
              for v in (0, 1, m, n, k)]  # fmt: skip
    zero, one, rows, cols, depth = bounds
    rows_body = Block(arg_types=[IndexType()])
    cols_body = Block(arg_types=[IndexType()])
    i, j = rows_body.args[0], cols_body.args[0]
    start = _put(cols_body, memref.LoadOp.get(out, [i, j])).res
    red_body = Block(arg_types=[IndexType(), element])
    kk, acc = red_body.args
    a = _put(red_body, memref.LoadOp.get(op.inputs[0], [i, kk])).res
    b = _put(red_body, memref.LoadOp.get(op.inputs[1], [kk, j])).res
    mapper: dict[SSAValue, SSAValue] = dict(zip(op.body.block.args, (a, b, acc)))
    for inner in op.body.block.ops:
        if isinstance(inner, linalg.YieldOp):
            _put(red_body, scf.YieldOp(mapper.get(inner.operands[0], inner.operands[0])))
        else:
            _put(red_body, inner.clone(value_mapper=mapper))
    red = _put(cols_body, scf.ForOp(zero, depth, one, [start], Region(red_body)))
    _put(cols_body, memref.StoreOp.get(red.res[0], out, [i, j]))
    _put(cols_body, scf.YieldOp())
    _put(rows_body, scf.ForOp(zero, cols, one, [], Region(cols_body)))
    _put(rows_body, scf.YieldOp())
    _put(loops, scf.ForOp(zero, rows, one, [], Region(rows_body)))
    made = list(loops.ops)
    for new in made:
        new.detach()
    block.insert_ops_before(made, op)
    block.erase_op(op)
    return None


def _candidates(task: TaskOp) -> Iterator[tuple[scf.ForOp, scf.ForOp]]:
    """(row loop, nest) pairs: a loop nest of one of the two forms, right in a loop."""
    for op in task.body.walk():
        if not isinstance(op, scf.ForOp) or op.iter_args:
            continue
        row = op.parent_op()
        if isinstance(row, scf.ForOp) and (_memory_form(op) or _carried_form(op)):
            yield row, op


def _body_ops(loop: scf.ForOp) -> list[Operation]:
    return [op for op in loop.body.block.ops if not isinstance(op, scf.YieldOp)]


def _memory_form(loop: scf.ForOp) -> scf.ForOp | None:
    """The column loop of `for k { for j {...} }` whose inner body holds no region."""
    ops = _body_ops(loop)
    if len(ops) != 1 or not isinstance(ops[0], scf.ForOp) or ops[0].iter_args:
        return None
    inner = ops[0]
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


def _iv(loop: scf.ForOp) -> SSAValue:
    return loop.body.block.args[0]


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _inside(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is defined in `op`'s regions."""
    owner = value.owner
    parent = owner.parent_op() if isinstance(owner, Operation) else owner.parent_op()
    while parent is not None:
        if parent is op:
            return True
        parent = parent.parent_op()
    return False


def _check_rows_independent(row: scf.ForOp) -> None:
    """Raise _Left unless the iterations of `row` touch disjoint memory (module docstring)."""
    if _constant(row.step) != 1:
        raise _Left("the row loop's step is not the constant 1")
    accesses: list[tuple[SSAValue, Sequence[SSAValue], bool]] = []
    for op in row.body.walk():
        if isinstance(op, memref.LoadOp):
            accesses.append((op.memref, op.indices, False))
        elif isinstance(op, memref.StoreOp):
            accesses.append((op.memref, op.indices, True))
        elif not isinstance(op, (*_SCALAR, scf.ForOp, scf.YieldOp)):
            raise _Left(f"the row loop holds {op.name}, which this optimizer does not model")
    written = {m for m, _, store in accesses if store}
    used = {m for m, _, _ in accesses}
    for target in written:
        others = memory_of([target])
        if any(m is not target and may_alias(m, others) for m in used):
            raise _Left("a memref it writes may share memory with another it uses")
        rows = [
            {p for p, index in enumerate(indices) if index is _iv(row)}
            for m, indices, _ in accesses
            if m is target
        ]
        if not set.intersection(*rows):
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

    @staticmethod
    def of(row: scf.ForOp, nest: scf.ForOp, vector_bits: int) -> "_Nest":
        memory_cols = _memory_form(nest)
        if memory_cols is not None:
            cols, red = memory_cols, nest
        else:
            red = _carried_form(nest)
            assert red is not None
            cols = nest
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
        nest_.check()
        return nest_

    # --- what may be rewritten -----------------------------------------------------------

    def check(self) -> None:
        if _constant(self.cols.step) != 1:
            raise _Left("the column loop's step is not the constant 1")
        for bound in (*self.cols.operands[:3], *self.red.operands[:3]):
            if _inside(bound, self.row) or bound is _iv(self.row):
                raise _Left("its loops' bounds vary with the row")
        j = _iv(self.cols)
        if self.out.indices[-1] is not j or any(i is j for i in self.out.indices[:-1]):
            raise _Left("the element it writes is not at the column index, last")
        for index in self.out.indices[:-1]:
            if _inside(index, self.red) or _inside(index, self.cols):
                raise _Left("the row it writes varies inside the nest")
        for op in self.cols.body.walk():
            self._check_op(op)

    def _check_op(self, op: Operation) -> None:
        j = _iv(self.cols)
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            if any(i is j for i in op.indices[:-1]):
                raise _Left("the column index is not the last subscript of an access")
            if op.indices and op.indices[-1] is j:
                self._check_contiguous(op.memref)
            if isinstance(op, memref.LoadOp) and op.memref is self.out.memref:
                same = list(op.indices) == list(self.out.indices)
                if not same or (self.memory and op is not self.acc_load):
                    raise _Left("it reads the memref it writes elsewhere than the element")
                if not self.memory and _inside(op.res, self.red):
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

    @staticmethod
    def _check_contiguous(value: SSAValue) -> None:
        kind = value.type
        if not isinstance(kind, MemRefType) or not isinstance(kind.layout, NoneAttr):
            raise _Left("a memref read along the columns has a layout other than row-major")

    # --- the rewrite ---------------------------------------------------------------------

    def rewrite(self) -> str:
        row, rows = self.row, ROWS
        outer = Block()
        i_end = _block_end(outer, row.lb, row.ub, rows)
        step = _put(outer, arith.ConstantOp.from_int_and_width(rows, IndexType())).result
        body = Block(arg_types=[IndexType()])
        i0 = body.args[0]
        envs: list[Env] = []
        nest_at = list(row.body.block.ops).index(self.nest)
        before, after = _body_ops(row)[:nest_at], _body_ops(row)[nest_at + 1 :]
        for r in range(rows):
            offset = _put(body, arith.ConstantOp.from_int_and_width(r, IndexType())).result
            env: Env = {_iv(row): _put(body, arith.AddiOp(i0, offset)).result}
            envs.append(env)
        for env in envs:
            _clone_into(body, before, env)
        self._kernel(body, envs)
        for env in envs:
            _clone_into(body, after, env)
        _put(body, scf.YieldOp())
        _put(outer, scf.ForOp(row.lb, i_end, step, [], Region(body)))
        parent = row.parent_block()
        assert parent is not None
        ops = list(outer.ops)
        for op in ops:
            op.detach()
        parent.insert_ops_before(ops, row)
        row.operands[0] = i_end  # the original loop takes the rows left over
        form = "i-k-j" if self.memory else "k innermost"
        width = self.lanes * self.unroll
        return (
            f"nest ({form}) blocked {rows} rows x {width} columns ({self.unroll} vectors of "
            f"{self.lanes} x {self.element}) in registers, exact"
        )

    def _kernel(self, block: Block, envs: list[Env]) -> None:
        """The blocked column loop for the rows of `envs`, then the columns left over."""
        width = self.lanes * self.unroll
        cols = self.cols
        j_end = _block_end(block, cols.lb, cols.ub, width)
        step = _put(block, arith.ConstantOp.from_int_and_width(width, IndexType())).result
        body = Block(arg_types=[IndexType()])
        widen = _Widen(self, body.args[0], body)
        if self.memory:
            widen.memory_kernel(envs)
        else:
            widen.carried_kernel(envs)
        _put(body, scf.YieldOp())
        _put(block, scf.ForOp(cols.lb, j_end, step, [], Region(body)))
        for env in envs:
            mapper = {k: v for k, v in env.items() if isinstance(v, SSAValue)}
            rest = self.nest.clone(value_mapper=mapper)
            columns = rest if not self.memory else _body_ops(rest)[0]
            columns.operands[0] = j_end
            _put(block, rest)


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
    index = IndexType()
    zero = _put(block, arith.ConstantOp.from_int_and_width(0, index)).result
    size = _put(block, arith.ConstantOp.from_int_and_width(width, index)).result
    span = _put(block, arith.SubiOp(ub, lb)).result
    span = _put(block, arith.MaxSIOp(span, zero)).result
    blocks = _put(block, arith.DivUIOp(span, size)).result
    return _put(block, arith.AddiOp(lb, _put(block, arith.MuliOp(blocks, size)).result)).result


def _put(block: Block, op: _Op) -> _Op:
    block.add_op(op)
    return op


def _clone_into(block: Block, ops: Sequence[Operation], env: Env) -> None:
    """Clone `ops` at the end of `block`, scalars mapped by `env` (which learns theirs)."""
    mapper = {k: v for k, v in env.items() if isinstance(v, SSAValue)}
    for op in ops:
        _put(block, op.clone(value_mapper=mapper))
    env.update(mapper)


class _Widen:
    """Ops of the nest cloned for each row and, along the columns, as U vectors."""

    def __init__(self, nest: _Nest, j0: SSAValue, block: Block) -> None:
        self.nest = nest
        self.kind = VectorType(nest.element, [nest.lanes])
        self.block = block
        index = IndexType()
        self.columns: list[SSAValue] = []
        for u in range(nest.unroll):
            offset = _put(block, arith.ConstantOp.from_int_and_width(u * nest.lanes, index))
            self.columns.append(_put(block, arith.AddiOp(j0, offset.result)).result)

    def memory_kernel(self, envs: list[Env]) -> None:
        nest = self.nest
        load = nest.acc_load
        assert load is not None
        envs = [dict(env) for env in envs]
        for env in envs:
            self._op(load, env)
        inits = [v for env in envs for v in cast(Lanes, env[load.res])]
        loop_body = Block(arg_types=[IndexType(), *(self.kind for _ in inits)])
        self.block, outer = loop_body, self.block
        accs = iter(loop_body.args[1:])
        for env in envs:
            env[_iv(nest.red)] = loop_body.args[0]
            env[load.res] = tuple(next(accs) for _ in range(nest.unroll))
        for op in _body_ops(nest.cols):
            if op is load or op is nest.out:
                continue
            for env in envs:
                self._op(op, env)
        yielded = [v for env in envs for v in self._lanes(nest.out.value, env)]
        _put(loop_body, scf.YieldOp(*yielded))
        self.block = outer
        red = nest.red
        loop = _put(
            outer,
            scf.ForOp(
                _scalar(red.lb, envs[0]),
                _scalar(red.ub, envs[0]),
                red.step,
                inits,
                Region(loop_body),
            ),  # fmt: skip
        )
        results = iter(loop.results)
        for env in envs:
            env[nest.out.value] = tuple(next(results) for _ in range(nest.unroll))
            self._op(nest.out, env)

    def carried_kernel(self, envs: list[Env]) -> None:
        nest = self.nest
        envs = [dict(env) for env in envs]
        for op in _body_ops(nest.cols):
            if op is nest.red:
                self._reduction(envs)
                continue
            for env in envs:
                self._op(op, env)

    def _reduction(self, envs: list[Env]) -> None:
        red = self.nest.red
        unroll = self.nest.unroll
        inits = [v for env in envs for init in red.iter_args for v in self._lanes(init, env)]
        loop_body = Block(arg_types=[IndexType(), *(self.kind for _ in inits)])
        self.block, outer = loop_body, self.block
        accs = iter(loop_body.args[1:])
        for env in envs:
            env[_iv(red)] = loop_body.args[0]
            for arg in red.body.block.args[1:]:
                env[arg] = tuple(next(accs) for _ in range(unroll))
        for op in _body_ops(red):
            for env in envs:
                self._op(op, env)
        end = red.body.block.last_op
        assert isinstance(end, scf.YieldOp)
        yielded = [v for env in envs for value in end.operands for v in self._lanes(value, env)]
        _put(loop_body, scf.YieldOp(*yielded))
        self.block = outer
        loop = _put(
            outer,
            scf.ForOp(
                _scalar(red.lb, envs[0]),
                _scalar(red.ub, envs[0]),
                red.step,
                inits,
                Region(loop_body),
            ),  # fmt: skip
        )
        results = iter(loop.results)
        for env in envs:
            for result in red.results:
                env[result] = tuple(next(results) for _ in range(unroll))

    def _op(self, op: Operation, env: Env) -> None:
        j = _iv(self.nest.cols)
        if isinstance(op, memref.LoadOp) and op.indices and op.indices[-1] is j:
            env[op.res] = tuple(
                _put(
                    self.block,
                    vector.LoadOp(
                        op.memref, [*self._scalars(op.indices[:-1], env), col], self.kind
                    ),  # fmt: skip
                ).result
                for col in self.columns
            )
        elif isinstance(op, memref.StoreOp):
            indices = self._scalars(op.indices[:-1], env)
            for value, col in zip(self._lanes(op.value, env), self.columns):
                _put(self.block, vector.StoreOp(value, op.memref, [*indices, col]))
        elif any(isinstance(env.get(v), tuple) for v in op.operands):
            assert isinstance(op, _LANEWISE)
            per_u = [self._lanes(v, env) for v in op.operands]
            env[op.results[0]] = tuple(
                _put(
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
        else:
            mapper = {k: v for k, v in env.items() if isinstance(v, SSAValue)}
            clone = _put(self.block, op.clone(value_mapper=mapper))
            env.update(zip(op.results, clone.results))

    def _scalars(self, values: Sequence[SSAValue], env: Env) -> list[SSAValue]:
        return [_scalar(v, env) for v in values]

    def _lanes(self, value: SSAValue, env: Env) -> Lanes:
        mapped = env.get(value, value)
        if isinstance(mapped, tuple):
            return mapped
        wide = _put(self.block, vector.BroadcastOp(mapped, self.kind)).vector
        return tuple(wide for _ in range(self.nest.unroll))


def _scalar(value: SSAValue, env: Env) -> SSAValue:
    mapped = env.get(value, value)
    assert isinstance(mapped, SSAValue)
    return mapped
