// gemm (C = A * B, 600x600x600 f64) as ONE task whose loops run to the sizes of A and B
// (`memref.dim`, static extents): dhir-split reads them as the constants they are and cuts
// the row loop into one piece per rank, each writing exactly its rows of C.
// bench/split/run.py --program gemm_dim times it on 1 and 2 ranks.
func.func @main(%a: memref<600x600xf64>, %b: memref<600x600xf64>, %c: memref<600x600xf64>) {
  dhir.schedule %a, %b, %c {
    %t = dhir.task target = "cpu", %a, %b, %c {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %zero = arith.constant 0.0 : f64
      %n = memref.dim %a, %c0 : memref<600x600xf64>
      %m = memref.dim %b, %c1 : memref<600x600xf64>
      scf.for %i = %c0 to %n step %c1 {
        scf.for %j = %c0 to %m step %c1 {
          %sum = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {
            %x = memref.load %a[%i, %k] : memref<600x600xf64>
            %y = memref.load %b[%k, %j] : memref<600x600xf64>
            %p = arith.mulf %x, %y : f64
            %s = arith.addf %acc, %p : f64
            scf.yield %s : f64
          }
          memref.store %sum, %c[%i, %j] : memref<600x600xf64>
        }
      }
    }
  }
  return
}
