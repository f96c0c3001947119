#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @loops(%m: memref<8x8xf32>, %o: memref<8x8xf32>, %n: index, %f: f32) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to min affine_map<(d0)[s0] -> (d0, s0)>(%i)[%n] step 2 {
      %v = affine.load %m[%i, %j + 1] : memref<8x8xf32>
      %a = affine.apply affine_map<(d0)[s0] -> (d0 * 2 + s0)>(%i)[%n]
      affine.store %v, %o[%j, symbol(%n)] : memref<8x8xf32>
    }
  }
  %s = affine.for %i = 0 to 8 iter_args(%acc = %f) -> (f32) {
    %v = affine.load %m[%i, %i] : memref<8x8xf32>
    %t = arith.addf %acc, %v : f32
    affine.yield %t : f32
  }
  linalg.fill ins(%f : f32) outs(%o : memref<8x8xf32>)
  linalg.copy ins(%m : memref<8x8xf32>) outs(%o : memref<8x8xf32>)
  linalg.matmul ins(%m, %m : memref<8x8xf32>, memref<8x8xf32>) outs(%o : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%m : memref<8x8xf32>) outs(%o : memref<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %x = arith.mulf %in, %out : f32
    linalg.yield %x : f32
  }
  return
}
