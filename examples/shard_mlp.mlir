// A two-layer MLP's feed-forward, weight-stationary: W1's columns and W2's rows are
// split over the grid, so each device computes a slice of the hidden layer and a partial
// product, and one all_reduce sums the partial products.
// Run it: dhir run examples/shard_mlp.mlir -n 4 --input x.npy --input w1.npy --input w2.npy --print
// (x 8x16, w1 16x32, w2 32x16, f64; with -n 2, give the grid shape = 2).
shard.grid @grid(shape = 4)
func.func @main(%x: tensor<8x16xf64>, %w1: tensor<16x32xf64>, %w2: tensor<32x16xf64>) -> tensor<8x16xf64> {
  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %w1s = shard.shard %w1 to %cols : tensor<16x32xf64>
  %w2s = shard.shard %w2 to %rows : tensor<32x16xf64>
  %zero = arith.constant 0.0 : f64
  %e1 = tensor.empty() : tensor<8x32xf64>
  %z1 = linalg.fill ins(%zero : f64) outs(%e1 : tensor<8x32xf64>) -> tensor<8x32xf64>
  %h = linalg.matmul ins(%x, %w1s : tensor<8x16xf64>, tensor<16x32xf64>) outs(%z1 : tensor<8x32xf64>) -> tensor<8x32xf64>
  %e2 = tensor.empty() : tensor<8x32xf64>
  %relu = linalg.max ins(%h, %z1 : tensor<8x32xf64>, tensor<8x32xf64>) outs(%e2 : tensor<8x32xf64>) -> tensor<8x32xf64>
  %e3 = tensor.empty() : tensor<8x16xf64>
  %z3 = linalg.fill ins(%zero : f64) outs(%e3 : tensor<8x16xf64>) -> tensor<8x16xf64>
  %y = linalg.matmul ins(%relu, %w2s : tensor<8x32xf64>, tensor<32x16xf64>) outs(%z3 : tensor<8x16xf64>) -> tensor<8x16xf64>
  %rep = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %out = shard.shard %y to %rep annotate_for_users : tensor<8x16xf64>
  return %out : tensor<8x16xf64>
}
