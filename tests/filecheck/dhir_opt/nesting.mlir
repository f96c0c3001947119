// A pipeline nested under op names runs on each such op directly inside the module.
// RUN: dhir-opt %s -p 'builtin.module(builtin.module(canonicalize))' | filecheck %s --check-prefix=INNER
// RUN: dhir-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' | filecheck %s --check-prefix=FUNCS
// RUN: dhir-opt %s -p 'func.func(canonicalize)' | filecheck %s --check-prefix=FUNCS
// RUN: not dhir-opt %s -p 'builtin.module(func.func(func.func(cse)))' 2>&1 | filecheck %s --check-prefix=DEEP
// RUN: not dhir-opt %s -p 'func.func(cse' 2>&1 | filecheck %s --check-prefix=OPEN

func.func @outer() -> i32 {
  %a = arith.constant 1 : i32
  %b = arith.addi %a, %a : i32
  // A function pass sees its function alone, yet the call is kept and verified after.
  %c = func.call @other() : () -> i32
  return %b : i32
}
builtin.module {
  func.func @inner() -> i32 {
    %a = arith.constant 1 : i32
    %b = arith.addi %a, %a : i32
    return %b : i32
  }
}
func.func @other() -> i32 {
  %a = arith.constant 3 : i32
  %b = arith.addi %a, %a : i32
  return %b : i32
}

// Only the nested module is canonicalized.
// INNER:      func.func @outer() -> i32 {
// INNER-NEXT:   %a = arith.constant 1 : i32
// INNER-NEXT:   %b = arith.addi %a, %a : i32
// INNER:      func.func @inner() -> i32 {
// INNER-NEXT:   %b = arith.constant 2 : i32
// INNER:      func.func @other() -> i32 {
// INNER-NEXT:   %a = arith.constant 3 : i32
// INNER-NEXT:   %b = arith.addi %a, %a : i32

// Only the functions directly in the module, in their places.
// FUNCS:      func.func @outer() -> i32 {
// FUNCS-NEXT:   %b = arith.constant 2 : i32
// FUNCS-NEXT:   %c = func.call @other() : () -> i32
// FUNCS:      func.func @inner() -> i32 {
// FUNCS-NEXT:   %a = arith.constant 1 : i32
// FUNCS-NEXT:   %b = arith.addi %a, %a : i32
// FUNCS:      func.func @other() -> i32 {
// FUNCS-NEXT:   %b = arith.constant 6 : i32

// DEEP: error: bad pass pipeline 'builtin.module(func.func(func.func(cse)))': 'func.func(...)' is nested under 'func.func'; passes nest under an op name only directly inside builtin.module(...)
// OPEN: error: bad pass pipeline 'func.func(cse': missing ')' at the end
