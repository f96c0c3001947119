"""Random schedules of contraction nests cut into row blocks (tasks), for
tests/unit/test_random_dist.py: `C[i, j] += alpha * A[i, k] * B[k, j]` (i-k-j or i-j-k),
`y[i] += A[i, k] * x[k]`, `linalg.matmul` on row blocks of views, `C[i, j] *= beta`, in an
optional time loop that feeds C back into A. Arrays are f64 of small static sizes; the
inputs are positive, so no sum cancels and a relaxed order of sums stays within a
relative tolerance of the exact one."""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st


@dataclass(frozen=True)
class Nest:
    kind: str  # ikj | ijk | matvec | matmul | scale | feed
    lo: int
    hi: int  # rows [lo, hi)
    rank: int | None = None


@dataclass(frozen=True)
class Contractions:
    m: int
    n: int
    k: int  # A: m x k, B: k x n, C: m x n, x: k, y: m
    nests: tuple[Nest, ...]
    steps: int  # 0: no time loop
    # > 0: the arrays have this many rows more, and the schedule's operands are contiguous
    # views of them from row %o (an argument of the entry, at most `pad`)
    pad: int = 0
    at: int = 0  # %o's value

    def shapes(self) -> dict[str, tuple[int, ...]]:
        m, n, k = self.m, self.n, self.k
        return {"A": (m, k), "B": (k, n), "C": (m, n), "x": (k,), "y": (m,)}

    def arrays(self) -> dict[str, str]:
        """What the tasks see: the arrays, or their views."""
        types = {}
        for name, shape in self.shapes().items():
            dims = "x".join(map(str, shape))
            if self.pad:
                strides = "[1]" if len(shape) == 1 else f"[{shape[1]}, 1]"
                types[name] = f"memref<{dims}xf64, strided<{strides}, offset: ?>>"
            else:
                types[name] = f"memref<{dims}xf64>"
        return types

    def whole(self, name: str) -> str:
        shape = self.shapes()[name]
        return "memref<" + "x".join(map(str, (shape[0] + self.pad, *shape[1:]))) + "xf64>"

    def inputs(self, seed: int) -> list[object]:
        rng = np.random.default_rng(seed)
        shapes = [(s[0] + self.pad, *s[1:]) for s in self.shapes().values()]
        arrays: list[object] = [rng.uniform(0.5, 1.5, shape) for shape in shapes]
        return [*arrays, np.int64(self.at)] if self.pad else arrays

    def text(self) -> str:
        types = self.arrays()
        if self.pad:
            args = ", ".join(f"%{name}_: {self.whole(name)}" for name in types) + ", %o: index"
        else:
            args = ", ".join(f"%{name}: {t}" for name, t in types.items())
        names = ", ".join(f"%{name}" for name in types)
        lines = [
            f"func.func @main({args}) {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            f"  %steps = arith.constant {max(self.steps, 1)} : index",
        ]
        for name, shape in self.shapes().items() if self.pad else ():
            at = "%o" if len(shape) == 1 else "%o, 0"
            sizes = ", ".join(map(str, shape))
            ones = ", ".join("1" for _ in shape)
            lines.append(
                f"  %{name} = memref.subview %{name}_[{at}] [{sizes}] [{ones}]"
                f" : {self.whole(name)} to {types[name]}"
            )
        if self.steps:
            lines.append("  scf.for %t = %c0 to %steps step %c1 {")
        lines += [f"  dhir.schedule {names} {{", '    %cpu = dhir.target {kind = "cpu"}']
        for s, nest in enumerate(self.nests):
            lines += self._task(s, nest)
        lines.append("  }")
        if self.steps:
            lines.append("  }")
        lines += ["  return", "}"]
        return "\n".join(lines) + "\n"

    def _task(self, s: int, nest: Nest) -> list[str]:
        t = self.arrays()
        used = {"ikj": "ABC", "ijk": "ABC", "matvec": "Axy", "matmul": "ABC", "scale": "C"}
        used["feed"] = "AC"
        listed = ", ".join(f"%{a}" for a in used[nest.kind])
        attrs = f" attributes {{dhir.rank = {nest.rank} : i64}}" if nest.rank is not None else ""
        head = [
            f"    %s{s} = dhir.task %cpu, {listed}{attrs} {{",
            "      %k0 = arith.constant 0 : index",
            "      %k1 = arith.constant 1 : index",
            f"      %lo = arith.constant {nest.lo} : index",
            f"      %hi = arith.constant {nest.hi} : index",
            f"      %m = arith.constant {self.m} : index",
            f"      %n = arith.constant {self.n} : index",
            f"      %kk = arith.constant {self.k} : index",
            "      %alpha = arith.constant 1.5 : f64",
            "      %beta = arith.constant 0.75 : f64",
        ]
        body: list[str]
        if nest.kind in ("ikj", "ijk"):
            outer, inner = ("%k", "%j") if nest.kind == "ikj" else ("%j", "%k")
            bound = {"%k": "%kk", "%j": "%n"}
            body = [
                "      scf.for %i = %lo to %hi step %k1 {",
                f"        scf.for {outer} = %k0 to {bound[outer]} step %k1 {{",
                f"          scf.for {inner} = %k0 to {bound[inner]} step %k1 {{",
                f"            %a = memref.load %A[%i, %k] : {t['A']}",
                f"            %b = memref.load %B[%k, %j] : {t['B']}",
                f"            %c = memref.load %C[%i, %j] : {t['C']}",
                "            %p = arith.mulf %alpha, %a : f64",
                "            %q = arith.mulf %p, %b : f64",
                "            %r = arith.addf %c, %q : f64",
                f"            memref.store %r, %C[%i, %j] : {t['C']}",
                "          }",
                "        }",
                "      }",
            ]
        elif nest.kind == "matvec":
            body = [
                "      scf.for %i = %lo to %hi step %k1 {",
                "        scf.for %k = %k0 to %kk step %k1 {",
                f"          %a = memref.load %A[%i, %k] : {t['A']}",
                f"          %v = memref.load %x[%k] : {t['x']}",
                f"          %c = memref.load %y[%i] : {t['y']}",
                "          %q = arith.mulf %a, %v : f64",
                "          %r = arith.addf %c, %q : f64",
                f"          memref.store %r, %y[%i] : {t['y']}",
                "        }",
                "      }",
            ]
        elif nest.kind == "matmul":
            rows = nest.hi - nest.lo
            a_at = "?" if self.pad else nest.lo * self.k
            c_at = "?" if self.pad else nest.lo * self.n
            a_view = f"memref<{rows}x{self.k}xf64, strided<[{self.k}, 1], offset: {a_at}>>"
            c_view = f"memref<{rows}x{self.n}xf64, strided<[{self.n}, 1], offset: {c_at}>>"
            body = [
                f"      %va = memref.subview %A[{nest.lo}, 0] [{rows}, {self.k}] [1, 1]"
                f" : {t['A']} to {a_view}",
                f"      %vc = memref.subview %C[{nest.lo}, 0] [{rows}, {self.n}] [1, 1]"
                f" : {t['C']} to {c_view}",
                f"      linalg.matmul ins(%va, %B : {a_view}, {t['B']}) outs(%vc : {c_view})",
            ]
        elif nest.kind == "scale":
            body = [
                "      scf.for %i = %lo to %hi step %k1 {",
                "        scf.for %j = %k0 to %n step %k1 {",
                f"          %c = memref.load %C[%i, %j] : {t['C']}",
                "          %r = arith.mulf %c, %beta : f64",
                f"          memref.store %r, %C[%i, %j] : {t['C']}",
                "        }",
                "      }",
            ]
        else:  # feed: A[i, k] = C[i, k mod n] * 0.25 + 0.5, rows [lo, hi)
            body = [
                "      %quarter = arith.constant 0.25 : f64",
                "      %half = arith.constant 0.5 : f64",
                "      scf.for %i = %lo to %hi step %k1 {",
                "        scf.for %k = %k0 to %kk step %k1 {",
                "          %j = arith.remui %k, %n : index",
                f"          %c = memref.load %C[%i, %j] : {t['C']}",
                "          %p = arith.mulf %c, %quarter : f64",
                "          %r = arith.addf %p, %half : f64",
                f"          memref.store %r, %A[%i, %k] : {t['A']}",
                "        }",
                "      }",
            ]
        return [*head, *body, "    }"]


@st.composite
def contractions(draw: st.DrawFn, ranks: int) -> Contractions:
    m, n, k = (draw(st.integers(2, 12)) for _ in range(3))
    nests: list[Nest] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(("ikj", "ikj", "ijk", "matvec", "matmul", "scale", "feed")))
        # the rows cut into 1-3 blocks, one task each
        cuts = sorted(draw(st.lists(st.integers(1, m - 1), max_size=2, unique=True)))
        edges = [0, *cuts, m]
        for lo, hi in zip(edges, edges[1:]):
            rank = draw(st.none() | st.integers(0, ranks - 1))
            nests.append(Nest(kind, lo, hi, rank))
    pad = draw(st.sampled_from((0, 0, 1, 3)))
    at = draw(st.integers(0, pad))
    return Contractions(m, n, k, tuple(nests), draw(st.sampled_from((0, 0, 1, 2, 3))), pad, at)
