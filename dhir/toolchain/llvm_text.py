"""The edits made to mlir-translate-22's LLVM IR text before clang builds it. The build's
cache keys hold this module's source: an edit here builds every module again."""

import re

from dhir.toolchain.tools import MpiInstall

# MLIR 22 names OpenMPI's predefined reductions `ompi_mpi_<op>`; libmpi exports `ompi_mpi_op_<op>`.
_OPENMPI_OPS = re.compile(
    r"@ompi_mpi_(sum|prod|max|min|maxloc|minloc|land|band|lor|bor|lxor|bxor|replace|no_op)\b"
)
# `@main` as a symbol, or a string constant, left as it is: the name of a location in a
# --runtime-checks message may hold "@main", and renaming it there would change the
# length its array type gives (clang refuses the module).
_MAIN_SYMBOL = re.compile(r'c"[^"]*"|@main(?![\w.$-])')


def patch_llvm_ir(ll: str, mpi: MpiInstall) -> str:
    # The harness's C `main` calls the entry; an MLIR function named main would clash with it.
    ll = _MAIN_SYMBOL.sub(lambda match: _renamed_main(match.group()), ll)
    return _OPENMPI_OPS.sub(r"@ompi_mpi_op_\1", ll) if mpi.name == "openmpi" else ll


def _renamed_main(text: str) -> str:
    return text if text.startswith('c"') else "@dhir_mlir_main"
