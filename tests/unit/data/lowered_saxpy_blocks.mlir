// y = alpha * x + y on any number of ranks: each rank computes one block of rows with an
// scf.parallel loop, then every block is broadcast from its owner.
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  func.func private @dhir_rt_comm_size() -> i32
  func.func private @dhir_rt_barrier()
  func.func private @dhir_rt_bcast(i64, i64, i32)
  func.func @main(%x: memref<?xf64>, %y: memref<?xf64>, %alpha: f64) attributes {llvm.emit_c_interface} {
    %comm = mpi.comm_world : !mpi.comm
    %rank32 = mpi.comm_rank(%comm) : i32
    %size32 = func.call @dhir_rt_comm_size() : () -> i32
    %rank = arith.index_cast %rank32 : i32 to index
    %size = arith.index_cast %size32 : i32 to index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = memref.dim %x, %c0 : memref<?xf64>
    %block_minus_1 = arith.addi %n, %size : index
    %block_up = arith.subi %block_minus_1, %c1 : index
    %block = arith.divui %block_up, %size : index
    %lo_raw = arith.muli %rank, %block : index
    %lo = arith.minui %lo_raw, %n : index
    %hi_raw = arith.addi %lo, %block : index
    %hi = arith.minui %hi_raw, %n : index
    scf.parallel (%i) = (%lo) to (%hi) step (%c1) {
      %xi = memref.load %x[%i] : memref<?xf64>
      %yi = memref.load %y[%i] : memref<?xf64>
      %axi = arith.mulf %alpha, %xi : f64
      %r = arith.addf %axi, %yi : f64
      memref.store %r, %y[%i] : memref<?xf64>
      scf.reduce
    }
    func.call @dhir_rt_barrier() : () -> ()
    %base_index = memref.extract_aligned_pointer_as_index %y : memref<?xf64> -> index
    %base = arith.index_cast %base_index : index to i64
    %c8 = arith.constant 8 : index
    scf.for %owner = %c0 to %size step %c1 {
      %olo_raw = arith.muli %owner, %block : index
      %olo = arith.minui %olo_raw, %n : index
      %ohi_raw = arith.addi %olo, %block : index
      %ohi = arith.minui %ohi_raw, %n : index
      %count = arith.subi %ohi, %olo : index
      %offset = arith.muli %olo, %c8 : index
      %bytes = arith.muli %count, %c8 : index
      %offset64 = arith.index_cast %offset : index to i64
      %bytes64 = arith.index_cast %bytes : index to i64
      %ptr = arith.addi %base, %offset64 : i64
      %root = arith.index_cast %owner : index to i32
      func.call @dhir_rt_bcast(%ptr, %bytes64, %root) : (i64, i64, i32) -> ()
    }
    return
  }
}
