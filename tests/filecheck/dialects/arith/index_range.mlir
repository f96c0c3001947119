// An index constant is a signed 64-bit integer, as MLIR 22's parser reads it (xDSL took
// any size: the interpreter ran with it, and the native build then failed in mlir-opt-22
// at a line of its build file).
// RUN: dhir-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @above() -> index {
  // expected-error@+1 {{'arith.constant': the index constant 9223372036854775808 is out of range: MLIR reads an index constant as a signed 64-bit integer, from -9223372036854775808 to 9223372036854775807}}
  %c = arith.constant 9223372036854775808 : index
  return %c : index
}

// -----

func.func @below() -> index {
  // expected-error@+1 {{the index constant -99999999999999999999 is out of range}}
  %c = arith.constant -99999999999999999999 : index
  return %c : index
}

// -----

// CHECK-LABEL: func.func @ends
// CHECK: arith.constant 9223372036854775807 : index
// CHECK: arith.constant -9223372036854775808 : index
func.func @ends() -> (index, index) {
  %hi = arith.constant 9223372036854775807 : index
  %lo = arith.constant -9223372036854775808 : index
  return %hi, %lo : index, index
}
