// linalg's elementwise named ops convert no element type, as in MLIR 22, whose bodies for
// them have no casts: `linalg.add` of f64 into f32 ran in the interpreter (converted on
// the store) and stopped the native build in mlir-opt-22 at no line ("'linalg.yield' op
// type of yield operand 1 ('f64') doesn't match the element type of the enclosing
// linalg.generic op ('f32')"). linalg.copy and the contractions do convert.
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @add(%d: memref<4xf64>, %e: memref<4xf32>) {
  // expected-error@+1 {{'linalg.add' op takes elements of one type, got f64, f64, f32: it converts none, as in MLIR 22; convert first with linalg.copy (which casts) or write a linalg.generic}}
  linalg.add ins(%d, %d : memref<4xf64>, memref<4xf64>) outs(%e : memref<4xf32>)
  return
}

// -----

func.func @mixed_inputs(%f: tensor<4xf32>, %d: tensor<4xf64>, %e: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error@+1 {{'linalg.sub' op takes elements of one type, got f32, f64, f64}}
  %r = linalg.sub ins(%f, %d : tensor<4xf32>, tensor<4xf64>) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  return %r : tensor<4xf64>
}

// -----

func.func @div(%a: memref<4xi32>, %b: memref<4xi64>) {
  // expected-error@+1 {{'linalg.div' op takes elements of one type, got i32, i32, i64}}
  linalg.div ins(%a, %a : memref<4xi32>, memref<4xi32>) outs(%b : memref<4xi64>)
  return
}

// -----

func.func @exp(%h: memref<4xf16>, %e: memref<4xf32>) {
  // expected-error@+1 {{'linalg.exp' op takes elements of one type, got f16, f32}}
  linalg.exp ins(%h : memref<4xf16>) outs(%e : memref<4xf32>)
  return
}

// -----

func.func @abs(%d: memref<4xf64>, %e: memref<4xf32>) {
  // expected-error@+1 {{'linalg.abs' op takes elements of one type, got f64, f32}}
  linalg.abs ins(%d : memref<4xf64>) outs(%e : memref<4xf32>)
  return
}

// -----

func.func @select(%c: memref<4xi1>, %d: memref<4xf64>) {
  // expected-error@+1 {{'linalg.select' op takes elements of one type, got f64, f64, i1}}
  linalg.select ins(%c, %d, %d : memref<4xi1>, memref<4xf64>, memref<4xf64>) outs(%c : memref<4xi1>)
  return
}

// -----

func.func @fine(%c: memref<4xi1>, %d: memref<4xf64>, %e: memref<4xf32>, %o: memref<4xf64>) {
  linalg.copy ins(%d : memref<4xf64>) outs(%e : memref<4xf32>)
  linalg.select ins(%c, %d, %o : memref<4xi1>, memref<4xf64>, memref<4xf64>) outs(%o : memref<4xf64>)
  linalg.max ins(%e, %e : memref<4xf32>, memref<4xf32>) outs(%e : memref<4xf32>)
  return
}
// CHECK: linalg.copy ins(%{{.*}} : memref<4xf64>) outs(%{{.*}} : memref<4xf32>)
// CHECK: linalg.select
// CHECK: linalg.max
