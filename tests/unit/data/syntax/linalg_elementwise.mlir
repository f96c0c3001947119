// linalg.elementwise of every kind MLIR 22 builds (floats; integers where it takes them),
// broadcasting maps, tensors, and the `cast` property of matmul-like ops.

func.func @kinds(%f: memref<4x?xf32>, %i: memref<4x?xi16>, %p: memref<4x?xi1>) {
  linalg.elementwise kind=#linalg.elementwise_kind<exp> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<log> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<abs> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<ceil> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<floor> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<negf> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<reciprocal> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<round> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<sqrt> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<rsqrt> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<square> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<tanh> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<erf> ins(%f : memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<add> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<sub> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<mul> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<div> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<max_signed> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<min_signed> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<powf> ins(%f, %f : memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<select> ins(%p, %f, %f : memref<4x?xi1>, memref<4x?xf32>, memref<4x?xf32>) outs(%f : memref<4x?xf32>)
  linalg.elementwise kind=#linalg.elementwise_kind<add> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<sub> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<mul> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<div> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<div_unsigned> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<max_signed> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<min_signed> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<max_unsigned> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<min_unsigned> ins(%i, %i : memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  linalg.elementwise kind=#linalg.elementwise_kind<select> ins(%p, %i, %i : memref<4x?xi1>, memref<4x?xi16>, memref<4x?xi16>) outs(%i : memref<4x?xi16>)
  return
}

func.func @maps(%v: memref<3xf32>, %m: memref<4x3xf32>, %a: tensor<4x3xf64>, %b: tensor<4x3xf64>) -> tensor<4x3xf64> {
  linalg.elementwise kind=#linalg.elementwise_kind<mul> indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] ins(%v, %m : memref<3xf32>, memref<4x3xf32>) outs(%m : memref<4x3xf32>) {note}
  %r = linalg.elementwise kind=#linalg.elementwise_kind<sub> ins(%a, %b : tensor<4x3xf64>, tensor<4x3xf64>) outs(%b : tensor<4x3xf64>) -> tensor<4x3xf64>
  return %r : tensor<4x3xf64>
}

func.func @casts(%a: memref<4x3xi8>, %b: memref<3x5xi8>, %c: memref<4x5xi32>, %x: memref<2x4x3xi8>,
                 %y: memref<2x3x5xi8>, %z: memref<2x4x5xi32>, %f: memref<4x5xf32>,
                 %v: memref<3xi8>, %s: memref<i32>) {
  linalg.matmul {cast = #linalg.type_fn<cast_unsigned>} ins(%a, %b : memref<4x3xi8>, memref<3x5xi8>) outs(%c : memref<4x5xi32>)
  linalg.matmul {cast = #linalg.type_fn<cast_signed>} ins(%a, %b : memref<4x3xi8>, memref<3x5xi8>) outs(%c : memref<4x5xi32>)
  linalg.matmul {cast = #linalg.type_fn<cast_unsigned>} ins(%a, %b : memref<4x3xi8>, memref<3x5xi8>) outs(%f : memref<4x5xf32>)
  linalg.batch_matmul {cast = #linalg.type_fn<cast_unsigned>} ins(%x, %y : memref<2x4x3xi8>, memref<2x3x5xi8>) outs(%z : memref<2x4x5xi32>)
  linalg.contract indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>] {cast = #linalg.type_fn<cast_unsigned>} ins(%a, %b : memref<4x3xi8>, memref<3x5xi8>) outs(%c : memref<4x5xi32>)
  // MLIR 22 keeps the property here but its body converts as signed all the same.
  linalg.batch_reduce_matmul {cast = #linalg.type_fn<cast_unsigned>} ins(%x, %y : memref<2x4x3xi8>, memref<2x3x5xi8>) outs(%c : memref<4x5xi32>)
  // Other named ops take it as an attribute without meaning.
  linalg.dot {cast = #linalg.type_fn<cast_unsigned>} ins(%v, %v : memref<3xi8>, memref<3xi8>) outs(%s : memref<i32>)
  return
}
