// dhir-vector-checks{undecided=true} (the native backend's default): only the vector
// accesses dhir does not prove in bounds are checked.
// RUN: dhir-opt %s -p 'dhir-vector-checks{undecided=true}' | filecheck %s

// 8 lanes from j, j a multiple of 8 below 64: proven; from a loaded k: checked.
// CHECK-LABEL: func.func @rows
// CHECK-NOT:  cf.assert
// CHECK:      vector.load %a[%i, %j]
// CHECK:      cf.assert
// CHECK-NEXT: vector.load %a[%i, %k]
// CHECK-NOT:  cf.assert
// CHECK:      return
func.func @rows(%a: memref<4x64xf32>, %idx: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c64 step %c8 {
      %v = vector.load %a[%i, %j] : memref<4x64xf32>, vector<8xf32>
      %r = memref.load %idx[%i] : memref<4xi64>
      %k = arith.index_cast %r : i64 to index
      %w = vector.load %a[%i, %k] : memref<4x64xf32>, vector<8xf32>
      %s = arith.addf %v, %w : vector<8xf32>
      vector.store %s, %a[%i, %j] : memref<4x64xf32>, vector<8xf32>
    }
  }
  return
}
