// A program written per device on a 2x2 grid: each collective becomes a call of its own
// stub, which records the runtime calls doing its work (the grid's words: 2 dimensions of
// 2 and 2, then the group's axes), and the process queries become arithmetic on the rank.
// RUN: dhir-opt %s -p dhir-shard-stubs | filecheck %s

shard.grid @g(shape = 2x2)
func.func @main(%x: tensor<4x6xf64>) -> tensor<4x6xf64> {
  %row = shard.process_multi_index on @g axes = [0] : index
  %n, %m = shard.grid_shape @g axes = [0, 1] : index, index
  %g = shard.all_gather %x on @g grid_axes = [1] gather_axis = 1 : tensor<4x6xf64> -> tensor<4x12xf64>
  %s = shard.reduce_scatter %g on @g grid_axes = [0] reduction = max scatter_axis = 1 : tensor<4x12xf64> -> tensor<4x6xf64>
  return %s : tensor<4x6xf64>
}

// CHECK-NOT:  shard.grid
// CHECK:      func.func @main(%x: tensor<4x6xf64>) -> tensor<4x6xf64> {
// CHECK-NEXT:   %[[RANK:.*]] = func.call @dhir_rt_comm_rank() : () -> i32
// CHECK-NEXT:   %[[INDEX:.*]] = arith.index_cast %[[RANK]] : i32 to index
// CHECK-NEXT:   %[[STRIDE:.*]] = arith.constant 2 : index
// CHECK-NEXT:   %[[SIZE:.*]] = arith.constant 2 : index
// CHECK-NEXT:   %[[ABOVE:.*]] = arith.divui %[[INDEX]], %[[STRIDE]] : index
// CHECK-NEXT:   %{{.*}} = arith.remui %[[ABOVE]], %[[SIZE]] : index
// CHECK-NEXT:   %{{.*}} = arith.constant 2 : index
// CHECK-NEXT:   %{{.*}} = arith.constant 2 : index
// CHECK-NEXT:   %[[G:.*]] = func.call @__dhir_collective0(%x) : (tensor<4x6xf64>) -> tensor<4x12xf64>
// CHECK-NEXT:   %[[S:.*]] = func.call @__dhir_collective1(%[[G]]) : (tensor<4x12xf64>) -> tensor<4x6xf64>
// CHECK-NEXT:   func.return %[[S]] : tensor<4x6xf64>
// All-gather along dimension 1: 4 rows (outer) of 6 f64 (48 bytes) each.
// CHECK:      func.func private @__dhir_collective0(tensor<4x6xf64>) -> tensor<4x12xf64> attributes {dhir.collective = {grid = array<i64: 2, 2, 2, 1, 1>, calls = {"0:dhir_rt_shard_all_gather" = array<i64: 4, 48>}}}
// Reduce (48 f64, type 0 = f64, reduction 1 = max), then the member's slice of dimension 1.
// CHECK:      func.func private @__dhir_collective1(tensor<4x12xf64>) -> tensor<4x6xf64> attributes {dhir.collective = {grid = array<i64: 2, 2, 2, 1, 0>, calls = {"0:dhir_rt_shard_all_reduce" = array<i64: 48, 0, 1>, "1:dhir_rt_shard_all_slice" = array<i64: 4, 48>}}}
// CHECK:      func.func private @dhir_rt_comm_rank() -> i32
