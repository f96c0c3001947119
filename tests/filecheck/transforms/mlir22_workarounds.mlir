// dhir-mlir22-workarounds: run-time positions in outer vector dimensions become static
// ones chosen by arith.select, and expand_shape with two run-time sizes in a group becomes
// a reinterpret_cast (mlir-opt-22 crashes on both, or leaves the extract unlowered).
// RUN: dhir-opt %s -p dhir-mlir22-workarounds | filecheck %s
// RUN: dhir-opt %s -p dhir-mlir22-workarounds | mlir-opt-22 --expand-strided-metadata --convert-vector-to-llvm --finalize-memref-to-llvm --convert-func-to-llvm --convert-arith-to-llvm --reconcile-unrealized-casts | filecheck %s --check-prefix=LLVM

// LLVM-NOT: {{[ "]}}vector.
// LLVM-NOT: memref.

// CHECK-LABEL: func.func @positions
func.func @positions(%v: vector<2x4xf32>, %w: vector<4xf32>, %i: index, %j: index) -> (vector<2x4xf32>, f32, vector<4xf32>) {
  // CHECK:      %[[R0:.*]] = vector.insert %w, %v [0] : vector<4xf32> into vector<2x4xf32>
  // CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
  // CHECK-NEXT: %[[E0:.*]] = arith.cmpi eq, %i, %[[C0]] : index
  // CHECK-NEXT: %[[S0:.*]] = arith.select %[[E0]], %[[R0]], %v : vector<2x4xf32>
  // CHECK-NEXT: %[[R1:.*]] = vector.insert %w, %v [1] : vector<4xf32> into vector<2x4xf32>
  // CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
  // CHECK-NEXT: %[[E1:.*]] = arith.cmpi eq, %i, %[[C1]] : index
  // CHECK-NEXT: %[[R:.*]] = arith.select %[[E1]], %[[R1]], %[[S0]] : vector<2x4xf32>
  %r = vector.insert %w, %v[%i] : vector<4xf32> into vector<2x4xf32>
  // The innermost position stays a run-time one: LLVM has extractelement.
  // CHECK-NEXT: %[[X0:.*]] = vector.extract %v[0, %j] : f32 from vector<2x4xf32>
  // CHECK-NEXT: %[[X1:.*]] = vector.extract %v[1, %j] : f32 from vector<2x4xf32>
  // CHECK-NEXT: %[[D1:.*]] = arith.constant 1 : index
  // CHECK-NEXT: %[[F1:.*]] = arith.cmpi eq, %i, %[[D1]] : index
  // CHECK-NEXT: %[[X:.*]] = arith.select %[[F1]], %[[X1]], %[[X0]] : f32
  %e = vector.extract %v[%i, %j] : f32 from vector<2x4xf32>
  // CHECK-NEXT: %[[K:.*]] = vector.insert %[[X]], %w [%j] : f32 into vector<4xf32>
  %k = vector.insert %e, %w[%j] : f32 into vector<4xf32>
  // CHECK-NEXT: return %[[R]], %[[X]], %[[K]]
  return %r, %e, %k : vector<2x4xf32>, f32, vector<4xf32>
}

// CHECK-LABEL: func.func @expand
func.func @expand(%a: memref<?xf64, strided<[?], offset: ?>>, %m: index, %n: index) -> (memref<?x?xf64, strided<[?, ?], offset: ?>>, memref<?x4xf64, strided<[?, ?], offset: ?>>) {
  // CHECK:      %[[BASE:.*]], %[[OFF:.*]], %{{.*}}, %[[STRIDE:.*]] = memref.extract_strided_metadata %a
  // CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[STRIDE]], %n : index
  // CHECK-NEXT: %[[B:.*]] = memref.reinterpret_cast %[[BASE]] to offset: [%[[OFF]]], sizes: [%m, %n], strides: [%[[ROW]], %[[STRIDE]]] : memref<f64> to memref<?x?xf64, strided<[?, ?], offset: ?>>
  %b = memref.expand_shape %a [[0, 1]] output_shape [%m, %n] : memref<?xf64, strided<[?], offset: ?>> into memref<?x?xf64, strided<[?, ?], offset: ?>>
  // One run-time size in a group: mlir-opt-22 lowers it.
  // CHECK-NEXT: %[[C:.*]] = memref.expand_shape %a
  %c = memref.expand_shape %a [[0, 1]] output_shape [%m, 4] : memref<?xf64, strided<[?], offset: ?>> into memref<?x4xf64, strided<[?, ?], offset: ?>>
  // CHECK-NEXT: return %[[B]], %[[C]]
  return %b, %c : memref<?x?xf64, strided<[?, ?], offset: ?>>, memref<?x4xf64, strided<[?, ?], offset: ?>>
}

// CHECK-LABEL: func.func @switch
func.func @switch(%k: index) -> i32 {
  // CHECK:      %[[C1:.*]] = arith.constant 4294967296 : index
  // CHECK-NEXT: %[[E1:.*]] = arith.cmpi eq, %k, %[[C1]] : index
  // CHECK-NEXT: %[[C2:.*]] = arith.constant -1 : index
  // CHECK-NEXT: %[[E2:.*]] = arith.cmpi eq, %k, %[[C2]] : index
  // CHECK-NEXT: %[[R:.*]] = scf.if %[[E1]] -> (i32) {
  // CHECK:        scf.yield %{{.*}} : i32
  // CHECK-NEXT: } else {
  // CHECK-NEXT:   %[[IN:.*]] = scf.if %[[E2]] -> (i32) {
  // CHECK:        } else {
  // CHECK:          arith.constant 3 : i32
  // CHECK:        scf.yield %[[IN]] : i32
  // CHECK:      return %[[R]] : i32
  %r = scf.index_switch %k -> i32
  case 4294967296 {
    %a = arith.constant 1 : i32
    scf.yield %a : i32
  }
  case -1 {
    %b = arith.constant 2 : i32
    scf.yield %b : i32
  }
  default {
    %c = arith.constant 3 : i32
    scf.yield %c : i32
  }
  return %r : i32
}

// math.clampf, which mlir-opt-22 does not lower (its math-expand-ops swaps min and max):
// MLIR's definition, maximumf(minimumf(x, max), min).
// CHECK-LABEL: func.func @clamp
func.func @clamp(%x: f32, %lo: f32, %hi: f32, %v: vector<4xf64>) -> (f32, vector<4xf64>) {
  // CHECK-NEXT: %[[B:.*]] = arith.minimumf %x, %hi : f32
  // CHECK-NEXT: %[[R:.*]] = arith.maximumf %[[B]], %lo : f32
  %r = math.clampf %x to [%lo, %hi] : f32
  // CHECK-NEXT: %[[C:.*]] = arith.minimumf %v, %v fastmath<nnan> : vector<4xf64>
  // CHECK-NEXT: %[[S:.*]] = arith.maximumf %[[C]], %v fastmath<nnan> : vector<4xf64>
  %s = math.clampf %v to [%v, %v] fastmath<nnan> : vector<4xf64>
  // CHECK-NEXT: return %[[R]], %[[S]] : f32, vector<4xf64>
  return %r, %s : f32, vector<4xf64>
}

// math.isinf and math.isnormal, which no pass of mlir-opt-22 lowers: isinf is
// isfinite == isnan, isnormal isfinite and |x| >= the smallest normal number.
// CHECK-LABEL: func.func @classes
func.func @classes(%x: f16, %v: vector<4xf64>) -> (i1, vector<4xi1>) {
  // CHECK-NEXT: %[[F:.*]] = math.isfinite %x : f16
  // CHECK-NEXT: %[[N:.*]] = math.isnan %x : f16
  // CHECK-NEXT: %[[R:.*]] = arith.cmpi eq, %[[F]], %[[N]] : i1
  %r = math.isinf %x : f16
  // CHECK-NEXT: %[[G:.*]] = math.isfinite %v : vector<4xf64>
  // CHECK-NEXT: %[[M:.*]] = arith.constant dense<2.2250738585072014e-308> : vector<4xf64>
  // CHECK-NEXT: %[[A:.*]] = math.absf %v : vector<4xf64>
  // CHECK-NEXT: %[[L:.*]] = arith.cmpf oge, %[[A]], %[[M]] : vector<4xf64>
  // CHECK-NEXT: %[[S:.*]] = arith.andi %[[G]], %[[L]] : vector<4xi1>
  %s = math.isnormal %v : vector<4xf64>
  // CHECK-NEXT: return %[[R]], %[[S]] : i1, vector<4xi1>
  return %r, %s : i1, vector<4xi1>
}

// A dimension reduced along one operand only (l here, of size above 1): MLIR 22 unrolls
// it only into the result, so it left the contraction in place. The other operand is
// broadcast along it, as a leading dimension, making it a contracting pair.
// CHECK-LABEL: func.func @lone_reductions
func.func @lone_reductions(%x: vector<2x3x4xf32>, %y: vector<3xf32>, %z: vector<2xf32>) -> vector<2xf32> {
  // CHECK-NEXT: %[[B:.*]] = vector.broadcast %y : vector<3xf32> to vector<4x3xf32>
  // CHECK-NEXT: %[[R:.*]] = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0)>], iterator_types = ["parallel", "reduction", "reduction"], kind = #vector.kind<add>} %x, %[[B]], %z : vector<2x3x4xf32>, vector<4x3xf32> into vector<2xf32>
  %r = vector.contract {indexing_maps = [affine_map<(m, k, l) -> (m, k, l)>, affine_map<(m, k, l) -> (k)>, affine_map<(m, k, l) -> (m)>], iterator_types = ["parallel", "reduction", "reduction"], kind = #vector.kind<add>} %x, %y, %z : vector<2x3x4xf32>, vector<3xf32> into vector<2xf32>
  // CHECK-NEXT: return %[[R]]
  return %r : vector<2xf32>
}

// index.ceildivs and index.floordivs, whose lowering by convert-to-llvm computes a second
// quotient that may overflow (SIGFPE for ceildivs(INT64_MAX, -1)): arith's, which divides
// once; the other index ops stay.
// CHECK-LABEL: func.func @index_divisions
func.func @index_divisions(%a: index, %b: index) -> (index, index, index) {
  // CHECK-NEXT: %[[C:.*]] = arith.ceildivsi %a, %b : index
  %c = index.ceildivs %a, %b
  // CHECK-NEXT: %[[F:.*]] = arith.floordivsi %a, %b : index
  %f = index.floordivs %a, %b
  // CHECK-NEXT: %[[D:.*]] = index.divs %a, %b
  %d = index.divs %a, %b
  // CHECK-NEXT: return %[[C]], %[[F]], %[[D]] : index, index, index
  return %c, %f, %d : index, index, index
}
