// arith.extf makes floats wider and arith.truncf narrower, as MLIR 22 checks ("operand type
// 'f16' and result type 'bf16' are cast incompatible"): xDSL 0.74 took them, the
// interpreter ran them, and mlir-opt-22 stopped the native build at the lowered file.
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @same_width(%h: f16) -> bf16 {
  // expected-error@+1 {{'arith.truncf' op operand type 'f16' and result type 'bf16' are cast incompatible: it must make floats narrower; f16 and bf16 are both 16 bits: go through f32 (arith.extf to f32, then arith.truncf to bf16)}}
  %b = arith.truncf %h : f16 to bf16
  return %b : bf16
}

// -----

func.func @same_width_ext(%b: vector<4xbf16>) -> vector<4xf16> {
  // expected-error@+1 {{'arith.extf' op operand type 'vector<4xbf16>' and result type 'vector<4xf16>' are cast incompatible: it must make floats wider; bf16 and f16 are both 16 bits}}
  %h = arith.extf %b : vector<4xbf16> to vector<4xf16>
  return %h : vector<4xf16>
}

// -----

func.func @backwards(%f: f32) -> f64 {
  // expected-error@+1 {{'arith.truncf' op operand type 'f32' and result type 'f64' are cast incompatible: it must make floats narrower; use arith.extf to go from f32 to f64}}
  %d = arith.truncf %f : f32 to f64
  return %d : f64
}

// -----

func.func @narrowing_ext(%d: f64) -> f32 {
  // expected-error@+1 {{'arith.extf' op operand type 'f64' and result type 'f32' are cast incompatible: it must make floats wider; use arith.truncf to go from f64 to f32}}
  %f = arith.extf %d : f64 to f32
  return %f : f32
}

// -----

func.func @no_change(%f: f32) -> f32 {
  // expected-error@+1 {{'arith.extf' op operand type 'f32' and result type 'f32' are cast incompatible: it must make floats wider; drop the cast}}
  %g = arith.extf %f : f32 to f32
  return %g : f32
}

// -----

func.func @fine(%h: f16, %d: f64) -> (f64, bf16) {
  %w = arith.extf %h : f16 to f64
  %n = arith.truncf %d downward : f64 to bf16
  return %w, %n : f64, bf16
}
// CHECK: arith.extf %{{.*}} : f16 to f64
// CHECK: arith.truncf %{{.*}} downward : f64 to bf16
