"""The main example: run examples/vector_add.mlir on 2 MPI ranks and check it against
the sequential reference interpreter and NumPy.

    .venv/bin/python examples/run_vector_add.py
"""

from pathlib import Path

import numpy as np

import dhir

program = Path(__file__).with_name("vector_add.mlir")
a = np.arange(20, dtype=np.int32)
b = np.full(20, 100, dtype=np.int32)
c = np.zeros(20, dtype=np.int32)

native = dhir.run(program, a, b, c, ranks=2)  # MPICH, LLVM 22, mpirun -n 2
reference = dhir.run(program, a, b, c, backend="interp")

print("a after the schedule:", native[0])
print("c after the schedule:", native[2])
same = all(np.array_equal(x, y) for x, y in zip(native, reference))
print("native (2 ranks) equals the sequential interpreter:", same)
print("and NumPy:", np.array_equal(native[0], (a + b) * 2) and np.array_equal(native[2], a + b))
