// dhir-split cuts a reduction marked dhir.reassociate into pieces that reduce their own
// range from the op's identity into a partials buffer, and one task that combines the
// initial value and the partials in piece order; without the attribute it stays whole.
// RUN: dhir-opt %s -p 'dhir-split{ranks=2}' 2>&1 | filecheck %s

// CHECK:      warning: dhir.reassociate on diff has no effect: a reduction by 'arith.subf' on f64 has no exact identity; the task stays whole
// CHECK:      func.func @main
// CHECK:        %[[P:.*]] = memref.alloc() : memref<2xf64>
// CHECK-NEXT:   dhir.schedule %a, %s, %[[P]] {
func.func @main(%a: memref<8xf64>, %s: memref<1xf64>) {
  dhir.schedule %a, %s {
    // CHECK:      dhir.task target = "cpu", %a, %[[P]] attributes {dhir.piece = [0 : i64, 0 : i64]}
    // CHECK:        %[[ID0:.*]] = arith.constant -0.000000e+00 : f64
    // CHECK-NEXT:   %[[R0:.*]] = scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) init (%[[ID0]]) -> f64
    // CHECK:        %[[K0:[0-9]+]] = arith.constant 0 : index
    // CHECK-NEXT:   memref.store %[[R0]], %[[P]][%[[K0]]] : memref<2xf64>
    // CHECK-NEXT: }
    // CHECK:      dhir.task target = "cpu", %a, %[[P]] attributes {dhir.piece = [0 : i64, 1 : i64]}
    // CHECK:        %[[K1:[0-9]+]] = arith.constant 1 : index
    // CHECK-NEXT:   memref.store %{{.*}}, %[[P]][%[[K1]]] : memref<2xf64>
    // CHECK:      dhir.task target = "cpu", %s, %[[P]] attributes {dhir.piece = [0 : i64, 2 : i64]}
    // CHECK:        %[[INIT:.*]] = arith.constant 1.000000e+00 : f64
    // CHECK-NOT:    scf.parallel
    // CHECK:        %[[X0:.*]] = memref.load %[[P]][%{{.*}}] : memref<2xf64>
    // CHECK-NEXT:   %[[S0:.*]] = arith.addf %[[INIT]], %[[X0]] : f64
    // CHECK-NEXT:   %[[X1:.*]] = memref.load %[[P]][%{{.*}}] : memref<2xf64>
    // CHECK-NEXT:   %[[S1:.*]] = arith.addf %[[S0]], %[[X1]] : f64
    // CHECK-NEXT:   memref.store %[[S1]], %s[%{{.*}}] : memref<1xf64>
    %sum = dhir.task target = "cpu", %a, %s attributes {dhir.reassociate} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %one = arith.constant 1.0 : f64
      %total = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%one) -> f64 {
        %x = memref.load %a[%i] : memref<8xf64>
        scf.reduce(%x : f64) {
        ^bb0(%l: f64, %r: f64):
          %t = arith.addf %l, %r : f64
          scf.reduce.return %t : f64
        }
      }
      memref.store %total, %s[%c0] : memref<1xf64>
    }
    // subf has no identity: kept whole, with the warning above.
    // CHECK:      dhir.task target = "cpu", %a, %s attributes {dhir.reassociate} {
    // CHECK:        scf.parallel
    %diff = dhir.task target = "cpu", %a, %s attributes {dhir.reassociate} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %one = arith.constant 1.0 : f64
      %total = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%one) -> f64 {
        %x = memref.load %a[%i] : memref<8xf64>
        scf.reduce(%x : f64) {
        ^bb0(%l: f64, %r: f64):
          %t = arith.subf %l, %r : f64
          scf.reduce.return %t : f64
        }
      }
      memref.store %total, %s[%c0] : memref<1xf64>
    }
  }
  // CHECK:      memref.dealloc %[[P]] : memref<2xf64>
  // CHECK-NEXT: func.return
  return
}
