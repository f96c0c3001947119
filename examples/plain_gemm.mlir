// A plain gemm, C = C + A * B, with no dhir ops: as a C or Fortran front end emits it.
// `dhir run` wraps the loop nest in a task (CodeDrop) and runs it on the ranks:
//   dhir run examples/plain_gemm.mlir -n 2 --input A.npy --input B.npy --input C.npy --print
func.func @main(%A: memref<64x64xf64>, %B: memref<64x64xf64>, %C: memref<64x64xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 64 : index
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %n step %c1 {
      scf.for %k = %c0 to %n step %c1 {
        %a = memref.load %A[%i, %k] : memref<64x64xf64>
        %b = memref.load %B[%k, %j] : memref<64x64xf64>
        %c = memref.load %C[%i, %j] : memref<64x64xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        memref.store %s, %C[%i, %j] : memref<64x64xf64>
      }
    }
  }
  return
}
