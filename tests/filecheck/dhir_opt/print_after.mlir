// --print-between-passes (or --mlir-print-ir-after-all) prints the IR after each pass
// on standard error; standard output keeps the result alone.
// RUN: dhir-opt %s -p 'cse,func.func(canonicalize)' --print-between-passes 2>&1 >/dev/null | filecheck %s
// RUN: dhir-opt %s -p 'cse,func.func(canonicalize)' --mlir-print-ir-after-all 2>/dev/null | filecheck %s --check-prefix=OUT

func.func @f() -> i32 {
  %a = arith.constant 1 : i32
  %b = arith.constant 1 : i32
  %c = arith.addi %a, %b : i32
  return %c : i32
}

// CHECK:      // -----// IR Dump After cse //----- //
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @f() -> i32 {
// CHECK-NEXT:     %a = arith.constant 1 : i32
// CHECK-NEXT:     %c = arith.addi %a, %a : i32
// CHECK:      // -----// IR Dump After canonicalize //----- //
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @f() -> i32 {
// CHECK-NEXT:     %c = arith.constant 2 : i32
// CHECK-NOT:  IR Dump

// OUT-NOT:  IR Dump
// OUT:      func.func @f() -> i32 {
// OUT-NEXT:   %c = arith.constant 2 : i32
