// Stores omp_get_max_threads() into %out[0] and fills %out[1:] in an scf.parallel loop
// (an OpenMP loop when built with openmp=True).
module {
  func.func private @omp_get_max_threads() -> i32
  func.func @main(%out: memref<64xi32>) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    scf.parallel (%i) = (%c1) to (%c64) step (%c1) {
      %v = arith.index_cast %i : index to i32
      memref.store %v, %out[%i] : memref<64xi32>
      scf.reduce
    }
    %n = func.call @omp_get_max_threads() : () -> i32
    memref.store %n, %out[%c0] : memref<64xi32>
    return
  }
}
