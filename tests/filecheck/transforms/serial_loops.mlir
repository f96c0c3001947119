// RUN: dhir-opt %s -p dhir-serial-loops | filecheck %s
// RUN: dhir-opt %s -p dhir-serial-loops --print-op-generic | mlir-opt-22 --allow-unregistered-dialect --lower-affine --convert-scf-to-openmp > /dev/null

// Parallel loops that reach MPI or dhir's runtime (a schedule, a call of a function
// holding one, an external function other than libm's) become sequential nests with the
// same bounds; reductions fold in order into the initial value (affine.parallel: the
// identity). Loops that reach neither stay parallel.

func.func private @unknown(i32) -> i32
func.func private @expm1f(f32) -> f32

func.func @holds_schedule(%a: memref<8xi32>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a {
      %z = arith.constant 0 : index
      %v = memref.load %a[%z] : memref<8xi32>
      memref.store %v, %a[%z] : memref<8xi32>
    }
  }
  return
}

func.func @calls_it(%a: memref<8xi32>) {
  func.call @holds_schedule(%a) : (memref<8xi32>) -> ()
  return
}

// CHECK-LABEL: func.func @scf_reduction
// CHECK:         %[[S:.*]] = scf.for %[[I:.*]] = %c0 to %c4 step %c1 iter_args(%[[A:.*]] = %zero) -> (i32) {
// CHECK-NEXT:      %[[R:.*]] = scf.for %[[J:.*]] = %c1 to %c3 step %c2 iter_args(%[[B:.*]] = %[[A]]) -> (i32) {
// CHECK-NEXT:        func.call @calls_it(%a)
// CHECK-NEXT:        %[[X:.*]] = arith.index_cast %[[J]]
// CHECK-NEXT:        %[[M:.*]] = arith.muli %[[B]], %[[X]] : i32
// CHECK-NEXT:        %[[N:.*]] = arith.addi %[[M]], %[[X]] : i32
// CHECK-NEXT:        scf.yield %[[N]] : i32
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield %[[R]] : i32
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.store %[[S]], %out[%c0]
// CHECK-NOT:     scf.parallel
func.func @scf_reduction(%a: memref<8xi32>, %out: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0 : i32
  %s = scf.parallel (%i, %j) = (%c0, %c1) to (%c4, %c3) step (%c1, %c2) init (%zero) -> i32 {
    func.call @calls_it(%a) : (memref<8xi32>) -> ()
    %x = arith.index_cast %j : index to i32
    scf.reduce(%x : i32) {
    ^bb0(%l: i32, %r: i32):
      %m = arith.muli %l, %r : i32
      %n = arith.addi %m, %r : i32
      scf.reduce.return %n : i32
    }
  }
  memref.store %s, %out[%c0] : memref<1xi32>
  return
}

// CHECK-LABEL: func.func @affine_reductions
// CHECK:         %[[NEG:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    %[[ONES:.*]] = arith.constant -1 : i32
// CHECK-NEXT:    %{{.*}}, %{{.*}} = affine.for %[[I:.*]] = affine_map<()[s0] -> (0)>()[%n] to 4 iter_args(%[[F:.*]] = %[[NEG]], %[[G:.*]] = %[[ONES]]) -> (f32, i32) {
// CHECK-NEXT:      %{{.*}}, %{{.*}} = affine.for %{{.*}} = max affine_map<()[s0] -> (1, s0)>()[%n] to min affine_map<() -> (3, 8)>() step 2 iter_args(%[[F2:.*]] = %[[F]], %[[G2:.*]] = %[[G]]) -> (f32, i32) {
// CHECK:             %[[H:.*]] = func.call @unknown
// CHECK-NEXT:        %[[V:.*]] = arith.sitofp %[[H]]
// CHECK-NEXT:        %{{.*}} = arith.maximumf %[[F2]], %[[V]] : f32
// CHECK-NEXT:        %{{.*}} = arith.andi %[[G2]], %[[H]] : i32
// CHECK-NEXT:        affine.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.yield
// CHECK-NEXT:    }
// CHECK-NOT:     affine.parallel
func.func @affine_reductions(%n: index) -> (f32, i32) {
  %p:2 = affine.parallel (%i, %j) = (0, max(1, symbol(%n))) to (4, min(3, 8)) step (1, 2) reduce ("maximumf", "andi") -> (f32, i32) {
    %f = arith.index_cast %i : index to i32
    %h = func.call @unknown(%f) : (i32) -> i32
    %v = arith.sitofp %h : i32 to f32
    affine.yield %v, %h : f32, i32
  }
  return %p#0, %p#1 : f32, i32
}

// CHECK-LABEL: func.func @stay_parallel
// CHECK:         affine.parallel
// CHECK:         scf.parallel
// CHECK:           func.call @expm1f
func.func @stay_parallel(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  affine.parallel (%i) = (0) to (4) {
    %f = arith.index_cast %i : index to i32
    %g = arith.sitofp %f : i32 to f32
    affine.store %g, %out[%i] : memref<4xf32>
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %z = arith.constant 0.0 : f32
    %e = func.call @expm1f(%z) : (f32) -> f32
    memref.store %e, %out[%i] : memref<4xf32>
  }
  return
}

// An inner loop that reaches nothing stays parallel inside the outer one made sequential.
// CHECK-LABEL: func.func @nested
// CHECK:         scf.for
// CHECK:           scf.parallel
// CHECK:           dhir.schedule
func.func @nested(%a: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      %x = arith.index_cast %j : index to i32
      memref.store %x, %a[%j] : memref<8xi32>
    }
    dhir.schedule %a {
      %cpu = dhir.target {kind = "cpu"}
      %t = dhir.task %cpu, %a {
        %z = arith.constant 0 : index
        %v = memref.load %a[%z] : memref<8xi32>
        memref.store %v, %a[%z] : memref<8xi32>
      }
    }
  }
  return
}

// Reductions convert-scf-to-openmp cannot make OpenMP ones of (it stops with "unconverted
// operation found") run sequentially too: a body of two ops, swapped arguments, an index.
// One op of the two arguments in order, or a compare and a select, stays parallel.
// CHECK-LABEL: func.func @reductions
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         scf.parallel
// CHECK:           arith.muli %{{.*}}, %{{.*}} : i32
// CHECK:         scf.parallel
// CHECK:           arith.cmpi ult
// CHECK-NOT:     scf.for
func.func @reductions(%a: memref<8xi32>, %out: memref<5xi32>, %n: memref<1xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0 : i32
  %r0 = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> i32 {
    %v = memref.load %a[%i] : memref<8xi32>
    scf.reduce(%v : i32) {
    ^bb0(%l: i32, %q: i32):
      %s = arith.addi %l, %q : i32
      %t = arith.addi %s, %q : i32
      scf.reduce.return %t : i32
    }
  }
  %r1 = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> i32 {
    %v = memref.load %a[%i] : memref<8xi32>
    scf.reduce(%v : i32) {
    ^bb0(%l: i32, %q: i32):
      %s = arith.addi %q, %l : i32
      scf.reduce.return %s : i32
    }
  }
  %r2 = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%c0) -> index {
    scf.reduce(%i : index) {
    ^bb0(%l: index, %q: index):
      %s = arith.addi %l, %q : index
      scf.reduce.return %s : index
    }
  }
  %r3 = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> i32 {
    %v = memref.load %a[%i] : memref<8xi32>
    scf.reduce(%v : i32) {
    ^bb0(%l: i32, %q: i32):
      %s = arith.muli %l, %q : i32
      scf.reduce.return %s : i32
    }
  }
  %r4 = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> i32 {
    %v = memref.load %a[%i] : memref<8xi32>
    scf.reduce(%v : i32) {
    ^bb0(%l: i32, %q: i32):
      %c = arith.cmpi ult, %l, %q : i32
      %s = arith.select %c, %q, %l : i32
      scf.reduce.return %s : i32
    }
  }
  memref.store %r0, %out[%c0] : memref<5xi32>
  memref.store %r1, %out[%c0] : memref<5xi32>
  memref.store %r2, %n[%c0] : memref<1xindex>
  memref.store %r3, %out[%c0] : memref<5xi32>
  memref.store %r4, %out[%c0] : memref<5xi32>
  return
}

// A loop the native backend marks dhir.in_order (its iterations' independence is not
// proven) runs them in order too.
// CHECK-LABEL: func.func @in_order
// CHECK:         scf.for %[[I:.*]] = %c0 to %n step %c1 {
// CHECK-NEXT:      %[[X:.*]] = memref.load %a[%[[I]]]
// CHECK-NOT:     scf.parallel
func.func @in_order(%a: memref<?xi64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %a[%i] : memref<?xi64>
    %k = arith.index_cast %x : i64 to index
    memref.store %x, %a[%k] : memref<?xi64>
  } {dhir.in_order}
  return
}
