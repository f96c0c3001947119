// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | dhir-opt | filecheck %s

// Every op of upstream MLIR 22's mpi dialect in its custom syntax, with and
// without the optional !mpi.retval result.

// CHECK-LABEL: func.func @lifecycle
func.func @lifecycle() {
  // CHECK-NEXT: mpi.init{{$}}
  mpi.init
  // CHECK-NEXT: %{{.*}} = mpi.init : !mpi.retval
  %e0 = mpi.init : !mpi.retval
  // CHECK-NEXT: mpi.finalize{{$}}
  mpi.finalize
  // CHECK-NEXT: %{{.*}} = mpi.finalize : !mpi.retval
  %e1 = mpi.finalize : !mpi.retval
  func.return
}

// CHECK-LABEL: func.func @communicators
func.func @communicators(%color: i32, %key: i32) {
  // CHECK-NEXT: %[[C:.*]] = mpi.comm_world : !mpi.comm
  %c = mpi.comm_world : !mpi.comm
  // CHECK-NEXT: %{{.*}} = mpi.comm_rank(%[[C]]) : i32
  %rank = mpi.comm_rank(%c) : i32
  // CHECK-NEXT: %{{.*}}, %{{.*}} = mpi.comm_rank(%[[C]]) : !mpi.retval, i32
  %e0, %rank1 = mpi.comm_rank(%c) : !mpi.retval, i32
  // CHECK-NEXT: %{{.*}} = mpi.comm_size(%[[C]]) : i32
  %size = mpi.comm_size(%c) : i32
  // CHECK-NEXT: %{{.*}}, %{{.*}} = mpi.comm_size(%[[C]]) : !mpi.retval, i32
  %e1, %size1 = mpi.comm_size(%c) : !mpi.retval, i32
  // CHECK-NEXT: %{{.*}} = mpi.comm_split(%[[C]], %{{.*}}, %{{.*}}) : !mpi.comm
  %sub = mpi.comm_split(%c, %color, %key) : !mpi.comm
  // CHECK-NEXT: %{{.*}}, %{{.*}} = mpi.comm_split(%[[C]], %{{.*}}, %{{.*}}) : !mpi.retval, !mpi.comm
  %e2, %sub1 = mpi.comm_split(%c, %color, %key) : !mpi.retval, !mpi.comm
  // CHECK-NEXT: mpi.barrier(%[[C]]){{$}}
  mpi.barrier(%c)
  // CHECK-NEXT: %{{.*}} = mpi.barrier(%[[C]]) -> !mpi.retval
  %e3 = mpi.barrier(%c) -> !mpi.retval
  func.return
}

// CHECK-LABEL: func.func @point_to_point
func.func @point_to_point(%buf: memref<16xf32>, %tag: i32, %peer: i32, %c: !mpi.comm) {
  // CHECK-NEXT: mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xf32>, i32, i32{{$}}
  mpi.send(%buf, %tag, %peer, %c) : memref<16xf32>, i32, i32
  // CHECK-NEXT: %{{.*}} = mpi.send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xf32>, i32, i32 -> !mpi.retval
  %e0 = mpi.send(%buf, %tag, %peer, %c) : memref<16xf32>, i32, i32 -> !mpi.retval
  // CHECK-NEXT: mpi.recv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xf32>, i32, i32{{$}}
  mpi.recv(%buf, %tag, %peer, %c) : memref<16xf32>, i32, i32
  // CHECK-NEXT: %{{.*}} = mpi.recv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<16xf32>, i32, i32 -> !mpi.retval
  %e1 = mpi.recv(%buf, %tag, %peer, %c) : memref<16xf32>, i32, i32 -> !mpi.retval
  func.return
}

// CHECK-LABEL: func.func @non_blocking
func.func @non_blocking(%buf: memref<4x4xi64>, %tag: i32, %peer: i32, %c: !mpi.comm) {
  // CHECK-NEXT: %[[R0:.*]] = mpi.isend(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<4x4xi64>, i32, i32 -> !mpi.request
  %r0 = mpi.isend(%buf, %tag, %peer, %c) : memref<4x4xi64>, i32, i32 -> !mpi.request
  // CHECK-NEXT: %{{.*}}, %[[R1:.*]] = mpi.isend(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<4x4xi64>, i32, i32 -> !mpi.retval, !mpi.request
  %e0, %r1 = mpi.isend(%buf, %tag, %peer, %c) : memref<4x4xi64>, i32, i32 -> !mpi.retval, !mpi.request
  // CHECK-NEXT: %[[R2:.*]] = mpi.irecv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<4x4xi64>, i32, i32 -> !mpi.request
  %r2 = mpi.irecv(%buf, %tag, %peer, %c) : memref<4x4xi64>, i32, i32 -> !mpi.request
  // CHECK-NEXT: %{{.*}}, %{{.*}} = mpi.irecv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : memref<4x4xi64>, i32, i32 -> !mpi.retval, !mpi.request
  %e1, %r3 = mpi.irecv(%buf, %tag, %peer, %c) : memref<4x4xi64>, i32, i32 -> !mpi.retval, !mpi.request
  // CHECK-NEXT: mpi.wait(%[[R0]]) : !mpi.request{{$}}
  mpi.wait(%r0) : !mpi.request
  // CHECK-NEXT: %{{.*}} = mpi.wait(%[[R1]]) : !mpi.request -> !mpi.retval
  %e2 = mpi.wait(%r1) : !mpi.request -> !mpi.retval
  func.return
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%a: memref<8xf64>, %b: memref<8xf64>, %c: !mpi.comm) {
  // CHECK-NEXT: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_SUM, %{{.*}}) : memref<8xf64>, memref<8xf64>{{$}}
  mpi.allreduce(%a, %b, MPI_SUM, %c) : memref<8xf64>, memref<8xf64>
  // CHECK-NEXT: %{{.*}} = mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MAX, %{{.*}}) : memref<8xf64>, memref<8xf64> -> !mpi.retval
  %e0 = mpi.allreduce(%a, %b, MPI_MAX, %c) : memref<8xf64>, memref<8xf64> -> !mpi.retval
  // Upstream also accepts the reduction as a string.
  // CHECK-NEXT: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_REPLACE, %{{.*}}) : memref<8xf64>, memref<8xf64>{{$}}
  mpi.allreduce(%a, %b, "MPI_REPLACE", %c) : memref<8xf64>, memref<8xf64>
  func.return
}

// CHECK-LABEL: func.func @errors
func.func @errors(%e: !mpi.retval) -> (i1, i1) {
  // CHECK-NEXT: %{{.*}} = mpi.retval_check %{{.*}} = <MPI_SUCCESS> : i1
  %ok = mpi.retval_check %e = <MPI_SUCCESS> : i1
  // CHECK-NEXT: %[[CLASS:.*]] = mpi.error_class %{{.*}} : !mpi.retval
  %class = mpi.error_class %e : !mpi.retval
  // CHECK-NEXT: %{{.*}} = mpi.retval_check %[[CLASS]] = <MPI_ERR_UNSUPPORTED_OPERATION> : i1
  %bad = mpi.retval_check %class = <MPI_ERR_UNSUPPORTED_OPERATION> : i1
  func.return %ok, %bad : i1, i1
}

// CHECK-LABEL: func.func @types
// CHECK-SAME: (%{{.*}}: !mpi.comm, %{{.*}}: !mpi.request, %{{.*}}: !mpi.retval, %{{.*}}: !mpi.status)
func.func @types(%c: !mpi.comm, %r: !mpi.request, %e: !mpi.retval, %s: !mpi.status) {
  func.return
}
