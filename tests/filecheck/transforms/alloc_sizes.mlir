// dhir-alloc-sizes: a host allocation with sizes known only at run time multiplies its
// bytes size by size, and calls the runtime with its line and column when a size is
// negative or the bytes pass 2^63 - 1; a host memref.alloc (static too) calls it with its
// bytes when malloc gave none (a null pointer); an alloca is left alone.
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
  // CHECK-NEXT:   %[[LINE:.*]] = arith.constant 24 : i64
  // CHECK-NEXT:   %[[COL:.*]] = arith.constant 8 : i64
  // CHECK-NEXT:   func.call @dhir_rt_alloc_too_large(%[[LINE]], %[[COL]]) : (i64, i64) -> ()
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[A:.*]] = memref.alloc(%n, %m) : memref<?x3x?xf64>
  %a = memref.alloc(%n, %m) : memref<?x3x?xf64>
  // CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i64
  // CHECK-NEXT: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
  // CHECK-NEXT: %[[P64:.*]] = arith.index_cast %[[P]] : index to i64
  // CHECK-NEXT: %[[NULL:.*]] = arith.cmpi eq, %[[P64]], %[[Z]] : i64
  // CHECK-NEXT: %[[SOME:.*]] = arith.cmpi ne, %[[BYTES:.*]], %[[Z]] : i64
  // CHECK-NEXT: %[[FAILED:.*]] = arith.andi %[[NULL]], %[[SOME]] : i1
  // CHECK-NEXT: scf.if %[[FAILED]] {
  // CHECK:        func.call @dhir_rt_alloc_failed(%{{.*}}, %{{.*}}, %[[BYTES]]) : (i64, i64, i64) -> ()
  // CHECK-NOT:  dhir_rt_alloc_too_large(
  // CHECK:      memref.alloca() : memref<4xf32>
  // CHECK-NOT:  dhir_rt_alloc_failed(
  %b = memref.alloca() : memref<4xf32>
  // CHECK:      memref.alloc() : memref<4xf32>
  // CHECK:      arith.constant 16 : i64
  // CHECK:      func.call @dhir_rt_alloc_failed(
  %c = memref.alloc() : memref<4xf32>
  // CHECK:      memref.alloc() : memref<0xf32>
  // CHECK-NOT:  dhir_rt_alloc_failed(
  %d = memref.alloc() : memref<0xf32>
  return
}
// CHECK: func.func private @dhir_rt_alloc_too_large(i64, i64)
// CHECK: func.func private @dhir_rt_alloc_failed(i64, i64, i64)
