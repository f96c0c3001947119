// A 3-point stencil in a time loop, written per device: each rank holds 16 rows of the 64
// (and one halo row on each side), and each step exchanges only the halo rows
// (shard.update_halo) before averaging each row with its neighbours. Rows beyond the
// array are zero.
// Run it: dhir run examples/shard_stencil.mlir -n 4 --input u.npy --print (u: 64x32, f64).
shard.grid @g(shape = 4)
func.func @main(%u: tensor<64x32xf64>) -> tensor<64x32xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant 10 : index
  %zero = arith.constant 0.0 : f64
  %three = arith.constant 3.0 : f64
  %mine = shard.all_slice %u on @g grid_axes = [0] slice_axis = 0 : tensor<64x32xf64> -> tensor<16x32xf64>
  %e = tensor.empty() : tensor<18x32xf64>
  %zeros = linalg.fill ins(%zero : f64) outs(%e : tensor<18x32xf64>) -> tensor<18x32xf64>
  %start = tensor.insert_slice %mine into %zeros[1, 0] [16, 32] [1, 1] : tensor<16x32xf64> into tensor<18x32xf64>
  %e3 = tensor.empty() : tensor<16x32xf64>
  %threes = linalg.fill ins(%three : f64) outs(%e3 : tensor<16x32xf64>) -> tensor<16x32xf64>
  %end = scf.for %t = %c0 to %steps step %c1 iter_args(%cur = %start) -> (tensor<18x32xf64>) {
    %h = shard.update_halo %cur on @g split_axes = [[0]] halo_sizes = [1, 1] : tensor<18x32xf64>
    %up = tensor.extract_slice %h[0, 0] [16, 32] [1, 1] : tensor<18x32xf64> to tensor<16x32xf64>
    %mid = tensor.extract_slice %h[1, 0] [16, 32] [1, 1] : tensor<18x32xf64> to tensor<16x32xf64>
    %down = tensor.extract_slice %h[2, 0] [16, 32] [1, 1] : tensor<18x32xf64> to tensor<16x32xf64>
    %o1 = tensor.empty() : tensor<16x32xf64>
    %s1 = linalg.add ins(%up, %mid : tensor<16x32xf64>, tensor<16x32xf64>) outs(%o1 : tensor<16x32xf64>) -> tensor<16x32xf64>
    %o2 = tensor.empty() : tensor<16x32xf64>
    %s2 = linalg.add ins(%s1, %down : tensor<16x32xf64>, tensor<16x32xf64>) outs(%o2 : tensor<16x32xf64>) -> tensor<16x32xf64>
    %o3 = tensor.empty() : tensor<16x32xf64>
    %avg = linalg.div ins(%s2, %threes : tensor<16x32xf64>, tensor<16x32xf64>) outs(%o3 : tensor<16x32xf64>) -> tensor<16x32xf64>
    %next = tensor.insert_slice %avg into %h[1, 0] [16, 32] [1, 1] : tensor<16x32xf64> into tensor<18x32xf64>
    scf.yield %next : tensor<18x32xf64>
  }
  %core = tensor.extract_slice %end[1, 0] [16, 32] [1, 1] : tensor<18x32xf64> to tensor<16x32xf64>
  %all = shard.all_gather %core on @g grid_axes = [0] gather_axis = 0 : tensor<16x32xf64> -> tensor<64x32xf64>
  return %all : tensor<64x32xf64>
}
