// A structured op's static shapes must agree through its indexing maps, as MLIR 22's
// verifier checks (xDSL's did not: a matmul of 4x3 by 4x3 ran in the interpreter, exit
// status 0, and the native build failed in mlir-opt-22 at a line of its build file).
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @matmul(%a: memref<4x3xf64>, %b: memref<4x3xf64>, %c: memref<4x3xf64>) {
  // expected-error@+1 {{'linalg.matmul': operand #1 has 4 elements in its dimension #0, where the other operands' shapes make the loops reach 3; give the operands shapes that agree}}
  linalg.matmul ins(%a, %b : memref<4x3xf64>, memref<4x3xf64>) outs(%c : memref<4x3xf64>)
  return
}

// -----

// No iterations over k (a is 4x0) cannot fill b's 4 rows.
func.func @empty_k(%a: memref<4x0xf64>, %b: memref<4x3xf64>, %c: memref<4x3xf64>) {
  // expected-error@+1 {{operand #1 has 4 elements in its dimension #0, where the other operands' shapes make the loops reach 0}}
  linalg.matmul ins(%a, %b : memref<4x0xf64>, memref<4x3xf64>) outs(%c : memref<4x3xf64>)
  return
}

// -----

// linalg.broadcast names each dimension it adds once (xDSL's verifier failed on this with
// an IndexError, an internal error of dhir-opt, dhir schedule and dhir run).
func.func @broadcast(%a: memref<4xf32>, %d: memref<2x4x3xf32>) {
  // expected-error@+1 {{'linalg.broadcast' names an added dimension twice (dimensions = [0, 0]): name each dimension of the init that the input lacks once}}
  linalg.broadcast ins(%a : memref<4xf32>) outs(%d : memref<2x4x3xf32>) dimensions = [0, 0]
  return
}

// -----

// CHECK-LABEL: func.func @agree
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK: linalg.conv_2d_nhwc_hwcf
// CHECK: linalg.matmul
func.func @agree(%a: memref<4x0xf64>, %b: memref<0x3xf64>, %c: memref<4x3xf64>,
                 %x: memref<1x8x5x1xf32>, %w: memref<3x3x1x1xf32>, %y: memref<1x6x3x1xf32>,
                 %d: memref<?x4xf64>, %e: memref<5x4xf64>, %f: memref<5x3xf64>,
                 %g: memref<4x3xf64>) {
  linalg.matmul ins(%a, %b : memref<4x0xf64>, memref<0x3xf64>) outs(%c : memref<4x3xf64>)
  linalg.matmul ins(%e, %c : memref<5x4xf64>, memref<4x3xf64>) outs(%f : memref<5x3xf64>)
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<1x8x5x1xf32>, memref<3x3x1x1xf32>) outs(%y : memref<1x6x3x1xf32>)
  linalg.matmul ins(%d, %g : memref<?x4xf64>, memref<4x3xf64>) outs(%c : memref<4x3xf64>)
  return
}
