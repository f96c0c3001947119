// Round-robin placement (task k -> rank k mod N) keeps ranks the user gave.
// RUN: dhir-opt %s -p 'dhir-place{ranks=3}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-place{ranks=2}' --verify-diagnostics
// RUN: not dhir-opt %s -p 'dhir-place{ranks=2}' 2>&1 | filecheck %s --check-prefix=TOO-FEW

func.func @f(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    // CHECK: %t0 = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64}
    %t0 = dhir.task %cpu, %a {}
    // CHECK: %t1 = dhir.task %cpu, %a attributes {dhir.rank = 1 : i64}
    %t1 = dhir.task %cpu, %a {}
    // CHECK: %t2 = dhir.task %cpu, %a attributes {dhir.rank = 2 : i64}
    // expected-error@+1 {{task is placed on rank 2 (dhir.rank), but the program runs on 2 ranks (ranks 0..1)}}
    %t2 = dhir.task %cpu, %a attributes {dhir.rank = 2 : i64} {}
    // CHECK: %t3 = dhir.task %cpu, %a attributes {dhir.rank = 0 : i64}
    %t3 = dhir.task %cpu, %a {}
  }
  return
}
// TOO-FEW: {{.*}}place.mlir:[[# @LINE - 6]]:11: error: task is placed on rank 2 (dhir.rank), but the program runs on 2 ranks (ranks 0..1)
