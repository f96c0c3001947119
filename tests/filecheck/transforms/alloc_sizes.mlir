// dhir-alloc-sizes: a host allocation with sizes known only at run time multiplies its
// bytes size by size, and calls the runtime with its line and column when a size is
// negative or the bytes pass 2^63 - 1; static allocations are left alone.
// RUN: dhir-opt %s -p dhir-alloc-sizes | filecheck %s

// CHECK-LABEL: func.func @run_time
func.func @run_time(%n: index, %m: index) {
  // CHECK:      %[[ZERO:.*]] = arith.constant 0 : i64
  // CHECK-NEXT: %[[STATIC:.*]] = arith.constant 24 : i64
  // CHECK:      %[[N:.*]] = arith.index_cast %n : index to i64
  // CHECK-NEXT: %[[LOW:.*]], %[[HIGH:.*]] = arith.mului_extended %[[STATIC]], %[[N]] : i64
  // CHECK:      arith.cmpi slt, %[[N]], %[[ZERO]] : i64
  // CHECK:      arith.cmpi ne, %[[HIGH]], %[[ZERO]] : i64
  // CHECK:      arith.cmpi slt, %[[LOW]], %[[ZERO]] : i64
  // CHECK:      arith.index_cast %m : index to i64
  // CHECK:      arith.mului_extended %[[LOW]], %{{.*}} : i64
  // CHECK:      scf.if %{{.*}} {
  // CHECK-NEXT:   %[[LINE:.*]] = arith.constant 23 : i64
  // CHECK-NEXT:   %[[COL:.*]] = arith.constant 8 : i64
  // CHECK-NEXT:   func.call @dhir_rt_alloc_too_large(%[[LINE]], %[[COL]]) : (i64, i64) -> ()
  // CHECK-NEXT: }
  // CHECK-NEXT: memref.alloc(%n, %m) : memref<?x3x?xf64>
  %a = memref.alloc(%n, %m) : memref<?x3x?xf64>
  // CHECK-NOT:  dhir_rt_alloc_too_large(
  // CHECK:      memref.alloca() : memref<4xf32>
  %b = memref.alloca() : memref<4xf32>
  return
}
// CHECK: func.func private @dhir_rt_alloc_too_large(i64, i64)
