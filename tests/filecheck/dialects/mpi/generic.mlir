// RUN: dhir-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: dhir-opt %s | filecheck %s --check-prefix=CUSTOM

// The generic form upstream prints (`mlir-opt-22 --mlir-print-op-generic`):
// the reduction is a plain i32 property, the error class a dialect attribute.
// An inherent attribute spelled in the attribute dictionary is moved into the
// properties, as mlir-opt does.

"builtin.module"() ({
  "func.func"() <{function_type = (memref<4xf32>, memref<4xf32>) -> (), sym_name = "f"}> ({
  ^bb0(%a: memref<4xf32>, %b: memref<4xf32>):
    %e = "mpi.init"() : () -> !mpi.retval
    %c = "mpi.comm_world"() : () -> !mpi.comm
    %rank:2 = "mpi.comm_rank"(%c) : (!mpi.comm) -> (!mpi.retval, i32)
    "mpi.allreduce"(%a, %b, %c) <{op = 3 : i32}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
    %e2 = "mpi.allreduce"(%a, %b, %c) {op = 12 : i32} : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> !mpi.retval
    %ok = "mpi.retval_check"(%e) <{errclass = #mpi.errclass<MPI_ERR_RANK>}> : (!mpi.retval) -> i1
    "mpi.finalize"() : () -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()

// GENERIC:      %{{.*}} = "mpi.init"() : () -> !mpi.retval
// GENERIC-NEXT: %[[C:.*]] = "mpi.comm_world"() : () -> !mpi.comm
// GENERIC-NEXT: %{{.*}}, %{{.*}} = "mpi.comm_rank"(%[[C]]) : (!mpi.comm) -> (!mpi.retval, i32)
// GENERIC-NEXT: "mpi.allreduce"(%{{.*}}, %{{.*}}, %[[C]]) <{op = 3 : i32}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
// GENERIC-NEXT: %{{.*}} = "mpi.allreduce"(%{{.*}}, %{{.*}}, %[[C]]) <{op = 12 : i32}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> !mpi.retval
// GENERIC-NEXT: %{{.*}} = "mpi.retval_check"(%{{.*}}) <{errclass = #mpi.errclass<MPI_ERR_RANK>}> : (!mpi.retval) -> i1
// GENERIC-NEXT: "mpi.finalize"() : () -> ()

// CUSTOM:      %{{.*}} = mpi.init : !mpi.retval
// CUSTOM-NEXT: %[[C:.*]] = mpi.comm_world : !mpi.comm
// CUSTOM-NEXT: %{{.*}}, %{{.*}} = mpi.comm_rank(%[[C]]) : !mpi.retval, i32
// CUSTOM-NEXT: mpi.allreduce(%{{.*}}, %{{.*}}, MPI_SUM, %[[C]]) : memref<4xf32>, memref<4xf32>
// CUSTOM-NEXT: %{{.*}} = mpi.allreduce(%{{.*}}, %{{.*}}, MPI_MAXLOC, %[[C]]) : memref<4xf32>, memref<4xf32> -> !mpi.retval
// CUSTOM-NEXT: %{{.*}} = mpi.retval_check %{{.*}} = <MPI_ERR_RANK> : i1
// CUSTOM-NEXT: mpi.finalize
