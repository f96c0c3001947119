// dhir-loop-steps: a host loop whose step is known only at run time calls the runtime
// before it when that step is 0 or less, with the loop's line and column; loops of
// constant steps and loops in device code are left alone.
// RUN: dhir-opt %s -p dhir-loop-steps | filecheck %s

// CHECK-LABEL: func.func @run_time
func.func @run_time(%a: memref<16xi32>, %st: index, %n: i32) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 7 : i32
  // CHECK:      %z = arith.constant 7 : i32
  // CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : index
  // CHECK-NEXT: %[[BAD:.*]] = arith.cmpi sle, %st, %[[ZERO]] : index
  // CHECK-NEXT: scf.if %[[BAD]] {
  // CHECK-NEXT:   %[[WIDE:.*]] = arith.index_cast %st : index to i64
  // CHECK-NEXT:   %[[LINE:.*]] = arith.constant 21 : i64
  // CHECK-NEXT:   %[[COL:.*]] = arith.constant 3 : i64
  // CHECK-NEXT:   func.call @dhir_rt_bad_step(%[[WIDE]], %[[LINE]], %[[COL]]) : (i64, i64, i64) -> ()
  // CHECK-NEXT: }
  // CHECK-NEXT: scf.for %{{.*}} = %c0 to %c8 step %st {
  scf.for %i = %c0 to %c8 step %st {
    memref.store %z, %a[%i] : memref<16xi32>
  }
  // CHECK:      arith.cmpi sle, %n, %{{.*}} : i32
  // CHECK:      arith.extsi %n : i32 to i64
  // CHECK:      scf.for %{{.*}} = %{{.*}} to %{{.*}} step %n : i32 {
  %lo = arith.constant 0 : i32
  %hi = arith.constant 8 : i32
  scf.for %j = %lo to %hi step %n : i32 {
    %i = arith.index_cast %j : i32 to index
    memref.store %z, %a[%i] : memref<16xi32>
  }
  // CHECK-NOT:  dhir_rt_bad_step(
  // CHECK:      scf.for %{{.*}} = %c0 to %c8 step %c8 {
  scf.for %i = %c0 to %c8 step %c8 {
    memref.store %z, %a[%i] : memref<16xi32>
  }
  return
}

// An affine loop's counter is checked with its bounds as --lower-affine computes them: the
// greatest lower bound and the least upper bound, made before the loop.
// CHECK-LABEL: func.func @affine_bounds
func.func @affine_bounds(%a: memref<16xi32>, %lo: index, %hi: index) {
  %z = arith.constant 7 : i32
  // CHECK:      %[[LB:.*]] = affine.max affine_map<()[s0, s1] -> (s0, (s1 + -8))>()[%lo, %hi]
  // CHECK-NEXT: %[[UB:.*]] = affine.apply affine_map<()[s0] -> (s0)> ()[%hi]
  // CHECK:      arith.cmpi slt, %[[LB]], %[[UB]] : index
  // CHECK:      func.call @dhir_rt_counter_overflow
  // CHECK:      affine.for
  affine.for %i = max affine_map<()[s0, s1] -> (s0, s1 - 8)>()[%lo, %hi] to %hi step 4 {
    affine.store %z, %a[0] : memref<16xi32>
  }
  // Constant bounds that cannot overflow: nothing added.
  // CHECK-NOT:  affine.max
  // CHECK:      affine.parallel
  affine.parallel (%i) = (0) to (16) step (4) {
    affine.store %z, %a[%i] : memref<16xi32>
  }
  return
}

// Bounds made of numbers alone, as dhir-optimize-bodies makes its block ends, are read as
// the numbers native code computes (64-bit wrapping, unsigned division): a block loop
// that cannot pass the top gets no guard, one that can still does.
// CHECK-LABEL: func.func @number_bounds
func.func @number_bounds(%a: memref<16xi32>) {
  %z = arith.constant 7 : i32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %room = arith.subi %c16, %c0 : index
  %kept = arith.maxsi %room, %c0 : index
  %blocks = arith.divui %kept, %c64 : index
  %size = arith.muli %blocks, %c64 : index
  %end = arith.addi %c0, %size : index
  // CHECK-NOT:  dhir_rt_counter_overflow(
  // CHECK:      scf.parallel
  scf.parallel (%i) = (%c0) to (%end) step (%c64) {
    memref.store %z, %a[%i] : memref<16xi32>
  }
  // CHECK-NOT:  dhir_rt_counter_overflow(
  // CHECK:      scf.for
  scf.for %i = %c0 to %end step %c64 {
    memref.store %z, %a[%i] : memref<16xi32>
  }
  // 2**62 * 2 - 1 wraps to 2**63 - 1: from 0 step 2**62, the counter passes the top.
  %quarter = arith.constant 4611686018427387904 : index
  %c2 = arith.constant 2 : index
  %half = arith.muli %quarter, %c2 : index
  %top = arith.subi %half, %c1 : index
  // CHECK:      func.call @dhir_rt_counter_overflow
  // CHECK:      scf.for
  scf.for %i = %c0 to %top step %quarter {
    memref.store %z, %a[%c0] : memref<16xi32>
  }
  return
}

// CHECK: func.func private @dhir_rt_bad_step(i64, i64, i64)
// CHECK: func.func private @dhir_rt_counter_overflow(i64, i64, i64, i64)
