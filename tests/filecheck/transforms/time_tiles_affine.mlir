// dhir-time-tiles takes a time loop written with affine.for around sweeps written with
// affine.for, affine.load and affine.store as it takes their scf form (made so first, as
// --lower-affine makes them): on one rank, the schedule becomes one task.
// RUN: dhir-opt %s -p 'dhir-time-tiles{steps=2}' | filecheck %s

// CHECK:      dhir.schedule %A, %B {
// CHECK-NEXT:   %{{.*}} = dhir.target {kind = "cpu"}
// CHECK-NEXT:   dhir.task %{{.*}}, %A, %B {
// CHECK-NOT:  dhir.task
// CHECK-NOT:  affine.

func.func @main(%A: memref<12x8xf64>, %B: memref<12x8xf64>) {
  affine.for %t = 0 to 4 {
    dhir.schedule %A, %B {
      %cpu = dhir.target {kind = "cpu"}
      %s0 = dhir.task %cpu, %A, %B {
        %w = arith.constant 0.2 : f64
        affine.for %i = 1 to 11 {
          affine.for %j = 1 to 7 {
            %c = affine.load %A[%i, %j] : memref<12x8xf64>
            %l = affine.load %A[%i, %j - 1] : memref<12x8xf64>
            %r = affine.load %A[%i, %j + 1] : memref<12x8xf64>
            %u = affine.load %A[%i - 1, %j] : memref<12x8xf64>
            %d = affine.load %A[%i + 1, %j] : memref<12x8xf64>
            %s1 = arith.addf %c, %l : f64
            %s2 = arith.addf %s1, %r : f64
            %s3 = arith.addf %s2, %d : f64
            %s4 = arith.addf %s3, %u : f64
            %v = arith.mulf %w, %s4 : f64
            affine.store %v, %B[%i, %j] : memref<12x8xf64>
          }
        }
      }
      %s1 = dhir.task %cpu, %B, %A {
        %w = arith.constant 0.2 : f64
        affine.for %i = 1 to 11 {
          affine.for %j = 1 to 7 {
            %c = affine.load %B[%i, %j] : memref<12x8xf64>
            %l = affine.load %B[%i, %j - 1] : memref<12x8xf64>
            %r = affine.load %B[%i, %j + 1] : memref<12x8xf64>
            %u = affine.load %B[%i - 1, %j] : memref<12x8xf64>
            %d = affine.load %B[%i + 1, %j] : memref<12x8xf64>
            %s1 = arith.addf %c, %l : f64
            %s2 = arith.addf %s1, %r : f64
            %s3 = arith.addf %s2, %d : f64
            %s4 = arith.addf %s3, %u : f64
            %v = arith.mulf %w, %s4 : f64
            affine.store %v, %A[%i, %j] : memref<12x8xf64>
          }
        }
      }
    }
  }
  return
}
