// `dhir schedule` of a program whose collective names an axis its grid lacks: the
// verifier's error at the op (it was an internal error, an IndexError in the stubs).
// RUN: not dhir schedule -n 2 %s 2>&1 | filecheck %s

shard.grid @g(shape = 2)
func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
  %r = shard.all_reduce %x on @g grid_axes = [7] : tensor<2xf64> -> tensor<2xf64>
  return %r : tensor<2xf64>
}
// CHECK-NOT: internal error
// CHECK: grid_axes_schedule.mlir:7:8: error: 'shard.all_reduce' names grid axis 7, but the grid @g has 1 axes
