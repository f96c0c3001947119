// dhir-time-tiles runs a time loop of row statements in skewed bands: on one rank as one
// task; on several, as a host loop of bands, each a schedule with a task per rank that
// takes its ghost rows into copies of its own and runs the band there, then a task per
// rank that gives its edge rows back (its whole block after the last band).
// RUN: dhir-opt %s -p 'dhir-time-tiles{steps=2}' | filecheck %s --check-prefix=ONE
// RUN: dhir-opt %s -p 'dhir-time-tiles{steps=2 ranks=2}' | filecheck %s

// ONE:      dhir.schedule %a, %b {
// ONE-NEXT:   %{{.*}} = dhir.target {kind = "cpu"}
// ONE-NEXT:   dhir.task %{{.*}}, %a, %b {
// ONE-NOT: dhir.task

// Rows [1, 11) cut at 6; halos of 2 stages x 2 steps = 4 rows: copies of rows [0, 10)
// and [2, 12).
// CHECK:      %[[A0:.*]] = memref.alloc() {alignment = 64 : i64} : memref<10x8xf64>
// CHECK-NEXT: %[[B0:.*]] = memref.alloc() {alignment = 64 : i64} : memref<10x8xf64>
// CHECK-NEXT: %[[A1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<10x8xf64>
// CHECK-NEXT: %[[B1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<10x8xf64>
// CHECK:      scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:   dhir.schedule %a, %b, %[[A0]], %[[B0]], %[[A1]], %[[B1]] {
// CHECK:          dhir.task %{{.*}}, %a, %b, %[[A0]], %[[B0]] attributes {dhir.rank = 0 : i64} {
// CHECK:            %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK-NEXT:       scf.if %[[FIRST]] {
// CHECK:              memref.subview %a[0, 0] [10, 8] [1, 1]
// CHECK:            } else {
// CHECK:              memref.subview %a[6, 0] [4, 8] [1, 1]
// CHECK:          dhir.task %{{.*}}, %a, %b, %[[A1]], %[[B1]] attributes {dhir.rank = 1 : i64} {
// CHECK:              memref.subview %a[2, 0] [10, 8] [1, 1]
// CHECK:            } else {
// CHECK:              memref.subview %a[2, 0] [4, 8] [1, 1]
// Rank 1's copy starts at row 2: its loads and stores are shifted by 2 rows.
// CHECK:              %[[ROW:.*]] = arith.subi %up{{.*}}, %{{.*}} : index
// CHECK-NEXT:         memref.load %[[A1]][%[[ROW]], %{{.*}}]
// CHECK:          dhir.task %{{.*}}, %a, %b, %[[A0]], %[[B0]] attributes {dhir.rank = 0 : i64} {
// CHECK:            %[[LAST:.*]] = arith.cmpi sge, %{{.*}}, %{{.*}} : index
// CHECK-NEXT:       scf.if %[[LAST]] {
// CHECK:              memref.subview %a[1, 0] [5, 8] [1, 1]
// CHECK:          dhir.task %{{.*}}, %a, %b, %[[A1]], %[[B1]] attributes {dhir.rank = 1 : i64} {
// CHECK:      memref.dealloc %[[A0]]

func.func @jacobi(%a: memref<12x8xf64>, %b: memref<12x8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant 5 : index
  scf.for %t = %c0 to %steps step %c1 {
    dhir.schedule %a, %b {
      %cpu = dhir.target {kind = "cpu"}
      %into_b = dhir.task %cpu, %a, %b {
        %lo = arith.constant 1 : index
        %hi = arith.constant 11 : index
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k8 = arith.constant 8 : index
        scf.for %i = %lo to %hi step %k1 {
          scf.for %j = %k0 to %k8 step %k1 {
            %up = arith.subi %i, %k1 : index
            %down = arith.addi %i, %k1 : index
            %x = memref.load %a[%up, %j] : memref<12x8xf64>
            %y = memref.load %a[%down, %j] : memref<12x8xf64>
            %s = arith.addf %x, %y : f64
            memref.store %s, %b[%i, %j] : memref<12x8xf64>
          }
        }
      }
      %into_a = dhir.task %cpu, %b, %a {
        %lo = arith.constant 1 : index
        %hi = arith.constant 11 : index
        %k0 = arith.constant 0 : index
        %k1 = arith.constant 1 : index
        %k8 = arith.constant 8 : index
        scf.for %i = %lo to %hi step %k1 {
          scf.for %j = %k0 to %k8 step %k1 {
            %up = arith.subi %i, %k1 : index
            %down = arith.addi %i, %k1 : index
            %x = memref.load %b[%up, %j] : memref<12x8xf64>
            %y = memref.load %b[%down, %j] : memref<12x8xf64>
            %s = arith.addf %x, %y : f64
            memref.store %s, %a[%i, %j] : memref<12x8xf64>
          }
        }
      }
    }
  }
  return
}
