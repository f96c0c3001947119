// dhir-copy-checks: a host memref.copy whose views dhir cannot tell apart before the run
// (an offset known at run time only, views of arguments) compares their byte ranges and,
// where they meet, asks the runtime whether they share an element; a cf.assert stops the
// rank at the copy when they do. Copies the analysis decides get no check.
// RUN: dhir-opt %s -p dhir-copy-checks | filecheck %s

// CHECK-LABEL: func.func @run_time
func.func @run_time(%a: memref<16xi32>, %n: index) {
  %x = memref.subview %a[%n] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: ?>>
  %y = memref.subview %a[8] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: 8>>
  // CHECK:      memref.extract_strided_metadata %x
  // CHECK:      memref.extract_aligned_pointer_as_index %x
  // CHECK:      memref.extract_strided_metadata %y
  // CHECK:      arith.cmpi sle
  // CHECK:      %[[FOUND:.*]] = scf.if %{{.*}} -> (i1) {
  // CHECK:        func.call @dhir_rt_copy_views(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i64) -> ()
  // CHECK:        func.call @dhir_rt_copy_dim(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i64, i64) -> ()
  // CHECK:        %[[ANSWER:.*]] = func.call @dhir_rt_copy_overlaps() : () -> i64
  // CHECK:      } else {
  // CHECK:      %[[OK:.*]] = arith.xori %[[FOUND]], %{{.*}} : i1
  // CHECK-NEXT: cf.assert %[[OK]], "ERROR: Runtime op verification failed\0A^ memref.copy copies between views that overlap
  // CHECK-SAME: Location: loc(\22{{.*}}copy_checks.mlir\22:[[# @LINE + 1]]:3)"
  memref.copy %x, %y : memref<4xi32, strided<[1], offset: ?>> to memref<4xi32, strided<[1], offset: 8>>
  return
}

// CHECK-LABEL: func.func @decided
func.func @decided(%a: memref<16xi32>) {
  %x = memref.subview %a[0] [4] [2] : memref<16xi32> to memref<4xi32, strided<[2]>>
  %y = memref.subview %a[1] [4] [2] : memref<16xi32> to memref<4xi32, strided<[2], offset: 1>>
  %b = memref.alloc() : memref<4xi32, strided<[2]>>
  // CHECK-NOT:  dhir_rt_copy
  // CHECK:      memref.copy %x, %y
  memref.copy %x, %y : memref<4xi32, strided<[2]>> to memref<4xi32, strided<[2], offset: 1>>
  // CHECK-NOT:  dhir_rt_copy
  // CHECK:      memref.copy %x, %b
  memref.copy %x, %b : memref<4xi32, strided<[2]>> to memref<4xi32, strided<[2]>>
  return
}

// A buffer allocated here is none of the function's arguments (no check); one carried
// through a loop's iter_args may be the buffer itself (a check).
// CHECK-LABEL: func.func @carried
func.func @carried(%a: memref<16xi32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.alloc() : memref<16xi32>
  // CHECK-NOT:  dhir_rt_copy
  // CHECK:      memref.copy %a, %m
  memref.copy %a, %m : memref<16xi32> to memref<16xi32>
  // CHECK:      scf.for
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%c = %m) -> (memref<16xi32>) {
    %x = memref.subview %c[%i] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: ?>>
    %y = memref.subview %m[8] [4] [1] : memref<16xi32> to memref<4xi32, strided<[1], offset: 8>>
    // CHECK:    func.call @dhir_rt_copy_overlaps()
    // CHECK:    memref.copy %x, %y
    memref.copy %x, %y : memref<4xi32, strided<[1], offset: ?>> to memref<4xi32, strided<[1], offset: 8>>
    scf.yield %c : memref<16xi32>
  }
  return
}

// CHECK: func.func private @dhir_rt_copy_views(i64, i64, i64, i64)
// CHECK: func.func private @dhir_rt_copy_dim(i64, i64, i64, i64, i64)
// CHECK: func.func private @dhir_rt_copy_overlaps() -> i64
