// Ways for a run to go wrong, chosen by %mode: 0 none, 1 integer division by zero on the last
// rank (SIGFPE), 2 abort() on the last rank, 3 every rank spins forever, 4 a broadcast from a
// rank that does not exist, 5 a send to a rank that does not exist.
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  func.func private @abort()
  func.func private @dhir_rt_comm_size() -> i32
  func.func private @dhir_rt_barrier()
  func.func private @dhir_rt_bcast(i64, i64, i32)
  func.func @main(%a: memref<4xi32>, %mode: i32, %divisor: i32) attributes {llvm.emit_c_interface} {
    %comm = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%comm) : i32
    %size = func.call @dhir_rt_comm_size() : () -> i32
    %c0 = arith.constant 0 : index
    %one = arith.constant 1 : i32
    %last_rank = arith.subi %size, %one : i32
    %is_last = arith.cmpi eq, %rank, %last_rank : i32
    %m1 = arith.constant 1 : i32
    %m2 = arith.constant 2 : i32
    %m3 = arith.constant 3 : i32
    %m4 = arith.constant 4 : i32
    %m5 = arith.constant 5 : i32
    %is1 = arith.cmpi eq, %mode, %m1 : i32
    %is2 = arith.cmpi eq, %mode, %m2 : i32
    %is3 = arith.cmpi eq, %mode, %m3 : i32
    %is4 = arith.cmpi eq, %mode, %m4 : i32
    %is5 = arith.cmpi eq, %mode, %m5 : i32
    %divide = arith.andi %is_last, %is1 : i1
    scf.if %divide {
      %x = memref.load %a[%c0] : memref<4xi32>
      %q = arith.divsi %x, %divisor : i32
      memref.store %q, %a[%c0] : memref<4xi32>
    }
    %abort = arith.andi %is_last, %is2 : i1
    scf.if %abort {
      func.call @abort() : () -> ()
    }
    scf.if %is3 {
      // The call keeps the loop alive: MLIR deletes side-effect-free loops, infinite or not.
      %never = arith.constant -1 : i32
      scf.while : () -> () {
        %s = func.call @dhir_rt_comm_size() : () -> i32
        %go = arith.cmpi ne, %s, %never : i32
        scf.condition(%go)
      } do {
        scf.yield
      }
    }
    scf.if %is4 {
      %p = memref.extract_aligned_pointer_as_index %a : memref<4xi32> -> index
      %p64 = arith.index_cast %p : index to i64
      %bytes = arith.constant 16 : i64
      %root = arith.constant 5 : i32
      func.call @dhir_rt_bcast(%p64, %bytes, %root) : (i64, i64, i32) -> ()
    }
    scf.if %is5 {
      %tag = arith.constant 0 : i32
      %nowhere = arith.constant 5 : i32
      mpi.send(%a, %tag, %nowhere, %comm) : memref<4xi32>, i32, i32
    }
    func.call @dhir_rt_barrier() : () -> ()
    return
  }
}
