module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  func.func private @dhir_rt_bcast(i64, i64, i32)
  func.func @main(%a: memref<20xi32>, %b: memref<20xi32>, %c: memref<20xi32>) attributes {llvm.emit_c_interface} {
    %comm = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%comm) : i32
    %r0 = arith.constant 0 : i32
    %r1 = arith.constant 1 : i32
    %tag = arith.constant 2 : i32
    %on0 = arith.cmpi eq, %rank, %r0 : i32
    %on1 = arith.cmpi eq, %rank, %r1 : i32
    scf.if %on0 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      scf.parallel (%i) = (%c0) to (%c20) step (%c1) {
        %x = memref.load %a[%i] : memref<20xi32>
        %y = memref.load %b[%i] : memref<20xi32>
        %z = arith.addi %x, %y : i32
        memref.store %z, %c[%i] : memref<20xi32>
        scf.reduce
      }
    }
    scf.if %on0 {
      mpi.send(%c, %tag, %r1, %comm) : memref<20xi32>, i32, i32
    }
    scf.if %on1 {
      mpi.recv(%c, %tag, %r0, %comm) : memref<20xi32>, i32, i32
    }
    scf.if %on1 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c20 = arith.constant 20 : index
      scf.for %i = %c0 to %c20 step %c1 {
        %v = memref.load %c[%i] : memref<20xi32>
        memref.store %v, %a[%i] : memref<20xi32>
      }
    }
    %p = memref.extract_aligned_pointer_as_index %a : memref<20xi32> -> index
    %pi = arith.index_cast %p : index to i64
    %bytes = arith.constant 80 : i64
    func.call @dhir_rt_bcast(%pi, %bytes, %r1) : (i64, i64, i32) -> ()
    %p2 = memref.extract_aligned_pointer_as_index %c : memref<20xi32> -> index
    %pi2 = arith.index_cast %p2 : index to i64
    func.call @dhir_rt_bcast(%pi2, %bytes, %r0) : (i64, i64, i32) -> ()
    return
  }
}
