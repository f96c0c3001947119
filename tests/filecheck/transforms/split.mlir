// dhir-split cuts a task whose work is one parallel loop into pieces over ranges of its
// outermost loop (or, for a linalg op, views of the rows of its parallel outermost d0);
// loops with a carried dependence and float reductions stay whole.
// RUN: dhir-opt %s -p 'dhir-split{ranks=2}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-split' | filecheck %s --check-prefix=ONE

func.func @f(%a: memref<10x4xi32>, %b: memref<10x4xi32>, %s: memref<1xf64>, %n: index) {
  dhir.schedule %a, %b, %s, %n {
    // dhir.split = 3 forces three even pieces, whatever the rank count.
    // CHECK:      dhir.task target = "cpu", %a, %b attributes {dhir.piece = [0 : i64, 0 : i64]}
    // CHECK:        %[[L0:[0-9]+]] = arith.constant 0 : index
    // CHECK-NEXT:   %[[H0:[0-9]+]] = arith.constant 3 : index
    // CHECK-NEXT:   scf.for %{{.*}} = %[[L0]] to %[[H0]]
    // CHECK:      dhir.task target = "cpu", %a, %b attributes {dhir.piece = [0 : i64, 1 : i64]}
    // CHECK:        %[[L1:[0-9]+]] = arith.constant 3 : index
    // CHECK-NEXT:   %[[H1:[0-9]+]] = arith.constant 6 : index
    // CHECK-NEXT:   scf.for %{{.*}} = %[[L1]] to %[[H1]]
    // CHECK:      dhir.task target = "cpu", %a, %b attributes {dhir.piece = [0 : i64, 2 : i64]}
    // CHECK:        %[[L2:[0-9]+]] = arith.constant 6 : index
    // CHECK-NEXT:   %[[H2:[0-9]+]] = arith.constant 10 : index
    // CHECK-NEXT:   scf.for %{{.*}} = %[[L2]] to %[[H2]]
    // ONE-COUNT-3: dhir.piece = [0
    %copy = dhir.task target = "cpu", %a, %b attributes {dhir.split = 3} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c10 = arith.constant 10 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c10 step %c1 {
        scf.for %j = %c0 to %c4 step %c1 {
          %x = memref.load %a[%i, %j] : memref<10x4xi32>
          memref.store %x, %b[%i, %j] : memref<10x4xi32>
        }
      }
    }
    // Row i reads row i - 1, written by the iteration before: kept whole.
    // CHECK:      dhir.task target = "cpu", %a {
    // CHECK-NOT:  dhir.piece
    // CHECK:      scf.for
    %carried = dhir.task target = "cpu", %a {
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c10 = arith.constant 10 : index
      scf.for %i = %c1 to %c10 step %c1 {
        scf.for %j = %c0 to %c4 step %c1 {
          %im = arith.subi %i, %c1 : index
          %x = memref.load %a[%im, %j] : memref<10x4xi32>
          memref.store %x, %a[%i, %j] : memref<10x4xi32>
        }
      }
    }
    // An scf.parallel with a float reduction: kept whole.
    // CHECK:      dhir.task target = "cpu", %b, %s {
    // CHECK-NOT:  dhir.piece
    // CHECK:      scf.parallel
    %sum = dhir.task target = "cpu", %b, %s {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c10 = arith.constant 10 : index
      %zero = arith.constant 0.0 : f64
      %total = scf.parallel (%i) = (%c0) to (%c10) step (%c1) init (%zero) -> f64 {
        %x = memref.load %b[%i, %c0] : memref<10x4xi32>
        %f = arith.sitofp %x : i32 to f64
        scf.reduce(%f : f64) {
        ^bb0(%l: f64, %r: f64):
          %t = arith.addf %l, %r : f64
          scf.reduce.return %t : f64
        }
      }
      memref.store %total, %s[%c0] : memref<1xf64>
    }
    // affine.parallel: its first dimension's constant bounds become each piece's.
    // CHECK:      dhir.piece = [3 : i64, 0 : i64]
    // CHECK:      affine.parallel (%{{.*}}, %{{.*}}) = (0, 0) to (5, 4)
    // CHECK:      dhir.piece = [3 : i64, 1 : i64]
    // CHECK:      affine.parallel (%{{.*}}, %{{.*}}) = (5, 0) to (10, 4)
    %copy2 = dhir.task target = "cpu", %a, %b attributes {dhir.split = 2} {
      affine.parallel (%i, %j) = (0, 0) to (10, 4) {
        %x = affine.load %a[%i, %j] : memref<10x4xi32>
        affine.store %x, %b[%i, %j] : memref<10x4xi32>
      }
    }
  }
  dhir.schedule %b, %n {
    // By default, one piece per rank, in a schedule with fewer independent tasks than
    // ranks (here one); a schedule scalar bound gives affine.apply bounds.
    // CHECK:      dhir.task target = "cpu", %b attributes {dhir.piece = [0 : i64, 0 : i64]}
    // CHECK:        %[[M0:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + ((d1 + (d0 * -1)) floordiv 2)))> (%{{.*}}, %n)
    // CHECK-NEXT:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[M0]])
    // CHECK:      dhir.task target = "cpu", %b attributes {dhir.piece = [0 : i64, 1 : i64]}
    // CHECK:        %[[M1:.*]] = affine.apply
    // CHECK-NEXT:   scf.parallel (%{{.*}}) = (%[[M1]]) to (%n)
    // ONE: %fill = dhir.task target = "cpu", %b {
    %fill = dhir.task target = "cpu", %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %v = arith.constant 7 : i32
      scf.parallel (%i) = (%c0) to (%n) step (%c1) {
        scf.for %j = %c0 to %c4 step %c1 {
          memref.store %v, %b[%i, %j] : memref<10x4xi32>
        }
      }
    }
  }
  return
}

// A linalg op whose outermost loop d0 is parallel: each piece views its rows of the
// operands that d0 indexes (A and C of a matmul) and keeps the others (B) whole.
// CHECK-LABEL: func.func @mm
// CHECK:      dhir.task target = "cpu", %a, %b, %c attributes {dhir.piece = [0 : i64, 0 : i64]}
// CHECK-NEXT:   %[[A0:.*]] = memref.subview %a[0, 0] [3, 5] [1, 1] : memref<7x5xf64> to memref<3x5xf64, strided<[5, 1]>>
// CHECK-NEXT:   %[[C0:.*]] = memref.subview %c[0, 0] [3, 6] [1, 1] : memref<7x6xf64> to memref<3x6xf64, strided<[6, 1]>>
// CHECK-NEXT:   linalg.matmul ins(%[[A0]], %b : {{.*}}) outs(%[[C0]] : memref<3x6xf64, strided<[6, 1]>>)
// CHECK:      dhir.task target = "cpu", %a, %b, %c attributes {dhir.piece = [0 : i64, 1 : i64]}
// CHECK-NEXT:   %[[A1:.*]] = memref.subview %a[3, 0] [4, 5] [1, 1] : memref<7x5xf64> to memref<4x5xf64, strided<[5, 1], offset: 15>>
// CHECK-NEXT:   %[[C1:.*]] = memref.subview %c[3, 0] [4, 6] [1, 1] : memref<7x6xf64> to memref<4x6xf64, strided<[6, 1], offset: 18>>
// CHECK-NEXT:   linalg.matmul ins(%[[A1]], %b : {{.*}}) outs(%[[C1]] : memref<4x6xf64, strided<[6, 1], offset: 18>>)
// A column sum: d0 is a reduction, kept whole.
// CHECK:      dhir.task target = "cpu", %a, %s {
// CHECK-NOT:  dhir.piece
// CHECK-NOT:  memref.subview
// CHECK:      linalg.generic
// ONE-LABEL: func.func @mm
// ONE-NOT:   dhir.piece
func.func @mm(%a: memref<7x5xf64>, %b: memref<5x6xf64>, %c: memref<7x6xf64>, %s: memref<5xf64>) {
  dhir.schedule %a, %b, %c {
    %t = dhir.task target = "cpu", %a, %b, %c {
      linalg.matmul ins(%a, %b : memref<7x5xf64>, memref<5x6xf64>) outs(%c : memref<7x6xf64>)
    }
  }
  dhir.schedule %a, %s {
    %u = dhir.task target = "cpu", %a, %s {
      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                      iterator_types = ["reduction", "parallel"]}
          ins(%a : memref<7x5xf64>) outs(%s : memref<5xf64>) {
      ^bb0(%x: f64, %o: f64):
        %r = arith.addf %o, %x : f64
        linalg.yield %r : f64
      }
    }
  }
  return
}

// A tiled loop as MLIR's tiling writes it: tiles 4 rows apart touch disjoint rows, though
// two starts 1 apart would overlap; cut between tiles, each inner `min` bound kept.
// CHECK-LABEL: func.func @tiled
// CHECK:      dhir.piece = [0 : i64, 0 : i64]
// CHECK-NEXT:   affine.for %{{.*}} = 0 to 4 step 4 {
// CHECK-NEXT:     affine.for %{{.*}} = affine_map<(d0) -> (d0)>(%{{.*}}) to min affine_map<(d0) -> ((d0 + 4), 10)>
// CHECK:      dhir.piece = [0 : i64, 1 : i64]
// CHECK-NEXT:   affine.for %{{.*}} = 4 to 10 step 4 {
// ONE-LABEL: func.func @tiled
// ONE-NOT:   dhir.piece
func.func @tiled(%a: memref<10x4xi32>, %b: memref<10x4xi32>) {
  dhir.schedule %a, %b {
    %t = dhir.task target = "cpu", %a, %b {
      affine.for %ii = 0 to 10 step 4 {
        affine.for %i = affine_map<(d0) -> (d0)>(%ii) to min affine_map<(d0) -> (d0 + 4, 10)>(%ii) {
          affine.for %j = 0 to 4 {
            %x = affine.load %a[%i, %j] : memref<10x4xi32>
            affine.store %x, %b[%i, %j] : memref<10x4xi32>
          }
        }
      }
    }
  }
  return
}

// A linalg op on views the task makes (as dhir-codedrop makes again those of host code):
// each piece makes them again and views its rows of them.
// CHECK-LABEL: func.func @views
// CHECK:      dhir.piece = [0 : i64, 0 : i64]
// CHECK-NEXT:   %[[X0:.*]] = memref.subview %x[2, 0] [6, 4] [1, 1]
// CHECK-NEXT:   %[[Y0:.*]] = memref.subview %y[0, 0] [6, 4] [1, 1]
// CHECK-NEXT:   %[[XR0:.*]] = memref.subview %[[X0]][0, 0] [3, 4] [1, 1] : memref<6x4xf64, strided<[4, 1], offset: 8>> to memref<3x4xf64, strided<[4, 1], offset: 8>>
// CHECK-NEXT:   %[[YR0:.*]] = memref.subview %[[Y0]][0, 0] [3, 4] [1, 1] : memref<6x4xf64, strided<[4, 1]>> to memref<3x4xf64, strided<[4, 1]>>
// CHECK-NEXT:   linalg.copy ins(%[[XR0]] : {{.*}}) outs(%[[YR0]] : {{.*}})
// CHECK:      dhir.piece = [0 : i64, 1 : i64]
// CHECK:        memref.subview %{{.*}}[3, 0] [3, 4] [1, 1] : memref<6x4xf64, strided<[4, 1], offset: 8>> to memref<3x4xf64, strided<[4, 1], offset: 20>>
// CHECK-NEXT:   memref.subview %{{.*}}[3, 0] [3, 4] [1, 1] : memref<6x4xf64, strided<[4, 1]>> to memref<3x4xf64, strided<[4, 1], offset: 12>>
// ONE-LABEL: func.func @views
// ONE-NOT:   dhir.piece
func.func @views(%x: memref<10x4xf64>, %y: memref<6x4xf64>) {
  dhir.schedule %x, %y {
    %t = dhir.task target = "cpu", %x, %y {
      %sx = memref.subview %x[2, 0] [6, 4] [1, 1] : memref<10x4xf64> to memref<6x4xf64, strided<[4, 1], offset: 8>>
      %sy = memref.subview %y[0, 0] [6, 4] [1, 1] : memref<6x4xf64> to memref<6x4xf64, strided<[4, 1]>>
      linalg.copy ins(%sx : memref<6x4xf64, strided<[4, 1], offset: 8>>) outs(%sy : memref<6x4xf64, strided<[4, 1]>>)
    }
  }
  return
}
