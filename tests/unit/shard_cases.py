"""The cases of MLIR's own shard tests (mlir/test/Dialect/Shard: partition.mlir and
resharding-partition.mlir) as programs dhir runs: upstream's case names, shardings and
shapes, our own text. Upstream checks the partitioned IR; tests/unit/test_shard_cases.py
runs each on every grid size its shapes allow, against the function without annotations.

Where upstream uses `tosa` ops, which dhir does not take, the same elementwise operation
is written as `linalg.generic`. `GRID` is the grid size of the run.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Case:
    """A program, its inputs' shapes and dtypes, the grid sizes it runs on, and where
    dhir refuses it, a fragment of its message (and then it runs on none)."""

    text: str
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    # Upstream's shapes (2, 6, 10 x 14, 3 x 14) do not divide over 4 devices: on 4 ranks
    # dhir runs those as the function without shardings (with a warning).
    grids: tuple[int, ...] = (2, 4)
    refused: str | None = None
    # Where the interpreter would take minutes: NumPy's result, compared within `tolerance`.
    oracle: Callable[..., np.ndarray] | None = None
    tolerance: float = 0.0  # of the result's largest magnitude

    def arrays(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out: list[np.ndarray] = []
        for shape, dtype in self.inputs:
            if np.dtype(dtype).kind == "f":
                out.append((rng.random(shape) * 4 - 2).astype(dtype))
            else:
                out.append(rng.integers(-100, 100, shape).astype(dtype))
        return out


ABS_I8 = """
  %e{out} = tensor.empty() : tensor<{shape}xi8>
  %{out} = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                            iterator_types = ["parallel"]}}
      ins(%{arg} : tensor<{shape}xi8>) outs(%e{out} : tensor<{shape}xi8>) {{
    ^bb0(%v{out}: i8, %o{out}: i8):
      %zero{out} = arith.constant 0 : i8
      %minus{out} = arith.subi %zero{out}, %v{out} : i8
      %below{out} = arith.cmpi slt, %v{out}, %zero{out} : i8
      %a{out} = arith.select %below{out}, %minus{out}, %v{out} : i8
      linalg.yield %a{out} : i8
  }} -> tensor<{shape}xi8>
"""


def abs_i8(out: str, arg: str, shape: str = "2") -> str:
    return ABS_I8.format(out=out, arg=arg, shape=shape)


def unary_f32(out: str, arg: str, body: str, shape: str = "8x16") -> str:
    """`out` = body elementwise on a 2-D tensor<{shape}xf32>: `body` computes %y{out} from
    %v{out} (`{out}` in it stands for `out`)."""
    body = body.replace("{out}", out)
    t = f"tensor<{shape}xf32>"
    return f"""
  %e{out} = tensor.empty() : {t}
  %{out} = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                             affine_map<(d0, d1) -> (d0, d1)>],
                            iterator_types = ["parallel", "parallel"]}}
      ins(%{arg} : {t}) outs(%e{out} : {t}) {{
    ^bb0(%v{out}: f32, %o{out}: f32):
{body}
      linalg.yield %y{out} : f32
  }} -> {t}
"""


SIGMOID = """      %one{out} = arith.constant 1.0 : f32
      %minus{out} = arith.negf %v{out} : f32
      %exp{out} = math.exp %minus{out} : f32
      %down{out} = arith.addf %one{out}, %exp{out} : f32
      %y{out} = arith.divf %one{out}, %down{out} : f32"""

GRID = "shard.grid @grid(shape = GRID)\n"

CASES: dict[str, Case] = {}

# --- partition.mlir -------------------------------------------------------------------

CASES["return_sharding"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>, !shard.sharding) {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %a = shard.shard %arg0 to %s : tensor<2xf32>
  %r = shard.get_sharding %a : tensor<2xf32> -> !shard.sharding
  %b = shard.shard %a to %s annotate_for_users : tensor<2xf32>
  return %b, %r : tensor<2xf32>, !shard.sharding
}
""",
    (((2,), "float32"),),
    refused="result",
)

CASES["full_replication"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  %s0 = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %0 = shard.shard %arg0 to %s0 : tensor<2xi8>
  %s1 = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %1 = shard.shard %0 to %s1 annotate_for_users : tensor<2xi8>
  return %1 : tensor<2xi8>
}
""",
    (((2,), "int8"),),
)

CASES["sharding_triplet"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<2xf32>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<2xf32>
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %2 = shard.shard %1 to %r annotate_for_users : tensor<2xf32>
  return %2 : tensor<2xf32>
}
""",
    (((2,), "float32"),),
)

CASES["move_split_axis"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2x2xi8>) -> tensor<2x2xi8> {
  %s0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s0 : tensor<2x2xi8>
  %s1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %1 = shard.shard %0 to %s1 annotate_for_users : tensor<2x2xi8>
  return %1 : tensor<2x2xi8>
}
""",
    (((2, 2), "int8"),),
)

CASES["non_tensor_value"] = Case(
    GRID
    + """
func.func @main(%arg0: i8) -> i8 {
  %0 = arith.addi %arg0, %arg0 : i8
  return %0 : i8
}
""",
    (((), "int8"),),
    refused="result",
)

CASES["unary_elementwise"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<2xi8>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<2xi8>
"""
    + abs_i8("a2", "1")
    + """
  %3 = shard.shard %a2 to %s : tensor<2xi8>
  %4 = shard.shard %3 to %s annotate_for_users : tensor<2xi8>
  return %4 : tensor<2xi8>
}
""",
    (((2,), "int8"),),
)

CASES["unary_elementwise_with_resharding"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %r : tensor<2xi8>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<2xi8>
"""
    + abs_i8("a2", "1")
    + """
  %3 = shard.shard %a2 to %s : tensor<2xi8>
  %4 = shard.shard %3 to %r annotate_for_users : tensor<2xi8>
  return %4 : tensor<2xi8>
}
""",
    (((2,), "int8"),),
)

CASES["binary_elementwise"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xi8>, %arg1: tensor<2xi8>) -> tensor<2xi8> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %a0 = shard.shard %arg0 to %s : tensor<2xi8>
  %a1 = shard.shard %a0 to %s annotate_for_users : tensor<2xi8>
  %b0 = shard.shard %arg1 to %s : tensor<2xi8>
  %b1 = shard.shard %b0 to %s annotate_for_users : tensor<2xi8>
  %e = tensor.empty() : tensor<2xi8>
  %sum = linalg.add ins(%a1, %b1 : tensor<2xi8>, tensor<2xi8>) outs(%e : tensor<2xi8>) -> tensor<2xi8>
  %r0 = shard.shard %sum to %s : tensor<2xi8>
  %r1 = shard.shard %r0 to %s annotate_for_users : tensor<2xi8>
  return %r1 : tensor<2xi8>
}
""",
    (((2,), "int8"), ((2,), "int8")),
)

CASES["multiple_chained_ops"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %r : tensor<2xi8>
  %1 = shard.shard %0 to %s annotate_for_users : tensor<2xi8>
"""
    + abs_i8("a2", "1")
    + """
  %3 = shard.shard %a2 to %s : tensor<2xi8>
  %4 = shard.shard %3 to %r annotate_for_users : tensor<2xi8>
"""
    + abs_i8("a5", "4")
    + """
  %6 = shard.shard %a5 to %r : tensor<2xi8>
  %7 = shard.shard %6 to %s annotate_for_users : tensor<2xi8>
  return %7 : tensor<2xi8>
}
""",
    (((2,), "int8"),),
)

CASES["incomplete_sharding"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s annotate_for_users : tensor<8x16xf32>
"""
    + unary_f32("u1", "0", SIGMOID)
    + """
  %2 = shard.shard %u1 to %s : tensor<8x16xf32>
  %3 = shard.shard %2 to %s annotate_for_users : tensor<8x16xf32>
  return %3 : tensor<8x16xf32>
}
""",
    (((8, 16), "float32"),),
    grids=(2, 4),
)

CASES["ew_chain_with_halo"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %h = shard.sharding @grid split_axes = [[0]] halo_sizes = [2, 1] : !shard.sharding
  %0 = shard.shard %arg0 to %h annotate_for_users : tensor<8x16xf32>
"""
    + unary_f32("u1", "0", "      %y{out} = math.tanh %v{out} : f32")
    + """
  %2 = shard.shard %u1 to %h : tensor<8x16xf32>
  %3 = shard.shard %2 to %h annotate_for_users : tensor<8x16xf32>
"""
    + unary_f32("u4", "3", "      %y{out} = math.absf %v{out} : f32")
    + """
  %5 = shard.shard %u4 to %h : tensor<8x16xf32>
  %6 = shard.shard %5 to %h annotate_for_users : tensor<8x16xf32>
"""
    + unary_f32("u7", "6", "      %y{out} = arith.negf %v{out} : f32")
    + """
  %8 = shard.shard %u7 to %h : tensor<8x16xf32>
  %9 = shard.shard %8 to %h annotate_for_users : tensor<8x16xf32>
  return %9 : tensor<8x16xf32>
}
""",
    (((8, 16), "float32"),),
    grids=(4, 2),
)

CASES["test_shard_update_halo"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<1200x1200xi64>) -> tensor<1200x1200xi64> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<1200x1200xi64>
  %h = shard.sharding @grid split_axes = [[0]] halo_sizes = [2, 2] : !shard.sharding
  %1 = shard.shard %0 to %h : tensor<1200x1200xi64>
  %2 = shard.shard %1 to %h annotate_for_users : tensor<1200x1200xi64>
  return %2 : tensor<1200x1200xi64>
}
""",
    (((1200, 1200), "int64"),),
    grids=(4, 2),
)

CASES["test_shard_update_halo2d"] = Case(
    GRID.replace("GRID", "4x4")
    + """
func.func @main(%arg0: tensor<1200x1200xi64>) -> tensor<1200x1200xi64> {
  %s = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<1200x1200xi64>
  %h = shard.sharding @grid split_axes = [[0], [1]] halo_sizes = [1, 2, 3, 4] : !shard.sharding
  %1 = shard.shard %0 to %h : tensor<1200x1200xi64>
  %2 = shard.shard %1 to %h annotate_for_users : tensor<1200x1200xi64>
  return %2 : tensor<1200x1200xi64>
}
""",
    (((1200, 1200), "int64"),),
    grids=(16,),
)

CASES["test_reduce_0d"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<6x6xi32>) -> tensor<i32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %0 = shard.shard %arg0 to %s annotate_for_users : tensor<6x6xi32>
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<i32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<i32>) -> tensor<i32>
  %1 = shard.shard %f to %r : tensor<i32>
  %sum = linalg.reduce ins(%0 : tensor<6x6xi32>) outs(%1 : tensor<i32>) dimensions = [0, 1]
    (%in: i32, %acc: i32) {
      %t = arith.addi %in, %acc : i32
      linalg.yield %t : i32
    }
  %2 = shard.shard %sum to %r : tensor<i32>
  %3 = shard.shard %2 to %r annotate_for_users : tensor<i32>
  return %3 : tensor<i32>
}
""",
    (((6, 6), "int32"),),
)

CASES["test_reduce_1d"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<6x6xi32>) -> tensor<6xi32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s annotate_for_users : tensor<6x6xi32>
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<6xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<6xi32>) -> tensor<6xi32>
  %1 = shard.shard %f to %s : tensor<6xi32>
  %2 = shard.shard %1 to %s annotate_for_users : tensor<6xi32>
  %sum = linalg.reduce ins(%0 : tensor<6x6xi32>) outs(%2 : tensor<6xi32>) dimensions = [1]
    (%in: i32, %acc: i32) {
      %t = arith.addi %in, %acc : i32
      linalg.yield %t : i32
    }
  %3 = shard.shard %sum to %s : tensor<6xi32>
  %4 = shard.shard %3 to %s annotate_for_users : tensor<6xi32>
  return %4 : tensor<6xi32>
}
""",
    (((6, 6), "int32"),),
)

CASES["mlp_1dgrid"] = Case(
    GRID
    + """
func.func @main(%x: tensor<512x2048xf32>, %w1: tensor<2048x1024xf32>,
                %w2: tensor<1024x2048xf32>) -> tensor<512x2048xf32> {
  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @grid split_axes = [[0], []] : !shard.sharding
  %rep = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %x0 = shard.shard %x to %cols : tensor<512x2048xf32>
  %w10 = shard.shard %w1 to %cols : tensor<2048x1024xf32>
  %w20 = shard.shard %w2 to %rows : tensor<1024x2048xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<512x1024xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<512x1024xf32>) -> tensor<512x1024xf32>
  %z1s = shard.shard %z1 to %cols : tensor<512x1024xf32>
  %xa = shard.shard %x0 to %rep annotate_for_users : tensor<512x2048xf32>
  %w1a = shard.shard %w10 to %cols annotate_for_users : tensor<2048x1024xf32>
  %z1a = shard.shard %z1s to %cols annotate_for_users : tensor<512x1024xf32>
  %h = linalg.matmul ins(%xa, %w1a : tensor<512x2048xf32>, tensor<2048x1024xf32>)
                     outs(%z1a : tensor<512x1024xf32>) -> tensor<512x1024xf32>
  %hs = shard.shard %h to %cols : tensor<512x1024xf32>
  %ha = shard.shard %hs to %cols annotate_for_users : tensor<512x1024xf32>
"""
    + unary_f32("g", "ha", SIGMOID, "512x1024")
    + """
  %gs = shard.shard %g to %cols : tensor<512x1024xf32>
  %e2 = tensor.empty() : tensor<512x2048xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<512x2048xf32>) -> tensor<512x2048xf32>
  %z2s = shard.shard %z2 to %rep : tensor<512x2048xf32>
  %ga = shard.shard %gs to %cols annotate_for_users : tensor<512x1024xf32>
  %w2a = shard.shard %w20 to %rows annotate_for_users : tensor<1024x2048xf32>
  %z2a = shard.shard %z2s to %rep annotate_for_users : tensor<512x2048xf32>
  %y = linalg.matmul ins(%ga, %w2a : tensor<512x1024xf32>, tensor<1024x2048xf32>)
                     outs(%z2a : tensor<512x2048xf32>) -> tensor<512x2048xf32>
  %ys = shard.shard %y to %rep : tensor<512x2048xf32>
  %ya = shard.shard %ys to %rep annotate_for_users : tensor<512x2048xf32>
  return %ya : tensor<512x2048xf32>
}
""",
    (((512, 2048), "float32"), ((2048, 1024), "float32"), ((1024, 2048), "float32")),
    grids=(4, 2),
    oracle=lambda x, w1, w2: ((1 / (1 + np.exp(-(x.astype(np.float64) @ w1)))) @ w2).astype(
        np.float32
    ),
    tolerance=1e-5,  # of the largest value: f32 sums over k, split over the devices
)

# --- resharding-partition.mlir ----------------------------------------------------------


def reshard(shape: str, source: str, target: str) -> str:
    """A function resharding its argument from `source` to `target` and returning it."""
    return (
        GRID
        + f"""
func.func @main(%arg0: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{
  %s0 = shard.sharding @grid split_axes = {source} : !shard.sharding
  %0 = shard.shard %arg0 to %s0 : tensor<{shape}xf32>
  %s1 = shard.sharding @grid split_axes = {target} : !shard.sharding
  %1 = shard.shard %0 to %s1 annotate_for_users : tensor<{shape}xf32>
  return %1 : tensor<{shape}xf32>
}}
"""
    )


CASES["same_source_and_target_sharding"] = Case(reshard("2", "[[]]", "[[]]"), (((2,), "float32"),))
CASES["split_replicated_tensor_axis"] = Case(
    reshard("3x14", "[[]]", "[[], [0]]"), (((3, 14), "float32"),)
)
CASES["split_replicated_tensor_axis_dynamic"] = Case(
    reshard("?x3x?", "[[], [], []]", "[[0]]"),
    (((4, 3, 2), "float32"),),
)
CASES["move_split_axis_resharding"] = Case(
    reshard("10x14", "[[0]]", "[[], [0]]"), (((10, 14), "float32"),)
)
CASES["move_split_dynamic_axis"] = Case(
    reshard("?x14", "[[0]]", "[[], [0]]"), (((10, 14), "float32"),)
)
CASES["unshard_static_axis"] = Case(reshard("10x14", "[[0]]", "[[]]"), (((10, 14), "float32"),))
CASES["unshard_static_last_axis"] = Case(
    reshard("10x14", "[[], [0]]", "[[], []]"), (((10, 14), "float32"),)
)
CASES["unshard_dynamic_axis"] = Case(reshard("?x14", "[[0]]", "[[]]"), (((10, 14), "float32"),))
CASES["identical_source_and_target_sharding"] = Case(
    GRID
    + """
func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %s0 = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %0 = shard.shard %arg0 to %s0 : tensor<2xf32>
  %1 = shard.shard %0 to %s0 annotate_for_users : tensor<2xf32>
  return %1 : tensor<2xf32>
}
""",
    (((2,), "float32"),),
)
CASES["move_split_axis_dynamic_grid"] = Case(
    reshard("10x14", "[[0]]", "[[], [0]]").replace("shape = GRID", "shape = ?"),
    (((10, 14), "float32"),),
)
CASES["unshard_static_axis_on_dynamic_grid_axis"] = Case(
    reshard("10x14", "[[0]]", "[[]]").replace("shape = GRID", "shape = ?"),
    (((10, 14), "float32"),),
)
