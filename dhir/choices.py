"""Fixed choices users name on the command line and in the API, shared by the dialects,
the passes and the toolchain (and loaded without xDSL, for `dhir run`'s cached path)."""

# The MPI libraries dhir builds for, by the name users give (`--mpi`), with the name the
# upstream `mpi` dialect's DLTI entry takes.
MPI_IMPLEMENTATIONS = {"mpich": "MPICH", "openmpi": "OpenMPI"}

# The floating-point relaxations a whole program may be given (`--fast-math`), the
# weakest first: see dhir-fast-math.
FAST_MATH_MODES = ("none", "contract", "reassoc", "fast")
