// gemm (C = A * B, 600x600x600 f64) written as ONE task whose outer loop runs over
// rows: dhir-split proves the row loop carries no dependence and cuts it into one piece
// per rank. bench/split/run.py times it on 1 and 2 ranks (see docs/performance.md).
func.func @main(%a: memref<600x600xf64>, %b: memref<600x600xf64>, %c: memref<600x600xf64>) {
  dhir.schedule %a, %b, %c {
    %t = dhir.task target = "cpu", %a, %b, %c {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant 600 : index
      %zero = arith.constant 0.0 : f64
      scf.for %i = %c0 to %n step %c1 {
        scf.for %j = %c0 to %n step %c1 {
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
