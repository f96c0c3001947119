// dhir-wrap-checks: a host loop of run-time bounds whose index arithmetic the analysis
// takes as exact checks, when it runs, that its bounds keep that arithmetic in 64 bits,
// and calls the runtime with its line and column when they do not; loops of constant
// bounds, and values the bounds' ranges keep in 64 bits, get no check.
// RUN: dhir-opt %s -p dhir-wrap-checks | filecheck %s

// CHECK-LABEL: func.func @run_time
func.func @run_time(%a: memref<16xf64>, %lo: index, %hi: index) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  // CHECK:      arith.cmpi slt, %lo, %hi : index
  // CHECK:      arith.cmpi sgt, %c1, %{{.*}} : index
  // CHECK:      scf.if %{{.*}} {
  // CHECK:        arith.divui
  // CHECK:        arith.muli %{{.*}}, %{{.*}} : i128
  // CHECK:        scf.if %{{.*}} {
  // CHECK-NEXT:     %[[LINE:.*]] = arith.constant 23 : i64
  // CHECK-NEXT:     %[[COL:.*]] = arith.constant 3 : i64
  // CHECK-NEXT:     func.call @dhir_rt_index_wraps(%[[LINE]], %[[COL]]) : (i64, i64) -> ()
  // CHECK-NEXT:   }
  // CHECK-NEXT: }
  // CHECK-NEXT: scf.for %i = %lo to %hi step %c1 {
  scf.for %i = %lo to %hi step %c1 {
    %j = arith.muli %i, %c3 : index
    %x = memref.load %a[%j] : memref<16xf64>
    // CHECK-NOT: dhir_rt_index_wraps(
    // CHECK:     scf.for %k
    scf.for %k = %c1 to %c3 step %c1 {
      %m = arith.muli %k, %c3 : index
      %y = memref.load %a[%m] : memref<16xf64>
    }
  }
  return
}

// CHECK-LABEL: func.func @bounded
func.func @bounded(%a: memref<16xf64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %f = arith.constant 1.0 : f64
  // CHECK-NOT: dhir_rt_index_wraps(
  // CHECK:     scf.parallel
  %top = arith.minsi %n, %c8 : index
  scf.parallel (%i) = (%c0) to (%top) step (%c1) {
    %j = arith.muli %i, %c2 : index
    memref.store %f, %a[%j] : memref<16xf64>
    scf.reduce
  }
  return
}
// CHECK: func.func private @dhir_rt_index_wraps(i64, i64)
