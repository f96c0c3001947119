// A plain gemm as one linalg op, C = C + A * B, with no dhir ops: as a tensor compiler
// emits it after bufferization. `dhir run` wraps the matmul in a task (CodeDrop), and
// dhir-split cuts it into row blocks of A and C, one per rank:
//   dhir run examples/plain_matmul.mlir -n 2 --input A.npy --input B.npy --input C.npy --print
func.func @main(%A: memref<64x64xf64>, %B: memref<64x64xf64>, %C: memref<64x64xf64>) {
  linalg.matmul ins(%A, %B : memref<64x64xf64>, memref<64x64xf64>) outs(%C : memref<64x64xf64>)
  return
}
