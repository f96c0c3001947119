"""The edits made to mlir-translate-22's LLVM IR text before clang builds it. The build's
cache keys hold this module's source: an edit here builds every module again."""

import re

from dhir.toolchain.tools import MpiInstall

# MLIR 22 names OpenMPI's predefined reductions `ompi_mpi_<op>`; libmpi exports `ompi_mpi_op_<op>`.
_OPENMPI_OPS = re.compile(
    r"@ompi_mpi_(sum|prod|max|min|maxloc|minloc|land|band|lor|bor|lxor|bxor|replace|no_op)\b"
)
# `@main` as a symbol, or any quoted text, left as it is: the name of a location in a
# --runtime-checks message may hold "@main", and renaming it there would change the
# length its array type gives (clang refuses the module). Every quoted span is skipped
# whole, names (`@"dhir_user$calc"`) as well as strings: taking the `c"` that ends such a
# name for the start of a string skipped the text up to the next quote, `define void
# @main` in it (the link then found two `main`s).
_MAIN_SYMBOL = re.compile(r'"[^"]*"|@main(?![\w.$-])')


def patch_llvm_ir(ll: str, mpi: MpiInstall) -> str:
    # The harness's C `main` calls the entry; an MLIR function named main would clash with it.
    ll = _MAIN_SYMBOL.sub(lambda match: _renamed_main(match.group()), ll)
    return _OPENMPI_OPS.sub(r"@ompi_mpi_op_\1", ll) if mpi.name == "openmpi" else ll


def _renamed_main(text: str) -> str:
    return text if text.startswith('"') else "@dhir_mlir_main"
