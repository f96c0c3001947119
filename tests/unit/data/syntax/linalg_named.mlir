#lhs_t = affine_map<(b, i, j, k) -> (b, k, i)>
#rhs = affine_map<(b, i, j, k) -> (b, k, j)>
#out = affine_map<(b, i, j, k) -> (b, i, j)>

func.func @contractions(%a: memref<2x3x4xf32>, %b: memref<2x4x5xf32>, %c: memref<2x3x5xf32>,
                        %at: memref<2x4x3xf32>, %m: memref<3x4xf32>, %x: memref<4xf32>,
                        %y: memref<3xf32>, %z: memref<4xf32>, %s: memref<f32>,
                        %bm: memref<2x3x4xf32>, %bx: memref<2x4xf32>, %by: memref<2x3xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x3x4xf32>, memref<2x4x5xf32>) outs(%c : memref<2x3x5xf32>)
  linalg.batch_matmul indexing_maps = [#lhs_t, #rhs, #out] ins(%at, %b : memref<2x4x3xf32>, memref<2x4x5xf32>) outs(%c : memref<2x3x5xf32>)
  linalg.batch_matmul {note} ins(%a, %b : memref<2x3x4xf32>, memref<2x4x5xf32>) outs(%c : memref<2x3x5xf32>)
  linalg.matvec ins(%m, %x : memref<3x4xf32>, memref<4xf32>) outs(%y : memref<3xf32>)
  linalg.vecmat ins(%y, %m : memref<3xf32>, memref<3x4xf32>) outs(%z : memref<4xf32>)
  linalg.dot ins(%x, %z : memref<4xf32>, memref<4xf32>) outs(%s : memref<f32>)
  linalg.batch_matvec ins(%bm, %bx : memref<2x3x4xf32>, memref<2x4xf32>) outs(%by : memref<2x3xf32>)
  return
}

func.func @on_tensors(%a: tensor<2x3x4xi32>, %b: tensor<2x4x5xi32>, %c: tensor<2x3x5xi32>,
                      %u: tensor<8xf64>, %v: tensor<8xf64>, %d: tensor<f64>) -> (tensor<2x3x5xi32>, tensor<f64>) {
  %r = linalg.batch_matmul ins(%a, %b : tensor<2x3x4xi32>, tensor<2x4x5xi32>) outs(%c : tensor<2x3x5xi32>) -> tensor<2x3x5xi32>
  %q = linalg.dot ins(%u, %v : tensor<8xf64>, tensor<8xf64>) outs(%d : tensor<f64>) -> tensor<f64>
  return %r, %q : tensor<2x3x5xi32>, tensor<f64>
}

func.func @divide(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>,
                  %i: memref<8xi16>, %j: memref<8xi16>, %k: memref<8xi16>) {
  linalg.div ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  linalg.div ins(%i, %j : memref<8xi16>, memref<8xi16>) outs(%k : memref<8xi16>)
  return
}
