// RUN: dhir-opt %s --split-input-file --verify-diagnostics
// RUN: not dhir-opt %s --split-input-file 2>&1 | filecheck %s

func.func @unknown_reduction(%b: memref<4xf32>, %c: !mpi.comm) {
  // expected-error@+1 {{Expected `MPI_OP_NULL`, `MPI_MAX`, `MPI_MIN`}}
  mpi.allreduce(%b, %b, MPI_AVG, %c) : memref<4xf32>, memref<4xf32>
  func.return
}
// CHECK: Expected `MPI_OP_NULL`, `MPI_MAX`, `MPI_MIN`, `MPI_SUM`, {{.*}} or `MPI_REPLACE`.

// -----

func.func @unknown_error_class(%e: !mpi.retval) {
  // expected-error@+1 {{Expected `MPI_SUCCESS`, `MPI_ERR_ACCESS`}}
  %ok = mpi.retval_check %e = <MPI_ERR_NOPE> : i1
  func.return
}
// CHECK: Expected `MPI_SUCCESS`, `MPI_ERR_ACCESS`, {{.*}} or `MPI_ERR_LASTCODE`.

// -----

// The error class takes its angle brackets even in the op's custom form.
func.func @bare_error_class(%e: !mpi.retval) {
  // expected-error@+1 {{'<' expected}}
  %ok = mpi.retval_check %e = MPI_SUCCESS : i1
  func.return
}
// CHECK: '<' expected

// -----

func.func @no_parens(%c: !mpi.comm) {
  // expected-error@+1 {{Expected '('}}
  %r = mpi.comm_rank %c : i32
  func.return
}
// CHECK: Expected '('
