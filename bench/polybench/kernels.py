"""PolyBench/C 4.2.1 kernels written for dhir by hand, f64: each kernel's loops (see
loops.py), its inputs from PolyBench's init formulas, and a vectorised NumPy reference.

`program(name, size, tasks)` gives the dhir MLIR text: every statement of the kernel
becomes `tasks` tasks over row blocks of its output; the stencils run a time loop around
one schedule per time step. `SIZES` holds the suite's MEDIUM and LARGE datasets."""

from collections.abc import Callable

import numpy as np
from loops import (
    Bin,
    Kernel,
    Node,
    Num,
    Statement,
    add,
    at,
    loop,
    mul,
    store,
    sub,
    to_c,
    to_mlir,
    to_plain_mlir,
)

# PolyBench/C 4.2.1's datasets (the kernels' .h files).
SIZES: dict[str, dict[str, dict[str, int]]] = {
    "gemm": {
        "MEDIUM": {"ni": 200, "nj": 220, "nk": 240},
        "LARGE": {"ni": 1000, "nj": 1100, "nk": 1200},
    },
    "2mm": {
        "MEDIUM": {"ni": 180, "nj": 190, "nk": 210, "nl": 220},
        "LARGE": {"ni": 800, "nj": 900, "nk": 1100, "nl": 1200},
    },
    "3mm": {
        "MEDIUM": {"ni": 180, "nj": 190, "nk": 200, "nl": 210, "nm": 220},
        "LARGE": {"ni": 800, "nj": 900, "nk": 1000, "nl": 1100, "nm": 1200},
    },
    "syr2k": {"MEDIUM": {"m": 200, "n": 240}, "LARGE": {"m": 1000, "n": 1200}},
    "atax": {"MEDIUM": {"m": 390, "n": 410}, "LARGE": {"m": 1900, "n": 2100}},
    "mvt": {"MEDIUM": {"n": 400}, "LARGE": {"n": 2000}},
    "jacobi-2d": {"MEDIUM": {"tsteps": 100, "n": 250}, "LARGE": {"tsteps": 500, "n": 1300}},
    "heat-3d": {"MEDIUM": {"tsteps": 100, "n": 40}, "LARGE": {"tsteps": 500, "n": 120}},
    "fdtd-2d": {
        "MEDIUM": {"tmax": 100, "nx": 200, "ny": 240},
        "LARGE": {"tmax": 500, "nx": 1000, "ny": 1200},
    },
}

ALPHA, BETA = 1.5, 1.2
# dhir's and C's sums run in another order than NumPy's BLAS: equal up to rounding.
RTOL = 1e-10


class Mismatch(SystemExit):
    pass


def check(what: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """A loud failure when `got` differs from NumPy's `want` beyond rounding."""
    for name, expected in want.items():
        actual = got[name]
        scale = float(np.max(np.abs(expected))) or 1.0
        if actual.shape != expected.shape or not np.allclose(
            actual, expected, rtol=RTOL, atol=RTOL * scale
        ):
            worst = float(np.max(np.abs(actual - expected)))
            raise Mismatch(f"MISMATCH: {what}: {name} differs from NumPy (max |diff| {worst:g})")


def _grid(*shape: int) -> tuple[np.ndarray, ...]:
    return tuple(np.indices(shape, dtype=np.int64))


def gemm(ni: int, nj: int, nk: int) -> Kernel:
    i, j = _grid(ni, nj)
    c = ((i * j + 1) % ni) / ni
    i, k = _grid(ni, nk)
    a = (i * (k + 1) % nk) / nk
    k, j = _grid(nk, nj)
    b = (k * (j + 2) % nj) / nj

    def body(lo: int, hi: int) -> list[Node]:
        return [
            loop(
                "i",
                lo,
                hi,
                loop("j", 0, nj, store("C", ("i", "j"), mul(at("C", "i", "j"), BETA))),
                loop(
                    "k",
                    0,
                    nk,
                    loop(
                        "j",
                        0,
                        nj,
                        store(
                            "C",
                            ("i", "j"),
                            add(
                                at("C", "i", "j"),
                                mul(mul(ALPHA, at("A", "i", "k")), at("B", "k", "j")),
                            ),
                        ),
                    ),
                ),
            )
        ]

    return Kernel(
        "gemm",
        {"C": (ni, nj), "A": (ni, nk), "B": (nk, nj)},
        ["C"],
        [Statement(0, ni, body)],
        inputs={"C": c, "A": a, "B": b},
    )


def _matmul_rows(out: str, left: str, right: str, inner: int, cols: int, scale: float = 1.0):
    """out[i, :] = scale * sum_k left[i, k] * right[k, :] for rows [lo, hi), i-k-j order."""

    def body(lo: int, hi: int) -> list[Node]:
        product = mul(at(left, "i", "k"), at(right, "k", "j"))
        if scale != 1.0:
            product = mul(mul(scale, at(left, "i", "k")), at(right, "k", "j"))
        return [
            loop(
                "i",
                lo,
                hi,
                loop("j", 0, cols, store(out, ("i", "j"), Num(0.0))),
                loop(
                    "k",
                    0,
                    inner,
                    loop("j", 0, cols, store(out, ("i", "j"), add(at(out, "i", "j"), product))),
                ),
            )
        ]

    return body


def mm2(ni: int, nj: int, nk: int, nl: int) -> Kernel:
    i, k = _grid(ni, nk)
    a = ((i * k + 1) % ni) / ni
    k, j = _grid(nk, nj)
    b = (k * (j + 1) % nj) / nj
    j, col = _grid(nj, nl)
    c = ((j * (col + 3) + 1) % nl) / nl
    i, col = _grid(ni, nl)
    d = (i * (col + 2) % nk) / nk

    def second(lo: int, hi: int) -> list[Node]:
        return [
            loop(
                "i",
                lo,
                hi,
                loop("l", 0, nl, store("D", ("i", "l"), mul(at("D", "i", "l"), BETA))),
                loop(
                    "j",
                    0,
                    nj,
                    loop(
                        "l",
                        0,
                        nl,
                        store(
                            "D",
                            ("i", "l"),
                            add(at("D", "i", "l"), mul(at("tmp", "i", "j"), at("C", "j", "l"))),
                        ),
                    ),
                ),
            )
        ]

    return Kernel(
        "2mm",
        {"tmp": (ni, nj), "A": (ni, nk), "B": (nk, nj), "C": (nj, nl), "D": (ni, nl)},
        ["tmp", "D"],
        [Statement(0, ni, _matmul_rows("tmp", "A", "B", nk, nj, ALPHA)), Statement(0, ni, second)],
        inputs={"tmp": np.zeros((ni, nj)), "A": a, "B": b, "C": c, "D": d},
    )


def mm3(ni: int, nj: int, nk: int, nl: int, nm: int) -> Kernel:
    i, k = _grid(ni, nk)
    a = ((i * k + 1) % ni) / (5 * ni)
    k, j = _grid(nk, nj)
    b = ((k * (j + 1) + 2) % nj) / (5 * nj)
    j, m = _grid(nj, nm)
    c = (j * (m + 3) % nl) / (5 * nl)
    m, col = _grid(nm, nl)
    d = ((m * (col + 2) + 2) % nk) / (5 * nk)
    return Kernel(
        "3mm",
        {
            "E": (ni, nj),
            "A": (ni, nk),
            "B": (nk, nj),
            "F": (nj, nl),
            "C": (nj, nm),
            "D": (nm, nl),
            "G": (ni, nl),
        },
        ["E", "F", "G"],
        [
            Statement(0, ni, _matmul_rows("E", "A", "B", nk, nj)),
            Statement(0, nj, _matmul_rows("F", "C", "D", nm, nl)),
            Statement(0, ni, _matmul_rows("G", "E", "F", nj, nl)),
        ],
        inputs={
            "E": np.zeros((ni, nj)),
            "A": a,
            "B": b,
            "F": np.zeros((nj, nl)),
            "C": c,
            "D": d,
            "G": np.zeros((ni, nl)),
        },
    )


def syr2k(m: int, n: int) -> Kernel:
    i, j = _grid(n, m)
    a = ((i * j + 1) % n) / n
    b = ((i * j + 2) % m) / m
    i, j = _grid(n, n)
    c = ((i * j + 3) % n) / m

    def body(lo: int, hi: int) -> list[Node]:
        update = add(
            mul(mul(at("A", "j", "k"), ALPHA), at("B", "i", "k")),
            mul(mul(at("B", "j", "k"), ALPHA), at("A", "i", "k")),
        )
        return [
            loop(
                "i",
                lo,
                hi,
                loop("j", 0, "i+1", store("C", ("i", "j"), mul(at("C", "i", "j"), BETA))),
                loop(
                    "k",
                    0,
                    m,
                    loop("j", 0, "i+1", store("C", ("i", "j"), add(at("C", "i", "j"), update))),
                ),
            )
        ]

    return Kernel(
        "syr2k",
        {"C": (n, n), "A": (n, m), "B": (n, m)},
        ["C"],
        [Statement(0, n, body)],
        inputs={"C": c, "A": a, "B": b},
    )


def atax(m: int, n: int) -> Kernel:
    x = 1 + np.arange(n) / n
    i, j = _grid(m, n)
    a = ((i + j) % n) / (5 * m)

    def first(lo: int, hi: int) -> list[Node]:
        return [
            loop(
                "i",
                lo,
                hi,
                store("tmp", ("i",), Num(0.0)),
                loop(
                    "j",
                    0,
                    n,
                    store("tmp", ("i",), add(at("tmp", "i"), mul(at("A", "i", "j"), at("x", "j")))),
                ),
            )
        ]

    def second(lo: int, hi: int) -> list[Node]:
        return [
            loop("j", lo, hi, store("y", ("j",), Num(0.0))),
            loop(
                "i",
                0,
                m,
                loop(
                    "j",
                    lo,
                    hi,
                    store("y", ("j",), add(at("y", "j"), mul(at("A", "i", "j"), at("tmp", "i")))),
                ),
            ),
        ]

    return Kernel(
        "atax",
        {"A": (m, n), "x": (n,), "y": (n,), "tmp": (m,)},
        ["y", "tmp"],
        [Statement(0, m, first), Statement(0, n, second)],
        inputs={"A": a, "x": x, "y": np.zeros(n), "tmp": np.zeros(m)},
    )


def mvt(n: int) -> Kernel:
    r = np.arange(n)
    i, j = _grid(n, n)

    def first(lo: int, hi: int) -> list[Node]:
        return [
            loop(
                "i",
                lo,
                hi,
                loop(
                    "j",
                    0,
                    n,
                    store("x1", ("i",), add(at("x1", "i"), mul(at("A", "i", "j"), at("y_1", "j")))),
                ),
            )
        ]

    def second(lo: int, hi: int) -> list[Node]:
        return [
            loop(
                "j",
                0,
                n,
                loop(
                    "i",
                    lo,
                    hi,
                    store("x2", ("i",), add(at("x2", "i"), mul(at("A", "j", "i"), at("y_2", "j")))),
                ),
            )
        ]

    return Kernel(
        "mvt",
        {"x1": (n,), "x2": (n,), "y_1": (n,), "y_2": (n,), "A": (n, n)},
        ["x1", "x2"],
        [Statement(0, n, first), Statement(0, n, second)],
        inputs={
            "x1": (r % n) / n,
            "x2": ((r + 1) % n) / n,
            "y_1": ((r + 3) % n) / n,
            "y_2": ((r + 4) % n) / n,
            "A": (i * j % n) / n,
        },
    )


def _five_point(dst: str, src: str, n: int) -> Callable[[int, int], list[Node]]:
    def body(lo: int, hi: int) -> list[Node]:
        total = add(
            add(
                add(add(at(src, "i", "j"), at(src, "i", "j-1")), at(src, "i", "j+1")),
                at(src, "i+1", "j"),
            ),
            at(src, "i-1", "j"),
        )
        return [loop("i", lo, hi, loop("j", 1, n - 1, store(dst, ("i", "j"), mul(0.2, total))))]

    return body


def jacobi_2d(tsteps: int, n: int, rows: int | None = None) -> Kernel:
    """PolyBench's jacobi-2d; with `rows`, on that many rows of n (a part of the grid)."""
    rows = rows or n
    i, j = _grid(rows, n)
    return Kernel(
        "jacobi-2d",
        {"A": (rows, n), "B": (rows, n)},
        ["A", "B"],
        [
            Statement(1, rows - 1, _five_point("B", "A", n)),
            Statement(1, rows - 1, _five_point("A", "B", n)),
        ],
        steps=tsteps,
        inputs={"A": (i * (j + 2) + 2) / n, "B": (i * (j + 3) + 3) / n},
    )


def _heat(dst: str, src: str, n: int) -> Callable[[int, int], list[Node]]:
    def axis(plus: tuple[str, str, str], minus: tuple[str, str, str]) -> Bin:
        centre = mul(2.0, at(src, "i", "j", "k"))
        return mul(0.125, add(sub(at(src, *plus), centre), at(src, *minus)))

    def body(lo: int, hi: int) -> list[Node]:
        value = add(
            add(
                add(
                    axis(("i+1", "j", "k"), ("i-1", "j", "k")),
                    axis(("i", "j+1", "k"), ("i", "j-1", "k")),
                ),
                axis(("i", "j", "k+1"), ("i", "j", "k-1")),
            ),
            at(src, "i", "j", "k"),
        )
        return [
            loop(
                "i",
                lo,
                hi,
                loop("j", 1, n - 1, loop("k", 1, n - 1, store(dst, ("i", "j", "k"), value))),
            )
        ]

    return body


def heat_3d(tsteps: int, n: int, rows: int | None = None) -> Kernel:
    """PolyBench's heat-3d; with `rows`, on that many planes of n x n (a part of the grid)."""
    rows = rows or n
    i, j, k = _grid(rows, n, n)
    start = (i + j + (n - k)) * 10 / n
    return Kernel(
        "heat-3d",
        {"A": (rows, n, n), "B": (rows, n, n)},
        ["A", "B"],
        [
            Statement(1, rows - 1, _heat("B", "A", n)),
            Statement(1, rows - 1, _heat("A", "B", n)),
        ],
        steps=tsteps,
        inputs={"A": start, "B": start.copy()},
    )


def fdtd_2d(tmax: int, nx: int, ny: int) -> Kernel:
    i, j = _grid(nx, ny)

    def ey_edge(lo: int, hi: int) -> list[Node]:
        return [loop("j", 0, ny, store("ey", (0, "j"), at("fict", "t")))]

    def ey(lo: int, hi: int) -> list[Node]:
        change = mul(0.5, sub(at("hz", "i", "j"), at("hz", "i-1", "j")))
        return [
            loop(
                "i",
                lo,
                hi,
                loop("j", 0, ny, store("ey", ("i", "j"), sub(at("ey", "i", "j"), change))),
            )
        ]

    def ex(lo: int, hi: int) -> list[Node]:
        change = mul(0.5, sub(at("hz", "i", "j"), at("hz", "i", "j-1")))
        return [
            loop(
                "i",
                lo,
                hi,
                loop("j", 1, ny, store("ex", ("i", "j"), sub(at("ex", "i", "j"), change))),
            )
        ]

    def hz(lo: int, hi: int) -> list[Node]:
        curl = sub(
            add(sub(at("ex", "i", "j+1"), at("ex", "i", "j")), at("ey", "i+1", "j")),
            at("ey", "i", "j"),
        )
        return [
            loop(
                "i",
                lo,
                hi,
                loop(
                    "j", 0, ny - 1, store("hz", ("i", "j"), sub(at("hz", "i", "j"), mul(0.7, curl)))
                ),
            )
        ]

    return Kernel(
        "fdtd-2d",
        {"ex": (nx, ny), "ey": (nx, ny), "hz": (nx, ny), "fict": (tmax,)},
        ["ex", "ey", "hz"],
        [
            Statement(0, 1, ey_edge),
            Statement(1, nx, ey),
            Statement(0, nx, ex),
            Statement(0, nx - 1, hz),
        ],
        steps=tmax,
        inputs={
            "ex": i * (j + 1) / nx,
            "ey": i * (j + 2) / ny,
            "hz": i * (j + 3) / nx,
            "fict": np.arange(tmax, dtype=np.float64),
        },
    )


BUILDERS: dict[str, Callable[..., Kernel]] = {
    "gemm": gemm,
    "2mm": mm2,
    "3mm": mm3,
    "syr2k": syr2k,
    "atax": atax,
    "mvt": mvt,
    "jacobi-2d": jacobi_2d,
    "heat-3d": heat_3d,
    "fdtd-2d": fdtd_2d,
}


def kernel(name: str, sizes: dict[str, int]) -> Kernel:
    return BUILDERS[name](**sizes)


def program(name: str, sizes: dict[str, int], tasks: int, timed: bool = True) -> str:
    """The kernel as dhir MLIR text with `tasks` row-block tasks per statement."""
    return to_mlir(kernel(name, sizes), tasks, timed)


def plain_program(name: str, sizes: dict[str, int], timed: bool = True) -> str:
    """The kernel as plain MLIR (no dhir ops): one loop nest per statement over all its
    rows, as a C front end would emit it; same arguments, inputs and timing as `program`."""
    return to_plain_mlir(kernel(name, sizes), timed)


def c_program(name: str, sizes: dict[str, int], rows: tuple[int, int] | None = None) -> str:
    return to_c(kernel(name, sizes), rows)


def inputs(name: str, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Fresh float64 inputs, in argument order."""
    return {
        k: np.ascontiguousarray(v, dtype=np.float64) for k, v in kernel(name, sizes).inputs.items()
    }


# NumPy references (vectorised), each returning the kernel's outputs by name.


def _ref_gemm(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"C": BETA * v["C"] + ALPHA * v["A"] @ v["B"]}


def _ref_2mm(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    tmp = ALPHA * v["A"] @ v["B"]
    return {"tmp": tmp, "D": BETA * v["D"] + tmp @ v["C"]}


def _ref_3mm(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    e, f = v["A"] @ v["B"], v["C"] @ v["D"]
    return {"E": e, "F": f, "G": e @ f}


def _ref_syr2k(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a, b, c = v["A"], v["B"], v["C"]
    full = BETA * c + ALPHA * (b @ a.T + a @ b.T)
    return {"C": np.where(np.tri(len(c), dtype=bool), full, c)}


def _ref_atax(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    tmp = v["A"] @ v["x"]
    return {"tmp": tmp, "y": v["A"].T @ tmp}


def _ref_mvt(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"x1": v["x1"] + v["A"] @ v["y_1"], "x2": v["x2"] + v["A"].T @ v["y_2"]}


def _ref_jacobi_2d(v: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
    a, b = v["A"].copy(), v["B"].copy()
    for _ in range(steps):
        for src, dst in ((a, b), (b, a)):
            dst[1:-1, 1:-1] = 0.2 * (
                src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1]
            )
    return {"A": a, "B": b}


def _ref_heat_3d(v: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
    a, b = v["A"].copy(), v["B"].copy()
    inner = (slice(1, -1),) * 3
    for _ in range(steps):
        for src, dst in ((a, b), (b, a)):
            c = src[inner]
            dst[inner] = (
                0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * c + src[:-2, 1:-1, 1:-1])
                + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * c + src[1:-1, :-2, 1:-1])
                + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * c + src[1:-1, 1:-1, :-2])
                + c
            )
    return {"A": a, "B": b}


def _ref_fdtd_2d(v: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
    ex, ey, hz = v["ex"].copy(), v["ey"].copy(), v["hz"].copy()
    for t in range(steps):
        ey[0, :] = v["fict"][t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"ex": ex, "ey": ey, "hz": hz}


def reference(
    name: str, sizes: dict[str, int], values: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The kernel's outputs computed by NumPy from `values` (not modified)."""
    steps = sizes.get("tsteps", sizes.get("tmax", 0))
    if name == "jacobi-2d":
        return _ref_jacobi_2d(values, steps)
    if name == "heat-3d":
        return _ref_heat_3d(values, steps)
    if name == "fdtd-2d":
        return _ref_fdtd_2d(values, steps)
    table = {
        "gemm": _ref_gemm,
        "2mm": _ref_2mm,
        "3mm": _ref_3mm,
        "syr2k": _ref_syr2k,
        "atax": _ref_atax,
        "mvt": _ref_mvt,
    }
    return table[name](values)


def half_rows(name: str, sizes: dict[str, int]) -> dict[str, int]:
    """A stencil's sizes for what one of 2 ranks holds: half the rows and one halo row."""
    if name == "fdtd-2d":
        return {**sizes, "nx": sizes["nx"] // 2 + 1}
    return {**sizes, "rows": sizes["n"] // 2 + 1}


def tiny_sizes(name: str) -> dict[str, int]:
    """Small sizes for tests: every dimension a few elements, 3 time steps."""
    small = {"tsteps": 3, "tmax": 3}
    return {key: small.get(key, 6 + i) for i, key in enumerate(SIZES[name]["MEDIUM"])}
