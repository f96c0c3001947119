// A shard op's grid is a shard.grid and the grid axes it names are that grid's, each once,
// as MLIR 22's verifier checks (xDSL's did not: `dhir schedule` and `dhir run` then
// failed with an internal error, indexing the grid's shape with the axis).
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

shard.grid @g(shape = 2)
func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
  // expected-error@+1 {{'shard.all_reduce' names grid axis 7, but the grid @g has 1 axes: name axes 0 to 0}}
  %r = shard.all_reduce %x on @g grid_axes = [7] : tensor<2xf64> -> tensor<2xf64>
  return %r : tensor<2xf64>
}

// -----

shard.grid @g(shape = 2x2)
func.func @main(%x: tensor<2xf64>) -> tensor<8xf64> {
  // expected-error@+1 {{'shard.all_gather' names a grid axis twice: name each once}}
  %r = shard.all_gather %x on @g grid_axes = [1, 1] gather_axis = 0 : tensor<2xf64> -> tensor<8xf64>
  return %r : tensor<8xf64>
}

// -----

shard.grid @g(shape = 2)
func.func @main() -> index {
  // expected-error@+1 {{'shard.grid_shape' names grid axis -1, but the grid @g has 1 axes}}
  %n = shard.grid_shape @g axes = [-1] : index
  return %n : index
}

// -----

shard.grid @g(shape = 2)
func.func @main() -> index {
  // expected-error@+1 {{'shard.process_linear_index' names the grid @h, which is no shard.grid}}
  %i = shard.process_linear_index on @h : index
  return %i : index
}

// -----

// Axes are i16: xDSL's packing of 4294967296 failed (struct.error, an internal error).
shard.grid @g(shape = 2x2)
func.func @main() -> index {
  // expected-error@+1 {{a value in this op is out of range for its type (short format requires -32768 <= number <= 32767)}}
  %row = shard.process_multi_index on @g axes = [4294967296] : index
  return %row : index
}

// -----

// CHECK-LABEL: func.func @fine
// CHECK: shard.all_reduce %x on @g grid_axes = [1, 0]
// CHECK: shard.process_multi_index on @g axes = [1]
shard.grid @g(shape = 2x3)
func.func @fine(%x: tensor<2xf64>) -> (tensor<2xf64>, index) {
  %r = shard.all_reduce %x on @g grid_axes = [1, 0] : tensor<2xf64> -> tensor<2xf64>
  %i = shard.process_multi_index on @g axes = [1] : index
  return %r, %i : tensor<2xf64>, index
}
