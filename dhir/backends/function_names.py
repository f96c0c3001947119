"""The program's function names that neither backend runs as meant, refused at the
`func.func` before either starts.

- A name of dhir's own (`dhir_...`, `__dhir...`, `mgpu...`: its runtime, harness and GPU
  runtime): declared, a call reached dhir's runtime directly (`@dhir_rt_comm_rank` gave the
  rank natively, while the interpreter asked for a file to link); defined, it stands where
  dhir's passes declare and call their own function.
- A name dhir gives the functions it makes of a schedule's steps
  (`@"main.schedule0.part0"`, `.group0`): the build would hold two functions of that name.
- A declaration of one of MPI's functions (`MPI_`, `PMPI_`, `MPIX_`), other than the
  clock's (`MPI_Wtime`, `MPI_Wtick`): dhir does the program's communication, and a task
  runs on one rank, so a task calling `MPI_Barrier` waited for ranks that never came (the
  run hung until --timeout). A definition with a body is the program's own function and
  is renamed for the build (dhir-user-names).
"""

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir.dialects import func
from dhir.ir.diagnostics import error_at
from dhir.ir.walk import find_among

_DHIR_PREFIXES = {
    "dhir_": "dhir's runtime and harness",
    "__dhir": "dhir's runtime and harness",
    "mgpu": "dhir's GPU runtime",
}
_MPI_PREFIXES = ("MPI_", "PMPI_", "MPIX_")
# MPI's functions that only read the clock: timing a program with them changes nothing.
MPI_CLOCKS = frozenset({"MPI_Wtime", "MPI_Wtick"})
# dhir-lower-to-mpi's functions of a schedule's steps: `<function>.schedule<S>.part<K>`
# and `.group<K>`.
_STEP_NAME = re.compile(r".*\.schedule\d+\.(part|group)\d+")


def check_function_names(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first function of `module` (declared or defined) whose name is dhir's,
    one dhir gives a schedule's steps, or (declared) one of MPI's; `ops`: every op of
    `module`, when walked already (`find_among`)."""
    for op in find_among(module, func.FuncOp, ops):
        why = _problem(op.sym_name.data, op.is_declaration)
        if why is not None:
            raise error_at(op, why)


def _problem(name: str, declared: bool) -> str | None:
    for prefix, owner in _DHIR_PREFIXES.items():
        if name.startswith(prefix):
            what = "a call would reach" if declared else "it would stand in for"
            return (
                f"@{name} is a name reserved for {owner} (`{prefix}...`): {what} dhir's "
                f"own function of that name. Rename yours (e.g. @my_{name.lstrip('_')}), "
                "in its func.func and its calls"
            )
    if _STEP_NAME.fullmatch(name):
        return (
            f"@{name} is a name dhir gives the functions it makes of a schedule's steps "
            "(`<function>.schedule<S>.part<K>`, `.group<K>`), so the build would hold two "
            "functions of that name. Rename yours, in its func.func and its calls"
        )
    if declared and name.startswith(_MPI_PREFIXES) and name not in MPI_CLOCKS:
        return (
            f"@{name} declares MPI's {name}, but a dhir program does no MPI of its own: "
            "dhir places each task on one rank and moves the memrefs between ranks itself, "
            "so a task calling MPI runs on one rank while the others never make the call "
            "(the run hangs). Remove it and let dhir communicate: tasks that read what "
            "other tasks wrote get it (docs/semantics.md). Only MPI's clock (MPI_Wtime, "
            "MPI_Wtick) may be declared"
        )
    return None
