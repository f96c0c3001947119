// RUN: dhir-opt %s --split-input-file --verify-diagnostics
// RUN: not dhir-opt %s --split-input-file 2>&1 | filecheck %s

// The same IR is rejected by mlir-opt-22 for the same reasons.

func.func @rank_is_i32(%c: !mpi.comm) {
  // expected-error@+1 {{result 'rank' at position 0 does not verify:}}
  %r = "mpi.comm_rank"(%c) : (!mpi.comm) -> i64
  func.return
}
// CHECK: result 'rank' at position 0 does not verify:
// CHECK-NEXT: Expected attribute i32 but got i64

// -----

// Upstream's AnyMemRef admits ranked memrefs only.
func.func @unranked_buffer(%buf: memref<*xf32>, %t: i32, %c: !mpi.comm) {
  // expected-error@+1 {{operand 'ref' at position 0 does not verify:}}
  "mpi.send"(%buf, %t, %t, %c) : (memref<*xf32>, i32, i32, !mpi.comm) -> ()
  func.return
}
// CHECK: operand 'ref' at position 0 does not verify:
// CHECK-NEXT: memref<*xf32> should be of base attribute memref

// -----

func.func @reduction_out_of_range(%b: memref<4xf32>, %c: !mpi.comm) {
  // expected-error@+1 {{'op' must be an MPI reduction (0..13), got 14}}
  "mpi.allreduce"(%b, %b, %c) <{op = 14 : i32}> : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
  func.return
}
// CHECK: 'op' must be an MPI reduction (0..13), got 14

// -----

func.func @reduction_missing(%b: memref<4xf32>, %c: !mpi.comm) {
  // expected-error@+1 {{property 'op' expected in operation 'mpi.allreduce'}}
  "mpi.allreduce"(%b, %b, %c) : (memref<4xf32>, memref<4xf32>, !mpi.comm) -> ()
  func.return
}
// CHECK: property 'op' expected in operation 'mpi.allreduce'

// -----

func.func @two_ranks(%c: !mpi.comm) {
  // expected-error@+1 {{result 'retval' at position 0 does not verify:}}
  %a, %b = "mpi.comm_rank"(%c) : (!mpi.comm) -> (i32, i32)
  func.return
}
// CHECK: result 'retval' at position 0 does not verify:
// CHECK-NEXT: i32 should be of base attribute mpi.retval

// -----

func.func @check_yields_i1(%e: !mpi.retval) {
  // expected-error@+1 {{result 'res' at position 0 does not verify:}}
  %ok = "mpi.retval_check"(%e) <{errclass = #mpi.errclass<MPI_ERR_COMM>}> : (!mpi.retval) -> i32
  func.return
}
// CHECK: result 'res' at position 0 does not verify:
// CHECK-NEXT: Expected attribute i1 but got i32

// -----

func.func @retval_type(%c: !mpi.comm) {
  // expected-error@+1 {{result 'retval' at position 0 does not verify:}}
  %e = "mpi.barrier"(%c) : (!mpi.comm) -> i32
  func.return
}
// CHECK: result 'retval' at position 0 does not verify:
// CHECK-NEXT: i32 should be of base attribute mpi.retval
