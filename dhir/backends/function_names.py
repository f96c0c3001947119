"""The program's function names that neither backend runs as meant, and its own MPI in
tasks, refused at their line before either backend starts.

- A function the program defines under a name of dhir's own (`dhir_...`, `__dhir...`,
  `mgpu...`: its runtime, harness and GPU runtime): it stands where dhir's passes declare
  and call their own function. One it declares, other than the two dhir-check-mpi points
  host code to (HOST_RUNTIME): natively a call reached dhir's runtime, while the
  interpreter asked for a file to link.
- A declaration named as MLIR names a C interface (`_mlir_ciface_NAME`): a call passed
  the memrefs field by field to C that takes a descriptor's address (it wrote nothing, exit
  0), and beside a C-interface @NAME mlir-opt stopped ("redefinition of symbol"). One of
  OpenMP's (`omp_...`), which natively ran on threads dhir chose while the interpreter asked
  for a file to link; one under a name C reserves (`__...`, `_` and a capital):
  `__truncsfbf2` reached dhir's runtime natively, while the interpreter asked for a file.
- A declaration of `main` (natively renamed to the harness's, so the link failed) or of
  an MPI function dhir's runtime or MLIR's mpi lowering calls (one of another type stopped
  mlir-opt, a second MPI_Init MPI itself); of MPI_Wtime or MPI_Wtick of another type.
- A function named as those dhir makes of a schedule's steps (`@"main.schedule0.part0"`,
  `.group0`): the native build held two functions of that name (mlir-opt's "redefinition
  of symbol"), which the interpreter ran.
- A task that reaches, itself or through the functions it calls, dhir's runtime (a
  declaration of a `dhir_` name), MPI (a declaration of `MPI_...`, `PMPI_...`, `MPIX_...`
  other than the clock's, MPI_Wtime and MPI_Wtick) or an op of the mpi dialect. dhir
  places each task on one rank and does the program's communication itself: natively
  tasks using `mpi.comm_rank` stored the ranks they were placed on (exit 0), one calling
  `MPI_Barrier` waited for ranks that never came (the run hung until --timeout); the
  interpreter has neither. Host code outside schedules, which every rank runs alike,
  may call them (natively: dhir-check-mpi points `mpi.barrier` to `dhir_rt_barrier`).
- A declaration of one of C's functions with hidden state (HIDDEN_STATE: rand, random,
  ...) that a task reaches: each rank (each process) keeps its own, so natively two tasks
  on two ranks drew rand's first number, where the interpreter drew the first and second.
- A function of the program that linked code (an object file, a static or shared
  library) calls back: the native build renames the program's functions (dhir-user-names),
  so the link failed with "undefined reference to `twice'", and the interpreter with
  "undefined symbol: twice".
"""

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dhir.dialects import func
from dhir.dialects.dhir import TaskOp
from dhir.dialects.mpi import MPI
from dhir.ir.calls import callers_of, through_callers
from dhir.ir.diagnostics import error_at, loc_of
from dhir.ir.walk import enclosing, find_among
from dhir.toolchain.linking import C_INTERFACE, C_INTERFACE_PREFIX, LinkInputs
from dhir.transforms.lower_to_mpi import STEP
from dhir.transforms.user_names import built_name

_DHIR_PREFIXES = {
    "dhir_": "dhir's runtime and harness",
    "__dhir": "dhir's runtime and harness",
    "mgpu": "dhir's GPU runtime",
}
# The runtime's functions host code may declare, with their types: dhir-check-mpi points
# mpi.comm_size and mpi.barrier, which MLIR 22 does not lower, to them. Any other
# declaration of dhir's would reach a function whose type and meaning are dhir's own (one
# dhir's passes call too: a type of the program's stopped mlir-opt).
HOST_RUNTIME = {"dhir_rt_comm_size": "() -> i32", "dhir_rt_barrier": "() -> ()"}
_MPI_PREFIXES = ("MPI_", "PMPI_", "MPIX_")
# MPI's functions that only read the clock: timing a task with them changes nothing.
MPI_CLOCKS = frozenset({"MPI_Wtime", "MPI_Wtick"})
# dhir-lower-to-mpi's functions of a schedule's steps: `<function>.schedule<S>.part<K>`
# and `.group<K>`.
_STEP_NAME = re.compile(r".*\.schedule\d+\.(part|group)\d+")
_MPI_OPS = tuple(MPI.operations)
# MPI's functions dhir's runtime (MPI_Init_thread, MPI_Finalize) or MLIR 22's lowering of
# the mpi dialect declare: a declaration of the program's of another type stopped mlir-opt
# ("'llvm.call' op operand type mismatch"), MPI_Init's a second start of MPI.
_MPI_LOWERED = frozenset(
    {
        "MPI_Init",
        "MPI_Init_thread",
        "MPI_Finalize",
        "MPI_Comm_rank",
        "MPI_Comm_split",
        "MPI_Send",
        "MPI_Recv",
        "MPI_Allreduce",
    }
)
# OpenMP's runtime: its API (`omp_...`) and the entry points compilers call (`__kmpc_...`,
# and GCC's `GOMP_...`, which LLVM's libomp defines too).
_OPENMP_PREFIXES = ("omp_", "__kmpc_", "GOMP_")
# C's functions whose results come from state the C library keeps between calls, in each
# process: its pseudo-random numbers (and strtok's place in its string).
HIDDEN_STATE = frozenset(
    {
        "rand",
        "srand",
        "random",
        "srandom",
        "initstate",
        "setstate",
        "drand48",
        "lrand48",
        "mrand48",
        "srand48",
        "seed48",
        "lcong48",
        "strtok",
    }
)
# The names C reserves for any use (C17 7.1.3): `__...` and `_` with a capital letter.
_C_RESERVED = re.compile(r"__|_[A-Z]")


def check_function_names(module: ModuleOp, ops: Sequence[Operation] | None = None) -> None:
    """Refuse the first function of `module` named as dhir's own or as a schedule's step,
    then the first task that reaches dhir's runtime, MPI or the mpi dialect; `ops`: every
    op of `module`, when walked already (`find_among`)."""
    functions = find_among(module, func.FuncOp, ops)
    for function in functions:
        why = _name_problem(function)
        if why is not None:
            raise error_at(function, why)
    _check_tasks(module, functions, find_among(module, _MPI_OPS, ops), ops)
    _check_hidden_state(module, functions, ops)


def _name_problem(function: func.FuncOp) -> str | None:
    name, declared = function.sym_name.data, function.is_declaration
    for prefix, owner in _DHIR_PREFIXES.items():
        if not name.startswith(prefix):
            continue
        if not declared:
            return (
                f"the program defines @{name}, a name reserved for {owner} "
                f"(`{prefix}...`): it would stand in for dhir's own function of that name. "
                f"Rename yours (e.g. @my_{name.lstrip('_')}), in its func.func and its calls"
            )
        if HOST_RUNTIME.get(name) != str(function.function_type):
            allowed = ", ".join(f"@{n} : {t}" for n, t in HOST_RUNTIME.items())
            return (
                f"@{name} declares a function of {owner} (`{prefix}...`), which is dhir's "
                "to call: its type and what it does are dhir's own. The program may declare "
                f"only {allowed}, in host code outside schedules (for mpi.comm_size and "
                "mpi.barrier); rename a function of yours"
            )
    if declared:
        why = _declared_problem(name, str(function.function_type))
        if why is not None:
            return why
    if STEP in function.attributes:  # dhir.run(module) after dhir.run_pipeline's lowering
        return (
            f"@{name} is a schedule's step that dhir-lower-to-mpi made: this module is "
            "lowered already, and dhir lowers a program itself as it runs or compiles it. "
            "Give the module as it was before dhir-lower-to-mpi"
        )
    if _STEP_NAME.fullmatch(name):
        return (
            f"@{name} is a name dhir gives the functions it makes of a schedule's steps "
            "(`<function>.schedule<S>.part<K>`, `.group<K>`), so the build would hold two "
            "functions of that name. Rename yours, in its func.func and its calls"
        )
    return None


def _declared_problem(name: str, type_: str) -> str | None:
    """What is wrong with declaring a function named `name` of type `type_` that dhir, not
    the program, decides the meaning of: MLIR's C-interface names, the harness's `main`,
    MPI's that dhir calls, MPI's clock of another type, OpenMP's, and those C reserves for
    its compiler and libraries; None when nothing is."""
    if name in MPI_CLOCKS and type_ != "() -> f64":
        return (
            f"@{name} is declared as {type_}, but MPI's {name} is of type () -> f64 (C's "
            "`double MPI_Wtime(void)`); declare it so"
        )
    if name.startswith(C_INTERFACE_PREFIX):
        plain = name.removeprefix(C_INTERFACE_PREFIX)
        return (
            f"@{name} declares a function under the name MLIR gives the C interface of "
            f"@{plain} (`{C_INTERFACE_PREFIX}NAME`, which takes pointers to memref "
            "descriptors), but a call of it passes each memref's fields one by one. "
            f"Declare @{plain} with attributes {{{C_INTERFACE}}} and call @{plain}: MLIR "
            f'then calls `{name}` as your C defines it (docs/commands.md, "Calling your '
            'own code")'
        )
    if name == "main":
        return (
            "@main declares the C program's entry, which in a native build is dhir's "
            "harness (it starts MPI and calls the entry function): a call of it would run "
            "the whole program again, and the interpreter has none. Call a function of "
            "the program by its own name"
        )
    if name in _MPI_LOWERED:
        return (
            f"@{name} declares a function of MPI that dhir's runtime and MLIR's lowering "
            "of the mpi dialect call themselves, with a type of their own (which depends "
            "on the MPI): dhir starts and ends MPI on every rank, and host code asks for "
            "the rest with the mpi dialect's ops (mpi.comm_rank, mpi.send, mpi.recv, "
            "mpi.allreduce, ...). Remove the declaration and its calls"
        )
    if name.startswith(_OPENMP_PREFIXES):
        return (
            f"@{name} declares a function of OpenMP's runtime: dhir runs the parallel "
            "loops of tasks on OpenMP threads of its own choosing (--threads; none where "
            "it runs a loop in order, and the interpreter runs every loop in order), so "
            "what such a function says or does is dhir's, not the program's. Remove the "
            "declaration and its calls (MPI_Wtime reads the clock)"
        )
    if _C_RESERVED.match(name):
        return (
            f"@{name} declares a function under a name C reserves for its implementation "
            "(`__...`, `_` and a capital): the compiler's helpers (libgcc's, compiler-rt's: "
            "__truncsfbf2, which dhir's runtime defines itself, __divti3, ...) and the C "
            "library's own, whose types and meaning are theirs and which the two backends "
            "do not find alike. Use the op that does it (arith.truncf, ...), or call a "
            "function of your own, linked with --link"
        )
    return None


def _check_tasks(
    module: ModuleOp,
    functions: Sequence[func.FuncOp],
    mpi_ops: Sequence[Operation],
    ops: Sequence[Operation] | None,
) -> None:
    """Refuse the first task that holds an mpi op, then the first call in a task that
    reaches a declaration of dhir's or MPI's or a function holding an mpi op."""
    for op in mpi_ops:
        if enclosing(op, TaskOp) is not None:
            raise error_at(op, _own_mpi(f"this task uses {op.name}"))
    found: dict[str, str] = {
        f.sym_name.data: f"@{f.sym_name.data}" for f in functions if _reserved_declaration(f)
    }
    for op in mpi_ops:
        holder = enclosing(op, func.FuncOp)
        if holder is not None:
            found.setdefault(holder.sym_name.data, op.name)
    if not found:  # most programs: no second look at their calls
        return
    reached = through_callers(found, callers_of(module))
    for call in find_among(module, func.CallOp, ops):
        name = call.callee.string_value()
        if name in reached and enclosing(call, TaskOp) is not None:
            why = reached[name]
            if why == f"@{name}":
                what = f"this task calls {why}"
            elif why.startswith("@"):
                what = f"this task calls {why} (through @{name})"
            else:  # an mpi op
                what = f"this task calls @{name}, which uses {why} (itself or through its calls)"
            raise error_at(call, _own_mpi(what))


def _check_hidden_state(
    module: ModuleOp, functions: Sequence[func.FuncOp], ops: Sequence[Operation] | None
) -> None:
    """Refuse, at its declaration, the first of C's functions of HIDDEN_STATE that a task
    calls, itself or through the program's functions."""
    declared = {
        f.sym_name.data: f
        for f in functions
        if f.is_declaration and f.sym_name.data in HIDDEN_STATE
    }
    if not declared:
        return
    reached = through_callers({name: name for name in declared}, callers_of(module))
    for call in find_among(module, func.CallOp, ops):
        name = call.callee.string_value()
        if name not in reached or enclosing(call, TaskOp) is None:
            continue
        state = reached[name]
        where = loc_of(call)
        at = f" at line {where.line}, column {where.col}" if where is not None else ""
        through = f" (through @{name})" if name != state else ""
        raise error_at(
            declared[state],
            f"@{state} is C's, whose results come from state the C library keeps between "
            f"calls in each process, and a task calls it{through}{at}: dhir runs tasks on "
            "several ranks (each a process with a state of its own) and on threads, so "
            "natively a task gets another number than the program run in order gives (two "
            "tasks on two ranks drew the same first number of rand), and the interpreter "
            "is held to that order. Compute the numbers in the program (a generator whose "
            "state is a memref the tasks pass on), or call it in host code outside "
            "schedules, which every rank runs alike",
        )


def _reserved_declaration(function: func.FuncOp) -> bool:
    name = function.sym_name.data
    if not function.is_declaration:
        return False
    if name.startswith(_MPI_PREFIXES):
        return name not in MPI_CLOCKS
    return name.startswith(tuple(_DHIR_PREFIXES))


def _own_mpi(what: str) -> str:
    return (
        f"{what}: a task does no communication of its own (MPI, dhir's runtime). "
        "dhir places each task on one rank and moves the memrefs between ranks itself, "
        "so there such a call acts for that rank alone (its rank number; a barrier or "
        "collective the other ranks never join: the run hangs), and the interpreter has "
        "none. Remove it and let dhir communicate: a task that reads what other tasks "
        "wrote gets it (docs/semantics.md); host code outside schedules, which every rank "
        "runs, may call it natively. Only MPI's clock (MPI_Wtime, MPI_Wtick) may be called "
        "in tasks"
    )


def check_linked_callers(module: ModuleOp, entry: str, link: LinkInputs | None) -> None:
    """Refuse a function `module` defines (other than `entry`, which keeps its name) that
    a file of `link` calls and no other defines."""
    if not link:
        return
    functions = [f for f in module.ops if isinstance(f, func.FuncOp) and not f.is_declaration]
    used = link.undefined({f.sym_name.data for f in functions} - {entry})
    for function in functions:
        name = function.sym_name.data
        if name in used:
            raise error_at(
                function,
                f"{used[name]} calls `{name}`, which is this function of the program: "
                "linked code cannot call the program's functions (the native build renames "
                f"them, @{name} to `{built_name(name)}`, so that none takes a library's "
                f"place). Write {name} in C and link it too, or pass what it computes to "
                "the linked function as an argument",
            )
