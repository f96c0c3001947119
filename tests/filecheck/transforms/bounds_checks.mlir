// dhir-bounds-checks: a check before each scalar access of host code whose subscripts
// dhir does not prove in bounds (here a subscript loaded from memory), along those
// dimensions only; none for accesses proven in bounds (loop bounds, triangles, tiles and
// steps, a size memref.dim measures).
// RUN: dhir-opt %s -p dhir-bounds-checks | filecheck %s

// CHECK-LABEL: func.func @gather
// CHECK:      %x = memref.load %a[%i, %j] : memref<4x8xf64>
// CHECK:      %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi ult, %k, %[[EIGHT]] : index
// CHECK:      scf.if
// CHECK:      func.call @dhir_rt_out_of_bounds
// CHECK:      cf.assert %[[IN]], "ERROR: Runtime op verification failed\0A^ out-of-bounds access\0ALocation: loc(\22{{.*}}bounds_checks.mlir\22:25:12)"
// CHECK-NEXT: %y = memref.load %a[%i, %k] : memref<4x8xf64>
func.func @gather(%a: memref<4x8xf64>, %idx: memref<8xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %x = memref.load %a[%i, %j] : memref<4x8xf64>
      %r = memref.load %idx[%j] : memref<8xi64>
      %k = arith.index_cast %r : i64 to index
      %y = memref.load %a[%i, %k] : memref<4x8xf64>
      %z = arith.addf %x, %y : f64
      memref.store %z, %a[%i, %j] : memref<4x8xf64>
    }
  }
  return
}

// Proven: a triangle (j < i), an unrolled loop of step 4 (i + 3 < 16), tiles that
// stop at the size (min(t + 4, n)), and affine accesses.
// CHECK-LABEL: func.func @proven
// CHECK-NOT:  cf.assert
// CHECK:      return
func.func @proven(%a: memref<16x16xf64>, %b: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %f = arith.constant 1.0 : f64
  scf.for %i = %c0 to %c16 step %c1 {
    scf.for %j = %c0 to %i step %c1 {
      memref.store %f, %a[%i, %j] : memref<16x16xf64>
    }
  }
  scf.for %i = %c0 to %c16 step %c4 {
    %i3 = arith.addi %i, %c3 : index
    memref.store %f, %a[%i3, %i3] : memref<16x16xf64>
  }
  %n = memref.dim %b, %c0 : memref<?xf64>
  scf.for %t = %c0 to %n step %c4 {
    %e = arith.addi %t, %c4 : index
    %end = arith.minsi %e, %n : index
    scf.for %k = %t to %end step %c1 {
      memref.store %f, %b[%k] : memref<?xf64>
    }
  }
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 16 {
      affine.store %f, %a[%i, 15 - %j] : memref<16x16xf64>
    }
  }
  return
}

// An affine.load past the end (i + 1 for i up to 15) becomes the memref.load
// --lower-affine makes, checked.
// CHECK-LABEL: func.func @affine_past_end
// CHECK:      %[[NEXT:.*]] = affine.apply
// CHECK:      arith.cmpi ult, %[[NEXT]]
// CHECK:      cf.assert
// CHECK-NEXT: memref.load %a[%[[NEXT]]] : memref<16xf64>
func.func @affine_past_end(%a: memref<16xf64>) {
  affine.for %i = 0 to 16 {
    %x = affine.load %a[%i + 1] : memref<16xf64>
    affine.store %x, %a[%i] : memref<16xf64>
  }
  return
}

// A private function's argument takes the bounds of every call's: %t of the time loop
// (0 to 15) is in @step's bounds, where a call with 16 is not, nor a public function's.
// CHECK-LABEL: func.func private @step
// CHECK-NOT:  cf.assert
// CHECK:      return
// CHECK-LABEL: func.func private @past
// CHECK:      cf.assert
// CHECK-LABEL: func.func @public
// CHECK:      cf.assert
// CHECK-LABEL: func.func @time_loop
func.func private @step(%a: memref<16xf64>, %t: index) {
  %x = memref.load %a[%t] : memref<16xf64>
  return
}
func.func private @past(%a: memref<16xf64>, %t: index) {
  %x = memref.load %a[%t] : memref<16xf64>
  return
}
func.func @public(%a: memref<16xf64>, %t: index) {
  %x = memref.load %a[%t] : memref<16xf64>
  return
}
func.func @time_loop(%a: memref<16xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.for %t = %c0 to %c16 step %c1 {
    func.call @step(%a, %t) : (memref<16xf64>, index) -> ()
    func.call @past(%a, %t) : (memref<16xf64>, index) -> ()
    func.call @public(%a, %t) : (memref<16xf64>, index) -> ()
  }
  func.call @past(%a, %c16) : (memref<16xf64>, index) -> ()
  return
}
