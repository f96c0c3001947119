// dhir-instrument times every task: its body is wrapped in dhir_rt_task_begin/end calls
// with the task's number in program order over the whole module (every function, every
// schedule). The calls take no memref, so the tasks' effects and dependences stay the same.
// RUN: dhir-opt %s -p dhir-instrument | filecheck %s
// RUN: dhir-opt %s -p dhir-instrument,dhir-instrument | filecheck %s
// RUN: dhir-opt %s -p dhir-instrument,dhir-annotate-dependences | filecheck %s --check-prefix=DEPS

// CHECK-LABEL: func.func @f
func.func @f(%a: memref<8xf32>, %b: memref<8xf32>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    // CHECK:      %fill = dhir.task %cpu, %a {
    // CHECK-NEXT:   %[[ID0:.*]] = arith.constant 0 : i64
    // CHECK-NEXT:   func.call @dhir_rt_task_begin(%[[ID0]]) : (i64) -> ()
    // CHECK-NEXT:   %x = arith.constant 1.000000e+00 : f32
    // CHECK-NEXT:   linalg.fill
    // CHECK-NEXT:   func.call @dhir_rt_task_end(%[[ID0]]) : (i64) -> ()
    // CHECK-NEXT: }
    // DEPS: %fill = dhir.task %cpu, %a attributes {dhir.id = 0 : i64, dhir.reads = array<i64: 0>, dhir.writes = array<i64: 0>, {{.*}}dhir.after = array<i64>}
    %fill = dhir.task %cpu, %a {
      %x = arith.constant 1.0 : f32
      linalg.fill ins(%x : f32) outs(%a : memref<8xf32>)
    }
    // An empty body is timed too.
    // CHECK:      %empty = dhir.task %cpu, %b {
    // CHECK-NEXT:   %[[ID1:.*]] = arith.constant 1 : i64
    // CHECK-NEXT:   func.call @dhir_rt_task_begin(%[[ID1]]) : (i64) -> ()
    // CHECK-NEXT:   func.call @dhir_rt_task_end(%[[ID1]]) : (i64) -> ()
    // CHECK-NEXT: }
    // DEPS: %empty = dhir.task %cpu, %b attributes {dhir.id = 1 : i64, dhir.reads = array<i64>, dhir.writes = array<i64>, {{.*}}dhir.after = array<i64>}
    %empty = dhir.task %cpu, %b {}
    // DEPS: %copy = dhir.task %cpu, %a, %b attributes {dhir.id = 2 : i64, dhir.reads = array<i64: 0>, dhir.writes = array<i64: 1>, {{.*}}dhir.after = array<i64: 0>}
    // CHECK: %copy = dhir.task %cpu, %a, %b {
    // CHECK:   func.call @dhir_rt_task_begin(%{{.*}}) : (i64) -> ()
    // CHECK:   memref.copy
    // CHECK:   func.call @dhir_rt_task_end(%{{.*}}) : (i64) -> ()
    %copy = dhir.task %cpu, %a, %b {
      memref.copy %a, %b : memref<8xf32> to memref<8xf32>
    }
  }
  return
}

// Numbers go on across functions, in the module's order.
// CHECK-LABEL: func.func @g
func.func @g(%a: memref<8xf32>) {
  dhir.schedule %a {
    // CHECK:      dhir.task target = "cpu", %a {
    // CHECK-NEXT:   %[[ID3:.*]] = arith.constant 3 : i64
    // CHECK-NEXT:   func.call @dhir_rt_task_begin(%[[ID3]]) : (i64) -> ()
    dhir.task target = "cpu", %a {}
  }
  return
}

// The runtime functions are declared once.
// CHECK:     func.func private @dhir_rt_task_begin(i64) -> ()
// CHECK-NOT: func.func private @dhir_rt_task_begin
// CHECK:     func.func private @dhir_rt_task_end(i64) -> ()
// CHECK-NOT: func.func private @dhir_rt_task_
