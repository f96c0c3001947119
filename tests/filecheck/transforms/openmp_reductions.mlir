// RUN: dhir-opt %s -p dhir-openmp-reductions | filecheck %s
// RUN: dhir-opt %s -p dhir-openmp-reductions | mlir-opt-22 --convert-scf-to-openmp > /dev/null
// RUN: not mlir-opt-22 --convert-scf-to-openmp %s 2>&1 | filecheck %s --check-prefix=UPSTREAM

// Integer min/max reductions become compare-and-select, which convert-scf-to-openmp
// knows; other combining ops and code outside scf.reduce stay as they are.

func.func @f(%a: memref<8xi32>, %out: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %init = arith.constant 0 : i32
  %r:4 = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%init, %init, %init, %init) -> (i32, i32, i32, i32) {
    %v = memref.load %a[%i] : memref<8xi32>
    %w = arith.maxsi %v, %init : i32
    scf.reduce(%w, %v, %v, %v : i32, i32, i32, i32) {
    ^bb0(%x: i32, %y: i32):
      %m = arith.maxsi %x, %y : i32
      scf.reduce.return %m : i32
    }, {
    ^bb0(%x: i32, %y: i32):
      %m = arith.minui %x, %y : i32
      scf.reduce.return %m : i32
    }, {
    ^bb0(%x: i32, %y: i32):
      %m = arith.minsi %x, %y : i32
      scf.reduce.return %m : i32
    }, {
    ^bb0(%x: i32, %y: i32):
      %m = arith.addi %x, %y : i32
      scf.reduce.return %m : i32
    }
  }
  memref.store %r#0, %out[%c0] : memref<4xi32>
  return
}

// CHECK:      %w = arith.maxsi %v, %init : i32
// CHECK:      ^{{.*}}(%[[X:.*]]: i32, %[[Y:.*]]: i32):
// CHECK-NEXT:   %[[C:.*]] = arith.cmpi sgt, %[[X]], %[[Y]] : i32
// CHECK-NEXT:   %[[M:.*]] = arith.select %[[C]], %[[X]], %[[Y]] : i32
// CHECK-NEXT:   scf.reduce.return %[[M]] : i32
// CHECK:        arith.cmpi ult
// CHECK-NEXT:   arith.select
// CHECK:        arith.cmpi slt
// CHECK-NEXT:   arith.select
// CHECK:        arith.addi

// UPSTREAM: error: unconverted operation found
