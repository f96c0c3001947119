"""jacobi-2d baselines beyond NumPy: mpi4py + NumPy on 2 ranks, Dask array map_overlap.

Run as a script under mpirun for the mpi4py one:
    mpirun -n 2 python bench/polybench/baselines.py TSTEPS N OUT.npz
rank 0 prints the seconds of the time loop and saves A and B to OUT.npz."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import kernels  # noqa: E402


def sweep(src: np.ndarray, dst: np.ndarray) -> None:
    """dst's rows 1..-2, columns 1..-2 from src's five-point average (in place)."""
    dst[1:-1, 1:-1] = 0.2 * (
        src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1]
    )


def mpi4py_jacobi(tsteps: int, n: int, out: Path) -> None:
    """Row halves with one halo row each side; halos exchanged with Sendrecv."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    start = kernels.inputs("jacobi-2d", {"tsteps": tsteps, "n": n})
    cuts = [n * r // size for r in range(size + 1)]
    lo, hi = cuts[rank], cuts[rank + 1]
    first, last = max(lo - 1, 0), min(hi + 1, n)  # owned rows plus halos
    a, b = start["A"][first:last].copy(), start["B"][first:last].copy()
    up = rank - 1 if rank > 0 else MPI.PROC_NULL
    down = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    top, bottom = lo - first, lo - first + (hi - lo) - 1  # local rows of the first/last owned

    def exchange(x: np.ndarray) -> None:
        if down != MPI.PROC_NULL:
            comm.Sendrecv(x[bottom], dest=down, recvbuf=x[bottom + 1], source=down)
        if up != MPI.PROC_NULL:
            comm.Sendrecv(x[top], dest=up, recvbuf=x[top - 1], source=up)

    comm.Barrier()
    begin = MPI.Wtime()
    for _ in range(tsteps):
        for src, dst in ((a, b), (b, a)):
            sweep(src, dst)
            exchange(dst)
    seconds = MPI.Wtime() - begin
    pieces = comm.gather((a[top : bottom + 1], b[top : bottom + 1]), root=0)
    if rank == 0:
        assert pieces is not None
        np.savez(
            out, A=np.concatenate([p[0] for p in pieces]), B=np.concatenate([p[1] for p in pieces])
        )
        print(f"{seconds:.9f}")


def dask_jacobi(tsteps: int, n: int, workers: int = 2) -> tuple[float, dict[str, np.ndarray]]:
    """Dask array, row halves, map_overlap with a one-row halo, threaded scheduler with
    `workers` threads; the seconds of building and computing the whole time loop."""
    import dask.array as da
    import dask.config
    from dask.base import compute

    def step(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        out = dst.copy()
        sweep(src, out)
        return out

    start = kernels.inputs("jacobi-2d", {"tsteps": tsteps, "n": n})
    chunks = ((n + 1) // 2, n)
    begin = time.perf_counter()
    a = da.from_array(start["A"], chunks=chunks)  # pyright: ignore[reportArgumentType]
    b = da.from_array(start["B"], chunks=chunks)  # pyright: ignore[reportArgumentType]
    for _ in range(tsteps):
        b = da.map_overlap(step, a, b, depth={0: 1, 1: 0}, boundary="none", dtype=np.float64)
        a = da.map_overlap(step, b, a, depth={0: 1, 1: 0}, boundary="none", dtype=np.float64)
    with dask.config.set(scheduler="threads", num_workers=workers):
        final_a, final_b = compute(a, b)
    return time.perf_counter() - begin, {"A": final_a, "B": final_b}


if __name__ == "__main__":
    mpi4py_jacobi(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
