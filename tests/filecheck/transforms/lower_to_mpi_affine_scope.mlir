// A task's body is an affine scope, so a value loaded at its top is a valid symbol
// there. Under its rank guard (two ranks) it is not: the affine ops it bounds or indexes
// become what mlir-opt-22's --lower-affine makes of them (dhir/transforms/affine_scope.py),
// the others stay. On one rank the body has no guard and stays as written.
// RUN: dhir-opt %s -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-place{ranks=1},dhir-lower-to-mpi{ranks=1}' | filecheck %s --check-prefix=ONE

func.func @main(%a: memref<4xindex>, %b: memref<16xf64>, %c: memref<16xf64>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %t = dhir.task %cpu, %a, %b, %c {
      %n = affine.load %a[0] : memref<4xindex>
      %m = affine.load %a[1] : memref<4xindex>
      affine.for %i = 0 to %n {
        %x = affine.load %b[%i + symbol(%m)] : memref<16xf64>
        affine.store %x, %c[%i] : memref<16xf64>
      }
      affine.for %i = 0 to 4 {
        affine.if affine_set<(d0)[s0] : (d0 - s0 >= 0)>(%i)[%m] {
          %x = affine.load %b[%i] : memref<16xf64>
          affine.store %x, %c[%i + 8] : memref<16xf64>
        }
      }
    }
  }
  return
}

// CHECK-LABEL: func.func private @main.schedule0.part0
// CHECK:      scf.if %on0 {
// CHECK-NEXT:   %n = affine.load %a[0] : memref<4xindex>
// CHECK-NEXT:   %m = affine.load %a[1] : memref<4xindex>
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[STEP:.*]] = arith.constant 1 : index
// CHECK-NEXT:   scf.for %i = %[[ZERO]] to %n step %[[STEP]] {
// CHECK-NEXT:     %[[AT:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%i, %m)
// CHECK-NEXT:     %x = memref.load %b[%[[AT]]] : memref<16xf64>
// CHECK-NEXT:     memref.store %x, %c[%i] : memref<16xf64>
// CHECK-NEXT:   }
// The loop over constants stays affine; the condition on %m becomes an scf.if, whose
// accesses by the loop's counter stay affine.
// CHECK-NEXT:   affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT:     %[[E:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 * -1)))> (%[[I]], %m)
// CHECK-NEXT:     %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[GE:.*]] = arith.cmpi sge, %[[E]], %[[Z]] : index
// CHECK-NEXT:     scf.if %[[GE]] {
// CHECK-NEXT:       %{{.*}} = affine.load %b[%[[I]]] : memref<16xf64>
// CHECK-NEXT:       affine.store %{{.*}}, %c[%[[I]] + 8] : memref<16xf64>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// ONE-LABEL: func.func private @main.schedule0.part0
// ONE:      %n = affine.load %a[0] : memref<4xindex>
// ONE-NEXT: %m = affine.load %a[1] : memref<4xindex>
// ONE-NEXT: affine.for %i = 0 to %n {
// ONE-NEXT:   %x = affine.load %b[%i + symbol(%m)] : memref<16xf64>
// ONE:      affine.if
