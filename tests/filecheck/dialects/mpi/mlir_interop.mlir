// REQUIRES: mlir
// RUN: dhir-opt %s | mlir-opt-22 --mlir-print-op-generic | dhir-opt | filecheck %s
// RUN: dhir-opt %s | mlir-opt-22 | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | mlir-opt-22 | dhir-opt | filecheck %s

// What dhir prints, mlir-opt-22 accepts; what mlir-opt-22 prints back, in
// either form, dhir parses to the same IR.

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%buf: memref<16xf32>, %out: memref<16xf32>, %tag: i32, %peer: i32) -> i1 {
  // CHECK-NEXT: %[[E:.*]] = mpi.init : !mpi.retval
  %e = mpi.init : !mpi.retval
  // CHECK-NEXT: %[[C:.*]] = mpi.comm_world : !mpi.comm
  %c = mpi.comm_world : !mpi.comm
  // CHECK-NEXT: %[[RANK:.*]] = mpi.comm_rank(%[[C]]) : i32
  %rank = mpi.comm_rank(%c) : i32
  // CHECK-NEXT: %{{.*}}, %{{.*}} = mpi.comm_size(%[[C]]) : !mpi.retval, i32
  %e1, %size = mpi.comm_size(%c) : !mpi.retval, i32
  // CHECK-NEXT: %[[SUB:.*]] = mpi.comm_split(%[[C]], %{{.*}}, %[[RANK]]) : !mpi.comm
  %sub = mpi.comm_split(%c, %tag, %rank) : !mpi.comm
  // CHECK-NEXT: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %[[SUB]]) : memref<16xf32>, i32, i32{{$}}
  mpi.send(%buf, %tag, %peer, %sub) : memref<16xf32>, i32, i32
  // CHECK-NEXT: %{{.*}} = mpi.recv(%{{.*}}, %{{.*}}, %{{.*}}, %[[C]]) : memref<16xf32>, i32, i32 -> !mpi.retval
  %e2 = mpi.recv(%buf, %tag, %peer, %c) : memref<16xf32>, i32, i32 -> !mpi.retval
  // CHECK-NEXT: %[[REQ:.*]] = mpi.isend(%{{.*}}, %{{.*}}, %{{.*}}, %[[C]]) : memref<16xf32>, i32, i32 -> !mpi.request
  %req = mpi.isend(%buf, %tag, %peer, %c) : memref<16xf32>, i32, i32 -> !mpi.request
  // CHECK-NEXT: %{{.*}}, %[[REQ2:.*]] = mpi.irecv(%{{.*}}, %{{.*}}, %{{.*}}, %[[C]]) : memref<16xf32>, i32, i32 -> !mpi.retval, !mpi.request
  %e3, %req2 = mpi.irecv(%out, %tag, %peer, %c) : memref<16xf32>, i32, i32 -> !mpi.retval, !mpi.request
  // CHECK-NEXT: mpi.wait(%[[REQ]]) : !mpi.request{{$}}
  mpi.wait(%req) : !mpi.request
  // CHECK-NEXT: %{{.*}} = mpi.wait(%[[REQ2]]) : !mpi.request -> !mpi.retval
  %e4 = mpi.wait(%req2) : !mpi.request -> !mpi.retval
  // CHECK-NEXT: mpi.barrier(%[[C]]){{$}}
  mpi.barrier(%c)
  // CHECK-NEXT: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_SUM, %[[C]]) : memref<16xf32>, memref<16xf32>{{$}}
  mpi.allreduce(%buf, %out, MPI_SUM, %c) : memref<16xf32>, memref<16xf32>
  // CHECK-NEXT: %{{.*}} = mpi.allreduce(%{{.*}}, %{{.*}}, MPI_BXOR, %[[C]]) : memref<16xf32>, memref<16xf32> -> !mpi.retval
  %e5 = mpi.allreduce(%buf, %out, MPI_BXOR, %c) : memref<16xf32>, memref<16xf32> -> !mpi.retval
  // CHECK-NEXT: %[[CLASS:.*]] = mpi.error_class %[[E]] : !mpi.retval
  %class = mpi.error_class %e : !mpi.retval
  // CHECK-NEXT: %[[OK:.*]] = mpi.retval_check %[[CLASS]] = <MPI_SUCCESS> : i1
  %ok = mpi.retval_check %class = <MPI_SUCCESS> : i1
  // CHECK-NEXT: %{{.*}} = mpi.finalize : !mpi.retval
  %e6 = mpi.finalize : !mpi.retval
  // CHECK-NEXT: func.return %[[OK]] : i1
  func.return %ok : i1
}
