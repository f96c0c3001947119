// REQUIRES: mlir
// RUN: dhir-opt %s | mlir-opt-22 --convert-to-llvm | filecheck %s
// RUN: dhir-opt %s | mlir-opt-22 --convert-to-llvm | filecheck %s --check-prefix=LEFT

// mlir-opt-22 lowers dhir's mpi output inside --convert-to-llvm once the
// module names the MPI implementation through DLTI (there is no
// --convert-mpi-to-llvm). comm_size, barrier, isend, irecv, wait,
// retval_check and error_class are not lowered upstream, so they are left out.

module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  func.func @exchange(%buf: memref<16xf32>, %out: memref<16xf32>, %tag: i32) -> i32 {
    mpi.init
    %c = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%c) : i32
    %sub = mpi.comm_split(%c, %tag, %rank) : !mpi.comm
    mpi.send(%buf, %tag, %rank, %sub) : memref<16xf32>, i32, i32
    mpi.recv(%buf, %tag, %rank, %sub) : memref<16xf32>, i32, i32
    %e = mpi.allreduce(%buf, %out, MPI_SUM, %c) : memref<16xf32>, memref<16xf32> -> !mpi.retval
    mpi.finalize
    func.return %rank : i32
  }
}

// CHECK:     module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">}
// CHECK-DAG: llvm.call @MPI_Init(
// CHECK-DAG: llvm.call @MPI_Comm_rank(
// CHECK-DAG: llvm.call @MPI_Comm_split(
// CHECK-DAG: llvm.call @MPI_Send(
// CHECK-DAG: llvm.call @MPI_Recv(
// CHECK-DAG: llvm.call @MPI_Allreduce(
// CHECK-DAG: llvm.call @MPI_Finalize(

// Nothing of the mpi dialect is left.
// LEFT:     module attributes
// LEFT-NOT: mpi.
