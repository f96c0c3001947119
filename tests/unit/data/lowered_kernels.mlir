// linalg, affine, math, subview/collapse_shape/copy, allreduce and point-to-point on any number
// of ranks. Every rank computes C = A B and v = sqrt(v) + rank; w = allreduce(v, sum); the
// last rank receives C (flattened) from rank 0, adds 1, and broadcasts it back; D = C[:, 1:3].
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  func.func private @dhir_rt_comm_size() -> i32
  func.func private @dhir_rt_bcast(i64, i64, i32)
  func.func @main(%A: memref<4x3xf32>, %B: memref<3x5xf32>, %C: memref<4x5xf32>,
                  %v: memref<6xf64>, %w: memref<6xf64>, %D: memref<4x2xf32>) attributes {llvm.emit_c_interface} {
    %comm = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%comm) : i32
    %size = func.call @dhir_rt_comm_size() : () -> i32
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%C : memref<4x5xf32>)
    linalg.matmul ins(%A, %B : memref<4x3xf32>, memref<3x5xf32>) outs(%C : memref<4x5xf32>)
    %rank_f = arith.sitofp %rank : i32 to f64
    affine.for %i = 0 to 6 {
      %x = affine.load %v[%i] : memref<6xf64>
      %r = math.sqrt %x : f64
      %e = math.exp %r : f64
      %l = math.log %e : f64
      %t = math.tanh %zero : f32
      %te = arith.extf %t : f32 to f64
      %s = arith.addf %l, %rank_f : f64
      %s2 = arith.addf %s, %te : f64
      affine.store %s2, %v[%i] : memref<6xf64>
    }
    mpi.allreduce(%v, %w, MPI_SUM, %comm) : memref<6xf64>, memref<6xf64>
    %c0_i32 = arith.constant 0 : i32
    %c1_i32 = arith.constant 1 : i32
    %tag = arith.constant 7 : i32
    %last = arith.subi %size, %c1_i32 : i32
    %many = arith.cmpi sgt, %size, %c1_i32 : i32
    %is_first = arith.cmpi eq, %rank, %c0_i32 : i32
    %is_last = arith.cmpi eq, %rank, %last : i32
    %flat = memref.collapse_shape %C [[0, 1]] : memref<4x5xf32> into memref<20xf32>
    %send = arith.andi %many, %is_first : i1
    scf.if %send {
      mpi.send(%flat, %tag, %last, %comm) : memref<20xf32>, i32, i32
    }
    %recv = arith.andi %many, %is_last : i1
    scf.if %recv {
      mpi.recv(%flat, %tag, %c0_i32, %comm) : memref<20xf32>, i32, i32
    }
    scf.if %is_last {
      %one = arith.constant 1.0 : f32
      linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
          outs(%C : memref<4x5xf32>) {
        ^bb0(%c: f32):
          %p = arith.addf %c, %one : f32
          linalg.yield %p : f32
      }
    }
    %p = memref.extract_aligned_pointer_as_index %C : memref<4x5xf32> -> index
    %p64 = arith.index_cast %p : index to i64
    %bytes = arith.constant 80 : i64
    func.call @dhir_rt_bcast(%p64, %bytes, %last) : (i64, i64, i32) -> ()
    %cols = memref.subview %C[0, 1] [4, 2] [1, 1] : memref<4x5xf32> to memref<4x2xf32, strided<[5, 1], offset: 1>>
    memref.copy %cols, %D : memref<4x2xf32, strided<[5, 1], offset: 1>> to memref<4x2xf32>
    return
  }
}
