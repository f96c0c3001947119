// The program's own functions that only host code calls run on every rank: their calls
// of the user's code are agreed inside them, as the entry's are. One that a task calls
// too runs on one rank there: its calls are left alone, and host code's calls of it take
// rank 0's results; one that calls no user code, or only dhir's runtime, is left alone.
// RUN: dhir-opt %s -p 'dhir-agree-calls{ranks=2}' | filecheck %s

func.func private @steps() -> i64
func.func private @dhir_rt_comm_size() -> i32

// CHECK-LABEL: func.func @count() -> index
// CHECK-NEXT:    func.call @nested() : () -> i64
// CHECK-NEXT:    arith.index_cast
func.func @count() -> index {
  %n = func.call @nested() : () -> i64
  %i = arith.index_cast %n : i64 to index
  return %i : index
}
// CHECK-LABEL: func.func @nested() -> i64
// CHECK-NEXT:    %[[N:.*]] = func.call @steps() : () -> i64
// CHECK-NEXT:    func.call @dhir_rt_agree(%[[N]]) : (i64) -> i64
func.func @nested() -> i64 {
  %n = func.call @steps() : () -> i64
  return %n : i64
}

// CHECK-LABEL: func.func @shared() -> i64
// CHECK-NEXT:    func.call @steps() : () -> i64
// CHECK-NEXT:    func.return
func.func @shared() -> i64 {
  %n = func.call @steps() : () -> i64
  return %n : i64
}

// CHECK-LABEL: func.func @size() -> i32
// CHECK-NEXT:    func.call @dhir_rt_comm_size() : () -> i32
// CHECK-NEXT:    func.return
func.func @size() -> i32 {
  %n = func.call @dhir_rt_comm_size() : () -> i32
  return %n : i32
}

// CHECK-LABEL: func.func @main
// CHECK-NEXT:    %{{.*}} = func.call @count() : () -> index
// CHECK-NEXT:    %[[S:.*]] = func.call @shared() : () -> i64
// CHECK-NEXT:    %[[SA:.*]] = func.call @dhir_rt_agree(%[[S]]) : (i64) -> i64
// CHECK-NEXT:    func.call @size() : () -> i32
// CHECK-NEXT:    arith.addi %[[SA]], %[[SA]] : i64
// CHECK:         dhir.task
// CHECK-NEXT:      func.call @shared() : () -> i64
// CHECK-NEXT:      memref.store %{{.*}}, %{{.*}}[%{{.*}}]
// CHECK:       func.func private @dhir_rt_agree(i64) -> i64
func.func @main(%a: memref<4xi64>) {
  %n = func.call @count() : () -> index
  %s = func.call @shared() : () -> i64
  %z = func.call @size() : () -> i32
  %twice = arith.addi %s, %s : i64
  %c0 = arith.constant 0 : index
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    %task = dhir.task %cpu, %a {
      %x = func.call @shared() : () -> i64
      memref.store %x, %a[%c0] : memref<4xi64>
    }
  }
  memref.store %twice, %a[%c0] : memref<4xi64>
  return
}
