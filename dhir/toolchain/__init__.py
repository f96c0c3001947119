"""Building lowered MLIR into MPI executables (LLVM 22, the C runtime, a generated main) and
running them under mpirun."""
