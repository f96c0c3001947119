"""scf, affine, func and cf control flow, and the dhir ops."""

from collections.abc import Callable, Sequence
from itertools import product

from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    ReturnedValues,
    Successor,
)
from xdsl.ir import Attribute, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.ir.affine.affine_set import AffineConstraintKind

from dhir.analysis.counted_whiles import counted_bounds
from dhir.analysis.lift import Interval, Lifter
from dhir.analysis.wrap_checks import (
    WrapCheck,
    leaves,
    loop_variables,
    measured,
    region_leaves,
    verdict,
    wrap_checks,
    wrap_lifter,
)
from dhir.backends.interp.core import (
    INDEX_WIDTH,
    MAX_DEPTH,
    Returned,
    Values,
    fail,
    handles,
    register,
)
from dhir.backends.interp.external import call_external
from dhir.backends.interp.memref import load, store
from dhir.backends.interp.scalars import combine, int_width, signed, wrap
from dhir.dialects import affine, cf, func, memref, scf

# Loaded before registering: the implementations also go to dhir's subclasses.
from dhir.dialects import affine as _dhir_affine
from dhir.dialects import dhir as dhir_ops
from dhir.dialects.affine import REDUCTION_IDENTITIES
from dhir.dialects.arith import scalar_int_width
from dhir.dialects.scf import ForallOp, InParallelOp
from dhir.ir.symbols import Symbols


def eval_map(affine_map: AffineMap, operands: Sequence[int]) -> tuple[int, ...]:
    return affine_map.eval(operands[: affine_map.num_dims], operands[affine_map.num_dims :])


def _bounds(affine_map: AffineMap, operands: Sequence[int]) -> list[int]:
    # Each result in index's 64 bits, as --lower-affine computes it (arith ops that wrap)
    # before it takes their max or min.
    return [wrap(value, INDEX_WIDTH) for value in eval_map(affine_map, operands)]


def _inputs(affine_map: AffineMap) -> int:
    return affine_map.num_dims + affine_map.num_symbols


def _positive_steps(op: Operation, steps: Sequence[int]) -> None:
    if any(step <= 0 for step in steps):
        fail(op, f"has step {min(steps)}; steps must be positive")


def _counter_fits(op: Operation, type_: Attribute, lower: int, upper: int, step: int) -> None:
    # MLIR 22 leaves this undefined: its folders count trips over the integers (the
    # canonicalizer makes 100 to 127 step 31 in i8 one trip), but --convert-scf-to-cf
    # adds without overflow flags, so native code wraps and runs on.
    if lower >= upper:
        return
    top = (1 << (int_width(op, type_) - 1)) - 1
    last = lower + (upper - 1 - lower) // step * step
    if last + step > top:
        fail(
            op,
            f"counter overflows its type {type_}: {last} + step {step} > {top} "
            "(undefined in MLIR; native code would wrap around and keep looping)",
        )


_WRAPS = (
    "runs where 64-bit index arithmetic in it wraps around, which dhir's analysis of its "
    "accesses takes as exact (an access such as A[3 * i] would read elements the analysis "
    "does not expect): keep the loop's bounds where its index arithmetic stays in 64 bits"
)


def _counters_fit(
    op: Operation, lowers: Sequence[int], uppers: Sequence[int], steps: Sequence[int]
) -> None:
    # Natively a parallel loop is a nest of scf.for, outermost first: a dimension's
    # counter is checked when the dimensions outside it run at all.
    for lower, upper, step in zip(lowers, uppers, steps):
        _counter_fits(op, IndexType(), lower, upper, step)
        if lower >= upper:
            break


def _entry_values(
    interp: Interpreter, needed: Sequence[SSAValue], lifter: Lifter
) -> dict[SSAValue, int]:
    """The values of a check's leaves, as the lifter reads them."""
    sizes = [measured(key, lifter) for key in needed]
    # A size measured in the loop is its memref's, made outside: known at the entry.
    found = interp.get_values([key if s is None else s[0] for key, s in zip(needed, sizes)])
    return {
        key: signed(value, scalar_int_width(key.type) or INDEX_WIDTH)
        if size is None
        else value.shape[size[1]]
        for key, size, value in zip(needed, sizes, found, strict=True)
    }


@register
class ControlImpls(InterpreterFunctions):
    def __init__(self) -> None:
        # Callees found in a table of the module's names: the interpreter does not
        # change the module, and xDSL's lookup_symbol reads every name at every call.
        self._symbols = Symbols()
        # The loops whose entry checks that index arithmetic stays in 64 bits, found
        # once per module (dhir.analysis.wrap_checks), with the lifter that found them.
        self._wraps: dict[Operation, tuple[Lifter, dict[Operation | Region, WrapCheck]]] = {}
        self._loops: dict[Operation, Operation] = {}  # each loop's module

    def _check_wraps(
        self,
        interp: Interpreter,
        op: Operation,
        bounds: Sequence[tuple[int, int, int]],
    ) -> None:
        """Stop at `op` when its bounds (each dimension's lower, upper and positive
        step) take an expression the analysis takes as exact past 64 bits, as native
        code stops (dhir-wrap-checks); nothing when the loop does not run."""
        lifter, checks = self._table(op)
        check = checks.get(op)
        if check is None or any(lower >= upper for lower, upper, _ in bounds):
            return
        spans: dict[BlockArgument, Interval] = {}
        for variable, (lower, upper, step) in zip(loop_variables(op), bounds, strict=True):
            spans[variable] = lower, lower + (upper - 1 - lower) // step * step
        values = _entry_values(interp, leaves(check, lifter), lifter)
        if not verdict(check, spans, values, lifter):
            fail(op, _WRAPS)

    def _check_region(self, interp: Interpreter, op: Operation, region: Region) -> None:
        """Stop at `op`, a branch (`scf.if`, `affine.if`, `scf.index_switch`) about to
        run `region`, when an expression the analysis checks there leaves 64 bits at the
        values its leaves have here (dhir-wrap-checks checks the same there)."""
        lifter, checks = self._table(op)
        check = checks.get(region)
        if check is None:
            return
        values = _entry_values(interp, region_leaves(check, lifter), lifter)
        spans = {k: (v, v) for k, v in values.items() if isinstance(k, BlockArgument)}
        if not verdict(check, spans, values, lifter):
            fail(op, _WRAPS)

    def _table(self, op: Operation) -> tuple[Lifter, dict[Operation | Region, WrapCheck]]:
        """The checks of `op`'s module, by loop or region, found once (with the lifter
        that found them)."""
        if op not in self._loops:
            root = op
            while (parent := root.parent_op()) is not None:
                root = parent
            if root not in self._wraps:
                lifter = wrap_lifter()
                found = wrap_checks(root, lifter)
                self._wraps[root] = lifter, {c.region or c.loop: c for c in found}
            self._loops[op] = root
        return self._wraps[self._loops[op]]

    @handles(dhir_ops.ScheduleOp)
    def run_schedule(self, interp: Interpreter, op: dhir_ops.ScheduleOp, args: Values) -> Values:
        # The meaning of a schedule: its tasks, one by one, in program order.
        interp.run_ssacfg_region(op.body, (), "dhir.schedule")
        return ()

    @handles(dhir_ops.TaskOp)
    def run_task(self, interp: Interpreter, op: dhir_ops.TaskOp, args: Values) -> Values:
        interp.run_ssacfg_region(op.body, (), "dhir.task")
        return (None,)

    @handles(dhir_ops.TargetOp)
    def run_target(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return (None,)

    @handles(dhir_ops.YieldOp, scf.ReduceOp, scf.ReduceReturnOp, affine.YieldOp, scf.YieldOp)
    def run_return(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(args), ()

    # As xDSL's, which are keyed on xDSL's class: dhir's subclasses need them too.
    @handles(scf.IfOp)
    def run_if(self, interp: Interpreter, op: scf.IfOp, args: Values) -> Values:
        region = op.true_region if args[0] else op.false_region
        self._check_region(interp, op, region)
        return interp.run_ssacfg_region(region, (), "scf.if")

    @handles(scf.IndexSwitchOp)
    def run_index_switch(self, interp: Interpreter, op: scf.IndexSwitchOp, args: Values) -> Values:
        cases = op.cases.get_values()
        region = op.case_regions[cases.index(args[0])] if args[0] in cases else op.default_region
        self._check_region(interp, op, region)
        return interp.run_ssacfg_region(region, (), "scf.index_switch")

    @handles(scf.WhileOp)
    def run_while(self, interp: Interpreter, op: scf.WhileOp, args: Values) -> Values:
        if op in self._table(op)[1]:
            # A counted while is checked as the scf.for native code makes it.
            counted = counted_bounds(op)
            assert counted is not None  # only counted ones are checked at their entry
            (upper,) = interp.get_values([counted[0]])
            width = scalar_int_width(counted[0].type) or INDEX_WIDTH
            bounds = (signed(args[0], width), signed(upper, width), counted[1])
            self._check_wraps(interp, op, [bounds])
        values = tuple(args)
        while True:
            condition, *forwarded = interp.run_ssacfg_region(op.before_region, values, "scf.while")
            if not condition:
                return tuple(forwarded)
            values = interp.run_ssacfg_region(op.after_region, tuple(forwarded), "scf.while")

    @handles(scf.ForOp)
    def run_for(self, interp: Interpreter, op: scf.ForOp, args: Values) -> Values:
        lower, upper, step, *carried = args
        _positive_steps(op, [step])
        _counter_fits(op, op.lb.type, lower, upper, step)
        self._check_wraps(interp, op, [(lower, upper, step)])
        values = tuple(carried)
        for i in range(lower, upper, step):
            values = interp.run_ssacfg_region(op.body, (i, *values), "scf.for")
        return values

    @handles(scf.ParallelOp)
    def run_parallel(self, interp: Interpreter, op: scf.ParallelOp, args: Values) -> Values:
        # Sequentially, in lexicographic order; reductions fold from the initial values
        # in that order.
        rank = len(op.lowerBound)
        lowers, uppers, steps = args[:rank], args[rank : 2 * rank], args[2 * rank : 3 * rank]
        _positive_steps(op, steps)
        _counters_fit(op, lowers, uppers, steps)
        self._check_wraps(interp, op, list(zip(lowers, uppers, steps, strict=True)))
        results = list(args[3 * rank :])
        reduce = op.body.block.last_op
        assert isinstance(reduce, scf.ReduceOp)
        for ivs in product(*map(range, lowers, uppers, steps)):
            values = interp.run_ssacfg_region(op.body, ivs, "scf.parallel")
            for k, value in enumerate(values):
                region = reduce.reductions[k]
                (results[k],) = interp.run_ssacfg_region(region, (results[k], value), "scf.reduce")
        return tuple(results)

    @handles(ForallOp)
    def run_forall(self, interp: Interpreter, op: ForallOp, args: Values) -> Values:
        # Sequentially, in lexicographic order: a valid scf.forall gives the same
        # result in any order.
        if op.outputs:
            fail(op, "with shared_outs (tensors) is not supported by the interpreter")
        values = iter(args)
        lower, upper, step = (
            [next(values) if isinstance(v, SSAValue) else v for v in bounds]
            for bounds in op.bounds()
        )
        _positive_steps(op, step)
        _counters_fit(op, lower, upper, step)
        for ivs in product(*map(range, lower, upper, step)):
            interp.run_ssacfg_region(op.body, ivs, "scf.forall")
        return ()

    @handles(InParallelOp)
    def run_in_parallel(self, interp: Interpreter, op: Operation, args: Values) -> Returned:
        return ReturnedValues(()), ()

    @handles(scf.ExecuteRegionOp)
    def run_execute_region(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        return interp.run_ssacfg_region(op.regions[0], (), "scf.execute_region")

    @handles(affine.ForOp)
    def run_affine_for(self, interp: Interpreter, op: affine.ForOp, args: Values) -> Values:
        n_lower, n_upper = len(op.lowerBoundOperands), len(op.upperBoundOperands)
        lower = max(_bounds(op.lowerBoundMap.data, args[:n_lower]))
        upper = min(_bounds(op.upperBoundMap.data, args[n_lower : n_lower + n_upper]))
        step = op.step.value.data
        _positive_steps(op, [step])
        _counter_fits(op, IndexType(), lower, upper, step)
        self._check_wraps(interp, op, [(lower, upper, step)])
        values = tuple(args[n_lower + n_upper :])
        for i in range(lower, upper, step):
            values = interp.run_ssacfg_region(op.body, (i, *values), "affine.for")
        return values

    @handles(affine.ParallelOp)
    def run_affine_parallel(
        self, interp: Interpreter, op: affine.ParallelOp, args: Values
    ) -> Values:
        # Sequentially, in lexicographic order; each reduction folds the yielded values
        # in that order into its identity, as mlir-opt-22's --lower-affine does.
        if not isinstance(op, _dhir_affine.ParallelOp):
            fail(op, "is not dhir's affine.parallel; parse the program with dhir")
        lower_map, upper_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
        n_lower = _inputs(lower_map)
        lower_groups = op.lowerBoundsGroups.get_values()
        upper_groups = op.upperBoundsGroups.get_values()
        lowers = _grouped(_bounds(lower_map, args[:n_lower]), lower_groups, max)
        uppers = _grouped(_bounds(upper_map, args[n_lower:]), upper_groups, min)
        steps = [s.value.data for s in op.steps]
        _positive_steps(op, steps)
        _counters_fit(op, lowers, uppers, steps)
        self._check_wraps(interp, op, list(zip(lowers, uppers, steps, strict=True)))
        kinds = op.reduction_kinds()
        types = op.result_types
        results = [_reduction_identity(op, k, t) for k, t in zip(kinds, types)]
        for ivs in product(*map(range, lowers, uppers, steps)):
            values = interp.run_ssacfg_region(op.body, ivs, "affine.parallel")
            results = [combine(op, *kart) for kart in zip(kinds, results, values, types)]
        return tuple(results)

    @handles(affine.ApplyOp)
    def run_apply(self, interp: Interpreter, op: affine.ApplyOp, args: Values) -> Values:
        return (wrap(eval_map(op.map.data, args)[0], INDEX_WIDTH),)

    @handles(affine.MinOp)
    def run_affine_min(self, interp: Interpreter, op: affine.MinOp, args: Values) -> Values:
        return (min(eval_map(op.map.data, args)),)

    @handles(_dhir_affine.MaxOp)
    def run_affine_max(self, interp: Interpreter, op: _dhir_affine.MaxOp, args: Values) -> Values:
        return (max(eval_map(op.map.data, args)),)

    @handles(_dhir_affine.DelinearizeIndexOp)
    def run_delinearize(
        self, interp: Interpreter, op: _dhir_affine.DelinearizeIndexOp, args: Values
    ) -> Values:
        # The outermost result is not reduced modulo its basis entry, as MLIR lowers it.
        basis = _basis(op.static_basis.get_values(), args[1:])
        if len(op.multi_index) == len(basis):
            basis = basis[1:]
        rest, results = args[0], []
        for size in reversed(basis):
            rest, digit = divmod(rest, _positive_basis(op, size))
            results.append(digit)
        return (rest, *reversed(results))

    @handles(_dhir_affine.LinearizeIndexOp)
    def run_linearize(
        self, interp: Interpreter, op: _dhir_affine.LinearizeIndexOp, args: Values
    ) -> Values:
        indices = args[: len(op.multi_index)]
        basis = _basis(op.static_basis.get_values(), args[len(op.multi_index) :])
        strides = basis[len(basis) - len(indices) + 1 :]  # the outermost entry is unused
        return (wrap(_linear(indices, strides), INDEX_WIDTH),)

    @handles(affine.LoadOp)
    def run_affine_load(self, interp: Interpreter, op: affine.LoadOp, args: Values) -> Values:
        return (load(op, args[0], eval_map(op.map.data, args[1:])),)

    @handles(affine.StoreOp)
    def run_affine_store(self, interp: Interpreter, op: affine.StoreOp, args: Values) -> Values:
        store(op, args[1], eval_map(op.map.data, args[2:]), args[0])
        return ()

    @handles(_dhir_affine.PrefetchOp, memref.PrefetchOp)
    def run_prefetch(self, interp: Interpreter, op: Operation, args: Values) -> Values:
        # A hint to the cache: nothing to compute. Natively llvm.prefetch, which does not
        # fault even where the address is outside the memref, so neither is it checked.
        return ()

    @handles(affine.IfOp)
    def run_affine_if(self, interp: Interpreter, op: affine.IfOp, args: Values) -> Values:
        condition = op.condition.data
        dims, symbols = args[: condition.num_dims], args[condition.num_dims :]
        holds = True
        for constraint in condition.constraints:
            value = constraint.lhs.eval(dims, symbols) - constraint.rhs.eval(dims, symbols)
            if constraint.kind == AffineConstraintKind.eq:
                holds &= value == 0
            elif constraint.kind == AffineConstraintKind.ge:
                holds &= value >= 0
            else:
                holds &= value <= 0
        region = op.then_region if holds else op.else_region
        self._check_region(interp, op, region)
        return interp.run_ssacfg_region(region, (), "affine.if")

    @handles(func.CallOp)
    def run_call(self, interp: Interpreter, op: func.CallOp, args: Values) -> Values:
        callee = self._symbols.lookup(op, op.callee)
        if isinstance(callee, func.FuncOp) and callee.is_declaration:
            return call_external(interp, op, callee, args)  # from the files linked
        if not isinstance(callee, func.FuncOp):
            fail(op, f"calls {op.callee}, which the module does not define")
        try:
            return interp.run_ssacfg_region(callee.body, args, callee.sym_name.data)
        except RecursionError:
            # Turned into a Trap at the innermost call: xDSL would print the whole
            # module at every level on the way out.
            fail(op, f"nests calls deeper than the interpreter's limit of about {MAX_DEPTH}")

    @handles(cf.SwitchOp)
    def run_switch(
        self, interp: Interpreter, op: cf.SwitchOp, args: Values
    ) -> tuple[Successor, Values]:
        flag_type = op.flag.type
        if isinstance(flag_type, IndexType):
            fail(op, "on index is not supported (MLIR 22's cf.switch takes integers only)")
        width = int_width(op, flag_type)
        flag = wrap(args[0], width)
        values = op.case_values.get_values() if op.case_values is not None else ()
        operands = iter(args[1 + len(op.default_operands) :])
        segments = op.case_operand_segments.get_values()
        for value, block, count in zip(values, op.case_blocks, segments, strict=True):
            forwarded = tuple(next(operands) for _ in range(count))
            # Case values may be stored signed or unsigned: compare in the flag's width.
            if wrap(int(value), width) == flag:
                return Successor(block, forwarded), ()
        default = tuple(args[1 : 1 + len(op.default_operands)])
        return Successor(op.default_block, default), ()

    @handles(cf.AssertOp)
    def run_assert(self, interp: Interpreter, op: cf.AssertOp, args: Values) -> Values:
        if not args[0]:
            fail(op, f"failed: {op.msg.data}")
        return ()


def _reduction_identity(op: Operation, kind: str, type_: Attribute) -> float | int:
    if kind not in REDUCTION_IDENTITIES:
        fail(op, f'with the reduction "{kind}" is not supported (mlir-opt-22 cannot lower it)')
    identity = REDUCTION_IDENTITIES[kind]
    return identity if isinstance(identity, float) else wrap(identity, int_width(op, type_))


def _basis(static: Sequence[int], dynamic: Sequence[int]) -> list[int]:
    values = iter(dynamic)
    return [next(values) if size == DYNAMIC_INDEX else size for size in static]


def _positive_basis(op: Operation, size: int) -> int:
    if size <= 0:
        fail(op, f"has the basis entry {size}; entries must be positive")
    return size


def _linear(indices: Sequence[int], strides: Sequence[int]) -> int:
    """The row-major position of `indices` whose inner sizes are `strides`."""
    total = indices[0] if indices else 0
    for index, size in zip(indices[1:], strides):
        total = total * size + index
    return total


def _grouped(values: Sequence[int], groups: Sequence[int], pick: Callable[..., int]) -> list[int]:
    result, start = [], 0
    for count in groups:
        result.append(pick(values[start : start + count]))
        start += count
    return result
