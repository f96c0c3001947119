// Host code's calls of the user's code take rank 0's results on every rank: each scalar
// result through dhir_rt_agree as its 64 bits. A call in a task (one rank runs it) and
// dhir's own runtime calls (each rank's answer by design) are left alone; on one rank
// nothing changes.
// RUN: dhir-opt %s -p 'dhir-agree-calls{ranks=2}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-agree-calls{ranks=1}' | filecheck %s --check-prefix=ONE

func.func private @steps() -> index
func.func private @more(i64) -> i1
func.func private @weight() -> f32
func.func private @dhir_rt_comm_size() -> i32

// CHECK-LABEL: func.func @main
// CHECK:         %[[N:.*]] = func.call @steps() : () -> index
// CHECK-NEXT:    %[[N64:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK-NEXT:    %[[N0:.*]] = func.call @dhir_rt_agree(%[[N64]]) : (i64) -> i64
// CHECK-NEXT:    %[[NA:.*]] = arith.index_cast %[[N0]] : i64 to index
// CHECK:         %[[W:.*]] = func.call @weight() : () -> f32
// CHECK-NEXT:    %[[WB:.*]] = arith.bitcast %[[W]] : f32 to i32
// CHECK-NEXT:    %[[WE:.*]] = arith.extui %[[WB]] : i32 to i64
// CHECK-NEXT:    %[[W0:.*]] = func.call @dhir_rt_agree(%[[WE]]) : (i64) -> i64
// CHECK-NEXT:    %[[WT:.*]] = arith.trunci %[[W0]] : i64 to i32
// CHECK-NEXT:    %[[WA:.*]] = arith.bitcast %[[WT]] : i32 to f32
// CHECK:         func.call @dhir_rt_comm_size() : () -> i32
// CHECK-NOT:     dhir_rt_agree
// CHECK:         scf.for %{{.*}} = %{{.*}} to %[[NA]]
// CHECK:           %[[GO:.*]] = func.call @more(%{{.*}}) : (i64) -> i1
// CHECK-NEXT:      %[[GE:.*]] = arith.extui %[[GO]] : i1 to i64
// CHECK-NEXT:      %[[G0:.*]] = func.call @dhir_rt_agree(%[[GE]]) : (i64) -> i64
// CHECK-NEXT:      %[[GA:.*]] = arith.trunci %[[G0]] : i64 to i1
// CHECK-NEXT:      scf.condition(%[[GA]])
// CHECK:           dhir.task
// CHECK-NEXT:        func.call @more(%{{.*}}) : (i64) -> i1
// CHECK-NOT:         dhir_rt_agree
// CHECK:         arith.mulf %[[WA]], %[[WA]] : f32
// CHECK:       func.func private @dhir_rt_agree(i64) -> i64
// ONE-NOT: dhir_rt_agree
func.func @main(%a: memref<4xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0 : i64
  %n = func.call @steps() : () -> index
  %w = func.call @weight() : () -> f32
  %size = func.call @dhir_rt_comm_size() : () -> i32
  scf.for %t = %c0 to %n step %c1 {
    %end = scf.while (%s = %zero) : (i64) -> i64 {
      %go = func.call @more(%s) : (i64) -> i1
      scf.condition(%go) %s : i64
    } do {
    ^bb0(%s: i64):
      dhir.schedule %a {
        %cpu = dhir.target {kind = "cpu"}
        %task = dhir.task %cpu, %a {
          %x = func.call @more(%s) : (i64) -> i1
          %y = arith.extui %x : i1 to i64
          memref.store %y, %a[%c0] : memref<4xi64>
        }
      }
      %one = arith.constant 1 : i64
      %next = arith.addi %s, %one : i64
      scf.yield %next : i64
    }
  }
  %sq = arith.mulf %w, %w : f32
  return
}
