// gemm (C = A * B, 600x600x600 f64) as ONE task whose rows are tiled by 32 as MLIR's
// tiling writes it (`min` upper bounds, 600 not a multiple of 32): dhir-split proves the
// tiles touch disjoint rows of C and cuts the tile loop into one piece per rank.
// bench/split/run.py --program gemm_tiled times it on 1 and 2 ranks (docs/performance.md).
func.func @main(%a: memref<600x600xf64>, %b: memref<600x600xf64>, %c: memref<600x600xf64>) {
  dhir.schedule %a, %b, %c {
    %t = dhir.task target = "cpu", %a, %b, %c {
      %zero = arith.constant 0.0 : f64
      affine.for %ii = 0 to 600 step 32 {
        affine.for %i = affine_map<(d0) -> (d0)>(%ii) to min affine_map<(d0) -> (d0 + 32, 600)>(%ii) {
          affine.for %j = 0 to 600 {
            %sum = affine.for %k = 0 to 600 iter_args(%acc = %zero) -> (f64) {
              %x = affine.load %a[%i, %k] : memref<600x600xf64>
              %y = affine.load %b[%k, %j] : memref<600x600xf64>
              %p = arith.mulf %x, %y : f64
              %s = arith.addf %acc, %p : f64
              affine.yield %s : f64
            }
            affine.store %sum, %c[%i, %j] : memref<600x600xf64>
          }
        }
      }
    }
  }
  return
}
