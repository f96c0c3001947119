// vector.extract and vector.insert refuse a constant position outside its dimension, as
// MLIR 22's verifier does (xDSL's did not: the native build then failed in mlir-opt-22).
// A run-time position and -1 (poison) verify.
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @extract(%v: vector<3xf32>) -> f32 {
  // expected-error@+1 {{'vector.extract' position 3 is outside dimension 0 of vector<3xf32>, whose size is 3: use 0 to 2 (or -1, poison)}}
  %e = vector.extract %v[3] : f32 from vector<3xf32>
  return %e : f32
}

// -----

func.func @insert(%v: vector<2x4xi8>, %x: i8) -> vector<2x4xi8> {
  // expected-error@+1 {{'vector.insert' position -2 is outside dimension 1 of vector<2x4xi8>}}
  %w = vector.insert %x, %v [1, -2] : i8 into vector<2x4xi8>
  return %w : vector<2x4xi8>
}

// -----

// CHECK-LABEL: func.func @inside
// CHECK: vector.extract %v[%i, 3] : i8 from vector<2x4xi8>
// CHECK: vector.insert %x, %v [1, -1] : i8 into vector<2x4xi8>
func.func @inside(%v: vector<2x4xi8>, %x: i8, %i: index) -> (i8, vector<2x4xi8>) {
  %e = vector.extract %v[%i, 3] : i8 from vector<2x4xi8>
  %w = vector.insert %x, %v [1, -1] : i8 into vector<2x4xi8>
  return %e, %w : i8, vector<2x4xi8>
}
