"""Tasks calling the user's own code and a library: examples/link/rows.mlir hands row
blocks of an array to a C kernel (examples/link/rows.c, compiled here), and
examples/link/dgemm.mlir calls OpenBLAS's cblas_dgemm from the library NumPy's wheel
ships. Each runs natively on 1 to 3 ranks and in the interpreter, checked against NumPy.

    .venv/bin/python examples/run_link.py
"""

import subprocess
import tempfile
from pathlib import Path

import numpy as np

import dhir

here = Path(__file__).parent / "link"
folder = Path(tempfile.mkdtemp(prefix="dhir-example-"))
kernel = folder / "rows.o"
subprocess.run(["clang-22", "-O2", "-fPIC", "-c", here / "rows.c", "-o", kernel], check=True)
openblas = sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("libscipy_openblas*.so"))

rng = np.random.default_rng(0)
a = rng.random((8, 16))
a_left, b_left = rng.random((32, 32)), rng.random((32, 32))
cases = [("rows.mlir", [a], [kernel], [a / a.sum(axis=1, keepdims=True)])]
if openblas:
    c = np.zeros((32, 32))
    cases.append(
        ("dgemm.mlir", [a_left, b_left, c], openblas[:1], [a_left, b_left, a_left @ b_left])
    )
else:
    print("NumPy's wheel ships no OpenBLAS here: dgemm.mlir skipped")

for name, inputs, link, want in cases:
    reference = dhir.run(here / name, *inputs, backend="interp", link=link)
    close = all(np.allclose(x, y) for x, y in zip(reference, want))
    print(f"{name}: the interpreter equals NumPy (within rounding): {close}")
    for ranks in (1, 2, 3):
        native = dhir.run(here / name, *inputs, ranks=ranks, link=link)
        same = all(np.array_equal(x, y) for x, y in zip(native, reference))
        print(f"{name}: native on {ranks} rank(s) equals the interpreter bit for bit: {same}")
