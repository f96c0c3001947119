// --mlir-timing (or --time-passes) reports each pass's time on standard error.
// RUN: dhir-opt %s -p 'cse,func.func(canonicalize)' --mlir-timing 2>&1 >/dev/null | filecheck %s
// RUN: dhir-opt %s -p 'cse' --time-passes 2>/dev/null | filecheck %s --check-prefix=OUT

func.func @f() -> i32 {
  %a = arith.constant 1 : i32
  return %a : i32
}

// CHECK:      ... Execution time report ...
// CHECK:      Total Execution Time: {{[0-9.]+}} seconds
// CHECK:      ----Wall Time----  ----Name----
// CHECK-NEXT: {{[0-9.]+}} ({{ *[0-9.]+}}%)  parse
// CHECK-NEXT: {{[0-9.]+}} ({{ *[0-9.]+}}%)  cse
// CHECK-NEXT: {{[0-9.]+}} ({{ *[0-9.]+}}%)  'func.func' pipeline
// CHECK-NEXT: {{[0-9.]+}} ({{ *[0-9.]+}}%)    canonicalize
// CHECK-NEXT: {{[0-9.]+}} ({{ *[0-9.]+}}%)  verify
// CHECK-NEXT: {{[0-9.]+}} ({{ *[0-9.]+}}%)  print
// CHECK-NEXT: {{[0-9.]+}} (100.0%)  Total

// OUT-NOT: Execution time
// OUT:     func.func @f
