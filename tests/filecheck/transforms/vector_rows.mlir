// dhir-vector-rows: vector.load/store of rank 2 and more become 1-D ones, row by row (MLIR
// 22 lowers only 1-D ones); 1-D ones stay as they are.
// RUN: dhir-opt %s -p dhir-vector-rows | filecheck %s
// RUN: dhir-opt %s -p dhir-vector-rows | mlir-opt-22 > /dev/null

// CHECK-LABEL: func.func @f
func.func @f(%a: memref<4x8xf64>, %b: memref<3x4x5xi32>, %i: index, %j: index) {
  // CHECK:      %[[R0:.*]] = vector.load %a[%i, %j] : memref<4x8xf64>, vector<4xf64>
  // CHECK-NEXT: %[[V0:.*]] = vector.broadcast %[[R0]] : vector<4xf64> to vector<2x4xf64>
  // CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
  // CHECK-NEXT: %[[I1:.*]] = arith.addi %i, %[[ONE]] : index
  // CHECK-NEXT: %[[R1:.*]] = vector.load %a[%[[I1]], %j] : memref<4x8xf64>, vector<4xf64>
  // CHECK-NEXT: %[[V:.*]] = vector.insert %[[R1]], %[[V0]] [1] : vector<4xf64> into vector<2x4xf64>
  %v = vector.load %a[%i, %j] : memref<4x8xf64>, vector<2x4xf64>
  // CHECK-NEXT: %[[S0:.*]] = vector.extract %[[V]][0] : vector<4xf64> from vector<2x4xf64>
  // CHECK-NEXT: vector.store %[[S0]], %a[%j, %i] : memref<4x8xf64>, vector<4xf64>
  // CHECK-NEXT: %[[S1:.*]] = vector.extract %[[V]][1] : vector<4xf64> from vector<2x4xf64>
  // CHECK-NEXT: %[[ONE2:.*]] = arith.constant 1 : index
  // CHECK-NEXT: %[[J1:.*]] = arith.addi %j, %[[ONE2]] : index
  // CHECK-NEXT: vector.store %[[S1]], %a[%[[J1]], %i] : memref<4x8xf64>, vector<4xf64>
  vector.store %v, %a[%j, %i] : memref<4x8xf64>, vector<2x4xf64>
  // A rank-2 vector from a rank-3 memref: the rows run along the middle dimension.
  // CHECK:      vector.load %b[%i, %j, %i] {nontemporal = true} : memref<3x4x5xi32>, vector<3xi32>
  // CHECK:      %[[J2:.*]] = arith.addi %j, %{{.*}} : index
  // CHECK-NEXT: vector.load %b[%i, %[[J2]], %i] {nontemporal = true} : memref<3x4x5xi32>, vector<3xi32>
  // CHECK-NOT:  vector<2x3xi32>, memref
  %w = vector.load %b[%i, %j, %i] {nontemporal = true} : memref<3x4x5xi32>, vector<2x3xi32>
  // CHECK:      vector.load %b[%i, %j, %i] : memref<3x4x5xi32>, vector<5xi32>
  %x = vector.load %b[%i, %j, %i] : memref<3x4x5xi32>, vector<5xi32>
  return
}
