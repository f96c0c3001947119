// What xDSL cannot represent yet (a semi-affine map: a product of two symbols) is a
// located error, not an internal one.
// RUN: dhir-opt %s --verify-diagnostics
// RUN: not dhir-opt %s 2>&1 | filecheck %s

func.func @f(%a: index, %b: index) -> index {
  // expected-error@+1 {{cannot represent this yet (Multiplication with non-constant (semi-affine)}}
  %i = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%a, %b]
  return %i : index
}
// CHECK: semi_affine.mlir:8:{{[0-9]+}}: error: xDSL, which dhir reads MLIR with, cannot represent this yet
// CHECK-NOT: internal error
