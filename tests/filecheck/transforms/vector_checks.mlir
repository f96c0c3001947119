// dhir-vector-checks (under --runtime-checks): a cf.assert before each vector access of a
// memref that it stays inside, with MLIR's own checks' message and the op's location;
// device code and ops under vector.mask are left alone.
// RUN: dhir-opt %s -p dhir-vector-checks | filecheck %s

// The indices, and the 8 lanes from %j along the innermost dimension.
// CHECK-LABEL: func.func @load
// CHECK:      %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[I0:.*]] = arith.cmpi sge, %i, %[[ZERO]] : index
// CHECK-NEXT: %[[J0:.*]] = arith.cmpi sge, %j, %[[ZERO]] : index
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %i, %[[FOUR]] : index
// CHECK-NEXT: %[[ROOM:.*]] = arith.subi %[[EIGHT]], %[[EIGHT]] : index
// CHECK-NEXT: %[[JN:.*]] = arith.cmpi sle, %j, %[[ROOM]] : index
// CHECK:      cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A^ out-of-bounds access\0ALocation: loc(\22{{.*}}vector_checks.mlir\22:19:8)"
// CHECK-NEXT: %v = vector.load %a[%i, %j]
func.func @load(%a: memref<4x8xf32>, %i: index, %j: index) -> vector<8xf32> {
  %v = vector.load %a[%i, %j] : memref<4x8xf32>, vector<8xf32>
  return %v : vector<8xf32>
}

// Not in_bounds: lanes from the end on are skipped, so only a start at or past the end
// (or a mask setting none) passes without the start being at least 0.
// CHECK-LABEL: func.func @transfer
// CHECK:      %[[SIZE:.*]] = memref.dim %a, %{{.*}} : memref<?xf32>
// CHECK-NEXT: %[[LOW:.*]] = arith.maxsi %n, %{{.*}} : index
// CHECK-NEXT: %[[CAP:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[LANES:.*]] = arith.minsi %[[LOW]], %[[CAP]] : index
// CHECK-NEXT: %[[NONE:.*]] = arith.cmpi sle, %[[LANES]], %{{.*}} : index
// CHECK-NEXT: %[[PAST:.*]] = arith.cmpi sge, %j, %[[SIZE]] : index
// CHECK-NEXT: %[[START:.*]] = arith.cmpi sge, %j, %{{.*}} : index
// CHECK-NEXT: %[[SKIP:.*]] = arith.ori %[[NONE]], %[[PAST]] : i1
// CHECK-NEXT: %[[OK:.*]] = arith.ori %[[SKIP]], %[[START]] : i1
// CHECK-NEXT: cf.assert %[[OK]], "{{.*}}:39:8)"
func.func @transfer(%a: memref<?xf32>, %j: index, %n: index) -> vector<8xf32> {
  %z = arith.constant 0.0 : f32
  %m = vector.create_mask %n : vector<8xi1>
  %v = vector.transfer_read %a[%j], %z, %m : memref<?xf32>, vector<8xf32>
  return %v : vector<8xf32>
}

// Any other mask: the lanes it sets, as vectors; lane k is below 0 where j < -k and past
// the end where j >= size - k (j + k wrapped for a j near 2**63).
// CHECK-LABEL: func.func @masked
// CHECK:      %[[STEPS:.*]] = arith.constant dense<[0, 1, 2, 3]> : vector<4xindex>
// CHECK:      %[[AT:.*]] = vector.broadcast %j : index to vector<4xindex>
// CHECK:      %[[FIRST:.*]] = arith.subi %{{.*}}, %[[STEPS]] : vector<4xindex>
// CHECK:      %[[ROOM:.*]] = arith.subi %{{.*}}, %[[STEPS]] : vector<4xindex>
// CHECK-NEXT: %[[BELOW:.*]] = arith.cmpi slt, %[[AT]], %[[FIRST]] : vector<4xindex>
// CHECK-NEXT: %[[ABOVE:.*]] = arith.cmpi sge, %[[AT]], %[[ROOM]] : vector<4xindex>
// CHECK-NEXT: %[[OUT:.*]] = arith.ori %[[BELOW]], %[[ABOVE]] : vector<4xi1>
// CHECK-NEXT: %[[BAD:.*]] = arith.andi %m, %[[OUT]] : vector<4xi1>
// CHECK-NEXT: %[[ANY:.*]] = vector.reduction <or>, %[[BAD]] : vector<4xi1> into i1
// CHECK:      cf.assert
// CHECK-NEXT: vector.maskedload
func.func @masked(%a: memref<8xf32>, %j: index, %m: vector<4xi1>, %p: vector<4xf32>) -> vector<4xf32> {
  %v = vector.maskedload %a[%j], %m, %p : memref<8xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  return %v : vector<4xf32>
}

// CHECK-LABEL: func.func @gather
// CHECK:      arith.index_cast %{{.*}} : vector<4xi32> to vector<4xindex>
// CHECK:      vector.reduction <or>
// CHECK:      cf.assert
// CHECK-NEXT: vector.gather
func.func @gather(%a: memref<2x4xf32>, %i: index, %g: vector<4xi32>, %m: vector<4xi1>, %p: vector<4xf32>) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %v = vector.gather %a[%i, %c0] [%g], %m, %p : memref<2x4xf32>, vector<4xi32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  return %v : vector<4xf32>
}

// CHECK-LABEL: func.func @left
// CHECK-NOT:  cf.assert
// CHECK:      vector.mask
func.func @left(%a: memref<8xf32>, %j: index, %m: vector<8xi1>) -> vector<8xf32> {
  %z = arith.constant 0.0 : f32
  %v = vector.mask %m { vector.transfer_read %a[%j], %z : memref<8xf32>, vector<8xf32> } : vector<8xi1> -> vector<8xf32>
  return %v : vector<8xf32>
}

// An affine.vector_load becomes the vector.load --lower-affine makes of it, checked.
// CHECK-LABEL: func.func @affine
// CHECK:      %[[AT:.*]] = affine.apply
// CHECK:      cf.assert
// CHECK-NEXT: vector.load %a[%[[AT]]] : memref<16xf32>, vector<8xf32>
func.func @affine(%a: memref<16xf32>, %i: index) -> vector<8xf32> {
  %v = affine.vector_load %a[%i + 4] : memref<16xf32>, vector<8xf32>
  return %v : vector<8xf32>
}
