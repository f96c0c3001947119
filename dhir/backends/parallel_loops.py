"""What neither backend runs, refused at its line before either starts: a parallel loop
(`scf.parallel`, `affine.parallel`) two of whose iterations surely touch one element,
one writing it with a plain store (dhir/analysis/overlaps.py). The interpreter runs the
iterations in order; natively they run at once on threads, and the result would depend
on their timing."""

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir.analysis.overlaps import Overlap, parallel_overlap
from dhir.dialects import affine, scf
from dhir.dialects import memref as memref_dialect
from dhir.ir.diagnostics import error_at
from dhir.ir.walk import find_ops


def check_parallel_loops(module: ModuleOp) -> None:
    """Refuse the first parallel loop whose iterations are proven to overlap."""
    for op in find_ops(module, (scf.ParallelOp, affine.ParallelOp)):
        overlap = parallel_overlap(op)
        if overlap is not None:
            raise error_at(op, _message(op, overlap))


def _message(loop: Operation, overlap: Overlap) -> str:
    name = overlap.memref.name_hint
    memref = f"%{name}" if name is not None else f"a {overlap.memref.type}"
    element = f"{memref}[{', '.join(map(str, overlap.element))}]"
    first, second = (f"({', '.join(map(str, it))})" for it in (overlap.first, overlap.second))
    what = "reads" if overlap.read else "writes"
    sequential, combine = (
        (scf.ForOp.name, scf.ReduceOp.name)
        if isinstance(loop, scf.ParallelOp)
        else (affine.ForOp.name, f'an {loop.name} reduction (reduce ("addf") ...)')
    )
    return (
        f"iterations of this {loop.name} overlap: iteration {first} writes {element}, "
        f"which iteration {second} {what} too{_where(overlap)}. Its iterations must be "
        "independent: the native backend runs them at once on threads, so the result "
        "would depend on their timing (the interpreter runs them in order). Write the loop as "
        f"{sequential} to run its iterations in order, or combine their values with "
        f"{combine} or an atomic update ({memref_dialect.AtomicRMWOp.name})"
    )


def _where(overlap: Overlap) -> str:
    """The run-time values the loop's bounds are made of, as the overlap has them."""
    if not overlap.values:
        return ""
    named = [f"%{name}" if name is not None else "a run-time value" for name, _ in overlap.values]
    return ", where " + ", ".join(
        f"{n} = {v}" for n, (_, v) in zip(named, overlap.values, strict=True)
    )
