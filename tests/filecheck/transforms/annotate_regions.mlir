// Access regions: the elements each task reads and writes, from loop bounds, affine
// subscripts and views. Disjoint regions of one memref order nothing.
// RUN: dhir-opt %s -p dhir-annotate-dependences | filecheck %s

func.func @main(%a: memref<8x8xf64>, %b: memref<8x8xf64>, %n: index) {
  dhir.schedule %a, %b, %n {
    %cpu = dhir.target {kind = "cpu"}
    // Rows 1..3 of %b from rows 0..2 of %a (a halo read i-1): a must-write.
    // CHECK: %t0 = dhir.task {{.*}}dhir.read_regions = ["{ [x0, x1] : 0 <= x0 <= 2 and 0 <= x1 <= 7 }"], dhir.write_regions = ["must { [x0, x1] : 0 < x0 <= 3 and 0 <= x1 <= 7 }"], dhir.after = array<i64>}
    %t0 = dhir.task %cpu, %a, %b {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      scf.for %i = %c1 to %c4 step %c1 {
        scf.for %j = %c0 to %c8 step %c1 {
          %im = arith.subi %i, %c1 : index
          %x = memref.load %a[%im, %j] : memref<8x8xf64>
          memref.store %x, %b[%i, %j] : memref<8x8xf64>
        }
      }
    }
    // Even rows 4..6 of %b (step 2) and a 2x2 block of %a through a subview at (2, 3),
    // filled (a fill does not read its output). Its writes miss task 0's, but the block
    // overwrites a[2, 3..4], which task 0 read (WAR).
    // CHECK: %t1 = dhir.task {{.*}}dhir.read_regions = ["{ [x0, x1] : (1 + x0) mod 2 = 0 and 3 <= x0 <= 6 and 0 <= x1 <= 7 }"], dhir.write_regions = ["must { [x0, x1] : 2 <= x0 <= 3 and 3 <= x1 <= 4 }", "must { [x0, x1] : (x0) mod 2 = 0 and 4 <= x0 <= 7 and 0 <= x1 <= 7 }"], dhir.after = array<i64: 0>}
    %t1 = dhir.task %cpu, %a, %b {
      affine.for %i = 4 to 8 step 2 {
        affine.for %j = 0 to 8 {
          %x = affine.load %a[%i - 1, %j] : memref<8x8xf64>
          affine.store %x, %b[%i, %j] : memref<8x8xf64>
        }
      }
      %v = memref.subview %a[2, 3] [2, 2] [1, 1] : memref<8x8xf64> to memref<2x2xf64, strided<[8, 1], offset: 19>>
      %f = arith.constant 1.0 : f64
      linalg.fill ins(%f : f64) outs(%v : memref<2x2xf64, strided<[8, 1], offset: 19>>)
    }
    // A bound the analysis cannot read (%n): column 0 of every row may be written. It
    // overwrites what tasks 0 and 1 read (WAR) and task 1 wrote (WAW).
    // CHECK: %t2 = dhir.task {{.*}}dhir.read_regions = [], dhir.write_regions = ["may { [x0, x1 = 0] : 0 <= x0 <= 7 }"], dhir.after = array<i64: 0, 1>}
    %t2 = dhir.task %cpu, %a {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %f = arith.constant 1.0 : f64
      scf.for %i = %c0 to %n step %c1 {
        memref.store %f, %a[%i, %c0] : memref<8x8xf64>
      }
    }
  }
  return
}
