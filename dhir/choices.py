"""Fixed choices users name on the command line and in the API, shared by the dialects,
the passes and the toolchain (and loaded without xDSL, for `dhir run`'s cached path)."""

# The MPI libraries dhir builds for, by the name users give (`--mpi`), with the name the
# upstream `mpi` dialect's DLTI entry takes.
MPI_IMPLEMENTATIONS = {"mpich": "MPICH", "openmpi": "OpenMPI"}

# The floating-point relaxations a whole program may be given (`--fast-math`), the
# weakest first: see dhir-fast-math.
FAST_MATH_MODES = ("none", "contract", "reassoc", "fast")

# The most MPI ranks a program runs on (`-n`, `ranks=`, the passes' `ranks`). Placement
# and the lowering work per rank, so a count beyond any cluster dhir targets only makes
# them run for minutes (`dhir schedule -n 100000` of a 20-element program) or overflow;
# 65536 ranks (2^16) is more than the 1,024 devices bench/simulator.py places.
MAX_RANKS = 65536

# The most OpenMP threads per rank (`--threads`, `threads=`): more than the cores of any
# node dhir targets, and below the counts at which libomp cannot start its threads
# ("OMP: System unable to allocate") or aborts on an overflowed count.
MAX_THREADS = 4096
